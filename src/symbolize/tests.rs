//! Fixtures are small C and C++ shared objects compiled with gcc/g++ into
//! a temporary directory, then split, stripped and copied the ways
//! distributions ship them, and dlopen'ed into the test process.
use super::debug_files::{build_id_path, crc32, debuglink_candidates};
use super::jit::{parse_anon_exec, parse_perf_map};
use super::*;
use std::ffi::{CString, c_void};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

const C_SRC: &str = r#"#include <stdlib.h>
volatile int hl_sink_v;
void *volatile hl_last_ret;
__attribute__((noinline)) void hl_sink(int x) {
    hl_last_ret = __builtin_return_address(0);
    hl_sink_v += x;
}
static inline __attribute__((always_inline)) int hl_inlined(int x) {
    for (int i = 0; i < x; i++)
        hl_sink(i); /* LINE_INLINE */
    return x * 3;
}
#ifdef OTHER_BUILD
int hl_other(void) { return 42; }
#endif
__attribute__((noinline)) int hl_outer(int x) {
    return hl_inlined(x) + 1; /* LINE_OUTER */
}
static __attribute__((noinline)) int hl_hidden(int x) {
    hl_sink(x);
    return x + 7;
}
int hl_call_hidden(int x) { return hl_hidden(x) * 2; }
void *hl_hidden_addr(void) { return (void *)&hl_hidden; }
static int hl_cmp(const void *a, const void *b) {
    hl_last_ret = __builtin_return_address(0);
    return *(const int *)a - *(const int *)b;
}
void hl_qsort(void) {
    int v[2] = {2, 1};
    qsort(v, 2, sizeof(int), hl_cmp); /* glibc calls back into hl_cmp */
}
"#;

const CXX_SRC: &str = r#"#include <vector>
namespace hl {
template <typename T> __attribute__((noinline)) T tsum(const std::vector<T> &v) {
    T s = 0;
    for (auto x : v) s += x; /* LINE_TSUM */
    return s;
}
}
extern "C" void *hl_tsum_addr() { return (void *)&hl::tsum<int>; }
extern "C" void *hl_push_back_addr() {
    union { void (std::vector<int>::*m)(const int &); void *p[2]; } u;
    u.m = &std::vector<int>::push_back;
    return u.p[0];
}
"#;

/// Serializes dlopen/dlclose so that no test loads a library into the
/// range the dlclose test just freed.
static DL_LOCK: Mutex<()> = Mutex::new(());

struct Lib {
    path: PathBuf,
    handle: usize,
}

impl Lib {
    fn sym(&self, name: &str) -> u64 {
        let c = CString::new(name).unwrap();
        // SAFETY: handle is a live dlopen handle; name is NUL-terminated.
        let p = unsafe { libc::dlsym(self.handle as *mut c_void, c.as_ptr()) };
        assert!(!p.is_null(), "{name} missing from {:?}", self.path);
        p as u64
    }
    fn call_ptr(&self, name: &str) -> u64 {
        // SAFETY: the fixture's function takes no argument and returns a pointer.
        let f: extern "C" fn() -> *mut c_void =
            unsafe { std::mem::transmute(self.sym(name) as usize) };
        f() as u64
    }
    /// Run `f(1)` and return the return address `hl_sink`/`hl_cmp` saw.
    fn ret_of(&self, name: &str) -> u64 {
        let _g = DL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the fixture's functions named here take an int (extra
        // argument ignored by `hl_qsort`) and return an int or nothing.
        let f: extern "C" fn(i32) -> i32 = unsafe { std::mem::transmute(self.sym(name) as usize) };
        f(1);
        // SAFETY: hl_last_ret is a pointer-sized global of the fixture.
        unsafe { *(self.sym("hl_last_ret") as *const u64) }
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Fixtures {
    dir: PathBuf,
    c_build_id: Vec<u8>,
    cxx_build_id: Vec<u8>,
}

/// Build every fixture once per test process.
fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
            let dir = crate::fresh_test_dir("sym-test");
            std::fs::create_dir(dir.join(".debug")).unwrap();
            std::fs::write(dir.join("fixture.c"), C_SRC).unwrap();
            std::fs::write(dir.join("fixture.cc"), CXX_SRC).unwrap();
            let sh = |s: &str| run(Command::new("sh").arg("-c").arg(s).current_dir(&dir));
            sh("gcc -g -O1 -shared -fPIC -Wl,--build-id -o full.so fixture.c");
            sh("gcc -g -O1 -shared -fPIC -Wl,--build-id -DOTHER_BUILD -o other.so fixture.c");
            sh("g++ -g -O1 -shared -fPIC -Wl,--build-id -o cxx.so fixture.cc");
            sh("strip --strip-all -o cxx-stripped.so cxx.so");
            // Split debug info, found by .gnu_debuglink next to the binary.
            sh("objcopy --only-keep-debug full.so full.debug");
            sh("objcopy --strip-debug full.so nodebug.so");
            sh("cp full.debug linked.so.debug && objcopy --add-gnu-debuglink=linked.so.debug nodebug.so linked.so");
            // ... in .debug/.
            sh("cp full.debug .debug/dotdebug.so.debug && cd .debug && objcopy --add-gnu-debuglink=dotdebug.so.debug ../nodebug.so ../dotdebug.so");
            // ... a link whose CRC does not match the file found.
            sh("cp full.debug badcrc.so.debug && objcopy --add-gnu-debuglink=badcrc.so.debug nodebug.so badcrc.so");
            sh("objcopy --only-keep-debug other.so badcrc.so.debug");
            // Found only by build id (no debuglink) under dbg/.build-id/.
            sh("cp nodebug.so bid.so");
            // Only .dynsym left.
            sh("strip --strip-all -o stripped.so full.so");
            sh("objcopy --compress-debug-sections=zlib full.so zdebug.so");
            // zstd (ELFCOMPRESS_ZSTD, what newer toolchains write): this
            // machine's objcopy has no zstd, so its zlib sections are
            // recompressed here.
            zlib_sections_to_zstd(&dir.join("zdebug.so"), &dir.join("zstd.so"));
            sh("cp full.so closeme.so && cp full.so closeme2.so");

            let build_id = |p: &str| {
                let data = std::fs::read(dir.join(p)).unwrap();
                let obj = object::File::parse(&*data).unwrap();
                obj.build_id().unwrap().unwrap().to_vec()
            };
            let c_build_id = build_id("full.so");
            let cxx_build_id = build_id("cxx.so");
            let bid_path = build_id_path(&dir.join("dbg"), &c_build_id).unwrap();
            std::fs::create_dir_all(bid_path.parent().unwrap()).unwrap();
            std::fs::copy(dir.join("full.debug"), &bid_path).unwrap();
            Fixtures { dir, c_build_id, cxx_build_id }
        })
}

/// Copies an ELF64 little-endian file, its zlib-compressed sections
/// (SHF_COMPRESSED, ELFCOMPRESS_ZLIB) recompressed with zstd: the new
/// data appended at the end, the section headers pointed at it.
fn zlib_sections_to_zstd(src: &Path, dst: &Path) {
    use std::io::Read;
    const SHF_COMPRESSED: u64 = 0x800;
    let mut f = std::fs::read(src).unwrap();
    let u16_at = |f: &[u8], o: usize| u16::from_le_bytes(f[o..o + 2].try_into().unwrap());
    let u32_at = |f: &[u8], o: usize| u32::from_le_bytes(f[o..o + 4].try_into().unwrap());
    let u64_at = |f: &[u8], o: usize| u64::from_le_bytes(f[o..o + 8].try_into().unwrap());
    assert_eq!(&f[..6], b"\x7fELF\x02\x01", "ELF64 little-endian");
    let shoff = u64_at(&f, 0x28) as usize;
    let shentsize = u16_at(&f, 0x3a) as usize;
    let shnum = u16_at(&f, 0x3c) as usize;
    let mut done = 0;
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        if u64_at(&f, sh + 8) & SHF_COMPRESSED == 0 {
            continue;
        }
        let (off, size) = (
            u64_at(&f, sh + 0x18) as usize,
            u64_at(&f, sh + 0x20) as usize,
        );
        // Elf64_Chdr: ch_type, ch_reserved, ch_size, ch_addralign.
        assert_eq!(u32_at(&f, off), 1, "ELFCOMPRESS_ZLIB");
        let mut plain = Vec::new();
        flate2::read::ZlibDecoder::new(&f[off + 24..off + size])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain.len() as u64, u64_at(&f, off + 8));
        let packed = ruzstd::encoding::compress_to_vec(
            &plain[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let mut chdr = f[off..off + 24].to_vec();
        chdr[..4].copy_from_slice(&2u32.to_le_bytes()); // ELFCOMPRESS_ZSTD
        while !f.len().is_multiple_of(8) {
            f.push(0);
        }
        let new_off = f.len();
        f.extend_from_slice(&chdr);
        f.extend_from_slice(&packed);
        let new_size = f.len() - new_off;
        f[sh + 0x18..sh + 0x20].copy_from_slice(&(new_off as u64).to_le_bytes());
        f[sh + 0x20..sh + 0x28].copy_from_slice(&(new_size as u64).to_le_bytes());
        done += 1;
    }
    assert!(done >= 3, "{done} compressed sections in {src:?}");
    std::fs::write(dst, f).unwrap();
}

fn open(name: &str) -> Lib {
    let f = fixtures();
    let path = f.dir.join(name);
    let _g = DL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let c = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a path to a fixture library whose constructors do nothing.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen {path:?} failed");
    modules::refresh();
    Lib {
        path,
        handle: handle as usize,
    }
}

fn line_of(src: &str, marker: &str) -> u32 {
    src.lines().position(|l| l.contains(marker)).unwrap() as u32 + 1
}

fn sym_with(dirs: Vec<PathBuf>) -> Symbolizer {
    Symbolizer::new(SymConfig {
        debug_dirs: dirs,
        demangle: true,
    })
}

fn default_sym() -> Symbolizer {
    sym_with(vec![PathBuf::from("/usr/lib/debug")])
}

/// The module+offset name gdb and perf would print: file offset of `addr`.
fn file_offset_name(lib: &Lib, addr: u64) -> String {
    // SAFETY: dladdr only reads the loader's tables; `info` is plain data.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert!(unsafe { libc::dladdr(addr as *const c_void, &mut info) } != 0);
    // In these fixtures the text segment's file offset equals its vaddr.
    format!(
        "{}+0x{:x}",
        lib.path.file_name().unwrap().to_str().unwrap(),
        addr - info.dli_fbase as u64
    )
}

/// Asserts the inline chain of `hl_sink`'s call site inside `hl_outer`.
fn check_inline_chain(lib: &Lib, s: &mut Symbolizer) {
    let ret = lib.ret_of("hl_outer");
    let (mapping, frames) = s.lookup(ret - 1);
    let names: Vec<&str> = frames.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(names, ["hl_inlined", "hl_outer"], "{frames:#?}");
    assert_eq!(
        frames[0].line,
        Some(line_of(C_SRC, "LINE_INLINE")),
        "{frames:#?}"
    );
    assert_eq!(
        frames[1].line,
        Some(line_of(C_SRC, "LINE_OUTER")),
        "{frames:#?}"
    );
    assert!(
        frames
            .iter()
            .all(|f| f.file.as_deref().is_some_and(|p| p.ends_with("fixture.c"))),
        "{frames:#?}"
    );
    let m = &s.mappings()[mapping.expect("a mapping")];
    assert_eq!(Path::new(&m.path), lib.path);
    assert!(m.start <= ret && ret < m.end);
    assert_eq!(m.build_id, hex(&fixtures().c_build_id));
}

#[test]
fn own_dwarf_gives_inline_frames_and_lines() {
    let lib = open("full.so");
    check_inline_chain(&lib, &mut default_sym());
}

#[test]
fn compressed_debug_sections() {
    let lib = open("zdebug.so");
    check_inline_chain(&lib, &mut default_sym());
}

#[test]
fn zstd_compressed_debug_sections() {
    use object::ObjectSection;
    let data = std::fs::read(fixtures().dir.join("zstd.so")).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let info = obj.section_by_name(".debug_info").unwrap();
    assert_eq!(
        info.compressed_data().unwrap().format,
        object::CompressionFormat::Zstandard
    );
    let lib = open("zstd.so");
    check_inline_chain(&lib, &mut default_sym());
}

#[test]
fn debuglink_next_to_binary_and_in_dot_debug() {
    for name in ["linked.so", "dotdebug.so"] {
        let lib = open(name);
        check_inline_chain(&lib, &mut sym_with(vec![]));
    }
}

#[test]
fn debuglink_in_debug_dir_mirror() {
    let f = fixtures();
    let mirror = f.dir.join("mirror");
    let under = mirror.join(f.dir.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&under).unwrap();
    std::fs::copy(f.dir.join("full.debug"), under.join("mirrored.so.debug")).unwrap();
    run(Command::new("objcopy")
        .arg("--add-gnu-debuglink=mirrored.so.debug")
        .arg(f.dir.join("nodebug.so"))
        .arg(f.dir.join("mirrored.so"))
        .current_dir(&under));
    let lib = open("mirrored.so");
    check_inline_chain(&lib, &mut sym_with(vec![mirror]));
}

#[test]
fn debuglink_with_wrong_crc_is_ignored() {
    let lib = open("badcrc.so");
    let mut s = sym_with(vec![]);
    let (_, frames) = s.lookup(lib.ret_of("hl_outer") - 1);
    // No DWARF: the .symtab name, no inline frame, no line.
    assert_eq!(
        *frames,
        [Frame {
            function: "hl_outer".into(),
            file: None,
            line: None
        }]
    );
}

#[test]
fn build_id_directory() {
    let f = fixtures();
    let lib = open("bid.so");
    check_inline_chain(
        &lib,
        &mut sym_with(vec![PathBuf::from("/nonexistent"), f.dir.join("dbg")]),
    );
    // Without the directory there are no lines.
    let (_, frames) = sym_with(vec![]).lookup(lib.ret_of("hl_outer") - 1);
    assert_eq!(frames[0].line, None);
}

#[test]
fn stripped_library_uses_dynsym_sizes_and_file_offsets() {
    let lib = open("stripped.so");
    let mut s = default_sym();
    let outer = lib.ret_of("hl_outer") - 1;
    assert_eq!(
        *s.lookup(outer).1,
        [Frame {
            function: "hl_outer".into(),
            file: None,
            line: None
        }]
    );
    // hl_hidden is static: not in .dynsym. Its code must not take the
    // name of the exported function laid out before it.
    let hidden = lib.call_ptr("hl_hidden_addr") + 1;
    let (mapping, frames) = s.lookup(hidden);
    assert!(mapping.is_some());
    assert_eq!(frames.len(), 1);
    assert_eq!(
        frames[0].function,
        file_offset_name(&lib, hidden),
        "{frames:#?}"
    );
    let ret = lib.ret_of("hl_call_hidden") - 1; // inside hl_hidden
    assert_eq!(s.lookup(ret).1[0].function, file_offset_name(&lib, ret));
}

#[test]
fn cxx_template_names_are_demangled_without_params() {
    let lib = open("cxx.so");
    let stripped = open("cxx-stripped.so");
    for lib in [&lib, &stripped] {
        let mut s = default_sym();
        let tsum = lib.call_ptr("hl_tsum_addr") + 1;
        for (addr, name) in [
            (tsum, "hl::tsum<int>"),
            (
                lib.call_ptr("hl_push_back_addr") + 1,
                "std::vector<int, std::allocator<int> >::push_back",
            ),
        ] {
            let frames = s.lookup(addr).1;
            assert_eq!(frames.last().unwrap().function, name, "{frames:#?}");
        }
        let mut raw = Symbolizer::new(SymConfig {
            debug_dirs: vec![],
            demangle: false,
        });
        let f = raw.lookup(tsum).1;
        assert!(
            f.last().unwrap().function.starts_with("_ZN2hl4tsumIiEE"),
            "{f:#?}"
        );
    }
    let frames = default_sym().lookup(lib.call_ptr("hl_tsum_addr") + 1).1;
    assert!(
        frames
            .last()
            .unwrap()
            .file
            .as_deref()
            .unwrap()
            .ends_with("fixture.cc")
    );
    let _ = fixtures().cxx_build_id.len();
}

/// The outermost of `frames` (the function the address is in) is one of
/// `names`, in a file whose name ends with `file`.
fn assert_outermost_in(frames: &[Frame], names: [&str; 2], file: &str) {
    let last = frames.last().unwrap();
    assert!(names.contains(&last.function.as_str()), "{frames:#?}");
    assert!(
        last.file.as_deref().is_some_and(|f| f.ends_with(file)),
        "{frames:#?}"
    );
}

#[test]
fn libc_through_build_id_debug_file() {
    let mut s = default_sym();
    let malloc = libc::malloc as *const () as u64;
    let frames = s.lookup(malloc + 1).1;
    assert_outermost_in(&frames, ["__libc_malloc", "malloc"], "malloc.c");
    assert!(frames.last().unwrap().line.is_some());

    // A real return address inside glibc: qsort calling the fixture's
    // comparison function, as glibc code calling malloc would appear.
    let lib = open("full.so");
    let ret = lib.ret_of("hl_qsort");
    let frames = s.lookup(ret - 1).1;
    let file = frames[0].file.as_deref().unwrap_or("");
    assert!(
        file.ends_with("msort.c") || file.ends_with("qsort.c"),
        "{frames:#?}"
    );
    assert!(
        !frames.last().unwrap().function.contains('+'),
        "{frames:#?}"
    );

    // The return addresses of every call strdup makes (malloc, strlen,
    // memcpy): glibc code calling malloc, named from libc6-dbg.
    let strdup = libc::strdup as *const () as u64;
    // SAFETY: dladdr1 only reads the loader's tables into plain data.
    let size = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        let mut sym: *const libc::Elf64_Sym = std::ptr::null();
        let ok = libc::dladdr1(
            strdup as *const c_void,
            &mut info,
            (&mut sym as *mut *const libc::Elf64_Sym).cast(),
            1, // RTLD_DL_SYMENT (glibc <dlfcn.h>)
        );
        assert!(ok != 0 && !sym.is_null());
        (*sym).st_size
    };
    // SAFETY: strdup's own code, `size` bytes long, mapped read-only.
    let code = unsafe { std::slice::from_raw_parts(strdup as *const u8, size as usize) };
    let calls: Vec<u64> = (0..code.len().saturating_sub(4))
        .filter(|&i| code[i] == 0xe8)
        .map(|i| strdup + i as u64 + 5)
        .collect();
    assert!(!calls.is_empty());
    for ret in calls {
        let frames = s.lookup(ret - 1).1;
        assert_outermost_in(&frames, ["__strdup", "strdup"], "strdup.c");
    }

    // Without libc6-dbg: a .dynsym name, no file.
    let frames = sym_with(vec![]).lookup(malloc + 1).1;
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].file, None);
    assert!(
        matches!(frames[0].function.as_str(), "__libc_malloc" | "malloc"),
        "{frames:#?}"
    );
}

/// A dump prefetches its addresses module by module, each module's
/// `.debug_info` holding only the units its addresses fall in
/// (`sparse.rs`). The answers must be the ones the whole debug info
/// gives: libc (libc6-dbg, zlib-compressed sections, 2,000 units),
/// a library with its own uncompressed DWARF, ones with zlib and zstd
/// compressed sections, one with only `.dynsym`, and C++ templates.
#[test]
fn prefetch_answers_as_the_whole_debug_info_does() {
    let full = open("full.so");
    let z = open("zdebug.so");
    let zs = open("zstd.so");
    let cxx = open("cxx.so");
    let stripped = open("stripped.so");
    modules::refresh();
    let libc_mod = modules::find(libc::malloc as *const () as u64).unwrap();
    let mut addrs: Vec<u64> = Vec::new();
    for &(start, end, _) in &libc_mod.ranges {
        addrs.extend((0..300u64).map(|i| start + (end - start) * i / 300));
    }
    let strdup = libc::strdup as *const () as u64;
    addrs.extend((0..64).map(|i| strdup + i));
    for lib in [&full, &z, &zs, &stripped] {
        addrs.push(lib.ret_of("hl_outer") - 1);
        addrs.push(lib.ret_of("hl_qsort") - 1);
        addrs.push(lib.call_ptr("hl_hidden_addr") + 1);
    }
    addrs.push(cxx.call_ptr("hl_tsum_addr") + 1);
    addrs.push(cxx.call_ptr("hl_push_back_addr") + 1);
    addrs.push(0x10); // in no module

    let mut whole = default_sym();
    let expected: Vec<_> = addrs.iter().map(|&a| whole.lookup(a)).collect();
    let mut part = default_sym();
    let mut polls = 0;
    part.prefetch(&addrs, &mut || polls += 1);
    assert!(polls > 0);
    let opened = part.files_opened();
    for (&a, e) in addrs.iter().zip(&expected) {
        assert_eq!(&part.lookup(a), e, "address {a:#x}");
    }
    // Every answer came from the prefetch: no file opened since.
    assert_eq!(part.files_opened(), opened);
    // ... which dropped each module's debug information after use.
    assert!(part.states.iter().all(Option::is_none));
    let with_lines = expected.iter().filter(|e| e.1[0].line.is_some()).count();
    assert!(with_lines > 300, "{with_lines} answers with lines");
}

/// libc's debug info for a handful of addresses: the units they fall
/// in are parsed, the other 2,000 hidden (their abbreviations and line
/// program headers were 20 MiB of the first dump's peak RSS).
#[test]
fn a_few_addresses_read_a_few_units() {
    modules::refresh();
    let m = modules::find(libc::malloc as *const () as u64).unwrap();
    let path = build_id_path(Path::new("/usr/lib/debug"), &m.build_id).unwrap();
    let probes: Vec<u64> = {
        let mut p: Vec<u64> = [
            libc::malloc as *const () as u64,
            libc::strdup as *const () as u64,
        ]
        .iter()
        .map(|a| a - m.bias + 1)
        .collect();
        p.sort_unstable();
        p
    };
    let mut n = 0;
    let d = Dwarf::load(&path, None, Some(&probes), &mut n, &mut || {}).expect("libc6-dbg");
    let (kept, hidden) = d.units;
    assert!((1..=8).contains(&kept), "{kept} units kept");
    // Hidden as they stream in, then the rest, past the last unit
    // `.debug_aranges` names for them, never read.
    assert!(hidden > 500, "{hidden} units hidden");
    assert!(d.unread > 0, "all of .debug_info read");
    for &p in &probes {
        let mut frames = d.find_frames(p).unwrap();
        let f = frames.next().unwrap().expect("a frame");
        assert!(f.location.and_then(|l| l.line).is_some());
    }
    let whole = Dwarf::load(&path, None, None, &mut n, &mut || {}).unwrap();
    assert_eq!(whole.units, (0, 0));
}

/// What every PHP (and most C) stack ends in: libc's start-up frames.
/// Their unit is near the start of libc's 5.6 MiB `.debug_info`, and
/// `.debug_aranges` names it, so the rest of the section is never
/// decompressed (it was most of a PHP process's exit dump); the frames
/// (names, inline chains, files and lines) are the ones the whole
/// section gives.
#[test]
fn libc_start_frames_stop_reading_after_their_unit() {
    modules::refresh();
    let m = modules::find(libc::malloc as *const () as u64).unwrap();
    let path = build_id_path(Path::new("/usr/lib/debug"), &m.build_id).unwrap();
    let start = |name: &std::ffi::CStr| {
        // SAFETY: dlsym of a libc symbol by a NUL-terminated name.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) } as u64;
        assert_ne!(p, 0, "{name:?}");
        p - m.bias
    };
    let main = start(c"__libc_start_main");
    // Return addresses inside __libc_start_main and the static
    // __libc_start_call_main just before it.
    let mut probes: Vec<u64> = (1..40).map(|i| main + i * 4).collect();
    probes.extend((1..40).map(|i| main - i * 2));
    probes.sort_unstable();
    let mut n = 0;
    let part = Dwarf::load(&path, None, Some(&probes), &mut n, &mut || {}).expect("libc6-dbg");
    let whole = Dwarf::load(&path, None, None, &mut n, &mut || {}).unwrap();
    assert!(
        part.unread > 4 << 20,
        "{} bytes of .debug_info left unread",
        part.unread
    );
    assert_eq!(whole.unread, 0);
    let frames = |d: &Dwarf, p: u64| -> Vec<(Option<String>, Option<String>, Option<u32>)> {
        let mut out = Vec::new();
        let mut it = d.find_frames(p).unwrap();
        while let Ok(Some(f)) = it.next() {
            out.push((
                f.function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok())
                    .map(|n| n.into_owned()),
                f.location.as_ref().and_then(|l| l.file).map(str::to_owned),
                f.location.as_ref().and_then(|l| l.line),
            ));
        }
        out
    };
    let mut named = 0;
    for &p in &probes {
        let (a, b) = (frames(&part, p), frames(&whole, p));
        assert_eq!(a, b, "probe {p:#x}");
        named += usize::from(b.iter().any(|f| f.0.is_some() && f.2.is_some()));
    }
    assert!(named > 60, "{named} probes named with a line");
}

#[test]
fn second_lookup_in_a_module_reuses_its_files() {
    let lib = open("full.so");
    let mut s = default_sym();
    check_inline_chain(&lib, &mut s);
    let opened = s.files_opened();
    assert!(opened > 0);
    let frames = s.lookup(lib.call_ptr("hl_hidden_addr") + 1).1;
    assert_eq!(frames.last().unwrap().function, "hl_hidden");
    check_inline_chain(&lib, &mut s);
    assert_eq!(s.files_opened(), opened);
    // Mapping indexes are stable and not duplicated.
    let n = s.mappings().len();
    s.lookup(lib.ret_of("hl_outer") - 1);
    assert_eq!(s.mappings().len(), n);
}

/// A repeated address gets the cached answer itself, not a copy: a
/// dump's profile holds its frames without copying every name
/// (a dump of cc1 in exact mode: 0.45 MiB less at its peak).
#[test]
fn a_repeated_lookup_shares_the_cached_frames() {
    let lib = open("full.so");
    let mut s = default_sym();
    let addr = lib.ret_of("hl_outer") - 1;
    let first = s.lookup(addr);
    let again = s.lookup(addr);
    assert!(Arc::ptr_eq(&first.1, &again.1));
    assert_eq!(first, again);
    // Prefetched answers too.
    let other = lib.call_ptr("hl_hidden_addr") + 1;
    s.prefetch(&[other], &mut || {});
    assert!(Arc::ptr_eq(&s.lookup(other).1, &s.lookup(other).1));
    assert_eq!(s.lookup(other).1.last().unwrap().function, "hl_hidden");
}

#[test]
fn dlclosed_module_still_symbolizes() {
    let lib = open("closeme.so");
    let ret = lib.ret_of("hl_outer");
    let _g = DL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: nothing of this library is in use any more.
    assert_eq!(unsafe { libc::dlclose(lib.handle as *mut c_void) }, 0);
    modules::refresh();
    let m = modules::find(ret - 1).expect("module kept after dlclose");
    assert!(!m.loaded, "glibc did not unmap {m:?}");
    assert_eq!(Path::new(&m.path), lib.path);
    let (mapping, frames) = default_sym().lookup(ret - 1);
    assert!(mapping.is_some());
    let names: Vec<&str> = frames.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(names, ["hl_inlined", "hl_outer"], "{frames:#?}");
}

/// Two threads refreshing at once: a walk taken before a dlclose and
/// merged after the walk that followed it leaves the closed module
/// unloaded (it marked it loaded again: `dlclosed_module_still_symbolizes`
/// failed once with "glibc did not unmap closeme.so", another test's
/// refresh having merged last).
#[test]
fn a_stale_walk_does_not_mark_a_closed_module_loaded() {
    let lib = open("closeme2.so");
    let ret = lib.ret_of("hl_outer");
    let _g = DL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (before, counters) = modules::walk();
    assert!(before.iter().any(|m| Path::new(&m.path) == lib.path));
    // SAFETY: nothing of this library is in use any more.
    assert_eq!(unsafe { libc::dlclose(lib.handle as *mut c_void) }, 0);
    modules::refresh();
    assert!(!modules::find(ret - 1).unwrap().loaded);
    modules::merge(before, counters);
    let m = modules::find(ret - 1).expect("module kept after dlclose");
    assert_eq!(Path::new(&m.path), lib.path);
    assert!(!m.loaded, "a stale walk marked {m:?} loaded");
}

/// The parsers, tables and error paths (the fixtures above are shared).
mod more;

//! The module registry: every ELF object the process has mapped, kept after
//! `dlclose` so that frames of unloaded libraries still symbolize from their
//! files.
//!
//! [`refresh`] walks `dl_iterate_phdr` and merges what it sees into a global
//! list that only grows: a module is keyed by (path, load bias), vanished
//! modules stay with `loaded = false`, and an index into the list never
//! changes meaning. The dlclose wrapper calls [`refresh`] right before the
//! real `dlclose`, each dump calls it first, and the symbolizer calls
//! [`refresh_if_changed`] when an address falls in no known module.
//!
//! Everything here runs on ordinary threads only (never in a signal handler,
//! never on an allocation path) and allocates freely.

use crate::hot::lock::{Rank, SpinLock};

/// One ELF object seen by `dl_iterate_phdr`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Module {
    /// Absolute path. For the executable (the entry `dl_iterate_phdr` gives
    /// with an empty name) the target of `/proc/self/exe`.
    pub path: String,
    /// Load bias (`dlpi_addr`): runtime address minus link-time address.
    pub bias: u64,
    /// Executable `PT_LOAD` segments as runtime `(start, end, file_offset)`.
    pub ranges: Vec<(u64, u64, u64)>,
    /// `NT_GNU_BUILD_ID`, read from memory while the module was loaded.
    pub build_id: Vec<u8>,
    /// False once the module vanished from `dl_iterate_phdr` (dlclose).
    pub loaded: bool,
}

impl Module {
    pub fn contains(&self, addr: u64) -> bool {
        self.ranges.iter().any(|&(s, e, _)| s <= addr && addr < e)
    }
}

struct Registry {
    modules: Vec<Module>,
    /// `dlpi_adds`/`dlpi_subs` at the last full walk; `None` before the first.
    counters: Option<(u64, u64)>,
}

impl Registry {
    const fn new() -> Self {
        Registry {
            modules: Vec::new(),
            counters: None,
        }
    }
}

static REGISTRY: SpinLock<Registry> = SpinLock::new(
    Rank::Modules,
    Registry {
        modules: Vec::new(),
        counters: None,
    },
);

/// What the `dl_iterate_phdr` callback copies out, before paths are resolved
/// (kept minimal: the callback runs under the loader's lock).
struct RawModule {
    name: Vec<u8>,
    bias: u64,
    ranges: Vec<(u64, u64, u64)>,
    build_id: Vec<u8>,
}

/// Walk the loaded objects and merge them into the registry.
pub fn refresh() {
    let (seen, counters) = walk();
    merge(seen, counters);
}

/// What `dl_iterate_phdr` lists now, paths resolved, with the loader's
/// `dlpi_adds`/`dlpi_subs` counters at the walk.
pub(super) fn walk() -> (Vec<Module>, (u64, u64)) {
    let mut raw: Vec<RawModule> = Vec::new();
    let mut counters = (0u64, 0u64);
    crate::hot::elf::each_loaded(|info, _| {
        collect(info, &mut raw, &mut counters);
        false
    });
    let exe = std::fs::read_link("/proc/self/exe")
        .ok()
        .and_then(|p| p.to_str().map(str::to_owned));
    let seen: Vec<Module> = raw
        .into_iter()
        .filter_map(|r| {
            let path = resolve_path(&r.name, exe.as_deref())?;
            Some(Module {
                path,
                bias: r.bias,
                ranges: r.ranges,
                build_id: r.build_id,
                loaded: true,
            })
        })
        .collect();
    (seen, counters)
}

/// Merge one walk into the registry. Walks run without the registry's
/// lock (the loader's callback allocates), so two threads' walks can
/// merge in the other order: a walk from before a dlclose merged after
/// the walk that followed it would mark the closed module loaded again.
/// A walk older than the last one merged (the loader's counters only
/// grow) adds the modules it alone saw, as unloaded, and changes nothing
/// else.
pub(super) fn merge(seen: Vec<Module>, counters: (u64, u64)) {
    let mut reg = REGISTRY.lock();
    let stale = reg
        .counters
        .is_some_and(|(adds, subs)| counters.0 < adds || counters.1 < subs);
    if stale {
        for mut s in seen {
            if !reg
                .modules
                .iter()
                .any(|m| m.path == s.path && m.bias == s.bias)
            {
                s.loaded = false;
                reg.modules.push(s);
            }
        }
        return;
    }
    for m in reg.modules.iter_mut() {
        m.loaded = false;
    }
    for s in seen {
        match reg
            .modules
            .iter_mut()
            .find(|m| m.path == s.path && m.bias == s.bias)
        {
            Some(m) => {
                // Same file reloaded at the same address: take the fresh
                // ranges and build id (the file may have been replaced).
                *m = s;
            }
            None => reg.modules.push(s),
        }
    }
    reg.counters = Some(counters);
}

/// [`refresh`] only if something was loaded or unloaded since the last walk
/// (glibc's `dlpi_adds`/`dlpi_subs` counters; reading them costs one
/// callback, not a walk).
pub fn refresh_if_changed() {
    let now = load_counters();
    let last = REGISTRY.lock().counters;
    if now.is_none() || last != now {
        refresh();
    }
}

/// [`refresh`] unless nothing was loaded since the last walk (glibc's
/// `dlpi_adds`): what dlopen and dlclose call. Before a dlclose, a walk
/// only matters for a module the registry has not seen; with no load since
/// the last walk, it has seen every loaded one (it keeps unloaded modules,
/// so their frames still symbolize; the next walk marks them unloaded).
/// PHP's shutdown closes its twenty-odd extensions one after another: one
/// walk, not one each.
pub fn refresh_if_loaded() {
    let now = load_counters();
    let last = REGISTRY.lock().counters;
    match (now, last) {
        (Some((adds, _)), Some((last_adds, _))) if adds == last_adds => {}
        _ => refresh(),
    }
}

/// A copy of every module ever seen, in registration order.
#[cfg(test)]
pub fn snapshot() -> Vec<Module> {
    REGISTRY.lock().modules.clone()
}

/// The module whose executable ranges contain `ip`, preferring loaded
/// modules when an unloaded one overlapped the same addresses.
#[cfg(test)]
pub fn find(ip: u64) -> Option<Module> {
    let reg = REGISTRY.lock();
    find_in(&reg.modules, ip).map(|i| reg.modules[i].clone())
}

/// Like [`find`], but returns the module's index in [`snapshot`] order.
/// Indexes never change: the registry only grows.
pub fn find_index(ip: u64) -> Option<usize> {
    find_in(&REGISTRY.lock().modules, ip)
}

/// The module at `index` (see [`find_index`]).
pub fn get(index: usize) -> Option<Module> {
    REGISTRY.lock().modules.get(index).cloned()
}

/// For the atfork prepare handler: take the registry lock so that no other
/// thread holds it across `fork`. Pair with [`unlock_after_fork`].
pub fn lock_for_fork(wait_ns: u64) -> bool {
    REGISTRY.lock_raw_within(wait_ns)
}

/// For the child handler when [`lock_for_fork`] gave up: an empty registry
/// (refilled at the next refresh; modules unloaded before the fork are
/// forgotten).
///
/// # Safety
/// In a fork's child whose prepare handler did not get the lock.
pub unsafe fn reset_in_child() {
    // SAFETY: guaranteed by the caller.
    unsafe { REGISTRY.reset_in_child(Registry::new()) };
}

/// For the atfork parent and child handlers.
///
/// # Safety
/// Only after [`lock_for_fork`] in this thread (or, in a child created
/// without atfork handlers, when the holder no longer exists).
pub unsafe fn unlock_after_fork() {
    // SAFETY: the caller guarantees no live guard exists.
    unsafe { REGISTRY.unlock_raw() };
}

fn find_in(modules: &[Module], ip: u64) -> Option<usize> {
    let mut unloaded = None;
    for (i, m) in modules.iter().enumerate() {
        if m.contains(ip) {
            if m.loaded {
                return Some(i);
            }
            // The most recently registered unloaded one wins.
            unloaded = Some(i);
        }
    }
    unloaded
}

/// `dl_iterate_phdr` gives the executable an empty name and dlopen'ed
/// libraries the name they were opened by (maybe relative): make them all
/// absolute. `None` for the vdso.
fn resolve_path(name: &[u8], exe: Option<&str>) -> Option<String> {
    if name.is_empty() {
        return exe.map(str::to_owned);
    }
    let s = std::str::from_utf8(name).ok()?;
    if s.starts_with("linux-vdso") || s.starts_with("linux-gate") {
        return None;
    }
    if s.starts_with('/') {
        return Some(s.to_owned());
    }
    Some(realpath(s).unwrap_or_else(|| s.to_owned()))
}

/// The canonical path of `s` (relative to the working directory) without
/// glibc's malloc, which heaplive's thread must never enter
/// (`background::dir`, `hot::forking`): std's `canonicalize` lets glibc
/// allocate the result, and `realpath(3)` mallocs inside for long names
/// and links. The file opened with O_PATH names itself in /proc/self/fd;
/// without /proc, `realpath` into a buffer of ours for short names only.
fn realpath(s: &str) -> Option<String> {
    let c = std::ffi::CString::new(s).ok()?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: a NUL-terminated path; O_PATH opens nothing for reading and
    // never blocks; the descriptor is closed at once.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let link = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).ok();
    // SAFETY: NUL-terminated link name; buffer and length match.
    let n = link.map_or(-1, |l| unsafe {
        libc::readlink(l.as_ptr(), buf.as_mut_ptr().cast(), buf.len() - 1)
    });
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(fd) };
    if n > 0 && buf[0] == b'/' {
        buf.truncate(n as usize);
        return String::from_utf8(buf).ok();
    }
    if s.len() > 255 {
        return None;
    }
    // SAFETY: a NUL-terminated path and a PATH_MAX+1 buffer.
    let r = unsafe { libc::realpath(c.as_ptr(), buf.as_mut_ptr().cast()) };
    if r.is_null() {
        return None;
    }
    let len = buf.iter().position(|&b| b == 0)?;
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

/// Copies one loaded object's module (not the vdso, not one without
/// executable segments) into `out`, and the loader's counters into
/// `counters` (they are the same in every entry). Runs under the loader's
/// lock (`hot::elf::each_loaded`).
fn collect(info: &libc::dl_phdr_info, out: &mut Vec<RawModule>, counters: &mut (u64, u64)) {
    *counters = (info.dlpi_adds, info.dlpi_subs);
    let phdrs = crate::hot::elf::phdrs(info);
    let bias = info.dlpi_addr;
    if is_vdso(phdrs, bias) {
        return;
    }
    let ranges: Vec<(u64, u64, u64)> = phdrs
        .iter()
        .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0 && p.p_memsz > 0)
        .map(|p| {
            let start = bias.wrapping_add(p.p_vaddr);
            (start, start.wrapping_add(p.p_memsz), p.p_offset)
        })
        .collect();
    if ranges.is_empty() {
        return;
    }
    let name = crate::hot::elf::name_of(info).to_bytes().to_vec();
    let mut build_id = Vec::new();
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
        // SAFETY: PT_NOTE segments of a loaded object are mapped readable
        // (they lie inside a PT_LOAD) for as long as the object is loaded.
        let note = unsafe {
            std::slice::from_raw_parts(
                bias.wrapping_add(p.p_vaddr) as usize as *const u8,
                p.p_memsz as usize,
            )
        };
        if let Some(id) = parse_build_id_note(note) {
            build_id = id.to_vec();
            break;
        }
    }
    out.push(RawModule {
        name,
        bias,
        ranges,
        build_id,
    });
}

/// The vdso is the object whose ELF header sits at `AT_SYSINFO_EHDR`.
fn is_vdso(phdrs: &[libc::Elf64_Phdr], bias: u64) -> bool {
    // SAFETY: getauxval has no preconditions.
    let vdso = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as u64;
    vdso != 0
        && phdrs.iter().any(|p| {
            p.p_type == libc::PT_LOAD && p.p_offset == 0 && bias.wrapping_add(p.p_vaddr) == vdso
        })
}

/// The descriptor of the first `NT_GNU_BUILD_ID` note named "GNU" in an ELF
/// note segment.
pub(crate) fn parse_build_id_note(mut notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let align4 = |n: usize| n.checked_add(3).map(|v| v & !3);
    while notes.len() >= 12 {
        let word =
            |i: usize| u32::from_ne_bytes([notes[i], notes[i + 1], notes[i + 2], notes[i + 3]]);
        let (namesz, descsz, ntype) = (word(0) as usize, word(4) as usize, word(8));
        let name_end = 12usize.checked_add(namesz)?;
        let desc_start = 12usize.checked_add(align4(namesz)?)?;
        let desc_end = desc_start.checked_add(descsz)?;
        if desc_end > notes.len() || name_end > notes.len() {
            return None;
        }
        if ntype == NT_GNU_BUILD_ID && &notes[12..name_end] == b"GNU\0" {
            return Some(&notes[desc_start..desc_end]);
        }
        let next = align4(desc_end)?;
        if next > notes.len() {
            return None;
        }
        notes = &notes[next..];
    }
    None
}

fn load_counters() -> Option<(u64, u64)> {
    let mut out: Option<(u64, u64)> = None;
    // The counters are the same in every entry: the first says.
    crate::hot::elf::each_loaded(|info, _| {
        out = Some((info.dlpi_adds, info.dlpi_subs));
        true
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realpath_resolves_relative_names_and_links() {
        let dir = crate::fresh_test_dir("realpath");
        std::fs::create_dir(dir.join("a")).unwrap();
        std::fs::write(dir.join("a/lib.so"), b"").unwrap();
        std::os::unix::fs::symlink("a", dir.join("link")).unwrap();
        let want = std::fs::canonicalize(dir.join("a/lib.so")).unwrap();
        let via_link = dir.join("link/../link/lib.so");
        assert_eq!(
            realpath(via_link.to_str().unwrap()).as_deref(),
            want.to_str()
        );
        assert_eq!(realpath(dir.join("a/missing").to_str().unwrap()), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn build_id_note_is_found_after_other_notes() {
        let mut notes = Vec::new();
        // An ABI-tag note first (type 1, name "GNU\0", 16-byte descriptor).
        for w in [4u32, 16, 1] {
            notes.extend_from_slice(&w.to_ne_bytes());
        }
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0; 16]);
        // A build id with a 5-byte name padded to 8.
        for w in [5u32, 3, 3] {
            notes.extend_from_slice(&w.to_ne_bytes());
        }
        notes.extend_from_slice(b"Xen\0\0\0\0\0");
        notes.extend_from_slice(&[9, 9, 9, 0]);
        for w in [4u32, 3, 3] {
            notes.extend_from_slice(&w.to_ne_bytes());
        }
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[0xde, 0xad, 0xbe, 0, 0]); // desc 3 bytes + padding
        notes.truncate(notes.len() - 1);
        assert_eq!(parse_build_id_note(&notes), Some(&[0xde, 0xad, 0xbe][..]));
        // Truncated or absurd sizes give nothing, and no panic.
        assert_eq!(parse_build_id_note(&notes[..notes.len() - 3]), None);
        let mut bad = Vec::new();
        for w in [u32::MAX, u32::MAX, 3] {
            bad.extend_from_slice(&w.to_ne_bytes());
        }
        assert_eq!(parse_build_id_note(&bad), None);
    }

    #[test]
    fn refresh_sees_executable_and_libc_but_not_vdso() {
        refresh();
        let mods = snapshot();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe_mod = mods
            .iter()
            .find(|m| Path::new(&m.path) == exe)
            .unwrap_or_else(|| panic!("executable {exe:?} missing from {mods:#?}"));
        assert!(exe_mod.loaded && !exe_mod.ranges.is_empty());
        let here = refresh_sees_executable_and_libc_but_not_vdso as *const () as u64;
        assert_eq!(find(here).map(|m| m.path), Some(exe_mod.path.clone()));

        let malloc = libc::malloc as *const () as u64;
        let libc_mod = find(malloc).expect("malloc's module");
        assert!(libc_mod.path.contains("libc.so"), "{}", libc_mod.path);
        assert!(libc_mod.path.starts_with('/'));
        assert!(
            libc_mod.build_id.len() >= 16,
            "libc build id from PT_NOTE: {:?}",
            libc_mod.build_id
        );
        assert!(!mods.iter().any(|m| m.path.contains("vdso")), "{mods:#?}");
        // Registration is idempotent.
        refresh();
        assert_eq!(snapshot().len(), mods.len());
    }

    #[test]
    fn fork_lock_roundtrip() {
        assert!(lock_for_fork(u64::MAX));
        assert!(REGISTRY.is_locked());
        // SAFETY: pairs with the lock just taken.
        unsafe { unlock_after_fork() };
        assert!(snapshot().len() < usize::MAX); // lockable again
    }

    use std::path::Path;
}

//! heaplive: which call stacks hold the memory that is live right now?
//!
//! `libheaplive.so` is loaded into an unmodified process with `LD_PRELOAD`.
//! It exports every glibc allocation entry point and the C++ operators
//! new/delete, forwards each to the next definition, samples allocations
//! (byte-weighted Poisson, `sampler`), keeps the live samples with their
//! stacks in memory it maps itself, and on exit, on a signal, periodically
//! or on request writes a folded file of live bytes (and optionally pprof).
//! See README.md for settings, output and troubleshooting.
//!
//! Layout: `interpose/` (exported symbols), `hot/` (runs inside malloc,
//! free or a signal handler: never allocates), `background/` (the dumper
//! thread: may allocate), `symbolize/`; imports flow
//! `interpose -> hot <- background -> symbolize` (see src/README.md).
#![deny(unsafe_op_in_unsafe_fn)]
// Unit tests do not export the hooks, so code reachable only from them looks dead.
#![cfg_attr(test, allow(dead_code))]

mod background;
mod hot;
mod interpose;
mod symbolize;

use core::alloc::{GlobalAlloc, Layout};

/// The library's own Rust allocations come from heaplive's own heap
/// (`hot::ownheap`, memory it maps itself), never from the program's
/// allocator.
struct OwnAllocator;

// SAFETY: `hot::ownheap` returns blocks of the requested size and alignment
// (or null) and takes back exactly what it gave.
unsafe impl GlobalAlloc for OwnAllocator {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        hot::ownheap::alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: GlobalAlloc::dealloc gets a block of this allocator.
        unsafe { hot::ownheap::dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: GlobalAlloc::realloc gets a block of this allocator.
        unsafe { hot::ownheap::realloc(p, l, new) }
    }
}

#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: OwnAllocator = OwnAllocator;

/// The background layer's entry points, for the layers below it.
#[cfg(not(test))]
static SERVICES: hot::services::Services = hot::services::Services {
    start_dumper: background::dumper::start_dumper,
    before_exec: background::dumper::before_exec,
    dump_now: background::dumper::dump_now,
    modules_changed: symbolize::modules::refresh_if_loaded,
    stop_dumper: background::dumper::stop_dumper,
    attach_start,
    patch: background::attach::patch,
    redirect_loaded,
    restore: background::attach::restore,
    php_oom: background::php::oom,
    php_request_peak: background::php::request_peak,
};

/// Runs when the library is loaded (after the first allocations, which
/// already resolved the real functions and read the settings).
#[cfg(not(test))]
#[ctor::ctor(unsafe)]
fn init() {
    let _busy = hot::guard::Busy::enter();
    let _errno = hot::sys::ErrnoGuard::save();
    hot::services::install(&SERVICES);
    if !hot::real::resolved() {
        // Nothing allocated through us yet: maybe dlopen'ed by `heaplive
        // attach` (hot/attach.rs), which must be known before resolving.
        hot::attach::detect();
    }
    hot::real::resolve_all();
    hot::ownheap::init();
    if hot::attach::attached() {
        // heaplive_attach (interpose/attach.rs) brings the settings and
        // calls `attach_start`.
        return;
    }
    start();
}

/// The start-up after the real functions are known: in the constructor,
/// or in `heaplive_attach` once the settings are read.
#[cfg(not(test))]
fn start() {
    hot::log::init();
    if hot::winner::pending() {
        other_allocator();
    }
    // The program's own libgcc_s, if it has one, is the unwinder to use.
    hot::unwind::find_system_libgcc();
    // Before any thread: no dlopen may run later from an allocation path.
    hot::forking::init();
    background::fork::init();
    hot::signal::install();
    // In a PHP process: hook PHP's start-up (before main runs it).
    interpose::php::init();
    background::dumper::note_start();
    // heaplive's thread starts only when a feature needs it (the rule:
    // `hot::trigger`'s doc); at start-up that is only periodic dumps.
    if hot::config::get().dump_every_ms > 0 {
        hot::trigger::ensure_dumper();
    }
    hot::sys::at_exit(background::dumper::at_exit);
}

/// Another allocator first in `LD_PRELOAD`: the modules loaded since the
/// last call (dlopen, dlclose, a dump) get their slots redirected too.
#[cfg(not(test))]
fn redirect_loaded() {
    if let Some((_, base)) = hot::winner::winner_library() {
        background::attach::redirect_from(&interpose::attach::preload_targets(), base);
    }
}

/// The program binds malloc to another allocator than heaplive
/// (`hot::winner::find_other_malloc`): a library before heaplive in
/// `LD_PRELOAD` has its callers' slots redirected to heaplive, which
/// forwards to it; an executable's own malloc can only be reported. One
/// line each, unless HEAPLIVE_PROGRAMS leaves this program alone.
#[cfg(not(test))]
#[cold]
#[inline(never)]
fn other_allocator() {
    if hot::config::get().unwanted {
        return;
    }
    let pid = hot::sys::getpid();
    match hot::winner::winner() {
        hot::winner::Winner::Library => {}
        hot::winner::Winner::Ours => {
            if !hot::winner::adopt_other_allocator() {
                return;
            }
            let Some((path, base)) = hot::winner::winner_library() else {
                return;
            };
            let n = background::attach::redirect_from(&interpose::attach::preload_targets(), base);
            hot::log::line(format_args!(
                "heaplive[{pid}]: malloc is {}'s, which comes before libheaplive.so in LD_PRELOAD: heaplive redirected {n} call slots of the program's modules to itself and forwards them there (blocks allocated before it started, and in the constructors of libraries loaded later, are not seen); put libheaplive.so first in LD_PRELOAD to see everything",
                path.to_string_lossy()
            ));
        }
        hot::winner::Winner::Executable => {
            let mut buf = [0u8; 512];
            // SAFETY: a NUL-terminated path and a buffer of its length.
            let len = unsafe {
                libc::readlink(
                    c"/proc/self/exe".as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            let exe = match usize::try_from(len) {
                Ok(l) if l > 0 && l < buf.len() => String::from_utf8_lossy(&buf[..l]),
                _ => "the executable".into(),
            };
            hot::log::line(format_args!(
                "heaplive[{pid}]: this program defines its own malloc ({exe}): its allocations never reach heaplive, whatever the order in LD_PRELOAD, so dumps show nothing of them"
            ));
        }
    }
}

/// Attach mode: the settings from `heaplive attach`, then the start-up.
#[cfg(not(test))]
fn attach_start(settings: &[u8]) {
    let _busy = hot::guard::Busy::enter();
    hot::config::load_settings(settings);
    start();
    // Attached, the dump signal is not blocked in the program's threads
    // (hot/signal.rs), so it cannot wait, pending, for heaplive's thread
    // to start at the first sample: the thread starts now.
    hot::trigger::ensure_dumper();
}

/// Tests: an empty directory `heaplive-<tag>-<pid>` under the temporary
/// directory (what an earlier run left there is removed first).
#[cfg(test)]
pub(crate) fn fresh_test_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("heaplive-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Tests: what `threads` threads each get from `f` at the same time, all
/// of it the same (asserted); the first thread's.
#[cfg(test)]
pub(crate) fn same_from_threads<T: Send + PartialEq + std::fmt::Debug + 'static>(
    threads: usize,
    f: fn() -> Vec<T>,
) -> Vec<T> {
    let ids: Vec<Vec<T>> = (0..threads)
        .map(|_| std::thread::spawn(f))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    for other in &ids[1..] {
        assert_eq!(other, &ids[0]);
    }
    ids.into_iter().next().unwrap()
}

#[cfg(test)]
mod layering {
    //! Imports flow `interpose -> hot <- background -> symbolize`
    //! (src/README.md); this fails on any import against the arrows, in
    //! any file's production code. Also: every file under src/ is named in
    //! the map of the source, and the top level is the fixed layout.
    use std::path::{Path, PathBuf};

    const LAYERS: [&str; 4] = ["interpose", "hot", "background", "symbolize"];
    /// What `symbolize` may use of `hot`: its primitives (`hot/prim/`).
    const PRIMITIVES: [&str; 7] = ["arena", "elf", "guard", "lock", "log", "ownheap", "sys"];

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    /// Every file under `dir`, recursively, sorted.
    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in std::fs::read_dir(&d).expect("source folder") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    todo.push(path);
                } else {
                    out.push(path);
                }
            }
        }
        out.sort();
        out
    }

    /// A file of unit tests only (`#[path = "x_tests.rs"] mod tests;`).
    fn is_test_file(p: &Path) -> bool {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name == "tests.rs" || name.ends_with("_tests.rs")
    }

    /// A file's production code: up to its unit tests (`mod tests`), with
    /// line comments taken out.
    fn production(text: &str) -> String {
        let code = text.split("mod tests").next().unwrap_or("");
        code.lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn ident(s: &str) -> &str {
        let s = s.trim_start();
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        &s[..end]
    }

    /// The text between the `{` at `open` and its matching `}`.
    fn group(s: &str, open: usize) -> &str {
        let mut depth = 0;
        for (i, c) in s[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return &s[open + 1..open + i];
                    }
                }
                _ => {}
            }
        }
        &s[open + 1..]
    }

    /// Splits a group at its top-level commas.
    fn items(g: &str) -> Vec<&str> {
        let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, c) in g.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(&g[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(&g[start..]);
        out.into_iter().filter(|i| !i.trim().is_empty()).collect()
    }

    /// `(module, item)` for a path after `crate::`: `hot::sys::x` gives
    /// ("hot", "sys"); `hot::{sys, lock}` one pair per item; `hot;` or
    /// `hot as h` ("hot", "").
    fn heads(path: &str, out: &mut Vec<(String, String)>) {
        let first = ident(path);
        let rest = path.trim_start()[first.len()..].trim_start();
        let Some(rest) = rest.strip_prefix("::") else {
            out.push((first.to_string(), String::new()));
            return;
        };
        let rest = rest.trim_start();
        if rest.starts_with('{') {
            for item in items(group(rest, 0)) {
                out.push((first.to_string(), ident(item).to_string()));
            }
        } else {
            out.push((first.to_string(), ident(rest).to_string()));
        }
    }

    /// Every `(module, item)` that `code` names through `crate::`, in
    /// every form: paths, `use crate::x;` and `use crate::{x::y, z}`.
    fn named(code: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(k) = code[from..].find("crate::") {
            let at = from + k;
            from = at + "crate::".len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue; // another crate's name ending in "crate"
            }
            let rest = code[from..].trim_start();
            if rest.starts_with('{') {
                for item in items(group(rest, 0)) {
                    heads(item, &mut out);
                }
            } else {
                heads(rest, &mut out);
            }
        }
        out
    }

    /// `(file, module, item)` of every use of another layer from `dir`.
    fn uses(dir: &str) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for path in files(&src().join(dir)) {
            if path.extension().is_none_or(|e| e != "rs") || is_test_file(&path) {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source");
            for (m, item) in named(&production(&text)) {
                if LAYERS.contains(&m.as_str()) && m != dir {
                    out.push((path.display().to_string(), m, item));
                }
            }
        }
        out
    }

    fn check(dir: &str, allowed: &[&str]) {
        let bad: Vec<_> = uses(dir)
            .into_iter()
            .filter(|(_, l, _)| !allowed.contains(&l.as_str()))
            .collect();
        assert!(
            bad.is_empty(),
            "{dir}/ imports against the layering: {bad:?}"
        );
    }

    /// The reader sees every import form, and nothing in tests or comments.
    #[test]
    fn every_import_form_is_seen() {
        let code = production(
            "use crate::{hot::sys::X, background::dump};\n\
             use crate::hot;\n\
             let a = crate::symbolize::modules::refresh();\n\
             use crate::{interpose::{alloc, cxx}};\n\
             // crate::background::not_code\n\
             use heaplive_crate::background::other_crate;\n\
             #[cfg(test)]\nmod tests { use crate::background::in_tests; }",
        );
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            named(&code),
            pairs(&[
                ("hot", "sys"),
                ("background", "dump"),
                ("hot", ""),
                ("symbolize", "modules"),
                ("interpose", "alloc"),
                ("interpose", "cxx"),
            ])
        );
    }

    #[test]
    fn hot_imports_nothing_above_it() {
        check("hot", &[]);
    }

    #[test]
    fn interpose_imports_only_hot() {
        check("interpose", &["hot"]);
    }

    #[test]
    fn background_does_not_import_interpose() {
        check("background", &["hot", "symbolize"]);
    }

    #[test]
    fn symbolize_imports_only_hot_primitives() {
        check("symbolize", &["hot"]);
        let bad: Vec<_> = uses("symbolize")
            .into_iter()
            .filter(|(_, m, item)| m == "hot" && !PRIMITIVES.contains(&item.as_str()))
            .collect();
        assert!(
            bad.is_empty(),
            "symbolize/ uses more of hot than its primitives: {bad:?}"
        );
    }

    /// Whether the map (src/README.md, or a README.md in the file's
    /// folder or one above it) names the file `rel` (relative to src/): a
    /// top-level file anywhere in src/README.md; a file of a folder inside
    /// the paragraph of its top folder (`**`hot/`**`), by its path from
    /// that folder, or by its name under the bullet of its own folder
    /// (`**`hot/prim/`**`).
    fn mapped(rel: &str) -> bool {
        let parts: Vec<&str> = rel.split('/').collect();
        let name = parts[parts.len() - 1];
        for up in (0..parts.len()).rev() {
            let dir = parts[..up].join("/");
            let readme = src().join(&dir).join("README.md");
            let Ok(text) = std::fs::read_to_string(&readme) else {
                continue;
            };
            if up > 0 {
                // A folder's own README: the path from that folder.
                if text.contains(&format!("`{}`", parts[up..].join("/"))) {
                    return true;
                }
                continue;
            }
            if parts.len() == 1 {
                return text.contains(&format!("`{name}`"))
                    || text.contains(&format!("`src/{name}`"));
            }
            let top = parts[0];
            let Some(start) = text.find(&format!("**`{top}/`**")) else {
                return false;
            };
            let section = &text[start..];
            let section = &section[..section[2..].find("\n**`").map_or(section.len(), |e| e + 2)];
            let folder = parts[..parts.len() - 1].join("/");
            if folder != top
                && let Some(b) = section.find(&format!("**`{folder}/`**"))
            {
                let bullet = &section[b..];
                let bullet = &bullet[..bullet.find("\n- ").unwrap_or(bullet.len())];
                if bullet.contains(&format!("`{name}`")) {
                    return true;
                }
            }
            let from_top = parts[1..].join("/");
            return section.contains(&format!("`{from_top}`"))
                || (folder == top && section.contains(&format!("`{name}`")));
        }
        false
    }

    #[test]
    fn every_file_under_src_is_named_in_the_map() {
        let root = src();
        let missing: Vec<String> = files(&root)
            .iter()
            .map(|p| {
                p.strip_prefix(&root)
                    .expect("under src")
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|rel| !rel.ends_with("README.md") && !mapped(rel))
            .collect();
        assert!(
            missing.is_empty(),
            "files under src/ that src/README.md (or their folder's README.md) does not name: {missing:?}"
        );
        // The map's reader finds what it should and nothing it should not.
        assert!(mapped("hot/prim/sys.rs") && mapped("hot/api.rs") && mapped("lib.rs"));
        assert!(!mapped("hot/prim/no_such_file.rs") && !mapped("background/no_such_file.rs"));
    }

    /// The top level is the layout the project fixed (Cargo.toml, src,
    /// preload-tests, scripts, bench, Makefile, README.md) plus Cargo.lock
    /// and dotfiles (.ci/, .cargo/, .gitignore): the build script, the
    /// linker script and the systemd example live under src/ and scripts/.
    #[test]
    fn top_level_is_the_fixed_layout() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = std::process::Command::new("git")
            .args(["ls-files", "--cached"])
            .current_dir(root)
            .output()
            .expect("git ls-files");
        assert!(out.status.success(), "git ls-files failed");
        let mut top: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split('/').next().map(str::to_string))
            .filter(|n| !n.starts_with('.'))
            .collect();
        top.sort();
        top.dedup();
        let fixed = [
            "Cargo.lock",
            "Cargo.toml",
            "Makefile",
            "README.md",
            "bench",
            "preload-tests",
            "scripts",
            "src",
        ];
        assert_eq!(top, fixed, "top-level entries beyond the fixed layout");
    }
}

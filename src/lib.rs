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
    // heaplive's thread starts only when a feature needs it (`hot::trigger`:
    // the dump signal, peak dumps, a due leak warning at the first sample
    // or later; here only periodic dumps): a program that never samples,
    // or runs with HEAPLIVE_SIGNAL=none and nothing else that needs the
    // thread, stays single-threaded in glibc's eyes.
    if hot::config::get().dump_every_ms > 0 {
        hot::trigger::ensure_dumper();
    }
    hot::sys::at_exit(background::dumper::at_exit);
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
                "heaplive[{pid}]: malloc is {}'s, which comes before libheaplive.so in LD_PRELOAD: heaplive redirected {n} call slots of the program's modules to itself and forwards them there (blocks allocated before it started, and by libraries loaded later, are not seen); put libheaplive.so first in LD_PRELOAD to see everything",
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

#[cfg(test)]
mod layering {
    //! Imports flow `interpose -> hot <- background -> symbolize`
    //! (src/README.md); this fails on any import against the arrows.
    use std::path::Path;

    fn uses(dir: &str) -> Vec<(String, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&root).expect("layer folder") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("source");
            // Only the code before the file's unit tests.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for layer in ["interpose", "hot", "background", "symbolize"] {
                for pat in [format!("crate::{layer}::"), format!("crate::{layer};")] {
                    if code.contains(&pat) {
                        out.push((path.display().to_string(), layer.to_string()));
                    }
                }
            }
        }
        out
    }

    fn check(dir: &str, allowed: &[&str]) {
        let bad: Vec<_> = uses(dir)
            .into_iter()
            .filter(|(_, l)| l != dir && !allowed.contains(&l.as_str()))
            .collect();
        assert!(
            bad.is_empty(),
            "{dir}/ imports against the layering: {bad:?}"
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
    }
}

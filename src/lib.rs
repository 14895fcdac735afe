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

/// The library's own Rust allocations go to the real allocator directly,
/// never through our exports (inside this cdylib, `malloc` binds to them).
struct RealAllocator;

// SAFETY: forwards to the C allocator, which returns blocks aligned to at
// least 16 bytes; larger alignments use memalign.
unsafe impl GlobalAlloc for RealAllocator {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.align() <= 16 {
            hot::real::malloc(l.size()).cast()
        } else {
            hot::real::memalign(l.align(), l.size()).cast()
        }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.align() <= 16 {
            hot::real::calloc(1, l.size()).cast()
        } else {
            let p = hot::real::memalign(l.align(), l.size()).cast::<u8>();
            if !p.is_null() {
                // SAFETY: p has l.size() bytes.
                unsafe { core::ptr::write_bytes(p, 0, l.size()) };
            }
            p
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, _l: Layout) {
        // SAFETY: GlobalAlloc::dealloc gets a block of this allocator.
        unsafe { hot::real::free(p.cast()) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if l.align() <= 16 {
            // SAFETY: GlobalAlloc::realloc gets a block of this allocator.
            unsafe { hot::real::realloc(p.cast(), new).cast() }
        } else {
            // SAFETY: as GlobalAlloc::realloc's default: alloc, copy, free.
            unsafe {
                let q = self.alloc(Layout::from_size_align_unchecked(new, l.align()));
                if !q.is_null() {
                    core::ptr::copy_nonoverlapping(p, q, l.size().min(new));
                    self.dealloc(p, l);
                }
                q
            }
        }
    }
}

#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: RealAllocator = RealAllocator;

/// The background layer's entry points, for the layers below it.
#[cfg(not(test))]
static SERVICES: hot::services::Services = hot::services::Services {
    start_dumper: background::dumper::start_dumper,
    before_exec: background::dumper::before_exec,
    dump_now: background::dumper::dump_now,
    modules_changed: symbolize::modules::refresh,
    stop_dumper: background::dumper::stop_dumper,
};

/// Runs when the library is loaded (after the first allocations, which
/// already resolved the real functions and read the settings).
#[cfg(not(test))]
#[ctor::ctor(unsafe)]
fn init() {
    let _busy = hot::guard::Busy::enter();
    let _errno = hot::sys::ErrnoGuard::save();
    hot::services::install(&SERVICES);
    hot::real::resolve_all();
    hot::log::init();
    background::fork::init();
    hot::signal::install();
    // In a PHP process: hook PHP's start-up (before main runs it).
    interpose::php::init();
    // heaplive's thread starts when first needed (the first sample, which
    // also needs it for leak warnings and pruning the shadow bitmap; here
    // only for periodic dumps): a program that never samples stays
    // single-threaded in glibc's eyes (`hot::trigger`).
    if hot::config::get().dump_every_ms > 0 {
        hot::trigger::ensure_dumper();
    }
    // SAFETY: a plain function that stays mapped.
    unsafe { libc::atexit(background::dumper::at_exit) };
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

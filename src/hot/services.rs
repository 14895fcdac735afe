//! What the layers below `background` ask of it, as function pointers the
//! library's constructor installs (`lib.rs`), so that imports only flow
//! down: the allocation path starts the dumper thread, `heaplive_dump()`
//! and the exec trampolines reach the dump, dlopen/dlclose refresh the
//! module registry, without `hot` or `interpose` importing `background`.
//! Before the constructor ran, nothing is installed and each call is a
//! no-op (the constructor then does what was missed).

use core::sync::atomic::{AtomicPtr, Ordering::*};

pub struct Services {
    /// Starts this process's dumper thread (argument: our pid).
    pub start_dumper: fn(u32),
    /// Before an exec replaces the image: serve a pending dump request and
    /// wait for a dump in progress.
    pub before_exec: fn(),
    /// `heaplive_dump(path)`: dump now to `path`, or to the template's next
    /// name. Err carries an errno value.
    pub dump_now: fn(Option<&[u8]>) -> Result<(), i32>,
    /// The set of loaded modules changed (dlopen, dlclose).
    pub modules_changed: fn(),
    /// Ends this process's dumper thread and waits for it; true if there
    /// was one.
    pub stop_dumper: fn() -> bool,
    /// Attach mode (hot/attach.rs): apply the settings text and do the
    /// start-up the constructor left out.
    pub attach_start: fn(&[u8]),
    /// Attach mode: redirect the GOT slots named in the table to the
    /// addresses given, in modules not done yet; how many were rewritten.
    pub patch: fn(&[(&core::ffi::CStr, usize)]) -> usize,
    /// Another allocator first in `LD_PRELOAD` (`hot::winner`): redirect
    /// the slots of modules loaded since to heaplive.
    pub redirect_loaded: fn(),
    /// Detach: put every rewritten slot back; how many.
    pub restore: fn() -> usize,
    /// PHP mode, on the PHP thread at a memory_limit error, before PHP
    /// reports it: snapshot the live heap now and have it written.
    pub php_oom: fn(&PhpOom),
    /// PHP mode, at the end of a request whose peak reached
    /// HEAPLIVE_PHP_PEAK_BYTES: the request's root frame text and its peak
    /// (the stacks at the peak are in the records' `request_peak_*`).
    pub php_request_peak: fn(&[u8], i64),
}

/// What PHP said when a request exhausted its memory_limit.
pub struct PhpOom<'a> {
    /// PHP's message (`Allowed memory size of ... exhausted ...`).
    pub message: &'a [u8],
    /// The file and line PHP names.
    pub file: &'a [u8],
    pub line: u32,
    /// The request's root frame text (`[GET /api/report]`), or empty.
    pub request: &'a [u8],
}

static SERVICES: AtomicPtr<Services> = AtomicPtr::new(core::ptr::null_mut());

pub fn install(s: &'static Services) {
    SERVICES.store((s as *const Services).cast_mut(), Release);
}

#[inline]
pub fn get() -> Option<&'static Services> {
    // SAFETY: only `install` stores, a pointer to a 'static.
    unsafe { SERVICES.load(Acquire).as_ref() }
}

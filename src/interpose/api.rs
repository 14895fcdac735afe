//! The C API the program may call (declared in `src/heaplive.h`).

use crate::hot::{guard, services, sys};

/// `int heaplive_dump(const char *path)`: dumps now, to `path` or (NULL) to
/// the next file of the template. 0, or -1 with errno.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn heaplive_dump(path: *const core::ffi::c_char) -> core::ffi::c_int {
    let _busy = guard::Busy::enter();
    let explicit = if path.is_null() {
        None
    } else {
        // SAFETY: the caller passes a NUL-terminated string.
        Some(unsafe { core::ffi::CStr::from_ptr(path) }.to_bytes())
    };
    let Some(s) = services::get() else {
        sys::set_errno(libc::EAGAIN);
        return -1;
    };
    match (s.dump_now)(explicit) {
        Ok(()) => 0,
        Err(e) => {
            sys::set_errno(e);
            -1
        }
    }
}

/// `int heaplive_start(void)`: starts sampling (after `HEAPLIVE_START=0` or
/// `heaplive_stop()`). Returns 1 if sampling was already on, 0 if it was
/// off. Async-signal-safe.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn heaplive_start() -> core::ffi::c_int {
    crate::hot::track::set_active(true, false) as core::ffi::c_int
}

/// `int heaplive_stop(void)`: stops sampling; samples already taken stay
/// until their blocks are freed. Returns 1 if sampling was on, 0 if it was
/// off already. Async-signal-safe.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn heaplive_stop() -> core::ffi::c_int {
    crate::hot::track::set_active(false, false) as core::ffi::c_int
}

/// `void heaplive_witness_selftest(void)`, in `lock-witness` builds only
/// (not in `heaplive.h`): takes two locks out of rank order, so the
/// witness must abort the process with its line (`preload-tests/witness.rs`).
#[cfg(feature = "lock-witness")]
#[cfg_attr(not(test), unsafe(no_mangle))]
pub extern "C" fn heaplive_witness_selftest() {
    crate::hot::lock::witness_selftest();
}

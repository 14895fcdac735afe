//! The C API the program may call (declared in the README).

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

//! dlopen and dlclose.
//!
//! PHP loads every extension with `dlopen(..., RTLD_GLOBAL|RTLD_DEEPBIND)`;
//! a library loaded that way binds its malloc to libc directly and no
//! preloaded wrapper sees its allocations. Our dlopen clears RTLD_DEEPBIND
//! (saying so once) and *jumps* to the real one: glibc finds the caller's
//! RUNPATH, $ORIGIN and namespace from the return address, which must stay
//! the program's.
//!
//! dlclose refreshes the module registry before the real call, so frames of
//! a library unloaded before a dump still symbolize from its file, and
//! drops the unwinder's cached rules before and after it.

use crate::hot::real::{self, Sym, call};
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

static NOTED: AtomicBool = AtomicBool::new(false);

/// Called by the dlopen trampoline with the caller's flags; returns the
/// real dlopen (0 if unknown).
extern "C" fn dlopen_prepare(flags: c_int) -> usize {
    let _errno = crate::hot::sys::ErrnoGuard::save();
    if flags & libc::RTLD_DEEPBIND != 0 && !NOTED.swap(true, Relaxed) {
        crate::hot::log::line(format_args!(
            "heaplive[{}]: dlopen with RTLD_DEEPBIND: flag cleared so that the library's allocations are seen (said once)",
            crate::hot::sys::getpid()
        ));
    }
    real::c_fn(Sym::Dlopen)
}

/// `void *dlopen(const char *file, int flags)`: a trampoline that keeps the
/// caller's return address for the real dlopen.
/// `dlopen`.
///
/// # Safety
/// The contract of C's `dlopen` (dlopen(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
#[unsafe(naked)]
pub unsafe extern "C" fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void {
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "mov edi, esi",
        "call {prepare}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        // RTLD_DEEPBIND is 0x8.
        "and esi, -9",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "xor eax, eax",
        "ret",
        prepare = sym dlopen_prepare,
    )
}

/// `dlclose`.
///
/// # Safety
/// The contract of C's `dlclose` (dlopen(3)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    if !crate::hot::guard::busy() && !crate::hot::forking::inert() {
        let _busy = crate::hot::guard::Busy::enter();
        let _errno = crate::hot::sys::ErrnoGuard::save();
        if let Some(s) = crate::hot::services::get() {
            (s.modules_changed)();
        }
    }
    // Rules cached for the library's addresses must not outlive it: they
    // are dropped before the call and again after it, so none computed
    // while it was being unmapped is kept.
    crate::hot::unwind::modules_changed();
    let r = match real::c_fn(Sym::Dlclose) {
        0 => -1,
        a => call!(a, fn(*mut c_void) -> c_int, handle),
    };
    crate::hot::unwind::modules_changed();
    r
}

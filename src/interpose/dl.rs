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

/// What the dlopen trampoline does: jump to `real` (0: fail), or call it
/// and hand its result to [`dlopen_after`] when `call` is set.
#[repr(C)]
struct Plan {
    real: usize,
    call: usize,
}

/// Called by the dlopen trampoline with the caller's arguments.
///
/// When another allocator came before heaplive in `LD_PRELOAD`
/// (`hot::winner`), the new library binds malloc to it: its slots must be
/// redirected to heaplive after the real dlopen, which the trampoline
/// then calls instead of jumping to it. glibc then sees heaplive as the
/// caller, which only matters for a name it searches or expands (no '/',
/// or a `$ORIGIN`-like token: the caller's RUNPATH and origin): those
/// still jump, and their slots are redirected at the next dlopen or
/// dlclose.
extern "C" fn dlopen_prepare(file: *const c_char, flags: c_int) -> Plan {
    let _errno = crate::hot::sys::ErrnoGuard::save();
    if flags & libc::RTLD_DEEPBIND != 0 && !NOTED.swap(true, Relaxed) {
        crate::hot::log::line(format_args!(
            "heaplive[{}]: dlopen with RTLD_DEEPBIND: flag cleared so that the library's allocations are seen (said once)",
            crate::hot::sys::getpid()
        ));
    }
    let real = real::c_fn(Sym::Dlopen);
    let mut call = 0;
    if crate::hot::winner::winner() == crate::hot::winner::Winner::Library
        && !crate::hot::guard::busy()
        && !crate::hot::forking::inert()
    {
        redirect_loaded();
        // SAFETY: dlopen's contract: NULL or a NUL-terminated name.
        let name = (!file.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(file) }.to_bytes());
        if name.is_none_or(|n| n.contains(&b'/') && !n.contains(&b'$')) {
            call = 1;
        }
    }
    Plan { real, call }
}

/// The modules loaded since the last redirection get their slots
/// redirected to heaplive (another allocator first in `LD_PRELOAD`).
fn redirect_loaded() {
    let _busy = crate::hot::guard::Busy::enter();
    if let Some(s) = crate::hot::services::get() {
        (s.redirect_loaded)();
    }
}

/// After a dlopen the trampoline called (see [`dlopen_prepare`]).
extern "C" fn dlopen_after(handle: *mut c_void) -> *mut c_void {
    if !handle.is_null() {
        let _errno = crate::hot::sys::ErrnoGuard::save();
        redirect_loaded();
    }
    handle
}

/// `void *dlopen(const char *file, int flags)`: a trampoline that keeps the
/// caller's return address for the real dlopen (or, see
/// [`dlopen_prepare`], calls it and redirects the new library's slots).
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
        "call {prepare}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        // RTLD_DEEPBIND is 0x8.
        "and esi, -9",
        "test rax, rax",
        "jz 2f",
        "test rdx, rdx",
        "jnz 3f",
        "jmp rax",
        "2:",
        "xor eax, eax",
        "ret",
        // Called: the stack aligned to 16 for both calls.
        "3:",
        "sub rsp, 8",
        "call rax",
        "mov rdi, rax",
        "call {after}",
        "add rsp, 8",
        "ret",
        prepare = sym dlopen_prepare,
        after = sym dlopen_after,
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
            if crate::hot::winner::winner() == crate::hot::winner::Winner::Library {
                (s.redirect_loaded)();
            }
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

//! Threads: heaplive's own is made with the real pthread_create; a program
//! thread inherits its creator's virtual mask bit for the dump signal, as
//! it inherits the real mask.

use crate::hot::real::{self, Sym, call};
use crate::hot::{guard, sys};

pub type Start = extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;

/// The real pthread_create.
///
/// # Safety
/// As pthread_create.
pub unsafe fn create(
    tid: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Start,
    arg: *mut libc::c_void,
) -> i32 {
    match real::c_fn(Sym::PthreadCreate) {
        0 => libc::EAGAIN,
        a => call!(
            a,
            fn(*mut libc::pthread_t, *const libc::pthread_attr_t, Start, *mut libc::c_void) -> i32,
            tid,
            attr,
            start,
            arg
        ),
    }
}

/// heaplive's own thread (no argument).
///
/// # Safety
/// As pthread_create.
pub unsafe fn create_raw(
    tid: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Start,
) -> i32 {
    // SAFETY: guaranteed by the caller.
    unsafe { create(tid, attr, start, core::ptr::null_mut()) }
}

/// A program thread whose creator had the dump signal virtually blocked.
#[repr(C)]
pub struct Inherit {
    pub start: Start,
    pub arg: *mut libc::c_void,
}

/// The start of such a thread: the bit, then the program's function.
pub extern "C" fn start_blocked(p: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `p` is the Inherit the creator allocated for this thread.
    let Inherit { start, arg } = unsafe { core::ptr::read(p as *const Inherit) };
    {
        let _busy = guard::Busy::enter();
        // SAFETY: allocated with the real malloc by the creator.
        unsafe { real::free(p) };
    }
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).dump_sig_blocked = 1 };
    start(arg)
}

/// Does the calling thread have the dump signal virtually blocked?
pub fn creator_blocks() -> bool {
    // SAFETY: this thread's own state.
    crate::hot::signal::signal() != 0 && unsafe { (*guard::state()).dump_sig_blocked } != 0
}

/// pthread_exit's part: the main thread leaving.
pub fn before_thread_exit() {
    if sys::gettid() == sys::getpid() as i32 {
        crate::hot::trigger::main_exits();
    }
}

//! The dump signal, and a handler the program cannot take away.
//!
//! php-fpm workers reset SIGUSR2 to SIG_DFL after fork, and Zend's signal
//! layer installs a deferring handler mid-request that re-raises with the
//! default action: with a plain handler, `kill -USR2 <worker>` kills it. So
//! for the dump signal only, sigaction, signal, sysv_signal, bsd_signal and
//! sigset are interposed (`interpose::signals`): the program sees and sets
//! a *virtual* disposition, kept here; the real one stays ours. Our handler asks for a dump, then
//! calls the program's handler if that is a function (never applying
//! SIG_DFL or SIG_IGN). Every other signal passes straight through.

use crate::hot::lock::{Rank, SpinLock};
use crate::hot::real::{self, Sym, call};
use core::ffi::c_int;
use core::sync::atomic::{AtomicI32, AtomicUsize, Ordering::*};

static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The program's virtual handler and flags, read by our signal handler.
static APP_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static APP_FLAGS: AtomicI32 = AtomicI32::new(0);
/// The whole virtual sigaction, for the program to read back.
static APP_ACTION: SpinLock<Option<libc::sigaction>> = SpinLock::new(Rank::SignalAction, None);

pub fn real_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    match real::c_fn(Sym::Sigaction) {
        0 => {
            crate::hot::sys::set_errno(libc::ENOSYS);
            -1
        }
        a => call!(
            a,
            fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int,
            sig,
            act,
            old
        ),
    }
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut core::ffi::c_void) {
    crate::hot::trigger::request_from_signal();
    let h = APP_HANDLER.load(Acquire);
    let flags = APP_FLAGS.load(Acquire);
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return;
    }
    if flags & libc::SA_RESETHAND != 0 {
        // One-shot handler: the program's disposition becomes the default.
        APP_HANDLER.store(libc::SIG_DFL, Release);
        APP_FLAGS.store(0, Release);
    }
    // SAFETY: the program installed this function for this signal with
    // these flags.
    unsafe {
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void) =
                core::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(c_int) = core::mem::transmute(h);
            f(sig);
        }
    }
}

/// Installs our handler for the configured signal (at load), keeping what
/// was there as the program's virtual disposition.
pub fn install() {
    let sig = crate::hot::config::get().signal;
    if sig == 0 {
        return;
    }
    // SAFETY: zeroed sigaction is valid; sa_mask is emptied.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = on_signal as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    if real_sigaction(sig, &act, &mut old) != 0 {
        crate::hot::log::line(format_args!(
            "heaplive: cannot install the handler for signal {sig}; signal dumps are off"
        ));
        return;
    }
    APP_HANDLER.store(old.sa_sigaction, Release);
    APP_FLAGS.store(old.sa_flags, Release);
    *APP_ACTION.lock() = Some(old);
    SIGNAL.store(sig, Release);
}

#[inline]
pub fn is_dump_signal(sig: c_int) -> bool {
    sig != 0 && sig == SIGNAL.load(Acquire)
}

/// The virtual half of sigaction for the dump signal.
pub fn virtual_sigaction(act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let mut cur = APP_ACTION.lock();
    if !old.is_null() {
        let v = cur.unwrap_or_else(|| {
            // SAFETY: zeroed is SIG_DFL with no flags.
            let mut z: libc::sigaction = unsafe { core::mem::zeroed() };
            z.sa_sigaction = libc::SIG_DFL;
            z
        });
        // SAFETY: the caller gives a valid out-pointer.
        unsafe { *old = v };
    }
    if !act.is_null() {
        // SAFETY: the caller gives a valid sigaction.
        let a = unsafe { *act };
        APP_FLAGS.store(a.sa_flags, Release);
        APP_HANDLER.store(a.sa_sigaction, Release);
        *cur = Some(a);
    }
    0
}

pub fn set_simple(handler: libc::sighandler_t, flags: c_int) -> libc::sighandler_t {
    // SAFETY: zeroed sigaction with an empty mask.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    virtual_sigaction(&act, &mut old);
    old.sa_sigaction
}

pub fn lock_for_fork() {
    APP_ACTION.lock_raw();
}

/// # Safety
/// Fork handlers only, paired with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { APP_ACTION.unlock_raw() };
}

//! The signal functions, for the dump signal only: the program sees and
//! sets a virtual disposition (`hot::signal`); every other signal goes
//! straight to libc.

use crate::hot::real::{self, Sym, call};
use crate::hot::signal::{self, is_dump_signal, real_sigaction, set_simple, virtual_sigaction};
use core::ffi::c_int;

/// `sigaction`.
///
/// # Safety
/// The contract of C's `sigaction` (signal(7)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if is_dump_signal(sig) {
        return virtual_sigaction(act, old);
    }
    real_sigaction(sig, act, old)
}

macro_rules! simple_signal_export {
    ($name:ident, $sym:ident, $flags:expr) => {
        /// # Safety
        /// The contract of the C function of the same name.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            sig: c_int,
            handler: libc::sighandler_t,
        ) -> libc::sighandler_t {
            if is_dump_signal(sig) {
                return set_simple(handler, $flags);
            }
            match real::c_fn(Sym::$sym) {
                0 => libc::SIG_ERR,
                a => call!(
                    a,
                    fn(c_int, libc::sighandler_t) -> libc::sighandler_t,
                    sig,
                    handler
                ),
            }
        }
    };
}

// glibc's signal() and bsd_signal() have BSD semantics; sysv_signal()
// resets the handler on delivery and does not block the signal.
simple_signal_export!(signal, Signal, libc::SA_RESTART);
simple_signal_export!(bsd_signal, BsdSignal, libc::SA_RESTART);
simple_signal_export!(
    sysv_signal,
    SysvSignal,
    libc::SA_RESETHAND | libc::SA_NODEFER
);

const SIG_HOLD: libc::sighandler_t = 2;

/// `sigset`.
///
/// # Safety
/// The contract of C's `sigset` (signal(7)).
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigset(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if is_dump_signal(sig) && handler != SIG_HOLD {
        return set_simple(handler, 0);
    }
    match real::c_fn(Sym::Sigset) {
        0 => libc::SIG_ERR,
        a => call!(
            a,
            fn(c_int, libc::sighandler_t) -> libc::sighandler_t,
            sig,
            handler
        ),
    }
}

// ---------------------------------------------------------------------------
// The mask: the dump signal stays blocked in every program thread; the
// program reads and sets a virtual bit (`hot::signal`).

type SigSet = libc::sigset_t;

fn real_mask_fn(sym: Sym, how: c_int, set: *const SigSet, old: *mut SigSet) -> c_int {
    match real::c_fn(sym) {
        0 => {
            crate::hot::sys::set_errno(libc::ENOSYS);
            -1
        }
        a => call!(
            a,
            fn(c_int, *const SigSet, *mut SigSet) -> c_int,
            how,
            set,
            old
        ),
    }
}

/// `sigprocmask`.
///
/// # Safety
/// The contract of C's `sigprocmask`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigprocmask(how: c_int, set: *const SigSet, old: *mut SigSet) -> c_int {
    signal::mask_call(
        how,
        set,
        old,
        &|h, s, o| real_mask_fn(Sym::Sigprocmask, h, s, o),
        0,
    )
}

/// `pthread_sigmask`.
///
/// # Safety
/// The contract of C's `pthread_sigmask`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const SigSet,
    old: *mut SigSet,
) -> c_int {
    signal::mask_call(
        how,
        set,
        old,
        &|h, s, o| real_mask_fn(Sym::PthreadSigmask, h, s, o),
        0,
    )
}

/// `sigsuspend`.
///
/// # Safety
/// The contract of C's `sigsuspend`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigsuspend(mask: *const SigSet) -> c_int {
    let a = real::c_fn(Sym::Sigsuspend);
    if a == 0 {
        crate::hot::sys::set_errno(libc::ENOSYS);
        return -1;
    }
    if mask.is_null() || signal::signal() == 0 {
        return call!(a, fn(*const SigSet) -> c_int, mask);
    }
    let w = signal::Wait::new(mask);
    call!(a, fn(*const SigSet) -> c_int, &w.mask)
}

/// `pause`: when the program has a handler for the dump signal and admits
/// it, the signal wakes it, as without heaplive.
///
/// # Safety
/// The contract of C's `pause`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pause() -> c_int {
    if let Some(w) = signal::Wait::for_pause() {
        let a = real::c_fn(Sym::Sigsuspend);
        if a != 0 {
            return call!(a, fn(*const SigSet) -> c_int, &w.mask);
        }
    }
    match real::c_fn(Sym::Pause) {
        0 => {
            crate::hot::sys::set_errno(libc::ENOSYS);
            -1
        }
        a => call!(a, fn() -> c_int,),
    }
}

/// The mask a wait should really use: the program's, adjusted.
fn wait_for(mask: *const SigSet) -> Option<signal::Wait> {
    (!mask.is_null() && signal::signal() != 0).then(|| signal::Wait::new(mask))
}

fn mask_ptr(w: &Option<signal::Wait>, mask: *const SigSet) -> *const SigSet {
    w.as_ref().map_or(mask, |w| &w.mask as *const SigSet)
}

macro_rules! nosys {
    ($sym:ident) => {
        match real::c_fn(Sym::$sym) {
            0 => {
                crate::hot::sys::set_errno(libc::ENOSYS);
                return -1;
            }
            a => a,
        }
    };
}

/// A wait with a signal mask (the last argument): it waits with the mask
/// that [`wait_for`] makes of the program's.
macro_rules! masked_wait_export {
    ($(#[$doc:meta])* $name:ident, $sym:ident, ($($arg:ident: $t:ty),*)) => {
        $(#[$doc])*
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name($($arg: $t,)* mask: *const SigSet) -> c_int {
            let a = nosys!($sym);
            let wait = wait_for(mask);
            call!(a, fn($($t,)* *const SigSet) -> c_int, $($arg,)* mask_ptr(&wait, mask))
        }
    };
}

masked_wait_export!(
    /// `pselect`.
    ///
    /// # Safety
    /// The contract of C's `pselect`.
    pselect,
    Pselect,
    (
        n: c_int,
        r: *mut libc::fd_set,
        w: *mut libc::fd_set,
        e: *mut libc::fd_set,
        timeout: *const libc::timespec
    )
);
masked_wait_export!(
    /// `ppoll`.
    ///
    /// # Safety
    /// The contract of C's `ppoll`.
    ppoll,
    Ppoll,
    (fds: *mut libc::pollfd, n: libc::nfds_t, timeout: *const libc::timespec)
);
masked_wait_export!(
    /// `epoll_pwait`.
    ///
    /// # Safety
    /// The contract of C's `epoll_pwait`.
    epoll_pwait,
    EpollPwait,
    (epfd: c_int, events: *mut libc::epoll_event, max: c_int, timeout: c_int)
);
masked_wait_export!(
    /// `epoll_pwait2`.
    ///
    /// # Safety
    /// The contract of C's `epoll_pwait2`.
    epoll_pwait2,
    EpollPwait2,
    (
        epfd: c_int,
        events: *mut libc::epoll_event,
        max: c_int,
        timeout: *const libc::timespec
    )
);

/// `sigtimedwait`: a program waiting for the dump signal itself gets it.
///
/// # Safety
/// The contract of C's `sigtimedwait`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigtimedwait(
    set: *const SigSet,
    info: *mut libc::siginfo_t,
    timeout: *const libc::timespec,
) -> c_int {
    let a = nosys!(Sigtimedwait);
    signal::program_waits_for(set, "sigtimedwait");
    call!(
        a,
        fn(*const SigSet, *mut libc::siginfo_t, *const libc::timespec) -> c_int,
        set,
        info,
        timeout
    )
}

/// `sigwaitinfo`.
///
/// # Safety
/// The contract of C's `sigwaitinfo`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigwaitinfo(set: *const SigSet, info: *mut libc::siginfo_t) -> c_int {
    let a = nosys!(Sigwaitinfo);
    signal::program_waits_for(set, "sigwaitinfo");
    call!(
        a,
        fn(*const SigSet, *mut libc::siginfo_t) -> c_int,
        set,
        info
    )
}

/// `sigwait` (returns an error number).
///
/// # Safety
/// The contract of C's `sigwait`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigwait(set: *const SigSet, sig: *mut c_int) -> c_int {
    let a = match real::c_fn(Sym::Sigwait) {
        0 => return libc::ENOSYS,
        a => a,
    };
    signal::program_waits_for(set, "sigwait");
    call!(a, fn(*const SigSet, *mut c_int) -> c_int, set, sig)
}

/// `signalfd`.
///
/// # Safety
/// The contract of C's `signalfd`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn signalfd(fd: c_int, mask: *const SigSet, flags: c_int) -> c_int {
    let a = nosys!(Signalfd);
    signal::program_waits_for(mask, "signalfd");
    call!(a, fn(c_int, *const SigSet, c_int) -> c_int, fd, mask, flags)
}

/// `raise`: see `hot::signal::raise_here`.
///
/// # Safety
/// The contract of C's `raise`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn raise(sig: c_int) -> c_int {
    let a = nosys!(Raise);
    if is_dump_signal(sig) {
        return signal::raise_here(&|| call!(a, fn(c_int) -> c_int, sig));
    }
    call!(a, fn(c_int) -> c_int, sig)
}

/// `pthread_kill`: the dump signal to the calling thread is `raise`; to
/// another program thread see `hot::signal::to_other_thread`.
///
/// # Safety
/// The contract of C's `pthread_kill`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_kill(t: libc::pthread_t, sig: c_int) -> c_int {
    let a = match real::c_fn(Sym::PthreadKill) {
        0 => return libc::ENOSYS,
        a => a,
    };
    let real = || call!(a, fn(libc::pthread_t, c_int) -> c_int, t, sig);
    if !is_dump_signal(sig) {
        return real();
    }
    // SAFETY: pthread_self and pthread_equal have no preconditions.
    if unsafe { libc::pthread_equal(t, libc::pthread_self()) } != 0 {
        return signal::raise_here(&real);
    }
    signal::to_other_thread(Some(t), None).unwrap_or_else(real)
}

/// `tgkill`: the dump signal to a thread of this process is `raise` or
/// `pthread_kill`'s.
///
/// # Safety
/// The contract of C's `tgkill`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn tgkill(tgid: libc::pid_t, tid: libc::pid_t, sig: c_int) -> c_int {
    // glibc's tgkill is the system call alone.
    // SAFETY: the caller's arguments, passed on.
    let real = || unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) as c_int };
    if !is_dump_signal(sig) || tgid != crate::hot::sys::getpid() as libc::pid_t {
        return real();
    }
    if tid == crate::hot::sys::gettid() {
        return signal::raise_here(&real);
    }
    match signal::to_other_thread(None, Some(tid)) {
        None => real(),
        Some(0) => 0,
        Some(e) => {
            crate::hot::sys::set_errno(e);
            -1
        }
    }
}

/// `kill`: the dump signal to this process is the program's own (see
/// `hot::signal::send_own`); from heaplive's thread see
/// `hot::signal::reraise`.
///
/// # Safety
/// The contract of C's `kill`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn kill(pid: libc::pid_t, sig: c_int) -> c_int {
    let a = nosys!(Kill);
    if signal::reraise(pid, sig) {
        return 0;
    }
    let real = || call!(a, fn(libc::pid_t, c_int) -> c_int, pid, sig);
    if is_dump_signal(sig) {
        if pid == crate::hot::sys::getpid() as libc::pid_t {
            return signal::send_own(&signal::own_info(None), &real);
        }
        if pid == 0 || pid < -1 {
            // Its process group, this process among them: heaplive's
            // thread takes this process's copy (and hands it to the
            // program, see `hot::signal::deliver_own`).
            crate::hot::trigger::ensure_dumper();
        }
    }
    real()
}

/// `sigqueue`: the dump signal to this process is the program's own, as
/// `kill`'s.
///
/// # Safety
/// The contract of C's `sigqueue`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn sigqueue(pid: libc::pid_t, sig: c_int, value: libc::sigval) -> c_int {
    // glibc's sigqueue: this siginfo and the system call.
    let mut info = signal::own_info(Some(value.sival_ptr as usize));
    // SAFETY: a siginfo_t starts with si_signo.
    unsafe { *(&mut info as *mut libc::siginfo_t as *mut c_int) = sig };
    // SAFETY: a valid siginfo.
    let real = || unsafe {
        libc::syscall(
            libc::SYS_rt_sigqueueinfo,
            pid,
            sig,
            &info as *const libc::siginfo_t,
        ) as c_int
    };
    if is_dump_signal(sig) && pid == crate::hot::sys::getpid() as libc::pid_t {
        return signal::send_own(&info, &real);
    }
    real()
}

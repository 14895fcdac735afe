//! The dump signal: a disposition and a mask the program cannot take away,
//! and a signal that never lands on a program thread.
//!
//! **Disposition.** php-fpm workers reset SIGUSR2 to SIG_DFL after fork, and
//! Zend's signal layer installs a deferring handler mid-request that
//! re-raises with the default action: with a plain handler,
//! `kill -USR2 <worker>` kills it. So for the dump signal only, sigaction,
//! signal, sysv_signal, bsd_signal and sigset are interposed
//! (`interpose::signals`): the program sees and sets a *virtual*
//! disposition, kept here; the real one stays ours.
//!
//! **Mask.** The dump signal is blocked in every program thread (from the
//! constructor on, before the program starts a thread; threads inherit the
//! mask) and taken by heaplive's own thread with `sigtimedwait`, so the
//! kernel never interrupts a program thread with it: no `EINTR`, no cut
//! sleep. The program sees the mask it set: each thread's virtual bit lives
//! in its `ThreadState`, and every function that reads, sets or waits with
//! a mask is interposed (sigprocmask, pthread_sigmask, sigsuspend, pselect,
//! ppoll, epoll_pwait, the sigwait family, signalfd, posix_spawn, exec).
//!
//! **The program's own handler** runs on heaplive's thread, right after the
//! snapshot (`deliver_to_program`): a process-directed signal may go to any
//! thread that does not block it, and heaplive's thread is such a thread.
//! Exception: a program thread that *waits* for signals with a mask that
//! admits the dump signal (sigsuspend, pause, pselect, ppoll, epoll_pwait)
//! really admits it, so the kernel (or heaplive's thread, forwarding) wakes
//! that thread and the handler runs there, as without heaplive.
//!
//! **sigwait, signalfd:** a program that waits for the dump signal itself
//! gets it: heaplive stops taking it (one line says so) and no longer dumps
//! on it.
//!
//! **The program's own signals.** Only a signal from another process
//! (`kill`/`sigqueue`/`tgkill` with another `si_pid`, or the kernel's
//! `SI_KERNEL`) is a dump request. One the program sends itself (`si_pid`
//! is its own pid; or a timer, AIO, message queue or SIGIO it set up) is
//! the program's, delivered as the kernel would without heaplive
//! (`deliver_own_here`, `deliver_own`): its handler with the same siginfo,
//! its sa_mask, SA_NODEFER, SA_RESETHAND; SIG_IGN drops it; SIG_DFL takes
//! the kernel's default action, so the process ends by that signal
//! (`die_by`). The wrappers of kill, sigqueue, raise, pthread_kill and
//! tgkill send such a signal where the kernel would deliver it: to the
//! calling thread (at once, or pending until it unblocks the signal), to
//! a thread waiting for it, else to heaplive's thread, which runs the
//! handler (`send_own`, `to_other_thread`).

use crate::hot::lock::{Rank, SpinLock};
use crate::hot::real::{self, Sym, call};
use crate::hot::{guard, sys};
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The program's virtual handler and flags, read by the signal paths.
static APP_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static APP_FLAGS: AtomicI32 = AtomicI32::new(0);
/// The program's sa_mask (the kernel's 64 signals), for its own signals.
static APP_MASK: AtomicU64 = AtomicU64::new(0);
/// The whole virtual sigaction (mask, restorer), for the program to read
/// back; its handler and flags are the atomics above.
static APP_ACTION: SpinLock<Option<libc::sigaction>> = SpinLock::new(Rank::SignalAction, None);
/// The program waits for the dump signal itself (sigwait, signalfd).
static STEPPED_ASIDE: AtomicBool = AtomicBool::new(false);
/// Program threads in a wait that admits the dump signal, and the latest.
static WAITERS: AtomicU32 = AtomicU32::new(0);
static WAITER_TID: AtomicI32 = AtomicI32::new(0);
/// Signals heaplive's thread forwarded to a waiting program thread (their
/// dump was taken already).
static FORWARDED: AtomicU32 = AtomicU32::new(0);
/// A dump signal heaplive's thread took: when (0 = none yet), and from
/// whom.
struct Taken {
    ns: AtomicU64,
    pid: AtomicI32,
    uid: AtomicU32,
}
static LAST_TAKEN: Taken = Taken {
    ns: AtomicU64::new(0),
    pid: AtomicI32::new(0),
    uid: AtomicU32::new(0),
};
/// Dump signals the program's handler sent its own process from
/// heaplive's thread (Zend's handler re-raises with the default action):
/// they reach the program's handler but ask for no dump of their own.
static RERAISED: AtomicU32 = AtomicU32::new(0);
/// When the program's handler last got a dump request (0: not since the
/// last re-raise taken). Zend's signal layer may defer that signal and
/// re-raise it later on the PHP thread with the default action
/// (`kill(getpid())` after setting SIG_DFL): that re-raise is the dump
/// request's, not the program's, and must not end the process.
static OWED_NS: AtomicU64 = AtomicU64::new(0);
/// How long after a dump request reached the program's handler a SIG_DFL
/// signal of the program's own counts as that request's re-raise.
const OWED_FOR_NS: u64 = 1_000_000_000;
/// si_value of heaplive's own wake-up signal ("heaplive").
const WAKE: usize = 0x6865_6170_6c69_7665;
/// The high half of the si_value that stands for a kill() of the program's
/// (`SI_USER`, which the kernel lets a thread queue only to itself) when
/// heaplive's thread hands it to a program thread as `SI_QUEUE`; the low
/// half is the sender's uid.
const KILL_TAG: usize = 0x484c_4b49; // "HLKI"

pub fn real_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    match real::c_fn(Sym::Sigaction) {
        0 => {
            sys::set_errno(libc::ENOSYS);
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

/// The configured dump signal, once installed (0: none).
#[inline]
pub fn signal() -> c_int {
    SIGNAL.load(Acquire)
}

#[inline]
pub fn is_dump_signal(sig: c_int) -> bool {
    sig != 0 && sig == SIGNAL.load(Acquire)
}

fn bit() -> u64 {
    sys::sig_bit(signal())
}

/// Is the program's disposition a function (not SIG_DFL, SIG_IGN)?
pub fn program_handles() -> bool {
    let h = APP_HANDLER.load(Acquire);
    h != libc::SIG_DFL && h != libc::SIG_IGN
}

/// Runs the program's handler, if it has one. A one-shot handler
/// (SA_RESETHAND) becomes SIG_DFL first, and runs once however many
/// threads race here.
fn chain(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut core::ffi::c_void) {
    let h = APP_HANDLER.load(Acquire);
    let flags = APP_FLAGS.load(Acquire);
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return;
    }
    if flags & libc::SA_RESETHAND != 0
        && APP_HANDLER
            .compare_exchange(h, libc::SIG_DFL, AcqRel, Acquire)
            .is_err()
    {
        return;
    }
    // SAFETY: the program installed this function for this signal with
    // these flags.
    unsafe { call_handler(h, flags, sig, info, ctx) };
}

/// Did the program send `info` itself (not a dump request)? A kill,
/// sigqueue or tgkill with its own pid as the sender; or a signal it set
/// up itself: a timer, AIO, a message queue, SIGIO (negative codes but
/// SI_USER's, SI_QUEUE's and SI_TKILL's; positive ones but SI_KERNEL).
/// `si_pid` 0 (a sender outside the process's pid namespace) and
/// SI_KERNEL (a terminal's) come from outside.
pub fn from_program(info: *const libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the kernel's (or our) siginfo for this signal.
    let q = sys::queued(unsafe { &*info });
    match q.code {
        libc::SI_USER | libc::SI_QUEUE | libc::SI_TKILL => q.pid == sys::getpid() as i32,
        libc::SI_KERNEL => false,
        _ => true,
    }
}

/// A kill() of the program's that heaplive's thread passed on as
/// SI_QUEUE (`KILL_TAG`) gets its SI_USER siginfo back.
fn untag(info: &mut libc::siginfo_t) {
    let q = sys::queued_mut(info);
    if q.code == libc::SI_QUEUE && q.value >> 32 == KILL_TAG {
        q.code = libc::SI_USER;
        q.uid = q.value as u32;
        q.value = 0;
    }
}

/// The siginfo the kernel gives a kill() (`value` None, SI_USER) or a
/// sigqueue() (SI_QUEUE with `value`) from this process.
pub fn own_info(value: Option<usize>) -> libc::siginfo_t {
    // SAFETY: zeroed is a valid siginfo.
    let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
    let q = sys::queued_mut(&mut info);
    q.signo = signal();
    q.code = if value.is_some() {
        libc::SI_QUEUE
    } else {
        libc::SI_USER
    };
    q.pid = sys::getpid() as i32;
    // SAFETY: getuid has no preconditions.
    q.uid = unsafe { libc::getuid() };
    q.value = value.unwrap_or(0);
    info
}

/// The kernel's default action for `sig` (the program's disposition is
/// SIG_DFL): nothing for the signals it ignores; otherwise the real
/// disposition becomes SIG_DFL and the signal is sent to this thread,
/// unblocked, so the kernel ends the process by it (with a core where it
/// would make one) or stops it; heaplive's handler comes back after a
/// stop.
fn die_by(sig: c_int) {
    let owed = OWED_NS.swap(0, AcqRel);
    if owed != 0 && sys::now_nanos().saturating_sub(owed) < OWED_FOR_NS {
        // The re-raise of a dump request the handler deferred (see
        // `OWED_NS`): a dump request never ends the process.
        return;
    }
    if matches!(
        sig,
        libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH | libc::SIGCONT
    ) {
        return;
    }
    let _errno = sys::ErrnoGuard::save();
    // SAFETY: zeroed is SIG_DFL with no flags and an empty mask.
    let dfl: libc::sigaction = unsafe { core::mem::zeroed() };
    real_sigaction(sig, &dfl, core::ptr::null_mut());
    let mut old = 0u64;
    sys::sigmask(libc::SIG_UNBLOCK, Some(sys::sig_bit(sig)), Some(&mut old));
    // SAFETY: a signal to this thread.
    unsafe { libc::syscall(libc::SYS_tgkill, sys::getpid() as i32, sys::gettid(), sig) };
    sys::sigmask(libc::SIG_SETMASK, Some(old), None);
    real_sigaction(sig, &our_action(), core::ptr::null_mut());
}

/// Calls the program's handler `h` as installed with `flags`.
///
/// # Safety
/// `h` is the program's handler for `sig`.
unsafe fn call_handler(
    h: usize,
    flags: c_int,
    sig: c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut core::ffi::c_void,
) {
    // SAFETY: guaranteed by the caller.
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

/// The program's handler for a signal of its own, or None when there is
/// nothing to run: SIG_IGN drops it, SIG_DFL takes the default action
/// (`die_by`) first.
fn own_handler(sig: c_int) -> Option<usize> {
    match APP_HANDLER.load(Acquire) {
        libc::SIG_IGN => None,
        libc::SIG_DFL => {
            die_by(sig);
            None
        }
        h => Some(h),
    }
}

/// A signal of the program's own on this program thread (in heaplive's
/// handler, or sent by a wrapper): what the kernel would do with it here.
/// The handler runs with the program's sa_mask added and the signal
/// blocked unless SA_NODEFER (the virtual bit says so), a one-shot
/// handler becomes SIG_DFL first; errno is the thread's own (a handler's
/// change stays, as without heaplive).
fn deliver_own_here(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut core::ffi::c_void) {
    let saved = sys::errno();
    if !info.is_null() {
        // SAFETY: the siginfo of this delivery.
        untag(unsafe { &mut *info });
    }
    let Some(h) = own_handler(sig) else {
        return;
    };
    let flags = APP_FLAGS.load(Acquire);
    if flags & libc::SA_RESETHAND != 0
        && APP_HANDLER
            .compare_exchange(h, libc::SIG_DFL, AcqRel, Acquire)
            .is_err()
    {
        return;
    }
    let b = bit();
    let mask = APP_MASK.load(Acquire);
    let mut before = 0u64;
    sys::sigmask(libc::SIG_BLOCK, Some(mask & !b), Some(&mut before));
    let st = guard::state();
    // SAFETY: this thread's own state.
    let was = unsafe { (*st).dump_sig_blocked };
    let during = was != 0 || flags & libc::SA_NODEFER == 0 || mask & b != 0;
    // SAFETY: as above.
    unsafe {
        if during && was == 0 {
            (*st).blocked_since = sys::now_nanos();
        }
        (*st).dump_sig_blocked = during as u32;
    }
    sys::set_errno(saved);
    // SAFETY: the program installed `h` for this signal with `flags`.
    unsafe { call_handler(h, flags, sig, info, ctx) };
    // SAFETY: this thread's own state.
    unsafe { (*st).dump_sig_blocked = was };
    sys::sigmask(libc::SIG_SETMASK, Some(before), None);
    if was == 0 && during {
        // One the handler sent this thread meanwhile (blocked during the
        // handler) comes now, as the kernel delivers it after the handler.
        let_pending_in(b);
    }
}

/// The real handler. It runs only on a program thread that really admits
/// the signal: one waiting with a mask that admits it while the program has
/// a handler, or inside system(), popen() or an exec; or one the program
/// sent itself (raise, kill, sigqueue) that this thread admits.
extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut core::ffi::c_void) {
    // The program's own signal: no dump, and what the kernel would do.
    if from_program(info) {
        deliver_own_here(sig, info, ctx);
        return;
    }
    // `heaplive start/stop PID`: a command for heaplive only.
    if crate::hot::trigger::command_from_signal(info) {
        return;
    }
    let saved = sys::errno();
    let forwarded = FORWARDED
        .fetch_update(AcqRel, Acquire, |n| n.checked_sub(1))
        .is_ok();
    if !forwarded && !STEPPED_ASIDE.load(Acquire) {
        crate::hot::trigger::request_from_signal();
    }
    if program_handles() {
        OWED_NS.store(sys::now_nanos(), Release);
    }
    chain(sig, info, ctx);
    sys::set_errno(saved);
}

fn our_action() -> libc::sigaction {
    // SAFETY: zeroed sigaction is valid; sa_mask is emptied.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = on_signal as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    act
}

/// Installs our handler for the configured signal (at load), keeping what
/// was there as the program's virtual disposition, and blocks the signal
/// in this thread (the main thread, before the program starts any), keeping
/// whether the program had blocked it as the thread's virtual bit.
pub fn install() {
    let sig = crate::hot::config::get().signal;
    if sig == 0 {
        return;
    }
    let act = our_action();
    // SAFETY: zeroed is a valid out-value.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    if real_sigaction(sig, &act, &mut old) != 0 {
        crate::hot::log::line(format_args!(
            "heaplive: cannot install the handler for signal {sig}; signal dumps are off"
        ));
        return;
    }
    APP_HANDLER.store(old.sa_sigaction, Release);
    APP_FLAGS.store(old.sa_flags, Release);
    APP_MASK.store(sys::kmask_of(&old.sa_mask), Release);
    *APP_ACTION.lock() = Some(old);
    if crate::hot::attach::attached() {
        // Loaded by `heaplive attach` into a running program: its threads
        // exist already and their mask functions are not ours, so no mask
        // is touched (the program would see the change). A program thread
        // may take the signal then: `on_signal` hands it to heaplive's
        // thread, as for a thread that admits it.
        SIGNAL.store(sig, Release);
        return;
    }
    let b = sys::sig_bit(sig);
    let mut before = 0u64;
    sys::sigmask(libc::SIG_BLOCK, Some(b), Some(&mut before));
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).dump_sig_blocked = (before & b != 0) as u32 };
    SIGNAL.store(sig, Release);
}

/// `heaplive detach`: gives the dump signal back its previous action
/// (the application's, as it last set it through us).
pub fn uninstall() {
    let sig = SIGNAL.swap(0, AcqRel);
    if sig == 0 {
        return;
    }
    // The program's disposition as it is now (a one-shot handler may have
    // been reset since it set it); attached, no mask was changed.
    let old = *APP_ACTION.lock();
    // SAFETY: zeroed is SIG_DFL with no flags and an empty mask.
    let mut a = old.unwrap_or_else(|| unsafe { core::mem::zeroed() });
    a.sa_sigaction = APP_HANDLER.load(Acquire);
    a.sa_flags = APP_FLAGS.load(Acquire);
    real_sigaction(sig, &a, core::ptr::null_mut());
}

/// The virtual half of sigaction for the dump signal.
pub fn virtual_sigaction(act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let mut cur = APP_ACTION.lock();
    if !old.is_null() {
        let mut v = cur.unwrap_or_else(|| {
            // SAFETY: zeroed is SIG_DFL with no flags.
            unsafe { core::mem::zeroed() }
        });
        // The handler may have been reset by a one-shot delivery.
        v.sa_sigaction = APP_HANDLER.load(Acquire);
        v.sa_flags = APP_FLAGS.load(Acquire);
        // SAFETY: the caller gives a valid out-pointer.
        unsafe { *old = v };
    }
    if !act.is_null() {
        // SAFETY: the caller gives a valid sigaction.
        let a = unsafe { *act };
        APP_FLAGS.store(a.sa_flags, Release);
        APP_MASK.store(sys::kmask_of(&a.sa_mask), Release);
        APP_HANDLER.store(a.sa_sigaction, Release);
        *cur = Some(a);
        drop(cur);
        // The program's handler is delivered by heaplive's thread: it is
        // needed now, not only at the first sample.
        if program_handles() {
            crate::hot::trigger::ensure_dumper();
        }
    }
    0
}

pub fn set_simple(handler: libc::sighandler_t, flags: c_int) -> libc::sighandler_t {
    // SAFETY: zeroed sigaction with an empty mask.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: zeroed is a valid out-value.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    virtual_sigaction(&act, &mut old);
    old.sa_sigaction
}

// ---------------------------------------------------------------------------
// The virtual mask.

/// sigprocmask and pthread_sigmask for a program thread: the kernel keeps
/// the dump signal blocked whatever `set` says; `old` and later calls show
/// what the program set. `real` is the real function; `ok` its success
/// value.
pub fn mask_call(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
    real: &dyn Fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int,
    ok: c_int,
) -> c_int {
    let b = bit();
    if b == 0 {
        return real(how, set, old);
    }
    let st = guard::state();
    // SAFETY: this thread's own state.
    let was = unsafe { (*st).dump_sig_blocked } != 0;
    let mut now = was;
    let mut copy: libc::sigset_t;
    let mut p = set;
    if !set.is_null() {
        // SAFETY: the caller passes a valid set; it may alias `old`.
        copy = unsafe { *set };
        let has = sys::kmask_of(&copy) & b != 0;
        let m = sys::kmask_of(&copy);
        match how {
            libc::SIG_BLOCK => now |= has,
            libc::SIG_UNBLOCK => {
                now &= !has;
                sys::set_kmask(&mut copy, m & !b);
            }
            libc::SIG_SETMASK => {
                now = has;
                sys::set_kmask(&mut copy, m | b);
            }
            _ => {}
        }
        p = &copy;
    }
    let r = real(how, p, old);
    if r == ok {
        if !old.is_null() {
            let m = sys::kmask_of(old);
            sys::set_kmask(old, if was { m | b } else { m & !b });
        }
        // SAFETY: this thread's own state.
        unsafe {
            if now && !was {
                (*st).blocked_since = sys::now_nanos();
            }
            (*st).dump_sig_blocked = now as u32;
        }
        if was && !now {
            // A signal sent to this thread while the program blocked it
            // is delivered now, as without heaplive.
            let_pending_in(b);
        }
    }
    r
}

/// Admits the dump signal for an instant on this thread: one pending for
/// this thread (raise, pthread_kill) runs our handler here.
fn let_pending_in(b: u64) {
    sys::sigmask(libc::SIG_UNBLOCK, Some(b), None);
    sys::sigmask(libc::SIG_BLOCK, Some(b), None);
}

/// raise() of the dump signal (or pthread_kill of the calling thread):
/// when the program admits it, the handler runs before the call returns,
/// on this thread, as POSIX says.
pub fn raise_here(f: &dyn Fn() -> c_int) -> c_int {
    let b = bit();
    // SAFETY: this thread's own state.
    if b == 0 || unsafe { (*guard::state()).dump_sig_blocked } != 0 {
        return f();
    }
    sys::sigmask(libc::SIG_UNBLOCK, Some(b), None);
    let r = f();
    let _errno = sys::ErrnoGuard::save();
    sys::sigmask(libc::SIG_BLOCK, Some(b), None);
    r
}

/// kill() or sigqueue() of the dump signal to this process (`info` is what
/// the kernel would give it): the program's own signal. When this thread
/// admits it, it is delivered here before the call returns (POSIX: the
/// sending thread gets it); when it blocks it and has no other thread, it
/// waits here, pending, until unblocked (sigpending shows it); otherwise
/// (another program thread may admit it) `real` sends it to the process:
/// a thread waiting for it takes it, or heaplive's thread, which hands it
/// to the program's handler (`deliver_own`). Returns the call's result.
pub fn send_own(info: &libc::siginfo_t, real: &dyn Fn() -> c_int) -> c_int {
    let b = bit();
    // SAFETY: this thread's own state.
    let blocked = unsafe { (*guard::state()).dump_sig_blocked } != 0;
    let others = || {
        let own = crate::hot::trigger::dumper_running() as u32;
        crate::hot::forking::num_threads().is_none_or(|n| n > 1 + own)
    };
    if b == 0 || (blocked && (WAITERS.load(Acquire) > 0 || others())) {
        crate::hot::trigger::ensure_dumper();
        return real();
    }
    if !blocked {
        sys::sigmask(libc::SIG_UNBLOCK, Some(b), None);
    }
    // A thread may queue any siginfo to itself; the kernel delivers it on
    // the way out of this call when it is unblocked.
    let r = sys::tgsigqueueinfo(sys::gettid(), signal(), info);
    if !blocked {
        sys::sigmask(libc::SIG_BLOCK, Some(b), None);
    }
    if r != 0 {
        crate::hot::trigger::ensure_dumper();
        return real();
    }
    0
}

/// pthread_kill() or tgkill() of the dump signal to another program
/// thread (`pt` or `tid`): a thread-directed signal of the program's. A
/// thread waiting with a mask that admits it gets it from `real` (the
/// kernel's own siginfo); any other really blocks it, so heaplive's
/// thread gets it (the same siginfo, from tgkill) and runs the handler
/// at once. Returns 0 or an errno value; None: use `real`.
pub fn to_other_thread(pt: Option<libc::pthread_t>, tid: Option<i32>) -> Option<c_int> {
    // Stepped aside, heaplive's thread no longer takes the signal.
    if STEPPED_ASIDE.load(Acquire) || waiting(pt, tid).is_some() {
        return None;
    }
    crate::hot::trigger::ensure_dumper();
    let dumper = crate::hot::trigger::dumper_tid()?;
    let _errno = sys::ErrnoGuard::save();
    // SAFETY: a signal to heaplive's own thread.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, sys::getpid() as i32, dumper, signal()) };
    Some(if r == 0 { 0 } else { sys::errno() })
}

/// This thread's mask as the program sees it (kernel mask).
pub fn program_mask() -> u64 {
    let m = sys::current_mask();
    let b = bit();
    // SAFETY: this thread's own state.
    if b != 0 && unsafe { (*guard::state()).dump_sig_blocked } == 0 {
        m & !b
    } else {
        m
    }
}

/// A wait that installs the program's `mask` for its duration (sigsuspend,
/// pselect, ppoll, epoll_pwait). While alive it counts as a waiter when the
/// dump signal really reaches it.
pub struct Wait {
    pub mask: libc::sigset_t,
    waiter: bool,
    slot: usize,
}

/// Program threads in such a wait, by thread id and pthread_t, so that a
/// signal the program sends one of them goes to it (`to_other_thread`).
/// A wait beyond the slots is not found (its signal goes to heaplive's
/// thread).
const SLOTS: usize = 16;
static SLOT_TID: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static SLOT_PTHREAD: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

fn take_slot(tid: i32) -> usize {
    for (i, t) in SLOT_TID.iter().enumerate() {
        if t.compare_exchange(0, tid, AcqRel, Relaxed).is_ok() {
            // SAFETY: pthread_self has no preconditions.
            SLOT_PTHREAD[i].store(unsafe { libc::pthread_self() } as usize, Release);
            return i;
        }
    }
    usize::MAX
}

/// The thread id of a program thread waiting for the dump signal: the
/// one with pthread_t `pt`, or thread id `tid`.
fn waiting(pt: Option<libc::pthread_t>, tid: Option<i32>) -> Option<i32> {
    (0..SLOTS).find_map(|i| {
        let t = SLOT_TID[i].load(Acquire);
        let hit = t != 0
            && (tid == Some(t) || pt.is_some_and(|p| SLOT_PTHREAD[i].load(Acquire) == p as usize));
        hit.then_some(t)
    })
}

impl Wait {
    /// The mask to give the kernel for the program's `mask`: the dump
    /// signal stays blocked unless the program admits it and has a handler
    /// for it (then this thread is woken as without heaplive).
    pub fn new(mask: *const libc::sigset_t) -> Wait {
        // SAFETY: the caller passes a valid set.
        let mut copy = unsafe { *mask };
        let b = bit();
        let m = sys::kmask_of(&copy);
        let waiter = b != 0 && m & b == 0 && program_handles() && !STEPPED_ASIDE.load(Acquire);
        let mut slot = usize::MAX;
        if waiter {
            WAITERS.fetch_add(1, AcqRel);
            let tid = sys::gettid();
            WAITER_TID.store(tid, Release);
            slot = take_slot(tid);
        } else if b != 0 {
            sys::set_kmask(&mut copy, m | b);
        }
        Wait {
            mask: copy,
            waiter,
            slot,
        }
    }

    /// pause(): sigsuspend with this thread's program mask, if the dump
    /// signal should wake it; None: a plain pause.
    pub fn for_pause() -> Option<Wait> {
        let b = bit();
        if b == 0 || !program_handles() || program_mask() & b != 0 {
            return None;
        }
        // SAFETY: zeroed is a valid sigset.
        let mut s: libc::sigset_t = unsafe { core::mem::zeroed() };
        sys::set_kmask(&mut s, program_mask());
        Some(Wait::new(&s))
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let (Some(p), Some(t)) = (SLOT_PTHREAD.get(self.slot), SLOT_TID.get(self.slot)) {
            p.store(0, Release);
            t.store(0, Release);
        }
        if self.waiter {
            let me = sys::gettid();
            let _ = WAITER_TID.compare_exchange(me, 0, AcqRel, Relaxed);
            WAITERS.fetch_sub(1, AcqRel);
        }
    }
}

/// The program waits for the signals in `set` itself (sigwait,
/// sigwaitinfo, sigtimedwait, signalfd): if the dump signal is one, step
/// aside for good, saying so once.
pub fn program_waits_for(set: *const libc::sigset_t, how: &str) {
    let b = bit();
    if b == 0 || set.is_null() || sys::kmask_of(set) & b == 0 {
        return;
    }
    if STEPPED_ASIDE.swap(true, AcqRel) {
        return;
    }
    // heaplive's thread may have taken a signal this thread had blocked
    // (and would find pending now): give the latest back.
    // SAFETY: this thread's own state.
    let st = unsafe { &*guard::state() };
    let taken = LAST_TAKEN.ns.load(Acquire);
    if st.dump_sig_blocked != 0 && taken != 0 && taken >= st.blocked_since {
        // SAFETY: zeroed is a valid siginfo.
        let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
        let q = sys::queued_mut(&mut info);
        q.signo = signal();
        q.code = libc::SI_QUEUE;
        q.pid = LAST_TAKEN.pid.load(Acquire);
        q.uid = LAST_TAKEN.uid.load(Acquire);
        sys::sigqueueinfo(signal(), &info);
    }
    if let Some(tid) = crate::hot::trigger::dumper_tid() {
        sys::tgsigqueueinfo(tid, signal(), &wake_info());
    }
    crate::hot::log::line(format_args!(
        "heaplive[{}]: the program waits for signal {} itself ({}); heaplive leaves it to the program and no longer dumps on it",
        sys::getpid(),
        signal(),
        how
    ));
}

/// kill() of the dump signal to this process from heaplive's thread (the
/// program's handler runs there, and Zend's re-raises with the default
/// action): not sent, which would coalesce with a signal from outside and
/// lose its dump, but handed to the program's handler by
/// `deliver_to_program` when the handler returns. True: swallowed.
pub fn reraise(pid: c_int, sig: c_int) -> bool {
    if is_dump_signal(sig)
        && (pid == 0 || pid == sys::getpid() as c_int)
        // SAFETY: this thread's own state.
        && unsafe { (*guard::state()).heaplive_thread } != 0
    {
        RERAISED.fetch_add(1, AcqRel);
        return true;
    }
    false
}

pub fn stepped_aside() -> bool {
    STEPPED_ASIDE.load(Acquire)
}

// heaplive's thread (`signal/thread.rs`) and what a new image inherits
// (`signal/exec.rs`).
mod exec;
mod thread;
pub use exec::*;
pub use thread::*;

pub fn lock_for_fork() {
    APP_ACTION.lock_raw();
}

/// # Safety
/// Fork handlers only, paired with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { APP_ACTION.unlock_raw() };
}

//! The dump signal on heaplive's thread: the set it waits for, the wake-up
//! signal, a signal handed to the program's handler or given back.
//!
//! Part of `hot::signal` (re-exported there: every
//! `crate::hot::signal::*` path stays).

use super::*;

/// The signals heaplive's thread waits for.
pub fn dumper_wait_set() -> u64 {
    if STEPPED_ASIDE.load(Acquire) {
        0
    } else {
        bit()
    }
}

/// heaplive's own wake-up (queued by `wake_info`), not a dump request from
/// outside.
pub fn is_wake(info: &libc::siginfo_t) -> bool {
    let q = sys::queued(info);
    q.code == libc::SI_QUEUE && q.value == WAKE && q.pid == sys::getpid() as i32
}

/// The siginfo of heaplive's wake-up.
pub fn wake_info() -> libc::siginfo_t {
    // SAFETY: zeroed is a valid siginfo.
    let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
    let q = sys::queued_mut(&mut info);
    q.signo = signal();
    q.code = libc::SI_QUEUE;
    q.pid = sys::getpid() as i32;
    // SAFETY: getuid has no preconditions.
    q.uid = unsafe { libc::getuid() };
    q.value = WAKE;
    info
}

/// A signal queued again from heaplive's thread: the kernel refuses a
/// kill()-style code (SI_USER) from any thread but the main one, so it
/// becomes SI_QUEUE with the sender's pid and uid kept.
fn requeued(info: &libc::siginfo_t) -> libc::siginfo_t {
    let mut i = *info;
    let q = sys::queued_mut(&mut i);
    if q.code >= 0 || q.code == libc::SI_TKILL {
        q.code = libc::SI_QUEUE;
    }
    i
}

/// heaplive's thread took `info` (and its snapshot): the program's handler
/// gets it, on a program thread waiting for it if there is one, else here.
pub fn deliver_to_program(info: &mut libc::siginfo_t) {
    let q = sys::queued(info);
    LAST_TAKEN.pid.store(q.pid, Release);
    LAST_TAKEN.uid.store(q.uid, Release);
    LAST_TAKEN.ns.store(sys::now_nanos(), Release);
    if !program_handles() {
        return;
    }
    OWED_NS.store(sys::now_nanos(), Release);
    let sig = signal();
    let tid = WAITER_TID.load(Acquire);
    if tid != 0 {
        FORWARDED.fetch_add(1, AcqRel);
        if sys::tgsigqueueinfo(tid, sig, &requeued(info)) == 0 {
            return;
        }
        let _ = FORWARDED.fetch_update(AcqRel, Acquire, |n| n.checked_sub(1));
    }
    run_here(sig, info);
}

/// Runs the program's handler on heaplive's thread, and the handler's
/// re-raises (see `reraise`), a few at most.
fn run_here(sig: c_int, info: &mut libc::siginfo_t) {
    // SAFETY: getcontext fills a valid context of this thread, which the
    // handler may read as its third argument.
    let mut ctx: libc::ucontext_t = unsafe { core::mem::zeroed() };
    unsafe { libc::getcontext(&mut ctx) };
    chain(sig, info, (&mut ctx as *mut libc::ucontext_t).cast());
    for _ in 0..4 {
        if RERAISED.swap(0, AcqRel) == 0 || !program_handles() {
            break;
        }
        let mut again = own_info(None);
        chain(sig, &mut again, (&mut ctx as *mut libc::ucontext_t).cast());
    }
    RERAISED.store(0, Release);
}

/// heaplive's thread took a signal the program sent itself (`from_program`):
/// no dump. SIG_IGN drops it, SIG_DFL takes the default action; a handler
/// runs on a program thread that waits for the signal (a process-directed
/// one: the kernel would pick that thread) or else here.
pub fn deliver_own(info: &mut libc::siginfo_t) {
    let sig = signal();
    if own_handler(sig).is_none() {
        return;
    }
    let q = sys::queued(info);
    let tid = WAITER_TID.load(Acquire);
    if q.code != libc::SI_TKILL && tid != 0 {
        let mut i = *info;
        let q = sys::queued_mut(&mut i);
        if q.code == libc::SI_USER {
            q.value = KILL_TAG << 32 | q.uid as usize;
            q.code = libc::SI_QUEUE;
        }
        if sys::tgsigqueueinfo(tid, sig, &i) == 0 {
            return;
        }
    }
    run_here(sig, info);
}

/// heaplive stepped aside after taking `info`: give it back to the process
/// for the program's sigwait or signalfd.
pub fn give_back(info: &libc::siginfo_t) {
    sys::sigqueueinfo(signal(), &requeued(info));
}

//! fork: the child keeps profiling with the samples it inherited (they are
//! really live there, copy-on-write), under its own pid, dump numbers,
//! eventfd and dumper thread.
//!
//! pthread_atfork handlers keep every lock consistent across fork():
//! prepare takes every lock of the library in rank order ([`FORK_ORDER`],
//! one entry per `hot::lock::Rank`), parent and child release them in
//! reverse. `_Fork`, vfork and posix_spawn run no handlers: vfork and
//! posix_spawn children only exec; a `_Fork` child that finds a lock held by
//! a thread that does not exist in it notices when it has spun for a while
//! (the pid changed) and resets the locks ([`check_orphaned_locks`]).

use crate::background::{dump, leak_report};
use crate::hot::guard::{self, Busy};
use crate::hot::lock::{self, Rank};
use crate::hot::{
    forking, leak_check, live, ownheap, pid, sampler, shadow, signal, stacks, sys, unwind,
};
use crate::symbolize::modules;
use core::sync::atomic::{Ordering::SeqCst, compiler_fence};

/// How long a fork's prepare handler waits for a lock whose holder may be
/// inside the real allocator (the dumper thread holds the dump lock while
/// it allocates): a fork from a signal handler that interrupted `malloc`
/// on this thread would otherwise wait for a thread that waits for this
/// one's arena lock.
pub const HIGH_LOCK_WAIT_NS: u64 = 100_000_000;

/// One lock rank's take and release, for the fork handlers.
pub struct ForkLock {
    #[cfg_attr(not(test), allow(dead_code))] // checked by a test
    pub rank: Rank,
    /// Takes the lock; false if it gave up (only locks held across
    /// allocations give up, after `HIGH_LOCK_WAIT_NS`).
    pub lock: fn() -> bool,
    /// # Safety
    /// After `lock` succeeded on this thread, or in a child whose other
    /// threads are gone.
    pub unlock: unsafe fn(),
    /// For a child whose prepare handler did not get the lock: a fresh
    /// value, the lock released. None: `lock` never gives up.
    pub reset_in_child: Option<unsafe fn()>,
}

fn always(f: fn()) -> bool {
    f();
    true
}

/// For the ranks the prepare handler does not take: locks held only for a
/// few stores, whose child resets them (the shadow bitmap's leaves, PHP's
/// job queue) or whose try-lock users do without them (PHP's request list
/// and frame cache).
fn not_taken() -> bool {
    false
}

/// Nothing to release (`not_taken`).
unsafe fn nothing() {}

/// Every lock of the library, in rank order.
pub const FORK_ORDER: [ForkLock; Rank::ALL.len()] = [
    ForkLock {
        rank: Rank::Reporting,
        lock: leak_report::lock_for_fork,
        unlock: leak_report::unlock_after_fork,
        reset_in_child: Some(leak_report::reset_in_child),
    },
    ForkLock {
        rank: Rank::Dump,
        lock: dump::lock_for_fork,
        unlock: dump::unlock_after_fork,
        reset_in_child: Some(dump::reset_in_child),
    },
    ForkLock {
        rank: Rank::Modules,
        lock: || modules::lock_for_fork(HIGH_LOCK_WAIT_NS),
        unlock: modules::unlock_after_fork,
        reset_in_child: Some(modules::reset_in_child),
    },
    ForkLock {
        rank: Rank::SignalAction,
        lock: || always(signal::lock_for_fork),
        unlock: signal::unlock_after_fork,
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::PhpJobs,
        lock: not_taken,
        unlock: nothing,
        // `php::reset_after_fork` in `become_child`.
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::PhpRequest,
        lock: not_taken,
        unlock: nothing,
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::PhpFrameCache,
        lock: not_taken,
        unlock: nothing,
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::LeakQueue,
        lock: || always(leak_check::lock_for_fork),
        unlock: leak_check::unlock_after_fork,
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::StackArena,
        lock: || always(stacks::lock_for_fork),
        unlock: stacks::unlock_after_fork,
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::LiveShard,
        lock: || always(live::lock_all_for_fork),
        unlock: live::unlock_all_after_fork,
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::ShadowLeaf,
        lock: not_taken,
        unlock: nothing,
        // `shadow::reset_after_fork` in `become_child`.
        reset_in_child: None,
    },
    ForkLock {
        rank: Rank::UnwindContext,
        lock: unwind::lock_for_fork,
        unlock: unwind::unlock_after_fork,
        reset_in_child: Some(unwind::reset_in_child),
    },
    ForkLock {
        rank: Rank::Timeline,
        lock: crate::hot::timeline::lock_for_fork,
        unlock: crate::hot::timeline::unlock_after_fork,
        reset_in_child: Some(crate::hot::timeline::reset_in_child),
    },
    ForkLock {
        rank: Rank::OwnHeap,
        lock: || always(ownheap::lock_for_fork),
        unlock: ownheap::unlock_after_fork,
        reset_in_child: None,
    },
];

extern "C" fn prepare() {
    // SAFETY: this thread's own state.
    let t = unsafe { &mut *guard::state() };
    if t.busy != 0 || t.fork_locks_held != 0 {
        // fork() from a signal handler that interrupted heaplive, or
        // another fork, on this thread, which may hold any of our locks:
        // take none (waiting would be waiting for ourselves); the child
        // gets an inert heaplive.
        t.forks_without_locks += 1;
        return;
    }
    let _busy = Busy::enter();
    // From here on, allocation paths stop waiting for our locks (see
    // `hot::lock`): a thread that waits for one while holding a glibc lock
    // that fork() takes after this handler would deadlock with us.
    lock::fork_prepare_begins();
    // Bit i: FORK_ORDER[i] is held; bit 31 marks "this thread's fork".
    let mut held = 1u32 << 31;
    for (i, l) in FORK_ORDER.iter().enumerate() {
        if (l.lock)() {
            held |= 1 << i;
        }
    }
    t.fork_locks_held = held;
}

extern "C" fn parent() {
    let st = guard::state();
    // SAFETY: this thread's own state (raw accesses: a signal handler on
    // this thread may run prepare/parent in between).
    unsafe {
        if (*st).forks_without_locks > 0 {
            (*st).forks_without_locks -= 1;
            return;
        }
    }
    // Marked busy until every lock is released, and `fork_locks_held`
    // cleared only then: a fork from a signal handler that interrupts this
    // handler must take none of our locks (this thread still holds some;
    // waiting for them was waiting for itself, forever for the ranks that
    // never give up).
    let _busy = Busy::enter();
    // SAFETY: this thread's own state; paired with prepare on this thread.
    unsafe { unlock((*st).fork_locks_held) };
    lock::fork_prepare_ends_in_parent();
    compiler_fence(SeqCst);
    // SAFETY: this thread's own state.
    unsafe { core::ptr::write_volatile(&raw mut (*st).fork_locks_held, 0) };
}

extern "C" fn child() {
    let st = guard::state();
    // SAFETY: this thread's own state (raw accesses, as in `parent`).
    unsafe {
        if (*st).forks_without_locks > 0 {
            (*st).forks_without_locks = 0;
            pid::set(sys::getpid());
            forking::mark_inert();
            return;
        }
    }
    // As in `parent`: busy until the locks are released.
    let _busy = Busy::enter();
    // SAFETY: this thread's own state.
    let held = unsafe { (*st).fork_locks_held };
    // SAFETY: the child has only this thread, which took the locks.
    unsafe { unlock(held) };
    for (i, l) in FORK_ORDER.iter().enumerate() {
        if held & (1 << i) == 0
            && let Some(reset) = l.reset_in_child
        {
            // SAFETY: a child on its only thread; the lock was not taken.
            unsafe { reset() };
        }
    }
    become_child();
    compiler_fence(SeqCst);
    // SAFETY: this thread's own state.
    unsafe { core::ptr::write_volatile(&raw mut (*st).fork_locks_held, 0) };
}

/// Releases the locks of `held` (bits as in `prepare`), in reverse order.
///
/// # Safety
/// After `prepare` on this thread, or in a child whose other threads are gone.
unsafe fn unlock(held: u32) {
    for (i, l) in FORK_ORDER.iter().enumerate().rev() {
        if held & (1 << i) != 0 {
            // SAFETY: guaranteed by the caller.
            unsafe { (l.unlock)() };
        }
    }
}

/// A new process: new pid, dump numbers from 1. The dumper thread is started
/// by our fork() wrapper or at the first sample, never here (an atfork
/// handler may not create threads).
fn become_child() {
    lock::fork_prepare_ends_in_child();
    let pid = sys::getpid();
    pid::set(pid);
    // Parent and child would otherwise draw the same sampling gaps.
    sampler::reseed_after_fork(pid);
    dump::reset_after_fork(&mut dump::DUMP.lock());
    shadow::reset_after_fork();
    crate::background::php::reset_after_fork();
}

/// Called by a spin lock that has waited long: if the pid changed behind
/// our back (`_Fork`), the holder does not exist here; free everything.
#[cold]
pub fn check_orphaned_locks() {
    let now = sys::getpid();
    if now == pid::get() {
        return;
    }
    // SAFETY: we are a child created without atfork handlers, right after
    // the fork: the threads that held these locks are in the parent.
    unsafe { unlock(u32::MAX) };
    become_child();
}

pub fn init() {
    pid::set(sys::getpid());
    crate::hot::lock::set_orphan_check(check_orphaned_locks);
    sys::at_fork(prepare, parent, child);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_order_has_every_rank_in_order() {
        let ranks: Vec<Rank> = FORK_ORDER.iter().map(|l| l.rank).collect();
        assert_eq!(ranks, Rank::ALL.to_vec());
    }
}

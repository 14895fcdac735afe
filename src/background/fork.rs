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
use crate::hot::guard::Busy;
use crate::hot::lock::{self, Rank};
use crate::hot::{leak_check, live, pid, sampler, shadow, signal, stacks, sys};
use crate::symbolize::modules;

/// One lock rank's take and release, for the fork handlers.
pub struct ForkLock {
    #[cfg_attr(not(test), allow(dead_code))] // checked by a test
    pub rank: Rank,
    pub lock: fn(),
    /// # Safety
    /// After `lock` on this thread, or in a child whose other threads are
    /// gone.
    pub unlock: unsafe fn(),
}

/// Every lock of the library, in rank order.
pub const FORK_ORDER: [ForkLock; Rank::ALL.len()] = [
    ForkLock {
        rank: Rank::Reporting,
        lock: leak_report::lock_for_fork,
        unlock: leak_report::unlock_after_fork,
    },
    ForkLock {
        rank: Rank::Dump,
        lock: dump::lock_for_fork,
        unlock: dump::unlock_after_fork,
    },
    ForkLock {
        rank: Rank::Modules,
        lock: modules::lock_for_fork,
        unlock: modules::unlock_after_fork,
    },
    ForkLock {
        rank: Rank::SignalAction,
        lock: signal::lock_for_fork,
        unlock: signal::unlock_after_fork,
    },
    ForkLock {
        rank: Rank::LeakQueue,
        lock: leak_check::lock_for_fork,
        unlock: leak_check::unlock_after_fork,
    },
    ForkLock {
        rank: Rank::StackArena,
        lock: stacks::lock_for_fork,
        unlock: stacks::unlock_after_fork,
    },
    ForkLock {
        rank: Rank::LiveShard,
        lock: live::lock_all_for_fork,
        unlock: live::unlock_all_after_fork,
    },
];

extern "C" fn prepare() {
    let _busy = Busy::enter();
    // From here on, allocation paths stop waiting for our locks (see
    // `hot::lock`): a thread that waits for one while holding a glibc lock
    // that fork() takes after this handler would deadlock with us.
    lock::fork_prepare_begins();
    for l in &FORK_ORDER {
        (l.lock)();
    }
}

extern "C" fn parent() {
    // SAFETY: paired with prepare on this thread.
    unsafe { unlock_all() };
    lock::fork_prepare_ends_in_parent();
}

extern "C" fn child() {
    // SAFETY: the child has only this thread, which took the locks.
    unsafe { unlock_all() };
    become_child();
}

/// # Safety
/// After `prepare` on this thread, or in a child whose other threads are gone.
unsafe fn unlock_all() {
    for l in FORK_ORDER.iter().rev() {
        // SAFETY: guaranteed by the caller.
        unsafe { (l.unlock)() };
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
    unsafe { unlock_all() };
    become_child();
}

pub fn init() {
    pid::set(sys::getpid());
    crate::hot::lock::set_orphan_check(check_orphaned_locks);
    // SAFETY: the handlers are plain functions that stay mapped.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
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

//! The one lock type of the library: a word-sized spin lock that yields
//! under contention, with a rank. Never held while calling anything that
//! may allocate through the wrapped allocator.
//!
//! Lock ranks: a thread that holds a lock only takes locks of a higher
//! rank. The fork handlers (`background::fork`) take every lock in this
//! order and release them in reverse, as jemalloc's witness ranks and
//! prefork do. In test builds, taking a lock out of rank order panics with
//! both ranks named.
//!
//! No fork deadlock: glibc's `fork` runs the atfork prepare handlers (ours
//! takes every lock here) *before* it takes its own locks (the stdio list
//! lock, the malloc arenas). A thread that waits on one of our locks while
//! holding a glibc lock the forking thread will want (a stream lock, in
//! `getline` -> `realloc`) would close a cycle. So allocation paths take
//! their locks with [`SpinLock::lock_unless_forking`], which gives up once
//! a fork's prepare handler has begun: that thread then skips its sample
//! (or leaves a freed block's sample for later), returns into glibc, and
//! releases what the forking thread waits for. Only the dumper thread and
//! exported functions that are not allocation paths wait unconditionally,
//! and they hold no glibc lock while they wait.
//!
//! A `_Fork()` child runs no atfork handlers and may find a lock held by a
//! thread that only exists in the parent. A spin that waits long asks the
//! hook installed with [`set_orphan_check`] (the fork layer: did our pid
//! change? then release everything).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::*};

/// Every lock of the library, outermost first. The fork handlers take them
/// in this order; `background::fork::FORK_ORDER` lists one entry per rank.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(u8)]
pub enum Rank {
    /// The leak reporter, held while it writes queued warnings; it takes
    /// the dump lock inside (to symbolize).
    Reporting,
    /// Dumps, the symbolizer and its caches; bitmap pruning.
    Dump,
    /// The module registry (taken by the dump and by dlopen/dlclose).
    Modules,
    /// The program's virtual disposition of the dump signal.
    SignalAction,
    /// The leak warning queue (allocation path, after the live table).
    LeakQueue,
    /// The stack table's arena (allocation path).
    StackArena,
    /// The live table's shards (allocation and free paths); the 256 shards
    /// share one rank and are never nested.
    LiveShard,
    /// The cached unwinder's shared CFI context (`hot::unwind`), taken only
    /// with [`SpinLock::try_lock`]: a capture that finds it busy leaves the
    /// frame to libgcc instead of waiting. Its holder takes no other lock.
    UnwindContext,
    /// The timeline's rows (`hot::timeline`): taken only with
    /// [`SpinLock::try_lock`] on allocation paths (a row that finds it busy
    /// waits for the next sample); its holder takes no other lock.
    Timeline,
    /// heaplive's own heap (`ownheap`): taken by every Rust allocation of
    /// the library, with any lock above held; its holder takes no other
    /// lock and only calls `mmap`.
    OwnHeap,
}

impl Rank {
    pub const ALL: [Rank; 10] = [
        Rank::Reporting,
        Rank::Dump,
        Rank::Modules,
        Rank::SignalAction,
        Rank::LeakQueue,
        Rank::StackArena,
        Rank::LiveShard,
        Rank::UnwindContext,
        Rank::Timeline,
        Rank::OwnHeap,
    ];
}

pub struct SpinLock<T> {
    word: AtomicU32,
    #[cfg_attr(not(test), allow(dead_code))] // checked in test builds
    rank: Rank,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialized by `word`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
unsafe impl<T: Send> Send for SpinLock<T> {}

pub struct Locked<'a, T> {
    lock: &'a SpinLock<T>,
}

/// Forks being prepared: raised by the prepare handler before it takes our
/// locks, lowered by the parent handler after it releases them (two
/// threads may fork at once); a child, where only the forking thread
/// exists, starts again from zero.
static FORKING: AtomicU32 = AtomicU32::new(0);

pub fn fork_prepare_begins() {
    FORKING.fetch_add(1, SeqCst);
}

pub fn fork_prepare_ends_in_parent() {
    FORKING.fetch_sub(1, SeqCst);
}

pub fn fork_prepare_ends_in_child() {
    FORKING.store(0, SeqCst);
}

fn forking() -> bool {
    FORKING.load(SeqCst) != 0
}

/// The hook a long spin calls (a function pointer; 0 = none).
static ORPHAN_CHECK: AtomicUsize = AtomicUsize::new(0);

/// Installs the check a long spin runs (the fork layer's).
pub fn set_orphan_check(f: fn()) {
    ORPHAN_CHECK.store(f as usize, Release);
}

fn orphan_check() {
    let f = ORPHAN_CHECK.load(Acquire);
    if f != 0 {
        // SAFETY: only `set_orphan_check` stores, and it stores a fn().
        let f: fn() = unsafe { core::mem::transmute::<usize, fn()>(f) };
        f();
    }
}

impl<T> SpinLock<T> {
    pub const fn new(rank: Rank, v: T) -> Self {
        SpinLock {
            word: AtomicU32::new(0),
            rank,
            value: UnsafeCell::new(v),
        }
    }

    #[inline]
    pub fn lock(&self) -> Locked<'_, T> {
        #[cfg(test)]
        order::acquire(self.rank);
        if self
            .word
            .compare_exchange_weak(0, 1, Acquire, Relaxed)
            .is_err()
        {
            self.acquire_slow(false);
        }
        Locked { lock: self }
    }

    /// For allocation paths: the lock, or `None` once a fork's prepare
    /// handler has begun (see the module's doc).
    #[inline]
    pub fn lock_unless_forking(&self) -> Option<Locked<'_, T>> {
        if self
            .word
            .compare_exchange_weak(0, 1, Acquire, Relaxed)
            .is_err()
            && !self.acquire_slow(true)
        {
            return None;
        }
        #[cfg(test)]
        order::acquire(self.rank);
        Some(Locked { lock: self })
    }

    /// The lock if it is free now, else `None` at once: never waits (the
    /// try-lock form, for what a caller can do without).
    #[inline]
    pub fn try_lock(&self) -> Option<Locked<'_, T>> {
        if self.word.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
            return None;
        }
        #[cfg(test)]
        order::acquire(self.rank);
        Some(Locked { lock: self })
    }

    /// `try_lock` for a fork's prepare handler: true if taken, paired with
    /// `unlock_raw`.
    pub fn try_lock_raw(&self) -> bool {
        self.try_lock().map(core::mem::forget).is_some()
    }

    /// Spins (yielding under long contention) until the lock is ours:
    /// true; or, with `give_way_to_fork`, false once a fork is prepared.
    #[cold]
    fn acquire_slow(&self, give_way_to_fork: bool) -> bool {
        let mut spins = 0u32;
        loop {
            if self.word.load(Relaxed) == 0
                && self
                    .word
                    .compare_exchange_weak(0, 1, Acquire, Relaxed)
                    .is_ok()
            {
                return true;
            }
            if give_way_to_fork && forking() {
                return false;
            }
            spins += 1;
            if spins < 200 {
                core::hint::spin_loop();
            } else {
                // SAFETY: sched_yield has no preconditions. Contention only.
                unsafe { libc::sched_yield() };
                if spins.is_multiple_of(4096) {
                    orphan_check();
                }
            }
        }
    }

    #[cfg(test)]
    pub fn is_locked(&self) -> bool {
        self.word.load(Relaxed) != 0
    }

    /// Takes the lock for a fork's prepare handler; paired with `unlock_raw`.
    pub fn lock_raw(&self) {
        core::mem::forget(self.lock());
    }

    /// As `lock_raw`, but gives up (false) after `ns` nanoseconds.
    pub fn lock_raw_within(&self, ns: u64) -> bool {
        let deadline = crate::hot::sys::now_nanos().saturating_add(ns);
        loop {
            if self
                .word
                .compare_exchange_weak(0, 1, Acquire, Relaxed)
                .is_ok()
            {
                #[cfg(test)]
                order::acquire(self.rank);
                return true;
            }
            if crate::hot::sys::now_nanos() >= deadline {
                return false;
            }
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }

    /// In a fork's child whose prepare handler did not get this lock: its
    /// holder (another thread of the parent) may have left the value half
    /// changed, so it is replaced by `fresh` without being read or dropped
    /// (what it owned is leaked), and the lock is released.
    ///
    /// # Safety
    /// Only in a fork's child, on its only thread, before anything else
    /// uses the lock.
    pub unsafe fn reset_in_child(&self, fresh: T) {
        // SAFETY: no other thread exists to use the value; the old one is
        // forgotten, never dropped.
        unsafe { core::mem::forget(core::ptr::replace(self.value.get(), fresh)) };
        self.word.store(0, Release);
    }

    /// Releases a lock taken with `lock_raw`, or one left held by a thread
    /// that does not exist in a forked child.
    ///
    /// # Safety
    /// No live thread of this process may be inside the critical section.
    pub unsafe fn unlock_raw(&self) {
        #[cfg(test)]
        order::release(self.rank);
        self.word.store(0, Release);
    }
}

impl<T> core::ops::Deref for Locked<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: we hold the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> core::ops::DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: we hold the lock.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        #[cfg(test)]
        order::release(self.lock.rank);
        self.lock.word.store(0, Release);
    }
}

/// Rank checking in test builds: per thread, the ranks held.
#[cfg(test)]
mod order {
    use super::Rank;
    use std::cell::RefCell;

    thread_local! {
        static HELD: RefCell<Vec<Rank>> = const { RefCell::new(Vec::new()) };
    }

    pub fn acquire(r: Rank) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(&top) = h.iter().max()
                && r <= top
            {
                panic!("lock rank violation: taking {r:?} while holding {top:?}");
            }
            h.push(r);
        });
    }

    pub fn release(r: Rank) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|&x| x == r) {
                h.remove(i);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_in_order_are_fine() {
        let a = SpinLock::new(Rank::Dump, ());
        let b = SpinLock::new(Rank::LiveShard, ());
        let _ga = a.lock();
        let _gb = b.lock();
    }

    #[test]
    #[should_panic(expected = "lock rank violation: taking Dump while holding LiveShard")]
    fn out_of_rank_order_panics() {
        let a = SpinLock::new(Rank::Dump, ());
        let b = SpinLock::new(Rank::LiveShard, ());
        let _gb = b.lock();
        let _ga = a.lock();
    }

    #[test]
    fn allocation_paths_give_way_to_a_fork() {
        let a: &'static SpinLock<i32> = Box::leak(Box::new(SpinLock::new(Rank::LiveShard, 1)));
        assert_eq!(a.lock_unless_forking().map(|g| *g), Some(1));
        // This thread plays the forking one: it holds the lock, then the
        // prepare handler's flag goes up. An allocating thread gives up
        // instead of waiting.
        let held = a.lock();
        fork_prepare_begins();
        let gave_up = std::thread::spawn(move || a.lock_unless_forking().is_none())
            .join()
            .expect("thread");
        fork_prepare_ends_in_parent();
        drop(held);
        assert!(gave_up);
        assert!(a.lock_unless_forking().is_some());
    }

    #[test]
    fn try_lock_never_waits() {
        let a = SpinLock::new(Rank::UnwindContext, 5);
        let held = a.try_lock().expect("free");
        assert_eq!(*held, 5);
        assert!(a.try_lock().is_none(), "held: no second holder, no wait");
        drop(held);
        assert!(a.try_lock_raw());
        assert!(a.is_locked());
        // SAFETY: taken just above on this thread.
        unsafe { a.unlock_raw() };
        assert!(!a.is_locked());
    }

    #[test]
    fn all_ranks_listed_in_order() {
        for w in Rank::ALL.windows(2) {
            assert!(w[0] < w[1]);
        }
        assert_eq!(Rank::ALL.len(), Rank::OwnHeap as usize + 1);
    }
}

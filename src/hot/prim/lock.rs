//! The one lock type of the library: a word-sized spin lock that yields
//! under contention, with a rank. Never held while calling anything that
//! may allocate through the wrapped allocator.
//!
//! Lock ranks: a thread that holds a lock only takes locks of a higher
//! rank. The fork handlers (`background::fork`) take every lock in this
//! order and release them in reverse, as jemalloc's witness ranks and
//! prefork do.
//!
//! The witness: with the cargo feature `lock-witness` (the preload tests
//! build the library so once, `preload-tests/witness.rs`) and in unit
//! tests, every acquisition checks this thread's held ranks, a bitmask in
//! its state (`guard::ThreadState::locks_held`: no allocation, no call),
//! and taking a lock whose rank is not above every rank held writes one
//! line naming both ranks and aborts (panics in unit tests). Locks that are
//! not a `SpinLock` (the shadow bitmap's leaf bits) report to it with
//! [`witness_acquire`] and [`witness_release`]. The `*_raw` forms are the
//! fork handlers', which take every lock (all 256 shards of one rank) in
//! `FORK_ORDER`, a table checked against the ranks by its own test: the
//! witness leaves them out. Without the feature the witness compiles to
//! nothing.
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
    /// PHP mode's queue of dumps for heaplive's thread
    /// (`background::php`), held for a push or a pop; its holder takes
    /// only `OwnHeap`.
    PhpJobs,
    /// PHP mode's list of the request's ZendMM samples (`hot::php`), taken
    /// with `try_lock` only; at request end its holder drops the samples
    /// (`LiveShard`).
    PhpRequest,
    /// PHP mode's cache of frame names (`hot::php`), taken with `try_lock`
    /// only: a walk that finds it busy reads the frames the slow way. Its
    /// holder names frames (`names`, in the stack table's arena).
    PhpFrameCache,
    /// The leak warning queue (allocation path, after the live table).
    LeakQueue,
    /// The stack table's arena (allocation path).
    StackArena,
    /// The live table's shards (allocation and free paths); the 256 shards
    /// share one rank and are never nested.
    LiveShard,
    /// A leaf of the shadow bitmap (`hot::tables::shadow`): a bit in the
    /// leaf's count word, not a `SpinLock`; reported to the witness. Its
    /// holder takes no other lock and only calls `mmap`.
    ShadowLeaf,
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
    pub const ALL: [Rank; 14] = [
        Rank::Reporting,
        Rank::Dump,
        Rank::Modules,
        Rank::SignalAction,
        Rank::PhpJobs,
        Rank::PhpRequest,
        Rank::PhpFrameCache,
        Rank::LeakQueue,
        Rank::StackArena,
        Rank::LiveShard,
        Rank::ShadowLeaf,
        Rank::UnwindContext,
        Rank::Timeline,
        Rank::OwnHeap,
    ];
}

pub struct SpinLock<T> {
    word: AtomicU32,
    #[cfg_attr(not(any(test, feature = "lock-witness")), allow(dead_code))] // the witness's
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
        witness_acquire(self.rank);
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
        witness_acquire(self.rank);
        if self
            .word
            .compare_exchange_weak(0, 1, Acquire, Relaxed)
            .is_err()
            && !self.acquire_slow(true)
        {
            witness_release(self.rank);
            return None;
        }
        Some(Locked { lock: self })
    }

    /// The lock if it is free now, else `None` at once: never waits (the
    /// try-lock form, for what a caller can do without).
    #[inline]
    pub fn try_lock(&self) -> Option<Locked<'_, T>> {
        if self.word.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
            return None;
        }
        witness_acquire(self.rank);
        Some(Locked { lock: self })
    }

    /// `try_lock` for a holder that releases it itself (a struct's `Drop`):
    /// true if taken, paired with [`SpinLock::unlock_kept`]. Seen by the
    /// witness, as `try_lock`.
    #[inline]
    pub fn try_lock_kept(&self) -> bool {
        self.try_lock().map(core::mem::forget).is_some()
    }

    /// Releases a lock taken with `try_lock_kept`.
    ///
    /// # Safety
    /// This thread took it with `try_lock_kept` and has not released it.
    #[inline]
    pub unsafe fn unlock_kept(&self) {
        witness_release(self.rank);
        self.word.store(0, Release);
    }

    /// `try_lock` for a fork's prepare handler: true if taken, paired with
    /// `unlock_raw`. Not seen by the witness (see the module's doc).
    pub fn try_lock_raw(&self) -> bool {
        self.word.compare_exchange(0, 1, Acquire, Relaxed).is_ok()
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
    /// Not seen by the witness.
    pub fn lock_raw(&self) {
        if self
            .word
            .compare_exchange_weak(0, 1, Acquire, Relaxed)
            .is_err()
        {
            self.acquire_slow(false);
        }
    }

    /// As `lock`, but gives up (None) after `ns` nanoseconds, yielding
    /// while it waits (0: one try).
    pub fn lock_within(&self, ns: u64) -> Option<Locked<'_, T>> {
        witness_acquire(self.rank);
        if self.lock_raw_within(ns) {
            Some(Locked { lock: self })
        } else {
            witness_release(self.rank);
            None
        }
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
        witness_release(self.lock.rank);
        self.lock.word.store(0, Release);
    }
}

/// The witness: before taking a lock of rank `r` on this thread. Aborts
/// (panics in unit tests) with one line when this thread holds a lock of
/// rank `r` or above. Nothing without the `lock-witness` feature.
#[inline(always)]
pub fn witness_acquire(r: Rank) {
    #[cfg(any(test, feature = "lock-witness"))]
    {
        let s = crate::hot::prim::guard::state();
        // SAFETY: this thread's own state.
        let held = unsafe { (*s).locks_held };
        if held >> (r as u32) != 0 {
            witness_violation(r, held);
        }
        // SAFETY: as above.
        unsafe { (*s).locks_held = held | 1 << (r as u32) };
    }
    #[cfg(not(any(test, feature = "lock-witness")))]
    let _ = r;
}

/// The witness: after releasing a lock of rank `r` on this thread.
#[inline(always)]
pub fn witness_release(r: Rank) {
    #[cfg(any(test, feature = "lock-witness"))]
    {
        let s = crate::hot::prim::guard::state();
        // SAFETY: this thread's own state.
        unsafe { (*s).locks_held &= !(1 << (r as u32)) };
    }
    #[cfg(not(any(test, feature = "lock-witness")))]
    let _ = r;
}

#[cfg(any(test, feature = "lock-witness"))]
#[cold]
#[inline(never)]
fn witness_violation(r: Rank, held: u32) -> ! {
    let top = Rank::ALL[31 - held.leading_zeros() as usize];
    #[cfg(test)]
    panic!("lock rank violation: taking {r:?} while holding {top:?}");
    #[cfg(not(test))]
    {
        crate::hot::log::line(format_args!(
            "heaplive[{}]: lock rank violation: taking {:?} while holding {:?} (lock-witness build); aborting",
            crate::hot::sys::getpid(),
            r,
            top
        ));
        // SAFETY: abort has no preconditions; the process ends here.
        unsafe { libc::abort() }
    }
}

/// A deliberate out-of-order acquisition, for the preload tests of the
/// witness (`heaplive_witness_selftest`, exported by `lock-witness`
/// builds only): must abort.
#[cfg(feature = "lock-witness")]
pub fn witness_selftest() {
    static INNER: SpinLock<()> = SpinLock::new(Rank::LiveShard, ());
    static OUTER: SpinLock<()> = SpinLock::new(Rank::Dump, ());
    let _inner = INNER.lock();
    let _outer = OUTER.lock();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes a lock of rank `outer`, then (with `try_lock` if `try_inner`)
    /// one of rank `inner` while holding it.
    fn nest(outer: Rank, inner: Rank, try_inner: bool) {
        let a = SpinLock::new(outer, ());
        let b = SpinLock::new(inner, ());
        let _ga = a.lock();
        let _gb = if try_inner {
            b.try_lock()
        } else {
            Some(b.lock())
        };
    }

    #[test]
    fn ranks_in_order_are_fine() {
        nest(Rank::Dump, Rank::LiveShard, false);
    }

    #[test]
    #[should_panic(expected = "lock rank violation: taking Dump while holding LiveShard")]
    fn out_of_rank_order_panics() {
        nest(Rank::LiveShard, Rank::Dump, false);
    }

    #[test]
    fn witness_sees_try_lock_kept_and_not_raw() {
        let a = SpinLock::new(Rank::LiveShard, ());
        let b = SpinLock::new(Rank::Dump, ());
        let held = || unsafe { (*crate::hot::prim::guard::state()).locks_held };
        assert!(a.try_lock_kept());
        assert_eq!(held(), 1 << Rank::LiveShard as u32);
        // SAFETY: taken just above on this thread.
        unsafe { a.unlock_kept() };
        assert_eq!(held(), 0);
        // The fork handlers' forms: all locks at once, in FORK_ORDER.
        a.lock_raw();
        b.lock_raw();
        assert_eq!(held(), 0);
        // SAFETY: taken just above on this thread.
        unsafe {
            b.unlock_raw();
            a.unlock_raw();
        }
        let _gb = b.lock();
        let _ga = a.lock();
        assert_eq!(held(), 1 << Rank::LiveShard as u32 | 1 << Rank::Dump as u32);
    }

    #[test]
    #[should_panic(expected = "lock rank violation: taking LiveShard while holding LiveShard")]
    fn one_rank_never_nests() {
        nest(Rank::LiveShard, Rank::LiveShard, true);
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

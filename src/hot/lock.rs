//! The one lock type of the hooks: a word-sized spin lock that yields under
//! contention. Never held while calling anything that may allocate.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, Ordering::*};

pub struct SpinLock<T> {
    word: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialized by `word`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
unsafe impl<T: Send> Send for SpinLock<T> {}

pub struct Locked<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    pub const fn new(v: T) -> Self {
        SpinLock {
            word: AtomicU32::new(0),
            value: UnsafeCell::new(v),
        }
    }

    #[inline]
    pub fn lock(&self) -> Locked<'_, T> {
        if self
            .word
            .compare_exchange_weak(0, 1, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        Locked { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            if self.word.load(Relaxed) == 0
                && self
                    .word
                    .compare_exchange_weak(0, 1, Acquire, Relaxed)
                    .is_ok()
            {
                return;
            }
            spins += 1;
            if spins < 200 {
                core::hint::spin_loop();
            } else {
                // SAFETY: sched_yield has no preconditions. Contention only.
                unsafe { libc::sched_yield() };
                if spins % 4096 == 0 {
                    crate::background::fork::check_orphaned_locks();
                }
            }
        }
    }

    /// Takes the lock for a fork's prepare handler; paired with `unlock_raw`.
    pub fn lock_raw(&self) {
        core::mem::forget(self.lock());
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
        self.lock.word.store(0, Release);
    }
}

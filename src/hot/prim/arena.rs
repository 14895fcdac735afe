//! A bump arena over our own mmap: memory for stack records that lives as
//! long as the process. Never returns memory; never calls the allocator.

use crate::hot::lock::{Rank, SpinLock};

const CHUNK: usize = 4 << 20;

struct Bump {
    cur: usize,
    end: usize,
}

pub struct Arena {
    bump: SpinLock<Bump>,
}

impl Arena {
    pub const fn new() -> Self {
        Arena {
            bump: SpinLock::new(Rank::StackArena, Bump { cur: 0, end: 0 }),
        }
    }

    /// `len` bytes aligned to 8, zeroed (an allocation path). Null when the
    /// kernel refuses memory or a fork is being prepared.
    pub fn alloc(&self, len: usize) -> *mut u8 {
        let len = (len + 7) & !7;
        let Some(mut b) = self.bump.lock_unless_forking() else {
            return core::ptr::null_mut();
        };
        if b.end - b.cur < len {
            // The old chunk's tail is abandoned; chunks are large, records
            // small.
            let size = len.max(CHUNK);
            let p = crate::hot::sys::map(size);
            if p.is_null() {
                return p;
            }
            b.cur = p as usize;
            b.end = p as usize + size;
        }
        let p = b.cur as *mut u8;
        b.cur += len;
        p
    }

    pub fn lock_for_fork(&self) {
        self.bump.lock_raw();
    }

    /// # Safety
    /// Only from fork handlers, paired with `lock_for_fork`, or in a child
    /// whose other threads are gone.
    pub unsafe fn unlock_after_fork(&self) {
        // SAFETY: guaranteed by the caller.
        unsafe { self.bump.unlock_raw() };
    }
}

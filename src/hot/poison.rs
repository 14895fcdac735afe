//! `HEAPLIVE_POISON`: new blocks filled with 0xa5, freed blocks with 0xdd
//! (over their `malloc_usable_size`), so that reading uninitialised or
//! freed memory shows a pattern. Off by default: one relaxed load on the
//! allocation paths.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
use heaplive_format::grammar::{POISON_ALLOC_BYTE, POISON_FREE_BYTE, Poison};

const ALLOC: u8 = 1;
const FREE: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(0);

/// Set once by the config loader.
pub fn set(p: Poison) {
    MODE.store(
        if p.alloc { ALLOC } else { 0 } | if p.free { FREE } else { 0 },
        Relaxed,
    );
    crate::hot::real::refresh_jumps();
}

#[inline(always)]
pub fn alloc_on() -> bool {
    MODE.load(Relaxed) & ALLOC != 0
}

#[inline(always)]
pub fn free_on() -> bool {
    MODE.load(Relaxed) & FREE != 0
}

/// Fills `len` bytes of a new block at `p`.
#[inline(always)]
pub fn on_alloc(p: *mut c_void, len: usize) {
    if alloc_on() && !p.is_null() {
        // SAFETY: a block of at least `len` bytes the allocator just gave.
        unsafe { core::ptr::write_bytes(p.cast::<u8>(), POISON_ALLOC_BYTE, len) };
    }
}

/// Before a realloc of `p`: the bytes the block holds now (its usable
/// size), which stay the program's; 0 when alloc poisoning is off.
///
/// # Safety
/// `p` is null or a live block of the real allocator.
#[inline(always)]
pub unsafe fn old_len(p: *mut c_void) -> usize {
    if alloc_on() {
        // SAFETY: guaranteed by the caller.
        unsafe { crate::hot::real::malloc_usable_size(p) }
    } else {
        0
    }
}

/// After a realloc gave `q` of `len` bytes for a block that had `old_len`
/// (`old_len`): fills the bytes past the old ones.
///
/// # Safety
/// `q` is a block of at least `len` bytes the allocator just gave.
#[inline(always)]
pub unsafe fn on_grown(q: *mut c_void, old_len: usize, len: usize) {
    if alloc_on() && len > old_len && !q.is_null() {
        // SAFETY: the bytes past `old_len` lie within the block.
        unsafe {
            core::ptr::write_bytes(
                q.cast::<u8>().add(old_len),
                POISON_ALLOC_BYTE,
                len - old_len,
            )
        };
    }
}

/// Fills a block about to be freed, over its usable size.
///
/// # Safety
/// `p` is null or a live block of the real allocator.
#[inline(always)]
pub unsafe fn on_free(p: *mut c_void) {
    if free_on() && !p.is_null() {
        // SAFETY: guaranteed by the caller.
        let n = unsafe { crate::hot::real::malloc_usable_size(p) };
        // SAFETY: the block's usable bytes are the caller's until free.
        unsafe { core::ptr::write_bytes(p.cast::<u8>(), POISON_FREE_BYTE, n) };
    }
}

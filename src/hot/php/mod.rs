//! PHP mode, the part that runs inside allocations: reading the PHP call
//! stack of the running request (`executor_globals.current_execute_data`),
//! splicing it into the native stack, the weight of a ZendMM block, and the
//! list of the request's ZendMM samples (dropped when the request's heap is
//! reset). The hook points (detection, the internal module, the ZendMM
//! handlers) are in `interpose::php`, which fills the state here.
//!
//! Reads of engine memory go through `process_vm_readv` on our own process
//! into buffers on the stack: a bad pointer (a wrong offset, a frame being
//! built, memory an opcache restart took back) makes the call fail with
//! EFAULT, never a fault. Nothing here allocates.
//!
//! One file a job (this folder's README.md): `abi` (the layout per PHP
//! version), `walk` (reading frames), `cache` (frames read in place, the
//! name cache), `request` (the request's root frame and peak), `zendmm`
//! (size classes, bin allocators, the request's ZendMM samples). What
//! other layers may name is re-exported here; this file holds the state
//! `interpose::php` fills at start-up.

use crate::hot::guard;
use crate::hot::names;
use crate::hot::stacks::MAX_FRAMES;
use crate::hot::sys::StackBuf;
use core::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::*,
};

mod abi;
mod cache;
mod probe;
mod request;
mod walk;
mod zendmm;

pub use abi::*;
pub use cache::*;
pub use probe::*;
pub use request::*;
pub use walk::*;
pub use zendmm::*;

// ---------------------------------------------------------------------------
// State, filled by interpose::php at startup.

/// `&executor_globals`; 0 = not PHP.
static EG: AtomicUsize = AtomicUsize::new(0);
/// Index into TABLE + 1; 0 = frames off.
static FRAMES: AtomicU32 = AtomicU32::new(0);
/// Where a function's code lies: [start, end); 0 = unknown.
pub(super) struct CodeRange {
    pub(super) start: AtomicUsize,
    pub(super) end: AtomicUsize,
}
/// `execute_ex`'s code.
static EXECUTE_EX: CodeRange = CodeRange {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
};
/// The ZendMM heap of the hooked request and `_zend_mm_block_size`.
static HEAP: AtomicUsize = AtomicUsize::new(0);
static BLOCK_SIZE: AtomicUsize = AtomicUsize::new(0);

pub fn set_executor_globals(eg: usize) {
    let (start, end) = segment_of(eg);
    STATIC_START.store(start, Relaxed);
    STATIC_END.store(end, Relaxed);
    EG.store(eg, Release);
}

/// [start, end) of the loaded segment (PT_LOAD, with its bss) holding
/// `addr`; (0, 0) if none does. Start-up only (dl_iterate_phdr).
fn segment_of(addr: usize) -> (usize, usize) {
    let mut found = (0, 0);
    crate::hot::elf::each_loaded(|info, _| {
        match crate::hot::elf::load_segment_holding(info, addr) {
            Some(s) => {
                found = s;
                true
            }
            None => false,
        }
    });
    found
}

pub fn set_execute_ex(start: usize, end: usize) {
    EXECUTE_EX.end.store(end, Relaxed);
    EXECUTE_EX.start.store(start, Release);
}

/// Turns PHP frames on with `o`'s offsets (or off with None).
pub fn set_frames(o: Option<&'static Offsets>) {
    let i = o
        .and_then(|o| TABLE.iter().position(|t| core::ptr::eq(t, o)))
        .map_or(0, |i| i as u32 + 1);
    FRAMES.store(i, Release);
}

pub fn set_heap(heap: usize, block_size_fn: usize) {
    BLOCK_SIZE.store(block_size_fn, Relaxed);
    HEAP.store(heap, Release);
}

pub fn heap() -> usize {
    HEAP.load(Acquire)
}

/// `zend_mm_heap.size` (the bytes memory_get_usage() reports): after the
/// `use_custom_heap` int and the `storage` pointer in 7.4 to 8.4
/// (ZEND_MM_CUSTOM, ZEND_MM_STORAGE and ZEND_MM_STAT are always on).
pub const HEAP_SIZE: usize = 16;

/// Is this a PHP process heaplive reads (PHP mode on)?
pub fn detected() -> bool {
    EG.load(Acquire) != 0
}

/// Marks the calling thread as the one that runs PHP code: only its samples
/// get PHP frames (in a non-ZTS PHP, `executor_globals` belongs to it; an
/// extension's own thread must not be blamed on the running script).
pub fn mark_php_thread() {
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).php_thread = 1 };
}

fn is_php_thread() -> bool {
    // SAFETY: this thread's own state.
    unsafe { (*guard::state()).php_thread != 0 }
}

/// `ZEND_MM_CUSTOM_HEAP_STD`: the heap's flag while custom handlers are
/// on (`zend_mm_set_custom_handlers` sets it, 7.4 to 8.4). ZendMM calls a
/// handler only while the flag is set, so a handler that clears it around
/// a call through puts it back as this constant: nothing to keep across
/// the call.
pub const CUSTOM_HEAP_STD: i32 = 1;

/// The size ZendMM gave the block at `p` of `heap` (the bin or
/// page-rounded size that `memory_get_usage()` counts); 0 if unknown. For
/// the handlers only (the flag is CUSTOM_HEAP_STD there).
#[inline(always)]
pub fn block_size(heap: usize, p: usize) -> usize {
    let f = BLOCK_SIZE.load(Relaxed);
    if f == 0 {
        return 0;
    }
    // SAFETY: `_zend_mm_block_size(zend_mm_heap*, void*)`, resolved by
    // dlsym; p is a live block of that heap (we were just given it). On
    // 8.4+ it answers 0 for a heap in custom mode: the flag is cleared
    // around the call, as the ZendMM handlers do.
    unsafe {
        let flag = heap as *mut i32;
        flag.write_volatile(0);
        let f: unsafe extern "C" fn(usize, usize) -> usize = core::mem::transmute(f);
        let n = f(heap, p);
        flag.write_volatile(CUSTOM_HEAP_STD);
        n
    }
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod merge_tests;

#[cfg(test)]
#[path = "php_tests.rs"]
mod tests;

//! ZendMM: its size classes and the bin allocators (the emalloc fast path's
//! table), the weight of a block, and the running request's ZendMM samples
//! (dropped when the request's heap is reset).

use super::*;

/// ZendMM's small size classes (`zend_alloc_sizes.h`, the same in 7.4 to
/// 8.4); larger blocks are whole 4 KiB pages.
pub(super) const BINS: [u16; 30] = [
    8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640,
    768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072,
];
pub const MAX_SMALL: usize = 3072;
pub(super) const PAGE: usize = 4096;

/// The bin of each size in 8-byte steps up to MAX_SMALL: one load.
pub(super) static BIN_OF: [u16; MAX_SMALL / 8 + 1] = {
    let mut t = [0u16; MAX_SMALL / 8 + 1];
    let mut i = 0;
    let mut b = 0;
    while i < t.len() {
        while (BINS[b] as usize) < i * 8 {
            b += 1;
        }
        t[i] = BINS[b];
        i += 1;
    }
    t
};

/// ZendMM's bin-specialised allocators, `_emalloc_8` to `_emalloc_3072`
/// (one per entry of BINS), indexed by `(size + 7) / 8` for sizes up to
/// MAX_SMALL: the one ZendMM's own `emalloc(size)` of a constant size would
/// call, beside its block size (one entry, one base address for the fast
/// path's two loads). 0 where unknown (a ZEND_DEBUG build exports none of
/// them).
#[repr(C, align(16))]
pub(super) struct BinAlloc {
    pub(super) f: AtomicUsize,
    pub(super) block: AtomicUsize,
}
pub(super) static BIN_ALLOC: [BinAlloc; MAX_SMALL / 8 + 1] = [const {
    BinAlloc {
        f: AtomicUsize::new(0),
        block: AtomicUsize::new(0),
    }
}; MAX_SMALL / 8 + 1];

/// Sets the bin allocators: `resolve(size)` gives `_emalloc_<size>`'s
/// address (0 if not exported) for each size class. All or none: a PHP
/// whose bins were not exactly BINS would get blocks of the wrong class
/// (and memory_get_usage() figures unlike its own) from a partial table.
/// Returns whether they are set.
pub fn set_bin_allocators(mut resolve: impl FnMut(usize) -> usize) -> bool {
    let mut f = [0usize; BINS.len()];
    for (i, b) in BINS.iter().enumerate() {
        f[i] = resolve(*b as usize);
        if f[i] == 0 {
            for a in &BIN_ALLOC {
                a.f.store(0, Relaxed);
            }
            return false;
        }
    }
    for (i, a) in BIN_ALLOC.iter().enumerate() {
        let bin = BIN_OF[i];
        let k = BINS.iter().position(|b| *b == bin).unwrap_or(0);
        a.block.store(bin as usize, Relaxed);
        a.f.store(f[k], Relaxed);
    }
    true
}

/// The common case of an emalloc of `size` bytes (at most MAX_SMALL): its
/// block size and the bin-specialised ZendMM function that allocates it
/// (called with the heap's custom flag cleared). Without a test of the
/// table: the handler that calls this is installed only when
/// `set_bin_allocators` succeeded (else the function is 0).
#[inline(always)]
pub fn bin_allocator_set(size: usize) -> (usize, usize) {
    let e = &BIN_ALLOC[(size + 7) >> 3];
    (e.block.load(Relaxed), e.f.load(Relaxed))
}

/// The size of the block ZendMM gives for `size` requested bytes: its
/// size class, or whole pages (large and huge blocks), which is what
/// `memory_get_usage()` counts.
#[inline(always)]
pub fn zend_block_size(size: usize) -> usize {
    if size <= MAX_SMALL {
        BIN_OF[size.max(1).div_ceil(8)] as usize
    } else {
        size.div_ceil(PAGE).saturating_mul(PAGE)
    }
}

// ---------------------------------------------------------------------------
// The request's ZendMM samples.
//
// ZendMM frees a request's blocks in one go when the request ends (no efree
// reaches us), so every ZendMM sample is noted here and dropped at request
// shutdown. Only the PHP thread notes and drops (ZendMM is per thread); a
// try-lock keeps a misbehaving extension thread out instead of waiting.

pub(super) struct List {
    pub(super) addrs: *mut usize,
    pub(super) cap: usize,
    pub(super) len: usize,
}

pub(super) struct Request {
    pub(super) busy: crate::hot::lock::SpinLock<()>,
    pub(super) list: core::cell::UnsafeCell<List>,
}

// SAFETY: `list` is only touched by the holder of `busy`.
unsafe impl Sync for Request {}

pub(super) static REQUEST: Request = Request {
    busy: crate::hot::lock::SpinLock::new(crate::hot::lock::Rank::PhpRequest, ()),
    list: core::cell::UnsafeCell::new(List {
        addrs: core::ptr::null_mut(),
        cap: 0,
        len: 0,
    }),
};

pub(super) fn with_list<R>(f: impl FnOnce(&mut List) -> R) -> Option<R> {
    let held = REQUEST.busy.try_lock()?;
    // SAFETY: we hold `busy`.
    let r = f(unsafe { &mut *REQUEST.list.get() });
    drop(held);
    Some(r)
}

/// The efree filter, in front of the shadow bitmap: a counter per slot of
/// `addr >> 3` modulo 16384 (16 KiB, direct-mapped: no hash to compute),
/// of the ZendMM samples of this request that are live at an address of
/// that slot. A zero means "not a ZendMM sample of this request"; a
/// non-zero one may be a neighbour 128 KiB away, and the shadow bitmap
/// decides. Counting (incremented when a sample is noted, decremented when
/// it goes) keeps only the live samples' slots set, so that the rate of
/// efrees sent to the slow path is about (live samples)/16384 however many
/// samples the request took. A counter that reaches 255 stays there (set) until request end,
/// when all are cleared. Only the PHP thread touches it (ZendMM is its
/// own; non-ZTS), hence plain loads and stores.
pub(super) static FILTER: [AtomicU8; FILTER_SLOTS] = [const { AtomicU8::new(0) }; FILTER_SLOTS];
pub(super) const FILTER_SLOTS: usize = 16384;
pub(super) const FILTER_FULL: u8 = u8::MAX;

#[inline(always)]
pub(super) fn filter_slot(addr: usize) -> &'static AtomicU8 {
    &FILTER[(addr >> 3) & (FILTER_SLOTS - 1)]
}

/// May `addr` be a ZendMM sample of the running request? The efree filter.
#[inline(always)]
pub fn maybe_zend_sample(addr: usize) -> bool {
    filter_slot(addr).load(Relaxed) != 0
}

pub(super) fn filter_add(addr: usize) {
    let c = filter_slot(addr);
    let n = c.load(Relaxed);
    if n != FILTER_FULL {
        c.store(n + 1, Relaxed);
    }
}

/// A ZendMM sample noted at `addr` is gone (efree'd, or moved by erealloc):
/// its slot's count goes down (a full counter stays full).
pub fn forget_zend_sample(addr: usize) {
    let c = filter_slot(addr);
    let n = c.load(Relaxed);
    if n != 0 && n != FILTER_FULL {
        c.store(n - 1, Relaxed);
    }
}

/// Counts `heap` in the filter while our handlers are on it: a full ZendMM
/// shutdown hands the heap itself to the free handler, and the handler
/// tells it from a block only past the filter.
pub fn note_heap_in_filter(heap: usize) {
    filter_add(heap);
}

/// Notes a ZendMM sample at `addr`. False when it cannot (no memory): the
/// caller must then drop the sample, which nothing would drop later.
pub fn note_zend_sample(addr: usize) -> bool {
    let noted = with_list(|l| {
        if l.len == l.cap {
            // Forget the addresses whose samples are gone (efree'd) first.
            let mut keep = 0;
            for i in 0..l.len {
                // SAFETY: i < len <= cap.
                let a = unsafe { *l.addrs.add(i) };
                if crate::hot::shadow::test(a) {
                    // SAFETY: keep <= i.
                    unsafe { *l.addrs.add(keep) = a };
                    keep += 1;
                }
            }
            l.len = keep;
            if (l.cap == 0 || l.len * 2 > l.cap) && !grow(l) {
                return false;
            }
        }
        // SAFETY: len < cap after the above.
        unsafe { *l.addrs.add(l.len) = addr };
        l.len += 1;
        true
    })
    .unwrap_or(false);
    if noted {
        filter_add(addr);
    }
    noted
}

pub(super) fn grow(l: &mut List) -> bool {
    let cap = (l.cap * 2).max(4096);
    let p = crate::hot::sys::map(cap * 8) as *mut usize;
    if p.is_null() {
        return false;
    }
    if !l.addrs.is_null() {
        // SAFETY: both hold at least len words; the old mapping is ours.
        unsafe {
            core::ptr::copy_nonoverlapping(l.addrs, p, l.len);
            crate::hot::sys::unmap(l.addrs.cast(), l.cap * 8);
        }
    }
    l.addrs = p;
    l.cap = cap;
    true
}

/// Calls `f` on every noted address and forgets them all. Returns how many
/// were noted.
pub fn drain_zend_samples(mut f: impl FnMut(usize)) -> usize {
    with_list(|l| {
        for i in 0..l.len {
            // SAFETY: i < len <= cap.
            f(unsafe { *l.addrs.add(i) });
        }
        let n = l.len;
        l.len = 0;
        // SAFETY: the counters are bytes (AtomicU8 is a u8 in an
        // UnsafeCell), written only by this, the PHP thread.
        unsafe { core::ptr::write_bytes(FILTER.as_ptr() as *mut u8, 0, FILTER_SLOTS) };
        n
    })
    .unwrap_or(0)
}

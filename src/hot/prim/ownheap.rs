//! heaplive's own heap: every Rust allocation of the library (the dumper
//! thread, the symbolizer, dumps, reports) comes from memory mapped here,
//! never from the program's allocator.
//!
//! Why: (a) heaplive's memory is then apart from the program's heap and is
//! counted exactly (the dump line's `RSS ... (heaplive ...)`); (b)
//! heaplive's thread never holds a glibc arena lock, so a fork from a
//! signal handler can take glibc's single-threaded path (`hot::forking`);
//! (c) when the kernel refuses memory, an allocation fails (null) instead
//! of glibc's malloc failing inside a Rust allocation that aborts.
//!
//! Layout:
//! - Blocks of [`LARGE`] bytes or more (alignment 16 at most) get a mapping
//!   of their own with a 16-byte header (a check word and the mapping's
//!   length); realloc moves them with `mremap` (no copy), free unmaps them,
//!   so the big buffers of a dump and of debug info go back to the kernel.
//! - Smaller blocks come from `talc` (a no_std allocator) over regions
//!   mapped on demand (1 MiB each, the ninth and later doubling up to
//!   8 MiB), behind one spin lock
//!   ([`Rank::OwnHeap`], the last rank: its holder takes no other lock and
//!   only calls `mmap`, so a fork's prepare handler may wait for it).
//! - [`EMERGENCY`] bytes are mapped with the first region and claimed only
//!   when the kernel refuses a new region: the allocation that hit the limit
//!   succeeds, a flag turns true, and dumps give up with one line
//!   instead of asking for more (`background::dump`).
//! - Pointers that are not ours (the bootstrap buffer, or a block of the
//!   real allocator) are routed by address on free.

use crate::hot::lock::{Rank, SpinLock};
use crate::hot::sys;
use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use talc::{OomHandler, Span, Talc};

/// Blocks this large or larger get their own mapping.
pub const LARGE: usize = 64 << 10;
/// The first region for small blocks; the next ones are as large up to
/// `LINEAR_REGIONS` regions (what is mapped stays within a region of what
/// is used: doubling from the start mapped 7 MiB for 4.5 MiB of answers in
/// an exact-mode dump of gcc), then double up to `MAX_CHUNK`.
const FIRST_CHUNK: usize = 1 << 20;
const LINEAR_REGIONS: usize = 8;
const MAX_CHUNK: usize = 8 << 20;
/// Kept aside for when the kernel refuses memory.
pub const EMERGENCY: usize = 256 << 10;
/// Regions of the small-block heap remembered for routing frees.
const MAX_REGIONS: usize = 64;
const PAGE: usize = 4096;
/// Header in front of a large block: check word, mapping length.
const HEADER: usize = 16;
const MAGIC: usize = 0x6865_6170_6c69_7665; // "heaplive"

pub struct Regions {
    /// Mapped regions claimed by talc: (base, len).
    spans: [(usize, usize); MAX_REGIONS],
    n: usize,
    next_chunk: usize,
    /// The emergency region (base; 0 once claimed or never mapped).
    emergency: usize,
    /// Bytes mapped for this heap.
    mapped: usize,
    /// The scratch heap: no emergency region (a failed scratch allocation
    /// falls back to the main heap).
    scratch: bool,
    /// Set while [`give_back_free_pages`] looks for free pages: the heap
    /// must not grow for it.
    no_grow: bool,
}

impl Regions {
    fn contains(&self, p: usize) -> bool {
        self.spans[..self.n]
            .iter()
            .any(|&(b, l)| p.wrapping_sub(b) < l)
    }

    fn add(&mut self, base: usize, len: usize) {
        self.spans[self.n] = (base, len);
        self.n += 1;
        self.mapped += len;
    }

    const fn new(scratch: bool) -> Regions {
        Regions {
            spans: [(0, 0); MAX_REGIONS],
            n: 0,
            next_chunk: FIRST_CHUNK,
            emergency: 0,
            mapped: 0,
            scratch,
            no_grow: false,
        }
    }
}

impl OomHandler for Regions {
    fn handle_oom(talc: &mut Talc<Self>, layout: Layout) -> Result<(), ()> {
        let g = &mut talc.oom_handler;
        if g.n == MAX_REGIONS || g.no_grow {
            return Err(());
        }
        if g.n == 0 && !g.scratch && g.emergency == 0 && !EMERGENCY_USED.load(Relaxed) {
            g.emergency = sys::map_heap(EMERGENCY) as usize;
        }
        // Room for the block, its alignment and talc's tags.
        let need = round_page(layout.size() + layout.align() + 64);
        let len = need.max(g.next_chunk);
        let mut base = map_heap(len) as usize;
        let mut len = len;
        if base == 0 {
            // The kernel refuses (RLIMIT_AS, vm.max_map_count, ENOMEM).
            if g.scratch {
                return Err(());
            }
            LOW.store(true, Relaxed);
            if g.emergency == 0 || need > EMERGENCY {
                return Err(());
            }
            base = core::mem::take(&mut g.emergency);
            len = EMERGENCY;
            EMERGENCY_USED.store(true, Relaxed);
        } else if g.n + 1 >= LINEAR_REGIONS {
            g.next_chunk = (g.next_chunk * 2).min(MAX_CHUNK);
        }
        // SAFETY: a fresh private mapping of `len` bytes that nothing else
        // uses and that stays mapped for the life of the process.
        unsafe { talc.claim(Span::from_base_size(base as *mut u8, len)) }?;
        talc.oom_handler.add(base, len);
        Ok(())
    }
}

static HEAP: SpinLock<Talc<Regions>> = SpinLock::new(Rank::OwnHeap, Talc::new(Regions::new(false)));

/// The scratch heap: small blocks allocated by the thread in scratch mode
/// ([`Scratch`], the symbolizer while it reads debug information). Unmapped
/// as a whole by [`release_scratch`] once nothing in it is live. Same rank
/// as `HEAP`; the two are never nested.
static SCRATCH: SpinLock<Talc<Regions>> =
    SpinLock::new(Rank::OwnHeap, Talc::new(Regions::new(true)));

/// The thread in scratch mode (`pthread_self`), 0 for none.
static SCRATCH_OWNER: AtomicUsize = AtomicUsize::new(0);
/// Bytes mapped for large blocks, headers and page rounding included.
static LARGE_MAPPED: AtomicUsize = AtomicUsize::new(0);
/// Bytes of live large blocks (as requested).
static LARGE_USED: AtomicUsize = AtomicUsize::new(0);
/// The kernel refused memory at least once.
static LOW: AtomicBool = AtomicBool::new(false);
static EMERGENCY_USED: AtomicBool = AtomicBool::new(false);

fn round_page(n: usize) -> usize {
    (n + PAGE - 1) & !(PAGE - 1)
}

fn is_large(l: Layout) -> bool {
    l.size() >= LARGE && l.align() <= HEADER
}

/// heaplive's own memory: bytes mapped and bytes in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub mapped: usize,
    pub in_use: usize,
}

/// Gives the kernel back the whole free pages of the small-block heap,
/// which talc keeps resident once touched: after a dump, whose profile and
/// buffers came and went (cc1 in exact mode: 4.2 MiB resident, 1.2 MiB in
/// use), heaplive's heap is then what it uses. Talc has no walk of its free
/// chunks, so they are found by allocating them: page-aligned runs,
/// largest first, the heap refusing to grow meanwhile; each run is
/// discarded (it reads as zeros after) and all are freed again. Talc's
/// tags lie outside the blocks it hands out, so none of them is zeroed.
/// Returns the bytes given back. Holds the heap's lock throughout (only
/// heaplive's own threads allocate here, and they wait).
pub fn give_back_free_pages() -> usize {
    const RUNS: usize = 256;
    let mut h = HEAP.lock();
    h.oom_handler.no_grow = true;
    let mut taken = [(core::ptr::null_mut::<u8>(), 0usize); RUNS];
    let (mut n, mut given) = (0, 0);
    let mut size = FIRST_CHUNK;
    while size >= PAGE && n < RUNS {
        let Ok(l) = Layout::from_size_align(size, PAGE) else {
            break;
        };
        // SAFETY: a valid layout; the block is freed below with it.
        match unsafe { h.malloc(l) } {
            Ok(p) => {
                // SAFETY: the block is ours alone until freed, and its
                // contents do not matter.
                unsafe { sys::discard(p.as_ptr(), size) };
                taken[n] = (p.as_ptr(), size);
                n += 1;
                given += size;
            }
            Err(()) => size /= 2,
        }
    }
    for &(p, size) in &taken[..n] {
        if let (Some(p), Ok(l)) = (NonNull::new(p), Layout::from_size_align(size, PAGE)) {
            // SAFETY: allocated above with this layout, not freed yet.
            unsafe { h.free(p, l) };
        }
    }
    h.oom_handler.no_grow = false;
    given
}

pub fn usage() -> Usage {
    let (m1, u1) = {
        let h = HEAP.lock();
        (h.oom_handler.mapped, h.get_counters().allocated_bytes)
    };
    let (m2, u2) = {
        let h = SCRATCH.lock();
        (h.oom_handler.mapped, h.get_counters().allocated_bytes)
    };
    Usage {
        mapped: m1 + m2 + LARGE_MAPPED.load(Relaxed),
        in_use: u1 + u2 + LARGE_USED.load(Relaxed),
    }
}

fn self_id() -> usize {
    // SAFETY: pthread_self has no preconditions (a TLS read).
    unsafe { libc::pthread_self() as usize }
}

/// Scratch mode for this thread while it lives: new small blocks come from
/// the scratch heap. For data that is all dropped before
/// [`release_scratch`] (debug information); what outlives it must be
/// copied out after the guard is dropped. Not nested; one thread at a time
/// (the holder of the dump lock).
pub struct Scratch(());

impl Scratch {
    pub fn enter() -> Scratch {
        SCRATCH_OWNER.store(self_id(), Relaxed);
        Scratch(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        SCRATCH_OWNER.store(0, Relaxed);
    }
}

/// Scratch mode off for this thread while it lives, back on after (if it
/// was on): for data that must outlive the scratch heap, made in the middle
/// of a scratch section (a snapshot taken while symbolizing).
pub struct ScratchPaused(usize);

impl ScratchPaused {
    pub fn enter() -> ScratchPaused {
        let me = self_id();
        let was = SCRATCH_OWNER.load(Relaxed);
        if was == me {
            SCRATCH_OWNER.store(0, Relaxed);
        }
        ScratchPaused(if was == me { me } else { 0 })
    }
}

impl Drop for ScratchPaused {
    fn drop(&mut self) {
        if self.0 != 0 {
            SCRATCH_OWNER.store(self.0, Relaxed);
        }
    }
}

/// Gives the scratch heap's memory back to the kernel if nothing in it is
/// live. Returns the bytes still live there (0 when released).
pub fn release_scratch() -> usize {
    let mut h = SCRATCH.lock();
    let live = h.get_counters().allocated_bytes;
    if live != 0 {
        return live;
    }
    let r = &h.oom_handler;
    for &(base, len) in &r.spans[..r.n] {
        // SAFETY: our own regions, and nothing in them is live.
        unsafe { sys::unmap(base as *mut u8, len) };
    }
    *h = Talc::new(Regions::new(true));
    0
}

/// Maps the emergency region at start (one `mmap` of untouched, unreserved
/// pages), so that a process whose first heaplive allocation comes when the
/// kernel refuses mappings (a child forked early that uses up
/// vm.max_map_count, then exits) still has room for its exit dump.
pub fn init() {
    let mut h = HEAP.lock();
    if h.oom_handler.n == 0 && h.oom_handler.emergency == 0 && !EMERGENCY_USED.load(Relaxed) {
        h.oom_handler.emergency = sys::map_heap(EMERGENCY) as usize;
    }
}

/// Has the kernel refused heaplive memory since the last successful retry?
/// (The symbolizer then reads no more debug information.)
pub fn low() -> bool {
    LOW.load(Relaxed)
}

/// Clears the flag once memory could be had again (a dump that starts
/// tries a fresh mapping first).
pub fn retry_memory() -> bool {
    if !LOW.load(Relaxed) {
        return true;
    }
    let p = sys::map_heap(LARGE);
    if p.is_null() {
        return false;
    }
    // SAFETY: just mapped, unused.
    unsafe { sys::unmap(p, LARGE) };
    LOW.store(false, Relaxed);
    true
}

// ---------------------------------------------------------------------------
// The dump's reserve.
//
// A dump allocates as it goes (the symbolizer's debug information, the
// profile, the writers' buffers), and a Rust allocation that fails aborts
// the process (`handle_alloc_error`). Under RLIMIT_AS or RLIMIT_DATA a
// little above the program's need, or vm.max_map_count, the kernel may
// refuse heaplive a mapping in the middle of a dump. So a dump first maps a
// reserve: address space that is never touched (no resident memory) but
// counts against the limits. When the kernel then refuses a mapping, the
// reserve gives back what is asked (its tail is unmapped and the mapping
// tried again). Once less than [`RESERVE_LOW`] is left, [`reserve_low`]
// turns true, the symbolizer reads no more debug information ([`low`])
// and the dump gives up with one line at its next check; at the dump's
// end what is left is unmapped. A dump that cannot map its reserve is not
// started.

/// What a dump reserves. The largest stretch of a dump between two of its
/// checks of [`reserve_low`] is one module's debug information, read
/// sparsely (a few MiB for libc with libc6-dbg).
pub const RESERVE: usize = 32 << 20;
/// The least reserve a dump starts with (a process at its limit).
pub const RESERVE_MIN: usize = 8 << 20;
/// Left of the reserve when the dump gives up: for the stretch to its next
/// check (a section being decompressed is allocated fallibly).
pub const RESERVE_LOW: usize = 4 << 20;

/// The reserve's base address (0: none) and the length left from it.
static RESERVE_BASE: AtomicUsize = AtomicUsize::new(0);
static RESERVE_LEN: AtomicUsize = AtomicUsize::new(0);
/// Less than [`RESERVE_LOW`] is left of the reserve.
static RESERVE_LOW_NOW: AtomicBool = AtomicBool::new(false);

/// `sys::map_heap`, drawing on the dump's reserve when the kernel refuses.
pub fn map_heap(len: usize) -> *mut u8 {
    loop {
        let p = sys::map_heap(len);
        if !p.is_null() || !release_reserve(len) {
            return p;
        }
    }
}

/// Unmaps `len` bytes (rounded up to pages) from the reserve's tail, so
/// that the kernel grants them to a mapping of ours. False when the
/// reserve is empty. Lock-free: runs with the heap's lock held.
fn release_reserve(len: usize) -> bool {
    let want = round_page(len.max(1));
    let mut left = RESERVE_LEN.load(Acquire);
    loop {
        if left == 0 {
            return false;
        }
        let take = want.min(left);
        match RESERVE_LEN.compare_exchange(left, left - take, AcqRel, Acquire) {
            Ok(_) => {
                let base = RESERVE_BASE.load(Acquire);
                if left - take < RESERVE_LOW {
                    RESERVE_LOW_NOW.store(true, Relaxed);
                    LOW.store(true, Relaxed);
                }
                let saved = sys::errno();
                // SAFETY: `[base + left - take, base + left)` is the tail
                // of the reserve, untouched, and ours alone (the CAS).
                unsafe { libc::munmap((base + left - take) as *mut libc::c_void, take) };
                sys::set_errno(saved);
                return true;
            }
            Err(now) => left = now,
        }
    }
}

/// Maps the dump's reserve ([`RESERVE`], or less down to [`RESERVE_MIN`]);
/// false when the kernel refuses even that (the dump is not started). One
/// dump at a time (the dump lock).
fn take_reserve() -> bool {
    put_back_reserve();
    RESERVE_LOW_NOW.store(false, Relaxed);
    let mut len = RESERVE;
    while len >= RESERVE_MIN {
        let saved = sys::errno();
        // SAFETY: an anonymous private mapping with no address hint
        // touches no existing memory. Never touched: no resident memory.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        sys::set_errno(saved);
        if p != libc::MAP_FAILED {
            RESERVE_BASE.store(p as usize, Release);
            RESERVE_LEN.store(len, Release);
            return true;
        }
        len /= 2;
    }
    false
}

/// Unmaps what is left of the reserve (the dump's end).
fn put_back_reserve() {
    let left = RESERVE_LEN.swap(0, AcqRel);
    let base = RESERVE_BASE.load(Acquire);
    if left != 0 && base != 0 {
        let saved = sys::errno();
        // SAFETY: the reserve's untouched remainder, ours alone (the swap).
        unsafe { libc::munmap(base as *mut libc::c_void, left) };
        sys::set_errno(saved);
    }
}

/// Whether the kernel refused heaplive memory during this dump until less
/// than [`RESERVE_LOW`] is left of its reserve: the dump gives up.
pub fn reserve_low() -> bool {
    RESERVE_LOW_NOW.load(Relaxed)
}

/// The dump's reserve for as long as it lives (the outermost one, when
/// nested: the peak file written in the exit dump's course).
pub struct Reserve(bool);

/// A [`Reserve`] is alive.
static HELD: AtomicBool = AtomicBool::new(false);

impl Reserve {
    /// None when the kernel refuses even [`RESERVE_MIN`].
    pub fn take() -> Option<Reserve> {
        if HELD.swap(true, AcqRel) {
            return Some(Reserve(false));
        }
        if take_reserve() {
            Some(Reserve(true))
        } else {
            HELD.store(false, Release);
            None
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        if self.0 {
            put_back_reserve();
            HELD.store(false, Release);
        }
    }
}

fn alloc_large(size: usize) -> *mut u8 {
    let Some(len) = size.checked_add(HEADER + PAGE - 1).map(|n| n & !(PAGE - 1)) else {
        return core::ptr::null_mut();
    };
    let base = map_heap(len);
    if base.is_null() {
        LOW.store(true, Relaxed);
        return base;
    }
    // SAFETY: the header lies at the start of the fresh mapping.
    unsafe {
        *(base as *mut usize) = MAGIC ^ base as usize;
        *(base as *mut usize).add(1) = len;
    }
    LARGE_MAPPED.fetch_add(len, Relaxed);
    LARGE_USED.fetch_add(size, Relaxed);
    // SAFETY: inside the mapping.
    unsafe { base.add(HEADER) }
}

/// The mapping of a large block: (base, len), if `p` is one.
///
/// # Safety
/// `p` is a block of ours of at least `LARGE` bytes.
unsafe fn large_header(p: *mut u8) -> Option<(usize, usize)> {
    let base = p as usize - HEADER;
    // SAFETY: guaranteed by the caller: the header precedes the block.
    let (m, len) = unsafe { (*(base as *const usize), *(base as *const usize).add(1)) };
    (m == MAGIC ^ base).then_some((base, len))
}

/// An allocation (`GlobalAlloc::alloc`). Null when no memory can be had.
pub fn alloc(l: Layout) -> *mut u8 {
    if is_large(l) {
        let p = alloc_large(l.size());
        if !p.is_null() {
            return p;
        }
        // No new mapping: the small-block heap may still have room (its
        // blocks are found by address on free).
    }
    let l = if l.size() == 0 {
        // SAFETY: 1 is not zero, the alignment is the layout's.
        unsafe { Layout::from_size_align_unchecked(1, l.align()) }
    } else {
        l
    };
    let owner = SCRATCH_OWNER.load(Relaxed);
    if owner != 0 && owner == self_id() {
        // SAFETY: the size is not zero.
        if let Ok(p) = unsafe { SCRATCH.lock().malloc(l) } {
            return p.as_ptr();
        }
    }
    // SAFETY: the size is not zero.
    match unsafe { HEAP.lock().malloc(l) } {
        Ok(p) => p.as_ptr(),
        Err(()) => core::ptr::null_mut(),
    }
}

/// A free (`GlobalAlloc::dealloc`), routed by address.
///
/// # Safety
/// `p` came from [`alloc`]/[`realloc`] with layout `l` (or is a block of the
/// bootstrap buffer or of the real allocator) and is not used again.
pub unsafe fn dealloc(p: *mut u8, l: Layout) {
    if p.is_null() || crate::hot::real::is_boot(p.cast()) {
        return;
    }
    if is_large(l) {
        // SAFETY: a large layout from `alloc` has a header.
        if let Some((base, len)) = unsafe { large_header(p) } {
            // SAFETY: the header is cleared first so a stale pointer is not
            // taken for ours; the mapping is this block's alone.
            unsafe {
                *(base as *mut usize) = 0;
                sys::unmap(base as *mut u8, len);
            }
            LARGE_MAPPED.fetch_sub(len, Relaxed);
            LARGE_USED.fetch_sub(l.size(), Relaxed);
            return;
        }
    }
    let l1 = if l.size() == 0 {
        // SAFETY: as in `alloc`.
        unsafe { Layout::from_size_align_unchecked(1, l.align()) }
    } else {
        l
    };
    for heap in [&HEAP, &SCRATCH] {
        let mut h = heap.lock();
        if h.oom_handler.contains(p as usize) {
            // SAFETY: a block of this heap with this layout.
            unsafe { h.free(NonNull::new_unchecked(p), l1) };
            return;
        }
    }
    // Not ours: the real allocator's.
    // SAFETY: guaranteed by the caller.
    unsafe { crate::hot::real::free(p.cast()) };
}

/// `GlobalAlloc::realloc`.
///
/// # Safety
/// As `GlobalAlloc::realloc`: `p` came from this allocator with `l`;
/// `new` is not zero.
pub unsafe fn realloc(p: *mut u8, l: Layout, new: usize) -> *mut u8 {
    let new_l = match Layout::from_size_align(new, l.align()) {
        Ok(n) => n,
        Err(_) => return core::ptr::null_mut(),
    };
    // SAFETY: a large block of ours (its layout says so).
    if is_large(l)
        && is_large(new_l)
        && let Some((base, len)) = unsafe { large_header(p) }
    {
        let Some(new_len) = new.checked_add(HEADER + PAGE - 1).map(|n| n & !(PAGE - 1)) else {
            return core::ptr::null_mut();
        };
        // SAFETY: our own mapping (`map_heap`); the block moves with it.
        let mut q = unsafe { remap_heap(base as *mut u8, len, new_len) };
        while q.is_null() && new_len > len && release_reserve(new_len - len) {
            // SAFETY: as above.
            q = unsafe { remap_heap(base as *mut u8, len, new_len) };
        }
        if q.is_null() {
            LOW.store(true, Relaxed);
            // Below: allocate (maybe from the small-block heap) and copy.
            // SAFETY: guaranteed by the caller.
            return unsafe { move_block(p, l, new_l) };
        }
        let q = q as usize;
        // SAFETY: the header moved with the mapping.
        unsafe { *(q as *mut usize) = MAGIC ^ q };
        // SAFETY: as above.
        unsafe { *(q as *mut usize).add(1) = new_len };
        LARGE_MAPPED.fetch_add(new_len, Relaxed);
        LARGE_MAPPED.fetch_sub(len, Relaxed);
        LARGE_USED.fetch_add(new, Relaxed);
        LARGE_USED.fetch_sub(l.size(), Relaxed);
        return (q + HEADER) as *mut u8;
    }
    if !is_large(l) && !is_large(new_l) && l.size() != 0 {
        // The block stays in its heap.
        let heap = if HEAP.lock().oom_handler.contains(p as usize) {
            &HEAP
        } else {
            &SCRATCH
        };
        let mut h = heap.lock();
        if h.oom_handler.contains(p as usize) {
            // SAFETY: a block of this heap with layout `l`.
            let r = unsafe {
                if new >= l.size() {
                    h.grow(NonNull::new_unchecked(p), l, new)
                } else {
                    h.shrink(NonNull::new_unchecked(p), l, new);
                    Ok(NonNull::new_unchecked(p))
                }
            };
            if let Ok(q) = r {
                return q.as_ptr();
            }
            // The block's heap cannot grow (the scratch heap has no
            // emergency region): move it.
        }
    }
    // Across the threshold, or not ours: allocate, copy, free.
    // SAFETY: guaranteed by the caller.
    unsafe { move_block(p, l, new_l) }
}

/// realloc by allocating, copying and freeing.
///
/// # Safety
/// As [`realloc`].
unsafe fn move_block(p: *mut u8, l: Layout, new_l: Layout) -> *mut u8 {
    let new = new_l.size();
    let q = alloc(new_l);
    if !q.is_null() {
        let keep = if crate::hot::real::is_boot(p.cast()) {
            crate::hot::real::boot_size(p.cast())
        } else {
            l.size()
        };
        // SAFETY: both blocks hold at least min(old, new) bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(p, q, keep.min(new));
            dealloc(p, l);
        }
    }
    q
}

pub fn lock_for_fork() {
    HEAP.lock_raw();
    SCRATCH.lock_raw();
}

/// # Safety
/// Only from fork handlers, paired with `lock_for_fork`, or in a child
/// whose other threads are gone.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe {
        SCRATCH.unlock_raw();
        HEAP.unlock_raw();
    }
}

/// Out of `hot::sys` (whose code lies in the start-up window, src/layout.ld):
/// only a large block's realloc needs it.
/// Resizes (and maybe moves) a mapping of heaplive's heap from
/// [`sys::map_heap`], keeping its contents (`mremap` with `MREMAP_MAYMOVE`).
/// Null when the kernel refuses; the mapping is then as it was.
///
/// # Safety
/// `p..p+len` is such a mapping; nothing may use it through `p` after a
/// move.
unsafe fn remap_heap(p: *mut u8, len: usize, new_len: usize) -> *mut u8 {
    let saved = sys::errno();
    // Out of the list while it moves (as `unmap`); back in either way.
    sys::unlist(p as usize, len);
    // SAFETY: guaranteed by the caller; MAYMOVE keeps the contents.
    let q = unsafe { libc::mremap(p.cast(), len, new_len, libc::MREMAP_MAYMOVE) };
    sys::set_errno(saved);
    if q == libc::MAP_FAILED {
        sys::list(p as usize, len, sys::Owner::Heap);
        core::ptr::null_mut()
    } else {
        sys::list(q as usize, new_len, sys::Owner::Heap);
        q.cast()
    }
}

#[cfg(test)]
#[path = "ownheap_tests.rs"]
mod tests;

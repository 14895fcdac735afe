//! Stack capture and the de-duplicated stack table.
//!
//! A stack is the return addresses from the allocation's caller outwards
//! (leaf first). The table maps each distinct stack to a `StackId` and keeps
//! per-stack live accounting for leak warnings. Two parts, both in our own
//! memory and mapped only when first needed:
//!
//! - the records ([`Slot`]), numbered from 1 in the order stacks first
//!   appear, in chunks of `CHUNK_SLOTS` mapped as the count grows: a
//!   program with a few hundred stacks maps one 512 KiB chunk;
//! - the index: open-addressing hash tables of record numbers (4 bytes an
//!   entry) in generations of 4 Ki, 16 Ki, 64 Ki, 256 Ki and 1 Mi entries,
//!   each mapped and faulted in at once when the one before it is three
//!   quarters full. A program with a few thousand stacks has a 16 KiB index
//!   (one hash table of 4 MiB took a page fault per new stack, about 800 in
//!   a short C++ run, and a cache miss per lookup); a lookup probes the
//!   generations oldest first, where the first stacks of a program are.
//!
//! Lookups are lock-free. A new stack fills a record first (frames copied
//! into the arena) and then publishes its number in the index with a
//! compare-and-swap, so a reader that finds a number finds a complete
//! record. Records are never removed.

use crate::hot::arena::Arena;
use core::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

pub const MAX_FRAMES: usize = 128;
/// Entries of the index's generations: `1 << (GEN0_SHIFT + 2 g)`.
const GENS: usize = 5;
const GEN0_SHIFT: u32 = 12;
const INDEX_LEN: usize = 1 << (GEN0_SHIFT + 2 * (GENS as u32 - 1));
const MAX_PROBES: usize = 4096;
const CHUNK_SHIFT: u32 = 12;
const CHUNK_SLOTS: usize = 1 << CHUNK_SHIFT;
/// Records at most: one index entry in four stays empty.
pub const MAX_STACKS: usize = INDEX_LEN / 4 * 3;
const CHUNKS: usize = MAX_STACKS.div_ceil(CHUNK_SLOTS);

pub type StackId = u32;
/// The id used when the table is full or out of memory: an empty stack.
pub const OVERFLOW: StackId = 0;

/// One record: identity and live accounting of a stack.
#[repr(C)]
pub struct Slot {
    /// Hash of the frames.
    hash: AtomicU64,
    /// Address of the frames in the arena: `[len, ip0, ip1, ...]`.
    record: AtomicUsize,
    /// Un-biased live bytes and milli-blocks held by this stack now.
    pub live_bytes: AtomicI64,
    pub live_milliblocks: AtomicI64,
    /// Leak warnings: the amounts at the last warning (0 = never warned).
    pub warned_bytes: AtomicI64,
    pub warned_milliblocks: AtomicI64,
    /// Monotonic time of the last warning, ns.
    pub warned_at: AtomicU64,
    /// The allocation view: un-biased bytes and milli-blocks allocated by
    /// this stack since start (the same samples, added when taken, never
    /// taken out).
    pub alloc_bytes: AtomicU64,
    pub alloc_milliblocks: AtomicU64,
    /// The peak view: `live_*` as they were at the last freeze of
    /// `hot::peak`, valid only while `peak_epoch` is that freeze's epoch
    /// (read them with [`Slot::peak`]: a stack not changed since the freeze
    /// holds its live amounts).
    pub peak_bytes: AtomicI64,
    pub peak_milliblocks: AtomicI64,
    /// PHP mode: `live_*` at the running request's peak (`hot::php`), as
    /// the `peak_*` fields (read with [`Slot::request_peak`]).
    pub request_peak_bytes: AtomicI64,
    pub request_peak_milliblocks: AtomicI64,
    /// The estimated variance of `live_bytes`, `alloc_bytes`, `peak_bytes`
    /// and `request_peak_bytes`: the sums of their samples' variance terms
    /// (`sampler::variance_units`, units of R^2 / 2^32; 0 in exact mode).
    pub live_variance: AtomicI64,
    pub alloc_variance: AtomicU64,
    pub peak_variance: AtomicI64,
    pub request_peak_variance: AtomicI64,
    /// The epochs of `hot::peak` and `hot::php` whose state the `peak_*`
    /// and `request_peak_*` fields hold (`SAVING` while a thread copies).
    peak_epoch: AtomicU64,
    request_peak_epoch: AtomicU64,
    /// The temporary view (`HEAPLIVE_VIEWS=temporary`): un-biased bytes,
    /// milli-blocks and variance units of the samples freed, per lifetime
    /// class (`live::FREED_1MS`, `FREED_1S`, `FREED_LATER`, and
    /// `TEMPORARY`, which overlaps them).
    pub freed: [Freed; crate::hot::live::FREED_CLASSES],
}

/// Freed samples of one lifetime class.
#[repr(C)]
#[derive(Default)]
pub struct Freed {
    pub bytes: AtomicU64,
    pub milliblocks: AtomicU64,
    pub variance: AtomicU64,
}

/// A slot's epoch while a thread copies its live amounts into a frozen copy.
const SAVING: u64 = u64::MAX;

/// A frozen copy of every stack's live amounts, taken lazily: a freeze
/// ([`freeze`]) only moves a global epoch on, and each stack copies its live
/// amounts into its frozen fields the first time they change after it
/// (copy-on-write), so a freeze costs the same for 10 stacks or 100,000, and
/// an amount change costs one load and compare more. A stack not changed
/// since the freeze still holds, in its live fields, what it held then.
///
/// Exact to the byte where one thread changes the amounts; with several
/// threads, an amount change in flight on another thread at the freeze may
/// land on either side of it (as with any copy that does not stop them).
#[inline(always)]
fn save_frozen(s: &Slot, epoch: &AtomicU64, now: u64, fields: [&AtomicI64; 3]) {
    let mine = epoch.load(Relaxed);
    if mine != now {
        save_frozen_slow(s, epoch, mine, now, fields);
    }
}

#[cold]
#[inline(never)]
fn save_frozen_slow(s: &Slot, epoch: &AtomicU64, mine: u64, now: u64, fields: [&AtomicI64; 3]) {
    // A thread interrupted while it copies (a signal handler that
    // allocates) leaves the copy to it; two threads racing: one copies.
    if mine == SAVING
        || epoch
            .compare_exchange(mine, SAVING, Acquire, Relaxed)
            .is_err()
    {
        return;
    }
    fields[0].store(s.live_bytes.load(Relaxed), Relaxed);
    fields[1].store(s.live_milliblocks.load(Relaxed), Relaxed);
    fields[2].store(s.live_variance.load(Relaxed), Relaxed);
    epoch.store(now, Release);
}

/// The frozen amounts of the copy of epoch `now`: the frozen fields when
/// the stack changed since the freeze, else its live amounts.
fn frozen(s: &Slot, epoch: &AtomicU64, now: u64, fields: [&AtomicI64; 3]) -> (i64, i64, i64) {
    let f = if epoch.load(Acquire) == now {
        fields
    } else {
        [&s.live_bytes, &s.live_milliblocks, &s.live_variance]
    };
    (f[0].load(Relaxed), f[1].load(Relaxed), f[2].load(Relaxed))
}

impl Slot {
    fn peak_fields(&self) -> [&AtomicI64; 3] {
        [
            &self.peak_bytes,
            &self.peak_milliblocks,
            &self.peak_variance,
        ]
    }

    fn request_peak_fields(&self) -> [&AtomicI64; 3] {
        [
            &self.request_peak_bytes,
            &self.request_peak_milliblocks,
            &self.request_peak_variance,
        ]
    }

    /// Bytes, milli-blocks and variance (`sampler::variance_units`) at the
    /// last freeze of `hot::peak` (the peak view).
    pub fn peak(&self) -> (i64, i64, i64) {
        frozen(
            self,
            &self.peak_epoch,
            crate::hot::peak::epoch(),
            self.peak_fields(),
        )
    }

    /// The same at the last freeze of the running PHP request's peak.
    pub fn request_peak(&self) -> (i64, i64, i64) {
        frozen(
            self,
            &self.request_peak_epoch,
            crate::hot::php::request_epoch(),
            self.request_peak_fields(),
        )
    }

    /// Before the live amounts change: the frozen copies that do not have
    /// this stack's amounts yet take them.
    #[inline(always)]
    fn before_change(&self) {
        save_frozen(
            self,
            &self.peak_epoch,
            crate::hot::peak::epoch(),
            self.peak_fields(),
        );
        save_frozen(
            self,
            &self.request_peak_epoch,
            crate::hot::php::request_epoch(),
            self.request_peak_fields(),
        );
    }
}

const CHUNK_BYTES: usize = CHUNK_SLOTS * core::mem::size_of::<Slot>();

#[allow(clippy::declare_interior_mutable_const)]
const NO_GEN: AtomicPtr<AtomicU32> = AtomicPtr::new(core::ptr::null_mut());
static INDEX: [AtomicPtr<AtomicU32>; GENS] = [NO_GEN; GENS];
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU32 = AtomicU32::new(0);
/// Entries used in each generation.
static USED: [AtomicU32; GENS] = [ZERO; GENS];
#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: AtomicPtr<Slot> = AtomicPtr::new(core::ptr::null_mut());
static CHUNK: [AtomicPtr<Slot>; CHUNKS] = [NO_CHUNK; CHUNKS];
/// The next record number (0 is `OVERFLOW`).
static NEXT: AtomicU32 = AtomicU32::new(1);
static ARENA: Arena = Arena::new();

/// Maps `*slot` with `bytes` of zeroed memory unless another thread did
/// (also the cached unwinder's table).
#[inline]
pub(crate) fn get_or_map<T>(slot: &AtomicPtr<T>, bytes: usize) -> *mut T {
    get_or_map_with(slot, bytes, crate::hot::sys::map)
}

/// `get_or_map` with `map` to make the mapping.
fn get_or_map_with<T>(slot: &AtomicPtr<T>, bytes: usize, map: fn(usize) -> *mut u8) -> *mut T {
    let p = slot.load(Acquire);
    if !p.is_null() {
        return p;
    }
    let fresh = map(bytes) as *mut T;
    if fresh.is_null() {
        return fresh;
    }
    match slot.compare_exchange(core::ptr::null_mut(), fresh, AcqRel, Acquire) {
        Ok(_) => fresh,
        Err(winner) => {
            // SAFETY: nobody saw `fresh`.
            unsafe { crate::hot::sys::unmap(fresh.cast(), bytes) };
            winner
        }
    }
}

/// The record of a stack id, if it exists.
pub fn slot(id: StackId) -> Option<&'static Slot> {
    let id = id as usize;
    if id == OVERFLOW as usize || id >= MAX_STACKS {
        return None;
    }
    let chunk = CHUNK[id >> CHUNK_SHIFT].load(Acquire);
    if chunk.is_null() {
        return None;
    }
    // SAFETY: in bounds of a chunk that is never freed.
    Some(unsafe { &*chunk.add(id & (CHUNK_SLOTS - 1)) })
}

/// A new record for `frames_in`, not yet in the index.
fn new_record(h: u64, frames_in: &[usize]) -> StackId {
    let id = NEXT.fetch_add(1, Relaxed) as usize;
    if id >= MAX_STACKS {
        NEXT.store(MAX_STACKS as u32, Relaxed);
        return OVERFLOW;
    }
    let chunk = get_or_map(&CHUNK[id >> CHUNK_SHIFT], CHUNK_BYTES);
    if chunk.is_null() {
        return OVERFLOW;
    }
    let rec = ARENA.alloc((frames_in.len() + 1) * 8) as *mut usize;
    if rec.is_null() {
        return OVERFLOW;
    }
    // SAFETY: rec has room for len + frames; the chunk holds slot `id`,
    // which no other thread has (the number came from `NEXT`).
    unsafe {
        *rec = frames_in.len();
        core::ptr::copy_nonoverlapping(frames_in.as_ptr(), rec.add(1), frames_in.len());
        let s = &*chunk.add(id & (CHUNK_SLOTS - 1));
        s.hash.store(h, Relaxed);
        s.record.store(rec as usize, Release);
    }
    id as StackId
}

fn hash(frames: &[usize]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325 ^ frames.len() as u64;
    for &f in frames {
        h = (h ^ f as u64).wrapping_mul(0x0000_0100_0000_01B3);
        h ^= h >> 29;
    }
    h
}

/// The frames of a stored stack, leaf first.
pub fn frames(id: StackId) -> &'static [usize] {
    let Some(s) = slot(id) else { return &[] };
    let r = s.record.load(Acquire);
    if r == 0 {
        return &[];
    }
    // SAFETY: records are written completely before `record` is published
    // and never change.
    unsafe {
        let len = *(r as *const usize);
        core::slice::from_raw_parts((r as *const usize).add(1), len)
    }
}

fn gen_len(g: usize) -> usize {
    1 << (GEN0_SHIFT + 2 * g as u32)
}

/// What a generation's probe sequence for a stack ends in.
enum Probe {
    Found(StackId),
    /// An empty entry: the stack is not in this generation.
    Absent,
}

/// Looks for `frames_in` (hash `h`) in a generation.
#[inline]
fn probe(index: *mut AtomicU32, len: usize, h: u64, frames_in: &[usize]) -> Probe {
    let mut i = (h as usize) & (len - 1);
    for _ in 0..MAX_PROBES.min(len) {
        // SAFETY: i < len, the generation's length.
        let cur = unsafe { &*index.add(i) }.load(Acquire);
        if cur == OVERFLOW {
            return Probe::Absent;
        }
        if slot(cur).is_some_and(|s| s.hash.load(Relaxed) == h) && frames(cur) == frames_in {
            return Probe::Found(cur);
        }
        i = (i + 1) & (len - 1);
    }
    Probe::Absent
}

/// The id of `frames`, adding it if new. `OVERFLOW` when the table is full.
pub fn intern(frames_in: &[usize]) -> StackId {
    let h = hash(frames_in);
    let mut newest = None;
    for (g, generation) in INDEX.iter().enumerate() {
        let index = generation.load(Acquire);
        if index.is_null() {
            break;
        }
        if let Probe::Found(id) = probe(index, gen_len(g), h, frames_in) {
            return id;
        }
        newest = Some(g);
    }
    // A new stack goes into the newest generation, or the next one once
    // that is three quarters full. Two threads adding the same new stack
    // meet at the same entry of a generation (the loser finds the winner's
    // record there); only if one of them saw the next generation made and
    // the other did not can a stack get two records (its samples are then
    // split over two identical stacks in the profile, nothing is lost).
    let mut g = newest.unwrap_or(0);
    while g < GENS && USED[g].load(Relaxed) as usize >= gen_len(g) / 4 * 3 {
        g += 1;
    }
    if g == GENS {
        return OVERFLOW;
    }
    let len = gen_len(g);
    let index = get_or_map_with(&INDEX[g], len * 4, crate::hot::sys::map_populated);
    if index.is_null() {
        return OVERFLOW;
    }
    let mut i = (h as usize) & (len - 1);
    // A record made for this stack that lost a race for an index entry, to
    // be used at the next empty entry.
    let mut mine = OVERFLOW;
    for _ in 0..MAX_PROBES {
        // SAFETY: i < len, the generation's length.
        let e = unsafe { &*index.add(i) };
        let cur = e.load(Acquire);
        if cur == OVERFLOW {
            if mine == OVERFLOW {
                mine = new_record(h, frames_in);
                if mine == OVERFLOW {
                    return OVERFLOW;
                }
            }
            if e.compare_exchange(OVERFLOW, mine, AcqRel, Acquire).is_ok() {
                USED[g].fetch_add(1, Release);
                return mine;
            }
            // Lost the race for this entry: look at what the winner put there.
            continue;
        }
        if slot(cur).is_some_and(|s| s.hash.load(Relaxed) == h) && frames(cur) == frames_in {
            return cur;
        }
        i = (i + 1) & (len - 1);
    }
    OVERFLOW
}

/// The number of records handed out so far (ids are below it).
pub fn count() -> StackId {
    (NEXT.load(Acquire) as usize).min(MAX_STACKS) as StackId
}

/// Counts a new sample into a stack's allocation view.
pub fn account_alloc(id: StackId, bytes: i64, milliblocks: i64, variance: i64) {
    if let Some(s) = slot(id) {
        s.alloc_variance.fetch_add(variance.max(0) as u64, Relaxed);
        s.alloc_bytes.fetch_add(bytes.max(0) as u64, Relaxed);
        s.alloc_milliblocks
            .fetch_add(milliblocks.max(0) as u64, Relaxed);
    }
}

/// `len` bytes (8-aligned) of the stack table's arena, which lives as long
/// as the process: for the names of pseudo frames (`names`).
/// A sample of stack `id` freed in lifetime class `class`.
pub fn account_freed(id: StackId, class: usize, bytes: i64, milliblocks: i64, variance: i64) {
    if let Some(f) = slot(id).and_then(|s| s.freed.get(class)) {
        f.bytes.fetch_add(bytes.max(0) as u64, Relaxed);
        f.milliblocks.fetch_add(milliblocks.max(0) as u64, Relaxed);
        f.variance.fetch_add(variance.max(0) as u64, Relaxed);
    }
}

pub fn arena_alloc(len: usize) -> *mut u8 {
    ARENA.alloc(len)
}

/// Adds (or with negative amounts removes) live memory to a stack, with
/// the variance terms of its samples (`sampler::variance_units`).
pub fn account(id: StackId, bytes: i64, milliblocks: i64, variance: i64) -> Option<(i64, i64)> {
    let s = slot(id)?;
    s.before_change();
    if variance != 0 {
        s.live_variance.fetch_add(variance, Relaxed);
    }
    let b = s.live_bytes.fetch_add(bytes, Relaxed) + bytes;
    let m = s.live_milliblocks.fetch_add(milliblocks, Relaxed) + milliblocks;
    Some((b, m))
}

pub fn lock_for_fork() {
    ARENA.lock_for_fork();
}

/// # Safety
/// Fork handlers only, paired with `lock_for_fork`, or a child whose other
/// threads are gone.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { ARENA.unlock_after_fork() };
}

// ---------------------------------------------------------------------------
// Capture.

/// The text range of this library, read from our own ELF header: frames in
/// it are skipped.
fn self_text() -> (usize, usize) {
    static RANGE: AtomicU64 = AtomicU64::new(0);
    static END: AtomicUsize = AtomicUsize::new(0);
    let s = RANGE.load(Acquire);
    if s != 0 {
        return (s as usize, END.load(Acquire));
    }
    unsafe extern "C" {
        static __ehdr_start: libc::Elf64_Ehdr;
    }
    // SAFETY: the linker defines __ehdr_start at our own ELF header, which
    // is mapped (it is in the first PT_LOAD).
    let (lo, hi) = unsafe { text_range(&__ehdr_start) };
    END.store(hi, Release);
    RANGE.store(lo as u64, Release);
    (lo, hi)
}

/// The executable range (its PF_X PT_LOAD segments) of the loaded module
/// whose ELF header is at `eh`; `(usize::MAX, 0)` when it has none.
///
/// # Safety
/// `eh` must point at a loaded module's ELF header, mapped with its
/// program headers (they follow it in the first PT_LOAD).
pub unsafe fn text_range(eh: *const libc::Elf64_Ehdr) -> (usize, usize) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let base_ptr = eh as usize;
        let ph = (base_ptr + (*eh).e_phoff as usize) as *const libc::Elf64_Phdr;
        let mut first_vaddr = usize::MAX;
        for i in 0..(*eh).e_phnum as usize {
            let p = &*ph.add(i);
            if p.p_type == libc::PT_LOAD {
                first_vaddr = first_vaddr.min(p.p_vaddr as usize);
            }
        }
        let bias = base_ptr
            - if first_vaddr == usize::MAX {
                0
            } else {
                first_vaddr
            };
        let (mut lo, mut hi) = (usize::MAX, 0usize);
        for i in 0..(*eh).e_phnum as usize {
            let p = &*ph.add(i);
            if p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0 {
                lo = lo.min(bias + p.p_vaddr as usize);
                hi = hi.max(bias + (p.p_vaddr + p.p_memsz) as usize);
            }
        }
        (lo, hi)
    }
}

/// Collects frames as an unwinder reports them: frames of this library
/// near the top (and everything above them) are dropped, so `buf` ends up
/// holding the program's frames, at most `MAX_FRAMES` of them.
struct Collector<'a> {
    buf: &'a mut [usize; MAX_FRAMES],
    n: usize,
    /// A frame came after the buffer was full: the stack is cut.
    cut: bool,
    seen: usize,
    lo: usize,
    hi: usize,
}

impl<'a> Collector<'a> {
    fn new(buf: &'a mut [usize; MAX_FRAMES]) -> Self {
        let (lo, hi) = self_text();
        Collector {
            buf,
            n: 0,
            cut: false,
            seen: 0,
            lo,
            hi,
        }
    }

    /// Takes one return address; false when the buffer is full.
    #[inline(always)]
    fn push(&mut self, ip: usize) -> bool {
        // The outermost frame may report address 0.
        if ip <= 4096 {
            return true;
        }
        self.seen += 1;
        // Up to the last frame of ours near the top: between our wrapper
        // and our malloc there may be the real operator new (libstdc++).
        if self.seen <= 24 && ip >= self.lo && ip < self.hi {
            self.n = 0;
            return true;
        }
        if self.n == MAX_FRAMES {
            // One frame more than fits: the stack is cut here.
            self.cut = true;
            return false;
        }
        self.buf[self.n] = ip;
        self.n += 1;
        true
    }

    /// Drops the real operator new, which our trampolines jump into, from
    /// the top; a stack cut at the limit ends (outermost) in a
    /// `[truncated]` frame instead of its last one. Returns the number of
    /// frames.
    fn finish(self) -> usize {
        let mut start = 0;
        while start < self.n && crate::hot::real::in_real_new(self.buf[start]) {
            start += 1;
        }
        if start > 0 {
            self.buf.copy_within(start..self.n, 0);
        }
        let n = self.n - start;
        if self.cut && n > 0 {
            self.buf[n - 1] = crate::hot::names::truncated();
        }
        n
    }
}

/// libgcc's unwinder (`_Unwind_Backtrace`: an FDE search per frame).
#[inline(never)]
fn capture_libgcc(buf: &mut [usize; MAX_FRAMES]) -> usize {
    let mut c = Collector::new(buf);
    // The callback only writes into buf; libgcc's walk reads DWARF CFI
    // without locks and does not allocate.
    crate::hot::unwind::libgcc_walk(|ip| c.push(ip));
    c.finish()
}

/// The cached unwinder (`unwind.rs`); None where libgcc must do the stack.
#[inline(always)]
fn capture_cached(buf: &mut [usize; MAX_FRAMES]) -> Option<usize> {
    let mut c = Collector::new(buf);
    if crate::hot::unwind::walk(|ip| c.push(ip)) {
        Some(c.finish())
    } else {
        None
    }
}

/// Counters of `HEAPLIVE_UNWIND=check` (and of fallbacks in every mode).
pub static UNWIND_COMPARED: AtomicU64 = AtomicU64::new(0);
pub static UNWIND_DIFFERED: AtomicU64 = AtomicU64::new(0);
pub static UNWIND_FELL_BACK: AtomicU64 = AtomicU64::new(0);

/// Captures the caller's stack into `buf`, leaf first, without frames of
/// this library. Returns the number of frames.
#[inline(always)]
pub fn capture(buf: &mut [usize; MAX_FRAMES]) -> usize {
    use heaplive_format::grammar::Unwind;
    match crate::hot::config::get().unwind {
        Unwind::Libgcc => capture_libgcc(buf),
        Unwind::Cached => match capture_cached(buf) {
            Some(n) => n,
            None => {
                UNWIND_FELL_BACK.fetch_add(1, Relaxed);
                capture_libgcc(buf)
            }
        },
        Unwind::Check => capture_checked(buf),
    }
}

/// Both unwinders; libgcc's stack is the one kept. A difference is said in
/// a line (the first ten) and counted.
#[inline(never)]
fn capture_checked(buf: &mut [usize; MAX_FRAMES]) -> usize {
    let mut mine = [0usize; MAX_FRAMES];
    let cached = capture_cached(&mut mine);
    let n = capture_libgcc(buf);
    let Some(m) = cached else {
        UNWIND_FELL_BACK.fetch_add(1, Relaxed);
        return n;
    };
    if let Some(at) = compare_frames(&UNWIND_COMPARED, &UNWIND_DIFFERED, &mine[..m], &buf[..n]) {
        crate::hot::log::line(format_args!(
            "heaplive[{}]: unwind check: the cached unwinder differs from libgcc at frame {}: {:#x} vs {:#x} ({} vs {} frames)",
            crate::hot::sys::getpid(),
            at,
            mine.get(at).copied().filter(|_| at < m).unwrap_or(0),
            buf.get(at).copied().filter(|_| at < n).unwrap_or(0),
            m,
            n
        ));
    }
    n
}

/// HEAPLIVE_UNWIND=check's count of one comparison of `a` with `b` (both
/// ways of taking the same frames): counted in `compared`, and in
/// `differed` when they differ. The first frame where they do, for the
/// first ten differences (those are said); None otherwise.
pub(crate) fn compare_frames(
    compared: &AtomicU64,
    differed: &AtomicU64,
    a: &[usize],
    b: &[usize],
) -> Option<usize> {
    compared.fetch_add(1, Relaxed);
    if a == b || differed.fetch_add(1, Relaxed) >= 10 {
        return None;
    }
    let common = a.len().min(b.len());
    Some((0..common).find(|&i| a[i] != b[i]).unwrap_or(common))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index grows with the stacks: mapped (and faulted in) in
    /// generations, not 4 MiB touched at random from the first stack on
    /// (a page fault per new stack).
    #[test]
    fn index_grows_in_generations_and_finds_every_stack() {
        let ids: Vec<StackId> = (0..5000usize)
            .map(|i| intern(&[0x7a11_0000 + i, 0x99, i]))
            .collect();
        for (i, &id) in ids.iter().enumerate() {
            assert_ne!(id, OVERFLOW);
            assert_eq!(intern(&[0x7a11_0000 + i, 0x99, i]), id, "stack {i}");
            assert_eq!(frames(id), &[0x7a11_0000 + i, 0x99, i]);
        }
        let mapped: usize = (0..GENS)
            .filter(|&g| !INDEX[g].load(Acquire).is_null())
            .map(|g| gen_len(g) * 4)
            .sum();
        // Entries used are read before the records made: other tests
        // intern meanwhile, and a record is made before its entry is
        // taken, so read in this order entries stay below records.
        let used: usize = (0..GENS).map(|g| USED[g].load(Acquire) as usize).sum();
        let stacks = count() as usize;
        assert!(
            mapped <= 64 * stacks,
            "{mapped} bytes of index for {stacks} stacks"
        );
        // Each generation is at most three quarters full, and the
        // generations used hold every stack.
        assert!(used >= 5000 && used < stacks);
        for (g, u) in USED.iter().enumerate() {
            assert!(u.load(Relaxed) as usize <= gen_len(g) / 4 * 3 + 64);
        }
    }

    /// The lazy frozen copy (`hot::peak`'s freezes): what it reads at a
    /// freeze's epoch is the state at that freeze, whatever changed since,
    /// and a stack not changed since shows its live amounts.
    #[test]
    fn frozen_copy_is_the_state_at_the_freeze() {
        // SAFETY: a record is atomics only; all zero is a new record.
        let s: Slot = unsafe { core::mem::zeroed() };
        let (e, f) = (&s.peak_epoch, s.peak_fields());
        let change = |now: u64, d: i64| {
            save_frozen(&s, e, now, f);
            s.live_bytes.fetch_add(d, Relaxed);
            s.live_variance.fetch_add(d.abs(), Relaxed);
        };
        // No freeze yet (epoch 0): the copy is empty.
        change(0, 100);
        assert_eq!(frozen(&s, e, 0, f), (0, 0, 0));
        // Freeze 1 with 100 live: not changed since, read from live.
        assert_eq!(frozen(&s, e, 1, f), (100, 0, 100));
        change(1, -40);
        change(1, 5);
        assert_eq!(frozen(&s, e, 1, f), (100, 0, 100));
        assert_eq!(s.live_bytes.load(Relaxed), 65);
        // Freeze 2 with 65 live, then changes: the copy is freeze 2's.
        change(2, 1000);
        change(2, -1);
        assert_eq!(frozen(&s, e, 2, f), (65, 0, 145));
        // A copy being taken (SAVING) reads the live amounts.
        e.store(SAVING, Relaxed);
        assert_eq!(frozen(&s, e, 2, f).0, 1064);
        save_frozen(&s, e, 3, f);
        assert_eq!(e.load(Relaxed), SAVING, "a copy in progress is left alone");
    }

    #[test]
    fn intern_dedups_and_keeps_frames() {
        let a = [0x1000usize, 0x2000, 0x3000];
        let b = [0x1000usize, 0x2000, 0x3001];
        let ia = intern(&a);
        let ib = intern(&b);
        assert_ne!(ia, OVERFLOW);
        assert_ne!(ia, ib);
        assert_eq!(intern(&a), ia);
        assert_eq!(frames(ia), &a);
        assert_eq!(frames(ib), &b);
        assert_eq!(intern(&[]), intern(&[]));
    }

    #[test]
    fn intern_from_many_threads_agrees() {
        let ids: Vec<StackId> = crate::same_from_threads(8, || {
            (0..2000usize)
                .map(|i| intern(&[0xabc000 + i, 7, i]))
                .collect()
        });
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(frames(id), &[0xabc000 + i, 7, i]);
        }
    }
}

//! The live table: every sampled allocation that has not been freed, keyed
//! by address.
//!
//! 256 shards, each a spin lock over an open-addressing table (linear
//! probing, backward-shift deletion) in memory we map ourselves. A shard's
//! lock is never held while calling anything that may allocate: growing maps
//! a new table with mmap (a system call, on the slow path only), and the
//! dump sums the entries per stack into a buffer it sized before locking.

use crate::hot::lock::{Rank, SpinLock};
use crate::hot::stacks::StackId;

const SHARDS: usize = 256;
/// A table's first size (at least one window).
const INITIAL: usize = 256;

/// `Entry::kind` of a malloc (or operator new) block.
pub const MALLOC: u32 = 0;
/// `Entry::kind` of a ZendMM block (PHP mode): dropped at request end.
pub const ZEND_MM: u32 = 1;

/// A live sample: 16 bytes, so that a table line of 64 bytes holds four
/// (exact mode keeps one per live block: the table's size and its cache
/// misses are most of exact mode's cost).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Entry {
    /// 0 = empty slot.
    pub addr: usize,
    /// The requested size (`SIZE_BITS`), the stack (`STACK_BITS`) and the
    /// kind (the top bit).
    meta: u64,
}

/// Bits of a size in an entry: blocks of 8 TiB and more count as 8 TiB - 1.
const SIZE_BITS: u32 = 43;
/// Bits of a stack id (the stack table has fewer than 2^20 records).
const STACK_BITS: u32 = 20;
const SIZE_MAX: u64 = (1 << SIZE_BITS) - 1;
const _: () = assert!(crate::hot::stacks::MAX_STACKS < 1 << STACK_BITS);
const _: () = assert!(SIZE_BITS + STACK_BITS + 1 == 64);

impl Entry {
    pub fn new(addr: usize, size: usize, stack: StackId, kind: u32) -> Entry {
        Entry {
            addr,
            meta: (size as u64).min(SIZE_MAX)
                | (stack as u64 & ((1 << STACK_BITS) - 1)) << SIZE_BITS
                | ((kind & 1) as u64) << 63,
        }
    }

    /// The requested size (ZendMM: the block's size).
    pub fn size(&self) -> usize {
        (self.meta & SIZE_MAX) as usize
    }

    pub fn stack(&self) -> StackId {
        ((self.meta >> SIZE_BITS) & ((1 << STACK_BITS) - 1)) as StackId
    }

    /// Which allocator the block came from: `MALLOC` or `ZEND_MM`.
    pub fn kind(&self) -> u32 {
        (self.meta >> 63) as u32
    }

    /// The same sample for a block now at `addr` of `size` bytes.
    pub fn moved(&self, addr: usize, size: usize) -> Entry {
        Entry::new(addr, size, self.stack(), self.kind())
    }
}

struct Table {
    slots: *mut Entry,
    /// The temporary view (`HEAPLIVE_VIEWS=temporary`): each slot's
    /// `Birth` (`Birth::pack`), parallel to `slots`; null when the view is
    /// off or its memory could not be had (lifetimes unknown).
    born: *mut u64,
    cap: usize,
    len: usize,
}

/// Whether the live table keeps allocation times (the temporary view).
static TIMES: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The coarse clock's resolution in `now_units`, at least 1 (read once).
static TICK_UNITS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(1);

/// Keeps allocation times from now on (set at start-up, before samples).
pub fn keep_times() {
    use core::sync::atomic::Ordering::Relaxed;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a plain out-parameter (the vDSO answers; no allocation).
    if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0 {
        let ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        TICK_UNITS.store(ns.div_ceil(1 << 20).clamp(1, 1 << 16) as u32, Relaxed);
    }
    TIMES.store(true, Relaxed);
}

/// Lifetime classes of the temporary view: a freed sample is in one of
/// the first three, by its age, and in `TEMPORARY` too when its thread
/// made no allocation between the sample and the free (heaptrack's
/// "temporary allocation", per thread).
pub const FREED_1MS: usize = 0;
pub const FREED_1S: usize = 1;
pub const FREED_LATER: usize = 2;
pub const TEMPORARY: usize = 3;
/// How many classes `stacks::Slot::freed` keeps.
pub const FREED_CLASSES: usize = 4;

/// What the table knows of a sample's life: when it was taken
/// (`now_units`, or `NO_AGE`) and its thread's stamp then
/// (`api::thread_stamp`, 0 = not known).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Birth {
    pub time: u32,
    pub stamp: u32,
}

impl Birth {
    /// Not known (the sample was taken without a time).
    pub const UNKNOWN: Birth = Birth {
        time: NO_AGE,
        stamp: 0,
    };

    fn pack(self) -> u64 {
        self.time as u64 | (self.stamp as u64) << 32
    }

    fn unpack(x: u64) -> Birth {
        Birth {
            time: x as u32,
            stamp: (x >> 32) as u32,
        }
    }
}

/// A freed sample's age (`now_units` since it was taken, or `NO_AGE`) and
/// the stamp its thread had when it was taken (0 = not known).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Life {
    pub age: u32,
    pub stamp: u32,
}

/// The class of a freed sample of `age` (`NO_AGE`: none). A block freed
/// within 1 ms is in `FREED_1MS`; as the coarse clock moves in ticks
/// (typically 4 ms), that class holds every block whose measured age is
/// at most one tick (so blocks of up to two ticks can land in it), and
/// `FREED_1S` those up to 1 s plus a tick.
pub fn lifetime_class(age: u32) -> Option<usize> {
    if age == NO_AGE {
        return None;
    }
    let tick = TICK_UNITS.load(core::sync::atomic::Ordering::Relaxed);
    Some(if age <= tick {
        FREED_1MS
    } else if age <= 954 + tick {
        FREED_1S
    } else {
        FREED_LATER
    })
}

/// An age not known (the sample was taken without a time).
pub const NO_AGE: u32 = u32::MAX;

/// The coarse clock in units of 2^20 ns (about 1.05 ms; wraps after 52
/// days): a shift, no division.
#[inline]
fn now_units() -> u32 {
    (crate::hot::sys::coarse_nanos() >> 20) as u32
}

// SAFETY: the table owns its mapping; access is under the shard lock.
unsafe impl Send for Table {}

#[repr(align(64))]
struct Shard(SpinLock<Table>);

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Shard = Shard(SpinLock::new(
    Rank::LiveShard,
    Table {
        slots: core::ptr::null_mut(),
        born: core::ptr::null_mut(),
        cap: 0,
        len: 0,
    },
));
static SHARDS_: [Shard; SHARDS] = [EMPTY; SHARDS];

/// A 64-bit finalizer (murmur3's fmix64): every output bit depends on
/// every input bit, so strided page numbers spread over all shards and
/// windows.
#[inline]
fn fmix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^= x >> 33;
    x
}

/// Addresses hash with locality. A 4 KiB page picks a shard (the top 8
/// bits of its hash), and a 1 KiB span of addresses a window of `WINDOW`
/// slots in its shard's table (`Table::home`); inside the window a block's
/// slot follows its offset in the span (16-byte units, rotated by the
/// span's hash, so that blocks at the same offset of different spans
/// spread out). Blocks that a thread allocates one after another, and
/// frees one after another, then sit in neighbouring slots of one shard: a
/// cache and TLB miss per run of them instead of one per block, as a hash
/// of the whole address gave (4 threads with 13.4 million 40-byte blocks in
/// glibc's tst-malloc_info: live::insert and live::untrack were half of the
/// time, nearly all of it one load).
#[inline]
fn page_hash(addr: usize) -> u64 {
    fmix((addr >> 12) as u64)
}

/// Slots of a window, and the address span a window covers (16 bytes a slot).
const WINDOW: usize = 64;
const SPAN_SHIFT: u32 = WINDOW.trailing_zeros() + 4;

fn shard_of(addr: usize) -> &'static SpinLock<Table> {
    &SHARDS_[(page_hash(addr) >> 56) as usize].0
}

impl Table {
    #[inline]
    fn home(&self, addr: usize) -> usize {
        // Fibonacci hashing: the top bits of the span times 2^64/phi are
        // a slot; its upper bits pick the window, its low bits rotate the
        // offsets. One multiply: `take` computes this for every entry it
        // shifts back.
        let x = (((addr >> SPAN_SHIFT) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (64 - self.cap.trailing_zeros())) as usize;
        (x & !(WINDOW - 1)) | ((addr >> 4).wrapping_add(x) & (WINDOW - 1))
    }

    fn at(&self, i: usize) -> Entry {
        debug_assert!(i < self.cap);
        // SAFETY: i < cap, slots maps cap entries, and the shard lock
        // serializes access.
        unsafe { *self.slots.add(i) }
    }

    fn set(&mut self, i: usize, e: Entry, born: Birth) {
        debug_assert!(i < self.cap);
        // SAFETY: as `at`; `&mut self` means we hold the shard lock; `born`
        // maps `cap` times when not null.
        unsafe {
            *self.slots.add(i) = e;
            if !self.born.is_null() {
                *self.born.add(i) = born.pack();
            }
        }
    }

    fn born_at(&self, i: usize) -> Birth {
        if self.born.is_null() {
            return Birth::UNKNOWN;
        }
        // SAFETY: as `set`.
        Birth::unpack(unsafe { *self.born.add(i) })
    }

    fn grow(&mut self) -> bool {
        let new_cap = if self.cap == 0 { INITIAL } else { self.cap * 2 };
        // Rehashing writes all over the new table: have it faulted in at once.
        let p =
            crate::hot::sys::map_populated(new_cap * core::mem::size_of::<Entry>()) as *mut Entry;
        if p.is_null() {
            return false;
        }
        // The times fail softly: without them lifetimes are unknown.
        let born = if TIMES.load(core::sync::atomic::Ordering::Relaxed) {
            crate::hot::sys::map_populated(new_cap * 8) as *mut u64
        } else {
            core::ptr::null_mut()
        };
        let old = Table {
            slots: self.slots,
            born: self.born,
            cap: self.cap,
            len: self.len,
        };
        self.slots = p;
        self.born = born;
        self.cap = new_cap;
        self.len = 0;
        for i in 0..old.cap {
            let e = old.at(i);
            if e.addr != 0 {
                self.put(e, old.born_at(i));
            }
        }
        // SAFETY: the old table is no longer referenced.
        unsafe {
            if !old.slots.is_null() {
                crate::hot::sys::unmap(old.slots.cast(), old.cap * core::mem::size_of::<Entry>());
            }
            if !old.born.is_null() {
                crate::hot::sys::unmap(old.born.cast(), old.cap * 8);
            }
        }
        true
    }

    /// Stores `e`; returns the entry it replaced at the same address (a
    /// block freed behind our back, for example by a library bound to libc
    /// directly, whose address came back).
    fn put(&mut self, e: Entry, born: Birth) -> Option<Entry> {
        let mut i = self.home(e.addr);
        loop {
            let old = self.at(i);
            if old.addr == 0 || old.addr == e.addr {
                self.set(i, e, born);
                if old.addr == 0 {
                    self.len += 1;
                    return None;
                }
                return Some(old);
            }
            i = (i + 1) & (self.cap - 1);
        }
    }

    /// Removes the entry at `addr`; with it, its `Life`.
    fn take(&mut self, addr: usize) -> Option<(Entry, Life)> {
        if self.cap == 0 {
            return None;
        }
        let mut i = self.home(addr);
        loop {
            let e = self.at(i);
            if e.addr == 0 {
                return None;
            }
            if e.addr == addr {
                break;
            }
            i = (i + 1) & (self.cap - 1);
        }
        let found = self.at(i);
        let born = self.born_at(i);
        let age = if born.time == NO_AGE {
            NO_AGE
        } else {
            now_units().wrapping_sub(born.time).min(NO_AGE - 1)
        };
        let life = Life {
            age,
            stamp: born.stamp,
        };
        // Backward-shift deletion: pull later entries of the run into the
        // hole when their home allows it.
        let mut hole = i;
        let mut j = (i + 1) & (self.cap - 1);
        loop {
            let e = self.at(j);
            if e.addr == 0 {
                break;
            }
            let home = self.home(e.addr);
            let dist_hole = hole.wrapping_sub(home) & (self.cap - 1);
            let dist_j = j.wrapping_sub(home) & (self.cap - 1);
            if dist_hole <= dist_j {
                self.set(hole, e, self.born_at(j));
                hole = j;
            }
            j = (j + 1) & (self.cap - 1);
        }
        self.set(hole, Entry::default(), Birth::UNKNOWN);
        self.len -= 1;
        Some((found, life))
    }
}

/// Why a sample was not added.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No memory could be mapped for the table.
    NoMemory,
    /// A fork's prepare handler holds the shard (see `hot::lock`).
    Forking,
}

/// Adds a sample (an allocation path); `stamp` gives its thread's stamp
/// (`api::thread_stamp`; 0 = not known), asked only when the table keeps
/// times (the temporary view). `Ok(Some)` with a stale sample it replaced.
pub fn insert(e: Entry, stamp: fn() -> u32) -> Result<Option<Entry>, Refused> {
    let mut t = shard_of(e.addr)
        .lock_unless_forking()
        .ok_or(Refused::Forking)?;
    if (t.len + 1) * 2 > t.cap && !t.grow() {
        return Err(Refused::NoMemory);
    }
    let born = if t.born.is_null() {
        Birth::UNKNOWN
    } else {
        Birth {
            time: now_units().min(NO_AGE - 1),
            stamp: stamp(),
        }
    };
    Ok(t.put(e, born))
}

/// Removes and returns the sample at `addr`, if any.
pub fn remove(addr: usize) -> Option<Entry> {
    shard_of(addr).lock().take(addr).map(|(e, _)| e)
}

/// Removes the sample at `addr` and clears its shadow bit while the shard
/// lock is held, so that no other thread can see one without the other (a
/// free path). While a fork is being prepared the sample stays: its bit
/// stays set, so the next free or sampled malloc at this address replaces
/// it.
/// With the sample, its `Life`.
pub fn untrack(addr: usize) -> Option<(Entry, Life)> {
    let mut t = shard_of(addr).lock_unless_forking()?;
    let e = t.take(addr);
    if e.is_some() {
        crate::hot::shadow::clear(addr);
    }
    e
}
/// Removes the sample at `addr` and clears its shadow bit, as `untrack`,
/// but only if it is of `kind`.
pub fn untrack_kind(addr: usize, kind: u32) -> Option<(Entry, Life)> {
    let mut t = shard_of(addr).lock();
    match t.take(addr) {
        Some((e, life)) if e.kind() == kind => {
            crate::hot::shadow::clear(addr);
            Some((e, life))
        }
        Some((other, life)) => {
            // Another allocator's sample now lives at this address (its
            // age is kept only approximately: re-stamped `age` units ago).
            let time = if life.age == NO_AGE {
                NO_AGE
            } else {
                now_units().wrapping_sub(life.age).min(NO_AGE - 1)
            };
            t.put(
                other,
                Birth {
                    time,
                    stamp: life.stamp,
                },
            );
            None
        }
        None => None,
    }
}

/// What the live samples of one stack add up to.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StackSum {
    /// Un-biased bytes and blocks.
    pub bytes: f64,
    pub blocks: f64,
    pub samples: u64,
    /// Estimated variance of `bytes` (bytes squared; 0 in exact mode): the
    /// sum of `w^2 (1 - p)` over the samples, `w = s/p` the weight of a
    /// sample of `s` bytes.
    pub variance: f64,
}

/// The live samples by stack and size class, for the samples file's size
/// rows (`format::samples`): filled by `sum_by_stack` in the same pass as
/// the sums, so that a stack's classes add up to its sum.
#[derive(Default)]
pub struct Sizes {
    /// One shard's entries (`Entry::meta`: size and stack), copied under
    /// its lock into room reserved before it, and counted after it.
    scratch: Vec<u64>,
    /// `Sizes::key(stack, class)` -> (samples, estimated bytes). The class
    /// of a size `s` is 0 for 0, else `64 - s.leading_zeros()` (sizes from
    /// `2^(class-1)` to `2^class - 1`).
    pub by_stack: std::collections::HashMap<u64, (u64, f64), KeyHash>,
    /// False when heaplive could not get memory for them.
    pub complete: bool,
}

/// `Sizes`'s keys are hashed by `fmix` (std's SipHash was half of an
/// exact-mode snapshot's time with 2 million live blocks).
pub type KeyHash = core::hash::BuildHasherDefault<KeyHasher>;

#[derive(Default)]
pub struct KeyHasher(u64);

impl core::hash::Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 ^= x;
    }
    fn finish(&self) -> u64 {
        fmix(self.0)
    }
}

impl Sizes {
    /// The key of a stack's class in `by_stack`.
    pub fn key(stack: StackId, class: u8) -> u64 {
        (stack as u64) << 8 | class as u64
    }

    /// The stack and class of a key of `by_stack`.
    pub fn unkey(key: u64) -> (StackId, u8) {
        ((key >> 8) as StackId, key as u8)
    }

    /// The smallest size of a class (`format::samples::size_class`).
    pub fn class_low(class: u8) -> u64 {
        if class == 0 { 0 } else { 1 << (class - 1) }
    }

    fn count(&mut self, interval: u64) {
        // Neighbouring slots often hold blocks of one stack and class
        // (allocated one after another): summed in a run, looked up once.
        let mut run: Option<(u64, u64, f64)> = None;
        for &meta in &self.scratch {
            let e = Entry { addr: 0, meta };
            let size = e.size() as u64;
            let class = (64 - size.leading_zeros()) as u8;
            let bytes = if interval <= 1 {
                size as f64
            } else {
                let p = crate::hot::sampler::sample_probability(size, interval);
                if p > 0.0 { size as f64 / p } else { 0.0 }
            };
            let key = Sizes::key(e.stack(), class);
            match &mut run {
                Some((k, n, b)) if *k == key => {
                    *n += 1;
                    *b += bytes;
                }
                _ => {
                    if let Some((k, n, b)) = run.replace((key, 1, bytes)) {
                        let c = self.by_stack.entry(k).or_default();
                        c.0 += n;
                        c.1 += b;
                    }
                }
            }
        }
        if let Some((k, n, b)) = run {
            let c = self.by_stack.entry(k).or_default();
            c.0 += n;
            c.1 += b;
        }
        self.scratch.clear();
    }

    /// Gives the memory back when it is large (a program with very many
    /// stacks, or an exact-mode shard of many blocks).
    pub fn release(&mut self, keep: usize) {
        if self.scratch.capacity() > keep {
            self.scratch = Vec::new();
        }
        if self.by_stack.capacity() > keep {
            self.by_stack = Default::default();
        }
    }
}

/// Sums the live samples per stack into `out` (indexed by stack id),
/// shard by shard (each shard consistent). `out` grows only while no shard lock is held, and holds one sum
/// per stack, not one entry per sample: in exact mode a dump's copy of the
/// table was one entry per live block (33 MiB for jq). None when no memory
/// could be had for it (heaplive's own heap). With `sizes`, also the
/// samples by stack and size class: each shard's entries are copied under
/// its lock (room for them reserved before taking it) and counted after.
pub fn sum_by_stack(
    out: &mut Vec<StackSum>,
    interval: u64,
    mut sizes: Option<&mut Sizes>,
) -> Option<()> {
    out.clear();
    if let Some(z) = sizes.as_deref_mut() {
        z.by_stack.clear();
        z.scratch.clear();
        z.complete = true;
    }
    for shard in SHARDS_.iter() {
        // Entries to make room for in the copy (the shard's length).
        let mut room = 0usize;
        loop {
            let ids = crate::hot::stacks::count() as usize;
            if out.len() < ids {
                let len = ids + 256;
                if out.try_reserve(len - out.len()).is_err() {
                    return None;
                }
                out.resize(len, StackSum::default());
            }
            if let Some(z) = sizes.as_deref_mut().filter(|z| z.complete)
                && z.scratch.capacity() < room
                && z.scratch.try_reserve(room + room / 4 + 64).is_err()
            {
                // The sums stand without their sizes.
                z.complete = false;
                z.by_stack.clear();
            }
            let t = shard.0.lock();
            // A sample's stack was interned before the sample was put in
            // under this lock, so every stack in the shard is below the
            // count read now.
            if crate::hot::stacks::count() as usize > out.len() {
                continue;
            }
            let copy = sizes.as_deref_mut().filter(|z| z.complete);
            let copy = match copy {
                Some(z) if z.scratch.capacity() < t.len => {
                    room = t.len;
                    continue;
                }
                other => other,
            };
            let mut copy = copy.map(|z| &mut z.scratch);
            for i in 0..t.cap {
                let e = t.at(i);
                if e.addr == 0 {
                    continue;
                }
                let Some(sum) = out.get_mut(e.stack() as usize) else {
                    continue;
                };
                if let Some(c) = copy.as_deref_mut() {
                    // Within the capacity reserved: no allocation.
                    c.push(e.meta);
                }
                let size = e.size() as u64;
                sum.samples += 1;
                if interval <= 1 {
                    sum.bytes += size as f64;
                    sum.blocks += 1.0;
                    continue;
                }
                // As `sampler::weight_bytes` and `weight_blocks`, with one
                // exponential.
                let p = crate::hot::sampler::sample_probability(size, interval);
                if p > 0.0 {
                    let w = size as f64 / p;
                    sum.bytes += w;
                    sum.blocks += 1.0 / p;
                    sum.variance += w * w * (1.0 - p);
                }
            }
            drop(t);
            break;
        }
        if let Some(z) = sizes.as_deref_mut().filter(|z| z.complete) {
            z.count(interval);
        }
    }
    Some(())
}

pub fn lock_all_for_fork() {
    for s in SHARDS_.iter() {
        s.0.lock_raw();
    }
}

/// # Safety
/// Fork handlers only, after `lock_all_for_fork`, or a child whose other
/// threads are gone.
pub unsafe fn unlock_all_after_fork() {
    for s in SHARDS_.iter() {
        // SAFETY: guaranteed by the caller.
        unsafe { s.0.unlock_raw() };
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;

//! The live table: every sampled allocation that has not been freed, keyed
//! by address.
//!
//! 256 shards, each a spin lock over an open-addressing table (linear
//! probing, backward-shift deletion) in memory we map ourselves. A shard's
//! lock is never held while calling anything that may allocate: growing maps
//! a new table with mmap (a system call, on the slow path only), and the
//! dump copies entries out into a buffer it reserved before locking.

use crate::hot::lock::{Rank, SpinLock};
use crate::hot::stacks::StackId;

const SHARDS: usize = 256;
/// A table's first size (at least one window).
const INITIAL: usize = 256;

/// `Entry::kind` of a malloc (or operator new) block.
pub const MALLOC: u32 = 0;
/// `Entry::kind` of a ZendMM block (PHP mode): dropped at request end.
pub const ZEND_MM: u32 = 1;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Entry {
    /// 0 = empty slot.
    pub addr: usize,
    /// Requested size.
    pub size: usize,
    pub stack: StackId,
    /// Which allocator the block came from: `MALLOC` or `ZEND_MM`.
    pub kind: u32,
    /// Un-biased bytes this sample stands for.
    pub weight: f64,
}

impl Entry {
    pub fn new(addr: usize, size: usize, stack: StackId, weight: f64) -> Entry {
        Entry {
            addr,
            size,
            stack,
            kind: MALLOC,
            weight,
        }
    }
}

struct Table {
    slots: *mut Entry,
    cap: usize,
    len: usize,
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

    fn set(&mut self, i: usize, e: Entry) {
        debug_assert!(i < self.cap);
        // SAFETY: as `at`; `&mut self` means we hold the shard lock.
        unsafe { *self.slots.add(i) = e }
    }

    fn grow(&mut self) -> bool {
        let new_cap = if self.cap == 0 { INITIAL } else { self.cap * 2 };
        // Rehashing writes all over the new table: have it faulted in at once.
        let p =
            crate::hot::sys::map_populated(new_cap * core::mem::size_of::<Entry>()) as *mut Entry;
        if p.is_null() {
            return false;
        }
        let old = Table {
            slots: self.slots,
            cap: self.cap,
            len: self.len,
        };
        self.slots = p;
        self.cap = new_cap;
        self.len = 0;
        for i in 0..old.cap {
            let e = old.at(i);
            if e.addr != 0 {
                self.put(e);
            }
        }
        if !old.slots.is_null() {
            // SAFETY: the old table is no longer referenced.
            unsafe {
                crate::hot::sys::unmap(old.slots.cast(), old.cap * core::mem::size_of::<Entry>())
            };
        }
        true
    }

    /// Stores `e`; returns the entry it replaced at the same address (a
    /// block freed behind our back, for example by a library bound to libc
    /// directly, whose address came back).
    fn put(&mut self, e: Entry) -> Option<Entry> {
        let mut i = self.home(e.addr);
        loop {
            let old = self.at(i);
            if old.addr == 0 || old.addr == e.addr {
                self.set(i, e);
                if old.addr == 0 {
                    self.len += 1;
                    return None;
                }
                return Some(old);
            }
            i = (i + 1) & (self.cap - 1);
        }
    }

    fn take(&mut self, addr: usize) -> Option<Entry> {
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
                self.set(hole, e);
                hole = j;
            }
            j = (j + 1) & (self.cap - 1);
        }
        self.set(hole, Entry::default());
        self.len -= 1;
        Some(found)
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

/// Adds a sample (an allocation path). `Ok(Some)` with a stale sample it
/// replaced.
pub fn insert(e: Entry) -> Result<Option<Entry>, Refused> {
    let mut t = shard_of(e.addr)
        .lock_unless_forking()
        .ok_or(Refused::Forking)?;
    if (t.len + 1) * 2 > t.cap && !t.grow() {
        return Err(Refused::NoMemory);
    }
    Ok(t.put(e))
}

/// Removes and returns the sample at `addr`, if any.
pub fn remove(addr: usize) -> Option<Entry> {
    shard_of(addr).lock().take(addr)
}

/// Removes the sample at `addr` and clears its shadow bit while the shard
/// lock is held, so that no other thread can see one without the other (a
/// free path). While a fork is being prepared the sample stays: its bit
/// stays set, so the next free or sampled malloc at this address replaces
/// it.
pub fn untrack(addr: usize) -> Option<Entry> {
    let mut t = shard_of(addr).lock_unless_forking()?;
    let e = t.take(addr);
    if e.is_some() {
        crate::hot::shadow::clear(addr);
    }
    e
}

/// Removes the sample at `addr` and clears its shadow bit, as `untrack`,
/// but only if it is of `kind`.
pub fn untrack_kind(addr: usize, kind: u32) -> Option<Entry> {
    let mut t = shard_of(addr).lock();
    match t.take(addr) {
        Some(e) if e.kind == kind => {
            crate::hot::shadow::clear(addr);
            Some(e)
        }
        Some(other) => {
            // Another allocator's sample now lives at this address.
            t.put(other);
            None
        }
        None => None,
    }
}

/// Copies every live sample into `out`, shard by shard (each shard
/// consistent). `out` is grown only while no shard lock is held.
/// False when no memory could be had for the copy (heaplive's own heap).
pub fn snapshot(out: &mut Vec<Entry>) -> bool {
    out.clear();
    for shard in SHARDS_.iter() {
        loop {
            let need = shard.0.lock().len;
            if out.capacity() - out.len() < need + 16 && out.try_reserve(need + 1024).is_err() {
                return false;
            }
            let t = shard.0.lock();
            if out.capacity() - out.len() < t.len {
                continue;
            }
            for i in 0..t.cap {
                let e = t.at(i);
                if e.addr != 0 {
                    out.push(e);
                }
            }
            break;
        }
    }
    true
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
mod tests {
    use super::*;

    #[test]
    fn insert_remove_many_with_collisions() {
        let base = 0x10_0000_0000usize;
        for i in 0..50_000usize {
            assert_eq!(insert(Entry::new(base + i * 16, i, 1, i as f64)), Ok(None));
        }
        for i in (0..50_000usize).step_by(2) {
            let e = remove(base + i * 16).unwrap();
            assert_eq!(e.size, i);
        }
        for i in 0..50_000usize {
            let e = remove(base + i * 16);
            assert_eq!(e.is_some(), i % 2 == 1, "{i}");
        }
        assert!(remove(base).is_none());
    }

    /// The longest and the mean distance of an entry from its home slot.
    fn displacement(t: &Table) -> (usize, f64) {
        let d: Vec<usize> = (0..t.cap)
            .filter(|&i| t.at(i).addr != 0)
            .map(|i| i.wrapping_sub(t.home(t.at(i).addr)) & (t.cap - 1))
            .collect();
        let max = d.iter().copied().max().unwrap_or(0);
        (max, d.iter().sum::<usize>() as f64 / d.len().max(1) as f64)
    }

    /// Probe runs stay short for the address patterns of real heaps: dense
    /// small blocks, one block per page at the same offset (mmap'd chunks,
    /// page-aligned blocks), blocks 64 KiB apart, several arenas filled in
    /// turn, random addresses. A hash of `addr >> 3` by a multiplication
    /// that kept the low bits of the product sent page-strided addresses to
    /// one slot in 512 (a mean probe of 97 slots for 4 KiB strides).
    #[test]
    fn probe_runs_stay_short_for_heap_address_patterns() {
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let random: Vec<usize> = (0..200_000)
            .map(|_| {
                rng ^= rng >> 12;
                rng ^= rng << 25;
                rng ^= rng >> 27;
                0x7f00_0000_0000 + (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) as usize & 0x3fff_fff0)
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let base = 0x7f00_0000_0010usize;
        let s16 = |i: usize| base + i * 16;
        let s32 = |i: usize| base + i * 32;
        let s48 = |i: usize| base + i * 48;
        let s4k = |i: usize| base + i * 4096;
        let s64k = |i: usize| base + i * 65536;
        // Eight arenas 64 MiB apart, filled in turn.
        let arenas = |i: usize| base + (i % 8) * (64 << 20) + (i / 8) * 48;
        let rand = |i: usize| random[i];
        type Pattern<'a> = (&'a str, &'a dyn Fn(usize) -> usize, usize);
        let patterns: [Pattern; 7] = [
            ("16-byte stride", &s16, 300_000),
            ("32-byte stride", &s32, 300_000),
            ("48-byte stride", &s48, 200_000),
            ("4 KiB stride", &s4k, 100_000),
            ("64 KiB stride", &s64k, 50_000),
            ("8 arenas", &arenas, 200_000),
            ("random", &rand, random.len()),
        ];
        for (name, addr, n) in patterns {
            let mut t = Table {
                slots: core::ptr::null_mut(),
                cap: 0,
                len: 0,
            };
            for i in 0..n {
                if (t.len + 1) * 2 > t.cap {
                    assert!(t.grow());
                }
                assert_eq!(t.put(Entry::new(addr(i), 8, 1, 8.0)), None);
            }
            let (max, mean) = displacement(&t);
            assert!(
                max < 128 && mean < 2.0,
                "{name}: entries up to {max} slots from home, {mean:.1} on average"
            );
            for i in 0..n {
                assert_eq!(t.take(addr(i)).map(|e| e.size), Some(8), "{name}");
            }
            assert_eq!(t.len, 0);
            // SAFETY: the table is ours and no longer used.
            unsafe {
                crate::hot::sys::unmap(t.slots.cast(), t.cap * core::mem::size_of::<Entry>())
            };
        }
    }

    #[test]
    fn snapshot_sees_everything_while_threads_churn() {
        let base = 0x20_0000_0000usize;
        let ts: Vec<_> = (0..4usize)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..20_000usize {
                        let a = base + (t << 32) + i * 16;
                        // Another test of this binary may be preparing a
                        // fork (the shard then refuses, as on a real
                        // allocation path): try again.
                        while let Err(e) = insert(Entry::new(a, 8, 2, 8.0)) {
                            assert_eq!(e, Refused::Forking);
                            std::thread::yield_now();
                        }
                        if i % 3 != 0 {
                            remove(a).unwrap();
                        }
                    }
                })
            })
            .collect();
        let mut v = Vec::new();
        snapshot(&mut v);
        for t in ts {
            t.join().unwrap();
        }
        snapshot(&mut v);
        let mine = v
            .iter()
            .filter(|e| e.addr >= base && e.addr < base + (8 << 32))
            .count();
        assert_eq!(mine, 4 * 6667);
    }
}

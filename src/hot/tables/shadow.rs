//! The shadow bitmap: one bit per possible allocation start, so that the
//! free of an unsampled pointer costs a few loads and no lock.
//!
//! Layout: a radix tree over the address, 4 levels, covering 56-bit user
//! addresses (5-level paging) and hence 47-bit ones:
//!
//! | bits    | level | node                                   |
//! |---------|-------|----------------------------------------|
//! | 47..56  | root  | 512 pointers, static                   |
//! | 34..47  | L2    | 8,192 pointers (64 KiB, mmap)          |
//! | 21..34  | L3    | 8,192 leaf pointers, counts, page summaries (608 KiB) |
//! | 3..21   | leaf  | 262,144 bits = 32 KiB, one per 8 bytes |
//!
//! One bit per 8 bytes: glibc returns 16-byte aligned blocks on x86-64, but
//! other allocators under us may return 8-byte aligned small blocks.
//!
//! Page summaries: one bit per 4 KiB page that may hold a sample, kept in
//! the L3 nodes. The L2 node of addresses below 2^47 (all of user space
//! without 5-level paging) is a static (`LOW`), so for almost every free
//! the filter is two loads (the L3 pointer, the summary word) and a bit
//! test; above 2^47 the root is read first. Only frees in a page holding a
//! sample walk on to the leaf word. Nothing is reserved up front: a node
//! is mapped when the first sample lands in its range, so a program that
//! lowers RLIMIT_AS pays only for the regions that hold samples.
//!
//! Nodes come from our own mmap and are installed with compare-and-swap;
//! they are never freed, so readers need no lock. The tree is shared by all
//! threads: cross-thread frees are normal for malloc.
//!
//! Ordering contract with the live table: a bit is set only after the
//! sample is in the live table, and cleared before the sample leaves it.
//!
//! Memory bound. Interior nodes: one L2 per 128 TiB region (one in practice)
//! and one L3 per 16 GiB region that ever held a sample; only their touched
//! pages are resident. Leaves: 32 KiB of address space per 2 MiB region that
//! ever held a sample, resident one 4 KiB page per 256 KiB of addresses
//! whose samples set a bit there. A count of set bits per leaf, kept in its
//! L3 node, lets [`prune`] give an empty leaf's pages back to the kernel
//! (MADV_DONTNEED) once it was found empty by [`KEEP_PRUNES`] prunes in a
//! row (about that many seconds), so in a long run whose sampled addresses
//! move around, resident leaf memory is bounded by the regions that held
//! live samples in the last few seconds, at most 4 KiB per page-sized window
//! of 256 KiB holding one: with N such samples, at most N * 4 KiB, plus the
//! 76 bytes per leaf ever made (pointer, count, page summary) in the L3
//! nodes. The wait is what keeps a region whose samples come and go (a PHP
//! worker's ZendMM chunks, emptied at every request's end and sampled again
//! in the next) from having its pages given back and faulted in again, as
//! zeroed pages, over and over.

use crate::hot::lock::{Rank, witness_acquire, witness_release};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

pub const MAX_ADDR_BITS: u32 = 56;
const GRAIN: u32 = 3;
const LEAF_SHIFT: u32 = 21;
const L3_SHIFT: u32 = 34;
const L2_SHIFT: u32 = 47;
const L3_LEN: usize = 1 << (L3_SHIFT - LEAF_SHIFT);
const L2_LEN: usize = 1 << (L2_SHIFT - L3_SHIFT);
const ROOT_LEN: usize = 1 << (MAX_ADDR_BITS - L2_SHIFT);
const LEAF_WORDS: usize = 1 << (LEAF_SHIFT - GRAIN - 6);
const LEAF_BYTES: usize = LEAF_WORDS * 8;
// (page summaries: see L3::pages)

/// Leaf count word: the number of set bits (at most 2^18), plus AGE (how
/// many prunes in a row found the leaf empty and dirty; reset by a set),
/// LOCKED (a setter, a clearer tidying a page summary, or the pruner is at
/// work on this leaf: the others wait) and DIRTY (the leaf has pages to
/// give back).
const LOCKED: u32 = 1 << 30;
const DIRTY: u32 = 1 << 31;
const AGE_SHIFT: u32 = 24;
const AGE_ONE: u32 = 1 << AGE_SHIFT;
const AGE_MASK: u32 = 0x3f << AGE_SHIFT;
/// An empty leaf's pages are given back at the KEEP_PRUNES-th prune in a
/// row that finds it empty (prunes come once a second).
pub const KEEP_PRUNES: u32 = 8;
#[cfg(test)]
const COUNT_MASK: u32 = LOCKED - 1;

/// Takes a leaf's lock; returns the count word as it was. The lock bit is
/// a lock of the rank table (`Rank::ShadowLeaf`), reported to the witness.
fn lock_leaf(count: &AtomicU32, add: u32) -> u32 {
    witness_acquire(Rank::ShadowLeaf);
    let mut c = count.load(Relaxed);
    loop {
        if c & LOCKED != 0 {
            core::hint::spin_loop();
            c = count.load(Relaxed);
            continue;
        }
        let new = if add > 0 {
            ((c & !AGE_MASK) + add) | DIRTY | LOCKED
        } else {
            c | LOCKED
        };
        match count.compare_exchange_weak(c, new, Acquire, Relaxed) {
            Ok(_) => return c,
            Err(now) => c = now,
        }
    }
}

fn unlock_leaf(count: &AtomicU32) {
    count.fetch_and(!LOCKED, Release);
    witness_release(Rank::ShadowLeaf);
}

/// Are all the leaf bits of the 4 KiB page that `w` (a word index) is in
/// clear? One cache line.
fn page_empty(leaf: &Leaf, w: usize) -> bool {
    let first = w & !(WORDS_PER_PAGE - 1);
    leaf.words[first..first + WORDS_PER_PAGE]
        .iter()
        .all(|x| x.load(Acquire) == 0)
}

struct Leaf {
    words: [AtomicU64; LEAF_WORDS],
}

struct L3 {
    leaves: [AtomicPtr<Leaf>; L3_LEN],
    /// Set bits per leaf, with LOCKED and DIRTY.
    counts: [AtomicU32; L3_LEN],
    /// Per leaf, one bit per 4 KiB page that may hold a set bit: 64 bytes
    /// per 2 MiB region, so the summaries of a whole heap stay in cache and
    /// most frees stop here without touching the (large, cold) leaf.
    /// Set by `set` after the leaf bit; cleared only by `prune`, with
    /// setters of that leaf held off.
    pages: [[AtomicU64; PAGE_WORDS]; L3_LEN],
}

const PAGE_SHIFT: u32 = 12;
const PAGE_WORDS: usize = 1 << (LEAF_SHIFT - PAGE_SHIFT - 6);
/// Leaf words per 4 KiB page of addresses.
const WORDS_PER_PAGE: usize = 1 << (PAGE_SHIFT - GRAIN - 6);

/// The summary words (one bit per 4 KiB page) of the 2 MiB region of
/// `l3`'s entry `i3`.
#[inline(always)]
fn page_words(l3: &L3, i3: usize) -> &[AtomicU64; PAGE_WORDS] {
    &l3.pages[i3]
}

#[inline(always)]
fn page_of(addr: usize) -> (usize, u64) {
    let page = (addr >> PAGE_SHIFT) & ((1 << (LEAF_SHIFT - PAGE_SHIFT)) - 1);
    (page >> 6, 1u64 << (page & 63))
}

struct L2 {
    l3: [AtomicPtr<L3>; L2_LEN],
}

#[allow(clippy::declare_interior_mutable_const)]
const NULL_L2: AtomicPtr<L2> = AtomicPtr::new(null_mut());
#[allow(clippy::declare_interior_mutable_const)]
const NULL_L3: AtomicPtr<L3> = AtomicPtr::new(null_mut());
/// Root entries; entry 0 stays null and stands for [`LOW`].
static ROOT: [AtomicPtr<L2>; ROOT_LEN] = [NULL_L2; ROOT_LEN];
/// The L2 node of addresses below 2^47 (64 KiB of zeroed .bss): static,
/// so the free path reads an L3 pointer straight from it.
static LOW: L2 = L2 {
    l3: [NULL_L3; L2_LEN],
};

/// The L2 node of root entry `r`, if it exists.
#[inline(always)]
fn l2_of(r: usize) -> *mut L2 {
    if r == 0 {
        (&LOW as *const L2).cast_mut()
    } else {
        ROOT[r].load(Acquire)
    }
}

static LEAVES_MADE: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
fn split(addr: usize) -> (usize, usize, usize, usize, u64) {
    let a = addr as u64;
    let root = (a >> L2_SHIFT) as usize;
    let l2 = ((a >> L3_SHIFT) as usize) & (L2_LEN - 1);
    let l3 = ((a >> LEAF_SHIFT) as usize) & (L3_LEN - 1);
    let bit = (a >> GRAIN) & ((1 << (LEAF_SHIFT - GRAIN)) - 1);
    (root, l2, l3, (bit >> 6) as usize, 1u64 << (bit & 63))
}

/// Is `addr` marked? The free path's filter: no lock, no call; below 2^47
/// two loads and a bit test unless the page holds a sample.
#[inline(always)]
pub fn test(addr: usize) -> bool {
    let i = addr >> L3_SHIFT;
    if i >= L2_LEN {
        return test_high(addr);
    }
    // Below 2^47: the L3 pointer straight from `LOW` (one compare, one
    // load, no root).
    test_in(LOW.l3[i].load(Acquire), addr)
}

/// `test` above 2^47 (5-level paging): through the root.
#[cold]
#[inline(never)]
fn test_high(addr: usize) -> bool {
    let (r, i2, _, _, _) = split(addr);
    if r >= ROOT_LEN {
        return false;
    }
    let l2 = l2_of(r);
    if l2.is_null() {
        return false;
    }
    // SAFETY: installed nodes are never freed.
    test_in(unsafe { (*l2).l3[i2].load(Acquire) }, addr)
}

/// `test` below the L2 level: `l3` is the L3 node of `addr`'s region, or
/// null.
#[inline(always)]
fn test_in(l3: *mut L3, addr: usize) -> bool {
    if l3.is_null() {
        return false;
    }
    // The summary word, indexed in the L3 node's summaries taken as one
    // flat array (`pages[i3][pw]` is word `i3 * PAGE_WORDS + pw`: bits
    // 18..34 of the address), and the page's bit in it.
    let flat = (addr >> (PAGE_SHIFT + 6)) & (L3_LEN * PAGE_WORDS - 1);
    let pbit = 1u64 << ((addr >> PAGE_SHIFT) & 63);
    // SAFETY: installed nodes (and LOW) are never freed; `flat` is below
    // the number of summary words of the node.
    let summary = unsafe { &*(*l3).pages.as_ptr().cast::<AtomicU64>().add(flat) };
    if summary.load(Acquire) & pbit == 0 {
        return false;
    }
    let (_, _, i3, w, mask) = split(addr);
    // SAFETY: as above.
    let leaf = unsafe { (*l3).leaves[i3].load(Acquire) };
    if leaf.is_null() {
        return false;
    }
    // SAFETY: as above.
    unsafe { (*leaf).words[w].load(Acquire) & mask != 0 }
}

fn get_or_make<T>(slot: &AtomicPtr<T>, bytes: usize) -> *mut T {
    let p = slot.load(Acquire);
    if !p.is_null() {
        return p;
    }
    let fresh = crate::hot::sys::map(bytes) as *mut T;
    if fresh.is_null() {
        return null_mut();
    }
    match slot.compare_exchange(null_mut(), fresh, AcqRel, Acquire) {
        Ok(_) => fresh,
        Err(winner) => {
            // SAFETY: nobody saw `fresh`.
            unsafe { crate::hot::sys::unmap(fresh.cast(), bytes) };
            winner
        }
    }
}

/// Marks `addr`. False when it cannot (address beyond 56 bits, or no memory
/// for a node): the caller must then not keep the sample.
pub fn set(addr: usize) -> bool {
    let (r, i2, i3, w, mask) = split(addr);
    if r >= ROOT_LEN {
        return false;
    }
    let l2 = if r == 0 {
        l2_of(0)
    } else {
        get_or_make(&ROOT[r], core::mem::size_of::<L2>())
    };
    if l2.is_null() {
        return false;
    }
    // SAFETY: installed nodes are never freed.
    let l3 = get_or_make(unsafe { &(*l2).l3[i2] }, core::mem::size_of::<L3>());
    if l3.is_null() {
        return false;
    }
    // SAFETY: as above.
    let (slot, count) = unsafe { (&(*l3).leaves[i3], &(*l3).counts[i3]) };
    let was_null = slot.load(Acquire).is_null();
    let leaf = get_or_make(slot, LEAF_BYTES);
    if leaf.is_null() {
        return false;
    }
    if was_null {
        LEAVES_MADE.fetch_add(1, Relaxed);
    }
    // Count and lock first, so neither the pruner nor a clearer tidying the
    // page summary can act on this leaf until both bits are in place.
    lock_leaf(count, 1);
    // SAFETY: as above.
    unsafe { (*leaf).words[w].fetch_or(mask, Release) };
    // Then the page summary, so a reader that sees it also sees the bit.
    // Usually it is set already (another sample on the page): no clearer
    // can take it away while we hold the leaf lock, so a load decides.
    let (pw, pbit) = page_of(addr);
    // SAFETY: as above.
    let summary = &page_words(unsafe { &*l3 }, i3)[pw];
    if summary.load(Relaxed) & pbit == 0 {
        summary.fetch_or(pbit, Release);
    }
    unlock_leaf(count);
    true
}

/// Unmarks `addr`, which must have been marked by [`set`].
pub fn clear(addr: usize) {
    let (r, i2, i3, w, mask) = split(addr);
    if r >= ROOT_LEN {
        return;
    }
    let l2 = l2_of(r);
    if l2.is_null() {
        return;
    }
    // SAFETY: installed nodes are never freed.
    let l3 = unsafe { (*l2).l3[i2].load(Acquire) };
    if l3.is_null() {
        return;
    }
    // SAFETY: as above.
    let leaf = unsafe { (*l3).leaves[i3].load(Acquire) };
    if leaf.is_null() {
        return;
    }
    // SAFETY: as above.
    let (leaf, l3) = unsafe { (&*leaf, &*l3) };
    let old = leaf.words[w].fetch_and(!mask, Release);
    if old & mask != 0 {
        l3.counts[i3].fetch_sub(1, Release);
    }
    // The last sample of its page gone: clear the page's summary bit, so
    // frees there stop at the summary again. Under the leaf lock, so that
    // no setter is between its leaf bit and its summary bit.
    if page_empty(leaf, w) {
        let (pw, pbit) = page_of(addr);
        lock_leaf(&l3.counts[i3], 0);
        if page_empty(leaf, w) {
            page_words(l3, i3)[pw].fetch_and(!pbit, Release);
        }
        unlock_leaf(&l3.counts[i3]);
    }
}

/// Calls `f` on every L3 node of the tree.
fn each_l3(mut f: impl FnMut(&L3, usize)) {
    for r in 0..ROOT_LEN {
        let l2 = l2_of(r);
        if l2.is_null() {
            continue;
        }
        // SAFETY: installed nodes are never freed.
        for (i2, l3p) in unsafe { (*l2).l3.iter() }.enumerate() {
            let l3 = l3p.load(Acquire);
            if !l3.is_null() {
                // SAFETY: as above.
                f(unsafe { &*l3 }, (r << L2_SHIFT) | (i2 << L3_SHIFT));
            }
        }
    }
}

/// How often the bitmap is pruned: by heaplive's thread, or without one
/// by the sampling threads ([`prune_if_due`]).
pub const PRUNE_EVERY_NS: u64 = 1_000_000_000;
/// When [`prune_if_due`] next prunes (0: not armed yet).
static NEXT_PRUNE_NS: AtomicU64 = AtomicU64::new(0);

/// After a sample, on a sampling thread, in a process without heaplive's
/// thread (HEAPLIVE_SIGNAL=none and nothing else that needs it): prunes
/// at most once every `PRUNE_EVERY_NS`, the thread that claims the slot
/// (compare-and-swap) doing it.
///
/// Why here: without pruning, the leaves of every 2 MiB region that ever
/// held a sample would stay resident (a long run whose mmap'd blocks move
/// around would keep up to 4 KiB per 256 KiB of addresses ever sampled);
/// with it the bound of the module comment holds with or without the
/// thread. Safe: `prune` takes no lock but the leaf locks, which it only
/// tries (a leaf in use is skipped), maps nothing and allocates nothing;
/// the caller holds the guard, so a signal handler's free on this thread
/// leaves its sample for later instead of waiting for a leaf we hold, and
/// a fork from such a handler leaves heaplive inert in the child
/// (`hot::forking`); a fork from another thread meanwhile is tidied by
/// [`reset_after_fork`] in the child. Cheap: one clock read (vDSO, no
/// system call) per sample; once a second a walk of the L3 nodes' counts
/// (8,192 words per 16 GiB region that ever held a sample, a few
/// microseconds) and one `madvise` per empty leaf.
pub fn prune_if_due() {
    let now = crate::hot::sys::now_nanos();
    let next = NEXT_PRUNE_NS.load(Relaxed);
    if now < next
        || NEXT_PRUNE_NS
            .compare_exchange(next, now.saturating_add(PRUNE_EVERY_NS), Relaxed, Relaxed)
            .is_err()
    {
        return;
    }
    if next != 0 {
        prune();
    }
}

/// Gives the pages of leaves found empty by [`KEEP_PRUNES`] prunes in a row
/// back to the kernel (returns how many), and tidies the page summaries.
/// Runs on the background thread (or without one, [`prune_if_due`]);
/// concurrent `set`s on a leaf being pruned wait, a concurrent `prune`
/// skips it.
pub fn prune() -> usize {
    let mut pruned = 0;
    each_l3(|l3, _base| {
        for (i, count) in l3.counts.iter().enumerate() {
            let c = count.load(Relaxed);
            if c == 0 || c & LOCKED != 0 {
                continue;
            }
            // Hold setters of this leaf off; clearers may go on.
            if count
                .compare_exchange(c, c | LOCKED, Acquire, Relaxed)
                .is_err()
            {
                continue;
            }
            witness_acquire(Rank::ShadowLeaf);
            let leaf = l3.leaves[i].load(Acquire);
            if c & !AGE_MASK == DIRTY && (c & AGE_MASK) >> AGE_SHIFT < KEEP_PRUNES - 1 {
                // Empty, but not for long enough: older by one prune (the
                // store unlocks). Its page summaries were tidied by the
                // clears that emptied it (under the leaf lock).
                count.store(c + AGE_ONE, Release);
                witness_release(Rank::ShadowLeaf);
                continue;
            }
            if c & !AGE_MASK == DIRTY {
                // Empty for KEEP_PRUNES prunes: give its pages back and
                // forget every summary bit.
                if !leaf.is_null() {
                    // SAFETY: the count is zero and LOCKED keeps setters
                    // out, so no bit is set or will be until we finish.
                    unsafe { crate::hot::sys::discard(leaf.cast(), LEAF_BYTES) };
                }
                for w in page_words(l3, i) {
                    w.store(0, Release);
                }
                count.store(0, Release);
                witness_release(Rank::ShadowLeaf);
                pruned += 1;
                continue;
            }
            // Still in use: clear the summary bits of pages with no bit left.
            // Bits only go away while we look (setters wait), so a page seen
            // empty stays empty until we let setters in again.
            if !leaf.is_null() {
                for (pw, word) in page_words(l3, i).iter().enumerate() {
                    let mut summary = word.load(Acquire);
                    while summary != 0 {
                        let b = summary.trailing_zeros() as usize;
                        summary &= summary - 1;
                        let first = (pw * 64 + b) * WORDS_PER_PAGE;
                        // SAFETY: the leaf is never freed; indexes in range.
                        let empty =
                            unsafe { (&(*leaf).words)[first..first + WORDS_PER_PAGE].iter() }
                                .all(|x| x.load(Acquire) == 0);
                        if empty {
                            word.fetch_and(!(1u64 << b), Release);
                        }
                    }
                }
            }
            unlock_leaf(count);
        }
    });
    pruned
}

/// Leaves whose pages may be resident: made and not pruned since they last
/// held a bit. For tests and the memory summary.
#[cfg(test)]
pub fn resident_leaves() -> usize {
    let mut n = 0;
    each_l3(|l3, _| {
        n += l3
            .counts
            .iter()
            .filter(|c| c.load(Relaxed) & (DIRTY | COUNT_MASK) != 0)
            .count()
    });
    n
}

#[cfg(test)]
pub fn leaves_made() -> usize {
    LEAVES_MADE.load(Relaxed)
}

/// A fork's child may inherit a leaf locked by a thread that does not exist
/// there (the parent's pruner, or a setter or clearer interrupted between
/// two stores): unlock it. An interrupted setter's page summary bit may be
/// missing, so every page summary of a nonempty leaf is set again (the next
/// prune tidies them).
pub fn reset_after_fork() {
    each_l3(|l3, _base| {
        for (i, c) in l3.counts.iter().enumerate() {
            if c.load(Relaxed) & LOCKED != 0 {
                c.fetch_and(!LOCKED, Release);
                for w in page_words(l3, i) {
                    w.store(u64::MAX, Release);
                }
            }
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The tree is global: tests that count leaves must not overlap (other
    /// modules' tests that set bits take it too).
    pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

    fn boundaries() -> Vec<usize> {
        let mut v = vec![0usize, 8, 16, 4088, 4096, 4104];
        for shift in [12u32, 21, 34, 47] {
            let b = 1usize << shift;
            v.extend([b - 16, b - 8, b, b + 8, b * 3 - 8, b * 3]);
        }
        v.extend([
            (1usize << 47) - 8,
            (1usize << 56) - 8,
            (1usize << 56) - 4096,
        ]);
        v.sort();
        v.dedup();
        v
    }

    /// `test_in` reads the page summaries as one flat array: its word and
    /// bit are those of `pages[i3][pw]`.
    #[test]
    fn flat_summary_index_is_the_nested_one() {
        for &a in &boundaries() {
            let (_, _, i3, _, _) = split(a);
            let (pw, pbit) = page_of(a);
            let flat = (a >> (PAGE_SHIFT + 6)) & (L3_LEN * PAGE_WORDS - 1);
            assert_eq!(flat, i3 * PAGE_WORDS + pw, "address {a:#x}");
            assert_eq!(1u64 << ((a >> PAGE_SHIFT) & 63), pbit, "address {a:#x}");
        }
    }

    #[test]
    fn set_test_clear_at_boundaries_both_widths() {
        let _s = SERIAL.lock().unwrap();
        {
            for &a in &boundaries() {
                assert!(!test(a), "{a:#x} clear at start");
                assert!(set(a), "{a:#x} set");
                assert!(test(a), "{a:#x} set");
                // Neighbours in the same word and across grains stay clear.
                for n in [a.wrapping_sub(8), a + 8] {
                    if !boundaries().contains(&n) {
                        assert!(!test(n), "{n:#x} next to {a:#x}");
                    }
                }
            }
            for &a in &boundaries() {
                clear(a);
                assert!(!test(a), "{a:#x} cleared");
            }
            // Beyond 56 bits: refused, never reported as set.
            assert!(!set(1usize << 56));
            assert!(!test(1usize << 56));
            assert!(!test(usize::MAX - 7));
        }
    }

    #[test]
    fn exhaustive_within_one_word_and_page() {
        let _s = SERIAL.lock().unwrap();
        {
            let base = 0x7f00_1234_0000usize;
            // Every 8-byte grain of one page: set each alone, then all, then
            // clear every other one.
            for off in (0..4096).step_by(8) {
                assert!(set(base + off));
                for other in (0..4096).step_by(8) {
                    assert_eq!(test(base + other), other == off, "set {off} test {other}");
                }
                clear(base + off);
            }
            for off in (0..4096).step_by(8) {
                set(base + off);
            }
            for off in (0..4096).step_by(16) {
                clear(base + off);
            }
            for off in (0..4096).step_by(8) {
                assert_eq!(test(base + off), off % 16 == 8);
            }
            for off in (8..4096).step_by(16) {
                clear(base + off);
            }
        }
    }

    #[test]
    fn concurrent_set_and_clear_share_words() {
        let _s = SERIAL.lock().unwrap();
        {
            let base = 0x5500_0000_0000usize;
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    std::thread::spawn(move || {
                        for round in 0..200 {
                            // Thread t owns grain t of every 64-byte group, so
                            // threads share every bitmap word.
                            for g in 0..512usize {
                                let a = base + g * 64 + t * 8;
                                assert!(set(a));
                            }
                            for g in 0..512usize {
                                let a = base + g * 64 + t * 8;
                                assert!(test(a), "round {round}");
                                clear(a);
                                assert!(!test(a));
                            }
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            for g in 0..4096usize {
                assert!(!test(base + g * 8));
            }
        }
    }

    /// A long run whose sampled addresses keep moving: 4,000 distinct 2 MiB
    /// regions each hold a sample for a while. Leaves are made for all of
    /// them, but after pruning only the regions that hold a sample now keep
    /// resident pages.
    #[test]
    fn memory_stays_bounded_when_addresses_move() {
        let _s = SERIAL.lock().unwrap();
        let base = 0x6000_0000_0000usize;
        let live_window = 16;
        let before = leaves_made();
        for i in 0..4000usize {
            set(base + i * (2 << 20) + 64);
            if i >= live_window {
                clear(base + (i - live_window) * (2 << 20) + 64);
            }
            if i % 500 == 0 {
                prune();
            }
        }
        prune_fully();
        assert!(leaves_made() - before >= 4000);
        assert!(
            resident_leaves() <= live_window,
            "resident {}",
            resident_leaves()
        );
        // A pruned leaf works again.
        let a = base + 64;
        assert!(!test(a));
        assert!(set(a));
        assert!(test(a));
        clear(a);
        for i in 4000 - live_window..4000 {
            clear(base + i * (2 << 20) + 64);
        }
        prune_fully();
        assert_eq!(resident_leaves(), 0);
    }

    /// Without heaplive's thread the sampling threads prune: the first
    /// call only arms the clock, a due call prunes (and sets the next time
    /// one interval on), so an emptied leaf gives its pages back.
    #[test]
    fn prune_if_due_arms_then_prunes() {
        let _s = SERIAL.lock().unwrap();
        let a = 0x7200_0000_0000usize + 64;
        NEXT_PRUNE_NS.store(0, Relaxed);
        prune_fully();
        assert_eq!(resident_leaves(), 0);
        assert!(set(a));
        clear(a);
        assert_eq!(resident_leaves(), 1, "an emptied leaf, not pruned yet");
        let t0 = crate::hot::sys::now_nanos();
        prune_if_due();
        assert_eq!(resident_leaves(), 1, "the first call only arms");
        assert!(NEXT_PRUNE_NS.load(Relaxed) >= t0 + PRUNE_EVERY_NS);
        // Due now.
        NEXT_PRUNE_NS.store(1, Relaxed);
        let t1 = crate::hot::sys::now_nanos();
        prune_if_due();
        assert!(NEXT_PRUNE_NS.load(Relaxed) >= t1 + PRUNE_EVERY_NS);
        assert_eq!(
            resident_leaves(),
            1,
            "a due call prunes: one of KEEP_PRUNES"
        );
        for _ in 1..KEEP_PRUNES {
            prune();
        }
        assert_eq!(resident_leaves(), 0, "pruned KEEP_PRUNES times");
        assert!(!test(a));
    }

    /// Prunes until every empty leaf has given its pages back.
    fn prune_fully() -> usize {
        (0..KEEP_PRUNES).map(|_| prune()).sum()
    }

    /// Whether the leaf of `addr` may hold resident pages (DIRTY).
    fn dirty(addr: usize) -> bool {
        let (r, i2, i3, _, _) = split(addr);
        let l3 = unsafe { (*l2_of(r)).l3[i2].load(Acquire) };
        !l3.is_null() && unsafe { (*l3).counts[i3].load(Acquire) } & DIRTY != 0
    }

    /// A region whose only sample comes and goes (a PHP worker's ZendMM
    /// chunk: its request's samples dropped at the end, new ones in the
    /// next request) keeps its leaf's pages across prunes, instead of
    /// having them given back and faulted in again, zeroed, each time; a
    /// leaf left empty for KEEP_PRUNES prunes in a row gives them back.
    #[test]
    fn a_leaf_emptied_and_used_again_keeps_its_pages() {
        let _s = SERIAL.lock().unwrap();
        let a = 0x7300_0000_0000usize + 64;
        prune_fully();
        for _request in 0..5 {
            assert!(set(a));
            assert!(test(a));
            clear(a);
            assert!(!test(a));
            for k in 1..KEEP_PRUNES {
                assert_eq!(prune(), 0);
                assert!(
                    dirty(a),
                    "pages given back after {k} prunes of an empty spell"
                );
            }
        }
        assert_eq!(resident_leaves(), 1);
        assert_eq!(prune(), 1, "empty for KEEP_PRUNES prunes: given back");
        assert!(!dirty(a));
        assert_eq!(resident_leaves(), 0);
        assert!(set(a));
        assert!(test(a) && dirty(a));
        clear(a);
        prune_fully();
    }

    /// Page summaries: a page whose samples are all gone stops sending frees
    /// to its leaf after a prune, and a page that still holds one keeps
    /// answering correctly throughout.
    #[test]
    fn page_summaries_are_pruned_per_page() {
        let _s = SERIAL.lock().unwrap();
        {
            let base = 0x7100_0000_0000usize;
            let (a, b) = (base + 0x1000 + 64, base + 0x5000 + 128);
            assert!(set(a) && set(b));
            clear(a);
            prune();
            assert!(!test(a));
            assert!(test(b));
            // The emptied page's summary bit is gone; the other's stays.
            let summary = |addr: usize| {
                let (r, i2, i3, _, _) = split(addr);
                let l3 = unsafe { (*l2_of(r)).l3[i2].load(Acquire) };
                let (pw, pbit) = page_of(addr);
                page_words(unsafe { &*l3 }, i3)[pw].load(Acquire) & pbit != 0
            };
            assert!(!summary(a));
            assert!(summary(b));
            assert!(set(a));
            assert!(test(a) && summary(a));
            clear(a);
            clear(b);
            prune();
            assert!(!summary(b));
            assert!(!test(a) && !test(b));
        }
    }
}

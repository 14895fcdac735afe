//! The live total, its high-water mark, and the stacks behind it.
//!
//! Every sample taken adds its un-biased bytes to `LIVE`, every sample
//! freed takes them out (exact in exact mode). When `LIVE` passes `PEAK`,
//! `PEAK` and its time move up. The stacks behind the peak are kept the
//! way DHAT keeps them, at the first decline after a new maximum (a free
//! while `LIVE` is at `PEAK`), *before* the free is taken out, so that they
//! are the state at the maximum: in exact mode the byte-exact stacks at the
//! highest total, in sampled mode the estimates at the highest estimated
//! total, whatever earlier near-peaks held.
//!
//! Keeping them costs no walk over the stacks: the decline freezes the
//! state by moving an epoch on (`stacks::Slot::peak`, copy-on-write), and
//! each stack copies its live amounts into its `peak_*` fields the first
//! time they change after the freeze. A freeze is two stores and an
//! increment, whatever the number of stacks, so every new maximum followed
//! by a decline is kept (until issue 28 a copy walked every stack record
//! and was taken only when the maximum grew by 1/64 since the last one: a
//! second maximum 1% above the first kept the first's stacks). An amount
//! change costs one load and compare more, and one copy of three amounts
//! the first time after a freeze. With several threads an allocation or
//! free in flight on another thread at the freeze may land on either side
//! of it. Freezes never wait.
//!
//! The peak dumps (`HEAPLIVE_PEAK_GROWTH`): when `LIVE` first exceeds the
//! threshold, the dumper is asked for a dump (one write to its eventfd) and
//! no other request is made until that dump sets the next threshold from
//! its own total.

use core::sync::atomic::{AtomicI64, AtomicU64, Ordering::*};

/// Un-biased live bytes of every stack together.
static LIVE: AtomicI64 = AtomicI64::new(0);
/// A total and when it was reached (monotonic ns, 0 = never).
struct Mark {
    bytes: AtomicI64,
    at: AtomicU64,
}
impl Mark {
    const fn zero() -> Mark {
        Mark {
            bytes: AtomicI64::new(0),
            at: AtomicU64::new(0),
        }
    }
    fn get(&self) -> (i64, u64) {
        (self.bytes.load(Relaxed), self.at.load(Relaxed))
    }
}
/// The highest `LIVE` seen, and when.
static PEAK: Mark = Mark::zero();
/// The total whose stacks the records' `peak_*` fields hold, and when.
static COPIED: Mark = Mark::zero();
/// The freezes so far (`stacks::Slot::peak`).
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The next peak dump when `LIVE` exceeds this; i64::MAX = none wanted now.
static NEXT_PEAK_DUMP: AtomicI64 = AtomicI64::new(i64::MAX);
/// The first peak dump comes when the total exceeds this times the factor.
pub const PEAK_DUMP_BASE: i64 = 1 << 20;

/// After a sample was added to its stack.
#[inline]
pub fn grew(bytes: i64) {
    let total = LIVE.fetch_add(bytes, Relaxed) + bytes;
    if total > PEAK.bytes.load(Relaxed) {
        PEAK.bytes.fetch_max(total, Relaxed);
        // While the total climbs every allocation is a new maximum: the
        // time is the coarse clock's (to a timer tick), written only when
        // it moved, so that the climb costs no time-stamp read and no
        // shared write per allocation.
        let now = crate::hot::sys::coarse_nanos();
        if PEAK.at.load(Relaxed) != now {
            PEAK.at.store(now, Relaxed);
        }
    }
    if total > NEXT_PEAK_DUMP.load(Relaxed) && NEXT_PEAK_DUMP.swap(i64::MAX, Relaxed) != i64::MAX {
        crate::hot::trigger::request_peak_dump();
    }
}

/// Before a sample is taken out of its stack: the first decline after a
/// new maximum freezes the stacks.
#[inline]
pub fn shrinking(bytes: i64) {
    let peak = PEAK.bytes.load(Relaxed);
    if bytes > 0 && LIVE.load(Relaxed) >= peak && peak > COPIED.bytes.load(Relaxed) {
        freeze(peak);
    }
    LIVE.fetch_sub(bytes, Relaxed);
}

#[cold]
#[inline(never)]
fn freeze(peak: i64) {
    // One freeze per maximum when threads decline at once.
    if COPIED.bytes.fetch_max(peak, Relaxed) < peak {
        COPIED.at.store(PEAK.at.load(Relaxed), Relaxed);
        EPOCH.fetch_add(1, Release);
    }
}

/// The number of freezes so far: the epoch whose state the stacks' `peak_*`
/// fields hold once they changed.
#[inline(always)]
pub fn epoch() -> u64 {
    EPOCH.load(Acquire)
}

/// The highest live total, and when (monotonic ns, 0 = never).
pub fn peak() -> (i64, u64) {
    PEAK.get()
}

/// The total whose stacks the records' `peak_*` fields hold, and when.
pub fn copied() -> (i64, u64) {
    COPIED.get()
}

/// Arms the next peak dump: when the total exceeds `total * factor` (with
/// `total` at least `PEAK_DUMP_BASE`). A factor of 0 keeps them off.
pub fn arm_peak_dump(total: i64, factor: f64) {
    if factor <= 1.0 {
        return;
    }
    let next = (total.max(PEAK_DUMP_BASE) as f64 * factor).min(i64::MAX as f64 / 2.0);
    NEXT_PEAK_DUMP.store(next as i64, Relaxed);
}

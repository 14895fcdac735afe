//! The live total, its high-water mark, and the stacks behind it.
//!
//! Every sample taken adds its un-biased bytes to `LIVE`, every sample
//! freed takes them out (exact in exact mode). When `LIVE` passes `PEAK`,
//! `PEAK` and its time move up. The stacks behind the peak are kept the
//! way DHAT keeps them: when the total first declines after a new maximum
//! (a free while `LIVE` is at `PEAK`), each stack's live amounts are copied
//! into its record's `peak_*` fields, *before* the free is taken out, so
//! the copy is the state at the maximum.
//!
//! The copy walks every stack record, so it is bounded by a threshold: it
//! runs only when the new maximum is above the last copied one by more than
//! 1/64 (1.6%). A process copies at most about 64 * ln(peak / 1 MiB) times
//! (under 900 times for a 1 TiB peak). What is guaranteed: the kept stacks
//! are the exact per-stack state (in exact mode; the sampled estimates in
//! sampled mode) at a moment whose total is at least `PEAK / (1 + 1/64)`;
//! in a single-threaded program whose highest maximum is followed by a free,
//! they are the state at `PEAK` itself. With several threads freeing at once
//! the copy is not atomic: stacks may move while it runs (by the frees and
//! allocations in flight on other threads). Copies never wait: a thread that
//! finds another copying skips.
//!
//! The peak dumps (`HEAPLIVE_PEAK_GROWTH`): when `LIVE` first exceeds the
//! threshold, the dumper is asked for a dump (one write to its eventfd) and
//! no other request is made until that dump sets the next threshold from
//! its own total.

use crate::hot::stacks;
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::*};

/// Un-biased live bytes of every stack together.
static LIVE: AtomicI64 = AtomicI64::new(0);
/// The highest `LIVE` seen, and when (monotonic ns).
static PEAK: AtomicI64 = AtomicI64::new(0);
static PEAK_AT: AtomicU64 = AtomicU64::new(0);
/// The total whose stacks the records' `peak_*` fields hold, and when.
static COPIED: AtomicI64 = AtomicI64::new(0);
static COPIED_AT: AtomicU64 = AtomicU64::new(0);
static COPYING: AtomicBool = AtomicBool::new(false);
/// The next peak dump when `LIVE` exceeds this; i64::MAX = none wanted now.
static NEXT_PEAK_DUMP: AtomicI64 = AtomicI64::new(i64::MAX);
/// The first peak dump comes when the total exceeds this times the factor.
pub const PEAK_DUMP_BASE: i64 = 1 << 20;

/// After a sample was added to its stack.
#[inline]
pub fn grew(bytes: i64) {
    let total = LIVE.fetch_add(bytes, Relaxed) + bytes;
    if total > PEAK.load(Relaxed) {
        PEAK.fetch_max(total, Relaxed);
        // While the total climbs every allocation is a new maximum: the
        // time is the coarse clock's (to a timer tick), written only when
        // it moved, so that the climb costs no time-stamp read and no
        // shared write per allocation.
        let now = crate::hot::sys::coarse_nanos();
        if PEAK_AT.load(Relaxed) != now {
            PEAK_AT.store(now, Relaxed);
        }
    }
    if total > NEXT_PEAK_DUMP.load(Relaxed) && NEXT_PEAK_DUMP.swap(i64::MAX, Relaxed) != i64::MAX {
        crate::hot::trigger::request_peak_dump();
    }
}

/// Before a sample is taken out of its stack: the first decline after a
/// new maximum copies the stacks.
#[inline]
pub fn shrinking(bytes: i64) {
    let peak = PEAK.load(Relaxed);
    if bytes > 0
        && LIVE.load(Relaxed) >= peak
        && peak
            > COPIED
                .load(Relaxed)
                .saturating_add(COPIED.load(Relaxed) / 64)
        && !COPYING.swap(true, Acquire)
    {
        for id in 1..stacks::count() {
            if let Some(s) = stacks::slot(id) {
                s.peak_bytes.store(s.live_bytes.load(Relaxed), Relaxed);
                s.peak_milliblocks
                    .store(s.live_milliblocks.load(Relaxed), Relaxed);
                s.peak_variance
                    .store(s.live_variance.load(Relaxed), Relaxed);
            }
        }
        COPIED.store(peak, Relaxed);
        COPIED_AT.store(PEAK_AT.load(Relaxed), Relaxed);
        COPYING.store(false, Release);
    }
    LIVE.fetch_sub(bytes, Relaxed);
}

/// The highest live total, and when (monotonic ns, 0 = never).
pub fn peak() -> (i64, u64) {
    (PEAK.load(Relaxed), PEAK_AT.load(Relaxed))
}

/// The total whose stacks the records' `peak_*` fields hold, and when.
pub fn copied() -> (i64, u64) {
    (COPIED.load(Relaxed), COPIED_AT.load(Relaxed))
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

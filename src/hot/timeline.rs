//! The timeline: the live and allocated totals over time, in a bounded
//! buffer of rows, written beside each dump (`background::timeline`).
//!
//! No thread of its own and no timer (heaplive's thread starts only when a
//! feature needs it: `hot::trigger`): a row is added on the sampled path,
//! when a sample finds that a period (`HEAPLIVE_TIMELINE`) has passed since
//! the last row, by the coarse clock (a read of the vDSO's data: no system
//! call), and at every dump and leak warning. A program that allocates
//! nothing for a while gets no rows meanwhile: its totals did not move.
//!
//! A row's amounts are what the library already counts: the stack records'
//! live bytes (exact in exact mode, to the byte), the variance terms of
//! their samples (the live total's interval) and their allocated bytes,
//! summed over the records when the row is taken (one pass over the
//! records per period, none per sample).
//!
//! The rows live in a static buffer (`ROWS`, in `.bss`: its pages cost
//! nothing until used; src/layout.ld keeps it off the start-up page), never
//! in the program's allocator, and nothing here maps or fails. When the
//! buffer is full, every other periodic row goes (dump and leak rows stay)
//! and the period doubles, so a long run keeps its whole history at a
//! coarser step. The sampled path only tries the lock (`try_lock`): a row
//! that finds it busy is left to the next sample.

use crate::hot::lock::{Rank, SpinLock};
use crate::hot::{config, stacks, sys};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Rows the buffer holds.
pub const CAPACITY: usize = 1024;

/// What a row marks.
pub const TICK: u8 = 0;
pub const DUMP: u8 = 1;
pub const LEAK: u8 = 2;

/// One row: 128 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Row {
    /// Monotonic time (the coarse clock's for periodic rows), ns.
    pub at_ns: u64,
    /// Un-biased live bytes of every stack.
    pub live: i64,
    /// The variance of `live`, in `sampler::variance_units`.
    pub live_variance: i64,
    /// Un-biased bytes allocated since start.
    pub allocated: i64,
    /// Dump rows: resident bytes by kind (`background::rss::KINDS`), 0 when
    /// not read.
    pub rss: [u64; 8],
    /// Dump rows: heaplive's own resident memory (tables and heap).
    pub own: u64,
    /// Dump rows: the dump's number (`%n`).
    pub seq: u32,
    /// `TICK`, `DUMP` or `LEAK`.
    pub kind: u8,
    /// Dump rows: why (`signal`, `exit`, ...), NUL-padded.
    pub why: [u8; 19],
}

const _: () = assert!(core::mem::size_of::<Row>() == 128);

struct Rows(UnsafeCell<[Row; CAPACITY]>);
// SAFETY: accessed only under `LOCK`.
unsafe impl Sync for Rows {}

/// The buffer. All zero: `.bss`.
static ROWS: Rows = Rows(UnsafeCell::new(
    [Row {
        at_ns: 0,
        live: 0,
        live_variance: 0,
        allocated: 0,
        rss: [0; 8],
        own: 0,
        seq: 0,
        kind: 0,
        why: [0; 19],
    }; CAPACITY],
));

/// Rows in use (`ROWS[..len]`), and the current period (ns) after
/// thinning; under `LOCK`.
struct State {
    len: usize,
    period_ns: u64,
}

static LOCK: SpinLock<State> = SpinLock::new(
    Rank::Timeline,
    State {
        len: 0,
        period_ns: 0,
    },
);

/// The coarse time after which a sample adds a row; 0 before the first.
static NEXT_NS: AtomicU64 = AtomicU64::new(0);

/// At a sample: adds a periodic row when its period has passed. A load
/// and a compare when off or not due; the clock read otherwise.
#[inline]
pub fn at_sample() {
    let ms = config::get().timeline_ms;
    if ms == 0 {
        return;
    }
    let now = sys::coarse_nanos();
    if now >= NEXT_NS.load(Relaxed) {
        tick(now, ms);
    }
}

#[cold]
#[inline(never)]
fn tick(now: u64, ms: u64) {
    let Some(mut st) = LOCK.try_lock() else {
        return;
    };
    if now < NEXT_NS.load(Relaxed) {
        return;
    }
    if st.period_ns == 0 {
        st.period_ns = ms.saturating_mul(1_000_000);
    }
    let mut row = totals();
    row.at_ns = now;
    push(&mut st, row);
    NEXT_NS.store(now.saturating_add(st.period_ns), Relaxed);
}

/// The totals now, from the stack records.
pub fn totals() -> Row {
    let mut r = Row::default();
    for id in 1..stacks::count() {
        if let Some(s) = stacks::slot(id) {
            r.live += s.live_bytes.load(Relaxed);
            r.live_variance += s.live_variance.load(Relaxed).max(0);
            r.allocated += s.alloc_bytes.load(Relaxed) as i64;
        }
    }
    r
}

/// The lock for a dump or leak row, tried for a while: its holders never
/// wait or call anything, but one may be this very thread, interrupted by
/// a signal handler that dumps (`heaplive_dump()`): then the row is left
/// out rather than waited for forever.
fn lock_for_a_while() -> Option<crate::hot::lock::Locked<'static, State>> {
    for _ in 0..100_000 {
        if let Some(l) = LOCK.try_lock() {
            return Some(l);
        }
        core::hint::spin_loop();
    }
    None
}

/// Adds a dump or leak row (heaplive's thread, or the thread that dumps).
pub fn mark(row: Row) {
    if config::get().timeline_ms == 0 {
        return;
    }
    let Some(mut st) = lock_for_a_while() else {
        return;
    };
    if st.period_ns == 0 {
        st.period_ns = config::get().timeline_ms.saturating_mul(1_000_000);
    }
    push(&mut st, row);
}

fn push(st: &mut State, row: Row) {
    // SAFETY: under LOCK.
    let rows = unsafe { &mut *ROWS.0.get() };
    if st.len == CAPACITY {
        st.len = thin(rows);
        st.period_ns = st.period_ns.saturating_mul(2);
    }
    let mut row = row;
    if st.len > 0 {
        // Periodic rows read the coarse clock, which lags by a tick at
        // most: never before the row before.
        row.at_ns = row.at_ns.max(rows[st.len - 1].at_ns);
    }
    rows[st.len] = row;
    st.len += 1;
}

/// Drops every other periodic row (and, when marks alone fill more than
/// half the buffer, the older half of them), keeping the order; returns
/// the rows left.
fn thin(rows: &mut [Row]) -> usize {
    let mut out = 0;
    let mut ticks = 0usize;
    let marks = rows.iter().filter(|r| r.kind != TICK).count();
    let mut skip_marks = marks.saturating_sub(CAPACITY / 2);
    for i in 0..rows.len() {
        let r = rows[i];
        let keep = if r.kind == TICK {
            ticks += 1;
            ticks.is_multiple_of(2)
        } else if skip_marks > 0 {
            skip_marks -= 1;
            false
        } else {
            true
        };
        if keep {
            rows[out] = r;
            out += 1;
        }
    }
    out.min(CAPACITY - 1)
}

/// Calls `f` with the rows so far, oldest first (under the lock: `f` must
/// not allocate; copy them out first). False, without calling `f`, when
/// the lock stayed busy (see `lock_for_a_while`).
pub fn with_rows(f: &mut dyn FnMut(&[Row])) -> bool {
    let Some(st) = lock_for_a_while() else {
        return false;
    };
    // SAFETY: under LOCK.
    let rows = unsafe { &*ROWS.0.get() };
    f(&rows[..st.len]);
    true
}

/// fork: the prepare handler takes the lock without waiting; a child whose
/// prepare handler did not get it resets it.
pub fn lock_for_fork() -> bool {
    LOCK.try_lock_raw()
}

/// # Safety
/// After `lock_for_fork` succeeded on this thread, or in a child whose
/// other threads are gone.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { LOCK.unlock_raw() };
}

/// # Safety
/// A fork's child, on its only thread.
pub unsafe fn reset_in_child() {
    // SAFETY: guaranteed by the caller. The rows go: a thread of the
    // parent may have been thinning them.
    unsafe {
        LOCK.reset_in_child(State {
            len: 0,
            period_ns: 0,
        })
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick_row(i: u64) -> Row {
        Row {
            at_ns: i,
            ..Row::default()
        }
    }

    #[test]
    fn thinning_keeps_marks_and_every_other_tick_in_order() {
        let mut rows: Vec<Row> = (0..CAPACITY as u64).map(tick_row).collect();
        rows[10].kind = DUMP;
        rows[11].kind = LEAK;
        let n = thin(&mut rows);
        assert!(n < CAPACITY && n > CAPACITY / 2 - 2, "{n}");
        assert!(rows[..n].windows(2).all(|w| w[0].at_ns < w[1].at_ns));
        assert_eq!(rows[..n].iter().filter(|r| r.kind != TICK).count(), 2);
        // All marks: the older beyond half the buffer go.
        let mut marks: Vec<Row> = (0..CAPACITY as u64)
            .map(|i| Row {
                kind: DUMP,
                ..tick_row(i)
            })
            .collect();
        let n = thin(&mut marks);
        assert_eq!(n, CAPACITY / 2);
        assert_eq!(marks[n - 1].at_ns, CAPACITY as u64 - 1, "the newest stay");
    }
}

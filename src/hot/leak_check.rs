//! Leak-threshold warnings: name the stack whose live memory keeps growing.
//!
//! The allocating thread only compares its stack's new live amount with the
//! thresholds and, when one is crossed, claims the warning with a
//! compare-and-swap and queues an event (a short spin-locked ring; no call
//! into libc under it). The background thread (`background::leak_report`)
//! symbolizes and writes the lines; the first warning that is due starts
//! it if nothing else did (`hot::trigger`), so a program that never
//! reaches a threshold keeps no thread of ours for warnings.
//!
//! A stack warns first when its live bytes reach `HEAPLIVE_WARN_BYTES` (or
//! live blocks reach `HEAPLIVE_WARN_BLOCKS`), then again only when it
//! reaches the last warned amount times `HEAPLIVE_WARN_GROWTH`.

use crate::hot::config;
use crate::hot::lock::{Rank, SpinLock};
use crate::hot::stacks;
use crate::hot::sys;
use core::sync::atomic::{AtomicU64, Ordering::*};

const RING: usize = 256;

/// A threshold crossed by one stack, for the reporter.
#[derive(Clone, Copy, Default)]
pub struct Event {
    pub stack: stacks::StackId,
    /// Crossed by live blocks (else by live bytes).
    pub by_blocks: bool,
    pub bytes: i64,
    pub milliblocks: i64,
    /// The amount at the previous warning of this kind (0 = first).
    pub previous: i64,
    pub previous_ns: u64,
    pub now_ns: u64,
}

struct Ring {
    events: [Event; RING],
    head: usize,
    len: usize,
    dropped: u64,
}

static QUEUE: SpinLock<Ring> = SpinLock::new(
    Rank::LeakQueue,
    Ring {
        events: [Event {
            stack: 0,
            by_blocks: false,
            bytes: 0,
            milliblocks: 0,
            previous: 0,
            previous_ns: 0,
            now_ns: 0,
        }; RING],
        head: 0,
        len: 0,
        dropped: 0,
    },
);

/// Events not queued because a fork was being prepared.
static DROPPED_WHILE_FORKING: AtomicU64 = AtomicU64::new(0);
static WARNED_STACKS: AtomicU64 = AtomicU64::new(0);

/// The amount at which a stack next warns.
pub fn next_threshold(threshold: i64, last_warned: i64, growth: f64) -> i64 {
    if last_warned <= 0 {
        threshold
    } else {
        let next = (last_warned as f64 * growth).ceil();
        if next >= i64::MAX as f64 {
            i64::MAX
        } else {
            (next as i64).max(last_warned + 1)
        }
    }
}

/// After a stack's live amount grew (allocation slow path, guard held).
/// True when a warning was queued: the caller makes sure heaplive's thread
/// runs to write it (a program that never reaches a warning needs none).
pub fn after_growth(id: stacks::StackId, bytes: i64, milliblocks: i64) -> bool {
    let cfg = config::get();
    let Some(slot) = stacks::slot(id) else {
        return false;
    };
    let mut queued = false;
    if cfg.warn_bytes > 0 {
        queued |= check(
            slot,
            id,
            false,
            bytes,
            bytes,
            milliblocks,
            cfg.warn_bytes as i64,
            cfg.warn_growth,
            &slot.warned_bytes,
        );
    }
    if cfg.warn_blocks > 0 {
        let t = (cfg.warn_blocks as i64).saturating_mul(1000);
        queued |= check(
            slot,
            id,
            true,
            milliblocks,
            bytes,
            milliblocks,
            t,
            cfg.warn_growth,
            &slot.warned_milliblocks,
        );
    }
    queued
}

#[allow(clippy::too_many_arguments)]
fn check(
    slot: &stacks::Slot,
    id: stacks::StackId,
    by_blocks: bool,
    amount: i64,
    bytes: i64,
    milliblocks: i64,
    threshold: i64,
    growth: f64,
    warned: &core::sync::atomic::AtomicI64,
) -> bool {
    let last = warned.load(Relaxed);
    if amount < next_threshold(threshold, last, growth) {
        return false;
    }
    if warned
        .compare_exchange(last, amount, AcqRel, Relaxed)
        .is_err()
    {
        return false;
    }
    let now = sys::now_nanos();
    let previous_ns = slot.warned_at.swap(now, Relaxed);
    let other = if by_blocks {
        &slot.warned_bytes
    } else {
        &slot.warned_milliblocks
    };
    if last == 0 && other.load(Relaxed) == 0 {
        WARNED_STACKS.fetch_add(1, Release);
    }
    let ev = Event {
        stack: id,
        by_blocks,
        bytes,
        milliblocks,
        previous: last,
        previous_ns,
        now_ns: now,
    };
    // An allocation path: while a fork is being prepared the event is
    // counted as dropped instead of waiting for the queue.
    let Some(mut q) = QUEUE.lock_unless_forking() else {
        DROPPED_WHILE_FORKING.fetch_add(1, Relaxed);
        return true;
    };
    if q.len == RING {
        q.dropped += 1;
        return true;
    }
    let i = (q.head + q.len) % RING;
    q.events[i] = ev;
    q.len += 1;
    true
}

/// Takes the oldest queued warning, with the count of events the full
/// queue dropped since the last call (background thread).
pub fn pop() -> Option<(Event, u64)> {
    // Every queued (or dropped) event comes after its stack's first
    // warning: with none, the queue (12 KiB, a page of its own) is not
    // touched, as at the exit of a process that never warned.
    if WARNED_STACKS.load(Acquire) == 0 {
        return None;
    }
    let mut q = QUEUE.lock();
    if q.len == 0 {
        return None;
    }
    let ev = q.events[q.head];
    q.head = (q.head + 1) % RING;
    q.len -= 1;
    let dropped = core::mem::take(&mut q.dropped) + DROPPED_WHILE_FORKING.swap(0, Relaxed);
    Some((ev, dropped))
}

/// Events the full queue dropped that no `pop` reported yet.
pub fn take_dropped() -> u64 {
    core::mem::take(&mut QUEUE.lock().dropped) + DROPPED_WHILE_FORKING.swap(0, Relaxed)
}

/// Stacks that have warned at least once.
pub fn warned_stacks() -> u64 {
    WARNED_STACKS.load(Relaxed)
}

pub fn lock_for_fork() {
    QUEUE.lock_raw();
}

/// # Safety
/// Fork handlers only, paired with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { QUEUE.unlock_raw() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_grow_by_the_factor() {
        assert_eq!(next_threshold(100, 0, 2.0), 100);
        assert_eq!(next_threshold(100, 150, 2.0), 300);
        assert_eq!(next_threshold(100, 100, 1.5), 150);
        assert_eq!(next_threshold(100, 1, 1.0001), 2);
        assert_eq!(next_threshold(100, i64::MAX / 2, 4.0), i64::MAX);
    }
}

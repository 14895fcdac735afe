//! Leak-threshold warnings: name the stack whose live memory keeps growing.
//!
//! The allocating thread only compares its stack's new live amount with the
//! thresholds and, when one is crossed, claims the warning with a
//! compare-and-swap and queues an event (a short spin-locked ring; no call
//! into libc under it). The background thread symbolizes and writes the
//! lines, at most `MAX_PER_SECOND` a second; what it suppresses is counted
//! and reported on the next line.
//!
//! A stack warns first when its live bytes reach `HEAPLIVE_WARN_BYTES` (or
//! live blocks reach `HEAPLIVE_WARN_BLOCKS`), then again only when it
//! reaches the last warned amount times `HEAPLIVE_WARN_GROWTH`.

use crate::hot::lock::SpinLock;
use crate::hot::log::{Grouped, human_bytes};
use crate::hot::config;
use crate::hot::stacks;
use crate::hot::sys;
use core::sync::atomic::{AtomicU64, Ordering::*};
use std::fmt::Write;

const RING: usize = 256;
const MAX_PER_SECOND: u32 = 5;
const TOP_FRAMES: usize = 6;

#[derive(Clone, Copy, Default)]
struct Event {
    stack: stacks::StackId,
    by_blocks: bool,
    bytes: i64,
    milliblocks: i64,
    /// The amount at the previous warning of this kind (0 = first).
    previous: i64,
    previous_ns: u64,
    now_ns: u64,
}

struct Ring {
    events: [Event; RING],
    head: usize,
    len: usize,
    dropped: u64,
}

static QUEUE: SpinLock<Ring> = SpinLock::new(Ring {
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
});

static WARNED_STACKS: AtomicU64 = AtomicU64::new(0);
static LINES: AtomicU64 = AtomicU64::new(0);

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
pub fn after_growth(id: stacks::StackId, bytes: i64, milliblocks: i64) {
    let cfg = config::get();
    let Some(slot) = stacks::slot(id) else { return };
    if cfg.warn_bytes > 0 {
        check(
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
        check(
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
) {
    let last = warned.load(Relaxed);
    if amount < next_threshold(threshold, last, growth) {
        return;
    }
    if warned
        .compare_exchange(last, amount, AcqRel, Relaxed)
        .is_err()
    {
        return;
    }
    let now = sys::now_nanos();
    let previous_ns = slot.warned_at.swap(now, Relaxed);
    let other = if by_blocks {
        &slot.warned_bytes
    } else {
        &slot.warned_milliblocks
    };
    if last == 0 && other.load(Relaxed) == 0 {
        WARNED_STACKS.fetch_add(1, Relaxed);
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
    let mut q = QUEUE.lock();
    if q.len == RING {
        q.dropped += 1;
        return;
    }
    let i = (q.head + q.len) % RING;
    q.events[i] = ev;
    q.len += 1;
}

/// Writes the queued warnings (background thread).
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);
/// Held while events are taken from the queue and written or counted, so
/// the exit summary (on the exiting thread) waits for one the background
/// thread has in hand. Taken before the dump lock, never after it.
static REPORTING: SpinLock<()> = SpinLock::new(());

pub fn report_pending() {
    static WINDOW_START: AtomicU64 = AtomicU64::new(0);
    static IN_WINDOW: AtomicU64 = AtomicU64::new(0);
    let _reporting = REPORTING.lock();
    loop {
        let (ev, dropped) = {
            let mut q = QUEUE.lock();
            if q.len == 0 {
                return;
            }
            let ev = q.events[q.head];
            q.head = (q.head + 1) % RING;
            q.len -= 1;
            (ev, core::mem::take(&mut q.dropped))
        };
        SUPPRESSED.fetch_add(dropped, Relaxed);
        let now = sys::now_nanos();
        if now.saturating_sub(WINDOW_START.load(Relaxed)) >= 1_000_000_000 {
            WINDOW_START.store(now, Relaxed);
            IN_WINDOW.store(0, Relaxed);
        }
        if IN_WINDOW.fetch_add(1, Relaxed) >= MAX_PER_SECOND as u64 {
            SUPPRESSED.fetch_add(1, Relaxed);
            continue;
        }
        let suppressed = SUPPRESSED.swap(0, Relaxed);
        let text = format_event(&ev, suppressed);
        LINES.fetch_add(1, Relaxed);
        crate::hot::log::write_line(text.as_bytes());
    }
}

fn format_event(ev: &Event, suppressed: u64) -> String {
    let mut s = String::with_capacity(256);
    let blocks = (ev.milliblocks as f64 / 1000.0).round().max(0.0) as u64;
    let _ = write!(
        s,
        "heaplive[{}]: possible leak: {} live in {} blocks",
        crate::background::fork::pid(),
        human_bytes(ev.bytes as f64),
        Grouped(blocks)
    );
    let amount = if ev.by_blocks {
        ev.milliblocks
    } else {
        ev.bytes
    };
    if ev.previous > 0 {
        let secs = ev.now_ns.saturating_sub(ev.previous_ns) as f64 / 1e9;
        let _ = write!(
            s,
            " (x{:.1} in {:.0} s)",
            amount as f64 / ev.previous as f64,
            secs
        );
    } else if ev.by_blocks {
        let _ = write!(
            s,
            " (reached HEAPLIVE_WARN_BLOCKS={})",
            config::get().warn_blocks
        );
    } else {
        let _ = write!(
            s,
            " (reached HEAPLIVE_WARN_BYTES={})",
            human_bytes(config::get().warn_bytes as f64)
        );
    }
    s.push_str(" at ");
    s.push_str(&top_frames(ev.stack));
    if suppressed > 0 {
        let _ = write!(s, " ({} more warnings suppressed)", suppressed);
    }
    s
}

/// The leaf-most frames of a stack, `leaf <- caller <- ...`.
fn top_frames(id: stacks::StackId) -> String {
    let mut st = crate::background::dumper::DUMP.lock();
    let sym = crate::background::dumper::symbolizer_of(&mut st);
    let mut names: Vec<String> = Vec::new();
    for &ip in stacks::frames(id) {
        let (_, frames) = sym.lookup((ip as u64).saturating_sub(1));
        for f in frames {
            names.push(f.function);
        }
        if names.len() >= TOP_FRAMES {
            break;
        }
    }
    sym.release_debug_info();
    if names.is_empty() {
        return "[no stack]".into();
    }
    let more = names.len() > TOP_FRAMES;
    names.truncate(TOP_FRAMES);
    let mut s = names.join(" <- ");
    if more {
        s.push_str(" <- ...");
    }
    s
}

/// The closing line at exit, when warnings were issued.
pub fn exit_summary(written: Option<&crate::background::dumper::Written>) {
    report_pending();
    let warned = WARNED_STACKS.load(Relaxed);
    if warned == 0 {
        return;
    }
    let total = match written {
        Some(w) => human_bytes(w.total as f64).to_string(),
        None => "unknown".into(),
    };
    let dump = written
        .map(|w| w.path.display().to_string())
        .unwrap_or_else(|| "none (HEAPLIVE_DUMP_AT_EXIT=0)".into());
    let suppressed = SUPPRESSED.swap(0, Relaxed) + core::mem::take(&mut QUEUE.lock().dropped);
    let note = if suppressed > 0 {
        format!("; {suppressed} more warnings suppressed")
    } else {
        String::new()
    };
    crate::hot::log::line(format_args!(
        "heaplive[{}]: at exit: {} live (estimate); {} stacks warned{}; final dump: {}",
        crate::background::fork::pid(),
        total,
        warned,
        note,
        dump
    ));
}

/// Before the dump lock (a reporter holds this one and then takes that).
pub fn lock_reporting_for_fork() {
    REPORTING.lock_raw();
}

/// # Safety
/// Fork handlers only, paired with `lock_reporting_for_fork`.
pub unsafe fn unlock_reporting_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { REPORTING.unlock_raw() };
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

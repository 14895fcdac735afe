//! Writing the leak warnings that the allocation path queued
//! (`hot::leak_check`): on the background thread, symbolized, at most
//! `MAX_PER_SECOND` lines a second; what is suppressed is counted and
//! reported on the next line and in the exit summary.

use crate::background::dump::{DUMP, Written, symbolizer_of};
use crate::hot::leak_check::{self, Event};
use crate::hot::lock::{Rank, SpinLock};
use crate::hot::log::{self, Grouped, human_bytes};
use crate::hot::{config, pid, stacks, sys};
use core::sync::atomic::{AtomicU64, Ordering::*};
use std::fmt::Write;

const MAX_PER_SECOND: u32 = 5;
const TOP_FRAMES: usize = 6;

/// Writes the queued warnings (background thread).
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);
/// Held while events are taken from the queue and written or counted, so
/// the exit summary (on the exiting thread) waits for one the background
/// thread has in hand. Taken before the dump lock, never after it.
static REPORTING: SpinLock<()> = SpinLock::new(Rank::Reporting, ());

/// Writes the queued warnings, if a stack ever warned (else nothing was
/// queued: the exit of a process that never warned runs none of this).
#[inline]
pub fn report_pending() {
    if leak_check::warned_stacks() != 0 {
        write_queued_lines();
    }
}

#[inline(never)]
fn write_queued_lines() {
    static WINDOW_START: AtomicU64 = AtomicU64::new(0);
    static IN_WINDOW: AtomicU64 = AtomicU64::new(0);
    let _reporting = REPORTING.lock();
    loop {
        let Some((ev, dropped)) = leak_check::pop() else {
            return;
        };
        SUPPRESSED.fetch_add(dropped, Relaxed);
        let now = sys::now_nanos();
        if now.saturating_sub(WINDOW_START.load(Relaxed)) >= 1_000_000_000 {
            WINDOW_START.store(now, Relaxed);
            IN_WINDOW.store(0, Relaxed);
        }
        // After the exit dump began, a line would come after it: count.
        if crate::background::dump::FINISHING.load(Relaxed)
            || IN_WINDOW.fetch_add(1, Relaxed) >= MAX_PER_SECOND as u64
        {
            SUPPRESSED.fetch_add(1, Relaxed);
            continue;
        }
        let suppressed = SUPPRESSED.swap(0, Relaxed);
        match format_event(&ev, suppressed) {
            Some(text) => {
                log::write_line(text.as_bytes());
                crate::background::timeline::at_leak();
            }
            // Not a leak: the suppressed count goes on the next line.
            None => {
                SUPPRESSED.fetch_add(suppressed, Relaxed);
                IN_WINDOW.fetch_sub(1, Relaxed);
            }
        }
    }
}

/// None for a runtime pool's stack (no warning).
fn format_event(ev: &Event, suppressed: u64) -> Option<String> {
    let mut s = String::with_capacity(256);
    let blocks = (ev.milliblocks as f64 / 1000.0).round().max(0.0) as u64;
    let _ = write!(
        s,
        "heaplive[{}]: possible leak: {} live in {} blocks",
        pid::get(),
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
    s.push_str(&top_frames(ev.stack)?);
    if suppressed > 0 {
        let _ = write!(s, " ({} more warnings suppressed)", suppressed);
    }
    Some(s)
}

/// The leaf-most frames of a stack, `leaf <- caller <- ...`. A stack with
/// PHP frames (PHP mode) shows those, innermost first, and the request it
/// was taken in: `handle_job (worker.php:12) <- {main} (worker.php:30) in
/// [cli worker.php]`.
fn top_frames(id: stacks::StackId) -> Option<String> {
    let frames = stacks::frames(id);
    let pseudo =
        |ip: &usize| crate::hot::names::text(*ip).map(|t| String::from_utf8_lossy(t).into_owned());
    let php: Vec<String> = frames
        .iter()
        .filter_map(pseudo)
        .filter(|t| !t.starts_with('['))
        .collect();
    if !php.is_empty() {
        let more = php.len() > TOP_FRAMES;
        let mut s = php[..php.len().min(TOP_FRAMES)].join(" <- ");
        if more {
            s.push_str(" <- ...");
        }
        // The request frame is the root (the last frame).
        if let Some(r) = frames
            .last()
            .and_then(pseudo)
            .filter(|t| t.starts_with('[') && t != "[zend_mm]" && t != "[php?]")
        {
            s.push_str(" in ");
            s.push_str(&r);
        }
        return Some(s);
    }
    let mut st = DUMP.lock();
    let sym = symbolizer_of(&mut st);
    // One module's debug information at a time, for just these addresses.
    let wanted: Vec<u64> = frames
        .iter()
        .filter(|ip| pseudo(ip).is_none())
        .map(|&ip| (ip as u64).saturating_sub(1))
        .collect();
    sym.prefetch(&wanted, &mut || {});
    // A runtime pool (libstdc++'s emergency pool) is held by design: no
    // warning (`background::runtime_pools`).
    let answers: Vec<_> = frames
        .iter()
        .map(|&ip| {
            if pseudo(&ip).is_some() {
                (None, std::sync::Arc::from([]))
            } else {
                sym.lookup((ip as u64).saturating_sub(1))
            }
        })
        .collect();
    let mappings = sym.mappings();
    let pool = crate::background::runtime_pools::pool_of(answers.iter().map(|(m, f)| {
        (
            m.and_then(|m| mappings.get(m)).map(|m| m.path.as_str()),
            &f[..],
        )
    }));
    if pool.is_some() {
        sym.release_debug_info();
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    for &ip in frames {
        if let Some(t) = pseudo(&ip) {
            names.push(t);
            if names.len() >= TOP_FRAMES {
                break;
            }
            continue;
        }
        let (_, frames) = sym.lookup((ip as u64).saturating_sub(1));
        for f in frames.iter() {
            names.push(f.function.clone());
        }
        if names.len() >= TOP_FRAMES {
            break;
        }
    }
    sym.release_debug_info();
    if names.is_empty() {
        return Some("[no stack]".into());
    }
    let more = names.len() > TOP_FRAMES;
    names.truncate(TOP_FRAMES);
    let mut s = names.join(" <- ");
    if more {
        s.push_str(" <- ...");
    }
    Some(s)
}

/// The closing line at exit, when warnings were issued.
pub fn exit_summary(written: Option<&Written>) {
    report_pending();
    let warned = leak_check::warned_stacks();
    if warned == 0 {
        return;
    }
    let total = match written {
        Some(w) => human_bytes(w.total as f64).to_string(),
        None => "unknown".into(),
    };
    let dump = written
        .map(|w| {
            if w.skipped {
                "none (nothing live)".into()
            } else {
                w.path.display().to_string()
            }
        })
        .unwrap_or_else(|| "none (HEAPLIVE_DUMP_AT_EXIT=0)".into());
    let suppressed = SUPPRESSED.swap(0, Relaxed) + leak_check::take_dropped();
    let note = if suppressed > 0 {
        format!("; {suppressed} more warnings suppressed")
    } else {
        String::new()
    };
    log::line(format_args!(
        "heaplive[{}]: at exit: {} live (estimate); {} stacks warned{}; final dump: {}",
        pid::get(),
        total,
        warned,
        note,
        dump
    ));
}

/// Before the dump lock (a reporter holds this one and then takes that).
/// See `dump::lock_for_fork`.
pub fn lock_for_fork() -> bool {
    REPORTING.lock_raw_within(crate::background::fork::HIGH_LOCK_WAIT_NS)
}

/// # Safety
/// In a fork's child whose prepare handler did not get the lock.
pub unsafe fn reset_in_child() {
    // SAFETY: guaranteed by the caller.
    unsafe { REPORTING.reset_in_child(()) };
}

/// # Safety
/// Fork handlers only, paired with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: guaranteed by the caller.
    unsafe { REPORTING.unlock_raw() };
}

//! PHP mode's dumps: the dump at a memory_limit error and the dump of a
//! request's peak.
//!
//! A memory_limit error ("Allowed memory size of N bytes exhausted") is
//! reported by the engine on the PHP thread, from inside ZendMM, and is
//! followed by a bailout (a longjmp to the request's end). At that moment
//! (`oom`, called by `interpose::php`'s `zend_error_cb` wrapper before it
//! chains to PHP's own) the PHP thread copies the live table (heaplive's own
//! memory, no lock held across anything else) and hands the copy to
//! heaplive's thread, which symbolizes and writes it, while the PHP thread
//! waits for the file (so the dump is on disk, and its line logged, before
//! PHP writes its error). Nothing of ours is left half-done by the longjmp
//! that follows: the PHP thread holds no lock and no guard when it chains.
//! Should heaplive's thread not answer within `WAIT_NS` (not running, or
//! stuck), the PHP thread takes its job back and writes it itself.
//!
//! A request's peak (`request_peak`, at request end): the stacks at the
//! peak are in the stack records' `request_peak_*` fields (`hot::php`); they
//! are copied out here, on the PHP thread, and written by heaplive's thread
//! without waiting (the next request may copy over the fields).

use crate::background::dump::{DUMP, Snapshot, Which, top_stack, write_view};
use crate::hot::services::PhpOom;
use crate::hot::{config, guard, log, stacks, sys, trigger};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// How long the PHP thread waits for heaplive's thread to write the
/// memory_limit dump before writing it itself.
const WAIT_NS: u64 = 10_000_000_000;
/// How long a PHP thread tries for the job queue's lock (held only for a
/// push or a pop; longer means a fork copied it locked).
const LOCK_NS: u64 = 2_000_000_000;

enum Job {
    Oom {
        snap: Snapshot,
        message: String,
        file: String,
        line: u32,
        request: String,
    },
    Peak {
        stacks: Vec<(stacks::StackId, i64, i64)>,
        request: String,
        peak: i64,
    },
}

static QUEUE: Mutex<Vec<(u64, Job)>> = Mutex::new(Vec::new());
/// Numbers of the jobs queued and of the last memory_limit job written.
static NEXT: AtomicU64 = AtomicU64::new(1);
static DONE: AtomicU64 = AtomicU64::new(0);

fn lock_within(ns: u64) -> Option<std::sync::MutexGuard<'static, Vec<(u64, Job)>>> {
    let t0 = sys::now_nanos();
    loop {
        match QUEUE.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        if sys::now_nanos().saturating_sub(t0) > ns {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// At a memory_limit error, on the PHP thread (see the module comment).
pub fn oom(info: &PhpOom) {
    let _busy = guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    if crate::hot::forking::inert() || crate::background::dump::FINISHING.load(SeqCst) {
        return;
    }
    let mut snap = Snapshot::new();
    snap.take();
    let job = Job::Oom {
        snap,
        message: text(info.message),
        file: text(info.file),
        line: info.line,
        request: text(info.request),
    };
    let id = NEXT.fetch_add(1, Relaxed);
    match lock_within(LOCK_NS) {
        Some(mut q) => q.push((id, job)),
        None => return write_job(job),
    }
    trigger::ensure_dumper();
    trigger::wake_dumper();
    let t0 = sys::now_nanos();
    while DONE.load(Acquire) < id {
        if sys::now_nanos().saturating_sub(t0) > WAIT_NS {
            // Take it back if heaplive's thread has not started it.
            let mine = lock_within(LOCK_NS).and_then(|mut q| {
                let i = q.iter().position(|(n, _)| *n == id)?;
                Some(q.remove(i).1)
            });
            if let Some(job) = mine {
                write_job(job);
                return;
            }
            // Started: it ends soon.
            if DONE.load(Acquire) >= id || sys::now_nanos().saturating_sub(t0) > 6 * WAIT_NS {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// At the end of a request whose peak reached the threshold, on the PHP
/// thread: copies the stacks at the peak and queues their dump.
pub fn request_peak(request: &[u8], peak: i64) {
    let _busy = guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    if crate::hot::forking::inert() {
        return;
    }
    let mut v = Vec::new();
    for id in 1..stacks::count() {
        if let Some(s) = stacks::slot(id) {
            let b = s.request_peak_bytes.load(Relaxed);
            if b > 0 {
                v.push((id, b, s.request_peak_milliblocks.load(Relaxed)));
            }
        }
    }
    let job = Job::Peak {
        stacks: v,
        request: text(request),
        peak,
    };
    let id = NEXT.fetch_add(1, Relaxed);
    if let Some(mut q) = lock_within(LOCK_NS) {
        q.push((id, job));
    } else {
        return;
    }
    trigger::ensure_dumper();
    trigger::wake_dumper();
}

/// On heaplive's thread: writes the queued jobs.
pub fn serve() {
    loop {
        let job = {
            let Some(mut q) = lock_within(LOCK_NS) else {
                return;
            };
            if q.is_empty() {
                return;
            }
            q.remove(0)
        };
        let (id, job) = job;
        write_job(job);
        DONE.fetch_max(id, Release);
    }
}

fn kind() -> &'static str {
    if config::get().interval > 1 {
        "estimate"
    } else {
        "exact"
    }
}

fn write_job(job: Job) {
    let _busy = guard::Busy::enter();
    let pid = sys::getpid();
    let mut st = DUMP.lock();
    let r = match &job {
        Job::Oom {
            snap,
            message,
            file,
            line,
            request,
        } => write_view(
            &mut st,
            Which::Live(&snap.entries),
            snap,
            None,
            "memory_limit",
            &|_, p| {
                let (top, frames) = top_stack(p);
                format!(
                    "PHP \"{}\" in {}:{}{}; top stack {}: {}; ",
                    message,
                    file,
                    line,
                    if request.is_empty() {
                        String::new()
                    } else {
                        format!(", request {request}")
                    },
                    log::human_bytes(top as f64),
                    if frames.is_empty() { "-" } else { &frames },
                )
            },
        ),
        Job::Peak {
            stacks,
            request,
            peak,
        } => {
            let snap = Snapshot {
                entries: Vec::new(),
                took_ns: 0,
                complete: true,
            };
            write_view(
                &mut st,
                Which::Stacks(stacks),
                &snap,
                None,
                "request peak",
                &|_, p| {
                    let (top, frames) = top_stack(p);
                    format!(
                        "{} peaked at {} ZendMM live ({}); top stack {}: {}; ",
                        if request.is_empty() {
                            "[request]"
                        } else {
                            request
                        },
                        log::human_bytes(*peak as f64),
                        kind(),
                        log::human_bytes(top as f64),
                        if frames.is_empty() { "-" } else { &frames },
                    )
                },
            )
        }
    };
    if let Err(e) = r {
        log::line(format_args!(
            "heaplive[{}]: {} dump failed: {}",
            pid,
            match job {
                Job::Oom { .. } => "memory_limit",
                Job::Peak { .. } => "request peak",
            },
            e
        ));
    }
}

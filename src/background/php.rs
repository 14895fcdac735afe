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
//! stuck), the PHP thread takes its job back and writes it itself. Without
//! heaplive's thread (HEAPLIVE_SIGNAL=none and nothing else that needs it,
//! `hot::trigger::thread_wanted`) the PHP thread writes it at once: no
//! thread is started for it.
//!
//! A request's peak (`request_peak`, at request end): the stacks at the
//! peak are in the stack records' `request_peak_*` fields (`hot::php`); they
//! are copied out here, on the PHP thread, and written by heaplive's thread
//! without waiting (the next request may copy over the fields); it starts
//! heaplive's thread if nothing did (HEAPLIVE_PHP_PEAK_BYTES is a feature
//! that needs it).

use crate::background::dump::{
    DUMP, REQUEST_PEAK, Snapshot, Which, top_stack, write_queued, write_view,
};
use crate::hot::services::PhpOom;
use crate::hot::{config, guard, log, stacks, sys, trigger};
use core::cell::UnsafeCell;
use heaplive_format::php_frames;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

/// How long the PHP thread waits for heaplive's thread to write the
/// memory_limit dump before writing it itself.
const WAIT_NS: u64 = 10_000_000_000;
/// How long a thread tries for the job queue's flag (held only for a push
/// or a pop).
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
        stacks: Vec<(stacks::StackId, i64, i64, i64)>,
        request: String,
        peak: i64,
    },
}

/// The jobs for heaplive's thread, behind a flag of our own (not a std
/// Mutex): a fork's child resets it (`reset_after_fork`), whoever held it
/// in the parent.
struct Queue {
    busy: crate::hot::lock::SpinLock<()>,
    jobs: UnsafeCell<Vec<(u64, Job)>>,
}

// SAFETY: `jobs` is only touched by the holder of `busy`.
unsafe impl Sync for Queue {}

static QUEUE: Queue = Queue {
    busy: crate::hot::lock::SpinLock::new(crate::hot::lock::Rank::PhpJobs, ()),
    jobs: UnsafeCell::new(Vec::new()),
};
/// Jobs queued and not yet taken (heaplive's thread looks at this first).
static QUEUED: AtomicUsize = AtomicUsize::new(0);
/// Numbers of the jobs queued and of the last memory_limit job written.
static NEXT: AtomicU64 = AtomicU64::new(1);
static DONE: AtomicU64 = AtomicU64::new(0);

/// Runs `f` on the queue, trying for the flag for up to `ns` (it is held
/// only for a push or a pop); None if it could not be had.
fn with_queue<R>(ns: u64, f: impl FnOnce(&mut Vec<(u64, Job)>) -> R) -> Option<R> {
    let held = QUEUE.busy.lock_within(ns)?;
    // SAFETY: we hold `busy`.
    let r = f(unsafe { &mut *QUEUE.jobs.get() });
    drop(held);
    Some(r)
}

/// In a fork's child: the parent's jobs are not ours (forgotten, not
/// freed: the parent may have been changing the list), and the flag is
/// free (the child has no other thread).
pub fn reset_after_fork() {
    // SAFETY: a child on its only thread.
    unsafe { QUEUE.busy.unlock_raw() };
    let _ = with_queue(0, |q| std::mem::forget(std::mem::take(q)));
    QUEUED.store(0, Relaxed);
    WRITING.store(0, Relaxed);
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
    if trigger::thread_wanted() {
        trigger::ensure_dumper();
    }
    if !trigger::dumper_running() {
        // No thread of ours (HEAPLIVE_SIGNAL=none and nothing else that
        // needs one: the process stays single-threaded for glibc): this
        // thread writes the dump, as when heaplive's thread does not answer.
        return write_job(job);
    }
    let id = NEXT.fetch_add(1, Relaxed);
    let mut job = Some(job);
    let queued = with_queue(LOCK_NS, |q| {
        if let Some(j) = job.take() {
            q.push((id, j));
            QUEUED.fetch_add(1, Release);
        }
    });
    if queued.is_none()
        && let Some(j) = job
    {
        return write_job(j);
    }
    trigger::wake_dumper();
    let t0 = sys::now_nanos();
    while DONE.load(Acquire) < id {
        if sys::now_nanos().saturating_sub(t0) > WAIT_NS {
            // Take it back if heaplive's thread has not started it.
            let mine = with_queue(LOCK_NS, |q| {
                let i = q.iter().position(|(n, _)| *n == id)?;
                QUEUED.fetch_sub(1, Relaxed);
                Some(q.remove(i).1)
            })
            .flatten();
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
            let (b, m, var) = s.request_peak();
            if b > 0 {
                v.push((id, b, m, var));
            }
        }
    }
    let job = Job::Peak {
        stacks: v,
        request: text(request),
        peak,
    };
    let id = NEXT.fetch_add(1, Relaxed);
    let queued = with_queue(LOCK_NS, |q| {
        q.push((id, job));
        QUEUED.fetch_add(1, Release);
    });
    if queued.is_none() {
        return;
    }
    trigger::ensure_dumper();
    trigger::wake_dumper();
}

/// Jobs taken from the queue and not yet written.
static WRITING: AtomicUsize = AtomicUsize::new(0);

/// On heaplive's thread: writes the queued jobs.
pub fn serve() {
    while QUEUED.load(Acquire) > 0 {
        let Some(Some((id, job))) = with_queue(LOCK_NS, |q| {
            if q.is_empty() {
                return None;
            }
            WRITING.fetch_add(1, Relaxed);
            QUEUED.fetch_sub(1, Relaxed);
            Some(q.remove(0))
        }) else {
            return;
        };
        write_job(job);
        DONE.fetch_max(id, Release);
        WRITING.fetch_sub(1, Release);
    }
}

/// At exit, before the exit dump: the jobs still queued are written by the
/// exiting thread, and one heaplive's thread has in hand is waited for (up
/// to `WAIT_NS`). A php-fpm worker recycled by `pm.max_requests` exits
/// right after its last request: its request-peak dump was queued for a
/// thread that the exit is about to end.
pub fn finish_at_exit() {
    serve();
    let t0 = sys::now_nanos();
    while WRITING.load(Acquire) > 0 && sys::now_nanos().saturating_sub(t0) < WAIT_NS {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn kind() -> &'static str {
    if config::get().interval > 1 {
        "estimate"
    } else {
        "exact"
    }
}

/// The stacks of `p` as PHP's lines name them (`format::php_frames`, the
/// fold `heaplive top --php` shows, so the sizes agree with its rows):
/// `top stack 13.0 MiB: a <- b <- c <- d; application frame parse_all
/// (parse.php:24) holds 9.1 MiB (71%)`. A stack with no PHP code is named by
/// its first native frames, as before.
fn top_text(p: &crate::background::profile::Profile) -> String {
    let sum = php_frames::summarize(p.samples.iter().map(|s| {
        let frames = s
            .locations
            .iter()
            .rev()
            .filter_map(|&i| p.locations.get(i))
            .flat_map(|l| l.frames.iter().rev().map(|f| f.function.as_str()));
        (frames, s.bytes)
    }));
    let frames = if sum.top_key.starts_with(php_frames::NO_PHP_CODE) {
        let (_, native) = top_stack(p);
        format!("{} ({native})", php_frames::NO_PHP_CODE)
    } else {
        php_frames::innermost_text(&sum.top_key, 4)
    };
    let mut t = format!(
        "top stack {}: {}",
        log::human_bytes(sum.top_bytes as f64),
        if frames.is_empty() { "-" } else { &frames }
    );
    match &sum.app_frame {
        Some(a) => {
            t += &format!(
                "; application frame {a} holds {} ({:.0}%)",
                log::human_bytes(sum.app_bytes as f64),
                100.0 * sum.app_bytes as f64 / sum.total.max(1) as f64
            )
        }
        None if !sum.top_key.starts_with(php_frames::NO_PHP_CODE) => {
            t += "; no application frame (every PHP frame is a library's: HEAPLIVE_PHP_LIBRARY)"
        }
        None => {}
    }
    t
}

/// The memory_limit line's words on the ZendMM estimate: its 95% interval,
/// and whether an estimate above the limit is sampling error (the limit
/// inside the interval). Empty in exact mode or with no ZendMM stack.
fn zend_mm_against_limit(p: &crate::background::profile::Profile, message: &str) -> String {
    if config::get().interval <= 1 {
        return String::new();
    }
    let (mut bytes, mut variance) = (0.0, 0.0);
    for s in &p.samples {
        let leaf = s
            .locations
            .first()
            .and_then(|&i| p.locations.get(i))
            .and_then(|l| l.frames.last());
        if leaf.is_some_and(|f| f.function == "[zend_mm]") {
            bytes += s.bytes as f64;
            variance += s.variance;
        }
    }
    if bytes <= 0.0 {
        return String::new();
    }
    let (lo, hi) = heaplive_format::stats::interval95(bytes, variance);
    let limit = limit_of(message);
    let verdict = match limit {
        Some(l) if bytes > l as f64 && lo <= l as f64 => {
            " (above the limit by sampling error: the limit is inside the interval)"
        }
        _ => "",
    };
    format!(
        "ZendMM {} (estimate, 95% {}..{}){verdict}; ",
        log::human_bytes(bytes),
        log::human_bytes(lo),
        log::human_bytes(hi)
    )
}

/// The limit in PHP's message "Allowed memory size of N bytes exhausted".
fn limit_of(message: &str) -> Option<u64> {
    message
        .split_once("Allowed memory size of ")?
        .1
        .split_once(' ')?
        .0
        .parse()
        .ok()
}

fn write_job(job: Job) {
    let _busy = guard::Busy::enter();
    let pid = sys::getpid();
    let mut st = DUMP.lock();
    // Signal dumps snapshotted before this one are written first (as
    // `dump::dump_snapshot` does).
    if let Job::Oom { snap, .. } = &job {
        write_queued(&mut st, snap.at_ns);
    }
    let r = match &job {
        Job::Oom {
            snap,
            message,
            file,
            line,
            request,
        } => write_view(
            &mut st,
            Which::Live(&snap.stacks),
            snap,
            None,
            "memory_limit",
            &|_, p| {
                format!(
                    "PHP \"{}\" in {}:{}{}; {}; {}",
                    message,
                    file,
                    line,
                    if request.is_empty() {
                        String::new()
                    } else {
                        format!(", request {request}")
                    },
                    top_text(p),
                    zend_mm_against_limit(p, message),
                )
            },
        ),
        Job::Peak {
            stacks,
            request,
            peak,
        } => {
            let snap = Snapshot {
                stacks: Vec::new(),
                at_ns: sys::now_nanos(),
                took_ns: 0,
                complete: true,
                sizes: None,
            };
            write_view(
                &mut st,
                Which::Stacks(stacks),
                &snap,
                None,
                REQUEST_PEAK,
                &|_, p| {
                    format!(
                        "{} peaked at {} ZendMM live ({}); {}; ",
                        if request.is_empty() {
                            "[request]"
                        } else {
                            request
                        },
                        log::human_bytes(*peak as f64),
                        kind(),
                        top_text(p),
                    )
                },
            )
        }
    };
    write_queued(&mut st, u64::MAX);
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

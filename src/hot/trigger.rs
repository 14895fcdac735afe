//! Dump requests from places that may not allocate or lock, and heaplive's
//! thread: when it is needed, which process and thread it is, and how to
//! wake it.
//!
//! The rule (stated here once; src/README.md and the rest refer to it):
//! heaplive's thread is started only when a feature that needs it is on or
//! due, never at load (`thread_wanted`): the dump signal (HEAPLIVE_SIGNAL,
//! on by default: the signal is blocked in every program thread and taken
//! by heaplive's thread with sigtimedwait, so no program call is
//! interrupted), periodic dumps, peak dumps, attach mode; these start it at
//! the first sample (periodic dumps and attach at start-up). Otherwise it
//! starts only when something needs it: a leak warning that is due
//! (`hot::leak_check`) or a PHP request peak dump (HEAPLIVE_PHP_PEAK_BYTES);
//! after a fork or a change of credentials it comes back only if it ran
//! before. Once it runs glibc reads
//! `__libc_single_threaded` = 0 for good, and takes its multi-threaded
//! paths (bench/RESULTS.md measures the cost). With HEAPLIVE_SIGNAL=none
//! and nothing else on, a program that creates no thread stays
//! single-threaded: the exit dump, `heaplive_dump()` and a PHP memory_limit
//! dump run on the program's thread, and the sampling thread prunes the
//! shadow bitmap (`hot::shadow::prune_if_due`).
//!
//! A dump signal that arrives before the thread exists stays pending (it is
//! blocked in every program thread, and no thread of the program is
//! interrupted for it); the thread that starts heaplive's (the first
//! sample, before recording it) takes it and copies the live table at
//! once, and heaplive's thread writes that dump first; or the exit (or
//! exec) takes it and writes that dump first. So the dump shows what the
//! heap held at the signal (nothing sampled yet), written late.

use crate::hot::{pid, services, signal, sys};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering::*};

/// The pid whose dumper thread is running.
static DUMPER_PID: AtomicU32 = AtomicU32::new(0);
/// Its thread id.
static DUMPER_TID: AtomicI32 = AtomicI32::new(0);
/// A dump request that found no thread to wake.
static PENDING: AtomicBool = AtomicBool::new(false);
/// The main thread called pthread_exit: heaplive's thread must not be the
/// one that keeps the process alive.
static MAIN_EXITED: AtomicBool = AtomicBool::new(false);

/// Whether a feature that needs heaplive's thread from the first sample on
/// is on: the dump signal, periodic dumps, peak dumps, attach mode. (A due
/// leak warning and a PHP request peak dump start it when they come.)
/// Cheap: a few loads.
#[inline]
pub fn thread_wanted() -> bool {
    signal::signal() != 0 || crate::hot::attach::attached() || {
        let c = crate::hot::config::get();
        c.dump_every_ms > 0 || c.peak_growth > 0.0
    }
}

/// At a sample: starts heaplive's thread if a feature wants it from the
/// first sample on (`thread_wanted`).
#[inline]
pub fn ensure_dumper_if_wanted() {
    if thread_wanted() {
        ensure_dumper();
    }
}

/// Whether this process's dumper thread was started (it may still be
/// starting up).
#[inline]
pub fn dumper_running() -> bool {
    DUMPER_PID.load(Acquire) == pid::get()
}

/// Starts this process's dumper thread unless it runs already. Cheap when
/// it does: two loads.
#[inline]
pub fn ensure_dumper() {
    let pid = pid::get();
    if DUMPER_PID.load(Acquire) != pid
        && !crate::hot::forking::inert()
        && !crate::hot::attach::detached()
        && let Some(s) = services::get()
        && !called_from_the_loader()
    {
        (s.start_dumper)(pid);
    }
}

/// Whether the allocation (or call) that wants the thread comes straight
/// from the dynamic loader: ld.so's own malloc in the middle of a `dlopen`
/// (mapping a library and its dependencies, its lists half built).
/// `pthread_create` there would set up the new thread's TLS from the
/// loader's half-updated module lists; the thread starts at the next
/// sample instead (a pending dump signal waits until then, as before the
/// first sample). Only on the path that starts the thread: one capture.
#[cold]
fn called_from_the_loader() -> bool {
    let (lo, hi) = loader_range();
    if lo == hi {
        return false;
    }
    let mut buf = [0usize; crate::hot::stacks::MAX_FRAMES];
    let n = crate::hot::stacks::capture(&mut buf);
    n > 0 && buf[0] >= lo && buf[0] < hi
}

/// ld.so's text, from the auxiliary vector's AT_BASE and its program
/// headers (read in memory: no call into the loader); an empty range when
/// there is none (a static program, or ld.so run as the program).
fn loader_range() -> (usize, usize) {
    static LO: AtomicUsize = AtomicUsize::new(1);
    static HI: AtomicUsize = AtomicUsize::new(0);
    if LO.load(Acquire) != 1 {
        return (LO.load(Acquire), HI.load(Acquire));
    }
    // SAFETY: getauxval reads the saved auxiliary vector.
    let base = unsafe { libc::getauxval(libc::AT_BASE) } as usize;
    let eh = base as *const libc::Elf64_Ehdr;
    // SAFETY: AT_BASE is where ld.so's ELF header is mapped (with its
    // program headers, read-only, for the life of the process).
    let (lo, hi) = if base != 0 && unsafe { (&(*eh).e_ident)[..4] == *b"\x7fELF" } {
        // SAFETY: as above.
        unsafe { crate::hot::stacks::text_range(eh) }
    } else {
        (0, 0)
    };
    let (lo, hi) = if lo < hi { (lo, hi) } else { (0, 0) };
    HI.store(hi, Release);
    LO.store(lo, Release);
    (lo, hi)
}

/// Claims the dumper role for `pid`: false if it was claimed already.
pub fn claim_dumper(pid: u32) -> bool {
    DUMPER_PID.swap(pid, AcqRel) != pid
}

/// The pid whose dumper thread runs (0: none yet).
pub fn dumper_pid() -> u32 {
    DUMPER_PID.load(Acquire)
}

/// Called by the dumper thread when it starts.
pub fn set_dumper_tid(tid: i32) {
    DUMPER_TID.store(tid, Release);
}

/// The dumper thread of this process, if it runs.
pub fn dumper_tid() -> Option<i32> {
    let tid = DUMPER_TID.load(Acquire);
    (tid > 0 && DUMPER_PID.load(Acquire) == pid::get()).then_some(tid)
}

/// Asked to end (credentials are about to change).
static STOP: AtomicBool = AtomicBool::new(false);

/// The dumper thread ended: the next need starts another.
pub fn dumper_gone() {
    if DUMPER_TID.swap(0, AcqRel) == sys::gettid() {
        STOP.store(false, Release);
        DUMPER_PID.store(0, Release);
    }
}

pub fn ask_stop() {
    STOP.store(true, Release);
}

pub fn stop_asked() -> bool {
    STOP.load(Acquire)
}

/// Wakes the dumper thread (async-signal-safe): heaplive's own signal, or
/// nothing when it waits for no signal (it then looks within 250 ms).
pub fn wake_dumper() -> bool {
    let Some(tid) = dumper_tid() else {
        return false;
    };
    if signal::dumper_wait_set() == 0 {
        return false;
    }
    sys::tgsigqueueinfo(tid, signal::signal(), &signal::wake_info()) == 0
}

/// Asks for a dump from a signal handler on a program thread:
/// async-signal-safe, errno kept.
pub fn request_from_signal() {
    let saved = sys::errno();
    // A child made by _Fork or vfork (no fork handlers ran) still has its
    // parent's pid here: a request from it is not the parent's.
    if sys::getpid() == pid::get() {
        PENDING.store(true, Release);
        wake_dumper();
    }
    sys::set_errno(saved);
}

/// Takes a request that found no thread to wake.
pub fn take_pending() -> bool {
    PENDING.swap(false, AcqRel)
}

/// The main thread is leaving with pthread_exit.
pub fn main_exits() {
    MAIN_EXITED.store(true, Release);
    wake_dumper();
}

pub fn main_exited() -> bool {
    MAIN_EXITED.load(Acquire)
}

/// Set with a request made by `request_peak_dump`: the dumper's next dump
/// is a peak dump.
static PEAK_REQUEST: AtomicBool = AtomicBool::new(false);

/// Asks the dumper for a peak dump (the live total passed the threshold),
/// on an allocation's slow path.
pub fn request_peak_dump() {
    PEAK_REQUEST.store(true, Release);
    wake_dumper();
}

/// Whether a peak dump was asked for (and forget the request).
pub fn take_peak_request() -> bool {
    PEAK_REQUEST.swap(false, AcqRel)
}

/// A start or stop command carried by the dump signal's `info`
/// (`heaplive start/stop PID` send it with sigqueue and one of
/// `heaplive_format::signal::SIGVAL_*`)? Applies it. Async-signal-safe
/// (reads the siginfo, stores atomics).
pub fn command_from_signal(info: *const libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the kernel's siginfo for this signal.
    let (code, value) = unsafe {
        (
            (*info).si_code,
            (*info).si_value().sival_ptr as usize as i32,
        )
    };
    if code != libc::SI_QUEUE {
        return false;
    }
    match value {
        heaplive_format::signal::SIGVAL_START => {
            crate::hot::track::set_active(true, true);
        }
        heaplive_format::signal::SIGVAL_STOP => {
            crate::hot::track::set_active(false, true);
        }
        _ => return false,
    }
    true
}

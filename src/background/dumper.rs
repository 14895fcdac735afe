//! heaplive's thread: it takes the dump signal (blocked in every program
//! thread, see `hot::signal`) with sigtimedwait, snapshots the live table at
//! once, gives the signal to the program's handler if it has one, then
//! writes the dump (a signal the program sent itself is no dump request:
//! `signal::deliver_own`); periodic dumps, leak warnings, bitmap pruning. Also the
//! dump before an exec and at exit, and `heaplive_dump()`'s dump (those run
//! on the calling thread). The thread starts only when a feature needs it
//! (`hot::trigger::thread_wanted`); without it the sampling threads prune
//! the bitmap (`hot::shadow::prune_if_due`).
//!
//! No descriptor of its own: the signal itself wakes it (and heaplive's
//! own wake-ups are that signal with a marker, `signal::wake_info`), so a
//! program that closes or reuses descriptors cannot take its requests.

use crate::background::dump::{
    DUMP, STARTED_NS, Snapshot, dump, dump_locked, write_locked, write_queued,
};
use crate::background::{leak_report, output};
use crate::hot::{config, guard, log, pid, signal, sys, trigger};
use std::path::PathBuf;
use std::sync::atomic::Ordering::*;

/// While a dump is built, heaplive's thread looks for dump signals at most
/// this often (one `sigtimedwait` with a zero timeout).
const POLL_EVERY_NS: u64 = 1_000_000;
/// Snapshots waiting to be written at most; a signal beyond that replaces
/// the newest one (the kernel coalesces a signal that is already pending
/// the same way: one dump for both, taken after both arrived).
const MAX_QUEUED: usize = 4;

/// How often the dumper prunes the shadow bitmap (empty leaves, stale page
/// summaries).
const PRUNE_EVERY_NS: u64 = crate::hot::shadow::PRUNE_EVERY_NS;
/// The longest the thread sleeps between looks at leak warnings and exits.
const TICK_NS: u64 = 250_000_000;

/// The dumper's pthread (joinable: `stop_dumper` waits for it).
static THREAD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Ends the dumper thread and waits until it is gone; true if one ran.
/// Around a change of credentials: glibc makes every thread of the process
/// change them, and heaplive's thread lacks the per-thread state
/// (capabilities, PR_SET_KEEPCAPS) that the program set on its own thread
/// for the change, so it fails there and glibc aborts the process. A thread
/// started after the change inherits the new credentials.
pub fn stop_dumper() -> bool {
    if sys::getpid() != pid::get()
        || trigger::dumper_pid() != pid::get()
        || trigger::dumper_tid() == Some(sys::gettid())
    {
        return false;
    }
    let t = THREAD.swap(0, AcqRel);
    if t == 0 {
        return false;
    }
    let _busy = guard::Busy::enter();
    trigger::ask_stop();
    trigger::wake_dumper();
    // SAFETY: the dumper's joinable pthread, joined once (swap).
    unsafe { libc::pthread_join(t as libc::pthread_t, core::ptr::null_mut()) };
    true
}

/// Notes when the profile started (pprof's duration, the exit's "peak ...
/// after start"), once: at start-up, or at the latest when heaplive's
/// thread starts. Not only with the thread: a process may never start it
/// (`hot::trigger::thread_wanted`).
pub fn note_start() {
    let _ = STARTED_NS.compare_exchange(0, sys::now_nanos(), Relaxed, Relaxed);
}

/// Starts the dumper thread of `pid` (this process) unless it was started.
#[cold]
pub fn start_dumper(pid: u32) {
    if !trigger::claim_dumper(pid) {
        return;
    }
    let _busy = guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    // Before the caller goes on (the first sample is recorded after this
    // returns): a dump signal that waited for the thread is snapshotted
    // now, on this thread, so its dump shows the heap at the signal.
    take_early_signal();
    note_start();
    // The thread starts with every signal blocked (glibc's own two
    // excepted: setuid must reach every thread), so signals meant for the
    // program never land on it; it takes the dump signal with sigtimedwait.
    let mut old = 0u64;
    sys::sigmask(libc::SIG_SETMASK, Some(!0), Some(&mut old));
    // A raw pthread: the thread must mark itself as the library's before
    // anything runs on it (Rust's own thread start allocates).
    // SAFETY: attr is initialised before use and destroyed after.
    let err = unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstacksize(&mut attr, 512 * 1024);
        let mut tid: libc::pthread_t = 0;
        crate::hot::forking::before_own_thread();
        let e = crate::hot::threads::create_raw(&mut tid, &attr, dumper_start);
        libc::pthread_attr_destroy(&mut attr);
        if e == 0 {
            THREAD.store(tid as usize, Release);
        }
        e
    };
    sys::sigmask(libc::SIG_SETMASK, Some(old), None);
    if err != 0 {
        log::line(format_args!(
            "heaplive[{}]: cannot start the dump thread ({}); signal and periodic dumps are off",
            pid,
            sys::errno_text(err)
        ));
    }
}

extern "C" fn dumper_start(_: *mut libc::c_void) -> *mut libc::c_void {
    // This thread is the library's own: nothing it does is profiled.
    // SAFETY: this thread's own state.
    unsafe {
        let st = guard::state();
        (*st).busy = 1;
        (*st).heaplive_thread = 1;
    }
    trigger::set_dumper_tid(sys::gettid());
    // SAFETY: a name for tools like top; the string is NUL-terminated.
    unsafe { libc::pthread_setname_np(libc::pthread_self(), c"heaplive".as_ptr()) };
    let sig = config::get().signal;
    if sig != libc::SIGUSR2 && !crate::hot::attach::attached() {
        output::write_start_status(sys::getpid(), sig);
    }
    dumper_main();
    if crate::hot::attach::detached() {
        // `heaplive detach` (whichever check ended the loop).
        output::remove_status(sys::getpid());
    }
    trigger::dumper_gone();
    // Returning ends the thread; when it is the process's last, glibc
    // calls exit(0) here, as the program's last thread would have.
    core::ptr::null_mut()
}

/// Serves one dump request that came with the signal `info` (None: a
/// request without one): snapshot first, then (holding the dump lock, so
/// an exec the handler starts waits for the file) the program's handler,
/// then the file.
fn serve_signal(snap: &mut Snapshot, info: Option<&mut libc::siginfo_t>) {
    snap.take();
    let mut st = DUMP.lock();
    if let Some(info) = info {
        signal::deliver_to_program(info);
    }
    if let Err(e) = write_locked(&mut st, snap, None, "signal") {
        log::line(format_args!(
            "heaplive[{}]: signal dump failed: {}",
            sys::getpid(),
            e
        ));
    }
    snap.release();
    write_queued(&mut st, u64::MAX);
}

/// A dump signal that was pending when heaplive's thread was started, with
/// its snapshot (see `take_early_signal`); None: a signal of the
/// program's own, for its handler only.
struct Early {
    snap: Option<Snapshot>,
    info: libc::siginfo_t,
}

static EARLY: std::sync::atomic::AtomicPtr<Early> =
    std::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// heaplive's thread is being started (by the first sample, on the
/// sampling thread, before that sample is recorded): a dump signal sent
/// before it existed is pending, blocked in every program thread. Take it
/// here (one `sigtimedwait` with a zero timeout, once per start) and copy
/// the live table now, so the dump that the new thread writes shows the
/// heap as it was at the signal, not what the first samples added since.
fn take_early_signal() {
    if !EARLY.load(Acquire).is_null() {
        return;
    }
    loop {
        let (info, snap) = match take_signal(Some(0)) {
            Taken::Nothing => return,
            Taken::NoDump => continue,
            Taken::Own(info) => (info, None),
            Taken::Dump(info) => {
                let mut snap = Snapshot::new();
                snap.take();
                (info, Some(snap))
            }
        };
        let early = Box::into_raw(Box::new(Early { snap, info }));
        if EARLY
            .compare_exchange(core::ptr::null_mut(), early, AcqRel, Acquire)
            .is_err()
        {
            // SAFETY: ours, never published.
            drop(unsafe { Box::from_raw(early) });
        }
        return;
    }
}

/// Writes the dump of a signal taken by `take_early_signal`, if one
/// waits (after giving the signal to the program's handler, as
/// `serve_signal`). Under the dump lock.
pub fn write_early(st: &mut crate::background::dump::DumpState) {
    let p = EARLY.swap(core::ptr::null_mut(), AcqRel);
    if p.is_null() {
        return;
    }
    // SAFETY: published by `take_early_signal`, taken once (swap).
    let mut early = unsafe { Box::from_raw(p) };
    let Some(snap) = early.snap.as_ref() else {
        signal::deliver_own(&mut early.info);
        return;
    };
    signal::deliver_to_program(&mut early.info);
    if let Err(e) = write_locked(st, snap, None, "signal") {
        log::line(format_args!(
            "heaplive[{}]: signal dump failed: {}",
            sys::getpid(),
            e
        ));
    }
}

/// In a forked child: a signal the parent took is the parent's.
pub fn forget_early() {
    let p = EARLY.swap(core::ptr::null_mut(), AcqRel);
    if !p.is_null() {
        // SAFETY: as in `write_early`.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// When heaplive's thread last looked for dump signals mid-dump.
static LAST_POLL_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Called between the steps of building a dump (each stack, each step of
/// loading a library's debug information): on heaplive's thread, takes the
/// dump signals that arrived meanwhile, snapshots the live table for each
/// at once (queued in `queue`, written after the dump in progress) and
/// gives each to the program's handler. So a signal that arrives while a
/// dump is symbolized is snapshotted within one such step, not after the
/// whole dump. Elsewhere (a program thread in `heaplive_dump()`, at exit)
/// it does nothing: heaplive's thread is free to take signals itself.
pub fn poll_signals(queue: &mut std::collections::VecDeque<Snapshot>) {
    if sys::now_nanos().saturating_sub(LAST_POLL_NS.load(Relaxed)) >= POLL_EVERY_NS {
        poll_signals_now(queue);
    }
}

/// `poll_signals` without the rate limit: last thing before a dump counts
/// as written (its status file), so a signal that arrived before that is
/// never left for after it.
pub fn poll_signals_now(queue: &mut std::collections::VecDeque<Snapshot>) {
    // SAFETY: this thread's own state.
    if unsafe { (*guard::state()).heaplive_thread } == 0 {
        return;
    }
    LAST_POLL_NS.store(sys::now_nanos(), Relaxed);
    loop {
        // A wake-up (a request or a change) or a command: the loop looks
        // at every flag after this dump.
        let mut info = match take_signal(Some(0)) {
            Taken::Nothing => return,
            Taken::NoDump => continue,
            Taken::Own(mut info) => {
                signal::deliver_own(&mut info);
                continue;
            }
            Taken::Dump(info) => info,
        };
        // The snapshot outlives the scratch heap of the symbolizer, and the
        // program's handler is not symbolizer work either.
        let _kept = crate::hot::ownheap::ScratchPaused::enter();
        if queue.len() >= MAX_QUEUED {
            if let Some(last) = queue.back_mut() {
                last.take();
            }
        } else {
            let mut snap = Snapshot::new();
            snap.take();
            queue.push_back(snap);
        }
        signal::deliver_to_program(&mut info);
    }
}

fn dumper_main() {
    let my_pid = sys::getpid();
    let cfg = config::get();
    let every_ns = cfg.dump_every_ms.saturating_mul(1_000_000);
    let mut next_periodic = if every_ns > 0 {
        sys::now_nanos().saturating_add(every_ns)
    } else {
        u64::MAX
    };
    let mut next_prune = sys::now_nanos() + PRUNE_EVERY_NS;
    let mut snap = Snapshot::new();
    // A signal that waited for this thread (its snapshot is taken).
    write_queued(&mut DUMP.lock(), u64::MAX);
    loop {
        if pid::get() != my_pid || trigger::dumper_pid() != my_pid || trigger::stop_asked() {
            // A forked child copied us mid-flight (the child has its own),
            // or credentials are about to change.
            return;
        }
        if crate::hot::attach::detached() {
            // `heaplive detach`: no more dumps from this process.
            output::remove_status(my_pid);
            return;
        }
        if trigger::main_exited() && !program_threads_left() {
            return;
        }
        // A library dlopen'ed since may have brought libgcc_s (JIT frames
        // registered with it are only found there).
        crate::hot::unwind::find_system_libgcc();
        if trigger::take_pending() {
            serve_signal(&mut snap, None);
        }
        if crate::hot::track::take_signal_change() {
            let on = crate::hot::track::active();
            log::line(format_args!(
                "heaplive[{}]: sampling {} (heaplive {})",
                my_pid,
                if on { "started" } else { "stopped" },
                if on { "start" } else { "stop" },
            ));
        }
        // PHP mode: memory_limit and request peak dumps (a wake-up for
        // them comes back here).
        crate::background::php::serve();
        let now = sys::now_nanos();
        let wait = next_periodic.min(now + TICK_NS).saturating_sub(now).max(1);
        if trigger::stop_asked() {
            return;
        }
        match take_signal(Some(wait)) {
            Taken::Dump(mut info) => serve_signal(&mut snap, Some(&mut info)),
            // The program's own signal: its handler, or its default action.
            Taken::Own(mut info) => signal::deliver_own(&mut info),
            // heaplive's own wake-up: a request from a program thread, a
            // change (stepped aside, main thread gone), or a start/stop
            // command: all looked at at the top of the loop.
            Taken::NoDump => continue,
            Taken::Nothing => {}
        }
        if trigger::take_peak_request() {
            // The next peak dump is armed from this dump's own total.
            snap.take();
            let total =
                crate::background::dump::dump_snapshot(&snap, None, "peak").map_or(0, |w| w.total);
            snap.release();
            crate::hot::peak::arm_peak_dump(total as i64, cfg.peak_growth);
        }
        let now = sys::now_nanos();
        if now >= next_periodic {
            snap.take();
            let _ = crate::background::dump::dump_snapshot(&snap, None, "periodic");
            snap.release();
            next_periodic = sys::now_nanos().saturating_add(every_ns);
        }
        leak_report::report_pending();
        if now >= next_prune {
            let _st = DUMP.lock();
            crate::hot::shadow::prune();
            next_prune = now + PRUNE_EVERY_NS;
        }
    }
}

/// After the main thread's pthread_exit: does any thread of the program
/// (not heaplive's, not a zombie) remain? glibc ends the process when its
/// last thread ends; heaplive's thread must not be the one that keeps it.
fn program_threads_left() -> bool {
    let me = sys::gettid();
    // Not std::fs::read_dir: opendir allocates with glibc's malloc.
    let Some(names) = crate::background::dir::names(std::path::Path::new("/proc/self/task")) else {
        return true;
    };
    for name in names {
        let Some(tid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if tid == me {
            continue;
        }
        let stat =
            std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
        // The state follows the command name's closing parenthesis.
        let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if !matches!(state, Some('Z') | Some('X') | None) {
            return true;
        }
    }
    false
}

/// Called before an exec replaces the image: waits for a dump in progress
/// (by taking the lock) and serves a dump signal no thread has taken yet.
pub fn before_exec() {
    let _busy = guard::Busy::enter();
    let mut st = DUMP.lock();
    write_queued(&mut st, u64::MAX);
    if pending_signal()
        && let Err(e) = dump_locked(&mut st, None, "signal")
    {
        log::line(format_args!(
            "heaplive[{}]: signal dump failed: {}",
            sys::getpid(),
            e
        ));
    }
}

/// Takes a dump signal that is pending for this process (no thread has
/// taken it: heaplive's thread does not exist, or is busy) or a request
/// that found no thread.
fn pending_signal() -> bool {
    let mut any = trigger::take_pending();
    loop {
        match take_signal(Some(0)) {
            Taken::Nothing => return any,
            // The program's own: not a dump (the process is leaving or
            // changing its image).
            Taken::NoDump | Taken::Own(_) => {}
            Taken::Dump(_) => any = true,
        }
    }
}

/// What one look at the dump signal found (`take_signal`).
enum Taken {
    /// No dump signal came (or heaplive no longer takes it).
    Nothing,
    /// heaplive's own wake-up, a `heaplive start/stop PID` command (now
    /// applied), or a signal given back to a program that waits for it.
    NoDump,
    /// A signal the program sent itself (`signal::from_program`): no
    /// dump; the program's disposition applies.
    Own(libc::siginfo_t),
    /// A request for a dump.
    Dump(libc::siginfo_t),
}

/// Takes the dump signal if one comes within `timeout_ns` (`None`: wait
/// for it; with nothing to take, as after stepping aside, the wait is a
/// sleep) and tells what it is. Every place that takes the dump signal
/// goes through here, so a command or a wake-up is never taken for a dump
/// request and a stepped-aside signal always goes back to the program.
fn take_signal(timeout_ns: Option<u64>) -> Taken {
    // SAFETY: zeroed is a valid siginfo.
    let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
    if sys::sigtimedwait(signal::dumper_wait_set(), &mut info, timeout_ns) <= 0 {
        return Taken::Nothing;
    }
    if signal::is_wake(&info)
        || (!signal::from_program(&info) && trigger::command_from_signal(&info))
    {
        return Taken::NoDump;
    }
    if signal::stepped_aside() {
        signal::give_back(&info);
        return Taken::NoDump;
    }
    if signal::from_program(&info) {
        return Taken::Own(info);
    }
    Taken::Dump(info)
}

/// The exit dump, registered with atexit by the constructor (its argument
/// is `__cxa_atexit`'s, unused).
pub extern "C" fn at_exit(_: *mut core::ffi::c_void) {
    if crate::hot::attach::detached() {
        // `heaplive detach`: no exit dump.
        return;
    }
    if crate::hot::forking::inert() {
        // A child forked while heaplive was mid-change: nothing to write,
        // and its own heap may be locked by a thread that is not here.
        return;
    }
    let cfg = config::get();
    let _busy = guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    // Dump signals that arrived and were not served yet come first:
    // snapshots queued during a dump, then a signal no thread took.
    write_queued(&mut DUMP.lock(), u64::MAX);
    if pending_signal() {
        let _ = dump(None, "signal");
    }
    // PHP's request-peak dumps queued and not yet written.
    crate::background::php::finish_at_exit();
    // Nothing is written after the exit dump: queued leak lines go out
    // before it, later ones are only counted, and no signal or periodic
    // dump starts once it has.
    leak_report::report_pending();
    crate::background::dump::FINISHING.store(true, SeqCst);
    let written = if cfg.dump_at_exit {
        dump(None, "exit").ok()
    } else {
        None
    };
    peak_summary(written.as_ref());
    leak_report::exit_summary(written.as_ref());
    if cfg.unwind == heaplive_format::grammar::Unwind::Check {
        use crate::hot::stacks::{UNWIND_COMPARED, UNWIND_DIFFERED, UNWIND_FELL_BACK};
        use core::sync::atomic::Ordering::Relaxed;
        crate::hot::log::line(format_args!(
            "heaplive[{}]: unwind check: {} stacks compared, {} differed, {} done by libgcc alone",
            sys::getpid(),
            UNWIND_COMPARED.load(Relaxed),
            UNWIND_DIFFERED.load(Relaxed),
            UNWIND_FELL_BACK.load(Relaxed)
        ));
        let php = crate::hot::php::PHP_COMPARED.load(Relaxed);
        if php > 0 {
            crate::hot::log::line(format_args!(
                "heaplive[{}]: php frames check: {} walks compared, {} differed",
                sys::getpid(),
                php,
                crate::hot::php::PHP_DIFFERED.load(Relaxed)
            ));
        }
    }
    output::remove_status(sys::getpid());
}

/// At exit, when the live total was higher before than now: one line
/// naming the peak and when it was, and the stacks at the peak
/// (`NAME.peak.folded`). Nothing when the exit total is the peak.
fn peak_summary(written: Option<&crate::background::dump::Written>) {
    let (peak, at) = crate::hot::peak::peak();
    if peak <= 0 || at == 0 || written.is_some_and(|w| w.total >= peak as u64) {
        return;
    }
    let started = STARTED_NS.load(Relaxed);
    let secs = at.saturating_sub(started) as f64 / 1e9;
    let file = written.and_then(|w| w.peak.clone());
    // The stacks file holds the state frozen at the first decline after
    // the highest maximum (`hot::peak`). Only where threads raced at that
    // moment (a decline seen before another thread's allocation raised
    // the maximum) can it be an earlier maximum's: say when it was, then,
    // so that the time of the stacks is not taken for the time of the peak.
    let (copied, copied_at) = crate::hot::peak::copied();
    let copy_note = if copied < peak && copied_at != 0 {
        format!(
            " ({} live at {:.3} s, an earlier maximum)",
            log::human_bytes(copied as f64),
            copied_at.saturating_sub(started) as f64 / 1e9
        )
    } else {
        String::new()
    };
    let kind = if config::get().interval > 1 {
        "estimate"
    } else {
        "exact"
    };
    log::line(format_args!(
        "heaplive[{}]: peak {} live ({}) at {:.3} s after start{}",
        pid::get(),
        log::human_bytes(peak as f64),
        kind,
        secs,
        match file {
            Some(f) => format!("; stacks at the peak{copy_note}: {}", f.display()),
            None => String::new(),
        }
    ));
}

/// `heaplive_dump(path)`: dumps now, to `path` or (None) to the next file of
/// the template. Err carries an errno value.
pub fn dump_now(path: Option<&[u8]>) -> Result<(), i32> {
    let _busy = guard::Busy::enter();
    // The snapshot first: a dump in progress may hold the lock a while.
    let mut snap = Snapshot::new();
    snap.take();
    let explicit = path
        .map(|b| PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b)));
    match crate::background::dump::dump_snapshot(&snap, explicit.as_deref(), "requested") {
        Ok(_) => Ok(()),
        Err(e) => Err(output::errno_of(&e)),
    }
}

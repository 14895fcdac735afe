//! The dumper thread: dump requests from the signal (an eventfd), periodic
//! dumps, leak warnings, bitmap pruning; the dump before an exec and at
//! exit; `heaplive_dump()`'s dump.

use crate::background::dump::{DUMP, STARTED_NS, dump, dump_locked};
use crate::background::{leak_report, output};
use crate::hot::trigger::{self, EVENT_FD};
use crate::hot::{config, log, pid, sys};
use std::path::PathBuf;
use std::sync::atomic::Ordering::*;

/// How often the dumper prunes the shadow bitmap (empty leaves, stale page
/// summaries).
const PRUNE_EVERY_NS: u64 = 1_000_000_000;

/// Starts the dumper thread of `pid` (this process) unless it was started.
#[cold]
pub fn start_dumper(pid: u32) {
    if !trigger::claim_dumper(pid) {
        return;
    }
    let _busy = crate::hot::guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    if STARTED_NS.load(Relaxed) == 0 {
        STARTED_NS.store(sys::now_nanos(), Relaxed);
    }
    // SAFETY: eventfd has no preconditions.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        log::line(format_args!(
            "heaplive[{}]: no eventfd ({}); signal dumps are off",
            pid,
            sys::errno_text(sys::errno())
        ));
    } else {
        let old = EVENT_FD.set(fd);
        if old >= 0 {
            // The parent's, inherited through fork.
            // SAFETY: no one else in this process uses it any more.
            unsafe { libc::close(old) };
        }
    }
    // The thread starts with every signal blocked, so signals meant for
    // the program never land on it.
    // SAFETY: sigset operations on local sets.
    let mut all: libc::sigset_t = unsafe { core::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { core::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // A raw pthread: the thread must mark itself as the library's before
    // anything runs on it (Rust's own thread start allocates).
    // SAFETY: attr is initialised before use and destroyed after.
    let err = unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        libc::pthread_attr_setstacksize(&mut attr, 512 * 1024);
        let mut tid: libc::pthread_t = 0;
        let e = libc::pthread_create(&mut tid, &attr, dumper_start, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        e
    };
    // SAFETY: restores our mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut()) };
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
    unsafe { (*crate::hot::guard::state()).busy = 1 };
    // SAFETY: a name for tools like top; the string is NUL-terminated.
    unsafe { libc::pthread_setname_np(libc::pthread_self(), c"heaplive".as_ptr()) };
    dumper_main();
    core::ptr::null_mut()
}

fn dumper_main() {
    let my_pid = sys::getpid();
    let cfg = config::get();
    let every_ns = cfg.dump_every_ms.saturating_mul(1_000_000);
    let mut next_periodic = if every_ns > 0 {
        sys::now_nanos() + every_ns
    } else {
        u64::MAX
    };
    let mut next_prune = sys::now_nanos() + PRUNE_EVERY_NS;
    loop {
        if pid::get() != my_pid || trigger::dumper_pid() != my_pid {
            // A forked child copied us mid-flight; the child has its own.
            return;
        }
        let fd = match EVENT_FD.get() {
            Some(fd) => fd,
            None => renew_eventfd(),
        };
        let now = sys::now_nanos();
        let wait_ms = (next_periodic.min(now + 250_000_000).saturating_sub(now) / 1_000_000) as i32;
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, if fd >= 0 { 1 } else { 0 }, wait_ms.max(1)) };
        if r > 0 && pfd.revents & libc::POLLIN != 0 {
            let mut v = 0u64;
            // Reading resets the counter: every request that arrived so far
            // is served by this one dump, and any arriving during it by at
            // most one more.
            // SAFETY: 8-byte read into v.
            unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
            let _ = dump(None, "signal");
        }
        let now = sys::now_nanos();
        if now >= next_periodic {
            let _ = dump(None, "periodic");
            next_periodic = sys::now_nanos() + every_ns;
        }
        leak_report::report_pending();
        if now >= next_prune {
            let _st = DUMP.lock();
            crate::hot::shadow::prune();
            next_prune = now + PRUNE_EVERY_NS;
        }
    }
}

/// The program closed our eventfd (and may have reused its number): make a
/// new one. -1 if the kernel refuses.
#[cold]
fn renew_eventfd() -> i32 {
    EVENT_FD.forget();
    // SAFETY: eventfd has no preconditions.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return -1;
    }
    EVENT_FD.set(fd);
    EVENT_FD.get().unwrap_or(-1)
}

/// Called before an exec replaces the image: waits for a dump in progress
/// (by taking the lock) and serves a request still waiting in the eventfd.
pub fn before_exec() {
    let _busy = crate::hot::guard::Busy::enter();
    let mut st = DUMP.lock();
    let Some(fd) = EVENT_FD.get() else { return };
    if trigger::dumper_pid() != pid::get() {
        return;
    }
    let mut v = 0u64;
    // SAFETY: 8-byte read into v; the eventfd is non-blocking.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if n == 8
        && v > 0
        && let Err(e) = dump_locked(&mut st, None, "signal")
    {
        log::line(format_args!(
            "heaplive[{}]: signal dump failed: {}",
            sys::getpid(),
            e
        ));
    }
}

/// The exit dump, registered with atexit by the constructor.
pub extern "C" fn at_exit() {
    let cfg = config::get();
    let _busy = crate::hot::guard::Busy::enter();
    let _errno = sys::ErrnoGuard::save();
    let written = if cfg.dump_at_exit {
        dump(None, "exit").ok()
    } else {
        None
    };
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
    }
    output::remove_status(sys::getpid());
}

/// `heaplive_dump(path)`: dumps now, to `path` or (None) to the next file of
/// the template. Err carries an errno value.
pub fn dump_now(path: Option<&[u8]>) -> Result<(), i32> {
    let _busy = crate::hot::guard::Busy::enter();
    let explicit = path
        .map(|b| PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b)));
    match dump(explicit.as_deref(), "requested") {
        Ok(_) => Ok(()),
        Err(e) => Err(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

//! Dump requests from places that may not allocate or lock: the signal
//! handler writes to an eventfd that the dumper thread polls, and the
//! allocation path makes sure this process has a dumper thread.

use crate::hot::{pid, services, sys};
use core::sync::atomic::{AtomicU32, Ordering::*};

/// The eventfd the signal handler writes to.
pub static EVENT_FD: sys::OwnFd = sys::OwnFd::new();
/// The pid whose dumper thread is running.
static DUMPER_PID: AtomicU32 = AtomicU32::new(0);

/// Starts this process's dumper thread unless it runs already. Cheap when
/// it does: two loads.
#[inline]
pub fn ensure_dumper() {
    let pid = pid::get();
    if DUMPER_PID.load(Acquire) != pid
        && !crate::hot::forking::inert()
        && let Some(s) = services::get()
    {
        (s.start_dumper)(pid);
    }
}

/// Claims the dumper role for `pid`: false if it was claimed already.
pub fn claim_dumper(pid: u32) -> bool {
    DUMPER_PID.swap(pid, AcqRel) != pid
}

/// The pid whose dumper thread runs (0: none yet).
pub fn dumper_pid() -> u32 {
    DUMPER_PID.load(Acquire)
}

/// Asks the dumper for a dump: async-signal-safe (getpid, fstat and one
/// write to the eventfd, errno kept).
#[inline]
pub fn request_from_signal() {
    let saved = sys::errno();
    // A child made by _Fork (no fork handlers ran) still shares its
    // parent's eventfd: a request from it would make the parent dump.
    if sys::getpid() != pid::get() {
        sys::set_errno(saved);
        return;
    }
    if let Some(fd) = EVENT_FD.get() {
        let one = 1u64;
        // SAFETY: 8-byte write from a local.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
    sys::set_errno(saved);
}

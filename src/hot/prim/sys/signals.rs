//! Raw signal system calls. The library exports sigprocmask, sigtimedwait and
//! friends itself (the program sees a virtual mask for the dump signal), so
//! its own code never calls those names: inside this cdylib they would bind
//! to our exports. The kernel's signal set is one u64 (bit `sig - 1`).
//!
//! Part of `sys` (re-exported there: `crate::hot::sys::sigmask` and the
//! rest keep their paths).

use super::*;

/// The kernel mask bit of `sig` (0 for no signal).
#[inline]
pub fn sig_bit(sig: i32) -> u64 {
    if (1..=64).contains(&sig) {
        1u64 << (sig - 1)
    } else {
        0
    }
}

/// glibc's SIGCANCEL and SIGSETXID: glibc never lets them be blocked
/// (setuid must reach every thread), and neither do we.
pub const GLIBC_INTERNAL: u64 = (1u64 << 31) | (1u64 << 32);

/// The first 64 signals of a glibc sigset_t, as the kernel's mask.
#[inline]
pub fn kmask_of(set: *const libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t starts with the kernel's 64-bit mask on x86_64.
    unsafe { *(set as *const u64) }
}

/// Stores `m` as the first 64 signals of `set` (the rest are left alone).
#[inline]
pub fn set_kmask(set: *mut libc::sigset_t, m: u64) {
    // SAFETY: as kmask_of.
    unsafe { *(set as *mut u64) = m }
}

/// rt_sigprocmask on this thread: 0 or -errno; errno kept.
pub fn sigmask(how: i32, set: Option<u64>, old: Option<&mut u64>) -> i32 {
    let s = set.map(|m| m & !GLIBC_INTERNAL);
    let sp = s.as_ref().map_or(core::ptr::null(), |m| m as *const u64);
    let op = old.map_or(core::ptr::null_mut(), |m| m as *mut u64);
    // SAFETY: valid or null pointers to 8-byte masks.
    errno_kept(|| unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, sp, op, 8usize) })
}

/// A system call's result (what it returns, or -errno), errno kept.
#[inline]
fn errno_kept(call: impl FnOnce() -> libc::c_long) -> i32 {
    let saved = errno();
    let r = call();
    let r = if r < 0 { -errno() } else { r as i32 };
    set_errno(saved);
    r
}

/// This thread's real mask.
pub fn current_mask() -> u64 {
    let mut m = 0u64;
    sigmask(libc::SIG_BLOCK, None, Some(&mut m));
    m
}

/// rt_sigtimedwait for the signals in `set`, waiting up to `timeout_ns`
/// (None: forever). The signal number, or -errno (EAGAIN on timeout, EINTR).
pub fn sigtimedwait(set: u64, info: &mut libc::siginfo_t, timeout_ns: Option<u64>) -> i32 {
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    });
    let tp = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: valid pointers; 8 is the kernel's sigset size.
    errno_kept(|| unsafe {
        libc::syscall(
            libc::SYS_rt_sigtimedwait,
            &set as *const u64,
            info as *mut libc::siginfo_t,
            tp,
            8usize,
        )
    })
}

/// The calling thread's id.
#[inline]
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Queues `sig` with `info` to thread `tid` of this process: 0 or -errno.
pub fn tgsigqueueinfo(tid: i32, sig: i32, info: &libc::siginfo_t) -> i32 {
    // SAFETY: info is a valid siginfo.
    errno_kept(|| unsafe {
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            getpid() as i32,
            tid,
            sig,
            info as *const libc::siginfo_t,
        )
    })
}

/// Queues `sig` with `info` to this process (any thread that takes it).
pub fn sigqueueinfo(sig: i32, info: &libc::siginfo_t) -> i32 {
    // SAFETY: info is a valid siginfo.
    errno_kept(|| unsafe {
        libc::syscall(
            libc::SYS_rt_sigqueueinfo,
            getpid() as i32,
            sig,
            info as *const libc::siginfo_t,
        )
    })
}

/// The fields of a queued signal's siginfo (si_pid, si_uid, si_value) as
/// the libc crate lays them out only through accessors: a plain struct.
#[repr(C)]
pub struct QueuedInfo {
    pub signo: i32,
    pub errno: i32,
    pub code: i32,
    _pad: i32,
    pub pid: i32,
    pub uid: u32,
    pub value: usize,
}

/// A view of `info`'s first fields as a queued (kill/sigqueue) signal.
pub fn queued(info: &libc::siginfo_t) -> &QueuedInfo {
    // SAFETY: siginfo_t is 128 bytes and starts with these fields for
    // SI_USER, SI_QUEUE and SI_TKILL (the kill union member).
    unsafe { &*(info as *const libc::siginfo_t as *const QueuedInfo) }
}

/// See [`queued`].
pub fn queued_mut(info: &mut libc::siginfo_t) -> &mut QueuedInfo {
    // SAFETY: as `queued`.
    unsafe { &mut *(info as *mut libc::siginfo_t as *mut QueuedInfo) }
}

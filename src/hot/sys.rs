//! The only code that maps memory or makes raw system calls for the hooks.
//!
//! Everything here is safe to call from an allocation path: no allocation, no
//! locks, errno is left as the caller had it.

use core::ffi::c_void;

/// Maps `len` bytes of zeroed, private, anonymous memory. Null on failure.
pub fn map(len: usize) -> *mut u8 {
    map_anon(len, 0)
}

/// As [`map`], with every page faulted in by the kernel in the same call
/// (MAP_POPULATE): for a table about to be filled all over, which would
/// otherwise take a read fault (the shared zero page) and then a
/// copy-on-write fault, with a TLB shootdown in a threaded process, per
/// page. Null when the kernel refuses.
pub fn map_populated(len: usize) -> *mut u8 {
    map_anon(len, libc::MAP_POPULATE)
}

fn map_anon(len: usize, extra_flags: libc::c_int) -> *mut u8 {
    let saved = errno();
    // SAFETY: an anonymous private mapping with no address hint touches no
    // existing memory.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | extra_flags,
            -1,
            0,
        )
    };
    set_errno(saved);
    if p == libc::MAP_FAILED {
        core::ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Unmaps memory obtained from [`map`].
///
/// # Safety
/// `p..p+len` must be a mapping from [`map`] that nothing uses any more.
pub unsafe fn unmap(p: *mut u8, len: usize) {
    let saved = errno();
    // SAFETY: guaranteed by the caller.
    unsafe { libc::munmap(p.cast::<c_void>(), len) };
    set_errno(saved);
}

/// Gives pages back to the kernel; they read as zero afterwards.
///
/// # Safety
/// Nothing may rely on the contents of `p..p+len`.
pub unsafe fn discard(p: *mut u8, len: usize) {
    let saved = errno();
    // SAFETY: guaranteed by the caller; MADV_DONTNEED on private anonymous
    // memory only zero-fills.
    unsafe { libc::madvise(p.cast::<c_void>(), len, libc::MADV_DONTNEED) };
    set_errno(saved);
}

#[inline]
pub fn errno() -> i32 {
    // SAFETY: __errno_location always returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

#[inline]
pub fn set_errno(e: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e }
}

/// Restores errno when dropped: slow paths start with one of these.
pub struct ErrnoGuard(i32);

impl ErrnoGuard {
    #[inline]
    pub fn save() -> Self {
        ErrnoGuard(errno())
    }
}

impl Drop for ErrnoGuard {
    #[inline]
    fn drop(&mut self) {
        set_errno(self.0)
    }
}

/// The process id, straight from the kernel (glibc no longer caches it).
pub fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::syscall(libc::SYS_getpid) as u32 }
}

/// Writes all of `buf` to `fd` with as few write(2) calls as the kernel
/// allows; gives up silently on errors (a closed stderr must not hurt).
pub fn write_all(fd: i32, mut buf: &[u8]) -> bool {
    let saved = errno();
    let mut ok = true;
    while !buf.is_empty() {
        // SAFETY: buf is a valid slice.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            ok = false;
            break;
        }
        if n == 0 {
            ok = false;
            break;
        }
        buf = &buf[n as usize..];
    }
    set_errno(saved);
    ok
}

fn clock_nanos(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Monotonic clock in nanoseconds (vDSO: no system call).
pub fn now_nanos() -> u64 {
    clock_nanos(libc::CLOCK_MONOTONIC) as u64
}

/// The monotonic clock as of the last timer tick (CLOCK_MONOTONIC_COARSE:
/// a few milliseconds behind at most, and a plain read of the vDSO's data,
/// no time-stamp counter): for times taken on every allocation.
pub fn coarse_nanos() -> u64 {
    clock_nanos(libc::CLOCK_MONOTONIC_COARSE) as u64
}

/// Wall clock in nanoseconds since the epoch.
pub fn wall_nanos() -> i64 {
    clock_nanos(libc::CLOCK_REALTIME)
}

/// A tiny formatter into a fixed buffer: lets hooks and signal-free paths
/// build a message with `core::fmt` and no allocation. Output past the end
/// is cut.
pub struct StackBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackBuf<N> {
    pub const fn new() -> Self {
        StackBuf {
            buf: [0; N],
            len: 0,
        }
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    pub fn push_bytes(&mut self, b: &[u8]) {
        let n = b.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
    }
    /// `v` in decimal, without `core::fmt` (whose code a process that
    /// never samples would otherwise fault in at exit).
    pub fn push_dec(&mut self, mut v: u64) {
        let mut d = [0u8; 20];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push_bytes(&d[i..]);
    }
}

impl<const N: usize> core::fmt::Write for StackBuf<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push_bytes(s.as_bytes());
        Ok(())
    }
}

/// A descriptor of the library's own (the eventfd, the log file) that the
/// program may close behind our back, after which its number can come back
/// as one of the program's files. We move it high, remember which file it
/// is, and check before every use (fstat is async-signal-safe).
pub struct OwnFd {
    fd: core::sync::atomic::AtomicI32,
    identity: FdIdentity,
}

/// Which file a descriptor refers to (device and inode), remembered so that
/// a later check can tell whether the number now names another file.
pub struct FdIdentity {
    dev: core::sync::atomic::AtomicU64,
    ino: core::sync::atomic::AtomicU64,
}

impl FdIdentity {
    pub const fn new() -> FdIdentity {
        FdIdentity {
            dev: core::sync::atomic::AtomicU64::new(0),
            ino: core::sync::atomic::AtomicU64::new(0),
        }
    }

    fn of(fd: i32) -> Option<(u64, u64)> {
        let saved = errno();
        // SAFETY: st is a valid out-pointer.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
        set_errno(saved);
        ok.then_some((st.st_dev, st.st_ino))
    }

    /// Remembers the file `fd` names now (async-signal-safe, errno kept).
    pub fn remember(&self, fd: i32) {
        use core::sync::atomic::Ordering::Relaxed;
        let (d, i) = Self::of(fd).unwrap_or((0, 0));
        self.dev.store(d, Relaxed);
        self.ino.store(i, Relaxed);
    }

    /// Does `fd` still name the remembered file?
    pub fn matches(&self, fd: i32) -> bool {
        use core::sync::atomic::Ordering::Relaxed;
        Self::of(fd) == Some((self.dev.load(Relaxed), self.ino.load(Relaxed)))
    }
}

impl OwnFd {
    pub const fn new() -> OwnFd {
        OwnFd {
            fd: core::sync::atomic::AtomicI32::new(-1),
            identity: FdIdentity::new(),
        }
    }

    /// Takes ownership of `fd`: moves it to a high number (out of the way of
    /// programs that close or reuse low ones) and remembers its identity.
    /// Returns the previous descriptor, if any, for the caller to close.
    pub fn set(&self, fd: i32) -> i32 {
        use core::sync::atomic::Ordering::*;
        let saved = errno();
        // SAFETY: fcntl on our own descriptor.
        let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 900) };
        let fd = if high >= 0 {
            // SAFETY: the low copy is ours and no longer needed.
            unsafe { libc::close(fd) };
            high
        } else {
            fd
        };
        // Readers see no descriptor while the identity changes.
        let old = self.fd.swap(-1, AcqRel);
        self.identity.remember(fd);
        self.fd.store(fd, Release);
        set_errno(saved);
        old
    }

    /// The descriptor, if it is still the file we opened.
    pub fn get(&self) -> Option<i32> {
        use core::sync::atomic::Ordering::*;
        let fd = self.fd.load(Acquire);
        if fd < 0 {
            return None;
        }
        if self.identity.matches(fd) {
            Some(fd)
        } else {
            None
        }
    }

    /// Forgets the descriptor without closing it (it is no longer ours).
    pub fn forget(&self) {
        self.fd.store(-1, core::sync::atomic::Ordering::Release);
    }
}

/// An errno value shown as std shows it ("No such file or directory (os
/// error 2)"), without allocating.
pub struct ErrnoText(pub i32);

impl core::fmt::Display for ErrnoText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut buf = [0u8; 128];
        // SAFETY: the buffer and its length match; the XSI strerror_r writes
        // a NUL-terminated message into it.
        let r = unsafe { libc::strerror_r(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        let len = buf.iter().position(|&b| b == 0).unwrap_or(0);
        match core::str::from_utf8(&buf[..len]) {
            Ok(m) if r == 0 && !m.is_empty() => write!(f, "{m} (os error {})", self.0),
            _ => write!(f, "Unknown error {} (os error {})", self.0, self.0),
        }
    }
}

/// See [`ErrnoText`].
pub fn errno_text(e: i32) -> ErrnoText {
    ErrnoText(e)
}

// ---------------------------------------------------------------------------
// Raw signal system calls. The library exports sigprocmask, sigtimedwait and
// friends itself (the program sees a virtual mask for the dump signal), so
// its own code never calls those names: inside this cdylib they would bind
// to our exports. The kernel's signal set is one u64 (bit `sig - 1`).

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
    let saved = errno();
    let s = set.map(|m| m & !GLIBC_INTERNAL);
    let sp = s.as_ref().map_or(core::ptr::null(), |m| m as *const u64);
    let op = old.map_or(core::ptr::null_mut(), |m| m as *mut u64);
    // SAFETY: valid or null pointers to 8-byte masks.
    let r = unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, sp, op, 8usize) };
    let r = if r < 0 { -errno() } else { 0 };
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
    let saved = errno();
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    });
    let tp = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: valid pointers; 8 is the kernel's sigset size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigtimedwait,
            &set as *const u64,
            info as *mut libc::siginfo_t,
            tp,
            8usize,
        )
    };
    let r = if r < 0 { -errno() } else { r as i32 };
    set_errno(saved);
    r
}

/// The calling thread's id.
#[inline]
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Queues `sig` with `info` to thread `tid` of this process: 0 or -errno.
pub fn tgsigqueueinfo(tid: i32, sig: i32, info: &libc::siginfo_t) -> i32 {
    let saved = errno();
    // SAFETY: info is a valid siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            getpid() as i32,
            tid,
            sig,
            info as *const libc::siginfo_t,
        )
    };
    let r = if r < 0 { -errno() } else { 0 };
    set_errno(saved);
    r
}

/// Queues `sig` with `info` to this process (any thread that takes it).
pub fn sigqueueinfo(sig: i32, info: &libc::siginfo_t) -> i32 {
    let saved = errno();
    // SAFETY: info is a valid siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigqueueinfo,
            getpid() as i32,
            sig,
            info as *const libc::siginfo_t,
        )
    };
    let r = if r < 0 { -errno() } else { 0 };
    set_errno(saved);
    r
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_dec_writes_decimal() {
        for v in [0u64, 7, 10, 99, 4_294_967_295, u64::MAX] {
            let mut b = StackBuf::<32>::new();
            b.push_dec(v);
            assert_eq!(b.as_bytes(), v.to_string().as_bytes());
        }
    }
}

// ---------------------------------------------------------------------------
// Exit and fork handlers, registered with glibc's own entry points. The
// `atexit` and `pthread_atfork` that C programs call are stubs in
// libc_nonshared.a that pass the caller's `__dso_handle` on through the
// PLT: linked into this library they made the start touch one more page
// (the PLT at the end of the text) for nothing.

unsafe extern "C" {
    /// This library's handle (crtbegin's), as the stubs pass it.
    static __dso_handle: u8;
    fn __cxa_atexit(
        f: unsafe extern "C" fn(*mut c_void),
        arg: *mut c_void,
        dso: *const c_void,
    ) -> i32;
    fn __register_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
        dso: *const c_void,
    ) -> i32;
}

/// `atexit(f)`: `f` runs at exit (before the handlers registered earlier).
pub fn at_exit(f: unsafe extern "C" fn(*mut c_void)) -> bool {
    // SAFETY: a plain function that stays mapped; the handle is ours.
    unsafe { __cxa_atexit(f, core::ptr::null_mut(), (&raw const __dso_handle).cast()) == 0 }
}

/// `pthread_atfork(prepare, parent, child)`.
pub fn at_fork(
    prepare: unsafe extern "C" fn(),
    parent: unsafe extern "C" fn(),
    child: unsafe extern "C" fn(),
) -> bool {
    // SAFETY: plain functions that stay mapped; the handle is ours.
    unsafe {
        __register_atfork(
            Some(prepare),
            Some(parent),
            Some(child),
            (&raw const __dso_handle).cast(),
        ) == 0
    }
}

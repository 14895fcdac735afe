//! The only code that maps memory or makes raw system calls for the hooks.
//!
//! Everything here is safe to call from an allocation path: no allocation, no
//! locks, errno is left as the caller had it.

use core::ffi::c_void;

/// Maps `len` bytes of zeroed, private, anonymous memory. Null on failure.
pub fn map(len: usize) -> *mut u8 {
    let saved = errno();
    // SAFETY: an anonymous private mapping with no address hint touches no
    // existing memory.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
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

//! The system calls the hooks share: heaplive's mappings, the raw signal
//! calls, quiet writes, time, owned descriptors. Which code may call the
//! kernel, and how: src/README.md, "Who makes system calls" (stated there
//! once).
//!
//! Everything here is safe to call from an allocation path: no allocation, no
//! locks, errno is left as the caller had it.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Maps `len` bytes of zeroed, private, anonymous memory. Null on failure.
pub fn map(len: usize) -> *mut u8 {
    map_anon(len, 0, Owner::Tables)
}

/// As [`map`], for heaplive's own heap (`hot::ownheap`) and the
/// symbolizer's scratch: counted apart from the tables in [`resident`].
pub fn map_heap(len: usize) -> *mut u8 {
    map_anon(len, 0, Owner::Heap)
}

/// As [`map`], with every page faulted in by the kernel in the same call
/// (MAP_POPULATE): for a table about to be filled all over, which would
/// otherwise take a read fault (the shared zero page) and then a
/// copy-on-write fault, with a TLB shootdown in a threaded process, per
/// page. Null when the kernel refuses.
pub fn map_populated(len: usize) -> *mut u8 {
    map_anon(len, libc::MAP_POPULATE, Owner::Tables)
}

fn map_anon(len: usize, extra_flags: libc::c_int, owner: Owner) -> *mut u8 {
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
        list(p as usize, len, owner);
        p.cast()
    }
}

/// Unmaps memory obtained from [`map`] (or part of it).
///
/// # Safety
/// `p..p+len` must be a mapping from [`map`] that nothing uses any more.
pub unsafe fn unmap(p: *mut u8, len: usize) {
    let saved = errno();
    // Out of the list first: once unmapped, another thread may map (and
    // list) the same addresses.
    unlist(p as usize, len);
    // SAFETY: guaranteed by the caller.
    unsafe { libc::munmap(p.cast::<c_void>(), len) };
    set_errno(saved);
}

// ---------------------------------------------------------------------------
// heaplive's own mappings, so that a dump can say how much of the process's
// RSS is heaplive's (`resident`): the live table of exact mode alone is
// 16 bytes or more per live block.

/// Whose a mapping is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Owner {
    /// The live table, stack table, shadow bitmap, unwind cache, arenas.
    Tables = 0,
    /// heaplive's own heap (`hot::ownheap`) and the symbolizer's scratch.
    Heap = 1,
}

/// Listed mappings: each slot packs a mapping's first page number
/// (`PAGE_BITS`), its length in pages (`LEN_BITS`) and its owner (the top
/// bit); 0 is a free slot. One word, so that a reader never sees half of
/// an entry. Mappings are few (tables grow by doubling; a shadow-bitmap
/// leaf covers 2 MiB of addresses), but a mapping that finds no free slot,
/// or does not fit the packing, is still counted, by its length.
const SLOTS: usize = 1 << 14;
const PAGE_BITS: u32 = 36;
const LEN_BITS: u32 = 27;
/// The first slots, beside the other small variables the start writes
/// (the one mapping a process makes at start, heaplive's heap, goes there):
/// listing it touches no page of its own. The rest (128 KiB) lies with the
/// big tables (src/layout.ld), as do the counters of unlisted mappings, and is
/// touched only when used: the start is 6 page faults cheaper than with
/// one list among the big tables.
const FIRST: usize = 2;

/// A list of mappings: its slots in two parts, and its counters.
struct List<'a> {
    first: &'a [AtomicU64],
    more: &'a [AtomicU64],
    /// Slots below this were taken the last time one was looked for.
    hint: &'a AtomicUsize,
    /// No slot at or above this was ever taken: scans stop here.
    top: &'a AtomicUsize,
    /// Slots taken now: a full list is not searched (a new mapping may be
    /// made inside malloc, under a live-table shard's lock).
    taken: &'a AtomicUsize,
    /// Bytes of the mappings not listed, per owner.
    unlisted: &'a [AtomicUsize; 2],
}

static FIRST_SLOTS: [AtomicU64; FIRST] = [const { AtomicU64::new(0) }; FIRST];
static MORE_SLOTS: [AtomicU64; SLOTS - FIRST] = [const { AtomicU64::new(0) }; SLOTS - FIRST];
static HINT: AtomicUsize = AtomicUsize::new(0);
static TOP: AtomicUsize = AtomicUsize::new(0);
static TAKEN: AtomicUsize = AtomicUsize::new(0);
static UNLISTED: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];

/// heaplive's list.
fn own() -> List<'static> {
    List {
        first: &FIRST_SLOTS,
        more: &MORE_SLOTS,
        hint: &HINT,
        top: &TOP,
        taken: &TAKEN,
        unlisted: &UNLISTED,
    }
}

/// Lists a mapping made outside `map` (`ownheap`'s mremap).
pub(crate) fn list(addr: usize, len: usize, owner: Owner) {
    own().add(addr, len, owner)
}

/// Takes a mapping (or its first or last pages) out of the list.
pub(crate) fn unlist(addr: usize, len: usize) {
    own().remove(addr, len)
}

/// Resident bytes of heaplive's own mappings: (tables, heap). Pages are
/// counted with mincore(2), so a table mapped large and touched in a few
/// places counts only those; an unlisted mapping counts its length. For
/// the dump's log line (heaplive's thread; `buf` is its scratch for the
/// page vector).
pub fn resident(buf: &mut [u8]) -> (usize, usize) {
    own().resident(buf)
}

fn pack(page: usize, pages: usize, owner: Owner) -> Option<u64> {
    if page == 0 || page >> PAGE_BITS != 0 || pages == 0 || pages >> LEN_BITS != 0 {
        return None;
    }
    Some(page as u64 | (pages as u64) << PAGE_BITS | (owner as u64) << 63)
}

fn unpack(w: u64) -> (usize, usize, Owner) {
    let owner = if w >> 63 == 0 {
        Owner::Tables
    } else {
        Owner::Heap
    };
    (
        (w & ((1 << PAGE_BITS) - 1)) as usize,
        ((w >> PAGE_BITS) & ((1 << LEN_BITS) - 1)) as usize,
        owner,
    )
}

fn pages_of(len: usize) -> usize {
    len.div_ceil(4096)
}

impl List<'_> {
    fn len(&self) -> usize {
        self.first.len() + self.more.len()
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        match self.first.get(i) {
            Some(s) => s,
            None => &self.more[i - self.first.len()],
        }
    }

    /// The slots that were ever taken.
    fn used(&self) -> impl Iterator<Item = (usize, &AtomicU64)> {
        (0..self.top.load(Relaxed).min(self.len())).map(|i| (i, self.slot(i)))
    }

    fn add(&self, addr: usize, len: usize, owner: Owner) {
        let n = self.len();
        if let Some(w) = pack(addr >> 12, pages_of(len), owner)
            && self.taken.load(Relaxed) < n
        {
            let start = self.hint.load(Relaxed).min(n - 1);
            for k in 0..n {
                let i = (start + k) % n;
                let s = self.slot(i);
                if s.load(Relaxed) == 0 && s.compare_exchange(0, w, Relaxed, Relaxed).is_ok() {
                    self.hint.store(i + 1, Relaxed);
                    self.top.fetch_max(i + 1, Relaxed);
                    self.taken.fetch_add(1, Relaxed);
                    return;
                }
            }
        }
        self.unlisted[owner as usize].fetch_add(pages_of(len) * 4096, Relaxed);
    }

    /// Takes `addr..addr+len` out: the whole entry, or its first or last
    /// pages (a mapping unmapped in parts). A range in the middle of an
    /// entry stays listed (`resident` counts only what is still mapped).
    fn remove(&self, addr: usize, len: usize) {
        let (page, pages) = (addr >> 12, pages_of(len));
        for (i, slot) in self.used() {
            let w = slot.load(Relaxed);
            if w == 0 {
                continue;
            }
            let (p, n, owner) = unpack(w);
            if page < p || page >= p + n {
                continue;
            }
            let new = if page == p && pages >= n {
                0
            } else if page == p {
                pack(p + pages, n - pages, owner).unwrap_or(0)
            } else if page + pages >= p + n {
                pack(p, page - p, owner).unwrap_or(0)
            } else {
                return;
            };
            if slot.compare_exchange(w, new, Relaxed, Relaxed).is_ok() && new == 0 {
                self.taken.fetch_sub(1, Relaxed);
                self.hint.fetch_min(i, Relaxed);
            }
            return;
        }
        // Counted by its length when it was mapped.
        for u in self.unlisted {
            if u.load(Relaxed) >= pages * 4096 {
                u.fetch_sub(pages * 4096, Relaxed);
                return;
            }
        }
    }

    fn resident(&self, buf: &mut [u8]) -> (usize, usize) {
        let mut out = [
            self.unlisted[0].load(Relaxed),
            self.unlisted[1].load(Relaxed),
        ];
        for (_, slot) in self.used() {
            let w = slot.load(Relaxed);
            if w == 0 {
                continue;
            }
            let (page, pages, owner) = unpack(w);
            let mut done = 0;
            while done < pages {
                let n = (pages - done).min(buf.len());
                if n == 0 {
                    return (out[0], out[1]);
                }
                // SAFETY: asks the kernel about our own range; `buf` holds
                // `n` bytes. A range unmapped meanwhile fails (ENOMEM):
                // skipped.
                let r = unsafe {
                    libc::mincore(
                        ((page + done) << 12) as *mut c_void,
                        n << 12,
                        buf.as_mut_ptr(),
                    )
                };
                if r == 0 {
                    out[owner as usize] += buf[..n].iter().filter(|&&b| b & 1 != 0).count() * 4096;
                }
                done += n;
            }
        }
        (out[0], out[1])
    }
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

/// Reads the small file `path` (one of /proc/self's) into `buf` with raw
/// open/read/close: async-signal-safe, errno kept. The bytes read, to the
/// end of the file or of `buf` (a failed read ends it too); None when the
/// file cannot be opened.
pub fn read_small_file(path: &core::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    let saved = errno();
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        set_errno(saved);
        return None;
    }
    let mut got = 0usize;
    while got < buf.len() {
        // SAFETY: the rest of buf and its length.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().add(got).cast(), buf.len() - got) };
        if r <= 0 {
            break;
        }
        got += r as usize;
    }
    // SAFETY: our own descriptor, opened above.
    unsafe { libc::close(fd) };
    set_errno(saved);
    Some(got)
}

/// Writes all of `buf` to `fd` with as few write(2) calls as the kernel
/// allows; gives up silently on errors (a closed stderr must not hurt),
/// raising no SIGPIPE or SIGXFSZ ([`QuietWrites`]).
pub fn write_all(fd: i32, mut buf: &[u8]) -> bool {
    let saved = errno();
    let _quiet = QuietWrites::new();
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

/// SIGPIPE and SIGXFSZ: what a write(2) of ours could raise in the host
/// (EPIPE on a pipe or socket whose reader has gone, EFBIG past
/// RLIMIT_FSIZE; also ftruncate past the limit). The kernel sends both to
/// the writing thread (thread-directed), never to the process.
const WRITE_SIGNALS: u64 = (1u64 << (libc::SIGPIPE - 1)) | (1u64 << (libc::SIGXFSZ - 1));

/// While alive, heaplive's writes on this thread raise no SIGPIPE or
/// SIGXFSZ in the host: both are blocked (with the raw rt_sigprocmask:
/// the exported sigprocmask and pthread_sigmask are heaplive's own), the
/// write fails with EPIPE or EFBIG instead, and on drop a signal that our
/// writes left pending on this thread is taken back (rt_sigtimedwait with
/// a zero timeout: the kernel dequeues this thread's own pending signals
/// before the process's) before the mask is restored. A signal that was
/// already pending on this thread stays (a second standard signal does not
/// queue: ours merged with it); one pending for the whole process (kill)
/// is not this thread's and is left too. Nests; async-signal-safe.
pub struct QuietWrites {
    old_mask: u64,
    /// Of WRITE_SIGNALS: pending (thread or process) when we started.
    pending_before: u64,
    /// Of those: pending on this thread itself (or unknown: /proc
    /// unreadable, taken as this thread's, so never consumed).
    thread_before: u64,
}

impl QuietWrites {
    pub fn new() -> QuietWrites {
        let mut old_mask = 0u64;
        sigmask(libc::SIG_BLOCK, Some(WRITE_SIGNALS), Some(&mut old_mask));
        let pending_before = sigpending() & WRITE_SIGNALS;
        // Rare: the program blocks one of them and has one pending.
        let thread_before = if pending_before == 0 {
            0
        } else {
            thread_pending().unwrap_or(WRITE_SIGNALS) & pending_before
        };
        QuietWrites {
            old_mask,
            pending_before,
            thread_before,
        }
    }
}

impl Default for QuietWrites {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for QuietWrites {
    fn drop(&mut self) {
        let now = sigpending() & WRITE_SIGNALS & !self.thread_before;
        if now != 0 {
            // New since we started: ours. Pending before for the process
            // only: ours if this thread has one now.
            let mut ours = now & !self.pending_before;
            if now & self.pending_before != 0 {
                ours |= thread_pending().unwrap_or(0) & now & self.pending_before;
            }
            for sig in [libc::SIGPIPE, libc::SIGXFSZ] {
                let bit = 1u64 << (sig - 1);
                if ours & bit != 0 {
                    // SAFETY: zeroed siginfo is a valid out-buffer.
                    let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
                    sigtimedwait(bit, &mut info, Some(0));
                }
            }
        }
        sigmask(libc::SIG_SETMASK, Some(self.old_mask), None);
    }
}

/// rt_sigpending: the blocked signals pending for this thread or the
/// process.
fn sigpending() -> u64 {
    let saved = errno();
    let mut set = 0u64;
    // SAFETY: an 8-byte out-mask, the kernel's sigset size.
    unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut set as *mut u64, 8usize) };
    set_errno(saved);
    set
}

/// The signals pending on this thread itself (not the process's): the
/// `SigPnd` line of /proc/thread-self/status. None if unreadable.
fn thread_pending() -> Option<u64> {
    let saved = errno();
    // SAFETY: a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        set_errno(saved);
        return None;
    }
    const KEY: &[u8] = b"SigPnd:";
    let mut line = [0u8; 64];
    let (mut len, mut found) = (0usize, None);
    let mut chunk = [0u8; 512];
    'read: loop {
        // SAFETY: chunk is a valid buffer of its length.
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n <= 0 {
            break;
        }
        for &c in &chunk[..n as usize] {
            if c != b'\n' {
                if len < line.len() {
                    line[len] = c;
                    len += 1;
                }
                continue;
            }
            if line[..len].starts_with(KEY) {
                found = parse_hex(&line[KEY.len()..len]);
                break 'read;
            }
            len = 0;
        }
    }
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    set_errno(saved);
    found
}

/// A hexadecimal number with blanks around it.
fn parse_hex(b: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    let mut digits = 0;
    for &c in b {
        let d = match c {
            b' ' | b'\t' => continue,
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = v.checked_mul(16)? | d as u64;
        digits += 1;
    }
    (digits > 0).then_some(v)
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

// The raw signal system calls: `sys/signals.rs`.
mod signals;
pub use signals::*;

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

#[cfg(test)]
#[path = "sys_tests.rs"]
mod tests;

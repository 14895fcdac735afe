//! Reaching a file heaplive writes without following a link that another
//! user could have placed (issue 25): the one rule the library (dump
//! files, temporaries, status files, `HEAPLIVE_LOG`, `heaplive.<euid>.log`)
//! and the command (`flamegraph -o`) open their outputs by.
//!
//! The path is walked one component at a time from `/` (or the current
//! directory), each directory opened `O_PATH|O_DIRECTORY|O_NOFOLLOW` from
//! the one before and checked with `fstat`: it must belong to root or to
//! the effective uid, and be writable by nobody else (no group or other
//! write bit) unless it is sticky (`/tmp`: others may add entries there,
//! but not rename or remove ours, so only the entry itself is checked). A
//! symlink on the way, the last component included, is followed only when
//! the link itself belongs to the effective uid or to root (and it lies in
//! a directory that passed the check); its target is then walked with the
//! same rules. A link inside a kernel filesystem (`/proc/self`,
//! `/proc/self/fd/1`, the end of `/dev/stdout`) is the kernel's and is
//! followed by the kernel (a magic link names an open file, not a path).
//!
//! Allocation-free, panic-free and async-signal-safe (system calls on
//! stack buffers only): the library's log opens its file from inside
//! malloc or a signal handler. This is the one module of the contract
//! crate that does I/O: the library and the command must refuse the same
//! paths.

// A Refusal carries the directory's name for the message (200 bytes) and
// cannot be boxed: nothing here may allocate.
#![allow(clippy::result_large_err)]

use core::fmt;

/// The longest path walked (PATH_MAX), after links are substituted.
pub const PATH_MAX: usize = 4096;
const NAME_MAX: usize = 255;
/// Links followed in one walk before giving up (the kernel's limit).
const MAX_LINKS: u32 = 40;
/// Bytes of a directory's name kept for a message.
const AT_MAX: usize = 200;

/// Why a path was refused (with [`Refusal::errno`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A system call failed; the errno says it all.
    Errno,
    /// A directory on the way can be written by another user.
    Dir { uid: u32, mode: u32 },
    /// A symlink on the way belongs to another user.
    Link { uid: u32 },
    /// More than 40 links.
    Loops,
    /// The path, with its links substituted, is longer than PATH_MAX, or
    /// a name longer than NAME_MAX.
    TooLong,
    /// The path names a directory (ends with `/`, `.` or `..`).
    IsDir,
    /// A file of a kernel filesystem (`/proc`, `/sys`, cgroups, ...).
    Pseudo,
    /// A regular file or FIFO of another user.
    OtherUser { uid: u32, fifo: bool },
    /// A regular file with more than one link in a sticky directory.
    HardLink,
    /// Not a regular file, a character device or a FIFO.
    Kind,
    /// A FIFO nobody reads.
    NoReader,
}

/// A refused path: the errno a caller returns, why, and the directory or
/// link concerned (its path as walked, links substituted).
#[derive(Clone, Copy)]
pub struct Refusal {
    pub errno: i32,
    pub why: Why,
    at: [u8; AT_MAX],
    at_len: usize,
}

impl fmt::Debug for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Refusal({}, {:?}, {})", self.errno, self.why, self)
    }
}

impl Refusal {
    fn new(errno: i32, why: Why, at: &[u8]) -> Refusal {
        let mut r = Refusal {
            errno,
            why,
            at: [0; AT_MAX],
            at_len: 0,
        };
        let n = at.len().min(AT_MAX);
        if let (Some(d), Some(s)) = (r.at.get_mut(..n), at.get(..n)) {
            d.copy_from_slice(s);
        }
        r.at_len = n;
        r
    }

    /// A file of a kernel filesystem: refused (EPERM).
    pub fn pseudo() -> Refusal {
        Refusal::new(libc::EPERM, Why::Pseudo, b"")
    }

    fn errno_only(errno: i32) -> Refusal {
        Refusal::new(errno, Why::Errno, b"")
    }

    /// The directory or link concerned, as walked (at most 200 bytes).
    pub fn at(&self) -> &[u8] {
        self.at.get(..self.at_len).unwrap_or(&[])
    }

    /// Whether the errno alone says why (a failed system call), so that a
    /// caller may show it as it shows other errors.
    pub fn is_errno(&self) -> bool {
        self.why == Why::Errno
    }
}

struct Lossy<'a>(&'a [u8]);
impl fmt::Display for Lossy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{fffd}")?;
            }
        }
        if self.0.len() >= AT_MAX {
            f.write_str("...")?;
        }
        Ok(())
    }
}

/// An errno as std shows it, without allocating.
pub struct ErrnoText(pub i32);
impl fmt::Display for ErrnoText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 128];
        // SAFETY: the buffer and its length match; the XSI strerror_r writes
        // a NUL-terminated message into it.
        let r = unsafe { libc::strerror_r(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        let len = buf.iter().position(|&b| b == 0).unwrap_or(0);
        match core::str::from_utf8(buf.get(..len).unwrap_or(&[])) {
            Ok(m) if r == 0 && !m.is_empty() => write!(f, "{m} (os error {})", self.0),
            _ => write!(f, "Unknown error {} (os error {})", self.0, self.0),
        }
    }
}

/// What follows the path in a message: "a symlink owned by uid 1001 ...".
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = Lossy(self.at());
        let me = euid();
        match self.why {
            Why::Errno => write!(f, "{}", ErrnoText(self.errno)),
            Why::Dir { uid, .. } if uid != 0 && uid != me => write!(
                f,
                "directory {at} on the way belongs to uid {uid}, who could plant links in it; not used"
            ),
            Why::Dir { mode, .. } => write!(
                f,
                "directory {at} on the way is writable by other users (mode {:04o}, not sticky); not used",
                mode & 0o7777
            ),
            Why::Link { uid } if me == 0 => write!(
                f,
                "{at} is a symlink owned by uid {uid}, not by root; not followed"
            ),
            Why::Link { uid } => write!(
                f,
                "{at} is a symlink owned by uid {uid}, not by uid {me} or root; not followed"
            ),
            Why::Loops => f.write_str("too many levels of symlinks"),
            Why::TooLong => f.write_str("name too long (links substituted)"),
            Why::IsDir => f.write_str("names a directory"),
            Why::Pseudo => {
                f.write_str("is a file of a kernel filesystem (/proc, /sys); not written")
            }
            Why::OtherUser { uid, fifo } => write!(
                f,
                "is a {} of another user (uid {uid}, not {me}); not written",
                if fifo { "FIFO" } else { "file" }
            ),
            Why::HardLink => {
                f.write_str("is a hard link in a sticky world-writable directory; not written")
            }
            Why::Kind => {
                f.write_str("is not a regular file, a character device or a FIFO; not written")
            }
            Why::NoReader => f.write_str("is a FIFO with no reader"),
        }
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn errno() -> i32 {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: i32) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e }
}

/// Keeps the caller's errno across `f` (the library's lines must not change
/// the program's errno).
fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
    let saved = errno();
    let r = f();
    set_errno(saved);
    r
}

/// The file system types of the kernel's own files, which heaplive never
/// writes (a link to `/proc/sys/kernel/core_pattern`, `/sys/...`).
fn is_pseudo_fs(fd: i32) -> bool {
    // SAFETY: a zeroed out-struct; a bad fd is an error.
    let mut s: libc::statfs = unsafe { core::mem::zeroed() };
    if unsafe { libc::fstatfs(fd, &mut s) } != 0 {
        return false;
    }
    matches!(
        s.f_type as u64 & 0xffff_ffff,
        0x9fa0 // proc
            | 0x6265_6572 // sysfs
            | 0x0027_e0eb // cgroup
            | 0x6367_7270 // cgroup2
            | 0x6462_6720 // debugfs
            | 0x7472_6163 // tracefs
            | 0x7363_6673 // securityfs
            | 0xcafe_4a11 // bpf
            | 0xde5e_81e4 // efivarfs
            | 0x6265_6570 // configfs
            | 0x6165_676c // pstore
            | 0xf97c_ff8c // selinuxfs
            | 0x4341_5d53 // smackfs
            | 0x4249_4e4d // binfmt_misc
            | 0x6573_5543 // fusectl
    )
}

fn fstat(fd: i32) -> Result<libc::stat, i32> {
    // SAFETY: a zeroed out-struct; a bad fd is an error.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(errno());
    }
    Ok(st)
}

fn lstat_at(dir: i32, name: &Name) -> Result<libc::stat, i32> {
    // SAFETY: a NUL-terminated name, a zeroed out-struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    if unsafe { libc::fstatat(dir, name.ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(errno());
    }
    Ok(st)
}

fn kind(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

/// A directory reached by a checked walk (an `O_PATH` descriptor, closed
/// on drop).
pub struct Dir {
    fd: i32,
    /// Sticky and writable by others (`/tmp`): anyone may add entries.
    pub shared: bool,
    /// On a kernel filesystem (`/proc`, `/sys`).
    pub pseudo: bool,
}

impl fmt::Debug for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Dir(fd {}, shared {}, pseudo {})",
            self.fd, self.shared, self.pseudo
        )
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Target({:?}, {}, exists {}, magic {})",
            self.dir,
            Lossy(self.name.bytes()),
            self.st.is_some(),
            self.magic
        )
    }
}

impl Dir {
    /// The descriptor, for `*at` calls (valid while `self` lives).
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// An `O_RDONLY` descriptor of the same directory (for `getdents64`),
    /// the caller's to close.
    pub fn open_for_listing(&self) -> Option<i32> {
        // SAFETY: a NUL-terminated name; the result is checked.
        let fd = keeping_errno(|| unsafe {
            libc::openat(
                self.fd,
                c".".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        });
        (fd >= 0).then_some(fd)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if self.fd >= 0 {
            // SAFETY: our descriptor, closed once.
            keeping_errno(|| unsafe { libc::close(self.fd) });
        }
    }
}

/// A NUL-terminated file name of at most NAME_MAX bytes.
#[derive(Clone, Copy)]
pub struct Name {
    b: [u8; NAME_MAX + 1],
    len: usize,
}

impl Name {
    fn new(s: &[u8]) -> Option<Name> {
        if s.len() > NAME_MAX || s.contains(&0) {
            return None;
        }
        let mut n = Name {
            b: [0; NAME_MAX + 1],
            len: s.len(),
        };
        n.b.get_mut(..s.len())?.copy_from_slice(s);
        Some(n)
    }

    /// The name's bytes, without the NUL.
    pub fn bytes(&self) -> &[u8] {
        self.b.get(..self.len).unwrap_or(&[])
    }

    /// The NUL-terminated name, for system calls.
    pub fn ptr(&self) -> *const libc::c_char {
        self.b.as_ptr().cast()
    }
}

/// Where a path leads: its directory (checked), the last name in it, and
/// what is there (`lstat`; None when nothing is).
pub struct Target {
    pub dir: Dir,
    pub name: Name,
    pub st: Option<libc::stat>,
    /// The name is a link inside a kernel filesystem (`/proc/self/fd/1`,
    /// where `/dev/stdout` leads): open it by following it.
    pub magic: bool,
}

/// The last name of a walk: the name, what is there, whether it is a
/// magic link.
type Last = (Name, Option<libc::stat>, bool);

struct Walk {
    buf: [u8; PATH_MAX],
    len: usize,
    dir: Dir,
    links: u32,
    euid: u32,
}

/// Opens `name` in `at` as a directory (following it only when `follow`)
/// and checks it: root's or ours, and not writable by others unless
/// sticky. `shown` names it in a refusal.
fn open_dir_checked(at: i32, name: &Name, follow: bool, shown: &[u8]) -> Result<Dir, Refusal> {
    let mut flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: a NUL-terminated name.
    let fd = unsafe { libc::openat(at, name.ptr(), flags) };
    if fd < 0 {
        return Err(Refusal::errno_only(errno()));
    }
    let dir = Dir {
        fd,
        shared: false,
        pseudo: false,
    };
    let st = fstat(fd).map_err(Refusal::errno_only)?;
    let me = euid();
    let sticky = st.st_mode & libc::S_ISVTX != 0;
    let writable = st.st_mode & 0o022 != 0;
    if st.st_uid != 0 && st.st_uid != me || writable && !sticky {
        return Err(Refusal::new(
            libc::EACCES,
            Why::Dir {
                uid: st.st_uid,
                mode: st.st_mode,
            },
            shown,
        ));
    }
    let mut dir = dir;
    dir.shared = sticky && writable;
    dir.pseudo = is_pseudo_fs(fd);
    Ok(dir)
}

impl Walk {
    fn new(path: &[u8]) -> Result<Walk, Refusal> {
        if path.is_empty() {
            return Err(Refusal::errno_only(libc::ENOENT));
        }
        if path.contains(&0) {
            return Err(Refusal::errno_only(libc::EINVAL));
        }
        if path.len() > PATH_MAX {
            return Err(Refusal::new(libc::ENAMETOOLONG, Why::TooLong, b""));
        }
        let mut buf = [0u8; PATH_MAX];
        buf.get_mut(..path.len())
            .ok_or(Refusal::errno_only(libc::ENAMETOOLONG))?
            .copy_from_slice(path);
        let dir = if path.first() == Some(&b'/') {
            Self::root()?
        } else {
            let dot = Name::new(b".").ok_or(Refusal::errno_only(libc::EINVAL))?;
            open_dir_checked(libc::AT_FDCWD, &dot, false, b"(the current directory)")?
        };
        Ok(Walk {
            buf,
            len: path.len(),
            dir,
            links: 0,
            euid: euid(),
        })
    }

    fn root() -> Result<Dir, Refusal> {
        let root = Name::new(b"/").ok_or(Refusal::errno_only(libc::EINVAL))?;
        open_dir_checked(libc::AT_FDCWD, &root, false, b"/")
    }

    fn shown(&self, end: usize) -> &[u8] {
        self.buf.get(..end).unwrap_or(&[])
    }

    /// Replaces the link `name` at `buf[cs..ce]` by its target: the walk
    /// goes on from `cs` (a relative target) or from `/`.
    fn substitute(&mut self, name: &Name, cs: usize, ce: usize) -> Result<usize, Refusal> {
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(Refusal::new(libc::ELOOP, Why::Loops, b""));
        }
        let too_long = || Refusal::new(libc::ENAMETOOLONG, Why::TooLong, b"");
        if cs > ce || ce > self.len || self.len > PATH_MAX {
            return Err(too_long());
        }
        let rest = self.len - ce;
        let rest_at = PATH_MAX - rest;
        self.buf.copy_within(ce..self.len, rest_at);
        if rest_at <= cs {
            return Err(too_long());
        }
        let space = rest_at - cs;
        let Some(dest) = self.buf.get_mut(cs..rest_at) else {
            return Err(too_long());
        };
        // SAFETY: a NUL-terminated name; the buffer and its length match.
        let n =
            unsafe { libc::readlinkat(self.dir.fd, name.ptr(), dest.as_mut_ptr().cast(), space) };
        if n < 0 {
            return Err(Refusal::errno_only(errno()));
        }
        let n = n as usize;
        if n == 0 {
            return Err(Refusal::errno_only(libc::ENOENT));
        }
        if n >= space {
            return Err(too_long());
        }
        let keep = if self.buf.get(cs) == Some(&b'/') {
            self.buf.copy_within(cs..cs + n, 0);
            self.dir = Self::root()?;
            0
        } else {
            cs
        };
        self.buf.copy_within(rest_at..PATH_MAX, keep + n);
        self.len = keep + n + rest;
        Ok(keep)
    }

    /// Walks to the last component (`want_target`) or through every
    /// component (a directory).
    fn run(mut self, want_target: bool) -> Result<(Dir, Option<Last>), Refusal> {
        let mut pos = 0;
        loop {
            while self.buf.get(pos) == Some(&b'/') && pos < self.len {
                pos += 1;
            }
            if pos >= self.len {
                if want_target {
                    return Err(Refusal::new(libc::EISDIR, Why::IsDir, b""));
                }
                return Ok((self.dir, None));
            }
            let cs = pos;
            let mut ce = cs;
            while ce < self.len && self.buf.get(ce) != Some(&b'/') {
                ce += 1;
            }
            let mut after = ce;
            while after < self.len && self.buf.get(after) == Some(&b'/') {
                after += 1;
            }
            let last = after >= self.len;
            let comp = self.buf.get(cs..ce).unwrap_or(&[]);
            let name =
                Name::new(comp).ok_or(Refusal::new(libc::ENAMETOOLONG, Why::TooLong, b""))?;
            if last && want_target {
                if ce < self.len || comp == b"." || comp == b".." {
                    return Err(Refusal::new(libc::EISDIR, Why::IsDir, b""));
                }
                let st = match lstat_at(self.dir.fd, &name) {
                    Ok(st) => Some(st),
                    Err(libc::ENOENT) => None,
                    Err(e) => return Err(Refusal::errno_only(e)),
                };
                if let Some(st) = st.filter(|st| kind(st) == libc::S_IFLNK) {
                    self.check_link(&st, ce)?;
                    if !self.dir.pseudo {
                        pos = self.substitute(&name, cs, ce)?;
                        continue;
                    }
                    return Ok((self.dir, Some((name, Some(st), true))));
                }
                return Ok((self.dir, Some((name, st, false))));
            }
            if comp == b"." {
                pos = ce;
                continue;
            }
            let st = lstat_at(self.dir.fd, &name).map_err(Refusal::errno_only)?;
            if kind(&st) == libc::S_IFLNK {
                self.check_link(&st, ce)?;
                if !self.dir.pseudo {
                    pos = self.substitute(&name, cs, ce)?;
                    continue;
                }
                // The kernel's link (/proc/self, /proc/self/cwd): the
                // kernel follows it, and where it leads is checked.
                self.links += 1;
                if self.links > MAX_LINKS {
                    return Err(Refusal::new(libc::ELOOP, Why::Loops, b""));
                }
                self.dir = open_dir_checked(self.dir.fd, &name, true, self.shown(ce))?;
            } else {
                self.dir = open_dir_checked(self.dir.fd, &name, false, self.shown(ce))?;
            }
            pos = ce;
        }
    }

    fn check_link(&self, st: &libc::stat, ce: usize) -> Result<(), Refusal> {
        if st.st_uid != 0 && st.st_uid != self.euid {
            return Err(Refusal::new(
                libc::ELOOP,
                Why::Link { uid: st.st_uid },
                self.shown(ce),
            ));
        }
        Ok(())
    }
}

/// Walks `path` to its last component (see the module's rules). The
/// caller's errno is kept.
pub fn open_target(path: &[u8]) -> Result<Target, Refusal> {
    keeping_errno(|| {
        if path.last() == Some(&b'/') {
            return Err(Refusal::new(libc::EISDIR, Why::IsDir, b""));
        }
        let (dir, t) = Walk::new(path)?.run(true)?;
        let (name, st, magic) = t.ok_or(Refusal::new(libc::EISDIR, Why::IsDir, b""))?;
        Ok(Target {
            dir,
            name,
            st,
            magic,
        })
    })
}

/// Walks `path` as a directory (every component checked, the last one
/// too). The caller's errno is kept.
pub fn open_dir(path: &[u8]) -> Result<Dir, Refusal> {
    keeping_errno(|| Ok(Walk::new(path)?.run(false)?.0))
}

/// Checks what an open descriptor for writing into (not replacing) is: a
/// character device, a FIFO (ours or root's, unless reached through a
/// magic link: the program's own descriptor), or a regular file of our
/// euid, with one link when its directory is shared, not on a kernel
/// filesystem. Err: the refusal (the descriptor is left open).
pub fn check_opened(fd: i32, shared: bool, magic: bool) -> Result<libc::stat, Refusal> {
    keeping_errno(|| {
        let st = fstat(fd).map_err(Refusal::errno_only)?;
        let me = euid();
        let refuse = |why| Err(Refusal::new(libc::EPERM, why, b""));
        match kind(&st) {
            libc::S_IFCHR => Ok(st),
            libc::S_IFIFO if magic || st.st_uid == me || st.st_uid == 0 => Ok(st),
            libc::S_IFIFO => refuse(Why::OtherUser {
                uid: st.st_uid,
                fifo: true,
            }),
            libc::S_IFREG if st.st_uid != me => refuse(Why::OtherUser {
                uid: st.st_uid,
                fifo: false,
            }),
            libc::S_IFREG if shared && !magic && st.st_nlink > 1 => refuse(Why::HardLink),
            libc::S_IFREG if is_pseudo_fs(fd) => refuse(Why::Pseudo),
            libc::S_IFREG => Ok(st),
            _ => refuse(Why::Kind),
        }
    })
}

/// Opens `t` for writing into it (`flags`: `O_WRONLY` or `O_RDWR`, with
/// `O_APPEND`, `O_CREAT` as wanted; `mode` for a file created) and checks
/// what was opened ([`check_opened`]). Always `O_NONBLOCK` (a FIFO with no
/// reader fails at once), `O_NOCTTY`, `O_CLOEXEC`, and `O_NOFOLLOW` unless
/// `t` is a magic link. Returns the descriptor, the caller's to close.
pub fn open_into(t: &Target, flags: i32, mode: u32) -> Result<(i32, libc::stat), Refusal> {
    keeping_errno(|| {
        let mut fl = flags | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        if !t.magic {
            fl |= libc::O_NOFOLLOW;
        }
        // SAFETY: a NUL-terminated name.
        let fd = unsafe { libc::openat(t.dir.fd(), t.name.ptr(), fl, mode as libc::c_uint) };
        if fd < 0 {
            return Err(match errno() {
                libc::ENXIO => Refusal::new(libc::ENXIO, Why::NoReader, b""),
                e => Refusal::errno_only(e),
            });
        }
        match check_opened(fd, t.dir.shared, t.magic) {
            Ok(st) => Ok((fd, st)),
            Err(r) => {
                // SAFETY: our descriptor, not published.
                unsafe { libc::close(fd) };
                Err(r)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::{Path, PathBuf};

    fn root() -> bool {
        euid() == 0
    }

    fn base(tag: &str) -> PathBuf {
        // A directory of ours, 0755, in $TMPDIR (sticky /tmp).
        let d = std::env::temp_dir().join(format!("safe-path-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    fn target(p: &Path) -> Result<Target, Refusal> {
        open_target(p.as_os_str().as_bytes())
    }

    fn chown(p: &Path, uid: u32) {
        std::os::unix::fs::lchown(p, Some(uid), None).unwrap();
    }

    #[test]
    fn a_plain_path_leads_to_its_directory_and_name() {
        let d = base("plain");
        std::fs::write(d.join("f"), b"x").unwrap();
        let t = target(&d.join("f")).unwrap();
        assert_eq!(t.name.bytes(), b"f");
        assert!(t.st.is_some_and(|s| kind(&s) == libc::S_IFREG));
        assert!(!t.magic);
        let t = target(&d.join("missing")).unwrap();
        assert!(t.st.is_none());
        assert_eq!(target(&d.join("nodir/x")).unwrap_err().errno, libc::ENOENT);
        std::fs::create_dir(d.join("sub")).unwrap();
        for p in ["/", "f/", "sub/.", "sub/..", "sub//"] {
            let p = d.join(p);
            let e = target(&p).map(|_| ()).unwrap_err();
            assert_eq!((e.errno, e.why), (libc::EISDIR, Why::IsDir), "{p:?}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Our own links are followed (relative, absolute, chains), their
    /// targets walked again; another user's are not.
    #[test]
    fn links_are_followed_only_when_ours_or_roots() {
        let d = base("links");
        std::fs::create_dir(d.join("real")).unwrap();
        symlink("real", d.join("rel")).unwrap();
        symlink(d.join("real"), d.join("abs")).unwrap();
        symlink("rel/f", d.join("chain")).unwrap();
        let t = target(&d.join("rel/f")).unwrap();
        assert_eq!(t.name.bytes(), b"f");
        let t = target(&d.join("chain")).unwrap();
        assert_eq!(t.name.bytes(), b"f");
        assert!(t.st.is_none());
        let t = target(&d.join("abs/../abs/g")).unwrap();
        assert_eq!(t.name.bytes(), b"g");
        symlink("loop", d.join("loop")).unwrap();
        assert_eq!(target(&d.join("loop")).unwrap_err().why, Why::Loops);
        if root() {
            chown(&d.join("rel"), 4242);
            let e = target(&d.join("rel/f")).unwrap_err();
            assert_eq!((e.errno, e.why), (libc::ELOOP, Why::Link { uid: 4242 }));
            assert_eq!(e.at(), d.join("rel").as_os_str().as_bytes());
            let e = target(&d.join("chain")).unwrap_err();
            assert_eq!(e.why, Why::Link { uid: 4242 }, "the link inside the chain");
            symlink(d.join("real/x"), d.join("last")).unwrap();
            chown(&d.join("last"), 4242);
            let e = target(&d.join("last")).unwrap_err();
            assert_eq!(e.why, Why::Link { uid: 4242 }, "the last component");
            assert!(e.to_string().contains("owned by uid 4242"), "{e}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A directory another user may write (theirs, or 0777 without the
    /// sticky bit) is refused wherever it is on the way; a sticky one is
    /// passed, its entries checked.
    #[test]
    fn directories_others_can_write_are_refused_unless_sticky() {
        let d = base("dirs");
        let open = d.join("open");
        std::fs::create_dir_all(open.join("sub")).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = target(&open.join("sub/f")).unwrap_err();
        assert_eq!(e.errno, libc::EACCES);
        assert!(matches!(e.why, Why::Dir { mode, .. } if mode & 0o777 == 0o777));
        assert_eq!(e.at(), open.as_os_str().as_bytes());
        assert!(e.to_string().contains("writable by other users"), "{e}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let t = target(&open.join("f")).unwrap();
        assert!(t.dir.shared);
        assert!(!target(&open.join("sub/f")).unwrap().dir.shared);
        if root() {
            let theirs = d.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            chown(&theirs, 4242);
            let e = target(&theirs.join("f")).unwrap_err();
            assert_eq!(
                e.why,
                Why::Dir {
                    uid: 4242,
                    mode: 0o40755
                }
            );
            assert!(e.to_string().contains("belongs to uid 4242"), "{e}");
            assert!(open_dir(theirs.as_os_str().as_bytes()).is_err());
        }
        assert!(open_dir(d.as_os_str().as_bytes()).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// /dev/stdout (root's link to the kernel's /proc/self/fd/1) leads to
    /// a magic link, followed by the kernel; /proc/sys is refused.
    #[test]
    fn dev_stdout_is_a_magic_link_and_proc_files_are_refused() {
        let t = open_target(b"/dev/stdout").unwrap();
        assert!(t.magic);
        assert_eq!(t.name.bytes(), b"1");
        let t = open_target(b"/proc/sys/kernel/core_pattern").unwrap();
        assert!(t.dir.pseudo && !t.magic);
        // Opened read-only here: the check is on what is opened.
        let (fd, _) = {
            // SAFETY: a NUL-terminated name.
            let fd = unsafe { libc::openat(t.dir.fd(), t.name.ptr(), libc::O_RDONLY) };
            assert!(fd >= 0);
            (fd, ())
        };
        assert_eq!(check_opened(fd, false, false).unwrap_err().why, Why::Pseudo);
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
    }

    #[test]
    fn what_is_opened_is_checked() {
        let d = base("opened");
        let t = target(&d.join("new")).unwrap();
        let (fd, st) = open_into(&t, libc::O_WRONLY | libc::O_CREAT, 0o600).unwrap();
        assert_eq!(kind(&st), libc::S_IFREG);
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
        let c = std::ffi::CString::new(d.join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = target(&d.join("fifo")).unwrap();
        let e = open_into(&t, libc::O_WRONLY, 0).map(|_| ()).unwrap_err();
        assert_eq!((e.errno, e.why), (libc::ENXIO, Why::NoReader));
        std::fs::create_dir(d.join("dir")).unwrap();
        let t = target(&d.join("dir")).unwrap();
        assert!(open_into(&t, libc::O_WRONLY, 0).is_err());
        if root() {
            std::fs::write(d.join("theirs"), b"x").unwrap();
            chown(&d.join("theirs"), 4242);
            let t = target(&d.join("theirs")).unwrap();
            let e = open_into(&t, libc::O_WRONLY, 0).map(|_| ()).unwrap_err();
            assert_eq!(
                e.why,
                Why::OtherUser {
                    uid: 4242,
                    fifo: false
                }
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn long_and_odd_paths_fail_without_panicking() {
        let long = vec![b'a'; PATH_MAX + 1];
        assert_eq!(open_target(&long).unwrap_err().why, Why::TooLong);
        let name = [b"/".as_slice(), &[b'b'; 300]].concat();
        assert_eq!(open_target(&name).unwrap_err().why, Why::TooLong);
        assert_eq!(open_target(b"").unwrap_err().errno, libc::ENOENT);
        assert_eq!(open_target(b"/a\0b").unwrap_err().errno, libc::EINVAL);
        // A link whose target fills the buffer.
        let d = base("long");
        let t = format!("{}/{}", "c".repeat(200), "d/".repeat(1940));
        symlink(&t, d.join("l")).unwrap();
        let e = target(&d.join("l/x")).unwrap_err();
        assert_eq!((e.errno, e.why), (libc::ENAMETOOLONG, Why::TooLong));
        std::fs::remove_dir_all(&d).unwrap();
    }
}

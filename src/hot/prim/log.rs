//! heaplive's own lines (warnings, dump summaries, leak warnings): one
//! write(2) per line, so lines from many threads never interleave, to
//! stderr or to `HEAPLIVE_LOG`.
//!
//! stderr may be closed, or closed and its number reused by the program for
//! one of its own files: we write to fd 2 only while it is still the file it
//! was at load (same device and inode). A broken pipe raises no SIGPIPE,
//! a file past RLIMIT_FSIZE no SIGXFSZ (`sys::QuietWrites`).

use crate::hot::sys::{self, StackBuf};
use core::fmt::Write;
use core::sync::atomic::{AtomicI32, Ordering::*};
use heaplive_format::safe_path;

/// The file stderr was at load.
static STDERR: sys::FdIdentity = sys::FdIdentity::new();
/// The HEAPLIVE_LOG file, once opened.
static LOG: sys::OwnFd = sys::OwnFd::new();
/// 0 not tried yet, 1 open, 2 failed or not configured (stderr is used).
static LOG_STATE: AtomicI32 = AtomicI32::new(0);
/// `heaplive.<euid>.log` next to the dump files, for lines that stderr would
/// lose (HEAPLIVE_LOG unset, stderr closed, /dev/null, or replaced by the
/// program: php-fpm's workers); states as LOG_STATE's.
static NEAR: sys::OwnFd = sys::OwnFd::new();
static NEAR_STATE: AtomicI32 = AtomicI32::new(0);

/// Remembers which file stderr is. Called once at load.
pub fn init() {
    STDERR.remember(2);
}

fn stderr_is_ours() -> bool {
    STDERR.matches(2)
}

/// The log file's descriptor, opening it (again, if the program closed
/// ours) as needed; None means stderr.
fn log_fd() -> Option<i32> {
    if let Some(known) = known_fd(&LOG, &LOG_STATE) {
        return known;
    }
    let cfg = crate::hot::config::get();
    if cfg.log.is_empty() {
        LOG_STATE.store(2, Release);
        return None;
    }
    let mut path = [0u8; 4097];
    path[..cfg.log.as_bytes().len()].copy_from_slice(cfg.log.as_bytes());
    let fd = match open_log(&path, cfg.log.as_bytes().len()) {
        Ok(fd) => fd,
        Err(why) => {
            LOG_STATE.store(2, Release);
            let mut b = StackBuf::<600>::new();
            let _ = writeln!(
                b,
                "heaplive: cannot open HEAPLIVE_LOG='{}' ({}); using stderr",
                cfg.log.as_str(),
                why
            );
            write_stderr(b.as_bytes());
            return None;
        }
    };
    keep_fd(&LOG, &LOG_STATE, fd)
}

/// A log file's descriptor as far as its state (`LOG_STATE`'s values)
/// tells: `Some` of the open file, or of None (failed or not configured);
/// None when it is to be opened now (again, if the program closed ours).
fn known_fd(fd: &sys::OwnFd, state: &AtomicI32) -> Option<Option<i32>> {
    match state.load(Acquire) {
        2 => Some(None),
        1 => {
            if let Some(f) = fd.get() {
                return Some(Some(f));
            }
            // The program closed it behind our back: reopen the path.
            fd.forget();
            None
        }
        _ => None,
    }
}

/// Keeps `opened` as the log file of `fd` (and its `state`): the
/// descriptor kept.
fn keep_fd(fd: &sys::OwnFd, state: &AtomicI32, opened: i32) -> Option<i32> {
    let old = fd.set(opened);
    if old >= 0 {
        // SAFETY: a descriptor of ours that lost a race; nobody uses it.
        unsafe { libc::close(old) };
    }
    state.store(1, Release);
    fd.get()
}

/// Opens HEAPLIVE_LOG (or `heaplive.<euid>.log`) for appending with the
/// rules of the README's security model (`safe_path`, allocation-free):
/// reached by a checked walk (no directory on the way that another user
/// can write unless sticky, no symlink that is not ours or root's), opened
/// `O_APPEND|O_CREAT|O_NOFOLLOW|O_NONBLOCK` (a FIFO with no reader fails
/// with ENXIO instead of blocking), and kept only when it is a character
/// device, a FIFO, or a regular file owned by our euid (with one link in a
/// sticky world-writable directory), not of /proc or /sys. The caller's
/// errno is kept.
// A Refusal holds its message's directory name and cannot be boxed here
// (nothing may allocate).
#[allow(clippy::result_large_err)]
fn open_log(path: &[u8; 4097], len: usize) -> Result<i32, safe_path::Refusal> {
    let p = path.get(..len).unwrap_or(&[]);
    let t = safe_path::open_target(p)?;
    let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT;
    safe_path::open_into(&t, flags, 0o644).map(|(fd, _)| fd)
}

fn write_stderr(b: &[u8]) {
    if stderr_is_ours() {
        write_no_sigpipe(2, b);
    }
}

/// Whether a line written to fd 2 reaches someone: fd 2 is still the file
/// it was at load, and that is not /dev/null.
fn stderr_reaches_someone() -> bool {
    if !stderr_is_ours() {
        return false;
    }
    // SAFETY: st a valid out-pointer; fstat keeps errno on success only.
    let saved = sys::errno();
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    let ok = unsafe { libc::fstat(2, &mut st) } == 0;
    sys::set_errno(saved);
    !(ok && st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3))
}

/// The directory the dump files go to, as the template says before any
/// file name is made: its directory part (relative to the start
/// directory), with `%p`, `%e` and `%%` expanded; a `%n` there, or an
/// overlong name, gives the start directory.
fn dump_dir(out: &mut [u8; 4097]) -> usize {
    let cfg = crate::hot::config::get();
    let t = cfg.output_template().as_bytes();
    let dir = match t.iter().rposition(|&b| b == b'/') {
        Some(0) => &t[..1],
        Some(i) => &t[..i],
        None => &[][..],
    };
    let mut b = StackBuf::<4097>::new();
    if dir.first() != Some(&b'/') {
        b.push_bytes(cfg.start_dir.as_bytes());
        if !dir.is_empty() {
            b.push_bytes(b"/");
        }
    }
    let mut i = 0;
    let mut plain = true;
    while i < dir.len() {
        match (dir[i], dir.get(i + 1)) {
            (b'%', Some(b'p')) => {
                let _ = write!(b, "{}", crate::hot::pid::get());
                i += 2;
            }
            (b'%', Some(b'e')) => {
                b.push_bytes(cfg.exe.as_bytes());
                i += 2;
            }
            (b'%', Some(b'%')) => {
                b.push_bytes(b"%");
                i += 2;
            }
            (b'%', _) => {
                plain = false;
                break;
            }
            (c, _) => {
                b.push_bytes(&[c]);
                i += 1;
            }
        }
    }
    let bytes = if plain && b.as_bytes().len() < 4000 {
        b.as_bytes()
    } else {
        cfg.start_dir.as_bytes()
    };
    let n = bytes.len().min(4000);
    out[..n].copy_from_slice(&bytes[..n]);
    n
}

/// Appends `/heaplive.<euid>.log` and a NUL to the directory `path[..n]`
/// (one file per user: the first writer owns it, and another user's file
/// is not appended to).
fn with_name(path: &mut [u8; 4097], n: usize) -> usize {
    let mut b = StackBuf::<64>::new();
    if n > 0 && path[n - 1] != b'/' {
        b.push_bytes(b"/");
    }
    // SAFETY: geteuid has no preconditions.
    let _ = write!(b, "heaplive.{}.log", unsafe { libc::geteuid() });
    let name = b.as_bytes();
    path[n..n + name.len()].copy_from_slice(name);
    path[n + name.len()] = 0;
    n + name.len()
}

/// The descriptor of `heaplive.<euid>.log` next to the dump files, opening it
/// (with HEAPLIVE_LOG's checks) when first needed; None when it cannot be.
fn near_fd() -> Option<i32> {
    if let Some(known) = known_fd(&NEAR, &NEAR_STATE) {
        return known;
    }
    let mut path = [0u8; 4097];
    let mut n = dump_dir(&mut path);
    n = with_name(&mut path, n);
    let mut opened = open_log(&path, n);
    if opened.is_err() {
        // Where dumps fall back to: $TMPDIR or /tmp.
        let t = crate::hot::config::get().tmpdir.as_bytes();
        n = t.len().min(4000);
        path[..n].copy_from_slice(&t[..n]);
        n = with_name(&mut path, n);
        opened = open_log(&path, n);
    }
    match opened {
        Ok(fd) => keep_fd(&NEAR, &NEAR_STATE, fd),
        Err(_) => {
            // Nobody would read a line saying so.
            NEAR_STATE.store(2, Release);
            None
        }
    }
}

/// write(2) of a whole line that can neither block the program for long
/// nor raise SIGPIPE or SIGXFSZ in it (`sys::write_all`).
fn write_no_sigpipe(fd: i32, b: &[u8]) {
    let saved = sys::errno();
    // A full pipe nobody reads must not stall the program (the exit
    // summary runs on its thread): give it a moment, then drop the line.
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, 100) } == 1 && pfd.revents & libc::POLLOUT != 0;
    if ready {
        sys::write_all(fd, b);
    }
    sys::set_errno(saved);
}

/// Writes one whole line (a newline is added) to the log destination.
pub fn write_line(text: &[u8]) {
    let mut b = StackBuf::<2048>::new();
    b.push_bytes(&text[..text.len().min(2040)]);
    b.push_bytes(b"\n");
    match log_fd() {
        Some(fd) => write_no_sigpipe(fd, b.as_bytes()),
        None if stderr_reaches_someone() => write_no_sigpipe(2, b.as_bytes()),
        None => {
            if let Some(fd) = near_fd() {
                write_no_sigpipe(fd, b.as_bytes());
            }
        }
    }
}

/// Formats and writes one line, without allocating.
pub fn line(args: core::fmt::Arguments) {
    let mut b = StackBuf::<2048>::new();
    let _ = b.write_fmt(args);
    write_line(b.as_bytes());
}

/// Human units and thousands separators, from the contract crate (the
/// command prints the same).
pub use heaplive_format::units::{Grouped, human_bytes};

//! Dump files: the path template, writing under a temporary name and
//! renaming when complete, the fallback directory, and the status file that
//! `heaplive dump` reads.

use heaplive_format::{safe_path, status};
use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

pub use heaplive_format::template::{expand, fallback_name};

/// The pprof file that goes with a folded file name.
pub fn pprof_name(folded: &Path) -> PathBuf {
    let v = heaplive_format::template::pprof_name(folded.as_os_str().as_bytes());
    PathBuf::from(std::ffi::OsStr::from_bytes(&v))
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn lstat(p: &Path) -> io::Result<libc::stat> {
    let c = cpath(p)?;
    // SAFETY: NUL-terminated path, zeroed out-struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::lstat(c.as_ptr(), &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

fn kind(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

fn refused(path: &Path, errno: i32, why: &str) -> io::Error {
    // Keeps the errno (heaplive_dump returns it) and says why in the text.
    let e = io::Error::from_raw_os_error(errno);
    io::Error::new(
        e.kind(),
        Refused(errno, format!("{}: {why}", path.display())),
    )
}

/// An error that keeps its errno for `heaplive_dump`.
#[derive(Debug)]
pub struct Refused(pub i32, pub String);
impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}
impl std::error::Error for Refused {}

/// The errno an error of `write_file` stands for.
pub fn errno_of(e: &io::Error) -> i32 {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.get_ref().and_then(|r| r.downcast_ref::<Refused>()) {
        Some(r) => r.0,
        None => libc::EIO,
    }
}

/// The temporary name of a file being written: a hidden sibling, so that
/// no glob for dumps (`*.folded`, `heaplive.*`) ever matches it.
const TMP_TAG: &str = ".heaplive-tmp.";

#[cfg(test)]
fn temp_name(path: &Path, pid: u32) -> PathBuf {
    let name = path.file_name().unwrap_or_default();
    let mut t = std::ffi::OsString::from(".");
    t.push(name);
    t.push(format!("{TMP_TAG}{pid}"));
    path.with_file_name(t)
}

/// Directories this process cleaned already (`clean_dead_temps_once`).
static CLEANED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// `clean_dead_temps` at the first dump into `dir` only: listing a
/// directory of thousands of files (/tmp, a server's working directory)
/// costs milliseconds, and a server dumping every minute would pay it
/// each time for leftovers that only a process killed meanwhile could
/// add (which the next process writing there removes).
fn clean_dead_temps_once(dir: &Path) {
    // try_lock: a child forked while its parent's dump held the lock
    // (a fork that did not wait for the dump) cleans, rather than waits.
    if let Ok(mut done) = CLEANED.try_lock() {
        if done.iter().any(|d| d == dir) {
            return;
        }
        if done.len() >= 16 {
            done.remove(0);
        }
        done.push(dir.to_path_buf());
    }
    clean_dead_temps(dir);
}

/// Removes the temporary files that processes which died mid-dump (SIGKILL)
/// left in `dir`: ours (same owner), regular, of a pid that is gone. Only in
/// a directory the checked walk reaches, through its descriptor.
pub fn clean_dead_temps(dir: &Path) {
    let d = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if let Ok(d) = safe_path::open_dir(d.as_os_str().as_bytes()) {
        clean_dead_temps_in(&d);
    }
}

fn clean_dead_temps_in(dir: &safe_path::Dir) {
    // Not std::fs::read_dir: opendir allocates with glibc's malloc. Only
    // the dot files that look like ours are copied out of the listing.
    let ours = |b: &[u8]| b.first() == Some(&b'.') && find(b, TMP_TAG.as_bytes()).is_some();
    let Some(entries) = crate::background::dir::names_in(dir, ours) else {
        return;
    };
    let me = crate::hot::sys::getpid();
    for name in entries {
        let b = name.as_bytes();
        let Some(pos) = find(b, TMP_TAG.as_bytes()) else {
            continue;
        };
        let Some(pid) = std::str::from_utf8(&b[pos + TMP_TAG.len()..])
            .ok()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid as u32 == me {
            continue;
        }
        // SAFETY: signal 0 only checks that the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if !gone {
            continue;
        }
        if let Ok(st) = lstat_at(dir, &name)
            && kind(&st) == libc::S_IFREG
            && st.st_uid == euid()
        {
            unlink_at(dir, &name);
        }
    }
}

fn lstat_at(dir: &safe_path::Dir, name: &std::ffi::OsStr) -> io::Result<libc::stat> {
    let c =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: NUL-terminated name, zeroed out-struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(dir.fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

fn unlink_at(dir: &safe_path::Dir, name: &std::ffi::OsStr) {
    if let Ok(c) = CString::new(name.as_bytes()) {
        // SAFETY: NUL-terminated name in a directory descriptor of ours.
        unsafe { libc::unlinkat(dir.fd(), c.as_ptr(), 0) };
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The error of a walk `safe_path` refused: a failed system call as std
/// shows it, a refusal with its reason (the caller names the path).
fn walk_error(r: &safe_path::Refusal) -> io::Error {
    let e = io::Error::from_raw_os_error(r.errno);
    if r.is_errno() {
        return e;
    }
    io::Error::new(e.kind(), Refused(r.errno, r.to_string()))
}

/// Writes `fill`'s bytes at `path`, reached by `safe_path`'s checked walk
/// (no directory on the way that another user can write unless sticky, no
/// symlink that is not ours or root's; see the README's security model),
/// never replacing what is there unless it is a regular file of ours:
/// - nothing there, or a regular file owned by our euid: write a hidden
///   temporary sibling (0600, `O_EXCL|O_NOFOLLOW`, in the checked
///   directory's descriptor) and rename it into place within that
///   directory (when nothing was there, refusing to replace what appeared
///   meanwhile);
/// - a character device, a FIFO, or the kernel's link to an open file
///   (`/dev/stdout`): write into it (`O_NONBLOCK` open, so a FIFO without a
///   reader fails with ENXIO instead of blocking);
/// - anything else (a directory, a block device, a socket, another user's
///   file, a file of /proc or /sys): refused, with the errno in the error.
pub fn write_atomic(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    // A pipe whose reader has gone, a file past RLIMIT_FSIZE: the write
    // fails (EPIPE, EFBIG) and the temporary is removed; the host gets no
    // SIGPIPE or SIGXFSZ.
    let _quiet = crate::hot::sys::QuietWrites::new();
    let t = safe_path::open_target(path.as_os_str().as_bytes()).map_err(|r| walk_error(&r))?;
    let st = t.st;
    if t.magic {
        return write_into(&t, fill);
    }
    match st.as_ref().map(kind) {
        None | Some(libc::S_IFREG) if t.dir.pseudo => {
            Err(walk_error(&safe_path::Refusal::pseudo()))
        }
        None => replace(&t, false, fill),
        Some(libc::S_IFREG) => {
            let owner = st.as_ref().map_or(0, |s| s.st_uid);
            if owner != euid() {
                return Err(refused(
                    path,
                    libc::EEXIST,
                    &format!("exists and belongs to uid {owner}; not replaced"),
                ));
            }
            replace(&t, true, fill)
        }
        Some(libc::S_IFCHR | libc::S_IFIFO) => write_into(&t, fill),
        Some(libc::S_IFDIR) => Err(refused(path, libc::EISDIR, "is a directory")),
        Some(_) => Err(refused(
            path,
            libc::EEXIST,
            "is not a regular file, a character device or a FIFO; not replaced",
        )),
    }
}

/// Writes into what `t` names (a device, a FIFO with a reader, or, through
/// the kernel's link to an open file, a regular file of ours), without
/// replacing it.
fn write_into(
    t: &safe_path::Target,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let (fd, st) = safe_path::open_into(t, libc::O_WRONLY, 0).map_err(|r| walk_error(&r))?;
    // SAFETY: fd is ours.
    let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    if kind(&st) == libc::S_IFREG {
        file.set_len(0)?;
    }
    // Blocking writes from here on: a reader is there.
    // SAFETY: fcntl on our descriptor.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    let mut w = io::BufWriter::with_capacity(1 << 16, file);
    fill(&mut w).and_then(|_| w.flush())
}

/// The hidden temporary sibling of `name`, NUL-terminated.
fn temp_name_c(name: &[u8], pid: u32) -> io::Result<CString> {
    let mut t = Vec::with_capacity(name.len() + 32);
    t.push(b'.');
    t.extend_from_slice(name);
    t.extend_from_slice(format!("{TMP_TAG}{pid}").as_bytes());
    CString::new(t).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Writes the hidden temporary sibling in `t`'s directory and renames it
/// over `t`'s name there.
fn replace(
    t: &safe_path::Target,
    existed: bool,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = t.dir.fd();
    let tmp = temp_name_c(t.name.bytes(), crate::hot::sys::getpid())?;
    // SAFETY: NUL-terminated name, dir a directory descriptor of ours.
    let fd = unsafe {
        libc::openat(
            dir,
            tmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is ours.
    let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut w = io::BufWriter::with_capacity(1 << 16, file);
    let result = fill(&mut w).and_then(|_| w.flush());
    drop(w);
    match result.and_then(|_| rename_at(dir, &tmp, t.name.ptr(), existed)) {
        Ok(()) => Ok(()),
        Err(e) => {
            // SAFETY: NUL-terminated name in our directory descriptor.
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
            Err(e)
        }
    }
}

/// Renames within the directory `dir`; when nothing was at `to`, refuses
/// to replace what appeared there since (RENAME_NOREPLACE, where the
/// filesystem has it).
fn rename_at(dir: i32, from: &CString, to: *const libc::c_char, existed: bool) -> io::Result<()> {
    if !existed {
        // SAFETY: NUL-terminated names, dir a directory descriptor.
        let r = unsafe { libc::renameat2(dir, from.as_ptr(), dir, to, libc::RENAME_NOREPLACE) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
            return Err(e);
        }
    }
    // SAFETY: NUL-terminated names, dir a directory descriptor.
    if unsafe { libc::renameat(dir, from.as_ptr(), dir, to) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes `text` to `path`, a file beside a dump: to an explicit path
/// (`explicit`, the dump's path was the caller's) or with the fallback. A
/// failure is one line (`pid`'s); the dump stands.
pub fn write_beside_dump(path: &Path, text: &[u8], explicit: bool, pid: impl core::fmt::Display) {
    let mut fill = |w: &mut dyn Write| w.write_all(text);
    let r = if explicit {
        write_explicit(path, &mut fill)
    } else {
        write_with_fallback(path, &mut fill)
    };
    if let Err(e) = r {
        crate::hot::log::line(format_args!(
            "heaplive[{pid}]: {}: {e} (the dump itself is written)",
            path.display()
        ));
    }
}

/// Writes `path`, or when its directory refuses us (a worker that switched
/// to another user, a read-only directory), the same name in $TMPDIR or
/// /tmp, saying so in one line. Returns where the file went. Only for names
/// from the template: an explicit path is the caller's (no fallback).
pub fn write_with_fallback(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<PathBuf> {
    write_with_fallback_as(path, path.file_name().unwrap_or(path.as_os_str()), fill)
}

/// `write_with_fallback` with the fallback named `alt_name` in $TMPDIR (a
/// dump's own file: `template::fallback_name`, which keeps what its
/// template's directories told apart).
pub fn write_with_fallback_as(
    path: &Path,
    alt_name: &std::ffi::OsStr,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<PathBuf> {
    clean_dead_temps_once(path.parent().unwrap_or(Path::new(".")));
    let e = match write_atomic(path, fill) {
        Ok(()) => {
            crate::background::run_report::written(path);
            return Ok(path.to_path_buf());
        }
        Err(e) => e,
    };
    let cfg = crate::hot::config::get();
    let alt = Path::new(cfg.tmpdir.as_str()).join(alt_name);
    // Refused by the directory (permissions, read-only, gone, another
    // user could write it) or by what is there (another user's link or
    // file): the fallback. Not a FIFO without a reader (ENXIO), a
    // directory, a full disk.
    let falls_back = matches!(
        errno_of(&e),
        libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOENT | libc::ELOOP | libc::EEXIST
    );
    if !falls_back || alt == path {
        return Err(io::Error::new(
            e.kind(),
            Refused(
                errno_of(&e),
                format!("cannot write {} ({})", path.display(), why(path, &e)),
            ),
        ));
    }
    match write_atomic(&alt, fill) {
        Ok(()) => {
            crate::background::run_report::written(&alt);
            crate::hot::log::line(format_args!(
                "heaplive[{}]: cannot write {} ({}); wrote {} instead",
                crate::hot::sys::getpid(),
                path.display(),
                why(path, &e),
                alt.display()
            ));
            Ok(alt)
        }
        Err(e2) => Err(io::Error::new(
            e2.kind(),
            Refused(
                errno_of(&e),
                format!(
                    "cannot write {} ({}) nor {} ({})",
                    path.display(),
                    why(path, &e),
                    alt.display(),
                    why(&alt, &e2)
                ),
            ),
        )),
    }
}

/// Why writing `path` failed, without the path when the error names it
/// already (a refusal: "PATH: is a directory"), so a message names it once.
fn why(path: &Path, e: &io::Error) -> String {
    let text = e.to_string();
    let shown = path.display().to_string();
    match text.strip_prefix(&shown).and_then(|r| r.strip_prefix(": ")) {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// Writes an explicit path (`heaplive_dump(path)`): no fallback, the
/// error keeps the real errno.
pub fn write_explicit(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<PathBuf> {
    match write_atomic(path, fill) {
        Ok(()) => {
            crate::background::run_report::written(path);
            Ok(path.to_path_buf())
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            Refused(
                errno_of(&e),
                format!("cannot write {} ({})", path.display(), why(path, &e)),
            ),
        )),
    }
}

/// The status directory of our effective uid, created 0700 if missing and
/// checked (a directory, not a symlink, ours, mode 0700) before every use.
/// None (with one warning per process) when it cannot be trusted.
fn status_dir(create: bool) -> Option<PathBuf> {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    static WARNED: AtomicBool = AtomicBool::new(false);
    let uid = euid();
    let dir = status::dir(uid);
    if create {
        let c = cpath(&dir).ok()?;
        // SAFETY: NUL-terminated path. mkdir never follows a final symlink.
        unsafe { libc::mkdir(c.as_ptr(), status::DIR_MODE) };
    }
    let verdict = match lstat(&dir) {
        Err(e) if !create && e.raw_os_error() == Some(libc::ENOENT) => return None,
        Ok(st) => status::check_dir(
            kind(&st) == libc::S_IFDIR,
            kind(&st) == libc::S_IFLNK,
            st.st_uid,
            st.st_mode,
            uid,
        ),
        Err(e) => Err(e.to_string()),
    };
    match verdict {
        Ok(()) => Some(dir),
        Err(why) => {
            let alt = fallback_status_dir(uid, create);
            if !WARNED.swap(true, Relaxed) {
                match &alt {
                    Some(alt) => crate::hot::log::line(format_args!(
                        "heaplive[{}]: status directory {} {}; using {} instead (remove {} to use it again)",
                        crate::hot::sys::getpid(),
                        dir.display(),
                        why,
                        alt.display(),
                        dir.display()
                    )),
                    None if create => crate::hot::log::line(format_args!(
                        "heaplive[{}]: status directory {} {}, and no other could be made; not used (`heaplive dump` cannot follow this process's dumps; remove {})",
                        crate::hot::sys::getpid(),
                        dir.display(),
                        why,
                        dir.display()
                    )),
                    None => {}
                }
            }
            alt
        }
    }
}

/// The fallback status directory (`status::fallback_prefix`): the one this
/// process found or made before (for the same uid), else the first
/// `/tmp/heaplive-<uid>.*` that passes the check, else (when `create`) a
/// new one from `mkdtemp` (mode 0700).
fn fallback_status_dir(uid: u32, create: bool) -> Option<PathBuf> {
    static FOUND: std::sync::Mutex<Option<(u32, PathBuf)>> = std::sync::Mutex::new(None);
    // try_lock: a child forked while another thread held it looks again.
    let mut found = FOUND.try_lock().ok()?;
    let trusted = |d: &Path| lstat(d).is_ok_and(|st| status_dir_passes(&st, uid));
    if let Some((u, d)) = found.as_ref()
        && *u == uid
        && trusted(d)
    {
        return Some(d.clone());
    }
    let parent = status::dir(uid);
    let parent = parent.parent().unwrap_or(Path::new("/tmp"));
    let prefix = status::fallback_prefix(uid);
    let names = crate::background::dir::names_where(parent, |b| b.starts_with(prefix.as_bytes()))
        .unwrap_or_default();
    let mut pick = names
        .iter()
        .map(|n| parent.join(n))
        .filter(|d| trusted(d))
        .min();
    if pick.is_none() && create {
        let mut t = parent
            .join(format!("{prefix}XXXXXX"))
            .into_os_string()
            .into_vec();
        t.push(0);
        // SAFETY: a NUL-terminated, writable template; mkdtemp makes the
        // directory mode 0700 and never follows a symlink.
        let made = unsafe { !libc::mkdtemp(t.as_mut_ptr().cast()).is_null() };
        t.pop();
        let d = PathBuf::from(std::ffi::OsString::from_vec(t));
        if made && trusted(&d) {
            pick = Some(d);
        }
    }
    if let Some(d) = &pick {
        *found = Some((uid, d.clone()));
    }
    pick
}

/// Whether the status directory `/tmp/heaplive-<euid>` is not ours (so a
/// status file may be in a fallback): one lstat of a path formatted on the
/// stack, nothing allocated.
fn primary_status_dir_refused() -> bool {
    let uid = euid();
    let mut b = crate::hot::sys::StackBuf::<64>::new();
    b.push_bytes(status::DIR_PREFIX.as_bytes());
    b.push_dec(uid.into());
    b.push_bytes(b"\0");
    // SAFETY: a NUL-terminated path (checked) and a zeroed out-struct.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        if b.as_bytes().last() != Some(&0)
            || libc::lstat(b.as_bytes().as_ptr().cast(), &mut st) != 0
        {
            return crate::hot::sys::errno() != libc::ENOENT;
        }
        !status_dir_passes(&st, uid)
    }
}

/// Does what `lstat` said of a status directory pass `status::check_dir`
/// (a directory, not a link, owned by `uid`, mode 0700)?
fn status_dir_passes(st: &libc::stat, uid: u32) -> bool {
    status::check_dir(
        kind(st) == libc::S_IFDIR,
        kind(st) == libc::S_IFLNK,
        st.st_uid,
        st.st_mode,
        uid,
    )
    .is_ok()
}

/// What the status file says besides the count of dumps: the last file
/// written, the signal dumps that failed and the last reason, so that
/// `heaplive dump` can tell when a requested dump is done, or why not.
pub struct StatusNote {
    last: Option<PathBuf>,
    failed: u32,
    why: Option<String>,
}

impl StatusNote {
    pub const EMPTY: StatusNote = StatusNote {
        last: None,
        failed: 0,
        why: None,
    };

    /// Dump number `dumps` is in `path`.
    pub fn written(&mut self, path: &Path, dumps: u32) {
        self.last = Some(path.to_path_buf());
        self.write(dumps);
    }

    /// After a dump (`why` says which kind): a signal dump, which `heaplive
    /// dump` may be waiting for, that failed is counted with its reason.
    pub fn note_failure<T>(&mut self, r: &std::io::Result<T>, why: &str, dumps: u32) {
        if let (Err(e), "signal") = (r, why) {
            self.failed += 1;
            self.why = Some(e.to_string());
            self.write(dumps);
        }
    }

    fn write(&self, dumps: u32) {
        let Some(dir) = status_dir(true) else {
            return;
        };
        clean_dead_status(&dir);
        let text = status::encode(&status::Status {
            dumps: dumps.into(),
            last: self.last.as_ref().map(|p| p.display().to_string()),
            signal: Some(crate::hot::config::get().signal),
            failed: self.failed.into(),
            why: self.why.clone(),
        });
        let pid = crate::hot::sys::getpid();
        let _ = write_atomic(&dir.join(pid.to_string()), &mut |w| {
            w.write_all(text.as_bytes())
        });
    }
}

/// At the start of heaplive's thread, when the dump signal is not USR2: a
/// status file saying which signal (and no dump yet), unless one is there
/// (an earlier image of this process, before an exec). `heaplive dump`
/// otherwise reads the signal from /proc/PID/environ, which php-fpm
/// overwrites with its process titles: its workers would get USR2.
pub fn write_start_status(pid: u32, signal: i32) {
    let Some(dir) = status_dir(true) else {
        return;
    };
    let path = dir.join(pid.to_string());
    if lstat(&path).is_ok() {
        return;
    }
    let text = status::encode(&status::Status {
        signal: Some(signal),
        ..status::Status::default()
    });
    let _ = write_atomic(&path, &mut |w| w.write_all(text.as_bytes()));
}

/// Status files (and temporaries) of processes that died without removing
/// theirs (SIGKILL).
fn clean_dead_status(dir: &Path) {
    let Ok(d) = safe_path::open_dir(dir.as_os_str().as_bytes()) else {
        return;
    };
    clean_dead_temps_in(&d);
    let pid_like = |b: &[u8]| !b.is_empty() && b.iter().all(u8::is_ascii_digit);
    let Some(entries) = crate::background::dir::names_in(&d, pid_like) else {
        return;
    };
    for name in entries {
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists.
        if pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        {
            unlink_at(&d, &name);
        }
    }
}

/// `status::path(uid, pid)`, NUL-terminated, formatted on the stack.
fn status_file_c(uid: u32, pid: u32) -> crate::hot::sys::StackBuf<64> {
    let mut b = crate::hot::sys::StackBuf::<64>::new();
    b.push_bytes(status::DIR_PREFIX.as_bytes());
    b.push_dec(uid.into());
    b.push_bytes(b"/");
    b.push_dec(pid.into());
    b.push_bytes(b"\0");
    b
}

/// At exit: the process is going away, and `heaplive dump` has nothing
/// to wait for; do not leave its status file behind.
/// Most processes never wrote one (nothing sampled, no dump): one lstat
/// of a path formatted on the stack tells, before anything allocates
/// (heaplive's own heap is mapped at its first allocation).
pub fn remove_status(pid: u32) {
    let b = status_file_c(euid(), pid);
    // SAFETY: a NUL-terminated path (a truncated one fails the lookup and
    // falls through to the checked removal) and a zeroed out-struct.
    let absent = unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        b.as_bytes().last() == Some(&0)
            && libc::lstat(b.as_bytes().as_ptr().cast(), &mut st) != 0
            && crate::hot::sys::errno() == libc::ENOENT
    };
    if absent && !primary_status_dir_refused() {
        return;
    }
    if let Some(dir) = status_dir(false)
        && let Ok(d) = safe_path::open_dir(dir.as_os_str().as_bytes())
    {
        unlink_at(&d, std::ffi::OsStr::new(&pid.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid that is gone: a child that exited and was reaped.
    fn dead_pid() -> u32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    }

    /// Leftovers of a dead process are removed at the first dump into a
    /// directory, and the directory is not listed again by later dumps of
    /// the same process (a listing of /tmp with 4,800 files took 6 ms of
    /// an exit dump here); another directory is cleaned at its first dump.
    #[test]
    fn dead_temps_are_cleaned_at_the_first_dump_into_a_directory() {
        let base = std::env::temp_dir().join(format!("heaplive-clean-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let dead = dead_pid();
        let left = |d: &Path, n: u32| {
            let p = d.join(format!(".x.{n}.folded{TMP_TAG}{dead}"));
            std::fs::write(&p, b"junk").unwrap();
            p
        };
        let first = left(&a, 1);
        clean_dead_temps_once(&a);
        assert!(!first.exists(), "the first dump into a cleans it");
        let second = left(&a, 2);
        clean_dead_temps_once(&a);
        assert!(second.exists(), "a is not listed again");
        let other = left(&b, 1);
        clean_dead_temps_once(&b);
        assert!(!other.exists(), "b is cleaned at its first dump");
        // A temporary of a live process (ours) stays.
        let mine = a.join(format!(".y.folded{TMP_TAG}{}", std::process::id()));
        std::fs::write(&mine, b"").unwrap();
        clean_dead_temps(&a);
        assert!(mine.exists() && !second.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn status_file_on_the_stack_is_the_status_path() {
        for (uid, pid) in [(0, 1), (1000, 4194304), (u32::MAX, u32::MAX)] {
            use std::os::unix::ffi::OsStringExt;
            let mut want = status::path(uid, pid).into_os_string().into_vec();
            want.push(0);
            assert_eq!(status_file_c(uid, pid).as_bytes(), &want[..]);
        }
    }

    #[test]
    fn pprof_names() {
        assert_eq!(
            pprof_name(Path::new("/t/h.1.folded")),
            PathBuf::from("/t/h.1.pb.gz")
        );
    }

    #[test]
    fn atomic_write_refuses_symlinked_temp_and_leaves_no_temp() {
        let dir = crate::fresh_test_dir("out-test");
        let target = dir.join("a.folded");
        write_atomic(&target, &mut |w| w.write_all(b"main 1\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "main 1\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A symlink planted at the temporary name is not followed.
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let tmp = temp_name(&target, crate::hot::sys::getpid());
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        assert!(write_atomic(&target, &mut |w| w.write_all(b"x 2\n")).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        std::fs::remove_file(&tmp).unwrap();
        // Failing writers leave nothing behind.
        let failing = dir.join("b.folded");
        let r = write_atomic(&failing, &mut |_| Err(io::Error::other("boom")));
        assert!(r.is_err());
        assert!(!failing.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

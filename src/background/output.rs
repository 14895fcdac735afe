//! Dump files: the path template, writing under a temporary name and
//! renaming when complete, the fallback directory, and the status file that
//! `heaplive dump` reads.

use heaplive_format::status;
use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use heaplive_format::template::expand;

/// The pprof file that goes with a folded file name.
pub fn pprof_name(folded: &Path) -> PathBuf {
    let v = heaplive_format::template::pprof_name(folded.as_os_str().as_bytes());
    PathBuf::from(std::ffi::OsStr::from_bytes(&v))
}

/// Creates `path`'s temporary sibling 0600 without following symlinks,
/// lets `fill` write it, then renames it into place.
pub fn write_atomic(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", crate::hot::sys::getpid()));
    let tmp = PathBuf::from(tmp);
    let c = CString::new(tmp.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
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
    match result.and_then(|_| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Writes `path`, or when its directory refuses us (a worker that switched
/// to another user, a read-only directory), the same name in $TMPDIR or
/// /tmp, saying so in one line. Returns where the file went.
pub fn write_with_fallback(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<PathBuf> {
    match write_atomic(path, fill) {
        Ok(()) => Ok(path.to_path_buf()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOENT)
            ) =>
        {
            let cfg = crate::hot::config::get();
            let name = path.file_name().unwrap_or(path.as_os_str());
            let alt = Path::new(cfg.tmpdir.as_str()).join(name);
            match write_atomic(&alt, fill) {
                Ok(()) => {
                    crate::hot::log::line(format_args!(
                        "heaplive[{}]: cannot write {} ({}); wrote {} instead",
                        crate::hot::sys::getpid(),
                        path.display(),
                        e,
                        alt.display()
                    ));
                    Ok(alt)
                }
                Err(e2) => Err(io::Error::new(
                    e2.kind(),
                    format!(
                        "cannot write {} ({}) nor {} ({})",
                        path.display(),
                        e,
                        alt.display(),
                        e2
                    ),
                )),
            }
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot write {} ({})", path.display(), e),
        )),
    }
}

/// Where `heaplive dump` looks for news of a process's dumps.
pub const STATUS_DIR: &str = status::DIR;

/// Records the number of dumps, the last file and the dump signal, so that
/// `heaplive dump` can tell when a requested dump is done.
pub fn write_status(pid: u32, dumps: u32, last: &Path, signal: i32) {
    let dir = Path::new(STATUS_DIR);
    let _ = std::fs::create_dir(dir);
    // Shared by every user's processes (php-fpm workers run as www-data):
    // world-writable and sticky, like /tmp. Whoever owns it sets that.
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if let Ok(m) = std::fs::symlink_metadata(dir) {
            // SAFETY: geteuid has no preconditions.
            if m.is_dir() && m.uid() == unsafe { libc::geteuid() } && m.mode() & 0o7777 != 0o1777 {
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
            }
        }
    }
    let text = status::encode(&status::Status {
        dumps: dumps.into(),
        last: Some(last.display().to_string()),
        signal: Some(signal),
    });
    let _ = write_atomic(&status::path(pid), &mut |w| w.write_all(text.as_bytes()));
}

/// At exit: the process is going away, and `heaplive dump` has nothing
/// to wait for; do not leave its status file behind.
pub fn remove_status(pid: u32) {
    let _ = std::fs::remove_file(status::path(pid));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pprof_names() {
        assert_eq!(
            pprof_name(Path::new("/t/h.1.folded")),
            PathBuf::from("/t/h.1.pb.gz")
        );
    }

    #[test]
    fn atomic_write_refuses_symlinked_temp_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("heaplive-out-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
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
        let tmp = format!("{}.tmp.{}", target.display(), crate::hot::sys::getpid());
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

//! `heaplive run`'s channel: when `HEAPLIVE_RUN_REPORT` names a file (set
//! by `heaplive run` for the processes it starts, in a private directory
//! it created), every file a dump writes is listed there, one line each:
//! `pid<TAB>program<TAB>absolute path<NL>`. `run` then lists exactly the
//! files of its processes, wherever they wrote them (children that
//! changed directory, exec'd, or were forked by forked children), and
//! never another process's.
//!
//! The file is reached like every file heaplive writes (`safe_path`'s
//! checked walk, `O_NOFOLLOW|O_NONBLOCK`, a regular file of our euid, see
//! the README's security model), opened `O_APPEND` and written with one
//! `write(2)` (a line at most a page long: appends of one write do not
//! interleave), with SIGPIPE and SIGXFSZ held off (`QuietWrites`). It is
//! never created here: when `run` is gone and removed it, or the process
//! switched to a user that cannot reach it, nothing is written and nothing
//! is said. Runs on heaplive's side of a dump (own heap, guard set).

use std::io;
use std::path::{Path, PathBuf};

/// Lists `written` (a file a dump just wrote) in the run's channel, if
/// there is one. Errors are ignored: the channel is a courtesy to `run`.
pub fn written(written: &Path) {
    let cfg = crate::hot::config::get();
    if cfg.run_report.is_empty() {
        return;
    }
    let abs: PathBuf = if written.is_absolute() {
        written.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(d) => d.join(written),
            Err(_) => return,
        }
    };
    let _ = append(
        cfg.run_report.as_bytes(),
        &line(crate::hot::sys::getpid(), cfg.exe.as_str(), &abs),
    );
}

/// `pid<TAB>program<TAB>path<NL>`; a tab or newline in the path (which a
/// template cannot make, but `heaplive_dump(path)` can) is written as a
/// space so that the line stays one line of three fields.
fn line(pid: u32, exe: &str, path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut l = format!("{pid}\t{exe}\t").into_bytes();
    l.extend(
        path.as_os_str()
            .as_bytes()
            .iter()
            .map(|&b| if b == b'\t' || b == b'\n' { b' ' } else { b }),
    );
    l.push(b'\n');
    l
}

fn append(report: &[u8], line: &[u8]) -> io::Result<()> {
    use heaplive_format::safe_path;
    let _quiet = crate::hot::sys::QuietWrites::new();
    let refused = |r: safe_path::Refusal| io::Error::from_raw_os_error(r.errno);
    let t = safe_path::open_target(report).map_err(refused)?;
    let (fd, st) = safe_path::open_into(&t, libc::O_WRONLY | libc::O_APPEND, 0).map_err(refused)?;
    let ok = st.st_mode & libc::S_IFMT == libc::S_IFREG && {
        // SAFETY: our descriptor and a valid buffer.
        let n = unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
        n == line.len() as isize
    };
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(fd) };
    if ok {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::EIO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_three_fields_whatever_the_path() {
        let l = line(42, "git", Path::new("/r/a\tb\nc.folded"));
        assert_eq!(l, b"42\tgit\t/r/a b c.folded\n");
    }

    #[test]
    fn appends_to_a_file_of_ours_and_creates_none() {
        let d = crate::fresh_test_dir("rr");
        let f = d.join("files");
        let fb = f.as_os_str().as_encoded_bytes().to_vec();
        assert!(
            append(&fb, b"1\ta\t/x\n").is_err(),
            "no file: nothing created"
        );
        assert!(!f.exists());
        std::fs::write(&f, b"").unwrap();
        append(&fb, b"1\ta\t/x\n").unwrap();
        append(&fb, b"2\tb\t/y\n").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"1\ta\t/x\n2\tb\t/y\n");
        let db = d.as_os_str().as_encoded_bytes().to_vec();
        assert!(
            append(&db, b"3\tc\t/z\n").is_err(),
            "a directory is refused"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}

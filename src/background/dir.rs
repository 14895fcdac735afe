//! Directory listing without glibc's malloc.
//!
//! `std::fs::read_dir` goes through `opendir`, which allocates its 32 KiB
//! buffer with the program's `malloc`, and `closedir` frees it: on
//! heaplive's thread that takes a glibc arena lock and, worse, runs glibc's
//! malloc while a fork wrapper on the program's thread has set
//! `__libc_single_threaded` (`hot::forking`), so both threads used the main
//! arena without its lock (tst-mallocfork2 with periodic dumps aborted in
//! `sysmalloc` or hung). This reads the entries with `getdents64` into a
//! buffer of heaplive's own heap.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// Bytes asked of the kernel per `getdents64` call.
const BUF: usize = 16 * 1024;

/// The names in directory `dir` (without "." and ".."), or None if it
/// cannot be opened as a directory. A read error ends the list early.
pub fn names(dir: &Path) -> Option<Vec<OsString>> {
    names_where(dir, |_| true)
}

/// The names in `dir` that `keep` accepts: only those are copied (a dump
/// cleaning its output directory looks for a few temporary names among
/// what may be thousands of files: /tmp, a server's working directory).
pub fn names_where(dir: &Path, keep: impl Fn(&[u8]) -> bool) -> Option<Vec<OsString>> {
    let mut path = dir.as_os_str().as_bytes().to_vec();
    if path.is_empty() {
        path.push(b'.');
    }
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: a NUL-terminated path; O_DIRECTORY refuses anything else,
    // O_NONBLOCK never waits (a FIFO is refused by O_DIRECTORY anyway).
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if fd < 0 {
        return None;
    }
    Some(names_of_fd(fd, keep))
}

/// The names `keep` accepts in a directory a checked walk reached
/// (`safe_path`), or None if it cannot be listed.
pub fn names_in(
    dir: &heaplive_format::safe_path::Dir,
    keep: impl Fn(&[u8]) -> bool,
) -> Option<Vec<OsString>> {
    Some(names_of_fd(dir.open_for_listing()?, keep))
}

/// Reads the names of the directory open at `fd`, and closes it.
fn names_of_fd(fd: i32, keep: impl Fn(&[u8]) -> bool) -> Vec<OsString> {
    let mut buf = vec![0u8; BUF];
    let mut out = Vec::new();
    loop {
        // SAFETY: the buffer and its length match; fd is ours.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd,
                buf.as_mut_ptr(),
                buf.len() as libc::c_ulong,
            )
        };
        if n <= 0 {
            break;
        }
        parse(&buf[..n as usize], &mut |name| {
            if name != b"." && name != b".." && keep(name) {
                out.push(OsString::from_vec(name.to_vec()));
            }
        });
    }
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(fd) };
    out
}

/// Calls `each` with the name of every `linux_dirent64` record in `buf`:
/// d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), then the name,
/// NUL-terminated, padded to d_reclen.
fn parse(buf: &[u8], each: &mut dyn FnMut(&[u8])) {
    const NAME: usize = 19;
    let mut at = 0;
    while at + NAME <= buf.len() {
        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        if reclen < NAME || at + reclen > buf.len() {
            return;
        }
        let rec = &buf[at + NAME..at + reclen];
        // The name ends at its NUL (the record's padding may hold old bytes).
        let name = core::ffi::CStr::from_bytes_until_nul(rec).map_or(rec, |c| c.to_bytes());
        each(name);
        at += reclen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_what_read_dir_lists() {
        let dir = crate::fresh_test_dir("dir-test");
        // Enough long names to need several getdents64 calls.
        let mut want: Vec<OsString> = (0..600)
            .map(|i| OsString::from(format!("{i:04}-{}", "x".repeat(40))))
            .collect();
        want.push(OsString::from_vec(b"odd \xff name".to_vec()));
        for n in &want {
            std::fs::write(dir.join(n), b"").unwrap();
        }
        std::fs::create_dir(dir.join("sub")).unwrap();
        want.push(OsString::from("sub"));
        let mut got = names(&dir).unwrap();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        assert!(names(&dir.join("0000-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")).is_none());
        assert!(names(&dir.join("missing")).is_none());
        let mut odd = names_where(&dir, |n| n.starts_with(b"odd") || n == b"sub").unwrap();
        odd.sort();
        assert_eq!(
            odd,
            [
                OsString::from_vec(b"odd \xff name".to_vec()),
                OsString::from("sub")
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parse_stops_at_a_bad_record() {
        let mut rec = vec![0u8; 24];
        rec[16] = 24; // reclen
        rec[19..22].copy_from_slice(b"abc");
        let mut bad = rec.clone();
        bad.extend_from_slice(&[0u8; 24]);
        bad[24 + 16] = 200; // past the end
        let mut seen = Vec::new();
        parse(&bad, &mut |n| seen.push(n.to_vec()));
        assert_eq!(seen, vec![b"abc".to_vec()]);
    }
}

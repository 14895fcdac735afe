//! Names for code outside every module: `/tmp/perf-<pid>.map` (written by
//! JITs such as PHP's opcache in perf mode, V8, LuaJIT), marked `NAME [jit]`,
//! else `[jit]` for executable anonymous memory.

use std::path::PathBuf;
use std::time::Instant;

use super::demangle::demangle_name;
use super::symtab::RangeTable;
use heaplive_format::profile::Frame;

/// Parse a perf map (`START SIZE name` per line, hex with or without `0x`).
/// Malformed lines are skipped. Later lines win over earlier ones at the
/// same start (a JIT reusing memory).
pub(super) fn parse_perf_map(text: &str) -> RangeTable {
    let hex = |s: &str| {
        let s = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .unwrap_or(s);
        u64::from_str_radix(s, 16).ok()
    };
    let items = text
        .lines()
        .enumerate()
        .filter_map(|(seq, line)| {
            let line = line.trim_start();
            let (start, rest) = line.split_once(char::is_whitespace)?;
            let (size, name) = rest.trim_start().split_once(char::is_whitespace)?;
            let (start, size) = (hex(start)?, hex(size)?);
            let name = name.trim();
            if size == 0 || name.is_empty() {
                return None;
            }
            Some((start, start.checked_add(size)?, name.to_owned(), seq))
        })
        .collect();
    RangeTable::new(items)
}

/// Names for code outside every module.
pub(super) struct Jit {
    /// (pid, path) of `/tmp/perf-<pid>.map`; the pid changes after fork.
    perf_path: (u32, PathBuf),
    /// (size, mtime) of the perf map last read.
    perf_stamp: Option<(u64, i64, i64)>,
    perf: RangeTable,
    /// Executable anonymous mappings from `/proc/self/maps`, and when read.
    anon: Vec<(u64, u64)>,
    anon_read: Option<Instant>,
}

impl Jit {
    pub(super) fn new() -> Self {
        Jit {
            perf_path: (0, PathBuf::new()),
            perf_stamp: None,
            perf: RangeTable::default(),
            anon: Vec::new(),
            anon_read: None,
        }
    }

    pub(super) fn frame(&mut self, addr: u64, demangle: bool) -> Frame {
        let function = match self.perf_name(addr) {
            // Marked: a frame of JIT code, reached through its frame
            // pointer (`hot::unwind`), named by the JIT's perf map.
            Some(name) => format!("{} [jit]", demangle_name(&name, demangle)),
            None if self.in_anon_exec(addr) => "[jit]".to_owned(),
            None => "[unknown]".to_owned(),
        };
        Frame {
            function,
            file: None,
            line: None,
        }
    }

    fn perf_name(&mut self, addr: u64) -> Option<String> {
        let pid = std::process::id();
        if self.perf_path.0 != pid {
            self.perf_path = (pid, PathBuf::from(format!("/tmp/perf-{pid}.map")));
            self.perf_stamp = None;
        }
        // Anyone may plant a file at this name in /tmp: read it only when it
        // is a regular file owned by our user, not through a symlink, never
        // blocking on a FIFO, and at most MAX_PERF_MAP bytes (as perf does).
        let file = open_perf_map(&self.perf_path.1);
        let stamp = file
            .as_ref()
            .map(|(_, st)| (st.st_size as u64, st.st_mtime, st.st_mtime_nsec));
        if stamp != self.perf_stamp {
            self.perf = match file {
                Some((f, _)) => {
                    use std::io::Read;
                    let mut b = Vec::new();
                    match f.take(MAX_PERF_MAP).read_to_end(&mut b) {
                        Ok(_) => parse_perf_map(&String::from_utf8_lossy(&b)),
                        Err(_) => RangeTable::default(),
                    }
                }
                None => RangeTable::default(),
            };
            self.perf_stamp = stamp;
        }
        self.perf.find(addr).map(str::to_owned)
    }

    /// Re-reads `/proc/self/maps` for an address it does not cover, at most
    /// every 10 ms so a dump full of garbage addresses stays cheap.
    fn in_anon_exec(&mut self, addr: u64) -> bool {
        let covered = |v: &[(u64, u64)]| v.iter().any(|&(s, e)| s <= addr && addr < e);
        if covered(&self.anon) {
            return true;
        }
        if self.anon_read.is_some_and(|t| t.elapsed().as_millis() < 10) {
            return false;
        }
        self.anon = std::fs::read_to_string("/proc/self/maps")
            .map(|s| parse_anon_exec(&s))
            .unwrap_or_default();
        self.anon_read = Some(Instant::now());
        covered(&self.anon)
    }
}

/// Executable mappings with no file (`[anon:...]` names count as anonymous,
/// `[vdso]` and other bracketed kernel mappings do not).
pub(super) fn parse_anon_exec(maps: &str) -> Vec<(u64, u64)> {
    maps.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next()?, f.next()?);
            let path = f.nth(3).unwrap_or("");
            if !perms.contains('x') || !(path.is_empty() || path.starts_with("[anon")) {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
            ))
        })
        .collect()
}

/// Largest perf map read (a JIT's map is a few MiB at most).
const MAX_PERF_MAP: u64 = 64 << 20;

/// Opens the perf map with `O_NONBLOCK|O_NOFOLLOW` and keeps it only when
/// it is a regular file owned by our effective uid of at most
/// `MAX_PERF_MAP` bytes.
fn open_perf_map(path: &std::path::Path) -> Option<(std::fs::File, libc::stat)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is ours.
    let f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: zeroed out-struct, our descriptor.
    let st = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return None;
        }
        st
    };
    // SAFETY: geteuid has no preconditions.
    let ours = st.st_uid == unsafe { libc::geteuid() };
    let ok =
        st.st_mode & libc::S_IFMT == libc::S_IFREG && ours && (st.st_size as u64) <= MAX_PERF_MAP;
    ok.then_some((f, st))
}

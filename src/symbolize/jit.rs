//! Names for code outside every module: `/tmp/perf-<pid>.map` (written by
//! JITs such as PHP's opcache in perf mode, V8, LuaJIT), else `[jit]` for
//! executable anonymous memory.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

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
    perf_stamp: Option<(u64, SystemTime)>,
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
            Some(name) => demangle_name(&name, demangle),
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
        let stamp = std::fs::metadata(&self.perf_path.1)
            .ok()
            .map(|m| (m.len(), m.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
        if stamp != self.perf_stamp {
            self.perf = match stamp {
                Some(_) => std::fs::read(&self.perf_path.1)
                    .map(|b| parse_perf_map(&String::from_utf8_lossy(&b)))
                    .unwrap_or_default(),
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

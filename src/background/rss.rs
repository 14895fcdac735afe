//! Where the process's resident memory is, by kind: the dump's log line
//! (`RSS 420.0 MiB: ZendMM 310.0 MiB, malloc heap 60.0 MiB, opcache
//! 32.0 MiB, ...`) and, in PHP mode, the companion file `NAME.maps.txt`.
//! Read from /proc/self/smaps (resident pages, not just mapped ones) and
//! classified by what a mapping looks like:
//!
//! | kind | mapping |
//! |---|---|
//! | ZendMM | PHP mode only: private anonymous, read-write, starting on a 2 MiB boundary: a chunk (its first word is the heap, when heaplive knows the heap) or, at least 2 MiB long, a huge block |
//! | malloc heap | `[heap]` (glibc's main arena) |
//! | malloc arenas | glibc's thread arenas: private anonymous, read-write, starting on a 64 MiB boundary, the rest of the 64 MiB reserved (`---p`) or used |
//! | opcache | shared anonymous (`/dev/zero (deleted)`, `[anon_shmem]`, `/SYSV...`) |
//! | JIT | the executable part of such shared memory (opcache's JIT buffer) |
//! | stacks | `[stack]`, and read-write anonymous memory right above a `---p` guard page (thread and fiber stacks) |
//! | other anonymous | the rest without a file: malloc's mmap'd blocks (large allocations), heaplive's own tables |
//! | files | mappings of files (code, data, mapped files) |
//!
//! A heuristic: what is "other anonymous" cannot be told apart further from
//! outside, and a malloc block of a whole number of 2 MiB can look like a
//! ZendMM huge block (the kernel aligns such mappings to 2 MiB).

use std::fmt::Write as _;

/// The kinds, in file order: (short name for the log line, what it is).
pub const KINDS: [(&str, &str); 8] = [
    (
        "ZendMM",
        "PHP's request memory (emalloc): ZendMM chunks and huge blocks",
    ),
    ("malloc heap", "glibc malloc's main arena ([heap])"),
    (
        "malloc arenas",
        "glibc malloc's thread arenas (64 MiB-aligned anonymous memory)",
    ),
    (
        "opcache",
        "shared anonymous memory: opcache's shared memory (compiled scripts, interned strings)",
    ),
    ("JIT", "executable shared memory: opcache's JIT buffer"),
    (
        "stacks",
        "the main stack, thread stacks and fiber stacks (below a guard page)",
    ),
    (
        "other anonymous",
        "other memory without a file: malloc's mmap'd blocks (large allocations), heaplive's own tables",
    ),
    (
        "files",
        "mappings of files: code and data of the executable and libraries, mapped files",
    ),
];
const ZEND_MM: usize = 0;
const HEAP: usize = 1;
const ARENAS: usize = 2;
const OPCACHE: usize = 3;
const JIT: usize = 4;
const STACKS: usize = 5;
const OTHER: usize = 6;
const FILES: usize = 7;

/// One mapping of smaps: its header and its resident bytes.
struct Mapping<'a> {
    start: u64,
    end: u64,
    perms: &'a str,
    inode: &'a str,
    path: String,
    rss: u64,
}

fn parse(smaps: &str) -> Vec<Mapping<'_>> {
    let mut v: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Rss:") {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            if let Some(m) = v.last_mut() {
                m.rss += kb * 1024;
            }
            continue;
        }
        if let Some(m) = header(line) {
            v.push(m);
        }
    }
    v
}

/// A mapping header line (`start-end perms offset dev inode [path]`); None
/// for the field lines that follow it.
fn header(line: &str) -> Option<Mapping<'_>> {
    let mut it = line.split_whitespace();
    let (start, end) = it.next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = it.next()?;
    if perms.len() != 4 {
        return None;
    }
    let _offset = it.next()?;
    let _dev = it.next()?;
    let inode = it.next()?;
    Some(Mapping {
        start,
        end,
        perms,
        inode,
        path: it.collect::<Vec<_>>().join(" "),
        rss: 0,
    })
}

/// What PHP mode tells the classification: is this PHP, and ZendMM's
/// heap (0 when unknown) with a way to read a chunk's first word.
pub struct Php<'a> {
    pub on: bool,
    pub heap: u64,
    pub first_word: &'a dyn Fn(u64) -> Option<u64>,
}

impl Php<'_> {
    #[cfg(test)]
    pub const OFF: Php<'static> = Php {
        on: false,
        heap: 0,
        first_word: &|_| None,
    };
}

const CHUNK: u64 = 2 << 20;
const ARENA: u64 = 64 << 20;

fn anonymous(m: &Mapping) -> bool {
    m.inode == "0" && (m.path.is_empty() || m.path.starts_with('['))
}

fn kind_of(maps: &[Mapping], i: usize, php: &Php) -> usize {
    let m = &maps[i];
    let shared = m.perms.ends_with('s');
    let exec = m.perms.as_bytes()[2] == b'x';
    let rw_private = m.perms == "rw-p";
    let p = m.path.as_str();
    if p == "[heap]" {
        return HEAP;
    }
    if p == "[stack]" {
        return STACKS;
    }
    if shared
        && (p.is_empty()
            || p.starts_with("/dev/zero")
            || p.starts_with("[anon_shmem")
            || p.starts_with("/SYSV"))
    {
        return if exec { JIT } else { OPCACHE };
    }
    if !(p.is_empty() || p.starts_with('[')) {
        return FILES;
    }
    if !rw_private || !anonymous(m) {
        return OTHER;
    }
    let prev = i.checked_sub(1).map(|j| &maps[j]);
    let next = maps.get(i + 1);
    // A thread arena: its heap_info at a 64 MiB boundary, the part not yet
    // used reserved behind it up to the next boundary.
    if m.start.is_multiple_of(ARENA)
        && (m.end - m.start == ARENA
            || next.is_some_and(|n| {
                n.start == m.end && n.perms == "---p" && n.end.is_multiple_of(ARENA)
            }))
    {
        return ARENAS;
    }
    // A ZendMM chunk starts with a pointer to its heap.
    let aligned = php.on && m.start.is_multiple_of(CHUNK);
    if aligned && php.heap != 0 && (php.first_word)(m.start) == Some(php.heap) {
        return ZEND_MM;
    }
    // A stack: a guard page right below (glibc's threads, PHP's fibers).
    if prev.is_some_and(|g| g.end == m.start && g.perms == "---p" && anonymous(g)) {
        return STACKS;
    }
    // A huge block (or a chunk of a heap not known yet): ZendMM maps them
    // 2 MiB-aligned.
    if aligned && m.end - m.start >= CHUNK {
        return ZEND_MM;
    }
    OTHER
}

/// Resident bytes per kind, in `KINDS` order.
pub fn sums(smaps: &str, php: &Php) -> [u64; 8] {
    let maps = parse(smaps);
    let mut sums = [0u64; 8];
    for i in 0..maps.len() {
        sums[kind_of(&maps, i, php)] += maps[i].rss;
    }
    sums
}

/// Resident bytes per kind of `smaps` (as read), in `KINDS` order: for
/// the timeline's dump rows.
pub fn kinds(smaps: &str) -> [u64; 8] {
    with_php(|php| sums(smaps, php))
}

/// Resident bytes per kind, largest first, zero kinds left out.
pub fn breakdown(smaps: &str, php: &Php) -> Vec<(&'static str, u64)> {
    let mut v: Vec<(&'static str, u64)> = KINDS
        .iter()
        .zip(sums(smaps, php))
        .filter(|(_, b)| *b > 0)
        .map(|(k, b)| (k.0, b))
        .collect();
    v.sort_by_key(|p| core::cmp::Reverse(p.1));
    v
}

/// Calls `f` with what PHP mode knows. A chunk's first word is read
/// through /proc/self/mem: memory unmapped meanwhile (a chunk ZendMM gives
/// back) fails the read instead of faulting, and no seccomp filter that
/// forbids process_vm_readv (PHP frames are then off) is crossed.
fn with_php<R>(f: impl FnOnce(&Php) -> R) -> R {
    use std::os::unix::fs::FileExt;
    let on = crate::hot::php::detected();
    let heap = crate::hot::php::heap() as u64;
    let mem = if on && heap != 0 {
        std::fs::File::open("/proc/self/mem").ok()
    } else {
        None
    };
    let first_word = |addr: u64| {
        let mut w = [0u8; 8];
        mem.as_ref()?.read_exact_at(&mut w, addr).ok()?;
        Some(u64::from_ne_bytes(w))
    };
    f(&Php {
        on,
        heap,
        first_word: &first_word,
    })
}

/// `RSS 99.0 MiB: ZendMM 52.0 MiB, files 15.6 MiB, ...` for the log line
/// and /proc/self/smaps as read (None when it cannot be read).
pub fn describe() -> (String, Option<String>) {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return ("RSS ?".into(), None);
    };
    let parts = with_php(|php| breakdown(&smaps, php));
    let total: u64 = parts.iter().map(|p| p.1).sum();
    let mut s = format!("RSS {}", crate::hot::log::human_bytes(total as f64));
    for (i, (k, b)) in parts.iter().enumerate() {
        s.push_str(if i == 0 { ": " } else { ", " });
        s.push_str(&format!("{k} {}", crate::hot::log::human_bytes(*b as f64)));
    }
    (s, Some(smaps))
}

/// Is this a PHP process (PHP mode on)? Then each dump gets a
/// `NAME.maps.txt`.
pub fn wanted() -> bool {
    crate::hot::php::detected()
}

/// The text of `NAME.maps.txt`: the resident memory by kind, bytes and
/// human units, with what each kind is.
pub fn maps_text(smaps: &str, header: &str) -> String {
    let sums = with_php(|php| sums(smaps, php));
    text_of(&sums, header)
}

fn text_of(sums: &[u64; 8], header: &str) -> String {
    let human = |b: u64| crate::hot::log::human_bytes(b as f64).to_string();
    let total: u64 = sums.iter().sum();
    let mut s = String::new();
    let _ = writeln!(s, "# {header}");
    let _ = writeln!(
        s,
        "# resident memory (Rss in /proc/PID/smaps: pages in RAM, not just mapped) by kind;"
    );
    let _ = writeln!(
        s,
        "# columns: bytes, the same in binary units, kind, what it is"
    );
    let _ = writeln!(
        s,
        "{total:>12}  {:>10}  {:<16} all resident memory of the process",
        human(total),
        "RSS"
    );
    for ((k, what), b) in KINDS.iter().zip(sums) {
        let _ = writeln!(s, "{b:>12}  {:>10}  {k:<16} {what}", human(*b));
    }
    s
}

/// `NAME.maps.txt` beside `NAME.folded` (or `NAME.pb.gz`).
pub fn maps_path(dump: &std::path::Path) -> std::path::PathBuf {
    beside(dump, b".maps.txt")
}

/// The file `NAME<suffix>` written beside the dump `NAME.folded` (or
/// `NAME.pb.gz`): its maps, its timeline.
pub fn beside(dump: &std::path::Path, suffix: &[u8]) -> std::path::PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let b = dump.as_os_str().as_bytes();
    let base = b
        .strip_suffix(b".folded")
        .or_else(|| b.strip_suffix(b".pb.gz"))
        .unwrap_or(b);
    let mut v = base.to_vec();
    v.extend_from_slice(suffix);
    std::path::PathBuf::from(std::ffi::OsString::from_vec(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process's /proc/self/smaps, cut down to the mappings and their
    /// `Rss:` lines.
    const SMAPS: &str = include_str!("rss_smaps.txt");

    #[test]
    fn kinds_of_mappings() {
        // The heap 0x7f0000000000 is known; the 2 MiB-aligned 0x7f0000800000
        // (2 MiB + 12 KiB) is a huge block.
        let php = Php {
            on: true,
            heap: 0x7f00_0000_0040,
            first_word: &|a| (a == 0x7f00_0000_0000).then_some(0x7f00_0000_0040),
        };
        assert_eq!(
            breakdown(SMAPS, &php),
            [
                ("opcache", 8000 << 10),
                ("ZendMM", 6400 << 10),
                ("files", 1000 << 10),
                ("malloc arenas", 900 << 10),
                ("JIT", 700 << 10),
                ("malloc heap", 300 << 10),
                ("stacks", 52 << 10),
                ("other anonymous", 50 << 10),
            ]
        );
        // Not a PHP process: 2 MiB-aligned anonymous memory is just that.
        let v = breakdown(SMAPS, &Php::OFF);
        assert!(v.contains(&("other anonymous", 6450 << 10)), "{v:?}");
        assert!(!v.iter().any(|p| p.0 == "ZendMM"));
        // PHP, the heap not known yet: a chunk is a 2 MiB-aligned
        // anonymous mapping of at least 2 MiB.
        let php = Php {
            on: true,
            heap: 0,
            first_word: &|_| None,
        };
        assert_eq!(sums(SMAPS, &php)[ZEND_MM], 6400 << 10);
    }

    #[test]
    fn maps_file_text() {
        let mut s = [0u64; 8];
        s[ZEND_MM] = 50 << 20;
        s[FILES] = 3 << 20;
        let t = text_of(&s, "heaplive: php (pid 7), signal dump 1");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "# heaplive: php (pid 7), signal dump 1");
        assert!(
            lines[3].starts_with("    55574528    53.0 MiB  RSS "),
            "{t}"
        );
        assert!(
            lines[4].starts_with("    52428800    50.0 MiB  ZendMM "),
            "{t}"
        );
        assert_eq!(lines.len(), 4 + KINDS.len());
        assert_eq!(
            maps_path(std::path::Path::new("/t/heaplive.php.7.1.folded")),
            std::path::Path::new("/t/heaplive.php.7.1.maps.txt")
        );
        assert_eq!(
            maps_path(std::path::Path::new("/t/x.pb.gz")),
            std::path::Path::new("/t/x.maps.txt")
        );
    }
}

//! Where the process's resident memory is, by kind, for the dump's log
//! line: `RSS 420.0 MiB: ZendMM 310.0 MiB, malloc heap 60.0 MiB, opcache
//! 32.0 MiB, ...`. Read from /proc/self/smaps (resident pages, not just
//! mapped ones) and classified by what a mapping looks like:
//!
//! | kind | mapping |
//! |---|---|
//! | ZendMM | PHP mode only: private anonymous, read-write, starting on a 2 MiB boundary and a multiple of 2 MiB long (ZendMM's chunks and huge blocks) |
//! | malloc heap | `[heap]` (glibc's main arena) |
//! | opcache | shared anonymous (`/dev/zero (deleted)`, `[anon_shmem]`, `/SYSV...`) |
//! | JIT | the executable part of such shared memory (opcache's JIT buffer) |
//! | stacks | `[stack]` |
//! | other anonymous | the rest without a file: malloc's mmap'd blocks and thread arenas, thread stacks, heaplive's own tables |
//! | files | mappings of files (code, data, mapped files) |
//!
//! A heuristic: a thread arena of malloc can look like ZendMM memory, and
//! what is "other anonymous" cannot be told apart further from outside.

/// Resident bytes per kind, largest first, zero kinds left out.
pub fn breakdown(smaps: &str, zend_mm: bool) -> Vec<(&'static str, u64)> {
    const KINDS: [&str; 7] = [
        "ZendMM",
        "malloc heap",
        "opcache",
        "JIT",
        "stacks",
        "other anonymous",
        "files",
    ];
    let mut sums = [0u64; 7];
    let mut kind = 5usize;
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Rss:") {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            sums[kind] += kb * 1024;
            continue;
        }
        if let Some(k) = classify(line, zend_mm) {
            kind = k;
        }
    }
    let mut v: Vec<(&'static str, u64)> = KINDS
        .iter()
        .zip(sums)
        .filter(|(_, b)| *b > 0)
        .map(|(k, b)| (*k, b))
        .collect();
    v.sort_by_key(|p| core::cmp::Reverse(p.1));
    v
}

/// The kind of a mapping header line (`start-end perms offset dev inode
/// [path]`); None for the field lines that follow it.
fn classify(line: &str, zend_mm: bool) -> Option<usize> {
    let mut it = line.split_whitespace();
    let range = it.next()?;
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = it.next()?;
    if perms.len() != 4 {
        return None;
    }
    let _offset = it.next()?;
    let _dev = it.next()?;
    let inode = it.next()?;
    let path = it.collect::<Vec<_>>().join(" ");
    let shared = perms.ends_with('s');
    let exec = perms.as_bytes()[2] == b'x';
    const CHUNK: u64 = 2 << 20;
    Some(match path.as_str() {
        "[heap]" => 1,
        "[stack]" => 4,
        p if shared
            && (p.is_empty()
                || p.starts_with("/dev/zero")
                || p.starts_with("[anon_shmem")
                || p.starts_with("/SYSV")) =>
        {
            if exec {
                3
            } else {
                2
            }
        }
        p if p.is_empty() || p.starts_with('[') => {
            if zend_mm
                && inode == "0"
                && perms.starts_with("rw")
                && start % CHUNK == 0
                && (end - start) % CHUNK == 0
            {
                0
            } else {
                5
            }
        }
        _ => 6,
    })
}

/// `RSS 99.0 MiB: ZendMM 52.0 MiB, files 15.6 MiB, ...` for the log line;
/// just `RSS ?` when /proc cannot be read.
pub fn describe(zend_mm: bool) -> String {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return "RSS ?".into();
    };
    let parts = breakdown(&smaps, zend_mm);
    let total: u64 = parts.iter().map(|p| p.1).sum();
    let mut s = format!("RSS {}", crate::hot::log::human_bytes(total as f64));
    for (i, (k, b)) in parts.iter().enumerate() {
        s.push_str(if i == 0 { ": " } else { ", " });
        s.push_str(&format!("{k} {}", crate::hot::log::human_bytes(*b as f64)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_mappings() {
        let smaps = "\
55d0c0000000-55d0c0100000 r-xp 00000000 fe:00 1234 /usr/sbin/php-fpm8.2
Rss:                1000 kB
55d0c1000000-55d0c1200000 rw-p 00000000 00:00 0 [heap]
Rss:                 300 kB
7f0000000000-7f0000600000 rw-p 00000000 00:00 0 
Rss:                6000 kB
7f0000600000-7f0000680000 rw-p 00000000 00:00 0 
Rss:                  50 kB
7f1000000000-7f1008000000 rw-s 00000000 00:01 99 /dev/zero (deleted)
Rss:                8000 kB
7f1008000000-7f1009000000 r-xs 08000000 00:01 99 /dev/zero (deleted)
Rss:                 700 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  12 kB
";
        assert_eq!(
            breakdown(smaps, true),
            [
                ("opcache", 8000 << 10),
                ("ZendMM", 6000 << 10),
                ("files", 1000 << 10),
                ("JIT", 700 << 10),
                ("malloc heap", 300 << 10),
                ("other anonymous", 50 << 10),
                ("stacks", 12 << 10),
            ]
        );
        // Not a PHP process: 2 MiB-aligned anonymous memory is just that.
        let v = breakdown(smaps, false);
        assert_eq!(v[1], ("other anonymous", 6050 << 10));
    }
}

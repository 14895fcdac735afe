//! Exact mode agrees with heaptrack, the reference tool, site by site: the
//! same program's leaked bytes per allocating function, from
//! `heaptrack_print --print-leaks`, equal heaplive's exit dump (within
//! heaptrack's printed precision of four significant digits), and the
//! temporary view agrees with its temporary allocations where the two
//! definitions meet.

use crate::common::*;
use std::collections::BTreeMap;
use std::process::Command;

/// `50.33M leaked over 10442 calls from` followed by the function's line.
fn heaptrack_leaks(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let Some(amount) = l.strip_suffix(" calls from") else {
            continue;
        };
        let Some((size, _)) = amount.split_once(" leaked over ") else {
            continue;
        };
        let (num, mult) = match size.chars().last() {
            Some('K') => (&size[..size.len() - 1], 1e3),
            Some('M') => (&size[..size.len() - 1], 1e6),
            Some('G') => (&size[..size.len() - 1], 1e9),
            Some('B') => (&size[..size.len() - 1], 1.0),
            _ => (size, 1.0),
        };
        let bytes: f64 = num
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("heaptrack size {size:?}"))
            * mult;
        if let Some(func) = lines.peek() {
            *out.entry(func.trim().to_string()).or_insert(0.0) += bytes;
        }
    }
    out
}

/// `heaptrack_print -f` of a heaptrack run of `prog` in `dir` with
/// `args` (its peaks and allocators left out).
fn heaptrack_print(dir: &std::path::Path, prog: &std::path::Path, args: &[&str]) -> String {
    let data = dir.join("ht");
    let ht = Command::new("heaptrack")
        .arg("-o")
        .arg(&data)
        .arg(prog)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("heaptrack (package heaptrack; `make test` installs it)");
    assert!(ht.status.success(), "heaptrack failed: {}", stderr(&ht));
    let zst = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ht"))
        })
        .expect("heaptrack's data file");
    let printed = Command::new("heaptrack_print")
        .args(["--print-peaks", "0", "--print-allocators", "0"])
        .args(args)
        .arg("-f")
        .arg(&zst)
        .output()
        .expect("heaptrack_print");
    assert!(printed.status.success(), "{}", stderr(&printed));
    stdout(&printed)
}

/// `16384 temporary allocations of 16384 allocations in total (100.00%)
/// from` followed by the function's line (the first block of each site;
/// the indented ones below it are its callers).
fn heaptrack_temporary(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if !l.ends_with(" from") {
            continue;
        }
        let Some((n, _)) = l.split_once(" temporary allocations of ") else {
            continue;
        };
        if let (Ok(n), Some(func)) = (n.parse::<u64>(), lines.peek()) {
            *out.entry(func.trim().to_string()).or_insert(0) += n;
        }
    }
    out
}

/// The temporary view against heaptrack's "MOST TEMPORARY ALLOCATIONS" on
/// `progs/temporary_sites.c`, exact mode: temporary_site's 16,384 blocks
/// of 64 KiB are temporary in both, short_site's in neither (another
/// allocation comes before each free). spacer_site is where the
/// definitions part: heaptrack also breaks a temporary allocation by a
/// free in between (short_site's), heaplive only by an allocation (a
/// free of an unsampled block leaves no trace on its thread, so counting
/// it would cost every free), so heaplive counts all its 16-byte blocks
/// and heaptrack none.
#[test]
fn temporary_view_agrees_with_heaptrack() {
    let (dir, prog) = compiled("heaptrack_temporary", "temporary_sites.c");
    let o = run_preloaded(
        &dir,
        &prog,
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_VIEWS", "live,temporary"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let temp = view_files(&dir, "temporary");
    assert_eq!(temp.len(), 1, "{temp:?}");
    let ours = parse_folded(&temp[0]);
    let printed = heaptrack_print(
        &dir,
        &prog,
        &["--print-leaks", "0", "--print-temporary", "1"],
    );
    let theirs = heaptrack_temporary(&printed);
    assert_eq!(theirs.get("temporary_site"), Some(&16384), "{printed}");
    assert_eq!(
        bytes_under(&ours, "temporary_site"),
        16384 * 65536,
        "{ours:#?}"
    );
    assert_eq!(theirs.get("short_site"), None, "{printed}");
    assert_eq!(bytes_under(&ours, "short_site"), 0, "{ours:#?}");
    assert_eq!(theirs.get("spacer_site"), None, "{printed}");
    assert_eq!(bytes_under(&ours, "spacer_site"), 4096 * 16, "{ours:#?}");
}

#[test]
fn exact_mode_matches_heaptrack_per_site() {
    let dir = tempdir("heaptrack");
    let prog = compile("sampled_mix.c", "mix", &dir, &[]);
    let o = run_preloaded(&dir, &prog, &[], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ours = bytes_by_leaf(&only_folded(&dir));

    let printed = heaptrack_print(
        &dir,
        &prog,
        &["--print-leaks", "1", "--print-temporary", "0"],
    );
    let theirs = heaptrack_leaks(&printed);
    for site in ["site_a", "site_b"] {
        let a = *ours
            .get(site)
            .unwrap_or_else(|| panic!("{site} missing from heaplive: {ours:?}"))
            as f64;
        let b = *theirs
            .get(site)
            .unwrap_or_else(|| panic!("{site} missing from heaptrack: {theirs:?}\n{printed}"));
        assert!(
            (a - b).abs() <= b * 0.0005 + 5.0,
            "{site}: heaplive {a} bytes, heaptrack {b}"
        );
    }
}

//! Exact mode agrees with heaptrack, the reference tool, site by site: the
//! same program's leaked bytes per allocating function, from
//! `heaptrack_print --print-leaks`, equal heaplive's exit dump (within
//! heaptrack's printed precision of four significant digits).

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

#[test]
fn exact_mode_matches_heaptrack_per_site() {
    let dir = tempdir("heaptrack");
    let prog = compile("sampled_mix.c", "mix", &dir, &[]);
    let o = run_preloaded(&dir, &prog, &[], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ours = bytes_by_leaf(&only_folded(&dir));

    let data = dir.join("ht");
    let ht = Command::new("heaptrack")
        .arg("-o")
        .arg(&data)
        .arg(&prog)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("heaptrack (package heaptrack; `make test` installs it)");
    assert!(ht.status.success(), "heaptrack failed: {}", stderr(&ht));
    let zst = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ht"))
        })
        .expect("heaptrack's data file");
    let printed = Command::new("heaptrack_print")
        .args([
            "--print-leaks",
            "1",
            "--print-peaks",
            "0",
            "--print-allocators",
            "0",
            "--print-temporary",
            "0",
            "-f",
        ])
        .arg(&zst)
        .output()
        .expect("heaptrack_print");
    let theirs = heaptrack_leaks(&stdout(&printed));
    for site in ["site_a", "site_b"] {
        let a = *ours
            .get(site)
            .unwrap_or_else(|| panic!("{site} missing from heaplive: {ours:?}"))
            as f64;
        let b = *theirs.get(site).unwrap_or_else(|| {
            panic!(
                "{site} missing from heaptrack: {theirs:?}\n{}",
                stdout(&printed)
            )
        });
        assert!(
            (a - b).abs() <= b * 0.0005 + 5.0,
            "{site}: heaplive {a} bytes, heaptrack {b}"
        );
    }
}

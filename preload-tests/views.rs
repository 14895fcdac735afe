//! Issue 12: the allocation view, the peak, start and stop, error bars.
//! `progs/views_sites.c` has call sites with known totals.

use crate::common::{self, show};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn prog(dir: &Path) -> PathBuf {
    common::compile("views_sites.c", "views_sites", dir, &[])
}

fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let p = prog(dir);
    let o = common::run_preloaded(dir, &p, args, env);
    assert!(o.status.success(), "{}", show(&o));
    o
}

fn by_leaf(file: &Path) -> BTreeMap<String, u64> {
    common::bytes_by_leaf(&common::parse_folded(file))
}

fn one(files: Vec<PathBuf>) -> PathBuf {
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// `go` on PATH or in Debian's place.
fn go() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("go"))
                .find(|c| c.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("/usr/lib/go/bin/go"))
}

/// `go tool pprof -top -sample_index=INDEX`: flat value per function.
fn pprof_flat(dir: &Path, file: &Path, index: &str) -> BTreeMap<String, u64> {
    let home = dir.join("gohome");
    std::fs::create_dir_all(&home).unwrap();
    let o = Command::new(go())
        .args(["tool", "pprof", "-top", "-nodefraction=0", "-unit=B"])
        .arg(format!("-sample_index={index}"))
        .arg(file)
        .current_dir(dir)
        .env("HOME", &home)
        .env("GOCACHE", home.join("cache"))
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("go tool pprof");
    assert!(o.status.success(), "{}", show(&o));
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 6 && f[5].starts_with("site_") {
            let v = f[0].trim_end_matches('B');
            m.insert(f[5].to_string(), v.parse().unwrap_or(0));
        }
    }
    m
}

#[test]
fn exact_alloc_view_and_four_pprof_types() {
    let dir = common::tempdir("views-exact");
    let o = run(
        &dir,
        &["exact"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_VIEWS", "live,alloc"),
            ("HEAPLIVE_FORMAT", "folded,pprof"),
        ],
    );
    let live = by_leaf(&one(common::folded_files(&dir)));
    let alloc = by_leaf(&one(common::view_files(&dir, "alloc")));
    assert_eq!(live.get("site_kept"), Some(&100_000), "{}", show(&o));
    assert_eq!(live.get("site_freed"), None);
    assert_eq!(live.get("site_realloc"), None);
    assert_eq!(alloc.get("site_kept"), Some(&100_000));
    assert_eq!(alloc.get("site_freed"), Some(&150_000));
    assert_eq!(alloc.get("site_realloc"), Some(&5_500));
    // No samples file in exact mode (no error bars), no peak file: the
    // peak (the exit state plus one freed block) is not above... it is:
    // the peak held a site_freed or site_realloc block beyond the exit.
    assert!(common::view_files(&dir, "samples").is_empty());

    let pb = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .expect("a pprof file");
    let space = pprof_flat(&dir, &pb, "alloc_space");
    assert_eq!(space.get("site_kept"), Some(&100_000));
    assert_eq!(space.get("site_freed"), Some(&150_000));
    assert_eq!(space.get("site_realloc"), Some(&5_500));
    let objects = pprof_flat(&dir, &pb, "alloc_objects");
    assert_eq!(objects.get("site_kept"), Some(&100));
    assert_eq!(objects.get("site_freed"), Some(&50));
    assert_eq!(objects.get("site_realloc"), Some(&10));
    let inuse = pprof_flat(&dir, &pb, "inuse_space");
    assert_eq!(inuse.get("site_kept"), Some(&100_000));
    assert_eq!(inuse.get("site_freed"), None);
    let inuse_objects = pprof_flat(&dir, &pb, "inuse_objects");
    assert_eq!(inuse_objects.get("site_kept"), Some(&100));
    // And every value the folded files give, pprof gives.
    for (site, bytes) in &alloc {
        if site.starts_with("site_") {
            assert_eq!(space.get(site), Some(bytes), "{site}");
        }
    }
}

#[test]
fn exact_peak_file_names_the_peak_stacks() {
    let dir = common::tempdir("views-peak");
    let o = run(&dir, &["peak"], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    let peak = by_leaf(&one(common::view_files(&dir, "peak")));
    assert_eq!(peak.get("site_big"), Some(&(200 << 20)), "{}", show(&o));
    assert_eq!(peak.get("site_small"), Some(&10_000));
    let live = by_leaf(&one(common::folded_files(&dir)));
    assert_eq!(live.get("site_big"), Some(&(10 << 20)));
    let err = common::stderr(&o);
    assert!(err.contains("peak 200.0 MiB live (exact)"), "{err}");
}

//! What a dump reads and counts: the stacks of the files it writes. Stacks
//! that only allocated (all their blocks freed) are in the `alloc` view and
//! in pprof's alloc_space; without those files a dump neither counts them
//! in its line nor symbolizes them (a php-cli's exit dump, with nothing
//! live, spent most of its time reading libc's compressed DWARF for frames
//! no file showed).

use crate::common::*;

/// Runs progs/dump_freed_stacks.c in exact mode with `env`: its exit dump
/// line, and the directory's folded files (every view).
fn run(tag: &str, env: &[(&str, &str)]) -> (String, Vec<std::path::PathBuf>, TempDir) {
    let dir = tempdir(tag);
    let exe = compile(
        "dump_freed_stacks.c",
        "dump_freed_stacks",
        dir.path(),
        &["-O1"],
    );
    let mut e = vec![("HEAPLIVE_SAMPLE_INTERVAL", "1")];
    e.extend_from_slice(env);
    let o = run_preloaded(dir.path(), &exe, &[], &e);
    assert_eq!(stdout(&o), "done\n", "{}", show(&o));
    let line = stderr(&o)
        .lines()
        .find(|l| l.contains(" exit dump "))
        .unwrap_or_else(|| panic!("no exit dump line\n{}", show(&o)))
        .to_string();
    let files = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "folded"))
        .collect();
    (line, files, dir)
}

fn stacks_in(line: &str) -> u64 {
    line.split(" samples over ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .map(|s| s.replace(',', "").parse().expect("stack count"))
        .unwrap_or_else(|| panic!("no stack count in {line}"))
}

/// The default views (live, peak, samples): the line counts the stacks
/// with live blocks (the kept block's and the C library's own), not the
/// 4,096 that only allocated; the live file has the kept block under
/// keep_one.
#[test]
fn exit_dump_counts_only_the_stacks_of_its_files() {
    let (line, files, _dir) = run("dump-views-default", &[]);
    let n = stacks_in(&line);
    assert!((1..100).contains(&n), "stacks counted: {line}");
    let live = files
        .iter()
        .find(|f| view_of(f).is_none())
        .unwrap_or_else(|| panic!("no live file in {files:?}"));
    let stacks = parse_folded(live);
    assert_eq!(bytes_under(&stacks, "keep_one"), 777_777, "{stacks:#?}");
    assert!(
        !stacks.iter().any(|s| s.has("walk")),
        "freed stacks in the live file: {stacks:#?}"
    );
}

/// With the alloc view: the 4,096 freed stacks are there, each with its 64
/// bytes allocated, and the line counts them.
#[test]
fn alloc_view_still_has_every_freed_stack() {
    let (line, files, _dir) = run("dump-views-alloc", &[("HEAPLIVE_VIEWS", "live,alloc")]);
    assert!(stacks_in(&line) >= 4096, "{line}");
    let alloc = files
        .iter()
        .find(|f| view_of(f) == Some("alloc"))
        .unwrap_or_else(|| panic!("no alloc file in {files:?}"));
    let stacks = parse_folded(alloc);
    let walked: Vec<_> = stacks.iter().filter(|s| s.has("walk")).collect();
    assert_eq!(
        walked.len(),
        4096,
        "distinct freed stacks in the alloc view"
    );
    assert!(walked.iter().all(|s| s.bytes == 64), "{walked:#?}");
}

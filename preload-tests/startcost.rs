//! The start of a process that never samples (issue #13, target 4):
//! nothing is loaded and nothing is started that the first sample does not
//! need. libgcc's unwinder is linked into the library (build.rs), so
//! libgcc_s.so.1 is not loaded into a program that does not load it itself,
//! and heaplive's start makes no lookup that fails (a failed dlsym
//! allocates its message and starts glibc's malloc). The costs themselves
//! are measured by `bench/startcost.sh`, not here.

use crate::common::*;

/// Runs `start_quiet` (under heaplive with `env`, or plain) and returns
/// what it printed about its own mappings.
fn maps_report(with: Option<&[(&str, &str)]>, args: &[&str]) -> (String, TempDir) {
    let dir = tempdir("startcost");
    let exe = compile("start_quiet.c", "start_quiet", dir.path(), &[]);
    let o = match with {
        Some(env) => run_preloaded(dir.path(), &exe, args, env),
        None => run_plain(dir.path(), &exe, args),
    };
    assert!(o.status.success(), "{}", show(&o));
    (stdout(&o), dir)
}

/// Files the run left next to the program.
fn left_files(dir: &TempDir) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "start_quiet")
        .collect();
    v.sort();
    v
}

#[test]
fn never_sampling_process_maps_no_libgcc_s_and_no_malloc_heap() {
    // The program alone: no libgcc_s, and it never calls malloc.
    let (plain, _d) = maps_report(None, &[]);
    assert_eq!(plain, "libgcc_s no\nheap no\n");
    // Under heaplive, default settings but no exit dump: the same.
    let (got, dir) = maps_report(Some(&[("HEAPLIVE_DUMP_AT_EXIT", "0")]), &[]);
    assert_eq!(
        got, "libgcc_s no\nheap no\n",
        "heaplive's start loaded libgcc_s or started glibc's malloc"
    );
    assert_eq!(left_files(&dir), Vec::<String>::new());
}

#[test]
fn small_allocations_below_a_sample_map_no_libgcc_s() {
    // 500 blocks of 24-63 bytes: about 21 KiB, and an interval of 1 GiB
    // makes a sample a chance of 2e-5.
    let (got, dir) = maps_report(
        Some(&[
            ("HEAPLIVE_DUMP_AT_EXIT", "0"),
            ("HEAPLIVE_SAMPLE_INTERVAL", "1073741824"),
        ]),
        &["500"],
    );
    assert_eq!(got, "libgcc_s no\nheap yes\n");
    assert_eq!(left_files(&dir), Vec::<String>::new());
}

#[test]
fn exact_mode_stacks_of_a_c_program_without_libgcc_s() {
    // Every allocation sampled: stacks come from the unwinder linked into
    // the library, and are the program's own (exact bytes at the site).
    let (got, dir) = maps_report(Some(&[("HEAPLIVE_SAMPLE_INTERVAL", "1")]), &["100"]);
    assert_eq!(got, "libgcc_s no\nheap yes\n");
    // The exit dump runs after main returned: all 100 blocks were freed.
    // The peak (all 100 live: sum of 24 + i % 40 for i < 100) has a file.
    let peak: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".peak.folded"))
        .collect();
    assert_eq!(peak.len(), 1, "{:?}", left_files(&dir));
    let stacks = parse_folded(&peak[0]);
    let want: u64 = (0..100u64).map(|i| 24 + i % 40).sum();
    let at_site: u64 = stacks
        .iter()
        .filter(|s| s.has("quiet_site") && s.has("main"))
        .map(|s| s.bytes)
        .sum();
    assert_eq!(at_site, want, "{stacks:?}");
}

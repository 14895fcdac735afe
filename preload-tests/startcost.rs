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

/// The functions heaplive resolves at their first call (`hot::real::eager`).
const LAZY: [&str; 19] = [
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "reallocarray",
    "dlopen",
    "dlclose",
    "epoll_pwait",
    "epoll_pwait2",
    "sigtimedwait",
    "sigwaitinfo",
    "sigwait",
    "signalfd",
    "posix_spawn",
    "posix_spawnp",
    "system",
    "popen",
    "initgroups",
];

/// The names heaplive looked up in libc (its `dlsym(RTLD_NEXT)`; ld.so's
/// relocations of heaplive bind none of these names to libc: heaplive
/// exports them itself), from `LD_DEBUG=bindings` of the program's own
/// process.
fn heaplive_libc_lookups(args: &[&str]) -> (Vec<String>, String) {
    let dir = tempdir("lazyresolve");
    let exe = compile("lazy_resolve.c", "lazy_resolve", dir.path(), &[]);
    let o = run_preloaded(
        dir.path(),
        &exe,
        args,
        &[
            ("HEAPLIVE_DUMP_AT_EXIT", "0"),
            ("LD_DEBUG", "bindings"),
            ("LD_DEBUG_OUTPUT", dir.path().join("ld").to_str().unwrap()),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    let pid = o_pid(&dir);
    let log = std::fs::read_to_string(dir.path().join(format!("ld.{pid}"))).unwrap();
    let lib = lib().canonicalize().unwrap();
    let from = format!("binding file {} [0] to ", lib.display());
    let names = log
        .lines()
        .filter(|l| l.contains(&from) && l.contains("/libc.so.6 [0]: normal symbol `"))
        .filter_map(|l| l.rsplit('`').next()?.strip_suffix('\''))
        .map(str::to_string)
        .collect();
    (names, stdout(&o))
}

/// The pid of the program's own process: the lowest of the LD_DEBUG
/// files (its children write theirs too).
fn o_pid(dir: &TempDir) -> u32 {
    std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_prefix("ld.")?.parse::<u32>().ok()
        })
        .min()
        .expect("an LD_DEBUG file")
}

#[test]
fn functions_a_process_never_calls_are_not_looked_up() {
    let (names, out) = heaplive_libc_lookups(&["none"]);
    assert_eq!(out, "");
    // The allocation functions are found at start...
    for eager in ["malloc", "free", "calloc", "realloc", "sigaction", "fork"] {
        assert!(
            names.iter().any(|n| n == eager),
            "{eager} not looked up: {names:?}"
        );
    }
    // ...and nothing the program does not call.
    let early: Vec<_> = names
        .iter()
        .filter(|n| LAZY.contains(&n.as_str()))
        .collect();
    assert!(early.is_empty(), "looked up at start: {early:?}");
}

#[test]
fn functions_resolved_at_their_first_call_work() {
    let (names, out) = heaplive_libc_lookups(&["all"]);
    let want: String = LAZY.iter().map(|n| format!("ok {n}\n")).collect();
    assert_eq!(out, want);
    // Each looked up once, at its call.
    for n in LAZY {
        assert_eq!(
            names.iter().filter(|m| *m == n).count(),
            1,
            "{n}: {names:?}"
        );
    }
}

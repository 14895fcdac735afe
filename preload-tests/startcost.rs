//! The start of a process that never samples (issue #13, target 4):
//! nothing is loaded and nothing is started that the first sample does not
//! need. libgcc's unwinder is linked into the library (src/build.rs), so
//! libgcc_s.so.1 is not loaded into a program that does not load it itself,
//! and heaplive's start makes no lookup that fails (a failed dlsym
//! allocates its message and starts glibc's malloc). The costs themselves
//! are measured by `bench/startcost.sh`, not here.

use crate::common::*;

/// Runs `start_quiet` (under heaplive with `env`, or plain) and returns
/// what it printed about its own mappings.
fn maps_report(with: Option<&[(&str, &str)]>, args: &[&str]) -> (String, TempDir) {
    let (dir, exe) = compiled("startcost", "start_quiet.c");
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
    let o = run_prog(
        dir.path(),
        "lazy_resolve",
        args,
        &[
            ("HEAPLIVE_DUMP_AT_EXIT", "0"),
            ("LD_DEBUG", "bindings"),
            ("LD_DEBUG_OUTPUT", dir.path().join("ld").to_str().unwrap()),
        ],
    );
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
    // malloc is looked up with dlsym at start (the other functions needed
    // from the start are read from the same object's symbol table)...
    assert!(names.iter().any(|n| n == "malloc"), "{names:?}");
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

/// `(name, address, size)` of every symbol of the library (`nm -S`,
/// demangled) and `(name, address, size)` of its sections (`readelf -S`).
type Extents = Vec<(String, u64, u64)>;

fn library_layout() -> (Extents, Extents) {
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let nm = output_ok(
        std::process::Command::new("nm")
            .args(["-S", "-C", "--defined-only"])
            .arg(lib()),
        "nm",
    );
    let syms = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(4, ' ');
            let (a, s, _, n) = (f.next()?, f.next()?, f.next()?, f.next()?);
            Some((
                n.to_string(),
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(s, 16).ok()?,
            ))
        })
        .collect();
    let re = output_ok(
        std::process::Command::new("readelf")
            .args(["-SW"])
            .arg(lib()),
        "readelf",
    );
    let secs = String::from_utf8_lossy(&re.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.split_once(']')?.1;
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 {
                return None;
            }
            Some((f[0].to_string(), hex(f[2])?, hex(f[4])?))
        })
        .collect();
    (syms, secs)
}

#[test]
fn start_up_code_and_variables_are_grouped() {
    // What a process that never samples touches in the library is laid
    // out together (src/layout.ld): page faults, not instructions, are most of
    // the start cost (bench/RESULTS.md).
    let (syms, secs) = library_layout();
    let sec = |name: &str| {
        secs.iter()
            .find(|s| s.0 == name)
            .unwrap_or_else(|| panic!("no section {name}: {secs:?}"))
            .clone()
    };
    let sym = |part: &str| {
        syms.iter()
            .find(|s| s.0.contains(part))
            .unwrap_or_else(|| panic!("no symbol {part}"))
            .clone()
    };
    let inside = |s: &(String, u64, u64), sec: &(String, u64, u64)| {
        s.1 >= sec.1 && s.1 + s.2 <= sec.1 + sec.2
    };
    // Sections `first` and `then`: `first` starts a window of `size`
    // bytes (aligned so) that `then` ends in.
    let one_window = |first: &str, then: &str, size: u64| {
        let (a, b) = (sec(first), sec(then));
        assert_eq!(a.1 % size, 0, "{a:?}");
        assert!(b.1 + b.2 <= a.1 + size, "{a:?} {b:?}");
        (a, b)
    };
    // Each symbol of `names` inside one of `secs`.
    let all_inside = |names: &[&str], secs: &[&(String, u64, u64)]| {
        for name in names {
            let s = sym(name);
            assert!(
                secs.iter().any(|sec| inside(&s, sec)),
                "{s:?} not in {secs:?}"
            );
        }
    };
    // The start-up code: in one 32 KiB-aligned window (the kernel maps a
    // window around a read fault; 32 KiB here, 64 KiB on most machines),
    // with the PLT that the exit path calls through.
    let (text, _) = one_window(".text.heaplive_start", ".plt", 0x8000);
    // Functions that are never inlined (called through a pointer, or
    // marked so), then any of the rest the compiler kept out of line.
    all_inside(
        &[
            "heaplive::init::",
            "heaplive::hot::real::resolve_all",
            "heaplive::background::dumper::at_exit",
            "std::sys::args::unix::imp::ARGV_INIT_ARRAY::init_wrapper",
        ],
        &[&text],
    );
    let mut out_of_line = 0;
    for f in [
        "heaplive::start",
        "heaplive::hot::signal::install",
        "heaplive::hot::attach::detect",
        "heaplive::interpose::php::init",
        "heaplive::hot::unwind::find_system_libgcc",
        "heaplive::hot::api::alloc_slow",
        "heaplive::hot::sampler::seed_thread",
        // The settings, read at every start (outside the window they
        // cost a fault more: the merge of session 6 moved them out).
        "heaplive::hot::config::load_with",
        "heaplive::hot::config::parse",
        "heaplive::hot::config::apply",
        "heaplive::hot::config::load_var",
        "heaplive::background::dumper::take_signal",
    ] {
        if let Some(s) = syms.iter().find(|s| s.0.starts_with(f)) {
            assert!(inside(s, &text), "{s:?} not in {text:?}");
            out_of_line += 1;
        }
    }
    assert!(out_of_line > 0);
    for f in ["malloc", "free", "calloc", "realloc"] {
        let s = syms.iter().find(|s| s.0 == f).expect("exported");
        assert!(inside(s, &text), "{s:?} not in {text:?}");
    }
    // The small variables (.data and .bss without the big tables) on one
    // page, with the hot path's and the resolver's.
    let (data, bss) = one_window(".data", ".bss", 4096);
    all_inside(
        &[
            "heaplive::hot::real::MALLOC_JUMP",
            "heaplive::hot::real::SLOTS",
            "heaplive::hot::real::STATE",
            "heaplive::hot::services::SERVICES",
            "heaplive::hot::prim::ownheap::HEAP",
            // The list of heaplive's mappings: what the start writes.
            "heaplive::hot::prim::sys::FIRST_SLOTS",
            "heaplive::hot::prim::sys::HINT",
            "heaplive::hot::prim::sys::TAKEN",
            "std::sys::args::unix::imp::ARGC",
        ],
        &[&data, &bss],
    );
    for big in [
        "heaplive::hot::real::BOOT",
        "heaplive::hot::tables::shadow::LOW",
        "heaplive::hot::config::CONFIG",
        "heaplive::hot::tables::live::SHARDS_",
        "heaplive::hot::leak_check::QUEUE",
        "heaplive::hot::prim::sys::MORE_SLOTS",
    ] {
        let s = sym(big);
        assert!(
            !inside(&s, &data) && !inside(&s, &bss),
            "{s:?} among the small variables"
        );
    }
}

#[test]
fn a_preload_after_heaplive_gets_the_calls_it_interposes() {
    // The functions resolved at start without dlsym are read from libc's
    // symbol table only when no object between heaplive and libc could
    // define them: here a second preload defines kill and setuid, and
    // heaplive's wrappers must reach it (dlsym's RTLD_NEXT order).
    let dir = tempdir("nextpreload");
    let next = compile_so("next_kill.c", "libnext.so", dir.path());
    let exe = compile("call_kill.c", "call_kill", dir.path(), &[]);
    let preload = format!("{} {}", lib().display(), next.display());
    let o = run_preloaded(
        dir.path(),
        &exe,
        &[],
        &[("HEAPLIVE_DUMP_AT_EXIT", "0"), ("LD_PRELOAD", &preload)],
    );
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(stdout(&o), "next kill\nnext setuid\ndone\n");
}

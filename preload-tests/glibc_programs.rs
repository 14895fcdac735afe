//! Our own programs under the preload and glibc, beside glibc's suite
//! (`glibc.rs`, whose harness they use: a time limit, a session killed
//! after each run, plain against preloaded runs): forks from signal
//! handlers, allocator stress patterns, staying single-threaded, rlimits,
//! heaplive's thread never calling glibc's malloc, nothing re-entering the
//! loader.

use super::*;

/// A fresh directory `name` with `progs/NAME.c` compiled in it.
fn built(name: &str) -> (TempDir, PathBuf) {
    let dir = tempdir(name);
    let bin = compile(&format!("{name}.c"), name, &dir, &[]);
    (dir, bin)
}

/// [`built`], then run without the preload (within `limit`), which must
/// exit 0 and print `want`: the directory and the binary.
fn built_and_plain(name: &str, limit: Duration, want: &str) -> (TempDir, PathBuf) {
    let (dir, bin) = built(name);
    let plain = run_limited(command(&bin, &dir, Plain, &[]), &dir, "plain", limit);
    assert!(
        plain.passed() && plain.stdout == want,
        "{name} without the preload: {}\n{}",
        plain.describe(limit),
        plain.tail()
    );
    (dir, bin)
}

/// Builds `progs/<name>.c`, runs it plain, under the preload and in exact
/// mode; each preload run must give the plain run's stdout and exit
/// status, unless KNOWN_HEAPLIVE_BUGS lists it. `plain_ok` checks the
/// plain run itself.
fn program_matches_plain(name: &str, limit: Duration, plain_ok: &dyn Fn(&Run) -> bool) {
    let (dir, bin) = built(name);
    let runs: Vec<Run> = [Plain, Default, Exact]
        .iter()
        .map(|m| run_limited(command(&bin, &dir, *m, &[]), &dir, m.name(), limit))
        .collect();
    let plain = &runs[0];
    assert!(
        plain.status.is_some() && plain_ok(plain),
        "{name} without the preload: {}\n{}",
        plain.describe(limit),
        plain.tail()
    );
    let mut report = Vec::new();
    let failures = judge(
        name,
        plain,
        &[(Default, &runs[1]), (Exact, &runs[2])],
        limit,
        &|r| r.status.is_some() && r.code() == plain.code() && r.stdout == plain.stdout,
        &mut report,
    );
    for (mode, run) in [(Default, &runs[1]), (Exact, &runs[2])] {
        if run.stdout != plain.stdout {
            report.push(format!(
                "       {name} [{}] stdout:\n{}\n       plain stdout:\n{}",
                mode.name(),
                run.stdout.trim_end(),
                plain.stdout.trim_end()
            ));
        }
    }
    assert_no_failures(&failures, "\n\n", "\n\n", &report);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fork_from_a_sigalrm_handler_2000_times_completes() {
    program_matches_plain("glibc_fork_sigalrm", Duration::from_secs(30), &|r| {
        r.passed() && r.stdout.starts_with("forks: 2000\nfailed forks: 0\n")
    });
}

/// A fork from a signal handler that interrupts the main thread's own fork
/// inside heaplive's parent handler, while it releases heaplive's locks:
/// the handler's fork took heaplive's locks again, some still held by the
/// same thread, and waited for itself forever (the signal-action lock
/// never gives up). The exact-mode hang of tst-mallocfork2 looked like this:
/// after one dump, no more dumps and no output from its SIGUSR2 handler.
#[test]
pub(crate) fn fork_from_a_signal_handler_during_a_fork_completes() {
    program_matches_plain("glibc_fork_nested", Duration::from_secs(60), &|r| {
        r.passed()
            && r.stdout
                == "forks in the main loop: 1500\nfailed: 0\nfailed in the handler: 0\n\
                    handler forked: yes\n"
    });
}

/// The stress patterns other heap profilers' suites are known for, in one
/// program (`glibc_patterns.c`): every aligned-allocation function over
/// alignments 8..64K and sizes 1..200000, valloc/pvalloc, realloc chains
/// to 64 MiB and back keeping their contents, malloc_usable_size, mallopt,
/// malloc_trim, mallinfo2, reallocarray/calloc/realloc/memalign/
/// posix_memalign overflow (NULL with ENOMEM, EINVAL), free(NULL) keeping
/// errno, and 4 threads freeing each other's blocks. Its output and exit
/// status plain, at the default interval and in exact mode must be equal.
/// (core_exact.rs checks exact bytes per call site of the entry points;
/// this checks behaviour in all three modes.)
#[test]
fn allocator_stress_patterns_behave_as_without_the_preload() {
    program_matches_plain("glibc_patterns", Duration::from_secs(60), &|r| {
        r.passed() && r.stdout.ends_with("\n0 failures\n") && !r.stdout.contains("FAILED")
    });
}

/// A program that never creates a thread (`glibc_single_threaded.c`)
/// under `HEAPLIVE_SIGNAL=none`, at the default interval and in exact mode:
/// `__libc_single_threaded` stays 1, as without the preload (issue #18).
/// Before heaplive's thread started only for a feature that needs it, the
/// first sample started it and the program printed 0.
///
/// With the default settings the dump signal is on, and it needs heaplive's
/// thread from the first sample on: the signal is blocked in every program
/// thread and taken there with sigtimedwait, so that no call of the program
/// is interrupted by it (signal_waits.rs); so the program prints 0 there,
/// as README.md's "Threads" says. (The cost of that thread for a
/// single-threaded program is measured in bench/RESULTS.md.) In every
/// run the exit's peak line, if any, times the peak within the run.
#[test]
fn a_program_without_threads_stays_single_threaded() {
    let name = "glibc_single_threaded";
    let limit = Duration::from_secs(30);
    let (dir, bin) = built_and_plain(name, limit, "__libc_single_threaded=1\n");
    let mut bad = Vec::new();
    for mode in [Default, Exact] {
        for (signal, want) in [("none", "1"), ("", "0")] {
            let env: &[(&str, &str)] = if signal.is_empty() {
                &[]
            } else {
                &[("HEAPLIVE_SIGNAL", signal)]
            };
            let tag = format!("{}-signal-{}", mode.name(), signal);
            let r = run_limited(command(&bin, &dir, mode, env), &dir, &tag, limit);
            let want = format!("__libc_single_threaded={want}\n");
            if let Err(e) = peak_within_run(&r) {
                bad.push(format!(
                    "[{} mode, HEAPLIVE_SIGNAL={signal:?}]: {e}",
                    mode.name()
                ));
            }
            if !r.passed() || r.stdout != want {
                bad.push(format!(
                    "[{} mode, HEAPLIVE_SIGNAL={}]: {}, stdout {:?}, want exit 0 and {want:?}\n{}",
                    mode.name(),
                    if signal.is_empty() {
                        "(default)"
                    } else {
                        signal
                    },
                    r.describe(limit),
                    r.stdout,
                    r.tail()
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The exit's peak line ("peak X live (...) at S s after start"), if any,
/// must time the peak within the run: the start was noted only when
/// heaplive's thread started, so without the thread the line gave the
/// machine's uptime ("at 21750.102 s after start").
fn peak_within_run(r: &Run) -> Result<(), String> {
    let Some(line) = r.stderr.lines().find(|l| l.contains("]: peak ")) else {
        return Ok(());
    };
    let secs: f64 = between(line, " at ", " s after start")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("cannot read the peak line: {line}"))?;
    if secs <= r.secs {
        Ok(())
    } else {
        Err(format!(
            "the peak came {secs} s after start in a run of {:.1} s: {line}",
            r.secs
        ))
    }
}

/// `HEAPLIVE_SIGNAL=none` and nothing else that needs heaplive's thread: a
/// program that creates no thread (`glibc_nothread.c`) stays
/// single-threaded while heaplive samples, while `heaplive_dump()` writes
/// its file (on the calling thread) and through the exit dump; the first
/// leak warning that is due (HEAPLIVE_WARN_BYTES=4M, one site growing to
/// 32 MiB) starts heaplive's thread, which writes the warning: the flag
/// reads 1 before it and 0 after. Exact mode: the exact live bytes per
/// call site in both dumps, and the exit's peak line timed from heaplive's
/// start. Default interval: the same flags and files;
/// the warning needs 8 samples of the 512 blocks of 64 KiB (each taken
/// with p = 0.1175, 60 expected): a false failure about once in 10^17.
/// Before the change the first sample started the thread (0 before the
/// dump).
#[test]
fn without_the_dump_signal_a_program_stays_single_threaded_until_a_leak_warning() {
    let name = "glibc_nothread";
    let limit = Duration::from_secs(60);
    let (top, bin) = built_and_plain(
        name,
        limit,
        "before the dump: __libc_single_threaded=1\nheaplive_dump: none\n\
         after the dump: __libc_single_threaded=1\n\
         after 32 MiB at one site: __libc_single_threaded=1\n",
    );
    for mode in [Default, Exact] {
        let dir = top.join(mode.name());
        let req_dir = dir.join("requested");
        std::fs::create_dir_all(&req_dir).unwrap();
        let requested = req_dir.join("requested.folded");
        let mut c = command(
            &bin,
            &dir,
            mode,
            &[("HEAPLIVE_SIGNAL", "none"), ("HEAPLIVE_WARN_BYTES", "4M")],
        );
        c.arg(&requested);
        let r = run_limited(c, &dir, "run", limit);
        let ctx = format!("[{} mode]\n{}", mode.name(), r.tail());
        assert_eq!(
            (r.code(), r.stdout.as_str()),
            (
                Some(0),
                "before the dump: __libc_single_threaded=1\nheaplive_dump: 0\n\
                 after the dump: __libc_single_threaded=1\n\
                 after 32 MiB at one site: __libc_single_threaded=0\n"
            ),
            "{ctx}"
        );
        let warning = r
            .stderr
            .lines()
            .find(|l| l.contains("possible leak"))
            .unwrap_or_else(|| panic!("no leak warning\n{ctx}"));
        assert!(warning.contains("site_leak"), "{warning}\n{ctx}");
        assert!(requested.exists(), "heaplive_dump() wrote no file\n{ctx}");
        let exit = only_folded(&dir);
        if mode == Exact {
            let at_request = bytes_by_leaf(&parse_folded(&requested));
            let at_exit = bytes_by_leaf(&exit);
            let get = |m: &std::collections::BTreeMap<String, u64>, k: &str| {
                m.get(k).copied().unwrap_or(0)
            };
            assert_eq!(
                [
                    get(&at_request, "site_small"),
                    get(&at_request, "site_odd"),
                    get(&at_request, "site_leak"),
                ],
                [3000, 1665, 0],
                "heaplive_dump()'s file: {at_request:?}\n{ctx}"
            );
            assert_eq!(
                [
                    get(&at_exit, "site_small"),
                    get(&at_exit, "site_odd"),
                    get(&at_exit, "site_leak"),
                ],
                [3000, 1665, 256 * 65536],
                "the exit dump: {at_exit:?}\n{ctx}"
            );
            assert!(
                r.stderr.contains("]: peak 32.0 MiB live (exact) at "),
                "no peak line\n{ctx}"
            );
            if let Err(e) = peak_within_run(&r) {
                panic!("{e}\n{ctx}");
            }
        } else {
            assert!(
                bytes_under(&exit, "site_leak") > 0,
                "the exit dump shows no site_leak: {exit:?}\n{ctx}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&top);
}

#[test]
fn lowering_rlimit_as_after_start_leaves_room() {
    program_matches_plain("glibc_rlimit_as", Duration::from_secs(30), &|r| {
        r.passed()
            && r.stdout.contains("allocated and touched: 100 MiB of 100")
            && r.stdout
                .contains("threads started: 4 of 4, allocated in the thread: 4")
    });
}

/// heaplive's thread never calls glibc's malloc, free, calloc or realloc
/// (`hot::forking`: a fork from a signal handler sets
/// `__libc_single_threaded` for the real fork, and glibc's malloc then
/// takes no arena lock). A second preload after heaplive (`glibc_spy.c`)
/// counts the calls made on the thread named "heaplive" while it writes
/// periodic dumps, signal dumps, status files and leak warnings. Before
/// the fix every dump called opendir (32 KiB through glibc's malloc).
#[test]
fn heaplive_thread_never_calls_glibc_malloc() {
    let dir = tempdir("glibc-spy");
    let spy = compile_so("glibc_spy.c", "libglibc_spy.so", &dir);
    let bin = compile("glibc_own_thread.c", "glibc_own_thread", &dir, &[]);
    for (mode, interval) in [("exact", "1"), ("default", "")] {
        let mut env = vec![
            ("HEAPLIVE_DUMP_EVERY", "20ms"),
            ("HEAPLIVE_WARN_BYTES", "64K"),
        ];
        if !interval.is_empty() {
            env.push(("HEAPLIVE_SAMPLE_INTERVAL", interval));
        }
        // Its own directory: the program counts the dump files there.
        let work = dir.join(mode);
        std::fs::create_dir_all(&work).unwrap();
        let mut c = preloaded_command(&work, &bin, &[], &env);
        c.env(
            "LD_PRELOAD",
            format!("{}:{}", lib().display(), spy.display()),
        );
        let o = c.output().expect("run the program");
        let err = stderr(&o);
        let spied = err
            .lines()
            .find_map(|l| l.strip_prefix("spy: glibc allocation calls on heaplive's thread: "))
            .unwrap_or_else(|| panic!("[{mode}] no line from the spy:\n{}", show(&o)));
        let (ours, theirs) = spied
            .split_once("; on the program's: ")
            .unwrap_or_else(|| panic!("[{mode}] {spied}"));
        assert!(
            o.status.success() && stdout(&o) == "grew: yes\n",
            "[{mode}]\n{}",
            show(&o)
        );
        assert!(
            theirs.parse::<u64>().unwrap_or(0) > 1000,
            "[{mode}] the spy did not see the program's allocations: {spied}"
        );
        // heaplive's thread did its work while the spy watched.
        for what in ["periodic dump", "signal dump"] {
            assert!(err.contains(what), "[{mode}] no {what}:\n{err}");
        }
        if mode == "exact" {
            assert!(
                err.contains("possible leak"),
                "[{mode}] no leak warning:\n{err}"
            );
        }
        assert_eq!(
            ours, "0",
            "[{mode}] heaplive's thread called glibc's allocator:\n{err}"
        );
    }
}

/// heaplive never re-enters ld.so with a dlopen of its own from inside the
/// program's dlopen. Its thread starts at the first sample, and that can be
/// an allocation ld.so makes while it maps the program's library; the
/// thread's start used to dlopen/dlclose libc (to find
/// `__libc_single_threaded`) right there, and when that happened while ld.so
/// mapped a dependency, ld.so aborted the program ("Inconsistency detected
/// by ld.so: dl-sort-maps.c: 234: _dl_sort_maps_dfs: Assertion `rpo_head ==
/// rpo' failed!", exit status 127; php-cli loading its extensions, about 1
/// start in 100). Here the first sample is always inside the dlopen (exact
/// mode, nothing allocated before it), and glibc's LD_DEBUG=files shows
/// every dlopen and dlclose: none may appear while the program's library is
/// being loaded.
#[test]
fn no_dlopen_of_heaplive_inside_the_programs_dlopen() {
    let (_dir, o) = deep_main_dlclose(
        "glibc-nested-dlopen",
        "libdeep_nested.so",
        &[("LD_DEBUG", "files")],
    );
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("dynamically loaded by"))
        .unwrap_or_else(|| panic!("no LD_DEBUG line for the dlopen\n{}", show(&o)));
    let init = lines[start..]
        .iter()
        .position(|l| l.contains("calling init:") && l.contains("libdeep_nested.so"))
        .map_or(lines.len(), |i| start + i);
    let nested: Vec<&&str> = lines[start..init]
        .iter()
        .filter(|l| l.contains("opening file=") || l.contains("closing file="))
        .collect();
    assert!(
        nested.is_empty(),
        "a dlopen/dlclose inside the program's dlopen: {nested:?}\n{}",
        show(&o)
    );
}

/// heaplive's thread is not started from ld.so's own allocations in the
/// middle of a dlopen (its module and TLS lists half built: glibc's thread
/// set-up reads them); it starts at the next sample outside the loader. In
/// exact mode with the default dump signal the first sample of this
/// program is ld.so's allocation for the library it dlopens; the library's
/// constructor counts the threads (with system calls only) and must find
/// one, as without heaplive. Before the fix it found two.
#[test]
fn heaplive_thread_is_not_started_inside_the_loader() {
    let dir = tempdir("glibc-loader-thread");
    let lib = compile_so("loader_thread_lib.c", "libloader_thread.so", &dir);
    let prog = compile("loader_thread_main.c", "loader_thread_main", &dir, &[]);
    let plain = Command::new(&prog)
        .arg(&lib)
        .output()
        .expect("run the program");
    assert_eq!(
        stdout(&plain),
        "threads when the library's constructor ran: 1\n",
        "{}",
        show(&plain)
    );
    for interval in ["1", "64"] {
        let o = run_preloaded(
            &dir,
            &prog,
            &[lib.to_str().unwrap()],
            &[("HEAPLIVE_SAMPLE_INTERVAL", interval)],
        );
        assert!(o.status.success(), "[interval {interval}] {}", show(&o));
        assert_eq!(
            stdout(&o),
            stdout(&plain),
            "[interval {interval}] {}",
            show(&o)
        );
    }
}

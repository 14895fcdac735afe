//! The dump signal, the program's own dispositions for it, fork children,
//! `heaplive_dump()`, periodic dumps, other dump signals, and dlopen
//! (RTLD_DEEPBIND, dlclose). Programs: `progs/sig_*.c`, `progs/fork_*.c`,
//! `progs/deep_*.c`.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

fn assert_ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: the program failed\n{}",
        show(o)
    );
}

/// Compiles `progs/NAME.c` into `dir` and runs it there under the
/// library with `args` and `env`; asserts it succeeded (`what` names the
/// run).
fn run_ok_at(dir: &Path, name: &str, args: &[&str], env: &[(&str, &str)], what: &str) -> Output {
    let prog = compile(&format!("{name}.c"), name, dir, &[]);
    let o = run_preloaded(dir, &prog, args, env);
    assert_ok(&o, what);
    o
}

/// [`run_ok_at`] in a fresh directory ([`tempdir`] `tag`): the directory
/// and the run.
fn run_ok(
    tag: &str,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
    what: &str,
) -> (TempDir, Output) {
    let dir = tempdir(tag);
    let o = run_ok_at(&dir, name, args, env, what);
    (dir, o)
}

/// `run_ok_at` in exact mode.
fn exact_ok(dir: &Path, name: &str, args: &[&str], what: &str) -> Output {
    run_ok_at(dir, name, args, &[("HEAPLIVE_SAMPLE_INTERVAL", "1")], what)
}

/// Every folded file in `dir` parses (parse_folded panics on a bad line);
/// returns them by name.
fn all_whole(dir: &Path) -> BTreeMap<PathBuf, Vec<Stack>> {
    folded_files(dir)
        .into_iter()
        .map(|p| (p.clone(), parse_folded(&p)))
        .collect()
}

/// `dir/heaplive.<exe>.<pid>.<n>.folded`.
fn file_of(dir: &Path, exe: &str, pid: u32, n: u32) -> PathBuf {
    dir.join(format!("heaplive.{exe}.{pid}.{n}.folded"))
}

/// Folded files in `dir` written by `pid` (by the default-like template).
fn files_of_pid(dir: &Path, pid: u32) -> Vec<PathBuf> {
    let needle = format!(".{pid}.");
    folded_files(dir)
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(&needle))
        .collect()
}

/// heaplive's lines on stderr that say `<why> dump`.
fn dump_lines<'a>(err: &'a str, why: &str) -> Vec<&'a str> {
    let pat = format!("]: {why} dump ");
    err.lines()
        .filter(|l| l.starts_with("heaplive[") && l.contains(&pat))
        .collect()
}

/// The pid in the last `<key> <pid>` line of stdout.
fn pid_after(out: &str, key: &str) -> u32 {
    out.lines()
        .filter_map(|l| l.strip_prefix(key))
        .filter_map(|r| r.trim().parse().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no `{key}<pid>` line in stdout:\n{out}"))
}

fn file_text(files: &BTreeMap<PathBuf, Vec<Stack>>) -> String {
    let mut s = String::new();
    for p in files.keys() {
        s.push_str(&format!(
            "=== {}\n{}",
            p.display(),
            std::fs::read_to_string(p).unwrap_or_default()
        ));
    }
    s
}

#[test]
pub(crate) fn signal_burst_during_threaded_allocation() {
    let (dir, o) = run_ok(
        "sig-burst",
        "sig_burst",
        &[],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1K")],
        "burst of 200 signals",
    );
    let err = stderr(&o);
    assert!(
        stdout(&o).contains("dumped 1"),
        "no signal dump before the program stopped\n{}",
        show(&o)
    );
    assert!(!err.contains("dump failed"), "a dump failed\n{}", show(&o));
    let signal_dumps = dump_lines(&err, "signal").len();
    assert!(
        (1..=200).contains(&signal_dumps),
        "{signal_dumps} signal dumps for 200 signals\n{}",
        show(&o)
    );
    assert_eq!(
        dump_lines(&err, "exit").len(),
        1,
        "one exit dump expected\n{}",
        show(&o)
    );
    // Every file is whole: every line parses, no temporary left behind.
    let files = all_whole(&dir);
    assert_eq!(
        files.len(),
        signal_dumps + 1,
        "one file per dump expected, found {:?}\n{}",
        files.keys(),
        show(&o)
    );
    for (p, stacks) in &files {
        for s in stacks {
            assert!(
                s.frames.iter().all(|f| !f.is_empty()),
                "{}: empty frame in {:?}",
                p.display(),
                s.frames
            );
        }
    }
    let leftovers = names_containing(&dir, ".tmp.");
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
pub(crate) fn fork_children_keep_their_own_profiles() {
    let dir = tempdir("fork-children");
    let o = exact_ok(&dir, "fork_children", &[], "fork of 4 children");
    let out = stdout(&o);
    let parent = pid_after(&out, "parent ");
    let amounts = [110_000u64, 220_000, 330_000, 440_000];
    let files = all_whole(&dir);
    let ctx = || format!("{}\n{}", show(&o), file_text(&files));

    // The stacks of `pid`'s one file, its exit dump (else: `what`).
    let only_file = |pid: u32, what: &str| {
        let f = files_of_pid(&dir, pid);
        let want = vec![file_of(&dir, "fork_children", pid, 1)];
        assert_eq!(f, want, "{what}\n{}", ctx());
        &files[&f[0]]
    };
    let ps = only_file(parent, "parent files");
    assert_eq!(
        bytes_under(ps, "parent_leak"),
        300_000,
        "parent's own leak in its file\n{}",
        ctx()
    );
    for i in 0..4 {
        assert_eq!(
            bytes_under(ps, &format!("child_leak_{i}")),
            0,
            "the parent's file shows child {i}'s leak\n{}",
            ctx()
        );
    }
    for (i, want) in amounts.iter().enumerate() {
        let pid = pid_after(&out, &format!("child {i} "));
        assert_ne!(pid, parent);
        let cs = only_file(
            pid,
            &format!("child {i} (pid {pid}): one exit file of its own"),
        );
        assert_eq!(
            bytes_under(cs, &format!("child_leak_{i}")),
            *want,
            "child {i}'s leak in its file\n{}",
            ctx()
        );
        assert_eq!(
            bytes_by_leaf(cs).get(&format!("child_leak_{i}")).copied(),
            Some(*want),
            "child {i}: leaf\n{}",
            ctx()
        );
        for j in (0..4).filter(|&j| j != i) {
            assert_eq!(
                bytes_under(cs, &format!("child_leak_{j}")),
                0,
                "child {i}'s file shows child {j}'s leak\n{}",
                ctx()
            );
        }
        // What the child inherited is really live there (copy-on-write).
        assert_eq!(
            bytes_under(cs, "parent_leak"),
            300_000,
            "child {i}: the inherited leak\n{}",
            ctx()
        );
    }
    assert_eq!(files.len(), 5, "5 exit files expected\n{}", ctx());
}

fn app_handler_runs(mode: &str) {
    let (dir, o) = run_ok(
        &format!("sig-handler-{mode}"),
        "sig_handler",
        &[mode],
        &[],
        mode,
    );
    let out = stdout(&o);
    assert!(
        out.contains("handler ran 5 times, info ok, dumps ok"),
        "{mode}: the program's handler must run once per signal, and dumps must happen\n{}",
        show(&o)
    );
    let n = dump_lines(&stderr(&o), "signal").len();
    assert!(n >= 1, "{mode}: no signal dump\n{}", show(&o));
    all_whole(&dir);
}

#[test]
fn application_handler_installed_with_sigaction_still_runs() {
    app_handler_runs("sigaction");
}

#[test]
fn application_handler_installed_with_signal_still_runs() {
    app_handler_runs("signal");
}

#[test]
fn sig_ign_and_sig_dfl_are_virtual() {
    let dir = tempdir("sig-ign-dfl");
    // Exact mode: the first malloc starts heaplive's thread, which takes
    // the signals from outside at once.
    let o = exact_ok(&dir, "sig_ign_dfl", &[], "SIG_IGN/SIG_DFL");
    let out = stdout(&o);
    for l in [
        "alive after SIG_IGN",
        "alive after SIG_DFL",
        "alive after signal(); all ok",
    ] {
        assert!(out.contains(l), "missing `{l}`\n{}", show(&o));
    }
    let n = dump_lines(&stderr(&o), "signal").len();
    assert!(
        n >= 3,
        "3 signal dumps expected (one per signal, waited for), got {n}\n{}",
        show(&o)
    );
    all_whole(&dir);
}

#[test]
fn heaplive_dump_from_c() {
    let (dir, prog) = compiled("sig-api", "sig_api_dump.c");
    // Without the library the program runs and says so.
    let plain = run_plain(&dir, &prog, &[]);
    assert!(
        plain.status.success() && stdout(&plain).contains("no heaplive"),
        "plain run\n{}",
        show(&plain)
    );

    let sub = dir.join("explicit");
    std::fs::create_dir_all(&sub).unwrap();
    let explicit = sub.join("mine.folded");
    let o = run_preloaded(
        &dir,
        &prog,
        &[explicit.to_str().unwrap()],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    assert_ok(&o, "heaplive_dump");
    assert!(
        stdout(&o).contains("r1 0 r2 0"),
        "heaplive_dump must return 0\n{}",
        show(&o)
    );
    let pid = o_pid(&o);
    let requested = dump_lines(&stderr(&o), "requested").len();
    assert_eq!(requested, 2, "two `requested dump` lines\n{}", show(&o));

    // `file` exists (else: `must` and its name) and holds `a` bytes under
    // api_leak_a and `b` under api_leak_b (else: `what`).
    let holds = |file: &Path, must: &str, what: &str, a: u64, b: u64| {
        assert!(file.exists(), "{must} {}\n{}", file.display(), show(&o));
        let s = parse_folded(file);
        assert_eq!(bytes_under(&s, "api_leak_a"), a, "{what}\n{}", show(&o));
        assert_eq!(bytes_under(&s, "api_leak_b"), b, "{what}\n{}", show(&o));
    };
    let first = file_of(&dir, "sig_api_dump", pid, 1);
    let must = "heaplive_dump(NULL) must write the template's first file";
    holds(&first, must, "first dump", 123_456, 0);
    let must = "heaplive_dump(path) must write";
    holds(&explicit, must, "explicit dump", 123_456, 654_321);
    assert_eq!(folded_files(&sub).len(), 1);

    // The exit dump: both freed.
    let exit_lines = dump_lines(&stderr(&o), "exit").len();
    assert_eq!(exit_lines, 1, "one exit dump\n{}", show(&o));
    let others: Vec<_> = folded_files(&dir)
        .into_iter()
        .filter(|p| *p != first)
        .collect();
    assert_eq!(
        others.len(),
        1,
        "the exit file besides the first: {others:?}\n{}",
        show(&o)
    );
    let s3 = parse_folded(&others[0]);
    assert_eq!(
        bytes_under(&s3, "api_leak_a") + bytes_under(&s3, "api_leak_b"),
        0,
        "exit dump after the frees\n{}",
        show(&o)
    );
}

/// The pid heaplive printed in its lines (`heaplive[<pid>]: ...`).
fn o_pid(o: &Output) -> u32 {
    heaplive_pid(&stderr(o)).unwrap_or_else(|| panic!("no heaplive[pid] line\n{}", show(o)))
}

#[test]
fn periodic_dumps_every_second() {
    let (dir, o) = run_ok(
        "sig-periodic",
        "sig_periodic",
        &[],
        &[
            ("HEAPLIVE_DUMP_EVERY", "1"),
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
        ],
        "periodic",
    );
    let err = stderr(&o);
    let periodic = dump_lines(&err, "periodic");
    assert!(
        periodic.len() >= 2,
        "at least 2 periodic dumps with HEAPLIVE_DUMP_EVERY=1 (the program lives until its status file counts 2 dumps)\n{}",
        show(&o)
    );
    let files = all_whole(&dir);
    assert!(
        files.len() > periodic.len(),
        "a file per periodic dump plus the exit file: {:?}\n{}",
        files.keys(),
        show(&o)
    );
    for (p, s) in &files {
        assert_eq!(
            bytes_under(s, "periodic_leak"),
            250_000,
            "{}\n{}",
            p.display(),
            show(&o)
        );
    }
}

/// The status file heaplive keeps for `pid`: (dumps, last, signal).
fn status_of(pid: u32) -> Option<(u32, String, i32)> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let t = std::fs::read_to_string(format!("/tmp/heaplive-{uid}/{pid}")).ok()?;
    let mut dumps = None;
    let mut last = None;
    let mut sig = None;
    for l in t.lines() {
        if let Some(v) = l.strip_prefix("dumps ") {
            dumps = v.parse().ok();
        } else if let Some(v) = l.strip_prefix("last ") {
            last = Some(v.to_string());
        } else if let Some(v) = l.strip_prefix("signal ") {
            sig = v.parse().ok();
        }
    }
    Some((dumps?, last?, sig?))
}

fn dumps_on(spec: &str, sig: i32) {
    let (dir, o) = run_ok(
        &format!("sig-custom-{}", spec.replace('+', "p")),
        "sig_custom",
        &[spec],
        &[("HEAPLIVE_SIGNAL", spec), ("HEAPLIVE_SAMPLE_INTERVAL", "1")],
        spec,
    );
    assert!(
        stdout(&o).contains(&format!("alive after signal {sig}, dumped 1")),
        "{spec}\n{}",
        show(&o)
    );
    assert!(
        !stderr(&o).contains("HEAPLIVE_SIGNAL"),
        "no warning expected for {spec}\n{}",
        show(&o)
    );
    let lines = dump_lines(&stderr(&o), "signal").len();
    assert_eq!(lines, 1, "{spec}: one signal dump\n{}", show(&o));
    let pid = o_pid(&o);
    let s = parse_folded(&file_of(&dir, "sig_custom", pid, 1));
    assert_eq!(
        bytes_under(&s, "custom_leak"),
        100_000,
        "{spec}\n{}",
        show(&o)
    );
    // The status file (for `heaplive dump`) leaves with the process.
    assert!(
        status_of(pid).is_none(),
        "status file of {pid} left behind after exit"
    );
}

#[test]
fn heaplive_signal_usr1() {
    dumps_on("USR1", libc::SIGUSR1);
}

#[test]
fn heaplive_signal_rtmin_plus_2() {
    dumps_on("RTMIN+2", libc::SIGRTMIN() + 2);
}

#[test]
fn heaplive_signal_kill_warns_and_keeps_usr2() {
    // Exact mode: the first malloc is sampled and starts heaplive's thread,
    // which takes the signal from outside (before a first sample it would
    // wait, pending, until one).
    let (_dir, o) = run_ok(
        "sig-kill",
        "sig_custom",
        &["USR2"],
        &[
            ("HEAPLIVE_SIGNAL", "KILL"),
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
        ],
        "HEAPLIVE_SIGNAL=KILL",
    );
    let err = stderr(&o);
    let warn = one_line_with(
        &err,
        "HEAPLIVE_SIGNAL",
        &format!("one warning line naming HEAPLIVE_SIGNAL\n{}", show(&o)),
    );
    assert!(
        warn.contains("KILL") && warn.contains("USR2"),
        "the warning names the value and the default USR2\n{}",
        show(&o)
    );
    assert!(
        stdout(&o).contains(&format!("alive after signal {}, dumped 1", libc::SIGUSR2)),
        "USR2 still dumps\n{}",
        show(&o)
    );
    assert_eq!(dump_lines(&err, "signal").len(), 1, "{}", show(&o));
}

#[test]
fn rtld_deepbind_is_cleared() {
    let dir = tempdir("deep-bind");
    let a = compile_so("deep_lib.c", "libdeep_a.so", &dir);
    let b = compile_so("deep_lib.c", "libdeep_b.so", &dir);
    let o = exact_ok(
        &dir,
        "deep_main",
        &["deepbind", a.to_str().unwrap(), b.to_str().unwrap()],
        "RTLD_DEEPBIND",
    );
    assert!(stdout(&o).contains("loaded"), "{}", show(&o));
    let err = stderr(&o);
    let said = one_line_with(
        &err,
        "RTLD_DEEPBIND",
        &format!(
            "one line about RTLD_DEEPBIND (said once for two dlopens)\n{}",
            show(&o)
        ),
    );
    assert!(
        said.contains("cleared"),
        "the line says the flag was cleared\n{}",
        show(&o)
    );
    let s = only_folded(&dir);
    let leaf = bytes_by_leaf(&s);
    assert_eq!(
        leaf.get("deep_alloc").copied(),
        Some(777_777 + 111_111),
        "the libraries' allocations under deep_alloc\n{}\n{:#?}",
        show(&o),
        s
    );
}

#[test]
fn dlclosed_library_frames_keep_their_names() {
    let (dir, o) = deep_main_dlclose("deep-dlclose", "libdeep_gone.so", &[]);
    assert!(
        stdout(&o).contains("unloaded yes"),
        "the library must really be unloaded before exit\n{}",
        show(&o)
    );
    let s = only_folded(&dir);
    let hits: Vec<_> = s.iter().filter(|st| st.bytes == 555_555).collect();
    assert_eq!(
        hits.len(),
        1,
        "one stack with the 555,555-byte leak\n{}\n{:#?}",
        show(&o),
        s
    );
    assert_eq!(
        hits[0].leaf(),
        "deep_alloc",
        "the unloaded library's frame keeps its name: {:?}\n{}",
        hits[0].frames,
        show(&o)
    );
    assert!(hits[0].has("main"), "{:?}", hits[0].frames);
}

/// php-fpm's master reloads on SIGUSR2 by re-executing itself: a dump the
/// signal asked for must be written before the exec replaces the process.
#[test]
fn signal_dump_is_not_lost_to_an_exec_right_after_the_signal() {
    let dir = tempdir("sig-exec-now");
    let o = exact_ok(&dir, "sig_exec", &["now"], "exec after the dump signal");
    let pid = pid_after(&stdout(&o), "before exec in ");
    assert!(
        stdout(&o).contains(&format!("after exec in {pid}")),
        "{}",
        show(&o)
    );
    let err = stderr(&o);
    assert_eq!(
        dump_lines(&err, "signal").len(),
        1,
        "SIGUSR2 then exec at once: the requested dump was lost (the exec killed the dumper thread)\n{}\nfiles: {:?}",
        show(&o),
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>()
    );
    let leftovers = names_containing(&dir, ".tmp.");
    assert!(
        leftovers.is_empty(),
        "half-written files left by the exec: {leftovers:?}\n{}",
        show(&o)
    );
}

/// After an exec (same pid, the library loaded afresh) the dump numbers go
/// on: the new image's exit dump must not overwrite the file of a dump made
/// before the exec.
#[test]
fn dump_files_before_an_exec_are_not_overwritten_after_it() {
    let dir = tempdir("sig-exec-wait");
    let o = exact_ok(&dir, "sig_exec", &["wait"], "exec after the signal dump");
    let pid = pid_after(&stdout(&o), "before exec in ");
    let err = stderr(&o);
    assert_eq!(dump_lines(&err, "signal").len(), 1, "{}", show(&o));
    assert_eq!(dump_lines(&err, "exit").len(), 1, "{}", show(&o));
    let files = all_whole(&dir);
    assert_eq!(
        files.len(),
        2,
        "a signal dump before the exec and an exit dump after it: two files, found {:?}\n{}",
        files.keys(),
        show(&o)
    );
    let with_leak = files
        .values()
        .filter(|s| bytes_under(s, "exec_leak") == 200_000)
        .count();
    assert_eq!(
        with_leak,
        1,
        "the pre-exec dump (exec_leak 200,000 bytes) was overwritten\n{}\n{}",
        show(&o),
        file_text(&files)
    );
    assert!(
        files
            .keys()
            .all(|p| p.to_string_lossy().contains(&format!(".{pid}.")))
    );
}

/// fork while four threads allocate flat out in exact mode (every call takes
/// the library's locks) and dump signals arrive: no child or parent may
/// hang or crash, and every child writes its own exit dump with its own
/// allocations.
#[test]
pub(crate) fn fork_during_multithreaded_allocation_keeps_every_lock_usable() {
    let (dir, prog) = compiled("fork-threads", "fork_threads.c");
    let mut child = Running::spawn(
        std::process::Command::new(&prog)
            .current_dir(&dir)
            .env("LD_PRELOAD", lib())
            .env("HEAPLIVE_SAMPLE_INTERVAL", "1")
            .env("HEAPLIVE_OUTPUT", dir.join("h.%e.%p.%n.folded"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    let status = wait_until(
        120,
        "fork_threads to end (hung: a lock left held across fork?)",
        || child.child().try_wait().unwrap(),
    );
    let o = child.wait();
    assert!(
        status.success(),
        "status {status:?}\nstdout:\n{}\nstderr:\n{}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(stdout(&o), "children 40 ok 40\n");
    let files = folded_files(&dir);
    // 40 children's exit dumps plus the parent's (and its signal dumps).
    let child_files: Vec<_> = files
        .iter()
        .filter(|f| {
            let stacks = parse_folded(f);
            bytes_by_leaf(&stacks).contains_key("child_keep")
        })
        .collect();
    assert_eq!(
        child_files.len(),
        40,
        "one exit dump per child with its blocks: {files:?}"
    );
    for f in child_files {
        let by_leaf = bytes_by_leaf(&parse_folded(f));
        let kept = by_leaf["child_keep"];
        assert!(
            (3000..3040).contains(&kept),
            "{}: child_keep {kept}",
            f.display()
        );
    }
}

//! Tests of the `heaplive` command on processes running the real library:
//! `run` (settings, exit status, the files written) and `dump` (signals,
//! children, the process's signal setting). Its helpers (a child reaped on
//! drop, waiting for the library) serve `cli_robust.rs` too.

use crate::common::total as common_total;
use crate::common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `heaplive run` with the real library (`HEAPLIVE_LIB`), dump files and
/// fallbacks kept in `dir`.
pub(crate) fn run_with_lib(
    dir: &Path,
    args: &[&str],
    extra_env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = heaplive_command(args);
    cmd.env("HEAPLIVE_LIB", lib())
        .env("TMPDIR", dir)
        .current_dir(dir);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().expect("run heaplive")
}

#[test]
fn run_passes_settings_and_exit_status() {
    let dir = tempdir("runvars");
    let script = "echo $HEAPLIVE_SAMPLE_INTERVAL $HEAPLIVE_DUMP_EVERY $HEAPLIVE_SIGNAL $HEAPLIVE_FORMAT $HEAPLIVE_OUTPUT; exit 7";
    let template = format!("{}/x.%p", dir.display());
    let o = run_with_lib(
        &dir,
        &[
            "run",
            "--interval",
            "4K",
            "--every",
            "5m",
            "--signal",
            "RTMIN+3",
            "--format",
            "folded,pprof",
            "--output",
            &template,
            "--",
            "sh",
            "-c",
            script,
        ],
        &[],
    );
    assert_eq!(
        stdout(&o),
        format!("4K 5m RTMIN+3 folded,pprof {template}\n"),
        "{}",
        show(&o)
    );
    assert_eq!(o.status.code(), Some(7), "{}", show(&o));
    assert!(
        !stderr(&o).contains("using the default"),
        "the library accepts every value the command passed: {}",
        show(&o)
    );

    // The library goes first in LD_PRELOAD, before what was there.
    let other = compile_so("own_segv.c", "libother.so", &dir);
    let o = heaplive_command(&["run", "-q", "--", "sh", "-c", "echo $LD_PRELOAD"])
        .env("HEAPLIVE_LIB", lib())
        .env("LD_PRELOAD", &other)
        .env("HEAPLIVE_DUMP_AT_EXIT", "0")
        .output()
        .expect("run heaplive");
    let lib = std::fs::canonicalize(lib()).unwrap();
    assert_eq!(
        stdout(&o),
        format!("{}:{}\n", lib.display(), other.display()),
        "{}",
        show(&o)
    );

    let o = run_with_lib(&dir, &["run", "-q", "--", "sh", "-c", "kill -TERM $$"], &[]);
    assert_eq!(o.status.code(), Some(128 + 15), "killed by SIGTERM");

    let o = run_with_lib(&dir, &["run", "--", "/nonexistent/program"], &[]);
    assert_eq!(o.status.code(), Some(127));
    assert!(
        stderr(&o).starts_with("heaplive: cannot run '/nonexistent/program'"),
        "{}",
        stderr(&o)
    );

    let o = heaplive_command(&["run", "--", "true"])
        .env("HEAPLIVE_LIB", "/nonexistent/libheaplive.so")
        .output()
        .expect("run heaplive");
    fails_with(
        o,
        1,
        "heaplive: HEAPLIVE_LIB=/nonexistent/libheaplive.so: no such file",
    );
}

#[test]
fn run_lists_the_files_written() {
    let dir = tempdir("runfiles");
    let out = tempdir("runfiles-out");
    let template = format!("{}/t.%e.%p.%n.folded", out.display());
    let o = run_with_lib(
        &dir,
        &["run", "--output", &template, "--", "sleep", "0.1"],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    assert!(o.status.success(), "{}", show(&o));
    let written = folded_files(&out);
    assert_eq!(written.len(), 1, "one exit dump: {written:?}\n{}", show(&o));
    let err = stderr(&o);
    // The dump and its timeline (exact mode: no samples file).
    assert!(err.contains("2 files written by pid "), "{err}");
    let timeline = written[0]
        .to_str()
        .unwrap()
        .replace(".folded", ".timeline.tsv");
    assert!(err.contains(&format!("  {timeline}\n")), "{err}");
    assert!(
        err.contains(&format!("  {}\n", written[0].display())),
        "{err}"
    );
    // The file is a valid dump, and top reads the same total from it.
    let want = common_total(&parse_folded(&written[0]));
    let top = ok(heaplive(&[
        "top",
        "--bytes",
        written[0].to_str().expect("utf-8"),
    ]));
    assert!(top.contains(&format!("total: {want} bytes in ")), "{top}");
}

/// `cmd args` in `cwd`, with the real library when `preload` (killed and
/// reaped when dropped, its status file removed: `common::Running`).
pub(crate) fn spawn(
    cmd: &str,
    args: &[&str],
    preload: bool,
    env: &[(&str, &str)],
    cwd: &Path,
) -> Running {
    let mut c = Command::new(cmd);
    c.args(args)
        .current_dir(cwd)
        .env_remove("LD_PRELOAD")
        .env_remove("HEAPLIVE_OUTPUT")
        .env_remove("HEAPLIVE_SIGNAL")
        .env("TMPDIR", cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if preload {
        c.env("LD_PRELOAD", lib())
            .env("HEAPLIVE_SAMPLE_INTERVAL", "1");
    }
    for (k, v) in env {
        c.env(k, v);
    }
    Running::spawn(&mut c)
}

/// Waits until `pid` has `libheaplive` mapped and its constructor has run:
/// when `sig` is given, until the handler for it is installed; without
/// one, until the program is blocked in a sleep system call (its `main`
/// runs after every constructor). Right after spawn the dynamic loader
/// may not have run yet.
pub(crate) fn wait_for_library(pid: u32, sig: Option<u32>) {
    crate::common::wait_until(
        10,
        &format!("pid {pid} to map libheaplive and catch signal {sig:?} (or sleep)"),
        || {
            let mapped = std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| m.contains("libheaplive"));
            let ready = match sig {
                Some(sig) => {
                    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("SigCgt:"))
                            .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
                            .is_some_and(|m| m & (1 << (sig - 1)) != 0)
                    })
                }
                // nanosleep (35) or clock_nanosleep (230): in main.
                None => std::fs::read_to_string(format!("/proc/{pid}/syscall"))
                    .is_ok_and(|s| matches!(s.split(' ').next(), Some("35" | "230"))),
            };
            (mapped && ready).then_some(())
        },
    );
}

const SIGUSR1: u32 = libc::SIGUSR1 as u32;
pub(crate) const SIGUSR2: u32 = libc::SIGUSR2 as u32;

#[test]
fn dump_errors_for_dead_pid_and_pid_without_library() {
    // A pid that certainly does not exist: one we created and reaped.
    let dead = loop {
        let c = Running::spawn(&mut Command::new("true"));
        let pid = c.pid();
        c.wait();
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break pid;
        }
    };
    fails_with(
        heaplive(&["dump", &dead.to_string()]),
        1,
        &format!("heaplive: pid {dead}: no such process"),
    );

    let dir = tempdir("nolib");
    let child = spawn("sleep", &["30"], false, &[], &dir);
    let pid = child.pid();
    // Let exec finish so the name is "sleep", not the test binary's.
    wait_until(10, "sleep to start", || {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == "sleep")
            .then_some(())
    });
    fails_with(
        heaplive(&["dump", &pid.to_string()]),
        1,
        &format!(
            "heaplive: pid {pid} (sleep): not running heaplive (libheaplive.so not in /proc/{pid}/maps)"
        ),
    );
    fails_with(
        heaplive(&["dump", "--children", &pid.to_string()]),
        1,
        &format!("heaplive: pid {pid} (sleep): no child processes"),
    );
}

#[test]
fn dump_signals_and_prints_the_new_file() {
    let dir = tempdir("dump");
    let child = spawn("sleep", &["30"], true, &[], &dir);
    let pid = child.pid();
    wait_for_library(pid, Some(SIGUSR2));
    for n in 1..=2 {
        let out = ok(heaplive(&["dump", &pid.to_string()]));
        let want = dir.join(format!("heaplive.sleep.{pid}.{n}.folded"));
        assert_eq!(out, format!("{}\n", want.display()));
        assert!(want.exists(), "dump {n} exists");
        // A valid folded file (parse_folded panics on any bad line).
        parse_folded(&want);
    }
    assert!(child_alive(pid), "the process survives its dumps");
}

fn child_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
}

#[test]
fn dump_children_dumps_every_worker() {
    let dir = tempdir("children");
    let master = spawn("sh", &["-c", "sleep 30 & sleep 30 & wait"], true, &[], &dir);
    let mpid = master.pid();
    // Wait for both workers to be up with the library mapped.
    let kids = wait_until(10, "both workers to start", || {
        let kids = children_of(mpid);
        let sleeping = kids.iter().all(|k| {
            std::fs::read_to_string(format!("/proc/{k}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        (kids.len() == 2 && sleeping).then_some(kids)
    });
    for k in &kids {
        wait_for_library(*k, Some(SIGUSR2));
    }
    let out = ok(heaplive(&["dump", "--children", &mpid.to_string()]));
    let mut want: Vec<String> = kids
        .iter()
        .map(|k| {
            format!(
                "{}",
                dir.join(format!("heaplive.sleep.{k}.1.folded")).display()
            )
        })
        .collect();
    let mut got: Vec<String> = out.lines().map(str::to_string).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    for k in &kids {
        // The workers are ours; kill them by pid.
        let _ = Command::new("kill").arg(k.to_string()).status();
    }
}

fn children_of(parent: u32) -> Vec<u32> {
    let mut kids = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
            == Some(parent)
        {
            kids.push(pid);
        }
    }
    kids.sort();
    kids
}

#[test]
fn dump_honours_the_process_signal_setting() {
    let dir = tempdir("signal");
    // No status file yet: the signal comes from the process's environment.
    // Had heaplive sent SIGUSR2 (default action: terminate), sleep would die.
    let child = spawn("sleep", &["30"], true, &[("HEAPLIVE_SIGNAL", "USR1")], &dir);
    let pid = child.pid();
    wait_for_library(pid, Some(SIGUSR1));
    let out = ok(heaplive(&["dump", &pid.to_string()]));
    assert_eq!(
        out,
        format!(
            "{}\n",
            dir.join(format!("heaplive.sleep.{pid}.1.folded")).display()
        )
    );
    assert!(child_alive(pid), "the process lives");

    // A process that cannot dump (stopped): heaplive gives up after the
    // timeout.
    let _ = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status();
    let t = Instant::now();
    fails_with(
        heaplive(&["dump", "--timeout", "0.5", &pid.to_string()]),
        1,
        &format!("heaplive: pid {pid}: no dump after 0.5 s"),
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the timeout is honoured"
    );
    let _ = Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status();
    assert!(child_alive(pid), "the process lives");

    // A signal the process does not catch is not sent: it would kill it.
    // (A status file naming SIGHUP, which the library does not catch.)
    let hup = spawn("sleep", &["30"], true, &[], &dir);
    let hpid = hup.pid();
    wait_for_library(hpid, Some(SIGUSR2));
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(format!("/tmp/heaplive-{uid}"));
    }
    std::fs::write(
        format!("/tmp/heaplive-{uid}/{hpid}"),
        format!("dumps 0\nsignal {}\n", libc::SIGHUP),
    )
    .expect("write the status file");
    fails_with(
        heaplive(&["dump", &hpid.to_string()]),
        1,
        &format!(
            "heaplive: pid {hpid} (sleep): does not catch SIGHUP (library not initialised yet, or the handler was replaced); not sending it"
        ),
    );
    assert!(child_alive(hpid), "SIGHUP was not sent");

    let quiet = spawn("sleep", &["30"], true, &[("HEAPLIVE_SIGNAL", "none")], &dir);
    let qpid = quiet.pid();
    wait_for_library(qpid, None);
    let o = heaplive(&["dump", &qpid.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!("heaplive: pid {qpid} (sleep): has no dump signal")),
        "{}",
        stderr(&o)
    );
}

/// A program with its own SIGSEGV handler and `HEAPLIVE_SIGNAL=SEGV` in its
/// environment: the library refuses SEGV and uses SIGUSR2, and `heaplive
/// dump` follows the library, not the variable (a SEGV would make the
/// program's handler report a crash).
#[test]
fn dump_never_sends_a_signal_the_library_refuses() {
    let (dir, prog) = compiled("segv", "own_segv.c");
    for value in ["SEGV", "11", "ABRT", "33"] {
        let mut child = spawn(
            prog.to_str().unwrap(),
            &[],
            true,
            &[("HEAPLIVE_SIGNAL", value)],
            &dir,
        );
        let pid = child.pid();
        assert_eq!(child.line().as_deref(), Some("ready"));
        wait_for_library(pid, Some(SIGUSR2));
        // Both the environment (first dump) and the status file (second).
        for n in 1..=2 {
            let out = ok(heaplive(&["dump", &pid.to_string()]));
            let want = dir.join(format!("heaplive.own_segv.{pid}.{n}.folded"));
            assert_eq!(out, format!("{}\n", want.display()), "{value}");
            let stacks = parse_folded(&want);
            assert!(bytes_under(&stacks, "own_segv_alloc") >= 200000, "{value}");
        }
        assert!(
            child_alive(pid),
            "HEAPLIVE_SIGNAL={value}: the program lives"
        );
        child.signal(libc::SIGKILL);
        let o = child.wait();
        let rest = stdout(&o);
        assert!(
            !rest.contains("SIGSEGV"),
            "HEAPLIVE_SIGNAL={value}: {rest} {:?}",
            o.status
        );
        // And `heaplive run` refuses the value outright.
        let o = heaplive(&["run", "--signal", value, "--", "true"]);
        assert_eq!(o.status.code(), Some(2), "{value}: {}", show(&o));
    }
}

/// Every signal name and every number 0..=65: the command accepts exactly
/// what the library accepts (the library says so by not warning).
#[test]
fn command_and_library_agree_on_every_signal() {
    let dir = tempdir("sigagree");
    let mut values: Vec<String> = (0..=65).map(|n| n.to_string()).collect();
    for &(name, _) in heaplive_format::signal::NAMES {
        values.push(name.to_string());
        values.push(format!("SIG{name}"));
    }
    values.extend(
        [
            "none", "RTMIN", "RTMIN+3", "RTMAX-1", "RTMAX+1", "RTMIN-1", "USR3",
        ]
        .map(String::from),
    );
    for v in &values {
        let o = heaplive_command(&["run", "-q", "--signal", v, "--", "true"])
            .env("HEAPLIVE_LIB", lib())
            .env("HEAPLIVE_DUMP_AT_EXIT", "0")
            .current_dir(&dir)
            .output()
            .expect("run heaplive");
        let command = o.status.code() != Some(2);
        let lib_run = run_preloaded(
            &dir,
            Path::new("/bin/true"),
            &[],
            &[("HEAPLIVE_SIGNAL", v), ("HEAPLIVE_DUMP_AT_EXIT", "0")],
        );
        let library = !stderr(&lib_run).contains("HEAPLIVE_SIGNAL=");
        assert_eq!(
            command,
            library,
            "HEAPLIVE_SIGNAL={v}: command accepts {command}, library accepts {library}\n{}\n{}",
            show(&o),
            show(&lib_run)
        );
    }
}

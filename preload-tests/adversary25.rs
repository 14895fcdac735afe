//! Issue 25's remaining cases and the adversarial sweep after it: messages
//! of `heaplive dump` that say what happened, planted files, limits and
//! dead descriptors in places the issue did not name. One test per
//! finding; each failed before its fix.

use crate::common::*;
use std::path::Path;
use std::process::Stdio;

/// `prog args` under heaplive in `dir`, exact mode, its stdout piped (the
/// `ready PID` line), stdin piped, stderr kept.
fn start(dir: &Path, prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut c = preloaded_command(dir, prog, args, env);
    c.env("HEAPLIVE_SAMPLE_INTERVAL", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Running::spawn(&mut c)
}

/// The target's signal dump fails (its output directory and $TMPDIR are
/// gone): `heaplive dump` says so with the reason the library gives,
/// instead of waiting for its timeout and saying "no dump after N s".
#[test]
fn dump_says_why_the_targets_dump_failed() {
    let dir = tempdir("adv-dump-failed");
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    let prog = compile("exit_after_dump.c", "exit_after_dump", &dir, &[]);
    let template = out.join("h.%p.%n.folded");
    let mut p = start(
        &dir,
        &prog,
        &["stay"],
        &[
            ("HEAPLIVE_OUTPUT", template.to_str().unwrap()),
            ("TMPDIR", out.to_str().unwrap()),
        ],
    );
    let pid = p.ready();
    std::fs::remove_dir(&out).unwrap();
    let o = heaplive(&["dump", "--timeout", "60", &pid.to_string()]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "heaplive: pid {pid} (exit_after_dump): its dump failed: cannot write {}",
            out.join(format!("h.{pid}.1.folded")).display()
        )) && err.contains("No such file or directory")
            && err.lines().count() == 1,
        "{err}"
    );
    drop(p.child().stdin.take());
    let o = p.wait();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

/// The target writes its dump and exits at once (its status file leaves
/// with it): `heaplive dump` prints the file, or says a dump was written
/// it could not name; never "exited before writing a dump".
#[test]
fn dump_of_a_process_that_exits_just_after_its_dump() {
    let (dir, prog) = compiled("adv-dump-exit", "exit_after_dump.c");
    for round in 0..5 {
        let mut p = start(&dir, &prog, &[], &[]);
        let pid = p.ready();
        // The status directory exists (an earlier dump of this uid made it).
        let o = heaplive(&["dump", "--timeout", "60", &pid.to_string()]);
        let (out, err) = (stdout(&o), stderr(&o));
        let named = out
            .lines()
            .next()
            .is_some_and(|l| l.ends_with(".folded") && Path::new(l).exists());
        let said = err.contains(&format!(
            "heaplive: pid {pid} (exit_after_dump): wrote a dump, then exited with status 0"
        ));
        assert!(
            (o.status.success() && named) || (o.status.code() == Some(1) && said),
            "round {round}: {}",
            show(&o)
        );
        assert!(
            !err.contains("before writing a dump"),
            "round {round}: {err}"
        );
        let o = p.wait();
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    }
}

/// A dump signal sent before the first sample waits for heaplive's thread
/// (src/hot/trigger.rs): at the timeout `heaplive dump` says so, instead
/// of a bare "no dump after N s". A sampling interval of 1 GiB makes a
/// sample of this program's few allocations unlikely (under 2 in 10,000).
#[test]
fn dump_timeout_says_the_signal_waits_for_the_first_sample() {
    let dir = tempdir("adv-dump-pending");
    // cli_grow installs no handler of its own (which would start
    // heaplive's thread).
    let prog = compile("cli_grow.c", "cli_grow", &dir, &[]);
    let mut c = preloaded_command(&dir, &prog, &[], &[("HEAPLIVE_SAMPLE_INTERVAL", "1G")]);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut p = Running::spawn(&mut c);
    assert_eq!(p.line().as_deref(), Some("ready"));
    let pid = p.pid();
    let o = heaplive(&["dump", "--timeout", "1", &pid.to_string()]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "pid {pid}: no dump after 1 s: SIGUSR2 is pending and heaplive's thread is not running yet"
        )),
        "{err}"
    );
    // The dump comes at exit, and the program ends as it would.
    drop(p.child().stdin.take());
    let o = p.wait();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        folded_files(&dir).len(),
        2,
        "the signal's dump and the exit dump\n{}",
        show(&o)
    );
}

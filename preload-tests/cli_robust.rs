//! The `heaplive` command when its own outputs are gone or its inputs are
//! huge, and the messages it gives when something else is wrong (issue 25,
//! items 7 and 8).

use crate::cli_processes::{SIGUSR2, spawn, wait_for_library};
use crate::common::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Output, Stdio};

/// The write end of a pipe whose read end is closed: a write to it fails
/// with EPIPE (SIGPIPE, were it not ignored).
fn dead_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which we own; the
    // read end is closed at once, the write end handed to Stdio.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        libc::close(fds[0]);
        Stdio::from(OwnedFd::from_raw_fd(fds[1]))
    }
}

fn dev_full() -> Stdio {
    Stdio::from(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("open /dev/full"),
    )
}

/// Item 7: `heaplive run` with its stderr on /dev/full or on a pipe whose
/// reader has gone (its own lines cannot be written) still runs the
/// program under the library and exits with the program's status; the
/// same for a program that cannot be started (127).
#[test]
fn run_with_a_dead_stderr_passes_the_status_on() {
    for (what, err) in [("/dev/full", 0), ("a dead pipe", 1)] {
        let dir = tempdir("run-dead-stderr");
        let stderr = || if err == 0 { dev_full() } else { dead_pipe() };
        let o = heaplive_command(&["run", "--", "bash", "-c", "exit 3"])
            .env("HEAPLIVE_LIB", lib())
            .env("HEAPLIVE_SAMPLE_INTERVAL", "1")
            .env("TMPDIR", dir.path())
            .current_dir(dir.path())
            .stderr(stderr())
            .output()
            .expect("run heaplive");
        assert_eq!(o.status.code(), Some(3), "stderr on {what}: {o:?}");
        assert_eq!(
            folded_files(&dir).len(),
            1,
            "stderr on {what}: the exit dump"
        );
        let o = heaplive_command(&["run", "--", "/nonexistent/program"])
            .env("HEAPLIVE_LIB", lib())
            .stderr(stderr())
            .output()
            .expect("run heaplive");
        assert_eq!(o.status.code(), Some(127), "stderr on {what}: {o:?}");
        // An error of heaplive's own keeps its status too.
        let o = heaplive_command(&["top", "/nonexistent/x.folded"])
            .stderr(stderr())
            .output()
            .expect("run heaplive");
        assert_eq!(o.status.code(), Some(1), "stderr on {what}: {o:?}");
        let o = heaplive_command(&["top"])
            .stderr(stderr())
            .output()
            .expect("run heaplive");
        assert_eq!(o.status.code(), Some(2), "stderr on {what}: {o:?}");
    }
}

/// Item 7: every subcommand's output into a pipe whose reader has gone
/// (`| head -1` that exited) ends quietly with status 0, and into a full
/// disk fails with one line and status 1; nothing aborts.
#[test]
fn output_into_a_dead_pipe_ends_quietly() {
    let dir = tempdir("dead-stdout");
    let a = dir.file("a.folded", b"main;f 100\nmain;g 50\n");
    let b = dir.file("b.folded", b"main;f 300\n");
    let prog = spawn("sleep", &["30"], true, &[], &dir);
    let pid = prog.pid().to_string();
    wait_for_library(prog.pid(), Some(SIGUSR2));
    let cases: [&[&str]; 9] = [
        &["top", &a],
        &["top", "--inclusive", &a, &b],
        &["merge", &a, &b],
        &["diff", &a, &b],
        &["flamegraph", &a],
        &["completions", "bash"],
        &["man"],
        &["dump", &pid],
        &["--help"],
    ];
    for args in cases {
        // With stdout `out` (`to` in the messages): status `code`, stderr
        // `err`.
        let check = |out: Stdio, to: &str, code: i32, err: &str| {
            let o = heaplive_command(args)
                .stdout(out)
                .output()
                .expect("run heaplive");
            let ctx = format!("heaplive {args:?} {to}");
            assert_eq!(o.status.code(), Some(code), "{ctx}: {}", show(&o));
            assert_eq!(stderr(&o), err, "{ctx}");
        };
        check(dead_pipe(), "| (gone)", 0, "");
        if args[0] == "--help" {
            continue;
        }
        let full = "heaplive: writing to standard output: No space left on device\n";
        check(dev_full(), "> /dev/full", 1, full);
    }
    // The dumps were written although their names could not be printed.
    let dumps = folded_files(&dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&format!(".{pid}.")))
        .count();
    assert_eq!(dumps, 2, "{:?}", folded_files(&dir));
}

/// `heaplive ARGS` with a 1 GiB address-space limit and a 60 s timeout, so
/// that a reader without bounds fails (out of memory) rather than takes
/// the machine's memory, and a blocking one fails rather than hangs.
/// (1 GiB: a sparse file of that size is refused unread.)
fn bounded(args: &[&str], stdin: Stdio) -> Output {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new("timeout");
    c.arg("60")
        .arg(heaplive_bin())
        .args(args)
        .env_remove("LD_PRELOAD")
        .stdin(stdin);
    // SAFETY: setrlimit in the child before exec touches no memory of ours.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    c.output().expect("run heaplive")
}

/// Item 7: an input without end (`/dev/zero`, `/dev/urandom`, a stream of
/// valid lines) is one error line naming it and the limit, exit 1, for
/// every reader of folded files; a FIFO planted as a dump's companion view
/// is not waited on.
#[test]
fn endless_inputs_are_one_error_line() {
    let dir = tempdir("endless");
    let good = dir.file("good.folded", b"main;f 100\n");
    let zero_line = "heaplive: /dev/zero:1: a line longer than 16 MiB: not a folded file (lines of at most 16 MiB are read)";
    for args in [
        &["top", "/dev/zero"][..],
        &["top", &good, "/dev/zero"],
        &["merge", &good, "/dev/zero"],
        &["diff", &good, "/dev/zero"],
        &["flamegraph", "/dev/zero"],
    ] {
        let o = bounded(args, Stdio::null());
        assert_eq!(o.status.code(), Some(1), "heaplive {args:?}: {}", show(&o));
        assert_eq!(stderr(&o), format!("{zero_line}\n"), "heaplive {args:?}");
        assert_eq!(stdout(&o), "", "heaplive {args:?}");
    }
    let o = bounded(&["top", "/dev/urandom"], Stdio::null());
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", show(&o));
    assert!(
        stderr(&o).starts_with("heaplive: /dev/urandom:1: "),
        "{}",
        show(&o)
    );
    // A file larger than the limit (sparse: it takes no room) is refused
    // before it is read.
    let big = dir.join("big.folded");
    let f = std::fs::File::create(&big).expect("create big.folded");
    f.set_len((1 << 30) + 1).expect("grow big.folded");
    let big = big.to_str().expect("utf-8");
    let o = bounded(&["top", big], Stdio::null());
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "heaplive: {big}: larger than 1 GiB: not a dump (files of at most 1 GiB are read)\n"
        )
    );
    // A FIFO where the sample counts would be: ignored, not waited on.
    let fifo = dir.join("good.samples.folded");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = bounded(&["top", &good], Stdio::null());
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).contains("total: 100 bytes in 1 stacks"),
        "{}",
        show(&o)
    );
}

/// Item 8: something another user planted at `/tmp/heaplive-0` (a file, a
/// symlink, a directory of theirs) made every root `heaplive dump` wait
/// for a status file that was never written and report failure although
/// the dump was written. The library now keeps its status in a
/// `/tmp/heaplive-0.XXXXXX` of its own, where `heaplive dump` finds it.
#[test]
fn dump_succeeds_past_a_planted_status_directory() {
    let crate::security::Report { map: m, text: t } = crate::security::in_private_tmp(
        r#"
wait_usr2() {
  for i in $(seq 500); do
    m=$(awk '/^SigCgt:/ {print $2}' /proc/$1/status 2>/dev/null)
    [ -n "$m" ] && [ $(( 0x$m & (1 << 11) )) -ne 0 ] && grep -q libheaplive /proc/$1/maps && return 0
    sleep 0.02
  done
  return 1
}
mkdir -p /tmp/out && cd /tmp/out
for plant in file symlink dir; do
  rm -rf /tmp/heaplive-0 /tmp/heaplive-0.*
  case $plant in
    file) runuser -u $EVIL -- sh -c 'echo x > /tmp/heaplive-0' ;;
    symlink) runuser -u $EVIL -- ln -s /tmp/elsewhere /tmp/heaplive-0 ;;
    dir) runuser -u $EVIL -- mkdir -m 700 /tmp/heaplive-0 ;;
  esac
  LD_PRELOAD=$LIB HEAPLIVE_SAMPLE_INTERVAL=1 sleep 30 2>/tmp/err.$plant &
  pid=$!
  wait_usr2 $pid || echo "NOLIB_$plant=1"
  out=$($HEAPLIVE dump --timeout 10 $pid 2>/tmp/dumperr.$plant)
  echo "RC_$plant=$?"
  echo "OUT_$plant=$out"
  [ -n "$out" ] && [ -f "$out" ] && echo "FILE_$plant=1"
  echo "WARN_$plant=$(grep -c 'using /tmp/heaplive-0\.' /tmp/err.$plant)"
  echo "ERR_$plant=$(tr '\n' '|' < /tmp/dumperr.$plant)"
  kill $pid; wait $pid 2>/dev/null
  echo "PLANT_$plant=$(stat -c %U:%F /tmp/heaplive-0)"
done
"#,
    );
    for plant in ["file", "symlink", "dir"] {
        let k = |key: &str| format!("{key}_{plant}");
        assert!(!m.contains_key(&k("NOLIB")), "{t}");
        assert_eq!(crate::security::get(&m, &k("RC"), &t), "0", "{plant}: {t}");
        assert!(
            crate::security::get(&m, &k("OUT"), &t).starts_with("/tmp/out/heaplive.sleep."),
            "{plant}: {t}"
        );
        assert_eq!(
            crate::security::get(&m, &k("FILE"), &t),
            "1",
            "{plant}: {t}"
        );
        assert_eq!(
            crate::security::get(&m, &k("WARN"), &t),
            "1",
            "{plant}: {t}"
        );
        assert!(
            crate::security::get(&m, &k("PLANT"), &t).starts_with(crate::security::EVIL),
            "{plant}: the planted entry is left alone: {t}"
        );
    }
}

/// Item 8: `heaplive run` listed the files another process wrote into the
/// same directory in the same second, and its count line counted dumps
/// while it named their views too.
#[test]
fn run_lists_only_files_of_its_program_and_counts_them() {
    let dir = tempdir("run-own-files");
    // Another process's dump, written just before (the same second).
    let other = dir.file("heaplive.other.999.1.folded", b"main 1\n");
    let o = crate::cli_processes::run_with_lib(&dir, &["run", "--", "bash", "-c", "exit 0"], &[]);
    assert!(o.status.success(), "{}", show(&o));
    let err = stderr(&o);
    let listed: Vec<&str> = err.lines().filter_map(|l| l.strip_prefix("  ")).collect();
    let mut want: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list the directory")
        .flatten()
        .map(|e| e.path().to_string_lossy().into_owned())
        .filter(|p| *p != other)
        .collect();
    want.sort();
    let mut got: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    got.sort();
    assert_eq!(got, want, "{err}");
    assert!(want.len() >= 2, "a dump and its samples view: {err}");
    let count = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("heaplive: ")?
                .split_once(' ')?
                .0
                .parse::<usize>()
                .ok()
        })
        .expect("a count line");
    assert_eq!(
        count,
        listed.len(),
        "the count line counts the files listed: {err}"
    );
}

/// Item 8: attach said "try again" when no thread could ever be borrowed
/// (every thread blocks or ignores SIGSEGV, which attach needs).
#[test]
fn attach_says_when_trying_again_cannot_help() {
    let dir = tempdir("attach-segv");
    let prog = spawn(
        "sh",
        &["-c", "trap '' SEGV; exec sleep 30"],
        false,
        &[],
        &dir,
    );
    let pid = prog.pid();
    // sleep runs and its loader has mapped libc (comm changes at exec,
    // before the loader maps anything).
    wait_until(10, "sleep to start with libc mapped", || {
        (std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
            && std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| m.contains("libc.so.6")))
        .then_some(())
    });
    let o = heaplive_command(&["attach", &pid.to_string()])
        .env("HEAPLIVE_LIB", lib())
        .output()
        .expect("run heaplive");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        err.starts_with(&format!(
            "heaplive: every thread of process {pid} blocks or ignores SIGSEGV"
        )),
        "{err}"
    );
    assert!(!err.contains("try again"), "{err}");
}

/// Item 8: a process of the same user that is not dumpable (here one that
/// called `prctl(PR_SET_DUMPABLE, 0)`) was answered with "run as its user
/// or root"; the user is its user: only root can read it.
#[test]
fn dump_of_a_process_that_is_not_dumpable_says_why() {
    let crate::security::Report { map: m, text: t } = crate::security::in_private_tmp(
        r#"
as_evil() { setpriv --reuid=$EVIL --regid=$EVIL --clear-groups "$@"; }
setpriv --reuid=$EVIL --regid=$EVIL --clear-groups perl -e 'syscall(157, 4, 0) == 0 or die "prctl: $!"; sleep 30' &
P=$!
for i in $(seq 200); do
  as_evil cat /proc/$P/maps >/dev/null 2>&1 || break
  sleep 0.05
done
as_evil $HEAPLIVE dump $P 2>/tmp/err
echo "RC=$?"
echo "ERR=$(head -1 /tmp/err)"
echo "LINES=$(wc -l < /tmp/err)"
kill $P; wait $P 2>/dev/null
true
"#,
    );
    assert_eq!(crate::security::get(&m, "RC", &t), "1", "{t}");
    let err = crate::security::get(&m, "ERR", &t);
    assert!(
        err.contains("Permission denied (it is not dumpable: a setuid or setgid program, or one that called prctl(PR_SET_DUMPABLE, 0); run heaplive dump as root)"),
        "{t}"
    );
    assert!(!err.contains("its user"), "{t}");
    assert_eq!(crate::security::get(&m, "LINES", &t), "1", "{t}");
}

/// Item 8: a refused write named its path twice ("cannot write P (P: is a
/// directory)"); now once, with the reason.
#[test]
fn a_refused_dump_names_its_path_once() {
    let dir = tempdir("refused-once");
    let target = dir.join("d.folded");
    std::fs::create_dir(&target).expect("mkdir d.folded");
    let target = target.to_str().expect("utf-8");
    let o = run_preloaded(
        &dir,
        std::path::Path::new("/bin/bash"),
        &["-c", "exit 0"],
        &[
            ("HEAPLIVE_OUTPUT", target),
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
        ],
    );
    let err = stderr(&o);
    let line = first_line_with(&err, "dump failed", &format!("no failed dump line: {err}"));
    assert!(
        line.ends_with(&format!(
            "exit dump failed: cannot write {target} (is a directory)"
        )),
        "{err}"
    );
    assert_eq!(line.matches(target).count(), 1, "{err}");
}

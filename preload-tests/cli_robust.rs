//! The `heaplive` command when its own outputs are gone or its inputs are
//! huge, and the messages it gives when something else is wrong (issue 25,
//! items 7 and 8).

use crate::cli::{SIGUSR2, spawn, wait_for_library};
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
    let pid = prog.0.id().to_string();
    wait_for_library(prog.0.id(), Some(SIGUSR2));
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
        let run = |out: Stdio| -> Output {
            heaplive_command(args)
                .stdout(out)
                .output()
                .expect("run heaplive")
        };
        let o = run(dead_pipe());
        assert_eq!(
            o.status.code(),
            Some(0),
            "heaplive {args:?} | (gone): {}",
            show(&o)
        );
        assert_eq!(stderr(&o), "", "heaplive {args:?} | (gone)");
        if args[0] == "--help" {
            continue;
        }
        let o = run(dev_full());
        assert_eq!(
            o.status.code(),
            Some(1),
            "heaplive {args:?} > /dev/full: {}",
            show(&o)
        );
        assert_eq!(
            stderr(&o),
            "heaplive: writing to standard output: No space left on device\n",
            "heaplive {args:?} > /dev/full"
        );
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

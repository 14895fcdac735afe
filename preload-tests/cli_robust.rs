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

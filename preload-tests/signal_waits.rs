//! The dump signal never interrupts a program thread (issue 17): programs
//! blocked in every kind of wait get 20 dump signals each and see nothing;
//! a program with its own handler, or waiting for the signal itself, still
//! gets every signal. Also: heaplive's thread starts only when needed
//! (single-threaded programs stay so), a main thread that calls
//! pthread_exit ends the process, an ignored dump signal stays ignored
//! across exec, one-shot handlers read back SIG_DFL, and closing every
//! descriptor loses no request (issue 14, items 5, 7, 8, 10, 11).

use crate::common::*;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn signal_files(dir: &Path) -> usize {
    folded_files(dir).len()
}

/// Runs `sig_waits <wait>`; with the preload, sends `signals` SIGUSR2 one
/// after another (each once the previous dump's file exists), then ends
/// the wait. Returns the output with the first line (`ready <pid>`) cut.
fn run_wait(dir: &Path, prog: &Path, wait: &str, preload: bool, signals: usize) -> Output {
    let stop = dir.join(format!("stop-{}", preload as u8));
    let _ = std::fs::remove_file(&stop);
    let args = [wait, stop.to_str().unwrap()];
    let mut cmd = if preload {
        preloaded_command(
            dir,
            prog,
            &args,
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
                ("HEAPLIVE_DUMP_AT_EXIT", "0"),
            ],
        )
    } else {
        let mut c = Command::new(prog);
        c.args(args).current_dir(dir).env_remove("LD_PRELOAD");
        c
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let pid: i32 = first
        .trim()
        .strip_prefix("ready ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{wait}: no ready line, got {first:?}"));
    for i in 1..=signals {
        unsafe { libc::kill(pid, libc::SIGUSR2) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while signal_files(dir) < i {
            if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
                let _ = child.kill();
                let o = child.wait_with_output().unwrap();
                panic!("{wait}: dump {i} of {signals} never written\n{}", show(&o));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    match wait {
        "pipe" => drop(child.stdin.take()),
        "sigsuspend" => unsafe {
            libc::kill(pid, libc::SIGUSR1);
        },
        _ => std::fs::write(&stop, b"").unwrap(),
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{wait}: the program did not end after its wait was ended");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let mut o = child.wait_with_output().unwrap();
    o.stdout = rest.into_bytes();
    o
}

fn twenty_signals_while_blocked_in(wait: &str) {
    let dir = tempdir(&format!("wait-{wait}"));
    let prog = compile("sig_waits.c", "sig_waits", &dir, &[]);
    let plain = run_wait(&dir, &prog, wait, false, 0);
    assert!(plain.status.success(), "plain run\n{}", show(&plain));
    let o = run_wait(&dir, &prog, wait, true, 20);
    assert_eq!(
        (stdout(&o), o.status.code()),
        (stdout(&plain), plain.status.code()),
        "{wait}: output and status differ from the run without the preload\n{}",
        show(&o)
    );
    let dumps: Vec<_> = stderr(&o)
        .lines()
        .filter(|l| l.contains("]: signal dump "))
        .map(str::to_string)
        .collect();
    assert_eq!(dumps.len(), 20, "{wait}: 20 signal dumps\n{}", show(&o));
    let files = folded_files(&dir);
    assert_eq!(files.len(), 20, "{wait}: 20 files {files:?}");
    for f in files {
        assert_eq!(
            bytes_under(&parse_folded(&f), "wait_keep"),
            424_242,
            "{wait}: {} must hold the block\n{}",
            f.display(),
            show(&o)
        );
    }
}

#[test]
fn no_eintr_in_nanosleep() {
    twenty_signals_while_blocked_in("nanosleep");
}
#[test]
fn no_eintr_in_poll() {
    twenty_signals_while_blocked_in("poll");
}
#[test]
fn no_eintr_in_select() {
    twenty_signals_while_blocked_in("select");
}
#[test]
fn no_eintr_in_epoll_wait() {
    twenty_signals_while_blocked_in("epoll");
}
#[test]
fn no_eintr_in_sem_timedwait() {
    twenty_signals_while_blocked_in("sem");
}
#[test]
fn no_eintr_in_pthread_cond_timedwait() {
    twenty_signals_while_blocked_in("cond");
}
#[test]
fn no_eintr_in_pipe_read() {
    twenty_signals_while_blocked_in("pipe");
}
#[test]
fn sigsuspend_waiting_for_another_signal_is_not_woken() {
    twenty_signals_while_blocked_in("sigsuspend");
}
#[test]
fn no_eintr_in_futex_wait() {
    twenty_signals_while_blocked_in("futex");
}

fn steps_aside_for(how: &str, interval: &str) {
    let dir = tempdir(&format!("sigwait-{how}-{interval}"));
    let prog = compile("sig_sigwait.c", "sig_sigwait", &dir, &[]);
    let mut c = preloaded_command(
        &dir,
        &prog,
        &[how],
        &[("HEAPLIVE_SAMPLE_INTERVAL", interval)],
    );
    let o = run_bounded(&mut c, how);
    assert!(o.status.success(), "{how}\n{}", show(&o));
    assert_eq!(stdout(&o), format!("{how} got 5\n"), "{}", show(&o));
    let said = stderr(&o)
        .lines()
        .filter(|l| l.contains("leaves it to the program"))
        .count();
    assert_eq!(
        said,
        1,
        "{how}: one line saying heaplive stepped aside\n{}",
        show(&o)
    );
}

/// Runs `c`, failing (not hanging) after 60 s.
fn run_bounded(c: &mut Command, what: &str) -> Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("{what}: hung\n{}", show(&o));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn sigwait_gets_every_signal_and_heaplive_steps_aside() {
    steps_aside_for("sigwait", "1");
    steps_aside_for("sigwaitinfo", "1");
    steps_aside_for("sigwait", "512K");
}

#[test]
fn signalfd_gets_every_signal_and_heaplive_steps_aside() {
    steps_aside_for("signalfd", "1");
}

#[test]
fn single_threaded_program_stays_single_threaded() {
    let dir = tempdir("single-threaded");
    let prog = compile("thread_single.c", "thread_single", &dir, &[]);
    let plain = run_plain(&dir, &prog, &[]);
    assert_eq!(stdout(&plain), "__libc_single_threaded = 1\n");
    let o = run_preloaded(&dir, &prog, &[], &[]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(
        stdout(&o),
        "__libc_single_threaded = 1\n",
        "heaplive made a program that never sampled multi-threaded\n{}",
        show(&o)
    );
}

#[test]
fn main_pthread_exit_ends_the_process_when_the_last_thread_ends() {
    let dir = tempdir("main-pthread-exit");
    let prog = compile("thread_single.c", "thread_single", &dir, &[]);
    let plain = run_plain(&dir, &prog, &["exit"]);
    for interval in ["1", "512K"] {
        let mut c = preloaded_command(
            &dir,
            &prog,
            &["exit"],
            &[("HEAPLIVE_SAMPLE_INTERVAL", interval)],
        );
        let o = run_bounded(&mut c, "pthread_exit from main");
        assert_eq!(
            (stdout(&o), o.status.code()),
            (stdout(&plain), plain.status.code()),
            "interval {interval}\n{}",
            show(&o)
        );
        assert!(stdout(&o).contains("atexit ran"), "{}", show(&o));
    }
}

fn misc(mode: &str, env: &[(&str, &str)]) -> Output {
    let dir = tempdir(&format!("sig-misc-{mode}"));
    let prog = compile("sig_misc.c", "sig_misc", &dir, &[]);
    let mut c = preloaded_command(&dir, &prog, &[mode], env);
    run_bounded(&mut c, mode)
}

#[test]
fn one_shot_handler_reads_back_sig_dfl() {
    let o = misc("resethand", &[]);
    assert_eq!(stdout(&o), "ran 1, now SIG_DFL\n", "{}", show(&o));
}

#[test]
fn no_request_lost_after_closing_every_descriptor() {
    let o = misc("closefds", &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert_eq!(stdout(&o), "closefds ok\n", "{}", show(&o));
    let n = stderr(&o)
        .lines()
        .filter(|l| l.contains("]: signal dump "))
        .count();
    assert_eq!(n, 5, "{}", show(&o));
}

#[test]
fn ignored_dump_signal_stays_ignored_across_exec() {
    for (mode, interval) in [("ignexec", "1"), ("ignexec", "512K"), ("ignplainexec", "1")] {
        let o = misc(mode, &[("HEAPLIVE_SAMPLE_INTERVAL", interval)]);
        assert!(o.status.success(), "{mode}\n{}", show(&o));
        assert_eq!(
            stdout(&o),
            "child reads SIG_IGN\nchild alive\n",
            "{mode} {interval}\n{}",
            show(&o)
        );
    }
    // The shell's way.
    let dir = tempdir("sig-ign-sh");
    let mut c = preloaded_command(
        &dir,
        Path::new("/bin/sh"),
        &["-c", "trap '' USR2; exec sh -c 'kill -USR2 $$; echo alive'"],
        &[],
    );
    let o = run_bounded(&mut c, "sh");
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(stdout(&o), "alive\n", "{}", show(&o));
}

#[test]
fn failed_exec_keeps_the_program_mask() {
    let o = misc("failexec", &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert_eq!(
        stdout(&o),
        "exec failed with ENOENT, USR2 not blocked\n",
        "{}",
        show(&o)
    );
}

/// setpriv sets PR_SET_KEEPCAPS and capabilities on its own thread only,
/// then changes uid and gid, which glibc applies on every thread: with
/// heaplive's thread running (exact mode: it starts at the first sample)
/// the change failed there and glibc aborted the process.
#[test]
fn setpriv_changes_credentials_with_heaplive_thread_running() {
    let dir = tempdir("setpriv");
    let args = ["--reuid=33", "--regid=33", "--init-groups", "id"];
    let plain = Command::new("setpriv")
        .args(args)
        .current_dir(&dir)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", show(&plain));
    for interval in ["1", "512K"] {
        let mut c = preloaded_command(
            &dir,
            Path::new("/usr/bin/setpriv"),
            &args,
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", interval),
                ("HEAPLIVE_DUMP_AT_EXIT", "0"),
            ],
        );
        let o = run_bounded(&mut c, "setpriv");
        assert_eq!(
            (stdout(&o), o.status.code()),
            (stdout(&plain), plain.status.code()),
            "interval {interval}\n{}",
            show(&o)
        );
    }
}

/// php-cli holding a 50,000,000-byte string in `sleep(6)`, signalled 20
/// times (each once the previous dump exists): `sleep` returns 0 after the
/// full time, and every dump holds the string exactly (PHP's allocations
/// through malloc: a zend_string of 50,000,000 bytes is one block of
/// 50,000,032; at the default interval a block that large is sampled with
/// probability 1 - e^-95 and weighs exactly its size, and dumps are quick
/// enough for 20 of them in the sleep even on a loaded machine).
#[test]
fn php_cli_sleep_is_not_cut_and_every_dump_holds_the_string() {
    let dir = tempdir("php-cli-sleep");
    let script = dir.join("s.php");
    std::fs::write(
        &script,
        "<?php\n$keep = str_repeat('x', 50000000);\necho 'ready ', getmypid(), \"\\n\";\nflush();\n$r = sleep(6);\necho 'sleep returned ', var_export($r, true), ' len ', strlen($keep), \"\\n\";\n",
    )
    .unwrap();
    let mut child = preloaded_command(
        &dir,
        Path::new("/usr/bin/php"),
        &[script.to_str().unwrap()],
        &[("HEAPLIVE_DUMP_AT_EXIT", "0"), ("USE_ZEND_ALLOC", "0")],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let pid: i32 = first
        .trim()
        .strip_prefix("ready ")
        .unwrap()
        .parse()
        .unwrap();
    for i in 1..=20 {
        unsafe { libc::kill(pid, libc::SIGUSR2) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while signal_files(&dir) < i && Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(rest, "sleep returned 0 len 50000000\n", "{}", show(&o));
    let files = folded_files(&dir);
    assert_eq!(files.len(), 20, "20 dumps, one per signal\n{}", show(&o));
    for f in files {
        let s = parse_folded(&f);
        assert!(
            s.iter().any(|st| st.bytes == 50_000_032),
            "{} does not hold the string\n{}",
            f.display(),
            show(&o)
        );
    }
}

/// `heaplive dump PID` on php-cli in `sleep(3)`: the command prints the
/// dump's path (no "exited before writing a dump"), and the sleep is not
/// cut (`sleep` returns 0).
#[test]
fn heaplive_dump_command_does_not_cut_a_sleep() {
    let dir = tempdir("dump-cmd-sleep");
    let mut child = preloaded_command(
        &dir,
        Path::new("/usr/bin/php"),
        &[
            "-r",
            "$k = str_repeat('y', 3000000); echo 'ready ', getmypid(), \"\\n\"; flush(); $r = sleep(3); echo 'sleep returned ', var_export($r, true), \"\\n\";",
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let pid = first.trim().strip_prefix("ready ").unwrap().to_string();
    let d = Command::new(heaplive_bin())
        .args(["dump", &pid])
        .output()
        .unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        d.status.success(),
        "heaplive dump failed\n{}\nthe program:\n{}",
        show(&d),
        show(&o)
    );
    let path = stdout(&d);
    assert!(
        Path::new(path.trim()).exists(),
        "heaplive dump printed {path:?}\n{}",
        show(&o)
    );
    assert_eq!(rest, "sleep returned 0\n", "{}", show(&o));
}

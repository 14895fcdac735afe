//! The dump signal never interrupts a program thread (issue 17): programs
//! blocked in every kind of wait get 20 dump signals each and see nothing;
//! a program with its own handler, or waiting for the signal itself, still
//! gets every signal. Also: heaplive's thread starts only when needed
//! (single-threaded programs stay so), a main thread that calls
//! pthread_exit ends the process, an ignored dump signal stays ignored
//! across exec, one-shot handlers read back SIG_DFL, and closing every
//! descriptor loses no request (issue 14, items 5, 7, 8, 10, 11).

use crate::common::*;
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
    let mut child = Running::spawn(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let pid = child.ready();
    for i in 1..=signals {
        child.signal(libc::SIGUSR2);
        let ended = wait_until(60, &format!("{wait}: dump {i} of {signals}"), || {
            if signal_files(dir) >= i {
                Some(false)
            } else {
                child.child().try_wait().unwrap().map(|_| true)
            }
        });
        if ended {
            panic!(
                "{wait}: dump {i} of {signals} never written\n{}",
                show(&child.wait())
            );
        }
    }
    match wait {
        "pipe" => drop(child.child().stdin.take()),
        "sigsuspend" => child.signal(libc::SIGUSR1),
        _ => std::fs::write(&stop, b"").unwrap(),
    }
    wait_until(
        60,
        &format!("{wait}: the program to end after its wait was ended"),
        || child.child().try_wait().unwrap(),
    );
    // What the program printed after its `ready` line.
    let mut o = child.wait();
    let ready = format!("ready {pid}\n").len();
    o.stdout = o.stdout.split_off(ready.min(o.stdout.len()));
    o
}

fn twenty_signals_while_blocked_in(wait: &str) {
    let dir = tempdir(&format!("wait-{wait}"));
    let prog = compile("sig_waits.c", "sig_waits", &dir, &[]);
    let plain = run_wait(&dir, &prog, wait, false, 0);
    assert!(plain.status.success(), "plain run\n{}", show(&plain));
    let o = run_wait(&dir, &prog, wait, true, 20);
    let why = format!("{wait}: output and status differ from the run without the preload");
    assert_as_plain(&o, &plain, &why);
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

/// `o` printed what `plain` (the run without the library) printed and
/// exited with its status; `why` names the run.
fn assert_as_plain(o: &Output, plain: &Output, why: &str) {
    assert_eq!(
        (stdout(o), o.status.code()),
        (stdout(plain), plain.status.code()),
        "{why}\n{}",
        show(o)
    );
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
    let mut child = Running::spawn(c.stdout(Stdio::piped()).stderr(Stdio::piped()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let ended = wait_until(70, &format!("{what}: to end"), || {
        child
            .child()
            .try_wait()
            .unwrap()
            .map(|_| true)
            .or((Instant::now() > deadline).then_some(false))
    });
    if !ended {
        child.signal(libc::SIGKILL);
        panic!("{what}: hung\n{}", show(&child.wait()));
    }
    child.wait()
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
    let (dir, prog) = compiled("single-threaded", "thread_single.c");
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
    let (dir, prog) = compiled("main-pthread-exit", "thread_single.c");
    let plain = run_plain(&dir, &prog, &["exit"]);
    for interval in ["1", "512K"] {
        let mut c = preloaded_command(
            &dir,
            &prog,
            &["exit"],
            &[("HEAPLIVE_SAMPLE_INTERVAL", interval)],
        );
        let o = run_bounded(&mut c, "pthread_exit from main");
        assert_as_plain(&o, &plain, &format!("interval {interval}"));
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
    let plain = output_ok(
        Command::new("setpriv")
            .args(args)
            .current_dir(&dir)
            .env_remove("LD_PRELOAD"),
        "setpriv without the library",
    );
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
        assert_as_plain(&o, &plain, &format!("interval {interval}"));
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
    let (dir, script) = crate::php_harness::php_dir(
        "php-cli-sleep",
        "s.php",
        "$keep = str_repeat('x', 50000000);\necho 'ready ', getmypid(), \"\\n\";\nflush();\n$r = sleep(6);\necho 'sleep returned ', var_export($r, true), ' len ', strlen($keep), \"\\n\";\n",
    );
    let mut child = Running::spawn(
        preloaded_command(
            &dir,
            Path::new("/usr/bin/php"),
            &[script.to_str().unwrap()],
            &[("HEAPLIVE_DUMP_AT_EXIT", "0"), ("USE_ZEND_ALLOC", "0")],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()),
    );
    child.ready();
    for i in 1..=20 {
        child.signal(libc::SIGUSR2);
        // Until the dump is written (or the program ended: the asserts
        // below say how).
        wait_until(60, &format!("signal dump {i}"), || {
            (signal_files(&dir) >= i || child.child().try_wait().unwrap().is_some()).then_some(())
        });
    }
    let o = child.wait();
    let out = stdout(&o);
    let rest = out.split_once('\n').map_or("", |(_, r)| r);
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
    let mut child = Running::spawn(
        preloaded_command(
            &dir,
            Path::new("/usr/bin/php"),
            &[
                "-r",
                "$k = str_repeat('y', 3000000); echo 'ready ', getmypid(), \"\\n\"; flush(); $r = sleep(3); echo 'sleep returned ', var_export($r, true), \"\\n\";",
            ],
            &[],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()),
    );
    let pid = child.ready().to_string();
    let d = Command::new(heaplive_bin())
        .args(["dump", &pid])
        .output()
        .unwrap();
    let o = child.wait();
    let out = stdout(&o);
    let rest = out.split_once('\n').map_or("", |(_, r)| r);
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

/// `sig_mid_dump_sites.h`: `n` call sites, each holding one small block
/// from its own function, so the first dump has `n` stacks to symbolize.
fn mid_dump_sites(n: usize) -> String {
    let mut s = format!("static void *held[{n}];\n");
    for i in 0..n {
        s += &format!(
            "__attribute__((noinline)) static void *site_{i}(void) {{ return malloc({}); }}\n",
            16 + i % 64
        );
    }
    s += "__attribute__((noinline)) static void hold_all_sites(void) {\n";
    for i in 0..n {
        s += &format!("    held[{i}] = site_{i}();\n");
    }
    s + "}\n"
}

/// A dump signal that arrives while heaplive's thread is still building
/// the previous dump (the first dump of a program with 600 call sites:
/// libc's debug information and 600 stacks to symbolize) is snapshotted
/// right away, not after that dump: the program's handler, which heaplive
/// runs right after the snapshot, sees that the first dump is not finished
/// yet, and the second dump holds what the heap held at the second signal
/// (B, freed by the program as soon as the handler ran), not A (freed
/// before it) nor C (allocated after). Exact mode. The check is about
/// order, not time: a run where the first dump was finished before the
/// program even sent the second signal says nothing and is run again
/// (at most three times).
#[test]
pub(crate) fn signal_during_a_slow_dump_is_snapshotted_at_once() {
    let dir = tempdir("mid-dump");
    std::fs::write(dir.join("sig_mid_dump_sites.h"), mid_dump_sites(600)).unwrap();
    let inc = dir.to_str().unwrap().to_string();
    let prog = compile("sig_mid_dump.c", "sig_mid_dump", &dir, &["-I", &inc]);
    for attempt in 1..=3 {
        for f in std::fs::read_dir(&*dir).unwrap().flatten() {
            if f.path().extension().is_some_and(|x| x == "folded") {
                std::fs::remove_file(f.path()).unwrap();
            }
        }
        let o = run_preloaded(
            &dir,
            &prog,
            &[],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
                ("HEAPLIVE_DUMP_AT_EXIT", "0"),
            ],
        );
        assert!(o.status.success(), "{}", show(&o));
        let out = stdout(&o);
        let field = |name: &str| -> i64 {
            out.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name}= in the output\n{}", show(&o)))
        };
        if field("conclusive") != 1 {
            eprintln!("attempt {attempt}: the first dump was done before the second signal");
            continue;
        }
        assert_eq!(
            field("dumps_at_ack2"),
            0,
            "the second signal was snapshotted only after the first dump was finished\n{}",
            show(&o)
        );
        let files = folded_files(&dir);
        assert_eq!(files.len(), 2, "{files:?}\n{}", show(&o));
        let first = bytes_by_leaf(&parse_folded(&files[0]));
        let second = bytes_by_leaf(&parse_folded(&files[1]));
        let at = |m: &std::collections::BTreeMap<String, u64>, k: &str| m.get(k).copied();
        assert_eq!(
            (
                at(&first, "keep_a"),
                at(&first, "keep_b"),
                at(&first, "keep_c")
            ),
            (Some(1_000_000), None, None),
            "first dump: the heap at the first signal\n{}",
            show(&o)
        );
        assert_eq!(
            (
                at(&second, "keep_a"),
                at(&second, "keep_b"),
                at(&second, "keep_c")
            ),
            (None, Some(2_000_000), None),
            "second dump: the heap at the second signal\n{}",
            show(&o)
        );
        for m in [&first, &second] {
            assert_eq!(
                m.keys().filter(|k| k.starts_with("site_")).count(),
                600,
                "every call site in each dump\n{}",
                show(&o)
            );
        }
        return;
    }
    panic!("the first dump was finished before the second signal in all three runs");
}

/// A dump signal sent before the program's first sample waits (blocked,
/// no heaplive thread yet, the program single-threaded); the first sample
/// starts the thread and the signal's dump shows the heap as it was at
/// the signal: without the 64 MiB block whose sampling started the thread
/// (the allocating thread takes the waiting signal and its snapshot before
/// it records that sample). The block is sampled with probability
/// 1 - exp(-64 MiB / 512 KiB) = 1 - e^-128 (false-failure rate e^-128);
/// if the program sampled earlier, the thread took the signal at once and
/// the dump holds no block either.
#[test]
fn signal_before_the_first_sample_dumps_the_heap_at_the_signal() {
    use std::io::Write;
    let (dir, prog) = compiled("early-signal", "sig_early.c");
    let mut child = Running::spawn(
        preloaded_command(&dir, &prog, &[], &[])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let pid = child.ready();
    child.signal(libc::SIGUSR2);
    let mut input = child.child().stdin.take().unwrap();
    input.write_all(b"go\n").unwrap();
    drop(input);
    let mut o = child.wait();
    let ready = format!("ready {pid}\n").len();
    o.stdout = o.stdout.split_off(ready.min(o.stdout.len()));
    let rest = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{rest}\n{}", show(&o));
    assert_eq!(rest, "dumped\n", "{}", show(&o));
    let files = folded_files(&dir);
    assert_eq!(
        files.len(),
        2,
        "a signal dump and the exit dump: {files:?}\n{}",
        show(&o)
    );
    let log = stderr(&o);
    let signal_file =
        first_dump_path(&log, "signal").unwrap_or_else(|| panic!("no signal dump\n{}", show(&o)));
    let exit_file =
        first_dump_path(&log, "exit").unwrap_or_else(|| panic!("no exit dump\n{}", show(&o)));
    assert_eq!(
        bytes_under(&parse_folded(&signal_file), "after_signal"),
        0,
        "the signal's dump holds the block allocated after the signal\n{}",
        show(&o)
    );
    assert_eq!(
        bytes_under(&parse_folded(&exit_file), "after_signal"),
        64 << 20,
        "the exit dump holds the block (sampled, still held)\n{}",
        show(&o)
    );
}

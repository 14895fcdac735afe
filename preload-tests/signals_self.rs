//! A signal the program sends itself keeps its meaning (issue 32): only a
//! signal from another process is a dump request. `sig_self` walks through
//! the dump signal's semantics on itself (handler, blocked and pending,
//! SA_SIGINFO with kill and sigqueue, pthread_kill to another thread,
//! sa_mask and SA_NODEFER, SA_RESETHAND, SIG_IGN, and last SIG_DFL, which
//! ends it by the signal); its output and exit status must be those of
//! the same program without heaplive, in default and exact mode, and no
//! dump file is written. The same with HEAPLIVE_SIGNAL set to another
//! signal, which the program then uses.

use crate::common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

/// Every file heaplive may have written in `dir` (dumps of any view,
/// pprof files): any file but the program itself.
fn written(dir: &Path, prog: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p != prog)
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

/// `sig_self <arg>` plain, then under the preload with `env` at the
/// default interval and in exact mode.
fn same_as_plain(arg: &str, sig: i32, env: &[(&str, &str)]) {
    let (dir, prog) = compiled("sig_self", "sig_self.c");
    let plain = run_plain(dir.path(), &prog, &[arg]);
    let out = stdout(&plain);
    // The program itself works as described (so the comparison means
    // something): it ends by the signal, after every step.
    assert_eq!(
        plain.status.signal(),
        Some(sig),
        "plain run of sig_self {arg}:\n{}",
        show(&plain)
    );
    for want in [
        "raise: handler ran 1 time(s) before raise returned",
        "kill: ran 1 before kill returned, SI_USER, own pid 1, own uid 1",
        "kill unblocked: ran 1, SI_USER, own pid 1",
        "sigqueue: ran 1, SI_QUEUE, value 4242, own pid 1",
        "pthread_kill: ran 1, on the target thread 1, SI_TKILL, own pid 1",
        "nested without SA_NODEFER: ran 2, depth 1, mask has SIGWINCH 1, itself 1",
        "nested with SA_NODEFER: ran 2, depth 2, mask has itself 0",
        "resethand child: ran 1, now SIG_DFL",
        "resethand child: killed by signal the same",
        "ignored: alive",
    ] {
        assert!(out.contains(want), "plain run lacks {want:?}:\n{out}");
    }
    assert!(!out.contains("alive after raise with SIG_DFL"), "{out}");
    for (mode, extra) in [("default", None), ("exact", Some("1"))] {
        let mut e: Vec<(&str, &str)> = env.to_vec();
        if let Some(i) = extra {
            e.push(("HEAPLIVE_SAMPLE_INTERVAL", i));
        }
        let o = run_preloaded(dir.path(), &prog, &[arg], &e);
        assert_eq!(
            stdout(&o),
            out,
            "sig_self {arg} {env:?} [{mode}]: output differs from the plain run\n{}",
            show(&o)
        );
        assert_eq!(
            (o.status.code(), o.status.signal(), o.status.core_dumped()),
            (
                plain.status.code(),
                plain.status.signal(),
                plain.status.core_dumped()
            ),
            "sig_self {arg} {env:?} [{mode}]: exit status differs\n{}",
            show(&o)
        );
        let files = written(dir.path(), &prog);
        assert!(
            files.is_empty(),
            "sig_self {arg} {env:?} [{mode}]: heaplive wrote {files:?}\n{}",
            show(&o)
        );
    }
}

#[test]
fn the_dump_signal_sent_to_itself_is_the_programs() {
    same_as_plain("USR2", libc::SIGUSR2, &[]);
}

#[test]
fn another_dump_signal_sent_to_itself_is_the_programs() {
    same_as_plain("USR1", libc::SIGUSR1, &[("HEAPLIVE_SIGNAL", "USR1")]);
    same_as_plain(
        "RTMIN+3",
        libc::SIGRTMIN() + 3,
        &[("HEAPLIVE_SIGNAL", "RTMIN+3")],
    );
}

/// A dump request's re-raise is not the program's: Zend's signal layer
/// (php-fpm workers, whose own disposition is SIG_DFL) defers the signal
/// its handler got and re-raises it later with the default action on the
/// PHP thread; heaplive takes that as the dump request's and the process
/// lives (`sig_deferred.c`).
#[test]
fn a_deferred_reraise_of_a_dump_request_does_not_end_the_process() {
    let (dir, prog) = compiled("sig_deferred", "sig_deferred.c");
    for interval in ["1", "524288"] {
        let o = run_preloaded(
            dir.path(),
            &prog,
            &[],
            &[("HEAPLIVE_SAMPLE_INTERVAL", interval)],
        );
        assert!(o.status.success(), "interval {interval}\n{}", show(&o));
        assert_eq!(
            stdout(&o),
            "handler 1, survived the re-raise, dumped 1\n",
            "interval {interval}\n{}",
            show(&o)
        );
    }
}

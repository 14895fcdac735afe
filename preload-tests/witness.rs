//! The lock witness (`src/hot/prim/lock.rs`, cargo feature `lock-witness`)
//! in real processes, where real nesting happens: a copy of the library
//! built with the witness (once per run, in `target/witness/`, only the
//! library: the first test to need it builds it, the others wait), a
//! deliberate out-of-order acquisition that must abort with the witness's
//! line, and real tests of this suite run again against that copy (fork
//! during dumps and threaded allocation, signal storms, a slow dump, the
//! leak reporter, forks from signal handlers, PHP mode): any lock taken out
//! of rank order there aborts the program, and the test fails.

use crate::common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The `lock-witness` build of the library: `cargo build --release
/// --features lock-witness` into `target/witness/` (beside the tests'
/// own `target/release/`), made the first time a test asks.
fn witness_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let target = build_dir()
            .parent()
            .expect("target/ above target/release")
            .join("witness");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        output_ok(
            Command::new(cargo)
                .args(["build", "--release", "--lib", "-p", "heaplive"])
                .args(["--features", "lock-witness", "--target-dir"])
                .arg(&target)
                .current_dir(root())
                .env_remove("LD_PRELOAD")
                .stdin(Stdio::null()),
            "building the witness library",
        );
        target.join("release/libheaplive.so")
    })
    .clone()
}

/// Two locks taken out of rank order (the `lock-witness` build's
/// `heaplive_witness_selftest`: a LiveShard-rank lock, then a Dump-rank
/// one) abort the process with one line naming both ranks; the library
/// people run exports no such function.
#[test]
fn an_out_of_order_acquisition_aborts_with_one_line() {
    let (dir, prog) = compiled("witness-selftest", "witness_selftest.c");
    let o = with_lib(witness_lib(), || run_preloaded(&dir, &prog, &[], &[]));
    assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{}", show(&o));
    assert_eq!(stdout(&o), "calling the selftest\n", "{}", show(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err:?}");
    let pid_end = lines[0].find("]: ").expect("heaplive[PID]: ...");
    assert!(lines[0].starts_with("heaplive["), "{err:?}");
    assert_eq!(
        &lines[0][pid_end..],
        "]: lock rank violation: taking Dump while holding LiveShard (lock-witness build); aborting"
    );
    // The library `make` builds has no witness and no selftest.
    let plain = run_preloaded(&dir, &prog, &[], &[]);
    assert_eq!(plain.status.code(), Some(3), "{}", show(&plain));
    assert_eq!(stdout(&plain), "no selftest\n");
}

/// Real tests of this suite against the witness build: a `#[test]` each,
/// `NAME => TEST`, that runs TEST with the witness library.
macro_rules! under_witness {
    ($($name:ident => $test:path,)*) => {$(
        #[test]
        fn $name() {
            with_lib(witness_lib(), $test);
        }
    )*};
}

under_witness! {
    fork_during_threaded_allocation_and_dumps => crate::signals_fork::fork_during_multithreaded_allocation_keeps_every_lock_usable,
    fork_children_dumping => crate::signals_fork::fork_children_keep_their_own_profiles,
    signal_burst_during_threaded_allocation => crate::signals_fork::signal_burst_during_threaded_allocation,
    signal_during_a_slow_dump => crate::signal_waits::signal_during_a_slow_dump_is_snapshotted_at_once,
    fork_from_a_signal_handler_during_a_fork => crate::glibc::programs::fork_from_a_signal_handler_during_a_fork_completes,
    leak_reporter_with_many_threads => crate::leaks::many_threads_at_once_then_a_later_warning,
    sixteen_threads_of_exact_churn => crate::stress::exact_totals_survive_sixteen_threads_of_churn,
}

/// php-cli in PHP mode (ZendMM hooked, PHP frames, the request's list of
/// ZendMM samples, the frame cache), exact mode: a dump signal mid-script,
/// then a memory_limit error (its dump queued for heaplive's thread). No
/// lock out of rank order: no abort, both dumps written.
#[test]
fn php_cli_dump_and_memory_limit() {
    crate::php_harness::require_php();
    let (dir, script) = crate::php_harness::php_dir(
        "witness-php",
        "fill.php",
        "function fill($n) { $a = []; for ($i = 0; $i < $n; $i++) { $a[] = str_repeat('x', 100 + $i % 300); } return $a; }\n\
         $keep = fill(20000);\necho 'ready ', getmypid(), \"\\n\";\nflush();\n\
         while (!file_exists('go')) { usleep(10000); }\n\
         ini_set('memory_limit', '64M');\n$more = [];\nwhile (true) { $more[] = fill(1000); }\n",
    );
    let php = PathBuf::from(crate::php_harness::php_bin());
    let lib = witness_lib();
    let mut c = with_lib(lib, || {
        preloaded_command(
            &dir,
            &php,
            &[script.to_str().unwrap()],
            &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
        )
    });
    let mut run = Running::spawn(c.stdout(Stdio::piped()).stderr(Stdio::piped()));
    run.ready();
    run.signal(libc::SIGUSR2);
    let first = run.wait_files(&dir, 1);
    std::fs::write(dir.join("go"), "").unwrap();
    let o = run.wait();
    let err = stderr(&o);
    assert!(!err.contains("lock rank violation"), "{}", show(&o));
    assert_status(&o, 255, &format!("PHP's fatal error status; {}", show(&o)));
    assert!(
        err.lines().any(|l| l.contains("]: memory_limit dump ")
            && l.contains("Allowed memory size of 67108864 bytes exhausted")),
        "{}",
        show(&o)
    );
    let files = folded_files(&dir);
    assert!(
        files.len() > first.len(),
        "a memory_limit dump after the signal's: {files:?}\n{}",
        show(&o)
    );
    assert!(
        bytes_under(&parse_folded(&first[0]), "fill (fill.php:2)") >= 20000 * 100,
        "the signal dump holds $keep"
    );
}

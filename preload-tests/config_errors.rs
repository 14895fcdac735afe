//! Bad settings and unwritable outputs: one clear line each, and the host
//! keeps its own output and exit status.

use crate::common::*;
use std::path::Path;

/// [`sh`] in a fresh directory ([`tempdir`] `tag`): the directory and
/// the run.
pub(crate) fn sh_in(tag: &str, env: &[(&str, &str)]) -> (TempDir, std::process::Output) {
    let dir = tempdir(tag);
    let o = sh(&dir, env);
    (dir, o)
}

/// Runs a small program that exits through exit() with status 5 (it reads
/// "quit" from a file given as stdin).
pub(crate) fn sh(dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let prog = compile("cli_grow.c", "cli_grow", dir, &[]);
    let input = write_file(dir, "input", "quit\n");
    let mut c = preloaded_command(dir, &prog, &[], env);
    c.stdin(std::fs::File::open(&input).unwrap());
    let o = c.output().unwrap();
    assert_status(
        &o,
        5,
        &format!("the host's exit status must not change\n{}", stderr(&o)),
    );
    assert_eq!(stdout(&o), "ready\n");
    o
}

#[test]
fn each_bad_value_gives_one_line_naming_variable_value_and_default() {
    let dir = tempdir("config-bad");
    let cases = [
        ("HEAPLIVE_SAMPLE_INTERVAL", "lots", "512K"),
        ("HEAPLIVE_SEED", "-4", "0 (seed from the clock)"),
        ("HEAPLIVE_DUMP_AT_EXIT", "maybe", "1"),
        ("HEAPLIVE_SIGNAL", "SEGV", "USR2"),
        ("HEAPLIVE_DUMP_EVERY", "soon", "0 (off)"),
        ("HEAPLIVE_FORMAT", "svg", "folded"),
        ("HEAPLIVE_WARN_BYTES", "big", "256M"),
        ("HEAPLIVE_WARN_BLOCKS", "1.5", "0 (off)"),
        ("HEAPLIVE_WARN_GROWTH", "0.5", "2"),
        ("HEAPLIVE_LINES", "yes please", "0"),
        ("HEAPLIVE_DEMANGLE", "2", "1"),
        ("HEAPLIVE_PHP", "zend", "auto"),
    ];
    let o = sh(
        &dir,
        &cases.iter().map(|&(k, v, _)| (k, v)).collect::<Vec<_>>(),
    );
    let err = stderr(&o);
    for (name, value, default) in cases {
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.contains(&format!("{name}=")))
            .collect();
        assert_eq!(lines.len(), 1, "{name}: expected one line\n{err}");
        let l = lines[0];
        assert!(l.starts_with("heaplive: "), "{l}");
        assert!(l.contains(&format!("{name}='{value}'")), "{l}");
        assert!(l.ends_with(&format!("using the default {default}")), "{l}");
    }
    // The defaults really are in force: the exit dump was written (folded).
    assert_eq!(folded_files(&dir).len(), 1, "{err}");
}

#[test]
fn unwritable_output_gives_one_line_and_the_fallback_directory() {
    // A directory that cannot exist: the file cannot be written anywhere
    // with that name except the fallback, which is $TMPDIR.
    let dir = tempdir("config-out");
    let tmp = tempdir("config-out-tmp");
    let o = sh(
        &dir,
        &[
            ("HEAPLIVE_OUTPUT", "/proc/heaplive-no-such-dir/h.%p.folded"),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
    );
    let err = stderr(&o);
    let line = one_line_with(&err, "cannot write", &err);
    assert!(
        line.contains("/proc/heaplive-no-such-dir/") && line.contains(tmp.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(
        folded_files(&tmp).len(),
        1,
        "the file should be in $TMPDIR\n{err}"
    );
}

#[test]
fn nowhere_to_write_gives_one_line_and_the_host_exits_normally() {
    let (_dir, o) = sh_in(
        "config-nowhere",
        &[
            ("HEAPLIVE_OUTPUT", "/proc/heaplive-no-such-dir/h.folded"),
            ("TMPDIR", "/proc/heaplive-no-tmp"),
        ],
    );
    let err = stderr(&o);
    let line = one_line_with(&err, "dump failed", &err);
    assert!(
        line.contains("/proc/heaplive-no-such-dir/h.folded"),
        "{err}"
    );
}

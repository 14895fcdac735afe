//! Issue 29, item 7: an unknown `HEAPLIVE_*` variable (a misspelled
//! setting) gets one warning line naming the closest setting, and the
//! host runs on unchanged; variables that are set on purpose (every
//! setting, `heaplive run`'s channel, the test suite's own) get none. The
//! command says "did you mean" for a misspelled option or subcommand.

use crate::common::*;
use std::path::Path;

/// The test program under the library with `env` (no inherited
/// HEAPLIVE_*), its exit status and stdout checked unchanged
/// (`config_errors::sh`); its stderr.
fn run(dir: &Path, env: &[(&str, &str)]) -> String {
    stderr(&crate::config_errors::sh(dir, env))
}

#[test]
fn an_unknown_setting_gets_one_line_naming_the_closest() {
    let (dir, o) = crate::config_errors::sh_in(
        "unknown-setting",
        &[
            ("HEAPLIVE_SAMPL_INTERVAL", "1"),
            ("HEAPLIVE_OUPUT", "x.folded"),
            ("HEAPLIVE_NOTHING_LIKE_THIS", "1"),
        ],
    );
    let err = stderr(&o);
    let lines: Vec<&str> = lines_with(&err, "unknown setting");
    assert_eq!(lines.len(), 3, "one line per unknown variable:\n{err}");
    for (bad, near) in [
        ("HEAPLIVE_SAMPL_INTERVAL", Some("HEAPLIVE_SAMPLE_INTERVAL")),
        ("HEAPLIVE_OUPUT", Some("HEAPLIVE_OUTPUT")),
        ("HEAPLIVE_NOTHING_LIKE_THIS", None),
    ] {
        let l: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains(&format!("unknown setting {bad} ")))
            .collect();
        assert_eq!(l.len(), 1, "{bad}:\n{err}");
        assert!(l[0].starts_with("heaplive: "), "{}", l[0]);
        match near {
            Some(n) => assert!(l[0].ends_with(&format!("(did you mean {n}?)")), "{}", l[0]),
            None => assert!(!l[0].contains("did you mean"), "{}", l[0]),
        }
    }
    // The misspelled interval was ignored: the default (sampled) interval,
    // so the dump has a samples file beside it (exact mode has none).
    let dumps = folded_files(&dir);
    assert_eq!(dumps.len(), 1, "{dumps:?}\n{err}");
    assert_eq!(
        view_files(&dir, "samples").len(),
        1,
        "sampled, not exact:\n{err}"
    );
}

#[test]
fn known_variables_get_no_warning() {
    let dir = tempdir("known-settings");
    let report = write_file(&dir, "files", b"");
    let err = run(
        &dir,
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_LIB", "/nonexistent"),
            ("HEAPLIVE_RUN_REPORT", report.to_str().unwrap()),
            ("HEAPLIVE_TEST_PHP", "php8.2"),
            ("HEAPLIVE_TEST_PHP_FPM", "php-fpm8.2"),
        ],
    );
    assert!(!err.contains("unknown setting"), "{err}");
    // And the channel got the dump's line.
    let text = std::fs::read_to_string(&report).unwrap();
    let dump = folded_files(&dir);
    assert_eq!(dump.len(), 1);
    assert!(
        text.lines()
            .any(|l| l.ends_with(&format!("\tcli_grow\t{}", dump[0].display()))),
        "{text}"
    );
}

#[test]
fn the_command_suggests_the_option_meant() {
    for (args, want) in [
        (
            &["run", "--intervall", "1", "--", "true"][..],
            "did you mean '--interval'?",
        ),
        (
            &["top", "--inclusiv", "x.folded"][..],
            "did you mean '--inclusive'?",
        ),
        (
            &["diff", "--folde", "a", "b"][..],
            "did you mean '--folded'?",
        ),
    ] {
        let o = heaplive(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", show(&o));
        let first = stderr(&o).lines().next().unwrap_or("").to_string();
        assert!(
            first.starts_with("heaplive: ") && first.ends_with(want),
            "{args:?}: {first}"
        );
    }
}

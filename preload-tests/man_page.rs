//! Issue 29, item 9: `heaplive man` is one page with every subcommand,
//! the settings table, the files written and examples laid out as
//! examples; rendered here by man-db's `man -l`, as a user reads it.

use crate::common::*;
use std::io::Write;
use std::process::{Command, Stdio};

/// The page as `man -l -` renders it at 100 columns, and man's stderr.
fn rendered() -> (String, String) {
    let page = ok(heaplive(&["man"]));
    let mut man = Command::new("man")
        .args(["-l", "-"])
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("man (man-db: scripts/install-test-deps.sh)");
    man.stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let o = man.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    (stdout(&o), stderr(&o))
}

#[test]
fn the_man_page_has_every_command_setting_and_example() {
    let (text, err) = rendered();
    assert_eq!(err, "", "man and groff have no warning");
    let lines: Vec<&str> = text.lines().collect();
    // The sections, in order.
    let mut at = 0;
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "COMMANDS",
        "SETTINGS",
        "FILES",
        "EXAMPLES",
        "EXIT STATUS",
    ] {
        let i = lines
            .iter()
            .position(|l| *l == section)
            .unwrap_or_else(|| panic!("no section {section}:\n{text}"));
        assert!(i >= at, "{section} out of order");
        at = i;
    }
    // Every subcommand has its own part, with its options.
    for sub in [
        "run",
        "dump",
        "start",
        "stop",
        "attach",
        "detach",
        "top",
        "diff",
        "merge",
        "flamegraph",
        "completions",
        "man",
    ] {
        assert!(
            lines.contains(&format!("   heaplive {sub}").as_str()),
            "no part for {sub}:\n{text}"
        );
        // Each example of its --help is one line of the page, intact.
        let help = ok(heaplive(&[sub, "--help"]));
        let examples = help
            .split("\n\n")
            .filter(|b| b.starts_with("Examples:") || b.starts_with("Example:"))
            .flat_map(|b| b.lines().skip(1))
            .map(str::trim)
            .filter(|l| !l.is_empty());
        for ex in examples {
            assert!(
                lines.iter().any(|l| l.trim() == ex),
                "{sub}: the example line '{ex}' is not intact in the page"
            );
        }
    }
    for opt in [
        "--interval BYTES",
        "--children",
        "--inclusive",
        "--folded",
        "--title TITLE",
    ] {
        assert!(lines.iter().any(|l| l.trim().starts_with(opt)), "{opt}");
    }
    // The settings table: every setting, with its default.
    for s in heaplive_format::settings::ALL {
        let head = format!("       {} (default: {})", s.name(), s.default);
        assert!(
            lines.contains(&head.as_str()),
            "setting {}:\n{text}",
            s.name()
        );
    }
    for f in [
        "heaplive.EXE.PID.N.folded",
        "NAME.peak.folded",
        "NAME.samples.folded",
    ] {
        assert!(lines.iter().any(|l| l.trim() == f), "file {f}");
    }
    // No other page is cited: heaplive installs only heaplive(1).
    for (i, _) in text.match_indices("(1)") {
        let before: String = text[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '-')
            .collect();
        let name: String = before.chars().rev().collect();
        assert!(name.eq_ignore_ascii_case("heaplive"), "cites {name}(1)");
    }
}

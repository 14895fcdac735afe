//! The command against the contract crate's settings table: the README's
//! settings table and `heaplive run --help` say what the table says, and the
//! completions and the man page come from the same definitions.
//! (Building this test also makes `cargo test --workspace` build the
//! `heaplive` binary that the preload tests run.)

use heaplive_format::settings::{self, Setting};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_heaplive");

fn run(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().expect("run heaplive");
    assert!(
        o.status.success(),
        "heaplive {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8 output")
}

/// Rows of the README's settings table: (name, default, example value).
fn readme_rows() -> Vec<(String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let text = std::fs::read_to_string(path).expect("README.md");
    text.lines()
        .filter(|l| l.starts_with("| `HEAPLIVE_"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").map(|c| c.trim_matches(['|', ' '])).collect();
            assert_eq!(cells.len(), 4, "README row: {l}");
            let unquote = |c: &str| c.replace('`', "");
            let example = unquote(cells[3]);
            let name = unquote(cells[0]);
            let value = example
                .strip_prefix(&format!("{name}="))
                .unwrap_or_else(|| panic!("README example of {name}: {example}"))
                .to_string();
            (name, unquote(cells[1]), value)
        })
        .collect()
}

#[test]
fn readme_settings_table_matches_the_contract() {
    let rows = readme_rows();
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let table: Vec<&str> = settings::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(names, table, "README rows and the settings table, in order");
    for (name, default, example) in &rows {
        let s = settings::by_name(name).expect("a known setting");
        assert_eq!(default, s.default, "README default of {name}");
        assert_eq!(
            s.grammar.check(example.as_bytes()),
            Ok(()),
            "README example {name}={example}"
        );
    }
}

#[test]
fn run_help_takes_each_option_from_the_table() {
    let help = run(&["run", "--help"]);
    let options: [(&str, &Setting); 5] = [
        ("--interval", &settings::SAMPLE_INTERVAL),
        ("--every", &settings::DUMP_EVERY),
        ("--output", &settings::OUTPUT),
        ("--signal", &settings::SIGNAL),
        ("--format", &settings::FORMAT),
    ];
    for (opt, s) in options {
        // The option's entry: its line and its help, up to a blank line.
        let at = help
            .find(&format!("{opt} <"))
            .unwrap_or_else(|| panic!("{opt} in run --help:\n{help}"));
        let entry = help[at..].split("\n\n").next().unwrap_or("");
        let entry = entry.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            entry.contains(s.doc) && entry.contains(&format!("default {}", s.default)),
            "{opt}: {entry}"
        );
        assert!(
            entry.ends_with(&format!("[{}]", s.name())),
            "{opt}: {entry}"
        );
    }
    assert!(help.contains("Examples:"), "{help}");
}

#[test]
fn completions_and_man_page_name_every_subcommand() {
    let bash = run(&["completions", "bash"]);
    let man = run(&["man"]);
    assert!(
        man.starts_with(".ie") || man.contains(".TH heaplive"),
        "{man}"
    );
    for sub in ["run", "dump", "top", "diff", "merge", "flamegraph"] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
        assert!(man.contains(sub), "man page lacks {sub}");
    }
    assert!(bash.contains("--interval"), "options are completed too");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(run(&["completions", shell]).contains("heaplive"), "{shell}");
    }
    let o = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .expect("run heaplive");
    assert_eq!(o.status.code(), Some(2));
}

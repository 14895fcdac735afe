//! Issue 29, completions: `--format` and `--signal` complete their values
//! (not file names), and `dump` (start, stop, detach) completes the pids
//! of processes running heaplive, `attach` any pid. Driven through bash's
//! completion function as bash calls it (COMP_WORDS, COMP_CWORD).

use crate::common::*;
use std::process::{Command, Stdio};

/// What bash's completion of `heaplive` offers for `words` (the last one
/// being completed), one candidate a line.
fn complete(words: &[&str]) -> Vec<String> {
    let script = ok(heaplive(&["completions", "bash"]));
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let driver = format!(
        "{script}\nCOMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}\n\
         _heaplive_with_pids heaplive '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let o = output_ok(
        Command::new("bash")
            .args(["--norc", "-c", &driver])
            .stdin(Stdio::null()),
        "bash",
    );
    stdout(&o)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn signal_and_format_complete_their_values() {
    let got = complete(&["heaplive", "run", "--signal", ""]);
    for want in ["USR1", "USR2", "RTMIN+3", "none"] {
        assert!(
            got.iter().any(|g| g == want),
            "--signal offers {want}: {got:?}"
        );
    }
    let got = complete(&["heaplive", "run", "--format", "f"]);
    assert_eq!(got, ["folded", "folded,pprof"], "--format f");
    let got = complete(&["heaplive", "attach", "--signal", "RT"]);
    assert!(
        got.iter().all(|g| g.starts_with("RTMIN")) && !got.is_empty(),
        "{got:?}"
    );
}

#[test]
fn dump_completes_the_pids_running_heaplive() {
    let dir = tempdir("complete-pids");
    let profiled = Running::spawn(
        preloaded_command(dir.path(), std::path::Path::new("sleep"), &["30"], &[])
            .stdin(Stdio::null()),
    );
    let plain = Running::spawn(Command::new("sleep").arg("30").stdin(Stdio::null()));
    let (p, q) = (profiled.pid().to_string(), plain.pid().to_string());
    // The profiled sleep has the library mapped once the loader ran.
    wait_until(10, "libheaplive mapped in the sleep", || {
        std::fs::read_to_string(format!("/proc/{p}/maps"))
            .ok()
            .filter(|m| m.contains("libheaplive"))
    });
    for sub in ["dump", "start", "stop", "detach"] {
        let got = complete(&["heaplive", sub, ""]);
        assert!(
            got.contains(&p),
            "{sub} offers the profiled pid {p}: {got:?}"
        );
        assert!(
            !got.contains(&q),
            "{sub} does not offer {q}, not profiled: {got:?}"
        );
    }
    // After an option and its operands too; --timeout's value is not a pid.
    let got = complete(&["heaplive", "dump", "--children", &p[..1]]);
    assert!(got.contains(&p), "{got:?}");
    let got = complete(&["heaplive", "dump", "--timeout", ""]);
    assert!(!got.contains(&p), "--timeout wants seconds: {got:?}");
    // attach: any process.
    let got = complete(&["heaplive", "attach", ""]);
    assert!(
        got.contains(&q) && got.contains(&p),
        "attach offers every pid"
    );
    // Options still complete as before.
    let got = complete(&["heaplive", "dump", "--ch"]);
    assert_eq!(got, ["--children"]);
    // zsh and fish get the same pid completion.
    for shell in ["zsh", "fish"] {
        let s = ok(heaplive(&["completions", shell]));
        assert!(
            s.contains("_heaplive_pids") && s.contains("libheaplive"),
            "{shell}"
        );
    }
}

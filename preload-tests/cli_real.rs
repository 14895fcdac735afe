//! The `heaplive` command on files and processes of the real library, with
//! a program of our own driven step by step.

use crate::common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// A `cli_grow` process under the library in exact mode, driven by lines.
struct Grower {
    p: Running,
}

impl Grower {
    fn start(dir: &Path) -> Grower {
        let prog = compile("cli_grow.c", "cli_grow", dir, &[]);
        let mut p = Running::spawn(
            Command::new(prog)
                .current_dir(dir)
                .env("LD_PRELOAD", lib())
                .env("HEAPLIVE_SAMPLE_INTERVAL", "1")
                .env("HEAPLIVE_OUTPUT", dir.join("heaplive.%e.%p.%n.folded"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        );
        assert_eq!(p.line().as_deref(), Some("ready"));
        Grower { p }
    }
    fn say(&mut self, cmd: &str) {
        writeln!(self.p.child().stdin.as_mut().unwrap(), "{cmd}").unwrap();
        assert_eq!(self.p.line().as_deref(), Some("ok"), "after {cmd}");
    }
    fn pid(&self) -> String {
        self.p.pid().to_string()
    }
}

#[test]
fn dump_top_diff_merge_and_flamegraph_on_a_live_process() {
    let dir = tempdir("cli-real");
    let mut g = Grower::start(&dir);
    g.say("grow 100000");
    let first = ok(heaplive(&["dump", &g.pid(), "--timeout", "30"]));
    let first = first.trim().to_string();
    assert!(
        first.ends_with(".1.folded") && Path::new(&first).exists(),
        "dump printed {first:?}"
    );
    g.say("grow 250000");
    g.say("grow 50000");
    let second = ok(heaplive(&["dump", &g.pid(), "--timeout", "30"]))
        .trim()
        .to_string();
    assert!(
        second.ends_with(".2.folded") && Path::new(&second).exists(),
        "dump printed {second:?}"
    );

    let (a, b) = (
        parse_folded(Path::new(&first)),
        parse_folded(Path::new(&second)),
    );
    assert_eq!(bytes_by_leaf(&a).get("grow_site"), Some(&100_000));
    assert_eq!(bytes_by_leaf(&b).get("grow_site"), Some(&400_000));
    assert_eq!(bytes_by_leaf(&b).get("steady_site"), Some(&4242));

    // top: the total line equals the folded total, and the grown site leads.
    let top = ok(heaplive(&["top", "--bytes", &second]));
    assert!(
        top.contains(&format!("total: {} bytes", total(&b))),
        "top:\n{top}"
    );
    let first_row = top.lines().nth(1).unwrap_or("");
    assert!(first_row.contains("grow_site"), "top:\n{top}");

    // diff --folded: the grown stack went from 100000 to 400000 exactly,
    // the steady one did not move.
    let diff = ok(heaplive(&["diff", "--folded", &first, &second]));
    let grown = one_line_with(&diff, ";grow_site ", &format!("diff:\n{diff}"));
    assert!(grown.ends_with(" 100000 400000"), "diff:\n{diff}");
    let steady: Vec<&str> = lines_with(&diff, ";steady_site ");
    assert!(
        steady.len() == 1 && steady[0].ends_with(" 4242 4242"),
        "diff:\n{diff}"
    );
    let text = ok(heaplive(&["diff", "--bytes", &first, &second]));
    assert!(
        text.contains("grow_site") && text.contains("+300000"),
        "diff:\n{text}"
    );

    // merge sums the two dumps stack by stack.
    let merged = ok(heaplive(&["merge", &first, &second]));
    let mfile = write_file(&dir, "merged.folded", merged);
    let m = parse_folded(&mfile);
    assert_eq!(total(&m), total(&a) + total(&b));
    assert_eq!(bytes_by_leaf(&m).get("grow_site"), Some(&500_000));

    // flamegraph: well-formed SVG naming the functions.
    let svg = dir.join("live.svg");
    ok(heaplive(&[
        "flamegraph",
        &second,
        "-o",
        svg.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("grow_site") && text.contains("steady_site"));
    assert_well_formed_xml(&svg);
}

#[test]
fn run_passes_settings_to_the_real_library_and_returns_the_status() {
    let (dir, prog) = compiled("cli-run-real", "cli_grow.c");
    let template = dir.join("h.%e.%p.%n.folded");
    let mut child = Running::spawn(
        Command::new(heaplive_bin())
            .args([
                "run",
                "--interval",
                "1",
                "--signal",
                "USR1",
                "--output",
                template.to_str().unwrap(),
                "--",
            ])
            .arg(&prog)
            .env("HEAPLIVE_LIB", lib())
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    child
        .child()
        .stdin
        .take()
        .unwrap()
        .write_all(b"grow 7777\nquit\n")
        .unwrap();
    let o = child.wait();
    assert_eq!(o.status.code(), Some(5), "stderr:\n{}", stderr(&o));
    assert_eq!(stdout(&o), "ready\nok\n");
    let files = folded_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}\n{}", stderr(&o));
    // Exact mode came through: the exact bytes of both sites.
    let by_leaf = bytes_by_leaf(&parse_folded(&files[0]));
    assert_eq!(by_leaf.get("grow_site"), Some(&7777));
    assert_eq!(by_leaf.get("steady_site"), Some(&4242));
    // And so did the signal: the status file the library wrote names USR1.
    let err = stderr(&o);
    assert!(
        err.contains(files[0].to_str().unwrap()),
        "run should list the file:\n{err}"
    );
}

#[test]
fn dump_fails_clearly_for_a_process_without_the_library_and_a_dead_pid() {
    let sleeper = Running::spawn(Command::new("sleep").arg("30"));
    let pid = sleeper.pid().to_string();
    let o = heaplive(&["dump", &pid, "--timeout", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not running heaplive"),
        "{}",
        stderr(&o)
    );
    sleeper.signal(libc::SIGKILL);
    sleeper.wait();
    let o = heaplive(&["dump", &pid, "--timeout", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no such process"), "{}", stderr(&o));
}

/// `heaplive run -q` is quiet: no line from the command and none from the
/// library (its exit-dump summary), while the dump is still written and
/// the program's own stderr passes through; an explicit HEAPLIVE_LOG wins.
#[test]
fn run_quiet_silences_the_library_too() {
    let (dir, prog) = compiled("cli-run-quiet", "log_devnull.c");
    let run = |env: &[(&str, &std::path::Path)]| {
        let mut c = Command::new(heaplive_bin());
        c.args(["run", "-q", "--interval", "1", "-o"])
            .arg(dir.join("q.%p.folded"))
            .arg("--")
            .args(["sh", "-c"])
            .arg(format!("{} keep; echo own >&2", prog.display()))
            .env("HEAPLIVE_LIB", lib())
            .env_remove("LD_PRELOAD")
            .env_remove("HEAPLIVE_LOG");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(stderr(&o), "own\n", "{}", show(&o));
    let files = folded_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        bytes_by_leaf(&parse_folded(&files[0])).get("main"),
        Some(&1000)
    );
    let log = dir.join("asked.log");
    let o = run(&[("HEAPLIVE_LOG", &log)]);
    assert_eq!(stderr(&o), "own\n", "{}", show(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.contains(": exit dump ")).count(),
        1,
        "{text}"
    );
}

//! Issue 29, item 6: `heaplive run` lists every file of the processes it
//! started (children that change directory, exec, or are forked by forked
//! children), once each, grouped by process with its program name, and no
//! file of a process outside the run, even one writing in the same
//! directory at the same time; its count line counts what it lists.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Every regular file under `d`, recursively.
fn files_under(d: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut todo = vec![d.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("list").flatten() {
            let m = e.metadata().expect("stat");
            if m.is_dir() {
                todo.push(e.path());
            } else if m.is_file() {
                out.insert(e.path());
            }
        }
    }
    out
}

/// The listing of `heaplive run`'s stderr: (pid, program) headings, each
/// with its files, and the count line's number.
fn listing(err: &str) -> (Vec<(u32, String, Vec<PathBuf>)>, usize) {
    let count = err
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("heaplive: ")?;
            let (n, rest) = rest.split_once(' ')?;
            rest.contains(" written by ")
                .then(|| n.parse::<usize>().ok())?
        })
        .unwrap_or_else(|| panic!("no count line:\n{err}"));
    let mut groups: Vec<(u32, String, Vec<PathBuf>)> = Vec::new();
    for l in err.lines() {
        if let Some(h) = l.strip_prefix(" pid ") {
            let (pid, prog) = h.split_once(" (").expect("pid N (prog):");
            let prog = prog.strip_suffix("):").expect("pid N (prog):");
            groups.push((pid.parse().expect("pid"), prog.to_string(), Vec::new()));
        } else if let Some(f) = l.strip_prefix("  ") {
            groups
                .last_mut()
                .unwrap_or_else(|| panic!("a file before any process heading:\n{err}"))
                .2
                .push(PathBuf::from(f));
        }
    }
    (groups, count)
}

#[test]
fn run_lists_every_childs_files_and_no_outsiders() {
    let dir = tempdir("run-children");
    let root = dir.path();
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    // A process outside the run, in the same directory, with the same
    // template: it starts when the run's script says so and writes its
    // exit dump while the run is still going.
    let mut outsider = Running::spawn(
        preloaded_command(
            root,
            Path::new("sh"),
            &[
                "-c",
                "cd sub && i=0; while [ ! -e ../go ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; exec cat /dev/null",
            ],
            &[
                ("HEAPLIVE_OUTPUT", "heaplive.%e.%p.%n.folded"),
                ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
                // Its shell's sleeps write nothing: its one file is cat's.
                ("HEAPLIVE_PROGRAMS", "cat"),
            ],
        )
        .stdin(Stdio::null()),
    );
    let out_pid = outsider.pid();
    // The run: its shell changes directory; a forked subshell changes
    // directory again and forks a shell that forks and execs cat; the
    // shell then waits for the outsider's dump and execs cat itself.
    let script = format!(
        "cd sub && touch ../go && (cd deeper && sh -c 'cat /dev/null & wait') && \
         i=0; while [ ! -e heaplive.cat.{out_pid}.1.folded ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; \
         [ -e heaplive.cat.{out_pid}.1.folded ] || exit 9; exec cat /dev/null"
    );
    let mut cmd = Command::new(heaplive_bin());
    cmd.args(["run", "--interval", "1", "--", "sh", "-c", &script])
        .current_dir(root)
        .env("HEAPLIVE_LIB", lib())
        .env("TMPDIR", root)
        .env_remove("LD_PRELOAD")
        .env_remove("HEAPLIVE_OUTPUT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let o = Running::spawn(&mut cmd).wait();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o_out = outsider.child().wait().expect("the outsider ends");
    assert!(o_out.success());
    let err = stderr(&o);
    let (groups, count) = listing(&err);

    let listed: Vec<&PathBuf> = groups.iter().flat_map(|g| &g.2).collect();
    let unique: BTreeSet<PathBuf> = listed.iter().map(|p| (*p).clone()).collect();
    assert_eq!(unique.len(), listed.len(), "each file once:\n{err}");
    assert_eq!(
        count,
        listed.len(),
        "the count line counts the files listed:\n{err}"
    );

    // What is on disk: the run's files and the outsider's (and the
    // shells' marker); the listing is exactly the run's.
    let outsiders: BTreeSet<PathBuf> = files_under(root)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&format!(".{out_pid}.")))
        .collect();
    assert!(
        outsiders.contains(&root.join(format!("sub/heaplive.cat.{out_pid}.1.folded"))),
        "the outsider wrote its dump: {outsiders:?}"
    );
    let runs: BTreeSet<PathBuf> = files_under(root)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            !outsiders.contains(p) && name.starts_with("heaplive.") && !name.ends_with(".log")
        })
        .collect();
    assert_eq!(unique, runs, "listed vs written by the run:\n{err}");

    // Grouped by process: every file of a group carries its pid and its
    // program's name (the template's %e.%p); the child of the forked
    // subshell in sub/deeper and the shell's own exec'd cat in sub.
    for (pid, prog, files) in &groups {
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name.starts_with(&format!("heaplive.{prog}.{pid}.")),
                "{name} under pid {pid} ({prog}):\n{err}"
            );
        }
    }
    let in_dir = |d: &str| {
        groups
            .iter()
            .filter(|g| g.1 == "cat" && g.2.iter().any(|f| f.parent() == Some(&root.join(d))))
            .count()
    };
    assert_eq!(
        in_dir("sub/deeper"),
        1,
        "the grandchild's cat in sub/deeper:\n{err}"
    );
    assert_eq!(in_dir("sub"), 1, "the exec'd cat in sub:\n{err}");
    assert!(groups.len() >= 2, "{err}");
}

/// Without files (dumps off), run says so instead of listing nothing.
#[test]
fn run_says_when_no_file_was_written() {
    let dir = tempdir("run-nofiles");
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    // (A directory of the test's own: cat closes stderr at exit, so its
    // peak line goes to heaplive.<euid>.log in its start directory.)
    let o = crate::cli_processes::run_with_lib(
        dir.path(),
        &["run", "--", "sh", "-c", "cd sub && exec cat /dev/null"],
        &[("HEAPLIVE_DUMP_AT_EXIT", "0")],
    );
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        stderr(&o).contains("heaplive: no dump files were written"),
        "{}",
        show(&o)
    );
    let left: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        left.iter()
            .all(|p| !p.to_string_lossy().contains("heaplive-run.")),
        "run removes its private directory: {left:?}"
    );
}

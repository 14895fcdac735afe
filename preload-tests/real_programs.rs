//! Real programs nobody here wrote, run unchanged under the preload: at the
//! default interval (with a fixed seed, so the run is repeatable) and in
//! exact mode on a small input. Each must print the same stdout and exit
//! with the same status as without the preload, and leave folded files
//! whose frames include real function names (not only `[unknown]` or
//! `module+0x..`).
//!
//! At the default interval a program that frees everything before exit
//! (sqlite3, git) may leave an empty file: that is a correct profile. The
//! ones that keep memory to the end (python's daemon thread, perl, xz, cc1)
//! must have samples in every mode.

use crate::common::{self, Stack, show};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Default interval (512 KiB), HEAPLIVE_SEED=1.
    Default,
    /// HEAPLIVE_SAMPLE_INTERVAL=1.
    Exact,
}

impl Mode {
    fn env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Mode::Default => vec![("HEAPLIVE_SEED", "1")],
            Mode::Exact => vec![("HEAPLIVE_SAMPLE_INTERVAL", "1")],
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::Default => "default interval",
            Mode::Exact => "exact mode",
        }
    }
}

/// One command of a scenario, run in the scenario's directory.
struct Step {
    cmd: PathBuf,
    args: Vec<String>,
}

fn step(cmd: &str, args: &[&str]) -> Step {
    Step {
        cmd: which(cmd),
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

/// The installed program, or a clear failure naming it.
fn which(cmd: &str) -> PathBuf {
    if cmd.starts_with('/') {
        let p = PathBuf::from(cmd);
        assert!(
            p.exists(),
            "{cmd} is not installed; the real-program tests need it"
        );
        return p;
    }
    for d in ["/usr/local/bin", "/usr/bin", "/bin"] {
        let p = Path::new(d).join(cmd);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{cmd} is not installed (looked in /usr/local/bin, /usr/bin, /bin); the real-program tests need it"
    );
}

/// A frame that names a function: not `[unknown]`, not `module+0xoffset`.
fn is_real_name(f: &str) -> bool {
    !f.is_empty()
        && f != "[unknown]"
        && !f.contains("+0x")
        && f.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn dump_head(stacks: &[Stack]) -> String {
    stacks
        .iter()
        .take(20)
        .map(|s| format!("  {} {}\n", s.frames.join(";"), s.bytes))
        .collect()
}

/// Runs `steps` in two fresh directories prepared by `setup`: plainly and
/// under the preload in `mode`. Compares every step, then checks the
/// folded files. `must_sample` lists the executable names (`%e`) whose
/// file must be non-empty and symbolized in this mode; `expect_exes` the
/// names that must have a file at all. Returns the preloaded directory.
fn scenario(
    tag: &str,
    mode: Mode,
    setup: &dyn Fn(&Path),
    steps: &[Step],
    expect_exes: &[&str],
    must_sample: &[&str],
) -> common::TempDir {
    let mtag = match mode {
        Mode::Default => "default",
        Mode::Exact => "exact",
    };
    let plain_dir = common::tempdir(&format!("real-{tag}-{mtag}-plain"));
    let pre_dir = common::tempdir(&format!("real-{tag}-{mtag}"));
    setup(&plain_dir);
    setup(&pre_dir);
    for (i, s) in steps.iter().enumerate() {
        let args: Vec<&str> = s.args.iter().map(|a| a.as_str()).collect();
        let what = format!(
            "{tag} ({}), step {}: {} {}",
            mode.name(),
            i + 1,
            s.cmd.display(),
            s.args.join(" ")
        );
        let plain = common::run_plain(&plain_dir, &s.cmd, &args);
        assert!(
            plain.status.success(),
            "{what}: fails even without the preload (test environment problem?):\n{}",
            show(&plain)
        );
        let pre = common::run_preloaded(&pre_dir, &s.cmd, &args, &mode.env());
        if plain.status.code() != pre.status.code() || plain.stdout != pre.stdout {
            panic!(
                "{what}: the preload changed the program's behaviour\n\n===== without the preload =====\n{}\n\n===== with the preload =====\n{}",
                show(&plain),
                show(&pre)
            );
        }
    }

    let files = common::folded_files(&pre_dir);
    assert!(
        !files.is_empty(),
        "{tag} ({}): no folded file in {}",
        mode.name(),
        pre_dir.display()
    );
    let exe_of = |p: &Path| -> String {
        // heaplive.<exe>.<pid>.<n>.folded
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let parts: Vec<&str> = name.split('.').collect();
        assert!(
            parts.len() >= 5 && parts[0] == "heaplive",
            "{tag}: unexpected file name {name}"
        );
        parts[1..parts.len() - 3].join(".")
    };
    let exes: Vec<String> = files.iter().map(|p| exe_of(p)).collect();
    for e in expect_exes {
        assert!(
            exes.iter().any(|x| x == e),
            "{tag} ({}): no folded file for process '{e}'; files: {files:?}",
            mode.name()
        );
    }
    for f in &files {
        // Strict parse: every line `frames count`.
        let stacks = common::parse_folded(f);
        let exe = exe_of(f);
        for s in &stacks {
            assert!(
                s.frames.iter().all(|fr| !fr.is_empty()),
                "{}: a stack with an empty frame: {}",
                f.display(),
                s.frames.join(";")
            );
        }
        if must_sample.contains(&exe.as_str()) {
            assert!(
                !stacks.is_empty() && common::total(&stacks) > 0,
                "{tag} ({}): {} is empty, but {exe} keeps memory live at exit",
                mode.name(),
                f.display()
            );
            let named = stacks
                .iter()
                .flat_map(|s| s.frames.iter())
                .filter(|fr| is_real_name(fr))
                .count();
            assert!(
                named > 0,
                "{tag} ({}): {} has no frame with a function name (only [unknown] / module+0x..):\n{}",
                mode.name(),
                f.display(),
                dump_head(&stacks)
            );
        }
    }
    pre_dir
}

const PY_SCRIPT: &str = r#"
import sys, threading
n = int(sys.argv[1])
built = threading.Event()
result = []
def hold():
    d = {("key%d" % i): [i] * (i % 7) for i in range(n)}
    result.append((len(d), sum(len(v) for v in d.values())))
    built.set()
    threading.Event().wait()   # a daemon thread: d stays live until exit
threading.Thread(target=hold, daemon=True).start()
built.wait()
print("entries", result[0][0], "items", result[0][1])
"#;

/// The two tests of one program: `$default` runs `$f(Mode::Default,
/// ARGS...)` with the first arguments, `$exact` `$f(Mode::Exact, ...)`
/// with the second.
macro_rules! default_and_exact {
    ($default:ident, $exact:ident, $f:ident($($d:expr),*), ($($e:expr),*)) => {
        #[test]
        fn $default() {
            $f(Mode::Default, $($d),*);
        }

        #[test]
        fn $exact() {
            $f(Mode::Exact, $($e),*);
        }
    };
}

fn python(mode: Mode, n: &str) {
    let setup = |d: &Path| std::fs::write(d.join("dict.py"), PY_SCRIPT).unwrap();
    scenario(
        "python3",
        mode,
        &setup,
        &[step("/usr/bin/python3", &["dict.py", n])],
        &["python3"],
        &["python3"],
    );
}

default_and_exact!(
    real_programs_python3_default,
    real_programs_python3_exact,
    python("200000"),
    ("2000")
);

fn perl(mode: Mode, n: &str) {
    let script = format!(
        r#"my %h; for my $i (1..{n}) {{ $h{{"k$i"}} = "x" x ($i % 50); }} my $t = 0; $t += length($_) for values %h; print scalar(keys %h), " $t\n";"#
    );
    scenario(
        "perl",
        mode,
        &|_| {},
        &[step("perl", &["-e", &script])],
        &["perl"],
        &["perl"],
    );
}

default_and_exact!(
    real_programs_perl_default,
    real_programs_perl_exact,
    perl("200000"),
    ("2000")
);

fn sqlite(mode: Mode, rows: u32) {
    let sql = format!(
        "create table t(a integer primary key, b text); \
         with recursive c(x) as (select 1 union all select x+1 from c where x<{rows}) \
         insert into t select x, printf('row %08d %s', x, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26)) from c; \
         create index tb on t(b); \
         select count(*), sum(length(b)), min(b), max(b) from t; \
         select b from t where a % 997 = 0 order by b desc limit 3;"
    );
    let must: &[&str] = if mode == Mode::Exact {
        &["sqlite3"]
    } else {
        &[]
    };
    scenario(
        "sqlite3",
        mode,
        &|_| {},
        &[step("sqlite3", &[":memory:", &sql])],
        &["sqlite3"],
        must,
    );
}

default_and_exact!(
    real_programs_sqlite3_default,
    real_programs_sqlite3_exact,
    sqlite(100_000),
    (1000)
);

fn git(mode: Mode, files: usize) {
    let setup = move |d: &Path| {
        let w = d.join("work");
        std::fs::create_dir_all(&w).unwrap();
        for i in 0..files {
            let body: String = (0..200).map(|j| format!("file {i} line {j}\n")).collect();
            std::fs::write(w.join(format!("f{i}.txt")), body).unwrap();
        }
    };
    // Fixed identity and dates: the commit id is the same in both runs.
    let cfg = [
        "-c",
        "user.name=Heap Live",
        "-c",
        "user.email=heaplive@example.invalid",
        "-c",
        "init.defaultBranch=main",
        "-c",
        "core.autocrlf=false",
        "-c",
        "gc.auto=0",
        "-c",
        "commit.gpgsign=false",
    ];
    let g = |args: &[&str]| {
        let mut a: Vec<&str> = cfg.to_vec();
        a.extend_from_slice(&["-C", "work"]);
        a.extend_from_slice(args);
        step("git", &a)
    };
    // No commit: its id would depend on the clock. write-tree and
    // ls-files print ids that depend on the contents only.
    let steps = [
        g(&["init", "-q"]),
        g(&["hash-object", "-w", "f0.txt"]),
        g(&["add", "."]),
        g(&["write-tree"]),
        g(&["ls-files", "-s"]),
        g(&["cat-file", "-p", ":f0.txt"]),
        step("git", &["--version"]),
    ];
    let must: &[&str] = if mode == Mode::Exact { &["git"] } else { &[] };
    scenario("git", mode, &setup, &steps, &["git"], must);
}

default_and_exact!(
    real_programs_git_default,
    real_programs_git_exact,
    git(200),
    (5)
);

fn data(len: usize) -> Vec<u8> {
    // Text with some structure, so xz has work to do; deterministic.
    let mut v = Vec::with_capacity(len);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let words = [
        "heap", "live", "malloc", "free", "stack", "sample", "profile", "folded", "\n",
    ];
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(words[(x % words.len() as u64) as usize].as_bytes());
        v.push(b' ');
        if x.is_multiple_of(5) {
            v.extend_from_slice(format!("{} ", x % 100_000).as_bytes());
        }
    }
    v.truncate(len);
    v
}

fn xz(mode: Mode, len: usize, level: &str) {
    let setup = move |d: &Path| std::fs::write(d.join("data.txt"), data(len)).unwrap();
    // The compressed stream goes to stdout: compared byte for byte.
    let dir = scenario(
        "xz",
        mode,
        &setup,
        &[step("xz", &["-T1", level, "-c", "data.txt"])],
        &["xz"],
        &["xz"],
    );
    assert!(dir.join("data.txt").exists());
}

default_and_exact!(
    real_programs_xz_default,
    real_programs_xz_exact,
    xz(2 << 20, "-6"),
    (100_000, "-1")
);

const HELLO: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
int main(void) {
    char *w[] = {"pear", "apple", "fig", "heap"};
    qsort(w, 4, sizeof *w, cmp);
    for (int i = 0; i < 4; i++) printf("%s\n", w[i]);
    return 0;
}
"#;

fn gcc(mode: Mode) {
    let setup = |d: &Path| std::fs::write(d.join("hello.c"), HELLO).unwrap();
    // The driver forks cc1, as, collect2 and ld: each gets its own file.
    // cc1 and ld keep memory to exit at the default interval too.
    let must: &[&str] = match mode {
        Mode::Exact => &["gcc", "cc1", "as", "collect2", "ld"],
        Mode::Default => &["cc1"],
    };
    let dir = scenario(
        "gcc",
        mode,
        &setup,
        &[step("gcc", &["-O2", "-o", "hello", "hello.c"])],
        &["gcc", "cc1", "as", "collect2", "ld"],
        must,
    );
    // What it built works.
    let o = common::run_plain(&dir, &dir.join("hello"), &[]);
    assert!(
        o.status.success() && common::stdout(&o) == "apple\nfig\nheap\npear\n",
        "the program gcc built under the preload misbehaves:\n{}",
        show(&o)
    );
}

default_and_exact!(
    real_programs_gcc_default,
    real_programs_gcc_exact,
    gcc(),
    ()
);

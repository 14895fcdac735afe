//! Helpers shared by the preload tests: build a test program, run it under
//! the library, read its folded files.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library under test. `make test` builds it; a clear failure if not.
pub fn lib() -> PathBuf {
    let p = root().join("target/release/libheaplive.so");
    assert!(
        p.exists(),
        "{} is missing: run `make` (or `make test`) first",
        p.display()
    );
    p
}

/// A fresh, empty directory for one test's files.
pub fn tempdir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!(
        "heaplive-test.{}.{}.{}",
        std::process::id(),
        n,
        tag
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `preload-tests/progs/<src>` (C with gcc, C++ with g++ by the
/// extension) into `dir`, with debug info and `extra` flags. Returns the
/// binary (or shared object, if `extra` has `-shared`).
pub fn compile(src: &str, out_name: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let path = root().join("preload-tests/progs").join(src);
    let cc = if src.ends_with(".cpp") || src.ends_with(".cc") {
        "g++"
    } else {
        "gcc"
    };
    let out = dir.join(out_name);
    let o = Command::new(cc)
        .args([
            "-g",
            "-O1",
            "-fno-omit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-o",
        ])
        .arg(&out)
        .arg(&path)
        .args(extra)
        .args(["-lpthread", "-ldl"])
        .output()
        .expect("run the compiler");
    assert!(
        o.status.success(),
        "{cc} {src} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `cmd args` in `dir` with the library preloaded, the output template
/// pointing into `dir`, no inherited HEAPLIVE_* settings, and `env` on top.
pub fn preloaded_command(dir: &Path, cmd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(cmd);
    c.args(args).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("HEAPLIVE_") {
            c.env_remove(k);
        }
    }
    c.env("LD_PRELOAD", lib())
        .env("HEAPLIVE_OUTPUT", dir.join("heaplive.%e.%p.%n.folded"));
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Runs `preloaded_command` and returns the process output.
pub fn run_preloaded(dir: &Path, cmd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    preloaded_command(dir, cmd, args, env)
        .output()
        .expect("run the program")
}

/// The same command without the library (for comparing outputs).
pub fn run_plain(dir: &Path, cmd: &Path, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("run the program")
}

/// Folded files in `dir`, sorted by name.
pub fn folded_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "folded"))
        .collect();
    v.sort();
    v
}

/// One folded stack: frames root first, and its bytes.
#[derive(Clone, Debug)]
pub struct Stack {
    pub frames: Vec<String>,
    pub bytes: u64,
}

impl Stack {
    pub fn leaf(&self) -> &str {
        self.frames.last().map(|s| s.as_str()).unwrap_or("")
    }
    pub fn has(&self, name: &str) -> bool {
        self.frames.iter().any(|f| f == name)
    }
}

/// Parses a folded file strictly: every line `frames count`.
pub fn parse_folded(path: &Path) -> Vec<Stack> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let (stack, n) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("{}:{}: no count: {l}", path.display(), i + 1));
            let bytes = n
                .parse()
                .unwrap_or_else(|_| panic!("{}:{}: bad count: {l}", path.display(), i + 1));
            Stack {
                frames: stack.split(';').map(String::from).collect(),
                bytes,
            }
        })
        .collect()
}

/// Bytes per leaf function (the function that called the allocator).
pub fn bytes_by_leaf(stacks: &[Stack]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for s in stacks {
        *m.entry(s.leaf().to_string()).or_insert(0) += s.bytes;
    }
    m
}

/// Bytes of stacks that contain `name` anywhere.
pub fn bytes_under(stacks: &[Stack], name: &str) -> u64 {
    stacks.iter().filter(|s| s.has(name)).map(|s| s.bytes).sum()
}

pub fn total(stacks: &[Stack]) -> u64 {
    stacks.iter().map(|s| s.bytes).sum()
}

/// The single folded file a run left in `dir` (asserts there is one).
pub fn only_folded(dir: &Path) -> Vec<Stack> {
    let files = folded_files(dir);
    assert_eq!(
        files.len(),
        1,
        "expected one folded file in {}, found {:?}",
        dir.display(),
        files
    );
    parse_folded(&files[0])
}

/// Both outputs of a run and its status, for failure messages.
pub fn show(o: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        o.status,
        stdout(o),
        stderr(o)
    )
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

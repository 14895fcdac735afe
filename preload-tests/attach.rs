//! `heaplive attach PID` / `heaplive detach PID` (issue #15): programs
//! started WITHOUT the preload, attached while they wait, dumped, detached;
//! their output and exit status compared with a run never attached.

use crate::common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

const MIB: u64 = 1024 * 1024;

/// A program started without the library, stopped at its first "ready".
struct Target {
    child: Child,
    out: BufReader<ChildStdout>,
    seen: String,
}

fn plain_command(prog: &Path, args: &[&str], dir: &Path) -> Command {
    let mut c = Command::new(prog);
    c.args(args).current_dir(dir).env_remove("LD_PRELOAD");
    for (k, _) in std::env::vars() {
        if k.starts_with("HEAPLIVE_") {
            c.env_remove(k);
        }
    }
    c
}

impl Target {
    fn start(prog: &Path, args: &[&str], dir: &Path) -> Target {
        let mut child = plain_command(prog, args, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the program");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut t = Target {
            child,
            out,
            seen: String::new(),
        };
        t.expect_line("ready");
        t
    }
    fn pid(&self) -> String {
        self.child.id().to_string()
    }
    fn expect_line(&mut self, want: &str) {
        let mut l = String::new();
        self.out
            .read_line(&mut l)
            .expect("read the program's output");
        assert_eq!(l.trim_end(), want, "program said {l:?}");
        self.seen.push_str(&l);
    }
    /// Lets the program go on to its next step.
    fn step(&mut self, want: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(b"x").expect("write");
        stdin.flush().expect("flush");
        self.expect_line(want);
    }
    /// The last byte; returns (stdout, stderr, exit code).
    fn finish(mut self) -> (String, String, Option<i32>) {
        let mut stdin = self.child.stdin.take().expect("stdin");
        stdin.write_all(b"y").expect("write");
        drop(stdin);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.out, &mut rest).expect("read");
        let o = self.child.wait_with_output().expect("wait");
        (
            self.seen + &rest,
            String::from_utf8_lossy(&o.stderr).into_owned(),
            o.status.code(),
        )
    }
    fn maps(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/maps", self.child.id())).unwrap_or_default()
    }
}

/// The program's stdout and exit code when never attached.
fn plain_run(prog: &Path, args: &[&str], dir: &Path) -> (String, Option<i32>) {
    let mut c = plain_command(prog, args, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    c.stdin
        .take()
        .expect("stdin")
        .write_all(b"xy")
        .expect("write");
    let o = c.wait_with_output().expect("wait");
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        o.status.code(),
    )
}

fn attach(t: &Target, dir: &Path) -> String {
    let template = dir.join("att.%p.%n.folded");
    let o = heaplive(&[
        "attach",
        "--interval",
        "1",
        "--output",
        template.to_str().expect("utf-8"),
        &t.pid(),
    ]);
    assert!(o.status.success(), "attach failed: {}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("attached to process {}", t.pid()))
            && err.contains("was stopped for"),
        "{err}"
    );
    assert!(t.maps().contains("libheaplive.so"), "library not mapped");
    err
}

/// The stacks of a `heaplive dump PID`.
fn dump(t: &Target) -> Vec<Stack> {
    let out = ok(heaplive(&["dump", &t.pid()]));
    parse_folded(Path::new(out.trim()))
}

/// The scenario: 64 MiB at first_site before the attach, 32 MiB at
/// `site` after; half of the first freed after. Exact mode: the dump holds
/// exactly the second site and nothing of the first.
fn scenario(prog: &Path, args: &[&str], site: &str, want: u64, dir: &Path) {
    let (want_out, want_code) = plain_run(prog, args, dir);
    let mut t = Target::start(prog, args, dir);
    attach(&t, dir);
    t.step("allocated");
    let stacks = dump(&t);
    assert_eq!(bytes_under(&stacks, site), want, "{site} in {stacks:?}");
    assert_eq!(bytes_under(&stacks, "first_site"), 0, "{stacks:?}");
    let (out, _err, code) = t.finish();
    assert_eq!(out, want_out);
    assert_eq!(code, want_code);
    assert_eq!(code, Some(7));
}

fn progs() -> std::path::PathBuf {
    use std::sync::OnceLock;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempdir("attach-progs");
        compile("attach_main.c", "attach_main", &d, &[]);
        compile("attach_cxx.cpp", "attach_cxx", &d, &[]);
        compile("attach_dl.c", "attach_dl", &d, &[]);
        compile(
            "attach_dllib.c",
            "libattach_dllib.so",
            &d,
            &["-shared", "-fPIC"],
        );
        d.keep()
    })
    .clone()
}

#[test]
fn attach_c_program_sees_only_allocations_after_attach() {
    let dir = tempdir("attach-c");
    scenario(
        &progs().join("attach_main"),
        &[],
        "second_site",
        32 * MIB,
        &dir,
    );
}

#[test]
fn attach_while_8_threads_allocate() {
    let dir = tempdir("attach-threads");
    scenario(
        &progs().join("attach_main"),
        &["threads"],
        "second_site",
        32 * MIB,
        &dir,
    );
}

#[test]
fn attach_cxx_program() {
    let dir = tempdir("attach-cxx");
    // 32 vectors of 1 MiB, and the 32 vector objects (24 bytes each).
    scenario(
        &progs().join("attach_cxx"),
        &[],
        "second_site",
        32 * MIB + 32 * 24,
        &dir,
    );
}

#[test]
fn attach_then_dlopen_library_is_seen() {
    let dir = tempdir("attach-dl");
    let lib = progs().join("libattach_dllib.so");
    scenario(
        &progs().join("attach_dl"),
        &[lib.to_str().expect("utf-8")],
        "lib_site",
        32 * MIB,
        &dir,
    );
}

#[test]
fn detach_restores_and_program_runs_on() {
    let dir = tempdir("attach-detach");
    let prog = progs().join("attach_main");
    let (want_out, want_code) = plain_run(&prog, &[], &dir);
    let mut t = Target::start(&prog, &[], &dir);
    attach(&t, &dir);
    let o = heaplive(&["detach", &t.pid()]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(stderr(&o).contains("slots restored"), "{}", show(&o));
    t.step("allocated");
    // Sampling stopped: a dump request is not answered any more...
    let o = heaplive(&["dump", "--timeout", "1", &t.pid()]);
    assert!(!o.status.success(), "dump after detach: {}", show(&o));
    let (out, err, code) = t.finish();
    assert_eq!(out, want_out);
    assert_eq!(code, want_code);
    // ...and no exit dump either: nothing was written at all.
    assert!(
        folded_files(&dir).is_empty(),
        "{:?}\n{err}",
        folded_files(&dir)
    );
    // Detach twice: refused.
}

#[test]
fn attach_twice_is_refused() {
    let dir = tempdir("attach-twice");
    let mut t = Target::start(&progs().join("attach_main"), &[], &dir);
    attach(&t, &dir);
    let o = heaplive(&["attach", &t.pid()]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let first = stderr(&o).lines().next().unwrap_or("").to_string();
    assert!(
        first.starts_with(&format!("heaplive: process {} already has ", t.pid()))
            && first.contains("libheaplive.so loaded"),
        "{first}"
    );
    t.step("allocated");
    let (_, _, code) = t.finish();
    assert_eq!(code, Some(7));
}

#[test]
fn attach_to_another_users_process_is_refused() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("not root: cannot create the second user; skipped");
        return;
    }
    let user = "heaplive-attach";
    if !Command::new("id")
        .arg(user)
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let o = Command::new("useradd")
            .args(["--system", "--no-create-home", user])
            .output()
            .expect("useradd");
        assert!(o.status.success(), "useradd: {}", show(&o));
    }
    let dir = tempdir("attach-user");
    // The command where the second user can run it.
    let bin = dir.join("heaplive");
    std::fs::copy(heaplive_bin(), &bin).expect("copy heaplive");
    std::fs::copy(lib(), dir.join("libheaplive.so")).expect("copy lib");
    let prog = progs().join("attach_main");
    let (want_out, _) = plain_run(&prog, &[], &dir);
    let mut t = Target::start(&prog, &[], &dir);
    let o = Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(&bin)
        .args(["attach", &t.pid()])
        .stdin(Stdio::null())
        .output()
        .expect("runuser");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let first = stderr(&o).lines().next().unwrap_or("").to_string();
    assert!(
        first.starts_with(&format!(
            "heaplive: process {} belongs to user 0 and I run as user ",
            t.pid()
        )) && first.contains("without CAP_SYS_PTRACE"),
        "{first}"
    );
    assert!(!t.maps().contains("libheaplive"), "target touched");
    t.step("allocated");
    let (out, _, code) = t.finish();
    assert_eq!(out, want_out);
    assert_eq!(code, Some(7));
}

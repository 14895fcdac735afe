//! `heaplive attach PID` / `heaplive detach PID` (issue #15): programs
//! started WITHOUT the preload, attached while they wait, dumped, detached;
//! their output and exit status compared with a run never attached.

use crate::common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const MIB: u64 = 1024 * 1024;

/// A program started without the library, stopped at its first "ready"
/// (killed on drop: `common::Running`).
struct Target {
    p: Running,
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
        Target::start_env(prog, args, dir, &[])
    }
    fn start_env(prog: &Path, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Target {
        Target::of(
            plain_command(prog, args, dir)
                .envs(env.iter().copied())
                .stderr(Stdio::piped()),
        )
    }
    /// Starts `c` (stdin and stdout piped here) and waits for "ready".
    fn of(c: &mut Command) -> Target {
        let mut t = Target {
            p: Running::spawn(c.stdin(Stdio::piped()).stdout(Stdio::piped())),
        };
        t.expect_line("ready");
        t
    }
    fn pid(&self) -> String {
        self.p.pid().to_string()
    }
    fn expect_line(&mut self, want: &str) {
        let l = self.p.line();
        assert_eq!(l.as_deref(), Some(want), "program said {l:?}");
    }
    /// Lets the program go on to its next step.
    fn step(&mut self, want: &str) {
        let stdin = self.p.child().stdin.as_mut().expect("stdin");
        stdin.write_all(b"x").expect("write");
        stdin.flush().expect("flush");
        self.expect_line(want);
    }
    /// The last byte; returns (stdout, stderr, exit code).
    fn finish(mut self) -> (String, String, Option<i32>) {
        let mut stdin = self.p.child().stdin.take().expect("stdin");
        stdin.write_all(b"y").expect("write");
        drop(stdin);
        let o = self.p.wait();
        (stdout(&o), stderr(&o), o.status.code())
    }
    fn maps(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/maps", self.p.pid())).unwrap_or_default()
    }
}

/// Runs `c` to its end with "xy" on stdin (every step at once): its stdout
/// and exit code.
fn run_through(c: &mut Command) -> (String, Option<i32>) {
    let mut r = Running::spawn(c.stdin(Stdio::piped()).stdout(Stdio::piped()));
    r.child()
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"xy")
        .expect("write");
    let o = r.wait();
    (stdout(&o), o.status.code())
}

/// A fresh directory ([`tempdir`] `tag`), the test program `name` run
/// there without heaplive ([`plain_run`]), then started for attaching
/// ([`Target::start`]), both with no arguments: the directory, the plain
/// run's output and status, the target.
fn started(tag: &str, name: &str) -> (TempDir, (String, Option<i32>), Target) {
    let dir = tempdir(tag);
    let prog = progs().join(name);
    let plain = plain_run(&prog, &[], &dir);
    let t = Target::start(&prog, &[], &dir);
    (dir, plain, t)
}

/// The program's stdout and exit code when never attached.
fn plain_run(prog: &Path, args: &[&str], dir: &Path) -> (String, Option<i32>) {
    plain_run_env(prog, args, dir, &[])
}

fn plain_run_env(
    prog: &Path,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
) -> (String, Option<i32>) {
    run_through(
        plain_command(prog, args, dir)
            .envs(env.iter().copied())
            .stderr(Stdio::null()),
    )
}

fn attach(t: &Target, dir: &Path) -> String {
    attach_with(t, dir, &["--interval", "1"])
}

/// `heaplive attach` with `opts` (an interval, or none for the default).
fn attach_with(t: &Target, dir: &Path, opts: &[&str]) -> String {
    let template = dir.join("att.%p.%n.folded");
    let mut args = vec!["attach"];
    args.extend_from_slice(opts);
    args.extend_from_slice(&["--output", template.to_str().expect("utf-8")]);
    let pid = t.pid();
    args.push(&pid);
    let o = heaplive(&args);
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

/// `scenario_in` for the program `prog` of `progs()`, in a new directory.
fn scenario(tag: &str, prog: &str, args: &[&str], site: &str, want: u64) {
    scenario_in(&progs().join(prog), args, site, want, &tempdir(tag));
}

/// The scenario: 64 MiB at first_site before the attach, 32 MiB at
/// `site` after; half of the first freed after. Exact mode: the dump holds
/// exactly the second site and nothing of the first.
fn scenario_in(prog: &Path, args: &[&str], site: &str, want: u64, dir: &Path) {
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
        compile("attach_main.c", "attach_static", &d, &["-static"]);
        compile_so("attach_dllib.c", "libattach_dllib.so", &d);
        d.keep()
    })
    .clone()
}

#[test]
fn attach_c_program_sees_only_allocations_after_attach() {
    scenario("attach-c", "attach_main", &[], "second_site", 32 * MIB);
}

#[test]
fn attach_while_8_threads_allocate() {
    scenario(
        "attach-threads",
        "attach_main",
        &["threads"],
        "second_site",
        32 * MIB,
    );
}

#[test]
fn attach_cxx_program() {
    // 32 vectors of 1 MiB, and the 32 vector objects (24 bytes each).
    scenario(
        "attach-cxx",
        "attach_cxx",
        &[],
        "second_site",
        32 * MIB + 32 * 24,
    );
}

#[test]
fn attach_then_dlopen_library_is_seen() {
    let lib = progs().join("libattach_dllib.so");
    scenario(
        "attach-dl",
        "attach_dl",
        &[lib.to_str().expect("utf-8")],
        "lib_site",
        32 * MIB,
    );
}

#[test]
fn detach_restores_and_program_runs_on() {
    let (dir, (want_out, want_code), mut t) = started("attach-detach", "attach_main");
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

/// A target whose RLIMIT_AS or RLIMIT_DATA is a little above what it uses:
/// heaplive's library and tables would take what its own allocations need
/// next. Refused in one line before anything is touched; the program runs
/// on as if never attached (its limit lifted again for its next 32 MiB).
#[test]
fn attach_at_a_memory_limit_is_refused_and_the_target_untouched() {
    let prog = progs().join("attach_main");
    for (resource, name, field) in [
        (libc::RLIMIT_AS, "RLIMIT_AS", "VmSize:"),
        (libc::RLIMIT_DATA, "RLIMIT_DATA", "VmData:"),
    ] {
        let dir = tempdir("attach-memlimit");
        let (want_out, _) = plain_run(&prog, &[], &dir);
        let mut t = Target::start(&prog, &[], &dir);
        let pid = t.p.pid() as libc::pid_t;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let used: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a size in kB");
        let set = |cur: u64| {
            let l = libc::rlimit {
                rlim_cur: cur,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: a valid rlimit for a child of ours.
            let r = unsafe { libc::prlimit(pid, resource, &l, std::ptr::null_mut()) };
            assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
        };
        set((used << 10) + (4 << 20));
        let before = t.maps();
        let o = heaplive(&["attach", &t.pid()]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", show(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{name}: one line\n{err}");
        assert!(
            err.starts_with(&format!(
                "heaplive: process {pid} is near its memory limit ({name} "
            )) && err.contains("not attached"),
            "{err}"
        );
        assert_eq!(t.maps(), before, "{name}: the target was touched");
        set(libc::RLIM_INFINITY);
        t.step("allocated");
        let (out, _, code) = t.finish();
        assert_eq!((out, code), (want_out, Some(7)), "{name}");
    }
}

/// A system user that is not root, created if missing (root only).
fn second_user() -> &'static str {
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
        // Another test may have created it meanwhile.
        let exists = Command::new("id")
            .arg(user)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(o.status.success() || exists, "useradd: {}", show(&o));
    }
    user
}

/// Copies the command and the library into `dir` (where the second user
/// can run them); the command's path.
fn command_in(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("heaplive");
    std::fs::copy(heaplive_bin(), &bin).expect("copy heaplive");
    std::fs::copy(lib(), dir.join("libheaplive.so")).expect("copy lib");
    bin
}

#[test]
fn attach_to_another_users_process_is_refused() {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("not root: cannot create the second user; skipped");
        return;
    }
    let user = second_user();
    let dir = tempdir("attach-user");
    // The command where the second user can run it.
    let bin = command_in(&dir);
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

fn am_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A refused attach: status 1, the first line as wanted, nothing loaded;
/// then the program runs to its end with the output and status of a run
/// never attached.
fn assert_refused(
    o: &std::process::Output,
    mut t: Target,
    want: &[&str],
    plain: (String, Option<i32>),
) {
    assert_eq!(o.status.code(), Some(1), "{}", show(o));
    let first = stderr(o).lines().next().unwrap_or("").to_string();
    assert!(first.starts_with("heaplive: "), "{first}");
    for w in want {
        assert!(first.contains(w), "want {w:?} in: {first}");
    }
    assert!(!t.maps().contains("libheaplive"), "target touched");
    t.step("allocated");
    let (out, _, code) = t.finish();
    assert_eq!((out, code), plain);
}

/// (SigBlk, SigIgn, SigCgt) of the process (its main thread), without
/// glibc's internal signals 32 and 33 (SIGCANCEL, SIGSETXID): the first
/// pthread_create of a process (here heaplive's thread, at the attach)
/// makes glibc take SIGSETXID for good, as the program's own first thread
/// would; it must stay (a later setuid() signals every thread with it) and
/// the program cannot see it (sigaction refuses both numbers).
fn sig_masks(pid: &str) -> (u64, u64, u64) {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let f = |k: &str| {
        st.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .expect("a signal mask")
            & !(3 << 31)
    };
    (f("SigBlk:"), f("SigIgn:"), f("SigCgt:"))
}

fn tasks(pid: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task dir")
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    v.sort();
    v
}

/// Polls until `f` holds (20 s at most, then fails with `what`).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    wait_until(20, what, || f().then_some(()));
}

fn usr2_bit(mask: u64) -> bool {
    mask & (1 << (libc::SIGUSR2 - 1)) != 0
}

#[test]
fn detach_ends_the_thread_and_gives_the_signal_back() {
    // Two programs: one with no SIGUSR2 handler (its action comes back to
    // the default), one with its own handler and SIGUSR1 blocked (its
    // handler comes back, and keeps getting the signal).
    let prog = progs().join("attach_main");
    for mode in ["plain", "handler"] {
        let dir = tempdir("attach-detach-signal");
        let args: &[&str] = if mode == "handler" { &["handler"] } else { &[] };
        let (want_out, want_code) = plain_run(&prog, args, &dir);
        let mut t = Target::start(&prog, args, &dir);
        let pid = t.pid();
        let (tasks0, masks0) = (tasks(&pid), sig_masks(&pid));
        assert_eq!(usr2_bit(masks0.2), mode == "handler", "{mode}: {masks0:?}");
        let usr1_blocked = masks0.0 & (1 << (libc::SIGUSR1 - 1)) != 0;
        assert_eq!(usr1_blocked, mode == "handler", "{mode}: {masks0:?}");
        attach(&t, &dir);
        // heaplive's thread, and its handler for the dump signal.
        let tasks1 = tasks(&pid);
        assert_eq!(
            tasks1.len(),
            tasks0.len() + 1,
            "{mode}: {tasks0:?} -> {tasks1:?}"
        );
        assert!(usr2_bit(sig_masks(&pid).2), "{mode}: {:?}", sig_masks(&pid));
        // A dump through the signal while attached (the program's own
        // handler runs too).
        let stacks = dump(&t);
        assert_eq!(bytes_under(&stacks, "first_site"), 0, "{mode}");
        let o = heaplive(&["detach", &pid]);
        assert!(o.status.success(), "{}", show(&o));
        until("heaplive's thread to end", || tasks(&pid) == tasks0);
        assert_eq!(sig_masks(&pid), masks0, "{mode}: masks after detach");
        let mut want_out = want_out;
        if mode == "handler" {
            // After detach the signal is the program's alone: counted, no
            // dump.
            let files = folded_files(&dir).len();
            t.p.signal(libc::SIGUSR2);
            t.step("allocated");
            let (out, _err, code) = t.finish();
            want_out = want_out.replace("usr2 0", "usr2 2");
            assert_eq!((out, code), (want_out, want_code), "{mode}");
            assert_eq!(folded_files(&dir).len(), files, "a dump after detach");
        } else {
            t.step("allocated");
            let (out, _err, code) = t.finish();
            assert_eq!((out, code), (want_out, want_code), "{mode}");
        }
    }
}

#[test]
fn detach_twice_is_refused() {
    let (dir, plain, t) = started("attach-detach-twice", "attach_main");
    attach(&t, &dir);
    ok(heaplive(&["detach", &t.pid()]));
    let o = heaplive(&["detach", &t.pid()]);
    let pid = t.pid();
    // The library stays mapped after a detach: the target's maps are not
    // what is compared here, its output and status are.
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let first = stderr(&o).lines().next().unwrap_or("").to_string();
    assert_eq!(
        first,
        format!(
            "heaplive: process {pid} was not attached by 'heaplive attach' (started under the preload, or detached already): nothing to detach"
        )
    );
    let mut t = t;
    t.step("allocated");
    let (out, _, code) = t.finish();
    assert_eq!((out, code), plain);
}

#[test]
fn attach_to_a_traced_process_is_refused() {
    let (_dir, plain, t) = started("attach-traced", "attach_main");
    let pid = t.pid();
    let strace = Running::spawn(
        Command::new("strace")
            .args(["-q", "-o", "/dev/null", "-p", &pid])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let tracer = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:").map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    until("strace to attach", || {
        tracer(&pid) == strace.pid().to_string()
    });
    let o = heaplive(&["attach", &pid]);
    // strace lets go (SIGINT: it detaches and exits) before the program
    // goes on.
    let strace_pid = strace.pid();
    strace.signal(libc::SIGINT);
    let _ = strace.wait();
    until("strace to detach", || tracer(&pid) == "0");
    assert_refused(
        &o,
        t,
        &[
            &format!("process {pid} is already traced by process {strace_pid}"),
            "detach that first",
        ],
        plain,
    );
}

#[test]
fn attach_without_ptrace_permission_is_refused() {
    if !am_root() {
        eprintln!("not root: cannot drop CAP_SYS_PTRACE from a root process; skipped");
        return;
    }
    let prog = progs().join("attach_main");
    // Root without CAP_SYS_PTRACE, the target root with every capability:
    // the kernel's own ptrace check says no (cap_ptrace_access_check),
    // whatever kernel.yama.ptrace_scope says.
    let dir = tempdir("attach-nocap");
    let plain = plain_run(&prog, &[], &dir);
    let t = Target::start(&prog, &[], &dir);
    let o = Command::new("setpriv")
        .args([
            "--bounding-set",
            "-sys_ptrace",
            "--inh-caps",
            "-sys_ptrace",
            "--",
        ])
        .arg(heaplive_bin())
        .args(["attach", &t.pid()])
        .stdin(Stdio::null())
        .output()
        .expect("setpriv");
    let pid = t.pid();
    assert_refused(
        &o,
        t,
        &[
            &format!("the kernel does not let me trace process {pid}"),
            "CAP_SYS_PTRACE",
        ],
        plain,
    );

    // kernel.yama.ptrace_scope: a user attaching to its own process that
    // is not its child. Only when Yama is there and forbids it: the
    // setting is machine-wide, a test does not change it.
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let Some(scope @ 1..) = scope else {
        eprintln!(
            "kernel.yama.ptrace_scope is {scope:?} here (no Yama, or 0): the scope refusal is not testable without changing a machine-wide setting; skipped"
        );
        return;
    };
    let user = second_user();
    let dir = tempdir("attach-yama");
    let bin = command_in(&dir);
    let p = dir.join("attach_main");
    std::fs::copy(&prog, &p).expect("copy the program");
    let runuser = |prog: &Path| {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--"]).arg(prog);
        c
    };
    let plain = run_through(&mut runuser(&p));
    let t = Target::of(&mut runuser(&p));
    // runuser's child is the program (runuser waits for it).
    let target = crate::php_harness::children_of(t.p.pid())
        .first()
        .copied()
        .unwrap_or(t.p.pid());
    let o = runuser(&bin)
        .args(["attach", &target.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("runuser heaplive");
    let want = format!("kernel.yama.ptrace_scope={scope}");
    assert_refused(&o, t, &[&want], plain);
}

#[test]
fn attach_to_a_static_program_is_refused() {
    let (_dir, plain, t) = started("attach-static", "attach_static");
    let pid = t.pid();
    let o = heaplive(&["attach", &pid]);
    assert_refused(
        &o,
        t,
        &[&format!(
            "process {pid} has no glibc libc.so.6 mapped (statically linked"
        )],
        plain,
    );
}

#[test]
fn attach_to_a_jemalloc_program_is_refused() {
    let jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
    assert!(
        Path::new(jemalloc).exists(),
        "{jemalloc} is missing: scripts/install-test-deps.sh installs libjemalloc2"
    );
    let dir = tempdir("attach-jemalloc");
    let prog = progs().join("attach_main");
    let env = [("LD_PRELOAD", jemalloc)];
    let plain = plain_run_env(&prog, &[], &dir, &env);
    let t = Target::start_env(&prog, &[], &dir, &env);
    let pid = t.pid();
    let o = heaplive(&["attach", &pid]);
    assert_refused(
        &o,
        t,
        &[
            &format!("process {pid} uses its own allocator ({jemalloc} is mapped"),
            &format!("/proc/{pid}/maps"),
        ],
        plain,
    );
}

/// P(K < k) for K ~ Binomial(n, p).
fn binomial_below(n: u32, p: f64, k: u32) -> f64 {
    let mut c = 1.0f64; // C(n, i)
    let mut sum = 0.0;
    for i in 0..k {
        sum += c * p.powi(i as i32) * (1.0 - p).powi((n - i) as i32);
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    sum
}

#[test]
fn attach_sampled_mode_within_the_bound() {
    // The C scenario at the default interval R: each of the 32 blocks of
    // s = 1 MiB at second_site is sampled independently (disjoint spans of
    // a Poisson process over the bytes) with p = 1 - exp(-s/R) and then
    // weighs w = s/p, so the dump shows K*w for K ~ Binomial(32, p), p =
    // 0.8647 at R = 512 KiB. The test fails when K < k_lo, k_lo the largest
    // k with P(K < k) < 1e-6 (17: P(K < 17) = 8.7e-7), so its false-failure
    // rate is 8.7e-7 per run. K is at most 32 (37.0 MiB, the estimate's
    // ceiling); an estimate that is not a whole number of weights means the
    // wrong interval or weight (exact mode would show 32 MiB = 26.4 w).
    // first_site shows nothing, sampled or not.
    assert_eq!(heaplive_format::settings::SAMPLE_INTERVAL.default, "512K");
    let r = 512.0 * 1024.0;
    let s = MIB as f64;
    let p = 1.0 - (-s / r).exp();
    let w = s / p;
    let mut k_lo = 0;
    while binomial_below(32, p, k_lo + 1) < 1e-6 {
        k_lo += 1;
    }
    assert_eq!(k_lo, 17);
    assert!(binomial_below(32, p, k_lo) < 1e-6);
    let (dir, (want_out, want_code), mut t) = started("attach-sampled", "attach_main");
    attach_with(&t, &dir, &[]);
    t.step("allocated");
    let stacks = dump(&t);
    let est = bytes_under(&stacks, "second_site") as f64;
    let k = (est / w).round();
    assert!(
        (est - k * w).abs() <= 64.0,
        "{est} bytes is not a whole number of samples of weight {w}"
    );
    assert!(
        k >= k_lo as f64 && k <= 32.0,
        "{k} samples of 32 (at least {k_lo}): {est} bytes, truth {}",
        32 * MIB
    );
    assert_eq!(bytes_under(&stacks, "first_site"), 0, "{stacks:?}");
    let (out, _err, code) = t.finish();
    assert_eq!((out, code), (want_out, want_code));
}

#[test]
fn attach_children_of_php_fpm() {
    use crate::php_harness::*;
    let dir = tempdir("attach-fpm");
    // Started without the preload; USE_ZEND_ALLOC=0 makes PHP's allocations
    // plain mallocs.
    let mut fpm = Fpm::start_opts(
        &dir,
        false,
        &[],
        &FpmOpts {
            preload: false,
            ..FpmOpts::default()
        },
    );
    let ctx = fpm.ctx();
    let master = fpm.pid();
    let workers = children_of(master);
    assert_eq!(workers.len(), 2, "{}", ctx());
    for w in &workers {
        let maps = std::fs::read_to_string(format!("/proc/{w}/maps")).unwrap_or_default();
        assert!(
            !maps.contains("libheaplive"),
            "worker {w} has the library already"
        );
    }
    let template = dir.join("att.%p.%n.folded");
    let o = heaplive(&[
        "attach",
        "--children",
        "--interval",
        "1",
        "--output",
        template.to_str().expect("utf-8"),
        &master.to_string(),
    ]);
    assert!(o.status.success(), "{}\n{}", show(&o), ctx());
    let err = stderr(&o);
    for w in &workers {
        assert!(err.contains(&format!("attached to process {w}:")), "{err}");
    }
    assert!(
        err.contains(&format!(
            "children that process {master} forks from now on are not attached"
        )),
        "{err}"
    );
    let mmaps = std::fs::read_to_string(format!("/proc/{master}/maps")).unwrap_or_default();
    assert!(!mmaps.contains("libheaplive"), "the master was attached");

    // A request holding a 48 MiB string in an array, in one of the workers.
    let (req, busy) = hold_request(
        &fpm,
        "big.php",
        "$a = [str_repeat('x', 48 << 20)];",
        "echo 'done ', strlen($a[0]), \"\\n\";",
        &workers,
    );
    let idle = *workers.iter().find(|&&w| w != busy).expect("idle worker");
    let path = ok(heaplive(&["dump", &busy.to_string()]));
    let stacks = parse_folded(Path::new(path.trim()));
    let eb = engine_bytes(&stacks);
    assert!(
        eb >= 48 * MIB,
        "the busy worker's dump must hold the 48 MiB string under the engine's frames: {eb} bytes\n{}",
        top_stacks(&stacks, 10)
    );
    let path = ok(heaplive(&["dump", &idle.to_string()]));
    let idle_stacks = parse_folded(Path::new(path.trim()));
    assert!(
        total(&idle_stacks) < 8 * MIB,
        "the idle worker: {} bytes\n{}",
        total(&idle_stacks),
        top_stacks(&idle_stacks, 10)
    );
    release_expecting(&fpm, req, "the request", &format!("done {}", 48 << 20));
    assert_eq!(children_of(master), workers, "a worker died\n{}", ctx());
    let st = fpm.quit();
    assert!(st.success(), "{st}\n{}", ctx());
}

//! The one harness of the preload tests: where the built library and
//! command are, a temp directory, compiling a test program, running it under
//! the library, running the command, reading folded files (with the contract
//! crate's parser), a started program's handle that is killed on drop
//! ([`Running`]: `ready()`, `signal()`, `wait_files(n)`), and the one wait
//! ([`wait_until`]). PHP's helpers (php-cli, php-fpm, FastCGI) are
//! `php_harness/`, built on these.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory cargo built this test into (`target/release`, or the
/// same under `CARGO_TARGET_DIR`): the test runs from its `deps/`.
pub fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("the test binary's directory");
    match deps.file_name() {
        Some(n) if n == "deps" => deps.parent().unwrap_or(deps).to_path_buf(),
        _ => deps.to_path_buf(),
    }
}

fn built(name: &str) -> PathBuf {
    let p = build_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `make` (cargo build --release --workspace) or `make test` first",
        p.display()
    );
    p
}

/// The library under test. `make test` builds it; a clear failure if not.
/// On a thread inside [`with_lib`], that library instead.
pub fn lib() -> PathBuf {
    LIB.with(|l| l.borrow().clone())
        .unwrap_or_else(|| built("libheaplive.so"))
}

thread_local! {
    /// The library `lib()` gives on this thread (`with_lib`); None: the
    /// one `make` built.
    static LIB: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` (a test's body) with `lib()` giving `lib` on this thread: the
/// witness tests run real tests against the `lock-witness` build
/// (`witness.rs`). Each test runs on a thread of its own.
pub fn with_lib<R>(lib: PathBuf, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<PathBuf>);
    impl Drop for Restore {
        fn drop(&mut self) {
            LIB.with(|l| *l.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(LIB.with(|l| l.borrow_mut().replace(lib)));
    f()
}

/// The `heaplive` command (package heaplive-cli, built with the workspace).
pub fn heaplive_bin() -> PathBuf {
    built("heaplive")
}

/// A fresh, empty directory for one test's files, removed when dropped
/// (kept when the test fails, for a look at what it left).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// Keeps the directory for the rest of the run (programs compiled once
    /// and shared by several tests); returns its path.
    pub fn keep(self) -> PathBuf {
        let this = std::mem::ManuallyDrop::new(self);
        this.0.clone()
    }
    /// Writes `name` in the directory; returns its path as a string.
    pub fn file(&self, name: &str, content: &[u8]) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, content).expect("write test file");
        path.to_str().expect("utf-8 temp path").to_string()
    }
}

impl Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for TempDir {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A fresh directory ([`tempdir`] `tag`) holding the file `name` with
/// `content`: the directory and the file's path ([`TempDir::file`]).
pub fn tempdir_with(tag: &str, name: &str, content: &[u8]) -> (TempDir, String) {
    let dir = tempdir(tag);
    let path = dir.file(name, content);
    (dir, path)
}

pub fn tempdir(tag: &str) -> TempDir {
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
    TempDir(d)
}

/// Writes `content` to the file `name` in `dir`; returns its path.
pub fn write_file(dir: &Path, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).expect("write test file");
    p
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
    output_ok(
        Command::new(cc)
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
            .args(["-lpthread", "-ldl"]),
        &format!("{cc} {src}"),
    );
    out
}

/// Compiles `progs/NAME.c` (or `progs/NAME.EXT`, given so) into `dir` as
/// `NAME` and runs it there under the library with `args` and `env`;
/// asserts it succeeded.
pub fn run_prog(dir: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let (src, name) = match name.rsplit_once('.') {
        Some((stem, _)) => (name.to_string(), stem),
        None => (format!("{name}.c"), name),
    };
    let prog = compile(&src, name, dir, &[]);
    let o = run_preloaded(dir, &prog, args, env);
    assert!(
        o.status.success(),
        "{name} {args:?} under the library failed\n{}",
        show(&o)
    );
    o
}

/// A fresh directory ([`tempdir`] `tag`) with `progs/SRC` compiled in it
/// (as [`compile`], no extra flags) under SRC's stem: the directory and
/// the binary.
pub fn compiled(tag: &str, src: &str) -> (TempDir, PathBuf) {
    compiled_with(tag, src, &[])
}

/// [`compiled`] with `extra` flags.
pub fn compiled_with(tag: &str, src: &str, extra: &[&str]) -> (TempDir, PathBuf) {
    let dir = tempdir(tag);
    let name = src.rsplit_once('.').map_or(src, |(stem, _)| stem);
    let bin = compile(src, name, &dir, extra);
    (dir, bin)
}

/// [`run_prog`] in a fresh directory ([`tempdir`] `tag`): the directory
/// and the run.
pub fn run_prog_in(
    tag: &str,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (TempDir, Output) {
    let dir = tempdir(tag);
    let o = run_prog(&dir, name, args, env);
    (dir, o)
}

/// `deep_main dlclose LIB` ([`run_prog`]) in exact mode, with `more`
/// settings, in a fresh directory ([`tempdir`] `tag`) where
/// `progs/deep_lib.c` is built as LIB, `so`: the directory and the run.
pub fn deep_main_dlclose(tag: &str, so: &str, more: &[(&str, &str)]) -> (TempDir, Output) {
    let dir = tempdir(tag);
    let lib = compile_so("deep_lib.c", so, &dir);
    let lib = lib.to_str().expect("utf-8 temp path");
    let env = [&[("HEAPLIVE_SAMPLE_INTERVAL", "1")], more].concat();
    let o = run_prog(&dir, "deep_main", &["dlclose", lib], &env);
    (dir, o)
}

/// `compile` of a shared object (`-shared -fPIC`).
pub fn compile_so(src: &str, out_name: &str, dir: &Path) -> PathBuf {
    compile(src, out_name, dir, &["-shared", "-fPIC"])
}

/// Compiles `progs/SRC` into `dir` (named as [`run_prog`] names it) and
/// runs it there without the library; asserts that run succeeded. Returns
/// the binary and the run.
pub fn compile_and_run_plain(dir: &Path, src: &str) -> (PathBuf, Output) {
    let name = src.rsplit_once('.').map_or(src, |(stem, _)| stem);
    let bin = compile(src, name, dir, &[]);
    let plain = run_plain(dir, &bin, &[]);
    assert!(
        plain.status.success(),
        "{name} fails without the preload:\n{}",
        show(&plain)
    );
    (bin, plain)
}

/// Prints `report` (a test's table of what it measured) on stderr, then
/// asserts that `failures` is empty; the message: the failures joined by
/// `join`, `heading`, the report.
pub fn assert_no_failures(failures: &[String], join: &str, heading: &str, report: &[String]) {
    eprintln!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "{}{heading}{}",
        failures.join(join),
        report.join("\n")
    );
}

/// Runs `c` and asserts it succeeded (the panic names `what` and shows
/// its status and both outputs); returns its output.
pub fn output_ok(c: &mut Command, what: &str) -> Output {
    let o = c.output().unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(o.status.success(), "{what} failed:\n{}", show(&o));
    o
}

/// Asserts that the file `path` is well-formed XML (python3's parser).
pub fn assert_well_formed_xml(path: &Path) {
    let o = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])",
        ])
        .arg(path)
        .output()
        .expect("python3 for the XML check");
    assert!(
        o.status.success(),
        "SVG is not well-formed XML: {}",
        stderr(&o)
    );
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
        .filter(|p| view_of(p).is_none())
        .collect();
    v.sort();
    v
}

/// The names of the files in `dir` that contain `needle` (temporaries
/// left: `.tmp.`).
pub fn names_containing(dir: &Path, needle: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(needle))
        .collect()
}

/// The view of a folded file other than the live one (`x.alloc.folded`:
/// `alloc`), or None.
pub fn view_of(p: &Path) -> Option<&'static str> {
    let name = p.file_name()?.to_str()?;
    ["alloc", "peak", "samples", "variance", "temporary"]
        .into_iter()
        .find(|v| name.ends_with(&format!(".{v}.folded")))
}

/// The files of one view (`alloc`, `peak`, `samples`) in `dir`, sorted.
pub fn view_files(dir: &Path, view: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| view_of(p) == Some(view))
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

/// Parses a folded file with the contract crate's strict parser (an empty
/// file, a dump with nothing live, gives no stacks).
pub fn parse_folded(path: &Path) -> Vec<Stack> {
    let bytes = std::fs::read(path).unwrap();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Vec::new();
    }
    let name = path.display().to_string();
    let parsed = heaplive_format::folded::parse(&name, &bytes).unwrap_or_else(|e| panic!("{e}"));
    parsed
        .stacks
        .into_iter()
        .map(|(stack, bytes)| Stack {
            frames: heaplive_format::folded::frames(&stack)
                .map(String::from)
                .collect(),
            bytes,
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

/// What `line` has after its first `start`, up to the next `start` or
/// `end` (a figure in a heaplive line: `between(l, " at ", " s after")`).
pub fn between<'a>(line: &'a str, start: &str, end: &str) -> Option<&'a str> {
    line.split(start).nth(1)?.split(end).next()
}

/// The pid of the first `heaplive[PID]: ...` line of `text`.
pub fn heaplive_pid(text: &str) -> Option<u32> {
    text.lines()
        .filter_map(|l| l.strip_prefix("heaplive["))
        .find_map(|r| r.split(']').next()?.parse().ok())
}

/// The lines of `text` that contain `needle`.
pub fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

/// The one line of `text` that contains `needle`; panics with `msg` unless
/// exactly one does.
pub fn one_line_with<'a>(text: &'a str, needle: &str, msg: &str) -> &'a str {
    let lines = lines_with(text, needle);
    assert_eq!(lines.len(), 1, "{msg}");
    lines[0]
}

/// The first line of `text` that contains `needle`.
pub fn line_with<'a>(text: &'a str, needle: &str) -> Option<&'a str> {
    text.lines().find(|l| l.contains(needle))
}

/// The first line of `text` that contains `needle`; panics with `msg` if
/// none does.
pub fn first_line_with<'a>(text: &'a str, needle: &str, msg: &str) -> &'a str {
    line_with(text, needle).unwrap_or_else(|| panic!("{msg}"))
}

/// The file a heaplive line `heaplive[PID]: KIND dump PATH: ...` names
/// (KIND: signal, exit, memory_limit, request peak, ...), if it is one.
pub fn dump_path_of(line: &str, kind: &str) -> Option<PathBuf> {
    let (_, rest) = line.split_once(&format!("]: {kind} dump "))?;
    rest.split_once(": ").map(|(p, _)| PathBuf::from(p))
}

/// The file of the first KIND dump line of `log` (see [`dump_path_of`]).
pub fn first_dump_path(log: &str, kind: &str) -> Option<PathBuf> {
    log.lines().find_map(|l| dump_path_of(l, kind))
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

/// Runs the `heaplive` command with no preload and no inherited output
/// template, stdin closed.
pub fn heaplive(args: &[&str]) -> Output {
    heaplive_command(args).output().expect("run heaplive")
}

/// The `heaplive` command, ready to run, as `heaplive` runs it.
pub fn heaplive_command(args: &[&str]) -> Command {
    let mut c = Command::new(heaplive_bin());
    c.args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("HEAPLIVE_OUTPUT")
        .stdin(Stdio::null());
    c
}

/// `heaplive run --interval 1 -o TEMPLATE MORE... -- CMD...` in `dir`
/// with `env`, asserted to succeed: its output.
pub fn heaplive_run_exact(
    dir: &Path,
    template: &Path,
    more: &[&str],
    cmd: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let template = template.to_str().expect("utf-8 temp path");
    let head = ["run", "--interval", "1", "-o", template];
    let o = heaplive_command(&[&head[..], more, &["--"], cmd].concat())
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .expect("run heaplive");
    assert!(o.status.success(), "{}", show(&o));
    o
}

/// `heaplive top --bytes -w 0 ARGS FILE` (exact bytes, untruncated names),
/// asserting success: its output.
pub fn top_exact(args: &[&str], file: &Path) -> String {
    let file = file.to_str().expect("utf-8 path");
    ok(heaplive(
        &[&["top", "--bytes", "-w", "0"], args, &[file]].concat(),
    ))
}

/// Asserts success and returns stdout.
pub fn ok(o: Output) -> String {
    assert!(o.status.success(), "heaplive failed: {}", show(&o));
    stdout(&o)
}

/// Asserts that `o` exited with status `code` (the message: `msg`).
pub fn assert_status(o: &Output, code: i32, msg: &str) {
    assert_eq!(o.status.code(), Some(code), "{msg}");
}

/// Asserts exit status `code` and that stderr's first line is `want`.
pub fn fails_with(o: Output, code: i32, want: &str) {
    assert_eq!(o.status.code(), Some(code), "status; {}", show(&o));
    let err = stderr(&o);
    let first = err.lines().next().unwrap_or("");
    assert_eq!(first, want, "first line of stderr:\n{err}");
    assert!(!err.contains("panicked"), "heaplive panicked:\n{err}");
}

/// Polls `what` every 10 ms until it gives `Some`, and returns that; panics
/// naming `why` after `secs` seconds. The one wait of the preload tests
/// (no blind sleeps: a test waits for what it needs, however slow the
/// machine).
pub fn wait_until<T>(secs: u64, why: &str, what: impl FnMut() -> Option<T>) -> T {
    wait_until_ctx(secs, why, &String::new, what)
}

/// `heaplive report DIR -o DIR/report.html`: the page's path and text.
pub fn report_of_dir(dir: &Path) -> (PathBuf, String) {
    let page = dir.join("report.html");
    ok(heaplive(&[
        "report",
        dir.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    (page, html)
}

/// The JSON a report page embeds (`<script ... id="heaplive-data">`).
pub fn report_data(html: &str) -> &str {
    let tag = "id=\"heaplive-data\">";
    let start = html.find(tag).expect("no heaplive-data in the page") + tag.len();
    &html[start..start + html[start..].find("</script>").unwrap()]
}

/// `wait_until`, with `ctx()` (the state of what the test runs: logs, a
/// server's output) in the message when the time is up.
pub fn wait_until_ctx<T>(
    secs: u64,
    why: &str,
    ctx: &dyn Fn() -> String,
    mut what: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = what() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited {secs} s: {why}\n{}",
            ctx()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A program a test started: killed and reaped when dropped, so a failed
/// assert leaves nothing running (and its status file, if heaplive wrote
/// one, is removed). Its stdout, when piped, is read line by line
/// ([`Running::line`], [`Running::ready`]).
pub struct Running {
    child: std::process::Child,
    out: Option<std::io::BufReader<std::process::ChildStdout>>,
    /// What the program printed so far (for failure messages).
    seen: String,
}

impl Running {
    /// Starts `c` (its stdio as the caller set it).
    pub fn spawn(c: &mut Command) -> Running {
        let mut child = c.spawn().expect("start the program");
        let out = child.stdout.take().map(std::io::BufReader::new);
        Running {
            child,
            out,
            seen: String::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process itself, for what this handle does not wrap (stdin,
    /// stderr, try_wait).
    pub fn child(&mut self) -> &mut std::process::Child {
        &mut self.child
    }

    /// The next line of the program's stdout (without its newline), or
    /// None at its end.
    pub fn line(&mut self) -> Option<String> {
        use std::io::BufRead;
        let out = self.out.as_mut().expect("stdout is piped");
        let mut l = String::new();
        match out.read_line(&mut l) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                self.seen.push_str(&l);
                Some(l.trim_end_matches('\n').to_string())
            }
        }
    }

    /// Reads stdout up to the program's `ready PID` line (the test
    /// programs print it once set up) and returns the PID.
    pub fn ready(&mut self) -> u32 {
        loop {
            let Some(l) = self.line() else {
                panic!(
                    "the program ended before `ready PID`; it printed {:?}",
                    self.seen
                );
            };
            if let Some(pid) = l.strip_prefix("ready ") {
                return pid.trim().parse().expect("ready PID");
            }
        }
    }

    /// Sends `sig` to the program.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill has no memory preconditions; the pid is our child,
        // not yet reaped (the handle reaps it only when dropped or waited).
        assert_eq!(unsafe { libc::kill(self.pid() as i32, sig) }, 0, "kill");
    }

    /// Waits until `dir` holds at least `n` folded files of the live view
    /// (dump files), and returns them sorted.
    pub fn wait_files(&self, dir: &Path, n: usize) -> Vec<PathBuf> {
        wait_until(30, &format!("{n} dump files in {}", dir.display()), || {
            let f = folded_files(dir);
            (f.len() >= n).then_some(f)
        })
    }

    /// Waits for the program to end: its status, the rest of its stdout
    /// and its stderr (when piped).
    pub fn wait(mut self) -> Output {
        use std::io::Read;
        // stderr on a thread of its own: a program that fills one pipe
        // while the test reads the other must not block.
        let err = self.child.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = e.read_to_end(&mut v);
                v
            })
        });
        let mut stdout = std::mem::take(&mut self.seen).into_bytes();
        if let Some(mut out) = self.out.take() {
            let _ = out.read_to_end(&mut stdout);
        }
        let stderr = err.map_or_else(Vec::new, |t| t.join().unwrap_or_default());
        let status = self.child.wait().expect("wait for the program");
        Output {
            status,
            stdout,
            stderr,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let _ = std::fs::remove_file(format!("/tmp/heaplive-{uid}/{}", self.child.id()));
    }
}

/// The program `name` on PATH, if there is one.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}

/// `go` on PATH or in Debian's place (`make test-deps` installs it).
pub fn go() -> PathBuf {
    if let Some(p) = which("go") {
        return p;
    }
    let p = PathBuf::from("/usr/lib/go/bin/go");
    assert!(p.exists(), "go is not installed");
    p
}

/// `go tool pprof ARGS FILE` in `dir`, with a Go home of its own there and
/// no preload; asserts success and returns its stdout.
pub fn pprof(dir: &Path, args: &[&str], file: &Path) -> String {
    let home = dir.join("gohome");
    std::fs::create_dir_all(&home).unwrap();
    let o = output_ok(
        Command::new(go())
            .args(["tool", "pprof"])
            .args(args)
            .arg(file)
            .current_dir(dir)
            .env("HOME", &home)
            .env("GOCACHE", home.join("cache"))
            .env("GOPATH", home.join("gopath"))
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .env_remove("LD_PRELOAD"),
        &format!("go tool pprof {args:?}"),
    );
    stdout(&o)
}

/// `progs/sym_jit.c` compiled in `dir` and run there under the library in
/// exact mode: the binary, the run, the pid the program printed and the
/// removal of its perf map.
pub fn run_sym_jit(dir: &Path) -> (PathBuf, Output, Option<u32>, Option<PerfMap>) {
    let bin = compile("sym_jit.c", "sym_jit", dir, &[]);
    let o = run_preloaded(dir, &bin, &[], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    let pid = stdout(&o).trim().parse::<u32>().ok();
    let cleanup = pid.map(PerfMap::of);
    (bin, o, pid, cleanup)
}

/// Removes `/tmp/perf-<pid>.map` (a JIT program's symbol map) when dropped.
pub struct PerfMap(pub PathBuf);

impl PerfMap {
    pub fn of(pid: u32) -> PerfMap {
        PerfMap(PathBuf::from(format!("/tmp/perf-{pid}.map")))
    }
}

impl Drop for PerfMap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

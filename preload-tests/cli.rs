//! Tests of the `heaplive` command on synthetic folded files and on small
//! processes. They do not need the real preload library: `run` and `dump`
//! are driven with a stand-in `libheaplive.so` (compiled here from C) that
//! speaks only the library's file contract: it writes a folded file named by
//! `HEAPLIVE_OUTPUT` and the status file `/tmp/heaplive-status/<pid>` on
//! SIGUSR2 and at exit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_heaplive");

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "heaplive-cli-test.{}.{n}.{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str, content: &[u8]) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, content).expect("write test file");
        path.to_str().expect("utf-8 temp path").to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn heaplive(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("HEAPLIVE_OUTPUT")
        .stdin(Stdio::null())
        .output()
        .expect("run heaplive")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub(crate) fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "heaplive failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Asserts exit status `code` and that stderr is exactly one line `want`.
fn fails_with(o: Output, code: i32, want: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "status; stderr:\n{}",
        stderr(&o)
    );
    let err = stderr(&o);
    let first = err.lines().next().unwrap_or("");
    assert_eq!(first, want, "first line of stderr:\n{err}");
    assert!(!err.contains("panicked"), "heaplive panicked:\n{err}");
}

/// A deterministic synthetic profile: `n` distinct stacks with counts from
/// a linear congruential generator seeded by `seed`.
fn synthetic(n: usize, seed: u64) -> BTreeMap<String, u64> {
    let mut x = seed;
    let mut out = BTreeMap::new();
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let count = (x >> 33) % 10_000_000;
        let depth = 2 + i % 5;
        let mut frames = vec!["_start".to_string(), "main".to_string()];
        frames.extend((0..depth).map(|d| format!("fn_{}_{d}", i % 7)));
        frames.push(format!("alloc site {i} (lib.c:{})", i + 1));
        out.insert(frames.join(";"), count);
    }
    out
}

fn folded_text(p: &BTreeMap<String, u64>) -> String {
    p.iter().map(|(s, c)| format!("{s} {c}\n")).collect()
}

fn total(p: &BTreeMap<String, u64>) -> u128 {
    p.values().map(|&c| c as u128).sum()
}

/// Rows of a `--bytes` table: (first column as integer, rest of line).
fn table_rows(text: &str) -> Vec<(i128, String)> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let (num, rest) = t.split_once("  ")?;
            Some((
                num.trim_start_matches('+').parse::<i128>().ok()?,
                rest.trim().to_string(),
            ))
        })
        .collect()
}

#[test]
fn top_totals_equal_folded_totals() {
    let dir = TempDir::new("top");
    let a = synthetic(40, 1);
    let b = synthetic(25, 2);
    let fa = dir.file("a.folded", folded_text(&a).as_bytes());
    let fb = dir.file("b.folded", folded_text(&b).as_bytes());
    let mut sum = a.clone();
    for (s, c) in &b {
        *sum.entry(s.clone()).or_insert(0) += c;
    }
    let want = total(&sum);

    let out = ok(heaplive(&["top", "--bytes", "-n", "0", &fa, &fb]));
    let rows = table_rows(&out);
    let (last, stacks) = rows.split_last().expect("a total line");
    assert_eq!(last.0 as u128, want, "{out}");
    assert_eq!(
        last.1,
        format!(
            "100.0%  total: {want} bytes in {} stacks from 2 files",
            sum.len()
        )
    );
    assert_eq!(stacks.len(), sum.len(), "{out}");
    assert_eq!(
        stacks.iter().map(|r| r.0 as u128).sum::<u128>(),
        want,
        "rows must add up to the total:\n{out}"
    );
    let mut sorted: Vec<i128> = stacks.iter().map(|r| r.0).collect();
    sorted.sort_by(|x, y| y.cmp(x));
    assert_eq!(
        sorted,
        stacks.iter().map(|r| r.0).collect::<Vec<_>>(),
        "rows sorted by size"
    );

    // Default: 20 rows, human sizes, a "more stacks" row, the same total.
    let out = ok(heaplive(&["top", &fa, &fb]));
    assert!(
        out.lines()
            .last()
            .unwrap_or("")
            .contains(&format!("total: {want} bytes")),
        "{out}"
    );
    assert!(
        out.contains(&format!("({} more stacks)", sum.len() - 20)),
        "{out}"
    );
    assert!(out.contains(" MiB "), "{out}");
    assert_eq!(out.lines().count(), 1 + 20 + 2, "{out}");

    // Leaf first.
    let one = dir.file("one.folded", b"_start;main;parse;xmlStrdup 3000\n");
    let out = ok(heaplive(&["top", &one]));
    assert!(
        out.contains("xmlStrdup <- parse <- main <- _start"),
        "{out}"
    );
    assert!(out.contains("2.9 KiB"), "{out}");
}

#[test]
fn top_inclusive_counts_each_frame_once_per_stack() {
    let dir = TempDir::new("incl");
    let f = dir.file(
        "a.folded",
        b"main;walk;walk;walk;leaf 100\nmain;walk;other 30\nmain;solo 7\n",
    );
    let out = ok(heaplive(&["top", "--inclusive", "--bytes", &f]));
    let rows = table_rows(&out);
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.1.ends_with(&format!("  {name}")))
            .map(|r| r.0)
    };
    assert_eq!(find("main"), Some(137), "{out}");
    assert_eq!(find("walk"), Some(130), "{out}");
    assert_eq!(find("leaf"), Some(100), "{out}");
    assert_eq!(find("solo"), Some(7), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap_or("")
            .contains("total: 137 bytes in 3 stacks"),
        "{out}"
    );
}

#[test]
fn diff_shows_known_growth_exactly() {
    let dir = TempDir::new("diff");
    let base = synthetic(30, 7);
    let leak = "_start;main;serve;cache_put;leaky_alloc";
    let mut old = base.clone();
    old.insert(leak.to_string(), 4096);
    let mut new = base.clone();
    new.insert(leak.to_string(), 4096 + 50 * 1048576 + 17);
    let shrink = base.keys().nth(3).expect("stacks").clone();
    *new.get_mut(&shrink).expect("stack") = 0;
    let gone = base.keys().nth(5).expect("stacks").clone();
    new.remove(&gone);
    let fo = dir.file("old.folded", folded_text(&old).as_bytes());
    let fnew = dir.file("new.folded", folded_text(&new).as_bytes());

    let out = ok(heaplive(&["diff", "--bytes", "-n", "0", &fo, &fnew]));
    let growth = 50 * 1048576 + 17;
    let change = total(&new) as i128 - total(&old) as i128;
    assert!(
        out.starts_with(&format!(
            "total: {} -> {} ({change:+}",
            total(&old),
            total(&new)
        )),
        "{out}"
    );
    let stack_section = out.split("per function").next().expect("sections");
    let rows = table_rows(stack_section);
    let biggest = rows.iter().max_by_key(|r| r.0.abs()).expect("rows");
    assert_eq!(biggest.0, growth, "{out}");
    assert!(
        biggest
            .1
            .ends_with("leaky_alloc <- cache_put <- serve <- main <- _start"),
        "{out}"
    );
    assert_eq!(rows[0], *biggest, "sorted by absolute change:\n{out}");
    // Every changed stack is listed once, with its exact change.
    assert_eq!(rows.len(), 3, "{out}");
    let func_rows = table_rows(out.split("per function").nth(1).expect("function section"));
    assert_eq!(func_rows[0].0, growth, "{out}");
    assert!(func_rows[0].1.ends_with("  leaky_alloc"), "{out}");

    let human = ok(heaplive(&["diff", &fo, &fnew]));
    assert!(human.contains("+50.0 MiB"), "{human}");

    // Two-column folded output: the union of stacks, OLD then NEW.
    let two = ok(heaplive(&["diff", "--folded", &fo, &fnew]));
    let mut want = String::new();
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        want += &format!(
            "{k} {} {}\n",
            old.get(k).copied().unwrap_or(0),
            new.get(k).copied().unwrap_or(0)
        );
    }
    assert_eq!(two, want);
    assert!(two.contains(&format!("{leak} 4096 {}\n", 4096 + growth)));
    // And that file is refused as a one-count input, with the reason.
    let d = dir.file("d.folded", two.as_bytes());
    let o = heaplive(&["top", &d]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("differential"), "{}", stderr(&o));
}

#[test]
fn merge_sums_identical_stacks() {
    let dir = TempDir::new("merge");
    let a = dir.file("a.folded", b"main;b 5\nmain;a 1\nmain;a 2\n\n");
    let b = dir.file("b.folded", b"main;c (x.c:1) 10\r\nmain;a 100\n");
    let out = ok(heaplive(&["merge", &a, &b]));
    assert_eq!(out, "main;a 103\nmain;b 5\nmain;c (x.c:1) 10\n");
    // Merging is idempotent on its own output and keeps the total.
    let m = dir.file("m.folded", out.as_bytes());
    assert_eq!(ok(heaplive(&["merge", &m])), out);
    let big = synthetic(100, 3);
    let f = dir.file("big.folded", folded_text(&big).as_bytes());
    let merged = ok(heaplive(&["merge", &f, &f]));
    let doubled: BTreeMap<String, u64> = big.iter().map(|(s, c)| (s.clone(), 2 * c)).collect();
    assert_eq!(merged, folded_text(&doubled));
}

/// A small well-formedness check: balanced tags, quoted attributes, known
/// entities. Enough to catch unescaped `<` or `&` in function names.
fn check_xml(text: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    let check_text = |t: &str| -> Result<(), String> {
        let mut s = t;
        while let Some(i) = s.find('&') {
            let end = s[i..]
                .find(';')
                .ok_or_else(|| format!("bare & in {:?}", &s[i..(i + 20).min(s.len())]))?;
            let ent = &s[i + 1..i + end];
            let known = ["amp", "lt", "gt", "quot", "apos"].contains(&ent)
                || ent
                    .strip_prefix("#x")
                    .is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
                || ent
                    .strip_prefix('#')
                    .is_some_and(|d| d.parse::<u32>().is_ok());
            if !known {
                return Err(format!("unknown entity &{ent};"));
            }
            s = &s[i + end..];
        }
        Ok(())
    };
    let mut roots = 0;
    while let Some(lt) = rest.find('<') {
        check_text(&rest[..lt])?;
        rest = &rest[lt..];
        if let Some(r) = rest.strip_prefix("<!--") {
            rest = &r[r.find("-->").ok_or("open comment")? + 3..];
        } else if let Some(r) = rest.strip_prefix("<![CDATA[") {
            rest = &r[r.find("]]>").ok_or("open CDATA")? + 3..];
        } else if rest.starts_with("<?") || rest.starts_with("<!") {
            rest = &rest[rest.find('>').ok_or("open declaration")? + 1..];
        } else {
            let gt = rest.find('>').ok_or("open tag")?;
            let tag = &rest[1..gt];
            rest = &rest[gt + 1..];
            if tag.contains('<') {
                return Err(format!("'<' inside tag <{tag}>"));
            }
            if !tag.matches('"').count().is_multiple_of(2) {
                return Err(format!("unbalanced quotes in <{tag}>"));
            }
            check_text(tag)?;
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let name = tag
                    .split(|c: char| c.is_whitespace() || c == '/')
                    .next()
                    .unwrap_or("")
                    .to_string();
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
        }
    }
    check_text(rest)?;
    match (stack.is_empty(), roots) {
        (true, 1) => Ok(()),
        (false, _) => Err(format!("unclosed tags {stack:?}")),
        (_, n) => Err(format!("{n} root elements")),
    }
}

#[test]
fn flamegraph_svg_is_well_formed_and_names_functions() {
    let dir = TempDir::new("flame");
    let f = dir.file(
        "heaplive.php-fpm8.2.4242.3.folded",
        b"_start;main;php_execute;xmlStrdup 524288\n\
          _start;main;std::vector<int, std::allocator<int> >::push_back(int&&);operator new(unsigned long) 4096\n\
          _start;main;a&b_fn 100\n",
    );
    let svg_path = dir.0.join("out.svg");
    let svg_path = svg_path.to_str().expect("utf-8");
    ok(heaplive(&["flamegraph", &f, "-o", svg_path]));
    let svg = std::fs::read_to_string(svg_path).expect("svg written");
    check_xml(&svg).unwrap_or_else(|e| panic!("flame graph is not well-formed XML: {e}"));
    for name in [
        "xmlStrdup",
        "php_execute",
        "operator new(unsigned long)",
        "std::vector&lt;int",
        "a&amp;b_fn",
    ] {
        assert!(svg.contains(name), "SVG lacks {name}");
    }
    assert!(
        svg.contains("Live heap of php-fpm8.2 (pid 4242), dump 3"),
        "default title"
    );
    assert!(svg.contains("bytes"), "count name");
    // The strongest check available: a real XML parser, when there is one.
    if let Ok(o) = Command::new("python3")
        .args([
            "-c",
            "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])",
            svg_path,
        ])
        .output()
    {
        assert!(
            o.status.success(),
            "python's XML parser rejects the SVG: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    let out = ok(heaplive(&["flamegraph", "--title", "My <title>", &f]));
    assert!(out.starts_with("<?xml"), "SVG on stdout");
    assert!(out.contains("My &lt;title&gt;"), "custom title, escaped");
    check_xml(&out).unwrap_or_else(|e| panic!("stdout SVG: {e}"));
}

#[test]
fn malformed_inputs_give_one_clear_line() {
    let dir = TempDir::new("bad");
    let cases: [(&str, &[u8], &str); 6] = [
        (
            "nocount.folded",
            b"main;a 1\nmain;b 2\nmain;c\n",
            "nocount.folded:3: no count after the last space",
        ),
        (
            "neg.folded",
            b"main;a 1\nmain;b -20\n",
            "neg.folded:2: negative count -20",
        ),
        (
            "frac.folded",
            b"main;a 1.5\n",
            "frac.folded:1: count '1.5' after the last space is not a non-negative integer",
        ),
        (
            "bin.folded",
            b"main;a 1\n\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00",
            "bin.folded:2: not UTF-8 text (binary data?)",
        ),
        (
            "nul.folded",
            b"main;a 1\x00\x00\x00",
            "nul.folded:1: control characters (binary data?)",
        ),
        ("empty.folded", b"", "empty.folded: empty (no stacks)"),
    ];
    let good = dir.file("good.folded", b"main;a 1\n");
    for (name, content, msg) in cases {
        let path = dir.file(name, content);
        let want = format!("heaplive: {}/{msg}", dir.0.display());
        fails_with(heaplive(&["top", &path]), 1, &want);
        fails_with(heaplive(&["merge", &good, &path]), 1, &want);
        fails_with(heaplive(&["flamegraph", &path]), 1, &want);
        fails_with(heaplive(&["diff", &good, &path]), 1, &want);
    }
    let blank = dir.file("blank.folded", b"\n   \n\n");
    fails_with(
        heaplive(&["top", &blank]),
        1,
        &format!("heaplive: {blank}: empty (no stacks)"),
    );
    let gz = dir.file("p.pb.gz", &[0x1f, 0x8b, 8, 0, 0, 0]);
    let o = heaplive(&["top", &gz]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("gzip"), "{}", stderr(&o));
    let missing = dir.0.join("missing.folded");
    let missing = missing.to_str().expect("utf-8");
    fails_with(
        heaplive(&["top", missing]),
        1,
        &format!("heaplive: {missing}: No such file or directory"),
    );
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    for args in [
        &["frobnicate"][..],
        &["top"],
        &["top", "--nope", "x"],
        &["top", "-n", "many", "x"],
        &["diff", "only-one"],
        &["dump"],
        &["dump", "abc"],
        &["dump", "1", "--timeout", "soon"],
        &["run"],
        &["run", "--interval", "lots", "--", "true"],
        &["run", "--signal", "KILL", "--", "true"],
        &["run", "--output", "a.%q", "--", "true"],
        &["flamegraph"],
        &[],
    ] {
        let o = heaplive(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "heaplive {args:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).starts_with("heaplive: ") || args.is_empty(),
            "heaplive {args:?}: {}",
            stderr(&o)
        );
    }
    for cmd in ["run", "dump", "top", "diff", "merge", "flamegraph"] {
        for flag in ["--help", "-h"] {
            let out = ok(heaplive(&[cmd, flag]));
            assert!(
                out.starts_with(&format!("Usage: heaplive {cmd}")),
                "{cmd} {flag}: {out}"
            );
            assert!(out.contains("Example"), "{cmd} {flag} has examples");
        }
    }
    assert!(ok(heaplive(&["--help"])).contains("Commands:"));
}

/// The stand-in library, compiled once; and an empty shared object.
struct Libs {
    mock: PathBuf,
    empty: PathBuf,
    empty2: PathBuf,
}

fn libs() -> &'static Libs {
    static LIBS: OnceLock<Libs> = OnceLock::new();
    LIBS.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("heaplive-cli-test.{}.libs", std::process::id()));
        std::fs::create_dir_all(&dir).expect("libs dir");
        let src = dir.join("mock.c");
        std::fs::write(&src, MOCK_C).expect("write mock.c");
        let empty_src = dir.join("empty.c");
        std::fs::write(&empty_src, "int heaplive_test_empty;\n").expect("write empty.c");
        let libs = Libs {
            mock: dir.join("libheaplive.so"),
            empty: dir.join("libempty.so"),
            empty2: dir.join("libempty2.so"),
        };
        for (src, out) in [
            (&src, &libs.mock),
            (&empty_src, &libs.empty),
            (&empty_src, &libs.empty2),
        ] {
            let o = Command::new("cc")
                .args(["-shared", "-fPIC", "-O1", "-o"])
                .arg(out)
                .arg(src)
                .output()
                .expect("these tests need a C compiler: 'cc' not found");
            assert!(
                o.status.success(),
                "cc failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        libs
    })
}

/// A stand-in for libheaplive.so: dumps `main;mock_alloc <1000*n>` to the
/// expanded HEAPLIVE_OUTPUT and rewrites the status file, on SIGUSR2 and at
/// exit; it catches SIGUSR1 and does nothing. Formatting in a handler is not async-signal-safe; the test
/// processes only sleep, so nothing else runs when it fires.
const MOCK_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dumps;

static void expand(char *out, size_t cap, const char *t, int n) {
    size_t o = 0;
    for (; *t && o + 64 < cap; t++) {
        if (*t == '%' && t[1]) {
            t++;
            if (*t == 'p') o += snprintf(out + o, cap - o, "%d", (int)getpid());
            else if (*t == 'n') o += snprintf(out + o, cap - o, "%d", n);
            else if (*t == 'e') o += snprintf(out + o, cap - o, "%s", program_invocation_short_name);
            else out[o++] = *t;
        } else out[o++] = *t;
    }
    out[o] = 0;
}

static void dump(void) {
    int saved = errno;
    char path[2048], abs[4200], cwd[2048], status[128], stmp[160], text[4400];
    const char *t = getenv("HEAPLIVE_OUTPUT");
    dumps++;
    expand(path, sizeof path, t && *t ? t : "heaplive.%e.%p.%n.folded", dumps);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        int len = snprintf(text, sizeof text, "main;mock_alloc %d\n", 1000 * dumps);
        if (write(fd, text, len) != len) {}
        close(fd);
    }
    if (path[0] != '/' && getcwd(cwd, sizeof cwd)) snprintf(abs, sizeof abs, "%s/%s", cwd, path);
    else snprintf(abs, sizeof abs, "%s", path);
    mkdir("/tmp/heaplive-status", 01777);
    chmod("/tmp/heaplive-status", 01777);
    snprintf(status, sizeof status, "/tmp/heaplive-status/%d", (int)getpid());
    snprintf(stmp, sizeof stmp, "%s.tmp", status);
    fd = open(stmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        int len = snprintf(text, sizeof text, "dumps %d\nlast %s\nsignal %d\n", dumps, abs, SIGUSR2);
        if (write(fd, text, len) != len) {}
        close(fd);
        rename(stmp, status);
    }
    errno = saved;
}

static void on_signal(int sig) { (void)sig; dump(); }
static void busy(int sig) { (void)sig; }

__attribute__((constructor)) static void start(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, 0);
    sa.sa_handler = busy; /* caught, never dumps: for timeouts */
    sigaction(SIGUSR1, &sa, 0);
}

__attribute__((destructor)) static void stop(void) { dump(); }
"#;

fn run_with_lib(lib: &Path, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("HEAPLIVE_LIB", lib)
        .env_remove("LD_PRELOAD")
        .env_remove("HEAPLIVE_OUTPUT")
        .stdin(Stdio::null());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().expect("run heaplive")
}

#[test]
fn run_passes_settings_and_exit_status() {
    let libs = libs();
    let script = "echo $HEAPLIVE_SAMPLE_INTERVAL $HEAPLIVE_DUMP_EVERY $HEAPLIVE_SIGNAL $HEAPLIVE_FORMAT $HEAPLIVE_OUTPUT; exit 7";
    let o = run_with_lib(
        &libs.empty,
        &[
            "run",
            "--interval",
            "4K",
            "--every",
            "5m",
            "--signal",
            "RTMIN+3",
            "--format",
            "folded,pprof",
            "--output",
            "/nonexistent/x.%p",
            "--",
            "sh",
            "-c",
            script,
        ],
        &[],
    );
    assert_eq!(
        stdout(&o),
        "4K 5m RTMIN+3 folded,pprof /nonexistent/x.%p\n",
        "stderr: {}",
        stderr(&o)
    );
    assert_eq!(o.status.code(), Some(7), "stderr: {}", stderr(&o));

    // The library goes first in LD_PRELOAD, before what was there.
    let o = Command::new(BIN)
        .args(["run", "-q", "--", "sh", "-c", "echo $LD_PRELOAD"])
        .env("HEAPLIVE_LIB", &libs.empty)
        .env("LD_PRELOAD", &libs.empty2)
        .output()
        .expect("run heaplive");
    assert_eq!(
        stdout(&o),
        format!("{}:{}\n", libs.empty.display(), libs.empty2.display()),
        "{}",
        stderr(&o)
    );

    let o = run_with_lib(
        &libs.empty,
        &["run", "-q", "--", "sh", "-c", "kill -TERM $$"],
        &[],
    );
    assert_eq!(o.status.code(), Some(128 + 15), "killed by SIGTERM");

    let o = run_with_lib(&libs.empty, &["run", "--", "/nonexistent/program"], &[]);
    assert_eq!(o.status.code(), Some(127));
    assert!(
        stderr(&o).starts_with("heaplive: cannot run '/nonexistent/program'"),
        "{}",
        stderr(&o)
    );

    let o = run_with_lib(
        Path::new("/nonexistent/libheaplive.so"),
        &["run", "--", "true"],
        &[],
    );
    fails_with(
        o,
        1,
        "heaplive: HEAPLIVE_LIB=/nonexistent/libheaplive.so: no such file",
    );
}

#[test]
fn run_lists_the_files_written() {
    let libs = libs();
    let dir = TempDir::new("runfiles");
    let template = format!("{}/t.%e.%p.%n.folded", dir.0.display());
    let o = run_with_lib(
        &libs.mock,
        &["run", "--output", &template, "--", "sleep", "0.1"],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let written: Vec<PathBuf> = std::fs::read_dir(&dir.0)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        written.len(),
        1,
        "the stand-in writes one exit dump: {written:?}"
    );
    let err = stderr(&o);
    if let Some(pid) = err
        .split("profiling pid ")
        .nth(1)
        .and_then(|r| r.split(';').next())
    {
        let _ = std::fs::remove_file(format!("/tmp/heaplive-status/{pid}"));
    }
    assert!(err.contains("1 dump file written:"), "{err}");
    assert!(
        err.contains(&format!("  {}\n", written[0].display())),
        "{err}"
    );
    // The file is a valid dump.
    let top = ok(heaplive(&[
        "top",
        "--bytes",
        written[0].to_str().expect("utf-8"),
    ]));
    assert!(top.contains("total: 1000 bytes in 1 stacks"), "{top}");
}

/// A child process that is reaped when the test ends, even on failure.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(format!("/tmp/heaplive-status/{}", self.0.id()));
    }
}

fn spawn(
    cmd: &str,
    args: &[&str],
    preload: Option<&Path>,
    env: &[(&str, &str)],
    cwd: &Path,
) -> Child {
    let mut c = Command::new(cmd);
    c.args(args)
        .current_dir(cwd)
        .env_remove("LD_PRELOAD")
        .env_remove("HEAPLIVE_OUTPUT")
        .stdin(Stdio::null());
    if let Some(p) = preload {
        c.env("LD_PRELOAD", p);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    Child(c.spawn().expect("spawn test child"))
}

/// Waits until `pid` has `libheaplive` mapped and its constructor has
/// installed the SIGUSR2 handler (right after spawn the dynamic loader may
/// not have run yet).
fn wait_for_library(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let mapped = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| m.contains("libheaplive"));
        let caught = std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
                .is_some_and(|m| m & (1 << (libc_sigusr2() - 1)) != 0)
        });
        if mapped && caught {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("pid {pid} never mapped libheaplive and caught SIGUSR2");
}

/// SIGUSR2 on Linux (x86-64 and aarch64 alike).
fn libc_sigusr2() -> u32 {
    12
}

#[test]
fn dump_errors_for_dead_pid_and_pid_without_library() {
    // A pid that certainly does not exist: one we created and reaped.
    let dead = loop {
        let mut c = Command::new("true").spawn().expect("spawn true");
        let pid = c.id();
        c.wait().expect("wait");
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break pid;
        }
    };
    fails_with(
        heaplive(&["dump", &dead.to_string()]),
        1,
        &format!("heaplive: pid {dead}: no such process"),
    );

    let dir = TempDir::new("nolib");
    let child = spawn("sleep", &["30"], None, &[], &dir.0);
    let pid = child.0.id();
    // Let exec finish so the name is "sleep", not the test binary's.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or(true, |c| c.trim() != "sleep")
    {
        assert!(Instant::now() < deadline, "sleep never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    fails_with(
        heaplive(&["dump", &pid.to_string()]),
        1,
        &format!(
            "heaplive: pid {pid} (sleep): not running heaplive (libheaplive.so not in /proc/{pid}/maps)"
        ),
    );
    fails_with(
        heaplive(&["dump", "--children", &pid.to_string()]),
        1,
        &format!("heaplive: pid {pid} (sleep): no child processes"),
    );
}

#[test]
fn dump_signals_and_prints_the_new_file() {
    let libs = libs();
    let dir = TempDir::new("dump");
    let child = spawn("sleep", &["30"], Some(&libs.mock), &[], &dir.0);
    let pid = child.0.id();
    wait_for_library(pid);
    let _ = std::fs::remove_file(format!("/tmp/heaplive-status/{pid}"));
    for n in 1..=2 {
        let out = ok(heaplive(&["dump", &pid.to_string()]));
        let want = dir.0.join(format!("heaplive.sleep.{pid}.{n}.folded"));
        assert_eq!(out, format!("{}\n", want.display()));
        let text = std::fs::read_to_string(&want).expect("dump file exists");
        assert_eq!(text, format!("main;mock_alloc {}\n", 1000 * n));
    }
    assert!(child_alive(pid), "the process survives its dumps");
}

fn child_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
}

#[test]
fn dump_children_dumps_every_worker() {
    let libs = libs();
    let dir = TempDir::new("children");
    let master = spawn(
        "sh",
        &["-c", "sleep 30 & sleep 30 & wait"],
        Some(&libs.mock),
        &[],
        &dir.0,
    );
    let mpid = master.0.id();
    // Wait for both workers to be up with the library mapped.
    let deadline = Instant::now() + Duration::from_secs(10);
    let kids = loop {
        let kids = children_of(mpid);
        if kids.len() == 2 {
            for k in &kids {
                wait_for_library(*k);
            }
            break kids;
        }
        assert!(Instant::now() < deadline, "workers never started: {kids:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = ok(heaplive(&["dump", "--children", &mpid.to_string()]));
    let mut want: Vec<String> = kids
        .iter()
        .map(|k| {
            format!(
                "{}",
                dir.0.join(format!("heaplive.sleep.{k}.1.folded")).display()
            )
        })
        .collect();
    let mut got: Vec<String> = out.lines().map(str::to_string).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    for k in &kids {
        let _ = std::fs::remove_file(format!("/tmp/heaplive-status/{k}"));
        // SAFETY-free cleanup: the workers are ours; kill them by pid.
        let _ = Command::new("kill").arg(k.to_string()).status();
    }
}

fn children_of(parent: u32) -> Vec<u32> {
    let mut kids = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
            == Some(parent)
        {
            kids.push(pid);
        }
    }
    kids.sort();
    kids
}

#[test]
fn dump_honours_the_process_signal_setting() {
    let libs = libs();
    let dir = TempDir::new("signal");
    // No status file yet: the signal comes from the process's environment.
    // The stand-in catches SIGUSR1 and never dumps, so heaplive gives up
    // after the timeout; had it sent SIGUSR2, the stand-in would dump.
    let child = spawn(
        "sleep",
        &["30"],
        Some(&libs.mock),
        &[("HEAPLIVE_SIGNAL", "USR1")],
        &dir.0,
    );
    let pid = child.0.id();
    wait_for_library(pid);
    let _ = std::fs::remove_file(format!("/tmp/heaplive-status/{pid}"));
    let t = Instant::now();
    fails_with(
        heaplive(&["dump", "--timeout", "0.5", &pid.to_string()]),
        1,
        &format!("heaplive: pid {pid}: no dump after 0.5 s"),
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the timeout is honoured"
    );
    assert!(child_alive(pid), "the process lives");

    // A signal the process does not catch is not sent: it would kill it.
    let hup = spawn(
        "sleep",
        &["30"],
        Some(&libs.mock),
        &[("HEAPLIVE_SIGNAL", "HUP")],
        &dir.0,
    );
    let hpid = hup.0.id();
    wait_for_library(hpid);
    let _ = std::fs::remove_file(format!("/tmp/heaplive-status/{hpid}"));
    fails_with(
        heaplive(&["dump", &hpid.to_string()]),
        1,
        &format!(
            "heaplive: pid {hpid} (sleep): does not catch SIGHUP (library not initialised yet, or the handler was replaced); not sending it"
        ),
    );
    assert!(child_alive(hpid), "SIGHUP was not sent");

    let quiet = spawn(
        "sleep",
        &["30"],
        Some(&libs.mock),
        &[("HEAPLIVE_SIGNAL", "none")],
        &dir.0,
    );
    let qpid = quiet.0.id();
    wait_for_library(qpid);
    let _ = std::fs::remove_file(format!("/tmp/heaplive-status/{qpid}"));
    let o = heaplive(&["dump", &qpid.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!("heaplive: pid {qpid} (sleep): has no dump signal")),
        "{}",
        stderr(&o)
    );
}

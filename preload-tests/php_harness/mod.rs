//! The PHP tests' part of the harness (built on `common.rs`): which php and
//! php-fpm are under test, processes and the PHP tests' wait, heaplive's
//! log lines, sums over stacks, the scripts several tests run; php-cli runs
//! (`cli.rs`), php-fpm pools (`fpm.rs`) and the FastCGI client that talks
//! to them (`fcgi.rs`).

mod cli;
mod fcgi;
mod fpm;

pub(crate) use cli::*;
pub(crate) use fcgi::*;
pub(crate) use fpm::*;

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------
// The PHP under test.

/// The php-fpm under test: `HEAPLIVE_TEST_PHP_FPM` (a path, as
/// scripts/check-php-version.sh sets for a PHP built from source), else
/// Debian's php-fpm8.2.
pub(crate) fn fpm_bin() -> String {
    std::env::var("HEAPLIVE_TEST_PHP_FPM").unwrap_or_else(|_| "php-fpm8.2".into())
}

/// The php-cli under test: `HEAPLIVE_TEST_PHP`, else Debian's php8.2.
pub(crate) fn php_bin() -> String {
    std::env::var("HEAPLIVE_TEST_PHP").unwrap_or_else(|_| "php8.2".into())
}

/// (major, minor) of the php-cli under test.
pub(crate) fn php_version() -> (u32, u32) {
    let o = Command::new(php_bin())
        .args(["-r", "echo PHP_MAJOR_VERSION, ' ', PHP_MINOR_VERSION;"])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", php_bin()));
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    let (a, b) = t
        .split_once(' ')
        .unwrap_or_else(|| panic!("{} -r: {t:?}", php_bin()));
    (a.parse().unwrap(), b.parse().unwrap())
}

pub(crate) fn require_php() {
    let o = Command::new(php_bin()).arg("-v").output();
    assert!(
        matches!(&o, Ok(o) if o.status.success()),
        "{} is missing: install php8.2-cli with scripts/install-test-deps.sh (`make test` does)",
        php_bin()
    );
}

pub(crate) fn require_fpm() {
    let o = Command::new(fpm_bin()).arg("-v").output();
    match o {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "{} is missing or broken ({:?}): install it with scripts/install-test-deps.sh (`make test` does)",
            fpm_bin(),
            other.map(|o| o.status)
        ),
    }
}

/// Takes out of `c`'s environment what the test's own could bring in and
/// would change heaplive or PHP's allocator: HEAPLIVE_*, USE_ZEND_ALLOC,
/// LD_PRELOAD.
pub(crate) fn clean_env(c: &mut Command) {
    for (k, _) in std::env::vars() {
        if k.starts_with("HEAPLIVE_") || k == "USE_ZEND_ALLOC" || k == "LD_PRELOAD" {
            c.env_remove(k);
        }
    }
}

// ---------------------------------------------------------------------------
// Processes.

/// (state, ppid) of `pid` from /proc, None if it does not exist.
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((state, ppid))
}

pub(crate) fn alive(pid: u32) -> bool {
    matches!(proc_stat(pid), Some((st, _)) if st != 'Z' && st != 'X')
}

/// Live children of `parent`, sorted.
pub(crate) fn children_of(parent: u32) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| matches!(proc_stat(pid), Some((st, pp)) if pp == parent && st != 'Z'))
        .collect();
    v.sort();
    v
}

pub(crate) fn kill(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    let r = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(
        r,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// Polls `f` until it gives Some, for at most 20 s (`common::wait_until`,
/// with the test's context in the message).
pub(crate) fn wait_for<T>(what: &str, ctx: &dyn Fn() -> String, f: impl FnMut() -> Option<T>) -> T {
    crate::common::wait_until_ctx(20, what, ctx, f)
}

/// The resident set of `pid`, in bytes.
pub(crate) fn vm_rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// Dates a script an hour back: opcache does not cache files changed in
/// the last 2 s (opcache.file_update_protection), which would make the
/// first requests of whichever run comes first differ.
pub(crate) fn age(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let t = libc::timeval {
        tv_sec: now - 3600,
        tv_usec: 0,
    };
    // SAFETY: a valid path and two timevals.
    assert_eq!(unsafe { libc::utimes(c.as_ptr(), [t, t].as_ptr()) }, 0);
}

/// A script that grows an array of 4000-byte rows (in fill_rows, line 4)
/// until memory_limit stops it.
pub(crate) const FILL_ROWS_PHP: &str = "<?php\n\
function fill_rows() {\n\
    $rows = [];\n\
    for ($i = 0; ; $i++) { $rows[] = str_repeat('x', 4000) . $i; }\n\
}\n\
fill_rows();\n";

/// Writes the PHP script `name` in `dir` (making its directory) and ages it:
/// opcache does not cache files changed in the last 2 s.
pub(crate) fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    age(&p);
    p
}

/// A fresh directory ([`tempdir`] `tag`) with the PHP script `name`: the
/// opening `<?php` line, then `body` (written by [`script`]): the directory
/// and the script.
pub(crate) fn php_dir(tag: &str, name: &str, body: &str) -> (TempDir, PathBuf) {
    script_dir(tag, name, &format!("<?php\n{body}"))
}

/// A fresh directory ([`tempdir`] `tag`) with the script `name`, `text`
/// (written by [`script`]): the directory and the script.
pub(crate) fn script_dir(tag: &str, name: &str, text: &str) -> (TempDir, PathBuf) {
    let dir = tempdir(tag);
    let p = script(&dir, name, text);
    (dir, p)
}

/// A script whose `build_NAME()` keeps `rows` strings of 4000 `ch` (and
/// the row's number) and returns their count, which it echoes, then
/// `more` (PHP: `, ' ', getmypid()`), then a newline.
pub(crate) fn builder_php(name: &str, rows: u32, ch: char, more: &str) -> String {
    format!(
        "<?php\n\
         function build_{name}() {{ $a = []; for ($i = 0; $i < {rows}; $i++) {{ $a[] = str_repeat('{ch}', 4000) . $i; }} return count($a); }}\n\
         echo build_{name}(){more}, \"\\n\";\n"
    )
}

// ---------------------------------------------------------------------------
// heaplive's log lines and files.

/// Paths of `<why>` dumps of `pid` from the HEAPLIVE_LOG lines
/// `heaplive[pid]: <why> dump <path>: ...`.
pub(crate) fn dumps_in_log(dir: &Path, pid: u32, why: &str) -> Vec<PathBuf> {
    let log = log_of(dir);
    let prefix = format!("heaplive[{pid}]: {why} dump ");
    log.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|r| r.split_once(": ").map(|(p, _)| PathBuf::from(p)))
        .collect()
}

/// Sends SIGUSR2 to `pid` and waits for its next signal dump (after those
/// the log names now): its path.
pub(crate) fn signal_dump(dir: &Path, pid: u32, what: &str, ctx: &dyn Fn() -> String) -> PathBuf {
    let n = dumps_in_log(dir, pid, "signal").len();
    kill(pid, libc::SIGUSR2);
    wait_for(what, ctx, || {
        dumps_in_log(dir, pid, "signal").get(n).cloned()
    })
}

/// What heaplive logged in `dir` (HEAPLIVE_LOG), empty before it did.
pub(crate) fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default()
}

/// Asserts that heaplive's log in `dir` has `text` (the message: the log).
pub(crate) fn assert_logged(dir: &Path, text: &str) {
    let log = log_of(dir);
    assert!(log.contains(text), "{log}");
}

/// The first signal dump written in `dir`.
pub(crate) fn dump_file(dir: &Path) -> PathBuf {
    let log = log_of(dir);
    first_dump_path(&log, "signal").unwrap_or_else(|| panic!("no signal dump in the log\n{log}"))
}

/// The sample count of `pid`'s last dump, from its log line.
pub(crate) fn samples_in_log(dir: &Path, pid: u32) -> Option<u64> {
    let log = log_of(dir);
    let l = log
        .lines()
        .rfind(|l| l.starts_with(&format!("heaplive[{pid}]: signal dump")))?;
    let i = l.find(" samples over")?;
    let head = &l[..i];
    let n = head.rsplit(' ').next()?;
    n.replace(',', "").parse().ok()
}

// ---------------------------------------------------------------------------
// Stacks and the files beside them.

fn is_engine_frame(f: &str) -> bool {
    f == "execute_ex"
        || f.starts_with("zend_")
        || f.starts_with("_emalloc")
        || f == "__zend_malloc"
        || f.starts_with("ZEND_")
}

/// The bytes of the stacks with a frame for which `is` holds.
pub(crate) fn bytes_with_frame(stacks: &[Stack], is: impl Fn(&str) -> bool) -> u64 {
    stacks
        .iter()
        .filter(|s| s.frames.iter().any(|f| is(f)))
        .map(|s| s.bytes)
        .sum()
}

pub(crate) fn engine_bytes(stacks: &[Stack]) -> u64 {
    bytes_with_frame(stacks, is_engine_frame)
}

fn is_sqlite_frame(f: &str) -> bool {
    f.starts_with("sqlite3") || f.contains("libsqlite3")
}

pub(crate) fn sqlite_bytes(stacks: &[Stack]) -> u64 {
    bytes_with_frame(stacks, is_sqlite_frame)
}

/// The heaviest stacks of a file, for failure messages.
pub(crate) fn top_stacks(stacks: &[Stack], n: usize) -> String {
    let mut v: Vec<&Stack> = stacks.iter().collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    v.iter()
        .take(n)
        .map(|s| format!("{} {}\n", s.frames.join(";"), s.bytes))
        .collect()
}

/// Asserts that `bytes`, what `stacks` hold under some frames, are at
/// least `min`; the message: `what`, the bytes, the file's total, its 15
/// heaviest stacks, then `ctx()`.
pub(crate) fn assert_bytes_at_least(
    bytes: u64,
    min: u64,
    stacks: &[Stack],
    what: &str,
    ctx: &dyn Fn() -> String,
) {
    assert!(
        bytes >= min,
        "{what}; {bytes} bytes (total {})\ntop stacks:\n{}\n{}",
        total(stacks),
        top_stacks(stacks, 15),
        ctx()
    );
}

pub(crate) fn zend_mm_bytes(stacks: &[Stack]) -> u64 {
    zend_mm_bytes_under(stacks, "")
}

/// The bytes of the ZendMM stacks (leaf `[zend_mm]`) with a frame that
/// starts with `prefix` (a PHP function: `build (churn.php:`).
pub(crate) fn zend_mm_bytes_under(stacks: &[Stack], prefix: &str) -> u64 {
    stacks
        .iter()
        .filter(|s| s.leaf() == "[zend_mm]")
        .filter(|s| s.frames.iter().any(|f| f.starts_with(prefix)))
        .map(|s| s.bytes)
        .sum()
}

/// Asserts `est` is within `sigmas` standard errors of `truth` for blocks
/// much smaller than the interval `r`: the estimate's variance is about
/// `truth * r` (the sum over blocks of b^2 (1-p)/p with p ~ b/r).
pub(crate) fn assert_within(est: u64, truth: u64, r: u64, sigmas: f64, what: &str) {
    let sd = ((truth as f64) * (r as f64)).sqrt();
    let err = (est as f64 - truth as f64).abs();
    assert!(
        err <= sigmas * sd,
        "{what}: estimate {est} vs {truth} bytes: off by {err:.0}, more than {sigmas} standard errors of {sd:.0}"
    );
}

/// The PHP frames of a stack, root first, joined by `;`.
pub(crate) fn php_only(s: &Stack) -> String {
    s.frames
        .iter()
        .filter(|f| f.contains(".php:") || f.ends_with(" [internal]"))
        .cloned()
        .collect::<Vec<_>>()
        .join(";")
}

/// Asserts that each of `want` is the PHP frames ([`php_only`]) of some
/// stack, and that no frame reads `[php?]`; returns every stack's PHP
/// frames.
pub(crate) fn assert_php_stacks(stacks: &[Stack], want: &[impl AsRef<str>]) -> Vec<String> {
    let php: Vec<String> = stacks.iter().map(php_only).collect();
    for w in want {
        let w = w.as_ref();
        assert!(
            php.iter().any(|p| p == w),
            "no stack with PHP frames {w}\n{}",
            php.join("\n")
        );
    }
    assert!(
        !stacks.iter().any(|s| s.has("[php?]")),
        "{}",
        top_stacks(stacks, 20)
    );
    php
}

/// `NAME.maps.txt` beside the dump `folded`: a row per kind whose bytes add
/// up to the RSS row, and ZendMM holding (resident) the `held` bytes of
/// the script's array, give or take two chunks whose mappings the kernel
/// may have merged with a neighbour.
pub(crate) fn check_maps_file(folded: &Path, held: u64) {
    let name = folded.to_str().unwrap().strip_suffix(".folded").unwrap();
    let maps = PathBuf::from(format!("{name}.maps.txt"));
    let text = std::fs::read_to_string(&maps).unwrap_or_else(|e| panic!("{}: {e}", maps.display()));
    let row = |kind: &str| -> u64 {
        text.lines()
            .find(|l| !l.starts_with('#') && l.split_whitespace().nth(3) == Some(kind))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {kind} row in {}:\n{text}", maps.display()))
    };
    let total = row("RSS");
    let zend = row("ZendMM");
    let kinds: u64 = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(kinds, total, "{text}");
    assert!(
        zend + (4 << 20) >= held && zend <= total,
        "ZendMM {zend} should hold the array's {held} bytes\n{text}"
    );
    assert!(row("files") > 0, "{text}");
}

// ---------------------------------------------------------------------------
// Scripts that php-cli and php-fpm tests both run.

/// The library file: the 48 MiB live array is built on line 6.
pub(crate) const CACHE_PHP: &str = "<?php\n\
function build_cache(int $n, int $len, &$delta) {\n\
    $before = memory_get_usage();\n\
    $a = [];\n\
    for ($i = 0; $i < $n; $i++) {\n\
        $a[] = str_repeat(chr(65 + $i % 26), $len);\n\
    }\n\
    $delta = memory_get_usage() - $before;\n\
    return $a;\n\
}\n";
pub(crate) const CACHE_FRAME: &str = "build_cache (cache.php:6)";
/// 12,288 strings of 4,000 bytes (one 4 KiB ZendMM page each): 48 MiB.
pub(crate) const STRINGS: usize = 12288;

/// Fills memory until memory_limit stops it with a fatal error on line 5.
pub(crate) const LIMIT_PHP: &str = "<?php\n\
// memory_limit = 32M from the command line or the pool.\n\
register_shutdown_function(function () { echo 'peak ', memory_get_peak_usage() > 30000000 ? 'high' : 'low', \"\\n\"; });\n\
$a = [];\n\
for ($i = 0; ; $i++) { $a[] = str_repeat('y', 10000 + $i % 7); }\n";

/// A script that prints `memory_get_usage()`, `memory_get_peak_usage()`
/// and both with `true` (PHP's own accounting) at several points: small
/// blocks, strings grown by erealloc, a huge block, frees, objects, a
/// peak reset.
pub(crate) const MEMORY_FIGURES_PHP: &str = "<?php\n\
function point() { return memory_get_usage() . ' ' . memory_get_peak_usage() . ' ' . memory_get_usage(true) . ' ' . memory_get_peak_usage(true); }\n\
class P { public $x; function __construct($x) { $this->x = [$x, \"v$x\"]; } }\n\
$o = [point()];\n\
$a = []; for ($i = 0; $i < 30000; $i++) { $a[\"k$i\"] = str_repeat('x', $i % 300); }\n\
$o[] = point();\n\
$s = ''; for ($i = 0; $i < 20000; $i++) { $s .= \"grow $i,\"; }\n\
$o[] = point();\n\
$big = str_repeat('B', 5 << 20);\n\
$o[] = point();\n\
unset($a, $big);\n\
$o[] = point();\n\
$ps = []; for ($i = 0; $i < 5000; $i++) { $ps[] = new P($i); }\n\
$o[] = point();\n\
$ps = null; gc_collect_cycles();\n\
$o[] = point();\n\
if (function_exists('memory_reset_peak_usage')) { memory_reset_peak_usage(); }\n\
$o[] = point();\n\
echo implode(\"\\n\", $o), \"\\n\";\n";

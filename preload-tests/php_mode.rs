//! PHP mode: php-cli and php-fpm8.2 under the preload with no extension and
//! no USE_ZEND_ALLOC=0. ZendMM's own allocations are sampled with PHP
//! frames (`build_cache (cache.php:6)`), exact mode matches the script's own
//! `memory_get_usage()` deltas, a request's ZendMM samples leave at its end,
//! `memory_limit` fails the same way, sqlite3's malloc shows under the PHP
//! function that ran the query, and heaplive backs off where it must. Every
//! script's output is compared with a run without the preload.
//!
//! php8.2-cli, php8.2-fpm and php8.2-sqlite3 come from
//! scripts/install-test-deps.sh (`make test`): missing, the tests fail.

use crate::common::*;
use crate::php_fpm::{
    Fpm, FpmOpts, alive, dumps_in_log, kill, php_bin, php_version, top_stacks, wait_for,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

/// The library file: the 48 MiB live array is built on line 6.
const CACHE_PHP: &str = "<?php\n\
function build_cache(int $n, int $len, &$delta) {\n\
    $before = memory_get_usage();\n\
    $a = [];\n\
    for ($i = 0; $i < $n; $i++) {\n\
        $a[] = str_repeat(chr(65 + $i % 26), $len);\n\
    }\n\
    $delta = memory_get_usage() - $before;\n\
    return $a;\n\
}\n";
const CACHE_FRAME: &str = "build_cache (cache.php:6)";
/// 12,288 strings of 4,000 bytes (one 4 KiB ZendMM page each): 48 MiB.
const STRINGS: usize = 12288;

pub(crate) fn require_php() {
    let o = Command::new(php_bin()).arg("-v").output();
    assert!(
        matches!(&o, Ok(o) if o.status.success()),
        "{} is missing: install php8.2-cli with scripts/install-test-deps.sh (`make test` does)",
        php_bin()
    );
}

/// Writes cache.php and a script `name` that builds `n` strings with
/// build_cache, writes `ready` (its pid), waits for `release`, and prints
/// what a user could check.
fn cache_script(dir: &Path, name: &str, n: usize) -> PathBuf {
    std::fs::write(dir.join("cache.php"), CACHE_PHP).unwrap();
    let text = format!(
        "<?php\n\
         require __DIR__ . '/cache.php';\n\
         $delta = 0;\n\
         $cache = build_cache({n}, 4000, $delta);\n\
         file_put_contents(__DIR__ . '/ready.tmp', getmypid() . ' ' . $delta);\n\
         rename(__DIR__ . '/ready.tmp', __DIR__ . '/ready');\n\
         for ($i = 0; $i < 300 && !file_exists(__DIR__ . '/release'); $i++) {{ usleep(50000); }}\n\
         echo count($cache), ' ', strlen($cache[7]), ' ', $delta, ' ', memory_get_usage(), ' ', memory_get_peak_usage(), \"\\n\";\n"
    );
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `php script` in `dir` with (or without) the preload; returns the
/// process. Without it, the environment has the same variables and sizes
/// (`XX_PRELOAD` for `LD_PRELOAD`): PHP copies the environment into its own
/// memory, so `memory_get_usage()` depends on it.
pub(crate) fn spawn_php(dir: &Path, script: &Path, preload: bool, env: &[(&str, &str)]) -> Child {
    spawn_php_with(dir, script, preload, &lib().display().to_string(), env)
}

fn spawn_php_with(
    dir: &Path,
    script: &Path,
    preload: bool,
    ld_preload: &str,
    env: &[(&str, &str)],
) -> Child {
    let mut c = Command::new(php_bin());
    c.arg(script).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("HEAPLIVE_") || k == "USE_ZEND_ALLOC" || k == "LD_PRELOAD" {
            c.env_remove(k);
        }
    }
    c.env(
        if preload { "LD_PRELOAD" } else { "XX_PRELOAD" },
        ld_preload,
    )
    .env("HEAPLIVE_OUTPUT", dir.join("heaplive.%e.%p.%n.folded"))
    .env("HEAPLIVE_LOG", dir.join("heaplive.log"));
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", php_bin()))
}

/// Waits for the script's `ready` file: (pid, delta).
pub(crate) fn wait_ready(dir: &Path, child: &mut Child) -> (u32, u64) {
    let ctx = || log_of(dir);
    wait_for("the script's ready file", &ctx, || {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("php exited early: {}", early_exit(dir, child, st));
        }
        let t = std::fs::read_to_string(dir.join("ready")).ok()?;
        let (p, d) = t.trim().split_once(' ')?;
        Some((p.parse().ok()?, d.parse().ok()?))
    })
}

/// Everything that tells why php ended before its script was ready: the
/// raw wait status, php's stdout and stderr (where ld.so and php say
/// why), heaplive's log and the files left in `dir` (a core file?).
fn early_exit(dir: &Path, child: &mut Child, st: std::process::ExitStatus) -> String {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    format!(
        "{st} (raw wait status {:#x})\n--- stdout:\n{out}\n--- stderr:\n{err}\n--- heaplive.log:\n{}\n--- files: {files:?}",
        st.into_raw(),
        log_of(dir)
    )
}

pub(crate) fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default()
}

pub(crate) fn finish(dir: &Path, child: Child) -> Output {
    std::fs::write(dir.join("release"), "").unwrap();
    child.wait_with_output().unwrap()
}

/// Runs the cache script with the preload, dumps it by signal while it
/// holds the array, and returns (dump, delta, output).
fn cli_cache_run(dir: &Path, n: usize, env: &[(&str, &str)]) -> (Vec<Stack>, u64, Output) {
    require_php();
    let script = cache_script(dir, "build.php", n);
    let mut child = spawn_php(dir, &script, true, env);
    let (pid, delta) = wait_ready(dir, &mut child);
    kill(pid, libc::SIGUSR2);
    let file = wait_for("the signal dump", &|| log_of(dir), || {
        dumps_in_log(dir, pid, "signal").into_iter().next()
    });
    let out = finish(dir, child);
    assert!(out.status.success(), "{}\n{}", show(&out), log_of(dir));
    (parse_folded(&file), delta, out)
}

/// The same script in the same directory without the preload (after the
/// preloaded run): its output.
fn cli_plain_output(dir: &Path, script: &Path, ld_preload: &str, env: &[(&str, &str)]) -> String {
    let _ = std::fs::remove_file(dir.join("ready"));
    let _ = std::fs::remove_file(dir.join("release"));
    let mut child = spawn_php_with(dir, script, false, ld_preload, env);
    wait_ready(dir, &mut child);
    let out = finish(dir, child);
    assert!(out.status.success(), "{}", show(&out));
    stdout(&out)
}

fn plain_output(dir: &Path, env: &[(&str, &str)]) -> String {
    cli_plain_output(
        dir,
        &dir.join("build.php"),
        &lib().display().to_string(),
        env,
    )
}

/// The first signal dump written in `dir`.
fn dump_file(dir: &Path) -> PathBuf {
    let log = log_of(dir);
    log.lines()
        .find_map(|l| {
            l.split_once("]: signal dump ")?
                .1
                .split_once(": ")
                .map(|(p, _)| PathBuf::from(p))
        })
        .unwrap_or_else(|| panic!("no signal dump in the log\n{log}"))
}

fn zend_mm_bytes(stacks: &[Stack]) -> u64 {
    stacks
        .iter()
        .filter(|s| s.leaf() == "[zend_mm]")
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

// ---------------------------------------------------------------------------
// php-cli

/// Sampled (64 KiB): the array's 48 MiB under `build_cache (cache.php:6)`,
/// within 5 standard errors (sd = sqrt(48 MiB * 64 KiB), 3.6%; a false
/// failure about 6e-7 of the time).
#[test]
fn cli_build_cache_is_attributed_to_its_php_function_and_line() {
    let dir = tempdir("php-cli-cache");
    let env = [("HEAPLIVE_SAMPLE_INTERVAL", "64K")];
    let (stacks, delta, out) = cli_cache_run(&dir, STRINGS, &env);
    assert!(delta >= 48 << 20, "the script's own delta {delta}");
    let under = bytes_under(&stacks, CACHE_FRAME);
    assert_within(under, delta, 64 << 10, 5.0, CACHE_FRAME);
    // Spliced where the VM runs: native root, PHP frames root first, then
    // the engine's frames and the ZendMM leaf.
    let s = stacks
        .iter()
        .filter(|s| s.has(CACHE_FRAME))
        .max_by_key(|s| s.bytes)
        .unwrap();
    let at = |f: &dyn Fn(&str) -> bool| s.frames.iter().position(|x| f(x));
    let main = at(&|f| f == "_start").expect("native root");
    let php_main = at(&|f| f.starts_with("{main} (build.php:")).expect("{main}");
    let cache = at(&|f| f == CACHE_FRAME).unwrap();
    assert!(
        main < php_main && php_main < cache,
        "{}",
        s.frames.join(";")
    );
    assert_eq!(s.leaf(), "[zend_mm]", "{}", s.frames.join(";"));
    assert!(
        stacks.iter().any(|s| s.has("str_repeat [internal]")),
        "internal functions are marked\n{}",
        top_stacks(&stacks, 10)
    );
    let (major, minor) = php_version();
    assert!(
        log_of(&dir).contains(&format!("PHP {major}.{minor}.")),
        "{}",
        log_of(&dir)
    );
    // `heaplive top --php`: the PHP frames alone, the array first.
    let top = Command::new(heaplive_bin())
        .args(["top", "--php", "-n", "1", "--width", "0"])
        .arg(dump_file(&dir))
        .output()
        .unwrap();
    assert!(
        stdout(&top).lines().nth(1).is_some_and(|l| l.ends_with(
            "[zend_mm] <- str_repeat [internal] <- build_cache (cache.php:6) <- {main} (build.php:4) <- [cli build.php]"
        )),
        "{}",
        show(&top)
    );
    // NAME.maps.txt beside the dump: the array's pages are resident ZendMM.
    check_maps_file(&dump_file(&dir), delta);
    // PHP's output (memory_get_usage and peak included) is unchanged.
    assert_eq!(stdout(&out), plain_output(&dir, &env));
}

/// `NAME.maps.txt` beside the dump `folded`: a row per kind whose bytes add
/// up to the RSS row, and ZendMM holding (resident) the `held` bytes of
/// the script's array, give or take two chunks whose mappings the kernel
/// may have merged with a neighbour.
fn check_maps_file(folded: &Path, held: u64) {
    let name = folded.to_str().unwrap().strip_suffix(".folded").unwrap();
    let maps = std::path::PathBuf::from(format!("{name}.maps.txt"));
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

/// Exact mode: the array's bytes exactly, as memory_get_usage() counts them.
#[test]
fn cli_exact_mode_matches_memory_get_usage() {
    let dir = tempdir("php-cli-exact");
    let env = [("HEAPLIVE_SAMPLE_INTERVAL", "1")];
    let (stacks, delta, out) = cli_cache_run(&dir, 2048, &env);
    let under: u64 = stacks
        .iter()
        .filter(|s| s.frames.iter().any(|f| f.starts_with("build_cache (")))
        .map(|s| s.bytes)
        .sum();
    assert_eq!(
        under,
        delta,
        "exact mode: build_cache's live ZendMM bytes vs memory_get_usage() delta\n{}",
        top_stacks(&stacks, 10)
    );
    assert_eq!(bytes_under(&stacks, CACHE_FRAME), delta);
    assert_eq!(stdout(&out), plain_output(&dir, &env));
}

/// Strings grown by `.=` (erealloc, mostly in place): exact mode matches
/// the script's memory_get_usage() delta, and sampled mode is within 5
/// standard errors of it (the bound of `assert_within`, conservative here).
#[test]
fn cli_strings_grown_by_erealloc_are_counted_right() {
    require_php();
    for (interval, tag) in [("1", "exact"), ("64K", "sampled")] {
        let dir = tempdir(&format!("php-cli-grow-{tag}"));
        let script = dir.join("grow.php");
        std::fs::write(
            &script,
            "<?php\n\
             function grow(int $n, int $len, &$delta) {\n\
                 $before = memory_get_usage(); $a = [];\n\
                 for ($i = 0; $i < $n; $i++) { $s = '';\n\
                     while (strlen($s) < $len) { $s .= str_repeat(chr(97 + $i % 26), 1000); }\n\
                     $a[] = $s; }\n\
                 $delta = memory_get_usage() - $before;\n\
                 return $a;\n\
             }\n\
             $delta = 0; $keep = grow(24, 1 << 20, $delta);\n\
             file_put_contents(__DIR__ . '/ready', getmypid() . ' ' . $delta);\n\
             for ($i = 0; $i < 300 && !file_exists(__DIR__ . '/release'); $i++) { usleep(50000); }\n\
             echo count($keep), \"\\n\";\n",
        )
        .unwrap();
        let env = [("HEAPLIVE_SAMPLE_INTERVAL", interval)];
        let mut child = spawn_php(&dir, &script, true, &env);
        let (pid, delta) = wait_ready(&dir, &mut child);
        kill(pid, libc::SIGUSR2);
        let file = wait_for("the signal dump", &|| log_of(&dir), || {
            dumps_in_log(&dir, pid, "signal").into_iter().next()
        });
        let out = finish(&dir, child);
        assert_eq!(stdout(&out), "24\n", "{}", show(&out));
        let stacks = parse_folded(&file);
        let under: u64 = stacks
            .iter()
            .filter(|s| s.frames.iter().any(|f| f.starts_with("grow (grow.php:")))
            .map(|s| s.bytes)
            .sum();
        assert!(delta >= 24 << 20, "delta {delta}");
        if interval == "1" {
            assert_eq!(under, delta, "{}", top_stacks(&stacks, 10));
        } else {
            assert_within(under, delta, 64 << 10, 5.0, "strings grown by .=");
        }
    }
}

/// An sqlite3 query (malloc inside libsqlite3) under a PHP function: the PHP
/// frame sits above the sqlite frames.
#[test]
fn cli_sqlite_malloc_shows_under_the_php_function() {
    require_php();
    let dir = tempdir("php-cli-sqlite");
    let script = dir.join("query.php");
    std::fs::write(
        &script,
        "<?php\n\
         function run_query() {\n\
             $db = new SQLite3(':memory:');\n\
             $db->exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)');\n\
             $db->exec('INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) SELECT randomblob(250) FROM c');\n\
             return $db;\n\
         }\n\
         $db = run_query();\n\
         file_put_contents(__DIR__ . '/ready', getmypid() . ' 0');\n\
         for ($i = 0; $i < 300 && !file_exists(__DIR__ . '/release'); $i++) { usleep(50000); }\n\
         echo 'rows ', $db->querySingle('SELECT count(*) FROM t'), \"\\n\";\n",
    )
    .unwrap();
    let mut child = spawn_php(&dir, &script, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")]);
    let (pid, _) = wait_ready(&dir, &mut child);
    kill(pid, libc::SIGUSR2);
    let file = wait_for("the signal dump", &|| log_of(&dir), || {
        dumps_in_log(&dir, pid, "signal").into_iter().next()
    });
    let out = finish(&dir, child);
    assert_eq!(stdout(&out), "rows 40000\n", "{}", show(&out));
    let stacks = parse_folded(&file);
    let mixed: u64 = stacks
        .iter()
        .filter(|s| {
            let php = s.frames.iter().position(|f| f == "run_query (query.php:5)");
            let sq = s.frames.iter().rposition(|f| f.starts_with("sqlite3"));
            matches!((php, sq), (Some(p), Some(q)) if p < q)
        })
        .map(|s| s.bytes)
        .sum();
    assert!(
        mixed >= 5_000_000,
        "about 10 MB of sqlite pages under run_query (query.php:5): {mixed}\n{}",
        top_stacks(&stacks, 10)
    );
}

/// The PHP frames of a stack, root first, joined by `;`.
fn php_only(s: &Stack) -> String {
    s.frames
        .iter()
        .filter(|f| f.contains(".php:") || f.ends_with(" [internal]"))
        .cloned()
        .collect::<Vec<_>>()
        .join(";")
}

/// Generators (with `yield from`), a fiber, a closure called by an
/// internal function, a static method and an include each give the frames
/// a PHP user expects; nothing reads as `[php?]`.
#[test]
fn cli_generators_fibers_closures_and_includes_give_sensible_frames() {
    require_php();
    let dir = tempdir("php-cli-frames");
    std::fs::write(
        dir.join("incl.php"),
        "<?php\nreturn str_repeat('i', 7000000);\n",
    )
    .unwrap();
    let script = dir.join("frames.php");
    // Fibers came with PHP 8.1: before, lines 6 and 7 hold the same string
    // without one.
    let fibers = php_version() >= (8, 1);
    let fiber_lines = if fibers {
        "$f = new Fiber(function () use (&$keep) { $keep[] = str_repeat('f', 5000000); Fiber::suspend(1); });\n\
         $f->start();\n"
    } else {
        "$keep[] = str_repeat('f', 5000000);\n\
         $f = null;\n"
    };
    std::fs::write(
        &script,
        "<?php\n\
         function inner_gen() { for ($i = 0; $i < 3; $i++) { yield str_repeat('g', 3000000 + $i); } }\n\
         function outer_gen() { yield from inner_gen(); }\n\
         $keep = [];\n\
         foreach (outer_gen() as $v) { $keep[] = $v; }\n"
            .to_string()
            + fiber_lines
            + "\
         $c = function ($n) { return str_repeat('c', $n); };\n\
         $keep[] = array_map($c, [4000000])[0];\n\
         class K { static function m() { return str_repeat('k', 6000000); } }\n\
         $keep[] = K::m();\n\
         $keep[] = require __DIR__ . '/incl.php';\n\
         file_put_contents(__DIR__ . '/ready', getmypid() . ' 0');\n\
         for ($i = 0; $i < 300 && !file_exists(__DIR__ . '/release'); $i++) { usleep(50000); }\n\
         echo count($keep), \"\\n\";\n",
    )
    .unwrap();
    let mut child = spawn_php(&dir, &script, true, &[]);
    let (pid, _) = wait_ready(&dir, &mut child);
    kill(pid, libc::SIGUSR2);
    let file = wait_for("the signal dump", &|| log_of(&dir), || {
        dumps_in_log(&dir, pid, "signal").into_iter().next()
    });
    let out = finish(&dir, child);
    assert_eq!(stdout(&out), "7\n", "{}", show(&out));
    let stacks = parse_folded(&file);
    let php: Vec<String> = stacks.iter().map(php_only).collect();
    for want in [
        "{main} (frames.php:5);inner_gen (frames.php:2);str_repeat [internal]",
        if fibers {
            "{main} (frames.php:7);Fiber::start [internal];{closure:frames.php:6-6} (frames.php:6);str_repeat [internal]"
        } else {
            "{main} (frames.php:6);str_repeat [internal]"
        },
        "{main} (frames.php:9);array_map [internal];{closure:frames.php:8-8} (frames.php:8);str_repeat [internal]",
        "{main} (frames.php:11);K::m (frames.php:10);str_repeat [internal]",
        "{main} (frames.php:12);{include} (incl.php:2);str_repeat [internal]",
    ] {
        assert!(
            php.iter().any(|p| p == want),
            "no stack with PHP frames {want}\n{}",
            php.join("\n")
        );
    }
    assert!(
        !stacks.iter().any(|s| s.has("[php?]")),
        "{}",
        top_stacks(&stacks, 20)
    );
}

#[test]
fn cli_use_zend_alloc_0_gives_php_frames_on_malloc_and_no_zend_mm_hooks() {
    let dir = tempdir("php-cli-tracked");
    let env = [("USE_ZEND_ALLOC", "0"), ("HEAPLIVE_SAMPLE_INTERVAL", "64K")];
    let (stacks, _delta, out) = cli_cache_run(&dir, 2048, &env);
    assert_eq!(zend_mm_bytes(&stacks), 0, "no ZendMM hooks");
    // 2048 strings of 4,025 bytes through malloc.
    assert_within(
        bytes_under(&stacks, CACHE_FRAME),
        2048 * 4025,
        64 << 10,
        5.0,
        "malloc under build_cache",
    );
    assert!(
        log_of(&dir).contains("USE_ZEND_ALLOC=0"),
        "{}",
        log_of(&dir)
    );
    assert_eq!(stdout(&out), plain_output(&dir, &env));
}

#[test]
fn cli_heaplive_php_off_is_as_before() {
    let dir = tempdir("php-cli-off");
    let env = [("HEAPLIVE_PHP", "off"), ("HEAPLIVE_SAMPLE_INTERVAL", "64K")];
    let (stacks, _, out) = cli_cache_run(&dir, 2048, &env);
    for s in &stacks {
        assert!(
            !s.frames
                .iter()
                .any(|f| f.contains(".php:") || f == "[zend_mm]" || f.ends_with("[internal]")),
            "HEAPLIVE_PHP=off: {}",
            s.frames.join(";")
        );
    }
    assert_eq!(stdout(&out), plain_output(&dir, &env));
    // The module shows in `php -m` only when PHP mode is on.
    let m = |v: &str| {
        let o = preloaded_command(&dir, Path::new(&php_bin()), &["-m"], &[("HEAPLIVE_PHP", v)])
            .output()
            .unwrap();
        stdout(&o).lines().any(|l| l == "heaplive")
    };
    assert!(!m("off"));
    assert!(m("auto"));
}

/// Another ZendMM hooker (a stand-in for Datadog's profiler or memprof)
/// installed its handlers first: heaplive leaves ZendMM alone and says so.
#[test]
fn cli_another_zend_mm_hooker_makes_heaplive_back_off() {
    require_php();
    let dir = tempdir("php-cli-other");
    let hooker = compile(
        "php_other_hooker.c",
        "libother.so",
        &dir,
        &["-shared", "-fPIC"],
    );
    let script = cache_script(&dir, "build.php", 2048);
    let preload = format!("{} {}", hooker.display(), lib().display());
    let mut child = spawn_php_with(&dir, &script, true, &preload, &[]);
    let (pid, _) = wait_ready(&dir, &mut child);
    kill(pid, libc::SIGUSR2);
    let file = wait_for("the signal dump", &|| log_of(&dir), || {
        dumps_in_log(&dir, pid, "signal").into_iter().next()
    });
    let out = finish(&dir, child);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        stderr(&out).contains("other-hooker: ") && !stderr(&out).contains("other-hooker: 0 "),
        "the other hooker ran\n{}",
        show(&out)
    );
    assert!(
        log_of(&dir).contains("another ZendMM hook is installed"),
        "{}",
        log_of(&dir)
    );
    assert_eq!(zend_mm_bytes(&parse_folded(&file)), 0);
    assert_eq!(stdout(&out), cli_plain_output(&dir, &script, &preload, &[]));
}

/// gc_mem_caches() gives ZendMM's cached memory back while heaplive's
/// handlers are installed, as it does without them.
#[test]
fn cli_gc_mem_caches_is_unchanged() {
    require_php();
    let dir = tempdir("php-cli-gc");
    let script = dir.join("gc.php");
    std::fs::write(
        &script,
        "<?php\n\
         $a = []; for ($i = 0; $i < 20000; $i++) { $a[] = str_repeat('z', 100 + $i % 50); }\n\
         unset($a);\n\
         echo gc_mem_caches(), ' ', memory_get_usage(), ' ', memory_get_usage(true), \"\\n\";\n",
    )
    .unwrap();
    let run = |preload: bool| {
        let child = spawn_php(&dir, &script, preload, &[]);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", show(&out));
        stdout(&out)
    };
    let plain = run(false);
    assert!(
        !plain.starts_with("0 "),
        "without heaplive, gc_mem_caches frees something: {plain}"
    );
    assert_eq!(run(true), plain);
}

/// A seccomp filter that kills on process_vm_readv (systemd's
/// SystemCallFilter= without SystemCallErrorNumber=): heaplive finds out in
/// a throw-away child, turns PHP frames off with one line, and the script
/// runs as without heaplive.
#[test]
fn cli_seccomp_filter_that_kills_turns_php_frames_off() {
    require_php();
    let dir = tempdir("php-cli-seccomp");
    let filter = compile(
        "seccomp_kill_vm_readv.c",
        "libseccomp_kill.so",
        &dir,
        &["-shared", "-fPIC"],
    );
    let script = cache_script(&dir, "build.php", 256);
    let preload = format!("{} {}", filter.display(), lib().display());
    let mut child = spawn_php_with(&dir, &script, true, &preload, &[]);
    let (pid, _) = wait_ready(&dir, &mut child);
    kill(pid, libc::SIGUSR2);
    let file = wait_for("the signal dump", &|| log_of(&dir), || {
        dumps_in_log(&dir, pid, "signal").into_iter().next()
    });
    let out = finish(&dir, child);
    assert!(out.status.success(), "{}\n{}", show(&out), log_of(&dir));
    assert!(
        log_of(&dir).contains("a seccomp filter refuses here: PHP frames are off"),
        "{}",
        log_of(&dir)
    );
    let stacks = parse_folded(&file);
    assert!(
        !stacks
            .iter()
            .any(|s| s.frames.iter().any(|f| f.contains(".php:"))),
        "{}",
        top_stacks(&stacks, 5)
    );
    assert_eq!(stdout(&out), cli_plain_output(&dir, &script, &preload, &[]));
}

/// memory_limit: the same fatal error at the same line with and without
/// heaplive (php-cli).
#[test]
fn cli_memory_limit_error_is_unchanged() {
    require_php();
    let dir = tempdir("php-cli-limit");
    let script = dir.join("limit.php");
    std::fs::write(&script, LIMIT_PHP).unwrap();
    let run = |preload: bool| {
        let mut c = if preload {
            preloaded_command(
                &dir,
                Path::new(&php_bin()),
                &[],
                &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")],
            )
        } else {
            let mut c = Command::new(php_bin());
            c.current_dir(&dir).env_remove("LD_PRELOAD");
            c
        };
        c.args([
            "-d",
            "display_errors=stderr",
            "-d",
            "log_errors=0",
            "-d",
            "memory_limit=32M",
        ])
        .arg(&script)
        .env("HEAPLIVE_LOG", dir.join("heaplive.log"))
        .output()
        .unwrap()
    };
    let plain = run(false);
    let with = run(true);
    assert!(
        stderr(&plain).contains("Allowed memory size of 33554432 bytes exhausted"),
        "{}",
        show(&plain)
    );
    assert_eq!(stderr(&with), stderr(&plain));
    assert_eq!(stdout(&with), stdout(&plain));
    assert_eq!(with.status.code(), plain.status.code());
}

const LIMIT_PHP: &str = "<?php\n\
// memory_limit = 32M from the command line or the pool.\n\
register_shutdown_function(function () { echo 'peak ', memory_get_peak_usage() > 30000000 ? 'high' : 'low', \"\\n\"; });\n\
$a = [];\n\
for ($i = 0; ; $i++) { $a[] = str_repeat('y', 10000 + $i % 7); }\n";

// ---------------------------------------------------------------------------
// php-fpm

fn holding(dir: &Path, name: &str, n: usize) -> PathBuf {
    std::fs::write(dir.join("cache.php"), CACHE_PHP).unwrap();
    let busy = dir.join("busy.pid");
    let release = dir.join("release");
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "<?php\n\
             require __DIR__ . '/cache.php';\n\
             $delta = 0;\n\
             $cache = build_cache({n}, 4000, $delta);\n\
             file_put_contents('{busy}.tmp', getmypid());\n\
             rename('{busy}.tmp', '{busy}');\n\
             for ($i = 0; $i < 300 && !file_exists('{release}'); $i++) {{ usleep(50000); }}\n\
             echo count($cache), ' ', $delta, \"\\n\";\n",
            busy = busy.display(),
            release = release.display()
        ),
    )
    .unwrap();
    p
}

/// One held request: dumps its worker mid-request and the other worker
/// idle; returns (busy dump, idle dump, delta, busy pid).
fn fpm_held_request(
    fpm: &Fpm,
    dir: &Path,
    script: &Path,
) -> (Vec<Stack>, Option<Vec<Stack>>, u64, u32) {
    let _ = std::fs::remove_file(dir.join("busy.pid"));
    let _ = std::fs::remove_file(dir.join("release"));
    let ctx = fpm.ctx();
    let (req, busy) = crate::php_fpm::start_holding_request(fpm, script);
    let workers = crate::php_fpm::children_of(fpm.pid());
    let idle = workers.iter().copied().find(|&w| w != busy);
    let nb = dumps_in_log(dir, busy, "signal").len();
    kill(busy, libc::SIGUSR2);
    let busy_file = wait_for("the busy worker's dump", &ctx, || {
        dumps_in_log(dir, busy, "signal").get(nb).cloned()
    });
    let idle_stacks = idle.map(|w| {
        let ni = dumps_in_log(dir, w, "signal").len();
        kill(w, libc::SIGUSR2);
        let f = wait_for("the idle worker's dump", &ctx, || {
            dumps_in_log(dir, w, "signal").get(ni).cloned()
        });
        parse_folded(&f)
    });
    std::fs::write(dir.join("release"), "").unwrap();
    let resp = req
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
    let body = resp.body().trim().to_string();
    let (count, delta) = body
        .split_once(' ')
        .unwrap_or_else(|| panic!("answer {:?} / {:?}\n{}", resp.stdout, resp.stderr, ctx()));
    assert!(count.parse::<usize>().is_ok(), "{body}");
    (
        parse_folded(&busy_file),
        idle_stacks,
        delta.parse().unwrap(),
        busy,
    )
}

#[test]
fn fpm_build_cache_by_php_function_mid_request_and_idle() {
    let dir = tempdir("php-fpm-cache");
    let fpm = Fpm::start(&dir, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")]);
    let ctx = fpm.ctx();
    let script = holding(&dir, "build.php", STRINGS);
    let (busy, idle, delta, pid) = fpm_held_request(&fpm, &dir, &script);
    assert_within(
        bytes_under(&busy, CACHE_FRAME),
        delta,
        64 << 10,
        5.0,
        "php-fpm, mid-request",
    );
    // The log line breaks RSS down: the 48 MiB are resident ZendMM chunks.
    let line = log_of_fpm(&dir)
        .lines()
        .find(|l| l.starts_with(&format!("heaplive[{pid}]: signal dump")))
        .unwrap()
        .to_string();
    let zend_mib: f64 = line
        .split_once("ZendMM ")
        .and_then(|(_, r)| r.split_once(" MiB"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no ZendMM share in {line}"));
    // Resident ZendMM chunks hold the array; a chunk whose mapping the
    // kernel merged with a neighbouring anonymous one counts as "other
    // anonymous", so allow a chunk or two of slack.
    assert!(zend_mib >= 44.0, "{line}");
    check_maps_file(&dumps_in_log(&dir, pid, "signal")[0], delta);
    let idle = idle.expect("two workers");
    assert_eq!(
        bytes_under(&idle, CACHE_FRAME),
        0,
        "{}",
        top_stacks(&idle, 5)
    );
    assert_eq!(
        zend_mm_bytes(&idle),
        0,
        "an idle worker holds no ZendMM samples"
    );
    // After the request: its ZendMM samples are gone.
    let n = dumps_in_log(&dir, pid, "signal").len();
    kill(pid, libc::SIGUSR2);
    let after = wait_for("the dump after the request", &ctx, || {
        dumps_in_log(&dir, pid, "signal").get(n).cloned()
    });
    let after = parse_folded(&after);
    assert_eq!(zend_mm_bytes(&after), 0, "{}", top_stacks(&after, 5));
    assert!(alive(pid));
    assert!(
        log_of_fpm(&dir).contains("ZendMM samples and PHP frames on"),
        "{}",
        ctx()
    );
}

fn log_of_fpm(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default()
}

#[test]
fn fpm_exact_mode_matches_memory_get_usage() {
    let dir = tempdir("php-fpm-exact");
    let fpm = Fpm::start(&dir, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    let script = holding(&dir, "build.php", 2048);
    let (busy, _, delta, _) = fpm_held_request(&fpm, &dir, &script);
    let under: u64 = busy
        .iter()
        .filter(|s| s.frames.iter().any(|f| f.starts_with("build_cache (")))
        .map(|s| s.bytes)
        .sum();
    assert_eq!(under, delta, "{}", top_stacks(&busy, 10));
}

/// 500 requests each building and dropping 4 MiB on one worker: the peak
/// at request start is what it is without heaplive, nothing of them stays
/// live, and neither the worker's RSS nor heaplive's sample count grows.
#[test]
fn fpm_per_request_reset() {
    let dir = tempdir("php-fpm-reset");
    let script = dir.join("reset.php");
    std::fs::write(
        &script,
        "<?php\n\
         $p0 = memory_get_peak_usage(); $u0 = memory_get_usage();\n\
         $a = []; for ($i = 0; $i < 1024; $i++) { $a[] = str_repeat('x', 4000 + $i % 3); }\n\
         $p1 = memory_get_peak_usage(); unset($a);\n\
         echo $p0, ' ', $u0, ' ', $p1, ' ', getmypid(), \"\\n\";\n",
    )
    .unwrap();
    age(&script);
    let run = |preload: bool, tag: &str| {
        let d = dir.join(tag);
        std::fs::create_dir_all(&d).unwrap();
        let opts = FpmOpts {
            children: 1,
            preload,
            ..FpmOpts::default()
        };
        let fpm = Fpm::start_opts(&d, true, &[], &opts);
        let mut lines = Vec::new();
        let mut rss = Vec::new();
        let mut samples = Vec::new();
        for i in 0..500 {
            let r = fpm.get(&script);
            lines.push(r.body().trim().to_string());
            if preload && (i == 99 || i == 499) {
                let pid: u32 = lines[i].rsplit(' ').next().unwrap().parse().unwrap();
                if i == 499 {
                    rss.push(vm_rss(pid));
                }
                let n = dumps_in_log(&d, pid, "signal").len();
                kill(pid, libc::SIGUSR2);
                let f = wait_for("a dump between requests", &fpm.ctx(), || {
                    dumps_in_log(&d, pid, "signal").get(n).cloned()
                });
                let st = parse_folded(&f);
                assert_eq!(
                    zend_mm_bytes(&st),
                    0,
                    "after request {}: {}",
                    i + 1,
                    top_stacks(&st, 5)
                );
                samples.push(samples_in_log(&d, pid).unwrap());
                // After the first dump: its symbol tables stay cached.
                if i == 99 {
                    rss.push(vm_rss(pid));
                }
            }
        }
        (lines, rss, samples)
    };
    let (with, rss, samples) = run(true, "with");
    let (without, _, _) = run(false, "wout");
    let strip = |v: &[String]| -> Vec<String> {
        v.iter()
            .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
            .collect()
    };
    assert_eq!(
        strip(&with),
        strip(&without),
        "memory_get_peak_usage/memory_get_usage per request, with and without heaplive"
    );
    assert!(
        rss[1] <= rss[0] + (4 << 20),
        "worker RSS grew from {} to {} between requests 100 and 500",
        rss[0],
        rss[1]
    );
    assert!(
        samples[1] <= samples[0] + 16,
        "heaplive's live samples grew from {} to {}",
        samples[0],
        samples[1]
    );
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

fn vm_rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// The sample count of `pid`'s last dump, from its log line.
fn samples_in_log(dir: &Path, pid: u32) -> Option<u64> {
    let log = std::fs::read_to_string(dir.join("heaplive.log")).ok()?;
    let l = log
        .lines()
        .rfind(|l| l.starts_with(&format!("heaplive[{pid}]: signal dump")))?;
    let i = l.find(" samples over")?;
    let head = &l[..i];
    let n = head.rsplit(' ').next()?;
    n.replace(',', "").parse().ok()
}

/// memory_limit = 32M in php-fpm: the same fatal error and line with and
/// without heaplive; the worker's next request is profiled as usual.
#[test]
fn fpm_memory_limit_then_next_request_is_profiled() {
    let dir = tempdir("php-fpm-limit");
    let limit = dir.join("limit.php");
    std::fs::write(&limit, LIMIT_PHP).unwrap();
    age(&limit);
    let err_of = |preload: bool, tag: &str| {
        let d = dir.join(tag);
        std::fs::create_dir_all(&d).unwrap();
        let opts = FpmOpts {
            children: 1,
            preload,
            memory_limit: "32M",
            ..FpmOpts::default()
        };
        let fpm = Fpm::start_opts(&d, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")], &opts);
        let r = fpm.get(&limit);
        (r.stdout.clone(), r.stderr.clone(), fpm)
    };
    let (out0, err0, _plain) = err_of(false, "wout");
    let (out1, err1, fpm) = err_of(true, "with");
    assert!(
        err0.contains("Allowed memory size of 33554432 bytes exhausted")
            && err0.contains("limit.php on line 5"),
        "{err0:?}"
    );
    assert_eq!(err1, err0);
    assert_eq!(out1, out0);
    // The next request on that (only) worker.
    let d = dir.join("with");
    let script = holding(&d, "build.php", 4096);
    let (busy, _, delta, _) = fpm_held_request(&fpm, &d, &script);
    assert_within(
        bytes_under(&busy, CACHE_FRAME),
        delta,
        64 << 10,
        5.0,
        "the request after the memory_limit error",
    );
    let _ = Duration::from_secs(0);
}

/// A script that prints `memory_get_usage()`, `memory_get_peak_usage()`
/// and both with `true` (PHP's own accounting) at several points: small
/// blocks, strings grown by erealloc, a huge block, frees, objects, a
/// peak reset.
const MEMORY_FIGURES_PHP: &str = "<?php\n\
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

/// Nothing of heaplive's shows in PHP's own accounting (issue 26, target
/// 5): what the script prints is the same with and without the preload, at
/// the default interval, at 64 KiB, in exact mode and with
/// `HEAPLIVE_PHP=native`, opcache on and off. Without the preload the
/// environment holds the same variables (PHP copies it into $_SERVER, in
/// its own memory: a different environment alone changes these figures;
/// that was the difference issue 26 saw).
#[test]
fn cli_memory_figures_are_identical_with_and_without_heaplive() {
    require_php();
    let dir = tempdir("php-cli-memory-figures");
    let script = dir.join("figures.php");
    std::fs::write(&script, MEMORY_FIGURES_PHP).unwrap();
    let run = |preload: bool, opcache: &str, env: &[(&str, &str)]| {
        let mut c = Command::new(php_bin());
        // opcache.file_update_protection=0: by default opcache does not
        // cache a script changed less than 2 s before the request, so a
        // run within 2 s of writing it (its op_arrays in ZendMM memory)
        // and one after (in shared memory) differ by some KiB without any
        // preload: the test failed so under load.
        c.args(["-d", opcache, "-d", "memory_limit=256M"])
            .args(["-d", "opcache.file_update_protection=0"])
            .arg(&script)
            .current_dir(&dir);
        for (k, _) in std::env::vars() {
            if k.starts_with("HEAPLIVE_") || k == "USE_ZEND_ALLOC" || k == "LD_PRELOAD" {
                c.env_remove(k);
            }
        }
        c.env(if preload { "LD_PRELOAD" } else { "XX_PRELOAD" }, lib())
            .env("HEAPLIVE_OUTPUT", dir.join("heaplive.%e.%p.%n.folded"))
            .env("HEAPLIVE_LOG", dir.join("heaplive.log"));
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", show(&out));
        stdout(&out)
    };
    for opcache in ["opcache.enable_cli=1", "opcache.enable_cli=0"] {
        for env in [
            &[][..],
            &[("HEAPLIVE_SAMPLE_INTERVAL", "65536")][..],
            &[("HEAPLIVE_SAMPLE_INTERVAL", "1")][..],
            &[("HEAPLIVE_PHP", "native")][..],
        ] {
            let plain = run(false, opcache, env);
            assert_eq!(plain.lines().count(), 8, "{plain}");
            let with = run(true, opcache, env);
            assert_eq!(
                with,
                plain,
                "{opcache} {env:?}: PHP's memory figures with the preload (left) and without\n{}",
                log_of(&dir)
            );
        }
    }
    assert!(
        log_of(&dir).contains("ZendMM samples and PHP frames on"),
        "PHP mode was on: {}",
        log_of(&dir)
    );
}

/// The same under php-fpm: several requests on one worker, with and
/// without the preload, at the default interval and in exact mode.
#[test]
fn fpm_memory_figures_are_identical_with_and_without_heaplive() {
    let dir = tempdir("php-fpm-memory-figures");
    let script = dir.join("figures.php");
    std::fs::write(&script, MEMORY_FIGURES_PHP).unwrap();
    age(&script);
    let run = |preload: bool, tag: &str, env: &[(&str, &str)]| {
        let d = dir.join(tag);
        std::fs::create_dir_all(&d).unwrap();
        let opts = FpmOpts {
            children: 1,
            preload,
            ..FpmOpts::default()
        };
        let fpm = Fpm::start_opts(&d, true, env, &opts);
        (0..4)
            .map(|_| fpm.get(&script).body().trim().to_string())
            .collect::<Vec<_>>()
    };
    let l = lib().display().to_string();
    for (tag, env) in [
        ("default", &[][..]),
        ("exact", &[("HEAPLIVE_SAMPLE_INTERVAL", "1")][..]),
    ] {
        // The master's environment with the same variables and sizes
        // (XX_PRELOAD for LD_PRELOAD), as in the php-cli test, and
        // directories of the same length: the first request's figures
        // depend on both (PHP keeps copies of the paths in its config).
        let mut plain_env = vec![("XX_PRELOAD", l.as_str())];
        plain_env.extend_from_slice(env);
        let plain = run(false, &format!("{tag}-p"), &plain_env);
        assert_eq!(plain[1].lines().count(), 8, "{plain:?}");
        assert_eq!(
            run(true, &format!("{tag}-h"), env),
            plain,
            "{tag}: PHP's memory figures with the preload (left) and without"
        );
    }
}

// ---------------------------------------------------------------------------
// PHP frames read in place (issue 26): checked against process_vm_readv.

/// Included templates whose top-level op_arrays are freed after each
/// include (no opcache on the CLI), so that the next one gets the same
/// addresses: a name cached by address alone would be the first file's.
fn odd_templates(dir: &Path) {
    for i in 1..=6 {
        std::fs::write(
            dir.join(format!("tpl{i}.php")),
            format!("<?php\n$t = str_repeat('t{i}', 1000 + mt_rand(1, 9));\nreturn strlen($t) + count([{i}, 2, 3]);\n"),
        )
        .unwrap();
    }
}

/// Frames a walk may find torn or odd: generators (`yield from`), fibers
/// switching back and forth (8.1+), an allocation in a function's prologue
/// (default values, a big array literal), an exception unwinding through
/// frames, includes whose op_arrays are freed and reused, closures rebound
/// to other classes, `__call`/`__callStatic` trampolines, and `exit()` deep
/// in the stack (status 3).
const ODD_PHP: &str = r#"<?php
function inner_gen($k) { for ($i = 0; $i < 3; $i++) { yield str_repeat('g', 3000 + $i + $k); } }
function outer_gen() { yield from inner_gen(1); yield from inner_gen(2); }
$keep = [];
foreach (outer_gen() as $v) { $keep[] = $v; }
if (PHP_VERSION_ID >= 80100) { $fibers = [];
for ($f = 0; $f < 3; $f++) { $fibers[] = new Fiber(function ($n) use (&$keep) {
        for ($i = 0; $i < 4; $i++) { $keep[] = str_repeat('f', 2000 + $n + $i); $n = Fiber::suspend($i); } }); }
foreach ($fibers as $i => $fb) { $fb->start($i); }
for ($r = 0; $r < 4; $r++) { foreach ($fibers as $i => $fb) { if (!$fb->isTerminated()) $fb->resume($r); } }
} else { for ($i = 0; $i < 12; $i++) { $keep[] = str_repeat('f', 2000 + $i); } }
function defaults($a = [1, 2, 3, 4, 5, 6, 7, 8], $b = ['x' => 1, 'y' => 2, 'z' => [K::C, K::C, 3]], $c = PHP_INT_MAX, $d = 'd') {
    $big = [str_repeat($d, 100), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, [1, [2, [3]]]];
    return count($a) + count($b) + count($big);
}
for ($i = 0; $i < 50; $i++) { $keep[] = defaults(); }
function thrower($d) { $x = str_repeat('e', 500 + $d); if ($d == 0) throw new RuntimeException($x); return thrower($d - 1) . $x; }
for ($i = 0; $i < 20; $i++) { try { thrower(8); } catch (RuntimeException $e) { $keep[] = strlen($e->getMessage()); } }
for ($r = 0; $r < 3; $r++) { for ($i = 1; $i <= 6; $i++) { $keep[] = include __DIR__ . "/tpl$i.php"; } }
class A { public $v = 'a'; } class B { public $v = 'b'; } class K { const C = 'k'; }
class M { function __call($n, $args) { return str_repeat($n, 300); } static function __callStatic($n, $a) { return str_repeat($n, 200); } }
$cl = function () { return str_repeat($this->v, 700); };
for ($i = 0; $i < 10; $i++) { $keep[] = Closure::bind($cl, $i % 2 ? new A : new B, $i % 2 ? A::class : B::class)(); }
$m = new M;
foreach (['alpha', 'beta', 'gamma'] as $n) { $keep[] = $m->$n(); $keep[] = M::$n(); }
$keep[] = array_map(function ($x) { return str_repeat('m', $x); }, [100, 200, 300]);
echo count($keep), "\n";
function deep($d) { $s = str_repeat('x', 100 + $d); if ($d == 0) { echo "bye\n"; exit(3); } return deep($d - 1) . $s; }
deep(30);
"#;

/// Runs odd.php (with `php_args` before the script) in exact mode with
/// HEAPLIVE_UNWIND=check, where every PHP walk read in place is made again
/// with process_vm_readv and no cache: no walk differs, the script's output
/// and status are as without the preload, and the allocation view shows
/// the PHP frames a user expects.
fn odd_frames_check(dir: &Path, php_args: &[&str]) {
    require_php();
    odd_templates(dir);
    let script = dir.join("odd.php");
    std::fs::write(&script, ODD_PHP).unwrap();
    let run = |preload: bool| {
        let mut c = Command::new(php_bin());
        c.args(php_args).arg(&script).current_dir(dir);
        for (k, _) in std::env::vars() {
            if k.starts_with("HEAPLIVE_") || k == "USE_ZEND_ALLOC" || k == "LD_PRELOAD" {
                c.env_remove(k);
            }
        }
        if preload {
            c.env("LD_PRELOAD", lib())
                .env("HEAPLIVE_SAMPLE_INTERVAL", "1")
                .env("HEAPLIVE_UNWIND", "check")
                .env("HEAPLIVE_VIEWS", "live,alloc")
                .env("HEAPLIVE_OUTPUT", dir.join("heaplive.%e.%p.%n.folded"))
                .env("HEAPLIVE_LOG", dir.join("heaplive.log"));
        }
        c.output().unwrap()
    };
    let plain = run(false);
    let out = run(true);
    assert_eq!(plain.status.code(), Some(3), "{}", show(&plain));
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}\n{}",
        show(&out),
        log_of(dir)
    );
    assert_eq!(stdout(&out), stdout(&plain));
    assert_eq!(stdout(&out), "123\nbye\n");
    let log = log_of(dir);
    let (walks, differed) = log
        .lines()
        .find_map(|l| {
            let r = l.split_once("php frames check: ")?.1;
            let (w, r) = r.split_once(" walks compared, ")?;
            let (d, _) = r.split_once(" differed")?;
            Some((w.parse::<u64>().ok()?, d.parse::<u64>().ok()?))
        })
        .unwrap_or_else(|| panic!("no php frames check summary\n{log}"));
    assert!(walks > 500, "{walks} walks compared\n{log}");
    assert_eq!(differed, 0, "{log}");
    let pid = log
        .lines()
        .find_map(|l| {
            l.strip_prefix("heaplive[")?
                .split_once(']')?
                .0
                .parse::<u32>()
                .ok()
        })
        .unwrap();
    // "exit dump NAME.folded and NAME.alloc.folded: ..."
    let alloc = dumps_in_log(dir, pid, "exit")
        .into_iter()
        .next()
        .and_then(|p| {
            let p = p.display().to_string();
            Some(PathBuf::from(p.split_once(" and ")?.1))
        })
        .unwrap_or_else(|| panic!("no exit dump with an allocation view\n{log}"));
    let stacks = parse_folded(&alloc);
    let php: Vec<String> = stacks.iter().map(php_only).collect();
    let mut want = vec![
        "{main} (odd.php:5);inner_gen (odd.php:2);str_repeat [internal]".to_string(),
        "{main} (odd.php:16);defaults (odd.php:13);str_repeat [internal]".to_string(),
        // The default value's array, made in the prologue (RECV_INIT).
        "{main} (odd.php:16);defaults (odd.php:12)".to_string(),
        "{main} (odd.php:18);thrower (odd.php:17);thrower (odd.php:17);str_repeat [internal]"
            .to_string(),
        "{main} (odd.php:23);A::{closure:odd.php:22-22} (odd.php:22);str_repeat [internal]".to_string(),
        "{main} (odd.php:23);B::{closure:odd.php:22-22} (odd.php:22);str_repeat [internal]".to_string(),
        "{main} (odd.php:25);M::__call (odd.php:21);str_repeat [internal]".to_string(),
        "{main} (odd.php:26);array_map [internal];{closure:odd.php:26-26} (odd.php:26);str_repeat [internal]"
            .to_string(),
    ];
    for i in 1..=6 {
        want.push(format!(
            "{{main}} (odd.php:19);{{include}} (tpl{i}.php:2);str_repeat [internal]"
        ));
    }
    if php_version() >= (8, 1) {
        want.push("{main} (odd.php:10);Fiber::resume [internal];{closure:odd.php:7-8} (odd.php:8);str_repeat [internal]".to_string());
    }
    for w in &want {
        assert!(
            php.iter().any(|p| p == w),
            "no stack with PHP frames {w}\n{}",
            php.join("\n")
        );
    }
    assert!(
        php.iter().any(|p| p.starts_with("{main} (odd.php:29);")
            && p.matches("deep (odd.php:28)").count() >= 30),
        "no stack 30 frames deep in deep()\n{}",
        php.join("\n")
    );
    assert!(
        !stacks.iter().any(|s| s.has("[php?]")),
        "{}",
        top_stacks(&stacks, 20)
    );
}

#[test]
fn cli_odd_frames_read_in_place_match_the_safe_reads() {
    odd_frames_check(&tempdir("php-cli-odd-frames"), &[]);
}

#[test]
fn cli_odd_frames_read_in_place_match_the_safe_reads_with_the_jit() {
    odd_frames_check(
        &tempdir("php-cli-odd-frames-jit"),
        &[
            "-d",
            "opcache.enable_cli=1",
            "-d",
            "opcache.jit=tracing",
            "-d",
            "opcache.jit_buffer_size=16M",
        ],
    );
}

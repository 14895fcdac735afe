//! PHP mode under php-fpm8.2: a worker's ZendMM samples by PHP function
//! mid-request, none when idle and none left after the request, exact mode
//! against `memory_get_usage()`, 500 requests that leave nothing behind,
//! `memory_limit` as without heaplive, and PHP's own memory figures
//! unchanged. The pools and the FastCGI client are the harness's
//! (`php_harness/`); php-cli's side of PHP mode is `php_mode.rs`.

use crate::common::*;
use crate::php_harness::*;
use std::path::{Path, PathBuf};

/// A [`holding_script`] that builds `n` strings with build_cache
/// (cache.php) and answers with their count and the script's own delta.
fn holding(dir: &Path, name: &str, n: usize) -> PathBuf {
    std::fs::write(dir.join("cache.php"), CACHE_PHP).unwrap();
    holding_script(
        dir,
        name,
        &format!(
            "require __DIR__ . '/cache.php';\n\
             $delta = 0;\n\
             $cache = build_cache({n}, 4000, $delta);"
        ),
        "echo count($cache), ' ', $delta, \"\\n\";",
    )
}

/// A pool of one worker (ZendMM on) in `dir/tag`, with the preload or
/// without; `opts` for the rest. Returns the pool and its directory.
fn one_worker(
    dir: &Path,
    tag: &str,
    preload: bool,
    env: &[(&str, &str)],
    opts: FpmOpts,
) -> (Fpm, PathBuf) {
    let d = dir.join(tag);
    std::fs::create_dir_all(&d).unwrap();
    let opts = FpmOpts {
        children: 1,
        preload,
        ..opts
    };
    (Fpm::start_opts(&d, true, env, &opts), d)
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
    let (req, busy) = start_holding_request(fpm, script);
    let workers = children_of(fpm.pid());
    let idle = workers.iter().copied().find(|&w| w != busy);
    let busy_file = signal_dump(dir, busy, "the busy worker's dump", &ctx);
    let idle_stacks =
        idle.map(|w| parse_folded(&signal_dump(dir, w, "the idle worker's dump", &ctx)));
    let resp = release_request(fpm, req, "the held request");
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

/// build_cache's bytes in `busy` are `delta` (memory_get_usage's) within
/// 5 standard errors at the 64 KiB interval; `what` names the dump.
fn cache_within(busy: &[Stack], delta: u64, what: &str) {
    assert_within(bytes_under(busy, CACHE_FRAME), delta, 64 << 10, 5.0, what);
}

#[test]
fn fpm_build_cache_by_php_function_mid_request_and_idle() {
    let dir = tempdir("php-fpm-cache");
    let fpm = Fpm::start(&dir, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")]);
    let ctx = fpm.ctx();
    let script = holding(&dir, "build.php", STRINGS);
    let (busy, idle, delta, pid) = fpm_held_request(&fpm, &dir, &script);
    cache_within(&busy, delta, "php-fpm, mid-request");
    // The log line breaks RSS down: the 48 MiB are resident ZendMM chunks.
    let line = log_of(&dir)
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
    let after = signal_dump(&dir, pid, "the dump after the request", &ctx);
    let after = parse_folded(&after);
    assert_eq!(zend_mm_bytes(&after), 0, "{}", top_stacks(&after, 5));
    assert!(alive(pid));
    assert!(
        log_of(&dir).contains("ZendMM samples and PHP frames on"),
        "{}",
        ctx()
    );
}

#[test]
fn fpm_exact_mode_matches_memory_get_usage() {
    let dir = tempdir("php-fpm-exact");
    let fpm = Fpm::start(&dir, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    let script = holding(&dir, "build.php", 2048);
    let (busy, _, delta, _) = fpm_held_request(&fpm, &dir, &script);
    let under = bytes_with_frame(&busy, |f| f.starts_with("build_cache ("));
    assert_eq!(under, delta, "{}", top_stacks(&busy, 10));
}

/// 500 requests each building and dropping 4 MiB on one worker: the peak
/// at request start is what it is without heaplive, nothing of them stays
/// live, and neither the worker's RSS nor heaplive's sample count grows.
#[test]
fn fpm_per_request_reset() {
    let (dir, script) = php_dir(
        "php-fpm-reset",
        "reset.php",
        "$p0 = memory_get_peak_usage(); $u0 = memory_get_usage();\n\
         $a = []; for ($i = 0; $i < 1024; $i++) { $a[] = str_repeat('x', 4000 + $i % 3); }\n\
         $p1 = memory_get_peak_usage(); unset($a);\n\
         echo $p0, ' ', $u0, ' ', $p1, ' ', getmypid(), \"\\n\";\n",
    );
    let run = |preload: bool, tag: &str| {
        let (fpm, d) = one_worker(&dir, tag, preload, &[], FpmOpts::default());
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
                let f = signal_dump(&d, pid, "a dump between requests", &fpm.ctx());
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

/// memory_limit = 32M in php-fpm: the same fatal error and line with and
/// without heaplive; the worker's next request is profiled as usual.
#[test]
fn fpm_memory_limit_then_next_request_is_profiled() {
    let dir = tempdir("php-fpm-limit");
    let limit = write_file(&dir, "limit.php", LIMIT_PHP);
    age(&limit);
    let err_of = |preload: bool, tag: &str| {
        let opts = FpmOpts {
            memory_limit: "32M",
            ..FpmOpts::default()
        };
        let (fpm, _) = one_worker(
            &dir,
            tag,
            preload,
            &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")],
            opts,
        );
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
    cache_within(&busy, delta, "the request after the memory_limit error");
}

/// The same under php-fpm: several requests on one worker, with and
/// without the preload, at the default interval and in exact mode.
#[test]
fn fpm_memory_figures_are_identical_with_and_without_heaplive() {
    let dir = tempdir("php-fpm-memory-figures");
    let script = write_file(&dir, "figures.php", MEMORY_FIGURES_PHP);
    age(&script);
    let run = |preload: bool, tag: &str, env: &[(&str, &str)]| {
        let (fpm, _) = one_worker(&dir, tag, preload, env, FpmOpts::default());
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

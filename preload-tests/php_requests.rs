//! PHP requests (issue 16): the dump at a memory_limit error, the request
//! as the root frame, per-request peak dumps, and leak warnings with PHP
//! frames in a long-running php-cli consumer. php-fpm8.2 with ZendMM and
//! opcache on; php8.2-cli. Both come from scripts/install-test-deps.sh
//! (`make test`): missing, the tests fail.

use crate::common::*;
use crate::php_harness::{
    Fpm, FpmOpts, Response, builder_php, fcgi_get, fcgi_get_as, php_dir, script, top_stacks,
    wait_for,
};
use std::path::Path;

/// Grows an array until memory_limit stops it; the rows are made on line 5.
const REPORT_PHP: &str = "<?php\n\
function fill_report() {\n\
    $rows = [];\n\
    for ($i = 0; ; $i++) {\n\
        $rows[] = str_repeat('r', 4000) . $i;\n\
    }\n\
}\n\
fill_report();\n";
const FILL_FRAME: &str = "fill_report (report.php:5)";
const OK_PHP: &str = "<?php\n\
$a = [];\n\
for ($i = 0; $i < 100; $i++) { $a[] = str_repeat('o', 1000) . $i; }\n\
echo 'ok ', getmypid(), ' ', count($a), ' ', memory_get_usage() < 8000000 ? 'small' : 'big', \"\\n\";\n";

/// ZendMM and opcache on (php-fpm's default), workers' stderr in fpm.log
/// (PHP's error goes there too, and anything heaplive wrote would show).
const POOL: &str = "catch_workers_output = yes\n";

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default()
}

/// fpm.log without times and pids, from the line after "ready".
fn fpm_log_lines(dir: &Path) -> Vec<String> {
    let t = std::fs::read_to_string(dir.join("fpm.log"))
        .unwrap_or_default()
        .replace(&dir.display().to_string(), "DIR");
    t.lines()
        .map(|l| {
            let l = l.split_once("] ").map_or(l, |(_, r)| r);
            // Numbers (pids, sizes) as one `#`.
            let mut out = String::new();
            for c in l.chars() {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !out.ends_with('#') {
                    out.push('#');
                }
            }
            out
        })
        .filter(|l| {
            !l.contains("systemd monitor")
                && !l.contains("exited with code")
                && !l.contains("Terminating")
                && !l.contains("exiting, bye")
        })
        .collect()
}

struct OomRun {
    dir: String,
    first: Response,
    next: Response,
    fpm_log: Vec<String>,
    /// (the dump's stacks, its log line), with the preload.
    dump: Option<(Vec<Stack>, String)>,
}

/// One pool (one worker, memory_limit 32M): the request that exhausts the
/// limit, then a normal one.
fn oom_run(dir: &Path, preload: bool, env: &[(&str, &str)]) -> OomRun {
    std::fs::create_dir_all(dir).unwrap();
    let report = script(dir, "report.php", REPORT_PHP);
    let ok = script(dir, "ok.php", OK_PHP);
    let opts = FpmOpts {
        children: 1,
        preload,
        memory_limit: "32M",
        pool_extra: POOL,
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(dir, true, env, &opts);
    let ctx = fpm.ctx();
    // A front controller: SCRIPT_NAME /index.php, REQUEST_URI the endpoint.
    let first = fcgi_get_as(
        fpm.port(),
        &report,
        "/api/report?id=7",
        "id=7",
        "/index.php",
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
    // PHP's error is in the answer: the dump must be on disk and logged.
    let dump = preload.then(|| {
        let log = log_of(dir);
        let line = line_with(&log, "]: memory_limit dump ")
            .unwrap_or_else(|| {
                panic!(
                    "no memory_limit dump logged when the answer came\n{}",
                    ctx()
                )
            })
            .to_string();
        let path = dump_path_of(&line, "memory_limit").unwrap();
        assert!(path.exists(), "{line}");
        (parse_folded(&path), line)
    });
    let next =
        fcgi_get(fpm.port(), &ok, "/api/ok", "").unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
    // After the master ended: it has logged what its workers said.
    fpm.quit();
    let fpm_log = fpm_log_lines(dir);
    OomRun {
        dir: dir.display().to_string(),
        first,
        next,
        fpm_log,
        dump,
    }
}

fn largest(stacks: &[Stack]) -> &Stack {
    stacks
        .iter()
        .max_by_key(|s| s.bytes)
        .expect("an empty dump")
}

/// The same answers and log lines with and without heaplive.
fn assert_same_as_plain(with: &OomRun, plain: &OomRun, ctx: &str) {
    assert!(
        plain
            .first
            .stderr
            .contains("Allowed memory size of 33554432 bytes exhausted"),
        "{:?}",
        plain.first.stderr
    );
    // The runs are in sibling directories: compare without them.
    let norm = |r: &OomRun, s: &str| s.replace(&r.dir, "DIR");
    assert_eq!(
        norm(with, &with.first.stdout),
        norm(plain, &plain.first.stdout),
        "{ctx}"
    );
    assert_eq!(
        norm(with, &with.first.stderr),
        norm(plain, &plain.first.stderr),
        "{ctx}"
    );
    assert_eq!(with.first.app_status, plain.first.app_status, "{ctx}");
    assert_eq!(with.fpm_log, plain.fpm_log, "{ctx}");
    // The worker serves the next request normally (the same worker: one).
    let body = with.next.body().trim();
    let plain_body = plain.next.body().trim();
    assert!(
        body.starts_with("ok ") && body.ends_with(" 100 small"),
        "{body}\n{ctx}"
    );
    assert_eq!(
        body.split(' ').skip(2).collect::<Vec<_>>(),
        plain_body.split(' ').skip(2).collect::<Vec<_>>()
    );
    assert_eq!(with.next.stderr, "", "{ctx}");
}

/// php-fpm, a request that exhausts memory_limit = 32M in fill_report()
/// (`GET /api/report?id=7` through a front controller, SCRIPT_NAME
/// /index.php: the root frame is `[GET /api/report]`):
/// the dump is on disk (and its line logged) when the answer with PHP's
/// error arrives, its largest stack is the rows made by fill_report on
/// line 5 under the request's root frame, and holds most of the 32 MiB:
/// exactly in exact mode (between 24 and 32 MiB); in sampled mode (64 KiB)
/// within 5 standard errors of the exact run's amount (sd =
/// sqrt(amount * 64 KiB), 1.4 MiB for 30 MiB; a false failure about 6e-7 of
/// the time). The answer, FPM's log and the next request are as without
/// heaplive.
#[test]
fn fpm_memory_limit_dump_shows_what_filled_it() {
    let dir = tempdir("php-oom");
    let plain = oom_run(&dir.join("plain"), false, &[]);
    let exact = oom_run(
        &dir.join("exact"),
        true,
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    let sampled = oom_run(
        &dir.join("sampled"),
        true,
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
            ("HEAPLIVE_SEED", "1616"),
        ],
    );
    for (run, tag) in [(&exact, "exact"), (&sampled, "sampled")] {
        let (stacks, line) = run.dump.as_ref().unwrap();
        let ctx = format!(
            "{tag}: {line}\n{}\n{}",
            top_stacks(stacks, 5),
            log_of(&dir.join(tag))
        );
        assert_same_as_plain(run, &plain, &ctx);
        let top = largest(stacks);
        assert!(top.has(FILL_FRAME), "{ctx}");
        assert_eq!(top.frames[0], "[GET /api/report]", "{ctx}");
        assert_eq!(top.leaf(), "[zend_mm]", "{ctx}");
        // One line naming PHP's message, the file and line, the request and
        // the top stack.
        for want in [
            "PHP \"Allowed memory size of 33554432 bytes exhausted",
            "report.php:5, request [GET /api/report]; top stack ",
            "fill_report (report.php:5) <- {main} (report.php:8)",
        ] {
            assert!(line.contains(want), "{want:?} not in\n{ctx}");
        }
    }
    let truth = largest(&exact.dump.as_ref().unwrap().0).bytes;
    assert!(
        (24 << 20..=32 << 20).contains(&truth),
        "exact: the rows hold {truth} bytes\n{}",
        top_stacks(&exact.dump.as_ref().unwrap().0, 5)
    );
    let est = largest(&sampled.dump.as_ref().unwrap().0).bytes;
    let sd = ((truth as f64) * 65536.0).sqrt();
    assert!(
        (est as f64 - truth as f64).abs() <= 5.0 * sd,
        "sampled: {est} bytes vs {truth} exact: more than 5 standard errors of {sd:.0}"
    );
}

/// HEAPLIVE_PHP_OOM_DUMP=0: no dump, the same error.
#[test]
fn fpm_memory_limit_dump_can_be_turned_off() {
    let dir = tempdir("php-oom-off");
    let run = oom_run_no_dump(&dir);
    assert!(
        run.contains("Allowed memory size of 33554432 bytes exhausted"),
        "{run}"
    );
    assert!(
        !log_of(&dir).contains("memory_limit dump"),
        "{}",
        log_of(&dir)
    );
}

fn oom_run_no_dump(dir: &Path) -> String {
    let report = script(dir, "report.php", REPORT_PHP);
    let opts = FpmOpts {
        children: 1,
        memory_limit: "32M",
        pool_extra: POOL,
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(dir, true, &[("HEAPLIVE_PHP_OOM_DUMP", "0")], &opts);
    let r = fcgi_get(fpm.port(), &report, "/api/report", "").unwrap();
    fpm.quit();
    r.stderr
}

/// Two endpoints, 50 requests each: /api/heavy peaks at 39 MiB of ZendMM
/// blocks, /api/light at 2 MiB; HEAPLIVE_PHP_PEAK_BYTES=16M. Exactly the
/// heavy requests write a peak dump, each naming /api/heavy as the root
/// frame of its stacks. Sampled at 64 KiB: a heavy request's estimate is
/// below 16 MiB with probability under 1e-40 (14 standard errors of
/// sqrt(39 MiB * 64 KiB)), a light one above it needs 256 samples where 32
/// are expected (Poisson tail under 1e-80).
#[test]
fn fpm_only_heavy_requests_write_peak_dumps() {
    let dir = tempdir("php-peaks");
    let heavy = script(&dir, "heavy.php", &builder_php("heavy", 10000, 'h', ""));
    let light = script(&dir, "light.php", &builder_php("light", 500, 'l', ""));
    let opts = FpmOpts {
        children: 1,
        pool_extra: POOL,
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(
        &dir,
        true,
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
            ("HEAPLIVE_PHP_PEAK_BYTES", "16M"),
        ],
        &opts,
    );
    let ctx = fpm.ctx();
    for i in 0..50 {
        let q = format!("page={i}");
        let r = fcgi_get(fpm.port(), &heavy, &format!("/api/heavy?{q}"), &q)
            .unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
        assert_eq!(r.body().trim(), "10000", "{}", ctx());
        let r = fcgi_get(fpm.port(), &light, &format!("/api/light/{i}"), "")
            .unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
        assert_eq!(r.body().trim(), "500", "{}", ctx());
    }
    // A last request under another name, 23 MiB (its estimate is under
    // 16 MiB 6.6 standard errors below: never): its dump comes after every
    // dump queued before it (heaplive's thread writes them in order).
    let last = script(&dir, "last.php", &builder_php("last", 6000, 'z', ""));
    fcgi_get(fpm.port(), &last, "/api/last", "").unwrap();
    let peak_lines = || -> Vec<String> {
        log_of(&dir)
            .lines()
            .filter(|l| l.contains("]: request peak dump "))
            .map(String::from)
            .collect()
    };
    wait_for("the last request's peak dump", &ctx, || {
        peak_lines()
            .iter()
            .any(|l| l.contains("[GET /api/last] peaked at"))
            .then_some(())
    });
    fpm.quit();
    let lines = peak_lines();
    assert_eq!(lines.len(), 51, "{}", ctx());
    let mut files = Vec::new();
    for l in &lines[..50] {
        assert!(l.contains(": [GET /api/heavy] peaked at "), "{l}");
        assert!(l.contains("top stack "), "{l}");
        let path = dump_path_of(l, "request peak").unwrap();
        let stacks = parse_folded(&path);
        let top = largest(&stacks);
        assert_eq!(
            top.frames[0],
            "[GET /api/heavy]",
            "{l}\n{}",
            top_stacks(&stacks, 5)
        );
        assert!(
            top.has("build_heavy (heavy.php:2)"),
            "{}",
            top_stacks(&stacks, 5)
        );
        assert!(top.bytes >= 16 << 20, "{l}\n{}", top_stacks(&stacks, 5));
        for s in &stacks {
            if s.frames[0].starts_with("[GET ") {
                assert_eq!(s.frames[0], "[GET /api/heavy]", "{l}");
            }
        }
        files.push(path);
    }
    // A request-peak dump's samples file gives its ZendMM stacks intervals
    // (issue 28): `top` prints one around the estimate of the top stack.
    let text = top_exact(&[], &files[0]);
    let row = text
        .lines()
        .find(|l| l.contains("  [zend_mm] <- ") && l.contains(" <- build_heavy (heavy.php:2)"))
        .unwrap_or_else(|| panic!("no ZendMM row for build_heavy\n{text}"));
    let f: Vec<&str> = row.split_whitespace().collect();
    let est: f64 = f[0].parse().unwrap();
    let (lo, hi) = f[3]
        .split_once("..")
        .unwrap_or_else(|| panic!("no interval: {row}"));
    let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
    assert!(lo < est && est < hi && hi < 2.0 * est, "{row}");
    // Names sort in the order they were written.
    let mut sorted = files.clone();
    sorted.sort_by_key(|p| {
        let n: Vec<u64> = p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .split('.')
            .filter_map(|x| x.parse().ok())
            .collect();
        n
    });
    assert_eq!(sorted, files);

    // The directory of dumps: endpoints by peak (/api/heavy's highest, 39
    // MiB, above /api/last's 23 MiB by many standard errors), and merged.
    let d = dir.to_str().unwrap();
    let o = heaplive(&["top", "--endpoints", "--bytes", d]);
    assert!(o.status.success(), "{}", show(&o));
    let text = stdout(&o);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0][4..], ["[GET", "/api/heavy]"], "{text}");
    assert_eq!(rows[0][2], "50", "{text}");
    assert!(rows[0][0].parse::<u64>().unwrap() >= 16 << 20, "{text}");
    assert_eq!(rows[1][4..], ["[GET", "/api/last]"], "{text}");
    assert!(!text.contains("/api/light"), "{text}");
    let o = heaplive(&["merge", d]);
    assert!(o.status.success(), "{}", show(&o));
    let merged: u64 = stdout(&o)
        .lines()
        .filter(|l| l.starts_with("[GET /api/heavy];"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(merged >= 50 * (16 << 20), "{merged}");

    // The report of the directory: the request-peak dumps are the worker's
    // (one process, not one per file), and its PHP part ranks the
    // endpoints by peak as `top --endpoints` does (highest, mean,
    // requests).
    let (_, html) = report_of_dir(&dir);
    let json = report_data(&html);
    assert!(
        !json.contains("\"pid\":0,"),
        "a dump file made a process of its own"
    );
    let worker = fpm_worker_pid_of(&files[0]);
    assert_eq!(
        json.matches("\"program\":").count(),
        json.matches("\"request_peaks\":").count()
    );
    let at = json
        .find(&format!("\"pid\":{worker},"))
        .unwrap_or_else(|| panic!("no process {worker} in the report"));
    let peaks = &json[json[at..].find("\"request_peaks\":[").unwrap() + at..];
    let peaks = &peaks[..peaks.find("}]").unwrap() + 1];
    for row in &rows[..2] {
        let (hi, mean, n) = (row[0], row[1], row[2]);
        let endpoint = row[4..].join(" ");
        let want = format!(
            "{{\"request\":\"{endpoint}\",\"highest\":{hi},\"mean\":{mean},\"requests\":{n}}}"
        );
        assert!(peaks.contains(&want), "{want} not in {peaks}");
    }
    assert!(!peaks.contains("/api/light"), "{peaks}");
}

/// The worker's pid in a dump's name (`...PID.N.request.folded`).
fn fpm_worker_pid_of(file: &Path) -> u32 {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let parts: Vec<&str> = name.split('.').collect();
    let at = parts.iter().position(|&p| p == "request").unwrap();
    parts[at - 2].parse().unwrap()
}

/// A long-running php-cli consumer that keeps 100 KiB per job in a static
/// array: a leak warning names the PHP function and line and the script's
/// root frame `[cli consumer.php]` (left out with
/// HEAPLIVE_PHP_REQUEST_FRAME=0). Sampled at 64 KiB, 30 MiB kept: the
/// warning at 8 MiB is missed only if the estimate stays under 8 MiB, 15
/// standard errors below (never).
#[test]
fn cli_consumer_leak_warning_names_the_php_function() {
    let (dir, consumer) = php_dir(
        "php-consumer",
        "consumer.php",
        "function handle_job(int $n): int {\n\
             static $seen = [];\n\
             $seen[] = str_repeat('j', 102300) . $n;\n\
             $work = str_repeat('w', 50000) . $n;\n\
             return strlen($work);\n\
         }\n\
         for ($j = 0; $j < 300; $j++) { handle_job($j); }\n\
         echo \"done\\n\";\n",
    );
    let run = |frame: &str| {
        let d = dir.join(format!("frame{frame}"));
        std::fs::create_dir_all(&d).unwrap();
        let o = preloaded_command(
            &d,
            Path::new("php8.2"),
            &[consumer.to_str().unwrap()],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
                ("HEAPLIVE_WARN_BYTES", "8M"),
                ("HEAPLIVE_PHP_REQUEST_FRAME", frame),
                ("HEAPLIVE_LOG", d.join("heaplive.log").to_str().unwrap()),
            ],
        )
        .output()
        .unwrap();
        assert_eq!(stdout(&o), "done\n", "{}", show(&o));
        assert!(o.status.success(), "{}", show(&o));
        let log = log_of(&d);
        first_line_with(&log, "possible leak", &format!("no leak warning\n{log}")).to_string()
    };
    let warning = run("1");
    assert!(
        warning.contains(
            " at handle_job (consumer.php:4) <- {main} (consumer.php:8) in [cli consumer.php]"
        ),
        "{warning}"
    );
    let warning = run("0");
    assert!(
        warning.ends_with(" at handle_job (consumer.php:4) <- {main} (consumer.php:8)"),
        "{warning}"
    );
}

/// php-cli, `HEAPLIVE_SIGNAL=none` (nothing that needs heaplive's thread):
/// the memory_limit dump is written on the PHP thread itself, and the
/// process stays single-threaded: a shutdown function, which PHP runs
/// after the error, reads `Threads: 1` in /proc/self/status, as without
/// heaplive. Before heaplive's thread started only for a feature that
/// needs it, it started at the first sample and the script read 2.
#[test]
fn cli_memory_limit_dump_without_the_dump_signal_keeps_one_thread() {
    let (dir, php) = php_dir(
        "php-oom-nothread",
        "report.php",
        // REPORT_PHP with a shutdown function first.
        &REPORT_PHP.replacen(
            "<?php\n",
            "register_shutdown_function(function () {\n\
                 preg_match('/^Threads:\\s+(\\d+)/m', file_get_contents('/proc/self/status'), $m);\n\
                 echo 'threads at shutdown: ', $m[1], \"\\n\";\n\
             });\n",
            1,
        ),
    );
    let args = ["-d", "memory_limit=32M", php.to_str().unwrap()];
    let plain = run_plain(&dir, Path::new("/usr/bin/php"), &args);
    assert_eq!(
        (plain.status.code(), stdout(&plain).as_str()),
        (Some(255), "threads at shutdown: 1\n"),
        "{}",
        show(&plain)
    );
    let o = run_preloaded(
        &dir,
        Path::new("/usr/bin/php"),
        &args,
        &[("HEAPLIVE_SIGNAL", "none")],
    );
    let ctx = show(&o);
    assert_eq!(
        (o.status.code(), stdout(&o).as_str()),
        (Some(255), "threads at shutdown: 1\n"),
        "{ctx}"
    );
    let line = stderr(&o)
        .lines()
        .find(|l| l.contains("]: memory_limit dump "))
        .unwrap_or_else(|| panic!("no memory_limit dump\n{ctx}"))
        .to_string();
    let path = dump_path_of(&line, "memory_limit").unwrap();
    let stacks = parse_folded(&path);
    assert!(
        largest(&stacks).has("fill_report (report.php:9)"),
        "{line}\n{}\n{ctx}",
        top_stacks(&stacks, 5)
    );
}

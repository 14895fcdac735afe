//! PHP operators' view (issue 29): the application's frames apart from
//! libraries' (a Composer-style `vendor/` tree the test writes), and a
//! pool's files: an `ondemand` pool recycling its workers leaves every
//! request-peak dump and no empty file. php-fpm8.2 and php8.2-cli from
//! scripts/install-test-deps.sh.

use crate::common::*;
use crate::php_harness::{Fpm, FpmOpts, builder_php, fcgi_get, script, script_dir};
use std::path::{Path, PathBuf};
use std::process::Command;

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("heaplive.log")).unwrap_or_default()
}

/// A library under `vendor/` fills the rows; the application's function
/// build_report calls it on line 6.
fn write_app(dir: &Path) -> PathBuf {
    script(
        dir,
        "vendor/acme/rows/src/Builder.php",
        "<?php\n\
         namespace Acme\\Rows;\n\
         class Builder {\n\
         \x20   public function fill(array &$rows, int $n) {\n\
         \x20       for ($i = 0; $i < $n; $i++) { $rows[] = str_repeat('v', 4000) . $i; }\n\
         \x20   }\n\
         }\n",
    );
    script(
        dir,
        "app.php",
        "<?php\n\
         require __DIR__ . '/vendor/acme/rows/src/Builder.php';\n\
         function build_report() {\n\
         \x20   $rows = [];\n\
         \x20   $b = new Acme\\Rows\\Builder();\n\
         \x20   for (;;) { $b->fill($rows, 100); }\n\
         }\n\
         build_report();\n",
    )
}

const APP_FRAME: &str = "build_report (app.php:6)";
const LIB_FRAME: &str = "Acme\\Rows\\Builder::fill (Builder.php:5) [library]";

/// The LIVE column of `heaplive top --php FILE`'s first row, and its last
/// line (the application frame).
fn top_php(file: &Path) -> (String, String) {
    let text = ok(heaplive(&[
        "top",
        "--php",
        "-w",
        "0",
        file.to_str().unwrap(),
    ]));
    let first = text.lines().nth(1).unwrap_or_default();
    let size = first.split("  ").map(str::trim).find(|c| !c.is_empty());
    (
        size.unwrap_or_default().to_string(),
        text.lines().last().unwrap_or_default().to_string() + "\n" + &text,
    )
}

/// php-fpm, memory_limit 32M exhausted inside the library: the
/// memory_limit line names the application's function (the innermost frame
/// outside vendor/ and [internal]) and its share, the top stack with the
/// library's frame marked, at the size `heaplive top --php` gives its first
/// row for the same file; `top --php` names the same application frame.
#[test]
fn fpm_memory_limit_line_names_the_application_function_not_the_library() {
    let dir = tempdir("php-app-vendor");
    let app = write_app(dir.path());
    let opts = FpmOpts {
        children: 1,
        memory_limit: "32M",
        pool_extra: "catch_workers_output = yes\n",
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(
        dir.path(),
        true,
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
        &opts,
    );
    let ctx = fpm.ctx();
    let r = fcgi_get(fpm.port(), &app, "/report", "").unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
    assert!(r.stderr.contains("Allowed memory size"), "{}", ctx());
    fpm.quit();
    let log = log_of(dir.path());
    let line = line_with(&log, "]: memory_limit dump ")
        .unwrap_or_else(|| panic!("no memory_limit line\n{}", ctx()));
    let path = dump_path_of(line, "memory_limit").unwrap();
    assert!(
        line.contains(&format!("; application frame {APP_FRAME} holds ")),
        "{line}"
    );
    assert!(
        line.contains("top stack ") && line.contains(&format!("{LIB_FRAME} <- {APP_FRAME}")),
        "{line}"
    );
    // The share: most of the 32 MiB is the rows.
    let share: f64 = line
        .split_once(&format!("{APP_FRAME} holds "))
        .and_then(|(_, r)| r.split_once("%)"))
        .and_then(|(x, _)| x.rsplit_once('('))
        .map(|(_, p)| p.trim())
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {line}"));
    assert!(share >= 50.0, "{line}");
    let top = line
        .split_once("top stack ")
        .and_then(|(_, r)| r.split_once(": "))
        .unwrap()
        .0;
    let (first_row, text) = top_php(&path);
    assert_eq!(
        top, first_row,
        "the line and top --php's first row\n{line}\n{text}"
    );
    assert!(
        text.starts_with(&format!(
            "application frame holding the most (the innermost frame outside [internal] and [library] code): {APP_FRAME}, "
        )),
        "{text}"
    );
}

/// HEAPLIVE_PHP_LIBRARY: empty, no file is a library's (the library's
/// function is then the application frame); a pattern of the test's own
/// directory makes every frame a library's.
#[test]
fn cli_library_patterns_are_a_setting() {
    let dir = tempdir("php-app-setting");
    let app = write_app(dir.path());
    let run = |lib: &str| {
        let o = run_preloaded(
            dir.path(),
            Path::new(&crate::php_harness::php_bin()),
            &["-d", "memory_limit=16M", app.to_str().unwrap()],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
                ("HEAPLIVE_PHP_LIBRARY", lib),
            ],
        );
        let err = stderr(&o);
        first_line_with(&err, "]: memory_limit dump ", &err).to_string()
    };
    let line = run("");
    assert!(
        line.contains("; application frame Acme\\Rows\\Builder::fill (Builder.php:5) holds "),
        "{line}"
    );
    assert!(!line.contains("[library]"), "{line}");
    let line = run(&format!("{}/*", dir.path().display()));
    assert!(
        line.contains("; no application frame (every PHP frame is a library's")
            && line.contains("build_report (app.php:6) [library]"),
        "{line}"
    );
}

/// pm = ondemand, pm.max_requests = 5: 50 requests, each peaking at about
/// 8 MiB of ZendMM (HEAPLIVE_PHP_PEAK_BYTES=2M; sampled at 64 KiB the
/// estimate is below 2 MiB with probability under 1e-30), served by 10
/// workers in turn, each recycled after its 5th request. Every request's
/// peak dump is there (`NAME.request.folded`, with its samples and maps
/// files), the last one of each worker too (it used to be lost: the worker
/// exited before heaplive's thread wrote it); no file is empty; `top
/// --endpoints DIR` reads the 50 request-peak dumps alone.
#[test]
fn fpm_ondemand_pool_keeps_every_request_peak_and_no_empty_file() {
    let (dir, page) = script_dir(
        "php-app-ondemand",
        "page.php",
        &builder_php("page", 2000, 'p', ", ' ', getmypid()"),
    );
    let opts = FpmOpts {
        children: 2,
        pm: "ondemand",
        pool_extra: "pm.max_requests = 5\npm.process_idle_timeout = 60s\n",
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(
        dir.path(),
        true,
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
            ("HEAPLIVE_PHP_PEAK_BYTES", "2M"),
        ],
        &opts,
    );
    let ctx = fpm.ctx();
    let mut pids = std::collections::BTreeSet::new();
    for i in 0..50 {
        let r = fcgi_get(fpm.port(), &page, &format!("/page/{i}"), "")
            .unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
        let body = r.body().trim().to_string();
        let (n, pid) = body
            .split_once(' ')
            .unwrap_or_else(|| panic!("{body}\n{}", ctx()));
        assert_eq!(n, "2000", "{}", ctx());
        pids.insert(pid.to_string());
    }
    assert!(
        pids.len() >= 10,
        "workers recycled every 5 requests: {pids:?}"
    );
    let master = fpm.pid();
    fpm.quit();
    let log = log_of(dir.path());
    let peaks: Vec<PathBuf> = log
        .lines()
        .filter_map(|l| dump_path_of(l, "request peak"))
        .collect();
    assert_eq!(peaks.len(), 50, "{}", ctx());
    for p in &peaks {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with(".request.folded"), "{name}");
        let stacks = parse_folded(p);
        assert!(
            stacks
                .iter()
                .any(|s| s.frames[0] == "[GET /page/{n}]" && s.has("build_page (page.php:2)")),
            "{name}"
        );
        let base = name.strip_suffix(".folded").unwrap();
        for companion in [format!("{base}.samples.folded"), format!("{base}.maps.txt")] {
            assert!(
                dir.path().join(&companion).is_file(),
                "{companion}\n{}",
                ctx()
            );
        }
    }
    // No empty file left by the workers: a worker whose exit has nothing
    // live writes no dump. (The master, not a fork's child, writes its
    // exit dump even when nothing is live: HEAPLIVE_DUMP_EMPTY's rule.)
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with(&format!("fpm.{master}.")) {
            continue;
        }
        if n.ends_with(".folded") || n.ends_with(".txt") {
            assert!(e.metadata().unwrap().len() > 0, "{n} is empty\n{}", ctx());
        }
    }
    let d = dir.path().to_str().unwrap();
    let text = ok(heaplive(&["top", "--endpoints", d]));
    assert!(text.contains("1 endpoints in 50 files"), "{text}");
}

/// Debian's php8.2 is stripped: one line per process says its frames show
/// as `php8.2+0x...` and gives the build id its debug symbols would be
/// found by (the one `readelf -n` reads from the file), once.
#[test]
fn stripped_php_gets_one_line_with_its_build_id() {
    let (dir, s) = script_dir(
        "php-app-stripped",
        "t.php",
        "<?php $a = []; for ($i = 0; $i < 100; $i++) { $a[] = str_repeat('x', 5000); } echo count($a), \"\\n\";\n",
    );
    let bin = crate::php_harness::php_bin();
    let found = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(&bin))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(&bin));
    let php = std::fs::canonicalize(found).unwrap();
    let notes = Command::new("readelf")
        .arg("-n")
        .arg(&php)
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&notes.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("a build id");
    let o = run_preloaded(
        dir.path(),
        &php,
        &[s.to_str().unwrap()],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_SIGNAL", "none"),
        ],
    );
    let err = stderr(&o);
    let hint = one_line_with(&err, "frames of modules without symbols", &err);
    assert!(
        hint.contains(&format!("{} has build id {id}: ", php.display()))
            && hint.contains(&format!(
                "/usr/lib/debug/.build-id/{}/{}.debug",
                &id[..2],
                &id[2..]
            )),
        "{err}"
    );
}

//! heaplive's `zend_error_cb` wrapper and an extension that wraps the
//! callback in every request (issue 29 item 5, follow-up): heaplive puts
//! its wrapper back in front of a callback installed after it (Xdebug's)
//! when the request's script is compiled; an extension whose callback
//! chains to the one it found (heaplive's wrapper) then made a cycle,
//! heaplive's wrapper -> the extension's -> heaplive's wrapper -> ..., a
//! stack overflow at the first warning. `progs/php_rewrap_ext.c` is such an
//! extension (RINIT wraps, RSHUTDOWN restores), built with php8.2-dev's
//! headers (`php-config8.2`, scripts/install-test-deps.sh) and loaded from
//! an ini file in `PHP_INI_SCAN_DIR`; it logs each call, and a call from
//! inside itself as `cycle` (instead of overflowing the stack). Under
//! php-fpm with one worker and several requests, one of them over
//! memory_limit, one whose error raises another inside the extension's
//! callback: each error reaches the extension once and PHP's own
//! callback once (the warning is displayed), the memory_limit dump happens
//! once, and the worker lives on; the same as without heaplive.

use crate::common::*;
use crate::php_harness::{FILL_ROWS_PHP, Fpm, FpmOpts, fcgi_get};
use std::path::Path;
use std::process::Command;

const WARN: &str = "<?php\necho $undefined_var;\necho \"ok \", getmypid(), \"\\n\";\n";
/// A warning whose handling raises a notice inside the extension's
/// callback: a second error while the first one's chain runs.
const NESTED: &str = "<?php\ntrigger_error(\"nested please\", E_USER_WARNING);\necho \"ok \", getmypid(), \"\\n\";\n";

/// The php-config of the PHP under test: beside `HEAPLIVE_TEST_PHP` (a
/// PHP built from source, scripts/check-php-version.sh), else Debian's
/// php-config8.2 (php8.2-dev).
fn php_config() -> String {
    match std::env::var("HEAPLIVE_TEST_PHP") {
        Ok(php) => Path::new(&php)
            .with_file_name("php-config")
            .display()
            .to_string(),
        Err(_) => "php-config8.2".into(),
    }
}

/// Builds the extension into `dir` and an ini directory that loads it;
/// returns the directory for `PHP_INI_SCAN_DIR`.
fn extension(dir: &Path) -> String {
    let inc = Command::new(php_config())
        .arg("--includes")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} ({e}): install php8.2-dev with scripts/install-test-deps.sh (`make test` does)",
                php_config()
            )
        });
    assert!(inc.status.success(), "{}", show(&inc));
    let flags: Vec<String> = stdout(&inc).split_whitespace().map(String::from).collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut extra = vec!["-shared", "-fPIC"];
    extra.extend(flags);
    let so = compile("php_rewrap_ext.c", "rewrap.so", dir, &extra);
    let ini = dir.join("conf.d");
    std::fs::create_dir_all(&ini).unwrap();
    std::fs::write(
        ini.join("rewrap.ini"),
        format!("extension={}\n", so.display()),
    )
    .unwrap();
    // A leading ':' keeps the default scan directory (opcache and the
    // other extensions of the installed PHP) before this one.
    format!(":{}", ini.display())
}

/// The requests' bodies and the extension's log, with or without the
/// preload.
fn run(preload: bool) -> (Vec<String>, String, String) {
    let dir = tempdir(if preload {
        "php-error-cb"
    } else {
        "php-error-cb-plain"
    });
    let scan = extension(dir.path());
    let log = dir.path().join("rewrap.log");
    let warn = dir.path().join("warn.php");
    let fill = dir.path().join("fill.php");
    let nested = dir.path().join("nested.php");
    std::fs::write(&warn, WARN).unwrap();
    std::fs::write(&fill, FILL_ROWS_PHP).unwrap();
    std::fs::write(&nested, NESTED).unwrap();
    let opts = FpmOpts {
        children: 1,
        preload,
        memory_limit: "16M",
        pool_extra: "php_admin_flag[display_errors] = on\nphp_admin_flag[html_errors] = off\n",
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(
        dir.path(),
        true,
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
            ("PHP_INI_SCAN_DIR", &scan),
            ("REWRAP_LOG", log.to_str().unwrap()),
        ],
        &opts,
    );
    let ctx = fpm.ctx();
    let mut bodies = Vec::new();
    for script in [&warn, &warn, &fill, &nested, &warn] {
        let r = fcgi_get(fpm.port(), script, "/x", "").unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
        let body = r
            .stdout
            .split_once("\r\n\r\n")
            .map_or(r.stdout.as_str(), |(_, b)| b)
            .replace(&dir.path().display().to_string(), "DIR");
        bodies.push(body);
    }
    fpm.quit();
    let heaplive_log = std::fs::read_to_string(dir.path().join("heaplive.log")).unwrap_or_default();
    (
        bodies,
        std::fs::read_to_string(&log).unwrap_or_default(),
        heaplive_log,
    )
}

#[test]
fn an_extension_that_rewraps_the_error_callback_each_request_makes_no_cycle() {
    let (bodies, ext_log, heaplive_log) = run(true);
    let (plain_bodies, plain_ext_log, _) = run(false);
    // One worker served them all (the last one too): it never crashed.
    let pid = bodies[0]
        .rsplit_once("ok ")
        .map(|(_, p)| p.trim().to_string())
        .unwrap_or_else(|| panic!("{bodies:?}"));
    // PHP's own callback ran once per error: each message is displayed once.
    let warned = format!(
        "\nWarning: Undefined variable $undefined_var in DIR/warn.php on line 2\nok {pid}\n"
    );
    let nested = format!(
        "\nNotice: raised by the extension's callback in DIR/nested.php on line 2\n\n\
         Warning: nested please in DIR/nested.php on line 2\nok {pid}\n"
    );
    assert!(
        bodies[2].starts_with(
            "\nFatal error: Allowed memory size of 16777216 bytes exhausted (tried to allocate "
        ) && bodies[2].ends_with(" bytes) in DIR/fill.php on line 4\n"),
        "{:?}",
        bodies[2]
    );
    assert_eq!(
        bodies,
        [&warned, &warned, &bodies[2], &nested, &warned].map(|b| b.to_string()),
        "{heaplive_log}"
    );
    // The extension's callback: once per error, never from inside itself.
    let w = "rewrap_cb type=2 Undefined variable $undefined_var\n";
    let fatal = "rewrap_cb type=1 Allowed memory size of 16777216 bytes ex\n";
    let n =
        "rewrap_cb type=512 nested please\nrewrap_cb type=8 raised by the extension's callback\n";
    assert_eq!(ext_log, format!("{w}{w}{fatal}{n}{w}"), "{heaplive_log}");
    // As without heaplive (its pid aside).
    assert_eq!(ext_log, plain_ext_log);
    let plain_pid = plain_bodies[0]
        .rsplit_once("ok ")
        .map(|(_, p)| p.trim().to_string())
        .unwrap_or_else(|| panic!("{plain_bodies:?}"));
    let plain: Vec<String> = plain_bodies
        .iter()
        .map(|b| b.replace(&format!("ok {plain_pid}\n"), &format!("ok {pid}\n")))
        .collect();
    assert_eq!(bodies, plain);
    // The memory_limit dump: once, for the one error.
    let dump = one_line_with(&heaplive_log, "]: memory_limit dump ", &heaplive_log);
    assert!(dump.contains("fill_rows (fill.php:4)"), "{dump}");
}

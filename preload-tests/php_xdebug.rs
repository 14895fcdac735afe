//! The memory_limit dump with Xdebug loaded (issue 29 item 5): Xdebug in
//! develop and debug modes sets `zend_error_cb` to its own callback in its
//! RINIT, after heaplive's, and does not chain to it; heaplive puts its
//! wrapper back in front when the request's script is compiled. Debian's
//! php8.2-xdebug (scripts/install-test-deps.sh), loaded with `-d
//! zend_extension=xdebug.so` only. PHP's output is as without heaplive.

use crate::common::*;
use crate::php_harness::FILL_ROWS_PHP;
use std::path::Path;

#[test]
fn memory_limit_dump_happens_with_xdebug_in_every_mode() {
    let dir = tempdir("php-xdebug");
    let script = write_file(dir.path(), "fill.php", FILL_ROWS_PHP);
    let php = crate::php_harness::php_bin();
    for mode in ["develop", "debug", "profile", "off"] {
        let args = [
            "-n",
            "-d",
            "zend_extension=xdebug.so",
            "-d",
            &format!("xdebug.mode={mode}"),
            "-d",
            &format!("xdebug.output_dir={}", dir.path().display()),
            "-d",
            "xdebug.start_with_request=no",
            "-d",
            "memory_limit=16M",
            script.to_str().unwrap(),
        ];
        let log = dir.path().join(format!("heaplive.{mode}.log"));
        let o = run_preloaded(
            dir.path(),
            Path::new(&php),
            &args,
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
                ("HEAPLIVE_LOG", log.to_str().unwrap()),
            ],
        );
        let plain = run_plain(dir.path(), Path::new(&php), &args);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            stdout(&plain).contains("Allowed memory size of 16777216 bytes exhausted"),
            "{mode}: {}",
            show(&plain)
        );
        let line = line_with(&text, "]: memory_limit dump ")
            .unwrap_or_else(|| panic!("{mode}: no memory_limit dump\n{text}"));
        assert!(line.contains("fill_rows (fill.php:4)"), "{mode}: {line}");
        // Xdebug's call stack prints times and memory: numbers aside.
        assert_eq!(
            numbers_out(&stdout(&o)),
            numbers_out(&stdout(&plain)),
            "{mode}"
        );
        assert_eq!(stderr(&o), stderr(&plain), "{mode}");
        assert_eq!(o.status.code(), plain.status.code(), "{mode}");
    }
}

/// `text` with every run of digits and dots as one `#`.
fn numbers_out(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() || c == '.' && out.ends_with('#') {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

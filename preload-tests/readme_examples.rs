//! The README's examples are correct (issue 29 item 13): every systemd
//! unit or drop-in in README.md (an indented block whose first line is a
//! section header such as `[Service]`) passes `systemd-analyze verify` as a
//! drop-in of Debian's php8.2-fpm.service, with no line of it ignored or
//! refused (systemd 252 still exits 0 for a line it drops: "Failed to
//! resolve specifiers ..., ignoring: Invalid slot").

use crate::common::*;
use std::process::Command;

/// The indented blocks of `text` that start with a systemd section header.
fn unit_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match (line.strip_prefix("    "), cur.as_mut()) {
            (Some(l), Some(b)) => {
                b.push_str(l);
                b.push('\n');
            }
            (Some(l), None) if l.starts_with('[') && l.ends_with(']') && !l.contains(' ') => {
                cur = Some(format!("{l}\n"));
            }
            (None, _) => {
                if let Some(b) = cur.take() {
                    blocks.push(b);
                }
            }
            _ => {}
        }
    }
    blocks.extend(cur);
    blocks
}

#[test]
fn every_systemd_unit_in_the_readme_passes_systemd_analyze_verify() {
    crate::php_harness::require_fpm();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let blocks = unit_blocks(&readme);
    assert!(blocks.len() >= 2, "the README's drop-ins: {blocks:#?}");
    for (i, block) in blocks.iter().enumerate() {
        let units = tempdir(&format!("readme-unit-{i}"));
        std::fs::copy(
            "/lib/systemd/system/php8.2-fpm.service",
            units.path().join("php8.2-fpm.service"),
        )
        .unwrap();
        let d = units.path().join("php8.2-fpm.service.d");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("heaplive.conf"), block).unwrap();
        let o = Command::new("systemd-analyze")
            .args(["verify", "php8.2-fpm.service"])
            .env("SYSTEMD_UNIT_PATH", format!("{}:", units.path().display()))
            .output()
            .expect("run systemd-analyze");
        let out = show(&o);
        assert!(o.status.success(), "{block}\n{out}");
        assert!(
            !out.contains("heaplive.conf"),
            "README block {i}:\n{block}\n{out}"
        );
    }
}

#[test]
fn blocks_are_found() {
    let t = "text\n\n    [Service]\n    Environment=A=1\n\nmore\n    [x y]\n    not\n";
    assert_eq!(
        unit_blocks(t),
        vec!["[Service]\nEnvironment=A=1\n".to_string()]
    );
}

//! `make install` and `make uninstall` (issue 14, "Install like a system
//! tool"): the files the README names, a stripped library whose debug info
//! is kept apart, and a new user running `heaplive run` from the prefix.

use crate::common::*;
use crate::security::{EVIL, attacker};
use std::path::Path;
use std::process::Command;

/// What `make install PREFIX=p` creates, as the README lists it.
const FILES: &[&str] = &[
    "bin/heaplive",
    "lib/libheaplive.so",
    "lib/.debug/libheaplive.so.debug",
    "include/heaplive.h",
    "share/man/man1/heaplive.1",
    "share/bash-completion/completions/heaplive",
    "share/zsh/site-functions/_heaplive",
    "share/fish/vendor_completions.d/heaplive.fish",
];

fn make(target: &str, prefix: &Path) -> String {
    let o = output_ok(
        Command::new("make")
            .arg("-C")
            .arg(root())
            .arg(target)
            .arg(format!("PREFIX={}", prefix.display()))
            .arg(format!("LIB={}", lib().display()))
            .arg(format!("BIN={}", heaplive_bin().display())),
        &format!("make {target}"),
    );
    show(&o)
}

fn sections(file: &Path) -> String {
    let o = Command::new("readelf")
        .arg("-SW")
        .arg(file)
        .output()
        .unwrap();
    stdout(&o)
}

#[test]
fn make_install_into_a_prefix_then_a_new_user_runs_heaplive_from_it() {
    attacker();
    let dir = tempdir("install");
    let prefix = dir.path().join("prefix");
    make("install", &prefix);
    let mut modes = String::new();
    for f in FILES {
        let p = prefix.join(f);
        let m = std::fs::metadata(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        use std::os::unix::fs::PermissionsExt;
        modes.push_str(&format!("{f} {:o}\n", m.permissions().mode() & 0o777));
    }
    let want: String = FILES
        .iter()
        .map(|f| {
            let exec = f.starts_with("bin/") || *f == "lib/libheaplive.so";
            format!("{f} {}\n", if exec { "755" } else { "644" })
        })
        .collect();
    assert_eq!(modes, want);
    // Stripped, with a debuglink to the debug info kept apart.
    let lib_sections = sections(&prefix.join("lib/libheaplive.so"));
    assert!(!lib_sections.contains(".debug_info"), "{lib_sections}");
    assert!(lib_sections.contains(".gnu_debuglink"), "{lib_sections}");
    assert!(sections(&prefix.join("lib/.debug/libheaplive.so.debug")).contains(".debug_info"));
    let man = std::fs::read_to_string(prefix.join("share/man/man1/heaplive.1")).unwrap();
    assert!(man.contains(".TH heaplive"), "{man}");

    // A user who never built anything runs the installed command, which
    // finds the installed library in $PREFIX/lib.
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let prog = compile("sec_dump.c", "sec_dump", &work, &[]);
    // The install readable by all; the work directory the user's own (a
    // directory on the way that others could write is not written into).
    Command::new("chmod")
        .arg("-R")
        .arg("a+rX")
        .arg(dir.path())
        .status()
        .unwrap();
    Command::new("chown")
        .arg("-R")
        .arg(EVIL)
        .arg(&work)
        .status()
        .unwrap();
    let mut c = Command::new("runuser");
    c.args(["-u", EVIL, "--"])
        .arg(prefix.join("bin/heaplive"))
        .args(["run", "--interval", "1", "-o"])
        .arg(work.join("user.%p.folded"))
        .arg("--")
        .arg(&prog)
        .current_dir(&work);
    for (k, _) in std::env::vars() {
        if k.starts_with("HEAPLIVE_") || k == "LD_PRELOAD" {
            c.env_remove(k);
        }
    }
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let files = folded_files(&work);
    assert_eq!(files.len(), 1, "{files:?}\n{}", show(&o));
    let stacks = parse_folded(&files[0]);
    assert_eq!(
        bytes_by_leaf(&stacks).get("main"),
        Some(&1000),
        "{stacks:?}"
    );
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(&files[0]).unwrap().uid();
    assert_ne!(owner, 0, "written by the new user");

    make("uninstall", &prefix);
    let left: Vec<&&str> = FILES.iter().filter(|f| prefix.join(f).exists()).collect();
    assert!(left.is_empty(), "left after uninstall: {left:?}");
}

//! Services and containers (issue 14, "What to deliver"): only the
//! programs named in HEAPLIVE_PROGRAMS are profiled.

use crate::common::*;
use std::process::Command;

/// A service started through a shell wrapper: with
/// `HEAPLIVE_PROGRAMS=sec_dum?`, the wrapper (`sh`), `env` and the helper
/// children (`true`, `cat`) load the library but write nothing, keep the
/// dump signal's usual effect (a dormant shell dies of SIGUSR2 as it
/// would without heaplive), while the program named there, started by an
/// exec from a non-matching one, is profiled.
#[test]
fn only_programs_named_in_heaplive_programs_are_profiled() {
    let dir = tempdir("programs");
    let prog = compile("sec_dump.c", "sec_dump", dir.path(), &[]);
    let script = format!("true; echo hi | cat; env X=1 {} ; exit 7", prog.display());
    let run = |programs: &str| {
        let out = dir.path().join(format!("out.{}", programs.len()));
        std::fs::create_dir_all(&out).unwrap();
        let mut c = preloaded_command(
            &out,
            std::path::Path::new("/bin/sh"),
            &["-c", &script],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
                (
                    "HEAPLIVE_OUTPUT",
                    &format!("{}/%e.%p.folded", out.display()),
                ),
            ],
        );
        if !programs.is_empty() {
            c.env("HEAPLIVE_PROGRAMS", programs);
        }
        let o = c.output().expect("run sh");
        let mut files: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        (o, out, files)
    };
    let (o, out, files) = run(" sec_dum?, php-fpm*");
    assert_eq!(o.status.code(), Some(7), "{}", show(&o));
    assert_eq!(stdout(&o), "hi\n", "{}", show(&o));
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].starts_with("sec_dump."), "{files:?}");
    // One line, the profiled program's exit summary: none from the others.
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("exit dump {}", out.join(&files[0]).display())),
        "{err}"
    );
    let stacks = parse_folded(&out.join(&files[0]));
    assert_eq!(
        bytes_by_leaf(&stacks).get("main"),
        Some(&1000),
        "{stacks:?}"
    );

    // Without the setting the helper writes its file too (dash leaves with
    // _exit, and env's image ends in an exec: neither writes one).
    let (o, _, files) = run("");
    assert_eq!(o.status.code(), Some(7), "{}", show(&o));
    assert!(files.iter().any(|f| f.starts_with("cat.")), "{files:?}");
    assert!(
        files.iter().any(|f| f.starts_with("sec_dump.")),
        "{files:?}"
    );

    // A dormant process keeps the signal's usual effect (death by SIGUSR2),
    // and a bad value warns once and profiles every program.
    let o = preloaded_command(
        dir.path(),
        std::path::Path::new("/bin/sh"),
        &["-c", "kill -USR2 $$; echo survived"],
        &[("HEAPLIVE_PROGRAMS", "php-fpm*")],
    )
    .output()
    .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(libc::SIGUSR2), "{}", show(&o));
    let o = Command::new("/bin/cat")
        .arg("/nonexistent")
        .env("LD_PRELOAD", lib())
        .env("HEAPLIVE_OUTPUT", dir.path().join("bad.%e.%p.folded"))
        .env("HEAPLIVE_PROGRAMS", "/usr/sbin/php-fpm8.2")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("HEAPLIVE_PROGRAMS='/usr/sbin/php-fpm8.2'"))
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("using the default * (every program)"), "{err}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("bad.cat.")),
        "the default is in force"
    );
}

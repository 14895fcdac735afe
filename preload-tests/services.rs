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
    let (dir, prog) = compiled("programs", "sec_dump.c");
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
    // The dump and its timeline (NAME.timeline.tsv).
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(
        files.iter().all(|f| f.starts_with("sec_dump.")),
        "{files:?}"
    );
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

/// `heaplive dump` into a container: a process in its own pid namespace
/// (pid 1 there) and mount namespace with a private /tmp (as systemd's
/// `PrivateTmp=` or a container runtime makes it). Its status file is
/// `/tmp/heaplive-0/1` in its own /tmp; the command finds it through
/// `/proc/PID/root` and `NSpid`, and prints where the dump is as seen from
/// outside.
#[test]
fn dump_reaches_a_process_in_another_pid_and_mount_namespace() {
    use std::io::Write;
    let (_dir, prog) = compiled("pidns", "cli_grow.c");
    // Outside /tmp, which the namespace covers with its own tmpfs.
    let keep = std::path::PathBuf::from(format!("/run/heaplive-test.pidns.{}", std::process::id()));
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::copy(lib(), keep.join("libheaplive.so")).unwrap();
    std::fs::copy(&prog, keep.join("cli_grow")).unwrap();
    let script = "mount -t tmpfs -o mode=1777 heaplive-test /tmp || exit 90; cd /; \
                  LD_PRELOAD=$S/libheaplive.so exec $S/cli_grow";
    let mut c = Command::new("unshare");
    c.args([
        "--pid",
        "--fork",
        "--mount-proc",
        "--propagation",
        "private",
        "bash",
        "-c",
        script,
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("HEAPLIVE_") || k == "LD_PRELOAD" {
            c.env_remove(k);
        }
    }
    let mut child = Running::spawn(
        c.env("S", &keep)
            .env("HEAPLIVE_SAMPLE_INTERVAL", "1")
            .env("HEAPLIVE_DUMP_AT_EXIT", "0")
            .env("HEAPLIVE_OUTPUT", "/tmp/ns.%p.%n.folded")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped()),
    );
    let mut input = child.child().stdin.take().unwrap();
    assert_eq!(child.line().as_deref(), Some("ready"));
    writeln!(input, "grow 5000").unwrap();
    assert_eq!(child.line().as_deref(), Some("ok"));
    // The program: unshare's child, which exec'ed it (pid 1 inside).
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                s.contains("(cli_grow)")
                    && s.split(") ").nth(1).and_then(|r| r.split(' ').nth(1))
                        == Some(&child.pid().to_string())
            })
        })
        .expect("the program's pid");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("NSpid:") && l.ends_with("\t1")),
        "{status}"
    );
    let o = heaplive(&["dump", "--timeout", "20", &pid.to_string()]);
    let printed = ok(o);
    assert_eq!(printed, format!("/proc/{pid}/root/tmp/ns.1.1.folded\n"));
    let stacks = parse_folded(std::path::Path::new(printed.trim_end()));
    assert_eq!(bytes_under(&stacks, "grow_site"), 5000, "{stacks:?}");
    // A second dump: the count in the status file grew.
    let printed = ok(heaplive(&["dump", "--timeout", "20", &pid.to_string()]));
    assert_eq!(printed, format!("/proc/{pid}/root/tmp/ns.1.2.folded\n"));
    writeln!(input, "quit").unwrap();
    let st = child.wait().status;
    assert_eq!(st.code(), Some(5));
    let _ = std::fs::remove_dir_all(&keep);
}

/// Lines that stderr would lose (HEAPLIVE_LOG unset; stderr /dev/null at
/// start, replaced by /dev/null later as php-fpm does to its workers, or
/// closed) go to `heaplive.<euid>.log` next to the dump files; with a stderr that
/// reaches someone, they stay there and no such file appears.
#[test]
fn lines_stderr_would_lose_go_next_to_the_dumps() {
    let (dir, prog) = compiled("lognear", "log_devnull.c");
    let run = |sub: &str, args: &[&str], stderr: std::process::Stdio| {
        let out = dir.path().join(sub);
        std::fs::create_dir_all(&out).unwrap();
        let o = preloaded_command(
            dir.path(),
            &prog,
            args,
            &[("HEAPLIVE_OUTPUT", &format!("{}/h.%p.folded", out.display()))],
        )
        .stderr(stderr)
        .output()
        .unwrap();
        assert_eq!(o.status.code(), Some(0));
        let log = std::fs::read_to_string(out.join("heaplive.0.log")).unwrap_or_default();
        (log, out)
    };
    // Replaced by /dev/null after start.
    let (log, out) = run("replaced", &[], std::process::Stdio::piped());
    assert_eq!(
        log.lines().filter(|l| l.contains(": exit dump ")).count(),
        1,
        "{log:?}"
    );
    assert!(log.contains(&out.display().to_string()), "{log}");
    // /dev/null from the start.
    let (log, _) = run("null", &["x"], std::process::Stdio::null());
    assert_eq!(
        log.lines().filter(|l| l.contains(": exit dump ")).count(),
        1,
        "{log:?}"
    );
    // Closed by the program.
    let (log, _) = run("closed", &["close"], std::process::Stdio::piped());
    assert_eq!(
        log.lines().filter(|l| l.contains(": exit dump ")).count(),
        1,
        "{log:?}"
    );
    // A stderr that reaches someone keeps the lines: no file.
    let o = preloaded_command(
        dir.path(),
        &prog,
        &["keep"],
        &[(
            "HEAPLIVE_OUTPUT",
            &format!("{}/kept/h.%p.folded", dir.path().display()),
        )],
    );
    std::fs::create_dir_all(dir.path().join("kept")).unwrap();
    let o = {
        let mut o = o;
        o.output().unwrap()
    };
    // (`cat` would not do: coreutils close stderr in an exit handler that
    // runs before heaplive's exit dump, whose line then goes to the file.)
    assert!(stderr(&o).contains(": exit dump "), "{}", show(&o));
    assert!(!dir.path().join("kept/heaplive.0.log").exists());
}

/// The systemd drop-in of the README (`scripts/systemd/...`): systemd
/// reads it without a complaint, and php-fpm started as the unit starts it
/// (working directory `/`, the drop-in's environment with `%%` read as
/// `%`, its `ExecStartPre`, workers as www-data with stderr on /dev/null)
/// writes every file in /var/tmp/heaplive: the workers' signal and exit
/// dumps (owned by www-data) with their `.maps.txt`, the master's exit dump, the workers' lines
/// in heaplive.33.log and the master's in heaplive.0.log; a helper shell
/// the unit runs writes nothing. `heaplive dump --children` reaches the
/// workers with the drop-in's RTMIN+3 before their first dump (php-fpm's
/// process titles overwrite /proc/PID/environ: the status file written at
/// the start of heaplive's thread says which signal). Runs in
/// a private mount namespace with tmpfs on /tmp and /var/tmp.
#[test]
fn systemd_drop_in_example_puts_every_file_in_its_directory() {
    crate::php_harness::require_fpm();
    let dropin = root().join("scripts/systemd/php8.2-fpm.service.d/heaplive.conf");
    // systemd's own reading of the unit with the drop-in.
    let units = tempdir("systemd-units");
    std::fs::copy(
        "/lib/systemd/system/php8.2-fpm.service",
        units.path().join("php8.2-fpm.service"),
    )
    .unwrap();
    std::fs::create_dir_all(units.path().join("php8.2-fpm.service.d")).unwrap();
    std::fs::copy(
        &dropin,
        units.path().join("php8.2-fpm.service.d/heaplive.conf"),
    )
    .unwrap();
    let o = Command::new("systemd-analyze")
        .args(["verify", "php8.2-fpm.service"])
        .env("SYSTEMD_UNIT_PATH", format!("{}:", units.path().display()))
        .output()
        .expect("run systemd-analyze");
    assert!(!show(&o).contains("heaplive.conf"), "{}", show(&o));

    let script = format!(
        r##"
# The drop-in's text (the checkout may be under /tmp, which the tmpfs hides).
DROPIN=/tmp/heaplive.conf
cat > $DROPIN <<'HEAPLIVE_DROPIN_END'
{dropin}
HEAPLIVE_DROPIN_END
mount -t tmpfs -o mode=1777 heaplive-vartmp /var/tmp || exit 94
while IFS= read -r l; do
  case "$l" in
    Environment=*) v=${{l#Environment=}}; export "${{v//%%/%}}";;
    ExecStartPre=*) pre=${{l#ExecStartPre=}};;
  esac
done < $DROPIN
export LD_PRELOAD=$LIB   # the drop-in names /usr/local/lib; this build here
$pre || exit 93
printf '%s\n' '[global]' 'pid = /tmp/fpm.pid' 'error_log = /tmp/fpm.log' 'daemonize = no' \
  'process_control_timeout = 15s' '[www]' 'user = www-data' 'group = www-data' \
  'listen = /tmp/fpm.sock' 'pm = static' 'pm.max_children = 2' > /tmp/fpm.conf
cd /
/usr/sbin/php-fpm8.2 --nodaemonize --fpm-config /tmp/fpm.conf </dev/null >/tmp/journal 2>&1 &
M=$!
for i in $(seq 600); do
  grep -q 'ready to handle' /tmp/fpm.log 2>/dev/null && [ "$(pgrep -P $M | wc -l)" = 2 ] && break
  sleep 0.1
done
echo "DUMPED=$($HEAPLIVE dump --timeout 60 --children $M | grep -c '^/var/tmp/heaplive/php-fpm8.2\.')"
sh -c 'cat /etc/hostname > /dev/null; exit 0'
kill -QUIT $M; wait $M
cd /var/tmp/heaplive || exit 95
echo "MODE=$(stat -c %a .)"
echo "MASTER=$(ls | grep -c "^php-fpm8.2\.$M\.1\.folded$")"
echo "WORKER_FILES=$(ls | grep -E '^php-fpm8\.2\.[0-9]+\.[0-9]+\.folded$' | grep -vc "\.$M\.")"
echo "WORKER_OWNERS=$(ls | grep -E '^php-fpm8\.2\.[0-9]+\.[0-9]+\.folded$' | grep -v "\.$M\." | xargs -r stat -c %U | sort -u | tr '\n' ' ')"
echo "OTHERS=$(ls | grep -Evc '^(php-fpm8\.2\.[0-9]+\.[0-9]+((\.peak|\.samples)?\.folded|\.maps\.txt|\.timeline\.tsv)|heaplive\.(0|33)\.log)$')"
echo "LOG33=$(grep -c ': exit dump /var/tmp/heaplive/' heaplive.33.log)"
echo "SKIPPED33=$(grep -c ': exit dump skipped: nothing live' heaplive.33.log)"
echo "ROOTDIR=$(ls -A / | grep -c heaplive)"
echo "LOG0=$(grep -c ": exit dump /var/tmp/heaplive/php-fpm8.2.$M.1.folded" heaplive.0.log)"
"##,
        dropin = std::fs::read_to_string(&dropin).unwrap().trim_end()
    );
    let crate::security::Report { map: m, text: t } = crate::security::in_private_tmp(&script);
    let get = |k| crate::security::get(&m, k, &t);
    assert_eq!(get("DUMPED"), "2", "both workers dumped on request\n{t}");
    assert_eq!(get("MODE"), "1733", "{t}");
    assert_eq!(get("MASTER"), "1", "{t}");
    // Two signal dumps, and an exit dump per worker that had something
    // live (what it inherited from the master was sampled or not); a
    // worker with nothing live writes none, one line says so (issue 29).
    let (exits, skips): (usize, usize) = (
        get("LOG33").parse().unwrap(),
        get("SKIPPED33").parse().unwrap(),
    );
    assert_eq!(
        exits + skips,
        2,
        "each worker's exit: a dump or a line\n{t}"
    );
    assert_eq!(
        get("WORKER_FILES"),
        (2 + exits).to_string(),
        "two signal dumps and the exit dumps\n{t}"
    );
    assert_eq!(get("WORKER_OWNERS"), "www-data ", "{t}");
    assert_eq!(get("OTHERS"), "0", "nothing else, no helper's file\n{t}");
    assert_eq!(get("ROOTDIR"), "0", "nothing in /\n{t}");
    // php-fpm points the master's stderr at its error log: its line goes
    // next to the dumps too.
    assert_eq!(get("LOG0"), "1", "the master's exit line\n{t}");
}

/// HEAPLIVE_POISON=alloc,free: a program reading a new block sees 0xa5,
/// reading a freed block sees 0xdd; calloc stays zero and realloc keeps the
/// old bytes (only its new ones are filled). Real programs give the same
/// output and status with it.
#[test]
fn poison_mode_shows_its_patterns_and_real_programs_are_unchanged() {
    let (dir, prog) = compiled_with("poison", "poison_read.c", &["-O0"]);
    let o = run_preloaded(&dir, &prog, &[], &[("HEAPLIVE_POISON", "alloc,free")]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(
        stdout(&o),
        "alloc a5 a5\nfreed dd dd\ncalloc 00\nrealloc 22 a5\n",
        "{}",
        show(&o)
    );
    let o = run_preloaded(&dir, &prog, &[], &[("HEAPLIVE_POISON", "free")]);
    assert!(stdout(&o).contains("freed dd dd\n"), "{}", show(&o));
    assert!(!stdout(&o).contains("alloc a5"), "{}", show(&o));
    let o = run_preloaded(&dir, &prog, &[], &[]);
    assert!(
        !stdout(&o).contains("dd dd"),
        "off by default\n{}",
        show(&o)
    );

    let input = write_file(
        &dir,
        "input.txt",
        (0..5000)
            .map(|i| format!("{}\n", (i * 7919) % 5003))
            .collect::<String>(),
    );
    let cases: &[(&str, &[&str])] = &[
        (
            "python3",
            &[
                "-c",
                "import json; d={str(i): list(range(i%50)) for i in range(20000)}; print(len(json.dumps(d, sort_keys=True)))",
            ],
        ),
        (
            "perl",
            &[
                "-e",
                "my %h; $h{$_} = [1..($_ % 40)] for 1..20000; print scalar(keys %h), \"\\n\"",
            ],
        ),
        (
            "sqlite3",
            &[
                ":memory:",
                "create table t(a); with recursive c(x) as (select 1 union all select x+1 from c limit 20000) insert into t select x*x from c; select sum(a), count(*) from t;",
            ],
        ),
        ("sort", &["-n", input.to_str().unwrap()]),
    ];
    for (cmd, args) in cases {
        let which = Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .output()
            .unwrap();
        let path = stdout(&which).trim().to_string();
        assert!(!path.is_empty(), "{cmd} is a test dependency");
        let plain = run_plain(&dir, std::path::Path::new(&path), args);
        let poisoned = run_preloaded(
            &dir,
            std::path::Path::new(&path),
            args,
            &[
                ("HEAPLIVE_POISON", "alloc,free"),
                ("HEAPLIVE_DUMP_AT_EXIT", "0"),
            ],
        );
        assert_eq!(
            poisoned.status.code(),
            plain.status.code(),
            "{cmd}\n{}",
            show(&poisoned)
        );
        assert_eq!(poisoned.stdout, plain.stdout, "{cmd}\n{}", show(&poisoned));
        assert!(!plain.stdout.is_empty(), "{cmd}");
    }
}

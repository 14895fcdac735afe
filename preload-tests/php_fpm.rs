//! php-fpm8.2 under the preload: workers dump on SIGUSR2 idle and
//! mid-request and live on, the master dumps and still reloads, SIGQUIT
//! leaves exit dumps; with ZendMM on, a C extension's allocations (sqlite3,
//! loaded with RTLD_DEEPBIND by PHP) are seen. The test talks FastCGI to
//! the pool itself. php-fpm8.2 and php8.2-sqlite3 come from
//! scripts/install-test-deps.sh (`make test`): missing, the tests fail.

use crate::common::*;
use crate::php_harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn fpm_workers_and_master_dump_on_usr2_and_live() {
    let dir = tempdir("php-fpm");
    let mut fpm = Fpm::start(&dir, false, &[]);
    let ctx = fpm.ctx();
    let master = fpm.pid();
    let workers = children_of(master);
    assert_eq!(workers.len(), 2, "pm.max_children = 2\n{}", ctx());

    let (req, busy) = hold_request(
        &fpm,
        "big.php",
        "$a = [];\nfor ($i = 0; $i < 500000; $i++) { $a[] = str_repeat('x', 100) . $i; }",
        "echo 'done ', count($a), \"\\n\";",
        &workers,
    );
    let idle = *workers.iter().find(|&&w| w != busy).unwrap();

    // USR2 to the worker mid-request and to the idle one.
    kill(busy, libc::SIGUSR2);
    kill(idle, libc::SIGUSR2);
    let busy_file = wait_for("the busy worker's signal dump", &ctx, || {
        dumps_in_log(&dir, busy, "signal").into_iter().next()
    });
    let idle_file = wait_for("the idle worker's signal dump", &ctx, || {
        dumps_in_log(&dir, idle, "signal").into_iter().next()
    });
    release_expecting(&fpm, req, "the interrupted request", "done 500000");
    // Both workers survived (the master would have replaced a dead one).
    for w in [busy, idle] {
        assert!(alive(w), "worker {w} died after SIGUSR2\n{}", ctx());
    }
    assert_eq!(
        children_of(master),
        workers,
        "the workers changed after SIGUSR2\n{}",
        ctx()
    );

    // One file per worker, in the output directory, named by its pid.
    assert_ne!(busy_file, idle_file);
    assert_eq!(
        busy_file,
        dir.join(format!("fpm.{busy}.1.folded")),
        "\n{}",
        ctx()
    );
    assert_eq!(
        idle_file,
        dir.join(format!("fpm.{idle}.1.folded")),
        "\n{}",
        ctx()
    );
    let busy_stacks = parse_folded(&busy_file);
    let idle_stacks = parse_folded(&idle_file);
    assert_bytes_at_least(
        engine_bytes(&busy_stacks),
        40_000_000,
        &busy_stacks,
        "the mid-request dump must show the ~60 MB array under the engine's frames",
        &ctx,
    );
    assert!(
        total(&idle_stacks) < 40_000_000,
        "the idle worker's file shows {} bytes: another process's memory?\n{}",
        total(&idle_stacks),
        top_stacks(&idle_stacks, 10)
    );

    // USR2 to the master: it dumps and still reloads (same pid, new workers).
    let master_file = signal_dump(&dir, master, "the master's signal dump", &ctx);
    parse_folded(&master_file);
    let new_workers = wait_for("new workers after the reload", &ctx, || {
        let now = children_of(master);
        (now.len() == 2
            && now.iter().all(|w| !workers.contains(w))
            && workers.iter().all(|&w| !alive(w)))
        .then_some(now)
    });
    assert!(
        alive(master),
        "the master must survive its reload\n{}",
        ctx()
    );
    wait_for("the reloaded master to say it is ready", &ctx, || {
        let log = std::fs::read_to_string(dir.join("fpm.log")).unwrap_or_default();
        (log.matches("ready to handle connections").count() >= 2).then_some(())
    });
    let hello = write_file(
        &dir,
        "hello.php",
        "<?php echo 'hello from ', getmypid(), \"\\n\";\n",
    );
    let r = fpm.get(&hello);
    let who: u32 = r
        .body()
        .trim()
        .strip_prefix("hello from ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "after the reload: {:?} / {:?}\n{}",
                r.stdout,
                r.stderr,
                ctx()
            )
        });
    assert!(
        new_workers.contains(&who),
        "served by {who}, not a new worker {new_workers:?}"
    );

    // The old workers left with SIGQUIT at the reload: exit dumps.
    for w in &workers {
        assert_eq!(
            dumps_in_log(&dir, *w, "exit").len(),
            1,
            "old worker {w}: exit dump at the reload\n{}",
            ctx()
        );
    }

    // SIGQUIT: exit dumps for the master and the workers.
    let st = fpm.quit();
    assert!(
        st.success(),
        "the master's exit status after SIGQUIT: {st}\n{}",
        ctx()
    );
    for pid in std::iter::once(master).chain(new_workers.iter().copied()) {
        let exits = dumps_in_log(&dir, pid, "exit");
        assert_eq!(exits.len(), 1, "{pid}: one exit dump\n{}", ctx());
        // A worker with nothing live writes none ("exit dump skipped:
        // nothing live"); the master, not a fork's child, always does.
        assert!(
            exits[0].exists() || pid != master && exits[0] == Path::new("skipped"),
            "{} is missing\n{}",
            exits[0].display(),
            ctx()
        );
    }
    for f in folded_files(&dir) {
        parse_folded(&f);
    }
    let log = log_of(&dir);
    assert!(!log.contains("dump failed"), "a dump failed\n{}", ctx());
}

#[test]
fn fpm_zendmm_sqlite3_allocations_are_seen() {
    require_fpm();
    let m = Command::new(fpm_bin())
        .arg("-m")
        .output()
        .expect("php-fpm -m");
    assert!(
        String::from_utf8_lossy(&m.stdout)
            .lines()
            .any(|l| l.trim() == "sqlite3"),
        "the sqlite3 extension is missing from {} (php8.2-sqlite3; scripts/install-test-deps.sh):\n{}",
        fpm_bin(),
        String::from_utf8_lossy(&m.stdout)
    );
    let dir = tempdir("php-fpm-sqlite");
    // ZendMM on (no USE_ZEND_ALLOC); a finer sampling for a steady estimate.
    let mut fpm = Fpm::start(&dir, true, &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")]);
    let ctx = fpm.ctx();
    let master = fpm.pid();
    let workers = children_of(master);
    // 40,000 rows of 250 bytes: about 10 MB of sqlite pages, all in memory.
    let (req, busy) = hold_request(
        &fpm,
        "sqlite.php",
        "$db = new SQLite3(':memory:');\n\
         $db->exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)');\n\
         $db->exec('INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) SELECT randomblob(250) FROM c');",
        "echo 'rows ', $db->querySingle('SELECT count(*) FROM t'), \"\\n\";",
        &workers,
    );
    let file = signal_dump(&dir, busy, "the worker's signal dump", &ctx);
    release_expecting(&fpm, req, "the request", "rows 40000");
    assert!(alive(busy), "the worker died\n{}", ctx());

    let log = log_of(&dir);
    assert!(
        log.lines()
            .any(|l| l.contains("RTLD_DEEPBIND") && l.contains("cleared")),
        "PHP loads extensions with RTLD_DEEPBIND: heaplive must say it cleared it\n{}",
        ctx()
    );
    let stacks = parse_folded(&file);
    assert_bytes_at_least(
        sqlite_bytes(&stacks),
        5_000_000,
        &stacks,
        "about 10 MB of sqlite pages must show under libsqlite3's frames",
        &ctx,
    );
    let st = fpm.quit();
    assert!(st.success(), "exit status after SIGQUIT: {st}\n{}", ctx());
    assert_eq!(
        dumps_in_log(&dir, master, "exit").len(),
        1,
        "master exit dump\n{}",
        ctx()
    );
}

/// A request that holds a 67 MB PHP array (`array_fill` of 3.2 million
/// ints: one packed block of 2^22 zvals) and sleeps in `sleep(1)` calls
/// until the test creates its release file. It checks each sleep itself
/// (returned 0 and lasted at least a second by `hrtime`) and counts the
/// ones cut short. Writes its worker's pid to `busy`.
fn sleeping_array_script(dir: &Path, name: &str, busy: &Path, release: &Path) -> PathBuf {
    let text = format!(
        "<?php\n\
         $a = array_fill(0, 3200000, 7);\n\
         file_put_contents('{busy}.tmp', getmypid());\n\
         rename('{busy}.tmp', '{busy}');\n\
         $cut = 0; $n = 0;\n\
         do {{\n\
             $t = hrtime(true); $r = sleep(1); $e = hrtime(true) - $t;\n\
             if ($r !== 0 || $e < 1000000000) {{ $cut++; }}\n\
             $n++;\n\
         }} while (!file_exists('{release}') && $n < 600);\n\
         echo 'sleeps cut short: ', $cut, '; array ', count($a), ' sum ', array_sum($a), \"\\n\";\n",
        busy = busy.display(),
        release = release.display(),
    );
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Issue 17's php-fpm check, for one way of running PHP's allocator
/// (`zend_alloc`: ZendMM on, else USE_ZEND_ALLOC=0), in a pool of root's
/// and in one of www-data's: a request holds a 67 MB array and sleeps; its
/// worker gets 20 dump signals from `kill -USR2 PID` and then 20 from
/// `pkill -USR2 -P MASTER -f 'pool NAME$'` (the pool's two workers), each
/// once the previous dump of the busy worker is written. Every one of
/// its 40 dumps holds the array (default sampling: a block of 67 MB is
/// sampled with probability 1 - exp(-67 MB / 512 KiB) = 1 - e^-128, so the
/// false-failure rate is about 40 e^-128 per pool), no sleep of the
/// request was cut short (the script's own check), and the response is
/// byte for byte the one php-fpm gives without the preload.
fn fpm_request_signalled_forty_times(zend_alloc: bool) {
    let tag = if zend_alloc { "zendmm" } else { "malloc" };
    let dir = tempdir(&format!("php-fpm-sleep-{tag}"));
    // The www-data pool's script writes its files here.
    let wd_dir = dir.join("wd");
    std::fs::create_dir(&wd_dir).unwrap();
    std::fs::set_permissions(&wd_dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let pools = [("www", dir.to_path_buf()), ("wd", wd_dir)];
    let scripts: Vec<(PathBuf, PathBuf, PathBuf)> = pools
        .iter()
        .map(|(name, d)| {
            let (busy, release) = (d.join("busy.pid"), d.join("release"));
            let script = sleeping_array_script(d, &format!("{name}.php"), &busy, &release);
            (script, busy, release)
        })
        .collect();

    // The responses without the preload (release created up front: one
    // sleep each).
    let want: Vec<String> = {
        let d = tempdir(&format!("php-fpm-sleep-{tag}-plain"));
        let opts = FpmOpts {
            preload: false,
            www_data_pool: true,
            ..FpmOpts::default()
        };
        let mut fpm = Fpm::start_opts(&d, zend_alloc, &[], &opts);
        let mut v = Vec::new();
        for (i, (script, busy, release)) in scripts.iter().enumerate() {
            std::fs::write(release, "").unwrap();
            let port = if i == 0 { fpm.port() } else { fpm.wd_port() };
            let r = fpm.get_on(port, script);
            assert!(
                r.body()
                    .starts_with("sleeps cut short: 0; array 3200000 sum 22400000"),
                "without the preload: {:?} / {:?}\n{}",
                r.stdout,
                r.stderr,
                fpm.ctx()()
            );
            v.push(r.stdout);
            let _ = std::fs::remove_file(release);
            let _ = std::fs::remove_file(busy);
        }
        assert!(fpm.quit().success());
        v
    };

    let opts = FpmOpts {
        www_data_pool: true,
        ..FpmOpts::default()
    };
    let mut fpm = Fpm::start_opts(&dir, zend_alloc, &[], &opts);
    let ctx = fpm.ctx();
    let master = fpm.pid();
    for (i, (script, busy_file, release)) in scripts.iter().enumerate() {
        let (pool, port) = if i == 0 {
            ("www", fpm.port())
        } else {
            ("wd", fpm.wd_port())
        };
        let (req, busy) = start_holding_request_on(&fpm, port, script, busy_file);
        let uid = std::fs::read_to_string(format!("/proc/{busy}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                Some(
                    l.strip_prefix("Uid:")?
                        .split_whitespace()
                        .next()?
                        .to_string(),
                )
            });
        assert_eq!(
            uid.as_deref(),
            Some(if i == 0 { "0" } else { "33" }),
            "{pool}: the worker's user (root, www-data)\n{}",
            ctx()
        );
        let signal_dumps = || dumps_in_log(&dir, busy, "signal");
        let before = signal_dumps().len();
        for n in 1..=40 {
            let o = if n <= 20 {
                Command::new("kill")
                    .args(["-USR2", &busy.to_string()])
                    .output()
            } else {
                Command::new("pkill")
                    .args(["-USR2", "-P", &master.to_string(), "-f"])
                    .arg(format!("pool {pool}$"))
                    .output()
            }
            .unwrap();
            assert!(o.status.success(), "{pool}: signal {n}: {}", show(&o));
            wait_for(&format!("{pool}: the busy worker's dump {n}"), &ctx, || {
                (signal_dumps().len() >= before + n).then_some(())
            });
        }
        std::fs::write(release, "").unwrap();
        let resp = req
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("{pool}: the request: {e}\n{}", ctx()));
        assert_eq!(
            resp.stdout,
            want[i],
            "{pool}: the response differs from the one without the preload (stderr {:?})\n{}",
            resp.stderr,
            ctx()
        );
        assert!(alive(busy), "{pool}: the worker died\n{}", ctx());
        let files = signal_dumps();
        assert_eq!(files.len(), before + 40, "{pool}\n{}", ctx());
        for f in &files[before..] {
            let stacks = parse_folded(f);
            assert!(
                stacks.iter().any(|s| s.bytes >= 64 << 20),
                "{pool}: {} does not hold the 67 MB array\ntop stacks:\n{}\n{}",
                f.display(),
                top_stacks(&stacks, 5),
                ctx()
            );
        }
    }
    let st = fpm.quit();
    assert!(st.success(), "exit status after SIGQUIT: {st}\n{}", ctx());
    let log = log_of(&dir);
    // The www-data workers' files went to /tmp (the test directory is
    // root's): every file a log line names outside it, and its views.
    for word in log.split_whitespace() {
        let f = word.trim_end_matches(':');
        if let Some(stem) = f.strip_suffix(".folded")
            && f.starts_with("/tmp/fpm.")
            && !Path::new(f).starts_with(&*dir)
        {
            for v in ["", ".alloc", ".samples", ".peak"] {
                let _ = std::fs::remove_file(format!("{stem}{v}.folded"));
            }
        }
    }
    assert!(!log.contains("dump failed"), "a dump failed\n{}", ctx());
}

#[test]
fn fpm_zendmm_request_sleep_is_not_cut_and_forty_dumps_hold_the_array() {
    fpm_request_signalled_forty_times(true);
}

#[test]
fn fpm_malloc_request_sleep_is_not_cut_and_forty_dumps_hold_the_array() {
    fpm_request_signalled_forty_times(false);
}

//! `heaplive top --pool`: a php-fpm pool of 3 workers (pm = static) under
//! the preload, every worker dumped with SIGUSR2, then `top --pool
//! MASTER_PID` and `top --pool DIR`: one row per worker whose live total is
//! its dump's total, a SUM row that adds them, and maps columns that are
//! the rows of each worker's NAME.maps.txt and their sums.

use crate::common::*;
use crate::php_harness::{Fpm, FpmOpts, children_of, dumps_in_log, fcgi_get, kill, wait_for};
use std::collections::BTreeMap;
use std::path::Path;

/// The kinds and bytes of a maps file, read independently of the command:
/// the first field is the bytes; the kind is what follows the human size,
/// up to the next run of two spaces.
fn maps_rows(path: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let l = l.trim_start();
            let (n, rest) = l.split_once(' ').unwrap();
            let (_, rest) = rest.trim_start().split_once("  ").unwrap();
            let kind = rest.trim_start().split("  ").next().unwrap().trim();
            (kind.replace(' ', "-"), n.parse().unwrap())
        })
        .collect()
}

/// The table's rows: first cell -> the cells by column name.
fn table(out: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut lines = out.lines();
    let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let mut rows = BTreeMap::new();
    for l in lines {
        let cells: Vec<&str> = l.split_whitespace().collect();
        if cells.len() < head.len() || !(cells[0] == "SUM" || cells[0].parse::<u32>().is_ok()) {
            continue;
        }
        let row: BTreeMap<String, String> = head
            .iter()
            .zip(&cells)
            .map(|(h, c)| (h.to_string(), c.to_string()))
            .collect();
        rows.insert(cells[0].to_string(), row);
    }
    rows
}

#[test]
fn top_pool_rows_are_the_workers_dumps_and_their_sum() {
    let dir = tempdir("top-pool");
    let fpm = Fpm::start_opts(
        &dir,
        true,
        &[],
        &FpmOpts {
            children: 3,
            ..FpmOpts::default()
        },
    );
    let ctx = fpm.ctx();
    let master = fpm.pid();
    let workers = children_of(master);
    assert_eq!(workers.len(), 3, "pm.max_children = 3\n{}", ctx());
    // No dump yet: one clear line naming where it looked.
    let o = heaplive(&["top", "--pool", &master.to_string()]);
    assert!(!o.status.success(), "{}", show(&o));
    let e = stderr(&o);
    assert!(
        e.contains("has written a dump")
            && e.contains("/tmp/heaplive-")
            && e.contains("heaplive dump"),
        "{e}"
    );

    // One request first, so that one worker's rows differ from the others'
    // (its ZendMM keeps the request's chunks, 8 MiB here).
    let script = write_file(
        &dir,
        "grow.php",
        "<?php static $keep = []; $a = []; for ($i = 0; $i < 100000; $i++) { $a[] = str_repeat('y', 50) . $i; } echo count($a);\n",
    );
    let r =
        fcgi_get(fpm.port(), &script, "/grow.php", "").unwrap_or_else(|e| panic!("{e}\n{}", ctx()));
    assert_eq!(r.body().trim(), "100000", "\n{}", ctx());
    for &w in &workers {
        kill(w, libc::SIGUSR2);
    }
    let mut dumps = BTreeMap::new();
    for &w in &workers {
        let f = wait_for("the worker's signal dump", &ctx, || {
            dumps_in_log(&dir, w, "signal").into_iter().next()
        });
        dumps.insert(w, f);
    }

    // What the files say.
    let mut want_live = BTreeMap::new();
    let mut want_maps: BTreeMap<u32, Vec<(String, u64)>> = BTreeMap::new();
    for (&w, f) in &dumps {
        let bytes = std::fs::read(f).unwrap();
        let total = heaplive_format::folded::parse("dump", &bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
            .total();
        assert!(total > 0, "worker {w}'s dump is empty\n{}", ctx());
        want_live.insert(w, total);
        let maps =
            Path::new(&f.display().to_string().replace(".folded", ".maps.txt")).to_path_buf();
        want_maps.insert(w, maps_rows(&maps));
    }

    let d = dir.display().to_string();
    for target in [master.to_string(), d] {
        let out = ok(heaplive(&["top", "--pool", &target, "--bytes"]));
        let rows = table(&out);
        assert_eq!(rows.len(), 4, "3 workers and SUM: {target}\n{out}");
        for (&w, &live) in &want_live {
            let r = &rows[&w.to_string()];
            assert_eq!(
                r["LIVE"],
                live.to_string(),
                "worker {w}'s live total\n{out}"
            );
            for (k, b) in &want_maps[&w] {
                assert_eq!(r[k], b.to_string(), "worker {w}'s {k}\n{out}");
            }
        }
        let sum = &rows["SUM"];
        let live_sum: u128 = want_live.values().sum();
        assert_eq!(sum["LIVE"], live_sum.to_string(), "{out}");
        let kinds: Vec<&String> = want_maps
            .values()
            .next()
            .unwrap()
            .iter()
            .map(|(k, _)| k)
            .collect();
        assert!(kinds.iter().any(|k| *k == "ZendMM"), "{kinds:?}");
        for k in kinds {
            let s: u64 = want_maps
                .values()
                .map(|m| m.iter().find(|(n, _)| n == k).map_or(0, |r| r.1))
                .sum();
            assert_eq!(sum[k], s.to_string(), "SUM of {k}\n{out}");
        }
        assert!(out.contains("ZendMM resident"), "{out}");
    }

    // An empty directory: one line naming it.
    let empty = tempdir("top-pool-empty");
    let o = heaplive(&["top", "--pool", &empty.path().display().to_string()]);
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        stderr(&o).contains(&empty.path().display().to_string()) && stderr(&o).contains("no dumps"),
        "{}",
        show(&o)
    );
}

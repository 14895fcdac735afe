//! Issue 28: the per-stack 95% intervals that `heaplive top` prints, from
//! the samples file every sampled dump has (`NAME.samples.folded`,
//! version 2: samples and variance per view and stack, with no variance
//! file asked for), calibrated against known truth. `progs/stats_groups.c` has one call site per group
//! (tiny blocks seen in a minority of runs, few and many small-block
//! samples, blocks of R/2 and 2R, mixed sizes, blocks of 64 R sampled with
//! certainty, a site allocated and freed) and prints the exact bytes of
//! each site in the live, alloc and peak views. It runs at R = 64 KiB for
//! `SEEDS` seeds, four processes at a time (each well under a second).
//!
//! Coverage: where the interval is calibrated, the count of runs in which
//! it covers the truth is Binomial(n, p) with p >= 0.95 (the exact
//! interval for few samples is conservative). The test fails when the
//! count is below the `BINOMIAL_FALSE_FAILURE` quantile of Binomial(n,
//! 0.95): per check a false failure has probability under 4e-8, and over
//! the 18 coverage checks (sites and views) under 1e-6. With the fixed seeds the test is
//! deterministic.
//!
//! Width: the median half-width of the printed intervals is within 1.5x of
//! the empirical 95th percentile of the estimate's error (the interval is
//! not needlessly wide: the old ±1.96/sqrt(n) was 2.4x to 6.4x too wide
//! for blocks near and above R). Groups whose stack is seen in fewer than
//! 100 runs, and the exact group, are left out of the width check.
//!
//! Blocks sampled with certainty print a zero-width interval equal to the
//! truth, in every run and view.

use crate::common::{self, show};
use heaplive_format::stats;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SEEDS: u64 = 200;
const BINOMIAL_FALSE_FAILURE: f64 = 4e-8;
const VIEWS: [&str; 3] = ["live", "alloc", "peak"];

/// What `heaplive top --bytes` printed for one site: the estimate and its
/// interval.
#[derive(Clone, Copy, Debug)]
struct Row {
    est: f64,
    lo: f64,
    hi: f64,
}

/// Per view (`live`, `alloc`, `peak`), per site.
type Rows = BTreeMap<&'static str, BTreeMap<String, Row>>;

/// The rows of `heaplive top --bytes -w 0 FILE` by leaf function:
/// `LIVE SHARE SAMPLES LO..HI leaf <- ...`.
fn top_rows(file: &Path) -> (BTreeMap<String, Row>, String) {
    let text = common::top_exact(&["-n", "0"], file);
    let mut rows = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || !f[4].starts_with("site_") {
            continue;
        }
        let (lo, hi) = f[3]
            .split_once("..")
            .unwrap_or_else(|| panic!("no interval in {line:?}:\n{text}"));
        rows.insert(
            f[4].to_string(),
            Row {
                est: f[0].parse().unwrap(),
                lo: lo.parse().unwrap(),
                hi: hi.parse().unwrap(),
            },
        );
    }
    (rows, text)
}

fn file_of(dir: &Path, view: &str) -> PathBuf {
    let files = if view == "live" {
        common::folded_files(dir)
    } else {
        common::view_files(dir, view)
    };
    assert_eq!(
        files.len(),
        1,
        "{view} files in {}: {files:?}",
        dir.display()
    );
    files.into_iter().next().unwrap()
}

fn one_run(bin: &Path, seed: u64, dir: &Path) -> Rows {
    let d = dir.join(format!("s{seed}"));
    std::fs::create_dir_all(&d).unwrap();
    let o = common::run_preloaded(
        &d,
        bin,
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
            ("HEAPLIVE_SEED", &seed.to_string()),
            // The default views with the allocation view: the intervals of
            // all three come from the one samples file.
            ("HEAPLIVE_VIEWS", "live,alloc,peak,samples"),
        ],
    );
    assert!(o.status.success(), "seed {seed}: {}", show(&o));
    assert!(
        common::view_files(&d, "variance").is_empty(),
        "seed {seed}: variance files by default"
    );
    let mut rows = Rows::new();
    for view in VIEWS {
        let (r, _) = top_rows(&file_of(&d, view));
        rows.insert(view, r);
    }
    let _ = std::fs::remove_dir_all(&d);
    rows
}

/// The truth per site: (live, alloc, peak), as the program prints it.
fn truth(out: &str) -> BTreeMap<String, [f64; 3]> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| {
                (
                    f[0].to_string(),
                    [1, 2, 3].map(|i| f[i].parse::<f64>().unwrap()),
                )
            })
        })
        .collect()
}

/// The variances per leaf of `view` in the samples file of the dump
/// `live` (`NAME.folded`'s `NAME.samples.folded`, version 2).
fn variances_by_leaf(live: &Path, view: &str) -> BTreeMap<String, f64> {
    let path = PathBuf::from(live.to_str().unwrap().replace(".folded", ".samples.folded"));
    let bytes = std::fs::read(&path).unwrap();
    let s = heaplive_format::samples::parse(path.to_str().unwrap(), &bytes).unwrap();
    let mut m = BTreeMap::new();
    for (stack, st) in s.view(view).cloned().unwrap_or_default() {
        let leaf = stack.rsplit(';').next().unwrap().to_string();
        *m.entry(leaf).or_default() += st.variance;
    }
    m
}

/// The smallest c with P(X < c) <= `alpha` for X ~ Binomial(n, p).
fn binomial_lower_bound(n: u64, p: f64, alpha: f64) -> u64 {
    let ln_choose = |k: u64| -> f64 {
        (1..=k)
            .map(|i| ((n - k + i) as f64 / i as f64).ln())
            .sum::<f64>()
    };
    let mut cdf = 0.0;
    for c in 0..=n {
        let pk = (ln_choose(c) + c as f64 * p.ln() + (n - c) as f64 * (1.0 - p).ln()).exp();
        if cdf + pk > alpha {
            return c;
        }
        cdf += pk;
    }
    n
}

#[test]
fn intervals_are_calibrated_per_group_and_view() {
    let dir = common::tempdir("intervals");
    let (bin, plain) = common::compile_and_run_plain(&dir, "stats_groups.c");
    let truth = truth(&common::stdout(&plain));
    assert_eq!(truth.len(), 8, "{}", show(&plain));

    let seeds: Vec<u64> = (1..=SEEDS).collect();
    let mut runs: Vec<Rows> = Vec::new();
    for chunk in seeds.chunks(4) {
        std::thread::scope(|s| {
            let hs: Vec<_> = chunk
                .iter()
                .map(|&seed| {
                    let (bin, dir) = (&bin, dir.path());
                    s.spawn(move || one_run(bin, seed, dir))
                })
                .collect();
            for h in hs {
                runs.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
            }
        });
    }

    let mut report = Vec::new();
    let mut bad = Vec::new();
    for (vi, view) in VIEWS.iter().enumerate() {
        for (site, t) in &truth {
            let t = t[vi];
            if t == 0.0 {
                // Freed: no row in any run.
                let seen = runs.iter().filter(|r| r[view].contains_key(site)).count();
                if seen > 0 {
                    bad.push(format!("{view} {site}: freed, yet shown in {seen} runs"));
                }
                continue;
            }
            let rows: Vec<Row> = runs
                .iter()
                .filter_map(|r| r[view].get(site).copied())
                .collect();
            let n = rows.len() as u64;
            if site == "site_always" {
                // Sampled with certainty: exact, zero width, every run.
                let wrong: Vec<&Row> = rows
                    .iter()
                    .filter(|r| r.est != t || r.lo != t || r.hi != t)
                    .collect();
                report.push(format!(
                    "{view:>5} {site:<12} truth {t:>9}: seen {n:>3}/{SEEDS}, exact with zero width in {} runs",
                    n as usize - wrong.len()
                ));
                if n != SEEDS || !wrong.is_empty() {
                    bad.push(format!(
                        "{view} {site}: seen in {n} of {SEEDS} runs; not exact with a zero-width interval: {:?}",
                        &wrong[..wrong.len().min(3)]
                    ));
                }
                continue;
            }
            let covered = rows.iter().filter(|r| r.lo <= t && t <= r.hi).count() as u64;
            let need = binomial_lower_bound(n, 0.95, BINOMIAL_FALSE_FAILURE);
            let mut errors: Vec<f64> = rows.iter().map(|r| (r.est - t).abs()).collect();
            errors.sort_by(f64::total_cmp);
            let mut halves: Vec<f64> = rows.iter().map(|r| (r.hi - r.lo) / 2.0).collect();
            halves.sort_by(f64::total_cmp);
            let p95 = errors
                .get(((n as f64 * 0.95).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0.0);
            let median = halves.get(halves.len() / 2).copied().unwrap_or(0.0);
            let ratio = median / p95;
            let line = format!(
                "{view:>5} {site:<12} truth {t:>9}: seen {n:>3}/{SEEDS}, covered {covered:>3} ({:.1}%, at least {need}), median half-width {:.1}% of truth, 95th percentile error {:.1}%, ratio {ratio:.2}",
                100.0 * covered as f64 / n.max(1) as f64,
                100.0 * median / t,
                100.0 * p95 / t
            );
            if covered < need {
                bad.push(format!("coverage: {line}"));
            }
            if n >= 100 && !(1.0 / 1.5..=1.5).contains(&ratio) {
                bad.push(format!("width: {line}"));
            }
            report.push(line);
        }
    }
    common::assert_no_failures(&bad, "\n", "\nall groups:\n", &report);
}

/// The bound is computed right (the test above leans on it).
#[test]
fn binomial_bounds() {
    // Binomial(200, 0.95): mean 190, sd 3.1; 4e-8 is 5.4 sd below.
    let c = binomial_lower_bound(200, 0.95, 4e-8);
    assert!((168..=176).contains(&c), "{c}");
    assert_eq!(binomial_lower_bound(10, 0.5, 0.0), 0);
    assert_eq!(binomial_lower_bound(10, 0.5, 0.5), 5);
}

/// `heaplive merge` of two default dumps and of their samples files
/// (`merge --samples`; `merge --variance` gives the same variances): `top`
/// on the sum prints, per stack and for the total, the interval of the
/// summed estimate from the summed variances.
#[test]
fn merged_dumps_have_the_intervals_of_the_sum() {
    let (dir, bin) = common::compiled("intervals-merge", "stats_groups.c");
    let mut lives = Vec::new();
    for seed in [11u64, 12] {
        let d = dir.join(format!("s{seed}"));
        std::fs::create_dir_all(&d).unwrap();
        let o = common::run_preloaded(
            &d,
            &bin,
            &[],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
                ("HEAPLIVE_SEED", &seed.to_string()),
            ],
        );
        assert!(o.status.success(), "{}", show(&o));
        // The dump's line states the bound on stacks with no sample.
        let bound = heaplive_format::units::human_bytes(stats::unseen_bound(65536.0));
        assert!(
            common::stderr(&o).contains(&format!("; a stack with no sample holds under {bound})")),
            "{}",
            show(&o)
        );
        lives.push(file_of(&d, "live"));
    }
    let names: Vec<&str> = lives.iter().map(|p| p.to_str().unwrap()).collect();
    let merged = common::write_file(
        &dir,
        "m.folded",
        common::ok(common::heaplive(&[&["merge"], &names[..]].concat())),
    );
    // The samples file of the sum: samples and variances added up.
    std::fs::write(
        dir.join("m.samples.folded"),
        common::ok(common::heaplive(
            &[&["merge", "--samples"], &names[..]].concat(),
        )),
    )
    .unwrap();
    // merge --variance: the same variances as a folded file.
    let mv = common::write_file(
        &dir,
        "merged-variances.txt",
        common::ok(common::heaplive(
            &[&["merge", "--variance"], &names[..]].concat(),
        )),
    );
    let merged_variances = common::bytes_by_leaf(&common::parse_folded(&mv));

    // What the two dumps say per leaf: bytes and variances, summed.
    let sum_of = |suffix: &str| {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for live in &lives {
            let f = PathBuf::from(live.to_str().unwrap().replace(".folded", suffix));
            for (leaf, v) in common::bytes_by_leaf(&common::parse_folded(&f)) {
                *m.entry(leaf).or_default() += v as f64;
            }
        }
        m
    };
    let bytes = sum_of(".folded");
    let mut variances: BTreeMap<String, f64> = BTreeMap::new();
    for live in &lives {
        for (leaf, v) in variances_by_leaf(live, "live") {
            *variances.entry(leaf).or_default() += v;
        }
    }
    for (leaf, v) in &variances {
        // Each file's variances are rounded to whole bytes squared.
        let m = merged_variances.get(leaf).copied().unwrap_or(0) as f64;
        assert!(
            (m - v).abs() <= 2.0,
            "merge --variance of {leaf}: {m} vs {v}"
        );
    }
    let (rows, text) = top_rows(&merged);
    for site in ["site_small", "site_many", "site_near", "site_mixed"] {
        let r = rows[site];
        let (b, v) = (bytes[site], variances[site]);
        assert!(v > 0.0, "{site}: no variance\n{text}");
        let (lo, hi) = stats::interval95(b, v);
        assert_eq!(
            (r.est, r.lo, r.hi),
            (b, lo.round(), hi.round()),
            "{site}\n{text}"
        );
    }
    let a = rows["site_always"];
    assert_eq!((a.lo, a.hi), (a.est, a.est), "{text}");
    assert_eq!(a.est, 2.0 * 12582912.0, "{text}");
    // The total's interval, from the variances of all stacks.
    let total: f64 = bytes.values().sum();
    let (lo, hi) = stats::interval95(total, variances.values().sum());
    let want = format!(
        "total: {} bytes in {} stacks, 95% interval {}..{}",
        total,
        common::parse_folded(&merged).len(),
        lo.round(),
        hi.round()
    );
    assert!(text.contains(&want), "{want:?} not in\n{text}");
    // diff of the two dumps: each change's ±95% is 1.96 sqrt(v_old + v_new).
    let diff = common::ok(common::heaplive(&[
        "diff", "--bytes", "-w", "0", names[0], names[1],
    ]));
    let var_of = |live: &PathBuf| {
        variances_by_leaf(live, "live")
            .into_iter()
            .map(|(k, v)| (k, v.round() as u64))
            .collect::<BTreeMap<String, u64>>()
    };
    let (v0, v1) = (var_of(&lives[0]), var_of(&lives[1]));
    let row = common::first_line_with(&diff, " site_many ", &diff);
    let want = (stats::Z95 * ((v0["site_many"] + v1["site_many"]) as f64).sqrt()).round();
    assert_eq!(
        row.split_whitespace().nth(1),
        Some(format!("±{want}").as_str()),
        "{diff}"
    );
    // And the last line bounds what stacks with no sample hold.
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("not seen: a stack with no sample holds under ")
            && last.contains(" at 95% "),
        "{text}"
    );
}

/// PHP mode: the ZendMM stacks (`[zend_mm]` leaf) of a memory_limit dump
/// get their variance and interval like any other: php-cli fills a 32 MiB
/// memory_limit with 4 KB strings from `fill_report`, sampled at 64 KiB.
/// The estimate of what that stack holds (nearly all of the limit) rests on
/// about 500 samples: its printed interval is about ±9% and lies within the
/// limit's neighbourhood.
#[test]
fn php_zend_mm_stacks_get_intervals() {
    let (dir, php) = crate::php_harness::php_dir(
        "intervals-php",
        "report.php",
        "function fill_report() {\n    $rows = [];\n    for ($i = 0; ; $i++) {\n        $rows[] = str_repeat('r', 4000) . $i;\n    }\n}\nfill_report();\n",
    );
    let o = common::run_preloaded(
        &dir,
        Path::new("/usr/bin/php"),
        &["-d", "memory_limit=32M", php.to_str().unwrap()],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "64K"), ("HEAPLIVE_SEED", "5")],
    );
    let ctx = show(&o);
    let line = common::stderr(&o)
        .lines()
        .find(|l| l.contains("]: memory_limit dump "))
        .unwrap_or_else(|| panic!("no memory_limit dump\n{ctx}"))
        .to_string();
    // The line says the estimate's interval, and the ZendMM estimate's
    // against the limit (sampling error when above it).
    assert!(line.contains("% (95%)"), "{line}");
    let zend = line
        .split_once("; ZendMM ")
        .and_then(|(_, r)| r.split_once("; "))
        .map(|(z, _)| z)
        .unwrap_or_else(|| panic!("no ZendMM estimate in {line}"));
    let parse_mib = |t: &str| -> f64 {
        let (v, unit) = t.trim().split_once(' ').unwrap();
        let v: f64 = v.parse().unwrap();
        v * match unit {
            "MiB" => 1048576.0,
            "KiB" => 1024.0,
            u => panic!("unit {u} in {line}"),
        }
    };
    let (est, rest) = zend.split_once(" (estimate, 95% ").unwrap();
    let (lo, rest) = rest.split_once("..").unwrap();
    let hi = rest.split(')').next().unwrap();
    let (est, zlo, zhi) = (parse_mib(est), parse_mib(lo), parse_mib(hi));
    assert!(zlo < est && est < zhi, "{line}");
    let limit = 32.0 * 1024.0 * 1024.0;
    assert_eq!(
        zend.contains("above the limit by sampling error"),
        est > limit && zlo <= limit,
        "{line}"
    );
    let path = line
        .split_once("memory_limit dump ")
        .and_then(|(_, r)| r.split_once(": "))
        .map(|(p, _)| PathBuf::from(p.split(" and ").next().unwrap()))
        .unwrap();
    let text = common::top_exact(&["--php"], &path);
    let row = text
        .lines()
        .find(|l| l.contains("[zend_mm] <- fill_report (report.php:5)"))
        .unwrap_or_else(|| panic!("no ZendMM row for fill_report\n{text}\n{ctx}"));
    let f: Vec<&str> = row.split_whitespace().collect();
    let est: f64 = f[0].parse().unwrap();
    let n: f64 = f[2].replace(',', "").parse().unwrap();
    let (lo, hi) = f[3].split_once("..").unwrap();
    let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
    assert!(n > 200.0, "{row}");
    // Small blocks: the interval is the Poisson one, ±1.96/sqrt(n).
    let half = (hi - lo) / 2.0 / est;
    assert!(
        (half / (1.96 / n.sqrt()) - 1.0).abs() < 0.1,
        "half-width {half} for {n} samples: {row}"
    );
    let limit = 32.0 * 1024.0 * 1024.0;
    assert!(lo < limit * 1.05 && hi > limit * 0.7, "{row}\n{text}");
}

//! The default sampler, statistically: `progs/sampled_mix.c` keeps a known
//! 64 MiB live (48 MiB from `site_a`, 16 MiB from `site_b`, mixed sizes from
//! 16 bytes to 1.5 MB, plus as many bytes allocated and freed at
//! `site_churn`), run N times at `HEAPLIVE_SAMPLE_INTERVAL=512K` with the
//! fixed seeds `HEAPLIVE_SEED=1..N`.
//!
//! Per run, a stack holding L live bytes has an estimate with relative
//! standard error near sqrt(R/L) (R = 512 KiB). That is an upper bound: a
//! block of s bytes sampled with p = 1 - exp(-s/R) and weighted s/p has
//! variance s^2 (1-p)/p <= s R, so the variance of a sum is at most L R.
//! The mean of N independent runs then has standard error at most
//! L sqrt(R/L) / sqrt(N), and we require it within K = 5 of those of the
//! truth. Under the normal approximation (N runs of about L/R samples each
//! make hundreds to thousands of samples per mean) a 5-sigma two-sided
//! excursion has probability 5.7e-7; three checks (site_a, site_b, total)
//! give a false-failure probability below 2e-6 for a random choice of
//! seeds. With the fixed seeds the test is deterministic.

use crate::common::{self, show};
use std::path::Path;

const INTERVAL: u64 = 512 * 1024;
const RUNS: u64 = 32;
const K: f64 = 5.0;

struct Run {
    seed: u64,
    a: u64,
    b: u64,
    churn: u64,
    other: u64,
}

fn truth(out: &str, key: &str) -> u64 {
    out.lines()
        .find_map(|l| {
            l.strip_prefix(key)
                .and_then(|r| r.strip_prefix(' '))
                .map(|v| v.trim().parse::<u64>().unwrap())
        })
        .unwrap_or_else(|| panic!("sampled_mix printed no '{key}' line:\n{out}"))
}

fn one_run(bin: &Path, seed: u64, plain_out: &[u8]) -> Run {
    let dir = common::tempdir(&format!("sampled-{seed}"));
    let seed_s = seed.to_string();
    let o = common::run_preloaded(
        &dir,
        bin,
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "512K"),
            ("HEAPLIVE_SEED", &seed_s),
        ],
    );
    assert!(
        o.status.success() && o.stdout == plain_out,
        "seed {seed}: the preload changed the program's behaviour\nwithout: {}\nwith:\n{}",
        String::from_utf8_lossy(plain_out),
        show(&o)
    );
    let files = common::folded_files(&dir);
    assert_eq!(
        files.len(),
        1,
        "seed {seed}: expected one folded file in {}, found {files:?}\n{}",
        dir.display(),
        show(&o)
    );
    let stacks = common::parse_folded(&files[0]);
    let by_leaf = common::bytes_by_leaf(&stacks);
    let get = |k: &str| by_leaf.get(k).copied().unwrap_or(0);
    let (a, b, churn) = (get("site_a"), get("site_b"), get("site_churn"));
    Run {
        seed,
        a,
        b,
        churn,
        other: common::total(&stacks) - a - b - churn,
    }
}

#[test]
fn sampled_default_sampler_is_unbiased() {
    let dir = common::tempdir("sampled-bin");
    let (bin, plain) = common::compile_and_run_plain(&dir, "sampled_mix.c");
    let out = common::stdout(&plain);
    let (true_a, true_b) = (truth(&out, "site_a"), truth(&out, "site_b"));
    assert_eq!(
        (true_a, true_b),
        (48 << 20, 16 << 20),
        "sampled_mix's totals changed:\n{out}"
    );

    // The runs are independent processes: four at a time.
    let mut runs: Vec<Run> = Vec::new();
    let seeds: Vec<u64> = (1..=RUNS).collect();
    for chunk in seeds.chunks(4) {
        std::thread::scope(|s| {
            let hs: Vec<_> = chunk
                .iter()
                .map(|&seed| {
                    s.spawn({
                        let bin = &bin;
                        let p = &plain.stdout;
                        move || one_run(bin, seed, p)
                    })
                })
                .collect();
            for h in hs {
                runs.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
            }
        });
    }

    let table: String = runs
        .iter()
        .map(|r| {
            format!(
                "  seed {:>2}: site_a {:>10} site_b {:>10} site_churn {} other {}\n",
                r.seed, r.a, r.b, r.churn, r.other
            )
        })
        .collect();
    // Freed blocks never count, whatever the seed.
    assert!(
        runs.iter().all(|r| r.churn == 0),
        "site_churn's blocks were all freed, yet some runs report them:\n{table}"
    );
    // The seed matters (a sampler that ignores it, or samples nothing,
    // gives the same numbers every time).
    let distinct: std::collections::BTreeSet<(u64, u64)> =
        runs.iter().map(|r| (r.a, r.b)).collect();
    assert!(
        distinct.len() > RUNS as usize / 2,
        "different seeds gave the same estimates:\n{table}"
    );

    let n = RUNS as f64;
    let mut bad = Vec::new();
    for (name, truth, est) in [
        (
            "site_a",
            true_a,
            runs.iter().map(|r| r.a).collect::<Vec<_>>(),
        ),
        (
            "site_b",
            true_b,
            runs.iter().map(|r| r.b).collect::<Vec<_>>(),
        ),
        (
            "site_a + site_b",
            true_a + true_b,
            runs.iter().map(|r| r.a + r.b).collect::<Vec<_>>(),
        ),
    ] {
        let l = truth as f64;
        let mean = est.iter().map(|&x| x as f64).sum::<f64>() / n;
        let se_run = l * (INTERVAL as f64 / l).sqrt();
        let se_mean = se_run / n.sqrt();
        let z = (mean - l) / se_mean;
        let line = format!(
            "{name}: truth {truth}, mean of {RUNS} runs {mean:.0} ({:+.2}%), predicted SE of the mean {se_mean:.0} ({:.2}%), z = {z:+.2} (limit {K})",
            100.0 * (mean - l) / l,
            100.0 * se_mean / l
        );
        eprintln!("{line}");
        if z.abs() > K {
            bad.push(line);
        }
    }
    assert!(
        bad.is_empty(),
        "the sampler's estimates are biased:\n  {}\nper run:\n{table}",
        bad.join("\n  ")
    );
}

#[test]
fn sampled_fixed_seed_is_reproducible() {
    // One thread allocating the same sequence with the same seed must get
    // the same samples: the basis of the fixed-seed test above.
    let dir = common::tempdir("sampled-repro-bin");
    let (bin, plain) = common::compile_and_run_plain(&dir, "sampled_mix.c");
    let r1 = one_run(&bin, 7, &plain.stdout);
    let r2 = one_run(&bin, 7, &plain.stdout);
    assert_eq!(
        (r1.a, r1.b),
        (r2.a, r2.b),
        "HEAPLIVE_SEED=7 twice gave different estimates for site_a, site_b"
    );
}

//! Issue 28, item 4: the peak file holds the stacks at the highest total,
//! whatever an earlier near-peak held. `progs/two_peaks.c` holds X blocks
//! at `site_x`, frees them, then holds Y blocks at `site_y` (a second
//! maximum less than 1/64 above the first: until issue 28 the copy of the
//! stacks was taken again only for a maximum 1/64 above the last copy, and
//! the peak file held site_x's blocks while the exit line named site_y's
//! peak).

use crate::common::{self, show};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    common::run_prog(dir, "two_peaks", args, env)
}

/// Removes the last run's files.
fn clear(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.to_str().is_some_and(|s| s.ends_with(".folded")) {
            std::fs::remove_file(p).unwrap();
        }
    }
}

fn one(files: Vec<PathBuf>) -> PathBuf {
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// `heaplive top --bytes -w 0` on the one peak file in `dir`.
fn top_of_peak(dir: &Path) -> String {
    let file = one(common::view_files(dir, "peak"));
    common::top_exact(&[], &file)
}

fn peak_file(dir: &Path) -> BTreeMap<String, u64> {
    common::bytes_by_leaf(&common::parse_folded(&one(common::view_files(dir, "peak"))))
}

/// The exit line's peak total in MiB (`peak 101.0 MiB live (...)`), and
/// whether it names another moment for the stacks.
fn peak_line(err: &str) -> (f64, bool) {
    let line = common::first_line_with(err, "]: peak ", &format!("no peak line: {err}"));
    let mib = common::between(line, "]: peak ", " MiB live")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the peak line: {line}"));
    (mib, line.contains(" live at "))
}

/// Exact mode: 100 MiB at site_x then 101 MiB at site_y (1% higher), and
/// 1600 then 1601 blocks of 64 KiB (one block higher): the peak file holds
/// site_y's bytes at the second maximum to the byte, and nothing of
/// site_x. Failed before issue 28's fix (site_x = 104857600, site_y
/// absent; the exit line named "100.0 MiB live at ..." for the stacks).
#[test]
fn exact_peak_file_is_the_higher_of_two_near_equal_peaks() {
    let dir = common::tempdir("peak-true-exact");
    for (size, x, y) in [(1u64 << 20, 100u64, 101u64), (64 << 10, 1600, 1601)] {
        let args = [size.to_string(), x.to_string(), y.to_string()];
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        clear(&dir);
        let o = run(&dir, &args, &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
        let peak = peak_file(&dir);
        assert_eq!(
            peak.get("site_y"),
            Some(&(y * size)),
            "{peak:?}\n{}",
            show(&o)
        );
        assert_eq!(peak.get("site_x"), None, "{peak:?}\n{}", show(&o));
        let (mib, other_moment) = peak_line(&common::stderr(&o));
        assert_eq!(
            format!("{mib:.1}"),
            format!("{:.1}", (y * size) as f64 / 1048576.0)
        );
        assert!(!other_moment, "{}", show(&o));
    }
}

/// Sampled mode with blocks sampled with certainty (1 MiB blocks at R =
/// 16 KiB: p = 1 - e^-64, weight s/p = s): the estimate is exact, so the
/// peak file holds site_y's 101 MiB to the byte, and no site_x.
#[test]
fn sampled_always_sampled_peak_file_is_the_higher_peak_to_the_byte() {
    let dir = common::tempdir("peak-true-certain");
    let o = run(
        &dir,
        &["1048576", "100", "101"],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "16K")],
    );
    let peak = peak_file(&dir);
    assert_eq!(
        peak.get("site_y"),
        Some(&(101 << 20)),
        "{peak:?}\n{}",
        show(&o)
    );
    assert_eq!(peak.get("site_x"), None, "{peak:?}\n{}", show(&o));
    // `top` on the peak file of this default dump: a zero-width interval
    // (from the samples file's peak rows).
    let text = top_of_peak(&dir);
    let want = format!("{0}..{0}", 101u64 << 20);
    let row = common::first_line_with(&text, "site_y", &text);
    assert_eq!(row.split_whitespace().nth(3), Some(want.as_str()), "{text}");
}

/// Sampled mode, R = 64 KiB, 1600 then 1616 blocks of 64 KiB (100 and 101
/// MiB): which maximum of the estimate is the higher varies with the seed.
/// For each of 8 fixed seeds the peak file is one moment, the highest
/// estimate: it holds one site only, its total is the exit line's peak
/// (to the line's 0.1 MiB), and its estimate is within 6 standard
/// deviations of that site's truth (each block sampled with p = 1 - 1/e,
/// weighted s/p: sd = s sqrt(n (1/p - 1)) = 2.0 MiB; a false failure under
/// 1e-8 per seed). Before issue 28's fix seed 6 failed: the file held
/// site_x (100.4 MiB) for a peak line of 101.2 MiB.
#[test]
fn sampled_peak_file_is_the_highest_estimate() {
    let dir = common::tempdir("peak-true-sampled");
    let size = 65536.0f64;
    let p = 1.0 - (-1f64).exp();
    for seed in 1..=8 {
        clear(&dir);
        let seed_text = seed.to_string();
        let o = run(
            &dir,
            &["65536", "1600", "1616"],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
                ("HEAPLIVE_SEED", &seed_text),
            ],
        );
        let peak = peak_file(&dir);
        assert_eq!(peak.len(), 1, "seed {seed}: {peak:?}\n{}", show(&o));
        let (site, &bytes) = peak.iter().next().unwrap();
        let n = match site.as_str() {
            "site_x" => 1600.0,
            "site_y" => 1616.0,
            other => panic!("seed {seed}: {other} in the peak file"),
        };
        let (mib, other_moment) = peak_line(&common::stderr(&o));
        assert!(
            (bytes as f64 / 1048576.0 - mib).abs() <= 0.051,
            "seed {seed}: the peak file holds {bytes} bytes, the peak was {mib} MiB\n{}",
            show(&o)
        );
        assert!(!other_moment, "seed {seed}: {}", show(&o));
        // `top` prints an interval for the peak file's stack (from the
        // samples file's peak rows), around its estimate.
        let text = top_of_peak(&dir);
        let row = text
            .lines()
            .find(|l| l.contains(site.as_str()))
            .unwrap_or_else(|| panic!("{text}"));
        let (lo, hi) = row
            .split_whitespace()
            .nth(3)
            .unwrap()
            .split_once("..")
            .unwrap();
        let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        assert!(
            lo < bytes as f64 && (bytes as f64) < hi,
            "seed {seed}: {text}"
        );
        // And its last line bounds what stacks with no sample held then.
        let want = format!(
            "not seen: a stack with no sample holds under {} at 95% (3.0 x the sample interval, 64.0 KiB)",
            heaplive_format::units::human_bytes(heaplive_format::stats::unseen_bound(65536.0))
        );
        assert!(
            text.lines().last().unwrap().starts_with(&want),
            "seed {seed}: {want:?} not last in\n{text}"
        );
        let sd = size * (n * (1.0 / p - 1.0)).sqrt();
        assert!(
            (bytes as f64 - n * size).abs() < 6.0 * sd,
            "seed {seed}: {site} {bytes} vs {} (sd {sd:.0})",
            n * size
        );
    }
}

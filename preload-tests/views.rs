//! Issue 12: the allocation view, the peak, start and stop, error bars.
//! `progs/views_sites.c` has call sites with known totals.

use crate::common::{self, show};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

fn prog(dir: &Path) -> PathBuf {
    common::compile("views_sites.c", "views_sites", dir, &[])
}

/// views_sites `args` under the preload with `env` in a fresh directory
/// (`tag`), asserting success: the directory and the run.
fn run(tag: &str, args: &[&str], env: &[(&str, &str)]) -> (common::TempDir, Output) {
    let dir = common::tempdir(tag);
    let p = prog(&dir);
    let o = common::run_preloaded(&dir, &p, args, env);
    assert!(o.status.success(), "{}", show(&o));
    (dir, o)
}

fn by_leaf(file: &Path) -> BTreeMap<String, u64> {
    common::bytes_by_leaf(&common::parse_folded(file))
}

/// views_sites `server` under the preload with `env` and HEAPLIVE_LOG=`log`,
/// its stdin and stdout piped.
fn server(dir: &Path, log: &Path, env: &[(&str, &str)]) -> common::Running {
    let p = prog(dir);
    let mut env = env.to_vec();
    env.push(("HEAPLIVE_LOG", log.to_str().unwrap()));
    common::Running::spawn(
        common::preloaded_command(dir, &p, &["server"], &env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped()),
    )
}

/// Bytes per leaf of the one live file and the one alloc file in `dir`.
fn live_and_alloc(dir: &Path) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    (
        by_leaf(&one(common::folded_files(dir))),
        by_leaf(&one(common::view_files(dir, "alloc"))),
    )
}

/// The sites of `dormant` and `server` (views_sites.c): sampling started
/// (site_after, site_again) and stopped (site_before, site_stopped).
fn assert_started_and_stopped(view: &BTreeMap<String, u64>) {
    assert_eq!(view.get("site_before"), None, "{view:?}");
    assert_eq!(view.get("site_after"), Some(&200_000), "{view:?}");
    assert_eq!(view.get("site_stopped"), None, "{view:?}");
    assert_eq!(view.get("site_again"), Some(&50_000), "{view:?}");
}

fn one(files: Vec<PathBuf>) -> PathBuf {
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// `go tool pprof -top -sample_index=INDEX`: flat value per function.
fn pprof_flat(dir: &Path, file: &Path, index: &str) -> BTreeMap<String, u64> {
    let index = format!("-sample_index={index}");
    let top = common::pprof(dir, &["-top", "-nodefraction=0", "-unit=B", &index], file);
    let mut m = BTreeMap::new();
    for line in top.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 6 && f[5].starts_with("site_") {
            let v = f[0].trim_end_matches('B');
            m.insert(f[5].to_string(), v.parse().unwrap_or(0));
        }
    }
    m
}

#[test]
fn exact_alloc_view_and_four_pprof_types() {
    let (dir, o) = run(
        "views-exact",
        &["exact"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_VIEWS", "live,alloc"),
            ("HEAPLIVE_FORMAT", "folded,pprof"),
        ],
    );
    let (live, alloc) = live_and_alloc(&dir);
    assert_eq!(live.get("site_kept"), Some(&100_000), "{}", show(&o));
    assert_eq!(live.get("site_freed"), None);
    assert_eq!(live.get("site_realloc"), None);
    assert_eq!(alloc.get("site_kept"), Some(&100_000));
    assert_eq!(alloc.get("site_freed"), Some(&150_000));
    assert_eq!(alloc.get("site_realloc"), Some(&5_500));
    // No samples file in exact mode (no error bars), no peak file: the
    // peak (the exit state plus one freed block) is not above... it is:
    // the peak held a site_freed or site_realloc block beyond the exit.
    assert!(common::view_files(&dir, "samples").is_empty());

    let pb = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .expect("a pprof file");
    let space = pprof_flat(&dir, &pb, "alloc_space");
    assert_eq!(space.get("site_kept"), Some(&100_000));
    assert_eq!(space.get("site_freed"), Some(&150_000));
    assert_eq!(space.get("site_realloc"), Some(&5_500));
    let objects = pprof_flat(&dir, &pb, "alloc_objects");
    assert_eq!(objects.get("site_kept"), Some(&100));
    assert_eq!(objects.get("site_freed"), Some(&50));
    assert_eq!(objects.get("site_realloc"), Some(&10));
    let inuse = pprof_flat(&dir, &pb, "inuse_space");
    assert_eq!(inuse.get("site_kept"), Some(&100_000));
    assert_eq!(inuse.get("site_freed"), None);
    let inuse_objects = pprof_flat(&dir, &pb, "inuse_objects");
    assert_eq!(inuse_objects.get("site_kept"), Some(&100));
    // And every value the folded files give, pprof gives.
    for (site, bytes) in &alloc {
        if site.starts_with("site_") {
            assert_eq!(space.get(site), Some(bytes), "{site}");
        }
    }
}

#[test]
fn exact_peak_file_names_the_peak_stacks() {
    let (dir, o) = run(
        "views-peak",
        &["peak"],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    let peak = by_leaf(&one(common::view_files(&dir, "peak")));
    assert_eq!(peak.get("site_big"), Some(&(200 << 20)), "{}", show(&o));
    assert_eq!(peak.get("site_small"), Some(&10_000));
    let live = by_leaf(&one(common::folded_files(&dir)));
    assert_eq!(live.get("site_big"), Some(&(10 << 20)));
    let err = common::stderr(&o);
    assert!(err.contains("peak 200.0 MiB live (exact)"), "{err}");
}

/// Sampled mode, 20 seeds: site_churn allocates L = 64 MiB (all freed) in
/// 1000-byte blocks at R = 256 KiB. One run's estimate has relative
/// standard error sqrt(R/L) = 6.25%, the mean of 20 independent runs
/// 6.25%/sqrt(20) = 1.4%; the bound is 5 of those (7%): a false failure
/// has probability about 6e-7 (normal approximation; 20 x ~256 samples).
#[test]
fn sampled_alloc_estimates_are_unbiased_over_20_seeds() {
    let dir = common::tempdir("views-sampled");
    let p = prog(&dir);
    let truth = (64 * 1024 * 1024 / 1000 * 1000) as f64;
    let mut sum = 0.0;
    for seed in 1..=20 {
        let d = dir.join(format!("s{seed}"));
        std::fs::create_dir_all(&d).unwrap();
        let o = common::run_preloaded(
            &d,
            &p,
            &["churn"],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "256K"),
                ("HEAPLIVE_SEED", &seed.to_string()),
                ("HEAPLIVE_VIEWS", "live,alloc"),
            ],
        );
        assert!(o.status.success(), "{}", show(&o));
        let alloc = by_leaf(&one(common::view_files(&d, "alloc")));
        sum += *alloc.get("site_churn").unwrap_or(&0) as f64;
    }
    let mean = sum / 20.0;
    let se = (256.0 * 1024.0 / truth).sqrt() / 20f64.sqrt();
    assert!(
        (mean / truth - 1.0).abs() < 5.0 * se,
        "mean {mean} vs {truth} (bound {:.1}%)",
        500.0 * se
    );
}

#[test]
fn peak_dumps_come_at_the_growth_factor_and_not_more_often() {
    // 1600 x 64 KiB = 100 MiB, growing steadily.
    let (_dir, o) = run(
        "views-grow",
        &["grow", "1600"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_PEAK_GROWTH", "2"),
        ],
    );
    let err = common::stderr(&o);
    let totals: Vec<u64> = err
        .lines()
        .filter(|l| l.contains(": peak dump "))
        .map(|l| {
            let path = l
                .split(": peak dump ")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap();
            common::total(&common::parse_folded(Path::new(path)))
        })
        .collect();
    assert!(!totals.is_empty(), "no peak dump: {err}");
    // The first when the total passed 2 x 1 MiB, each next one past twice
    // the last one's total: at most log2(100) of them.
    assert!(totals[0] > 2 << 20, "{totals:?}");
    for w in totals.windows(2) {
        assert!(w[1] > 2 * w[0], "{totals:?}");
    }
    assert!(totals.len() <= 6, "{totals:?}");
}

#[test]
fn dormant_start_and_stop_from_c() {
    let (dir, o) = run(
        "views-dormant",
        &["dormant"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_START", "0"),
            ("HEAPLIVE_VIEWS", "live,alloc"),
        ],
    );
    assert_eq!(common::stdout(&o), "start 0\nstop 1\nstart 0\n");
    let (live, alloc) = live_and_alloc(&dir);
    for view in [&live, &alloc] {
        assert_started_and_stopped(view);
    }
    // Frees of blocks allocated before the start changed nothing (stdio's
    // buffer, allocated by the first printf after the start, is the rest).
    let sites: u64 = live
        .iter()
        .filter(|(k, _)| k.starts_with("site_"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(sites, 250_000, "{live:?}");
}

#[test]
fn heaplive_start_and_stop_commands() {
    use std::io::Write;
    let dir = common::tempdir("views-cmd");
    let log = dir.join("log");
    let mut child = server(
        &dir,
        &log,
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1"), ("HEAPLIVE_START", "0")],
    );
    let pid = child.pid().to_string();
    let mut stdin = child.child().stdin.take().unwrap();
    let next = |c: &mut common::Running| c.line().unwrap_or_default().trim().to_string();
    // Waits for the `n`th line saying `what` (the log keeps earlier ones).
    let wait_log = |what: &str, n: usize| {
        common::wait_until(30, &format!("{what:?} {n} times in the log"), || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            (text.matches(what).count() >= n).then_some(())
        })
    };
    assert_eq!(next(&mut child), "ready");
    common::ok(common::heaplive(&["start", &pid]));
    wait_log("sampling started", 1);
    writeln!(stdin, "go").unwrap();
    assert_eq!(next(&mut child), "after");
    common::ok(common::heaplive(&["stop", &pid]));
    wait_log("sampling stopped", 1);
    writeln!(stdin, "go").unwrap();
    assert_eq!(next(&mut child), "stopped");
    common::ok(common::heaplive(&["start", &pid]));
    wait_log("sampling started", 2);
    writeln!(stdin, "go").unwrap();
    assert!(child.wait().status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let files = common::folded_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}\n{text}");
    let live = by_leaf(&one(files));
    assert_started_and_stopped(&live);
    // The commands were not taken for dump requests: only the exit dump.
    assert_eq!(text.matches(" dump ").count(), 1, "{text}");
}

#[test]
fn top_shows_sample_counts_and_error_bars() {
    let (dir, o) = run(
        "views-top",
        &["churn"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "256K"),
            ("HEAPLIVE_SEED", "7"),
            ("HEAPLIVE_VIEWS", "live,peak,samples,variance"),
        ],
    );
    let live = one(common::folded_files(&dir));
    // The samples file (version 2): samples and variance per stack.
    let sf = one(common::view_files(&dir, "samples"));
    let parsed = heaplive_format::samples::parse("samples", &std::fs::read(&sf).unwrap()).unwrap();
    let keep = parsed
        .view("live")
        .unwrap()
        .iter()
        .find(|(s, _)| s.ends_with(";site_keep"));
    let (_, keep) = keep.expect("samples of site_keep");
    let n = keep.samples.unwrap();
    assert!(n > 50, "{n} samples");
    // The dump's line gives the total's error.
    assert!(common::stderr(&o).contains("% (95%)"), "{}", show(&o));
    // And the variance of each stack's estimate, from its samples' weights.
    let variances = common::bytes_by_leaf(&common::parse_folded(&PathBuf::from(
        live.to_str()
            .unwrap()
            .replace(".folded", ".variance.folded"),
    )));
    let v = *variances.get("site_keep").expect("variance of site_keep") as f64;
    // The samples file carries the same variance (the variance file is the
    // rounded one).
    assert_eq!(keep.variance.round(), v);
    let text = common::top_exact(&[], &live);
    let row = common::line_with(&text, "site_keep").unwrap_or_else(|| panic!("{text}"));
    let f: Vec<&str> = row.split_whitespace().collect();
    // LIVE, SHARE, SAMPLES, 95% INTERVAL (with --bytes, one word each).
    assert_eq!(f[2], n.to_string(), "{row}");
    let est: f64 = f[0].parse().unwrap();
    let (lo, hi) = heaplive_format::stats::interval95(est, v);
    assert_eq!(f[3], format!("{}..{}", lo.round(), hi.round()), "{row}");
    // Small blocks: about R^2 of variance per sample.
    let r = 256.0 * 1024.0;
    assert!(
        (v / (n as f64 * r * r) - 1.0).abs() < 1e-3,
        "variance {v} for {n} samples"
    );
}

/// Sampled mode (default interval R = 512 KiB): the peak holds site_big's
/// 200 blocks of s = 1 MiB. Each is sampled with p = 1 - e^(-s/R) = 0.865
/// and weighted s/p, so the estimate has standard deviation
/// s * sqrt(200 (1/p - 1)) = 5.6 MiB (2.8%). The live estimate rises while
/// the blocks are allocated and falls while they are freed, so its maximum
/// is its value at the true peak (no max-of-noise bias). Bound: 6 standard
/// deviations (17%), a false failure about once in 5e8 runs.
#[test]
fn sampled_peak_file_names_the_peak_stacks() {
    let (dir, o) = run("views-peak-sampled", &["peak"], &[]);
    let peak = by_leaf(&one(common::view_files(&dir, "peak")));
    let big = *peak.get("site_big").unwrap_or(&0) as f64;
    let truth = (200u64 << 20) as f64;
    let sd = (1u64 << 20) as f64 * (200.0 * (1.0 / (1.0 - (-2f64).exp()) - 1.0)).sqrt();
    assert!(
        (big - truth).abs() < 6.0 * sd,
        "site_big at the peak {big} vs {truth} (bound {:.0})\n{}",
        6.0 * sd,
        show(&o)
    );
    // The exit dump holds the 10 kept blocks, within the same kind of bound
    // (sd = 1 MiB * sqrt(10 * 0.156) = 1.25 MiB).
    let live = by_leaf(&one(common::folded_files(&dir)));
    let kept = *live.get("site_big").unwrap_or(&0) as f64;
    assert!(
        (kept - (10u64 << 20) as f64).abs() < 6.0 * 1.25 * (1u64 << 20) as f64,
        "site_big at exit {kept}\n{}",
        show(&o)
    );
    // The exit line names the peak, marked as an estimate.
    let err = common::stderr(&o);
    assert!(err.contains("peak ") && !err.contains("(exact)"), "{err}");
}

/// `heaplive run` lists the peak file and prints the peak total.
#[test]
fn run_prints_the_peak() {
    let dir = common::tempdir("views-run-peak");
    let p = prog(&dir);
    let template = dir.join("r.%p.%n.folded");
    let lib = common::lib();
    let o = common::heaplive_run_exact(
        &dir,
        &template,
        &[],
        &[p.to_str().unwrap(), "peak"],
        &[("HEAPLIVE_LIB", lib.to_str().unwrap())],
    );
    assert_eq!(common::stdout(&o), "peak done\n");
    let err = common::stderr(&o);
    let peak = one(common::view_files(&dir, "peak"));
    let total = common::total(&common::parse_folded(&peak));
    let line = err
        .lines()
        .find(|l| l.starts_with("heaplive: peak: "))
        .unwrap_or_else(|| panic!("no peak line\n{err}"));
    assert!(
        line.contains(&format!(
            "{} live at the highest peak",
            heaplive_format::units::human(total.into())
        )) && line.ends_with(peak.to_str().unwrap()),
        "{line}"
    );
    assert!(total >= 200 << 20, "{total}");
}

/// pprof takes its first mapping for the main binary (`File:` in its
/// reports): the executable's, even when every sample's first frame lies in
/// a library that was symbolized first.
#[test]
fn pprof_names_the_main_executable() {
    let dir = common::tempdir("views-pprof-main");
    let lib = common::compile("deep_lib.c", "libdeep.so", &dir, &["-shared", "-fPIC"]);
    common::run_prog(
        &dir,
        "deep_main",
        &["local", lib.to_str().unwrap()],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_FORMAT", "pprof"),
        ],
    );
    let pb = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .expect("a pprof file");
    let text = common::pprof(&dir, &["-top"], &pb);
    assert!(text.contains("deep_alloc"), "{text}");
    assert_eq!(text.lines().next(), Some("File: deep_main"), "{text}");
}

/// `heaplive stop PID` sent to a process whose heaplive thread has not
/// started (nothing sampled yet: the signal stays pending) and that then
/// exits: the exit path takes the pending signal as the command it is, not
/// as a dump request (it wrote a second, "signal" dump before).
#[test]
fn a_command_pending_at_exit_is_not_a_dump() {
    let dir = common::tempdir("views-cmd-exit");
    let log = dir.join("log");
    // 1 GiB between samples: the ~400 KiB this run allocates is sampled
    // with probability 4e-4 (then the thread serves the command and the
    // test passes without exercising the exit path).
    let mut child = server(&dir, &log, &[("HEAPLIVE_SAMPLE_INTERVAL", "1G")]);
    let pid = child.pid().to_string();
    let stdin = child.child().stdin.take().unwrap();
    assert_eq!(child.line().as_deref(), Some("ready"));
    common::ok(common::heaplive(&["stop", &pid]));
    // End of input: the program exits with 3 (`wait_line`).
    drop(stdin);
    assert_eq!(child.wait().status.code(), Some(3));
    let text = std::fs::read_to_string(&log).unwrap();
    let files = common::folded_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}\n{text}");
    assert!(text.contains(" exit dump "), "{text}");
    assert!(!text.contains(" signal dump "), "{text}");
}

/// The exit line's "at S s after start" (and, if given, the time of the
/// peak file's stacks, "(X live at T s, ...)").
fn peak_times(err: &str) -> (f64, Option<f64>) {
    let line = common::line_with(err, "]: peak ").unwrap_or_else(|| panic!("no peak line: {err}"));
    let at = common::between(line, " at ", " s after start")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the peak line: {line}"));
    let copy = common::between(line, " live at ", " s")
        .map(|t| t.parse().unwrap_or_else(|_| panic!("{line}")));
    (at, copy)
}

/// A heap that peaks at once and then sleeps 1.5 s: the exit line times
/// the peak within the first second, in exact and in sampled mode, and
/// names no other moment for its stacks.
#[test]
fn exit_line_times_a_peak_reached_at_once() {
    let (dir, p) = common::compiled("views-peak-time", "peak_then_sleep.c");
    for interval in ["1", "512K"] {
        let o = common::run_preloaded(
            &dir,
            &p,
            &["once"],
            &[("HEAPLIVE_SAMPLE_INTERVAL", interval)],
        );
        assert!(o.status.success(), "{}", show(&o));
        let err = common::stderr(&o);
        let (at, copy) = peak_times(&err);
        assert!(
            at < 1.0,
            "interval {interval}: the peak came at once, not at {at} s: {err}"
        );
        assert_eq!(copy, None, "interval {interval}: {err}");
    }
}

/// Exact mode, a second maximum 1.5 s later and less than 1/64 above the
/// first: the peak is the second (its time is after the sleep), and the
/// peak file's stacks are the second's (64.5 MiB), not the first's: the
/// line names no other moment. (Until issue 28 the stacks were copied
/// again only for a maximum 1/64 above the last copy: the file held the
/// first maximum's 64 MiB, and the line said "(64.0 MiB live at 0.0 s,
/// within 1/64 of the peak)".)
#[test]
fn exit_line_says_when_the_peak_files_stacks_are_from() {
    let (dir, o) = common::run_prog_in(
        "views-peak-copy-time",
        "peak_then_sleep",
        &["again"],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    let err = common::stderr(&o);
    assert!(err.contains("peak 64.5 MiB live (exact)"), "{err}");
    let (at, copy) = peak_times(&err);
    assert!(at >= 1.4, "the second maximum is the peak: {err}");
    assert_eq!(copy, None, "the stacks are the peak's: {err}");
    let peak = by_leaf(&one(common::view_files(&dir, "peak")));
    assert_eq!(peak.values().sum::<u64>(), 1032 * 64 * 1024, "{peak:?}");
}

/// The pprof file carries the variances as sibling sample types
/// (`alloc_space_variance`, `inuse_space_variance`), the same as the
/// variance files: summed over all samples, equal up to the rounding of
/// each stack's value.
#[test]
fn sampled_pprof_carries_the_variances() {
    let (dir, _) = run(
        "views-pprof-variance",
        &["churn"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "256K"),
            ("HEAPLIVE_SEED", "3"),
            ("HEAPLIVE_VIEWS", "live,alloc,samples,variance"),
            ("HEAPLIVE_FORMAT", "folded,pprof"),
        ],
    );
    let live = one(common::folded_files(&dir));
    let companion = |suffix: &str| {
        let p = PathBuf::from(live.to_str().unwrap().replace(".folded", suffix));
        common::total(&common::parse_folded(&p)) as f64
    };
    let (inuse, alloc) = (
        companion(".variance.folded"),
        companion(".alloc.variance.folded"),
    );
    assert!(inuse > 0.0 && alloc > inuse, "{inuse} {alloc}");
    let pb = PathBuf::from(live.to_str().unwrap().replace(".folded", ".pb.gz"));
    let raw = common::pprof(&dir, &["-raw"], &pb);
    let lines: Vec<&str> = raw.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.contains("inuse_space_variance/bytes_squared"))
        .unwrap_or_else(|| panic!("no variance sample type:\n{raw}"));
    let types: Vec<&str> = lines[header].split_whitespace().collect();
    let col = |name: &str| types.iter().position(|t| t.starts_with(name)).unwrap();
    let (ci, ca) = (col("inuse_space_variance/"), col("alloc_space_variance/"));
    let (mut si, mut sa, mut stacks) = (0.0, 0.0, 0.0);
    for l in &lines[header + 1..] {
        let Some((values, _)) = l.split_once(':') else {
            break;
        };
        let v: Vec<f64> = values
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        if v.len() != types.len() {
            break;
        }
        si += v[ci];
        sa += v[ca];
        stacks += 1.0;
    }
    assert!((si - inuse).abs() <= stacks, "pprof {si} vs file {inuse}");
    assert!((sa - alloc).abs() <= stacks, "pprof {sa} vs file {alloc}");
}

//! Issue 30, item 1: the timeline (`NAME.timeline.tsv` beside each dump).
//! `progs/timeline_steps.c` holds 0, 1, ..., 5 blocks of STEP bytes at
//! grow_site, churning a 16-byte malloc and free between steps long
//! enough for rows at every level, then frees them all; it dumps after
//! steps 2 and 4, and at exit.

use crate::common::{self, show};
use std::path::Path;

const STEP: i64 = (3 << 20) + 7;

#[derive(Debug)]
struct Row {
    t_ms: u64,
    kind: String,
    live: i64,
    low: i64,
    high: i64,
    allocated: i64,
    rss: Option<u64>,
    own: Option<u64>,
    dump: String,
}

fn rows(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    assert_eq!(
        lines.next(),
        Some(
            "t_ms\tunix_ms\tkind\tlive_bytes\tlive_low\tlive_high\tallocated_bytes\trss_bytes\trss_kinds\town_bytes\tdump"
        ),
        "{text}"
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 11, "{l}");
            Row {
                t_ms: f[0].parse().unwrap(),
                kind: f[2].to_string(),
                live: f[3].parse().unwrap(),
                low: f[4].parse().unwrap(),
                high: f[5].parse().unwrap(),
                allocated: f[6].parse().unwrap(),
                rss: f[7].parse().ok(),
                own: f[9].parse().ok(),
                dump: f[10].to_string(),
            }
        })
        .collect()
}

fn timeline_of(folded: &Path) -> std::path::PathBuf {
    let s = folded.to_str().unwrap();
    std::path::PathBuf::from(s.strip_suffix(".folded").unwrap().to_string() + ".timeline.tsv")
}

/// Exact mode, no thread of heaplive's (HEAPLIVE_SIGNAL=none: the rows
/// come from the sampled path and the dumps): every periodic row holds
/// the program's known total to the byte (the baseline, what the exit
/// dump shows once all is freed, plus k steps, plus the 16-byte churn
/// block when the row was taken at its malloc), the levels climb 0..5 and
/// fall back to 0; one dump row per dump, each with the dump's total; the
/// allocated total never decreases.
#[test]
fn rows_follow_the_known_totals_to_the_byte_in_exact_mode() {
    let (dir, o) = common::run_prog_in(
        "timeline_exact",
        "timeline_steps",
        &["60"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_SIGNAL", "none"),
            ("HEAPLIVE_TIMELINE", "10ms"),
        ],
    );
    let dumps = common::folded_files(dir.path());
    assert_eq!(dumps.len(), 3, "{dumps:?}\n{}", show(&o));
    let exit = rows(&timeline_of(&dumps[2]));
    // The baseline: what the exit dump holds (the program freed all).
    let base = common::total(&common::parse_folded(&dumps[2])) as i64;
    let last = exit.last().unwrap();
    assert_eq!((last.kind.as_str(), last.live), ("dump", base), "{last:?}");
    // One dump row per dump, in order, each with its file's total.
    let marks: Vec<&Row> = exit.iter().filter(|r| r.kind == "dump").collect();
    assert_eq!(marks.len(), 3, "{exit:#?}");
    for (i, (m, f)) in marks.iter().zip(&dumps).enumerate() {
        assert_eq!(
            m.dump,
            format!("{} {}", i + 1, if i == 2 { "exit" } else { "requested" })
        );
        assert_eq!(
            m.live,
            common::total(&common::parse_folded(f)) as i64,
            "{m:?}"
        );
        assert_eq!((m.low, m.high), (m.live, m.live), "exact: no interval");
        assert!(
            m.rss.is_some_and(|r| r > 0) && m.own.is_some_and(|b| b > 0),
            "{m:?}"
        );
    }
    assert_eq!(marks[0].live - base, 2 * STEP);
    assert_eq!(marks[1].live - base, 4 * STEP);
    // Periodic rows (the first may come before main): each at a level.
    let mut levels = Vec::new();
    for r in exit.iter().skip(1).filter(|r| r.kind == "tick") {
        let d = r.live - base;
        let k = d / STEP;
        assert!(
            (0..=5).contains(&k) && (d % STEP == 0 || d % STEP == 16),
            "row {r:?}: {d} bytes over the baseline {base} is not a level"
        );
        assert_eq!(r.rss, None, "periodic rows read no RSS");
        if levels.last() != Some(&k) {
            levels.push(k);
        }
    }
    assert_eq!(levels, [0, 1, 2, 3, 4, 5, 0], "levels over time");
    assert!(
        exit.windows(2)
            .all(|w| w[0].allocated <= w[1].allocated && w[0].t_ms <= w[1].t_ms)
    );
    assert!(last.allocated - base >= 5 * STEP, "{last:?}");
    // Each dump's file holds the rows up to it: the first dump's, a prefix.
    let first = rows(&timeline_of(&dumps[0]));
    assert_eq!(first.last().unwrap().dump, "1 requested");
    assert!(first.len() < exit.len());
    for (a, b) in first.iter().zip(&exit) {
        assert_eq!((a.t_ms, a.live, &a.kind), (b.t_ms, b.live, &b.kind));
    }
}

/// Sampled mode: the live total's interval brackets the estimate, and the
/// dump rows hold the dump's total.
#[test]
fn sampled_rows_carry_an_interval() {
    let (dir, _) = common::run_prog_in(
        "timeline_sampled",
        "timeline_steps",
        &["30"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "64K"),
            ("HEAPLIVE_SEED", "7"),
            ("HEAPLIVE_TIMELINE", "10ms"),
        ],
    );
    let dumps = common::folded_files(dir.path());
    let exit = rows(&timeline_of(dumps.last().unwrap()));
    let marks: Vec<&Row> = exit.iter().filter(|r| r.kind == "dump").collect();
    assert_eq!(marks.len(), dumps.len());
    for r in &exit {
        assert!(r.low <= r.live && r.live <= r.high, "{r:?}");
    }
    // After two steps (6 MiB held in blocks far above R, sampled surely:
    // no variance) the estimate is 6 MiB and some; the rows taken at a
    // sampled 16-byte block (standing for about R bytes) have an interval.
    assert!(
        (marks[0].live - 2 * STEP).abs() < STEP / 2,
        "{:?}",
        marks[0]
    );
    assert!(exit.iter().any(|r| r.high > r.low), "{exit:#?}");
}

/// More rows than the buffer holds (1,024): 1,100 dumps after some
/// periodic rows. The exit dump's file holds at most 1,024 rows, and still
/// the first ones (periodic rows, thinned to every other): a ring that
/// overwrote the oldest would hold only dump rows. The marks beyond half
/// the buffer are the older ones dropped.
#[test]
fn the_ring_stays_bounded_over_a_long_run() {
    let (dir, p) = common::compiled("timeline_long", "timeline_steps.c");
    let explicit = dir.path().join("explicit.folded");
    let o = common::run_preloaded(
        dir.path(),
        &p,
        &["100", "long", explicit.to_str().unwrap()],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "16"),
            ("HEAPLIVE_TIMELINE", "1ms"),
            ("HEAPLIVE_SIGNAL", "none"),
            ("HEAPLIVE_LOG", "/dev/null"),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    let dumps = common::folded_files(dir.path());
    let exit = dumps
        .iter()
        .find(|d| d.to_str().unwrap().ends_with(".1.folded"))
        .unwrap_or_else(|| panic!("the exit dump: {dumps:?}"));
    let rows = rows(&timeline_of(exit));
    assert!(rows.len() <= 1024, "{} rows", rows.len());
    assert_eq!(rows[0].kind, "tick", "the history's start is kept");
    let marks = rows.iter().filter(|r| r.kind == "dump").count();
    assert!((512..1024).contains(&marks), "{marks} dump rows of 1,101");
    assert_eq!(rows.last().unwrap().dump, "1 exit");
    assert!(rows.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
}

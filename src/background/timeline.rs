//! The timeline's marks and its file: at every dump a row (with the
//! resident memory by kind just read for the dump line, and heaplive's own
//! resident memory), at every leak warning a row, and beside every dump
//! `NAME.timeline.tsv`, every row so far (`hot::timeline` keeps them).
//!
//! The file's format (README, "The timeline"): `#` lines first (what
//! process, the sampling interval, the period), then a header line and one
//! tab-separated row per line, oldest first:
//!
//! `t_ms unix_ms kind live_bytes live_low live_high allocated_bytes
//! rss_bytes rss_kinds own_bytes dump`
//!
//! `t_ms` is milliseconds since heaplive started in the process, `unix_ms`
//! the wall clock; `kind` is `tick`, `dump` or `leak`; `live_low` and
//! `live_high` the 95% interval of the live total (equal to it in exact
//! mode); `rss_bytes`, `rss_kinds` (`kind=bytes` pairs joined by `,`) and
//! `own_bytes` are `-` on rows that did not read them (all but dump rows);
//! `dump` is the dump's number and why (`3 signal`), `-` on other rows.

use crate::background::output;
use crate::hot::timeline::{self, DUMP, LEAK, Row};
use crate::hot::{config, sampler, sys};
use std::path::{Path, PathBuf};

/// `NAME.timeline.tsv` beside the dump `NAME.folded` (or `NAME.pb.gz`).
pub fn path_of(dump: &Path) -> PathBuf {
    crate::background::rss::beside(dump, b".timeline.tsv")
}

/// At a leak warning: a row.
pub fn at_leak() {
    let mut row = timeline::totals();
    row.at_ns = sys::now_nanos();
    row.kind = LEAK;
    timeline::mark(row);
}

/// At a dump, once its files are written: a row, then the file beside
/// `written` (the dump's live or pprof file; `explicit`: a path the caller
/// gave, where nothing is written beside anything but a regular file).
/// `smaps` is what the dump read for its line. A failure is one line; the
/// dump stands.
pub fn at_dump(written: &Path, n: u32, why: &str, smaps: Option<&str>, explicit: bool) {
    let cfg = config::get();
    if cfg.timeline_ms == 0 {
        return;
    }
    let mut row = timeline::totals();
    row.at_ns = sys::now_nanos();
    row.kind = DUMP;
    row.seq = n;
    let w = why.as_bytes();
    let k = w.len().min(row.why.len());
    row.why[..k].copy_from_slice(&w[..k]);
    if let Some(smaps) = smaps {
        row.rss = crate::background::rss::kinds(smaps);
    }
    row.own = own_resident();
    timeline::mark(row);
    if explicit && !std::fs::symlink_metadata(written).is_ok_and(|m| m.is_file()) {
        return;
    }
    let mut rows: Vec<Row> = Vec::new();
    if rows.try_reserve_exact(timeline::CAPACITY).is_err() {
        return;
    }
    if !timeline::with_rows(&mut |r| rows.extend_from_slice(r)) {
        return;
    }
    let text = text_of(
        &rows,
        sys::getpid(),
        cfg.exe.as_str(),
        cfg.interval,
        cfg.timeline_ms,
    );
    let path = path_of(written);
    output::write_beside_dump(&path, text.as_bytes(), explicit, sys::getpid());
}

fn own_resident() -> u64 {
    let mut pages = Vec::new();
    if pages.try_reserve_exact(4096).is_err() {
        return 0;
    }
    pages.resize(4096, 0u8);
    let (tables, heap) = sys::resident(&mut pages);
    (tables + heap) as u64
}

/// The file's text.
pub fn text_of(rows: &[Row], pid: u32, exe: &str, interval: u64, period_ms: u64) -> String {
    use std::fmt::Write as _;
    let started = crate::background::dump::STARTED_NS.load(std::sync::atomic::Ordering::Relaxed);
    let (mono, wall) = (sys::now_nanos(), sys::wall_nanos());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# heaplive timeline 1: pid {pid}, program {exe}, sample interval {interval}, period {period_ms} ms"
    );
    s.push_str("t_ms\tunix_ms\tkind\tlive_bytes\tlive_low\tlive_high\tallocated_bytes\trss_bytes\trss_kinds\town_bytes\tdump\n");
    for r in rows {
        let t_ms = r.at_ns.saturating_sub(started) / 1_000_000;
        let unix_ms = (wall - (mono as i64 - r.at_ns as i64)) / 1_000_000;
        let var = sampler::variance_of_units(r.live_variance as f64, interval);
        let (lo, hi) = heaplive_format::stats::interval95(r.live as f64, var);
        let kind = match r.kind {
            DUMP => "dump",
            LEAK => "leak",
            _ => "tick",
        };
        let _ = write!(
            s,
            "{t_ms}\t{unix_ms}\t{kind}\t{}\t{}\t{}\t{}\t",
            r.live,
            lo.round().max(0.0) as i64,
            hi.round() as i64,
            r.allocated
        );
        if r.kind == DUMP && r.rss.iter().any(|&b| b > 0) {
            let total: u64 = r.rss.iter().sum();
            let _ = write!(s, "{total}\t");
            let mut first = true;
            for (k, b) in crate::background::rss::KINDS.iter().zip(r.rss) {
                if b > 0 {
                    let _ = write!(s, "{}{}={b}", if first { "" } else { "," }, k.0);
                    first = false;
                }
            }
            s.push('\t');
        } else {
            s.push_str("-\t-\t");
        }
        if r.kind == DUMP {
            let end = r.why.iter().position(|&b| b == 0).unwrap_or(r.why.len());
            let why = String::from_utf8_lossy(&r.why[..end]);
            let _ = writeln!(s, "{}\t{} {why}", r.own, r.seq);
        } else {
            s.push_str("-\t-\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_file_names_and_rows() {
        assert_eq!(
            path_of(Path::new("/t/heaplive.a.1.3.folded")),
            Path::new("/t/heaplive.a.1.3.timeline.tsv")
        );
        assert_eq!(path_of(Path::new("x.pb.gz")), Path::new("x.timeline.tsv"));
        let mut d = Row {
            at_ns: 5_000_000,
            live: 100,
            allocated: 300,
            kind: DUMP,
            seq: 2,
            own: 4096,
            ..Row::default()
        };
        d.rss[1] = 8192;
        d.why[..4].copy_from_slice(b"exit");
        let t = Row {
            live: 42,
            ..Row::default()
        };
        let text = text_of(&[t, d], 7, "prog", 1, 1000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[1].starts_with("t_ms\tunix_ms\tkind\tlive_bytes"));
        let f: Vec<&str> = lines[2].split('\t').collect();
        assert_eq!(f.len(), 11);
        assert_eq!(&f[2..], ["tick", "42", "42", "42", "0", "-", "-", "-", "-"]);
        let f: Vec<&str> = lines[3].split('\t').collect();
        assert_eq!(
            &f[2..],
            [
                "dump",
                "100",
                "100",
                "100",
                "300",
                "8192",
                "malloc heap=8192",
                "4096",
                "2 exit"
            ]
        );
    }
}

//! `heaplive report`: one self-contained HTML page from a run's files: per
//! process, memory over time (its timeline files, merged), the chosen
//! dump's top stacks and flame graph (inferno's SVG, embedded) by view,
//! the difference between two dumps (table and differential flame graph),
//! the stacks that grew at every dump, PHP's endpoints.
//!
//! The data the page draws is embedded once, as JSON, in
//! `<script type="application/json" id="heaplive-data">` (its shape: README,
//! "heaplive report"); the page's script (`report_page.js`, the project's
//! own, inline) draws it. No network, no external file.

use crate::cli::ReportArgs;
use crate::folded::{self, Profile};
use crate::report_json::Json;
use crate::{Res, error};
use heaplive_format::samples;
use std::collections::BTreeMap;
use std::path::Path;

const PAGE: &str = include_str!("report_page.html");
const SCRIPT: &str = include_str!("report_page.js");
/// Stacks per view embedded (the largest); the rest are summed as one.
const MAX_STACKS: usize = 400;
/// Stacks per live view with their size histograms (the table's rows).
const MAX_SIZE_STACKS: usize = 30;
/// Dumps per process that get flame graphs (the latest).
const MAX_FLAMES: usize = 24;
/// The flame graphs' width in pixels: fixed, since inferno's fluid layout
/// reads its window's width at load, which an iframe may not have yet.
const FLAME_WIDTH: usize = 1100;
/// The views a dump may have beside its live file.
/// (`temporary`: bytes of temporary allocations, those freed before their
/// thread's next allocation, per stack.)
pub const VIEWS: [&str; 4] = ["live", "alloc", "peak", "temporary"];

/// One dump, as read.
struct Dump {
    file: String,
    n: u32,
    why: String,
    t_ms: Option<u64>,
    views: Vec<(&'static str, Profile)>,
}

/// One process: its dumps, oldest first, and its timeline.
struct Process {
    program: String,
    pid: u32,
    dumps: Vec<Dump>,
    timeline: Vec<TimelineRow>,
    interval: Option<u64>,
}

/// A row of `NAME.timeline.tsv` (README, "The timeline").
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineRow {
    pub fields: Vec<String>,
}

impl TimelineRow {
    fn num(&self, i: usize) -> Option<f64> {
        self.fields.get(i)?.parse().ok()
    }
    fn t_ms(&self) -> u64 {
        self.num(0).unwrap_or(0.0) as u64
    }
    fn kind(&self) -> &str {
        self.fields.get(2).map_or("", String::as_str)
    }
    fn dump(&self) -> &str {
        self.fields.get(10).map_or("-", String::as_str)
    }
}

pub const TIMELINE_HEADER: &str = "t_ms\tunix_ms\tkind\tlive_bytes\tlive_low\tlive_high\tallocated_bytes\trss_bytes\trss_kinds\town_bytes\tdump";

/// The rows of a timeline file; None when it is not one.
pub fn parse_timeline(text: &str) -> Option<Vec<TimelineRow>> {
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    if lines.next()? != TIMELINE_HEADER {
        return None;
    }
    let mut rows = Vec::new();
    for l in lines {
        let fields: Vec<String> = l.split('\t').map(str::to_string).collect();
        if fields.len() != 11 || fields[0].parse::<u64>().is_err() {
            return None;
        }
        rows.push(TimelineRow { fields });
    }
    Some(rows)
}

/// Merges the timelines of one process's dumps: every row any of them
/// holds (a later file may have thinned rows an earlier one kept), once,
/// by time.
pub fn merge_timelines(files: Vec<Vec<TimelineRow>>) -> Vec<TimelineRow> {
    let mut all: Vec<TimelineRow> = files.into_iter().flatten().collect();
    all.sort_by_key(|r| r.t_ms());
    let mut out: Vec<TimelineRow> = Vec::new();
    for r in all {
        if !out
            .iter()
            .rev()
            .take_while(|o| o.t_ms() == r.t_ms())
            .any(|o| *o == r)
        {
            out.push(r);
        }
    }
    out
}

fn companion(file: &str, suffix: &str) -> Option<String> {
    Some(format!("{}{suffix}", file.strip_suffix(".folded")?))
}

/// A dump's files: its views, its timeline file's rows and the sample
/// interval that file names.
type Read = (Dump, Option<Vec<TimelineRow>>, Option<u64>);

fn read_dump(file: &str, n: u32) -> Res<Read> {
    let mut views = vec![("live", folded::load(file)?)];
    for v in &VIEWS[1..] {
        if let Some(p) = companion(file, &format!(".{v}.folded"))
            && let Some(bytes) = folded::read_regular(&p)
            && let Ok(prof) = folded::parse(&p, &bytes)
        {
            views.push((v, prof));
        }
    }
    let text = companion(file, ".timeline.tsv")
        .and_then(|p| folded::read_regular_text(&p))
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let timeline = text.as_deref().and_then(parse_timeline);
    let interval = text.as_deref().and_then(|t| {
        let l = t.lines().next()?;
        let r = l.split(", sample interval ").nth(1)?;
        r.split(',').next()?.trim().parse::<u64>().ok()
    });
    // This dump's row: its time and why.
    let (mut why, mut t_ms) = (String::from("?"), None);
    if let Some(rows) = &timeline
        && let Some(r) = rows.iter().rev().find(|r| r.kind() == "dump")
    {
        if let Some((_, w)) = r.dump().split_once(' ') {
            why = w.to_string();
        }
        t_ms = Some(r.t_ms());
    }
    Ok((
        Dump {
            file: file.to_string(),
            n,
            why,
            t_ms,
            views,
        },
        timeline,
        interval,
    ))
}

fn read_processes(files: &[String]) -> Res<Vec<Process>> {
    let files = folded::expand(files)?;
    // (program, pid) -> dumps, by the file names the library writes.
    let mut groups: BTreeMap<(String, u32), Vec<(u32, String)>> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        // The dump of a process that never sampled (a short child): nothing
        // to draw.
        if std::fs::metadata(f).is_ok_and(|m| m.is_file() && m.len() == 0) {
            continue;
        }
        let key = match crate::flame::parse_name(f) {
            Some((exe, pid, n)) => ((exe, pid), n),
            None => {
                let base = Path::new(f)
                    .file_name()
                    .and_then(|b| b.to_str())
                    .unwrap_or(f);
                ((base.to_string(), 0), i as u32 + 1)
            }
        };
        groups.entry(key.0).or_default().push((key.1, f.clone()));
    }
    let mut out = Vec::new();
    for ((program, pid), mut list) in groups {
        list.sort();
        let mut dumps = Vec::new();
        let mut timelines = Vec::new();
        let mut interval = None;
        for (n, f) in &list {
            let (d, t, r) = read_dump(f, *n)?;
            dumps.push(d);
            timelines.extend(t);
            interval = interval.or(r);
        }
        let names: Vec<String> = list.iter().map(|(_, f)| f.clone()).collect();
        out.push(Process {
            program,
            pid,
            dumps,
            timeline: merge_timelines(timelines),
            interval: crate::top::interval_of_files(&names).or(interval),
        });
    }
    // The process with the most dumps first (a run's main program, before
    // its short children), then by pid.
    out.sort_by(|a, b| b.dumps.len().cmp(&a.dumps.len()).then(a.pid.cmp(&b.pid)));
    Ok(out)
}

/// Top stacks of a view as JSON, with their 95% intervals when the dump's
/// samples file has them.
fn stacks_json(file: &str, view: &str, p: &Profile) -> Json {
    let rows = if view == "live" || view == "alloc" || view == "peak" {
        let f = if view == "live" {
            file.to_string()
        } else {
            companion(file, &format!(".{view}.folded")).unwrap_or_default()
        };
        crate::top::samples_rows(&f).flatten()
    } else {
        None
    };
    // The temporary view keeps no sample counts: its intervals come from
    // `NAME.temporary.variance.folded` when written.
    let variances = (view == "temporary")
        .then(|| companion(file, ".temporary.folded"))
        .flatten()
        .and_then(|f| crate::top::companions_of(&[f], "variance"));
    // The live samples by size class (the samples file's size rows).
    let sizes = (view == "live")
        .then(|| samples_of(file))
        .flatten()
        .map(|s| s.sizes)
        .filter(|z| !z.is_empty());
    let mut v: Vec<(&String, &u64)> = p.stacks.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut out = Vec::new();
    let mut rest = 0u128;
    for (i, &(stack, &bytes)) in v.iter().enumerate() {
        if i >= MAX_STACKS {
            rest += bytes as u128;
            continue;
        }
        let st = rows.as_ref().and_then(|r| r.get(stack));
        let iv = match &variances {
            Some(v) => crate::top::interval_of(
                bytes,
                None,
                Some(v.stacks.get(stack).copied().unwrap_or(0)),
            ),
            None => st.and_then(|s| {
                crate::top::interval_of(bytes, s.samples, Some(s.variance.round() as u64))
            }),
        };
        let mut o = Json::obj()
            .with("stack", Json::str(stack))
            .with("bytes", Json::num(bytes as f64));
        if let Some((lo, hi)) = iv.filter(|iv| iv.1.is_finite()) {
            o = o
                .with("low", Json::num(lo.round().max(0.0)))
                .with("high", Json::num(hi.round()));
        }
        if let Some(classes) = sizes
            .as_ref()
            .filter(|_| i < MAX_SIZE_STACKS)
            .and_then(|z| z.get(stack))
        {
            let rows = classes
                .iter()
                .map(|(&low, s)| {
                    Json::Arr(vec![
                        Json::num(low as f64),
                        Json::num(s.samples as f64),
                        Json::num(s.bytes.round()),
                    ])
                })
                .collect();
            o = o.with("sizes", Json::Arr(rows));
        }
        out.push(o);
    }
    Json::obj()
        .with("total", Json::num(p.total() as f64))
        .with("others", Json::num(rest as f64))
        .with("stacks", Json::Arr(out))
}

/// The samples file of the dump whose live file is `file`, parsed (None
/// when it has none or it cannot be read): its size rows (per stack, the
/// live samples by size class) and lifetime rows (per stack, the sampled
/// blocks freed by lifetime class).
fn samples_of(file: &str) -> Option<samples::Samples> {
    let path = companion(file, ".samples.folded")?;
    let bytes = folded::read_regular_text(&path)?;
    samples::parse(&path, &bytes).ok()
}

/// The dump's freed blocks by lifetime (`NAME.samples.folded`'s lifetime
/// rows), the `MAX_STACKS` stacks that freed the most bytes first: per
/// stack its text and, per class of `samples::LIFE_CLASSES`, `[blocks,
/// bytes, low, high]` (the bytes' 95% interval). None without them.
fn lifetimes_json(file: &str) -> Option<Json> {
    let all = samples_of(file)?.lifetimes;
    if all.is_empty() {
        return None;
    }
    let freed = |l: &[samples::Life; 4]| l[..3].iter().map(|c| c.bytes).sum::<f64>();
    let mut v: Vec<_> = all.iter().collect();
    v.sort_by(|a, b| freed(b.1).total_cmp(&freed(a.1)).then(a.0.cmp(b.0)));
    let rows = v
        .into_iter()
        .take(MAX_STACKS)
        .map(|(stack, classes)| life_classes_json(classes).with("stack", Json::str(stack)))
        .collect();
    Some(Json::Arr(rows))
}

fn life_classes_json(classes: &[samples::Life; 4]) -> Json {
    let mut o = Json::obj();
    for (name, l) in samples::LIFE_CLASSES.iter().zip(classes) {
        let bytes = l.bytes.round().max(0.0);
        let (lo, hi) = crate::top::interval_of(bytes as u64, None, Some(l.variance.round() as u64))
            .filter(|iv| iv.1.is_finite())
            .unwrap_or((bytes, bytes));
        o = o.with(
            name,
            Json::Arr(vec![
                Json::num(l.blocks.round()),
                Json::num(bytes),
                Json::num(lo.round().max(0.0)),
                Json::num(hi.round()),
            ]),
        );
    }
    o
}

fn flame_svg(p: &Profile, title: &str, count: &str) -> Option<String> {
    if p.total() == 0 {
        return None;
    }
    crate::flame::render_with(p, title, count, Some(FLAME_WIDTH))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

fn diff_svg(a: &Profile, b: &Profile, title: &str) -> Option<String> {
    let text = |p: &Profile| {
        let mut s = String::new();
        for (k, v) in &p.stacks {
            s.push_str(&format!("{k} {v}\n"));
        }
        s
    };
    let mut folded = Vec::new();
    let opt = inferno::differential::Options::default();
    inferno::differential::from_readers(opt, text(a).as_bytes(), text(b).as_bytes(), &mut folded)
        .ok()?;
    let mut fo = inferno::flamegraph::Options::default();
    fo.title = title.to_string();
    fo.count_name = "bytes".to_string();
    fo.deterministic = true;
    fo.image_width = Some(FLAME_WIDTH);
    fo.direction = inferno::flamegraph::Direction::Inverted;
    let text = String::from_utf8(folded).ok()?;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut fo, text.lines(), &mut svg).ok()?;
    String::from_utf8(svg).ok()
}

/// The stacks that grew over the dumps (leak suspects): never smaller at
/// a dump than at the one before, and larger at half of them or more.
fn suspects(dumps: &[Dump]) -> Json {
    let lives: Vec<&Profile> = dumps.iter().map(|d| &d.views[0].1).collect();
    let mut out = Vec::new();
    if lives.len() >= 2 {
        let last = lives[lives.len() - 1];
        let mut grew: Vec<(&String, u64)> = last
            .stacks
            .iter()
            .filter(|(s, _)| {
                let at = |p: &Profile| p.stacks.get(*s).copied().unwrap_or(0);
                let steps = lives.len() - 1;
                let grew = lives.windows(2).filter(|w| at(w[1]) > at(w[0])).count();
                lives.windows(2).all(|w| at(w[1]) >= at(w[0])) && grew * 2 >= steps && grew > 0
            })
            .map(|(s, &b)| (s, b))
            .collect();
        grew.sort_by_key(|b| std::cmp::Reverse(b.1));
        for (s, _) in grew.into_iter().take(50) {
            let series = lives
                .iter()
                .map(|p| Json::num(p.stacks.get(s).copied().unwrap_or(0) as f64))
                .collect();
            out.push(
                Json::obj()
                    .with("stack", Json::str(s))
                    .with("bytes", Json::Arr(series)),
            );
        }
    }
    Json::Arr(out)
}

/// Per-stack lines over time: the stacks holding the most at any dump
/// (the 5 largest of each dump, at most 8), their bytes at every dump.
fn series(dumps: &[Dump]) -> Json {
    let mut chosen: Vec<&String> = Vec::new();
    for d in dumps.iter().rev() {
        let mut v: Vec<(&String, &u64)> = d.views[0].1.stacks.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1));
        for (s, _) in v.into_iter().take(5) {
            if chosen.len() < 8 && !chosen.contains(&s) {
                chosen.push(s);
            }
        }
    }
    Json::Arr(
        chosen
            .into_iter()
            .map(|s| {
                let pts = dumps
                    .iter()
                    .map(|d| Json::num(d.views[0].1.stacks.get(s).copied().unwrap_or(0) as f64))
                    .collect();
                Json::obj()
                    .with("stack", Json::str(s))
                    .with("bytes", Json::Arr(pts))
            })
            .collect(),
    )
}

/// PHP's endpoints (request frames, `[GET /x]`) by bytes in a view.
fn endpoints(p: &Profile) -> Json {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for (stack, &b) in &p.stacks {
        if let Some(f) =
            heaplive_format::folded::frames(stack).find(|f| crate::top::is_request_frame(f))
        {
            *by.entry(f).or_insert(0) += b;
        }
    }
    let mut v: Vec<(&str, u64)> = by.into_iter().collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1));
    Json::Arr(
        v.into_iter()
            .take(50)
            .map(|(f, b)| {
                Json::obj()
                    .with("request", Json::str(f))
                    .with("bytes", Json::num(b as f64))
            })
            .collect(),
    )
}

fn timeline_json(rows: &[TimelineRow]) -> Json {
    let cols = TIMELINE_HEADER.split('\t').map(Json::str).collect();
    let rows = rows
        .iter()
        .map(|r| {
            Json::Arr(
                r.fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| match (i, f.as_str()) {
                        (_, "-") => Json::Null,
                        (2 | 8 | 10, s) => Json::str(s),
                        (_, s) => s.parse::<f64>().map_or(Json::Null, Json::num),
                    })
                    .collect(),
            )
        })
        .collect();
    Json::obj()
        .with("columns", Json::Arr(cols))
        .with("rows", Json::Arr(rows))
}

fn process_json(p: &Process) -> Json {
    let flames_from = p.dumps.len().saturating_sub(MAX_FLAMES);
    let mut dumps = Vec::new();
    for (i, d) in p.dumps.iter().enumerate() {
        let mut views = Json::obj();
        let mut flames = Json::obj();
        for (v, prof) in &d.views {
            views = views.with(v, stacks_json(&d.file, v, prof));
            let last = i + 1 == p.dumps.len();
            if i >= flames_from && (*v == "live" || last) {
                let title = format!("{} (pid {}), dump {}: {v}", p.program, p.pid, d.n);
                if let Some(svg) = flame_svg(prof, &title, "bytes") {
                    flames = flames.with(v, Json::str(&svg));
                }
            }
        }
        let mut o = Json::obj()
            .with("n", Json::num(d.n as f64))
            .with("file", Json::str(&d.file))
            .with("why", Json::str(&d.why))
            .with("views", views)
            .with("flames", flames);
        if let Some(l) = lifetimes_json(&d.file) {
            o = o.with("lifetimes", l);
        }
        if let Some(t) = d.t_ms {
            o = o.with("t_ms", Json::num(t as f64));
        }
        dumps.push(o);
    }
    // Differential flame graphs: each dump against the one before, and the
    // last against the first.
    let mut diffs = Vec::new();
    let n = p.dumps.len();
    let mut pairs: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
    if n > 2 {
        pairs.push((0, n - 1));
    }
    for (a, b) in pairs.into_iter().filter(|&(_, b)| b >= flames_from) {
        let (da, db) = (&p.dumps[a], &p.dumps[b]);
        let title = format!(
            "{} (pid {}): dump {} to dump {}",
            p.program, p.pid, da.n, db.n
        );
        if let Some(svg) = diff_svg(&da.views[0].1, &db.views[0].1, &title) {
            diffs.push(
                Json::obj()
                    .with("from", Json::num(a as f64))
                    .with("to", Json::num(b as f64))
                    .with("svg", Json::str(&svg)),
            );
        }
    }
    let last = p.dumps.last().map(|d| {
        d.views
            .iter()
            .find(|(v, _)| *v == "peak")
            .unwrap_or(&d.views[0])
            .1
            .clone()
    });
    // PHP's request-peak dumps of this process (`NAME.request.folded`,
    // HEAPLIVE_PHP_PEAK_BYTES): per endpoint, its highest and mean peak
    // and how many requests, as `top --endpoints` counts them.
    let peaks: Vec<String> = p
        .dumps
        .iter()
        .filter(|d| folded::is_request_peak_name(&d.file))
        .map(|d| d.file.clone())
        .collect();
    let request_peaks = crate::top::endpoint_peaks(&peaks)
        .map(|(rows, _)| rows)
        .unwrap_or_default();
    let request_peaks = Json::Arr(
        request_peaks
            .into_iter()
            .map(|(e, (n, hi, sum))| {
                Json::obj()
                    .with("request", Json::str(&e))
                    .with("highest", Json::num(hi as f64))
                    .with("mean", Json::num((sum / n.max(1) as u128) as f64))
                    .with("requests", Json::num(n as f64))
            })
            .collect(),
    );
    let mut o = Json::obj()
        .with("program", Json::str(&p.program))
        .with("pid", Json::num(p.pid as f64))
        .with("timeline", timeline_json(&p.timeline))
        .with("dumps", Json::Arr(dumps))
        .with("diffs", Json::Arr(diffs))
        .with("suspects", suspects(&p.dumps))
        .with("series", series(&p.dumps))
        .with(
            "endpoints",
            last.as_ref().map_or(Json::Arr(vec![]), endpoints),
        )
        .with("request_peaks", request_peaks);
    if let Some(r) = p.interval {
        o = o.with("interval", Json::num(r as f64));
    }
    o
}

/// The page for `processes`.
fn page(processes: &[Process], title: &str) -> String {
    let data = Json::obj()
        .with("version", Json::num(1.0))
        .with("title", Json::str(title))
        .with(
            "processes",
            Json::Arr(processes.iter().map(process_json).collect()),
        );
    // Split at the markers first: a title or a stack may contain one.
    let title = crate::report_json::html_escape(title);
    let mut out = String::new();
    let mut rest = PAGE;
    for (marker, with) in [
        ("{{TITLE}}", title.as_str()),
        ("{{TITLE}}", title.as_str()),
        ("{{DATA}}", &data.to_script_text()),
        ("{{SCRIPT}}", SCRIPT),
    ] {
        let (before, after) = rest.split_once(marker).unwrap_or((rest, ""));
        out.push_str(before);
        out.push_str(with);
        rest = after;
    }
    out.push_str(rest);
    out
}

pub fn main(a: ReportArgs) -> Res<()> {
    let files = if a.files.is_empty() {
        vec![".".to_string()]
    } else {
        a.files
    };
    let processes = read_processes(&files)?;
    if processes.is_empty() {
        return error(format!("{}: no dumps", files.join(", ")));
    }
    let title = a.title.unwrap_or_else(|| {
        let progs: Vec<&str> = processes.iter().map(|p| p.program.as_str()).collect();
        let mut uniq = progs.clone();
        uniq.dedup();
        format!(
            "heaplive report: {} ({} process{}, {} dumps)",
            uniq.join(", "),
            processes.len(),
            if processes.len() == 1 { "" } else { "es" },
            processes.iter().map(|p| p.dumps.len()).sum::<usize>()
        )
    });
    let html = page(&processes, &title);
    match a.output {
        Some(path) => crate::flame::write_output(&path, html.as_bytes()),
        None => crate::table::emit(|out| out.write_all(html.as_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: u64, kind: &str, live: u64) -> String {
        format!("{t}\t0\t{kind}\t{live}\t{live}\t{live}\t0\t-\t-\t-\t-")
    }

    #[test]
    fn timelines_parse_and_merge_by_time_once() {
        let a = format!(
            "# x\n{TIMELINE_HEADER}\n{}\n{}\n",
            row(1, "tick", 5),
            row(3, "tick", 6)
        );
        let b = format!(
            "{TIMELINE_HEADER}\n{}\n{}\n",
            row(1, "tick", 5),
            row(2, "tick", 7)
        );
        let (a, b) = (parse_timeline(&a).unwrap(), parse_timeline(&b).unwrap());
        let m = merge_timelines(vec![a, b]);
        let ts: Vec<u64> = m.iter().map(|r| r.t_ms()).collect();
        assert_eq!(ts, [1, 2, 3]);
        assert!(parse_timeline("t_ms\tother\n").is_none());
        assert!(parse_timeline(&format!("{TIMELINE_HEADER}\n1\t2\n")).is_none());
    }
}

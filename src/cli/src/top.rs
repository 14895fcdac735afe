//! `heaplive top`: the stacks (or functions) holding the most live bytes.

use crate::cli::TopArgs;
use crate::folded::{self, Profile};
use crate::table::{Table, abbreviate_stack, column_width, emit, function_totals, shorten_frame};
use crate::units::{grouped, human, percent};
use crate::{Res, error};
use heaplive_format::{samples, stats};
use std::collections::BTreeMap;

pub fn main(mut a: TopArgs) -> Res<()> {
    if let Some(target) = a.pool.clone() {
        return crate::pool::main(&a, &target);
    }
    let mut t = Table::from_args(&a.table);
    a.files = if a.endpoints {
        folded::expand_requests(&a.files)?
    } else if let Some(view) = &a.view {
        files_of_view(&a.files, view)?
    } else {
        folded::expand(&a.files)?
    };
    t.view = folded::View::of(&a.files);
    if a.endpoints {
        let text = top_endpoints(&a.files, &t)?;
        return emit(|out| out.write_all(text.as_bytes()));
    }
    if a.app {
        let text = top_app(&a.files, &t)?;
        return emit(|out| out.write_all(text.as_bytes()));
    }
    let mut profile = folded::load_all(&a.files)?;
    let app = a.php.then(|| application_line(&profile, &t));
    if a.php {
        profile = php_frames_only(&profile);
    }
    let mut text = if a.inclusive {
        top_functions(&profile, &t, a.by_line)
    } else {
        // With --php the sample counts and variances fold the same way as
        // the bytes (variances add).
        let fold = |s: Profile| if a.php { php_frames_only(&s) } else { s };
        let samples = companions_of(&a.files, "samples").map(fold);
        let variances = companions_of(&a.files, "variance").map(fold);
        let r = interval_of_files(&a.files);
        // The temporary view's files (`NAME.temporary.folded`) hold bytes
        // of temporary allocations, not live bytes: the column says so.
        let temporary = a
            .files
            .iter()
            .all(|f| dump_and_view(f).is_some_and(|(_, v)| v == "temporary"));
        let label = if temporary {
            "TEMPORARY"
        } else {
            t.view.column()
        };
        let kind = Rows::stacks(profile.stacks.len());
        top_stacks(
            &profile,
            &t,
            a.files.len(),
            samples,
            variances,
            r,
            label,
            &kind,
        )
    };
    text += &app.unwrap_or_default();
    emit(|out| out.write_all(text.as_bytes()))
}

/// `top --view VIEW`: each dump's file of that view, whichever of the
/// dump's files was named (`NAME.folded`, `NAME.alloc.folded`, ...). A
/// named file whose dump has no such view is an error naming the file and
/// the setting that writes it; of a directory's dumps, those without it
/// are left out (one line says how many), and none is an error.
fn files_of_view(paths: &[String], view: &str) -> Res<Vec<String>> {
    let of = |f: &str| {
        let (dump, _) = dump_and_view(f)?;
        Some(if view == "live" {
            format!("{dump}.folded")
        } else {
            format!("{dump}.{view}.folded")
        })
    };
    let why = match view {
        "alloc" => "the dump was taken without HEAPLIVE_VIEWS=...,alloc",
        "peak" => {
            "a peak file is written at exit, when the peak was above the exit total (HEAPLIVE_VIEWS=...,peak)"
        }
        "temporary" => "the dump was taken without HEAPLIVE_VIEWS=...,temporary",
        _ => "no such dump",
    };
    let exists = |p: &str| std::path::Path::new(p).is_file();
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        if p != "-" && std::path::Path::new(p).is_dir() {
            let dumps = folded::expand(std::slice::from_ref(p))?;
            let found: Vec<String> = dumps
                .iter()
                .filter_map(|f| of(f))
                .filter(|f| exists(f))
                .collect();
            if found.is_empty() {
                return error(format!("{p}: no dump with a {view} file ({why})"));
            }
            if found.len() < dumps.len() {
                say!(
                    "heaplive top: {} of the {} dumps in {p} have no {view} file ({why}): left out",
                    dumps.len() - found.len(),
                    dumps.len()
                );
            }
            out.extend(
                found
                    .into_iter()
                    .filter(|f| !out.contains(f))
                    .collect::<Vec<_>>(),
            );
            continue;
        }
        let Some(f) = of(p) else {
            return error(format!(
                "{p}: --view takes a dump's files (NAME.folded, NAME.VIEW.folded) or directories"
            ));
        };
        if !exists(&f) {
            return error(format!("{f}: no such file ({why})"));
        }
        // Two files of one dump: it is ranked once.
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(out)
}

/// `top --php`'s last line: the application frame (a PHP frame neither
/// `[internal]` nor `[library]`, `HEAPLIVE_PHP_LIBRARY`) that is the
/// innermost one of the most bytes, and its share of all, as the
/// memory_limit line says it (`format::php_frames`).
fn application_line(p: &Profile, t: &Table) -> String {
    let sum =
        heaplive_format::php_frames::summarize(p.stacks.iter().map(|(s, &n)| (s.split(';'), n)));
    match sum.app_frame {
        Some(f) => format!(
            "application frame holding the most (the innermost frame outside [internal] and [library] code): {f}, {} ({} of {})\n",
            t.size(sum.app_bytes as u128),
            percent(sum.app_bytes as u128, sum.total as u128),
            t.size(sum.total as u128)
        ),
        None => "no application frame (every PHP frame is [internal] or [library]: HEAPLIVE_PHP_LIBRARY)\n".into(),
    }
}

/// The row of `top --app` for the stacks with no frame of the executable.
const NO_APP_FRAME: &str = "[no frame of the executable]";

/// `top --app`: the live bytes of every stack under its innermost frame
/// that is in the main executable (named by `NAME.app.txt` beside each
/// dump, `format::app_frames`), summed per such frame; the stacks with none
/// (a shared library's constructor, a thread a library started) in one
/// row, [`NO_APP_FRAME`].
fn top_app(files: &[String], t: &Table) -> Res<String> {
    let mut by_frame = Profile::default();
    // The samples and variances fold the same way (they add), when every
    // file has them (sampled mode).
    let mut samples = Some(Profile::default());
    let mut variances = Some(Profile::default());
    let mut stacks = 0usize;
    for f in files {
        let frames = app_frames_of(f)?;
        let fold = |p: &Profile| {
            let mut out = Profile::default();
            for (stack, &n) in &p.stacks {
                // A frame of a stripped executable counts for its function.
                let key = stack
                    .split(';')
                    .rev()
                    .find_map(|fr| frames.get(fr).map(|func| func.as_deref().unwrap_or(fr)))
                    .unwrap_or(NO_APP_FRAME);
                let slot = out.stacks.entry(key.to_string()).or_insert(0);
                *slot = slot.saturating_add(n);
            }
            out
        };
        let p = folded::load(f)?;
        stacks += p.stacks.len();
        by_frame.try_add(fold(&p)).or_else(error)?;
        let one = std::slice::from_ref(f);
        for (sum, what) in [(&mut samples, "samples"), (&mut variances, "variance")] {
            *sum = match (sum.take(), companions_of(one, what)) {
                (Some(mut s), Some(c)) => {
                    s.add(fold(&c));
                    Some(s)
                }
                _ => None,
            };
        }
    }
    let kind = Rows {
        header: "APPLICATION FRAME (the innermost frame in the executable)",
        noun: "frames",
        stacks,
    };
    let r = interval_of_files(files);
    Ok(top_stacks(
        &by_frame,
        t,
        files.len(),
        samples,
        variances,
        r,
        t.view.column(),
        &kind,
    ))
}

/// The executable's frames of the dump `f` is a file of: its
/// `NAME.app.txt`.
fn app_frames_of(f: &str) -> Res<heaplive_format::app_frames::Frames> {
    let dump = match dump_and_view(f) {
        Some((dump, _)) if f != "-" => dump,
        _ => {
            return error(format!(
                "{f}: --app reads the NAME.app.txt beside a dump's NAME.folded: give the dump's file{}",
                if f == "-" { ", not standard input" } else { "" }
            ));
        }
    };
    let path = format!("{dump}.app.txt");
    match folded::read_regular_text(&path) {
        Some(bytes) => heaplive_format::app_frames::parse(&path, &bytes).or_else(error),
        None => error(format!(
            "{f}: no {path} beside it: a dump names the executable's frames when HEAPLIVE_VIEWS includes app (HEAPLIVE_VIEWS=live,peak,samples,app)"
        )),
    }
}

/// The companions of kind `what` (`samples`: live samples per stack;
/// `variance`: the estimated variance of each stack's bytes, in bytes
/// squared, 0 or no line when exact) that go with the files, summed. Read
/// from each dump's samples file `NAME.samples.folded` (version 2,
/// `format::samples`: the rows of the file's view, `live` for
/// `NAME.folded`, `alloc` for `NAME.alloc.folded`, `peak` for
/// `NAME.peak.folded`), else from the files of older dumps (a version 1
/// `NAME.samples.folded` of counts, `NAME.variance.folded`,
/// `NAME.alloc.variance.folded`...). Written by the library in sampled
/// mode. None when any is missing (exact mode, HEAPLIVE_VIEWS without
/// samples, a view whose sample counts are not kept).
pub fn companions_of(files: &[String], what: &str) -> Option<Profile> {
    let mut sum = Profile::default();
    for f in files {
        if let Some(rows) = samples_rows(f) {
            let rows = rows?;
            for (stack, st) in rows {
                let v = match what {
                    "samples" => st.samples?,
                    // Whole bytes squared; `as` saturates past u64.
                    _ => st.variance.round() as u64,
                };
                let slot = sum.stacks.entry(stack).or_insert(0);
                *slot = slot.saturating_add(v);
            }
            continue;
        }
        let base = f.strip_suffix(".folded")?;
        let companion = format!("{base}.{what}.folded");
        let bytes = folded::read_regular(&companion)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        sum.add(folded::parse(&companion, &bytes).ok()?);
    }
    Some(sum)
}

/// The sample interval R of the files' dumps, when their samples files
/// (version 2) name it and agree.
pub fn interval_of_files(files: &[String]) -> Option<u64> {
    let mut r = None;
    for f in files {
        let (dump, _) = dump_and_view(f)?;
        let path = format!("{dump}.samples.folded");
        let bytes = folded::read_regular_text(&path)?;
        let this = samples::parse(&path, &bytes).ok()?.interval?;
        if r.is_some_and(|r| r != this) {
            return None;
        }
        r = Some(this);
    }
    r
}

/// The dump a file is a view of, and the view: `NAME.alloc.folded` is
/// (`NAME`, `alloc`), `NAME.folded` (`NAME`, `live`).
pub fn dump_and_view(f: &str) -> Option<(&str, &'static str)> {
    let base = f.strip_suffix(".folded")?;
    for view in ["alloc", "peak", "temporary"] {
        if let Some(dump) = base.strip_suffix(&format!(".{view}")) {
            return Some((dump, view));
        }
    }
    Some((base, "live"))
}

/// The rows of `f`'s view in its dump's version 2 samples file: None when
/// there is no such file (an older dump, or none), Some(None) when the
/// file cannot be read as one, else the rows (none: no stack of the view
/// has a sample).
pub fn samples_rows(f: &str) -> Option<Option<BTreeMap<String, samples::Stat>>> {
    let (dump, view) = dump_and_view(f)?;
    if view == "temporary" {
        // No sample counts are kept for it: its variances are in
        // `NAME.temporary.variance.folded`.
        return None;
    }
    let path = format!("{dump}.samples.folded");
    let bytes = folded::read_regular_text(&path)?;
    if !samples::is_v2(&bytes) {
        return None;
    }
    Some(
        samples::parse(&path, &bytes)
            .ok()
            .map(|s| s.view(view).cloned().unwrap_or_default()),
    )
}

/// The 95% interval of a stack's estimate of `bytes`: from its variance
/// when the variance files are there (exact, zero width, when the variance
/// is 0), else from its count of samples (Garwood's interval on the count
/// scaled by the mean weight: right for small blocks, too wide for blocks
/// near or above the sample interval), else none.
pub fn interval_of(bytes: u64, n: Option<u64>, variance: Option<u64>) -> Option<(f64, f64)> {
    match (variance, n) {
        (Some(v), _) => Some(stats::interval95(bytes as f64, v as f64)),
        (None, Some(n)) => Some(stats::interval95_from_count(bytes as f64, n)),
        (None, None) => None,
    }
}

fn interval_cell(t: &Table, iv: Option<(f64, f64)>) -> String {
    match iv {
        Some((lo, hi)) if hi.is_finite() => format!(
            "{}..{}",
            t.size(lo.round() as u128),
            t.size(hi.round() as u128)
        ),
        _ => "?".into(),
    }
}

/// The last line of `top` in sampled mode: what may sit in stacks that
/// have no sample. A stack of L bytes goes unsampled with probability at
/// most exp(-L/R), so at 95% it holds under 3.0 R; R is bounded above by
/// the smallest mean weight of a sample (a sample weighs s/p >= R).
fn unseen_line(p: &Profile, samples: Option<&Profile>, interval: Option<u64>) -> Option<String> {
    if let Some(r) = interval.filter(|&r| r > 1) {
        // The samples file names R.
        return Some(format!(
            "not seen: a stack with no sample holds under {} at 95% (3.0 x the sample interval, {}); the total's interval includes such stacks",
            human(stats::unseen_bound(r as f64).round() as u128),
            human(r as u128)
        ));
    }
    if interval == Some(1) {
        // Exact mode (a samples file written for its size rows, the
        // `sizes` view): every block is a sample.
        return None;
    }
    let samples = samples?;
    let r = p
        .stacks
        .iter()
        .filter_map(|(stack, &bytes)| {
            let n = *samples.stacks.get(stack)?;
            (n > 0 && bytes > 0).then(|| bytes as f64 / n as f64)
        })
        .fold(f64::INFINITY, f64::min);
    if !r.is_finite() {
        return None;
    }
    Some(format!(
        "not seen: a stack with no sample holds under {} at 95% (3.0 x the sample interval, at most {} here); the total's interval includes such stacks",
        human(stats::unseen_bound(r).round() as u128),
        human(r.round() as u128)
    ))
}

pub use heaplive_format::php_frames::is_request_frame;

/// The profile with native frames folded away (`top --php`, `flamegraph
/// --php`): stacks that become the same are merged.
pub fn php_frames_only(p: &Profile) -> Profile {
    let mut stacks: std::collections::BTreeMap<String, u64> = Default::default();
    for (stack, &count) in &p.stacks {
        let key = heaplive_format::php_frames::php_key(stack.split(';'));
        *stacks.entry(key).or_insert(0) += count;
    }
    Profile { stacks }
}

/// `top --endpoints`: per PHP request root frame, the files (dumps) it
/// appears in and its bytes in each: the highest, the mean over those
/// files, and the share of all bytes under a request frame. On a directory
/// of per-request peak dumps (one request each), that ranks endpoints by
/// peak.
/// An endpoint and (dumps it is in, highest bytes, sum of bytes).
pub type EndpointPeak = (String, (u64, u128, u128));

/// Per PHP endpoint (the request frame at a stack's root) over `files`:
/// (endpoint, dumps it is in, highest bytes in one dump, sum over the
/// dumps), the highest first; and the sum of all. `top --endpoints` and the
/// report's request peaks.
pub fn endpoint_peaks(files: &[String]) -> Res<(Vec<EndpointPeak>, u128)> {
    use std::collections::BTreeMap;
    // endpoint -> (dumps, highest, sum)
    let mut by: BTreeMap<String, (u64, u128, u128)> = BTreeMap::new();
    let mut total = 0u128;
    for f in files {
        let p = folded::load(f)?;
        let mut here: BTreeMap<&str, u128> = BTreeMap::new();
        for (stack, &count) in &p.stacks {
            let root = stack.split(';').next().unwrap_or("");
            if is_request_frame(root) {
                *here.entry(root).or_insert(0) += count as u128;
            }
        }
        for (e, b) in here {
            let r = by.entry(e.to_string()).or_insert((0, 0, 0));
            r.0 += 1;
            r.1 = r.1.max(b);
            r.2 += b;
            total += b;
        }
    }
    let mut rows: Vec<EndpointPeak> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
    Ok((rows, total))
}

fn top_endpoints(files: &[String], t: &Table) -> Res<String> {
    let (rows, total) = endpoint_peaks(files)?;
    if rows.is_empty() {
        return error(
            "no PHP request frames ([GET /path], [cli script.php]) in these files: dumps of php-fpm or php-cli taken during requests, with HEAPLIVE_PHP_REQUEST_FRAME=1, have them",
        );
    }
    let shown = t.shown(rows.len());
    let w = rows[..shown]
        .iter()
        .map(|r| t.size(r.1.1).len())
        .chain([10])
        .max()
        .unwrap_or(10);
    let mut out = format!(
        "{:>w$}  {:>w$}  {:>6}  {:>6}  ENDPOINT\n",
        "HIGHEST", "MEAN", "DUMPS", "SHARE"
    );
    for (e, (n, hi, sum)) in &rows[..shown] {
        out += &format!(
            "{:>w$}  {:>w$}  {:>6}  {:>6}  {e}\n",
            t.size(*hi),
            t.size(sum / *n as u128),
            grouped(*n as u128),
            percent(*sum, total)
        );
    }
    if shown < rows.len() {
        out += &format!(
            "({} more endpoints)\n",
            grouped((rows.len() - shown) as u128)
        );
    }
    out += &format!(
        "{} endpoints in {} files\n",
        grouped(rows.len() as u128),
        grouped(files.len() as u128)
    );
    Ok(out)
}

/// What the rows of [`top_stacks`] are: its last column's header, their
/// name in "(N more ...)", and the stacks the total line counts.
struct Rows {
    header: &'static str,
    noun: &'static str,
    stacks: usize,
}

impl Rows {
    fn stacks(stacks: usize) -> Rows {
        Rows {
            header: "STACK (leaf first)",
            noun: "stacks",
            stacks,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn top_stacks(
    p: &Profile,
    t: &Table,
    nfiles: usize,
    samples: Option<Profile>,
    variances: Option<Profile>,
    sample_interval: Option<u64>,
    label: &str,
    kind: &Rows,
) -> String {
    let total = p.total();
    let mut rows: Vec<(&String, u64)> = p.stacks.iter().map(|(s, &c)| (s, c)).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown = t.shown(rows.len());
    let sizes: Vec<String> = rows[..shown].iter().map(|r| t.size(r.1 as u128)).collect();
    let w = sizes
        .iter()
        .map(|s| s.len())
        .chain([t.size(total).len(), 10])
        .max()
        .unwrap_or(10);
    let bars = samples.is_some() || variances.is_some();
    let interval = |stack: &str, bytes: u64| {
        interval_of(
            bytes,
            samples
                .as_ref()
                .map(|s| s.stacks.get(stack).copied().unwrap_or(0)),
            variances
                .as_ref()
                .map(|v| v.stacks.get(stack).copied().unwrap_or(0)),
        )
    };
    let cells: Vec<String> = rows[..shown]
        .iter()
        .map(|(stack, count)| interval_cell(t, interval(stack, *count)))
        .collect();
    let iw = column_width(&cells, 12);
    let extra = if bars { 11 + iw } else { 0 };
    let mut out = if bars {
        format!(
            "{:>w$}  {:>6}  {:>7}  {:>iw$}  {}\n",
            label, "SHARE", "SAMPLES", "95% INTERVAL", kind.header
        )
    } else {
        format!("{:>w$}  {:>6}  {}\n", label, "SHARE", kind.header)
    };
    let mut shown_bytes = 0u128;
    for (((stack, count), size), cell) in rows[..shown].iter().zip(&sizes).zip(&cells) {
        shown_bytes += *count as u128;
        let line = abbreviate_stack(stack, t.room(w + 10 + extra));
        let bars = if bars {
            let n = samples.as_ref().map_or("-".to_string(), |sp| {
                grouped(sp.stacks.get(*stack).copied().unwrap_or(0) as u128)
            });
            format!("{n:>7}  {cell:>iw$}  ")
        } else {
            String::new()
        };
        out += &format!(
            "{size:>w$}  {:>6}  {bars}{line}\n",
            percent(*count as u128, total)
        );
    }
    if shown < rows.len() {
        let rest = total - shown_bytes;
        out += &format!(
            "{:>w$}  {:>6}  ({} more {})\n",
            t.size(rest),
            percent(rest, total),
            grouped((rows.len() - shown) as u128),
            kind.noun
        );
    }
    let files = if nfiles == 1 {
        String::new()
    } else {
        format!(" from {nfiles} files")
    };
    // The total's interval: variances add over stacks.
    let total_interval = match &variances {
        Some(v) => format!(
            ", 95% interval {}",
            interval_cell(t, Some(stats::interval95(total as f64, v.total() as f64)))
        ),
        None => String::new(),
    };
    out += &format!(
        "{:>w$}  {:>6}  total: {} bytes in {} stacks{files}{total_interval}\n",
        t.size(total),
        percent(total, total),
        total,
        grouped(kind.stacks as u128),
    );
    let r = sample_interval.filter(|_| variances.is_some());
    if let Some(line) = unseen_line(p, samples.as_ref(), r) {
        out += &line;
        out.push('\n');
    }
    out
}

/// Per function (`by_line`: per function and line), inclusive and self.
fn top_functions(p: &Profile, t: &Table, by_line: bool) -> String {
    let total = p.total();
    let merged;
    let mut rows: Vec<(&str, (u128, u128))> = if by_line {
        function_totals(p).into_iter().collect()
    } else {
        merged = crate::table::function_totals_merged(p);
        merged.iter().map(|(f, &v)| (f.as_str(), v)).collect()
    };
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(b.1.1.cmp(&a.1.1)).then(a.0.cmp(b.0)));
    let shown = t.shown(rows.len());
    let w = rows[..shown]
        .iter()
        .map(|r| t.size(r.1.0).len())
        .chain([t.size(total).len(), 10])
        .max()
        .unwrap_or(10);
    let mut out = format!(
        "{:>w$}  {:>6}  {:>w$}  FUNCTION\n",
        "INCLUSIVE", "SHARE", "SELF"
    );
    for (func, (incl, excl)) in &rows[..shown] {
        let name = shorten_frame(func, t.room(2 * w + 12));
        out += &format!(
            "{:>w$}  {:>6}  {:>w$}  {name}\n",
            t.size(*incl),
            percent(*incl, total),
            t.size(*excl)
        );
    }
    if shown < rows.len() {
        out += &format!(
            "{:>w$}  {:>6}  {:>w$}  ({} more functions)\n",
            "",
            "",
            "",
            grouped((rows.len() - shown) as u128)
        );
    }
    out += &format!(
        "{:>w$}  {:>6}  {:>w$}  total: {} bytes in {} stacks\n",
        t.size(total),
        percent(total, total),
        "",
        total,
        grouped(p.stacks.len() as u128)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_frames_are_told_from_markers() {
        for (frame, request) in [
            ("[GET /api/report]", true),
            ("[POST /user/{n}]", true),
            ("[cli worker.php]", true),
            ("[zend_mm]", false),
            ("[php?]", false),
            ("[php names: full]", false),
            ("str_repeat [internal]", false),
            ("[GET ]", false),
        ] {
            assert_eq!(is_request_frame(frame), request, "{frame}");
        }
        assert!(heaplive_format::php_frames::is_php_frame("[GET /x]"));
    }

    #[test]
    fn php_keeps_php_frames_and_merges() {
        let p = folded::parse(
            "x",
            b"_start;execute_ex;{main} (i.php:3);f (a.php:2);str_repeat [internal];_emalloc;[zend_mm] 10\n\
              _start;execute_ex;{main} (i.php:3);f (a.php:2);str_repeat [internal];zend_string_alloc;_emalloc;[zend_mm] 5\n\
              _start;execute_ex;{main} (i.php:3);run (q.php:5);SQLite3::exec [internal];sqlite3_exec;sqlite3Malloc 7\n\
              _start;main;php_module_startup;zend_hash_init (zend_hash.c:12) 3\n\
              _start;main;zend_startup;[zend_mm] 2\n",
        )
        .unwrap();
        let q = php_frames_only(&p);
        let rows: Vec<(&str, u64)> = q.stacks.iter().map(|(s, &c)| (s.as_str(), c)).collect();
        assert_eq!(
            rows,
            [
                ("[no PHP code]", 3),
                ("[no PHP code];[zend_mm]", 2),
                (
                    "{main} (i.php:3);f (a.php:2);str_repeat [internal];[zend_mm]",
                    15
                ),
                ("{main} (i.php:3);run (q.php:5);SQLite3::exec [internal]", 7),
            ]
        );
    }
}

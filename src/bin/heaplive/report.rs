//! The text reports: `top`, `diff`, `merge`, and how stacks are shortened
//! to fit a terminal line.

use crate::args::{self, Args, Item};
use crate::folded::{self, Profile};
use crate::units::{grouped, human, human_signed, percent};
use crate::{Res, error, usage};
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::{self, Write};

const TOP_HELP: &str = "\
Usage: heaplive top FILE... [-n N] [--inclusive] [--bytes] [--width W]

The stacks holding the most live bytes. Several files are summed (e.g. the
dumps of all php-fpm workers taken at one moment). '-' reads standard input.

Options:
  -n N           show N rows (default 20; 0 = all)
  --inclusive    per function instead of per stack: the bytes of every stack
                 that contains the function (each stack counted once), with
                 its exclusive (leaf) bytes beside it
  --bytes        exact byte counts instead of KiB/MiB/GiB
  --width W      shorten stacks to W columns (default: the terminal's width,
                 or 160 when not a terminal; 0 = never shorten)

Stacks are shown leaf first: 'xmlStrdup <- xmlNewNode <- main'.

Examples:
  heaplive top heaplive.php-fpm8.2.4242.1.folded
  heaplive top -n 50 --inclusive heaplive.php-fpm8.2.*.3.folded
";

const DIFF_HELP: &str = "\
Usage: heaplive diff OLD NEW [-n N] [--bytes] [--width W]
       heaplive diff OLD NEW --folded > diff.folded

What grew and what shrank from OLD to NEW: per stack, then per function
(exclusive: the bytes whose leaf frame is that function), sorted by the size
of the change. To compare groups of files, merge each group first with
'heaplive merge'.

Options:
  -n N           rows per table (default 20; 0 = all)
  --bytes        exact byte counts instead of KiB/MiB/GiB
  --width W      shorten stacks to W columns (0 = never)
  --folded       write 'stack OLDCOUNT NEWCOUNT' lines instead, the
                 two-count format of difffolded.pl that inferno-flamegraph
                 and flamegraph.pl render as a differential flame graph

Examples:
  heaplive diff heaplive.app.4242.1.folded heaplive.app.4242.5.folded
  heaplive diff --folded a.folded b.folded | inferno-flamegraph > diff.svg
";

const MERGE_HELP: &str = "\
Usage: heaplive merge FILE... > all.folded

Sums identical stacks of several folded files and writes one folded file,
sorted by stack, to standard output. '-' reads standard input.

Example:
  heaplive merge heaplive.php-fpm8.2.*.2.folded > pool.folded
";

/// Options shared by the table reports.
struct Table {
    rows: usize,
    exact: bool,
    width: usize,
}

impl Table {
    fn size(&self, b: u128) -> String {
        if self.exact { b.to_string() } else { human(b) }
    }

    fn signed(&self, d: i128) -> String {
        match (self.exact, d) {
            (true, d) if d > 0 => format!("+{d}"),
            (true, d) => d.to_string(),
            (false, d) => human_signed(d),
        }
    }

    /// Room left for the stack after `used` columns.
    fn room(&self, used: usize) -> usize {
        if self.width == 0 {
            0
        } else {
            self.width.saturating_sub(used).max(20)
        }
    }

    fn shown(&self, len: usize) -> usize {
        if self.rows == 0 {
            len
        } else {
            self.rows.min(len)
        }
    }
}

fn parse_table_opt(
    args: &mut Args,
    name: &str,
    inline: Option<String>,
    t: &mut Table,
) -> Res<bool> {
    match name {
        "-n" | "--rows" => {
            let v = args.value(name, inline)?;
            t.rows = args::parse_count(name, &v)?;
        }
        "--width" | "-w" => {
            let v = args.value(name, inline)?;
            t.width = args::parse_count(name, &v)?;
        }
        "--bytes" => {
            args::no_value(name, &inline)?;
            t.exact = true;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn default_table() -> Table {
    Table {
        rows: 20,
        exact: false,
        width: terminal_width().unwrap_or(160),
    }
}

fn terminal_width() -> Option<usize> {
    // SAFETY: isatty and TIOCGWINSZ only read the descriptor's state and
    // write into `ws`, which we own.
    unsafe {
        if libc::isatty(1) != 1 {
            return None;
        }
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            return Some(ws.ws_col as usize);
        }
    }
    std::env::var("COLUMNS").ok()?.parse().ok()
}

/// Collects FILE arguments, handing options to `opt`.
fn files_and_options(
    rest: Vec<OsString>,
    help: &str,
    mut opt: impl FnMut(&mut Args, &str, Option<String>) -> Res<bool>,
) -> Res<Option<Vec<String>>> {
    let mut args = Args::new(rest);
    let mut files = Vec::new();
    let mut only_files = false;
    while let Some(item) = args.next()? {
        match item {
            Item::Pos(p) => files.push(args::pos_string(p)?),
            Item::DashDash => only_files = true,
            Item::Opt(name, inline) if only_files => {
                let _ = inline;
                files.push(name);
            }
            Item::Opt(name, inline) => {
                if name == "-h" || name == "--help" {
                    print!("{help}");
                    return Ok(None);
                }
                if !opt(&mut args, &name, inline)? {
                    return args::unknown(&name);
                }
            }
        }
    }
    Ok(Some(files))
}

/// Writes a report to stdout; a closed pipe (`| head`) ends it quietly.
fn emit(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Res<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match f(&mut out).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => error(format!(
            "writing to standard output: {}",
            crate::units::io_msg(&e)
        )),
    }
}

pub fn top_main(rest: Vec<OsString>) -> Res<()> {
    let mut t = default_table();
    let mut inclusive = false;
    let Some(files) = files_and_options(rest, TOP_HELP, |args, name, inline| {
        if name == "--inclusive" {
            args::no_value(name, &inline)?;
            inclusive = true;
            return Ok(true);
        }
        parse_table_opt(args, name, inline, &mut t)
    })?
    else {
        return Ok(());
    };
    if files.is_empty() {
        return usage("top needs at least one folded file");
    }
    let profile = folded::load_all(&files)?;
    let text = if inclusive {
        top_functions(&profile, &t)
    } else {
        top_stacks(&profile, &t, files.len())
    };
    emit(|out| out.write_all(text.as_bytes()))
}

fn top_stacks(p: &Profile, t: &Table, nfiles: usize) -> String {
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
    let mut out = format!("{:>w$}  {:>6}  STACK (leaf first)\n", "LIVE", "SHARE");
    let mut shown_bytes = 0u128;
    for ((stack, count), size) in rows[..shown].iter().zip(&sizes) {
        shown_bytes += *count as u128;
        let line = abbreviate_stack(stack, t.room(w + 10));
        out += &format!(
            "{size:>w$}  {:>6}  {line}\n",
            percent(*count as u128, total)
        );
    }
    if shown < rows.len() {
        let rest = total - shown_bytes;
        out += &format!(
            "{:>w$}  {:>6}  ({} more stacks)\n",
            t.size(rest),
            percent(rest, total),
            grouped((rows.len() - shown) as u128)
        );
    }
    let files = if nfiles == 1 {
        String::new()
    } else {
        format!(" from {nfiles} files")
    };
    out += &format!(
        "{:>w$}  {:>6}  total: {} bytes in {} stacks{files}\n",
        t.size(total),
        percent(total, total),
        total,
        grouped(rows.len() as u128),
    );
    out
}

/// Per function: inclusive bytes (stacks containing it, once per stack) and
/// exclusive bytes (stacks whose leaf it is).
fn function_totals(p: &Profile) -> BTreeMap<&str, (u128, u128)> {
    let mut per: BTreeMap<&str, (u128, u128)> = BTreeMap::new();
    let mut seen = HashSet::new();
    for (stack, &count) in &p.stacks {
        seen.clear();
        for frame in stack.split(';') {
            if seen.insert(frame) {
                per.entry(frame).or_default().0 += count as u128;
            }
        }
        per.entry(leaf(stack)).or_default().1 += count as u128;
    }
    per
}

fn leaf(stack: &str) -> &str {
    stack.rsplit(';').next().unwrap_or(stack)
}

fn top_functions(p: &Profile, t: &Table) -> String {
    let total = p.total();
    let mut rows: Vec<(&str, (u128, u128))> = function_totals(p).into_iter().collect();
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

pub fn diff_main(rest: Vec<OsString>) -> Res<()> {
    let mut t = default_table();
    let mut as_folded = false;
    let Some(files) = files_and_options(rest, DIFF_HELP, |args, name, inline| {
        if name == "--folded" {
            args::no_value(name, &inline)?;
            as_folded = true;
            return Ok(true);
        }
        parse_table_opt(args, name, inline, &mut t)
    })?
    else {
        return Ok(());
    };
    let [old_path, new_path] = files.as_slice() else {
        return usage(format!(
            "diff needs two files, OLD and NEW (got {})",
            files.len()
        ));
    };
    let old = folded::load(old_path)?;
    let new = folded::load(new_path)?;
    if as_folded {
        return emit(|out| write_two_column(&old, &new, out));
    }
    let text = diff_report(&old, &new, &t);
    emit(|out| out.write_all(text.as_bytes()))
}

/// `stack OLD NEW` for the union of stacks, sorted by stack.
fn write_two_column(old: &Profile, new: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let mut all: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (s, &c) in &old.stacks {
        all.entry(s).or_default().0 = c;
    }
    for (s, &c) in &new.stacks {
        all.entry(s).or_default().1 = c;
    }
    for (s, (a, b)) in all {
        writeln!(out, "{s} {a} {b}")?;
    }
    Ok(())
}

/// One row of a diff table: the key and its old and new bytes (None = absent).
type DiffRow<'a> = (&'a str, Option<u128>, Option<u128>);

fn diff_rows<'a>(
    old: impl Iterator<Item = (&'a str, u128)>,
    new: impl Iterator<Item = (&'a str, u128)>,
) -> Vec<DiffRow<'a>> {
    let mut all: BTreeMap<&str, (Option<u128>, Option<u128>)> = BTreeMap::new();
    for (k, v) in old {
        all.entry(k).or_default().0 = Some(v);
    }
    for (k, v) in new {
        all.entry(k).or_default().1 = Some(v);
    }
    let mut rows: Vec<DiffRow> = all.into_iter().map(|(k, (a, b))| (k, a, b)).collect();
    rows.sort_by(|x, y| {
        delta(y)
            .unsigned_abs()
            .cmp(&delta(x).unsigned_abs())
            .then(delta(y).cmp(&delta(x)))
            .then(x.0.cmp(y.0))
    });
    rows
}

fn delta(r: &DiffRow) -> i128 {
    r.2.unwrap_or(0) as i128 - r.1.unwrap_or(0) as i128
}

fn diff_report(old: &Profile, new: &Profile, t: &Table) -> String {
    let (to, tn) = (old.total(), new.total());
    let change = tn as i128 - to as i128;
    let rel = if to == 0 {
        String::new()
    } else {
        format!(", {:+.1}%", change as f64 * 100.0 / to as f64)
    };
    let exact = if t.exact {
        String::new()
    } else {
        format!("; {to} -> {tn} bytes")
    };
    let mut out = format!(
        "total: {} -> {} ({}{rel}){exact}\n",
        t.size(to),
        t.size(tn),
        t.signed(change)
    );

    let stacks = diff_rows(
        old.stacks.iter().map(|(s, &c)| (s.as_str(), c as u128)),
        new.stacks.iter().map(|(s, &c)| (s.as_str(), c as u128)),
    );
    out += "\nper stack (leaf first):\n";
    out += &diff_table(&stacks, t, "STACK", true);

    let fo = function_totals(old);
    let fnew = function_totals(new);
    let funcs = diff_rows(
        fo.iter().filter(|v| v.1.1 > 0).map(|(k, v)| (*k, v.1)),
        fnew.iter().filter(|v| v.1.1 > 0).map(|(k, v)| (*k, v.1)),
    );
    out += "\nper function (exclusive: bytes allocated directly in it, the leaf):\n";
    out += &diff_table(&funcs, t, "FUNCTION", false);
    out
}

fn diff_table(rows: &[DiffRow], t: &Table, what: &str, stacks: bool) -> String {
    let changed: Vec<&DiffRow> = rows.iter().filter(|r| delta(r) != 0).collect();
    let unchanged = rows.len() - changed.len();
    if changed.is_empty() {
        return format!("  no change ({unchanged} unchanged)\n");
    }
    let shown = t.shown(changed.len());
    let cell = |v: Option<u128>| v.map_or("-".to_string(), |b| t.size(b));
    let cells: Vec<[String; 3]> = changed[..shown]
        .iter()
        .map(|r| [t.signed(delta(r)), cell(r.1), cell(r.2)])
        .collect();
    let w = cells
        .iter()
        .flatten()
        .map(|c| c.len())
        .chain([10])
        .max()
        .unwrap_or(10);
    let mut out = format!("{:>w$}  {:>w$}  {:>w$}  {what}\n", "CHANGE", "OLD", "NEW");
    for (r, [d, a, b]) in changed[..shown].iter().zip(&cells) {
        let room = t.room(3 * w + 6);
        let name = if stacks {
            abbreviate_stack(r.0, room)
        } else {
            shorten_frame(r.0, room)
        };
        out += &format!("{d:>w$}  {a:>w$}  {b:>w$}  {name}\n");
    }
    let more = changed.len() - shown;
    let notes: Vec<String> = [(more, "more changed"), (unchanged, "unchanged")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !notes.is_empty() {
        out += &format!("{:>w$}  ({})\n", "", notes.join(", "));
    }
    out
}

pub fn merge_main(rest: Vec<OsString>) -> Res<()> {
    let Some(files) = files_and_options(rest, MERGE_HELP, |_, _, _| Ok(false))? else {
        return Ok(());
    };
    if files.is_empty() {
        return usage("merge needs at least one folded file");
    }
    let profile = folded::load_all(&files)?;
    emit(|out| profile.write(out))
}

/// A stack leaf first, `a <- b <- c`, within `width` characters (0 = all
/// of it): long frames lose template and parameter lists, then frames
/// toward the root are dropped and counted.
pub fn abbreviate_stack(stack: &str, width: usize) -> String {
    let frames: Vec<&str> = stack.split(';').rev().collect();
    if width == 0 {
        return frames.join(" <- ");
    }
    let mut out = String::new();
    for (i, frame) in frames.iter().enumerate() {
        let frame = shorten_frame(frame, 60.min(width));
        let sep = if i == 0 { "" } else { " <- " };
        let left = frames.len() - i - 1;
        let tail = if left == 0 {
            0
        } else {
            format!(" <- …{left}").chars().count() + 1
        };
        let have = out.chars().count();
        if i > 0 && have + sep.len() + frame.chars().count() + tail > width {
            out += &format!(" <- …(+{})", frames.len() - i);
            break;
        }
        out += sep;
        out += &frame;
    }
    out
}

/// One frame within `max` characters (0 = unlimited): first template
/// arguments become `<…>`, then a parameter list `(…)`, then the end is cut.
pub fn shorten_frame(frame: &str, max: usize) -> String {
    if max == 0 || frame.chars().count() <= max {
        return frame.to_string();
    }
    let mut s = collapse(frame, '<', '>');
    if s.chars().count() > max {
        s = collapse_params(&s);
    }
    if s.chars().count() > max {
        let keep: String = s.chars().take(max.saturating_sub(1)).collect();
        s = keep + "…";
    }
    s
}

/// Replaces the contents of every outermost `open…close` pair with `…`.
/// `operator<<` and `operator<` are left alone when unbalanced.
fn collapse(s: &str, open: char, close: char) -> String {
    let opens = s.matches(open).count();
    let closes = s.matches(close).count();
    if opens == 0 || opens != closes {
        return s.to_string();
    }
    let mut out = String::new();
    let mut depth = 0;
    for c in s.chars() {
        if c == open {
            if depth == 0 {
                out.push(open);
                out.push('…');
            }
            depth += 1;
        } else if c == close && depth > 0 {
            depth -= 1;
            if depth == 0 {
                out.push(close);
            }
        } else if depth == 0 {
            out.push(c);
        }
    }
    out
}

/// Collapses a C++ parameter list (a `(` right after a name) but keeps a
/// location suffix like ` (a.c:12)`, which follows a space.
fn collapse_params(s: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    let mut prev = ' ';
    for c in s.chars() {
        if c == '(' {
            if depth == 0 && prev != ' ' {
                out.push_str("(…");
                depth = 1;
            } else if depth > 0 {
                depth += 1;
            } else {
                out.push(c);
            }
        } else if c == ')' && depth > 0 {
            depth -= 1;
            if depth == 0 {
                out.push(')');
            }
        } else if depth == 0 {
            out.push(c);
        }
        prev = c;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviations() {
        assert_eq!(abbreviate_stack("main;a;b", 0), "b <- a <- main");
        assert_eq!(abbreviate_stack("main;a;b", 100), "b <- a <- main");
        let long = "_start;main;run;step;handle;parse;alloc_node";
        let s = abbreviate_stack(long, 30);
        assert!(s.starts_with("alloc_node <- parse"), "{s}");
        assert!(s.contains("…(+"), "{s}");
        assert!(s.chars().count() <= 36, "{s}");
        let f = "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int> >, int const&)";
        assert_eq!(
            shorten_frame(f, 90),
            "std::vector<…>::_M_realloc_insert<…>(__gnu_cxx::__normal_iterator<…>, int const&)"
        );
        assert_eq!(
            shorten_frame(f, 50),
            "std::vector<…>::_M_realloc_insert<…>(…)"
        );
        assert_eq!(
            shorten_frame("foo (averyveryverylongfilename.c:12)", 20)
                .chars()
                .count(),
            20
        );
        assert_eq!(collapse_params("foo(int) (a.c:1)"), "foo(…) (a.c:1)");
    }

    #[test]
    fn inclusive_counts_once_per_stack() {
        let p = folded::parse("x", b"main;f;f 10\nmain;g 5\n").unwrap();
        let per = function_totals(&p);
        assert_eq!(per["main"], (15, 0));
        assert_eq!(per["f"], (10, 10));
        assert_eq!(per["g"], (5, 5));
    }
}

//! What the table reports (`top`, `diff`) share: the options of a table,
//! sizes, per-function totals, and how stacks are shortened to fit a
//! terminal line.

use crate::folded::Profile;
use crate::units::{human, human_signed};
use crate::{Res, error};
use std::collections::{BTreeMap, HashSet};
use std::io::{self, Write};

/// The width of a column of `cells`: its widest cell's characters, and at
/// least `at_least`.
pub fn column_width(cells: &[String], at_least: usize) -> usize {
    cells
        .iter()
        .map(|c| c.chars().count())
        .chain([at_least])
        .max()
        .unwrap_or(at_least)
}

/// Options shared by the table reports.
pub struct Table {
    pub rows: usize,
    pub exact: bool,
    pub width: usize,
    /// What the bytes are (from the files' names): the column header.
    pub view: crate::folded::View,
}

impl Table {
    pub fn size(&self, b: u128) -> String {
        if self.exact { b.to_string() } else { human(b) }
    }

    pub fn signed(&self, d: i128) -> String {
        match (self.exact, d) {
            (true, d) if d > 0 => format!("+{d}"),
            (true, d) => d.to_string(),
            (false, d) => human_signed(d),
        }
    }

    /// Room left for the stack after `used` columns.
    pub fn room(&self, used: usize) -> usize {
        if self.width == 0 {
            0
        } else {
            self.width.saturating_sub(used).max(20)
        }
    }

    pub fn shown(&self, len: usize) -> usize {
        if self.rows == 0 {
            len
        } else {
            self.rows.min(len)
        }
    }
}

impl Table {
    pub fn from_args(a: &crate::cli::TableArgs) -> Table {
        Table {
            rows: a.rows,
            exact: a.bytes,
            width: a.width.or_else(terminal_width).unwrap_or(160),
            view: crate::folded::View::Live,
        }
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

/// Writes a report to stdout; a closed pipe (`| head`) ends it quietly.
pub fn emit(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Res<()> {
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

/// Per function: inclusive bytes (stacks containing it, once per stack) and
/// exclusive bytes (stacks whose leaf it is).
pub fn function_totals(p: &Profile) -> BTreeMap<&str, (u128, u128)> {
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

/// `function_totals` with each frame's line dropped (`without_line`): the
/// lines of one function are one row (`top --inclusive`; `--by-line`
/// splits them).
pub fn function_totals_merged(p: &Profile) -> BTreeMap<String, (u128, u128)> {
    let mut per: BTreeMap<String, (u128, u128)> = BTreeMap::new();
    let mut seen = HashSet::new();
    for (stack, &count) in &p.stacks {
        seen.clear();
        for frame in stack.split(';') {
            let f = without_line(frame);
            if seen.insert(f.clone()) {
                per.entry(f.into_owned()).or_default().0 += count as u128;
            }
        }
        per.entry(without_line(leaf(stack)).into_owned())
            .or_default()
            .1 += count as u128;
    }
    per
}

pub fn leaf(stack: &str) -> &str {
    stack.rsplit(';').next().unwrap_or(stack)
}

/// A stack leaf first, `a <- b <- c`, within `width` characters (0 = all
/// of it): long frames are shortened (`shorten_frame`: a frame keeps its
/// `(file:line)`), then the middle of the stack is elided, `…(+N)`: the
/// frames toward the leaf (where the memory was allocated) and the root
/// frames (the request, `{main}`, `main`) stay.
pub fn abbreviate_stack(stack: &str, width: usize) -> String {
    let frames: Vec<&str> = stack.split(';').rev().collect();
    if width == 0 {
        return frames.join(" <- ");
    }
    let short: Vec<String> = frames
        .iter()
        .map(|f| shorten_frame(f, 72.min(width)))
        .collect();
    let len = |v: &[String]| v.iter().map(|f| f.chars().count() + 4).sum::<usize>();
    if len(&short) <= width + 4 {
        return short.join(" <- ");
    }
    // The leaf side gets two thirds of the room, the root side the rest
    // (what the leaf side leaves, at least a frame), the elision between.
    let mark = |n: usize| format!("…(+{n})");
    let mut head = 0;
    let mut used = 0;
    while head < short.len() {
        let w = short[head].chars().count() + 4;
        // At least one real frame after markers such as `[zend_mm]`.
        let markers_only = short[..head].iter().all(|f| f.starts_with('['));
        if head > 0 && !markers_only && used + w > width * 2 / 3 || used + w > width + 4 {
            break;
        }
        used += w;
        head += 1;
    }
    let mut tail = 0;
    while tail + head < short.len() {
        let w = short[short.len() - 1 - tail].chars().count() + 4;
        let hidden = short.len() - head - tail - 1;
        let elide = if hidden > 0 {
            mark(hidden).chars().count() + 4
        } else {
            0
        };
        if used + w + elide > width + 4 {
            break;
        }
        used += w;
        tail += 1;
    }
    let hidden = short.len() - head - tail;
    let mut parts: Vec<String> = short[..head].to_vec();
    if hidden > 0 {
        parts.push(mark(hidden));
    }
    parts.extend_from_slice(&short[short.len() - tail..]);
    parts.join(" <- ")
}

/// A frame's name and what follows it: ` (file:line)`, ` (file:line)
/// [library]`, ` [internal]`; the name alone when none.
fn split_location(frame: &str) -> (&str, &str) {
    let body = frame
        .strip_suffix(" [library]")
        .or_else(|| frame.strip_suffix(" [internal]"))
        .unwrap_or(frame);
    if let Some((name, at)) = body.rsplit_once(" (")
        && at.ends_with(')')
        && at.contains(':')
        && !name.is_empty()
    {
        return (name, &frame[name.len()..]);
    }
    (body, &frame[body.len()..])
}

/// One frame within `max` characters (0 = unlimited), its location
/// (`(file:line)`, `[library]`) kept: first template arguments become
/// `<…>`, then a parameter list `(…)`, then namespaces shorten to their
/// last part (`PhpParser\Parser\Php7` to `…\Php7`), then the middle of the
/// name is cut.
pub fn shorten_frame(frame: &str, max: usize) -> String {
    if max == 0 || frame.chars().count() <= max {
        return frame.to_string();
    }
    let (name, loc) = split_location(frame);
    let room = max.saturating_sub(loc.chars().count()).max(12);
    let fits = |s: &str| s.chars().count() <= room;
    let mut s = collapse(name, '<', '>');
    if !fits(&s) {
        s = collapse_params(&s);
    }
    if !fits(&s) {
        s = short_namespaces(&s);
    }
    if !fits(&s) {
        let chars: Vec<char> = s.chars().collect();
        let keep = room.saturating_sub(1);
        let front = keep / 3;
        let back = keep - front;
        s = chars[..front].iter().collect::<String>()
            + "…"
            + &chars[chars.len() - back..].iter().collect::<String>();
    }
    s + loc
}

/// `A\B\C::m` to `…\C::m`, per `\`-separated name (PHP namespaces).
fn short_namespaces(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split("::").enumerate() {
        if i > 0 {
            out.push_str("::");
        }
        match part.rsplit_once('\\') {
            Some((_, last)) => {
                out.push_str("…\\");
                out.push_str(last);
            }
            None => out.push_str(part),
        }
    }
    out
}

/// A frame with its line dropped, `f (a.php:12)` to `f (a.php)` (its
/// `[library]` mark kept): `top --inclusive` counts per function.
pub fn without_line(frame: &str) -> std::borrow::Cow<'_, str> {
    let (name, loc) = split_location(frame);
    let Some(inner) = loc.strip_prefix(" (") else {
        return frame.into();
    };
    let Some(close) = inner.find(')') else {
        return frame.into();
    };
    let (at, rest) = inner.split_at(close);
    match at.rsplit_once(':') {
        Some((file, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{name} ({file}{rest}").into()
        }
        _ => frame.into(),
    }
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
        // The middle goes: the leaf and the root stay.
        assert!(s.starts_with("alloc_node <- "), "{s}");
        assert!(s.ends_with(" <- _start"), "{s}");
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
        // A frame keeps its location and its name's end.
        assert_eq!(
            shorten_frame("foo (averyveryverylongfilename.c:12)", 20),
            "foo (averyveryverylongfilename.c:12)"
        );
        let php = "PhpParser\\Parser\\Php7::PhpParser\\Parser\\{closure:Php7.php:1290-1302} (Php7.php:1294) [library]";
        assert_eq!(
            shorten_frame(php, 70),
            "…\\Php7::…\\{closure:Php7.php:1290-1302} (Php7.php:1294) [library]"
        );
        let long_name = format!("{} (a.php:7)", "x".repeat(80));
        let s = shorten_frame(&long_name, 40);
        assert!(s.ends_with("x (a.php:7)") && s.contains('…'), "{s}");
        assert!(s.chars().count() <= 40, "{s}");
        assert_eq!(collapse_params("foo(int) (a.c:1)"), "foo(…) (a.c:1)");
    }

    #[test]
    fn inclusive_merges_the_lines_of_a_function() {
        assert_eq!(without_line("f (a.php:12)"), "f (a.php)");
        assert_eq!(
            without_line("f (a.php:12) [library]"),
            "f (a.php) [library]"
        );
        assert_eq!(
            without_line("str_repeat [internal]"),
            "str_repeat [internal]"
        );
        assert_eq!(without_line("main"), "main");
        let p = crate::folded::parse(
            "x",
            b"{main} (i.php:3);f (a.php:2) 10\n{main} (i.php:3);f (a.php:5) 5\n{main} (i.php:4);g (a.php:9) 1\n",
        )
        .unwrap();
        let per = function_totals_merged(&p);
        assert_eq!(per["f (a.php)"], (15, 15));
        assert_eq!(per["{main} (i.php)"], (16, 0));
        assert_eq!(function_totals(&p)["f (a.php:2)"], (10, 10));
    }

    #[test]
    fn inclusive_counts_once_per_stack() {
        let p = crate::folded::parse("x", b"main;f;f 10\nmain;g 5\n").unwrap();
        let per = function_totals(&p);
        assert_eq!(per["main"], (15, 0));
        assert_eq!(per["f"], (10, 10));
        assert_eq!(per["g"], (5, 5));
    }
}

//! What the table reports (`top`, `diff`) share: the options of a table,
//! sizes, per-function totals, and how stacks are shortened to fit a
//! terminal line.

use crate::folded::Profile;
use crate::units::{human, human_signed};
use crate::{Res, error};
use std::collections::{BTreeMap, HashSet};
use std::io::{self, Write};

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

pub fn leaf(stack: &str) -> &str {
    stack.rsplit(';').next().unwrap_or(stack)
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
        let p = crate::folded::parse("x", b"main;f;f 10\nmain;g 5\n").unwrap();
        let per = function_totals(&p);
        assert_eq!(per["main"], (15, 0));
        assert_eq!(per["f"], (10, 10));
        assert_eq!(per["g"], (5, 5));
    }
}

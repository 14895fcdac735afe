//! The output path template (`HEAPLIVE_OUTPUT`): `%p` pid, `%e` program
//! name, `%n` dump number, `%%` a percent sign. The library expands it; the
//! command checks it before passing it on and finds the files it named.

use core::fmt;

/// The library's default output template.
pub const DEFAULT: &str = "heaplive.%e.%p.%n.folded";

/// Why a template is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    Empty,
    TooLong,
    /// `%` followed by this byte (not one of p, e, n, %).
    Unknown(u8),
    /// A `%` at the very end.
    LonePercent,
    /// Ends with `/`: a directory, not a file name.
    Directory,
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match *self {
            Bad::Empty => f.write_str("is empty"),
            Bad::TooLong => f.write_str("is longer than 4096 bytes"),
            Bad::Unknown(b) if b.is_ascii_graphic() => {
                write!(f, "has unknown %{} (use %p, %e, %n or %%)", b as char)
            }
            Bad::Unknown(b) => write!(f, "has unknown %\\x{b:02x} (use %p, %e, %n or %%)"),
            Bad::LonePercent => f.write_str("has a lone % at the end (use %% for a percent sign)"),
            Bad::Directory => f.write_str("needs a file name, not a directory"),
        }
    }
}

/// Checks a template: not empty, at most 4096 bytes, only known `%`
/// sequences, not ending in `/`. Allocation-free.
pub fn check(t: &[u8]) -> Result<(), Bad> {
    if t.is_empty() {
        return Err(Bad::Empty);
    }
    if t.len() > 4096 {
        return Err(Bad::TooLong);
    }
    let mut i = 0;
    while i < t.len() {
        if t[i] == b'%' {
            match t.get(i + 1) {
                Some(b'p' | b'e' | b'n' | b'%') => i += 1,
                Some(&o) => return Err(Bad::Unknown(o)),
                None => return Err(Bad::LonePercent),
            }
        }
        i += 1;
    }
    if t.ends_with(b"/") {
        return Err(Bad::Directory);
    }
    Ok(())
}

/// Expands `%p` (pid), `%e` (program name), `%n` (dump number) and `%%`.
/// Other `%x` sequences are kept as they are.
pub fn expand(template: &str, pid: u32, exe: &str, n: u32) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('p') => out.push_str(&pid.to_string()),
            Some('e') => out.push_str(exe),
            Some('n') => out.push_str(&n.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The `%p`, `%e` and `%n` a piece of a template holds (`%%` is none).
fn codes(piece: &str) -> [bool; 3] {
    let mut have = [false; 3];
    let mut chars = piece.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('p') => have[0] = true,
                Some('e') => have[1] = true,
                Some('n') => have[2] = true,
                _ => {}
            }
        }
    }
    have
}

/// The name a dump of `template` takes in `$TMPDIR` when its own place is
/// refused: its file name, expanded. When a directory of the template
/// holds a `%p`, `%e` or `%n` that the file name does not (so that the file
/// name alone is the same for every dump, process or program:
/// `/var/tmp/%n/live.folded`), the expanded directories that hold one
/// come first, joined by `.` (`1.live.folded`, `2.live.folded`), so that
/// no dump in `$TMPDIR` replaces another.
pub fn fallback_name(template: &str, pid: u32, exe: &str, n: u32) -> String {
    let (dirs, file) = template.rsplit_once('/').unwrap_or(("", template));
    let in_file = codes(file);
    let mut parts: Vec<&str> = dirs
        .split('/')
        .filter(|d| codes(d).iter().any(|&c| c))
        .collect();
    let missing = parts
        .iter()
        .any(|d| codes(d).iter().zip(in_file).any(|(&d, f)| d && !f));
    if !missing {
        parts.clear();
    }
    parts.push(file);
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        out.push_str(&expand(part, pid, exe, n));
    }
    out
}

/// One piece of a file-name template.
#[derive(Debug, PartialEq)]
enum Piece {
    Lit(String),
    /// `%p` or `%n`: one or more digits.
    Digits,
    /// `%e`: any non-empty text.
    Any,
}

fn pieces(name: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        let wild = if c == '%' {
            match chars.next() {
                Some('p' | 'n') => Some(Piece::Digits),
                Some('e') => Some(Piece::Any),
                Some(o) => {
                    lit.push(o);
                    None
                }
                None => None,
            }
        } else {
            None
        };
        match wild {
            Some(w) => {
                if !lit.is_empty() {
                    out.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                out.push(w);
            }
            None if c != '%' => lit.push(c),
            None => {}
        }
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    out
}

/// Whether the pieces match all of `s`: dynamic programming over (piece,
/// position), so many `%e` cost O(pieces x len^2), never exponential time.
fn matches_pieces(p: &[Piece], s: &str) -> bool {
    let len = s.len();
    let width = len + 1;
    // ok[i * width + j]: p[i..] matches s[j..].
    let mut ok = vec![false; (p.len() + 1) * width];
    ok[p.len() * width + len] = true;
    for i in (0..p.len()).rev() {
        for j in 0..=len {
            if !s.is_char_boundary(j) {
                continue;
            }
            let next = |t: usize| ok[(i + 1) * width + t];
            let m = match &p[i] {
                Piece::Lit(l) => s[j..].starts_with(l.as_str()) && next(j + l.len()),
                Piece::Digits => {
                    let n = s[j..].bytes().take_while(u8::is_ascii_digit).count();
                    (1..=n).any(|k| next(j + k))
                }
                Piece::Any => (j + 1..=len).any(|t| s.is_char_boundary(t) && next(t)),
            };
            ok[i * width + j] = m;
        }
    }
    ok[0]
}

/// Does `name` fit the template (a file name, no directories)?
pub fn matches(template_name: &str, name: &str) -> bool {
    matches_pieces(&pieces(template_name), name)
}

const EXTENSIONS: [&str; 5] = [".folded", ".pb.gz", ".pprof.gz", ".pprof", ".pb"];

/// Does a file name fit the template's name, allowing the extension to be
/// the pprof one when the template says `.folded` (or has none)?
pub fn matches_dump_file(template_name: &str, name: &str) -> bool {
    if matches(template_name, name) {
        return true;
    }
    let stem_t = EXTENSIONS
        .iter()
        .find_map(|e| template_name.strip_suffix(e))
        .unwrap_or(template_name);
    let p = pieces(stem_t);
    EXTENSIONS
        .iter()
        .filter_map(|e| name.strip_suffix(e))
        .any(|stem| matches_pieces(&p, stem))
}

/// The pprof file that goes with a folded file name: `.folded` replaced by
/// `.pb.gz`, or `.pb.gz` appended.
pub fn pprof_name(folded: &[u8]) -> Vec<u8> {
    let mut v = folded.strip_suffix(b".folded").unwrap_or(folded).to_vec();
    v.extend_from_slice(b".pb.gz");
    v
}

/// The file of another view that goes with a folded file name: `view`
/// put before `.folded` (`h.1.folded` -> `h.1.alloc.folded`, names that
/// sort together), or `.VIEW.folded` appended.
pub fn view_name(folded: &[u8], view: &str) -> Vec<u8> {
    let mut v = folded.strip_suffix(b".folded").unwrap_or(folded).to_vec();
    v.push(b'.');
    v.extend_from_slice(view.as_bytes());
    v.extend_from_slice(b".folded");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion() {
        assert_eq!(
            expand(DEFAULT, 42, "php-fpm8.2", 3),
            "heaplive.php-fpm8.2.42.3.folded"
        );
        assert_eq!(expand("/x/%%p-%p", 7, "a", 1), "/x/%p-7");
        assert_eq!(expand("a%zb%", 1, "e", 1), "a%zb%");
        assert_eq!(expand("%n%n", 1, "e", 12), "1212");
        assert_eq!(expand("plain", 1, "e", 1), "plain");
    }

    #[test]
    fn many_e_match_in_polynomial_time() {
        // Issue 14 item 13: twelve `%e` took minutes with backtracking.
        let t = "%e.".repeat(12) + "%p.folded";
        let name = "a.".repeat(40) + "x";
        assert!(!matches(&t, &name));
        assert!(matches(&t, &("ab.".repeat(12) + "42.folded")));
        assert!(matches_dump_file(
            &("%e".repeat(30) + ".folded"),
            &("é".repeat(200) + ".pb")
        ));
        assert!(!matches_dump_file(
            &("%e".repeat(30) + ".folded"),
            &("é".repeat(200) + ".txt")
        ));
    }

    #[test]
    fn checking() {
        assert_eq!(check(b"a.%q"), Err(Bad::Unknown(b'q')));
        assert_eq!(check(b"a.%"), Err(Bad::LonePercent));
        assert_eq!(check(b""), Err(Bad::Empty));
        assert_eq!(check(b"/tmp/"), Err(Bad::Directory));
        assert_eq!(check(&[b'a'; 4097]), Err(Bad::TooLong));
        assert_eq!(check(b"/tmp/%e-%%-%p.%n"), Ok(()));
        assert_eq!(check(DEFAULT.as_bytes()), Ok(()));
        assert_eq!(check(b"%\xff"), Err(Bad::Unknown(0xff)));
    }

    #[test]
    fn matching() {
        let t = DEFAULT;
        assert!(matches_dump_file(t, "heaplive.php-fpm8.2.4242.3.folded"));
        assert!(matches_dump_file(t, "heaplive.sh.1.1.pb.gz"));
        assert!(!matches_dump_file(t, "heaplive.sh.x.1.folded"));
        assert!(!matches_dump_file(t, "heaplive.sh.1.1.folded.tmp"));
        assert!(!matches_dump_file(t, "other.sh.1.1.folded"));
        assert!(matches_dump_file("out%%.%p", "out%.12"));
        assert!(matches_dump_file("dump-%p", "dump-12.pb.gz"));
        // What expand writes, matches finds.
        assert!(matches(t, &expand(t, 4242, "a.b-c", 17)));
    }

    #[test]
    fn fallback_names_keep_what_tells_dumps_apart() {
        let f = |t: &str| fallback_name(t, 42, "app", 3);
        assert_eq!(f(DEFAULT), "heaplive.app.42.3.folded");
        assert_eq!(f("/var/tmp/%e/%p.%n.folded"), "app.42.3.folded");
        assert_eq!(f("/var/tmp/%e/%e.%p.%n.folded"), "app.42.3.folded");
        assert_eq!(f("/var/tmp/h.folded"), "h.folded");
        assert_eq!(f("/var/tmp/%n/live.folded"), "3.live.folded");
        assert_eq!(f("/var/tmp/%e/%p/live.%n.folded"), "app.42.live.3.folded");
        assert_eq!(f("/d/%e-x/%%p/y/%p.folded"), "app-x.42.folded");
        assert_eq!(f("/d/%%n/live.folded"), "live.folded");
        assert_eq!(f("%p/live.folded"), "42.live.folded");
    }

    #[test]
    fn pprof_names() {
        assert_eq!(pprof_name(b"/t/h.1.folded"), b"/t/h.1.pb.gz");
        assert_eq!(pprof_name(b"/t/profile"), b"/t/profile.pb.gz");
        assert_eq!(view_name(b"/t/h.1.folded", "alloc"), b"/t/h.1.alloc.folded");
        assert_eq!(view_name(b"/t/profile", "peak"), b"/t/profile.peak.folded");
    }
}

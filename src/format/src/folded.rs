//! The folded format, written by the library and read by the command and
//! the tests: one line per distinct stack, frames root first joined by `;`,
//! a space, live bytes. The file holds no other line (totals and times go
//! to the log), since renderers warn about lines they cannot read.
//!
//! The one escaping rule ([`escape_frame`]): `;` in a frame becomes `:` and
//! line breaks become spaces. Frames may contain spaces (`foo (a.c:12)`,
//! `operator new(unsigned long)`), so a reader takes the count after the
//! LAST space and splits the rest at `;`.

use crate::profile::{Frame, Profile, Sample};
use std::collections::BTreeMap;
use std::io::{self, Write};

// ---------------------------------------------------------------------------
// Writing a profile.

/// A frame's text as written: `;` and line breaks would break the format,
/// so they become `:` and spaces.
pub fn escape_frame(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// The frames of a stack as read back (root first).
pub fn frames(stack: &str) -> impl Iterator<Item = &str> {
    stack.split(';')
}

/// A frame's text, with ` (file:line)` when `lines`, escaped.
pub fn frame_text(f: &Frame, lines: bool) -> String {
    let mut s = String::with_capacity(f.function.len() + 24);
    s.push_str(&f.function);
    if let (true, Some(file), Some(line)) = (lines, &f.file, f.line) {
        let base = file.rsplit('/').next().unwrap_or(file);
        s.push_str(&format!(" ({}:{})", base, line));
    }
    escape_frame(&s)
}

/// The stacks of a profile as folded lines: (stack text, bytes), merged
/// where different addresses symbolize the same, sorted, zeros dropped.
pub fn fold(p: &Profile) -> BTreeMap<String, u64> {
    fold_by(p, |s| s.bytes)
}

/// As [`fold`], with another value of each sample (`alloc_bytes`, the
/// sample count).
pub fn fold_by(p: &Profile, value: impl Fn(&Sample) -> u64) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.samples {
        let v = value(s);
        if v == 0 {
            continue;
        }
        *out.entry(stack_text(p, s)).or_insert(0) += v;
    }
    out
}

/// The folded stack text of a sample (root first, escaped).
pub fn stack_text(p: &Profile, s: &Sample) -> String {
    let mut parts: Vec<String> = Vec::new();
    // Locations are leaf first, frames within one innermost first:
    // reverse both for root first.
    for &li in s.locations.iter().rev() {
        if let Some(loc) = p.locations.get(li) {
            for f in loc.frames.iter().rev() {
                parts.push(frame_text(f, p.lines));
            }
        }
    }
    if parts.is_empty() {
        parts.push("[no stack]".to_string());
    }
    parts.join(";")
}

/// Per folded stack, the samples and variance of the samples whose
/// `bytes` (the view's value) is not 0, merged as [`fold_by`] merges.
pub fn fold_stats(
    p: &Profile,
    bytes: impl Fn(&Sample) -> u64,
    stat: impl Fn(&Sample) -> crate::samples::Stat,
) -> BTreeMap<String, crate::samples::Stat> {
    let mut out: BTreeMap<String, crate::samples::Stat> = BTreeMap::new();
    for s in &p.samples {
        if bytes(s) == 0 {
            continue;
        }
        let st = stat(s);
        match out.entry(stack_text(p, s)) {
            std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().add(st),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(st);
            }
        }
    }
    out
}

pub fn write_folded(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    write_folded_by(p, |s| s.bytes, out)
}

/// Writes the folded lines of another value of each sample.
pub fn write_folded_by(
    p: &Profile,
    value: impl Fn(&Sample) -> u64,
    out: &mut dyn Write,
) -> io::Result<()> {
    for (stack, v) in fold_by(p, value) {
        writeln!(out, "{} {}", stack, v)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Reading, strictly: a profile read half-wrong gives totals that look right
// and are not. Blank lines are skipped; a trailing `\r` is tolerated;
// anything else is an error naming the file and the 1-based line.

/// Live bytes per stack (the `;`-joined frames, root first), sorted by stack.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Stacks {
    pub stacks: BTreeMap<String, u64>,
}

impl Stacks {
    pub fn total(&self) -> u128 {
        self.stacks.values().map(|&c| c as u128).sum()
    }

    /// Adds `other` stack by stack (duplicate stacks are summed).
    pub fn add(&mut self, other: Stacks) {
        for (stack, count) in other.stacks {
            let slot = self.stacks.entry(stack).or_insert(0);
            *slot = slot.saturating_add(count);
        }
    }

    /// Adds `other` stack by stack, or says which stack's sum would pass
    /// `u64::MAX` (a sum is never clamped silently).
    pub fn try_add(&mut self, other: Stacks) -> Result<(), String> {
        for (stack, count) in other.stacks {
            let slot = self.stacks.entry(stack.clone()).or_insert(0);
            match slot.checked_add(count) {
                Some(v) => *slot = v,
                None => return Err(overflow_msg(&stack)),
            }
        }
        Ok(())
    }

    /// Writes the folded text, sorted by stack.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        for (stack, count) in &self.stacks {
            writeln!(out, "{stack} {count}")?;
        }
        Ok(())
    }
}

/// Parses the text of one folded file; `name` is used in error messages.
pub fn parse(name: &str, bytes: &[u8]) -> Result<Stacks, String> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(format!(
            "{name}: gzip data, not a folded file (a pprof profile? \
             heaplive reads the .folded files of HEAPLIVE_FORMAT=folded)"
        ));
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let line = line_of(bytes, e.valid_up_to());
            return Err(format!("{name}:{line}: not UTF-8 text (binary data?)"));
        }
    };
    if let Some(at) = text.find(|c: char| c == '\0' || (c.is_control() && !"\t\r\n".contains(c))) {
        let line = line_of(bytes, at);
        return Err(format!("{name}:{line}: control characters (binary data?)"));
    }

    // A byte-order mark (Windows editors write one) is not part of a frame.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut profile = Stacks::default();
    let mut lines = 0usize;
    let mut two_counts = 0usize;
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let (stack, count) = parse_line(line).map_err(|why| format!("{name}:{}: {why}", i + 1))?;
        lines += 1;
        if ends_with_count(stack) {
            two_counts += 1;
        }
        let slot = profile.stacks.entry(stack.to_string()).or_insert(0);
        *slot = slot
            .checked_add(count)
            .ok_or_else(|| format!("{name}:{}: {}", i + 1, overflow_msg(stack)))?;
    }
    if lines == 0 {
        return Err(format!("{name}: empty (no stacks)"));
    }
    // A frame can end in " 12", but when every line does, this is the
    // `stack OLD NEW` output of `diff --folded` or difffolded.pl.
    if two_counts == lines {
        return Err(format!(
            "{name}: two counts on every line: a differential file (stack OLD NEW)? \
             heaplive reads one count per line"
        ));
    }
    Ok(profile)
}

fn overflow_msg(stack: &str) -> String {
    let shown: String = stack.chars().take(80).collect();
    format!(
        "the bytes of stack '{shown}' add up to more than {} (the largest count a folded file holds)",
        u64::MAX
    )
}

/// Splits one non-blank line into its stack and count.
pub fn parse_line(line: &str) -> Result<(&str, u64), String> {
    let Some(space) = line.rfind(' ') else {
        return Err("no count after the last space".to_string());
    };
    let (stack, count) = (&line[..space], &line[space + 1..]);
    if count.is_empty() {
        return Err("no count after the last space".to_string());
    }
    if let Some(rest) = count.strip_prefix('-')
        && !rest.is_empty()
        && rest.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!("negative count {count}"));
    }
    if !count.bytes().all(|b| b.is_ascii_digit()) {
        let shown: String = count.chars().take(40).collect();
        return Err(format!(
            "count '{shown}' after the last space is not a non-negative integer"
        ));
    }
    let count: u64 = count
        .parse()
        .map_err(|_| format!("count {count} is too large"))?;
    if stack.trim().is_empty() {
        return Err("a count but no stack".to_string());
    }
    Ok((stack, count))
}

fn ends_with_count(stack: &str) -> bool {
    match stack.rsplit_once(' ') {
        Some((_, tail)) => !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes
        .get(..offset.min(bytes.len()))
        .unwrap_or(&[])
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_past_u64_max_are_errors_and_a_bom_is_not_a_frame() {
        let max = u64::MAX;
        let e = parse("f", format!("a;b {max}\na;b 1\n").as_bytes()).unwrap_err();
        assert!(
            e.starts_with("f:2: the bytes of stack 'a;b' add up to more than 18446744073709551615"),
            "{e}"
        );
        let mut one = parse("x", format!("a;b {max}\n").as_bytes()).unwrap();
        let two = parse("y", b"a;b 1\n").unwrap();
        let e = one.try_add(two).unwrap_err();
        assert!(e.contains("'a;b' add up to more than"), "{e}");
        let p = parse("bom", "\u{feff}main;f 10\n".as_bytes()).unwrap();
        assert_eq!(p.stacks.keys().collect::<Vec<_>>(), ["main;f"]);
    }
    use crate::profile::{Location, Sample};

    fn f(name: &str) -> Frame {
        Frame {
            function: name.into(),
            file: Some("/src/a.c".into()),
            line: Some(12),
        }
    }

    /// A location at `address` (no mapping) with `frames`.
    fn location(address: u64, frames: Vec<Frame>) -> Location {
        Location {
            address,
            mapping: None,
            frames: frames.into(),
        }
    }

    /// A sample of `bytes` in `blocks` at `locations`.
    fn sample(locations: Vec<usize>, bytes: u64, blocks: u64) -> Sample {
        Sample {
            locations,
            bytes,
            blocks,
            ..Sample::default()
        }
    }

    #[test]
    fn root_first_inline_expanded_escaped_and_merged() {
        let p = Profile {
            locations: vec![
                location(1, vec![f("inlined"), f("leaf")]),
                location(2, vec![f("main")]),
                location(3, vec![f("weird;name\nx")]),
                location(4, vec![f("leaf")]),
            ],
            samples: vec![
                sample(vec![0, 1], 100, 1),
                sample(vec![2, 1], 5, 1),
                sample(vec![3, 1], 7, 1),
                sample(vec![3, 1], 0, 0),
            ],
            ..Default::default()
        };
        let mut out = Vec::new();
        write_folded(&p, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "main;leaf 7\nmain;leaf;inlined 100\nmain;weird:name x 5\n"
        );
    }

    #[test]
    fn lines_are_appended_with_base_names() {
        assert_eq!(frame_text(&f("g"), true), "g (a.c:12)");
        assert_eq!(frame_text(&f("g"), false), "g");
        let nofile = Frame {
            function: "h".into(),
            file: None,
            line: None,
        };
        assert_eq!(frame_text(&nofile, true), "h");
    }

    #[test]
    fn good_lines() {
        let p = parse(
            "a",
            b"main;foo 10\n\nmain;operator new(unsigned long) 5\r\nmain;foo 2\n",
        )
        .unwrap();
        assert_eq!(p.stacks["main;foo"], 12);
        assert_eq!(p.stacks["main;operator new(unsigned long)"], 5);
        assert_eq!(p.total(), 17);
        let p = parse("a", b"main;bar (a.c:12) 0").unwrap();
        assert_eq!(p.stacks["main;bar (a.c:12)"], 0);
    }

    #[test]
    fn bad_lines() {
        let e = |t: &[u8]| parse("a.folded", t).unwrap_err();
        assert_eq!(
            e(b"x 1\ny 2\nmain;foo\n"),
            "a.folded:3: no count after the last space"
        );
        assert_eq!(
            e(b"main;foo \n"),
            "a.folded:1: no count after the last space"
        );
        assert_eq!(e(b"main;foo -5\n"), "a.folded:1: negative count -5");
        assert!(e(b"main;foo 1.5\n").contains("not a non-negative integer"));
        assert!(e(b"main;foo 99999999999999999999999\n").contains("too large"));
        assert!(e(b" 5\n").contains("no stack"));
        assert_eq!(e(b""), "a.folded: empty (no stacks)");
        assert_eq!(e(b"\n  \n"), "a.folded: empty (no stacks)");
        assert_eq!(
            e(b"main 1\n\xff\xfe\x00"),
            "a.folded:2: not UTF-8 text (binary data?)"
        );
        assert!(e(b"main 1\x00\x01").contains("binary"));
        assert!(e(&[0x1f, 0x8b, 8, 0]).contains("gzip"));
        assert!(e(b"a;b 1 2\nc 3 4\n").contains("differential"));
    }

    #[test]
    fn written_escaped_frames_read_back() {
        let p = Profile {
            locations: vec![location(1, vec![f("a;b\nc"), f("main")])],
            samples: vec![sample(vec![0], 9, 1)],
            lines: true,
            ..Default::default()
        };
        let mut out = Vec::new();
        write_folded(&p, &mut out).unwrap();
        let s = parse("x", &out).unwrap();
        let (stack, &n) = s.stacks.iter().next().unwrap();
        assert_eq!(n, 9);
        assert_eq!(
            frames(stack).collect::<Vec<_>>(),
            ["main (a.c:12)", "a:b c (a.c:12)"]
        );
    }
}

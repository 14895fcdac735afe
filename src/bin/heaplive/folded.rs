//! Reading and writing folded-stack files, strictly.
//!
//! A line is frames root first joined by `;`, a space, and a non-negative
//! integer count of live bytes. Frames may contain spaces (`foo (a.c:12)`,
//! `operator new(unsigned long)`), so the count is what follows the LAST
//! space. Blank lines are skipped; a trailing `\r` is tolerated. Anything
//! else is an error naming the file and the 1-based line, because a profile
//! read half-wrong gives totals that look right and are not.

use crate::units::io_msg;
use crate::{Res, error};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};

/// Live bytes per stack (the `;`-joined frames, root first), sorted by stack.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Profile {
    pub stacks: BTreeMap<String, u64>,
}

impl Profile {
    pub fn total(&self) -> u128 {
        self.stacks.values().map(|&c| c as u128).sum()
    }

    /// Adds `other` stack by stack (duplicate stacks are summed).
    pub fn add(&mut self, other: Profile) {
        for (stack, count) in other.stacks {
            let slot = self.stacks.entry(stack).or_insert(0);
            *slot = slot.saturating_add(count);
        }
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
pub fn parse(name: &str, bytes: &[u8]) -> Result<Profile, String> {
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

    let mut profile = Profile::default();
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
        *slot = slot.saturating_add(count);
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
    bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Reads and parses one file; `-` is standard input.
pub fn load(path: &str) -> Res<Profile> {
    let (name, bytes) = if path == "-" {
        let mut buf = Vec::new();
        if let Err(e) = io::stdin().read_to_end(&mut buf) {
            return error(format!("<stdin>: {}", io_msg(&e)));
        }
        ("<stdin>", buf)
    } else {
        match std::fs::read(path) {
            Ok(b) => (path, b),
            Err(e) => return error(format!("{path}: {}", io_msg(&e))),
        }
    };
    parse(name, &bytes).or_else(error)
}

/// Reads several files and sums them.
pub fn load_all(paths: &[String]) -> Res<Profile> {
    let mut sum = Profile::default();
    for path in paths {
        sum.add(load(path)?);
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

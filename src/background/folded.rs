//! The folded-stacks writer: one line per distinct stack, frames root first
//! joined by `;`, a space, live bytes. Pure; the file stays free of any
//! other line (totals and times go to the log), since renderers warn about
//! lines they cannot read.

use crate::background::profile::{Frame, Profile};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// A frame's text: `;` and line breaks would break the format, so they
/// become `:` and spaces.
pub fn frame_text(f: &Frame, lines: bool) -> String {
    let mut s = String::with_capacity(f.function.len() + 24);
    s.push_str(&f.function);
    if lines && let (Some(file), Some(line)) = (&f.file, f.line) {
        let base = file.rsplit('/').next().unwrap_or(file);
        s.push_str(&format!(" ({}:{})", base, line));
    }
    s.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// The stacks of a profile as folded lines: (stack text, bytes), merged
/// where different addresses symbolize the same, sorted, zeros dropped.
pub fn fold(p: &Profile) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.samples {
        if s.bytes == 0 {
            continue;
        }
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
        *out.entry(parts.join(";")).or_insert(0) += s.bytes;
    }
    out
}

pub fn write_folded(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    for (stack, bytes) in fold(p) {
        writeln!(out, "{} {}", stack, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::profile::{Location, Sample};

    fn f(name: &str) -> Frame {
        Frame {
            function: name.into(),
            file: Some("/src/a.c".into()),
            line: Some(12),
        }
    }

    #[test]
    fn root_first_inline_expanded_escaped_and_merged() {
        let p = Profile {
            locations: vec![
                Location {
                    address: 1,
                    mapping: None,
                    frames: vec![f("inlined"), f("leaf")],
                },
                Location {
                    address: 2,
                    mapping: None,
                    frames: vec![f("main")],
                },
                Location {
                    address: 3,
                    mapping: None,
                    frames: vec![f("weird;name\nx")],
                },
                Location {
                    address: 4,
                    mapping: None,
                    frames: vec![f("leaf")],
                },
            ],
            samples: vec![
                Sample {
                    locations: vec![0, 1],
                    bytes: 100,
                    blocks: 1,
                },
                Sample {
                    locations: vec![2, 1],
                    bytes: 5,
                    blocks: 1,
                },
                Sample {
                    locations: vec![3, 1],
                    bytes: 7,
                    blocks: 1,
                },
                Sample {
                    locations: vec![3, 1],
                    bytes: 0,
                    blocks: 0,
                },
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
}

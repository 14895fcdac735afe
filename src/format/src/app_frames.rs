//! The executable's frames of a native dump, `NAME.app.txt` (the `app`
//! view, `HEAPLIVE_VIEWS=...,app`), read by `heaplive top --app`: a folded
//! file names frames but not the object each is in, so the dump lists the
//! frame texts that come from the main executable (pprof's mapping 0), as
//! they are written in its folded files:
//!
//! ```text
//! # heaplive executable frames 1
//! # executable /usr/local/bin/server
//! handle_request
//! main
//! ```
//!
//! A frame text found in the executable and also in another object (an
//! inline function of a shared header, inlined on both sides) is left out:
//! the file lists only the names that are the executable's alone, so a
//! library's frame is never taken for the application's.

use crate::folded::frame_text;
use crate::profile::Profile;
use std::collections::BTreeSet;

/// The first line of the file (a later version changes it).
pub const HEADER: &str = "# heaplive executable frames 1";

/// The frame texts (escaped as in the folded files) of the locations in
/// the mapping of `exe` (the executable's path), less those that a
/// location of another object (or of none) symbolizes to as well. Empty
/// when no mapping is `exe`'s.
pub fn of_profiles(profiles: &[&Profile], exe: &str) -> BTreeSet<String> {
    let mut ours = BTreeSet::new();
    let mut others = BTreeSet::new();
    for p in profiles {
        let idx = p.mappings.iter().position(|m| m.path == exe);
        for l in &p.locations {
            let set = if idx.is_some() && l.mapping == idx {
                &mut ours
            } else {
                &mut others
            };
            for f in l.frames.iter() {
                set.insert(frame_text(f, p.lines));
            }
        }
    }
    ours.retain(|f| !others.contains(f));
    ours
}

/// The file's text.
pub fn text(exe: &str, frames: &BTreeSet<String>) -> String {
    let mut out = format!("{HEADER}\n# executable {}\n", exe.replace('\n', " "));
    for f in frames {
        out.push_str(f);
        out.push('\n');
    }
    out
}

/// The frames of a file's text (`shown`: its name, for the error); an
/// error when its first line is not [`HEADER`].
pub fn parse(shown: &str, bytes: &[u8]) -> Result<BTreeSet<String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{shown}: not UTF-8 text"))?;
    let mut lines = text.lines().peekable();
    if lines.next() != Some(HEADER) {
        return Err(format!(
            "{shown}: not a file of the executable's frames (its first line is not '{HEADER}')"
        ));
    }
    lines.next_if(|l| l.starts_with("# executable "));
    Ok(lines
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, Location, Mapping};

    fn loc(mapping: Option<usize>, names: &[&str]) -> Location {
        Location {
            address: 0,
            mapping,
            frames: names
                .iter()
                .map(|n| Frame {
                    function: n.to_string(),
                    file: None,
                    line: None,
                })
                .collect::<Vec<_>>()
                .into(),
        }
    }

    #[test]
    fn frames_of_the_executable_alone_round_trip() {
        let map = |path: &str| Mapping {
            start: 0,
            end: 0,
            file_offset: 0,
            path: path.into(),
            build_id: String::new(),
        };
        let p = Profile {
            mappings: vec![map("/usr/lib/libx.so"), map("/srv/app")],
            locations: vec![
                loc(Some(1), &["inline_helper", "make_table"]),
                loc(Some(1), &["main"]),
                loc(Some(0), &["mk_buf", "inline_helper"]),
                loc(None, &["[unknown]"]),
                loc(Some(1), &["a;b"]),
            ],
            samples: vec![],
            sample_interval: 1,
            time_nanos: 0,
            duration_nanos: 0,
            lines: false,
        };
        let f = of_profiles(&[&p], "/srv/app");
        assert_eq!(
            f.iter().map(String::as_str).collect::<Vec<_>>(),
            ["a:b", "main", "make_table"]
        );
        let t = text("/srv/app", &f);
        assert_eq!(
            t,
            "# heaplive executable frames 1\n# executable /srv/app\na:b\nmain\nmake_table\n"
        );
        assert_eq!(parse("x", t.as_bytes()).unwrap(), f);
        assert!(of_profiles(&[&p], "/other").is_empty());
        assert_eq!(
            parse("x", b"main\n").unwrap_err(),
            "x: not a file of the executable's frames (its first line is not '# heaplive executable frames 1')"
        );
    }
}

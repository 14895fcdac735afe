//! The executable's frames of a native dump, `NAME.app.txt` (the `app`
//! view, `HEAPLIVE_VIEWS=...,app`), read by `heaplive top --app`: a folded
//! file names frames but not the object each is in, so the dump lists the
//! frame texts that come from the main executable (pprof's mapping 0), as
//! they are written in its folded files, one a line:
//!
//! ```text
//! # heaplive executable frames 1
//! # executable /usr/local/bin/server
//! handle_request
//! main
//! server+0x1156<TAB>server+0x1140
//! ```
//!
//! A frame of an executable without symbols is its address
//! (`server+0x1156`, a return address): a tab (`<TAB>` above) and the start of the
//! function that holds it (from the unwind tables) follow, so that `top
//! --app` counts a function once, not once per call site.
//!
//! A frame text found in the executable and also in another object (an
//! inline function of a shared header, inlined on both sides) is left out:
//! the file lists only the names that are the executable's alone, so a
//! library's frame is never taken for the application's.

use crate::folded::frame_text;
use crate::profile::Profile;
use std::collections::{BTreeMap, BTreeSet};

/// The first line of the file (a later version changes it).
pub const HEADER: &str = "# heaplive executable frames 1";

/// Per frame text of the executable: the function that holds it when the
/// frame is an address (`exe+0x1156`: `Some("exe+0x1140")`), else None.
pub type Frames = BTreeMap<String, Option<String>>;

/// The frame texts (escaped as in the folded files) of the locations in
/// the mapping of `exe` (the executable's path), less those that a
/// location of another object (or of none) symbolizes to as well. Empty
/// when no mapping is `exe`'s. `function_start` gives the first address
/// of the function holding an address (None: unknown); a frame named by
/// its address (`BASENAME+0xOFFSET`, as the symbolizer names frames
/// without symbols) gets its function's name the same way.
pub fn of_profiles(
    profiles: &[&Profile],
    exe: &str,
    function_start: &dyn Fn(u64) -> Option<u64>,
) -> Frames {
    let base = exe.rsplit('/').next().unwrap_or(exe);
    let mut ours = Frames::new();
    let mut others = BTreeSet::new();
    for p in profiles {
        let idx = p.mappings.iter().position(|m| m.path == exe);
        for l in &p.locations {
            let Some(m) = idx
                .filter(|&i| l.mapping == Some(i))
                .map(|i| &p.mappings[i])
            else {
                for f in l.frames.iter() {
                    others.insert(frame_text(f, p.lines));
                }
                continue;
            };
            let name_at = |a: u64| format!("{base}+0x{:x}", a - m.start + m.file_offset);
            for f in l.frames.iter() {
                let text = frame_text(f, p.lines);
                let in_mapping = (m.start..m.end).contains(&l.address);
                let func = (in_mapping && text == name_at(l.address))
                    .then(|| function_start(l.address))
                    .flatten()
                    .filter(|s| (m.start..=l.address).contains(s))
                    .map(name_at);
                ours.insert(text, func);
            }
        }
    }
    ours.retain(|f, _| !others.contains(f));
    ours
}

/// The file's text.
pub fn text(exe: &str, frames: &Frames) -> String {
    let mut out = format!("{HEADER}\n# executable {}\n", exe.replace('\n', " "));
    for (f, func) in frames {
        out.push_str(f);
        if let Some(func) = func {
            out.push('\t');
            out.push_str(func);
        }
        out.push('\n');
    }
    out
}

/// The frames of a file's text (`shown`: its name, for the error); an
/// error when its first line is not [`HEADER`].
pub fn parse(shown: &str, bytes: &[u8]) -> Result<Frames, String> {
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
        .map(|l| match l.rsplit_once('\t') {
            Some((f, func)) => (f.to_string(), Some(func.to_string())),
            None => (l.to_string(), None),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, Location, Mapping};

    fn loc(address: u64, mapping: Option<usize>, names: &[&str]) -> Location {
        Location {
            address,
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
        let map = |path: &str, start: u64| Mapping {
            start,
            end: start + 0x1000,
            file_offset: 0x1000,
            path: path.into(),
            build_id: String::new(),
        };
        let p = Profile {
            mappings: vec![map("/usr/lib/libx.so", 0x7000), map("/srv/app", 0x5000)],
            locations: vec![
                loc(0x5100, Some(1), &["inline_helper", "make_table"]),
                loc(0x5200, Some(1), &["main"]),
                loc(0x7100, Some(0), &["mk_buf", "inline_helper"]),
                loc(0, None, &["[unknown]"]),
                loc(0x5300, Some(1), &["a;b"]),
                // Unnamed: the function holding it starts at 0x5400.
                loc(0x5456, Some(1), &["app+0x1456"]),
                // Unnamed, no unwind table covers it.
                loc(0x5900, Some(1), &["app+0x1900"]),
            ],
            samples: vec![],
            sample_interval: 1,
            time_nanos: 0,
            duration_nanos: 0,
            lines: false,
        };
        let start = |a: u64| (a == 0x5456 || a == 0x5100).then_some(a & !0xff);
        let f = of_profiles(&[&p], "/srv/app", &start);
        let t = text("/srv/app", &f);
        assert_eq!(
            t,
            "# heaplive executable frames 1\n# executable /srv/app\na:b\napp+0x1456\tapp+0x1400\napp+0x1900\nmain\nmake_table\n"
        );
        assert_eq!(parse("x", t.as_bytes()).unwrap(), f);
        assert!(of_profiles(&[&p], "/other", &start).is_empty());
        assert_eq!(
            parse("x", b"main\n").unwrap_err(),
            "x: not a file of the executable's frames (its first line is not '# heaplive executable frames 1')"
        );
    }
}

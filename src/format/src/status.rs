//! The status file: after every dump the library atomically rewrites
//! `/tmp/heaplive-status/<pid>` with `dumps N`, `last /abs/path` and
//! `signal N` (0: no dump signal); `heaplive dump` reads it to know which
//! signal to send and when the requested dump is done.

use std::path::PathBuf;

/// The directory of status files, shared by every user (mode 1777).
pub const DIR: &str = "/tmp/heaplive-status";

/// The status file of process `pid`.
pub fn path(pid: u32) -> PathBuf {
    PathBuf::from(DIR).join(pid.to_string())
}

/// What a status file says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Dumps written so far.
    pub dumps: u64,
    /// The last file written (absolute path).
    pub last: Option<String>,
    /// The dump signal, 0 when the process has none; None when not given.
    pub signal: Option<i32>,
}

/// The file's text.
pub fn encode(s: &Status) -> String {
    let mut t = format!("dumps {}\n", s.dumps);
    if let Some(last) = &s.last {
        // One line per field: a line break in a path would end the field.
        let last: String = last
            .chars()
            .map(|c| if c == '\n' { '?' } else { c })
            .collect();
        t.push_str(&format!("last {last}\n"));
    }
    if let Some(sig) = s.signal {
        t.push_str(&format!("signal {sig}\n"));
    }
    t
}

/// Reads the text back; unknown lines and bad numbers are ignored.
pub fn decode(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("dumps", n)) => s.dumps = n.trim().parse().unwrap_or(0),
            Some(("last", p)) => s.last = Some(p.to_string()),
            Some(("signal", n)) => s.signal = n.trim().parse().ok(),
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = Status {
            dumps: 3,
            last: Some("/tmp/heaplive.a b.1.3.folded".into()),
            signal: Some(12),
        };
        let text = encode(&s);
        assert_eq!(
            text,
            "dumps 3\nlast /tmp/heaplive.a b.1.3.folded\nsignal 12\n"
        );
        assert_eq!(decode(&text), s);
        assert_eq!(decode("dumps x\nother\n"), Status::default());
        assert_eq!(path(42), PathBuf::from("/tmp/heaplive-status/42"));
    }
}

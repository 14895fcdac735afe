//! The status file: after every dump the library atomically rewrites
//! `/tmp/heaplive-<uid>/<pid>` (uid: the process's effective uid) with
//! `dumps N`, `last /abs/path` and `signal N` (0: no dump signal), and
//! after a signal dump failed `failed N` and `why TEXT` (the last reason);
//! `heaplive dump` reads it to know which signal to send and when the
//! requested dump is done.
//!
//! The directory belongs to one user: created mode 0700, and both sides
//! check before every use that it is a directory (not a symlink) owned by
//! that uid with mode 0700; the reader also checks that the file is a
//! regular file owned by that uid or root and at most [`MAX_SIZE`] bytes.

use std::path::PathBuf;

/// The status directory of user `uid` is this followed by the uid.
pub const DIR_PREFIX: &str = "/tmp/heaplive-";

/// The status directory of user `uid`.
pub fn dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("{DIR_PREFIX}{uid}"))
}

/// When `/tmp/heaplive-<uid>` cannot be trusted (another user planted a
/// file, a symlink or a directory there), the library uses a directory of
/// its own made with `mkdtemp` next to it, `/tmp/heaplive-<uid>.XXXXXX`
/// (the first such one that passes [`check_dir`]), and `heaplive dump`
/// looks in those too: nobody else can make a directory that is owned by
/// `uid`, so a planted name blocks only itself. This is the name's start.
pub fn fallback_prefix(uid: u32) -> String {
    format!("heaplive-{uid}.")
}

/// The status file of process `pid` running as `uid`.
pub fn path(uid: u32, pid: u32) -> PathBuf {
    dir(uid).join(pid.to_string())
}

/// The mode the status directory must have.
pub const DIR_MODE: u32 = 0o700;

/// Largest status file either side reads (a real one is under 4 KiB).
pub const MAX_SIZE: u64 = 16 * 1024;

/// Whether a status directory with this `lstat` data may be used for
/// `uid`: a real directory (not a symlink), owned by `uid`, mode 0700.
/// `Err` says what is wrong, for a warning line.
pub fn check_dir(
    is_dir: bool,
    is_symlink: bool,
    owner: u32,
    mode: u32,
    uid: u32,
) -> Result<(), String> {
    if is_symlink {
        return Err("is a symlink".into());
    }
    if !is_dir {
        return Err("is not a directory".into());
    }
    if owner != uid {
        return Err(format!("belongs to uid {owner}, not {uid}"));
    }
    if mode & 0o7777 != DIR_MODE {
        return Err(format!("has mode {:o}, not {:o}", mode & 0o7777, DIR_MODE));
    }
    Ok(())
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
    /// Signal dumps that failed so far (`heaplive dump` waits on this too).
    pub failed: u64,
    /// Why the last of them failed (one line).
    pub why: Option<String>,
}

/// The file's text.
pub fn encode(s: &Status) -> String {
    // One line per field: a line break in a path or a reason would end the
    // field, so it is written as `instead`.
    let field = |t: &mut String, name: &str, text: &str, instead: char| {
        let text: String = text
            .chars()
            .map(|c| if c == '\n' { instead } else { c })
            .collect();
        t.push_str(&format!("{name} {text}\n"));
    };
    let mut t = format!("dumps {}\n", s.dumps);
    if let Some(last) = &s.last {
        field(&mut t, "last", last, '?');
    }
    if let Some(sig) = s.signal {
        t.push_str(&format!("signal {sig}\n"));
    }
    if s.failed > 0 {
        t.push_str(&format!("failed {}\n", s.failed));
    }
    if let Some(why) = &s.why {
        field(&mut t, "why", why, ' ');
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
            Some(("failed", n)) => s.failed = n.trim().parse().unwrap_or(0),
            Some(("why", w)) => s.why = Some(w.to_string()),
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
            ..Status::default()
        };
        let text = encode(&s);
        assert_eq!(
            text,
            "dumps 3\nlast /tmp/heaplive.a b.1.3.folded\nsignal 12\n"
        );
        assert_eq!(decode(&text), s);
        assert_eq!(decode("dumps x\nother\n"), Status::default());
        let failed = Status {
            failed: 2,
            why: Some("No space left on device".into()),
            ..s.clone()
        };
        let text = encode(&failed);
        assert!(
            text.ends_with("failed 2\nwhy No space left on device\n"),
            "{text}"
        );
        assert_eq!(decode(&text), failed);
        assert_eq!(path(33, 42), PathBuf::from("/tmp/heaplive-33/42"));
        assert!(check_dir(true, false, 33, 0o40700, 33).is_ok());
        assert!(check_dir(true, true, 33, 0o700, 33).is_err());
        assert!(check_dir(true, false, 0, 0o700, 33).is_err());
        assert!(check_dir(true, false, 33, 0o1777, 33).is_err());
        assert!(check_dir(false, false, 33, 0o700, 33).is_err());
    }
}

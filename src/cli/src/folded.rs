//! Reading folded files from disk or standard input, with the contract
//! crate's strict parser.

use crate::units::io_msg;
use crate::{Res, error};
pub use heaplive_format::folded::{Stacks as Profile, parse};
use std::io::{self, Read};

/// The longest line read: a stack of `MAX_FRAMES` (128) locations with
/// long C++ names is well under 1 MiB.
pub const MAX_LINE: usize = 16 << 20;
/// The largest file read: a dump holds one line per distinct stack.
pub const MAX_FILE: u64 = 1 << 30;

/// Reads what `name` names (`-`: standard input) into memory, at most
/// [`MAX_FILE`] bytes in lines of at most [`MAX_LINE`] bytes: a device
/// (`/dev/zero`) or a pipe that never ends is one error line, not a
/// process that grows until it is out of memory.
pub fn read_input(name: &str) -> Res<Vec<u8>> {
    let mut input: Box<dyn Read> = if name == "-" {
        Box::new(io::stdin().lock())
    } else {
        match std::fs::File::open(name) {
            Ok(f) => {
                // A regular file's size is known: refused before reading.
                if f.metadata()
                    .is_ok_and(|m| m.is_file() && m.len() > MAX_FILE)
                {
                    return error(too_large(name));
                }
                Box::new(f)
            }
            Err(e) => return error(format!("{name}: {}", io_msg(&e))),
        }
    };
    read_bounded(
        if name == "-" { "<stdin>" } else { name },
        &mut *input,
        true,
    )
}

/// A file heaplive found rather than was given (a dump's companion view):
/// read only when it is a regular file, opened without blocking (a FIFO
/// planted there is not waited on), bounded as [`read_input`].
pub fn read_regular(path: &str) -> Option<Vec<u8>> {
    read_regular_as(path, true)
}

/// [`read_regular`] for a file that is not folded text (a samples file,
/// version 2): binary data is not refused at its first bytes.
pub fn read_regular_text(path: &str) -> Option<Vec<u8>> {
    read_regular_as(path, false)
}

fn read_regular_as(path: &str, folded: bool) -> Option<Vec<u8>> {
    let mut f = heaplive_format::regular::open_regular(path)?;
    read_bounded(path, &mut f, folded).ok()
}

fn too_large(shown: &str) -> String {
    format!(
        "{shown}: larger than {} GiB: not a dump (files of at most {} GiB are read)",
        MAX_FILE >> 30,
        MAX_FILE >> 30
    )
}

fn read_bounded(shown: &str, input: &mut dyn Read, folded: bool) -> Res<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let (mut line, mut line_len) = (1u64, 0usize);
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return error(format!("{shown}: {}", io_msg(&e))),
        };
        for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
            line_len += piece.len();
            if line_len > MAX_LINE {
                return error(format!(
                    "{shown}:{line}: a line longer than {} MiB: not a folded file (lines of at most {} MiB are read)",
                    MAX_LINE >> 20,
                    MAX_LINE >> 20
                ));
            }
            if piece.last() == Some(&b'\n') {
                line += 1;
                line_len = 0;
            }
        }
        if buf.len() as u64 + n as u64 > MAX_FILE {
            return error(too_large(shown));
        }
        let first = buf.is_empty();
        buf.extend_from_slice(&chunk[..n]);
        if first && folded {
            refuse_early(shown, &buf)?;
        }
    }
}

/// Binary data (`/dev/urandom`, an executable, a pprof file) is refused at
/// its first bytes rather than after a gigabyte: the parser's verdict on
/// the first complete lines, when it is about a line (not about the whole
/// file, like "empty").
fn refuse_early(shown: &str, head: &[u8]) -> Res<()> {
    let complete = head
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(&head[..0], |i| &head[..=i]);
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    if complete.is_empty() && !gzip {
        return Ok(());
    }
    match parse(shown, if gzip { head } else { complete }) {
        Err(e)
            if gzip
                || e.strip_prefix(shown)
                    .and_then(|r| r.strip_prefix(':'))
                    .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())) =>
        {
            error(e)
        }
        _ => Ok(()),
    }
}

/// Reads and parses one file; `-` is standard input.
pub fn load(path: &str) -> Res<Profile> {
    let bytes = read_input(path)?;
    let name = if path == "-" { "<stdin>" } else { path };
    parse(name, &bytes).or_else(error)
}

/// The files that the arguments name: a directory stands for its dumps,
/// the `*.folded` files in it (sorted by name), less hidden ones (a dump
/// being written), the companion views `NAME.alloc.folded`, `NAME.temporary.folded`,
/// `NAME.samples.folded`, `NAME.peak.folded` and the variance files
/// `*.variance.folded`, and empty files: the dump
/// of a process that never sampled (nothing live to add).
pub fn expand(paths: &[String]) -> Res<Vec<String>> {
    expand_by(paths, false)
}

/// As `expand`, but a directory stands for its PHP request-peak dumps
/// (`NAME.request.folded`) when it has any (`top --endpoints`).
pub fn expand_requests(paths: &[String]) -> Res<Vec<String>> {
    expand_by(paths, true)
}

/// A PHP request-peak dump's name (`NAME.request.folded`).
pub fn is_request_peak_name(n: &str) -> bool {
    n.ends_with(".request.folded")
}

fn expand_by(paths: &[String], requests: bool) -> Res<Vec<String>> {
    let mut out = Vec::new();
    for p in paths {
        if p == "-" || !std::path::Path::new(p).is_dir() {
            out.push(p.clone());
            continue;
        }
        let rd = match std::fs::read_dir(p) {
            Ok(rd) => rd,
            Err(e) => return error(format!("{p}: {}", io_msg(&e))),
        };
        let dumps: Vec<(String, u64)> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| {
                let len = e.metadata().map_or(0, |m| m.len());
                e.file_name().to_str().map(|n| (n.to_string(), len))
            })
            .filter(|(n, _)| is_dump_name(n))
            .collect();
        let (peaks, others): (Vec<_>, Vec<_>) = dumps
            .into_iter()
            .partition(|(n, _)| is_request_peak_name(n));
        // `top --endpoints`: the request-peak dumps alone, when there are.
        let dumps = if requests && !peaks.is_empty() {
            peaks
        } else {
            let mut all = others;
            all.extend(peaks);
            all
        };
        if dumps.is_empty() {
            return error(format!("{p}: no .folded files in this directory"));
        }
        let mut files: Vec<String> = dumps
            .iter()
            .filter(|(_, len)| *len > 0)
            .map(|(n, _)| std::path::Path::new(p).join(n).display().to_string())
            .collect();
        if files.is_empty() {
            return error(format!(
                "{p}: every dump in this directory is empty (no stacks: the processes never sampled)"
            ));
        }
        files.sort();
        out.extend(files);
    }
    Ok(out)
}

/// A dump's own file name (not a companion view, not a temporary file).
pub fn is_dump_name(n: &str) -> bool {
    n.ends_with(".folded")
        && !n.starts_with('.')
        && ![
            ".alloc.folded",
            ".samples.folded",
            ".peak.folded",
            ".temporary.folded",
            ".variance.folded",
        ]
        .iter()
        .any(|v| n.ends_with(v))
}

/// What a file's counts are, from its name: the live heap (`NAME.folded`),
/// the bytes allocated since start (`NAME.alloc.folded`), the live heap at
/// the peak (`NAME.peak.folded`); `Mixed` for files of several views
/// summed, `Unknown` for standard input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Live,
    Alloc,
    Peak,
    Mixed,
}

impl View {
    /// The view of one file.
    pub fn of_file(path: &str) -> View {
        let base = path.strip_suffix(".folded").unwrap_or(path);
        if base.ends_with(".alloc") {
            View::Alloc
        } else if base.ends_with(".peak") {
            View::Peak
        } else {
            View::Live
        }
    }

    /// The view of files summed: theirs when they agree.
    pub fn of(paths: &[String]) -> View {
        let mut views = paths.iter().map(|p| View::of_file(p));
        let first = views.next().unwrap_or(View::Live);
        if views.all(|v| v == first) {
            first
        } else {
            View::Mixed
        }
    }

    /// The column header of a table of bytes (`top`, `diff`).
    pub fn column(self) -> &'static str {
        match self {
            View::Live => "LIVE",
            View::Alloc => "ALLOCATED",
            View::Peak => "PEAK",
            View::Mixed => "BYTES",
        }
    }

    /// The start of a flame graph's title.
    pub fn title(self) -> &'static str {
        match self {
            View::Live => "Live heap",
            View::Alloc => "Allocated bytes",
            View::Peak => "Live heap at the peak",
            View::Mixed => "Heap bytes",
        }
    }

    /// What the counts are, for a flame graph's subtitle.
    pub fn counts(self) -> &'static str {
        match self {
            View::Live => "live bytes",
            View::Alloc => "bytes allocated",
            View::Peak => "live bytes at the peak",
            View::Mixed => "bytes",
        }
    }
}

/// Reads several files (a directory: its dumps) and sums them.
pub fn load_all(paths: &[String]) -> Res<Profile> {
    let paths = expand(paths)?;
    let mut sum = Profile::default();
    for path in &paths {
        sum.try_add(load(path)?).or_else(error)?;
    }
    Ok(sum)
}

//! Reading folded files from disk or standard input, with the contract
//! crate's strict parser.

use crate::units::io_msg;
use crate::{Res, error};
pub use heaplive_format::folded::{Stacks as Profile, parse};
use std::io::{self, Read};

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

/// The files that the arguments name: a directory stands for its dumps,
/// the `*.folded` files in it (sorted by name), less hidden ones (a dump
/// being written), the companion views `NAME.alloc.folded`,
/// `NAME.samples.folded`, `NAME.peak.folded` and the variance files
/// `*.variance.folded`, and empty files: the dump
/// of a process that never sampled (nothing live to add).
pub fn expand(paths: &[String]) -> Res<Vec<String>> {
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
            ".variance.folded",
        ]
        .iter()
        .any(|v| n.ends_with(v))
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

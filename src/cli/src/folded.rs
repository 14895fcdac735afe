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

/// Reads several files and sums them.
pub fn load_all(paths: &[String]) -> Res<Profile> {
    let mut sum = Profile::default();
    for path in paths {
        sum.try_add(load(path)?).or_else(error)?;
    }
    Ok(sum)
}

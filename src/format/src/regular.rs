//! How the library (the symbolizer's debug files) and the command (the
//! dumps it reads) open a file they read: only a regular file, and without
//! waiting. `O_NONBLOCK`, so that a FIFO planted where a file is looked
//! for never waits for a writer, `O_NOCTTY` for a terminal, then fstat.
//! Links are followed (build-id trees are links).

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `path` opened for reading if it is a regular file; None otherwise, or
/// when it cannot be opened.
pub fn open_regular(path: impl AsRef<Path>) -> Option<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    Some(file)
}

//! heaplive-format: the one contract between the preload library
//! (`libheaplive.so`), the `heaplive` command and the tests.
//!
//! | module | owns |
//! |---|---|
//! | [`settings`] | the table of `HEAPLIVE_*` variables: name, default, grammar, doc |
//! | [`grammar`] | the value grammars: sizes, durations, booleans, formats |
//! | [`signal`] | signal names and the one policy of which dump signals are refused |
//! | [`template`] | the output path template: check, expand, match |
//! | [`status`] | the status file `heaplive dump` reads: path, encode, decode |
//! | [`folded`] | the folded format: write, parse, the frame escaping rule |
//! | [`samples`] | the samples file (version 2): samples and variance per view and stack |
//! | [`stats`] | intervals of sampled estimates |
//! | [`units`] | byte formatting for people |
//! | [`app_frames`] | a native dump's executable frames, `NAME.app.txt` (`top --app`) |
//! | [`php_frames`] | PHP mode's frames as text: which are PHP's, the application's; the fold of `top --php` |
//! | [`profile`], [`pprof`] | the profile a dump builds, and its pprof writer |
//! | [`safe_path`] | how the library and the command reach a file they write: no link or directory another user could have planted |
//! | [`regular`] | how the library and the command open a file they read: a regular file only, never waiting on a FIFO |
//!
//! Pure: no global state, no I/O besides the writers' `Write`, except
//! [`safe_path`] (system calls on stack buffers, shared so that the library
//! and the command refuse the same paths) and [`regular`] (an open and an
//! fstat, for the same reason). The library
//! calls the grammar functions before malloc works, so those take `&[u8]`,
//! return plain values or `&'static str` reasons, never allocate and never
//! panic on any input (the library is built with panic=abort).

pub mod app_frames;
pub mod folded;
pub mod grammar;
pub mod php_frames;
pub mod pprof;
pub mod profile;
pub mod regular;
pub mod safe_path;
pub mod samples;
pub mod settings;
pub mod signal;
pub mod stats;
pub mod status;
pub mod template;
pub mod units;

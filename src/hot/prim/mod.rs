//! The primitives of `hot/`: what every other part of the library builds
//! on, each usable from any thread, inside malloc or a signal handler
//! (see each file for what is async-signal-safe). Re-exported by
//! `hot/mod.rs` as `crate::hot::<name>`.

pub mod arena;
pub mod elf;
pub mod guard;
pub mod lock;
pub mod log;
pub mod ownheap;
pub mod sys;

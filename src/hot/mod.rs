//! `hot/`: the code that runs inside malloc, free, an exported function or
//! a signal handler, on any thread of the program (src/README.md, "hot/",
//! states what it may do). This file is its front door: what `interpose/`,
//! `background/` and `symbolize/` may name is listed here, by group, and
//! every other layer reaches `hot` as `crate::hot::<name>`.
//!
//! - The boundary between interposition and recording: [`api`] (what each
//!   export does around its real call; also reachable as `track`, its
//!   name before), and the real functions behind it ([`real`]).
//! - Primitives, in `prim/`: system calls ([`sys`]), the ranked lock
//!   ([`lock`]), the re-entrancy guard and per-thread state ([`guard`]),
//!   one-line messages ([`log`]), heaplive's own heap ([`ownheap`]) and
//!   bump arena ([`arena`]), ELF dynamic sections and GNU hash lookup
//!   ([`elf`]).
//! - Tables, in `tables/`: live samples ([`live`]), stacks ([`stacks`]),
//!   the shadow bitmap that filters frees ([`shadow`]), pseudo-frame names
//!   ([`names`]), the peak of the live total ([`peak`]).
//! - The rest, one job each: settings ([`config`]), sampling
//!   ([`sampler`]), stack capture ([`unwind`]), the dump signal
//!   ([`signal`]), dump requests and heaplive's thread ([`trigger`],
//!   [`threads`], [`services`]), fork ([`forking`]), attach ([`attach`]),
//!   PHP ([`php`]), the timeline ([`timeline`]), the leak check ([`leak_check`]), poison fills
//!   ([`poison`]), the pid cache ([`pid`]), another allocator first
//!   ([`winner`]).

mod prim;
mod tables;

pub mod api;
pub mod attach;
pub mod config;
pub mod forking;
pub mod leak_check;
pub mod php;
pub mod pid;
pub mod poison;
pub mod real;
pub mod sampler;
pub mod services;
pub mod signal;
pub mod threads;
pub mod timeline;
pub mod trigger;
pub mod unwind;
pub mod winner;

pub use api as track;
pub use prim::{arena, elf, guard, lock, log, ownheap, sys};
pub use tables::{live, names, peak, shadow, stacks};

pub mod attach;
pub mod dir;
pub mod dump;
pub mod dump_files;
pub mod dump_steps;
pub mod dumper;
pub mod fork;
pub mod leak_report;
pub mod output;
pub mod php;
pub mod rss;
pub mod run_report;
pub mod runtime_pools;
pub mod timeline;

// The pure writers and the profile they take live in the contract crate
// (src/format), shared with the command and the tests.
pub use heaplive_format::{folded, pprof, profile};

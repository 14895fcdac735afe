pub mod dumper;
pub mod folded;
pub mod fork;
pub mod output;
pub mod pprof;
pub mod profile;

pub mod dump;
pub mod dumper;
pub mod folded;
pub mod fork;
pub mod leak_report;
pub mod output;
pub mod pprof;
pub mod profile;

//! The plain data a dump hands to the writers (`folded.rs`, `pprof.rs`).
//!
//! A dump snapshots the live table, groups samples by stack, symbolizes each
//! distinct return address once and fills a [`Profile`]. Writers are pure:
//! `write(&Profile, &mut impl Write)`. Nothing here runs on an allocation path.

use std::sync::Arc;

/// One source-level frame. An inlined call gives several `Frame`s for one
/// address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name, or `module+0x1234`, `[jit]`, `[unknown]`.
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// One machine address (a return address minus one) and what it symbolized to.
#[derive(Clone, Debug, Default)]
pub struct Location {
    pub address: u64,
    /// Index into [`Profile::mappings`].
    pub mapping: Option<usize>,
    /// Innermost (the inlined callee) first, the real function last.
    /// Shared: the library's symbolizer keeps each address's answer for
    /// later dumps, and a dump's profile points at the same frames instead
    /// of copying their names (a profile of a large C++ program holds tens
    /// of thousands of locations).
    pub frames: Arc<[Frame]>,
}

/// A loaded (or since unloaded) module: an executable mapping of one file.
#[derive(Clone, Debug, Default)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub path: String,
    /// Lower-case hex, empty when the file has no build id.
    pub build_id: String,
}

/// Live memory held by one distinct stack.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// Indexes into [`Profile::locations`], leaf (the allocation's caller) first.
    pub locations: Vec<usize>,
    /// Un-biased estimate of live bytes (exact in exact mode).
    pub bytes: u64,
    /// Un-biased estimate of live blocks.
    pub blocks: u64,
    /// Un-biased estimate of bytes allocated by this stack since start
    /// (freed or not; exact in exact mode).
    pub alloc_bytes: u64,
    /// Un-biased estimate of blocks allocated since start.
    pub alloc_blocks: u64,
    /// The number of live samples behind `bytes` (error bars).
    pub samples: u64,
    /// The estimated variance of `bytes` (bytes squared; 0 when exact:
    /// exact mode, or blocks sampled with certainty): the sum over its
    /// samples of `s^2 (1 - p) / p^2` (see `stats`).
    pub variance: f64,
    /// The estimated variance of `alloc_bytes`, the same way.
    pub alloc_variance: f64,
    /// The temporary view: un-biased bytes of this stack's sampled blocks
    /// freed within 1 ms, within 1 s, and later, and (overlapping those)
    /// of the temporary ones: freed before their thread's next
    /// allocation (zero without the view).
    pub freed: [u64; 4],
    /// Un-biased blocks of the same, class by class.
    pub freed_blocks: [u64; 4],
    /// Their estimated variances, the same way.
    pub freed_variance: [f64; 4],
    /// The live samples behind `bytes` by size class (`samples::size_class`,
    /// smallest first): the class, the samples and their estimated bytes.
    /// Empty when not counted (the samples file's size rows only).
    pub sizes: Vec<(u64, u64, f64)>,
}

#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub mappings: Vec<Mapping>,
    pub locations: Vec<Location>,
    pub samples: Vec<Sample>,
    /// Mean bytes between samples (`HEAPLIVE_SAMPLE_INTERVAL`); 1 in exact mode.
    pub sample_interval: u64,
    /// Wall-clock time of the snapshot, nanoseconds since the Unix epoch.
    pub time_nanos: i64,
    /// Time since the process started profiling, nanoseconds.
    pub duration_nanos: i64,
    /// Whether frames carry ` (file:line)` in text output (`HEAPLIVE_LINES`).
    pub lines: bool,
}

impl Profile {
    pub fn total_bytes(&self) -> u64 {
        self.samples.iter().map(|s| s.bytes).sum()
    }
    pub fn total_alloc_bytes(&self) -> u64 {
        self.samples.iter().map(|s| s.alloc_bytes).sum()
    }
}

//! The pprof writer: a [`Profile`] as a gzip'd `perftools.profiles.Profile`
//! protobuf (`profile.proto` of github.com/google/pprof), for `go tool pprof`
//! and continuous-profiling back ends.
//!
//! Four sample types, as Go's heap profiles: `alloc_objects/count`,
//! `alloc_space/bytes`, `inuse_objects/count` and `inuse_space/bytes` (the
//! default), and two siblings for error bars: `alloc_space_variance` and
//! `inuse_space_variance` (unit `bytes_squared`), the estimated variance of
//! the space values (0 when exact). Variances add up as pprof adds samples
//! (per function, per node), so the interval of any node's value follows
//! from the two (`stats::interval95`). The period is `space/bytes`, the
//! sample interval. The protobuf is
//! encoded by hand: only varints and length-delimited fields are needed.
//!
//! Top-level fields of a protobuf message may come in any order and repeated
//! ones simply concatenate, so the message is streamed into the gzip encoder
//! one sample, location or function at a time; the string table goes last,
//! once every string has been interned.
//!
//! Never panics: bad indexes in the [`Profile`] are dropped (a location index)
//! or ignored (a mapping index), and counts past `i64::MAX` saturate.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::profile::{Frame, Profile};

// Field numbers of profile.proto, named `MESSAGE_FIELD` after the proto names.
const PROFILE_SAMPLE_TYPE: u32 = 1;
const PROFILE_SAMPLE: u32 = 2;
const PROFILE_MAPPING: u32 = 3;
const PROFILE_LOCATION: u32 = 4;
const PROFILE_FUNCTION: u32 = 5;
const PROFILE_STRING_TABLE: u32 = 6;
const PROFILE_TIME_NANOS: u32 = 9;
const PROFILE_DURATION_NANOS: u32 = 10;
const PROFILE_PERIOD_TYPE: u32 = 11;
const PROFILE_PERIOD: u32 = 12;
const PROFILE_DEFAULT_SAMPLE_TYPE: u32 = 14;

const VALUE_TYPE_TYPE: u32 = 1;
const VALUE_TYPE_UNIT: u32 = 2;

const SAMPLE_LOCATION_ID: u32 = 1;
const SAMPLE_VALUE: u32 = 2;

const MAPPING_ID: u32 = 1;
const MAPPING_MEMORY_START: u32 = 2;
const MAPPING_MEMORY_LIMIT: u32 = 3;
const MAPPING_FILE_OFFSET: u32 = 4;
const MAPPING_FILENAME: u32 = 5;
const MAPPING_BUILD_ID: u32 = 6;
const MAPPING_HAS_FUNCTIONS: u32 = 7;
const MAPPING_HAS_FILENAMES: u32 = 8;
const MAPPING_HAS_LINE_NUMBERS: u32 = 9;
const MAPPING_HAS_INLINE_FRAMES: u32 = 10;

const LOCATION_ID: u32 = 1;
const LOCATION_MAPPING_ID: u32 = 2;
const LOCATION_ADDRESS: u32 = 3;
const LOCATION_LINE: u32 = 4;

const LINE_FUNCTION_ID: u32 = 1;
const LINE_LINE: u32 = 2;

const FUNCTION_ID: u32 = 1;
const FUNCTION_NAME: u32 = 2;
const FUNCTION_SYSTEM_NAME: u32 = 3;
const FUNCTION_FILENAME: u32 = 4;

const WIRE_VARINT: u64 = 0;
const WIRE_LEN: u64 = 2;

/// Encoded top-level fields are handed to the gzip encoder in chunks this big.
const FLUSH_BYTES: usize = 64 * 1024;

/// The sample types, in the order of each sample's values (Go's heap
/// profiles have the same four; the default is `inuse_space`).
/// The last four: the temporary view (`HEAPLIVE_VIEWS=temporary`; zero
/// without it), un-biased bytes of the sampled blocks freed within 1 ms,
/// within 1 s, and later, and of the temporary ones (freed before their
/// thread's next allocation, heaptrack's "temporary"; these are also in
/// one of the three before).
pub const SAMPLE_TYPES: [(&str, &str); 10] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
    ("alloc_space_variance", "bytes_squared"),
    ("inuse_space_variance", "bytes_squared"),
    ("freed_1ms_space", "bytes"),
    ("freed_1s_space", "bytes"),
    ("freed_later_space", "bytes"),
    ("temporary_space", "bytes"),
];

/// Writes `p` as a gzip'd pprof protobuf. Ids are 1-based positions: mapping
/// `i` of `p` is mapping id `i + 1`, location `i` is location id `i + 1`.
/// pprof takes the first mapping for the main binary.
///
/// # Errors
///
/// Only those of `out`; a failed write leaves a truncated file behind.
pub fn write_pprof(p: &Profile, out: &mut impl Write) -> io::Result<()> {
    let mut gz = GzEncoder::new(out, Compression::default());
    let mut pb = Encoder::default();
    let mut strings = Strings::default();

    for (typ, unit) in SAMPLE_TYPES {
        let (typ, unit) = (strings.index(typ), strings.index(unit));
        pb.message(PROFILE_SAMPLE_TYPE, |m| {
            m.int64(VALUE_TYPE_TYPE, typ);
            m.int64(VALUE_TYPE_UNIT, unit);
        });
    }

    for s in &p.samples {
        // pprof rejects a sample naming a location that does not exist.
        let ids = s
            .locations
            .iter()
            .filter(|&&i| i < p.locations.len())
            .map(|&i| id(i));
        // An int64 is encoded as the varint of its two's complement.
        // A variance past u64 saturates with the `as` conversion, then to
        // i64::MAX.
        let values = [
            s.alloc_blocks,
            s.alloc_bytes,
            s.blocks,
            s.bytes,
            s.alloc_variance.round() as u64,
            s.variance.round() as u64,
            s.freed[0],
            s.freed[1],
            s.freed[2],
            s.freed[3],
        ]
        .map(|v| saturate(v) as u64);
        pb.message(PROFILE_SAMPLE, |m| {
            m.packed(SAMPLE_LOCATION_ID, ids);
            m.packed(SAMPLE_VALUE, values);
        });
        pb.flush_if_big(&mut gz)?;
    }

    let known = Known::per_mapping(p);
    for ((i, map), known) in p.mappings.iter().enumerate().zip(known) {
        let (filename, build_id) = (strings.index(&map.path), strings.index(&map.build_id));
        pb.message(PROFILE_MAPPING, |m| {
            m.uint64(MAPPING_ID, id(i));
            m.uint64(MAPPING_MEMORY_START, map.start);
            m.uint64(MAPPING_MEMORY_LIMIT, map.end);
            m.uint64(MAPPING_FILE_OFFSET, map.file_offset);
            m.int64(MAPPING_FILENAME, filename);
            m.int64(MAPPING_BUILD_ID, build_id);
            m.bool(MAPPING_HAS_FUNCTIONS, known.functions);
            m.bool(MAPPING_HAS_FILENAMES, known.filenames);
            m.bool(MAPPING_HAS_LINE_NUMBERS, known.line_numbers);
            m.bool(MAPPING_HAS_INLINE_FRAMES, known.inline_frames);
        });
        pb.flush_if_big(&mut gz)?;
    }

    // Functions are deduplicated by (name, file); ids are 1-based positions.
    let mut functions: Vec<&Frame> = Vec::new();
    let mut function_ids: HashMap<(&str, Option<&str>), u64> = HashMap::new();
    for (i, loc) in p.locations.iter().enumerate() {
        let mapping_id = loc.mapping.filter(|&m| m < p.mappings.len()).map_or(0, id);
        pb.message(PROFILE_LOCATION, |m| {
            m.uint64(LOCATION_ID, id(i));
            m.uint64(LOCATION_MAPPING_ID, mapping_id);
            m.uint64(LOCATION_ADDRESS, loc.address);
            // Both orders agree: innermost first, the caller last.
            for frame in loc.frames.iter() {
                let key = (frame.function.as_str(), frame.file.as_deref());
                let function_id = *function_ids.entry(key).or_insert_with(|| {
                    functions.push(frame);
                    id(functions.len() - 1)
                });
                m.message(LOCATION_LINE, |l| {
                    l.uint64(LINE_FUNCTION_ID, function_id);
                    l.int64(LINE_LINE, frame.line.map_or(0, i64::from));
                });
            }
        });
        pb.flush_if_big(&mut gz)?;
    }

    for (i, f) in functions.iter().enumerate() {
        let name = strings.index(&f.function);
        let filename = strings.index(f.file.as_deref().unwrap_or(""));
        pb.message(PROFILE_FUNCTION, |m| {
            m.uint64(FUNCTION_ID, id(i));
            m.int64(FUNCTION_NAME, name);
            m.int64(FUNCTION_SYSTEM_NAME, name);
            m.int64(FUNCTION_FILENAME, filename);
        });
        pb.flush_if_big(&mut gz)?;
    }

    pb.int64(PROFILE_TIME_NANOS, p.time_nanos);
    pb.int64(PROFILE_DURATION_NANOS, p.duration_nanos);
    let (space, bytes) = (strings.index("space"), strings.index("bytes"));
    pb.message(PROFILE_PERIOD_TYPE, |m| {
        m.int64(VALUE_TYPE_TYPE, space);
        m.int64(VALUE_TYPE_UNIT, bytes);
    });
    pb.int64(PROFILE_PERIOD, saturate(p.sample_interval));
    pb.int64(PROFILE_DEFAULT_SAMPLE_TYPE, strings.index("inuse_space"));

    for s in &strings.table {
        pb.bytes(PROFILE_STRING_TABLE, s.as_bytes());
        pb.flush_if_big(&mut gz)?;
    }
    gz.write_all(&pb.buf)?;
    gz.finish()?.flush()
}

/// The 1-based id of the element at `index`: pprof reserves id 0 for "none".
fn id(index: usize) -> u64 {
    index as u64 + 1
}

/// pprof's values are `int64`; a count past its range saturates.
fn saturate(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// What the symbolizer found for one mapping's locations. pprof re-symbolizes
/// a mapping with none of `has_functions`, `has_filenames` or
/// `has_line_numbers` from the local binary, if it finds one.
#[derive(Clone, Default)]
struct Known {
    functions: bool,
    filenames: bool,
    line_numbers: bool,
    inline_frames: bool,
}

impl Known {
    /// One entry per mapping of `p`.
    fn per_mapping(p: &Profile) -> Vec<Known> {
        let mut known = vec![Known::default(); p.mappings.len()];
        for loc in &p.locations {
            let Some(k) = loc.mapping.and_then(|m| known.get_mut(m)) else {
                continue;
            };
            k.inline_frames |= loc.frames.len() > 1;
            for f in loc.frames.iter() {
                k.functions |= !is_fallback_name(&f.function);
                k.filenames |= f.file.is_some();
                k.line_numbers |= f.line.is_some();
            }
        }
        known
    }
}

/// The names the symbolizer gives a frame it could not name (see
/// [`Frame::function`]): `[jit]`, `[unknown]`, `module+0x1234`.
fn is_fallback_name(name: &str) -> bool {
    name.is_empty() || name.starts_with('[') || name.contains("+0x")
}

/// The string table: `""` at index 0, each string once.
struct Strings<'a> {
    table: Vec<&'a str>,
    index: HashMap<&'a str, i64>,
}

impl Default for Strings<'_> {
    fn default() -> Self {
        Strings {
            table: vec![""],
            index: HashMap::from([("", 0)]),
        }
    }
}

impl<'a> Strings<'a> {
    fn index(&mut self, s: &'a str) -> i64 {
        *self.index.entry(s).or_insert_with(|| {
            self.table.push(s);
            self.table.len() as i64 - 1
        })
    }
}

/// A protobuf encoder for the two wire types pprof uses. Fields holding the
/// proto3 default (zero, false) are left out, as proto3 encoders do.
#[derive(Default)]
struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u64) {
        self.varint(u64::from(field) << 3 | wire_type);
    }

    fn uint64(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, WIRE_VARINT);
            self.varint(v);
        }
    }

    /// A negative `int64` is its two's complement as a 10-byte varint.
    fn int64(&mut self, field: u32, v: i64) {
        self.uint64(field, v as u64);
    }

    fn bool(&mut self, field: u32, v: bool) {
        self.uint64(field, u64::from(v));
    }

    /// Always written, even when empty: the string table's `""` must be.
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, WIRE_LEN);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    /// An embedded message, encoded by `body`.
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Encoder)) {
        let mut m = Encoder::default();
        body(&mut m);
        self.bytes(field, &m.buf);
    }

    /// A packed repeated varint field: the varints back to back, length first.
    fn packed(&mut self, field: u32, values: impl IntoIterator<Item = u64>) {
        self.message(field, |m| values.into_iter().for_each(|v| m.varint(v)));
    }

    fn flush_if_big(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.buf.len() >= FLUSH_BYTES {
            out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "pprof_tests.rs"]
mod tests;

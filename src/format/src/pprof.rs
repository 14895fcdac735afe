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
pub const SAMPLE_TYPES: [(&str, &str); 6] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
    ("alloc_space_variance", "bytes_squared"),
    ("inuse_space_variance", "bytes_squared"),
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
mod tests {
    use super::*;
    use crate::profile::{Location, Mapping, Sample};
    use std::io::Read;

    fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(Into::into),
            line,
        }
    }

    /// Two mappings (one symbolized with an inline chain, one not), a location
    /// with no mapping, a function shared by two locations.
    fn sample_profile() -> Profile {
        let app = Some("src/app.c");
        Profile {
            mappings: vec![
                Mapping {
                    start: 0x400000,
                    end: 0x500000,
                    file_offset: 0x1000,
                    path: "/nonexistent/heaplive-test-app".into(),
                    build_id: "abcd0123".into(),
                },
                Mapping {
                    start: 0x7f00_0000_0000,
                    end: 0x7f00_0010_0000,
                    file_offset: 0,
                    path: "/nonexistent/libfoo.so".into(),
                    build_id: String::new(),
                },
            ],
            locations: vec![
                Location {
                    address: 0x401010,
                    mapping: Some(0),
                    frames: vec![
                        frame("inlined_helper", app, Some(10)),
                        frame("alloc_node", app, Some(25)),
                    ]
                    .into(),
                },
                Location {
                    address: 0x402020,
                    mapping: Some(0),
                    frames: vec![frame("main", app, Some(40))].into(),
                },
                Location {
                    address: 0x7f00_0000_1234,
                    mapping: Some(1),
                    frames: vec![frame("libfoo.so+0x1234", None, None)].into(),
                },
                Location {
                    address: 0x403000,
                    mapping: Some(0),
                    frames: vec![frame("alloc_node", app, Some(30))].into(),
                },
                Location {
                    address: 0xdead,
                    mapping: None,
                    frames: vec![frame("[unknown]", None, None)].into(),
                },
            ],
            samples: vec![
                Sample {
                    locations: vec![0, 1],
                    bytes: 3_000_000,
                    blocks: 3,
                    alloc_bytes: 5_000_000,
                    alloc_blocks: 5,
                    samples: 3,
                    ..Sample::default()
                },
                Sample {
                    locations: vec![2, 3, 1],
                    bytes: 1_000_000,
                    blocks: 1000,
                    alloc_bytes: 1_000_000,
                    alloc_blocks: 1000,
                    samples: 2,
                    variance: 5_000_000.0,
                    alloc_variance: 7_000_000.0,
                },
                Sample {
                    locations: vec![4],
                    bytes: 24,
                    blocks: 1,
                    alloc_bytes: 48,
                    alloc_blocks: 2,
                    samples: 1,
                    ..Sample::default()
                },
            ],
            sample_interval: 524288,
            time_nanos: 1_700_000_000_000_000_000,
            duration_nanos: 5_000_000_000,
            lines: true,
        }
    }

    fn encode(p: &Profile) -> Vec<u8> {
        let mut out = Vec::new();
        write_pprof(p, &mut out).expect("writing to a Vec cannot fail");
        out
    }

    // A protobuf decoder just big enough for the checks below: it knows the
    // wire format, not the schema.

    #[derive(Debug)]
    enum Value {
        Varint(u64),
        Len(Vec<u8>),
    }

    type Fields = Vec<(u32, Value)>;

    fn read_varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first().expect("truncated varint");
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return v;
            }
        }
        panic!("varint longer than 10 bytes");
    }

    fn decode(mut b: &[u8]) -> Fields {
        let mut fields = Vec::new();
        while !b.is_empty() {
            let key = read_varint(&mut b);
            let value = match key & 7 {
                0 => Value::Varint(read_varint(&mut b)),
                2 => {
                    let len = read_varint(&mut b) as usize;
                    assert!(len <= b.len(), "length {len} past the end");
                    let (body, rest) = b.split_at(len);
                    b = rest;
                    Value::Len(body.to_vec())
                }
                t => panic!("unexpected wire type {t}"),
            };
            fields.push(((key >> 3) as u32, value));
        }
        fields
    }

    /// The last value of a scalar field; 0 when absent (the proto3 default).
    fn scalar(fs: &Fields, field: u32) -> u64 {
        let mut v = 0;
        for (f, value) in fs.iter().filter(|(f, _)| *f == field) {
            match value {
                Value::Varint(x) => v = *x,
                Value::Len(_) => panic!("field {f}: expected a varint"),
            }
        }
        v
    }

    /// A repeated varint field, packed or not.
    fn repeated(fs: &Fields, field: u32) -> Vec<u64> {
        let mut out = Vec::new();
        for (_, value) in fs.iter().filter(|(f, _)| *f == field) {
            match value {
                Value::Varint(x) => out.push(*x),
                Value::Len(body) => {
                    let mut b = body.as_slice();
                    while !b.is_empty() {
                        out.push(read_varint(&mut b));
                    }
                }
            }
        }
        out
    }

    /// A repeated length-delimited field: embedded messages or strings.
    fn bodies(fs: &Fields, field: u32) -> Vec<Vec<u8>> {
        fs.iter()
            .filter(|(f, _)| *f == field)
            .map(|(f, value)| match value {
                Value::Len(body) => body.clone(),
                Value::Varint(_) => panic!("field {f}: expected length-delimited"),
            })
            .collect()
    }

    fn messages(fs: &Fields, field: u32) -> Vec<Fields> {
        bodies(fs, field).iter().map(|b| decode(b)).collect()
    }

    /// Gunzips and decodes a `Profile`; returns it with its string table.
    fn decode_profile(gz: &[u8]) -> (Fields, Vec<String>) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut raw)
            .expect("not gzip");
        let fs = decode(&raw);
        let strings: Vec<String> = bodies(&fs, PROFILE_STRING_TABLE)
            .into_iter()
            .map(|b| String::from_utf8(b).expect("string not UTF-8"))
            .collect();
        assert_eq!(
            strings.first().map(String::as_str),
            Some(""),
            "string table must start with \"\""
        );
        let mut sorted = strings.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            strings.len(),
            "duplicate strings in {strings:?}"
        );
        (fs, strings)
    }

    fn string(strings: &[String], index: u64) -> &str {
        strings
            .get(index as usize)
            .map(String::as_str)
            .expect("string index out of range")
    }

    /// (name, file, line) of each `line` of a location, in encoded order.
    fn lines<'s>(
        loc: &Fields,
        functions: &[Fields],
        strings: &'s [String],
    ) -> Vec<(&'s str, &'s str, u64)> {
        messages(loc, LOCATION_LINE)
            .iter()
            .map(|line| {
                let fid = scalar(line, LINE_FUNCTION_ID);
                let f = functions
                    .iter()
                    .find(|f| scalar(f, FUNCTION_ID) == fid)
                    .unwrap_or_else(|| panic!("no function {fid}"));
                let name = string(strings, scalar(f, FUNCTION_NAME));
                (
                    name,
                    string(strings, scalar(f, FUNCTION_FILENAME)),
                    scalar(line, LINE_LINE),
                )
            })
            .collect()
    }

    #[test]
    fn round_trip() {
        let p = sample_profile();
        let (fs, strings) = decode_profile(&encode(&p));
        let s = |i| string(&strings, i);

        let types: Vec<(&str, &str)> = messages(&fs, PROFILE_SAMPLE_TYPE)
            .iter()
            .map(|vt| {
                (
                    s(scalar(vt, VALUE_TYPE_TYPE)),
                    s(scalar(vt, VALUE_TYPE_UNIT)),
                )
            })
            .collect();
        assert_eq!(types, SAMPLE_TYPES);
        assert_eq!(s(scalar(&fs, PROFILE_DEFAULT_SAMPLE_TYPE)), "inuse_space");
        let period_type = &messages(&fs, PROFILE_PERIOD_TYPE)[0];
        assert_eq!(s(scalar(period_type, VALUE_TYPE_TYPE)), "space");
        assert_eq!(s(scalar(period_type, VALUE_TYPE_UNIT)), "bytes");
        assert_eq!(scalar(&fs, PROFILE_PERIOD), 524288);
        assert_eq!(scalar(&fs, PROFILE_TIME_NANOS), 1_700_000_000_000_000_000);
        assert_eq!(scalar(&fs, PROFILE_DURATION_NANOS), 5_000_000_000);

        let samples: Vec<(Vec<u64>, Vec<u64>)> = messages(&fs, PROFILE_SAMPLE)
            .iter()
            .map(|m| (repeated(m, SAMPLE_LOCATION_ID), repeated(m, SAMPLE_VALUE)))
            .collect();
        assert_eq!(
            samples,
            [
                (vec![1, 2], vec![5, 5_000_000, 3, 3_000_000, 0, 0]),
                (
                    vec![3, 4, 2],
                    vec![1000, 1_000_000, 1000, 1_000_000, 7_000_000, 5_000_000]
                ),
                (vec![5], vec![2, 48, 1, 24, 0, 0]),
            ]
        );

        let mappings = messages(&fs, PROFILE_MAPPING);
        assert_eq!(mappings.len(), 2);
        let (app, lib) = (&mappings[0], &mappings[1]);
        assert_eq!(scalar(app, MAPPING_ID), 1);
        assert_eq!(scalar(app, MAPPING_MEMORY_START), 0x400000);
        assert_eq!(scalar(app, MAPPING_MEMORY_LIMIT), 0x500000);
        assert_eq!(scalar(app, MAPPING_FILE_OFFSET), 0x1000);
        assert_eq!(
            s(scalar(app, MAPPING_FILENAME)),
            "/nonexistent/heaplive-test-app"
        );
        assert_eq!(s(scalar(app, MAPPING_BUILD_ID)), "abcd0123");
        let flags = |m: &Fields| {
            [
                MAPPING_HAS_FUNCTIONS,
                MAPPING_HAS_FILENAMES,
                MAPPING_HAS_LINE_NUMBERS,
                MAPPING_HAS_INLINE_FRAMES,
            ]
            .map(|f| scalar(m, f))
        };
        assert_eq!(flags(app), [1, 1, 1, 1]);
        assert_eq!(scalar(lib, MAPPING_ID), 2);
        assert_eq!(s(scalar(lib, MAPPING_FILENAME)), "/nonexistent/libfoo.so");
        assert_eq!(s(scalar(lib, MAPPING_BUILD_ID)), "");
        assert_eq!(
            flags(lib),
            [0, 0, 0, 0],
            "libfoo.so+0x1234 is a fallback name"
        );

        let functions = messages(&fs, PROFILE_FUNCTION);
        let names: Vec<&str> = functions
            .iter()
            .map(|f| s(scalar(f, FUNCTION_NAME)))
            .collect();
        assert_eq!(
            names,
            [
                "inlined_helper",
                "alloc_node",
                "main",
                "libfoo.so+0x1234",
                "[unknown]"
            ]
        );
        let ids: Vec<u64> = functions.iter().map(|f| scalar(f, FUNCTION_ID)).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5]);

        let locations = messages(&fs, PROFILE_LOCATION);
        let summary: Vec<(u64, u64, u64)> = locations
            .iter()
            .map(|l| {
                (
                    scalar(l, LOCATION_ID),
                    scalar(l, LOCATION_MAPPING_ID),
                    scalar(l, LOCATION_ADDRESS),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (1, 1, 0x401010),
                (2, 1, 0x402020),
                (3, 2, 0x7f00_0000_1234),
                (4, 1, 0x403000),
                (5, 0, 0xdead)
            ]
        );
        let all_lines: Vec<_> = locations
            .iter()
            .map(|l| lines(l, &functions, &strings))
            .collect();
        assert_eq!(
            all_lines,
            [
                vec![
                    ("inlined_helper", "src/app.c", 10),
                    ("alloc_node", "src/app.c", 25)
                ],
                vec![("main", "src/app.c", 40)],
                vec![("libfoo.so+0x1234", "", 0)],
                vec![("alloc_node", "src/app.c", 30)],
                vec![("[unknown]", "", 0)],
            ]
        );
    }

    #[test]
    fn bad_indexes_and_extremes_do_not_panic() {
        let p = Profile {
            mappings: vec![Mapping::default()],
            locations: vec![
                Location {
                    address: 1,
                    mapping: Some(7),
                    frames: vec![frame("f", None, Some(u32::MAX))].into(),
                },
                Location {
                    address: u64::MAX,
                    mapping: Some(0),
                    frames: Default::default(),
                },
            ],
            samples: vec![
                Sample {
                    locations: vec![99, 0, usize::MAX, 1],
                    bytes: u64::MAX,
                    blocks: 0,
                    ..Sample::default()
                },
                Sample::default(),
            ],
            sample_interval: u64::MAX,
            time_nanos: -1,
            duration_nanos: i64::MIN,
            lines: false,
        };
        let (fs, strings) = decode_profile(&encode(&p));
        let samples = messages(&fs, PROFILE_SAMPLE);
        assert_eq!(
            repeated(&samples[0], SAMPLE_LOCATION_ID),
            [1, 2],
            "out-of-range locations dropped"
        );
        assert_eq!(
            repeated(&samples[0], SAMPLE_VALUE),
            [0, 0, 0, i64::MAX as u64, 0, 0]
        );
        assert_eq!(repeated(&samples[1], SAMPLE_LOCATION_ID), Vec::<u64>::new());
        assert_eq!(scalar(&fs, PROFILE_PERIOD), i64::MAX as u64);
        assert_eq!(scalar(&fs, PROFILE_TIME_NANOS) as i64, -1);
        assert_eq!(scalar(&fs, PROFILE_DURATION_NANOS) as i64, i64::MIN);
        let locations = messages(&fs, PROFILE_LOCATION);
        assert_eq!(
            scalar(&locations[0], LOCATION_MAPPING_ID),
            0,
            "unknown mapping index means none"
        );
        let functions = messages(&fs, PROFILE_FUNCTION);
        assert_eq!(
            lines(&locations[0], &functions, &strings),
            [("f", "", u64::from(u32::MAX))]
        );
        assert_eq!(scalar(&locations[1], LOCATION_ADDRESS), u64::MAX);
        assert!(lines(&locations[1], &functions, &strings).is_empty());

        let (fs, strings) = decode_profile(&encode(&Profile::default()));
        assert!(messages(&fs, PROFILE_SAMPLE).is_empty());
        assert_eq!(
            strings,
            [
                "",
                "alloc_objects",
                "count",
                "alloc_space",
                "bytes",
                "inuse_objects",
                "inuse_space",
                "alloc_space_variance",
                "bytes_squared",
                "inuse_space_variance",
                "space"
            ]
        );
    }

    #[test]
    fn write_errors_are_returned() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let err =
            write_pprof(&sample_profile(), &mut Broken).expect_err("a broken writer must fail");
        assert_eq!(err.to_string(), "disk full");
    }

    #[test]
    fn large_profile_round_trips() {
        // Several FLUSH_BYTES of samples, locations and strings.
        let mut p = Profile {
            sample_interval: 1,
            ..Profile::default()
        };
        for i in 0..20_000u64 {
            p.locations.push(Location {
                address: 0x1000 + i,
                mapping: None,
                frames: vec![frame(&format!("function_{i}"), None, None)].into(),
            });
            p.samples.push(Sample {
                locations: vec![i as usize],
                bytes: i,
                blocks: 1,
                ..Sample::default()
            });
        }
        let (fs, strings) = decode_profile(&encode(&p));
        let total: u64 = messages(&fs, PROFILE_SAMPLE)
            .iter()
            .map(|s| repeated(s, SAMPLE_VALUE)[3])
            .sum();
        assert_eq!(total, p.total_bytes());
        assert_eq!(messages(&fs, PROFILE_FUNCTION).len(), 20_000);
        assert!(strings.iter().any(|s| s == "function_19999"));
    }

    /// The `go` command: on `PATH`, else where Debian's golang-go puts it.
    fn find_go() -> Option<std::path::PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join("go"))
            .chain([std::path::PathBuf::from("/usr/lib/go/bin/go")])
            .find(|go| go.is_file())
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("heaplive-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("creating a temp dir");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Output lines with runs of blanks squeezed to one space, trimmed.
    fn squeezed(text: &str) -> Vec<String> {
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    }

    /// The reference reader accepts the file and sees what we meant. Needs Go
    /// (Debian: `apt-get install golang-go`); fails, never skips, without it.
    #[test]
    fn go_tool_pprof_reads_it() {
        let Some(go) = find_go() else {
            panic!(
                "`go` is not on PATH nor at /usr/lib/go/bin/go: install golang-go to run this test"
            );
        };
        let dir = TempDir::new("pprof-go");
        let file = dir.0.join("heap.pb.gz");
        std::fs::write(&file, encode(&sample_profile())).expect("writing the profile");
        let pprof = |args: &[&str]| -> Vec<String> {
            // pprof runs offline; it wants a writable HOME and build cache.
            let out = std::process::Command::new(&go)
                .args(["tool", "pprof"])
                .args(args)
                .arg(&file)
                .current_dir(&dir.0)
                .env("HOME", &dir.0)
                .env("GOCACHE", dir.0.join("gocache"))
                .env("GOTOOLCHAIN", "local")
                .env_remove("PPROF_BINARY_PATH")
                .output()
                .unwrap_or_else(|e| panic!("running {}: {e}", go.display()));
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "go tool pprof {args:?} failed: {stderr}\n{stdout}"
            );
            squeezed(&stdout)
        };

        let raw = pprof(&["-raw"]);
        for expected in [
            "PeriodType: space bytes",
            "Period: 524288",
            "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt] alloc_space_variance/bytes_squared inuse_space_variance/bytes_squared",
            // alloc blocks, alloc bytes, blocks, bytes, their variances:
            // location ids, leaf first
            "5 5000000 3 3000000 0 0: 1 2",
            "1000 1000000 1000 1000000 7000000 5000000: 3 4 2",
            "2 48 1 24 0 0: 5",
            "1: 0x401010 M=1 inlined_helper src/app.c:10 s=0",
            "alloc_node src/app.c:25 s=0",
            "3: 0x7f0000001234 M=2 libfoo.so+0x1234 :0 s=0",
            "5: 0xdead [unknown] :0 s=0",
            "1: 0x400000/0x500000/0x1000 /nonexistent/heaplive-test-app abcd0123 [FN][FL][LN][IN]",
            "2: 0x7f0000000000/0x7f0000100000/0x0 /nonexistent/libfoo.so",
        ] {
            assert!(
                raw.iter().any(|l| l == expected),
                "-raw lacks {expected:?}:\n{}",
                raw.join("\n")
            );
        }

        let top = pprof(&[
            "-top",
            "-sample_index=inuse_space",
            "-unit=B",
            "-nodefraction=0",
        ]);
        let total = sample_profile().total_bytes();
        let summary = format!("Showing nodes accounting for {total}B, 100% of {total}B total");
        assert!(
            top.contains(&summary),
            "-top lacks {summary:?}:\n{}",
            top.join("\n")
        );
        // Rows: flat flat% sum% cum cum% name.
        for (name, flat, cum) in [
            ("inlined_helper (inline)", "3000000B", "3000000B"),
            ("libfoo.so+0x1234", "1000000B", "1000000B"),
            ("[unknown]", "24B", "24B"),
            ("alloc_node", "0", "4000000B"),
            ("main", "0", "4000000B"),
        ] {
            let row = top
                .iter()
                .map(|l| l.splitn(6, ' ').collect::<Vec<_>>())
                .find(|r| r.get(5) == Some(&name));
            let row =
                row.unwrap_or_else(|| panic!("-top has no row for {name}:\n{}", top.join("\n")));
            assert_eq!((row[0], row[3]), (flat, cum), "flat and cum of {name}");
        }

        // Stacks read leaf first, inline chains expanded: callers come last.
        let traces = pprof(&["-traces"]).join(" ");
        for stack in [
            "inlined_helper (inline) alloc_node main",
            "libfoo.so+0x1234 alloc_node main",
        ] {
            assert!(traces.contains(stack), "-traces lacks {stack:?}: {traces}");
        }
    }
}

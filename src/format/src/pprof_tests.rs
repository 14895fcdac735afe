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
                freed: [400, 0, 9, 300],
                ..Sample::default()
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
            (
                vec![1, 2],
                vec![5, 5_000_000, 3, 3_000_000, 0, 0, 0, 0, 0, 0]
            ),
            (
                vec![3, 4, 2],
                vec![
                    1000, 1_000_000, 1000, 1_000_000, 7_000_000, 5_000_000, 400, 0, 9, 300
                ]
            ),
            (vec![5], vec![2, 48, 1, 24, 0, 0, 0, 0, 0, 0]),
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
        [0, 0, 0, i64::MAX as u64, 0, 0, 0, 0, 0, 0]
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
            "freed_1ms_space",
            "freed_1s_space",
            "freed_later_space",
            "temporary_space",
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
    let err = write_pprof(&sample_profile(), &mut Broken).expect_err("a broken writer must fail");
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
        panic!("`go` is not on PATH nor at /usr/lib/go/bin/go: install golang-go to run this test");
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
        "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt] alloc_space_variance/bytes_squared inuse_space_variance/bytes_squared freed_1ms_space/bytes freed_1s_space/bytes freed_later_space/bytes temporary_space/bytes",
        // alloc blocks, alloc bytes, blocks, bytes, their variances, the
        // bytes freed by lifetime and the temporary ones: location ids,
        // leaf first
        "5 5000000 3 3000000 0 0 0 0 0 0: 1 2",
        "1000 1000000 1000 1000000 7000000 5000000 400 0 9 300: 3 4 2",
        "2 48 1 24 0 0 0 0 0 0: 5",
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
        let row = row.unwrap_or_else(|| panic!("-top has no row for {name}:\n{}", top.join("\n")));
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

//! Symbols the way programs really ship: debug info split into a file next
//! to the binary or in a build-id tree, stripped binaries with only
//! `.dynsym`, functions no symbol covers, libc with Debian's libc6-dbg,
//! inline frames, C++ and Rust names, JIT code named by a perf map, and the
//! pprof file read by `go tool pprof`.
//!
//! Programs are in `progs/sym_*`; source lines the tests expect are marked
//! there with `/* L_... */` comments and looked up, not typed in.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The folded file's text, for failure messages.
fn folded_text(dir: &Path) -> String {
    folded_files(dir)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs a tool, asserting success.
fn tool(cmd: &str, args: &[&str]) -> String {
    stdout(&output_ok(
        Command::new(cmd).args(args),
        &format!("{cmd} {args:?}"),
    ))
}

/// The 1-based line of `progs/<src>` holding `marker`.
fn src_line(src: &str, marker: &str) -> u32 {
    let text = std::fs::read_to_string(root().join("preload-tests/progs").join(src)).unwrap();
    let hits: Vec<u32> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker))
        .map(|(i, _)| i as u32 + 1)
        .collect();
    assert_eq!(hits.len(), 1, "marker {marker} in {src}");
    hits[0]
}

/// The GNU build id of an ELF file, hex.
fn build_id(path: &Path) -> String {
    let out = tool("readelf", &["-nW", path.to_str().unwrap()]);
    out.lines()
        .find_map(|l| {
            l.split_once("Build ID: ")
                .map(|(_, id)| id.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no build id in {}:\n{out}", path.display()))
}

/// Runs `bin` under the library in exact mode with `env`, asserting success;
/// returns the stacks of the one folded file and a failure context.
fn profile(
    dir: &Path,
    bin: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Vec<Stack>, Output, String) {
    let mut e = vec![("HEAPLIVE_SAMPLE_INTERVAL", "1")];
    e.extend_from_slice(env);
    let o = run_preloaded(dir, bin, args, &e);
    let ctx = format!(
        "{} {args:?} with {env:?}\n{}\n--- folded ---\n{}",
        bin.display(),
        show(&o),
        folded_text(dir)
    );
    assert!(o.status.success(), "{ctx}");
    let stacks = only_folded(dir);
    (stacks, o, ctx)
}

/// `profile` again, in a fresh subdirectory `name` of `dir`, without
/// arguments: the stacks and the failure context.
fn again(dir: &Path, name: &str, bin: &Path, env: &[(&str, &str)]) -> (Vec<Stack>, String) {
    let (stacks, _, ctx) = profile(&subdir(dir, name), bin, &[], env);
    (stacks, ctx)
}

/// Bytes of the stacks `keep` keeps.
fn bytes_of(stacks: &[Stack], keep: impl Fn(&Stack) -> bool) -> u64 {
    stacks.iter().filter(|s| keep(s)).map(|s| s.bytes).sum()
}

/// A fresh output directory for a second run of the same test.
fn subdir(dir: &Path, name: &str) -> PathBuf {
    let d = dir.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Bytes per stack whose last frames (leaf last) are exactly `tail`.
fn bytes_ending(stacks: &[Stack], tail: &[&str]) -> u64 {
    bytes_of(stacks, |s| {
        s.frames.len() >= tail.len() && s.frames[s.frames.len() - tail.len()..] == *tail
    })
}

/// Checks the split program's stacks: names, and (file:line) with lines on.
fn check_split(stacks: &[Stack], lines: bool, ctx: &str) {
    let f = |name: &str, marker: &str| {
        if lines {
            format!("{name} (sym_split.c:{})", src_line("sym_split.c", marker))
        } else {
            name.to_string()
        }
    };
    let a = [
        f("split_caller", "L_CALL_A"),
        f("split_alloc_a", "L_MALLOC_A"),
    ];
    let b = [
        f("split_caller", "L_CALL_B"),
        f("split_alloc_b", "L_CALLOC_B"),
    ];
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let b: Vec<&str> = b.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        bytes_ending(stacks, &a),
        400_000,
        "want stacks ending {a:?}\n{ctx}"
    );
    assert_eq!(
        bytes_ending(stacks, &b),
        210_000,
        "want stacks ending {b:?}\n{ctx}"
    );
    let main_frame = stacks
        .iter()
        .find(|s| s.leaf().starts_with("split_alloc_a"))
        .unwrap()
        .frames
        .iter()
        .rev()
        .nth(2)
        .unwrap()
        .clone();
    assert!(main_frame.starts_with("main"), "{ctx}");
    if lines {
        assert!(
            main_frame.starts_with("main (sym_split.c:"),
            "main's frame has its line too: {main_frame}\n{ctx}"
        );
    }
}

/// Debug info split off with objcopy and found through `.gnu_debuglink`
/// next to the binary; a debug file with the wrong CRC is refused.
#[test]
fn debuglink_next_to_the_binary() {
    let (dir, bin) = compiled("sym-debuglink", "sym_split.c");
    let b = bin.to_str().unwrap();
    let dbg = dir.join("sym_split.debug");
    tool("objcopy", &["--only-keep-debug", b, dbg.to_str().unwrap()]);
    // --add-gnu-debuglink reads the debug file for its CRC: run in dir so
    // the link holds the bare name.
    output_ok(
        Command::new("objcopy").current_dir(&dir).args([
            "--strip-debug",
            "--add-gnu-debuglink=sym_split.debug",
            "sym_split",
        ]),
        "objcopy --add-gnu-debuglink",
    );
    let sections = tool("readelf", &["-SW", b]);
    assert!(
        !sections.contains(".debug_info") && sections.contains(".gnu_debuglink"),
        "{sections}"
    );

    let (stacks, ctx) = again(&dir, "lines", &bin, &[("HEAPLIVE_LINES", "1")]);
    check_split(&stacks, true, &ctx);
    let (stacks, ctx) = again(&dir, "names", &bin, &[]);
    check_split(&stacks, false, &ctx);

    // Another build's debug info under the same name: CRC mismatch, so no
    // lines from it (names still come from the binary's .symtab).
    let other_dir = dir.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = compile(
        "sym_split.c",
        "sym_split",
        &other_dir,
        &["-O0", "-DOTHER_BUILD"],
    );
    let other_dbg = other_dir.join("sym_split.debug");
    tool(
        "objcopy",
        &[
            "--only-keep-debug",
            other.to_str().unwrap(),
            other_dbg.to_str().unwrap(),
        ],
    );
    std::fs::rename(&dbg, dir.join("sym_split.debug.good")).unwrap();
    std::fs::copy(&other_dbg, &dbg).unwrap();
    let (stacks, ctx) = again(&dir, "wrongcrc", &bin, &[("HEAPLIVE_LINES", "1")]);
    check_split(&stacks, false, &ctx);
    // No debug file at all: the same.
    std::fs::remove_file(&dbg).unwrap();
    let (stacks, ctx) = again(&dir, "nodebug", &bin, &[("HEAPLIVE_LINES", "1")]);
    check_split(&stacks, false, &ctx);
}

/// Debug info found as `<dir>/.build-id/xx/rest.debug` in a directory of
/// `HEAPLIVE_DEBUG_DIRS`; the binary is stripped of everything.
#[test]
fn build_id_tree_in_debug_dirs() {
    let dir = tempdir("sym-buildid");
    let bin = compile("sym_split.c", "sym_split_bid", &dir, &[]);
    let b = bin.to_str().unwrap();
    let id = build_id(&bin);
    let tree = dir.join("dbg/.build-id").join(&id[..2]);
    std::fs::create_dir_all(&tree).unwrap();
    let dbg = tree.join(format!("{}.debug", &id[2..]));
    tool("objcopy", &["--only-keep-debug", b, dbg.to_str().unwrap()]);
    tool("strip", &["--strip-all", b]);
    let sections = tool("readelf", &["-SW", b]);
    assert!(
        !sections.contains(".debug_info")
            && !sections.contains(".symtab")
            && !sections.contains(".gnu_debuglink"),
        "{sections}"
    );
    assert_eq!(build_id(&bin), id, "strip keeps the build id");

    let dirs = format!("/nonexistent/heaplive-debug:{}", dir.join("dbg").display());
    let (stacks, ctx) = again(
        &dir,
        "lines",
        &bin,
        &[("HEAPLIVE_LINES", "1"), ("HEAPLIVE_DEBUG_DIRS", &dirs)],
    );
    check_split(&stacks, true, &ctx);
    let (stacks, ctx) = again(&dir, "names", &bin, &[("HEAPLIVE_DEBUG_DIRS", &dirs)]);
    check_split(&stacks, false, &ctx);

    // Without the directory there is nothing to name them by.
    let (stacks, ctx) = again(&dir, "without", &bin, &[]);
    for s in &stacks {
        assert!(
            !s.frames.iter().any(|f| f.starts_with("split_")),
            "names without debug info or symbols?\n{ctx}"
        );
    }
    let leaves = bytes_by_leaf(&stacks);
    let unnamed: u64 = leaves
        .iter()
        .filter(|(l, _)| l.starts_with("sym_split_bid+0x"))
        .map(|(_, b)| *b)
        .sum();
    assert_eq!(
        unnamed, 610_000,
        "the program's frames as sym_split_bid+0x...\n{ctx}"
    );
}

/// ELF program headers: (file offset, vaddr, file size) of each LOAD.
fn loads(bin: &Path) -> Vec<(u64, u64, u64)> {
    let out = tool("readelf", &["-lW", bin.to_str().unwrap()]);
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    out.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (hex(f[1]), hex(f[2]), hex(f[4]))
        })
        .collect()
}

/// A stripped program linked -rdynamic: exported functions by their
/// `.dynsym` names, the static one (no symbol anywhere) as
/// `binary+0x<file offset>` inside its own code, never a neighbour's name.
#[test]
fn stripped_dynsym_names_and_uncovered_addresses() {
    let (dir, bin) = compiled_with("sym-stripped", "sym_stripped.c", &["-rdynamic"]);
    let full = dir.join("sym_stripped.full");
    std::fs::copy(&bin, &full).unwrap();
    tool("strip", &["--strip-all", bin.to_str().unwrap()]);
    let dynsym = tool("readelf", &["--dyn-syms", "-W", bin.to_str().unwrap()]);
    assert!(
        dynsym.contains(" visible_alloc") && !dynsym.contains("hidden_alloc"),
        "{dynsym}"
    );

    // hidden_alloc's range, from the unstripped copy, as file offsets.
    let nm = tool("nm", &["-S", full.to_str().unwrap()]);
    let (start, size) = nm
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == "hidden_alloc").then(|| {
                (
                    u64::from_str_radix(f[0], 16).unwrap(),
                    u64::from_str_radix(f[1], 16).unwrap(),
                )
            })
        })
        .unwrap_or_else(|| panic!("no hidden_alloc in nm:\n{nm}"));
    let to_off = |va: u64| {
        loads(&full)
            .iter()
            .find(|(_, v, sz)| *v <= va && va < v + sz)
            .map(|(o, v, _)| va - v + o)
            .expect("in a LOAD")
    };
    let (lo, hi) = (to_off(start), to_off(start) + size);

    let (stacks, _, ctx) = profile(&dir, &bin, &[], &[("HEAPLIVE_LINES", "1")]);
    assert_eq!(
        bytes_ending(&stacks, &["main", "visible_alloc"]),
        44_444,
        "{ctx}"
    );
    assert_eq!(
        bytes_ending(&stacks, &["main", "after_hidden"]),
        33_333,
        "{ctx}"
    );
    let hidden: Vec<&Stack> = stacks
        .iter()
        .filter(|s| s.frames.len() >= 2 && s.frames[s.frames.len() - 2] == "calls_hidden")
        .collect();
    assert!(!hidden.is_empty(), "no stack through calls_hidden\n{ctx}");
    assert_eq!(
        hidden.iter().map(|s| s.bytes).sum::<u64>(),
        3 * 55_555,
        "{ctx}"
    );
    for s in &hidden {
        let leaf = s.leaf();
        let off = leaf
            .strip_prefix("sym_stripped+0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| {
                panic!("hidden_alloc's frame should be sym_stripped+0x<hex>, is {leaf:?}\n{ctx}")
            });
        assert!(
            lo <= off && off < hi,
            "offset {off:#x} outside hidden_alloc's code [{lo:#x}, {hi:#x})\n{ctx}"
        );
    }
    // No exported name sneaks onto an address it does not cover.
    for s in &stacks {
        for (i, f) in s.frames.iter().enumerate() {
            if f == "visible_alloc" || f == "after_hidden" {
                assert_eq!(
                    i,
                    s.frames.len() - 1,
                    "a neighbour's name in the middle of a stack: {s:?}\n{ctx}"
                );
                assert_eq!(s.frames[i - 1], "main", "{ctx}");
            }
        }
    }
}

/// The separate debug file of the installed libc (libc6-dbg).
fn require_libc_dbg() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so.6"))
        .expect("libc in our own maps")
        .to_string();
    let id = build_id(Path::new(&libc));
    let dbg = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
    assert!(
        Path::new(&dbg).exists(),
        "{dbg} is missing: install libc6-dbg (`make test` does)"
    );
}

/// libc's own frames named from libc6-dbg: qsort's internals between the
/// program and its comparator, and `__strdup` as the leaf of strdup.
#[test]
fn libc_frames_from_libc6_dbg() {
    require_libc_dbg();
    let (dir, bin) = compiled("sym-libc", "sym_libc.c");
    let (stacks, o, ctx) = profile(&dir, &bin, &[], &[]);
    let nkeep: u64 = stdout(&o)
        .trim()
        .strip_prefix("done ")
        .and_then(|n| n.parse().ok())
        .expect("done N");
    assert!(nkeep > 100, "{ctx}");
    let cmp: Vec<&Stack> = stacks.iter().filter(|s| s.leaf() == "cmp_alloc").collect();
    assert_eq!(
        cmp.iter().map(|s| s.bytes).sum::<u64>(),
        24 * nkeep,
        "every comparator block under cmp_alloc\n{ctx}"
    );
    for s in &cmp {
        let i = s
            .frames
            .iter()
            .position(|f| f == "sort_some")
            .unwrap_or_else(|| panic!("sort_some missing: {s:?}\n{ctx}"));
        let between = &s.frames[i + 1..s.frames.len() - 1];
        assert!(!between.is_empty(), "{ctx}");
        assert!(
            between
                .iter()
                .any(|f| f == "msort_with_tmp" || f == "__qsort_r"),
            "qsort's internals by name: {between:?}\n{ctx}"
        );
        assert!(
            between
                .iter()
                .all(|f| !f.contains("+0x") && !f.starts_with('[')),
            "an unnamed libc frame: {between:?}\n{ctx}"
        );
    }
    let n = "a string that strdup copies, 48 bytes long....".len() as u64 + 1;
    assert_eq!(
        bytes_ending(&stacks, &["dup_some", "__strdup"]),
        8 * n,
        "{ctx}"
    );

    // With lines: libc's source files.
    let (stacks, ctx) = again(&dir, "lines", &bin, &[("HEAPLIVE_LINES", "1")]);
    let dup: Vec<&Stack> = stacks
        .iter()
        .filter(|s| s.leaf().starts_with("__strdup"))
        .collect();
    assert!(!dup.is_empty(), "{ctx}");
    for s in dup {
        assert!(s.leaf().starts_with("__strdup (strdup.c:"), "{s:?}\n{ctx}");
    }
}

/// An always_inline function that calls malloc, at -O2: a frame of its own
/// between its caller and malloc, with its own line.
#[test]
fn inline_frames_are_frames() {
    let (dir, bin) = compiled_with("sym-inline", "sym_inline.c", &["-O2"]);
    let want_bytes: u64 = (0..5).map(|i| 77_777 + i).sum();
    let (stacks, _, ctx) = profile(&dir, &bin, &[], &[]);
    assert_eq!(
        bytes_ending(&stacks, &["main", "outer_fn", "inl_alloc"]),
        want_bytes,
        "{ctx}"
    );
    let (stacks, ctx) = again(&dir, "lines", &bin, &[("HEAPLIVE_LINES", "1")]);
    let outer = format!(
        "outer_fn (sym_inline.c:{})",
        src_line("sym_inline.c", "L_OUTER_CALL")
    );
    let inl = format!(
        "inl_alloc (sym_inline.c:{})",
        src_line("sym_inline.c", "L_INL_MALLOC")
    );
    assert_eq!(bytes_ending(&stacks, &[&outer, &inl]), want_bytes, "{ctx}");
}

/// A C++ template member: demangled by default, mangled with
/// HEAPLIVE_DEMANGLE=0.
#[test]
fn cpp_template_names() {
    let (dir, bin) = compiled("sym-cpp", "sym_template.cpp");
    let (stacks, _, ctx) = profile(&dir, &bin, &[], &[]);
    let grow = bytes_of(&stacks, |s| {
        s.leaf() == "Pool<Widget>::grow" || s.leaf() == "Pool<Widget>::grow(int)"
    });
    assert_eq!(grow, 5 * 1000 * 48, "leaf Pool<Widget>::grow\n{ctx}");
    for s in &stacks {
        assert!(
            !s.frames.iter().any(|f| f.starts_with("_Z")),
            "a mangled frame with demangling on: {s:?}\n{ctx}"
        );
    }
    let (stacks, ctx) = again(&dir, "mangled", &bin, &[("HEAPLIVE_DEMANGLE", "0")]);
    let grow = bytes_of(&stacks, |s| s.leaf().starts_with("_ZN4PoolI6WidgetE4grow"));
    assert_eq!(grow, 5 * 1000 * 48, "leaf _ZN4PoolI6WidgetE4grow...\n{ctx}");
    assert!(
        !stacks
            .iter()
            .any(|s| s.frames.iter().any(|f| f.contains("Pool<Widget>"))),
        "{ctx}"
    );
}

fn is_rust_hash_suffix(f: &str) -> bool {
    // `...::h0123456789abcdef`
    f.rsplit_once("::h")
        .is_some_and(|(_, h)| h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A Rust function leaking a Vec: `leaky::leaky_rust_fn` without the hash,
/// or the `_ZN5leaky13leaky_rust_fn17h...E` symbol with demangling off.
#[test]
fn rust_names() {
    let dir = tempdir("sym-rust");
    let bin = dir.join("leaky");
    output_ok(
        Command::new("rustc")
            .args(["-g", "-C", "opt-level=0", "--crate-name", "leaky", "-o"])
            .arg(&bin)
            .arg(root().join("preload-tests/progs/sym_leaky.rs")),
        "rustc",
    );
    let (stacks, ctx) = again(&dir, "demangled", &bin, &[]);
    assert_eq!(
        bytes_under(&stacks, "leaky::leaky_rust_fn"),
        4 * 123_456,
        "{ctx}"
    );
    for s in stacks.iter().filter(|s| s.has("leaky::leaky_rust_fn")) {
        let i = s
            .frames
            .iter()
            .position(|f| f == "leaky::leaky_rust_fn")
            .unwrap();
        assert_eq!(s.frames[i - 1], "leaky::main", "{ctx}");
    }
    for s in &stacks {
        for f in &s.frames {
            assert!(
                !is_rust_hash_suffix(f) && !f.starts_with("_ZN"),
                "a hash or a mangled name: {f}\n{ctx}"
            );
        }
    }
    let (stacks, ctx) = again(&dir, "mangled", &bin, &[("HEAPLIVE_DEMANGLE", "0")]);
    let mangled = bytes_of(&stacks, |s| {
        s.frames
            .iter()
            .any(|f| f.starts_with("_ZN5leaky13leaky_rust_fn17h") && f.ends_with('E'))
    });
    assert_eq!(mangled, 4 * 123_456, "{ctx}");
    assert_eq!(bytes_under(&stacks, "leaky::leaky_rust_fn"), 0, "{ctx}");
}

/// JIT code in anonymous executable memory, named by `/tmp/perf-<pid>.map`.
#[test]
fn perf_map_names_jit_code() {
    let dir = tempdir("sym-jit");
    let (bin, o, pid, cleanup) = run_sym_jit(&dir);
    let ctx = format!("{}\n--- folded ---\n{}", show(&o), folded_text(&dir));
    assert!(o.status.success() && pid.is_some(), "{ctx}");
    let stacks = only_folded(&dir);
    assert_eq!(
        bytes_by_leaf(&stacks).get("jitted_alloc [jit]"),
        Some(&(3 * 4242)),
        "{ctx}"
    );
    drop(cleanup);
    assert!(!Path::new(&format!("/tmp/perf-{}.map", pid.unwrap())).exists());

    // Without the map: anonymous executable memory, `[jit]`.
    let d2 = subdir(&dir, "nomap");
    let o = run_preloaded(&d2, &bin, &["nomap"], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    let ctx = format!("{}\n--- folded ---\n{}", show(&o), folded_text(&d2));
    assert!(o.status.success(), "{ctx}");
    let stacks = only_folded(&d2);
    assert_eq!(
        bytes_by_leaf(&stacks).get("[jit]"),
        Some(&(3 * 4242)),
        "{ctx}"
    );
}

/// `1234B` → 1234.
fn bytes_value(s: &str) -> Option<u64> {
    s.strip_suffix('B').and_then(|n| n.parse().ok())
}

/// A C++ name as pprof prints it: template arguments and parameter lists
/// dropped.
fn short_name(name: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in name.chars() {
        match c {
            '<' | '(' if !out.is_empty() => depth += 1,
            '>' | ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The pprof file (HEAPLIVE_FORMAT=folded,pprof) read by `go tool pprof`
/// agrees with the folded file: the total, and the bytes per leaf.
fn check_pprof_against_folded(tag: &str, bin: &Path) {
    let dir = tempdir(tag);
    let o = run_preloaded(
        &dir,
        bin,
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_FORMAT", "folded,pprof"),
        ],
    );
    let ctx = format!("{}\n--- folded ---\n{}", show(&o), folded_text(&dir));
    assert!(o.status.success(), "{ctx}");
    let stacks = only_folded(&dir);
    let folded_total = total(&stacks);
    let pb: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(".pb.gz")))
        .collect();
    assert_eq!(
        pb.len(),
        1,
        "one .pb.gz next to the folded file: {pb:?}\n{ctx}"
    );
    let pb = &pb[0];
    let folded_name = folded_files(&dir)[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        pb.file_name().unwrap().to_str().unwrap(),
        format!("{}.pb.gz", folded_name.trim_end_matches(".folded")),
        "{ctx}"
    );

    let common = ["-unit=B", "-nodefraction=0", "-sample_index=inuse_space"];
    let mut args = vec!["-top"];
    args.extend_from_slice(&common);
    let top = pprof(&dir, &args, pb);
    let ctx = format!("{ctx}\n--- pprof -top ---\n{top}");
    // "Showing nodes accounting for 614096B, 100% of 614096B total"
    let line = top
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for"))
        .unwrap_or_else(|| panic!("{ctx}"));
    let pprof_total = line
        .rsplit_once(" of ")
        .and_then(|(_, t)| bytes_value(t.trim_end_matches(" total")))
        .unwrap_or_else(|| panic!("{line}\n{ctx}"));
    assert_eq!(
        pprof_total, folded_total,
        "pprof's total vs the folded file's\n{ctx}"
    );
    // Flat bytes per function in -top: the leaves of the folded file.
    let mut flat: BTreeMap<String, u64> = BTreeMap::new();
    let mut in_table = false;
    for l in top.lines() {
        if l.trim_start().starts_with("flat  flat%") {
            in_table = true;
            continue;
        }
        if in_table {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() >= 6 {
                let v = if f[0] == "0" {
                    0
                } else {
                    bytes_value(f[0]).unwrap_or_else(|| panic!("{l}\n{ctx}"))
                };
                if v > 0 {
                    *flat.entry(f[5..].join(" ")).or_insert(0) += v;
                }
            }
        }
    }
    // pprof shows C++ names shortened (`Pool::grow` for `Pool<Widget>::grow`):
    // compare the same way.
    let mut leaves: BTreeMap<String, u64> = BTreeMap::new();
    for (leaf, b) in bytes_by_leaf(&stacks) {
        if b > 0 {
            *leaves.entry(short_name(&leaf)).or_insert(0) += b;
        }
    }
    assert_eq!(
        flat, leaves,
        "flat bytes per function (pprof) vs bytes per leaf (folded)\n{ctx}"
    );

    // The full names are in the file itself.
    let raw = pprof(&dir, &["-raw"], pb);
    for leaf in bytes_by_leaf(&stacks).keys() {
        assert!(
            raw.contains(leaf.as_str()),
            "{leaf} missing from pprof -raw\n{ctx}\n--- pprof -raw ---\n{raw}"
        );
    }

    let mut args = vec!["-traces"];
    args.extend_from_slice(&common);
    let traces = pprof(&dir, &args, pb);
    let ctx = format!("{ctx}\n--- pprof -traces ---\n{traces}");
    // Each trace: a separator line, then `   <value>B   leaf`, then callers.
    let mut by_leaf: BTreeMap<String, u64> = BTreeMap::new();
    let mut sum = 0;
    let mut lines = traces.lines();
    while let Some(l) = lines.next() {
        if l.starts_with("-----------+")
            && let Some(first) = lines.next()
        {
            let f: Vec<&str> = first.split_whitespace().collect();
            if let Some(v) = f.first().and_then(|v| bytes_value(v)) {
                sum += v;
                *by_leaf.entry(f[1..].join(" ")).or_insert(0) += v;
            }
        }
    }
    assert_eq!(
        sum, folded_total,
        "sum of the traces vs the folded total\n{ctx}"
    );
    assert_eq!(by_leaf, leaves, "traces per leaf vs folded per leaf\n{ctx}");
}

#[test]
fn pprof_agrees_with_folded_c() {
    let (_dir, bin) = compiled("sym-pprof-c-bin", "sym_split.c");
    check_pprof_against_folded("sym-pprof-c", &bin);
}

#[test]
fn pprof_agrees_with_folded_cpp() {
    // libstdc++'s start-up allocation comes through ld.so without symbols:
    // unnamed frames must agree too.
    let (_dir, bin) = compiled("sym-pprof-cpp-bin", "sym_template.cpp");
    check_pprof_against_folded("sym-pprof-cpp", &bin);
}

/// `.gnu_debugaltlink`: dwz moves DWARF shared by two programs (here the
/// inline function's description) into a supplementary file. Its name then
/// comes only from that file: with it, the inline frame is named; without
/// it, the name is lost (which shows the file is really read).
#[test]
fn dwz_supplementary_file_names_inline_frames() {
    let (dir, a) = compiled("sym-dwz", "sym_dwz_a.c");
    let b = compile("sym_dwz_b.c", "sym_dwz_b", &dir, &[]);
    let common = dir.join("common.debug");
    output_ok(
        Command::new("dwz")
            .arg("-m")
            .arg(&common)
            .arg("-M")
            .arg(&common)
            .arg(&a)
            .arg(&b),
        "dwz (package dwz; `make test` installs it)",
    );
    let run = |tag: &str| {
        let d = tempdir(tag);
        let o = run_preloaded(
            &d,
            &a,
            &[],
            &[("HEAPLIVE_SAMPLE_INTERVAL", "1"), ("HEAPLIVE_LINES", "1")],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o), "4242\n");
        only_folded(&d)
    };
    let with = run("sym-dwz-with");
    let leaf = with
        .iter()
        .find(|s| s.frames.iter().any(|f| f.starts_with("user_fn_a")))
        .expect("user_fn_a's stack");
    assert!(
        leaf.leaf()
            .starts_with("shared_inline_alloc (sym_dwz_shared.h:"),
        "the inline frame should be named from the supplementary file: {:?}",
        leaf.frames
    );
    assert_eq!(leaf.bytes, 4242 + 120);
    std::fs::rename(&common, dir.join("moved.debug")).unwrap();
    let without = run("sym-dwz-without");
    assert!(
        !without.iter().any(|s| s
            .frames
            .iter()
            .any(|f| f.starts_with("shared_inline_alloc"))),
        "without the supplementary file the name cannot be known: {without:?}"
    );
}

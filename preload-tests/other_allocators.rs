//! Another allocator reached before heaplive (issue 25, item 5) and an
//! `LD_AUDIT` module that binds symbols (item 6).
//!
//! jemalloc or tcmalloc earlier in `LD_PRELOAD` than heaplive: the
//! program's modules bind malloc to it; heaplive names it in one line with
//! the fix, redirects the modules' call slots to itself and forwards to
//! it, so exact mode still gives every call site's bytes. An executable
//! with its own malloc can only be reported. Under an audit module the
//! loader calls malloc before libc's initialiser: the settings and the
//! program's name are still read.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
const TCMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";

fn present(path: &str, package: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: scripts/install-test-deps.sh installs {package}"
    );
}

/// `bin` in `dir` with `env` and nothing of heaplive's (the reference run).
fn run_with(dir: &Path, bin: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin);
    c.current_dir(dir).env_remove("LD_PRELOAD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run the program")
}

fn assert_same(what: &str, reference: &Output, pre: &Output) {
    assert!(
        reference.status.code() == pre.status.code() && reference.stdout == pre.stdout,
        "{what}: heaplive changed the program's behaviour\n===== without heaplive =====\n{}\n===== with heaplive =====\n{}",
        show(reference),
        show(pre)
    );
}

/// [`assert_same`], and heaplive's one line that contains `needle`
/// (`about`: what it is about, for the message): that line.
fn same_and_one_line(
    what: &str,
    reference: &Output,
    pre: &Output,
    needle: &str,
    about: &str,
) -> String {
    assert_same(what, reference, pre);
    let err = stderr(pre);
    one_line_with(&err, needle, &format!("one line about {about}:\n{err}")).to_string()
}

/// other_alloc.cpp's call sites and their exact live bytes (leaf frame).
const SITES: [(&str, u64); 11] = [
    ("site_malloc", 10001),
    ("site_calloc", 7 * 1429),
    ("site_realloc", 20011),
    ("rg_origin", 0),
    ("site_posix_memalign", 10007),
    ("site_aligned_alloc", 10496),
    ("site_new", 4001),
    ("site_new_array", 3003),
    ("site_malloc_freed", 0),
    ("site_new_freed", 0),
    // libc's strdup calls malloc through libc's own slot.
    ("__strdup", 100),
];

fn assert_sites(what: &str, stacks: &[Stack], pre: &Output) {
    let by_leaf = bytes_by_leaf(stacks);
    assert_sites_by(what, stacks, pre, &|leaf| match leaf {
        // libc's strdup is the leaf, under site_strdup.
        "__strdup" => stacks
            .iter()
            .filter(|s| s.leaf() == "__strdup" && s.has("site_strdup"))
            .map(|s| s.bytes)
            .sum(),
        _ => by_leaf.get(leaf).copied().unwrap_or(0),
    });
}

/// The same with `bytes(site)` for each site's bytes.
fn assert_sites_by(what: &str, stacks: &[Stack], pre: &Output, bytes: &dyn Fn(&str) -> u64) {
    assert_site_bytes(what, &SITES, bytes, &|| {
        format!("{stacks:#?}\n{}", show(pre))
    });
}

/// Asserts that each of `sites` (leaf, exact live bytes) holds its bytes,
/// `bytes(leaf)`; the message: `what`, the sites that differ, `detail()`.
fn assert_site_bytes(
    what: &str,
    sites: &[(&str, u64)],
    bytes: &dyn Fn(&str) -> u64,
    detail: &dyn Fn() -> String,
) {
    let bad: Vec<String> = sites
        .iter()
        .filter_map(|&(leaf, want)| {
            let got = bytes(leaf);
            (got != want).then(|| format!("{leaf}: expected {want} live bytes, profile says {got}"))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{what} (exact live bytes per call site):\n  {}\n{}",
        bad.join("\n  "),
        detail()
    );
}

fn other_alloc(dir: &Path) -> PathBuf {
    compile("other_alloc.cpp", "other_alloc", dir, &[])
}

/// other_alloc built in `dir` and run there without heaplive, with
/// `var`=`value` (another allocator, an audit module, a wrapper): the
/// reference run, which must end with other_alloc's status 3. The binary
/// and that run.
fn reference_run(dir: &Path, var: &str, value: &str) -> (PathBuf, Output) {
    let bin = other_alloc(dir);
    let reference = run_with(dir, &bin, &[(var, value)]);
    assert_eq!(reference.status.code(), Some(3), "{}", show(&reference));
    (bin, reference)
}

/// [`reference_run`] in a fresh directory ([`tempdir`] `tag`) with
/// `var` naming the shared object built there from `progs/SRC`
/// (`STEM.so`): the directory, the object's path, the binary and the run.
fn with_object(tag: &str, src: &str, var: &str) -> (TempDir, String, PathBuf, Output) {
    let dir = tempdir(tag);
    let stem = src.strip_suffix(".c").expect("a C source");
    let object = compile_so(src, &format!("{stem}.so"), &dir);
    let object = object.to_str().expect("utf-8 temp path").to_string();
    let (bin, reference) = reference_run(&dir, var, &object);
    (dir, object, bin, reference)
}

/// `bin` in exact mode with LD_PRELOAD=`order` (heaplive and an allocator).
fn run_in_order(dir: &Path, bin: &Path, order: &str) -> Output {
    run_preloaded(
        dir,
        bin,
        &[],
        &[("LD_PRELOAD", order), ("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    )
}

/// `allocator` first in LD_PRELOAD, heaplive second, exact mode.
fn allocator_first(allocator: &str, package: &str) {
    present(allocator, package);
    let dir = tempdir("other-alloc");
    let (bin, reference) = reference_run(&dir, "LD_PRELOAD", allocator);
    let lib = lib();
    let order = format!("{allocator} {}", lib.display());
    let pre = run_in_order(&dir, &bin, &order);
    let said = same_and_one_line(allocator, &reference, &pre, "LD_PRELOAD", "the order");
    assert!(
        said.contains(&format!("malloc is {allocator}'s"))
            && said.contains("put libheaplive.so first in LD_PRELOAD"),
        "the line names the allocator and the fix:\n{}",
        said
    );
    assert_sites(allocator, &only_folded(&dir), &pre);

    // In the right order nothing is said, and the profile is the same.
    let dir = tempdir("other-alloc-after");
    let bin = other_alloc(&dir);
    let order = format!("{} {allocator}", lib.display());
    let pre = run_in_order(&dir, &bin, &order);
    assert_same(allocator, &reference, &pre);
    let err = stderr(&pre);
    assert!(lines_with(&err, "malloc is").is_empty(), "{err}");
    assert_sites(allocator, &only_folded(&dir), &pre);
}

#[test]
fn jemalloc_first_in_ld_preload_is_named_and_profiled_through_it() {
    allocator_first(JEMALLOC, "libjemalloc2");
}

#[test]
fn tcmalloc_first_in_ld_preload_is_named_and_profiled_through_it() {
    allocator_first(TCMALLOC, "libtcmalloc-minimal4");
}

/// Libraries dlopen'ed after start bind malloc to the allocator that came
/// first too: their slots are redirected like the start-up modules', one
/// by a path (at its dlopen), one by a bare name (at the next dlopen).
fn late_libraries(allocator: &str, package: &str) {
    present(allocator, package);
    let (dir, host) = compiled("other-alloc-late", "late_host.c");
    let lib_a = compile(
        "late_lib.c",
        "liblate_a.so",
        &dir,
        &["-shared", "-fPIC", "-DTAG=a"],
    );
    compile(
        "late_lib.c",
        "liblate_b.so",
        &dir,
        &["-shared", "-fPIC", "-DTAG=b", "-DSIZE_STEP=2"],
    );
    let dir_s = dir.to_str().expect("utf-8 temp path");
    let args = [lib_a.to_str().expect("utf-8 temp path"), "liblate_b.so"];
    let env = [("LD_PRELOAD", allocator), ("LD_LIBRARY_PATH", dir_s)];
    let mut reference = Command::new(&host);
    reference.args(args).current_dir(&dir);
    for (k, v) in env {
        reference.env(k, v);
    }
    let reference = reference.output().expect("run the program");
    assert_eq!(reference.status.code(), Some(5), "{}", show(&reference));
    let order = format!("{allocator} {}", lib().display());
    let pre = run_preloaded(
        &dir,
        &host,
        &args,
        &[
            ("LD_PRELOAD", &order),
            ("LD_LIBRARY_PATH", dir_s),
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
        ],
    );
    assert_same(allocator, &reference, &pre);
    let by_leaf = bytes_by_leaf(&only_folded(&dir));
    let want = [
        ("late_a_malloc", 30011),
        ("late_a_calloc", 3 * 10007),
        ("late_a_realloc", 20023),
        ("late_a_origin", 0),
        ("late_a_freed", 0),
        ("late_b_malloc", 30013),
        ("late_b_calloc", 3 * 10009),
        ("late_b_realloc", 20025),
        ("late_b_origin", 0),
        ("late_b_freed", 0),
    ];
    assert_site_bytes(
        &format!("{allocator} first, libraries loaded later"),
        &want,
        &|leaf| by_leaf.get(leaf).copied().unwrap_or(0),
        &|| format!("{by_leaf:#?}\n{}", show(&pre)),
    );
}

#[test]
fn jemalloc_first_libraries_loaded_later_are_profiled() {
    late_libraries(JEMALLOC, "libjemalloc2");
}

#[test]
fn tcmalloc_first_libraries_loaded_later_are_profiled() {
    late_libraries(TCMALLOC, "libtcmalloc-minimal4");
}

#[test]
fn an_executable_with_its_own_malloc_is_reported_in_one_line() {
    let (dir, bin) = compiled("own-malloc", "own_malloc.c");
    let reference = run_with(&dir, &bin, &[]);
    assert_eq!(reference.status.code(), Some(7), "{}", show(&reference));
    let pre = run_preloaded(&dir, &bin, &[], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    let said = same_and_one_line(
        "own_malloc",
        &reference,
        &pre,
        "its own malloc",
        "the program's malloc",
    );
    assert!(
        said.contains(&format!("({})", bin.display())),
        "the line names the executable:\n{}",
        said
    );
}

#[test]
fn settings_and_program_name_are_read_under_an_audit_module() {
    let (dir, audit, bin, reference) = with_object("audit", "audit_bind.c", "LD_AUDIT");
    let pre = run_preloaded(
        &dir,
        &bin,
        &[],
        &[("LD_AUDIT", &audit), ("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    assert_same("LD_AUDIT", &reference, &pre);
    // The template's %e is the program's name.
    let files = folded_files(&dir);
    assert!(
        files.len() == 1
            && files[0]
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("heaplive.other_alloc.")),
        "one dump named after the program: {files:?}\n{}",
        show(&pre)
    );
    // HEAPLIVE_SAMPLE_INTERVAL=1 was read: exact bytes per call site.
    assert_sites("LD_AUDIT", &parse_folded(&files[0]), &pre);
}

#[test]
fn a_wrapper_that_forwards_to_the_next_malloc_is_left_alone() {
    // fwd_wrapper.so before heaplive forwards every call to heaplive's
    // malloc (RTLD_NEXT): heaplive is reached and must forward to libc, not
    // back to the wrapper (that would never end), and say nothing.
    let (dir, wrapper, bin, reference) = with_object("fwd-wrapper", "fwd_wrapper.c", "LD_PRELOAD");
    let order = format!("{wrapper} {}", lib().display());
    let pre = run_in_order(&dir, &bin, &order);
    assert_same("a forwarding wrapper first", &reference, &pre);
    let err = stderr(&pre);
    assert!(lines_with(&err, "malloc is").is_empty(), "{err}");
    // The wrapper's own malloc is the leaf: each site's bytes are those of
    // the stacks through it (strdup's under site_strdup).
    let stacks = only_folded(&dir);
    assert_sites_by(
        "a forwarding wrapper first",
        &stacks,
        &pre,
        &|site| match site {
            "__strdup" => bytes_under(&stacks, "site_strdup"),
            s => bytes_under(&stacks, s),
        },
    );
}

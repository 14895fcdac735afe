//! Exact mode (`HEAPLIVE_SAMPLE_INTERVAL=1`): C and C++ programs from
//! `progs/` with named `noinline` functions and distinctive sizes. Every
//! check runs the program with and without the preload, requires the same
//! stdout and exit status, and then the exact live bytes per call site (the
//! leaf frame: the function that called the allocation entry point).

use crate::common::{self, Stack, show};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;

/// Compiles `src` once per test binary run (several tests share a program).
fn built(src: &str, out_name: &str, extra: &[&str]) -> PathBuf {
    static CACHE: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    if let Some(p) = map.get(out_name) {
        return p.clone();
    }
    let dir = common::tempdir(&format!("core-bin-{out_name}")).keep();
    let p = common::compile(src, out_name, &dir, extra);
    map.insert(out_name.to_string(), p.clone());
    p
}

/// The program's stdout and exit status must not change under the preload.
fn assert_same(what: &str, plain: &Output, pre: &Output) {
    if plain.status.code() != pre.status.code() || plain.stdout != pre.stdout {
        panic!(
            "{what}: the preload changed the program's behaviour\n\n===== without the preload =====\n{}\n===== with the preload =====\n{}",
            show(plain),
            show(pre)
        );
    }
}

/// Runs `bin args` plainly and in exact mode in a fresh directory; asserts
/// the same behaviour and, when `expect_ok`, success. Returns the preloaded
/// run's output and its folded stacks.
fn run_exact(tag: &str, bin: &Path, args: &[&str], expect_ok: bool) -> (Output, Vec<Stack>) {
    let dir = common::tempdir(tag);
    let plain = common::run_plain(&dir, bin, args);
    if expect_ok {
        assert!(
            plain.status.success(),
            "{tag}: the program fails even without the preload:\n{}",
            show(&plain)
        );
    }
    let pre = common::run_preloaded(&dir, bin, args, &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert_same(tag, &plain, &pre);
    let files = common::folded_files(&dir);
    assert_eq!(
        files.len(),
        1,
        "{tag}: expected one folded file in {}, found {files:?}\n{}",
        dir.display(),
        show(&pre)
    );
    let stacks = common::parse_folded(&files[0]);
    (pre, stacks)
}

fn dump(stacks: &[Stack]) -> String {
    let mut s = String::new();
    for st in stacks {
        s.push_str(&format!("  {} {}\n", st.frames.join(";"), st.bytes));
    }
    s
}

/// Exact bytes per leaf for every `(leaf, bytes)` in `want`; collects all
/// mismatches into one message with the whole profile.
fn assert_leaves(tag: &str, stacks: &[Stack], want: &[(&str, u64)], absent: &[&str]) {
    let by_leaf = common::bytes_by_leaf(stacks);
    let mut bad = Vec::new();
    for (leaf, bytes) in want {
        let got = by_leaf.get(*leaf).copied().unwrap_or(0);
        if got != *bytes {
            bad.push(format!(
                "leaf {leaf}: expected {bytes} live bytes, profile says {got}"
            ));
        }
    }
    for name in absent {
        let got = common::bytes_under(stacks, name);
        if got != 0 {
            bad.push(format!("{name}: its allocations were all freed, yet {got} bytes are live in stacks through it"));
        }
    }
    assert!(
        bad.is_empty(),
        "{tag}:\n  {}\nfolded profile:\n{}",
        bad.join("\n  "),
        dump(stacks)
    );
}

#[test]
fn core_exact_c_entry_points() {
    let bin = built("core_c_api.c", "core_c_api", &[]);
    let (pre, stacks) = run_exact("core-c-api", &bin, &[], true);
    // The program checked errno, ENOMEM, alignment, malloc_usable_size and
    // dlerror itself; its "ok:" lines were equal with and without us.
    assert!(
        common::stdout(&pre).contains("; 0 failures"),
        "core_c_api:\n{}",
        show(&pre)
    );
    assert_leaves(
        "core_c_api (exact live bytes per call site)",
        &stacks,
        &[
            ("site_malloc", 10001),
            ("site_calloc", 7 * 1429),
            ("site_realloc_grow", 20011),
            ("site_realloc_shrink", 3013),
            ("chain_3", 70007),
            ("site_realloc_steps", 8997),
            ("site_realloc_null", 6007),
            // A failed realloc leaves the block live at its origin.
            ("rf_origin", 3333),
            ("site_reallocarray", 13 * 777),
            // A failed (overflowing) reallocarray, likewise.
            ("ra_ovf_origin", 2222),
            ("site_reallocarray_null", 9 * 1001),
            ("site_posix_memalign", 10007),
            ("site_aligned_alloc", 10496),
            ("site_memalign", 10009),
            ("site_valloc", 10011),
            ("site_pvalloc", 10013),
            // The 100 bytes of strdup are counted once: libc's strdup calls
            // malloc, so the leaf is libc's __strdup.
            ("__strdup", 100),
            // Blocks that moved away or were freed.
            ("site_malloc_freed", 0),
            ("site_calloc_freed", 0),
            ("rg_origin", 0),
            ("rs_origin", 0),
            ("chain_origin", 0),
            ("chain_1", 0),
            ("chain_2", 0),
            ("steps_origin", 0),
            ("r0_origin", 0),
            ("site_realloc_zero", 0),
            ("ra_origin", 0),
            ("site_realloc_fail", 0),
            ("site_reallocarray_ovf", 0),
        ],
        &[
            "site_malloc_freed",
            "site_calloc_freed",
            "rg_origin",
            "rs_origin",
            "chain_origin",
            "chain_1",
            "chain_2",
            "steps_origin",
            "r0_origin",
            "site_realloc_zero",
            "ra_origin",
            "site_posix_memalign_freed",
            "site_posix_memalign_einval",
            "site_aligned_freed",
            "site_usable_size",
            "errno_checks",
            "many_freed",
        ],
    );
    let strdup_under_site = stacks
        .iter()
        .filter(|s| s.leaf() == "__strdup" && s.has("site_strdup"))
        .map(|s| s.bytes)
        .sum::<u64>();
    assert_eq!(
        strdup_under_site,
        100,
        "strdup's block must be under site_strdup:\n{}",
        dump(&stacks)
    );
    for s in &stacks {
        assert!(
            !s.frames.iter().any(|f| f.contains("heaplive")
                || f.starts_with("_Znwm")
                || f.starts_with("operator new")),
            "a frame of the library or of operator new appears in a C program's profile:\n  {}",
            s.frames.join(";")
        );
    }
}

/// New variant functions of core_cxx_ops.cpp: (leaf, base size). Each
/// allocates base+0..3, keeps base+0, frees base+1..3 through the three
/// matching deletes (in this order).
const NEW_VARIANTS: [(&str, u64, [&str; 3]); 8] = [
    ("new_plain", 2000, DELETE),
    ("new_array", 2100, DELETE_ARRAY),
    ("new_nothrow", 2200, DELETE),
    ("new_array_nothrow", 2300, DELETE_ARRAY),
    ("new_aligned", 2400, DELETE_ALIGNED),
    ("new_array_aligned", 2500, DELETE_ARRAY_ALIGNED),
    ("new_aligned_nothrow", 2600, DELETE_ALIGNED),
    ("new_array_aligned_nothrow", 2700, DELETE_ARRAY_ALIGNED),
];

/// The three deletes of a variant: plain, nothrow, sized (mangled).
const DELETE: [&str; 3] = ["_ZdlPv", "_ZdlPvRKSt9nothrow_t", "_ZdlPvm"];
const DELETE_ARRAY: [&str; 3] = ["_ZdaPv", "_ZdaPvRKSt9nothrow_t", "_ZdaPvm"];
const DELETE_ALIGNED: [&str; 3] = [
    "_ZdlPvSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdlPvmSt11align_val_t",
];
const DELETE_ARRAY_ALIGNED: [&str; 3] = [
    "_ZdaPvSt11align_val_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvmSt11align_val_t",
];

#[test]
fn core_exact_cxx_twenty_new_delete_variants() {
    let (_, stacks) = cxx_ops("core-cxx-variants", "variants", "variants: 0 failures");
    let by_leaf = common::bytes_by_leaf(&stacks);
    let mut bad = Vec::new();
    for (leaf, base, deletes) in NEW_VARIANTS {
        let got = by_leaf.get(leaf).copied().unwrap_or(0);
        if got == base {
            continue;
        }
        // Name the deletes whose block is still counted.
        let mut why = Vec::new();
        if got < base {
            why.push(format!(
                "the kept block of {base} bytes is missing or under-counted"
            ));
        } else {
            let extra = got - base;
            for mask in 1u64..8 {
                let sum: u64 = (0..3)
                    .filter(|k| mask & (1 << k) != 0)
                    .map(|k| base + 1 + k)
                    .sum();
                if sum == extra {
                    for k in 0..3 {
                        if mask & (1 << k) != 0 {
                            why.push(format!(
                                "block of {} bytes freed by {} still counted",
                                base + 1 + k,
                                deletes[k as usize]
                            ));
                        }
                    }
                }
            }
            if why.is_empty() {
                why.push(format!("{extra} unexplained extra bytes"));
            }
        }
        bad.push(format!(
            "{leaf}: expected {base} live bytes, profile says {got}: {}",
            why.join("; ")
        ));
    }
    for del in [
        "del_plain",
        "del_plain_nothrow",
        "del_plain_sized",
        "del_array",
        "del_array_nothrow",
        "del_array_sized",
        "del_aligned",
        "del_aligned_nothrow",
        "del_aligned_sized",
        "del_array_aligned",
        "del_array_aligned_nothrow",
        "del_array_aligned_sized",
    ] {
        let got = common::bytes_under(&stacks, del);
        if got != 0 {
            bad.push(format!(
                "{del} allocates nothing, yet {got} bytes are live under it"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "operator new/delete variants:\n  {}\nfolded profile:\n{}",
        bad.join("\n  "),
        dump(&stacks)
    );
    // Each new is counted once, at the program's function: libstdc++'s new
    // calls malloc/aligned_alloc, which must not add a second stack.
    for s in &stacks {
        if let Some(i) = s.frames.iter().position(|f| f.starts_with("new_")) {
            assert_eq!(
                i,
                s.frames.len() - 1,
                "an allocation through a new variant has frames below the program's function (counted inside libstdc++?):\n  {}",
                s.frames.join(";")
            );
        }
    }
}

#[test]
fn core_exact_cxx_nothrow_new_returns_null_for_impossible_size() {
    cxx_ops("core-cxx-nothrow", "nothrow", "nothrow: 0 failures");
}

#[test]
fn core_exact_cxx_bad_alloc_is_caught() {
    let (_, stacks) = cxx_ops(
        "core-cxx-bad-alloc",
        "bad_alloc",
        "caught std::bad_alloc 5 times of 5",
    );
    assert_eq!(
        common::bytes_under(&stacks, "catch_bad_alloc")
            - stdout_buffer_under(&stacks, "catch_bad_alloc"),
        0,
        "{}",
        dump(&stacks)
    );
}

/// core_cxx_ops MODE in exact mode (run_exact, compared with the plain
/// run), asserting its stdout says `says`: its output and stacks.
fn cxx_ops(tag: &str, mode: &str, says: &str) -> (Output, Vec<Stack>) {
    let bin = built("core_cxx_ops.cpp", "core_cxx_ops", &[]);
    let (pre, stacks) = run_exact(tag, &bin, &[mode], true);
    assert!(common::stdout(&pre).contains(says), "{}", show(&pre));
    (pre, stacks)
}

/// Bytes of stdio's own buffer (allocated by the first printf) under `name`.
fn stdout_buffer_under(stacks: &[Stack], name: &str) -> u64 {
    stacks
        .iter()
        .filter(|s| s.has(name) && s.leaf() == "_IO_file_doallocate")
        .map(|s| s.bytes)
        .sum()
}

#[test]
fn core_exact_cxx_new_handler_is_called() {
    cxx_ops("core-cxx-handlers", "handlers", "handlers: 0 failures");
}

#[test]
fn core_exact_thousand_threads_cross_thread_frees() {
    let bin = built("core_threads.c", "core_threads", &[]);
    let (pre, stacks) = run_exact("core-threads", &bin, &[], true);
    let out = common::stdout(&pre);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for l in out.lines() {
        if let Some(rest) = l.strip_prefix("expect ") {
            let (k, v) = rest.split_once(' ').unwrap();
            want.insert(k.to_string(), v.parse().unwrap());
        }
    }
    assert_eq!(
        want.len(),
        6,
        "core_threads printed no expectations:\n{}",
        show(&pre)
    );
    let want_ref: Vec<(&str, u64)> = want.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_leaves(
        "1,000 threads with cross-thread frees",
        &stacks,
        &want_ref,
        &["thr_freed"],
    );
}

#[test]
fn core_exact_cxx_library_dlopened_local_from_c() {
    let dir = common::tempdir("core-dl-bin");
    let lib = common::compile_so("dl_cxxlib.cpp", "libdl_cxxlib.so", &dir);
    let host = common::compile("dl_host.c", "dl_host", &dir, &[]);
    let lib_arg = lib.to_str().unwrap();
    let (pre, stacks) = run_exact("core-dl", &host, &[lib_arg], true);
    let out = common::stdout(&pre);
    assert!(
        out.contains("dl_lib_run returned 42") && out.contains("0 failures"),
        "{}",
        show(&pre)
    );
    assert_leaves(
        "C++ library dlopen'ed RTLD_LOCAL from a C program",
        &stacks,
        &[
            ("dl_lib_new_object", 7777),
            ("dl_lib_new_aligned", 6666),
            ("dl_lib_new_nothrow", 5555),
            ("dl_lib_vector", 24),
            ("dl_lib_new_freed", 0),
        ],
        &["dl_lib_new_freed"],
    );
    // The vector's final buffer (capacity 1024 ints) through std::vector's
    // frames, plus the vector object itself.
    assert_eq!(
        common::bytes_under(&stacks, "dl_lib_vector"),
        24 + 4096,
        "{}",
        dump(&stacks)
    );
    for leaf in [
        "dl_lib_new_object",
        "dl_lib_new_aligned",
        "dl_lib_new_nothrow",
    ] {
        assert!(
            stacks
                .iter()
                .any(|s| s.leaf() == leaf && s.has("dl_lib_run") && s.has("main")),
            "{leaf} is not under main;dl_lib_run:\n{}",
            dump(&stacks)
        );
    }
}

/// Issue 14 item 16: in exact mode `malloc(0)` is a live block: 100,000 of
/// them reach HEAPLIVE_WARN_BLOCKS (before the fix none was recorded, and
/// no warning came).
#[test]
fn core_exact_malloc_zero_blocks_are_live_blocks() {
    let (_dir, o) = common::run_prog_in(
        "zero-blocks",
        "zero_blocks",
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_WARN_BYTES", "0"),
            ("HEAPLIVE_WARN_BLOCKS", "50000"),
        ],
    );
    let err = common::stderr(&o);
    assert!(
        err.lines()
            .any(|l| l.contains("possible leak: 0 B live in 50,000 blocks")),
        "{}",
        show(&o)
    );
}

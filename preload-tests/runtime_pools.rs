//! Runtime pools (issue 29 item 12): libstdc++'s emergency exception pool,
//! allocated when libstdc++ loads and held for the process's life, is
//! shown apart at exit: its stack has the root frame `[runtime pool: ...]`,
//! the exit line gives its total apart, it gets no leak warning, and an
//! exit with nothing else live writes no dump (unless HEAPLIVE_DUMP_EMPTY=1).

use crate::common::*;

const POOL: &str = "[runtime pool: libstdc++ emergency exception pool]";

#[test]
fn libstdcxx_emergency_pool_is_apart_and_never_a_leak() {
    let (dir, o) = run_prog_in(
        "runtime-pool",
        "runtime_pool.cpp",
        &["3"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_WARN_BYTES", "1K"),
        ],
    );
    let err = stderr(&o);
    let files = folded_files(dir.path());
    assert_eq!(files.len(), 1, "{err}");
    let stacks = parse_folded(&files[0]);
    let pool: Vec<&Stack> = stacks.iter().filter(|s| s.frames[0] == POOL).collect();
    assert_eq!(pool.len(), 1, "one pool stack\n{stacks:#?}");
    // GCC 12's pool is 72,704 bytes; other versions size it differently.
    let pool_bytes = pool[0].bytes;
    assert!((16 << 10..1 << 20).contains(&pool_bytes), "{pool_bytes}");
    assert!(pool[0].leaf().contains("libstdc++"), "{:?}", pool[0]);
    // The program's own blocks are not the pool's, and hold what it left.
    assert_eq!(bytes_under(&stacks, "keep_blocks"), 3 * 5001, "{stacks:#?}");
    assert!(
        stacks
            .iter()
            .filter(|s| s.has("keep_blocks"))
            .all(|s| s.frames[0] != POOL)
    );
    // The line: the total with the pool, and the pool apart.
    let line = line_with(&err, ": exit dump ").unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("; runtime pools ")
            && line.contains(
                "libstdc++ emergency exception pool: held for the process's life, not a leak"
            ),
        "{line}"
    );
    // A leak warning for the program's blocks, none for the pool.
    let warnings: Vec<&str> = lines_with(&err, "possible leak");
    assert!(warnings.iter().any(|l| l.contains("keep_blocks")), "{err}");
    assert!(
        warnings
            .iter()
            .all(|l| !l.contains("libstdc++") && !l.contains("call_init")),
        "{err}"
    );
}

/// A fork's child (a worker) that exits with nothing live but the pool
/// writes no dump, one line says so; its parent (not a fork's child)
/// writes its own; HEAPLIVE_DUMP_EMPTY=1 writes the child's too.
#[test]
fn worker_exit_with_only_runtime_pools_live_writes_no_dump_unless_asked() {
    let (dir, prog) = compiled("runtime-pool-empty", "runtime_pool.cpp");
    let o = run_preloaded(
        dir.path(),
        &prog,
        &["0", "fork"],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    assert!(o.status.success(), "{}", show(&o));
    let err = stderr(&o);
    let files = folded_files(dir.path());
    let parent = o_pid(&files);
    assert_eq!(files.len(), 1, "the parent's dump only\n{err}");
    let skipped = one_line_with(&err, "exit dump skipped", &err);
    assert!(
        skipped.contains("exit dump skipped: nothing live; runtime pools ")
            && skipped.contains("(HEAPLIVE_DUMP_EMPTY=1 writes it)")
            && !skipped.contains(&format!("[{parent}]")),
        "{err}"
    );
    // The parent's dump holds the pool alone, apart.
    let stacks = parse_folded(&files[0]);
    assert!(
        !stacks.is_empty() && stacks.iter().all(|s| s.frames[0] == POOL),
        "{stacks:#?}"
    );
    // Asked for: the child's dump too.
    let dir = tempdir("runtime-pool-empty-asked");
    let o = run_preloaded(
        dir.path(),
        &prog,
        &["0", "fork"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_DUMP_EMPTY", "1"),
        ],
    );
    let err = stderr(&o);
    assert_eq!(folded_files(dir.path()).len(), 2, "{err}");
    assert!(!err.contains("skipped"), "{err}");
    // A child with blocks of its own writes its dump.
    let dir = tempdir("runtime-pool-child-keeps");
    let o = run_preloaded(
        dir.path(),
        &prog,
        &["2", "fork"],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1")],
    );
    let err = stderr(&o);
    assert_eq!(folded_files(dir.path()).len(), 2, "{err}");
}

/// The pid in a dump's name `heaplive.PROG.PID.N.folded`.
fn o_pid(files: &[std::path::PathBuf]) -> String {
    files
        .first()
        .and_then(|f| f.file_name()?.to_str()?.split('.').nth(2).map(String::from))
        .unwrap_or_default()
}

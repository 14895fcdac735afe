//! Runtime pools (issue 29 item 12): libstdc++'s emergency exception pool,
//! allocated when libstdc++ loads and held for the process's life, is
//! shown apart at exit: its stack has the root frame `[runtime pool: ...]`,
//! the exit line gives its total apart, it gets no leak warning, and an
//! exit with nothing else live writes no dump (unless HEAPLIVE_DUMP_EMPTY=1).

use crate::common::*;

const POOL: &str = "[runtime pool: libstdc++ emergency exception pool]";

#[test]
fn libstdcxx_emergency_pool_is_apart_and_never_a_leak() {
    let dir = tempdir("runtime-pool");
    let prog = compile("runtime_pool.cpp", "runtime_pool", dir.path(), &[]);
    let o = run_preloaded(
        dir.path(),
        &prog,
        &["3"],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_WARN_BYTES", "1K"),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
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
    assert!(stacks.iter().filter(|s| s.has("keep_blocks")).all(|s| s.frames[0] != POOL));
    // The line: the total with the pool, and the pool apart.
    let line = err
        .lines()
        .find(|l| l.contains(": exit dump "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("; runtime pools ")
            && line.contains("libstdc++ emergency exception pool: held for the process's life, not a leak"),
        "{line}"
    );
    // A leak warning for the program's blocks, none for the pool.
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("possible leak")).collect();
    assert!(warnings.iter().any(|l| l.contains("keep_blocks")), "{err}");
    assert!(
        warnings
            .iter()
            .all(|l| !l.contains("libstdc++") && !l.contains("call_init")),
        "{err}"
    );
}

#[test]
fn exit_with_only_runtime_pools_live_writes_no_dump_unless_asked() {
    let dir = tempdir("runtime-pool-empty");
    let prog = compile("runtime_pool.cpp", "runtime_pool", dir.path(), &[]);
    let o = run_preloaded(dir.path(), &prog, &["0"], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert!(o.status.success(), "{}", show(&o));
    let err = stderr(&o);
    assert!(folded_files(dir.path()).is_empty(), "{err}");
    assert!(
        err.contains("exit dump skipped: nothing live; runtime pools ")
            && err.contains("(HEAPLIVE_DUMP_EMPTY=1 writes it)"),
        "{err}"
    );
    assert!(!err.contains(": exit dump /"), "{err}");
    // Asked for: the dump, with the pool alone in it.
    let o = run_preloaded(
        dir.path(),
        &prog,
        &["0"],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "1"), ("HEAPLIVE_DUMP_EMPTY", "1")],
    );
    let err = stderr(&o);
    let files = folded_files(dir.path());
    assert_eq!(files.len(), 1, "{err}");
    let stacks = parse_folded(&files[0]);
    assert!(!stacks.is_empty() && stacks.iter().all(|s| s.frames[0] == POOL), "{stacks:#?}");
}

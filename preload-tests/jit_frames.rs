//! Issue 29, item 11: stacks go on through JIT code that keeps frame
//! pointers (no FDE: heaplive follows the frame-pointer chain, reading
//! only inside the thread's stack), its frames named from the perf map and
//! marked `[jit]`: a C program's hand-made JIT function, and node (Debian's
//! `nodejs`, `--perf-basic-prof`), whose stacks reach `main`.

use crate::common::*;

#[test]
fn stacks_continue_through_a_jit_frame_to_main() {
    let dir = tempdir("jit-frames");
    let (_, o, pid, _cleanup) = run_sym_jit(&dir);
    assert!(o.status.success() && pid.is_some(), "{}", show(&o));
    let stacks = only_folded(&dir);
    let jit: Vec<&Stack> = stacks
        .iter()
        .filter(|s| s.leaf() == "jitted_alloc [jit]")
        .collect();
    assert_eq!(jit.len(), 1, "{stacks:?}");
    assert_eq!(jit[0].bytes, 3 * 4242);
    // The caller of the JIT function is main, and the stack goes on to
    // libc's start (it ended at the JIT frame before).
    let f = &jit[0].frames;
    let at = f.iter().position(|x| x == "jitted_alloc [jit]").unwrap();
    assert!(at > 0 && f[at - 1] == "main", "{f:?}");
    assert!(f.iter().any(|x| x.contains("__libc_start")), "{f:?}");
}

#[test]
fn node_stacks_reach_main_through_jit_frames() {
    let dir = tempdir("jit-node");
    let script = dir.file(
        "app.js",
        b"function leaf_alloc(n) { const a = []; for (let i = 0; i < n; i++) a.push(Buffer.alloc(65536)); return a; }\n\
function middle_fn(n) { return leaf_alloc(n); }\n\
function outer_fn() { const keep = []; for (let j = 0; j < 40; j++) keep.push(middle_fn(20)); return keep; }\n\
globalThis.kept = outer_fn();\n",
    );
    let mut c = preloaded_command(
        dir.path(),
        std::path::Path::new("node"),
        &[
            "--perf-basic-prof",
            "--interpreted-frames-native-stack",
            &script,
        ],
        &[("HEAPLIVE_SAMPLE_INTERVAL", "64K")],
    );
    let child = c
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("node (nodejs)");
    let pid = child.id();
    let _cleanup = PerfMap::of(pid);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    // The peak holds the 40 x 20 buffers of 64 KiB (50 MiB, ~800 samples
    // at 64K: a stack without a sample has probability e^-800).
    let peak = view_files(&dir, "peak");
    assert_eq!(peak.len(), 1, "{}", show(&o));
    let stacks = parse_folded(&peak[0]);
    let js: Vec<&Stack> = stacks
        .iter()
        .filter(|s| s.frames.iter().any(|f| f.contains("leaf_alloc")))
        .collect();
    let bytes: u64 = js.iter().map(|s| s.bytes).sum();
    assert!(
        bytes >= 40 << 20,
        "the buffers are under leaf_alloc: {bytes}\n{stacks:?}"
    );
    for s in &js {
        let pos = |name: &str| {
            s.frames
                .iter()
                .position(|f| f.contains(name))
                .unwrap_or_else(|| panic!("{name} in {:?}", s.frames))
        };
        // Root first: outer_fn, then middle_fn, then leaf_alloc; each
        // named from node's perf map and marked.
        assert!(pos("outer_fn") < pos("middle_fn") && pos("middle_fn") < pos("leaf_alloc"));
        for name in ["outer_fn", "middle_fn", "leaf_alloc"] {
            assert!(
                s.frames[pos(name)].ends_with(" [jit]"),
                "{:?}",
                s.frames[pos(name)]
            );
        }
        // And it reaches the process's start: node's main, libc's start.
        assert!(
            s.frames.iter().any(|f| f == "node::Start"),
            "{:?}",
            s.frames
        );
        assert!(
            s.frames[0].contains("_start") || s.frames[0].contains("__libc_start"),
            "{:?}",
            s.frames
        );
    }
}

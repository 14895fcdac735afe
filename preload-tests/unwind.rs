//! The cached unwinder (`src/hot/unwind.rs`) against libgcc's: with
//! `HEAPLIVE_UNWIND=check` every capture is done both ways and compared
//! (libgcc's stack is kept; a difference is said in a line, and a summary
//! line at exit counts the comparisons), and the folded output of the
//! default (cached) run equals the output with `HEAPLIVE_UNWIND=libgcc`.

use crate::common::*;
use std::path::Path;
use std::process::Output;

/// The numbers of the exit line `unwind check: C stacks compared, D
/// differed, F done by libgcc alone`.
fn check_summary(o: &Output) -> (u64, u64, u64) {
    let err = stderr(o);
    let line = err
        .lines()
        .find(|l| l.contains("unwind check:") && l.contains("stacks compared"))
        .unwrap_or_else(|| panic!("no unwind check summary\n{}", show(o)));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    // heaplive[PID]: unwind check: C ..., D ..., F ...
    let n = nums.len();
    assert!(n >= 3, "{line}");
    (nums[n - 3], nums[n - 2], nums[n - 1])
}

fn sorted(mut s: Vec<Stack>) -> Vec<(Vec<String>, u64)> {
    let mut v: Vec<_> = s.drain(..).map(|s| (s.frames, s.bytes)).collect();
    v.sort();
    v
}

/// Runs `prog` in exact mode three ways (check, cached, libgcc), each in
/// its own directory; asserts no difference was found and the cached and
/// libgcc dumps are equal. Returns (compared, fell back, stacks).
fn agree(tag: &str, prog: &Path, args: &[&str]) -> (u64, u64, Vec<Stack>) {
    let mut outs = Vec::new();
    for mode in ["check", "cached", "libgcc"] {
        let dir = tempdir(&format!("{tag}-{mode}"));
        let o = run_preloaded(
            dir.path(),
            prog,
            args,
            &[("HEAPLIVE_SAMPLE_INTERVAL", "1"), ("HEAPLIVE_UNWIND", mode)],
        );
        assert!(o.status.success(), "{tag} ({mode}) failed\n{}", show(&o));
        assert!(
            !stderr(&o).contains("differs from libgcc"),
            "{tag}: the cached unwinder gave another stack\n{}",
            show(&o)
        );
        outs.push((o, only_folded(dir.path())));
    }
    let (compared, differed, fell_back) = check_summary(&outs[0].0);
    assert_eq!(differed, 0, "{tag}\n{}", show(&outs[0].0));
    assert!(
        !stderr(&outs[1].0).contains("unwind check:"),
        "the summary is for check mode only\n{}",
        show(&outs[1].0)
    );
    let libgcc = sorted(outs[2].1.clone());
    assert_eq!(
        sorted(outs[1].1.clone()),
        libgcc,
        "{tag}: the cached unwinder's dump differs from libgcc's"
    );
    assert_eq!(
        sorted(outs[0].1.clone()),
        libgcc,
        "{tag}: check mode keeps libgcc's stacks"
    );
    (compared, fell_back, outs[2].1.clone())
}

fn mix(tag: &str, flags: &[&str]) {
    let dir = tempdir(tag);
    let mut lib_flags = vec!["-shared", "-fPIC"];
    lib_flags.extend_from_slice(flags);
    let lib = compile(
        "unwind_lib.c",
        "libunwind_plugin.so",
        dir.path(),
        &lib_flags,
    );
    let prog = compile("unwind_mix.c", "unwind_mix", dir.path(), flags);
    let dir = dir.keep();
    let (compared, fell_back, stacks) = agree(tag, &prog, &[lib.to_str().unwrap()]);
    // 5 handler allocations (libgcc alone: a signal frame), 2 + 20
    // recursions, 4 x 500 kept thread allocations (the compiler may drop
    // the malloc/free pairs), 10 x 2 plugin calls, dlopen's own.
    assert!(compared >= 2000, "compared {compared}");
    assert!(
        fell_back >= 5,
        "the signal handler's stacks go to libgcc: {fell_back}"
    );
    assert_eq!(bytes_under(&stacks, "in_handler"), 5 * 2222, "{stacks:#?}");
    assert_eq!(
        bytes_under(&stacks, "plugin_alloc"),
        10 * 4321,
        "{stacks:#?}"
    );
    assert_eq!(
        bytes_under(&stacks, "shallow_alloc"),
        (0..500u64).map(|i| 40 + i % 7).sum::<u64>() * 4,
        "{stacks:#?}"
    );
    let deep: Vec<_> = stacks.iter().filter(|s| s.has("recurse_alloc")).collect();
    assert!(
        deep.iter().any(|s| s.frames.len() >= 120),
        "a stack 300 calls deep is cut at the frame limit, not earlier: {deep:#?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn cached_unwinder_agrees_with_libgcc_c_with_frame_pointers() {
    mix("unwind-mix-fp", &["-O1", "-fno-omit-frame-pointer"]);
}

#[test]
fn cached_unwinder_agrees_with_libgcc_c_without_frame_pointers() {
    mix("unwind-mix-nofp", &["-O2", "-fomit-frame-pointer"]);
}

#[test]
fn cached_unwinder_agrees_with_libgcc_cxx_exceptions_in_flight() {
    let (dir, prog) = compiled_with(
        "unwind-cxx",
        "unwind_cxx.cpp",
        &["-O2", "-fomit-frame-pointer"],
    );
    let dir = dir.keep();
    let (compared, _, stacks) = agree("unwind-cxx", &prog, &[]);
    assert!(compared >= 500, "compared {compared}");
    // Destructors run by the unwinder while BigError is in flight.
    let in_dtor = bytes_under(&stacks, "Noisy::~Noisy");
    let want: u64 = (0..50u64)
        .map(|i| (0..=5 + i % 3).map(|d| 1000 + d).sum::<u64>())
        .sum();
    assert_eq!(in_dtor, want, "{stacks:#?}");
    assert!(bytes_under(&stacks, "catcher") > 0, "{stacks:#?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn dlopen_dlclose_churn_while_8_threads_allocate_is_exact() {
    let dir = tempdir("unwind-dlchurn");
    let lib = compile_so("unwind_lib.c", "libunwind_churn.so", dir.path());
    let prog = compile("unwind_dlchurn.c", "unwind_dlchurn", dir.path(), &[]);
    let (rounds, per_thread) = (300u64, 4000u64);
    for mode in ["cached", "check"] {
        let run = tempdir(&format!("unwind-dlchurn-{mode}"));
        let o = run_preloaded(
            run.path(),
            &prog,
            &[
                lib.to_str().unwrap(),
                &rounds.to_string(),
                &per_thread.to_string(),
            ],
            &[("HEAPLIVE_SAMPLE_INTERVAL", "1"), ("HEAPLIVE_UNWIND", mode)],
        );
        assert!(o.status.success(), "{mode}\n{}", show(&o));
        let s = only_folded(run.path());
        // dlopen itself keeps some memory under churn_plugin; the library's
        // blocks are those through plugin_alloc.
        let plugin: u64 = s
            .iter()
            .filter(|st| st.has("churn_plugin") && st.has("plugin_alloc"))
            .map(|st| st.bytes)
            .sum();
        assert_eq!(plugin, rounds * 4321, "{mode} {s:#?}");
        assert_eq!(
            bytes_under(&s, "thread_alloc"),
            8 * per_thread * 96,
            "{mode} {s:#?}"
        );
        // Each thread's array of pointers, from the thread's own frame.
        assert_eq!(
            bytes_by_leaf(&s).get("worker").copied(),
            Some(8 * per_thread * 8),
            "{mode} {s:#?}"
        );
        if mode == "check" {
            let (compared, differed, _) = check_summary(&o);
            assert_eq!(differed, 0, "{}", show(&o));
            // Most of the threads' kept blocks (the compiler may drop the
            // malloc/free pairs, and a capture that finds the rule
            // builder busy on another thread goes to libgcc alone,
            // uncompared).
            assert!(compared >= 8 * per_thread / 2, "compared {compared}");
        }
    }
}

/// A stack deeper than the frame limit (128) ends, at its root, in a
/// `[truncated]` frame: the folded line shows the cut instead of passing
/// a partial stack off as whole. A shallow stack has no such frame. Both
/// unwinders.
#[test]
fn stacks_cut_at_the_frame_limit_end_in_a_truncated_frame() {
    let (dir, prog) = compiled("unwind-deep", "deep_stack.c");
    for unwind in ["cached", "libgcc"] {
        let out = dir.join(unwind);
        std::fs::create_dir_all(&out).unwrap();
        let o = run_preloaded(
            &out,
            &prog,
            &[],
            &[
                ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
                ("HEAPLIVE_UNWIND", unwind),
                ("HEAPLIVE_OUTPUT", &format!("{}/d.folded", out.display())),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let stacks = parse_folded(&out.join("d.folded"));
        let deep: Vec<&Stack> = stacks.iter().filter(|s| s.bytes == 2000).collect();
        assert_eq!(deep.len(), 1, "{unwind}: {stacks:?}");
        let deep = deep[0];
        assert_eq!(deep.frames[0], "[truncated]", "{unwind}: {:?}", deep.frames);
        assert_eq!(deep.frames.len(), 128, "{unwind}");
        assert!(
            deep.frames[1..].iter().all(|f| f == "recurse"),
            "{unwind}: {:?}",
            deep.frames
        );
        let shallow: Vec<&Stack> = stacks.iter().filter(|s| s.bytes == 1000).collect();
        assert_eq!(shallow.len(), 1, "{unwind}: {stacks:?}");
        assert!(shallow[0].has("main"), "{unwind}: {:?}", shallow[0].frames);
        assert!(!shallow[0].has("[truncated]"), "{unwind}");
        assert_eq!(
            shallow[0].frames.iter().filter(|f| *f == "recurse").count(),
            11
        );
    }
}

#[test]
fn jit_frames_registered_with_the_programs_libgcc_s_are_walked_through() {
    // The program registers its JIT code's unwind information with the
    // libgcc_s it links (`__register_frame`); heaplive's own copy of the
    // unwinder knows nothing of it, so heaplive must unwind with the
    // program's libgcc_s: the stack goes on through the JIT frame to main.
    let (_dir, exe) = compiled_with("unwind-jit", "unwind_jit_registered.c", &["-lgcc_s"]);
    let (compared, _, stacks) = agree("jit", &exe, &[]);
    assert!(compared > 0);
    let site: Vec<&Stack> = stacks.iter().filter(|s| s.leaf() == "jit_site").collect();
    assert_eq!(site.len(), 1, "{stacks:?}");
    assert_eq!(site[0].bytes, 4242);
    let f = &site[0].frames;
    let main = f.iter().position(|x| x == "main");
    assert!(
        main.is_some_and(|m| m + 2 < f.len()),
        "the stack stops at the JIT frame: {f:?}"
    );
}

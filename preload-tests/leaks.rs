//! Leak-threshold warnings (`HEAPLIVE_WARN_BYTES`, `_BLOCKS`, `_GROWTH`):
//! how many lines each stack gets, what they say, where they go, and that
//! they never hurt the program (closed or reused stderr, many threads).
//!
//! The scenarios live in `progs/leak_grow.c`: one noinline function per role
//! with one call site, so each role is one stack. The expected warnings are
//! computed from the amounts the program allocates (`simulate`), not typed in.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

const KIB: i64 = 1024;
const MIB: i64 = 1024 * 1024;

/// `leak_grow`, compiled once for all tests of this file.
fn prog() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempdir("leak-bin").keep();
        compile("leak_grow.c", "leak_grow", &dir, &[])
    })
    .clone()
}

/// `1.0 MiB`, `512 B`: the library's human units (the contract crate's,
/// unit-tested there against literal strings), to compare lines exactly.
fn human(n: f64) -> String {
    heaplive_format::units::human_bytes(n).to_string()
}

/// `4,096`.
fn grouped(n: u64) -> String {
    heaplive_format::units::Grouped(n).to_string()
}

/// The amounts at which a stack whose live amount takes the values
/// `amounts` (one per allocation; frees in between do not warn) warns:
/// first at `threshold`, then at the last warned amount times `growth`.
fn simulate(amounts: &[i64], threshold: i64, growth: f64) -> Vec<i64> {
    let mut warned = Vec::new();
    let mut last = 0i64;
    for &a in amounts {
        let next = if last <= 0 {
            threshold
        } else {
            ((last as f64 * growth).ceil() as i64).max(last + 1)
        };
        if a >= next {
            warned.push(a);
            last = a;
        }
    }
    warned
}

/// The live amounts of each role of `leak_grow steps|sampled` after each
/// of its allocations, in units of `block` (bytes = blocks * block).
struct Shape {
    grow: Vec<i64>,
    flat: Vec<i64>,
    small: Vec<i64>,
}

/// Mirrors `steps()` in leak_grow.c: with `unit` = 1 MiB (steps) or 16 MiB
/// (sampled): flat to 1.5 units then 20 free+malloc pairs, small to 0.5
/// units, grow to 1, 2, 4, 8 units. In blocks.
fn shape(unit: i64, block: i64) -> Shape {
    let nflat = 24 * unit / 16 / block;
    let mut flat: Vec<i64> = (1..=nflat).collect();
    flat.extend(std::iter::repeat_n(nflat, 20)); // each churn malloc after its free
    let small = (1..=unit / 2 / block).collect();
    let grow = (1..=8 * unit / block).collect();
    Shape { grow, flat, small }
}

/// One parsed `possible leak` line.
#[derive(Debug, Clone)]
struct Warning {
    pid: u32,
    bytes: String,
    blocks: u64,
    /// `reached HEAPLIVE_WARN_BYTES=1.0 MiB` (first warning) or `x2.0 in 0 s`.
    why: String,
    frames: Vec<String>,
    suppressed: u64,
}

impl Warning {
    fn leaf(&self) -> &str {
        self.frames.first().map(|s| s.as_str()).unwrap_or("")
    }
}

/// Parses one warning line completely, or says what is wrong with it.
fn parse_warning(line: &str) -> Result<Warning, String> {
    let err = |what: &str| format!("{what} in warning line: {line:?}");
    let rest = line
        .strip_prefix("heaplive[")
        .ok_or_else(|| err("no `heaplive[` prefix"))?;
    let (pid, rest) = rest
        .split_once("]: possible leak: ")
        .ok_or_else(|| err("no `]: possible leak: `"))?;
    let pid: u32 = pid.parse().map_err(|_| err("bad pid"))?;
    let (bytes, rest) = rest
        .split_once(" live in ")
        .ok_or_else(|| err("no ` live in `"))?;
    let (blocks, rest) = rest
        .split_once(" blocks (")
        .ok_or_else(|| err("no ` blocks (`"))?;
    let blocks: u64 = blocks
        .replace(',', "")
        .parse()
        .map_err(|_| err("bad block count"))?;
    let (why, rest) = rest.split_once(") at ").ok_or_else(|| err("no `) at `"))?;
    let ok_why = why.starts_with("reached HEAPLIVE_WARN_BYTES=")
        || why.starts_with("reached HEAPLIVE_WARN_BLOCKS=")
        || (why.starts_with('x') && why.ends_with(" s") && why.contains(" in "));
    if !ok_why {
        return Err(err("bad parenthesis"));
    }
    let (frames, suppressed) = match rest.strip_suffix(" more warnings suppressed)") {
        Some(r) => {
            let (f, n) = r
                .rsplit_once(" (")
                .ok_or_else(|| err("bad suppressed note"))?;
            (
                f,
                n.parse::<u64>().map_err(|_| err("bad suppressed count"))?,
            )
        }
        None => (rest, 0),
    };
    let frames: Vec<String> = frames.split(" <- ").map(String::from).collect();
    if frames.iter().any(|f| f.is_empty()) || frames.len() > 7 {
        return Err(err("bad frames"));
    }
    // The number part of the amount must be a number with a unit.
    let (num, unit) = bytes.split_once(' ').ok_or_else(|| err("bad amount"))?;
    if num.parse::<f64>().is_err() || !["B", "KiB", "MiB", "GiB", "TiB"].contains(&unit) {
        return Err(err("bad amount"));
    }
    Ok(Warning {
        pid,
        bytes: bytes.to_string(),
        blocks,
        why: why.to_string(),
        frames,
        suppressed,
    })
}

/// Every `possible leak` line of `text`, each parsed completely. Also
/// checks that every line mentioning heaplive starts with `heaplive`
/// (lines are written whole, never interleaved).
fn warnings(text: &str, context: &str) -> Vec<Warning> {
    let mut out = Vec::new();
    for l in text.lines() {
        if l.contains("heaplive") {
            assert!(
                l.starts_with("heaplive[") || l.starts_with("heaplive:"),
                "a torn heaplive line {l:?}\n{context}"
            );
        }
        if l.contains("possible leak") {
            out.push(parse_warning(l).unwrap_or_else(|e| panic!("{e}\n{context}")));
        }
    }
    out
}

fn by_leaf<'a>(ws: &'a [Warning], leaf: &str) -> Vec<&'a Warning> {
    ws.iter().filter(|w| w.leaf() == leaf).collect()
}

/// The `at exit:` summary line, if any.
fn summary_line(text: &str) -> Option<String> {
    line_with(text, "]: at exit: ").map(String::from)
}

/// The exit summary line of `text`; panics (with `ctx`) when there is none.
fn exit_summary(text: &str, ctx: &str) -> String {
    summary_line(text).unwrap_or_else(|| panic!("no `at exit:` line\n{ctx}"))
}

/// The exit summary line of `text` says `n` stacks warned.
fn assert_stacks_warned(text: &str, n: usize, ctx: &str) {
    let sum = exit_summary(text, ctx);
    assert!(sum.contains(&format!("; {n} stacks warned; ")), "{ctx}");
}

/// The `steps` run's block (64 KiB: its argument 65536) and its shape at
/// 1 MiB.
fn steps_shape() -> (i64, Shape) {
    let block = 64 * KIB;
    (block, shape(MIB, block))
}

/// The `N more warnings suppressed` count of an exit summary line (0 if
/// it names none).
fn summary_suppressed(sum: &str) -> u64 {
    sum.split("; ")
        .find_map(|part| part.strip_suffix(" more warnings suppressed"))
        .map(|n| n.parse().expect("a count"))
        .unwrap_or(0)
}

/// Checks the lines of one role against the amounts it must have warned at
/// (`expected`, in units of `unit_bytes` per block: bytes or blocks mode).
fn check_role(
    ws: &[Warning],
    leaf: &str,
    expected: &[i64],
    block: i64,
    by_blocks: bool,
    threshold_text: &str,
    context: &str,
) {
    let got = by_leaf(ws, leaf);
    let want: Vec<String> = expected
        .iter()
        .map(|&b| {
            format!(
                "{} in {} blocks",
                human((b * block) as f64),
                grouped(b as u64)
            )
        })
        .collect();
    let have: Vec<String> = got
        .iter()
        .map(|w| format!("{} in {} blocks", w.bytes, grouped(w.blocks)))
        .collect();
    let suppressed: u64 = ws.iter().map(|w| w.suppressed).sum();
    assert_eq!(
        have, want,
        "warnings of {leaf}: amounts differ ({suppressed} suppressed in all)\n{context}"
    );
    for (i, w) in got.iter().enumerate() {
        if i == 0 {
            let kind = if by_blocks { "BLOCKS" } else { "BYTES" };
            assert_eq!(
                w.why,
                format!("reached HEAPLIVE_WARN_{kind}={threshold_text}"),
                "first warning of {leaf}\n{context}"
            );
        } else {
            let ratio = expected[i] as f64 / expected[i - 1] as f64;
            let prefix = format!("x{ratio:.1} in ");
            assert!(
                w.why.starts_with(&prefix),
                "warning {i} of {leaf}: want `{prefix}...`, got `{}`\n{context}",
                w.why
            );
        }
        assert_eq!(
            w.suppressed, 0,
            "no warning should have been suppressed here\n{context}"
        );
    }
}

/// The three roles of `steps` (grow, flat, small) simulated against the
/// threshold (`threshold` blocks, `growth` between warnings) and checked
/// against their lines, and no other stack warned: returns the amounts
/// each role warned at.
#[allow(clippy::too_many_arguments)]
fn check_roles(
    ws: &[Warning],
    s: &Shape,
    threshold: i64,
    growth: f64,
    block: i64,
    by_blocks: bool,
    threshold_text: &str,
    context: &str,
) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let g = simulate(&s.grow, threshold, growth);
    let f = simulate(&s.flat, threshold, growth);
    let sm = simulate(&s.small, threshold, growth);
    for (leaf, want) in [("grow_alloc", &g), ("flat_alloc", &f), ("small_alloc", &sm)] {
        check_role(ws, leaf, want, block, by_blocks, threshold_text, context);
    }
    assert_eq!(
        ws.len(),
        g.len() + f.len(),
        "no other stack warns\n{context}"
    );
    (g, f, sm)
}

fn run_steps(tag: &str, env: &[(&str, &str)]) -> (TempDir, Output, String) {
    run_steps_paused(tag, "400", env)
}

/// `leak_grow steps` in exact mode. `pause` (ms between steps) keeps every
/// second's lines under the rate limit of 5: with growth 2 a second holds at
/// most 3 steps of one line; with growth 1.5 steps have two lines, so 700.
fn run_steps_paused(tag: &str, pause: &str, env: &[(&str, &str)]) -> (TempDir, Output, String) {
    let dir = tempdir(tag);
    let mut e = vec![("HEAPLIVE_SAMPLE_INTERVAL", "1")];
    e.extend_from_slice(env);
    let o = run_preloaded(&dir, &prog(), &["steps", "65536", pause], &e);
    let ctx = show(&o);
    assert!(o.status.success(), "leak_grow steps failed\n{ctx}");
    (dir, o, ctx)
}

#[test]
fn exact_bytes_warn_once_per_doubling() {
    let (dir, o, ctx) = run_steps("leak-bytes", &[("HEAPLIVE_WARN_BYTES", "1M")]);
    let ws = warnings(&stderr(&o), &ctx);
    let (block, s) = steps_shape();
    let t = MIB / block;
    let (g, f, sm) = check_roles(&ws, &s, t, 2.0, block, false, "1.0 MiB", &ctx);
    assert_eq!(g.len(), 4, "the plan: 1, 2, 4, 8 MiB");
    assert_eq!(f.len(), 1);
    assert!(sm.is_empty());
    let pid = ws[0].pid;
    assert!(ws.iter().all(|w| w.pid == pid), "one pid\n{ctx}");
    // Caller frames follow the leaf.
    let gw = by_leaf(&ws, "grow_alloc");
    assert_eq!(
        gw[0].frames[..4],
        ["grow_alloc", "grow_to", "steps", "main"],
        "frames of the warning\n{ctx}"
    );

    // The exit summary names the final dump, which exists and is the only
    // folded file, and repeats its total.
    let sum = exit_summary(&stderr(&o), &ctx);
    let files = folded_files(&dir);
    assert_eq!(files.len(), 1, "{ctx}");
    let stacks = parse_folded(&files[0]);
    let want = format!(
        "heaplive[{pid}]: at exit: {} live (estimate); 2 stacks warned; final dump: {}",
        human(total(&stacks) as f64),
        files[0].display()
    );
    assert_eq!(sum, want, "{ctx}");
    let path = sum.rsplit_once("final dump: ").unwrap().1;
    assert!(Path::new(path).exists(), "{path} missing\n{ctx}");
    // And the dump agrees with what the program holds.
    let leaves = bytes_by_leaf(&stacks);
    assert_eq!(leaves.get("grow_alloc"), Some(&(8 * MIB as u64)), "{ctx}");
    assert_eq!(
        leaves.get("flat_alloc"),
        Some(&(3 * MIB as u64 / 2)),
        "{ctx}"
    );
    assert_eq!(leaves.get("small_alloc"), Some(&(MIB as u64 / 2)), "{ctx}");
}

#[test]
fn exact_bytes_growth_factor_one_and_a_half() {
    let (_dir, o, ctx) = run_steps_paused(
        "leak-growth",
        "700",
        &[
            ("HEAPLIVE_WARN_BYTES", "1M"),
            ("HEAPLIVE_WARN_GROWTH", "1.5"),
        ],
    );
    let ws = warnings(&stderr(&o), &ctx);
    let (block, s) = steps_shape();
    let t = MIB / block;
    let (g, f, _) = check_roles(&ws, &s, t, 1.5, block, false, "1.0 MiB", &ctx);
    // 1, 1.5, 2.25, 3.375, 5.0625, 7.625 MiB (the last rounded up to a block).
    assert_eq!(g.len(), 6);
    assert_eq!(
        f.len(),
        2,
        "flat reaches 1.5 MiB exactly, then churns without growing"
    );
    assert_stacks_warned(&stderr(&o), 2, &ctx);
}

#[test]
fn exact_blocks_threshold() {
    let (_dir, o, ctx) = run_steps(
        "leak-blocks",
        &[("HEAPLIVE_WARN_BYTES", "0"), ("HEAPLIVE_WARN_BLOCKS", "16")],
    );
    let ws = warnings(&stderr(&o), &ctx);
    let (block, s) = steps_shape();
    let (g, f, sm) = check_roles(&ws, &s, 16, 2.0, block, true, "16", &ctx);
    assert_eq!((g.len(), f.len(), sm.len()), (4, 1, 0));
    assert_stacks_warned(&stderr(&o), 2, &ctx);
}

#[test]
fn exact_bytes_and_blocks_together_count_stacks_once() {
    // Both kinds on: the same stack may warn by bytes and by blocks, but it
    // is one stack warned. Blocks 24 hits flat (24 blocks) and grow only.
    let (_dir, o, ctx) = run_steps(
        "leak-both",
        &[
            ("HEAPLIVE_WARN_BYTES", "1M"),
            ("HEAPLIVE_WARN_BLOCKS", "24"),
        ],
    );
    let ws = warnings(&stderr(&o), &ctx);
    let (block, s) = steps_shape();
    let bytes_g = simulate(&s.grow, MIB / block, 2.0);
    let blocks_g = simulate(&s.grow, 24, 2.0);
    let bytes_f = simulate(&s.flat, MIB / block, 2.0);
    let blocks_f = simulate(&s.flat, 24, 2.0);
    let n_g = by_leaf(&ws, "grow_alloc").len();
    let n_f = by_leaf(&ws, "flat_alloc").len();
    let sum = exit_summary(&stderr(&o), &ctx);
    // Suppressed warnings are counted on the next line, or (when none
    // followed, as when the rate limit hits the last ones) in the summary.
    let suppressed: u64 = ws.iter().map(|w| w.suppressed).sum::<u64>() + summary_suppressed(&sum);
    assert_eq!(
        n_g + n_f + suppressed as usize,
        bytes_g.len() + blocks_g.len() + bytes_f.len() + blocks_f.len(),
        "lines of both kinds (bytes {bytes_g:?} {bytes_f:?}, blocks {blocks_g:?} {blocks_f:?})\n{ctx}"
    );
    assert!(by_leaf(&ws, "small_alloc").is_empty(), "{ctx}");
    assert!(sum.contains("; 2 stacks warned; "), "{ctx}");
}

#[test]
fn no_warnings_no_summary() {
    for (tag, bytes, why) in [
        ("leak-off", "0", "WARN_BYTES=0 turns warnings off"),
        ("leak-high", "9M", "nothing reaches 9M"),
    ] {
        let (_dir, o, ctx) = run_steps(tag, &[("HEAPLIVE_WARN_BYTES", bytes)]);
        assert!(!stderr(&o).contains("possible leak"), "{why}\n{ctx}");
        assert!(
            summary_line(&stderr(&o)).is_none(),
            "no summary without warnings\n{ctx}"
        );
    }
}

#[test]
fn sampled_mode_warns_for_the_growing_stack_only() {
    let dir = tempdir("leak-sampled");
    for seed in ["1", "77", "4242"] {
        let o = run_preloaded(
            &dir,
            &prog(),
            &["sampled", "65536"],
            &[("HEAPLIVE_WARN_BYTES", "16M"), ("HEAPLIVE_SEED", seed)],
        );
        let ctx = format!("seed {seed}\n{}", show(&o));
        assert!(o.status.success(), "{ctx}");
        let ws = warnings(&stderr(&o), &ctx);
        let g = by_leaf(&ws, "grow_alloc");
        assert!(
            !g.is_empty(),
            "the stack growing to 128 MiB must warn\n{ctx}"
        );
        assert!(
            by_leaf(&ws, "small_alloc").is_empty(),
            "the 1 MiB stack must never warn\n{ctx}"
        );
        assert!(g[0].why == "reached HEAPLIVE_WARN_BYTES=16.0 MiB", "{ctx}");
        // Amounts: at least the threshold, each later one at least twice the
        // one before (the estimates are what they are, the rule is exact).
        let mib = |w: &Warning| -> f64 {
            let (n, u) = w.bytes.split_once(' ').unwrap();
            let n: f64 = n.parse().unwrap();
            match u {
                "MiB" => n,
                "GiB" => n * 1024.0,
                "KiB" => n / 1024.0,
                _ => n / 1048576.0,
            }
        };
        assert!(mib(g[0]) >= 16.0 - 0.05, "{ctx}");
        for p in g.windows(2) {
            assert!(mib(p[1]) >= 2.0 * mib(p[0]) - 0.1, "growth rule\n{ctx}");
        }
        assert!(
            g.len() <= 4,
            "at most one warning per doubling of ~128 MiB from 16 MiB\n{ctx}"
        );
        // No foreign stacks (only flat may join).
        for w in &ws {
            assert!(
                ["grow_alloc", "flat_alloc"].contains(&w.leaf()),
                "unexpected warning {w:?}\n{ctx}"
            );
        }
        for f in folded_files(&dir) {
            std::fs::remove_file(f).unwrap();
        }
    }
}

/// `leak_grow ARGS` in exact mode warning at 1 MiB, with `env` on top.
fn run_warn_1m(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut e = vec![
        ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
        ("HEAPLIVE_WARN_BYTES", "1M"),
    ];
    e.extend_from_slice(env);
    run_preloaded(dir, &prog(), args, &e)
}

/// The grow step's 2 MiB, live at exit in the one folded file of `dir`.
fn assert_grow_alloc_kept(dir: &Path, ctx: &str) {
    let stacks = only_folded(dir);
    assert_eq!(
        bytes_by_leaf(&stacks).get("grow_alloc"),
        Some(&(2 * MIB as u64)),
        "{ctx}"
    );
}

/// The `threads` step (16 threads cross 1 MiB at one barrier; main's own
/// warning after `pause_ms`), exact mode: its directory, output and the
/// output shown for failures; it must succeed.
fn run_threads(tag: &str, pause_ms: &str) -> (TempDir, std::process::Output, String) {
    let dir = tempdir(tag);
    let o = run_warn_1m(&dir, &["threads", pause_ms], &[]);
    let ctx = show(&o);
    assert!(o.status.success(), "{ctx}");
    (dir, o, ctx)
}

/// 16 threads cross the threshold at one barrier: lines stay whole, and
/// what the rate limit holds back is counted on a later line.
#[test]
pub(crate) fn many_threads_at_once_then_a_later_warning() {
    let (_dir, o, ctx) = run_threads("leak-threads", "1500");
    let ws = warnings(&stderr(&o), &ctx);
    let lines = ws.len() as u64;
    let suppressed: u64 = ws.iter().map(|w| w.suppressed).sum();
    assert_eq!(
        lines + suppressed,
        17,
        "16 thread stacks + main's: lines {lines} + suppressed {suppressed}\n{ctx}"
    );
    assert!(lines <= 5 + 1 + 5, "at most 5 lines a second\n{ctx}");
    assert_eq!(
        by_leaf(&ws, "main_alloc").len(),
        1,
        "main's warning comes after the pause\n{ctx}"
    );
    for w in &ws {
        assert!(
            ["thread_alloc", "main_alloc"].contains(&w.leaf()),
            "unexpected warning {w:?}\n{ctx}"
        );
        assert_eq!(w.bytes, "1.0 MiB", "{ctx}");
        assert_eq!(w.blocks, 16, "{ctx}");
    }
    assert_stacks_warned(&stderr(&o), 17, &ctx);
}

/// The same burst with the program exiting right after: nothing may be lost
/// silently; what is still held back is reported by the end of the run.
#[test]
fn many_threads_at_once_then_exit() {
    let (_dir, o, ctx) = run_threads("leak-threads-exit", "0");
    let err = stderr(&o);
    let ws = warnings(&err, &ctx);
    for w in &ws {
        assert_eq!(w.leaf(), "thread_alloc", "{ctx}");
    }
    let sum = exit_summary(&err, &ctx);
    assert!(sum.contains("; 16 stacks warned; "), "{ctx}");
    // Lines plus every suppression count (on warning lines or the summary).
    let suppressed: u64 = ws.iter().map(|w| w.suppressed).sum::<u64>()
        + sum
            .split(['(', ';'])
            .filter_map(|p| {
                p.trim()
                    .strip_suffix(" more warnings suppressed)")
                    .or_else(|| p.trim().strip_suffix(" more warnings suppressed"))
            })
            .filter_map(|n| n.trim().parse::<u64>().ok())
            .sum::<u64>();
    assert_eq!(
        ws.len() as u64 + suppressed,
        16,
        "16 stacks warned, but {} lines + {} reported as suppressed: the rest vanished\n{ctx}",
        ws.len(),
        suppressed
    );
}

#[test]
fn closed_stderr_does_not_hurt_the_program() {
    let dir = tempdir("leak-closed");
    let o = run_warn_1m(&dir, &["closed"], &[]);
    let ctx = show(&o);
    assert_status(&o, 7, &format!("the program's own exit status\n{ctx}"));
    assert!(stderr(&o).is_empty(), "stderr was closed\n{ctx}");
    assert_grow_alloc_kept(&dir, &ctx);
}

#[test]
fn reused_fd_2_gets_no_heaplive_lines() {
    let dir = tempdir("leak-reuse");
    let file = dir.join("program-output.txt");
    let o = run_warn_1m(&dir, &["reuse", file.to_str().unwrap()], &[]);
    let ctx = show(&o);
    assert_status(
        &o,
        7,
        &format!("the program's own exit status (3 = open did not get fd 2)\n{ctx}"),
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        text, "program data\nprogram end\n",
        "the program's file got foreign lines\n{ctx}"
    );
    assert_grow_alloc_kept(&dir, &ctx);
}

#[test]
fn heaplive_log_gets_the_lines_appended() {
    let dir = tempdir("leak-log");
    let log = write_file(&dir, "heaplive.log", "an earlier line\n");
    let log_s = log.to_str().unwrap().to_string();
    let (_d, o, ctx) = run_steps(
        "leak-log-run",
        &[("HEAPLIVE_WARN_BYTES", "1M"), ("HEAPLIVE_LOG", &log_s)],
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let ctx = format!("{ctx}\n--- {} ---\n{text}", log.display());
    assert!(
        !stderr(&o).contains("possible leak"),
        "warnings must go to HEAPLIVE_LOG only\n{ctx}"
    );
    assert!(!stderr(&o).contains("at exit:"), "the summary too\n{ctx}");
    assert!(
        text.starts_with("an earlier line\n"),
        "appended, not truncated\n{ctx}"
    );
    let ws = warnings(&text, &ctx);
    assert_eq!(by_leaf(&ws, "grow_alloc").len(), 4, "{ctx}");
    assert_eq!(by_leaf(&ws, "flat_alloc").len(), 1, "{ctx}");
    assert!(
        summary_line(&text).is_some_and(|l| l.contains("; 2 stacks warned; ")),
        "{ctx}"
    );

    // A second run appends after the first.
    let (_d, o2, ctx2) = run_steps(
        "leak-log-run2",
        &[("HEAPLIVE_WARN_BYTES", "1M"), ("HEAPLIVE_LOG", &log_s)],
    );
    let text2 = std::fs::read_to_string(&log).unwrap();
    assert!(
        text2.starts_with(&text),
        "the second run must append\n{ctx2}\n--- log ---\n{text2}"
    );
    assert!(!stderr(&o2).contains("possible leak"), "{ctx2}");
    assert_eq!(
        warnings(&text2, &ctx2).len(),
        10,
        "{ctx2}\n--- log ---\n{text2}"
    );
}

/// Installed programs at the defaults (1 GiB threshold) never warn.
#[test]
fn real_programs_do_not_warn_at_the_defaults() {
    let dir = tempdir("leak-real");
    std::fs::write(
        dir.join("t.c"),
        "#include <stdio.h>\nint main(void){ printf(\"%d\\n\", 6*7); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("t.sql"),
        "create table t(a integer primary key, b text);\n\
         with recursive c(x) as (select 1 union all select x+1 from c where x < 20000)\n\
         insert into t select x, printf('row %d', x) from c;\n\
         create index tb on t(b);\n\
         select count(*), sum(length(b)) from t;\n",
    )
    .unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "python3",
            vec![
                "-c",
                "import json; d={str(i): list(range(i % 50)) for i in range(20000)}; print(len(json.dumps(d)))",
            ],
        ),
        (
            "perl",
            vec![
                "-e",
                "my %h; $h{$_} = [1..($_ % 50)] for 1..20000; print scalar(keys %h), \"\\n\"",
            ],
        ),
        ("sqlite3", vec![":memory:", ".read t.sql"]),
        ("gcc", vec!["-O2", "-o", "t", "t.c"]),
    ];
    let mut ran = 0;
    for (name, args) in cases {
        let Some(bin) = which(name) else {
            panic!("{name} is not installed");
        };
        let o = run_preloaded(&dir, &bin, &args, &[]);
        let ctx = format!("{name} {args:?}\n{}", show(&o));
        assert!(o.status.success(), "{ctx}");
        assert!(
            !stderr(&o).contains("possible leak"),
            "a warning at the defaults\n{ctx}"
        );
        assert!(summary_line(&stderr(&o)).is_none(), "{ctx}");
        ran += 1;
    }
    assert_eq!(ran, 4);
}

/// A daemon-like program closes every descriptor above 2 after heaplive
/// opened its own (the HEAPLIVE_LOG file, the dumper's eventfd), then
/// opens two files that get those numbers. heaplive must not write its
/// lines into the program's files, nor take the program's descriptor for
/// its own (e.g. the eventfd: dump requests, reads of the program's data).
#[test]
fn program_closing_all_fds_keeps_its_files_to_itself() {
    let dir = tempdir("leak-closeall");
    let log = dir.join("heaplive.log");
    let file = dir.join("program-output.txt");
    let file2 = dir.join("program-output.txt.2");
    let o = run_warn_1m(
        &dir,
        &["closeall", file.to_str().unwrap()],
        &[("HEAPLIVE_LOG", log.to_str().unwrap())],
    );
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"));
    let (t1, t2, tl) = (read(&file), read(&file2), read(&log));
    let head = |t: &str| t.lines().take(8).collect::<Vec<_>>().join("\n");
    let ctx = format!(
        "{}\n--- {} ---\n{}\n--- {} (first lines) ---\n{}\n--- {} ---\n{}\nfolded files: {}",
        show(&o),
        file.display(),
        head(&t1),
        file2.display(),
        head(&t2),
        log.display(),
        tl,
        folded_files(&dir).len()
    );
    assert!(o.status.success(), "{ctx}");
    assert!(
        t1 == "program data\nprogram end\n",
        "the program's first file got foreign lines\n{ctx}"
    );
    assert!(
        t2 == "program data\nprogram end\n",
        "the program's second file got foreign lines\n{ctx}"
    );
    assert_eq!(
        folded_files(&dir).len(),
        1,
        "only the exit dump was asked for\n{ctx}"
    );
    assert!(
        !by_leaf(&warnings(&tl, &ctx), "grow_alloc").is_empty(),
        "{ctx}"
    );
}

/// An unopenable HEAPLIVE_LOG: one line saying so, then stderr.
#[test]
fn unopenable_log_falls_back_to_stderr() {
    let (_dir, o, ctx) = run_steps(
        "leak-badlog",
        &[
            ("HEAPLIVE_WARN_BYTES", "1M"),
            ("HEAPLIVE_LOG", "/nonexistent-dir/heaplive.log"),
        ],
    );
    let err = stderr(&o);
    assert_eq!(
        err.matches("cannot open HEAPLIVE_LOG='/nonexistent-dir/heaplive.log'")
            .count(),
        1,
        "{ctx}"
    );
    let ws = warnings(&err, &ctx);
    assert_eq!(by_leaf(&ws, "grow_alloc").len(), 4, "{ctx}");
    assert!(summary_line(&err).is_some(), "{ctx}");
}

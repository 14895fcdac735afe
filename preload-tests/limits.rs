//! The host's resource limits and dead outputs never kill it (issue #25):
//! heaplive's writes past RLIMIT_FSIZE, or into a pipe or FIFO whose
//! reader has gone, fail with EFBIG or EPIPE in one line (the temporary
//! removed), raise no SIGXFSZ or SIGPIPE, and the program exits with its
//! own status; the program's own writes still raise them.

use crate::common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// `progs/lim_write.c`, compiled once.
fn lim_write() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempdir("limits-progs").keep();
        compile("lim_write.c", "lim_write", &dir, &[])
    })
}

/// The function of lim_write that allocates.
const SITE: &str = "a_function_with_a_long_name_for_a_dump_larger_than_a_pipe";

/// lim_write in exact mode (a dump of some 250 KB), its files in `dir`.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut e = vec![("HEAPLIVE_SAMPLE_INTERVAL", "1")];
    e.extend_from_slice(env);
    run_preloaded(dir, lim_write(), args, &e)
}

/// heaplive's lines on stderr.
fn heaplive_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("heaplive"))
        .map(String::from)
        .collect()
}

/// Asserts the program ran to its end and exited with its own status (7).
fn ran_on(o: &Output) {
    assert_eq!(o.status.code(), Some(7), "{}", show(o));
    assert!(stderr(o).contains("main returns\n"), "{}", show(o));
}

/// Asserts one failure line per dump, each naming `why`, and no other
/// line about a dump.
fn failed_dumps(o: &Output, n: usize, why: &str) {
    let lines = heaplive_lines(o);
    let failed: Vec<_> = lines.iter().filter(|l| l.contains("dump failed")).collect();
    assert_eq!(failed.len(), n, "{}", show(o));
    for l in &failed {
        assert!(l.contains(why), "not {why}: {l}\n{}", show(o));
    }
    let about_dumps = lines.iter().filter(|l| l.contains(" dump ")).count();
    assert_eq!(about_dumps, n, "other lines about dumps: {}", show(o));
}

/// No hidden temporary (`.NAME.heaplive-tmp.PID`) left in `dir`.
fn no_temporaries(dir: &Path) {
    let left = names_containing(dir, ".heaplive-tmp.");
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

/// Under RLIMIT_FSIZE below the dump's size: the exit dump fails with
/// EFBIG in one line and leaves no temporary; heaplive_dump() returns -1
/// with errno EFBIG; the program's own write past the limit afterwards
/// still gets SIGXFSZ. Before the fix the exit dump killed the program
/// with SIGXFSZ (status 153) and left the temporary.
#[test]
fn a_dump_past_rlimit_fsize_fails_in_one_line_and_the_program_runs_on() {
    let dir = tempdir("limits-fsize");
    let o = run(&dir, &["fsize", "65536", "exit"], &[]);
    ran_on(&o);
    failed_dumps(&o, 1, "File too large");
    no_temporaries(&dir);
    assert!(folded_files(&dir).is_empty());

    let own = dir.join("own.bin");
    let o = run(&dir, &["fsize", "65536", "api", own.to_str().unwrap()], &[]);
    assert!(stderr(&o).contains("dump -1 27\n"), "{}", show(&o));
    assert_eq!(o.status.signal(), Some(25), "SIGXFSZ; {}", show(&o));
    no_temporaries(&dir);
}

/// HEAPLIVE_LOG at RLIMIT_FSIZE already: heaplive's lines are dropped
/// (EFBIG), the log is not longer, the dump (below the limit) is written,
/// and the program exits with its own status. Before the fix the exit
/// dump's line killed the program with SIGXFSZ (153).
#[test]
fn a_log_line_past_rlimit_fsize_is_dropped_and_the_program_runs_on() {
    let dir = tempdir("limits-fsize-log");
    let limit = 1usize << 20;
    let log = dir.file("heaplive.log", &vec![b'#'; limit]);
    let o = run(
        &dir,
        &["fsize", &limit.to_string(), "exit"],
        &[("HEAPLIVE_LOG", &log)],
    );
    ran_on(&o);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), limit as u64);
    // Exact mode: the 400 blocks of 1000 + i bytes, all there.
    let stacks = only_folded(&dir);
    assert_eq!(bytes_under(&stacks, SITE), 400 * 1000 + 399 * 400 / 2);
    no_temporaries(&dir);
}

/// HEAPLIVE_OUTPUT=/dev/stdout into a pipe whose reader reads one byte
/// and leaves: the exit dump, and heaplive_dump("/dev/stdout") (-1, errno
/// EPIPE) then the exit dump, fail with EPIPE in one line each; so does
/// the exit dump into a pipe whose reader was gone already.
/// Before the fix the dump killed the program with SIGPIPE (141).
#[test]
fn a_dump_into_a_dead_pipe_fails_in_one_line_and_the_program_runs_on() {
    let dir = tempdir("limits-pipe");
    let out = [("HEAPLIVE_OUTPUT", "/dev/stdout")];
    let o = run(&dir, &["pipe", "exit"], &out);
    ran_on(&o);
    failed_dumps(&o, 1, "Broken pipe");

    let o = run(&dir, &["pipe", "api"], &out);
    ran_on(&o);
    assert!(stderr(&o).contains("dump -1 32\n"), "{}", show(&o));
    failed_dumps(&o, 2, "Broken pipe");

    let o = run(&dir, &["gone", "exit"], &out);
    ran_on(&o);
    failed_dumps(&o, 1, "cannot write /dev/stdout");
}

/// heaplive_dump(FIFO) whose reader read one byte and left: -1 with errno
/// EPIPE, one line, and the program runs on. Before the fix: SIGPIPE.
#[test]
fn a_dump_into_a_fifo_whose_reader_left_fails_in_one_line() {
    let dir = tempdir("limits-fifo");
    let fifo = dir.join("fifo");
    let o = run(&dir, &["fifo", fifo.to_str().unwrap()], &[]);
    ran_on(&o);
    assert!(stderr(&o).contains("dump -1 32\n"), "{}", show(&o));
    let lines = heaplive_lines(&o);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("requested dump failed") && l.contains("Broken pipe")),
        "{}",
        show(&o)
    );
}

/// After heaplive's dump into the dead pipe failed, the program's own
/// write to it still raises SIGPIPE (heaplive took back only the signal
/// of its own write and restored the mask).
#[test]
fn the_programs_own_write_into_a_dead_pipe_still_gets_sigpipe() {
    let dir = tempdir("limits-own-pipe");
    let o = run(
        &dir,
        &["pipe", "own"],
        &[("HEAPLIVE_OUTPUT", "/dev/stdout")],
    );
    assert!(stderr(&o).contains("dump -1 32\n"), "{}", show(&o));
    assert_eq!(o.status.signal(), Some(13), "SIGPIPE; {}", show(&o));
}

/// lim_mem under RLIMIT_`res` = `limit`, plain: (failed mallocs, status).
fn lim_mem_plain(dir: &Path, bin: &Path, res: &str, limit: u64) -> (u64, Option<i32>) {
    let o = run_plain(dir, bin, &[res, &limit.to_string()]);
    let failed = stdout(&o)
        .strip_prefix("done ")
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of failed mallocs: {}", show(&o)));
    (failed, o.status.code())
}

/// What a line of heaplive's is about: its text after `heaplive[PID]: `
/// up to the first `:` or `(` (`exit dump failed`, `cannot map memory
/// for its tables `, `exit dump /path/file.folded`).
fn line_class(line: &str) -> &str {
    let text = line.split_once("]: ").map_or(line, |(_, t)| t);
    text.split([':', '(']).next().unwrap_or(text)
}

/// Exact mode under RLIMIT_DATA and RLIMIT_AS swept from the program's
/// own need upwards in 512 KiB steps (where heaplive's library, tables
/// and dumps cross the limit, at some limits and not their neighbours):
/// with heaplive_dump(), a signal dump and the exit dump, the program
/// always exits with the status it has without heaplive at the same
/// limit, heaplive's allocations never abort it ("memory allocation of N
/// bytes failed", 134), and heaplive says each thing it gave up once.
/// Before the fix: 134 at RLIMIT_DATA 17.0 and 17.5 MiB (the program
/// needs 7.5 MiB here), in the symbolizer.
#[test]
fn exact_mode_under_a_memory_limit_never_aborts_the_program() {
    let (dir, bin) = compiled("limits-mem", "lim_mem.c");
    const STEP: u64 = 512 << 10;
    for res in ["data", "as"] {
        let mut need = 1u64 << 20;
        while lim_mem_plain(&dir, &bin, res, need).0 != 0 {
            need += STEP / 2;
            assert!(need < 1 << 30, "lim_mem never ran plain under RLIMIT_{res}");
        }
        let limits: Vec<u64> = (0..88).map(|i| need + i * STEP).collect();
        let check = |limit: u64| {
            let (_, plain) = lim_mem_plain(&dir, &bin, res, limit);
            let log = dir.join(format!("heaplive.{res}.{limit}.log"));
            let o = run_preloaded(
                &dir,
                &bin,
                &[res, &limit.to_string()],
                &[
                    ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
                    ("HEAPLIVE_LOG", log.to_str().unwrap()),
                ],
            );
            let lines = std::fs::read_to_string(&log).unwrap_or_default();
            let what = format!("RLIMIT_{res} {limit}: {}\n--- log ---\n{lines}", show(&o));
            assert_eq!(o.status.code(), plain, "{what}");
            assert!(!stderr(&o).contains("memory allocation"), "{what}");
            let mut seen = std::collections::BTreeMap::new();
            for l in lines.lines() {
                *seen.entry(line_class(l)).or_insert(0) += 1;
            }
            for (class, n) in seen {
                assert!(n <= 1, "{n} lines of `{class}`; {what}");
            }
        };
        std::thread::scope(|s| {
            let (a, b) = limits.split_at(limits.len() / 2);
            let check = &check;
            let t = s.spawn(move || a.iter().for_each(|&l| check(l)));
            b.iter().for_each(|&l| check(l));
            t.join().unwrap();
        });
    }
}

//! Issue 30, item 3: the temporary view (`HEAPLIVE_VIEWS=temporary`,
//! `NAME.temporary.folded`: per stack, the bytes of temporary allocations,
//! blocks freed before their thread's next allocation, as heaptrack counts
//! them). `progs/temporary_sites.c`: temporary_site allocates and frees at
//! once 16,384 blocks of 64 KiB (1 GiB); short_site's 4,096 blocks of
//! 64 KiB live as briefly but spacer_site allocates 16 bytes before each
//! is freed (so they are not temporary, and spacer_site's are); long_site
//! holds 64 blocks of 1 MiB + 7 to exit.

use crate::common::{self, show};
use heaplive_format::samples::{self, Life};
use std::path::{Path, PathBuf};

const TEMP_BYTES: u64 = 16384 * 65536;
const LONG_BYTES: u64 = 64 * ((1 << 20) + 7);
const SHORT_N: u64 = 4096;
const SPACER_BYTES: u64 = SHORT_N * 16;

/// The lifetime rows of the dump's samples file (`life:CLASS ...`) of the
/// stack whose leaf is `site`: per class (1ms, 1s, later, temporary).
fn lifetimes(live: &Path, site: &str) -> Option<[Life; 4]> {
    let path = live.to_str().unwrap().replace(".folded", ".samples.folded");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let s = samples::parse(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let mut found = s
        .lifetimes
        .iter()
        .filter(|(stack, _)| stack.ends_with(&format!(";{site}")));
    let first = found.next().map(|(_, l)| *l);
    assert!(found.next().is_none(), "{site}: more than one stack");
    first
}

/// The blocks and bytes of the three lifetime classes by age together.
fn by_age(l: &[Life; 4]) -> (f64, f64) {
    l[..3]
        .iter()
        .fold((0.0, 0.0), |(n, b), c| (n + c.blocks, b + c.bytes))
}

fn run(dir: &Path, env: &[(&str, &str)]) -> (PathBuf, PathBuf) {
    let p = common::compile("temporary_sites.c", "temporary_sites", dir, &[]);
    let mut all = vec![("HEAPLIVE_VIEWS", "live,temporary,variance")];
    all.extend_from_slice(env);
    let o = common::run_preloaded(dir, &p, &[], &all);
    assert!(o.status.success(), "{}", show(&o));
    let live = common::folded_files(dir);
    assert_eq!(live.len(), 1, "{live:?}\n{}", show(&o));
    let temp = common::view_files(dir, "temporary");
    assert_eq!(temp.len(), 1, "{temp:?}\n{}", show(&o));
    (live[0].clone(), temp[0].clone())
}

/// Exact mode: the temporary view holds temporary_site's 1 GiB and
/// spacer_site's 64 KiB to the byte, and nothing of short_site (whose
/// blocks live as briefly, but another allocation comes before their
/// free) or long_site, which the live view holds to the byte. No clock is
/// involved: the scheduler cannot move a block in or out.
#[test]
fn exact_mode_attributes_the_temporary_site_to_the_byte() {
    let dir = common::tempdir("temporary_exact");
    let (live, temp) = run(dir.path(), &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    let t = common::parse_folded(&temp);
    let got = common::bytes_under(&t, "temporary_site");
    assert_eq!(got, TEMP_BYTES, "{t:#?}");
    assert_eq!(
        common::bytes_under(&t, "spacer_site"),
        SPACER_BYTES,
        "{t:#?}"
    );
    assert_eq!(common::bytes_under(&t, "short_site"), 0, "{t:#?}");
    assert_eq!(common::bytes_under(&t, "long_site"), 0, "{t:#?}");
    // The lifetime rows of the samples file: every block of the three
    // short-lived sites in one class by age (which one depends on the
    // clock), the temporary ones also in `temporary`; nothing of
    // long_site, which frees nothing.
    let temp_life = lifetimes(&live, "temporary_site").expect("temporary_site's lifetimes");
    assert_eq!(by_age(&temp_life), (16384.0, TEMP_BYTES as f64));
    assert_eq!(
        (temp_life[3].blocks, temp_life[3].bytes),
        (16384.0, TEMP_BYTES as f64)
    );
    let short = lifetimes(&live, "short_site").expect("short_site's lifetimes");
    assert_eq!(by_age(&short), (SHORT_N as f64, (SHORT_N * 65536) as f64));
    assert_eq!((short[3].blocks, short[3].bytes), (0.0, 0.0));
    let spacer = lifetimes(&live, "spacer_site").expect("spacer_site's lifetimes");
    assert_eq!(by_age(&spacer), (SHORT_N as f64, SPACER_BYTES as f64));
    assert_eq!(
        (spacer[3].blocks, spacer[3].bytes),
        (SHORT_N as f64, SPACER_BYTES as f64)
    );
    assert_eq!(lifetimes(&live, "long_site"), None);
    for l in [&temp_life, &short, &spacer] {
        assert!(l.iter().all(|c| c.variance == 0.0), "exact: {l:?}");
    }
    let l = common::parse_folded(&live);
    assert_eq!(common::bytes_under(&l, "long_site"), LONG_BYTES);
    assert_eq!(common::bytes_under(&l, "temporary_site"), 0);

    // `heaplive top` on the file: the temporary site first, labeled.
    let out = common::ok(common::heaplive(&["top", temp.to_str().unwrap()]));
    let mut lines = out.lines();
    let head = lines.next().unwrap();
    assert!(head.trim_start().starts_with("TEMPORARY"), "{out}");
    let first = lines.next().unwrap();
    assert!(first.contains("temporary_site"), "{out}");
    // The same table from the live file or the directory with `--view`.
    for from in [live.to_str().unwrap(), dir.path().to_str().unwrap()] {
        let by_view = common::ok(common::heaplive(&["top", "--view", "temporary", from]));
        assert_eq!(by_view, out, "top --view temporary {from}");
    }

    // `heaplive report`: the dump's selectable views include `temporary`,
    // whose top stack is temporary_site with its bytes.
    let (page, html) = common::report_of_dir(dir.path());
    let at = html
        .find("\"temporary\":{\"total\":")
        .unwrap_or_else(|| panic!("no temporary view in the page's data"));
    let view = &html[at..];
    let first = &view[view.find("\"stack\":\"").unwrap() + 9..];
    let first = &first[..first.find("\",").unwrap()];
    assert!(first.ends_with(";temporary_site"), "top stack {first}");
    let bytes = &view[view.find("\"bytes\":").unwrap() + 8..];
    let bytes: u64 = bytes[..bytes.find([',', '}']).unwrap()].parse().unwrap();
    assert_eq!(bytes, got);
    // The dump's freed blocks by lifetime, the stack that freed the most
    // first: per class [blocks, bytes, low, high].
    let lives = &html[html.find("\"lifetimes\":[{").expect("no lifetimes") + 13..];
    let rows: Vec<&str> = lives[..lives.find("}]").unwrap()].split("},{").collect();
    assert!(rows[0].ends_with(";temporary_site\""), "{}", rows[0]);
    assert!(
        rows[0].contains("\"temporary\":[16384,1073741824,1073741824,1073741824]"),
        "{}",
        rows[0]
    );
    assert!(rows[1].ends_with(";short_site\""), "{}", rows[1]);
    assert!(rows[1].contains("\"temporary\":[0,0,0,0]"), "{}", rows[1]);

    // In a real browser, the page opened at its temporary view
    // (`#view=temporary`): the temporary site on top, and the lifetimes
    // table with its 16,384 blocks, then short_site's.
    let shown = Path::new(&format!("{}#view=temporary", page.display())).to_path_buf();
    let o = crate::report::chromium(dir.path(), &shown, &["--dump-dom"]);
    let dom = common::stdout(&o);
    assert!(!common::stderr(&o).contains("CONSOLE"), "{}", show(&o));
    assert!(dom.contains("data-drawn=\"yes\""), "{dom}");
    assert!(crate::report::first_stack(&dom, "top").ends_with(";temporary_site"));
    let lives = &dom[dom
        .find("<table class=\"top lifetimes\">")
        .expect("the lifetimes table")..];
    let first = crate::report::first_stack(lives, "top lifetimes");
    assert!(first.ends_with(";temporary_site"), "{first}");
    assert!(lives.contains("1.0 GiB, 16384 blocks"), "{lives}");
    assert!(lives.contains(";short_site\""), "short_site's row: {lives}");

    // A directory where one dump has no temporary view: that dump is left
    // out, and one line says so.
    std::fs::write(
        dir.path().join("heaplive.other.77.1.folded"),
        "main;other_site 4096\n",
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();
    let o = common::heaplive(&["top", "--view", "temporary", d]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(common::stdout(&o), out);
    assert_eq!(
        common::stderr(&o),
        format!(
            "heaplive top: 1 of the 2 dumps in {d} have no temporary file (the dump was taken without HEAPLIVE_VIEWS=...,temporary): left out\n"
        )
    );
}

/// Sampled mode (the default interval, 512 KiB; a 64 KiB block is sampled
/// with p = 1 - e^(-1/8), standing for 64 KiB / p): the estimate of the
/// temporary site's bytes lies within 5 estimated standard deviations of
/// 1 GiB (the file's variance; normal approximation over ~1,900 samples:
/// a false failure about once in 1.7 million runs, and the seed is fixed),
/// the interval is narrow (sd under 5% of 1 GiB), and short_site and
/// long_site are absent (whatever the sampling: their blocks are never
/// temporary).
#[test]
fn sampled_mode_estimate_is_within_its_interval() {
    let dir = common::tempdir("temporary_sampled");
    let (live, temp) = run(dir.path(), &[("HEAPLIVE_SEED", "11")]);
    let t = common::parse_folded(&temp);
    let est = common::bytes_under(&t, "temporary_site") as f64;
    assert_eq!(common::bytes_under(&t, "long_site"), 0, "{t:#?}");
    assert_eq!(common::bytes_under(&t, "short_site"), 0, "{t:#?}");
    // The lifetime rows: the bytes of the classes by age together, and
    // of the temporary class, within 5 estimated standard deviations of
    // 1 GiB (as above: classes hold disjoint samples, so variances add).
    let l = lifetimes(&live, "temporary_site").expect("temporary_site's lifetimes");
    let (_, aged) = by_age(&l);
    let aged_sd = l[..3].iter().map(|c| c.variance).sum::<f64>().sqrt();
    let temp_sd = l[3].variance.sqrt();
    for (what, est, sd) in [
        ("by age", aged, aged_sd),
        ("temporary", l[3].bytes, temp_sd),
    ] {
        assert!(
            sd > 0.0 && (est - TEMP_BYTES as f64).abs() < 5.0 * sd,
            "{what}: estimate {est}, sd {sd}, truth {TEMP_BYTES}"
        );
    }
    let short = lifetimes(&live, "short_site").expect("short_site's lifetimes");
    assert_eq!((short[3].blocks, short[3].bytes), (0.0, 0.0));
    let var_file = PathBuf::from(
        temp.to_str()
            .unwrap()
            .replace(".folded", ".variance.folded"),
    );
    let v = common::parse_folded(&var_file);
    let sd = (common::bytes_under(&v, "temporary_site") as f64).sqrt();
    assert!(sd > 0.0 && sd < 0.05 * TEMP_BYTES as f64, "sd {sd}");
    assert!(
        (est - TEMP_BYTES as f64).abs() < 5.0 * sd,
        "estimate {est}, sd {sd}, truth {TEMP_BYTES}"
    );
}

/// Without the view no file, and nothing changes for the live view.
#[test]
fn off_by_default() {
    let (dir, p) = common::compiled("temporary_off", "temporary_sites.c");
    let o = common::run_preloaded(dir.path(), &p, &[], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(common::view_files(dir.path(), "temporary").is_empty());
    let live = common::folded_files(dir.path())[0].clone();
    let l = common::parse_folded(&live);
    assert_eq!(common::bytes_under(&l, "long_site"), LONG_BYTES);
    // `top --view temporary` says which file is missing and why.
    let live = live.to_str().unwrap();
    let want = live.replace(".folded", ".temporary.folded");
    common::fails_with(
        common::heaplive(&["top", "--view", "temporary", live]),
        1,
        &format!(
            "heaplive: {want}: no such file (the dump was taken without HEAPLIVE_VIEWS=...,temporary)"
        ),
    );
    let d = dir.path().to_str().unwrap();
    common::fails_with(
        common::heaplive(&["top", "--view", "temporary", d]),
        1,
        &format!(
            "heaplive: {d}: no dump with a temporary file (the dump was taken without HEAPLIVE_VIEWS=...,temporary)"
        ),
    );
}

/// `heaplive run --report` with the temporary view: the run lists
/// `NAME.temporary.folded` as a view of its dump, not as a dump, and the
/// page has one process with one dump (the temporary file used to become
/// a process of its own, named after the file, with pid 0).
#[test]
fn run_lists_the_temporary_file_as_a_view_and_reports_one_process() {
    let (dir, p) = common::compiled("temporary_run", "temporary_sites.c");
    let (o, page) =
        crate::report::run_with_report(dir.path(), &p, &[("HEAPLIVE_VIEWS", "live,temporary")]);
    let err = common::stderr(&o);
    let live = common::folded_files(dir.path());
    assert_eq!(live.len(), 1, "{live:?}");
    let temp = common::view_files(dir.path(), "temporary");
    // The printed command names the one dump; the list has its views.
    let hint = format!(
        "heaplive: all of it in one page: heaplive report {} -o report.html\n",
        live[0].display()
    );
    assert!(err.contains(&hint), "{err}");
    assert!(err.contains(&format!("  {}\n", temp[0].display())), "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    let data = common::report_data(&html);
    assert_eq!(data.matches("\"pid\":").count(), 1, "one process: {data}");
    assert!(!data.contains("\"pid\":0"), "{data}");
    assert_eq!(data.matches("\"file\":").count(), 1, "one dump");
}

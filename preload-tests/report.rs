//! Issue 30, item 2: `heaplive report` in a real browser. Debian's
//! `chromium` (scripts/install-test-deps.sh) opens the page from a file://
//! URL with every host unresolvable, and the test reads the rendered DOM
//! (`--dump-dom`) and a screenshot. `progs/report_grow.c` holds 5 MiB at
//! held_site from the start and adds 2 MiB at grow_site at each of 4
//! dumps (exact mode): the last dump's top stack is grow_site, and so is
//! what grew from the first dump to the last.

use crate::common::{self, show};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the program and `heaplive report` on its directory; the page's path.
fn report_of_a_run(dir: &Path) -> PathBuf {
    let o = common::run_prog(
        dir,
        "report_grow",
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_SIGNAL", "none"),
            ("HEAPLIVE_TIMELINE", "10ms"),
        ],
    );
    assert_eq!(common::folded_files(dir).len(), 5, "{}", show(&o));
    common::report_of_dir(dir).0
}

/// Chromium, headless, on `page` (a file; a `#fragment` after its name goes
/// into the URL), no network: its output.
pub fn chromium(dir: &Path, page: &Path, what: &[&str]) -> Output {
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1200,1800",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium-profile").display()
        ))
        .args(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium (scripts/install-test-deps.sh installs it)");
    assert!(o.status.success(), "{}", show(&o));
    o
}

/// The rows of the process's timeline files, merged (every distinct row
/// any file holds), as the report's chart must show them.
fn timeline_rows(dir: &Path) -> usize {
    let mut rows = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.to_str().unwrap().ends_with(".timeline.tsv") {
            let text = std::fs::read_to_string(&p).unwrap();
            for l in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
                rows.insert(l.to_string());
            }
        }
    }
    rows.len()
}

/// The `data-stack` of the first row of the table of class `cls`.
pub fn first_stack<'a>(dom: &'a str, cls: &str) -> &'a str {
    let at = dom
        .find(&format!("<table class=\"{cls}\">"))
        .unwrap_or_else(|| panic!("no table {cls} in the page:\n{dom}"));
    let rest = &dom[at..];
    let row = rest.find("<tr data-stack=\"").expect("a row") + "<tr data-stack=\"".len();
    let end = rest[row..].find('"').unwrap();
    &rest[row..row + end]
}

#[test]
fn the_report_in_a_real_browser_shows_the_known_sites() {
    let dir = common::tempdir("report_browser");
    let page = report_of_a_run(dir.path());
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: no external script, style, font or image, and the
    // data once, as JSON.
    for bad in ["<script src", "<link", "@import", "url(http", "src=\"http"] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    assert_eq!(html.matches("id=\"heaplive-data\"").count(), 1);
    let o = chromium(dir.path(), &page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        dom.contains("data-drawn=\"yes\""),
        "the script ran to its end:\n{dom}"
    );
    assert!(
        !err.contains("CONSOLE"),
        "console messages (errors) while drawing:\n{err}"
    );
    assert!(dom.contains("<div id=\"heaplive-errors\"></div>"), "{dom}");
    // The chart: one point per timeline row.
    let rows = timeline_rows(dir.path());
    assert!(rows > 5, "{rows} timeline rows");
    assert_eq!(dom.matches("<circle class=\"row\"").count(), rows);
    // The chosen dump (the last) and its top stack: grow_site's 8 MiB
    // over held_site's 5 MiB.
    let top = first_stack(&dom, "top");
    assert!(top.ends_with("grow_site"), "top stack: {top}");
    // From the first dump to the last, what grew: grow_site.
    let grew = first_stack(&dom, "diff");
    assert!(grew.ends_with("grow_site"), "grown: {grew}");
    // held_site did not change: not in the table of changes.
    let diff_at = dom.find("<table class=\"diff\">").unwrap();
    let diff_end = diff_at + dom[diff_at..].find("</table>").unwrap();
    assert!(
        !dom[diff_at..diff_end].contains("held_site\""),
        "held_site did not change"
    );
    // And it grew at every dump: the leak suspects' first row.
    assert!(first_stack(&dom, "suspects").ends_with("grow_site"));
    // The flame graphs are inferno's SVG, embedded.
    assert!(dom.contains("<iframe class=\"flame\""), "{dom}");
    assert!(
        html.contains("inferno") || html.contains("flamegraph"),
        "inferno's SVG embedded"
    );
    // A screenshot of the drawn page (a PNG of the window's size).
    let shot = dir.path().join("report.png");
    chromium(
        dir.path(),
        &page,
        &[
            // Time for the flame graphs' frames to draw.
            "--virtual-time-budget=3000",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1200, 1800));
}

/// The embedded data against the truth: the last dump's live view holds
/// grow_site's 4 x GROW bytes and held_site's HELD bytes, to the byte.
#[test]
fn the_embedded_data_holds_the_dumps_to_the_byte() {
    let dir = common::tempdir("report_data");
    let page = report_of_a_run(dir.path());
    let html = std::fs::read_to_string(&page).unwrap();
    let json = common::report_data(&html);
    // The stacks in the last dump's live view, as `"stack":"...","bytes":N`.
    let last = json.rfind("\"n\":5").expect("dump 5");
    let live = &json[last..];
    let bytes_of = |site: &str| -> u64 {
        let at = live
            .find(&format!("{site}\",\"bytes\":"))
            .unwrap_or_else(|| panic!("{site}"));
        let rest = &live[at + site.len() + 10..];
        rest[..rest.find([',', '}']).unwrap()].parse().unwrap()
    };
    assert_eq!(bytes_of("grow_site"), 4 * ((2 << 20) + 13));
    assert_eq!(bytes_of("held_site"), (5 << 20) + 11);
}

/// `heaplive run` prints the command that draws the run's dumps, and with
/// `--report FILE` writes that page when the program ends.
#[test]
fn run_prints_the_report_command_and_writes_the_page() {
    let (dir, p) = common::compiled("report_run", "report_grow.c");
    let (o, page) = run_with_report(dir.path(), &p, &[]);
    let err = common::stderr(&o);
    // Five dumps: named by their directory.
    assert!(
        err.contains(&format!(
            "heaplive: all of it in one page: heaplive report {} -o report.html",
            dir.path().display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("heaplive: report page: {}", page.display())),
        "{err}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("id=\"heaplive-data\"").count(), 1);
    assert!(
        html.contains("grow_site") && html.contains("\"n\":5"),
        "the run's five dumps"
    );
}

/// `heaplive run --interval 1 -o DIR/heaplive.%e.%p.%n.folded --report
/// DIR/run.html -- prog` in `dir`, with `env`: its output (asserted a
/// success) and the page's path.
pub fn run_with_report(dir: &Path, prog: &Path, env: &[(&str, &str)]) -> (Output, PathBuf) {
    let template = dir.join("heaplive.%e.%p.%n.folded");
    let page = dir.join("run.html");
    let o = common::heaplive_run_exact(
        dir,
        &template,
        &["--report", page.to_str().unwrap()],
        &[prog.to_str().unwrap()],
        env,
    );
    (o, page)
}

/// The live samples by size class of the dump of `progs/report_sizes.c`
/// (its samples file's size rows), per stack leaf: class -> (samples,
/// bytes); and the live rows' samples per leaf.
type Classes = std::collections::BTreeMap<u64, (u64, u64)>;
type ByLeaf<T> = Vec<(String, T)>;
fn size_rows(dir: &Path) -> (ByLeaf<Classes>, ByLeaf<u64>) {
    let files = common::folded_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let path = files[0]
        .to_str()
        .unwrap()
        .replace(".folded", ".samples.folded");
    let bytes = std::fs::read(&path).expect("the samples file");
    let s = heaplive_format::samples::parse(&path, &bytes).unwrap();
    let leaf = |stack: &str| stack.rsplit(';').next().unwrap().to_string();
    let sizes = s
        .sizes
        .iter()
        .map(|(stack, c)| {
            let c = c
                .iter()
                .map(|(&low, z)| (low, (z.samples, z.bytes as u64)))
                .collect();
            (leaf(stack), c)
        })
        .collect();
    let live = s.view("live").unwrap();
    let counts = live
        .iter()
        .map(|(stack, st)| (leaf(stack), st.samples.unwrap()))
        .collect();
    (sizes, counts)
}

/// Issue 30's size histogram, exact mode (`HEAPLIVE_VIEWS=live,sizes`
/// writes the samples file there): sized_site's 100 blocks of 48 bytes
/// and 10 of 100000 are its classes 32 and 65536 to the block and byte,
/// other_site's one of 3000 is class 2048; the report's data has them for
/// each stack, and the page draws a bar per class in the top table.
#[test]
fn size_rows_and_the_report_histogram_are_exact() {
    let (dir, _) = common::run_prog_in(
        "report_sizes",
        "report_sizes",
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_SIGNAL", "none"),
            ("HEAPLIVE_VIEWS", "live,sizes"),
        ],
    );
    let (sizes, counts) = size_rows(dir.path());
    let want = |v: &[(u64, (u64, u64))]| v.iter().copied().collect::<Classes>();
    assert_eq!(
        sizes,
        vec![
            ("other_site".to_string(), want(&[(2048, (1, 3000))])),
            (
                "sized_site".to_string(),
                want(&[(32, (100, 4800)), (65536, (10, 1_000_000))])
            ),
        ]
    );
    assert_eq!(
        counts,
        vec![
            ("other_site".to_string(), 1),
            ("sized_site".to_string(), 110)
        ]
    );
    // `top` reads the file as ever (exact: zero-width intervals).
    let top = common::ok(common::heaplive(&[
        "top",
        common::folded_files(dir.path())[0].to_str().unwrap(),
    ]));
    assert!(
        top.contains("      110  981.2 KiB..981.2 KiB  sized_site"),
        "{top}"
    );
    assert!(!top.contains("not seen"), "{top}");

    let (page, html) = common::report_of_dir(dir.path());
    assert!(
        html.contains(
            "main;sized_site\",\"bytes\":1004800,\"low\":1004800,\"high\":1004800,\"sizes\":[[32,100,4800],[65536,10,1000000]]}"
        ),
        "sized_site's histogram in the data"
    );
    assert!(
        html.contains(
            "main;other_site\",\"bytes\":3000,\"low\":3000,\"high\":3000,\"sizes\":[[2048,1,3000]]}"
        ),
        "other_site's histogram in the data"
    );
    let o = chromium(dir.path(), &page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(dom.contains("data-drawn=\"yes\""), "{dom}");
    assert!(!err.contains("CONSOLE"), "console messages:\n{err}");
    // The top table's first row is sized_site's, with a bar per class.
    assert!(first_stack(&dom, "top").ends_with("main;sized_site"));
    let at = dom.find("<table class=\"top\">").unwrap();
    let row = &dom[at..at + dom[at..].find("</tr></tbody>").unwrap()];
    let row = &row[row.find("<tr data-stack=").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("<svg class=\"sizes\""), "{row}");
    assert_eq!(row.matches("<rect class=\"size\"").count(), 2, "{row}");
    assert!(
        row.contains("data-low=\"32\" data-samples=\"100\" data-bytes=\"4800\""),
        "{row}"
    );
    assert!(
        row.contains("data-low=\"65536\" data-samples=\"10\" data-bytes=\"1000000\""),
        "{row}"
    );
    assert!(
        row.contains("<title>64.0 KiB to under 128.0 KiB: 976.6 KiB live in 10 samples</title>"),
        "{row}"
    );
}

/// Sampled mode: every samples file has the size rows, and a stack's
/// classes add up to its live samples. The large blocks (100000 bytes at
/// an interval of 4096: p = 1 - exp(-24.4)) are all sampled, and each
/// weighs its size to the byte.
#[test]
fn sampled_size_rows_add_up_to_the_live_samples() {
    let (dir, _) = common::run_prog_in(
        "report_sizes_sampled",
        "report_sizes",
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "4096"),
            ("HEAPLIVE_SIGNAL", "none"),
        ],
    );
    let (sizes, counts) = size_rows(dir.path());
    let mut sum: Vec<(String, u64)> = sizes
        .iter()
        .map(|(leaf, c)| (leaf.clone(), c.values().map(|z| z.0).sum()))
        .collect();
    sum.sort();
    assert_eq!(sum, counts);
    let sized = &sizes.iter().find(|(l, _)| l == "sized_site").unwrap().1;
    assert_eq!(sized[&65536], (10, 1_000_000));
    assert!(sized.keys().all(|&k| k == 32 || k == 65536), "{sized:?}");
    // `merge --samples` adds up the live files' size rows.
    let dump = common::folded_files(dir.path()).remove(0);
    let copy = dir.path().join("copy.folded");
    std::fs::copy(&dump, &copy).unwrap();
    std::fs::copy(
        dump.to_str().unwrap().replace(".folded", ".samples.folded"),
        dir.path().join("copy.samples.folded"),
    )
    .unwrap();
    let merged = common::ok(common::heaplive(&[
        "merge",
        "--samples",
        dump.to_str().unwrap(),
        copy.to_str().unwrap(),
    ]));
    let big = merged
        .lines()
        .find(|l| l.starts_with("size:65536 ") && l.ends_with("main;sized_site"))
        .unwrap_or_else(|| panic!("{merged}"));
    assert!(big.starts_with("size:65536 20 2000000 "), "{big}");
}

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
    let p = common::compile("report_grow.c", "report_grow", dir, &[]);
    let o = common::run_preloaded(
        dir,
        &p,
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_SIGNAL", "none"),
            ("HEAPLIVE_TIMELINE", "10ms"),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(common::folded_files(dir).len(), 5, "{}", show(&o));
    let page = dir.join("report.html");
    common::ok(common::heaplive(&[
        "report",
        dir.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]));
    page
}

/// Chromium, headless, on `page` (a file), no network: its output.
fn chromium(dir: &Path, page: &Path, what: &[&str]) -> Output {
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
fn first_stack<'a>(dom: &'a str, cls: &str) -> &'a str {
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
    let start = html.find("id=\"heaplive-data\">").unwrap() + "id=\"heaplive-data\">".len();
    let json = &html[start..start + html[start..].find("</script>").unwrap()];
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
    let dir = common::tempdir("report_run");
    let p = common::compile("report_grow.c", "report_grow", dir.path(), &[]);
    let template = dir.path().join("heaplive.%e.%p.%n.folded");
    let page = dir.path().join("run.html");
    let o = common::heaplive_command(&[
        "run",
        "--interval",
        "1",
        "-o",
        template.to_str().unwrap(),
        "--report",
        page.to_str().unwrap(),
        "--",
        p.to_str().unwrap(),
    ])
    .current_dir(dir.path())
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", show(&o));
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

//! Issue 29, items 8 and 10: `top`, `diff` and `flamegraph` name what a
//! file counts (LIVE / ALLOCATED / PEAK, "Live heap", "Allocated bytes",
//! "Live heap at the peak") from its view, and `flamegraph` draws the
//! output of `diff --folded` as a differential flame graph.

use crate::common::*;

/// The header line of `top`'s table (the line ending "STACK (leaf first)").
fn top_header(file: &str) -> String {
    let out = ok(heaplive(&["top", file]));
    out.lines()
        .find(|l| l.ends_with("STACK (leaf first)"))
        .unwrap_or_else(|| panic!("no header:\n{out}"))
        .to_string()
}

/// The `<title>` and the subtitle of a flame graph (inferno's `title` and
/// `subtitle` text elements).
fn svg_of(args: &[&str]) -> String {
    let o = heaplive(args);
    assert!(o.status.success(), "{}", show(&o));
    stdout(&o)
}

fn well_formed(svg: &str, dir: &std::path::Path) {
    let f = write_file(dir, "check.svg", svg);
    assert_well_formed_xml(&f);
}

#[test]
fn top_diff_and_flamegraph_label_each_view() {
    let dir = tempdir("labels");
    let live = dir.file("heaplive.app.42.3.folded", b"main;live_site 4096\n");
    let alloc = dir.file("heaplive.app.42.3.alloc.folded", b"main;alloc_site 8192\n");
    let peak = dir.file("heaplive.app.42.3.peak.folded", b"main;peak_site 16384\n");
    let alloc2 = dir.file("heaplive.app.42.4.alloc.folded", b"main;alloc_site 9000\n");

    let h = top_header(&live);
    assert!(h.trim_start().starts_with("LIVE "), "{h}");
    let h = top_header(&alloc);
    assert!(h.trim_start().starts_with("ALLOCATED "), "{h}");
    let h = top_header(&peak);
    assert!(h.trim_start().starts_with("PEAK "), "{h}");

    let d = ok(heaplive(&["diff", &alloc, &alloc2]));
    let header = d
        .lines()
        .find(|l| l.ends_with("  STACK"))
        .unwrap_or_else(|| panic!("no stack header:\n{d}"));
    let cols: Vec<&str> = header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cols,
        ["CHANGE", "OLD ALLOCATED", "NEW ALLOCATED", "STACK"],
        "{d}"
    );
    let d = ok(heaplive(&["diff", &live, &live]));
    assert!(!d.contains("ALLOCATED"), "{d}");

    for (file, title, counts) in [
        (
            &live,
            "Live heap of app (pid 42), dump 3",
            "4,096 live bytes",
        ),
        (
            &alloc,
            "Allocated bytes of app (pid 42), dump 3",
            "8,192 bytes allocated",
        ),
        (
            &peak,
            "Live heap at the peak of app (pid 42), dump 3",
            "16,384 live bytes at the peak",
        ),
    ] {
        let svg = svg_of(&["flamegraph", file]);
        assert!(svg.contains(title), "{title} in the SVG of {file}");
        assert!(svg.contains(counts), "{counts} in the SVG of {file}");
        for other in [
            "Live heap of",
            "Allocated bytes of",
            "Live heap at the peak of",
        ] {
            assert!(
                other == &title[..other.len().min(title.len())] || !svg.contains(other),
                "{other} in the SVG of {file}"
            );
        }
    }
}

#[test]
fn flamegraph_draws_a_diff_as_a_differential_flame_graph() {
    let (dir, old) = tempdir_with(
        "diffgraph",
        "old.folded",
        b"main;grown_site 1000\nmain;shrunk_site 4000\nmain;gone_site 500\n",
    );
    let new = dir.file(
        "new.folded",
        b"main;grown_site 9000\nmain;shrunk_site 1000\nmain;born_site 100\n",
    );
    let diff = ok(heaplive(&["diff", "--folded", &old, &new]));
    let change = dir.file("change.folded", diff.as_bytes());
    let svg = svg_of(&["flamegraph", &change]);
    well_formed(&svg, dir.path());
    assert!(svg.contains("Change in the heap: change.folded"), "title");
    assert!(
        svg.contains("5,500 -&gt; 10,100 bytes") || svg.contains("5,500 -> 10,100 bytes"),
        "subtitle"
    );
    // Width is the new bytes, and each box's tooltip carries the change
    // (inferno: `name (N bytes, P%; +D%)`): 9,000 of 10,100 bytes, +8,000
    // of the 10,100 = +79.21%.
    assert!(
        svg.contains("grown_site (9,000 bytes, 89.11%; +79.21%)"),
        "{svg}"
    );
    assert!(
        svg.contains("shrunk_site (1,000 bytes, 9.90%; -29.70%)"),
        "{svg}"
    );
    // Red for growth, blue for shrinking: the fill of each box.
    let fill_of = |name: &str| {
        let at = svg.find(&format!("<title>{name} (")).expect(name);
        let rest = &svg[at..];
        let f = rest.find("fill=\"").expect("a fill") + 6;
        rest[f..f + rest[f..].find('"').unwrap()].to_string()
    };
    let rgb = |s: &str| -> (u8, u8, u8) {
        let v: Vec<u8> = s
            .trim_start_matches("rgb(")
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.trim().parse().unwrap())
            .collect();
        (v[0], v[1], v[2])
    };
    let (r, g, b) = rgb(&fill_of("grown_site"));
    assert!(
        r == 255 && g < 255 && b < 255,
        "grown_site is red: {r},{g},{b}"
    );
    let (r, g, b) = rgb(&fill_of("shrunk_site"));
    assert!(
        b == 255 && r < 255 && g < 255,
        "shrunk_site is blue: {r},{g},{b}"
    );

    // A dump still reads as a dump; --php on a differential file is refused.
    let o = heaplive(&["flamegraph", "--php", &change]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

/// `diff --help` names only what is installed: the heaplive command.
#[test]
fn diff_help_points_to_heaplive_flamegraph() {
    let help = ok(heaplive(&["diff", "--help"]));
    for absent in ["inferno-flamegraph", "flamegraph.pl", "difffolded"] {
        assert!(!help.contains(absent), "{absent} in diff --help:\n{help}");
    }
    assert!(help.contains("heaplive flamegraph "), "{help}");
}

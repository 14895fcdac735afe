//! Tests of the `heaplive` command on synthetic folded files: top, diff,
//! merge, flamegraph, malformed inputs, usage (on processes:
//! `cli_processes.rs`).

use crate::common::*;
use std::collections::BTreeMap;
use std::process::Command;

/// A deterministic synthetic profile: `n` distinct stacks with counts from
/// a linear congruential generator seeded by `seed`.
fn synthetic(n: usize, seed: u64) -> BTreeMap<String, u64> {
    let mut x = seed;
    let mut out = BTreeMap::new();
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let count = (x >> 33) % 10_000_000;
        let depth = 2 + i % 5;
        let mut frames = vec!["_start".to_string(), "main".to_string()];
        frames.extend((0..depth).map(|d| format!("fn_{}_{d}", i % 7)));
        frames.push(format!("alloc site {i} (lib.c:{})", i + 1));
        out.insert(frames.join(";"), count);
    }
    out
}

fn folded_text(p: &BTreeMap<String, u64>) -> String {
    p.iter().map(|(s, c)| format!("{s} {c}\n")).collect()
}

fn total(p: &BTreeMap<String, u64>) -> u128 {
    p.values().map(|&c| c as u128).sum()
}

/// Rows of a `--bytes` table: (first column as integer, rest of line).
fn table_rows(text: &str) -> Vec<(i128, String)> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let (num, rest) = t.split_once("  ")?;
            Some((
                num.trim_start_matches('+').parse::<i128>().ok()?,
                rest.trim().to_string(),
            ))
        })
        .collect()
}

#[test]
fn top_totals_equal_folded_totals() {
    let dir = tempdir("top");
    let a = synthetic(40, 1);
    let b = synthetic(25, 2);
    let fa = dir.file("a.folded", folded_text(&a).as_bytes());
    let fb = dir.file("b.folded", folded_text(&b).as_bytes());
    let mut sum = a.clone();
    for (s, c) in &b {
        *sum.entry(s.clone()).or_insert(0) += c;
    }
    let want = total(&sum);

    let out = ok(heaplive(&["top", "--bytes", "-n", "0", &fa, &fb]));
    let rows = table_rows(&out);
    let (last, stacks) = rows.split_last().expect("a total line");
    assert_eq!(last.0 as u128, want, "{out}");
    assert_eq!(
        last.1,
        format!(
            "100.0%  total: {want} bytes in {} stacks from 2 files",
            sum.len()
        )
    );
    assert_eq!(stacks.len(), sum.len(), "{out}");
    assert_eq!(
        stacks.iter().map(|r| r.0 as u128).sum::<u128>(),
        want,
        "rows must add up to the total:\n{out}"
    );
    let mut sorted: Vec<i128> = stacks.iter().map(|r| r.0).collect();
    sorted.sort_by(|x, y| y.cmp(x));
    assert_eq!(
        sorted,
        stacks.iter().map(|r| r.0).collect::<Vec<_>>(),
        "rows sorted by size"
    );

    // Default: 20 rows, human sizes, a "more stacks" row, the same total.
    let out = ok(heaplive(&["top", &fa, &fb]));
    assert!(
        out.lines()
            .last()
            .unwrap_or("")
            .contains(&format!("total: {want} bytes")),
        "{out}"
    );
    assert!(
        out.contains(&format!("({} more stacks)", sum.len() - 20)),
        "{out}"
    );
    assert!(out.contains(" MiB "), "{out}");
    assert_eq!(out.lines().count(), 1 + 20 + 2, "{out}");

    // Leaf first.
    let one = dir.file("one.folded", b"_start;main;parse;xmlStrdup 3000\n");
    let out = ok(heaplive(&["top", &one]));
    assert!(
        out.contains("xmlStrdup <- parse <- main <- _start"),
        "{out}"
    );
    assert!(out.contains("2.9 KiB"), "{out}");
}

#[test]
fn top_inclusive_counts_each_frame_once_per_stack() {
    let (_dir, f) = tempdir_with(
        "incl",
        "a.folded",
        b"main;walk;walk;walk;leaf 100\nmain;walk;other 30\nmain;solo 7\n",
    );
    let out = ok(heaplive(&["top", "--inclusive", "--bytes", &f]));
    let rows = table_rows(&out);
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.1.ends_with(&format!("  {name}")))
            .map(|r| r.0)
    };
    assert_eq!(find("main"), Some(137), "{out}");
    assert_eq!(find("walk"), Some(130), "{out}");
    assert_eq!(find("leaf"), Some(100), "{out}");
    assert_eq!(find("solo"), Some(7), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap_or("")
            .contains("total: 137 bytes in 3 stacks"),
        "{out}"
    );
}

#[test]
fn diff_shows_known_growth_exactly() {
    let dir = tempdir("diff");
    let base = synthetic(30, 7);
    let leak = "_start;main;serve;cache_put;leaky_alloc";
    let mut old = base.clone();
    old.insert(leak.to_string(), 4096);
    let mut new = base.clone();
    new.insert(leak.to_string(), 4096 + 50 * 1048576 + 17);
    let shrink = base.keys().nth(3).expect("stacks").clone();
    *new.get_mut(&shrink).expect("stack") = 0;
    let gone = base.keys().nth(5).expect("stacks").clone();
    new.remove(&gone);
    let fo = dir.file("old.folded", folded_text(&old).as_bytes());
    let fnew = dir.file("new.folded", folded_text(&new).as_bytes());

    let out = ok(heaplive(&["diff", "--bytes", "-n", "0", &fo, &fnew]));
    let growth = 50 * 1048576 + 17;
    let change = total(&new) as i128 - total(&old) as i128;
    assert!(
        out.starts_with(&format!(
            "total: {} -> {} ({change:+}",
            total(&old),
            total(&new)
        )),
        "{out}"
    );
    let stack_section = out.split("per function").next().expect("sections");
    let rows = table_rows(stack_section);
    let biggest = rows.iter().max_by_key(|r| r.0.abs()).expect("rows");
    assert_eq!(biggest.0, growth, "{out}");
    assert!(
        biggest
            .1
            .ends_with("leaky_alloc <- cache_put <- serve <- main <- _start"),
        "{out}"
    );
    assert_eq!(rows[0], *biggest, "sorted by absolute change:\n{out}");
    // Every changed stack is listed once, with its exact change.
    assert_eq!(rows.len(), 3, "{out}");
    let func_rows = table_rows(out.split("per function").nth(1).expect("function section"));
    assert_eq!(func_rows[0].0, growth, "{out}");
    assert!(func_rows[0].1.ends_with("  leaky_alloc"), "{out}");

    let human = ok(heaplive(&["diff", &fo, &fnew]));
    assert!(human.contains("+50.0 MiB"), "{human}");

    // Two-column folded output: the union of stacks, OLD then NEW.
    let two = ok(heaplive(&["diff", "--folded", &fo, &fnew]));
    let mut want = String::new();
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        want += &format!(
            "{k} {} {}\n",
            old.get(k).copied().unwrap_or(0),
            new.get(k).copied().unwrap_or(0)
        );
    }
    assert_eq!(two, want);
    assert!(two.contains(&format!("{leak} 4096 {}\n", 4096 + growth)));
    // And that file is refused as a one-count input, with the reason.
    let d = dir.file("d.folded", two.as_bytes());
    let o = heaplive(&["top", &d]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("differential"), "{}", stderr(&o));
}

#[test]
fn merge_sums_identical_stacks() {
    let dir = tempdir("merge");
    let a = dir.file("a.folded", b"main;b 5\nmain;a 1\nmain;a 2\n\n");
    let b = dir.file("b.folded", b"main;c (x.c:1) 10\r\nmain;a 100\n");
    let out = ok(heaplive(&["merge", &a, &b]));
    assert_eq!(out, "main;a 103\nmain;b 5\nmain;c (x.c:1) 10\n");
    // Merging is idempotent on its own output and keeps the total.
    let m = dir.file("m.folded", out.as_bytes());
    assert_eq!(ok(heaplive(&["merge", &m])), out);
    let big = synthetic(100, 3);
    let f = dir.file("big.folded", folded_text(&big).as_bytes());
    let merged = ok(heaplive(&["merge", &f, &f]));
    let doubled: BTreeMap<String, u64> = big.iter().map(|(s, c)| (s.clone(), 2 * c)).collect();
    assert_eq!(merged, folded_text(&doubled));
}

/// A directory of dumps in which one process never sampled: its dump is an
/// empty file (heaplive writes one for every profiled process), which adds
/// nothing; `top` and `merge` of the directory read the others. Before,
/// `heaplive top DIR` failed on heaplive's own empty dump ("empty (no
/// stacks)"). A directory of empty dumps only is an error that says so.
#[test]
fn directory_with_an_empty_dump_reads_the_others() {
    let dir = tempdir("dir-empty-dump");
    let d = dir.path().join("dumps");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("heaplive.true.10.1.folded"), b"").unwrap();
    std::fs::write(
        d.join("heaplive.app.11.1.folded"),
        b"main;grow 4096\nmain;keep 100\n",
    )
    .unwrap();
    let ds = d.to_str().unwrap().to_string();
    assert_eq!(
        ok(heaplive(&["merge", &ds])),
        "main;grow 4096\nmain;keep 100\n"
    );
    let top = ok(heaplive(&["top", "--bytes", &ds]));
    assert!(top.contains("total: 4196 bytes in "), "{top}");
    std::fs::remove_file(d.join("heaplive.app.11.1.folded")).unwrap();
    let o = heaplive(&["top", &ds]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("every dump in this directory is empty"),
        "{}",
        stderr(&o)
    );
}

/// A small well-formedness check: balanced tags, quoted attributes, known
/// entities. Enough to catch unescaped `<` or `&` in function names.
fn check_xml(text: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    let check_text = |t: &str| -> Result<(), String> {
        let mut s = t;
        while let Some(i) = s.find('&') {
            let end = s[i..]
                .find(';')
                .ok_or_else(|| format!("bare & in {:?}", &s[i..(i + 20).min(s.len())]))?;
            let ent = &s[i + 1..i + end];
            let known = ["amp", "lt", "gt", "quot", "apos"].contains(&ent)
                || ent
                    .strip_prefix("#x")
                    .is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
                || ent
                    .strip_prefix('#')
                    .is_some_and(|d| d.parse::<u32>().is_ok());
            if !known {
                return Err(format!("unknown entity &{ent};"));
            }
            s = &s[i + end..];
        }
        Ok(())
    };
    let mut roots = 0;
    while let Some(lt) = rest.find('<') {
        check_text(&rest[..lt])?;
        rest = &rest[lt..];
        if let Some(r) = rest.strip_prefix("<!--") {
            rest = &r[r.find("-->").ok_or("open comment")? + 3..];
        } else if let Some(r) = rest.strip_prefix("<![CDATA[") {
            rest = &r[r.find("]]>").ok_or("open CDATA")? + 3..];
        } else if rest.starts_with("<?") || rest.starts_with("<!") {
            rest = &rest[rest.find('>').ok_or("open declaration")? + 1..];
        } else {
            let gt = rest.find('>').ok_or("open tag")?;
            let tag = &rest[1..gt];
            rest = &rest[gt + 1..];
            if tag.contains('<') {
                return Err(format!("'<' inside tag <{tag}>"));
            }
            if !tag.matches('"').count().is_multiple_of(2) {
                return Err(format!("unbalanced quotes in <{tag}>"));
            }
            check_text(tag)?;
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let name = tag
                    .split(|c: char| c.is_whitespace() || c == '/')
                    .next()
                    .unwrap_or("")
                    .to_string();
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
        }
    }
    check_text(rest)?;
    match (stack.is_empty(), roots) {
        (true, 1) => Ok(()),
        (false, _) => Err(format!("unclosed tags {stack:?}")),
        (_, n) => Err(format!("{n} root elements")),
    }
}

/// A flame graph's SVG: well-formed XML that names every frame of `has`
/// and none of `lacks`.
fn assert_flame_graph(svg: &str, has: &[&str], lacks: &[&str]) {
    check_xml(svg).unwrap_or_else(|e| panic!("flame graph is not well-formed XML: {e}"));
    for name in has {
        assert!(svg.contains(name), "SVG lacks {name}");
    }
    for name in lacks {
        assert!(!svg.contains(name), "SVG has {name}");
    }
}

#[test]
fn flamegraph_svg_is_well_formed_and_names_functions() {
    let (dir, f) = tempdir_with(
        "flame",
        "heaplive.php-fpm8.2.4242.3.folded",
        b"_start;main;php_execute;xmlStrdup 524288\n\
          _start;main;std::vector<int, std::allocator<int> >::push_back(int&&);operator new(unsigned long) 4096\n\
          _start;main;a&b_fn 100\n",
    );
    let svg_path = dir.join("out.svg");
    let svg_path = svg_path.to_str().expect("utf-8");
    ok(heaplive(&["flamegraph", &f, "-o", svg_path]));
    let svg = std::fs::read_to_string(svg_path).expect("svg written");
    assert_flame_graph(
        &svg,
        &[
            "xmlStrdup",
            "php_execute",
            "operator new(unsigned long)",
            "std::vector&lt;int",
            "a&amp;b_fn",
        ],
        &[],
    );
    assert!(
        svg.contains("Live heap of php-fpm8.2 (pid 4242), dump 3"),
        "default title"
    );
    assert!(svg.contains("bytes"), "count name");
    // The strongest check available: a real XML parser, when there is one.
    if let Ok(o) = Command::new("python3")
        .args([
            "-c",
            "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])",
            svg_path,
        ])
        .output()
    {
        assert!(
            o.status.success(),
            "python's XML parser rejects the SVG: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    let out = ok(heaplive(&["flamegraph", "--title", "My <title>", &f]));
    assert!(out.starts_with("<?xml"), "SVG on stdout");
    assert!(out.contains("My &lt;title&gt;"), "custom title, escaped");
    check_xml(&out).unwrap_or_else(|e| panic!("stdout SVG: {e}"));
}

/// `flamegraph --php` (as `top --php`): native frames folded away, stacks
/// that become the same merged, ZendMM's leaf kept, stacks without PHP code
/// under one box.
#[test]
fn flamegraph_php_keeps_only_php_frames() {
    let (_dir, f) = tempdir_with(
        "flame-php",
        "heaplive.php-fpm8.2.4242.3.folded",
        b"_start;execute_ex;{main} (i.php:3);f (a.php:2);str_repeat [internal];_emalloc;[zend_mm] 1000\n\
          _start;execute_ex;{main} (i.php:3);f (a.php:2);str_repeat [internal];zend_string_alloc;_emalloc;[zend_mm] 500\n\
          _start;execute_ex;{main} (i.php:3);run (q.php:5);SQLite3::exec [internal];sqlite3_exec;sqlite3Malloc 700\n\
          _start;main;php_module_startup;zend_hash_init (zend_hash.c:12) 300\n",
    );
    let out = ok(heaplive(&["flamegraph", "--php", &f]));
    // --php keeps no native frame.
    let native = [
        "_start",
        "execute_ex",
        "_emalloc",
        "zend_string_alloc",
        "sqlite3_exec",
        "zend_hash_init",
    ];
    assert_flame_graph(&out, &[], &native);
    // The two str_repeat stacks are one box now: 1,500 of 2,500 bytes.
    for (name, bytes) in [
        ("{main} (i.php:3)", "2,200"),
        ("f (a.php:2)", "1,500"),
        ("str_repeat [internal]", "1,500"),
        ("[zend_mm]", "1,500"),
        ("SQLite3::exec [internal]", "700"),
        ("[no PHP code]", "300"),
    ] {
        assert!(
            out.contains(&format!("<title>{name} ({bytes} bytes")),
            "no box {name} of {bytes} bytes\n{out}"
        );
    }
    // Without --php the native frames are there.
    let full = ok(heaplive(&["flamegraph", &f]));
    assert!(full.contains("<title>execute_ex (2,200 bytes"), "{full}");
}

#[test]
fn malformed_inputs_give_one_clear_line() {
    let dir = tempdir("bad");
    let cases: [(&str, &[u8], &str); 6] = [
        (
            "nocount.folded",
            b"main;a 1\nmain;b 2\nmain;c\n",
            "nocount.folded:3: no count after the last space",
        ),
        (
            "neg.folded",
            b"main;a 1\nmain;b -20\n",
            "neg.folded:2: negative count -20",
        ),
        (
            "frac.folded",
            b"main;a 1.5\n",
            "frac.folded:1: count '1.5' after the last space is not a non-negative integer",
        ),
        (
            "bin.folded",
            b"main;a 1\n\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00",
            "bin.folded:2: not UTF-8 text (binary data?)",
        ),
        (
            "nul.folded",
            b"main;a 1\x00\x00\x00",
            "nul.folded:1: control characters (binary data?)",
        ),
        ("empty.folded", b"", "empty.folded: empty (no stacks)"),
    ];
    let good = dir.file("good.folded", b"main;a 1\n");
    for (name, content, msg) in cases {
        let path = dir.file(name, content);
        let want = format!("heaplive: {}/{msg}", dir.display());
        fails_with(heaplive(&["top", &path]), 1, &want);
        fails_with(heaplive(&["merge", &good, &path]), 1, &want);
        fails_with(heaplive(&["flamegraph", &path]), 1, &want);
        fails_with(heaplive(&["diff", &good, &path]), 1, &want);
    }
    let blank = dir.file("blank.folded", b"\n   \n\n");
    fails_with(
        heaplive(&["top", &blank]),
        1,
        &format!("heaplive: {blank}: empty (no stacks)"),
    );
    let gz = dir.file("p.pb.gz", &[0x1f, 0x8b, 8, 0, 0, 0]);
    let o = heaplive(&["top", &gz]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("gzip"), "{}", stderr(&o));
    let missing = dir.join("missing.folded");
    let missing = missing.to_str().expect("utf-8");
    fails_with(
        heaplive(&["top", missing]),
        1,
        &format!("heaplive: {missing}: No such file or directory"),
    );
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    for args in [
        &["frobnicate"][..],
        &["top"],
        &["top", "--nope", "x"],
        &["top", "-n", "many", "x"],
        &["diff", "only-one"],
        &["dump"],
        &["dump", "abc"],
        &["dump", "1", "--timeout", "soon"],
        &["run"],
        &["run", "--interval", "lots", "--", "true"],
        &["run", "--signal", "KILL", "--", "true"],
        &["run", "--output", "a.%q", "--", "true"],
        &["flamegraph"],
        &[],
    ] {
        let o = heaplive(args);
        assert_status(&o, 2, &format!("heaplive {args:?}: {}", stderr(&o)));
        assert!(
            stderr(&o).starts_with("heaplive: ") || args.is_empty(),
            "heaplive {args:?}: {}",
            stderr(&o)
        );
    }
    for cmd in ["run", "dump", "top", "diff", "merge", "flamegraph"] {
        for flag in ["--help", "-h"] {
            let out = ok(heaplive(&[cmd, flag]));
            assert!(
                out.starts_with(&format!("Usage: heaplive {cmd}")),
                "{cmd} {flag}: {out}"
            );
            assert!(out.contains("Example"), "{cmd} {flag} has examples");
        }
    }
    assert!(ok(heaplive(&["--help"])).contains("Commands:"));
}

//! `heaplive top --app` (issue 29 item 1, natively): a C program whose
//! functions call a shared library's allocating function, in exact mode
//! with `HEAPLIVE_VIEWS=...,app`. The folded file's leaf is the library's
//! `lib_buffer`; `top --app` must give the bytes to the executable's
//! callers (`make_table`, `make_index`), put the stack of the library's own
//! thread (no frame of the executable) in one row, and name the frames of a
//! stripped executable by offset.

use crate::common::*;
use heaplive_format::units::percent;
use std::path::Path;

/// Builds `libapp_lib.so` and the executable `name` linked to it in `dir`
/// (the library found through the run path).
fn build(dir: &Path, name: &str) -> std::path::PathBuf {
    compile_so("app_lib.c", "libapp_lib.so", dir);
    compile(
        "app_main.c",
        name,
        dir,
        &[
            &format!("-L{}", dir.display()),
            "-lapp_lib",
            &format!("-Wl,-rpath,{}", dir.display()),
        ],
    )
}

/// Runs `exe` in exact mode with the app view; returns its one dump.
fn dump_of(dir: &Path, exe: &Path) -> String {
    let o = run_preloaded(
        dir,
        exe,
        &[],
        &[
            ("HEAPLIVE_SAMPLE_INTERVAL", "1"),
            ("HEAPLIVE_VIEWS", "live,peak,app"),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    let files = folded_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].display().to_string()
}

/// `top --app --bytes`'s table for these rows (frame, bytes), in order.
fn table(rows: &[(&str, u64)], stacks: usize) -> String {
    let total: u64 = rows.iter().map(|r| r.1).sum();
    let w = total.to_string().len().max(10);
    let mut out = format!(
        "{:>w$}  {:>6}  APPLICATION FRAME (the innermost frame in the executable)\n",
        "LIVE", "SHARE"
    );
    for (f, b) in rows {
        out += &format!("{b:>w$}  {:>6}  {f}\n", percent(*b as u128, total as u128));
    }
    out += &format!(
        "{total:>w$}  {:>6}  total: {total} bytes in {stacks} stacks\n",
        "100.0%"
    );
    out
}

#[test]
fn top_app_names_the_executables_callers_not_the_librarys_function() {
    let dir = tempdir("top-app");
    let exe = build(dir.path(), "app_main");
    let dump = dump_of(dir.path(), &exe);
    let stacks = parse_folded(Path::new(&dump));
    // The library's function holds the bytes in the folded file.
    assert_eq!(bytes_by_leaf(&stacks).get("lib_buffer"), Some(&37000));
    // pthread_create's own block (glibc's thread descriptor vector, sized
    // by glibc) has `main` as its innermost frame of the executable.
    let thread_setup: u64 = stacks
        .iter()
        .filter(|s| s.has("lib_start_worker"))
        .map(|s| s.bytes)
        .sum();
    assert!(thread_setup > 0, "{stacks:?}");
    assert_eq!(
        stacks
            .iter()
            .find(|s| s.leaf() == "lib_worker")
            .map(|s| s.bytes),
        Some(4096),
        "{stacks:?}"
    );
    let want = table(
        &[
            ("make_table", 30000),
            ("make_index", 7000),
            ("[no frame of the executable]", 4096),
            ("main", thread_setup),
        ],
        stacks.len(),
    );
    assert_eq!(ok(heaplive(&["top", "--app", "--bytes", &dump])), want);
    let app = std::fs::read_to_string(dump.replace(".folded", ".app.txt")).unwrap();
    assert_eq!(
        app,
        format!(
            "# heaplive executable frames 1\n# executable {}\n_start\nmain\nmake_index\nmake_table\n",
            exe.display()
        )
    );

    // Without the app view: one line saying how to get it.
    std::fs::remove_file(dump.replace(".folded", ".app.txt")).unwrap();
    fails_with(
        heaplive(&["top", "--app", &dump]),
        1,
        &format!(
            "heaplive: {dump}: no {} beside it: a dump names the executable's frames when HEAPLIVE_VIEWS includes app (HEAPLIVE_VIEWS=live,peak,samples,app)",
            dump.replace(".folded", ".app.txt")
        ),
    );
}

/// The address of `symbol` in `exe` (`nm`), as a file offset: in a PIE
/// that GNU ld links, the text segment's addresses are its file offsets.
fn nm(exe: &Path, symbol: &str) -> u64 {
    let o = output_ok(std::process::Command::new("nm").arg(exe), "nm");
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.ends_with(&format!(" {symbol}")))
        .unwrap_or_else(|| panic!("{symbol} in\n{out}"));
    u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap()
}

#[test]
fn top_app_names_a_stripped_executables_functions_by_offset() {
    let dir = tempdir("top-app-stripped");
    let exe = build(dir.path(), "app_stripped");
    let at = |f: &str| format!("app_stripped+0x{:x}", nm(&exe, f));
    let (make_table, make_index, main) = (at("make_table"), at("make_index"), at("main"));
    output_ok(std::process::Command::new("strip").arg(&exe), "strip");
    let dump = dump_of(dir.path(), &exe);
    let stacks = parse_folded(Path::new(&dump));
    // Without symbols a frame is its return address, `app_stripped+0x...`:
    // make_table's loop is unrolled into three call sites of lib_buffer,
    // three frames in the folded file. `top --app` counts them as one
    // function, named by its first address (from the unwind tables).
    let sites: std::collections::BTreeSet<&str> = stacks
        .iter()
        .filter(|s| s.leaf() == "lib_buffer")
        .map(|s| s.frames[s.frames.len() - 2].as_str())
        .collect();
    assert_eq!(sites.len(), 4, "{stacks:?}");
    assert!(
        sites.iter().all(|f| f.starts_with("app_stripped+0x")),
        "{sites:?}"
    );
    let thread_setup: u64 = stacks
        .iter()
        .filter(|s| s.has("lib_start_worker"))
        .map(|s| s.bytes)
        .sum();
    assert_eq!(
        ok(heaplive(&["top", "--app", "--bytes", &dump])),
        table(
            &[
                (&make_table, 30000),
                (&make_index, 7000),
                ("[no frame of the executable]", 4096),
                (&main, thread_setup),
            ],
            stacks.len()
        )
    );
}

/// In sampled mode, `top --app` shows each frame's samples and 95%
/// interval, the samples and variances of its stacks added up: the same
/// rows as `heaplive top` of a dump whose stacks were the frames already
/// (the files written here by hand).
#[test]
fn top_app_adds_up_the_samples_and_variances_of_each_frames_stacks() {
    let (dir, dump) = tempdir_with(
        "top-app-sampled",
        "heaplive.srv.7.1.folded",
        b"_start;main;make_table;lib_buffer 409600\n\
          _start;main;make_table;lib_copy 81920\n\
          _start;main;make_index;lib_buffer 122880\n\
          clone3;start_thread;lib_worker 40960\n",
    );
    dir.file(
        "heaplive.srv.7.1.samples.folded",
        b"# heaplive samples 2\n# interval 40960\n\
          live 10 1677721600 _start;main;make_table;lib_buffer\n\
          live 2 335544320 _start;main;make_table;lib_copy\n\
          live 3 503316480 _start;main;make_index;lib_buffer\n\
          live 1 167772160 clone3;start_thread;lib_worker\n",
    );
    dir.file(
        "heaplive.srv.7.1.app.txt",
        b"# heaplive executable frames 1\n# executable /srv/srv\n_start\nmain\nmake_index\nmake_table\n",
    );
    // The same, folded to the frames by hand.
    let folded = dir.file(
        "heaplive.frames.8.1.folded",
        b"make_table 491520\nmake_index 122880\n[no frame of the executable] 40960\n",
    );
    dir.file(
        "heaplive.frames.8.1.samples.folded",
        b"# heaplive samples 2\n# interval 40960\n\
          live 12 2013265920 make_table\n\
          live 3 503316480 make_index\n\
          live 1 167772160 [no frame of the executable]\n",
    );
    let app = ok(heaplive(&["top", "--app", "--bytes", &dump]));
    let plain = ok(heaplive(&["top", "--bytes", &folded]));
    let (app_lines, plain_lines): (Vec<&str>, Vec<&str>) =
        (app.lines().collect(), plain.lines().collect());
    assert_eq!(app_lines.len(), plain_lines.len(), "{app}\n{plain}");
    assert_eq!(
        app_lines[0].replace(
            "APPLICATION FRAME (the innermost frame in the executable)",
            "STACK (leaf first)"
        ),
        plain_lines[0],
        "{app}"
    );
    assert!(app_lines[0].contains("SAMPLES"), "{app}");
    // The rows and the last line alike; the total line counts 4 stacks
    // where the hand-folded file has 3.
    assert_eq!(app_lines[1..4], plain_lines[1..4], "{app}\n{plain}");
    assert_eq!(
        app_lines[4].replace("in 4 stacks", "in 3 stacks"),
        plain_lines[4],
        "{app}\n{plain}"
    );
    assert_eq!(app_lines[5..], plain_lines[5..], "{app}\n{plain}");
}

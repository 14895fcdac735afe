//! More of `symbolize`'s unit tests: parsers, symbol tables, demangling,
//! debug-link candidates, corrupt files, polling between steps.

use super::*;

#[test]
fn perf_map_parser() {
    let t = parse_perf_map(
        "7f0000001000 20 php::foo\n\
             0x7f0000002000 0x10 Function bar with spaces \n\
             garbage line\n\
             zz 10 bad\n\
             7f0000003000 0 empty\n\
             7f0000001000 8 foo_recompiled\n",
    );
    assert_eq!(t.find(0x7f00_0000_1000), Some("foo_recompiled"));
    assert_eq!(t.find(0x7f00_0000_1010), Some("php::foo"));
    assert_eq!(t.find(0x7f00_0000_1020), None);
    assert_eq!(t.find(0x7f00_0000_200f), Some("Function bar with spaces"));
    assert_eq!(t.find(0x7f00_0000_2010), None);
    assert_eq!(t.find(0x7f00_0000_3000), None);
    assert_eq!(t.find(0), None);
    assert_eq!(parse_perf_map("").find(1), None);
}

#[test]
fn jit_code_from_perf_map_or_anonymous_mapping() {
    // SAFETY: a fresh anonymous mapping, unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let base = p as u64;
    let mut s = default_sym();
    let perf = PathBuf::from(format!("/tmp/perf-{}.map", std::process::id()));
    let _ = std::fs::remove_file(&perf);
    assert_eq!(
        s.lookup(base + 0x10),
        (
            None,
            Arc::from([Frame {
                function: "[jit]".into(),
                file: None,
                line: None
            }])
        )
    );
    assert_eq!(s.lookup(8).1[0].function, "[unknown]");
    std::fs::write(&perf, format!("{base:x} 100 _ZN2js3jitEv\n")).unwrap();
    assert_eq!(s.lookup(base + 0x10).1[0].function, "js::jit [jit]");
    assert_eq!(s.lookup(base + 0x100).1[0].function, "[jit]");
    // Rewritten (size changes): re-read.
    std::fs::write(&perf, format!("0x{base:x} 0x200 lua_trace_7\n")).unwrap();
    assert_eq!(s.lookup(base + 0x100).1[0].function, "lua_trace_7 [jit]");
    std::fs::remove_file(&perf).unwrap();
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(p, 8192) };
}

#[test]
fn anonymous_exec_mappings_from_proc_maps() {
    let maps = "7f00-7f10 r-xp 00000000 00:00 0 \n\
                    7f20-7f30 r-xp 00001000 08:01 1234 /usr/lib/libfoo.so\n\
                    7f40-7f50 rw-p 00000000 00:00 0\n\
                    7f60-7f70 r-xp 00000000 00:00 0 [vdso]\n\
                    7f80-7f90 rwxp 00000000 00:00 0 [anon:jit]\n";
    assert_eq!(parse_anon_exec(maps), [(0x7f00, 0x7f10), (0x7f80, 0x7f90)]);
}

#[test]
fn symbol_table_honours_sizes_and_prefers_global_aliases() {
    let t = RangeTable::new(vec![
        (
            0x100,
            0x140,
            "__libc_malloc".to_string(),
            (2u8, usize::MAX - 2),
        ),
        (0x100, 0x140, "malloc".to_string(), (2, usize::MAX)),
        (0x100, 0x140, "local_alias".to_string(), (0, usize::MAX)),
        (0x200, 0x300, "big".to_string(), (2, usize::MAX)),
        (0x220, 0x230, "nested".to_string(), (2, usize::MAX)),
    ]);
    assert_eq!(t.find(0x100), Some("malloc"));
    assert_eq!(t.find(0x13f), Some("malloc"));
    assert_eq!(t.find(0x140), None);
    assert_eq!(t.find(0x1ff), None);
    assert_eq!(t.find(0x225), Some("nested"));
    assert_eq!(t.find(0x230), Some("big"));
    assert_eq!(t.find(0x2ff), Some("big"));
    assert_eq!(t.find(u64::MAX), None);
}

#[test]
fn demangling() {
    let d = |s| demangle_name(s, true);
    assert_eq!(
        d("_ZNSt6vectorIiSaIiEE9push_backERKi"),
        "std::vector<int, std::allocator<int> >::push_back"
    );
    assert_eq!(
        d("_ZN2hl4tsumIiEET_RKSt6vectorIS1_SaIS1_EE"),
        "hl::tsum<int>"
    );
    assert_eq!(d("_ZN2ns3fooEv"), "ns::foo");
    assert_eq!(
        d("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
        "core::ptr::drop_in_place"
    );
    assert_eq!(d("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    assert_eq!(d("malloc"), "malloc");
    assert_eq!(d("_Zgarbage"), "_Zgarbage");
    assert_eq!(demangle_name("_ZN2ns3fooEv", false), "_ZN2ns3fooEv");
}

#[test]
fn debuglink_candidate_order_and_crc() {
    let c = debuglink_candidates(
        Path::new("/usr/lib/x/libfoo.so"),
        "libfoo.debug",
        &[PathBuf::from("/dbg")],
    );
    let c: Vec<&str> = c.iter().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(
        c,
        [
            "/usr/lib/x/libfoo.debug",
            "/usr/lib/x/.debug/libfoo.debug",
            "/dbg/usr/lib/x/libfoo.debug"
        ]
    );
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(
        build_id_path(Path::new("/d"), &[0xab, 0xcd, 0x01]),
        Some(PathBuf::from("/d/.build-id/ab/cd01.debug"))
    );
    assert_eq!(build_id_path(Path::new("/d"), &[0xab]), None);
}

#[test]
fn debugaltlink_found_by_build_id_then_path() {
    let f = fixtures();
    let dir = f.dir.join("alt");
    std::fs::create_dir_all(&dir).unwrap();
    // A debug file naming a supplementary file that exists only under
    // its build id, and one naming it by a relative path.
    let mut link = b"/nonexistent/sup.debug\0".to_vec();
    link.extend_from_slice(&f.cxx_build_id);
    std::fs::write(dir.join("link1"), &link).unwrap();
    let mut link2 = b"sup-by-path.debug\0".to_vec();
    link2.extend_from_slice(&[1, 2, 3, 4]);
    std::fs::write(dir.join("link2"), &link2).unwrap();
    let sh = |s: &str| run(Command::new("sh").arg("-c").arg(s).current_dir(&dir));
    sh("objcopy --add-section .gnu_debugaltlink=link1 ../full.debug a1.debug");
    sh("objcopy --add-section .gnu_debugaltlink=link2 ../full.debug a2.debug");
    sh("cp ../cxx.so sup-by-path.debug");
    let bid = build_id_path(&dir.join("dbg"), &f.cxx_build_id).unwrap();
    std::fs::create_dir_all(bid.parent().unwrap()).unwrap();
    std::fs::copy(f.dir.join("cxx.so"), &bid).unwrap();
    let cfg = SymConfig {
        debug_dirs: vec![dir.join("dbg")],
        demangle: true,
    };
    let mut n = 0;
    let a1 = Mapped::open(&dir.join("a1.debug"), &mut n).unwrap();
    assert_eq!(find_sup_file(&a1, &cfg, &mut n), Some(bid.clone()));
    let a2 = Mapped::open(&dir.join("a2.debug"), &mut n).unwrap();
    assert_eq!(
        find_sup_file(&a2, &cfg, &mut n),
        Some(dir.join("sup-by-path.debug"))
    );
    // The loader accepts the pair.
    assert!(addr2line::Loader::new_with_sup(dir.join("a1.debug"), Some(&bid)).is_ok());
}

#[test]
fn corrupt_files_give_no_names_and_no_panic() {
    let f = fixtures();
    let junk = f.dir.join("junk.so");
    std::fs::write(&junk, b"\x7fELF\x02\x01\x01garbage-garbage-garbage").unwrap();
    let module = Module {
        path: junk.to_str().unwrap().into(),
        bias: 0x1000,
        ranges: vec![(0x2000, 0x3000, 0x1000)],
        build_id: vec![1, 2, 3],
        loaded: false,
    };
    let cfg = SymConfig::default();
    let mut n = 0;
    let st = load_module(&module, 0, None, &cfg, &mut n, &mut || {});
    assert!(st.dwarf.is_none() && st.symbols.find(0x1800).is_none());
    let missing = Module {
        path: "/nonexistent/lib.so".into(),
        ..module
    };
    let st = load_module(&missing, 0, None, &cfg, &mut n, &mut || {});
    assert!(st.dwarf.is_none());
    assert_eq!(st.basename, "lib.so");
}

/// Loading a module with DWARF (this test binary) calls `poll` between
/// its steps (files, each DWARF section, the context, the symbol
/// table), so heaplive's thread can take a dump signal meanwhile.
#[test]
fn loading_a_module_polls_between_steps() {
    let exe = std::env::current_exe().unwrap();
    let module = Module {
        path: exe.to_str().unwrap().into(),
        bias: 0,
        ranges: vec![],
        build_id: vec![],
        loaded: false,
    };
    let mut polls = 0;
    let mut n = 0;
    let st = load_module(&module, 0, None, &SymConfig::default(), &mut n, &mut || {
        polls += 1
    });
    assert!(st.dwarf.is_some(), "the test binary has DWARF");
    // Two around the files, one per DWARF section asked for (more
    // than ten), two around the context, two around the symbols.
    assert!(polls > 15, "{polls} polls");
}

#[test]
fn rust_names_in_the_executable() {
    #[inline(never)]
    fn a_rust_function() -> u64 {
        a_rust_function as *const () as u64
    }
    let frames = default_sym().lookup(a_rust_function() + 1).1;
    let last = frames.last().unwrap();
    let expected = format!(
        "{}::rust_names_in_the_executable::a_rust_function",
        module_path!()
    );
    assert_eq!(last.function, expected, "{frames:#?}");
    // Lines only where the test binary has debug info (dev builds here).
    if cfg!(debug_assertions) {
        assert!(
            last.file
                .as_deref()
                .is_some_and(|f| f.ends_with("symbolize.rs")),
            "{frames:#?}"
        );
    }
}

#[test]
fn symbolizer_is_send() {
    fn send<T: Send>() {}
    send::<Symbolizer>();
}

/// Speed target: 10,000 distinct libc addresses < 1 s the first time,
/// < 100 ms the next. Run with `cargo test --release -- --ignored bench`.
#[test]
#[ignore]
fn bench_libc_10k_addresses() {
    modules::refresh();
    let m = modules::find(libc::malloc as *const () as u64).unwrap();
    let (start, end, _) = m.ranges[0];
    let addrs: Vec<u64> = (0..10_000u64)
        .map(|i| start + (end - start) * i / 10_000)
        .collect();
    let mut s = default_sym();
    let t = Instant::now();
    let named = addrs
        .iter()
        .filter(|&&a| s.lookup(a).1[0].file.is_some())
        .count();
    let first = t.elapsed();
    let t = Instant::now();
    for &a in &addrs {
        s.lookup(a);
    }
    let second = t.elapsed();
    eprintln!("10k libc addresses: first {first:?} ({named} with lines), second {second:?}");
    assert!(named > 5_000, "{named}");
    // Unoptimized builds are about 7x slower: only time release builds.
    if !cfg!(debug_assertions) {
        assert!(first.as_millis() < 1000 && second.as_millis() < 100);
    }
}

/// `f` on another thread; a hang (a FIFO opened for reading waits for a
/// writer forever) fails the test after a minute instead of hanging it.
fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: the symbolizer hung"))
}

fn mkfifo(p: &Path) {
    let _ = std::fs::remove_file(p);
    let c = CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {p:?}"
    );
}

/// A FIFO planted where the symbolizer looks for a debug file (the debug
/// link next to the binary, the build-id tree) or at a module's path (the
/// library replaced after its dlclose) is skipped, never opened for
/// reading: that waits for a writer, and the dump with it, forever.
#[test]
fn a_fifo_where_a_file_is_looked_for_never_blocks() {
    let f = fixtures();
    let d = f.dir.join("fifo");
    std::fs::create_dir_all(&d).unwrap();
    run(Command::new("sh").arg("-c").current_dir(&d).arg(
        "cp ../full.debug fifolink.so.debug && objcopy --add-gnu-debuglink=fifolink.so.debug ../nodebug.so fifolink.so && cp ../full.so fifomod.so",
    ));
    mkfifo(&d.join("fifolink.so.debug"));
    let bid = build_id_path(&d.join("dbg"), &f.c_build_id).unwrap();
    std::fs::create_dir_all(bid.parent().unwrap()).unwrap();
    mkfifo(&bid);

    // The debug link and the build-id file are FIFOs: the binary's own
    // symbol table names the function.
    let lib = open("fifo/fifolink.so");
    let addr = lib.call_ptr("hl_hidden_addr") + 1;
    let dirs = vec![d.join("dbg")];
    let frames = within_a_minute("debug link and build id", move || {
        sym_with(dirs).lookup(addr).1
    });
    assert_eq!(frames.last().unwrap().function, "hl_hidden", "{frames:#?}");

    // The module's own path becomes a FIFO after its dlclose.
    let lib = open("fifo/fifomod.so");
    let ret = lib.ret_of("hl_outer");
    // Held to the end: no other test loads a library where this one was.
    let _g = DL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: nothing of this library is in use any more.
    assert_eq!(unsafe { libc::dlclose(lib.handle as *mut c_void) }, 0);
    modules::refresh();
    mkfifo(&lib.path);
    let (mapping, frames) = within_a_minute("module path", move || {
        let a = default_sym().lookup(ret - 1);
        (
            a.0,
            a.1.iter().map(|f| f.function.clone()).collect::<Vec<_>>(),
        )
    });
    assert!(mapping.is_some());
    assert!(!frames.iter().any(|f| f == "hl_outer"), "{frames:?}");
}

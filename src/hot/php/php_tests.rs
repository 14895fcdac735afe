//! Unit tests of PHP mode's hot part (`hot/php/`).

use super::*;

/// The emalloc fast path's table: every small size goes to the
/// function of its own bin (the block memory_get_usage() counts), and
/// a PHP missing one bin's function gets no table at all.
#[test]
fn bin_allocators_pick_the_requests_bin_all_or_none() {
    assert!(!set_bin_allocators(|b| if b == 3072 {
        0
    } else {
        0x1000 + b
    }));
    assert!((0..=MAX_SMALL).all(|s| bin_allocator_set(s).1 == 0));
    assert!(set_bin_allocators(|b| 0x1000 + b));
    for size in 0..=MAX_SMALL {
        let (block, f) = bin_allocator_set(size);
        assert_eq!(block, zend_block_size(size), "size {size}");
        assert_eq!(f, 0x1000 + block, "size {size}");
    }
    set_bin_allocators(|_| 0);
}

#[test]
fn block_sizes_follow_zend_mm() {
    for (size, block) in [
        (0, 8),
        (1, 8),
        (8, 8),
        (9, 16),
        (57, 64),
        (65, 80),
        (257, 320),
        (3000, 3072),
        (3072, 3072),
        (3073, 4096),
        (4025, 4096),
        (4097, 8192),
        (3 << 20, 3 << 20),
    ] {
        assert_eq!(zend_block_size(size), block, "size {size}");
    }
    for s in 1..=3072usize {
        let b = zend_block_size(s);
        assert!(b >= s && BINS.contains(&(b as u16)), "{s} -> {b}");
        assert!(BINS.iter().all(|&x| (x as usize) < s || x as usize >= b));
    }
}

#[test]
fn endpoints_drop_the_query_and_ids() {
    let e = |p: &[u8]| {
        let mut t = StackBuf::<{ names::MAX_NAME }>::new();
        push_endpoint(p, &mut t);
        String::from_utf8(t.as_bytes().to_vec()).unwrap()
    };
    assert_eq!(e(b"/api/report?id=7&x=1"), "/api/report");
    assert_eq!(e(b"/user/12345/orders"), "/user/{n}/orders");
    assert_eq!(
        e(b"/doc/3f2a9c1e-77b0-4c1e-9a55-0d3e2f1a6b7c#top"),
        "/doc/{id}"
    );
    // Words stay, even hexadecimal-looking ones without digits.
    assert_eq!(e(b"/v2/deadbeefdeadbeefcafe"), "/v2/deadbeefdeadbeefcafe");
    assert_eq!(e(b"/"), "/");
    assert_eq!(e(b"/index.php"), "/index.php");
}

#[test]
fn versions_parse() {
    assert_eq!(parse_version(b"8.2.36"), Some((8, 2, 36)));
    assert_eq!(parse_version(b"8.3.0RC1"), Some((8, 3, 0)));
    assert_eq!(parse_version(b"7.4.33-dev"), Some((7, 4, 33)));
    assert_eq!(parse_version(b"8.2"), None);
    assert_eq!(parse_version(b"x.2.1"), None);
    assert_eq!(offsets_for(8, 2).map(|o| o.op_filename), Some(152));
    assert!(offsets_for(8, 5).is_none());
    assert!(offsets_for(7, 3).is_none());
}

#[test]
fn the_probe_child_reads_and_comes_back() {
    assert!(probe_in_child());
}

#[test]
fn reads_of_bad_memory_fail_instead_of_faulting() {
    assert!(can_read_self());
    let pid = crate::hot::sys::getpid() as i32;
    let mut b = [0u8; 64];
    assert_eq!(read(pid, 0, &mut b), 0);
    assert_eq!(read(pid, 0x10, &mut b), 0);
    assert_eq!(read(pid, usize::MAX - 8, &mut b), 0);
    // The end of a mapping: a partial read.
    let page = crate::hot::sys::map(8192);
    assert!(!page.is_null());
    unsafe { crate::hot::sys::unmap(page.add(4096), 4096) };
    assert_eq!(read(pid, page as usize + 4096 - 16, &mut b), 16);
    unsafe { crate::hot::sys::unmap(page, 4096) };
    assert_eq!(read(pid, page as usize, &mut b), 0);
}

/// Several ranges in one call give, each, what `read` gives it alone:
/// a range cut by unmapped memory, a bad one first, between or last.
#[test]
fn reads_of_several_ranges_count_each_as_one_read_would() {
    let pid = crate::hot::sys::getpid() as i32;
    let page = crate::hot::sys::map(8192);
    assert!(!page.is_null());
    unsafe { crate::hot::sys::unmap(page.add(4096), 4096) };
    let base = page as usize;
    unsafe { core::ptr::write_bytes(page, 7, 4096) };
    let good = [9u8; 40];
    let (mut a, mut b, mut c) = ([0u8; 64], [0u8; 32], [0u8; 16]);
    // Cut: the first range ends 16 bytes into the hole.
    let got = read_n(
        pid,
        [
            (base + 4096 - 48, &mut a[..]),
            (good.as_ptr() as usize, &mut b[..]),
            (base, &mut c[..]),
        ],
    );
    assert_eq!(got, [48, 32, 16]);
    assert_eq!((a[0], a[47], b[31], c[15]), (7, 7, 9, 7));
    // Unmapped, null and wrapping ranges read nothing; the others all.
    let (mut a, mut b, mut c) = ([0u8; 8], [0u8; 32], [0u8; 16]);
    let got = read_n(
        pid,
        [
            (base + 4096, &mut a[..]),
            (0, &mut b[..]),
            (good.as_ptr() as usize, &mut c[..]),
        ],
    );
    assert_eq!(got, [0, 0, 16]);
    let got = read_n(
        pid,
        [
            (usize::MAX - 4, &mut a[..]),
            (good.as_ptr() as usize, &mut b[..]),
        ],
    );
    assert_eq!(got, [0, 32]);
    unsafe { crate::hot::sys::unmap(page, 4096) };
}

/// A fake zend_string: header, then the bytes.
fn zstr(text: &str) -> Vec<u8> {
    let mut v = vec![0u8; ZSTR_VAL];
    v[ZSTR_LEN..ZSTR_LEN + 8].copy_from_slice(&text.len().to_ne_bytes());
    v.extend_from_slice(text.as_bytes());
    v.push(0);
    v
}

#[test]
fn frame_names_from_fake_engine_memory() {
    let o = offsets_for(8, 2).unwrap();
    let pid = crate::hot::sys::getpid() as i32;
    let fname = zstr("build_cache");
    let file = zstr("/srv/app/lib/cache.php");
    let cname = zstr("Repo");
    let mut ce = [0u8; 64];
    ce[CE_NAME..CE_NAME + 8].copy_from_slice(&(cname.as_ptr() as usize).to_ne_bytes());
    let mut ops = [0u8; 4 * OP_SIZE];
    for (i, line) in [10u32, 11, 12, 13].iter().enumerate() {
        ops[i * OP_SIZE + OP_LINENO..i * OP_SIZE + OP_LINENO + 4]
            .copy_from_slice(&line.to_ne_bytes());
    }
    let mut f = [0u8; 248];
    f[FN_TYPE] = ZEND_USER_FUNCTION;
    f[FN_NAME..FN_NAME + 8].copy_from_slice(&(fname.as_ptr() as usize).to_ne_bytes());
    f[o.op_last..o.op_last + 4].copy_from_slice(&4u32.to_ne_bytes());
    f[o.op_opcodes..o.op_opcodes + 8].copy_from_slice(&(ops.as_ptr() as usize).to_ne_bytes());
    f[o.op_filename..o.op_filename + 8].copy_from_slice(&(file.as_ptr() as usize).to_ne_bytes());
    f[o.op_line_start..o.op_line_start + 4].copy_from_slice(&9u32.to_ne_bytes());
    let opline = ops.as_ptr() as usize + 2 * OP_SIZE;
    let got = frame_name(pid, o, f.as_ptr() as usize, opline, 0).unwrap();
    assert_eq!(names::text(got), Some(&b"build_cache (cache.php:12)"[..]));
    // An opline outside the function: the first line.
    let got = frame_name(pid, o, f.as_ptr() as usize, 0x1234, 0).unwrap();
    assert_eq!(names::text(got), Some(&b"build_cache (cache.php:9)"[..]));
    // A method.
    f[FN_SCOPE..FN_SCOPE + 8].copy_from_slice(&(ce.as_ptr() as usize).to_ne_bytes());
    let got = frame_name(pid, o, f.as_ptr() as usize, opline, 0).unwrap();
    assert_eq!(
        names::text(got),
        Some(&b"Repo::build_cache (cache.php:12)"[..])
    );
    // The script's own code.
    f[FN_SCOPE..FN_SCOPE + 8].copy_from_slice(&0usize.to_ne_bytes());
    f[FN_NAME..FN_NAME + 8].copy_from_slice(&0usize.to_ne_bytes());
    let got = frame_name(pid, o, f.as_ptr() as usize, opline, ZEND_CALL_TOP).unwrap();
    assert_eq!(names::text(got), Some(&b"{main} (cache.php:12)"[..]));
    // An internal function.
    let mut g = [0u8; 136];
    g[FN_TYPE] = ZEND_INTERNAL_FUNCTION;
    let sr = zstr("str_repeat");
    g[FN_NAME..FN_NAME + 8].copy_from_slice(&(sr.as_ptr() as usize).to_ne_bytes());
    let got = frame_name(pid, o, g.as_ptr() as usize, 0, 0).unwrap();
    assert_eq!(names::text(got), Some(&b"str_repeat [internal]"[..]));
    // A fiber's bottom frame: no name, nothing to show.
    g[FN_NAME..FN_NAME + 8].copy_from_slice(&0usize.to_ne_bytes());
    assert_eq!(frame_name(pid, o, g.as_ptr() as usize, 0, 0), Some(0));
    // Garbage: a bad type, a dangling name.
    g[FN_TYPE] = 7;
    assert!(frame_name(pid, o, g.as_ptr() as usize, 0, 0).is_none());
    g[FN_TYPE] = ZEND_INTERNAL_FUNCTION;
    g[FN_NAME..FN_NAME + 8].copy_from_slice(&0x18usize.to_ne_bytes());
    assert!(frame_name(pid, o, g.as_ptr() as usize, 0, 0).is_none());
    assert!(frame_name(pid, o, 0x20, 0, 0).is_none());
    // Strings at the end of a mapping (the name's read is cut, so the
    // file name read with it is read again alone), and a stale opline
    // in unmapped memory: the same names.
    let page = crate::hot::sys::map(8192);
    assert!(!page.is_null());
    unsafe { crate::hot::sys::unmap(page.add(4096), 4096) };
    let at_end = |off: usize, v: &[u8]| {
        let p = unsafe { page.add(4096 - off) };
        unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
        p as usize
    };
    let n_at = at_end(fname.len(), &fname);
    let c_at = at_end(fname.len() + cname.len(), &cname);
    let mut ce2 = [0u8; 64];
    ce2[CE_NAME..CE_NAME + 8].copy_from_slice(&c_at.to_ne_bytes());
    f[FN_NAME..FN_NAME + 8].copy_from_slice(&n_at.to_ne_bytes());
    f[FN_SCOPE..FN_SCOPE + 8].copy_from_slice(&(ce2.as_ptr() as usize).to_ne_bytes());
    let got = frame_name(pid, o, f.as_ptr() as usize, opline, 0).unwrap();
    assert_eq!(
        names::text(got),
        Some(&b"Repo::build_cache (cache.php:12)"[..])
    );
    let stale = page as usize + 4096;
    let got = frame_name(pid, o, f.as_ptr() as usize, stale, 0).unwrap();
    assert_eq!(
        names::text(got),
        Some(&b"Repo::build_cache (cache.php:9)"[..])
    );
    unsafe { crate::hot::sys::unmap(page, 4096) };
}

#[test]
fn the_name_cache_keys_by_function_opline_words_and_generation() {
    assert!(CACHE.busy.try_lock_kept());
    let mut f = Fast {
        chunks: [0; MAX_CHUNKS],
        n: 1,
        generation: 7,
        slots: CACHE.slots.get(),
        seen: CACHE.seen.get(),
    };
    f.chunks[0] = 0x7f00_0000_0000;
    // In a chunk: past the header, not across its end, aligned.
    assert!(f.in_chunk(0x7f00_0000_0040, EX_SIZE));
    assert!(!f.in_chunk(0x7f00_0000_0008, EX_SIZE));
    assert!(!f.in_chunk(0x7f00_0000_0000 + CHUNK - 8, EX_SIZE));
    assert!(!f.in_chunk(0x7f00_0000_0044, EX_SIZE));
    assert!(!f.in_chunk(0x7f00_0020_0040, EX_SIZE));
    f.put(0x1000, 0x2000, 5, 42);
    assert_eq!(f.get(0x1000, 0x2000, 5), Some(42));
    // Other words of the function (an op_array reused), another line.
    assert_eq!(f.get(0x1000, 0x2000, 6), None);
    assert_eq!(f.get(0x1000, 0x2020, 5), None);
    // Two keys of one pair of slots both stay.
    let i = Fast::index(0x1000, 0x2000);
    let other = (1..1_000_000usize)
        .map(|k| 0x1000 + k * 8)
        .find(|&g| Fast::index(g, 0x2000) & !1 == i & !1)
        .unwrap();
    f.put(other, 0x2000, 5, 43);
    assert_eq!(f.get(0x1000, 0x2000, 5), Some(42));
    assert_eq!(f.get(other, 0x2000, 5), Some(43));
    // The next request: nothing cached.
    f.generation = 8;
    assert_eq!(f.get(0x1000, 0x2000, 5), None);
    drop(f);
    assert!(!CACHE.busy.is_locked());
    // Oplines: only one of the function's own.
    assert_eq!(own_opline(0x5040, 0x5000, 4), 0x5040);
    assert_eq!(own_opline(0x5080, 0x5000, 4), 0);
    assert_eq!(own_opline(0x5044, 0x5000, 4), 0);
    assert_eq!(own_opline(0x4fe0, 0x5000, 4), 0);
}

/// The shadow bitmap's tests' lock (these tests use its bits), held, and
/// the request's list of ZendMM samples emptied.
fn serial_and_no_zend_samples() -> std::sync::MutexGuard<'static, ()> {
    let s = crate::hot::shadow::tests::SERIAL
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    drain_zend_samples(|_| {});
    s
}

/// The efree filter counts live samples per slot: a slot shared by
/// two samples (128 KiB apart) stays set until both are gone, a slot
/// whose samples are all gone lets efrees through, and a full counter
/// stays set until request end.
#[test]
fn efree_filter_counts_live_samples() {
    let _s = serial_and_no_zend_samples();
    let (a, b) = (0x7300_0010usize, 0x7300_0010usize + 8 * FILTER_SLOTS);
    assert!(!maybe_zend_sample(a));
    assert!(note_zend_sample(a) && note_zend_sample(b));
    assert!(maybe_zend_sample(a) && maybe_zend_sample(b));
    // The neighbour's slot is its own.
    assert!(!maybe_zend_sample(a + 8));
    forget_zend_sample(a);
    assert!(maybe_zend_sample(b), "b is still live");
    forget_zend_sample(b);
    assert!(!maybe_zend_sample(a) && !maybe_zend_sample(b));
    // Never below zero: a second forget leaves the slot clear, and a
    // new sample there sets it again.
    forget_zend_sample(b);
    assert!(note_zend_sample(a));
    assert!(maybe_zend_sample(b));
    forget_zend_sample(a);
    assert!(!maybe_zend_sample(a));
    // Saturated: stays set until the request's end.
    for _ in 0..300 {
        assert!(note_zend_sample(a));
    }
    for _ in 0..300 {
        forget_zend_sample(a);
    }
    assert!(maybe_zend_sample(a));
    drain_zend_samples(|_| {});
    assert!(!maybe_zend_sample(a));
}

#[test]
fn request_list_drains_and_compacts() {
    let _s = serial_and_no_zend_samples();
    // Live samples (bit set) survive compaction; efree'd ones may go.
    let base = 0x7100_0000usize;
    for a in 0..10_000usize {
        let addr = base + a * 16;
        if a % 2 == 0 {
            assert!(crate::hot::shadow::set(addr));
        }
        assert!(note_zend_sample(addr));
    }
    for a in (0..10_000usize).step_by(2) {
        assert!(maybe_zend_sample(base + a * 16));
    }
    let mut seen = Vec::new();
    let n = drain_zend_samples(|a| seen.push(a));
    assert_eq!(n, seen.len());
    assert!(n < 10_000, "compacted: {n}");
    for a in (0..10_000usize).step_by(2) {
        assert!(seen.contains(&(base + a * 16)), "{a}");
        crate::hot::shadow::clear(base + a * 16);
    }
    assert_eq!(drain_zend_samples(|_| {}), 0);
    assert!(!maybe_zend_sample(base));
}

/// The frames seen (`Seen`): a frame of a function whose name is stable
/// for the request (not ZendMM memory) keeps its name at its address
/// until the next request; one of a function in a chunk of the request's
/// heap (memory that may be freed and reused within the request) is
/// named from its words again, so a new function at the same address and
/// the same frame address gets its own name.
#[test]
fn frames_seen_keep_stable_names_only() {
    let o = offsets_for(8, 2).unwrap();
    // A fake chunk: 2 MiB-aligned, mapped.
    let map = crate::hot::sys::map(2 * CHUNK);
    assert!(!map.is_null());
    let chunk = (map as usize + CHUNK - 1) & !(CHUNK - 1);
    assert!(CACHE.busy.try_lock_kept());
    let mut f = Fast {
        chunks: [0; MAX_CHUNKS],
        n: 1,
        generation: 1 << 40,
        slots: CACHE.slots.get(),
        seen: CACHE.seen.get(),
    };
    f.chunks[0] = chunk;
    let mut pid = Pid(0);
    let (a, b) = (zstr("array_map"), zstr("usort"));
    let internal = |at: *mut u8, name: &[u8]| unsafe {
        at.add(FN_TYPE).write(ZEND_INTERNAL_FUNCTION);
        (at.add(FN_NAME) as *mut usize).write_unaligned(name.as_ptr() as usize);
    };
    let name = |v: Option<usize>| names::text(v.unwrap()).map(|t| t.to_vec());
    // In the chunk: renamed in place, named again at the same frame.
    let func = chunk + 4096;
    internal(func as *mut u8, &a);
    let ex = chunk + 65536;
    assert_eq!(
        name(f.frame_name(o, &mut pid, ex, func, 0, 0)),
        Some(b"array_map [internal]".to_vec())
    );
    internal(func as *mut u8, &b);
    assert_eq!(
        name(f.frame_name(o, &mut pid, ex, func, 0, 0)),
        Some(b"usort [internal]".to_vec())
    );
    // Outside the chunk (read with process_vm_readv): stable for the
    // request, the next request reads it again.
    let mut g = [0u8; FN_READ];
    internal(g.as_mut_ptr(), &a);
    let gf = g.as_ptr() as usize;
    assert_eq!(
        name(f.frame_name(o, &mut pid, ex, gf, 0, 0)),
        Some(b"array_map [internal]".to_vec())
    );
    internal(g.as_mut_ptr(), &b);
    assert_eq!(
        name(f.frame_name(o, &mut pid, ex, gf, 0, 0)),
        Some(b"array_map [internal]".to_vec())
    );
    f.generation += 1;
    assert_eq!(
        name(f.frame_name(o, &mut pid, ex, gf, 0, 0)),
        Some(b"usort [internal]".to_vec())
    );
    drop(f);
    unsafe { crate::hot::sys::unmap(map, 2 * CHUNK) };
}

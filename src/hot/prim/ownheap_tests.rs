use super::*;

fn lay(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// The reserve gives its tail away as asked and is put back when
/// dropped; a nested one is the outer one. (Not down to RESERVE_LOW:
/// that turns `low()` on, which the symbolizer's tests, running
/// meanwhile, read; the preload test `limits` sweeps it.)
#[test]
fn the_reserve_gives_back_its_tail_and_is_put_back() {
    let r = Reserve::take().expect("an unlimited test maps the reserve");
    let whole = RESERVE_LEN.load(Relaxed);
    assert_eq!(whole, RESERVE);
    {
        let _nested = Reserve::take().unwrap();
    }
    assert_eq!(RESERVE_LEN.load(Relaxed), whole, "the nested one kept it");
    assert!(release_reserve(1 << 20));
    assert!(release_reserve(1));
    assert_eq!(RESERVE_LEN.load(Relaxed), whole - (1 << 20) - PAGE);
    assert!(!reserve_low());
    drop(r);
    assert_eq!(RESERVE_LEN.load(Relaxed), 0, "put back when dropped");
    assert!(!release_reserve(1), "nothing to give once put back");
}

/// The heaps are global and the tests check its counters before and
/// after: one test at a time (a test that frees megabytes while
/// another reads its counters fails the other one).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Free pages of the small-block heap go back to the kernel; the
/// blocks still in use keep their contents, and the heap works on.
#[test]
fn free_pages_are_given_back_and_live_blocks_kept() {
    let _one = one_at_a_time();
    // 8 MiB of 2 KiB blocks, each filled with its number; all but
    // every 64th freed: most of those pages are free now.
    let n = 4096;
    let blocks: Vec<*mut u8> = (0..n).map(|_| alloc(lay(2048, 8))).collect();
    for (i, &b) in blocks.iter().enumerate() {
        assert!(!b.is_null());
        // SAFETY: our block of 2048 bytes.
        unsafe { b.write_bytes(i as u8, 2048) };
    }
    for (i, &b) in blocks.iter().enumerate() {
        if i % 64 != 0 {
            // SAFETY: allocated above with this layout.
            unsafe { dealloc(b, lay(2048, 8)) };
        }
    }
    let given = give_back_free_pages();
    assert!(given >= 4 << 20, "gave back {given} bytes");
    // Other tests may allocate meanwhile: only what is ours is checked.
    for (i, &b) in blocks.iter().enumerate().step_by(64) {
        // SAFETY: still allocated.
        let s = unsafe { core::slice::from_raw_parts(b, 2048) };
        assert!(s.iter().all(|&x| x == i as u8), "block {i} changed");
    }
    // The given-back pages serve new blocks (as zeros or not, they
    // are writable and readable).
    let again: Vec<*mut u8> = (0..n / 2).map(|_| alloc(lay(2048, 8))).collect();
    for (i, &b) in again.iter().enumerate() {
        assert!(!b.is_null());
        // SAFETY: our block.
        unsafe {
            b.write_bytes(i as u8, 2048);
            assert_eq!(*b.add(2047), i as u8);
            dealloc(b, lay(2048, 8));
        }
    }
    for &b in blocks.iter().step_by(64) {
        // SAFETY: allocated above, freed once.
        unsafe { dealloc(b, lay(2048, 8)) };
    }
}

#[test]
fn small_and_large_blocks_are_counted_and_returned() {
    let _one = one_at_a_time();
    let before = usage();
    let a = alloc(lay(100, 8));
    let b = alloc(lay(LARGE * 3, 16));
    assert!(!a.is_null() && !b.is_null());
    unsafe {
        a.write_bytes(1, 100);
        b.write_bytes(2, LARGE * 3);
    }
    let mid = usage();
    assert!(mid.in_use >= before.in_use + 100 + LARGE * 3);
    assert!(mid.mapped >= before.mapped + LARGE * 3);
    // Growing a large block keeps its contents.
    let c = unsafe { realloc(b, lay(LARGE * 3, 16), LARGE * 10) };
    assert!(!c.is_null());
    assert_eq!(unsafe { *c.add(LARGE * 3 - 1) }, 2);
    unsafe {
        dealloc(c, lay(LARGE * 10, 16));
        dealloc(a, lay(100, 8));
    }
    // The large mapping is gone (other tests may run concurrently, so
    // only this test's share is checked).
    assert!(usage().mapped < mid.mapped + LARGE * 10);
}

#[test]
fn small_blocks_grow_shrink_and_cross_the_threshold() {
    let _one = one_at_a_time();
    let p = alloc(lay(40, 8));
    unsafe { p.write_bytes(7, 40) };
    let q = unsafe { realloc(p, lay(40, 8), 4000) };
    assert_eq!(unsafe { *q.add(39) }, 7);
    let r = unsafe { realloc(q, lay(4000, 8), LARGE * 2) };
    assert_eq!(unsafe { *r.add(39) }, 7);
    let s = unsafe { realloc(r, lay(LARGE * 2, 8), 16) };
    assert_eq!(unsafe { *s.add(15) }, 7);
    unsafe { dealloc(s, lay(16, 8)) };
}

#[test]
fn scratch_heap_is_given_back_when_empty() {
    let _one = one_at_a_time();
    let persistent = alloc(lay(64, 8));
    let (a, b);
    {
        let _s = Scratch::enter();
        a = alloc(lay(1000, 8));
        b = alloc(lay(5000, 16));
    }
    // Allocated in scratch mode: the scratch heap's.
    assert!(SCRATCH.lock().oom_handler.contains(a as usize));
    assert!(!SCRATCH.lock().oom_handler.contains(persistent as usize));
    unsafe { dealloc(a, lay(1000, 8)) };
    assert_ne!(release_scratch(), 0, "b is still live");
    unsafe { dealloc(b, lay(5000, 16)) };
    assert_eq!(release_scratch(), 0);
    assert_eq!(SCRATCH.lock().oom_handler.mapped, 0);
    unsafe { dealloc(persistent, lay(64, 8)) };
}

#[test]
fn large_alignment_comes_from_the_small_heap() {
    let _one = one_at_a_time();
    let p = alloc(lay(LARGE * 2, 4096));
    assert!(!p.is_null());
    assert_eq!(p as usize % 4096, 0);
    unsafe { dealloc(p, lay(LARGE * 2, 4096)) };
}

#[test]
fn many_threads_allocate_at_once() {
    let _one = one_at_a_time();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                for i in 0..2000usize {
                    let l = lay(8 + (i * 37 + t) % 3000, 8);
                    let p = alloc(l);
                    unsafe { p.write_bytes(t as u8, l.size()) };
                    v.push((p, l));
                    if i % 3 == 0 {
                        let (p, l) = v.swap_remove(i % v.len());
                        assert_eq!(unsafe { *p }, t as u8);
                        unsafe { dealloc(p, l) };
                    }
                }
                for (p, l) in v {
                    assert_eq!(unsafe { *p.add(l.size() - 1) }, t as u8);
                    unsafe { dealloc(p, l) };
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

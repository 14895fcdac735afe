//! Unit tests of the live table (`live.rs`).

use super::*;

#[test]
fn lifetime_classes_have_their_bounds() {
    keep_times();
    let tick = TICK_UNITS.load(core::sync::atomic::Ordering::Relaxed);
    assert!((1..=16).contains(&tick), "a coarse tick of {tick} units");
    assert_eq!(lifetime_class(NO_AGE), None);
    assert_eq!(lifetime_class(0), Some(FREED_1MS));
    assert_eq!(lifetime_class(tick), Some(FREED_1MS));
    assert_eq!(lifetime_class(tick + 1), Some(FREED_1S));
    // 1 s is 953.7 units of 2^20 ns.
    assert_eq!(lifetime_class(954 + tick), Some(FREED_1S));
    assert_eq!(lifetime_class(955 + tick), Some(FREED_LATER));
    assert_eq!(lifetime_class(NO_AGE - 1), Some(FREED_LATER));
}

#[test]
fn times_and_stamps_follow_their_entries_through_growth_and_shifts() {
    keep_times();
    let mut t = Table {
        slots: core::ptr::null_mut(),
        born: core::ptr::null_mut(),
        cap: 0,
        len: 0,
    };
    let now = now_units();
    // Neighbouring blocks share windows: takes shift entries back.
    let n = 3000usize;
    for i in 0..n {
        if (t.len + 1) * 2 > t.cap {
            assert!(t.grow());
        }
        let age = (i % 1000) as u32;
        t.put(
            Entry::new(0x7f00_0000_0000 + i * 48, 8, 1, MALLOC),
            Birth {
                time: now.wrapping_sub(age),
                stamp: i as u32 + 1,
            },
        );
    }
    assert!(!t.born.is_null());
    for i in (0..n).step_by(2).chain((1..n).step_by(2)) {
        let (e, Life { age, stamp }) = t.take(0x7f00_0000_0000 + i * 48).unwrap();
        assert_eq!(e.size(), 8);
        assert_eq!(stamp, i as u32 + 1, "block {i}'s stamp");
        let want = (i % 1000) as u32;
        // The clock may have moved on by a tick or two meanwhile.
        assert!(
            age >= want && age <= want + 100,
            "block {i}: age {age}, want {want}"
        );
    }
    assert_eq!(t.len, 0);
}

#[test]
fn insert_remove_many_with_collisions() {
    let base = 0x10_0000_0000usize;
    for i in 0..50_000usize {
        assert_eq!(
            insert(Entry::new(base + i * 16, i, 1, MALLOC), || 0),
            Ok(None)
        );
    }
    for i in (0..50_000usize).step_by(2) {
        let e = remove(base + i * 16).unwrap();
        assert_eq!(e.size(), i);
    }
    for i in 0..50_000usize {
        let e = remove(base + i * 16);
        assert_eq!(e.is_some(), i % 2 == 1, "{i}");
    }
    assert!(remove(base).is_none());
}

/// The longest and the mean distance of an entry from its home slot.
fn displacement(t: &Table) -> (usize, f64) {
    let d: Vec<usize> = (0..t.cap)
        .filter(|&i| t.at(i).addr != 0)
        .map(|i| i.wrapping_sub(t.home(t.at(i).addr)) & (t.cap - 1))
        .collect();
    let max = d.iter().copied().max().unwrap_or(0);
    (max, d.iter().sum::<usize>() as f64 / d.len().max(1) as f64)
}

/// Probe runs stay short for the address patterns of real heaps: dense
/// small blocks, one block per page at the same offset (mmap'd chunks,
/// page-aligned blocks), blocks 64 KiB apart, several arenas filled in
/// turn, random addresses. A hash of `addr >> 3` by a multiplication
/// that kept the low bits of the product sent page-strided addresses to
/// one slot in 512 (a mean probe of 97 slots for 4 KiB strides).
#[test]
fn probe_runs_stay_short_for_heap_address_patterns() {
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let random: Vec<usize> = (0..200_000)
        .map(|_| {
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            0x7f00_0000_0000 + (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) as usize & 0x3fff_fff0)
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let base = 0x7f00_0000_0010usize;
    let s16 = |i: usize| base + i * 16;
    let s32 = |i: usize| base + i * 32;
    let s48 = |i: usize| base + i * 48;
    let s4k = |i: usize| base + i * 4096;
    let s64k = |i: usize| base + i * 65536;
    // Eight arenas 64 MiB apart, filled in turn.
    let arenas = |i: usize| base + (i % 8) * (64 << 20) + (i / 8) * 48;
    let rand = |i: usize| random[i];
    type Pattern<'a> = (&'a str, &'a dyn Fn(usize) -> usize, usize);
    let patterns: [Pattern; 7] = [
        ("16-byte stride", &s16, 300_000),
        ("32-byte stride", &s32, 300_000),
        ("48-byte stride", &s48, 200_000),
        ("4 KiB stride", &s4k, 100_000),
        ("64 KiB stride", &s64k, 50_000),
        ("8 arenas", &arenas, 200_000),
        ("random", &rand, random.len()),
    ];
    for (name, addr, n) in patterns {
        let mut t = Table {
            slots: core::ptr::null_mut(),
            born: core::ptr::null_mut(),
            cap: 0,
            len: 0,
        };
        for i in 0..n {
            if (t.len + 1) * 2 > t.cap {
                assert!(t.grow());
            }
            assert_eq!(
                t.put(Entry::new(addr(i), 8, 1, MALLOC), Birth::UNKNOWN),
                None
            );
        }
        let (max, mean) = displacement(&t);
        assert!(
            max < 128 && mean < 2.0,
            "{name}: entries up to {max} slots from home, {mean:.1} on average"
        );
        for i in 0..n {
            assert_eq!(t.take(addr(i)).map(|e| e.0.size()), Some(8), "{name}");
        }
        assert_eq!(t.len, 0);
        // SAFETY: the table is ours and no longer used.
        unsafe { crate::hot::sys::unmap(t.slots.cast(), t.cap * core::mem::size_of::<Entry>()) };
    }
}

#[test]
fn sums_see_everything_while_threads_churn() {
    let base = 0x20_0000_0000usize;
    // Stacks of their own, so other tests' samples do not count here.
    let mine: Vec<StackId> = (0..4usize)
        .map(|t| crate::hot::stacks::intern(&[0x5eed_0000 + t, 0x77]))
        .collect();
    let ts: Vec<_> = mine
        .iter()
        .enumerate()
        .map(|(t, &id)| {
            std::thread::spawn(move || {
                for i in 0..20_000usize {
                    let a = base + (t << 32) + i * 16;
                    // Another test of this binary may be preparing a
                    // fork (the shard then refuses, as on a real
                    // allocation path): try again.
                    while let Err(e) = insert(Entry::new(a, 8 + t, id, MALLOC), || 0) {
                        assert_eq!(e, Refused::Forking);
                        std::thread::yield_now();
                    }
                    if i % 3 != 0 {
                        remove(a).unwrap();
                    }
                }
            })
        })
        .collect();
    let mut v = Vec::new();
    sum_by_stack(&mut v, 1, None).unwrap();
    for t in ts {
        t.join().unwrap();
    }
    sum_by_stack(&mut v, 1, None).unwrap();
    for (t, &id) in mine.iter().enumerate() {
        let s = v[id as usize];
        assert_eq!(s.samples, 6667, "thread {t}");
        assert_eq!(s.bytes, (6667 * (8 + t)) as f64, "thread {t}");
        assert_eq!(s.blocks, 6667.0, "thread {t}");
        assert_eq!(s.variance, 0.0);
    }
    // Sampled: the sums are those of the weights.
    sum_by_stack(&mut v, 4096, None).unwrap();
    let s = v[mine[2] as usize];
    let p = crate::hot::sampler::sample_probability(10, 4096);
    assert_eq!(s.samples, 6667);
    assert!((s.bytes - 6667.0 * 10.0 / p).abs() < 1e-6 * s.bytes);
    assert!((s.blocks - 6667.0 / p).abs() < 1e-6 * s.blocks);
    assert!(s.variance > 0.0);
    for i in 0..20_000usize {
        for t in 0..4usize {
            remove(base + (t << 32) + i * 16);
        }
    }
}

/// The size classes of a stack's live samples, counted in the sums'
/// pass: exact counts and bytes in exact mode, weights when sampled,
/// and their counts add up to the stack's sum.
#[test]
fn sizes_count_each_stack_by_class() {
    let base = 0x30_0000_0000usize;
    let id = crate::hot::stacks::intern(&[0x5eed_1000, 0x78]);
    let mut k = 0;
    for (n, size) in [(100, 48), (10, 100_000), (3, 0)] {
        for _ in 0..n {
            while insert(Entry::new(base + k * 16, size, id, MALLOC), || 0).is_err() {
                std::thread::yield_now();
            }
            k += 1;
        }
    }
    let mut v = Vec::new();
    let mut z = Sizes::default();
    sum_by_stack(&mut v, 1, Some(&mut z)).unwrap();
    assert!(z.complete);
    let mut mine: Vec<(u64, (u64, f64))> = z
        .by_stack
        .iter()
        .filter(|(k, _)| Sizes::unkey(**k).0 == id)
        .map(|(k, c)| (Sizes::class_low(Sizes::unkey(*k).1), *c))
        .collect();
    mine.sort_by_key(|c| c.0);
    assert_eq!(
        mine,
        [(0, (3, 0.0)), (32, (100, 4800.0)), (65536, (10, 1e6))]
    );
    assert_eq!(v[id as usize].samples, 113);
    sum_by_stack(&mut v, 4096, Some(&mut z)).unwrap();
    let big = z.by_stack[&Sizes::key(id, 17)];
    assert_eq!(big.0, 10);
    assert!((big.1 - 1e6).abs() < 1e-3, "{}", big.1);
    let small = z.by_stack[&Sizes::key(id, 6)];
    let p = crate::hot::sampler::sample_probability(48, 4096);
    assert!((small.1 - 4800.0 / p).abs() < 1e-6 * small.1);
    for i in 0..k {
        remove(base + i * 16);
    }
}

/// An entry keeps its fields through the packing.
#[test]
fn entries_pack_size_stack_and_kind() {
    let e = Entry::new(0x1000, 12345, 0xABCDE, ZEND_MM);
    assert_eq!((e.size(), e.stack(), e.kind()), (12345, 0xABCDE, ZEND_MM));
    let m = e.moved(0x2000, 7);
    assert_eq!(
        (m.addr, m.size(), m.stack(), m.kind()),
        (0x2000, 7, 0xABCDE, ZEND_MM)
    );
    let big = Entry::new(0x1000, usize::MAX, 3, MALLOC);
    assert_eq!(
        (big.size(), big.stack(), big.kind()),
        ((1 << 43) - 1, 3, MALLOC)
    );
    assert_eq!(core::mem::size_of::<Entry>(), 16);
}

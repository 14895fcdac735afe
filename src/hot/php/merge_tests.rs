//! `merge` (the PHP frames spliced into a native stack in place) against
//! the frame-by-frame copy into a new buffer that it replaced, at every
//! size of each part, with and without the cut at `MAX_FRAMES`.

use super::{MAX_FRAMES, MAX_PHP_FRAMES, merge};
use crate::hot::tables::names;

/// The old splice's copy: the three parts one frame at a time into a new
/// buffer, the root end cut (and marked) when more than fit.
fn by_copy(
    buf: &[usize; MAX_FRAMES],
    n: usize,
    leaf_end: usize,
    root_start: usize,
    php: &[usize],
) -> (Vec<usize>, usize) {
    let mut out = [0usize; MAX_FRAMES];
    let mut m = 0;
    for &f in buf[..leaf_end]
        .iter()
        .chain(php.iter())
        .chain(buf[root_start..n].iter())
    {
        if m == MAX_FRAMES {
            out[MAX_FRAMES - 1] = names::truncated();
            break;
        }
        out[m] = f;
        m += 1;
    }
    (out[..m].to_vec(), m)
}

fn native(n: usize) -> [usize; MAX_FRAMES] {
    let mut b = [0usize; MAX_FRAMES];
    for (i, f) in b.iter_mut().enumerate().take(n) {
        *f = 0x1000 + i;
    }
    b
}

#[test]
fn merge_is_the_frame_by_frame_copy_at_every_size() {
    let php: Vec<usize> = (0..MAX_PHP_FRAMES).map(|i| 0x9000 + i).collect();
    let mut cases = 0u64;
    let mut cut = 0u64;
    // Every native length, leaf part and root part (step 1 near the ends
    // and the limit, wider in between, to keep the test quick), every PHP
    // length.
    let lens: Vec<usize> = (0..=MAX_FRAMES)
        .filter(|&n| !(8..=MAX_FRAMES - 72).contains(&n) || n % 5 == 0)
        .collect();
    for &n in &lens {
        for leaf_end in (0..=n).filter(|&l| l < 4 || n - l < 4 || l % 7 == 0) {
            for root_start in
                (leaf_end..=n).filter(|&r| r - leaf_end < 4 || n - r < 4 || r % 11 == 0)
            {
                for k in 0..=MAX_PHP_FRAMES {
                    let b = native(n);
                    let (want, wm) = by_copy(&b, n, leaf_end, root_start, &php[..k]);
                    let mut got = b;
                    let m = merge(&mut got, n, leaf_end, root_start, &php[..k]);
                    assert_eq!(
                        m, wm,
                        "n {n} leaf_end {leaf_end} root_start {root_start} k {k}"
                    );
                    assert_eq!(
                        &got[..m],
                        &want[..],
                        "n {n} leaf_end {leaf_end} root_start {root_start} k {k}"
                    );
                    cases += 1;
                    if wm == MAX_FRAMES && want[MAX_FRAMES - 1] == names::truncated() {
                        cut += 1;
                    }
                }
            }
        }
    }
    // Both sides of the limit were tried.
    assert!(cases > 100_000, "{cases}");
    assert!(cut > 10_000, "{cut}");
}

#[test]
fn merge_marks_the_cut_at_the_root_end() {
    // 100 native frames, the VM between 10 and 90, 64 PHP frames: 10 + 64
    // + 10 fit; with the VM at 90 and 95, 90 + 64 + 5 do not.
    let php: Vec<usize> = (0..64).map(|i| 0x9000 + i).collect();
    let mut b = native(100);
    let m = merge(&mut b, 100, 10, 90, &php);
    assert_eq!(m, 84);
    assert_eq!(b[9], 0x1000 + 9);
    assert_eq!(b[10], 0x9000);
    assert_eq!(b[73], 0x9000 + 63);
    assert_eq!(b[74], 0x1000 + 90);
    assert_eq!(b[83], 0x1000 + 99);
    let mut b = native(100);
    let m = merge(&mut b, 100, 90, 95, &php);
    assert_eq!(m, MAX_FRAMES);
    assert_eq!(b[89], 0x1000 + 89);
    assert_eq!(b[90], 0x9000);
    assert_eq!(b[MAX_FRAMES - 2], 0x9000 + (MAX_FRAMES - 2 - 90));
    assert_eq!(b[MAX_FRAMES - 1], names::truncated());
}

//! Byte-weighted Poisson sampling, per thread.
//!
//! Each thread keeps `bytes_until_sample`. An allocation of `s` bytes
//! subtracts `s`; the allocation that takes the count below zero is sampled
//! and a new gap is drawn from an exponential distribution with mean `R`
//! (`HEAPLIVE_SAMPLE_INTERVAL`). Sampling points then form a Poisson process
//! over the bytes a thread allocates, and by memorylessness the leftover of
//! the old gap does not matter.
//!
//! An allocation of `s` bytes spans `s` bytes of that process, so it is
//! sampled with probability `p = 1 - exp(-s/R)`. Counting each sample as
//! `s/p` bytes and `1/p` blocks makes the totals un-biased:
//! `E[sum over sampled of s/p] = sum over all of p * s/p = sum of s`.
//! Un-bias each sample before summing (summing sizes first and correcting
//! the total is a known bug of older pprof tools). The estimate for a stack
//! holding `L` live bytes rests on about `L/R` samples, so its relative
//! standard error is near `sqrt(R/L)`.
//!
//! Gaps are exponential, not Poisson-distributed integers: a Poisson count
//! with a large mean is nearly constant, so sampling would turn periodic and
//! alias with regular allocation patterns.
//!
//! `R = 1` is exact mode: every allocation is recorded with weight exactly
//! its requested size and one block.

use crate::hot::guard::ThreadState;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[cfg(test)]
/// The bytes one sample of `size` bytes stands for: `s / (1 - exp(-s/R))`.
pub fn weight_bytes(size: u64, interval: u64) -> f64 {
    if interval <= 1 {
        return size as f64;
    }
    let p = sample_probability(size, interval);
    if p <= 0.0 {
        // Only size 0: a zero-size block holds no bytes.
        0.0
    } else {
        size as f64 / p
    }
}

#[cfg(test)]
/// The blocks one sample of `size` bytes stands for: `1/p`.
pub fn weight_blocks(size: u64, interval: u64) -> f64 {
    if interval <= 1 {
        return 1.0;
    }
    let p = sample_probability(size, interval);
    if p <= 0.0 { 0.0 } else { 1.0 / p }
}

/// The fixed point of variance terms kept in the stack records: units of
/// `R^2 / 2^VARIANCE_SHIFT`. A sample's term `s^2 (1 - p) / p^2` is at most
/// `R^2` (it is `R^2 (x/2 / sinh(x/2))^2` with `x = s/R`), so one sample
/// adds at most 2^32 units, and a record's i64 holds 2^31 samples' worth.
pub const VARIANCE_SHIFT: i32 = 32;

#[cfg(test)]
/// The Horvitz-Thompson variance term of one sample of `size` bytes,
/// `s^2 (1 - p) / p^2` (the variance of its weight), in units of
/// `R^2 / 2^32`: 0 in exact mode and for blocks sampled with certainty
/// (`p == 1` in doubles: 37 R and more).
pub fn variance_units(size: u64, interval: u64) -> i64 {
    if interval <= 1 {
        return 0;
    }
    let p = sample_probability(size, interval);
    if p <= 0.0 {
        return 0;
    }
    let x = size as f64 / interval as f64;
    let t = x * x * (1.0 - p) / (p * p);
    (t * (1u64 << VARIANCE_SHIFT) as f64).round() as i64
}

/// Variance units (`variance_units`) as bytes squared.
pub fn variance_of_units(units: f64, interval: u64) -> f64 {
    if interval <= 1 || units <= 0.0 {
        return 0.0;
    }
    let r = interval as f64;
    units * r * r / (1u64 << VARIANCE_SHIFT) as f64
}

/// A sample's bytes (`weight_bytes`), milli-blocks (`weight_blocks` x
/// 1000) and variance units (`variance_units`), rounded, from one
/// probability: the same numbers as the three functions give (a unit test
/// checks it), with one expm1 in place of three. (`weight_bytes`,
/// `weight_blocks` and `variance_units` stay as the formulas, for tests.)
#[inline]
pub fn amounts(size: u64, interval: u64) -> (i64, i64, i64) {
    if interval <= 1 {
        // Exact mode: a block is its size, one block.
        return (size.min(i64::MAX as u64) as i64, 1000, 0);
    }
    let p = sample_probability(size, interval);
    if p <= 0.0 {
        // Only size 0.
        return (0, 0, 0);
    }
    let x = size as f64 / interval as f64;
    let t = x * x * (1.0 - p) / (p * p);
    (
        (size as f64 / p).round() as i64,
        ((1.0 / p) * 1000.0).round() as i64,
        (t * (1u64 << VARIANCE_SHIFT) as f64).round() as i64,
    )
}

/// `1 - exp(-s/R)`, computed with expm1 so small sizes keep their digits.
pub fn sample_probability(size: u64, interval: u64) -> f64 {
    // libm's (pure Rust): the system libm need not be loaded at start.
    -libm::expm1(-(size as f64) / interval as f64)
}

static THREADS_SEEDED: AtomicU64 = AtomicU64::new(0);

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform draw in (0, 1].
pub fn uniform(state: &mut u64) -> f64 {
    // xorshift64*
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
    ((r >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// An exponential gap with mean `interval` bytes; -1 in exact mode, so
/// that every allocation, `malloc(0)` included, is recorded.
pub fn next_gap(rng: &mut u64, interval: u64) -> i64 {
    if interval <= 1 {
        return -1;
    }
    let g = -libm::log(uniform(rng)) * interval as f64;
    if g >= (i64::MAX / 4) as f64 {
        i64::MAX / 4
    } else {
        g as i64
    }
}

/// Seeds this thread's generator: from `HEAPLIVE_SEED` and the order in
/// which threads first sample when a seed is set, else from the clock.
pub fn seed_thread(t: &mut ThreadState, seed: u64) {
    let ordinal = THREADS_SEEDED.fetch_add(1, Relaxed);
    let base = if seed != 0 {
        seed
    } else {
        crate::hot::sys::now_nanos() ^ (t as *mut ThreadState as u64).rotate_left(32)
    };
    let mut s = splitmix64(base ^ splitmix64(ordinal));
    if s == 0 {
        s = 0x853C_49E6_748F_EA9B;
    }
    t.rng = s;
    t.sampler_ready = 1;
}

/// A forked child continues the forking thread's generator: mix the new
/// pid in so that parent and child sample independently.
pub fn reseed_after_fork(pid: u32) {
    // SAFETY: this thread's own state.
    let t = unsafe { &mut *crate::hot::guard::state() };
    if t.sampler_ready != 0 {
        t.rng = splitmix64(t.rng ^ splitmix64(pid as u64)) | 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_mode_weights_are_sizes() {
        assert_eq!(weight_bytes(1000, 1), 1000.0);
        assert_eq!(weight_blocks(1000, 1), 1.0);
        let mut rng = 7;
        assert_eq!(next_gap(&mut rng, 1), -1);
    }

    #[test]
    fn weights_follow_the_formula() {
        let r = 512 * 1024;
        for s in [1u64, 16, 4096, 65536, r, 8 * r] {
            let p = 1.0 - (-(s as f64) / r as f64).exp();
            let w = weight_bytes(s, r);
            assert!((w - s as f64 / p).abs() / w < 1e-9, "size {s}");
            assert!((weight_blocks(s, r) - 1.0 / p).abs() * p < 1e-9);
        }
        // A block far larger than R is sampled almost surely: weight ~ size.
        let big = 64 * r;
        assert!((weight_bytes(big, r) - big as f64).abs() < 1.0);
        // A tiny block stands for about R bytes.
        assert!((weight_bytes(1, r) - r as f64).abs() < 1.0);
    }

    #[test]
    fn variance_units_follow_the_formula() {
        let r = 512 * 1024u64;
        assert_eq!(variance_units(1000, 1), 0);
        // Always sampled: exactly 0.
        assert_eq!(variance_units(64 * r, r), 0);
        for s in [1u64, 64, 4096, r / 2, r, 3 * r, 10 * r] {
            let p = 1.0 - (-(s as f64) / r as f64).exp();
            let w = s as f64 / p;
            let want = w * w * (1.0 - p);
            let got = variance_of_units(variance_units(s, r) as f64, r);
            assert!(
                (got - want).abs() <= 1e-6 * want + 1.0,
                "size {s}: {got} vs {want}"
            );
            assert!(variance_units(s, r) <= 1 << VARIANCE_SHIFT);
        }
    }

    /// `amounts` gives, to the bit, what the three functions it replaced on
    /// the sampling path give: every size to 2,000 bytes and large ones, at
    /// four intervals and in exact mode.
    #[test]
    fn amounts_are_the_three_weights_rounded() {
        let old = |s: u64, r: u64| {
            if r <= 1 {
                return (s.min(i64::MAX as u64) as i64, 1000, 0);
            }
            (
                weight_bytes(s, r).round() as i64,
                (weight_blocks(s, r) * 1000.0).round() as i64,
                variance_units(s, r),
            )
        };
        let large = [
            4095u64,
            4096,
            65_536,
            524_287,
            524_288,
            1 << 20,
            3 << 20,
            1 << 30,
            1 << 40,
            u64::MAX,
        ];
        for r in [1u64, 4096, 65_536, 512 * 1024, 8 << 20] {
            for s in (0..=2000u64).chain(large) {
                assert_eq!(amounts(s, r), old(s, r), "size {s} interval {r}");
            }
        }
    }

    /// The mean gap is R and the coefficient of variation is 1 (exponential).
    /// With n = 200,000 draws the standard error of the mean is R/sqrt(n);
    /// a 6-sigma bound fails by chance with probability about 2e-9.
    #[test]
    fn gaps_are_exponential_with_mean_r() {
        let r = 512 * 1024u64;
        let mut rng = splitmix64(1);
        let n = 200_000;
        let (mut sum, mut sumsq) = (0f64, 0f64);
        for _ in 0..n {
            let g = next_gap(&mut rng, r) as f64;
            sum += g;
            sumsq += g * g;
        }
        let mean = sum / n as f64;
        let sd = (sumsq / n as f64 - mean * mean).sqrt();
        let se = r as f64 / (n as f64).sqrt();
        assert!((mean - r as f64).abs() < 6.0 * se, "mean {mean}");
        assert!((sd / mean - 1.0).abs() < 0.05, "cv {}", sd / mean);
    }

    /// Simulates the sampler on a known stream and checks the estimate is
    /// un-biased: 400 runs of 64 MiB in mixed sizes; the total estimate has
    /// relative error about sqrt(R/L) per run, and the mean of 400 runs is
    /// within 6 standard errors (false failure ~2e-9).
    #[test]
    fn estimates_are_unbiased() {
        let r = 512 * 1024u64;
        let sizes = [24u64, 100, 4000, 70_000, 600_000, 3_000_000];
        let total_per_run: u64 = 64 << 20;
        let runs = 400;
        let mut estimates = Vec::new();
        for run in 0..runs {
            let mut rng = splitmix64(1000 + run);
            let mut left = next_gap(&mut rng, r);
            let (mut allocated, mut est, mut i) = (0u64, 0f64, 0usize);
            while allocated < total_per_run {
                let s = sizes[i % sizes.len()];
                i += 1;
                allocated += s;
                left -= s as i64;
                if left < 0 {
                    est += weight_bytes(s, r);
                    left = next_gap(&mut rng, r);
                }
            }
            estimates.push(est / allocated as f64);
        }
        let mean = estimates.iter().sum::<f64>() / runs as f64;
        let var = estimates.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (runs - 1) as f64;
        let se = (var / runs as f64).sqrt();
        assert!((mean - 1.0).abs() < 6.0 * se, "mean ratio {mean}, se {se}");
        // And the per-run spread is of the order sqrt(R/L).
        let predicted = (r as f64 / total_per_run as f64).sqrt();
        assert!(
            var.sqrt() < 2.0 * predicted,
            "sd {} vs {predicted}",
            var.sqrt()
        );
    }
}

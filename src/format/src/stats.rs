//! Intervals of sampled estimates, per stack, from what a dump keeps per
//! stack: the estimate `x` (the sum of its samples' weights) and the
//! estimated variance `v` of that estimate.
//!
//! A block of `s` bytes is sampled with probability `p = 1 - exp(-s/R)`
//! and a sample weighs `w = s/p` (`hot/sampler.rs`). The Horvitz-Thompson
//! variance of a stack's estimate is estimated from its own samples:
//! `v = sum of w^2 (1 - p) = sum of s^2 (1 - p) / p^2`. It is 0 when every
//! sample is of a block sampled with certainty (`p == 1` in doubles: blocks
//! of 37 R and more), about `R^2` per sample for blocks much smaller than
//! `R` (the Poisson count of samples times `R`), and between for blocks
//! near `R` (whose count of samples is binomial, less variable than a
//! Poisson count).
//!
//! The interval is the gamma interval of Fay and Feuer (1997) for weighted
//! sums of Poisson counts: with `c = v/x` (the bytes one "effective sample"
//! stands for) and `k = x^2/v` (the effective count of samples), the lower
//! end is `c` times the 2.5% quantile of Gamma(k) and the upper end `c`
//! times the 97.5% quantile of Gamma(k + 1). For a stack of small blocks
//! (`c` near `R`, `k` the count of samples) this is the exact (Garwood)
//! Poisson interval on the count, scaled by the weight: it keeps its
//! coverage with one sample, where `x ± 1.96 sqrt(v)` is nonsense (±196%).
//! For many samples it is `x ± 1.96 sqrt(v)`. For blocks sampled with
//! certainty it has width 0.
//!
//! Variances add over stacks and over dumps of different processes (the
//! samples of disjoint bytes are independent), so merging dumps adds the
//! variance files as it adds the byte files.

/// The normal quantile of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// A stack whose live bytes are `L` has no sample with probability at most
/// `exp(-L/R)` (exactly that when its blocks are small, less when they are
/// not): at most 5% when `L >= R ln 20`. So at 95%, a stack with no sample
/// holds less than `UNSEEN_FACTOR * R` bytes.
pub const UNSEEN_FACTOR: f64 = 2.995_732_273_553_991;

/// The 95% interval of an estimate `x` with estimated variance `v`
/// (bytes and bytes squared); `(x, x)` when `v` is 0 (exact).
pub fn interval95(x: f64, v: f64) -> (f64, f64) {
    interval(x, v, 0.95)
}

/// The interval of confidence `level` (in (0, 1)) of an estimate `x` with
/// estimated variance `v`. See the module's text.
pub fn interval(x: f64, v: f64, level: f64) -> (f64, f64) {
    let x = if x.is_finite() { x.max(0.0) } else { 0.0 };
    if x.is_nan() || v.is_nan() || v <= 0.0 || x <= 0.0 {
        return (x, x);
    }
    if !v.is_finite() {
        return (0.0, f64::INFINITY);
    }
    let tail = ((1.0 - level) / 2.0).clamp(1e-12, 0.5);
    let c = v / x;
    let k = x / c;
    let lo = c * gamma_quantile(tail, k);
    let hi = c * gamma_quantile(1.0 - tail, k + 1.0);
    (lo.min(x), hi.max(x))
}

/// The 95% interval of an estimate `x` that rests on `n` samples, when
/// only the count is known (dumps written before the variance files): the
/// Garwood interval on `n` scaled by the mean weight `x/n`. Exact for
/// small blocks; too wide for blocks near or above R (an upper bound).
pub fn interval95_from_count(x: f64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, f64::INFINITY);
    }
    interval95(x, x * x / n as f64)
}

/// The `q` quantile of the gamma distribution of shape `k`, scale 1.
fn gamma_quantile(q: f64, k: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Gamma};
    if k <= 0.0 || !k.is_finite() {
        return k.max(0.0);
    }
    // Wilson-Hilferty's approximation, for shapes beyond a million (where
    // its error is far below a byte's worth and statrs's search can fail).
    let wilson_hilferty = || {
        let z = normal_quantile(q);
        let t = 1.0 - 1.0 / (9.0 * k) + z / (3.0 * k.sqrt());
        k * t.max(0.0).powi(3)
    };
    if k > 1e6 {
        return wilson_hilferty();
    }
    match Gamma::new(k, 1.0) {
        Ok(g) => {
            let x = g.inverse_cdf(q);
            if x.is_finite() { x } else { wilson_hilferty() }
        }
        Err(_) => wilson_hilferty(),
    }
}

fn normal_quantile(q: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::standard().inverse_cdf(q)
}

/// The bound on the live bytes of one stack that has no sample in a dump
/// sampled at `interval` bytes (95%).
pub fn unseen_bound(interval: f64) -> f64 {
    UNSEEN_FACTOR * interval
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    /// Garwood's interval for a Poisson count n (R's poisson.test values).
    #[test]
    fn small_blocks_give_the_exact_poisson_interval_scaled() {
        let r = 524_288.0;
        for (n, lo, hi) in [
            (1u64, 0.025_317_8, 5.571_643_6),
            (2, 0.242_209_0, 7.224_688_7),
            (5, 1.623_486_6, 11.668_332_8),
            (10, 4.795_389_8, 18.390_358_6),
        ] {
            // n samples of tiny blocks: x = n R, v = n R^2.
            let nf = n as f64;
            let (l, h) = interval95(nf * r, nf * r * r);
            assert!(close(l / r, lo, 1e-5), "n {n}: low {} vs {lo}", l / r);
            assert!(close(h / r, hi, 1e-5), "n {n}: high {} vs {hi}", h / r);
            // The same from the count alone.
            let (l2, h2) = interval95_from_count(nf * r, n);
            assert!(close(l2, l, 1e-12) && close(h2, h, 1e-12));
        }
    }

    #[test]
    fn always_sampled_blocks_are_exact_and_edges_do_not_panic() {
        assert_eq!(interval95(33_554_432.0, 0.0), (33_554_432.0, 33_554_432.0));
        assert_eq!(interval95(0.0, 0.0), (0.0, 0.0));
        assert_eq!(interval95(0.0, 5.0), (0.0, 0.0));
        assert_eq!(interval95(f64::NAN, 5.0), (0.0, 0.0));
        assert_eq!(interval95(10.0, f64::INFINITY), (0.0, f64::INFINITY));
        assert_eq!(interval95_from_count(10.0, 0), (0.0, f64::INFINITY));
        // Tiny and huge effective counts.
        let (l, h) = interval95(1.0, 1e30);
        assert!(l >= 0.0 && h.is_finite() && h > 1.0, "{l} {h}");
        let (l, h) = interval95(1e15, 1e10);
        assert!(l < 1e15 && h > 1e15);
    }

    /// With many samples the interval is x ± 1.96 sqrt(v), on both sides of
    /// the switch to Wilson-Hilferty.
    #[test]
    fn many_samples_give_the_normal_interval() {
        for k in [1e4, 1e6, 0.9e7, 1.1e7, 1e9] {
            let c = 1000.0;
            let (x, v) = (k * c, k * c * c);
            let (l, h) = interval95(x, v);
            let half = Z95 * v.sqrt();
            assert!(close(x - l, half, 0.02), "k {k}: {} vs {half}", x - l);
            assert!(close(h - x, half, 0.02), "k {k}: {} vs {half}", h - x);
        }
        assert!(close(normal_quantile(0.975), Z95, 1e-9));
        assert!(close(normal_quantile(0.025), -Z95, 1e-9));
    }

    /// Blocks near R: the count is binomial, and the interval is narrower
    /// than the Poisson one on the same count (the old ±1.96/sqrt(n) was
    /// 2.4x to 6.4x too wide there).
    #[test]
    fn blocks_near_r_get_narrower_intervals_than_a_poisson_count() {
        let r = 524_288.0f64;
        let s = 2.0 * r;
        let p = 1.0 - (-s / r).exp();
        let n = 20.0;
        let x = n * s / p;
        let v = n * (s / p).powi(2) * (1.0 - p);
        let (l, h) = interval95(x, v);
        let (lc, hc) = interval95_from_count(x, 20);
        assert!(h - l < 0.5 * (hc - lc), "{} vs {}", h - l, hc - lc);
    }

    /// Coverage, simulated: stacks of N tiny blocks of which each is sampled
    /// with probability p (binomial count, weight s/p). For means of 0.5 to
    /// 50 samples, 20,000 trials each, the interval covers the truth in at
    /// least 94% of the trials where the stack is seen (the exact interval
    /// is conservative: it covers 95% or more; 94% leaves 4.6 standard
    /// errors of a binomial proportion, false failure below 1e-5 over the
    /// five cases), and a ± 1.96 sqrt(v) interval would not (a check that
    /// the test can fail).
    #[test]
    fn simulated_coverage_of_small_block_stacks() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut uniform = || {
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            ((rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (s, r) = (64.0f64, 65_536.0f64);
        let p = 1.0 - (-s / r).exp();
        for mean in [0.5, 2.0, 5.0, 15.0, 50.0] {
            let blocks = (mean / p).round() as usize;
            let truth = blocks as f64 * s;
            let (mut seen, mut covered, mut normal) = (0u32, 0u32, 0u32);
            for _ in 0..20_000 {
                // A binomial draw by inversion of its Poisson limit is
                // enough here; do it exactly, block by block, in groups.
                let mut n = 0u32;
                let mut left = blocks;
                // Geometric skipping: gaps between sampled blocks.
                loop {
                    let gap = (uniform().ln() / (1.0 - p).ln()).floor() as usize;
                    if gap >= left {
                        break;
                    }
                    n += 1;
                    left -= gap + 1;
                }
                if n == 0 {
                    continue;
                }
                seen += 1;
                let w = s / p;
                let x = n as f64 * w;
                let v = n as f64 * w * w * (1.0 - p);
                let (l, h) = interval95(x, v);
                covered += (l <= truth && truth <= h) as u32;
                let half = Z95 * v.sqrt();
                normal += (x - half <= truth && truth <= x + half) as u32;
            }
            let cov = covered as f64 / seen as f64;
            assert!(cov >= 0.94, "mean {mean} samples: coverage {cov}");
            if mean == 5.0 || mean == 15.0 {
                let ncov = normal as f64 / seen as f64;
                assert!(ncov < 0.94, "mean {mean}: normal {ncov}");
            }
        }
    }
}

//! The samples file `NAME.samples.folded`, version 2: per view and stack,
//! the number of live samples and the estimated variance of the view's
//! bytes, so that `heaplive top`, `diff` and `merge` compute each stack's
//! interval (`stats`) from a default dump, with no file per view.
//!
//! ```text
//! # heaplive samples 2
//! # interval 65536
//! live 12 3435973836.8 _start;main;site_small
//! live 1 0 _start;main;site_huge
//! alloc - 5497558138.9 _start;main;site_small
//! peak - 0 _start;main;site_huge
//! ```
//!
//! The first line names the version; the second, `# interval R`, the
//! mean sample interval in bytes (`HEAPLIVE_SAMPLE_INTERVAL`; summed files
//! of different intervals have none). Then one line per view and stack:
//! the view (`live` for `NAME.folded`, whatever moment it holds; `alloc`
//! for `NAME.alloc.folded`; `peak` for `NAME.peak.folded`), the number of
//! samples behind the stack's bytes (`-` where the library does not keep
//! it: the alloc and peak views, PHP request-peak dumps), the estimated
//! variance of the stack's bytes in bytes squared (a decimal number; 0 when
//! the estimate is exact: blocks sampled with certainty), and the stack as
//! in the folded file (frames root first, joined by `;`). Numbers come
//! first, so a frame may hold spaces and digits. A stack absent from a view
//! has no sample in it. Lines with another first word are skipped (room for
//! later views); a later version changes the first line.
//!
//! Size rows (added in version 2, so older readers skip them as a view
//! they do not know): `size:LOW SAMPLES BYTES STACK`, the live samples of
//! the stack whose requested sizes are in the class from `LOW` to
//! `2 LOW - 1` bytes (`LOW` a power of two; `size:0` holds zero-byte
//! blocks), their number, and the estimated live bytes of the class (the
//! sum of the samples' weights `s/p`; exact in exact mode, where every
//! block is a sample). The third number is bytes, not a variance. A
//! stack's size rows add up to its `live` row's samples and (rounding
//! aside) to its bytes in `NAME.folded`.
//!
//! ```text
//! size:32 100 4800 _start;main;site
//! size:65536 10 1000000 _start;main;site
//! ```
//!
//! Lifetime rows (`HEAPLIVE_VIEWS=...,temporary`; older readers skip
//! them): `life:CLASS BLOCKS BYTES VARIANCE STACK`, the stack's sampled
//! blocks freed since the start in lifetime class `CLASS` (`1ms`: freed
//! within 1 ms of their allocation, `1s`: after 1 ms and within 1 s,
//! `later`; and `temporary`: freed before their thread's next allocation,
//! which are also in one of the three), their estimated number and bytes
//! (un-biased, exact in exact mode), and the variance of the bytes.
//!
//! ```text
//! life:1ms 16384 1073741824 0 _start;main;temporary_site
//! life:temporary 16384 1073741824 0 _start;main;temporary_site
//! ```
//!
//! Version 1 was a plain folded file of live sample counts; variances were
//! in `NAME.variance.folded`, `NAME.alloc.variance.folded` and
//! `NAME.peak.variance.folded` (`HEAPLIVE_VIEWS=...,variance`), which the
//! command still reads when it finds no version 2 file.

use std::collections::BTreeMap;
use std::io::{self, Write};

/// The first line of a version 2 samples file.
pub const HEADER: &str = "# heaplive samples 2";

/// The views a samples file describes, by the file they go with.
pub const VIEWS: [&str; 3] = ["live", "alloc", "peak"];

/// One stack of one view: samples (when kept) and variance.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stat {
    pub samples: Option<u64>,
    pub variance: f64,
}

impl Stat {
    /// Adds another estimate's (independent samples: variances add).
    pub fn add(&mut self, o: Stat) {
        self.samples = match (self.samples, o.samples) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            _ => None,
        };
        self.variance += o.variance;
    }
}

/// The live samples of one stack in one size class.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Size {
    pub samples: u64,
    /// Estimated live bytes (exact in exact mode).
    pub bytes: f64,
}

/// The size class of a block of `size` bytes: the largest power of two at
/// most `size` (0 for 0).
pub fn size_class(size: u64) -> u64 {
    if size == 0 {
        0
    } else {
        1 << (63 - size.leading_zeros())
    }
}

/// The lifetime classes of `life:` rows, in the order of `Samples::lifetimes`.
pub const LIFE_CLASSES: [&str; 4] = ["1ms", "1s", "later", "temporary"];

/// The sampled blocks of one stack freed in one lifetime class.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Life {
    /// Estimated blocks and bytes (exact in exact mode).
    pub blocks: f64,
    pub bytes: f64,
    /// The estimated variance of `bytes`.
    pub variance: f64,
}

impl Life {
    fn add(&mut self, o: Life) {
        self.blocks += o.blocks;
        self.bytes += o.bytes;
        self.variance += o.variance;
    }
}

/// Per view, per stack.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    /// The sample interval R, bytes, when known.
    pub interval: Option<u64>,
    pub views: BTreeMap<String, BTreeMap<String, Stat>>,
    /// Per stack, its live samples by size class (`size_class`).
    pub sizes: BTreeMap<String, BTreeMap<u64, Size>>,
    /// Per stack, its sampled blocks freed by lifetime class
    /// (`LIFE_CLASSES`).
    pub lifetimes: BTreeMap<String, [Life; 4]>,
}

impl Samples {
    /// Counts `stat` into `stack` of `view` (summed with what is there).
    pub fn add(&mut self, view: &str, stack: &str, stat: Stat) {
        let stacks = self.views.entry(view.to_string()).or_default();
        match stacks.get_mut(stack) {
            Some(s) => s.add(stat),
            None => {
                stacks.insert(stack.to_string(), stat);
            }
        }
    }

    /// Adds every view of `other` into `view` (merging dumps into one).
    pub fn add_all_as(&mut self, view: &str, other: &BTreeMap<String, Stat>) {
        for (stack, &stat) in other {
            self.add(view, stack, stat);
        }
    }

    /// Counts `size` into `stack`'s size class `class` (summed).
    pub fn add_size(&mut self, stack: &str, class: u64, size: Size) {
        if !self.sizes.contains_key(stack) {
            self.sizes.insert(stack.to_string(), BTreeMap::new());
        }
        if let Some(classes) = self.sizes.get_mut(stack) {
            let s = classes.entry(class).or_default();
            s.samples = s.samples.saturating_add(size.samples);
            s.bytes += size.bytes;
        }
    }

    /// Counts `life` into `stack`'s lifetime class `class` (an index of
    /// `LIFE_CLASSES`; summed).
    pub fn add_life(&mut self, stack: &str, class: usize, life: Life) {
        if !self.lifetimes.contains_key(stack) {
            self.lifetimes
                .insert(stack.to_string(), [Life::default(); 4]);
        }
        if let Some(l) = self.lifetimes.get_mut(stack).and_then(|c| c.get_mut(class)) {
            l.add(life);
        }
    }

    pub fn view(&self, view: &str) -> Option<&BTreeMap<String, Stat>> {
        self.views.get(view)
    }

    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{HEADER}")?;
        if let Some(r) = self.interval {
            writeln!(out, "# interval {r}")?;
        }
        for (view, stacks) in &self.views {
            for (stack, s) in stacks {
                write_line(out, view, stack, *s)?;
            }
        }
        for (stack, classes) in &self.sizes {
            for (class, s) in classes {
                let bytes = if s.bytes.is_finite() && s.bytes > 0.0 {
                    s.bytes.round()
                } else {
                    0.0
                };
                writeln!(out, "size:{class} {} {bytes} {stack}", s.samples)?;
            }
        }
        let number = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
        for (stack, classes) in &self.lifetimes {
            for (class, l) in LIFE_CLASSES.iter().zip(classes) {
                if l.blocks > 0.0 || l.bytes > 0.0 {
                    writeln!(
                        out,
                        "life:{class} {} {} {} {stack}",
                        number(l.blocks).round(),
                        number(l.bytes).round(),
                        number(l.variance)
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// One line: `VIEW SAMPLES VARIANCE STACK`.
pub fn write_line(out: &mut dyn Write, view: &str, stack: &str, s: Stat) -> io::Result<()> {
    let variance = if s.variance.is_finite() && s.variance > 0.0 {
        s.variance
    } else {
        0.0
    };
    match s.samples {
        Some(n) => writeln!(out, "{view} {n} {variance} {stack}"),
        None => writeln!(out, "{view} - {variance} {stack}"),
    }
}

/// Is this the text of a version 2 samples file?
pub fn is_v2(bytes: &[u8]) -> bool {
    let b = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    b.starts_with(HEADER.as_bytes())
        && matches!(b.get(HEADER.len()), None | Some(b'\n') | Some(b'\r'))
}

/// Parses a version 2 samples file; `name` is used in error messages.
pub fn parse(name: &str, bytes: &[u8]) -> Result<Samples, String> {
    if !is_v2(bytes) {
        return Err(format!(
            "{name}: not a version 2 samples file (its first line is not '{HEADER}')"
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{name}: not UTF-8 text"))?;
    let mut out = Samples::default();
    for (i, line) in text.split('\n').enumerate().skip(1) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(r) = line.strip_prefix("# interval ") {
            out.interval = r.trim().parse().ok().filter(|&r| r > 0);
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("{name}:{}: {why}", i + 1);
        if let Some(rest) = line.strip_prefix("life:") {
            let (class, life, stack) = parse_life(rest).map_err(|e| bad(&e))?;
            out.add_life(stack, class, life);
            continue;
        }
        let mut parts = line.splitn(4, ' ');
        let (Some(view), Some(n), Some(v), Some(stack)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected 'VIEW SAMPLES VARIANCE STACK'"));
        };
        if stack.is_empty() {
            return Err(bad("no stack"));
        }
        let samples = match n {
            "-" => None,
            n => Some(
                n.parse::<u64>()
                    .map_err(|_| bad(&format!("'{n}' is not a count of samples")))?,
            ),
        };
        let variance: f64 = v
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| bad(&format!("'{v}' is not a variance")))?;
        if let Some(class) = view.strip_prefix("size:") {
            let class: u64 = class
                .parse()
                .ok()
                .filter(|&c: &u64| c == 0 || c.is_power_of_two())
                .ok_or_else(|| bad(&format!("'{view}' is not a size class")))?;
            let samples = samples.ok_or_else(|| bad("a size row without its count"))?;
            let bytes = variance;
            out.add_size(stack, class, Size { samples, bytes });
            continue;
        }
        if !VIEWS.contains(&view) {
            continue;
        }
        out.add(view, stack, Stat { samples, variance });
    }
    Ok(out)
}

/// A lifetime row after its `life:`: `CLASS BLOCKS BYTES VARIANCE STACK`.
fn parse_life(rest: &str) -> Result<(usize, Life, &str), String> {
    let mut parts = rest.splitn(5, ' ');
    let (Some(class), Some(blocks), Some(bytes), Some(variance), Some(stack)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err("expected 'life:CLASS BLOCKS BYTES VARIANCE STACK'".into());
    };
    let class = LIFE_CLASSES
        .iter()
        .position(|&c| c == class)
        .ok_or_else(|| {
            format!("'life:{class}' is not a lifetime class (1ms, 1s, later, temporary)")
        })?;
    let number = |what: &str, t: &str| {
        t.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("'{t}' is not {what}"))
    };
    let life = Life {
        blocks: number("a count of blocks", blocks)?,
        bytes: number("a count of bytes", bytes)?,
        variance: number("a variance", variance)?,
    };
    if stack.is_empty() {
        return Err("no stack".into());
    }
    Ok((class, life, stack))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetime_rows_write_and_read_back_and_bad_ones_are_errors() {
        let mut s = Samples::default();
        let l = Life {
            blocks: 16384.0,
            bytes: 1073741824.0,
            variance: 2.5e9,
        };
        s.add_life("main;temporary_site", 0, l);
        s.add_life("main;temporary_site", 3, l);
        s.add_life("main;temporary_site", 3, l);
        let mut out = Vec::new();
        s.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!(
                "{HEADER}\nlife:1ms 16384 1073741824 2500000000 main;temporary_site\nlife:temporary 32768 2147483648 5000000000 main;temporary_site\n"
            )
        );
        let back = parse("x", text.as_bytes()).unwrap();
        assert_eq!(back, s);
        let h = HEADER;
        for bad in [
            "life:2ms 1 1 0 a",
            "life:1ms 1 1 0",
            "life:1ms x 1 0 a",
            "life:1ms 1 -1 0 a",
            "life:1ms 1 1 nan a",
            "life:1ms 1 1 0 ",
        ] {
            assert!(
                parse("x", format!("{h}\n{bad}\n").as_bytes()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn writes_and_reads_back() {
        let mut s = Samples {
            interval: Some(65536),
            ..Samples::default()
        };
        s.add(
            "live",
            "main;f (a.c:1);operator new(unsigned long) 12",
            Stat {
                samples: Some(3),
                variance: 1.5e12,
            },
        );
        s.add(
            "peak",
            "main;g",
            Stat {
                samples: None,
                variance: 0.0,
            },
        );
        s.add_size(
            "main;g",
            32,
            Size {
                samples: 100,
                bytes: 4800.0,
            },
        );
        s.add_size(
            "main;g",
            65536,
            Size {
                samples: 10,
                bytes: 1e6,
            },
        );
        let mut text = Vec::new();
        s.write(&mut text).unwrap();
        let t = String::from_utf8(text.clone()).unwrap();
        assert!(
            t.ends_with("size:32 100 4800 main;g\nsize:65536 10 1000000 main;g\n"),
            "{t}"
        );
        let back = parse("x", &text).unwrap();
        assert_eq!(back, s);
        assert!(is_v2(&text));
        assert!(!is_v2(b"main;f 12\n"));
    }

    /// Merging adds counts and variances; a count not kept stays unknown.
    #[test]
    fn adding_sums_counts_and_variances() {
        let mut s = Samples::default();
        let st = |n, v| Stat {
            samples: n,
            variance: v,
        };
        s.add("live", "a", st(Some(2), 10.0));
        s.add("live", "a", st(Some(3), 5.0));
        s.add("alloc", "a", st(None, 1.0));
        s.add("alloc", "a", st(None, 2.0));
        assert_eq!(s.view("live").unwrap()["a"], st(Some(5), 15.0));
        assert_eq!(s.view("alloc").unwrap()["a"], st(None, 3.0));
    }

    #[test]
    fn refuses_bad_lines_and_skips_unknown_views() {
        let h = HEADER;
        assert!(parse("x", format!("{h}\nlive x 1 a\n").as_bytes()).is_err());
        assert!(parse("x", format!("{h}\nlive 1 -1 a\n").as_bytes()).is_err());
        assert!(parse("x", format!("{h}\nlive 1 1\n").as_bytes()).is_err());
        let s = parse("x", format!("{h}\nlater 1 1 a\nlive 1 2 b c\n").as_bytes()).unwrap();
        assert_eq!(s.views.len(), 1);
        assert_eq!(s.view("live").unwrap()["b c"].variance, 2.0);
        assert!(s.sizes.is_empty());
        // Size classes are powers of two (or 0) with a count.
        assert!(parse("x", format!("{h}\nsize:48 1 48 a\n").as_bytes()).is_err());
        assert!(parse("x", format!("{h}\nsize:32 - 48 a\n").as_bytes()).is_err());
        let s = parse(
            "x",
            format!("{h}\nsize:0 3 0 a\nsize:32 2 96 a\n").as_bytes(),
        )
        .unwrap();
        assert_eq!(s.sizes["a"][&0].samples, 3);
        assert_eq!(s.sizes["a"][&32].bytes, 96.0);
        assert!(s.views.is_empty());
    }

    #[test]
    fn size_classes_are_powers_of_two_below() {
        let c: Vec<u64> = [0, 1, 2, 3, 47, 48, 63, 64, 100000, u64::MAX]
            .map(size_class)
            .to_vec();
        assert_eq!(c, [0, 1, 2, 2, 32, 32, 32, 64, 65536, 1 << 63]);
    }
}

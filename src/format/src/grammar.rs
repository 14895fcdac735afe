//! The grammars of `HEAPLIVE_*` values. Allocation-free and panic-free: the
//! library parses its environment with them before malloc works. Each
//! `*_setting` function gives the reason text the library's warning and the
//! command's usage error both show.

/// `v` without leading and trailing ASCII white space.
pub fn trim(v: &[u8]) -> &[u8] {
    let s = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let e = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(s, |i| i + 1);
    v.get(s..e).unwrap_or(&[])
}

/// A decimal whole number (no sign).
pub fn parse_u64(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(n)
}

/// Splits `v` (trimmed) into its leading digits and the rest.
fn digits_and_unit(v: &[u8]) -> (&[u8], &[u8]) {
    let v = trim(v);
    let digits = v
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(v.len());
    v.split_at(digits)
}

fn eq_any(s: &[u8], options: &[&[u8]]) -> bool {
    options.iter().any(|o| s.eq_ignore_ascii_case(o))
}

/// `123`, `64K`, `64k`, `64KB`, `64KiB`, `4M`, `2G` (binary multiples).
pub fn parse_size(v: &[u8]) -> Option<u64> {
    let (digits, unit) = digits_and_unit(v);
    let n = parse_u64(digits)?;
    let mult: u64 = match unit {
        b"" | b"b" | b"B" => 1,
        s if eq_any(s, &[b"k", b"kb", b"kib"]) => 1 << 10,
        s if eq_any(s, &[b"m", b"mb", b"mib"]) => 1 << 20,
        s if eq_any(s, &[b"g", b"gb", b"gib"]) => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `1`, `yes`, `true`, `on` / `0`, `no`, `false`, `off`.
pub fn parse_bool(v: &[u8]) -> Option<bool> {
    let v = trim(v);
    if eq_any(v, &[b"1", b"yes", b"true", b"on"]) {
        Some(true)
    } else if eq_any(v, &[b"0", b"no", b"false", b"off"]) {
        Some(false)
    } else {
        None
    }
}

/// `30` (seconds), `30s`, `500ms`, `5m`, `1h`; `0` means off. Milliseconds.
pub fn parse_duration_ms(v: &[u8]) -> Option<u64> {
    let (digits, unit) = digits_and_unit(v);
    let n = parse_u64(digits)?;
    let mult = match unit {
        b"" | b"s" | b"S" => 1000,
        b"ms" => 1,
        b"m" | b"M" | b"min" => 60_000,
        b"h" | b"H" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// A non-negative decimal like `2`, `1.5`.
pub fn parse_float(v: &[u8]) -> Option<f64> {
    let s = core::str::from_utf8(trim(v)).ok()?;
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Timeouts of the command: seconds, `30`, `30s`, `5m`, `1h`, fractions
/// allowed (`0.5`). Seconds.
pub fn parse_seconds(v: &[u8]) -> Option<f64> {
    let v = trim(v);
    let (num, mult) = match v.split_last()? {
        (b's', rest) => (rest, 1.0),
        (b'm', rest) => (rest, 60.0),
        (b'h', rest) => (rest, 3600.0),
        _ => (v, 1.0),
    };
    parse_float(num).map(|x| x * mult)
}

/// How stacks are captured (`HEAPLIVE_UNWIND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwind {
    /// heaplive's cached unwinder, libgcc where it cannot proceed.
    Cached,
    /// libgcc's `_Unwind_Backtrace` for every frame.
    Libgcc,
    /// Both, compared on every capture; differences are reported.
    Check,
}

/// `HEAPLIVE_UNWIND`: `cached`, `libgcc` or `check`.
pub fn unwind(v: &[u8]) -> Result<Unwind, &'static str> {
    match v {
        b"cached" => Ok(Unwind::Cached),
        b"libgcc" => Ok(Unwind::Libgcc),
        b"check" => Ok(Unwind::Check),
        _ => Err("is not one of cached, libgcc, check"),
    }
}

/// Which files a dump writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Formats {
    pub folded: bool,
    pub pprof: bool,
}

/// The words of a [`parse_flags`] list for the flags of `$t` named: each
/// word is its flag's name.
macro_rules! flag_words {
    ($t:ty: $($flag:ident),*) => {
        &[$((stringify!($flag).as_bytes(), |f: &mut $t| f.$flag = true)),*]
    };
}

/// `folded`, `pprof`, `folded,pprof` (either order).
pub fn parse_format(v: &[u8]) -> Option<Formats> {
    parse_flags(v, flag_words!(Formats: folded, pprof))
}

/// A word of a [`parse_flags`] list, and what it sets.
type FlagWord<T> = (&'static [u8], fn(&mut T));

/// A comma-separated list of the words of `words` (any order, any case,
/// white space around each ignored): `T`'s default with the flag of each
/// word in the list set; None for any other word.
fn parse_flags<T: Default>(v: &[u8], words: &[FlagWord<T>]) -> Option<T> {
    let mut f = T::default();
    for part in trim(v).split(|&b| b == b',') {
        let part = trim(part);
        let (_, set) = words.iter().find(|(w, _)| part.eq_ignore_ascii_case(w))?;
        set(&mut f);
    }
    Some(f)
}

// ---------------------------------------------------------------------------
// One function per setting: the value, or the reason it is refused.

/// `HEAPLIVE_SAMPLE_INTERVAL`.
pub fn sample_interval(v: &[u8]) -> Result<u64, &'static str> {
    parse_size(v)
        .filter(|&n| (1..=MAX_SAMPLE_INTERVAL).contains(&n))
        .ok_or("is not a size from 1 byte to 1024G (examples: 1, 64K, 512K, 4M)")
}

/// Largest `HEAPLIVE_SAMPLE_INTERVAL`: 1 TiB.
pub const MAX_SAMPLE_INTERVAL: u64 = 1 << 40;
/// Longest `HEAPLIVE_DUMP_EVERY`: 365 days, in milliseconds (a timer of
/// `u64::MAX` ms would wrap when added to the clock).
pub const MAX_DUMP_EVERY_MS: u64 = 365 * 24 * 3_600_000;
/// Largest `HEAPLIVE_WARN_BYTES`: 2^60 bytes (1024 PiB); the check counts
/// in signed 64-bit numbers.
pub const MAX_WARN_BYTES: u64 = 1 << 60;
/// Largest `HEAPLIVE_WARN_BLOCKS`: 10^15 (the check counts thousandths
/// of a block in signed 64-bit numbers).
pub const MAX_WARN_BLOCKS: u64 = 1_000_000_000_000_000;

/// `HEAPLIVE_SEED`.
pub fn seed(v: &[u8]) -> Result<u64, &'static str> {
    parse_u64(v).ok_or("is not a whole number")
}

/// `HEAPLIVE_DUMP_AT_EXIT`, `HEAPLIVE_LINES`, `HEAPLIVE_DEMANGLE`.
pub fn boolean(v: &[u8]) -> Result<bool, &'static str> {
    parse_bool(v).ok_or("is not 0 or 1")
}

/// `HEAPLIVE_DUMP_EVERY`, milliseconds; 0 = off.
pub fn dump_every(v: &[u8]) -> Result<u64, &'static str> {
    parse_duration_ms(v)
        .filter(|&ms| ms <= MAX_DUMP_EVERY_MS)
        .ok_or("is not a duration from 0 (off) to 365 days (examples: 30, 30s, 5m, 1h)")
}

/// `HEAPLIVE_FORMAT`.
pub fn format(v: &[u8]) -> Result<Formats, &'static str> {
    parse_format(v).ok_or("is not one of folded, pprof, folded,pprof")
}

/// Which views a dump writes (`HEAPLIVE_VIEWS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Views {
    /// Live bytes per stack now: `NAME.folded`.
    pub live: bool,
    /// Bytes allocated per stack since start: `NAME.alloc.folded`.
    pub alloc: bool,
    /// Live bytes per stack at the highest peak: `NAME.peak.folded`
    /// (at exit, when the peak was above the exit total).
    pub peak: bool,
    /// The number of live samples per stack, for `heaplive top`'s error
    /// bars: `NAME.samples.folded` (sampled mode only).
    pub samples: bool,
    /// The variance of each stack's estimate beside each view written, for
    /// `heaplive top`'s 95% intervals from the samples' own weights:
    /// `NAME.variance.folded`, `NAME.alloc.variance.folded`,
    /// `NAME.peak.variance.folded` (sampled mode only; off by default:
    /// without them the intervals come from the sample counts).
    pub variance: bool,
    /// Lifetimes of the sampled blocks freed: `NAME.temporary.folded`
    /// (bytes of temporary allocations per stack: freed before their
    /// thread's next allocation) and the pprof sample types
    /// `freed_1ms_space`, `freed_1s_space`, `freed_later_space`,
    /// `temporary_space`.
    pub temporary: bool,
    /// The executable's frames, `NAME.app.txt` (`format::app_frames`),
    /// for `heaplive top --app`.
    pub app: bool,
    /// Size rows in the samples file (`format::samples`: per stack, the
    /// live samples by log2 size class) in exact mode too, where no
    /// samples file is written otherwise (a sampled-mode dump's samples
    /// file always has them, a PHP request-peak dump's excepted).
    pub sizes: bool,
}

/// `live`, `alloc`, `peak`, `samples`, `variance`, `temporary`, `app`,
/// `sizes`, comma-separated, in any order.
pub fn parse_views(v: &[u8]) -> Option<Views> {
    parse_flags(
        v,
        flag_words!(Views: live, alloc, peak, samples, variance, temporary, app, sizes),
    )
}

/// `HEAPLIVE_VIEWS`.
pub fn views(v: &[u8]) -> Result<Views, &'static str> {
    parse_views(v)
        .ok_or("is not a list of live, alloc, peak, samples, variance, temporary, app, sizes (example: live,alloc,peak)")
}

/// `HEAPLIVE_PEAK_GROWTH`; 0 = off, else a factor above 1.
pub fn peak_growth(v: &[u8]) -> Result<f64, &'static str> {
    parse_float(v)
        .filter(|&g| g == 0.0 || g > 1.0)
        .ok_or("is not 0 (off) or a number above 1 (examples: 1.5, 2)")
}

/// `HEAPLIVE_WARN_BYTES`; 0 = off.
pub fn warn_bytes(v: &[u8]) -> Result<u64, &'static str> {
    parse_size(v)
        .filter(|&n| n <= MAX_WARN_BYTES)
        .ok_or("is not a size from 0 (off) to 1073741824G (examples: 64M, 1G)")
}

/// `HEAPLIVE_WARN_BLOCKS`; 0 = off.
pub fn warn_blocks(v: &[u8]) -> Result<u64, &'static str> {
    parse_u64(v)
        .filter(|&n| n <= MAX_WARN_BLOCKS)
        .ok_or("is not a whole number from 0 (off) to 1000000000000000")
}

/// `HEAPLIVE_WARN_GROWTH`.
pub fn warn_growth(v: &[u8]) -> Result<f64, &'static str> {
    parse_float(v)
        .filter(|&g| g > 1.0)
        .ok_or("is not a number above 1 (examples: 1.5, 2)")
}

/// `HEAPLIVE_PHP`: what PHP mode does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhpMode {
    /// In a PHP process: ZendMM samples and PHP frames, each where it is safe.
    Auto,
    /// PHP frames on every sample, but no ZendMM hooks.
    Native,
    /// Nothing PHP-specific.
    Off,
}

/// `HEAPLIVE_PHP`: `auto`, `native`, `off` (also `1`/`0`, `yes`/`no`...).
pub fn php_mode(v: &[u8]) -> Result<PhpMode, &'static str> {
    const WHY: &str = "is not one of auto, native, off";
    let t = trim(v);
    if t.eq_ignore_ascii_case(b"auto") {
        Ok(PhpMode::Auto)
    } else if t.eq_ignore_ascii_case(b"native") {
        Ok(PhpMode::Native)
    } else {
        match parse_bool(t) {
            Some(true) => Ok(PhpMode::Auto),
            Some(false) => Ok(PhpMode::Off),
            None => Err(WHY),
        }
    }
}

/// `HEAPLIVE_LOG`, `HEAPLIVE_DEBUG_DIRS`: any text up to 4096 bytes.
pub fn path(v: &[u8]) -> Result<(), &'static str> {
    if v.len() > 4096 {
        Err("is longer than 4096 bytes")
    } else {
        Ok(())
    }
}

/// The byte a poisoned new block is filled with (`HEAPLIVE_POISON=alloc`).
pub const POISON_ALLOC_BYTE: u8 = 0xa5;
/// The byte a poisoned freed block is filled with (`HEAPLIVE_POISON=free`).
pub const POISON_FREE_BYTE: u8 = 0xdd;

/// What `HEAPLIVE_POISON` fills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Poison {
    pub alloc: bool,
    pub free: bool,
}

/// `HEAPLIVE_POISON`: `alloc`, `free` or `alloc,free` (either order), or
/// `off` (`0`, `none`).
pub fn poison(v: &[u8]) -> Result<Poison, &'static str> {
    const WHY: &str = "is not off or a list of alloc, free (example: alloc,free)";
    let v = trim(v);
    if eq_any(v, &[b"off", b"0", b"none"]) {
        return Ok(Poison::default());
    }
    parse_flags(v, flag_words!(Poison: alloc, free)).ok_or(WHY)
}

/// The longest `HEAPLIVE_PROGRAMS` value (the library keeps it in a fixed
/// buffer).
pub const MAX_PROGRAMS: usize = 4096;

/// `HEAPLIVE_PROGRAMS`: comma-separated glob patterns on the program name
/// (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`); white space around a pattern is
/// ignored. Refused: an empty list or pattern, a `/`, an unclosed `[`, more
/// than 4096 bytes.
pub fn programs(v: &[u8]) -> Result<(), &'static str> {
    if v.len() > MAX_PROGRAMS {
        return Err("is longer than 4096 bytes");
    }
    for p in v.split(|&b| b == b',') {
        let p = trim(p);
        if p.is_empty() {
            return Err("has an empty pattern (example: php-fpm*,python3)");
        }
        if p.contains(&b'/') {
            return Err("has a '/': patterns match the program name, not its path");
        }
        classes_closed(p)?;
    }
    Ok(())
}

/// Every `[` of the glob pattern `p` opens a class that a `]` closes.
fn classes_closed(p: &[u8]) -> Result<(), &'static str> {
    let mut i = 0;
    while i < p.len() {
        if p[i] == b'[' {
            match class_end(p, i) {
                Some(e) => i = e,
                None => return Err("has a '[' without its ']'"),
            }
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// `HEAPLIVE_PHP_LIBRARY`'s default: Composer's `vendor/` directories and
/// the system's PHP library directories (Debian's php-* packages).
pub const PHP_LIBRARY_DEFAULT: &str = "*/vendor/*,/usr/share/php/*,/usr/lib/php/*";

/// `HEAPLIVE_PHP_LIBRARY`: comma-separated glob patterns of file paths
/// (`*` matches any run of bytes, `/` included), at most 1024 bytes; an
/// empty value: no file is a library's.
pub fn php_library(v: &[u8]) -> Result<(), &'static str> {
    if v.len() > 1024 {
        return Err("is longer than 1024 bytes");
    }
    for p in v.split(|&b| b == b',') {
        let p = trim(p);
        classes_closed(p)?;
    }
    Ok(())
}

/// Whether the path `file` matches a pattern of a `HEAPLIVE_PHP_LIBRARY`
/// value (checked with [`php_library`]).
pub fn php_library_match(v: &[u8], file: &[u8]) -> bool {
    programs_match(v, file)
}

/// Whether `name` matches one of the patterns of a `HEAPLIVE_PROGRAMS` value
/// (checked with [`programs`]; an unchecked bad pattern matches nothing).
pub fn programs_match(v: &[u8], name: &[u8]) -> bool {
    v.split(|&b| b == b',')
        .map(trim)
        .any(|p| !p.is_empty() && glob_match(p, name))
}

/// The index just past the `]` closing the class that starts at `p[i]`
/// (`[`); a `]` right after `[` or `[!` is a member.
fn class_end(p: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if p.get(j) == Some(&b'!') {
        j += 1;
    }
    if p.get(j) == Some(&b']') {
        j += 1;
    }
    while j < p.len() {
        if p[j] == b']' {
            return Some(j + 1);
        }
        j += 1;
    }
    None
}

/// Whether `c` is in the class `p[i..end]` (`[...]`).
fn class_has(p: &[u8], i: usize, end: usize, c: u8) -> bool {
    let mut j = i + 1;
    let negate = p.get(j) == Some(&b'!');
    if negate {
        j += 1;
    }
    // Up to the closing ']' (a ']' right after the opening is a member).
    let last = end - 1;
    let mut found = false;
    while j < last {
        let lo = p[j];
        if j + 2 < last && p[j + 1] == b'-' {
            found |= lo <= c && c <= p[j + 2];
            j += 3;
        } else {
            found |= lo == c;
            j += 1;
        }
    }
    found != negate
}

/// Glob matching of a whole name: `*` any run of bytes, `?` one byte,
/// `[...]` one byte of a class; every other byte itself. Linear
/// backtracking over the last `*` only: O(pattern x name), never
/// exponential, no recursion, no allocation. The shapes of the default
/// patterns (`*/vendor/*`, `/usr/share/php/*`) and plain names take a
/// shorter way (`glob_simple`): a PHP sample tests each new file name
/// against `HEAPLIVE_PHP_LIBRARY`.
pub fn glob_match(p: &[u8], name: &[u8]) -> bool {
    if let Some(m) = glob_simple(p, name) {
        return m;
    }
    glob_general(p, name)
}

/// Bytes with no `*`, `?` or `[`: each matches itself.
fn literal(s: &[u8]) -> bool {
    !s.iter().any(|&b| matches!(b, b'*' | b'?' | b'['))
}

/// `glob_match` of a literal (`name` itself), a literal then `*` (a prefix)
/// or `*`, a literal, `*` (a part of `name`); None for other patterns.
fn glob_simple(p: &[u8], name: &[u8]) -> Option<bool> {
    match p {
        [b'*', mid @ .., b'*'] if literal(mid) => Some(contains(name, mid)),
        [pre @ .., b'*'] if literal(pre) => Some(name.starts_with(pre)),
        _ if literal(p) => Some(p == name),
        _ => None,
    }
}

/// Whether `part` stands anywhere in `name`.
fn contains(name: &[u8], part: &[u8]) -> bool {
    let Some((&first, rest)) = part.split_first() else {
        return true;
    };
    if name.len() < part.len() {
        return false;
    }
    let last_start = name.len() - part.len();
    let mut i = 0;
    while i <= last_start {
        match name[i..=last_start].iter().position(|&b| b == first) {
            None => return false,
            Some(k) => {
                let at = i + k;
                if &name[at + 1..at + part.len()] == rest {
                    return true;
                }
                i = at + 1;
            }
        }
    }
    false
}

/// `glob_match` of any pattern.
fn glob_general(p: &[u8], name: &[u8]) -> bool {
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < name.len() {
        let c = name[ni];
        let step = match p.get(pi) {
            Some(b'*') => {
                star = Some((pi + 1, ni));
                pi += 1;
                continue;
            }
            Some(b'?') => Some(pi + 1),
            Some(b'[') => match class_end(p, pi) {
                Some(e) if class_has(p, pi, e, c) => Some(e),
                Some(_) => None,
                None => (c == b'[').then_some(pi + 1),
            },
            Some(&b) => (b == c).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ni += 1;
            }
            (None, Some((sp, sn))) => {
                // Let the last `*` take one more byte and retry.
                star = Some((sp, sn + 1));
                pi = sp;
                ni = sn + 1;
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_globs_agree_with_the_general_matcher() {
        let patterns: &[&[u8]] = &[
            b"",
            b"*",
            b"**",
            b"*/vendor/*",
            b"/usr/share/php/*",
            b"abc",
            b"*a*",
            b"*ab*",
            b"a*",
            b"*abc*",
            b"*/vendor*",
            b"ab",
        ];
        let names: &[&[u8]] = &[
            b"",
            b"a",
            b"ab",
            b"abc",
            b"aab",
            b"xabcx",
            b"ba",
            b"/srv/app/vendor/twig/src/Env.php",
            b"/srv/app/vendorx/y.php",
            b"/usr/share/php/PhpParser/Lexer.php",
            b"/usr/share/php",
            b"/vendor/",
            b"vendor/",
            b"x/vendor",
            b"abab",
            b"aaab",
        ];
        for &p in patterns {
            for &n in names {
                assert_eq!(
                    glob_match(p, n),
                    glob_general(p, n),
                    "{:?} ~ {:?}",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(n)
                );
                if let Some(m) = glob_simple(p, n) {
                    assert_eq!(m, glob_general(p, n));
                } else {
                    panic!("{:?} should be simple", String::from_utf8_lossy(p));
                }
            }
        }
        assert_eq!(glob_simple(b"*.p?p", b"a.php"), None);
        assert_eq!(glob_simple(b"a*b", b"ab"), None);
        assert_eq!(glob_simple(b"***", b"ab"), None);
        assert_eq!(glob_simple(b"*[ab]*", b"a"), None);
    }

    #[test]
    fn poison_values() {
        assert_eq!(poison(b"off"), Ok(Poison::default()));
        assert_eq!(
            poison(b"alloc"),
            Ok(Poison {
                alloc: true,
                free: false
            })
        );
        assert_eq!(
            poison(b" free , alloc"),
            Ok(Poison {
                alloc: true,
                free: true
            })
        );
        assert!(poison(b"").is_err());
        assert!(poison(b"alloc,").is_err());
        assert!(poison(b"perturb").is_err());
    }

    #[test]
    fn program_globs() {
        assert_eq!(programs(b"php-fpm*, python3"), Ok(()));
        assert!(programs(b"").is_err());
        assert!(programs(b"a,,b").is_err());
        assert!(programs(b"/usr/bin/php").is_err());
        assert!(programs(b"php[78").is_err());
        assert!(programs(&[b'a'; 4097]).is_err());
        let m = |p: &[u8], n: &[u8]| programs_match(p, n);
        assert!(m(b"php-fpm*", b"php-fpm8.2"));
        assert!(m(b"php-fpm*", b"php-fpm"));
        assert!(!m(b"php-fpm*", b"php"));
        assert!(!m(b"php-fpm*", b"sh"));
        assert!(m(b"sh, php-fpm*", b"sh"));
        assert!(!m(b"sh", b"bash"));
        assert!(m(b"*sh", b"bash"));
        assert!(m(b"py?hon[0-9]", b"python3"));
        assert!(!m(b"python[!3]", b"python3"));
        assert!(m(b"python[!3]", b"python2"));
        assert!(m(b"[]x]", b"]"));
        assert!(m(b"a*b*c", b"aXbYbZc"));
        assert!(!m(b"a*b*c", b"aXbYbZ"));
        assert!(m(b"*", b""));
        assert!(!m(b"?", b""));
        // Issue 14 item 13's lesson: many stars stay linear.
        let many = [b'*'; 40].iter().chain(b"x").copied().collect::<Vec<u8>>();
        assert!(!m(&many, &[b'a'; 200]));
    }

    #[test]
    fn ranges() {
        // Issue 14 item 12: values that would wrap or overflow are refused.
        assert!(dump_every(b"5124095576h").is_err());
        assert!(dump_every(b"18446744073709ms").is_err());
        assert_eq!(dump_every(b"365d").ok(), None);
        assert_eq!(dump_every(b"8760h"), Ok(MAX_DUMP_EVERY_MS));
        assert!(dump_every(b"8761h").is_err());
        assert!(warn_bytes(b"9223372036854775808").is_err());
        assert_eq!(warn_bytes(b"1073741824G"), Ok(MAX_WARN_BYTES));
        assert!(warn_bytes(b"1073741825G").is_err());
        assert!(warn_blocks(b"9223372036854775808").is_err());
        assert!(warn_blocks(b"1000000000000001").is_err());
        assert_eq!(warn_blocks(b"1000000000000000"), Ok(MAX_WARN_BLOCKS));
        assert!(sample_interval(b"1025G").is_err());
        assert_eq!(sample_interval(b"1024G"), Ok(MAX_SAMPLE_INTERVAL));
    }

    #[test]
    fn views_and_growth() {
        let v = views(b"live, alloc").unwrap();
        assert!(v.live && v.alloc && !v.peak);
        assert!(views(b"peak").unwrap().peak);
        assert!(views(b"live,temporary").unwrap().temporary);
        assert!(views(b"live,sizes").unwrap().sizes);
        assert!(!views(b"live,samples").unwrap().sizes);
        let v = views(b"live,samples,variance").unwrap();
        assert!(v.samples && v.variance && !v.alloc);
        assert!(!views(b"live,samples").unwrap().variance);
        assert!(views(b"live,heap").is_err());
        assert_eq!(peak_growth(b"0"), Ok(0.0));
        assert_eq!(peak_growth(b"1.5"), Ok(1.5));
        assert!(peak_growth(b"1").is_err());
        assert!(peak_growth(b"0.5").is_err());
    }

    #[test]
    fn php_modes() {
        assert_eq!(php_mode(b"auto"), Ok(PhpMode::Auto));
        assert_eq!(php_mode(b" Native "), Ok(PhpMode::Native));
        assert_eq!(php_mode(b"off"), Ok(PhpMode::Off));
        assert_eq!(php_mode(b"0"), Ok(PhpMode::Off));
        assert!(php_mode(b"zend").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size(b"1"), Some(1));
        assert_eq!(parse_size(b"524288"), Some(524288));
        assert_eq!(parse_size(b"512K"), Some(512 * 1024));
        assert_eq!(parse_size(b"512k"), Some(512 * 1024));
        assert_eq!(parse_size(b"4MiB"), Some(4 << 20));
        assert_eq!(parse_size(b" 2G "), Some(2 << 30));
        assert_eq!(parse_size(b"2GB"), Some(2 << 30));
        assert_eq!(parse_size(b"3b"), Some(3));
        assert_eq!(parse_size(b""), None);
        assert_eq!(parse_size(b"K"), None);
        assert_eq!(parse_size(b"-1"), None);
        assert_eq!(parse_size(b"1.5M"), None);
        assert_eq!(parse_size(b"12X"), None);
        assert_eq!(parse_size(b"99999999999999999999"), None);
        assert_eq!(parse_size(b"99999999999G"), None);
        assert!(sample_interval(b"0").is_err());
        assert_eq!(warn_bytes(b"0"), Ok(0));
    }

    #[test]
    fn durations() {
        // (value, HEAPLIVE_* durations in ms, the command's timeouts in s)
        let cases: &[(&[u8], Option<u64>, Option<f64>)] = &[
            (b"30", Some(30_000), Some(30.0)),
            (b"30s", Some(30_000), Some(30.0)),
            (b"5m", Some(300_000), Some(300.0)),
            (b"1h", Some(3_600_000), Some(3600.0)),
            (b"250ms", Some(250), None),
            (b"0", Some(0), Some(0.0)),
            (b"0.5", None, Some(0.5)),
            (b"2.5s", None, Some(2.5)),
            (b"soon", None, None),
            (b"5d", None, None),
            (b"x", None, None),
            (b"", None, None),
            (b"s", None, None),
        ];
        for &(v, ms, secs) in cases {
            let v_text = String::from_utf8_lossy(v);
            assert_eq!(parse_duration_ms(v), ms, "{v_text:?}");
            assert_eq!(parse_seconds(v), secs, "{v_text:?}");
        }
    }

    #[test]
    fn bools_floats_formats() {
        assert_eq!(parse_bool(b"1"), Some(true));
        assert_eq!(parse_bool(b"off"), Some(false));
        assert_eq!(parse_bool(b"maybe"), None);
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"2"), Some(2.0));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b"-2"), None);
        let f = |folded, pprof| Some(Formats { folded, pprof });
        assert_eq!(parse_format(b"folded"), f(true, false));
        assert_eq!(parse_format(b"pprof"), f(false, true));
        assert_eq!(parse_format(b"folded,pprof"), f(true, true));
        assert_eq!(parse_format(b"pprof, folded"), f(true, true));
        assert_eq!(parse_format(b"svg"), None);
        assert!(warn_growth(b"1").is_err());
        assert_eq!(warn_growth(b"1.5"), Ok(1.5));
    }

    #[test]
    fn never_panics_on_odd_bytes() {
        for v in [
            &b""[..],
            b" ",
            b"\xff",
            b"1\xff",
            b"9999999999999999999999ms",
            b"\x00",
        ] {
            let _ = (sample_interval(v), dump_every(v), format(v), warn_growth(v));
            let _ = (parse_seconds(v), boolean(v), seed(v));
        }
    }
}

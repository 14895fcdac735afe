//! Every `HEAPLIVE_*` variable: name, default, parser and meaning.
//!
//! Read once, at the first allocation in the process (before main, before
//! php-fpm's workers run `clearenv()`), without allocating: values are
//! copied into fixed buffers. A bad value gives one stderr line naming the
//! variable, the value and the default used.

use crate::hot::sys::StackBuf;
use core::cell::UnsafeCell;
use core::fmt::Write;

pub const DEFAULT_INTERVAL: u64 = 512 * 1024;
pub const DEFAULT_OUTPUT: &str = "heaplive.%e.%p.%n.folded";
pub const DEFAULT_WARN_BYTES: u64 = 256 << 20;
pub const DEFAULT_WARN_GROWTH: f64 = 2.0;

/// A string in a fixed buffer (no allocation). Longer values are refused.
pub struct FixedStr<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> FixedStr<N> {
    pub const fn new() -> Self {
        FixedStr {
            buf: [0; N],
            len: 0,
        }
    }
    pub fn set(&mut self, s: &[u8]) -> bool {
        if s.len() > N {
            return false;
        }
        self.buf[..s.len()].copy_from_slice(s);
        self.len = s.len();
        true
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

pub struct Config {
    /// HEAPLIVE_SAMPLE_INTERVAL: mean bytes between samples; 1 = exact mode.
    pub interval: u64,
    /// HEAPLIVE_SEED: seed of the sampler's random gaps; 0 = from the clock.
    pub seed: u64,
    /// HEAPLIVE_OUTPUT: the path template of dump files.
    pub output: FixedStr<4096>,
    /// HEAPLIVE_DUMP_AT_EXIT: write a dump when the process exits.
    pub dump_at_exit: bool,
    /// HEAPLIVE_SIGNAL: the dump signal; 0 = none.
    pub signal: i32,
    /// HEAPLIVE_DUMP_EVERY: periodic dumps, milliseconds; 0 = off.
    pub dump_every_ms: u64,
    /// HEAPLIVE_FORMAT: which files a dump writes.
    pub folded: bool,
    pub pprof: bool,
    /// HEAPLIVE_WARN_BYTES / _BLOCKS / _GROWTH: leak warnings.
    pub warn_bytes: u64,
    pub warn_blocks: u64,
    pub warn_growth: f64,
    /// HEAPLIVE_LOG: file for heaplive's own lines; empty = stderr.
    pub log: FixedStr<4096>,
    /// HEAPLIVE_DEBUG_DIRS: extra directories of separate debug files.
    pub debug_dirs: FixedStr<4096>,
    /// HEAPLIVE_LINES: append ` (file:line)` to frames.
    pub lines: bool,
    /// HEAPLIVE_DEMANGLE: demangle C++ and Rust names.
    pub demangle: bool,
    /// Captured at load: the start directory, $TMPDIR, the program's name.
    pub start_dir: FixedStr<4096>,
    pub tmpdir: FixedStr<4096>,
    pub exe: FixedStr<256>,
}

impl Config {
    pub const fn defaults() -> Config {
        Config {
            interval: DEFAULT_INTERVAL,
            seed: 0,
            output: FixedStr::new(),
            dump_at_exit: true,
            signal: libc::SIGUSR2,
            dump_every_ms: 0,
            folded: true,
            pprof: false,
            warn_bytes: DEFAULT_WARN_BYTES,
            warn_blocks: 0,
            warn_growth: DEFAULT_WARN_GROWTH,
            log: FixedStr::new(),
            debug_dirs: FixedStr::new(),
            lines: false,
            demangle: true,
            start_dir: FixedStr::new(),
            tmpdir: FixedStr::new(),
            exe: FixedStr::new(),
        }
    }
    pub fn output_template(&self) -> &str {
        if self.output.is_empty() {
            DEFAULT_OUTPUT
        } else {
            self.output.as_str()
        }
    }
}

struct Cell(UnsafeCell<Config>);
// SAFETY: written only by `load`, which runs once on one thread before the
// resolver publishes RESOLVED (Release); every reader runs after observing
// it (Acquire) or on the loading thread itself.
unsafe impl Sync for Cell {}
static CONFIG: Cell = Cell(UnsafeCell::new(Config::defaults()));

pub fn get() -> &'static Config {
    // SAFETY: see `Cell`.
    unsafe { &*CONFIG.0.get() }
}

fn env(name: &[u8]) -> Option<&'static [u8]> {
    // SAFETY: name is NUL-terminated; getenv does not allocate. The value
    // is copied or parsed before anything can change the environment.
    let p = unsafe { libc::getenv(name.as_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    Some(unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
}

/// One line on stderr: `heaplive: <variable>='<value>' <why>; using the default <default>`.
pub fn warn_bad(name: &str, value: &[u8], why: &str, default: &str) {
    let mut b = StackBuf::<512>::new();
    let _ = write!(b, "heaplive: {}='", name);
    b.push_bytes(&value[..value.len().min(200)]);
    let _ = writeln!(b, "' {}; using the default {}", why, default);
    crate::hot::sys::write_all(2, b.as_bytes());
}

/// Reads every variable. Called once by the resolver.
pub fn load() {
    // SAFETY: see `Cell`: we are the one loading thread.
    let c = unsafe { &mut *CONFIG.0.get() };

    load_var(
        b"HEAPLIVE_SAMPLE_INTERVAL\0",
        &mut c.interval,
        "512K",
        |v| {
            parse_size(v)
                .filter(|&n| n >= 1)
                .ok_or("is not a size of at least 1 byte (examples: 1, 64K, 512K, 4M)")
        },
    );
    load_var(
        b"HEAPLIVE_SEED\0",
        &mut c.seed,
        "0 (seed from the clock)",
        |v| parse_u64(v).ok_or("is not a whole number"),
    );
    if let Some(v) = env(b"HEAPLIVE_OUTPUT\0")
        && (v.is_empty() || !c.output.set(v))
    {
        warn_bad(
            "HEAPLIVE_OUTPUT",
            v,
            "is empty or longer than 4096 bytes",
            DEFAULT_OUTPUT,
        );
    }
    load_var(
        b"HEAPLIVE_DUMP_AT_EXIT\0",
        &mut c.dump_at_exit,
        "1",
        bool_value,
    );
    load_var(b"HEAPLIVE_SIGNAL\0", &mut c.signal, "USR2", parse_signal);
    load_var(
        b"HEAPLIVE_DUMP_EVERY\0",
        &mut c.dump_every_ms,
        "0 (off)",
        |v| parse_duration_ms(v).ok_or("is not a duration (examples: 30, 30s, 5m, 1h; 0 = off)"),
    );
    let mut formats = (c.folded, c.pprof);
    load_var(b"HEAPLIVE_FORMAT\0", &mut formats, "folded", |v| {
        parse_format(v).ok_or("is not one of folded, pprof, folded,pprof")
    });
    (c.folded, c.pprof) = formats;
    load_var(b"HEAPLIVE_WARN_BYTES\0", &mut c.warn_bytes, "256M", |v| {
        parse_size(v).ok_or("is not a size (examples: 0 = off, 64M, 1G)")
    });
    load_var(
        b"HEAPLIVE_WARN_BLOCKS\0",
        &mut c.warn_blocks,
        "0 (off)",
        |v| parse_u64(v).ok_or("is not a whole number (0 = off)"),
    );
    load_var(b"HEAPLIVE_WARN_GROWTH\0", &mut c.warn_growth, "2", |v| {
        parse_float(v)
            .filter(|&g| g > 1.0)
            .ok_or("is not a number above 1 (examples: 1.5, 2)")
    });
    for (name, slot, default) in [
        (&b"HEAPLIVE_LOG\0"[..], &mut c.log, "stderr"),
        (
            &b"HEAPLIVE_DEBUG_DIRS\0"[..],
            &mut c.debug_dirs,
            "/usr/lib/debug only",
        ),
    ] {
        if let Some(v) = env(name)
            && !slot.set(v)
        {
            warn_bad(shown(name), v, "is longer than 4096 bytes", default);
        }
    }
    load_var(b"HEAPLIVE_LINES\0", &mut c.lines, "0", bool_value);
    load_var(b"HEAPLIVE_DEMANGLE\0", &mut c.demangle, "1", bool_value);

    // The environment and the process around it, as they are at start.
    let mut cwd = [0u8; 4096];
    // SAFETY: the buffer is valid for its length; getcwd with a buffer
    // does not allocate.
    if !unsafe { libc::getcwd(cwd.as_mut_ptr().cast(), cwd.len()) }.is_null() {
        let n = cwd.iter().position(|&b| b == 0).unwrap_or(0);
        c.start_dir.set(&cwd[..n]);
    }
    match env(b"TMPDIR\0") {
        Some(t) if !t.is_empty() && c.tmpdir.set(t) => {}
        _ => {
            c.tmpdir.set(b"/tmp");
        }
    }
    c.exe.set(exe_name().as_bytes());
}

/// The variable's name without its NUL.
fn shown(name: &[u8]) -> &str {
    core::str::from_utf8(&name[..name.len() - 1]).unwrap_or("HEAPLIVE_?")
}

/// Parses one variable into `slot` when it is set; a bad value keeps the
/// default and says so in one line.
fn load_var<T>(
    name: &[u8],
    slot: &mut T,
    default: &str,
    parse: impl Fn(&[u8]) -> Result<T, &'static str>,
) {
    if let Some(v) = env(name) {
        match parse(v) {
            Ok(x) => *slot = x,
            Err(why) => warn_bad(shown(name), v, why, default),
        }
    }
}

fn bool_value(v: &[u8]) -> Result<bool, &'static str> {
    parse_bool(v).ok_or("is not 0 or 1")
}

/// The program's name as it was started (argv[0]'s base name), with
/// characters that do not belong in a file name replaced.
fn exe_name() -> StackBuf<256> {
    let mut out = StackBuf::<256>::new();
    unsafe extern "C" {
        static program_invocation_short_name: *const core::ffi::c_char;
    }
    // SAFETY: glibc sets this before any constructor runs; it may be null
    // only in exotic loaders.
    let p = unsafe { program_invocation_short_name };
    let name: &[u8] = if p.is_null() {
        b"unknown"
    } else {
        // SAFETY: a NUL-terminated string owned by the process.
        unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes()
    };
    for &b in name.iter().take(200) {
        let ok = b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_' || b == b'+';
        out.push_bytes(&[if ok { b } else { b'_' }]);
    }
    if out.as_bytes().is_empty() {
        out.push_bytes(b"unknown");
    }
    out
}

// ---------------------------------------------------------------------------
// Pure parsers (unit-tested below).

fn trim(v: &[u8]) -> &[u8] {
    let s = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let e = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(s, |i| i + 1);
    &v[s..e]
}

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

/// `123`, `64K`, `64k`, `64KB`, `64KiB`, `4M`, `2G` (binary multiples).
pub fn parse_size(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    let digits = v
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(v.len());
    let n = parse_u64(&v[..digits])?;
    let mult: u64 = match &v[digits..] {
        b"" | b"b" | b"B" => 1,
        s if eq_any(s, &[b"k", b"kb", b"kib"]) => 1 << 10,
        s if eq_any(s, &[b"m", b"mb", b"mib"]) => 1 << 20,
        s if eq_any(s, &[b"g", b"gb", b"gib"]) => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

fn eq_any(s: &[u8], options: &[&[u8]]) -> bool {
    options.iter().any(|o| s.eq_ignore_ascii_case(o))
}

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

/// `30` (seconds), `30s`, `500ms`, `5m`, `1h`; `0` means off.
pub fn parse_duration_ms(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    let digits = v
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(v.len());
    let n = parse_u64(&v[..digits])?;
    let mult = match &v[digits..] {
        b"" | b"s" | b"S" => 1000,
        b"ms" => 1,
        b"m" | b"M" | b"min" => 60_000,
        b"h" | b"H" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// A decimal like `2`, `1.5`.
pub fn parse_float(v: &[u8]) -> Option<f64> {
    let s = core::str::from_utf8(trim(v)).ok()?;
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// `folded`, `pprof`, `folded,pprof` (either order).
pub fn parse_format(v: &[u8]) -> Option<(bool, bool)> {
    let (mut f, mut p) = (false, false);
    for part in trim(v).split(|&b| b == b',') {
        match trim(part) {
            s if s.eq_ignore_ascii_case(b"folded") => f = true,
            s if s.eq_ignore_ascii_case(b"pprof") => p = true,
            _ => return None,
        }
    }
    Some((f, p))
}

/// `USR2`, `SIGUSR1`, `RTMIN+3`, `SIGRTMAX-1`, `12`, `none`. Refuses
/// signals that cannot be caught or that report faults.
pub fn parse_signal(v: &[u8]) -> Result<i32, &'static str> {
    let v = trim(v);
    if eq_any(v, &[b"none", b"off", b"0"]) {
        return Ok(0);
    }
    let name = if v.len() > 3 && v[..3].eq_ignore_ascii_case(b"SIG") {
        &v[3..]
    } else {
        v
    };
    let rtmin = libc::SIGRTMIN();
    let rtmax = libc::SIGRTMAX();
    let sig = if let Some(n) = parse_u64(name) {
        n.min(1000) as i32
    } else if name.len() >= 5
        && (name[..5].eq_ignore_ascii_case(b"RTMIN") || name[..5].eq_ignore_ascii_case(b"RTMAX"))
    {
        let base = if name[..5].eq_ignore_ascii_case(b"RTMIN") {
            rtmin
        } else {
            rtmax
        };
        match &name[5..] {
            [] => base,
            [b'+', rest @ ..] => {
                base + parse_u64(rest)
                    .ok_or("is not a signal name or number")?
                    .min(1000) as i32
            }
            [b'-', rest @ ..] => {
                base - parse_u64(rest)
                    .ok_or("is not a signal name or number")?
                    .min(1000) as i32
            }
            _ => return Err("is not a signal name or number"),
        }
    } else {
        const NAMES: &[(&[u8], i32)] = &[
            (b"HUP", libc::SIGHUP),
            (b"INT", libc::SIGINT),
            (b"QUIT", libc::SIGQUIT),
            (b"USR1", libc::SIGUSR1),
            (b"USR2", libc::SIGUSR2),
            (b"PIPE", libc::SIGPIPE),
            (b"ALRM", libc::SIGALRM),
            (b"TERM", libc::SIGTERM),
            (b"CHLD", libc::SIGCHLD),
            (b"CONT", libc::SIGCONT),
            (b"TSTP", libc::SIGTSTP),
            (b"TTIN", libc::SIGTTIN),
            (b"TTOU", libc::SIGTTOU),
            (b"URG", libc::SIGURG),
            (b"XCPU", libc::SIGXCPU),
            (b"XFSZ", libc::SIGXFSZ),
            (b"VTALRM", libc::SIGVTALRM),
            (b"PROF", libc::SIGPROF),
            (b"WINCH", libc::SIGWINCH),
            (b"IO", libc::SIGIO),
            (b"PWR", libc::SIGPWR),
            (b"KILL", libc::SIGKILL),
            (b"STOP", libc::SIGSTOP),
            (b"SEGV", libc::SIGSEGV),
            (b"BUS", libc::SIGBUS),
            (b"FPE", libc::SIGFPE),
            (b"ILL", libc::SIGILL),
            (b"TRAP", libc::SIGTRAP),
            (b"SYS", libc::SIGSYS),
            (b"ABRT", libc::SIGABRT),
        ];
        NAMES
            .iter()
            .find(|(n, _)| name.eq_ignore_ascii_case(n))
            .map(|&(_, s)| s)
            .ok_or("is not a signal name or number")?
    };
    match sig {
        libc::SIGKILL | libc::SIGSTOP => Err("cannot be caught"),
        libc::SIGSEGV
        | libc::SIGBUS
        | libc::SIGFPE
        | libc::SIGILL
        | libc::SIGTRAP
        | libc::SIGSYS
        | libc::SIGABRT => Err("reports faults and cannot carry dump requests"),
        s if s < 1 || s > rtmax => Err("is out of range"),
        s if s > 31 && s < rtmin => Err("is reserved by the C library"),
        s => Ok(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size(b"1"), Some(1));
        assert_eq!(parse_size(b"524288"), Some(524288));
        assert_eq!(parse_size(b"512K"), Some(512 * 1024));
        assert_eq!(parse_size(b"512k"), Some(512 * 1024));
        assert_eq!(parse_size(b"4MiB"), Some(4 << 20));
        assert_eq!(parse_size(b" 2G "), Some(2 << 30));
        assert_eq!(parse_size(b"2GB"), Some(2 << 30));
        assert_eq!(parse_size(b""), None);
        assert_eq!(parse_size(b"K"), None);
        assert_eq!(parse_size(b"-1"), None);
        assert_eq!(parse_size(b"1.5M"), None);
        assert_eq!(parse_size(b"12X"), None);
        assert_eq!(parse_size(b"99999999999999999999"), None);
        assert_eq!(parse_size(b"99999999999G"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms(b"30"), Some(30_000));
        assert_eq!(parse_duration_ms(b"30s"), Some(30_000));
        assert_eq!(parse_duration_ms(b"5m"), Some(300_000));
        assert_eq!(parse_duration_ms(b"1h"), Some(3_600_000));
        assert_eq!(parse_duration_ms(b"250ms"), Some(250));
        assert_eq!(parse_duration_ms(b"0"), Some(0));
        assert_eq!(parse_duration_ms(b"soon"), None);
        assert_eq!(parse_duration_ms(b"5d"), None);
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
        assert_eq!(parse_format(b"folded"), Some((true, false)));
        assert_eq!(parse_format(b"pprof"), Some((false, true)));
        assert_eq!(parse_format(b"folded,pprof"), Some((true, true)));
        assert_eq!(parse_format(b"pprof, folded"), Some((true, true)));
        assert_eq!(parse_format(b"svg"), None);
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal(b"USR2"), Ok(libc::SIGUSR2));
        assert_eq!(parse_signal(b"sigusr1"), Ok(libc::SIGUSR1));
        assert_eq!(parse_signal(b"12"), Ok(12));
        assert_eq!(parse_signal(b"none"), Ok(0));
        assert_eq!(parse_signal(b"RTMIN+3"), Ok(libc::SIGRTMIN() + 3));
        assert_eq!(parse_signal(b"SIGRTMAX-1"), Ok(libc::SIGRTMAX() - 1));
        assert_eq!(parse_signal(b"RTMIN"), Ok(libc::SIGRTMIN()));
        assert!(parse_signal(b"KILL").is_err());
        assert!(parse_signal(b"SIGSTOP").is_err());
        assert!(parse_signal(b"SEGV").is_err());
        assert!(parse_signal(b"bus").is_err());
        assert!(parse_signal(b"9").is_err());
        assert!(parse_signal(b"11").is_err());
        assert!(parse_signal(b"200").is_err());
        assert!(parse_signal(b"USR3").is_err());
        assert!(parse_signal(b"RTMIN+x").is_err());
    }
}

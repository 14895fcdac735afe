//! Every `HEAPLIVE_*` variable: name, default, parser and meaning.
//!
//! Read once, at the first allocation in the process (before main, before
//! php-fpm's workers run `clearenv()`), without allocating: values are
//! copied into fixed buffers. A bad value gives one stderr line naming the
//! variable, the value and the default used.

//!
//! Names, defaults and grammars come from the contract crate's settings
//! table (`heaplive_format::settings`), which `heaplive run` checks its
//! options with: the two never disagree about a value.

use crate::hot::sys::StackBuf;
use core::cell::UnsafeCell;
use core::ffi::CStr;
use core::fmt::Write;
use heaplive_format::grammar;
use heaplive_format::settings::{self as s, Setting};

/// The typed defaults: the contract crate's, written once there.
const D: s::Defaults = s::DEFAULTS;
pub const DEFAULT_OUTPUT: &str = heaplive_format::template::DEFAULT;

/// A string in a fixed buffer (no allocation). Longer values are refused.
/// The length comes first, so a short value touches one page.
#[repr(C)]
pub struct FixedStr<const N: usize> {
    len: usize,
    buf: [u8; N],
}

impl<const N: usize> FixedStr<N> {
    pub const fn new() -> Self {
        FixedStr {
            buf: [0; N],
            len: 0,
        }
    }
    /// A value known at compile time (at most N bytes).
    pub const fn with(s: &[u8]) -> Self {
        let mut f = Self::new();
        let mut i = 0;
        while i < s.len() && i < N {
            f.buf[i] = s[i];
            i += 1;
        }
        f.len = i;
        f
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

/// HEAPLIVE_PHP.
pub use heaplive_format::grammar::PhpMode;

/// `repr(C)`, scalars first, then the strings set at every start (the
/// program's name, the start directory), then those set only when asked
/// for: loading the settings of a process that never samples writes one
/// or two pages of this 25 KiB static, not all of them.
#[repr(C)]
pub struct Config {
    /// HEAPLIVE_SAMPLE_INTERVAL: mean bytes between samples; 1 = exact mode.
    pub interval: u64,
    /// HEAPLIVE_SEED: seed of the sampler's random gaps; 0 = from the clock.
    pub seed: u64,
    /// HEAPLIVE_DUMP_AT_EXIT: write a dump when the process exits.
    pub dump_at_exit: bool,
    /// HEAPLIVE_DUMP_EMPTY: the exit dump also when nothing is live but
    /// runtime pools (`background::runtime_pools`).
    pub dump_empty: bool,
    /// HEAPLIVE_SIGNAL: the dump signal; 0 = none.
    pub signal: i32,
    /// HEAPLIVE_DUMP_EVERY: periodic dumps, milliseconds; 0 = off.
    pub dump_every_ms: u64,
    /// HEAPLIVE_TIMELINE: the timeline's period, milliseconds; 0 = off.
    pub timeline_ms: u64,
    /// HEAPLIVE_FORMAT: which files a dump writes.
    pub folded: bool,
    pub pprof: bool,
    /// HEAPLIVE_VIEWS: which views the folded files show.
    pub views: grammar::Views,
    /// HEAPLIVE_PEAK_GROWTH: peak dumps at this factor; 0 = off.
    pub peak_growth: f64,
    /// HEAPLIVE_START: sample from the start (else dormant).
    pub start: bool,
    /// HEAPLIVE_PROGRAMS did not match this program: dormant, writes nothing.
    pub unwanted: bool,
    /// HEAPLIVE_WARN_BYTES / _BLOCKS / _GROWTH: leak warnings.
    pub warn_bytes: u64,
    pub warn_blocks: u64,
    pub warn_growth: f64,
    /// HEAPLIVE_LINES: append ` (file:line)` to frames.
    pub lines: bool,
    /// HEAPLIVE_DEMANGLE: demangle C++ and Rust names.
    pub demangle: bool,
    /// HEAPLIVE_PHP: PHP mode (ZendMM samples and PHP frames).
    pub php: PhpMode,
    /// HEAPLIVE_PHP_OOM_DUMP: dump when a PHP request exhausts memory_limit.
    pub php_oom_dump: bool,
    /// HEAPLIVE_PHP_REQUEST_FRAME: the request as the root frame.
    pub php_request_frame: bool,
    /// HEAPLIVE_PHP_PEAK_BYTES: per-request peak dumps from this ZendMM
    /// total; 0 = off.
    pub php_peak_bytes: u64,
    /// HEAPLIVE_UNWIND: how stacks are captured.
    pub unwind: grammar::Unwind,
    /// HEAPLIVE_PHP_LIBRARY: glob patterns of library files' paths.
    pub php_library: FixedStr<1024>,
    /// Captured at load: the program's name, the start directory, $TMPDIR.
    pub exe: FixedStr<256>,
    pub start_dir: FixedStr<4096>,
    /// HEAPLIVE_OUTPUT: the path template of dump files.
    pub output: FixedStr<4096>,
    pub tmpdir: FixedStr<4096>,
    /// HEAPLIVE_LOG: file for heaplive's own lines; empty = stderr.
    pub log: FixedStr<4096>,
    /// HEAPLIVE_DEBUG_DIRS: extra directories of separate debug files.
    pub debug_dirs: FixedStr<4096>,
    /// HEAPLIVE_RUN_REPORT: `heaplive run`'s list of the files written.
    pub run_report: FixedStr<4096>,
}

impl Config {
    /// The settings' defaults ([`s::DEFAULTS`]), and the process's
    /// surroundings not read yet.
    pub const fn defaults() -> Config {
        Config {
            interval: D.sample_interval,
            seed: D.seed,
            output: FixedStr::new(),
            dump_at_exit: D.dump_at_exit,
            dump_empty: D.dump_empty,
            signal: D.signal,
            dump_every_ms: D.dump_every_ms,
            timeline_ms: D.timeline_ms,
            folded: D.format.folded,
            pprof: D.format.pprof,
            views: D.views,
            peak_growth: D.peak_growth,
            start: D.start,
            unwanted: false,
            warn_bytes: D.warn_bytes,
            warn_blocks: D.warn_blocks,
            warn_growth: D.warn_growth,
            log: FixedStr::new(),
            debug_dirs: FixedStr::new(),
            php_library: FixedStr::with(heaplive_format::grammar::PHP_LIBRARY_DEFAULT.as_bytes()),
            run_report: FixedStr::new(),
            lines: D.lines,
            demangle: D.demangle,
            php: D.php,
            php_oom_dump: D.php_oom_dump,
            php_request_frame: D.php_request_frame,
            php_peak_bytes: D.php_peak_bytes,
            unwind: D.unwind,
            start_dir: FixedStr::new(),
            // In the library's data: a process without $TMPDIR writes
            // nothing here at start (a page fault less).
            tmpdir: FixedStr::with(b"/tmp"),
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

#[inline(always)]
fn env(name: &CStr) -> Option<&'static [u8]> {
    // Before libc's initialiser ran, `environ` is still null and getenv
    // finds nothing: with an `LD_AUDIT` module that binds symbols, the
    // loader calls malloc (and so this, the first time) that early. The
    // environment is then read where the kernel put it (`initial_stack`).
    // SAFETY: libc's `environ`, read once.
    if unsafe { environ }.is_null() {
        return early_env(name);
    }
    // SAFETY: name is NUL-terminated; getenv does not allocate. The value
    // is copied or parsed before anything can change the environment.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// `name`'s value in the environment the kernel passed (`env`).
#[cold]
#[inline(never)]
fn early_env(name: &CStr) -> Option<&'static [u8]> {
    let mut envp = initial_stack()?.1;
    envp.find_map(|v| v.strip_prefix(name.to_bytes())?.strip_prefix(b"="))
}

unsafe extern "C" {
    static environ: *const *const core::ffi::c_char;
    /// Set by ld.so before anything runs: where the kernel's argc is, with
    /// argv, the environment and the auxiliary vector above it.
    static __libc_stack_end: *const usize;
}

/// The strings of an array of C strings ending with a null pointer.
struct CStrings(*const *const core::ffi::c_char);

impl Iterator for CStrings {
    type Item = &'static [u8];
    fn next(&mut self) -> Option<&'static [u8]> {
        // SAFETY: an array of the initial stack, ending with a null.
        let p = unsafe { *self.0 };
        if p.is_null() {
            return None;
        }
        // SAFETY: as above; the strings live as long as the process.
        self.0 = unsafe { self.0.add(1) };
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// argv[0] and the environment as the kernel passed them (the process's
/// initial stack: argc, argv, NULL, envp, NULL), for a read before libc's
/// initialiser set `environ` and `program_invocation_short_name`. None
/// when ld.so did not record it or it does not look like one.
#[cold]
#[inline(never)]
fn initial_stack() -> Option<(&'static [u8], CStrings)> {
    // SAFETY: ld.so's variable; the words above it are the kernel's, and
    // argv[argc] must be the null that ends argv.
    unsafe {
        let sp = __libc_stack_end;
        if sp.is_null() || *sp > 1 << 20 {
            return None;
        }
        let argc = *sp;
        let argv = sp.add(1) as *const *const core::ffi::c_char;
        if !(*argv.add(argc)).is_null() {
            return None;
        }
        let argv0 = if argc == 0 || (*argv).is_null() {
            &b""[..]
        } else {
            CStr::from_ptr(*argv).to_bytes()
        };
        Some((argv0, CStrings(argv.add(argc + 1))))
    }
}

/// One line on stderr: `heaplive: <variable>='<value>' <why>; using the default <default>`.
/// Out of line: it runs only for a bad value, and inlined into each
/// `load_var` and into `load_with` it pushed them out of the start-up window
/// (src/layout.ld; startcost.rs checks it).
#[cold]
#[inline(never)]
pub fn warn_bad(name: &str, value: &[u8], why: impl core::fmt::Display, default: &str) {
    let mut b = StackBuf::<512>::new();
    let _ = write!(b, "heaplive: {}='", name);
    b.push_bytes(value.get(..200).unwrap_or(value));
    let _ = writeln!(b, "' {}; using the default {}", why, default);
    crate::hot::sys::write_all(2, b.as_bytes());
}

/// Reads every variable. Called once by the resolver.
pub fn load() {
    load_with(&|n| env(n));
    // An unknown HEAPLIVE_* name (a misspelled setting) is one warning
    // line; the scan is a prefix test per variable, the rest is cold.
    // SAFETY: libc's `environ`, read once, as in `env`.
    let envp = unsafe { environ };
    let vars = if envp.is_null() {
        match initial_stack() {
            Some((_, vars)) => vars,
            None => return,
        }
    } else {
        CStrings(envp)
    };
    for v in vars {
        if v.starts_with(b"HEAPLIVE_") {
            let name = v.split(|&b| b == b'=').next().unwrap_or(v);
            if !s::is_known(name) {
                warn_unknown(name);
            }
        }
    }
}

/// One line: `heaplive: unknown setting HEAPLIVE_X ignored (did you mean
/// HEAPLIVE_Y?)`, formatted on the stack.
#[cold]
#[inline(never)]
fn warn_unknown(name: &[u8]) {
    let mut b = StackBuf::<512>::new();
    b.push_bytes(b"heaplive: unknown setting ");
    b.push_bytes(name.get(..200).unwrap_or(name));
    match s::closest(name) {
        Some(near) => {
            let _ = writeln!(b, " ignored (did you mean {}?)", near.name());
        }
        None => {
            let _ = writeln!(
                b,
                " ignored (the settings: heaplive(1), README \"Settings\")"
            );
        }
    }
    crate::hot::sys::write_all(2, b.as_bytes());
}

/// Attach mode: the settings come from `heaplive attach` as lines
/// `HEAPLIVE_NAME=value` (the environment's grammar); called once by
/// `heaplive_attach` before anything reads them (hot/attach.rs).
pub fn load_settings(text: &[u8]) {
    load_with(&|n| lookup(text, n.to_bytes()));
}

/// The value of `name` in lines `NAME=value`.
fn lookup<'a>(text: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let v = line.strip_prefix(name)?;
        v.strip_prefix(b"=")
    })
}

type Source<'a> = &'a dyn Fn(&CStr) -> Option<&'a [u8]>;

fn load_with(env: Source) {
    // SAFETY: see `Cell`: we are the one loading thread.
    let c = unsafe { &mut *CONFIG.0.get() };
    let effects = parse(env, c);
    apply(c, &effects);
}

/// What loading changes outside the [`Config`], decided by [`parse`] and
/// done by [`apply`].
#[derive(Debug, PartialEq)]
struct Effects {
    /// HEAPLIVE_PEAK_GROWTH as read (before HEAPLIVE_PROGRAMS may turn the
    /// process dormant), for the peak-dump trigger.
    peak_growth: f64,
    /// HEAPLIVE_POISON.
    poison: grammar::Poison,
}

/// The other modules' state that the settings set: the peak-dump trigger,
/// whether sampling is on, the poison fills.
fn apply(c: &Config, e: &Effects) {
    crate::hot::peak::arm_peak_dump(0, e.peak_growth);
    crate::hot::track::set_active(c.start, false);
    crate::hot::poison::set(e.poison);
    if c.views.temporary {
        crate::hot::live::keep_times();
    }
}

/// Reads every variable from `env` into `c` (a bad value: one warning
/// line, the default kept) and the process's surroundings (start
/// directory, $TMPDIR, program name); changes nothing else.
fn parse(env: Source, c: &mut Config) -> Effects {
    let mut formats = grammar::Formats {
        folded: c.folded,
        pprof: c.pprof,
    };
    let mut poison = D.poison;
    // Each setting into its field through its grammar (`var`), or as
    // checked text (`text`), in the settings' order (which is the order of
    // their warning lines).
    macro_rules! load {
        ($($kind:ident $setting:ident => $field:expr, $grammar:expr;)*) => {
            $(load!(@$kind $setting, $field, $grammar);)*
        };
        (@var $setting:ident, $field:expr, $grammar:expr) => {
            load_var(env, &s::$setting, &mut $field, $grammar)
        };
        (@text $setting:ident, $field:expr, $check:expr) => {
            load_text(env, &s::$setting, &mut $field, $check)
        };
    }
    load! {
        var SAMPLE_INTERVAL => c.interval, grammar::sample_interval;
        var SEED => c.seed, grammar::seed;
        text OUTPUT => c.output, heaplive_format::template::check;
        var DUMP_AT_EXIT => c.dump_at_exit, grammar::boolean;
        var DUMP_EMPTY => c.dump_empty, grammar::boolean;
        var SIGNAL => c.signal, |v| heaplive_format::signal::parse(v).map_err(|r| r.why());
        var DUMP_EVERY => c.dump_every_ms, grammar::dump_every;
        var TIMELINE => c.timeline_ms, grammar::dump_every;
        var FORMAT => formats, grammar::format;
        var VIEWS => c.views, grammar::views;
        var PEAK_GROWTH => c.peak_growth, grammar::peak_growth;
        var START => c.start, grammar::boolean;
        var WARN_BYTES => c.warn_bytes, grammar::warn_bytes;
        var WARN_BLOCKS => c.warn_blocks, grammar::warn_blocks;
        var WARN_GROWTH => c.warn_growth, grammar::warn_growth;
        text LOG => c.log, any_text;
        text DEBUG_DIRS => c.debug_dirs, any_text;
        text RUN_REPORT => c.run_report, any_text;
        var LINES => c.lines, grammar::boolean;
        var DEMANGLE => c.demangle, grammar::boolean;
        var PHP => c.php, grammar::php_mode;
        var PHP_OOM_DUMP => c.php_oom_dump, grammar::boolean;
        var PHP_REQUEST_FRAME => c.php_request_frame, grammar::boolean;
        var PHP_PEAK_BYTES => c.php_peak_bytes, grammar::warn_bytes;
        var UNWIND => c.unwind, grammar::unwind;
        text PHP_LIBRARY => c.php_library, grammar::php_library;
        var POISON => poison, grammar::poison;
    }
    (c.folded, c.pprof) = (formats.folded, formats.pprof);
    let peak_growth = c.peak_growth;

    // The environment and the process around it, as they are at start.
    let mut cwd = [0u8; 4096];
    // SAFETY: the buffer is valid for its length; getcwd with a buffer
    // does not allocate.
    if !unsafe { libc::getcwd(cwd.as_mut_ptr().cast(), cwd.len()) }.is_null() {
        let n = cwd.iter().position(|&b| b == 0).unwrap_or(0);
        c.start_dir.set(&cwd[..n]);
    }
    // $TMPDIR, else (unset, empty or too long) the default /tmp.
    if let Some(t) = self::env(c"TMPDIR").filter(|t| !t.is_empty()) {
        c.tmpdir.set(t);
    }
    c.exe.set(exe_name().as_bytes());

    // HEAPLIVE_PROGRAMS: a program not named there keeps the library but
    // behaves as without it: nothing sampled, no dump signal, no file.
    if let Some(v) = env(s::PROGRAMS.cname) {
        match grammar::programs(v) {
            Ok(()) if !grammar::programs_match(v, short_name()) => {
                c.unwanted = true;
                c.start = false;
                c.dump_at_exit = false;
                c.dump_every_ms = 0;
                c.peak_growth = 0.0;
                c.signal = 0;
                c.php = PhpMode::Off;
                c.warn_bytes = 0;
                c.warn_blocks = 0;
            }
            Ok(()) => {}
            Err(why) => warn_bad(s::PROGRAMS.name(), v, why, s::PROGRAMS.default),
        }
    }
    Effects {
        peak_growth,
        poison,
    }
}

/// `program_invocation_short_name` (argv[0]'s base name, as at start).
fn short_name() -> &'static [u8] {
    unsafe extern "C" {
        static program_invocation_short_name: *const core::ffi::c_char;
    }
    // SAFETY: glibc's variable, set by its initialiser (before any other
    // constructor; "" before it, null in exotic loaders).
    let p = unsafe { program_invocation_short_name };
    // SAFETY: a NUL-terminated string owned by the process for its life.
    let name = if p.is_null() {
        &b""[..]
    } else {
        unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes()
    };
    if !name.is_empty() {
        return name;
    }
    early_name()
}

/// Before libc's initialiser (see `env`) the short name is still "":
/// argv[0]'s base name from the initial stack.
#[cold]
#[inline(never)]
fn early_name() -> &'static [u8] {
    let argv0 = initial_stack().map_or(&b""[..], |(a, _)| a);
    argv0.rsplit(|&b| b == b'/').next().unwrap_or(argv0)
}

/// Parses one variable into `slot` when it is set; a bad value keeps the
/// default and says so in one line. `parse` is a function pointer, not a
/// generic closure: the parsers run only for variables that are set, so
/// they stay out of `load`'s code, which every process runs at start and
/// which must fit the start-up window (src/layout.ld) with one small copy of
/// this function per slot type (inlined parsers made `load_with` 10 KiB,
/// placed outside the window: a page fault more at every start).
#[inline(never)]
fn load_var<T>(
    env: Source,
    setting: &Setting,
    slot: &mut T,
    parse: fn(&[u8]) -> Result<T, &'static str>,
) {
    if let Some(v) = env(setting.cname) {
        match parse(v) {
            Ok(x) => *slot = x,
            Err(why) => warn_bad(setting.name(), v, why, setting.default),
        }
    }
}

/// Any text (a path's setting: what it names is checked where it is used).
fn any_text(_: &[u8]) -> Result<(), &'static str> {
    Ok(())
}

/// A text setting: checked by `check`, then kept in `slot` (refused when
/// longer than it holds).
fn load_text<const N: usize, E: core::fmt::Display>(
    env: Source,
    setting: &Setting,
    slot: &mut FixedStr<N>,
    check: fn(&[u8]) -> Result<(), E>,
) {
    if let Some(v) = env(setting.cname) {
        match check(v) {
            Ok(()) if slot.set(v) => {}
            Ok(()) => warn_bad(
                setting.name(),
                v,
                format_args!("is longer than {N} bytes"),
                setting.default,
            ),
            Err(why) => warn_bad(setting.name(), v, why, setting.default),
        }
    }
}

/// The program's name as it was started (argv[0]'s base name), with
/// characters that do not belong in a file name replaced.
fn exe_name() -> StackBuf<256> {
    file_safe_name(short_name())
}

/// `name` as a file name's part: characters other than letters, digits and
/// `.-_+` become `_`, and a name of dots only (`.`, `..`: a program can be
/// started with any argv[0]) becomes underscores, so that `%e` in a
/// template's directory never climbs or stays put (`/srv/d/%e/x.folded`).
fn file_safe_name(name: &[u8]) -> StackBuf<256> {
    let mut out = StackBuf::<256>::new();
    let name: &[u8] = match name {
        b"" => b"unknown",
        n => n,
    };
    let dots = name.iter().take(200).all(|&b| b == b'.');
    for &b in name.iter().take(200) {
        let ok = b.is_ascii_alphanumeric()
            || (b == b'.' && !dots)
            || b == b'-'
            || b == b'_'
            || b == b'+';
        out.push_bytes(&[if ok { b } else { b'_' }]);
    }
    if out.as_bytes().is_empty() {
        out.push_bytes(b"unknown");
    }
    out
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

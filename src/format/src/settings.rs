//! The table of `HEAPLIVE_*` settings: name, the default as a warning
//! names it, the grammar, and one line of doc, and the defaults as values
//! ([`DEFAULTS`], the one place they are typed). The library reads each one
//! with the grammar named here and starts from [`DEFAULTS`]; `heaplive run`
//! checks its options with the same grammar and takes its help text from
//! `doc`. Tests tie the three: each setting's default text parses to its
//! value in [`DEFAULTS`] (here), the README's settings table says what this
//! table says (`src/cli/tests/contract.rs`), and the library's starting
//! values are [`DEFAULTS`] (`hot::config`'s tests).

use core::ffi::CStr;

/// How a value is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grammar {
    /// [`crate::grammar::sample_interval`]
    SampleInterval,
    /// [`crate::grammar::seed`]
    Seed,
    /// [`crate::grammar::boolean`]
    Bool,
    /// [`crate::template::check`]
    Template,
    /// [`crate::signal::parse`]
    Signal,
    /// [`crate::grammar::dump_every`]
    Duration,
    /// [`crate::grammar::format`]
    Format,
    /// [`crate::grammar::warn_bytes`]
    WarnBytes,
    /// [`crate::grammar::warn_blocks`]
    WarnBlocks,
    /// [`crate::grammar::warn_growth`]
    WarnGrowth,
    /// [`crate::grammar::path`]
    Path,
    /// [`crate::grammar::views`]
    Views,
    /// [`crate::grammar::peak_growth`]
    PeakGrowth,
    /// [`crate::grammar::php_mode`]
    PhpMode,
    /// [`crate::grammar::unwind`]
    Unwind,
    /// [`crate::grammar::programs`]
    Programs,
    /// [`crate::grammar::poison`]
    Poison,
    /// [`crate::grammar::php_library`]
    PhpLibrary,
}

/// Why a value is refused, for a message `NAME='value' <why>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    Text(&'static str),
    Signal(crate::signal::Refused),
    Template(crate::template::Bad),
}

impl core::fmt::Display for Why {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        match self {
            Why::Text(t) => f.write_str(t),
            Why::Signal(s) => s.fmt(f),
            Why::Template(t) => t.fmt(f),
        }
    }
}

impl Grammar {
    /// Whether the library accepts `v`, and if not, why. Allocation-free.
    pub fn check(self, v: &[u8]) -> Result<(), Why> {
        use crate::grammar as g;
        let text = |r: Result<(), &'static str>| r.map_err(Why::Text);
        match self {
            Grammar::SampleInterval => text(g::sample_interval(v).map(drop)),
            Grammar::Seed => text(g::seed(v).map(drop)),
            Grammar::Bool => text(g::boolean(v).map(drop)),
            Grammar::Template => crate::template::check(v).map_err(Why::Template),
            Grammar::Signal => crate::signal::parse(v).map(drop).map_err(Why::Signal),
            Grammar::Duration => text(g::dump_every(v).map(drop)),
            Grammar::Format => text(g::format(v).map(drop)),
            Grammar::WarnBytes => text(g::warn_bytes(v).map(drop)),
            Grammar::WarnBlocks => text(g::warn_blocks(v).map(drop)),
            Grammar::WarnGrowth => text(g::warn_growth(v).map(drop)),
            Grammar::Path => text(g::path(v)),
            Grammar::Views => text(g::views(v).map(drop)),
            Grammar::PeakGrowth => text(g::peak_growth(v).map(drop)),
            Grammar::PhpMode => text(g::php_mode(v).map(drop)),
            Grammar::Unwind => text(g::unwind(v).map(drop)),
            Grammar::Programs => text(g::programs(v)),
            Grammar::Poison => text(g::poison(v).map(drop)),
            Grammar::PhpLibrary => text(g::php_library(v)),
        }
    }
}

/// One `HEAPLIVE_*` variable.
#[derive(Debug)]
pub struct Setting {
    /// The name, NUL-terminated for getenv.
    pub cname: &'static CStr,
    /// The default, as the warning for a bad value names it.
    pub default: &'static str,
    pub grammar: Grammar,
    /// One line for `heaplive run --help` and readers of this table.
    pub doc: &'static str,
    /// Read by the `heaplive` command only, not by the library.
    pub command_only: bool,
}

impl Setting {
    pub fn name(&self) -> &'static str {
        self.cname.to_str().unwrap_or("HEAPLIVE_?")
    }
}

macro_rules! setting {
    ($id:ident, $name:literal, $default:expr, $grammar:ident, $doc:literal) => {
        setting!($id, $name, $default, $grammar, $doc, false);
    };
    ($id:ident, $name:literal, $default:expr, $grammar:ident, $doc:literal, $cmd:expr) => {
        pub const $id: Setting = Setting {
            cname: $name,
            default: $default,
            grammar: Grammar::$grammar,
            doc: $doc,
            command_only: $cmd,
        };
    };
}

setting!(
    SAMPLE_INTERVAL,
    c"HEAPLIVE_SAMPLE_INTERVAL",
    "512K",
    SampleInterval,
    "mean bytes between samples, 1 to 1024G, K/M/G suffixes; 1 records every allocation exactly (slow)"
);
setting!(
    SEED,
    c"HEAPLIVE_SEED",
    "0 (seed from the clock)",
    Seed,
    "seed of the sampler's random gaps, for reproducible sampled runs"
);
setting!(
    OUTPUT,
    c"HEAPLIVE_OUTPUT",
    crate::template::DEFAULT,
    Template,
    "dump file names: %p pid, %e program name, %n dump number, %% a percent sign"
);
setting!(
    DUMP_AT_EXIT,
    c"HEAPLIVE_DUMP_AT_EXIT",
    "1",
    Bool,
    "write a dump when the process exits"
);
setting!(
    DUMP_EMPTY,
    c"HEAPLIVE_DUMP_EMPTY",
    "0",
    Bool,
    "write the exit dump of a fork's child (a php-fpm worker) even when nothing is live but runtime pools"
);
setting!(
    SIGNAL,
    c"HEAPLIVE_SIGNAL",
    "USR2",
    Signal,
    "the dump signal: USR1, USR2 (default), RTMIN+3, a number, or none"
);
setting!(
    DUMP_EVERY,
    c"HEAPLIVE_DUMP_EVERY",
    "0 (off)",
    Duration,
    "also dump periodically: 30, 500ms, 5m, 1h (seconds without a unit); at most 365 days"
);
setting!(
    TIMELINE,
    c"HEAPLIVE_TIMELINE",
    "1s",
    Duration,
    "the timeline's period (NAME.timeline.tsv beside each dump: live and allocated totals over time, a row per dump and leak warning), 0 = off: 100ms, 1s, 1m"
);
setting!(
    FORMAT,
    c"HEAPLIVE_FORMAT",
    "folded",
    Format,
    "which files a dump writes: folded, pprof, or folded,pprof"
);
setting!(
    VIEWS,
    c"HEAPLIVE_VIEWS",
    "live,peak,samples",
    Views,
    "what a dump writes: live (NAME.folded), alloc (bytes allocated since start, NAME.alloc.folded), peak (at exit, the stacks at the highest live total, NAME.peak.folded), samples (live samples per stack and by size class, NAME.samples.folded, for heaplive top's 95% intervals and heaplive report's size histograms; sampled mode only), variance (the variance of each stack's estimate beside each view, NAME.variance.folded, NAME.alloc.variance.folded, NAME.peak.variance.folded: heaplive top's intervals from the samples' own weights, zero for blocks that are always sampled; sampled mode only), temporary (lifetimes of the sampled blocks freed: NAME.temporary.folded, per stack the bytes of temporary allocations, those freed before their thread's next allocation as heaptrack counts them, and pprof sample types freed_1ms_space, freed_1s_space, freed_later_space, temporary_space), app (the names of the main executable's frames, NAME.app.txt, for heaplive top --app), sizes (NAME.samples.folded in exact mode too, for its size rows: live blocks per stack by size class, drawn by heaplive report; a sampled-mode dump's samples file always has them, a PHP request-peak dump's excepted)"
);
setting!(
    PEAK_GROWTH,
    c"HEAPLIVE_PEAK_GROWTH",
    "0 (off)",
    PeakGrowth,
    "also dump when the live total first exceeds the last peak dump's total by this factor (1 MiB before the first): 1.5, 2"
);
setting!(
    START,
    c"HEAPLIVE_START",
    "1",
    Bool,
    "0 loads heaplive dormant: nothing is sampled until heaplive start PID or heaplive_start()"
);
setting!(
    PROGRAMS,
    c"HEAPLIVE_PROGRAMS",
    "* (every program)",
    Programs,
    "only programs whose name matches one of these comma-separated globs are profiled (example: php-fpm*,python3); the others stay dormant and write nothing"
);
setting!(
    WARN_BYTES,
    c"HEAPLIVE_WARN_BYTES",
    "256M",
    WarnBytes,
    "warn when one stack's live bytes reach this, at most 1073741824G; 0 = off"
);
setting!(
    WARN_BLOCKS,
    c"HEAPLIVE_WARN_BLOCKS",
    "0 (off)",
    WarnBlocks,
    "warn when one stack's live block count reaches this, at most 10^15; 0 = off"
);
setting!(
    WARN_GROWTH,
    c"HEAPLIVE_WARN_GROWTH",
    "2",
    WarnGrowth,
    "after a warning, warn again for the stack at this multiple of the last amount"
);
setting!(
    LOG,
    c"HEAPLIVE_LOG",
    "stderr",
    Path,
    "file (appended) for heaplive's own lines"
);
setting!(
    DEBUG_DIRS,
    c"HEAPLIVE_DEBUG_DIRS",
    "/usr/lib/debug only",
    Path,
    "more directories of separate debug files, colon-separated"
);
setting!(
    LINES,
    c"HEAPLIVE_LINES",
    "0",
    Bool,
    "append (file.c:123) to frames with debug line info"
);
setting!(
    DEMANGLE,
    c"HEAPLIVE_DEMANGLE",
    "1",
    Bool,
    "demangle C++ and Rust names"
);
setting!(
    PHP,
    c"HEAPLIVE_PHP",
    "auto",
    PhpMode,
    "PHP mode in php-fpm and php-cli: auto (ZendMM samples and PHP frames), native (PHP frames only), off"
);
setting!(
    PHP_OOM_DUMP,
    c"HEAPLIVE_PHP_OOM_DUMP",
    "1",
    Bool,
    "PHP mode: when a request exhausts memory_limit (\"Allowed memory size of ... exhausted\"), dump the live heap at that moment, before PHP reports the error; 0 = off"
);
setting!(
    PHP_REQUEST_FRAME,
    c"HEAPLIVE_PHP_REQUEST_FRAME",
    "1",
    Bool,
    "PHP mode: the request as the root frame of its samples, [GET /api/report] (php-fpm) or [cli script.php]; 0 = leave it out"
);
setting!(
    PHP_PEAK_BYTES,
    c"HEAPLIVE_PHP_PEAK_BYTES",
    "0 (off)",
    WarnBytes,
    "PHP mode: a request whose ZendMM live total peaks at this size or more writes the stacks at its peak when it ends: 16M, 100M; 0 = off"
);
setting!(
    PHP_LIBRARY,
    c"HEAPLIVE_PHP_LIBRARY",
    crate::grammar::PHP_LIBRARY_DEFAULT,
    PhpLibrary,
    "PHP mode: comma-separated glob patterns of the paths of library code (its frames are marked [library]; the memory_limit and request-peak lines and heaplive top --php name the innermost frame that is not)"
);
setting!(
    UNWIND,
    c"HEAPLIVE_UNWIND",
    "cached",
    Unwind,
    "stack capture: cached (heaplive's rule cache, libgcc where it cannot proceed), libgcc, or check (both, differences reported)"
);
setting!(
    POISON,
    c"HEAPLIVE_POISON",
    "off",
    Poison,
    "fill new blocks (alloc: 0xa5) and freed blocks (free: 0xdd) so that reading uninitialised or freed memory shows; off, alloc, free or alloc,free"
);
setting!(
    RUN_REPORT,
    c"HEAPLIVE_RUN_REPORT",
    "unset",
    Path,
    "set by heaplive run: the file (in a private directory it made) where the library lists each file it writes, for run's list of files"
);
setting!(
    LIB,
    c"HEAPLIVE_LIB",
    "next to heaplive",
    Path,
    "the library the heaplive command preloads",
    true
);

/// The defaults of the settings that have a value, typed once: the
/// library's starting configuration (`hot::config::Config::defaults`) is
/// built from these, and each setting's `default` text parses to the value
/// here (`defaults_are_what_the_texts_say`). Settings without a typed value
/// (the output template, [`crate::template::DEFAULT`]; paths and program
/// patterns, whose default is "unset") are not here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    pub sample_interval: u64,
    pub seed: u64,
    pub dump_at_exit: bool,
    pub dump_empty: bool,
    pub signal: i32,
    pub dump_every_ms: u64,
    pub timeline_ms: u64,
    pub format: crate::grammar::Formats,
    pub views: crate::grammar::Views,
    pub peak_growth: f64,
    pub start: bool,
    pub warn_bytes: u64,
    pub warn_blocks: u64,
    pub warn_growth: f64,
    pub lines: bool,
    pub demangle: bool,
    pub php: crate::grammar::PhpMode,
    pub php_oom_dump: bool,
    pub php_request_frame: bool,
    pub php_peak_bytes: u64,
    pub unwind: crate::grammar::Unwind,
    pub poison: crate::grammar::Poison,
}

pub const DEFAULTS: Defaults = Defaults {
    sample_interval: 512 * 1024,
    seed: 0,
    dump_at_exit: true,
    dump_empty: false,
    signal: libc::SIGUSR2,
    dump_every_ms: 0,
    timeline_ms: 1000,
    format: crate::grammar::Formats {
        folded: true,
        pprof: false,
    },
    views: crate::grammar::Views {
        live: true,
        alloc: false,
        peak: true,
        samples: true,
        variance: false,
        temporary: false,
        app: false,
        sizes: false,
    },
    peak_growth: 0.0,
    start: true,
    warn_bytes: 256 << 20,
    warn_blocks: 0,
    warn_growth: 2.0,
    lines: false,
    demangle: true,
    php: crate::grammar::PhpMode::Auto,
    php_oom_dump: true,
    php_request_frame: true,
    php_peak_bytes: 0,
    unwind: crate::grammar::Unwind::Cached,
    poison: crate::grammar::Poison {
        alloc: false,
        free: false,
    },
};

/// Every setting, in the README's order.
pub const ALL: &[&Setting] = &[
    &SAMPLE_INTERVAL,
    &OUTPUT,
    &DUMP_AT_EXIT,
    &DUMP_EMPTY,
    &SIGNAL,
    &DUMP_EVERY,
    &TIMELINE,
    &FORMAT,
    &VIEWS,
    &PEAK_GROWTH,
    &START,
    &PROGRAMS,
    &WARN_BYTES,
    &WARN_BLOCKS,
    &WARN_GROWTH,
    &LOG,
    &DEBUG_DIRS,
    &LINES,
    &DEMANGLE,
    &PHP,
    &PHP_OOM_DUMP,
    &PHP_REQUEST_FRAME,
    &PHP_PEAK_BYTES,
    &PHP_LIBRARY,
    &SEED,
    &UNWIND,
    &POISON,
    &RUN_REPORT,
    &LIB,
];

/// The setting called `name`.
pub fn by_name(name: &str) -> Option<&'static Setting> {
    ALL.iter().copied().find(|s| s.name() == name)
}

/// `HEAPLIVE_*` variables that are not settings but are set on purpose
/// (read by the test suite, never by the library): no warning names them.
pub const OTHER_KNOWN: &[&str] = &["HEAPLIVE_TEST_PHP", "HEAPLIVE_TEST_PHP_FPM"];

/// Whether `name` (a variable's name, without `=value`) is a setting or
/// another known `HEAPLIVE_*` variable. Allocation-free.
pub fn is_known(name: &[u8]) -> bool {
    ALL.iter().any(|s| s.cname.to_bytes() == name)
        || OTHER_KNOWN.iter().any(|k| k.as_bytes() == name)
}

/// The setting whose name is closest to `name` (a misspelling such as
/// `HEAPLIVE_SAMPL_INTERVAL`), by edit distance over ASCII letters with
/// case ignored, when it is close enough to be a likely typo: at most 3
/// edits, and fewer than a third of the name. Allocation-free (names are
/// compared over their first 64 bytes).
pub fn closest(name: &[u8]) -> Option<&'static Setting> {
    let mut best: Option<(usize, &'static Setting)> = None;
    for s in ALL {
        let d = edit_distance(name, s.cname.to_bytes());
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, s));
        }
    }
    let (d, s) = best?;
    let limit = (s.name().len().saturating_sub(9) / 3).clamp(1, 3);
    (d <= limit).then_some(s)
}

/// Levenshtein distance of `a` and `b` (first 64 bytes each), ignoring
/// ASCII case, with one row on the stack.
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    const N: usize = 64;
    let (a, b) = (&a[..a.len().min(N)], &b[..b.len().min(N)]);
    let mut row = [0usize; N + 1];
    for (j, r) in row.iter_mut().enumerate().take(b.len() + 1) {
        *r = j;
    }
    for (i, &ca) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(!ca.eq_ignore_ascii_case(&cb));
            let next = (diag + cost).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspelled_names_find_their_setting() {
        let near = |n: &str| closest(n.as_bytes()).map(|s| s.name());
        assert_eq!(
            near("HEAPLIVE_SAMPL_INTERVAL"),
            Some("HEAPLIVE_SAMPLE_INTERVAL")
        );
        assert_eq!(
            near("HEAPLIVE_SAMPLE_INTERVALL"),
            Some("HEAPLIVE_SAMPLE_INTERVAL")
        );
        assert_eq!(near("HEAPLIVE_OUPUT"), Some("HEAPLIVE_OUTPUT"));
        assert_eq!(near("HEAPLIVE_signal"), Some("HEAPLIVE_SIGNAL"));
        assert_eq!(near("HEAPLIVE_DUMP_AT_EXT"), Some("HEAPLIVE_DUMP_AT_EXIT"));
        assert_eq!(near("HEAPLIVE_NOTHING_LIKE_IT"), None);
        assert_eq!(near("HEAPLIVE_X"), None);
        assert!(is_known(b"HEAPLIVE_SAMPLE_INTERVAL"));
        assert!(is_known(b"HEAPLIVE_RUN_REPORT"));
        assert!(is_known(b"HEAPLIVE_TEST_PHP"));
        assert!(!is_known(b"HEAPLIVE_SAMPL_INTERVAL"));
        assert!(!is_known(b"HEAPLIVE_SAMPLE_INTERVAL="));
    }

    #[test]
    fn names_are_unique_and_defaults_parse() {
        for (i, s) in ALL.iter().enumerate() {
            assert!(s.name().starts_with("HEAPLIVE_"), "{}", s.name());
            assert!(
                ALL[..i].iter().all(|o| o.name() != s.name()),
                "{} twice",
                s.name()
            );
            assert!(by_name(s.name()).is_some());
            // The default, as written before any note in brackets, is a
            // value of the grammar (paths have no written default).
            let plain = s.default.split(" (").next().unwrap_or("");
            if s.grammar != Grammar::Path {
                assert_eq!(s.grammar.check(plain.as_bytes()), Ok(()), "{}", s.name());
            }
        }
        assert_eq!(
            SIGNAL.grammar.check(b"SEGV").unwrap_err().to_string(),
            "reports faults and cannot carry dump requests"
        );
    }

    /// Each setting's default text (the README's and the warnings'), read
    /// with the setting's own parser, is the typed default the library
    /// starts from.
    #[test]
    fn defaults_are_what_the_texts_say() {
        use crate::grammar as g;
        fn text(s: &Setting) -> &'static [u8] {
            s.default.split(" (").next().unwrap_or("").as_bytes()
        }
        let d = DEFAULTS;
        let parsed = Defaults {
            sample_interval: g::sample_interval(text(&SAMPLE_INTERVAL)).unwrap(),
            seed: g::seed(text(&SEED)).unwrap(),
            dump_at_exit: g::boolean(text(&DUMP_AT_EXIT)).unwrap(),
            dump_empty: g::boolean(text(&DUMP_EMPTY)).unwrap(),
            signal: crate::signal::parse(text(&SIGNAL)).unwrap(),
            dump_every_ms: g::dump_every(text(&DUMP_EVERY)).unwrap(),
            timeline_ms: g::dump_every(text(&TIMELINE)).unwrap(),
            format: g::format(text(&FORMAT)).unwrap(),
            views: g::views(text(&VIEWS)).unwrap(),
            peak_growth: g::peak_growth(text(&PEAK_GROWTH)).unwrap(),
            start: g::boolean(text(&START)).unwrap(),
            warn_bytes: g::warn_bytes(text(&WARN_BYTES)).unwrap(),
            warn_blocks: g::warn_blocks(text(&WARN_BLOCKS)).unwrap(),
            warn_growth: g::warn_growth(text(&WARN_GROWTH)).unwrap(),
            lines: g::boolean(text(&LINES)).unwrap(),
            demangle: g::boolean(text(&DEMANGLE)).unwrap(),
            php: g::php_mode(text(&PHP)).unwrap(),
            php_oom_dump: g::boolean(text(&PHP_OOM_DUMP)).unwrap(),
            php_request_frame: g::boolean(text(&PHP_REQUEST_FRAME)).unwrap(),
            php_peak_bytes: g::warn_bytes(text(&PHP_PEAK_BYTES)).unwrap(),
            unwind: g::unwind(text(&UNWIND)).unwrap(),
            poison: g::poison(text(&POISON)).unwrap(),
        };
        assert_eq!(parsed, d);
        assert_eq!(OUTPUT.default, crate::template::DEFAULT);
    }
}

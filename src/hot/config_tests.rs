//! `hot::config`'s unit tests: the starting values are the contract
//! crate's typed defaults, and parsing reads values without applying them.

use super::*;

/// What the library starts from is the contract crate's table
/// (`heaplive_format::settings::DEFAULTS`, whose texts the README shows).
#[test]
fn starting_values_are_the_contract_defaults() {
    let c = Config::defaults();
    let d = s::DEFAULTS;
    assert_eq!(c.interval, d.sample_interval);
    assert_eq!(c.seed, d.seed);
    assert_eq!(c.dump_at_exit, d.dump_at_exit);
    assert_eq!(c.dump_empty, d.dump_empty);
    assert_eq!(c.signal, d.signal);
    assert_eq!(c.dump_every_ms, d.dump_every_ms);
    assert_eq!((c.folded, c.pprof), (d.format.folded, d.format.pprof));
    assert_eq!(c.views, d.views);
    assert_eq!(c.peak_growth, d.peak_growth);
    assert_eq!(c.start, d.start);
    assert_eq!(c.warn_bytes, d.warn_bytes);
    assert_eq!(c.warn_blocks, d.warn_blocks);
    assert_eq!(c.warn_growth, d.warn_growth);
    assert_eq!(c.lines, d.lines);
    assert_eq!(c.demangle, d.demangle);
    assert_eq!(c.php, d.php);
    assert_eq!(c.php_oom_dump, d.php_oom_dump);
    assert_eq!(c.php_request_frame, d.php_request_frame);
    assert_eq!(c.php_peak_bytes, d.php_peak_bytes);
    assert_eq!(c.unwind, d.unwind);
    assert_eq!(c.output_template(), s::OUTPUT.default);
    // Nothing set: parsing keeps every default and asks for no effect
    // beyond them.
    let mut p = Config::defaults();
    let e = parse(&|_| None, &mut p);
    assert_eq!(
        e,
        Effects {
            peak_growth: d.peak_growth,
            poison: d.poison
        }
    );
    assert_eq!(
        (p.interval, p.signal, p.start),
        (c.interval, c.signal, c.start)
    );
}

/// `parse` reads a text of `NAME=value` lines into a Config of its own and
/// returns the effects, without touching the live configuration or the
/// other modules; a bad value keeps the default.
#[test]
fn parsing_reads_values_and_applies_nothing() {
    let text = b"HEAPLIVE_SAMPLE_INTERVAL=1M\nHEAPLIVE_SIGNAL=USR1\nHEAPLIVE_PEAK_GROWTH=1.5\nHEAPLIVE_POISON=free\nHEAPLIVE_WARN_GROWTH=bad\nHEAPLIVE_START=0\nHEAPLIVE_VIEWS=live,alloc\n";
    let mut c = Config::defaults();
    let e = parse(&|n| lookup(text, n.to_bytes()), &mut c);
    assert_eq!(c.interval, 1 << 20);
    assert_eq!(c.signal, libc::SIGUSR1);
    assert_eq!(c.peak_growth, 1.5);
    assert!(!c.start);
    assert!(c.views.alloc && c.views.live && !c.views.peak);
    assert_eq!(
        c.warn_growth,
        s::DEFAULTS.warn_growth,
        "a bad value keeps the default"
    );
    assert_eq!(
        e,
        Effects {
            peak_growth: 1.5,
            poison: grammar::Poison {
                alloc: false,
                free: true
            }
        }
    );
    // Nothing applied: the live configuration is as before.
    assert_eq!(get().interval, s::DEFAULTS.sample_interval);
}

/// `%e` is the program's name made safe for a path: a name of dots only
/// (argv[0] `..`) would climb out of a template's directory.
#[test]
fn program_names_of_dots_only_do_not_climb() {
    assert_eq!(file_safe_name(b"..").as_bytes(), b"__");
    assert_eq!(file_safe_name(b".").as_bytes(), b"_");
    assert_eq!(file_safe_name(b"...").as_bytes(), b"___");
    assert_eq!(file_safe_name(b"").as_bytes(), b"unknown");
    assert_eq!(file_safe_name(b"php-fpm8.2").as_bytes(), b"php-fpm8.2");
    assert_eq!(file_safe_name(b".hidden").as_bytes(), b".hidden");
    assert_eq!(file_safe_name(b"a/b c").as_bytes(), b"a_b_c");
}

//! Property tests of the grammars every `HEAPLIVE_*` value is read with
//! (the library parses them inside the host process before main, where a
//! panic aborts the host) and of the folded parser (the command reads
//! files of any origin): random and adversarial inputs from a fixed-seed
//! generator, so every run tries the same cases and a failure names the
//! seed and the input. No timing is measured.

use heaplive_format::folded;
use heaplive_format::grammar;
use heaplive_format::settings;
use heaplive_format::signal;
use heaplive_format::template;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
}

/// Pieces the grammars care about, and some they must refuse.
const TOKENS: &[&[u8]] = &[
    b"0",
    b"1",
    b"7",
    b"42",
    b"512",
    b"1024",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999",
    b"K",
    b"k",
    b"KiB",
    b"M",
    b"G",
    b"GB",
    b"T",
    b"ms",
    b"s",
    b"m",
    b"h",
    b"min",
    b"d",
    b".",
    b"..",
    b"1.5",
    b"-",
    b"+",
    b" ",
    b"\t",
    b"\n",
    b",",
    b",,",
    b"%",
    b"%p",
    b"%e",
    b"%n",
    b"%%",
    b"%x",
    b"/",
    b"//",
    b"*",
    b"?",
    b"[",
    b"]",
    b"[!",
    b"a-z",
    b"SIG",
    b"USR1",
    b"usr2",
    b"RTMIN",
    b"RTMAX",
    b"+3",
    b"-2",
    b"SEGV",
    b"KILL",
    b"none",
    b"folded",
    b"pprof",
    b"live",
    b"alloc",
    b"peak",
    b"samples",
    b"auto",
    b"native",
    b"off",
    b"on",
    b"yes",
    b"true",
    b"cached",
    b"libgcc",
    b"check",
    b"php-fpm",
    b"\0",
    b"\xff",
    b"\xc3\xa9",
    b"\xef\xbb\xbf",
    b"e",
    b"E",
    b"inf",
    b"NaN",
    b"1e308",
];

fn random_value(r: &mut Rng) -> Vec<u8> {
    let mut v = Vec::new();
    match r.below(4) {
        // Mostly token soup.
        0..=1 => {
            for _ in 0..r.below(8) {
                v.extend_from_slice(r.pick(TOKENS));
            }
        }
        // Raw bytes.
        2 => {
            for _ in 0..r.below(24) {
                v.push(r.next() as u8);
            }
        }
        // Long values around the buffers' limits.
        _ => {
            let n = r.pick(&[4095usize, 4096, 4097, 8192]);
            let t = r.pick(TOKENS);
            while v.len() < n {
                v.extend_from_slice(t);
            }
            v.truncate(n);
        }
    }
    v
}

/// Every setting's grammar: no panic, the same answer twice, and a refusal
/// that reads as one clear clause (not empty, no line break).
#[test]
fn every_grammar_answers_every_input_clearly() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..30_000 {
        let v = random_value(&mut r);
        for s in settings::ALL {
            let a = s.grammar.check(&v);
            assert_eq!(a, s.grammar.check(&v), "{} case {i}", s.name());
            if let Err(why) = a {
                let t = why.to_string();
                assert!(
                    !t.is_empty() && !t.contains('\n'),
                    "{} case {i} {:?}: {t:?}",
                    s.name(),
                    String::from_utf8_lossy(&v)
                );
            }
        }
    }
}

/// Values built to be valid are accepted with the value they say, and the
/// same built one step past a limit are refused.
#[test]
fn built_values_parse_to_what_they_say() {
    let mut r = Rng(42);
    for _ in 0..20_000 {
        let n = r.next() % 2048;
        let (unit, mult): (&str, u64) =
            r.pick(&[("", 1), ("K", 1 << 10), ("m", 1 << 20), ("GiB", 1 << 30)]);
        let pad = r.pick(&["", " ", "\t"]);
        let text = format!("{pad}{n}{unit}{pad}");
        let want = n * mult;
        let got = grammar::sample_interval(text.as_bytes());
        if (1..=grammar::MAX_SAMPLE_INTERVAL).contains(&want) {
            assert_eq!(got, Ok(want), "{text:?}");
        } else {
            assert!(got.is_err(), "{text:?}");
        }
        let ms = r.next() % (2 * grammar::MAX_DUMP_EVERY_MS);
        let got = grammar::dump_every(format!("{ms}ms").as_bytes());
        if ms <= grammar::MAX_DUMP_EVERY_MS {
            assert_eq!(got, Ok(ms), "{ms}ms");
        } else {
            assert!(got.is_err(), "{ms}ms");
        }
        let blocks = r.next() % (2 * grammar::MAX_WARN_BLOCKS);
        assert_eq!(
            grammar::warn_blocks(blocks.to_string().as_bytes()).is_ok(),
            blocks <= grammar::MAX_WARN_BLOCKS
        );
    }
}

/// A signal the grammar accepts is one the policy accepts and a real
/// signal number (or 0, none).
#[test]
fn accepted_signals_pass_the_policy() {
    let mut r = Rng(7);
    for _ in 0..30_000 {
        let v = random_value(&mut r);
        if let Ok(n) = signal::parse(&v) {
            assert!(
                (0..=64).contains(&n),
                "{:?} -> {n}",
                String::from_utf8_lossy(&v)
            );
            assert_eq!(signal::check(n), Ok(n));
        }
    }
    for n in 0..=70 {
        let _ = signal::parse(n.to_string().as_bytes());
        let _ = signal::parse(format!("RTMIN+{n}").as_bytes());
        let _ = signal::parse(format!("SIGRTMAX-{n}").as_bytes());
    }
}

/// The expansion of a template is recognised as one of its files (what
/// `heaplive run` lists), however many `%e` it has.
#[test]
fn expanded_templates_match_their_template() {
    let mut r = Rng(3);
    let parts: &[&str] = &["%p", "%e", "%n", "%%", ".", "-", "a", "x.folded", "%e%e"];
    let names: &[&str] = &["php-fpm8.2", "a", "e", "x.folded", "%p", "p1.2"];
    for _ in 0..5_000 {
        let mut t = String::from("h");
        for _ in 0..r.below(12) {
            t.push_str(r.pick(parts));
        }
        assert_eq!(template::check(t.as_bytes()), Ok(()), "{t}");
        let exe = r.pick(names);
        let name = template::expand(
            &t,
            r.next() as u32 % 99_999 + 1,
            exe,
            r.next() as u32 % 50 + 1,
        );
        assert!(template::matches(&t, &name), "{t} -> {name}");
    }
}

/// A plain recursive glob matcher, the reference for the linear one.
fn glob_ref(p: &[u8], n: &[u8]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some(b'*') => (0..=n.len()).any(|k| glob_ref(&p[1..], &n[k..])),
        Some(b'?') => !n.is_empty() && glob_ref(&p[1..], &n[1..]),
        Some(b'[') => {
            let neg = p.get(1) == Some(&b'!');
            let start = if neg { 2 } else { 1 };
            let Some(close) = p[start + 1..]
                .iter()
                .position(|&b| b == b']')
                .map(|i| i + start + 1)
            else {
                return n.first() == Some(&b'[') && glob_ref(&p[1..], &n[1..]);
            };
            let Some(&c) = n.first() else { return false };
            let set = &p[start..close];
            let mut hit = false;
            let mut j = 0;
            while j < set.len() {
                if j + 2 < set.len() && set[j + 1] == b'-' {
                    hit |= set[j] <= c && c <= set[j + 2];
                    j += 3;
                } else {
                    hit |= set[j] == c;
                    j += 1;
                }
            }
            hit != neg && glob_ref(&p[close + 1..], &n[1..])
        }
        Some(&b) => n.first() == Some(&b) && glob_ref(&p[1..], &n[1..]),
    }
}

/// HEAPLIVE_PROGRAMS: the linear matcher agrees with the reference on
/// random patterns and names.
#[test]
fn program_globs_agree_with_a_reference_matcher() {
    let mut r = Rng(11);
    let pieces: &[&str] = &[
        "a", "b", "-", "*", "?", "[ab]", "[!a]", "[a-c]", "[]a]", "**",
    ];
    for _ in 0..50_000 {
        let mut p = String::new();
        for _ in 0..r.below(6) {
            p.push_str(r.pick(pieces));
        }
        let name: Vec<u8> = (0..r.below(8)).map(|_| r.pick(b"ab-c]")).collect();
        if p.is_empty() {
            continue;
        }
        assert_eq!(
            grammar::glob_match(p.as_bytes(), &name),
            glob_ref(p.as_bytes(), &name),
            "{p} vs {}",
            String::from_utf8_lossy(&name)
        );
        if grammar::programs(p.as_bytes()).is_ok() {
            assert_eq!(
                grammar::programs_match(p.as_bytes(), &name),
                glob_ref(p.as_bytes(), &name)
            );
        }
    }
}

/// The folded parser on random and damaged files: no panic; an error names
/// the file (and a line where there is one); an accepted file written back
/// reads back the same, with the same total.
#[test]
fn folded_parser_round_trips_or_says_where() {
    let mut r = Rng(0xdead_beef);
    let frames: &[&str] = &[
        "main",
        "_start",
        "operator new(unsigned long)",
        "foo (a.c:12)",
        "x 12",
        "[jit]",
        "é",
        "a:b",
        "[truncated]",
        " ",
    ];
    let counts: &[&str] = &[
        "0",
        "1",
        "4096",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "",
        "1.5",
        "12 13",
    ];
    for i in 0..20_000 {
        let mut text = Vec::new();
        if r.below(10) == 0 {
            text.extend_from_slice("\u{feff}".as_bytes());
        }
        for _ in 0..r.below(6) {
            let k = r.below(4) + 1;
            let stack: Vec<&str> = (0..k).map(|_| r.pick(frames)).collect();
            text.extend_from_slice(stack.join(";").as_bytes());
            text.push(b' ');
            let c = if r.below(5) == 0 {
                r.pick(counts)
            } else {
                "100"
            };
            text.extend_from_slice(c.as_bytes());
            text.extend_from_slice(if r.below(6) == 0 { b"\r\n" } else { b"\n" });
        }
        // Damage: a random byte somewhere, sometimes.
        if !text.is_empty() && r.below(4) == 0 {
            let at = r.below(text.len());
            text[at] = r.next() as u8;
        }
        match folded::parse("f.folded", &text) {
            Ok(stacks) => {
                let mut out = Vec::new();
                stacks.write(&mut out).unwrap();
                let again = folded::parse("f.folded", &out)
                    .unwrap_or_else(|e| panic!("case {i}: written back, refused: {e}\n{out:?}"));
                assert_eq!(again, stacks, "case {i}");
                assert_eq!(again.total(), stacks.total());
                assert!(
                    stacks.stacks.keys().all(|s| !s.starts_with('\u{feff}')),
                    "case {i}"
                );
            }
            Err(e) => {
                assert!(e.starts_with("f.folded:"), "case {i}: {e}");
                assert!(!e.contains('\n'), "case {i}: {e}");
            }
        }
    }
}

//! PHP frames read in place (issue 26), checked against process_vm_readv:
//! odd frames (generators, fibers, prologues, exceptions, freed includes,
//! rebound closures, trampolines, `exit()` deep in the stack) under
//! php-cli, with and without the JIT.

use crate::common::*;
use crate::php_harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Included templates whose top-level op_arrays are freed after each
/// include (no opcache on the CLI), so that the next one gets the same
/// addresses: a name cached by address alone would be the first file's.
fn odd_templates(dir: &Path) {
    for i in 1..=6 {
        std::fs::write(
            dir.join(format!("tpl{i}.php")),
            format!("<?php\n$t = str_repeat('t{i}', 1000 + mt_rand(1, 9));\nreturn strlen($t) + count([{i}, 2, 3]);\n"),
        )
        .unwrap();
    }
}

/// Frames a walk may find torn or odd: generators (`yield from`), fibers
/// switching back and forth (8.1+), an allocation in a function's prologue
/// (default values, a big array literal), an exception unwinding through
/// frames, includes whose op_arrays are freed and reused, closures rebound
/// to other classes, `__call`/`__callStatic` trampolines, and `exit()` deep
/// in the stack (status 3).
const ODD_PHP: &str = r#"<?php
function inner_gen($k) { for ($i = 0; $i < 3; $i++) { yield str_repeat('g', 3000 + $i + $k); } }
function outer_gen() { yield from inner_gen(1); yield from inner_gen(2); }
$keep = [];
foreach (outer_gen() as $v) { $keep[] = $v; }
if (PHP_VERSION_ID >= 80100) { $fibers = [];
for ($f = 0; $f < 3; $f++) { $fibers[] = new Fiber(function ($n) use (&$keep) {
        for ($i = 0; $i < 4; $i++) { $keep[] = str_repeat('f', 2000 + $n + $i); $n = Fiber::suspend($i); } }); }
foreach ($fibers as $i => $fb) { $fb->start($i); }
for ($r = 0; $r < 4; $r++) { foreach ($fibers as $i => $fb) { if (!$fb->isTerminated()) $fb->resume($r); } }
} else { for ($i = 0; $i < 12; $i++) { $keep[] = str_repeat('f', 2000 + $i); } }
function defaults($a = [1, 2, 3, 4, 5, 6, 7, 8], $b = ['x' => 1, 'y' => 2, 'z' => [K::C, K::C, 3]], $c = PHP_INT_MAX, $d = 'd') {
    $big = [str_repeat($d, 100), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, [1, [2, [3]]]];
    return count($a) + count($b) + count($big);
}
for ($i = 0; $i < 50; $i++) { $keep[] = defaults(); }
function thrower($d) { $x = str_repeat('e', 500 + $d); if ($d == 0) throw new RuntimeException($x); return thrower($d - 1) . $x; }
for ($i = 0; $i < 20; $i++) { try { thrower(8); } catch (RuntimeException $e) { $keep[] = strlen($e->getMessage()); } }
for ($r = 0; $r < 3; $r++) { for ($i = 1; $i <= 6; $i++) { $keep[] = include __DIR__ . "/tpl$i.php"; } }
class A { public $v = 'a'; } class B { public $v = 'b'; } class K { const C = 'k'; }
class M { function __call($n, $args) { return str_repeat($n, 300); } static function __callStatic($n, $a) { return str_repeat($n, 200); } }
$cl = function () { return str_repeat($this->v, 700); };
for ($i = 0; $i < 10; $i++) { $keep[] = Closure::bind($cl, $i % 2 ? new A : new B, $i % 2 ? A::class : B::class)(); }
$m = new M;
foreach (['alpha', 'beta', 'gamma'] as $n) { $keep[] = $m->$n(); $keep[] = M::$n(); }
$keep[] = array_map(function ($x) { return str_repeat('m', $x); }, [100, 200, 300]);
echo count($keep), "\n";
function deep($d) { $s = str_repeat('x', 100 + $d); if ($d == 0) { echo "bye\n"; exit(3); } return deep($d - 1) . $s; }
deep(30);
"#;

/// Runs odd.php (with `php_args` before the script) in exact mode with
/// HEAPLIVE_UNWIND=check, where every PHP walk read in place is made again
/// with process_vm_readv and no cache: no walk differs, the script's output
/// and status are as without the preload, and the allocation view shows
/// the PHP frames a user expects.
fn odd_frames_check(dir: &Path, php_args: &[&str]) {
    require_php();
    odd_templates(dir);
    let script = write_file(dir, "odd.php", ODD_PHP);
    let run = |preload: bool| {
        let mut c = Command::new(php_bin());
        c.args(php_args).arg(&script).current_dir(dir);
        clean_env(&mut c);
        if preload {
            c.env("LD_PRELOAD", lib())
                .env("HEAPLIVE_SAMPLE_INTERVAL", "1")
                .env("HEAPLIVE_UNWIND", "check")
                .env("HEAPLIVE_VIEWS", "live,alloc")
                .env("HEAPLIVE_OUTPUT", dir.join("heaplive.%e.%p.%n.folded"))
                .env("HEAPLIVE_LOG", dir.join("heaplive.log"));
        }
        c.output().unwrap()
    };
    let plain = run(false);
    let out = run(true);
    assert_eq!(plain.status.code(), Some(3), "{}", show(&plain));
    assert_status(&out, 3, &format!("{}\n{}", show(&out), log_of(dir)));
    assert_eq!(stdout(&out), stdout(&plain));
    assert_eq!(stdout(&out), "123\nbye\n");
    let log = log_of(dir);
    let (walks, differed) = log
        .lines()
        .find_map(|l| {
            let r = l.split_once("php frames check: ")?.1;
            let (w, r) = r.split_once(" walks compared, ")?;
            let (d, _) = r.split_once(" differed")?;
            Some((w.parse::<u64>().ok()?, d.parse::<u64>().ok()?))
        })
        .unwrap_or_else(|| panic!("no php frames check summary\n{log}"));
    assert!(walks > 500, "{walks} walks compared\n{log}");
    assert_eq!(differed, 0, "{log}");
    let pid = heaplive_pid(&log).unwrap();
    // "exit dump NAME.folded and NAME.alloc.folded: ..."
    let alloc = dumps_in_log(dir, pid, "exit")
        .into_iter()
        .next()
        .and_then(|p| {
            let p = p.display().to_string();
            Some(PathBuf::from(p.split_once(" and ")?.1))
        })
        .unwrap_or_else(|| panic!("no exit dump with an allocation view\n{log}"));
    let stacks = parse_folded(&alloc);
    let mut want = vec![
        "{main} (odd.php:5);inner_gen (odd.php:2);str_repeat [internal]".to_string(),
        "{main} (odd.php:16);defaults (odd.php:13);str_repeat [internal]".to_string(),
        // The default value's array, made in the prologue (RECV_INIT).
        "{main} (odd.php:16);defaults (odd.php:12)".to_string(),
        "{main} (odd.php:18);thrower (odd.php:17);thrower (odd.php:17);str_repeat [internal]"
            .to_string(),
        "{main} (odd.php:23);A::{closure:odd.php:22-22} (odd.php:22);str_repeat [internal]".to_string(),
        "{main} (odd.php:23);B::{closure:odd.php:22-22} (odd.php:22);str_repeat [internal]".to_string(),
        "{main} (odd.php:25);M::__call (odd.php:21);str_repeat [internal]".to_string(),
        "{main} (odd.php:26);array_map [internal];{closure:odd.php:26-26} (odd.php:26);str_repeat [internal]"
            .to_string(),
    ];
    for i in 1..=6 {
        want.push(format!(
            "{{main}} (odd.php:19);{{include}} (tpl{i}.php:2);str_repeat [internal]"
        ));
    }
    if php_version() >= (8, 1) {
        want.push("{main} (odd.php:10);Fiber::resume [internal];{closure:odd.php:7-8} (odd.php:8);str_repeat [internal]".to_string());
    }
    let php = assert_php_stacks(&stacks, &want);
    assert!(
        php.iter().any(|p| p.starts_with("{main} (odd.php:29);")
            && p.matches("deep (odd.php:28)").count() >= 30),
        "no stack 30 frames deep in deep()\n{}",
        php.join("\n")
    );
}

#[test]
fn cli_odd_frames_read_in_place_match_the_safe_reads() {
    odd_frames_check(&tempdir("php-cli-odd-frames"), &[]);
}

#[test]
fn cli_odd_frames_read_in_place_match_the_safe_reads_with_the_jit() {
    odd_frames_check(
        &tempdir("php-cli-odd-frames-jit"),
        &[
            "-d",
            "opcache.enable_cli=1",
            "-d",
            "opcache.jit=tracing",
            "-d",
            "opcache.jit_buffer_size=16M",
        ],
    );
}

//! The ZendMM handlers' common paths (issue 26): an emalloc that is not
//! sampled goes to ZendMM's own bin-specialised `_emalloc_<bin>` after the
//! countdown, an efree that the filter clears jumps straight to ZendMM's
//! free, and an erealloc of a small block works its new block out without
//! asking ZendMM. These tests check what those shortcuts could get wrong:
//! the bytes of small strings grown and shrunk by erealloc, exactly, and
//! the frees of sampled blocks, every one found.

use crate::common::*;
use crate::php_harness::{
    READY_THEN_WAIT, assert_within, bytes_with_frame, dump_while_ready, php_dir, top_stacks,
    zend_mm_bytes_under,
};

/// Exact mode: small strings grown by `.=` in 13-byte steps (erealloc in
/// place within a bin, or to the next bin), serialize() and json_encode()
/// results (smart_str trims them by erealloc: shrunk in place or moved to a
/// smaller bin) and short str_repeat strings: the live ZendMM bytes under
/// `build` equal the script's memory_get_usage() delta to the byte. A new
/// block size taken as the requested size's bin for a block shrunk in place
/// (which keeps its larger bin) gets this wrong.
#[test]
fn exact_mode_small_ereallocs_match_memory_get_usage() {
    let (dir, script) = php_dir(
        "php-hooks-small-realloc",
        "small.php",
        &[
            "function build(&$delta) {\n\
             $before = memory_get_usage(); $a = [];\n\
             for ($i = 0; $i < 1500; $i++) {\n\
                 $s = ''; $n = 1 + ($i * 37) % 2900;\n\
                 while (strlen($s) < $n) { $s .= 'abcdefghijklm'; }\n\
                 $a[] = $s;\n\
                 $a[] = serialize(array_fill(0, $i % 40, $i));\n\
                 $a[] = json_encode(range(0, $i % 60));\n\
                 $a[] = str_repeat('x', $i % 300);\n\
             }\n\
             $delta = memory_get_usage() - $before;\n\
             return $a;\n\
         }\n\
         $delta = 0; $keep = build($delta);\n",
            READY_THEN_WAIT,
            "echo count($keep), \"\\n\";\n",
        ]
        .concat(),
    );
    let (file, delta, out) = dump_while_ready(&dir, &script, &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert_eq!(out, "6000\n");
    let stacks = parse_folded(&file);
    let under = bytes_with_frame(&stacks, |f| f.starts_with("build (small.php:"));
    assert!(delta > 1 << 20, "delta {delta}");
    assert_eq!(
        under,
        delta,
        "exact mode: build's live ZendMM bytes vs memory_get_usage() delta\n{}",
        top_stacks(&stacks, 12)
    );
}

/// Sampled at 4 KiB: `churn` makes and frees 1.2 million small strings
/// (about 180 MB, some 45,000 samples, all of them freed again by efree or
/// by the array's destruction), then `hold` keeps 40,000 strings. The dump
/// taken while they are held has no ZendMM bytes left under `churn` (every
/// sampled block's free was found behind the efree filter), and hold's
/// estimate is within 5 standard errors of its memory_get_usage() delta
/// (a false failure about 6e-7 of the time).
#[test]
fn sampled_frees_of_small_blocks_are_all_found() {
    let (dir, script) = php_dir(
        "php-hooks-frees",
        "churn.php",
        &[
            "function churn() {\n\
             for ($r = 0; $r < 300; $r++) {\n\
                 $a = [];\n\
                 for ($i = 0; $i < 4000; $i++) { $a[] = str_repeat('c', 60 + ($i * 7) % 120); }\n\
                 for ($i = 0; $i < 4000; $i += 2) { unset($a[$i]); }\n\
             }\n\
         }\n\
         function hold(&$delta) {\n\
             $before = memory_get_usage(); $a = [];\n\
             for ($i = 0; $i < 40000; $i++) { $a[] = str_repeat('h', 60 + ($i * 7) % 120); }\n\
             $delta = memory_get_usage() - $before;\n\
             return $a;\n\
         }\n\
         churn();\n\
         $delta = 0; $keep = hold($delta);\n",
            READY_THEN_WAIT,
            "echo count($keep), \"\\n\";\n",
        ]
        .concat(),
    );
    let env = [
        ("HEAPLIVE_SAMPLE_INTERVAL", "4096"),
        ("HEAPLIVE_SEED", "11"),
    ];
    let (file, delta, out) = dump_while_ready(&dir, &script, &env);
    assert_eq!(out, "40000\n");
    let stacks = parse_folded(&file);
    let churned = zend_mm_bytes_under(&stacks, "churn (churn.php:");
    assert_eq!(
        churned,
        0,
        "ZendMM samples left under churn, whose blocks were all freed\n{}",
        top_stacks(&stacks, 12)
    );
    let held = zend_mm_bytes_under(&stacks, "hold (churn.php:");
    assert!(delta > 4 << 20, "delta {delta}");
    assert_within(held, delta, 4096, 5.0, "hold's strings");
}

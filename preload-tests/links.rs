//! Issue 25, item 1: root never writes through a link another user
//! planted. As root, in a private mount namespace with its own /tmp (and
//! its own UTS namespace, so that the domain name, the /proc/sys file the
//! links aim at, is this test's own: a write there would change nothing
//! outside), the second user `heaplive-evil` plants symlinks named like
//! the next files heaplive writes: every file of a dump (folded, alloc,
//! samples, pprof, peak), a `%p` template, a fixed HEAPLIVE_OUTPUT,
//! `heaplive_dump(path)`, HEAPLIVE_LOG, `heaplive.<euid>.log`, a temporary,
//! `heaplive flamegraph -o`; they point at a root-only file, at
//! /proc/sys/kernel/domainname, at /proc/sys/kernel/core_pattern (bind-
//! mounted read-only here first, so that nothing can write it) and at
//! /proc/self/fd/1 (the program's stdout). Also a directory on the way
//! that the other user can write (theirs; mode 0777). The targets stay as
//! they were, the program prints what it prints and exits with its status,
//! one line names each refused path and why, and template names land in
//! $TMPDIR (/tmp).

use crate::security::{Report, in_private_tmp};

/// The shell functions every scenario uses: the victim (a root-only file),
/// the other user's directory /tmp/pool, root's sticky /tmp/shared, and
/// `plant LINK TARGET` as the other user.
const SETUP: &str = r#"
[ "$(readlink /proc/self/ns/uts)" != "$OUTER_UTS" ] || { echo "not in a private UTS namespace"; exit 95; }
mount --bind /proc/sys/kernel/core_pattern /proc/sys/kernel/core_pattern || exit 93
mount -o remount,bind,ro /proc/sys/kernel/core_pattern || exit 93
findmnt -n -o OPTIONS /proc/sys/kernel/core_pattern | grep -q '^ro' || exit 94
CORE=$(cat /proc/sys/kernel/core_pattern)
DOMAIN=$(cat /proc/sys/kernel/domainname)
mkdir -m 700 /tmp/secret
echo keep > /tmp/secret/victim
chmod 600 /tmp/secret/victim
runuser -u $EVIL -- mkdir -m 755 /tmp/pool
mkdir -m 1777 /tmp/shared
plant() { runuser -u $EVIL -- ln -s "$2" "$1"; }
# `start NAME ENV...`: links_wait under the preload with ENV (and $ARG as
# its argument), its stdin a FIFO held open on fd 3 until `finish NAME`,
# its output in /tmp/NAME.out and /tmp/NAME.err, $P its pid; returns once
# it printed "ready" (a bounded wait, not a timing assertion).
start() {
    n=$1; shift
    mkfifo /tmp/$n.in
    env LD_PRELOAD=$LIB "$@" $LINKPROGS/links_wait ${ARG:-} < /tmp/$n.in > /tmp/$n.out 2> /tmp/$n.err &
    P=$!
    exec 3> /tmp/$n.in
    for i in $(seq 600); do grep -qx ready /tmp/$n.out && return 0; sleep 0.05; done
    echo "$n: not ready"; exit 96
}
finish() {
    exec 3>&-
    wait $P
    echo "${1}_RC=$?"
    echo "${1}_OUT=$(tr '\n' ' ' < /tmp/$1.out)"
    sed "s/^/$1.err: /" /tmp/$1.err
}
intact() {
    echo "VICTIM=$(tr '\n' ' ' < /tmp/secret/victim)"
    echo "SECRET=$(ls -A /tmp/secret | tr '\n' ' ')"
    [ "$(cat /proc/sys/kernel/domainname)" = "$DOMAIN" ] && echo "DOMAIN=same"
    [ "$(cat /proc/sys/kernel/core_pattern)" = "$CORE" ] && echo "CORE=same"
    echo "TEMPS=$(find /tmp -name '*heaplive-tmp*' ! -user $EVIL | wc -l)"
}
"#;

fn run(script: &str) -> Report {
    // SAFETY: our own namespace link, read only.
    let uts = std::fs::read_link("/proc/self/ns/uts").unwrap();
    // The program is security.rs's ($PROGS), copied out of /tmp.
    let full = format!(
        "OUTER_UTS='{}'\nexport LINKPROGS=\"$PROGS\"\n{SETUP}\n{script}\nintact\n",
        uts.display()
    );
    in_private_tmp(&full)
}

fn assert_intact(r: &Report) {
    r.expect(&[
        ("VICTIM", "keep ", "the root-only file"),
        ("SECRET", "victim ", "nothing new in /tmp/secret"),
        ("DOMAIN", "same", "/proc/sys/kernel/domainname"),
        ("CORE", "same", ""),
        ("TEMPS", "0", "no temporaries left"),
    ]);
}

/// The dump files of the default template (`%p` in it) in a directory the
/// other user owns (a php-fpm pool's working directory), and a fixed
/// HEAPLIVE_OUTPUT there, and HEAPLIVE_LOG and `heaplive.0.log` there:
/// every link is planted, none is followed, the directory is refused as a
/// whole, and everything lands in /tmp.
#[test]
fn links_in_a_directory_of_another_user_are_not_followed() {
    let r = run(r#"
cd /tmp/pool
export HEAPLIVE_SAMPLE_INTERVAL=4096 HEAPLIVE_FORMAT=folded,pprof HEAPLIVE_VIEWS=live,alloc,peak,samples
# The default template (heaplive.%e.%p.%n.folded, in the working
# directory): the number skips a name that exists, so the links are at
# the names of the other files of dump 1; then a %p template.
sh -c 'P=$$
for s in alloc.folded samples.folded pb.gz peak.folded; do
    runuser -u $EVIL -- ln -s /tmp/secret/victim /tmp/pool/heaplive.links_prog.$P.1.$s
done
exec env LD_PRELOAD=$LIB $LINKPROGS/links_prog > /tmp/a.out 2> /tmp/a.err'
echo "RC=$?"
sed 's/^/a.err: /' /tmp/a.err
P=$(ls /tmp | sed -n 's/^heaplive\.links_prog\.\([0-9]*\)\.1\.folded$/\1/p')
echo "P=$P"
echo "OUT=$(tr '\n' ' ' < /tmp/a.out)"
echo "FALLBACK=$(cd /tmp && ls heaplive.links_prog.$P.1.* 2>/dev/null | tr '\n' ' ')"
echo "SAID=$(grep -c "cannot write /tmp/pool/heaplive.links_prog.$P.1.folded (directory /tmp/pool on the way belongs to uid $(id -u $EVIL), who could plant links in it; not used); wrote /tmp/heaplive.links_prog.$P.1.folded instead" /tmp/a.err)"
echo "LINES=$(grep -c 'cannot write /tmp/pool/' /tmp/a.err)"
sh -c 'P=$$
for s in folded alloc.folded samples.folded pb.gz peak.folded; do
    runuser -u $EVIL -- ln -s /tmp/secret/victim /tmp/pool/p.$P.$s
done
exec env LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/pool/p.%p.folded $LINKPROGS/links_prog > /tmp/p.out 2> /tmp/p.err'
echo "P_RC=$?"
echo "P_OUT=$(tr '\n' ' ' < /tmp/p.out)"
echo "P_FALLBACK=$(cd /tmp && ls p.*.* 2>/dev/null | sed 's/^p\.[0-9]*\.//' | tr '\n' ' ')"
echo "P_LINES=$(grep -c 'cannot write /tmp/pool/p\..*directory /tmp/pool on the way belongs to uid' /tmp/p.err)"

plant /tmp/pool/fixed.folded /tmp/secret/victim
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/pool/fixed.folded $LINKPROGS/links_prog > /dev/null 2> /tmp/b.err
echo "FIXED_RC=$?"
echo "FIXED=$(grep -c links_big /tmp/fixed.folded)"
echo "FIXED_SAID=$(grep -c 'cannot write /tmp/pool/fixed.folded (directory /tmp/pool on the way' /tmp/b.err)"

plant /tmp/pool/h.log /tmp/secret/victim
LD_PRELOAD=$LIB HEAPLIVE_LOG=/tmp/pool/h.log HEAPLIVE_OUTPUT=/tmp/out.%n.folded $LINKPROGS/links_prog > /dev/null 2> /tmp/c.err
echo "LOG_RC=$?"
echo "LOG_SAID=$(grep -c "cannot open HEAPLIVE_LOG='/tmp/pool/h.log' (directory /tmp/pool on the way belongs to uid .*); using stderr" /tmp/c.err)"
echo "LOG_STDERR=$(grep -c 'exit dump' /tmp/c.err)"

plant /tmp/pool/heaplive.0.log /tmp/secret/victim
LD_PRELOAD=$LIB $LINKPROGS/links_prog > /dev/null 2> /dev/null
echo "NEAR_RC=$?"
echo "NEAR=$(grep -c 'exit dump' /tmp/heaplive.0.log)"
"#);
    assert_intact(&r);
    r.expect(&[
        ("RC", "5", "the program's exit status"),
        ("OUT", "program output ", ""),
    ]);
    let p = r.get("P");
    assert!(!p.is_empty(), "no dump in /tmp\n{r}");
    let want: String = [
        "alloc.folded",
        "folded",
        "pb.gz",
        "peak.folded",
        "samples.folded",
        "timeline.tsv",
    ]
    .iter()
    .map(|s| format!("heaplive.links_prog.{p}.1.{s} "))
    .collect();
    assert_eq!(r.get("FALLBACK"), want, "every file in /tmp\n{r}");
    r.expect(&[
        ("SAID", "1", "one line names the path and why"),
        // The views are named after the live file, in /tmp by then.
        ("LINES", "2", "one line per file refused"),
        ("P_RC", "5", ""),
        ("P_OUT", "program output ", ""),
        (
            "P_FALLBACK",
            "alloc.folded folded pb.gz peak.folded samples.folded timeline.tsv ",
            "",
        ),
        ("P_LINES", "2", ""),
        ("FIXED_RC", "5", ""),
        ("FIXED", "1", "the fixed name's dump is in /tmp"),
        ("FIXED_SAID", "1", ""),
        ("LOG_RC", "5", ""),
        ("LOG_SAID", "1", ""),
        ("LOG_STDERR", "1", "the log went to stderr"),
        ("NEAR_RC", "5", ""),
        ("NEAR", "1", "heaplive.0.log went to /tmp"),
    ]);
}

/// In root's sticky /tmp/shared the other user may add names: their links
/// at the dump files' names, at a temporary's name and at
/// `heaplive.0.log` are refused (the link is theirs) and the files land in
/// /tmp; `heaplive_dump(path)` through their links to /proc/sys files, to
/// the program's stdout (/proc/self/fd/1) and into their directory fails
/// with an errno; root's own link to a /proc/sys file is refused too
/// (a kernel file), while `heaplive_dump("/dev/stdout")` still works.
#[test]
fn links_of_another_user_in_a_sticky_directory_are_not_followed() {
    let r = run(r#"
export HEAPLIVE_SAMPLE_INTERVAL=4096 HEAPLIVE_VIEWS=live,alloc,peak,samples
sh -c 'P=$$
for s in folded alloc.folded samples.folded peak.folded; do
    runuser -u $EVIL -- ln -s /tmp/secret/victim /tmp/shared/h.$P.$s
done
runuser -u $EVIL -- ln -s /tmp/secret/victim /tmp/shared/heaplive.0.log
exec env LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared/h.%p.folded $LINKPROGS/links_prog > /tmp/a.out 2> /tmp/a.err'
echo "RC=$?"
sed 's/^/a.err: /' /tmp/a.err
P=$(ls /tmp | sed -n 's/^h\.\([0-9]*\)\.folded$/\1/p')
echo "P=$P"
echo "FALLBACK=$(cd /tmp && ls h.$P.* 2>/dev/null | tr '\n' ' ')"
echo "SAID=$(grep -c "cannot write /tmp/shared/h.$P.folded (/tmp/shared/h.$P.folded is a symlink owned by uid $(id -u $EVIL), not by root; not followed); wrote /tmp/h.$P.folded instead" /tmp/a.err)"
echo "LINES=$(grep -c 'cannot write /tmp/shared/' /tmp/a.err)"

sh -c 'P=$$
runuser -u $EVIL -- ln -s /tmp/secret/victim /tmp/shared/.t.folded.heaplive-tmp.$P
exec env LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared/t.folded $LINKPROGS/links_prog > /dev/null 2> /tmp/t.err'
echo "TEMP_RC=$?"
echo "TEMP=$(grep -c links_big /tmp/t.folded)"
echo "TEMP_SAID=$(grep -c 'cannot write /tmp/shared/t.folded (File exists (os error 17)); wrote /tmp/t.folded instead' /tmp/t.err)"

LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared/n.%n.folded $LINKPROGS/links_prog > /dev/null 2> /dev/null
echo "NEAR_RC=$?"
echo "NEAR=$(grep -c 'exit dump' /tmp/heaplive.0.log)"

plant /tmp/shared/domain.folded /proc/sys/kernel/domainname
plant /tmp/shared/core.folded /proc/sys/kernel/core_pattern
plant /tmp/shared/fd1.folded /proc/self/fd/1
plant /tmp/shared/v.folded /tmp/secret/victim
plant /tmp/pool/x.folded /tmp/secret/victim
ln -s /proc/sys/kernel/domainname /tmp/shared/mine.folded
LD_PRELOAD=$LIB HEAPLIVE_DUMP_AT_EXIT=0 $LINKPROGS/links_prog /tmp/shared/domain.folded /tmp/shared/core.folded /tmp/shared/fd1.folded /tmp/shared/v.folded /tmp/pool/x.folded /tmp/shared/mine.folded > /tmp/e.out 2> /tmp/e.err
echo "E_RC=$?"
while read -r path rc err; do echo "R:$path=$rc $err"; done < /tmp/e.out
echo "E_OUT=$(grep -vc ' -1 ' /tmp/e.out)"
echo "E_SAID=$(grep -c 'is a symlink owned by uid' /tmp/e.err)"
echo "E_KERNEL=$(grep -c 'mine.folded.*kernel filesystem' /tmp/e.err)"
echo "STDOUT=$(LD_PRELOAD=$LIB HEAPLIVE_DUMP_AT_EXIT=0 $LINKPROGS/links_prog /dev/stdout | grep -c 'links_big')"
"#);
    assert_intact(&r);
    assert_eq!(r.get("RC"), "5", "{r}");
    let p = r.get("P");
    let want: String = [
        "alloc.folded",
        "folded",
        "peak.folded",
        "samples.folded",
        "timeline.tsv",
    ]
    .iter()
    .map(|s| format!("h.{p}.{s} "))
    .collect();
    assert_eq!(r.get("FALLBACK"), want, "every file in /tmp\n{r}");
    r.expect(&[
        ("SAID", "1", ""),
        // The views are named after the live file, in /tmp by then.
        ("LINES", "1", ""),
        ("TEMP_RC", "5", ""),
        ("TEMP", "1", ""),
        ("TEMP_SAID", "1", ""),
        ("NEAR_RC", "5", ""),
        ("NEAR", "1", ""),
        ("E_RC", "5", ""),
    ]);
    let (eloop, eacces, eperm) = (libc::ELOOP, libc::EACCES, libc::EPERM);
    for (path, want) in [
        ("/tmp/shared/domain.folded", eloop),
        ("/tmp/shared/core.folded", eloop),
        ("/tmp/shared/fd1.folded", eloop),
        ("/tmp/shared/v.folded", eloop),
        ("/tmp/pool/x.folded", eacces),
        ("/tmp/shared/mine.folded", eperm),
    ] {
        assert_eq!(
            r.get(&format!("R:{path}")),
            format!("-1 {want}"),
            "{path}\n{r}"
        );
    }
    r.expect(&[
        ("E_OUT", "1", "stdout holds the program's own line only"),
        ("E_SAID", "4", ""),
        ("E_KERNEL", "1", ""),
        ("STDOUT", "1", "heaplive_dump(\"/dev/stdout\")"),
    ]);
}

/// A directory on the way that the other user can write (mode 0777, not
/// sticky) holding root's dump directory: they could swap the dump
/// directory for a link to /tmp/secret. Refused whether or not they did;
/// the dumps land in /tmp.
#[test]
fn a_directory_on_the_way_that_another_user_can_write_is_refused() {
    let r = run(r#"
export HEAPLIVE_SAMPLE_INTERVAL=1
mkdir -m 777 /tmp/open /tmp/open2
mkdir -m 755 /tmp/open/dumps /tmp/open2/dumps
runuser -u $EVIL -- sh -c 'mv /tmp/open/dumps /tmp/open/old && ln -s /tmp/secret /tmp/open/dumps'
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/open/dumps/g.%n.folded $LINKPROGS/links_prog > /tmp/a.out 2> /tmp/a.err
echo "RC=$?"
echo "G=$(grep -c links_big /tmp/g.1.folded)"
echo "SAID=$(grep -c 'cannot write /tmp/open/dumps/g.1.folded (directory /tmp/open on the way is writable by other users (mode 0777, not sticky); not used); wrote /tmp/g.1.folded instead' /tmp/a.err)"
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/open2/dumps/k.%n.folded $LINKPROGS/links_prog > /dev/null 2> /tmp/b.err
echo "K=$(grep -c links_big /tmp/k.1.folded)"
echo "K_IN_DUMPS=$(ls /tmp/open2/dumps | wc -l)"
echo "K_SAID=$(grep -c 'directory /tmp/open2 on the way is writable by other users' /tmp/b.err)"
"#);
    assert_intact(&r);
    r.expect(&[
        ("RC", "5", ""),
        ("G", "1", ""),
        ("SAID", "1", ""),
        ("K", "1", ""),
        ("K_IN_DUMPS", "0", ""),
        ("K_SAID", "1", ""),
    ]);
}

/// `heaplive flamegraph -o` follows the same rules: a link the other user
/// planted (in their directory, in a sticky one) is refused with one line
/// and status 1; `-o /dev/stdout` and a new file of root's work.
#[test]
fn flamegraph_output_through_a_planted_link_is_refused() {
    let r = run(r#"
printf 'main;links_big 1000\n' > /tmp/in.folded
plant /tmp/pool/g.svg /tmp/secret/victim
plant /tmp/shared/g.svg /tmp/secret/victim
$HEAPLIVE flamegraph /tmp/in.folded -o /tmp/pool/g.svg > /dev/null 2> /tmp/a.err
echo "A_RC=$?"
echo "A_SAID=$(grep -c '^heaplive: /tmp/pool/g.svg: directory /tmp/pool on the way belongs to uid' /tmp/a.err)"
$HEAPLIVE flamegraph /tmp/in.folded -o /tmp/shared/g.svg > /dev/null 2> /tmp/b.err
echo "B_RC=$?"
echo "B_SAID=$(grep -c '^heaplive: /tmp/shared/g.svg: /tmp/shared/g.svg is a symlink owned by uid' /tmp/b.err)"
$HEAPLIVE flamegraph /tmp/in.folded -o /dev/stdout | grep -q 'links_big' && echo "STDOUT=1"
$HEAPLIVE flamegraph /tmp/in.folded -o /tmp/shared/mine.svg && grep -q 'links_big' /tmp/shared/mine.svg && echo "MINE=1"
"#);
    assert_intact(&r);
    r.expect(&[
        ("A_RC", "1", ""),
        ("A_SAID", "1", ""),
        ("B_RC", "1", ""),
        ("B_SAID", "1", ""),
        ("STDOUT", "1", ""),
        ("MINE", "1", ""),
    ]);
}

/// The status directory `/tmp/heaplive-0` planted before root's process
/// starts (a symlink to a directory of the other user's, mode 0777), with
/// decoys at the fallback's names (`/tmp/heaplive-0.AAAAAA`, their own
/// directory; `/tmp/heaplive-0.BBBBBB`, their link to root's /tmp/secret):
/// nothing is written through the link or into the decoys, one line per
/// process names the directory and why and where the status went instead
/// (a new directory of root's, mode 0700, from mkdtemp), and `heaplive
/// dump` still finds the dump there. HEAPLIVE_SIGNAL=USR1 writes a status
/// file when heaplive's thread starts too (USR2 only after a dump).
#[test]
fn a_planted_status_directory_is_not_followed() {
    let r = run(r#"
runuser -u $EVIL -- mkdir -m 777 /tmp/evil
plant /tmp/heaplive-0 /tmp/evil
runuser -u $EVIL -- mkdir -m 700 /tmp/heaplive-0.AAAAAA
plant /tmp/heaplive-0.BBBBBB /tmp/secret
export HEAPLIVE_SAMPLE_INTERVAL=4096
for sig in USR2 USR1; do
    start $sig HEAPLIVE_SIGNAL=$sig HEAPLIVE_OUTPUT=/tmp/s.%p.%n.folded
    $HEAPLIVE dump $P > /tmp/$sig.dump 2> /tmp/$sig.dump.err
    echo "${sig}_DUMP_RC=$?"
    echo "${sig}_DUMP=$(cat /tmp/$sig.dump)"
    echo "${sig}_WANT=/tmp/s.$P.1.folded"
    sed "s/^/$sig.dump.err: /" /tmp/$sig.dump.err
    # Root's own fallback directories, and what each holds while it runs.
    echo "${sig}_HELD=$(find /tmp -maxdepth 1 -name 'heaplive-0.*' -user root -perm 700 -type d | while read d; do ls $d; done | tr '\n' ' ')"
    FB=$(find /tmp -maxdepth 1 -name 'heaplive-0.*' -user root -perm 700 -type d)
    echo "${sig}_PID=$P "
    finish $sig
    echo "${sig}_SAID=$(grep -c "^heaplive\[$P\]: status directory /tmp/heaplive-0 is a symlink; using $FB instead (remove /tmp/heaplive-0 to use it again)$" /tmp/$sig.err)"
    echo "${sig}_STATUS_LINES=$(grep -c 'status directory' /tmp/$sig.err)"
done
echo "FALLBACKS=$(find /tmp -maxdepth 1 -name 'heaplive-0.*' -user root | wc -l)"
echo "LEFT=$(find /tmp -maxdepth 1 -name 'heaplive-0.*' -user root | while read d; do ls -A $d; done | wc -l)"
echo "EVIL_DIR=$(ls -A /tmp/evil /tmp/heaplive-0.AAAAAA | grep -vc ':$\|^$')"
echo "LINK=$(stat -c %F /tmp/heaplive-0)"
"#);
    assert_intact(&r);
    for sig in ["USR2", "USR1"] {
        let k = |s: &str| format!("{sig}_{s}");
        assert_eq!(r.get(&k("DUMP_RC")), "0", "heaplive dump\n{r}");
        assert_eq!(
            r.get(&k("DUMP")),
            r.get(&k("WANT")),
            "heaplive dump names the dump\n{r}"
        );
        assert_eq!(
            r.get(&k("HELD")),
            r.get(&k("PID")),
            "the status file is in root's fallback directory\n{r}"
        );
        r.expect_of(
            sig,
            &[
                ("RC", "6", ""),
                ("OUT", "ready done ", ""),
                ("SAID", "1", "one line says why"),
                ("STATUS_LINES", "1", ""),
            ],
        );
    }
    r.expect(&[
        (
            "FALLBACKS",
            "1",
            "one fallback, reused by the second process",
        ),
        ("LEFT", "0", "status files are removed at exit"),
        ("EVIL_DIR", "0", "nothing in the other user's directories"),
        ("LINK", "symbolic link", ""),
    ]);
}

/// PHP mode's request-peak dumps (`NAME.request.folded` and its samples,
/// maps and timeline files; HEAPLIVE_PHP_PEAK_BYTES=2M, a php-cli script
/// peaking near 8 MiB): in the other user's directory (the default
/// template, run there) every file goes to /tmp with one line each for the
/// dump's own files; in root's sticky /tmp/shared the other user's links
/// at the names of the request dump's other files, and at a fixed
/// template's request name, are refused and the files land in /tmp.
#[test]
fn php_request_peak_dumps_through_planted_links_are_refused() {
    crate::php_harness::require_php();
    let php = crate::php_harness::php_bin();
    let r = run(&format!(
        r#"
PHP={php}
cat > /tmp/r.php <<'PHPEOF'
<?php
function build_page() {{ $a = []; for ($i = 0; $i < 2000; $i++) {{ $a[] = str_repeat('p', 4000) . $i; }} return count($a); }}
echo build_page(), "\n";
PHPEOF
chmod 644 /tmp/r.php
export HEAPLIVE_PHP_PEAK_BYTES=2M HEAPLIVE_SAMPLE_INTERVAL=64K
sh -c 'cd /tmp/pool && exec env LD_PRELOAD=$LIB $0 /tmp/r.php > /tmp/a.out 2> /tmp/a.err' $PHP
echo "A_RC=$?"
echo "A_OUT=$(cat /tmp/a.out)"
sed 's/^/a.err: /' /tmp/a.err
P=$(ls /tmp | sed -n 's/^heaplive\.php[0-9.]*\.\([0-9]*\)\.1\.request\.folded$/\1/p')
echo "A_FILES=$(cd /tmp && ls heaplive.php*.$P.1.* 2>/dev/null | sed 's/^heaplive\.php[0-9.]*\.[0-9]*\.1\.//' | tr '\n' ' ')"
echo "A_SAID=$(grep -c "^heaplive\[$P\]: cannot write /tmp/pool/heaplive\.php[0-9.]*\.$P\.1\.request\.folded (directory /tmp/pool on the way belongs to uid $(id -u $EVIL), who could plant links in it; not used); wrote /tmp/heaplive\.php[0-9.]*\.$P\.1\.request\.folded instead$" /tmp/a.err)"
echo "A_PEAK=$(grep -c "^heaplive\[$P\]: request peak dump /tmp/heaplive\.php[0-9.]*\.$P\.1\.request\.folded: \[cli r\.php\] peaked at" /tmp/a.err)"
echo "A_POOL=$(ls -A /tmp/pool | wc -l)"

sh -c 'P=$$
for s in request.samples.folded request.maps.txt request.timeline.tsv; do
    runuser -u $EVIL -- ln -s /tmp/secret/victim /tmp/shared/r.$P.1.$s
done
exec env LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared/r.%p.%n.folded $0 /tmp/r.php > /tmp/b.out 2> /tmp/b.err' $PHP
echo "B_RC=$?"
echo "B_OUT=$(cat /tmp/b.out)"
sed 's/^/b.err: /' /tmp/b.err
P=$(ls /tmp/shared | sed -n 's/^r\.\([0-9]*\)\.1\.request\.folded$/\1/p')
echo "B_P=$P"
grep -q 'build_page (r.php:2)' /tmp/shared/r.$P.1.request.folded && echo "B_STACK=1"
echo "B_MOVED=$(cd /tmp && ls r.$P.1.request.* | tr '\n' ' ')"
echo "B_LINKS=$(find /tmp/shared -name "r.$P.1.request.*" -type l -user $EVIL | wc -l)"
echo "B_SAID=$(grep -c "^heaplive\[$P\]: cannot write /tmp/shared/r\.$P\.1\.request\.[a-z.]* (/tmp/shared/r\.$P\.1\.request\.[a-z.]* is a symlink owned by uid $(id -u $EVIL), not by root; not followed); wrote /tmp/r\.$P\.1\.request\.[a-z.]* instead$" /tmp/b.err)"
echo "B_REFUSED=$(grep -c 'cannot write' /tmp/b.err)"

plant /tmp/shared/fixed.request.folded /tmp/secret/victim
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared/fixed.folded $PHP /tmp/r.php > /tmp/c.out 2> /tmp/c.err
echo "C_RC=$?"
sed 's/^/c.err: /' /tmp/c.err
echo "C_PEAK=$(grep -c '^heaplive\[[0-9]*\]: request peak dump /tmp/fixed\.request\.folded: \[cli r\.php\] peaked at' /tmp/c.err)"
echo "C_SAID=$(grep -c '^heaplive\[[0-9]*\]: cannot write /tmp/shared/fixed\.request\.folded (/tmp/shared/fixed\.request\.folded is a symlink owned by uid [0-9]*, not by root; not followed); wrote /tmp/fixed\.request\.folded instead$' /tmp/c.err)"
grep -q 'build_page (r.php:2)' /tmp/fixed.request.folded && echo "C_STACK=1"
"#
    ));
    assert_intact(&r);
    for k in ["A", "B"] {
        r.expect_of(k, &[("RC", "0", ""), ("OUT", "2000", "")]);
    }
    r.expect(&[
        (
            "A_FILES",
            "request.folded request.maps.txt request.samples.folded request.timeline.tsv ",
            "the request dump's files, in /tmp",
        ),
        ("A_SAID", "1", ""),
        ("A_PEAK", "1", ""),
        ("A_POOL", "0", "nothing in their directory"),
    ]);
    let p = r.get("B_P");
    let names =
        |v: &[&str]| -> String { v.iter().map(|s| format!("r.{p}.1.request.{s} ")).collect() };
    assert_eq!(r.get("B_STACK"), "1", "the request dump itself\n{r}");
    assert_eq!(
        r.get("B_MOVED"),
        names(&["maps.txt", "samples.folded", "timeline.tsv"]),
        "its other files, in /tmp\n{r}"
    );
    r.expect(&[
        ("B_LINKS", "3", "the links stay as they were"),
        ("B_SAID", "3", "one line per file refused"),
        ("B_REFUSED", "3", ""),
        ("C_RC", "0", ""),
        ("C_PEAK", "1", ""),
        ("C_SAID", "1", ""),
        ("C_STACK", "1", ""),
    ]);
}

/// `heaplive run`'s private directory (`$TMPDIR/heaplive-run.XXXXXX`, the
/// file its processes list their files in) with $TMPDIR a directory the
/// other user owns, or one that anyone may write (0777, not sticky): they
/// could swap the directory, once made, for a link to a directory of
/// root's (here while the program runs: /tmp/secret2, holding a root-only
/// `files`), which `run` would then read, list and remove. It is made in
/// /tmp instead, one line names $TMPDIR and why, nothing is made in
/// $TMPDIR, and `run` lists the program's files and exits with its status.
/// HEAPLIVE_RUN_REPORT set by hand to the other user's link or file is not
/// appended to.
#[test]
fn heaplive_run_makes_no_private_directory_where_another_user_could_swap_it() {
    let r = run(r#"
mkdir -m 700 /tmp/secret2
printf '1\tx\t/tmp/secret/victim\n' > /tmp/secret2/files
chmod 600 /tmp/secret2/files
mkdir -m 777 /tmp/open
export HEAPLIVE_SAMPLE_INTERVAL=4096
for k in pool open; do
    mkfifo /tmp/$k.in
    TMPDIR=/tmp/$k $HEAPLIVE run -o /tmp/shared/$k.%p.%n.folded -- $LINKPROGS/links_wait < /tmp/$k.in > /tmp/$k.out 2> /tmp/$k.err &
    R=$!
    exec 3> /tmp/$k.in
    for i in $(seq 600); do grep -qx ready /tmp/$k.out && break; sleep 0.05; done
    echo "${k}_MADE=$(ls -A /tmp/$k | wc -l)"
    runuser -u $EVIL -- sh -c "for d in /tmp/$k/heaplive-run.*; do [ -e \$d ] && mv \$d /tmp/$k/moved && ln -s /tmp/secret2 \$d; done"
    exec 3>&-
    wait $R
    echo "${k}_RC=$?"
    sed "s/^/$k.err: /" /tmp/$k.err
    P=$(sed -n 's/^heaplive: profiling pid \([0-9]*\);.*/\1/p' /tmp/$k.err)
    echo "${k}_P=$P"
    echo "${k}_LISTED=$(sed -n 's/^  //p' /tmp/$k.err | tr '\n' ' ')"
    echo "${k}_HEAD=$(grep -c "^heaplive: [0-9]* files written by pid $P (links_wait):$" /tmp/$k.err)"
    echo "${k}_SAID=$(grep -c "^heaplive: cannot make the private directory of this run in /tmp/$k (directory /tmp/$k on the way .*; not used); made /tmp/heaplive-run\.[A-Za-z0-9]\{6\} instead$" /tmp/$k.err)"
    echo "${k}_LEFT=$(ls -A /tmp/$k | tr '\n' ' ')"
done
echo "RUN_LEFT=$(ls -d /tmp/heaplive-run.* 2>/dev/null | wc -l)"
# HEAPLIVE_RUN_REPORT by hand: the other user's link (in a sticky
# directory) and their own file (in their directory) are not appended to.
plant /tmp/shared/files /tmp/secret2/files
runuser -u $EVIL -- sh -c ': > /tmp/pool/files'
for f in /tmp/shared/files /tmp/pool/files; do
    LD_PRELOAD=$LIB HEAPLIVE_RUN_REPORT=$f HEAPLIVE_OUTPUT=/tmp/hand.%p.folded $LINKPROGS/links_prog > /dev/null 2>&1
done
echo "HAND=$(ls /tmp | grep -c '^hand\.[0-9]*\.folded$') $(wc -c < /tmp/pool/files)"
echo "SECRET2=$(cat /tmp/secret2/files | tr '\t\n' '  ')"
"#);
    assert_intact(&r);
    r.expect(&[
        ("SECRET2", "1 x /tmp/secret/victim ", "root's file stays"),
        ("RUN_LEFT", "0", "removed at the end"),
        (
            "HAND",
            "2 0",
            "dumps written, nothing appended to their file",
        ),
    ]);
    for k in ["pool", "open"] {
        let g = |s: &str| r.get(&format!("{k}_{s}"));
        r.expect_of(
            k,
            &[
                ("MADE", "0", "nothing made in $TMPDIR"),
                ("LEFT", "", ""),
                ("RC", "6", "the program's status"),
                ("SAID", "1", "one line says why"),
                ("HEAD", "1", ""),
            ],
        );
        let p = g("P");
        let want: String = ["folded", "samples.folded", "timeline.tsv"]
            .iter()
            .map(|s| format!("/tmp/shared/{k}.{p}.1.{s} "))
            .collect();
        assert_eq!(g("LISTED"), want, "the program's files\n{r}");
    }
}

/// `heaplive report -o` and `heaplive run --report` (the same writer as
/// `flamegraph -o`): the other user's link, in their directory or in a
/// sticky one, is refused with one line and status 1 (`run` says so in
/// one line too and exits with its program's status, 5); a new file of
/// root's and `-o /dev/stdout` are written. (`diff` and `merge` write to
/// standard output only: they have no `-o`.)
#[test]
fn report_output_through_a_planted_link_is_refused() {
    let r = run(r#"
export HEAPLIVE_SAMPLE_INTERVAL=4096
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/in.folded $LINKPROGS/links_prog > /dev/null 2>&1
plant /tmp/pool/r.html /tmp/secret/victim
plant /tmp/shared/r.html /tmp/secret/victim
$HEAPLIVE report /tmp/in.folded -o /tmp/pool/r.html > /dev/null 2> /tmp/a.err
echo "A_RC=$?"
sed 's/^/a.err: /' /tmp/a.err
echo "A_SAID=$(grep -c "^heaplive: /tmp/pool/r.html: directory /tmp/pool on the way belongs to uid $(id -u $EVIL), who could plant links in it; not used$" /tmp/a.err)"
echo "A_LINES=$(wc -l < /tmp/a.err)"
$HEAPLIVE report /tmp/in.folded -o /tmp/shared/r.html > /dev/null 2> /tmp/b.err
echo "B_RC=$?"
echo "B_SAID=$(grep -c "^heaplive: /tmp/shared/r.html: /tmp/shared/r.html is a symlink owned by uid $(id -u $EVIL), not by root; not followed$" /tmp/b.err)"
echo "B_LINES=$(wc -l < /tmp/b.err)"
$HEAPLIVE report /tmp/in.folded -o /dev/stdout 2>/dev/null | grep -q 'id="heaplive-data"' && echo "STDOUT=1"
$HEAPLIVE report /tmp/in.folded -o /tmp/shared/mine.html && grep -q 'id="heaplive-data"' /tmp/shared/mine.html && echo "MINE=1"
$HEAPLIVE run -q --report /tmp/shared/r.html -o /tmp/run.%n.folded -- $LINKPROGS/links_prog > /tmp/c.out 2> /tmp/c.err
echo "C_RC=$?"
sed 's/^/c.err: /' /tmp/c.err
echo "C_OUT=$(tr '\n' ' ' < /tmp/c.out)"
echo "C_SAID=$(grep -c "^heaplive: /tmp/shared/r.html: /tmp/shared/r.html is a symlink owned by uid $(id -u $EVIL), not by root; not followed$" /tmp/c.err)"
echo "C_LINES=$(wc -l < /tmp/c.err)"
echo "C_DUMP=$(grep -c links_big /tmp/run.1.folded)"
echo "LINKS=$(find /tmp/pool /tmp/shared -name r.html -type l -user $EVIL | wc -l)"
"#);
    assert_intact(&r);
    for k in ["A", "B"] {
        r.expect_of(k, &[("RC", "1", ""), ("SAID", "1", ""), ("LINES", "1", "")]);
    }
    r.expect(&[
        ("STDOUT", "1", ""),
        ("MINE", "1", ""),
        ("C_RC", "5", "the program's status"),
        ("C_OUT", "program output ", ""),
        ("C_SAID", "1", ""),
        ("C_LINES", "1", ""),
        ("C_DUMP", "1", ""),
        ("LINKS", "2", "the links stay"),
    ]);
}

/// Templates whose directories come from `%e`, `%n` or `%p`: the other
/// user made the directory `%e` names in a sticky directory (theirs, 0777;
/// or a link of theirs to root's /tmp/secret), or links at the names `%n`
/// makes: each dump is refused with one line and lands in /tmp, named
/// with what the template's directories told apart, so that no dump
/// there replaces another: `/tmp/shared/%e/e.%n.folded` falls back to
/// `/tmp/links_prog.e.1.folded`, `/tmp/shared/%n/n.folded` to
/// `/tmp/1.n.folded`, `/tmp/2.n.folded`, ... (it went to `/tmp/n.folded`
/// every time, dump 2 numbered 10001), `/tmp/shared/%p/p.folded` to
/// `/tmp/PID.p.folded`.
#[test]
fn template_directories_the_other_user_made_are_refused() {
    let r = run(r#"
export HEAPLIVE_SAMPLE_INTERVAL=4096
mkdir -m 1777 /tmp/shared2
runuser -u $EVIL -- mkdir -m 777 /tmp/shared/links_prog
plant /tmp/shared2/links_prog /tmp/secret
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared/%e/e.%n.folded $LINKPROGS/links_prog > /dev/null 2> /tmp/e.err
echo "E_RC=$?"
sed 's/^/e.err: /' /tmp/e.err
echo "E=$(grep -c links_big /tmp/links_prog.e.1.folded)"
echo "E_SAID=$(grep -c "^heaplive\[[0-9]*\]: cannot write /tmp/shared/links_prog/e.1.folded (directory /tmp/shared/links_prog on the way belongs to uid $(id -u $EVIL), who could plant links in it; not used); wrote /tmp/links_prog.e.1.folded instead$" /tmp/e.err)"
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared2/%e/l.%n.folded $LINKPROGS/links_prog > /dev/null 2> /tmp/l.err
echo "L_RC=$?"
echo "L=$(grep -c links_big /tmp/links_prog.l.1.folded)"
echo "L_SAID=$(grep -c "^heaplive\[[0-9]*\]: cannot write /tmp/shared2/links_prog/l.1.folded (/tmp/shared2/links_prog is a symlink owned by uid $(id -u $EVIL), not by root; not followed); wrote /tmp/links_prog.l.1.folded instead$" /tmp/l.err)"
echo "THEIRS=$(ls -A /tmp/shared/links_prog | wc -l)"

plant /tmp/shared/1 /tmp/secret
plant /tmp/shared/2 /tmp/secret
start n HEAPLIVE_OUTPUT=/tmp/shared/%n/n.folded
$HEAPLIVE dump $P > /tmp/n.dumps
$HEAPLIVE dump $P >> /tmp/n.dumps
echo "N_DUMPS=$(tr '\n' ' ' < /tmp/n.dumps)"
finish n
for i in 1 2 3; do echo "N$i=$(grep -c links_keep /tmp/$i.n.folded)"; done
echo "N_SAID=$(grep -c "^heaplive\[$P\]: cannot write /tmp/shared/[12]/n.folded (/tmp/shared/[12] is a symlink owned by uid $(id -u $EVIL), not by root; not followed); wrote /tmp/[12].n.folded instead$" /tmp/n.err)"
echo "N3_SAID=$(grep -c "^heaplive\[$P\]: cannot write /tmp/shared/3/n.folded (No such file or directory (os error 2)); wrote /tmp/3.n.folded instead$" /tmp/n.err)"
echo "N_FILES=$(cd /tmp && ls *n.folded *n.*.folded *n.timeline.tsv 2>/dev/null | sort -u | tr '\n' ' ')"

for i in 1 2; do
    LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/shared/%p/p.folded HEAPLIVE_VIEWS=live $LINKPROGS/links_prog > /dev/null 2>> /tmp/p.err
done
echo "P_FILES=$(cd /tmp && ls | grep -c '^[0-9]*\.p\.folded$')"
echo "P_SAID=$(grep -c "^heaplive\[\([0-9]*\)\]: cannot write /tmp/shared/\1/p.folded (No such file or directory (os error 2)); wrote /tmp/\1.p.folded instead$" /tmp/p.err)"
"#);
    assert_intact(&r);
    for k in ["E", "L"] {
        assert_eq!(r.get(k), "1", "{k}\n{r}");
        r.expect_of(k, &[("RC", "5", ""), ("SAID", "1", "")]);
    }
    r.expect(&[
        ("THEIRS", "0", ""),
        (
            "N_DUMPS",
            "/tmp/1.n.folded /tmp/2.n.folded ",
            "heaplive dump names where they went",
        ),
        ("n_RC", "6", ""),
    ]);
    for i in 1..=3 {
        assert_eq!(r.get(&format!("N{i}")), "1", "dump {i} kept\n{r}");
    }
    r.expect(&[
        ("N_SAID", "2", ""),
        ("N3_SAID", "1", ""),
        ("N_FILES", "1.n.folded 1.n.samples.folded 1.n.timeline.tsv 2.n.folded 2.n.samples.folded 2.n.timeline.tsv 3.n.folded 3.n.samples.folded 3.n.timeline.tsv ", ""),
        ("P_FILES", "2", "one per process"),
        ("P_SAID", "2", ""),
    ]);
}

/// Item 2 of the sweep: dumps onto a full disk (a tmpfs of 8 KiB, filled
/// first). A signal dump sent from outside (`kill -USR2`) fails with one
/// line, leaves no temporary, and the program runs on; `heaplive dump`
/// says why the dump failed; the child the program forks then writes its
/// exit dump onto the same disk: one line, no temporary, and the parent
/// sees its status (9); the parent's exit dump fails the same way and it
/// exits with its own status (6).
#[test]
fn dumps_onto_a_full_disk_fail_in_one_line_and_the_program_runs_on() {
    let r = run(r#"
mkdir /tmp/full
mount -t tmpfs -o size=8k,mode=1777 heaplive-full /tmp/full || exit 97
dd if=/dev/zero of=/tmp/full/fill bs=1k count=64 2> /dev/null
echo "FREE=$(df --output=avail /tmp/full | tail -1 | tr -d ' ')"
export HEAPLIVE_SAMPLE_INTERVAL=4096
ARG=fork start full HEAPLIVE_OUTPUT=/tmp/full/d.%p.%n.folded
kill -USR2 $P
for i in $(seq 600); do grep -q 'signal dump' /tmp/full.err && break; sleep 0.05; done
kill -0 $P && echo "ALIVE=1"
echo "TEMPS_THEN=$(find /tmp -name '*heaplive-tmp*' | wc -l)"
$HEAPLIVE dump $P > /tmp/dump.out 2> /tmp/dump.err
echo "DUMP_RC=$?"
sed 's/^/dump.err: /' /tmp/dump.err
echo "DUMP_SAID=$(grep -c "^heaplive: pid $P (links_wait): its dump failed: cannot write /tmp/full/d\.$P\.1\.folded (No space left on device (os error 28))$" /tmp/dump.err)"
kill -0 $P && echo "ALIVE2=1"
finish full
echo "SIGNAL_SAID=$(grep -c "^heaplive\[$P\]: signal dump failed: cannot write /tmp/full/d\.$P\.1\.folded (No space left on device (os error 28))$" /tmp/full.err)"
echo "EXIT_SAID=$(grep -c "^heaplive\[$P\]: exit dump failed: cannot write /tmp/full/d\.$P\.1\.folded (No space left on device (os error 28))$" /tmp/full.err)"
echo "CHILD_SAID=$(grep -v "^heaplive\[$P\]" /tmp/full.err | grep -c "^heaplive\[[0-9]*\]: exit dump failed: cannot write /tmp/full/d\.[0-9]*\.1\.folded (No space left on device (os error 28))$")"
echo "FAILED_LINES=$(grep -c 'No space left' /tmp/full.err)"
echo "OTHER=$(grep -v 'dump failed: \|^heaplive\[[0-9]*\]: peak [0-9.]* [KM]iB live (estimate) at [0-9.]* s after start$' /tmp/full.err | wc -l)"
echo "ON_DISK=$(ls -A /tmp/full | tr '\n' ' ')"
"#);
    assert_intact(&r);
    r.expect(&[
        ("FREE", "0", "the disk is full"),
        ("ALIVE", "1", "the program runs on"),
        ("TEMPS_THEN", "0", ""),
        ("DUMP_RC", "1", ""),
        ("DUMP_SAID", "1", ""),
        ("ALIVE2", "1", ""),
        ("full_RC", "6", "its own status"),
        ("full_OUT", "ready child=9 done ", "the child's status"),
        // Two signal dumps (kill, heaplive dump), the child's and the
        // parent's exit dumps: one line each.
        ("SIGNAL_SAID", "2", ""),
        ("EXIT_SAID", "1", ""),
        ("CHILD_SAID", "1", ""),
        ("FAILED_LINES", "4", ""),
        ("OTHER", "0", "nothing else said"),
        ("ON_DISK", "fill ", ""),
    ]);
}

/// Item 3 of the sweep, the first-dump race: root's process is running
/// and has not dumped yet, so /tmp/heaplive-0 does not exist; the other
/// user makes it first (their directory, mode 0777 or 0700; or their link
/// to a 0777 directory of theirs). At the first dump heaplive writes
/// nothing into it, one line says why, the status goes to root's own
/// fallback directory, and `heaplive dump` finds the dump.
#[test]
fn a_status_directory_made_first_by_another_user_is_not_used() {
    let r = run(r#"
export HEAPLIVE_SAMPLE_INTERVAL=4096
for k in dir777 dir700 link; do
    rm -rf /tmp/heaplive-0 /tmp/heaplive-0.* /tmp/theirs
    start $k HEAPLIVE_OUTPUT=/tmp/$k.%n.folded
    [ -e /tmp/heaplive-0 ] || echo "${k}_NOT_YET=1"
    case $k in
    dir777) runuser -u $EVIL -- mkdir -m 777 /tmp/heaplive-0 ;;
    dir700) runuser -u $EVIL -- mkdir -m 700 /tmp/heaplive-0 ;;
    link) runuser -u $EVIL -- mkdir -m 777 /tmp/theirs && plant /tmp/heaplive-0 /tmp/theirs ;;
    esac
    $HEAPLIVE dump $P > /tmp/$k.dump 2> /dev/null
    echo "${k}_DUMP_RC=$?"
    echo "${k}_DUMP=$(cat /tmp/$k.dump)"
    FB=$(find /tmp -maxdepth 1 -name 'heaplive-0.*' -user root -perm 700 -type d)
    echo "${k}_HELD=$(ls $FB 2>/dev/null | tr '\n' ' ')"
    echo "${k}_PID=$P "
    finish $k
    case $k in
    link) WHY="is a symlink" ;;
    *) WHY="belongs to uid $(id -u $EVIL), not 0" ;;
    esac
    echo "${k}_SAID=$(grep -c "^heaplive\[$P\]: status directory /tmp/heaplive-0 $WHY; using $FB instead (remove /tmp/heaplive-0 to use it again)$" /tmp/$k.err)"
    echo "${k}_LINES=$(grep -c 'status directory' /tmp/$k.err)"
    echo "${k}_THEIRS=$(ls -A /tmp/heaplive-0/ | wc -l) $(stat -c %U /tmp/heaplive-0/)"
done
"#);
    assert_intact(&r);
    for k in ["dir777", "dir700", "link"] {
        let g = |s: &str| r.get(&format!("{k}_{s}"));
        let dump = format!("/tmp/{k}.1.folded");
        r.expect_of(
            k,
            &[
                ("NOT_YET", "1", "no status directory before"),
                ("DUMP_RC", "0", ""),
                ("DUMP", &dump, ""),
                ("RC", "6", ""),
                ("OUT", "ready done ", ""),
                ("SAID", "1", "one line says why"),
                ("LINES", "1", ""),
                ("THEIRS", "0 heaplive-evil", "nothing written into theirs"),
            ],
        );
        assert_eq!(
            g("HELD"),
            g("PID"),
            "the status in root's fallback directory\n{r}"
        );
    }
}

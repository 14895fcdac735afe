//! Files shared with other users (issue 14, items 1-4 and 15, 17): a second
//! user plants FIFOs, symlinks and files where heaplive writes or reads.
//! Every case runs as root inside a private mount namespace with a tmpfs
//! on /tmp (`unshare -m`), so the machine's real /tmp is never touched; the
//! attacker is a system user `heaplive-evil` (created when missing) whose
//! actions go through `runuser`. The test programs live outside /tmp.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

pub(crate) const EVIL: &str = "heaplive-evil";

/// The programs, compiled once into a directory outside /tmp.
fn progs() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let d = build_dir().join(format!("security-progs.{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        compile("sec_dump.c", "sec_dump", &d, &[]);
        compile("sec_after_exit.c", "sec_after_exit", &d, &[]);
        compile("sym_jit.c", "sym_jit", &d, &[]);
        // links.rs's program: in_private_tmp copies this directory out of
        // /tmp (where the checkout may be) before the tmpfs hides it.
        compile("links_prog.c", "links_prog", &d, &[]);
        compile("links_wait.c", "links_wait", &d, &[]);
        d
    })
}

/// Creates the attacker's user when missing.
pub(crate) fn attacker() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "these tests run as root");
        let exists = Command::new("id")
            .arg(EVIL)
            .output()
            .is_ok_and(|o| o.status.success());
        if !exists {
            let o = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    EVIL,
                ])
                .output()
                .expect("run useradd");
            assert!(
                o.status.success() || String::from_utf8_lossy(&o.stderr).contains("already exists"),
                "useradd: {}",
                show(&o)
            );
        }
    });
}

/// Runs `script` (bash) as root in a private mount namespace whose /tmp is
/// a fresh tmpfs (mode 1777, like a real /tmp). The script sees $LIB,
/// $PROGS, $HEAPLIVE and $EVIL, and reports with `echo KEY=value` lines,
/// returned as a map (with the whole output for messages).
pub(crate) fn in_private_tmp(script: &str) -> Report {
    in_private_tmp_with(script, &[])
}

/// `in_private_tmp`, with `files` (name, path) copied first to `$S/name`
/// (mode 755): a test program built under the checkout, which may be
/// under /tmp and hidden by the tmpfs.
pub(crate) fn in_private_tmp_with(script: &str, files: &[(&str, &std::path::Path)]) -> Report {
    attacker();
    // The library, the command and the test programs are copied out first:
    // the checkout itself may live under /tmp, which the tmpfs hides.
    let mut extra = String::new();
    for (name, path) in files {
        extra.push_str(&format!(
            "cp '{}' \"$S/{name}\" && chmod 755 \"$S/{name}\" || exit 89\n",
            path.display()
        ));
    }
    let full = format!(
        "set -u\n\
         S=$(mktemp -d /run/heaplive-test.XXXXXX) || exit 91\n\
         trap 'rm -rf \"$S\"' EXIT\n\
         chmod 755 \"$S\"\n\
         cp \"$LIB\" \"$S/libheaplive.so\" && cp \"$HEAPLIVE\" \"$S/heaplive\" && cp -r \"$PROGS\" \"$S/progs\" || exit 92\n\
         {extra}\
         LIB=$S/libheaplive.so HEAPLIVE=$S/heaplive PROGS=$S/progs\n\
         mount -t tmpfs -o mode=1777 heaplive-test /tmp || exit 90\ncd /tmp\n{script}\n"
    );
    let mut c = Command::new("unshare");
    // -u: a UTS namespace of its own too (links.rs aims links at
    // /proc/sys/kernel/domainname, which is per UTS namespace).
    c.args(["-m", "-u", "--propagation", "private", "bash", "-c", &full]);
    for (k, _) in std::env::vars() {
        if k.starts_with("HEAPLIVE_") || k == "LD_PRELOAD" {
            c.env_remove(k);
        }
    }
    let o = c
        .env("LIB", lib())
        .env("PROGS", progs())
        .env("HEAPLIVE", heaplive_bin())
        .env("EVIL", EVIL)
        .output()
        .expect("run unshare");
    let text = show(&o);
    assert!(o.status.success(), "the script failed:\n{text}");
    let mut m = BTreeMap::new();
    for l in stdout(&o).lines() {
        if let Some((k, v)) = l.split_once('=') {
            m.insert(k.to_string(), v.to_string());
        }
    }
    Report { map: m, text }
}

/// What a script reported: its `KEY=value` lines, and its whole output
/// (status, stdout, stderr), which `{r}` prints, for failure messages.
pub(crate) struct Report {
    pub(crate) map: BTreeMap<String, String>,
    pub(crate) text: String,
}

impl Report {
    /// The value of `KEY=`; panics, with the output, when the script did
    /// not say it.
    pub(crate) fn get(&self, k: &str) -> &str {
        get(&self.map, k, &self.text)
    }

    /// Asserts each `(KEY, value, why)` (`why` may be empty); a failure
    /// names the key.
    pub(crate) fn expect(&self, want: &[(&str, &str, &str)]) {
        for (k, v, why) in want {
            assert_eq!(self.get(k), *v, "{k}: {why}\n{self}");
        }
    }

    /// `expect` of `PREFIX_KEY` for each `(KEY, value, why)` of `want`: a
    /// scenario's keys, the scenario's name first.
    pub(crate) fn expect_of(&self, prefix: &str, want: &[(&str, &str, &str)]) {
        for (k, v, why) in want {
            let key = format!("{prefix}_{k}");
            assert_eq!(self.get(&key), *v, "{key}: {why}\n{self}");
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

pub(crate) fn get<'a>(m: &'a BTreeMap<String, String>, k: &str, text: &str) -> &'a str {
    m.get(k)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no {k}= in the output:\n{text}"))
}

/// Item 1: a character device, a FIFO or a symlink at the output path is
/// never replaced: written into (device, FIFO with a reader), refused
/// without blocking (FIFO with no reader), refused (symlink in sticky /tmp).
#[test]
fn dump_paths_that_are_not_our_files_are_not_replaced() {
    let r = in_private_tmp(
        r#"
export HEAPLIVE_SAMPLE_INTERVAL=1
mknod -m 666 /tmp/null c 1 3
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/null $PROGS/sec_dump 2>/tmp/err.null
echo "NULL=$(stat -c %F /tmp/null)"
mkfifo /tmp/fifo
cat /tmp/fifo > /tmp/got &
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/fifo $PROGS/sec_dump
wait
echo "FIFO=$(stat -c %F /tmp/fifo)"
echo "GOT=$(grep -c 'main 1000$' /tmp/got)"
mkfifo /tmp/lonely
timeout 20 env LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/lonely $PROGS/sec_dump 2>/tmp/err.lonely
echo "LONELY_RC=$?"
echo "LONELY=$(stat -c %F /tmp/lonely)"
echo "LONELY_ERR=$(grep -c 'no reader' /tmp/err.lonely)"
echo keep > /tmp/victim
runuser -u $EVIL -- ln -s /tmp/victim /tmp/link
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/link $PROGS/sec_dump 2>/tmp/err.link
echo "VICTIM=$(cat /tmp/victim)"
echo "LINK=$(stat -c %F /tmp/link)"
echo "LINK_ERR=$(grep -c 'is a symlink owned by uid' /tmp/err.link)"
echo "STDOUT=$(LD_PRELOAD=$LIB HEAPLIVE_DUMP_AT_EXIT=0 $PROGS/sec_dump /dev/stdout | grep -c 'main 1000$')"
echo "DEVSTDOUT=$(stat -c %F /dev/stdout)"
echo "LEFT=$(ls -A /tmp | grep -c heaplive-tmp)"
"#,
    );
    r.expect(&[
        ("NULL", "character special file", ""),
        ("FIFO", "fifo", ""),
        ("GOT", "1", "the reader got the dump"),
        ("LONELY_RC", "0", "no blocking on a FIFO with no reader"),
        ("LONELY", "fifo", ""),
        ("LONELY_ERR", "1", "one line says why"),
        ("VICTIM", "keep", ""),
        ("LINK", "symbolic link", ""),
        ("LINK_ERR", "1", ""),
        (
            "STDOUT",
            "1",
            "heaplive_dump(\"/dev/stdout\") writes into stdout",
        ),
        ("DEVSTDOUT", "symbolic link", ""),
        ("LEFT", "0", "no temporary files left"),
    ]);
}

/// Item 15: an explicit path is the caller's: no fallback to /tmp, the real
/// errno, and it does not use up a `%n` number.
#[test]
fn explicit_dump_paths_fail_with_the_real_errno_and_keep_numbers() {
    let r = in_private_tmp(
        r#"
export HEAPLIVE_SAMPLE_INTERVAL=1
mkdir /tmp/out /tmp/out/sub
cd /tmp/out
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/out/h.%n.folded $PROGS/sec_dump /tmp/nonexistent/dir/x.folded dir/sub/ /tmp/out/sub /tmp/out/e1.folded /tmp/out/e2.folded > /tmp/res
while read -r path rc err; do echo "R:$path=$rc $err"; done < /tmp/res
echo "FALLBACK=$(ls /tmp | grep -c -e '^x.folded' -e '^sub$')"
echo "FILES=$(cd /tmp/out && ls *.folded | tr '\n' ' ')"
"#,
    );
    assert_eq!(
        r.get("R:/tmp/nonexistent/dir/x.folded"),
        format!("-1 {}", libc::ENOENT),
        "{r}"
    );
    assert_eq!(r.get("R:dir/sub/"), format!("-1 {}", libc::EISDIR), "{r}");
    assert_eq!(
        r.get("R:/tmp/out/sub"),
        format!("-1 {}", libc::EISDIR),
        "{r}"
    );
    r.expect(&[
        ("R:/tmp/out/e1.folded", "0 0", ""),
        ("FALLBACK", "0", "nothing written in /tmp instead"),
        ("FILES", "e1.folded e2.folded h.1.folded ", ""),
    ]);
}

/// Item 2: `/tmp/perf-<pid>.map` planted by another user (a FIFO, a file
/// renaming every frame) is not read: the dump does not block, and JIT code
/// stays `[jit]`.
#[test]
fn perf_map_of_another_user_is_not_read() {
    let r = in_private_tmp(
        r#"
export HEAPLIVE_SAMPLE_INTERVAL=1
mkdir -m 755 /tmp/a /tmp/b
timeout 30 sh -c 'runuser -u $EVIL -- mkfifo -m 666 /tmp/perf-$$.map; exec env LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/a/h.%p.folded $PROGS/sym_jit nomap' >/dev/null
echo "FIFO_RC=$?"
echo "FIFO_JIT=$(cat /tmp/a/*.folded | grep -c '\[jit\] ')"
timeout 30 sh -c 'runuser -u $EVIL -- sh -c "echo 0 7fffffffffff evil_name > /tmp/perf-$$.map"; exec env LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/b/h.%p.folded $PROGS/sym_jit nomap' >/dev/null
echo "FILE_RC=$?"
echo "FILE_JIT=$(cat /tmp/b/*.folded | grep -c '\[jit\] ')"
echo "FILE_EVIL=$(cat /tmp/b/*.folded | grep -c evil_name)"
"#,
    );
    r.expect(&[
        ("FIFO_RC", "0", ""),
        ("FIFO_JIT", "1", ""),
        ("FILE_RC", "0", ""),
        ("FILE_JIT", "1", ""),
        ("FILE_EVIL", "0", ""),
    ]);
}

/// Item 3: status data is per user. Another user who creates root's status
/// directory first (or the old shared one), plants a status file saying
/// "signal 15", or makes the directory a symlink, can neither make
/// `heaplive dump` send SIGTERM nor make root's process write into the
/// symlink's target; a FIFO at the status file does not block `heaplive
/// dump`.
#[test]
fn status_files_of_another_user_are_not_trusted() {
    let r = in_private_tmp(
        r#"
# heaplive's thread (which takes the dump signal) starts at the first
# sample: every allocation is one here.
start() {
    LD_PRELOAD=$LIB HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_OUTPUT=/tmp/out/h.%p.%n.folded sleep 60 2>>/tmp/err.lib &
    P=$!
    for i in $(seq 200); do
        grep -qx heaplive /proc/$P/task/*/comm 2>/dev/null && break
        sleep 0.05
    done
}
mkdir -m 1777 /tmp/out
runuser -u $EVIL -- mkdir -m 1777 /tmp/heaplive-0 /tmp/heaplive-status
start
runuser -u $EVIL -- sh -c "printf 'dumps 0\nsignal 15\n' > /tmp/heaplive-0/$P; cp /tmp/heaplive-0/$P /tmp/heaplive-status/$P"
$HEAPLIVE dump --timeout 2 $P > /tmp/dump.out 2> /tmp/dump.err
kill -0 $P && echo "ALIVE=1"
echo "IGNORED=$(grep -c 'ignoring its status file' /tmp/dump.err)"
echo "DUMPED=$(ls /tmp/out | grep -c folded)"
echo "PLANTED_DIR_USED=$(ls /tmp/heaplive-0 | grep -vc "^$P\$")"
kill $P; wait $P 2>/dev/null
echo "LIB_WARNED=$(grep -c 'status directory /tmp/heaplive-0 belongs to uid' /tmp/err.lib)"

runuser -u $EVIL -- rm -rf /tmp/heaplive-0 /tmp/heaplive-status
runuser -u $EVIL -- mkdir -m 777 /tmp/evil
runuser -u $EVIL -- ln -s /tmp/evil /tmp/heaplive-0
runuser -u $EVIL -- ln -s /tmp/evil /tmp/heaplive-status
start
$HEAPLIVE dump --timeout 2 $P > /dev/null 2>&1
kill $P; wait $P 2>/dev/null
echo "EVIL_DIR=$(ls -A /tmp/evil | wc -l)"

rm -f /tmp/heaplive-0 /tmp/heaplive-status
mkdir -m 700 /tmp/heaplive-0
runuser -u $EVIL -- mkdir -m 1777 /tmp/heaplive-status
start
mkfifo /tmp/heaplive-0/$P
runuser -u $EVIL -- mkfifo /tmp/heaplive-status/$P
timeout 20 $HEAPLIVE dump --timeout 1 $P > /dev/null 2>/tmp/fifo.err
echo "FIFO_RC=$?"
echo "FIFO_SAID=$(grep -c 'is not a regular file' /tmp/fifo.err)"
kill $P; wait $P 2>/dev/null
true
"#,
    );
    r.expect(&[
        ("ALIVE", "1", "SIGTERM was not sent"),
        ("IGNORED", "1", ""),
        ("DUMPED", "1", "the dump signal was sent instead"),
        ("PLANTED_DIR_USED", "0", ""),
        ("LIB_WARNED", "1", ""),
        ("EVIL_DIR", "0", "nothing created through the symlink"),
    ]);
    assert_ne!(r.get("FIFO_RC"), "124", "heaplive dump did not block\n{r}");
    assert_eq!(r.get("FIFO_SAID"), "1", "{r}");
}

/// Item 4: HEAPLIVE_LOG naming a FIFO with no reader does not block the
/// process; one line on stderr says so.
#[test]
fn log_fifo_without_reader_does_not_block() {
    let r = in_private_tmp(
        r#"
mkfifo /tmp/log
timeout 20 env LD_PRELOAD=$LIB HEAPLIVE_LOG=/tmp/log HEAPLIVE_OUTPUT=/tmp/h.folded $PROGS/sec_dump 2>/tmp/err
echo "RC=$?"
echo "SAID=$(grep -c "HEAPLIVE_LOG='/tmp/log'.*no reader.*using stderr" /tmp/err)"
"#,
    );
    r.expect(&[("RC", "0", ""), ("SAID", "1", "")]);
}

/// HEAPLIVE_LOG follows the rules of dump files (README, security model):
/// nothing in a directory of the attacker's (sticky or not: they may
/// remove or rename anything in it) is opened; another user's file is not
/// appended to; a symlink of ours in a directory of ours is followed to our
/// file.
#[test]
fn log_path_planted_by_another_user_is_not_written() {
    let r = in_private_tmp(
        r#"
echo keep > /tmp/victim
mkdir -m 1777 /tmp/shared && chown $EVIL /tmp/shared
runuser -u $EVIL -- ln -s /tmp/victim /tmp/shared/h.log
LD_PRELOAD=$LIB HEAPLIVE_LOG=/tmp/shared/h.log HEAPLIVE_OUTPUT=/tmp/h.folded $PROGS/sec_dump 2>/tmp/err.link
echo "VICTIM=$(tr '\n' ' ' < /tmp/victim)"
echo "LINK_SAID=$(grep -c "HEAPLIVE_LOG='/tmp/shared/h.log' (directory /tmp/shared on the way belongs to uid .*); using stderr" /tmp/err.link)"
echo "LINK_STDERR=$(grep -c 'exit dump' /tmp/err.link)"
runuser -u $EVIL -- sh -c 'echo theirs > /tmp/evil.log'
LD_PRELOAD=$LIB HEAPLIVE_LOG=/tmp/evil.log HEAPLIVE_OUTPUT=/tmp/h.folded $PROGS/sec_dump 2>/tmp/err.evil
echo "EVIL_LOG=$(cat /tmp/evil.log | tr '\n' ' ')"
echo "EVIL_SAID=$(grep -c "HEAPLIVE_LOG='/tmp/evil.log'.*another user" /tmp/err.evil)"
mkdir -m 755 /tmp/mine && ln -s /tmp/mine/real.log /tmp/mine/h.log
LD_PRELOAD=$LIB HEAPLIVE_LOG=/tmp/mine/h.log HEAPLIVE_OUTPUT=/tmp/h.folded $PROGS/sec_dump 2>/tmp/err.mine
echo "MINE=$(grep -c 'exit dump' /tmp/mine/real.log)"
echo "MINE_STDERR=$(wc -c < /tmp/err.mine)"
"#,
    );
    r.expect(&[
        ("VICTIM", "keep ", ""),
        ("LINK_SAID", "1", "one line says why"),
        ("LINK_STDERR", "1", "the log went to stderr"),
        ("EVIL_LOG", "theirs ", ""),
        ("EVIL_SAID", "1", ""),
        ("MINE", "1", ""),
        ("MINE_STDERR", "0", ""),
    ]);
}

/// Item 17: temporaries of a process killed mid-dump are named so that no
/// glob for dumps matches them and are removed by the next process that
/// writes there; a dead process's status file too; nothing (signal or
/// periodic dump) is written after the exit dump.
#[test]
fn leftovers_of_dead_processes_are_cleaned_and_nothing_follows_the_exit_dump() {
    let r = in_private_tmp(
        r#"
export HEAPLIVE_SAMPLE_INTERVAL=1
mkdir /tmp/out
DEAD=$(sh -c 'echo $$')
echo junk > /tmp/out/.h.1.folded.heaplive-tmp.$DEAD
mkdir -m 700 /tmp/heaplive-0
echo 'dumps 1' > /tmp/heaplive-0/$DEAD
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/out/h.%n.folded $PROGS/sec_dump
echo "TEMP_LEFT=$(ls -A /tmp/out | grep -c heaplive-tmp)"
echo "STATUS_LEFT=$(ls -A /tmp/heaplive-0 | wc -l)"
echo "DUMPS=$(cd /tmp/out && ls *.folded | tr '\n' ' ')"
LD_PRELOAD=$LIB HEAPLIVE_OUTPUT=/tmp/out/late.%n.folded HEAPLIVE_DUMP_EVERY=20ms $PROGS/sec_after_exit 2>/tmp/late.err
echo "LAST=$(grep ' dump ' /tmp/late.err | tail -1 | grep -c ': exit dump ')"
echo "AFTER=$(sed -n '/: exit dump /,$p' /tmp/late.err | grep -c 'heaplive\[')"
"#,
    );
    r.expect(&[
        ("TEMP_LEFT", "0", ""),
        ("STATUS_LEFT", "0", ""),
        ("DUMPS", "h.1.folded ", ""),
        ("LAST", "1", "the exit dump is the last"),
        ("AFTER", "1", "no line after the exit dump's"),
    ]);
}

//! Issue 25, the sweep of round three: resource limits and a full disk
//! that the other tests do not cover, as a second user (`heaplive-evil`,
//! security.rs creates it) and as root, in a private mount namespace with
//! its own /tmp (security.rs's `in_private_tmp`). Each case: the program
//! prints what it prints and exits with its own status (6; its forked
//! child with 9), heaplive says what it could not do in one line, and no
//! hidden temporary is left.

use crate::common::*;
use crate::security::{Report, in_private_tmp_with};
use std::path::PathBuf;
use std::sync::OnceLock;

/// `progs/hard3.c`, compiled once outside /tmp.
fn prog() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let d = build_dir().join(format!("hardening3-progs.{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        compile("hard3.c", "hard3", &d, &[])
    })
}

/// Runs `script` in a private /tmp with $H the program (copied beside the
/// library, readable by the other user), $OUT a directory of the other
/// user's, and `as_evil LIMITS... -- CMD...` to run as that user under
/// `prlimit`.
fn run(script: &str) -> Report {
    // The program is copied before the private /tmp is mounted: the
    // checkout may be under /tmp (a clone there failed with "cp: cannot
    // stat" when the copy came after).
    let full = format!(
        "H=$S/hard3\n\
         chmod 755 \"$LIB\"\n\
         mkdir -m 755 /tmp/out && chown $EVIL /tmp/out\nOUT=/tmp/out\n\
         temps() {{ find /tmp -name '*heaplive-tmp*' | wc -l; }}\n\
         {script}\n"
    );
    in_private_tmp_with(&full, &[("hard3", prog())])
}

const PLAIN: &str = "fork=0 errno=0 child=9 thread=0 ready ";

/// RLIMIT_NPROC 1 as the other user (root is exempt): the program's own
/// fork and pthread_create fail with EAGAIN as without heaplive, heaplive's
/// thread cannot start either, which it says in one line, and the exit
/// dump is still written. RLIMIT_CORE 0 and RLIMIT_STACK 64 KiB change
/// nothing the program sees.
#[test]
fn nproc_core_and_stack_limits_as_another_user() {
    let r = run(r#"
cd /tmp/out
runuser -u $EVIL -- prlimit --nproc=1 env -C /tmp/out $H > /tmp/plain.out 2>&1
echo "PLAIN_RC=$?"
echo "PLAIN=$(tr '\n' ' ' < /tmp/plain.out)"
runuser -u $EVIL -- prlimit --nproc=1 env -C /tmp/out LD_PRELOAD=$LIB HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_OUTPUT=/tmp/out/np.%n.folded $H > /tmp/np.out 2> /tmp/np.err
echo "NP_RC=$?"
echo "NP=$(tr '\n' ' ' < /tmp/np.out)"
sed 's/^/np.err: /' /tmp/np.err
echo "NP_THREAD=$(grep -c '^heaplive\[[0-9]*\]: cannot start the dump thread (Resource temporarily unavailable (os error 11)); signal and periodic dumps are off$' /tmp/np.err)"
echo "NP_LINES=$(grep -c '^heaplive' /tmp/np.err)"
echo "NP_DUMP=$(grep -c hard3_keep /tmp/out/np.1.folded)"
runuser -u $EVIL -- prlimit --core=0 --stack=65536 env -C /tmp/out LD_PRELOAD=$LIB HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_OUTPUT=/tmp/out/st.%p.folded $H > /tmp/st.out 2> /tmp/st.err
echo "ST_RC=$?"
sed 's/^/st.err: /' /tmp/st.err
echo "ST=$(tr '\n' ' ' < /tmp/st.out)"
echo "ST_DUMPS=$(ls /tmp/out | grep -c '^st\.[0-9]*\.folded$')"
prlimit --core=0 --stack=65536 env LD_PRELOAD=$LIB HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_OUTPUT=/tmp/root.%p.folded $H > /tmp/rt.out 2> /tmp/rt.err
echo "RT_RC=$?"
echo "RT=$(tr '\n' ' ' < /tmp/rt.out)"
echo "RT_DUMPS=$(ls /tmp | grep -c '^root\.[0-9]*\.folded$')"
echo "TEMPS=$(temps)"
"#);
    assert_eq!(r.get("PLAIN_RC"), "6", "{r}");
    let plain = r.get("PLAIN");
    assert_eq!(plain, "fork=-1 errno=11 child=-1 thread=11 ready ", "{r}");
    assert_eq!(r.get("NP_RC"), "6", "the program's status\n{r}");
    assert_eq!(r.get("NP"), plain, "what it sees, as without heaplive\n{r}");
    r.expect(&[
        ("NP_THREAD", "1", "one line says why"),
        ("NP_LINES", "2", "that line and the exit dump's"),
    ]);
    assert!(r.get("NP_DUMP") != "0", "the exit dump\n{r}");
    for k in ["ST", "RT"] {
        assert_eq!(r.get(&format!("{k}_RC")), "6", "{r}");
        assert_eq!(r.get(k), PLAIN, "{r}");
        // The parent's and the child's exit dumps.
        assert_eq!(r.get(&format!("{k}_DUMPS")), "2", "{r}");
    }
    assert_eq!(r.get("TEMPS"), "0", "{r}");
}

/// RLIMIT_NOFILE 4 to 8 as the other user (4: nothing left for the dump
/// file once the library is loaded) and a closed stderr: the program runs
/// as without heaplive; a dump that cannot open its file says so in one
/// line; with stderr closed, heaplive's lines go to `heaplive.<euid>.log`
/// in the working directory, and nothing lands on the program's fd 2.
#[test]
fn few_file_descriptors_and_a_closed_stderr() {
    let r = run(r#"
cd /tmp/out
for n in 4 5 6 8; do
    runuser -u $EVIL -- prlimit --nofile=$n env -C /tmp/out LD_PRELOAD=$LIB HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_OUTPUT=/tmp/out/n$n.%p.folded $H > /tmp/n$n.out 2> /tmp/n$n.err
    echo "N${n}_RC=$?"
    sed "s/^/n$n.err: /" /tmp/n$n.err
    echo "N${n}=$(tr '\n' ' ' < /tmp/n$n.out)"
    echo "N${n}_DUMPS=$(ls /tmp/out | grep -c "^n$n\.[0-9]*\.folded$")"
    echo "N${n}_FAILED=$(grep -c '^heaplive\[[0-9]*\]: exit dump failed: cannot write .*(Too many open files (os error 24))$' /tmp/n$n.err)"
    echo "N${n}_OTHER=$(grep -v 'exit dump\|^heaplive\[[0-9]*\]: peak ' /tmp/n$n.err | wc -l)"
done
runuser -u $EVIL -- env -C /tmp/out LD_PRELOAD=$LIB HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_OUTPUT=/tmp/out/c.%p.folded $H > /tmp/c.out 2>&-
echo "C_RC=$?"
echo "C=$(tr '\n' ' ' < /tmp/c.out)"
echo "C_LOG=$(grep -c '^heaplive\[[0-9]*\]: exit dump /tmp/out/c\.[0-9]*\.folded' /tmp/out/heaplive.$(id -u $EVIL).log)"
echo "TEMPS=$(temps)"
"#);
    for n in [4, 5, 6, 8] {
        assert_eq!(r.get(&format!("N{n}_RC")), "6", "{r}");
        assert_eq!(r.get(&format!("N{n}")), PLAIN, "{r}");
        let dumps: usize = r.get(&format!("N{n}_DUMPS")).parse().unwrap();
        let failed: usize = r.get(&format!("N{n}_FAILED")).parse().unwrap();
        // Parent and child: each dump is written or fails in one line.
        assert_eq!(dumps + failed, 2, "nofile {n}\n{r}");
        assert_eq!(r.get(&format!("N{n}_OTHER")), "0", "nofile {n}\n{r}");
    }
    r.expect(&[
        ("N4_FAILED", "2", ""),
        ("N8_DUMPS", "2", ""),
        ("C_RC", "6", ""),
    ]);
    assert_eq!(r.get("C"), PLAIN, "{r}");
    // The parent's and the child's exit dumps, in the log.
    r.expect(&[("C_LOG", "2", ""), ("TEMPS", "0", "")]);
}

#!/usr/bin/env bash
# Issue #18: what heaplive's own thread costs a single-threaded program.
#
#   bash bench/idle_thread.sh            (BENCH_PAIRS=N to change the pairs)
#
# 1. stloop (bench/src/stloop.c), a single-threaded malloc/free loop, without
#    and with one idle thread alive, no preload: the cost of glibc's
#    multi-threaded paths that any extra thread (heaplive's included) turns on.
# 2. stloop (no idle thread) under heaplive at the default settings (its
#    thread starts at the first sample, for the dump signal), under
#    HEAPLIVE_SIGNAL=none (no thread: glibc keeps its single-threaded
#    paths), and without the preload: triples, the order rotating every
#    triple; three ratios of the same runs.
# 3. sqlite3, python3, gcc (cc1), jq as in bench/run.sh: no preload vs
#    heaplive at the default interval (its thread starts at the first
#    sample), HEAPLIVE_DUMP_AT_EXIT=0.
# Pairs are interleaved (the order alternates every pair); each line is the
# median of the per-pair ratios of CPU time (user+sys) and the range.
# BENCH_ONLY=stloop runs 1 and 2 only.
# Measures and prints only: it never fails the build.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=$HERE/out
SRC=$HERE/src
HL=${HEAPLIVE_LIB:-${CARGO_TARGET_DIR:-$ROOT/target}/release/libheaplive.so}
PAIRS=${BENCH_PAIRS:-15}
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
mkdir -p "$OUT/tmp"
gcc -O2 -pthread -o "$OUT/stloop" "$SRC/stloop.c" || { echo "bench: cannot build stloop"; exit 0; }
if [ ! -f "$OUT/data.json" ] || [ ! -f "$OUT/gccinput.i" ]; then
    $PY "$SRC/gen_inputs.py" "$OUT" && gcc -E -o "$OUT/gccinput.i" "$OUT/gccinput.c" ||
        { echo "bench: cannot generate the inputs"; exit 0; }
fi
[ -f "$HL" ] || { echo "bench: $HL missing (make)"; exit 0; }
CC1=$(gcc -print-prog-name=cc1)
JQ_PROG='[.[] | select(.score > 20) | {n: .name, t: (.tags | join(",")), s: (.nested.b | add)}] | group_by(.n) | map({n: .[0].n, c: length, s: (map(.s) | add)}) | length'

# cpu PRELOAD STDIN CMD...: CPU seconds (user+sys) of one run (the preload
# applies to CMD only, not to the shell that times it). HL_SIGNAL, if set,
# becomes the run's HEAPLIVE_SIGNAL.
cpu() {
    local pre=$1 in=$2; shift 2
    /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp bash -c '
        TIMEFORMAT="%U %S"; pre=$1; in=$2; out=$3; sig=$4; shift 4
        { time env ${pre:+LD_PRELOAD=$pre} ${sig:+HEAPLIVE_SIGNAL=$sig} HEAPLIVE_DUMP_AT_EXIT=0 \
            HEAPLIVE_OUTPUT="$out/hl.%p.%n.folded" "$@" <"$in" >/dev/null 2>&1; } 2>&1' \
        _ "$pre" "$in" "$OUT/tmp" "${HL_SIGNAL:-}" "$@" | tail -1 | awk '{printf "%.4f\n", $1+$2}'
}
# report NAME RATIO...: the median ratio, the range and the count.
report() {
    local name=$1; shift
    printf '%s\n' "$@" | sort -g | awk -v n="$name" '{r[NR]=$1} END {
        m = (NR % 2) ? r[(NR+1)/2] : (r[NR/2] + r[NR/2+1]) / 2;
        printf "%-34s %6.3fx  (range %.3f-%.3f, %d pairs)\n", n, m, r[1], r[NR], NR }'
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), glibc $(ldd --version | head -1 | awk '{print $NF}')"
echo "# library: $HL"

ratios=()
for ((i = 0; i < PAIRS; i++)); do
    if ((i % 2)); then
        b=$(cpu "" /dev/null "$OUT/stloop" 20000000 1); a=$(cpu "" /dev/null "$OUT/stloop" 20000000 0)
    else
        a=$(cpu "" /dev/null "$OUT/stloop" 20000000 0); b=$(cpu "" /dev/null "$OUT/stloop" 20000000 1)
    fi
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')")
done
report "stloop: idle thread / none" "${ratios[@]}"

# stloop without an idle thread: no preload (n), heaplive default (d),
# heaplive HEAPLIVE_SIGNAL=none (s); the order rotates every triple.
r_dn=(); r_sn=(); r_ds=()
for ((i = 0; i < PAIRS; i++)); do
    for k in 0 1 2; do
        case $(((i + k) % 3)) in
            0) n=$(cpu "" /dev/null "$OUT/stloop" 20000000 0) ;;
            1) d=$(cpu "$HL" /dev/null "$OUT/stloop" 20000000 0) ;;
            2) s=$(HL_SIGNAL=none cpu "$HL" /dev/null "$OUT/stloop" 20000000 0) ;;
        esac
    done
    r_dn+=("$(awk -v a="$n" -v b="$d" 'BEGIN {print b / a}')")
    r_sn+=("$(awk -v a="$n" -v b="$s" 'BEGIN {print b / a}')")
    r_ds+=("$(awk -v a="$s" -v b="$d" 'BEGIN {print b / a}')")
done
report "stloop: heaplive default / none" "${r_dn[@]}"
report "stloop: SIGNAL=none / none" "${r_sn[@]}"
report "stloop: default / SIGNAL=none" "${r_ds[@]}"
[ "${BENCH_ONLY:-}" = stloop ] && { rm -rf "$OUT/tmp"; exit 0; }

for w in sqlite3 python3 gcc jq; do
    IN=/dev/null
    case $w in
        sqlite3) CMD=(sqlite3 :memory:); IN=$SRC/sqlite.sql ;;
        python3) CMD=("$PY" -I "$SRC/pywork.py" "$OUT/data.json") ;;
        gcc) CMD=("$CC1" -quiet -O2 -fpreprocessed "$OUT/gccinput.i" -o /dev/null) ;;
        jq) CMD=(jq -c "$JQ_PROG" "$OUT/data.json") ;;
    esac
    command -v "${CMD[0]}" >/dev/null || { echo "$w: not installed, skipped"; continue; }
    ratios=()
    for ((i = 0; i < (PAIRS + 1) / 2; i++)); do
        if ((i % 2)); then
            b=$(cpu "$HL" "$IN" "${CMD[@]}"); a=$(cpu "" "$IN" "${CMD[@]}")
        else
            a=$(cpu "" "$IN" "${CMD[@]}"); b=$(cpu "$HL" "$IN" "${CMD[@]}")
        fi
        ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {print (a > 0) ? b / a : 1}')")
    done
    report "$w: heaplive / none" "${ratios[@]}"
done
rm -rf "$OUT/tmp"
exit 0

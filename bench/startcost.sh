#!/usr/bin/env bash
# Start cost of a process that never samples (issue #13, target 4):
# `bash bench/startcost.sh` (after `make`). Prints a markdown report.
#
# Programs: /bin/true, `truec` (int main(void){return 0;}) and `small`
# (100 mallocs of 16-115 bytes, then 100 frees: far below a sample at the
# default 512 KiB interval). Configurations: none, the forwarding-only
# interposer (bench/src/nullpreload.c, the floor), heaplive
# (target/release/libheaplive.so) and, when STARTCOST_BASE names another
# build of the library (e.g. main's), that one as "base". Every heaplive run
# has HEAPLIVE_DUMP_AT_EXIT=0 (an exit dump is a cost of its own; see the
# last table).
#
# Measures:
#  - instructions in user space (valgrind --tool=callgrind, "Collected":
#    independent of the machine's load), when valgrind is installed;
#  - wall time, CPU time (user + sys of the child, from wait4) and minor
#    page faults per run: bench/src/startcost.c, ROUNDS interleaved rounds
#    of RUNS runs per configuration, median over rounds;
#  - heaplive's system calls in `truec` (strace), when strace is installed.
#
# Knobs: STARTCOST_ROUNDS=31 STARTCOST_RUNS=40 STARTCOST_BASE=path.so
#        CARGO_TARGET_DIR as for cargo.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=$HERE/out/startcost
mkdir -p "$OUT"
ROUNDS=${STARTCOST_ROUNDS:-31}
RUNS=${STARTCOST_RUNS:-40}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
LIB=$TARGET_DIR/release/libheaplive.so
BASE=${STARTCOST_BASE:-}
[ -f "$LIB" ] || { echo "startcost: $LIB missing: run make first" >&2; exit 1; }

gcc -O2 -Wall -o "$OUT/startcost" "$HERE/src/startcost.c" || exit 1
gcc -O2 -Wall -shared -fPIC -o "$OUT/nullpreload.so" "$HERE/src/nullpreload.c" -ldl || exit 1
echo 'int main(void){return 0;}' > "$OUT/truec.c"
cat > "$OUT/small.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
int main(void) {
    void *p[100];
    for (int i = 0; i < 100; i++) { p[i] = malloc(16 + i); memset(p[i], 1, 16); }
    for (int i = 0; i < 100; i++) free(p[i]);
    return 0;
}
EOF
gcc -O2 -o "$OUT/truec" "$OUT/truec.c" || exit 1
gcc -O2 -o "$OUT/small" "$OUT/small.c" || exit 1
# Copies, so that a rebuild during the run changes nothing.
cp "$LIB" "$OUT/heaplive.so"
CONFIGS=("none=" "null=$OUT/nullpreload.so" "heaplive=$OUT/heaplive.so")
if [ -n "$BASE" ]; then
    cp "$BASE" "$OUT/base.so"
    CONFIGS+=("base=$OUT/base.so")
fi
PROGS=(/bin/true "$OUT/truec" "$OUT/small")
export HEAPLIVE_DUMP_AT_EXIT=0
# The runs' stderr is /dev/null, where heaplive's lines (the peak summary
# of `small`) would otherwise go to heaplive.<euid>.log in the current
# directory (see HEAPLIVE_LOG in the README).
export HEAPLIVE_LOG="$OUT/heaplive.log"

echo "## Start cost of a process that never samples ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "\`bash bench/startcost.sh\` (ROUNDS=$ROUNDS RUNS=$RUNS${BASE:+, base = $BASE}); load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $(uname -r); glibc $(ldd --version | head -1 | awk '{print $NF}')."
echo
echo "heaplive's NEEDED: $(readelf -d "$OUT/heaplive.so" | awk '/NEEDED/ {gsub(/[][]/, "", $5); printf "%s ", $5}')"
[ -n "$BASE" ] && echo "base's NEEDED: $(readelf -d "$OUT/base.so" | awk '/NEEDED/ {gsub(/[][]/, "", $5); printf "%s ", $5}')"
echo

if command -v valgrind > /dev/null; then
    echo "### Instructions in user space (callgrind, one run each)"
    echo
    printf '| program |'; for c in "${CONFIGS[@]}"; do printf ' %s |' "${c%%=*}"; done
    printf ' heaplive - null |\n|---|'; for c in "${CONFIGS[@]}"; do printf -- '---|'; done; echo '---|'
    for p in "${PROGS[@]}"; do
        printf '| %s |' "$(basename "$p")"
        declare -A ir=()
        for c in "${CONFIGS[@]}"; do
            pre=${c#*=}
            n=$(env ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind --callgrind-out-file=/dev/null "$p" 2>&1 |
                awk '/Collected/ {print $NF}')
            ir[${c%%=*}]=$n
            printf ' %s |' "$n"
        done
        echo " $(( ${ir[heaplive]:-0} - ${ir[null]:-0} )) |"
        unset ir
    done
    echo
fi

echo "### Wall time, CPU time and page faults per run (median over $ROUNDS interleaved rounds of $RUNS runs)"
for p in "${PROGS[@]}"; do
    echo
    echo "\`$(basename "$p")\`:"
    echo
    echo '```'
    "$OUT/startcost" "$ROUNDS" "$RUNS" "$p" -- "${CONFIGS[@]}"
    echo '```'
done
echo

if command -v strace > /dev/null; then
    echo "### System calls heaplive adds to \`truec\` (strace, after ld.so's start-up)"
    echo
    for c in "${CONFIGS[@]:2}"; do
        pre=${c#*=}
        echo "${c%%=*}:"
        echo
        echo '```'
        strace -qq -E LD_PRELOAD="$pre" "$OUT/truec" 2>&1 | sed -n '/^munmap/,$p' | sed -e 's/0x[0-9a-f]*/0x…/g' -e 's/= [0-9]\{3,\}/= N/' -e 's/heaplive-\([0-9]*\)\/[0-9]*/heaplive-\1\/PID/'
        echo '```'
        echo
    done
fi

echo "### The exit dump of a process that never sampled (HEAPLIVE_DUMP_AT_EXIT=1, \`truec\`, $((ROUNDS / 3 + 1)) rounds of 10)"
echo
echo '```'
HEAPLIVE_DUMP_AT_EXIT=1 HEAPLIVE_OUTPUT="$OUT/exit.%p.folded" "$OUT/startcost" $((ROUNDS / 3 + 1)) 10 "$OUT/truec" -- "${CONFIGS[@]:1:2}" 2>/dev/null
echo '```'
rm -f "$OUT"/exit.*.folded

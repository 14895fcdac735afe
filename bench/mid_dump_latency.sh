#!/bin/sh
# How long after a dump signal its snapshot is taken when the signal
# arrives while heaplive's thread is building another dump (the first dump
# of a program with N call sites: libc's debug information and N stacks to
# symbolize). preload-tests/progs/sig_mid_dump.c has a child send it signal 1,
# then signal 2 after a random delay of 0-400 ms, and measures the time
# from signal 2 to its own handler, which heaplive runs right after the
# snapshot. Prints each run's latency and dump 1's time, then min / median
# / max over the runs. Usage: sh bench/mid_dump_latency.sh [N sites] [runs]
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-3000}
runs=${2:-20}
tmp=$(mktemp -d)
python3 - "$n" > "$tmp/sig_mid_dump_sites.h" <<'PY'
import sys
n = int(sys.argv[1])
print("static void *held[%d];" % n)
for i in range(n):
    print("__attribute__((noinline)) static void *site_%d(void) { return malloc(%d); }" % (i, 16 + i % 64))
print("__attribute__((noinline)) static void hold_all_sites(void) {")
for i in range(n):
    print("    held[%d] = site_%d();" % (i, i))
print("}")
PY
gcc -g -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls -I"$tmp" \
    -o "$tmp/mid" "$here/preload-tests/progs/sig_mid_dump.c"
i=0
while [ "$i" -lt "$runs" ]; do
    i=$((i + 1))
    rm -f "$tmp"/d.*
    delay=$(( $(od -An -N4 -tu4 /dev/urandom) % 400000 ))
    LD_PRELOAD="$here/target/release/libheaplive.so" HEAPLIVE_SAMPLE_INTERVAL=1 \
        HEAPLIVE_DUMP_AT_EXIT=0 HEAPLIVE_OUTPUT="$tmp/d.%n.folded" \
        "$tmp/mid" "$delay" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; exit 1; }
    took=$(sed -n 's/.*d\.1\.folded.*took \([0-9.]*\) ms.*/\1/p' "$tmp/err")
    echo "run $i: delay $((delay / 1000)) ms, $(cat "$tmp/out"), dump 1 took $took ms"
done | tee "$tmp/runs"
grep 'conclusive=1' "$tmp/runs" | sed 's/.*latency_us=\([0-9]*\).*/\1/' | sort -n |
    awk '{v[NR]=$1} END {printf "sites %s, runs that landed mid-dump: %d; latency min %.2f ms, median %.2f ms, max %.2f ms\n", "'"$n"'", NR, v[1]/1000, v[int((NR+1)/2)]/1000, v[NR]/1000}'
rm -rf "$tmp"

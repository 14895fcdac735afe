#!/bin/sh
# Snapshot time of a signal dump at 100,000 live samples (exact mode):
# prints the "snapshot X ms" of 20 dumps, then min / median / max.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
gcc -O1 -o "$tmp/snap" "$here/bench/snapshot_latency.c"
LD_PRELOAD="$here/target/release/libheaplive.so" HEAPLIVE_SAMPLE_INTERVAL=1 \
    HEAPLIVE_DUMP_AT_EXIT=0 HEAPLIVE_OUTPUT="$tmp/d.%n.folded" \
    "$tmp/snap" "${1:-100000}" 2>&1 |
    sed -n 's/.*in \([0-9,]*\) samples.*snapshot \([0-9.]*\) ms.*/\1 \2/p' |
    sort -k2 -n | awk '{v[NR]=$2; s=$1} END {printf "samples %s: snapshot min %.2f ms, median %.2f ms, max %.2f ms (n=%d)\n", s, v[1], v[int((NR+1)/2)], v[NR], NR}'
rm -rf "$tmp"

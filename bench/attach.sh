#!/usr/bin/env bash
# How long `heaplive attach` / `heaplive detach` keep the borrowed thread of
# the target stopped (issue #15). The target is preload-tests/progs/
# attach_main.c, started without the preload, waiting in read(); "threads"
# adds 8 threads allocating and freeing all the time (they are never
# stopped; they compete with the borrowed thread for the CPU).
# Usage: bench/attach.sh [ROUNDS]   (after `make`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
H=$root/target/release/heaplive
rounds=${1:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O1 -pthread -o "$tmp/am" "$root/preload-tests/progs/attach_main.c"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in plain threads; do
  : >"$tmp/att.$mode"; : >"$tmp/det.$mode"
  for i in $(seq "$rounds"); do
    mkfifo "$tmp/in"
    if [ "$mode" = threads ]; then "$tmp/am" threads <"$tmp/in" >"$tmp/out" & else "$tmp/am" <"$tmp/in" >"$tmp/out" & fi
    pid=$!
    exec 7>"$tmp/in"
    until grep -q ready "$tmp/out"; do sleep 0.01; done
    "$H" attach --output "$tmp/x.%p.folded" "$pid" 2>&1 |
      sed -n 's/.*stopped for \([0-9.]*\) ms (dlopen \([0-9.]*\) ms, heaplive_attach \([0-9.]*\) ms.*/\1 \2 \3/p' >>"$tmp/att.$mode"
    "$H" detach "$pid" 2>&1 | sed -n 's/.*stopped for \([0-9.]*\) ms.*/\1/p' >>"$tmp/det.$mode"
    printf xy >&7; exec 7>&-
    wait "$pid" || true
    rm -f "$tmp/in"
  done
  stats() { sort -n | awk '{v[NR]=$1} END {printf "min %.1f  median %.1f  max %.1f ms (%d runs)", v[1], v[int((NR+1)/2)], v[NR], NR}'; }
  echo "$mode: attach stop   $(cut -d' ' -f1 "$tmp/att.$mode" | stats)"
  echo "$mode:   of which dlopen          $(cut -d' ' -f2 "$tmp/att.$mode" | stats)"
  echo "$mode:   of which heaplive_attach $(cut -d' ' -f3 "$tmp/att.$mode" | stats)"
  echo "$mode: detach stop   $(stats <"$tmp/det.$mode")"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

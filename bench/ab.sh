#!/bin/bash
# A/B: CPU seconds (user+sys) of workloads under: none, the forwarding floor,
# heaplive before this session's move (d2d652a) and main now; interleaved.
OLD=${OLD:?set OLD to the older libheaplive.so}
NEW=${NEW:-$(cd "$(dirname "$0")/.." && pwd)/target/release/libheaplive.so}
cd "${AB_DIR:?set AB_DIR to a directory with churn, cxxchurn and nullpreload.so built from bench/src}"
run() { # config workload...
  local pre=""
  case $1 in null) pre=$PWD/nullpreload.so;; old) pre=$OLD;; new) pre=$NEW;; esac
  shift
  /usr/bin/env -i PATH=/usr/bin:/bin HEAPLIVE_DUMP_AT_EXIT=0 ${pre:+LD_PRELOAD=$pre} bash -c 'TIMEFORMAT="%U %S"; { time "$@" >/dev/null 2>&1; } 2>&1' _ "$@" | awk '{print $1+$2}'
}
for w in "churn 2 2000000" "cxxchurn 2 1000000"; do
  for r in 1 2 3 4 5; do
    for c in none null old new; do echo "$w|$c|$(run $c ./$w)"; done
  done
done

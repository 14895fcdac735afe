#!/usr/bin/env bash
# `make demo`: profiles the bundled demo program with heaplive, then prints
# the top stacks, and the paths of its folded file and flame graph.
set -euo pipefail
cd "$(dirname "$0")/.."
out=demo-out
rm -rf "$out"
mkdir -p "$out"
# cargo's output: target/, or $CARGO_TARGET_DIR (relative to the checkout).
bin=${CARGO_TARGET_DIR:-target}/release/heaplive
[ -x "$bin" ] || { echo "demo: $bin is missing: run make first" >&2; exit 1; }
cc -g -O1 -fno-omit-frame-pointer -o "$out/demo" scripts/demo/demo.c
"$bin" run --output "$PWD/$out/heaplive.%e.%p.%n.folded" -- "$out/demo"
folded=$(ls "$out"/heaplive.demo.*.folded | head -n 1)
"$bin" top -n 5 "$folded"
"$bin" flamegraph "$folded" -o "$out/demo.svg" --title "heaplive demo: live heap at exit"
echo
echo "folded file: $folded"
echo "flame graph: $PWD/$out/demo.svg"

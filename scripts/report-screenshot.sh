#!/usr/bin/env bash
# Makes the README's screenshot of a report, src/cli/report-screenshot.png:
# the demo program (scripts/demo/demo.c: a cache that grows, sessions that
# stay bounded, scratch buffers freed at once), pausing 100 ms after every
# 1,000 requests, under `heaplive run --every 500ms --report`, drawn by
# headless Chromium. Needs `make` (the build), cc and chromium
# (scripts/install-test-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CARGO_TARGET_DIR:-target}/release/heaplive
[ -x "$bin" ] || { echo "report-screenshot: $bin is missing: run make first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -g -O1 -fno-omit-frame-pointer -o "$out/demo" scripts/demo/demo.c
HEAPLIVE_VIEWS=live,alloc,peak,samples,temporary \
"$bin" run --interval 64K --every 500ms --output "$out/heaplive.%e.%p.%n.folded" \
    --report "$out/report.html" -- "$out/demo" 100 >"$out/run.log" 2>&1 || { cat "$out/run.log" >&2; exit 1; }
chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --host-resolver-rules='MAP * ~NOTFOUND' --hide-scrollbars \
    --user-data-dir="$out/profile" --window-size=1200,1500 \
    --screenshot="$out/shot.png" "file://$out/report.html" 2>/dev/null
cp "$out/shot.png" src/cli/report-screenshot.png
echo "wrote src/cli/report-screenshot.png"

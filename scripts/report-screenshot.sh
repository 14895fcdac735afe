#!/usr/bin/env bash
# Makes the README's screenshot of a report, src/cli/report-screenshot.png:
# python3 fills a dict and keeps a 3 MiB bytearray per step (with one
# short-lived buffer a step, for the temporary view) under
# `heaplive run --every 500ms --report`, and headless Chromium draws the
# page. Needs `make` (the build), python3 and chromium
# (scripts/install-test-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CARGO_TARGET_DIR:-target}/release/heaplive
[ -x "$bin" ] || { echo "report-screenshot: $bin is missing: run make first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
HEAPLIVE_VIEWS=live,alloc,peak,samples,temporary \
"$bin" run --every 500ms --output "$out/heaplive.%e.%p.%n.folded" \
    --report "$out/report.html" -- python3 -c '
import time
d, keep = {}, []
for step in range(12):
    for i in range(40000):
        d["k%d.%d" % (step, i)] = i
    keep.append(bytearray(3 << 20))
    for i in range(200):
        bytes(64 << 10)
    time.sleep(0.25)
'
chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --host-resolver-rules='MAP * ~NOTFOUND' --hide-scrollbars \
    --user-data-dir="$out/profile" --window-size=1200,1600 \
    --screenshot="$out/shot.png" "file://$out/report.html" 2>/dev/null
cp "$out/shot.png" src/cli/report-screenshot.png
echo "wrote src/cli/report-screenshot.png"

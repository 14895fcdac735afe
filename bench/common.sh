# Sourced by bench/run.sh and bench/php.sh: where things are.
#
# bench_paths OUT DEFAULT: HERE (bench/), ROOT (the checkout), SRC
# (bench/src), OUT (OUT, or bench/DEFAULT when it is empty) with its tmp/
# and logs/ made, and PY (the system's python3, else the one on PATH).
bench_paths() {
    HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    ROOT=$(cd "$HERE/.." && pwd)
    OUT=${1:-$HERE/$2}
    SRC=$HERE/src
    mkdir -p "$OUT/tmp" "$OUT/logs"
    PY=/usr/bin/python3
    [ -x $PY ] || PY=python3
}

# history_file KIND: bench/history/DATE-HHMM-KIND.md, a session's report.
history_file() {
    echo "$HERE/history/$(date -u +%Y-%m-%d-%H%M)-$1.md"
}

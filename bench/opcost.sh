#!/usr/bin/env bash
# The cost of one allocation operation (ns per malloc+free pair and per
# new+delete pair) under each configuration: `bash bench/opcost.sh`, or the
# `ops` section of bench/run.sh (`make bench`).
#
# Runs bench/src/opcost.cc (see its header for the cases) once per
# configuration and round, the configurations interleaved in an order
# rotated every round (A B C / B C A / ...), and prints a markdown table of
# the medians over the rounds: CPU nanoseconds per pair, and heaplive's cost
# over the forwarding-only interposer (bench/src/nullpreload.c), the floor
# of any LD_PRELOAD wrapper. heaplive-exact runs 1/50 of the pairs (the
# figure is per pair either way).
#
# Knobs (environment):
#   OPCOST_ROUNDS=5
#   OPCOST_CONFIGS="none null heaplive-dormant heaplive heaplive-exact"
#   OPCOST_CASES=""           case names for opcost (default: all twelve)
#   OPCOST_SCALE=1            multiplies every case's pair count
#   OPCOST_LIB=target/release/libheaplive.so (copied first: others may
#                             rebuild it meanwhile)
#   OPCOST_OUT=bench/out      where it builds and keeps the raw TSV
#                             (opcost-STAMP.tsv: config round case threads
#                             pairs ns_per_pair wall_s)
#   OPCOST_MD=FILE            also write the table there
#   OPCOST_OLD_LIB=FILE       another libheaplive.so (a build before a
#                             change), measured interleaved with the rest as
#                             configs old-heaplive-dormant, old-heaplive and
#                             old-heaplive-exact (name them in OPCOST_CONFIGS)
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OPCOST_OUT:-$HERE/out}
ROUNDS=${OPCOST_ROUNDS:-5}
CONFIGS=${OPCOST_CONFIGS:-none null heaplive-dormant heaplive heaplive-exact}
CASES=${OPCOST_CASES:-}
SCALE=${OPCOST_SCALE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case $TARGET_DIR in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
LIBSRC=${OPCOST_LIB:-$TARGET_DIR/release/libheaplive.so}
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
mkdir -p "$OUT/tmp"
say() { echo "opcost: $*" >&2; }

g++ -O2 -g -Wall -std=c++17 -fno-builtin-malloc -fno-builtin-free -pthread \
    -o "$OUT/opcost" "$HERE/src/opcost.cc" || { say "building opcost failed"; exit 1; }
gcc -O2 -g -Wall -shared -fPIC -o "$OUT/nullpreload-ops.so" "$HERE/src/nullpreload.c" -ldl ||
    { say "building nullpreload.so failed"; exit 1; }
[ -f "$LIBSRC" ] || { say "no $LIBSRC: build it first (make build)"; exit 1; }
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
HL=$OUT/tmp/libheaplive-ops-$STAMP.so
cp "$LIBSRC" "$HL"
OLD=$OUT/tmp/libheaplive-ops-old-$STAMP.so
if [ -n "${OPCOST_OLD_LIB:-}" ]; then cp "$OPCOST_OLD_LIB" "$OLD" || exit 1; fi
TSV=$OUT/opcost-$STAMP.tsv
: > "$TSV"

cfg_env() { # CONFIG: sets ENV (K=V ...) and RUNSCALE
    local lib=$HL c=$1
    case $c in old-*) lib=$OLD; c=${c#old-} ;; esac
    local hl=(LD_PRELOAD="$lib" HEAPLIVE_DUMP_AT_EXIT=0 HEAPLIVE_OUTPUT="$OUT/tmp/ops.%p.%n.folded")
    RUNSCALE=$SCALE
    case $c in
        none) ENV=() ;;
        null) ENV=(LD_PRELOAD="$OUT/nullpreload-ops.so") ;;
        heaplive) ENV=("${hl[@]}") ;;
        heaplive-dormant) ENV=("${hl[@]}" HEAPLIVE_START=0) ;;
        heaplive-exact) ENV=("${hl[@]}" HEAPLIVE_SAMPLE_INTERVAL=1)
            RUNSCALE=$(awk -v s="$SCALE" 'BEGIN { print s / 50 }') ;;
        *) say "unknown configuration $1"; return 1 ;;
    esac
}

read -r -a CFGS <<< "$CONFIGS"
n=${#CFGS[@]}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
for r in $(seq 1 "$ROUNDS"); do
    say "round $r/$ROUNDS ($(( $(date +%s) - T0 )) s)"
    for k in $(seq 0 $((n - 1))); do
        c=${CFGS[$(( (k + r - 1) % n ))]}
        cfg_env "$c" || continue
        # shellcheck disable=SC2086
        env "${ENV[@]}" "$OUT/opcost" "$RUNSCALE" $CASES 2>>"$OUT/tmp/opcost.log" |
            awk -v c="$c" -v r="$r" -F'\t' 'NF == 5 { print c "\t" r "\t" $0 }' >> "$TSV"
        rm -f "$OUT"/tmp/ops.*.folded
    done
done
rm -f "$HL" "$OLD"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

"$PY" - "$TSV" "$CONFIGS" "$LOAD_BEFORE" "$LOAD_AFTER" "$(( $(date +%s) - T0 ))" "${OPCOST_MD:-}" <<'EOF'
import sys, statistics
from collections import defaultdict
tsv, configs, lb, la, secs, md = sys.argv[1:7]
configs = configs.split()
ns = defaultdict(list)  # (case, config) -> ns per pair, one per round
cases = []
for line in open(tsv):
    f = line.rstrip("\n").split("\t")
    if len(f) != 7:
        continue
    cfg, case = f[0], f[2]
    ns[(case, cfg)].append(float(f[5]))
    if case not in cases:
        cases.append(case)
med = lambda v: statistics.median(v) if v else float("nan")
num = lambda v, d=1: "n/a" if v != v else f"{v:.{d}f}"
L = []
w = L.append
rounds = max((len(v) for v in ns.values()), default=0)
w(f"Median over {rounds} interleaved rounds of the CPU nanoseconds per pair (thread CPU time of the "
  f"workers over their pairs; 4 threads share 2 CPUs); load average before {lb}, after {la}; {secs} s.\n")
head = "| case | " + " | ".join(configs) + " |"
extra = []
if "null" in configs:
    for c in ("old-heaplive-dormant", "heaplive-dormant", "old-heaplive", "heaplive"):
        if c in configs:
            extra.append(c)
head += "".join(f" {c} - null | {c} / null |" for c in extra)
w(head)
w("|" + "---|" * (1 + len(configs) + 2 * len(extra)))
for case in cases:
    row = f"| {case} | " + " | ".join(num(med(ns[(case, c)])) for c in configs) + " |"
    for c in extra:
        a, b = med(ns[(case, c)]), med(ns[(case, "null")])
        row += f" {num(a - b)} | {'n/a' if b != b or b == 0 else f'{a / b:.3f}x'} |"
    w(row)
w("")
text = "\n".join(L)
print(text)
if md:
    open(md, "w").write(text + "\n")
EOF
say "raw data: $TSV"

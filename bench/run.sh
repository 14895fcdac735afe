#!/usr/bin/env bash
# heaplive benchmark suite: `make bench` (or `bash bench/run.sh`).
#
# Builds the workloads into bench/out/, runs every configuration interleaved
# (per workload and round: the fast configurations back to back in an order
# rotated every round, A B C / B C A / ..., then the slow ones in the first
# BENCH_SLOW_ROUNDS rounds), records one TSV line per run
# (wall, user, sys, peak RSS) and appends medians, ratios and the targets to
# a new file in bench/history/. Measures and records only: it never fails the build.
#
# Knobs (environment):
#   BENCH_ROUNDS=9        interleaved rounds of the fast configurations
#   BENCH_SLOW_ROUNDS=3   rounds in which the slow ones (heaplive-exact,
#                         heaptrack, heaptrack-raw) also run (the first N
#                         rounds)
#   BENCH_SWEEP_ROUNDS=4  rounds of the thread-count sweep
#   BENCH_DUMP_ROUNDS=3   runs of the dump-time benchmark
#   BENCH_ONLY="main sweep dump attr ops ownmem"   sections to run (attr:
#                         where the CPU goes under heaplive, by perf sampling;
#                         needs perf; ops: ns per malloc+free and new+delete
#                         pair, bench/opcost.sh; ownmem: heaplive's own memory
#                         and the peak RSS with dumps, issue #13 target 3)
#   BENCH_OPS_ROUNDS=5    interleaved rounds of the ops section
#   BENCH_OWNMEM_ROUNDS=2 rounds of the ownmem section
#   BENCH_WORKLOADS="churn cxxchurn sqlite3 jq python3 gcc"
#   BENCH_CONFIGS="none null heaplive heaplive-exact heaptrack heaptrack-raw jemalloc jemalloc-prof"
#                         (heaptrack: its whole pipeline, `heaptrack -o`,
#                         measured from the script's start to its end, the
#                         interpreter's work included; heaptrack-raw: the
#                         traced process alone while heaptrack records, as
#                         `heaptrack --raw` runs it: its preload library
#                         writing into a pipe that zstd drains, no
#                         interpreter; issue #13 compares exact mode with
#                         this one)
#                         (also: heaplive-exact-libgcc, exact mode with
#                         HEAPLIVE_UNWIND=libgcc, the unwinder before the cache;
#                         heaplive-dormant, loaded with HEAPLIVE_START=0)
#   BENCH_OLD_LIB=FILE    another libheaplive.so (a build before a change):
#                         configs old-heaplive, old-heaplive-dormant,
#                         old-heaplive-exact run it, interleaved with the rest
#   BENCH_RESULTS=bench/history/DATE-HHMM-run.md  where the report is
#                         appended (bench/RESULTS.md is the page of current
#                         figures, updated by hand)
#   BENCH_NO_BUILD=1      do not run cargo build (use target/release as is)
#   CARGO_TARGET_DIR      where cargo builds, as for cargo (default target/)
set -u
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_paths "" out

ROUNDS=${BENCH_ROUNDS:-9}
SLOW_ROUNDS=${BENCH_SLOW_ROUNDS:-3}
SWEEP_ROUNDS=${BENCH_SWEEP_ROUNDS:-4}
DUMP_ROUNDS=${BENCH_DUMP_ROUNDS:-3}
ONLY=${BENCH_ONLY:-main sweep dump attr ops ownmem}
OPS_ROUNDS=${BENCH_OPS_ROUNDS:-5}
OWNMEM_ROUNDS=${BENCH_OWNMEM_ROUNDS:-2}
WORKLOADS=${BENCH_WORKLOADS:-churn cxxchurn sqlite3 jq python3 gcc}
CONFIGS=${BENCH_CONFIGS:-none null heaplive heaplive-exact heaptrack heaptrack-raw jemalloc jemalloc-prof}
RESULTS=${BENCH_RESULTS:-$(history_file run)}
JE=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
START=$(date +%s)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
TSV=$OUT/results-$STAMP.tsv
META=$OUT/meta-$STAMP.txt
: > "$TSV"; : > "$META"

say() { echo "bench: $*" >&2; }
meta() { printf '%s=%s\n' "$1" "$2" >> "$META"; }

# --- build -----------------------------------------------------------------
CF="-O2 -g -Wall"
build() {
    gcc $CF -o "$OUT/runit" "$SRC/runit.c" &&
    gcc $CF -shared -fPIC -o "$OUT/nullpreload.so" "$SRC/nullpreload.c" -ldl &&
    gcc $CF -pthread -o "$OUT/churn" "$SRC/churn.c" -lm &&
    g++ $CF -std=c++17 -pthread -o "$OUT/cxxchurn" "$SRC/cxxchurn.cpp" &&
    gcc -O1 -g -fno-optimize-sibling-calls -fno-inline -o "$OUT/dumpbench" "$SRC/dumpbench.c" -ldl &&
    $PY "$SRC/gen_inputs.py" "$OUT" &&
    gcc -E -o "$OUT/gccinput.i" "$OUT/gccinput.c"
}
if ! build; then say "building the workloads failed; nothing measured"; exit 0; fi

# Snapshot the library: others may rebuild target/ while we measure.
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case $TARGET_DIR in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
LIBSRC=$TARGET_DIR/release/libheaplive.so
if [ -z "${BENCH_NO_BUILD:-}" ] && ! [ -f "$LIBSRC" ]; then
    (cd "$ROOT" && cargo build --release >/dev/null 2>&1) || true
fi
if ! [ -f "$LIBSRC" ]; then say "no $LIBSRC: build it first (make build); nothing measured"; exit 0; fi
cp "$LIBSRC" "$OUT/libheaplive.so"
HL=$OUT/libheaplive.so
if [ -n "${BENCH_OLD_LIB:-}" ]; then cp "$BENCH_OLD_LIB" "$OUT/libheaplive-old.so" || exit 0; fi

# --- machine and versions ----------------------------------------------------
meta date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
meta nproc "$(nproc)"
meta cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
meta kernel "$(uname -sr)"
meta glibc "$(ldd --version 2>&1 | head -1)"
meta gcc "$(gcc --version | head -1)"
meta mem "$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
meta commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) ($(git -C "$ROOT" status --porcelain src 2>/dev/null | wc -l) modified files under src/)"
meta lib_sha256 "$(sha256sum "$HL" | cut -c1-16)"
meta load_before "$(cut -d' ' -f1-3 /proc/loadavg)"
meta sections "$ONLY"; meta workloads "$WORKLOADS"; meta rounds "$ROUNDS"; meta slow_rounds "$SLOW_ROUNDS"; meta sweep_rounds "$SWEEP_ROUNDS"; meta dump_rounds "$DUMP_ROUNDS"; meta ops_rounds "$OPS_ROUNDS"; meta ownmem_rounds "$OWNMEM_ROUNDS"
meta heaptrack "$(heaptrack --version 2>/dev/null | head -1 || echo absent)"
meta sqlite3 "$(sqlite3 --version 2>/dev/null | cut -d' ' -f1)"
meta jq "$(jq --version 2>/dev/null)"
meta python3 "$($PY --version 2>&1)"

# heaptrack's preload library (heaptrack-raw runs it without the script):
# where the script finds it, lib/heaptrack/ beside its bin/.
HT_PRELOAD=
if command -v heaptrack >/dev/null; then
    for d in "$(dirname "$(readlink -f "$(command -v heaptrack)")")/../lib/heaptrack" /usr/lib/heaptrack /usr/lib/x86_64-linux-gnu/heaptrack; do
        if [ -f "$d/libheaptrack_preload.so" ]; then HT_PRELOAD=$(readlink -f "$d/libheaptrack_preload.so"); break; fi
    done
fi
# Which optional configurations exist here.
have_cfg() {
    case $1 in
        heaptrack) command -v heaptrack >/dev/null ;;
        heaptrack-raw) [ -n "$HT_PRELOAD" ] && command -v zstd >/dev/null ;;
        jemalloc|jemalloc-prof) [ -f "$JE" ] ;;
        *) true ;;
    esac
}
if [ -f "$JE" ]; then
    w=$(MALLOC_CONF=prof:true,lg_prof_sample:19 LD_PRELOAD=$JE /bin/true 2>&1)
    meta jemalloc_prof "$([ -z "$w" ] && echo 'prof:true accepted without a warning' || echo "WARNING: $w")"
fi
CFGS=()
for c in $CONFIGS; do if have_cfg "$c"; then CFGS+=("$c"); else say "skipping $c (not installed)"; fi; done

# --- workloads and configurations ----------------------------------------------
CC1=$(gcc -print-prog-name=cc1)
JQ_PROG='[.[] | select(.score > 20) | {n: .name, t: (.tags | join(",")), s: (.nested.b | add)}] | group_by(.n) | map({n: .[0].n, c: length, s: (map(.s) | add)}) | length'
# wl_cmd NAME [THREADS]: sets CMD (array) and STDIN. Sizes: each workload
# runs about 1.5 s or more without a preload (issue #13), so that fixed
# costs (start, exit) do not dominate the ratios.
wl_cmd() {
    STDIN=/dev/null
    case $1 in
        churn) CMD=("$OUT/churn" "${2:-2}" "${3:-7500000}") ;;
        cxxchurn) CMD=("$OUT/cxxchurn" "${2:-2}" 3200000) ;;
        sqlite3) CMD=(sqlite3 :memory:); STDIN=$SRC/sqlite.sql ;;
        jq) CMD=(jq -c "$JQ_PROG" "$OUT/data.json") ;;
        python3) CMD=("$PY" -I "$SRC/pywork.py" "$OUT/data.json") ;;
        gcc) CMD=("$CC1" -quiet -O2 -fpreprocessed "$OUT/gccinput.i" -o /dev/null) ;;
    esac
}
# cfg_env CONFIG TAG: sets ENV (array of K=V) and PREFIX (array).
cfg_env() {
    ENV=(); PREFIX=()
    local lib=$HL c=$1
    case $c in old-*) lib=$OUT/libheaplive-old.so; c=${c#old-} ;; esac
    local hl=(LD_PRELOAD="$lib" HEAPLIVE_DUMP_AT_EXIT=0 HEAPLIVE_OUTPUT="$OUT/tmp/hl.%e.%p.%n.folded")
    case $c in
        none) ;;
        null) ENV=(LD_PRELOAD="$OUT/nullpreload.so") ;;
        heaplive) ENV=("${hl[@]}") ;;
        heaplive-exact) ENV=("${hl[@]}" HEAPLIVE_SAMPLE_INTERVAL=1) ;;
        heaplive-dormant) ENV=("${hl[@]}" HEAPLIVE_START=0) ;;
        heaplive-exact-libgcc) ENV=("${hl[@]}" HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_UNWIND=libgcc) ;;
        heaptrack) PREFIX=(heaptrack -o "$OUT/tmp/ht.$2") ;;
        # What the heaptrack script runs with --raw, with runit timing the
        # traced process itself (run_one starts zstd on the pipe first).
        heaptrack-raw) ENV=(LD_PRELOAD="$HT_PRELOAD" DUMP_HEAPTRACK_OUTPUT="$OUT/tmp/ht.fifo") ;;
        jemalloc) ENV=(LD_PRELOAD="$JE") ;;
        jemalloc-prof) ENV=(LD_PRELOAD="$JE" MALLOC_CONF=prof:true,lg_prof_sample:19) ;;
    esac
}
is_slow() { case $1 in heaplive-exact|old-heaplive-exact|heaplive-exact-libgcc|heaptrack|heaptrack-raw) true ;; *) false ;; esac; }

run_one() { # SECTION/WORKLOAD-LABEL CONFIG ROUND WORKLOAD [THREADS [OPS]]
    local label=$1 cfg=$2 round=$3 wl=$4
    wl_cmd "$wl" "${5:-}" "${6:-}"
    cfg_env "$cfg" "$label.$round"
    local drain=
    if [ "$cfg" = heaptrack-raw ]; then
        # As the heaptrack script does: a fifo, and its reader started
        # before the traced process (which opens it at start).
        rm -f "$OUT/tmp/ht.fifo"
        mkfifo "$OUT/tmp/ht.fifo"
        zstd -q -c < "$OUT/tmp/ht.fifo" > "$OUT/tmp/ht.$label.$round.raw.zst" &
        drain=$!
    fi
    "$OUT/runit" "$TSV" "$label" "$cfg" "$round" -i "$STDIN" -o /dev/null -e "$OUT/logs/$label.$cfg.log" \
        "${ENV[@]}" -- "${PREFIX[@]}" "${CMD[@]}" || say "runit failed for $label/$cfg"
    if [ -n "$drain" ]; then
        # A process that died before heaptrack opened the pipe leaves zstd
        # waiting for a writer: open it once, so that zstd sees the end.
        if kill -0 "$drain" 2>/dev/null; then timeout 5 bash -c ': > "$1"' _ "$OUT/tmp/ht.fifo"; fi
        wait "$drain" || say "zstd failed for $label/$cfg"
        rm -f "$OUT/tmp/ht.fifo"
    fi
    rm -f "$OUT"/tmp/ht.* "$OUT"/tmp/hl.*
}

# The exact command lines, for the report.
{
    for wl in $WORKLOADS; do wl_cmd "$wl"; printf 'wl\t%s\t%s%s\n' "$wl" "${CMD[*]}" "$([ "$STDIN" != /dev/null ] && echo " < $STDIN")"; done
    for c in "${CFGS[@]}"; do cfg_env "$c" X; printf 'cfg\t%s\t%s\n' "$c" "${ENV[*]} ${PREFIX[*]}"; done
} > "$OUT/commands-$STAMP.txt"

# --- main matrix ---------------------------------------------------------------
if [[ " $ONLY " == *" main "* ]]; then
    FAST=(); SLOW=()
    for c in "${CFGS[@]}"; do if is_slow "$c"; then SLOW+=("$c"); else FAST+=("$c"); fi; done
    n=${#FAST[@]}
    for r in $(seq 1 "$ROUNDS"); do
        say "main round $r/$ROUNDS ($(( $(date +%s) - START ))s)"
        for wl in $WORKLOADS; do
            # The fast configurations back to back (order rotated every
            # round), so that paired runs are close in time; then the slow.
            for k in $(seq 0 $((n - 1))); do
                run_one "$wl" "${FAST[$(( (k + r - 1) % n ))]}" "$r" "$wl"
            done
            if [ "$r" -le "$SLOW_ROUNDS" ]; then
                for c in "${SLOW[@]}"; do run_one "$wl" "$c" "$r" "$wl"; done
            fi
        done
    done
fi

# --- thread-count sweep (strong scaling: 500,000 ops in total) -------------------
if [[ " $ONLY " == *" sweep "* ]]; then
    SW=(none null heaplive)
    for r in $(seq 1 "$SWEEP_ROUNDS"); do
        say "sweep round $r/$SWEEP_ROUNDS ($(( $(date +%s) - START ))s)"
        for t in 1 2 4 8 16; do
            for k in 0 1 2; do
                run_one "sweep-t$t" "${SW[$(( (k + r - 1) % 3 ))]}" "$r" churn "$t" 500000
            done
            run_one "sweep-t$t" heaplive-exact "$r" churn "$t" 500000
        done
    done
fi

# --- dump time -------------------------------------------------------------------
if [[ " $ONLY " == *" dump "* ]]; then
    say "dump benchmark ($(( $(date +%s) - START ))s)"
    : > "$OUT/dump-$STAMP.txt"
    for r in $(seq 1 "$DUMP_ROUNDS"); do
        rm -f "$OUT"/tmp/dumpbench.*
        "$OUT/runit" "$TSV" dump heaplive-exact "$r" -o "$OUT/tmp/dump.out" -e "$OUT/logs/dump.log" \
            LD_PRELOAD="$HL" HEAPLIVE_SAMPLE_INTERVAL=1 HEAPLIVE_DUMP_AT_EXIT=0 \
            HEAPLIVE_OUTPUT="$OUT/tmp/hl.%p.%n.folded" -- "$OUT/dumpbench" "$OUT/tmp" 10000
        line=$(cat "$OUT/tmp/dump.out")
        f=$OUT/tmp/dumpbench.2.folded
        printf '%s lines=%s bytes=%s\n' "$line" "$( [ -f "$f" ] && wc -l < "$f" || echo 0)" "$( [ -f "$f" ] && wc -c < "$f" || echo 0)" >> "$OUT/dump-$STAMP.txt"
    done
    cp "$OUT/tmp/dumpbench.2.folded" "$OUT/dumpbench.sample.folded" 2>/dev/null
fi

# --- attribution: share of CPU samples per DSO (needs perf) ------------------------
# Timing on a shared 2-core VM is noisy (see the spread column); the share of
# samples that land in libheaplive.so (and in libgcc_s, the unwinder, which
# only heaplive calls in these programs) is a noise-free lower bound of the
# direct overhead.
if [[ " $ONLY " == *" attr "* ]] && command -v perf >/dev/null && perf record -q -o "$OUT/tmp/perf.probe" -- /bin/true >/dev/null 2>&1; then
    say "attribution ($(( $(date +%s) - START ))s)"
    : > "$OUT/attr-$STAMP.txt"
    for wl in $WORKLOADS; do
        for c in heaplive null; do
            wl_cmd "$wl"; cfg_env "$c" attr
            perf record -q -F 2999 -o "$OUT/tmp/perf.data" -- env "${ENV[@]}" "${CMD[@]}" < "$STDIN" >/dev/null 2>>"$OUT/logs/attr.log"
            perf report -i "$OUT/tmp/perf.data" --no-children --sort dso --stdio 2>/dev/null |
                awk -v wl="$wl" -v c="$c" '/^ +[0-9.]+%/ { sub("%", "", $1); print wl "\t" c "\t" $2 "\t" $1 }' >> "$OUT/attr-$STAMP.txt"
        done
    done
    rm -f "$OUT/tmp/perf.data" "$OUT/tmp/perf.data.old"
fi
rm -f "$OUT/tmp/perf.probe"

# --- cost per operation (bench/opcost.sh) ------------------------------------------
if [[ " $ONLY " == *" ops "* ]]; then
    say "cost per operation ($(( $(date +%s) - START ))s)"
    OPCOST_ROUNDS=$OPS_ROUNDS OPCOST_LIB="$HL" OPCOST_OUT="$OUT" OPCOST_MD="$OUT/ops-$STAMP.md" \
        bash "$HERE/opcost.sh" > /dev/null 2>> "$OUT/logs/ops.log" || say "opcost.sh failed (see $OUT/logs/ops.log)"
fi

# --- heaplive's own memory, dumps included (issue #13, target 3) ------------------
# Per workload and round: no preload, then heaplive (sampled) and
# heaplive-exact WITH dumps: periodic ones (HEAPLIVE_DUMP_EVERY, a fifth of
# this round's no-preload wall time, 100 ms at least, so that a run gets 4 or
# more, exact mode many more as it runs longer) and the exit dump (with its
# peak view). Each run logs its dump lines to its own HEAPLIVE_LOG; report.py
# reads heaplive's own memory (mapped, in use) and the live heap from them,
# and peak RSS (dumps included) from runit's TSV line (ownmem-WORKLOAD).
if [[ " $ONLY " == *" ownmem "* ]]; then
    say "own memory ($(( $(date +%s) - START ))s)"
    : > "$OUT/ownmem-$STAMP.txt"
    for r in $(seq 1 "$OWNMEM_ROUNDS"); do
        for wl in $WORKLOADS; do
            run_one "ownmem-$wl" none "$r" "$wl"
            wall=$(awk -F'\t' -v l="ownmem-$wl" -v r="$r" '$1 == l && $2 == "none" && $3 == r { w = $4 } END { print w + 0 }' "$TSV")
            ms=$(awk -v w="$wall" 'BEGIN { m = int(w * 1000 / 5); print (m < 100 ? 100 : m) }')
            for c in heaplive heaplive-exact; do
                log=$OUT/logs/ownmem.$wl.$c.$r.log
                : > "$log"
                wl_cmd "$wl"
                ENV=(LD_PRELOAD="$HL" HEAPLIVE_OUTPUT="$OUT/tmp/om.%p.%n.folded" HEAPLIVE_LOG="$log" HEAPLIVE_DUMP_EVERY="${ms}ms")
                [ "$c" = heaplive-exact ] && ENV+=(HEAPLIVE_SAMPLE_INTERVAL=1)
                "$OUT/runit" "$TSV" "ownmem-$wl" "$c" "$r" -i "$STDIN" -o /dev/null -e "$OUT/logs/ownmem-$wl.$c.stderr" \
                    "${ENV[@]}" -- "${CMD[@]}" || say "runit failed for ownmem-$wl/$c"
                rm -f "$OUT"/tmp/om.*
                printf '%s\t%s\t%s\t%s\t%s\n' "$wl" "$c" "$r" "$ms" "$log" >> "$OUT/ownmem-$STAMP.txt"
            done
        done
    done
fi

meta load_after "$(cut -d' ' -f1-3 /proc/loadavg)"
meta duration_s "$(( $(date +%s) - START ))"
say "measured in $(( $(date +%s) - START ))s; writing $RESULTS"
$PY "$HERE/report.py" "$OUT" "$STAMP" "$RESULTS" || say "report failed (raw data in $TSV)"
exit 0

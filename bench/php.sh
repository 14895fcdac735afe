#!/usr/bin/env bash
# PHP mode at production cost (issue 26): `make bench-php` (or
# `bash bench/php.sh`). Measures and records only: never fails the build.
#
# Workloads (php8.2 cli, opcache on: -d opcache.enable_cli=1):
#   pparser  Debian's php-parser parsing and pretty-printing the first 40
#            .php files of its own tree /usr/share/php/PhpParser twice
#            (bench/src/php_parser.php)
#   cpu      bench.php's kernels: loops, strings, arrays, calls
#            (bench/src/php_bench.php)
# Configurations: none (no preload), native (HEAPLIVE_PHP=native), php512
# (PHP mode, the default interval, 512 KiB), php64 (64 KiB), exact
# (HEAPLIVE_SAMPLE_INTERVAL=1).
#
# Figures:
#   callgrind  instructions (valgrind --tool=callgrind: deterministic but for
#              the sampling's random draws; the stable figure) of none,
#              native, php512 and php64, and the number of samples taken
#              (calls of heaplive's `api::record`, one per sample)
#   time       interleaved rounds of wall and CPU time (runit), the fast
#              configurations in an order rotated every round, exact in the
#              first PHPB_EXACT_ROUNDS rounds; what each run printed
#              (memory_get_usage/memory_get_peak_usage of pparser), against
#              a run without the preload in the same environment (plain-*)
#   fpm        php-fpm8.2 worker CPU per request (bench/src/fpm_bench.py:
#              a FastCGI client of our own, one static worker per
#              configuration, interleaved batches, php-parser and Twig
#              endpoints)
#   fpmcg      php-fpm8.2 worker instructions per request under callgrind
#              (bench/src/fpm_callgrind.py: a run of PHPB_FPMCG_N1 and one
#              of PHPB_FPMCG_N2 requests per configuration, the difference
#              per request: the figure noise cannot move; about 1 minute per
#              run)
# and bench/php_report.py appends the section with the verdict per target of
# issue 26 to a new file in bench/history/.
#
# Knobs (environment):
#   PHPB_ROUNDS=7           interleaved rounds of the fast configurations
#   PHPB_EXACT_ROUNDS=2     rounds that also run exact mode
#   PHPB_FPM_ROUNDS=7       interleaved fpm rounds
#   PHPB_FPM_BATCH=120      requests per configuration and fpm round
#   PHPB_FPM_CONFIGS="none php"   (also: native)
#   PHPB_FPMCG_N1=12 PHPB_FPMCG_N2=36  requests of fpmcg's two runs
#   PHPB_ONLY="callgrind time fpm fpmcg"  sections to run
#   PHPB_LIB=FILE           the library to measure (default: target/release's,
#                           copied first, so that a rebuild meanwhile does not
#                           change it)
#   PHPB_LABEL=TEXT         a label for the report's heading ("before", ...)
#   PHPB_RESULTS=bench/history/DATE-HHMM-php.md  where the report is appended
#   PHPB_OUT=bench/out/php  where runs, logs and raw data go
set -u
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_paths "${PHPB_OUT:-}" out/php
ROUNDS=${PHPB_ROUNDS:-7}
EXACT_ROUNDS=${PHPB_EXACT_ROUNDS:-2}
FPM_ROUNDS=${PHPB_FPM_ROUNDS:-7}
FPM_BATCH=${PHPB_FPM_BATCH:-120}
FPM_CONFIGS=${PHPB_FPM_CONFIGS:-none php}
FPMCG_N1=${PHPB_FPMCG_N1:-12}
FPMCG_N2=${PHPB_FPMCG_N2:-36}
ONLY=${PHPB_ONLY:-callgrind time fpm fpmcg}
RESULTS=${PHPB_RESULTS:-$(history_file php)}
START=$(date +%s)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
say() { echo "bench/php: $*" >&2; }

# --- what it needs -------------------------------------------------------------
need=()
for p in php8.2-cli php8.2-opcache php8.2-fpm php-parser php-twig valgrind; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    { apt-get install -y "${need[@]}" || { apt-get update && apt-get install -y "${need[@]}"; }; } >/dev/null 2>&1 ||
        { say "could not install ${need[*]}; nothing measured"; exit 0; }
fi
gcc -O2 -g -Wall -o "$OUT/runit" "$SRC/runit.c" || { say "building runit failed; nothing measured"; exit 0; }

TARGET_DIR=${CARGO_TARGET_DIR:-target}
case $TARGET_DIR in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
LIBSRC=${PHPB_LIB:-$TARGET_DIR/release/libheaplive.so}
[ -f "$LIBSRC" ] || { say "no $LIBSRC: build it first (make build); nothing measured"; exit 0; }
HL=$OUT/libheaplive.so
cp "$LIBSRC" "$HL"

META=$OUT/meta-$STAMP.txt
{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "label=${PHPB_LABEL:-}"
    echo "machine=$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
    echo "php=$(php8.2 -r 'echo PHP_VERSION;') ($(dpkg-query -W -f='php-parser ${Version}, ' php-parser)$(dpkg-query -W -f='php-twig ${Version}' php-twig)), $(valgrind --version)"
    echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) ($(git -C "$ROOT" status --porcelain src 2>/dev/null | wc -l) modified files under src/)"
    echo "lib_sha256=$(sha256sum "$HL" | cut -c1-16)"
    echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rounds=$ROUNDS exact_rounds=$EXACT_ROUNDS fpm_rounds=$FPM_ROUNDS fpm_batch=$FPM_BATCH fpm_configs=$FPM_CONFIGS sections=$ONLY"
} > "$META"

PHP=(php8.2 -d opcache.enable_cli=1)
wl_cmd() {
    case $1 in
        pparser) CMD=("${PHP[@]}" "$SRC/php_parser.php" 40 2) ;;
        cpu) CMD=("${PHP[@]}" "$SRC/php_bench.php") ;;
    esac
}
cfg_env() {
    local hl=(LD_PRELOAD="$HL" HEAPLIVE_DUMP_AT_EXIT=0 HEAPLIVE_OUTPUT="$OUT/tmp/hl.%p.%n.folded")
    case $1 in
        none) ENV=() ;;
        native) ENV=("${hl[@]}" HEAPLIVE_PHP=native) ;;
        php512) ENV=("${hl[@]}") ;;
        php64) ENV=("${hl[@]}" HEAPLIVE_SAMPLE_INTERVAL=65536) ;;
        exact) ENV=("${hl[@]}" HEAPLIVE_SAMPLE_INTERVAL=1) ;;
        # The same environment without the preload (XX_PRELOAD for
        # LD_PRELOAD): PHP copies the environment into its own memory, so
        # memory_get_usage() is compared between these twins.
        plain-*) cfg_env "${1#plain-}"; ENV=("${ENV[@]/#LD_PRELOAD=/XX_PRELOAD=}") ;;
    esac
}
WORKLOADS="pparser cpu"
FAST="none native php512 php64"
{
    for w in $WORKLOADS; do wl_cmd "$w"; printf 'wl\t%s\t%s\n' "$w" "${CMD[*]}"; done
    for c in $FAST exact; do cfg_env "$c"; printf 'cfg\t%s\t%s\n' "$c" "${ENV[*]}"; done
} > "$OUT/commands-$STAMP.txt"

# --- callgrind -------------------------------------------------------------------
if [[ " $ONLY " == *" callgrind "* ]]; then
    : > "$OUT/callgrind-$STAMP.tsv"
    for w in $WORKLOADS; do
        for c in $FAST; do
            say "callgrind $w/$c ($(( $(date +%s) - START ))s)"
            wl_cmd "$w"; cfg_env "$c"
            f=$OUT/tmp/cg.$w.$c.out
            rm -f "$f"
            env "${ENV[@]}" valgrind --tool=callgrind --callgrind-out-file="$f" "${CMD[@]}" \
                > "$OUT/logs/cg.$w.$c.out" 2> "$OUT/logs/cg.$w.$c.err"
            # Total instructions, and the calls of api::record (one per
            # sample taken; "heaplive::hot::api::record" as valgrind
            # demangles it, "3api6record" mangled; track::record before).
            $PY - "$f" "$w" "$c" >> "$OUT/callgrind-$STAMP.tsv" <<'EOF'
import re, sys
f, w, c = sys.argv[1:4]
total, calls, names, cur = 0, 0, {}, None
try:
    for line in open(f, errors="replace"):
        if line.startswith(("summary:", "totals:")):
            total = max(total, int(line.split()[1]))
        m = re.match(r"(c?)fn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            if m.group(1):
                cur = names.get(m.group(2), "")
            continue
        if line.startswith("calls=") and cur is not None:
            if any(k in cur for k in ("api::record", "3api6record", "track::record", "5track6record")):
                calls += int(line[6:].split()[0])
            cur = None
except OSError:
    pass
print(f"{w}\t{c}\t{total}\t{calls}")
EOF
            rm -f "$f"
        done
    done
fi

# --- interleaved wall and CPU rounds ----------------------------------------------
TSV=$OUT/results-$STAMP.tsv
: > "$TSV"
if [[ " $ONLY " == *" time "* ]]; then
    read -ra F <<< "$FAST"
    n=${#F[@]}
    for r in $(seq 1 "$ROUNDS"); do
        say "time round $r/$ROUNDS ($(( $(date +%s) - START ))s)"
        for w in $WORKLOADS; do
            cs=()
            for k in $(seq 0 $((n - 1))); do cs+=("${F[$(( (k + r - 1) % n ))]}"); done
            [ "$r" -le "$EXACT_ROUNDS" ] && cs+=(exact)
            # Once: the twins without the preload, for memory_get_usage().
            [ "$r" = 1 ] && [ "$w" = pparser ] && cs+=(plain-native plain-php512 plain-php64 plain-exact)
            for c in "${cs[@]}"; do
                wl_cmd "$w"; cfg_env "$c"
                "$OUT/runit" "$TSV" "$w" "$c" "$r" -i /dev/null -o "$OUT/logs/$w.$c.$r.out" -e "$OUT/logs/$w.$c.$r.err" \
                    "${ENV[@]}" -- "${CMD[@]}" || say "runit failed for $w/$c"
                rm -f "$OUT"/tmp/hl.*
            done
        done
    done
fi

# --- php-fpm worker CPU per request ------------------------------------------------
if [[ " $ONLY " == *" fpm "* ]]; then
    say "fpm: $FPM_ROUNDS rounds of $FPM_BATCH requests per configuration ($(( $(date +%s) - START ))s)"
    # shellcheck disable=SC2086
    $PY "$SRC/fpm_bench.py" "$OUT/tmp" "$HL" "$FPM_ROUNDS" "$FPM_BATCH" $FPM_CONFIGS \
        > "$OUT/fpm-$STAMP.tsv" 2> "$OUT/logs/fpm.err" || say "fpm_bench.py failed (see $OUT/logs/fpm.err)"
fi

# --- php-fpm worker instructions per request (callgrind) --------------------------
if [[ " $ONLY " == *" fpmcg "* ]]; then
    say "fpmcg: $FPMCG_N1 and $FPMCG_N2 requests per configuration under callgrind ($(( $(date +%s) - START ))s)"
    # shellcheck disable=SC2086
    $PY "$SRC/fpm_callgrind.py" "$OUT/tmp" "$HL" "$FPMCG_N1" "$FPMCG_N2" $FPM_CONFIGS \
        > "$OUT/fpmcg-$STAMP.tsv" 2> "$OUT/logs/fpmcg.err" || say "fpm_callgrind.py failed (see $OUT/logs/fpmcg.err)"
fi

echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$META"
echo "duration_s=$(( $(date +%s) - START ))" >> "$META"
say "measured in $(( $(date +%s) - START ))s; writing $RESULTS"
$PY "$HERE/php_report.py" "$OUT" "$STAMP" "$RESULTS" || say "report failed (raw data in $OUT)"
exit 0

#!/usr/bin/python3
"""php_report.py OUTDIR STAMP RESULTS.md: the report of one bench/php.sh
session (issue 26, PHP mode at production cost), appended to RESULTS.md.

Ratios of the timed rounds are paired (config/none of the same round, then
the median of those); IQR = the interquartile range (25th to 75th
percentile) of the per-round figures."""
import os, re, statistics, sys
from collections import defaultdict

out, stamp, results = sys.argv[1], sys.argv[2], sys.argv[3]
meta = {}
for line in open(os.path.join(out, f"meta-{stamp}.txt")):
    k, _, v = line.rstrip("\n").partition("=")
    meta[k] = v
cmds = {}
for line in open(os.path.join(out, f"commands-{stamp}.txt")):
    kind, name, cmd = (line.rstrip("\n").split("\t") + ["", ""])[:3]
    cmds[(kind, name)] = cmd.replace(out, "bench/out/php")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def iqr(xs):
    if len(xs) < 2:
        return (float("nan"), float("nan"))
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return (q[0], q[2])


def fmt_iqr(xs, f="{:.3f}"):
    a, b = iqr(xs)
    return "-" if a != a else (f + "-" + f).format(a, b)


def pct(x):
    return "-" if x != x else f"{(x - 1) * 100:+.2f}%"


def tsv_rows(name):
    """The tab-separated fields of each line of OUTDIR/NAME-STAMP.tsv (none when
    that run did not happen)."""
    path = os.path.join(out, f"{name}-{stamp}.tsv")
    if os.path.exists(path):
        for line in open(path):
            yield line.rstrip("\n").split("\t")


def table_section(title, intro, columns):
    """A section's heading, its paragraph, and the heading rows of its table."""
    L.append(f"### {title}")
    L.append("")
    L.append(intro)
    L.append("")
    L.append("| " + " | ".join(columns) + " |")
    L.append("|" + "---|" * len(columns))


L = []
label = meta.get("label") or ""
L.append(f"## issue 26: PHP at production cost{': ' + label if label else ''} ({meta.get('date')})")
L.append("")
L.append(f"- machine: {meta.get('machine')}; {meta.get('php')}")
L.append(f"- heaplive: commit {meta.get('commit')}, libheaplive.so sha256 {meta.get('lib_sha256')}")
L.append(f"- {meta.get('rounds')}; load average before {meta.get('load_before')}, after {meta.get('load_after')}; took {meta.get('duration_s')} s")
L.append(f"- reproduce: `make bench-php` (= `bash bench/php.sh`; knobs at its top); raw data in `bench/out/php/*-{stamp}.*`")
L.append("- workloads: " + "; ".join(f"{w}: `{cmds.get(('wl', w), '?')}`" for w in ("pparser", "cpu")))
L.append("- configurations: none (no preload); native: `HEAPLIVE_PHP=native`; php512: PHP mode at the default interval (512 KiB); "
         "php64: `HEAPLIVE_SAMPLE_INTERVAL=65536`; exact: `HEAPLIVE_SAMPLE_INTERVAL=1`; all with `HEAPLIVE_DUMP_AT_EXIT=0`")
L.append("")

verdict = {}

# --- callgrind ---------------------------------------------------------------
cg = {}
cgf = os.path.join(out, f"callgrind-{stamp}.tsv")
if os.path.exists(cgf):
    for line in open(cgf):
        f = line.split()
        if len(f) == 4:
            cg[(f[0], f[1])] = (int(f[2]), int(f[3]))
if cg:
    table_section(
        "Instructions (callgrind)",
        "`valgrind --tool=callgrind`, whole process; samples = calls of heaplive's `api::record` (`track::record` before) (one per sample taken, "
        "malloc and ZendMM); instructions per extra sample = (php64 - php512) / (samples at 64 KiB - at 512 KiB).",
        ["workload", "config", "instructions", "vs none", "samples", "instructions per extra sample"])
    for w in ("pparser", "cpu"):
        base = cg.get((w, "none"), (0, 0))[0]
        for c in ("none", "native", "php512", "php64"):
            if (w, c) not in cg:
                continue
            ir, n = cg[(w, c)]
            per = ""
            if c == "php64" and (w, "php512") in cg:
                ir5, n5 = cg[(w, "php512")]
                if n > n5:
                    per = f"{(ir - ir5) / (n - n5):,.0f}"
            L.append(f"| {w} | {c} | {ir:,} | {pct(ir / base) if base else '-'} | {n:,} | {per} |")
    L.append("")

# --- timed rounds ------------------------------------------------------------
runs = defaultdict(dict)
for f in tsv_rows("results"):
    if len(f) >= 8 and int(f[7]) == 0:
        runs[(f[0], f[1])][int(f[2])] = (float(f[3]), float(f[4]) + float(f[5]))


def paired(w, c, base, i):
    a, b = runs.get((w, c), {}), runs.get((w, base), {})
    return [a[r][i] / b[r][i] for r in a if r in b and b[r][i] > 0]


def diffs(w, c, base, i):
    a, b = runs.get((w, c), {}), runs.get((w, base), {})
    return [a[r][i] - b[r][i] for r in a if r in b]


if runs:
    L.append("### Wall and CPU time (interleaved rounds)")
    L.append("")
    L.append("| workload | config | n | wall s (median) | IQR | CPU s (median) | IQR | wall ratio | CPU ratio | CPU ratio IQR |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for w in ("pparser", "cpu"):
        for c in ("none", "native", "php512", "php64", "exact"):
            rs = runs.get((w, c))
            if not rs:
                continue
            wall = [v[0] for v in rs.values()]
            cpu = [v[1] for v in rs.values()]
            wr, cr = paired(w, c, "none", 0), paired(w, c, "none", 1)
            L.append(f"| {w} | {c} | {len(rs)} | {med(wall):.3f} | {fmt_iqr(wall)} | {med(cpu):.3f} | {fmt_iqr(cpu)} | "
                     f"{med(wr):.3f}x | {med(cr):.3f}x | {fmt_iqr(cr)} |")
    L.append("")
    # Cost per PHP sample (target 2).
    L.append("Cost per sample = (time at 64 KiB - time at 512 KiB, paired per round) / (extra samples, from the callgrind runs):")
    L.append("")
    L.append("| workload | extra samples | CPU diff s (median, IQR) | µs per sample (CPU) | wall diff s (median) | µs per sample (wall) |")
    L.append("|---|---|---|---|---|---|")
    for w in ("pparser", "cpu"):
        if (w, "php64") not in cg or (w, "php512") not in cg:
            continue
        extra = cg[(w, "php64")][1] - cg[(w, "php512")][1]
        dc, dw = diffs(w, "php64", "php512", 1), diffs(w, "php64", "php512", 0)
        if extra <= 0 or not dc:
            continue
        us = med(dc) / extra * 1e6
        a, b = iqr(dc)
        L.append(f"| {w} | {extra:,} | {med(dc):.4f} ({a:.4f} to {b:.4f}) | {us:.2f} ({a / extra * 1e6:.2f} to {b / extra * 1e6:.2f}) | "
                 f"{med(dw):.4f} | {med(dw) / extra * 1e6:.2f} |")
        if w == "pparser":
            verdict[2] = (us < 2.0, f"{us:.2f} µs per sample (CPU; pparser; IQR {a / extra * 1e6:.2f} to {b / extra * 1e6:.2f})")
        else:
            verdict.setdefault("2cpu", f"{us:.2f} µs on cpu")
    L.append("")
    # memory_get_usage()/memory_get_peak_usage() of pparser per config (target 5).
    mem = defaultdict(set)
    for c in ("none", "native", "php512", "php64", "exact", "plain-native", "plain-php512", "plain-php64", "plain-exact"):
        for r in runs.get(("pparser", c), {}):
            p = os.path.join(out, "logs", f"pparser.{c}.{r}.out")
            if os.path.exists(p):
                m = re.search(r"usage=\d+ peak=\d+", open(p).read())
                mem[c].add(m.group(0) if m else "(nothing printed)")
    if mem:
        L.append("What the pparser script printed at its end (`memory_get_usage()`, `memory_get_peak_usage()`), per configuration, "
                 "and without the preload in the same environment (plain-*: `XX_PRELOAD` for `LD_PRELOAD`; PHP copies the "
                 "environment into its own memory, so a different environment alone changes these figures):")
        L.append("")
        for c, v in mem.items():
            L.append(f"- {c}: {', '.join(sorted(v))}")
        L.append("")
        bad = [c for c in ("native", "php512", "php64", "exact")
               if c in mem and ("plain-" + c not in mem or mem[c] != mem["plain-" + c] or len(mem[c]) != 1)]
        checked = [c for c in ("native", "php512", "php64", "exact") if c in mem]
        verdict[5] = [not bad and bool(checked), "cli: " + (f"identical to the same environment without the preload ({', '.join(checked)})"
                      if not bad else "differs: " + "; ".join(f"{c} {', '.join(sorted(mem[c]))} against {', '.join(sorted(mem.get('plain-' + c, [])))}" for c in bad))]

# --- fpm -----------------------------------------------------------------------
fpm = defaultdict(dict)
fmem = defaultdict(dict)
fails = {}
for f in tsv_rows("fpm"):
    if f[0] == "fpm" and len(f) == 5:
        fpm[f[1]][int(f[2])] = (float(f[3]), float(f[4]))
    elif f[0] == "mem" and len(f) == 4:
        fmem[f[1]][f[2]] = f[3]
    elif f[0] == "fail" and len(f) == 3:
        fails[f[1]] = int(f[2])
if fpm:
    table_section(
        "php-fpm worker CPU per request",
        "php-fpm8.2, one static worker per configuration (masters started with and without the preload), "
        "bench/src/fpm_bench.py's FastCGI client on a unix socket, batches interleaved (order rotated every round), "
        "endpoints of bench/src/fpm_app.php cycled: 10 php-parser ones (parse and pretty-print 4 files each) and Twig (2 in 12); "
        "worker CPU from /proc/PID/schedstat around each batch.",
        ["config", "rounds", "CPU ms/request (median)", "IQR", "wall ms/request (median)",
         "CPU ratio vs none (paired median)", "IQR", "failed requests"])
    for c, rs in fpm.items():
        cpu = [v[0] for v in rs.values()]
        wall = [v[1] for v in rs.values()]
        ratios = [rs[r][0] / fpm["none"][r][0] for r in rs if r in fpm.get("none", {}) and fpm["none"][r][0] > 0]
        L.append(f"| {c} | {len(rs)} | {med(cpu):.3f} | {fmt_iqr(cpu)} | {med(wall):.3f} | {med(ratios):.3f}x | {fmt_iqr(ratios)} | {fails.get(c, '?')} |")
        if c == "php":
            verdict["1fpm"] = (med(ratios) <= 1.03, f"fpm CPU/request {med(ratios):.3f}x (IQR {fmt_iqr(ratios)})")
    L.append("")
    if fmem:
        # PHP itself varies by a few bytes between requests of one endpoint
        # (without the preload too): compare the range of each endpoint's
        # values with the range without the preload.
        def vals(text):
            return [tuple(int(x) for x in re.findall(r"(?:usage|peak)=(\d+)", b)) for b in text.split(" | ")]
        base = fmem.get("none", {})
        spread = max((max(v[0] for v in vals(t)) - min(v[0] for v in vals(t)) for t in base.values() if vals(t)), default=0)
        bad = []
        for c in fmem:
            for e, text in fmem[c].items():
                got, ref = vals(text), vals(base.get(e, ""))
                if not ref or not got or any(
                        min(abs(g[i] - r[i]) for r in ref) > spread for g in got for i in range(len(g))):
                    bad.append((c, e))
        ok = not bad
        L.append("memory_get_usage()/memory_get_peak_usage() at the end of each fpm endpoint, against the same endpoint without the preload "
                 f"(PHP itself varies by up to {spread} bytes between requests of one endpoint there): "
                 + (f"within {spread} bytes of a value seen without the preload, for every endpoint and configuration." if ok else
                    "OUTSIDE it: " + "; ".join(f"{c} {e}: {fmem[c][e]} (none: {base.get(e)})" for c, e in bad)))
        L.append("")
        if 5 in verdict:
            verdict[5][0] = verdict[5][0] and ok
            verdict[5][1] += "; fpm: " + (f"within PHP's own {spread}-byte spread between requests" if ok else "differs")
        else:
            verdict[5] = [ok, "fpm: " + ("within the range without the preload" if ok else "differs")]

# --- fpm under callgrind ---------------------------------------------------------
fcg = {}
for f in tsv_rows("fpmcg"):
    if f[0] == "fpmcg" and len(f) in (5, 6):
        fcg[f[1]] = (float(f[2]), float(f[5]) if len(f) == 6 else float("nan"))
if fcg:
    table_section(
        "php-fpm worker instructions per request (callgrind)",
        "bench/src/fpm_callgrind.py: one static worker under callgrind per run, a run of N1 and one of N2 "
        "requests (the endpoints of fpm_bench.py cycled), the difference of the worker's totals per request "
        "(start-up and shutdown cancel out). All threads: heaplive's thread counted, whose once-a-second "
        "work weighs some 50 times more per request under callgrind than in real time; main thread: the "
        "requests' own thread, the cost on the request's path.",
        ["config", "all threads / request", "vs none", "main thread / request", "vs none"])
    for c, (v, m) in fcg.items():
        ratio = v / fcg["none"][0] if fcg.get("none") else float("nan")
        mratio = m / fcg["none"][1] if fcg.get("none") else float("nan")
        L.append(f"| {c} | {v:,.0f} | {ratio:.4f}x | {m:,.0f} | {mratio:.4f}x |")
        if c == "php" and fcg.get("none"):
            verdict["1fpmcg"] = (mratio <= 1.03, f"fpm instructions/request {mratio:.4f}x on the requests' thread, "
                                                 f"{ratio:.4f}x with heaplive's thread (callgrind)")
    L.append("")

# --- verdicts --------------------------------------------------------------------
def instruction_verdicts(cfg, limit, unit):
    """Whether each workload's instructions with `cfg` are within `limit`
    times none's, and the figures said."""
    parts, ok = [], True
    for w in ("pparser", "cpu"):
        if (w, cfg) in cg and (w, "none") in cg:
            r = cg[(w, cfg)][0] / cg[(w, "none")][0]
            ok = ok and r <= limit
            parts.append(f"{w} {pct(r)}{unit}")
    return ok, parts


if cg:
    ok, parts = instruction_verdicts("php512", 1.02, " instructions")
    for k in ("1fpm", "1fpmcg"):
        if k in verdict:
            ok = ok and verdict[k][0]
            parts.append(verdict[k][1])
    verdict[1] = (ok, "; ".join(parts))
    ok, parts = instruction_verdicts("native", 1.01, "")
    verdict[4] = (ok, "native/none instructions: " + "; ".join(parts))
if runs.get(("pparser", "exact")):
    cr, wr = paired("pparser", "exact", "none", 1), paired("pparser", "exact", "none", 0)
    verdict[3] = (med(wr) <= 5 and med(cr) <= 5, f"exact/none on pparser: wall {med(wr):.1f}x, CPU {med(cr):.1f}x")
if "2cpu" in verdict and 2 in verdict:
    verdict[2] = (verdict[2][0], verdict[2][1] + "; " + verdict.pop("2cpu"))
verdict.pop("2cpu", None)
verdict.pop("1fpm", None)
verdict.pop("1fpmcg", None)
names = {1: "PHP mode at the default interval: <= +2% instructions (pparser, cpu), fpm CPU/request <= 1.03x (and its instructions under callgrind)",
         2: "a PHP sample < 2 µs", 3: "exact mode <= 5x no preload (pparser)",
         4: "native/none <= +1% instructions", 5: "memory_get_usage()/memory_get_peak_usage() identical"}
L.append("### Targets")
L.append("")
L.append("| target | verdict | figures |")
L.append("|---|---|---|")
for k in sorted(names):
    if k in verdict:
        ok, text = verdict[k]
        L.append(f"| {k}. {names[k]} | {'met' if ok else '**not met**'} | {text} |")
    else:
        L.append(f"| {k}. {names[k]} | not measured | |")
L.append("")
with open(results, "a") as f:
    f.write("\n" + "\n".join(L) + "\n")
print("\n".join(L))

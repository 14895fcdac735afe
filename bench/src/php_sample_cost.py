#!/usr/bin/python3
"""php_sample_cost.py LIB[,LIB...] ROUNDS EXTRA_SAMPLES: the CPU cost of a
sample with PHP frames (issue 26, target 2), per library.

Interleaved rounds (the order reversed every other round) of
`php8.2 -d opcache.enable_cli=1 bench/src/php_parser.php 40 8` under each
library at HEAPLIVE_SAMPLE_INTERVAL=4K and =512K (HEAPLIVE_SEED=7, no exit
dump); the child's user+sys CPU from getrusage(RUSAGE_CHILDREN). Per round,
(CPU at 4 KiB - CPU at 512 KiB) / EXTRA_SAMPLES; prints the median and IQR
of that per library. EXTRA_SAMPLES is the difference of the two runs'
sample counts, counted once under callgrind (the calls of
heaplive::hot::api::record): 57,276 for this workload (58,193 - 917)."""
import os, resource, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CMD = ["php8.2", "-d", "opcache.enable_cli=1", os.path.join(HERE, "php_parser.php"), "40", "8"]


def cpu(env):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(CMD, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main():
    libs, rounds, extra = sys.argv[1].split(","), int(sys.argv[2]), float(sys.argv[3])
    res = {lib: {"4K": [], "512K": []} for lib in libs}
    for r in range(rounds):
        for lib in libs if r % 2 == 0 else libs[::-1]:
            for iv in ("4K", "512K") if r % 2 == 0 else ("512K", "4K"):
                env = dict(os.environ, LD_PRELOAD=os.path.abspath(lib), HEAPLIVE_SAMPLE_INTERVAL=iv,
                           HEAPLIVE_DUMP_AT_EXIT="0", HEAPLIVE_SEED="7")
                res[lib][iv].append(cpu(env))
    for lib in libs:
        per = [(a - b) / extra * 1e6 for a, b in zip(res[lib]["4K"], res[lib]["512K"])]
        q = statistics.quantiles(per, n=4)
        print("%s\tper-sample %.2f us (IQR %.2f-%.2f)\tCPU 4K %.3f s, 512K %.3f s" % (
            lib, statistics.median(per), q[0], q[2],
            statistics.median(res[lib]["4K"]), statistics.median(res[lib]["512K"])))
    print("load\t" + " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()

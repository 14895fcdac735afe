#!/usr/bin/python3
"""fpm_callgrind.py OUTDIR LIB N1 N2 CONFIG...: php-fpm8.2 worker
instructions per request under callgrind (bench/php.sh's `fpmcg` section,
issue 26): the figure that noise cannot move, beside fpm_bench.py's CPU.

For each CONFIG (none, native, php: as fpm_bench.py), twice: starts one
php-fpm master with one static worker under `valgrind --tool=callgrind`
(which follows the fork), sends N1 (then N2) requests cycling through
bench/src/fpm_app.php's endpoints, stops the master (SIGQUIT: the worker
writes its counts as it exits) and reads the worker's total. The
difference of the two runs over N2 - N1 requests is the cost of a request
of a warm worker, start-up and shutdown cancelled out (callgrind_control
cannot reach a forked worker here). Prints:
    fpmcg  CONFIG  instructions_per_request  n1_total  n2_total  main_thread_per_request
The first figure counts every thread of the worker, heaplive's thread
included; the last only the worker's own thread, the one that runs the
requests (`--separate-threads=yes`, its `-01` file). Under callgrind a
request takes some 50 times its real time, so work that heaplive's thread
does once a second (the shadow map's prune, the timeline's tick) weighs
about 50 times more per request here than in production: the main
thread's figure is the cost on the request's path."""
import glob, os, re, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpm_bench  # noqa: E402


def start(outdir, lib, cfg):
    d = os.path.join(outdir, "fpmcg-%s" % cfg.ljust(6, "_"))
    for f in glob.glob(os.path.join(d, "cg.*")):
        os.unlink(f)
    p, sock, pid = fpm_bench.start(outdir, lib, cfg, tag="fpmcg",
                                   wrap=["valgrind", "--tool=callgrind", "--separate-threads=yes",
                                         "--callgrind-out-file=%s/cg.%%p" % d],
                                   extra_env={"HEAPLIVE_SEED": "7"}, wait_s=120)
    return p, sock, pid, d


def totals(path):
    """The instructions of a callgrind dump (its `summary:` or `totals:` line)."""
    with open(path) as f:
        for line in f:
            m = re.match(r"(summary|totals): (\d+)", line)
            if m:
                return int(m.group(2))
    raise RuntimeError("no totals in %s" % path)


def run(outdir, lib, cfg, n):
    """The worker's instructions over a run of `n` requests: (all its
    threads, its main thread)."""
    p, sock, pid, d = start(outdir, lib, cfg)
    eps = fpm_bench.ENDPOINTS
    try:
        for i in range(n):
            _, _, st = fpm_bench.request(sock, eps[i % len(eps)])
            if st != 0:
                raise RuntimeError("request %d failed (%s): see %s" % (i, cfg, d))
    finally:
        p.send_signal(signal.SIGQUIT)
        try:
            p.wait(300)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    files = sorted(glob.glob(os.path.join(d, "cg.%d-*" % pid)))
    if not files:
        raise RuntimeError("no callgrind files of worker %d in %s" % (pid, d))
    return sum(totals(f) for f in files), totals(files[0])


def main():
    outdir, lib, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for cfg in sys.argv[5:]:
        a = run(outdir, lib, cfg, n1)
        b = run(outdir, lib, cfg, n2)
        print("fpmcg\t%s\t%.0f\t%d\t%d\t%.0f" % (cfg, (b[0] - a[0]) / (n2 - n1), a[0], b[0],
                                              (b[1] - a[1]) / (n2 - n1)), flush=True)


if __name__ == "__main__":
    main()

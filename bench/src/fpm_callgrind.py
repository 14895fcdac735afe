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
    fpmcg  CONFIG  instructions_per_request  n1_total  n2_total
The worker's instructions include heaplive's thread in that process
(callgrind counts every thread of the worker)."""
import glob, os, re, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpm_bench  # noqa: E402


def start(outdir, lib, cfg):
    d = os.path.join(outdir, "fpmcg-%s" % cfg.ljust(6, "_"))
    os.makedirs(d, exist_ok=True)
    for f in glob.glob(os.path.join(d, "cg.*")):
        os.unlink(f)
    sock = os.path.join(d, "sock")
    if os.path.exists(sock):
        os.unlink(sock)
    conf = os.path.join(d, "fpm.conf")
    with open(conf, "w") as f:
        f.write("[global]\npid = %s/fpm.pid\nerror_log = %s/error.log\ndaemonize = no\n"
                "process_control_timeout = 60\n"
                "[bench]\nlisten = %s\npm = static\npm.max_children = 1\n"
                "request_terminate_timeout = 0\ncatch_workers_output = yes\n" % (d, d, sock))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPLIVE_") and k != "LD_PRELOAD"}
    if cfg != "none":
        env.update(LD_PRELOAD=lib, HEAPLIVE_DUMP_AT_EXIT="0", HEAPLIVE_SEED="7",
                   HEAPLIVE_LOG=os.path.join(d, "heaplive.log"),
                   HEAPLIVE_OUTPUT=os.path.join(d, "hl.%p.%n.folded"))
        if cfg == "native":
            env["HEAPLIVE_PHP"] = "native"
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/cg.%%p" % d,
                          fpm_bench.FPM, "-F", "-R", "-y", conf, "-p", d], env=env,
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr"), "w"))
    for _ in range(1200):
        kids = fpm_bench.children(p.pid)
        if os.path.exists(sock) and kids:
            return p, sock, kids[0], d
        time.sleep(0.1)
    raise RuntimeError("php-fpm (%s) did not start under valgrind: see %s" % (cfg, d))


def totals(path):
    """The instructions of a callgrind dump (its `summary:` or `totals:` line)."""
    with open(path) as f:
        for line in f:
            m = re.match(r"(summary|totals): (\d+)", line)
            if m:
                return int(m.group(2))
    raise RuntimeError("no totals in %s" % path)


def run(outdir, lib, cfg, n):
    """The worker's instructions over a run of `n` requests."""
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
    return totals(os.path.join(d, "cg.%d" % pid))


def main():
    outdir, lib, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for cfg in sys.argv[5:]:
        a = run(outdir, lib, cfg, n1)
        b = run(outdir, lib, cfg, n2)
        print("fpmcg\t%s\t%.0f\t%d\t%d" % (cfg, (b - a) / (n2 - n1), a, b), flush=True)


if __name__ == "__main__":
    main()

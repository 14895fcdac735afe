#!/usr/bin/python3
"""fpm_bench.py OUTDIR LIB ROUNDS BATCH CONFIG...: php-fpm worker CPU per
request, with a FastCGI client of our own (bench/php.sh, issue 26).

Starts one php-fpm8.2 master per CONFIG (none, native, php: no preload,
HEAPLIVE_PHP=native, PHP mode at the default interval), each with one
static worker on a unix socket under OUTDIR, warms every worker up, then
runs ROUNDS interleaved rounds (the configurations in an order rotated every
round); in each, BATCH requests per configuration, cycling through the
endpoints of bench/src/fpm_app.php (php-parser and Twig). The worker's CPU
is its run time in /proc/PID/schedstat (utime+stime of /proc/PID/stat
where that is missing) before and after the batch. Prints one TSV
line per batch:
    fpm  CONFIG  ROUND  cpu_ms_per_request  wall_ms_per_request
and one line per configuration and endpoint with what the script printed
(memory_get_usage()/memory_get_peak_usage(), the same in every request of
that endpoint unless something leaks into PHP's accounting):
    mem  CONFIG  ENDPOINT  distinct-bodies
Stops the masters it started (by their pid) at the end. Never raises for a
failed request: it counts them (a `fail` line)."""
import os, signal, socket, struct, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "fpm_app.php")
FPM = "/usr/sbin/php-fpm8.2"
TICK = os.sysconf("SC_CLK_TCK")
ENDPOINTS = ["/parse?i=%d" % k for k in range(10)] + ["/twig"] * 2


def pairs(params):
    out = b""
    for k, v in params.items():
        k, v = k.encode(), v.encode()
        for n in (len(k), len(v)):
            out += bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
        out += k + v
    return out


def record(kind, body, rid=1):
    pad = (8 - len(body) % 8) % 8
    return struct.pack(">BBHHBx", 1, kind, rid, len(body), pad) + body + b"\0" * pad


def request(path, uri):
    """One FastCGI request (responder role); returns (stdout, stderr, app status)."""
    q = uri.partition("?")[2]
    params = {
        "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1",
        "REQUEST_METHOD": "GET", "REQUEST_URI": uri, "QUERY_STRING": q,
        "SCRIPT_FILENAME": APP, "SCRIPT_NAME": "/index.php", "DOCUMENT_ROOT": HERE,
        "SERVER_NAME": "bench", "SERVER_PORT": "80", "REMOTE_ADDR": "127.0.0.1",
    }
    msg = record(1, struct.pack(">HB5x", 1, 0)) + record(4, pairs(params)) + record(4, b"") + record(5, b"")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    s.sendall(msg)
    buf, out, err, status = b"", b"", b"", None
    while status is None:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 8:
            _, kind, _, n, pad = struct.unpack(">BBHHBx", buf[:8])
            if len(buf) < 8 + n + pad:
                break
            body, buf = buf[8:8 + n], buf[8 + n + pad:]
            if kind == 6:
                out += body
            elif kind == 7:
                err += body
            elif kind == 3:
                status = struct.unpack(">I", body[:4])[0]
    s.close()
    return out, err, status


def cpu_s(pid):
    """The worker's CPU time: /proc/PID/schedstat's run time (ns) where the
    kernel has it, else utime+stime of /proc/PID/stat (clock ticks)."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    with open("/proc/%d/stat" % pid) as f:
        f = f.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def children(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(d))
            except OSError:
                pass
    return kids


def start(outdir, lib, cfg, tag="fpm", wrap=(), extra_env=None, wait_s=10):
    """A php-fpm master for CONFIG with one static worker, run under `wrap`
    (a command prefix such as valgrind's), in OUTDIR/TAG-CONFIG: (the
    master's Popen, the socket, the worker's pid)."""
    # Directories of one length: the first request's memory figures depend on it.
    d = os.path.join(outdir, "%s-%s" % (tag, cfg.ljust(6, "_")))
    os.makedirs(d, exist_ok=True)
    sock = os.path.join(d, "sock")
    if os.path.exists(sock):
        os.unlink(sock)
    conf = os.path.join(d, "fpm.conf")
    with open(conf, "w") as f:
        f.write("[global]\npid = %s/fpm.pid\nerror_log = %s/error.log\ndaemonize = no\n"
                "[bench]\nlisten = %s\npm = static\npm.max_children = 1\n"
                "catch_workers_output = yes\n" % (d, d, sock))
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("HEAPLIVE_") or k == "LD_PRELOAD":
            del env[k]
    if cfg != "none":
        env.update(LD_PRELOAD=lib, HEAPLIVE_DUMP_AT_EXIT="0", HEAPLIVE_LOG=os.path.join(d, "heaplive.log"),
                   HEAPLIVE_OUTPUT=os.path.join(d, "hl.%p.%n.folded"))
        if cfg == "native":
            env["HEAPLIVE_PHP"] = "native"
        env.update(extra_env or {})
    p = subprocess.Popen(list(wrap) + [FPM, "-F", "-R", "-y", conf, "-p", d], env=env,
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr"), "w"))
    for _ in range(int(wait_s / 0.05)):
        kids = children(p.pid)
        if os.path.exists(sock) and kids:
            return p, sock, kids[0]
        time.sleep(0.05)
    raise RuntimeError("php-fpm (%s) did not start: see %s" % (cfg, d))


def main():
    outdir, lib, rounds, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    cfgs = sys.argv[5:]
    pools = {}
    try:
        for c in cfgs:
            pools[c] = start(outdir, lib, c)
        bodies = {(c, e): set() for c in cfgs for e in ENDPOINTS}
        fails = {c: 0 for c in cfgs}
        # Warm-up: opcache compiles, the worker's caches fill.
        for c in cfgs:
            for e in ENDPOINTS:
                request(pools[c][1], e)
        for r in range(1, rounds + 1):
            for k in range(len(cfgs)):
                c = cfgs[(k + r - 1) % len(cfgs)]
                _, sock, pid = pools[c]
                c0, w0 = cpu_s(pid), time.monotonic()
                for i in range(batch):
                    e = ENDPOINTS[i % len(ENDPOINTS)]
                    out, err, st = request(sock, e)
                    if st != 0 or b"usage=" not in out:
                        fails[c] += 1
                    else:
                        bodies[(c, e)].add(out.split(b"\r\n\r\n", 1)[-1].strip())
                c1, w1 = cpu_s(pid), time.monotonic()
                print("fpm\t%s\t%d\t%.4f\t%.4f" % (c, r, (c1 - c0) * 1000 / batch, (w1 - w0) * 1000 / batch), flush=True)
        for (c, e), b in sorted(bodies.items()):
            print("mem\t%s\t%s\t%s" % (c, e, " | ".join(sorted(x.decode(errors="replace") for x in b))))
        for c in cfgs:
            print("fail\t%s\t%d" % (c, fails[c]))
    finally:
        for p, _, _ in pools.values():
            p.send_signal(signal.SIGQUIT)
        for p, _, _ in pools.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""TLS against plain, in one run: stalkd's plain port and its TLS listener (the same process),
and Debian's beanstalkd behind Debian's stunnel4 (the usual way to put TLS in front of
beanstalkd), each driven by the same clients.

Figures (docs/PERFORMANCE.md, "TLS"):
  cycle       put -> reserve -> delete on C connections, commands/s and the server's CPU per
              command (stalkd; beanstalkd plus stunnel4), driven by the C++ load generator
              (bench/loadgen.cc, --tls: OpenSSL in C++, one thread for all connections)
  pipeline    the same with K commands written before the K replies are read (--depth K;
              0: skipped)
              (both: --rounds R runs of each, the four servers in turn so that a change in
              the shared machine's load falls on all of them; the median run of each shown)
  handshakes  new TLS connections (TLS 1.3, ECDHE P-256 certificate) per second, one client
              process each connecting, handshaking and closing in a loop (Python clients)
  idle        stalkd's RSS growth per idle TLS connection (N opened, handshake done)
  --python-cycle: the cycle again with the earlier Python (ssl module) clients, one process
              per connection; they cost more than the servers, so their ratios say little

Every figure of a kind comes from the same client against the four servers in one run.

Usage: python3 bench/tls_bench.py [--build build/release] [--seconds 5] [--conns 4]
       [--depth 100] [--rounds 3] [--idle 2000] [--python-cycle]
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import tls_certs  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("port %d never opened" % port)


def connect(port, ca):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ca:
        ctx = ssl.create_default_context(cafile=ca)
        s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    return s


def read_line(s, buf):
    while b"\r\n" not in buf[0]:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError
        buf[0] += chunk
    line, buf[0] = buf[0].split(b"\r\n", 1)
    return line


def cycle_worker(port, ca, seconds, out):
    s = connect(port, ca)
    buf = [b""]
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s.sendall(b"put 0 0 60 5\r\nhello\r\n")
        jid = read_line(s, buf).split()[1]
        s.sendall(b"reserve\r\n")
        read_line(s, buf)
        read_line(s, buf)  # the body
        s.sendall(b"delete " + jid + b"\r\n")
        read_line(s, buf)
        n += 3
    out.put(n)


def loadgen_run(a, scenario, port, pids, ca, extra=()):
    """One run of the C++ load generator; its JSON. pids: the server's processes (at most 2),
    whose CPU it samples around its measured window."""
    argv = [a.loadgen, "--scenario", scenario, "--host", "127.0.0.1", "--port", str(port),
            "--conns", str(a.conns), "--duration", str(a.seconds), "--warmup", "1",
            "--pid", str(pids[0])] + list(extra)
    if len(pids) > 1:
        argv += ["--also-pid", str(pids[1])]
    if ca:
        argv += ["--tls", "--ca", ca]
    out = subprocess.run(argv, stdout=subprocess.PIPE, check=True,
                         timeout=a.seconds + 120).stdout
    r = json.loads(out)
    if r.get("errors"):
        raise RuntimeError("%s on port %d: %d errors, first: %s"
                           % (scenario, port, r["errors"], r.get("first_error")))
    return r


def handshake_worker(port, ca, seconds, out):
    ctx = ssl.create_default_context(cafile=ca)
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)),
                            server_hostname="127.0.0.1")
        s.close()
        n += 1
    out.put(n)


def run(worker, port, ca, conns, seconds):
    q = mp.Queue()
    ps = [mp.Process(target=worker, args=(port, ca, seconds, q)) for _ in range(conns)]
    for p in ps:
        p.start()
    total = sum(q.get() for _ in ps)
    for p in ps:
        p.join()
    return total / seconds


def cpu_s(pids):
    """User + system CPU seconds the processes used so far."""
    total = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3,
                    help="C++ client runs per server and kind, in turn; the median is shown")
    ap.add_argument("--loadgen", default=None,
                    help="stalkd_loadgen binary (default: BUILD/bench/stalkd_loadgen)")
    ap.add_argument("--python-cycle", action="store_true")
    a = ap.parse_args()
    a.loadgen = a.loadgen or os.path.join(a.build, "bench", "stalkd_loadgen")
    certs = tls_certs.make()
    tmp = tempfile.mkdtemp(prefix="stalkd-tls-bench-")
    procs = []
    try:
        plain, tls, bs_port, tunnel = free_port(), free_port(), free_port(), free_port()
        stalkd = subprocess.Popen(
            [os.path.join(a.build, "stalkd"), "-l", "127.0.0.1", "-p", str(plain), "--listen",
             "tls://127.0.0.1:%d" % tls, "--tls-cert", certs.server_cert, "--tls-key",
             certs.server_key], stdout=subprocess.DEVNULL)
        procs.append(stalkd)
        # stderr: beanstalkd reports every client that closes first ("Connection reset by peer").
        procs.append(subprocess.Popen(["beanstalkd", "-l", "127.0.0.1", "-p", str(bs_port)],
                                      stderr=subprocess.DEVNULL))
        conf = os.path.join(tmp, "stunnel.conf")
        with open(conf, "w") as f:
            f.write("foreground = yes\npid =\n[beanstalkd]\naccept = 127.0.0.1:%d\n"
                    "connect = 127.0.0.1:%d\ncert = %s\nkey = %s\n"
                    % (tunnel, bs_port, certs.server_cert, certs.server_key))
        procs.append(subprocess.Popen(["stunnel4", conf], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        for p in (plain, tls, bs_port, tunnel):
            wait_port(p)
        servers = {"stalkd plain": [stalkd.pid], "stalkd TLS": [stalkd.pid],
                   "beanstalkd plain": [procs[1].pid],
                   "beanstalkd behind stunnel4": [procs[1].pid, procs[2].pid]}
        targets = (("stalkd plain", plain, None), ("stalkd TLS", tls, certs.ca),
                   ("beanstalkd plain", bs_port, None),
                   ("beanstalkd behind stunnel4", tunnel, certs.ca))
        print("load before: %s" % os.getloadavg()[0], file=sys.stderr)
        kinds = [("cycle", "cycle", ())]
        if a.depth > 0:
            kinds.append(("pipeline depth %d" % a.depth, "pipeline", ("--depth", str(a.depth))))
        runs = {}
        for rnd in range(a.rounds):  # the four servers in turn, round after round
            for kind, scenario, extra in kinds:
                for name, port, ca in targets:
                    r = loadgen_run(a, scenario, port, servers[name], ca, extra)
                    runs.setdefault((kind, name), []).append(r)
                    print("round %d, %s, %s: %.0f commands/s, %.2f µs server CPU each%s"
                          % (rnd + 1, kind, name, r["ops_per_s"], r["server_cpu_us_per_op"],
                             ", " + r["tls"] if r.get("tls") else ""), file=sys.stderr)
        # Per server, the round of median commands/s (its CPU per command from the same round).
        results = {k: sorted(v, key=lambda r: r["ops_per_s"])[len(v) // 2]
                   for k, v in runs.items()}
        py_rows, py_cpu = [], {}
        if a.python_cycle:
            for name, port, ca in targets:
                c0 = cpu_s(servers[name])
                rate = run(cycle_worker, port, ca, a.conns, a.seconds)
                py_cpu[name] = (cpu_s(servers[name]) - c0) * 1e6 / (rate * a.seconds)
                py_rows.append((name, rate))
        hs = [("stalkd", run(handshake_worker, tls, certs.ca, a.conns, a.seconds)),
              ("stunnel4", run(handshake_worker, tunnel, certs.ca, a.conns, a.seconds))]
        before = rss_kb(stalkd.pid)
        idle = [connect(tls, certs.ca) for _ in range(a.idle)]
        time.sleep(0.5)
        after = rss_kb(stalkd.pid)
        for s in idle:
            s.close()
        print("| figure | value |")
        print("|---|---|")
        for kind, _, _ in kinds:
            d = {name: results[(kind, name)] for name, _, _ in targets}
            for name, r in d.items():
                print("| %s, %d connections (C++ client): %s, commands/s (median of %d) | %.0f |"
                      % (kind, a.conns, name, a.rounds, r["ops_per_s"]))
            for name, r in d.items():
                print("| %s: server CPU per command, %s (µs) | %.2f |"
                      % (kind, name, r["server_cpu_us_per_op"]))
            for name, r in d.items():
                print("| %s: load generator CPU use, %s | %.2f |"
                      % (kind, name, r["loadgen_cpu_util"]))
            ops = {name: r["ops_per_s"] for name, r in d.items()}
            cpu = {name: r["server_cpu_us_per_op"] for name, r in d.items()}
            print("| %s: stalkd TLS ÷ stalkd plain | %.2f |"
                  % (kind, ops["stalkd TLS"] / ops["stalkd plain"]))
            print("| %s: stalkd TLS ÷ beanstalkd behind stunnel4 | %.2f |"
                  % (kind, ops["stalkd TLS"] / ops["beanstalkd behind stunnel4"]))
            print("| %s: beanstalkd plain ÷ stalkd plain | %.2f |"
                  % (kind, ops["beanstalkd plain"] / ops["stalkd plain"]))
            print("| %s: server CPU per command, stunnel4 + beanstalkd ÷ stalkd TLS | %.2f |"
                  % (kind, cpu["beanstalkd behind stunnel4"] / cpu["stalkd TLS"]))
        if py_rows:
            d = dict(py_rows)
            for name, v in py_rows:
                print("| cycle, %d Python clients: %s, commands/s | %.0f |" % (a.conns, name, v))
            for name, v in py_cpu.items():
                print("| cycle, Python clients: server CPU per command, %s (µs) | %.1f |"
                      % (name, v))
            print("| cycle, Python clients: stalkd TLS ÷ stalkd plain | %.2f |"
                  % (d["stalkd TLS"] / d["stalkd plain"]))
            print("| cycle, Python clients: stalkd TLS ÷ beanstalkd behind stunnel4 | %.2f |"
                  % (d["stalkd TLS"] / d["beanstalkd behind stunnel4"]))
        for name, v in hs:
            print("| handshakes/s, %d clients: %s | %.0f |" % (a.conns, name, v))
        print("| stalkd RSS per idle TLS connection (%d open) | %.0f B |"
              % (a.idle, (after - before) * 1024 / a.idle))
        print("| load average (1 min) at the end | %.2f |" % os.getloadavg()[0])
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        certs.cleanup()


if __name__ == "__main__":
    main()

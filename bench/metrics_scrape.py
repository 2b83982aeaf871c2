#!/usr/bin/env python3
"""Does a /metrics scrape of many tubes stall other clients? (issue 13)

Starts stalkd (BUILD_DIR/stalkd, or $STALKD_BIN) with --admin-http on free loopback ports,
puts one job into each of --tubes tubes, then runs a probe connection that sends
`stats-tube` in a closed loop: first for --window seconds alone (the baseline), then while
/metrics is scraped --scrapes times. Prints the scrape time and size, and the probe's
maximum and p99 round trip in both windows, as JSON. The two windows are measured in the
same run, so compare them with each other, not with other runs.

Usage: bench/metrics_scrape.py [BUILD_DIR] [--tubes N] [--scrapes N] [--window S]
"""
import argparse
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_reply(sock, buf):
    """Reads one stats-tube reply (OK <n>\\r\\n<n bytes>\\r\\n); returns the leftover."""
    while b"\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, rest = buf.partition(b"\r\n")
    n = int(head.split()[1])
    while len(rest) < n + 2:
        rest += sock.recv(65536)
    return rest[n + 2:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir", nargs="?", default="build/release")
    ap.add_argument("--tubes", type=int, default=100000)
    ap.add_argument("--scrapes", type=int, default=5)
    ap.add_argument("--window", type=float, default=1.0)
    a = ap.parse_args()
    binary = os.environ.get("STALKD_BIN", os.path.join(a.build_dir, "stalkd"))
    port, admin = free_port(), free_port()
    server = subprocess.Popen([binary, "-l", "127.0.0.1", "-p", str(port),
                               "--admin-http", "127.0.0.1:%d" % admin])
    try:
        deadline = time.time() + 10
        while True:
            try:
                s = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        batch = bytearray()
        for i in range(a.tubes):
            batch += b"use t%d\r\nput 0 0 10 1\r\nx\r\n" % i
        s.sendall(batch)
        got = 0
        while got < 2 * a.tubes:
            got += s.recv(1 << 20).count(b"\r\n")
        probe = socket.create_connection(("127.0.0.1", port))
        samples = []  # (start time, round trip)
        stop = threading.Event()

        def run():
            buf = b""
            while not stop.is_set():
                t = time.perf_counter()
                probe.sendall(b"stats-tube t1\r\n")
                buf = read_reply(probe, buf)
                samples.append((t, time.perf_counter() - t))

        th = threading.Thread(target=run)
        th.start()
        t0 = time.perf_counter()
        time.sleep(a.window)
        t1 = time.perf_counter()
        scrape_ms, size = [], 0
        for _ in range(a.scrapes):
            t = time.perf_counter()
            size = len(urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin).read())
            scrape_ms.append((time.perf_counter() - t) * 1e3)
        t2 = time.perf_counter()
        stop.set()
        th.join()

        def summary(lo, hi):
            rt = sorted(d for t, d in samples if lo <= t < hi)
            if not rt:
                return {"n": 0}
            return {"n": len(rt), "max_ms": round(rt[-1] * 1e3, 3),
                    "p99_ms": round(rt[min(len(rt) - 1, int(len(rt) * 0.99))] * 1e3, 3)}

        print(json.dumps({"tubes": a.tubes, "metrics_bytes": size,
                          "scrape_ms": [round(x, 1) for x in scrape_ms],
                          "probe_alone": summary(t0, t1),
                          "probe_during_scrapes": summary(t1, t2)}, indent=1))
    finally:
        server.terminate()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()

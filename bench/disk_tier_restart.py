#!/usr/bin/env python3
"""The disk tier's restart: how long a start takes, and its peak memory, with the checkpoint
a clean stop writes and without it (a full replay of the same directory), side by side in
one run (docs/DISK-TIER.md, "Restarts: the checkpoint").

It fills a binlog directory with N delayed jobs of 100 bytes (delays of 1 hour to 1 day,
pipelined puts) under `--hot-memory BUDGET`, waits until memory is within the budget, stops
the server with SIGTERM (timing the stop: the checkpoint is written then), copies the
directory without its checkpoint, and starts a server on each: the time from exec to the
first accepted connection (the listener opens once every job is back), and VmHWM (peak
resident memory) then. Both starts read files that are in the page cache (just written).

Usage:
    python3 bench/disk_tier_restart.py [BUILD_DIR] [--jobs N] [--budget 16M] [--dir TMP]
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
from beanstalk import Client, free_port, stats_of  # noqa: E402


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def start(binary, args):
    """Starts stalkd; returns (process, port, seconds until it answered a first command).
    The listener is open (and connections queue) while the binlog is still recovered: the
    first reply comes once every job is back."""
    port = free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, "-l", "127.0.0.1", "-p", str(port)] + args,
                            stderr=subprocess.PIPE)
    while True:
        if proc.poll() is not None:
            raise RuntimeError("stalkd exited: %s" % proc.stderr.read().decode())
        try:
            c = Client(("127.0.0.1", port), timeout=600)
            break
        except OSError:
            time.sleep(0.001)
    c.cmd("list-tubes")
    secs = time.monotonic() - t0
    c.close()
    return proc, port, secs


def stop(proc):
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=600)
    err = proc.stderr.read().decode()
    return time.monotonic() - t0, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--jobs", type=int, default=1000000)
    ap.add_argument("--budget", default="16M")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the directories (printed)")
    a = ap.parse_args()
    binary = os.environ.get("STALKD_BIN") or os.path.join(a.build, "stalkd")
    tmp = tempfile.mkdtemp(prefix="stalkd_tier_restart_", dir=a.dir)
    try:
        d1, d2 = os.path.join(tmp, "ckpt"), os.path.join(tmp, "replay")
        args = ["-f", "1000", "--hot-memory", a.budget]
        proc, port, _ = start(binary, ["-b", d1] + args)
        c = Client(("127.0.0.1", port), timeout=600)
        body = b"x" * 100
        t0 = time.monotonic()
        for i in range(0, a.jobs, 2000):
            k = min(a.jobs, i + 2000) - i
            c.send(b"".join(b"put 1 %d 60 100\r\n%s\r\n" % (3600 + (i + j) * 7919 % 82800, body)
                            for j in range(k)))
            for _ in range(k):
                r = c.read_reply()
                assert r.startswith(b"INSERTED"), r
        fill = time.monotonic() - t0
        budget = int(stats_of(c, "stats-ext")["disk-tier-budget"])
        while True:
            st = stats_of(c, "stats-ext")
            if int(st["memory-used"]) <= budget:
                break
            time.sleep(0.1)
        cold = int(st["disk-tier-cold-jobs"])
        rss_running = status(proc.pid, "VmRSS")
        c.close()
        stop_s, err = stop(proc)
        ckpt = os.path.getsize(os.path.join(d1, "checkpoint"))
        shutil.copytree(d1, d2, ignore=shutil.ignore_patterns("checkpoint", "lock"))
        seg_bytes = sum(os.path.getsize(os.path.join(d2, f)) for f in os.listdir(d2))
        print("%d jobs put in %.1f s; %d on disk; RSS running %.0f MB; stop %.2f s; checkpoint "
              "%.1f MB; segments %.0f MB" % (a.jobs, fill, cold, rss_running / 1e6, stop_s,
                                             ckpt / 1e6, seg_bytes / 1e6))
        print("load average before the starts: %s" % open("/proc/loadavg").read().strip())
        print("| start | to the first reply | VmHWM then | memory-used | cold jobs |")
        print("|---|---|---|---|---|")
        for name, d in (("from the checkpoint", d1), ("full replay", d2)):
            proc, port, secs = start(binary, ["-b", d] + args)
            hwm = status(proc.pid, "VmHWM")
            st = stats_of(Client(("127.0.0.1", port)), "stats-ext")
            print("| %s | %.2f s | %.0f MB | %.1f MB | %s |" % (
                name, secs, hwm / 1e6, int(st["memory-used"]) / 1e6, st["disk-tier-cold-jobs"]))
            _, err = stop(proc)
            sys.stderr.write(err)
    finally:
        if a.keep:
            print("kept: %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

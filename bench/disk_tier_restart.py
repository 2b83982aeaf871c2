#!/usr/bin/env python3
"""The disk tier's restart: how long a start takes, and its peak memory, with the checkpoint
a clean stop writes and without it (a full replay of the same directory), side by side in
one run (docs/DISK-TIER.md, "Restarts: the checkpoint").

It fills a binlog directory with N delayed jobs of 100 bytes (delays of 1 hour to 1 day,
pipelined puts; with --ready, ready jobs over --tubes tubes, priorities 0 to 999) under
`--hot-memory BUDGET`, waits until memory is within the budget, stops the server with
SIGTERM (timing the stop: the checkpoint is written then), copies the directory without its
checkpoint, and starts a server on each: the time from exec to the first reply (the listener
opens once every job is back), VmHWM (peak resident memory) then, and the read system calls
and bytes read so far (/proc/PID/io syscr, rchar). Both starts read files that are in the
page cache (just written).

With --tail N, the start from the checkpoint is followed by N puts of new delayed jobs and
N/2 deletes of the first jobs, then a kill -9; the next start (the checkpoint, and the
records written after it replayed on top) is measured beside a full replay of a copy of the
directory without the checkpoint, with the records each read (from its log, under -V).

With --compare-binary OLD, the fill, the stop and the start from the checkpoint are done
with OLD and then with this build, each on its own directory of the same shape, side by
side (no full replay), and last this build starts on a copy of OLD's directory (its
checkpoint, of OLD's format).

Usage:
    python3 bench/disk_tier_restart.py [BUILD_DIR] [--jobs N] [--budget 16M] [--dir TMP]
        [--ready [--tubes 10]] [--compare-binary OLD | --tail N]
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


def io_of(pid):
    """/proc/PID/io as a dict (syscr: read system calls; rchar: bytes they read)."""
    with open("/proc/%d/io" % pid) as f:
        return {k: int(v) for k, v in (line.split(":") for line in f)}


def fill(binary, d, args, a):
    """Fills d under binary, waits until memory is within the budget, stops it (SIGTERM)."""
    proc, port, _ = start(binary, ["-b", d] + args)
    c = Client(("127.0.0.1", port), timeout=600)
    body = b"x" * 100
    t0 = time.monotonic()
    for i in range(0, a.jobs, 2000):
        k = min(a.jobs, i + 2000) - i
        if a.ready:  # one block a tube, in turn
            c.send(b"use t%d\r\n" % (i // 2000 % a.tubes) + b"".join(
                b"put %d 0 60 100\r\n%s\r\n" % ((i + j) * 7919 % 1000, body)
                for j in range(k)))
            assert c.read_reply().startswith(b"USING")
        else:
            c.send(b"".join(b"put 1 %d 60 100\r\n%s\r\n" % (3600 + (i + j) * 7919 % 82800, body)
                            for j in range(k)))
        for _ in range(k):
            r = c.read_reply()
            assert r.startswith(b"INSERTED"), r
    fill_s = time.monotonic() - t0
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
    ckpt = os.path.getsize(os.path.join(d, "checkpoint"))
    seg_bytes = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                    if f.startswith("binlog."))
    print("%s: %d %s jobs put in %.1f s; %d on disk; RSS running %.0f MB; stop %.2f s; "
          "checkpoint %.1f MB; segments %.0f MB" % (
              binary, a.jobs, "ready" if a.ready else "delayed", fill_s, cold,
              rss_running / 1e6, stop_s, ckpt / 1e6, seg_bytes / 1e6))
    sys.stderr.write(err)


def measure(name, binary, d, args, then=None):
    """Starts binary on d; prints a row: time to the first reply, VmHWM, reads, memory. Then
    stops it (SIGTERM), or hands it to `then` (which ends it) with its port."""
    proc, port, secs = start(binary, ["-b", d] + args)
    io = io_of(proc.pid)
    hwm = status(proc.pid, "VmHWM")
    st = stats_of(Client(("127.0.0.1", port)), "stats-ext")
    print("| %s | %.2f s | %.0f MB | %d | %.1f MB | %.1f MB | %s |" % (
        name, secs, hwm / 1e6, io["syscr"], io["rchar"] / 1e6, int(st["memory-used"]) / 1e6,
        st["disk-tier-cold-jobs"]))
    if then:
        then(proc, port)
        return
    _, err = stop(proc)
    sys.stderr.write(err)
    sys.stdout.flush()


def tail_and_kill(n):
    """n puts of new delayed jobs and n/2 deletes of the first jobs, then kill -9."""
    def run(proc, port):
        c = Client(("127.0.0.1", port), timeout=600)
        body = b"t" * 100
        for i in range(0, n, 2000):
            k = min(n, i + 2000) - i
            c.send(b"".join(b"put 1 %d 60 100\r\n%s\r\n" % (3600 + (i + j) * 7919 % 82800, body)
                            for j in range(k)))
            for _ in range(k):
                r = c.read_reply()
                assert r.startswith(b"INSERTED"), r
        for i in range(1, n // 2 + 1, 2000):
            ids = range(i, min(n // 2 + 1, i + 2000))
            c.send(b"".join(b"delete %d\r\n" % j for j in ids))
            for _ in ids:
                r = c.read_reply()
                assert r == b"DELETED\r\n", r
        c.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        err = proc.stderr.read().decode()
        sys.stderr.write(err)
        print("then %d puts and %d deletes, kill -9" % (n, n // 2))
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--jobs", type=int, default=1000000)
    ap.add_argument("--budget", default="16M")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--ready", action="store_true", help="ready jobs instead of delayed ones")
    ap.add_argument("--tubes", type=int, default=10, help="tubes of the ready jobs")
    ap.add_argument("--compare-binary", default=None, help="another stalkd, side by side")
    ap.add_argument("--keep", action="store_true", help="keep the directories (printed)")
    ap.add_argument("--tail", type=int, default=0,
                    help="after the start from the checkpoint: N puts, N/2 deletes, kill -9")
    a = ap.parse_args()
    binary = os.environ.get("STALKD_BIN") or os.path.join(a.build, "stalkd")
    tmp = tempfile.mkdtemp(prefix="stalkd_tier_restart_", dir=a.dir)
    args = ["-f", "1000", "--hot-memory", a.budget]
    header = ("| start | to the first reply | VmHWM then | read calls (syscr) | bytes read (rchar) "
              "| memory-used | cold jobs |\n|---|---|---|---|---|---|---|")
    try:
        if a.compare_binary:
            d_old, d_new, d_v1 = (os.path.join(tmp, n) for n in ("old", "new", "old-by-new"))
            fill(a.compare_binary, d_old, args, a)
            shutil.copytree(d_old, d_v1, ignore=shutil.ignore_patterns("lock"))
            fill(binary, d_new, args, a)
            print("load average before the starts: %s" % open("/proc/loadavg").read().strip())
            print(header)
            measure("from the checkpoint, %s" % a.compare_binary, a.compare_binary, d_old, args)
            measure("from the checkpoint, %s" % binary, binary, d_new, args)
            measure("%s from %s's checkpoint" % (binary, a.compare_binary), binary, d_v1, args)
            return
        d1, d2 = os.path.join(tmp, "ckpt"), os.path.join(tmp, "replay")
        fill(binary, d1, args, a)
        if a.tail:
            print(header)
            measure("from the checkpoint (after SIGTERM)", binary, d1, args, tail_and_kill(a.tail))
            shutil.copytree(d1, d2, ignore=shutil.ignore_patterns("checkpoint", "lock"))
            print("load average before the starts: %s" % open("/proc/loadavg").read().strip())
            measure("after kill -9: checkpoint + tail", binary, d1, args + ["-V"])
            measure("after kill -9: full replay", binary, d2, args + ["-V"])
            return
        shutil.copytree(d1, d2, ignore=shutil.ignore_patterns("checkpoint", "lock"))
        print("load average before the starts: %s" % open("/proc/loadavg").read().strip())
        print(header)
        measure("from the checkpoint", binary, d1, args)
        measure("full replay", binary, d2, args)
    finally:
        if a.keep:
            print("kept: %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

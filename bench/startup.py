#!/usr/bin/env python3
"""Start-up time: from exec to the first accepted connection and to the first reply, stalkd
against Debian's beanstalkd in the same run.

Client test suites start the server and connect after a fixed pause (greenstalk's is 100 ms),
so what counts is how soon after exec a connection is accepted and answered. Each repetition
starts every configuration once, in turn (so machine noise spreads over all of them):

    stalkd                      no binlog
    stalkd -b (new dir)         an empty binlog directory (the first segment is made)
    stalkd -b (restart)         the directory of the previous repetition (recovery)
    stalkd --store redis://     one redis-server this script starts (--store-wait 0)
    beanstalkd                  no binlog
    beanstalkd -b (new dir), beanstalkd -b (restart)

Timing: t0 just before the fork (subprocess.Popen); then the client tries to connect every
0.2 ms until the kernel accepts (the listener exists: that is what a client's connect sees);
"accept" is that moment. It then sends `list-tubes` and reads the whole reply: "reply".
The server is then stopped by SIGTERM (by PID): stalkd must exit 0 (beanstalkd dies of it).

Usage:
    python3 bench/startup.py [BUILD_DIR] [--reps N] [--quick] [--out FILE] [--no-redis]
                             [--baseline PATH]

BUILD_DIR defaults to build/release; STALKD_BIN, BEANSTALKD_BIN and REDIS_SERVER override the
binaries. Prints a markdown table (median and p90 in ms, and each stalkd median over
beanstalkd's median of the same kind); writes the raw samples as JSON to --out (default
bench/results/startup.json). Exit status 1 if any start failed.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import redis_fixture as rf  # noqa: E402

POLL_S = 0.0002  # between connection attempts
GIVE_UP_S = 10.0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_reply(sock):
    """Reads one `OK <n>\\r\\n<data>\\r\\n` (or a one-line) reply."""
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError("connection closed before the reply")
        buf += chunk
    line, rest = buf.split(b"\r\n", 1)
    if line.startswith(b"OK "):
        need = int(line.split()[1]) + 2
        while len(rest) < need:
            chunk = sock.recv(65536)
            if not chunk:
                raise OSError("connection closed in the reply")
            rest += chunk
    return line


def one_start(argv):
    """Starts argv (which listens on its -p port), returns (accept_ms, reply_ms)."""
    port = int(argv[argv.index("-p") + 1])
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        sock = None
        while sock is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.connect(("127.0.0.1", port))
                sock = s
            except ConnectionRefusedError:
                s.close()
                if proc.poll() is not None:
                    raise RuntimeError("exited %s: %s" % (proc.returncode,
                                                          proc.stderr.read().decode()[-500:]))
                if time.perf_counter() - t0 > GIVE_UP_S:
                    raise RuntimeError("not listening after %s s" % GIVE_UP_S)
                time.sleep(POLL_S)
        t_accept = time.perf_counter()
        sock.settimeout(GIVE_UP_S)
        sock.sendall(b"list-tubes\r\n")
        line = read_reply(sock)
        t_reply = time.perf_counter()
        sock.close()
        if not line.startswith(b"OK "):
            raise RuntimeError("list-tubes answered %r" % line)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read().decode()
        proc.stderr.close()
    # beanstalkd leaves SIGTERM to its default action; stalkd stops and exits 0.
    if proc.returncode not in (0, -signal.SIGTERM) or (proc.returncode != 0 and "stalkd" in
                                                         os.path.basename(argv[0])[:6]):
        raise RuntimeError("exit status %s after SIGTERM: %s" % (proc.returncode, err[-500:]))
    return (t_accept - t0) * 1000, (t_reply - t0) * 1000


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="10 repetitions")
    ap.add_argument("--no-redis", action="store_true")
    ap.add_argument("--baseline", help="another stalkd build (e.g. before a change), run "
                    "without and with -b (new dir) beside the others")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "startup.json"))
    a = ap.parse_args()
    reps = 10 if a.quick else a.reps
    stalkd = os.environ.get("STALKD_BIN") or os.path.join(a.build, "stalkd")
    beanstalkd = os.environ.get("BEANSTALKD_BIN") or "/usr/bin/beanstalkd"
    tmp = tempfile.mkdtemp(prefix="stalkd-startup-")
    redis = None
    # name -> (argv without -p, kind for the ratio, binlog dir made fresh each time or None)
    configs = [
        ("stalkd", [stalkd, "-l", "127.0.0.1"], "plain", None),
        ("stalkd -b (new dir)", [stalkd, "-l", "127.0.0.1", "-b", "{new}"], "-b new", "new"),
        ("stalkd -b (restart)", [stalkd, "-l", "127.0.0.1", "-b", tmp + "/s-keep"], "-b restart",
         None),
        ("beanstalkd", [beanstalkd, "-l", "127.0.0.1"], "plain", None),
        ("beanstalkd -b (new dir)", [beanstalkd, "-l", "127.0.0.1", "-b", "{new}"], "-b new",
         "new"),
        ("beanstalkd -b (restart)", [beanstalkd, "-l", "127.0.0.1", "-b", tmp + "/b-keep"],
         "-b restart", None),
    ]
    if a.baseline:
        configs[2:2] = [("baseline", [a.baseline, "-l", "127.0.0.1"], "plain", None),
                        ("baseline -b (new dir)", [a.baseline, "-l", "127.0.0.1", "-b", "{new}"],
                         "-b new", "new")]
    os.makedirs(tmp + "/s-keep")
    os.makedirs(tmp + "/b-keep")
    if not a.no_redis and rf.available():
        redis = rf.RedisServer()  # started
        configs.insert(3, ("stalkd --store redis://", [stalkd, "-l", "127.0.0.1"] + rf.store_argv(
            redis.url(), "startup", wait=0), "redis", None))
    samples = {name: {"accept": [], "reply": []} for name, *_ in configs}
    failures = []
    try:
        for rep in range(reps):
            for name, argv, _, fresh in configs:
                d = None
                if fresh:
                    d = tempfile.mkdtemp(dir=tmp)
                    argv = [d if x == "{new}" else x for x in argv]
                try:
                    acc, rep_ms = one_start(argv + ["-p", str(free_port())])
                    samples[name]["accept"].append(acc)
                    samples[name]["reply"].append(rep_ms)
                except (RuntimeError, OSError) as e:
                    failures.append("%s: %s" % (name, e))
                if d:
                    shutil.rmtree(d, ignore_errors=True)
    finally:
        if redis:
            redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    base = {kind: samples[name] for name, _, kind, _ in configs if name.startswith("beanstalkd")}
    base["redis"] = base.get("plain")
    print("Start-up, %d repetitions, load average %.2f: ms from exec (median / p90); ratio: "
          "median over beanstalkd's of the same kind (redis: over plain beanstalkd)\n"
          % (reps, os.getloadavg()[0]))
    print("| server | accept median | accept p90 | reply median | reply p90 | accept ratio | "
          "reply ratio |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for name, _, kind, _ in configs:
        s = samples[name]
        if not s["accept"]:
            print("| %s | failed | | | | | |" % name)
            continue
        row = {k: (statistics.median(s[k]), pct(s[k], 90)) for k in ("accept", "reply")}
        b = base.get(kind)
        ratio = {k: (row[k][0] / statistics.median(b[k]) if b and b[k] else None)
                 for k in ("accept", "reply")}
        summary[name] = {"median_ms": {k: row[k][0] for k in row}, "p90_ms": {k: row[k][1] for k in row},
                         "ratio": ratio, "n": len(s["accept"])}
        fr = lambda x: "%.2fx" % x if x else "-"  # noqa: E731
        print("| %s | %.1f | %.1f | %.1f | %.1f | %s | %s |" % (
            name, row["accept"][0], row["accept"][1], row["reply"][0], row["reply"][1],
            fr(ratio["accept"]), fr(ratio["reply"])))
    for f in failures:
        print("FAILED:", f)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"reps": reps, "loadavg": os.getloadavg(), "samples": samples,
                   "summary": summary, "failures": failures}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

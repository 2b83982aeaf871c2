#!/usr/bin/env python3
"""The disk tier's benchmark (docs/DISK-TIER.md): stalkd with `-b DIR --hot-memory BYTES`
against the all-in-memory stalkd (`-b DIR` alone) in the same run, part by part.

Parts (--part, comma-separated; default all, in this order):

  capacity  N [--jobs] jobs of 100 B, 90 % delayed between 1 hour and 30 days, the rest a
            ready backlog, over 100 tubes, pipelined from this script (2 connections, each
            command block a `use` and 1000 puts, 8 blocks in flight per connection). The
            tier's budget is --hot-memory (default: the issue's 2 GB for 200,000,000 jobs,
            scaled to N). Puts/s and server CPU per put; RSS (VmRSS) and its growth per job,
            `memory-used`, `disk-tier-index-bytes-per-cold-job`, and RSS beyond the jobs in
            memory per cold job; RSS extrapolated linearly to --target-jobs.
  restart   the servers of `capacity` (or a fill of N as there): SIGTERM, then exec → the
            first `stats` reply, the time until the tier has demoted again, the start-up's
            peak RSS (VmHWM); twice, the second time with the binlog's pages evicted from the
            page cache first (as after a reboot); then a third time after a kill -9 (a replay
            of the binlog), and with --compare-binary a fourth, after another kill -9, with
            that binary. Linear extrapolation to --target-jobs.
            --tier-only leaves out the all-in-memory server here and in capacity.
  hotpath   M [--hotpath-jobs] delayed jobs (1 hour to 30 days) in both servers, the tier's
            budget set from the all-in-memory server's `memory-used` so that a fraction
            --cold-fraction (0.95) of them is on disk; then stalkd_loadgen's `cycle` (50
            connections put → reserve → delete) and `pipeline` (4 × 100 in flight) on each,
            --rounds rounds with the order alternating. Commands/s, server CPU per command,
            p99s; `disk-tier-waited-reads` ÷ the reserves meanwhile.
  ontime    K [--ontime-jobs] jobs put over --ontime-spread s (1) with a delay of
            --ontime-delay s (15), so they fall due within that second, while 4 consumers
            each keep 256 `reserve`s waiting and delete what they get (stalkd_loadgen's
            `delayed`: lateness from each job's deadline as stamped at its put's send, an
            upper bound; the bound from the put's reply is shown too). Three fresh servers:
            all in memory; the tier (budget 1 MB) with the records in the page cache; the
            tier with the binlog's pages evicted (posix_fadvise DONTNEED on every segment,
            after an fdatasync, once the puts are done and demoted; page residency measured
            before and after with mincore). Dropping the whole page cache needs root; this
            does not.
  disk      D [--disk-jobs] delayed jobs (1 hour to 30 days), then --churn-rounds rounds of:
            delete a --churn-fraction of the live jobs at random, put as many new ones; then
            compaction is let run until the binlog stops changing. Bytes written
            (/proc/PID/io write_bytes: the pages the server dirtied, counted again each time
            a page written back is dirtied anew; wchar, in the JSON, also counts socket
            writes) against the bytes of the records the commands made
            (a put's full record, a delete's record; compaction's copies are the
            amplification), and the live jobs' record bytes against the binlog's files.

Every server runs on a free 127.0.0.1 port with its binlog in a temporary directory under
--tmp (default: the system's; it must be a disk, not tmpfs, for the page-cache figures),
is stopped by PID and its directory removed. Nothing is niced. Prints one markdown table per
part (all in memory | disk tier | tier ÷ all in memory | target) and writes the raw figures
as JSON to --out. Builds nothing: needs BUILD_DIR/stalkd and BUILD_DIR/bench/stalkd_loadgen
(STALKD_BIN, LOADGEN_BIN override). Run by hand only, never in CI.

    python3 bench/disk_tier_bench.py [BUILD_DIR] [--part capacity,...] [--jobs N] [--quick]
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import run as bench_run  # noqa: E402  (loadgen(), free_port(), /proc readers)
from beanstalk import Client, stats_of  # noqa: E402
from startup import read_reply  # noqa: E402

PARTS = ("capacity", "restart", "hotpath", "ontime", "disk")  # the order they run in
TUBES = [b"default"] + [b"t%d" % i for i in range(1, 100)]
BODY = 100
FULL_RECORD_FIXED = 9 + 57 + 1 + 4  # docs/BINLOG.md: header, job fields, tube_len, body_len
DELETE_RECORD = 9 + 8
HOUR, DAYS30 = 3600, 30 * 86400
HANG = 600.0  # bounds a hang only


def now():
    return time.perf_counter()


def parse_bytes(s):
    s = str(s).strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s[:-1] if s[-1:] in "KMG" else s) * mult)


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def proc_io(pid):
    out = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v)
    return out


# ------------------------------------------------------------------------------------------------
# Servers

class Srv(bench_run.Server):
    """stalkd on 127.0.0.1:<free port> with -b <a temporary directory>, as run.py's servers
    (run.loadgen() takes it), with a timed start, a stats client and the binlog's files."""

    def __init__(self, label, binary, extra=()):
        super().__init__("stalkd", binary, ["-b", "{tmpdir}"] + list(extra), label)
        self.dir = self.tmpdir
        self.client = None

    def start(self, poll_s=0.0002):
        """Starts the server; returns (s to the first accepted connection, s to the first
        `stats` reply), both from just before the fork."""
        self.port = bench_run.free_port()
        argv = [self.binary, "-l", "127.0.0.1", "-p", str(self.port)] + self.args
        if self.log:
            self.log.close()
        self.log = tempfile.TemporaryFile()
        t0 = now()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, preexec_fn=bench_run._raise_nofile)
        bench_run.LIVE.append(self)
        sock = None
        while sock is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.connect(("127.0.0.1", self.port))
                sock = s
            except ConnectionRefusedError:
                s.close()
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.label} exited at start-up: {self.log_tail()}")
                if now() - t0 > HANG:
                    raise RuntimeError(f"{self.label} not listening after {HANG} s")
                time.sleep(poll_s)
        t_accept = now()
        sock.settimeout(HANG)
        sock.sendall(b"stats\r\n")
        read_reply(sock)
        t_reply = now()
        sock.close()
        self.client = Client(("127.0.0.1", self.port), timeout=HANG)
        return t_accept - t0, t_reply - t0

    def stop(self, sig=signal.SIGTERM):
        """As run.py's, with a minute (not 5 s) for a server holding millions of jobs."""
        if self.client:
            self.client.close()
            self.client = None
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        super().stop(sig)

    def hwm(self):
        return proc_status(self.pid, "VmHWM")

    def ext(self):
        return {k: (int(v) if v.isdigit() else v)
                for k, v in stats_of(self.client, "stats-ext").items()}

    def segments(self):
        return sorted((os.path.join(self.dir, f) for f in os.listdir(self.dir)
                       if re.fullmatch(r"binlog\.\d+", f)),
                      key=lambda p: int(p.rsplit(".", 1)[1]))

    def dir_bytes(self):
        """(sum of the segments' sizes, blocks allocated to them)"""
        size = blocks = 0
        for p in self.segments():
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue
            size += st.st_size
            blocks += st.st_blocks * 512
        return size, blocks


# ------------------------------------------------------------------------------------------------
# Pipelined commands from this process: blocks of prebuilt commands, a window of blocks in
# flight per connection, a sender and a receiver thread per connection (the socket calls let
# go of the GIL, so the server, not this script, is what a fill's rate measures: its CPU per
# put is shown beside the rate).

class Stream:
    def __init__(self, port, blocks, conns=2, window=8, collect_ids=False):
        """blocks: an iterator of (bytes, number of reply lines); shared by the connections."""
        self.port = port
        self.blocks = blocks
        self.conns = conns
        self.window = window
        self.collect_ids = collect_ids
        self.lock = threading.Lock()
        self.ids = []
        self.lines = 0
        self.errors = 0
        self.samples = []
        self.failure = None

    def run(self):
        threads = []
        t0 = now()
        for _ in range(self.conns):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=HANG)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sem = threading.Semaphore(self.window)
            pending = []  # the cumulative line count at each block's end, in send order
            cv = threading.Condition()
            state = {"sent_all": False}
            threads.append(threading.Thread(target=self._send, args=(sock, sem, pending, cv, state)))
            threads.append(threading.Thread(target=self._recv, args=(sock, sem, pending, cv, state)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.failure:
            raise RuntimeError(self.failure)
        return now() - t0

    def _send(self, sock, sem, pending, cv, state):
        total = 0
        try:
            while True:
                with self.lock:
                    item = next(self.blocks, None)
                if item is None:
                    break
                data, n = item
                sem.acquire()
                total += n
                with cv:
                    pending.append(total)
                    cv.notify()
                sock.sendall(data)
        except OSError as e:
            self.failure = self.failure or f"send: {e}"
        with cv:
            state["sent_all"] = True
            cv.notify()

    def _recv(self, sock, sem, pending, cv, state):
        got, tail, k = 0, b"", 0
        try:
            while True:
                with cv:
                    while k >= len(pending) and not state["sent_all"]:
                        cv.wait()
                    if k >= len(pending) and state["sent_all"]:
                        break
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise OSError("connection closed by the server")
                data = tail + chunk
                cut = data.rfind(b"\n") + 1
                block, tail = data[:cut], data[cut:]
                n = block.count(b"\n")
                good = block.count(b"INSERTED ") + block.count(b"USING ") + block.count(b"DELETED\r")
                if good != n:
                    with self.lock:
                        self.errors += n - good
                        if len(self.samples) < 5:
                            self.samples += [x for x in block.split(b"\r\n") if x and not
                                             x.startswith((b"INSERTED", b"USING", b"DELETED"))][:5]
                if self.collect_ids:
                    ids = [int(x) for x in re.findall(rb"INSERTED (\d+)", block)]
                    with self.lock:
                        self.ids.extend(ids)
                got += n
                with cv:
                    while k < len(pending) and got >= pending[k]:
                        k += 1
                        sem.release()
        except OSError as e:
            self.failure = self.failure or f"receive: {e}"
            for _ in range(self.window):
                sem.release()
        finally:
            sock.close()
        with self.lock:
            self.lines += got


class Mix:
    """Put blocks: per_block puts of 100 B, a fraction `ready` with delay 0 and the rest with a
    delay drawn uniformly from [dmin, dmax] s; each block is `use <tube>` (the 100 tubes in
    turn) and its puts. A pool of prebuilt blocks is reused, so any N costs the same memory."""

    def __init__(self, ready, dmin=HOUR, dmax=DAYS30, per_block=1000, pool=48, seed=1):
        rng = random.Random(seed)
        body = b"x" * BODY
        self.per_block = per_block
        self.pool = []
        for _ in range(pool):
            self.pool.append(b"".join(
                b"put %d %d 120 %d\r\n%s\r\n" % (rng.randrange(1024),
                                                 0 if rng.random() < ready else
                                                 rng.randint(dmin, dmax), BODY, body)
                for _ in range(per_block)))
        self.record_bytes = 0  # the full records of the puts made so far
        self.puts = 0

    def blocks(self, n):
        k = 0
        while n > 0:
            m = min(self.per_block, n)
            blk = self.pool[k % len(self.pool)]
            if m < self.per_block:  # the first m puts (each a command line and a body)
                blk = b"\r\n".join(blk.split(b"\r\n")[:2 * m]) + b"\r\n"
            tube = TUBES[k % len(TUBES)]
            self.record_bytes += m * (FULL_RECORD_FIXED + len(tube) + BODY)
            self.puts += m
            yield b"use " + tube + b"\r\n" + blk, m + 1
            n -= m
            k += 1


def fill(srv, n, mix, conns, collect_ids=False):
    cpu0 = srv.cpu_s()
    st = Stream(srv.port, mix.blocks(n), conns=conns, collect_ids=collect_ids)
    wall = st.run()
    cpu = srv.cpu_s() - cpu0
    if st.errors:
        raise RuntimeError(f"{srv.label}: {st.errors} puts failed: {st.samples}")
    return {"puts": n, "wall_s": wall, "puts_per_s": n / wall, "server_cpu_us_per_put":
            cpu / n * 1e6, "ids": st.ids}


def delete_ids(srv, ids, conns):
    def blocks():
        for i in range(0, len(ids), 1000):
            part = ids[i:i + 1000]
            yield b"".join(b"delete %d\r\n" % j for j in part), len(part)
    st = Stream(srv.port, blocks(), conns=conns)
    wall = st.run()
    if st.errors:
        raise RuntimeError(f"{srv.label}: {st.errors} deletes failed: {st.samples}")
    return wall


def wait_quiet(fetch, quiet_s, interval=0.05, timeout=HANG):
    """Polls fetch() until its value has not changed for quiet_s; returns the seconds until
    it last changed (None: not within timeout)."""
    t0 = now()
    last, since = None, now()
    while now() - t0 < timeout:
        cur = fetch()
        if cur != last:
            last, since = cur, now()
        elif now() - since >= quiet_s:
            return since - t0
        time.sleep(interval)
    return None


def settle(srv, quiet_s=1.5):
    """Waits until the tier's demotions stop; returns the seconds that took. Polls every
    0.5 s only: with the tier on, every `stats` walks the index's time buckets (tens of ms
    at millions of jobs on disk), time the loop does not demote in."""
    if "disk-tier-demotions" not in srv.ext():
        return 0.0
    return wait_quiet(lambda: srv.ext()["disk-tier-demotions"], quiet_s, interval=0.5)


def stats_ms(srv, n=3):
    """The median round trip of `stats-ext`, ms."""
    out = []
    for _ in range(n):
        t = now()
        srv.ext()
        out.append((now() - t) * 1e3)
    return statistics.median(out)


# ------------------------------------------------------------------------------------------------
# The page cache (no root needed): residency with mincore(2), eviction with posix_fadvise.

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
PAGE = os.sysconf("SC_PAGE_SIZE")


def each_fd(paths, fn):
    """fn(fd) for each file still there, opened read-only; returns the sum of the results."""
    total = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:  # a segment compaction removed meanwhile
            continue
        try:
            total += fn(fd) or 0
        finally:
            os.close(fd)
    return total


def _resident(fd):
    size = os.fstat(fd).st_size
    addr = _libc.mmap(None, size, 1, 1, fd, 0) if size else None  # PROT_READ, MAP_SHARED
    if addr in (None, ctypes.c_void_p(-1).value):
        return 0
    pages = (size + PAGE - 1) // PAGE
    vec = (ctypes.c_ubyte * pages)()
    n = pages - bytes(vec).count(0) if _libc.mincore(addr, size, vec) == 0 else 0
    _libc.munmap(addr, size)
    return n * PAGE


def _evict(fd):
    try:
        os.fdatasync(fd)  # dirty pages cannot be dropped: written back first
    except OSError:
        pass
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def resident_bytes(paths):
    """The bytes of these files in the page cache (mincore of a mapping of each)."""
    return each_fd(paths, _resident)


def evict(paths):
    """Drops these files' pages from the page cache (no root needed for files one can open)."""
    each_fd(paths, _evict)


# ------------------------------------------------------------------------------------------------
# Reporting

def fmt(v):
    return v if isinstance(v, str) else bench_run.fmt(v)


def ratio(t, a):
    if t is None or a in (None, 0) or isinstance(t, str) or isinstance(a, str):
        return None
    return t / a


def table(title, rows, cols=("all in memory", "disk tier")):
    """rows: (label, one value per column, target text); a ratio column for every column after
    the first, against the first."""
    head = " | ".join(cols) + " | " + " | ".join(f"{c} ÷ {cols[0]}" for c in cols[1:])
    out = [f"\n### {title}\n", f"| | {head} | target |",
           "|---" * (2 * len(cols) + 1) + "|"]
    for label, *vals, target in rows:
        ratios = [ratio(v, vals[0]) for v in vals[1:]]
        out.append(f"| {label} | " + " | ".join(fmt(v) for v in vals) + " | " +
                   " | ".join("×" + fmt(r) if r is not None else "" for r in ratios) +
                   f" | {target or ''} |")
    text = "\n".join(out)
    print(text, flush=True)
    return text


MB = 1 << 20


# ------------------------------------------------------------------------------------------------
# Parts

class Ctx:
    def __init__(self, a, root):
        self.a = a
        self.root = root
        self.servers = []
        self.filled = None  # (all-in-memory, tier, {label: figures}) of capacity, for restart
        self.out = {}
        self.tables = []

    def server(self, label, extra=()):
        s = Srv(label, self.a.stalkd, ["-s", str(self.a.segment_size)] + list(extra))
        self.servers.append(s)
        s.start(poll_s=0.01)
        return s

    def drop(self, *servers):
        for s in servers:
            s.cleanup()
            if s in self.servers:
                self.servers.remove(s)


def fill_mixed(ctx, srv, n, budget):
    """The capacity shape into one server; returns its figures."""
    a = ctx.a
    rss0 = srv.rss()
    f = fill(srv, n, Mix(ready=0.10, seed=a.seed), a.fill_conns)
    settle_s = settle(srv) if budget else 0.0
    cpu0, t0 = srv.cpu_s(), now()
    time.sleep(2.0)  # idle: a loop that spins (demotion with nothing left to demote) shows here
    idle_cores = (srv.cpu_s() - cpu0) / (now() - t0)
    e = srv.ext()
    rss = srv.rss()
    cold = e.get("disk-tier-cold-jobs")
    st_ms = stats_ms(srv)
    m = {"puts_per_s": f["puts_per_s"], "fill_s": f["wall_s"],
         "server_cpu_us_per_put": f["server_cpu_us_per_put"], "settle_s": settle_s,
         "idle_cores": idle_cores, "stats_ms": st_ms,
         "rss_empty": rss0, "rss": rss, "hwm": srv.hwm(), "rss_per_job": (rss - rss0) / n,
         "memory_used": e["memory-used"], "cold": cold, "hot": e.get("disk-tier-hot-jobs"),
         "delayed": e["current-jobs-delayed"], "ready": e["current-jobs-ready"],
         "index_bytes": e.get("disk-tier-index-bytes"),
         "index_per_cold_stat": e.get("disk-tier-index-bytes-per-cold-job"),
         "budget": budget}
    m["rss_at_target"] = rss0 + m["rss_per_job"] * ctx.a.target_jobs
    if cold:
        m["index_per_cold"] = e["disk-tier-index-bytes"] / cold
        m["rss_beyond_hot_per_cold"] = (rss - rss0 - e["memory-used"]) / cold
    return m


def g(x, key, scale=1):
    """x[key] / scale, or None where the figure (or the whole server: --tier-only) is missing."""
    if x is None or x.get(key) is None:
        return None
    return x[key] / scale if scale != 1 else x[key]


def budget_for(a, n):
    return a.hot_memory_bytes or int(n * a.target_budget_bytes / a.target_jobs)


def part_capacity(ctx):
    a = ctx.a
    n = a.jobs
    budget = budget_for(a, n)
    res = {"ram": None}
    ram = None
    if not a.tier_only:
        ram = ctx.server("all in memory")
        res["ram"] = fill_mixed(ctx, ram, n, 0)
    tier = ctx.server("disk tier", ["--hot-memory", str(budget)])
    res["tier"] = fill_mixed(ctx, tier, n, budget)
    ctx.filled = (ram, tier, res)
    r, t = res["ram"], res["tier"]
    if r and t.get("cold"):
        t["saved_per_cold"] = (r["rss"] - t["rss"]) / t["cold"]
    ctx.out["capacity"] = res
    ctx.tables.append(table(
        f"Capacity: {n:,} jobs of {BODY} B (90 % delayed 1 h–30 d, 10 % ready), 100 tubes; "
        f"budget --hot-memory {budget:,} B ({a.target_budget_bytes / 2**30:.0f} GiB × "
        f"{n:,} / {a.target_jobs:,})", [
            (f"fill: puts/s (pipelined from Python, {a.fill_conns} connections)",
             g(r, "puts_per_s"), t["puts_per_s"], "same as all in memory"),
            ("fill: server CPU µs per put", g(r, "server_cpu_us_per_put"),
             t["server_cpu_us_per_put"], ""),
            ("after the fill: s until demotion stopped", None, t["settle_s"], ""),
            ("then idle: server CPU (cores, over 2 s)", g(r, "idle_cores"), t["idle_cores"], "0"),
            ("one `stats-ext` round trip ms (median of 3)", g(r, "stats_ms"), t["stats_ms"], ""),
            ("RSS MiB", g(r, "rss", MB), t["rss"] / MB, f"≤ budget ({budget / MB:.1f})"),
            ("RSS growth per job B", g(r, "rss_per_job"), t["rss_per_job"], ""),
            ("`memory-used` MiB (jobs in memory)", g(r, "memory_used", MB),
             t["memory_used"] / MB, f"≤ {budget / MB:.1f}"),
            ("jobs on disk (`disk-tier-cold-jobs`)", None, t["cold"],
             f"up to {t['delayed']:,} (every delayed job)"),
            ("jobs in memory (ready backlog + hot delayed)",
             r and r["ready"] + r["delayed"], t["hot"], ""),
            ("`disk-tier-index-bytes-per-cold-job`", None, t.get("index_per_cold_stat"), "≤ 12"),
            ("(RSS growth − `memory-used`) per cold job B", None,
             t.get("rss_beyond_hot_per_cold"), "≤ 12"),
            ("RSS saved per cold job B (all in memory − tier)", None, t.get("saved_per_cold"), ""),
            (f"RSS extrapolated to {a.target_jobs:,} jobs GiB (linear)",
             g(r, "rss_at_target", 1 << 30), t["rss_at_target"] / (1 << 30),
             f"≤ {a.target_budget_bytes / 2**30:.0f}"),
        ]))


def part_hotpath(ctx):
    a = ctx.a
    m = a.hotpath_jobs
    ram = ctx.server("all in memory")
    fr = fill(ram, m, Mix(ready=0.0, seed=a.seed + 1), a.fill_conns)
    mem = ram.ext()["memory-used"]
    budget = max(64 * 1024, int(mem * (1 - a.cold_fraction) * 16 / 15))
    tier = ctx.server("disk tier", ["--hot-memory", str(budget)])
    ft = fill(tier, m, Mix(ready=0.0, seed=a.seed + 1), a.fill_conns)
    settle(tier)
    cold0 = tier.ext()["disk-tier-cold-jobs"]
    runs = {"ram": {"cycle": [], "pipeline": []}, "tier": {"cycle": [], "pipeline": []}}
    waited = reserves = 0
    for rnd in range(a.rounds):
        order = [("ram", ram), ("tier", tier)]
        if rnd % 2:
            order.reverse()
        for key, srv in order:
            for shape, opts in (("cycle", dict(conns=50, size=BODY)),
                                ("pipeline", dict(conns=4, depth=100, mode="pdr", size=BODY))):
                e0 = srv.ext()
                r = bench_run.loadgen(srv, shape, duration=a.duration, warmup=a.warmup, **opts)
                e1 = srv.ext()
                if key == "tier":
                    waited += e1["disk-tier-waited-reads"] - e0["disk-tier-waited-reads"]
                    reserves += sum(e1[k] - e0[k] for k in ("cmd-reserve",
                                                            "cmd-reserve-with-timeout"))
                if r.get("errors"):
                    raise RuntimeError(f"{srv.label} {shape}: errors {r.get('errors')}")
                runs[key][shape].append(r)
    cold1 = tier.ext()["disk-tier-cold-jobs"]

    def med(key, shape, path):
        vals = [bench_run.get(r, path) for r in runs[key][shape]]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None
    rows = [("jobs on disk before / after the runs", None, f"{cold0:,} / {cold1:,} of {m:,} "
             f"({cold0 / m:.1%} / {cold1 / m:.1%})", f"{a.cold_fraction:.0%} cold")]
    for shape, label in (("cycle", "cycle (50 connections put → reserve → delete)"),
                         ("pipeline", "pipeline (4 × 100 in flight)")):
        rows += [(f"{label}: commands/s", med("ram", shape, "ops_per_s"),
                  med("tier", shape, "ops_per_s"), "≥ ×0.90"),
                 (f"{shape}: server CPU µs per command", med("ram", shape, "server_cpu_us_per_op"),
                  med("tier", shape, "server_cpu_us_per_op"), "≤ ×1.10")]
        if shape == "cycle":
            rows += [(f"cycle: {c} p99 µs", med("ram", shape, f"latency_us.{c}.p99_us"),
                      med("tier", shape, f"latency_us.{c}.p99_us"), "")
                     for c in ("put", "reserve", "delete")]
        else:
            rows.append(("pipeline: batch round trip p99 ms",
                         (med("ram", shape, "batch_latency_us.p99_us") or 0) / 1e3,
                         (med("tier", shape, "batch_latency_us.p99_us") or 0) / 1e3, ""))
    rows.append(("reserves that waited for the disk (`disk-tier-waited-reads` ÷ reserves)", None,
                 f"{waited:,} of {reserves:,} ({waited / max(1, reserves):.4%})", "< 0.1 %"))
    ctx.out["hotpath"] = {"jobs": m, "budget": budget, "cold_before": cold0, "cold_after": cold1,
                          "fill_ram": {k: v for k, v in fr.items() if k != "ids"},
                          "fill_tier": {k: v for k, v in ft.items() if k != "ids"},
                          "waited_reads": waited, "reserves": reserves, "runs": runs}
    ctx.tables.append(table(
        f"Hot path: {m:,} delayed jobs (1 h–30 d) held, the tier's budget {budget:,} B; "
        f"median of {a.rounds} runs of {a.duration:g} s per shape, order alternating", rows))
    ctx.drop(ram, tier)


def part_ontime(ctx):
    a = ctx.a
    k = a.ontime_jobs
    results = {}
    loadgen_timeout = a.ontime_delay + a.ontime_spread + 120
    for key, label, extra, do_evict in (
            ("ram", "all in memory", [], False),
            ("warm", "disk tier, records in the page cache", ["--hot-memory", "1M"], False),
            ("cold", "disk tier, binlog evicted from the page cache", ["--hot-memory", "1M"],
             True)):
        srv = ctx.server(label, extra)
        watch = {}
        stop = threading.Event()

        def watcher(srv=srv, watch=watch, do_evict=do_evict):
            # Once every put is in and demotion has stopped: the jobs on disk, the binlog's
            # pages in the cache, then (cold) evicted, and the time that took.
            c = Client(("127.0.0.1", srv.port), timeout=HANG)
            try:
                last, since = None, now()
                while not stop.is_set():
                    e = {k2: int(v) for k2, v in stats_of(c, "stats-ext").items() if v.isdigit()}
                    cur = (e.get("cmd-put"), e.get("disk-tier-demotions"))
                    if cur != last:
                        last, since = cur, now()
                    elif e.get("cmd-put", 0) >= k and now() - since >= 0.5:
                        break
                    time.sleep(0.05)
                if stop.is_set():
                    return
                watch["cold_at_rest"] = e.get("disk-tier-cold-jobs")
                segs = srv.segments()
                watch["binlog_bytes"] = sum(os.path.getsize(p) for p in segs)
                watch["resident_before"] = resident_bytes(segs)
                if do_evict:
                    t = now()
                    evict(segs)
                    watch["evict_s"] = now() - t
                    watch["resident_after"] = resident_bytes(segs)
                watch["at_s"] = now() - t_start
            finally:
                c.close()
        th = threading.Thread(target=watcher)
        t_start = now()
        th.start()
        try:
            r = bench_run.loadgen(srv, "delayed", timeout=loadgen_timeout + 60,
                                  loadgen_timeout=120, jobs=k, spread=a.ontime_spread,
                                  delay=a.ontime_delay, conns=4, depth=100, consumers=4,
                                  reserves=256)
        finally:
            stop.set()
            th.join()
        e = srv.ext()
        r["watch"] = watch
        r["promotions"] = e.get("disk-tier-promotions")
        r["waited_reads"] = e.get("disk-tier-waited-reads")
        results[key] = r
        ctx.drop(srv)
    ctx.out["ontime"] = results

    def lat(key, q):
        v = bench_run.get(results[key], f"lateness_us.{q}")
        return None if v is None else v / 1e3

    def lat_lo(key, q):
        v = bench_run.get(results[key], f"lateness_vs_put_reply_us.{q}")
        return None if v is None else v / 1e3
    ks = ("ram", "warm", "cold")
    c = results["cold"]["watch"]
    rows = [
        ("jobs on disk once the puts were in", None, results["warm"]["watch"].get("cold_at_rest"),
         c.get("cold_at_rest"), f"≈ {k:,}"),
        ("binlog MiB in the page cache then → after the eviction (of the segments' MiB)", None,
         f"{(results['warm']['watch'].get('resident_before') or 0) / MB:.1f} "
         f"(of {(results['warm']['watch'].get('binlog_bytes') or 0) / MB:.0f})",
         f"{(c.get('resident_before') or 0) / MB:.1f} → {(c.get('resident_after') or 0) / MB:.1f} "
         f"(of {(c.get('binlog_bytes') or 0) / MB:.0f})", "0 after"),
        ("eviction done, s after the loadgen started", None, None, c.get("at_s"),
         f"< {a.ontime_delay - 2:g} (the lead: reads start 2 s before the deadlines)"),
        ("puts/s while putting", *[results[x].get("puts_per_s") for x in ks], ""),
        ("deadlines' spread ms", *[results[x].get("deadline_spread_ms") for x in ks], "≤ 1000"),
        ("jobs consumed / inserted", *[f"{results[x].get('consumed', 0):,} / "
                                       f"{results[x].get('inserted', 0):,}" for x in ks], "all"),
    ]
    for q, qn, tgt in (("p50_us", "p50", ""), ("p99_us", "p99", "≤ 100"),
                       ("p999_us", "p99.9", "≤ 1000"), ("max_us", "max", "")):
        rows.append((f"lateness {qn} ms", *[lat(x, q) for x in ks], tgt))
    rows += [
        ("lateness p99 / max ms from the put's reply (a lower bound)",
         *[f"{fmt(lat_lo(x, 'p99_us'))} / {fmt(lat_lo(x, 'max_us'))}" for x in ks], ""),
        ("jobs handed out per s after the first deadline",
         *[results[x].get("jobs_per_s_after_due") for x in ks], ""),
        ("server CPU (cores) from the first deadline to the last job",
         *[results[x].get("server_cpu_util_promotion") for x in ks], ""),
        ("promotions from disk / of them a command waited for", None,
         *[f"{results[x]['promotions']:,} / {results[x]['waited_reads']:,}"
           for x in ("warm", "cold")], ""),
    ]
    ctx.tables.append(table(
        f"On time from disk: {k:,} jobs due within {a.ontime_spread:g} s (put over "
        f"{a.ontime_spread:g} s with a delay of {a.ontime_delay:g} s), 4 consumers × 256 "
        "reserves waiting; each run on a fresh server; lateness is an upper bound (from the "
        "put's send) unless said", rows,
        cols=("all in memory", "tier, page cache", "tier, evicted")))


def part_restart(ctx):
    a = ctx.a
    n = a.jobs
    if ctx.filled is None:
        budget = budget_for(a, n)
        ram = None if a.tier_only else ctx.server("all in memory")
        tier = ctx.server("disk tier", ["--hot-memory", str(budget)])
        if ram:
            fill_mixed(ctx, ram, n, 0)
        fill_mixed(ctx, tier, n, budget)
    else:
        ram, tier, _ = ctx.filled
    out = {"ram": None}
    scale = a.target_jobs / n
    for key, srv in (("ram", ram), ("tier", tier)):
        if srv is None:
            continue
        before = srv.ext()
        o = out[key] = {"rss_before": srv.rss(), "jobs_before": before["current-jobs-ready"] +
                        before["current-jobs-delayed"]}
        # The binlog in the page cache, then not (both after a clean stop: from the tier's
        # checkpoint), then after a kill -9 (a replay), and, with --compare-binary, after
        # another kill -9 with that binary (say, the build before a change) on the same files.
        starts = [("warm", signal.SIGTERM, None), ("evicted", signal.SIGTERM, None),
                  ("killed", signal.SIGKILL, None)]
        if a.compare_binary:
            starts.append(("killed_compare", signal.SIGKILL, a.compare_binary))
        for cache, sig, binary in starts:
            srv.stop(sig)
            if cache == "evicted":
                segs = srv.segments()
                evict(segs)
                o["resident_at_start"] = resident_bytes(segs)
            own = srv.binary
            srv.binary = binary or own
            try:
                accept_s, reply_s = srv.start()
            finally:
                srv.binary = own
            t_up = now()
            if key == "tier":
                want = before["disk-tier-cold-jobs"]
                while now() - t_up < HANG:
                    if srv.ext()["disk-tier-cold-jobs"] >= want:
                        o[f"cold_back_s_{cache}"] = now() - t_up + reply_s
                        break
                    time.sleep(0.5)  # each poll walks the index (see settle)
                settle(srv, quiet_s=0.5)
            e = srv.ext()
            o[f"accept_s_{cache}"], o[f"reply_s_{cache}"] = accept_s, reply_s
            o[f"reply_at_target_s_{cache}"] = reply_s * scale
            o[f"hwm_{cache}"] = srv.hwm()
            o[f"rss_after_{cache}"] = srv.rss()
            o[f"jobs_{cache}"] = e["current-jobs-ready"] + e["current-jobs-delayed"]
        o["jobs"] = f"{o['jobs_warm']:,}, {o['jobs_evicted']:,} / {o['jobs_before']:,}"
        o["rss"] = f"{o['rss_before'] / MB:.0f} / {o['rss_after_warm'] / MB:.0f}"
    ctx.out["restart"] = out
    r, t = out["ram"], out["tier"]
    rows = [("jobs back (twice) / before", g(r, "jobs"), t["jobs"], "all")]
    whats = [("warm", "the binlog in the page cache"),
             ("evicted", "the binlog evicted from the page cache first"),
             ("killed", "after kill -9 (a replay, the binlog in the page cache)")]
    if a.compare_binary:
        whats.append(("killed_compare", f"after kill -9 with {a.compare_binary}"))
    for cache, what in whats:
        if f"reply_s_{cache}" not in t:
            continue
        rows += [
            (f"{what}: exec → first accepted connection s", g(r, f"accept_s_{cache}"),
             t[f"accept_s_{cache}"], ""),
            (f"{what}: exec → first reply s", g(r, f"reply_s_{cache}"), t[f"reply_s_{cache}"], ""),
            (f"{what}: the same extrapolated to {a.target_jobs:,} jobs s (linear)",
             g(r, f"reply_at_target_s_{cache}"), t[f"reply_at_target_s_{cache}"], "≤ 15"),
            (f"{what}: exec → as many jobs on disk as before s", None,
             t.get(f"cold_back_s_{cache}"), ""),
            (f"{what}: peak RSS during start-up (VmHWM) MiB", g(r, f"hwm_{cache}", MB),
             t[f"hwm_{cache}"] / MB, "no full restore"),
        ]
    rows += [("binlog MiB in the page cache at the second start (after the eviction)",
              g(r, "resident_at_start", MB), t["resident_at_start"] / MB, "0"),
             ("RSS before the restarts / after the first, once demoted again MiB", g(r, "rss"),
              t["rss"], "")]
    ctx.tables.append(table(
        f"Restart (SIGTERM, then exec) with {n:,} jobs in the binlog (the capacity shape)", rows))
    ctx.drop(*[s for s in (ram, tier) if s])
    ctx.filled = None


def wait_compaction(srv, quiet_s=1.5):
    """Polls `stats` (each poll is a loop iteration, and compaction moves up to 1000 jobs per
    Flush) until the binlog's segments and migrations are unchanged for quiet_s."""
    def fetch():
        s = stats_of(srv.client, "stats")
        return s["binlog-oldest-index"], s["binlog-current-index"], s["binlog-records-migrated"]
    return wait_quiet(fetch, quiet_s, interval=0.05)


def part_disk(ctx):
    a = ctx.a
    d = a.disk_jobs
    out = {}
    for key, label, extra in (("ram", "all in memory", []),
                              ("tier", "disk tier", ["--hot-memory", str(max(
                                  1 << 20, int(d * a.target_budget_bytes / a.target_jobs)))])):
        srv = ctx.server(label, extra)
        rng = random.Random(a.seed + 7)
        io0 = proc_io(srv.pid)
        mix = Mix(ready=0.0, seed=a.seed + 2)
        live = fill(srv, d, mix, a.fill_conns, collect_ids=True)["ids"]
        deletes = 0
        peak = srv.dir_bytes()[0]
        t0 = now()
        for _ in range(a.churn_rounds):
            k = int(len(live) * a.churn_fraction)
            rng.shuffle(live)
            gone, live = live[:k], live[k:]
            delete_ids(srv, gone, a.fill_conns)
            deletes += len(gone)
            live += fill(srv, k, mix, a.fill_conns, collect_ids=True)["ids"]
            peak = max(peak, srv.dir_bytes()[0])
        churn_s = now() - t0
        compact_s = wait_compaction(srv)
        io1 = proc_io(srv.pid)
        st = stats_of(srv.client, "stats")
        e = srv.ext()
        size, alloc = srv.dir_bytes()
        records = mix.record_bytes + deletes * DELETE_RECORD
        live_bytes = len(live) * (mix.record_bytes / mix.puts)
        out[key] = {"puts": mix.puts, "deletes": deletes, "live": len(live),
                    "jobs_in_server": e["current-jobs-delayed"] + e["current-jobs-ready"],
                    "record_bytes": records, "write_bytes": io1["write_bytes"] - io0["write_bytes"],
                    "wchar": io1["wchar"] - io0["wchar"], "live_bytes": live_bytes,
                    "binlog_size": size, "binlog_alloc": alloc, "churn_s": churn_s,
                    "binlog_peak": max(peak, size),
                    "compaction_quiet_after_s": compact_s,
                    "migrated": int(st["binlog-records-migrated"]),
                    "segments": len(srv.segments()), "cold": e.get("disk-tier-cold-jobs"),
                    # every segment made (numbered from 1) is filled with zeros ahead of its
                    # records by the sync thread (all but -F): written once more
                    "zero_fill": int(srv.segments()[-1].rsplit(".", 1)[1]) * a.segment_size,
                    "waited_reads": e.get("disk-tier-waited-reads")}
        ctx.drop(srv)
    ctx.out["disk"] = out
    r, t = out["ram"], out["tier"]
    ctx.tables.append(table(
        f"Disk: {d:,} delayed jobs (1 h–30 d), then {a.churn_rounds} rounds of deleting "
        f"{a.churn_fraction:.0%} of the live jobs and putting as many; segments of "
        f"{a.segment_size:,} B; compaction let run to the end", [
            ("puts / deletes", f"{r['puts']:,} / {r['deletes']:,}",
             f"{t['puts']:,} / {t['deletes']:,}", ""),
            ("jobs in the server at the end (on disk only, for the tier)",
             f"{r['jobs_in_server']:,}", f"{t['jobs_in_server']:,} ({t['cold'] or 0:,})",
             f"{r['live']:,}"),
            ("the commands' records MiB (full records of the puts + deletes)",
             r["record_bytes"] / MB, t["record_bytes"] / MB, ""),
            ("records moved by compaction", r["migrated"], t["migrated"], ""),
            ("written: /proc/PID/io write_bytes MiB", r["write_bytes"] / MB,
             t["write_bytes"] / MB, ""),
            ("write amplification (write_bytes ÷ the commands' records)",
             r["write_bytes"] / r["record_bytes"], t["write_bytes"] / t["record_bytes"], "≤ 2.5"),
            ("of it zeros the sync thread writes ahead of the records, at most: segments "
             "made × -s MiB", r["zero_fill"] / MB, t["zero_fill"] / MB, ""),
            ("live jobs' records MiB", r["live_bytes"] / MB, t["live_bytes"] / MB, ""),
            ("binlog segments' size MiB (allocated)",
             f"{r['binlog_size'] / MB:.0f} ({r['binlog_alloc'] / MB:.0f})",
             f"{t['binlog_size'] / MB:.0f} ({t['binlog_alloc'] / MB:.0f})", ""),
            ("live ÷ binlog size", r["live_bytes"] / r["binlog_size"],
             t["live_bytes"] / t["binlog_size"], "≥ 0.5"),
            ("binlog's largest size at a round's end MiB", r["binlog_peak"] / MB,
             t["binlog_peak"] / MB, ""),
            ("reads a command waited for (the deletes of jobs on disk)", None,
             t["waited_reads"], ""),
        ]))


# ------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--part", default=",".join(PARTS), help="comma-separated: " + ",".join(PARTS))
    ap.add_argument("--quick", action="store_true",
                    help="small sizes for a check that it runs (about a minute)")
    ap.add_argument("--jobs", type=int, default=2_000_000, help="capacity, restart: N (2,000,000)")
    ap.add_argument("--hot-memory", default=None,
                    help="capacity, restart: the tier's budget (suffixes K, M, G); default: "
                    "--target-budget × N / --target-jobs")
    ap.add_argument("--target-jobs", type=int, default=200_000_000)
    ap.add_argument("--target-budget", default="2G")
    ap.add_argument("--compare-binary", default=None,
                    help="restart: after the kill -9 start, one more kill -9 and a start of the "
                         "same files with this stalkd (say, the build before a change)")
    ap.add_argument("--tier-only", action="store_true",
                    help="capacity, restart: no all-in-memory server (at a scale it cannot hold)")
    ap.add_argument("--hotpath-jobs", type=int, default=None, help="hotpath: M (default N)")
    ap.add_argument("--cold-fraction", type=float, default=0.95)
    ap.add_argument("--rounds", type=int, default=2, help="hotpath: runs of each shape per server")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--ontime-jobs", type=int, default=1_000_000)
    ap.add_argument("--ontime-delay", type=float, default=15.0)
    ap.add_argument("--ontime-spread", type=float, default=1.0)
    ap.add_argument("--disk-jobs", type=int, default=None, help="disk: D (default N / 2)")
    ap.add_argument("--churn-rounds", type=int, default=8)
    ap.add_argument("--churn-fraction", type=float, default=0.25)
    ap.add_argument("--segment-size", type=int, default=10485760, help="-s of every server")
    ap.add_argument("--fill-conns", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tmp", default=None, help="where the binlog directories go")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "disk_tier.json"))
    a = ap.parse_args()
    if a.quick:
        a.jobs, a.ontime_jobs, a.duration, a.rounds = 200_000, 100_000, 2.0, 1
        a.ontime_delay = 10.0
    a.hotpath_jobs = a.hotpath_jobs or a.jobs
    a.disk_jobs = a.disk_jobs or a.jobs // 2
    a.hot_memory_bytes = parse_bytes(a.hot_memory) if a.hot_memory else 0
    a.target_budget_bytes = parse_bytes(a.target_budget)
    parts = [p for p in a.part.split(",") if p]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"unknown part(s) {bad}; choose from {','.join(PARTS)}")
    a.stalkd = os.environ.get("STALKD_BIN") or os.path.join(a.build, "stalkd")
    bench_run.CFG.loadgen = os.environ.get("LOADGEN_BIN") or bench_run.find_bin(
        "LOADGEN_BIN", [os.path.join(a.build, "bench", "stalkd_loadgen"),
                        os.path.join(a.build, "stalkd_loadgen")])
    bench_run.CFG.pin = {}
    for what, path in (("stalkd", a.stalkd), ("loadgen", bench_run.CFG.loadgen)):
        if not os.access(path, os.X_OK):
            ap.error(f"no {what} at {path} (build it, or set STALKD_BIN / LOADGEN_BIN)")
    signal.signal(signal.SIGINT, bench_run.stop_all)
    signal.signal(signal.SIGTERM, bench_run.stop_all)
    root = tempfile.mkdtemp(prefix="stalkd-disk-tier-bench-", dir=a.tmp)
    tempfile.tempdir = root  # every server's binlog directory goes there
    ctx = Ctx(a, root)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    head = (f"disk tier benchmark: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"commit {commit}, load average {os.getloadavg()[0]:.2f} at the start, parts "
            f"{','.join(parts)}")
    print(head, flush=True)
    loads = {"start": os.getloadavg()}
    t0 = now()
    failed = []
    try:
        for p in [p for p in PARTS if p in parts]:
            tp = now()
            loads[p] = os.getloadavg()
            try:
                globals()["part_" + p](ctx)
            except Exception as e:  # noqa: BLE001 (report it, stop its servers, go on)
                failed.append(f"{p}: {e!r}")
                print(f"\n{p} FAILED: {e!r}", flush=True)
                traceback.print_exc()
                for s in list(ctx.servers):
                    ctx.drop(s)
                ctx.filled = None
            print(f"({p}: {now() - tp:.0f} s, load average at its start "
                  f"{loads[p][0]:.2f})", flush=True)
    finally:
        for s in list(ctx.servers):
            ctx.drop(s)
        shutil.rmtree(root, ignore_errors=True)
    loads["end"] = os.getloadavg()
    print(f"\nwhole run {now() - t0:.0f} s; load average at the end {loads['end'][0]:.2f}")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"head": head, "args": {k: v for k, v in vars(a).items()}, "loadavg": loads,
                   "failed": failed, "results": ctx.out, "tables": ctx.tables}, f, indent=1,
                  default=str)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""stalkd benchmark suite: stalkd vs Debian's beanstalkd (vs the one-thread ceiling server).

Builds nothing. Usage:

    python3 bench/run.py [BUILD_DIR] [--quick] [--scenario NAME[,NAME...]] [--pairs N]

BUILD_DIR defaults to build/release. Binaries (override with env):
    STALKD_BIN      BUILD_DIR/stalkd (or --stalkd-bin)
    LOADGEN_BIN     BUILD_DIR/bench/stalkd_loadgen (or BUILD_DIR/stalkd_loadgen)
    CEILING_BIN     BUILD_DIR/bench/stalkd_ceiling (or BUILD_DIR/stalkd_ceiling)
    BEANSTALKD_BIN  /usr/bin/beanstalkd
--baseline PATH runs another stalkd build (e.g. the commit before a fix) as a further server in
every pair, with stalkd's arguments, and adds a stalkd/baseline ratio column.
If stalkd is missing, beanstalkd runs in its place ("stand-in"); the stalkd/beanstalkd ratio is
then the noise floor of the machine.

Every run gets a fresh server on a free 127.0.0.1 port; servers are alternated A B (C) A B (C)
for --pairs rounds and stopped by PID. Results: markdown tables on stdout and
bench/results/latest.json (+ latest.md). Exit status 1 if any run failed.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")
NOFILE = 65536  # RLIMIT_NOFILE for the servers (the conns scenario opens 10k connections)


# ------------------------------------------------------------------------------------------------
# Servers

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raise_nofile():
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def _child_setup(role):
    """preexec_fn of a server ("server") or the load generator ("loadgen"): raises the fd
    limit and, with --pin, keeps the process on its own CPU."""
    def setup():
        _raise_nofile()
        cpu = getattr(CFG, "pin", {}).get(role)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
    return setup


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime (fields 14, 15)


def proc_faults(pid, tid=None):
    """Page faults (minor + major) of a process, or of one of its threads (tid; the main
    thread, which runs stalkd's loop, is tid == pid): fields 10 and 12 of its stat file."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[7]) + int(fields[9])


def faults_around(srv, fn):
    """Runs fn(); returns (its result, page faults the server's loop thread took meanwhile,
    page faults its other threads took): the loop's own first touches of fresh memory are
    what stalls it while the job count grows, the others' (the heap prefaulter's) are not."""
    loop0, all0 = proc_faults(srv.pid, srv.pid), proc_faults(srv.pid)
    out = fn()
    loop1, all1 = proc_faults(srv.pid, srv.pid), proc_faults(srv.pid)
    if None in (loop0, all0, loop1, all1):
        return out, None, None
    return out, loop1 - loop0, (all1 - all0) - (loop1 - loop0)


def machine_busy_s():
    """CPU seconds the whole machine has spent busy (all CPUs; /proc/stat's first line:
    everything but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / CLK_TCK  # user nice system idle iowait irq softirq steal


def proc_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


LIVE = []  # every Server started and not yet stopped (stopped again at exit / on signal)


class Server:
    """One server process on 127.0.0.1:<free port>.

    args may contain '{tmpdir}', replaced by a per-server temporary directory that survives
    restart() (extension point for durable -b runs and recovery scenarios), and
    '{http_port}' / '{admin_port}', replaced at each start by free ports (stalkd's --http and
    --admin-http; then http_port / admin_port hold them, and start() waits for them too)."""

    def __init__(self, kind, binary, args=(), label=None):
        self.kind = kind
        self.binary = binary
        self.label = label or kind
        self.tmpdir = tempfile.mkdtemp(prefix=f"stalkd-bench-{kind}-") if any(
            "{tmpdir}" in a for a in args) else None
        self.args = [a.replace("{tmpdir}", self.tmpdir or "") for a in args]
        self.proc = None
        self.port = None
        self.http_port = None
        self.admin_port = None
        self.log = None

    @property
    def pid(self):
        return self.proc.pid

    def start(self):
        self.port = free_port()
        ports = [self.port]

        def another():
            while True:
                p = free_port()
                if p not in ports:
                    ports.append(p)
                    return p
        args = list(self.args)
        self.http_port = another() if any("{http_port}" in a for a in args) else None
        self.admin_port = another() if any("{admin_port}" in a for a in args) else None
        args = [a.replace("{http_port}", str(self.http_port))
                 .replace("{admin_port}", str(self.admin_port)) for a in args]
        self.log = tempfile.TemporaryFile()
        argv = [self.binary, "-l", "127.0.0.1", "-p", str(self.port)] + args
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, preexec_fn=_child_setup("server"))
        LIVE.append(self)
        deadline = time.monotonic() + 10
        pending = list(ports)  # the text port first, then the HTTP listeners
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited at start-up: {self.log_tail()}")
            try:
                while pending:
                    socket.create_connection(("127.0.0.1", pending[0]), timeout=0.5).close()
                    pending.pop(0)
                return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.label} did not accept connections within 10 s")

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, sig)
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        if self in LIVE:
            LIVE.remove(self)

    def restart(self, sig=signal.SIGTERM):
        """Stop (SIGTERM, or SIGKILL for a crash) and start again with the same args/tmpdir."""
        self.stop(sig)
        return self.start()

    def cleanup(self):
        self.stop()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        if self.log:
            self.log.close()

    def log_tail(self, n=400):
        if not self.log:
            return ""
        self.log.seek(0)
        return self.log.read()[-n:].decode(errors="replace")

    def cpu_s(self):
        return proc_cpu_s(self.pid)

    def rss(self):
        return proc_rss(self.pid)


def start_busy(n):
    """n processes spinning on the CPU (--busy), process i pinned to CPU i mod the CPU count."""
    procs = []
    for i in range(n):
        p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        procs.append(p)
        try:
            os.sched_setaffinity(p.pid, {i % (os.cpu_count() or 1)})
        except OSError:
            pass
    return procs


def stop_busy(procs):
    for p in procs:
        p.kill()
        p.wait()


def stop_all(*_):
    for s in list(LIVE):
        s.stop(signal.SIGKILL)
    if _:
        sys.exit(130)


# ------------------------------------------------------------------------------------------------
# Load generator

class LoadgenError(RuntimeError):
    pass


def loadgen(server, scenario, timeout=300, loadgen_timeout=None, **opts):
    """Runs one loadgen scenario against server; returns its JSON plus run-level server CPU.

    timeout bounds the subprocess; loadgen_timeout, when given, is passed as the loadgen's own
    --timeout (which otherwise defaults to 120 s). port: another of the server's ports than the
    text one (its http_port)."""
    port = opts.pop("port", None) or server.port
    argv = [CFG.loadgen, "--scenario", scenario, "--host", "127.0.0.1", "--port", str(port),
            "--pid", str(server.pid)]
    if loadgen_timeout is not None:
        argv += ["--timeout", str(loadgen_timeout)]
    for k, v in opts.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    cpu0, t0 = server.cpu_s(), time.monotonic()
    busy0, lg0 = machine_busy_s(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           preexec_fn=_child_setup("loadgen"))
    except subprocess.TimeoutExpired:
        raise LoadgenError(f"loadgen {scenario} timed out after {timeout} s")
    wall = time.monotonic() - t0
    busy1, lg1 = machine_busy_s(), resource.getrusage(resource.RUSAGE_CHILDREN)
    alive = server.proc.poll() is None
    cpu1 = server.cpu_s() if alive else float("nan")
    try:
        out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise LoadgenError(f"loadgen {scenario}: no JSON (exit {p.returncode}): "
                           f"{p.stderr.decode(errors='replace')[-300:]}")
    if "error" in out:
        extra = "" if alive else f" (server died: {server.log_tail()})"
        raise LoadgenError(f"loadgen {scenario}: {out['error']}{extra}")
    out["run_wall_s"] = wall
    out["run_server_cpu_s"] = cpu1 - cpu0  # whole loadgen run, incl. set-up and warm-up
    # The machine's load meanwhile: all CPUs' busy time, and what is left of it after the
    # server and the loadgen (other processes, and kernel threads), in cores.
    lg_cpu = (lg1.ru_utime + lg1.ru_stime) - (lg0.ru_utime + lg0.ru_stime)
    out["run_machine_busy_cores"] = (busy1 - busy0) / wall
    out["run_others_cores"] = max(0.0, (busy1 - busy0) - (cpu1 - cpu0) - lg_cpu) / wall
    return out


def get(d, path, default=None):
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return default
        d = d[part]
    return d


def ms(v):
    return None if v is None else v / 1e3


# ------------------------------------------------------------------------------------------------
# Scenarios. Each function takes (server, params) and returns (metrics, raw): metrics is a flat
# {metric_key: number or None}. METRICS lists (key, label) in table order; labels end in
# "↑" (higher is better) or "↓" (lower is better) where that is meaningful.

def sc_cycle(srv, p):
    r = loadgen(srv, "cycle", conns=p["conns"], duration=p["duration"], warmup=p["warmup"],
                size=p["size"])
    m = {k: r.get(k) for k in ("ops_per_s", "cycles_per_s", "server_cpu_us_per_op",
                               "server_cpu_util", "loadgen_cpu_util")}
    for cmd in ("put", "reserve", "delete"):
        for q in ("p50", "p99", "p999"):
            m[f"{cmd}_{q}_us"] = get(r, f"latency_us.{cmd}.{q}_us")
    m["max_us"] = max(get(r, f"latency_us.{c}.max_us", 0) for c in ("put", "reserve", "delete"))
    m["errors"] = r.get("errors")
    return m, r


def sc_recovery(srv, p):
    """Fill a binlog, kill -9 the server, and time its restart until it answers a command."""
    f = loadgen(srv, "fill", jobs=p["jobs"], size=p["size"], conns=p["conns"], depth=p["depth"],
                timeout=p["timeout"])
    n = f.get("inserted") or 0
    srv.stop(signal.SIGKILL)
    t0 = time.monotonic()
    srv.start()  # returns once the port accepts connections
    with socket.create_connection(("127.0.0.1", srv.port), timeout=p["timeout"]) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while True:  # "OK <n>\r\n" then n bytes of YAML and "\r\n"
            head, sep, _ = data.partition(b"\r\n")
            if sep and len(data) >= len(head) + 2 + int(head.split()[1]) + 2:
                break
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    first_reply_s = time.monotonic() - t0
    ready = None
    for line in data.split(b"\n"):
        if line.startswith(b"current-jobs-ready: "):
            ready = int(line.split()[1])
    m = {"restart_s": first_reply_s, "jobs_back": ready,
         "rss_after_mb": srv.rss() / 2**20, "errors": (f.get("errors") or 0) + (ready != n)}
    return m, {"fill": f, "stats": data.decode(errors="replace")}


METRICS_RECOVERY = [("restart_s", "kill -9, restart: s until the first reply ↓"),
                    ("jobs_back", "jobs ready after the restart"),
                    ("rss_after_mb", "RSS after the restart MiB ↓"), ("errors", "errors")]


METRICS_CYCLE = [
    ("ops_per_s", "commands/s ↑"), ("cycles_per_s", "put+reserve+delete cycles/s ↑"),
    ("server_cpu_us_per_op", "server CPU µs/command ↓"), ("server_cpu_util", "server CPU (cores)"),
    ("loadgen_cpu_util", "loadgen CPU (cores)"),
] + [(f"{c}_{q}_us", f"{c} {q.replace('p999', 'p99.9')} µs ↓")
     for c in ("put", "reserve", "delete") for q in ("p50", "p99", "p999")] + [
    ("max_us", "max latency µs ↓"), ("errors", "errors")]


def sc_pipeline(srv, p):
    r = loadgen(srv, "pipeline", conns=p["conns"], depth=p["depth"], duration=p["duration"],
                warmup=p["warmup"], mode=p["mode"], size=p["size"])
    m = {k: r.get(k) for k in ("ops_per_s", "server_cpu_us_per_op", "server_cpu_util",
                               "loadgen_cpu_util", "errors")}
    m["batch_p50_ms"] = ms(get(r, "batch_latency_us.p50_us"))
    m["batch_p99_ms"] = ms(get(r, "batch_latency_us.p99_us"))
    return m, r


METRICS_PIPELINE = [
    ("ops_per_s", "commands/s ↑"), ("server_cpu_us_per_op", "server CPU µs/command ↓"),
    ("server_cpu_util", "server CPU (cores)"), ("loadgen_cpu_util", "loadgen CPU (cores)"),
    ("batch_p50_ms", "batch of K round trip p50 ms ↓"),
    ("batch_p99_ms", "batch of K round trip p99 ms ↓"), ("errors", "errors")]


def sc_fill(srv, p):
    rss_idle = srv.rss()
    f = loadgen(srv, "fill", jobs=p["jobs"], size=p["size"], conns=p["conns"], depth=p["depth"],
                timeout=p["timeout"])
    time.sleep(0.2)
    rss_full = srv.rss()
    d = loadgen(srv, "drain", conns=p["conns"], depth=p["depth"], timeout=p["timeout"])
    time.sleep(0.2)
    rss_drained = srv.rss()
    n = f.get("inserted") or 0
    m = {
        "puts_per_s": f.get("puts_per_s"),
        "fill_cpu_us": f.get("server_cpu_us_per_op"),
        "rss_per_job": (rss_full - f["rss_before"]) / n if n else None,
        "rss_idle_mb": rss_idle / 2**20,
        "rss_full_mb": rss_full / 2**20,
        "drain_per_s": d.get("jobs_per_s"),
        "drain_cpu_us": d.get("server_cpu_us_per_job"),
        "rss_drained_mb": rss_drained / 2**20,
        "drained": d.get("deleted"),
        "errors": (f.get("errors") or 0) + (d.get("errors") or 0),
    }
    return m, {"fill": f, "drain": d, "rss_idle": rss_idle, "rss_full": rss_full,
               "rss_drained": rss_drained}


METRICS_FILL = [
    ("puts_per_s", "fill: puts/s ↑"), ("fill_cpu_us", "fill: server CPU µs/put ↓"),
    ("rss_per_job", "RSS bytes/job ↓"), ("rss_idle_mb", "RSS empty MiB ↓"),
    ("rss_full_mb", "RSS full MiB ↓"), ("drain_per_s", "drain: reserve+delete jobs/s ↑"),
    ("drain_cpu_us", "drain: server CPU µs/job ↓"), ("rss_drained_mb", "RSS after drain MiB ↓"),
    ("drained", "jobs drained"), ("errors", "errors")]


def sc_prodcons(srv, p):
    common = dict(producers=p["producers"], consumers=p["consumers"], duration=p["duration"],
                  warmup=p["warmup"], size=p["size"], window=p["window"])
    mx = loadgen(srv, "prodcons", rate=0, **common)
    srv.restart()  # leftover backlog must not leak into the rate-limited run
    rt = loadgen(srv, "prodcons", rate=p["rate"], **common)
    m = {
        "max_jobs_per_s": mx.get("jobs_per_s"),
        "max_cpu_us": mx.get("server_cpu_us_per_op"),
        "max_e2e_p50_ms": ms(get(mx, "e2e_latency_us.p50_us")),
        "max_e2e_p99_ms": ms(get(mx, "e2e_latency_us.p99_us")),
        "rate_jobs_per_s": rt.get("jobs_per_s"),
        "rate_cpu_us": rt.get("server_cpu_us_per_op"),
        "rate_e2e_p50_us": get(rt, "e2e_latency_us.p50_us"),
        "rate_e2e_p99_us": get(rt, "e2e_latency_us.p99_us"),
        "rate_e2e_p999_us": get(rt, "e2e_latency_us.p999_us"),
        "rate_e2e_max_us": get(rt, "e2e_latency_us.max_us"),
        "rate_skipped": rt.get("skipped_puts"),
        "errors": (mx.get("errors") or 0) + (rt.get("errors") or 0),
    }
    return m, {"max": mx, "rate": rt}


def metrics_prodcons(p):
    w, r = p["window"], int(p["rate"])
    return [
        ("max_jobs_per_s", f"max: jobs/s (backlog ≤ {w}) ↑"),
        ("max_cpu_us", "max: server CPU µs/job ↓"),
        ("max_e2e_p50_ms", "max: end-to-end p50 ms ↓"), ("max_e2e_p99_ms", "max: end-to-end p99 ms ↓"),
        ("rate_jobs_per_s", f"@{r}/s: jobs/s"), ("rate_cpu_us", f"@{r}/s: server CPU µs/job ↓"),
        ("rate_e2e_p50_us", f"@{r}/s: end-to-end p50 µs ↓"),
        ("rate_e2e_p99_us", f"@{r}/s: end-to-end p99 µs ↓"),
        ("rate_e2e_p999_us", f"@{r}/s: end-to-end p99.9 µs ↓"),
        ("rate_e2e_max_us", f"@{r}/s: end-to-end max µs ↓"),
        ("rate_skipped", f"@{r}/s: puts skipped (backlog full) ↓"), ("errors", "errors")]


def sc_tubes(srv, p):
    levels = p["levels"]
    budget = p["level_budget"]
    total_budget = sum(budget + 30 + p["warmup"] + p["duration"] for _ in levels)
    r = loadgen(srv, "tubes", levels=",".join(map(str, levels)), conns=p["conns"],
                duration=p["duration"], warmup=p["warmup"], size=p["size"], level_budget=budget,
                timeout=total_budget)
    m = {"errors": r.get("errors")}
    rss1 = get(r, f"levels.{levels[0]}.rss")
    for lv in levels:
        x = get(r, f"levels.{lv}", {})
        reached = x.get("reached", False)
        m[f"ops_{lv}"] = x.get("ops_per_s") if reached else None
        m[f"ratio_{lv}"] = x.get("ratio_to_first_level") if reached else None
        m[f"cpu_{lv}"] = x.get("server_cpu_us_per_op") if reached else None
        m[f"p99_{lv}"] = get(x, "latency_us.put.p99_us") if reached else None
        m[f"setup_{lv}"] = x.get("setup_s")
        if not reached and x:
            m[f"reached_{lv}"] = x.get("tubes_created")
        elif reached:
            m[f"reached_{lv}"] = lv
        if reached and lv > levels[0] and rss1:
            m[f"rss_per_tube_{lv}"] = (x["rss"] - rss1) / (lv - levels[0])
    return m, r


def metrics_tubes(p):
    out = []
    for lv in p["levels"]:
        out += [(f"ops_{lv}", f"{lv} tubes: commands/s ↑"),
                (f"ratio_{lv}", f"{lv} tubes: ops/s ÷ ops/s at {p['levels'][0]} ↑"),
                (f"cpu_{lv}", f"{lv} tubes: server CPU µs/command ↓"),
                (f"p99_{lv}", f"{lv} tubes: put p99 µs ↓"),
                (f"setup_{lv}", f"{lv} tubes: set-up s ↓ (budget {p['level_budget']} s)"),
                (f"reached_{lv}", f"{lv} tubes: tubes created")]
        if lv != p["levels"][0]:
            out.append((f"rss_per_tube_{lv}", f"{lv} tubes: RSS bytes/tube (2 jobs each) ↓"))
    return out + [("errors", "errors")]


def sc_conns(srv, p):
    r = loadgen(srv, "conns", idle=p["idle"], conns=p["conns"], duration=p["duration"],
                warmup=p["warmup"], size=p["size"])
    m = {
        "bytes_per_idle": r.get("bytes_per_idle_conn"),
        "ops_without": r.get("ops_per_s_without_idle"),
        "ops_with": r.get("ops_per_s_with_idle"),
        "with_over_without": r.get("with_over_without"),
        "p99_without": get(r, "without_idle.latency_us.put.p99_us"),
        "p99_with": get(r, "with_idle.latency_us.put.p99_us"),
        "open_s": r.get("idle_open_s"),
        "errors": r.get("errors"),
    }
    return m, r


def metrics_conns(p):
    n, c = p["idle"], p["conns"]
    return [("bytes_per_idle", f"RSS bytes per idle connection ↓"),
            ("ops_without", f"{c} active: commands/s without idle ↑"),
            ("ops_with", f"{c} active: commands/s with {n} idle ↑"),
            ("with_over_without", "with ÷ without ↑"),
            ("p99_without", "put p99 µs without idle ↓"), ("p99_with", "put p99 µs with idle ↓"),
            ("open_s", f"time to open {n} connections s ↓"), ("errors", "errors")]


def sc_delayed(srv, p):
    extra = {k: p[k] for k in ("consumed_every", "probe_ms") if p.get(k)}
    r, loop_faults, other_faults = faults_around(srv, lambda: loadgen(
        srv, "delayed", jobs=p["jobs"], spread=p["spread"], delay=p["delay"],
        conns=p["conns"], depth=p["depth"], consumers=p["consumers"],
        reserves=p["reserves"], size=p["size"], timeout=p["timeout"],
        loadgen_timeout=p["loadgen_timeout"], **extra))
    m = {
        "late_p50_ms": ms(get(r, "lateness_us.p50_us")),
        "late_p99_ms": ms(get(r, "lateness_us.p99_us")),
        "late_max_ms": ms(get(r, "lateness_us.max_us")),
        "late_lo_p99_ms": ms(get(r, "lateness_vs_put_reply_us.p99_us")),
        "late_rx_p99_ms": ms(get(r, "lateness_rx_us.p99_us")),
        "late_rx_lo_p99_ms": ms(get(r, "lateness_rx_vs_put_reply_us.p99_us")),
        "late_lo_max_ms": ms(get(r, "lateness_vs_put_reply_us.max_us")),
        "late_rx_max_ms": ms(get(r, "lateness_rx_us.max_us")),
        "min_late_ms": r.get("min_lateness_ms"),
        "early": r.get("early"),
        "probe_before_p99": get(r, "probe_before_us.p99_us"),
        "probe_p99": get(r, "probe_during_us.p99_us"),
        "probe_max": get(r, "probe_during_us.max_us"),
        "probe_k_p99": get(r, "probe_during_kernel_us.p99_us"),
        "probe_k_max": get(r, "probe_during_kernel_us.max_us"),
        "spread_ms": r.get("deadline_spread_ms"),
        "puts_per_s": r.get("puts_per_s"),
        "put_p99": get(r, "put_latency_us.p99_us"),
        "put_max_ms": ms(get(r, "put_latency_us.max_us")),
        "probe_put_max_ms": ms(get(r, "probe_put_phase_us.max_us")),
        "loop_faults": loop_faults,
        "other_faults": other_faults,
        "overlap_ms": r.get("put_overlaps_deadlines_ms"),
        "promotion_ms": r.get("promotion_done_after_last_deadline_ms"),
        "jobs_per_s": r.get("jobs_per_s_after_due"),
        "srv_cpu": r.get("server_cpu_util_promotion"),
        "lg_cpu": r.get("loadgen_cpu_util_promotion"),
        "errors": (r.get("errors") or 0) + (get(r, "probe.errors") or 0),
    }
    return m, r


def metrics_delayed(p):
    k = p["consumers"] * p["reserves"]
    return [("late_p50_ms", "lateness p50 ms ↓"), ("late_p99_ms", "lateness p99 ms ↓"),
            ("late_max_ms", "lateness max ms ↓"),
            ("late_lo_p99_ms", "lateness p99 against put reply + delay (lower bound) ms ↓"),
            ("late_rx_p99_ms", "lateness p99, kernel receive stamp (server's send) ms ↓"),
            ("late_rx_lo_p99_ms", "lateness p99, kernel stamps, against put reply (lower bound) ms ↓"),
            ("late_lo_max_ms", "lateness max against put reply + delay (lower bound) ms ↓"),
            ("late_rx_max_ms", "lateness max, kernel receive stamp ms ↓"),
            ("min_late_ms", "lateness min ms ↓"), ("early", "jobs reserved before due ↓"),
            ("probe_before_p99", "stats probe p99 µs before due ↓"),
            ("probe_p99", "stats probe p99 µs during promotion ↓"),
            ("probe_max", "stats probe max µs during promotion ↓"),
            ("probe_k_p99", "stats probe p99 µs during promotion, kernel stamps ↓"),
            ("probe_k_max", "stats probe max µs during promotion, kernel stamps ↓"),
            ("spread_ms", f"spread of the deadlines ms (target {p['spread'] * 1000:.0f})"),
            ("puts_per_s", f"puts/s (target {p['jobs'] / p['spread']:.0f}) ↑"),
            ("put_p99", "put p99 µs (uncertainty of a deadline) ↓"),
            ("put_max_ms", "put max ms (a late put makes its deadline late too) ↓"),
            ("probe_put_max_ms", "stats probe max ms while the jobs are put ↓"),
            ("loop_faults", "server's loop thread: page faults over the run ↓"),
            ("other_faults", "server's other threads: page faults over the run"),
            ("overlap_ms", "puts still running after the first deadline ms ↓"),
            ("promotion_ms", "all promoted, ms after the last deadline ↓"),
            ("jobs_per_s", f"jobs/s consumed after due ({k} reserves waiting) ↑"),
            ("srv_cpu", "server CPU util during promotion"),
            ("lg_cpu", "loadgen CPU util during promotion"),
            ("errors", "errors")]


def sc_mass(srv, p):
    r = loadgen(srv, "mass", jobs=p["jobs"], size=p["size"], timeout=p["timeout"])
    m = {
        "kick_ms": get(r, "kick.kick_ms"),
        "kick_probe_p99": get(r, "kick.probe_during_us.p99_us"),
        "kick_probe_max": get(r, "kick.probe_during_us.max_us"),
        "kick_probe_k_max": get(r, "kick.probe_during_kernel_us.max_us"),
        "release_ms": get(r, "close.release_ms"),
        "close_probe_p99": get(r, "close.probe_during_us.p99_us"),
        "close_probe_max": get(r, "close.probe_during_us.max_us"),
        "close_probe_k_max": get(r, "close.probe_during_kernel_us.max_us"),
        "probe_idle_p99": get(r, "kick.probe_before_us.p99_us"),
        "setup_s": r.get("setup_s"),
        "errors": r.get("errors"),
    }
    return m, r


def metrics_mass(p):
    n = p["jobs"]
    return [("kick_ms", f"kick {n} buried: command ms ↓"),
            ("kick_probe_p99", "  stats probe p99 µs meanwhile ↓"),
            ("kick_probe_max", "  stats probe max µs meanwhile ↓"),
            ("kick_probe_k_max", "  stats probe max µs meanwhile, kernel stamps ↓"),
            ("release_ms", f"close with {n} reserved: ms until all released ↓"),
            ("close_probe_p99", "  stats probe p99 µs meanwhile ↓"),
            ("close_probe_max", "  stats probe max µs meanwhile ↓"),
            ("close_probe_k_max", "  stats probe max µs meanwhile, kernel stamps ↓"),
            ("probe_idle_p99", "stats probe p99 µs when quiet ↓"),
            ("setup_s", f"set-up: put+reserve+bury ×{n} s ↓"), ("errors", "errors")]


def _lifecycle_metrics(r):
    return {
        "gone_ms": r.get("gone_ms"),
        "jobs_per_s": r.get("jobs_per_s"),
        "probe_p99": get(r, "probe_during_us.p99_us"),
        "probe_max": get(r, "probe_during_us.max_us"),
        "probe_k_p99": get(r, "probe_during_kernel_us.p99_us"),
        "probe_k_max": get(r, "probe_during_kernel_us.max_us"),
        "probe_idle_p99": get(r, "probe_before_us.p99_us"),
        "srv_cpu_s": r.get("server_cpu_s"),
    }


def sc_lifecycle(srv, p, scenario):
    """expire / purge: stalkd expires (purges) N jobs; beanstalkd, which has neither TTLs nor
    purge, gets the same N jobs deleted by id from one pipelining client (--mode delete).
    stalkd then also runs the delete variant on a fresh server, for a like-for-like row."""
    common = dict(jobs=p["jobs"], size=p["size"], conns=p["conns"], depth=p["depth"],
                  timeout=p["timeout"], loadgen_timeout=p["loadgen_timeout"])
    native = srv.kind == "stalkd" and not CFG.standin
    if native:
        extra = {"delay": p["delay"]} if scenario == "expire" else {}
        r = loadgen(srv, scenario, mode="ttl" if scenario == "expire" else "purge", **common,
                    **extra)
        srv.restart()
        d = loadgen(srv, scenario, mode="delete", **common)
    else:
        r = d = loadgen(srv, scenario, mode="delete", **common)
    m = _lifecycle_metrics(r)
    m.update({"del_" + k: v for k, v in _lifecycle_metrics(d).items()
              if k in ("gone_ms", "jobs_per_s", "probe_p99", "probe_max", "probe_k_max")})
    m["fill_s"] = r.get("fill_s")
    if scenario == "expire":
        m["spread_ms"] = r.get("deadline_spread_ms") if native else None
        m["after_last_ms"] = r.get("gone_after_last_deadline_ms") if native else None
        m["overlap_ms"] = r.get("fill_overlaps_deadlines_ms") if native else None
    m["completed"] = int(bool(r.get("completed")) and bool(d.get("completed")))
    m["errors"] = sum((x.get("errors") or 0) + (get(x, "probe.errors") or 0)
                      for x in ((r, d) if native else (r,)))
    return m, ({"native": r, "delete": d} if native else {"delete": d})


def sc_expire(srv, p):
    return sc_lifecycle(srv, p, "expire")


def sc_purge(srv, p):
    return sc_lifecycle(srv, p, "purge")


def metrics_lifecycle(p, scenario):
    n, k = p["jobs"], p["depth"]
    what = "expiry" if scenario == "expire" else "purge"
    start = "the first deadline" if scenario == "expire" else "the purge's send"
    out = [("gone_ms", f"{what} (beanstalkd: deletes): ms from {start} (first delete) until "
            "none is ready ↓"),
           ("jobs_per_s", "  jobs gone per s ↑"),
           ("probe_p99", "  stats probe p99 µs meanwhile ↓"),
           ("probe_max", "  stats probe max µs meanwhile ↓ (target ≤ 5000)"),
           ("probe_k_p99", "  stats probe p99 µs meanwhile, kernel stamps ↓"),
           ("probe_k_max", "  stats probe max µs meanwhile, kernel stamps ↓"),
           ("srv_cpu_s", "  server CPU s meanwhile ↓"),
           ("probe_idle_p99", "stats probe p99 µs when quiet ↓")]
    if scenario == "expire":
        out += [("spread_ms", "stalkd: deadlines spread over ms (≤ 1000 + put max)"),
                ("after_last_ms", "stalkd: all expired, ms after the last deadline ↓"),
                ("overlap_ms", "stalkd: fill still running after the first deadline ms ↓")]
    out += [("del_gone_ms", f"both: {n} deletes by id, {k} in flight: ms until none is "
             "ready ↓"),
            ("del_jobs_per_s", "  jobs deleted per s ↑"),
            ("del_probe_p99", "  stats probe p99 µs meanwhile ↓"),
            ("del_probe_max", "  stats probe max µs meanwhile ↓"),
            ("del_probe_k_max", "  stats probe max µs meanwhile, kernel stamps ↓"),
            ("fill_s", f"set-up: {n} puts ({p['conns']} connections, window {k}) s ↓"),
            ("completed", "completed"), ("errors", "errors")]
    return out


def sc_grow(srv, p):
    """N puts without deletes; put latency per segment (per million for 10M), stats probe."""
    r, loop_faults, other_faults = faults_around(srv, lambda: loadgen(
        srv, "grow", timeout=p["timeout"] + 60, loadgen_timeout=p["timeout"],
        jobs=p["jobs"], size=p["size"], conns=p["conns"], depth=p["depth"],
        segments=p["segments"]))
    time.sleep(0.2)
    rss_full = srv.rss()
    n = r.get("inserted") or 0
    m = {
        "puts_per_s": r.get("puts_per_s"),
        "cpu_us": r.get("server_cpu_us_per_op"),
        "p99_ms": ms(get(r, "put_latency_us.p99_us")),
        "p999_ms": ms(get(r, "put_latency_us.p999_us")),
        "max_ms": ms(get(r, "put_latency_us.max_us")),
        # job counts at the slowest put and the slowest stats reply (the JSON lists ten each)
        "max_at_job": (r.get("slowest_puts") or [{}])[0].get("at_job"),
        "probe_max_at_job": (r.get("slowest_probes") or [{}])[0].get("jobs_ready"),
        "probe_p99_ms": ms(get(r, "probe_us.p99_us")),
        "probe_max_ms": ms(get(r, "probe_us.max_us")),
        "probe_k_max_ms": ms(get(r, "probe_kernel_us.max_us")),
        "probe_slow": r.get("probe_replies_over_100ms"),
        "loop_faults": loop_faults,
        "other_faults": other_faults,
        "rss_per_job": (rss_full - r["rss_before"]) / n if n and r.get("rss_before", -1) >= 0
        else None,
        "rss_full_mb": rss_full / 2**20,
        "timed_out": int(bool(r.get("timed_out"))),
        "errors": (r.get("errors") or 0) + (get(r, "probe.errors") or 0),
    }
    segs = r.get("segments") or {}
    for i in range(grow_segments(p)[1]):
        x = segs.get(str(i), {})
        m[f"seg{i}_p999_ms"] = ms(get(x, "latency_us.p999_us"))
        m[f"seg{i}_max_ms"] = ms(get(x, "latency_us.max_us"))
        m[f"seg{i}_probe_max_ms"] = ms(get(x, "probe_us.max_us"))
    last = segs.get(str(len(segs) - 1), {}) if segs else {}
    m["last_puts_per_s"] = last.get("puts_per_s") if last.get("to") == p["jobs"] else None
    return m, r


def grow_segments(p):
    """(jobs per segment, number of segments), as the loadgen computes them."""
    n = p["jobs"]
    k = min(max(p["segments"], 1), n)
    seg = -(-n // k)
    return seg, -(-n // seg)


def count_label(n):
    for div, suffix in ((1_000_000, "M"), (1000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


def metrics_grow(p):
    seg, k = grow_segments(p)
    out = [("puts_per_s", "puts/s ↑"), ("last_puts_per_s", "puts/s in the last segment ↑"),
           ("cpu_us", "server CPU µs/put ↓"), ("p99_ms", "put p99 ms, all puts ↓"),
           ("p999_ms", "put p99.9 ms, all puts ↓"), ("max_ms", "put max ms, all puts ↓"),
           ("max_at_job", "jobs held at the slowest put"),
           ("probe_max_at_job", "jobs ready at the slowest stats reply")]
    for i in range(k):
        a, b = count_label(i * seg), count_label(min(p["jobs"], (i + 1) * seg))
        out += [(f"seg{i}_p999_ms", f"puts {a}–{b}: put p99.9 ms ↓"),
                (f"seg{i}_max_ms", f"puts {a}–{b}: put max ms ↓"),
                (f"seg{i}_probe_max_ms", f"puts {a}–{b}: stats probe max ms ↓")]
    return out + [
        ("probe_p99_ms", "stats probe p99 ms, whole fill ↓"),
        ("probe_max_ms", "stats probe max ms, whole fill ↓"),
        ("probe_k_max_ms", "stats probe max ms, whole fill, kernel stamps ↓"),
        ("probe_slow", "stats probe replies ≥ 100 ms ↓"),
        ("loop_faults", "server's loop thread: page faults over the fill ↓"),
        ("other_faults", "server's other threads (heap prefaulter): page faults"),
        ("rss_per_job", "RSS bytes/job at the end ↓"), ("rss_full_mb", "RSS full MiB ↓"),
        ("timed_out", f"timed out ({p['timeout']} s)"), ("errors", "errors")]


# ------------------------------------------------------------------------------------------------
# HTTP (issue 13): stalkd's lmstfy API against its own text protocol, on the same build and in
# the same run. Each run does both, each on a fresh server, in alternating order (text first
# in the first pair, HTTP first in the next, ...), so that a drift of the machine's load
# falls on both.

HTTP_ARGS = {"stalkd": ["--http", "127.0.0.1:{http_port}", "--admin-http", "127.0.0.1:{admin_port}"]}
_HTTP_ORDER = {}  # scenario name -> runs so far (which protocol goes first)


def http_token(srv, ns):
    """A token of namespace ns, from the admin listener (POST /token/:ns)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{srv.admin_port}/token/{ns}?description=bench", method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["token"]


def text_and_http(name, srv, text_fn, http_fn):
    """Runs text_fn(srv) and http_fn(srv) on fresh servers, in alternating order; returns
    (text result, HTTP result, which went first)."""
    if CFG.standin:
        raise RuntimeError("needs stalkd (beanstalkd has no HTTP API)")
    n = _HTTP_ORDER.get(name, 0)
    _HTTP_ORDER[name] = n + 1
    order = ("text", "http") if n % 2 == 0 else ("http", "text")
    out = {}
    for i, which in enumerate(order):
        if i:
            srv.restart()
        out[which] = text_fn(srv) if which == "text" else http_fn(srv)
    return out["text"], out["http"], order[0]


def _ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def sc_http_cycle(srv, p):
    common = dict(conns=p["conns"], duration=p["duration"], warmup=p["warmup"], size=p["size"])
    t, h, first = text_and_http(
        "http-cycle", srv, lambda s: loadgen(s, "cycle", **common),
        lambda s: loadgen(s, "http-cycle", port=s.http_port, token=http_token(s, p["ns"]),
                          ns=p["ns"], ttr=p["ttr"], **common))
    # cpu_ratio: the throughput ratio the two would have if the server were the bottleneck
    # (one core each), whatever limits the closed loop here
    m = {"ratio": _ratio(h.get("ops_per_s"), t.get("ops_per_s")),
         "cpu_ratio": _ratio(t.get("server_cpu_us_per_op"), h.get("server_cpu_us_per_op")),
         "http_first": int(first == "http")}
    for pre, r, verbs in (("text", t, ("put", "reserve", "delete")),
                          ("http", h, ("publish", "consume", "ack"))):
        m[f"{pre}_ops"] = r.get("ops_per_s")
        m[f"{pre}_cycles"] = r.get("cycles_per_s")
        m[f"{pre}_cpu_us"] = r.get("server_cpu_us_per_op")
        m[f"{pre}_srv_util"] = r.get("server_cpu_util")
        m[f"{pre}_lg_util"] = r.get("loadgen_cpu_util")
        m[f"{pre}_lg_us"] = (r["loadgen_cpu_util"] / r["ops_per_s"] * 1e6
                             if r.get("loadgen_cpu_util") and r.get("ops_per_s") else None)
        for v in verbs:
            for q in ("p50", "p99"):
                m[f"{pre}_{v}_{q}"] = get(r, f"latency_us.{v}.{q}_us")
        m[f"{pre}_max"] = max(get(r, f"latency_us.{v}.max_us", 0) for v in verbs)
    m["http_no_job"] = h.get("no_job")
    m["http_others"], m["text_others"] = h.get("run_others_cores"), t.get("run_others_cores")
    m["errors"] = (t.get("errors") or 0) + (h.get("errors") or 0)
    return m, {"text": t, "http": h, "first": first}


METRICS_HTTP_CYCLE = (
    [("http_ops", "HTTP: requests/s (publish, consume, ack) ↑"),
     ("text_ops", "text: commands/s (put, reserve, delete) ↑"),
     ("ratio", "HTTP requests/s ÷ text commands/s ↑ (target ≥ 0.5)"),
     ("http_cycles", "HTTP: cycles/s ↑"), ("text_cycles", "text: cycles/s ↑"),
     ("http_cpu_us", "HTTP: server CPU µs/request ↓"),
     ("text_cpu_us", "text: server CPU µs/command ↓"),
     ("cpu_ratio", "server CPU per command ÷ per request (the ratio if the server were the "
      "bottleneck) ↑"),
     ("http_lg_us", "HTTP: loadgen CPU µs/request ↓"),
     ("text_lg_us", "text: loadgen CPU µs/command ↓"),
     ("http_srv_util", "HTTP: server CPU (cores)"), ("http_lg_util", "HTTP: loadgen CPU (cores)"),
     ("text_srv_util", "text: server CPU (cores)"), ("text_lg_util", "text: loadgen CPU (cores)")]
    + [(f"http_{v}_{q}", f"HTTP: {v} {q} µs ↓") for v in ("publish", "consume", "ack")
       for q in ("p50", "p99")]
    + [("http_max", "HTTP: max latency µs ↓")]
    + [(f"text_{v}_{q}", f"text: {v} {q} µs ↓") for v in ("put", "reserve", "delete")
       for q in ("p50", "p99")]
    + [("text_max", "text: max latency µs ↓"),
       ("http_no_job", "HTTP: consumes answered 404 ↓"),
       ("http_others", "HTTP: other processes' CPU meanwhile (cores)"),
       ("text_others", "text: other processes' CPU meanwhile (cores)"),
       ("http_first", "HTTP ran first"), ("errors", "errors")])


def sc_http_longpoll(srv, p):
    common = dict(conns=p["conns"], jobs=p["jobs"], idle_s=p["idle_s"], gap_ms=p["gap_ms"],
                  lp_timeout=p["lp_timeout"], size=p["size"], loadgen_timeout=p["timeout"],
                  timeout=p["timeout"] * 2 + 30)
    t, h, first = text_and_http(
        "http-longpoll", srv,
        lambda s: loadgen(s, "longpoll", proto="text", text_port=s.port, **common),
        lambda s: loadgen(s, "longpoll", proto="http", port=s.http_port, text_port=s.port,
                          token=http_token(s, p["ns"]), ns=p["ns"], **common))
    m = {"http_first": int(first == "http")}
    for pre, r in (("http", h), ("text", t)):
        m[f"{pre}_idle_cpu_ms"] = (get(r, "idle.server_cpu_util") or 0) * 1e3 \
            if get(r, "idle.server_cpu_util") is not None else None
        m[f"{pre}_idle_ctx"] = get(r, "idle.server_ctx_switches_per_s")
        for q in ("p50", "p99", "max"):
            m[f"{pre}_wake_{q}"] = get(r, f"wake_us.{q}_us")
            m[f"{pre}_wake_k_{q}"] = get(r, f"wake_kernel_us.{q}_us")
        m[f"{pre}_pub_p99"] = get(r, "publish_us.p99_us")
        m[f"{pre}_cpu_pub"] = r.get("server_cpu_us_per_publish")
        m[f"{pre}_bytes"] = r.get("bytes_per_waiting_consumer")
        m[f"{pre}_setup_s"] = r.get("setup_s")
        m[f"{pre}_served"] = r.get("consumers_served")
        m[f"{pre}_waiting_end"] = r.get("waiting_at_end")
        m[f"{pre}_timeouts"] = r.get("timeouts")
        m[f"{pre}_others"] = r.get("run_others_cores")
    m["wake_ratio_p99"] = _ratio(m["http_wake_p99"], m["text_wake_p99"])
    m["errors"] = sum((r.get("errors") or 0) + (get(r, "probe.errors") or 0) for r in (t, h))
    return m, {"text": t, "http": h, "first": first}


def metrics_http_longpoll(p):
    n, j = p["conns"], p["jobs"]
    out = []
    for pre, what in (("http", f"HTTP (GET ?timeout={p['lp_timeout']})"),
                      ("text", f"text (reserve-with-timeout {p['lp_timeout']})")):
        target_cpu = " (target ≈ 0)" if pre == "http" else ""
        target_wake = " (target ≤ 1000)" if pre == "http" else ""
        out += [(f"{pre}_idle_cpu_ms", f"{what}: server CPU ms/s while {n} wait{target_cpu} ↓"),
                (f"{pre}_idle_ctx", f"{what}: server context switches/s while they wait ↓"),
                (f"{pre}_wake_p50", f"{what}: publish → consumer has the job p50 µs ↓"),
                (f"{pre}_wake_p99", f"{what}: … p99 µs{target_wake} ↓"),
                (f"{pre}_wake_max", f"{what}: … max µs ↓"),
                (f"{pre}_wake_k_p50", f"{what}: … kernel stamps p50 µs ↓"),
                (f"{pre}_wake_k_p99", f"{what}: … kernel stamps p99 µs ↓"),
                (f"{pre}_wake_k_max", f"{what}: … kernel stamps max µs ↓"),
                (f"{pre}_pub_p99", f"{what}: publish answered p99 µs ↓"),
                (f"{pre}_cpu_pub", f"{what}: server CPU µs per publish (+ deliver, ack, re-wait) ↓"),
                (f"{pre}_bytes", f"{what}: RSS bytes per waiting consumer ↓"),
                (f"{pre}_setup_s", f"{what}: s until all {n} wait ↓"),
                (f"{pre}_served", f"{what}: distinct consumers served ({j} publishes)"),
                (f"{pre}_waiting_end", f"{what}: current-waiting at the end (= {n})"),
                (f"{pre}_timeouts", f"{what}: waits that timed out ↓"),
                (f"{pre}_others", f"{what}: other processes' CPU meanwhile (cores)")]
    return out + [("wake_ratio_p99", "wake-up p99 HTTP ÷ text ↓"),
                  ("http_first", "HTTP ran first"), ("errors", "errors")]


def sc_http_idle(srv, p):
    common = dict(conns=p["conns"], idle_s=p["idle_s"], loadgen_timeout=p["timeout"],
                  timeout=p["timeout"] + 30)
    t, h, first = text_and_http(
        "http-idle", srv, lambda s: loadgen(s, "idle", proto="text", **common),
        lambda s: loadgen(s, "idle", proto="http", port=s.http_port,
                          token=http_token(s, p["ns"]), ns=p["ns"], **common))
    m = {"http_bytes": h.get("bytes_per_conn"), "text_bytes": t.get("bytes_per_conn"),
         "ratio": _ratio(h.get("bytes_per_conn"), t.get("bytes_per_conn")),
         "http_idle_cpu_ms": (get(h, "idle.server_cpu_util") or 0) * 1e3,
         "text_idle_cpu_ms": (get(t, "idle.server_cpu_util") or 0) * 1e3,
         "http_idle_ctx": get(h, "idle.server_ctx_switches_per_s"),
         "text_idle_ctx": get(t, "idle.server_ctx_switches_per_s"),
         "http_open_s": h.get("open_s"), "text_open_s": t.get("open_s"),
         "http_first": int(first == "http"),
         "http_others": h.get("run_others_cores"), "text_others": t.get("run_others_cores"),
         "errors": (t.get("errors") or 0) + (h.get("errors") or 0)}
    return m, {"text": t, "http": h, "first": first}


def metrics_http_idle(p):
    n = p["conns"]
    return [("http_bytes", f"HTTP: RSS bytes per idle keep-alive connection (after a consume → 404) ↓"),
            ("text_bytes", f"text: RSS bytes per idle connection (after list-tube-used) ↓"),
            ("ratio", "HTTP ÷ text ↓"),
            ("http_idle_cpu_ms", f"HTTP: server CPU ms/s with {n} idle ↓"),
            ("text_idle_cpu_ms", f"text: server CPU ms/s with {n} idle ↓"),
            ("http_idle_ctx", "HTTP: server context switches/s meanwhile ↓"),
            ("text_idle_ctx", "text: server context switches/s meanwhile ↓"),
            ("http_open_s", f"HTTP: s to open {n} and make a request on each ↓"),
            ("text_open_s", f"text: s to open {n} and make a request on each ↓"),
            ("http_others", "HTTP: other processes' CPU meanwhile (cores)"),
            ("text_others", "text: other processes' CPU meanwhile (cores)"),
            ("http_first", "HTTP ran first"), ("errors", "errors")]


class Scenario:
    def __init__(self, name, title, fn, metrics, full, quick, servers=("stalkd", "beanstalkd"),
                 server_args=None, default=True):
        self.name, self.title, self.fn = name, title, fn
        self.metrics = metrics  # list, or function(params) -> list
        self.full, self.quick = full, quick
        self.servers = servers
        # Extension point: extra server arguments per kind, e.g. {"stalkd": ["-b", "{tmpdir}"]}
        self.server_args = server_args or {}
        self.default = default


ALL3 = ("stalkd", "beanstalkd", "ceiling")
# Shared by two scenarios each: delayed-mix and delayed-beside-bulk (which puts through 64 in
# flight per connection), grow-64 and grow-10m.
DELAYED_MIX = dict(jobs=1_000_000, spread=10, delay=14, conns=4, depth=100, consumers=2,
                   reserves=1, consumed_every=100, size=100, timeout=180, loadgen_timeout=60)
DELAYED_MIX_QUICK = dict(DELAYED_MIX, jobs=20_000, spread=1, delay=2, timeout=60,
                         loadgen_timeout=20)
GROW_64 = dict(jobs=10_000_000, size=100, conns=4, depth=64, segments=10, timeout=400)
GROW_64_QUICK = dict(GROW_64, jobs=200_000, timeout=60)
SCENARIOS = [
    Scenario("cycle", "cycle: {conns} connections each looping put({size} B) → reserve → delete",
             sc_cycle, METRICS_CYCLE,
             dict(conns=50, size=100, warmup=1, duration=5),
             dict(conns=50, size=100, warmup=0.3, duration=1), servers=ALL3),
    Scenario("pipeline", "pipeline: {conns} connections each writing {depth} commands before "
             "reading the replies (mode {mode}: K puts, K reserves, K deletes)",
             sc_pipeline, METRICS_PIPELINE,
             dict(conns=4, depth=100, mode="pdr", size=100, warmup=1, duration=4),
             dict(conns=4, depth=100, mode="pdr", size=100, warmup=0.3, duration=1), servers=ALL3),
    Scenario("fill", "fill: {jobs} puts of {size} B ({conns} connections, window {depth}), "
             "then drain with reserve-with-timeout 0 + delete",
             sc_fill, METRICS_FILL,
             dict(jobs=1_000_000, size=100, conns=4, depth=100, timeout=240),
             dict(jobs=20_000, size=100, conns=4, depth=100, timeout=60)),
    Scenario("prodcons", "produce-consume: {producers} producers, {consumers} consumers on one "
             "tube, closed loop (backlog ≤ {window}) and open loop at {rate} jobs/s",
             sc_prodcons, metrics_prodcons,
             dict(producers=4, consumers=8, window=1000, rate=10000, size=100, warmup=0.5,
                  duration=3),
             dict(producers=4, consumers=8, window=1000, rate=5000, size=100, warmup=0.2,
                  duration=0.8)),
    Scenario("tubes", "tubes: levels {levels} tubes, each with a ready and a delayed job, then "
             "{conns} connections cycling on another tube",
             sc_tubes, metrics_tubes,
             dict(levels=[1, 1000, 10_000, 100_000], level_budget=25, conns=50, size=100,
                  warmup=0.5, duration=2),
             dict(levels=[1, 1000, 10_000], level_budget=10, conns=50, size=100, warmup=0.2,
                  duration=0.6)),
    Scenario("conns", "conns: {idle} idle connections beside {conns} active cycling ones",
             sc_conns, metrics_conns,
             dict(idle=10_000, conns=10, size=100, warmup=0.5, duration=2),
             dict(idle=2_000, conns=10, size=100, warmup=0.2, duration=0.6), servers=ALL3),
    Scenario("delayed", "delayed: {jobs} jobs put at a steady rate over {spread} s with delay "
             "{delay} s (deadlines spread over {spread} s), {consumers} consumers with {reserves} "
             "reserves pipelined each, stats probe every 1 ms",
             sc_delayed, metrics_delayed,
             dict(jobs=1_000_000, spread=10, delay=14, conns=4, depth=100, consumers=4,
                  reserves=256, size=100, timeout=180, loadgen_timeout=60),
             dict(jobs=20_000, spread=1, delay=2, conns=4, depth=100, consumers=4,
                  reserves=256, size=100, timeout=60, loadgen_timeout=20)),
    # The same with a consumed tube beside a bulk tube: 1 job in {consumed_every} goes to the
    # tube that {consumers} consumers wait on (one reserve each), the rest to one nobody
    # consumes; lateness is that of the consumed jobs.
    Scenario("delayed-mix", "delayed, consumed tube beside a bulk tube: {jobs} jobs falling due over "
             "{spread} s (delay {delay} s), 1 in {consumed_every} in the tube that {consumers} "
             "consumers wait on with {reserves} reserve each, the rest in a tube nobody consumes",
             sc_delayed, metrics_delayed, DELAYED_MIX, DELAYED_MIX_QUICK),
    # Opt-in (20 s a run): one job at a time, put with a delay while a consumer waits, as a
    # user tries it; what the server's sleep until a far deadline costs.
    Scenario("delayed-one", "delayed, one at a time: {jobs} jobs put over {spread} s (one every "
             "1.5 s, between deadlines) with delay {delay} s while {consumers} consumer waits "
             "with {reserves} reserve; no stats probe (its requests would wake the server)",
             sc_delayed, metrics_delayed,
             dict(jobs=20, spread=30, delay=1, conns=1, depth=1, consumers=1, reserves=1,
                  size=100, probe_ms=600_000, timeout=60, loadgen_timeout=50),
             dict(jobs=4, spread=6, delay=1, conns=1, depth=1, consumers=1, reserves=1,
                  size=100, probe_ms=600_000, timeout=30, loadgen_timeout=20),
             default=False),
    Scenario("mass", "mass events: kick of {jobs} buried jobs; close of a connection holding "
             "{jobs} reserved jobs; stats probe every 1 ms",
             sc_mass, metrics_mass,
             dict(jobs=100_000, size=100, timeout=120),
             dict(jobs=5_000, size=100, timeout=30)),
    # Lifecycle extensions (issue 12). beanstalkd has no TTL and no purge: its runs delete the
    # same jobs by id from one pipelining client, and stalkd runs that too (the del_ rows).
    Scenario("expire", "expire: {jobs} jobs put with a TTL chosen so that all fall due within "
             "1 s, {delay} s after the fill starts; beanstalkd (no TTL): {jobs} pipelined deletes "
             "instead; stats probe every 1 ms",
             sc_expire, lambda p: metrics_lifecycle(p, "expire"),
             dict(jobs=1_000_000, delay=5, size=100, conns=4, depth=100, timeout=120,
                  loadgen_timeout=60),
             dict(jobs=20_000, delay=2, size=100, conns=4, depth=100, timeout=60,
                  loadgen_timeout=20)),
    Scenario("purge", "purge: {jobs} ready jobs, then `purge default ready`; beanstalkd (no "
             "purge): {jobs} pipelined deletes instead; stats probe every 1 ms",
             sc_purge, lambda p: metrics_lifecycle(p, "purge"),
             dict(jobs=1_000_000, size=100, conns=4, depth=100, timeout=120,
                  loadgen_timeout=60),
             dict(jobs=20_000, size=100, conns=4, depth=100, timeout=60,
                  loadgen_timeout=20)),
    # Durable mode (opt-in; run with --scenario cycle-b,cycle-f0,cycle-F) and recovery: a
    # scenario fn gets the Server and can call srv.restart(signal.SIGKILL) to crash and
    # restart it on the same {tmpdir} binlog, then time how long until it accepts and serves.
    Scenario("cycle-b", "cycle with binlog (-b, default fsync policy): {conns} connections "
             "put({size} B) → reserve → delete",
             sc_cycle, METRICS_CYCLE,
             dict(conns=50, size=100, warmup=1, duration=5),
             dict(conns=50, size=100, warmup=0.3, duration=1),
             server_args={"stalkd": ["-b", "{tmpdir}"], "beanstalkd": ["-b", "{tmpdir}"]},
             default=False),
    Scenario("cycle-f0", "cycle with binlog and fsync before every reply (-b -f 0): {conns} "
             "connections put({size} B) → reserve → delete",
             sc_cycle, METRICS_CYCLE,
             dict(conns=50, size=100, warmup=1, duration=5),
             dict(conns=50, size=100, warmup=0.3, duration=1),
             server_args={"stalkd": ["-b", "{tmpdir}", "-f", "0"],
                          "beanstalkd": ["-b", "{tmpdir}", "-f", "0"]},
             default=False),
    Scenario("cycle-F", "cycle with binlog, never fsync (-b -F): {conns} connections "
             "put({size} B) → reserve → delete",
             sc_cycle, METRICS_CYCLE,
             dict(conns=50, size=100, warmup=1, duration=5),
             dict(conns=50, size=100, warmup=0.3, duration=1),
             server_args={"stalkd": ["-b", "{tmpdir}", "-F"], "beanstalkd": ["-b", "{tmpdir}", "-F"]},
             default=False),
    Scenario("recovery", "recovery: {jobs} jobs of {size} B in the binlog (-b -F), kill -9, "
             "restart",
             sc_recovery, METRICS_RECOVERY,
             dict(jobs=1_000_000, size=100, conns=4, depth=100, timeout=240),
             dict(jobs=20_000, size=100, conns=4, depth=100, timeout=60),
             server_args={"stalkd": ["-b", "{tmpdir}", "-F"], "beanstalkd": ["-b", "{tmpdir}", "-F"]},
             default=False),
    # Opt-in: 10M jobs take ~2.4 GB (stalkd) / ~3 GB (beanstalkd) of RAM and a few minutes.
    # beanstalkd rehashes its job hash table whenever it holds 4x its size (~49k, 98k, ...,
    # 3.1M, 6.3M jobs) and stalls meanwhile; stalkd's id table never rehashes. beanstalkd's
    # ready heap is also an array that doubles at 2^22 and 2^23 jobs (see README).
    Scenario("grow", "grow: {jobs} puts of {size} B without deletes ({conns} connections, "
             "window {depth}), put latency per {segments}th, stats probe every 1 ms",
             sc_grow, metrics_grow,
             dict(jobs=10_000_000, size=100, conns=4, depth=100, segments=10, timeout=400),
             dict(jobs=200_000, size=100, conns=4, depth=100, segments=10, timeout=60),
             default=False),
    # Issue 16's shape (finding 6): 4 connections x 64 puts in flight; targets put max <= 10 ms,
    # stats max <= 5 ms. The JSON lists the ten slowest puts and stats replies with job counts.
    Scenario("grow-64", "grow, issue 16's shape: {jobs} puts of {size} B without deletes "
             "({conns} connections × {depth} in flight), stats probe every 1 ms "
             "(targets: put max ≤ 10 ms, stats max ≤ 5 ms)",
             sc_grow, metrics_grow, GROW_64, GROW_64_QUICK, default=False),
    Scenario("grow-64-b", "grow, issue 16's shape with the binlog (-b, never fsync: -F): {jobs} "
             "puts of {size} B without deletes ({conns} connections × {depth} in flight), "
             "stats probe every 1 ms",
             sc_grow, metrics_grow,
             dict(jobs=10_000_000, size=100, conns=4, depth=64, segments=10, timeout=400),
             dict(jobs=200_000, size=100, conns=4, depth=64, segments=10, timeout=60),
             server_args={"stalkd": ["-b", "{tmpdir}", "-F"], "beanstalkd": ["-b", "{tmpdir}", "-F"]},
             default=False),
    # The two shapes of an independent check, as it stated them (opt-in, ~3 min and ~8 min
    # with beanstalkd): 1,000,000 delayed jobs falling due over 10 s, 1 in 100 in a tube two
    # consumers wait on with `reserve`, the rest in a bulk tube nobody reserves, puts through
    # 4 connections x 64 in flight (target: consumed lateness p99 <= 1 ms, stats max <= 5 ms);
    # 10,000,000 puts of 100 B without deletes through 4 connections x 64 in flight, no -b
    # (targets: slowest put <= 10 ms, stats max <= 5 ms).
    Scenario("delayed-beside-bulk", "delayed beside a bulk tube: {jobs} jobs falling due over "
             "{spread} s (delay {delay} s, puts through {conns} connections × {depth} in flight), "
             "1 in {consumed_every} in the tube that {consumers} consumers wait on with "
             "`reserve`, the rest in a bulk tube nobody reserves; stats probe every 1 ms "
             "(targets: lateness p99 ≤ 1 ms, stats max ≤ 5 ms)",
             sc_delayed, metrics_delayed, dict(DELAYED_MIX, depth=64),
             dict(DELAYED_MIX_QUICK, depth=64), default=False),
    Scenario("grow-10m", "growing to {jobs} jobs: {jobs} puts of {size} B without deletes "
             "({conns} connections × {depth} in flight, no -b), stats probe every 1 ms "
             "(targets: slowest put ≤ 10 ms, stats max ≤ 5 ms)",
             sc_grow, metrics_grow, GROW_64, GROW_64_QUICK, default=False),
    # HTTP (issue 13): stalkd only; each run measures the text protocol and the HTTP API on
    # fresh servers of the same build, alternating which goes first.
    Scenario("http-cycle", "HTTP cycle: {conns} keep-alive connections each looping publish "
             "({size} B) → consume (?ttr={ttr}) → ack, against the text cycle put → reserve → "
             "delete on {conns} connections",
             sc_http_cycle, METRICS_HTTP_CYCLE,
             dict(conns=50, size=100, ttr=30, ns="bench", warmup=1, duration=5),
             dict(conns=50, size=100, ttr=30, ns="bench", warmup=0.3, duration=1),
             servers=("stalkd",), server_args=HTTP_ARGS),
    Scenario("http-longpoll", "HTTP long poll: {conns} consumers waiting (GET ?timeout="
             "{lp_timeout}; text: reserve-with-timeout {lp_timeout}), {idle_s} s idle, then "
             "{jobs} publishes of {size} B one at a time ({gap_ms} ms apart)",
             sc_http_longpoll, metrics_http_longpoll,
             dict(conns=10_000, jobs=1000, idle_s=3, gap_ms=2, lp_timeout=30, size=100,
                  ns="bench", timeout=60),
             dict(conns=300, jobs=50, idle_s=0.5, gap_ms=2, lp_timeout=30, size=100,
                  ns="bench", timeout=20),
             servers=("stalkd",), server_args=HTTP_ARGS),
    Scenario("http-idle", "HTTP idle connections: {conns} keep-alive HTTP connections after one "
             "request each, against {conns} text connections after one command each",
             sc_http_idle, metrics_http_idle,
             dict(conns=10_000, idle_s=2, ns="bench", timeout=60),
             dict(conns=500, idle_s=0.5, ns="bench", timeout=20),
             servers=("stalkd",), server_args=HTTP_ARGS),
]
# Issue 15, opt-in: stalkd's Redis store (redis-cycle, redis-pipeline, redis-memory,
# redis-failover); they start their own Redis processes (bench/redis_bench.py).
sys.path.insert(0, HERE)
import redis_bench  # noqa: E402
SCENARIOS += redis_bench.scenarios(sys.modules[__name__])
# Opt-in: the web dashboard with 100,000 tubes (bench/dashboard_bench.py).
import dashboard_bench  # noqa: E402
SCENARIOS += dashboard_bench.scenarios(sys.modules[__name__])


# ------------------------------------------------------------------------------------------------
# Running and reporting

class Config:
    pass


CFG = Config()


def find_bin(env, candidates):
    if os.environ.get(env):
        return os.environ[env]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return candidates[0]


def fmt(v):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


def summarize(values):
    vals = [v for v in values if isinstance(v, (int, float)) and v == v]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals),
            "values": vals}


def table(sc, params, runs, server_labels):
    metrics = sc.metrics(params) if callable(sc.metrics) else sc.metrics
    servers = [s for s in scenario_servers(sc) if s in server_labels]
    lines = [f"### {sc.title.format(**{k: v for k, v in params.items()})}", ""]
    head = ["metric"] + [server_labels[s] for s in servers]
    ratios = [b for b in ("beanstalkd", "baseline") if "stalkd" in servers and b in servers]
    head += [f"stalkd/{b}" for b in ratios]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    summary = {}
    for key, label in metrics:
        row = [label]
        med = {}
        for s in servers:
            st = summarize([r["metrics"].get(key) for r in runs if r["server"] == s])
            summary.setdefault(key, {})[s] = st
            if st is None:
                row.append("—")
                continue
            med[s] = st["median"]
            if st["n"] > 1:
                row.append(f"{fmt(st['median'])} ({fmt(st['min'])}–{fmt(st['max'])})")
            else:
                row.append(fmt(st["median"]))
        for other in ratios:
            a, b = med.get("stalkd"), med.get(other)
            row.append(f"{a / b:.2f}" if a is not None and b else "—")
        lines.append("| " + " | ".join(row) + " |")
    failed = [r for r in runs if r.get("error")]
    for r in failed:
        lines.append(f"\n**failed run** ({r['server']}, pair {r['pair']}): {r['error']}")
    return "\n".join(lines) + "\n", summary


def scenario_servers(sc):
    """sc.servers, with the baseline (another stalkd build) right after stalkd."""
    out = []
    for kind in sc.servers:
        out.append(kind)
        if kind == "stalkd":
            out.append("baseline")
    return out


def run_scenario(sc, params, pairs, bins):
    runs = []
    for pair in range(pairs):
        for kind in scenario_servers(sc):
            if kind not in bins:
                continue
            binary, label = bins[kind]
            # the baseline is a stalkd: same arguments, same scenario behaviour
            as_kind = "stalkd" if kind == "baseline" else kind
            srv = Server(as_kind, binary, sc.server_args.get(as_kind, ()), label=label)
            t0 = time.monotonic()
            rec = {"server": kind, "pair": pair, "bin_mtime": os.stat(binary).st_mtime,
                   "loadavg": os.getloadavg()}
            try:
                if CFG.standin and kind == "stalkd" and any(
                        "{http_port}" in a for a in sc.server_args.get(kind, ())):
                    raise RuntimeError("needs stalkd (beanstalkd, standing in, has no HTTP API)")
                srv.start()
                rec["rss_start"] = srv.rss()
                rec["metrics"], rec["raw"] = sc.fn(srv, params)
            except (LoadgenError, RuntimeError, OSError) as e:
                rec["metrics"], rec["error"] = {}, str(e)
            finally:
                srv.cleanup()
            rec["seconds"] = round(time.monotonic() - t0, 2)
            status = "FAILED: " + rec["error"] if rec.get("error") else "ok"
            print(f"  [{sc.name}] pair {pair + 1}/{pairs} {label}: {rec['seconds']} s {status} "
                  f"(load average {rec['loadavg'][0]:.2f} at the start)",
                  file=sys.stderr, flush=True)
            runs.append(rec)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_dir", nargs="?", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 1 pair (CI smoke, < 60 s)")
    ap.add_argument("--scenario", action="append", default=[],
                    help="scenario name(s), comma-separated or repeated; default: all default "
                    "ones (" + ", ".join(s.name for s in SCENARIOS if s.default) + "); opt-in: "
                    + ", ".join(s.name for s in SCENARIOS if not s.default))
    ap.add_argument("--pairs", type=int, help="rounds of A B (C) runs (default 3, --quick 1)")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the ceiling server")
    ap.add_argument("--stalkd-bin", metavar="PATH", help="the stalkd to measure (as STALKD_BIN)")
    ap.add_argument("--baseline", metavar="PATH",
                    help="another stalkd build to run beside stalkd in every pair (same "
                    "arguments), e.g. the commit before a fix")
    ap.add_argument("--baseline-label", default="stalkd baseline", metavar="TEXT",
                    help="its column's heading")
    ap.add_argument("--pin", metavar="S,L",
                    help="run the servers on CPU S and the load generator on CPU L")
    ap.add_argument("--no-beanstalkd", action="store_true",
                    help="skip beanstalkd (e.g. to compare stalkd with --baseline only)")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="keep N busy-loop processes running (process i pinned to CPU i mod the "
                    "CPU count) for the whole run, to measure on a saturated machine")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latest.json"))
    args = ap.parse_args()

    CFG.pin = {}
    if args.pin:
        s_cpu, l_cpu = (int(x) for x in args.pin.split(","))
        CFG.pin = {"server": s_cpu, "loadgen": l_cpu}
    bd = os.path.abspath(args.build_dir)
    CFG.loadgen = find_bin("LOADGEN_BIN", [os.path.join(bd, "bench", "stalkd_loadgen"),
                                           os.path.join(bd, "stalkd_loadgen")])
    ceiling = find_bin("CEILING_BIN", [os.path.join(bd, "bench", "stalkd_ceiling"),
                                       os.path.join(bd, "stalkd_ceiling")])
    stalkd = args.stalkd_bin or find_bin("STALKD_BIN", [os.path.join(bd, "stalkd")])
    beanstalkd = os.environ.get("BEANSTALKD_BIN", "/usr/bin/beanstalkd")
    for what, path in (("loadgen", CFG.loadgen), ("beanstalkd", beanstalkd)):
        if not os.access(path, os.X_OK):
            sys.exit(f"run.py: {what} not found at {path} (build bench/ first, or set the env var)")

    standin = not os.access(stalkd, os.X_OK)
    CFG.standin = standin
    bins = {"beanstalkd": (beanstalkd, "beanstalkd")}
    if standin:
        print(f"run.py: WARNING: {stalkd} not found; beanstalkd stands in for stalkd "
              "(the ratio column is then the noise floor)", file=sys.stderr)
        bins["stalkd"] = (beanstalkd, "stalkd (stand-in: beanstalkd)")
    else:
        bins["stalkd"] = (stalkd, "stalkd")
    if args.baseline:
        if not os.access(args.baseline, os.X_OK):
            sys.exit(f"run.py: baseline not found at {args.baseline}")
        bins["baseline"] = (os.path.abspath(args.baseline), args.baseline_label)
    if not args.no_ceiling and os.access(ceiling, os.X_OK):
        bins["ceiling"] = (ceiling, "ceiling")
    if args.no_beanstalkd and not standin:
        del bins["beanstalkd"]

    names = [n for a in args.scenario for n in a.split(",") if n]
    known = {s.name: s for s in SCENARIOS}
    for n in names:
        if n not in known:
            sys.exit(f"run.py: unknown scenario {n!r}; known: {', '.join(known)}")
    selected = [known[n] for n in names] if names else [s for s in SCENARIOS if s.default]
    pairs = args.pairs or (1 if args.quick else 3)

    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, stop_all)

    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(), "quick": args.quick, "pairs": pairs,
        "stalkd_bin": stalkd, "stalkd_is_standin": standin, "beanstalkd_bin": beanstalkd,
        "ceiling_bin": bins.get("ceiling", (None,))[0], "loadgen_bin": CFG.loadgen,
        "baseline_bin": bins.get("baseline", (None,))[0], "busy_loops": args.busy,
    }
    if not standin:
        st = os.stat(stalkd)
        meta["stalkd_mtime"] = datetime.datetime.fromtimestamp(
            st.st_mtime, datetime.timezone.utc).isoformat(timespec="seconds")
        meta["stalkd_size"] = st.st_size
    try:
        meta["beanstalkd_version"] = subprocess.run(
            [beanstalkd, "-v"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=5).stdout.decode().strip()
    except (OSError, subprocess.TimeoutExpired):
        pass

    t_start = time.monotonic()
    out = {"meta": meta, "scenarios": {}}
    md = [f"## stalkd benchmark ({'quick' if args.quick else 'full'}, {pairs} pair(s), "
          f"{meta['date']}, {meta['cpus']} CPUs)", "",
          "Cells: median (min–max) over the runs. Ratio: stalkd median ÷ beanstalkd (baseline) median "
          "(↑ / ↓ marks which direction is better).", ""]
    if meta["loadavg_start"][0] > 1.0:
        md += [f"**The machine was busy at the start (load average {meta['loadavg_start'][0]:.1f} "
               "on 2 CPUs): absolute numbers are depressed and noisy; compare ratios and CPU per "
               "op.**", ""]
    if standin:
        md += ["**stalkd was not built: beanstalkd stands in for it; the ratio column shows the "
               "run-to-run noise only.**", ""]
    if args.busy:
        md += [f"**{args.busy} busy-loop process(es) ran beside the servers throughout (--busy).**",
               ""]
    failed = 0
    busy = start_busy(args.busy)
    try:
        for sc in selected:
            params = sc.quick if args.quick else sc.full
            print(f"run.py: scenario {sc.name} {params}", file=sys.stderr, flush=True)
            runs = run_scenario(sc, params, pairs, bins)
            failed += sum(1 for r in runs if r.get("error"))
            text, summary = table(sc, params, runs, {k: v[1] for k, v in bins.items()})
            print(text, flush=True)
            md.append(text)
            out["scenarios"][sc.name] = {"params": params, "summary": summary, "runs": runs}
    finally:
        stop_all()
        stop_busy(busy)
    mtimes = {r["bin_mtime"] for sc in out["scenarios"].values() for r in sc["runs"]
              if r["server"] == "stalkd" and "bin_mtime" in r}
    if len(mtimes) > 1:
        meta["stalkd_rebuilt_during_run"] = True
        warn = ("**Warning: the stalkd binary changed during this run (rebuilt "
                f"{len(mtimes) - 1} time(s)); runs may mix builds (see bin_mtime in the JSON).**")
        md.insert(4, warn + "\n")
        print(warn, flush=True)
        print("run.py: " + warn.strip("*"), file=sys.stderr)
    meta["total_s"] = round(time.monotonic() - t_start, 1)
    meta["loadavg_end"] = os.getloadavg()
    meta["failed_runs"] = failed
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"run.py: {meta['total_s']} s, {failed} failed run(s); wrote {args.out}",
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

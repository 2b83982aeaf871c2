#!/usr/bin/env python3
"""Where a stalkd loop iteration's time goes during a loadgen event (needs root and perf).

    python3 bench/loop_trace.py [--build DIR] [--slices expire|purge] -- --scenario expire --jobs 1000000

Starts BUILD/stalkd (default build/release) on a free port, records it with
`perf record -a -k CLOCK_MONOTONIC` (epoll_pwait2 entry and exit of its thread, and every
sched_switch to or from it), runs BUILD/bench/stalkd_loadgen with the arguments after `--`
(port and pid added), and reports, over the loadgen's event window (event_start_mono_s to
event_end_mono_s in its JSON, as the expire and purge scenarios print them):

- each loop iteration (from epoll_pwait2 or epoll_wait returning to the next call): wall time, time on the
  CPU and time held off it (preempted: switched out runnable, or waiting on a page fault);
- with --slices, uprobes on MemoryStore::Tick and on Engine::ExpireDue (expire) or
  Engine::Purge (purge), entry and return with the number of jobs: Ticks per iteration,
  jobs per iteration, each slice's time on the CPU and per job. The uprobes are removed again.

A stats reply waits for the rest of the iteration it arrived in and the next one's work
before its command, so the iteration's time on the CPU bounds the server's share of the
probe's latency; time held off the CPU is the machine's.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SLICE_FN = {"expire": "_ZN6stalkd6engine6Engine9ExpireDueEljPb",
            "purge": "_ZN6stalkd6engine6Engine5PurgeEPNS0_4TubeENS0_9PurgeWhatEj"}
TICK_FN = "_ZN6stalkd5store11MemoryStore4TickEv"


def symbol_addr(binary, name):
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return "0x" + parts[0].lstrip("0")
    sys.exit(f"loop_trace: {name} not in {binary}")


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def show(label, values, unit):
    v = sorted(values)
    if not v:
        print(f"  {label:40s} (none)")
        return
    print(f"  {label:40s} n {len(v):5d}  p50 {pct(v, .5):8.3f}  p90 {pct(v, .9):8.3f}  "
          f"p99 {pct(v, .99):8.3f}  max {v[-1]:8.3f} {unit}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build", "release"))
    ap.add_argument("--slices", choices=sorted(SLICE_FN))
    ap.add_argument("loadgen_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = [x for x in a.loadgen_args if x != "--"]
    stalkd = os.path.join(a.build, "stalkd")
    loadgen = os.path.join(a.build, "bench", "stalkd_loadgen")
    tmp = tempfile.mkdtemp(prefix="loop-trace-")
    binary = os.path.join(tmp, "stalkd")  # a copy: uprobes stay valid if the build changes
    subprocess.run(["cp", stalkd, binary], check=True)

    probes = []
    if a.slices:
        fn = SLICE_FN[a.slices]
        for spec in (f"lt_slice={symbol_addr(binary, fn)}",
                     f"lt_slice_ret={symbol_addr(binary, fn)}%return $retval",
                     f"lt_tick={symbol_addr(binary, TICK_FN)}"):
            subprocess.run(["perf", "probe", "-q", "-x", binary, "--add", spec], check=True)
        probes = ["probe_stalkd:lt_slice", "probe_stalkd:lt_slice_ret__return",
                  "probe_stalkd:lt_tick"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([binary, "-l", "127.0.0.1", "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = os.path.join(tmp, "perf.data")
    perf = None
    try:
        time.sleep(0.3)
        pid = srv.pid
        cmd = ["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", data]
        for p in probes:
            cmd += ["-e", p]
        # The loop polls with epoll_pwait2, or epoll_wait when no timer is set.
        for call in ("epoll_pwait2", "epoll_wait"):
            cmd += ["-e", f"syscalls:sys_enter_{call}", "--filter", f"common_pid == {pid}",
                    "-e", f"syscalls:sys_exit_{call}", "--filter", f"common_pid == {pid}"]
        cmd += [
                "-e", "sched:sched_switch", "--filter", f"prev_pid == {pid} || next_pid == {pid}"]
        perf = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        r = subprocess.run([loadgen, "--port", str(port), "--pid", str(pid)] + args,
                           capture_output=True, text=True)
        result = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        if perf:
            perf.send_signal(2)
            perf.wait()
        srv.terminate()
        srv.wait()
        for p in probes:
            subprocess.run(["perf", "probe", "-q", "-d", p], check=False)
    if "error" in result:
        sys.exit(f"loop_trace: loadgen: {result['error']}")
    # Scenarios without an event window (grow, delayed): the whole trace.
    t_a = result.get("event_start_mono_s", 0.0)
    t_b = result.get("event_end_mono_s", float("inf"))
    script = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace"],
                            capture_output=True, text=True).stdout

    iters, slices = [], []
    cur = out_at = s_start = None
    s_off = 0.0
    for line in script.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)", line)
        if not m:
            continue
        tid, t, ev, tr = int(m[1]), float(m[2]), m[3], m[4]
        if ev.endswith("sched_switch"):
            pm = re.search(r"prev_pid=(\d+).*next_pid=(\d+)", tr)
            if int(pm[1]) == srv.pid:
                out_at = t
            elif int(pm[2]) == srv.pid and out_at is not None:
                if cur is not None:
                    cur["off"] += t - out_at
                if s_start is not None:
                    s_off += t - out_at
                out_at = None
            continue
        if tid != srv.pid:
            continue
        if ev.endswith(("sys_exit_epoll_pwait2", "sys_exit_epoll_wait")):
            cur = {"s": t, "off": 0.0, "ticks": 0, "jobs": 0}
        elif ev.endswith(("sys_enter_epoll_pwait2", "sys_enter_epoll_wait")):
            if cur:
                cur["e"] = t
                iters.append(cur)
            cur = None
        elif ev.endswith("lt_tick"):
            if cur:
                cur["ticks"] += 1
        elif ev.endswith("lt_slice"):
            s_start, s_off = t, 0.0
        elif ev.endswith("lt_slice_ret__return"):
            n = int(re.search(r"arg1=(0x[0-9a-f]+)", tr)[1], 16)
            if s_start is not None and n:
                slices.append((t, t - s_start - s_off, n))
                if cur:
                    cur["jobs"] += n
            s_start = None
    win = [x for x in iters if x["e"] >= t_a and x["s"] <= t_b]
    probe = result.get("probe_during_us") or result.get("probe_us") or {}
    probe_k = result.get("probe_during_kernel_us") or result.get("probe_kernel_us") or {}
    span = (t_b - t_a) if t_b != float("inf") else (win[-1]["e"] - win[0]["s"] if win else 0)
    print(f"{result.get('scenario')} ({result.get('mode')}): event {span * 1e3:.0f} ms, "
          f"{len(win)} loop iterations; stats probe max {probe.get('max_us', float('nan')):.0f} µs "
          f"(kernel stamps {probe_k.get('max_us', float('nan')):.0f} µs), "
          f"server CPU util {result.get('server_cpu_util', float('nan')):.2f}")
    show("iteration wall", [(x["e"] - x["s"]) * 1e3 for x in win], "ms")
    show("iteration on the CPU", [(x["e"] - x["s"] - x["off"]) * 1e3 for x in win], "ms")
    show("iteration held off the CPU", [x["off"] * 1e3 for x in win], "ms")
    print("  the longest iterations on the CPU (ms on / off, at CLOCK_MONOTONIC s):")
    for x in sorted(win, key=lambda x: x["off"] - (x["e"] - x["s"]))[:5]:
        print(f"    {(x['e'] - x['s'] - x['off']) * 1e3:8.3f} / {x['off'] * 1e3:8.3f} at {x['s']:.6f}")
    if a.slices:
        sw = [x for x in slices if t_a - 0.01 <= x[0] <= t_b]
        show("MemoryStore::Tick calls per iteration", [x["ticks"] for x in win], "")
        show("jobs per iteration", [x["jobs"] for x in win], "")
        show("slice on the CPU", [x[1] * 1e3 for x in sw], "ms")
        show("jobs per slice", [x[2] for x in sw], "")
        show("slice on the CPU per job", [x[1] * 1e6 / x[2] for x in sw], "µs")
    subprocess.run(["rm", "-rf", tmp], check=False)


if __name__ == "__main__":
    main()

"""Opt-in scenario of run.py for the web dashboard with many tubes (docs/DASHBOARD.md,
"100,000 tubes"): dashboard-tubes.

One job goes into each of {tubes} tubes. Then a text client (the probe) sends `stats-tube
default` in a closed loop for {window} s, twice on the same server: while an HTTP client asks
for /metrics over and over (the control: the server's other sliced work over every tube), and
while it asks the dashboard's tube searches, sorts and deep pages over and over. The HTTP
client runs niced, so that it takes less of a 2-core machine from the server and the probe
than they take from each other; which window goes first alternates from run to run. Reported:
the probe's p99 and maximum in both windows and the difference of the p99s (on a shared
machine only the comparison within one run means anything), how many answers each window
had and the longest.

The tests (tests/blackbox/test_dashboard_api.py) check that the search is right and sliced,
with other clients answered between its slices; how long the round trips take is this
benchmark's figure, not a test's.
"""
import json
import socket
import subprocess
import sys

# The probe: stats-tube in a closed loop on argv[1] for argv[2] seconds; prints its round
# trips' count, p99 and maximum in ms.
PROBE = r"""
import json, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
end = time.monotonic() + float(sys.argv[2])
rtts = []
buf = b""
while time.monotonic() < end:
    t = time.perf_counter()
    s.sendall(b"stats-tube default\r\n")
    while True:
        buf += s.recv(65536)
        if b"\r\n" in buf:
            head, _, rest = buf.partition(b"\r\n")
            n = int(head.split()[1])
            if len(rest) >= n + 2:
                buf = rest[n + 2:]
                break
    rtts.append(time.perf_counter() - t)
rtts.sort()
print(json.dumps({"n": len(rtts), "max_ms": rtts[-1] * 1e3,
                  "p99_ms": rtts[int(len(rtts) * 0.99)] * 1e3}))
"""

# The HTTP client: GETs the targets of argv[3] (a JSON list) round and round on one
# connection to port argv[1] until argv[2] seconds have passed (and each at least once);
# prints how many answers and how long the longest took.
LOAD = r"""
import http.client, json, os, sys, time
os.nice(10)
port, seconds, targets = int(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
end = time.monotonic() + seconds
n, longest = 0, 0.0
while time.monotonic() < end or n < len(targets):
    t = time.monotonic()
    c.request("GET", targets[n % len(targets)])
    r = c.getresponse()
    r.read()
    assert r.status == 200, (targets[n % len(targets)], r.status)
    longest = max(longest, time.monotonic() - t)
    n += 1
print(json.dumps({"requests": n, "longest_s": longest}))
"""

# The dashboard's requests: a search, the first page, a deep page, a search sorted by a
# count, everything sorted by a count (docs/DASHBOARD.md, "The JSON API").
DASHBOARD_TARGETS = [
    "/dashboard/api/tubes?q=t09999",
    "/dashboard/api/tubes",
    "/dashboard/api/tubes?offset=99990&limit=3",
    "/dashboard/api/tubes?q=T0999&sort=ready&limit=2",
    "/dashboard/api/tubes?sort=total_jobs&order=asc&limit=1",
]
_RUNS = [0]  # runs so far (which window goes first)


def fill(port, tubes):
    """Puts one job into each of `tubes` tubes, pipelined on one connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
        s.sendall(b"".join(b"use t%06d\r\nput %d 0 60 1\r\nx\r\n" % (i, i % 7)
                           for i in range(tubes)))
        lines, tail = 0, b""
        while lines < 2 * tubes:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the server closed the connection during the fill")
            data = tail[-1:] + chunk  # a "\r\n" split over two reads counts once
            lines += data.count(b"\r\n")
            tail = data[-64:]
        if not tail.rstrip(b"\r\n").split(b"\r\n")[-1].startswith(b"INSERTED"):
            raise RuntimeError("the fill's last reply: %r" % tail)


def window(srv, targets, seconds, timeout):
    """The probe's round trips while LOAD asks `targets` over and over."""
    load = subprocess.Popen([sys.executable, "-c", LOAD, str(srv.admin_port), str(seconds),
                             json.dumps(targets)], stdout=subprocess.PIPE)
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(srv.port), str(seconds)],
                             stdout=subprocess.PIPE)
    try:
        out = json.loads(probe.communicate(timeout=timeout)[0])
        got, _ = load.communicate(timeout=timeout)
    finally:
        for p in (load, probe):
            if p.poll() is None:
                p.kill()
                p.wait()
    if load.returncode != 0:
        raise RuntimeError("the HTTP client failed (exit %s)" % load.returncode)
    out.update(json.loads(got))
    return out


def sc_dashboard_tubes(srv, p):
    fill(srv.port, p["tubes"])
    order = ("metrics", "dashboard") if _RUNS[0] % 2 == 0 else ("dashboard", "metrics")
    _RUNS[0] += 1
    raw = {"first": order[0]}
    for which in order:
        targets = ["/metrics"] if which == "metrics" else DASHBOARD_TARGETS
        raw[which] = window(srv, targets, p["window"], p["timeout"])
    c, d = raw["metrics"], raw["dashboard"]
    m = {"ctl_p99": c["p99_ms"], "dash_p99": d["p99_ms"], "diff_p99": d["p99_ms"] - c["p99_ms"],
         "ctl_max": c["max_ms"], "dash_max": d["max_ms"], "ctl_n": c["n"], "dash_n": d["n"],
         "ctl_requests": c["requests"], "dash_requests": d["requests"],
         "ctl_longest": c["longest_s"], "dash_longest": d["longest_s"],
         "dash_first": int(order[0] == "dashboard"), "errors": 0}
    return m, raw


METRICS = [
    ("ctl_p99", "probe p99 ms during /metrics scrapes ↓"),
    ("dash_p99", "probe p99 ms during dashboard searches ↓"),
    ("diff_p99", "probe p99: dashboard − /metrics, ms ↓"),
    ("ctl_max", "probe max ms during /metrics scrapes ↓"),
    ("dash_max", "probe max ms during dashboard searches ↓"),
    ("ctl_n", "probe round trips during /metrics scrapes"),
    ("dash_n", "probe round trips during dashboard searches"),
    ("ctl_requests", "/metrics answers in the window"),
    ("dash_requests", "dashboard answers in the window"),
    ("ctl_longest", "longest /metrics answer s ↓"),
    ("dash_longest", "longest dashboard answer s ↓"),
    ("dash_first", "dashboard window ran first"),
    ("errors", "errors"),
]


def scenarios(run):
    """The Scenario objects (opt-in) for run.py's table."""
    return [run.Scenario(
        "dashboard-tubes", "dashboard with {tubes} tubes: a stats-tube probe for {window} s "
        "while the dashboard's tube list is searched, sorted and paged, against {window} s "
        "while /metrics is scraped",
        sc_dashboard_tubes, METRICS,
        dict(tubes=100_000, window=4.0, timeout=300),
        dict(tubes=10_000, window=1.0, timeout=120),
        servers=("stalkd",), server_args={"stalkd": ["--admin-http", "127.0.0.1:{admin_port}"]},
        default=False)]

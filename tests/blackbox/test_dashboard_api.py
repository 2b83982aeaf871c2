"""Black-box tests of the web dashboard's HTTP side (docs/DASHBOARD.md): the embedded files
at / and /dashboard/, the admin listener's basic auth over them, the X-Requested-With rule
of changing requests, and the JSON API under /dashboard/api/ (server panel, history, tube
search and paging, jobs by state, job detail and body, kick, purge, pause, respawn, move,
delete), checked against what the text protocol sees; and 100,000 tubes searched and paged
in slices, with other clients answered between them.

Run: python3 -m unittest -v tests/blackbox/test_dashboard_api.py   (binary: $STALKD_BIN)
"""
import base64
import json
import os
import re
import select
import signal
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from httpcase import (API_NOT_FOUND, HttpCase, HttpConn, HttpServer, accounts_file, query,  # noqa: E402
                      stats_of, wait_until)
import redis_fixture  # noqa: E402

API = "/dashboard/api/"
XRW = [("X-Requested-With", "test")]
ASSETS = {"app.js": "text/javascript", "util.js": "text/javascript", "app.css": "text/css",
          "favicon.svg": "image/svg+xml"}
TUBE_KEYS = {"name", "ready", "urgent", "reserved", "delayed", "buried", "waiting", "using",
             "watching", "total_jobs", "deletes", "pauses", "expired", "tries_exhausted",
             "default_tries", "paused", "pause_s", "pause_left_s", "next_ready_id",
             "next_ready_age_s", "put_rate", "reserve_rate", "history"}
JOB_KEYS = {"id", "tube", "state", "pri", "age_s", "delay_s", "ttr_s", "time_left_s", "file",
            "reserves", "timeouts", "releases", "buries", "kicks", "tries_left", "ttl_left_s",
            "bury_reason", "detached"}


# Bounds a wait for something the server does on its own (a sample a second, a sync): only
# a hang should reach it, on a loaded two-core machine.
HANG = 60


def q(s):
    return urllib.parse.quote(s, safe="")


class DashboardCase(HttpCase):
    """HttpCase with the dashboard's calls: dash() answers a Response, djson() asserts a 200
    (or `status`) and answers the JSON. POST and DELETE carry X-Requested-With unless
    headers are given."""

    make_token = False

    def dash(self, method, path, params=None, headers=None):
        if headers is None and method in ("POST", "DELETE"):
            headers = XRW
        items = [(k, q(str(v))) for k, v in (params or {}).items()]
        return self.adm(method, API + path, headers=headers, params=items)

    def djson(self, method, path, params=None, status=200):
        r = self.dash(method, path, params)
        self.assertEqual(r.status, status, r)
        self.assertTrue(r.header("content-type").startswith("application/json"), r)
        self.assertEqual(r.header("cache-control"), "no-store")
        return r.json()

    def put(self, c, tube, body=b"x", pri=0, delay=0, ttr=60, ext=""):
        if isinstance(body, str):
            body = body.encode()
        c.cmd("use " + tube)
        verb = "put-ext" if ext else "put"
        r = c.cmd(b"%s %d %d %d %d%s\r\n%s\r\n" % (verb.encode(), pri, delay, ttr, len(body),
                                                  (" " + ext).encode() if ext else b"", body))
        self.assertTrue(r.startswith(b"INSERTED "), r)
        return int(r.split()[1])

    def fill(self, c, tube, n, body=b"x"):
        """Puts n jobs into tube in one pipelined write; their ids."""
        c.cmd("use " + tube)
        c.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body) * n)
        return [int(c.read_line().split()[1]) for _ in range(n)]

    def bury(self, c, tube, n, body=b"dead"):
        """Puts n jobs into tube and buries them; their ids."""
        ids = [self.put(c, tube, body) for _ in range(n)]
        c.cmd("watch " + tube)
        for jid in ids:
            self.assertEqual(c.cmd("reserve-job %d" % jid)[:8], b"RESERVED")
            self.assertEqual(c.cmd("bury %d 0" % jid), b"BURIED\r\n")
        return ids

    def ystats(self, c, command):
        """A stats reply with numbers as ints and quoted strings unquoted."""
        out = {}
        for k, v in stats_of(c, command).items():
            if re.fullmatch(r"-?[0-9]+", v):
                v = int(v)
            elif len(v) >= 2 and v[0] == v[-1] == '"':
                v = v[1:-1]
            out[k] = v
        return out

    def tube_stats(self, c, tube):
        return self.ystats(c, "stats-tube-ext " + tube)  # with the extensions' keys

    def job_stats(self, c, jid):
        return self.ystats(c, "stats-job-ext %s" % jid)


class AssetsTest(DashboardCase):
    def test_page_and_files(self):
        for path in ("/", "/dashboard", "/dashboard/", "/?x=1"):
            r = self.adm("GET", path)
            self.assertEqual(r.status, 200, (path, r))
            self.assertEqual(r.header("content-type"), "text/html; charset=utf-8")
            self.assertIn(b'<script type="module" src="/dashboard/app.js">', r.body)
            csp = r.header("content-security-policy")
            self.assertIn("script-src 'self'", csp)
            self.assertIn("default-src 'none'", csp)
            self.assertIn("frame-ancestors 'none'", csp)
            self.assertEqual(r.header("x-frame-options"), "DENY")
        html = self.adm("GET", "/").body.decode()
        # Nothing comes from elsewhere: every address in the page is the server's own.
        for ref in re.findall(r'(?:src|href)="([^"#]+)"', html):
            self.assertTrue(ref.startswith("/dashboard/"), ref)
        for name, ctype in ASSETS.items():
            r = self.adm("GET", "/dashboard/" + name)
            self.assertEqual(r.status, 200, (name, r))
            self.assertTrue(r.header("content-type").startswith(ctype), r)
            self.assertEqual(r.header("x-content-type-options"), "nosniff")
            with open(os.path.join(os.path.dirname(__file__), "..", "..", "web", "dashboard",
                                   name), "rb") as f:
                self.assertEqual(r.body, f.read(), name)
        # Every module the page imports is served.
        for mod in re.findall(rb"from '\./([\w.]+)'", self.adm("GET", "/dashboard/app.js").body):
            self.assertEqual(self.adm("GET", "/dashboard/" + mod.decode()).status, 200, mod)
        for js in ("app.js", "util.js"):
            body = self.adm("GET", "/dashboard/" + js).body
            body = body.replace(b"http://www.w3.org/2000/svg", b"")  # a name, not an address
            self.assertNotRegex(body, rb"https?://", js)

    def test_head_and_unknown(self):
        r = self.adm("HEAD", "/")
        self.assertEqual((r.status, r.body), (200, b""))
        self.assertGreater(int(r.header("content-length")), 100)
        for method, path in (("GET", "/dashboard/nope.js"), ("GET", "/dashboard/api/nope"),
                             ("POST", "/"), ("GET", "/dashboard/x/app.js"),
                             ("PUT", "/dashboard/api/server"),
                             ("GET", "/dashboard/api/tubes/default/nope")):
            r = self.adm(method, path, headers=XRW)
            self.assertError(r, 404, API_NOT_FOUND["error"])
        # The other admin routes are as they were.
        self.assertEqual(self.adm("GET", "/healthz").json(), {"status": "ok"})


class AccountCase(DashboardCase):
    """A server with --admin-accounts: one account, ops:pa:ss (GOOD holds its header)."""

    GOOD = [("Authorization", "Basic " + base64.b64encode(b"ops:pa:ss").decode())]

    def setUp(self):
        self.server_args = ("--admin-accounts", accounts_file(self, "ops:pa:ss\n"))
        super().setUp()


class AuthTest(AccountCase):
    def test_dashboard_needs_an_account(self):
        good = [("Authorization", "Basic " + base64.b64encode(b"ops:pa:ss").decode())]
        bad = [("Authorization", "Basic " + base64.b64encode(b"ops:nope").decode())]
        for path in ("/", "/dashboard/", "/dashboard/app.js", API + "server", API + "tubes"):
            for headers in (None, bad):
                r = self.adm("GET", path, headers=headers)
                self.assertError(r, 401, "unauthorized")
                self.assertEqual(r.header("www-authenticate"),
                                 'Basic realm="Authorization Required"')
            self.assertEqual(self.adm("GET", path, headers=good).status, 200, path)
        r = self.adm("POST", API + "tubes/default/pause?seconds=1", headers=XRW)
        self.assertEqual(r.status, 401)
        r = self.adm("POST", API + "tubes/default/pause?seconds=1", headers=good + XRW)
        self.assertEqual(r.status, 200, r)
        # Probes and scrapes stay open.
        self.assertEqual(self.adm("GET", "/healthz").status, 200)
        self.assertEqual(self.adm("GET", "/metrics").status, 200)


class CsrfTest(DashboardCase):
    def test_changing_requests_need_x_requested_with(self):
        c = self.text()
        jid = self.put(c, "t1", "hello")
        for method, path in (("POST", "tubes/t1/kick"), ("POST", "tubes/t1/purge?state=all"),
                             ("POST", "tubes/t1/pause?seconds=5"), ("DELETE", "jobs/%d" % jid),
                             ("POST", "jobs/%d/move?to=t2" % jid), ("POST", "jobs/%d/kick" % jid)):
            r = self.dash(method, path, headers=[])
            self.assertError(r, 403, "missing X-Requested-With header")
        st = self.tube_stats(c, "t1")
        self.assertEqual((st["current-jobs-ready"], st["pause"]), (1, 0))
        # Reading needs none.
        self.assertEqual(self.dash("GET", "jobs/%d" % jid, headers=[]).status, 200)


class ServerPanelTest(DashboardCase):
    server_args = ("--max-memory", "64M")

    def test_panel(self):
        c = self.text()
        for i in range(3):
            self.put(c, "p", "job %d" % i)
        self.bury(c, "p", 1)
        s = self.djson("GET", "server")
        st = self.ystats(c, "stats-ext")
        self.assertEqual(s["version"], st["version"])
        self.assertEqual(s["pid"], self.server.pid)
        self.assertEqual(s["jobs"]["ready"], 3)
        self.assertEqual(s["jobs"]["buried"], 1)
        self.assertEqual(s["jobs"]["total"], 4)
        self.assertEqual(s["memory"]["limit"], 64 << 20)
        self.assertEqual(s["memory"]["used"], st["memory-used"])
        self.assertEqual(s["tubes"], st["current-tubes"])
        self.assertEqual(s["binlog"]["enabled"], False)
        self.assertEqual(s["binlog"]["files"], 0)
        self.assertEqual(s["sync"], {"window_s": 60, "count": 0, "mean_ms": None, "p99_ms": None})
        self.assertEqual(s["sampling"]["max_tubes"], 1000)
        self.assertEqual(s["sampling"]["seconds"], 300)
        self.assertGreaterEqual(s["uptime_s"], 0)
        self.assertFalse(s["draining"])
        hist = s["history"]
        self.assertEqual(hist["step_s"], 1)
        for key in ("ready", "reserved", "delayed", "buried", "connections", "memory_used",
                    "puts", "reserves"):
            self.assertEqual(len(hist[key]), 300, key)
        # Sampling began with this first request: a sample a second from now on.
        def sampled():
            h = self.djson("GET", "server", {"step": 5})["history"]
            return h if h["ready"][-1] is not None else None
        h = wait_until(sampled, timeout=HANG)
        self.assertIsNotNone(h)
        self.assertEqual((h["step_s"], len(h["ready"])), (5, 60))
        self.assertEqual(h["ready"][-1], 3)
        self.assertEqual(h["buried"][-1], 1)
        # The sampler is a session of the store, which stats counts as a connection.
        self.assertEqual(self.ystats(c, "stats")["current-connections"], 3)
        for bad in ({"step": 0}, {"step": 61}, {"step": "x"}):
            self.assertError(self.dash("GET", "server", bad), 400, "invalid step")

    def test_rates_and_history(self):
        c = self.text()
        self.djson("GET", "server")  # sampling starts
        self.assertTrue(wait_until(lambda: self.djson("GET", "server")["put_rate"] is not None,
                                   timeout=HANG))
        # The tube's first sample is the baseline of its puts: wait for it.
        def tube(step=1):
            return self.djson("GET", "tubes/default", {"step": step})
        self.assertTrue(wait_until(lambda: any(v is not None for v in tube()["history"]["ready"]),
                                   timeout=HANG))
        for i in range(6):
            self.put(c, "default", "r%d" % i)
        c.cmd("watch default")
        for _ in range(4):
            self.assertEqual(c.cmd("reserve-with-timeout 0")[:8], b"RESERVED")

        def total(series):
            return sum(v for v in series if v is not None)

        # Until the samples after them are taken.
        def counted():
            t, s = tube(), self.djson("GET", "server")
            h = t["history"]
            done = (total(h["puts"]), total(h["reserves"]), total(s["history"]["puts"]),
                    total(s["history"]["reserves"])) == (6, 4, 6, 4)
            return (t, s) if done and [v for v in h["ready"] if v is not None][-1] == 2 else None
        got = wait_until(counted, timeout=HANG)
        self.assertIsNotNone(got, (tube(), self.djson("GET", "server")["history"]))
        t, s = got
        hist = t["history"]
        self.assertEqual((hist["step_s"], len(hist["puts"])), (1, 300))
        self.assertGreater(t["put_rate"], 0)
        self.assertGreater(t["reserve_rate"], 0)

    def test_binlog(self):
        with tempfile.TemporaryDirectory() as d:
            srv = HttpServer(args=["-b", d, "-f", "0"], http=False)
            try:
                t = srv.connect()
                self.put(t, "b", "durable")
                self.djson("GET", "server")
                a = srv.admin()
                # Until a sync has been made and counted (one a second by default).
                def synced():
                    s = a.request("GET", API + "server").json()
                    if s["sync"]["count"] > 0:
                        return s
                    self.put(t, "b", "more")
                    return None
                s = wait_until(synced, timeout=HANG, interval=0.2)
                self.assertIsNotNone(s, "no binlog sync counted")
                self.assertTrue(s["binlog"]["enabled"])
                self.assertGreaterEqual(s["binlog"]["files"], 1)
                self.assertGreater(s["binlog"]["live_bytes"], 0)
                self.assertGreater(s["sync"]["count"], 0)
                self.assertGreater(s["sync"]["mean_ms"], 0)
                self.assertGreater(s["sync"]["p99_ms"], 0)
                a.close()
                t.close()
            finally:
                srv.stop()


class TubeListTest(DashboardCase):
    def setUp(self):
        super().setUp()
        c = self.c = self.text()
        # alpha-0..alpha-9 with 0..9 ready jobs, BETA/0..BETA/4 with 1 buried each.
        for i in range(10):
            for _ in range(i):
                self.put(c, "alpha-%d" % i)
        self.text().cmd("watch alpha-0")  # an empty tube, alive while watched
        self.c2 = self.text()
        for i in range(5):
            self.bury(self.c2, "BETA/%d" % i, 1)

    def tubes(self, **params):
        return self.djson("GET", "tubes", params)

    def test_search_and_paging(self):
        t = self.tubes()
        self.assertEqual((t["total_tubes"], t["matched"]), (16, 16))
        self.assertEqual([r["name"] for r in t["tubes"]][:3], ["BETA/0", "BETA/1", "BETA/2"])
        self.assertEqual((t["offset"], t["limit"], t["sort"], t["order"]), (0, 50, "name", "asc"))
        for row in t["tubes"]:
            self.assertEqual(set(row), TUBE_KEYS, row)
        t = self.tubes(q="ALPHA-", limit=3, offset=2)
        self.assertEqual(t["matched"], 10)
        self.assertEqual([r["name"] for r in t["tubes"]], ["alpha-2", "alpha-3", "alpha-4"])
        t = self.tubes(q="pha-9")
        self.assertEqual([(r["name"], r["ready"]) for r in t["tubes"]], [("alpha-9", 9)])
        t = self.tubes(q="beta/", order="desc")
        self.assertEqual([r["name"] for r in t["tubes"]],
                         ["BETA/4", "BETA/3", "BETA/2", "BETA/1", "BETA/0"])
        t = self.tubes(q="nothing-like-this")
        self.assertEqual((t["matched"], t["tubes"]), (0, []))
        t = self.tubes(offset=15)
        self.assertEqual([r["name"] for r in t["tubes"]], ["default"])
        self.assertEqual(self.tubes(offset=16)["tubes"], [])

    def test_sort_by_counts(self):
        t = self.tubes(sort="ready", limit=3)
        self.assertEqual((t["sort"], t["order"]), ("ready", "desc"))
        self.assertEqual([(r["name"], r["ready"]) for r in t["tubes"]],
                         [("alpha-9", 9), ("alpha-8", 8), ("alpha-7", 7)])
        t = self.tubes(sort="ready", order="asc", q="alpha", limit=2)
        self.assertEqual([r["name"] for r in t["tubes"]], ["alpha-0", "alpha-1"])
        t = self.tubes(sort="buried", limit=5)
        self.assertEqual([r["name"] for r in t["tubes"]], ["BETA/%d" % i for i in range(5)])
        t = self.tubes(sort="total_jobs", offset=1, limit=1)
        self.assertEqual([r["name"] for r in t["tubes"]], ["alpha-8"])

    def test_bad_parameters(self):
        for params, err in (({"sort": "size"}, "invalid sort"), ({"order": "up"}, "invalid order"),
                            ({"limit": 0}, "invalid limit"), ({"limit": 201}, "invalid limit"),
                            ({"offset": -1}, "invalid offset"), ({"offset": "x"}, "invalid offset"),
                            ({"step": 61}, "invalid step")):
            self.assertError(self.dash("GET", "tubes", params), 400, err)

    def test_row_values(self):
        c = self.c
        self.put(c, "rows", "late", pri=5, delay=3600)
        a = self.put(c, "rows", "second best", pri=10)
        b = self.put(c, "rows", "best", pri=1)
        c.cmd("watch rows")
        c.cmd("pause-tube rows 100")
        row = self.djson("GET", "tubes", {"q": "rows"})["tubes"][0]
        self.assertEqual((row["ready"], row["delayed"], row["urgent"]), (2, 1, 2))
        self.assertEqual((row["paused"], row["pause_s"]), (True, 100))
        self.assertGreater(row["pause_left_s"], 90)
        # The next ready job is the one a reserve would take: best priority first.
        self.assertEqual(row["next_ready_id"], b)
        self.assertGreaterEqual(row["next_ready_age_s"], 0)
        self.assertEqual(self.djson("GET", "tubes/rows")["next_ready_id"], b)
        c.cmd("delete %d" % b)
        self.assertEqual(self.djson("GET", "tubes/rows")["next_ready_id"], a)
        row = self.djson("GET", "tubes", {"q": "alpha-0"})["tubes"][0]
        self.assertEqual((row["ready"], row["next_ready_id"], row["next_ready_age_s"]),
                         (0, None, None))
        # Looking did not change what the text protocol sees.
        st = self.tube_stats(c, "rows")
        self.assertEqual((st["current-jobs-ready"], st["current-using"]), (1, 1))


class TubeTest(DashboardCase):
    def test_tube_detail(self):
        c = self.text()
        self.put(c, "ns/q(1)", "x")
        c.cmd("tube-tries ns/q(1) 3")
        t = self.djson("GET", "tubes/" + q("ns/q(1)"))
        self.assertEqual(set(t), TUBE_KEYS)
        self.assertEqual((t["name"], t["ready"], t["default_tries"]), ("ns/q(1)", 1, 3))
        self.assertEqual(t["history"]["step_s"], 1)
        self.assertEqual(len(t["history"]["ready"]), 300)
        self.assertError(self.dash("GET", "tubes/nosuch"), 404, "tube not found")
        self.assertError(self.dash("GET", "tubes/-bad"), 400, "invalid tube name")
        self.assertError(self.dash("GET", "tubes/" + "a" * 201), 400, "invalid tube name")
        # Looking for it made no tube.
        self.assertNotIn(b"- nosuch\n", c.cmd("list-tubes"))


class JobsTest(DashboardCase):
    def test_browse_by_state(self):
        c = self.text()
        ready = [self.put(c, "br", "ready %d" % i, pri=i) for i in range(5)]
        delayed = self.put(c, "br", "later", delay=600)
        buried = self.bury(c, "br", 2)
        c.cmd("watch br")
        reserved = int(c.cmd("reserve-with-timeout 0").split()[1])
        before = self.ystats(c, "stats")
        j = self.djson("GET", "tubes/br/jobs")
        self.assertEqual((j["tube"], j["state"], j["count"], j["next"]), ("br", "ready", 4, 0))
        self.assertEqual([x["id"] for x in j["jobs"]], ready[1:])
        for x in j["jobs"]:
            self.assertEqual(set(x), JOB_KEYS | {"body_size", "preview"}, x)
            self.assertEqual(x["state"], "ready")
        self.assertEqual(base64.b64decode(j["jobs"][0]["preview"]), b"ready 1")
        self.assertEqual(j["jobs"][0]["pri"], 1)
        j = self.djson("GET", "tubes/br/jobs", {"state": "delayed"})
        self.assertEqual([x["id"] for x in j["jobs"]], [delayed])
        self.assertGreater(j["jobs"][0]["time_left_s"], 590)
        j = self.djson("GET", "tubes/br/jobs", {"state": "buried"})
        self.assertEqual([x["id"] for x in j["jobs"]], buried)
        self.assertEqual(j["count"], 2)
        j = self.djson("GET", "tubes/br/jobs", {"state": "reserved"})
        self.assertEqual([x["id"] for x in j["jobs"]], [reserved])
        # Browsing reserves nothing and counts no reserve.
        after = self.ystats(c, "stats")
        for k in ("cmd-reserve", "cmd-reserve-with-timeout", "cmd-release",
                  "current-jobs-reserved"):
            self.assertEqual(before[k], after[k], k)
        self.assertEqual(self.job_stats(c, ready[1])["reserves"], 0)

    def test_paging(self):
        c = self.text()
        ids = [self.put(c, "pg", "job %d" % i) for i in range(7)]
        seen, frm = [], 1
        pages = 0
        while True:
            j = self.djson("GET", "tubes/pg/jobs", {"from": frm, "limit": 3})
            seen += [x["id"] for x in j["jobs"]]
            pages += 1
            if not j["next"]:
                break
            frm = j["next"]
        self.assertEqual(seen, ids)
        self.assertEqual(pages, 3)
        j = self.djson("GET", "tubes/pg/jobs", {"from": ids[5], "limit": 50})
        self.assertEqual([x["id"] for x in j["jobs"]], ids[5:])

    def test_sparse_tube_among_many_ids(self):
        # 70,000 jobs in another tube before the one job of this tube: list-jobs looks at
        # 65536 ids a call, so the page takes more than one step.
        c = self.text()
        self.fill(c, "filler", 70000)
        target = self.put(c, "sparse", "found me")
        j = self.djson("GET", "tubes/sparse/jobs")
        self.assertEqual(([x["id"] for x in j["jobs"]], j["next"]), ([target], 0))

    def test_errors(self):
        self.text().cmd("use here")
        self.assertError(self.dash("GET", "tubes/nosuch/jobs"), 404, "tube not found")
        self.assertError(self.dash("GET", "tubes/here/jobs", {"state": "all"}), 400,
                         "invalid state")
        self.assertError(self.dash("GET", "tubes/here/jobs", {"limit": 201}), 400,
                         "invalid limit")
        self.assertError(self.dash("GET", "tubes/-x/jobs"), 400, "invalid tube name")


class JobTest(DashboardCase):
    server_args = ("-z", "200000")

    def test_detail_and_binary_body(self):
        c = self.text()
        body = bytes(range(256)) * 3
        jid = self.put(c, "bin", body, pri=9, ttr=30,
                       ext="tries=4 ttl=500 key=k-1 attr.color=red attr.size=XL")
        j = self.djson("GET", "jobs/%d" % jid)
        self.assertEqual(set(j), JOB_KEYS | {"age_ms", "key", "attributes", "body_size", "body",
                                             "body_truncated"})
        self.assertEqual((j["tube"], j["state"], j["pri"], j["ttr_s"]), ("bin", "ready", 9, 30))
        self.assertEqual((j["tries_left"], j["key"]), (4, "k-1"))
        self.assertEqual(j["attributes"], {"color": "red", "size": "XL"})
        self.assertTrue(0 < j["ttl_left_s"] <= 500)
        self.assertEqual(base64.b64decode(j["body"]), body)
        self.assertEqual((j["body_size"], j["body_truncated"]), (768, False))
        r = self.dash("GET", "jobs/%d/body" % jid)
        self.assertEqual((r.status, r.header("content-type"), r.body),
                         (200, "application/octet-stream", body))
        plain = self.put(c, "bin", "plain")
        j = self.djson("GET", "jobs/%d" % plain)
        self.assertEqual((j["tries_left"], j["ttl_left_s"], j["key"], j["attributes"],
                          j["bury_reason"]), (None, None, None, {}, None))

    def test_big_body_is_previewed(self):
        c = self.text()
        body = os.urandom(150000)
        jid = self.put(c, "big", body)
        j = self.djson("GET", "jobs/%d" % jid)
        self.assertEqual((j["body_size"], j["body_truncated"]), (150000, True))
        self.assertEqual(base64.b64decode(j["body"]), body[:65536])
        self.assertEqual(self.dash("GET", "jobs/%d/body" % jid).body, body)

    def test_errors(self):
        self.assertError(self.dash("GET", "jobs/99"), 404, "job not found")
        self.assertError(self.dash("GET", "jobs/99/body"), 404, "job not found")
        for bad in ("x", "-1", "1" * 21, "18446744073709551616"):
            self.assertError(self.dash("GET", "jobs/" + bad), 400, "invalid job id")


class ActionTest(DashboardCase):
    def test_kick(self):
        c = self.text()
        self.bury(c, "k", 3)
        self.put(c, "k", "d", delay=600)
        self.assertEqual(self.djson("POST", "tubes/k/kick", {"count": 2}), {"kicked": 2})
        st = self.tube_stats(c, "k")
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-buried"]), (2, 1))
        self.assertEqual(self.djson("POST", "tubes/k/kick", {"count": 5}), {"kicked": 1})
        # No buried jobs left: delayed ones, as beanstalkd's kick.
        self.assertEqual(self.djson("POST", "tubes/k/kick", {"count": 5}), {"kicked": 1})
        self.assertEqual(self.djson("POST", "tubes/k/kick"), {"kicked": 0})
        self.assertError(self.dash("POST", "tubes/k/kick", {"count": 0}), 400, "invalid count")
        self.assertError(self.dash("POST", "tubes/nope/kick"), 404, "tube not found")

    def test_kick_many_in_slices(self):
        c = self.text()
        n = 2500
        ids = self.fill(c, "many", n)
        c.cmd("watch many")
        c.send(b"".join(b"reserve-job %d\r\nbury %d 0\r\n" % (i, i) for i in ids))
        for _ in range(n):
            c.read_reply()
            c.read_line()
        self.assertEqual(self.djson("POST", "tubes/many/kick", {"count": 3000}), {"kicked": n})
        self.assertEqual(self.tube_stats(c, "many")["current-jobs-ready"], n)

    def test_job_kick_and_delete(self):
        c = self.text()
        [b] = self.bury(c, "jk", 1)
        r = self.put(c, "jk", "ready")
        self.assertEqual(self.djson("POST", "jobs/%d/kick" % b), {"kicked": True})
        self.assertEqual(self.job_stats(c, b)["state"], "ready")
        self.assertError(self.dash("POST", "jobs/%d/kick" % r), 404,
                         "job not found, or not buried or delayed")
        self.assertEqual(self.djson("DELETE", "jobs/%d" % b), {"deleted": True})
        self.assertEqual(c.cmd("stats-job %d" % b), b"NOT_FOUND\r\n")
        self.assertError(self.dash("DELETE", "jobs/%d" % b), 404, "job not found")
        # A job a worker holds is its worker's to delete.
        w = self.text()
        w.cmd("watch jk")
        self.assertEqual(w.cmd("reserve-job %d" % r)[:8], b"RESERVED")
        self.assertError(self.dash("DELETE", "jobs/%d" % r), 409,
                         "the job is reserved: only its worker can delete it")
        self.assertEqual(self.job_stats(c, r)["state"], "reserved")
        self.assertFalse(self.djson("GET", "jobs/%d" % r)["detached"])

    def test_detached_reservation_is_shown_and_deleted(self):
        c = self.text()
        jid = self.put(c, "dt", "held by an HTTP consume")
        w = self.text()
        w.cmd("watch dt")
        self.assertEqual(w.cmd("reserve-ext 0 detached"), b"RESERVED-MANY 1\r\n")
        self.assertTrue(w.read_reply().startswith(b"RESERVED %d " % jid))
        j = self.djson("GET", "jobs/%d" % jid)
        self.assertEqual((j["state"], j["detached"]), ("reserved", True))
        [row] = self.djson("GET", "tubes/dt/jobs", {"state": "reserved"})["jobs"]
        self.assertEqual((row["id"], row["detached"]), (jid, True))
        # Anyone may delete a detached reservation, the dashboard too.
        self.assertEqual(self.djson("DELETE", "jobs/%d" % jid), {"deleted": True})
        self.assertEqual(c.cmd("stats-job %d" % jid), b"NOT_FOUND\r\n")
        # Once released it is no longer detached.
        other = self.put(c, "dt", "again")
        self.assertEqual(w.cmd("reserve-ext 0 detached"), b"RESERVED-MANY 1\r\n")
        w.read_reply()
        self.assertEqual(c.cmd("release %d 0 0" % other), b"RELEASED\r\n")
        self.assertFalse(self.djson("GET", "jobs/%d" % other)["detached"])

    def test_purge(self):
        c = self.text()
        for i in range(3):
            self.put(c, "pu", "r")
        self.put(c, "pu", "d", delay=600)
        self.bury(c, "pu", 2)
        res = self.put(c, "pu", "held")
        w = self.text()
        w.cmd("watch pu")
        w.cmd("reserve-job %d" % res)
        self.assertEqual(self.djson("POST", "tubes/pu/purge", {"state": "buried"}), {"purged": 2})
        self.assertEqual(self.djson("POST", "tubes/pu/purge", {"state": "all"}), {"purged": 4})
        st = self.tube_stats(c, "pu")
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-delayed"],
                          st["current-jobs-buried"], st["current-jobs-reserved"]), (0, 0, 0, 1))
        for bad in ("reserved", "", "x"):
            self.assertError(self.dash("POST", "tubes/pu/purge", {"state": bad}), 400,
                             "invalid state")
        self.assertError(self.dash("POST", "tubes/nope/purge", {"state": "all"}), 404,
                         "tube not found")

    def test_purge_many_in_slices(self):
        c = self.text()
        n = 5000
        self.fill(c, "big", n)
        self.assertEqual(self.djson("POST", "tubes/big/purge", {"state": "ready"}), {"purged": n})

    def test_pause_and_resume(self):
        c = self.text()
        c.cmd("use pz")
        self.assertEqual(self.djson("POST", "tubes/pz/pause", {"seconds": 120}),
                         {"paused": True, "seconds": 120})
        self.assertEqual(self.tube_stats(c, "pz")["pause"], 120)
        self.assertTrue(self.djson("GET", "tubes/pz")["paused"])
        self.assertEqual(self.djson("POST", "tubes/pz/pause", {"seconds": 0}),
                         {"paused": False, "seconds": 0})
        self.assertEqual(self.tube_stats(c, "pz")["pause"], 0)
        self.assertFalse(self.djson("GET", "tubes/pz")["paused"])
        self.assertError(self.dash("POST", "tubes/pz/pause", {"seconds": 2 ** 32}), 400,
                         "invalid seconds")

    def test_respawn(self):
        c = self.text()
        ids = self.bury(c, "rs", 3)
        self.assertEqual(self.djson("POST", "tubes/rs/respawn", {"count": 2, "ttl": 300}),
                         {"respawned": 2})
        st = self.job_stats(c, ids[0])
        self.assertEqual((st["state"], st["tries-left"]), ("ready", 1))
        self.assertTrue(0 < st["ttl-left"] <= 300)
        self.assertEqual(self.job_stats(c, ids[2])["state"], "buried")
        self.assertEqual(self.djson("POST", "tubes/rs/respawn", {"count": 9}), {"respawned": 1})
        self.assertNotIn("ttl-left", self.job_stats(c, ids[2]))

    def test_move_one(self):
        c = self.text()
        body = b"\x00\xffmove me\r\n"
        jid = self.put(c, "from", body, pri=77, ttr=45, delay=300,
                       ext="tries=5 ttl=1000 key=uniq attr.a=1")
        was = self.job_stats(c, jid)
        r = self.djson("POST", "jobs/%d/move" % jid, {"to": "to/x"})
        self.assertEqual((r["id"], r["tube"]), (jid, "to/x"))
        new = r["new_id"]
        self.assertGreater(new, jid)
        self.assertEqual(c.cmd("stats-job %d" % jid), b"NOT_FOUND\r\n")
        st = self.job_stats(c, new)
        self.assertEqual((st["tube"], st["state"], st["pri"], st["ttr"], st["tries-left"],
                          st["key"], st["attr.a"]), ("to/x", "delayed", 77, 45, 5, "uniq", "1"))
        # What was left of the delay and the TTL, not the whole again (HANG bounds the time
        # the move took).
        self.assertTrue(was["time-left"] - HANG <= st["time-left"] <= was["time-left"], st)
        self.assertTrue(was["ttl-left"] - HANG <= st["ttl-left"] <= was["ttl-left"], st)
        self.assertEqual(c.cmd("peek %d" % new), b"FOUND %d %d\r\n%s\r\n" % (new, len(body), body))
        # A buried job arrives ready, with a try if it had none left.
        [dead] = self.bury(c, "from", 1)
        new2 = self.djson("POST", "jobs/%d/move" % dead, {"to": "to/x"})["new_id"]
        self.assertEqual(self.job_stats(c, new2)["state"], "ready")
        # What cannot be moved.
        held = self.put(c, "from", "held")
        w = self.text()
        w.cmd("watch from")
        w.cmd("reserve-job %d" % held)
        self.assertError(self.dash("POST", "jobs/%d/move" % held, {"to": "to/x"}), 409,
                         "a reserved job cannot be moved")
        other = self.put(c, "from", "same key", ext="key=uniq")
        self.assertError(self.dash("POST", "jobs/%d/move" % other, {"to": "to/x"}), 409,
                         "the target tube has a job with the same key")
        self.assertEqual(self.job_stats(c, other)["tube"], "from")
        self.assertError(self.dash("POST", "jobs/%d/move" % other, {"to": "from"}), 400,
                         "the job is in that tube already")
        self.assertError(self.dash("POST", "jobs/%d/move" % other, {"to": "-bad"}), 400,
                         "invalid target tube")
        self.assertError(self.dash("POST", "jobs/999999/move", {"to": "x"}), 404, "job not found")

    def test_move_many(self):
        c = self.text()
        n = 250
        self.fill(c, "src", n, b"abc")
        self.bury(c, "src", 2)
        self.assertEqual(self.djson("POST", "tubes/src/move", {"state": "ready", "to": "dst",
                                                               "count": 10}),
                         {"moved": 10, "failed": 0, "error": None})
        self.assertEqual(self.djson("POST", "tubes/src/move", {"state": "ready", "to": "dst"}),
                         {"moved": n - 10, "failed": 0, "error": None})
        self.assertEqual(self.djson("POST", "tubes/src/move", {"state": "buried", "to": "dst"}),
                         {"moved": 2, "failed": 0, "error": None})
        st = self.tube_stats(c, "dst")
        self.assertEqual((st["current-jobs-ready"], st["total-jobs"]), (n + 2, n + 2))
        self.assertEqual(self.tube_stats(c, "src")["current-jobs-ready"], 0)
        for params, err in (({"state": "reserved", "to": "x"}, "invalid state"),
                            ({"state": "ready", "to": ""}, "invalid target tube"),
                            ({"state": "ready", "to": "src"}, "the jobs are in that tube already")):
            self.assertError(self.dash("POST", "tubes/src/move", params), 400, err)

    def test_actions_keep_no_tube_alive(self):
        # The dashboard's connection uses a tube only during an action, so a tube whose
        # jobs are gone vanishes as it would without the dashboard.
        c = self.text()
        self.bury(c, "gone", 2)
        c.cmd("ignore gone")
        c.cmd("use default")
        self.djson("POST", "tubes/gone/kick", {"count": 1})
        self.djson("GET", "tubes", {"q": "gone"})
        j = self.djson("GET", "tubes/gone/jobs", {"state": "ready"})
        self.djson("POST", "jobs/%d/move" % j["jobs"][0]["id"], {"to": "elsewhere"})
        self.djson("POST", "tubes/gone/purge", {"state": "all"})
        self.assertNotIn(b"- gone\n", c.cmd("list-tubes"))
        self.assertError(self.dash("GET", "tubes/gone"), 404, "tube not found")


class OddRequestsTest(DashboardCase):
    def test_odd_targets_and_parameters(self):
        """Random routes, methods, names and parameters: every answer is a JSON answer of
        the documented kinds, never a 5xx, and the server stays up."""
        import random
        rnd = random.Random(14)
        c = self.text()
        ids = self.bury(c, "odd", 3) + [self.put(c, "odd", bytes(range(256)))]
        tubes = ["odd", "default", "nosuch", "", "..", "%2F", "a%2Fb", "-x", "x" * 201, "a b"]
        jobs = ["0", str(ids[0]), str(ids[1]), str(ids[-1]), "18446744073709551615",
                "99999999999999999999", "x", ""]
        actions = ["kick", "purge", "pause", "respawn", "move", "body", "jobs", "nope", ""]
        shapes = ["server", "tubes", "tubes/{t}", "tubes/{t}/{a}", "jobs/{j}", "jobs/{j}/{a}",
                  "{a}/{t}/{j}", "tubes/{t}/{a}/{j}"]
        keys = ["q", "sort", "order", "offset", "limit", "step", "state", "from", "count",
                "seconds", "ttl", "to"]
        values = ["", "0", "1", "-1", "200", "201", "4294967296", "ready", "buried", "all",
                  "reserved", "desc", "name", "odd", "other", "%00", "x%2Fy", "99999999999999999999"]
        seen = {}
        for _ in range(400):
            path = rnd.choice(shapes).format(t=rnd.choice(tubes), j=rnd.choice(jobs),
                                             a=rnd.choice(actions))
            params = {rnd.choice(keys): rnd.choice(values) for _ in range(rnd.randint(0, 3))}
            target = API + path + ("?" + "&".join("%s=%s" % kv for kv in params.items())
                                   if params else "")
            method = rnd.choice(["GET", "GET", "POST", "DELETE", "HEAD", "PUT"])
            r = self.adm(method, target, headers=XRW)
            self.assertIn(r.status, (200, 400, 403, 404, 409), (method, target, r))
            seen[r.status] = seen.get(r.status, 0) + 1
            if method != "HEAD" and r.header("content-type") != "application/octet-stream":
                json.loads(r.body)
        self.assertEqual(c.cmd("stats-tube odd")[:3], b"OK ")
        self.assertEqual(self.adm("GET", "/healthz").status, 200)
        self.assertGreater(seen.get(200, 0), 30, seen)  # the routes were reached


def start_on_redis(case):
    """A stalkd on the Redis store of a fresh redis-server, both stopped at `case`'s cleanup;
    (the server, a connection to its admin listener) once it is ready."""
    redis = redis_fixture.RedisServer()
    case.addCleanup(redis.close)
    srv = HttpServer(args=redis_fixture.store_argv(redis.url(), redis_fixture.unique_prefix(),
                                                   wait=0), http=False)
    case.addCleanup(srv.stop)
    a = srv.admin()
    case.addCleanup(a.close)
    case.assertTrue(wait_until(lambda: a.request("GET", "/readyz").status == 200, timeout=HANG))
    return srv, a


@unittest.skipUnless(redis_fixture.available(), "redis-server is not installed")
class RedisStoreTest(unittest.TestCase):
    """The job JSON's `detached` from the Redis store's stats-job, and a clean stop after the
    dashboard sampled the store."""

    def test_detached_reservation(self):
        srv, a = start_on_redis(self)
        c = srv.connect()
        self.addCleanup(c.close)
        c.cmd("use rd")
        c.cmd("watch rd")
        held = int(c.cmd(b"put 0 0 60 1\r\nh\r\n").split()[1])
        consumed = int(c.cmd(b"put 0 0 60 1\r\nc\r\n").split()[1])
        self.assertTrue(c.cmd("reserve-with-timeout 0").startswith(b"RESERVED %d " % held))
        self.assertEqual(c.cmd("reserve-ext 0 detached"), b"RESERVED-MANY 1\r\n")
        self.assertTrue(c.read_reply().startswith(b"RESERVED %d " % consumed))

        def job(jid):
            r = a.request("GET", API + "jobs/%d" % jid)
            self.assertEqual(r.status, 200, r)
            return r.json()
        self.assertEqual((job(held)["state"], job(held)["detached"]), ("reserved", False))
        self.assertEqual((job(consumed)["state"], job(consumed)["detached"]), ("reserved", True))
        r = a.request("DELETE", API + "jobs/%d" % consumed, headers=XRW)
        self.assertEqual((r.status, r.json()), (200, {"deleted": True}))
        r = a.request("DELETE", API + "jobs/%d" % held, headers=XRW)
        self.assertEqual(r.status, 409, r)
        # The dashboard's sampler holds a session of the store; it goes first when stalkd
        # stops (it used to go after the store, and the heap was corrupted on the way out).
        a.close()
        c.close()
        srv.proc.send_signal(signal.SIGTERM)
        self.assertEqual(srv.proc.wait(timeout=HANG), 0)


class HundredThousandTubesTest(DashboardCase):
    """100,000 tubes: the tube list is searched, sorted and paged right, and in slices:
    other clients are answered between them. (How long a text client's round trips take
    meanwhile is a benchmark's figure: bench/dashboard_bench.py, docs/PERFORMANCE.md.)"""

    TUBES = 100000
    SCAN_SLICE = 2500  # tube names a search looks at per step (docs/DASHBOARD.md)
    QUERIES = [
        ({"q": "t09999"}, 10, ["t099990", "t099991"]),
        ({}, TUBES + 1, ["default", "t000000"]),
        ({"offset": 99990, "limit": 3}, TUBES + 1, ["t099989", "t099990", "t099991"]),
        ({"q": "T0999", "sort": "ready", "limit": 2}, 100, None),
        ({"sort": "total_jobs", "order": "asc", "limit": 1}, TUBES + 1, ["default"]),
    ]

    def search_watched(self, c, params):
        """Sends one search and, until its answer comes, asks `stats` on the text client c;
        returns (the answer, cmd-list-tubes before, the values seen meanwhile, after)."""
        listed = lambda: self.ystats(c, "stats")["cmd-list-tubes"]  # noqa: E731
        a = self.server.admin()
        self.addCleanup(a.close)
        before = listed()
        a.send(HttpConn.build("GET", API + "tubes" + query(params)))
        seen = []
        while not select.select([a.sock], [], [], 0)[0]:
            seen.append(listed())
        r = a.read_response()
        self.assertEqual(r.status, 200, r)
        return r.json(), before, seen, listed()

    def test_search_and_paging(self):
        c = self.text()
        c.send(b"".join(b"use t%06d\r\nput %d 0 60 1\r\nx\r\n" % (i, i % 7)
                        for i in range(self.TUBES)))
        for _ in range(2 * self.TUBES):
            c.read_line()
        # The answers.
        for params, matched, names in self.QUERIES:
            t = self.djson("GET", "tubes", params)
            self.assertEqual(t["total_tubes"], self.TUBES + 1, params)
            self.assertEqual(t["matched"], matched, params)
            if names:
                self.assertEqual([r["name"] for r in t["tubes"]][:len(names)], names, params)
            else:
                self.assertTrue(all(r["ready"] == 1 for r in t["tubes"]), t)
        # The sampler keeps history for at most 1000 tubes, those shown first (so with this
        # many tubes it lists none: only a search calls list-tubes).
        self.assertLessEqual(self.djson("GET", "server")["sampling"]["tubes"], 1000)
        # A search looks at the names in slices of SCAN_SLICE, each step listing the tubes
        # once; the text client's `stats` is answered between steps, so it sees the search
        # part way. Searches are repeated until it has (a client that the machine held up
        # through a whole search sees only before and after).
        slices = -(-(self.TUBES + 1) // self.SCAN_SLICE)
        part_way = []
        for _ in range(50):
            t, before, seen, after = self.search_watched(c, {"limit": 1})
            self.assertEqual((t["matched"], [r["name"] for r in t["tubes"]]),
                             (self.TUBES + 1, ["default"]))
            self.assertEqual(after - before, slices)
            self.assertTrue(all(before <= v <= after for v in seen), (before, seen, after))
            part_way += [v - before for v in seen if before < v < after]
            if part_way:
                break
        self.assertTrue(part_way, "no stats answered while a search ran")


if __name__ == "__main__":
    unittest.main()

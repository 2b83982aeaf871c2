"""Black-box tests of the dashboard's put (POST /dashboard/api/tubes/:tube/put) and its
search of job bodies (GET /dashboard/api/tubes/:tube/search), docs/DASHBOARD.md: what they
do, checked over the text protocol; their bad input, the admin account and the
X-Requested-With header they need; the body limits; and a search that goes in slices with a
cursor, with the text protocol answered between them.

Run: python3 -m unittest -v tests/blackbox/test_dashboard_put_search.py   (binary: $STALKD_BIN)
"""
import base64
import os
import select
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from httpcase import HttpConn, stats_of, wait_until  # noqa: E402
from test_dashboard_api import (API, HANG, XRW, AccountCase, DashboardCase, q,  # noqa: E402
                                start_on_redis)
import redis_fixture  # noqa: E402


class PutCase(DashboardCase):
    def put_form(self, tube, body=b"", params=None, headers=None):
        """POST .../put with the body as it is; the Response."""
        items = [(k, q(str(v))) for k, v in (params or {}).items()]
        return self.adm("POST", API + "tubes/%s/put" % q(tube), body,
                        headers=XRW if headers is None else headers, params=items)


class PutTest(PutCase):
    def test_put_with_the_defaults(self):
        c = self.text()
        r = self.put_form("fresh/tube", b"hello")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.header("cache-control"), "no-store")
        d = r.json()
        self.assertEqual(set(d), {"id", "tube"})
        self.assertEqual(d["tube"], "fresh/tube")
        st = self.ystats(c, "stats-job %d" % d["id"])
        # stalk put's and beanstalk_console's defaults: pri 1024, no delay, TTR 60.
        self.assertEqual((st["tube"], st["pri"], st["delay"], st["ttr"], st["state"]),
                         ("fresh/tube", 1024, 0, 60, "ready"))
        self.assertEqual(c.cmd("peek %d" % d["id"]), b"FOUND %d 5\r\nhello\r\n" % d["id"])
        # The dashboard's connection keeps no tube alive: it uses "default" again.
        self.assertEqual(self.djson("GET", "tubes/fresh%2Ftube")["using"], 0)

    def test_put_with_parameters_and_binary_body(self):
        c = self.text()
        body = bytes(range(256)) + b"\r\n\x00"
        d = self.put_form("t1", body, {"pri": 4294967295, "delay": 3600, "ttr": 0}).json()
        st = stats_of(c, "stats-job %d" % d["id"])
        self.assertEqual((st["pri"], st["delay"], st["ttr"], st["state"]),
                         ("4294967295", "3600", "1", "delayed"))  # TTR 0 is 1, as beanstalkd
        j = self.djson("GET", "jobs/%d" % d["id"])
        self.assertEqual(base64.b64decode(j["body"]), body)
        self.assertEqual(self.put_form("t1", b"").status, 201)  # an empty body is a job too
        self.assertEqual(stats_of(c, "stats")["cmd-put"], "2")

    def test_bad_input(self):
        for tube, params, error in (
                ("-bad", {}, "invalid tube name"),
                ("a" * 201, {}, "invalid tube name"),
                ("sp ace", {}, "invalid tube name"),
                ("t", {"pri": -1}, "invalid pri"),
                ("t", {"pri": 4294967296}, "invalid pri"),
                ("t", {"delay": "x"}, "invalid delay"),
                ("t", {"ttr": ""}, "invalid ttr"),
                ("t", {"ttr": 4294967296}, "invalid ttr")):
            self.assertError(self.put_form(tube, b"x", params), 400, error)
        c = self.text()
        self.assertEqual(stats_of(c, "stats")["current-jobs-ready"], "0")
        # Only POST.
        self.assertEqual(self.dash("GET", "tubes/t/put").status, 404)

    def test_needs_x_requested_with(self):
        self.assertError(self.put_form("t", b"x", headers=[]), 403,
                         "missing X-Requested-With header")
        self.assertEqual(stats_of(self.text(), "stats")["current-jobs-ready"], "0")

    def test_refuses_a_foreign_page(self):
        # X-Requested-With is not all: a browser that lets another site's page send it
        # (or a page of a sibling subdomain) still says where the request comes from.
        for extra in ([("Origin", "http://evil.example")], [("Sec-Fetch-Site", "cross-site")]):
            self.assertError(self.put_form("t", b"x", headers=XRW + extra), 403,
                             "cross-site request refused")
        self.assertEqual(stats_of(self.text(), "stats")["current-jobs-ready"], "0")
        host = "127.0.0.1:%d" % self.server.admin_port
        same = XRW + [("Host", host), ("Origin", "http://" + host), ("Sec-Fetch-Site", "same-origin")]
        self.assertEqual(self.put_form("t", b"x", headers=same).status, 201)

    def test_job_too_big(self):
        # The default -z is 65535: one byte more is refused by the put; a body past the
        # listener's limit (64 KiB) by the HTTP layer, before it is read.
        self.assertEqual(self.put_form("t", b"z" * 65535).status, 201)
        self.assertError(self.put_form("t", b"z" * 65536), 413, "job too big")
        c = self.conn(admin=True)
        c.send(HttpConn.build("POST", API + "tubes/t/put", headers=dict(XRW),
                              content_length=65537))
        self.assertEqual(c.read_response().status, 413)
        self.assertEqual(stats_of(self.text(), "stats")["current-jobs-ready"], "1")

    def test_draining(self):
        self.server.signal(signal.SIGUSR1)
        self.assertTrue(wait_until(lambda: self.adm("GET", "/readyz").status == 503, timeout=HANG))
        self.assertError(self.put_form("t", b"x"), 503, "server is draining")


class BigJobsPutTest(PutCase):
    server_args = ("-z", "200000")

    def test_body_limit_follows_max_job_size(self):
        r = self.put_form("big", b"b" * 200000)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(len(self.dash("GET", "jobs/%d/body" % r.json()["id"]).body), 200000)
        # Past -z, and so past the listener's limit: refused by the HTTP layer.
        self.assertError(self.put_form("big", b"b" * 200001), 413, "body too large")

    def test_other_routes_keep_64_kib(self):
        # Only the put takes -z: a route that needs no login (or another dashboard route)
        # is refused a larger body on its head, before a byte of it is read.
        for path in ("/metrics", "/healthz", "/nope", "/token/ns", API + "tubes/big/kick",
                     API + "tubes/big/put/x", "/x" + API + "tubes/big/put"):
            c = self.conn(admin=True)
            c.send(HttpConn.build("POST", path, headers=dict(XRW), content_length=65537))
            self.assertEqual(c.read_response().status, 413, path)
            c.close()
        self.assertEqual(self.adm("POST", "/metrics", b"m" * 65536, headers=XRW).status, 404)


class OutOfMemoryPutTest(PutCase):
    server_args = ("--max-memory", "200K")

    def test_out_of_memory(self):
        codes = [self.put_form("t", b"m" * 60000) for _ in range(6)]
        self.assertEqual(codes[0].status, 201)
        self.assertError(codes[-1], 503, "out of memory")


class AuthTest(AccountCase, PutCase):
    def test_put_and_search_need_the_account(self):
        good = self.GOOD
        bad = [("Authorization", "Basic " + base64.b64encode(b"ops:nope").decode())]
        for headers in (XRW, bad + XRW):
            self.assertError(self.put_form("t", b"x", headers=headers), 401, "unauthorized")
            r = self.adm("GET", API + "tubes/t/search", headers=headers, params=[("q", "x")])
            self.assertError(r, 401, "unauthorized")
        self.assertEqual(stats_of(self.text(), "stats")["current-jobs-ready"], "0")
        r = self.put_form("t", b"x", headers=good + XRW)
        self.assertEqual(r.status, 201, r)
        r = self.adm("GET", API + "tubes/t/search", headers=good, params=[("q", "x")])
        self.assertEqual((r.status, len(r.json()["matches"])), (200, 1), r)


def snippet(m):
    return base64.b64decode(m["snippet"])


class SearchTest(PutCase):
    def search(self, tube, **params):
        return self.djson("GET", "tubes/%s/search" % q(tube), params)

    def test_matches_in_every_state(self):
        c = self.text()
        ready = self.put(c, "s", b"a Needle here")
        self.put(c, "s", b"nothing")
        delayed = self.put(c, "s", b"needle later", delay=3600)
        buried = self.bury(c, "s", 1, b"buried needle")[0]
        reserved = self.put(c, "s", b"reserved NEEDLE")
        c.cmd("watch s")
        self.assertTrue(c.cmd("reserve-job %d" % reserved).startswith(b"RESERVED"))
        d = self.search("s", q="needle")
        self.assertEqual([(m["id"], m["state"]) for m in d["matches"]],
                         [(ready, "ready"), (delayed, "delayed"), (reserved, "reserved"),
                          (buried, "buried")])
        self.assertEqual((d["tube"], d["state"], d["scanned"], d["cursor"]), ("s", "all", 5, None))
        self.assertEqual(d["scanned_bytes"], sum(len(b) for b in (
            b"a Needle here", b"nothing", b"needle later", b"buried needle", b"reserved NEEDLE")))
        m = d["matches"][0]
        self.assertEqual((m["body_size"], m["at"], m["snippet_at"], snippet(m)),
                         (13, 2, 0, b"a Needle here"))
        # Match case; one state.
        d = self.search("s", q="NEEDLE", match_case=1)
        self.assertEqual([m["id"] for m in d["matches"]], [reserved])
        d = self.search("s", q="needle", state="delayed")
        self.assertEqual(([m["id"] for m in d["matches"]], d["scanned"]), ([delayed], 1))
        # Nothing is reserved, released or changed by a search.
        st = stats_of(c, "stats-job %d" % ready)
        self.assertEqual((st["state"], st["reserves"]), ("ready", "0"))

    def test_snippet_of_a_long_binary_body(self):
        c = self.text()
        body = b"\x00" * 1000 + b"\xffkey=\x01\x02" + b"\x80" * 1000
        jid = self.put(c, "bin", body)
        d = self.search("bin", q="KEY=\x01", match_case=0)
        (m,) = d["matches"]
        self.assertEqual((m["id"], m["at"], m["snippet_at"]), (jid, 1001, 1001 - 48))
        self.assertEqual(snippet(m), body[1001 - 48:1001 + 5 + 48])

    def test_bad_input(self):
        c = self.text()
        self.put(c, "t", b"x")
        for params, status, error in (
                ({}, 400, "invalid q"),
                ({"q": ""}, 400, "invalid q"),
                ({"q": "x" * 257}, 400, "invalid q"),
                ({"q": "x", "state": "nope"}, 400, "invalid state"),
                ({"q": "x", "match_case": 2}, 400, "invalid match_case"),
                ({"q": "x", "limit": 0}, 400, "invalid limit"),
                ({"q": "x", "limit": 101}, 400, "invalid limit"),
                ({"q": "x", "cursor": "ready"}, 400, "invalid cursor"),
                ({"q": "x", "cursor": "ready:0"}, 400, "invalid cursor"),
                ({"q": "x", "cursor": "all:3"}, 400, "invalid cursor"),
                ({"q": "x", "state": "ready", "cursor": "buried:3"}, 400, "invalid cursor")):
            self.assertError(self.dash("GET", "tubes/t/search", params), status, error)
        self.assertError(self.dash("GET", "tubes/nope/search", {"q": "x"}), 404, "tube not found")
        self.assertError(self.dash("GET", "tubes/-x/search", {"q": "x"}), 400, "invalid tube name")
        self.assertEqual(len(self.search("t", q="x" * 256)["matches"]), 0)

    def test_cursor_and_limit(self):
        c = self.text()
        ids = self.fill(c, "many", 2500, b"job with a pin in it")
        seen, cursors, rounds = [], [], 0
        cursor = None
        while True:
            params = {"q": "PIN", "limit": 100}
            if cursor:
                params["cursor"] = cursor
            d = self.search("many", **params)
            self.assertLessEqual(len(d["matches"]), 100)
            self.assertLessEqual(d["scanned"], 1000)
            seen += [m["id"] for m in d["matches"]]
            cursor = d["cursor"]
            rounds += 1
            if cursor is None:
                break
            cursors.append(cursor)
        self.assertEqual(seen, ids)  # every job once, in id order
        # The 25th answer had its 100 matches before it could see the end: a 26th says so.
        self.assertEqual((rounds, d["matches"], d["scanned"]), (26, [], 0))
        self.assertEqual(cursors[0], "ready:%d" % ids[100])
        # Without matches an answer scans up to 1000 jobs and says where to go on.
        d = self.search("many", q="absent")
        self.assertEqual((d["matches"], d["scanned"], d["cursor"]), ([], 1000, "ready:%d" % ids[1000]))
        d = self.search("many", q="absent", cursor=d["cursor"])
        d = self.search("many", q="absent", cursor=d["cursor"])
        self.assertEqual((d["scanned"], d["cursor"]), (500, None))


class BigBodiesSearchTest(PutCase):
    server_args = ("-z", str(3 << 20))

    def test_in_slices_with_clients_answered_between(self):
        # Each body is larger than a step's byte budget (1 MiB): it is scanned over several
        # steps, peeked again each time, and a match across two pieces is found once.
        c = self.text()
        size = 3 << 20
        bodies = []
        for at in ((1 << 20) - 3, 2 << 20, size - 6):  # across the first piece's end, ...
            b = bytearray(b"." * size)
            b[at:at + 6] = b"needle"
            bodies.append((at, bytes(b)))
        ids = [self.put(c, "huge", b) for _, b in bodies]
        peeks = lambda: self.ystats(c, "stats")["cmd-peek"]  # noqa: E731
        # The text client's `stats` is answered between the steps, so it sees the search
        # part way (its peeks counted); searches are repeated until it has (a client that
        # the machine held up through a whole search sees only before and after).
        part_way = []
        for _ in range(50):
            a = self.conn(admin=True)
            before = peeks()
            a.send(HttpConn.build("GET", API + "tubes/huge/search?q=needle"))
            seen = []
            while not select.select([a.sock], [], [], 0)[0]:
                seen.append(peeks())
            d = a.read_response().json()
            after = peeks()
            self.assertEqual([(m["id"], m["at"]) for m in d["matches"]],
                             [(i, at) for i, (at, _) in zip(ids, bodies)])
            self.assertEqual((d["scanned"], d["scanned_bytes"]), (3, (2 << 20) + 2 * size))
            self.assertEqual(after - before, 2 + 3 + 3)  # a peek per piece
            part_way += [v for v in seen if before < v < after]
            a.close()
            if part_way:
                break
        self.assertTrue(part_way, "no stats answered while a search ran")


@unittest.skipUnless(redis_fixture.available(), "redis-server is not installed")
class RedisStoreTest(unittest.TestCase):
    """The put and the search through the Redis store's session, as on the embedded one."""

    def test_put_and_search(self):
        srv, a = start_on_redis(self)
        r = a.request("POST", API + "tubes/rd/put?pri=5&delay=100", b"on redis: Needle",
                      headers=XRW)
        self.assertEqual(r.status, 201, r)
        delayed = r.json()["id"]
        r = a.request("POST", API + "tubes/rd/put", b"a needle, ready", headers=XRW)
        ready = r.json()["id"]
        a.request("POST", API + "tubes/rd/put", b"nothing", headers=XRW)
        c = srv.connect()
        self.addCleanup(c.close)
        st = stats_of(c, "stats-job %d" % delayed)
        self.assertEqual((st["tube"], st["pri"], st["state"]), ('"rd"', "5", "delayed"))
        r = a.request("GET", API + "tubes/rd/search?q=needle")
        self.assertEqual(r.status, 200, r)
        d = r.json()
        self.assertEqual([(m["id"], m["state"]) for m in d["matches"]],
                         [(ready, "ready"), (delayed, "delayed")])
        self.assertEqual((d["scanned"], d["cursor"]), (3, None))


if __name__ == "__main__":
    unittest.main()

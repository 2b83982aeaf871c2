"""Black-box tests of bugs found reviewing (and fuzzing, fuzz/http_fuzz.cc) the HTTP front
ends against docs/HTTP.md: each test names what was wrong.

Run: python3 -m unittest -v tests/blackbox/test_http_review.py   (binary: $STALKD_BIN)
"""
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import NS, HttpCase, HttpConn, accounts_file  # noqa: E402

MALFORMED = {"error": "malformed request"}
ADMIN_AUTH = "Basic YWRtaW46cHc="  # admin:pw


class DeadLetterOrderTest(HttpCase):
    """The dead letter's head is the job buried first (peek, respawn and delete all take it
    from there); delete used to go by job id instead."""

    def bury_in(self, t, order):
        """Puts one job per entry of `order` into ns/q over the text protocol and buries them
        in that order (indexes into the put order); returns the ids in put order."""
        self.assertEqual(t.cmd("use ns/q"), b"USING ns/q\r\n")
        ids = []
        for i in range(len(order)):
            r = t.cmd("put 0 0 60 1\r\n%d" % i)
            self.assertTrue(r.startswith(b"INSERTED "), r)
            ids.append(r.split()[1].decode())
        for i in order:
            self.assertTrue(t.cmd("reserve-job %s" % ids[i]).startswith(b"RESERVED"))
            self.assertEqual(t.cmd("bury %s 0" % ids[i]), b"BURIED\r\n")
        return ids

    def head(self):
        return self.api("GET", "/api/ns/q/deadletter").json()["deadletter_head"]

    def test_delete_takes_the_head(self):
        t = self.text()
        ids = self.bury_in(t, [2, 0, 1])  # the newest job is buried first
        self.assertEqual(self.head(), ids[2])
        r = self.api("DELETE", "/api/ns/q/deadletter", params={"limit": 1})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(t.cmd("stats-job %s" % ids[2]), b"NOT_FOUND\r\n")
        self.assertEqual(self.head(), ids[0])
        r = self.api("DELETE", "/api/ns/q/deadletter", params={"limit": 1})
        self.assertEqual(t.cmd("stats-job %s" % ids[0]), b"NOT_FOUND\r\n")
        self.assertEqual(self.head(), ids[1])

    def test_delete_and_respawn_agree(self):
        t = self.text()
        ids = self.bury_in(t, [3, 1, 2, 0])
        self.assertEqual(self.api("PUT", "/api/ns/q/deadletter").json()["count"], 1)
        self.assertEqual(self.consume_job("q")["job_id"], ids[3])
        self.assertEqual(self.api("DELETE", "/api/ns/q/deadletter", params={"limit": 2}).status, 204)
        self.assertEqual(t.cmd("stats-job %s" % ids[1]), b"NOT_FOUND\r\n")
        self.assertEqual(t.cmd("stats-job %s" % ids[2]), b"NOT_FOUND\r\n")
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json(),
                         {"namespace": NS, "queue": "q", "deadletter_size": 1, "deadletter_head": ids[0]})

    def test_delete_more_than_a_slice(self):
        t = self.text()
        self.assertEqual(t.cmd("use ns/q"), b"USING ns/q\r\n")
        n = 2500
        t.send(b"".join(b"put 0 0 60 1\r\nx\r\n" for _ in range(n)))
        ids = [t.read_line().split()[1].decode() for _ in range(n)]
        t.send(b"".join(b"reserve-job %s\r\n" % i.encode() for i in reversed(ids)))
        for _ in range(n):
            t.read_line(), t.read_line()  # RESERVED line and body
        t.send(b"".join(b"bury %s 0\r\n" % i.encode() for i in reversed(ids)))
        for _ in range(n):
            self.assertEqual(t.read_line(), b"BURIED\r\n")
        r = self.api("DELETE", "/api/ns/q/deadletter", params={"limit": 2200})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.api("GET", "/api/ns/q/deadletter").json(),
                         {"namespace": NS, "queue": "q", "deadletter_size": 300, "deadletter_head": ids[299]})


class AdminAuthPathTest(HttpCase):
    """With --admin-accounts, the token and limit routes need an account whatever the spelling
    of their path: "/%74oken/ns" is routed as "/token/ns", so it must be guarded as it."""

    make_token = False

    def setUp(self):
        self.server_args = ("--admin-accounts", accounts_file(self, "admin:pw\n"))
        super().setUp()

    def test_encoded_paths_need_an_account(self):
        for method, path in (("GET", "/%74oken/ns"), ("POST", "/%74oken/ns?description=x"),
                             ("GET", "/%6Cimits"), ("GET", "/limits"), ("GET", "/token/n%73"),
                             ("DELETE", "/toke%6E/ns/abcdefabcdef"),
                             ("GET", "/%74oken/ns/abcdefabcdef/limit")):
            r = self.adm(method, path)
            self.assertError(r, 401, "unauthorized")
            self.assertEqual(r.header("www-authenticate"), 'Basic realm="Authorization Required"')

    def test_with_an_account(self):
        auth = {"Authorization": ADMIN_AUTH}
        r = self.adm("POST", "/%74oken/ns?description=x", headers=auth)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.adm("GET", "/%6Cimits", headers=auth).json(), [])
        self.assertEqual(len(self.adm("GET", "/token/ns", headers=auth).json()["tokens"]), 1)

    def test_probes_need_none(self):
        self.assertEqual(self.adm("GET", "/%68ealthz").json(), {"status": "ok"})
        self.assertEqual(self.adm("GET", "/info").status, 200)


class AdminMalformedTargetTest(HttpCase):
    """A target with a malformed %-escape is a transport error on the admin listener too:
    400 {"error":"malformed request"}, then the connection closes (docs/HTTP.md, section 2)."""

    make_token = False

    def test_bad_escape(self):
        c = self.conn(admin=True)
        c.send(HttpConn.build("GET", "/healthz") + HttpConn.build("GET", "/to%zzken/ns") +
               HttpConn.build("GET", "/healthz"))
        self.assertEqual(c.read_response().status, 200)
        r = c.read_response()
        self.assertEqual((r.status, r.json()), (400, MALFORMED))
        self.assertEqual(r.header("connection"), "close")
        self.assertTrue(c.closed_by_peer())
        self.assertEqual(c.buf, b"")

    def test_counted_under_a_route(self):
        """Such requests, on either listener, were counted in /metrics under route=""."""
        for conn in (self.conn(), self.conn(admin=True)):
            self.assertEqual(conn.request("GET", "/api/n%zz/q").json(), MALFORMED)
        text = self.adm("GET", "/metrics").body.decode()
        self.assertNotIn('route=""', text)
        self.assertIn('stalkd_http_requests_total{route="unknown",code="400"} 2', text)


class DeepJsonTest(HttpCase):
    """A bulk body or a limit nested deeper than the stack allows used to crash the server
    (RapidJSON's parser is recursive unless told otherwise)."""

    def test_deeply_nested_bulk(self):
        for body in (b"[" * 3_000_000, b"[" * 200_000 + b"]" * 199_999):
            r = self.api("PUT", "/api/ns/q/bulk", body)
            self.assertError(r, 400, "request body should be an array of objects")
        self.publish("q", b"alive")

    def test_deeply_nested_bulk_element(self):
        depth = 100_000
        body = b"[" + b"[" * depth + b"]" * depth + b"]"
        r = self.api("PUT", "/api/ns/q/bulk", body)
        self.assertError(r, 413, "job too large")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)

    def test_deeply_nested_limit(self):
        tid = self.token.split(".")[0]
        for body in (b"{\"read\":" + b"[" * 65000, b"[" * 65536):
            r = self.adm("PUT", "/token/ns/%s/limit" % tid, body)
            self.assertError(r, 400, "invalid limit")
        self.assertEqual(self.adm("GET", "/healthz").status, 200)


class ExpectContinueHttp10Test(HttpCase):
    """An HTTP/1.0 client is never sent 100 Continue (RFC 9110, 10.1.1: a server MUST ignore
    a 100-continue expectation in an HTTP/1.0 request)."""

    def test_no_interim_response_for_http10(self):
        c = self.conn()
        c.send(b"PUT /api/ns/q HTTP/1.0\r\nX-Token: %s\r\nExpect: 100-continue\r\n"
               b"Content-Length: 5\r\n\r\n" % self.token.encode())
        self.assertTrue(c.no_data(0.3), c.buf)
        c.send(b"hello")
        r = c.read_response()
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.interim, [])

    def test_http11_still_gets_it(self):
        c = self.conn()
        c.send(b"PUT /api/ns/q HTTP/1.1\r\nX-Token: %s\r\nExpect: 100-continue\r\n"
               b"Content-Length: 5\r\n\r\n" % self.token.encode())
        self.assertEqual(c.read_head()[1], 100)
        c.send(b"hello")
        self.assertEqual(c.read_response().status, 201)


class TokenFormTest(HttpCase):
    """POST /token/:ns takes its description from the form body before the query, as Go's
    Request.Form (docs/HTTP.md: "the body's value wins")."""

    make_token = False

    def test_body_wins(self):
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        r = self.adm("POST", "/token/ns", b"description=from+body", headers=form,
                     params={"description": "from-query"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(list(self.adm("GET", "/token/ns").json()["tokens"].values()), ["from body"])

    def test_empty_in_body_is_empty(self):
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        r = self.adm("POST", "/token/ns", b"description=", headers=form,
                     params={"description": "from-query"})
        self.assertError(r, 400, "invalid description")

    def test_query_alone(self):
        r = self.adm("POST", "/token/ns", b"other=1", params={"description": "q"})
        self.assertEqual(r.status, 201, r)



class AdminLimitRouteTest(HttpCase):
    """The limit routes checked the pool before the method and named no route for a bad pool
    or an unknown token: PATCH with a bad pool was 400, not 404, and /metrics counted those
    answers under route=""."""

    def test_unknown_method_first(self):
        tid = self.token.split(".")[0]
        for token in ("x:" + tid, tid, "nonexistent"):
            self.assertError(self.adm("PATCH", "/token/ns/%s/limit" % token), 404, "api not found")

    def test_every_answer_has_a_route(self):
        tid = self.token.split(".")[0]
        self.assertError(self.adm("GET", "/token/ns/x:%s/limit" % tid), 400, "the pool was not exists")
        self.assertError(self.adm("PUT", "/token/ns/%s/limit" % tid, b"{}", params={"pool": "x"}),
                         400, "the pool was not exists")
        self.assertError(self.adm("DELETE", "/token/ns/nonexistent/limit"), 404, "token not found")
        self.assertError(self.adm("GET", "/token/ns/%s/limit" % tid), 404, "limit not found")
        text = self.adm("GET", "/metrics").body.decode()
        self.assertNotIn('route=""', text)
        for series in ('{route="get_limit",code="400"} 1', '{route="set_limit",code="400"} 1',
                       '{route="delete_limit",code="404"} 1', '{route="get_limit",code="404"} 1'):
            self.assertIn("stalkd_http_requests_total" + series, text)


class JsonUtf8Test(HttpCase):
    """A token's description may be any bytes (percent-encoded); the list showed them raw,
    which is not JSON. As lmstfy's encoding/json, each invalid byte is now U+FFFD."""

    make_token = False

    def test_description_of_any_bytes(self):
        r = self.adm("POST", "/token/ns", params={"description": "%FFok%C3%A9%ED%A0%80"})
        self.assertEqual(r.status, 201, r)
        tokens = json.loads(self.adm("GET", "/token/ns").body.decode("utf-8"))["tokens"]
        self.assertEqual(list(tokens.values()), ["\ufffdok\u00e9\ufffd\ufffd\ufffd"])


class TokenCreatedTimeTest(HttpCase):
    """The token file keeps each token's creation time in unix seconds (tokens.h); it held
    the monotonic clock's seconds (since boot), so tokens made after a reboot listed before
    older ones."""

    make_token = False

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stalkd-tokens-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.server_args = ("-b", self.dir)
        super().setUp()

    def test_created_is_unix_time(self):
        before = time.time()
        self.assertEqual(self.adm("POST", "/token/ns", params={"description": "d"}).status, 201)
        with open(os.path.join(self.dir, "tokens")) as f:
            lines = [l.split() for l in f if l.startswith("token ")]
        self.assertEqual(len(lines), 1)
        self.assertLessEqual(abs(int(lines[0][2]) - before), 60, lines)

if __name__ == "__main__":
    unittest.main()

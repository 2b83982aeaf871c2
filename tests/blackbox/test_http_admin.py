"""Black-box tests of stalkd's HTTP admin listener (docs/HTTP.md, section 5) and of what
outlives a restart: tokens (create, list, delete, checks), rate limits (set, get, delete,
the 429 of the throttler and its refunds), /info, /version, /pools, /healthz, /readyz,
basic auth from --admin-accounts, /metrics (promtool check metrics, the tube cap), and
tokens, limits and jobs surviving kill -9 with -b.

Run: python3 -m unittest -v tests/blackbox/test_http_admin.py   (binary: $STALKD_BIN)
"""
import base64
import hashlib  # noqa: F401
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import (API_NOT_FOUND, NS, STALKD_BIN, HttpCase, HttpConn, HttpServer,  # noqa: E402
                      free_port, parse_yaml, unb64, wait_until)

TOKEN_RE = r"^[0-9a-f]{12}\.[0-9a-f]{32}$"


def token_id(token):
    return token.split(":")[-1].split(".")[0]


class TokenTest(HttpCase):
    make_token = False

    def test_create_list_delete(self):
        r = self.adm("POST", "/token/ns", params={"description": "billing+workers"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(set(r.json()), {"token"})
        tok = r.json()["token"]
        self.assertRegex(tok, TOKEN_RE)
        r = self.adm("GET", "/token/ns")
        self.assertEqual((r.status, r.json()), (200, {"tokens": {token_id(tok): "billing workers"}}))
        self.assertEqual(self.api("PUT", "/api/ns/q", b"x", token=tok).status, 201)
        r = self.adm("DELETE", "/token/ns/" + tok)
        self.assertEqual((r.status, r.body), (204, b""))
        self.assertEqual(self.adm("GET", "/token/ns").json(), {"tokens": {}})
        self.assertError(self.api("PUT", "/api/ns/q", b"x", token=tok), 401, "invalid token")
        self.assertEqual(self.adm("DELETE", "/token/ns/" + tok).status, 204)   # again: still 204

    def test_delete_by_id_and_with_pool_prefix(self):
        a = self.new_token("ns", "a")
        b = self.new_token("ns", "b")
        self.assertEqual(self.adm("DELETE", "/token/ns/" + token_id(a)).status, 204)
        self.assertError(self.api("GET", "/api/ns/q/peek", token=a), 401, "invalid token")
        self.assertEqual(self.adm("DELETE", "/token/ns/default:" + b).status, 204)
        self.assertError(self.api("GET", "/api/ns/q/peek", token=b), 401, "invalid token")
        c = self.new_token("ns", "c")
        self.assertError(self.adm("DELETE", "/token/ns/other:" + c), 400, "the pool was not exists")
        # a token of another namespace is not deleted through this one
        self.assertEqual(self.adm("DELETE", "/token/other/" + c).status, 204)
        self.assertEqual(self.api("GET", "/api/ns/q/peek", token=c).status, 404)

    def test_list_is_per_namespace(self):
        a = self.new_token("ns", "first")
        b = self.new_token("ns", "second")
        c = self.new_token("other", "third")
        self.assertEqual(self.adm("GET", "/token/ns").json(),
                         {"tokens": {token_id(a): "first", token_id(b): "second"}})
        self.assertEqual(self.adm("GET", "/token/other").json(), {"tokens": {token_id(c): "third"}})
        self.assertEqual(self.adm("GET", "/token/nobody").json(), {"tokens": {}})
        self.assertNotIn(a.split(".")[1], self.adm("GET", "/token/ns").body.decode())
        self.assertEqual(len({a, b, c}), 3)

    def test_description_from_form_body(self):
        r = self.adm("POST", "/token/ns", b"description=from+the+form%21",
                     headers=[("Content-Type", "application/x-www-form-urlencoded")])
        self.assertEqual(r.status, 201, r)
        self.assertEqual(list(self.adm("GET", "/token/ns").json()["tokens"].values()), ["from the form!"])

    def test_pool_parameter(self):
        r = self.adm("POST", "/token/ns", params={"description": "d", "pool": "default"})
        self.assertEqual(r.status, 201)
        tok = r.json()["token"]
        self.assertTrue(tok.startswith("default:"), tok)
        self.assertEqual(self.api("GET", "/api/ns/q/peek", token=tok).status, 404)
        for path, method in (("/token/ns", "POST"), ("/token/ns", "GET")):
            r = self.adm(method, path, params={"description": "d", "pool": "other"})
            self.assertError(r, 400, "the pool was not exists")

    def test_create_checks(self):
        for params in ({}, {"description": ""}, {"description": "d" * 1025}):
            self.assertError(self.adm("POST", "/token/ns", params=params), 400, "invalid description")
        self.assertEqual(self.adm("POST", "/token/ns", params={"description": "d" * 1024}).status, 201)
        self.assertError(self.adm("POST", "/token/" + "n" * 256, params={"description": "d"}), 400,
                         "the namespace name was too long")
        self.assertError(self.adm("POST", "/token/" + "n" * 199, params={"description": "d"}), 400,
                         "the namespace name was too long")
        self.assertEqual(self.adm("POST", "/token/" + "n" * 198, params={"description": "d"}).status, 201)
        for ns in ("n.s", "-ns", "n%20s"):
            self.assertError(self.adm("POST", "/token/" + ns, params={"description": "d"}), 400,
                             "namespace name contains forbidden characters")

    def test_chosen_token(self):
        mine = "lmstfy-token-0123456789"
        r = self.adm("POST", "/token/ns", params={"description": "d", "token": mine})
        self.assertEqual((r.status, r.json()), (201, {"token": mine}))
        self.assertEqual(self.api("PUT", "/api/ns/q", b"x", token=mine).status, 201)
        self.assertEqual(self.api("PUT", "/api/ns/q", b"x", token="default:" + mine).status, 201)
        self.assertError(self.adm("POST", "/token/ns", params={"description": "d", "token": mine}),
                         400, "the token has already existed")
        self.assertError(self.adm("POST", "/token/ns", params={"description": "d", "token": "a" * 19}),
                         400, "the user token was too short")
        for bad in ("a" * 129, "a" * 20 + "%20", "a" * 20 + "%2F", "a" * 20 + "!"):
            self.assertError(self.adm("POST", "/token/ns", params={"description": "d", "token": bad}),
                             400, "invalid user token")
        # the same token in another namespace is another token
        r = self.adm("POST", "/token/other", params={"description": "d", "token": mine})
        self.assertEqual(r.status, 201)
        ids = list(self.adm("GET", "/token/ns").json()["tokens"])
        self.assertEqual(len(ids), 1)
        self.assertRegex(ids[0], r"^[0-9a-f]{12}$")
        # The id is random, not derived from the token: a list of ids tells nothing about
        # the tokens (one derived from sha256 could be used to test guesses offline).
        derived = hashlib.sha256(("ns\n" + mine).encode()).hexdigest()[:12]
        self.assertNotEqual(ids[0], derived)
        # The 429 of a chosen token names its id too.
        self.assertEqual(self.adm("PUT", "/token/ns/%s/limit" % ids[0], b'{"write":1,"interval":600}').status, 200)
        self.api("PUT", "/api/ns/q", b"x", token=mine)
        self.assertError(self.api("PUT", "/api/ns/q", b"x", token=mine), 429,
                         "token(%s) produce reach the limit rate, please retry later" % ids[0], key="msg")
        self.assertEqual(self.adm("DELETE", "/token/ns/" + mine).status, 204)
        self.assertError(self.api("PUT", "/api/ns/q", b"x", token=mine), 401, "invalid token")
        self.assertEqual(self.api("PUT", "/api/other/q", b"x", token=mine).status, 201)

    def test_tokens_without_b_are_memory_only(self):
        tok = self.new_token("ns")
        self.server.stop()
        self._close_conns()
        self.server = HttpServer()
        self.addCleanup(self.server.stop)
        self._api = self._adm = None
        self.assertError(self.api("GET", "/api/ns/q/peek", token=tok), 401, "invalid token")
        self.assertEqual(self.adm("GET", "/token/ns").json(), {"tokens": {}})


class LimitTest(HttpCase):
    def limit(self, method, body=b"", token=None):
        return self.adm(method, "/token/ns/%s/limit" % (token or self.token), body)

    def test_set_get_delete(self):
        self.assertError(self.limit("GET"), 404, "limit not found")
        r = self.limit("POST", b'{"read":100,"write":200,"interval":10}')
        self.assertEqual((r.status, r.json()), (201, {"limiter": {"read": 100, "write": 200, "interval": 10}}))
        self.assertEqual(self.limit("GET").json(), {"read": 100, "write": 200, "interval": 10})
        self.assertEqual(self.limit("GET", token=token_id(self.token)).json()["write"], 200)
        self.assertError(self.limit("POST", b'{"read":1,"write":2,"interval":10}'), 400,
                         "the limit has already existed")
        r = self.limit("PUT", b'{"write":5,"interval":3,"forbid_read":true}')
        self.assertEqual((r.status, r.json()), (200, {"limiter": {"read": 0, "write": 5, "interval": 3}}))
        r = self.adm("GET", "/limits")
        self.assertEqual((r.status, r.json()), (200, [{"namespace": NS, "token": token_id(self.token),
                                                      "limiter": {"read": 0, "write": 5, "interval": 3}}]))
        r = self.limit("DELETE")
        self.assertEqual((r.status, r.json()), (200, {"msg": "success"}))
        self.assertEqual(self.limit("DELETE").json(), {"msg": "success"})
        self.assertError(self.limit("GET"), 404, "limit not found")
        self.assertEqual(self.adm("GET", "/limits").json(), [])

    def test_checks(self):
        cases = ((b"not json", "invalid limit"), (b"[1]", "invalid limit"),
                 (b'{"read":"1","interval":1}', "invalid limit"), (b'{"read":1.5,"interval":1}', "invalid limit"),
                 (b'{"read":-1,"write":1,"interval":1}', "invalid limit"),
                 (b'{"read":0,"write":0,"interval":1}', "the read and write of limiter can't be 0 at the same time"),
                 (b'{"interval":1}', "the read and write of limiter can't be 0 at the same time"),
                 (b'{"read":1}', "interval should be > 0"),
                 (b'{"read":1,"interval":-5}', "interval should be > 0"))
        for method in ("POST", "PUT"):
            for body, err in cases:
                self.assertError(self.limit(method, body), 400, err)
            self.assertError(self.limit(method, b'{"read":1,"interval":1}', token="0" * 12), 404,
                             "token not found")
        self.assertError(self.limit("GET", token="0" * 12), 404, "token not found")
        self.assertError(self.limit("DELETE", token="0" * 12), 404, "token not found")
        self.assertError(self.limit("GET"), 404, "limit not found")

    def test_write_limit_gives_429(self):
        self.limit("PUT", b'{"write":2,"interval":60}')
        # failed publishes are given back to the window
        for _ in range(3):
            self.assertError(self.api("PUT", "/api/ns/q?ttl=x", b"x"), 400, "invalid ttl")
        self.publish("q")
        self.api("PUT", "/api/ns/q/bulk", b"[1,2,3]")
        r = self.api("PUT", "/api/ns/q", b"x")
        # lmstfy's text, but naming the token's id, never the token itself
        msg = "token(%s) produce reach the limit rate, please retry later" % token_id(self.token)
        self.assertError(r, 429, msg, key="msg")
        self.assertNotIn(self.token.split(".")[1].encode(), r.body)
        self.assertError(self.api("PUT", "/api/ns/q/bulk", b"[1]"), 429, msg, key="msg")
        # with a pool prefix too
        self.assertError(self.api("PUT", "/api/ns/q", b"x", token="default:" + self.token), 429, msg, key="msg")
        # reads and the unlimited routes go on
        self.assertEqual(self.consume("q").status, 200)
        jid = self.publish_unlimited()
        self.assertEqual(self.api("DELETE", "/api/ns/q/job/" + jid).status, 204)
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 3)
        # the check comes after the token's and before the parameters'
        self.assertError(self.api("PUT", "/api/ns/q?ttl=x", b"x", token="bad"), 401, "invalid token")
        self.assertError(self.api("PUT", "/api/ns/q?ttl=x", b"x"), 429, msg, key="msg")
        # another token of the namespace has no limit
        other = self.new_token(NS)
        self.assertEqual(self.api("PUT", "/api/ns/q", b"x", token=other).status, 201)

    def publish_unlimited(self):
        """Republish is not limited."""
        r = self.api("PUT", "/api/ns/q/job/999999", b"r")
        self.assertEqual(r.status, 201, r)
        return r.json()["job_id"]

    def test_read_limit_and_window(self):
        self.limit("PUT", b'{"read":1,"interval":1}')
        # consumes that find nothing do not count
        for _ in range(3):
            self.assertEqual(self.consume("q").status, 404)
        self.publish("q")
        self.publish("q")
        self.assertEqual(self.consume("q").status, 200)
        msg = "token(%s) consume reach the limit rate, please retry later" % token_id(self.token)
        self.assertError(self.consume("q"), 429, msg, key="msg")
        self.assertError(self.consume("q", count=5), 429, msg, key="msg")
        # a new window opens after `interval`
        self.assertTrue(wait_until(lambda: self.consume("q").status == 200, timeout=3, interval=0.2))
        # writes are not limited (write 0)
        for _ in range(5):
            self.publish("q")

    def test_refund_goes_to_the_window_the_request_was_counted_in(self):
        # read=1 per 3 s. A long poll counted in one window that ends without a job in the
        # next window gives nothing back to that next window (lmstfy's RemedyLimiter gives
        # back to whatever window is open: long polls started in successive windows could
        # then let a token take a burst). The windows are driven by the answers, not by
        # time: the poll opens the first window; consumes are refused until a consume opens
        # the second; the poll ends inside it. A round in which this client was too slow
        # to ask before the second window ended proves nothing and is played again.
        interval = 3
        self.limit("PUT", b'{"read":1,"interval":%d}' % interval)
        for _ in range(6):
            self.publish("full")
        msg = "token(%s) consume reach the limit rate, please retry later" % token_id(self.token)
        t = self.text()

        def polling():
            r = t.cmd("stats-tube ns/empty")
            return r.startswith(b"OK ") and parse_yaml(r)["current-waiting"] == "1"

        for _ in range(4):
            poll = self.conn(timeout=60)
            poll.send(HttpConn.build("GET", "/api/ns/empty?timeout=%d" % (interval + 1),
                                     headers=[("X-Token", self.token)]))
            # the poll is counted (it fills the first window) once it waits
            self.assertTrue(wait_until(polling, timeout=30))
            while True:
                opened_at = time.monotonic()     # no later than the second window opens
                r = self.consume("full")
                if r.status == 200:
                    break
                self.assertError(r, 429, msg, key="msg")
            self.assertError(poll.read_response(), 404, "no job available", key="msg")
            r = self.consume("full")
            if time.monotonic() - opened_at < interval:
                self.assertError(r, 429, msg, key="msg")
                return
            time.sleep(interval)    # not a readiness wait: every window is over after it
        self.fail("the client never asked within the second window")

    def test_limit_goes_with_its_token(self):
        self.limit("PUT", b'{"write":1,"interval":60}')
        self.publish("q")
        self.assertEqual(self.api("PUT", "/api/ns/q", b"x").status, 429)
        self.assertEqual(self.adm("DELETE", "/token/ns/" + self.token).status, 204)
        self.assertEqual(self.adm("GET", "/limits").json(), [])
        self.assertError(self.limit("GET"), 404, "token not found")

    def test_removing_a_limit_applies_at_once(self):
        self.limit("PUT", b'{"write":1,"interval":60}')
        self.publish("q")
        self.assertEqual(self.api("PUT", "/api/ns/q", b"x").status, 429)
        self.limit("DELETE")
        self.publish("q")
        self.limit("PUT", b'{"write":100,"interval":60}')
        self.publish("q")


class InfoTest(HttpCase):
    def test_info(self):
        self.publish("q2")
        self.publish("q1")
        other = self.new_token("other")
        self.publish("a", ns="other", token=other)
        t = self.text()
        t.cmd("use plain")
        t.put(b"x")
        r = self.adm("GET", "/info")
        self.assertEqual((r.status, r.json()), (200, {"ns": ["q1", "q2"], "other": ["a"]}))

    def test_version(self):
        r = self.adm("GET", "/version")
        self.assertEqual(r.status, 200)
        d = r.json()
        self.assertEqual(set(d), {"version", "build_commit", "build_date"})
        st = parse_yaml(self.text().cmd("stats"))
        self.assertEqual(d["version"], st["version"].strip('"'))
        for v in d.values():
            self.assertIsInstance(v, str)
        # filled at build time: the commit the binary was built from and its date (or
        # SOURCE_DATE_EPOCH's); reproducible, so never the time of the build itself
        self.assertRegex(d["build_date"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if not shutil.which("git") or not os.path.exists(os.path.join(root, ".git")):
            return
        self.assertRegex(d["build_commit"], r"^[0-9a-f]{12}$")
        p = subprocess.run(["git", "-C", root, "log", "-1", "--format=%ct", d["build_commit"]],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        if not os.environ.get("SOURCE_DATE_EPOCH"):
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(p.stdout)))
            self.assertEqual(d["build_date"], when)

    def test_pools(self):
        for params in (None, {"kind": "redis"}, {"kind": "memory"}):
            r = self.adm("GET", "/pools", params=params)
            self.assertEqual((r.status, r.json()), (200, ["default"]))
        self.assertError(self.adm("GET", "/pools", params={"kind": "whatever"}), 400, "invalid kind")

    def test_unknown_admin_routes(self):
        # GET / is the dashboard (docs/DASHBOARD.md); POST / is no route.
        for method, path in (("POST", "/"), ("GET", "/api/ns/q/size"), ("GET", "/token"),
                             ("PUT", "/token/ns"), ("GET", "/token/ns/x/y"), ("POST", "/healthz"),
                             ("GET", "/healthz/"), ("GET", "/debug/pprof/")):
            r = self.adm(method, path)
            self.assertEqual((r.status, r.json()), (404, API_NOT_FOUND), (method, path))


class HealthTest(HttpCase):
    make_token = False

    def test_healthz_and_readyz(self):
        self.assertEqual((self.adm("GET", "/healthz").status, self.adm("GET", "/healthz").json()),
                         (200, {"status": "ok"}))
        r = self.adm("GET", "/readyz")
        self.assertEqual((r.status, r.json()), (200, {"status": "ready"}))

    def test_draining(self):
        self.token = self.new_token(NS)
        self.publish("q", b"before")
        self.server.signal(signal.SIGUSR1)
        self.assertTrue(wait_until(lambda: self.adm("GET", "/readyz").status == 503, timeout=3))
        self.assertEqual(self.adm("GET", "/readyz").json(), {"status": "draining"})
        self.assertEqual(self.adm("GET", "/healthz").status, 200)
        self.assertError(self.api("PUT", "/api/ns/q", b"after"), 503, "server is draining")
        self.assertError(self.api("PUT", "/api/ns/q/bulk", b"[1]"), 503, "server is draining")
        # existing jobs are still served
        self.assertEqual(unb64(self.consume_job("q")["data"]), b"before")


class AccountsCase(HttpCase):
    """A server with --admin-accounts (admin:se:cret and bob:pw)."""
    make_token = False

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stalkd_http_auth_")
        self.addCleanup(shutil.rmtree, self.dir, True)
        path = os.path.join(self.dir, "accounts")
        with open(path, "w") as f:
            f.write("# admins\nadmin:se:cret\r\n\nbob:pw\n")
        self.server_args = ("--admin-accounts", path)
        super().setUp()

    @staticmethod
    def auth(user, password):
        return [("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode())]


class BasicAuthTest(AccountsCase):
    def test_protected_routes(self):
        good = self.auth("admin", "se:cret")
        for method, path, body in (("POST", "/token/ns?description=d", b""), ("GET", "/token/ns", b""),
                                   ("DELETE", "/token/ns/x", b""), ("GET", "/token/ns/x/limit", b""),
                                   ("PUT", "/token/ns/x/limit", b'{"read":1,"interval":1}'),
                                   ("GET", "/limits", b"")):
            for headers in (None, self.auth("admin", "wrong"), self.auth("nobody", "pw"),
                            self.auth("admin", "se"), [("Authorization", "Bearer abc")],
                            [("Authorization", "Basic !!!")]):
                r = self.adm(method, path, body, headers=headers)
                self.assertError(r, 401, "unauthorized")
                self.assertEqual(r.header("www-authenticate"), 'Basic realm="Authorization Required"')
        r = self.adm("POST", "/token/ns", params={"description": "d"}, headers=good)
        self.assertEqual(r.status, 201, r)
        tok = r.json()["token"]
        self.assertEqual(self.adm("GET", "/token/ns", headers=self.auth("bob", "pw")).status, 200)
        self.assertEqual(self.adm("GET", "/limits", headers=good).status, 200)
        # the queue API does not use the accounts
        self.assertEqual(self.api("GET", "/api/ns/q/peek", token=tok).status, 404)

    def test_open_routes(self):
        for path in ("/info", "/version", "/pools", "/metrics", "/healthz", "/readyz"):
            self.assertEqual(self.adm("GET", path).status, 200, path)

    def test_bad_accounts_files(self):
        for content in ("nocolon\n", "admin:pw\n:pw\n"):
            path = os.path.join(self.dir, "bad")
            with open(path, "w") as f:
                f.write(content)
            p = subprocess.run([STALKD_BIN, "-l", "127.0.0.1", "-p", str(free_port()),
                                "--admin-http", "127.0.0.1:%d" % free_port(), "--admin-accounts", path],
                               capture_output=True, timeout=20)
            self.assertNotEqual(p.returncode, 0, content)
            self.assertIn(b"bad", p.stderr)
        p = subprocess.run([STALKD_BIN, "-l", "127.0.0.1", "-p", str(free_port()),
                            "--admin-http", "127.0.0.1:%d" % free_port(), "--admin-accounts",
                            os.path.join(self.dir, "missing")], capture_output=True, timeout=20)
        self.assertNotEqual(p.returncode, 0)


class CrossSiteTest(AccountsCase):
    """A page of another site cannot make a browser's cached basic credentials change
    tokens or limits: a changing request with a foreign Origin or Sec-Fetch-Site is 403."""

    def setUp(self):
        super().setUp()
        self.good = self.auth("admin", "se:cret")
        self.host = "127.0.0.1:%d" % self.server.admin_port
        self.token = self.new_token_as_admin("victim")

    def new_token_as_admin(self, description):
        r = self.adm("POST", "/token/ns", params={"description": description}, headers=self.good)
        self.assertEqual(r.status, 201, r)
        return r.json()["token"]

    def tokens(self):
        return self.adm("GET", "/token/ns", headers=self.good).json()["tokens"]

    def foreign(self):
        """Headers a browser sends with another site's request, each set alone."""
        host = [("Host", self.host)]
        return (host + [("Origin", "http://evil.example")],
                host + [("Origin", "http://127.0.0.1:%d.evil.example" % self.server.admin_port)],
                host + [("Origin", "http://127.0.0.1:1")],   # another port
                host + [("Origin", "http://127.0.0.1")],     # :80
                host + [("Origin", "null")],
                host + [("Sec-Fetch-Site", "cross-site")],
                host + [("Sec-Fetch-Site", "same-site")],
                host + [("Origin", "http://" + self.host), ("Sec-Fetch-Site", "cross-site")])

    def test_changing_token_routes_refuse_foreign_pages(self):
        chosen = "attacker-chosen-secret-0123456789"
        tid = token_id(self.token)
        form = [("Content-Type", "application/x-www-form-urlencoded")]
        for headers in self.foreign():
            h = self.good + headers
            for method, path, body, extra in (
                    ("POST", "/token/ns", b"description=x&token=" + chosen.encode(), form),
                    ("POST", "/token/ns?description=x&token=" + chosen, b"", []),
                    ("DELETE", "/token/ns/" + tid, b"", []),
                    ("POST", "/token/ns/%s/limit" % tid, b'{"read":1,"write":1,"interval":1}', []),
                    ("PUT", "/token/ns/%s/limit" % tid, b'{"read":1,"write":1,"interval":1}',
                     [("Content-Type", "text/plain")]),
                    ("DELETE", "/token/ns/%s/limit" % tid, b"", [])):
                r = self.adm(method, path, body, headers=h + extra)
                self.assertError(r, 403, "cross-site request refused")
        self.assertEqual(self.tokens(), {tid: "victim"})
        self.assertError(self.adm("GET", "/token/ns/%s/limit" % tid, headers=self.good), 404,
                         "limit not found")
        # The chosen token was never made: it opens nothing.
        self.assertError(self.api("GET", "/api/ns/q/peek", token=chosen), 401, "invalid token")
        # Reads are not refused (a foreign page cannot read their answers anyway).
        for headers in self.foreign():
            self.assertEqual(self.adm("GET", "/token/ns", headers=self.good + headers).status, 200)

    def test_same_origin_and_non_browser_clients_pass(self):
        tid = token_id(self.token)
        same = (  # curl and lmstfy's admin clients send neither header
            [], [("Host", self.host), ("Origin", "http://" + self.host)],
            [("Host", self.host), ("Origin", "HTTP://" + self.host.upper())],
            [("Host", "localhost"), ("Origin", "http://localhost:80")],
            [("Host", "localhost:443"), ("Origin", "https://localhost")],
            [("Host", self.host), ("Sec-Fetch-Site", "same-origin")],
            [("Host", self.host), ("Sec-Fetch-Site", "none")])
        for i, headers in enumerate(same):
            h = self.good + headers
            r = self.adm("POST", "/token/ns", params={"description": "d%d" % i}, headers=h)
            self.assertEqual(r.status, 201, (headers, r))
            # The limit routes take their JSON whatever the content type, as lmstfy's
            # (curl --data sends a form's).
            r = self.adm("PUT", "/token/ns/%s/limit" % tid, b'{"read":1,"interval":%d}' % (i + 1),
                         headers=h + [("Content-Type", "application/x-www-form-urlencoded")])
            self.assertEqual(r.status, 200, (headers, r))
            self.assertEqual(r.json()["limiter"]["interval"], i + 1)
        self.assertEqual(len(self.tokens()), 1 + len(same))

    def test_open_routes_do_not_care(self):
        for method, path in (("GET", "/healthz"), ("POST", "/nope")):
            r = self.adm(method, path, headers=[("Origin", "http://evil.example")])
            self.assertEqual(r.status, 200 if method == "GET" else 404, path)


class MetricsTest(HttpCase):
    server_args = ("--metrics-max-tubes", "3")

    def scrape(self):
        r = self.adm("GET", "/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.header("content-type").startswith("text/plain"), r.header("content-type"))
        self.assertIn("version=0.0.4", r.header("content-type"))
        return r.body.decode()

    def work(self):
        for q in ("q1", "q2"):
            self.publish(q)
            self.publish(q)
        self.consume_job("q1")
        self.assertEqual(self.api("GET", "/api/ns/q1?ttr=x").status, 400)
        self.api("GET", "/nowhere")
        t = self.text()
        for i in range(6):
            t.cmd("use t%d" % i)
            t.put(b"x")

    @unittest.skipUnless(shutil.which("promtool"),
                         "promtool is not on PATH (scripts/setup.sh installs package prometheus)")
    def test_promtool_check_metrics(self):
        self.work()
        text = self.scrape()
        p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, (p.stdout + p.stderr).decode()[:3000])

    def test_names_and_tube_cap(self):
        self.work()
        text = self.scrape()
        for name in ("stalkd_current_jobs_ready", "stalkd_cmd_put_total", "stalkd_total_jobs_total",
                     "stalkd_http_requests_total"):
            self.assertRegex(text, r"(?m)^%s(\{[^}]*\})? \S+$" % name, name)
        tubes = set(re.findall(r'(?m)^stalkd_tube_current_jobs_ready\{[^}]*tube="([^"]*)"', text))
        self.assertLessEqual(len(tubes), 4, tubes)
        self.assertIn("_other", tubes)
        total = sum(float(v) for v in re.findall(r'(?m)^stalkd_tube_current_jobs_ready\{[^}]*\} (\S+)$', text))
        ready = float(re.search(r"(?m)^stalkd_current_jobs_ready (\S+)$", text).group(1))
        self.assertEqual(total, ready)
        self.assertEqual(ready, 3 + 6)
        self.assertRegex(text, r'(?m)^# TYPE \S+ histogram$')


class PersistenceTest(unittest.TestCase):
    """Tokens, limits and jobs published over HTTP outlive kill -9 with -b."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stalkd_http_binlog_")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.servers = []
        self.addCleanup(lambda: [s.stop() for s in self.servers])

    def start(self):
        s = HttpServer(args=("-b", self.dir))
        self.servers.append(s)
        return s

    def test_kill9(self):
        s = self.start()
        adm, api = s.admin(), s.http()
        tok = adm.request("POST", "/token/ns?description=kept").json()["token"]
        gone = adm.request("POST", "/token/ns?description=gone").json()["token"]
        self.assertEqual(adm.request("DELETE", "/token/ns/" + gone).status, 204)
        self.assertEqual(adm.request("PUT", "/token/ns/%s/limit" % tok, b'{"write":100,"interval":60}').status, 200)
        h = [("X-Token", tok)]
        a = api.request("PUT", "/api/ns/q?tries=3&ttl=1000&priority=9", b"a",
                        headers=h + [("Job-Attr-K", "v")]).json()["job_id"]
        b = api.request("PUT", "/api/ns/q?delay=1000", b"b", headers=h).json()["job_id"]
        ids = api.request("PUT", "/api/ns/q/bulk", b"[1,2]", headers=h).json()["job_ids"]
        c = api.request("GET", "/api/ns/q?ttr=100", headers=h).json()
        self.assertEqual((c["job_id"], c["remain_tries"]), (a, 2))
        adm.close()
        api.close()
        s.kill9()

        s = self.start()
        adm, api = s.admin(), s.http()
        self.addCleanup(adm.close)
        self.addCleanup(api.close)
        self.assertEqual(adm.request("GET", "/token/ns").json(), {"tokens": {token_id(tok): "kept"}})
        self.assertEqual(adm.request("GET", "/token/ns/%s/limit" % tok).json(),
                         {"read": 0, "write": 100, "interval": 60})
        self.assertEqual(api.request("GET", "/api/ns/q/peek", headers=[("X-Token", gone)]).status, 401)
        self.assertEqual(api.request("GET", "/api/ns/q/size").json()["size"], 3)   # a is ready again
        d = api.request("GET", "/api/ns/q/job/" + a, headers=h).json()
        self.assertEqual((unb64(d["data"]), d["attributes"]), (b"a", {"k": "v"}))
        self.assertIn(d["remain_tries"], (2, 3))     # a crash may give back the try in progress
        self.assertTrue(0 < d["ttl"] <= 1000)
        self.assertEqual(api.request("GET", "/api/ns/q/job/" + b, headers=h).status, 200)
        got = [api.request("GET", "/api/ns/q", headers=h).json()["job_id"] for _ in range(3)]
        self.assertEqual(got, [a] + ids)

    def test_readyz_during_recovery(self):
        n = 100000
        s = self.start()
        c = s.connect()
        c.cmd("use ns/q")
        block = b"".join(b"0 0 60 1\r\nx\r\n" for _ in range(1000))
        for _ in range(n // 1000):
            r = c.cmd(b"put-many 1000 %d\r\n%s\r\n" % (len(block), block))
            self.assertTrue(r.startswith(b"INSERTED-MANY 1000"), r[:100])
            for _ in range(1000):
                c.read_line()
        c.close()
        s.kill9()
        # start without waiting for the text port: poll /readyz from the first moment
        admin_port, http_port = free_port(), free_port()
        p = subprocess.Popen([STALKD_BIN, "-l", "127.0.0.1", "-p", str(free_port()), "-b", self.dir,
                              "--admin-http", "127.0.0.1:%d" % admin_port,
                              "--http", "127.0.0.1:%d" % http_port],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        seen = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                conn = HttpConn(("127.0.0.1", admin_port), timeout=5)
                r = conn.request("GET", "/readyz")
                conn.close()
            except OSError:
                time.sleep(0.005)
                continue
            seen.append((r.status, r.json()))
            if r.status == 200:
                break
        self.assertTrue(seen, "the admin listener never answered")
        self.assertEqual(seen[-1], (200, {"status": "ready"}))
        for s_ in seen[:-1]:
            self.assertEqual(s_, (503, {"status": "recovering"}))
        # ready means recovered: every job is back
        conn = HttpConn(("127.0.0.1", http_port), timeout=10)
        self.addCleanup(conn.close)
        self.assertEqual(conn.request("GET", "/api/ns/q/size").json()["size"], n)


if __name__ == "__main__":
    unittest.main()

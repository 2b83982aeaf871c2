"""What a client can make the HTTP port hold in request bodies (docs/HTTP.md, "Request
bodies"): a request whose body is still arriving is checked (route, names, pool, token, admin
account) before its body is read, and a refusal is answered at once, without 100 Continue,
and closes the connection; the bodies being received take their announced length from one
budget for the whole server, shown in /metrics, and a body that would pass it is refused 503
while the other clients are served. Real sockets, many slow uploads at once; nothing here
measures time."""
import base64
import json
import os
import re
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import HttpCase, HttpConn, accounts_file, wait_until  # noqa: E402

MIB = 1 << 20
BULK_LIMIT = 65535 * 64          # the bulk body limit with the default -z 65535
READ_AHEAD = 256 * 1024         # the most input the server buffers before it stops reading
BUSY = "too many request bodies arriving, retry later"


def metric(adm_conn, name):
    """The value of an unlabelled metric in /metrics."""
    r = adm_conn.request("GET", "/metrics")
    assert r.status == 200, r
    m = re.search(rb"^" + name.encode() + rb" (\d+)$", r.body, re.M)
    assert m, (name, r.body[-2000:])
    return int(m.group(1))


def bulk_body(size):
    """A valid bulk publish body of exactly `size` bytes (jobs of at most 60000 bytes)."""
    jobs, left = [], size - 2
    while left > 0:
        n = min(60000, left - (1 if jobs else 0))    # a comma before every job but the first
        jobs.append("x" * (n - 2))
        left -= n + (1 if len(jobs) > 1 else 0)
    body = json.dumps(jobs, separators=(",", ":")).encode()
    assert len(body) == size, (len(body), size)
    return body


class RefusedBeforeTheBody(HttpCase):
    """A request that will be refused is refused on its head: the body is not waited for."""

    def slow(self, method, target, headers=(), length=4194224, expect=True):
        c = self.conn()
        hl = list(headers) + ([("Expect", "100-continue")] if expect else [])
        c.send(HttpConn.build(method, target, headers=hl, content_length=length) + b"[" + b"1," * 50)
        return c

    def assertRefused(self, c, status, error):
        r = c.read_response()
        self.assertError(r, status, error)
        self.assertEqual(c.interim, [], "100 Continue sent to a refused request")
        self.assertEqual((r.header("connection") or "").lower(), "close", r)
        self.assertTrue(c.closed_by_peer(wait=30))

    def test_api_refusals(self):
        tok = [("X-Token", self.token)]
        self.assertRefused(self.slow("PUT", "/api/anyns/q/bulk"), 401, "token not found")
        self.assertRefused(self.slow("PUT", "/api/ns/q/bulk", [("X-Token", "nope")]), 401, "invalid token")
        self.assertRefused(self.slow("PUT", "/api/ns/q", [("X-Token", "other")], 60000), 401, "invalid token")
        self.assertRefused(self.slow("PUT", "/api/ns/q/bulk", [("X-Token", "nopool:" + self.token)]),
                           404, "pool not found")
        self.assertRefused(self.slow("PUT", "/api/ns/_q/bulk", tok), 400,
                           "queue name contains forbidden characters")
        self.assertRefused(self.slow("POST", "/api/ns/q/bulk", tok), 404, "api not found")
        self.assertRefused(self.slow("PUT", "/api/ns/q/nothing", tok, 60000, expect=False), 404,
                           "api not found")
        # none of them was given room for its body
        self.assertEqual(metric(self.conn(admin=True), "stalkd_http_request_body_bytes"), 0)
        # a request whose body came whole with its head is answered as before, on a kept
        # connection
        c = self.conn()
        r = c.request("PUT", "/api/ns/q", b"hello", headers=[("X-Token", "nope")])
        self.assertError(r, 401, "invalid token")
        self.assertNotEqual((r.header("connection") or "").lower(), "close")
        r = c.request("PUT", "/api/ns/q", b"hello", headers=tok)
        self.assertEqual(r.status, 201, r)

    def test_accepted_upload_gets_100_continue(self):
        body = bulk_body(200000)
        c = self.conn()
        c.send(HttpConn.build("PUT", "/api/ns/q/bulk", headers=[("X-Token", self.token),
                                                                ("Expect", "100-continue")],
                              content_length=len(body)))
        self.assertEqual(c.read_head()[1], 100)
        c.send(body)
        r = c.read_response()
        self.assertEqual(r.status, 201, r)


class RefusalReadsTheBodyAway(HttpCase):
    """Most clients send a whole request, body and all, before they read the answer. One
    refused on its head (401, 413) gets its answer, never a reset: the server half-closes
    after the answer and reads the rest of the body away (bounded) before it closes. A close
    with unread bytes would send a TCP RST, and the client's kernel would drop the answer
    it had not read yet (ECONNRESET instead of the 401). Each case runs 50 times."""

    ROUNDS = 50

    def send_all_then_read(self, request):
        """Sends every byte, then reads until the server's EOF: the bytes read. A reset on
        the way raises (ConnectionResetError, BrokenPipeError)."""
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=60) as s:
            s.sendall(request)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data
                data += chunk

    def assertAnsweredEveryTime(self, request, status, error):
        resets = []
        for i in range(self.ROUNDS):
            try:
                data = self.send_all_then_read(request)
            except (ConnectionResetError, BrokenPipeError) as e:
                resets.append((i, type(e).__name__))
                continue
            head, _, body = data.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 %d " % status), data[:300])
            n = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
            self.assertEqual(len(body), n, "the answer's body cut short: %r" % data[:300])
            self.assertEqual(json.loads(body)["error"], error)
        self.assertEqual(resets, [], "resets instead of the answer, of %d" % self.ROUNDS)

    def test_refused_token_with_a_large_body(self):
        body = b"[" + b"1," * (MIB // 2) + b"1]"
        request = HttpConn.build("PUT", "/api/ns/q/bulk", headers=[("X-Token", "nope")],
                                 content_length=len(body)) + body
        self.assertAnsweredEveryTime(request, 401, "invalid token")
        adm = self.conn(admin=True)
        self.assertGreaterEqual(metric(adm, "stalkd_http_lingering_closes_total"), self.ROUNDS)
        self.assertGreaterEqual(metric(adm, "stalkd_http_lingering_discarded_bytes_total"),
                                self.ROUNDS * (len(body) - READ_AHEAD))
        self.assertEqual(metric(adm, "stalkd_http_request_body_bytes"), 0)

    def test_body_over_the_limit(self):
        body = b"x" * (BULK_LIMIT + 1)
        request = HttpConn.build("PUT", "/api/ns/q/bulk", headers=[("X-Token", self.token)],
                                 content_length=len(body)) + body
        self.assertAnsweredEveryTime(request, 413, "body too large")


class AdminRefusedBeforeTheBody(HttpCase):
    make_token = False

    def setUp(self):
        self.server_args = ("--admin-accounts", accounts_file(self, "admin:pw\n"))
        super().setUp()

    def test_unauthorized_admin_request(self):
        c = self.conn(admin=True)
        c.send(HttpConn.build("PUT", "/token/ns/x/limit", headers=[("Expect", "100-continue")],
                              content_length=60000) + b'{"read":')
        r = c.read_response()
        self.assertError(r, 401, "unauthorized")
        self.assertEqual(c.interim, [])
        self.assertTrue(c.closed_by_peer(wait=30))
        auth = "Basic " + base64.b64encode(b"admin:pw").decode()
        c = self.conn(admin=True)
        r = c.request("GET", "/limits", headers=[("Authorization", auth)])
        self.assertEqual(r.status, 200, r)


class BodyBudgetTest(HttpCase):
    """--max-memory 16M: the bodies being received may hold a quarter of it, 4 MiB (at least
    one bulk body, 65535 * 64 bytes)."""

    server_args = ("--max-memory", "16M")
    BUDGET = 4 * MIB
    UPLOAD = 1000000

    def bytes_held(self):
        return metric(self.conn(admin=True), "stalkd_http_request_body_bytes")

    def start_upload(self, body):
        c = self.conn(timeout=60)
        c.send(HttpConn.build("PUT", "/api/ns/q/bulk", headers=[("X-Token", self.token)],
                              content_length=len(body)) + body[:1000])
        return c

    def test_many_slow_uploads(self):
        adm = self.conn(admin=True)
        self.assertEqual(metric(adm, "stalkd_http_request_body_limit_bytes"), self.BUDGET)
        body = bulk_body(self.UPLOAD)
        fit = self.BUDGET // self.UPLOAD      # 4
        held = []
        for i in range(fit):
            held.append(self.start_upload(body))
            want = (i + 1) * self.UPLOAD
            self.assertTrue(wait_until(lambda: self.bytes_held() == want, timeout=30),
                            (want, self.bytes_held()))
        # Sixteen more slow uploads at once: none fits, each is refused at once and closed.
        refused = [self.start_upload(body) for _ in range(16)]
        for c in refused:
            r = c.read_response()
            self.assertError(r, 503, BUSY)
            self.assertTrue(c.closed_by_peer(wait=30))
        self.assertEqual(self.bytes_held(), fit * self.UPLOAD)
        self.assertGreaterEqual(metric(adm, "stalkd_http_request_bodies_refused_total"), 16)
        # Other clients are served: a publish whose body came whole, a consume, a peek.
        jid = self.publish("q", b"small")
        d = self.consume_job("q")
        self.assertEqual(d["job_id"], jid)
        self.assertEqual(self.api("GET", "/api/ns/q/size").status, 200)
        # A chunked upload takes room as its chunks arrive: it is refused once they pass it.
        c = self.conn(timeout=60)
        c.send(HttpConn.build("PUT", "/api/ns/q/bulk", headers=[("X-Token", self.token),
                                                                ("Transfer-Encoding", "chunked")]))
        chunk = b"%x\r\n%s\r\n" % (10000, b" " * 10000)
        sent = 0
        while sent < 2 * (self.BUDGET - fit * self.UPLOAD):
            try:
                c.send(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 10000
        self.assertError(c.read_response(), 503, BUSY)
        self.assertTrue(c.closed_by_peer(wait=30))
        self.assertTrue(wait_until(lambda: self.bytes_held() == fit * self.UPLOAD, timeout=30))
        # An upload that completes gives its room back, and a new one fits again.
        held[0].send(body[1000:])
        r = held[0].read_response()
        self.assertEqual((r.status, len(r.json()["job_ids"])), (201, len(json.loads(body))), r)
        self.assertTrue(wait_until(lambda: self.bytes_held() == (fit - 1) * self.UPLOAD, timeout=30))
        held[0] = self.start_upload(body)
        self.assertTrue(wait_until(lambda: self.bytes_held() == fit * self.UPLOAD, timeout=30))
        # Clients that go away give theirs back.
        for c in held:
            c.close()
        self.assertTrue(wait_until(lambda: self.bytes_held() == 0, timeout=30), self.bytes_held())


if __name__ == "__main__":
    unittest.main()

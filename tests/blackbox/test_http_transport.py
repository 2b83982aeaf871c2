"""Black-box tests of the HTTP transport rules of stalkd's HTTP listeners (docs/HTTP.md,
section 2): keep-alive, pipelining, HTTP/1.0, X-Request-ID, the 8 KiB head limit (431), the
body limit (413), chunked bodies, Expect: 100-continue, malformed requests (400 and close),
percent-decoding, slow clients (--http-request-timeout) and clients that vanish in a long poll.

Run: python3 -m unittest -v tests/blackbox/test_http_transport.py   (binary: $STALKD_BIN)
"""
import os
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import REQUEST_ID, HttpCase, HttpConn, parse_yaml, unb64, wait_until  # noqa: E402

MALFORMED = {"error": "malformed request"}


class KeepAliveTest(HttpCase):
    def test_many_requests_on_one_connection(self):
        c = self.conn()
        port = c.local_port()
        ids = []
        for i in range(20):
            r = c.request("PUT", "/api/ns/q", b"%d" % i, headers={"X-Token": self.token})
            self.assertEqual(r.status, 201, r)
            self.assertNotEqual((r.header("connection") or "").lower(), "close")
            ids.append(r.json()["job_id"])
        r = c.request("GET", "/api/ns/q/size")
        self.assertEqual(r.json()["size"], 20)
        self.assertEqual(c.local_port(), port)
        self.assertEqual(len(set(ids)), 20)

    def test_pipelining_answers_in_order(self):
        c = self.conn()
        tok = {"X-Token": self.token}
        raw = b"".join([HttpConn.build("PUT", "/api/ns/q", b"a", tok),
                        HttpConn.build("PUT", "/api/ns/q", b"b", tok),
                        HttpConn.build("GET", "/api/ns/q/size"),
                        HttpConn.build("GET", "/api/ns/q", headers=tok),
                        HttpConn.build("GET", "/nowhere"),
                        HttpConn.build("PUT", "/api/ns/q?ttl=x", b"c", tok),
                        HttpConn.build("GET", "/api/ns/q", headers=tok),
                        HttpConn.build("GET", "/api/ns/q/size")])
        c.send(raw)
        rs = [c.read_response() for _ in range(8)]
        self.assertEqual([r.status for r in rs], [201, 201, 200, 200, 404, 400, 200, 200])
        self.assertEqual(rs[2].json()["size"], 2)
        self.assertEqual(unb64(rs[3].json()["data"]), b"a")
        self.assertEqual(rs[5].json(), {"error": "invalid ttl"})
        self.assertEqual(unb64(rs[6].json()["data"]), b"b")
        self.assertEqual(rs[7].json()["size"], 0)
        ids = [r.header("x-request-id") for r in rs]
        self.assertEqual(len(set(ids)), 8)

    def test_pipelined_requests_wait_behind_a_long_poll(self):
        c = self.conn()
        tok = {"X-Token": self.token}
        c.send(HttpConn.build("GET", "/api/ns/q?timeout=1", headers=tok)
               + HttpConn.build("GET", "/api/ns/q/size"))
        # another connection is served meanwhile
        t0 = time.monotonic()
        other = self.conn()
        self.assertEqual(other.request("GET", "/api/ns/q/size").status, 200)
        r1 = c.read_response()
        r2 = c.read_response()
        self.assertEqual((r1.status, r2.status), (404, 200))
        self.assertGreaterEqual(time.monotonic() - t0, 0.8)

    def test_http10_closes_unless_keep_alive(self):
        c = self.conn()
        r = c.request("GET", "/api/ns/q/size", version="HTTP/1.0")
        self.assertEqual(r.status, 200)
        self.assertTrue(c.closed_by_peer(2))
        c = self.conn()
        r = c.request("GET", "/api/ns/q/size", headers={"Connection": "keep-alive"}, version="HTTP/1.0")
        self.assertEqual(r.status, 200)
        self.assertEqual(c.request("GET", "/api/ns/q/size", headers={"Connection": "keep-alive"},
                                   version="HTTP/1.0").status, 200)

    def test_connection_close_is_honoured(self):
        c = self.conn()
        r = c.request("GET", "/api/ns/q/size", headers={"Connection": "close"})
        self.assertEqual(r.status, 200)
        self.assertEqual((r.header("connection") or "").lower(), "close")
        self.assertTrue(c.closed_by_peer(2))

    def test_host_header_is_not_needed(self):
        c = self.conn()
        self.assertEqual(c.request("GET", "/api/ns/q/size", host=False).status, 200)

    def test_idle_keep_alive_connection_is_kept(self):
        c = self.conn()
        self.assertEqual(c.request("GET", "/api/ns/q/size").status, 200)
        self.assertFalse(c.closed_by_peer(1.5))
        self.assertEqual(c.request("GET", "/api/ns/q/size").status, 200)


class RequestIdTest(HttpCase):
    def test_every_response_has_a_unique_request_id(self):
        rs = [self.api("PUT", "/api/ns/q", b"x"), self.api("PUT", "/api/ns/q?ttl=x"),
              self.api("GET", "/api/ns/q", token="bad"), self.api("GET", "/nowhere"),
              self.api("DELETE", "/api/ns/q/job/1"), self.api("GET", "/api/ns/q/size"),
              self.api("GET", "/api/ns/q/peek"), self.adm("GET", "/healthz"),
              self.adm("GET", "/token/ns"), self.adm("GET", "/nowhere"),
              self.adm("GET", "/metrics")]
        rs += [self.api("GET", "/api/ns/q/size") for _ in range(40)]
        seen = set()
        for r in rs:
            rid = r.header("x-request-id")
            self.assertIsNotNone(rid, r)
            self.assertRegex(rid, "^" + REQUEST_ID.pattern + "$")
            seen.add(rid)
        self.assertEqual(len(seen), len(rs))
        # a client's own X-Request-ID is not echoed
        r = self.api("GET", "/api/ns/q/size", headers={"X-Request-ID": "mine"})
        self.assertNotEqual(r.header("x-request-id"), "mine")

    def test_json_headers(self):
        r = self.api("PUT", "/api/ns/q", b"x")
        self.assertEqual(r.header("content-type"), "application/json; charset=utf-8")
        self.assertEqual(int(r.header("content-length")), len(r.body))
        r = self.api("DELETE", "/api/ns/q/job/1")
        self.assertEqual((r.status, r.body), (204, b""))
        self.assertIsNone(r.header("content-type"))


class HeadTest(HttpCase):
    def test_head(self):
        c = self.conn()
        r = c.request("HEAD", "/api/ns/q/size")
        self.assertEqual((r.status, r.body), (404, b""))
        a = self.conn(admin=True)
        for path in ("/healthz", "/readyz", "/version", "/metrics"):
            r = a.request("HEAD", path)
            self.assertEqual((r.status, r.body), (200, b""), path)
        # the connections are still in step
        self.assertEqual(c.request("GET", "/api/ns/q/size").status, 200)
        self.assertEqual(a.request("GET", "/healthz").json(), {"status": "ok"})


class RestartRequestIdTest(HttpCase):
    make_token = False

    def test_request_ids_differ_across_restarts(self):
        first = {self.adm("GET", "/healthz").header("x-request-id") for _ in range(5)}
        self.server.stop()
        self._close_conns()
        self._adm = None
        from httpcase import HttpServer
        self.server = HttpServer()
        self.addCleanup(self.server.stop)
        second = {self.adm("GET", "/healthz").header("x-request-id") for _ in range(5)}
        self.assertEqual(len(first | second), 10)


class LimitsTest(HttpCase):
    def test_head_of_8_kib_fits_and_larger_is_431(self):
        c = self.conn()
        base = HttpConn.build("GET", "/api/ns/q/size", headers={"X-Pad": ""})
        pad = 8192 - len(base)
        r = c.request("GET", "/api/ns/q/size", headers={"X-Pad": "p" * pad})
        self.assertEqual(r.status, 200, r)
        r = c.request("GET", "/api/ns/q/size", headers={"X-Pad": "p" * (pad + 1)})
        self.assertEqual((r.status, r.json()), (431, {"error": "request header fields too large"}))
        self.assertRegex(r.header("x-request-id") or "", REQUEST_ID)
        self.assertTrue(c.closed_by_peer(2))

    def test_endless_header_is_refused_at_8_kib(self):
        c = self.conn()
        c.send(b"GET /api/ns/q/size HTTP/1.1\r\nX-Endless: ")
        sent = 0
        try:
            while sent < 64 * 1024:
                c.send(b"e" * 1024)
                sent += 1024
                if b"\r\n\r\n" in c.buf or not c.no_data(0.0):
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = c.read_response()
        self.assertEqual((r.status, r.json()), (431, {"error": "request header fields too large"}))

    def test_many_headers(self):
        c = self.conn()
        hdrs = [("X-H%d" % i, "v") for i in range(200)]
        self.assertEqual(c.request("GET", "/api/ns/q/size", headers=hdrs).status, 200)

    def test_body_limit_default(self):
        # default -z 65535: L = 65535
        c = self.conn()
        r = c.request("PUT", "/api/ns/q", b"b" * 65535, headers={"X-Token": self.token})
        self.assertEqual(r.status, 201, r)
        # announced larger than L: 413 without reading the body, then close
        c.send(HttpConn.build("PUT", "/api/ns/q", headers={"X-Token": self.token}, content_length=65536))
        r = c.read_response()
        self.assertEqual((r.status, r.json()), (413, {"error": "body too large"}))
        self.assertEqual((r.header("connection") or "").lower(), "close")
        self.assertTrue(c.closed_by_peer(2))
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 1)

    def test_chunked_body(self):
        c = self.conn()
        body = b"chunky " * 1000
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 1000]), body[i:i + 1000])
                          for i in range(0, len(body), 1000))
        raw = HttpConn.build("PUT", "/api/ns/q", headers=[("X-Token", self.token),
                                                          ("Transfer-Encoding", "chunked")])
        c.send(raw + chunks + b"0\r\n\r\n")
        r = c.read_response()
        self.assertEqual(r.status, 201, r)
        d = self.api("GET", "/api/ns/q/job/" + r.json()["job_id"]).json()
        self.assertEqual(unb64(d["data"]), body)
        # the connection goes on after a chunked request
        self.assertEqual(c.request("GET", "/api/ns/q/size").json()["size"], 1)

    def test_chunked_body_over_the_limit(self):
        c = self.conn()
        raw = HttpConn.build("PUT", "/api/ns/q", headers=[("X-Token", self.token),
                                                          ("Transfer-Encoding", "chunked")])
        c.send(raw)
        try:
            for _ in range(80):
                c.send(b"400\r\n" + b"x" * 1024 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = c.read_response()
        self.assertEqual((r.status, r.json()), (413, {"error": "body too large"}))
        self.assertTrue(c.closed_by_peer(2))
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)

    def test_expect_100_continue(self):
        c = self.conn()
        body = b"e" * 2000
        c.send(HttpConn.build("PUT", "/api/ns/q", headers=[("X-Token", self.token),
                                                           ("Expect", "100-continue")],
                              content_length=len(body)))
        v, status, _, _, _ = c.read_head()
        self.assertEqual((v, status), ("HTTP/1.1", 100))
        c.send(body)
        r = c.read_response()
        self.assertEqual(r.status, 201, r)
        # refused on its head: the final answer instead of 100
        c.send(HttpConn.build("PUT", "/api/ns/q", headers=[("X-Token", self.token),
                                                           ("Expect", "100-continue")],
                              content_length=100000))
        r = c.read_response()
        self.assertEqual((r.status, c.interim), (413, []))


class BigJobTest(HttpCase):
    server_args = ("-z", "100000")

    def test_body_limit_follows_z(self):
        # L = max(65535, -z) = 100000: a job of 70000 bytes is fine, and so is -z itself
        c = self.conn()
        for n in (70000, 100000):
            r = c.request("PUT", "/api/ns/q", b"z" * n, headers={"X-Token": self.token})
            self.assertEqual(r.status, 201, r)
        c.send(HttpConn.build("PUT", "/api/ns/q", headers={"X-Token": self.token}, content_length=100001))
        r = c.read_response()
        self.assertEqual((r.status, r.json()), (413, {"error": "body too large"}))

    def test_bulk_may_be_64_times_larger(self):
        body = ("[" + ",".join(['"%s"' % ("b" * 70000)] * 3) + "]").encode()
        r = self.api("PUT", "/api/ns/q/bulk", body)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(len(r.json()["job_ids"]), 3)


class OutOfMemoryTest(HttpCase):
    server_args = ("--max-memory", "200K")

    def test_publish_answers_503(self):
        body = b"m" * 60000
        codes = [self.api("PUT", "/api/ns/q", body) for _ in range(6)]
        self.assertEqual(codes[0].status, 201)
        self.assertError(codes[-1], 503, "out of memory")
        self.assertError(self.api("PUT", "/api/ns/q/bulk", b'["%s"]' % (b"m" * 60000)), 503, "out of memory")
        # a consume and a delete free memory: publishing works again
        jid = self.consume_job("q")["job_id"]
        self.assertEqual(self.api("DELETE", "/api/ns/q/job/" + jid).status, 204)
        self.assertEqual(self.api("PUT", "/api/ns/q", body).status, 201)


class AllowTest(HttpCase):
    server_args = ("--allow", "10.0.0.0/8")
    make_token = False

    def test_allow_applies_to_http_listeners(self):
        for admin in (False, True):
            c = self.conn(admin=admin)
            try:
                c.send(HttpConn.build("GET", "/healthz"))
            except (BrokenPipeError, ConnectionResetError):
                continue
            self.assertTrue(c.closed_by_peer(2))
            self.assertEqual(c.buf, b"")


class StalledReaderTest(HttpCase):
    server_args = ("--stalled-client-timeout", "1")

    def test_client_that_never_reads_is_cut(self):
        jid = self.publish("q", b"s" * 60000)
        t = self.text()
        before = int(parse_yaml(t.cmd("stats"))["current-connections"])
        c = self.conn()
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        req = HttpConn.build("GET", "/api/ns/q/job/" + jid, headers={"X-Token": self.token})
        try:
            for _ in range(400):
                c.sock.settimeout(2)
                c.send(req)
        except (socket.timeout, BrokenPipeError, ConnectionResetError):
            pass
        self.assertTrue(wait_until(lambda: int(parse_yaml(t.cmd("stats"))["current-connections"]) < before + 1,
                                   timeout=60, interval=0.2), "the stalled HTTP client was not cut")
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 1)


class MalformedTest(HttpCase):
    def assertMalformed(self, raw, before=0):
        c = self.conn()
        c.send(raw)
        for _ in range(before):
            self.assertLess(c.read_response().status, 500)
        r = c.read_response()
        self.assertEqual((r.status, r.json()), (400, MALFORMED), raw[:200])
        self.assertRegex(r.header("x-request-id") or "", REQUEST_ID)
        self.assertTrue(c.closed_by_peer(2), raw[:200])
        # the server goes on serving others
        self.assertEqual(self.api("GET", "/api/ns/q/size").status, 200)

    def test_garbage_request_line(self):
        self.assertMalformed(b"GARBAGE\r\n\r\n")
        self.assertMalformed(b"\x00\x01\x02\xff\r\n\r\n")
        self.assertMalformed(b"GET /api/ns/q/size HTTP/1.1 extra\r\n\r\n")
        self.assertMalformed(b"GET /api/ns/q/size FTP/1.1\r\n\r\n")
        self.assertMalformed(b"GET api/ns/q/size HTTP/1.1\r\n\r\n")
        self.assertMalformed(b"G(T /api/ns/q/size HTTP/1.1\r\n\r\n")

    def test_bad_headers(self):
        self.assertMalformed(b"GET /api/ns/q/size HTTP/1.1\r\nNoColonHere\r\n\r\n")
        self.assertMalformed(b"GET /api/ns/q/size HTTP/1.1\r\nBad Name: x\r\n\r\n")
        self.assertMalformed(b"GET /api/ns/q/size HTTP/1.1\r\nX-A: a\x00b\r\n\r\n")
        self.assertMalformed(b"PUT /api/ns/q HTTP/1.1\r\nContent-Length: abc\r\n\r\n")
        self.assertMalformed(b"PUT /api/ns/q HTTP/1.1\r\nContent-Length: -1\r\n\r\n")
        self.assertMalformed(b"PUT /api/ns/q HTTP/1.1\r\nContent-Length: 1\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        self.assertMalformed(b"PUT /api/ns/q HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n")

    def test_bad_chunks(self):
        # with a token: a chunked body is screened on its head first (test_http_bodies.py)
        self.assertMalformed(b"PUT /api/ns/q HTTP/1.1\r\nX-Token: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"zz\r\nab\r\n0\r\n\r\n" % self.token.encode())

    def test_malformed_percent_escape_in_path(self):
        self.assertMalformed(b"GET /api/ns/q%zz/size HTTP/1.1\r\n\r\n")
        self.assertMalformed(b"GET /api/ns/q%2/size HTTP/1.1\r\n\r\n")

    def test_earlier_pipelined_requests_are_answered(self):
        good = HttpConn.build("GET", "/api/ns/q/size")
        self.assertMalformed(good + good + b"NONSENSE\r\n\r\n" + good, before=2)

    def test_percent_decoded_path(self):
        jid = self.publish("q1")
        r = self.api("GET", "/api/n%73/%71%31/job/" + jid)
        self.assertEqual((r.status, r.json()["namespace"], r.json()["queue"]), (200, "ns", "q1"))


class SlowClientTest(HttpCase):
    server_args = ("--http-request-timeout", "1")

    def test_slowloris_is_cut(self):
        c = self.conn()
        c.send(b"GET /api/ns/q/size HTTP/1.1\r\n")
        t0 = time.monotonic()
        closed = False
        try:
            while time.monotonic() - t0 < 4:
                c.send(b"X-Slow-%d: v\r\n" % int((time.monotonic() - t0) * 100))
                # others are served meanwhile
                self.assertEqual(self.api("GET", "/api/ns/q/size").status, 200)
                if not c.no_data(0.2):
                    break
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        if not closed:
            if c.buf:
                r = c.read_response()
                self.assertEqual((r.status, r.json()), (408, {"error": "request timeout"}))
            self.assertTrue(c.closed_by_peer(30))

    def test_slow_body_is_cut(self):
        c = self.conn()
        c.send(HttpConn.build("PUT", "/api/ns/q", headers={"X-Token": self.token}, content_length=100))
        c.send(b"x")
        t0 = time.monotonic()
        self.assertTrue(c.closed_by_peer(60))
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)   # not before the timeout
        self.assertEqual(self.api("GET", "/api/ns/q/size").json()["size"], 0)

    def test_slow_but_complete_request_is_served(self):
        c = self.conn()
        raw = HttpConn.build("GET", "/api/ns/q/size")
        for i in range(0, len(raw), 8):
            c.send(raw[i:i + 8])
            time.sleep(0.5 / (len(raw) / 8))
        self.assertEqual(c.read_response().status, 200)

    def test_timeout_counts_from_the_first_byte_of_a_request(self):
        c = self.conn()
        self.assertEqual(c.request("GET", "/api/ns/q/size").status, 200)
        time.sleep(1.5)     # idle between requests is not slowness
        self.assertEqual(c.request("GET", "/api/ns/q/size").status, 200)

    def test_long_poll_is_not_slowness(self):
        c = self.conn()
        t0 = time.monotonic()
        r = c.request("GET", "/api/ns/q?timeout=2", headers={"X-Token": self.token})
        self.assertEqual(r.status, 404)
        self.assertGreaterEqual(time.monotonic() - t0, 1.8)


class VanishingClientTest(HttpCase):
    def vanish_in_long_poll(self, reset):
        c = self.server.http()
        c.send(HttpConn.build("GET", "/api/ns/q?timeout=60&ttr=60", headers={"X-Token": self.token}))
        self.wait_waiting("ns/q", 1)
        if reset:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        self.wait_waiting("ns/q", 0)
        jid = self.publish("q", b"not lost", tries=3)
        # the job goes to the next consumer at once, not after a TTR
        d = self.consume_job("q", timeout=2)
        self.assertEqual((d["job_id"], d["remain_tries"]), (jid, 2))

    def test_close_mid_long_poll(self):
        self.vanish_in_long_poll(reset=False)

    def test_reset_mid_long_poll(self):
        self.vanish_in_long_poll(reset=True)

    def test_many_vanishing_pollers(self):
        conns = []
        for _ in range(30):
            c = self.server.http()
            c.send(HttpConn.build("GET", "/api/ns/q1,q2?timeout=60", headers={"X-Token": self.token}))
            conns.append(c)
        self.wait_waiting("ns/q1", 30)
        for c in conns:
            c.close()
        self.wait_waiting("ns/q1", 0)
        self.wait_waiting("ns/q2", 0)
        jid = self.publish("q2")
        self.assertEqual(self.consume_job("q2")["job_id"], jid)
        st = self.text().cmd("stats")
        self.assertIn(b"current-jobs-reserved: 1\n", st)

    def test_close_before_the_response_is_read(self):
        jid = self.publish("q", tries=2)
        c = self.server.http()
        c.send(HttpConn.build("GET", "/api/ns/q?ttr=1", headers={"X-Token": self.token}))
        c.close()
        # the job may have been reserved for the vanished client: then it is back after its TTR
        d = self.consume_job("q", timeout=3)
        self.assertEqual(d["job_id"], jid)


if __name__ == "__main__":
    unittest.main()

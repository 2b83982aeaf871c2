"""Helpers of the HTTP black-box tests (docs/HTTP.md): a stalkd with its queue API and admin
listeners on free loopback ports, a raw HTTP/1.1 client over a plain socket (exact bytes
out, responses parsed by hand, so keep-alive, pipelining and malformed input can be tested),
and HttpCase, the unittest base class (a fresh server and a token of namespace "ns" per test).

Not a test module itself (CMake runs tests/blackbox/test_*.py only).
"""
import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import STALKD_BIN, Client, Server, free_port, parse_yaml, stats_of, wait_until  # noqa: E402,F401

NS = "ns"
REQUEST_ID = re.compile(r"[0-9a-f]{32}")
JOB_KEYS = {"namespace", "queue", "job_id", "data", "ttl", "elapsed_ms", "remain_tries", "attributes"}
CONSUME_KEYS = JOB_KEYS | {"msg"}
NO_JOB = {"msg": "no job available"}
API_NOT_FOUND = {"error": "api not found"}


def b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def unb64(s):
    return base64.b64decode(s.encode(), validate=True)


class Response:
    """One parsed HTTP response."""

    def __init__(self, version, status, reason, header_list, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.header_list = header_list          # [(name, value)] as sent
        self.headers = {}                       # lower-case name -> first value
        for k, v in header_list:
            self.headers.setdefault(k.lower(), v)
        self.body = body
        self.raw_head = raw_head

    def json(self):
        return json.loads(self.body.decode())

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return "<%d %r %r>" % (self.status, self.header_list, self.body[:300])


class HttpConn:
    """A raw HTTP/1.1 connection. request() sends one request and reads its response;
    send() and read_response() let a test pipeline, send garbage or trickle bytes."""

    def __init__(self, address, timeout=10.0):
        self.address = address
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.interim = []       # 1xx responses read and skipped by read_response

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def local_port(self):
        return self.sock.getsockname()[1]

    def send(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed by server")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        i = self.buf.index(b"\r\n")
        line, self.buf = self.buf[:i], self.buf[i + 2:]
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_head(self):
        """Status line and headers of the next response (1xx included)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        i = self.buf.index(b"\r\n\r\n")
        head, self.buf = self.buf[:i], self.buf[i + 4:]
        lines = head.split(b"\r\n")
        m = re.fullmatch(rb"(HTTP/1\.[01]) (\d{3})(?: (.*))?", lines[0])
        if not m:
            raise AssertionError("bad status line %r" % lines[0])
        hdrs = []
        for l in lines[1:]:
            k, v = l.split(b":", 1)
            hdrs.append((k.decode(), v.strip().decode("latin-1")))
        return m.group(1).decode(), int(m.group(2)), (m.group(3) or b"").decode(), hdrs, head

    def read_response(self, head_request=False):
        """The next final response (1xx responses are skipped and kept in self.interim)."""
        while True:
            version, status, reason, hdrs, raw = self.read_head()
            if 100 <= status < 200:
                self.interim.append(status)
                continue
            break
        h = {k.lower(): v for k, v in reversed(hdrs)}
        if head_request or status in (204, 304):
            body = b""
        elif "transfer-encoding" in h and "chunked" in h["transfer-encoding"].lower():
            body = b""
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while self._line():
                        pass
                    break
                body += self._exact(size)
                if self._exact(2) != b"\r\n":
                    raise AssertionError("bad chunk end")
        elif "content-length" in h:
            body = self._exact(int(h["content-length"]))
        else:  # until close
            body = self.buf
            self.buf = b""
            try:
                while True:
                    chunk = self.sock.recv(65536)
                    if not chunk:
                        break
                    body += chunk
            except OSError:
                pass
        return Response(version, status, reason, hdrs, body, raw)

    @staticmethod
    def build(method, target, body=b"", headers=None, version="HTTP/1.1", host=True,
              content_length=None):
        """The bytes of one request. headers: a list of (name, value) or a dict.
        A Content-Length is added for a non-empty body or a PUT/POST, unless given."""
        if isinstance(body, str):
            body = body.encode()
        hl = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        names = {k.lower() for k, _ in hl}
        out = ["%s %s %s" % (method, target, version)]
        if host and "host" not in names:
            out.append("Host: 127.0.0.1")
        for k, v in hl:
            out.append("%s: %s" % (k, v))
        if "content-length" not in names and "transfer-encoding" not in names:
            if content_length is not None:
                out.append("Content-Length: %d" % content_length)
            elif body or method in ("PUT", "POST"):
                out.append("Content-Length: %d" % len(body))
        raw = "\r\n".join(out).encode("latin-1") + b"\r\n\r\n"
        return raw + body

    def request(self, method, target, body=b"", headers=None, **kw):
        self.send(self.build(method, target, body, headers, **kw))
        return self.read_response(head_request=(method == "HEAD"))

    def no_data(self, wait):
        """True if nothing arrives within `wait` seconds (what arrives is kept in self.buf);
        raises ConnectionResetError if the peer closed."""
        self.sock.settimeout(max(wait, 0.0001))
        try:
            chunk = self.sock.recv(65536)
        except (socket.timeout, BlockingIOError):
            return True
        finally:
            self.sock.settimeout(10)
        if not chunk:
            raise ConnectionResetError("closed by server")
        self.buf += chunk
        return False

    def closed_by_peer(self, wait=2.0):
        """True if the server closes the connection within `wait` seconds (bytes it sends
        first are kept in self.buf)."""
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
            self.buf += chunk


def query(params):
    """'?a=1&b=2' for a dict or list of pairs (values used as given, already encoded)."""
    if not params:
        return ""
    items = params.items() if isinstance(params, dict) else params
    return "?" + "&".join("%s=%s" % (k, v) for k, v in items)


class HttpServer(Server):
    """stalkd with --http and --admin-http on free loopback ports (and the text listener).

    Returns once the server is ready for a test, never after a fixed time: the text port
    answers `stats` with this process's pid (not another server that took a port picked
    for this one), both HTTP ports accept connections, and, with the admin listener and
    `ready`, GET /readyz answers 200 (pass ready=False for a test of the time before that,
    such as recovery). A port picked by free_port() and taken by another process before
    stalkd bound it ("Address already in use") makes it start again on other ports. The
    waits are bounded generously (READY_TIMEOUT): they bound a hang, not a start-up time."""

    READY_TIMEOUT = 120.0

    def __init__(self, args=(), http=True, admin=True, ready=True, **kw):
        for attempt in range(3):
            self.http_port = free_port() if http else None
            self.admin_port = free_port() if admin else None
            extra = []
            if http:
                extra += ["--http", "127.0.0.1:%d" % self.http_port]
            if admin:
                extra += ["--admin-http", "127.0.0.1:%d" % self.admin_port]
            try:
                super().__init__(args=extra + list(args), **kw)
                self._wait_http(ready)
                return
            except _PortTaken:
                if attempt == 2:
                    raise
            except RuntimeError as e:
                if "in use" not in str(e) or attempt == 2:
                    raise

    def _alive(self):
        if self.proc.poll() is None:
            return True
        out = b""
        if not self.log:
            o, e = self.proc.communicate()
            out = (o or b"") + (e or b"")
        self.stop()
        if b"in use" in out:
            raise _PortTaken(out)
        raise RuntimeError("server exited with %s: %r %r" % (self.proc.returncode, out, self.argv))

    def _wait_http(self, ready):
        deadline = time.monotonic() + self.READY_TIMEOUT

        def until(pred, what):
            while True:
                if not self._alive():
                    return
                if pred():
                    return
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("%s within %d s: %r" % (what, self.READY_TIMEOUT, self.argv))
                time.sleep(0.02)

        for port in (self.http_port, self.admin_port):
            if port is not None:
                until(lambda: _connectable(port), "HTTP port %d did not open" % port)
        try:    # (an --allow list may refuse this client: then the check is skipped)
            c = self.connect()
            try:
                reply = c.cmd("stats")  # (--require-auth: UNAUTHORIZED, nothing to check)
                pid = parse_yaml(reply)["pid"] if reply.startswith(b"OK") else str(self.proc.pid)
            finally:
                c.close()
        except (OSError, EOFError):
            pid = str(self.proc.pid)
        if pid != str(self.proc.pid):
            self.stop()
            raise _PortTaken("port %d answers for pid %s" % (self.port, pid))
        if self.admin_port is not None and ready:
            until(lambda: _readyz(self.admin_port) in (200, "closed"), "/readyz did not answer 200")
        self._alive()

    def http(self, timeout=10.0):
        return HttpConn(("127.0.0.1", self.http_port), timeout)

    def admin(self, timeout=10.0):
        return HttpConn(("127.0.0.1", self.admin_port), timeout)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.stop()


class _PortTaken(RuntimeError):
    """Another process had a port picked for this server."""


def _readyz(port):
    """The status of GET /readyz on the admin listener; "closed" if the server closed the
    connection without an answer (an --allow list that refuses this client: it cannot
    wait for more); None if it could not be asked."""
    try:
        c = HttpConn(("127.0.0.1", port), timeout=10)
    except OSError:
        return None
    try:
        return c.request("GET", "/readyz").status
    except (EOFError, ConnectionResetError):
        return "closed"
    except (OSError, AssertionError):
        return None
    finally:
        c.close()


def _connectable(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False



def accounts_file(case, text):
    """An --admin-accounts file holding `text` ("user:password" lines), removed when `case`
    ends; its path."""
    fd, path = tempfile.mkstemp(prefix="stalkd-accounts-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    case.addCleanup(os.unlink, path)
    return path


class HttpCase(unittest.TestCase):
    """A fresh HttpServer per test (extra arguments in `server_args`) and a token of
    namespace NS in self.token.

      api(method, path, body, headers, token=..., params=...)   on one kept-alive
          connection to the API listener (reopened if the server closed it)
      adm(method, path, ...)                                    the same on the admin listener
      new_token(ns)                                             POST /token/<ns>
      publish(q, body, **params) -> job id (asserts 201)
      consume(q, **params) -> Response
      text()                                                    a text-protocol connection
    """

    server_args = ()
    server_kw = {}  # more keyword arguments of HttpServer (log=PATH)
    maxDiff = None
    make_token = True

    def setUp(self):
        self.server = HttpServer(args=self.server_args, **self.server_kw)
        self.addCleanup(self.server.stop)
        self._api = None
        self._adm = None
        self.addCleanup(self._close_conns)
        self.token = self.new_token(NS) if self.make_token else None

    def _close_conns(self):
        for c in (self._api, self._adm):
            if c:
                c.close()

    def conn(self, admin=False, timeout=10.0):
        """A new connection to the API (or admin) listener, closed at cleanup."""
        c = self.server.admin(timeout) if admin else self.server.http(timeout)
        self.addCleanup(c.close)
        return c

    def text(self):
        c = self.server.connect()
        self.addCleanup(c.close)
        return c

    def _req(self, which, method, path, body=b"", headers=None, params=None):
        target = path + query(params)
        for attempt in (0, 1):
            c = getattr(self, which)
            if c is None:
                c = self.server.admin() if which == "_adm" else self.server.http()
                setattr(self, which, c)
            try:
                r = c.request(method, target, body, headers)
            except (EOFError, ConnectionResetError, BrokenPipeError):
                c.close()
                setattr(self, which, None)
                if attempt:
                    raise
                continue
            if (r.header("connection") or "").lower() == "close":
                c.close()
                setattr(self, which, None)
            return r

    def api(self, method, path, body=b"", headers=None, token="__default__", params=None):
        hl = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        if token == "__default__":
            token = self.token
        if token is not None:
            hl.append(("X-Token", token))
        return self._req("_api", method, path, body, hl, params)

    def adm(self, method, path, body=b"", headers=None, params=None):
        return self._req("_adm", method, path, body, headers, params)

    def new_token(self, ns, description="test"):
        r = self.adm("POST", "/token/%s" % ns, params={"description": description})
        self.assertEqual(r.status, 201, r)
        return r.json()["token"]

    def publish(self, q, body=b"x", headers=None, ns=NS, token="__default__", **params):
        r = self.api("PUT", "/api/%s/%s" % (ns, q), body, headers, token=token, params=params)
        self.assertEqual(r.status, 201, r)
        d = r.json()
        self.assertEqual(d["msg"], "published")
        self.assertRegex(d["job_id"], r"^[1-9][0-9]*$")
        return d["job_id"]

    def consume(self, q, ns=NS, token="__default__", **params):
        return self.api("GET", "/api/%s/%s" % (ns, q), token=token, params=params)

    def consume_job(self, q, **params):
        """A consume that must return one job; returns its JSON."""
        r = self.consume(q, **params)
        self.assertEqual(r.status, 200, r)
        d = r.json()
        self.assertEqual(set(d), CONSUME_KEYS, d)
        self.assertEqual(d["msg"], "new job")
        return d

    def assertError(self, r, status, error, key="error"):
        self.assertEqual((r.status, r.json()), (status, {key: error}), r)
        self.assertTrue((r.header("content-type") or "").startswith("application/json"), r)
        self.assertRegex(r.header("x-request-id") or "", REQUEST_ID)

    def job_stats(self, c, jid):
        return stats_of(c, "stats-job-ext %s" % jid)  # with the extension fields

    def wait_waiting(self, tube, n, timeout=60):
        """Waits until `n` clients wait to reserve from `tube` (a long-polling consume of
        queue q of NS waits on tube "ns/q"): what a test waits for before it publishes to
        wake a long poll, or after a long-polling client went away. Never a fixed pause."""
        t = self.server.connect()
        try:
            def waiting():
                r = t.cmd("stats-tube %s" % tube)
                return (int(parse_yaml(r)["current-waiting"]) if r.startswith(b"OK ") else 0) == n
            self.assertTrue(wait_until(waiting, timeout=timeout), "%d waiting on %s" % (n, tube))
        finally:
            t.close()

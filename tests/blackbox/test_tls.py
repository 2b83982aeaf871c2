"""TLS on stalkd's listeners (docs/SECURITY.md, "TLS") with real clients: Python's ssl over
the beanstalkd protocol, `openssl s_client`, curl on --http and --admin-http (mutual TLS
too), Ruby's OpenSSL; the certificate's reload on SIGHUP; handshakes that never finish
(closed by --tls-handshake-timeout) while a TLS client goes on being served; and the flags'
errors. Certificates come from tests/lib/tls_certs.py (the openssl command)."""
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import beanstalk as bs  # noqa: E402
import tls_certs  # noqa: E402

CERTS = None


def setUpModule():
    global CERTS
    CERTS = tls_certs.make()


def client_context(cert=True):
    ctx = ssl.create_default_context(cafile=CERTS.ca)
    if cert:
        ctx.load_cert_chain(CERTS.client_cert, CERTS.client_key)
    return ctx


def wait_for_line(path, text, timeout=10.0):
    """Waits until the server's log file holds `text`; returns the log."""
    deadline = time.monotonic() + timeout
    while True:
        with open(path, "rb") as f:
            log = f.read().decode(errors="replace")
        if text in log:
            return log
        if time.monotonic() > deadline:
            raise AssertionError("no %r in the log:\n%s" % (text, log))
        time.sleep(0.02)


class TlsCase(unittest.TestCase):
    def start(self, *extra, cert=None, key=None):
        """stalkd with its plain port, a TLS beanstalkd listener (self.tls_port) and -V,
        logging to self.log."""
        self.tmp = tempfile.mkdtemp(prefix="stalkd-tls-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.log = os.path.join(self.tmp, "log")
        self.tls_port = bs.free_port()
        port = bs.free_port()
        while port == self.tls_port:  # free_port may give a port again once it is closed
            port = bs.free_port()
        args = ["-V", "--listen", "tls://127.0.0.1:%d" % self.tls_port,
                "--tls-cert", cert or CERTS.server_cert, "--tls-key", key or CERTS.server_key]
        self.server = bs.Server(args=args + list(extra), log=self.log, port=port)
        self.addCleanup(self.server.stop)
        return self.server

    def tls_client(self, ctx=None, timeout=10.0, port=None):
        c = bs.Client(("127.0.0.1", port or self.tls_port), timeout=timeout,
                      ssl_context=ctx or client_context(cert=False), server_hostname="127.0.0.1")
        self.addCleanup(c.close)
        return c


class TestBeanstalkdOverTls(TlsCase):
    def test_python_ssl_cycle_and_the_plain_port_beside_it(self):
        self.start()
        c = self.tls_client()
        self.assertEqual(c.sock.version(), "TLSv1.3")
        jid = c.put_id("over tls")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), bs.reserved(jid, b"over tls"))
        plain = self.server.connect()
        self.addCleanup(plain.close)
        self.assertEqual(plain.cmd("stats-job %d" % jid).split(b"\r\n")[0][:3], b"OK ")
        self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertEqual(plain.cmd("stats-job %d" % jid), b"NOT_FOUND\r\n")

    def test_big_jobs_cross_many_records(self):
        self.start("-z", "1048576")
        c = self.tls_client()
        body = os.urandom(700_000).hex().encode()[:900_000]
        pipeline = b"".join(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body) for _ in range(3))
        c.send(pipeline)
        ids = [bs.inserted_id(c.read_reply()) for _ in range(3)]
        for jid in ids:
            self.assertEqual(c.cmd("peek %d" % jid), bs.found(jid, body))

    def test_tls_1_2_is_accepted(self):
        self.start()
        ctx = client_context(cert=False)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        c = self.tls_client(ctx)
        self.assertEqual(c.sock.version(), "TLSv1.2")
        self.assertEqual(c.cmd("use t"), b"USING t\r\n")

    def test_openssl_s_client(self):
        self.start()
        r = subprocess.run(
            ["openssl", "s_client", "-quiet", "-connect", "127.0.0.1:%d" % self.tls_port,
             "-CAfile", CERTS.ca, "-verify_return_error", "-verify_ip", "127.0.0.1"],
            input=b"put 0 0 60 5\r\nhello\r\nreserve-with-timeout 0\r\nquit\r\n",
            capture_output=True, timeout=30)
        self.assertEqual(r.stdout, b"INSERTED 1\r\nRESERVED 1 5\r\nhello\r\n", r.stderr)

    def test_ruby_openssl_socket(self):
        if shutil.which("ruby") is None:
            self.skipTest("no ruby")
        self.start()
        script = r'''
require "socket"; require "openssl"
ctx = OpenSSL::SSL::SSLContext.new
ctx.set_params(ca_file: ARGV[1], verify_mode: OpenSSL::SSL::VERIFY_PEER)
ssl = OpenSSL::SSL::SSLSocket.new(TCPSocket.new("127.0.0.1", ARGV[0].to_i), ctx)
ssl.hostname = "localhost"; ssl.sync_close = true; ssl.connect; ssl.post_connection_check("localhost")
ssl.write("put 0 0 60 4\r\nruby\r\n"); puts ssl.gets
ssl.write("reserve-with-timeout 0\r\n"); puts ssl.gets; puts ssl.gets
ssl.close
'''
        r = subprocess.run(["ruby", "-e", script, str(self.tls_port), CERTS.ca],
                           capture_output=True, timeout=60)
        self.assertEqual(r.stdout, b"INSERTED 1\r\nRESERVED 1 4\r\nruby\r\n", r.stderr)

    def test_plaintext_on_the_tls_port_is_closed(self):
        self.start()
        raw = bs.Client(("127.0.0.1", self.tls_port))
        self.addCleanup(raw.close)
        raw.send(b"put 0 0 60 1\r\nx\r\n")
        self.assertTrue(raw.closed_by_peer(wait=10))
        wait_for_line(self.log, "TLS handshake with 127.0.0.1")
        self.assertEqual(self.tls_client().cmd("use a"), b"USING a\r\n")

    def test_server_name_is_checked_by_clients(self):
        self.start()
        with self.assertRaises(ssl.SSLCertVerificationError):
            bs.Client(("127.0.0.1", self.tls_port), ssl_context=client_context(False),
                      server_hostname="example.com")


class TestMutualTls(TlsCase):
    def test_required_client_certificate(self):
        self.start("--tls-client-ca", CERTS.ca, "--tls-verify-client")
        c = self.tls_client(client_context(cert=True))
        self.assertEqual(c.cmd("use t"), b"USING t\r\n")
        log = wait_for_line(self.log, "certificate CN=client-1,O=stalkd tests")
        self.assertIn("TLSv1.3", log)
        # Without one: TLS 1.3 clients learn of the refusal at their first read.
        with self.assertRaises((ssl.SSLError, EOFError, ConnectionError)):
            c2 = self.tls_client(client_context(cert=False))
            c2.cmd("use t")
        # A certificate of another CA.
        ctx = client_context(cert=False)
        ctx.load_cert_chain(CERTS.stranger_cert, CERTS.stranger_key)
        with self.assertRaises((ssl.SSLError, EOFError, ConnectionError)):
            self.tls_client(ctx).cmd("use t")
        wait_for_line(self.log, "unable to get local issuer certificate")

    def test_optional_client_certificate(self):
        self.start("--tls-client-ca", CERTS.ca)
        self.assertEqual(self.tls_client(client_context(cert=False)).cmd("use a"), b"USING a\r\n")
        wait_for_line(self.log, "no client certificate")
        self.assertEqual(self.tls_client(client_context(cert=True)).cmd("use b"), b"USING b\r\n")
        wait_for_line(self.log, "certificate CN=client-1,O=stalkd tests")


@unittest.skipIf(shutil.which("curl") is None, "no curl")
class TestHttps(TlsCase):
    def curl(self, url, *extra):
        r = subprocess.run(["curl", "-sS", "--cacert", CERTS.ca, "--max-time", "20"] +
                           list(extra) + [url], capture_output=True, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def test_http_and_admin_over_tls_with_mutual_tls(self):
        http, admin = bs.free_port(), bs.free_port()
        self.start("--http", "tls://127.0.0.1:%d" % http,
                   "--admin-http", "tls://127.0.0.1:%d" % admin,
                   "--tls-client-ca", CERTS.ca, "--tls-verify-client")
        mine = ["--cert", CERTS.client_cert, "--key", CERTS.client_key]
        code, out, err = self.curl("https://127.0.0.1:%d/healthz" % admin, *mine)
        self.assertEqual(code, 0, err)
        self.assertIn(b'"ok"', out)
        code, out, err = self.curl("https://localhost:%d/metrics" % admin, *mine)
        self.assertEqual(code, 0, err)
        self.assertIn(b"stalkd_tls_handshakes_total ", out)
        # lmstfy's API: any answer over HTTP is what counts here (no token: 401).
        code, out, err = self.curl("https://127.0.0.1:%d/api/ns/q" % http, *mine, "-o",
                                   "/dev/null", "-w", "%{http_code}")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, rb"^[2-5]\d\d$")
        # Without a client certificate: refused in the handshake.
        code, out, err = self.curl("https://127.0.0.1:%d/healthz" % admin)
        self.assertNotEqual(code, 0)
        # Plain HTTP to a TLS listener: no answer.
        code, out, err = self.curl("http://127.0.0.1:%d/healthz" % admin)
        self.assertNotEqual(code, 0)

    def test_plain_admin_beside_tls(self):
        admin = bs.free_port()
        self.start("--admin-http", "127.0.0.1:%d" % admin)
        code, out, err = self.curl("http://127.0.0.1:%d/healthz" % admin)
        self.assertEqual(code, 0, err)


class TestReload(TlsCase):
    def peer_subject(self, c):
        cert = c.sock.getpeercert()
        return dict(x[0] for x in cert["subject"])["commonName"]

    def test_sighup_reloads_and_a_bad_file_keeps_the_old(self):
        cert = os.path.join(tempfile.mkdtemp(prefix="stalkd-tls-reload-"), "cert.pem")
        self.addCleanup(shutil.rmtree, os.path.dirname(cert), True)
        key = cert.replace("cert.pem", "key.pem")
        shutil.copy(CERTS.server_cert, cert)
        shutil.copy(CERTS.server_key, key)
        self.start(cert=cert, key=key)
        before = self.tls_client()
        self.assertEqual(self.peer_subject(before), "localhost")
        new_cert, new_key = CERTS.issue("reloaded", "CN=reloaded,O=stalkd tests",
                                        san="IP:127.0.0.1", usage="serverAuth")
        shutil.copy(new_cert, cert)
        shutil.copy(new_key, key)
        self.server.signal(signal.SIGHUP)
        wait_for_line(self.log, "TLS certificate reloaded: CN=reloaded")
        self.assertEqual(self.peer_subject(self.tls_client()), "reloaded")
        self.assertEqual(before.cmd("use still"), b"USING still\r\n")  # not dropped
        with open(cert, "w") as f:
            f.write("not a certificate\n")
        self.server.signal(signal.SIGHUP)
        wait_for_line(self.log, "kept the TLS certificate in use (CN=reloaded")
        self.assertEqual(self.peer_subject(self.tls_client()), "reloaded")
        self.assertEqual(self.server.proc.poll(), None)


class TestHandshakeBounds(TlsCase):
    def test_half_done_handshakes_and_a_slowloris_do_not_stall_a_client(self):
        self.start("--tls-handshake-timeout", "2")
        hello = self.client_hello()
        stuck = []
        for _ in range(100):  # half a ClientHello each, then nothing
            s = socket.create_connection(("127.0.0.1", self.tls_port))
            self.addCleanup(s.close)
            s.sendall(hello[: len(hello) // 2])
            stuck.append(s)
        slow = socket.create_connection(("127.0.0.1", self.tls_port))
        self.addCleanup(slow.close)
        good = self.tls_client()
        sent = 0
        for i in range(40):  # the slowloris sends a byte per cycle of the good client
            if sent < len(hello) - 1:
                try:
                    slow.sendall(hello[sent:sent + 1])
                    sent += 1
                except OSError:
                    break
            jid = good.put_id("job %d" % i)
            self.assertEqual(good.cmd("reserve-with-timeout 0"),
                             bs.reserved(jid, b"job %d" % i))
            self.assertEqual(good.cmd("delete %d" % jid), b"DELETED\r\n")
        # Every unfinished handshake is closed by the timeout.
        for s in stuck + [slow]:
            s.settimeout(30)
            try:
                self.assertEqual(s.recv(1), b"")
            except ConnectionResetError:
                pass
        wait_for_line(self.log, "no handshake within 2 s")
        self.assertEqual(good.cmd("use after"), b"USING after\r\n")

    def client_hello(self):
        """A real ClientHello's bytes, as Python's ssl sends them (memory BIOs)."""
        ctx = ssl.create_default_context(cafile=CERTS.ca)
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
        with self.assertRaises(ssl.SSLWantReadError):
            obj.do_handshake()
        return out.read()


class TestTlsInputBounds(TlsCase):
    """A TLS read that ends inside a record leaves the rest of it in the stream, where no
    poll announces it: the server reads it on, a budget per event, within the input bound,
    and stays one loop serving every client (docs/SECURITY.md, "TLS")."""

    STREAM = 1831 * 16383  # some 30 MB: far past the stack a read per record would need

    def stream(self, conn, head, tail):
        """Sends head, STREAM bytes in records of 16383 bytes (so a 64 KiB read ends inside
        one), then tail; returns what the server answered up to `USING t` (or its EOF)."""
        conn.sock.sendall(head)
        chunk = b"x" * 16383
        for _ in range(self.STREAM // len(chunk)):  # records of 16383 bytes
            conn.sock.sendall(chunk)
        conn.sock.sendall(tail + b"use t\r\n")
        out = b""
        while not out.endswith(b"USING t\r\n"):
            data = conn.sock.recv(65536)
            if not data:
                break
            out += data
        return out

    def check_beside_plain(self, head, tail, expected):
        plain = self.server.connect()
        self.addCleanup(plain.close)
        self.assertEqual(self.stream(plain, head, tail), expected)
        other = self.tls_client()
        done = []
        streamer = threading.Thread(target=lambda: done.append(
            self.stream(self.tls_client(), head, tail)))
        streamer.start()
        served = 0
        while streamer.is_alive() or served == 0:  # another TLS client goes on being served
            self.assertEqual(other.cmd("use o%d" % served), b"USING o%d\r\n" % served)
            served += 1
        streamer.join()
        self.assertEqual(done, [expected])

    def test_huge_put_body_in_partial_records(self):
        self.start()
        n = self.STREAM  # beanstalkd's default -z: 65535
        self.check_beside_plain(b"put 0 0 1 %d\r\n" % n, b"\r\n",
                                b"JOB_TOO_BIG\r\nUSING t\r\n")

    def test_huge_line_in_partial_records(self):
        self.start()
        self.check_beside_plain(b"", b"\r\n", b"BAD_FORMAT\r\nUSING t\r\n")

    def test_put_body_without_its_crlf(self):
        self.start("-z", str(self.STREAM))
        self.check_beside_plain(b"put 0 0 1 %d\r\n" % self.STREAM, b"XY",
                                b"EXPECTED_CRLF\r\nUSING t\r\n")


class TestTlsClose(TlsCase):
    def test_refused_request_is_read_whole_before_close_notify(self):
        """An HTTPS request refused on its head (401) while its large body is still coming:
        the answer, then close_notify, then the FIN; the body read away meanwhile. A client
        that insists on close_notify reads the whole answer, never a reset or a cut stream."""
        http = bs.free_port()
        self.start("--http", "tls://127.0.0.1:%d" % http)
        body = b"[" + b"1," * 500_000 + b"1]"
        request = (b"PUT /api/ns/q/bulk HTTP/1.1\r\nHost: x\r\nX-Token: nope\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body)) + body
        ctx = client_context(cert=False)
        for i in range(20):
            raw = socket.create_connection(("127.0.0.1", http), timeout=30)
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1",
                                 suppress_ragged_eofs=False) as s:
                s.sendall(request)
                data = b""
                while True:
                    chunk = s.recv(65536)  # SSLEOFError without close_notify
                    if not chunk:
                        break
                    data += chunk
            head, _, answer = data.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 401 "), data[:300])
            n = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
            self.assertEqual(len(answer), n, "round %d: the answer cut short" % i)


class TestPartialRecords(TlsCase):
    def established(self):
        """A TLS connection through memory BIOs over a raw socket: (socket, SSLObject, the
        outgoing BIO), its handshake done."""
        raw = socket.create_connection(("127.0.0.1", self.tls_port), timeout=30)
        self.addCleanup(raw.close)
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = client_context(cert=False).wrap_bio(inc, out, server_hostname="127.0.0.1")
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                raw.sendall(out.read())
                data = raw.recv(65536)
                if not data:
                    raise AssertionError("closed in the handshake")
                inc.write(data)
        raw.sendall(out.read())
        return raw, obj, out

    def test_partial_records_are_closed_while_clients_are_served(self):
        """Clients that stop halfway through a record (each holding OpenSSL's record buffer)
        are closed by --tls-handshake-timeout; an idle client without one is not."""
        self.start("--tls-handshake-timeout", "2")
        idle = self.tls_client()
        self.assertEqual(idle.cmd("use idle"), b"USING idle\r\n")
        stuck = []
        for _ in range(5):
            raw, obj, out = self.established()
            obj.write(b"use " + b"y" * 15000 + b"\r\n")
            record = out.read()
            raw.sendall(record[: len(record) // 2])
            stuck.append(raw)
        good = self.tls_client()
        for s in stuck:
            while True:  # the server's close_notify (perhaps a session ticket first), its EOF
                try:
                    if s.recv(65536) == b"":
                        break
                except ConnectionResetError:
                    break
            jid = good.put_id("job")
            self.assertEqual(good.cmd("delete %d" % jid), b"DELETED\r\n")
        wait_for_line(self.log, "a TLS record left unfinished within 2 s")
        self.assertEqual(idle.cmd("use still"), b"USING still\r\n")


class TestFlags(unittest.TestCase):
    def run_stalkd(self, *args):
        r = subprocess.run([bs.STALKD_BIN, "-l", "127.0.0.1", "-p", str(bs.free_port())] +
                           list(args), capture_output=True, timeout=30)
        return r.returncode, r.stderr.decode()

    def test_errors(self):
        code, err = self.run_stalkd("--tls-cert", CERTS.server_cert)
        self.assertEqual(code, 5)
        self.assertIn("want a tls:// listener", err)
        port = "tls://127.0.0.1:%d" % bs.free_port()
        code, err = self.run_stalkd("--listen", port)
        self.assertEqual(code, 5)
        self.assertIn("wants --tls-cert and --tls-key", err)
        code, err = self.run_stalkd("--listen", port, "--tls-cert", CERTS.server_cert,
                                    "--tls-key", CERTS.server_key, "--tls-verify-client")
        self.assertEqual(code, 5)
        self.assertIn("--tls-verify-client wants --tls-client-ca", err)
        code, err = self.run_stalkd("--listen", port, "--tls-cert", "/nonexistent.pem",
                                    "--tls-key", CERTS.server_key)
        self.assertEqual(code, 1)
        self.assertIn("/nonexistent.pem", err)
        code, err = self.run_stalkd("--listen", port, "--tls-cert", CERTS.server_cert,
                                    "--tls-key", CERTS.client_key)
        self.assertEqual(code, 1)
        self.assertIn("mismatch", err)

    def test_help_names_the_flags(self):
        r = subprocess.run([bs.STALKD_BIN, "-h"], capture_output=True, timeout=30)
        for flag in (b"--listen", b"--tls-cert", b"--tls-key", b"--tls-client-ca",
                     b"--tls-verify-client", b"--tls-handshake-timeout", b"tls://"):
            self.assertIn(flag, r.stdout)


if __name__ == "__main__":
    unittest.main()

"""Black-box tests of authentication per listener (docs/SECURITY.md, "Tokens on the
beanstalkd port"): the usual deployment of a plain loopback port for local workers beside a
TLS port that requires `auth` (--listen-auth).

Run: python3 -m unittest -v tests/blackbox/test_auth_tls.py   (binary: $STALKD_BIN)
"""
import os
import shutil
import ssl
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import HttpCase  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk as bs  # noqa: E402
import tls_certs  # noqa: E402

OK = b"AUTHENTICATED\r\n"
CERTS = None


def setUpModule():
    global CERTS
    CERTS = tls_certs.make()


class ListenAuthCase(HttpCase):
    """stalkd with its plain port (no auth asked), a TLS listener requiring auth
    (self.tls_port) and a plain one requiring it (self.auth_port), its output in self.log."""

    extra_args = ()

    def setUp(self):
        tmp = tempfile.mkdtemp(prefix="stalkd-auth-tls-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.log = os.path.join(tmp, "log")
        self.server_kw = {"log": self.log}
        self.tls_port = bs.free_port()
        self.auth_port = bs.free_port()
        while self.auth_port == self.tls_port:
            self.auth_port = bs.free_port()
        self.server_args = ("--listen-auth", "tls://127.0.0.1:%d" % self.tls_port,
                            "--listen-auth", "127.0.0.1:%d" % self.auth_port,
                            "--tls-cert", CERTS.server_cert, "--tls-key", CERTS.server_key,
                            ) + tuple(self.extra_args)
        super().setUp()

    def tls_client(self, cert=None):
        ctx = ssl.create_default_context(cafile=CERTS.ca)
        if cert:
            ctx.load_cert_chain(*cert)
        c = bs.Client(("127.0.0.1", self.tls_port), timeout=10.0, ssl_context=ctx,
                      server_hostname="127.0.0.1")
        self.addCleanup(c.close)
        return c

    def plain_client(self, port):
        c = bs.Client(("127.0.0.1", port), timeout=10.0)
        self.addCleanup(c.close)
        return c


class ListenAuthTest(ListenAuthCase):
    def test_plain_port_is_beanstalkd_and_tls_port_wants_auth(self):
        local = self.text()
        self.assertEqual(local.cmd("use q"), b"USING q\r\n")
        jid = local.put_id("x")
        self.assertEqual(local.cmd("peek %d" % jid), b"FOUND %d 1\r\nx\r\n" % jid)

        for c in (self.tls_client(), self.plain_client(self.auth_port)):
            for line in ("stats", "use q", "peek %d" % jid, "list-tubes"):
                self.assertEqual(c.cmd(line), b"UNAUTHORIZED\r\n", line)
            self.assertEqual(c.cmd(b"put 0 0 1 5\r\nstats"), b"UNAUTHORIZED\r\n")
            self.assertEqual(c.cmd("auth wrong"), b"UNAUTHORIZED\r\n")
            self.assertEqual(c.cmd("auth " + self.token), OK)
            self.assertEqual(c.cmd("list-tube-used"), b"USING ns/default\r\n")
            own = c.put_id("y")
            self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\ny\r\n" % own)
            # A namespace's connection: the local job does not exist for it.
            self.assertEqual(c.cmd("peek %d" % jid), b"NOT_FOUND\r\n")
            self.assertEqual(c.cmd("delete %d" % own), b"DELETED\r\n")

        # Still a beanstalkd port for the local workers.
        self.assertEqual(local.cmd("peek %d" % jid), b"FOUND %d 1\r\nx\r\n" % jid)


    def test_startup_lines_name_the_requirement(self):
        with open(self.log, "rb") as f:
            log = f.read().decode(errors="replace")
        self.assertIn("beanstalkd protocol over TLS, auth required", log)


class TokensAreNeverLoggedTest(ListenAuthCase):
    extra_args = ("-VV",)

    def test_tokens_are_not_in_the_log(self):
        wrong = "secret-that-is-not-a-token-42"
        c = self.tls_client()
        self.assertEqual(c.cmd("auth " + wrong), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("auth ns " + wrong), b"UNAUTHORIZED\r\n")
        self.assertEqual(c.cmd("auth " + self.token), OK)
        p = self.plain_client(self.auth_port)
        self.assertEqual(p.cmd("auth " + self.token), OK)
        c.close()
        p.close()
        # The server logged the TLS client (-V), proof the log is being written.
        with open(self.log, "rb") as f:
            log = f.read().decode(errors="replace")
        self.assertIn("TLS client", log)
        secret = self.token.split(".")[-1]
        self.assertNotIn(wrong, log)
        self.assertNotIn(secret, log)


if __name__ == "__main__":
    unittest.main()

"""Black-box tests of authentication per listener (docs/SECURITY.md, "Tokens on the
beanstalkd port"): the usual deployment of a plain loopback port for local workers beside a
TLS port that requires `auth` (--listen-auth); client certificates standing for a namespace
or an admin (--tls-identities), reloaded on SIGHUP; tokens never in the log.

Run: python3 -m unittest -v tests/blackbox/test_auth_tls.py   (binary: $STALKD_BIN)
"""
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpcase import HttpCase  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk as bs  # noqa: E402
import tls_certs  # noqa: E402
from test_tls import wait_for_line  # noqa: E402

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
        self.tmp = tmp
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


IDENTITIES = """# who the client certificates are
CN=client-1,O=stalkd tests namespace ns
  CN=ops,O=stalkd tests   admin
"""


class CertificateIdentityTest(ListenAuthCase):
    def setUp(self):
        self.admin_cert = CERTS.issue("ops", "CN=ops,O=stalkd tests", usage="clientAuth")
        self.nobody_cert = CERTS.issue("nobody", "CN=nobody,O=stalkd tests", usage="clientAuth")
        tmp = tempfile.mkdtemp(prefix="stalkd-identities-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.identities = os.path.join(tmp, "identities")
        with open(self.identities, "w") as f:
            f.write(IDENTITIES)
        self.extra_args = ("-V", "--tls-client-ca", CERTS.ca, "--tls-identities", self.identities)
        super().setUp()

    def metric(self, name):
        r = self.adm("GET", "/metrics")
        self.assertEqual(r.status, 200, r)
        m = re.search(r"^%s (\d+)$" % name, r.body.decode(), re.M)
        self.assertIsNotNone(m, name)
        return int(m.group(1))

    def test_a_listed_certificate_starts_authenticated(self):
        anon = self.text()
        theirs = anon.put_id("anon")
        c = self.tls_client(cert=(CERTS.client_cert, CERTS.client_key))
        # No auth sent, no AUTHENTICATED either: the first reply is the first command's.
        self.assertEqual(c.cmd("list-tube-used"), b"USING ns/default\r\n")
        self.assertEqual(c.cmd("list-tubes-watched"), bs.ok_list("ns/default"))
        self.assertEqual(c.cmd("use other/q"), b"FORBIDDEN\r\n")
        self.assertEqual(c.cmd("peek %d" % theirs), b"NOT_FOUND\r\n")
        own = c.put_id("mine")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 4\r\nmine\r\n" % own)
        self.assertEqual(c.cmd("delete %d" % own), b"DELETED\r\n")
        # auth with a token of another namespace still works, and replaces the identity.
        other = self.new_token("other")
        self.assertEqual(c.cmd("auth " + other), OK)
        self.assertEqual(c.cmd("list-tube-used"), b"USING other/default\r\n")

        admin = self.tls_client(cert=self.admin_cert)
        self.assertEqual(admin.cmd("list-tube-used"), b"USING default\r\n")
        self.assertEqual(admin.cmd("peek %d" % theirs), b"FOUND %d 4\r\nanon\r\n" % theirs)

        for cert in (self.nobody_cert, None):  # not listed; no certificate
            n = self.tls_client(cert=cert)
            self.assertEqual(n.cmd("stats"), b"UNAUTHORIZED\r\n")
            self.assertEqual(n.cmd("auth " + self.token), OK)
        self.assertEqual(self.metric("stalkd_tls_identified_total"), 2)
        log = wait_for_line(self.log, "certificate CN=ops,O=stalkd tests, admin")
        self.assertIn("certificate CN=client-1,O=stalkd tests, namespace ns", log)

    def test_sighup_reads_the_file_again_and_a_bad_one_keeps_the_old(self):
        before = self.tls_client(cert=(CERTS.client_cert, CERTS.client_key))
        with open(self.identities, "w") as f:
            f.write("CN=nobody,O=stalkd tests namespace other\n")
        self.server.signal(signal.SIGHUP)
        wait_for_line(self.log, "TLS identities reloaded: 1 subjects")
        n = self.tls_client(cert=self.nobody_cert)
        self.assertEqual(n.cmd("list-tube-used"), b"USING other/default\r\n")
        # A connection keeps who it was; a new one with the dropped subject is nobody.
        self.assertEqual(before.cmd("list-tube-used"), b"USING ns/default\r\n")
        c = self.tls_client(cert=(CERTS.client_cert, CERTS.client_key))
        self.assertEqual(c.cmd("list-tube-used"), b"UNAUTHORIZED\r\n")
        with open(self.identities, "w") as f:
            f.write("CN=nobody,O=stalkd tests namespace bad/ns\n")
        self.server.signal(signal.SIGHUP)
        wait_for_line(self.log, "kept the TLS identities in use: %s:1: a namespace" % self.identities)
        n = self.tls_client(cert=self.nobody_cert)
        self.assertEqual(n.cmd("list-tube-used"), b"USING other/default\r\n")


class IdentityFileErrorsTest(unittest.TestCase):
    def run_stalkd(self, *args):
        return subprocess.run([bs.STALKD_BIN, "-p", str(bs.free_port())] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)

    def test_bad_files_and_flags(self):
        tmp = tempfile.mkdtemp(prefix="stalkd-identities-")
        self.addCleanup(shutil.rmtree, tmp, True)
        tls = ["--listen", "tls://127.0.0.1:%d" % bs.free_port(), "--tls-cert",
               CERTS.server_cert, "--tls-key", CERTS.server_key]
        path = os.path.join(tmp, "ids")
        cases = [("CN=a namespace ns\nCN=a admin\n", "ids:2: the subject \"CN=a\" is given twice"),
                 ("CN=a owner\n", "ids:1: want \"SUBJECT namespace NS\""),
                 ("admin\n", "ids:1: no certificate subject"),
                 ("CN=a namespace -x\n", "ids:1: a namespace is")]
        for text, want in cases:
            with open(path, "w") as f:
                f.write(text)
            p = self.run_stalkd(*tls, "--tls-client-ca", CERTS.ca, "--tls-identities", path)
            self.assertNotEqual(p.returncode, 0, text)
            self.assertIn(want, p.stderr.decode(), text)
        p = self.run_stalkd(*tls, "--tls-identities", path)
        self.assertEqual(p.returncode, 5)
        self.assertIn("--tls-identities wants --tls-client-ca", p.stderr.decode())
        p = self.run_stalkd(*tls, "--tls-client-ca", CERTS.ca, "--tls-identities",
                            os.path.join(tmp, "missing"))
        self.assertIn("No such file", p.stderr.decode())


if __name__ == "__main__":
    unittest.main()

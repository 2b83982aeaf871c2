"""stalk over TLS (--tls, --ca, --cert, --key) against stalkd's tls:// listener, mutual TLS
required: commands work, and each way the handshake can fail says why (exit 3)."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import beanstalk as bs  # noqa: E402
import clicase  # noqa: E402
import tls_certs  # noqa: E402

CERTS = None


def setUpModule():
    global CERTS
    CERTS = tls_certs.make()


class TestStalkTls(clicase.StalkCase):
    def setUp(self):
        self.tls_port = bs.free_port()
        self.server_args = ("--listen", "tls://127.0.0.1:%d" % self.tls_port,
                            "--tls-cert", CERTS.server_cert, "--tls-key", CERTS.server_key,
                            "--tls-client-ca", CERTS.ca, "--tls-verify-client")
        super().setUp()

    def tls(self, *args):
        return ["--tls", "--ca", CERTS.ca] + list(args)

    def on_tls(self, *args, code=0):
        """stalk ARGS against the TLS listener: its stdout when code is 0, else its stderr."""
        port = types.SimpleNamespace(port=self.tls_port)
        return self.ok(*args, server=port) if code == 0 else self.fails(code, *args, server=port)

    def mine(self, *args):
        return self.tls("--cert", CERTS.client_cert, "--key", CERTS.client_key, *args)

    def test_commands_over_mutual_tls(self):
        self.assertEqual(self.on_tls(*self.mine("put", "hello")), "inserted 1\n")
        stats = self.on_tls(*self.mine("stats"))
        self.assertIn("current-jobs-ready: 1", stats)
        self.assertIn("hello", self.on_tls(*self.mine("reserve")))
        # The same job through the plain port (released when the reserving stalk left).
        self.assertIn("reserves: 1", self.ok("stats-job", "1"))

    def test_handshake_failures_are_explained(self):
        err = self.on_tls(*self.tls("stats"), code=3)
        self.assertIn("certificate required", err)
        err = self.on_tls("--tls", "stats", code=3)
        self.assertIn("certificate verify failed", err)  # the test CA is not the system's
        err = self.fails(3, *self.mine("stats"))  # the plain port
        self.assertIn("TLS handshake with", err)

    def test_bad_files(self):
        err = self.on_tls(*self.tls("--cert", "/nonexistent.pem", "--key", CERTS.client_key,
                                    "stats"), code=2)
        self.assertIn("/nonexistent.pem", err)


if __name__ == "__main__":
    unittest.main()

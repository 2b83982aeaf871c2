"""stalk --token / STALK_TOKEN and --ns against stalkd listeners that require `auth`
(--require-auth on the plain port, --listen-auth on a TLS one): stalk authenticates right
after connecting, a refused token is explained (exit 4) without being echoed."""
import os
import sys
import types
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "blackbox"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import beanstalk as bs  # noqa: E402
import clicase  # noqa: E402
import tls_certs  # noqa: E402
from httpcase import HttpServer  # noqa: E402

CERTS = None


def setUpModule():
    global CERTS
    CERTS = tls_certs.make()


class TestStalkAuth(clicase.StalkCase):
    def setUp(self):
        self.tls_port = bs.free_port()
        self.server = HttpServer(args=(
            "--require-auth", "--listen-auth", "tls://127.0.0.1:%d" % self.tls_port,
            "--tls-cert", CERTS.server_cert, "--tls-key", CERTS.server_key))
        self.addCleanup(self.server.stop)
        self.token = self.new_token("ns")

    def new_token(self, ns, chosen=None):
        params = {"description": "cli"}
        if chosen:
            params["token"] = chosen
        c = self.server.admin()
        self.addCleanup(c.close)
        r = c.request("POST", "/token/%s?%s" % (ns, urllib.parse.urlencode(params)))
        self.assertEqual(r.status, 201, r)
        return r.json()["token"]

    def env(self, **kw):
        e = dict(os.environ)
        e.pop("STALK_TOKEN", None)
        e.pop("STALK_NS", None)
        e.update(kw)
        return e

    def test_token_flag_and_environment(self):
        self.assertEqual(self.ok("--token", self.token, "put", "-t", "ns/q", "hello",
                                 env=self.env()), "inserted 1\n")
        out = self.ok("stats-tube", "ns/q", env=self.env(STALK_TOKEN=self.token))
        self.assertIn("current-jobs-ready: 1", out)
        # The tube the namespace's connection starts with is known to stalk.
        self.assertEqual(self.ok("put", "-t", "ns/default", "x",
                                 env=self.env(STALK_TOKEN=self.token)), "inserted 2\n")
        self.assertIn("hello", self.ok("--token", self.token, "reserve", "-t", "ns/q",
                                       "--delete", env=self.env()))

    def test_without_or_with_a_wrong_token(self):
        err = self.fails(clicase.SERVER, "stats", env=self.env())
        self.assertIn("UNAUTHORIZED", err)
        wrong = self.token + "nope"
        r = self.stalk("--token", wrong, "stats", env=self.env())
        self.assertEqual(r.returncode, clicase.SERVER, r)
        self.assertIn(b"auth: the server answered UNAUTHORIZED", r.stderr)
        self.assertNotIn(wrong.encode(), r.stderr + r.stdout)
        self.assertNotIn(self.token.encode(), r.stderr + r.stdout)

    def test_chosen_token_with_its_namespace_over_tls(self):
        mine = self.new_token("team", chosen="team-token-0123456789")
        tls = types.SimpleNamespace(port=self.tls_port)
        args = ("--tls", "--ca", CERTS.ca)
        err = self.fails(clicase.SERVER, *args, "--token", mine, "stats", server=tls,
                         env=self.env())
        self.assertNotIn(mine, err)
        self.assertEqual(self.ok(*args, "--ns", "team", "put", "-t", "team/q", "x", server=tls,
                                 env=self.env(STALK_TOKEN=mine)), "inserted 1\n")
        self.assertEqual(self.ok(*args, "stats-job", "1", server=tls,
                                 env=self.env(STALK_TOKEN=mine, STALK_NS="team")).count("tube: team/q"), 1)


if __name__ == "__main__":
    unittest.main()

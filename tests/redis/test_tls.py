"""The Redis store over TLS (docs/SCALE-OUT.md, "Redis over TLS"): rediss:// and rediss-sentinel:// with
--store-tls-ca, --store-tls-cert and --store-tls-key, against redis-server and redis-sentinel
listening on TLS only (`port 0`, tls-port), with certificates made by tests/lib/tls_certs.py:

  * one Redis that requires a client certificate (tls-auth-clients yes) and a password: the
    front ends' connections (commands, pub/sub) do TLS before AUTH: put, a reserve waiting on
    one front end woken by a put on another, delete; jobs of 2 MB both ways;
  * refusals stop a front end at start with a clear error (exit 1): a server certificate of
    another CA (the verify failure named), no client certificate where one is required, a
    server certificate not naming --store-tls-name; a TLS URL on a plain Redis is an outage
    the log names;
  * flags are checked (usage error, as a bad flag): --store-tls-* without a rediss URL, a
    certificate without its key, an unreadable CA file;
  * Sentinel over TLS (its own password too): the sentinels and the master found through
    them, and after a failover the new master, all over TLS.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/redis/test_tls.py
"""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tlscase import TlsCase  # noqa: E402
from storecase import redis_fixture  # noqa: E402
from test_stall import REPLY_TIMEOUT  # noqa: E402
import beanstalk  # noqa: E402
from beanstalk import wait_until  # noqa: E402

PASSWORD = "tls-s3cret"


class TestOneRedis(TlsCase):
    def test_client_certificate_and_password(self):
        r = self.tls_redis(PASSWORD)
        url = self.with_password(r.url(), PASSWORD)
        self.assertTrue(url.startswith("rediss://"), url)
        prefix = redis_fixture.unique_prefix()
        fe1 = self.tls_front_end(url, prefix)
        fe2 = self.tls_front_end(url, prefix)
        self.cycle(fe1)
        self.wake_across(fe1, fe2, "across")
        # Redis listens on TLS only: every one of stalkd's connections is TLS.
        self.assertEqual(r.config_get("port"), "0")
        clients = r.call("CLIENT", "LIST").decode()
        self.assertGreaterEqual(clients.count("cmd=subscribe"), 2, clients)
        for fe in (fe1, fe2):
            self.stop(fe)
            self.assertNotIn(PASSWORD, self.log_of(fe))

    def test_big_jobs_cross_in_many_records(self):
        # 2 MB each way: writes that the socket takes in parts, replies read over many loop
        # events (TLS records are 16 KiB).
        r = self.tls_redis(PASSWORD)
        fe = self.tls_front_end(self.with_password(r.url(), PASSWORD),
                                redis_fixture.unique_prefix(), "-z", str(3 << 20))
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        body = bytes(range(256)) * (2 << 12)
        jid = beanstalk.inserted_id(c.put(body))
        self.assertEqual(c.cmd("reserve-with-timeout 5"), beanstalk.reserved(jid, body))
        self.assertEqual(c.cmd("peek %d" % jid), b"FOUND %d %d\r\n" % (jid, len(body))
                         + body + b"\r\n")
        self.stop(fe)

    def test_refusals_stop_the_start(self):
        r = self.tls_redis(PASSWORD)
        prefix = redis_fixture.unique_prefix()
        url = self.with_password(r.url(), PASSWORD)
        # The server's certificate is not of the CA given: the verify failure is named.
        self.start_fails(redis_fixture.store_argv(url, prefix, 0) + redis_fixture.store_tls_argv(
            self.certs, ca=self.certs.stranger_ca), "TLS refused", "certificate verify failed")
        # No client certificate where Redis requires one.
        self.start_fails(redis_fixture.store_argv(url, prefix, 0) + redis_fixture.store_tls_argv(
            self.certs, client_cert=False), "TLS refused", "certificate required")
        # The certificate names 127.0.0.1 and localhost, not what --store-tls-name says.
        self.start_fails(redis_fixture.store_argv(url, prefix, 0)
                         + redis_fixture.store_tls_argv(self.certs)
                         + ["--store-tls-name", "redis.example"], "TLS refused",
                         "certificate verify failed")

    def test_tls_to_a_plain_port_says_so(self):
        # A plain Redis waits for the end of a line that a ClientHello lacks: no refusal, an
        # outage that the log names.
        plain = self.redis()
        fe = self.tls_front_end(plain.url().replace("redis://", "rediss://"),
                                redis_fixture.unique_prefix())
        self.assertTrue(wait_until(lambda: "TLS handshake not answered" in self.log_of(fe),
                                   timeout=30), self.log_of(fe))
        self.assertIsNone(fe.proc.poll())
        self.stop(fe)

    def test_name_checked_is_the_one_given(self):
        r = self.tls_redis(PASSWORD, auth_clients=False)
        prefix = redis_fixture.unique_prefix()
        url = self.with_password(r.url(), PASSWORD)
        fe = self.tls_front_end(url, prefix, "--store-tls-name", "localhost", client_cert=False)
        self.cycle(fe)
        self.stop(fe)

    def test_flags_checked(self):
        r = self.tls_redis(PASSWORD)
        plain_args = redis_fixture.store_argv(self.with_password(r.url().replace(
            "rediss://", "redis://"), PASSWORD), "x", 0)
        tls_args = redis_fixture.store_argv(self.with_password(r.url(), PASSWORD), "x", 0)
        cases = [
            (plain_args + ["--store-tls-ca", self.certs.ca], "want a TLS --store"),
            (["--store-tls-ca", self.certs.ca], "want a TLS --store"),
            (tls_args + ["--store-tls-cert", self.certs.client_cert], "go together"),
            (tls_args + ["--store-tls-key", self.certs.client_key], "go together"),
            (tls_args + ["--store-tls-ca", "/nonexistent/ca.pem"], "/nonexistent/ca.pem"),
            (tls_args + ["--store-tls-ca", self.certs.ca, "--store-tls-cert",
                         self.certs.client_cert, "--store-tls-key", self.certs.server_key],
             self.certs.server_key),
            (tls_args + ["--store-tls-name", ""], "--store-tls-name"),
        ]
        usage = subprocess.run([beanstalk.STALKD_BIN, "--no-such-flag"], timeout=30,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        for args, says in cases:
            with self.subTest(args=args[4:]):
                p = subprocess.run([beanstalk.STALKD_BIN, "-p", "0"] + args,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
                out = p.stdout.decode(errors="replace")
                self.assertEqual(p.returncode, usage, out)
                self.assertIn(says, out)
                self.assertNotIn(PASSWORD, out)


class TestSentinel(TlsCase):
    def test_sentinels_and_masters_over_tls_through_a_failover(self):
        tls = redis_fixture.redis_tls(self.certs)
        rs = self.replicated(tls=tls, password=PASSWORD)
        ss = self.sentinels(rs.master, tls=tls, password="sentinel-pw", master_password=PASSWORD)
        url = self.with_password(ss.url(), PASSWORD)
        self.assertTrue(url.startswith("rediss-sentinel://"), url)
        pw_file = self.password_file("sentinel-pw")
        prefix = redis_fixture.unique_prefix()
        fe = self.tls_front_end(url, prefix, "--store-sentinel-password-file", pw_file)
        self.cycle(fe, "before")
        old = rs.master.addr
        rs.master.kill()
        ss.wait_failover(old)
        # The new master, found through the sentinels, is connected to over TLS too.
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertEqual(c.cmd("use probe"), b"USING probe\r\n")
        self.assertTrue(wait_until(lambda: c.put("x").startswith(b"INSERTED"), timeout=60))
        self.cycle(fe, "after")
        self.stop(fe)
        log = self.log_of(fe)
        self.assertNotIn(PASSWORD, log)
        self.assertNotIn("sentinel-pw", log)


if __name__ == "__main__":
    unittest.main()

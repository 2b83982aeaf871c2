"""TlsCase, the unittest base class of the TLS tests (tests/redis/test_tls.py,
tests/cluster/test_tls.py): test_auth's AuthCase (start_fails, cycle, password files, logs)
with certificates made once per class by tests/lib/tls_certs.py, and stalkd front ends given
them (--store-tls-*).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_auth  # noqa: E402
from storecase import redis_fixture  # noqa: E402
from test_stall import REPLY_TIMEOUT  # noqa: E402
import beanstalk  # noqa: E402
from beanstalk import wait_until  # noqa: E402
import tls_certs  # noqa: E402


class TlsCase(test_auth.AuthCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.certs = tls_certs.make()

    def tls_redis(self, password, auth_clients=True):
        """One redis-server on TLS only (redis_fixture.redis_tls)."""
        return self.redis(tls=redis_fixture.redis_tls(self.certs, auth_clients),
                          password=password)

    def tls_front_end(self, url, prefix, *args, client_cert=True):
        """A front end on `url` with the CA, and the client certificate unless client_cert is
        False."""
        return self.front_end(url, prefix, *(redis_fixture.store_tls_argv(
            self.certs, client_cert) + list(args)))

    @staticmethod
    def with_password(url, password):
        scheme, rest = url.split("://", 1)
        return "%s://:%s@%s" % (scheme, password, rest)

    def wake_across(self, fe1, fe2, tube):
        """A reserve waiting on fe1 is woken by a put on fe2 (through pub/sub), then the job
        is deleted."""
        w = self.client(fe1, timeout=REPLY_TIMEOUT)
        s = self.client(fe1, timeout=REPLY_TIMEOUT)
        c = self.client(fe2, timeout=REPLY_TIMEOUT)
        self.assertEqual(w.cmd("watch %s" % tube), b"WATCHING 2\r\n")
        w.send(b"reserve-with-timeout 60\r\n")
        self.assertTrue(wait_until(lambda: beanstalk.stats_of(
            s, "stats-tube %s" % tube).get("current-waiting") == "1", timeout=REPLY_TIMEOUT))
        self.assertEqual(c.cmd("use %s" % tube), ("USING %s\r\n" % tube).encode())
        jid = beanstalk.inserted_id(c.put("woken"))
        self.assertEqual(w.read_reply(), beanstalk.reserved(jid, b"woken"))
        self.assertEqual(w.cmd("delete %d" % jid), b"DELETED\r\n")

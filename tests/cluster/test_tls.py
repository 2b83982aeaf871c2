"""stalkd on a Redis Cluster over TLS (docs/SCALE-OUT.md, "TLS"): every node listens on TLS
only, requires a client certificate (tls-auth-clients yes) and a password, and speaks TLS on
its cluster bus and to its replicas; stalkd is given rediss-cluster://:PASSWORD@... with
--store-tls-ca/-cert/-key. The cluster prober, every master's link and the pub/sub connection
do TLS before AUTH: jobs of tubes on every master are put and reserved, a waiting reserve is
woken. A server certificate of another CA stops the start, naming the verify failure.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/cluster/test_tls.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "redis"))
from tlscase import TlsCase  # noqa: E402
import redis_fixture  # noqa: E402
from redis_cluster_fixture import RedisCluster  # noqa: E402

PASSWORD = "cluster-tls-pw"


class TestClusterOverTls(TlsCase):
    def test_every_master_served_and_a_wrong_ca_stops_the_start(self):
        cl = RedisCluster(masters=3, replicas=1, password=PASSWORD,
                          tls=redis_fixture.redis_tls(self.certs))
        self.addCleanup(cl.close)
        url = self.with_password(cl.url(), PASSWORD)
        self.assertTrue(url.startswith("rediss-cluster://"), url)
        prefix = redis_fixture.unique_prefix()
        fe1 = self.tls_front_end(url, prefix)
        fe2 = self.tls_front_end(url, prefix)
        # A tube on each master: the prober, every master's link and pub/sub over TLS.
        for m, tubes in cl.pick_tubes(1, "tls%d").items():
            with self.subTest(master=m.port):
                self.cycle(fe1, tubes[0])
                self.wake_across(fe1, fe2, tubes[0])
        for fe in (fe1, fe2):
            self.stop(fe)
            self.assertNotIn(PASSWORD, self.log_of(fe))
        self.start_fails(redis_fixture.store_argv(url, redis_fixture.unique_prefix(), 0)
                         + redis_fixture.store_tls_argv(self.certs, ca=self.certs.stranger_ca),
                         "TLS refused", "certificate verify failed")


if __name__ == "__main__":
    unittest.main()

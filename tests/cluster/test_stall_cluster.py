"""A Redis Cluster master that stops answering (SIGSTOP by PID), the cluster having no replica
to promote: calls on its partitions are answered INTERNAL_ERROR within --store-retry of being
sent (not never), the other masters' partitions are served all along, /readyz says 503 with
the reason, and once the master answers again its partitions are served again.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/cluster/test_stall_cluster.py
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "redis"))
sys.path.insert(0, HERE)
from test_review import ClusterCase  # noqa: E402
from test_stall import REPLY_TIMEOUT, StallCase  # noqa: E402
from redis_cluster_fixture import keyslot  # noqa: E402


class TestClusterMasterStopped(ClusterCase, StallCase):
    def test_only_its_partitions_fail_then_serve_again(self):
        a, b = self.two_tubes()
        mb = self.cluster.owner(keyslot("{%d/1024}" % self.cluster_partition(b)))
        if mb is self.g_node():     # keep the front ends' global partition out of it
            a, b = b, a
            mb = self.cluster.owner(keyslot("{%d/1024}" % self.cluster_partition(b)))
        fe = self.stalling_front_end(self.cluster.url(), self.prefix)
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertTrue(c.put("a0", tube=a).startswith(b"INSERTED "))
        self.assertTrue(c.put("b0", tube=b).startswith(b"INSERTED "))
        self.assertReady()

        mb.pause()
        self.addCleanup(mb.resume)
        self.assertEqual(c.put("b1", tube=b), b"INTERNAL_ERROR\r\n")
        self.assertTrue(c.put("a1", tube=a).startswith(b"INSERTED "))
        why = self.assertNotReady()
        print("\n/readyz while a master is stopped: 503 %r" % why, file=sys.stderr)
        self.assertTrue(c.put("a2", tube=a).startswith(b"INSERTED "))

        mb.resume()
        self.assertReady()
        self.assertTrue(c.put("b2", tube=b).startswith(b"INSERTED "))

    @staticmethod
    def cluster_partition(tube):
        from redis_cluster_fixture import tube_partition
        return tube_partition(tube)


if __name__ == "__main__":
    unittest.main()

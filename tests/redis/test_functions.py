"""Functions that vanish while a front end is connected (FUNCTION FLUSH here; a Redis restarted
empty or a replica promoted without them look the same): the first call that finds its
function missing has the library loaded again and goes once more, so clients see no error.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/redis/test_functions.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storecase import StoreCase, redis_fixture  # noqa: E402
from test_stall import REPLY_TIMEOUT  # noqa: E402
from redis_cluster_fixture import RedisCluster, keyslot, tube_partition  # noqa: E402
import beanstalk  # noqa: E402


def has_library(node):
    return any(lib[1] == b"stalkd" for lib in node.call("FUNCTION", "LIST"))


class TestFunctionFlush(StoreCase):
    def test_one_redis(self):
        r = self.redis()
        fe = self.front_end(r.url(), redis_fixture.unique_prefix(), wait=0)
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        jid = beanstalk.inserted_id(c.put("before"))
        self.assertEqual(r.call("FUNCTION", "FLUSH"), "OK")
        self.assertFalse(has_library(r))
        self.assertEqual(c.cmd("peek %d" % jid), beanstalk.found(jid, b"before"))
        jid2 = beanstalk.inserted_id(c.put("after"))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), beanstalk.reserved(jid, b"before"))
        self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertTrue(has_library(r))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), beanstalk.reserved(jid2, b"after"))

    def test_cluster_master(self):
        cluster = RedisCluster(masters=3, replicas=0)
        self.addCleanup(cluster.close)
        fe = self.front_end(cluster.url(), redis_fixture.unique_prefix(), wait=0)
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        tube = "flushed"
        node = cluster.owner(keyslot("{%d/1024}" % tube_partition(tube)))
        c.cmd("use " + tube)
        c.cmd("watch " + tube)
        jid = beanstalk.inserted_id(c.put("before"))
        self.assertEqual(node.call("FUNCTION", "FLUSH"), "OK")
        jid2 = beanstalk.inserted_id(c.put("after"))
        self.assertTrue(has_library(node))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), beanstalk.reserved(jid, b"before"))
        self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), beanstalk.reserved(jid2, b"after"))


if __name__ == "__main__":
    unittest.main()

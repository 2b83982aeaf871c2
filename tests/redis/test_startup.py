"""A front end does not give up while Redis is away, slow or resyncing: it serves its
connections at once (what needs no Redis is answered, the rest waits up to --store-retry, then
INTERNAL_ERROR), /readyz says why it is not ready, and it serves as soon as the store is
ready. It exits on its own only when Redis lacks a setting it requires, before it ever served
(tests/redis/test_store.py, TestStartChecks).

  * Redis not running at start, started later (on the port the front end was given);
  * a master with min-replicas-to-write 1 and no replica yet: FUNCTION LOAD is refused
    (NOREPLICAS) until a replica attaches;
  * a cluster with a master stopped (SIGSTOP) at start: the other masters' tubes are served.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/redis/test_startup.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storecase import redis_fixture  # noqa: E402
from test_stall import REPLY_TIMEOUT, StallCase, readyz  # noqa: E402
from redis_fixture import RedisServer  # noqa: E402
from redis_cluster_fixture import RedisCluster, keyslot, tube_partition  # noqa: E402
import beanstalk  # noqa: E402
from beanstalk import wait_until  # noqa: E402


class TestStartWithoutRedis(StallCase):
    def test_redis_started_after_the_front_end(self):
        port = beanstalk.free_port()
        fe = self.stalling_front_end("redis://127.0.0.1:%d" % port)
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertEqual(c.cmd("use early"), b"USING early\r\n")   # needs no Redis
        self.assertEqual(c.put("early"), b"INTERNAL_ERROR\r\n")    # after --store-retry
        why = self.assertNotReady()
        self.assertIn(str(port), why)
        self.assertIsNone(fe.proc.poll(), "the front end exited")

        r = RedisServer(port=port)
        self.addCleanup(r.close)
        self.assertReady()
        jid = beanstalk.inserted_id(c.put("late"))
        self.assertEqual(c.cmd("watch early"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), beanstalk.reserved(jid, b"late"))

    def test_waiting_reserve_from_before_the_start(self):
        port = beanstalk.free_port()
        fe = self.stalling_front_end("redis://127.0.0.1:%d" % port)
        w = self.client(fe, timeout=REPLY_TIMEOUT)
        w.send(b"reserve-with-timeout 600\r\n")
        self.assertNotReady()
        r = RedisServer(port=port)
        self.addCleanup(r.close)
        self.assertReady()
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        jid = beanstalk.inserted_id(c.put("for the early waiter"))
        self.assertEqual(w.read_reply(), beanstalk.reserved(jid, b"for the early waiter"))


class TestStartWhileReplicasResync(StallCase):
    def test_noreplicas_at_function_load_then_a_replica_attaches(self):
        master = self.redis(min_replicas_to_write=1)
        fe = self.stalling_front_end(master.url(), wait=1)
        why = self.assertNotReady()
        self.assertTrue(wait_until(lambda: "NOREPLICAS" in readyz(self.admin)[1],
                                   REPLY_TIMEOUT), readyz(self.admin))
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertEqual(c.put("refused"), b"INTERNAL_ERROR\r\n")
        self.assertIsNone(fe.proc.poll(), "the front end exited")
        print("\n/readyz before a replica attached: 503 %r" % why, file=sys.stderr)

        replica = self.redis(replicaof=master, min_replicas_to_write=1)
        replica.wait_link_up()
        self.assertReady()
        self.assertTrue(c.put("accepted").startswith(b"INSERTED "))


class TestClusterStartWithAMasterStopped(StallCase):
    def test_other_masters_served(self):
        cluster = RedisCluster(masters=3, replicas=0)
        self.addCleanup(cluster.close)
        g = cluster.owner(keyslot("{g}"))
        stopped = next(m for m in cluster.masters() if m is not g)
        served = next(m for m in cluster.masters() if m is not stopped)

        def tube_on(node):
            return next(t for t in ("t%d" % i for i in range(10000))
                        if cluster.owner(keyslot("{%d/1024}" % tube_partition(t))) is node)
        stopped.pause()
        self.addCleanup(stopped.resume)
        fe = self.stalling_front_end(cluster.url(), redis_fixture.unique_prefix())
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertTrue(c.put("x", tube=tube_on(served)).startswith(b"INSERTED "))
        self.assertEqual(c.put("y", tube=tube_on(stopped)), b"INTERNAL_ERROR\r\n")
        self.assertNotReady()
        stopped.resume()
        self.assertReady()
        self.assertTrue(c.put("z", tube=tube_on(stopped)).startswith(b"INSERTED "))


if __name__ == "__main__":
    unittest.main()

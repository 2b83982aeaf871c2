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


class TestTubesNamedBeforeTheStart(StallCase):
    """Before the front end has reached Redis, `use` and `watch` are answered at once and the
    tube references wait in the front end; they are bounded: a tube whose references came
    back to none holds nothing, and past 10000 tubes with references outstanding, `use` or
    `watch` of another is answered OUT_OF_MEMORY (what beanstalkd answers when it cannot
    make a tube) until the store is ready."""

    LIMIT = 10000

    def pipeline(self, c, lines):
        c.send("".join(l + "\r\n" for l in lines).encode())
        return [c.read_line() for _ in lines]

    def test_pending_tube_references_are_bounded(self):
        port = beanstalk.free_port()
        fe = self.stalling_front_end("redis://127.0.0.1:%d" % port)
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        # 3 * LIMIT tubes used one after another: one outstanding at a time
        got = self.pipeline(c, ["use u%d" % i for i in range(3 * self.LIMIT)])
        self.assertEqual(got[-1], b"USING u%d\r\n" % (3 * self.LIMIT - 1))
        self.assertEqual([g for g in got if not g.startswith(b"USING ")], [])
        # watched tubes stay referenced: "default" and u29999 hold two of the LIMIT
        w = self.client(fe, timeout=REPLY_TIMEOUT)
        got = self.pipeline(w, ["watch w%d" % i for i in range(self.LIMIT)])
        self.assertEqual(got[self.LIMIT - 3], b"WATCHING %d\r\n" % (self.LIMIT - 1))
        self.assertEqual(got[self.LIMIT - 2:], [b"OUT_OF_MEMORY\r\n"] * 2)
        self.assertEqual(c.cmd("use fresh"), b"OUT_OF_MEMORY\r\n")
        self.assertEqual(c.cmd("list-tube-used"), b"USING u%d\r\n" % (3 * self.LIMIT - 1))
        self.assertEqual(w.cmd("ignore w0"), b"WATCHING %d\r\n" % (self.LIMIT - 2))
        self.assertEqual(c.cmd("use fresh"), b"USING fresh\r\n")  # room again
        self.assertIsNone(fe.proc.poll(), "the front end exited")

        r = RedisServer(port=port)
        self.addCleanup(r.close)
        self.assertReady()
        self.assertEqual(w.cmd("watch later"), b"WATCHING %d\r\n" % (self.LIMIT - 1))

        # The references go out in the order the tubes were first named (default, then u0 to
        # u29999 had they been kept, w0, w1...): once w1 is listed, those before it that were
        # dropped (no reference left) were not sent.
        def listed():
            r = c.cmd("list-tubes")
            return set(beanstalk.parse_yaml(r)) if r.startswith(b"OK ") else set()
        self.assertTrue(wait_until(lambda: "w1" in listed(), REPLY_TIMEOUT), listed())
        tubes = listed()
        self.assertNotIn("w0", tubes)
        self.assertNotIn("u0", tubes)
        self.assertNotIn("u%d" % (3 * self.LIMIT - 1), tubes)


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

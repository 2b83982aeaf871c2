"""The Redis Cluster test fixture itself (tests/lib/redis_cluster_fixture.py) against real
cluster-enabled redis-server processes: creation (3 masters, a replica each, every slot
served), the hash slot function against CLUSTER KEYSLOT, moving slots with their keys (by
hand and with redis-cli --cluster reshard), a master killed and its replica promoted (the
time is printed), the old master restarted as a replica, and that close() leaves no process.

Run: python3 -m unittest -v tests/cluster/test_fixture.py
"""
import os
import subprocess
import sys
import time
import unittest

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from redis_cluster_fixture import (RedisCluster, keyslot, partition_slot,  # noqa: E402
                                   tube_partition, tube_slot)
import redis_fixture  # noqa: E402
from redis_fixture import RespError  # noqa: E402


def gone(pid):
    """True once `pid` has exited (a zombie not yet reaped counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@unittest.skipUnless(redis_fixture.available(), "redis-server not installed")
class TestRedisCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        t0 = time.monotonic()
        cls.cluster = RedisCluster(masters=3, replicas=1)
        print("\ncluster of 6 nodes up in %.1f s" % (time.monotonic() - t0), file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        pids = [n.pid for n in cls.cluster.nodes]
        cls.cluster.close()
        for pid in pids:
            assert gone(pid), "node %d outlived close()" % pid

    def test_1_shape_and_settings(self):
        c = self.cluster
        self.assertEqual(len(c.masters()), 3)
        self.assertEqual(len(c.replicas()), 3)
        covered = 0
        for (start, end), addr in c.masters()[0].slot_owners().items():
            covered += end - start + 1
            self.assertIn(c.node_at(addr), c.masters())
        self.assertEqual(covered, 16384)
        node = c.nodes[0]
        self.assertEqual(node.config_get("appendonly"), "yes")
        self.assertEqual(node.config_get("cluster-enabled"), "yes")
        self.assertEqual(node.config_get("cluster-node-timeout"), "1000")
        self.assertEqual(c.url(), "redis-cluster://" + ",".join(
            "127.0.0.1:%d" % n.port for n in c.nodes))

    def test_2_keyslot_matches_redis(self):
        node = self.cluster.masters()[0]
        for key in ["", "a", "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap",
                    "foo{bar}{zap}", "{0}", "{1023}", "stalkd:{7}:m", "\xff\x00k"]:
            self.assertEqual(keyslot(key), node.call("CLUSTER", "KEYSLOT", key), key)

    def test_3_move_slots_with_keys(self):
        c = self.cluster
        key = "{mv}:k"
        slot = keyslot(key)
        src = c.owner(slot)
        src.call("SET", key, "v")
        dst = next(m for m in c.masters() if m is not src)
        c.move_slots([slot], src, dst)
        self.assertIs(c.owner(slot), dst)
        self.assertEqual(dst.call("GET", key), b"v")
        with self.assertRaisesRegex(RespError, "MOVED %d 127.0.0.1:%d" % (slot, dst.port)):
            src.call("GET", key)
        c.move_slots([slot], dst, src)
        self.assertIs(c.owner(slot), src)
        before = {m.port: sum(e - s + 1 for (s, e), a in m.slot_owners().items()
                              if a == m.addr) for m in c.masters()}
        c.reshard(10, c.masters()[0], c.masters()[1])
        after = {m.port: sum(e - s + 1 for (s, e), a in m.slot_owners().items()
                             if a == m.addr) for m in c.masters()}
        p0, p1 = c.masters()[0].port, c.masters()[1].port
        self.assertEqual(after[p0], before[p0] - 10)
        self.assertEqual(after[p1], before[p1] + 10)

    def test_4_failover_and_restart(self):
        c = self.cluster
        key = "{fo}:k"
        victim = c.owner(keyslot(key))
        # WAIT covers the writes of its own connection: SET and WAIT on one.
        with victim.client() as r:
            r.call("SET", key, "kept")
            self.assertEqual(r.call("WAIT", 1, 5000), 1)
        victim_replicas = victim.info("replication")
        t0 = time.monotonic()
        c.kill_master(c.masters().index(victim))
        new = c.wait_failover(victim)
        print("\nkill -9 of a master to its replica serving: %.2f s"
              % (time.monotonic() - t0), file=sys.stderr)
        self.assertIsNot(new, victim)
        self.assertEqual(new.role(), "master")
        self.assertEqual(new.call("GET", key), b"kept",
                         "new master %d, replicas were %s" % (new.port, victim_replicas))
        self.assertEqual(len(c.masters()), 3)
        c.restart(victim)
        self.assertTrue(redis_fixture.wait_until(lambda: victim.role() == "slave", timeout=10))
        self.assertEqual(len(c.masters()), 3)

    def test_5_partitions_and_pick_tubes(self):
        c = self.cluster
        node = c.masters()[0]
        # A tube's partition: its `(group)` when non-empty, else its whole name.
        self.assertEqual(tube_partition("(grp)a"), tube_partition("(grp)b"))
        self.assertEqual(tube_partition("(grp)a"), tube_partition("grp"))
        self.assertEqual(tube_partition("()x"), keyslot("()x") % 1024)
        for p in (0, 17, 598, 1023):
            self.assertEqual(partition_slot(p), node.call("CLUSTER", "KEYSLOT",
                                                          "X:{%d/1024}:j:1" % p))
        picked = c.pick_tubes(3, "pt")
        self.assertEqual(sorted(m.port for m in picked), sorted(m.port for m in c.masters()))
        parts = set()
        for m, tubes in picked.items():
            self.assertEqual(len(tubes), 3)
            for t in tubes:
                self.assertIs(c.owner(tube_slot(t)), m, t)
                parts.add(tube_partition(t))
        self.assertEqual(len(parts), 9)
        src = c.masters()[1]
        low = set(c.slots_of(src)[:50])
        only = c.pick_tubes(2, "(g%d)lo", masters=[src], where=lambda t, s: s in low)
        self.assertTrue(all(tube_slot(t) in low for t in only[src]), only[src])


CHILD = """
import os, signal, sys
sys.path.insert(0, %r)
from redis_cluster_fixture import RedisCluster
c = RedisCluster(masters=3, replicas=0)
print(" ".join(str(n.pid) for n in c.nodes), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@unittest.skipUnless(redis_fixture.available(), "redis-server not installed")
class TestNoProcessOutlivesItsTest(unittest.TestCase):
    def test_nodes_die_with_a_test_process_killed_by_sigkill(self):
        r = subprocess.run([sys.executable, "-c", CHILD % LIB], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, -9, r.stderr[-2000:])
        pids = [int(p) for p in r.stdout.split()]
        self.assertEqual(len(pids), 3)
        self.assertTrue(redis_fixture.wait_until(lambda: all(gone(p) for p in pids),
                                                 timeout=5.0), pids)


if __name__ == "__main__":
    unittest.main()

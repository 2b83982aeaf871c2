"""Black-box tests: a Redis store that is wiped does not hand out old job ids again.

A wiped Redis (FLUSHALL, a restart without its data) would number jobs from 1 again, so a
stale `delete 1` (or lmstfy's `DELETE .../job/1`) from a consumer of before would delete a
newer job. Each front end remembers the highest id it has seen per partition (from Redis'
answers: put, reserve, peek) and a wiped store goes on above it (docs/SCALE-OUT.md, "Job
ids"). Here the wipe is the deletion of every key of the test's --store-prefix (what a
FLUSHALL does to that deployment, leaving the other tests' keys alone).

Runs on the Redis stores only: redis.test_wiped_store and cluster.test_wiped_store (on the
embedded store, a restart without a binlog restarts ids at 1, as beanstalkd's).

Run: STALKD_STORE=redis python3 -m unittest -v tests/blackbox/test_wiped_store.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import (Server, ServerCase, cluster_partition, cluster_store, found,  # noqa: E402
                       inserted_id, redis_store, reserved, shared_redis, wait_until)


@unittest.skipUnless(redis_store(), "a store in Redis only (STALKD_STORE=redis or cluster)")
class TestWipedStore(ServerCase):
    def wipe(self):
        shared_redis().delete_matching(self.server.store_prefix + "*")

    def numbered_up_to(self):
        """The store's last job sequence number in default's partition, read in Redis."""
        r = shared_redis()
        if cluster_store():
            key = "%s:{%d/1024}:m" % (self.server.store_prefix, cluster_partition("default"))
            node = r.owner(r.keyslot(key))
        else:
            key, node = self.server.store_prefix + ":{0}:m", r
        seq = node.call("HGET", key, "seq")
        return int(seq) if seq else 0

    def second_front_end(self):
        """Another front end on the same store (it has seen no id yet)."""
        args = self.server.argv[self.server.argv.index("--store"):]
        fe = Server(args=args)
        self.addCleanup(fe.stop)
        c = fe.connect()
        self.addCleanup(c.close)
        return c

    def test_a_stale_id_does_not_name_a_new_job(self):
        c = self.client()
        ids = [inserted_id(c.put("old%d" % i)) for i in range(3)]
        self.assertEqual(c.cmd("reserve"), reserved(ids[0], "old0"))
        self.wipe()
        new = inserted_id(c.put("new"))
        self.assertGreater(new, max(ids))
        # A consumer of before deletes the job it had: nothing of now goes.
        self.assertEqual(c.cmd("delete %d" % ids[0]), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek %d" % new), found(new, "new"))

    def test_ids_a_front_end_reserved_are_not_handed_out_again(self):
        p, w = self.client(), self.client()
        ids = [inserted_id(p.put("old%d" % i)) for i in range(3)]
        self.assertEqual(w.cmd("reserve"), reserved(ids[0], "old0"))
        self.wipe()
        # A front end that has seen none of the old ids puts first: the one that handed
        # them out finds its lease gone with the wipe and raises the numbering in Redis.
        seq = max(ids) // 1024 if cluster_store() else max(ids)  # ids: seq * 1024 + partition
        self.assertTrue(wait_until(lambda: self.numbered_up_to() >= seq, timeout=30),
                        "the store's numbering stayed at %d" % self.numbered_up_to())
        other = self.second_front_end()
        new = inserted_id(other.put("new"))
        self.assertGreater(new, max(ids))
        self.assertEqual(w.cmd("delete %d" % ids[0]), b"NOT_FOUND\r\n")
        self.assertEqual(other.cmd("peek %d" % new), found(new, "new"))


if __name__ == "__main__":
    unittest.main()

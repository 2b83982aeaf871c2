"""A Redis store that is wiped (FLUSHALL, a Redis restarted empty) numbers front ends from 1
again: a front end started after it must not take the id of one still running, or the two
would share session ids (docs/SCALE-OUT.md, "Job ids"). A running front end's next lease
renewal, finding the counter below its own id, raises the counter to it. (The wiped store's
job ids: tests/blackbox/test_wiped_store.py.)

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/redis/test_wiped_ids.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storecase import StoreCase, redis_fixture  # noqa: E402
from beanstalk import wait_until  # noqa: E402

HANG = 60.0   # bounds a wait for an event that must come


class TestFrontEndIdsAfterAWipe(StoreCase):
    def setUp(self):
        super().setUp()
        self.r = self.redis()
        self.prefix = redis_fixture.unique_prefix()

    def leases(self):
        return {x.decode() for x in self.r.call("ZRANGE", self.prefix + ":{0}:fe", "0", "-1")}

    def wipe(self):
        keys = self.r.call("KEYS", self.prefix + ":*")
        if keys:
            self.r.call("DEL", *keys)

    def test_a_front_end_started_after_a_wipe_takes_a_new_id(self):
        a = self.front_end(self.r.url(), self.prefix, lease=1000)
        self.assertTrue(wait_until(lambda: len(self.leases()) == 1, HANG))
        (fid_a,) = self.leases()
        ca = self.client(a)
        self.assertTrue(ca.put("before").startswith(b"INSERTED "))
        self.wipe()
        self.assertEqual(self.leases(), set())
        # A's next renewal (every lease/4) puts its lease back, and the counter up to its id
        self.assertTrue(wait_until(lambda: self.leases() == {fid_a}, HANG), self.leases())
        b = self.front_end(self.r.url(), self.prefix, lease=1000)
        got = wait_until(lambda: len(self.leases()) == 2 and self.leases(), HANG)
        self.assertTrue(got, "B took A's id %s: leases %s" % (fid_a, self.leases()))
        self.assertGreater(min(int(f) for f in got - {fid_a}), int(fid_a))
        cb = self.client(b)
        self.assertTrue(cb.put("after").startswith(b"INSERTED "))
        self.assertEqual(len(self.leases()), 2)


if __name__ == "__main__":
    unittest.main()

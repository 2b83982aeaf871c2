"""stalkd on a Redis Cluster that wants a password (docs/SCALE-OUT.md, "Credentials"): every
node with requirepass and masterauth (its replicas authenticate to it), stalkd given the
password by redis-cluster://:PASSWORD@...; the cluster prober, every master's link and the
pub/sub connection authenticate: jobs of tubes on every master are put and reserved, a
waiting reserve is woken, and the password is in no log. A wrong password stops the start.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/cluster/test_auth.py
"""
import os
import sys
import unittest

REDIS_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "redis")
sys.path.insert(0, REDIS_TESTS)
from test_auth import AuthCase  # noqa: E402
import redis_fixture  # noqa: E402
from redis_cluster_fixture import RedisCluster  # noqa: E402
import beanstalk  # noqa: E402
from beanstalk import wait_until  # noqa: E402

PASSWORD = "cluster-pw"


class TestClusterWithPassword(AuthCase):
    def test_every_master_served_and_a_wrong_password_stops_the_start(self):
        cl = RedisCluster(masters=3, replicas=1, password=PASSWORD)
        self.addCleanup(cl.close)
        url = cl.url().replace("redis-cluster://", "redis-cluster://:%s@" % PASSWORD)
        prefix = redis_fixture.unique_prefix()
        fe = self.front_end(url, prefix, wait=0)
        c = self.client(fe, timeout=30)
        tubes = [v[0] for v in cl.pick_tubes(1, "auth%d").values()]  # one on each master
        self.assertEqual(len(tubes), 3)
        w = self.client(fe, timeout=30)
        self.assertEqual(w.cmd("watch %s" % tubes[0]), b"WATCHING 2\r\n")
        w.send(b"reserve-with-timeout 60\r\n")
        self.assertTrue(wait_until(lambda: beanstalk.stats_of(
            c, "stats-tube %s" % tubes[0]).get("current-waiting") == "1", timeout=30))
        ids = {}
        for t in tubes:
            self.assertEqual(c.cmd("use %s" % t), ("USING %s\r\n" % t).encode())
            ids[t] = beanstalk.inserted_id(c.put("on " + t))
        self.assertEqual(w.read_reply(), beanstalk.reserved(ids[tubes[0]],
                                                            ("on " + tubes[0]).encode()))
        for t in tubes[1:]:
            self.assertEqual(c.cmd("watch %s" % t), ("WATCHING %d\r\n" % (
                1 + tubes.index(t))).encode())
        got = set()
        for _ in tubes[1:]:
            rep = c.cmd("reserve-with-timeout 10")
            self.assertTrue(rep.startswith(b"RESERVED "), rep)
            got.add(int(rep.split()[1]))
        self.assertEqual(got, {ids[t] for t in tubes[1:]})
        self.stop(fe)
        self.assertNotIn(PASSWORD, self.log_of(fe))

        self.start_fails(redis_fixture.store_argv(
            url.replace(PASSWORD, "not-it"), redis_fixture.unique_prefix(), 0),
            "AUTH refused", "WRONGPASS")
        self.start_fails(redis_fixture.store_argv(cl.url(), redis_fixture.unique_prefix(), 0),
                         "AUTH refused", "NOAUTH")


if __name__ == "__main__":
    unittest.main()

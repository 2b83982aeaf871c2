"""A Redis master that stops answering (SIGSTOP by PID: a paused VM, a black-holed network or
a master stuck in a long command look the same to stalkd).

  * one Redis: a put and `stats` sent while it is stopped are answered INTERNAL_ERROR (within
    --store-retry of being sent, not never), /readyz says 503 with the reason, a reserve that
    was waiting keeps waiting and gets the first job put once Redis answers again;
  * Sentinel, a stop shorter than Sentinel's down-after: nothing else ends it (no failover),
    so the front end must;
  * Sentinel, a stop long enough for Sentinel to promote a replica, under load through two
    front ends; then the old master wakes with the commands its clients wrote still in its
    sockets: judged by the total-queue checker (nothing acknowledged lost or come back).

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/redis/test_stall.py
"""
import http.client
import json
import os
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storecase import StoreCase, redis_fixture  # noqa: E402
from test_failover import CheckerCase  # noqa: E402
from total_queue import Workload  # noqa: E402
import beanstalk  # noqa: E402
from beanstalk import wait_until  # noqa: E402

# Generous: they bound a hang, they do not measure.
REPLY_TIMEOUT = 60.0
RETRY_MS = 1000


def request(port, method, path, body=b"", headers=None):
    """(status, body) of one request to 127.0.0.1:port."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REPLY_TIMEOUT)
    try:
        c.request(method, path, body, headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def readyz(port):
    """(status, body's "status") of GET /readyz on the admin port."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=10) as r:
            return r.status, json.loads(r.read())["status"]
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["status"]


class StallCase(StoreCase):
    def stalling_front_end(self, url, prefix=None, wait=0):
        """A front end with --store-retry RETRY_MS, an admin port (self.admin) and an API
        port (self.api)."""
        self.admin, self.api = beanstalk.free_port(), beanstalk.free_port()
        return self.front_end(url, prefix or redis_fixture.unique_prefix(),
                              "--store-retry", str(RETRY_MS),
                              "--admin-http", "127.0.0.1:%d" % self.admin,
                              "--http", "127.0.0.1:%d" % self.api, wait=wait)

    def publish(self, token, body):
        """The status of an HTTP publish to queue q of namespace ns."""
        return request(self.api, "PUT", "/api/ns/q", body, {"X-Token": token})[0]

    def assertReady(self):
        self.assertTrue(wait_until(lambda: readyz(self.admin)[0] == 200, REPLY_TIMEOUT),
                        "/readyz: %s" % (readyz(self.admin),))

    def assertNotReady(self):
        self.assertTrue(wait_until(lambda: readyz(self.admin)[0] == 503, REPLY_TIMEOUT),
                        "/readyz: %s" % (readyz(self.admin),))
        code, why = readyz(self.admin)
        self.assertNotIn(why, ("ready", "draining"))
        return why


class TestOneRedisStopped(StallCase):
    def test_calls_fail_readyz_503_a_waiting_reserve_survives(self):
        r = self.redis()
        fe = self.stalling_front_end(r.url())
        w = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertEqual(w.cmd("watch stalled"), b"WATCHING 2\r\n")
        self.assertEqual(w.cmd("ignore default"), b"WATCHING 1\r\n")
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertTrue(c.put("before").startswith(b"INSERTED "))
        self.assertReady()
        status, body = request(self.admin, "POST", "/token/ns?description=t")
        self.assertEqual(status, 201, body)
        token = json.loads(body)["token"]
        self.assertEqual(self.publish(token, b"before"), 201)
        w.send(b"reserve-with-timeout 600\r\n")
        self.assertTrue(beanstalk.wait_stat(c, "current-waiting", "1", timeout=REPLY_TIMEOUT))

        r.pause()
        self.addCleanup(r.resume)
        self.assertEqual(c.put("during"), b"INTERNAL_ERROR\r\n")
        self.assertEqual(c.cmd("stats"), b"INTERNAL_ERROR\r\n")
        self.assertEqual(self.publish(token, b"during"), 500)
        why = self.assertNotReady()
        print("\n/readyz while Redis is stopped: 503 %r" % why, file=sys.stderr)

        r.resume()
        self.assertReady()
        self.assertEqual(self.publish(token, b"after"), 201)
        c.cmd("use stalled")
        jid = beanstalk.inserted_id(c.put("after"))
        self.assertEqual(w.read_reply(), beanstalk.reserved(jid, b"after"))


class TestSentinelMasterStopped(StallCase, CheckerCase):
    def test_stopped_shorter_than_down_after(self):
        # Sentinel will not fail over within the test: only the front end can end the wait.
        rs = self.replicated()
        ss = self.sentinels(rs.master, down_after_ms=600000)
        fe = self.stalling_front_end(ss.url(), wait=1)
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertTrue(c.put("before").startswith(b"INSERTED "))
        rs.master.pause()
        self.addCleanup(rs.master.resume)
        self.assertEqual(c.put("during"), b"INTERNAL_ERROR\r\n")
        self.assertNotReady()
        rs.master.resume()
        self.assertReady()
        self.assertTrue(c.put("after").startswith(b"INSERTED "))

    def test_master_stopped_replica_promoted_old_master_wakes(self):
        rs = self.replicated()
        ss = self.sentinels(rs.master)
        prefix = redis_fixture.unique_prefix()
        fes = [self.front_end(ss.url(), prefix, "--store-retry", str(RETRY_MS), wait=None)
               for _ in range(2)]
        w = Workload(fes, ["z0", "z1", "z2"], tag="stop").start()
        self.addCleanup(w.stop_consuming.set)
        self.addCleanup(w.stop_producing.set)
        self.assertTrue(wait_until(lambda: w.history.check().ok > 50, REPLY_TIMEOUT))
        old = ss.master_addr()
        node = rs.node_at(old)
        t_stop = time.monotonic()
        node.pause()
        self.addCleanup(node.resume)
        new = ss.wait_failover(old)
        back = self.writes_back(w, t_stop, timeout=REPLY_TIMEOUT)
        # The old master wakes with what the front ends wrote to it still unread in its
        # sockets; Sentinel then turns it into a replica of the new master.
        node.resume()
        self.assertTrue(wait_until(lambda: node.role() == "slave", REPLY_TIMEOUT),
                        "the old master was not made a replica")
        self.assertTrue(wait_until(lambda: w.history.check().ok > 50 + 50, REPLY_TIMEOUT))
        took = w.drain()
        print("\nmaster :%d stopped; :%d promoted; puts acknowledged again after %.2fs"
              % (old[1], new[1], back), file=sys.stderr)
        self.assertNothingLost(w, took, "master stopped, promoted, woke")


if __name__ == "__main__":
    unittest.main()

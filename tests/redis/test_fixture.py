"""The Redis test fixture itself (tests/lib/redis_fixture.py) against real redis-server and
redis-sentinel processes: settings, AOF reload, pause, replication, a Sentinel failover (the
time from SIGKILL to a writable new master is printed), and that no process outlives a test
process killed by SIGKILL.

Run: python3 -m unittest -v tests/redis/test_fixture.py
"""
import os
import socket
import subprocess
import sys
import time
import unittest

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
import redis_fixture  # noqa: E402
from redis_fixture import RedisServer, ReplicatedSet, RespError, Sentinels  # noqa: E402
from beanstalk import wait_until  # noqa: E402


def alive(pid):
    """True while /proc/pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@unittest.skipUnless(redis_fixture.available(), "redis-server/redis-sentinel not installed")
class TestRedisServer(unittest.TestCase):
    def test_settings_stalkd_requires(self):
        with RedisServer() as r:
            self.assertEqual(r.config_get("appendonly"), "yes")
            self.assertEqual(r.config_get("maxmemory-policy"), "noeviction")
            self.assertEqual(r.config_get("dir"), os.path.realpath(r.dir))
            self.assertEqual(r.role(), "master")
            self.assertEqual(r.url(), "redis://127.0.0.1:%d" % r.port)
            self.assertEqual(r.url(3), "redis://127.0.0.1:%d/3" % r.port)

    def test_restart_reloads_the_aof(self):
        with RedisServer(appendfsync="always") as r:
            r.call("SET", "a", "1")
            r.stop()                       # SIGTERM: fsync and exit
            self.assertFalse(alive(r.pid))
            r.restart()
            self.assertEqual(r.call("GET", "a"), b"1")
            r.call("SET", "b", "2")
            r.kill()                       # SIGKILL: appendfsync always keeps every write
            r.restart()
            self.assertEqual(r.call("GET", "b"), b"2")
            self.assertEqual(sorted(r.scan()), [b"a", b"b"])
            self.assertEqual(r.delete_matching("a*"), 1)
            self.assertEqual(r.scan(), [b"b"])

    def test_pause_and_resume(self):
        with RedisServer() as r:
            c = r.client(timeout=0.3)
            self.addCleanup(c.close)
            r.pause()
            with self.assertRaises(socket.timeout):
                c.call("PING")
            r.resume()
            c.sock.settimeout(2.0)
            self.assertEqual(c.read(), "PONG")     # the reply to the PING sent while stopped
            self.assertEqual(c.call("PING"), "PONG")

    def test_error_reply_raises(self):
        with RedisServer() as r:
            with self.assertRaises(RespError):
                r.call("NOSUCHCOMMAND")

    def test_no_process_outlives_a_killed_test_process(self):
        code = ("import sys, time; sys.path.insert(0, %r); import redis_fixture; "
                "r = redis_fixture.RedisServer(); print(r.pid, r.dir, flush=True); "
                "time.sleep(60)" % LIB)
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            pid, d = p.stdout.readline().split()
            pid = int(pid)
            self.assertTrue(alive(pid))
            p.kill()                       # no atexit: only PDEATHSIG can stop the server
            p.wait()
            self.assertTrue(wait_until(lambda: not alive(pid), timeout=60.0),
                            "redis-server %d survived its test process" % pid)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
            subprocess.run(["rm", "-rf", d])


@unittest.skipUnless(redis_fixture.available(), "redis-server/redis-sentinel not installed")
class TestReplicationAndSentinel(unittest.TestCase):
    def test_replicated_set(self):
        with ReplicatedSet(replicas=2, min_replicas_to_write=1) as rs:
            self.assertEqual(rs.master.config_get("min-replicas-to-write"), "1")
            self.assertEqual([r.role() for r in rs.replicas], ["slave", "slave"])
            with rs.master.client() as c:
                c.call("SET", "k", "v")
                self.assertEqual(c.call("WAIT", 2, 2000), 2)
            for r in rs.replicas:
                self.assertEqual(r.call("GET", "k"), b"v")
                with self.assertRaisesRegex(RespError, "READONLY"):
                    r.call("SET", "k", "w")
            # With both replicas stopped, min-replicas-to-write refuses writes.
            for r in rs.replicas:
                r.kill()
            self.assertTrue(wait_until(lambda: rs.master.connected_replicas() == 0, 15))
            with self.assertRaisesRegex(RespError, "NOREPLICAS"):
                rs.master.call("SET", "k", "x")

    def test_sentinel_failover_by_sigkill(self):
        with ReplicatedSet() as rs, Sentinels(rs.master) as ss:
            old = ss.master_addr()
            self.assertEqual(old, rs.master.addr)
            self.assertRegex(ss.url(), r"^redis-sentinel://(127\.0\.0\.1:\d+,){2}"
                                       r"127\.0\.0\.1:\d+/stalkd$")
            t0 = time.monotonic()
            rs.master.kill()
            new = ss.wait_failover(old, timeout=30.0)
            t_promoted = time.monotonic() - t0
            self.assertIn(new, [r.addr for r in rs.replicas])
            node = rs.node_at(new)

            def writable():
                try:
                    return node.call("SET", "after", "failover", timeout=1.0) == "OK"
                except (OSError, EOFError, RespError):
                    return False
            self.assertTrue(wait_until(writable, timeout=60.0, interval=0.02))
            t_writable = time.monotonic() - t0
            print("\nsentinel failover (down-after 2000 ms): promoted %.2fs, writable %.2fs "
                  "after SIGKILL of the master" % (t_promoted, t_writable), file=sys.stderr)
            # The old master, restarted from its AOF, rejoins as a replica of the new one
            # (what Sentinel would do about 10 s later, at its next INFO).
            rs.master.restart()
            rs.master.call("REPLICAOF", *new)
            rs.master.wait_link_up()
            self.assertEqual(rs.master.call("GET", "after"), b"failover")


if __name__ == "__main__":
    unittest.main()

"""One stalkd on a Redis store: what the command-line contract promises beyond the protocol.
Start-up refuses a Redis without the settings it needs (and -b), exit code 1 with a message
naming the setting; a put refused for Redis memory is OUT_OF_MEMORY while delete still works;
a command whose fate is unknown because Redis died is INTERNAL_ERROR, and the front end serves
again once Redis is back; ids on one master are 1, 2, 3, ...; --store-prefix separates
deployments sharing one Redis, and every key starts with it.

Run: python3 -m unittest -v tests/redis/test_store.py
"""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storecase import StoreCase, redis_fixture  # noqa: E402
import beanstalk  # noqa: E402
from beanstalk import wait_until  # noqa: E402


class TestStartChecks(StoreCase):
    def start_fails(self, args, *words):
        """stalkd with `args` exits 1 at start; its output names every one of `words`."""
        p = subprocess.run([beanstalk.STALKD_BIN, "-l", "127.0.0.1", "-p",
                            str(beanstalk.free_port())] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        out = p.stdout.decode(errors="replace")
        self.assertEqual(p.returncode, 1, out)
        for w in words:
            self.assertIn(w, out)
        return out

    def store(self, r, wait=0):
        return redis_fixture.store_argv(r.url(), redis_fixture.unique_prefix(), wait=wait)

    def test_appendonly_required(self):
        r = self.redis(extra=["appendonly no"])
        self.start_fails(self.store(r), "appendonly")

    def test_noeviction_required(self):
        r = self.redis(extra=["maxmemory-policy allkeys-lru"])
        self.start_fails(self.store(r), "noeviction")

    def test_min_replicas_required_with_store_wait(self):
        r = self.redis()                                 # min-replicas-to-write 0
        self.start_fails(self.store(r, wait=1), "min-replicas-to-write")
        self.start_fails(redis_fixture.store_argv(r.url(), "x"), "min-replicas-to-write")
        fe = self.front_end(r.url(), redis_fixture.unique_prefix(), wait=0)
        self.assertEqual(self.client(fe).put("ok"), b"INSERTED 1\r\n")

    def test_binlog_refused(self):
        r = self.redis()
        self.start_fails(self.store(r) + ["-b", self.logdir], "-b")


class TestOneFrontEnd(StoreCase):
    def test_ids_count_from_1_and_prefixes_separate_deployments(self):
        r = self.redis()
        p1, p2 = redis_fixture.unique_prefix(), redis_fixture.unique_prefix()
        c1 = self.client(self.front_end(r.url(), p1))
        c2 = self.client(self.front_end(r.url(), p2))
        self.assertEqual([c1.put("a%d" % i) for i in range(3)],
                         [b"INSERTED 1\r\n", b"INSERTED 2\r\n", b"INSERTED 3\r\n"])
        self.assertEqual(c2.put("b"), b"INSERTED 1\r\n")
        self.assertEqual(c2.cmd("peek 1"), b"FOUND 1 1\r\nb\r\n")
        self.assertEqual(c2.cmd("peek 2"), b"NOT_FOUND\r\n")
        self.assertEqual(c1.cmd("peek 1"), b"FOUND 1 2\r\na0\r\n")
        keys = r.scan()
        self.assertTrue(keys)
        strays = [k for k in keys if not k.startswith(p1.encode())
                  and not k.startswith(p2.encode())]
        self.assertEqual(strays, [])
        self.assertTrue(any(k.startswith(p2.encode()) for k in keys))

    def test_out_of_memory_then_delete_frees(self):
        r = self.redis(maxmemory=4 * 1024 * 1024)
        c = self.client(self.front_end(r.url(), redis_fixture.unique_prefix()))
        body = b"m" * 60000
        ids = []
        for _ in range(200):
            rep = c.put(body)
            if rep == b"OUT_OF_MEMORY\r\n":
                break
            self.assertTrue(rep.startswith(b"INSERTED "), rep)
            ids.append(int(rep.split()[1]))
        else:
            self.fail("200 puts of 60 KB fit in 4 MiB")
        self.assertGreater(len(ids), 5)
        self.assertEqual(c.put(body), b"OUT_OF_MEMORY\r\n")
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")
        for jid in ids[:10]:
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertTrue(wait_until(lambda: c.put(body).startswith(b"INSERTED "), 60.0))

    def test_internal_error_when_redis_dies_mid_command_then_serves_again(self):
        # appendfsync always: with everysec, Redis may answer before its AOF write when an
        # fsync is slow, and a SIGKILL then loses acknowledged writes (seen here).
        r = self.redis(appendfsync="always")
        fe = self.front_end(r.url(), redis_fixture.unique_prefix())
        c = self.client(fe)
        self.assertEqual(c.put("before"), b"INSERTED 1\r\n")
        r.pause()                                   # the put reaches Redis, no reply comes
        c.send(b"put 0 0 60 3\r\nmid\r\n")
        time.sleep(0.3)
        r.kill()
        self.assertEqual(c.read_reply(), b"INTERNAL_ERROR\r\n")
        r.restart()
        ok = wait_until(lambda: c.put("after").startswith(b"INSERTED "), 60.0, 0.1)
        self.assertTrue(ok, "no put accepted after Redis' restart")
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 6\r\nbefore\r\n")

    def test_connection_closed_during_a_long_redis_outage_gives_its_job_back(self):
        # A client holding a reservation closes while Redis is down for longer than
        # --store-retry (1 s here): once Redis is back, its job must be ready again (as at
        # a close in beanstalkd), not only when its TTR runs out (an hour: only the close can
        # give it back within the wait's bound, which only bounds a hang).
        r = self.redis(appendfsync="always")
        fe = self.front_end(r.url(), redis_fixture.unique_prefix(), "--store-retry", "1000")
        c, w = self.client(fe), self.client(fe)
        self.assertEqual(c.put("job", ttr=3600), b"INSERTED 1\r\n")
        self.assertEqual(w.cmd("reserve-with-timeout 0"), b"RESERVED 1 3\r\njob\r\n")
        r.kill()
        w.close()
        time.sleep(2.0)
        r.restart()
        t0 = time.monotonic()
        state = lambda: beanstalk.stats_of(c, "stats-job 1")["state"]  # noqa: E731
        back = wait_until(lambda: state() == "ready", 60.0, 0.1)
        self.assertTrue(back, "job 1 still %s %.1fs after Redis came back"
                        % (state(), time.monotonic() - t0))


if __name__ == "__main__":
    unittest.main()

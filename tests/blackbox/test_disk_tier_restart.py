"""Black-box tests of the disk tier's restart (docs/DISK-TIER.md, "Restarts"): a clean stop
writes a checkpoint of the index of the jobs kept on disk, and the next start restores them
from it without bringing them into memory; a crash after it, or a kill -9 at any instant of
the stop (while jobs are written whole again, while the checkpoint is written, renamed), makes
the next start replay every record instead, and no acknowledged job is lost. The tests wait
for events (stats values, replies, the process's exit), never for a fixed time; timeouts
only bound a hang. A crash makes the next start replay the binlog; the jobs the tier may keep
on disk then go straight to its index, and a kill -9 at any instant of such a start loses
nothing either."""
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from beanstalk import (Server, embedded_store_only, is_beanstalkd, parse_yaml, stats_of,  # noqa: E402
                       wait_until)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_binlog_kill import peek_all  # noqa: E402

SEED = int(os.environ.get("STALKD_TEST_SEED") or random.randrange(1 << 32))
HANG = 60.0  # bounds a hang only
USED = b"restored from the checkpoint"
WRITTEN = b"kept on disk only ("


def ext(c):
    return stats_of(c, "stats-ext")


def put_many(c, bodies, delay_of, tube="far"):
    """Pipelined puts; returns the ids in order (every one acknowledged)."""
    assert c.cmd("use %s" % tube).startswith(b"USING")
    ids = []
    for i in range(0, len(bodies), 500):
        chunk = list(range(i, min(len(bodies), i + 500)))
        c.send(b"".join(b"put %d %d 60 %d\r\n%s\r\n" % (k % 5, delay_of(k), len(bodies[k]),
                                                       bodies[k]) for k in chunk))
        for _ in chunk:
            r = c.read_reply()
            assert r.startswith(b"INSERTED "), r
            ids.append(int(r.split()[1]))
    return ids


@unittest.skipIf(is_beanstalkd(), "stalkd's disk tier")
@embedded_store_only("the disk tier is the embedded store's")
class DiskTierRestartTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stalkd_tier_restart_")
        self.dir = os.path.join(self.tmp, "binlog")
        self.started = []  # (server, its log), oldest first

    def tearDown(self):
        for s, _ in self.started:  # each killed by its PID if still running
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _formatMessage(self, msg, standard_msg):
        last = self.started[-1][1] if self.started else "none"
        return "%s (STALKD_TEST_SEED=%d; last server's log: %s)" % (
            super()._formatMessage(msg, standard_msg), SEED, last)

    def start(self, budget="300K", segment="65536"):
        """A server with a log file of its own; returns (server, path of its log)."""
        log = os.path.join(self.tmp, "stalkd.%d.log" % len(self.started))
        self.server = Server(args=["-b", self.dir, "-s", segment, "--hot-memory", budget],
                             log=log)
        self.started.append((self.server, log))
        return self.server, log

    def stop(self):
        self.server.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.server.proc.wait(timeout=HANG), 0)

    def read(self, log):
        with open(log, "rb") as f:
            return f.read()

    def test_a_clean_restart_keeps_the_cold_jobs_on_disk(self):
        s, log = self.start()
        c = s.connect(timeout=HANG)
        n = 20000
        bodies = [b"job-%06d-" % i + b"x" * 89 for i in range(n)]
        ids = put_many(c, bodies, lambda k: 3600 + k % 5000)
        ready = put_many(c, [b"ready-%d" % k for k in range(200)], lambda k: 0, tube="now")
        st = wait_until(lambda: (lambda d: d if int(d["disk-tier-cold-jobs"]) > n // 2 and
                                 int(d["memory-used"]) <= 300 * 1024 else None)(ext(c)),
                        timeout=HANG)
        self.assertIsNotNone(st, ext(c))
        # Some jobs changed since their put (a state record after it): reserved and released
        # with a delay, buried; they are written whole again at the stop.
        self.assertEqual(c.cmd("watch now"), b"WATCHING 2\r\n")
        for _ in range(20):
            r = c.cmd("reserve-with-timeout 0")
            self.assertTrue(r.startswith(b"RESERVED"), r)
            jid = int(r.split()[1])
            self.assertIn(c.cmd("release %d 1 7200" % jid), (b"RELEASED\r\n",))
        r = c.cmd("reserve-with-timeout 0")
        self.assertEqual(c.cmd("bury %d 3" % int(r.split()[1])), b"BURIED\r\n")
        self.assertEqual(c.cmd("delete %d" % ids[77]), b"DELETED\r\n")
        st = wait_until(lambda: (lambda d: d if int(d["memory-used"]) <= 300 * 1024 else None)(
            ext(c)), timeout=HANG)
        cold = int(st["disk-tier-cold-jobs"])
        before = stats_of(c, "stats")
        c.close()
        self.stop()
        self.assertIn(WRITTEN, self.read(log))

        s, log = self.start()
        c = s.connect(timeout=HANG)
        st = ext(c)  # answered once the start is over (its listener is open before)
        self.assertIn(USED, self.read(log))
        # The jobs on disk never came into memory: none was demoted again, memory stayed
        # within the budget from the start. Those in memory at the stop that may be on disk
        # start there too; each tube's first ready ones (64) are read ahead at once.
        self.assertGreaterEqual(int(st["disk-tier-cold-jobs"]), cold - 2 * 64)
        self.assertEqual(int(st["disk-tier-demotions"]), 0)
        self.assertLessEqual(int(st["memory-used"]), 300 * 1024)
        after = stats_of(c, "stats")
        for k in ("current-jobs-delayed", "current-jobs-ready", "current-jobs-buried",
                  "current-tubes"):
            self.assertEqual(after[k], before[k], k)
        got = peek_all(c, ids)
        for i in range(n):
            self.assertEqual(got[ids[i]], None if i == 77 else bodies[i], i)
        self.assertEqual(sum(b is not None for b in peek_all(c, ready).values()), len(ready))
        job = stats_of(c, "stats-job %d" % ids[4321])
        self.assertEqual(job["state"], "delayed")
        self.assertEqual(job["tube"].strip('"'), "far")
        self.assertEqual(job["delay"], str(3600 + 4321))
        self.assertGreater(int(job["time-left"]), 3600)
        # New ids continue above every id handed out before.
        r = c.cmd("put 0 0 1 1\r\nz")
        self.assertGreater(int(r.split()[1]), max(ids + ready))

        # A crash after a start from the checkpoint: the next start uses it again (it still
        # covers a prefix of the binlog) and replays the records written after it on top.
        c.close()
        self.server.proc.send_signal(signal.SIGKILL)
        self.server.proc.wait()
        s, log = self.start()
        c = s.connect(timeout=HANG)
        got = peek_all(c, ids)
        self.assertIn(USED, self.read(log))
        for i in range(n):
            self.assertEqual(got[ids[i]], None if i == 77 else bodies[i], i)

    def test_tubes_come_back_in_the_order_of_a_replay(self):
        """list-tubes after a start from the checkpoint: "default", then the tubes in the
        order of their lowest live job id, as after a replay (a kill -9, or a start without
        the tier); the tube whose jobs are all on disk is not put after those whose jobs are
        in memory (the order beanstalkd gives too), and a tube whose first job was deleted
        comes by its next one."""
        s, log = self.start(budget="1K")
        c = s.connect(timeout=HANG)
        first = put_many(c, [b"x0"], lambda k: 0, tube="x")
        put_many(c, [b"a" * 100] * 300, lambda k: 3600, tube="a")
        put_many(c, [b"b" * 10] * 3, lambda k: 0, tube="b")
        put_many(c, [b"x1"], lambda k: 7200, tube="x")
        self.assertEqual(c.cmd("delete %d" % first[0]), b"DELETED\r\n")
        wait_until(lambda: int(ext(c)["disk-tier-cold-jobs"]) >= 250, timeout=HANG)
        want = ["default", "a", "b", "x"]

        def tubes():
            c = self.server.connect(timeout=HANG)
            got = parse_yaml(c.cmd("list-tubes"))
            c.close()
            return got

        self.assertEqual(tubes()[:2], ["default", "x"])  # x made first, before its delete
        c.close()
        self.stop()
        self.assertIn(WRITTEN, self.read(log))
        s, log = self.start(budget="1K")
        self.assertEqual(tubes(), want)
        self.assertIn(USED, self.read(log))
        self.server.proc.send_signal(signal.SIGKILL)  # the next start uses it again
        self.server.proc.wait()
        s, log = self.start(budget="1K")
        self.assertEqual(tubes(), want)
        self.assertIn(USED, self.read(log))
        self.server.proc.send_signal(signal.SIGKILL)
        self.server.proc.wait()
        os.unlink(os.path.join(self.dir, "checkpoint"))  # the next start replays
        s, log = self.start(budget="1K")
        self.assertEqual(tubes(), want)
        self.assertNotIn(USED, self.read(log))
        self.stop()
        log = os.path.join(self.tmp, "plain.log")  # without the tier: a replay into memory
        self.server = Server(args=["-b", self.dir, "-s", "65536"], log=log)
        self.started.append((self.server, log))
        self.assertEqual(tubes(), want)

    def test_off_without_the_tier(self):
        s, log = self.start()
        c = s.connect(timeout=HANG)
        ids = put_many(c, [b"b%d" % k + b"y" * 90 for k in range(5000)], lambda k: 7200)
        wait_until(lambda: int(ext(c)["disk-tier-cold-jobs"]) > 0, timeout=HANG)
        c.close()
        self.stop()
        self.server = Server(args=["-b", self.dir, "-s", "65536"],
                             log=os.path.join(self.tmp, "plain.log"))
        self.started.append((self.server, os.path.join(self.tmp, "plain.log")))
        c = self.server.connect(timeout=HANG)
        self.assertTrue(all(b is not None for b in peek_all(c, ids).values()))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "checkpoint")))

    def test_kill_at_any_instant_of_the_stop(self):
        """SIGTERM, then SIGKILL at a random instant within the time a clean stop takes
        (measured in the first round): during the final writes, the checkpoint's writing,
        its rename, or after. Every acknowledged job is there at the next start."""
        rng = random.Random(SEED)
        present, deleted = {}, set()
        window = None
        outcomes = {"used": 0, "replayed": 0}
        for rnd in range(10):
            s, log = self.start(budget="100K", segment="4096")
            c = s.connect(timeout=HANG)
            got = peek_all(c, sorted(present))
            outcomes["used" if USED in self.read(log) else "replayed"] += rnd > 0
            for jid, b in present.items():
                self.assertEqual(got[jid], b, "round %d job %d" % (rnd, jid))
            for jid, b in peek_all(c, sorted(deleted)).items():
                self.assertIsNone(b, "round %d deleted job %d came back" % (rnd, jid))
            bodies = [b"r%d-%d-" % (rnd, k) + b"z" * rng.randrange(20, 200) for k in range(2000)]
            ids = put_many(c, bodies, lambda k: rng.choice([3600, 7200, 86400, 0]))
            present.update(zip(ids, bodies))
            for jid in rng.sample(sorted(present), 50):
                self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
                present.pop(jid)
                deleted.add(jid)
            wait_until(lambda: int(ext(c)["disk-tier-demotions"]) > 0, timeout=HANG)
            c.close()
            t0 = time.monotonic()
            s.proc.send_signal(signal.SIGTERM)
            if window is None:  # the first round stops cleanly: how long a stop takes
                self.assertEqual(s.proc.wait(timeout=HANG), 0)
                window = time.monotonic() - t0
                self.assertIn(WRITTEN, self.read(log))
                continue
            time.sleep(rng.uniform(0, window))
            s.proc.send_signal(signal.SIGKILL)
            s.proc.wait(timeout=HANG)
        s, log = self.start(budget="100K", segment="4096")
        c = s.connect(timeout=HANG)
        got = peek_all(c, sorted(present))
        for jid, b in present.items():
            self.assertEqual(got[jid], b, "job %d" % jid)
        for jid, b in peek_all(c, sorted(deleted)).items():
            self.assertIsNone(b, "deleted job %d came back" % jid)
        sys.stderr.write("kill during the stop: %s (window %.1f ms, seed %d)\n"
                         % (outcomes, window * 1000, SEED))

    def test_kill_at_any_instant_of_a_replay_to_disk(self):
        """After a crash, a start replays the binlog and restores the jobs the tier may keep
        on disk straight into its index. Starts killed (SIGKILL) at random instants of that
        (within the time a whole such start took) change nothing: the start that finishes
        has every acknowledged job, the counts of before, and the jobs in memory are only
        those that must be (memory-used within the budget)."""
        rng = random.Random(SEED)
        s, log = self.start(budget="200K")
        c = s.connect(timeout=HANG)
        n = 20000
        bodies = [b"k-%06d-" % i + b"y" * rng.randrange(10, 150) for i in range(n)]
        ids = put_many(c, bodies, lambda k: rng.choice([0, 3600, 7200, 86400]))
        present = dict(zip(ids, bodies))
        self.assertEqual(c.cmd("watch far"), b"WATCHING 2\r\n")
        for _ in range(30):  # buried ones stay in memory
            r = c.cmd("reserve-with-timeout 0")
            self.assertTrue(r.startswith(b"RESERVED"), r)
            self.assertEqual(c.cmd("bury %d 5" % int(r.split()[1])), b"BURIED\r\n")
        for jid in rng.sample(ids, 100):
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
            present.pop(jid)
        wait_until(lambda: int(ext(c)["disk-tier-cold-jobs"]) > n // 2, timeout=HANG)
        before = stats_of(c, "stats")
        c.close()
        self.server.proc.send_signal(signal.SIGKILL)
        self.server.proc.wait()
        window = None
        for rnd in range(8):
            t0 = time.monotonic()
            s, log = self.start(budget="200K")
            if window is None:  # a whole start, to its first reply: how long it takes
                c = s.connect(timeout=HANG)
                st = ext(c)  # answered once the start is over
                self.assertIn(b"kept on disk from the start", self.read(log))
                self.assertGreater(int(st["disk-tier-cold-jobs"]), n // 2)
                self.assertEqual(int(st["disk-tier-demotions"]), 0)
                window = time.monotonic() - t0
                c.close()
            else:
                time.sleep(max(0.0, rng.uniform(0, window) - (time.monotonic() - t0)))
            self.server.proc.send_signal(signal.SIGKILL)
            self.server.proc.wait(timeout=HANG)
        s, log = self.start(budget="200K")
        c = s.connect(timeout=HANG)
        st = ext(c)
        self.assertNotIn(USED, self.read(log))
        self.assertLessEqual(int(st["memory-used"]), 200 * 1024)
        self.assertEqual(int(st["disk-tier-demotions"]), 0)
        after = stats_of(c, "stats")
        for k in ("current-jobs-delayed", "current-jobs-ready", "current-jobs-urgent",
                  "current-jobs-buried", "current-tubes"):
            self.assertEqual(after[k], before[k], k)
        got = peek_all(c, ids)
        for jid in ids:
            self.assertEqual(got[jid], present.get(jid), jid)
        sys.stderr.write("kill during a replay to disk: window %.1f ms (seed %d)\n"
                         % (window * 1000, SEED))


if __name__ == "__main__":
    unittest.main()

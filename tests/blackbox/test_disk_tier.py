"""Black-box tests of the disk tier (docs/DISK-TIER.md): --hot-memory with -b.

A server with a memory budget of a few hundred KB holds far more delayed jobs than fit:
jobs due later than a few seconds leave memory and live in the binlog only; every command
still sees them as before (peek, stats-job, peek-delayed, kick, kick-job, delete, stats
counts), they come back when due, and a restart or a kill -9 during demotion and promotion
loses no acknowledged job and brings back no deleted one. A backlog of ready jobs beyond
the budget goes to disk the same way and is reserved in exactly beanstalkd's order. The tests wait for events (stats
values, replies), never for a fixed time; timeouts only bound a hang."""
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from beanstalk import Server, embedded_store_only, is_beanstalkd, stats_of, wait_until  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_binlog_kill import peek_all  # noqa: E402
from test_extensions import parse_list  # noqa: E402

SEED = int(os.environ.get("STALKD_TEST_SEED") or random.randrange(1 << 32))
BUDGET = "300K"
HANG = 60.0  # bounds a hang only


def ext(c):
    return stats_of(c, "stats-ext")


def put(c, body, pri=0, delay=0, tube=None):
    if tube:
        assert c.cmd("use %s" % tube).startswith(b"USING")
    r = c.cmd(b"put %d %d 60 %d\r\n%s" % (pri, delay, len(body), body))
    assert r.startswith(b"INSERTED "), r
    return int(r.split()[1])


@unittest.skipIf(is_beanstalkd(), "stalkd's disk tier")
@embedded_store_only("the disk tier is the embedded store's")
class DiskTierTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stalkd_disk_tier_")
        self.dir = os.path.join(self.tmp, "binlog")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *extra):
        s = Server(args=["-b", self.dir, "-s", "65536", "--hot-memory", BUDGET] + list(extra),
                   log=os.path.join(self.tmp, "stalkd.log"))
        self.servers.append(s)
        return s

    def test_needs_a_binlog(self):
        with self.assertRaises(RuntimeError):
            self.servers.append(Server(args=["--hot-memory", "1M"]))

    def test_off_by_default_shows_no_keys(self):
        s = Server(args=["-b", self.dir])
        self.servers.append(s)
        self.assertNotIn("disk-tier-cold-jobs", ext(s.connect()))

    def test_jobs_beyond_the_budget_behave_as_in_memory(self):
        s = self.start()
        c = s.connect(timeout=HANG)
        n = 6000
        body = lambda i: b"job-%06d-" % i + b"x" * 89  # 100 bytes
        ids = {}
        c.send(b"use far\r\n")
        self.assertTrue(c.read_reply().startswith(b"USING"))
        for i in range(0, n, 500):  # pipelined: delays 3600..4599 s
            chunk = range(i, min(n, i + 500))
            c.send(b"".join(b"put %d %d 60 100\r\n%s\r\n" % (i % 7, 3600 + i % 1000, body(i))
                            for i in chunk))
            for i in chunk:
                r = c.read_reply()
                self.assertTrue(r.startswith(b"INSERTED "), r)
                ids[i] = int(r.split()[1])
        st = wait_until(lambda: (lambda d: d if int(d["disk-tier-cold-jobs"]) > n // 2 and
                                 int(d["memory-used"]) <= 300 * 1024 else None)(ext(c)),
                        timeout=HANG)
        self.assertIsNotNone(st, ext(c))
        self.assertEqual(int(st["current-jobs-delayed"]), n)
        self.assertEqual(int(st["disk-tier-hot-jobs"]) + int(st["disk-tier-cold-jobs"]), n)
        self.assertGreater(int(st["disk-tier-demotions"]), n // 2)
        self.assertEqual(int(stats_of(c, "stats-tube far")["current-jobs-delayed"]), n)

        # Every job is there with its body, whether in memory or not.
        got = peek_all(c, [ids[i] for i in range(n)])
        for i in range(n):
            self.assertEqual(got[ids[i]], body(i))
        # peek-delayed: the job due first (delay 3600, put first).
        self.assertEqual(c.cmd("peek-delayed").split(b"\r\n")[1], body(0))
        # stats-job of a job on disk (let the peeks' jobs go back first).
        wait_until(lambda: int(ext(c)["disk-tier-cold-jobs"]) > n // 2, timeout=HANG)
        job = stats_of(c, "stats-job %d" % ids[4321])
        self.assertEqual(job["state"], "delayed")
        self.assertEqual(job["tube"].strip('"'), "far")
        self.assertEqual(job["pri"], str(4321 % 7))
        self.assertEqual(job["delay"], str(3600 + 4321 % 1000))
        self.assertGreater(int(job["time-left"]), 3600)
        # kick-job, delete.
        self.assertEqual(c.cmd("kick-job %d" % ids[4000]), b"KICKED\r\n")
        self.assertEqual(stats_of(c, "stats-job %d" % ids[4000])["state"], "ready")
        self.assertEqual(c.cmd("delete %d" % ids[4001]), b"DELETED\r\n")
        self.assertEqual(c.cmd("peek %d" % ids[4001]), b"NOT_FOUND\r\n")
        # kick N takes the delayed jobs due first: delay 3600 (i = 0, 1000, ...), then 3601.
        self.assertEqual(c.cmd("delete %d" % ids[4000]), b"DELETED\r\n")
        self.assertEqual(c.cmd("kick 3"), b"KICKED 3\r\n")
        for i in (0, 1000, 2000):
            self.assertEqual(stats_of(c, "stats-job %d" % ids[i])["state"], "ready")
        self.assertEqual(stats_of(c, "stats-job %d" % ids[3000])["state"], "delayed")

        # Jobs due soon go cold too (beyond twice the lead) and are delivered when due.
        soon = [put(c, b"soon-%d" % k, pri=5, delay=6, tube="soon") for k in range(300)]
        self.assertEqual(c.cmd("watch soon"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("ignore default"), b"WATCHING 1\r\n")
        got = []
        while len(got) < len(soon):
            r = c.cmd("reserve-with-timeout 30")
            self.assertTrue(r.startswith(b"RESERVED "), r)
            jid = int(r.split()[1])
            got.append(jid)
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertEqual(got, soon)  # same priority: in id order

        # A restart brings every job back, and they go cold again.
        s.stop()
        s2 = self.start()
        c2 = s2.connect(timeout=HANG)
        st = wait_until(lambda: (lambda d: d if int(d["disk-tier-cold-jobs"]) > n // 2 else None)(
            ext(c2)), timeout=HANG)
        self.assertIsNotNone(st)
        self.assertEqual(int(st["current-jobs-delayed"]) + int(st["current-jobs-ready"]), n - 2)
        got = peek_all(c2, [ids[i] for i in range(n)])
        for i in range(n):
            self.assertEqual(got[ids[i]], None if i in (4000, 4001) else body(i))


    def test_ready_backlog_beyond_the_budget_is_reserved_in_order(self):
        s = self.start()
        c = s.connect(timeout=HANG)
        n = 8000
        body = lambda i: b"ready-%06d-" % i + b"r" * 87  # 100 bytes
        pris = [0, 1023, 1024, 2000, 2000, 2000, 7, 4294967295]  # equal ones: ids decide
        jobs = []  # (pri, id, body)
        for tube in ("t1", "t2"):
            c.send(b"use %s\r\n" % tube.encode())
            self.assertTrue(c.read_reply().startswith(b"USING"))
            for i in range(0, n // 2, 500):
                chunk = range(i, min(n // 2, i + 500))
                c.send(b"".join(b"put %d 0 60 100\r\n%s\r\n" % (pris[(k * 7) % 8], body(k))
                                for k in chunk))
                for k in chunk:
                    r = c.read_reply()
                    self.assertTrue(r.startswith(b"INSERTED "), r)
                    jobs.append((pris[(k * 7) % 8], int(r.split()[1]), body(k)))
        urgent = sum(1 for p, _, _ in jobs if p < 1024)
        st = wait_until(lambda: (lambda d: d if int(d["disk-tier-cold-jobs"]) > n // 2 and
                                 int(d["memory-used"]) <= 300 * 1024 else None)(ext(c)),
                        timeout=HANG)
        self.assertIsNotNone(st, ext(c))
        # The counts include the jobs on disk.
        self.assertEqual(int(st["current-jobs-ready"]), n)
        self.assertEqual(int(st["current-jobs-urgent"]), urgent)
        self.assertEqual(int(st["current-jobs-delayed"]), 0)
        t1 = stats_of(c, "stats-tube t1")
        self.assertEqual(int(t1["current-jobs-ready"]), n // 2)
        self.assertEqual(int(t1["current-jobs-urgent"]),
                         sum(1 for p, j, _ in jobs[:n // 2] if p < 1024))
        # peek-ready, peek and stats-job of a job that is most likely on disk (the last put).
        self.assertEqual(c.cmd("use t2"), b"USING t2\r\n")
        first_t2 = min(jobs[n // 2:])
        r = c.cmd("peek-ready")
        self.assertEqual(r.split(b"\r\n")[0].split()[1], b"%d" % first_t2[1], r)
        last = jobs[-1]
        self.assertEqual(peek_all(c, [last[1]])[last[1]], last[2])
        job = stats_of(c, "stats-job %d" % last[1])
        self.assertEqual((job["state"], job["pri"], job["tube"].strip('"')),
                         ("ready", str(last[0]), "t2"))
        # Reserved from both tubes in beanstalkd's order: priority, then id; memory stays
        # bounded all along (jobs come back as they are reached).
        self.assertEqual(c.cmd("watch t1"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("watch t2"), b"WATCHING 3\r\n")
        self.assertEqual(c.cmd("ignore default"), b"WATCHING 2\r\n")
        order = sorted(jobs)
        for k, (pri, jid, b) in enumerate(order):
            r = c.cmd("reserve-with-timeout 0")
            self.assertEqual(r, b"RESERVED %d 100\r\n%s\r\n" % (jid, b), "job %d of %d" % (k, n))
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
            if k % 1000 == 0:
                self.assertLessEqual(int(ext(c)["memory-used"]), 400 * 1024)
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        st = ext(c)
        self.assertEqual((st["current-jobs-ready"], st["disk-tier-cold-jobs"]), ("0", "0"))
        self.assertGreater(int(st["disk-tier-promotions"]), n // 2)
        self.assertEqual(st["disk-tier-read-errors"], "0")

    def test_list_jobs_and_purge_of_jobs_on_disk(self):
        """list-jobs answers from the tier's indexes (no job read back); purge reads the
        jobs on disk back a slice at a time and deletes every one."""
        s = self.start()
        c = s.connect(timeout=HANG)
        n = 3000
        ids = {"ready": [], "delayed": []}
        self.assertTrue(c.cmd("use big").startswith(b"USING"))
        for i in range(0, 2 * n, 500):  # alternately ready and delayed by an hour or more
            chunk = range(i, i + 500)
            c.send(b"".join(b"put 1 %d 60 100\r\n%s\r\n" % (0 if k % 2 else 3600 + k,
                                                               b"%0100d" % k) for k in chunk))
            for k in chunk:
                r = c.read_reply()
                self.assertTrue(r.startswith(b"INSERTED "), r)
                ids["ready" if k % 2 else "delayed"].append(int(r.split()[1]))
        st = wait_until(lambda: (lambda d: d if int(d["disk-tier-cold-jobs"]) > n and
                                 int(d["memory-used"]) <= 300 * 1024 else None)(ext(c)),
                        timeout=HANG)
        self.assertIsNotNone(st, ext(c))
        for state in ("ready", "delayed"):
            listed, nxt = [], 0
            while True:
                nxt, page = parse_list(c.cmd("list-jobs big %s %d 1000" % (state, nxt)))
                listed += page
                if nxt == 0:
                    break
            self.assertEqual(listed, ids[state])
        after = ext(c)
        # Nothing was read back to list them (a reserve or the tier's own refill reads a few
        # dozen at most; listing them all used to read back every one).
        self.assertLess(int(after["disk-tier-promotions"]) - int(st["disk-tier-promotions"]), 100)
        self.assertGreater(int(after["disk-tier-cold-jobs"]), n)
        self.assertEqual(c.cmd("purge big all"), b"PURGED %d\r\n" % (2 * n))
        tube = stats_of(c, "stats-tube big")
        self.assertEqual((tube["current-jobs-ready"], tube["current-jobs-delayed"]), ("0", "0"))
        st = ext(c)
        self.assertEqual((st["disk-tier-cold-jobs"], st["disk-tier-read-errors"]), ("0", "0"))
        self.assertEqual(parse_list(c.cmd("list-jobs big ready 0 1000")), (0, []))


@unittest.skipIf(is_beanstalkd(), "stalkd's disk tier")
@embedded_store_only("the disk tier is the embedded store's")
class DiskTierKillTest(unittest.TestCase):
    """kill -9 at random instants while jobs are demoted (puts of long delays and ready
    jobs past the budget) and promoted (jobs due within seconds, peeks, deletes of cold
    jobs, reserves of ready jobs from a backlog mostly on disk)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stalkd_disk_kill_")
        self.dir = os.path.join(self.tmp, "binlog")
        self.rng = random.Random(SEED)
        self.server = None

    def tearDown(self):
        if self.server and self.server.proc.poll() is None:
            self.server.proc.kill()
            self.server.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _formatMessage(self, msg, standard_msg):
        return "%s (STALKD_TEST_SEED=%d)" % (super()._formatMessage(msg, standard_msg), SEED)

    def test_kill_during_demotion_and_promotion(self):
        present, deleted = {}, set()
        for rnd in range(6):
            self.server = Server(args=["-b", self.dir, "-s", "16384", "--hot-memory", "100K"]
                                 + self.rng.choice([[], ["-f", "0"]]),
                                 log=os.path.join(self.tmp, "stalkd.log"))
            c = self.server.connect(timeout=HANG)
            # Everything acknowledged before is there (peeks promote cold jobs), deletes stay.
            got = peek_all(c, sorted(present))
            for jid, b in present.items():
                self.assertEqual(got[jid], b, "round %d job %d" % (rnd, jid))
            for jid, b in peek_all(c, sorted(deleted)).items():
                self.assertIsNone(b, "round %d deleted job %d came back" % (rnd, jid))
            stop = threading.Event()
            lock = threading.Lock()

            def load():
                w = self.server.connect(timeout=HANG)
                k = 0
                try:
                    while not stop.is_set():
                        k += 1
                        body = b"r%d-%d-" % (rnd, k) + b"y" * 80
                        delay = self.rng.choice([3600, 7200, 5, 6, 0, 0, 0])
                        pri = self.rng.choice([1, 1, 1024, 5000])
                        r = w.cmd(b"put %d %d 60 %d\r\n%s" % (pri, delay, len(body), body))
                        if not r.startswith(b"INSERTED "):
                            return
                        with lock:
                            present[int(r.split()[1])] = body
                        if k % 5 == 0 and present:
                            with lock:
                                jid = self.rng.choice(sorted(present))
                                b = present.pop(jid)
                            r = w.cmd("delete %d" % jid)
                            with lock:
                                if r == b"DELETED\r\n":
                                    deleted.add(jid)
                                elif r != b"NOT_FOUND\r\n":
                                    present[jid] = b  # unknown outcome: not settled
                        if k % 3 == 0:  # a consumer: the first ready job, maybe from disk
                            r = w.cmd("reserve-with-timeout 0")
                            if r.startswith(b"RESERVED "):
                                jid = int(r.split()[1])
                                with lock:
                                    b = present.pop(jid, None)
                                r = w.cmd("delete %d" % jid)
                                with lock:
                                    if r == b"DELETED\r\n":
                                        deleted.add(jid)
                                    elif b is not None:
                                        present[jid] = b  # unknown outcome: not settled
                except (OSError, EOFError):
                    pass

            t = threading.Thread(target=load)
            t.start()
            # Kill once some jobs went cold (demotion under way), at a random later instant.
            wait_until(lambda: int(ext(c)["disk-tier-demotions"]) > 0, timeout=HANG)
            with lock:
                more = len(present) + self.rng.randrange(1, 400)
            wait_until(lambda: len(present) >= more or not t.is_alive(), timeout=HANG)
            self.server.proc.send_signal(signal.SIGKILL)
            self.server.proc.wait()
            stop.set()
            t.join(HANG)
            # A put cut by the kill may or may not be there: only acknowledged ones count.
        self.server = Server(args=["-b", self.dir, "-s", "16384", "--hot-memory", "100K"],
                             log=os.path.join(self.tmp, "stalkd.log"))
        c = self.server.connect(timeout=HANG)
        got = peek_all(c, sorted(present))
        for jid, b in present.items():
            self.assertEqual(got[jid], b)
        for jid, b in peek_all(c, sorted(deleted)).items():
            self.assertIsNone(b)


if __name__ == "__main__":
    unittest.main()

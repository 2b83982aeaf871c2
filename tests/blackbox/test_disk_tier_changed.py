"""Black-box tests of the disk tier with jobs changed since their put (docs/DISK-TIER.md,
"Which jobs go"): jobs released, released with a delay and put back by their TTR go to disk
too (their record is written whole again first), so a backlog of retries stays within
--hot-memory; a kill -9 during or after those rewrites brings every acknowledged job back
once, in its last acknowledged state; on a full disk they simply stay in memory (logged
once) and go once there is room. The tests wait for events (stats values, replies, log
lines), never for a fixed time; timeouts only bound a hang."""
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from beanstalk import (Server, embedded_store_only, is_beanstalkd, parse_yaml,  # noqa: E402
                      stats_of, wait_until)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_extensions import parse_list  # noqa: E402

SEED = int(os.environ.get("STALKD_TEST_SEED") or random.randrange(1 << 32))
HANG = 60.0  # bounds a hang only
NO_ROOM = b"no free space in the binlog to write changed jobs whole"
ROOM_AGAIN = b"space again to write changed jobs whole"
KEYS = ("state", "pri", "delay", "reserves", "releases", "timeouts", "buries", "kicks")


def ext(c):
    return stats_of(c, "stats-ext")


def seen(c, ids):
    """{id: (stats-job values of KEYS, when due, body)} of every id (NOT_FOUND: None); when
    due: a delayed job's time-left on this process's monotonic clock, 0 for other states."""
    out = dict.fromkeys(ids)
    for jid in ids:
        r = c.cmd("stats-job %d" % jid)
        if r != b"NOT_FOUND\r\n":
            assert r.startswith(b"OK "), r
            st = parse_yaml(r)
            p = c.cmd("peek %d" % jid)
            assert p.startswith(b"FOUND "), p
            due = int(st["time-left"]) + time.monotonic() if st["state"] == "delayed" else 0
            out[jid] = (tuple(st[k] for k in KEYS), due, p.split(b"\r\n")[1])
    return out


def pipelined(c, lines):
    """Sends the commands at once; returns their replies."""
    out = []
    for i in range(0, len(lines), 500):
        chunk = lines[i:i + 500]
        c.send(b"".join(chunk))
        out += [c.read_reply() for _ in chunk]
    return out


def put_all(c, tube, ks, ttr, body):
    assert c.cmd("use %s" % tube).startswith(b"USING")
    replies = pipelined(c, [b"put %d 0 %d %d\r\n%s\r\n" % (
        100 + k % 7, ttr, body, b"%08d" % k + b"x" * (body - 8)) for k in ks])
    for r in replies:
        assert r.startswith(b"INSERTED "), r
    return [int(r.split()[1]) for r in replies]


def churn(c, n, body=100):
    """n puts: two thirds in `default`, reserved, then half of those released at once with
    another priority and half released with a delay of about an hour (a back-off); a third
    in `t` with a TTR of 1 s, reserved and left to time out (waited for). Returns the ids."""
    ids = put_all(c, "default", [k for k in range(n) if k % 3 != 2], 600, body)
    slow = put_all(c, "t", [k for k in range(n) if k % 3 == 2], 1, body)
    got = pipelined(c, [b"reserve-with-timeout 0\r\n"] * len(ids))
    assert all(r.startswith(b"RESERVED ") for r in got), got[:3]
    releases = []
    for r in got:
        jid = int(r.split()[1])
        delay = 0 if jid % 2 == 0 else 3600 + jid % 100
        releases.append(b"release %d %d %d\r\n" % (jid, 5000 + jid % 11, delay))
    assert set(pipelined(c, releases)) == {b"RELEASED\r\n"}
    assert c.cmd("watch t") == b"WATCHING 2\r\n"
    assert c.cmd("ignore default") == b"WATCHING 1\r\n"
    pipelined(c, [b"reserve-with-timeout 0\r\n"] * len(slow))
    assert wait_until(lambda: stats_of(c, "stats")["current-jobs-reserved"] == "0", timeout=HANG)
    return ids + slow


@unittest.skipIf(is_beanstalkd(), "stalkd's disk tier")
@embedded_store_only("the disk tier is the embedded store's")
class ChangedJobsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stalkd_tier_changed_")
        self.dir = os.path.join(self.tmp, "binlog")
        self.rng = random.Random(SEED)
        self.servers = []

    def tearDown(self):
        for s in self.servers:  # each killed by its PID if still running
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _formatMessage(self, msg, standard_msg):
        return "%s (STALKD_TEST_SEED=%d; logs in %s)" % (
            super()._formatMessage(msg, standard_msg), SEED, self.tmp)

    def start(self, budget, env=None, segment="65536", extra=()):
        self.log = os.path.join(self.tmp, "stalkd.%d.log" % len(self.servers))
        s = Server(args=["-b", self.dir, "-s", segment, "--hot-memory", budget] + list(extra),
                   log=self.log, env=env)
        self.servers.append(s)
        return s

    def kill9(self, s, c):
        c.close()
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait()

    def read_log(self):
        with open(self.log, "rb") as f:
            return f.read()

    def expect_same(self, want, got, what):
        self.assertEqual(set(got), set(want), what)
        for jid, w in want.items():
            g = got[jid]
            self.assertEqual(g is None, w is None, "%s: job %d" % (what, jid))
            if w is None:
                continue
            self.assertEqual(g[0], w[0], "%s: job %d" % (what, jid))
            self.assertEqual(g[2], w[2], "%s: job %d" % (what, jid))
            # time-left is in whole seconds, read at two instants
            self.assertLessEqual(abs(g[1] - w[1]), 2.5, "%s: job %d time-left" % (what, jid))

    def test_retries_go_to_disk_and_survive_a_kill(self):
        # Round 0 is killed at a random instant of the rewrites, rounds 1 and 2 once they are
        # done; rounds 0 and 2 sync before every reply (-f 0: the rewrites wait in memory while
        # a sync runs, and go out with the write before the next).
        for rnd in range(3):
            shutil.rmtree(self.dir, ignore_errors=True)
            s = self.start("300K", extra=[] if rnd == 1 else ["-f", "0"])
            c = s.connect(timeout=HANG)
            n = 6000
            ids = churn(c, n)
            want = seen(c, ids)  # as acknowledged (every one: nothing changes them now)
            states = [w[0][0] for w in want.values()]
            self.assertEqual(states.count("delayed"), n // 3)
            self.assertEqual(states.count("ready"), n - n // 3)
            self.assertGreater(sum(w[0][5] == "1" for w in want.values()), 0)  # timeouts
            if rnd == 0:
                at = self.rng.randrange(1, n // 2)
                wait_until(lambda: int(ext(c)["disk-tier-rewrites"]) >= at, timeout=HANG)
            else:
                # Every job changed since its put, yet memory gets within the budget.
                st = wait_until(lambda: (lambda d: d if int(d["memory-used"]) <= 300 * 1024
                                         else None)(ext(c)), timeout=HANG)
                self.assertIsNotNone(st, ext(c))
                # (Memory gets there with about 1,000 of them left in memory.)
                self.assertGreater(int(st["disk-tier-cold-jobs"]), n * 3 // 4)
                self.assertGreater(int(st["disk-tier-rewrites"]), n * 3 // 4)
                self.assertEqual(st["disk-tier-read-errors"], "0")
            self.kill9(s, c)
            s = self.start("300K")
            c = s.connect(timeout=HANG)
            self.expect_same(want, seen(c, ids), "round %d" % rnd)
            st = stats_of(c, "stats")  # each once: no job more
            self.assertEqual(int(st["current-jobs-ready"]) + int(st["current-jobs-delayed"]), n)
            self.assertEqual(int(st["current-jobs-reserved"]) + int(st["current-jobs-buried"]), 0)
            self.kill9(s, c)

    def test_on_a_full_disk_changed_jobs_stay_in_memory_until_there_is_room(self):
        segment = 65536
        env = dict(os.environ, STALKD_TEST_DISK_BYTES=str(4 * segment))
        s = self.start("60K", env=env, segment=str(segment))
        c = s.connect(timeout=HANG)
        ids = []
        while True:  # the disk fills: puts are refused
            body = b"%06d" % len(ids) + b"j" * 1994
            r = c.cmd(b"put %d 0 60 %d\r\n%s" % (100000 - len(ids), len(body), body))
            if r == b"OUT_OF_MEMORY\r\n":
                break
            self.assertTrue(r.startswith(b"INSERTED "), r)
            ids.append(int(r.split()[1]))
        self.assertGreater(len(ids), 80)
        released = []
        for _ in range(20):  # the last put first (priority), released with a back-off
            r = c.cmd("reserve-with-timeout 0")
            jid = int(r.split()[1])
            self.assertEqual(c.cmd("release %d 1 3600" % jid), b"RELEASED\r\n")
            released.append(jid)
        # No room to write them whole again: they stay in memory (a changed job goes only
        # once rewritten: at most one, which a last bit of room may have taken); the jobs
        # never changed go as before; nothing fails.
        self.assertTrue(wait_until(lambda: NO_ROOM in self.read_log(), timeout=HANG))
        self.assertTrue(wait_until(lambda: int(ext(c)["disk-tier-demotions"]) > 0,
                                   timeout=HANG), ext(c))
        self.assertLessEqual(int(ext(c)["disk-tier-rewrites"]), 1)
        self.assertEqual(stats_of(c, "stats")["current-jobs-delayed"], "20")
        # Room again: the oldest jobs deleted, their segment removed. Then they go.
        for jid in ids[:40]:
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertTrue(wait_until(lambda: int(ext(c)["disk-tier-rewrites"]) >= 19,
                                   timeout=HANG), ext(c))
        self.assertTrue(wait_until(lambda: ROOM_AGAIN in self.read_log(), timeout=HANG))
        self.assertEqual(self.read_log().count(NO_ROOM), 1)  # once, not per job or retry
        want = seen(c, ids)
        self.kill9(s, c)
        s = self.start("60K", env=env, segment=str(segment))
        c = s.connect(timeout=HANG)
        got = seen(c, ids)
        self.expect_same(want, got, "after kill -9")
        c.close()
        for jid in released:
            self.assertEqual(got[jid][0][0], "delayed")
            self.assertEqual(got[jid][0][4], "1")  # releases


    def test_buried_pile_goes_to_disk_and_is_kicked_in_bury_order(self):
        """A pile of buried jobs beyond the budget (a consumer burying everything) leaves
        memory too: memory-used stays bounded, the counts, peek-buried and list-jobs include
        the jobs on disk, and kick takes them in bury order (not id order); a kill -9 once
        they are on disk loses none: they come back buried."""
        s = self.start("300K")
        c = s.connect(timeout=HANG)
        n = 6000
        put_all(c, "dead", range(n), 600, 100)  # priorities 100..106 in turn
        self.assertEqual(c.cmd("watch dead"), b"WATCHING 2\r\n")
        got = pipelined(c, [b"reserve-with-timeout 0\r\n"] * n)
        order = [int(r.split()[1]) for r in got]  # by priority, then id
        self.assertNotEqual(order, sorted(order))
        self.assertEqual(set(pipelined(c, [b"bury %d 9\r\n" % j for j in order])),
                         {b"BURIED\r\n"})
        st = wait_until(lambda: (lambda d: d if int(d["disk-tier-cold-jobs"]) > n * 9 // 10 and
                                 int(d["memory-used"]) <= 300 * 1024 else None)(ext(c)),
                        timeout=HANG)
        self.assertIsNotNone(st, ext(c))
        self.assertEqual(int(st["current-jobs-buried"]), n)
        self.assertEqual(int(stats_of(c, "stats-tube dead")["current-jobs-buried"]), n)
        self.assertEqual(c.cmd("use dead"), b"USING dead\r\n")
        self.assertTrue(c.cmd("peek-buried").startswith(b"FOUND %d " % order[0]))
        listed, nxt = [], 0
        while True:
            nxt, page = parse_list(c.cmd("list-jobs dead buried %d 1000" % nxt))
            listed += page
            if nxt == 0:
                break
        self.assertEqual(listed, sorted(order))
        # kick takes the oldest buried first, reading them back from disk.
        self.assertEqual(c.cmd("kick 1000"), b"KICKED 1000\r\n")
        for jid in order[:1000:37]:
            self.assertEqual(parse_yaml(c.cmd("stats-job %d" % jid))["state"], "ready")
        self.assertTrue(c.cmd("peek-buried").startswith(b"FOUND %d " % order[1000]))
        self.assertEqual(parse_yaml(c.cmd("stats-job %d" % order[1000]))["state"], "buried")
        # A kill -9 now: every buried job is back, buried, after the restart.
        self.kill9(s, c)
        s = self.start("300K")
        c = s.connect(timeout=HANG)
        self.assertEqual(int(ext(c)["current-jobs-buried"]), n - 1000)
        self.assertEqual(c.cmd("use dead"), b"USING dead\r\n")
        # After a restart buried jobs come back in id order (as beanstalkd's binlog brings
        # them back); they go to disk again, and kicks take them in that order.
        after = sorted(order[1000:])
        n -= 1000
        self.assertTrue(wait_until(lambda: int(ext(c)["disk-tier-cold-jobs"]) > n // 2,
                                   timeout=HANG), ext(c))
        self.assertTrue(c.cmd("peek-buried").startswith(b"FOUND %d " % after[0]))
        for k in range(0, n, 1000):
            self.assertEqual(c.cmd("kick 1000"), b"KICKED 1000\r\n")
            for jid in after[k:k + 1000:97]:
                self.assertEqual(parse_yaml(c.cmd("stats-job %d" % jid))["state"], "ready")
            if k + 1000 < n:
                self.assertTrue(c.cmd("peek-buried").startswith(b"FOUND %d " % after[k + 1000]))
            self.assertLessEqual(int(ext(c)["memory-used"]), 600 * 1024)
        st = ext(c)
        self.assertEqual((st["current-jobs-buried"], st["current-jobs-ready"]), ("0", str(n + 1000)))
        self.assertEqual(st["disk-tier-read-errors"], "0")
        c.close()


if __name__ == "__main__":
    unittest.main()

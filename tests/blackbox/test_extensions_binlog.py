"""Black-box tests of the lifecycle extensions with the binlog (-b), docs/EXTENSIONS.md "What
survives a restart": tries left, TTL (a wall-clock deadline), keys, attributes, bury reasons
and tube defaults come back after kill -9 or a clean stop, and after compaction has moved
their records; nothing acknowledged is lost; a deleted, purged or expired job stays gone.

Run: python3 -m unittest -v tests/blackbox/test_extensions_binlog.py
"""
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
from beanstalk import Server, is_beanstalkd, stats_of, wait_until  # noqa: E402
# stats-ext, stats-tube-ext and stats-job-ext show the extensions' keys: this file asks them.
from test_extensions import (entry, inserted_id, put_ext, put_ext_bytes, put_many, put_n,  # noqa: E402
                             reserve_ext, unq, wait_job_stat, wait_stat)

NOT_FOUND = b"NOT_FOUND\r\n"
HANG = 60.0   # bounds a wait for an event that must come; never a speed


def kill9(srv):
    srv.proc.kill()
    srv.proc.wait()
    srv.stop()


@unittest.skipIf(is_beanstalkd(), "stalkd's extensions and binlog")
class ExtBinlogTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stalkd_extbinlog_")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, *args):
        s = Server(args=["-b", self.dir] + list(args))
        self.servers.append(s)
        return s

    def connect(self, s):
        c = s.connect(timeout=5)
        self.addCleanup(c.close)
        return c

    def js(self, c, jid):
        return stats_of(c, "stats-job-ext %d" % jid)

    def assertGone(self, c, jid, what=""):
        self.assertEqual(c.cmd("peek %d" % jid), NOT_FOUND, "job %d (%s) came back" % (jid, what))

    def assertJob(self, c, jid, **want):
        """stats-job-ext jid has these values (keys with _ for -; string values unquoted), and
        no extension key that is not named (None: must be absent)."""
        st = self.js(c, jid)
        for k, v in want.items():
            key = k.replace("_", "-").replace("attr-", "attr.")
            if v is None:
                self.assertNotIn(key, st, "job %d" % jid)
            else:
                self.assertEqual(unq(st.get(key, "<absent>")), str(v), "job %d %s" % (jid, key))
        return st

    def test_everything_comes_back_after_kill9(self):
        s = self.start("-f", "0")
        c, w = self.connect(s), self.connect(s)
        self.assertEqual(c.cmd("use t"), b"USING t\r\n")
        exp = inserted_id(put_ext(c, "expires while up", "ttl=1 key=exp"))
        self.assertEqual(c.cmd("tube-tries t 3"), b"TUBE-TRIES 3\r\n")
        self.assertEqual(c.cmd("tube-tries empty 5"), b"TUBE-TRIES 5\r\n")  # a tube with no jobs
        self.assertEqual(c.cmd("tube-tries cleared 4"), b"TUBE-TRIES 4\r\n")
        self.assertEqual(c.cmd("tube-tries cleared 0"), b"TUBE-TRIES 0\r\n")
        dflt = inserted_id(c.put("default tries"))
        rel = inserted_id(put_ext(c, "released once", "tries=2"))
        self.assertTrue(c.cmd("reserve-job %d" % rel).startswith(b"RESERVED"))
        self.assertEqual(c.cmd("release %d 0 0" % rel), b"RELEASED\r\n")
        attr = inserted_id(put_ext(c, "attributes", "ttl=1000 key=k attr.a=b attr.c=d"))
        exh = inserted_id(put_ext(c, "out of tries", "tries=1"))
        self.assertTrue(c.cmd("reserve-job %d" % exh).startswith(b"RESERVED"))
        self.assertIn(c.cmd("release %d 0 0" % exh), (b"RELEASED\r\n", b"BURIED\r\n"))
        bur = inserted_id(put_ext(c, "buried", "tries=5"))
        self.assertTrue(c.cmd("reserve-job %d" % bur).startswith(b"RESERVED"))
        self.assertEqual(c.cmd("bury %d 0" % bur), b"BURIED\r\n")
        tmo = inserted_id(put_ext(c, "timed out", "tries=1", ttr=1))
        self.assertTrue(c.cmd("reserve-job %d" % tmo).startswith(b"RESERVED"))
        dele = inserted_id(put_ext(c, "deleted", "key=del"))
        self.assertEqual(c.cmd("delete %d" % dele), b"DELETED\r\n")
        dm = inserted_id(put_ext(c, "deleted-many", "key=dm"))
        self.assertEqual(c.cmd("delete-many %d" % dm), b"DELETED-MANY 1\r\n")
        c.cmd("use p")
        purged = put_n(c, 1500) + [inserted_id(put_ext(c, "purged", "key=pk"))]
        self.assertEqual(c.cmd("purge p ready"), b"PURGED 1501\r\n")
        c.cmd("use det")
        det = inserted_id(put_ext(c, "detached", "tries=2"))
        w.cmd("watch det")
        w.cmd("ignore default")
        self.assertEqual(reserve_ext(w, "0 detached")[1], [(det, b"detached")])
        c.cmd("use t")
        held = inserted_id(put_ext(c, "held", "tries=3 key=held"))
        self.assertTrue(w.cmd("reserve-job %d" % held).startswith(b"RESERVED"))
        r = put_many(c, [entry("m%d" % i, "key=pm%d attr.i=%d" % (i, i)) for i in range(20)])
        many = [int(l.split()[1]) for l in r.split(b"\r\n")[1:-1]]
        self.assertEqual(len(many), 20)
        self.assertTrue(wait_job_stat(c, tmo, "state", "buried", timeout=HANG))
        self.assertTrue(wait_stat(c, "total-expired-jobs", 1, timeout=HANG))
        # `gone` (TTL 4 s) must still live at the kill, and be past its TTL at the restart:
        # t_gone is taken after its put was answered, so its deadline is before t_gone + 4.
        # `soon` (TTL 10 s) outlives the restart and expires by its wall-clock deadline.
        gone = inserted_id(put_ext(c, "expires while down", "ttl=4 key=gone"))
        t_gone = time.monotonic()
        soon = inserted_id(put_ext(c, "expires soon after", "ttl=10 key=soon"))
        self.assertEqual(self.js(w, held).get("tries-left"), "2")  # in memory: a try is used
        kill9(s)
        time.sleep(max(0.0, t_gone + 4.3 - time.monotonic()))

        s = self.start("-f", "0")
        c = self.connect(s)
        self.assertJob(c, dflt, state="ready", tries_left=3)
        self.assertJob(c, rel, state="ready", tries_left=1, reserves=1, releases=1)
        st = self.assertJob(c, attr, state="ready", key="k", attr_a="b", attr_c="d", tries_left=3)
        self.assertTrue(990 <= int(st["ttl-left"]) <= 1000, st["ttl-left"])
        self.assertJob(c, exh, state="buried", tries_left=0, bury_reason="release")
        self.assertJob(c, bur, state="buried", tries_left=4, bury_reason="bury")
        self.assertJob(c, tmo, state="buried", tries_left=0, bury_reason="timeout", timeouts=1)
        # reserved at the kill: back ready, with the tries of its latest record (the put)
        self.assertJob(c, held, state="ready", tries_left=3, key="held")
        self.assertJob(c, det, state="ready", tries_left=2)
        for i, jid in enumerate(many):
            self.assertJob(c, jid, state="ready", key="pm%d" % i, attr_i=i, tries_left=3)
        st = self.assertJob(c, soon, state="ready", key="soon")
        # At least 4.3 s of its 10 went by before the restart (a slow machine only adds):
        # a TTL restarted with the server would show about 10.
        self.assertLessEqual(int(st["ttl-left"]), 6, "the TTL restarted with the server")
        for jid, what in ((exp, "expired"), (gone, "expired while down"), (dele, "deleted"),
                          (dm, "deleted-many")):
            self.assertGone(c, jid, what)
        for jid in purged[::100] + purged[-1:]:
            self.assertGone(c, jid, "purged")
        st = stats_of(c, "stats-ext")
        # the job whose TTL ended while down was deleted as an expiry once the server was up
        self.assertEqual(st["total-expired-jobs"], "1")
        self.assertEqual(stats_of(c, "stats-tube-ext t")["total-expired-jobs"], "1")
        self.assertEqual(st["current-jobs-ready"], str(6 + len(many)))  # dflt rel attr held det soon
        self.assertEqual(st["current-jobs-buried"], "3")
        # tube defaults, with and without jobs
        self.assertEqual(stats_of(c, "stats-tube-ext t")["default-tries"], "3")
        for tube, n in (("empty", 5), ("cleared", 0)):
            c.cmd("use " + tube)
            self.assertEqual(stats_of(c, "stats-tube-ext " + tube)["default-tries"], str(n))
            jid = inserted_id(c.put("x"))
            self.assertEqual(self.js(c, jid).get("tries-left"), str(n) if n else None, tube)
        # keys: the living are still unique, the dead are free
        c.cmd("use t")
        self.assertEqual(put_ext(c, "dup", "key=k"), b"EXISTS %d\r\n" % attr)
        self.assertEqual(put_ext(c, "dup", "key=held"), b"EXISTS %d\r\n" % held)
        self.assertEqual(put_ext(c, "dup", "key=pm7"), b"EXISTS %d\r\n" % many[7])
        for key in ("exp", "gone", "del", "dm"):
            self.assertTrue(put_ext(c, "again", "key=" + key).startswith(b"INSERTED "), key)
        c.cmd("use p")
        self.assertTrue(put_ext(c, "again", "key=pk").startswith(b"INSERTED "))
        # the restored tries work: a kick respawns, a release of the last try buries
        self.assertEqual(c.cmd("kick-job %d" % exh), b"KICKED\r\n")
        self.assertJob(c, exh, state="ready", tries_left=1, bury_reason=None)
        self.assertTrue(c.cmd("reserve-job %d" % rel).startswith(b"RESERVED"))
        self.assertIn(c.cmd("release %d 0 0" % rel), (b"RELEASED\r\n", b"BURIED\r\n"))
        self.assertJob(c, rel, state="buried", bury_reason="release")
        # the TTL kept its wall-clock deadline (ttl-left above); it expires (HANG only bounds
        # a hang), and not before that deadline
        self.assertTrue(wait_until_gone(c, soon, HANG), "job %d outlived its TTL" % soon)
        self.assertGreater(time.monotonic(), t_gone + 10 - 0.05, "job %d expired early" % soon)
        self.assertGreater(inserted_id(c.put("new")), max(purged + many + [soon]))

    def test_clean_restarts_and_compaction_keep_the_extensions(self):
        s = self.start("-s", "65536")
        c = self.connect(s)
        self.assertEqual(c.cmd("tube-tries keep 2"), b"TUBE-TRIES 2\r\n")
        self.assertEqual(c.cmd("tube-tries nojobs 9"), b"TUBE-TRIES 9\r\n")
        c.cmd("use keep")
        a = inserted_id(put_ext(c, "a", "ttl=100000 key=ka attr.x=1 attr.y=2"))
        b = inserted_id(c.put("b"))                                  # default tries
        d = inserted_id(put_ext(c, "d", "tries=1 key=kd"))
        self.assertTrue(c.cmd("reserve-job %d" % d).startswith(b"RESERVED"))
        self.assertIn(c.cmd("release %d 0 0" % d), (b"RELEASED\r\n", b"BURIED\r\n"))
        e = inserted_id(put_ext(c, "e", "tries=7 key=ke", delay=100000))
        # defaults changed again later: the latest record wins, wherever compaction put the
        # earlier ones
        self.assertEqual(c.cmd("tube-tries flip 3"), b"TUBE-TRIES 3\r\n")
        self.assertEqual(c.cmd("tube-tries flop 4"), b"TUBE-TRIES 4\r\n")
        # churn: puts and deletes until the first segments are compacted away
        c.cmd("use churn")
        body = b"w" * 1000

        def churn(n):
            for _ in range(n):
                c.send(b"put 0 0 10 1000\r\n" + body + b"\r\n")
                jid = inserted_id(c.read_line())
                self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")

        churn(700)
        self.assertEqual(c.cmd("tube-tries flip 0"), b"TUBE-TRIES 0\r\n")
        self.assertEqual(c.cmd("tube-tries flop 6"), b"TUBE-TRIES 6\r\n")
        churn(800)
        # Compaction runs between commands, a step at a time: wait for it rather than
        # expect it done by the time the last delete is answered.
        compacted = wait_until(lambda: int(stats_of(c, "stats")["binlog-oldest-index"]) > 1,
                               timeout=10.0)
        self.assertTrue(compacted, "nothing was compacted")
        self.assertGreater(int(stats_of(c, "stats")["binlog-records-migrated"]), 0)

        def check(c):
            st = self.assertJob(c, a, state="ready", key="ka", attr_x=1, attr_y=2, tries_left=2)
            self.assertGreater(int(st["ttl-left"]), 99000)
            self.assertJob(c, b, state="ready", tries_left=2)
            self.assertJob(c, d, state="buried", tries_left=0, bury_reason="release", key="kd")
            self.assertJob(c, e, state="delayed", tries_left=7, key="ke")
            self.assertEqual(stats_of(c, "stats-tube-ext keep")["default-tries"], "2")
            for tube, n in (("flip", 0), ("flop", 6)):
                c.cmd("use " + tube)
                self.assertEqual(stats_of(c, "stats-tube-ext " + tube)["default-tries"], str(n), tube)
            c.cmd("use keep")
            for key, jid in (("ka", a), ("kd", d), ("ke", e)):
                self.assertEqual(put_ext(c, "dup", "key=" + key), b"EXISTS %d\r\n" % jid)
            c.cmd("use default")

        check(c)
        for _ in range(2):  # twice: what the first restart restored must be logged again
            c.close()
            s.stop()
            s = self.start("-s", "65536")
            c = self.connect(s)
            check(c)
        c.cmd("use nojobs")
        self.assertEqual(stats_of(c, "stats-tube-ext nojobs")["default-tries"], "9")
        self.assertEqual(self.js(c, inserted_id(c.put("x"))).get("tries-left"), "9")

    def test_a_backlog_of_ttls_ended_while_down(self):
        s = self.start("-f", "0")
        c, w = self.connect(s), self.connect(s)
        n = 2500
        c.send(b"".join(put_ext_bytes("e%d" % i, "ttl=1 key=e%d" % i) for i in range(n)))
        ids = [inserted_id(c.read_line()) for _ in range(n)]
        held = inserted_id(put_ext(c, "held", "ttl=1 key=held"))
        self.assertTrue(w.cmd("reserve-job %d" % held).startswith(b"RESERVED"))
        keep = inserted_id(put_ext(c, "keep", "ttl=1000 key=keep"))
        kill9(s)  # before any of them expired (held would have waited for its worker anyway)
        time.sleep(1.2)
        s = self.start("-f", "0")
        c = self.connect(s)
        self.assertTrue(wait_stat(c, "total-expired-jobs", n + 1, timeout=3),
                        "not every job whose TTL ended while down was deleted")
        st = stats_of(c, "stats-ext")
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-reserved"]), ("1", "0"))
        for jid in ids[::250] + [ids[-1], held]:
            self.assertGone(c, jid)
        self.assertTrue(c.cmd("peek %d" % keep).startswith(b"FOUND %d " % keep))
        for key in ("e0", "e%d" % (n - 1), "held"):
            self.assertTrue(put_ext(c, "again", "key=" + key).startswith(b"INSERTED "), key)
        self.assertEqual(put_ext(c, "again", "key=keep"), b"EXISTS %d\r\n" % keep)
        # their deletes were written: a second restart brings none back, and counts none
        c.close()
        s.stop()
        s = self.start("-f", "0")
        c = self.connect(s)
        st = stats_of(c, "stats-ext")
        self.assertEqual((st["current-jobs-ready"], st["total-expired-jobs"]), ("4", "0"))
        self.assertGone(c, ids[0])

    def test_nothing_acknowledged_is_lost_under_kill9(self):
        s = self.start("-f", "0")
        lock = threading.Lock()
        acked = {}          # id -> key
        deleted = set()     # ids whose purge/delete-many was acknowledged
        attempted = set()   # ids a delete was sent for (maybe done, maybe not)
        stop = time.monotonic() + 1.5

        def worker(n):
            c = s.connect(timeout=5)
            rng = random.Random(n)
            seq = 0
            try:
                c.cmd("use w%d" % (n % 2))
                while time.monotonic() < stop:
                    if rng.random() < 0.5:
                        seq += 1
                        key = "w%d-%d" % (n, seq)
                        jid = inserted_id(put_ext(c, key, "key=%s tries=4 attr.n=%d" % (key, n)))
                        with lock:
                            acked[jid] = key
                    else:
                        keys = ["w%d-%d" % (n, seq + i + 1) for i in range(5)]
                        seq += 5
                        r = put_many(c, [entry(k, "key=%s tries=4" % k) for k in keys])
                        ids = [int(l.split()[1]) for l in r.split(b"\r\n")[1:-1]]
                        with lock:
                            acked.update(zip(ids, keys))
                    if rng.random() < 0.2:
                        with lock:
                            mine = [j for j, k in acked.items() if k.startswith("w%d-" % n)
                                    and j not in attempted]
                        victims = rng.sample(mine, min(3, len(mine)))
                        with lock:
                            attempted.update(victims)
                        r = c.cmd("delete-many " + " ".join(map(str, victims)))
                        if r == b"DELETED-MANY %d\r\n" % len(victims):
                            with lock:
                                deleted.update(victims)
            except (OSError, EOFError, AssertionError, ValueError, IndexError):
                pass

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.2)
        with lock:
            snap, snap_deleted, snap_attempted = dict(acked), set(deleted), set(attempted)
        kill9(s)
        for t in threads:
            t.join()
        self.assertGreater(len(snap), 100)
        s = self.start("-f", "0")
        c = self.connect(s)
        for jid, key in sorted(snap.items()):
            r = c.cmd("peek %d" % jid)
            if jid in snap_deleted:
                self.assertEqual(r, NOT_FOUND, "deleted job %d came back" % jid)
            elif jid not in snap_attempted:
                self.assertEqual(r, b"FOUND %d %d\r\n%s\r\n" % (jid, len(key), key.encode()),
                                 "job %d lost" % jid)
                st = self.js(c, jid)
                self.assertEqual((unq(st["key"]), st.get("tries-left")), (key, "4"))
        # every living key is still unique
        n = 0
        for jid, key in sorted(snap.items()):
            if jid in snap_attempted:
                continue
            tube = unq(self.js(c, jid)["tube"])
            c.cmd("use " + tube)
            self.assertEqual(put_ext(c, "dup", "key=" + key), b"EXISTS %d\r\n" % jid)
            n += 1
            if n >= 200:
                break


def wait_until_gone(c, jid, timeout):
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        if c.cmd("peek %d" % jid) == NOT_FOUND:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


if __name__ == "__main__":
    unittest.main()

"""Soak test: a bounded run of concurrent producers, consumers and a kicker with random
releases, buries, kicks, touches, short TTRs left to expire and abrupt disconnects (close
and reset, mid-body and while holding jobs). Afterwards every job put is either deleted
exactly once or still present with its exact body (peek by id), nothing was delivered with
a wrong body, the server's counts equal the jobs that exist, and once everything is deleted
the server's RSS is back near its baseline.

Duration: env STALKD_SOAK_SECONDS (default 60, or 20 when the server runs under
AddressSanitizer).

Run: python3 -m unittest -v tests/blackbox/test_soak.py
"""
import os
import random
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import Server, parse_yaml, wait_stat  # noqa: E402
from beanstalk import rss_kb, is_sanitized, rst_close  # noqa: E402

TUBES = ("soak0", "soak1", "soak2")
PRODUCERS = 3
CONSUMERS = 4
LIVE_MAX = 20000   # producers pause while more jobs than this exist
BODY_MAX = 2000


class Ledger:
    """What the clients saw, shared by all threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bodies = {}       # id -> body, for every INSERTED
        self.deleted = set()   # ids we got DELETED for
        self.seen = []         # (id, body) of every RESERVED
        self.errors = []
        self.counts = {}

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def error(self, msg):
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(msg)

    def live(self):
        with self.lock:
            return len(self.bodies) - len(self.deleted)


class TestSoak(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.server = Server()
        self.addCleanup(self.server.stop)
        self.sanitized = is_sanitized(self.server.pid)
        default = 20 if self.sanitized else 60
        self.seconds = float(os.environ.get("STALKD_SOAK_SECONDS", default))
        self.ledger = Ledger()
        self.stop = threading.Event()

    # ------------------------------------------------------------------ actors

    def producer(self, k):
        rnd = random.Random(1000 + k)
        L = self.ledger
        c = None
        seq = 0
        try:
            while not self.stop.is_set():
                if c is None:
                    c = self.server.connect(timeout=30)
                    c.cmd("use " + TUBES[k % len(TUBES)])
                if L.live() > LIVE_MAX:
                    time.sleep(0.05)
                    continue
                if rnd.random() < 0.05:
                    c.cmd("use " + rnd.choice(TUBES))
                seq += 1
                body = b"p%d-%d-" % (k, seq)
                body += bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 64)))
                body += b"." * rnd.randrange(0, BODY_MAX)
                pri = rnd.choice((0, 1, 100, 1024, 4294967295))
                delay = rnd.choice((0, 0, 0, 0, 1, 2))
                ttr = rnd.choice((1, 1, 2, 5, 30))
                head = b"put %d %d %d %d\r\n" % (pri, delay, ttr, len(body))
                if rnd.random() < 0.003:
                    # vanish mid-body: no job may appear
                    c.send(head + body[:len(body) // 2])
                    (rst_close(c.sock) if rnd.random() < 0.5 else c.close())
                    c = None
                    L.count("producer-abort")
                    continue
                c.send(head + body + b"\r\n")
                r = c.read_reply()
                if not r.startswith(b"INSERTED "):
                    L.error("put: %r" % r)
                    continue
                jid = int(r.split()[1])
                with L.lock:
                    if jid in L.bodies:
                        L.errors.append("id %d inserted twice" % jid)
                    L.bodies[jid] = body
        except Exception as e:  # noqa: BLE001
            L.error("producer %d: %r" % (k, e))
        finally:
            if c:
                c.close()

    def consumer(self, k):
        rnd = random.Random(2000 + k)
        L = self.ledger
        c = None
        try:
            while not self.stop.is_set():
                if c is None:
                    c = self.server.connect(timeout=30)
                    for t in TUBES:
                        c.cmd("watch " + t)
                r = c.cmd("reserve-with-timeout 1")
                if r in (b"TIMED_OUT\r\n", b"DEADLINE_SOON\r\n"):
                    continue
                if not r.startswith(b"RESERVED "):
                    L.error("reserve: %r" % r)
                    continue
                head, rest = r.split(b"\r\n", 1)
                jid = int(head.split()[1])
                with L.lock:
                    L.seen.append((jid, rest[:-2]))
                x = rnd.random()
                if x < 0.55:
                    self.delete(c, jid)
                elif x < 0.67:
                    r = c.cmd("release %d %d %d" % (jid, rnd.randrange(3), rnd.choice((0, 0, 1))))
                    self.expect(r, (b"RELEASED\r\n", b"NOT_FOUND\r\n"), "release")
                    L.count("release")
                elif x < 0.77:
                    r = c.cmd("bury %d %d" % (jid, rnd.randrange(3)))
                    self.expect(r, (b"BURIED\r\n", b"NOT_FOUND\r\n"), "bury")
                    L.count("bury")
                elif x < 0.82:
                    r = c.cmd("touch %d" % jid)
                    self.expect(r, (b"TOUCHED\r\n", b"NOT_FOUND\r\n"), "touch")
                    self.delete(c, jid)
                elif x < 0.95:
                    L.count("hold")  # keep it reserved: it comes back at its TTR
                else:
                    # vanish while holding jobs (and maybe mid-command)
                    if rnd.random() < 0.3:
                        c.send(b"release %d 0" % jid)
                    (rst_close(c.sock) if rnd.random() < 0.5 else c.close())
                    c = None
                    L.count("consumer-abort")
        except Exception as e:  # noqa: BLE001
            L.error("consumer %d: %r" % (k, e))
        finally:
            if c:
                c.close()

    def kicker(self):
        rnd = random.Random(3000)
        L = self.ledger
        try:
            c = self.server.connect(timeout=30)
            while not self.stop.is_set():
                time.sleep(0.02)
                x = rnd.random()
                if x < 0.6:
                    c.cmd("use " + rnd.choice(TUBES))
                    r = c.cmd("kick %d" % rnd.choice((1, 10, 100, 4294967295)))
                    self.expect(r[:7], (b"KICKED ",), "kick")
                    L.count("kick")
                elif x < 0.9:
                    with L.lock:
                        ids = list(L.bodies)[-2000:]
                    if ids:
                        r = c.cmd("kick-job %d" % rnd.choice(ids))
                        self.expect(r, (b"KICKED\r\n", b"NOT_FOUND\r\n"), "kick-job")
                elif x < 0.95:
                    r = c.cmd("pause-tube %s %d" % (rnd.choice(TUBES), rnd.choice((0, 1))))
                    self.expect(r, (b"PAUSED\r\n", b"NOT_FOUND\r\n"), "pause-tube")
                else:
                    r = c.cmd("stats")
                    self.expect(r[:3], (b"OK ",), "stats")
            c.close()
        except Exception as e:  # noqa: BLE001
            L.error("kicker: %r" % (e,))

    def delete(self, c, jid):
        L = self.ledger
        r = c.cmd("delete %d" % jid)
        if r == b"DELETED\r\n":
            with L.lock:
                if jid in L.deleted:
                    L.errors.append("id %d deleted twice" % jid)
                L.deleted.add(jid)
        elif r != b"NOT_FOUND\r\n":  # its TTR ran out and someone else has it
            L.error("delete: %r" % r)

    def expect(self, r, allowed, what):
        if r not in allowed:
            self.ledger.error("%s: %r" % (what, r))

    # ------------------------------------------------------------------ the test

    def test_soak(self):
        pid = self.server.pid
        base = rss_kb(pid)
        L = self.ledger
        threads = [threading.Thread(target=self.producer, args=(k,)) for k in range(PRODUCERS)]
        threads += [threading.Thread(target=self.consumer, args=(k,)) for k in range(CONSUMERS)]
        threads.append(threading.Thread(target=self.kicker))
        for t in threads:
            t.daemon = True
            t.start()
        peak = base
        t_end = time.monotonic() + self.seconds
        while time.monotonic() < t_end and not L.errors:
            time.sleep(0.5)
            peak = max(peak, rss_kb(pid))
            self.assertIsNone(self.server.proc.poll(), "server died")
        self.stop.set()
        for t in threads:
            t.join(timeout=30)
        self.assertFalse(any(t.is_alive() for t in threads), "client threads hung")
        self.assertEqual(L.errors, [])

        checker = self.server.connect(timeout=30)
        self.addCleanup(checker.close)
        self.assertTrue(wait_stat(checker, "current-connections", 1, 10))
        st = parse_yaml(checker.cmd("stats"))
        self.assertEqual(st["current-jobs-reserved"], "0")

        # every delivery carried the body put under that id
        wrong = [(jid, body[:40]) for jid, body in L.seen if L.bodies.get(jid) != body]
        self.assertEqual(wrong[:5], [])
        # every job put is deleted exactly once (checked as it happened) or still there
        live = sorted(set(L.bodies) - L.deleted)
        self.assertTrue(L.deleted <= set(L.bodies), "deleted ids never inserted")
        self.assertEqual(int(st["total-jobs"]), len(L.bodies))
        counted = sum(int(st[k]) for k in ("current-jobs-ready", "current-jobs-delayed",
                                          "current-jobs-buried", "current-jobs-reserved"))
        self.assertEqual(counted, len(live))
        per_tube = 0
        for t in TUBES:
            r = checker.cmd("stats-tube " + t)
            if r.startswith(b"OK "):
                per_tube += int(parse_yaml(r)["current-jobs-ready"]) + \
                    int(parse_yaml(r)["current-jobs-delayed"]) + \
                    int(parse_yaml(r)["current-jobs-buried"])
        self.assertEqual(per_tube, len(live))
        ids = sorted(L.bodies)
        for i in range(0, len(ids), 500):
            batch = ids[i:i + 500]
            checker.send(b"".join(b"peek %d\r\n" % j for j in batch))
            for j in batch:
                r = checker.read_reply()
                if j in L.deleted:
                    self.assertEqual(r, b"NOT_FOUND\r\n", j)
                else:
                    body = L.bodies[j]
                    self.assertEqual(r, b"FOUND %d %d\r\n%s\r\n" % (j, len(body), body), j)
        # ids never handed out as INSERTED (puts cut off mid-body) hold no job
        top = max(ids) if ids else 0
        for j in range(1, top + 1):
            if j not in L.bodies:
                self.assertEqual(checker.cmd("peek %d" % j), b"NOT_FOUND\r\n", j)

        # delete everything left; the server's memory goes back near its baseline
        for i in range(0, len(live), 500):
            batch = live[i:i + 500]
            checker.send(b"".join(b"delete %d\r\n" % j for j in batch))
            for j in batch:
                self.assertEqual(checker.read_reply(), b"DELETED\r\n", j)
        st = parse_yaml(checker.cmd("stats"))
        self.assertEqual([st[k] for k in ("current-jobs-ready", "current-jobs-delayed",
                                          "current-jobs-buried", "current-jobs-reserved",
                                          "current-tubes", "current-connections")],
                         ["0", "0", "0", "0", "1", "1"])
        time.sleep(0.5)
        end = rss_kb(pid)
        print("\nsoak: %.0fs, %d jobs put, %d deleted by consumers, %d left at the end; %s; "
              "server RSS %d KiB at start, peak %d KiB, %d KiB after deleting everything%s"
              % (self.seconds, len(L.bodies), len(L.deleted), len(live),
                 ", ".join("%s %d" % kv for kv in sorted(L.counts.items())),
                 base, peak, end, " (ASan)" if self.sanitized else ""), file=sys.stderr)
        self.assertGreater(len(L.bodies), 1000)
        # Freed job memory is reused, never accumulated: after deleting everything RSS is
        # not above the peak of the run. (Whether it goes back near the baseline is
        # TestMemoryReturn's expected failure below.)
        if not self.sanitized:  # ASan's quarantine of freed blocks grows meanwhile
            self.assertLess(end, peak + 4 * 1024, "RSS grew after deleting everything")


class TestMemoryReturn(unittest.TestCase):
    # Memory of deleted jobs goes back to the OS: the server trims glibc's heap once job
    # memory has fallen to half of its high-water mark (before, RSS stayed at ~20-25 MB here).
    def test_rss_returns_near_baseline_after_deleting_everything(self):
        with Server() as srv:
            if is_sanitized(srv.pid):
                self.skipTest("ASan's quarantine keeps freed memory: not measurable")
            c = srv.connect(timeout=30)
            try:
                base = rss_kb(srv.pid)
                rnd = random.Random(1)
                n = 20000
                c.send(b"".join(b"put 0 0 60 %d\r\n%s\r\n" % (k, b"x" * k)
                                for k in (rnd.randrange(0, BODY_MAX) for _ in range(n))))
                for i in range(n):
                    self.assertEqual(c.read_reply(), b"INSERTED %d\r\n" % (i + 1))
                peak = rss_kb(srv.pid)
                for first in range(1, n + 1, 500):
                    ids = range(first, min(n + 1, first + 500))
                    c.send(b"".join(b"delete %d\r\n" % j for j in ids))
                    for j in ids:
                        self.assertEqual(c.read_reply(), b"DELETED\r\n")
                time.sleep(0.3)
                end = rss_kb(srv.pid)
                print("\nRSS %d KiB at start, %d KiB with %d jobs, %d KiB after deleting them"
                      % (base, peak, n, end), file=sys.stderr)
                self.assertGreater(peak - base, 10 * 1024)
                self.assertLess(end - base, 8 * 1024)
            finally:
                c.close()


if __name__ == "__main__":
    unittest.main()

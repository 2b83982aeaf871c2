"""Several stalkd front ends on one redis-server (one --store-prefix): one queue, whichever
front end a client uses (REDIS-STORE.md §2.9-2.11). Jobs, ids, tube stats and pauses are
shared; a put on one front end wakes a reserve waiting on another; reservations of a closed
connection come back at once, those of a SIGKILLed front end after its lease; delays and TTRs
fire when the front end that set them is gone.

Run: python3 -m unittest -v tests/redis/test_frontends.py
"""
import os
import statistics
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storecase import StoreCase, redis_fixture  # noqa: E402
from beanstalk import parse_yaml, stats_of, wait_until  # noqa: E402


def job_state(c, jid):
    r = c.cmd("stats-job %d" % jid)
    return parse_yaml(r)["state"] if r.startswith(b"OK ") else r


class FrontEndsCase(StoreCase):
    """One redis-server and a prefix for the test; front ends on both."""

    def setUp(self):
        super().setUp()
        self.r = self.redis()
        self.prefix = redis_fixture.unique_prefix()

    def fe(self, *args, lease=None):
        return self.front_end(self.r.url(), self.prefix, *args, lease=lease)


class TestSharedQueue(FrontEndsCase):
    def test_put_on_a_is_reserved_on_b(self):
        a, b = self.fe(), self.fe()
        ca, cb = self.client(a), self.client(b)
        self.assertEqual(ca.put("hello", pri=5), b"INSERTED 1\r\n")
        self.assertEqual(cb.cmd("reserve-with-timeout 5"), b"RESERVED 1 5\r\nhello\r\n")
        self.assertEqual(job_state(ca, 1), "reserved")
        self.assertEqual(ca.cmd("delete 1"), b"NOT_FOUND\r\n")   # B holds it, not A's client
        self.assertEqual(cb.cmd("delete 1"), b"DELETED\r\n")
        self.assertEqual(ca.cmd("peek 1"), b"NOT_FOUND\r\n")

    def test_ids_are_shared_by_three_front_ends(self):
        fes = [self.fe() for _ in range(3)]
        cs = [self.client(f) for f in fes]
        got = [cs[i % 3].put("j%d" % i) for i in range(9)]
        self.assertEqual(got, [b"INSERTED %d\r\n" % i for i in range(1, 10)])
        for i in range(9):   # every job seen from every front end
            self.assertEqual(cs[(i + 1) % 3].cmd("peek %d" % (i + 1)),
                             b"FOUND %d 2\r\nj%d\r\n" % (i + 1, i))

    def test_order_by_priority_then_id_across_front_ends(self):
        a, b = self.fe(), self.fe()
        ca, cb = self.client(a), self.client(b)
        ca.put("a-low", pri=10)     # 1
        cb.put("b-high", pri=1)     # 2
        ca.put("a-high", pri=1)     # 3
        got = [cb.cmd("reserve-with-timeout 0") for _ in range(3)]
        self.assertEqual(got, [b"RESERVED 2 6\r\nb-high\r\n", b"RESERVED 3 6\r\na-high\r\n",
                               b"RESERVED 1 5\r\na-low\r\n"])

    def test_stats_tube_on_b_sees_a_jobs(self):
        a, b = self.fe(), self.fe()
        ca, cb = self.client(a), self.client(b)
        ca.cmd("use shared")
        ca.put("r1")
        ca.put("r2", pri=2000)
        ca.put("d", delay=100)
        ca.put("b")
        cw = self.client(a)
        cw.cmd("watch shared")
        self.assertEqual(cw.cmd("reserve-with-timeout 0"), b"RESERVED 1 2\r\nr1\r\n")
        self.assertEqual(cw.cmd("reserve-with-timeout 0"), b"RESERVED 4 1\r\nb\r\n")
        self.assertEqual(cw.cmd("bury 4 0"), b"BURIED\r\n")
        st = stats_of(cb, "stats-tube shared")
        self.assertEqual({k: st[k] for k in ("current-jobs-urgent", "current-jobs-ready",
                                             "current-jobs-reserved", "current-jobs-delayed",
                                             "current-jobs-buried", "total-jobs")},
                         {"current-jobs-urgent": "0", "current-jobs-ready": "1",
                          "current-jobs-reserved": "1", "current-jobs-delayed": "1",
                          "current-jobs-buried": "1", "total-jobs": "4"})
        self.assertIn(b"- shared\n", cb.cmd("list-tubes"))
        # `stats` job counts are shared too (aggregated within about 1 s, §2.12).
        self.assertTrue(wait_until(lambda: stats_of(cb, "stats")["current-jobs-buried"] == "1"
                                   and stats_of(cb, "stats")["total-jobs"] == "4", 30.0),
                        stats_of(cb, "stats"))

    def test_pause_tube_from_a_holds_reserves_on_b(self):
        a, b = self.fe(), self.fe()
        ca, cb = self.client(a), self.client(b)
        ca.put("x")
        # t0 before the pause is sent: the time from t0 to the RESERVED can only be longer
        # than the server's pause, however slow the machine (a lower bound the protocol
        # defines; no upper one: the reserve's timeout only bounds a hang).
        t0 = time.monotonic()
        self.assertEqual(ca.cmd("pause-tube default 2"), b"PAUSED\r\n")
        st = stats_of(cb, "stats-tube default")
        self.assertEqual((st["pause"], st["cmd-pause-tube"]), ("2", "1"))
        self.assertEqual(cb.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertEqual(cb.cmd("reserve-with-timeout 60"), b"RESERVED 1 1\r\nx\r\n")
        el = time.monotonic() - t0
        print("\npause 2 s set on A: B reserved after %.2fs" % el, file=sys.stderr)
        self.assertGreaterEqual(el, 1.9, "the pause ended early")


class TestWakeUp(FrontEndsCase):
    def test_reserve_waiting_on_b_is_woken_by_a_put_on_a(self):
        a, b = self.fe(), self.fe()
        ca, cb = self.client(a), self.client(b, timeout=60.0)
        latencies = []
        for i in range(5):
            # A plain reserve (no timeout): only the wake-up can answer it; the client's
            # read timeout (60 s) bounds a hang.
            cb.send("reserve\r\n")
            self.assertTrue(cb.no_reply_within(0.3))
            t0 = time.monotonic()
            self.assertEqual(ca.put("w%d" % i), b"INSERTED %d\r\n" % (i + 1))
            self.assertEqual(cb.read_reply(), b"RESERVED %d 2\r\nw%d\r\n" % (i + 1, i))
            latencies.append(time.monotonic() - t0)
            self.assertEqual(cb.cmd("delete %d" % (i + 1)), b"DELETED\r\n")
        print("\nwake-up across front ends (put on A sent -> RESERVED on B): median %.1f ms, "
              "max %.1f ms" % (1000 * statistics.median(latencies), 1000 * max(latencies)),
              file=sys.stderr)

    def test_one_put_wakes_one_of_two_waiters_on_other_front_ends(self):
        a, b, c = self.fe(), self.fe(), self.fe()
        ca, cb, cc = self.client(a), self.client(b, 90.0), self.client(c, 90.0)
        cb.send("reserve-with-timeout 60\r\n")
        cc.send("reserve-with-timeout 60\r\n")
        self.assertTrue(cb.no_reply_within(0.3))
        self.assertTrue(cc.no_reply_within(0.01))
        ca.put("one")
        woken = wait_until(lambda: [w for w in (cb, cc) if not w.no_reply_within(0.02)], 60.0)
        self.assertEqual(len(woken), 1, "one job, one waiter")
        other = cc if woken[0] is cb else cb
        self.assertEqual(woken[0].read_reply(), b"RESERVED 1 3\r\none\r\n")
        self.assertTrue(other.no_reply_within(0.3))
        ca.put("two")
        self.assertEqual(other.read_reply(), b"RESERVED 2 3\r\ntwo\r\n")

    def test_waiter_watching_a_tube_is_woken_by_a_put_into_it(self):
        a, b = self.fe(), self.fe()
        ca, cb = self.client(a), self.client(b, 90.0)
        cb.cmd("watch mail")
        cb.cmd("ignore default")
        cb.send("reserve-with-timeout 60\r\n")
        self.assertTrue(cb.no_reply_within(0.3))
        ca.put("elsewhere")                      # default: B's waiter does not watch it
        self.assertTrue(cb.no_reply_within(0.3))
        ca.put("mail!", tube="mail")
        self.assertEqual(cb.read_reply(), b"RESERVED 2 5\r\nmail!\r\n")


class TestReservationsComeBack(FrontEndsCase):
    def test_closed_connection_on_a_releases_at_once(self):
        # A stays up (its lease is renewed) and the TTR is 1 hour: only the close can give
        # the job back before the reserve's 60 s (which only bounds a hang).
        a, b = self.fe(), self.fe()
        ca, cb = self.client(a), self.client(b, timeout=90.0)
        cb.put("held", ttr=3600)
        self.assertEqual(ca.cmd("reserve-with-timeout 0"), b"RESERVED 1 4\r\nheld\r\n")
        t0 = time.monotonic()
        ca.close()
        self.assertEqual(cb.cmd("reserve-with-timeout 60"), b"RESERVED 1 4\r\nheld\r\n")
        el = time.monotonic() - t0
        print("\nclosed connection on A: job reserved on B after %.1f ms" % (1000 * el),
              file=sys.stderr)
        self.assertEqual(parse_yaml(cb.cmd("stats-job 1"))["timeouts"], "0")

    def test_killed_front_end_reservations_come_back_after_its_lease(self):
        # TTR 1 hour: only the lease's end gives them back before the reserves' 60 s (which
        # only bound a hang); none counts as a timeout.
        lease_ms = 1000
        a, b = self.fe(lease=lease_ms), self.fe(lease=lease_ms)
        ca, cb = self.client(a), self.client(b, timeout=90.0)
        for i in range(3):
            cb.put("job%d" % i, ttr=3600)
        got = [ca.cmd("reserve-with-timeout 0") for _ in range(3)]
        self.assertEqual(got, [b"RESERVED %d 4\r\njob%d\r\n" % (i + 1, i) for i in range(3)])
        t0 = time.monotonic()
        self.kill(a)
        back = [cb.cmd("reserve-with-timeout 60") for _ in range(3)]
        el = time.monotonic() - t0
        self.assertEqual(sorted(back), [b"RESERVED %d 4\r\njob%d\r\n" % (i + 1, i)
                                        for i in range(3)])
        print("\nfront end SIGKILLed holding 3 reservations (ttr 3600, lease %d ms): "
              "back on B after %.2fs" % (lease_ms, el), file=sys.stderr)
        for i in range(3):
            self.assertEqual(parse_yaml(cb.cmd("stats-job %d" % (i + 1)))["timeouts"], "0")

    def test_killed_front_end_reservations_come_back_after_a_detached_one(self):
        # A detached reservation lists nothing with the front end; the connection's next,
        # ordinary reservation must still be listed, so the lease's end gives it back.
        a, b = self.fe(lease=1000), self.fe(lease=1000)
        ca, cb = self.client(a), self.client(b)
        cb.put("d", ttr=3600)
        cb.put("x", ttr=3600)
        self.assertEqual(ca.cmd("reserve-ext 0 detached"), b"RESERVED-MANY 1\r\n")
        ca.read_reply()
        self.assertEqual(ca.cmd("reserve-with-timeout 0"), b"RESERVED 2 1\r\nx\r\n")
        self.kill(a)
        cb.sock.settimeout(90.0)
        self.assertEqual(cb.cmd("reserve-with-timeout 60"), b"RESERVED 2 1\r\nx\r\n")

    def test_ttr_expiry_after_the_reserving_front_end_is_killed(self):
        # A lease of 1 hour: only the TTR (1 s) can bring the job back before the reserve's
        # 60 s (which only bounds a hang), and it is counted as a timeout.
        a, b = self.fe(lease=3600000), self.fe(lease=3600000)
        ca, cb = self.client(a), self.client(b, timeout=90.0)
        cb.put("short", ttr=1)
        self.assertEqual(ca.cmd("reserve-with-timeout 0"), b"RESERVED 1 5\r\nshort\r\n")
        t0 = time.monotonic()
        self.kill(a)
        self.assertEqual(cb.cmd("reserve-with-timeout 60"), b"RESERVED 1 5\r\nshort\r\n")
        el = time.monotonic() - t0
        print("\nTTR 1 s, reserving front end SIGKILLed: back on B after %.2fs" % el,
              file=sys.stderr)
        self.assertEqual(parse_yaml(cb.cmd("stats-job 1"))["timeouts"], "1")

    def test_delayed_jobs_put_through_a_fire_when_a_is_killed(self):
        # t0 before the puts: a delay is a lower bound the protocol defines, which no
        # slowness can break; no upper bound (the reserves' 60 s only bound a hang).
        a, b = self.fe(lease=1000), self.fe(lease=1000)
        ca, cb = self.client(a), self.client(b, timeout=90.0)
        t0 = time.monotonic()
        for d in (1, 2, 3):
            self.assertEqual(ca.put("d%d" % d, delay=d), b"INSERTED %d\r\n" % d)
        self.kill(a)
        late = []
        for d in (1, 2, 3):
            self.assertEqual(cb.cmd("reserve-with-timeout 60"), b"RESERVED %d 2\r\nd%d\r\n"
                             % (d, d))
            el = time.monotonic() - t0
            self.assertGreater(el, d - 0.05, "delay %d s fired early" % d)
            late.append(el - d)
        print("\ndelays 1/2/3 s put on A, A SIGKILLed, reserved on B: late by %s s"
              % ", ".join("%.2f" % x for x in late), file=sys.stderr)


if __name__ == "__main__":
    unittest.main()

"""Black-box tests: delays, reserve-with-timeout, pause-tube (time-based behaviour).

Timing assertions are deliberately loose (delays of 1-2 s, upper bounds at most ~1.5 s past
the expected time) so they hold on a loaded 2-core machine.

Run: python3 -m unittest -v tests/blackbox/test_timing.py
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import (ServerCase, nth_id, parse_yaml, wait_job_stat, wait_stat,  # noqa: E402
                       wait_tube_stat)

SLACK = 1.5  # how late a timed event may be


class TestDelay(ServerCase):
    def test_delayed_job_becomes_ready(self):
        c = self.client()
        t0 = time.monotonic()
        c.put("later", delay=1)
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertEqual(c.cmd("peek-ready"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek-delayed"), b"FOUND %d 5\r\nlater\r\n" % nth_id(1))
        self.assertEqual(c.cmd("reserve-with-timeout 5"), b"RESERVED %d 5\r\nlater\r\n" % nth_id(1))
        self.assertElapsed(t0, 0.9, 1 + SLACK)

    def test_blocking_reserve_gets_delayed_job(self):
        w, p = self.client(), self.client()
        t0 = time.monotonic()
        p.put("d", delay=1)
        w.send("reserve\r\n")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nd\r\n" % nth_id(1))
        self.assertElapsed(t0, 0.9, 1 + SLACK)

    def test_delayed_jobs_become_ready_in_deadline_order(self):
        c = self.client()
        c.put("two", delay=2)   # 1
        c.put("one", delay=1)   # 2
        c.put("now")            # 3
        self.assertEqual(c.cmd("peek-delayed"), b"FOUND %d 3\r\none\r\n" % nth_id(2))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 3\r\nnow\r\n" % nth_id(3))
        t0 = time.monotonic()
        self.assertEqual(c.cmd("reserve-with-timeout 5"), b"RESERVED %d 3\r\none\r\n" % nth_id(2))
        self.assertEqual(c.cmd("reserve-with-timeout 5"), b"RESERVED %d 3\r\ntwo\r\n" % nth_id(1))
        self.assertElapsed(t0, 1.5, 2 + SLACK)

    def test_delay_state_and_counts_change_when_ready(self):
        c = self.client()
        c.put("x", delay=1)
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual((st["current-jobs-delayed"], st["current-jobs-ready"]), ("1", "0"))
        self.assertTrue(wait_job_stat(c, nth_id(1), "state", "ready", timeout=1 + SLACK + 1))
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual((st["current-jobs-delayed"], st["current-jobs-ready"]), ("0", "1"))
        self.assertEqual(c.cmd("peek-ready"), b"FOUND %d 1\r\nx\r\n" % nth_id(1))

    def test_release_with_delay(self):
        c = self.client()
        c.put("x")
        c.cmd("reserve")
        t0 = time.monotonic()
        self.assertEqual(c.cmd("release %d 0 1" % nth_id(1)), b"RELEASED\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t0, 0.9, 1 + SLACK)

    def test_kicked_delayed_job_is_ready_at_once(self):
        c = self.client()
        c.put("x", delay=100)
        self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))


class TestReserveWithTimeout(ServerCase):
    def test_times_out(self):
        c = self.client()
        t0 = time.monotonic()
        self.assertEqual(c.cmd("reserve-with-timeout 1"), b"TIMED_OUT\r\n")
        self.assertElapsed(t0, 0.9, 1 + SLACK)
        # connection still usable, no longer waiting
        self.assertEqual(parse_yaml(c.cmd("stats"))["current-waiting"], "0")

    def test_zero_is_immediate(self):
        c = self.client()
        t0 = time.monotonic()
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertElapsed(t0, 0, 0.8)

    def test_served_by_later_put(self):
        w, p = self.client(), self.client()
        w.send("reserve-with-timeout 5\r\n")
        self.assertTrue(wait_stat(p, "current-waiting", 1))
        t0 = time.monotonic()
        self.assertEqual(p.put("hi"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(w.read_reply(), b"RESERVED %d 2\r\nhi\r\n" % nth_id(1))
        self.assertElapsed(t0, 0, 1.0)

    def test_served_by_release_of_another_connection(self):
        a, w = self.client(), self.client()
        a.put("x")
        a.cmd("reserve")
        w.send("reserve-with-timeout 5\r\n")
        self.assertTrue(wait_stat(a, "current-waiting", 1))
        self.assertEqual(a.cmd("release %d 0 0" % nth_id(1)), b"RELEASED\r\n")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))

    def test_served_by_kick(self):
        a, w = self.client(), self.client()
        a.put("x")
        a.cmd("reserve")
        a.cmd("bury %d 0" % nth_id(1))
        w.send("reserve-with-timeout 5\r\n")
        self.assertTrue(wait_stat(a, "current-waiting", 1))
        self.assertEqual(a.cmd("kick-job %d" % nth_id(1)), b"KICKED\r\n")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))

    def test_served_by_watch_of_nonempty_tube(self):
        # a job in a tube the waiting client does not watch is not given to it
        w, p = self.client(), self.client()
        w.send("reserve-with-timeout 1\r\n")
        self.assertTrue(wait_stat(p, "current-waiting", 1))
        p.put("x", tube="other")
        self.assertEqual(w.read_reply(), b"TIMED_OUT\r\n")
        self.assertEqual(w.cmd("watch other"), b"WATCHING 2\r\n")
        self.assertEqual(w.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1, "other"))

    def test_waiting_client_commands_are_queued(self):
        # a pipelined command after a blocking reserve is answered after the reserve
        w, p = self.client(), self.client()
        w.send("reserve-with-timeout 5\r\nlist-tube-used\r\n")
        self.assertTrue(w.no_reply_within(0.4))
        p.put("x")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(w.read_reply(), b"USING default\r\n")


class TestPauseTube(ServerCase):
    def test_pause_holds_waiting_reserve_until_pause_ends(self):
        c, w = self.client(), self.client()
        c.put("x")
        t0 = time.monotonic()
        self.assertEqual(c.cmd("pause-tube default 1"), b"PAUSED\r\n")
        w.send("reserve-with-timeout 5\r\n")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t0, 0.9, 1 + SLACK)

    def test_put_into_paused_tube_waits(self):
        c, w = self.client(), self.client()
        c.cmd("pause-tube default 2")
        w.send("reserve\r\n")
        self.assertTrue(wait_stat(c, "current-waiting", 1))
        t0 = time.monotonic()
        c.put("x")
        self.assertTrue(w.no_reply_within(0.7))
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t0, 0.9, 2 + SLACK)

    def test_unpause_serves_waiting_client_best_job_first(self):
        c, w = self.client(), self.client()
        c.cmd("pause-tube default 1")
        c.put("p5", pri=5)    # 1
        c.put("p3", pri=3)    # 2
        c.put("p3b", pri=3)   # 3
        w.send("reserve\r\n")
        self.assertEqual(w.read_reply(), b"RESERVED %d 2\r\np3\r\n" % nth_id(2))
        self.assertEqual(w.cmd("reserve-with-timeout 0"), b"RESERVED %d 3\r\np3b\r\n" % nth_id(3))
        self.assertEqual(w.cmd("reserve-with-timeout 0"), b"RESERVED %d 2\r\np5\r\n" % nth_id(1))

    def test_pause_stats(self):
        c = self.client()
        c.cmd("pause-tube default 2")
        st = parse_yaml(c.cmd("stats-tube default"))
        self.assertEqual(st["pause"], "2")
        self.assertIn(st["pause-time-left"], ("1", "2"))
        self.assertTrue(wait_tube_stat(c, "default", "pause", 0, timeout=2 + SLACK + 1),
                        "pause never ended")
        st = parse_yaml(c.cmd("stats-tube default"))
        self.assertEqual(st["pause-time-left"], "0")
        self.assertEqual(st["cmd-pause-tube"], "1")

    def test_reserve_with_timeout_on_paused_tube_times_out(self):
        c = self.client()
        c.put("x")
        c.cmd("pause-tube default 3")
        t0 = time.monotonic()
        self.assertEqual(c.cmd("reserve-with-timeout 1"), b"TIMED_OUT\r\n")
        self.assertElapsed(t0, 0.9, 1 + SLACK)

    def test_repause_extends(self):
        c, w = self.client(), self.client()
        c.put("x")
        c.cmd("pause-tube default 1")
        # Not synchronisation but the subject: the second pause-tube comes halfway through
        # the first pause. A server that kept the first pause, or counted the new one from
        # the first one's start, would serve the job 0.5 s or 1.5 s after t0, not >= 1.8 s.
        time.sleep(0.5)
        t0 = time.monotonic()
        c.cmd("pause-tube default 2")
        self.assertEqual(w.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t0, 1.8, 2 + SLACK)


if __name__ == "__main__":
    unittest.main()

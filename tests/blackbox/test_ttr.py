"""Black-box tests: time-to-run (TTR), DEADLINE_SOON safety margin, touch, TTR expiry.

Run: python3 -m unittest -v tests/blackbox/test_ttr.py
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import is_beanstalkd, nth_id, parse_yaml, wait_job_stat  # noqa: E402

SLACK = 1.5  # how late a timed event may be


class ServerCase(beanstalk.ServerCase):
    """beanstalk.ServerCase plus helpers only this file uses."""

    def require_ttr_release(self):
        """Skip on beanstalkd 1.12: it intermittently never releases a silent worker's job
        at its TTR (beanstalkd issues #262/#380; about half the runs here). stalkd must."""
        if is_beanstalkd():
            self.skipTest("beanstalkd 1.12 can miss TTR releases (issues #262, #380)")


class TestTtrExpiry(ServerCase):
    def test_job_released_when_ttr_expires(self):
        self.require_ttr_release()
        a, b = self.client(), self.client()
        a.put("x", ttr=1)
        t0 = time.monotonic()
        self.assertEqual(a.cmd("reserve"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t0, 0.9, 1 + SLACK)
        st = self.job_stats(b, nth_id(1))
        self.assertEqual((st["timeouts"], st["reserves"], st["releases"]), ("1", "2", "0"))
        self.assertEqual(parse_yaml(b.cmd("stats"))["job-timeouts"], "1")
        # the first worker lost the job
        self.assertEqual(a.cmd("delete %d" % nth_id(1)), b"NOT_FOUND\r\n")
        self.assertEqual(a.cmd("touch %d" % nth_id(1)), b"NOT_FOUND\r\n")
        self.assertEqual(a.cmd("release %d 0 0" % nth_id(1)), b"NOT_FOUND\r\n")
        self.assertEqual(a.cmd("bury %d 0" % nth_id(1)), b"NOT_FOUND\r\n")
        self.assertEqual(b.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")

    def test_ttr_zero_behaves_as_one_second(self):
        self.require_ttr_release()
        a, b = self.client(), self.client()
        a.put("x", ttr=0)
        t0 = time.monotonic()
        a.cmd("reserve")
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t0, 0.9, 1 + SLACK)

    def test_timed_out_job_keeps_priority_order(self):
        self.require_ttr_release()
        a, b = self.client(), self.client()
        a.put("low", pri=10, ttr=1)   # 1
        a.put("high", pri=1, ttr=1)   # 2
        self.assertEqual(a.cmd("reserve"), b"RESERVED %d 4\r\nhigh\r\n" % nth_id(2))
        time.sleep(1 + SLACK)
        # job 2 timed out and is ready again; it beats job 1 on priority
        self.assertEqual(b.cmd("reserve-with-timeout 0"), b"RESERVED %d 4\r\nhigh\r\n" % nth_id(2))

    def test_time_left_counts_down(self):
        c = self.client()
        c.put("x", ttr=3)
        c.cmd("reserve")
        self.assertIn(self.job_stats(c, nth_id(1))["time-left"], ("2", "3"))
        time.sleep(1.2)
        self.assertIn(self.job_stats(c, nth_id(1))["time-left"], ("0", "1"))


class TestDeadlineSoon(ServerCase):
    def test_reserve_inside_safety_margin(self):
        c = self.client()
        c.put("x", ttr=1)
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(c.cmd("reserve"), b"DEADLINE_SOON\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 5"), b"DEADLINE_SOON\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"DEADLINE_SOON\r\n")
        # DEADLINE_SOON is not a release: the job is still ours
        self.assertEqual(c.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")

    def test_margin_reached_while_waiting(self):
        c = self.client()
        c.put("x", ttr=2)
        t0 = time.monotonic()
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(c.cmd("reserve"), b"DEADLINE_SOON\r\n")
        self.assertElapsed(t0, 0.8, 1 + SLACK)
        self.assertEqual(self.job_stats(c, nth_id(1))["state"], "reserved")
        self.assertEqual(c.cmd("touch %d" % nth_id(1)), b"TOUCHED\r\n")

    def test_margin_reached_while_waiting_with_timeout(self):
        c = self.client()
        c.put("x", ttr=2)
        t0 = time.monotonic()
        c.cmd("reserve")
        self.assertEqual(c.cmd("reserve-with-timeout 10"), b"DEADLINE_SOON\r\n")
        self.assertElapsed(t0, 0.8, 1 + SLACK)

    def test_ready_job_wins_over_deadline_soon(self):
        c = self.client()
        c.put("a", ttr=1)
        c.put("b", ttr=1)
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d 1\r\na\r\n" % nth_id(1))
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d 1\r\nb\r\n" % nth_id(2))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"DEADLINE_SOON\r\n")

    def test_reserve_job_never_answers_deadline_soon(self):
        c = self.client()
        c.put("a", ttr=1)
        c.put("b", ttr=1, delay=100)
        c.cmd("reserve")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"DEADLINE_SOON\r\n")
        self.assertEqual(c.cmd("reserve-job %d" % nth_id(2)), b"RESERVED %d 1\r\nb\r\n" % nth_id(2))

    def test_no_deadline_soon_outside_margin(self):
        c = self.client()
        c.put("x", ttr=10)
        c.cmd("reserve")
        self.assertEqual(c.cmd("reserve-with-timeout 1"), b"TIMED_OUT\r\n")

    def test_other_connections_unaffected(self):
        a, b = self.client(), self.client()
        a.put("x", ttr=1)
        a.cmd("reserve")
        self.assertEqual(b.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")


class TestTouch(ServerCase):
    def test_touch_postpones_release(self):
        a, b = self.client(), self.client()
        a.put("x", ttr=2)
        t0 = time.monotonic()
        a.cmd("reserve")
        time.sleep(1.2)
        self.assertEqual(a.cmd("touch %d" % nth_id(1)), b"TOUCHED\r\n")
        t1 = time.monotonic()
        time.sleep(max(0.0, 2.5 - (t1 - t0)))  # past the original deadline
        self.assertEqual(self.job_stats(b, nth_id(1))["state"], "reserved")
        self.assertEqual(self.job_stats(b, nth_id(1))["timeouts"], "0")
        if is_beanstalkd():
            return  # 1.12 may never release it (issues #262, #380)
        # released 2 s after the touch
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t1, 1.9, 2 + SLACK)

    def test_touch_resets_time_left(self):
        c = self.client()
        c.put("x", ttr=3)
        c.cmd("reserve")
        time.sleep(1.2)
        self.assertIn(self.job_stats(c, nth_id(1))["time-left"], ("0", "1"))
        c.cmd("touch %d" % nth_id(1))
        self.assertIn(self.job_stats(c, nth_id(1))["time-left"], ("2", "3"))

    def test_touch_after_deadline_soon(self):
        c = self.client()
        c.put("x", ttr=2)
        c.cmd("reserve")
        self.assertEqual(c.cmd("reserve"), b"DEADLINE_SOON\r\n")
        self.assertEqual(c.cmd("touch %d" % nth_id(1)), b"TOUCHED\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")


class TestSilentWorker(ServerCase):
    """A reserved job whose worker stays silent is released at its TTR, every time."""

    def test_silent_after_plain_reserve(self):
        self.require_ttr_release()
        w, o = self.client(), self.client()
        o.put("x", ttr=1)
        self.assertEqual(w.cmd("reserve"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertTrue(wait_job_stat(o, nth_id(1), "state", "ready", 1 + SLACK + 0.5))

    def test_silent_after_reserve_with_longer_timeout(self):
        # beanstalkd PR #174: a pending reserve timeout must not delay the TTR release
        self.require_ttr_release()
        w, o = self.client(), self.client()
        o.put("x", ttr=1)
        self.assertEqual(w.cmd("reserve-with-timeout 10"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertTrue(wait_job_stat(o, nth_id(1), "state", "ready", 1 + SLACK + 0.5))

    def test_released_every_time(self):
        self.require_ttr_release()
        w, o = self.client(), self.client()
        o.put("x", ttr=1)
        for i in range(3):
            self.assertEqual(w.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1), i)
            self.assertTrue(wait_job_stat(o, nth_id(1), "state", "ready", 1 + SLACK + 0.5), i)
        self.assertEqual(self.job_stats(o, nth_id(1))["timeouts"], "3")

    def test_several_jobs_each_released_at_own_ttr(self):
        self.require_ttr_release()
        w, o = self.client(), self.client()
        o.put("a", ttr=2)   # 1
        o.put("b", ttr=1)   # 2
        t0 = time.monotonic()
        w.cmd("reserve")
        w.cmd("reserve")
        self.assertTrue(wait_job_stat(o, nth_id(2), "state", "ready", 1 + SLACK + 0.5))
        self.assertEqual(self.job_stats(o, nth_id(1))["state"], "reserved")
        self.assertTrue(wait_job_stat(o, nth_id(1), "state", "ready", 2 + SLACK + 0.5))
        self.assertElapsed(t0, 1.8, 2 + SLACK + 0.5)
        st = parse_yaml(o.cmd("stats"))
        self.assertEqual((st["job-timeouts"], st["current-jobs-reserved"]), ("2", "0"))

    @beanstalk.embedded_store_only(
        "DEADLINE_SOON by the front end's clock, TTR by Redis' (docs/SCALE-OUT.md)")
    def test_alternating_silent_workers(self):
        self.require_ttr_release()
        a, b = self.client(), self.client()
        a.put("x", ttr=1)
        self.assertEqual(a.cmd("reserve"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        for i in range(2):
            self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1), i)
            self.assertEqual(a.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1), i)
        self.assertEqual(self.job_stats(b, nth_id(1))["timeouts"], "4")


if __name__ == "__main__":
    unittest.main()

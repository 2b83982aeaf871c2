"""Black-box tests: the clock as beanstalkd shows it, on every store.

beanstalkd reports times in whole seconds, rounded down from its nanosecond clock: a TTR of
10 that has just started has `time-left: 9` (some nanoseconds have passed), as has a delay
or a pause of 10 just set. And it hands a delayed job to a waiting reserve when the job
falls due, even when that reserve's own timeout comes a moment later. Two client suites
noticed when stalkd on Redis did otherwise: pheanstalk's testTouch (time-left 10 right
after reserving with TTR 10) and greenstalk's test_delays (a reserve-with-timeout that
should have got a job falling due within it timed out).

These tests assert no duration: each checks an order of events (a value read after a
command, a job due before a reserve's end) that holds on any machine, however loaded. They
run on the embedded store, again on Redis (redis.test_clock) and on a cluster
(cluster.test_clock), and pass against Debian's beanstalkd too
(STALKD_BIN=/usr/bin/beanstalkd).

Run: python3 -m unittest -v tests/blackbox/test_clock.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import ServerCase, inserted_id, reserved, stats_of  # noqa: E402


class TestWholeSecondsRoundedDown(ServerCase):
    """Every time field of stats-job and stats-tube just after the event that set it."""

    def test_time_left_right_after_reserve(self):
        # pheanstalk's testTouch: put with TTR 10, reserve, stats-job at once.
        c = self.client()
        jid = inserted_id(c.put("x", ttr=10))
        self.assertEqual(c.cmd("reserve"), reserved(jid, "x"))
        st = self.job_stats(c, jid)
        self.assertEqual((st["state"], st["ttr"], st["time-left"], st["age"], st["delay"]),
                         ("reserved", "10", "9", "0", "0"))

    def test_time_left_right_after_touch(self):
        c = self.client()
        jid = inserted_id(c.put("x", ttr=10))
        self.assertEqual(c.cmd("reserve"), reserved(jid, "x"))
        self.assertEqual(c.cmd("touch %d" % jid), b"TOUCHED\r\n")
        self.assertEqual(self.job_stats(c, jid)["time-left"], "9")

    def test_time_left_right_after_a_delayed_put(self):
        c = self.client()
        jid = inserted_id(c.put("x", delay=10))
        st = self.job_stats(c, jid)
        self.assertEqual((st["state"], st["delay"], st["time-left"], st["age"]),
                         ("delayed", "10", "9", "0"))

    def test_time_left_right_after_a_delayed_release(self):
        c = self.client()
        jid = inserted_id(c.put("x", ttr=100))
        self.assertEqual(c.cmd("reserve"), reserved(jid, "x"))
        self.assertEqual(c.cmd("release %d 0 10" % jid), b"RELEASED\r\n")
        st = self.job_stats(c, jid)
        self.assertEqual((st["state"], st["delay"], st["time-left"], st["ttr"]),
                         ("delayed", "10", "9", "100"))

    def test_time_left_of_ready_and_buried_jobs_is_zero(self):
        c = self.client()
        jid = inserted_id(c.put("x", ttr=10))
        self.assertEqual(self.job_stats(c, jid)["time-left"], "0")
        self.assertEqual(c.cmd("reserve"), reserved(jid, "x"))
        self.assertEqual(c.cmd("bury %d 0" % jid), b"BURIED\r\n")
        st = self.job_stats(c, jid)
        self.assertEqual((st["state"], st["time-left"]), ("buried", "0"))

    def test_ttr_zero_is_one_second(self):
        c = self.client()
        jid = inserted_id(c.put("x", ttr=0))
        self.assertEqual(self.job_stats(c, jid)["ttr"], "1")
        self.assertEqual(c.cmd("reserve"), reserved(jid, "x"))
        # A TTR of one second has less than one second left as soon as it starts.
        self.assertEqual(self.job_stats(c, jid)["time-left"], "0")

    def test_pause_time_left_right_after_pause(self):
        c = self.client()
        self.assertEqual(c.cmd("pause-tube default 10"), b"PAUSED\r\n")
        st = stats_of(c, "stats-tube default")
        self.assertEqual((st["pause"], st["pause-time-left"]), ("10", "9"))

    def test_pause_zero_shows_nothing_left(self):
        c = self.client()
        self.assertEqual(c.cmd("pause-tube default 10"), b"PAUSED\r\n")
        self.assertEqual(c.cmd("pause-tube default 0"), b"PAUSED\r\n")
        st = stats_of(c, "stats-tube default")
        self.assertEqual((st["pause"], st["pause-time-left"]), ("0", "0"))


class TestDelayedJobReachesAWaitingReserve(ServerCase):
    """A delayed job falls due while a reserve waits whose timeout comes only a moment later:
    the reserve gets the job (beanstalkd makes due jobs ready before it times reserves out)."""

    def test_greenstalk_test_delays(self):
        # greenstalk's test_delays, step for step.
        c = self.client()
        jid = inserted_id(c.put("dead", delay=1))
        self.assertEqual(c.cmd("reserve"), reserved(jid, "dead"))
        self.assertEqual(c.cmd("release %d 65536 2" % jid), b"RELEASED\r\n")
        # Due 2 s after the release: the first reserve ends before, the second after it.
        self.assertEqual(c.cmd("reserve-with-timeout 1"), b"TIMED_OUT\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 1"), reserved(jid, "dead"))

    def test_due_just_before_the_reserve_times_out(self):
        # The reserve starts after the put, so its end (1 s on) is after the job's due time.
        for _ in range(3):
            c = self.client()
            jid = inserted_id(c.put("soon", delay=1))
            self.assertEqual(c.cmd("reserve-with-timeout 1"), reserved(jid, "soon"))
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")

    def test_due_just_before_the_reserve_of_another_connection_times_out(self):
        p, w = self.client(), self.client()
        jid = inserted_id(p.put("soon", delay=1))
        self.assertEqual(w.cmd("reserve-with-timeout 1"), reserved(jid, "soon"))


if __name__ == "__main__":
    unittest.main()

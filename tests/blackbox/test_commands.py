"""Black-box tests: every protocol 1.13 command with each of its documented replies.

Run: python3 -m unittest -v tests/blackbox/test_commands.py
The binary under test is $STALKD_BIN (default build/release/stalkd).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import ServerCase, ok_list, parse_yaml  # noqa: E402


class TestPut(ServerCase):
    def test_inserted_ids_are_sequential(self):
        c = self.client()
        self.assertEqual(c.put("a"), b"INSERTED 1\r\n")
        self.assertEqual(c.put("b"), b"INSERTED 2\r\n")
        self.assertEqual(c.put("c"), b"INSERTED 3\r\n")

    def test_ids_are_global_across_connections_and_tubes(self):
        a, b = self.client(), self.client()
        self.assertEqual(a.put("x"), b"INSERTED 1\r\n")
        self.assertEqual(b.put("y", tube="other"), b"INSERTED 2\r\n")
        self.assertEqual(a.put("z"), b"INSERTED 3\r\n")

    def test_body_is_returned_verbatim(self):
        c = self.client()
        body = b"line1\r\nline2\x00\xff\xfe binary \r\n\r\n"
        self.assertEqual(c.put(body), b"INSERTED 1\r\n")
        self.assertEqual(c.cmd("reserve"), b"RESERVED 1 %d\r\n%s\r\n" % (len(body), body))

    def test_empty_body(self):
        c = self.client()
        self.assertEqual(c.cmd(b"put 0 0 10 0\r\n\r\n"), b"INSERTED 1\r\n")
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 0\r\n\r\n")
        self.assertEqual(c.cmd("reserve"), b"RESERVED 1 0\r\n\r\n")

    def test_put_goes_to_used_tube(self):
        c = self.client()
        self.assertEqual(c.cmd("use jobs"), b"USING jobs\r\n")
        self.assertEqual(c.put("x"), b"INSERTED 1\r\n")
        st = self.job_stats(c, 1)
        self.assertIn(st["tube"], ("jobs", '"jobs"'))
        self.assertEqual(st["state"], "ready")
        # default tube untouched: reserve (watching default) finds nothing
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_put_with_delay_is_delayed(self):
        c = self.client()
        self.assertEqual(c.put("x", delay=100), b"INSERTED 1\r\n")
        st = self.job_stats(c, 1)
        self.assertEqual(st["state"], "delayed")
        self.assertEqual(st["delay"], "100")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_put_sets_pri_and_ttr(self):
        c = self.client()
        c.put("x", pri=4294967295, ttr=77)
        st = self.job_stats(c, 1)
        self.assertEqual(st["pri"], "4294967295")
        self.assertEqual(st["ttr"], "77")

    def test_ttr_zero_becomes_one(self):
        c = self.client()
        self.assertEqual(c.put("x", ttr=0), b"INSERTED 1\r\n")
        self.assertEqual(self.job_stats(c, 1)["ttr"], "1")


class TestUse(ServerCase):
    def test_use_replies_using(self):
        c = self.client()
        self.assertEqual(c.cmd("use foo"), b"USING foo\r\n")
        self.assertEqual(c.cmd("list-tube-used"), b"USING foo\r\n")
        self.assertEqual(c.cmd("use default"), b"USING default\r\n")
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")

    def test_use_is_per_connection(self):
        a, b = self.client(), self.client()
        a.cmd("use foo")
        self.assertEqual(b.cmd("list-tube-used"), b"USING default\r\n")

    def test_use_creates_tube(self):
        c = self.client()
        self.assertEqual(c.cmd("stats-tube foo"), b"NOT_FOUND\r\n")
        c.cmd("use foo")
        self.assertTrue(c.cmd("stats-tube foo").startswith(b"OK "))


class TestReserve(ServerCase):
    def test_reserve_returns_job(self):
        c = self.client()
        c.put("hello")
        self.assertEqual(c.cmd("reserve"), b"RESERVED 1 5\r\nhello\r\n")
        self.assertEqual(self.job_stats(c, 1)["state"], "reserved")

    def test_priority_then_fifo(self):
        c = self.client()
        c.put("p10", pri=10)    # 1
        c.put("p5a", pri=5)     # 2
        c.put("p5b", pri=5)     # 3
        c.put("p0", pri=0)      # 4
        c.put("pmax", pri=4294967295)  # 5
        got = [c.cmd("reserve").split(b" ")[1] for _ in range(5)]
        self.assertEqual(got, [b"4", b"2", b"3", b"1", b"5"])

    def test_reserve_only_from_watched_tubes(self):
        c = self.client()
        c.put("x", tube="other")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertEqual(c.cmd("watch other"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED 1 1\r\nx\r\n")

    def test_reserve_with_timeout_zero(self):
        c = self.client()
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        c.put("x")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED 1 1\r\nx\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_reserve_with_timeout_positive_returns_ready_job_at_once(self):
        c = self.client()
        c.put("x")
        self.assertEqual(c.cmd("reserve-with-timeout 10"), b"RESERVED 1 1\r\nx\r\n")

    def test_reserved_job_not_given_to_others(self):
        a, b = self.client(), self.client()
        a.put("x")
        self.assertEqual(a.cmd("reserve"), b"RESERVED 1 1\r\nx\r\n")
        self.assertEqual(b.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_reserve_increments_reserves(self):
        c = self.client()
        c.put("x")
        c.cmd("reserve")
        c.cmd("release 1 0 0")
        c.cmd("reserve")
        self.assertEqual(self.job_stats(c, 1)["reserves"], "2")


class TestReserveJob(ServerCase):
    def test_reserve_ready_job_by_id(self):
        c = self.client()
        c.put("a")
        c.put("b")
        self.assertEqual(c.cmd("reserve-job 2"), b"RESERVED 2 1\r\nb\r\n")
        self.assertEqual(self.job_stats(c, 2)["state"], "reserved")
        self.assertEqual(c.cmd("reserve"), b"RESERVED 1 1\r\na\r\n")

    def test_reserve_job_in_unwatched_tube(self):
        c = self.client()
        c.put("a", tube="elsewhere")
        self.assertEqual(c.cmd("reserve-job 1"), b"RESERVED 1 1\r\na\r\n")

    def test_reserve_buried_and_delayed_jobs(self):
        c = self.client()
        c.put("a")
        c.cmd("reserve")
        self.assertEqual(c.cmd("bury 1 0"), b"BURIED\r\n")
        c.put("b", delay=100)
        self.assertEqual(c.cmd("reserve-job 1"), b"RESERVED 1 1\r\na\r\n")
        self.assertEqual(c.cmd("reserve-job 2"), b"RESERVED 2 1\r\nb\r\n")
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual(st["current-jobs-reserved"], "2")
        self.assertEqual(st["current-jobs-buried"], "0")
        self.assertEqual(st["current-jobs-delayed"], "0")

    def test_reserve_job_not_found(self):
        a, b = self.client(), self.client()
        self.assertEqual(a.cmd("reserve-job 1"), b"NOT_FOUND\r\n")
        a.put("x")
        self.assertEqual(a.cmd("reserve-job 1"), b"RESERVED 1 1\r\nx\r\n")
        # reserved by this connection or by another: NOT_FOUND
        self.assertEqual(a.cmd("reserve-job 1"), b"NOT_FOUND\r\n")
        self.assertEqual(b.cmd("reserve-job 1"), b"NOT_FOUND\r\n")
        a.cmd("delete 1")
        self.assertEqual(b.cmd("reserve-job 1"), b"NOT_FOUND\r\n")


class TestDelete(ServerCase):
    def test_delete_reserved(self):
        c = self.client()
        c.put("x")
        c.cmd("reserve")
        self.assertEqual(c.cmd("delete 1"), b"DELETED\r\n")
        self.assertEqual(c.cmd("delete 1"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek 1"), b"NOT_FOUND\r\n")

    def test_delete_ready_delayed_buried(self):
        c = self.client()
        c.put("ready")
        c.put("delayed", delay=100)
        c.put("buried")
        self.assertEqual(c.cmd("reserve-job 3"), b"RESERVED 3 6\r\nburied\r\n")
        c.cmd("bury 3 0")
        self.assertEqual(c.cmd("delete 1"), b"DELETED\r\n")
        self.assertEqual(c.cmd("delete 2"), b"DELETED\r\n")
        self.assertEqual(c.cmd("delete 3"), b"DELETED\r\n")
        st = parse_yaml(c.cmd("stats"))
        for k in ("current-jobs-ready", "current-jobs-delayed", "current-jobs-buried",
                  "current-jobs-reserved", "current-jobs-urgent"):
            self.assertEqual(st[k], "0", k)

    def test_delete_reserved_by_other_is_not_found(self):
        a, b = self.client(), self.client()
        a.put("x")
        a.cmd("reserve")
        self.assertEqual(b.cmd("delete 1"), b"NOT_FOUND\r\n")
        self.assertEqual(a.cmd("delete 1"), b"DELETED\r\n")

    def test_delete_unknown(self):
        c = self.client()
        self.assertEqual(c.cmd("delete 1"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("delete 18446744073709551615"), b"NOT_FOUND\r\n")


class TestRelease(ServerCase):
    def test_release_to_ready_with_new_priority(self):
        c = self.client()
        c.put("x", pri=5)
        c.cmd("reserve")
        self.assertEqual(c.cmd("release 1 2000 0"), b"RELEASED\r\n")
        st = self.job_stats(c, 1)
        self.assertEqual(st["state"], "ready")
        self.assertEqual(st["pri"], "2000")
        self.assertEqual(st["releases"], "1")
        self.assertEqual(c.cmd("reserve"), b"RESERVED 1 1\r\nx\r\n")

    def test_release_with_delay(self):
        c = self.client()
        c.put("x")
        c.cmd("reserve")
        self.assertEqual(c.cmd("release 1 0 100"), b"RELEASED\r\n")
        st = self.job_stats(c, 1)
        self.assertEqual(st["state"], "delayed")
        self.assertEqual(st["delay"], "100")
        self.assertEqual(c.cmd("peek-delayed"), b"FOUND 1 1\r\nx\r\n")

    def test_release_not_reserved(self):
        a, b = self.client(), self.client()
        self.assertEqual(a.cmd("release 1 0 0"), b"NOT_FOUND\r\n")
        a.put("x")
        self.assertEqual(a.cmd("release 1 0 0"), b"NOT_FOUND\r\n")  # ready
        a.cmd("reserve")
        self.assertEqual(b.cmd("release 1 0 0"), b"NOT_FOUND\r\n")  # someone else's
        self.assertEqual(a.cmd("release 1 0 0"), b"RELEASED\r\n")
        self.assertEqual(a.cmd("release 1 0 0"), b"NOT_FOUND\r\n")


class TestBury(ServerCase):
    def test_bury(self):
        c = self.client()
        c.put("x", pri=3)
        c.cmd("reserve")
        self.assertEqual(c.cmd("bury 1 9"), b"BURIED\r\n")
        st = self.job_stats(c, 1)
        self.assertEqual(st["state"], "buried")
        self.assertEqual(st["pri"], "9")
        self.assertEqual(st["buries"], "1")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertEqual(c.cmd("peek-buried"), b"FOUND 1 1\r\nx\r\n")

    def test_bury_not_reserved(self):
        a, b = self.client(), self.client()
        self.assertEqual(a.cmd("bury 1 0"), b"NOT_FOUND\r\n")
        a.put("x")
        self.assertEqual(a.cmd("bury 1 0"), b"NOT_FOUND\r\n")
        a.cmd("reserve")
        self.assertEqual(b.cmd("bury 1 0"), b"NOT_FOUND\r\n")
        self.assertEqual(a.cmd("bury 1 0"), b"BURIED\r\n")
        self.assertEqual(a.cmd("bury 1 0"), b"NOT_FOUND\r\n")


class TestTouch(ServerCase):
    def test_touch(self):
        a, b = self.client(), self.client()
        self.assertEqual(a.cmd("touch 1"), b"NOT_FOUND\r\n")
        a.put("x")
        self.assertEqual(a.cmd("touch 1"), b"NOT_FOUND\r\n")  # ready, not reserved
        a.cmd("reserve")
        self.assertEqual(a.cmd("touch 1"), b"TOUCHED\r\n")
        self.assertEqual(b.cmd("touch 1"), b"NOT_FOUND\r\n")
        a.cmd("bury 1 0")
        self.assertEqual(a.cmd("touch 1"), b"NOT_FOUND\r\n")


class TestWatchIgnore(ServerCase):
    def test_watch_counts(self):
        c = self.client()
        self.assertEqual(c.cmd("watch a"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("watch b"), b"WATCHING 3\r\n")
        self.assertEqual(c.cmd("watch a"), b"WATCHING 3\r\n")
        self.assertEqual(c.cmd("watch default"), b"WATCHING 3\r\n")

    def test_ignore(self):
        c = self.client()
        c.cmd("watch a")
        self.assertEqual(c.cmd("ignore default"), b"WATCHING 1\r\n")
        self.assertEqual(c.cmd("ignore a"), b"NOT_IGNORED\r\n")
        self.assertEqual(c.cmd("ignore notwatched"), b"WATCHING 1\r\n")
        self.assertEqual(c.cmd("list-tubes-watched"), ok_list("a"))

    def test_ignore_only_default(self):
        c = self.client()
        self.assertEqual(c.cmd("ignore default"), b"NOT_IGNORED\r\n")
        self.assertEqual(c.cmd("list-tubes-watched"), ok_list("default"))

    def test_ignore_stops_reservations_from_tube(self):
        c = self.client()
        c.put("x")
        c.cmd("watch a")
        c.cmd("ignore default")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")


class TestPeek(ServerCase):
    def test_peek_by_id_any_state_any_tube(self):
        a, b = self.client(), self.client()
        a.put("r", tube="t1")
        a.put("d", delay=100)
        self.assertEqual(b.cmd("peek 1"), b"FOUND 1 1\r\nr\r\n")
        self.assertEqual(b.cmd("peek 2"), b"FOUND 2 1\r\nd\r\n")
        a.cmd("watch t1")
        a.cmd("reserve")
        self.assertEqual(b.cmd("peek 1"), b"FOUND 1 1\r\nr\r\n")
        a.cmd("bury 1 0")
        self.assertEqual(b.cmd("peek 1"), b"FOUND 1 1\r\nr\r\n")
        self.assertEqual(b.cmd("peek 3"), b"NOT_FOUND\r\n")

    def test_peek_ready(self):
        c = self.client()
        self.assertEqual(c.cmd("peek-ready"), b"NOT_FOUND\r\n")
        c.put("p10", pri=10)
        c.put("p5", pri=5)
        c.put("p5b", pri=5)
        self.assertEqual(c.cmd("peek-ready"), b"FOUND 2 2\r\np5\r\n")
        # peek does not change state
        self.assertEqual(c.cmd("peek-ready"), b"FOUND 2 2\r\np5\r\n")
        self.assertEqual(self.job_stats(c, 2)["state"], "ready")

    def test_peek_delayed(self):
        c = self.client()
        self.assertEqual(c.cmd("peek-delayed"), b"NOT_FOUND\r\n")
        c.put("long", delay=200)
        c.put("short", delay=100)
        c.put("ready")
        self.assertEqual(c.cmd("peek-delayed"), b"FOUND 2 5\r\nshort\r\n")

    def test_peek_buried_is_fifo(self):
        c = self.client()
        self.assertEqual(c.cmd("peek-buried"), b"NOT_FOUND\r\n")
        c.put("one")
        c.put("two")
        c.cmd("reserve-job 2")
        c.cmd("bury 2 0")
        c.cmd("reserve-job 1")
        c.cmd("bury 1 0")
        self.assertEqual(c.cmd("peek-buried"), b"FOUND 2 3\r\ntwo\r\n")

    def test_peek_commands_use_the_used_tube(self):
        c = self.client()
        c.put("r")
        c.put("d", delay=100)
        c.put("b")
        c.cmd("reserve-job 3")
        c.cmd("bury 3 0")
        c.cmd("use other")
        self.assertEqual(c.cmd("peek-ready"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek-delayed"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek-buried"), b"NOT_FOUND\r\n")
        c.cmd("use default")
        self.assertEqual(c.cmd("peek-ready"), b"FOUND 1 1\r\nr\r\n")
        self.assertEqual(c.cmd("peek-delayed"), b"FOUND 2 1\r\nd\r\n")
        self.assertEqual(c.cmd("peek-buried"), b"FOUND 3 1\r\nb\r\n")

    def test_peek_ignores_watch_list(self):
        c = self.client()
        c.cmd("use other")
        c.put("x")
        # still watching only default, but peek-ready looks at the used tube
        self.assertEqual(c.cmd("peek-ready"), b"FOUND 1 1\r\nx\r\n")


class TestKick(ServerCase):
    def bury_new(self, c, body):
        r = c.put(body)
        jid = int(r.split()[1])
        self.assertEqual(c.cmd("reserve-job %d" % jid).split(b"\r\n")[0],
                         b"RESERVED %d %d" % (jid, len(body)))
        self.assertEqual(c.cmd("bury %d 0" % jid), b"BURIED\r\n")
        return jid

    def test_kick_buried_before_delayed(self):
        c = self.client()
        self.bury_new(c, "b1")           # 1
        c.put("d1", delay=100)           # 2
        self.bury_new(c, "b2")           # 3
        self.assertEqual(c.cmd("kick 10"), b"KICKED 2\r\n")
        self.assertEqual(self.job_stats(c, 1)["state"], "ready")
        self.assertEqual(self.job_stats(c, 3)["state"], "ready")
        self.assertEqual(self.job_stats(c, 2)["state"], "delayed")
        self.assertEqual(self.job_stats(c, 1)["kicks"], "1")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 1\r\n")
        self.assertEqual(self.job_stats(c, 2)["state"], "ready")
        self.assertEqual(self.job_stats(c, 2)["kicks"], "1")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 0\r\n")

    def test_kick_bound_and_order(self):
        c = self.client()
        for i in range(4):
            self.bury_new(c, "b%d" % i)
        self.assertEqual(c.cmd("kick 2"), b"KICKED 2\r\n")
        # oldest buried first
        self.assertEqual(self.job_stats(c, 1)["state"], "ready")
        self.assertEqual(self.job_stats(c, 2)["state"], "ready")
        self.assertEqual(self.job_stats(c, 3)["state"], "buried")
        self.assertEqual(c.cmd("kick 0"), b"KICKED 0\r\n")
        self.assertEqual(c.cmd("kick 100"), b"KICKED 2\r\n")

    def test_kick_delayed_soonest_first(self):
        c = self.client()
        c.put("a", delay=300)
        c.put("b", delay=100)
        c.put("c", delay=200)
        self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
        self.assertEqual(self.job_stats(c, 2)["state"], "ready")
        self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
        self.assertEqual(self.job_stats(c, 3)["state"], "ready")
        self.assertEqual(self.job_stats(c, 1)["state"], "delayed")

    def test_kick_uses_used_tube_only(self):
        c = self.client()
        self.bury_new(c, "x")
        c.cmd("use other")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 0\r\n")
        c.cmd("use default")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 1\r\n")

    def test_kick_empty(self):
        c = self.client()
        self.assertEqual(c.cmd("kick 1"), b"KICKED 0\r\n")

    def test_kick_job(self):
        c = self.client()
        self.bury_new(c, "b")              # 1 buried
        c.put("d", delay=100)              # 2 delayed
        c.put("r")                         # 3 ready
        c.put("res")                       # 4 reserved
        c.cmd("reserve-job 4")
        self.assertEqual(c.cmd("kick-job 1"), b"KICKED\r\n")
        self.assertEqual(c.cmd("kick-job 2"), b"KICKED\r\n")
        self.assertEqual(c.cmd("kick-job 3"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("kick-job 4"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("kick-job 5"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("kick-job 1"), b"NOT_FOUND\r\n")
        for jid in (1, 2):
            st = self.job_stats(c, jid)
            self.assertEqual(st["state"], "ready")
            self.assertEqual(st["kicks"], "1")

    def test_kick_job_in_other_tube(self):
        c = self.client()
        c.put("d", delay=100, tube="elsewhere")
        c.cmd("use default")
        self.assertEqual(c.cmd("kick-job 1"), b"KICKED\r\n")
        self.assertEqual(self.job_stats(c, 1)["state"], "ready")


class TestStatsCommandsReplies(ServerCase):
    def test_stats_job_not_found(self):
        c = self.client()
        self.assertEqual(c.cmd("stats-job 1"), b"NOT_FOUND\r\n")

    def test_stats_tube_not_found(self):
        c = self.client()
        self.assertEqual(c.cmd("stats-tube nosuch"), b"NOT_FOUND\r\n")

    def test_stats_ok_length_matches(self):
        c = self.client()
        c.put("x")
        for cmd in ("stats", "stats-tube default", "stats-job 1", "list-tubes",
                    "list-tubes-watched"):
            r = c.cmd(cmd)
            head, rest = r.split(b"\r\n", 1)
            self.assertTrue(head.startswith(b"OK "), r)
            n = int(head.split()[1])
            self.assertEqual(len(rest), n + 2, cmd)
            self.assertTrue(rest.startswith(b"---\n"), cmd)
            self.assertTrue(rest.endswith(b"\n\r\n"), cmd)


class TestLists(ServerCase):
    def test_list_tubes_initial(self):
        c = self.client()
        self.assertEqual(c.cmd("list-tubes"), ok_list("default"))

    def test_list_tubes_in_creation_order(self):
        c = self.client()
        c.cmd("use aaa")
        c.cmd("watch bbb")
        c.cmd("watch ccc")
        self.assertEqual(c.cmd("list-tubes"),
                         ok_list("default", "aaa", "bbb", "ccc"))

    def test_list_tube_used(self):
        c = self.client()
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")
        c.cmd("use x-y")
        self.assertEqual(c.cmd("list-tube-used"), b"USING x-y\r\n")

    def test_list_tubes_watched(self):
        c = self.client()
        self.assertEqual(c.cmd("list-tubes-watched"), ok_list("default"))
        c.cmd("watch t1")
        c.cmd("watch t2")
        self.assertEqual(c.cmd("list-tubes-watched"),
                         ok_list("default", "t1", "t2"))
        c.cmd("use t3")  # use does not change the watch list
        self.assertEqual(c.cmd("list-tubes-watched"),
                         ok_list("default", "t1", "t2"))


class TestPauseTube(ServerCase):
    def test_pause_tube_replies(self):
        c = self.client()
        self.assertEqual(c.cmd("pause-tube default 10"), b"PAUSED\r\n")
        self.assertEqual(c.cmd("pause-tube nosuch 10"), b"NOT_FOUND\r\n")
        st = parse_yaml(c.cmd("stats-tube default"))
        self.assertEqual(st["pause"], "10")
        self.assertEqual(st["cmd-pause-tube"], "1")
        self.assertIn(st["pause-time-left"], ("9", "10"))

    def test_paused_tube_holds_jobs(self):
        c = self.client()
        c.put("x")
        c.cmd("pause-tube default 100")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        # other commands still see the job
        self.assertEqual(c.cmd("peek-ready"), b"FOUND 1 1\r\nx\r\n")
        self.assertEqual(c.cmd("reserve-job 1"), b"RESERVED 1 1\r\nx\r\n")

    def test_pause_only_affects_that_tube(self):
        c = self.client()
        c.put("x", tube="paused")
        c.put("y", tube="running")
        c.cmd("watch paused")
        c.cmd("watch running")
        c.cmd("pause-tube paused 100")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED 2 1\r\ny\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")


class TestQuitAndUnknown(ServerCase):
    def test_quit_closes_connection(self):
        c = self.client()
        c.send("quit\r\n")
        self.assertTrue(c.closed_by_peer(wait=3))

    def test_quit_after_pipelined_commands(self):
        c = self.client()
        c.send("use q\r\nlist-tube-used\r\nquit\r\nlist-tube-used\r\n")
        self.assertEqual(c.read_reply(), b"USING q\r\n")
        self.assertEqual(c.read_reply(), b"USING q\r\n")
        self.assertTrue(c.closed_by_peer(wait=3))

    def test_unknown_command_keeps_connection(self):
        c = self.client()
        self.assertEqual(c.cmd("frobnicate"), b"UNKNOWN_COMMAND\r\n")
        self.assertEqual(c.cmd("PUT 0 0 1 1"), b"UNKNOWN_COMMAND\r\n")
        self.assertEqual(c.cmd("peek"), b"UNKNOWN_COMMAND\r\n")
        self.assertEqual(c.cmd("use"), b"UNKNOWN_COMMAND\r\n")
        self.assertEqual(c.cmd("kick"), b"UNKNOWN_COMMAND\r\n")
        self.assertEqual(c.cmd(b"\r\n"), b"UNKNOWN_COMMAND\r\n")
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")


if __name__ == "__main__":
    unittest.main()

"""Black-box tests: every protocol 1.13 command with each of its documented replies.

Run: python3 -m unittest -v tests/blackbox/test_commands.py
The binary under test is $STALKD_BIN (default build/release/stalkd).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import (ServerCase, found, inserted_id, list_tubes_order, ok_list,  # noqa: E402
                       parse_yaml, reserved)


def first_ids(tube, n):
    """The ids of the first n jobs put into `tube` on a fresh server: 1..n (beanstalkd's one
    counter, when `tube` gets every put) or, on a Redis Cluster, seq * 1024 + the tube's
    partition for seq 1..n (a counter per partition)."""
    if beanstalk.cluster_store():
        p = beanstalk.cluster_partition(tube)
        return [seq * 1024 + p for seq in range(1, n + 1)]
    return list(range(1, n + 1))


class TestPut(ServerCase):
    def test_inserted_ids_are_sequential(self):
        c = self.client()
        ids = first_ids("default", 3)
        self.assertEqual(c.put("a"), b"INSERTED %d\r\n" % ids[0])
        self.assertEqual(c.put("b"), b"INSERTED %d\r\n" % ids[1])
        self.assertEqual(c.put("c"), b"INSERTED %d\r\n" % ids[2])

    def test_ids_are_global_across_connections_and_tubes(self):
        a, b = self.client(), self.client()
        if beanstalk.cluster_store():
            # a counter per partition: ids unique, increasing within a tube
            ids = [first_ids("default", 2)[0], first_ids("other", 1)[0],
                   first_ids("default", 2)[1]]
        else:
            ids = [1, 2, 3]
        self.assertEqual(a.put("x"), b"INSERTED %d\r\n" % ids[0])
        self.assertEqual(b.put("y", tube="other"), b"INSERTED %d\r\n" % ids[1])
        self.assertEqual(a.put("z"), b"INSERTED %d\r\n" % ids[2])

    def test_body_is_returned_verbatim(self):
        c = self.client()
        body = b"line1\r\nline2\x00\xff\xfe binary \r\n\r\n"
        j = c.put_id(body)
        self.assertEqual(c.cmd("reserve"), reserved(j, body))

    def test_empty_body(self):
        c = self.client()
        j = inserted_id(c.cmd(b"put 0 0 10 0\r\n\r\n"))
        self.assertEqual(c.cmd("peek %d" % j), found(j, b""))
        self.assertEqual(c.cmd("reserve"), reserved(j, b""))

    def test_put_goes_to_used_tube(self):
        c = self.client()
        self.assertEqual(c.cmd("use jobs"), b"USING jobs\r\n")
        j = c.put_id("x")
        st = self.job_stats(c, j)
        self.assertIn(st["tube"], ("jobs", '"jobs"'))
        self.assertEqual(st["state"], "ready")
        # default tube untouched: reserve (watching default) finds nothing
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_put_with_delay_is_delayed(self):
        c = self.client()
        j = c.put_id("x", delay=100)
        st = self.job_stats(c, j)
        self.assertEqual(st["state"], "delayed")
        self.assertEqual(st["delay"], "100")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_put_sets_pri_and_ttr(self):
        c = self.client()
        j = c.put_id("x", pri=4294967295, ttr=77)
        st = self.job_stats(c, j)
        self.assertEqual(st["pri"], "4294967295")
        self.assertEqual(st["ttr"], "77")

    def test_ttr_zero_becomes_one(self):
        c = self.client()
        j = c.put_id("x", ttr=0)
        self.assertEqual(self.job_stats(c, j)["ttr"], "1")


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
        j = c.put_id("hello")
        self.assertEqual(c.cmd("reserve"), reserved(j, "hello"))
        self.assertEqual(self.job_stats(c, j)["state"], "reserved")

    def test_priority_then_fifo(self):
        c = self.client()
        ids = [c.put_id(body, pri=pri) for body, pri in
               [("p10", 10), ("p5a", 5), ("p5b", 5), ("p0", 0), ("pmax", 4294967295)]]
        got = [int(c.cmd("reserve").split(b" ")[1]) for _ in range(5)]
        self.assertEqual(got, [ids[3], ids[1], ids[2], ids[0], ids[4]])

    def test_reserve_only_from_watched_tubes(self):
        c = self.client()
        j = c.put_id("x", tube="other")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertEqual(c.cmd("watch other"), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), reserved(j, "x"))

    def test_reserve_with_timeout_zero(self):
        c = self.client()
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        j = c.put_id("x")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), reserved(j, "x"))
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_reserve_with_timeout_positive_returns_ready_job_at_once(self):
        c = self.client()
        j = c.put_id("x")
        self.assertEqual(c.cmd("reserve-with-timeout 10"), reserved(j, "x"))

    def test_reserved_job_not_given_to_others(self):
        a, b = self.client(), self.client()
        j = a.put_id("x")
        self.assertEqual(a.cmd("reserve"), reserved(j, "x"))
        self.assertEqual(b.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")

    def test_reserve_increments_reserves(self):
        c = self.client()
        j = c.put_id("x")
        c.cmd("reserve")
        c.cmd("release %d 0 0" % j)
        c.cmd("reserve")
        self.assertEqual(self.job_stats(c, j)["reserves"], "2")


class TestReserveJob(ServerCase):
    def test_reserve_ready_job_by_id(self):
        c = self.client()
        a = c.put_id("a")
        b = c.put_id("b")
        self.assertEqual(c.cmd("reserve-job %d" % b), reserved(b, "b"))
        self.assertEqual(self.job_stats(c, b)["state"], "reserved")
        self.assertEqual(c.cmd("reserve"), reserved(a, "a"))

    def test_reserve_job_in_unwatched_tube(self):
        c = self.client()
        j = c.put_id("a", tube="elsewhere")
        self.assertEqual(c.cmd("reserve-job %d" % j), reserved(j, "a"))

    def test_reserve_buried_and_delayed_jobs(self):
        c = self.client()
        a = c.put_id("a")
        c.cmd("reserve")
        self.assertEqual(c.cmd("bury %d 0" % a), b"BURIED\r\n")
        b = c.put_id("b", delay=100)
        self.assertEqual(c.cmd("reserve-job %d" % a), reserved(a, "a"))
        self.assertEqual(c.cmd("reserve-job %d" % b), reserved(b, "b"))
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual(st["current-jobs-reserved"], "2")
        self.assertEqual(st["current-jobs-buried"], "0")
        self.assertEqual(st["current-jobs-delayed"], "0")

    def test_reserve_job_not_found(self):
        a, b = self.client(), self.client()
        j = first_ids("default", 1)[0]
        self.assertEqual(a.cmd("reserve-job %d" % j), b"NOT_FOUND\r\n")
        self.assertEqual(a.put_id("x"), j)
        self.assertEqual(a.cmd("reserve-job %d" % j), reserved(j, "x"))
        # reserved by this connection or by another: NOT_FOUND
        self.assertEqual(a.cmd("reserve-job %d" % j), b"NOT_FOUND\r\n")
        self.assertEqual(b.cmd("reserve-job %d" % j), b"NOT_FOUND\r\n")
        a.cmd("delete %d" % j)
        self.assertEqual(b.cmd("reserve-job %d" % j), b"NOT_FOUND\r\n")


class TestDelete(ServerCase):
    def test_delete_reserved(self):
        c = self.client()
        j = c.put_id("x")
        c.cmd("reserve")
        self.assertEqual(c.cmd("delete %d" % j), b"DELETED\r\n")
        self.assertEqual(c.cmd("delete %d" % j), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek %d" % j), b"NOT_FOUND\r\n")

    def test_delete_ready_delayed_buried(self):
        c = self.client()
        r = c.put_id("ready")
        d = c.put_id("delayed", delay=100)
        b = c.put_id("buried")
        self.assertEqual(c.cmd("reserve-job %d" % b), reserved(b, "buried"))
        c.cmd("bury %d 0" % b)
        self.assertEqual(c.cmd("delete %d" % r), b"DELETED\r\n")
        self.assertEqual(c.cmd("delete %d" % d), b"DELETED\r\n")
        self.assertEqual(c.cmd("delete %d" % b), b"DELETED\r\n")
        st = parse_yaml(c.cmd("stats"))
        for k in ("current-jobs-ready", "current-jobs-delayed", "current-jobs-buried",
                  "current-jobs-reserved", "current-jobs-urgent"):
            self.assertEqual(st[k], "0", k)

    def test_delete_reserved_by_other_is_not_found(self):
        a, b = self.client(), self.client()
        j = a.put_id("x")
        a.cmd("reserve")
        self.assertEqual(b.cmd("delete %d" % j), b"NOT_FOUND\r\n")
        self.assertEqual(a.cmd("delete %d" % j), b"DELETED\r\n")

    def test_delete_unknown(self):
        c = self.client()
        self.assertEqual(c.cmd("delete %d" % first_ids("default", 1)[0]), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("delete 18446744073709551615"), b"NOT_FOUND\r\n")


class TestRelease(ServerCase):
    def test_release_to_ready_with_new_priority(self):
        c = self.client()
        j = c.put_id("x", pri=5)
        c.cmd("reserve")
        self.assertEqual(c.cmd("release %d 2000 0" % j), b"RELEASED\r\n")
        st = self.job_stats(c, j)
        self.assertEqual(st["state"], "ready")
        self.assertEqual(st["pri"], "2000")
        self.assertEqual(st["releases"], "1")
        self.assertEqual(c.cmd("reserve"), reserved(j, "x"))

    def test_release_with_delay(self):
        c = self.client()
        j = c.put_id("x")
        c.cmd("reserve")
        self.assertEqual(c.cmd("release %d 0 100" % j), b"RELEASED\r\n")
        st = self.job_stats(c, j)
        self.assertEqual(st["state"], "delayed")
        self.assertEqual(st["delay"], "100")
        self.assertEqual(c.cmd("peek-delayed"), found(j, "x"))

    def test_release_not_reserved(self):
        a, b = self.client(), self.client()
        j = first_ids("default", 1)[0]
        self.assertEqual(a.cmd("release %d 0 0" % j), b"NOT_FOUND\r\n")
        self.assertEqual(a.put_id("x"), j)
        self.assertEqual(a.cmd("release %d 0 0" % j), b"NOT_FOUND\r\n")  # ready
        a.cmd("reserve")
        self.assertEqual(b.cmd("release %d 0 0" % j), b"NOT_FOUND\r\n")  # someone else's
        self.assertEqual(a.cmd("release %d 0 0" % j), b"RELEASED\r\n")
        self.assertEqual(a.cmd("release %d 0 0" % j), b"NOT_FOUND\r\n")


class TestBury(ServerCase):
    def test_bury(self):
        c = self.client()
        j = c.put_id("x", pri=3)
        c.cmd("reserve")
        self.assertEqual(c.cmd("bury %d 9" % j), b"BURIED\r\n")
        st = self.job_stats(c, j)
        self.assertEqual(st["state"], "buried")
        self.assertEqual(st["pri"], "9")
        self.assertEqual(st["buries"], "1")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        self.assertEqual(c.cmd("peek-buried"), found(j, "x"))

    def test_bury_not_reserved(self):
        a, b = self.client(), self.client()
        j = first_ids("default", 1)[0]
        self.assertEqual(a.cmd("bury %d 0" % j), b"NOT_FOUND\r\n")
        self.assertEqual(a.put_id("x"), j)
        self.assertEqual(a.cmd("bury %d 0" % j), b"NOT_FOUND\r\n")
        a.cmd("reserve")
        self.assertEqual(b.cmd("bury %d 0" % j), b"NOT_FOUND\r\n")
        self.assertEqual(a.cmd("bury %d 0" % j), b"BURIED\r\n")
        self.assertEqual(a.cmd("bury %d 0" % j), b"NOT_FOUND\r\n")


class TestTouch(ServerCase):
    def test_touch(self):
        a, b = self.client(), self.client()
        j = first_ids("default", 1)[0]
        self.assertEqual(a.cmd("touch %d" % j), b"NOT_FOUND\r\n")
        self.assertEqual(a.put_id("x"), j)
        self.assertEqual(a.cmd("touch %d" % j), b"NOT_FOUND\r\n")  # ready, not reserved
        a.cmd("reserve")
        self.assertEqual(a.cmd("touch %d" % j), b"TOUCHED\r\n")
        self.assertEqual(b.cmd("touch %d" % j), b"NOT_FOUND\r\n")
        a.cmd("bury %d 0" % j)
        self.assertEqual(a.cmd("touch %d" % j), b"NOT_FOUND\r\n")


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
        r = a.put_id("r", tube="t1")
        d = a.put_id("d", delay=100)
        self.assertEqual(b.cmd("peek %d" % r), found(r, "r"))
        self.assertEqual(b.cmd("peek %d" % d), found(d, "d"))
        a.cmd("watch t1")
        a.cmd("reserve")
        self.assertEqual(b.cmd("peek %d" % r), found(r, "r"))
        a.cmd("bury %d 0" % r)
        self.assertEqual(b.cmd("peek %d" % r), found(r, "r"))
        self.assertEqual(b.cmd("peek %d" % (max(r, d) + 1)), b"NOT_FOUND\r\n")

    def test_peek_ready(self):
        c = self.client()
        self.assertEqual(c.cmd("peek-ready"), b"NOT_FOUND\r\n")
        c.put("p10", pri=10)
        j = c.put_id("p5", pri=5)
        c.put("p5b", pri=5)
        self.assertEqual(c.cmd("peek-ready"), found(j, "p5"))
        # peek does not change state
        self.assertEqual(c.cmd("peek-ready"), found(j, "p5"))
        self.assertEqual(self.job_stats(c, j)["state"], "ready")

    def test_peek_delayed(self):
        c = self.client()
        self.assertEqual(c.cmd("peek-delayed"), b"NOT_FOUND\r\n")
        c.put("long", delay=200)
        j = c.put_id("short", delay=100)
        c.put("ready")
        self.assertEqual(c.cmd("peek-delayed"), found(j, "short"))

    def test_peek_buried_is_fifo(self):
        c = self.client()
        self.assertEqual(c.cmd("peek-buried"), b"NOT_FOUND\r\n")
        one = c.put_id("one")
        two = c.put_id("two")
        c.cmd("reserve-job %d" % two)
        c.cmd("bury %d 0" % two)
        c.cmd("reserve-job %d" % one)
        c.cmd("bury %d 0" % one)
        self.assertEqual(c.cmd("peek-buried"), found(two, "two"))

    def test_peek_commands_use_the_used_tube(self):
        c = self.client()
        r = c.put_id("r")
        d = c.put_id("d", delay=100)
        b = c.put_id("b")
        c.cmd("reserve-job %d" % b)
        c.cmd("bury %d 0" % b)
        c.cmd("use other")
        self.assertEqual(c.cmd("peek-ready"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek-delayed"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek-buried"), b"NOT_FOUND\r\n")
        c.cmd("use default")
        self.assertEqual(c.cmd("peek-ready"), found(r, "r"))
        self.assertEqual(c.cmd("peek-delayed"), found(d, "d"))
        self.assertEqual(c.cmd("peek-buried"), found(b, "b"))

    def test_peek_ignores_watch_list(self):
        c = self.client()
        c.cmd("use other")
        j = c.put_id("x")
        # still watching only default, but peek-ready looks at the used tube
        self.assertEqual(c.cmd("peek-ready"), found(j, "x"))


class TestKick(ServerCase):
    def bury_new(self, c, body):
        jid = c.put_id(body)
        self.assertEqual(c.cmd("reserve-job %d" % jid).split(b"\r\n")[0],
                         b"RESERVED %d %d" % (jid, len(body)))
        self.assertEqual(c.cmd("bury %d 0" % jid), b"BURIED\r\n")
        return jid

    def test_kick_buried_before_delayed(self):
        c = self.client()
        b1 = self.bury_new(c, "b1")
        d1 = c.put_id("d1", delay=100)
        b2 = self.bury_new(c, "b2")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 2\r\n")
        self.assertEqual(self.job_stats(c, b1)["state"], "ready")
        self.assertEqual(self.job_stats(c, b2)["state"], "ready")
        self.assertEqual(self.job_stats(c, d1)["state"], "delayed")
        self.assertEqual(self.job_stats(c, b1)["kicks"], "1")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 1\r\n")
        self.assertEqual(self.job_stats(c, d1)["state"], "ready")
        self.assertEqual(self.job_stats(c, d1)["kicks"], "1")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 0\r\n")

    def test_kick_bound_and_order(self):
        c = self.client()
        ids = [self.bury_new(c, "b%d" % i) for i in range(4)]
        self.assertEqual(c.cmd("kick 2"), b"KICKED 2\r\n")
        # oldest buried first
        self.assertEqual(self.job_stats(c, ids[0])["state"], "ready")
        self.assertEqual(self.job_stats(c, ids[1])["state"], "ready")
        self.assertEqual(self.job_stats(c, ids[2])["state"], "buried")
        self.assertEqual(c.cmd("kick 0"), b"KICKED 0\r\n")
        self.assertEqual(c.cmd("kick 100"), b"KICKED 2\r\n")

    def test_kick_delayed_soonest_first(self):
        c = self.client()
        a = c.put_id("a", delay=300)
        b = c.put_id("b", delay=100)
        cc = c.put_id("c", delay=200)
        self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
        self.assertEqual(self.job_stats(c, b)["state"], "ready")
        self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
        self.assertEqual(self.job_stats(c, cc)["state"], "ready")
        self.assertEqual(self.job_stats(c, a)["state"], "delayed")

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
        b = self.bury_new(c, "b")
        d = c.put_id("d", delay=100)
        r = c.put_id("r")
        res = c.put_id("res")
        c.cmd("reserve-job %d" % res)
        self.assertEqual(c.cmd("kick-job %d" % b), b"KICKED\r\n")
        self.assertEqual(c.cmd("kick-job %d" % d), b"KICKED\r\n")
        self.assertEqual(c.cmd("kick-job %d" % r), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("kick-job %d" % res), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("kick-job %d" % (res + 1)), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("kick-job %d" % b), b"NOT_FOUND\r\n")
        for jid in (b, d):
            st = self.job_stats(c, jid)
            self.assertEqual(st["state"], "ready")
            self.assertEqual(st["kicks"], "1")

    def test_kick_job_in_other_tube(self):
        c = self.client()
        j = c.put_id("d", delay=100, tube="elsewhere")
        c.cmd("use default")
        self.assertEqual(c.cmd("kick-job %d" % j), b"KICKED\r\n")
        self.assertEqual(self.job_stats(c, j)["state"], "ready")


class TestStatsCommandsReplies(ServerCase):
    def test_stats_job_not_found(self):
        c = self.client()
        self.assertEqual(c.cmd("stats-job 1"), b"NOT_FOUND\r\n")

    def test_stats_tube_not_found(self):
        c = self.client()
        self.assertEqual(c.cmd("stats-tube nosuch"), b"NOT_FOUND\r\n")

    def test_stats_ok_length_matches(self):
        c = self.client()
        j = c.put_id("x")
        for cmd in ("stats", "stats-tube default", "stats-job %d" % j, "list-tubes",
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
                         ok_list(*list_tubes_order(["default", "aaa", "bbb", "ccc"])))

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
        j = c.put_id("x")
        c.cmd("pause-tube default 100")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        # other commands still see the job
        self.assertEqual(c.cmd("peek-ready"), found(j, "x"))
        self.assertEqual(c.cmd("reserve-job %d" % j), reserved(j, "x"))

    def test_pause_only_affects_that_tube(self):
        c = self.client()
        c.put("x", tube="paused")
        j = c.put_id("y", tube="running")
        c.cmd("watch paused")
        c.cmd("watch running")
        c.cmd("pause-tube paused 100")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), reserved(j, "y"))
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

"""Black-box tests: connection life cycle, waiting reserves, tube life cycle, pipelining,
fragmented input, concurrent producers/consumers, unix socket.

Run: python3 -m unittest -v tests/blackbox/test_connections.py
"""
import os
import socket
import stat
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import (Server, ServerCase, found, inserted_id, list_tubes_order,  # noqa: E402
                       nth_id, ok_list, one_partition, parse_yaml, reserved, wait_job_stat, wait_stat,
                       wait_tube_stat, wait_until)


class TestCloseReleasesJobs(ServerCase):
    def test_close_releases_reserved_jobs(self):
        a, b = self.client(), self.client()
        a.put("one")
        a.put("two")
        a.cmd("reserve")
        a.cmd("reserve")
        self.assertEqual(b.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        a.close()
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 3\r\none\r\n" % nth_id(1))
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 3\r\ntwo\r\n" % nth_id(2))
        st = self.job_stats(b, nth_id(1))
        # a disconnect is neither a release nor a timeout
        self.assertEqual((st["reserves"], st["releases"], st["timeouts"]), ("2", "0", "0"))

    def test_close_wakes_waiting_reserve(self):
        a, b = self.client(), self.client()
        a.put("x")
        a.cmd("reserve")
        b.send("reserve\r\n")
        self.assertTrue(b.no_reply_within(0.3))
        a.close()
        self.assertEqual(b.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))

    def test_quit_releases_reserved_jobs(self):
        a, b = self.client(), self.client()
        a.put("x", pri=7)
        a.cmd("reserve")
        a.send("quit\r\n")
        self.assertTrue(a.closed_by_peer(wait=3))
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(self.job_stats(b, nth_id(1))["pri"], "7")

    def test_released_jobs_go_back_to_their_tubes(self):
        a, b = self.client(), self.client()
        j = a.put_id("x", tube="t1")
        a.cmd("watch t1")
        a.cmd("reserve")
        a.close()
        self.assertTrue(wait_job_stat(b, j, "state", "ready"))
        self.assertIn(self.job_stats(b, j)["tube"], ("t1", '"t1"'))
        self.assertEqual(b.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        b.cmd("watch t1")
        self.assertEqual(b.cmd("reserve-with-timeout 0"), reserved(j, "x"))

    def test_close_while_waiting(self):
        a, b = self.client(), self.client()
        a.send("reserve\r\n")
        self.assertTrue(wait_stat(b, "current-waiting", 1))
        a.close()
        self.assertTrue(wait_stat(b, "current-waiting", 0))
        b.put("x")
        # the job must not have been handed to the dead connection
        self.assertEqual(self.job_stats(b, nth_id(1))["state"], "ready")
        self.assertEqual(b.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))

    def test_close_mid_body_creates_no_job(self):
        a, b = self.client(), self.client()
        a.send(b"put 0 0 10 100\r\n" + b"x" * 50)
        time.sleep(0.1)
        a.close()
        self.assertTrue(wait_stat(b, "current-connections", 1))
        st = self.stats(b)
        self.assertEqual((st["total-jobs"], st["current-jobs-ready"]), ("0", "0"))

    def test_half_closed_waiting_client_gets_timed_out(self):
        a = self.client()
        a.send("reserve\r\n")
        time.sleep(0.2)
        a.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(a.read_reply(), b"TIMED_OUT\r\n")

    def test_half_closed_client_gets_a_ready_job(self):
        # beanstalkd answers the reserve before it notices the end of the input.
        p, a = self.client(), self.client()
        p.put("x")
        a.send("reserve\r\n")
        a.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(a.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertTrue(a.closed_by_peer())

    def test_half_closed_client_with_pipelined_reserves_gets_jobs_then_timed_out(self):
        p, a = self.client(), self.client()
        p.put("x")
        p.put("y")
        a.send("reserve\r\n" * 4)
        a.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(a.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(a.read_reply(), b"RESERVED %d 1\r\ny\r\n" % nth_id(2))
        self.assertEqual(a.read_reply(), b"TIMED_OUT\r\n")
        self.assertTrue(a.closed_by_peer())
        self.assertTrue(wait_job_stat(p, nth_id(2), "state", "ready"))

    def test_connection_counts_drop_on_close(self):
        a = self.client()
        others = [self.client() for _ in range(5)]
        self.assertTrue(wait_stat(a, "current-connections", 6))
        for o in others:
            o.close()
        self.assertTrue(wait_stat(a, "current-connections", 1))
        self.assertEqual(self.stats(a)["total-connections"], "7")  # + readiness probe


class TestWaitingReserve(ServerCase):
    def test_served_from_any_watched_tube(self):
        w, p = self.client(), self.client()
        w.cmd("watch a")
        w.cmd("watch b")
        w.cmd("ignore default")
        w.send("reserve\r\n")
        self.assertTrue(w.no_reply_within(0.3))
        p.put("in-default")
        self.assertTrue(w.no_reply_within(0.3))
        j = p.put_id("in-b", tube="b")
        self.assertEqual(w.read_reply(), reserved(j, "in-b"))

    def test_ready_jobs_across_tubes_by_priority_then_id(self):
        p, w = self.client(), self.client()
        # On a cluster the tubes share a partition ((g)a, (g)b, ...): a reserve over several
        # partitions is only as exact as one round trip ago (docs/SCALE-OUT.md).
        a, b, c, d = (one_partition(t) for t in ("a", "b", "c", "default"))
        ids = [p.put_id("a5", pri=5, tube=a), p.put_id("b3", pri=3, tube=b),
               p.put_id("c3", pri=3, tube=c), p.put_id("a3", pri=3, tube=a),
               p.put_id("d0", pri=0, tube=d), p.put_id("c9", pri=9, tube=c)]
        for t in (a, b, c, d):
            w.cmd("watch " + t)
        got = []
        for _ in range(6):
            r = w.cmd("reserve-with-timeout 0")
            got.append(int(r.split()[1]))
        self.assertEqual(got, [ids[i] for i in (4, 1, 2, 3, 0, 5)])

    def test_each_job_goes_to_exactly_one_waiter(self):
        p = self.client()
        waiters = [self.client() for _ in range(3)]
        for w in waiters:
            w.send("reserve-with-timeout 5\r\n")
        self.assertTrue(wait_stat(p, "current-waiting", 3))
        p.put("x")
        p.put("y")
        time.sleep(0.3)
        got = []
        for w in waiters:
            if not w.no_reply_within(0.2):
                got.append(w.read_reply())
        self.assertEqual(sorted(got), [b"RESERVED %d 1\r\nx\r\n" % nth_id(1), b"RESERVED %d 1\r\ny\r\n" % nth_id(2)])
        self.assertEqual(self.stats(p)["current-waiting"], "1")

    def test_waiter_counted_on_every_watched_tube(self):
        w, o = self.client(), self.client()
        w.cmd("watch a")
        w.send("reserve\r\n")
        self.assertTrue(wait_stat(o, "current-waiting", 1))
        self.assertEqual(parse_yaml(o.cmd("stats-tube a"))["current-waiting"], "1")
        self.assertEqual(parse_yaml(o.cmd("stats-tube default"))["current-waiting"], "1")

    def test_commands_sent_while_waiting_are_answered_after_the_reserve(self):
        # The server reads ahead while a reserve waits; what it read runs in order after it.
        w, p = self.client(), self.client()
        w.send("reserve\r\n")
        self.assertTrue(w.no_reply_within(0.2))
        w.send("list-tube-used\r\nwatch other\r\n")
        self.assertTrue(w.no_reply_within(0.2))
        p.put("x")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(w.read_reply(), b"USING default\r\n")
        self.assertEqual(w.read_reply(), b"WATCHING 2\r\n")

    def test_pipelined_reserves_are_answered_in_order_as_jobs_come(self):
        # Several reserves in one send wait one after the other: each job goes to the
        # oldest (on the Redis store all of their claims go out at once: CanPipeline).
        w, p = self.client(), self.client()
        w.send("reserve\r\n" * 3 + "list-tube-used\r\n")
        self.assertTrue(w.no_reply_within(0.2))
        p.put("a")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\na\r\n" % nth_id(1))
        self.assertTrue(w.no_reply_within(0.2))
        p.put("b")
        p.put("c")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nb\r\n" % nth_id(2))
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nc\r\n" % nth_id(3))
        self.assertEqual(w.read_reply(), b"USING default\r\n")

    def test_pipelined_reserves_take_ready_jobs_best_first(self):
        p, w = self.client(), self.client()
        for pri, body in ((5, "x"), (1, "y"), (3, "z")):
            p.put(body, pri=pri)
        w.send("reserve\r\n" * 3 + "reserve-with-timeout 0\r\n")
        self.assertEqual([w.read_reply() for _ in range(4)],
                         [b"RESERVED %d 1\r\ny\r\n" % nth_id(2), b"RESERVED %d 1\r\nz\r\n" % nth_id(3),
                          b"RESERVED %d 1\r\nx\r\n" % nth_id(1), b"TIMED_OUT\r\n"])

    def test_put_behind_a_waiting_reserve_runs_after_it(self):
        # The put must not go ahead of the reserve (which would then reserve it).
        w = self.client()
        t0 = time.monotonic()
        w.send("reserve-with-timeout 1\r\nput 0 0 10 1\r\nx\r\nreserve-with-timeout 0\r\n")
        self.assertEqual(w.read_reply(), b"TIMED_OUT\r\n")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertEqual(w.read_reply(), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))

    def test_pipelined_reserve_timeouts_count_one_after_the_other(self):
        w = self.client()
        t0 = time.monotonic()
        w.send("reserve-with-timeout 1\r\nreserve-with-timeout 0\r\nreserve-with-timeout 1\r\n")
        self.assertEqual(w.read_reply(), b"TIMED_OUT\r\n")
        self.assertEqual(w.read_reply(), b"TIMED_OUT\r\n")
        self.assertEqual(w.read_reply(), b"TIMED_OUT\r\n")
        self.assertGreaterEqual(time.monotonic() - t0, 1.9)

    def test_pipelined_reserves_meet_deadline_soon(self):
        p, w = self.client(), self.client()
        p.put("x", ttr=1)
        self.assertEqual(w.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        w.send("reserve-with-timeout 5\r\n" * 2)
        self.assertEqual(w.read_reply(), b"DEADLINE_SOON\r\n")
        self.assertEqual(w.read_reply(), b"DEADLINE_SOON\r\n")
        # Once its TTR has ended, the job comes back to the next reserve.
        time.sleep(1.2)
        self.assertEqual(w.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))

    def test_half_closed_client_with_pipelined_reserves_gets_one_timed_out(self):
        # beanstalkd answers the waiting reserve and reads nothing more.
        a = self.client()
        a.send("reserve\r\nreserve\r\n")
        time.sleep(0.2)
        a.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(a.read_reply(), b"TIMED_OUT\r\n")
        a.sock.settimeout(5)
        self.assertEqual(a.sock.recv(100), b"")
        o = self.client()
        o.put("x")
        self.assertEqual(o.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))

    def test_waiting_client_flooding_neither_spins_nor_buffers_it_all(self):
        # While its reserve waits, a client keeps sending: the server reads ahead up to its
        # input bound, then stops reading (and must not poll the socket in a loop).
        w, p = self.client(), self.client()
        w.send("reserve\r\n")
        self.assertTrue(w.no_reply_within(0.2))
        pid = self.server.pid
        cpu, rss = beanstalk.cpu_seconds(pid), beanstalk.rss_kb(pid)
        sent = beanstalk.flood(w.sock, b"list-tube-used\r\n" * 4096, 0.8)
        self.assertGreater(sent, 1 << 20, "the socket buffers alone should not hold it all")
        self.assertLess(beanstalk.cpu_seconds(pid) - cpu, 0.4, "the server spun")
        self.assertLess(beanstalk.rss_kb(pid) - rss, 4 * 1024, "read %d bytes while waiting" % sent)
        p.put("x")
        self.assertEqual(w.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        for _ in range(1000):  # the rest is answered in order as the client reads
            self.assertEqual(w.read_reply(), b"USING default\r\n")


class TestTubeLifecycle(ServerCase):
    def test_created_on_use_and_removed_on_close(self):
        a, b = self.client(), self.client()
        a.cmd("use foo")
        self.assertEqual(b.cmd("list-tubes"), ok_list("default", "foo"))
        self.assertEqual(self.stats(b)["current-tubes"], "2")
        a.close()
        self.assertTrue(wait_until(lambda: b.cmd("list-tubes") == ok_list("default")))
        self.assertEqual(b.cmd("stats-tube foo"), b"NOT_FOUND\r\n")
        self.assertEqual(self.stats(b)["current-tubes"], "1")

    def test_removed_when_no_longer_used_or_watched(self):
        c = self.client()
        c.cmd("use foo")
        c.cmd("use bar")
        self.assertEqual(c.cmd("list-tubes"), ok_list("default", "bar"))
        c.cmd("watch baz")
        c.cmd("ignore baz")
        self.assertEqual(c.cmd("list-tubes"), ok_list("default", "bar"))
        c.cmd("use default")
        self.assertEqual(c.cmd("list-tubes"), ok_list("default"))

    def test_stats_tube_and_pause_do_not_create_or_keep_tubes(self):
        c = self.client()
        self.assertEqual(c.cmd("stats-tube nope"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("pause-tube nope 10"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("list-tubes"), ok_list("default"))
        c.cmd("use p")
        self.assertEqual(c.cmd("pause-tube p 100"), b"PAUSED\r\n")
        c.cmd("use default")
        self.assertEqual(c.cmd("list-tubes"), ok_list("default"))

    def test_tube_with_jobs_survives_until_empty(self):
        a, b = self.client(), self.client()
        ids = [a.put_id("r", tube="ready-t"), a.put_id("d", tube="delayed-t", delay=100),
               a.put_id("b", tube="buried-t")]
        a.cmd("reserve-job %d" % ids[2])
        a.cmd("bury %d 0" % ids[2])
        ids.append(a.put_id("v", tube="reserved-t"))
        b.cmd("reserve-job %d" % ids[3])
        a.close()
        time.sleep(0.2)
        self.assertEqual(b.cmd("list-tubes"), ok_list(*list_tubes_order(
            ["default", "ready-t", "delayed-t", "buried-t", "reserved-t"])))
        for jid in ids:
            self.assertEqual(b.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertEqual(b.cmd("list-tubes"), ok_list("default"))

    def test_using_and_watching_counts_follow_connections(self):
        a, b = self.client(), self.client()
        a.cmd("use t")
        a.cmd("watch t")
        b.cmd("use t")
        b.cmd("use t")  # using the same tube again does not count twice
        st = parse_yaml(b.cmd("stats-tube t"))
        self.assertEqual((st["current-using"], st["current-watching"]), ("2", "1"))
        a.close()
        self.assertTrue(wait_tube_stat(b, "t", "current-using", 1))
        self.assertEqual(parse_yaml(b.cmd("stats-tube t"))["current-watching"], "0")
        st = parse_yaml(b.cmd("stats-tube default"))
        self.assertEqual((st["current-using"], st["current-watching"]), ("0", "1"))

    def test_default_tube_never_removed(self):
        c = self.client()
        c.cmd("watch other")
        c.cmd("ignore default")
        c.cmd("use other")
        self.assertEqual(c.cmd("list-tubes"), ok_list("default", "other"))
        c.close()
        d = self.client()
        self.assertTrue(wait_until(lambda: d.cmd("list-tubes") == ok_list("default")))

    def test_list_order_after_a_tube_disappears(self):
        # beanstalkd keeps tubes in an array and fills the hole with the last element; a
        # cluster lists them by partition, each partition's in creation order
        # (list_tubes_order); the watch list is the connection's own either way
        created = ["default", "a", "b", "c", "d", "e"]

        def tubes(*names):
            if beanstalk.cluster_store():
                names = list_tubes_order(sorted(names, key=created.index))
            return ok_list(*names)
        c = self.client()
        for t in ("a", "b", "c", "d"):
            c.cmd("watch " + t)
        self.assertEqual(c.cmd("list-tubes"), tubes("default", "a", "b", "c", "d"))
        c.cmd("ignore b")
        self.assertEqual(c.cmd("list-tubes"), tubes("default", "a", "d", "c"))
        self.assertEqual(c.cmd("list-tubes-watched"), ok_list("default", "a", "d", "c"))
        c.cmd("watch e")
        self.assertEqual(c.cmd("list-tubes"), tubes("default", "a", "d", "c", "e"))
        c.cmd("ignore default")
        self.assertEqual(c.cmd("list-tubes"), tubes("default", "a", "d", "c", "e"))
        self.assertEqual(c.cmd("list-tubes-watched"), ok_list("e", "a", "d", "c"))

    def test_tube_recreated_with_fresh_stats(self):
        c = self.client()
        c.cmd("delete %d" % c.put_id("x", tube="t"))
        c.cmd("use default")
        self.assertEqual(c.cmd("stats-tube t"), b"NOT_FOUND\r\n")
        c.cmd("use t")
        st = parse_yaml(c.cmd("stats-tube t"))
        self.assertEqual((st["total-jobs"], st["cmd-delete"]), ("0", "0"))


class TestPipelining(ServerCase):
    def test_many_commands_in_one_send(self):
        c = self.client()
        data = (b"use pipe\r\n"
                b"put 1 0 10 3\r\nabc\r\n"
                b"put 0 0 10 2\r\nde\r\n"
                b"list-tube-used\r\n"
                b"watch pipe\r\n"
                b"reserve-with-timeout 0\r\n"
                b"reserve-with-timeout 0\r\n"
                b"reserve-with-timeout 0\r\n"
                b"delete %d\r\n"
                b"release %d 5 0\r\n"
                b"peek-ready\r\n"
                b"bogus\r\n"
                b"stats-job %d\r\n"
                b"list-tubes-watched\r\n") % (nth_id(2, "pipe"), nth_id(1, "pipe"),
                                                 nth_id(99, "pipe"))
        c.send(data)
        expected = [b"USING pipe\r\n", b"INSERTED %d\r\n" % nth_id(1, "pipe"), b"INSERTED %d\r\n" % nth_id(2, "pipe"), b"USING pipe\r\n",
                    b"WATCHING 2\r\n", b"RESERVED %d 2\r\nde\r\n" % nth_id(2, "pipe"), b"RESERVED %d 3\r\nabc\r\n" % nth_id(1, "pipe"),
                    b"TIMED_OUT\r\n", b"DELETED\r\n", b"RELEASED\r\n", b"FOUND %d 3\r\nabc\r\n" % nth_id(1, "pipe"),
                    b"UNKNOWN_COMMAND\r\n", b"NOT_FOUND\r\n", ok_list("default", "pipe")]
        self.assertEqual([c.read_reply() for _ in expected], expected)

    def test_many_puts_in_one_send(self):
        c = self.client()
        n = 500
        c.send(b"".join(b"put 0 0 60 4\r\n%04d\r\n" % i for i in range(n)))
        replies = [c.read_reply() for _ in range(n)]
        self.assertEqual(replies, [b"INSERTED %d\r\n" % nth_id(i + 1) for i in range(n)])
        c.send(b"reserve-with-timeout 0\r\n" * n)
        for i in range(n):
            self.assertEqual(c.read_reply(), b"RESERVED %d 4\r\n%04d\r\n" % (nth_id(i + 1), i))

    def test_use_between_pipelined_puts_routes_each_put(self):
        c, o = self.client(), self.client()
        c.send(b"use a\r\nput 0 0 60 1\r\nx\r\nuse b\r\nput 0 0 60 1\r\ny\r\n"
               b"list-tube-used\r\npeek-ready\r\nwatch a\r\nignore default\r\n"
               b"list-tubes-watched\r\nreserve-with-timeout 0\r\n")
        got = [c.read_reply() for _ in range(10)]
        x, y = inserted_id(got[1]), inserted_id(got[3])
        self.assertEqual(got, [b"USING a\r\n", b"INSERTED %d\r\n" % x, b"USING b\r\n",
                               b"INSERTED %d\r\n" % y, b"USING b\r\n", found(y, "y"),
                               b"WATCHING 2\r\n", b"WATCHING 1\r\n", ok_list("a"), reserved(x, "x")])
        self.assertNotEqual(x, y)
        self.assertEqual(parse_yaml(o.cmd("stats-job %d" % y))["tube"], '"b"')

    def test_more_pipelined_than_a_store_keeps_in_flight(self):
        # Past the Redis store's bound on one connection's calls in flight (1024), commands
        # wait and go on as answers come: all answered, in order.
        c = self.client()
        n = 3000
        c.send(b"".join(b"put 0 0 60 4\r\n%04d\r\npeek %d\r\n" % (i, nth_id(i + 1))
                        for i in range(n)))
        for i in range(n):
            self.assertEqual(c.read_reply(), b"INSERTED %d\r\n" % nth_id(i + 1))
            self.assertEqual(c.read_reply(), b"FOUND %d 4\r\n%04d\r\n" % (nth_id(i + 1), i))
        c.send(b"reserve\r\n" * n + b"".join(b"delete %d\r\n" % nth_id(i + 1) for i in range(n)))
        for i in range(n):
            self.assertEqual(c.read_reply(), b"RESERVED %d 4\r\n%04d\r\n" % (nth_id(i + 1), i))
        self.assertEqual([c.read_reply() for _ in range(n)], [b"DELETED\r\n"] * n)


class TestFragmentedInput(ServerCase):
    def test_command_and_body_byte_by_byte(self):
        c = self.client()
        body = b"split\r\nbody"
        data = b"put 0 0 10 %d\r\n%s\r\n" % (len(body), body)
        for i in range(len(data)):
            c.send(data[i:i + 1])
            time.sleep(0.003)
        self.assertEqual(c.read_reply(), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d %d\r\n%s\r\n" % (nth_id(1), len(body), body))

    def test_no_reply_before_body_complete(self):
        c = self.client()
        c.send(b"put 0 0 10 10\r\n01234")
        self.assertTrue(c.no_reply_within(0.3))
        c.send(b"56789\r")
        self.assertTrue(c.no_reply_within(0.3))
        c.send(b"\n")
        self.assertEqual(c.read_reply(), b"INSERTED %d\r\n" % nth_id(1))

    def test_crlf_split_between_sends(self):
        c = self.client()
        c.send(b"list-tube-used\r")
        self.assertTrue(c.no_reply_within(0.3))
        c.send(b"\nlist-tube-")
        self.assertEqual(c.read_reply(), b"USING default\r\n")
        c.send(b"used\r\n")
        self.assertEqual(c.read_reply(), b"USING default\r\n")

    def test_large_body_in_chunks(self):
        c = self.client()
        body = bytes(range(256)) * 255 + b"\xff" * 255  # 65535 bytes
        self.assertEqual(len(body), 65535)
        data = b"put 0 0 10 65535\r\n" + body + b"\r\n"
        for i in range(0, len(data), 997):
            c.send(data[i:i + 997])
        self.assertEqual(c.read_reply(), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d 65535\r\n" % nth_id(1) + body + b"\r\n")

    def test_body_and_next_command_in_same_send(self):
        c = self.client()
        c.send(b"put 0 0 10 3\r\nab")
        time.sleep(0.05)
        c.send(b"c\r\nlist-tube-used\r\npeek %d\r\n" % nth_id(1))
        self.assertEqual(c.read_reply(), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.read_reply(), b"USING default\r\n")
        self.assertEqual(c.read_reply(), b"FOUND %d 3\r\nabc\r\n" % nth_id(1))


class TestConcurrency(ServerCase):
    def test_producers_and_consumers_exactly_once(self):
        producers, consumers, per_producer = 4, 4, 150
        total = producers * per_producer
        received = []
        lock = threading.Lock()
        errors = []

        def produce(k):
            try:
                c = self.server.connect()
                c.cmd("use load")
                for i in range(per_producer):
                    body = b"p%d-%d" % (k, i)
                    r = c.put(body, pri=i % 7, ttr=120)
                    if not r.startswith(b"INSERTED "):
                        errors.append(r)
                c.close()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        def consume():
            try:
                c = self.server.connect()
                c.cmd("watch load")
                c.cmd("ignore default")
                while True:
                    with lock:
                        if len(received) >= total:
                            break
                    r = c.cmd("reserve-with-timeout 1")
                    if r == b"TIMED_OUT\r\n":
                        continue
                    head, body = r.split(b"\r\n", 1)
                    parts = head.split()
                    if parts[0] != b"RESERVED":
                        errors.append(r)
                        break
                    jid = int(parts[1])
                    d = c.cmd("delete %d" % jid)
                    if d != b"DELETED\r\n":
                        errors.append(d)
                    with lock:
                        received.append(body[:-2])
                c.close()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=consume) for _ in range(consumers)]
        threads += [threading.Thread(target=produce, args=(k,)) for k in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self.assertFalse(any(t.is_alive() for t in threads), "threads hung")
        self.assertEqual(errors, [])
        expected = sorted(b"p%d-%d" % (k, i) for k in range(producers)
                          for i in range(per_producer))
        self.assertEqual(len(received), total)
        self.assertEqual(sorted(received), expected)  # each exactly once
        c = self.client()
        st = self.stats(c)
        self.assertEqual((st["total-jobs"], st["cmd-delete"], st["current-jobs-ready"],
                          st["current-jobs-reserved"]), (str(total), str(total), "0", "0"))

    def test_many_simultaneous_connections(self):
        clients = [self.client() for _ in range(100)]
        for i, c in enumerate(clients):
            c.send(b"use t%d\r\n" % i)
        for i, c in enumerate(clients):
            self.assertEqual(c.read_reply(), b"USING t%d\r\n" % i)
        st = self.stats(clients[0])
        self.assertEqual(st["current-tubes"], "101")


class TestUnixSocket(unittest.TestCase):
    def test_unix_socket(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.sock")
            with Server(unix_path=path) as srv:
                self.assertTrue(stat.S_ISSOCK(os.stat(path).st_mode))
                a, b = srv.connect(), srv.connect()
                try:
                    self.assertEqual(a.put("over unix"), b"INSERTED %d\r\n" % nth_id(1))
                    self.assertEqual(b.cmd("reserve-with-timeout 1"),
                                     b"RESERVED %d 9\r\nover unix\r\n" % nth_id(1))
                    self.assertEqual(b.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")
                    b.send("reserve\r\n")
                    a.put("second")
                    self.assertEqual(b.read_reply(), b"RESERVED %d 6\r\nsecond\r\n" % nth_id(2))
                    a.close()
                    b.send("quit\r\n")
                    self.assertTrue(b.closed_by_peer(wait=3))
                finally:
                    a.close()
                    b.close()


if __name__ == "__main__":
    unittest.main()

"""Review of the Redis Cluster store (issue 17): reproducers of what the review found, each
against real cluster-enabled redis-server nodes (tests/lib/redis_cluster_fixture.py) and real
stalkd front ends.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/cluster/test_review.py
"""
import os
import re
import signal
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "redis"))
from storecase import StoreCase, redis_fixture  # noqa: E402
from beanstalk import parse_yaml, wait_until  # noqa: E402
from redis_cluster_fixture import RedisCluster, crc16, keyslot  # noqa: E402


def job_state(c, jid):
    r = c.cmd("stats-job %d" % jid)
    return parse_yaml(r)["state"] if r.startswith(b"OK ") else r


class ClusterCase(StoreCase):
    def setUp(self):
        super().setUp()
        self.cluster = RedisCluster(masters=3, replicas=0)
        self.addCleanup(self.cluster.close)
        self.prefix = redis_fixture.unique_prefix()

    def fe(self, *args, lease=None):
        return self.front_end(self.cluster.url(), self.prefix, *args, wait=0, lease=lease)

    def g_node(self):
        return self.cluster.owner(keyslot("{g}"))

    def leases(self):
        """{fid: lease expiry (Redis ms)} from the global partition's lease set."""
        flat = self.g_node().call("ZRANGE", self.prefix + ":{g}:fe", "0", "-1", "WITHSCORES")
        return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}

    def redis_ms(self):
        s, us = self.g_node().call("TIME")
        return int(s) * 1000 + int(us) // 1000

    def two_tubes(self):
        """Two tube names in partitions on different masters."""
        def owner(t):
            return self.cluster.owner(keyslot("{%d/1024}" % (crc16(t.encode()) % 1024)))
        a = "a"
        b = next(t for t in ("b%d" % i for i in range(1000)) if owner(t) is not owner(a))
        return a, b

    def new_fid(self, before):
        got = wait_until(lambda: set(self.leases()) - set(before), timeout=10.0)
        self.assertTrue(got)
        (fid,) = got
        return fid


class TestDeadFrontEnds(ClusterCase):
    def test_a_dead_front_end_reaped_from_g_before_its_partitions_keeps_its_jobs(self):
        # Y survives, with a long lease: it renews every 5 s, and between two renewals its list
        # of dead front ends (RedisStore::dead_) stays as the last renewal said. A dies with
        # nothing in any partition; B holds a reservation. A's lease runs out just before one of
        # Y's renewals, B's just after it: Y's dead list is [A]; each second Y's sweep finds no
        # partition holding anything of A (clean) and pumps {g}, and f_pump there reaps every
        # front end whose lease ran out, B too, although no partition reaped B. B's lease is
        # gone, so no front end ever lists B as dead again: its reservation stays reserved
        # until its TTR (an hour here), not about its lease (3 s) as docs/SCALE-OUT.md says.
        y = self.fe(lease=20000)
        fid_y = self.new_fid([])
        a = self.fe(lease=1000)
        fid_a = self.new_fid([fid_y])
        b = self.fe(lease=3000)
        fid_b = self.new_fid([fid_y, fid_a])
        cb = self.client(b)
        cb.cmd("use jobs")
        self.assertEqual(cb.cmd("watch jobs"), b"WATCHING 2\r\n")
        self.assertEqual(cb.cmd("ignore default"), b"WATCHING 1\r\n")
        jid = int(cb.put("x", ttr=3600).split()[1])
        self.assertTrue(cb.cmd("reserve-with-timeout 5").startswith(b"RESERVED %d " % jid))
        cy = self.client(y)
        self.assertEqual(job_state(cy, jid), "reserved")

        # Y's next renewal (its lease is set to renewal + 20 s, renewed every 5 s).
        next_renewal = self.leases()[fid_y] - 20000 + 5000
        # A (lease 1 s, renewed every 250 ms) and B (lease 3 s, every 750 ms) stop together
        # 1.2 s before it: A's lease ends 0.2-0.45 s before Y's renewal, B's 1-1.8 s after.
        wait = (next_renewal - 1200 - self.redis_ms()) / 1000.0
        if wait < 0.5:
            wait += 5.0
            next_renewal += 5000
        time.sleep(wait)
        b.ended_by_test = True
        b.signal(signal.SIGSTOP)   # B stops renewing (and stops sweeping) ...
        self.addCleanup(lambda: b.proc.poll() is None and b.signal(signal.SIGKILL))
        self.kill(a)               # ... A is gone
        # Well after B's lease: 3 s, plus Y's renewal and sweep.
        time.sleep(max(0.0, (next_renewal + 7000 - self.redis_ms()) / 1000.0))
        self.assertNotIn(fid_a, self.leases())
        self.assertNotIn(fid_b, self.leases(), "B's lease should have run out and gone")
        # B's reservation should have come back (docs/SCALE-OUT.md: "when a front end dies, the
        # next pump after its lease ends gives back its connections' reservations").
        back = wait_until(lambda: job_state(cy, jid) == "ready", timeout=60.0)
        self.assertTrue(back, "job %d still %s: B's reservation leaked (B reaped from {g} "
                        "before its partitions)" % (jid, job_state(cy, jid)))



class TestStalledMaster(ClusterCase):
    def test_a_stalled_master_holds_up_only_its_own_partitions_sweep(self):
        # A waits for a job on tube `a`; front end P puts a delayed job there after A's claim
        # (so A does not know its due time) and is killed: only A's once-a-second sweep
        # pumps `a`'s partition, which wakes A. Another master is stalled (SIGSTOP) all
        # along: its sweep read never answers, which must not hold up the sweep of the
        # others. (It did: one sweep at a time, waiting for every master.)
        a, b = self.two_tubes()
        ma = self.cluster.owner(keyslot("{%d/1024}" % (crc16(a.encode()) % 1024)))
        stalled = next(m for m in self.cluster.masters()
                       if m is not ma and m is not self.g_node())
        # A long lease for W: its waiter-lease refresh (every lease/2), whose answer also
        # tells the partition's next timer, does not come within the test. And a long
        # --store-retry for W: the stalled master's unanswered sweep read is not given up on
        # within the test, so a sweep that waited for it would never wake A (the reserve's
        # 60 s only bound that hang; no time is judged).
        w_fe, p_fe = self.fe("--store-retry", "600000", lease=600000), self.fe()
        w = self.client(w_fe, timeout=90.0)
        w.cmd("watch " + a)
        w.cmd("ignore default")
        stalled.pause()
        self.addCleanup(stalled.resume)
        time.sleep(1.5)   # a sweep or two after the stall: each asks the stalled master
        w.send(b"reserve-with-timeout 60\r\n")
        time.sleep(0.3)
        p = self.client(p_fe)
        p.cmd("use " + a)
        self.assertTrue(p.cmd(b"put 0 1 60 1\r\nx\r\n").startswith(b"INSERTED "))
        self.kill(p_fe)
        r = w.read_reply()
        self.assertTrue(r.startswith(b"RESERVED "), "the delayed job waited for the stalled "
                        "master's sweep: %r" % r)
        stalled.resume()


class TestPipelineOrder(ClusterCase):
    def test_pipelined_puts_keep_their_order_across_a_migration(self):
        # One connection pipelines puts into one tube (CanPipeline lets calls go behind calls:
        # "Redis answers a connection's calls in order"). While the tube's partition's slot
        # migrates, every call gets ASK and ClusterLink retries each one on its own backoff
        # (1 ms doubling to 50 ms); when the migration ends, a put sent late (short backoff)
        # reaches the new owner before one sent early (long backoff): the later put gets the
        # smaller id, so the tube's FIFO order is not the order of the puts.
        fe = self.fe()
        c = self.client(fe, timeout=30.0)
        tube = "order"
        self.assertEqual(c.cmd("use " + tube), b"USING order\r\n")
        part = crc16(tube.encode()) % 1024
        slot = keyslot("{%d/1024}" % part)
        c.put("first")
        src = self.cluster.owner(slot)
        dst = next(m for m in self.cluster.masters() if m is not src)
        n = 0
        stop = threading.Event()

        def writer():
            nonlocal n
            while not stop.is_set():
                c.send(b"put 0 0 60 1\r\nx\r\n")
                n += 1
                time.sleep(0.003)
        src_id, dst_id = src.node_id(), dst.node_id()
        dst.call("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.call("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        t = threading.Thread(target=writer)
        t.start()
        try:
            time.sleep(0.4)   # the puts wait, each on its own backoff
            while True:
                keys = src.call("CLUSTER", "GETKEYSINSLOT", slot, 100)
                if not keys:
                    break
                src.call("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
            for m in [dst, src] + [x for x in self.cluster.masters() if x not in (src, dst)]:
                m.call("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
            time.sleep(0.1)
        finally:
            stop.set()
            t.join()
        ids = []
        for _ in range(n):
            r = c.read_line()
            self.assertTrue(r.startswith(b"INSERTED "), r)
            ids.append(int(r.split()[1]))
        out_of_order = [(a, b) for a, b in zip(ids, ids[1:]) if b < a]
        self.assertEqual(out_of_order, [], "%d puts, %d pairs out of order" % (
            len(ids), len(out_of_order)))


def replicated(master):
    """Every replica of `master` online and at its replication offset."""
    info = redis_fixture.parse_info(master.call("INFO", "replication"))
    offset = int(info["master_repl_offset"])
    replicas = [dict(kv.split("=", 1) for kv in v.split(","))
                for k, v in info.items() if re.fullmatch(r"slave\d+", k)]
    return bool(replicas) and all(r.get("state") == "online" and int(r["offset"]) >= offset
                                  for r in replicas)

class TestCleanStop(ClusterCase):
    def setUp(self):
        StoreCase.setUp(self)
        # A slow failover: the promotion comes after a stopping front end gave up (5 s).
        self.cluster = RedisCluster(masters=3, replicas=1, node_timeout_ms=7000)
        self.addCleanup(self.cluster.close)
        self.prefix = redis_fixture.unique_prefix()

    def test_a_stop_whose_partition_quit_is_lost_keeps_its_lease(self):
        # RedisStore::Stop quit in the partitions and in {g} at once: when a partition's quit
        # was lost (its master down beyond --store-retry), the lease was gone all the same, so
        # no front end ever reaped that partition: the reservation stayed until its TTR.
        g_master = self.g_node()
        tube = next(t for t in ("t%d" % i for i in range(1000))
                    if self.cluster.owner(keyslot("{%d/1024}" % (crc16(t.encode()) % 1024)))
                    is not g_master)
        y = self.fe()
        b = self.fe()
        cb = self.client(b)
        cb.cmd("use " + tube)
        cb.cmd("watch " + tube)
        cb.cmd("ignore default")
        jid = int(cb.put("x", ttr=3600).split()[1])
        self.assertTrue(cb.cmd("reserve-with-timeout 5").startswith(b"RESERVED %d " % jid))
        slot = keyslot("{%d/1024}" % (crc16(tube.encode()) % 1024))
        owner = self.cluster.owner(slot)
        # --store-wait 0: the put and the reserve reach the replica when it has caught up with
        # its master's offset (its first sync may still be running on a busy machine).
        self.assertTrue(wait_until(lambda: replicated(owner), timeout=20.0),
                        "the replica did not catch up")
        old = self.cluster.kill_master(self.cluster.masters().index(owner))
        b.ended_by_test = True
        b.signal(signal.SIGTERM)
        b.proc.wait(timeout=20)
        self.cluster.wait_failover(old)
        cy = self.client(y)
        back = wait_until(lambda: job_state(cy, jid) == "ready", timeout=15.0, interval=0.2)
        self.assertTrue(back, "job %d still %s after B stopped and the failover" % (
            jid, job_state(cy, jid)))


def list_jobs(c, tube, state, frm, count):
    """(next, ids) of a list-jobs reply."""
    r = c.cmd("list-jobs %s %s %d %d" % (tube, state, frm, count))
    m = re.match(rb"OK \d+\r\n---\nnext: (\d+)\nids:", r)
    assert m, r
    return int(m.group(1)), [int(x) for x in re.findall(rb"\n- (\d+)", r)]


def all_pages(c, tube, state):
    """The ids of list-jobs over `tube` in `state`, 2 a page, following `next` (20 pages at
    most)."""
    seen, frm = [], 0
    for _ in range(20):
        nxt, ids = list_jobs(c, tube, state, frm, 2)
        seen += ids
        if nxt == 0:
            break
        frm = nxt
    return seen


class TestAcrossPartitions(ClusterCase):
    def test_reserve_best_across_masters_stats_list_tubes_list_jobs(self):
        fe = self.fe()
        c = self.client(fe)
        a, b = self.two_tubes()
        c.cmd("use " + a)
        ida = [int(c.put("a%d" % i, pri=5 + (i % 2) * 10).split()[1]) for i in range(7)]
        c.cmd("use " + b)
        idb = [int(c.put("b%d" % i, pri=10).split()[1]) for i in range(3)]
        w = self.client(fe)
        w.cmd("watch " + a)
        w.cmd("watch " + b)
        w.cmd("ignore default")
        # a's pri 5 (4 of them, oldest first), then b's pri 10 (3), then a's pri 15 (3)
        want = [ida[0], ida[2], ida[4], ida[6], idb[0], idb[1], idb[2], ida[1], ida[3], ida[5]]
        got = []
        for _ in range(10):
            r = w.cmd("reserve-with-timeout 0")
            self.assertTrue(r.startswith(b"RESERVED "), r)
            got.append(int(r.split()[1]))
        self.assertEqual(got, want)
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual(int(st["current-jobs-reserved"]), 10)
        self.assertEqual(int(st["current-tubes"]), 3)
        tubes = parse_yaml(c.cmd("list-tubes"))
        self.assertEqual(tubes[0], "default")
        self.assertEqual(sorted(tubes), sorted(["default", a, b]))
        # list-jobs pages through a's reserved jobs, 2 at a time, in id order
        self.assertEqual(all_pages(c, a, "reserved"), sorted(ida))
        for jid in got:
            self.assertEqual(w.cmd("release %d 0 0" % jid), b"RELEASED\r\n")
        self.assertEqual(all_pages(c, b, "ready"), sorted(idb))


class TestStalledFrontEnd(ClusterCase):
    def test_a_front_end_back_from_a_stall_keeps_its_new_reservations(self):
        # X stalls past its lease: Y lists it dead (RedisStore::dead_, refreshed with Y's own
        # lease, every 5 s here) and reaps it partition by partition: X's reservation comes
        # back (at least once: X was taken for dead). X then resumes, renews its lease and
        # reserves another job. Y's dead_ still names X until Y's next renewal, and each of
        # Y's sweeps meanwhile reaps X again wherever X holds something: X's new, live
        # reservation is given back while X's client works on it. On one Redis the reap and
        # the lease are read in one function, so a renewed front end is never reaped.
        y = self.fe(lease=20000)
        x = self.fe(lease=1000)
        cy, cx = self.client(y), self.client(x)
        cy.cmd("use t")
        j1 = int(cy.put("j1", pri=100, ttr=3600).split()[1])
        cx.cmd("watch t")
        cx.cmd("ignore default")
        self.assertTrue(cx.cmd("reserve-with-timeout 5").startswith(b"RESERVED %d " % j1))
        x.signal(signal.SIGSTOP)
        self.addCleanup(lambda: x.proc.poll() is None and x.signal(signal.SIGCONT))
        # Y reaps X (Y renews every 5 s: within about 6 s); X resumes at once, before Y's
        # next sweep would drop X's lease from {g}.
        self.assertTrue(wait_until(lambda: job_state(cy, j1) == "ready", timeout=10.0,
                                   interval=0.05))
        j2 = int(cy.put("j2", pri=0, ttr=3600).split()[1])
        x.signal(signal.SIGCONT)
        time.sleep(0.3)   # X renews its lease at once
        self.assertTrue(cx.cmd("reserve-with-timeout 5").startswith(b"RESERVED %d " % j2))
        time.sleep(2.5)   # two of Y's sweeps, before Y's next renewal
        self.assertEqual(job_state(cy, j2), "reserved",
                         "X's reservation of %d, made after X renewed its lease, was given "
                         "back by Y's stale list of dead front ends" % j2)
        # And when X dies now, j2 comes back after X's lease (1 s) once Y lists X dead (Y's
        # renewals are 5 s apart) and sweeps. It did not: X's renewal did not tell X it had
        # been reaped (its lease was still in {g}: only the partitions were reaped), so X's
        # session took itself for listed in X's fs: set there, and j2 was never listed.
        self.kill(x)
        back = wait_until(lambda: job_state(cy, j2) == "ready", timeout=12.0, interval=0.2)
        self.assertTrue(back, "j2 (%d) still %s after X died" % (j2, job_state(cy, j2)))


class TestWaitPerMaster(ClusterCase):
    def setUp(self):
        StoreCase.setUp(self)
        self.cluster = RedisCluster(masters=3, replicas=1, extra=("min-replicas-to-write 1",))
        self.addCleanup(self.cluster.close)
        self.prefix = redis_fixture.unique_prefix()
        time.sleep(1.5)   # each master counts its replica as good (refreshed each second)

    def test_a_stalled_replica_fails_its_masters_changes_only_in_order(self):
        fe = self.front_end(self.cluster.url(), self.prefix, wait=1)
        a, b = self.two_tubes()
        ma = self.cluster.owner(keyslot("{%d/1024}" % (crc16(a.encode()) % 1024)))
        replica = next(r for r in self.cluster.replicas()
                       if int(redis_fixture.parse_info(r.call("INFO", "replication"))
                              ["master_port"]) == ma.port)
        c1, c2, c3 = self.client(fe), self.client(fe), self.client(fe)
        c1.cmd("use " + a)
        c2.cmd("use " + b)
        self.assertTrue(c1.put("ok").startswith(b"INSERTED "))
        replica.pause()
        self.addCleanup(replica.resume)
        # By order, not by time: the put on b (another master) is answered while the put on
        # a still waits for WAIT (2 s) to give up. A put on b held behind a's WAIT would be
        # answered after a's INTERNAL_ERROR every time; a machine too slow to answer b within
        # those 2 s loses the race now and then, so the pair is tried up to 5 times.
        for attempt in range(5):
            t0 = time.monotonic()
            c1.send(b"put 0 0 60 1\r\nx\r\n")
            self.assertTrue(c2.put("y").startswith(b"INSERTED "))
            b_first = c1.no_reply_within(0.001)
            self.assertEqual(c1.read_line(), b"INTERNAL_ERROR\r\n")
            # WAIT's 2 s, a lower bound no slowness can break (t0 before the send)
            self.assertGreater(time.monotonic() - t0, 1.9)
            if b_first:
                break
        self.assertTrue(b_first, "a put on another master waited for a's WAIT, 5 times")
        # One connection, both masters: replies in command order.
        c3.send(("use %s\r\nput 0 0 60 1\r\nx\r\nuse %s\r\nput 0 0 60 1\r\ny\r\n"
                 % (a, b)).encode())
        got = [c3.read_line() for _ in range(4)]
        self.assertEqual(got[0], b"USING %s\r\n" % a.encode())
        self.assertEqual(got[1], b"INTERNAL_ERROR\r\n")
        self.assertEqual(got[2], b"USING %s\r\n" % b.encode())
        self.assertTrue(got[3].startswith(b"INSERTED "), got)


if __name__ == "__main__":
    unittest.main()

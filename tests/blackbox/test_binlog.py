"""Black-box tests of the durable binlog (-b): restarts, kill -9 under load, the directory
lock, torn tails, damaged records, a full disk, write errors, compaction and adopting a
binlog written by Debian's beanstalkd."""
import glob
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from beanstalk import BEANSTALKD_BIN, STALKD_BIN, Server, cpu_seconds, flood, free_port, is_beanstalkd, is_sanitized, parse_yaml, rss_kb, wait_until  # noqa: E402


def segments(d):
    """binlog.N paths in d, oldest first."""
    paths = glob.glob(os.path.join(d, "binlog.*"))
    return sorted(paths, key=lambda p: int(p.rsplit(".", 1)[1]))


def data_end(path):
    """Offset just after the last record of a stalkd segment."""
    with open(path, "rb") as f:
        data = f.read()
    off = 16
    while off + 9 <= len(data):
        crc, length, typ = struct.unpack_from("<IIB", data, off)
        if crc == 0 and length == 0 and typ == 0:
            break
        off += 9 + length
    return off


def newest_with_data(d):
    for p in reversed(segments(d)):
        if data_end(p) > 16:
            return p
    return None


def kill9(srv):
    srv.proc.kill()
    srv.proc.wait()
    srv.stop()


@unittest.skipIf(is_beanstalkd(), "stalkd's binlog format")
class BinlogTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stalkd_binlog_")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, *args, env=None, binlog=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        s = Server(args=["-b", binlog or self.dir] + list(args), env=full_env)
        self.servers.append(s)
        return s

    def run_stalkd(self, *args, env=None):
        """Runs stalkd expecting it to exit at start-up; returns (code, stderr)."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        p = subprocess.run([STALKD_BIN, "-l", "127.0.0.1", "-p", str(free_port()), "-b", self.dir]
                           + list(args), capture_output=True, timeout=20, env=full_env)
        return p.returncode, p.stderr.decode()

    def test_every_state_survives_restart(self):
        s = self.start("-f", "0")
        c = s.connect()
        self.assertEqual(c.cmd("use emails"), b"USING emails\r\n")
        self.assertEqual(c.put(b"ready-job", pri=5, ttr=11), b"INSERTED 1\r\n")
        self.assertEqual(c.put(b"delayed-job", pri=6, delay=300), b"INSERTED 2\r\n")
        self.assertEqual(c.put(b"bury-me", pri=7), b"INSERTED 3\r\n")
        self.assertEqual(c.put(b"x" * 60000, pri=8, tube="big"), b"INSERTED 4\r\n")
        self.assertEqual(c.put(b"deleted"), b"INSERTED 5\r\n")
        self.assertEqual(c.put(b"reserved"), b"INSERTED 6\r\n")
        self.assertEqual(c.put(b"kicked"), b"INSERTED 7\r\n")
        self.assertEqual(c.cmd("delete 5"), b"DELETED\r\n")
        self.assertTrue(c.cmd("reserve-job 3").startswith(b"RESERVED 3"))
        self.assertEqual(c.cmd("bury 3 99"), b"BURIED\r\n")
        self.assertTrue(c.cmd("reserve-job 7").startswith(b"RESERVED 7"))
        self.assertEqual(c.cmd("release 7 3 0"), b"RELEASED\r\n")
        self.assertTrue(c.cmd("reserve-job 6").startswith(b"RESERVED 6"))
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual(st["binlog-current-index"], "1")
        self.assertEqual(st["binlog-oldest-index"], "1")
        # 7 puts, a bury, a release and a delete; the 3 reserves write nothing.
        self.assertEqual(int(st["binlog-records-written"]), 10)
        before = {i: parse_yaml(c.cmd("stats-job %d" % i)) for i in (1, 2, 3, 4, 6, 7)}
        self.assertEqual(before[1]["file"], "1")
        s.stop()

        s = self.start("-f", "0")
        c = s.connect()
        self.assertEqual(c.cmd("peek 5"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 9\r\nready-job\r\n")
        self.assertEqual(c.cmd("peek 4"), b"FOUND 4 60000\r\n" + b"x" * 60000 + b"\r\n")
        after = {i: parse_yaml(c.cmd("stats-job %d" % i)) for i in (1, 2, 3, 4, 6, 7)}
        for i, b in before.items():
            a = after[i]
            for k in ("tube", "pri", "ttr", "delay", "reserves", "releases", "buries", "kicks",
                      "timeouts", "file"):
                self.assertEqual(a[k], b[k], "job %d %s" % (i, k))
        # Reserved, then buried or released: that record carries the count. Job 6, reserved
        # at the stop: a clean stop closes the connection first, and the job's return to
        # ready is written with its count (after kill -9 it is the put's count: the test
        # below).
        self.assertEqual([after[i]["reserves"] for i in (3, 6, 7)], ["1", "1", "1"])
        self.assertEqual(after[1]["state"], "ready")
        self.assertEqual(after[2]["state"], "delayed")
        self.assertTrue(290 <= int(after[2]["time-left"]) <= 300, after[2])
        self.assertEqual(after[3]["state"], "buried")
        self.assertEqual(after[3]["pri"], "99")
        self.assertEqual(after[6]["state"], "ready")  # reserved comes back ready
        self.assertEqual(after[7]["pri"], "3")
        self.assertEqual(c.cmd("put 0 0 1 1\r\nn"), b"INSERTED 8\r\n")
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual(st["current-jobs-buried"], "1")
        self.assertEqual(st["current-jobs-delayed"], "1")
        # Writing goes on after the last record of the segment the last run wrote in.
        self.assertEqual(st["binlog-current-index"], "1")
        self.assertEqual(parse_yaml(c.cmd("stats-job 8"))["file"], "1")

    def test_reserve_writes_no_record_and_kill9_undoes_it(self):
        s = self.start("-f", "0")
        c, w = s.connect(), s.connect()
        body = b"body\r\nwith " + bytes(range(256)) * 4
        self.assertEqual(c.put(body, pri=1), b"INSERTED 1\r\n")
        self.assertEqual(c.put(b"second", pri=2), b"INSERTED 2\r\n")
        self.assertEqual(c.put(b"third", pri=3), b"INSERTED 3\r\n")
        self.assertEqual(c.put(b"buried", pri=4), b"INSERTED 4\r\n")
        self.assertEqual(c.put(b"delayed", pri=5, delay=300), b"INSERTED 5\r\n")
        self.assertTrue(c.cmd("reserve-job 4").startswith(b"RESERVED 4"))
        self.assertEqual(c.cmd("bury 4 4"), b"BURIED\r\n")
        path = newest_with_data(self.dir)
        written, end = parse_yaml(c.cmd("stats"))["binlog-records-written"], data_end(path)
        self.assertEqual(written, "6")  # 5 puts and the bury
        # Each way to reserve: nothing is written, in the count or in the file.
        self.assertEqual(w.cmd("reserve"), b"RESERVED 1 %d\r\n" % len(body) + body + b"\r\n")
        self.assertEqual(w.cmd("reserve-with-timeout 0"), b"RESERVED 2 6\r\nsecond\r\n")
        self.assertEqual(w.cmd("reserve-job 3"), b"RESERVED 3 5\r\nthird\r\n")
        self.assertEqual(w.cmd("reserve-job 4"), b"RESERVED 4 6\r\nburied\r\n")
        self.assertEqual(w.cmd("reserve-job 5"), b"RESERVED 5 7\r\ndelayed\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats"))["binlog-records-written"], written)
        self.assertEqual(data_end(path), end)
        # A release is written (and carries the reserve); the next reserve again is not.
        self.assertEqual(w.cmd("release 2 2 0"), b"RELEASED\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats"))["binlog-records-written"], "7")
        self.assertEqual(w.cmd("reserve"), b"RESERVED 2 6\r\nsecond\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats"))["binlog-records-written"], "7")
        self.assertEqual(parse_yaml(c.cmd("stats-job 2"))["reserves"], "2")
        kill9(s)  # all five still reserved by w

        s = self.start("-f", "0")
        c = s.connect()
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-reserved"]), ("3", "0"))
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 %d\r\n" % len(body) + body + b"\r\n")
        js = {i: parse_yaml(c.cmd("stats-job %d" % i)) for i in range(1, 6)}
        # Each comes back as its latest record has it, as in beanstalkd: ready, or buried or
        # delayed when reserve-job took it from there.
        self.assertEqual([js[i]["state"] for i in range(1, 6)],
                         ["ready"] * 3 + ["buried", "delayed"])
        self.assertTrue(250 <= int(js[5]["time-left"]) <= 300, js[5])
        # reserves: as of each job's latest record (job 2: its release, after one reserve).
        self.assertEqual([js[i]["reserves"] for i in range(1, 6)], ["0", "1", "0", "1", "0"])
        self.assertEqual(c.cmd("reserve-with-timeout 0"),
                         b"RESERVED 1 %d\r\n" % len(body) + body + b"\r\n")

    def test_ids_are_never_reused_after_restart(self):
        s = self.start("-f", "0")
        c = s.connect()
        for i in range(1, 4):
            self.assertEqual(c.put("j%d" % i), b"INSERTED %d\r\n" % i)
        self.assertEqual(c.cmd("delete 3"), b"DELETED\r\n")
        c.close()
        kill9(s)
        s = self.start("-f", "0")
        c = s.connect()
        self.assertEqual(c.put("after"), b"INSERTED 4\r\n")
        self.assertEqual(c.cmd("peek 3"), b"NOT_FOUND\r\n")
        c.close()

    def test_kill9_under_load_loses_nothing_replied(self):
        s = self.start("-f", "0")
        # A delete sent but not answered before the kill may or may not have happened.
        inserted, deleted, attempted, lock = set(), set(), set(), threading.Lock()
        stop = threading.Event()

        def worker(n):
            c = s.connect()
            rng = random.Random(n)
            mine = []
            try:
                while not stop.is_set():
                    r = c.put(b"job-%d" % rng.randrange(10 ** 6), pri=rng.randrange(100))
                    jid = int(r.split()[1])
                    with lock:
                        inserted.add(jid)
                    mine.append(jid)
                    if rng.random() < 0.4 and mine:
                        victim = mine.pop(rng.randrange(len(mine)))
                        with lock:
                            attempted.add(victim)
                        if c.cmd("delete %d" % victim) == b"DELETED\r\n":
                            with lock:
                                deleted.add(victim)
            except (OSError, EOFError, IndexError, ValueError):
                pass

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        # The kill comes once 500 puts have been answered (however long a busy machine takes;
        # the bound only ends a hang), with the workers still putting and deleting.
        deadline = time.monotonic() + 120
        while True:
            with lock:
                if len(inserted) >= 500:
                    break
            self.assertLess(time.monotonic(), deadline, "500 puts not answered in 120 s")
            time.sleep(0.01)
        with lock:
            snap_inserted, snap_deleted = set(inserted), set(deleted)
        kill9(s)
        stop.set()
        for t in threads:
            t.join()
        s = self.start("-f", "0")
        c = s.connect()
        for jid in sorted(snap_inserted):
            r = c.cmd("peek %d" % jid)
            if jid in snap_deleted:
                self.assertEqual(r, b"NOT_FOUND\r\n", "deleted job %d came back" % jid)
            elif jid not in attempted:
                self.assertTrue(r.startswith(b"FOUND %d " % jid), "job %d lost: %r" % (jid, r))

    def assertNothingYet(self, c, wait=0.01):
        c.sock.settimeout(wait)
        try:
            with self.assertRaises(socket.timeout):
                c.read_line()
        finally:
            c.sock.settimeout(None)

    def test_f0_reply_waits_for_the_records_it_shows(self):
        # Every sync takes 1 s: a reply still waiting for one is plainly distinguishable
        # from one sent at once, by order of arrival alone.
        s = self.start("-f", "0", env={"STALKD_TEST_SYNC_DELAY_MS": "1000"})
        p, w, x = s.connect(), s.connect(), s.connect()
        self.assertEqual(p.put(b"a"), b"INSERTED 1\r\n")  # durable once answered
        p.send(b"put 0 0 10 1\r\nb\r\n")  # job 2: its sync is under way for 1 s
        time.sleep(0.1)
        # Showing job 1 depends on job 1's records only: answered while job 2 waits.
        w.send(b"reserve\r\n")
        self.assertEqual(w.read_reply(), b"RESERVED 1 1\r\na\r\n")
        self.assertNothingYet(p)
        # Showing job 2, or counts that include it, waits for its sync.
        x.send(b"peek 2\r\n")
        w.send(b"stats-tube default\r\n")
        self.assertNothingYet(x, 0.2)
        self.assertNothingYet(w)
        self.assertEqual(p.read_line(), b"INSERTED 2\r\n")
        self.assertEqual(x.read_reply(), b"FOUND 2 1\r\nb\r\n")
        self.assertIn(b"current-jobs-ready: 1", w.read_reply())

    def test_restart_gives_back_the_memory_of_the_replay(self):
        s = self.start("-F")
        if is_sanitized(s.pid):
            self.skipTest("ASan's allocator keeps freed memory in quarantine")
        c = s.connect()
        n, batch = 100000, 1000
        for _ in range(n // batch):
            c.send(b"".join(b"put 0 0 60 200\r\n" + b"r" * 200 + b"\r\n" for _ in range(batch)))
            for _ in range(batch):
                self.assertTrue(c.read_line().startswith(b"INSERTED "))
        before = rss_kb(s.pid)
        kill9(s)
        s = self.start("-F")
        c = s.connect()
        self.assertEqual(int(parse_yaml(c.cmd("stats"))["current-jobs-ready"]), n)
        # The replay's temporary index of every record is freed and given back: the
        # restarted server holds about what the first one did (it held ~1.5x before).
        after = rss_kb(s.pid)
        self.assertLess(after, before * 1.2)

    def test_second_server_on_the_directory_exits_10(self):
        self.start()
        code, err = self.run_stalkd()
        self.assertEqual(code, 10)
        self.assertIn("another server", err)

    def test_torn_tail_is_cleared_and_written_over(self):
        s = self.start("-f", "0")
        c = s.connect()
        for i in range(5):
            c.put(b"job%d" % i)
        kill9(s)
        path = newest_with_data(self.dir)
        end = data_end(path)
        with open(path, "r+b") as f:  # half of a record, then garbage
            f.seek(end)
            f.write(struct.pack("<IIB", 0x12345678, 500, 1) + b"\x07" * 40)
        s = self.start()
        c = s.connect()
        for i in range(1, 6):
            self.assertTrue(c.cmd("peek %d" % i).startswith(b"FOUND"))
        self.assertEqual(c.put(b"more"), b"INSERTED 6\r\n")
        s.proc.send_signal(signal.SIGTERM)
        _, err = s.proc.communicate(timeout=10)
        self.assertIn("torn tail (49 bytes) cleared", err.decode())
        # The new record took the torn one's place; what the torn one left after it is zeros.
        with open(path, "rb") as f:
            data = f.read()
        new_end = data_end(path)
        self.assertGreater(new_end, end)
        self.assertEqual(data[new_end:new_end + 100], b"\0" * 100)
        s = self.start()
        c = s.connect()
        for i in range(1, 7):
            self.assertTrue(c.cmd("peek %d" % i).startswith(b"FOUND"))

    def test_damaged_record_stops_start_up_unless_skipped(self):
        s = self.start("-f", "0")
        c = s.connect()
        for i in range(3):
            c.put(b"job%d" % i)
        s.stop()
        path = segments(self.dir)[0]
        with open(path, "r+b") as f:  # flip a byte inside the first record
            f.seek(16 + 20)
            b = f.read(1)
            f.seek(16 + 20)
            f.write(bytes([b[0] ^ 0xFF]))
        code, err = self.run_stalkd()
        self.assertNotEqual(code, 0)
        self.assertIn("binlog.1: offset 16", err)
        self.assertIn("--binlog-skip-damaged", err)
        s = self.start("--binlog-skip-damaged")
        c = s.connect()
        self.assertEqual(c.cmd("peek 1"), b"NOT_FOUND\r\n")
        self.assertTrue(c.cmd("peek 2").startswith(b"FOUND 2"))
        self.assertTrue(c.cmd("peek 3").startswith(b"FOUND 3"))

    def test_job_larger_than_a_binlog_file_is_kept_through_kill9(self):
        # -s 4096 -z 100000: a 50,000-byte job goes into a binlog file grown for it, and
        # comes back after kill -9 in its state, as do the jobs around it
        s = self.start("-s", "4096", "-z", "100000", "-f", "0")
        c = s.connect()
        big = bytes(random.Random(7).randrange(256) for _ in range(50000))
        self.assertEqual(c.put(b"before"), b"INSERTED 1\r\n")
        self.assertEqual(c.put(big, pri=3), b"INSERTED 2\r\n")
        self.assertEqual(c.put(b"after"), b"INSERTED 3\r\n")
        self.assertEqual(c.put(big, delay=600), b"INSERTED 4\r\n")
        self.assertTrue(c.cmd("reserve-job 2").startswith(b"RESERVED 2 50000"))
        self.assertEqual(c.cmd("bury 2 7"), b"BURIED\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats"))["binlog-max-size"], "4096")
        kill9(s)
        s = self.start("-s", "4096", "-z", "100000", "-f", "0")
        c = s.connect()
        self.assertEqual(c.cmd("peek 2"), b"FOUND 2 50000\r\n" + big + b"\r\n")
        self.assertEqual(c.cmd("peek 4"), b"FOUND 4 50000\r\n" + big + b"\r\n")
        st = parse_yaml(c.cmd("stats-job 2"))
        self.assertEqual((st["state"], st["pri"], st["buries"]), ("buried", "7", "1"))
        self.assertEqual(parse_yaml(c.cmd("stats-job 4"))["state"], "delayed")
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 6\r\nbefore\r\n")
        self.assertEqual(c.cmd("peek 3"), b"FOUND 3 5\r\nafter\r\n")
        # deleted, it stays deleted; and compaction can take the files behind it away
        self.assertEqual(c.cmd("delete 4"), b"DELETED\r\n")
        for _ in range(300):
            self.assertTrue(c.put(b"z" * 500).startswith(b"INSERTED"))
            jid = int(c.cmd("peek-ready").split()[1])
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertGreater(int(parse_yaml(c.cmd("stats"))["binlog-oldest-index"]), 1)
        kill9(s)
        s = self.start("-s", "4096", "-z", "100000")
        c = s.connect()
        self.assertEqual(c.cmd("peek 2"), b"FOUND 2 50000\r\n" + big + b"\r\n")
        self.assertEqual(c.cmd("peek 4"), b"NOT_FOUND\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats"))["current-jobs-buried"], "1")

    def test_job_larger_than_the_default_binlog_file(self):
        # the case: -z 20000000 and a 15,000,000-byte put with the default -s (10 MB)
        s = self.start("-z", "20000000")
        c = s.connect(timeout=60)
        body = b"0123456789abcdef" * (15000000 // 16)
        self.assertEqual(c.put(body), b"INSERTED 1\r\n")
        kill9(s)
        s = self.start("-z", "20000000")
        c = s.connect(timeout=60)
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 15000000\r\n" + body + b"\r\n")
        self.assertEqual(c.cmd("delete 1"), b"DELETED\r\n")

    def test_full_disk_refuses_a_large_job_and_takes_small_ones(self):
        size = 65536
        s = self.start("-s", str(size), "-z", "1000000", "-f", "0",
                       env={"STALKD_TEST_DISK_BYTES": str(4 * size)})
        c = s.connect()
        # no room to grow a file by 300 KB: OUT_OF_MEMORY, and nothing else is affected
        self.assertEqual(c.put(b"L" * 300000), b"OUT_OF_MEMORY\r\n")
        self.assertEqual(c.put(b"small"), b"INSERTED 2\r\n")  # the refused put spent id 1
        self.assertEqual(c.put(b"M" * 100000), b"INSERTED 3\r\n")
        kill9(s)
        s = self.start("-s", str(size), "-z", "1000000")
        c = s.connect()
        self.assertEqual(c.cmd("peek 1"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("peek 2"), b"FOUND 2 5\r\nsmall\r\n")
        self.assertEqual(c.cmd("peek 3"), b"FOUND 3 100000\r\n" + b"M" * 100000 + b"\r\n")

    def test_full_disk_refuses_puts_but_accepted_jobs_keep_working(self):
        size = 65536
        s = self.start("-s", str(size), "-f", "0", env={"STALKD_TEST_DISK_BYTES": str(4 * size)})
        c = s.connect()
        ids = []
        for i in range(200):
            r = c.put(b"y" * 2000)
            if r == b"OUT_OF_MEMORY\r\n":
                break
            ids.append(int(r.split()[1]))
        else:
            self.fail("the disk never filled")
        self.assertGreater(len(ids), 20)
        self.assertEqual(c.put(b"y" * 2000), b"OUT_OF_MEMORY\r\n")
        # Every accepted job can still change state and be deleted.
        for jid in ids[:10]:
            self.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            self.assertEqual(c.cmd("bury %d 1" % jid), b"BURIED\r\n")
            self.assertEqual(c.cmd("kick-job %d" % jid), b"KICKED\r\n")
        for jid in ids[10:20]:
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        s.stop()
        s = self.start("-s", str(size))
        c = s.connect()
        for jid in ids[20:]:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND"), jid)
        for jid in ids[10:20]:
            self.assertEqual(c.cmd("peek %d" % jid), b"NOT_FOUND\r\n")
        st = parse_yaml(c.cmd("stats-job %d" % ids[0]))
        self.assertEqual((st["state"], st["buries"], st["kicks"]), ("ready", "1", "1"))
        self.assertEqual(parse_yaml(c.cmd("stats"))["current-jobs-ready"], str(len(ids) - 10))

    def test_full_disk_recovers_after_deletes_and_restarts_while_full(self):
        size = 65536
        env = {"STALKD_TEST_DISK_BYTES": str(4 * size)}
        s = self.start("-s", str(size), "-f", "0", env=env)
        c = s.connect()
        ids = []
        for _ in range(300):
            r = c.put(b"w" * 2000)
            if r == b"OUT_OF_MEMORY\r\n":
                break
            ids.append(int(r.split()[1]))
        else:
            self.fail("the disk never filled")
        # A restart while the disk is still full comes up and serves every job.
        c.close()
        s.stop()
        s = self.start("-s", str(size), "-f", "0", env=env)
        c = s.connect()
        for jid in ids:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)
        # Deleting frees space: puts succeed again.
        for jid in ids:
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertTrue(wait_until(lambda: c.put(b"v" * 2000).startswith(b"INSERTED"), 5),
                        "puts still refused after every job was deleted")
        c.close()

    def put_until_cut_off(self, s, most):
        """Puts until the server closes the connection (a binlog failure); returns the ids
        acknowledged before that."""
        c = s.connect()
        inserted = []
        for _ in range(most):
            try:
                r = c.put(b"z")
            except (EOFError, ConnectionResetError):
                break  # the put whose record failed is never acknowledged
            self.assertTrue(r.startswith(b"INSERTED "), r)
            inserted.append(int(r.split()[1]))
        else:
            self.fail("the connection was never closed")
        self.assertGreater(len(inserted), 0)
        c.close()
        return inserted

    def test_write_error_stops_puts_and_keeps_serving(self):
        s = self.start("-f", "0", env={"STALKD_TEST_FAIL_WRITES_AFTER": "20"})
        inserted = self.put_until_cut_off(s, 40)
        c = s.connect()
        self.assertEqual(c.put(b"z"), b"OUT_OF_MEMORY\r\n")
        self.assertEqual(c.put(b"z"), b"OUT_OF_MEMORY\r\n")
        self.assertTrue(c.cmd("peek 1").startswith(b"FOUND 1"))
        self.assertTrue(c.cmd("reserve-with-timeout 0").startswith(b"RESERVED"))
        self.assertTrue(c.cmd("stats").startswith(b"OK"))
        c.close()
        # Every acknowledged put is on disk.
        kill9(s)
        s = self.start("-f", "0")
        c = s.connect()
        for jid in inserted:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)
        c.close()

    def test_sync_error_closes_the_unacknowledged_and_keeps_serving(self):
        # -f 0 syncs on a thread of its own; a failed fdatasync must not let the replies it
        # was to make durable go out.
        s = self.start("-f", "0", env={"STALKD_TEST_FAIL_SYNCS_AFTER": "10"})
        inserted = self.put_until_cut_off(s, 200)
        c = s.connect()
        self.assertEqual(c.put(b"s"), b"OUT_OF_MEMORY\r\n")
        for jid in inserted:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)
        self.assertTrue(c.cmd("stats").startswith(b"OK"))
        c.close()
        s.signal(signal.SIGTERM)
        _, err = s.proc.communicate(timeout=10)
        self.assertIn(b"binlog: fsync of", err)
        # Every acknowledged put was synced before its reply: all are there after a restart.
        s = self.start("-f", "0")
        c = s.connect()
        for jid in inserted:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)
        self.assertIn(b"closed ", err)

    def test_pipelined_puts_under_f0_are_answered_in_order(self):
        s = self.start("-f", "0")
        c = s.connect()
        n = 500
        c.send(b"".join(b"put 0 0 10 3\r\nabc\r\n" for _ in range(n)))
        ids = [int(c.read_line().split()[1]) for _ in range(n)]
        self.assertEqual(ids, list(range(1, n + 1)))
        # A client that leaves while its replies wait for the sync does not disturb the
        # others (test_held_connection_neither_spins_nor_reads covers the cost).
        d = s.connect()
        d.send(b"".join(b"put 0 0 10 1\r\nx\r\n" for _ in range(50)))
        d.close()
        e = s.connect()
        self.assertTrue(e.cmd("stats").startswith(b"OK"))
        self.assertEqual(e.put(b"after"), b"INSERTED %d\r\n" % (n + 51))
        kill9(s)
        s = self.start("-f", "0")
        c = s.connect()
        for jid in ids:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)

    def test_held_connection_neither_spins_nor_reads(self):
        # While a connection's reply waits for a (here 1.5 s) sync, the server must not
        # poll it in a loop (a half-closed client), nor buffer what it keeps sending beyond
        # the input bound it reads ahead.
        s = self.start("-f", "0", env={"STALKD_TEST_SYNC_DELAY_MS": "1500"})
        half, flooder = s.connect(), s.connect()
        self.assertTrue(half.cmd("stats").startswith(b"OK"))  # start-up's syncs are done
        half.send(b"put 0 0 10 1\r\nh\r\n")
        flooder.send(b"put 0 0 10 1\r\nf\r\n")
        time.sleep(0.2)  # both held now
        half.sock.shutdown(socket.SHUT_WR)
        cpu, rss = cpu_seconds(s.pid), rss_kb(s.pid)
        sent = flood(flooder.sock, b"stats\r\n" * 8192, 0.8)
        self.assertLess(cpu_seconds(s.pid) - cpu, 0.4, "the server spun while replies waited")
        self.assertLess(rss_kb(s.pid) - rss, 4 * 1024, "read %d bytes while held" % sent)
        self.assertEqual(half.read_line(), b"INSERTED 1\r\n")
        self.assertTrue(half.closed_by_peer(wait=5))
        self.assertEqual(flooder.read_line(), b"INSERTED 2\r\n")

    def test_put_and_delete_forever_keeps_few_segments(self):
        s = self.start("-s", "65536", "-F")
        c = s.connect()
        self.assertEqual(c.put(b"long-lived"), b"INSERTED 1\r\n")
        body = b"w" * 1000
        most = 0
        for i in range(1500):
            c.send(b"put 0 0 10 1000\r\n" + body + b"\r\n")
            jid = int(c.read_line().split()[1])
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
            if i % 50 == 0:
                most = max(most, len(segments(self.dir)))
        st = parse_yaml(c.cmd("stats"))
        self.assertLessEqual(most, 7)
        self.assertGreater(int(st["binlog-oldest-index"]), 1)
        self.assertGreater(int(st["binlog-records-migrated"]), 0)
        s.stop()
        s = self.start("-s", "65536")
        c = s.connect()
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 10\r\nlong-lived\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats"))["current-jobs-ready"], "1")


@unittest.skipIf(is_beanstalkd() or not os.path.exists(BEANSTALKD_BIN), "needs Debian's beanstalkd")
class AdoptBeanstalkdTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stalkd_adopt_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_adopts_a_job_larger_than_a_binlog_file(self):
        # beanstalkd keeps a 50,000-byte job with -s 4096; stalkd adopts it the same way
        b = Server(binary=BEANSTALKD_BIN, args=["-b", self.dir, "-s", "4096", "-z", "100000"])
        big = bytes(random.Random(3).randrange(256) for _ in range(50000))
        try:
            c = b.connect()
            self.assertEqual(c.put(big), b"INSERTED 1\r\n")
            self.assertEqual(c.put(b"abc"), b"INSERTED 2\r\n")
        finally:
            b.proc.kill()
            b.proc.wait()
            b.stop()
        for _ in range(2):  # adopt, then restart on stalkd's own format
            s = Server(args=["-b", self.dir, "-s", "4096", "-z", "100000"])
            try:
                c = s.connect()
                self.assertEqual(c.cmd("peek 1"), b"FOUND 1 50000\r\n" + big + b"\r\n")
                self.assertEqual(c.cmd("peek 2"), b"FOUND 2 3\r\nabc\r\n")
                c.close()
            finally:
                s.stop()

    def test_adopts_every_state_tube_and_size(self):
        b = Server(binary=BEANSTALKD_BIN, args=["-b", self.dir, "-s", "40000"])
        expect = {}  # id -> (tube, state, pri, body)
        rng = random.Random(7)
        try:
            c = b.connect()
            for i in range(300):
                tube = "tube%d" % (i % 4)
                c.cmd("use " + tube)
                body = bytes(rng.randrange(256) for _ in range(rng.choice([1, 50, 3000, 9000])))
                delay = 500 if i % 5 == 1 else 0
                r = c.put(body, pri=i, delay=delay)
                jid = int(r.split()[1])
                expect[jid] = [tube, "delayed" if delay else "ready", i, body]
            for jid in list(expect)[::7]:
                self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
                del expect[jid]
            w = b.connect()
            for jid in [j for j, e in expect.items() if e[1] == "ready"][:30:3]:
                self.assertTrue(w.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
                self.assertEqual(w.cmd("bury %d 4242" % jid), b"BURIED\r\n")
                expect[jid][1:3] = ["buried", 4242]
            held = [j for j, e in expect.items() if e[1] == "ready"][-5:]
            for jid in held:  # reserved when beanstalkd dies: comes back ready
                self.assertTrue(w.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            self.assertGreater(len(segments(self.dir)), 5)
        finally:
            b.proc.kill()
            b.proc.wait()
            b.stop()

        for attempt in range(2):  # adopt, then restart on stalkd's own format
            s = Server(args=["-b", self.dir, "-s", "40000"])
            try:
                c = s.connect()
                st = parse_yaml(c.cmd("stats"))
                self.assertEqual(int(st["current-jobs-ready"]) + int(st["current-jobs-delayed"])
                                 + int(st["current-jobs-buried"]), len(expect))
                for jid, (tube, state, pri, body) in expect.items():
                    self.assertEqual(c.cmd("peek %d" % jid),
                                     b"FOUND %d %d\r\n" % (jid, len(body)) + body + b"\r\n")
                    js = parse_yaml(c.cmd("stats-job %d" % jid))
                    self.assertEqual((js["tube"], js["state"], js["pri"]),
                                     ('"%s"' % tube, state, str(pri)), jid)
                    if state == "delayed":
                        self.assertGreater(int(js["time-left"]), 400)
                r = c.put(b"new")
                self.assertEqual(int(r.split()[1]), max(expect) + 1)
                expect[max(expect) + 1] = ["default", "ready", 0, b"new"]
                for p in segments(self.dir):
                    with open(p, "rb") as f:
                        self.assertEqual(f.read(8), b"STALKDWL", p)
            finally:
                s.stop()


if __name__ == "__main__":
    unittest.main()

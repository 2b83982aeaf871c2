"""stalk tail (follows a tube without consuming its jobs) and stalk top (a live screen under a
pseudo-terminal: it shows the tubes, sorts on keys, shows put rates, quits on q and gives the
terminal back; plain and JSON snapshots when not on a terminal), against stalkd and
Debian's beanstalkd 1.12.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/cli/test_tail_top.py
"""
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clicase import (BEANSTALKD_BIN, STALK_BIN, StalkCase, body_of, stats_of,  # noqa: E402
                     wait_until)

ROWS, COLS = 30, 120


class Terminal:
    """A program on a pseudo-terminal of ROWS x COLS: keys in, bytes out."""

    def __init__(self, argv, cols=COLS):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, cols, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self.out = b""

    def read_until(self, pred, timeout=10.0):
        """Reads output until pred(all output so far) holds; returns whether it did."""
        deadline = time.monotonic() + timeout
        while not pred(self.out):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([self.master], [], [], left)
            if r:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the program has gone and closed the terminal
                    return pred(self.out)
                self.out += chunk
        return True

    def frame(self):
        """The last whole screen drawn: the text between the last two cursor-home codes."""
        frames = self.out.split(b"\x1b[H")
        return frames[-2] if len(frames) > 2 else frames[-1]

    def keys(self, data):
        os.write(self.master, data)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def screen_lines(frame):
    """The lines of a frame, without escape codes (nor the \\r of the terminal's \\r\\n)."""
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", frame).decode()
    return [line.rstrip("\r") for line in text.split("\n")]


def table_rows(frame):
    """{tube: [columns]} of a frame of top's table."""
    rows = {}
    for line in re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", frame).decode().split("\r\n"):
        words = line.split()
        if len(words) == 11 and words[1].isdigit():
            rows[words[0]] = words
    return rows


class TailTop:
    def start_tail(self, *args):
        p = subprocess.Popen([STALK_BIN, "-s", self.address(self.server), "tail", "-i", "0.05"]
                             + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        c = self.client()
        # until it has looked at the tube once: stalkd's list-jobs, or beanstalkd's probe
        if self.on_beanstalkd():
            ready = lambda: stats_of(c, "stats")["cmd-delete"] != "0"  # noqa: E731
        else:
            ready = lambda: int(stats_of(c, "stats-ext")["cmd-list-jobs"]) >= 5  # noqa: E731
        self.assertTrue(wait_until(ready, timeout=10))
        time.sleep(0.2)
        return p

    def test_tail_follows_without_consuming(self):
        c = self.client()
        c.put("before", tube="tl")
        p = self.start_tail("--json", "tl", "-n", "3")
        c.put("one", tube="tl")
        c.put("elsewhere", tube="x")
        c.put("two", tube="tl", delay=100, pri=3)
        c.put(b"three\x00\xff", tube="tl")
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        jobs = [json.loads(l) for l in out.splitlines()]
        self.assertEqual([body_of(j) for j in jobs], [b"one", b"two", b"three\x00\xff"])
        self.assertEqual([(j["state"], j["pri"]) for j in jobs],
                         [("ready", 0), ("delayed", 3), ("ready", 0)])
        st = stats_of(c, "stats-tube tl")
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-delayed"]), ("3", "1"))
        for j in jobs:
            self.assertEqual(stats_of(c, "stats-job %d" % j["id"])["reserves"], "0")

    def test_tail_existing_and_human(self):
        c = self.client()
        c.put("already there", tube="te")
        p = self.start_tail("te", "--existing", "-n", "2")
        c.put("new", tube="te")
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        self.assertRegex(out.decode(), r"^id 1  tube te  state ready  pri 0  ttr 60  13 bytes\n"
                                       r"already there\nid \d+  tube te  state ready  pri 0  "
                                       r"ttr 60  3 bytes\nnew\n$")

    def test_tail_delete_and_bury_take_each_job(self):
        # as beanstool's tail: each job reserved as a worker would, shown, then deleted or
        # buried; the ready jobs already there are taken too
        c = self.client()
        c.put("old", tube="tk")
        p = subprocess.Popen([STALK_BIN, "-s", self.address(self.server), "--json", "tail",
                              "tk", "--delete", "-n", "3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        c.put("new", tube="tk")
        c.put("other tube", tube="x")
        c.put("later", tube="tk", delay=1)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        jobs = [json.loads(l) for l in out.splitlines()]
        self.assertEqual([body_of(j) for j in jobs], [b"old", b"new", b"later"])
        self.assertEqual({j["state"] for j in jobs}, {"reserved"})
        st = stats_of(c, "stats-tube tk")
        self.assertEqual((st["total-jobs"], st["current-jobs-ready"], st["cmd-delete"]),
                         ("3", "0", "3"))
        c.put("bury me", tube="tk", pri=9)
        out = self.ok("tail", "tk", "--bury", "-n", "1")
        self.assertRegex(out, r"^id (\d+)  tube tk  state reserved  pri 9  ttr 60  7 bytes\n"
                              r"bury me\n$")
        jid = int(out.split()[1])
        st = stats_of(c, "stats-job %d" % jid)
        self.assertEqual((st["state"], st["pri"], st["buries"]), ("buried", "9", "1"))
        for args in (("--delete", "--bury"), ("--delete", "-e"), ("--bury", "-i", "1")):
            self.fails(2, "tail", "tk", *args)

    def test_tail_of_a_tube_that_does_not_exist_yet(self):
        p = self.start_tail("--json", "later", "-n", "1")
        self.client().put("first", tube="later")
        out, err = p.communicate(timeout=120)
        self.assertEqual(body_of(json.loads(out)), b"first", err)

    def test_tail_on_a_server_past_many_ids(self):
        # 70,000 ids handed out and gone: more than one list-jobs call covers (65,536)
        c = self.client()
        for first in range(0, 70000, 5000):
            c.send(b"".join(b"put 0 0 60 1\r\nx\r\n" for _ in range(5000)))
            ids = [int(c.read_line().split()[1]) for _ in range(5000)]
            c.send(b"".join(b"delete %d\r\n" % i for i in ids))
            for _ in ids:
                self.assertEqual(c.read_line(), b"DELETED\r\n")
        c.put("old", tube="far")
        p = self.start_tail("--json", "far", "-n", "2")
        c.put("new 1", tube="far")
        time.sleep(0.3)  # a few polls in between
        c.put("new 2", tube="far", delay=50)
        out, err = p.communicate(timeout=120)
        self.assertEqual([body_of(json.loads(l)) for l in out.splitlines()],
                         [b"new 1", b"new 2"], err)
        if not self.on_beanstalkd():  # each poll is a few list-jobs, not a scan of every id
            before = int(stats_of(c, "stats-ext")["cmd-list-jobs"])
            p = self.start_tail("far", "-n", "1", "-i", "0.05")
            time.sleep(1)
            polls = int(stats_of(c, "stats-ext")["cmd-list-jobs"]) - before
            c.put("last", tube="far")
            p.communicate(timeout=120)
            # one call per state and poll: at most 1 s / 0.05 s polls, and a few more
            self.assertLessEqual(polls, 4 * 23, polls)

    # ---- top

    def test_top_screen_sorts_and_quits_on_q(self):
        c = self.client()
        for i in range(5):
            c.put("z", tube="zzz")
        c.put("a", tube="aaa")
        c.put("a", tube="aaa", delay=100)
        t = Terminal([STALK_BIN, "-s", self.address(self.server), "top", "-i", "0.2"])
        self.addCleanup(t.close)
        self.assertTrue(t.read_until(lambda o: o.count(b"sort: ready") >= 2), t.out[-2000:])
        self.assertIn(b"\x1b[?1049h", t.out)  # the alternate screen
        frame = t.frame()
        self.assertIn(b"TUBE", frame)
        rows = table_rows(frame)
        self.assertEqual(rows["zzz"][1], "5")
        self.assertEqual(rows["aaa"][4], "1")
        self.assertLess(frame.index(b"zzz"), frame.index(b"aaa"))  # most ready first
        t.keys(b"s")  # next sort key: reserved
        self.assertTrue(t.read_until(lambda o: b"sort: reserved" in o))
        t.keys(b"<")
        n = t.out.count(b"sort: ready")
        self.assertTrue(t.read_until(lambda o: o.count(b"sort: ready") > n))
        t.keys(b"r")
        self.assertTrue(t.read_until(
            lambda o: b"sort: ready (reversed)" in o.rsplit(b"\x1b[H", 1)[-1]
            and o.count(b"(reversed)") >= 2))
        frame = t.frame()
        self.assertLess(frame.index(b"aaa"), frame.index(b"zzz"))
        # puts show up as a rate
        stop = threading.Event()

        def producer():
            p = self.client()
            while not stop.is_set():
                p.put("more", tube="zzz")
                time.sleep(0.01)
        th = threading.Thread(target=producer)
        th.start()
        try:
            def rate_shown(o):
                row = table_rows(o.rsplit(b"\x1b[H", 2)[-2] if o.count(b"\x1b[H") > 1 else o)
                return "zzz" in row and row["zzz"][7] not in ("-", "0.0")
            self.assertTrue(t.read_until(rate_shown), t.frame())
        finally:
            stop.set()
            th.join()
        t.keys(b"q")
        self.assertEqual(t.proc.wait(timeout=5), 0)
        t.read_until(lambda o: b"\x1b[?1049l" in o, timeout=2)
        self.assertIn(b"\x1b[?25h\x1b[?1049l", t.out)  # cursor and screen given back
        self.assertTrue(termios.tcgetattr(t.master)[3] & termios.ECHO)  # and echo

    def test_top_in_a_narrow_terminal_keeps_tube_names_readable(self):
        c = self.client()
        names = ("orders.europe.high", "orders.america.low")
        for n in names:
            c.put("x", tube=n)
        for cols, whole in ((60, True), (24, False)):
            t = Terminal([STALK_BIN, "-s", self.address(self.server), "top", "-i", "0.2"],
                         cols=cols)
            self.addCleanup(t.close)
            self.assertTrue(t.read_until(lambda o: o.count(b"sort: ready") >= 2), t.out[-2000:])
            lines = screen_lines(t.frame())
            header = [l for l in lines if l.startswith("TUBE")][0].split()
            self.assertIn("READY", header)
            self.assertNotIn("URGENT", header)  # the least telling columns gave way
            rows = [l for l in lines if l.startswith("orders")]
            self.assertEqual(len(rows), 2, lines)
            for l in lines:
                self.assertLessEqual(len(l), cols, repr(l))
            if whole:
                self.assertEqual(sorted(r.split()[0] for r in rows), sorted(names))
            else:  # cut in the middle: both ends still tell them apart
                shown = sorted(r.split()[0] for r in rows)
                self.assertEqual([len(n) for n in shown], [17, 17], shown)  # 24 - READY's 7
                self.assertTrue(shown[0].startswith("orders.") and "~" in shown[0], shown)
                self.assertTrue(shown[0].endswith("low") and shown[1].endswith("high"), shown)
            t.keys(b"q")
            self.assertEqual(t.proc.wait(timeout=10), 0)

    def test_top_batch_and_json(self):
        c = self.client()
        c.put("x", tube="bt")
        out = self.ok("top")  # stdout is a pipe: one plain snapshot
        self.assertIn("TUBE", out)
        self.assertRegex(out, r"\nbt +1 ")
        self.assertNotIn("\x1b", out)
        stop = threading.Event()

        def producer():
            p = self.client()
            while not stop.is_set():
                p.put("more", tube="bt")
                time.sleep(0.01)
        th = threading.Thread(target=producer)
        th.start()
        try:
            snaps = self.json_lines("top", "-n", "2", "-i", "0.5")
        finally:
            stop.set()
            th.join()
        self.assertEqual(len(snaps), 2)
        self.assertIsNone(snaps[0]["rates"]["put"])
        self.assertGreater(snaps[1]["rates"]["put"], 0)
        bt = [t for t in snaps[1]["tubes"] if t["name"] == "bt"][0]
        self.assertGreater(bt["put_rate"], 0)
        self.assertGreaterEqual(bt["ready"], 1)
        self.assertIn("current-jobs-ready", snaps[1]["server"])


class TailTopOnStalkd(TailTop, StalkCase):
    pass


class TailTopOnBeanstalkd(TailTop, StalkCase):
    binary = BEANSTALKD_BIN


if __name__ == "__main__":
    unittest.main()

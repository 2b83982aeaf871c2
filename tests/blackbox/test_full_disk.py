"""Black-box tests of the binlog on a full disk (docs/BINLOG.md, "Space"): after kill -9 with
the binlog's filesystem full, the server starts, brings back every job, serves and deletes
them, refuses puts (OUT_OF_MEMORY) and the changes it could not record (release, bury and
kick answer OUT_OF_MEMORY and leave the job as it was), so that no change a client was told
of is lost by the next restart; and it takes puts again, without a restart, once space is
freed.

Two disks: the fault hook STALKD_TEST_DISK_BYTES (a disk of N bytes, on which the segments
found at start-up take their room), which runs anywhere, and, when the tests run as root, a
real tmpfs filesystem of 512 KiB that a filler file fills to the last byte."""
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from beanstalk import Server, is_beanstalkd, parse_yaml, wait_until  # noqa: E402

SEGMENT = 65536
BODY = 2000


def kill9(srv):
    srv.proc.kill()
    srv.proc.wait()
    srv.stop()


def can_mount_tmpfs():
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    d = tempfile.mkdtemp(prefix="stalkd_tmpfs_probe_")
    try:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                            capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", d], capture_output=True)
        return ok
    finally:
        os.rmdir(d)


def fill(path):
    """Writes a file at path until the filesystem is full; returns its size."""
    n = 0
    chunk = b"\xff" * 4096
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                w = f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
            n += w
        for size in (512, 64, 1):  # the last partial page
            while True:
                try:
                    n += f.write(b"\xff" * size)
                except OSError:
                    break
    return n


class FullDisk:
    """The scenario, on whatever disk `start` gives the server."""

    def __init__(self, test, start):
        self.t = test
        self.start = start

    def put_until_full(self, c):
        ids = []
        for i in range(1000):
            r = c.put(b"%05d" % i + b"j" * (BODY - 5), pri=1000 + i)
            if r == b"OUT_OF_MEMORY\r\n":
                return ids
            self.t.assertTrue(r.startswith(b"INSERTED "), r)
            ids.append(int(r.split()[1]))
        self.t.fail("the disk never filled")

    def snapshot(self, c, ids):
        """id -> (state, pri, buries, kicks, releases) of every job, None when gone."""
        out = {}
        for jid in ids:
            r = c.cmd("stats-job %d" % jid)
            if r == b"NOT_FOUND\r\n":
                out[jid] = None
                continue
            st = parse_yaml(r)
            out[jid] = (st["state"], st["pri"], st["buries"], st["kicks"], st["releases"])
        return out

    def change(self, c, cmd, reply, jid, state, pri=None):
        """Sends a change of job jid; on `reply` the model takes it, on OUT_OF_MEMORY the job
        is as it was. Returns whether it was done."""
        r = c.cmd(cmd)
        if r == b"OUT_OF_MEMORY\r\n":
            self.refused += 1
            return False
        self.t.assertEqual(r, reply, cmd)
        old = self.expect[jid]
        self.expect[jid] = (state, pri if pri is not None else old[1])
        self.done += 1
        return True

    def run(self, after_restart_full=None, free_space=None):
        t = self.t
        s = self.start()
        c = s.connect()
        ids = self.put_until_full(c)
        t.assertGreater(len(ids), 50)
        # Changes before the crash: each job's first change uses the room its put kept.
        for jid in ids[:10]:
            t.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED %d " % jid))
            t.assertEqual(c.cmd("bury %d 7" % jid), b"BURIED\r\n")
        for jid in ids[10:15]:
            t.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED %d " % jid))
            t.assertEqual(c.cmd("release %d 8 3600" % jid), b"RELEASED\r\n")
        c.close()
        kill9(s)
        if after_restart_full:
            after_restart_full()

        # The restart on the full disk: every job is back and served.
        s = self.start()
        c = s.connect()
        self.expect = {jid: (st[0], st[1]) for jid, st in self.snapshot(c, ids).items()}
        t.assertEqual([self.expect[j] for j in ids[:10]], [("buried", "7")] * 10)
        t.assertEqual([self.expect[j] for j in ids[10:15]], [("delayed", "8")] * 5)
        t.assertTrue(all(self.expect[j] == ("ready", str(1000 + i)) for i, j in enumerate(ids)
                         if i >= 15))
        t.assertEqual(c.put(b"m" * BODY), b"OUT_OF_MEMORY\r\n")
        w = s.connect()
        r = w.cmd("reserve-with-timeout 0")
        t.assertTrue(r.startswith(b"RESERVED %d " % ids[15]), r)  # the best ready job
        t.assertTrue(r.endswith(b"%05d" % 15 + b"j" * (BODY - 5) + b"\r\n"))
        t.assertEqual(w.cmd("delete %d" % ids[15]), b"DELETED\r\n")
        self.expect[ids[15]] = None
        w.close()

        # Changes on the full disk: done when they can be recorded, else refused.
        self.refused = self.done = 0
        for jid in ids[:10]:
            self.change(c, "kick-job %d" % jid, b"KICKED\r\n", jid, "ready")
        for jid in ids[16:40]:
            t.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            self.change(c, "bury %d 9" % jid, b"BURIED\r\n", jid, "buried", "9")
        for jid in ids[40:55]:
            t.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            self.change(c, "release %d 11 3600" % jid, b"RELEASED\r\n", jid, "delayed", "11")
        for jid in ids[16:40]:  # second changes: no room left for most
            if self.expect[jid][0] == "buried":
                self.change(c, "kick-job %d" % jid, b"KICKED\r\n", jid, "ready")
        t.assertGreater(self.refused, 0, "nothing was refused: the disk was not full")
        t.assertGreater(self.done, 0)
        # A tube's default tries (an extension) is refused the same way.
        tries = []
        for n in range(1, 30):
            r = c.cmd("tube-tries default %d" % n)
            t.assertIn(r, (b"TUBE-TRIES %d\r\n" % n, b"OUT_OF_MEMORY\r\n"))
            if r == b"OUT_OF_MEMORY\r\n":
                break
            tries.append(n)
        else:
            t.fail("29 changes of a tube's default tries found room on a full disk")
        self.tries = str(tries[-1] if tries else 0)
        # Deleting frees room: every delete works, and refused changes go through after.
        for jid in [j for j in ids[60:] if self.expect[j] and self.expect[j][0] == "ready"][:40]:
            t.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
            self.expect[jid] = None
        refused_before = self.refused
        for jid in ids[16:30]:
            if self.expect[jid] and self.expect[jid][0] == "buried":
                self.change(c, "kick-job %d" % jid, b"KICKED\r\n", jid, "ready")
        t.assertEqual(self.refused, refused_before, "a change refused with room freed")
        # kick N kicks the oldest buried jobs it can record.
        buried = {j for j in ids if self.expect[j] and self.expect[j][0] == "buried"}
        t.assertGreater(len(buried), 0)
        r = c.cmd("kick 1000")
        t.assertTrue(r.startswith(b"KICKED ") and int(r.split()[1]) > 0, r)
        now = self.snapshot(c, sorted(buried))
        kicked = [j for j in buried if now[j][0] == "ready"]
        t.assertEqual(len(kicked), int(r.split()[1]))
        for jid in kicked:
            self.expect[jid] = ("ready", self.expect[jid][1])
        # The jobs still reserved after a refused bury or release go back to ready, as their
        # latest records have them.
        c.close()
        c = s.connect()
        mem = self.snapshot(c, ids)
        c.close()
        t.assertEqual({j: m and m[:2] for j, m in mem.items()}, self.expect)

        # kill -9 and a restart, still full: every change that was answered is there.
        kill9(s)
        s = self.start()
        c = s.connect()
        after = self.snapshot(c, ids)
        for jid in ids:
            if self.expect[jid] is None:
                t.assertIsNone(after[jid], jid)
                continue
            # state and priority, and the counters of buries, kicks and releases
            t.assertEqual(after[jid], mem[jid], jid)
        t.assertEqual(c.put(b"m" * BODY), b"OUT_OF_MEMORY\r\n")
        t.assertEqual(parse_yaml(c.cmd("stats-tube-ext default"))["default-tries"], self.tries)
        if free_space:
            free_space()
            t.assertTrue(wait_until(lambda: c.put(b"m" * BODY).startswith(b"INSERTED"), 5),
                         "puts still refused once space was freed")
        else:  # deleting every job frees the segments
            for jid in ids:
                if self.expect[jid] is not None:
                    t.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
            t.assertTrue(wait_until(lambda: c.put(b"m" * BODY).startswith(b"INSERTED"), 5),
                         "puts still refused after every job was deleted")
        c.close()
        return s


@unittest.skipIf(is_beanstalkd(), "stalkd's binlog")
class SimulatedFullDiskTest(unittest.TestCase):
    """A disk of 4 segments (STALKD_TEST_DISK_BYTES)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stalkd_fulldisk_")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, *extra):
        env = dict(os.environ, STALKD_TEST_DISK_BYTES=str(4 * SEGMENT))
        s = Server(args=["-b", self.dir, "-s", str(SEGMENT), "-f", "0"] + list(extra), env=env)
        self.servers.append(s)
        return s

    def test_restart_serve_delete_and_refuse_what_cannot_be_recorded(self):
        FullDisk(self, self.start).run()

    def test_restart_with_a_torn_tail_on_a_full_disk(self):
        s = self.start()
        c = s.connect()
        ids = FullDisk(self, None).put_until_full(c)
        c.close()
        kill9(s)
        # The newest record is cut short, as a crash in the middle of its write leaves it.
        segs = sorted((p for p in os.listdir(self.dir) if p.startswith("binlog.")),
                      key=lambda p: int(p.split(".")[1]))
        newest = None
        for name in reversed(segs):
            with open(os.path.join(self.dir, name), "rb") as f:
                data = f.read()
            if data[16 + 8] != 0:  # has a record
                newest, size = os.path.join(self.dir, name), len(data)
                break
        off, last = 16, 16
        while off + 9 <= size and data[off:off + 9] != b"\0" * 9:
            last = off
            off += 9 + int.from_bytes(data[off + 4:off + 8], "little")
        with open(newest, "r+b") as f:
            f.seek(last + 30)
            f.write(b"\0" * 100)
        s = self.start()
        c = s.connect()
        for jid in ids[:-1]:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)
        self.assertEqual(c.cmd("peek %d" % ids[-1]), b"NOT_FOUND\r\n")
        # New records follow the last whole one, where the torn one was, and survive.
        self.assertEqual(c.cmd("delete %d" % ids[0]), b"DELETED\r\n")
        self.assertTrue(c.cmd("reserve-job %d" % ids[1]).startswith(b"RESERVED"))
        self.assertEqual(c.cmd("bury %d 5" % ids[1]), b"BURIED\r\n")
        c.close()
        kill9(s)
        s = self.start()
        c = s.connect()
        self.assertEqual(c.cmd("peek %d" % ids[0]), b"NOT_FOUND\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats-job %d" % ids[1]))["state"], "buried")
        for jid in ids[2:-1]:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)
        c.close()


@unittest.skipIf(is_beanstalkd(), "stalkd's binlog")
@unittest.skipUnless(can_mount_tmpfs(), "needs root to mount a tmpfs")
class RealFullDiskTest(unittest.TestCase):
    """A tmpfs of 640 KiB, of which another file (the ballast) takes 128 KiB from the start;
    after the crash a filler file takes whatever stalkd left free, to the last byte. Freeing
    space is removing the ballast."""

    def setUp(self):
        self.mnt = tempfile.mkdtemp(prefix="stalkd_tmpfs_")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=640k", "tmpfs", self.mnt], check=True)
        self.dir = os.path.join(self.mnt, "binlog")
        self.filler = os.path.join(self.mnt, "filler")
        self.ballast = os.path.join(self.mnt, "ballast")
        with open(self.ballast, "wb") as f:
            f.write(b"\xee" * (2 * SEGMENT))
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        subprocess.run(["umount", self.mnt], capture_output=True)
        os.rmdir(self.mnt)

    def start(self):
        s = Server(args=["-b", self.dir, "-s", str(SEGMENT), "-f", "0"])
        self.servers.append(s)
        return s

    def test_restart_serve_delete_and_refuse_what_cannot_be_recorded(self):
        FullDisk(self, self.start).run(
            after_restart_full=lambda: fill(self.filler),  # what stalkd left free is taken
            free_space=lambda: os.unlink(self.ballast))

    def test_restart_on_a_disk_filled_by_another_file(self):
        s = self.start()
        c = s.connect()
        ids = [int(c.put(b"x" * BODY).split()[1]) for _ in range(30)]
        c.close()
        kill9(s)
        fill(self.filler)
        s = self.start()
        c = s.connect()
        for jid in ids:
            self.assertTrue(c.cmd("peek %d" % jid).startswith(b"FOUND %d " % jid), jid)
        # The room the first run kept: jobs change and are deleted; puts wait for space.
        for jid in ids[:10]:
            self.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            self.assertEqual(c.cmd("release %d 3 0" % jid), b"RELEASED\r\n")
        for jid in ids[10:20]:
            self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        os.unlink(self.ballast)
        self.assertTrue(wait_until(lambda: c.put(b"m" * BODY).startswith(b"INSERTED"), 5))
        c.close()


if __name__ == "__main__":
    unittest.main()

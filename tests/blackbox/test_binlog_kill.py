"""Black-box test: no kill at any instant leaves a binlog directory the next start refuses.

stalkd is killed (SIGKILL, SIGTERM, SIGINT) at random instants, over many rounds, with tiny
segments (-s 4096, so segments are made, rotated and compacted away all the time): during
start-up on an empty directory, during the recovery of a directory of many records, during
the adoption of a binlog written by Debian's beanstalkd, and under a put/delete load (rotation
and compaction). After each kill the next start must succeed, every acknowledged job (INSERTED
received, no DELETED received) must be there with its body, no job whose DELETED was received
may come back, and nothing else may be there (the job counts of `stats` match). A SIGTERM or
SIGINT sent once the port accepts must stop the server with exit code 0.

The random choices come from one seed, printed with every failure (set STALKD_TEST_SEED to
repeat them; the instants of the kills depend on the machine too). The test bounds its work by
rounds; the kill instants are drawn from the start-up times it measures itself."""
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from beanstalk import BEANSTALKD_BIN, STALKD_BIN, Client, free_port, is_beanstalkd, parse_yaml  # noqa: E402

SEED = int(os.environ.get("STALKD_TEST_SEED") or random.randrange(1 << 32))
SEGMENT = "4096"
START_TIMEOUT = 60.0  # bounds a hang only


class Model:
    """What the clients were told: jobs acknowledged and not deleted (id -> body), deletes
    acknowledged, and ids whose outcome is unknown (a command cut by the kill)."""

    def __init__(self):
        self.present = {}
        self.deleted = set()
        self.unsure = set()
        self.max_id = 0

    def inserted(self, jid, body):
        assert jid not in self.deleted and jid not in self.present, "id %d used again" % jid
        self.present[jid] = body
        self.max_id = max(self.max_id, jid)

    def was_deleted(self, jid):
        self.present.pop(jid, None)
        self.unsure.discard(jid)
        self.deleted.add(jid)

    def maybe_deleted(self, jid):
        self.present.pop(jid, None)
        self.unsure.add(jid)


class Proc:
    """One stalkd process on a free port, its output in a log file."""

    def __init__(self, test, d, args=()):
        self.test = test
        self.port = free_port()
        self.log = os.path.join(test.tmp, "stalkd.log")
        argv = [STALKD_BIN, "-l", "127.0.0.1", "-p", str(self.port), "-b", d, "-s", SEGMENT]
        self.argv = argv + list(args)
        with open(self.log, "ab") as f:
            f.write(b"\n--- %s\n" % " ".join(self.argv).encode())
            self.t0 = time.monotonic()
            self.proc = subprocess.Popen(self.argv, stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

    def wait_port(self):
        """Until the port accepts; fails the test if the server exits first."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.test.fail("start-up failed (exit %s)" % self.proc.returncode)
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
                return time.monotonic() - self.t0
            except OSError:
                time.sleep(0.002)
        self.test.fail("not listening after %s s" % START_TIMEOUT)

    def client(self):
        return Client(("127.0.0.1", self.port), timeout=START_TIMEOUT)

    def kill(self, sig, listening):
        """Sends sig and waits for the exit. SIGKILL: killed. SIGTERM, SIGINT: exit code 0
        once it listens (before that it may still be in the dynamic loader, before main
        blocks the signals, where the default action ends it)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.test.fail("did not stop within %s s of signal %d" % (START_TIMEOUT, sig))
        if sig == signal.SIGKILL:
            self.test.assertIn(code, (-signal.SIGKILL, 0))
        elif listening:
            self.test.assertEqual(code, 0, "signal %d after the port accepted" % sig)
        else:
            self.test.assertIn(code, (0, -sig), "signal %d during start-up" % sig)
        return code


def peek_all(c, ids):
    """{id: body or None} for every id, pipelined."""
    out = {}
    ids = list(ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        c.send(b"".join(b"peek %d\r\n" % j for j in chunk))
        for j in chunk:
            r = c.read_reply()
            if r.startswith(b"FOUND"):
                out[j] = r.split(b"\r\n", 1)[1][:-2]
            else:
                assert r == b"NOT_FOUND\r\n", r
                out[j] = None
    return out


def job_count(c):
    st = parse_yaml(c.cmd("stats"))
    return sum(int(st["current-jobs-" + k]) for k in ("ready", "reserved", "delayed", "buried"))


@unittest.skipIf(is_beanstalkd(), "stalkd's binlog")
class KillAtAnyInstantTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stalkd_kill_")
        self.dir = os.path.join(self.tmp, "binlog")
        self.rng = random.Random("%d %s" % (SEED, self._testMethodName))
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _formatMessage(self, msg, standard_msg):
        log = ""
        try:
            with open(os.path.join(self.tmp, "stalkd.log"), "rb") as f:
                log = f.read()[-3000:].decode(errors="replace")
        except OSError:
            pass
        return "%s (STALKD_TEST_SEED=%d)\nlog tail:\n%s" % (
            super()._formatMessage(msg, standard_msg), SEED, log)

    def start(self, *args):
        p = Proc(self, self.dir, args)
        self.procs.append(p)
        return p

    def fsync_args(self):
        return self.rng.choice([[], ["-f", "0"], ["-F"]])

    def stop_sig(self):
        return self.rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGTERM, signal.SIGINT])

    def verify(self, p, model):
        """The acknowledged jobs are there, the acknowledged deletes are not; ids whose outcome
        was unknown, and any other id up to the highest seen, are looked at and deleted if
        there, so that afterwards the server holds exactly model.present."""
        p.wait_port()  # the port accepts before recovery; the replies wait for it
        try:
            c = p.client()
            c.cmd("list-tubes")
        except (OSError, EOFError):
            p.proc.wait(timeout=START_TIMEOUT)
            self.fail("start-up failed (exit %s)" % p.proc.returncode)
        try:
            got = peek_all(c, sorted(model.present))
            for jid, body in model.present.items():
                self.assertEqual(got[jid], body, "acknowledged job %d" % jid)
            # Ids whose outcome is unknown (a put or delete cut by the kill) and the ids
            # above the highest seen: deleted if there, so the server holds exactly the model.
            others = peek_all(c, sorted(set(range(1, model.max_id + 200)) - set(model.present)
                                        - model.deleted))
            for jid, body in others.items():
                if body is not None:
                    self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
                    model.max_id = max(model.max_id, jid)
            for jid in others:
                # Settled, unless above every id the server has used (a put that never
                # reached the binlog leaves its id to the next put).
                if jid <= model.max_id:
                    model.was_deleted(jid)
            held = job_count(c)
            if held != len(model.present):  # which ones?
                gone = peek_all(c, sorted(model.deleted))
                back = [j for j, b in gone.items() if b is not None]
                self.assertEqual(back, [], "acknowledged deletes came back")
                self.fail("%d jobs held, %d expected" % (held, len(model.present)))
        finally:
            c.close()

    def load(self, p, model, duration, kill_at, sig, long_lived=0):
        """Puts and deletes (pipelined, in batches) until `duration` has passed or the
        connection breaks; a timer sends `sig` `kill_at` s after the start. Returns the
        exit code."""
        rng = self.rng
        timer = threading.Timer(kill_at, lambda: p.proc.send_signal(sig))
        c = p.client()
        timer.start()
        try:
            end = time.monotonic() + duration
            churn = [j for j in model.present if j > long_lived]
            batches = 0
            while time.monotonic() < end or batches < 3:  # 3: rotation even on a slow machine
                batches += 1
                batch = []
                for _ in range(rng.randrange(1, 40)):
                    if churn and (len(churn) > 150 or rng.random() < 0.45):
                        batch.append(("delete", churn.pop(rng.randrange(len(churn)))))
                    else:
                        size = rng.choice([1, 20, 100, 400, 1500])
                        batch.append(("put", bytes(rng.randrange(97, 123) for _ in range(size))))
                wire = b"".join(b"delete %d\r\n" % x if k == "delete" else
                                b"put 0 0 60 %d\r\n%s\r\n" % (len(x), x) for k, x in batch)
                done = 0
                try:
                    c.send(wire)
                    for k, x in batch:
                        r = c.read_line()
                        done += 1
                        if k == "put":
                            self.assertTrue(r.startswith(b"INSERTED "), r)
                            jid = int(r.split()[1])
                            model.inserted(jid, x)
                            churn.append(jid)
                        else:
                            self.assertEqual(r, b"DELETED\r\n", "delete %d" % x)
                            model.was_deleted(x)
                except (OSError, EOFError):  # killed: the rest of the batch is unknown
                    for k, x in batch[done:]:
                        if k == "delete":
                            model.maybe_deleted(x)
                    break
        finally:
            c.close()
            timer.join()
        # The signal went to a server that listened: SIGTERM and SIGINT stop it with 0.
        return p.kill(sig, True)

    # --------------------------------------------------------------------------- scenarios

    def test_kill_during_first_start_up(self):
        # An empty directory each round: the first segment is being made.
        calib = []
        for r in range(24):
            shutil.rmtree(self.dir, ignore_errors=True)
            args = self.fsync_args()
            if r < 2:  # learn how long a start takes here
                p = self.start(*args)
                calib.append(p.wait_port())
                p.kill(signal.SIGTERM, True)
                continue
            p = self.start(*args)
            window = 1.5 * max(calib)
            if r % 3 == 0:  # as soon as the port accepts: the reported failure
                p.wait_port()
                listening = True
            else:
                time.sleep(self.rng.uniform(0, window))
                listening = False
            p.kill(self.stop_sig(), listening)
            self.verify(self.start(*self.fsync_args()), Model())
            self.procs[-1].kill(signal.SIGTERM, True)

    def test_kill_under_put_delete_load(self):
        # Rotation (-s 4096) and compaction: 60 long-lived jobs stay while others churn.
        model = Model()
        p = self.start()
        p.wait_port()
        c = p.client()
        for i in range(60):
            body = b"long-lived %d" % i
            model.inserted(c.put_id(body), body)
        c.close()
        long_lived = model.max_id
        p.kill(signal.SIGTERM, True)
        compacted = 0
        for r in range(30):
            p = self.start(*self.fsync_args())
            self.verify(p, model)
            sig = self.stop_sig()
            self.load(p, model, duration=self.rng.uniform(0.05, 0.6),
                      kill_at=self.rng.uniform(0, 0.6), sig=sig, long_lived=long_lived)
            segs = sorted(int(n.split(".")[1]) for n in os.listdir(self.dir)
                          if n.startswith("binlog.") and n.count(".") == 1)
            compacted = max(compacted, segs[0] if segs else 0)
        p = self.start()
        self.verify(p, model)
        self.assertGreater(compacted, 5, "the head segments were never compacted away")
        p.kill(signal.SIGTERM, True)

    def test_kill_during_recovery(self):
        # Many records in many segments; kills at random instants of the replay.
        model = Model()
        p = self.start("-F")
        p.wait_port()
        c = p.client()
        bodies = [b"r%d-" % i + b"x" * (i % 300) for i in range(4000)]
        for i in range(0, len(bodies), 200):
            chunk = bodies[i:i + 200]
            c.send(b"".join(b"put 0 0 60 %d\r\n%s\r\n" % (len(b), b) for b in chunk))
            for b in chunk:
                model.inserted(int(c.read_line().split()[1]), b)
        c.send(b"".join(b"delete %d\r\n" % j for j in range(1, 4001, 3)))
        for j in range(1, 4001, 3):
            self.assertEqual(c.read_line(), b"DELETED\r\n")
            model.was_deleted(j)
        c.close()
        p.kill(signal.SIGKILL, True)
        calib = []
        for r in range(14):
            p = self.start(*self.fsync_args())
            if r < 2:
                calib.append(p.wait_port())
                self.verify(p, model)
                p.kill(signal.SIGTERM, True)
                continue
            time.sleep(self.rng.uniform(0, 1.5 * max(calib)))
            p.kill(self.stop_sig(), False)
            if r % 2:
                p = self.start()
                self.verify(p, model)
                p.kill(signal.SIGTERM, True)

    @unittest.skipIf(not os.path.exists(BEANSTALKD_BIN), "needs Debian's beanstalkd")
    def test_kill_during_adoption(self):
        template = os.path.join(self.tmp, "beanstalkd")
        os.mkdir(template)  # beanstalkd does not make it
        model = Model()
        bport = free_port()
        b = subprocess.Popen([BEANSTALKD_BIN, "-l", "127.0.0.1", "-p", str(bport), "-b", template,
                              "-s", SEGMENT], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                try:
                    c = Client(("127.0.0.1", bport), timeout=START_TIMEOUT)
                    break
                except OSError:
                    self.assertIsNone(b.poll(), "beanstalkd exited")
                    self.assertLess(time.monotonic(), deadline, "beanstalkd did not start")
                    time.sleep(0.01)
            for i in range(600):
                body = b"b%d-" % i + b"y" * (i * 7 % 900)
                model.inserted(c.put_id(body), body)
            for j in range(2, 601, 4):
                self.assertEqual(c.cmd("delete %d" % j), b"DELETED\r\n")
                model.was_deleted(j)
            c.close()
        finally:
            b.kill()
            b.wait()
        self.assertGreater(len(os.listdir(template)), 10)
        calib = []
        for r in range(12):
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.copytree(template, self.dir)
            m = Model()
            m.present, m.deleted, m.max_id = dict(model.present), set(model.deleted), model.max_id
            if r < 2:
                p = self.start()
                calib.append(p.wait_port())
                self.verify(p, m)
                p.kill(signal.SIGTERM, True)
                continue
            for _ in range(self.rng.choice([1, 1, 2])):  # once, or again during the redo
                p = self.start(*self.fsync_args())
                time.sleep(self.rng.uniform(0, 1.5 * max(calib)))
                p.kill(self.stop_sig(), False)
            p = self.start()
            self.verify(p, m)
            p.kill(signal.SIGTERM, True)
            for n in os.listdir(self.dir):
                if n.startswith("binlog."):
                    with open(os.path.join(self.dir, n), "rb") as f:
                        self.assertEqual(f.read(8), b"STALKDWL", n)


if __name__ == "__main__":
    unittest.main()

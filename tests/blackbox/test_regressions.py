"""Black-box regression tests for defects found by review (each reproduces one).

1. Two clients reset in the same loop iteration, one holding a reserved job and the other
   waiting in reserve: the job must not be handed to the dying waiter (a use-after-free
   under ASan before the fix), and must come back ready.
2. A reserve read after the client half-closed, behind a long pipeline, must be answered
   TIMED_OUT (as beanstalkd does), not wait forever.
3. A kick spread over several slices must not kick again jobs that other clients re-bury
   meanwhile: never more than were buried when it arrived.

Run: python3 -m unittest -v tests/blackbox/test_regressions.py
"""
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import Server, is_beanstalkd, parse_yaml, rst_close, wait_stat  # noqa: E402


class RegressionTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()
        self.addCleanup(self.server.stop)

    def client(self):
        c = self.server.connect()
        self.addCleanup(c.close)
        return c

    def test_reset_holder_and_waiter_together(self):
        probe = self.client()
        for i in range(20):
            prod = self.server.connect()
            self.assertTrue(prod.put("x").startswith(b"INSERTED"))
            prod.close()
            a = self.server.connect()
            self.assertTrue(a.cmd("reserve").startswith(b"RESERVED"))
            b = self.server.connect()
            b.send(b"reserve\r\n")
            self.assertTrue(wait_stat(probe, "current-waiting", 1, 5))
            rst_close(a.sock)
            rst_close(b.sock)
            self.assertTrue(wait_stat(probe, "current-jobs-ready", 1, 5),
                "round %d: the job did not come back ready" % i)
            st = parse_yaml(probe.cmd("stats"))
            self.assertEqual(st["current-jobs-reserved"], "0")
            self.assertEqual(st["current-waiting"], "0")
            r = probe.cmd("reserve-with-timeout 0")
            self.assertTrue(r.startswith(b"RESERVED"), r)
            self.assertEqual(probe.cmd("delete %s" % r.split()[1].decode()), b"DELETED\r\n")
        self.assertIsNone(self.server.proc.poll(), "server died")

    def test_reserve_after_half_close_behind_a_long_pipeline(self):
        c = self.client()
        c.send(b"list-tube-used\r\n" * 300 + b"reserve\r\n")
        c.sock.shutdown(socket.SHUT_WR)
        for _ in range(300):
            self.assertEqual(c.read_reply(), b"USING default\r\n")
        self.assertEqual(c.read_reply(), b"TIMED_OUT\r\n")
        self.assertTrue(c.closed_by_peer(5))
        probe = self.client()
        self.assertEqual(parse_yaml(probe.cmd("stats"))["current-waiting"], "0")

    @unittest.skipIf(is_beanstalkd(), "beanstalkd kicks everything in one go")
    def test_sliced_kick_never_kicks_more_than_were_buried(self):
        n = 5000
        c = self.client()
        batch = b"".join(b"put 0 0 100 1\r\nx\r\n" for _ in range(n))
        c.send(batch)
        for _ in range(n):
            c.read_reply()
        c.send(b"reserve\r\n" * n)
        ids = [int(c.read_reply().split()[1]) for _ in range(n)]
        c.send(b"".join(b"bury %d 0\r\n" % i for i in ids))
        for _ in range(n):
            self.assertEqual(c.read_reply(), b"BURIED\r\n")

        stop = threading.Event()

        def rebury():
            # A worker that buries again whatever it gets, as fast as it can.
            w = self.server.connect()
            try:
                while not stop.is_set():
                    r = w.cmd("reserve-with-timeout 0")
                    if r.startswith(b"RESERVED"):
                        w.cmd("bury %s 0" % r.split()[1].decode())
            finally:
                w.close()

        workers = [threading.Thread(target=rebury) for _ in range(2)]
        for t in workers:
            t.start()
        try:
            r = c.cmd("kick 1000000")
        finally:
            stop.set()
            for t in workers:
                t.join()
        self.assertTrue(r.startswith(b"KICKED "), r)
        self.assertLessEqual(int(r.split()[1]), n)


if __name__ == "__main__":
    unittest.main()

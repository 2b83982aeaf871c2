"""Black-box tests: hostile and broken input, and what stalkd answers.

Every class of bad input a client can send (truncated lines, binary garbage, NUL bytes,
overlong and endless lines, huge or negative numbers, bodies shorter or longer than
announced), clients that vanish mid-command (half-close, reset), slow and non-reading
clients, connection churn and running out of file descriptors. Each test checks the reply,
that the connection (or the server) stays in sync, that nothing leaks (current-connections,
jobs) and, where the input is unbounded, that the server's memory stays bounded and other
clients keep being served. docs/ROBUSTNESS.md lists these tests with the limits they check.

Run: python3 -m unittest -v tests/blackbox/test_robustness.py
"""
import os
import random
import resource
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import Server, parse_yaml, wait_stat  # noqa: E402
from beanstalk import rss_kb, cpu_seconds, is_sanitized, rst_close  # noqa: E402

BAD = b"BAD_FORMAT\r\n"
UNKNOWN = b"UNKNOWN_COMMAND\r\n"
USING_DEFAULT = b"USING default\r\n"
MB = 1024 * 1024


class LatencyProbe:
    """A second client that sends `stats` in a loop from a thread and records round trips."""

    def __init__(self, server):
        self.client = server.connect(timeout=30)
        self.samples = []
        self.errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            while not self._stop.is_set():
                t0 = time.monotonic()
                r = self.client.cmd("stats")
                self.samples.append(time.monotonic() - t0)
                if not r.startswith(b"OK "):
                    self.errors.append(r)
                time.sleep(0.002)
        except Exception as e:  # noqa: BLE001
            self.errors.append(repr(e))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)
        self.client.close()

    def max_ms(self):
        return max(self.samples) * 1000 if self.samples else float("inf")


class ServerCase(beanstalk.ServerCase):
    """beanstalk.ServerCase plus helpers only this file uses."""

    def assertConnections(self, c, n, timeout=5.0):
        ok = wait_stat(c, "current-connections", n, timeout=timeout)
        self.assertTrue(ok, "current-connections stays at %s, want %d"
                        % (self.stats(c)["current-connections"], n))

    def assertNoJobs(self, c):
        st = self.stats(c)
        self.assertEqual([st[k] for k in ("current-jobs-ready", "current-jobs-reserved",
                                          "current-jobs-delayed", "current-jobs-buried")],
                         ["0"] * 4, st)

    def sanitized(self):
        return is_sanitized(self.server.pid)


class TestTruncatedLines(ServerCase):
    def test_partial_line_gets_no_reply_until_completed(self):
        c = self.client()
        c.send(b"list-tube")
        self.assertTrue(c.no_reply_within(0.3))
        c.send(b"-used\r")
        self.assertTrue(c.no_reply_within(0.3))
        c.send(b"\n")
        self.assertEqual(c.read_reply(), USING_DEFAULT)

    def test_close_after_partial_line_leaks_nothing(self):
        probe = self.client()
        for tail in (b"us", b"use foo", b"put 0 0 10 5", b"put 0 0 10 5\r", b"stats\r"):
            c = self.server.connect()
            c.send(tail)
            time.sleep(0.05)
            c.close()
        self.assertConnections(probe, 1)
        self.assertNoJobs(probe)
        self.assertEqual(probe.cmd("list-tubes"), b"OK 14\r\n---\n- default\n\r\n")

    def test_half_close_after_partial_line_closes_connection(self):
        probe = self.client()
        c = self.client()
        c.send(b"list-tube-used\r\nstat")
        c.sock.shutdown(socket.SHUT_WR)
        # the complete command is answered, the partial one can never complete
        self.assertEqual(c.read_reply(), USING_DEFAULT)
        self.assertTrue(c.closed_by_peer(wait=3))
        self.assertConnections(probe, 1)


class TestBinaryGarbage(ServerCase):
    def test_random_high_bytes_lines(self):
        rnd = random.Random(5)
        c = self.client()
        for _ in range(200):
            n = rnd.randrange(0, 220)
            line = bytes(rnd.choice(range(0x80, 0x100)) for _ in range(n))
            self.assertEqual(c.cmd(line + b"\r\n"), UNKNOWN, line)
        self.assertInSync(c)

    def test_garbage_stream_with_nuls_and_line_ends(self):
        # 1 MB of bytes no command starts with, NULs, lone CR/LF and some CRLFs (short and
        # overlong lines): every reply is UNKNOWN_COMMAND or BAD_FORMAT, and the command
        # after the garbage is answered normally.
        rnd = random.Random(7)
        alphabet = [bytes([b]) for b in range(0x80, 0x100)] + [b"\x00", b"\r", b"\n", b"\r\n"]
        weights = [1] * 128 + [40, 4, 4, 1]
        garbage = b"".join(rnd.choices(alphabet, weights, k=MB))
        c = self.client()
        c.send(garbage + b"\r\nlist-tube-used\r\n")
        n = 0
        while True:
            r = c.read_reply()
            if r == USING_DEFAULT:
                break
            self.assertIn(r, (UNKNOWN, BAD))
            n += 1
        self.assertGreater(n, 100)
        self.assertInSync(c)
        self.assertNoJobs(c)
        self.assertEqual(self.stats(c)["total-jobs"], "0")

    def test_garbage_then_close_is_harmless(self):
        probe = self.client()
        for seed in range(20):
            c = self.server.connect()
            c.send(random.Random(seed).randbytes(5000))
            c.close()
        self.assertConnections(probe, 1)
        self.assertInSync(probe)


class TestNulBytes(ServerCase):
    def test_nul_in_command_lines(self):
        # as beanstalkd: any line holding a NUL is BAD_FORMAT (an empty line is unknown)
        c = self.client()
        for line in (b"\x00", b"\x00\x00", b"\x00stats", b"stats\x00", b"use \x00",
                     b"use a\x00", b"peek\x001", b"put 0 0 60 3\x00", b"watch \x00default",
                     b"delete 1\x00", b"\xff\x00"):
            self.assertEqual(c.cmd(line + b"\r\n"), BAD, line)
        self.assertEqual(c.cmd(b"\r\n"), UNKNOWN)
        self.assertInSync(c)
        self.assertEqual(c.cmd("list-tubes"), b"OK 14\r\n---\n- default\n\r\n")

    def test_every_byte_value_in_a_body_round_trips(self):
        c = self.client()
        body = bytes(range(256)) * 4 + b"\x00\r\n\x00" + b"\r\n" * 3 + b"\x00" * 100
        self.assertEqual(c.put(body), b"INSERTED 1\r\n")
        expect = b"%d\r\n%s\r\n" % (len(body), body)
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 " + expect)
        self.assertEqual(c.cmd("reserve"), b"RESERVED 1 " + expect)

    def test_body_of_only_nuls_and_crlfs(self):
        c = self.client()
        for body in (b"\x00", b"\r\n", b"\r\n\r\n", b"\x00" * 65535):
            r = c.put(body)
            self.assertTrue(r.startswith(b"INSERTED "), r)
            jid = int(r.split()[1])
            self.assertEqual(c.cmd("peek %d" % jid),
                             b"FOUND %d %d\r\n%s\r\n" % (jid, len(body), body))


class TestOverlongLines(ServerCase):
    def test_endless_line_costs_bounded_memory(self):
        # 50 MB without a line end: BAD_FORMAT once, the rest is discarded as it arrives;
        # the server's RSS stays small and another client is served all along.
        probe_c = self.client()
        base = rss_kb(self.server.pid)
        c = self.client(timeout=60)
        peak = [base]
        stop = threading.Event()

        def watch_rss():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_kb(self.server.pid))
                time.sleep(0.01)

        w = threading.Thread(target=watch_rss, daemon=True)
        w.start()
        chunk = b"u" * MB
        t0 = time.monotonic()
        with LatencyProbe(self.server) as probe:
            c.send(b"use ")
            for _ in range(50):
                c.send(chunk)
            c.send(b"\r\nlist-tube-used\r\n")
            self.assertEqual(c.read_reply(), BAD)
            self.assertEqual(c.read_reply(), USING_DEFAULT)
        took = time.monotonic() - t0
        stop.set()
        w.join()
        self.assertEqual(probe.errors, [])
        self.assertGreater(len(probe.samples), 0)
        growth_mb = (peak[0] - base) / 1024
        print("\nendless line: 50 MB in %.2fs; RSS %d KiB -> peak %d KiB (+%.1f MB); "
              "%d stats meanwhile, max %.1f ms"
              % (took, base, peak[0], growth_mb, len(probe.samples), probe.max_ms()),
              file=sys.stderr)
        self.assertLess(growth_mb, 8)
        self.assertEqual(probe_c.cmd("list-tubes"), b"OK 14\r\n---\n- default\n\r\n")

    def test_endless_line_then_close(self):
        probe = self.client()
        c = self.server.connect()
        c.send(b"x" * (4 * MB))
        self.assertEqual(c.read_reply(), BAD)
        c.close()
        self.assertConnections(probe, 1)

    def test_overlong_line_answered_before_its_end(self):
        # the refusal does not wait for the end of the line
        c = self.client()
        c.send(b"stats-tube " + b"a" * 500)
        self.assertEqual(c.read_reply(), BAD)
        self.assertTrue(c.no_reply_within(0.2))
        c.send(b"a" * 500 + b"\r\n")
        self.assertInSync(c)

    def test_overlong_line_looking_like_commands_is_not_executed(self):
        c = self.client()
        line = b"x" * 300 + b"put 0 0 1 1\r\n"
        data = line + b"z\r\n" + b"list-tube-used\r\n"
        # the put inside the long line is discarded; "z" is its own unknown command
        self.assertEqual(self.replies(c, data, 3), [BAD, UNKNOWN, USING_DEFAULT])
        self.assertEqual(self.stats(c)["total-jobs"], "0")


class TestNumbers(ServerCase):
    def test_huge_and_negative_ids(self):
        c = self.client()
        c.put("x")
        cases = {
            "18446744073709551615": b"NOT_FOUND\r\n",   # u64 max: a valid, unknown id
            "18446744073709551616": BAD,                # u64 overflow
            "99999999999999999999999": BAD,
            "0": b"NOT_FOUND\r\n",
            "-1": BAD, "-0": BAD, "+1": BAD, "0x1": BAD, "1e3": BAD, "": BAD,
        }
        for verb in ("delete", "peek", "stats-job", "touch", "reserve-job", "kick-job",
                     "bury", "release"):
            for arg, want in cases.items():
                line = "%s %s" % (verb, arg)
                if verb == "bury":
                    line += " 0"
                elif verb == "release":
                    line += " 0 0"
                if arg == "" and verb in ("peek", "delete", "touch", "kick-job"):
                    want = BAD
                self.assertEqual(c.cmd(line), want, line)
        self.assertEqual(c.cmd("peek 01"), b"FOUND 1 1\r\nx\r\n")      # leading zeros
        self.assertEqual(c.cmd("peek   1"), b"FOUND 1 1\r\nx\r\n")     # extra spaces
        self.assertEqual(c.cmd("peek 1 "), BAD)                         # trailing space
        self.assertInSync(c)

    def test_u32_fields_overflow(self):
        c = self.client()
        for line in ("put 4294967296 0 0 1", "put 0 18446744073709551616 0 1",
                     "put 0 0 99999999999999999999 1", "put 0 0 0 4294967296",
                     "put 0 0 0 -0", "pause-tube default 4294967296",
                     "reserve-with-timeout 4294967296"):
            self.assertEqual(c.cmd(line), BAD, line)
        self.assertEqual(c.cmd(b"put 0 0 0 0000000000000000000000000001\r\nz\r\n"),
                         b"INSERTED 1\r\n")
        self.assertInSync(c)

    def test_reserve_with_timeout_reads_its_number_as_1_13(self):
        # 1.13's read_u32 with an end pointer: spaces, digits, and whatever follows them is
        # ignored; no digits, a sign, a tab or more than INT_MAX is BAD_FORMAT (uncounted)
        c = self.client()
        timed_out = ("0x", "0 5", "0 ", "  0", "00", "0x10", "0\t", "0-1", "0.9", "0abc def")
        for arg in timed_out:
            self.assertEqual(c.cmd("reserve-with-timeout " + arg), b"TIMED_OUT\r\n", arg)
        for arg in ("-1", "-0", "+0", "x", "x0", "", " ", "\t0", "2147483648", "4294967295",
                    "4294967296", "18446744073709551616"):
            self.assertEqual(c.cmd("reserve-with-timeout " + arg), BAD, arg)
        self.assertEqual(self.stats(c)["cmd-reserve-with-timeout"], str(len(timed_out)))
        c.put("x")
        self.assertEqual(c.cmd("reserve-with-timeout 2147483647 garbage"), b"RESERVED 1 1\r\nx\r\n")
        self.assertEqual(c.cmd("release 1 0 0"), b"RELEASED\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 5x"), b"RESERVED 1 1\r\nx\r\n")
        self.assertInSync(c)

    def test_kick_count_is_read_like_strtoul(self):
        # as beanstalkd: leading sign and trailing junk accepted, low 32 bits kept, so
        # "kick -1" kicks everything; a count beyond u64 is BAD_FORMAT
        c = self.client()
        for i in range(3):
            c.put("b%d" % i)
            c.cmd("reserve")
            c.cmd("bury %d 0" % (i + 1))
        self.assertEqual(c.cmd("kick 1x"), b"KICKED 1\r\n")
        self.assertEqual(c.cmd("kick 4294967296"), b"KICKED 0\r\n")  # low 32 bits: 0
        self.assertEqual(c.cmd("kick 18446744073709551616"), BAD)
        self.assertEqual(c.cmd("kick -1"), b"KICKED 2\r\n")
        self.assertEqual(self.stats(c)["current-jobs-ready"], "3")


class TestBodyLength(ServerCase):
    def test_body_shorter_than_announced_waits(self):
        c = self.client()
        c.send(b"put 0 0 10 10\r\nabc\r\n")
        self.assertTrue(c.no_reply_within(0.3))
        # the declared count wins: what looked like the end and the next command are body
        c.send(b"stats\r\n")
        self.assertEqual(c.read_reply(), b"INSERTED 1\r\n")
        self.assertEqual(c.cmd("peek 1"), b"FOUND 1 10\r\nabc\r\nstats\r\n")

    def test_body_longer_than_announced(self):
        c = self.client()
        data = b"put 0 0 10 3\r\nabcdef\r\nlist-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 3),
                         [b"EXPECTED_CRLF\r\n", UNKNOWN, USING_DEFAULT])
        self.assertNoJobs(c)

    def test_body_longer_with_embedded_command_is_executed(self):
        # bytes after the declared body (and its missing CRLF) are commands: a client that
        # lies about the length can only hurt itself
        c = self.client()
        data = b"put 0 0 10 2\r\nab\r\nuse evil\r\n"
        self.assertEqual(self.replies(c, data, 2), [b"INSERTED 1\r\n", b"USING evil\r\n"])
        data = b"put 0 0 10 2\r\nabuse evil2\r\n"
        self.assertEqual(self.replies(c, data, 2), [b"EXPECTED_CRLF\r\n", UNKNOWN])

    def test_announced_size_is_not_allocated_past_max_memory(self):
        # A put allocates its job when the command line arrives; many clients announcing
        # big bodies and never sending them are capped by --max-memory.
        srv = Server(args=("--max-memory", "1M"))
        self.addCleanup(srv.stop)
        probe = srv.connect()
        self.addCleanup(probe.close)
        hogs = []
        for _ in range(40):
            h = srv.connect()
            self.addCleanup(h.close)
            h.send(b"put 0 0 10 65535\r\n" + b"x" * 100)
            hogs.append(h)
        time.sleep(0.2)
        # at most 1 MiB / 64 KiB of them can hold a job: the rest get OUT_OF_MEMORY once
        # they send the whole body
        outs = 0
        for h in hogs:
            h.send(b"x" * 65435 + b"\r\n")
        for h in hogs:
            r = h.read_reply()
            self.assertIn(r, (b"OUT_OF_MEMORY\r\n",) + tuple(b"INSERTED %d\r\n" % i
                                                             for i in range(1, 41)))
            outs += r == b"OUT_OF_MEMORY\r\n"
        self.assertGreaterEqual(outs, 40 - 16)
        self.assertLessEqual(outs, 40 - 14)
        for h in hogs:
            h.close()
        self.assertTrue(wait_stat(probe, "current-connections", 1))
        ready = int(parse_yaml(probe.cmd("stats"))["current-jobs-ready"])
        self.assertEqual(ready, 40 - outs)

    def test_huge_announced_body_costs_nothing_until_sent(self):
        srv = Server(args=("-z", str(256 * MB), "--max-memory", "1G"))
        self.addCleanup(srv.stop)
        c = srv.connect()
        self.addCleanup(c.close)
        base = rss_kb(srv.pid)
        c.send(b"put 0 0 10 %d\r\n" % (256 * MB) + b"x" * 1000)
        time.sleep(0.3)
        grown_mb = (rss_kb(srv.pid) - base) / 1024
        self.assertLess(grown_mb, 16 if not is_sanitized(srv.pid) else 64)
        c.close()
        p = srv.connect()
        self.addCleanup(p.close)
        self.assertTrue(wait_stat(p, "current-connections", 1))
        self.assertEqual(parse_yaml(p.cmd("stats"))["current-jobs-ready"], "0")


class TestAbruptDisconnects(ServerCase):
    """A client that half-closes, closes or resets in the middle of a line or a body, or
    while holding reserved jobs: the connection goes away, no job appears, reserved jobs
    come back."""

    POSITIONS = {
        "mid-line": b"put 0 0 10 5",
        "mid-crlf": b"put 0 0 10 5\r",
        "mid-body": b"put 0 0 10 5\r\nab",
        "body-no-crlf": b"put 0 0 10 5\r\nabcde",
        "body-half-crlf": b"put 0 0 10 5\r\nabcde\r",
        "mid-skip": b"put 0 0 10 70000\r\n" + b"y" * 1000,
        "mid-long-line": b"z" * 5000,
    }

    def _check_clean(self, probe):
        self.assertConnections(probe, 1)
        self.assertNoJobs(probe)
        st = self.stats(probe)
        self.assertEqual(st["current-producers"], "0")
        self.assertInSync(probe)

    def _each(self, finish):
        probe = self.client()
        for name, data in self.POSITIONS.items():
            with self.subTest(position=name):
                c = self.server.connect()
                c.cmd("use mid")
                c.send(data)
                time.sleep(0.05)
                finish(c)
                self._check_clean(probe)
                self.assertEqual(probe.cmd("stats-tube mid"), b"NOT_FOUND\r\n")

    def test_close(self):
        self._each(lambda c: c.close())

    def test_reset(self):
        self._each(lambda c: rst_close(c.sock))

    def test_half_close(self):
        def finish(c):
            c.sock.shutdown(socket.SHUT_WR)
            # everything the server still had to say, then EOF
            c.sock.settimeout(3)
            rest = b""
            while True:
                chunk = c.sock.recv(4096)
                if not chunk:
                    break
                rest += chunk
            c.close()
            self.assertIn(rest, (b"", BAD))
        self._each(finish)

    def test_reset_while_holding_reserved_jobs(self):
        probe = self.client()
        for i in range(20):
            probe.put("j%d" % i)
        c = self.server.connect()
        for _ in range(10):
            self.assertTrue(c.cmd("reserve").startswith(b"RESERVED "))
        c.send(b"put 0 0 10 100\r\n" + b"p" * 10)
        time.sleep(0.05)
        rst_close(c.sock)
        self.assertConnections(probe, 1)
        st = self.stats(probe)
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-reserved"]), ("20", "0"))
        self.assertEqual(probe.cmd("peek 21"), b"NOT_FOUND\r\n")

    def test_reset_with_unread_replies(self):
        # the server has replies queued for a peer that is gone: it must not block or spin
        probe = self.client()
        probe.put(b"q" * 60000)
        c = self.server.connect()
        c.send(b"peek 1\r\n" * 200)
        time.sleep(0.2)
        rst_close(c.sock)
        self.assertConnections(probe, 1)
        t0 = cpu_seconds(self.server.pid)
        time.sleep(0.5)
        self.assertLess(cpu_seconds(self.server.pid) - t0, 0.2)


class TestSlowClients(ServerCase):
    def test_one_byte_every_20ms(self):
        # a whole put dribbled in byte by byte does not delay another client
        slow = self.client()
        data = b"use slow\r\nput 7 0 60 11\r\nhello\r\nslow\r\n"
        half = len(data) // 2
        with LatencyProbe(self.server) as probe:
            for i in range(len(data)):
                if i == half:
                    at_half = len(probe.samples)
                slow.send(data[i:i + 1])
                time.sleep(0.02)
            before_last = len(probe.samples)
        self.assertEqual(slow.read_reply(), b"USING slow\r\n")
        self.assertEqual(slow.read_reply(), b"INSERTED 1\r\n")
        self.assertEqual(slow.cmd("peek 1"), b"FOUND 1 11\r\nhello\r\nslow\r\n")
        self.assertEqual(probe.errors, [])
        # a server that waited for the slow client's whole put would answer the probe
        # nothing while the second half of it trickled in; the probe's own round trips
        # are reported, not asserted (a busy machine stretches them)
        self.assertGreater(before_last - at_half, 3, "the probe was not served meanwhile")
        print("\nslow client: %d stats meanwhile, max %.1f ms"
              % (len(probe.samples), probe.max_ms()), file=sys.stderr)

    def test_pipelined_peeks_never_read(self):
        # A client pipelines `peek` of a 60 KB job and never reads. The server stops
        # executing its commands once 1 MiB of replies is queued, and stops reading its
        # socket once 256 KiB of commands are buffered: RSS stays bounded, others are served.
        srv_pid = self.server.pid
        p = self.client()
        self.assertEqual(p.put(b"v" * 60000), b"INSERTED 1\r\n")
        base = rss_kb(srv_pid)
        hog = self.client()
        hog.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        hog.sock.settimeout(1.0)
        chunk = b"peek 1\r\n" * 1024
        sent = 0
        with LatencyProbe(self.server) as probe:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    n = hog.sock.send(chunk)
                except socket.timeout:
                    break  # the server stopped reading
                sent += n
            time.sleep(0.5)
            peak = rss_kb(srv_pid)
        peeks = int(self.stats(p)["cmd-peek"])
        growth_mb = (peak - base) / 1024
        print("\npipelined peeks: %d sent (%.1f MB) before the server stopped reading, "
              "%d executed; RSS %d KiB -> %d KiB (+%.1f MB); stats max %.1f ms"
              % (sent // 8, sent / MB, peeks, base, peak, growth_mb, probe.max_ms()),
              file=sys.stderr)
        self.assertLess(sent, 64 * MB, "the server never stopped reading")
        self.assertLess(peeks, sent // 8)
        self.assertEqual(probe.errors, [])
        self.assertGreater(len(probe.samples), 0)
        self.assertLess(growth_mb, 16 if not self.sanitized() else 64)
        # once the hog reads, everything it sent is answered in order
        hog.sock.settimeout(30)
        for _ in range(64):
            self.assertEqual(hog.read_reply(), b"FOUND 1 60000\r\n" + b"v" * 60000 + b"\r\n")
        hog.close()
        self.assertConnections(p, 1)


class TestConnectionChurn(ServerCase):
    def test_many_connections_opened_and_closed_quickly(self):
        probe = self.client()
        base = rss_kb(self.server.pid)
        n = 1500
        t0 = time.monotonic()
        for i in range(n):
            s = socket.create_connection(self.server.address(), timeout=10)
            kind = i % 4
            if kind == 1:
                s.sendall(b"use churn%d\r\nput 0 0 10 1\r\n" % i)   # mid-body
            elif kind == 2:
                s.sendall(b"reserve\r\n")                           # waiting
            if kind == 3:
                rst_close(s)
            else:
                s.close()
        took = time.monotonic() - t0
        self.assertConnections(probe, 1, timeout=10)
        st = self.stats(probe)
        self.assertGreaterEqual(int(st["total-connections"]), n + 1)
        self.assertEqual((st["current-waiting"], st["current-tubes"]), ("0", "1"))
        self.assertNoJobs(probe)
        grown_mb = (rss_kb(self.server.pid) - base) / 1024
        print("\nchurn: %d connections in %.2fs, RSS +%.1f MB" % (n, took, grown_mb),
              file=sys.stderr)
        self.assertLess(grown_mb, 16 if not self.sanitized() else 128)

    def test_parallel_churn_while_serving(self):
        errors = []

        def churn(k):
            try:
                for i in range(200):
                    s = socket.create_connection(self.server.address(), timeout=10)
                    s.sendall(b"stats\r\n")
                    if i % 2:
                        rst_close(s)
                    else:
                        s.close()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        with LatencyProbe(self.server) as probe:
            threads = [threading.Thread(target=churn, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        self.assertEqual(errors, [])
        self.assertEqual(probe.errors, [])
        self.assertGreater(len(probe.samples), 0)
        print("\nparallel churn: %d stats meanwhile, max %.1f ms"
              % (len(probe.samples), probe.max_ms()), file=sys.stderr)
        self.assertConnections(self.client(), 1, timeout=10)


class TestOutOfFileDescriptors(unittest.TestCase):
    NOFILE = 48

    def test_fd_exhaustion_backs_off_and_recovers(self):
        def low_nofile():
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.NOFILE, self.NOFILE))

        srv = Server(popen_kwargs={"preexec_fn": low_nofile})
        self.addCleanup(srv.stop)
        probe = srv.connect()
        self.addCleanup(probe.close)
        clients = []

        def cleanup():
            for c in clients:
                c.close()
        self.addCleanup(cleanup)
        # The kernel completes handshakes for the listen backlog even when the server can't
        # accept: a connection is "served" if it gets a reply.
        served, stuck = [], []
        for _ in range(self.NOFILE + 20):
            c = srv.connect(timeout=10)
            clients.append(c)
            c.send(b"list-tube-used\r\n")
            if c.no_reply_within(0.2):
                stuck.append(c)
            else:
                self.assertEqual(c.read_reply(), USING_DEFAULT)
                served.append(c)
        self.assertGreater(len(stuck), 10)
        self.assertLess(len(served), self.NOFILE)
        self.assertGreater(len(served), self.NOFILE - 15)
        # out of descriptors, with pending connections: the server must not spin
        t0 = cpu_seconds(srv.pid)
        time.sleep(1.0)
        cpu = cpu_seconds(srv.pid) - t0
        print("\nfd exhaustion: RLIMIT_NOFILE %d, %d served, %d pending; CPU %.2fs over 1s"
              % (self.NOFILE, len(served) + 1, len(stuck), cpu), file=sys.stderr)
        self.assertLess(cpu, 0.3)
        # existing clients are still served
        self.assertInSync_(probe)
        self.assertEqual(served[0].cmd("list-tube-used"), USING_DEFAULT)
        # free some descriptors: pending connections are accepted and answered
        for c in served[:len(stuck) + 5]:
            c.close()
        for c in stuck:
            c.sock.settimeout(5)
            self.assertEqual(c.read_reply(), USING_DEFAULT)
        fresh = srv.connect()
        clients.append(fresh)
        self.assertEqual(fresh.cmd("list-tube-used"), USING_DEFAULT)

    def assertInSync_(self, c):
        self.assertEqual(c.cmd("list-tube-used"), USING_DEFAULT)


if __name__ == "__main__":
    unittest.main()

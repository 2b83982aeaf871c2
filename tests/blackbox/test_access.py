"""Black-box tests: stalkd's access control and client limits (beanstalkd has neither).

--allow CIDR lists the client addresses that may connect; --unix-mode sets the unix socket
file's permissions; --stalled-client-timeout disconnects a client that lets its unread
replies fill the output buffer and then reads nothing. (Memory returned to the OS after mass
deletes is checked by test_soak.py's TestMemoryReturn.)

Run: python3 -m unittest -v tests/blackbox/test_access.py
"""
import os
import socket
import stat
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import Server, is_beanstalkd, wait_stat  # noqa: E402


@unittest.skipIf(is_beanstalkd(), "stalkd's own options")
class AllowTest(unittest.TestCase):
    def test_listed_clients_are_served(self):
        with Server(args=("--allow", "10.0.0.0/8", "--allow", "127.0.0.0/8,::1")) as s:
            c = s.connect()
            self.assertEqual(c.put("ok"), b"INSERTED 1\r\n")
            c.close()

    def test_unlisted_loopback_is_refused_and_others_keep_working(self):
        # 127.0.0.1 is allowed, 127.0.0.2 (also loopback) is not.
        with Server(args=("--allow", "127.0.0.1/32")) as s:
            good = s.connect()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(5)
            sock.bind(("127.0.0.2", 0))
            sock.connect(("127.0.0.1", s.port))
            try:
                sock.sendall(b"put 0 0 10 1\r\nx\r\n")
                reply = sock.recv(100)
            except ConnectionResetError:
                reply = b""  # closed before the bytes arrived: the kernel answers with a RST
            self.assertEqual(reply, b"")  # closed without a reply
            sock.close()
            self.assertEqual(good.cmd("stats-tube default").count(b"total-jobs: 0"), 1)
            good.close()

    def test_bad_cidr_is_a_usage_error(self):
        for bad in ("10.0.0.0/33", "not-an-address", "10.0.0.0/8,,1.2.3.4", ""):
            with self.assertRaises(RuntimeError, msg=bad):
                Server(args=("--allow", bad)).stop()


@unittest.skipIf(is_beanstalkd(), "stalkd's own options")
class UnixModeTest(unittest.TestCase):
    def test_socket_file_gets_the_mode(self):
        d = tempfile.mkdtemp(prefix="stalkd_unix_")
        path = os.path.join(d, "q.sock")
        try:
            with Server(unix_path=path, args=("--unix-mode", "600")) as s:
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
                c = s.connect()
                self.assertEqual(c.put("x"), b"INSERTED 1\r\n")
                c.close()
            with Server(unix_path=path, args=("--unix-mode", "0660")):
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o660)
        finally:
            if os.path.exists(path):
                os.unlink(path)
            os.rmdir(d)

    def test_bad_mode_is_a_usage_error(self):
        for bad in ("9", "rw", "", "77777"):
            with self.assertRaises(RuntimeError, msg=bad):
                Server(args=("--unix-mode", bad)).stop()


@unittest.skipIf(is_beanstalkd(), "stalkd's own options")
class StalledClientTest(unittest.TestCase):
    def test_client_that_never_reads_is_disconnected(self):
        with Server(args=("--stalled-client-timeout", "1", "-z", "100000")) as s:
            other = s.connect()
            self.assertTrue(other.put("y" * 60000).startswith(b"INSERTED"))
            hog = socket.create_connection(("127.0.0.1", s.port))
            hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            hog.settimeout(0.2)
            # Ask for far more replies than the buffers hold, and never read them.
            sent = 0
            request = b"peek 1\r\n" * 1000
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    sent += hog.send(request)
                except (socket.timeout, BlockingIOError):
                    break
                except OSError:
                    break
            self.assertGreater(sent, 0)
            # The other client is served all along, and the hog goes away within a few
            # seconds of the timeout.
            self.assertTrue(wait_stat(other, "current-connections", 1, 10),
                "the stalled client was not disconnected")
            self.assertTrue(other.cmd("peek 1").startswith(b"FOUND 1 60000"))
            hog.close()
            other.close()

    def test_client_stalled_after_a_partial_write_is_disconnected(self):
        # Deterministic: over a unix socket (default send buffer about 208 KiB) the first
        # write of two 1 MB replies is partial and leaves more than the 1 MiB high-water
        # mark queued; the peer then reads nothing, so the socket never becomes writable
        # again. The stall must be timed from that partial write: no EAGAIN ever comes.
        d = tempfile.mkdtemp(prefix="stalkd_stall_")
        path = os.path.join(d, "q.sock")
        try:
            with Server(unix_path=path,
                        args=("--stalled-client-timeout", "1", "-z", "2000000")) as s:
                other = s.connect()
                self.assertTrue(other.put("y" * 1040000).startswith(b"INSERTED"))
                hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                hog.settimeout(5)
                hog.connect(path)
                hog.sendall(b"peek 1\r\n" * 8)  # 8 MB of replies, never read
                self.assertTrue(wait_stat(other, "current-connections", 1, 10),
                    "the stalled client was not disconnected")
                self.assertEqual(hog.recv(1 << 20)[:15], b"FOUND 1 1040000")
                hog.close()
                other.close()
        finally:
            if os.path.exists(path):
                os.unlink(path)
            os.rmdir(d)

    def test_slow_but_reading_client_is_kept(self):
        with Server(args=("--stalled-client-timeout", "1", "-z", "100000")) as s:
            c = s.connect()
            self.assertTrue(c.put("z" * 60000).startswith(b"INSERTED"))
            c.send(b"peek 1\r\n" * 60)  # about 3.6 MB of replies
            got = 0
            start = time.monotonic()
            for _ in range(60):
                r = c.read_reply()
                self.assertTrue(r.startswith(b"FOUND 1 60000"))
                got += 1
                time.sleep(0.03)  # reads slowly, 1.8 s in all
            self.assertEqual(got, 60)
            self.assertGreater(time.monotonic() - start, 1.5)
            self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")
            c.close()


if __name__ == "__main__":
    unittest.main()

"""Black-box test: systemd socket activation (LISTEN_PID/LISTEN_FDS), as beanstalkd supports.

The test binds a listening socket itself, hands it to the server as fd 3 with LISTEN_FDS=1
and LISTEN_PID set to the server's own pid (via `exec` from a shell), and checks the server
serves on it without binding anything else.

Run: python3 -m unittest -v tests/blackbox/test_socket_activation.py
"""
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import STALKD_BIN, Client  # noqa: E402


class SocketActivationTest(unittest.TestCase):
    def test_serves_on_the_inherited_socket(self):
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(16)
        port = lsock.getsockname()[1]
        fd = lsock.fileno()

        def as_fd3():
            os.dup2(fd, 3)
            os.set_inheritable(3, True)

        # -l/-p point elsewhere on purpose: an inherited socket takes precedence.
        other_port = beanstalk.free_port()
        cmd = 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -l 127.0.0.1 -p %d' % other_port
        # pass_fds keeps fd 3 open across exec: Popen closes other descriptors after
        # preexec_fn has run (fd itself need not be 3, e.g. under ctest).
        proc = subprocess.Popen(["sh", "-c", cmd, STALKD_BIN], preexec_fn=as_fd3,
                                pass_fds=(3,), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        lsock.close()

        deadline = time.monotonic() + 10
        c = None
        while time.monotonic() < deadline:
            try:
                c = Client(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                time.sleep(0.05)
        self.assertIsNotNone(c, "no server on the inherited socket")
        self.addCleanup(c.close)
        self.assertEqual(c.put("hello"), b"INSERTED 1\r\n")
        self.assertEqual(c.cmd("reserve"), b"RESERVED 1 5\r\nhello\r\n")
        # nothing listens on the -p port
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", other_port), timeout=1).close()


if __name__ == "__main__":
    unittest.main()

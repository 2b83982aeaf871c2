"""The test fixture's own promise: a server the tests start is the one they talk to.

Tests run in parallel and pick ports with free_port() (bind 0, close), so another test's
server can take a port between its choice and our server's bind. The fixture must then not
take the other server's answers for ours: it waits for a listener its own process holds, and
starts again on another port when its process could not bind."""
import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import beanstalk  # noqa: E402


class PortTakenFirst(unittest.TestCase):
    def test_a_port_taken_before_the_bind_is_left_for_another(self):
        squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(8)
        taken = squatter.getsockname()[1]
        self.addCleanup(squatter.close)
        self.assertEqual(beanstalk.listener_owned(os.getpid(), taken), (True, True))

        real = beanstalk.free_port
        picks = [taken]
        beanstalk.free_port = lambda: picks.pop() if picks else real()
        self.addCleanup(setattr, beanstalk, "free_port", real)
        with beanstalk.Server() as srv:
            self.assertNotEqual(srv.port, taken)
            self.assertEqual(beanstalk.listener_owned(srv.pid, srv.port), (True, True))
            c = srv.connect()
            try:
                c.send(b"list-tube-used\r\n")
                self.assertEqual(c.read_line(), b"USING default\r\n")
            finally:
                c.close()

    def test_a_port_given_by_the_test_and_taken_is_an_error(self):
        squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(8)
        self.addCleanup(squatter.close)
        with self.assertRaises(beanstalk.PortTaken):
            beanstalk.Server(port=squatter.getsockname()[1])


if __name__ == "__main__":
    unittest.main()

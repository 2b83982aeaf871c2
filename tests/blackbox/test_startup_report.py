"""Black-box: what stalkd prints on stdout when it starts (stalkd(8), START-UP): its version,
pid and store, one line per listener with the address its socket has, and what the binlog
brought back; with -V also beanstalkd's own -V lines (pid, bind).

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/blackbox/test_startup_report.py
"""
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import Server, free_port, is_beanstalkd, redis_store  # noqa: E402


class StartupReportTest(unittest.TestCase):
    def setUp(self):
        if is_beanstalkd():
            self.skipTest("stalkd's start-up lines (beanstalkd prints nothing without -V)")
        if redis_store():
            self.skipTest("the embedded store's lines (a Redis store's are its URL)")
        self.tmp = tempfile.mkdtemp(prefix="stalkd_startup_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def start(self, *args):
        """A server with `args`; returns (server, the lines it printed once it serves)."""
        log = os.path.join(self.tmp, "log.%d" % free_port())
        srv = Server(args=args, log=log)
        self.addCleanup(srv.stop)
        c = srv.connect()
        c.cmd("stats")  # it serves: every start-up line is out (they come first, flushed)
        c.close()
        with open(log, encoding="utf-8") as f:
            return srv, f.read().splitlines()

    def test_listeners_and_store(self):
        api, admin = free_port(), free_port()
        srv, lines = self.start("--http", "127.0.0.1:%d" % api,
                                "--admin-http", "127.0.0.1:%d" % admin)
        self.assertRegex(lines[0], r"^stalkd 1\.13\.\d+: pid %d, jobs in memory only \(no -b: "
                                   r"they are lost when stalkd stops\)$" % srv.pid)
        self.assertEqual(lines[1:], [
            "stalkd: beanstalkd protocol on 127.0.0.1:%d" % srv.port,
            "stalkd: lmstfy HTTP API on 127.0.0.1:%d" % api,
            "stalkd: admin HTTP (dashboard, /metrics, /healthz, /readyz) on 127.0.0.1:%d"
            % admin])

    def test_binlog_recovery_is_reported(self):
        binlog = os.path.join(self.tmp, "binlog")
        os.mkdir(binlog)
        srv, lines = self.start("-b", binlog)
        self.assertEqual(lines[0], "stalkd: binlog %s: no jobs to recover" % binlog)
        self.assertIn("jobs in memory, logged to the binlog in %s" % binlog, lines[1])
        c = srv.connect()
        for body in ("a", "b"):
            c.put(body)
        c.close()
        srv.stop()
        srv, lines = self.start("-b", binlog)
        self.assertRegex(lines[0], r"^stalkd: binlog %s: 2 jobs recovered in \d+\.\d\d s$"
                         % re.escape(binlog))
        self.assertEqual(lines[2], "stalkd: beanstalkd protocol on 127.0.0.1:%d" % srv.port)

    def test_unix_socket_and_verbose(self):
        path = os.path.join(self.tmp, "sock")
        srv = Server(unix_path=path, args=("-V",), log=os.path.join(self.tmp, "log"))
        self.addCleanup(srv.stop)
        c = srv.connect()
        c.cmd("stats")
        c.close()
        with open(os.path.join(self.tmp, "log"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertIn("stalkd: beanstalkd protocol on unix:%s" % path, lines)
        # beanstalkd's -V lines too
        self.assertIn("pid %d" % srv.pid, lines)
        self.assertTrue([l for l in lines if re.match(r"^bind \d+ unix:%s$" % re.escape(path), l)],
                        lines)


if __name__ == "__main__":
    unittest.main()

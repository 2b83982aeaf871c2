"""Black-box tests: command-line flags, SIGUSR1 drain mode, SIGTERM/SIGINT shutdown.

Run: python3 -m unittest -v tests/blackbox/test_flags_signals.py
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import (Server, ServerCase, free_port, is_beanstalkd, parse_yaml,  # noqa: E402
                       wait_stat)

USAGE_FLAGS = ("-l ADDR", "-p PORT", "-z BYTES", "-v", "-h")


def run(args, timeout=10):
    return subprocess.run([beanstalk.STALKD_BIN] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


class TestInformationalFlags(unittest.TestCase):
    def test_version(self):
        p = run(["-v"])
        self.assertEqual(p.returncode, 0)
        self.assertRegex(p.stdout.decode(), r"^\S+ \d+\.\d+\S*\n$")

    def test_version_is_cmakes_project_version(self):
        # beanstalkd 1.13 prints "beanstalkd 1.13"; stalkd its name and the version that
        # CMakeLists.txt's project() gives, for -v and --version alike
        if is_beanstalkd():
            self.skipTest("stalkd's version and --version")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
            m = re.search(r"^project\(stalkd VERSION (\S+)", f.read(), re.M)
        self.assertIsNotNone(m)
        for flag in ("-v", "--version"):
            p = run([flag])
            self.assertEqual((p.returncode, p.stdout, p.stderr),
                             (0, ("stalkd %s\n" % m.group(1)).encode(), b""), flag)

    def test_help(self):
        # beanstalkd prints -h on stderr and has no --help; stalkd prints the help asked for
        # on stdout, for -h and --help alike
        for flag in ("-h",) if is_beanstalkd() else ("-h", "--help"):
            p = run([flag])
            self.assertEqual(p.returncode, 0, flag)
            usage = (p.stderr if is_beanstalkd() else p.stdout).decode()
            self.assertIn("Use: ", usage)
            for f in USAGE_FLAGS:
                self.assertIn(f, usage)
            if not is_beanstalkd():
                self.assertEqual(p.stderr, b"", flag)
                self.assertIn("/usr/share/doc/stalkd", usage)

    def test_unknown_flag(self):
        flags = [["-X"]] + ([] if is_beanstalkd() else [["--nope"], ["--help=x"]])
        for flag in flags:
            p = run(flag + ["-l", "127.0.0.1", "-p", str(free_port())])
            self.assertEqual(p.returncode, 5, flag)
            err = p.stderr.decode()
            self.assertIn("unknown flag", err)
            self.assertIn("Use: ", err)
            self.assertEqual(p.stdout, b"", flag)

    def test_invalid_size(self):
        p = run(["-z", "abc", "-l", "127.0.0.1", "-p", str(free_port())])
        self.assertEqual(p.returncode, 5)
        self.assertIn("Use: ", p.stderr.decode())


class TestServingFlags(unittest.TestCase):
    def serve(self, *args):
        srv = Server(args=args)
        self.addCleanup(srv.stop)
        c = srv.connect()
        self.addCleanup(c.close)
        return srv, c

    def test_z_sets_max_job_size(self):
        _, c = self.serve("-z", "100")
        self.assertEqual(parse_yaml(c.cmd("stats"))["max-job-size"], "100")
        self.assertEqual(c.put(b"x" * 100), b"INSERTED 1\r\n")
        self.assertEqual(c.cmd(b"put 0 0 1 101\r\n" + b"x" * 101 + b"\r\n"), b"JOB_TOO_BIG\r\n")

    def test_z_too_large_is_clamped(self):
        srv, c = self.serve("-z", "2000000000")
        self.assertEqual(parse_yaml(c.cmd("stats"))["max-job-size"], "1073741824")

    def test_z_max_is_accepted(self):
        _, c = self.serve("-z", "1073741824")
        self.assertEqual(parse_yaml(c.cmd("stats"))["max-job-size"], "1073741824")

    def test_removed_flags_c_and_n_are_accepted(self):
        for flag in ("-c", "-n"):
            srv, c = self.serve(flag)
            self.assertEqual(c.put("x"), b"INSERTED 1\r\n")
            self.assertEqual(c.cmd("reserve"), b"RESERVED 1 1\r\nx\r\n")

    def test_verbose_flag_accepted(self):
        _, c = self.serve("-V")
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")

    def test_listens_on_given_port(self):
        srv, c = self.serve()
        self.assertEqual(c.sock.getpeername(), ("127.0.0.1", srv.port))


class TestDrainMode(ServerCase):
    def test_sigusr1_enters_drain_mode(self):
        c = self.client()
        self.assertEqual(c.put("before"), b"INSERTED 1\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats"))["draining"], "false")
        self.server.signal(signal.SIGUSR1)
        self.assertTrue(wait_stat(c, "draining", "true"), "stats never showed draining: true")
        # the body is still consumed, so the connection stays in sync
        c.send(b"put 0 0 10 5\r\nafter\r\nlist-tube-used\r\n")
        self.assertEqual(c.read_reply(), b"DRAINING\r\n")
        self.assertEqual(c.read_reply(), b"USING default\r\n")
        # existing jobs can still be worked
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED 1 6\r\nbefore\r\n")
        self.assertEqual(c.cmd("delete 1"), b"DELETED\r\n")
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual(st["total-jobs"], "1")
        self.assertEqual(st["cmd-put"], "2")

    def test_drain_applies_to_new_connections_and_stays_on(self):
        c = self.client()
        self.server.signal(signal.SIGUSR1)
        self.assertTrue(wait_stat(c, "draining", "true"))
        self.server.signal(signal.SIGUSR1)
        d = self.client()
        self.assertEqual(d.put("x"), b"DRAINING\r\n")
        self.assertEqual(parse_yaml(d.cmd("stats"))["draining"], "true")
        self.assertEqual(d.cmd(b"put 0 0 10 70000\r\n" + b"x" * 70000 + b"\r\n"),
                         b"JOB_TOO_BIG\r\n")
        self.assertEqual(d.cmd("use other"), b"USING other\r\n")


class TestTermination(unittest.TestCase):
    def expected_status(self, sig):
        # beanstalkd 1.12 installs no handler: it dies by the signal. stalkd exits with 0.
        return -sig if is_beanstalkd() else 0

    def stop_with(self, sig, *args):
        old = signal.getsignal(signal.SIGINT)
        # make sure the child does not inherit an ignored SIGINT from our own parent
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            srv = Server(args=list(args))
        finally:
            signal.signal(signal.SIGINT, old)
        self.addCleanup(srv.stop)
        c = srv.connect()
        self.addCleanup(c.close)
        c.put("x")
        c.cmd("reserve")
        c.send("reserve\r\n")  # leave a waiting client behind
        srv.signal(sig)
        try:
            code = srv.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.fail("server did not exit within 5 s of signal %d" % sig)
        self.assertEqual(code, self.expected_status(sig))
        self.assertTrue(c.closed_by_peer(wait=2))

    def test_sigterm(self):
        self.stop_with(signal.SIGTERM)

    def test_sigint(self):
        self.stop_with(signal.SIGINT)

    # With -b the binlog's sync thread runs too: the signals must still reach the loop.
    def binlog_dir(self):
        d = tempfile.mkdtemp(prefix="stalkd_signals_")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def test_sigterm_with_binlog(self):
        self.stop_with(signal.SIGTERM, "-b", self.binlog_dir(), "-f", "0")

    def test_sigint_with_binlog(self):
        self.stop_with(signal.SIGINT, "-b", self.binlog_dir())

    def test_sigusr1_with_binlog_drains_and_keeps_serving(self):
        srv = Server(args=["-b", self.binlog_dir(), "-f", "0"])
        self.addCleanup(srv.stop)
        c = srv.connect()
        self.addCleanup(c.close)
        self.assertEqual(c.put("x"), b"INSERTED 1\r\n")
        srv.signal(signal.SIGUSR1)
        self.assertTrue(wait_stat(c, "draining", "true"))
        self.assertEqual(c.put("y"), b"DRAINING\r\n")
        self.assertIsNone(srv.proc.poll())


if __name__ == "__main__":
    unittest.main()

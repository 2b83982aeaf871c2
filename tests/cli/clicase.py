"""Helpers of the `stalk` tests (tests/cli/): the stalk binary, a server per test (stalkd, or
Debian's beanstalkd 1.12 for the classes that set `binary = BEANSTALKD_BIN`), a way to run
stalk against it, and the jobs of a server as a raw client sees them.

The stalk binary is $STALK_BIN (CMake sets it), else the `stalk` beside $STALKD_BIN.
Not a test module itself (CMake runs tests/cli/test_*.py only).
"""
import base64
import json
import os
import pty
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import (BEANSTALKD_BIN, STALKD_BIN, Client, Server, parse_yaml,  # noqa: E402,F401
                       stats_of, wait_until)

STALK_BIN = os.environ.get("STALK_BIN") or os.path.join(
    os.path.dirname(os.path.abspath(STALKD_BIN)), "stalk")

# Exit codes (stalk(1)).
OK, NOT_FOUND, USAGE, CONNECTION, SERVER, INPUT = 0, 1, 2, 3, 4, 5


def have_beanstalkd():
    return os.access(BEANSTALKD_BIN, os.X_OK)


def b64(data):
    return base64.b64encode(data).decode()


def body_of(job):
    """The bytes of a job object of stalk's JSON (body64 or body)."""
    if "body64" in job:
        return base64.b64decode(job["body64"], validate=True)
    return job["body"].encode()


def jobs_of(client, max_id):
    """Every job with an id up to max_id, as {id: dict} of stats-job fields (strings, quotes
    of 1.13 removed) plus 'body' (bytes), read with stats-job-ext (stalkd: the extensions'
    fields too) or stats-job (beanstalkd) and peek (no state change)."""
    out = {}
    for jid in range(1, max_id + 1):
        r = client.cmd("stats-job-ext %d" % jid)
        if r == b"BAD_FORMAT\r\n":  # beanstalkd: stats-job-ext is stalkd's
            r = client.cmd("stats-job %d" % jid)
        if not r.startswith(b"OK "):
            continue
        st = {k: v.strip('"') for k, v in parse_yaml(r).items()}
        p = client.cmd("peek %d" % jid)
        if not p.startswith(b"FOUND "):
            continue
        st["body"] = p.split(b"\r\n", 1)[1][:-2]
        out[jid] = st
    return out


class StalkCase(unittest.TestCase):
    """A fresh server per test (`binary`: None for $STALKD_BIN, or BEANSTALKD_BIN, with
    `server_args`), and `stalk` run against it."""

    binary = None
    server_args = ()
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        if not os.access(STALK_BIN, os.X_OK):
            raise unittest.SkipTest("no stalk binary at %s (build the stalk target)" % STALK_BIN)
        if cls.binary == BEANSTALKD_BIN and not have_beanstalkd():
            raise unittest.SkipTest("Debian's beanstalkd is not installed (scripts/setup.sh)")

    def setUp(self):
        self.server = self.start_server()

    def start_server(self, binary=None, args=None):
        s = Server(binary=binary or self.binary or STALKD_BIN,
                   args=self.server_args if args is None else args)
        self.addCleanup(s.stop)
        return s

    def on_beanstalkd(self):
        return self.binary == BEANSTALKD_BIN

    @staticmethod
    def address(server):
        return "127.0.0.1:%d" % server.port

    def stalk(self, *args, input=None, server=None, timeout=60, env=None):
        """Runs stalk -s <server> ARGS; returns the CompletedProcess (bytes)."""
        argv = [STALK_BIN, "-s", self.address(server or self.server)] + [str(a) for a in args]
        return subprocess.run(argv, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, env=env)

    def ok(self, *args, **kw):
        """stalk ARGS, which must exit 0; returns its stdout as text."""
        r = self.stalk(*args, **kw)
        self.assertEqual(r.returncode, 0, "stalk %s: %r" % (" ".join(map(str, args)), r.stderr))
        return r.stdout.decode()

    def fails(self, code, *args, **kw):
        """stalk ARGS, which must exit `code`; returns its stderr as text."""
        r = self.stalk(*args, **kw)
        self.assertEqual(r.returncode, code, "stalk %s: out %r err %r"
                         % (" ".join(map(str, args)), r.stdout, r.stderr))
        return r.stderr.decode()

    def stalk_on_terminal(self, *args, input=None, server=None):
        """Runs stalk -s <server> ARGS with its stderr on a pseudo-terminal (stdin and
        stdout stay pipes); returns (exit status, stdout, what the terminal got)."""
        master, slave = pty.openpty()
        try:
            p = subprocess.run([STALK_BIN, "-s", self.address(server or self.server)]
                               + [str(a) for a in args], input=input,
                               stdout=subprocess.PIPE, stderr=slave, timeout=120)
        finally:
            os.close(slave)
        seen = b""
        try:
            while True:
                chunk = os.read(master, 65536)
                if not chunk:
                    break
                seen += chunk
        except OSError:  # EIO: the terminal's other side is closed and all is read
            pass
        finally:
            os.close(master)
        return p.returncode, p.stdout, seen

    def json_lines(self, *args, **kw):
        """stalk --json ARGS (exit 0); each line of its output parsed."""
        return [json.loads(l) for l in self.ok("--json", *args, **kw).splitlines() if l]

    def client(self, server=None):
        c = (server or self.server).connect()
        self.addCleanup(c.close)
        return c

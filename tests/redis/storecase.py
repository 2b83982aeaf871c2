"""StoreCase, the unittest base class of tests/redis/: Redis processes (tests/lib/
redis_fixture.py) and stalkd front ends on them, every one stopped at cleanup, even when the
test fails. Front ends log to files in a temp dir; the tail of a front end's log is printed
when it exited on its own (not by the test's kill or stop).
"""
import os
import shutil
import signal
import sys
import tempfile
import unittest

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
import beanstalk  # noqa: E402
import redis_fixture  # noqa: E402
from redis_fixture import RedisServer, ReplicatedSet, Sentinels  # noqa: E402


@unittest.skipUnless(redis_fixture.available(), "redis-server/redis-sentinel not installed")
class StoreCase(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.logdir = tempfile.mkdtemp(prefix="stalkd-fe-logs-")
        self.addCleanup(shutil.rmtree, self.logdir, True)
        self.n_front_ends = 0

    # ---- Redis

    def redis(self, **kwargs):
        r = RedisServer(**kwargs)
        self.addCleanup(r.close)
        return r

    def replicated(self, **kwargs):
        rs = ReplicatedSet(**kwargs)
        self.addCleanup(rs.close)
        return rs

    def sentinels(self, master, **kwargs):
        ss = Sentinels(master, **kwargs)
        self.addCleanup(ss.close)
        return ss

    # ---- stalkd

    def front_end(self, url, prefix, *args, wait=0, lease=None):
        """A stalkd on `url` (a RedisServer's url() or Sentinels' url()) with
        --store-prefix `prefix`, --store-wait `wait` (None: stalkd's default), --store-lease
        `lease` ms (None: the default), plus `args`."""
        self.n_front_ends += 1
        log = os.path.join(self.logdir, "stalkd-%d.log" % self.n_front_ends)
        fe = beanstalk.Server(
            args=redis_fixture.store_argv(url, prefix, wait, lease) + list(args), log=log)
        fe.ended_by_test = False
        self.addCleanup(self._stop_front_end, fe)
        return fe

    def _stop_front_end(self, fe):
        if fe.proc.poll() is not None and not fe.ended_by_test:
            with open(fe.log, errors="replace") as f:
                print("\nfront end :%d exited with %s on its own; its log ends:\n%s"
                      % (fe.port, fe.proc.returncode, "".join(f.readlines()[-20:])),
                      file=sys.stderr)
        fe.stop()

    def kill(self, fe):
        """SIGKILL a front end (no goodbye to Redis) and reap it."""
        fe.ended_by_test = True
        fe.proc.send_signal(signal.SIGKILL)
        fe.proc.wait()

    def client(self, fe, timeout=10.0):
        c = fe.connect(timeout=timeout)
        self.addCleanup(c.close)
        return c

    def sanitized(self, fe):
        """True when the front end runs under ASan (everything is slower: scale down)."""
        return beanstalk.is_sanitized(fe.pid)

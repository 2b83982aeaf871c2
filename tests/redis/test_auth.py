"""The Redis store on a Redis that wants credentials (docs/SCALE-OUT.md, "Credentials"):

  * requirepass: the password in the URL (redis://:PASSWORD@...), in --store-password-file,
    or in STALKD_STORE_PASSWORD; never in stalkd's log;
  * an ACL user with exactly the ACL the documentation gives (commands, keys of the
    --store-prefix, its channel): a workload that touches every kind of call runs, and Redis
    logs no denial (ACL LOG);
  * a wrong password, or none, stops a front end at start with a clear error naming
    WRONGPASS / NOAUTH (exit 1); credentials refused after the start (a password changed on
    the server) are logged and tried again, /readyz saying why, and the front end serves again
    once they are accepted;
  * Sentinel with its own requirepass (--store-sentinel-password-file) before a master with
    a password; a failover (the new master gets AUTH too); a wrong sentinel password stops
    the start.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/redis/test_auth.py
"""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storecase import StoreCase, redis_fixture  # noqa: E402
from test_stall import REPLY_TIMEOUT, StallCase, readyz  # noqa: E402
import beanstalk  # noqa: E402
from beanstalk import wait_until  # noqa: E402

PASSWORD = "s3cret-pw"


def stalkd_acl(user, password, prefix, db=0):
    """The ACL of docs/SCALE-OUT.md ("An ACL user for stalkd"), as an ACL SETUSER rule list."""
    base = prefix + ("@%d" % db if db else "")
    return [user, "reset", "on", ">" + password, "~%s:*" % base, "&%s:w" % base, "-@all",
            "+role", "+select", "+subscribe", "+config|get", "+function|load", "+fcall",
            "+fcall_ro", "+wait", "+cluster|slots",
            # what stalkd's functions call
            "+get", "+set", "+getrange", "+setrange", "+exists", "+del", "+hget", "+hset",
            "+hdel", "+hincrby", "+hmget", "+hgetall", "+sadd", "+srem", "+smembers", "+zadd",
            "+zrem", "+zrange", "+zcard", "+zscore", "+zcount", "+time", "+publish"]


class AuthCase(StoreCase):
    def start_fails(self, args, *words, env=None):
        """stalkd with `args` exits 1 at start; its output names every one of `words`."""
        p = subprocess.run([beanstalk.STALKD_BIN, "-l", "127.0.0.1", "-p",
                            str(beanstalk.free_port())] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, env=env)
        out = p.stdout.decode(errors="replace")
        self.assertEqual(p.returncode, 1, out)
        for w in words:
            self.assertIn(w, out)
        return out

    def url(self, r, auth="", db=None):
        return "redis://%s127.0.0.1:%d%s" % (auth, r.port, "" if db is None else "/%d" % db)

    def password_file(self, text):
        path = os.path.join(self.logdir, "password-%d" % len(os.listdir(self.logdir)))
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        return path

    def stop(self, fe):
        fe.ended_by_test = True
        fe.stop()

    def log_of(self, fe):
        with open(fe.log, errors="replace") as f:
            return f.read()

    def cycle(self, fe, tube="auth"):
        """put, reserve, delete on `fe`."""
        c = self.client(fe, timeout=REPLY_TIMEOUT)
        self.assertEqual(c.cmd("use %s" % tube), ("USING %s\r\n" % tube).encode())
        jid = beanstalk.inserted_id(c.put("hello"))
        self.assertEqual(c.cmd("watch %s" % tube), b"WATCHING 2\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 5"), beanstalk.reserved(jid, b"hello"))
        self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")


class TestPassword(AuthCase):
    def test_password_in_url_file_and_environment(self):
        r = self.redis(password=PASSWORD)
        prefix = redis_fixture.unique_prefix()
        fe = self.front_end(self.url(r, ":%s@" % PASSWORD), prefix)
        self.cycle(fe)
        # From a file (the command line shows no password), for the default user by name too.
        path = self.password_file(PASSWORD + "\n")
        fe2 = self.front_end(self.url(r, "default@"), prefix, "--store-password-file", path)
        self.cycle(fe2, "from-file")
        # From the environment.
        self.n_front_ends += 1
        log = os.path.join(self.logdir, "stalkd-env.log")
        env = dict(os.environ, STALKD_STORE_PASSWORD=PASSWORD)
        fe3 = beanstalk.Server(args=redis_fixture.store_argv(self.url(r), prefix, 0), env=env,
                               log=log)
        fe3.ended_by_test = False
        self.addCleanup(self._stop_front_end, fe3)
        self.cycle(fe3, "from-env")
        self.assertNotIn(PASSWORD, " ".join(fe2.argv + fe3.argv))
        for f in (fe, fe2, fe3):
            self.stop(f)
            self.assertNotIn(PASSWORD, self.log_of(f))
        self.assertIn(":***@", self.log_of(fe))  # where the jobs are, password redacted

    def test_wrong_or_missing_password_stops_the_start(self):
        r = self.redis(password=PASSWORD)
        prefix = redis_fixture.unique_prefix()
        out = self.start_fails(redis_fixture.store_argv(self.url(r, ":wrong-pw@"), prefix, 0),
                               "AUTH refused", "WRONGPASS")
        self.assertNotIn("wrong-pw", out)
        self.start_fails(redis_fixture.store_argv(self.url(r), prefix, 0),
                         "AUTH refused", "NOAUTH", "no password given")
        self.start_fails(redis_fixture.store_argv(self.url(r, "nobody:%s@" % PASSWORD),
                                                  prefix, 0), "AUTH refused", "user nobody")
        # A password where Redis wants none is a mistake too.
        plain = self.redis()
        self.start_fails(redis_fixture.store_argv(self.url(plain, ":x@"), prefix, 0),
                         "AUTH refused")

    def test_password_options_checked(self):
        r = self.redis(password=PASSWORD)
        argv = redis_fixture.store_argv(self.url(r, ":%s@" % PASSWORD), "x", 0)
        cases = [
            (argv + ["--store-password-file", self.password_file(PASSWORD)], "give one"),
            (redis_fixture.store_argv(self.url(r), "x", 0)
             + ["--store-password-file", "/nonexistent/pw"], "/nonexistent/pw"),
            (redis_fixture.store_argv(self.url(r), "x", 0)
             + ["--store-password-file", self.password_file("a\nb\n")], "one line"),
            (redis_fixture.store_argv(self.url(r, "app@"), "x", 0), "no password"),
            (argv + ["--store-sentinel-user", "s"], "redis-sentinel://"),
            (["--store-password-file", self.password_file(PASSWORD)], "want --store"),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("STALKD_STORE_")}
        usage = subprocess.run([beanstalk.STALKD_BIN, "--no-such-flag"], timeout=30,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        self.assertNotEqual(usage, 0)
        for args, says in cases:
            p = subprocess.run([beanstalk.STALKD_BIN, "-p", "0"] + args, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
            out = p.stdout.decode(errors="replace")
            self.assertEqual(p.returncode, usage, out)  # a usage error, as a bad flag
            self.assertIn(says, out)
            self.assertNotIn(PASSWORD, out)


class TestPasswordChangedWhileRunning(StallCase, AuthCase):
    def test_refused_later_is_retried_and_readyz_says_why(self):
        r = self.redis(password=PASSWORD)
        fe = self.stalling_front_end(self.url(r, ":%s@" % PASSWORD))
        self.assertReady()
        self.cycle(fe)
        r.call("CONFIG", "SET", "requirepass", "rotated")
        r.auth = "rotated"
        r.call("CLIENT", "KILL", "TYPE", "normal")
        r.call("CLIENT", "KILL", "TYPE", "pubsub")
        self.assertTrue(wait_until(lambda: "AUTH refused" in readyz(self.admin)[1],
                                   REPLY_TIMEOUT), readyz(self.admin))
        self.assertIsNone(fe.proc.poll(), "the front end exited")
        r.call("CONFIG", "SET", "requirepass", PASSWORD)
        r.auth = PASSWORD
        self.assertReady()
        self.cycle(fe, "after")
        self.stop(fe)
        log = self.log_of(fe)
        self.assertIn("WRONGPASS", log)
        self.assertNotIn(PASSWORD, log)
        self.assertNotIn("rotated", log)


class TestAclUser(AuthCase):
    def test_works_with_exactly_the_documented_acl(self):
        prefix = redis_fixture.unique_prefix()
        for db in (0, 3):
            with self.subTest(db=db):
                r = self.redis(password="admin-pw")
                r.call("ACL", "SETUSER", *stalkd_acl("stalkd", PASSWORD, prefix, db))
                r.call("ACL", "LOG", "RESET")
                url = self.url(r, "stalkd:%s@" % PASSWORD, db)
                fe1 = self.front_end(url, prefix, wait=0)
                fe2 = self.front_end(url, prefix, wait=0)
                self.workload(fe1, fe2)
                # Another prefix is out of the ACL's keys: refused.
                self.start_fails(redis_fixture.store_argv(url, "other", 0), "NOPERM")
                denied = [e for e in r.call("ACL", "LOG")
                          if b"other" not in b"".join(x for x in e if isinstance(x, bytes))]
                self.assertEqual(denied, [], "ACL LOG: %r" % (denied,))
                self.stop(fe1)
                self.stop(fe2)

    def workload(self, fe1, fe2):
        """Every kind of call: put (delayed, with ttr), reserve (waiting, woken through
        pub/sub from the other front end), release, bury, kick, touch, peeks, stats, pause,
        list-tubes, a TTR that expires, a front end gone (its reservations given back)."""
        a = self.client(fe1, timeout=REPLY_TIMEOUT)
        b = self.client(fe2, timeout=REPLY_TIMEOUT)
        self.assertEqual(a.cmd("watch w"), b"WATCHING 2\r\n")
        a.send(b"reserve-with-timeout 60\r\n")
        self.assertEqual(b.cmd("use w"), b"USING w\r\n")
        a2 = self.client(fe1, timeout=REPLY_TIMEOUT)  # a front end counts its own waiters
        self.assertTrue(wait_until(
            lambda: beanstalk.stats_of(a2, "stats-tube w").get("current-waiting") == "1",
            timeout=REPLY_TIMEOUT))
        jid = beanstalk.inserted_id(b.put("woken"))
        self.assertEqual(a.read_reply(), beanstalk.reserved(jid, b"woken"))
        self.assertEqual(a.cmd("touch %d" % jid), b"TOUCHED\r\n")
        self.assertEqual(a.cmd("release %d 1 0" % jid), b"RELEASED\r\n")
        self.assertEqual(a.cmd("reserve-with-timeout 5"), beanstalk.reserved(jid, b"woken"))
        self.assertEqual(a.cmd("bury %d 2" % jid), b"BURIED\r\n")
        self.assertEqual(b.cmd("peek-buried"), beanstalk.found(jid, b"woken"))
        self.assertEqual(b.cmd("kick 1"), b"KICKED 1\r\n")
        self.assertEqual(b.cmd("peek-ready"), beanstalk.found(jid, b"woken"))
        self.assertEqual(b.cmd("kick-job %d" % jid), b"NOT_FOUND\r\n")
        d = beanstalk.inserted_id(b.put("later", delay=1))
        self.assertEqual(b.cmd("peek-delayed"), beanstalk.found(d, b"later"))
        t = beanstalk.inserted_id(b.put("short", ttr=1))
        self.assertEqual(b.cmd("pause-tube w 1"), b"PAUSED\r\n")
        self.assertIn(b"w", b.cmd("list-tubes"))
        stats = beanstalk.stats_of(b, "stats-tube w")
        self.assertEqual(stats["total-jobs"], "3")
        self.assertIn(b"OK", b.cmd("stats"))
        self.assertIn(b"OK", b.cmd("stats-job %d" % jid))
        got = set()
        for _ in range(3):
            rep = a.cmd("reserve-with-timeout 10")
            self.assertTrue(rep.startswith(b"RESERVED "), rep)
            got.add(int(rep.split()[1]))
        self.assertEqual(got, {jid, d, t})
        # TTR expiry of one, and a front end gone with the other reservations.
        self.assertEqual(a.cmd("delete %d" % jid), b"DELETED\r\n")
        self.assertEqual(b.cmd("watch w"), b"WATCHING 2\r\n")
        self.kill(fe1)
        left = set()
        for _ in range(2):
            rep = b.cmd("reserve-with-timeout 30")
            self.assertTrue(rep.startswith(b"RESERVED "), rep)
            left.add(int(rep.split()[1]))
            self.assertEqual(b.cmd("delete %s" % rep.split()[1].decode()), b"DELETED\r\n")
        self.assertEqual(left, {d, t})


class TestSentinel(AuthCase):
    def test_sentinels_and_master_with_passwords_and_a_failover(self):
        rs = self.replicated(password=PASSWORD)
        ss = self.sentinels(rs.master, password="sentinel-pw", master_password=PASSWORD)
        url = ss.url().replace("redis-sentinel://", "redis-sentinel://:%s@" % PASSWORD)
        spw = self.password_file("sentinel-pw\n")
        fe = self.front_end(url, redis_fixture.unique_prefix(),
                            "--store-sentinel-password-file", spw, wait=1)
        c = self.client(fe, timeout=30)
        jid = beanstalk.inserted_id(c.put("before"))
        old = rs.master.addr
        rs.master.kill()
        ss.wait_failover(old)
        self.assertTrue(wait_until(lambda: c.cmd("peek %d" % jid).startswith(b"FOUND"),
                                   timeout=60, interval=0.2))
        self.assertTrue(c.put("after").startswith(b"INSERTED "))
        self.stop(fe)
        log = self.log_of(fe)
        self.assertNotIn(PASSWORD, log)
        self.assertNotIn("sentinel-pw", log)

        # An ACL user on the sentinels with exactly the documented rules.
        for s in ss.sentinels:
            s.call("ACL", "SETUSER", "watcher", "reset", "on", ">watcher-pw", "-@all",
                   "+sentinel|get-master-addr-by-name", "+subscribe", "&+switch-master")
            s.call("ACL", "LOG", "RESET")
        fe = self.front_end(url, redis_fixture.unique_prefix(), "--store-sentinel-user",
                            "watcher", "--store-sentinel-password-file",
                            self.password_file("watcher-pw"), wait=1)
        self.cycle(fe, "acl")
        for s in ss.sentinels:
            self.assertEqual(s.call("ACL", "LOG"), [], "sentinel :%d" % s.port)
        self.stop(fe)

        # A wrong sentinel password, or none: a clear error at start.
        args = redis_fixture.store_argv(url, redis_fixture.unique_prefix(), 1)
        self.start_fails(args + ["--store-sentinel-password-file", self.password_file("bad")],
                         "AUTH refused", "WRONGPASS")
        self.start_fails(args, "AUTH refused", "NOAUTH")


if __name__ == "__main__":
    unittest.main()

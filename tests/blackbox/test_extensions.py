"""Black-box tests of the job lifecycle extensions (docs/EXTENSIONS.md): put-ext, put-many,
reserve-ext, delete-many, purge, list-jobs, tube-tries; tries and dead letters, TTL, TTR at
reserve time, detached reservations, unique keys, attributes; the stats keys they add; and
that a client speaking only beanstalkd's protocol sees nothing of them.

Raw bytes in, exact bytes out. Where the spec leaves a detail open (the reply of a release
that buries a job out of tries, whether an EXISTS uses up an id, quoting of string values in
stats-job, the reply to a bare command name) the test accepts each reading and says so.

Run: python3 -m unittest -v tests/blackbox/test_extensions.py
The binary under test is $STALKD_BIN (default build/release/stalkd).
"""
import os
import re
import signal
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import (is_beanstalkd, nth_id, parse_yaml, stats_of, wait_until,  # noqa: E402
                       wait_value, yaml_keys)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_stats import (EXTENSION_STATS_KEYS, EXTENSION_TUBE_KEYS, STALKD_STATS_KEYS,  # noqa: E402
                        STATS_JOB_KEYS, STATS_TUBE_KEYS)
from test_stats import STATS_KEYS as BEANSTALKD_STATS_KEYS  # noqa: E402

BAD = b"BAD_FORMAT\r\n"
UNKNOWN = b"UNKNOWN_COMMAND\r\n"
USING_DEFAULT = b"USING default\r\n"
NOT_FOUND = b"NOT_FOUND\r\n"
TIMED_OUT = b"TIMED_OUT\r\n"
SLACK = 1.5  # how late a timed event may be

PRINTABLE = bytes(range(0x21, 0x7f))           # 94 bytes: what a key or a value may hold
NAME_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


# ---- helpers -------------------------------------------------------------------------------

def b_(s):
    return s.encode() if isinstance(s, str) else s


def unq(v):
    """A stats-job string value without YAML double quotes: the spec does not say whether
    `key` and `attr.*` values are quoted (as 1.13 quotes `tube`), so either is accepted."""
    return v[1:-1] if len(v) >= 2 and v[0] == '"' and v[-1] == '"' else v


def wait_stat(client, key, value, timeout=5.0):
    """beanstalk.wait_stat on `stats-ext`: with stalkd's own keys."""
    return wait_value(lambda: stats_of(client, "stats-ext"), key, value, timeout)


def wait_job_stat(client, jid, key, value, timeout=5.0):
    """beanstalk.wait_job_stat on `stats-job-ext`: with the job's extension fields."""
    return wait_value(lambda: stats_of(client, "stats-job-ext %d" % jid), key, value, timeout)


def put_ext_bytes(body, opts=b"", pri=0, delay=0, ttr=60):
    body, opts = b_(body), b_(opts)
    return (b"put-ext %d %d %d %d" % (pri, delay, ttr, len(body)) + (b" " + opts if opts else b"")
            + b"\r\n" + body + b"\r\n")


def put_ext(c, body, opts=b"", pri=0, delay=0, ttr=60):
    """Sends a put-ext with its body; returns the reply line."""
    return c.cmd(put_ext_bytes(body, opts, pri, delay, ttr))


def inserted_id(reply):
    m = re.fullmatch(rb"INSERTED (\d+)\r\n", reply)
    if not m:
        raise AssertionError("expected INSERTED <id>, got %r" % reply)
    return int(m.group(1))


def entry(body, opts=b"", pri=0, delay=0, ttr=60):
    """One entry of a put-many block."""
    body, opts = b_(body), b_(opts)
    return (b"%d %d %d %d" % (pri, delay, ttr, len(body)) + (b" " + opts if opts else b"")
            + b"\r\n" + body + b"\r\n")


def put_many_bytes(entries, count=None):
    block = b"".join(entries)
    return b"put-many %d %d\r\n%s\r\n" % (len(entries) if count is None else count, len(block), block)


def read_many(c, head_word):
    """Reads a `<head_word> <n>` reply and its n lines; returns all of it as bytes (any other
    reply: that line alone)."""
    head = c.read_line()
    if not head.startswith(head_word + b" "):
        return head
    out = head
    for _ in range(int(head.split()[1])):
        out += c.read_line()
    return out


def put_many(c, entries, count=None):
    """Sends a put-many; returns the whole reply (INSERTED-MANY and its lines) as bytes."""
    c.send(put_many_bytes(entries, count))
    return read_many(c, b"INSERTED-MANY")


def reserve_ext(c, args=b"0"):
    """Sends `reserve-ext <args>`; returns (raw reply bytes, [(id, body), ...])."""
    c.send(b"reserve-ext " + b_(args) + b"\r\n")
    return read_reserved_many(c)


def read_reserved_many(c):
    head = c.read_line()
    if not head.startswith(b"RESERVED-MANY "):
        return head, []
    raw, jobs = head, []
    for _ in range(int(head.split()[1])):
        r = c.read_reply()
        m = re.match(rb"RESERVED (\d+) (\d+)\r\n", r)
        if not m:
            raise AssertionError("expected RESERVED in RESERVED-MANY, got %r" % r)
        raw += r
        jobs.append((int(m.group(1)), r[m.end():-2]))
    return raw, jobs


def reserved_many_bytes(jobs):
    """The exact RESERVED-MANY reply for [(id, body), ...]."""
    return (b"RESERVED-MANY %d\r\n" % len(jobs)
            + b"".join(b"RESERVED %d %d\r\n%s\r\n" % (i, len(bd), bd) for i, bd in jobs))


def list_reply(nxt, ids):
    """The exact list-jobs reply."""
    if ids:
        body = b"---\nnext: %d\nids:\n" % nxt + b"".join(b"- %d\n" % i for i in ids)
    else:
        body = b"---\nnext: %d\nids: []\n" % nxt
    return b"OK %d\r\n%s\r\n" % (len(body), body)


def parse_list(reply):
    """(next, ids) of a list-jobs reply; fails unless it is exactly in the spec's form."""
    m = re.match(rb"OK \d+\r\n---\nnext: (\d+)\nids:", reply)
    if not m:
        raise AssertionError("not a list-jobs reply: %r" % reply[:200])
    nxt = int(m.group(1))
    ids = [int(x) for x in re.findall(rb"\n- (\d+)", reply)]
    if reply != list_reply(nxt, ids):
        raise AssertionError("malformed list-jobs reply: %r" % reply[:300])
    return nxt, ids


def put_n(c, n, body=b"", delay=0, ttr=60, batch=1000):
    """n plain puts, pipelined in batches; returns their ids."""
    ids = []
    one = b"put 0 %d %d %d\r\n%s\r\n" % (delay, ttr, len(body), body)
    for start in range(0, n, batch):
        k = min(batch, n - start)
        c.send(one * k)
        for _ in range(k):
            ids.append(inserted_id(c.read_line()))
    return ids


def pipelined(c, lines):
    """Sends the command lines in one go; returns their replies."""
    c.send(b"".join(b_(l) + b"\r\n" for l in lines))
    return [c.read_reply() for _ in lines]


def delete_many_line(total_len, first_ids=(1,)):
    """A delete-many line of exactly total_len bytes (CRLF included) starting with first_ids,
    padded with valid ids that name no job (20 digits; two of 10 when the rest is 22 bytes)."""
    line = b"delete-many" + b"".join(b" %d" % i for i in first_ids)
    rest = total_len - len(line) - 2
    k, rem = divmod(rest, 21)
    if rem == 1:
        k, rem = k - 1, 22
    pads = [b" %d" % (10000000000000000000 + i) for i in range(k)]
    if rem == 22:
        pads += [b" 9000000000", b" 8000000000"]
    elif rem:
        pads.append(b" " + b"7" * (rem - 1))
    out = line + b"".join(pads) + b"\r\n"
    assert len(out) == total_len, (len(out), total_len)
    return out


class ExtCase(beanstalk.ServerCase):
    """beanstalk.ServerCase for stalkd's extensions (skipped on Debian's beanstalkd). Its
    stats helpers ask stats-ext, stats-tube-ext and stats-job-ext: beanstalkd's keys, then
    the extensions' (plain stats, stats-tube and stats-job show beanstalkd's only)."""

    def setUp(self):
        if is_beanstalkd():
            self.skipTest("stalkd's extensions")
        super().setUp()

    def client(self, timeout=5.0):
        return super().client(timeout)

    def stats(self, c):
        return stats_of(c, "stats-ext")

    def job_stats(self, c, jid):
        return stats_of(c, "stats-job-ext %d" % jid)

    def js(self, c, jid):
        return self.job_stats(c, jid)

    def ext_keys(self, c, jid):
        """The keys stats-job-ext shows after beanstalkd's (stats-job shows none of them)."""
        self.assertEqual(yaml_keys(c.cmd("stats-job %d" % jid)), STATS_JOB_KEYS)
        keys = yaml_keys(c.cmd("stats-job-ext %d" % jid))
        self.assertEqual(keys[:len(STATS_JOB_KEYS)], STATS_JOB_KEYS)
        return keys[len(STATS_JOB_KEYS):]

    def tube_stats(self, c, tube):
        return stats_of(c, "stats-tube-ext " + tube)

    def assertBad(self, c, lines, expect=BAD):
        """Each line alone is answered `expect` at once (no body or block is read) and the
        connection stays in sync. Each line is a subtest: all the failing ones are reported.
        Returns the connection to go on with (a new one after a line that got no reply)."""
        for line in lines:
            with self.subTest(line=line):
                old = c.sock.gettimeout()
                c.sock.settimeout(1.0)
                try:
                    r = c.cmd(b_(line))
                except (socket.timeout, TimeoutError):
                    c.close()
                    c = self.client(timeout=old)
                    self.fail("no reply within 1 s (the server waits for a body?): %r" % line)
                finally:
                    c.sock.settimeout(old)
                self.assertEqual(r, expect, line)
                self.assertEqual(c.cmd("list-tube-used")[:6], b"USING ", line)
        return c

    def assertGone(self, c, jid):
        self.assertEqual(c.cmd("peek %d" % jid), NOT_FOUND, "job %d still exists" % jid)

    def assertTriesLeft(self, c, jid, n):
        self.assertEqual(self.js(c, jid).get("tries-left"), str(n), "job %d" % jid)


# ---- put-ext -------------------------------------------------------------------------------

class TestPutExt(ExtCase):
    def test_inserted_with_every_option(self):
        c = self.client()
        self.assertEqual(c.cmd(b"put-ext 5 0 60 3 tries=3 ttl=100 key=k1 attr.a=1 attr.B_-9=x\r\n"
                               b"abc\r\n"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("peek %d" % nth_id(1)), b"FOUND %d 3\r\nabc\r\n" % nth_id(1))
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], st["pri"], st["ttr"], st["delay"]), ("ready", "5", "60", "0"))
        self.assertEqual(self.ext_keys(c, nth_id(1))[:3], ["tries-left", "ttl-left", "key"])
        self.assertEqual(sorted(self.ext_keys(c, nth_id(1))[3:]), ["attr.B_-9", "attr.a"])
        self.assertEqual(st["tries-left"], "3")
        self.assertIn(st["ttl-left"], ("99", "100"))
        self.assertEqual(unq(st["key"]), "k1")
        self.assertEqual(unq(st["attr.a"]), "1")
        self.assertEqual(unq(st["attr.B_-9"]), "x")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 3\r\nabc\r\n" % nth_id(1))

    def test_options_in_any_order(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "attr.z=1 key=kk ttl=50 tries=2"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(self.ext_keys(c, nth_id(1)), ["tries-left", "ttl-left", "key", "attr.z"])
        self.assertEqual(put_ext(c, "y", "ttl=50 attr.q=2 tries=4"), b"INSERTED %d\r\n" % nth_id(2))
        st = self.js(c, nth_id(2))
        self.assertEqual((st["tries-left"], unq(st["attr.q"])), ("4", "2"))
        self.assertNotIn("key", st)

    def test_without_options_is_a_plain_job(self):
        c = self.client()
        self.assertEqual(c.cmd(b"put-ext 1 0 10 2\r\nhi\r\n"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(self.ext_keys(c, nth_id(1)), [])
        self.assertEqual(put_ext(c, "d", "ttl=0", delay=100), b"INSERTED %d\r\n" % nth_id(2))
        st = self.js(c, nth_id(2))
        self.assertEqual((st["state"], st["delay"]), ("delayed", "100"))
        self.assertEqual(self.ext_keys(c, nth_id(2)), [])  # ttl=0: no TTL
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 2\r\nhi\r\n" % nth_id(1))

    def test_goes_to_the_used_tube(self):
        c = self.client()
        c.cmd("use other")
        self.assertEqual(put_ext(c, "x", "tries=1"), b"INSERTED %d\r\n" % nth_id(1, "other"))
        self.assertEqual(unq(self.js(c, nth_id(1, "other"))["tube"]), "other")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), TIMED_OUT)

    def test_body_verbatim(self):
        c = self.client()
        body = b"a\r\nb\x00\xff put-ext 0 0 1 1 key=x\r\n"
        self.assertEqual(put_ext(c, body, "key=b"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("peek %d" % nth_id(1)), b"FOUND %d %d\r\n%s\r\n" % (nth_id(1), len(body), body))
        self.assertEqual(put_ext(c, b"", "key=e"), b"INSERTED %d\r\n" % nth_id(2))
        self.assertEqual(c.cmd("peek %d" % nth_id(2)), b"FOUND %d 0\r\n\r\n" % nth_id(2))

    def test_limits_accepted(self):
        c = self.client()
        key = (PRINTABLE * 3)[:200]
        self.assertEqual(put_ext(c, "a", b"tries=1 ttl=4294967295 key=" + key), b"INSERTED %d\r\n" % nth_id(1))
        st = self.js(c, nth_id(1))
        self.assertEqual(st["tries-left"], "1")
        self.assertGreater(int(st["ttl-left"]), 4294967000)
        self.assertEqual(put_ext(c, "b", "tries=4294967295"), b"INSERTED %d\r\n" % nth_id(2))
        self.assertEqual(self.js(c, nth_id(2))["tries-left"], "4294967295")
        # 16 attributes, names of 64 bytes of every allowed character, values of 255
        # printable bytes (none with a quote, so the shown value is unambiguous): a line of
        # about 5.5 KB, far over beanstalkd's 224 and under 8192.
        names = [(NAME_CHARS[i:] + NAME_CHARS[:i])[:64] for i in range(16)]
        vals = [(PRINTABLE.replace(b'"', b"").replace(b"\\", b"") * 3)[i:i + 255] for i in range(16)]
        opts = b" ".join(b"attr." + n + b"=" + v for n, v in zip(names, vals))
        line = put_ext_bytes("c", opts + b" key=" + b"k" * 200 + b" tries=7 ttl=1000")
        self.assertGreater(len(line.split(b"\r\n")[0]), 5000)
        self.assertLess(len(line.split(b"\r\n")[0]), 8190)
        self.assertEqual(c.cmd(line), b"INSERTED %d\r\n" % nth_id(3))
        st = self.js(c, nth_id(3))
        keys = self.ext_keys(c, nth_id(3))
        self.assertEqual(keys[:3], ["tries-left", "ttl-left", "key"])
        self.assertEqual(sorted(keys[3:]), sorted("attr." + n.decode() for n in names))
        for n, v in zip(names, vals):
            self.assertEqual(unq(st["attr." + n.decode()]), v.decode())
        self.assertEqual(unq(st["key"]), "k" * 200)

    def test_value_may_hold_equals_and_be_empty(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "key=a=b attr.eq=b=c attr.e="), b"INSERTED %d\r\n" % nth_id(1))
        st = self.js(c, nth_id(1))
        self.assertEqual(unq(st["key"]), "a=b")
        self.assertEqual(unq(st["attr.eq"]), "b=c")
        self.assertEqual(unq(st["attr.e"]), "")
        self.assertEqual(put_ext(c, "y", "key=a=b"), b"EXISTS %d\r\n" % nth_id(1))

    def test_malformed_line_is_bad_format_without_reading_a_body(self):
        c = self.client(timeout=3)
        attrs17 = " ".join("attr.n%d=v" % i for i in range(17))
        lines = [
            "put-ext ", "put-ext 0", "put-ext 0 0 10", "put-ext a 0 10 1", "put-ext 0 b 10 1",
            "put-ext 0 0 c 1", "put-ext 0 0 10 d", "put-ext -1 0 10 1", "put-ext 0 0 10 -1",
            "put-ext +1 0 10 1", "put-ext 4294967296 0 10 1", "put-ext 0 4294967296 10 1",
            "put-ext 0 0 4294967296 1", "put-ext 0 0 10 99999999999999999999",
            # tries
            "put-ext 0 0 10 1 tries=0", "put-ext 0 0 10 1 tries=4294967296", "put-ext 0 0 10 1 tries=",
            "put-ext 0 0 10 1 tries=-1", "put-ext 0 0 10 1 tries=+1", "put-ext 0 0 10 1 tries=1x",
            "put-ext 0 0 10 1 tries", "put-ext 0 0 10 1 tries=99999999999999999999",
            "put-ext 0 0 10 1 tries=1 tries=1", "put-ext 0 0 10 1 tries=1 ttl=5 tries=2",
            # ttl
            "put-ext 0 0 10 1 ttl=4294967296", "put-ext 0 0 10 1 ttl=", "put-ext 0 0 10 1 ttl=x",
            "put-ext 0 0 10 1 ttl=-1", "put-ext 0 0 10 1 ttl", "put-ext 0 0 10 1 ttl=1 ttl=1",
            # key
            "put-ext 0 0 10 1 key=", "put-ext 0 0 10 1 key", "put-ext 0 0 10 1 key=" + "k" * 201,
            "put-ext 0 0 10 1 key=a key=a", "put-ext 0 0 10 1 key=a key=b",
            b"put-ext 0 0 10 1 key=a\x7fb", b"put-ext 0 0 10 1 key=a\x80b",
            b"put-ext 0 0 10 1 key=\xc3\xa9", b"put-ext 0 0 10 1 key=a\tb",
            b"put-ext 0 0 10 1 key=a\x00b",
            # attributes
            "put-ext 0 0 10 1 attr.=v", "put-ext 0 0 10 1 attr.a", "put-ext 0 0 10 1 attr.",
            "put-ext 0 0 10 1 attr", "put-ext 0 0 10 1 attr=v", "put-ext 0 0 10 1 attr.a.b=v",
            "put-ext 0 0 10 1 attr.a!=v", "put-ext 0 0 10 1 attr.a+b=v", "put-ext 0 0 10 1 attr.a/b=v",
            "put-ext 0 0 10 1 attr." + "n" * 65 + "=v", "put-ext 0 0 10 1 attr.a=" + "v" * 256,
            b"put-ext 0 0 10 1 attr.a=\x80", b"put-ext 0 0 10 1 attr.\xc3\xa9=v",
            "put-ext 0 0 10 1 attr.a=1 attr.a=2", "put-ext 0 0 10 1 attr.a=1 attr.a=1",
            "put-ext 0 0 10 1 " + attrs17,
            # unknown options
            "put-ext 0 0 10 1 foo=1", "put-ext 0 0 10 1 foo", "put-ext 0 0 10 1 TRIES=1",
            "put-ext 0 0 10 1 Key=a", "put-ext 0 0 10 1 ATTR.a=1", "put-ext 0 0 10 1 tries=1 =",
            "put-ext 0 0 10 1 freeze-tries", "put-ext 0 0 10 1 detached", "put-ext 0 0 10 1 count=1",
            "put-ext 0 0 10 1 tries=2 x",
        ]
        c = self.assertBad(c, lines)
        st = self.stats(c)
        self.assertEqual((st["total-jobs"], st["current-jobs-ready"]), ("0", "0"))
        # 16 attributes and a 200-byte key are fine; no key was taken by the refusals
        for opts in (" ".join("attr.n%d=v" % i for i in range(16)), "key=a", "key=" + "k" * 200):
            r = put_ext(c, "x", opts)
            self.assertTrue(r.startswith(b"INSERTED "), (opts, r))

    def test_bare_command_name(self):
        # `put` alone is UNKNOWN_COMMAND in beanstalkd; the spec does not say which of the two
        # a bare extension name gets, only that the connection goes on.
        c = self.client(timeout=3)
        for name in ("put-ext", "put-many", "delete-many", "purge", "list-jobs", "tube-tries"):
            self.assertIn(c.cmd(name), (BAD, UNKNOWN), name)
            self.assertInSync(c)
        self.assertEqual(c.cmd("reserve-ext"), BAD)
        self.assertInSync(c)

    def test_unknown_neighbours_of_the_new_names(self):
        c = self.client(timeout=3)
        for line in ("put-extx 0 0 10 1", "PUT-EXT 0 0 10 1", "put-ex 0 0 10 1", "put_ext 0 0 10 1",
                     "put-many2 1 1", "purge-all default", "list-job default ready 0 1",
                     "delete-manyx 1", "tube-try default 1", "PURGE default all"):
            self.assertEqual(c.cmd(line), UNKNOWN, line)
        self.assertInSync(c)
        self.assertEqual(self.stats(c)["total-jobs"], "0")

    def test_line_over_8192_is_bad_format_once(self):
        c = self.client(timeout=3)
        long_line = b"put-ext 0 0 10 1 " + b" ".join(b"attr.n%d=%s" % (i, b"v" * 250) for i in range(40))
        self.assertGreater(len(long_line), 8192)
        self.assertEqual(self.replies(c, long_line + b"\r\nlist-tube-used\r\n", 2), [BAD, USING_DEFAULT])
        # in pieces, too
        c.send(long_line[:4000])
        time.sleep(0.02)
        c.send(long_line[4000:9000])
        time.sleep(0.02)
        c.send(long_line[9000:] + b"\r\nlist-tube-used\r\n")
        self.assertEqual([c.read_reply(), c.read_reply()], [BAD, USING_DEFAULT])
        self.assertEqual(self.stats(c)["total-jobs"], "0")

    def test_beanstalkd_commands_keep_224(self):
        c = self.client(timeout=3)
        c.put("x")
        line = b"stats-job " + b"0" * 212 + b"1\r\n"
        self.assertEqual(len(line), 225)
        self.assertEqual(self.replies(c, line + b"list-tube-used\r\n", 2), [BAD, USING_DEFAULT])

    def test_expected_crlf(self):
        c = self.client(timeout=3)
        self.assertEqual(self.replies(c, b"put-ext 0 0 10 3 key=a tries=2\r\nabcXYlist-tube-used\r\n", 2),
                         [b"EXPECTED_CRLF\r\n", USING_DEFAULT])
        st = self.stats(c)
        self.assertEqual((st["current-jobs-ready"], st["total-jobs"]), ("0", "0"))
        r = put_ext(c, "abc", "key=a")  # the key was not taken
        self.assertTrue(r.startswith(b"INSERTED "), r)

    def test_draining(self):
        c = self.client(timeout=3)
        self.server.signal(signal.SIGUSR1)
        self.assertTrue(wait_stat(c, "draining", "true"))
        self.assertEqual(self.replies(c, put_ext_bytes("body", "key=a tries=1") + b"list-tube-used\r\n", 2),
                         [b"DRAINING\r\n", USING_DEFAULT])
        self.assertEqual(self.stats(c)["total-jobs"], "0")


class TestPutExtJobSize(ExtCase):
    server_args = ("-z", "10")

    def test_job_too_big_body_skipped(self):
        c = self.client(timeout=3)
        self.assertEqual(put_ext(c, b"0123456789", "key=a"), b"INSERTED %d\r\n" % nth_id(1))
        data = put_ext_bytes(b"use evil\r\n" * 3, "key=b tries=1") + b"list-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2), [b"JOB_TOO_BIG\r\n", USING_DEFAULT])
        self.assertEqual(self.stats(c)["total-jobs"], "1")
        self.assertEqual(put_ext(c, b"x", "key=b"), b"INSERTED %d\r\n" % nth_id(2))


# ---- tries and dead letters ----------------------------------------------------------------

class TestTries(ExtCase):
    def test_release_uses_up_the_tries_and_buries(self):
        c = self.client()
        c.cmd("use q")
        c.cmd("watch q")
        self.assertEqual(put_ext(c, "x", "tries=2"), b"INSERTED %d\r\n" % nth_id(1, "q"))
        self.assertTriesLeft(c, nth_id(1, "q"), 2)
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1, "q"))
        self.assertTriesLeft(c, nth_id(1, "q"), 1)
        self.assertEqual(c.cmd("release %d 0 0" % nth_id(1, "q")), b"RELEASED\r\n")
        st = self.js(c, nth_id(1, "q"))
        self.assertEqual((st["state"], st["tries-left"]), ("ready", "1"))
        self.assertNotIn("bury-reason", st)
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1, "q"))
        self.assertTriesLeft(c, nth_id(1, "q"), 0)
        # The spec says the job is buried but not what the release answers: RELEASED (as the
        # TTL case "still answers") or BURIED (as beanstalkd's release that buries).
        self.assertIn(c.cmd("release %d 0 0" % nth_id(1, "q")), (b"RELEASED\r\n", b"BURIED\r\n"))
        st = self.js(c, nth_id(1, "q"))
        self.assertEqual((st["state"], st["tries-left"], unq(st["bury-reason"])),
                         ("buried", "0", "release"))
        self.assertEqual(self.ext_keys(c, nth_id(1, "q")), ["tries-left", "bury-reason"])
        self.assertEqual(c.cmd("reserve-with-timeout 0"), TIMED_OUT)
        self.assertEqual(c.cmd("peek-buried"), b"FOUND %d 1\r\nx\r\n" % nth_id(1, "q"))
        st = self.stats(c)
        self.assertEqual((st["current-jobs-buried"], st["current-jobs-ready"],
                          st["total-tries-exhausted"]), ("1", "0", "1"))
        self.assertEqual(self.tube_stats(c, "q")["total-tries-exhausted"], "1")
        self.assertEqual(self.tube_stats(c, "default")["total-tries-exhausted"], "0")

    def test_release_with_delay_buries_instead(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "tries=1", pri=7), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("reserve-job %d" % nth_id(1)), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))  # reserve-job uses a try
        self.assertTriesLeft(c, nth_id(1), 0)
        self.assertIn(c.cmd("release %d 3 100" % nth_id(1)), (b"RELEASED\r\n", b"BURIED\r\n"))
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], unq(st["bury-reason"]), st["pri"]), ("buried", "release", "3"))
        self.assertEqual(self.stats(c)["current-jobs-delayed"], "0")

    def test_ttr_timeout_uses_up_the_tries_and_buries(self):
        a, b = self.client(), self.client()
        self.assertEqual(put_ext(a, "one", "tries=1", ttr=1), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(put_ext(a, "two", "tries=2", ttr=1), b"INSERTED %d\r\n" % nth_id(2))
        self.assertEqual(a.cmd("reserve-job %d" % nth_id(1)), b"RESERVED %d 3\r\none\r\n" % nth_id(1))
        self.assertEqual(a.cmd("reserve-job %d" % nth_id(2)), b"RESERVED %d 3\r\ntwo\r\n" % nth_id(2))
        t0 = time.monotonic()
        st = wait_job_stat(b, nth_id(1), "state", "buried", timeout=1 + 2 * SLACK)
        self.assertIsNotNone(st, "job 1 was not buried at its TTR")
        self.assertElapsed(t0, 0.5, 1 + 2 * SLACK)
        self.assertEqual((unq(st["bury-reason"]), st["tries-left"], st["timeouts"]), ("timeout", "0", "1"))
        st = wait_job_stat(b, nth_id(2), "state", "ready", timeout=2 * SLACK)
        self.assertIsNotNone(st, "job 2 (a try left) did not come back ready")
        self.assertEqual(st["tries-left"], "1")
        self.assertNotIn("bury-reason", st)
        self.assertEqual(a.cmd("touch %d" % nth_id(2)), NOT_FOUND)  # a lost its reservations
        self.assertEqual(self.stats(b)["total-tries-exhausted"], "1")
        self.assertEqual(self.tube_stats(b, "default")["total-tries-exhausted"], "1")

    def test_bury_command_reason(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "tries=3 key=k ttl=100 attr.a=b"), b"INSERTED %d\r\n" % nth_id(1))
        c.cmd("reserve")
        self.assertEqual(c.cmd("bury %d 9" % nth_id(1)), b"BURIED\r\n")
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], st["tries-left"], unq(st["bury-reason"])), ("buried", "2", "bury"))
        self.assertEqual(self.ext_keys(c, nth_id(1)), ["tries-left", "bury-reason", "ttl-left", "key", "attr.a"])
        self.assertEqual(self.stats(c)["total-tries-exhausted"], "0")
        # kicked: no longer buried, no reason; a job with tries left keeps them
        self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], st["tries-left"]), ("ready", "2"))
        self.assertEqual(self.ext_keys(c, nth_id(1)), ["tries-left", "ttl-left", "key", "attr.a"])

    def test_closing_the_connection_is_a_release(self):
        c, w = self.client(), self.client()
        self.assertEqual(put_ext(c, "last", "tries=1"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(put_ext(c, "more", "tries=3"), b"INSERTED %d\r\n" % nth_id(2))
        self.assertEqual(w.cmd("reserve-job %d" % nth_id(1)), b"RESERVED %d 4\r\nlast\r\n" % nth_id(1))
        self.assertEqual(w.cmd("reserve-job %d" % nth_id(2)), b"RESERVED %d 4\r\nmore\r\n" % nth_id(2))
        w.close()
        st = wait_job_stat(c, nth_id(1), "state", "buried")
        self.assertIsNotNone(st, "job 1, out of tries, was not buried when its worker left")
        self.assertEqual((st["tries-left"], unq(st["bury-reason"])), ("0", "release"))
        st = wait_job_stat(c, nth_id(2), "state", "ready")
        self.assertIsNotNone(st)
        self.assertEqual(st["tries-left"], "2")
        self.assertNotIn("bury-reason", st)
        self.assertEqual(self.stats(c)["total-tries-exhausted"], "1")
        self.assertEqual(self.tube_stats(c, "default")["total-tries-exhausted"], "1")

    def test_kick_respawns_with_one_more_try(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "tries=1"), b"INSERTED %d\r\n" % nth_id(1))
        c.cmd("reserve")
        c.cmd("release %d 0 0" % nth_id(1))
        self.assertEqual(self.js(c, nth_id(1))["state"], "buried")
        self.assertEqual(c.cmd("kick 5"), b"KICKED 1\r\n")
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], st["tries-left"], st["kicks"]), ("ready", "1", "1"))
        self.assertNotIn("bury-reason", st)
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertTriesLeft(c, nth_id(1), 0)
        c.cmd("release %d 0 0" % nth_id(1))
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], unq(st["bury-reason"])), ("buried", "release"))
        self.assertEqual(c.cmd("kick-job %d" % nth_id(1)), b"KICKED\r\n")
        self.assertTriesLeft(c, nth_id(1), 1)
        self.assertEqual(self.stats(c)["total-tries-exhausted"], "2")
        # the one try is used like any other
        c.cmd("reserve")
        self.assertTriesLeft(c, nth_id(1), 0)
        self.assertEqual(c.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")

    def test_kick_job_of_a_delayed_job_keeps_its_tries(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "tries=2", delay=100), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("kick-job %d" % nth_id(1)), b"KICKED\r\n")
        self.assertTriesLeft(c, nth_id(1), 2)

    def test_freeze_tries(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "tries=1"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(reserve_ext(c, "0 freeze-tries")[0],
                         b"RESERVED-MANY 1\r\nRESERVED %d 1\r\nx\r\n" % nth_id(1))
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], st["tries-left"], st["reserves"]), ("reserved", "1", "1"))
        self.assertEqual(c.cmd("release %d 0 0" % nth_id(1)), b"RELEASED\r\n")
        self.assertEqual(self.js(c, nth_id(1))["state"], "ready")
        self.assertEqual(reserve_ext(c, "0 count=5 freeze-tries detached")[1], [(nth_id(1), b"x")])
        self.assertTriesLeft(c, nth_id(1), 1)
        self.assertEqual(c.cmd("release %d 0 0" % nth_id(1)), b"RELEASED\r\n")
        self.assertEqual(reserve_ext(c, "0")[1], [(nth_id(1), b"x")])  # uses the try
        self.assertTriesLeft(c, nth_id(1), 0)

    def test_unlimited_job_is_never_buried_by_release(self):
        c = self.client()
        c.put("x")
        for _ in range(5):
            c.cmd("reserve")
            self.assertEqual(c.cmd("release %d 0 0" % nth_id(1)), b"RELEASED\r\n")
        st = self.js(c, nth_id(1))
        self.assertEqual((st["state"], st["releases"]), ("ready", "5"))
        self.assertEqual(self.ext_keys(c, nth_id(1)), [])


class TestTubeTries(ExtCase):
    def test_default_applies_to_put_put_ext_and_put_many(self):
        c = self.client()
        c.cmd("use jobs")
        c.put("before")  # 1: put before the default: unlimited
        self.assertEqual(c.cmd("tube-tries jobs 2"), b"TUBE-TRIES 2\r\n")
        self.assertEqual(self.tube_stats(c, "jobs")["default-tries"], "2")
        self.assertEqual(c.put("plain"), b"INSERTED %d\r\n" % nth_id(2, "jobs"))
        self.assertEqual(put_ext(c, "ext", "ttl=100"), b"INSERTED %d\r\n" % nth_id(3, "jobs"))
        self.assertEqual(put_ext(c, "own", "tries=5"), b"INSERTED %d\r\n" % nth_id(4, "jobs"))
        self.assertEqual(put_many(c, [entry("m1"), entry("m2", "tries=9")]),
                         b"INSERTED-MANY 2\r\nINSERTED %d\r\nINSERTED %d\r\n" % (nth_id(5, "jobs"), nth_id(6, "jobs")))
        self.assertEqual(self.ext_keys(c, nth_id(1, "jobs")), [])
        for seq, n in ((2, 2), (3, 2), (4, 5), (5, 2), (6, 9)):
            self.assertTriesLeft(c, nth_id(seq, "jobs"), n)
        self.assertEqual(self.ext_keys(c, nth_id(2, "jobs")), ["tries-left"])
        # other tubes are untouched
        c.cmd("use default")
        elsewhere = c.put_id("elsewhere")
        self.assertEqual(self.ext_keys(c, elsewhere), [])
        self.assertEqual(self.tube_stats(c, "default")["default-tries"], "0")
        # the default tries work as a job's own: reserve + release twice buries
        c.cmd("watch jobs")
        c.cmd("ignore default")
        for _ in range(2):
            self.assertEqual(c.cmd("reserve-job %d" % nth_id(2, "jobs")), b"RESERVED %d 5\r\nplain\r\n" % nth_id(2, "jobs"))
            c.cmd("release %d 0 0" % nth_id(2, "jobs"))
        st = self.js(c, nth_id(2, "jobs"))
        self.assertEqual((st["state"], unq(st["bury-reason"])), ("buried", "release"))
        # 0 clears it: a plain put is a beanstalkd job again
        self.assertEqual(c.cmd("tube-tries jobs 0"), b"TUBE-TRIES 0\r\n")
        self.assertEqual(self.tube_stats(c, "jobs")["default-tries"], "0")
        c.cmd("use jobs")
        after = c.put_id("after")
        self.assertEqual(self.ext_keys(c, after), [])
        self.assertTriesLeft(c, nth_id(3, "jobs"), 2)  # jobs already put keep theirs

    def test_setting_outlives_the_tube(self):
        c = self.client()
        self.assertEqual(c.cmd("tube-tries later 3"), b"TUBE-TRIES 3\r\n")  # no such tube yet
        self.assertEqual(c.cmd("use later"), b"USING later\r\n")
        self.assertEqual(self.tube_stats(c, "later")["default-tries"], "3")
        self.assertEqual(c.put("x"), b"INSERTED %d\r\n" % nth_id(1, "later"))
        self.assertTriesLeft(c, nth_id(1, "later"), 3)
        self.assertEqual(c.cmd("delete %d" % nth_id(1, "later")), b"DELETED\r\n")
        c.cmd("use default")
        self.assertEqual(c.cmd("stats-tube later"), NOT_FOUND)  # the tube is gone
        self.assertEqual(c.cmd("use later"), b"USING later\r\n")
        self.assertEqual(self.tube_stats(c, "later")["default-tries"], "3")
        self.assertEqual(c.put("y"), b"INSERTED %d\r\n" % nth_id(2, "later"))
        self.assertTriesLeft(c, nth_id(2, "later"), 3)

    def test_grammar(self):
        c = self.client(timeout=3)
        self.assertEqual(c.cmd("tube-tries t 4294967295"), b"TUBE-TRIES 4294967295\r\n")
        n200 = "n" * 200
        self.assertEqual(c.cmd("tube-tries %s 1" % n200), b"TUBE-TRIES 1\r\n")
        self.assertEqual(c.cmd("tube-tries a-b_c+d/e;f.g$h(i)j 7"), b"TUBE-TRIES 7\r\n")
        c = self.assertBad(c, ["tube-tries t", "tube-tries t 1 2", "tube-tries t -1",
                           "tube-tries t +1", "tube-tries t 4294967296", "tube-tries t x",
                           "tube-tries t 99999999999999999999", "tube-tries -t 1",
                           "tube-tries %s 1" % ("m" * 201), "tube-tries a!b 1", "tube-tries  1",
                           b"tube-tries \xc3\xa9 1", "tube-tries t 1x", "tube-tries t tries=1"])
        self.assertEqual(c.cmd("use t"), b"USING t\r\n")
        self.assertEqual(self.tube_stats(c, "t")["default-tries"], "4294967295")


# ---- TTL -------------------------------------------------------------------------------------

class TestTtl(ExtCase):
    def test_ready_delayed_and_buried_jobs_expire(self):
        c = self.client()
        c.cmd("use e")
        t0 = time.monotonic()
        self.assertEqual(put_ext(c, "r", "ttl=1 key=kr"), b"INSERTED %d\r\n" % nth_id(1, "e"))
        self.assertEqual(put_ext(c, "d", "ttl=1 key=kd", delay=100), b"INSERTED %d\r\n" % nth_id(2, "e"))
        self.assertEqual(put_ext(c, "b", "ttl=1 key=kb"), b"INSERTED %d\r\n" % nth_id(3, "e"))
        self.assertEqual(c.cmd("reserve-job %d" % nth_id(3, "e")), b"RESERVED %d 1\r\nb\r\n" % nth_id(3, "e"))
        self.assertEqual(c.cmd("bury %d 0" % nth_id(3, "e")), b"BURIED\r\n")
        self.assertEqual(put_ext(c, "l", "ttl=100"), b"INSERTED %d\r\n" % nth_id(4, "e"))
        self.assertEqual(c.put("plain"), b"INSERTED %d\r\n" % nth_id(5, "e"))
        self.assertIn(self.js(c, nth_id(4, "e"))["ttl-left"], ("99", "100"))
        self.assertIn(self.js(c, nth_id(1, "e"))["ttl-left"], ("0", "1"))
        self.assertTrue(c.cmd("peek %d" % nth_id(1, "e")).startswith(b"FOUND %d" % nth_id(1, "e")))  # not before its time
        st = wait_stat(c, "total-expired-jobs", 3, timeout=1 + 2 * SLACK)
        self.assertIsNotNone(st, "the three jobs did not expire")
        self.assertElapsed(t0, 0.9, 1 + 2 * SLACK)
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-delayed"],
                          st["current-jobs-buried"], st["total-jobs"]), ("2", "0", "0", "5"))
        for jid in (nth_id(n, "e") for n in (1, 2, 3)):
            self.assertGone(c, jid)
            self.assertEqual(c.cmd("stats-job %d" % jid), NOT_FOUND)
        self.assertTrue(c.cmd("peek %d" % nth_id(4, "e")).startswith(b"FOUND %d" % nth_id(4, "e")))
        self.assertTrue(c.cmd("peek %d" % nth_id(5, "e")).startswith(b"FOUND %d" % nth_id(5, "e")))
        ts = self.tube_stats(c, "e")
        self.assertEqual((ts["total-expired-jobs"], ts["current-jobs-ready"]), ("3", "2"))
        self.assertEqual(self.tube_stats(c, "default")["total-expired-jobs"], "0")
        # the keys are free again
        for k in ("kr", "kd", "kb"):
            self.assertTrue(put_ext(c, "again", "key=" + k).startswith(b"INSERTED "), k)

    def test_reserved_job_survives_until_its_reservation_ends(self):
        a, b, w = self.client(), self.client(), self.client()
        for i in range(1, 7):
            self.assertEqual(put_ext(a, "j%d" % i, "ttl=1 key=k%d" % i, ttr=2 if i == 5 else 60),
                             b"INSERTED %d\r\n" % nth_id(i))
        t0 = time.monotonic()
        for jid in map(nth_id, (1, 2, 3, 5, 6)):
            self.assertTrue(w.cmd("reserve-job %d" % jid).startswith(b"RESERVED %d " % jid))
        self.assertTrue(b.cmd("reserve-job %d" % nth_id(4)).startswith(b"RESERVED %d " % nth_id(4)))
        time.sleep(max(0.0, t0 + 1.3 - time.monotonic()))
        for jid in map(nth_id, range(1, 7)):
            self.assertEqual(self.js(a, jid)["state"], "reserved", jid)
        self.assertEqual(put_ext(a, "dup", "key=k1"), b"EXISTS %d\r\n" % nth_id(1))
        self.assertEqual(w.cmd("release %d 0 0" % nth_id(1)), b"RELEASED\r\n")
        self.assertGone(a, nth_id(1))
        self.assertEqual(w.cmd("bury %d 0" % nth_id(2)), b"BURIED\r\n")
        self.assertGone(a, nth_id(2))
        self.assertEqual(w.cmd("delete %d" % nth_id(3)), b"DELETED\r\n")
        self.assertEqual(w.cmd("release %d 0 100" % nth_id(6)), b"RELEASED\r\n")
        self.assertGone(a, nth_id(6))
        b.close()
        self.assertTrue(wait_until(lambda: a.cmd("peek %d" % nth_id(4)) == NOT_FOUND, 3),
                        "job 4 outlived its worker's connection")
        self.assertTrue(wait_until(lambda: a.cmd("peek %d" % nth_id(5)) == NOT_FOUND, 2 + 2 * SLACK),
                        "job 5 outlived its TTR")
        st = self.stats(a)
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-reserved"],
                          st["current-jobs-buried"], st["current-jobs-delayed"]), ("0", "0", "0", "0"))
        # 1, 2, 4, 5 and 6 were deleted by their TTL; whether job 3 (deleted by its worker
        # after its TTL had passed) counts as an expiry the spec leaves open.
        self.assertIn(st["total-expired-jobs"], ("5", "6"))
        for i in range(1, 7):
            self.assertTrue(put_ext(a, "again", "key=k%d" % i).startswith(b"INSERTED "), i)

    def test_detached_reserved_job_outlives_its_ttl_until_released(self):
        w, x = self.client(), self.client()
        self.assertEqual(put_ext(x, "a", "ttl=1"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(put_ext(x, "b", "ttl=1", ttr=2), b"INSERTED %d\r\n" % nth_id(2))
        self.assertEqual([j for j, _ in reserve_ext(w, "0 count=2 detached")[1]], [nth_id(1), nth_id(2)])
        w.close()
        t0 = time.monotonic()
        time.sleep(1.3)
        self.assertEqual(self.js(x, nth_id(1))["state"], "reserved")
        self.assertEqual(x.cmd("release %d 0 0" % nth_id(1)), b"RELEASED\r\n")
        self.assertGone(x, nth_id(1))
        self.assertTrue(wait_until(lambda: x.cmd("peek %d" % nth_id(2)) == NOT_FOUND, 2 + SLACK),
                        "job 2 outlived its TTR")
        self.assertElapsed(t0, 1.3, 2 + 2 * SLACK)
        self.assertEqual(self.stats(x)["current-jobs-reserved"], "0")

    def test_many_jobs_expire_together(self):
        c = self.client()
        n = 2500
        data = put_ext_bytes("x", "ttl=1")
        c.send(data * n)
        for _ in range(n):
            self.assertTrue(c.read_line().startswith(b"INSERTED "))
        c.put("stays")
        st = wait_stat(c, "total-expired-jobs", n, timeout=1 + 3 * SLACK)
        self.assertIsNotNone(st, "not all %d jobs expired" % n)
        self.assertEqual(st["current-jobs-ready"], "1")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED %d 5\r\nstays\r\n" % nth_id(n + 1))


# ---- reserve-ext ---------------------------------------------------------------------------

class TestReserveExt(ExtCase):
    def test_count_returns_best_first(self):
        c = self.client()
        for body, pri in (("a", 5), ("bb", 1), ("c", 3), ("dd", 1), ("e", 9)):
            c.put(body, pri=pri)
        raw, _ = reserve_ext(c, "0 count=3")
        self.assertEqual(raw, reserved_many_bytes([(nth_id(2), b"bb"), (nth_id(4), b"dd"), (nth_id(3), b"c")]))
        st = self.stats(c)
        self.assertEqual((st["current-jobs-reserved"], st["current-jobs-ready"]), ("3", "2"))
        for jid in map(nth_id, (2, 3, 4)):
            st = self.js(c, jid)
            self.assertEqual((st["state"], st["reserves"]), ("reserved", "1"))
        raw, _ = reserve_ext(c, "0 count=1000")
        self.assertEqual(raw, reserved_many_bytes([(nth_id(1), b"a"), (nth_id(5), b"e")]))
        self.assertEqual(reserve_ext(c, "0 count=2")[0], TIMED_OUT)
        self.assertEqual(self.stats(c)["cmd-reserve-ext"], "3")

    def test_default_count_is_one(self):
        c = self.client()
        c.put("a")
        c.put("b")
        self.assertEqual(reserve_ext(c, "0")[0], reserved_many_bytes([(nth_id(1), b"a")]))
        self.assertEqual(reserve_ext(c, "10")[0], reserved_many_bytes([(nth_id(2), b"b")]))
        self.assertEqual(reserve_ext(c, "0")[0], TIMED_OUT)

    def test_watched_tubes_only_and_not_paused(self):
        c = self.client()
        o = c.put_id("o", tube="other", pri=1)
        p = c.put_id("p", tube="paused", pri=0)
        d = c.put_id("d", tube="default", pri=2)
        self.assertEqual(reserve_ext(c, "0 count=5")[1], [(d, b"d")])
        c.cmd("watch other")
        c.cmd("watch paused")
        self.assertEqual(c.cmd("pause-tube paused 100"), b"PAUSED\r\n")
        self.assertEqual(reserve_ext(c, "0 count=5")[1], [(o, b"o")])
        self.assertEqual(c.cmd("pause-tube paused 0"), b"PAUSED\r\n")
        self.assertEqual(reserve_ext(c, "0 count=5")[1], [(p, b"p")])

    def test_waits_then_reserves(self):
        a, b = self.client(), self.client()
        t0 = time.monotonic()
        b.send(b"reserve-ext 5 count=3\r\n")
        self.assertTrue(wait_stat(a, "current-waiting", 1))
        self.assertEqual(a.put("x"), b"INSERTED %d\r\n" % nth_id(1))
        raw, jobs = read_reserved_many(b)
        self.assertEqual(raw, reserved_many_bytes([(nth_id(1), b"x")]))
        self.assertElapsed(t0, 0, 2)
        self.assertEqual(self.stats(a)["current-waiting"], "0")

    def test_waiting_batch_reserve_and_a_put_many(self):
        a, b = self.client(), self.client()
        b.send(b"reserve-ext 5 count=3\r\n")
        self.assertTrue(wait_stat(a, "current-waiting", 1))
        self.assertEqual(put_many(a, [entry("x", pri=3), entry("y", pri=2), entry("z", pri=1)]),
                         b"INSERTED-MANY 3\r\nINSERTED %d\r\nINSERTED %d\r\nINSERTED %d\r\n" % (nth_id(1), nth_id(2), nth_id(3)))
        raw, jobs = read_reserved_many(b)
        # the first job wakes the waiter; how many of the batch are ready "at that moment" is
        # the server's choice: 1 to 3, each once, best first among them
        self.assertTrue(1 <= len(jobs) <= 3, raw)
        if beanstalk.redis_store():
            # The Redis store does not hand a put's job to the waiter within the put: the
            # waiter claims the best job ready when its claim runs (docs/SCALE-OUT.md,
            # "Deviations"), so the batch is best first throughout.
            self.assertEqual([j for j, _ in jobs], sorted((j for j, _ in jobs), reverse=True))
        else:
            self.assertEqual(jobs[0][0], 1)
            self.assertEqual([j for j, _ in jobs[1:]],
                             sorted((j for j, _ in jobs[1:]), reverse=True))
        st = self.stats(a)
        self.assertEqual((st["current-jobs-reserved"], st["current-jobs-ready"]),
                         (str(len(jobs)), str(3 - len(jobs))))

    def test_times_out(self):
        c = self.client()
        t0 = time.monotonic()
        self.assertEqual(reserve_ext(c, "1 count=2")[0], TIMED_OUT)
        self.assertElapsed(t0, 0.9, 1 + SLACK)
        self.assertInSync(c)

    def test_deadline_soon(self):
        c = self.client()
        c.put("x", ttr=1)
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(reserve_ext(c, "5 count=3")[0], b"DEADLINE_SOON\r\n")
        self.assertEqual(reserve_ext(c, "5")[0], b"DEADLINE_SOON\r\n")

    def test_ttr_at_reserve_time(self):
        a, b = self.client(), self.client()
        a.put("x", ttr=100)
        self.assertEqual(reserve_ext(a, "0 ttr=2")[1], [(nth_id(1), b"x")])
        t0 = time.monotonic()
        st = self.js(a, nth_id(1))
        self.assertEqual((st["ttr"], st["state"]), ("100", "reserved"))
        self.assertIn(st["time-left"], ("1", "2"))
        self.assertEqual(self.ext_keys(a, nth_id(1)), [])  # a plain job: nothing of the extensions applies
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t0, 1.5, 2 + SLACK)
        st = self.js(b, nth_id(1))
        self.assertEqual((st["ttr"], st["timeouts"]), ("100", "1"))
        self.assertIn(st["time-left"], ("99", "100"))  # later reservations: its own TTR

    def test_touch_restarts_the_reservation_ttr(self):
        a, b = self.client(), self.client()
        a.put("x", ttr=100)
        self.assertEqual(reserve_ext(a, "0 ttr=2")[1], [(nth_id(1), b"x")])
        time.sleep(1.2)
        self.assertEqual(a.cmd("touch %d" % nth_id(1)), b"TOUCHED\r\n")
        t1 = time.monotonic()
        self.assertIn(self.js(a, nth_id(1))["time-left"], ("1", "2"))
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertElapsed(t1, 1.5, 2 + SLACK)

    def test_grammar(self):
        c = self.client(timeout=3)
        c.put("x")
        c = self.assertBad(c, [
            "reserve-ext ", "reserve-ext x", "reserve-ext -1", "reserve-ext +1", "reserve-ext 1x",
            "reserve-ext 99999999999999999999", "reserve-ext 0 count=0",
            "reserve-ext 0 count=1001", "reserve-ext 0 count=", "reserve-ext 0 count=x",
            "reserve-ext 0 count=-1", "reserve-ext 0 count", "reserve-ext 0 count=1 count=1",
            "reserve-ext 0 count=99999999999999999999", "reserve-ext 0 ttr=0",
            "reserve-ext 0 ttr=4294967296", "reserve-ext 0 ttr=", "reserve-ext 0 ttr",
            "reserve-ext 0 ttr=1 ttr=1", "reserve-ext 0 freeze-tries=1",
            "reserve-ext 0 freeze-tries freeze-tries",
            "reserve-ext 0 detached detached", "reserve-ext 0 detach", "reserve-ext 0 foo",
            "reserve-ext 0 DETACHED", "reserve-ext 0 tries=1", "reserve-ext 0 key=a",
            "reserve-ext count=2", "reserve-ext 0 count=2 x",
        ])
        st = self.stats(c)
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-reserved"], st["current-waiting"]),
                         ("1", "0", "0"))
        self.assertEqual(reserve_ext(c, "0 detached freeze-tries ttr=4294967295 count=1000")[1], [(nth_id(1), b"x")])
        self.assertEqual(c.cmd("release %d 0 0" % nth_id(1)), b"RELEASED\r\n")
        self.assertEqual(reserve_ext(c, "0 count=1 ttr=1")[1], [(nth_id(1), b"x")])


class TestDetached(ExtCase):
    def test_any_connection_may_act_on_them(self):
        p, w, x = self.client(), self.client(), self.client()
        for i in range(1, 5):
            p.put("j%d" % i)
        p.put("plain")  # 5
        self.assertEqual([j for j, _ in reserve_ext(w, "0 count=4 detached")[1]],
                         list(map(nth_id, [1, 2, 3, 4])))
        self.assertEqual(w.cmd("reserve"), b"RESERVED %d 5\r\nplain\r\n" % nth_id(5))
        self.assertEqual(x.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")
        self.assertEqual(x.cmd("release %d 0 0" % nth_id(2)), b"RELEASED\r\n")
        self.assertEqual(x.cmd("bury %d 0" % nth_id(3)), b"BURIED\r\n")
        self.assertEqual(x.cmd("touch %d" % nth_id(4)), b"TOUCHED\r\n")
        self.assertEqual(x.cmd("delete %d" % nth_id(5)), NOT_FOUND)  # an attached reservation is w's alone
        self.assertEqual(x.cmd("touch %d" % nth_id(5)), NOT_FOUND)
        self.assertEqual([self.js(x, nth_id(j))["state"] for j in (2, 3, 5)],
                         ["ready", "buried", "reserved"])
        st = self.stats(x)
        self.assertEqual(st["current-jobs-reserved"], "2")  # 4 (detached) and 5
        self.assertEqual(x.cmd("list-jobs default reserved 0 10"), list_reply(0, [nth_id(4), nth_id(5)]))
        self.assertEqual(p.cmd("delete %d" % nth_id(4)), b"DELETED\r\n")
        # the reserving connection may act on them too
        self.assertEqual(reserve_ext(w, "0 detached")[1], [(nth_id(2), b"j2")])
        self.assertEqual(w.cmd("delete %d" % nth_id(2)), b"DELETED\r\n")

    def test_not_given_back_when_the_connection_closes(self):
        p, w = self.client(), self.client()
        p.put("detached")
        p.put("attached")
        self.assertEqual(reserve_ext(w, "0 detached")[1], [(nth_id(1), b"detached")])
        self.assertEqual(w.cmd("reserve"), b"RESERVED %d 8\r\nattached\r\n" % nth_id(2))
        w.close()
        self.assertTrue(wait_job_stat(p, nth_id(2), "state", "ready"), "the attached job did not come back")
        self.assertEqual(self.js(p, nth_id(1))["state"], "reserved")
        self.assertEqual(p.cmd("reserve-with-timeout 0"), b"RESERVED %d 8\r\nattached\r\n" % nth_id(2))
        self.assertEqual(p.cmd("reserve-with-timeout 0"), TIMED_OUT)
        self.assertEqual(p.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")

    def test_back_or_buried_at_ttr(self):
        p, w = self.client(), self.client()
        p.put("own-ttr", ttr=1)                                    # 1
        self.assertEqual(put_ext(p, "last-try", "tries=1", ttr=1), b"INSERTED %d\r\n" % nth_id(2))
        p.put("reserve-ttr", ttr=100)                              # 3
        self.assertEqual(reserve_ext(w, "0 count=2 detached")[1], [(nth_id(1), b"own-ttr"), (nth_id(2), b"last-try")])
        self.assertEqual(reserve_ext(w, "0 detached ttr=1")[1], [(nth_id(3), b"reserve-ttr")])
        w.close()
        t0 = time.monotonic()
        for jid, state in ((nth_id(1), "ready"), (nth_id(2), "buried"), (nth_id(3), "ready")):
            st = wait_job_stat(p, jid, "state", state, timeout=1 + 2 * SLACK)
            self.assertIsNotNone(st, "job %d did not become %s" % (jid, state))
            self.assertEqual(st["timeouts"], "1")
        self.assertElapsed(t0, 0.3, 1 + 2 * SLACK)
        self.assertEqual(unq(self.js(p, nth_id(2))["bury-reason"]), "timeout")
        self.assertEqual(self.stats(p)["total-tries-exhausted"], "1")
        self.assertEqual(self.js(p, nth_id(3))["ttr"], "100")

    def test_no_deadline_soon_for_detached_jobs(self):
        c = self.client()
        c.put("x", ttr=1)
        self.assertEqual(reserve_ext(c, "0 detached")[1], [(nth_id(1), b"x")])
        # the job belongs to no connection: this one holds nothing near its deadline
        self.assertEqual(c.cmd("reserve-with-timeout 0"), TIMED_OUT)
        self.assertEqual(reserve_ext(c, "0")[0], TIMED_OUT)


# ---- unique keys and attributes --------------------------------------------------------------

class TestUniqueKeys(ExtCase):
    def test_exists_in_every_state(self):
        c, w = self.client(timeout=3), self.client()
        self.assertEqual(put_ext(c, "r", "key=r", pri=5), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(put_ext(c, "d", "key=d", delay=100), b"INSERTED %d\r\n" % nth_id(2))
        self.assertEqual(put_ext(c, "b", "key=b"), b"INSERTED %d\r\n" % nth_id(3))
        self.assertEqual(put_ext(c, "v", "key=v"), b"INSERTED %d\r\n" % nth_id(4))
        c.cmd("reserve-job %d" % nth_id(3))
        c.cmd("bury %d 0" % nth_id(3))
        self.assertTrue(w.cmd("reserve-job %d" % nth_id(4)).startswith(b"RESERVED %d " % nth_id(4)))
        for key, jid in (("r", 1), ("d", 2), ("b", 3), ("v", 4)):
            data = put_ext_bytes("other body", "key=%s tries=3 attr.a=1" % key, pri=1) + b"list-tube-used\r\n"
            self.assertEqual(self.replies(c, data, 2), [b"EXISTS %d\r\n" % nth_id(jid), USING_DEFAULT],
                             key)
        st = self.stats(c)
        self.assertEqual((st["total-jobs"], st["current-jobs-ready"]), ("4", "1"))
        self.assertEqual(self.tube_stats(c, "default")["total-jobs"], "4")
        st = self.js(c, nth_id(1))  # untouched by the refused puts
        self.assertEqual((st["pri"], unq(st["key"])), ("5", "r"))
        self.assertNotIn("tries-left", st)
        self.assertEqual(c.cmd("peek %d" % nth_id(1)), b"FOUND %d 1\r\nr\r\n" % nth_id(1))

    def test_one_put_wins_a_key_race(self):
        conns = [self.client() for _ in range(6)]
        for c in conns:
            c.send(b"".join(put_ext_bytes("c", "key=race%d" % i) for i in range(20)))
        won = {}
        for c in conns:
            for i in range(20):
                r = c.read_line()
                m = re.fullmatch(rb"(INSERTED|EXISTS) (\d+)\r\n", r)
                self.assertIsNotNone(m, r)
                if m.group(1) == b"INSERTED":
                    self.assertNotIn(i, won, "key race%d inserted twice" % i)
                    won[i] = int(m.group(2))
                else:
                    self.assertIn(i, won, "EXISTS before the INSERTED of race%d" % i)
                    self.assertEqual(int(m.group(2)), won[i])
        self.assertEqual(sorted(won), list(range(20)))
        self.assertEqual(self.stats(conns[0])["current-jobs-ready"], "20")

    def test_keys_are_per_tube(self):
        c = self.client()
        a = inserted_id(put_ext(c, "a", "key=k"))
        c.cmd("use other")
        b = inserted_id(put_ext(c, "b", "key=k"))
        self.assertNotEqual(a, b)
        self.assertEqual(put_ext(c, "c", "key=k"), b"EXISTS %d\r\n" % b)
        c.cmd("use default")
        self.assertEqual(put_ext(c, "d", "key=k"), b"EXISTS %d\r\n" % a)
        # case matters (whether an EXISTS used up an id the spec leaves open)
        self.assertTrue(put_ext(c, "e", "key=K").startswith(b"INSERTED "))

    def test_key_freed_by_delete_delete_many_and_purge(self):
        c = self.client()
        self.assertEqual(put_ext(c, "a", "key=one"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")
        k2 = inserted_id(put_ext(c, "b", "key=one"))
        self.assertEqual(c.cmd("delete-many %d" % k2), b"DELETED-MANY 1\r\n")
        k3 = inserted_id(put_ext(c, "c", "key=one"))
        self.assertEqual(c.cmd("purge default ready"), b"PURGED 1\r\n")
        k4 = inserted_id(put_ext(c, "d", "key=one", delay=100))
        self.assertEqual(c.cmd("purge default all"), b"PURGED 1\r\n")
        k5 = inserted_id(put_ext(c, "e", "key=one"))
        self.assertEqual(len({k2, k3, k4, k5}), 4)
        self.assertEqual(put_ext(c, "f", "key=one"), b"EXISTS %d\r\n" % k5)
        # a plain put knows nothing of keys
        self.assertTrue(c.put("one").startswith(b"INSERTED "))

    def test_attributes_shown_and_kept(self):
        c = self.client()
        self.assertEqual(put_ext(c, "x", "attr.zeta=1 attr.alpha=two attr.Mid-_9=3"), b"INSERTED %d\r\n" % nth_id(1))
        keys = self.ext_keys(c, nth_id(1))
        self.assertEqual(sorted(keys), ["attr.Mid-_9", "attr.alpha", "attr.zeta"])
        for cmd in ("reserve", "release %d 0 0" % nth_id(1), "reserve", "bury %d 0" % nth_id(1), "kick 1"):
            c.cmd(cmd)
            st = self.js(c, nth_id(1))
            self.assertEqual((unq(st["attr.zeta"]), unq(st["attr.alpha"]), unq(st["attr.Mid-_9"])),
                             ("1", "two", "3"), cmd)
        self.assertEqual(self.js(c, nth_id(1))["state"], "ready")
        self.assertEqual(self.ext_keys(c, nth_id(1)), keys)


# ---- put-many ------------------------------------------------------------------------------

class TestPutMany(ExtCase):
    def test_inserts_each_entry(self):
        c = self.client()
        c.cmd("use pm")
        entries = [entry("one", pri=5, ttr=30), entry(b"two\r\nlines", "tries=2 key=k2", delay=100),
                   entry(b"", "attr.x=y ttl=100")]
        self.assertEqual(put_many(c, entries),
                         b"INSERTED-MANY 3\r\nINSERTED %d\r\nINSERTED %d\r\nINSERTED %d\r\n" % (nth_id(1, "pm"), nth_id(2, "pm"), nth_id(3, "pm")))
        self.assertEqual(c.cmd("peek %d" % nth_id(1, "pm")), b"FOUND %d 3\r\none\r\n" % nth_id(1, "pm"))
        self.assertEqual(c.cmd("peek %d" % nth_id(2, "pm")), b"FOUND %d 10\r\ntwo\r\nlines\r\n" % nth_id(2, "pm"))
        self.assertEqual(c.cmd("peek %d" % nth_id(3, "pm")), b"FOUND %d 0\r\n\r\n" % nth_id(3, "pm"))
        st = self.js(c, nth_id(1, "pm"))
        self.assertEqual((unq(st["tube"]), st["pri"], st["ttr"], st["state"]), ("pm", "5", "30", "ready"))
        self.assertEqual(self.ext_keys(c, nth_id(1, "pm")), [])
        st = self.js(c, nth_id(2, "pm"))
        self.assertEqual((st["state"], st["tries-left"], unq(st["key"])), ("delayed", "2", "k2"))
        st = self.js(c, nth_id(3, "pm"))
        self.assertEqual(unq(st["attr.x"]), "y")
        self.assertIn(st["ttl-left"], ("99", "100"))
        st = self.stats(c)
        self.assertEqual((st["total-jobs"], st["cmd-put-many"]), ("3", "1"))
        self.assertInSync_used(c, "pm")

    def assertInSync_used(self, c, tube):
        self.assertEqual(c.cmd("list-tube-used"), b"USING %s\r\n" % tube.encode())

    def test_a_thousand_entries(self):
        c = self.client()
        expect = b"INSERTED-MANY 1000\r\n" + b"".join(b"INSERTED %d\r\n" % nth_id(i)
                                                       for i in range(1, 1001))
        self.assertEqual(put_many(c, [entry(b"%d" % i) for i in range(1000)]), expect)
        self.assertEqual(self.stats(c)["current-jobs-ready"], "1000")
        self.assertEqual(c.cmd("peek %d" % nth_id(1000)), b"FOUND %d 3\r\n999\r\n" % nth_id(1000))

    def test_keys_within_the_batch(self):
        c = self.client()
        self.assertEqual(put_ext(c, "a", "key=dup"), b"INSERTED %d\r\n" % nth_id(1))
        r = put_many(c, [entry("b"), entry("c", "key=dup"), entry("d", "key=new"), entry("e", "key=new"),
                         entry("f")])
        m = re.fullmatch(rb"INSERTED-MANY 5\r\nINSERTED (\d+)\r\nEXISTS (\d+)\r\nINSERTED (\d+)\r\n"
                         rb"EXISTS (\d+)\r\nINSERTED (\d+)\r\n", r)
        self.assertIsNotNone(m, r)
        b, a, d, d2, f = (int(x) for x in m.groups())
        self.assertEqual(a, nth_id(1))
        self.assertEqual(d, d2)
        self.assertLess(b, d)
        self.assertLess(d, f)
        self.assertEqual(c.cmd("peek %d" % d), b"FOUND %d 1\r\nd\r\n" % d)
        self.assertEqual(self.stats(c)["current-jobs-ready"], "4")

    def test_bad_block_puts_nothing(self):
        c = self.client(timeout=3)
        good = entry("ok", "key=kbad")
        cases = {
            "fewer entries than count": put_many_bytes([good, entry("b")], count=3),
            "more entries than count": put_many_bytes([good, entry("b")], count=1),
            "bad option in the last entry": put_many_bytes([good, entry("b"), entry("c", "bogus=1")]),
            "tries=0": put_many_bytes([good, entry("b", "tries=0")]),
            "repeated option": put_many_bytes([good, entry("b", "key=a key=b")]),
            "body shorter than its length": put_many_bytes([good, b"0 0 10 5\r\nabc\r\n"]),
            "body longer than its length": put_many_bytes([good, b"0 0 10 2\r\nabc\r\n"]),
            "body without CRLF": put_many_bytes([good, b"0 0 10 3\r\nabcXY"]),
            "missing ttr": put_many_bytes([good, b"0 0 3\r\nabc\r\n"]),
            "extra argument": put_many_bytes([good, b"0 0 10 3 4\r\nabc\r\n"]),
            "negative pri": put_many_bytes([good, b"-1 0 10 3\r\nabc\r\n"]),
            "pri overflow": put_many_bytes([good, b"4294967296 0 10 3\r\nabc\r\n"]),
            "trailing garbage": b"put-many 1 %d\r\n%sx\r\n" % (len(good) + 1, good),
            "a command instead of an entry": put_many_bytes([good, b"put 0 0 10 1\r\nx\r\n"]),
            "LF line end": put_many_bytes([good, b"0 0 10 3\nabc\r\n"]),
        }
        for what, data in cases.items():
            self.assertEqual(self.replies(c, data + b"list-tube-used\r\n", 2), [BAD, USING_DEFAULT], what)
        st = self.stats(c)
        self.assertEqual((st["total-jobs"], st["current-jobs-ready"], st["current-jobs-delayed"]),
                         ("0", "0", "0"))
        self.assertEqual(put_ext(c, "k", "key=kbad"), b"INSERTED %d\r\n" % nth_id(1))

    def test_malformed_line_reads_no_block(self):
        c = self.client(timeout=3)
        c = self.assertBad(c, ["put-many ", "put-many 1", "put-many 1 ", "put-many 0 10", "put-many 1001 10",
                           "put-many x 10", "put-many 1 x", "put-many -1 10", "put-many 1 -1",
                           "put-many 1 10 x", "put-many +1 10",
                           "put-many 99999999999999999999 10", "put-many 1 99999999999999999999",
                           "put-many 1 10 key=a"])
        self.assertEqual(self.stats(c)["total-jobs"], "0")

    def test_missing_crlf_after_the_block(self):
        c = self.client(timeout=3)
        data = put_many_bytes([entry("a", "key=z")])[:-2] + b"XY" + b"list-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2), [b"EXPECTED_CRLF\r\n", USING_DEFAULT])
        self.assertEqual(self.stats(c)["total-jobs"], "0")
        self.assertTrue(put_ext(c, "b", "key=z").startswith(b"INSERTED "))

    def test_draining(self):
        c = self.client(timeout=3)
        self.server.signal(signal.SIGUSR1)
        self.assertTrue(wait_stat(c, "draining", "true"))
        c.send(put_many_bytes([entry("a"), entry("b", "key=x")]) + b"list-tube-used\r\n")
        self.assertEqual(read_many(c, b"INSERTED-MANY"), b"INSERTED-MANY 2\r\nDRAINING\r\nDRAINING\r\n")
        self.assertEqual(c.read_reply(), USING_DEFAULT)
        self.assertEqual(self.stats(c)["total-jobs"], "0")


class TestPutManyJobSize(ExtCase):
    server_args = ("-z", "10")

    def test_entry_too_big(self):
        c = self.client()
        r = put_many(c, [entry("0123456789"), entry("01234567890", "key=big"), entry("x", "key=big")])
        self.assertEqual(r, b"INSERTED-MANY 3\r\nINSERTED %d\r\nJOB_TOO_BIG\r\nINSERTED %d\r\n" % (nth_id(1), nth_id(2)))
        self.assertEqual(c.cmd("peek %d" % nth_id(2)), b"FOUND %d 1\r\nx\r\n" % nth_id(2))

    def test_block_over_16_mib_is_skipped(self):
        c = self.client(timeout=10)
        bound = 16 * 1024 * 1024
        evil = (b"use evil\r\n" * (bound // 10 + 1))[:bound + 1]
        c.send(b"put-many 2 %d\r\n" % len(evil))
        self.assertTrue(c.no_reply_within(0.2))  # the block is skipped whole, then answered
        c.send(evil + b"\r\nlist-tube-used\r\n")
        self.assertEqual([c.read_reply(), c.read_reply()], [b"JOB_TOO_BIG\r\n", USING_DEFAULT])
        # at the bound the block is read and checked: garbage is BAD_FORMAT, not too big
        c.send(b"put-many 2 %d\r\n" % bound + evil[:bound] + b"\r\nlist-tube-used\r\n")
        self.assertEqual([c.read_reply(), c.read_reply()], [BAD, USING_DEFAULT])
        self.assertEqual(c.cmd("list-tubes"), b"OK 14\r\n---\n- default\n\r\n")
        self.assertEqual(self.stats(c)["total-jobs"], "0")

    def test_big_block_of_small_entries(self):
        # the block is bounded by 16 MiB, not by -z: 1000 entries of 10 bytes (~30 KB)
        c = self.client()
        r = put_many(c, [entry(b"%010d" % i, "attr.i=%d" % i) for i in range(1000)])
        self.assertEqual(r, b"INSERTED-MANY 1000\r\n"
                         + b"".join(b"INSERTED %d\r\n" % nth_id(i) for i in range(1, 1001)))
        self.assertEqual(c.cmd("peek %d" % nth_id(1000)), b"FOUND %d 10\r\n0000000999\r\n" % nth_id(1000))


@beanstalk.embedded_store_only("--max-memory caps the embedded store; Redis has maxmemory")
class TestMemoryCap(ExtCase):
    server_args = ("--max-memory", "200K")

    def test_put_many_and_put_ext_at_the_cap(self):
        c = self.client()
        r = put_many(c, [entry(b"m" * 1000, "key=m%d" % i) for i in range(300)])
        lines = r.split(b"\r\n")[:-1]
        self.assertEqual(lines[0], b"INSERTED-MANY 300")
        k = sum(1 for l in lines[1:] if l.startswith(b"INSERTED "))
        self.assertTrue(50 < k < 300, k)
        self.assertEqual(lines[1:], [b"INSERTED %d" % i for i in range(1, k + 1)]
                         + [b"OUT_OF_MEMORY"] * (300 - k))
        data = put_ext_bytes(b"m" * 1000, "key=x tries=1") + b"list-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2),
                         [b"OUT_OF_MEMORY\r\n", USING_DEFAULT])
        self.assertEqual(self.stats(c)["current-jobs-ready"], str(k))
        # a refused entry took no key
        self.assertEqual(c.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")
        self.assertTrue(put_ext(c, "m", "key=m%d" % (k + 5)).startswith(b"INSERTED "))

    def test_every_way_out_gives_the_memory_back(self):
        # memory-used also counts the indexes (job table, heaps), which grow once and are
        # kept: warm them up first, then each way out must give back all but a few bytes per
        # job of footprints of 400 bytes and more.
        c = self.client()
        n = 30
        attrs = " ".join("attr.a%d=%s" % (i, "v" * 255) for i in range(16))
        self.assertEqual(put_ext(c, "x", "key=%s tries=3 ttl=100 %s" % ("k" * 200, attrs)), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd("delete %d" % nth_id(1)), b"DELETED\r\n")
        for i in range(2 * n):
            put_ext(c, "w", "key=w%d tries=3 ttl=100 attr.x=%s" % (i, "v" * 200), delay=i % 2 * 100)
        self.assertEqual(c.cmd("purge default all"), b"PURGED %d\r\n" % (2 * n))
        base = int(self.stats(c)["memory-used"])

        def put_batch(tag, opts=""):
            ids = [inserted_id(put_ext(c, "x", "key=%s%d attr.x=%s %s" % (tag, i, "v" * 200, opts)))
                   for i in range(n)]
            self.assertGreater(int(self.stats(c)["memory-used"]) - base, n * 350, tag)
            return ids

        def assertGivenBack(how):
            self.assertLess(int(self.stats(c)["memory-used"]) - base, n * 50, how)

        ids = put_batch("d")
        for jid in ids:
            c.cmd("delete %d" % jid)
        assertGivenBack("delete")
        ids = put_batch("m")
        self.assertEqual(put_ext(c, "y", "key=m0 attr.y=1"), b"EXISTS %d\r\n" % ids[0])
        self.assertEqual(c.cmd("delete-many " + " ".join(map(str, ids))), b"DELETED-MANY %d\r\n" % n)
        assertGivenBack("delete-many and EXISTS")
        put_batch("p")
        self.assertEqual(c.cmd("purge default ready"), b"PURGED %d\r\n" % n)
        assertGivenBack("purge")
        put_batch("t", "ttl=1")
        self.assertTrue(wait_stat(c, "total-expired-jobs", n, timeout=1 + 2 * SLACK))
        assertGivenBack("expiry")
        ids = put_batch("r", "tries=1")
        c.send(b"".join(b"reserve-job %d\r\nrelease %d 0 0\r\n" % (j, j) for j in ids))
        for _ in ids:
            c.read_reply()
            c.read_reply()
        self.assertEqual(self.stats(c)["current-jobs-buried"], str(n))
        self.assertEqual(c.cmd("kick %d" % n), b"KICKED %d\r\n" % n)
        self.assertEqual(c.cmd("purge default all"), b"PURGED %d\r\n" % n)
        assertGivenBack("buried, kicked and purged")


# ---- delete-many ---------------------------------------------------------------------------

class TestDeleteMany(ExtCase):
    def test_deletes_what_delete_would(self):
        c, o = self.client(), self.client()
        ready = c.put_id("ready")
        delayed = c.put_id("delayed", delay=100)
        buried = c.put_id("buried")
        c.cmd("reserve-job %d" % buried)
        c.cmd("bury %d 0" % buried)
        mine = c.put_id("mine")
        c.cmd("reserve-job %d" % mine)
        theirs = c.put_id("theirs")
        o.cmd("reserve-job %d" % theirs)
        detached = c.put_id("detached", tube="d")
        o.cmd("watch d")
        o.cmd("ignore default")
        self.assertEqual(reserve_ext(o, "0 detached")[1], [(detached, b"detached")])
        other = c.put_id("other tube", tube="t")
        unknown = max(ready, delayed, buried, mine, theirs, detached, other) + 1
        self.assertEqual(c.cmd("delete-many %d %d %d %d %d %d %d %d %d 18446744073709551615 0"
                               % (ready, delayed, buried, mine, theirs, detached, other, unknown,
                                  ready)),
                         b"DELETED-MANY 6\r\n")
        for jid in (ready, delayed, buried, mine, detached, other):
            self.assertGone(c, jid)
        self.assertEqual(self.js(c, theirs)["state"], "reserved")
        self.assertEqual(c.cmd("delete-many %d" % theirs), b"DELETED-MANY 0\r\n")
        self.assertEqual(o.cmd("delete-many %d" % theirs), b"DELETED-MANY 1\r\n")
        self.assertEqual(c.cmd("delete-many %d" % ready), b"DELETED-MANY 0\r\n")
        st = self.stats(c)
        self.assertEqual(sum(int(st[k]) for k in ("current-jobs-ready", "current-jobs-reserved",
                                                  "current-jobs-delayed", "current-jobs-buried")), 0)
        self.assertEqual(st["cmd-delete-many"], "4")

    def test_a_thousand_ids(self):
        c = self.client(timeout=3)
        jids = put_n(c, 1001)
        ids = " ".join(map(str, jids))
        self.assertEqual(c.cmd("delete-many " + ids), BAD)  # 1001 ids
        self.assertEqual(self.stats(c)["current-jobs-ready"], "1001")
        ids = " ".join(map(str, jids[:1000]))
        self.assertEqual(c.cmd("delete-many " + ids), b"DELETED-MANY 1000\r\n")
        self.assertEqual(self.stats(c)["current-jobs-ready"], "1")
        self.assertTrue(c.cmd("peek %d" % jids[1000]).startswith(b"FOUND %d" % jids[1000]))

    def test_grammar(self):
        c = self.client(timeout=3)
        c.put("x")
        c = self.assertBad(c, ["delete-many ", "delete-many x", "delete-many 1 x", "delete-many -1",
                           "delete-many +1", "delete-many 1x", "delete-many 18446744073709551616",
                           "delete-many 1 18446744073709551616", "delete-many 1,2",
                           "delete-many 1 2 count=1"])
        self.assertTrue(c.cmd("peek %d" % nth_id(1)).startswith(b"FOUND %d" % nth_id(1)))
        self.assertEqual(c.cmd("delete-many 18446744073709551615"), b"DELETED-MANY 0\r\n")

    def test_line_of_8192_bytes_accepted_8193_refused(self):
        c = self.client(timeout=3)
        c.put("a")
        c.put("b")
        line = delete_many_line(8193, (nth_id(1),))
        self.assertEqual(self.replies(c, line + b"list-tube-used\r\n", 2), [BAD, USING_DEFAULT])
        self.assertTrue(c.cmd("peek %d" % nth_id(1)).startswith(b"FOUND %d" % nth_id(1)), "a refused line deleted a job")
        line = delete_many_line(8192, (nth_id(1),))
        self.assertEqual(self.replies(c, line + b"list-tube-used\r\n", 2),
                         [b"DELETED-MANY 1\r\n", USING_DEFAULT])
        line = delete_many_line(600, (nth_id(2),))  # between 225 and 8192
        self.assertEqual(c.cmd(line), b"DELETED-MANY 1\r\n")
        line = delete_many_line(20000, (nth_id(1),))
        self.assertEqual(self.replies(c, line + b"list-tube-used\r\n", 2), [BAD, USING_DEFAULT])


# ---- purge ---------------------------------------------------------------------------------

class TestPurge(ExtCase):
    def fill(self, c, tube):
        """Puts into tube 2 ready, 2 delayed, 2 buried and 1 reserved job (by a connection of
        its own, kept open); returns the ids by state."""
        c.cmd("use " + tube)
        ids = {"ready": [], "delayed": [], "buried": [], "reserved": []}
        for state in ("ready", "ready", "delayed", "delayed", "buried", "buried", "reserved"):
            jid = inserted_id(c.put(state, delay=100 if state == "delayed" else 0))
            ids[state].append(jid)
        w = self.client()
        for jid in ids["buried"]:
            self.assertTrue(w.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            self.assertEqual(w.cmd("bury %d 0" % jid), b"BURIED\r\n")
        self.assertTrue(w.cmd("reserve-job %d" % ids["reserved"][0]).startswith(b"RESERVED"))
        c.cmd("use default")
        return ids

    def test_each_state(self):
        c = self.client()
        ids = self.fill(c, "t")
        other = self.fill(c, "u")
        for state in ("ready", "delayed", "buried"):
            self.assertEqual(c.cmd("purge t " + state), b"PURGED 2\r\n", state)
            for jid in ids[state]:
                self.assertGone(c, jid)
            self.assertEqual(c.cmd("purge t " + state), b"PURGED 0\r\n", state)
        self.assertEqual(c.cmd("purge t all"), b"PURGED 0\r\n")
        self.assertEqual(self.js(c, ids["reserved"][0])["state"], "reserved")
        ts = self.tube_stats(c, "t")
        self.assertEqual((ts["current-jobs-ready"], ts["current-jobs-delayed"],
                          ts["current-jobs-buried"], ts["current-jobs-reserved"]), ("0", "0", "0", "1"))
        ts = self.tube_stats(c, "u")  # another tube untouched
        self.assertEqual((ts["current-jobs-ready"], ts["current-jobs-delayed"],
                          ts["current-jobs-buried"], ts["current-jobs-reserved"]), ("2", "2", "2", "1"))
        self.assertEqual(c.cmd("purge u all"), b"PURGED 6\r\n")
        self.assertEqual(self.js(c, other["reserved"][0])["state"], "reserved")
        st = self.stats(c)
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-delayed"],
                          st["current-jobs-buried"], st["current-jobs-reserved"]), ("0", "0", "0", "2"))
        self.assertEqual(st["cmd-purge"], "8")

    def test_errors(self):
        c = self.client(timeout=3)
        c.put("x")
        self.assertEqual(c.cmd("purge nosuch ready"), NOT_FOUND)
        self.assertEqual(c.cmd("purge nosuch all"), NOT_FOUND)
        c = self.assertBad(c, ["purge default", "purge default ", "purge default reserved",
                           "purge default READY", "purge default ready x", "purge default any",
                           "purge -x ready", "purge %s ready" % ("m" * 201), "purge a!b ready",
                           b"purge \xc3\xa9 ready", "purge  ready", "purge nosuch bogus"])
        n200 = "n" * 200
        c.cmd("use " + n200)
        self.assertEqual(c.cmd("purge %s all" % n200), b"PURGED 0\r\n")
        self.assertTrue(c.cmd("peek %d" % nth_id(1)).startswith(b"FOUND %d" % nth_id(1)))

    def test_large_purge_of_every_state(self):
        c = self.client()
        c.cmd("use big")
        ready = put_n(c, 3000)
        delayed = put_n(c, 1500, delay=1000)
        buried = put_n(c, 500)
        c.send(b"".join(b"reserve-job %d\r\nbury %d 0\r\n" % (j, j) for j in buried))
        for _ in buried:
            self.assertTrue(c.read_reply().startswith(b"RESERVED"))
            self.assertEqual(c.read_reply(), b"BURIED\r\n")
        c.cmd("use default")
        put_n(c, 100)
        self.assertEqual(c.cmd("purge big ready"), b"PURGED 3000\r\n")
        self.assertEqual(c.cmd("purge big all"), b"PURGED 2000\r\n")
        st = self.stats(c)
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-delayed"], st["current-jobs-buried"]),
                         ("100", "0", "0"))
        for jid in (ready[0], ready[-1], delayed[0], delayed[-1], buried[0], buried[-1]):
            self.assertGone(c, jid)
        # then 5000 ready in one go
        c.cmd("use big")
        put_n(c, 5000)
        self.assertEqual(c.cmd("purge big ready"), b"PURGED 5000\r\n")
        self.assertEqual(self.stats(c)["current-jobs-ready"], "100")

    def test_purge_racing_a_reserve(self):
        p, w = self.client(), self.client()
        n, tries = 5000, 3000
        ids = put_n(p, n)
        w.send(b"reserve-with-timeout 0\r\n" * tries)
        p.send(b"purge default ready\r\n")
        m = re.fullmatch(rb"PURGED (\d+)\r\n", p.read_line())
        self.assertIsNotNone(m)
        purged = int(m.group(1))
        reserved = []
        for _ in range(tries):
            r = w.read_reply()
            if r == TIMED_OUT:
                continue
            mm = re.match(rb"RESERVED (\d+) 0\r\n\r\n$", r)
            self.assertIsNotNone(mm, r)
            reserved.append(int(mm.group(1)))
        self.assertEqual(len(set(reserved)), len(reserved), "a job was reserved twice")
        self.assertTrue(set(reserved) <= set(ids))
        self.assertEqual(purged + len(reserved), n, "purged %d + reserved %d" % (purged, len(reserved)))
        st = self.stats(p)
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-reserved"]), ("0", str(len(reserved))))
        replies = pipelined(p, ["stats-job %d" % j for j in reserved])
        for jid, r in zip(reserved, replies):
            self.assertEqual(parse_yaml(r)["state"], "reserved", "job %d" % jid)
        # every reserved job is really w's
        if reserved:
            self.assertEqual(w.cmd("delete %d" % reserved[-1]), b"DELETED\r\n")


# ---- list-jobs -----------------------------------------------------------------------------

class TestListJobs(ExtCase):
    def test_pages(self):
        c = self.client()
        c.cmd("use t")
        ids = [c.put_id("x") for _ in range(5)]
        # next: the id after the page's last (1, 2 -> 3 with one counter)
        self.assertEqual(c.cmd("list-jobs t ready 0 2"), list_reply(ids[1] + 1, ids[:2]))
        self.assertEqual(c.cmd("list-jobs t ready %d 2" % ids[0]), list_reply(ids[1] + 1, ids[:2]))
        self.assertEqual(c.cmd("list-jobs t ready %d 2" % (ids[1] + 1)),
                         list_reply(ids[3] + 1, ids[2:4]))
        self.assertEqual(c.cmd("list-jobs t ready %d 2" % (ids[3] + 1)), list_reply(0, ids[4:]))
        self.assertEqual(c.cmd("list-jobs t ready 0 1000"), list_reply(0, ids))
        self.assertEqual(c.cmd("list-jobs t ready %d 10" % (ids[4] + 1)), list_reply(0, []))
        self.assertEqual(c.cmd("list-jobs t ready 18446744073709551615 1"), list_reply(0, []))
        self.assertEqual(c.cmd("list-jobs t buried 0 10"), list_reply(0, []))
        self.assertEqual(self.stats(c)["cmd-list-jobs"], "8")

    # After a full page `next` is the id after the page's last, for reserved jobs (scanned by
    # id) as for ready ones (read from their set), on one Redis and on a cluster.
    def test_a_full_page(self):
        c = self.client()
        ids = put_n(c, 1500)
        nxt = ids[999] + 1  # the id after the page's last
        self.assertEqual(c.cmd("list-jobs default ready 0 1000"), list_reply(nxt, ids[:1000]))
        self.assertEqual(c.cmd("list-jobs default ready %d 1000" % nxt), list_reply(0, ids[1000:]))
        raw, jobs = reserve_ext(c, "0 count=1000")
        self.assertEqual([j for j, _ in jobs], ids[:1000])
        self.assertEqual(c.cmd("list-jobs default reserved 0 1000"), list_reply(nxt, ids[:1000]))
        self.assertEqual(c.cmd("list-jobs default ready 0 1000"), list_reply(0, ids[1000:]))

    def test_states_and_tubes(self):
        c, w = self.client(), self.client()
        want = {"ready": [], "delayed": [], "reserved": [], "buried": []}
        states = ["ready", "delayed", "buried", "reserved"] * 4
        for i, state in enumerate(states):
            tube = "t" if i % 3 else "u"
            jid = inserted_id(c.put("j", tube=tube, delay=100 if state == "delayed" else 0))
            if state in ("buried", "reserved"):
                self.assertTrue(w.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            if state == "buried":
                self.assertEqual(w.cmd("bury %d 0" % jid), b"BURIED\r\n")
            if tube == "t":
                want[state].append(jid)
        for state, ids in want.items():
            self.assertEqual(c.cmd("list-jobs t %s 0 1000" % state), list_reply(0, ids), state)
        # paging through with count 1 gives the same ids
        for state, ids in want.items():
            got, frm = [], 0
            for _ in range(20):
                nxt, page = parse_list(c.cmd("list-jobs t %s %d 1" % (state, frm)))
                self.assertLessEqual(len(page), 1)
                got += page
                if nxt == 0:
                    break
                self.assertTrue(not page or nxt > page[-1])
                frm = nxt
            self.assertEqual(got, ids, state)

    @beanstalk.not_on_cluster("the bound of 65536 ids scanned is over beanstalkd's one id "
                              "counter; on a cluster a tube's ids come from its partition's")
    def test_scan_stops_after_65536_ids(self):
        c = self.client()
        c.cmd("use t")
        self.assertEqual(c.put("first"), b"INSERTED %d\r\n" % nth_id(1))
        c.cmd("use u")
        put_n(c, 70000)
        c.cmd("use t")
        self.assertEqual(c.put("last"), b"INSERTED %d\r\n" % nth_id(70002))
        nxt, ids = parse_list(c.cmd("list-jobs t ready 0 1000"))
        self.assertEqual(ids, [1])
        self.assertNotEqual(nxt, 0, "the scan stopped before id 70002 but next says there is no more")
        self.assertTrue(1 < nxt <= 65538, nxt)
        got = list(ids)
        for _ in range(5):
            nxt, page = parse_list(c.cmd("list-jobs t ready %d 1000" % nxt))
            got += page
            if nxt == 0:
                break
        self.assertEqual((got, nxt), ([1, 70002], 0))
        self.assertEqual(c.cmd("list-jobs u ready 65000 3"), list_reply(65003, [65000, 65001, 65002]))

    def test_errors(self):
        c = self.client(timeout=3)
        self.assertEqual(c.cmd("list-jobs nosuch ready 0 10"), NOT_FOUND)
        self.assertEqual(c.cmd("list-jobs default ready 0 1000"), list_reply(0, []))
        c = self.assertBad(c, ["list-jobs default ready 0", "list-jobs default ready", "list-jobs default",
                           "list-jobs default ready 0 0", "list-jobs default ready 0 1001",
                           "list-jobs default all 0 10", "list-jobs default READY 0 10",
                           "list-jobs default any 0 10", "list-jobs default ready -1 10",
                           "list-jobs default ready x 10", "list-jobs default ready 0 x",
                           "list-jobs default ready 18446744073709551616 10",
                           "list-jobs default ready 0 99999999999999999999",
                           "list-jobs default ready 0 10 1",
                           "list-jobs -x ready 0 10", "list-jobs %s ready 0 1" % ("m" * 201),
                           "list-jobs nosuch bogus 0 10"])


# ---- stats ---------------------------------------------------------------------------------

class TestStats(ExtCase):
    def test_stats_keys(self):
        c = self.client()
        self.assertEqual(yaml_keys(c.cmd("stats-ext")), BEANSTALKD_STATS_KEYS + STALKD_STATS_KEYS)
        self.assertEqual(yaml_keys(c.cmd("stats")), BEANSTALKD_STATS_KEYS)

    def test_stats_tube_exact_bytes(self):
        c = self.client()
        c.cmd("use fresh")
        body = (b'---\nname: "fresh"\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\n'
                b"current-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n"
                b"total-jobs: 0\ncurrent-using: 1\ncurrent-watching: 0\ncurrent-waiting: 0\n"
                b"cmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n"
                b"total-expired-jobs: 0\ntotal-tries-exhausted: 0\ndefault-tries: 0\n")
        self.assertEqual(c.cmd("stats-tube-ext fresh"), b"OK %d\r\n%s\r\n" % (len(body), body))
        self.assertEqual(c.cmd("tube-tries fresh 12"), b"TUBE-TRIES 12\r\n")
        body = body.replace(b"default-tries: 0", b"default-tries: 12")
        self.assertEqual(c.cmd("stats-tube-ext fresh"), b"OK %d\r\n%s\r\n" % (len(body), body))
        self.assertEqual(yaml_keys(c.cmd("stats-tube-ext default")),
                         STATS_TUBE_KEYS + EXTENSION_TUBE_KEYS)
        self.assertEqual(yaml_keys(c.cmd("stats-tube fresh")), STATS_TUBE_KEYS)

    def test_command_counters(self):
        c = self.client()
        st = self.stats(c)
        for k in EXTENSION_STATS_KEYS:
            self.assertEqual(st[k], "0", k)
        put_ext(c, "x", "tries=1")
        put_many(c, [entry("y")])
        reserve_ext(c, "0")
        c.cmd("delete-many 1")
        c.cmd("purge default all")
        c.cmd("list-jobs default ready 0 1")
        c.cmd("tube-tries default 0")
        st = self.stats(c)
        for k in EXTENSION_STATS_KEYS[2:]:
            self.assertEqual(st[k], "1", k)
        self.assertEqual((st["total-expired-jobs"], st["total-tries-exhausted"]), ("0", "0"))


class TestOldClient(ExtCase):
    def test_plain_job_shows_beanstalkd_keys_only(self):
        c = self.client()
        c.put("hello", pri=7, ttr=30)
        body = (b'---\nid: %d\ntube: "default"\nstate: ready\npri: 7\nage: 0\ndelay: 0\n'
                b"ttr: 30\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\n"
                b"buries: 0\nkicks: 0\n" % nth_id(1))
        self.assertEqual(c.cmd("stats-job %d" % nth_id(1)), b"OK %d\r\n%s\r\n" % (len(body), body))
        for cmd, reply in (("reserve", b"RESERVED %d 5\r\nhello\r\n" % nth_id(1)), ("release %d 0 0" % nth_id(1), b"RELEASED\r\n"),
                           ("reserve", b"RESERVED %d 5\r\nhello\r\n" % nth_id(1)), ("bury %d 0" % nth_id(1), b"BURIED\r\n"),
                           ("kick 1", b"KICKED 1\r\n"), ("reserve", b"RESERVED %d 5\r\nhello\r\n" % nth_id(1)),
                           ("touch %d" % nth_id(1), b"TOUCHED\r\n"), ("bury %d 1" % nth_id(1), b"BURIED\r\n")):
            self.assertEqual(c.cmd(cmd), reply, cmd)
            self.assertEqual(self.ext_keys(c, nth_id(1)), [], cmd)
        self.assertEqual(self.js(c, nth_id(1))["state"], "buried")

    def test_plain_job_handled_by_a_new_worker(self):
        # "a job put with `put` into a tube without a default is a beanstalkd job, `stats-job`
        # of such a job shows beanstalkd's keys only", whoever reserves it
        c = self.client()
        c.put("x")
        for cmd in ("reserve-ext 0 ttr=5", "bury %d 0" % nth_id(1), "kick 1", "reserve-ext 0 detached freeze-tries",
                    "release %d 0 0" % nth_id(1), "reserve-ext 0 count=2", "bury %d 5" % nth_id(1)):
            c.send(cmd.encode() + b"\r\n")
            r = read_reserved_many(c)[0] if cmd.startswith("reserve-ext") else c.read_reply()
            self.assertFalse(r.startswith((b"BAD", b"NOT_FOUND", b"TIMED_OUT")), (cmd, r))
            self.assertEqual(self.ext_keys(c, nth_id(1)), [], cmd)
        self.assertEqual(self.js(c, nth_id(1))["state"], "buried")

    def test_timed_out_plain_job(self):
        a, b = self.client(), self.client()
        a.put("x", ttr=1)
        a.cmd("reserve")
        self.assertEqual(b.cmd("reserve-with-timeout 5"), b"RESERVED %d 1\r\nx\r\n" % nth_id(1))
        self.assertEqual(self.ext_keys(b, nth_id(1)), [])
        self.assertEqual(self.stats(b)["total-tries-exhausted"], "0")


if __name__ == "__main__":
    unittest.main()

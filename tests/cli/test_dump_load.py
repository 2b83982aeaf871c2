"""stalk dump and load: from a real beanstalkd 1.12 into stalkd and back, comparing every job
(tube, state, priority, TTR, body to the byte, remaining delay no further apart than the test's
own time so far allows); that dump
changes nothing on either server (no job changes state, no counter of a job moves, a job
another client holds stays held); the order in which each tube hands its jobs out survives;
buried jobs stay buried; stalkd's extensions (tries, ttl, key, attributes) survive a dump
from stalkd into stalkd and are dropped, with a note, into beanstalkd; progress bars only on a
terminal.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/cli/test_dump_load.py
"""
import json
import math
import os
import random
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clicase import (BEANSTALKD_BIN, STALKD_BIN, StalkCase, body_of, jobs_of,  # noqa: E402
                     stats_of)

ALL_BYTES = bytes(range(256))
TUBES = ("default", "t.one", "a-b+c/d;e.f$g_h(i)")
BODIES = (b"", b"plain", ALL_BYTES, b"line\r\nbreak\r\n", "h\u00e9llo \u2713".encode(),
          b"\xff\xfe not utf-8", random.Random(7).randbytes(60000))
PRIS = (0, 1024, 4294967295, 5)
TTRS = (1, 60, 3600, 4294967295)


def canon(job):
    """What must survive a dump and a load: (tube, state, pri, ttr, body)."""
    return (job["tube"], job["state"], int(job["pri"]), int(job["ttr"]), job["body"])


def delay_of(job):
    return int(job["time-left"]) if job["state"] == "delayed" else 0


def from_dump(line):
    """A dump line as the fields jobs_of gives."""
    return {"tube": line["tube"], "state": line["state"], "pri": line["pri"],
            "ttr": line["ttr"], "body": body_of(line), "time-left": line["delay"],
            "id": line["id"]}


class DumpLoadCase(StalkCase):
    binary = BEANSTALKD_BIN

    def setUp(self):
        super().setUp()
        self.began = time.monotonic()

    def delay_slack(self):
        """Seconds two readings of one job's remaining delay (or TTL) taken during this test
        may differ by: the test's time so far, plus one for the rounding to whole seconds. A
        bound from what the clock shows, not a speed: a busy machine only widens it."""
        return math.ceil(time.monotonic() - self.began) + 1

    def assertSameDump(self, a, b):
        """Two dumps (bytes) of the same jobs, taken at two instants: equal line by line but
        for each delay, which may have counted down in between (delay_slack)."""
        la = [json.loads(l) for l in a.splitlines()]
        lb = [json.loads(l) for l in b.splitlines()]
        self.assertEqual(len(la), len(lb))
        for x, y in zip(la, lb):
            self.assertLessEqual(abs(x.pop("delay", 0) - y.pop("delay", 0)), self.delay_slack(),
                                 (x, y))
            self.assertEqual(x, y)

    def populate(self, server):
        """Jobs of every kind: ready (every body, priority, TTR; five of one priority in a
        row), delayed, buried, one held by another client, and gaps in the ids. Returns the
        client holding the reserved job."""
        c = self.client(server)
        for i, body in enumerate(BODIES):
            for t, tube in enumerate(TUBES):
                c.put(body, pri=PRIS[(i + t) % 4], ttr=TTRS[(i + 2 * t) % 4], tube=tube)
        for i in range(5):
            c.put("same priority %d" % i, pri=100, tube="t.one")
        for i in range(1200):  # a bulk tube with two jobs of three deleted: gaps
            jid = int(c.put("bulk %d" % i, pri=i % 7, tube="bulk").split()[1])
            if i % 3:
                self.assertEqual(c.cmd("delete %d" % jid), b"DELETED\r\n")
        for delay, tube in ((30, "default"), (500, "t.one"), (100000, "late")):
            c.put(b"delayed \x00 %d" % delay, pri=delay, delay=delay, tube=tube)
        for pri, body in ((7, b"buried"), (0, ALL_BYTES), (4294967295, b"")):
            jid = int(c.put(body, tube="dead", ttr=30).split()[1])
            self.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
            self.assertEqual(c.cmd("bury %d %d" % (jid, pri)), b"BURIED\r\n")
        holder = self.client(server)
        c.put("held by a worker", pri=42, ttr=3600, tube="held")
        holder.cmd("watch held")
        holder.cmd("ignore default")
        self.assertTrue(holder.cmd("reserve").endswith(b"\r\nheld by a worker\r\n"))
        return holder

    def truth(self, server):
        c = self.client(server)
        top = int(stats_of(c, "stats")["total-jobs"]) + 10
        return jobs_of(c, top)

    def dump(self, server, *args):
        r = self.stalk("dump", *args, server=server)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout, [json.loads(l) for l in r.stdout.splitlines()]

    def load(self, server, data):
        r = self.stalk("load", input=data, server=server)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode()

    def assertSameJobs(self, want, got, reserved_as_ready=False):
        """`want` and `got` (lists of jobs_of dicts) hold the same jobs, delays within
        delay_slack(); with reserved_as_ready, a reserved job of `want` is ready in `got`."""
        def key(j):
            k = canon(j)
            if reserved_as_ready and k[1] == "reserved":
                k = (k[0], "ready") + k[2:]
            return k
        w = sorted(want, key=lambda j: (key(j), delay_of(j)))
        g = sorted(got, key=lambda j: (key(j), delay_of(j)))
        self.assertEqual([key(j) for j in w], [canon(j) for j in g])
        for a, b in zip(w, g):
            self.assertLessEqual(abs(delay_of(a) - delay_of(b)), self.delay_slack(), (a, b))

    def assertSameOrder(self, want, got):
        """Each tube hands its ready jobs out in the same order: by priority, then id."""
        def order(jobs):
            out = {}
            for jid, j in sorted(jobs.items(), key=lambda kv: (int(kv[1]["pri"]), kv[0])):
                if j["state"] in ("ready", "reserved"):
                    out.setdefault(j["tube"], []).append(j["body"])
            return out
        self.assertEqual(order(want), order(got))


class FromBeanstalkd(DumpLoadCase):
    def test_dump_sees_every_job_and_changes_nothing(self):
        holder = self.populate(self.server)
        before = self.truth(self.server)
        stats_before = stats_of(self.client(), "stats")
        _, lines = self.dump(self.server)
        self.assertEqual([l["id"] for l in lines], sorted(before))  # id order, each once
        self.assertSameJobs(list(before.values()), [from_dump(l) for l in lines])
        self.assertEqual(sum(l["state"] == "reserved" for l in lines), 1)
        after = self.truth(self.server)
        self.assertEqual(sorted(after), sorted(before))
        counters = ("state", "pri", "reserves", "timeouts", "releases", "buries", "kicks")
        for jid in before:
            self.assertEqual([before[jid][k] for k in counters],
                             [after[jid][k] for k in counters], jid)
        stats_after = stats_of(self.client(), "stats")
        for k in ("current-jobs-ready", "current-jobs-delayed", "current-jobs-buried",
                  "current-jobs-reserved", "cmd-reserve", "cmd-release", "cmd-bury",
                  "cmd-kick"):
            self.assertEqual(stats_before[k], stats_after[k], k)
        # the probe that found the highest id: one put and one delete, nothing else
        self.assertEqual(int(stats_after["total-jobs"]), int(stats_before["total-jobs"]) + 1)
        held = [jid for jid, j in after.items() if j["state"] == "reserved"][0]
        self.assertEqual(holder.cmd("touch %d" % held), b"TOUCHED\r\n")

    def test_into_stalkd_and_back_into_beanstalkd(self):
        self.populate(self.server)
        source = self.truth(self.server)
        raw, lines = self.dump(self.server)
        stalkd = self.start_server(binary=STALKD_BIN, args=())
        summary = self.load(stalkd, raw)
        self.assertEqual(summary, "loaded %d jobs (%d ready, 3 delayed, 3 buried)\n"
                         % (len(source), len(source) - 6))
        loaded = self.truth(stalkd)
        self.assertSameJobs(list(source.values()), list(loaded.values()), reserved_as_ready=True)
        self.assertSameOrder(source, loaded)
        # and back, from stalkd (list-jobs) into a second beanstalkd
        raw2, lines2 = self.dump(stalkd)
        self.assertEqual(len(lines2), len(source))
        again = self.start_server(binary=BEANSTALKD_BIN, args=())
        self.load(again, raw2)
        back = self.truth(again)
        self.assertSameJobs(list(source.values()), list(back.values()), reserved_as_ready=True)
        self.assertSameOrder(source, back)
        # buried jobs are buried, and a kick makes them ready at once (not delayed)
        c = self.client(again)
        c.cmd("use dead")
        self.assertEqual(c.cmd("kick 10"), b"KICKED 3\r\n")
        st = stats_of(c, "stats-tube dead")
        self.assertEqual((st["current-jobs-ready"], st["current-jobs-delayed"]), ("3", "0"))

    def test_text_bodies(self):
        self.populate(self.server)
        raw, lines = self.dump(self.server, "--text")
        for line in lines:
            body = body_of(line)
            try:
                body.decode("utf-8")
                self.assertIn("body", line)
            except UnicodeDecodeError:
                self.assertIn("body64", line)
        self.assertIn("h\u00e9llo \u2713", [line.get("body") for line in lines])
        stalkd = self.start_server(binary=STALKD_BIN, args=())
        self.load(stalkd, raw)
        self.assertSameJobs(list(self.truth(self.server).values()),
                            list(self.truth(stalkd).values()), reserved_as_ready=True)

    def test_dump_some_tubes_and_to_a_file(self):
        self.populate(self.server)
        _, lines = self.dump(self.server, "dead", "held")
        self.assertEqual(sorted((l["tube"], l["state"]) for l in lines),
                         [("dead", "buried")] * 3 + [("held", "reserved")])
        out = os.path.join(self.tmpdir(), "dump.jsonl")
        self.assertEqual(self.stalk("dump", "-o", out, "late").returncode, 0)
        with open(out) as f:
            [job] = [json.loads(l) for l in f]
        self.assertEqual((job["tube"], job["state"], job["pri"]), ("late", "delayed", 100000))
        self.assertLessEqual(abs(job["delay"] - 100000), self.delay_slack())

    def test_max_id_skips_the_probe(self):
        c = self.client()
        for i in range(5):
            c.put("j%d" % i)
        _, lines = self.dump(self.server, "--max-id", "3")
        self.assertEqual([l["id"] for l in lines], [1, 2, 3])
        self.assertEqual(stats_of(c, "stats")["total-jobs"], "5")

    def test_progress_bar_only_on_a_terminal(self):
        self.populate(self.server)
        r = self.stalk("dump")
        self.assertRegex(r.stderr.decode(), r"^stalk: dumped \d+ jobs \(.*\)\n$")
        rc, out, err = self.stalk_on_terminal("dump")
        self.assertEqual(rc, 0, err)
        self.assertIn(b"\r\x1b[Kdump (ids) [", err)
        self.assertIn(b"stalk: dumped", err)
        self.assertSameDump(out, r.stdout)
        # load, too; and --no-progress and -q turn it off
        stalkd = self.start_server(binary=STALKD_BIN, args=())
        rc, _, err = self.stalk_on_terminal("load", input=out, server=stalkd)
        self.assertEqual(rc, 0, err)
        self.assertIn(b"\r\x1b[Kload ", err)
        rc, _, err = self.stalk_on_terminal("--no-progress", "dump")
        self.assertEqual((rc, err.count(b"\x1b[K")), (0, 0), err)
        self.assertIn(b"stalk: dumped", err)
        rc, _, err = self.stalk_on_terminal("-q", "dump")
        self.assertEqual((rc, err), (0, b""))

    def tmpdir(self):
        import shutil
        import tempfile
        d = tempfile.mkdtemp(prefix="stalk_dump_")
        self.addCleanup(shutil.rmtree, d, True)
        return d


class FromStalkd(DumpLoadCase):
    binary = None  # stalkd

    def test_dump_changes_nothing(self):
        holder = self.populate(self.server)
        before = self.truth(self.server)
        _, lines = self.dump(self.server)
        self.assertSameJobs(list(before.values()), [from_dump(l) for l in lines])
        after = self.truth(self.server)
        for jid in before:
            for k in ("state", "pri", "reserves", "releases", "buries", "kicks"):
                self.assertEqual(before[jid][k], after[jid][k], (jid, k))
        st = stats_of(self.client(), "stats")
        self.assertEqual(st["total-jobs"], str(len(before) + 800))  # no probe put
        held = [jid for jid, j in after.items() if j["state"] == "reserved"][0]
        self.assertEqual(holder.cmd("touch %d" % held), b"TOUCHED\r\n")

    def test_hand_written_lines(self):
        lines = (b'{"body":"plain"}\n\n'
                 b'{"tube":"hw","body":"later","delay":30,"pri":5}\n'
                 b'{"tube":"hw","body64":"AP8=","state":"buried","ttr":9}\n')
        self.assertEqual(self.load(self.server, lines),
                         "loaded 3 jobs (1 ready, 1 delayed, 1 buried)\n")
        got = sorted(self.truth(self.server).values(), key=lambda j: j["body"])
        self.assertEqual([(j["tube"], j["state"], j["pri"], j["ttr"], j["body"]) for j in got],
                         [("hw", "buried", "1024", "9", b"\x00\xff"),
                          ("hw", "delayed", "5", "60", b"later"),
                          ("default", "ready", "1024", "60", b"plain")])

    def test_extensions_survive_into_stalkd_and_are_dropped_into_beanstalkd(self):
        c = self.client()

        def put_ext(body, opts, tube="ext"):
            c.cmd("use " + tube)
            c.send(b"put-ext 3 0 60 %d %s\r\n%s\r\n" % (len(body), opts, body))
            return int(c.read_line().split()[1])
        a = put_ext(b"a", b"tries=3 ttl=1000 key=k-1 attr.x=1 attr.name=value")
        b = put_ext(b"b", b"tries=2")
        # a dead letter: one try, used by a reservation that timed out
        d = put_ext(b"dead", b"tries=1")
        c.cmd("watch ext")
        self.assertTrue(c.cmd("reserve-job %d" % b).startswith(b"RESERVED"))
        self.assertEqual(c.cmd("bury %d 9" % b), b"BURIED\r\n")
        self.assertTrue(c.cmd("reserve-job %d" % d).startswith(b"RESERVED"))
        self.assertEqual(c.cmd("release %d 3 0" % d), b"RELEASED\r\n")  # out of tries: buried
        src = self.truth(self.server)
        raw, lines = self.dump(self.server)
        by_body = {body_of(l): l for l in lines}
        self.assertEqual((by_body[b"a"]["tries"], by_body[b"a"]["key"], by_body[b"a"]["attrs"]),
                         (3, "k-1", {"x": "1", "name": "value"}))
        self.assertEqual((by_body[b"b"]["state"], by_body[b"b"]["tries"]), ("buried", 1))
        self.assertEqual((by_body[b"dead"]["state"], by_body[b"dead"]["tries"]), ("buried", 0))
        other = self.start_server(binary=STALKD_BIN, args=())
        self.assertEqual(self.load(other, raw), "loaded 3 jobs (1 ready, 2 buried)\n")
        got = {j["body"]: j for j in self.truth(other).values()}
        for body, jid in ((b"a", a), (b"b", b), (b"dead", d)):
            want = src[jid]
            for k in ("state", "pri", "ttr", "tries-left", "key", "attr.x", "attr.name"):
                self.assertEqual(got[body].get(k), want.get(k), (body, k))
        self.assertLessEqual(abs(int(got[b"a"]["ttl-left"]) - int(src[a]["ttl-left"])),
                             self.delay_slack())
        # loading again: the key is taken, so that job is skipped and said so
        r = self.stalk("--json", "load", input=raw, server=other)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["key_exists"], 1)
        # into beanstalkd: the jobs, without what beanstalkd does not have
        bs = self.start_server(binary=BEANSTALKD_BIN, args=())
        r = self.stalk("load", input=raw, server=bs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"3 jobs were loaded without their tries, ttl, key or attributes", r.stderr)
        self.assertEqual(sorted(j["body"] for j in self.truth(bs).values()),
                         [b"a", b"b", b"dead"])


if __name__ == "__main__":
    unittest.main()

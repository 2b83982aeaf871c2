"""Black-box tests: stats, stats-tube and stats-job YAML (exact key order, quoting, counters).

Run: python3 -m unittest -v tests/blackbox/test_stats.py
"""
import os
import re
import shutil
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import (is_beanstalkd, nth_id, parse_yaml, wait_stat, wait_tube_stat,  # noqa: E402
                       yaml_keys)

STATS_KEYS = [
    "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-peek", "cmd-peek-ready",
    "cmd-peek-delayed", "cmd-peek-buried", "cmd-reserve", "cmd-reserve-with-timeout",
    "cmd-delete", "cmd-release", "cmd-use", "cmd-watch", "cmd-ignore", "cmd-bury", "cmd-kick",
    "cmd-touch", "cmd-stats", "cmd-stats-job", "cmd-stats-tube", "cmd-list-tubes",
    "cmd-list-tube-used", "cmd-list-tubes-watched", "cmd-pause-tube", "job-timeouts",
    "total-jobs", "max-job-size", "current-tubes", "current-connections", "current-producers",
    "current-workers", "current-waiting", "total-connections", "pid", "version",
    "rusage-utime", "rusage-stime", "uptime", "binlog-oldest-index", "binlog-current-index",
    "binlog-records-migrated", "binlog-records-written", "binlog-max-size", "draining", "id",
    "hostname", "os", "platform",
]

STATS_TUBE_KEYS = [
    "name", "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "total-jobs", "current-using",
    "current-watching", "current-waiting", "cmd-delete", "cmd-pause-tube", "pause",
    "pause-time-left",
]

STATS_JOB_KEYS = [
    "id", "tube", "state", "pri", "age", "delay", "ttr", "time-left", "file", "reserves",
    "timeouts", "releases", "buries", "kicks",
]

CMD_KEYS = [k for k in STATS_KEYS if k.startswith("cmd-")]
# stalkd's own keys, which stats-ext and stats-tube-ext add after all of beanstalkd's: the
# memory cap's, then the lifecycle extensions' (docs/EXTENSIONS.md). Plain stats and
# stats-tube never show them. test_extensions.py uses these lists too.
MEMORY_STATS_KEYS = ["memory-used", "memory-limit"]
EXTENSION_STATS_KEYS = ["total-expired-jobs", "total-tries-exhausted", "cmd-put-ext",
                        "cmd-put-many", "cmd-reserve-ext", "cmd-delete-many", "cmd-purge",
                        "cmd-list-jobs", "cmd-tube-tries"]
STALKD_STATS_KEYS = MEMORY_STATS_KEYS + EXTENSION_STATS_KEYS
EXTENSION_TUBE_KEYS = ["total-expired-jobs", "total-tries-exhausted", "default-tries"]


BEANSTALKD_BIN = os.environ.get("BEANSTALKD_BIN", "/usr/bin/beanstalkd")


def expected_stats_keys():
    return STATS_KEYS


class ServerCase(beanstalk.ServerCase):
    """beanstalk.ServerCase plus helpers only this file uses."""

    def tube_stats(self, c, name):
        return beanstalk.stats_of(c, "stats-tube " + name)

    def assertCounters(self, stats, expected):
        got = {k: stats[k] for k in expected}
        self.assertEqual(got, {k: str(v) for k, v in expected.items()})


class TestKeyOrder(ServerCase):
    def test_stats_keys(self):
        c = self.client()
        self.assertEqual(yaml_keys(c.cmd("stats")), expected_stats_keys())

    def test_stats_tube_keys(self):
        c = self.client()
        self.assertEqual(yaml_keys(c.cmd("stats-tube default")), STATS_TUBE_KEYS)

    def test_stats_job_keys(self):
        c = self.client()
        c.put("x")
        self.assertEqual(yaml_keys(c.cmd("stats-job %d" % nth_id(1))), STATS_JOB_KEYS)

    def test_stats_job_exact_bytes_fresh_job(self):
        c = self.client()
        c.put("hello", pri=7, ttr=30)
        tube = b"default" if is_beanstalkd() else b'"default"'
        body = (b"---\nid: %d\ntube: " % nth_id(1) + tube + b"\nstate: ready\npri: 7\nage: 0\ndelay: 0\n"
                b"ttr: 30\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\n"
                b"buries: 0\nkicks: 0\n")
        self.assertEqual(c.cmd("stats-job %d" % nth_id(1)), b"OK %d\r\n%s\r\n" % (len(body), body))

    def test_stats_tube_exact_bytes_fresh_tube(self):
        c = self.client()
        c.cmd("use fresh")
        name = b"fresh" if is_beanstalkd() else b'"fresh"'
        body = (b"---\nname: " + name + b"\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\n"
                b"current-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n"
                b"total-jobs: 0\ncurrent-using: 1\ncurrent-watching: 0\ncurrent-waiting: 0\n"
                b"cmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n")
        self.assertEqual(c.cmd("stats-tube fresh"), b"OK %d\r\n%s\r\n" % (len(body), body))


class TestStatsValues(ServerCase):
    def test_static_values(self):
        c = self.client()
        st = self.stats(c)
        self.assertEqual(st["pid"], str(self.server.pid))
        self.assertEqual(st["max-job-size"], "65535")
        self.assertEqual(st["draining"], "false")
        self.assertRegex(st["id"], r"^[0-9a-f]{16}$")
        self.assertRegex(st["rusage-utime"], r"^\d+\.\d{6}$")
        self.assertRegex(st["rusage-stime"], r"^\d+\.\d{6}$")
        self.assertRegex(st["uptime"], r"^\d+$")
        self.assertRegex(st["version"], r'^"[^"\s]+"$')
        for k in ("binlog-oldest-index", "binlog-current-index", "binlog-records-migrated",
                  "binlog-records-written"):
            self.assertEqual(st[k], "0", k)
        self.assertEqual(st["binlog-max-size"], "10485760")
        self.assertEqual(st["current-tubes"], "1")
        for k in CMD_KEYS:
            self.assertEqual(st[k], "1" if k == "cmd-stats" else "0", k)

    def test_id_is_stable_within_process(self):
        c = self.client()
        self.assertEqual(self.stats(c)["id"], self.stats(c)["id"])

    def test_uname_values_unquoted_1_12(self):
        if not is_beanstalkd():
            self.skipTest("beanstalkd 1.12 quoting (stalkd follows 1.13)")
        c = self.client()
        st = self.stats(c)
        u = os.uname()
        self.assertEqual(st["hostname"], u.nodename)
        self.assertEqual(st["os"], u.version)
        self.assertEqual(st["platform"], u.machine)
        self.assertEqual(self.tube_stats(c, "default")["name"], "default")
        c.put("x")
        self.assertEqual(self.job_stats(c, nth_id(1))["tube"], "default")

    def test_yaml_quoting_1_13(self):
        if is_beanstalkd():
            self.skipTest("1.13 quotes hostname/os/platform/name/tube; beanstalkd 1.12 does not")
        c = self.client()
        raw = c.cmd("stats")
        u = os.uname()
        self.assertRegex(raw, rb'\nversion: "[^"\n]+"\n')
        self.assertIn(b'\nhostname: "' + u.nodename.encode() + b'"\n', raw)
        self.assertIn(b'\nos: "' + u.version.encode() + b'"\n', raw)
        self.assertIn(b'\nplatform: "' + u.machine.encode() + b'"\n', raw)
        self.assertIn(b'\nname: "default"\n', c.cmd("stats-tube default"))
        c.cmd("use q.1")
        c.put("x")
        self.assertIn(b'\ntube: "q.1"\n', c.cmd("stats-job %d" % nth_id(1, "q.1")))
        self.assertIn(b'\nname: "q.1"\n', c.cmd("stats-tube q.1"))

    def test_version_matches_dash_v(self):
        import subprocess
        out = subprocess.run([self.server.binary, "-v"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=10).stdout.decode()
        c = self.client()
        version = self.stats(c)["version"].strip('"')
        self.assertTrue(out.strip().endswith(" " + version), (out, version))


@beanstalk.embedded_store_only("-b (the binlog) is refused with a Redis store")
class TestBinlogMaxSize(unittest.TestCase):
    """binlog-max-size is -s as given, as beanstalkd shows it; the files are that size
    rounded up to a multiple of 4096."""

    def check(self, size, file_size, with_binlog):
        d = tempfile.mkdtemp(prefix="stalkd_stats_")
        self.addCleanup(shutil.rmtree, d, True)
        args = ("-s", str(size)) + (("-b", d) if with_binlog else ())
        srv = beanstalk.Server(args=args)
        self.addCleanup(srv.stop)
        c = srv.connect()
        self.addCleanup(c.close)
        self.assertEqual(beanstalk.stats_of(c, "stats")["binlog-max-size"], str(size))
        if with_binlog:
            files = [f for f in os.listdir(d) if f.startswith("binlog.")]
            self.assertEqual(len(files), 1, files)
            self.assertEqual(os.path.getsize(os.path.join(d, files[0])), file_size)

    def test_value_given_not_rounded(self):
        self.check(123456, 126976, True)
        self.check(123456, None, False)
        self.check(1, 4096, True)
        self.check(4096, 4096, True)
        self.check(8193, 12288, True)


class TestCommandCounters(ServerCase):
    def test_each_command_counts_once(self):
        c = self.client()
        c.put("a")                     # 1
        c.put("b", delay=100)          # 2
        c.cmd("peek %d" % nth_id(1))
        c.cmd("peek-ready")
        c.cmd("peek-delayed")
        c.cmd("peek-buried")
        c.cmd("reserve")               # gets 1
        c.cmd("reserve-with-timeout 0")  # TIMED_OUT
        c.cmd("touch %d" % nth_id(1))
        c.cmd("release %d 0 0" % nth_id(1))
        c.cmd("reserve-with-timeout 0")  # gets 1
        c.cmd("bury %d 0" % nth_id(1))
        c.cmd("kick 1")
        c.cmd("delete %d" % nth_id(1))
        c.cmd("use t")
        c.cmd("watch t")
        c.cmd("ignore t")
        c.cmd("stats-job %d" % nth_id(2))
        c.cmd("stats-tube default")
        c.cmd("list-tubes")
        c.cmd("list-tube-used")
        c.cmd("list-tubes-watched")
        c.cmd("pause-tube default 0")
        st = self.stats(c)
        expected = {k: 1 for k in CMD_KEYS}
        expected.update({"cmd-put": 2, "cmd-stats": 1, "cmd-reserve-with-timeout": 2})
        self.assertCounters(st, expected)
        self.assertEqual(st["total-jobs"], "2")

    def test_not_found_replies_still_count(self):
        c = self.client()
        for cmd in ("peek %d" % nth_id(9), "peek-ready", "peek-delayed", "peek-buried", "delete %d" % nth_id(9),
                    "release %d 0 0" % nth_id(9), "bury %d 0" % nth_id(9), "touch %d" % nth_id(9), "stats-job %d" % nth_id(9),
                    "stats-tube nosuch", "pause-tube nosuch 1"):
            self.assertEqual(c.cmd(cmd), b"NOT_FOUND\r\n", cmd)
        self.assertEqual(c.cmd("ignore default"), b"NOT_IGNORED\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"TIMED_OUT\r\n")
        st = self.stats(c)
        expected = {k: 1 for k in ("cmd-peek", "cmd-peek-ready", "cmd-peek-delayed",
                                   "cmd-peek-buried", "cmd-delete", "cmd-release", "cmd-bury",
                                   "cmd-touch", "cmd-stats-job", "cmd-stats-tube",
                                   "cmd-pause-tube", "cmd-ignore", "cmd-reserve-with-timeout",
                                   "cmd-stats")}
        expected.update({"cmd-reserve": 0, "cmd-kick": 0, "cmd-put": 0})
        self.assertCounters(st, expected)

    def test_bad_format_and_unknown_do_not_count(self):
        c = self.client()
        for cmd in ("put 0 0 0", "peek x", "peek-ready x", "peek-delayed x", "peek-buried x",
                    "reserve x", "reserve-with-timeout 99999999999999999999", "delete x",
                    "release %d x 0" % nth_id(1), "bury %d" % nth_id(1), "kick x", "touch x", "use -x", "watch -x",
                    "ignore -x", "stats x", "stats-job x", "stats-tube -x", "list-tubes x",
                    "list-tube-used x", "list-tubes-watched x", "pause-tube default x",
                    "kick-job x", "reserve-job x"):
            self.assertEqual(c.cmd(cmd), b"BAD_FORMAT\r\n", cmd)
        self.assertEqual(c.cmd("nosuchcommand"), b"UNKNOWN_COMMAND\r\n")
        st = self.stats(c)
        expected = {k: 0 for k in CMD_KEYS}
        expected["cmd-stats"] = 1
        self.assertCounters(st, expected)

    def test_put_errors_count_as_put_but_create_no_job(self):
        c = self.client()
        self.assertEqual(c.cmd(b"put 0 0 1 70000\r\n" + b"x" * 70000 + b"\r\n"),
                         b"JOB_TOO_BIG\r\n")
        c.send(b"put 0 0 1 3\r\nabcXY")
        self.assertEqual(c.read_reply(), b"EXPECTED_CRLF\r\n")
        st = self.stats(c)
        self.assertEqual(st["cmd-put"], "2")
        self.assertEqual(st["total-jobs"], "0")
        self.assertEqual(st["current-jobs-ready"], "0")
        self.assertEqual(self.tube_stats(c, "default")["total-jobs"], "0")

    def test_reserve_job_and_kick_job_have_no_counter(self):
        # beanstalkd counts reserve-job and kick-job internally but prints no key for them
        c = self.client()
        c.put("a")
        c.put("b", delay=100)
        c.cmd("reserve-job %d" % nth_id(1))
        c.cmd("kick-job %d" % nth_id(2))
        st = self.stats(c)
        self.assertEqual(yaml_keys(c.cmd("stats")), expected_stats_keys())
        self.assertCounters(st, {"cmd-reserve": 0, "cmd-reserve-with-timeout": 0,
                                 "cmd-kick": 0, "cmd-put": 2})
        self.assertEqual(st["current-workers"], "1")

    def test_cmd_stats_counts_itself(self):
        c = self.client()
        self.assertEqual(self.stats(c)["cmd-stats"], "1")
        self.assertEqual(self.stats(c)["cmd-stats"], "2")


class TestJobCounts(ServerCase):
    def test_state_counts_and_urgent(self):
        c = self.client()
        c.put("u", pri=1023)                 # 1 urgent ready
        c.put("n", pri=1024)                 # 2 ready, not urgent
        c.put("d", pri=0, delay=100)         # 3 delayed
        c.put("r", pri=0)                    # 4 -> reserved
        c.put("b", pri=0)                    # 5 -> buried
        c.cmd("reserve-job %d" % nth_id(4))
        c.cmd("reserve-job %d" % nth_id(5))
        c.cmd("bury %d 0" % nth_id(5))
        st = self.stats(c)
        self.assertCounters(st, {"current-jobs-urgent": 1, "current-jobs-ready": 2,
                                 "current-jobs-reserved": 1, "current-jobs-delayed": 1,
                                 "current-jobs-buried": 1, "total-jobs": 5})
        ts = self.tube_stats(c, "default")
        self.assertCounters(ts, {"current-jobs-urgent": 1, "current-jobs-ready": 2,
                                 "current-jobs-reserved": 1, "current-jobs-delayed": 1,
                                 "current-jobs-buried": 1, "total-jobs": 5})

    def test_urgent_follows_priority_changes(self):
        c = self.client()
        c.put("x", pri=5000)
        self.assertEqual(self.stats(c)["current-jobs-urgent"], "0")
        c.cmd("reserve")
        c.cmd("release %d 10 0" % nth_id(1))
        self.assertEqual(self.stats(c)["current-jobs-urgent"], "1")
        c.cmd("reserve")
        self.assertEqual(self.stats(c)["current-jobs-urgent"], "0")
        c.cmd("bury %d 0" % nth_id(1))
        self.assertEqual(self.stats(c)["current-jobs-urgent"], "0")
        c.cmd("kick 1")
        self.assertEqual(self.stats(c)["current-jobs-urgent"], "1")

    def test_per_tube_totals_and_deletes(self):
        c = self.client()
        first = c.put_id("a", tube="t1")
        c.put("b", tube="t1")
        last = c.put_id("c", tube="t2")
        c.cmd("delete %d" % first)
        c.cmd("delete %d" % last)
        c.cmd("delete %d" % last)  # NOT_FOUND: not counted per tube
        c.cmd("pause-tube t1 0")
        c.cmd("pause-tube t1 0")
        t1, t2 = self.tube_stats(c, "t1"), self.tube_stats(c, "t2")
        self.assertCounters(t1, {"total-jobs": 2, "cmd-delete": 1, "cmd-pause-tube": 2,
                                 "current-jobs-ready": 1})
        self.assertCounters(t2, {"total-jobs": 1, "cmd-delete": 1, "cmd-pause-tube": 0,
                                 "current-jobs-ready": 0})
        st = self.stats(c)
        self.assertCounters(st, {"cmd-delete": 3, "total-jobs": 3, "cmd-pause-tube": 2})


class TestConnectionCounts(ServerCase):
    def test_connections_producers_workers(self):
        a = self.client()
        b = self.client()
        w = self.client()
        # the server's readiness probe is one earlier connection
        st = wait_stat(a, "current-connections", 3)
        self.assertTrue(st, "current-connections never became 3")
        self.assertCounters(st, {"current-producers": 0, "current-workers": 0,
                                 "current-waiting": 0, "total-connections": 4})
        b.put("x")
        w.cmd("reserve-with-timeout 0")
        self.assertCounters(self.stats(a), {"current-producers": 1, "current-workers": 1})
        self.assertEqual(a.cmd("reserve-job %d" % nth_id(1)), b"NOT_FOUND\r\n")  # w holds it
        self.assertCounters(self.stats(a), {"current-producers": 1, "current-workers": 1})
        b.put("y")
        self.assertEqual(a.cmd("reserve-job %d" % nth_id(2)), b"RESERVED %d 1\r\ny\r\n" % nth_id(2))
        self.assertCounters(self.stats(a), {"current-producers": 1, "current-workers": 2})
        b.close()
        w.close()
        st = wait_stat(a, "current-connections", 1)
        self.assertTrue(st, "closed connections still counted")
        self.assertCounters(st, {"current-producers": 0, "current-workers": 1,
                                 "total-connections": 4})

    def test_producer_counted_even_if_put_fails_expected_crlf(self):
        a = self.client()
        a.send(b"put 0 0 1 1\r\nxYZ")
        self.assertEqual(a.read_reply(), b"EXPECTED_CRLF\r\n")
        self.assertEqual(self.stats(a)["current-producers"], "1")

    def test_using_watching_waiting(self):
        a, b, c = self.client(), self.client(), self.client()
        a.cmd("use t")
        b.cmd("watch t")
        c.cmd("watch t")
        c.cmd("ignore default")
        c.send("reserve\r\n")
        ts = wait_tube_stat(a, "t", "current-waiting", 1)
        self.assertTrue(ts, "waiting reserve not counted")
        self.assertCounters(ts, {"current-using": 1, "current-watching": 2,
                                 "current-waiting": 1})
        d = self.tube_stats(a, "default")
        self.assertCounters(d, {"current-using": 2, "current-watching": 2,
                                "current-waiting": 0})
        st = self.stats(a)
        self.assertCounters(st, {"current-waiting": 1, "current-workers": 1,
                                 "current-tubes": 2})
        a.put("x")
        self.assertEqual(c.read_reply(), b"RESERVED %d 1\r\nx\r\n" % nth_id(1, "t"))
        self.assertEqual(self.tube_stats(a, "t")["current-waiting"], "0")
        self.assertEqual(self.stats(a)["current-waiting"], "0")


class TestJobStatsValues(ServerCase):
    def test_lifecycle_counters(self):
        c = self.client()
        c.put("x", pri=3, ttr=100)
        c.cmd("reserve")
        st = self.job_stats(c, nth_id(1))
        self.assertEqual(st["state"], "reserved")
        self.assertIn(st["time-left"], ("99", "100"))
        self.assertEqual(st["reserves"], "1")
        c.cmd("release %d 4 0" % nth_id(1))
        c.cmd("reserve")
        c.cmd("bury %d 5" % nth_id(1))
        c.cmd("kick 1")
        st = self.job_stats(c, nth_id(1))
        self.assertEqual(st["state"], "ready")
        self.assertEqual(st["time-left"], "0")
        self.assertCounters(st, {"pri": 5, "reserves": 2, "releases": 1, "buries": 1,
                                 "kicks": 1, "timeouts": 0, "file": 0, "ttr": 100,
                                 "delay": 0})

    def test_delayed_time_left(self):
        c = self.client()
        c.put("x", delay=50)
        st = self.job_stats(c, nth_id(1))
        self.assertEqual(st["state"], "delayed")
        self.assertEqual(st["delay"], "50")
        self.assertIn(st["time-left"], ("49", "50"))

    def test_release_delay_sets_delay(self):
        c = self.client()
        c.put("x")
        c.cmd("reserve")
        c.cmd("release %d 0 30" % nth_id(1))
        st = self.job_stats(c, nth_id(1))
        self.assertEqual(st["delay"], "30")
        self.assertIn(st["time-left"], ("29", "30"))

    def test_age_is_non_negative_integer(self):
        c = self.client()
        c.put("x")
        self.assertRegex(self.job_stats(c, nth_id(1))["age"], r"^\d+$")


class TestMaxJobSizeStat(ServerCase):
    server_args = ("-z", "1234")

    def test_max_job_size_reported(self):
        c = self.client()
        self.assertEqual(self.stats(c)["max-job-size"], "1234")


class TestExtendedStats(ServerCase):
    """stats-ext, stats-tube-ext and stats-job-ext: beanstalkd's keys, then stalkd's own
    (docs/EXTENSIONS.md). beanstalkd answers each BAD_FORMAT (its "stats" with something
    after it), which is how stalk tells the two apart."""

    def setUp(self):
        super().setUp()
        self.c = self.client()

    def test_beanstalkd_refuses_them(self):
        if not is_beanstalkd():
            self.skipTest("what beanstalkd answers")
        for line in ("stats-ext", "stats-tube-ext default", "stats-job-ext 1"):
            self.assertEqual(self.c.cmd(line), b"BAD_FORMAT\r\n", line)

    def stalkd_only(self):
        if is_beanstalkd():
            self.skipTest("stalkd's extension")

    def test_stats_ext_keys(self):
        self.stalkd_only()
        self.assertEqual(yaml_keys(self.c.cmd("stats-ext")), STATS_KEYS + STALKD_STATS_KEYS)

    def test_stats_tube_ext_keys(self):
        self.stalkd_only()
        self.assertEqual(yaml_keys(self.c.cmd("stats-tube-ext default")),
                         STATS_TUBE_KEYS + EXTENSION_TUBE_KEYS)
        self.assertEqual(self.c.cmd("tube-tries default 3"), b"TUBE-TRIES 3\r\n")
        ext = beanstalk.stats_of(self.c, "stats-tube-ext default")
        self.assertEqual(ext["default-tries"], "3")
        self.assertEqual(yaml_keys(self.c.cmd("stats-tube default")), STATS_TUBE_KEYS)

    def test_stats_job_ext_shows_the_extension_fields(self):
        self.stalkd_only()
        self.c.send("put-ext 0 0 60 1 tries=3 ttl=1000 key=k1 attr.A=b\r\nx\r\n")
        jid = beanstalk.inserted_id(self.c.read_reply())
        self.assertEqual(yaml_keys(self.c.cmd("stats-job %d" % jid)), STATS_JOB_KEYS)
        self.assertEqual(yaml_keys(self.c.cmd("stats-job-ext %d" % jid)),
                         STATS_JOB_KEYS + ["tries-left", "ttl-left", "key", "attr.A"])
        ext = beanstalk.stats_of(self.c, "stats-job-ext %d" % jid)
        self.assertEqual((ext["tries-left"], ext["key"], ext["attr.A"]), ("3", '"k1"', '"b"'))
        # A job put by `put` into a tube with default tries has tries too: shown by
        # stats-job-ext only.
        self.c.cmd("tube-tries default 2")
        pid = self.c.put_id("y")
        self.assertEqual(yaml_keys(self.c.cmd("stats-job %d" % pid)), STATS_JOB_KEYS)
        self.assertEqual(yaml_keys(self.c.cmd("stats-job-ext %d" % pid)),
                         STATS_JOB_KEYS + ["tries-left"])

    def test_plain_job_has_beanstalkd_keys_only(self):
        self.stalkd_only()
        jid = self.c.put_id("x")
        self.assertEqual(yaml_keys(self.c.cmd("stats-job-ext %d" % jid)), STATS_JOB_KEYS)

    def test_values_as_stats_and_counted_as_stats(self):
        self.stalkd_only()
        self.c.send("put-ext 0 0 60 1 tries=1\r\nx\r\n")
        self.c.read_reply()
        plain = self.stats(self.c)
        ext = beanstalk.stats_of(self.c, "stats-ext")
        self.assertEqual(ext["cmd-stats"], "2")  # counted as the stats it extends
        self.assertEqual(ext["cmd-put-ext"], "1")
        for k in STATS_KEYS:
            if k not in ("cmd-stats", "rusage-utime", "rusage-stime", "uptime"):
                self.assertEqual(ext[k], plain[k], k)
        self.assertEqual(beanstalk.stats_of(self.c, "stats-tube-ext default")["total-jobs"], "1")
        self.assertEqual(self.stats(self.c)["cmd-stats-tube"], "1")
        jid = nth_id(1)
        beanstalk.stats_of(self.c, "stats-job-ext %d" % jid)
        self.assertEqual(self.stats(self.c)["cmd-stats-job"], "1")

    def test_not_found_and_bad_format(self):
        self.stalkd_only()
        self.assertEqual(self.c.cmd("stats-tube-ext nosuch"), b"NOT_FOUND\r\n")
        self.assertEqual(self.c.cmd("stats-job-ext 999999999"), b"NOT_FOUND\r\n")
        for line in ("stats-ext x", "stats-ext ", "stats-tube-ext", "stats-tube-ext -x",
                     "stats-job-ext", "stats-job-ext 1 ", "stats-job-ext x", "stats-extx"):
            self.assertEqual(self.c.cmd(line), b"BAD_FORMAT\r\n", line)

    def test_pipelined_replies_keep_their_kind(self):
        # On the Redis stores these replies arrive late, in order, behind each other.
        self.stalkd_only()
        jid = self.c.put_id("x")
        lines = ["stats-ext", "stats", "stats-tube-ext default", "stats-tube default",
                 "stats-job-ext %d" % jid, "stats-job %d" % jid] * 3
        self.c.send("".join(line + "\r\n" for line in lines))
        want = {"stats-ext": STATS_KEYS + STALKD_STATS_KEYS, "stats": STATS_KEYS,
                "stats-tube-ext": STATS_TUBE_KEYS + EXTENSION_TUBE_KEYS,
                "stats-tube": STATS_TUBE_KEYS, "stats-job-ext": STATS_JOB_KEYS,
                "stats-job": STATS_JOB_KEYS}
        for line in lines:
            self.assertEqual(yaml_keys(self.c.read_reply()), want[line.split(" ")[0]], line)


def probe_running(srv):
    """connect and close, then stats on a new connection: (current, total connections)."""
    srv.connect().close()
    c = srv.connect()
    try:
        st = beanstalk.stats_of(c, "stats")
    finally:
        c.close()
    return st["current-connections"], st["total-connections"]


@unittest.skipUnless(os.access(BEANSTALKD_BIN, os.X_OK), "needs Debian's beanstalkd")
@unittest.skipIf(is_beanstalkd(), "compares stalkd with beanstalkd")
class TestSameAsBeanstalkd(unittest.TestCase):
    """The same beanstalkd commands sent to stalkd and to Debian's beanstalkd: plain stats,
    stats-tube and stats-job answer the same keys in the same order, and the same counts;
    a connection its client has closed is no longer counted."""

    def setUp(self):
        self.servers = [beanstalk.Server(binary=BEANSTALKD_BIN), beanstalk.Server()]
        for srv in self.servers:
            self.addCleanup(srv.stop)

    def each(self, fn):
        """fn(server) for beanstalkd and stalkd: the pair of results."""
        return [fn(srv) for srv in self.servers]

    def test_closed_connections_not_counted(self):
        # Connections opened and closed, then one that asks stats, all while the server is
        # stopped (as when a harness probes a server still starting, or a busy one): it
        # then finds them all at once. beanstalkd handles each close before the command
        # that came after it. (The readiness probe of beanstalk.Server was one more.)
        def probe(srv):
            beanstalk.stop_process(srv.pid)
            try:
                for _ in range(3):
                    srv.connect().close()
                c = srv.connect()
                c.send("stats\r\n")
            finally:
                srv.signal(signal.SIGCONT)
            try:
                st = beanstalk.parse_yaml(c.read_reply())
            finally:
                c.close()
            return st["current-connections"], st["total-connections"]
        ref, got = self.each(probe)
        self.assertEqual(ref, ("1", "5"))
        self.assertEqual(got, ref)
        # And with the server running.
        ref, got = self.each(lambda srv: probe_running(srv))
        self.assertEqual(got, ref)

    def test_keys_and_counts(self):
        def script(srv):
            c = srv.connect()
            w = srv.connect()
            try:
                c.cmd("use t")
                ids = [c.put_id("ready"), c.put_id("delayed", delay=1000),
                       c.put_id("reserved", pri=5), c.put_id("buried", pri=2000)]
                c.cmd("watch t")
                c.cmd("reserve-job %d" % ids[2])
                c.cmd("reserve-job %d" % ids[3])
                c.cmd("bury %d 2000" % ids[3])
                c.cmd("pause-tube t 1000")
                w.cmd("watch t")
                out = []
                for line in ["stats-job %d" % i for i in ids] + [
                        "stats-tube t", "stats-tube default", "stats"]:
                    r = c.cmd(line)
                    out.append((line.split(" ")[0], yaml_keys(r), beanstalk.parse_yaml(r)))
                return out
            finally:
                c.close()
                w.close()
        ref, got = self.each(script)
        volatile = {"stats-job": {"id", "age", "time-left", "tube"},
                    "stats-tube": {"name", "pause-time-left"},
                    "stats": {"pid", "version", "rusage-utime", "rusage-stime", "uptime", "id",
                              "hostname", "os", "platform"}}
        for (verb, rkeys, rvals), (_, gkeys, gvals) in zip(ref, got):
            self.assertEqual(gkeys, rkeys, verb)
            for k in rkeys:
                if k not in volatile[verb]:
                    self.assertEqual(gvals[k], rvals[k], (verb, k))


if __name__ == "__main__":
    unittest.main()

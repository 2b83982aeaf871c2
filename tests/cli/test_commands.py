"""stalk's commands against a real server: stalkd, and (the *Beanstalkd classes) Debian's
beanstalkd 1.12, for every command beanstalkd supports. Each command's effect is checked with
a raw protocol client, its --json output parsed, its exit code checked; every command has
--help; usage, connection, server and input errors have their exit codes.

Run: STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/cli/test_commands.py
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clicase import (BEANSTALKD_BIN, CONNECTION, INPUT, NOT_FOUND, SERVER, STALK_BIN,  # noqa: E402
                     USAGE, Server, StalkCase, body_of, stats_of)

COMMANDS = ("put", "reserve", "peek", "delete", "kick", "bury", "stats", "stats-tube",
            "stats-job", "tubes", "pause", "purge", "tail", "top", "dump", "load")
ALL_BYTES = bytes(range(256))


class Commands:
    """The tests, run once per server binary by the classes at the end."""

    def put_json(self, *args, **kw):
        [r] = self.json_lines("put", *args, **kw)
        return r["id"]

    def stats_job(self, jid):
        return {k: v.strip('"') for k, v in stats_of(self.client(), "stats-job %d" % jid).items()}

    # ---- put and peek

    def test_put_words_and_peek(self):
        self.assertEqual(self.ok("put", "hello", "world"), "inserted 1\n")
        [job] = self.json_lines("peek", "1")
        self.assertEqual((job["id"], job["tube"], job["state"], job["pri"], job["ttr"],
                          job["delay"]), (1, "default", "ready", 1024, 60, 0))
        self.assertEqual(body_of(job), b"hello world")
        human = self.ok("peek", "1")
        self.assertEqual(human, "id 1  tube default  state ready  pri 1024  ttr 60  11 bytes\n"
                                "hello world\n")

    def test_put_options(self):
        jid = self.put_json("-t", "t.x", "-p", "7", "-d", "100", "-r", "33", "body")
        st = self.stats_job(jid)
        self.assertEqual((st["tube"], st["state"], st["pri"], st["delay"], st["ttr"]),
                         ("t.x", "delayed", "7", "100", "33"))

    def test_put_binary_from_stdin_and_peek_raw(self):
        jid = self.put_json(input=ALL_BYTES)
        r = self.stalk("peek", str(jid), "--raw")
        self.assertEqual((r.returncode, r.stdout), (0, ALL_BYTES))
        [job] = self.json_lines("peek", str(jid))
        self.assertEqual(body_of(job), ALL_BYTES)
        [job] = self.json_lines("peek", str(jid), "--text")  # not UTF-8: still base64
        self.assertEqual((body_of(job), "body" in job), (ALL_BYTES, False))
        # for people: control bytes and invalid UTF-8 escaped
        self.assertIn("\\x00\\x01", self.ok("peek", str(jid)))

    def test_put_text_body_as_json_string(self):
        jid = self.put_json("h\u00e9llo \u2713")
        [job] = self.json_lines("peek", str(jid), "--text")
        self.assertEqual(job["body"], "h\u00e9llo \u2713")

    def test_put_lines_and_file(self):
        ids = [r["id"] for r in self.json_lines("put", "-l", "-t", "lines",
                                                 input=b"one\ntwo\n\nthree")]
        self.assertEqual(len(ids), 3)
        self.assertEqual([body_of(self.json_lines("peek", str(i))[0]) for i in ids],
                         [b"one", b"two", b"three"])
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"from\r\na file\x00")
            f.flush()
            jid = self.put_json("-f", f.name)
        self.assertEqual(self.stalk("peek", jid, "--raw").stdout, b"from\r\na file\x00")

    def test_put_many_lines_pipelined(self):
        bodies = b"".join(b"job %d\n" % i for i in range(2000))
        self.assertEqual(len(self.json_lines("put", "-l", "-t", "many", input=bodies)), 2000)
        st = stats_of(self.client(), "stats-tube many")
        self.assertEqual(st["current-jobs-ready"], "2000")

    def test_peek_states(self):
        c = self.client()
        c.put("r", tube="s")
        c.put("d", delay=100)
        c.cmd("watch s")
        c.put("b")
        self.assertTrue(c.cmd("reserve-job 3").startswith(b"RESERVED"))
        self.assertEqual(c.cmd("bury 3 5"), b"BURIED\r\n")
        for state, body in (("ready", b"r"), ("delayed", b"d"), ("buried", b"b")):
            self.assertEqual(self.stalk("peek", state, "-t", "s", "--raw").stdout, body)
        self.fails(NOT_FOUND, "peek", "ready", "-t", "nothing-here")
        self.fails(NOT_FOUND, "peek", "99")
        self.fails(USAGE, "peek", "soon")

    # ---- reserve

    def test_reserve_releases_by_default(self):
        c = self.client()
        c.put("job", pri=9, tube="w")
        [job] = self.json_lines("reserve", "-t", "w")
        self.assertEqual((job["state"], job["pri"], body_of(job)), ("reserved", 9, b"job"))
        st = self.stats_job(job["id"])
        self.assertEqual((st["state"], st["pri"], st["reserves"], st["releases"]),
                         ("ready", "9", "1", "1"))

    def test_reserve_delete_bury_count(self):
        c = self.client()
        for i in range(3):
            c.put("j%d" % i, tube="w")
        out = self.stalk("reserve", "-t", "w", "--delete", "--raw", "-n", "2").stdout
        self.assertEqual(out, b"j0j1")
        self.fails(NOT_FOUND, "peek", "1")
        [job] = self.json_lines("reserve", "-t", "other", "-t", "w", "--bury")
        self.assertEqual(self.stats_job(job["id"])["state"], "buried")
        err = self.fails(NOT_FOUND, "reserve", "-t", "w")
        self.assertIn("no job ready in w", err)
        t0 = time.monotonic()
        self.fails(NOT_FOUND, "reserve", "-t", "w", "--timeout", "1")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.fails(USAGE, "reserve", "--delete", "--bury")

    def test_reserve_count_gives_different_jobs_then_releases_them(self):
        self.json_lines("put", "-t", "ntest", "--lines", input=b"1\n2\n3\n")
        jobs = self.json_lines("reserve", "-t", "ntest", "-n", "3")
        self.assertEqual([body_of(j) for j in jobs], [b"1", b"2", b"3"])
        for j in jobs:
            st = self.stats_job(j["id"])
            self.assertEqual((st["state"], st["reserves"], st["releases"]), ("ready", "1", "1"))
        # fewer ready than asked: each one once, then exit 0
        self.assertEqual(len(self.json_lines("reserve", "-t", "ntest", "-n", "5")), 3)

    def test_one_is_singular(self):
        jid = self.put_json("-t", "one", "x")
        self.assertEqual(self.ok("peek", jid).splitlines()[0],
                         "id %d  tube one  state ready  pri 1024  ttr 60  1 byte" % jid)
        self.assertTrue(self.ok("peek", jid, "-t", "one").startswith("id "))
        dump = self.stalk("dump", "one")
        self.assertEqual(dump.returncode, 0, dump.stderr)
        self.assertEqual(dump.stderr, b"stalk: dumped 1 job (1 ready)\n")
        self.assertEqual(self.ok("purge", "one"), "purged 1 job from one\n")
        self.assertEqual(self.ok("load", input=dump.stdout), "loaded 1 job (1 ready)\n")
        self.assertIn(" 2 bytes", self.ok("peek", self.put_json("xy")))

    # ---- delete, kick, bury

    def test_delete(self):
        c = self.client()
        c.put("a")
        c.put("b")
        self.assertEqual(self.ok("delete", "1"), "deleted 1\n")
        r = self.stalk("--json", "delete", "2", "7")
        self.assertEqual(r.returncode, NOT_FOUND)
        self.assertEqual(json.loads(r.stdout), {"deleted": [2], "not_found": [7]})
        self.assertIn(b"job 7: not found", r.stderr)
        self.fails(USAGE, "delete")
        self.fails(USAGE, "delete", "x")

    def test_bury_and_kick(self):
        c = self.client()
        for i in range(4):
            c.put("k%d" % i, pri=20 + i, tube="k")
        self.assertEqual(self.ok("bury", "1", "2", "3"), "buried 1\nburied 2\nburied 3\n")
        self.assertEqual((self.stats_job(1)["state"], self.stats_job(1)["pri"]), ("buried", "20"))
        self.ok("bury", "4", "--pri", "3")
        self.assertEqual(self.stats_job(4)["pri"], "3")
        self.assertEqual(self.ok("kick", "-t", "k"), "kicked 1\n")
        self.assertEqual(self.json_lines("kick", "-t", "k", "2"), [{"kicked": 2}])
        self.assertEqual(self.json_lines("kick", "-t", "k", "--all"), [{"kicked": 1}])
        self.ok("bury", "2")
        r = self.stalk("--json", "kick", "--job", "2", "--job", "3")
        self.assertEqual(r.returncode, NOT_FOUND)  # 3 is ready: kick-job says NOT_FOUND
        self.assertEqual(json.loads(r.stdout), {"kicked": [2], "not_found": [3]})
        self.fails(NOT_FOUND, "bury", "99")
        # a job another client holds cannot be buried by id
        w = self.client()
        w.cmd("watch k")
        held = int(w.cmd("reserve").split()[1])
        self.fails(NOT_FOUND, "bury", held)
        self.fails(USAGE, "kick", "5", "--all")

    # ---- stats

    def test_stats(self):
        self.client().put("x")
        st = self.json_lines("stats")[0]
        self.assertEqual(st["current-jobs-ready"], 1)
        self.assertIsInstance(st["version"], str)
        self.assertIn(st["draining"], (True, False))
        self.assertIn("current-jobs-ready: 1\n", self.ok("stats"))
        self.assertEqual(self.ok("stats", "current-jobs-ready", "total-jobs"), "1\n1\n")
        self.assertEqual(self.json_lines("stats", "total-jobs"), [{"total-jobs": 1}])
        self.assertIn("no key", self.fails(NOT_FOUND, "stats", "no-such-key"))

    def test_stats_tube_and_job(self):
        self.client().put("x", tube="st", pri=3)
        [t] = self.json_lines("stats-tube", "st")
        self.assertEqual((t["name"], t["current-jobs-ready"], t["current-jobs-urgent"]),
                         ("st", 1, 1))
        self.assertIn("name: st\n", self.ok("stats-tube", "st"))
        self.assertEqual(len(self.json_lines("stats-tube", "st", "default")), 2)
        self.fails(NOT_FOUND, "stats-tube", "none")
        self.fails(USAGE, "stats-tube", "-bad")
        [j] = self.json_lines("stats-job", "1")
        self.assertEqual((j["id"], j["tube"], j["state"], j["pri"]), (1, "st", "ready", 3))
        self.assertIn("state: ready\n", self.ok("stats-job", "1"))
        self.fails(NOT_FOUND, "stats-job", "1", "5")

    def test_tubes(self):
        c = self.client()
        c.put("a", tube="one")
        c.put("b", tube="two", delay=100)
        out = self.ok("tubes").splitlines()
        self.assertEqual(out[0].split(), ["TUBE", "READY", "URGENT", "RESERVED", "DELAYED",
                                          "BURIED", "WAITING", "WATCHING", "USING", "TOTAL",
                                          "PAUSED"])
        rows = {l.split()[0]: l.split() for l in out[1:]}
        self.assertEqual(rows["one"][1], "1")
        self.assertEqual(rows["two"][4], "1")
        self.assertEqual(self.ok("tubes", "--names").split(), ["default", "one", "two"])
        # --json: one object per line, as for every command
        self.assertEqual(self.json_lines("tubes", "--names"),
                         [{"name": "default"}, {"name": "one"}, {"name": "two"}])
        full = self.json_lines("tubes")
        self.assertEqual([(t["name"], t["current-jobs-delayed"]) for t in full],
                         [("default", 0), ("one", 0), ("two", 1)])

    def test_tubes_sorted_by_name(self):
        c = self.client()
        for t in ("zeta", "Alpha", "mid", "b-2", "b-10"):
            c.put("x", tube=t)
        order = ["Alpha", "b-10", "b-2", "default", "mid", "zeta"]  # byte order
        self.assertEqual(self.ok("tubes", "--names").split(), order)
        self.assertEqual([l.split()[0] for l in self.ok("tubes").splitlines()[1:]], order)
        self.assertEqual([t["name"] for t in self.json_lines("tubes")], order)

    def test_every_json_output_is_one_object_per_line(self):
        c = self.client()
        c.put("a", tube="j")
        c.put("b", tube="j")
        for args in (("put", "-t", "j", "c"), ("put", "-t", "j", "-l", "d", "e"),
                     ("peek", "1"), ("peek", "ready", "-t", "j"), ("stats",),
                     ("stats", "total-jobs", "uptime"), ("stats-tube", "j", "default"),
                     ("stats-job", "1", "2"), ("tubes",), ("tubes", "--names"),
                     ("reserve", "-t", "j", "-n", "2"), ("delete", "5"),
                     ("kick", "-t", "j"), ("pause", "j", "0"), ("top", "-b"),
                     ("tail", "j", "-e", "-n", "2"), ("dump",), ("purge", "j", "buried")):
            with self.subTest(args=args):
                lines = self.ok("--json", *args).splitlines()
                self.assertTrue(lines)
                for line in lines:
                    self.assertIsInstance(json.loads(line), dict, line)

    def test_pause(self):
        self.client().put("p", tube="pz")
        self.assertEqual(self.ok("pause", "pz", "100"), "paused pz for 100 s\n")
        st = stats_of(self.client(), "stats-tube pz")
        self.assertEqual(st["pause"], "100")
        self.assertEqual(self.json_lines("pause", "pz", "0"), [{"tube": "pz", "pause": 0}])
        self.assertEqual(stats_of(self.client(), "stats-tube pz")["pause"], "0")
        self.fails(NOT_FOUND, "pause", "nope", "1")
        self.fails(USAGE, "pause", "pz")

    # ---- purge

    def test_purge_leaves_reserved_jobs(self):
        c = self.client()
        for i in range(5):
            c.put("r%d" % i, tube="pg")
        c.put("d", tube="pg", delay=100)
        c.put("b", tube="pg")
        c.cmd("watch pg")
        c.cmd("ignore default")
        held = int(c.cmd("reserve").split()[1])  # this client holds one ready job
        jid = int(c.put("b2", tube="pg").split()[1])
        self.assertTrue(c.cmd("reserve-job %d" % jid).startswith(b"RESERVED"))
        self.assertEqual(c.cmd("bury %d 0" % jid), b"BURIED\r\n")
        self.client().put("other", tube="keep")
        self.assertEqual(self.ok("purge", "pg", "buried"), "purged 1 job from pg\n")
        r = self.stalk("--json", "purge", "pg")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {"tube": "pg", "purged": 6, "reserved": 1})
        self.assertIn(b"1 reserved job left in pg", r.stderr)
        st = stats_of(self.client(), "stats-tube pg")
        self.assertEqual([st["current-jobs-" + s] for s in ("ready", "delayed", "buried",
                                                            "reserved")], ["0", "0", "0", "1"])
        self.assertTrue(self.client().cmd("stats-job %d" % held).startswith(b"OK"))
        self.assertEqual(stats_of(self.client(), "stats-tube keep")["current-jobs-ready"], "1")
        self.fails(NOT_FOUND, "purge", "nope")
        self.fails(USAGE, "purge", "pg", "reserved")

    def test_purge_paused_tube(self):
        c = self.client()
        for i in range(3):
            c.put("x", tube="pp")
        c.cmd("pause-tube pp 100")
        self.assertEqual(self.json_lines("purge", "pp", "ready")[0]["purged"], 3)

    # ---- connection forms

    def test_unix_socket_and_env(self):
        path = os.path.join(tempfile.mkdtemp(prefix="stalk_unix_"), "sock")
        srv = Server(binary=self.binary, unix_path=path)
        self.addCleanup(srv.stop)
        r = subprocess_run([STALK_BIN, "-s", "unix:" + path, "put", "via", "unix"])
        self.assertEqual((r.returncode, r.stdout), (0, b"inserted 1\n"), r.stderr)
        r = subprocess_run([STALK_BIN, "stats", "total-jobs"],
                           env=dict(os.environ, STALK_SERVER=self.address(self.server)))
        self.assertEqual((r.returncode, r.stdout), (0, b"0\n"), r.stderr)


def subprocess_run(argv, env=None):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                          env=env)


class CommandsOnStalkd(Commands, StalkCase):
    def test_purge_uses_stalkds_purge(self):
        c = self.client()
        for i in range(3):
            c.put("x", tube="pq")
        self.assertEqual(self.ok("purge", "pq"), "purged 3 jobs from pq\n")
        self.assertEqual(stats_of(c, "stats-ext")["cmd-purge"], "1")

    def test_peek_shows_extensions(self):
        c = self.client()
        body = b"ext"
        c.send(b"put-ext 1 0 60 3 tries=3 ttl=500 key=k1 attr.a=b\r\next\r\n")
        self.assertEqual(c.read_line(), b"INSERTED 1\r\n")
        [job] = self.json_lines("peek", "1")
        self.assertEqual((job["tries"], job["key"], job["attrs"], body_of(job)),
                         (3, "k1", {"a": "b"}, body))
        self.assertLessEqual(abs(job["ttl"] - 500), 2)
        self.assertRegex(self.ok("peek", "1").splitlines()[0],
                         r"^id 1  tube default  state ready  pri 1  ttr 60  tries 3  ttl \d+  "
                         r"key k1  attr\.a b  3 bytes$")


class CommandsOnBeanstalkd(Commands, StalkCase):
    binary = BEANSTALKD_BIN

    def test_purge_by_hand_counts_commands(self):
        c = self.client()
        for i in range(250):
            c.put("x", tube="pb")
        self.assertEqual(self.ok("purge", "pb"), "purged 250 jobs from pb\n")
        st = stats_of(c, "stats")
        self.assertEqual(st["cmd-delete"], "250")
        # a progress bar on a terminal
        for i in range(100):
            c.put("x", tube="pb")
        rc, out, err = self.stalk_on_terminal("purge", "pb")
        self.assertEqual((rc, out), (0, b"purged 100 jobs from pb\n"), err)
        self.assertIn(b"\r\x1b[Kpurge pb [", err)


class ErrorsAndHelp(StalkCase):
    """Exit codes that do not depend on the server, and --help."""

    def test_help_for_every_command(self):
        r = self.stalk("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in COMMANDS:
            self.assertRegex(r.stdout.decode(), r"\n  %s +\S" % cmd)
            r2 = self.stalk(cmd, "--help")
            self.assertEqual(r2.returncode, 0, cmd)
            self.assertIn("Usage: stalk %s " % cmd, r2.stdout.decode())
            self.assertIn("Exit status", r2.stdout.decode())

    def test_help_keeps_its_columns(self):
        # names in the first 28 columns, descriptions from column 28 wrapped at 80, and what
        # CLI11 would append to a name (Excludes:, Env:) said in words in the description
        for cmd in ("",) + COMMANDS:
            text = self.ok(*((cmd,) if cmd else ()), "--help")
            with self.subTest(cmd=cmd):
                self.assertNotIn("Excludes", text)
                self.assertNotIn("Env:", text)
                for line in text.splitlines():
                    self.assertLessEqual(len(line), 80, line)
                    if line.startswith("  ") and not line.startswith(" " * 28):
                        if "  " in line[2:].strip():  # a name and its description:
                            self.assertEqual(line[26:28], "  ", line)  # two spaces at least
                            self.assertNotEqual(line[28], " ", line)  # and it starts at 28
        reserve = " ".join(self.ok("reserve", "--help").split())
        self.assertIn("--delete delete each job reserved (not with --bury)", reserve)
        self.assertIn("(not with --wait)", reserve)
        self.assertIn("($STALK_SERVER when it is set)", " ".join(self.ok("--help").split()))

    def test_version(self):
        r = self.stalk("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout.decode(), r"^stalk 1\.13\.\d+\n$")

    def test_usage_errors(self):
        for args in ((), ("frobnicate",), ("put", "--pri", "4294967296", "x"),
                     ("put", "--nope"), ("peek",), ("put", "-t", "bad name", "x"),
                     ("top", "--sort", "colour"), ("purge", "t", "everything")):
            with self.subTest(args=args):
                self.fails(USAGE, *args)
        r = self.stalk("--server", "host:99999", "stats")
        self.assertEqual(r.returncode, USAGE)

    def test_connection_errors(self):
        srv = Server()
        port = srv.port
        srv.stop()
        r = self.stalk("stats", server=srv)
        self.assertEqual(r.returncode, CONNECTION)
        self.assertIn(b"cannot connect to 127.0.0.1:%d" % port, r.stderr)
        r = subprocess_run([STALK_BIN, "-s", "unix:/nonexistent/sock", "stats"])
        self.assertEqual(r.returncode, CONNECTION)

    def test_server_errors(self):
        small = self.start_server(args=("-z", "10"))
        r = self.stalk("put", "more than ten bytes", server=small)
        self.assertEqual(r.returncode, SERVER)
        self.assertIn(b"JOB_TOO_BIG", r.stderr)

    def test_input_errors(self):
        self.fails(INPUT, "put", "-f", "/nonexistent/file")
        self.fails(INPUT, "load", "/nonexistent/file")
        err = self.fails(INPUT, "load", input=b'{"body":"ok"}\n{"body":\n')
        self.assertIn("line 2: not JSON: the line ends before the job does", err)
        self.assertIn("loaded 1 job before it", err)
        self.assertEqual(stats_of(self.client(), "stats")["current-jobs-ready"], "1")
        for bad, why in ((b'{"tube":"t"}', "no body"), (b'{"body":"x","state":"gone"}', "state"),
                         (b'{"body64":"!!"}', "base64"), (b'{"body":"x","pri":-1}', "pri"),
                         (b'{"body":"x","tube":"a b"}', "tube"), (b'[1]', "object"),
                         (b'{"body":"x","key":"has space","tries":1}', "key")):
            with self.subTest(line=bad):
                self.assertIn(why, self.fails(INPUT, "load", input=bad + b"\n"))

    def test_load_errors_say_where_and_what_in_words(self):
        for bad, why in (
                (b'{"body":"x",}', "line 3: not JSON at column 13: a field name in double "
                                   "quotes should be here"),
                (b'{"body":"x"} {}', "line 3: not JSON at column 14: something follows the "
                                     "job's closing }"),
                (b'{"body":"x","pri":"5"}', 'line 3: "pri" must be a whole number from 0 to '
                                            '4294967295, not "5"'),
                (b'{"body":"x","body64":"eA=="}', 'line 3: both "body" and "body64"'),
                (b'{"body":x}', "line 3: not JSON at column 9: a value is missing or is not "
                                "one")):
            with self.subTest(line=bad):
                err = self.fails(INPUT, "load", input=b'{"body":"a"}\n\n' + bad + b"\n")
                self.assertIn(why, err)
                self.assertIn("loaded 1 job before it", err)
        small = self.start_server(args=("-z", "10"))
        err = self.fails(SERVER, "load", server=small,
                         input=b'{"body":"ok"}\n{"body":"more than ten bytes"}\n')
        self.assertIn("line 2: put: the server answered JOB_TOO_BIG (the body is larger than "
                      "the server's max-job-size, its -z)", err)


if __name__ == "__main__":
    unittest.main()

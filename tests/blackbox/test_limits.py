"""Black-box tests: protocol limits and malformed input.

Line length (224 bytes incl. CRLF), tube names, integer ranges, job size (-z), JOB_TOO_BIG,
EXPECTED_CRLF, BAD_FORMAT, UNKNOWN_COMMAND. After every error the connection must stay in
sync: the next command on the same connection gets its own correct reply.

Run: python3 -m unittest -v tests/blackbox/test_limits.py
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import beanstalk  # noqa: E402
from beanstalk import ServerCase, is_beanstalkd, nth_id, parse_yaml  # noqa: E402

BAD = b"BAD_FORMAT\r\n"
USING_DEFAULT = b"USING default\r\n"
NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()"


class TestLineLength(ServerCase):
    def test_224_byte_line_is_accepted(self):
        c = self.client()
        c.put("x")
        jid = b"%d" % nth_id(1)
        line = b"stats-job " + b"0" * (212 - len(jid)) + jid + b"\r\n"
        self.assertEqual(len(line), 224)
        r = c.cmd(line)
        self.assertTrue(r.startswith(b"OK "), r)
        self.assertEqual(parse_yaml(r)["id"], jid.decode())

    def test_longer_line_bad_format_then_next_command(self):
        # 'use ' + 300 chars: BAD_FORMAT once, rest of the long line discarded up to its CRLF
        c = self.client()
        data = b"use " + b"a" * 300 + b"\r\n" + b"list-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2), [BAD, USING_DEFAULT])
        self.assertInSync(c)

    def test_225_byte_line_with_crlf_straddling_the_limit(self):
        if is_beanstalkd():
            self.skipTest("beanstalkd 1.12 swallows the command after a 225-byte line")
        c = self.client()
        line = b"use " + b"a" * 219 + b"\r\n"
        self.assertEqual(len(line), 225)
        self.assertEqual(self.replies(c, line + b"list-tube-used\r\n", 2), [BAD, USING_DEFAULT])
        c.put("x")
        line = b"stats-job " + b"0" * 212 + b"1\r\n"
        self.assertEqual(len(line), 225)
        self.assertEqual(self.replies(c, line + b"list-tube-used\r\n", 2), [BAD, USING_DEFAULT])

    def test_226_to_241_byte_lines(self):
        c = self.client()
        for extra in range(0, 16):
            line = b"use " + b"a" * (220 + extra) + b"\r\n"
            self.assertEqual(self.replies(c, line + b"list-tube-used\r\n", 2),
                             [BAD, USING_DEFAULT], len(line))

    def test_very_long_line_sent_in_pieces(self):
        c = self.client()
        c.send(b"list-tube-used\r\n")
        self.assertEqual(c.read_reply(), USING_DEFAULT)
        c.send(b"use ")
        for _ in range(20):
            c.send(b"b" * 250)
            time.sleep(0.005)
        c.send(b"\r\nlist-tube-used\r\n")
        self.assertEqual(c.read_reply(), BAD)
        self.assertEqual(c.read_reply(), USING_DEFAULT)
        self.assertEqual(c.cmd("list-tubes"), b"OK 14\r\n---\n- default\n\r\n")

    def test_long_line_between_pipelined_commands(self):
        c = self.client()
        data = (b"use t1\r\n" + b"x" * 1000 + b"\r\n" + b"list-tube-used\r\n")
        self.assertEqual(self.replies(c, data, 3), [b"USING t1\r\n", BAD, b"USING t1\r\n"])


class TestTubeNames(ServerCase):
    def test_all_allowed_characters(self):
        c = self.client()
        self.assertEqual(c.cmd("use " + NAME_CHARS), b"USING " + NAME_CHARS.encode() + b"\r\n")
        self.assertEqual(c.cmd("watch " + NAME_CHARS), b"WATCHING 2\r\n")
        self.assertTrue(c.cmd("stats-tube " + NAME_CHARS).startswith(b"OK "))
        self.assertEqual(c.cmd("pause-tube %s 1" % NAME_CHARS), b"PAUSED\r\n")
        self.assertEqual(c.cmd("ignore " + NAME_CHARS), b"WATCHING 1\r\n")

    def test_single_char_and_inner_hyphen(self):
        c = self.client()
        self.assertEqual(c.cmd("use x"), b"USING x\r\n")
        self.assertEqual(c.cmd("use a-"), b"USING a-\r\n")
        self.assertEqual(c.cmd("watch a-b"), b"WATCHING 2\r\n")

    def test_200_chars_ok_201_bad(self):
        c = self.client()
        n200, n201 = "n" * 200, "m" * 201
        self.assertEqual(c.cmd("use " + n200), b"USING " + n200.encode() + b"\r\n")
        self.assertEqual(c.cmd("watch " + n200), b"WATCHING 2\r\n")
        self.assertTrue(c.cmd("stats-tube " + n200).startswith(b"OK "))
        self.assertEqual(c.cmd("pause-tube %s 1" % n200), b"PAUSED\r\n")
        self.assertEqual(c.cmd("ignore " + n200), b"WATCHING 1\r\n")
        for cmd in ("use ", "watch ", "ignore ", "stats-tube "):
            self.assertEqual(c.cmd(cmd + n201), BAD, cmd)
        self.assertEqual(c.cmd("pause-tube %s 1" % n201), BAD)
        self.assertEqual(c.cmd("list-tube-used"), b"USING " + n200.encode() + b"\r\n")
        self.assertNotIn(b"mmm", c.cmd("list-tubes"))

    def test_leading_hyphen_rejected(self):
        c = self.client()
        for cmd in ("use -a", "watch -a", "ignore -a", "stats-tube -a", "pause-tube -a 1"):
            self.assertEqual(c.cmd(cmd), BAD, cmd)
        self.assertInSync(c)

    def test_invalid_characters_rejected(self):
        c = self.client()
        for ch in "!#*,:@~=\"'%&?<>[]{}|\\^`":
            self.assertEqual(c.cmd("use a" + ch + "b"), BAD, ch)
            self.assertEqual(c.cmd("watch a" + ch + "b"), BAD, ch)
        self.assertEqual(c.cmd(b"use a\tb"), BAD)
        self.assertEqual(c.cmd(b"use \xc3\xa9"), BAD)
        self.assertEqual(c.cmd("use a b"), BAD)
        self.assertEqual(c.cmd("watch a b"), BAD)
        self.assertEqual(c.cmd("stats-tube a b"), BAD)
        self.assertEqual(c.cmd("pause-tube a b 1"), BAD)
        self.assertInSync(c)
        self.assertEqual(c.cmd("list-tubes"), b"OK 14\r\n---\n- default\n\r\n")

    def test_empty_name_rejected(self):
        c = self.client()
        for cmd in ("use ", "watch ", "ignore ", "stats-tube ", "pause-tube "):
            self.assertEqual(c.cmd(cmd), BAD, cmd)
        self.assertInSync(c)


class TestIntegers(ServerCase):
    def test_put_u32_limits(self):
        c = self.client()
        self.assertEqual(c.cmd(b"put 4294967295 4294967295 4294967295 0\r\n\r\n"),
                         b"INSERTED %d\r\n" % nth_id(1))
        st = parse_yaml(c.cmd("stats-job %d" % nth_id(1)))
        self.assertEqual((st["pri"], st["delay"], st["ttr"]),
                         ("4294967295", "4294967295", "4294967295"))
        for line in ("put 4294967296 0 0 0", "put 0 4294967296 0 0", "put 0 0 4294967296 0",
                     "put 0 0 0 4294967296", "put 99999999999999999999 0 0 0"):
            self.assertEqual(c.cmd(line), BAD, line)
        self.assertInSync(c)
        self.assertEqual(parse_yaml(c.cmd("stats"))["total-jobs"], "1")

    def test_put_malformed(self):
        c = self.client()
        for line in ("put", "put ", "put 0 0 0", "put 0 0 0 1 2", "put a 0 0 1", "put 0 b 0 1",
                     "put 0 0 c 1", "put 0 0 0 d", "put -1 0 0 1", "put 0 -1 0 1",
                     "put 0 0 -1 1", "put 0 0 0 -1", "put +1 0 0 1", "put 0 0 0 1 ",
                     "put 1.5 0 0 1", "put 0x1 0 0 1"):
            expected = b"UNKNOWN_COMMAND\r\n" if line == "put" else BAD
            self.assertEqual(c.cmd(line), expected, line)
        self.assertInSync(c)
        self.assertEqual(parse_yaml(c.cmd("stats"))["total-jobs"], "0")

    def test_put_extra_spaces_between_numbers(self):
        c = self.client()
        self.assertEqual(c.cmd(b"put  1  2  3  1\r\nx\r\n"), b"INSERTED %d\r\n" % nth_id(1))
        st = parse_yaml(c.cmd("stats-job %d" % nth_id(1)))
        self.assertEqual((st["pri"], st["delay"], st["ttr"]), ("1", "2", "3"))

    def test_job_id_u64(self):
        c = self.client()
        for cmd in ("peek", "delete", "touch", "kick-job", "reserve-job", "stats-job"):
            self.assertEqual(c.cmd(cmd + " 18446744073709551615"), b"NOT_FOUND\r\n", cmd)
            self.assertEqual(c.cmd(cmd + " 0"), b"NOT_FOUND\r\n", cmd)
            self.assertEqual(c.cmd(cmd + " 18446744073709551616"), BAD, cmd)
            for arg in ("x", "-1", "+1", "1 ", "1 2", "1x", ""):
                self.assertEqual(c.cmd(cmd + " " + arg), BAD, (cmd, arg))
        self.assertEqual(c.cmd("release 18446744073709551615 0 0"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("release 18446744073709551616 0 0"), BAD)
        self.assertEqual(c.cmd("bury 18446744073709551615 0"), b"NOT_FOUND\r\n")
        self.assertEqual(c.cmd("bury 18446744073709551616 0"), BAD)
        self.assertInSync(c)

    def test_release_and_bury_arguments(self):
        c = self.client()
        c.put("x")
        c.cmd("reserve")
        j = nth_id(1)
        for line in ["release %d" % j, "release %d 0" % j, "release %d 0 0 0" % j,
                     "release %d 4294967296 0" % j, "release %d 0 4294967296" % j,
                     "release %d -1 0" % j, "release %d 0 -1" % j, "release %d a 0" % j,
                     "bury %d" % j, "bury %d 4294967296" % j, "bury %d 0 0" % j, "bury %d -1" % j,
                     "bury x 0"]:
            self.assertEqual(c.cmd(line), BAD, line)
        # the job is still reserved by us; the limits themselves are accepted
        self.assertEqual(c.cmd("release %d 4294967295 0" % nth_id(1)), b"RELEASED\r\n")
        self.assertEqual(parse_yaml(c.cmd("stats-job %d" % nth_id(1)))["pri"], "4294967295")
        c.cmd("reserve")
        self.assertEqual(c.cmd("bury %d 4294967295" % nth_id(1)), b"BURIED\r\n")

    def test_pause_tube_arguments(self):
        c = self.client()
        self.assertEqual(c.cmd("pause-tube default 4294967295"), b"PAUSED\r\n")
        for line in ("pause-tube default", "pause-tube default 4294967296",
                     "pause-tube default -1", "pause-tube default x", "pause-tube default 1 2"):
            self.assertEqual(c.cmd(line), BAD, line)
        self.assertInSync(c)

    def test_kick_arguments(self):
        c = self.client()
        self.assertEqual(c.cmd("kick 4294967295"), b"KICKED 0\r\n")
        self.assertEqual(c.cmd("kick x"), BAD)
        self.assertEqual(c.cmd("kick "), BAD)
        self.assertInSync(c)

    def test_reserve_with_timeout_overflow(self):
        c = self.client()
        self.assertEqual(c.cmd("reserve-with-timeout 99999999999999999999"), BAD)
        self.assertInSync(c)

    def test_reserve_with_timeout_negative_or_non_numeric(self):
        if is_beanstalkd():
            self.skipTest("beanstalkd 1.12 accepts these (negative waits forever)")
        c = self.client()
        for arg in ("-1", "-100", "abc", "", "x1"):
            self.assertEqual(c.cmd("reserve-with-timeout " + arg), BAD, arg)
        self.assertInSync(c)
        self.assertEqual(parse_yaml(c.cmd("stats"))["current-waiting"], "0")


class TestTrailingGarbage(ServerCase):
    def test_no_argument_commands_reject_arguments(self):
        c = self.client()
        for cmd in ("reserve x", "reserve ", "peek-ready x", "peek-delayed x", "peek-buried x",
                    "stats x", "stats ", "list-tubes x", "list-tube-used x",
                    "list-tubes-watched x", "stats-tube", "reserve-with-timeout"):
            self.assertEqual(c.cmd(cmd), BAD, cmd)
        self.assertInSync(c)

    def test_unknown_commands(self):
        c = self.client()
        for cmd in ("foo", "PUT 0 0 0 1", "Stats", "peek", "use", "watch", "ignore", "delete",
                    "release", "bury", "touch", "kick", "kick-job", "", " stats"):
            self.assertEqual(c.cmd(cmd), b"UNKNOWN_COMMAND\r\n", cmd)
        # these start with the name of an argument-less command ("reserve", "stats"), so
        # beanstalkd parses them as that command with trailing garbage
        for cmd in ("reserve-job", "stats-job", "reserve-with-timeout", "statsx"):
            self.assertEqual(c.cmd(cmd), BAD, cmd)
        self.assertInSync(c)

    def test_nul_byte_in_command_line(self):
        c = self.client()
        self.assertEqual(self.replies(c, b"sta\x00ts\r\nlist-tube-used\r\n", 2),
                         [BAD, USING_DEFAULT])
        self.assertEqual(self.replies(c, b"use a\x00b\r\nlist-tube-used\r\n", 2),
                         [BAD, USING_DEFAULT])

    def test_bare_lf_is_not_a_line_end(self):
        c = self.client()
        data = b"list-tube-used\nlist-tube-used\r\nlist-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2), [BAD, USING_DEFAULT])


class TestJobSize(ServerCase):
    def test_default_max_is_65535(self):
        c = self.client()
        self.assertEqual(c.put(b"a" * 65535), b"INSERTED %d\r\n" % nth_id(1))
        data = b"put 0 0 10 65536\r\n" + b"b" * 65536 + b"\r\n" + b"list-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2), [b"JOB_TOO_BIG\r\n", USING_DEFAULT])
        self.assertEqual(c.cmd("reserve"), b"RESERVED %d 65535\r\n" % nth_id(1) + b"a" * 65535 + b"\r\n")

    def test_job_too_big_body_looking_like_commands_is_skipped(self):
        c = self.client()
        evil = (b"use evil\r\n" * 8000)[:70000]
        c.send(b"put 0 0 10 70000\r\n")
        for i in range(0, len(evil), 7000):
            c.send(evil[i:i + 7000])
            time.sleep(0.002)
        c.send(b"\r\nlist-tube-used\r\n")
        self.assertEqual(c.read_reply(), b"JOB_TOO_BIG\r\n")
        self.assertEqual(c.read_reply(), USING_DEFAULT)
        self.assertEqual(c.cmd("list-tubes"), b"OK 14\r\n---\n- default\n\r\n")

    def test_job_too_big_waits_for_whole_body(self):
        c = self.client()
        c.send(b"put 0 0 10 70000\r\n" + b"x" * 1000)
        self.assertTrue(c.no_reply_within(0.3))
        c.send(b"x" * 69000 + b"\r\n")
        self.assertEqual(c.read_reply(), b"JOB_TOO_BIG\r\n")
        self.assertInSync(c)


class TestSmallMaxJobSize(ServerCase):
    server_args = ("-z", "10")

    def test_limit_is_inclusive(self):
        c = self.client()
        self.assertEqual(c.put(b"0123456789"), b"INSERTED %d\r\n" % nth_id(1))
        self.assertEqual(c.cmd(b"put 0 0 10 11\r\n01234567890\r\n"), b"JOB_TOO_BIG\r\n")
        self.assertInSync(c)

    def test_too_big_in_pipeline(self):
        c = self.client()
        data = (b"put 0 0 10 20\r\n" + b"y" * 20 + b"\r\n" + b"put 0 0 10 3\r\nabc\r\n"
                + b"list-tube-used\r\n")
        self.assertEqual(self.replies(c, data, 3),
                         [b"JOB_TOO_BIG\r\n", b"INSERTED %d\r\n" % nth_id(1), USING_DEFAULT])
        self.assertEqual(c.cmd("peek %d" % nth_id(1)), b"FOUND %d 3\r\nabc\r\n" % nth_id(1))


class TestExpectedCrlf(ServerCase):
    def test_wrong_trailer(self):
        c = self.client()
        data = b"put 0 0 10 3\r\nabcXYlist-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2), [b"EXPECTED_CRLF\r\n", USING_DEFAULT])
        st = parse_yaml(c.cmd("stats"))
        self.assertEqual(st["total-jobs"], "0")
        self.assertEqual(st["current-jobs-ready"], "0")
        self.assertEqual(c.cmd("peek-ready"), b"NOT_FOUND\r\n")

    def test_lf_only_trailer(self):
        c = self.client()
        data = b"put 0 0 10 2\r\nab\n\nlist-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 2), [b"EXPECTED_CRLF\r\n", USING_DEFAULT])

    def test_body_longer_than_declared(self):
        # the declared byte count wins: the extra bytes are read as the (bad) trailer and
        # whatever follows is parsed as the next command line
        c = self.client()
        data = b"put 0 0 10 1\r\nxyz\r\nlist-tube-used\r\n"
        self.assertEqual(self.replies(c, data, 3),
                         [b"EXPECTED_CRLF\r\n", b"UNKNOWN_COMMAND\r\n", USING_DEFAULT])

    def test_expected_crlf_consumes_a_job_id(self):
        # beanstalkd allocates the job (and its id) before reading the body
        c = self.client()
        c.send(b"put 0 0 10 1\r\nxYZ")
        self.assertEqual(c.read_reply(), b"EXPECTED_CRLF\r\n")
        self.assertEqual(c.put("ok"), b"INSERTED %d\r\n" % nth_id(2))
        self.assertEqual(c.cmd("peek %d" % nth_id(1)), b"NOT_FOUND\r\n")

    def test_job_too_big_and_bad_format_consume_no_id(self):
        c = self.client()
        self.assertEqual(c.cmd(b"put 0 0 10 70000\r\n" + b"x" * 70000 + b"\r\n"),
                         b"JOB_TOO_BIG\r\n")
        self.assertEqual(c.cmd("put 0 0 10 x"), BAD)
        self.assertEqual(c.put("ok"), b"INSERTED %d\r\n" % nth_id(1))


if __name__ == "__main__":
    unittest.main()

"""Black-box tests: the memory cap (--max-memory), a stalkd addition.

A put that would take the memory held by jobs past the cap answers OUT_OF_MEMORY and the job
does not exist; every other command keeps working; deleting jobs makes room again. stats
shows memory-used and memory-limit after beanstalkd's keys (stats-ext).

Run: python3 -m unittest -v tests/blackbox/test_memory.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from beanstalk import Server, is_beanstalkd, parse_yaml  # noqa: E402

OOM = b"OUT_OF_MEMORY\r\n"


@unittest.skipIf(is_beanstalkd(), "--max-memory is stalkd's; beanstalkd has no memory cap")
class MemoryCapTest(unittest.TestCase):
    def start(self, *args):
        server = Server(args=args)
        self.addCleanup(server.stop)
        c = server.connect()
        self.addCleanup(c.close)
        return server, c

    def fill(self, c, body):
        """Puts until OUT_OF_MEMORY; returns the ids inserted."""
        ids = []
        for _ in range(100000):
            r = c.put(body)
            if r == OOM:
                return ids
            self.assertTrue(r.startswith(b"INSERTED "), r)
            ids.append(int(r.split()[1]))
        self.fail("the cap was never reached")

    def test_put_beyond_the_cap_is_refused_and_room_comes_back(self):
        _, c = self.start("--max-memory", "200K")
        ids = self.fill(c, "x" * 1000)
        self.assertGreater(len(ids), 50)
        st = parse_yaml(c.cmd("stats-ext"))
        self.assertEqual(int(st["memory-limit"]), 200 * 1024)
        self.assertLessEqual(int(st["memory-used"]), 200 * 1024)
        self.assertEqual(int(st["current-jobs-ready"]), len(ids))
        self.assertEqual(int(st["total-jobs"]), len(ids))
        # the refused job does not exist, and no id was spent on it
        self.assertEqual(c.cmd("peek %d" % (ids[-1] + 1)), b"NOT_FOUND\r\n")
        # everything else keeps working at the cap
        self.assertTrue(c.cmd("peek-ready").startswith(b"FOUND %d " % ids[0]))
        self.assertTrue(c.cmd("reserve").startswith(b"RESERVED %d " % ids[0]))
        self.assertEqual(c.cmd("bury %d 0" % ids[0]), b"BURIED\r\n")
        self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
        self.assertEqual(c.cmd("use other"), b"USING other\r\n")
        self.assertEqual(c.put("y" * 1000), OOM)
        # deleting makes room again
        for i in ids[:5]:
            self.assertEqual(c.cmd("delete %d" % i), b"DELETED\r\n")
        self.assertEqual(c.put("y" * 1000), b"INSERTED %d\r\n" % (ids[-1] + 1))
        used_before = int(parse_yaml(c.cmd("stats-ext"))["memory-used"])
        for i in ids[5:]:
            self.assertEqual(c.cmd("delete %d" % i), b"DELETED\r\n")
        used_after = int(parse_yaml(c.cmd("stats-ext"))["memory-used"])
        self.assertLess(used_after, used_before - (len(ids) - 5) * 1000)

    def test_small_jobs_fit_when_a_big_one_does_not(self):
        _, c = self.start("--max-memory", "100K", "-z", "200000")
        self.assertEqual(c.put("z" * 150000), OOM)
        self.assertTrue(c.put("small").startswith(b"INSERTED "))
        # the connection stayed in sync after the refused body
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")

    def test_default_cap_is_half_of_physical_memory(self):
        _, c = self.start()
        limit = int(parse_yaml(c.cmd("stats-ext"))["memory-limit"])
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        self.assertEqual(limit, phys // 2)

    def test_bad_values_are_refused(self):
        for value in ("abc", "0", "12Q", "-5"):
            server = None
            with self.assertRaises(RuntimeError, msg=value):
                server = Server(args=("--max-memory", value))
            if server:
                server.stop()


if __name__ == "__main__":
    unittest.main()

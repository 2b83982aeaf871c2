"""Runs a real beanstalk client library (Debian's ruby-beaneater) against stalkd."""
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import beanstalk  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class BeaneaterTest(unittest.TestCase):
    def test_beaneater_smoke(self):
        if not shutil.which("ruby"):
            self.fail("ruby is missing: scripts/setup.sh installs ruby and ruby-beaneater")
        with beanstalk.Server() as server:
            r = subprocess.run(["ruby", os.path.join(HERE, "beaneater_smoke.rb"),
                                "127.0.0.1:%d" % server.port],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("passed", r.stdout)


if __name__ == "__main__":
    unittest.main()

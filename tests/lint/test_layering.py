"""Tests of scripts/check_layering.py on small src/ trees built in a temporary folder.

Run: python3 -m unittest -v tests/lint/test_layering.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "check_layering.py")


class LayeringTest(unittest.TestCase):
    def tree(self, files):
        """A temporary src/ holding files {"layer/name": text}; returns its path."""
        d = tempfile.TemporaryDirectory(prefix="layering_")
        self.addCleanup(d.cleanup)
        src = os.path.join(d.name, "src")
        for rel, text in files.items():
            path = os.path.join(src, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return src

    def check(self, files):
        """Runs the script on a tree of `files`; returns (its src/ path, exit status, stdout)."""
        src = self.tree(files)
        p = subprocess.run([sys.executable, SCRIPT, src], capture_output=True, text=True,
                           timeout=30)
        return src, p.returncode, p.stdout

    def assertAccepted(self, files):
        _, rc, out = self.check(files)
        self.assertEqual(rc, 0, out)

    def assertRejected(self, files):
        """The script exits 1 on the tree; returns (src path, stdout)."""
        src, rc, out = self.check(files)
        self.assertEqual(rc, 1, out)
        return src, out

    def test_allowed_includes_pass(self):
        self.assertAccepted({
            "base/clock.h": "#pragma once\n",
            "engine/engine.h": '#pragma once\n#include <vector>\n#include "base/clock.h"\n',
            "command/command.h": '#pragma once\n#include "base/clock.h"\n',
            "store/store.cc": '#include "command/command.h"\n#include "engine/engine.h"\n',
            "protocol/reply.cc": '#include "protocol/reply.h"\n#include "command/command.h"\n',
            "protocol/reply.h": '#pragma once\n#include "base/clock.h"\n',
            "server/server.cc": '#include "engine/engine.h"\n#include "protocol/reply.h"\n',
            "app/main.cc": '#include "server/server.h"\n',
        })

    def test_lower_layer_including_higher_fails_with_file_and_line(self):
        src, out = self.assertRejected({
            "base/clock.h": "#pragma once\n",
            "engine/engine.h": "#pragma once\n",
            "protocol/reply.h": '#pragma once\n#include "base/clock.h"\n#include "engine/engine.h"\n',
        })
        self.assertEqual(out.splitlines(), [
            "%s:3: layer 'protocol' may not include 'engine/engine.h'"
            % os.path.join(src, "protocol", "reply.h")])

    def test_server_may_not_include_app(self):
        _, out = self.assertRejected({"app/main.h": "",
                                      "server/server.cc": '#include "app/main.h"\n'})
        self.assertIn("server.cc:1: layer 'server' may not include 'app/main.h'", out)

    def test_unit_tests_are_exempt(self):
        self.assertAccepted({
            "engine/engine.h": "",
            "server/server.h": "",
            "base/clock_test.cc": '#include "engine/engine.h"\n#include "server/server.h"\n',
        })

    def test_unknown_folder_is_an_error(self):
        _, out = self.assertRejected({"base/clock.h": "",
                                      "grpc/service.h": '#include "base/clock.h"\n'})
        self.assertIn("folder 'grpc' is not a layer", out)

    def test_quoted_includes_of_other_libraries_are_ignored(self):
        self.assertAccepted({"base/x.cc": '#include "gtest/gtest.h"\n#include "local.h"\n'})


if __name__ == "__main__":
    unittest.main()

"""Tests of scripts/check_layering.py on small src/ trees built in a temporary folder.

Run: python3 -m unittest -v tests/lint/test_layering.py
"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "check_layering.py")


class TreeCase(unittest.TestCase):
    """Runs the script on small trees."""

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


class LayeringTest(TreeCase):
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


def lines(n, head=""):
    """A file's text: `head`, then code lines up to n lines in all."""
    count = head.count("\n")
    return head + "".join("int x%d = 0;\n" % i for i in range(n - count))


class FileSizeTest(TreeCase):
    """No file of src/ is over MAX_LINES lines without a "one piece:" reason."""

    def test_limit_is_700_lines(self):
        self.assertAccepted({"base/a.cc": lines(700), "base/a_test.cc": lines(700)})
        src, out = self.assertRejected({"base/a.cc": lines(701)})
        self.assertEqual(out.splitlines(), [
            '%s: 701 lines, more than 700; split it by idea, or say in its first comment why '
            'it must be one piece ("one piece: <why>")' % os.path.join(src, "base", "a.cc")])

    def test_every_kind_of_file_counts(self):
        for name in ("base/a_test.cc", "base/a.h", "redis/lib.lua", "base/x.cmake"):
            with self.subTest(name=name):
                self.assertRejected({name: lines(701)})

    def test_reason_in_the_first_comment_exempts(self):
        head = ('#include "base/a.h"\n\n// The parser\'s state table.\n'
                "// one piece: the table is generated and read as a whole\n\n")
        self.assertAccepted({"base/a.cc": lines(900, head)})
        lua = ("#!lua name=x\n-- The library.\n"
               "-- one piece: Redis loads one library per FUNCTION LOAD\nlocal a = 1\n")
        self.assertAccepted({"redis/f.lua": lines(900, lua)})

    def test_reason_elsewhere_or_too_short_does_not(self):
        later = "// The parser.\n\nint a;\n// one piece: the table is generated and whole\n"
        empty = "// The parser.\n// one piece:\n"
        short = "// The parser.\n// one piece: because\n"
        for head in (later, empty, short):
            with self.subTest(head=head):
                self.assertRejected({"base/a.cc": lines(900, head)})

    def test_files_awaiting_their_split_are_reported_not_failed(self):
        # The script's own list is replaced by one of this test, so that the test does not
        # depend on which files are awaiting their split (the list ends up empty).
        sys.path.insert(0, os.path.dirname(SCRIPT))
        self.addCleanup(sys.path.remove, os.path.dirname(SCRIPT))
        import check_layering
        src = self.tree({"redis/big.cc": lines(1100), "redis/small.cc": lines(10)})
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(check_layering, "AWAITING_SPLIT",
                               ["redis/big.cc", "redis/small.cc", "redis/gone.cc"]):
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = check_layering.main([SCRIPT, src])
        self.assertEqual(rc, 0, out.getvalue())
        self.assertIn("awaiting their split: redis/big.cc (1100 lines)", out.getvalue())
        # Entries no longer over the limit (short, or gone) are named, so that the list gets
        # emptied.
        for rel in ("redis/small.cc", "redis/gone.cc"):
            self.assertIn("note: %s is in AWAITING_SPLIT" % rel, err.getvalue())
        self.assertNotIn("note: redis/big.cc", err.getvalue())
        # Off the list, the same file fails.
        with mock.patch.object(check_layering, "AWAITING_SPLIT", []):
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(check_layering.main([SCRIPT, src]), 1)

if __name__ == "__main__":
    unittest.main()

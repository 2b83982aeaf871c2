#!/usr/bin/env python3
"""Runs the dashboard's end-to-end browser tests (dashboard.test.mjs) against a real stalkd.

Starts STALKD_BIN (default build/release/stalkd) on free loopback ports with --admin-http,
--admin-accounts (a fresh account file) and -b (a fresh binlog directory), runs
`node dashboard.test.mjs` and `node lmstfy.test.mjs` in Debian's headless chromium through playwright-core, and stops
the server by its PID. Screenshots go to $STALKD_SCREENSHOTS (default
build/dashboard-screenshots), kept as test artifacts. STALKD_BROWSER_TESTS names the test
files to run (comma-separated; default both).

Exits 77 (ctest's "skipped") with a message when chromium, node or tests/dashboard's
node_modules (`npm ci` in tests/dashboard, as scripts/setup.sh does) are missing; nothing is
ever downloaded, a browser least of all.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from beanstalk import REPO, STALKD_BIN, Server, free_port, wait_until  # noqa: E402

SKIP = 77
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def skip(why):
    print("SKIPPED: %s" % why)
    sys.exit(SKIP)


def ready(port):
    """Whether the admin listener answers /readyz with 200 (the store is ready)."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


def main():
    if not os.access(CHROMIUM, os.X_OK):
        skip("%s is missing (scripts/setup.sh installs Debian's chromium)" % CHROMIUM)
    node = shutil.which("node")
    if not node:
        skip("node is missing (scripts/setup.sh installs it)")
    if not os.path.isdir(os.path.join(HERE, "node_modules", "playwright-core")):
        skip("tests/dashboard/node_modules is missing: run `npm ci` in tests/dashboard "
             "(scripts/setup.sh does)")
    shots = os.environ.get("STALKD_SCREENSHOTS",
                           os.path.join(REPO, "build", "dashboard-screenshots"))
    os.makedirs(shots, exist_ok=True)
    for f in os.listdir(shots):
        if f.endswith(".png"):
            os.remove(os.path.join(shots, f))
    with tempfile.TemporaryDirectory(prefix="stalkd-dashboard-") as tmp:
        accounts = os.path.join(tmp, "accounts")
        with open(accounts, "w") as f:
            f.write("# the browser tests' account\nops:s3cret:with:colons\n")
        binlog = os.path.join(tmp, "binlog")
        os.mkdir(binlog)
        admin = free_port()
        server = Server(STALKD_BIN, args=["--admin-http", "127.0.0.1:%d" % admin,
                                          "--admin-accounts", accounts, "-b", binlog])
        try:
            if not wait_until(lambda: ready(admin), timeout=120, interval=0.1):
                print("the admin listener did not answer /readyz with 200")
                return 1
            env = dict(os.environ,
                       STALKD_ADMIN_URL="http://127.0.0.1:%d" % admin,
                       STALKD_TEXT_PORT=str(server.port),
                       STALKD_USER="ops",
                       STALKD_PASSWORD="s3cret:with:colons",
                       STALKD_SCREENSHOTS=shots,
                       CHROMIUM=CHROMIUM)
            # The dashboard, then its lmstfy view, against the same server.
            codes = [subprocess.run([node, os.path.join(HERE, name)], cwd=HERE, env=env,
                                    timeout=600).returncode
                     for name in os.environ.get("STALKD_BROWSER_TESTS", "dashboard.test.mjs,"
                                                "lmstfy.test.mjs").split(",")]
        finally:
            code = server.stop()
        print("screenshots: %s" % shots)
        if code not in (0, None):
            print("stalkd exited with %s" % code)
            return 1
        return next((c for c in codes if c), 0)


if __name__ == "__main__":
    sys.exit(main())

"""Package test: the Debian package built by `cpack -G DEB` from the build of $STALKD_BIN.

It builds the .deb into a scratch directory, checks its control fields and files, installs
it into a scratch root with `dpkg -x` and runs the installed binary (--version, then a server
on a free loopback port), checks that stalkd(8) documents every flag of `stalkd -h` with the
words of -h, verifies the systemd units with `systemd-analyze verify`, checks that the
service's system call filter allows every call stalkd makes (strace), and runs lintian
(no errors allowed; warnings and notes are listed). When the build has the `stalk` CLI, the
package has it too: the installed stalk talks to the installed server, and stalk(1)
documents every command and option of `stalk --help` and `stalk COMMAND --help`, under
that command, with the words of --help. A tool that is missing, or that cannot run in this
container, skips its check with a message.

Run:  STALKD_BIN=build/release/stalkd python3 -m unittest -v tests/package/test_package.py
"""
import glob
import gzip
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import beanstalk  # noqa: E402
from beanstalk import STALKD_BIN, Client, free_port  # noqa: E402

BUILD_DIR = os.path.dirname(os.path.abspath(STALKD_BIN))
DEB_DIR = os.path.join(REPO, "packaging", "debian")
UNITS = ("lib/systemd/system/stalkd.socket", "lib/systemd/system/stalkd.service")
FILES = ("usr/bin/stalkd", "etc/default/stalkd", "usr/share/man/man8/stalkd.8.gz",
         "usr/share/doc/stalkd/copyright", "usr/share/doc/stalkd/changelog.gz") + UNITS


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"^project\(stalkd VERSION (\S+)", f.read(), re.M).group(1)


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=kw.pop("timeout", 300), **kw)


def sanitized(binary):
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def help_entries(usage):
    """The flags of `stalkd -h`: each entry (its first line and the indented lines under it)
    as one line of words."""
    entries = []
    for line in usage.splitlines():
        if re.match(r"^ -", line):
            entries.append(line.strip())
        elif entries and re.match(r"^ {5,}\S", line):
            entries[-1] += " " + line.strip()
    return [" ".join(e.split()) for e in entries]


def has_cli():
    """True when the build under test has the stalk CLI (then the package has it too)."""
    return os.path.exists(os.path.join(BUILD_DIR, "stalk"))


def cli_help_entries(text, section="Options:"):
    """The entries of a section of stalk's help: [(flags, description)], flags as a set
    ("-t", "--tube"). stalk writes the name from column 2 and the description from column
    28, wrapped at 80 columns (its further lines start at column 28), or, when the name is
    longer, from the next line."""
    lines = text.splitlines()
    out, inside = [], False
    for i, line in enumerate(lines):
        if line.endswith(":") and not line.startswith(" "):
            inside = line == section
            continue
        if not inside or not line.startswith("  ") or line.startswith(" " * 28):
            continue
        # the description on the name's line: from column 28, after two spaces at least
        desc = [line[28:].strip()] if line[26:28] == "  " else []
        for following in lines[i + 1:]:
            if not following.startswith(" " * 28) or not following.strip():
                break
            desc.append(following.strip())
        name = line.split()[0]
        flags = set(name.split(",")) if section == "Options:" else {name}
        out.append((flags, " ".join(" ".join(desc).split())))
    return out


def roff_sections(source, level):
    """{title: the roff lines under it} for each .SH (level "SH") or .SS heading."""
    out, title = {}, None
    for line in source.splitlines():
        if line.startswith((".SH", ".SS")):
            name, _, rest = line[1:].partition(" ")
            if name == level:
                title = rest.strip().strip('"')
                out[title] = []
                continue
            if name == "SH":
                title = None
        if title is not None:
            out[title].append(line)
    return {t: "\n".join(lines) for t, lines in out.items()}


def roff_text(source):
    """The words of a man page's roff source: font macros resolved (.BI a " b" is "a b"),
    comments and layout requests dropped, \\- made a hyphen. Returns (text, the first line
    of each .TP paragraph)."""
    words, tags, after_tp = [], [], False
    for line in source.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith("."):
            name, _, rest = line[1:].partition(" ")
            args = shlex.split(rest.replace("\\-", "-")) if rest else []
            if name in ("B", "I", "SM", "SB"):
                text = " ".join(args)
            elif name in ("BI", "IB", "BR", "RB", "IR", "RI"):
                text = "".join(args)
            elif name == "TP":
                after_tp = True
                continue
            else:
                after_tp = False
                continue
        else:
            text = line.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\")
        if after_tp:
            tags.append(" ".join(text.split()))
            after_tp = False
        words.append(text)
    return " ".join(" ".join(words).split()), tags


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(os.path.join(BUILD_DIR, "CPackConfig.cmake")):
            raise unittest.SkipTest("no CPackConfig.cmake next to %s (not a CMake build)"
                                    % STALKD_BIN)
        if sanitized(STALKD_BIN):
            raise unittest.SkipTest("the package is made from an optimised build, not %s"
                                    % STALKD_BIN)
        for tool in ("cpack", "dpkg-deb"):
            if not shutil.which(tool):
                raise unittest.SkipTest("%s is missing (scripts/setup.sh installs it)" % tool)
        cls.tmp = tempfile.mkdtemp(prefix="stalkd_package_")
        t0 = time.monotonic()
        p = run(["cpack", "--config", os.path.join(BUILD_DIR, "CPackConfig.cmake"), "-G", "DEB",
                 "-B", os.path.join(cls.tmp, "out")])
        if p.returncode != 0:
            shutil.rmtree(cls.tmp, True)
            raise AssertionError("cpack failed:\n%s%s" % (p.stdout, p.stderr))
        debs = glob.glob(os.path.join(cls.tmp, "out", "*.deb"))
        assert len(debs) == 1, debs
        cls.deb = debs[0]
        sys.stderr.write("\ncpack made %s in %.1f s\n" % (os.path.basename(cls.deb),
                                                          time.monotonic() - t0))
        cls.root = os.path.join(cls.tmp, "root")
        p = run(["dpkg-deb", "-x", cls.deb, cls.root])
        assert p.returncode == 0, p.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def field(self, name):
        p = run(["dpkg-deb", "-f", self.deb, name])
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.strip()

    def control_file(self, name):
        d = os.path.join(self.tmp, "control")
        if not os.path.isdir(d):
            p = run(["dpkg-deb", "-e", self.deb, d])
            self.assertEqual(p.returncode, 0, p.stderr)
        return os.path.join(d, name)

    # ---- what the package holds

    def test_control_fields(self):
        self.assertEqual(self.field("Package"), "stalkd")
        self.assertEqual(self.field("Version"), project_version())
        self.assertEqual(self.field("Section"), "net")
        depends = self.field("Depends")
        self.assertIn("adduser", depends)           # the postinst's adduser
        self.assertRegex(depends, r"\blibc6 \(>= ")  # from dpkg-shlibdeps
        self.assertTrue(self.field("Maintainer"))
        self.assertEqual(self.deb.rsplit("/", 1)[1],
                         "stalkd_%s_%s.deb" % (project_version(), self.field("Architecture")))

    def test_files(self):
        for f in FILES:
            self.assertTrue(os.path.isfile(os.path.join(self.root, f)), f)
        self.assertTrue(os.access(os.path.join(self.root, "usr/bin/stalkd"), os.X_OK))
        # the CLI is packaged once the build has one, with its man page
        for f in ("usr/bin/stalk", "usr/share/man/man1/stalk.1.gz"):
            self.assertEqual(os.path.exists(os.path.join(self.root, f)), has_cli(), f)
        with open(self.control_file("conffiles")) as f:
            self.assertEqual(f.read().split(), ["/etc/default/stalkd"])
        for script in ("postinst", "prerm", "postrm"):
            path = self.control_file(script)
            self.assertTrue(os.access(path, os.X_OK), script)
            p = run(["sh", "-n", path])
            self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.control_file("postinst")) as f:
            self.assertIn("adduser --quiet --system --group", f.read())

    def test_maintainer_scripts(self):
        # postinst and prerm run with every command they call replaced by a stub that logs
        # its arguments (getent finds no stalkd user); nothing on this system is touched.
        stubs = os.path.join(self.tmp, "stubs")
        os.makedirs(stubs, exist_ok=True)
        calls = os.path.join(self.tmp, "calls.log")
        for name in ("getent", "adduser", "deluser", "delgroup", "deb-systemd-helper",
                     "deb-systemd-invoke", "systemctl"):
            # getent: no such user; deb-systemd-helper was-enabled: no (a first install)
            status = {"getent": "exit 2",
                      "deb-systemd-helper": '[ "$2" = was-enabled ] && exit 1'}.get(name, "")
            with open(os.path.join(stubs, name), "w") as f:
                f.write('#!/bin/sh\necho "%s $*" >> "%s"\n%s\nexit 0\n' % (name, calls, status))
            os.chmod(os.path.join(stubs, name), 0o755)
        env = dict(os.environ, PATH=stubs + ":/usr/bin:/bin")

        def script(name, *args):
            open(calls, "w").close()
            p = run(["sh", "-e", self.control_file(name)] + list(args), env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(calls) as f:
                return f.read().splitlines()

        log = script("postinst", "configure")
        self.assertIn("getent passwd stalkd", log)
        self.assertIn("adduser --quiet --system --group --home /var/lib/stalkd "
                      "--no-create-home --gecos stalkd work queue stalkd", log)
        for unit in ("stalkd.socket", "stalkd.service"):
            # a first install: was-enabled fails, so the units are brought up to date
            self.assertIn("deb-systemd-helper --quiet was-enabled " + unit, log)
            self.assertIn("deb-systemd-helper update-state " + unit, log)
        if not os.path.isdir("/run/systemd/system"):
            self.assertFalse([c for c in log if c.startswith(("systemctl", "deb-systemd-invoke"))])
        self.assertEqual(run(["sh", self.control_file("postinst"), "bogus"], env=env).returncode, 1)
        self.assertEqual(script("prerm", "upgrade"), [])

    def test_changelog_is_debians_and_names_the_version(self):
        with gzip.open(os.path.join(self.root, "usr/share/doc/stalkd/changelog.gz"), "rt") as f:
            first = f.readline()
        self.assertEqual(first.split()[:2], ["stalkd", "(%s)" % project_version()])
        # gzip -9n: no file name or time stamp in the header (reproducible, as lintian wants)
        with open(os.path.join(self.root, "usr/share/doc/stalkd/changelog.gz"), "rb") as f:
            head = f.read(10)
        self.assertEqual(head[3] & 0x08, 0)       # FNAME flag clear
        self.assertEqual(head[4:8], b"\0\0\0\0")  # MTIME zero
        if shutil.which("dpkg-parsechangelog"):
            p = run(["dpkg-parsechangelog", "-l", os.path.join(DEB_DIR, "changelog"),
                     "-S", "Version"])
            self.assertEqual(p.stdout.strip(), project_version(), p.stderr)

    def test_installed_documentation(self):
        # README.md and docs/*.md, gzip -9n as the changelog, in /usr/share/doc/stalkd
        doc = os.path.join(self.root, "usr/share/doc/stalkd")
        sources = [os.path.join(REPO, "README.md")] + sorted(
            glob.glob(os.path.join(REPO, "docs", "*.md")))
        self.assertGreater(len(sources), 5)
        for src in sources:
            gz = os.path.join(doc, os.path.basename(src) + ".gz")
            self.assertTrue(os.path.isfile(gz), gz)
            with gzip.open(gz, "rb") as f, open(src, "rb") as g:
                self.assertEqual(f.read(), g.read(), src)
            with open(gz, "rb") as f:
                head = f.read(10)
            self.assertEqual((head[3] & 0x08, head[4:8]), (0, b"\0\0\0\0"), gz)
        # every path the man pages and `stalkd -h` name there is in the package, and every
        # document the man pages name by itself too
        texts = [run([os.path.join(self.root, "usr/bin/stalkd"), "-h"], timeout=10).stdout]
        pages = ["usr/share/man/man8/stalkd.8.gz"]
        if has_cli():
            pages.append("usr/share/man/man1/stalk.1.gz")
        for page in pages:
            with gzip.open(os.path.join(self.root, page), "rt") as f:
                texts.append(roff_text(f.read())[0])
        named = set()
        for text in texts:
            for path in re.findall(r"/usr/share/doc/stalkd(?:/[\w.-]+)?", text):
                named.add(path.rstrip("."))
            for name in re.findall(r"(?<![\w/.-])([A-Z][\w-]*\.md\.gz)", text):
                named.add("/usr/share/doc/stalkd/" + name)
        self.assertIn("/usr/share/doc/stalkd/HTTP.md.gz", named)
        self.assertIn("/usr/share/doc/stalkd/SCALE-OUT.md.gz", named)
        for path in sorted(named):
            self.assertTrue(os.path.exists(os.path.join(self.root, path.lstrip("/"))), path)

    # ---- the installed binary

    def test_installed_binary_runs_and_serves(self):
        binary = os.path.join(self.root, "usr/bin/stalkd")
        for flag in ("--version", "-v"):
            p = run([binary, flag], timeout=10)
            self.assertEqual((p.returncode, p.stdout), (0, "stalkd %s\n" % project_version()))
        binlog = os.path.join(self.tmp, "binlog")
        os.mkdir(binlog)
        srv = beanstalk.Server(binary=binary, args=("-b", binlog))
        self.addCleanup(srv.stop)
        c = Client(srv.address())
        self.addCleanup(c.close)
        self.assertEqual(c.put("packaged"), b"INSERTED 1\r\n")
        self.assertEqual(c.cmd("reserve-with-timeout 0"), b"RESERVED 1 8\r\npackaged\r\n")
        self.assertEqual(c.cmd("delete 1"), b"DELETED\r\n")
        stats = beanstalk.stats_of(c, "stats")
        self.assertEqual(stats["version"], '"%s"' % project_version())
        self.assertTrue(glob.glob(os.path.join(binlog, "binlog.*")))

    # ---- the man page

    def man_source(self):
        with gzip.open(os.path.join(self.root, "usr/share/man/man8/stalkd.8.gz"), "rt") as f:
            return f.read()

    def test_man_page_documents_every_flag_of_help(self):
        p = run([os.path.join(self.root, "usr/bin/stalkd"), "-h"], timeout=10)
        entries = help_entries(p.stdout)
        self.assertGreater(len(entries), 15, p.stdout)
        text, tags = roff_text(self.man_source())
        for entry in entries:
            self.assertIn(entry, text, "stalkd -h's entry is not in stalkd.8 in these words")
        # and the man page lists no flag that -h does not
        flags_in_help = {w for e in entries for w in re.findall(r"(?<!\S)--?[A-Za-z][\w-]*", e)}
        for tag in tags:
            if tag.startswith("-"):
                for flag in re.findall(r"(?<!\S)--?[A-Za-z][\w-]*", tag.replace(",", " ")):
                    self.assertIn(flag, flags_in_help, "stalkd.8 documents %s" % flag)

    def test_man_page_renders_without_warnings(self):
        if not shutil.which("man"):
            self.skipTest("man is missing")
        pages = ["usr/share/man/man8/stalkd.8.gz"]
        if has_cli():
            pages.append("usr/share/man/man1/stalk.1.gz")
        for page in pages:
            p = run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z",
                     os.path.join(self.root, page)], env=dict(os.environ, MANWIDTH="80"))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stderr, "", page)

    # ---- the stalk CLI

    def stalk(self):
        if not has_cli():
            self.skipTest("this build has no stalk CLI")
        return os.path.join(self.root, "usr/bin/stalk")

    def test_cli_installed_and_talks_to_the_server(self):
        stalk = self.stalk()
        p = run([stalk, "--version"], timeout=10)
        self.assertEqual((p.returncode, p.stdout), (0, "stalk %s\n" % project_version()))
        srv = beanstalk.Server(binary=os.path.join(self.root, "usr/bin/stalkd"))
        self.addCleanup(srv.stop)
        addr = "127.0.0.1:%d" % srv.port
        p = run([stalk, "-s", addr, "put", "-t", "pkg", "packaged"], timeout=10)
        self.assertEqual((p.returncode, p.stdout), (0, "inserted 1\n"), p.stderr)
        p = run([stalk, "-s", addr, "--json", "stats-tube", "pkg"], timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"current-jobs-ready":1', p.stdout)

    def test_cli_man_page_documents_every_command_and_option(self):
        stalk = self.stalk()
        with gzip.open(os.path.join(self.root, "usr/share/man/man1/stalk.1.gz"), "rt") as f:
            source = f.read()
        main_help = run([stalk, "--help"], timeout=10).stdout
        commands = [sorted(flags)[0] for flags, _ in cli_help_entries(main_help, "Subcommands:")]
        self.assertGreater(len(commands), 15, main_help)
        sections = roff_sections(roff_sections(source, "SH")["COMMANDS"], "SS")
        # the commands, in the order of --help, each a .SS of COMMANDS named after it
        self.assertEqual([t.split()[0].replace("\\-", "-") for t in sections], commands)
        scopes = [("", main_help, roff_sections(source, "SH")["OPTIONS"])]
        for title, body in sections.items():
            cmd = title.split()[0].replace("\\-", "-")
            scopes.append((cmd, run([stalk, cmd, "--help"], timeout=10).stdout, body))
        for cmd, help_text, roff in scopes:
            text, tags = roff_text(roff)
            documented = {flag for tag in tags
                          for flag in re.findall(r"(?<!\S)--?[A-Za-z][\w-]*", tag.replace(",", " "))}
            entries = cli_help_entries(help_text)
            if cmd:  # each command's -h, --help is documented once, with stalk's options
                entries = [(f, d) for f, d in entries if f != {"-h", "--help"}]
            helped = set().union(*(flags for flags, _ in entries))
            self.assertEqual(documented, helped, "stalk %s: options of --help vs stalk.1" % cmd)
            for flags, desc in entries:
                self.assertIn(desc, text, "stalk %s %s: --help's words are not in stalk.1"
                              % (cmd, "/".join(sorted(flags))))

    # ---- the systemd units

    def test_units_verify(self):
        tool = shutil.which("systemd-analyze")
        if not tool:
            self.skipTest("systemd-analyze is missing: units not verified")
        unit_dir = os.path.join(self.root, "lib/systemd/system")
        # The units' targets (sockets.target, multi-user.target, ...) from this system, so
        # that the scratch root is a complete one for --root.
        for target in glob.glob("/lib/systemd/system/*.target"):
            dest = os.path.join(unit_dir, os.path.basename(target))
            if not os.path.exists(dest):
                shutil.copy(target, dest)
        # A unit known to be good first: if that fails, systemd-analyze cannot run here.
        probe = os.path.join(unit_dir, "stalkd-probe.service")
        with open(probe, "w") as f:
            f.write("[Service]\nExecStart=/usr/bin/stalkd -v\n")
        argv = [tool, "verify", "--man=no", "--root=" + self.root]
        p = run(argv + [probe])
        os.unlink(probe)
        if p.returncode != 0:
            self.skipTest("systemd-analyze verify cannot run in this environment: %s"
                          % (p.stderr.strip() or p.returncode))
        p = run(argv + [os.path.join(self.root, u) for u in UNITS])
        problems = [line for line in p.stderr.splitlines() if "stalkd." in line]
        sys.stderr.write("\nsystemd-analyze verify: exit %d, %d remark(s) on stalkd's units\n"
                         % (p.returncode, len(problems)))
        self.assertEqual((p.returncode, problems), (0, []), p.stderr)

    def test_service_syscall_filter_allows_what_stalkd_calls(self):
        # The unit's SystemCallFilter= (@system-service less @privileged) must allow every
        # system call stalkd makes, binlog and fsync included: traced here, since systemd
        # itself does not run in the test.
        for tool in ("strace", "systemd-analyze"):
            if not shutil.which(tool):
                self.skipTest("%s is missing: the system call filter is not checked" % tool)
        with open(os.path.join(self.root, UNITS[1])) as f:
            filters = re.findall(r"^SystemCallFilter=(.*)$", f.read(), re.M)
        self.assertEqual(filters, ["@system-service", "~@privileged"])
        cache = {}

        def expand(group):
            if group not in cache:
                out = run(["systemd-analyze", "syscall-filter", group]).stdout
                names = set()
                for line in out.splitlines()[1:]:
                    t = line.strip()
                    if t and not t.startswith("#"):
                        names |= expand(t) if t.startswith("@") else {t}
                cache[group] = names
            return cache[group]

        allowed = expand("@system-service") - expand("@privileged")
        if not allowed:
            self.skipTest("systemd-analyze syscall-filter gave nothing")
        log = os.path.join(self.tmp, "strace.log")
        binlog = os.path.join(self.tmp, "binlog-strace")
        os.mkdir(binlog)
        port = free_port()
        err = open(os.path.join(self.tmp, "strace.err"), "w+")
        self.addCleanup(err.close)
        proc = subprocess.Popen(["strace", "-f", "-qq", "-o", log, os.path.join(
            self.root, "usr/bin/stalkd"), "-l", "127.0.0.1", "-p", str(port), "-b", binlog,
            "-f", "0"], stdout=subprocess.DEVNULL, stderr=err)
        c = None
        try:
            deadline = time.monotonic() + 20
            while c is None:
                try:
                    c = Client(("127.0.0.1", port))
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err.seek(0)
                        self.skipTest("stalkd does not run under strace here: %s"
                                      % err.read()[-300:])
                    time.sleep(0.05)
            self.assertEqual(c.put("x", delay=1), b"INSERTED 1\r\n")
            self.assertEqual(c.cmd("reserve-with-timeout 3"), b"RESERVED 1 1\r\nx\r\n")
            self.assertEqual(c.cmd("release 1 0 0"), b"RELEASED\r\n")
            c.cmd("reserve")
            self.assertEqual(c.cmd("bury 1 0"), b"BURIED\r\n")
            self.assertEqual(c.cmd("kick 1"), b"KICKED 1\r\n")
            self.assertTrue(c.cmd("stats").startswith(b"OK "))
            self.assertEqual(c.cmd("delete 1"), b"DELETED\r\n")
        finally:
            if c is not None:
                c.close()
            # SIGTERM to stalkd itself (the first pid in the trace): it stops cleanly, and
            # strace exits with it.
            with open(log) as f:
                first = f.readline().split()
            if first and first[0].isdigit():
                os.kill(int(first[0]), signal.SIGTERM)
            else:
                proc.kill()
            proc.wait(timeout=20)
        used = set()
        with open(log) as f:
            for line in f:
                m = re.match(r"^\d+\s+([a-z0-9_]+)\(", line)
                if m:
                    used.add(m.group(1))
        used.discard("execve")  # strace's own exec of stalkd, before any filter applies
        self.assertGreater(len(used), 20)
        self.assertEqual(sorted(used - allowed), [])

    # ---- lintian

    def test_lintian(self):
        if not shutil.which("lintian"):
            self.skipTest("lintian is missing (scripts/setup.sh installs it)")
        p = run(["lintian", "--pedantic", "--display-info", self.deb])
        tags = [line for line in p.stdout.splitlines() if re.match(r"^[EWIPXO]: ", line)]
        errors = [t for t in tags if t.startswith("E: ")]
        sys.stderr.write("\nlintian: %d error(s), %d warning(s), %d note(s)\n%s\n"
                         % (len(errors), sum(t.startswith("W: ") for t in tags),
                            sum(not t.startswith(("E: ", "W: ")) for t in tags),
                            "\n".join(tags)))
        self.assertEqual(errors, [], p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()

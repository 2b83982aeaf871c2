"""Differential test: stalkd versus Debian's beanstalkd 1.12, byte for byte.

The same seeded, randomised command sequence is sent to a fresh stalkd and a fresh
beanstalkd. Several connections are used per run, and their commands are interleaved,
but strictly one at a time: a command is sent, its whole reply is read from both
servers, and only then is the next command generated. Nothing in a run depends on
time: delays, TTRs and pauses are >= 1000 s (or 0), so no job or pause ever expires,
and jobs with a tiny TTR live only in a tube that no connection ever watches or
reserves from. Connection counts never race: a new connection's first command is sent
before any other, and a connection closed by its client is gone for any command that
arrives after the close (beanstalkd handles its events in the order they came, and stalkd
must count alike): category drop stops the server (SIGSTOP), closes a connection, sends
`stats` on another and resumes it, so that both reach the server together.

The generator keeps a small model of the server (jobs, states, tubes, watch lists,
pauses) driven by beanstalkd's replies. It uses it to pick meaningful arguments, to send
a blocking `reserve` only when a job is certainly available, and for the one deliberate
exception to "one command at a time" (category reserve_wait): a connection may block in
`reserve` with no job available. Both servers are then polled in lockstep with `stats` on
another connection until they show the client waiting (so cmd-stats stays equal), and its
RESERVED reply is read right after the command (on another connection) that the model
says hands it a job - deterministic, because beanstalkd serves a waiting client before it
answers the command that made a job ready.
A contradiction between beanstalkd and the model is reported as a harness error.

Fixed scenarios in tests/compat/*.txt (format: parse_transcript) run the same way.

Replies are compared whole: stats, stats-tube and stats-job must have the same keys in the
same order (no normaliser removes a key), and every value is compared except:
  * stats: the values in STATS_VOLATILE (pid, version, rusage-*, uptime, id), each with
    its reason, are replaced on both sides (and the `OK <n>` byte count is recomputed);
  * YAML double quotes around string values in stats / stats-tube / stats-job
    (1.13 quotes more values than 1.12) are stripped on both sides;
  * stats-job `age` / `time-left` and stats-tube `pause-time-left` may differ by 1
    (whole seconds, read at slightly different instants on the two servers), but only
    once EXACT_WITHIN (0.9 s) has passed since the sequence began: before that no second
    can have ticked between an event and its read, and they must be equal.
Everything else, job ids included, must be identical.

Run:   python3 -m unittest -v tests/compat/test_differential.py      (from the repo root)
Env:   STALKD_BIN      candidate binary   (default build/release/stalkd)
       BEANSTALKD_BIN  reference binary   (default /usr/bin/beanstalkd)
       STALKD_DIFF_ALLOW_SKIP=1  skip instead of fail when a binary is missing
       DIFF_SEEDS      seeds to run instead of the fixed CI set: "7", "1,5,9", "100-199",
                       or "random:50" (50 random seeds, printed)
       DIFF_COMMANDS   commands per seed (default 300)
       DIFF_SKIP       comma-separated generator categories to leave out, to look past a
                       known mismatch (names are printed in each failure report)
       DIFF_VERBOSE=1  print every step
Self-check of the harness (must pass: proves the normaliser and sequences are race-free):
       STALKD_BIN=/usr/bin/beanstalkd python3 -m unittest -v tests/compat/test_differential.py
"""
import os
import random
import signal
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import beanstalk  # noqa: E402

STALKD_BIN = os.environ.get("STALKD_BIN", os.path.join(REPO, "build", "release", "stalkd"))
BEANSTALKD_BIN = os.environ.get("BEANSTALKD_BIN", "/usr/bin/beanstalkd")

CI_SEEDS = list(range(1, 21))           # fixed set: 20 seeds
DEFAULT_COMMANDS = 300                  # per seed
REPLY_TIMEOUT = 5.0                     # a reply that takes longer is recorded as <TIMEOUT>
MAX_LINE = 224                          # longest command line generated, CRLF included

# ---------------------------------------------------------------------------------------
# Reply normalisation and comparison
# ---------------------------------------------------------------------------------------

# The values of `stats` that legitimately differ between two processes: each is replaced on
# both sides, its key kept. Everything else in stats is compared (hostname, os and platform
# too: both servers run on this machine; the binlog-* values: neither has -b).
STATS_VOLATILE = {
    b"pid": "each process's own",
    b"version": "stalkd's own version; the reference is beanstalkd 1.12",
    b"rusage-utime": "the CPU time each process has used",
    b"rusage-stime": "the same, in the kernel",
    b"uptime": "each process's age: they start one after the other, a second may tick between",
    b"id": "random, per process",
}
# Time values read at slightly different instants on the two servers: equal within 1 s,
# once a second may have ticked between an event and its read (EXACT_WITHIN).
TOLERANT = {"stats-job": {b"age", b"time-left"}, "stats-tube": {b"pause-time-left"}}
# For this long after a sequence begins, every event of it is younger than a second on both
# servers, so whole-second values (age 0, time-left ttr-1, ...) must be identical.
EXACT_WITHIN = 0.9
YAML_OPS = ("stats", "stats-job", "stats-tube")


def _split_ok(reply):
    """The body of a well-formed `OK <n>\\r\\n<body>\\r\\n` reply, else None."""
    if not reply.startswith(b"OK ") or b"\r\n" not in reply:
        return None
    head, rest = reply.split(b"\r\n", 1)
    try:
        n = int(head[3:])
    except ValueError:
        return None
    if len(rest) != n + 2 or not rest.endswith(b"\r\n"):
        return None
    return rest[:-2]


def _yaml_pairs(body):
    """List of [key, value] for a flat YAML mapping body, or None if it is not one."""
    if not body.startswith(b"---\n"):
        return None
    lines = body[4:].split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    else:
        return None
    pairs = []
    for line in lines:
        if b": " not in line:
            return None
        k, v = line.split(b": ", 1)
        pairs.append([k, v])
    return pairs


def _rebuild(pairs):
    body = b"---\n" + b"".join(k + b": " + v + b"\n" for k, v in pairs)
    return b"OK %d\r\n%s\r\n" % (len(body), body)


def normalise(reply, op):
    """Normalised YAML pairs of a stats-like reply, or None (compare raw bytes)."""
    if op not in YAML_OPS:
        return None
    body = _split_ok(reply)
    if body is None:
        return None
    pairs = _yaml_pairs(body)
    if pairs is None:
        return None
    for p in pairs:
        v = p[1]
        if len(v) >= 2 and v.startswith(b'"') and v.endswith(b'"'):
            p[1] = v[1:-1]
        if op == "stats" and p[0] in STATS_VOLATILE:
            p[1] = b"<normalised>"
    return pairs


def compare(ref, cand, op, exact_times=False):
    """(equal, ref_shown, cand_shown): the normalised forms when they are YAML replies.
    exact_times: less than EXACT_WITHIN seconds have passed since the sequence began, so no
    whole second can have ticked between an event and its read on either server: TOLERANT
    values must be equal too (a store that rounds up, or reads a coarser clock, shows here)."""
    if ref == cand and op not in YAML_OPS:
        return True, ref, cand
    rp, cp = normalise(ref, op), normalise(cand, op)
    if rp is None or cp is None:
        return ref == cand, ref, cand
    tol = () if exact_times else TOLERANT.get(op, ())
    if len(rp) == len(cp):
        for a, b in zip(rp, cp):
            if a[0] == b[0] and a[0] in tol and a[1].isdigit() and b[1].isdigit() \
                    and abs(int(a[1]) - int(b[1])) <= 1:
                b[1] = a[1]
    rn, cn = _rebuild(rp), _rebuild(cp)
    return rn == cn, rn, cn


# ---------------------------------------------------------------------------------------
# Servers and connections
# ---------------------------------------------------------------------------------------

CLOSED = b"<closed>"
TIMEOUT = b"<TIMEOUT>"


class Side:
    """One server plus its client connections, addressed by slot number."""

    def __init__(self, binary, args):
        # beanstalk.Server's readiness probe connects and closes at once, as a client's
        # harness does: the first `stats` must not count it.
        self.server = beanstalk.Server(binary, args)
        self.conns = {}

    def stop(self):
        for c in self.conns.values():
            try:
                c.close()
            except OSError:
                pass
        self.conns.clear()
        self.server.stop()

    def _read_reply(self, c):
        try:
            r = c.read_reply()
        except (EOFError, ConnectionResetError, BrokenPipeError):
            return c.buf + CLOSED
        except socket.timeout:
            return c.buf + TIMEOUT
        except (ValueError, IndexError):        # malformed length in an OK/FOUND/RESERVED line
            try:
                c._fill()
            except Exception:
                pass
            return b"<UNPARSABLE>" + c.buf
        if c.buf:                               # bytes beyond one reply: a protocol error
            r += b"<EXTRA BYTES>" + c.buf
            c.buf = b""
        return r

    def run(self, step):
        if step.kind == "connect":
            self.conns[step.slot] = self.server.connect(timeout=REPLY_TIMEOUT)
            return b"<connected>"
        if step.kind == "drop":
            # While the server is stopped: the client closes its connection at once, and
            # another sends `stats`; the server then finds both, in that order.
            other = self.conns[step.args["other"]]
            beanstalk.stop_process(self.server.pid)
            try:
                self.conns.pop(step.slot).close()
                other.send(b"stats\r\n")
            finally:
                self.server.signal(signal.SIGCONT)
            return self._read_reply(other)
        c = self.conns[step.slot]
        if step.kind == "collect":
            return self._read_reply(c)
        try:
            for i, chunk in enumerate(step.chunks):
                if i:
                    time.sleep(0.002)
                c.send(chunk)
            if step.kind == "close":
                c.sock.shutdown(socket.SHUT_WR)
                out = b""
                while True:
                    r = self._read_reply(c)
                    if r.endswith(CLOSED) or r.endswith(TIMEOUT):
                        return out + r
                    out += r
        except (BrokenPipeError, ConnectionResetError):
            return b"<send failed>" + CLOSED
        if step.kind == "wait":
            return b"<waiting>"
        return self._read_reply(c)

    def drop(self, slot):
        c = self.conns.pop(slot, None)
        if c:
            c.close()


# ---------------------------------------------------------------------------------------
# Model: just enough server state to pick interesting arguments, and to prove that a
# blocking reserve will find a job (and so never block).
# ---------------------------------------------------------------------------------------

class Job:
    def __init__(self, jid, tube, pri, delay, ttr, seq):
        self.id, self.tube, self.pri, self.ttr = jid, tube, pri, ttr
        self.state, self.reserver = "ready", None
        self.key = seq                      # delayed ordering key / bury order
        self.set_delay(delay, seq)

    def set_delay(self, delay, seq):
        if delay:
            self.state = "delayed"
            self.key = (delay, seq)         # delays are >= 100 s apart: no cross-server tie
        else:
            self.state = "ready"
        self.rseq = 0


class ConnModel:
    def __init__(self):
        self.use = "default"
        self.watch = ["default"]


class HarnessError(AssertionError):
    pass


class Model:
    def __init__(self):
        self.jobs = {}
        self.conns = {}
        self.paused = set()
        self.seq = 0
        self.max_id = 0
        self.gone_ids = []
        self.newly_ready = []       # jobs made ready by the current step, in enqueue order
        self.unpaused = False       # the current step unpaused a tube

    def next_seq(self):
        self.seq += 1
        return self.seq

    def tube_alive(self, t):
        if t == "default":
            return True
        if any(j.tube == t for j in self.jobs.values()):
            return True
        return any(c.use == t or t in c.watch for c in self.conns.values())

    def tubes(self):
        ts = {"default"}
        ts.update(j.tube for j in self.jobs.values())
        for c in self.conns.values():
            ts.add(c.use)
            ts.update(c.watch)
        return ts

    def predicted_reserve(self, slot):
        c = self.conns[slot]
        best = None
        for j in self.jobs.values():
            if j.state == "ready" and j.tube in c.watch and j.tube not in self.paused:
                if best is None or (j.pri, j.id) < (best.pri, best.id):
                    best = j
        return best

    def remove(self, jid):
        self.jobs.pop(jid, None)
        self.gone_ids.append(jid)

    def reserve(self, j, slot):
        j.state, j.reserver, j.rseq = "reserved", slot, self.next_seq()

    def close_conn(self, slot):
        c = self.conns.pop(slot, None)
        held = sorted((j for j in self.jobs.values() if j.state == "reserved" and j.reserver == slot),
                      key=lambda j: j.rseq)
        for j in held:              # given back oldest reservation first
            j.state, j.reserver = "ready", None
            self.newly_ready.append(j)
        self.gc()
        return c

    def eligible(self, slot, j):
        c = self.conns[slot]
        return j.state == "ready" and j.tube in c.watch and j.tube not in self.paused

    def gc(self):
        self.paused = {t for t in self.paused if self.tube_alive(t)}

    def kick(self, slot, n):
        tube = self.conns[slot].use
        buried = sorted((j for j in self.jobs.values() if j.tube == tube and j.state == "buried"),
                        key=lambda j: j.key)
        if buried:
            pool = buried
        else:
            pool = sorted((j for j in self.jobs.values()
                           if j.tube == tube and j.state == "delayed"), key=lambda j: j.key)
        for j in pool[:n]:
            j.state = "ready"
            self.newly_ready.append(j)
        return min(n, len(pool))


# ---------------------------------------------------------------------------------------
# Command generation
# ---------------------------------------------------------------------------------------

LONG200 = ("long-" + "abcdefghijklmnopqrstuvwxyz0123456789-+/;.$()_" * 5)[:200]
LONG201 = LONG200 + "x"
SLOW_TUBE = "slowttr"   # jobs with TTR < 1000 s go only here; nobody ever watches it
WATCH_NAMES = ["default", "default", "t1", "t1", "t2", "tube-3", "a_b", "x.y", "$(z)",
               "p+q;r/s", "A", "0", LONG200]
USE_NAMES = WATCH_NAMES + [SLOW_TUBE]
BAD_NAMES = [LONG201, "-dash", "bad!", "sp ace", "caf\u00e9", "", " lead", "trail ", "a\tb",
             "x*y", "#hash", "a,b", "q\"uote", "-"]

PRIS = [0, 0, 1, 5, 1023, 1024, 65535, 2 ** 31, 4294967295]
DELAYS = [1000, 2000, 5000, 100000, 4294967295]   # pairwise >100 s apart: see Job.key
TTRS = [1000, 3600, 86400, 4294967295]
SMALL_TTRS = [0, 1, 2, 30, 999]

U32_BAD = ["4294967296", "99999999999999999999", "-1", "+1", "1x", "abc", "0x10", "1.5", ""]
U64_BAD = ["18446744073709551616", "99999999999999999999999", "-1", "+1", "1x", "abc",
           "0x1", "", " ", "1 ", "1 2", "1.0"]

PREFIXES = [b"put ", b"peek", b"reserve", b"delete ", b"release ", b"bury ", b"kick",
            b"touch ", b"stats", b"use ", b"watch ", b"ignore ", b"list-tube", b"quit",
            b"pause-tube"]

# category -> relative weight
WEIGHTS = {
    "put": 14, "put_bad": 3, "put_toobig": 1.2, "put_toobig_trailing": 0.3, "put_crlf": 1.2,
    "put_smallttr": 1,
    "reserve0": 9, "reserve_block": 3, "reserve_bad": 1, "reserve_job": 3,
    "delete": 5, "release": 6, "bury": 4, "touch": 3, "idcmd_bad": 2,
    "kick": 3, "kick_quirks": 0.6, "kick_job": 2.5,
    "peek": 5, "peek_bad": 1,
    "stats_job": 4, "stats_tube": 3, "stats": 2, "lists": 3, "lists_bad": 0.7,
    "use": 5, "watch": 5, "ignore": 4, "name_bad": 2,
    "pause": 2, "pause_bad": 0.6,
    "quit": 0.7, "quit_prefix": 0.3, "close": 1.2, "drop": 1,
    "reserve_wait": 1.5, "wait_close": 0.3,
    "garbage": 3,
}


class Step:
    __slots__ = ("slot", "kind", "chunks", "op", "cat", "args")

    def __init__(self, slot, kind, data=b"", op="", cat="", args=None):
        self.slot, self.kind, self.op, self.cat = slot, kind, op, cat
        self.chunks = [data] if isinstance(data, bytes) else list(data)
        self.args = args or {}

    @property
    def data(self):
        return b"".join(self.chunks)


def b(s):
    return s.encode("utf-8") if isinstance(s, str) else s


class Generator:
    def __init__(self, seed, n_conns, max_job_size, skip=()):
        self.rng = random.Random(seed)
        self.model = Model()
        self.n_conns = n_conns
        self.max_job_size = max_job_size
        self.slots = list(range(n_conns))
        self.pending = []
        self.waiting = None         # the slot blocked in a reserve, if any (at most one)
        cats = [c for c in WEIGHTS if c not in skip]
        self.cats = cats
        self.cat_weights = [WEIGHTS[c] for c in cats]
        for s in self.slots:
            self.pending.append(("connect", s))
            self.pending.append(("sync", s))

    # -- argument pickers --------------------------------------------------------------

    def pick_id(self, slot, prefer=()):
        r = self.rng.random()
        prefer = list(prefer)
        if prefer and r < 0.7:
            return self.rng.choice(prefer)
        if self.model.jobs and r < 0.88:
            return self.rng.choice(sorted(self.model.jobs))
        extra = [0, self.model.max_id + 1, self.model.max_id + 2, 2 ** 63, 2 ** 64 - 1]
        if self.model.gone_ids:
            extra += [self.rng.choice(self.model.gone_ids)] * 3
        return self.rng.choice(extra)

    def id_text(self, jid):
        r = self.rng.random()
        if r < 0.04:
            return " %d" % jid          # extra leading space: accepted
        if r < 0.07:
            return "0%d" % jid          # leading zero: accepted
        return "%d" % jid

    def reserved_by(self, slot):
        return sorted(j.id for j in self.model.jobs.values()
                      if j.state == "reserved" and j.reserver == slot)

    def body(self, n):
        r = self.rng.random()
        if r < 0.4:
            return bytes(self.rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(n))
        if r < 0.6:
            return bytes(self.rng.choice(b"\r\n\x00ab ") for _ in range(n))
        return bytes(self.rng.getrandbits(8) for _ in range(n))

    def body_size(self):
        r = self.rng.random()
        if r < 0.1:
            return 0
        if r < 0.75:
            return self.rng.randint(1, 40)
        if r < 0.9:
            return self.rng.randint(41, min(600, self.max_job_size))
        return self.rng.choice([self.max_job_size, self.max_job_size - 1])

    def maybe_split(self, data):
        """Occasionally deliver one command in several writes."""
        if len(data) < 2 or self.rng.random() > 0.06:
            return [data]
        cuts = sorted(self.rng.sample(range(1, len(data)), min(len(data) - 1, self.rng.randint(1, 3))))
        out, prev = [], 0
        for c in cuts + [len(data)]:
            out.append(data[prev:c])
            prev = c
        return out

    def cmd(self, slot, line, op, cat, **args):
        data = b(line) + b"\r\n"
        assert len(data) <= MAX_LINE or op == "put", data
        return Step(slot, "cmd", self.maybe_split(data), op, cat, args)

    # -- step generation ---------------------------------------------------------------

    def next_step(self):
        if self.pending:
            kind, slot = self.pending.pop(0)[:2]
            if kind == "connect":
                self.model.conns[slot] = ConnModel()
                return Step(slot, "connect", op="connect", cat="connect")
            if kind == "collect":
                return Step(slot, "collect", op="reserve", cat="reserve_wait",
                            args=dict(id=self.wake_id))
            return self.gen(slot, sync=True)
        return self.gen(self.rng.choice([s for s in self.slots if s != self.waiting]))

    def gen(self, slot, sync=False):
        while True:
            cat = self.rng.choices(self.cats, self.cat_weights)[0]
            if sync and cat in ("quit", "quit_prefix", "close", "drop", "reserve_wait"):
                continue
            if cat == "wait_close":
                if self.waiting is None:
                    continue
                return Step(self.waiting, "close", [], "close", "wait_close")
            step = getattr(self, "g_" + cat)(slot)
            if step is not None:
                return step

    def g_put(self, slot):
        if self.model.conns[slot].use == SLOW_TUBE and self.rng.random() < 0.5:
            return self.g_put_smallttr(slot)
        pri, ttr = self.rng.choice(PRIS), self.rng.choice(TTRS)
        delay = self.rng.choice(DELAYS) if self.rng.random() < 0.25 else 0
        n = self.body_size()
        nums = [str(pri), str(delay), str(ttr), str(n)]
        if self.rng.random() < 0.05:
            nums = ["0" + x for x in nums]
        sep = [" "] * 4
        if self.rng.random() < 0.05:
            sep = [self.rng.choice([" ", "  ", "   "]) for _ in range(4)]
        line = "put" + "".join(s + x for s, x in zip(sep, nums))
        data = b(line) + b"\r\n" + self.body(n) + b"\r\n"
        return Step(slot, "cmd", self.maybe_split(data), "put", "put",
                    dict(pri=pri, delay=delay, ttr=ttr, expect="INSERTED"))

    def g_put_smallttr(self, slot):
        if self.model.conns[slot].use != SLOW_TUBE:
            return self.cmd(slot, "use " + SLOW_TUBE, "use", "put_smallttr", name=SLOW_TUBE)
        ttr = self.rng.choice(SMALL_TTRS)
        delay = self.rng.choice([0, 0, 1000])
        n = self.rng.randint(0, 10)
        data = b"put 7 %d %d %d\r\n%s\r\n" % (delay, ttr, n, self.body(n))
        return Step(slot, "cmd", [data], "put", "put_smallttr",
                    dict(pri=7, delay=delay, ttr=ttr, expect="INSERTED"))

    def g_put_bad(self, slot):
        good = ["0", "0", "1000", "5"]
        r = self.rng.random()
        if r < 0.3:
            args = list(good)
            args[self.rng.randrange(4)] = self.rng.choice(U32_BAD[:-1])
            line = "put " + " ".join(args)
        elif r < 0.5:
            line = "put " + " ".join(good[:self.rng.randint(0, 3)])
        elif r < 0.6:
            line = "put 0 0 1000 5 6"
        elif r < 0.7:
            line = "put 0 0 1000 5 "
        elif r < 0.8:
            line = "put 0\t0 1000 5"
        elif r < 0.9:
            line = self.rng.choice(["put", "put0 0 1000 5", "PUT 0 0 1000 5", " put 0 0 1000 5"])
        else:
            line = "put 0 0 1000 5\x00"
        # no body: the reference rejects the line, so a body would be read as commands
        return self.cmd(slot, line, "put", "put_bad", expect="reject")

    def g_put_toobig(self, slot):
        n = self.max_job_size + self.rng.choice([1, 2, self.rng.randint(3, 300)])
        line = "put %d 0 1000 %d" % (self.rng.choice(PRIS), n)
        data = b(line) + b"\r\n" + self.body(n) + b"\r\n"
        return Step(slot, "cmd", self.maybe_split(data), "put", "put_toobig", dict(expect="JOB_TOO_BIG"))

    def g_put_toobig_trailing(self, slot):
        # size over the limit and trailing garbage: 1.12 checks the size first
        n = self.max_job_size + self.rng.randint(1, 50)
        line = "put 0 0 1000 %d%s" % (n, self.rng.choice(["x", " ", " 1"]))
        data = b(line) + b"\r\n" + self.body(n) + b"\r\n"
        return Step(slot, "cmd", [data], "put", "put_toobig_trailing", dict(expect="JOB_TOO_BIG"))

    def g_put_crlf(self, slot):
        n = self.rng.randint(0, 30)
        tail = self.rng.choice([b"XY", b"\n\r", b"\r\r", b"\rX", b"X\n", b"\n\n", b"  ", b"\r\x00"])
        data = b"put 1 0 1000 %d\r\n%s%s" % (n, self.body(n), tail)
        return Step(slot, "cmd", self.maybe_split(data), "put", "put_crlf", dict(expect="EXPECTED_CRLF"))

    def reserve_timeout_text(self):
        # 1.12 (strtol) and 1.13 (read_u32 with an end pointer) both ignore what follows
        return self.rng.choice(["0", "0", "0", "00", "0x", "0 5", "  0", "0 ", "0x10", "0\t"])

    def g_reserve0(self, slot):
        return self.cmd(slot, "reserve-with-timeout " + self.reserve_timeout_text(),
                        "reserve", "reserve0", predict=True)

    def g_reserve_block(self, slot):
        j = self.model.predicted_reserve(slot)
        if j is None:
            return None     # would block: never sent
        line = self.rng.choice(["reserve", "reserve-with-timeout 1", "reserve-with-timeout 1000",
                                "reserve-with-timeout 4294967", "reserve-with-timeout 1000 x",
                                "reserve-with-timeout 2147483647x"])
        return self.cmd(slot, line, "reserve", "reserve_block", predict=True)

    def g_reserve_wait(self, slot):
        """A reserve that blocks: its reply is read when the model says a later command
        (on another connection) hands it a job, or when the connection is closed."""
        others = [s for s in self.slots if s != slot and s in self.model.conns]
        if self.waiting is not None or not others or self.model.predicted_reserve(slot):
            return None
        line = self.rng.choice(["reserve", "reserve-with-timeout 1000", "reserve-with-timeout 86400"])
        return Step(slot, "wait", [b(line) + b"\r\n"], "reserve", "reserve_wait")

    def wake_job(self):
        """The job the waiting connection has been handed by the last step, if any."""
        slot, m = self.waiting, self.model
        for j in m.newly_ready:
            if j.id in m.jobs and m.eligible(slot, j):
                return j
        if m.unpaused:      # `pause-tube t 0` wakes waiters at the server's next tick
            return m.predicted_reserve(slot)
        return None

    def g_reserve_bad(self, slot):
        line = self.rng.choice(["reservex", "reserve ", "reserve-with-timeout", "reserve 0",
                                "reserve-job", "reserve-job ", "reserve-job x", "reserve-job -1",
                                "reserve-job 18446744073709551616", "reserve-job 1 ",
                                "reserve-with-timeout 0\x00", "Reserve"])
        return self.cmd(slot, line, "reserve", "reserve_bad", expect="reject")

    def g_reserve_job(self, slot):
        ids = [j.id for j in self.model.jobs.values() if j.ttr >= 1000]
        jid = self.pick_id(slot, ids)
        j = self.model.jobs.get(jid)
        if j is not None and j.ttr < 1000:
            return None
        return self.cmd(slot, "reserve-job " + self.id_text(jid), "reserve-job", "reserve_job", id=jid)

    def g_delete(self, slot):
        jid = self.pick_id(slot, self.reserved_by(slot))
        return self.cmd(slot, "delete " + self.id_text(jid), "delete", "delete", id=jid)

    def g_release(self, slot):
        jid = self.pick_id(slot, self.reserved_by(slot))
        pri = self.rng.choice(PRIS)
        delay = self.rng.choice(DELAYS) if self.rng.random() < 0.3 else 0
        return self.cmd(slot, "release %s %d %d" % (self.id_text(jid), pri, delay), "release",
                        "release", id=jid, pri=pri, delay=delay)

    def g_bury(self, slot):
        jid = self.pick_id(slot, self.reserved_by(slot))
        pri = self.rng.choice(PRIS)
        return self.cmd(slot, "bury %s %d" % (self.id_text(jid), pri), "bury", "bury", id=jid, pri=pri)

    def g_touch(self, slot):
        jid = self.pick_id(slot, self.reserved_by(slot))
        return self.cmd(slot, "touch " + self.id_text(jid), "touch", "touch", id=jid)

    def g_idcmd_bad(self, slot):
        jid = self.pick_id(slot, self.reserved_by(slot))
        bad = self.rng.choice(U64_BAD)
        r = self.rng.random()
        if r < 0.5:
            verb = self.rng.choice(["delete", "touch", "peek", "stats-job", "kick-job", "reserve-job"])
            line = verb + " " + bad
        elif r < 0.7:
            bad = self.rng.choice(["18446744073709551616", "-1", "+1", "1x", "abc", "0x1", "1.0"])
            line = self.rng.choice(["release %s 0 0" % bad, "bury %s 0" % bad])
        elif r < 0.9:
            u = self.rng.choice(U32_BAD)
            line = self.rng.choice(["release %d %s 0" % (jid, u), "release %d 0 %s" % (jid, u),
                                    "bury %d %s" % (jid, u), "release %d 0" % jid,
                                    "release %d" % jid, "bury %d" % jid, "release %d 0 0 0" % jid,
                                    "bury %d 0 0" % jid, "release %d 0 0 " % jid])
        else:
            line = self.rng.choice(["delete", "touch", "bury", "release", "kick-job", "stats-job",
                                    "delete\x00 1", "touch %d\x00" % jid])
        return self.cmd(slot, line, "idcmd", "idcmd_bad", expect="reject")

    def g_kick(self, slot):
        n = self.rng.choice([0, 1, 1, 2, 3, 5, 100, 4294967295])
        text = self.rng.choice(["%d", "%d", "%d", " %d", "0%d"]) % n
        return self.cmd(slot, "kick " + text, "kick", "kick")

    def g_kick_quirks(self, slot):
        line = self.rng.choice(["kick 4294967296", "kick -1", "kick 5x", "kick 18446744073709551616",
                                "kick abc", "kick ", "kick", "kick 2 3", "kick +1"])
        return self.cmd(slot, line, "kick", "kick_quirks")

    def g_kick_job(self, slot):
        ids = [j.id for j in self.model.jobs.values() if j.state in ("buried", "delayed")]
        jid = self.pick_id(slot, ids)
        return self.cmd(slot, "kick-job " + self.id_text(jid), "kick-job", "kick_job", id=jid)

    def g_peek(self, slot):
        r = self.rng.random()
        if r < 0.4:
            return self.cmd(slot, "peek " + self.id_text(self.pick_id(slot)), "peek", "peek")
        return self.cmd(slot, self.rng.choice(["peek-ready", "peek-delayed", "peek-buried"]),
                        "peek", "peek")

    def g_peek_bad(self, slot):
        line = self.rng.choice(["peek", "peek ", "peek-readyx", "peek-ready ", "peek-delayed 1",
                                "peek-buried\x00", "peek-bury", "Peek-ready", "peek-"])
        return self.cmd(slot, line, "peek", "peek_bad", expect="reject")

    def g_stats_job(self, slot):
        return self.cmd(slot, "stats-job " + self.id_text(self.pick_id(slot)), "stats-job", "stats_job")

    def pick_tube(self, existing_bias=0.8):
        existing = sorted(self.model.tubes())
        if self.rng.random() < existing_bias:
            return self.rng.choice(existing)
        return self.rng.choice(USE_NAMES + ["nosuchtube"])

    def g_stats_tube(self, slot):
        return self.cmd(slot, "stats-tube " + self.pick_tube(), "stats-tube", "stats_tube")

    def g_stats(self, slot):
        return self.cmd(slot, "stats", "stats", "stats")

    def g_lists(self, slot):
        line = self.rng.choice(["list-tubes", "list-tube-used", "list-tubes-watched"])
        return self.cmd(slot, line, "list", "lists")

    def g_lists_bad(self, slot):
        line = self.rng.choice(["list-tubesx", "list-tubes ", "list-tube-used x", "list-tubes-watched ",
                                "list-tube", "list", "stats ", "statsx", "stats-job", "stats-tube",
                                "stats-tube ", "stats-tube " + LONG201, "stats-tube -x",
                                "stats-tube bad!", "stats-tube  default"])
        return self.cmd(slot, line, "list", "lists_bad", expect="reject")

    def g_use(self, slot):
        name = self.rng.choice(USE_NAMES)
        return self.cmd(slot, "use " + name, "use", "use", name=name)

    def g_watch(self, slot):
        name = self.rng.choice(WATCH_NAMES)
        return self.cmd(slot, "watch " + name, "watch", "watch", name=name)

    def g_ignore(self, slot):
        c = self.model.conns[slot]
        if self.rng.random() < 0.7:
            name = self.rng.choice(c.watch)
        else:
            name = self.rng.choice(WATCH_NAMES + [SLOW_TUBE, "nosuchtube"])
        return self.cmd(slot, "ignore " + name, "ignore", "ignore", name=name)

    def g_name_bad(self, slot):
        verb = self.rng.choice(["use", "watch", "ignore"])
        name = self.rng.choice(BAD_NAMES)
        fmt = self.rng.choice(["%s %s", "%s %s", "%s  %s", "%s%s"])
        if fmt == "%s%s" and name.startswith(" "):
            fmt = "%s %s"           # "use" + " lead" would be a valid command
        line = fmt % (verb, name)
        if self.rng.random() < 0.1:
            line = verb + " default\x00"
        return self.cmd(slot, line, "name", "name_bad", expect="reject")

    def g_pause(self, slot):
        name = self.pick_tube(0.85)
        delay = self.rng.choice(DELAYS + [0, 0])
        text = str(delay)
        if len("pause-tube %s %s" % (name, text)) + 2 > MAX_LINE:
            delay, text = 1000, "1000"
        return self.cmd(slot, "pause-tube %s %s" % (name, text), "pause-tube", "pause",
                        name=name, delay=delay)

    def g_pause_bad(self, slot):
        name = self.pick_tube(1.0)
        if len(name) > 150:
            name = "default"
        line = self.rng.choice([
            "pause-tube %s" % name, "pause-tube %s " % name, "pause-tube %s -1" % name,
            "pause-tube %s 4294967296" % name, "pause-tube %s 10x" % name, "pause-tube",
            "pause-tube ", "pause-tube -x 1000", "pause-tube bad! 1000", "pause-tube %s 1 2" % name,
            "pause-tube %s 1000" % LONG201[:100] + "!", "pause-tube " + LONG201 + " 1"])
        return self.cmd(slot, line, "pause-tube", "pause_bad", expect="reject")

    def g_quit(self, slot):
        return self.cmd(slot, "quit", "quit", "quit")

    def g_quit_prefix(self, slot):
        return self.cmd(slot, self.rng.choice(["quit ", "quitx", "quit now"]), "quit", "quit_prefix")

    def g_close(self, slot):
        if not self.reserved_by(slot) and self.rng.random() < 0.6:
            return None     # mostly close connections that hold reserved jobs
        partial = self.rng.choice([b"", b"", b"", b"stat", b"put 0 0 1000 10\r\nabc",
                                   b"put 0 0 1000 10\r\n", b"reserve-with-timeout 0"])
        return Step(slot, "close", [partial] if partial else [], "close", "close")

    def g_drop(self, slot):
        others = [s for s in sorted(self.model.conns) if s not in (slot, self.waiting)]
        if self.reserved_by(slot) or not others:
            return None     # its jobs would go to a waiting client: `close` reads that
        other = self.rng.choice(others)
        return Step(slot, "drop", [b"<close>, then on connection %d: stats\r\n" % other],
                    "stats", "drop", dict(other=other))

    def g_garbage(self, slot):
        r = self.rng.random()
        if r < 0.4:
            line = self.rng.choice([b"", b"PUT 0 0 1000 1", b"Stats", b"hello world", b"\x00",
                                    b"use\x00default", b"stats\x00", b" stats", b"\tstats",
                                    b"reserve-with-timeout\x000", b"delete 1\x00", b"\xff\xfe",
                                    b"list-tubes\x00", b"-", b"\n", b"stats\nstats", b"\x00put 0 0 1 1"])
        else:
            alphabet = bytes(range(1, 256)).replace(b"\r", b"")
            while True:
                n = self.rng.randint(1, 60)
                line = bytes(self.rng.choice(alphabet) for _ in range(n))
                if self.rng.random() < 0.2:
                    line = line.replace(line[:1], b"\x00", 1)
                if not any(line.startswith(p) for p in PREFIXES):
                    break
        return self.cmd(slot, line, "garbage", "garbage", expect="reject")

    # -- model update from the reference reply -----------------------------------------

    def update(self, step, reply):
        """Apply the reference server's reply to the model; raise HarnessError when the
        reference contradicts what the model was sure of."""
        m = self.model
        words = reply.split(b"\r\n", 1)[0].split()
        head = words[0] if words else b""

        def expect(ok, what):
            if not ok:
                raise HarnessError("model expected %s" % what)

        if reply.endswith(TIMEOUT) or b"<EXTRA BYTES>" in reply or reply.startswith(b"<UNPARSABLE>"):
            raise HarnessError("the reference server's reply is incomplete or out of step")
        m.newly_ready, m.unpaused = [], False
        result = self._update(step, reply, words, head, expect)
        if self.waiting is not None and step.kind != "collect":
            j = self.wake_job()
            if j is not None:
                self.wake_id = j.id
                self.pending.insert(0, ("collect", self.waiting))
        m.gc()
        return result

    def _update(self, step, reply, words, head, expect):
        m, a, slot = self.model, step.args, step.slot
        if step.kind == "drop":     # the reply is the other connection's `stats`
            m.close_conn(slot)
            self.pending[:0] = [("connect", slot), ("sync", slot)]
            return "closed"
        if reply.endswith(CLOSED):
            if slot == self.waiting:
                self.waiting = None
            m.close_conn(slot)
            self.pending[:0] = [("connect", slot), ("sync", slot)]
            return "closed"
        if step.kind == "connect":
            return None
        if step.kind == "wait":
            self.waiting = slot
            return None
        if step.kind == "collect":
            j = m.jobs.get(a["id"])
            expect(head == b"RESERVED" and int(words[1]) == a["id"], "RESERVED %d" % a["id"])
            m.reserve(j, slot)
            self.waiting = None
            return None
        op = step.op
        exp = a.get("expect")
        if exp == "reject":
            expect(head in (b"BAD_FORMAT", b"UNKNOWN_COMMAND"), "BAD_FORMAT/UNKNOWN_COMMAND")
            return None
        if op == "put":
            if exp == "INSERTED":
                expect(head == b"INSERTED", "INSERTED")
                jid = int(words[1])
                m.max_id = max(m.max_id, jid)
                j = m.jobs[jid] = Job(jid, m.conns[slot].use, a["pri"], a["delay"], a["ttr"],
                                      m.next_seq())
                if j.state == "ready":
                    m.newly_ready.append(j)
            else:
                expect(head == exp.encode(), exp)
                if exp == "EXPECTED_CRLF":
                    m.max_id += 1          # 1.12 spends an id on the discarded job
        elif op == "use" and head == b"USING":
            m.conns[slot].use = a["name"]
        elif op == "watch" and head == b"WATCHING":
            if a["name"] not in m.conns[slot].watch:
                m.conns[slot].watch.append(a["name"])
            expect(int(words[1]) == len(m.conns[slot].watch), "WATCHING %d" % len(m.conns[slot].watch))
        elif op == "ignore":
            w = m.conns[slot].watch
            if head == b"WATCHING" and a["name"] in w:
                w.remove(a["name"])
            if head == b"WATCHING":
                expect(int(words[1]) == len(w), "WATCHING %d" % len(w))
            else:
                expect(head == b"NOT_IGNORED" and w == [a["name"]], "NOT_IGNORED")
        elif op == "reserve":
            j = m.predicted_reserve(slot)
            if head == b"RESERVED":
                jid = int(words[1])
                expect(j is not None and j.id == jid, "RESERVED %s" % (j and j.id))
                m.reserve(j, slot)
            else:
                expect(j is None and head == b"TIMED_OUT", "RESERVED %s" % (j and j.id))
        elif op == "reserve-job":
            j = m.jobs.get(a["id"])
            if head == b"RESERVED":
                expect(j is not None and j.state != "reserved", "NOT_FOUND")
                m.reserve(j, slot)
            else:
                expect(j is None or j.state == "reserved", "RESERVED")
        elif op == "delete":
            j = m.jobs.get(a["id"])
            ok = j is not None and (j.state != "reserved" or j.reserver == slot)
            expect((head == b"DELETED") == ok, "DELETED" if ok else "NOT_FOUND")
            if ok:
                m.remove(a["id"])
        elif op in ("release", "bury", "touch"):
            j = m.jobs.get(a["id"])
            ok = j is not None and j.state == "reserved" and j.reserver == slot
            good = {"release": b"RELEASED", "bury": b"BURIED", "touch": b"TOUCHED"}[op]
            expect((head == good) == ok, good if ok else "NOT_FOUND")
            if ok and op == "release":
                j.pri, j.reserver = a["pri"], None
                j.set_delay(a["delay"], m.next_seq())
                if j.state == "ready":
                    m.newly_ready.append(j)
            elif ok and op == "bury":
                j.pri, j.reserver, j.state, j.key = a["pri"], None, "buried", m.next_seq()
        elif op == "kick" and head == b"KICKED":
            k = int(words[1])
            got = m.kick(slot, k)
            expect(got == k, "at least %d kickable jobs" % k)
        elif op == "kick-job":
            j = m.jobs.get(a["id"])
            ok = j is not None and j.state in ("buried", "delayed")
            expect((head == b"KICKED") == ok, "KICKED" if ok else "NOT_FOUND")
            if ok:
                j.state = "ready"
                m.newly_ready.append(j)
        elif op == "pause-tube":
            alive = m.tube_alive(a["name"])
            expect((head == b"PAUSED") == alive, "PAUSED" if alive else "NOT_FOUND")
            if alive:
                if a["delay"]:
                    m.paused.add(a["name"])
                elif a["name"] in m.paused:
                    m.paused.discard(a["name"])
                    m.unpaused = True
        return None


# ---------------------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------------------

def _show(data, limit=600):
    r = repr(bytes(data))
    return r if len(r) <= limit else r[:limit] + "...(%d bytes)" % len(data)


def sync_until(ref, cand, busy, key, done, what):
    """Poll `stats` on a connection not in `busy`, of both servers in lockstep (so cmd-stats
    grows by the same amount on both), until done(int(value of key)) holds on both.
    Returns (probes sent, error text or None)."""
    probe = next((s for s in sorted(ref.conns) if s not in busy and s in cand.conns), None)
    if probe is None:
        return 0, "no idle connection to check %s with" % key.decode()
    step = Step(probe, "cmd", [b"stats\r\n"], "stats", "sync")
    for n in range(1, 401):
        ready = True
        for side in (ref, cand):
            pairs = normalise(side.run(step), "stats")
            value = dict(pairs or ()).get(key, b"")
            if not value.isdigit():
                return n, "%s: no %s in `stats`" % (side.server.binary, key.decode())
            ready = ready and done(int(value))
        if ready:
            return n, None
        time.sleep(0.005)
    return n, "`stats` %s never reached %s" % (key.decode(), what)


def sync_waiting(ref, cand, waiting):
    """A blocking reserve has been sent on the `waiting` slots and has no reply to read, so
    nothing yet proves the server has processed it; a command sent now on another
    connection could overtake it. Wait until both servers report current-waiting >=
    len(waiting)."""
    return sync_until(ref, cand, waiting, b"current-waiting", lambda v: v >= len(waiting),
                      "%d after a blocking reserve" % len(waiting))


def reference_raced(step, r_ref, ref):
    """A drop step whose reference, beanstalkd itself, counted the connection its client had
    closed (it sees the close and the other's `stats` together, and now and then takes the
    `stats` first: 1 run of the self-check in 10): the order is not beanstalkd's to promise
    there, so that one reply is not compared and both servers are brought to the count."""
    if step.kind != "drop":
        return False
    value = dict(normalise(r_ref, "stats") or ()).get(b"current-connections", b"")
    return value.isdigit() and int(value) > len(ref.conns)


def run_seed(seed, n_commands, skip=(), verbose=False):
    """Run one seed; return None on success or a failure report string."""
    rng = random.Random(seed * 7919 + 1)
    n_conns = rng.randint(3, 5)
    max_job_size = 65535 if seed % 3 == 0 else rng.choice([64, 200, 600])
    args = [] if max_job_size == 65535 else ["-z", str(max_job_size)]
    gen = Generator(seed, n_conns, max_job_size, skip)
    history = []
    ref = cand = None
    i, step = 0, Step(0, "start", op="start", cat="start")
    try:
        ref = Side(BEANSTALKD_BIN, args)
        cand = Side(STALKD_BIN, args)
        began = time.monotonic()
        while i < n_commands or gen.pending:
            step = gen.next_step()
            r_ref = ref.run(step)
            r_cand = cand.run(step)
            exact = time.monotonic() - began < EXACT_WITHIN
            equal, shown_ref, shown_cand = compare(r_ref, r_cand, step.op, exact)
            history.append((i, step, r_ref))
            if not equal and reference_raced(step, r_ref, ref):
                n, err = sync_until(ref, cand, {gen.waiting}, b"current-connections",
                                    lambda v: v == len(ref.conns), str(len(ref.conns)))
                history.append((i, Step(-1, "sync", [b"stats\r\n"]),
                                b"<the reference raced; %d probe(s)>" % n))
                if err:
                    return _report(seed, i, step, r_ref, r_cand, history, n_conns, args, err)
                equal = True
            if verbose:
                print("seed %d #%d conn %d [%s] %s -> %s" % (
                    seed, i, step.slot, step.kind, _show(step.data, 120), _show(r_ref, 120)))
            if not equal:
                return _report(seed, i, step, shown_ref, shown_cand, history, n_conns, args,
                               "replies differ")
            try:
                if gen.update(step, r_ref) == "closed":
                    ref.drop(step.slot)
                    cand.drop(step.slot)
            except HarnessError as e:
                return _report(seed, i, step, shown_ref, shown_cand, history, n_conns, args,
                               "HARNESS/MODEL ERROR (the reference did something the generator's "
                               "model did not expect): %s" % e)
            if step.kind == "wait":
                n, err = sync_waiting(ref, cand, {step.slot})
                history.append((i, Step(-1, "sync", [b"stats\r\n"]), b"<%d probe(s)>" % n))
                if err:
                    return _report(seed, i, step, r_ref, r_cand, history, n_conns, args, err)
            i += 1
        return None
    except Exception as e:      # a server that would not start, a refused connection, ...
        return _report(seed, i, step, b"", b"", history + [(i, step, b"")], n_conns, args,
                       "exception %s: %s" % (type(e).__name__, e))
    finally:
        for side in (cand, ref):
            if side:
                side.stop()


def _report(seed, i, step, r_ref, r_cand, history, n_conns, args, what):
    if seed is None:
        where = "step #%d, connection %d" % (i, step.slot)
        repro = "python3 -m unittest -v tests.compat.test_differential.TranscriptTest"
    else:
        where = "seed %d, command #%d, connection %d (of %s), category %r" % (
            seed, i, step.slot, n_conns, step.cat)
        repro = ("DIFF_SEEDS=%d python3 -m unittest -v "
                 "tests.compat.test_differential.DifferentialTest" % seed)
    lines = ["", "=" * 78,
             "DIFFERENTIAL MISMATCH: %s" % what,
             "%s, server args %s" % (where, " ".join(args) or "(none)"),
             "reproduce: " + repro,
             "sent (%s%s): %s" % (step.kind, ", in %d writes" % len(step.chunks)
                                  if len(step.chunks) > 1 else "", _show(step.data)),
             "beanstalkd (%s): %s" % (BEANSTALKD_BIN, _show(r_ref, 3000)),
             "stalkd     (%s): %s" % (STALKD_BIN, _show(r_cand, 3000)),
             "preceding commands (conn: sent -> beanstalkd reply):"]
    for j, st, rr in history[-11:-1]:
        lines.append("  #%d conn %d [%s] %s -> %s" % (j, st.slot, st.kind, _show(st.data, 200),
                                                      _show(rr, 200)))
    return "\n".join(lines)


def parse_seeds(text):
    text = text.strip()
    if text.startswith("random:"):
        n = int(text.split(":", 1)[1])
        seeds = [random.SystemRandom().randrange(1, 10 ** 9) for _ in range(n)]
        print("random seeds: %s" % ",".join(map(str, seeds)))
        return seeds
    seeds = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds.extend(range(int(lo), int(hi) + 1))
        else:
            seeds.append(int(part))
    return seeds


class _NeedsBothServers(unittest.TestCase):
    def setUp(self):
        missing = [p for p in (BEANSTALKD_BIN, STALKD_BIN) if not os.access(p, os.X_OK)]
        if missing:
            msg = ("differential test needs both servers; missing or not executable: %s "
                   "(install Debian's beanstalkd / build stalkd, or set BEANSTALKD_BIN / "
                   "STALKD_BIN)" % ", ".join(missing))
            if os.environ.get("STALKD_DIFF_ALLOW_SKIP") == "1":
                self.skipTest(msg + " [skipped: STALKD_DIFF_ALLOW_SKIP=1]")
            self.fail(msg)


class DifferentialTest(_NeedsBothServers):
    """Seeded random command sequences."""

    def test_random_sequences(self):
        seeds = parse_seeds(os.environ["DIFF_SEEDS"]) if os.environ.get("DIFF_SEEDS") else CI_SEEDS
        n = int(os.environ.get("DIFF_COMMANDS", DEFAULT_COMMANDS))
        skip = {s.strip() for s in os.environ.get("DIFF_SKIP", "").split(",") if s.strip()}
        unknown = skip - set(WEIGHTS)
        self.assertFalse(unknown, "unknown DIFF_SKIP categories %s; known: %s"
                         % (sorted(unknown), ", ".join(WEIGHTS)))
        verbose = os.environ.get("DIFF_VERBOSE") == "1"
        failures = []
        t0 = time.monotonic()
        for seed in seeds:
            rep = run_seed(seed, n, skip, verbose)
            if rep:
                failures.append(rep)
                print(rep, file=sys.stderr)
        sys.stderr.write("\ndifferential: %d seeds x %d commands in %.1f s, %d failing seed(s)\n"
                         % (len(seeds), n, time.monotonic() - t0, len(failures)))
        if failures:
            self.fail("%d of %d seeds mismatched (reports above); first:%s"
                      % (len(failures), len(seeds), failures[0]))


def parse_transcript(path):
    """A transcript: `N> text` lines, one step each, sent on connection N (connected on first
    use and again after the server closed it). `text` takes Python escapes (\\r, \\n, \\x00,
    \\\\); CRLF is appended unless the line ends with <noeol>. `N> <close>` half-closes the
    connection and waits for the server to close it. `N> <wait> text` sends a command that
blocks (a reserve) without reading its reply; `N> <collect>` reads that reply later.
`#!` lines give server arguments,
    other `#` lines and blank lines are comments. The op of a step is its first word."""
    args, steps = [], []
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("#!"):
                args += line[2:].split()
                continue
            if not line.strip() or line.startswith("#"):
                continue
            slot, sep, text = line.partition("> ")
            if not sep or not slot.isdigit():
                raise ValueError("%s:%d: expected 'N> command'" % (path, lineno))
            slot = int(slot)
            if text in ("<close>", "<collect>"):
                kind = text[1:-1]
                steps.append(Step(slot, kind, [], "reserve" if kind == "collect" else kind,
                                  "transcript:%d" % lineno))
                continue
            kind = "cmd"
            if text.startswith("<wait> "):
                kind, text = "wait", text[len("<wait> "):]
            eol = b"\r\n"
            if text.endswith("<noeol>"):
                text, eol = text[:-len("<noeol>")], b""
            data = text.encode("utf-8").decode("unicode_escape").encode("latin-1") + eol
            first = data.split(b" ", 1)[0].split(b"\r", 1)[0]
            op = {b"stats": "stats", b"stats-job": "stats-job", b"stats-tube": "stats-tube"}.get(
                first, first.decode("latin-1"))
            steps.append(Step(slot, kind, [data], op, "transcript:%d" % lineno))
    return args, steps


def run_transcript(path):
    args, steps = parse_transcript(path)
    name = os.path.basename(path)
    history = []
    waiting = set()
    ref = cand = None
    try:
        ref = Side(BEANSTALKD_BIN, args)
        cand = Side(STALKD_BIN, args)
        began = time.monotonic()
        for i, step in enumerate(steps):
            for side in (ref, cand):
                if step.slot not in side.conns:
                    side.run(Step(step.slot, "connect"))
            r_ref, r_cand = ref.run(step), cand.run(step)
            exact = time.monotonic() - began < EXACT_WITHIN
            equal, shown_ref, shown_cand = compare(r_ref, r_cand, step.op, exact)
            history.append((i, step, r_ref))
            if r_ref.endswith(TIMEOUT) or b"<EXTRA BYTES>" in r_ref:
                return _report(None, i, step, shown_ref, shown_cand, history, None, args,
                               "TRANSCRIPT ERROR in %s (line %s): the reference server gave no "
                               "reply or more than one" % (name, step.cat.split(":")[1]))
            if not equal:
                return _report(None, i, step, shown_ref, shown_cand, history, None, args,
                               "replies differ in transcript %s (line %s)"
                               % (name, step.cat.split(":")[1]))
            for side, r in ((ref, r_ref), (cand, r_cand)):
                if r.endswith(CLOSED) or r.endswith(TIMEOUT):
                    side.drop(step.slot)
            if step.kind == "wait":
                waiting.add(step.slot)
                n, err = sync_waiting(ref, cand, waiting)
                history.append((i, Step(-1, "sync", [b"stats\r\n"]), b"<%d probe(s)>" % n))
                if err:
                    return _report(None, i, step, r_ref, r_cand, history, None, args,
                                   "%s (transcript %s line %s)" % (err, name, step.cat.split(":")[1]))
            elif step.kind in ("collect", "close"):
                waiting.discard(step.slot)
        return None
    finally:
        for side in (cand, ref):
            if side:
                side.stop()


class TranscriptTest(_NeedsBothServers):
    """Fixed scenarios from tests/compat/*.txt, compared the same way."""

    # On the Redis store, jobs that one command makes ready together (kick N, a closing
    # connection's reservations) reach a waiting client by priority, where beanstalkd hands
    # over each as it comes back (docs/SCALE-OUT.md, "Deviations"): these transcripts show it.
    REDIS_DEVIATIONS = {"waiting.txt", "waiting_kick_buried.txt", "waiting_kick_delayed.txt"}

    def test_transcripts(self):
        names = sorted(f for f in os.listdir(HERE) if f.endswith(".txt"))
        if beanstalk.redis_store():
            names = [f for f in names if f not in self.REDIS_DEVIATIONS]
        paths = [os.path.join(HERE, f) for f in names]
        failures = [r for r in (run_transcript(p) for p in paths) if r]
        for r in failures:
            print(r, file=sys.stderr)
        sys.stderr.write("\ntranscripts: %d run, %d failing\n" % (len(paths), len(failures)))
        if failures:
            self.fail("%d transcript(s) mismatched; first:%s" % (len(failures), failures[0]))


class NormaliserTest(unittest.TestCase):
    """The normaliser hides only what it must."""

    def test_stats_volatile_and_quotes(self):
        a = _rebuild([[b"current-jobs-ready", b"1"], [b"pid", b"12"], [b"version", b'"1.12"'],
                      [b"hostname", b"vm"], [b"uptime", b"3"]])
        c = _rebuild([[b"current-jobs-ready", b"1"], [b"pid", b"99"], [b"version", b'"0.1.0"'],
                      [b"hostname", b'"vm"'], [b"uptime", b"4"]])
        self.assertTrue(compare(a, c, "stats")[0])
        d = _rebuild([[b"current-jobs-ready", b"2"], [b"pid", b"99"], [b"version", b'"0.1.0"'],
                      [b"hostname", b'"vm"'], [b"uptime", b"4"]])
        self.assertFalse(compare(a, d, "stats")[0])
        # the same machine: hostname, os and platform are compared
        e = _rebuild([[b"current-jobs-ready", b"1"], [b"pid", b"99"], [b"version", b'"0.1.0"'],
                      [b"hostname", b'"vm2"'], [b"uptime", b"4"]])
        self.assertFalse(compare(a, e, "stats")[0])

    def test_no_key_is_dropped(self):
        # A key more, a key less or keys in another order is a difference, wherever it is.
        for op, base in (("stats", [[b"current-jobs-ready", b"1"], [b"pid", b"12"]]),
                         ("stats-tube", [[b"name", b"default"], [b"pause-time-left", b"0"]]),
                         ("stats-job", [[b"id", b"1"], [b"kicks", b"0"]])):
            ref = _rebuild(base)
            self.assertTrue(compare(ref, _rebuild(base), op)[0], op)
            for extra in ([[b"memory-used", b"7"]], [[b"total-expired-jobs", b"0"]],
                          [[b"default-tries", b"0"]], [[b"tries-left", b"1"]]):
                self.assertFalse(compare(ref, _rebuild(base + extra), op)[0], (op, extra))
                self.assertFalse(compare(ref, _rebuild(extra + base), op)[0], (op, extra))
            self.assertFalse(compare(ref, _rebuild(base[:1]), op)[0], op)
            self.assertFalse(compare(ref, _rebuild(base[::-1]), op)[0], op)
        # a volatile value is replaced, its key kept
        self.assertFalse(compare(_rebuild([[b"pid", b"1"], [b"uptime", b"3"]]),
                                 _rebuild([[b"pid", b"1"]]), "stats")[0])

    def test_time_tolerance(self):
        a = _rebuild([[b"id", b"1"], [b"tube", b"default"], [b"age", b"5"], [b"time-left", b"999"]])
        c = _rebuild([[b"id", b"1"], [b"tube", b'"default"'], [b"age", b"6"], [b"time-left", b"998"]])
        self.assertTrue(compare(a, c, "stats-job")[0])
        self.assertFalse(compare(a, c, "stats-job", exact_times=True)[0])
        self.assertTrue(compare(a, a, "stats-job", exact_times=True)[0])
        d = _rebuild([[b"id", b"1"], [b"tube", b"default"], [b"age", b"7"], [b"time-left", b"999"]])
        self.assertFalse(compare(a, d, "stats-job")[0])
        e = _rebuild([[b"id", b"2"], [b"tube", b"default"], [b"age", b"5"], [b"time-left", b"999"]])
        self.assertFalse(compare(a, e, "stats-job")[0])
        # job ids and everything outside stats-like replies compare raw
        self.assertFalse(compare(b"INSERTED 1\r\n", b"INSERTED 2\r\n", "put")[0])
        self.assertFalse(compare(b"OK 3\r\nabc\r\n", b"OK 3\r\nabd\r\n", "list")[0])


if __name__ == "__main__":
    unittest.main()

"""Property test of the Redis store (docs/SCALE-OUT.md): stalkd on Redis answers every
command byte for byte as stalkd on its embedded store does.

A seeded generator writes random sequences of beanstalkd commands and of the extensions
(docs/EXTENSIONS.md) over 3 connections and 3 tubes (plus a tube nobody uses, for
NOT_FOUND); the same sequence goes to two stalkd processes started by the test, one on the
embedded store and one with `--store redis://...` on a redis-server started by the test,
and every reply is compared byte for byte after the normalisations below. A mismatch fails
with the seed, the command's index, the command and both replies, and the sequence shrunk
(ddmin over whole commands, replayed on fresh servers) to a short one that still differs.

Timing-free: every TTR, delay, TTL and pause that is not 0 is at least 120 s, so no timer
fires within a run (a run takes well under a second); a reserve has timeout 0. The times that
stats report (TIMES_*: a job's age and time left, a pause's time left, uptime) are compared
as they are, in beanstalkd's whole seconds rounded down (a TTR of 120 just started has 119
left on both); only once a run (for uptime, the servers) has lasted about a second may a
second tick over between the two servers' replies, and then they may differ by one
(within_rounding). What is each process's own is normalised (NORMALISED_*, each with its
reason).

Run: python3 -m unittest -v tests/redis/test_property.py
Environment: STALKD_BIN (default build/release/stalkd); PROPERTY_SEEDS, PROPERTY_COMMANDS,
PROPERTY_FIRST_SEED to run more or other seeds (defaults 30 x 400 from seed 1).
Skipped when redis-server is not installed.
"""
import contextlib
import math
import os
import random
import re
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import beanstalk  # noqa: E402
import redis_fixture  # noqa: E402


SEEDS = int(os.environ.get("PROPERTY_SEEDS", "30"))
COMMANDS = int(os.environ.get("PROPERTY_COMMANDS", "400"))
FIRST_SEED = int(os.environ.get("PROPERTY_FIRST_SEED", "1"))
CONNECTIONS = 3
TUBES = ["default", "t1", "t2"]
NO_TUBE = "nx"           # never used: stats-tube, pause-tube, purge, list-jobs say NOT_FOUND
LONG = (120, 3600, 86400, 4294967295)   # TTRs, delays, TTLs, pauses that never pass in a run
REPLY_TIMEOUT = 2.0      # a reply not there within this is a mismatch ("no reply")
RECONNECT = b"<reconnect>"   # not a command: close the connection and open a new one
# Not a command either: RECONNECT after sending these bytes (a put whose body never ends).
HALF_PUT = b"<reconnect after>put 7 0 120 10\r\nabc"

# Refused for their arguments (some by the store, some by the text protocol).
MALFORMED = [
    b"use -bad\r\n", b"watch %s\r\n" % (b"n" * 201), b"pause-tube -x 0\r\n",
    b"pause-tube %s 0\r\n" % (b"n" * 201), b"purge t1 reserved\r\n", b"purge t1 some\r\n",
    b"list-jobs t1 all 0 5\r\n", b"list-jobs t1 ready 0 0\r\n", b"list-jobs t1 ready 0 1001\r\n",
    b"tube-tries -x 1\r\n", b"tube-tries t1 -1\r\n", b"reserve-ext 0 count=0\r\n",
    b"reserve-ext 0 count=1001\r\n", b"reserve-ext 0 ttr=0\r\n", b"delete-many\r\n",
    b"stats-tube -x\r\n", b"kick-job 0\r\n", b"peek 0\r\n", b"stats-job 0\r\n",
    b"put-ext 0 0 120 1 tries=0\r\n", b"put-ext 0 0 120 1 bogus=1\r\n",
    b"delete-many " + b" ".join(b"%d" % i for i in range(1, 1002)) + b"\r\n",
    b"release 1 0\r\n", b"bury 1\r\n", b"touch\r\n", b"kick\r\n", b"ignore\r\n",
]

# Times in whole seconds, each counted by a server from its own instant of the command that
# set it (the put, the reserve, the pause-tube; uptime from the process's start): compared
# exactly, except that one may have ticked over before the other once a second has passed
# since that instant (within_rounding).
TIMES_STATS_JOB = {"age", "time-left", "ttl-left"}
TIMES_STATS_TUBE = {"pause-time-left"}
TIMES_STATS = {"uptime"}
TIMES = {b"stats-job": TIMES_STATS_JOB, b"stats-tube": TIMES_STATS_TUBE, b"stats": TIMES_STATS}
# Only after this long (s) since a run (or, for uptime, its servers) started can a count of
# whole seconds tick over between two replies: before, each must be what the other is.
TICK_AFTER = 0.9

# Values that are each process's own, not the store's; each is replaced by "*" in both
# replies before they are compared.
NORMALISED_STATS_JOB = set()
NORMALISED_STATS_TUBE = set()
NORMALISED_STATS = {
    # docs/SCALE-OUT.md, "Deviations": stats `pid`, `id`, `hostname`, `rusage-*` are each
    # front end's own (and differ between any two processes anyway).
    "pid", "id", "hostname", "rusage-utime", "rusage-stime",
    # docs/SCALE-OUT.md, "Deviations": `memory-used` and `memory-limit` are the engine's own
    # accounting; on Redis the jobs are in Redis' memory, and both say 0.
    "memory-used", "memory-limit",
}


# ---- servers

class Pair:
    """The servers of one run: `embedded` (stalkd's own store) and `redis` (stalkd on the
    Redis at `redis_url`, keys under `prefix`; with redis_url None, a second embedded server:
    the harness's own check), stopped by PID in close(). front_ends 2: a second stalkd on the
    same Redis and prefix, `redis2`, serves the last connection."""

    def __init__(self, redis_url, prefix, front_ends=1, wait=0):
        self.started = time.monotonic()  # before any of them
        self.embedded = beanstalk.Server()
        self.fronts = []
        try:
            args = ()
            if redis_url is not None:
                args = redis_fixture.store_argv(redis_url, prefix, wait=wait)
            for _ in range(front_ends):
                self.fronts.append(beanstalk.Server(args=args))
        except BaseException:
            self.close()
            raise
        self.redis = self.fronts[0]

    def skew(self):
        """How far apart (s) the servers' processes may have started: from the earliest
        spawn to the latest readiness."""
        servers = [self.embedded] + self.fronts
        return max(x.ready for x in servers) - min(x.spawned for x in servers)

    def close(self):
        self.embedded.stop()
        for f in self.fronts:
            f.stop()


def read_whole_reply(c):
    """One reply, including the jobs of RESERVED-MANY and the lines of INSERTED-MANY."""
    first = c.read_reply()
    m = re.match(rb"(RESERVED-MANY|INSERTED-MANY) (\d+)\r\n", first)
    if not m:
        return first
    n = int(m.group(2))
    read = c.read_reply if m.group(1) == b"RESERVED-MANY" else c.read_line
    return first + b"".join(read() for _ in range(n))


def yaml_lines(reply):
    """The lines of an `OK <bytes>` YAML reply's document, or None for any other reply."""
    m = re.fullmatch(rb"OK \d+\r\n(---\n.*)\r\n", reply, re.S)
    return m.group(1).split(b"\n") if m else None


def yaml_of(lines):
    body = b"\n".join(lines)
    return b"OK %d\r\n%s\r\n" % (len(body), body)


def stats_verb(command):
    """The command's verb, a stats command's -ext form read as the command it extends (the
    same keys first, the same times)."""
    verb = command.split(b" ", 1)[0].rstrip(b"\r\n")
    if verb in (b"stats-ext", b"stats-tube-ext", b"stats-job-ext"):
        verb = verb[:-len(b"-ext")]
    return verb


def within_rounding(command, a, b, job_s, server_s, server_skew=0.0):
    """b, with each time (TIMES) that differs from a's by one taken from a, when the whole
    seconds may have ticked over between the two: `job_s` (s) since the run started,
    `server_s` since its servers did (for uptime), at least TICK_AFTER. Otherwise b.
    Uptimes count from each process's own start, which may lie up to `server_skew` (s) apart
    (a busy machine starts one server later than the other): they may differ by that much
    more."""
    keys = TIMES.get(stats_verb(command))
    if not keys or a == b:
        return b
    la, lb = yaml_lines(a), yaml_lines(b)
    if la is None or lb is None or len(la) != len(lb):
        return b
    for i, (x, y) in enumerate(zip(la, lb)):
        kx, sep, vx = x.partition(b": ")
        ky, _, vy = y.partition(b": ")
        key = kx.decode()
        if not sep or kx != ky or key not in keys or not (vx.isdigit() and vy.isdigit()):
            continue
        d = abs(int(vx) - int(vy))
        if key in TIMES_STATS:
            same = d <= (1 if server_s >= TICK_AFTER else 0) + math.ceil(server_skew)
        else:
            same = job_s >= TICK_AFTER and d == 1
        if same:
            lb[i] = x
    return yaml_of(lb)


def yaml_reply(reply, normalised):
    """An `OK <bytes>` YAML dict reply with the values of `normalised` keys replaced by "*"
    (and its byte count recomputed); any other reply as it is."""
    lines = yaml_lines(reply)
    if lines is None:
        return reply
    for i, line in enumerate(lines):
        key, sep, _ = line.partition(b": ")
        if sep and key.decode() in normalised:
            lines[i] = key + b": *"
    return yaml_of(lines)


# With two front ends, also (docs/SCALE-OUT.md, "Deviations"): `stats` sums the other front
# end's counters as it last published them (every --store-lease/4), so they are stale.
NORMALISED_STATS_FRONT_ENDS = NORMALISED_STATS | {
    "current-connections", "current-producers", "current-workers", "current-waiting",
    "total-connections",
} | {"cmd-" + v for v in (
    "put", "peek", "peek-ready", "peek-delayed", "peek-buried", "reserve",
    "reserve-with-timeout", "delete", "release", "use", "watch", "ignore", "bury", "kick",
    "touch", "stats", "stats-job", "stats-tube", "list-tubes", "list-tube-used",
    "list-tubes-watched", "pause-tube", "put-ext", "put-many", "reserve-ext", "delete-many",
    "purge", "list-jobs", "tube-tries", "reserve-job", "kick-job")}


def normalise(command, reply, front_ends=1):
    verb = stats_verb(command)
    if verb == b"stats-job":
        return yaml_reply(reply, NORMALISED_STATS_JOB)
    if verb == b"stats-tube":
        return yaml_reply(reply, NORMALISED_STATS_TUBE)
    if verb == b"stats":
        return yaml_reply(reply, NORMALISED_STATS if front_ends == 1 else
                          NORMALISED_STATS_FRONT_ENDS)
    return reply


class Run:
    """One sequence sent to both servers of a Pair over CONNECTIONS connections each.
    id_map (None: ids are the same on both): the second server's job ids differ from the
    embedded server's (tests/cluster/test_property_cluster.py); id_map.command(command)
    is what the second server gets, id_map.reply(command, reply) its reply in the embedded
    server's ids."""

    def __init__(self, pair, id_map=None):
        self.pair = pair
        self.id_map = id_map
        self.conns = [[self._connect(s) for s in self.servers(k)] for k in range(CONNECTIONS)]
        # The connection Server made to see the port open may not be closed yet.
        if len(pair.fronts) == 1:
            self._settle(0, CONNECTIONS)
        else:
            self._settle_tube_refs()
        self.started = time.monotonic()

    def _within_rounding(self, command, a, b):
        now = time.monotonic()
        return within_rounding(command, a, b, now - self.started, now - self.pair.started,
                               self.pair.skew())

    def servers(self, conn=0):
        """The embedded server and the Redis front end of connection `conn`."""
        fronts = self.pair.fronts
        return (self.pair.embedded, fronts[-1] if conn == CONNECTIONS - 1 else fronts[0])

    def _settle_tube_refs(self):
        """With two front ends (whose `stats` are stale for each other): until stats-tube
        default counts the test's connections on each server, through each front end, 5
        times in a row 10 ms apart (a front end tells Redis of a connection, and of the close
        of the one Server made to see the port open, in the background)."""
        for k in (0, CONNECTIONS - 1):
            for c in self.conns[k]:
                stable = 0
                for _ in range(1000):
                    st = beanstalk.stats_of(c, "stats-tube default")
                    ok = st["current-using"] == st["current-watching"] == str(CONNECTIONS)
                    stable = stable + 1 if ok else 0
                    if stable == 5:
                        break
                    time.sleep(0.01 if ok else 0.002)
                else:
                    raise AssertionError("stats-tube default does not count %d connections: "
                                         "%r" % (CONNECTIONS, st))

    @staticmethod
    def _connect(server):
        return server.connect(timeout=REPLY_TIMEOUT)

    def close(self):
        for pair in self.conns:
            for c in pair:
                c.close()

    def _sent(self, k, command):
        """The bytes server k (0: the embedded one) gets for `command`."""
        return self.id_map.command(command) if k and self.id_map else command

    def _reply(self, k, c, command):
        """Server k's reply to `command` on c, in the embedded server's ids, normalised."""
        reply = read_whole_reply(c)
        if k and self.id_map:
            reply = self.id_map.reply(command, reply)
        return normalise(command, reply, len(self.pair.fronts))

    def step(self, conn, command):
        """Sends `command` on connection `conn` of both servers; returns the two replies
        (normalised)."""
        if command == RECONNECT:
            return self._reconnect(conn)
        if command.startswith(b"<reconnect after>"):
            for c in self.conns[conn]:
                c.send(command[len(b"<reconnect after>"):])
            return self._reconnect(conn)
        out = []
        for k, c in enumerate(self.conns[conn]):
            c.send(self._sent(k, command))
        for k, c in enumerate(self.conns[conn]):
            try:
                out.append(self._reply(k, c, command))
            except (socket.timeout, EOFError, OSError) as e:
                out.append(b"<no reply: %s>" % type(e).__name__.encode())
        out[1] = self._within_rounding(command, out[0], out[1])
        if len(self.pair.fronts) > 1 and re.match(rb"(use|watch|ignore) ", command):
            # A front end answers these at once and tells Redis in the background
            # (docs/SCALE-OUT.md, "Deviations"); a call of its own after them is answered
            # once Redis has them, so the other front end sees the tube from the next step.
            for c in self.conns[conn]:
                c.send(b"list-tubes\r\n")
            for c in self.conns[conn]:
                c.read_reply()
        return out

    def burst(self, conn, commands):
        """Sends `commands` on connection `conn` of both servers in one write each (the
        Redis store pipelines them: Session::CanPipeline); returns the two lists of replies
        (normalised)."""
        for k, c in enumerate(self.conns[conn]):
            c.send(b"".join(self._sent(k, command) for command in commands))
        out = []
        for k, c in enumerate(self.conns[conn]):
            replies = []
            for command in commands:
                try:
                    replies.append(self._reply(k, c, command))
                except (socket.timeout, EOFError, OSError) as e:
                    replies.append(b"<no reply: %s>" % type(e).__name__.encode())
                    break
            out.append(replies)
        for i, command in enumerate(commands[:min(len(out[0]), len(out[1]))]):
            out[1][i] = self._within_rounding(command, out[0][i], out[1][i])
        return out

    def _settle(self, conn, connections):
        """Polls `stats` on connection `conn` of each server until it counts `connections`
        current connections (a close has been seen, and its reservations are back). The
        polls are counted in `cmd-stats`: each server gets as many."""
        polls = []
        for s, c in zip(self.servers(conn), self.conns[conn]):
            n = 1
            while int(beanstalk.stats_of(c, "stats")["current-connections"]) != connections:
                n += 1
                if n > 1000:
                    raise AssertionError("%s: current-connections is not %d"
                                         % (s.argv, connections))
                time.sleep(0.002)
            polls.append(n)
        for c, n in zip(self.conns[conn], polls):
            for _ in range(max(polls) - n):
                beanstalk.stats_of(c, "stats")

    def _reconnect(self, conn):
        """Closes connection `conn` on both servers and opens a new one, once each server
        has seen the close."""
        for c in self.conns[conn]:
            c.close()
        self._settle((conn + 1) % CONNECTIONS, CONNECTIONS - 1)
        self.conns[conn] = [self._connect(s) for s in self.servers(conn)]
        self._settle((conn + 1) % CONNECTIONS, CONNECTIONS)
        return [b"reconnected\r\n", b"reconnected\r\n"]


# ---- the generator

class Generator:
    """Random commands, each fixed bytes once generated (so a sequence can be replayed and
    shrunk). Ids are drawn from those the embedded server has handed out (fed back by
    learn()), so most commands act on live jobs; some on ids that never existed."""

    def __init__(self, seed, reconnects=True, tubes=TUBES, no_tube=NO_TUBE):
        self.rng = random.Random(seed)
        self.tubes = tubes
        self.no_tube = no_tube
        self.reconnects = reconnects  # whether to close connections (RECONNECT, HALF_PUT)
        self.ids = []         # ids seen in INSERTED / RESERVED replies, oldest first
        self.reserved = []    # ids seen in RESERVED replies (good candidates for release...)
        self.parked = []      # ids buried or delayed (good candidates for kick-job)
        self.max_id = 0

    @staticmethod
    def _remember(ids, jid, keep):
        if jid in ids:
            ids.remove(jid)
        ids.append(jid)
        del ids[:-keep]

    def learn(self, command, reply):
        """Takes note of the ids in the embedded server's reply to `command`."""
        for m in re.finditer(rb"(INSERTED|EXISTS|RESERVED|FOUND) (\d+)", reply):
            jid = int(m.group(2))
            self.max_id = max(self.max_id, jid)
            if jid not in self.ids:
                self.ids.append(jid)
            if m.group(1) == b"RESERVED":
                self._remember(self.reserved, jid, 8)
            elif m.group(1) == b"INSERTED" and re.match(rb"put(-ext)? \d+ [1-9]", command):
                self._remember(self.parked, jid, 8)
        if reply in (b"BURIED\r\n", b"RELEASED\r\n"):
            verb, jid = command.split(b" ")[:2]
            if verb == b"bury" or not command.endswith(b" 0\r\n"):
                self._remember(self.parked, int(jid), 8)

    # -- pieces

    def job_id(self, parked=False):
        r = self.rng.random()
        if parked and self.parked and r < 0.6:
            return self.rng.choice(self.parked)
        if self.reserved and r < 0.35:
            return self.rng.choice(self.reserved)
        if self.ids and r < 0.9:
            return self.rng.choice(self.ids[-12:])
        return self.rng.choice([0, self.max_id + 1, self.max_id + 7, self.rng.randint(1, 50)])

    def tube(self, missing=0.05):
        return self.no_tube if self.rng.random() < missing else self.rng.choice(self.tubes)

    def pri(self):
        return self.rng.choice([0, 1, 10, 10, 10, 500, 1023, 1024, 1025, 65536, 4294967295,
                                self.rng.randint(0, 2000)])

    def delay(self):
        return self.rng.choice(LONG) if self.rng.random() < 0.15 else 0

    def ttr(self):
        return self.rng.choice(LONG + (300, 1000))

    def body(self):
        n = self.rng.choice([0, 1, 5, 12, 40])
        alphabet = b"abcxyz019 \r\n\x00\xff-"
        return bytes(self.rng.choice(alphabet) for _ in range(n))

    def put_options(self):
        opts = []
        if self.rng.random() < 0.5:
            opts.append(b"tries=%d" % self.rng.choice([1, 1, 2, 3, 4294967295]))
        if self.rng.random() < 0.3:
            opts.append(b"ttl=%d" % self.rng.choice((0,) + LONG))
        if self.rng.random() < 0.4:
            opts.append(b"key=k%d" % self.rng.randint(0, 4))
        for i in range(self.rng.choice([0, 0, 1, 2])):
            value = self.rng.choice([b"", b"v", b'q"b\\s', b"x=y"])
            opts.append(b"attr.a%d=%s" % (i, value))
        self.rng.shuffle(opts)
        return opts

    def state(self, choices=("ready", "delayed", "buried")):
        return self.rng.choice(choices).encode()

    # -- commands

    def put(self):
        b = self.body()
        return b"put %d %d %d %d\r\n%s\r\n" % (self.pri(), self.delay(), self.ttr(), len(b), b)

    def put_ext(self):
        b = self.body()
        opts = b"".join(b" " + o for o in self.put_options())
        return b"put-ext %d %d %d %d%s\r\n%s\r\n" % (self.pri(), self.delay(), self.ttr(),
                                                   len(b), opts, b)

    def put_many(self):
        entries = []
        for _ in range(self.rng.randint(1, 3) if self.rng.random() < 0.8 else
                       self.rng.randint(10, 40)):
            b = self.body()
            opts = b"".join(b" " + o for o in self.put_options())
            entries.append(b"%d %d %d %d%s\r\n%s\r\n" % (self.pri(), self.delay(), self.ttr(),
                                                         len(b), opts, b))
        block = b"".join(entries)
        return b"put-many %d %d\r\n%s\r\n" % (len(entries), len(block), block)

    def reserve_ext(self):
        opts = []
        if self.rng.random() < 0.7:
            opts.append(b"count=%d" % self.rng.randint(1, 4))
        if self.rng.random() < 0.2:
            opts.append(b"ttr=%d" % self.rng.choice(LONG))
        if self.rng.random() < 0.2:
            opts.append(b"freeze-tries")
        if self.rng.random() < 0.2:
            opts.append(b"detached")
        self.rng.shuffle(opts)
        return b"reserve-ext 0" + b"".join(b" " + o for o in opts) + b"\r\n"

    def delete_many(self):
        ids = [self.job_id() for _ in range(self.rng.randint(1, 4))]
        return b"delete-many " + b" ".join(b"%d" % i for i in ids) + b"\r\n"

    def command(self):
        """One random command (bytes, with its CRLF and body)."""
        r = self.rng
        choices = [
            (12, self.put),
            (6, self.put_ext),
            (2, self.put_many),
            (6, lambda: b"use %s\r\n" % self.tube().encode()),
            (4, lambda: b"watch %s\r\n" % self.tube().encode()),
            (3, lambda: b"ignore %s\r\n" % self.tube().encode()),
            (8, lambda: b"reserve-with-timeout 0\r\n"),
            (3, lambda: b"reserve-job %d\r\n" % self.job_id()),
            (4, self.reserve_ext),
            (5, lambda: b"delete %d\r\n" % self.job_id()),
            (2, self.delete_many),
            (5, lambda: b"release %d %d %d\r\n" % (self.job_id(), self.pri(), self.delay())),
            (4, lambda: b"bury %d %d\r\n" % (self.job_id(), self.pri())),
            (3, lambda: b"kick %d\r\n" % r.choice([0, 1, 2, 5, 100])),
            (3, lambda: b"kick-job %d\r\n" % self.job_id(parked=True)),
            (2, lambda: b"touch %d\r\n" % self.job_id()),
            (3, lambda: b"peek %d\r\n" % self.job_id()),
            (2, lambda: b"peek-ready\r\n"),
            (2, lambda: b"peek-delayed\r\n"),
            (2, lambda: b"peek-buried\r\n"),
            (5, lambda: b"stats-job %d\r\n" % self.job_id()),
            (3, lambda: b"stats-tube %s\r\n" % self.tube().encode()),
            (1, lambda: b"stats\r\n"),
            # The same with the extensions' keys and job fields (docs/EXTENSIONS.md).
            (2, lambda: b"stats-job-ext %d\r\n" % self.job_id()),
            (1, lambda: b"stats-tube-ext %s\r\n" % self.tube().encode()),
            (1, lambda: b"stats-ext\r\n"),
            (2, lambda: b"list-tubes\r\n"),
            (1, lambda: b"list-tubes-watched\r\n"),
            (1, lambda: b"list-tube-used\r\n"),
            (2, lambda: b"pause-tube %s %d\r\n" % (
                self.tube().encode(), 0 if r.random() < 0.6 else r.choice(LONG))),
            (2, lambda: b"purge %s %s\r\n" % (
                self.tube().encode(), self.state(("ready", "delayed", "buried", "all")))),
            (3, lambda: b"list-jobs %s %s %d %d\r\n" % (
                self.tube().encode(), self.state(), r.choice([0, 1, 2, self.job_id()]),
                r.choice([1, 2, 3, 1000]))),
            (1, lambda: b"list-jobs %s %s %d %d\r\n" % (
                self.tube().encode(), self.state(("reserved", "all")), self.job_id(), 1000)),
            (2, lambda: b"tube-tries %s %d\r\n" % (self.tube().encode(), r.choice([0, 1, 2]))),
            (1 if self.reconnects else 0, lambda: RECONNECT),
            (0.3 if self.reconnects else 0, lambda: HALF_PUT),
            (1, lambda: r.choice(MALFORMED)),
        ]
        total = sum(w for w, _ in choices)
        x = r.uniform(0, total)
        for w, make in choices:
            x -= w
            if x <= 0:
                return make()
        return choices[-1][1]()

    def conn(self):
        return self.rng.randrange(CONNECTIONS)


# ---- running, comparing, shrinking

def show(b):
    text = repr(b)
    return text if len(text) < 400 else text[:400] + "...(%d bytes)" % len(b)


def show_pair(a, b):
    """Both replies; of two YAML replies, the lines that differ."""
    if a.startswith(b"OK ") and b.startswith(b"OK "):
        la, lb = a.split(b"\n"), b.split(b"\n")
        only_a = [x for x in la if x not in lb]
        only_b = [x for x in lb if x not in la]
        if len(only_a) + len(only_b) < 20:
            return ["  embedded: %s ... only here: %s" % (show(a[:60]), only_a),
                    "  redis:    %s ... only here: %s" % (show(b[:60]), only_b)]
    return ["  embedded: %s" % show(a), "  redis:    %s" % show(b)]


class Comparison:
    """Runs sequences on a Pair per run (fresh servers, a fresh --store-prefix), compares,
    shrinks. `redis_url` None: both servers embedded (HarnessCase)."""

    redis_url = None
    front_ends = 1
    bursts = False
    wait = 0  # --store-wait
    tubes, no_tube = TUBES, NO_TUBE   # the Generator's

    def new_id_map(self):
        """Run's id_map for a run on fresh servers (None: the same ids on both)."""
        return None

    def generator(self, seed, reconnects=True):
        return Generator(seed, reconnects, self.tubes, self.no_tube)

    def new_pair(self):
        return Pair(self.redis_url, redis_fixture.unique_prefix(), self.front_ends, self.wait)

    @contextlib.contextmanager
    def running(self):
        """A Run on a fresh Pair, both closed after."""
        pair = self.new_pair()
        run = None
        try:
            run = Run(pair, self.new_id_map())
            yield run
        finally:
            if run:
                run.close()
            pair.close()

    def replay(self, steps):
        """Sends (conn, command) steps to fresh servers; returns (index, both replies) of
        the first mismatch, or None."""
        with self.running() as run:
            for i, (conn, command) in enumerate(steps):
                a, b = run.step(conn, command)
                if a != b:
                    return i, a, b
            return None

    def shrink(self, steps, seconds=30):
        """A shorter sequence that still ends in a mismatch (ddmin over steps, replayed for
        at most `seconds`); the last step is the mismatching one."""
        steps = list(steps)
        chunk = max(1, len(steps) // 2)
        deadline = time.monotonic() + seconds
        while chunk >= 1 and time.monotonic() < deadline:
            i, progress = 0, False
            while i < len(steps) - 1 and time.monotonic() < deadline:
                trial = steps[:i] + steps[i + chunk:] if i + chunk < len(steps) else None
                if trial is None:
                    break
                found = self.replay(trial)
                if found:
                    steps = trial[:found[0] + 1]
                    progress = True
                else:
                    i += chunk
            if not progress:
                chunk //= 2
        return steps

    def generate_and_compare(self, seed, n):
        """Runs seed's sequence of n commands; returns None, or a failure message."""
        if self.bursts:
            return self.generate_and_compare_bursts(seed, n)
        # Closing a connection is synchronised by `stats`, stale across front ends.
        gen = self.generator(seed, reconnects=self.front_ends == 1)
        steps = []
        with self.running() as run:
            for i in range(n):
                conn, command = gen.conn(), gen.command()
                steps.append((conn, command))
                a, b = run.step(conn, command)
                if a != b:
                    break
                gen.learn(command, a)
            else:
                return None
        lines = ["seed %d, command %d on connection %d: %s" % (seed, i, conn, show(command))]
        lines += show_pair(a, b)
        short = self.shrink(steps)
        lines.append("shrunk to %d steps (conn, command):" % len(short))
        lines += ["  %d %s" % (c, show(cmd)) for c, cmd in short]
        again = self.replay(short)
        if again:
            lines.append("its last replies:")
            lines += show_pair(again[1], again[2])
        return "\n".join(lines)

    def generate_and_compare_bursts(self, seed, n):
        """The same, the commands sent in bursts of 1 to 12 on one connection, each burst in
        one write (a reconnect or a cut-off put goes alone). Not shrunk: a burst's replies
        depend on its commands arriving together."""
        gen = self.generator(seed)
        sent = 0
        history = []
        with self.running() as run:
            while sent < n:
                conn = gen.conn()
                burst = []
                for _ in range(gen.rng.randint(1, 12)):
                    command = gen.command()
                    if command == RECONNECT or command.startswith(b"<reconnect after>"):
                        if not burst:
                            burst.append(command)
                        break
                    burst.append(command)
                sent += len(burst)
                history.append((conn, burst))
                if len(burst) == 1 and (burst[0] == RECONNECT or
                                        burst[0].startswith(b"<reconnect after>")):
                    a, b = run.step(conn, burst[0])
                    a, b = [a], [b]
                else:
                    a, b = run.burst(conn, burst)
                if a != b:
                    break
                for command, reply in zip(burst, a):
                    gen.learn(command, reply)
            else:
                return None
        lines = ["seed %d, burst %d on connection %d (bursts mode):" % (seed, len(history),
                                                                         conn)]
        for k, command in enumerate(burst):
            x = a[k] if k < len(a) else b"<none>"
            y = b[k] if k < len(b) else b"<none>"
            mark = "   " if x == y else "!! "
            lines.append("%s%s" % (mark, show(command)))
            if x != y:
                lines += show_pair(x, y)
        lines.append("the bursts before (conn, commands):")
        lines += ["  %d %s" % (c, show(b"".join(cmds))) for c, cmds in history[-6:-1]]
        return "\n".join(lines)

    def check_seeds(self, seeds, n):
        failures = []
        for seed in seeds:
            msg = self.generate_and_compare(seed, n)
            if msg:
                failures.append(msg)
                print(msg, file=sys.stderr)
        self.assertEqual(failures, [], "\n\n".join(failures))


class HarnessCase(Comparison, unittest.TestCase):
    """The harness itself is deterministic: two embedded servers answer a few seeds' runs
    identically (no Redis needed), so a mismatch on Redis is the store's."""

    def test_two_embedded_servers_agree(self):
        self.check_seeds(range(FIRST_SEED, FIRST_SEED + 2), COMMANDS)


class RedisCase(Comparison, unittest.TestCase):
    """One redis-server for the class (fresh servers and prefix per run)."""

    maxDiff = None

    @classmethod
    def setUpClass(cls):
        if not os.access(redis_fixture.REDIS_SERVER, os.X_OK):
            raise unittest.SkipTest("redis-server is not installed (scripts/setup.sh)")
        cls.redis = redis_fixture.RedisServer()
        cls.addClassCleanup(cls.redis.close)
        cls.redis_url = cls.redis.url()


class RedisPropertyCase(RedisCase):
    """The property: stalkd on Redis answers as stalkd on its embedded store."""

    def test_random_sequences(self):
        self.check_seeds(range(FIRST_SEED, FIRST_SEED + SEEDS), COMMANDS)


class RedisBurstsCase(RedisCase):
    """The same with commands pipelined in bursts: the Redis store lets single calls and
    reserves go ahead of pending results (Session::CanPipeline) and must still answer each
    command in order, as the embedded store does one by one."""

    bursts = True

    def test_random_sequences(self):
        self.check_seeds(range(FIRST_SEED, FIRST_SEED + SEEDS), COMMANDS)


class RedisBurstsWaitCase(RedisBurstsCase):
    """Bursts with --store-wait 1 on a master and a replica: a change's answer waits for
    the WAIT after it, and every answer behind it (reads, refusals) must wait too, or a
    connection's replies would come out of order."""

    wait = 1

    @classmethod
    def setUpClass(cls):
        if not os.access(redis_fixture.REDIS_SERVER, os.X_OK):
            raise unittest.SkipTest("redis-server is not installed (scripts/setup.sh)")
        cls.set = redis_fixture.ReplicatedSet(replicas=1, min_replicas_to_write=1)
        cls.addClassCleanup(cls.set.close)
        cls.redis_url = cls.set.master.url()
        # Redis counts a replica as good (min-replicas-to-write) only from its next
        # replication cron (each second): a front end starting before that is refused its
        # FUNCTION LOAD with NOREPLICAS.
        if not redis_fixture.wait_until(lambda: int(cls.set.master.info("replication").get(
                "min_slaves_good_slaves", 0)) >= 1, timeout=15.0):
            raise RuntimeError("the master does not count its replica as good")

    def test_random_sequences(self):
        self.check_seeds(range(FIRST_SEED, FIRST_SEED + max(1, SEEDS // 3)), COMMANDS)


class RedisTwoFrontEndsCase(RedisCase):
    """The same with two front ends on one Redis and prefix, the last connection on the
    second: sessions, reservations and tube references of two front ends meet in Redis."""

    front_ends = 2

    def test_random_sequences(self):
        self.check_seeds(range(FIRST_SEED, FIRST_SEED + max(1, SEEDS // 3)), COMMANDS)


def put_many(*entries):
    """A put-many command of (pri, delay, ttr, body, options) entries."""
    block = b"".join(b"%d %d %d %d%s\r\n%s\r\n" % (pri, delay, ttr, len(body), opts, body)
                     for pri, delay, ttr, body, opts in entries)
    return b"put-many %d %d\r\n%s\r\n" % (len(entries), len(block), block)


def tube_list(*names):
    body = b"---\n" + b"".join(b"- %s\n" % n.encode() for n in names)
    return b"OK %d\r\n%s\r\n" % (len(body), body)


class RedisRegressionCase(RedisCase):
    """The mismatches the property found, each as a short sequence: the Redis server's
    replies are exactly these, and the embedded server's the same."""

    def check(self, steps):
        """steps: (conn, command, expected reply, or None: any, the same from both) on fresh
        servers. Returns the Redis server's replies."""
        pair = self.new_pair()
        self.addCleanup(pair.close)
        self.run_ = Run(pair)
        self.addCleanup(self.run_.close)
        return self.check_more(steps)

    def check_more(self, steps):
        """check() on, on the same servers and connections."""
        run = self.run_
        out = []
        for i, (conn, command, want) in enumerate(steps):
            a, b = run.step(conn, command)
            self.assertEqual(b, a, "step %d: %r" % (i, command))
            if want is not None:
                self.assertEqual(b, want, "step %d: %r" % (i, command))
            out.append(b)
        return out

    def test_put_many_answered_without_more_input(self):
        # Its puts are late answers on Redis: after the last one the conversation had no
        # input left, was not runnable, and answered only when the next command came.
        self.check([
            (0, put_many((0, 0, 120, b"a", b"")), b"INSERTED-MANY 1\r\nINSERTED 1\r\n"),
            (0, put_many((0, 0, 120, b"b", b" key=k"), (5, 0, 120, b"", b" tries=2")),
             b"INSERTED-MANY 2\r\nINSERTED 2\r\nINSERTED 3\r\n"),
        ])



    def test_list_tubes_in_the_engines_order(self):
        # list-tubes is in creation order, a freed tube's place taken by the last (the
        # engine's list, as beanstalkd's); Redis kept the tubes in a SET (hash order).
        self.check([
            (0, b"use t1\r\n", b"USING t1\r\n"),
            (1, b"use t2\r\n", b"USING t2\r\n"),
            (2, b"watch t3\r\n", b"WATCHING 2\r\n"),
            (0, b"list-tubes\r\n", tube_list("default", "t1", "t2", "t3")),
            (0, b"use default\r\n", b"USING default\r\n"),
            (0, b"list-tubes\r\n", tube_list("default", "t3", "t2")),
            (1, b"put 0 0 120 1\r\nx\r\n", b"INSERTED 1\r\n"),
            (1, b"use default\r\n", b"USING default\r\n"),
            (2, b"ignore t3\r\n", b"WATCHING 1\r\n"),
            (0, b"list-tubes\r\n", tube_list("default", "t2")),
            (0, b"use t4\r\n", b"USING t4\r\n"),
            (0, b"list-tubes\r\n", tube_list("default", "t2", "t4")),
        ])

    def test_reserve_job_of_no_job_makes_no_worker(self):
        # current-workers counts a connection from its first reserve, or from a reserve-job
        # that reserved (the engine's MarkWorker); Redis counted any reserve-job.
        replies = self.check([
            (0, b"reserve-job 5\r\n", b"NOT_FOUND\r\n"),
            (1, b"stats\r\n", None),
            (0, b"put 0 0 120 1\r\nx\r\n", b"INSERTED 1\r\n"),
            (2, b"reserve-job 1\r\n", b"RESERVED 1 1\r\nx\r\n"),
            (1, b"stats\r\n", None),
        ])
        workers = [beanstalk.parse_yaml(r)["current-workers"] for r in (replies[1], replies[4])]
        self.assertEqual(workers, ["0", "1"])

    def test_stats_job_ttr_is_the_jobs_own_during_a_reserve_ext_ttr(self):
        # reserve-ext ttr=N times this reservation only; stats-job's ttr is the job's own
        # (tests/blackbox/test_extensions.py, test_ttr_at_reserve_time); Redis showed N.
        replies = self.check([
            (0, b"put 0 0 300 1\r\nx\r\n", b"INSERTED 1\r\n"),
            (0, b"reserve-ext 0 ttr=3600\r\n", b"RESERVED-MANY 1\r\nRESERVED 1 1\r\nx\r\n"),
            (1, b"stats-job 1\r\n", None),
        ])
        self.assertEqual(beanstalk.parse_yaml(replies[2])["ttr"], "300")

    def test_list_jobs_next_after_a_full_page(self):
        # A page that holds `count` ids says next: the id after its last (the engine's scan
        # cursor), also when no more follow; Redis said the next listed id, or 0.
        def page(nxt, *ids):
            body = b"---\nnext: %d\nids:\n" % nxt + b"".join(b"- %d\n" % i for i in ids)
            return b"OK %d\r\n%s\r\n" % (len(body), body)
        self.check([
            (0, put_many(*[(0, 0, 120, b"x", b"")] * 3),
             b"INSERTED-MANY 3\r\nINSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n"),
            (0, b"list-jobs default ready 0 2\r\n", page(3, 1, 2)),
            (0, b"list-jobs default ready 3 1\r\n", page(4, 3)),
            (0, b"list-jobs default ready 3 2\r\n", page(0, 3)),
            (1, b"reserve-job 2\r\n", b"RESERVED 2 1\r\nx\r\n"),
            (1, b"reserve-job 3\r\n", b"RESERVED 3 1\r\nx\r\n"),
            (0, b"list-jobs default reserved 0 1\r\n", page(3, 2)),
            (0, b"list-jobs default reserved 3 1\r\n", page(4, 3)),
            (0, b"list-jobs default reserved 0 5\r\n", page(0, 2, 3)),
        ])

    def test_a_closed_connections_jobs_come_back_in_reservation_order(self):
        # With no tries left they are buried in that order (the engine's reserved_order_);
        # Redis kept a session's jobs in a SET and gave them back in hash order.
        self.check([
            (0, b"tube-tries default 1\r\n", b"TUBE-TRIES 1\r\n"),
            (0, put_many(*[(0, 0, 120, b"%d" % i, b"") for i in (1, 2, 3, 4)]),
             b"INSERTED-MANY 4\r\nINSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n"),
            (1, b"reserve-job 3\r\n", b"RESERVED 3 1\r\n3\r\n"),
            (1, b"reserve-job 1\r\n", b"RESERVED 1 1\r\n1\r\n"),
            (1, b"reserve-job 4\r\n", b"RESERVED 4 1\r\n4\r\n"),
            (1, b"reserve-job 2\r\n", b"RESERVED 2 1\r\n2\r\n"),
            (1, RECONNECT, b"reconnected\r\n"),
            (0, b"peek-buried\r\n", b"FOUND 3 1\r\n3\r\n"),
            (0, b"kick 1\r\n", b"KICKED 1\r\n"),
            (0, b"peek-buried\r\n", b"FOUND 1 1\r\n1\r\n"),
            (0, b"kick 1\r\n", b"KICKED 1\r\n"),
            (0, b"peek-buried\r\n", b"FOUND 4 1\r\n4\r\n"),
        ])

    def test_tubes_of_a_closed_connection_vanish_in_the_engines_order(self):
        # The first watched tube, the others from the back, then the used one (beanstalkd's
        # ms_clear); Redis dropped the used one first, then the watched ones in order.
        self.check([
            (1, b"use u\r\n", b"USING u\r\n"),
            (1, b"watch x\r\n", b"WATCHING 2\r\n"),
            (1, b"watch y\r\n", b"WATCHING 3\r\n"),
            (1, b"watch z\r\n", b"WATCHING 4\r\n"),
            (2, b"use o1\r\n", b"USING o1\r\n"),
            (2, b"watch o2\r\n", b"WATCHING 2\r\n"),
            (0, b"list-tubes\r\n", tube_list("default", "u", "x", "y", "z", "o1", "o2")),
            (1, RECONNECT, b"reconnected\r\n"),
            (0, b"list-tubes\r\n", tube_list("default", "o1", "o2")),
        ])

    def test_times_just_set_are_whole_seconds_rounded_down(self):
        # A TTR, delay, TTL or pause of 120 s just set has 119 s left, as the engine's ns
        # clock (and beanstalkd's) shows it; Redis, in whole ms, said 120 within the same ms.
        def left(key, value):
            return lambda reply: self.assertIn(b"\n%s: %d\n" % (key, value), reply)

        steps = [
            (0, b"put 0 0 120 1\r\na\r\n", None, None),
            (0, b"reserve\r\n", None, None),
            (0, b"stats-job 1\r\n", None, left(b"time-left", 119)),
            (0, b"touch 1\r\n", b"TOUCHED\r\n", None),
            (0, b"stats-job 1\r\n", None, left(b"time-left", 119)),
            (0, b"release 1 0 120\r\n", b"RELEASED\r\n", None),
            (0, b"stats-job 1\r\n", None, left(b"time-left", 119)),
            (0, b"put 0 120 120 1\r\nb\r\n", None, None),
            (0, b"stats-job 2\r\n", None, left(b"time-left", 119)),
            (0, b"put-ext 0 0 120 1 ttl=120\r\nc\r\n", None, None),
            (0, b"stats-job-ext 3\r\n", None, left(b"ttl-left", 119)),
            (0, b"pause-tube default 120\r\n", b"PAUSED\r\n", None),
            (0, b"stats-tube default\r\n", None, left(b"pause-time-left", 119)),
        ]
        for _ in range(3):  # the old answer came when both calls ran in the same ms
            got = self.check([(conn, command, want) for conn, command, want, _ in steps])
            for (_, _, _, test), reply in zip(steps, got):
                if test:
                    test(reply)

    def test_delayed_jobs_due_in_the_same_millisecond_in_the_order_delayed(self):
        # A job delayed later with the same delay is due later, also within a millisecond
        # (the engine's clock is in ns); Redis ordered the delayed set by due ms, then id.
        # The release and the put are pipelined, so they mostly land in the same ms.
        pair = self.new_pair()
        self.addCleanup(pair.close)
        run = Run(pair)
        self.addCleanup(run.close)
        for _ in range(20):
            for c in run.conns[0]:
                c.send(b"put 0 0 120 1\r\na\r\nreserve-with-timeout 0\r\n")
            first = [(c.read_reply(), c.read_reply()) for c in run.conns[0]]
            self.assertEqual(first[1], first[0])
            jid = int(first[0][0].split()[1])
            for c in run.conns[0]:
                c.send(b"put 0 120 120 1\r\nb\r\nrelease %d 0 120\r\npeek-delayed\r\n"
                       b"delete %d\r\ndelete %d\r\n" % (jid, jid + 1, jid))
            got = [[read_whole_reply(c) for _ in range(5)] for c in run.conns[0]]
            self.assertEqual(got[1], got[0])
            self.assertEqual(got[1][2], b"FOUND %d 1\r\nb\r\n" % (jid + 1))

    def test_bury_of_a_job_past_its_ttl_frees_its_key(self):
        # A reserved job whose TTL passed goes when its reservation ends; by bury, Redis
        # dropped the job but kept its key, so a put with the key said EXISTS for ever.
        self.check([
            (0, b"put-ext 0 0 120 1 ttl=1 key=k\r\nx\r\n", b"INSERTED 1\r\n"),
            (0, b"reserve-job 1\r\n", b"RESERVED 1 1\r\nx\r\n"),
        ])
        time.sleep(1.2)
        self.check_more([
            (0, b"bury 1 0\r\n", b"BURIED\r\n"),
            (1, b"peek 1\r\n", b"NOT_FOUND\r\n"),
            (1, b"put-ext 0 0 120 1 key=k\r\ny\r\n", b"INSERTED 2\r\n"),
        ])


if __name__ == "__main__":
    unittest.main()

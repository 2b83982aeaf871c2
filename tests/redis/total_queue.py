"""The total-queue workload and checker of REDIS-STORE.md §3.2 (after Jepsen's total-queue;
our own code).

Producers put unique bodies through the front ends (round-robin, reconnecting to the next one
when a connection fails) and record every put as
  ok    INSERTED <id> (or BURIED <id>): the job exists;
  fail  a reply known not to have executed (OUT_OF_MEMORY, DRAINING, JOB_TOO_BIG, ...);
  info  fate unknown: INTERNAL_ERROR, a timeout, a dropped connection.
Consumers reserve-with-timeout on every tube of the run and mostly delete (recording each
delivery and each acknowledged DELETED); a few release (delay 0) or bury then kick-job, so
those paths run under the nemesis too. A job a consumer gave back (released, buried, or held
by a connection that failed) is expected to come again: that is not a duplicate. The nemesis
runs in the caller's (main) thread.

drain() stops the producers and lets the consumers empty the queue, judged by the store
(stats-tube of every tube, not idle time), then sweeps what is left itself (kick, reserve).

check() computes:
  lost          ok puts neither delivered nor left over            (must be empty)
  unexpected    delivered bodies never put as ok or info           (must be empty)
  deletes_back  bodies delivered again after an acknowledged delete (must be empty)
  duplicates    bodies delivered more often than put + given back   (reported)
  recovered     info puts that were delivered                      (reported)
"""
import collections
import random
import socket
import threading
import time

import beanstalk



class Indeterminate(Exception):
    """INTERNAL_ERROR to a consumer's command: it may have run (a reserve may have reserved a
    job for this connection). The consumer closes the connection, which gives back whatever
    it may hold, as a careful client would."""


IO_ERRORS = (OSError, EOFError, socket.timeout, ValueError, IndexError, Indeterminate)
NOT_EXECUTED = (b"OUT_OF_MEMORY", b"DRAINING", b"JOB_TOO_BIG", b"BAD_FORMAT",
                b"EXPECTED_CRLF")


class History:
    """What clients saw; every method is thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.puts = {}                               # body -> "ok" | "fail" | "info"
        self.put_replies = collections.Counter()     # first word of each reply / error kind
        self.ok_times = []                           # monotonic time of each ok put's reply
        self.ok_log = []                             # (that time, body) of each ok put
        self.deliveries = collections.defaultdict(list)  # body -> [reserve sent at]
        self.deletes = {}                            # body -> DELETED received at
        self.requeues = collections.Counter()        # body -> times a consumer gave it back
        self.leftovers = set()                       # bodies swept up after the drain
        self.consumer_errors = collections.Counter()  # why consumers reconnected

    def put(self, body, outcome, kind):
        with self.lock:
            self.puts[body] = outcome
            self.put_replies[kind] += 1
            if outcome == "ok":
                t = time.monotonic()
                self.ok_times.append(t)
                self.ok_log.append((t, body))

    def delivered(self, body, sent_at):
        with self.lock:
            self.deliveries[body].append(sent_at)

    def deleted(self, body):
        with self.lock:
            self.deletes[body] = time.monotonic()

    def consumer_error(self, kind):
        with self.lock:
            self.consumer_errors[kind] += 1

    def requeued(self, body):
        with self.lock:
            self.requeues[body] += 1

    def check(self):
        with self.lock:
            ok = {b for b, o in self.puts.items() if o == "ok"}
            info = {b for b, o in self.puts.items() if o == "info"}
            seen = set(self.deliveries) | self.leftovers
            dup = {b: len(ts) - 1 - self.requeues[b] for b, ts in self.deliveries.items()
                   if len(ts) - 1 > self.requeues[b]}
            back = {b for b, t in self.deletes.items()
                    if any(s > t for s in self.deliveries.get(b, ()))}
            back |= self.leftovers & set(self.deletes)
            return Result(
                ok=len(ok), info=len(info),
                fail=sum(1 for o in self.puts.values() if o == "fail"),
                delivered=len(self.deliveries), leftovers=len(self.leftovers),
                lost=sorted(ok - seen), unexpected=sorted(set(self.deliveries) - ok - info),
                deletes_back=sorted(back), duplicates=dup,
                recovered=sorted(info & seen), replies=dict(self.put_replies),
                consumer_errors=dict(self.consumer_errors))

    def write_gap(self, since, until):
        """The longest time without an ok put between `since` and `until` (monotonic)."""
        with self.lock:
            ts = sorted(t for t in self.ok_times if since <= t <= until)
        edges = [since] + ts + [until]
        return max(b - a for a, b in zip(edges, edges[1:]))

    def ok_between(self, since, until):
        """The bodies of the ok puts acknowledged between `since` and `until` (monotonic)."""
        with self.lock:
            return [b for t, b in self.ok_log if since <= t <= until]

    def first_ok_after(self, t):
        with self.lock:
            later = [x for x in self.ok_times if x > t]
        return min(later) if later else None


class Result:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def summary(self):
        return ("ok %d, info %d, fail %d; delivered %d, left over %d; lost %d, unexpected %d, "
                "deletes back %d, duplicates %d, recovered %d; put replies %s; consumer "
                "reconnects %s"
                % (self.ok, self.info, self.fail, self.delivered, self.leftovers,
                   len(self.lost), len(self.unexpected), len(self.deletes_back),
                   sum(self.duplicates.values()), len(self.recovered), self.replies,
                   self.consumer_errors))


class Workload:
    """Producers and consumers over `front_ends` (beanstalk.Server objects, or anything with
    connect(timeout)) on `tubes`. start(), then the caller's nemesis, then drain() and
    history.check(). Producer i puts into tubes[i % len(tubes)] (tube_of(body) says which)."""

    def __init__(self, front_ends, tubes, producers=3, consumers=2, pad=100, seed=1,
                 reply_timeout=8.0, tag="w", ttr=10, put_pause=0.0):
        self.front_ends = list(front_ends)
        self.tubes = list(tubes)
        self.n_producers, self.n_consumers = producers, consumers
        self.pad = b"." * pad
        self.seed = seed
        self.timeout = reply_timeout
        self.tag = tag
        # Consumers finish a job in milliseconds: a TTR expiry means a reservation nobody
        # held any more (counted in job_timeouts). Short, so that such a job comes back
        # within drain()'s deadline.
        self.ttr = ttr
        # Seconds a producer sleeps after each put (0: none), to keep the backlog within what
        # the consumers drain in time when reserves are slower than puts.
        self.put_pause = put_pause
        self.job_timeouts = None
        self.history = History()
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.threads = []
        self.errors = []                         # exceptions that ended a thread
        self.last_counts = None                  # drain(): the store's last view
        self.final_counts = None                 # the store's view after the sweep

    def tube_of(self, body):
        """The tube a put's body went to (from the producer number in the body)."""
        i = int(body.split(b"-p", 1)[1].split(b"-", 1)[0])
        return self.tubes[i % len(self.tubes)]

    # ---- threads

    def start(self):
        for i in range(self.n_producers):
            self._spawn(self._producer, i)
        for i in range(self.n_consumers):
            self._spawn(self._consumer, i)
        return self

    def _spawn(self, fn, i):
        def run():
            try:
                fn(i)
            except BaseException as e:           # a harness bug: make the test fail
                self.errors.append(repr(e))
        t = threading.Thread(target=run, daemon=True, name="%s-%d" % (fn.__name__, i))
        t.start()
        self.threads.append(t)

    def _connect(self, k):
        """A connection to front end k mod n, or None (after a short pause) if refused."""
        fe = self.front_ends[k % len(self.front_ends)]
        try:
            return fe.connect(timeout=self.timeout)
        except OSError:
            time.sleep(0.05)
            return None

    def _producer(self, i):
        h, n, k, c = self.history, 0, i, None
        tube = self.tubes[i % len(self.tubes)]
        while not self.stop_producing.is_set():
            if c is None:
                c = self._connect(k)
                if c is None:
                    k += 1
                    continue
                try:
                    if c.cmd("use " + tube) != b"USING %s\r\n" % tube.encode():
                        raise OSError("use failed")
                except IO_ERRORS:
                    c.close()
                    c, k = None, k + 1
                    continue
            if self.put_pause:
                time.sleep(self.put_pause)
            body = b"%s-p%d-%d|" % (self.tag.encode(), i, n) + self.pad
            n += 1
            try:
                r = c.cmd(b"put 100 0 %d %d\r\n%s\r\n" % (self.ttr, len(body), body))
            except IO_ERRORS as e:
                h.put(body, "info", type(e).__name__)
                c.close()
                c, k = None, k + 1
                continue
            word = r.split()[0] if r.split() else r
            if word in (b"INSERTED", b"BURIED"):
                h.put(body, "ok", word.decode())
            elif word in NOT_EXECUTED:
                h.put(body, "fail", word.decode())
            else:                                 # INTERNAL_ERROR and anything unforeseen
                h.put(body, "info", word.decode(errors="replace"))
                if word == b"INTERNAL_ERROR":
                    time.sleep(0.01)
        if c is not None:
            c.close()

    def _consumer(self, i):
        h, k, c = self.history, i, None
        rnd = random.Random(self.seed * 1000 + i)
        held = None                              # the body of the job this consumer holds
        while not self.stop_consuming.is_set():
            if c is None:
                c = self._connect(k)
                if c is None:
                    k += 1
                    continue
                try:
                    for t in self.tubes:
                        c.cmd("watch " + t)
                except IO_ERRORS:
                    c.close()
                    c, k = None, k + 1
                    continue
            try:
                sent = time.monotonic()
                r = self._ask(c, "reserve-with-timeout 1")
                if not r.startswith(b"RESERVED "):
                    continue
                head, body = r.split(b"\r\n", 1)
                jid, held = int(head.split()[1]), body[:-2]
                h.delivered(held, sent)
                roll = rnd.random()
                if roll < 0.05:
                    if self._ask(c, "release %d 100 0" % jid) == b"RELEASED\r\n":
                        h.requeued(held)
                elif roll < 0.10:
                    # Buried, it comes back by this kick-job or by drain()'s kick.
                    if self._ask(c, "bury %d 100" % jid) == b"BURIED\r\n":
                        h.requeued(held)
                        held = None
                        self._ask(c, "kick-job %d" % jid)
                elif self._ask(c, "delete %d" % jid) == b"DELETED\r\n":
                    h.deleted(held)
                held = None
            except IO_ERRORS as e:
                h.consumer_error(type(e).__name__ + (
                    " to " + str(e).split()[0] if isinstance(e, Indeterminate) else ""))
                if held is not None:             # released when its connection closes
                    h.requeued(held)
                    held = None
                c.close()
                c, k = None, k + 1
        if c is not None:
            c.close()

    @staticmethod
    def _ask(c, command):
        r = c.cmd(command)
        if r == b"INTERNAL_ERROR\r\n":
            raise Indeterminate(command)
        return r

    # ---- the end

    def stop_producers(self):
        self.stop_producing.set()
        for t in self.threads[:self.n_producers]:
            t.join(timeout=self.timeout + 5)

    def _tube_counts(self, c):
        out = {}
        for t in self.tubes:
            r = c.cmd("stats-tube " + t)
            if r == b"NOT_FOUND\r\n":
                out[t] = {}
                continue
            st = beanstalk.parse_yaml(r)
            out[t] = {k: int(st["current-jobs-" + k])
                      for k in ("ready", "reserved", "delayed", "buried")
                      if st["current-jobs-" + k] != "0"}
        return out

    def _monitor(self):
        for k in range(len(self.front_ends)):
            try:
                return self.front_ends[k].connect(timeout=self.timeout)
            except OSError:
                continue
        raise AssertionError("no front end accepts connections")

    def drain(self, timeout=30.0):
        """Stop the producers; let the consumers empty every tube (judged by stats-tube);
        stop them; sweep what is left (kick, reserve) into history.leftovers. Returns the
        seconds the consumers took, or None if the store's job count stopped falling for
        `timeout` seconds (a stall: the bound is on a hang, not on the machine's speed; a
        busy machine drains slowly but steadily). The counts seen are kept in drain_log."""
        self.stop_producers()
        t0 = time.monotonic()
        took, empty_since, mon = None, None, None
        least, progress_at = None, t0
        self.drain_log = []
        while time.monotonic() - progress_at < timeout:
            try:
                mon = mon or self._monitor()
                counts = self._tube_counts(mon)
                for t, cnt in counts.items():    # a bury whose kick-job was lost
                    if cnt.get("buried"):
                        mon.cmd("use " + t)
                        mon.cmd("kick 100000")
            except IO_ERRORS:
                if mon:
                    mon.close()
                mon = None
                time.sleep(0.1)
                continue
            self.last_counts = counts
            left = sum(n for cnt in counts.values() for n in cnt.values())
            if least is None or left < least:
                least, progress_at = left, time.monotonic()
                self.drain_log.append((round(progress_at - t0, 1), left))
            if left:
                empty_since = None
            elif empty_since is None:
                empty_since = time.monotonic()
            elif time.monotonic() - empty_since >= 0.3:
                took = empty_since - t0
                break
            time.sleep(0.1)
        self.stop_consuming.set()
        for t in self.threads[self.n_producers:]:
            t.join(timeout=self.timeout + 5)
        self.history.leftovers = self._sweep()
        if mon:
            mon.close()
        return took

    def _sweep(self):
        left = set()
        c = self._monitor()
        try:
            for t in self.tubes:
                c.cmd("watch " + t)
                c.cmd("use " + t)
                c.cmd("kick 100000")
            while True:
                r = c.cmd("reserve-with-timeout 0")
                if not r.startswith(b"RESERVED "):
                    break
                head, body = r.split(b"\r\n", 1)
                left.add(body[:-2])
                c.cmd("delete %s" % head.split()[1].decode())
            self.final_counts = self._tube_counts(c)
            self.job_timeouts = int(beanstalk.stats_of(c, "stats")["job-timeouts"])
        finally:
            c.close()
        return left

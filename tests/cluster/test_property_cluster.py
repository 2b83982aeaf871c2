"""The property test of tests/redis/test_property.py on a Redis Cluster (issue 17,
docs/SCALE-OUT.md, "Redis Cluster"): stalkd with `--store redis-cluster://... --store-wait 0`
on one RedisCluster(masters=3, replicas=0) for the class answers every command of the seeded
random sequences as stalkd on its embedded store does, byte for byte once ids are translated.

What a cluster changes, and how the comparison stays exact:
- Tubes. A reserve over tubes of several partitions is not exact on a cluster (SCALE-OUT,
  "Deviations on a cluster"), so every tube of a run is in default's partition: names
  "t1-<n>", "t2-<n>" (and the never-used "nx-<n>") found by brute force with
  tube_partition(name) == tube_partition("default"). Then reserve order, list-tubes order
  (default, then the partition's tubes in creation order) and ids are exact.
- Ids. A job id on the cluster is seq * 1024 + p (p the partition), where seq is the id the
  embedded store gives the same job. ClusterIds translates the ids in the commands sent to
  the cluster front end (n -> n * 1024 + p) and those in its replies back (and recomputes a
  YAML reply's byte count), before the byte-for-byte comparison.
  Ids no job has yet go to other partitions (ClusterIds.foreign), so commands reach the
  other masters too.
- Everything else is normalised as for the single Redis (test_property.normalise).
A failure shows the commands as the embedded server got them and the cluster front end's
reply translated back ("redis:"; `~<id>` is an id outside the partition).

Run: python3 -m unittest -v tests/cluster/test_property_cluster.py
Environment: as test_property (PROPERTY_SEEDS, PROPERTY_COMMANDS, PROPERTY_FIRST_SEED; 30 x 400
from seed 1 by default, one by one and in bursts; a third of the seeds over `(default)...`
tubes and with two front ends). Skipped when redis-server is not installed.
"""
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTS, "lib"))
sys.path.insert(0, os.path.join(TESTS, "redis"))
import redis_fixture  # noqa: E402
import test_property as prop  # noqa: E402
from redis_cluster_fixture import PARTITIONS as PARTS  # noqa: E402
from redis_cluster_fixture import RedisCluster, crc16, tube_partition  # noqa: E402



def name_in_partition(prefix, p):
    """The first name prefix + <n> (n = 0, 1, ...) in partition p."""
    n = 0
    while tube_partition("%s%d" % (prefix, n)) != p:
        n += 1
    return "%s%d" % (prefix, n)


PARTITION = tube_partition("default")
TUBES = ["default"] + [name_in_partition(t + "-", PARTITION) for t in prop.TUBES[1:]]
NO_TUBE = name_in_partition(prop.NO_TUBE + "-", PARTITION)

# Commands whose first argument is a job id; delete-many's are all ids (list-jobs' `from`
# is a cursor: ClusterIds.cursor_to_cluster).
ID_VERBS = {b"delete", b"release", b"bury", b"touch", b"peek", b"kick-job", b"stats-job",
            b"stats-job-ext", b"reserve-job"}


class ClusterIds:
    """Translates job ids between the embedded store (n) and the cluster store, where all
    jobs are in partition p (n * PARTS + p). An id of the cluster's that is not in p comes
    back as `~<id>`, so it cannot compare equal.

    foreign: an id above every id a reply has shown (no job has it yet on either server)
    goes to another partition (on any master), where no job has it either; only where each
    command is sent after the replies to those before it (not in bursts)."""

    def __init__(self, p, foreign=False):
        self.p = p
        self.foreign = foreign
        self.highest = 0   # the highest seq in a reply so far

    def to_cluster(self, n):
        if n <= 0:
            return 0   # no job on either (a refusal)
        if self.foreign and n > self.highest:
            return n * PARTS + (self.p + 1 + n * 337 % (PARTS - 1)) % PARTS
        return n * PARTS + self.p

    def from_cluster(self, n):
        if n == 0:
            return b"0"
        if n % PARTS != self.p:
            return b"~%d" % n
        self.highest = max(self.highest, n // PARTS)
        return b"%d" % (n // PARTS)

    def cursor_to_cluster(self, n):
        """list-jobs' `from`: a cursor, any value in ((n - 1) * 1024 + p, n * 1024 + p]
        means "from seq n"; an even n goes as the lowest (as a `next` of last id + 1 comes
        back), an odd one as the id."""
        if n <= 0:
            return 0
        return (n - 1) * PARTS + self.p + 1 if n % 2 == 0 else n * PARTS + self.p

    def cursor_from_cluster(self, n):
        """list-jobs' `next`: a cursor, not always an id (the last id + 1 after a full
        page); the smallest seq whose id is at least n."""
        return b"%d" % max(0, -(-(n - self.p) // PARTS))

    def _id_token(self, tok):
        return b"%d" % self.to_cluster(int(tok)) if re.fullmatch(rb"\d{1,15}", tok) else tok

    def command(self, command):
        """`command` as the cluster front end gets it (its body, if any, as it is)."""
        line, crlf, rest = command.partition(b"\r\n")
        words = line.split(b" ")
        if words[0] in ID_VERBS and len(words) > 1:
            words[1] = self._id_token(words[1])
        elif words[0] == b"delete-many":
            words[1:] = [self._id_token(w) for w in words[1:]]
        elif words[0] == b"list-jobs" and len(words) > 3 and words[3].isdigit():
            words[3] = b"%d" % self.cursor_to_cluster(int(words[3]))
        return b" ".join(words) + crlf + rest

    def _line(self, line):
        """One reply line: INSERTED, EXISTS, RESERVED, FOUND <id> ... in the embedded ids."""
        m = re.match(rb"(INSERTED|EXISTS|RESERVED|FOUND) (\d+)(.*)", line, re.S)
        if not m:
            return line
        return b"%s %s%s" % (m.group(1), self.from_cluster(int(m.group(2))), m.group(3))

    def reply(self, command, reply):
        """The cluster front end's whole `reply` to `command` in the embedded store's ids."""
        verb = command.split(b" ", 1)[0].rstrip(b"\r\n")
        if verb == b"stats-job-ext":
            verb = b"stats-job"
        m = re.fullmatch(rb"OK \d+\r\n(---\n.*)\r\n", reply, re.S)
        if m:
            if verb not in (b"stats-job", b"list-jobs"):
                return reply
            lines = m.group(1).split(b"\n")
            for i, line in enumerate(lines):
                key, sep, value = line.partition(b": ")
                if verb == b"stats-job" and key == b"id" and value.isdigit():
                    lines[i] = b"id: " + self.from_cluster(int(value))
                elif verb == b"list-jobs" and key == b"next" and value.isdigit():
                    lines[i] = b"next: " + self.cursor_from_cluster(int(value))
                elif verb == b"list-jobs" and re.fullmatch(rb"- \d+", line):
                    lines[i] = b"- " + self.from_cluster(int(line[2:]))
            body = b"\n".join(lines)
            return b"OK %d\r\n%s\r\n" % (len(body), body)
        first, _, rest = reply.partition(b"\r\n")
        if first.startswith(b"INSERTED-MANY "):
            return b"".join(self._line(x) + b"\r\n" for x in reply.split(b"\r\n")[:-1])
        if first.startswith(b"RESERVED-MANY "):
            out = [first + b"\r\n"]
            while rest:   # RESERVED <id> <bytes>\r\n<body>\r\n, n times
                head, _, rest = rest.partition(b"\r\n")
                if not re.fullmatch(rb"RESERVED \d+ \d+", head):
                    return reply   # not a reply to translate: compared as it is
                size = int(head.rsplit(b" ", 1)[1])
                out.append(self._line(head) + b"\r\n" + rest[:size + 2])
                rest = rest[size + 2:]
            return b"".join(out)
        return self._line(first) + b"\r\n" + rest if _ else reply


class ClusterIdsTest(unittest.TestCase):
    """ClusterIds on literal commands and replies (partition 598, default's)."""

    ids = ClusterIds(598)

    def test_partition_of_the_tubes(self):
        self.assertEqual(tube_partition("default"), 598)
        self.assertEqual(tube_partition("(default)x"), 598)
        self.assertEqual(tube_partition("()default"), crc16(b"()default") % PARTS)
        for names in ([ClusterCase.no_tube] + ClusterCase.tubes,
                      [ClusterGroupTubesCase.no_tube] + ClusterGroupTubesCase.tubes):
            self.assertEqual([tube_partition(name) for name in names], [PARTITION] * 4)
            self.assertEqual(len(set(names)), 4)

    def test_commands(self):
        c = self.ids.command
        self.assertEqual(c(b"delete 3\r\n"), b"delete 3670\r\n")
        self.assertEqual(c(b"release 1 5 0\r\n"), b"release 1622 5 0\r\n")
        self.assertEqual(c(b"bury 2 7\r\n"), b"bury 2646 7\r\n")
        self.assertEqual(c(b"kick-job 0\r\n"), b"kick-job 0\r\n")
        self.assertEqual(c(b"peek 0\r\n"), b"peek 0\r\n")
        for verb in (b"touch", b"peek", b"stats-job", b"reserve-job"):
            self.assertEqual(c(verb + b" 10\r\n"), verb + b" 10838\r\n")
        self.assertEqual(c(b"delete-many 1 0 2\r\n"), b"delete-many 1622 0 2646\r\n")
        self.assertEqual(c(b"list-jobs t1 ready 2 5\r\n"), b"list-jobs t1 ready 1623 5\r\n")
        self.assertEqual(c(b"list-jobs t1 ready 3 5\r\n"), b"list-jobs t1 ready 3670 5\r\n")
        self.assertEqual(c(b"list-jobs t1 ready 0 5\r\n"), b"list-jobs t1 ready 0 5\r\n")
        # Refused for their form on both: as they are, apart from the id.
        self.assertEqual(c(b"delete-many\r\n"), b"delete-many\r\n")
        self.assertEqual(c(b"touch\r\n"), b"touch\r\n")
        self.assertEqual(c(b"release 1 0\r\n"), b"release 1622 0\r\n")
        self.assertEqual(c(b"stats-job -1\r\n"), b"stats-job -1\r\n")
        # Not ids: numbers of other commands, bodies.
        for same in (b"put 1 2 3 4\r\n1 2 \r\n", b"kick 5\r\n", b"pause-tube t1 10\r\n",
                     b"reserve-with-timeout 0\r\n", b"put-ext 0 0 120 1 key=k1\r\n9\r\n",
                     b"tube-tries t1 2\r\n", b"stats-tube 5\r\n"):
            self.assertEqual(c(same), same)

    def test_foreign_ids(self):
        ids = ClusterIds(598, foreign=True)
        self.assertEqual(ids.command(b"delete 3\r\n"), b"delete 3658\r\n")  # 3 * 1024 + 586
        self.assertEqual(ids.command(b"peek 1\r\n"), b"peek 1960\r\n")      # 1024 + 936
        self.assertEqual(ids.reply(b"put 0 0 1 1\r\n", b"INSERTED 3670\r\n"), b"INSERTED 3\r\n")
        self.assertEqual(ids.command(b"delete-many 3 1 4 0\r\n"),
                         b"delete-many 3670 1622 5020 0\r\n")             # 4 * 1024 + 924
        self.assertEqual(ids.command(b"list-jobs t1 ready 5 5\r\n"),
                         b"list-jobs t1 ready 5718 5\r\n")   # not foreign: a cursor
        for n in range(1, 5000):
            self.assertEqual(ids.to_cluster(n) % 1024 == 598, n <= 3, n)

    def test_replies(self):
        r = self.ids.reply
        self.assertEqual(r(b"put 0 0 1 1\r\n", b"INSERTED 1622\r\n"), b"INSERTED 1\r\n")
        self.assertEqual(r(b"put-ext\r\n", b"EXISTS 10838\r\n"), b"EXISTS 10\r\n")
        self.assertEqual(r(b"put 0 0 1 1\r\n", b"INSERTED 1623\r\n"), b"INSERTED ~1623\r\n")
        self.assertEqual(r(b"reserve-with-timeout 0\r\n", b"RESERVED 2646 13\r\nINSERTED 1622\r\n"),
                         b"RESERVED 2 13\r\nINSERTED 1622\r\n")
        self.assertEqual(r(b"peek 1\r\n", b"FOUND 1622 0\r\n\r\n"), b"FOUND 1 0\r\n\r\n")
        for same in (b"NOT_FOUND\r\n", b"DELETED-MANY 3\r\n", b"KICKED 1622\r\n",
                     b"TIMED_OUT\r\n", b"USING t1\r\n", b"RELEASED\r\n"):
            self.assertEqual(r(b"x\r\n", same), same)
        self.assertEqual(
            r(b"put-many 3 1\r\n", b"INSERTED-MANY 3\r\nINSERTED 1622\r\nJOB_TOO_BIG\r\n"
                                   b"EXISTS 102998\r\n"),
            b"INSERTED-MANY 3\r\nINSERTED 1\r\nJOB_TOO_BIG\r\nEXISTS 100\r\n")
        self.assertEqual(
            r(b"reserve-ext 0 count=2\r\n", b"RESERVED-MANY 2\r\nRESERVED 1622 12\r\n"
                                            b"RESERVED 9 9\r\nRESERVED 2646 0\r\n\r\n"),
            b"RESERVED-MANY 2\r\nRESERVED 1 12\r\nRESERVED 9 9\r\nRESERVED 2 0\r\n\r\n")
        odd = b"RESERVED-MANY 2\r\nRESERVED 1622 1\r\nx\r\nINTERNAL_ERROR\r\n"
        self.assertEqual(r(b"reserve-ext 0 count=2\r\n", odd), odd)

    def test_yaml_replies(self):
        r = self.ids.reply

        def ok(body):
            return b"OK %d\r\n%s\r\n" % (len(body), body)
        self.assertEqual(r(b"stats-job 1622\r\n", ok(b"---\nid: 102998\ntube: default\n"
                                                     b"pri: 1622\n")),
                         ok(b"---\nid: 100\ntube: default\npri: 1622\n"))
        self.assertEqual(r(b"list-jobs default ready 0 2\r\n",
                           ok(b"---\nnext: 2647\nids:\n- 1622\n- 2646\n")),
                         ok(b"---\nnext: 3\nids:\n- 1\n- 2\n"))
        self.assertEqual(r(b"list-jobs default reserved 0 2\r\n",
                           ok(b"---\nnext: 3670\nids:\n- 1622\n- 2646\n")),
                         ok(b"---\nnext: 3\nids:\n- 1\n- 2\n"))
        self.assertEqual(r(b"list-jobs default ready 5 2\r\n", ok(b"---\nnext: 0\nids: []\n")),
                         ok(b"---\nnext: 0\nids: []\n"))
        # Tube names and counters are not ids.
        for command, body in ((b"list-tubes\r\n", b"---\n- default\n- 1622\n"),
                              (b"stats\r\n", b"---\ncurrent-jobs-ready: 1622\nid: 1622\n"),
                              (b"stats-tube 1622\r\n", b"---\nname: 1622\n")):
            self.assertEqual(r(command, ok(body)), ok(body))


CLUSTER = None   # one RedisCluster(masters=3, replicas=0) for the module's cases


def setUpModule():
    global CLUSTER
    if not redis_fixture.available():
        raise unittest.SkipTest("redis-server is not installed (scripts/setup.sh)")
    t0 = time.monotonic()
    CLUSTER = RedisCluster(masters=3, replicas=0)
    unittest.addModuleCleanup(CLUSTER.close)
    print("\ncluster of 3 masters up in %.1f s" % (time.monotonic() - t0), file=sys.stderr)


class ClusterCase(prop.Comparison, unittest.TestCase):
    """On the module's cluster (no replicas, so --store-wait 0); fresh servers and prefix
    per run."""

    maxDiff = None
    tubes, no_tube = TUBES, NO_TUBE
    foreign = True   # ids no job has yet to other partitions (not in bursts)

    def new_id_map(self):
        return ClusterIds(PARTITION, foreign=self.foreign and not self.bursts)

    @classmethod
    def setUpClass(cls):
        cls.redis_url = CLUSTER.url()


class ClusterPropertyCase(ClusterCase):
    """The property: stalkd on a Redis Cluster answers as stalkd on its embedded store."""

    def test_random_sequences(self):
        self.check_seeds(range(prop.FIRST_SEED, prop.FIRST_SEED + prop.SEEDS), prop.COMMANDS)


class ClusterBurstsCase(ClusterCase):
    """The same with commands pipelined in bursts (results of several masters handed out in
    command order by ticket)."""

    bursts = True

    def test_random_sequences(self):
        self.check_seeds(range(prop.FIRST_SEED, prop.FIRST_SEED + prop.SEEDS), prop.COMMANDS)


class ClusterGroupTubesCase(ClusterCase):
    """The same over tubes named `(default)...`: a group's tubes share its partition, here
    default's (a third of the seeds)."""

    tubes = ["default", "(default)t1", "(default)(t2)"]
    no_tube = "(default)nx"

    def test_random_sequences(self):
        self.check_seeds(range(prop.FIRST_SEED, prop.FIRST_SEED + max(1, prop.SEEDS // 3)),
                         prop.COMMANDS)


class ClusterTwoFrontEndsCase(ClusterCase):
    """Two front ends on the cluster and one prefix, the last connection on the second
    (test_property.RedisTwoFrontEndsCase's normalisations; a third of the seeds)."""

    front_ends = 2

    def test_random_sequences(self):
        self.check_seeds(range(prop.FIRST_SEED, prop.FIRST_SEED + max(1, prop.SEEDS // 3)),
                         prop.COMMANDS)


if __name__ == "__main__":
    unittest.main()

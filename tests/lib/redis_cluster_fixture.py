"""A real Redis Cluster for the tests of stalkd on Redis Cluster (issue 17;
../shared/design/REDIS-STORE.md §2.2-2.8, §2.14).

RedisCluster(masters=3, replicas=1): cluster-enabled redis-server nodes (the settings of
  redis_fixture.RedisServer: AOF on, noeviction, `save ""`; plus cluster-enabled,
  cluster-node-timeout `node_timeout_ms`), each on a free loopback port whose cluster bus
  port (+10000) is free too, in its own temp dir; the cluster created by
  `redis-cli --cluster create ... --cluster-replicas R --cluster-yes` and up once every node
  says cluster_state:ok and agrees on who serves every slot.
  nodes / masters() / replicas(), url() for stalkd's --store, kill_master(i) (SIGKILL) and
  wait_failover(), restart(node), move_slots(slots, src, dst) (CLUSTER SETSLOT IMPORTING /
  MIGRATING, MIGRATE of the keys, SETSLOT NODE on every master), reshard(n, src, dst)
  (`redis-cli --cluster reshard`), rebalance(), keyslot(key), owner(slot),
  delete_matching(pattern), close(). replicas=0 makes a cluster of masters only (enough with
  stalkd's --store-wait 0); masters=1 or 2 are made by hand (redis-cli wants 3 or more).
  slot_map() (every slot's master, one CLUSTER SLOTS), slots_of(node), pick_tubes(...):
  tube names whose partitions are served by given masters.
  tls=RedisTls(...) (redis_fixture): every node listens on TLS only, its cluster bus and
  replication TLS too (tls-cluster yes, tls-replication yes); url() is rediss-cluster://.

stalkd's partitions (docs/SCALE-OUT.md): a tube's partition is CRC16 of the text inside the
first `(...)` of its name when non-empty, else of the whole name, mod 1024
(tube_partition); partition p's keys carry the hash tag `{p/1024}`, so it lives in slot
keyslot("{p/1024}") (partition_slot).

Every process is a redis_fixture process: PDEATHSIG when started from the main thread,
killed by PID at exit at the latest; close() stops every one by its PID, and a cluster that
fails to come up is closed before the error propagates.
"""
import os
import socket
import subprocess

from beanstalk import free_port, wait_until
from redis_fixture import HOST, RedisServer, RespError, _tail, parse_info

REDIS_CLI = "/usr/bin/redis-cli"
SLOTS = 16384


def cluster_port():
    """A free loopback port below 55536 whose cluster bus port (port + 10000) is free too."""
    while True:
        port = free_port()
        if port > 65535 - 10000:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((HOST, port + 10000))
        except OSError:
            continue
        return port


def crc16(data):
    """CRC16-XMODEM, Redis Cluster's key hash (bitwise; for checks in the tests)."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def _tag(name, opening, closing):
    """`name` (str or bytes) as bytes, or the text inside its first opening...closing pair
    when that is non-empty (Redis' hash tags, stalkd's tube groups)."""
    if isinstance(name, str):
        name = name.encode()
    start = name.find(opening)
    if start >= 0:
        end = name.find(closing, start + 1)
        if end > start + 1:
            return name[start + 1:end]
    return name


def keyslot(key):
    """The hash slot of `key` (str or bytes): CRC16 of its hash tag, the text inside the first
    `{...}` when non-empty, else of the whole key, mod 16384."""
    return crc16(_tag(key, b"{", b"}")) % SLOTS


PARTITIONS = 1024


def tube_partition(tube):
    """stalkd's partition of `tube` (str or bytes)."""
    return crc16(_tag(tube, b"(", b")")) % PARTITIONS


def partition_slot(p):
    """The hash slot of partition p's keys (hash tag `{p/1024}`)."""
    return keyslot("{%d/%d}" % (p, PARTITIONS))


def tube_slot(tube):
    return partition_slot(tube_partition(tube))


class ClusterNode(RedisServer):
    """One cluster-enabled redis-server; the node's id is `node_id` once the cluster exists."""

    def __init__(self, node_timeout_ms, extra=(), password=None, tls=None):
        lines = ["cluster-enabled yes", "cluster-config-file nodes.conf",
                 "cluster-node-timeout %d" % node_timeout_ms,
                 # A replica that lost its master a while ago may still be promoted.
                 "cluster-replica-validity-factor 0",
                 # One shard down does not stop the others serving.
                 "cluster-require-full-coverage no",
                 # A node learns its address from a peer's MEET: a lone node (a cluster of
                 # one master) would otherwise name itself "" in CLUSTER SLOTS.
                 "cluster-announce-ip %s" % HOST] + list(extra)
        if tls is not None:  # the bus port is the TLS port + 10000
            lines.append("tls-cluster yes")
        super().__init__(port=cluster_port(), extra=lines, password=password, tls=tls)

    @property
    def hostport(self):
        """"127.0.0.1:port", as redis-cli and stalkd's URL name it."""
        return "%s:%d" % (HOST, self.port)

    def node_id(self):
        return self.call("CLUSTER", "MYID").decode()

    def cluster_info(self):
        return parse_info(self.call("CLUSTER", "INFO"))

    def cluster_state_ok(self):
        try:
            return self.cluster_info().get("cluster_state") == "ok"
        except (OSError, EOFError, RespError):
            return False

    def slot_owners(self):
        """{slot range (start, end): (host, port) of its master} from CLUSTER SLOTS."""
        out = {}
        for entry in self.call("CLUSTER", "SLOTS"):
            out[(entry[0], entry[1])] = (entry[2][0].decode(), entry[2][1])
        return out


class RedisCluster:
    def __init__(self, masters=3, replicas=1, node_timeout_ms=1000, extra=(), password=None,
                 tls=None):
        """password: every node's requirepass and masterauth (RedisServer's); tls: a RedisTls
        for every node."""
        assert masters >= 1
        self.node_timeout_ms = node_timeout_ms
        self.password = password
        self.tls = tls
        self.nodes = []
        try:
            for _ in range(masters * (1 + replicas)):
                self.nodes.append(ClusterNode(node_timeout_ms, extra, password, tls))
            if masters >= 3:
                self._cli("--cluster", "create", *[n.hostport for n in self.nodes],
                          "--cluster-replicas", str(replicas), "--cluster-yes")
            else:                   # redis-cli creates clusters of 3 masters or more
                self._create_by_hand(masters)
            self.wait_ok()
            if replicas:
                if not wait_until(lambda: all(r.link_up() for r in self.replicas()),
                                  timeout=20.0, interval=0.05):
                    raise RuntimeError("cluster replicas not in sync")
        except BaseException:
            self.close()
            raise

    def _create_by_hand(self, masters):
        """What `redis-cli --cluster create` does, for 1 or 2 masters: the first `masters`
        nodes take equal slot ranges and distinct config epochs, meet, and every other node
        replicates them in turn once it knows them."""
        heads = self.nodes[:masters]
        for i, n in enumerate(heads):
            n.call("CLUSTER", "ADDSLOTSRANGE", SLOTS * i // masters,
                   SLOTS * (i + 1) // masters - 1)
            n.call("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        for n in self.nodes[1:]:
            self.nodes[0].call("CLUSTER", "MEET", HOST, n.port)
        ids = [n.node_id() for n in heads]

        def known():
            try:
                return all(len(n.call("CLUSTER", "NODES").splitlines()) == len(self.nodes)
                           for n in self.nodes)
            except (OSError, EOFError, RespError):
                return False
        if not wait_until(known, timeout=20.0, interval=0.05):
            raise RuntimeError("cluster nodes did not meet")
        for i, n in enumerate(self.nodes[masters:]):
            n.call("CLUSTER", "REPLICATE", ids[i % masters])

    # ---- what the cluster is

    def _cli(self, *args, timeout=60.0):
        env = dict(os.environ)
        if self.password is not None:
            env["REDISCLI_AUTH"] = self.password  # not on its command line
        tls = self.tls.cli_args() if self.tls is not None else []
        r = subprocess.run([REDIS_CLI] + tls + list(args), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL, env=env)
        if r.returncode != 0:
            raise RuntimeError("redis-cli %s: %s%s" % (" ".join(args[:2]), r.stdout[-2000:],
                                                        r.stderr[-2000:]))
        return r.stdout

    def running_nodes(self):
        return [n for n in self.nodes if n.running()]

    def roles(self):
        """{node: 'master' or 'slave'} of the running nodes."""
        out = {}
        for n in self.running_nodes():
            try:
                out[n] = n.role()
            except (OSError, EOFError, RespError):
                pass
        return out

    def masters(self):
        """The running nodes that are masters and serve slots, in port order."""
        return sorted((n for n, role in self.roles().items()
                       if role == "master" and self._has_slots(n)), key=lambda n: n.port)

    def replicas(self):
        return sorted((n for n, role in self.roles().items() if role == "slave"),
                      key=lambda n: n.port)

    def _has_slots(self, node):
        try:
            mine = node.addr
            return any(addr == mine for addr in node.slot_owners().values())
        except (OSError, EOFError, RespError):
            return False

    def url(self):
        """stalkd's --store URL: every node as a seed (rediss-cluster:// with TLS)."""
        scheme = "rediss-cluster://" if self.tls is not None else "redis-cluster://"
        return scheme + ",".join(n.hostport for n in self.nodes)

    def node_at(self, addr):
        for n in self.nodes:
            if n.addr == tuple(addr):
                return n
        raise KeyError(addr)

    def owner(self, slot):
        """The node serving `slot`, as a live master sees it."""
        for n in self.masters():
            for (start, end), addr in n.slot_owners().items():
                if start <= slot <= end:
                    return self.node_at(addr)
        raise KeyError(slot)

    @staticmethod
    def keyslot(key):
        return keyslot(key)

    def slot_map(self):
        """[master node of slot s for s in 0..16383] (None where unserved), from one live
        master's CLUSTER SLOTS."""
        out = [None] * SLOTS
        for (start, end), addr in self.masters()[0].slot_owners().items():
            node = self.node_at(addr)
            for s in range(start, end + 1):
                out[s] = node
        return out

    def slots_of(self, node):
        """The slots `node` serves, ascending (redis-cli --cluster reshard takes a source's
        slots from its lowest)."""
        return [s for s, n in enumerate(self.slot_map()) if n is node]

    def pick_tubes(self, per_master, stem, masters=None, where=None, taken=()):
        """{master: [tube, ...]}: `per_master` names stem0, stem1, ... for each of `masters`
        (default: masters()) whose partitions the master serves, every partition different
        from the others' and from the partitions of the tubes in `taken`. where(tube, slot):
        an extra condition. A stem with `(`...`)` in it makes group names: stem "(g%d)x"
        gives (g0)x, (g1)x, ... (the %d is replaced by the candidate's number)."""
        smap = self.slot_map()
        masters = list(masters or self.masters())
        out = {m: [] for m in masters}
        used = {tube_partition(t) for t in taken}
        for i in range(200000):
            name = stem % i if "%d" in stem else "%s%d" % (stem, i)
            p = tube_partition(name)
            if p in used:
                continue
            slot = partition_slot(p)
            owner = smap[slot]
            if owner in out and len(out[owner]) < per_master and (
                    where is None or where(name, slot)):
                out[owner].append(name)
                used.add(p)
                if all(len(v) == per_master for v in out.values()):
                    return out
        raise RuntimeError("no %d tubes per master from stem %r: %s"
                           % (per_master, stem, {m.port: v for m, v in out.items()}))

    # ---- waiting

    def _consistent(self):
        """Every running node: cluster_state ok, and the same slot map."""
        maps = []
        for n in self.running_nodes():
            if not n.cluster_state_ok():
                return False
            try:
                maps.append(n.slot_owners())
            except (OSError, EOFError, RespError):
                return False
        return bool(maps) and all(m == maps[0] for m in maps)

    def _views(self):
        """Each running node's port, cluster_state and slot map (or the error asking it)."""
        out = []
        for n in self.running_nodes():
            try:
                out.append((n.port, n.cluster_info().get("cluster_state"),
                            sorted(n.slot_owners().items())))
            except (OSError, EOFError, RespError) as e:
                out.append((n.port, "error", repr(e)))
        return out

    def wait_ok(self, timeout=60.0):
        # Generous: under a loaded CI machine a restarted former master has taken over 30 s to
        # be agreed on by every node (once, not reproduced since).
        if not wait_until(self._consistent, timeout=timeout, interval=0.05):
            raise RuntimeError("cluster not ok within %.0fs: views %s; logs %s" % (
                timeout, self._views(),
                [(n.port, _tail(n.log, 4)) for n in self.running_nodes()]))

    # ---- faults

    def kill_master(self, i):
        """SIGKILL the i-th of masters(); returns the killed node (its slot ranges, as it
        served them, in node.served)."""
        node = self.masters()[i]
        node.served = [r for r, addr in node.slot_owners().items() if addr == node.addr]
        node.kill()
        return node

    def wait_failover(self, old, timeout=30.0):
        """Until another node (one of `old`'s replicas) is a master serving the slots `old`
        served when kill_master killed it and every running node agrees; returns it."""
        slot = old.served[0][0]

        def promoted():
            if not self._consistent():
                return None
            try:
                new = self.owner(slot)
            except (KeyError, OSError, EOFError, RespError):
                return None
            return new if new is not old else None
        new = wait_until(promoted, timeout=timeout, interval=0.05)
        if not new:
            raise RuntimeError("no failover away from :%d within %.0fs" % (old.port, timeout))
        return new

    def restart(self, node):
        """Stop `node` if running and start it again on its port and dir (nodes.conf and the
        AOF are reloaded); a former master rejoins as a replica of its successor. Waits until
        the cluster is ok on every running node."""
        node.restart()
        self.wait_ok()
        return node

    # ---- moving slots

    def move_slots(self, slots, src, dst, keys_per_call=100):
        """Moves `slots` from master `src` to master `dst` with their keys: SETSLOT IMPORTING
        on dst, MIGRATING on src, MIGRATE the keys, then SETSLOT NODE dst on both and the
        other masters (the way redis-cli --cluster reshard does it)."""
        src_id, dst_id = src.node_id(), dst.node_id()
        for slot in slots:
            dst.call("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            src.call("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            while True:
                keys = src.call("CLUSTER", "GETKEYSINSLOT", slot, keys_per_call)
                if not keys:
                    break
                src.call("MIGRATE", HOST, dst.port, "", 0, 5000, "KEYS", *keys)
            for n in [dst, src] + [m for m in self.masters() if m is not src and m is not dst]:
                n.call("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        self.wait_ok()

    def reshard(self, count, src, dst):
        """`redis-cli --cluster reshard`: `count` slots from `src` to `dst`."""
        self._cli("--cluster", "reshard", src.hostport, "--cluster-from", src.node_id(),
                  "--cluster-to", dst.node_id(), "--cluster-slots", str(count),
                  "--cluster-yes")
        self.wait_ok()

    def rebalance(self):
        """`redis-cli --cluster rebalance`: slots moved until every master serves about as
        many (its default threshold: a master more than 2 % off)."""
        self._cli("--cluster", "rebalance", self.masters()[0].hostport)
        self.wait_ok()

    # ---- keys

    def delete_matching(self, match):
        """UNLINK every key matching `match` on every master (SCAN on each, one UNLINK per
        hash slot: a multi-key command must stay within one slot); returns how many."""
        count = 0
        for node in self.masters():
            by_slot = {}
            for key in node.scan(match):
                by_slot.setdefault(keyslot(key), []).append(key)
            with node.client() as c:
                for keys in by_slot.values():
                    for i in range(0, len(keys), 500):
                        c.call("UNLINK", *keys[i:i + 500])
            count += sum(len(keys) for keys in by_slot.values())
        return count

    # ---- the end

    def close(self):
        for n in self.nodes:
            n.close()
        self.nodes = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

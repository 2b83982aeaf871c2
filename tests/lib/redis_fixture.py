"""Real Redis processes for the tests of stalkd's Redis store (docs: REDIS-STORE.md §3).

RedisServer: one redis-server on a free loopback port, in its own temp dir, with the settings
  stalkd requires (AOF on, maxmemory-policy noeviction); optionally a replica of another
  server and/or with min-replicas-to-write. kill (SIGKILL), pause/resume (SIGSTOP/SIGCONT),
  stop (SIGTERM, then SIGKILL), restart on the same port and dir (the AOF is reloaded).
ReplicatedSet: a master and its replicas (2 by default), up once every link is up.
Sentinels: 3 redis-sentinel processes watching a master (quorum 2, down-after 2000 ms,
  failover-timeout 10000 ms); master_addr(), wait_failover(old), url() for stalkd's --store.
Resp: a minimal RESP2 client (INFO, CONFIG, ROLE, SCAN, FLUSHALL, SENTINEL ... checks).
RedisTls: TLS for all of them (tls=...): each listens on its TLS port only (`port 0`), with
  the server certificate and key given, verifies clients against the CA (tls-auth-clients
  yes, or no), and speaks TLS to its master and the other sentinels (tls-replication yes);
  the fixture's own connections are TLS too, with the client certificate given. url()s are
  then rediss://, rediss-sentinel://.

Why not redis-py: PyPI is unreachable here and Debian's python3-redis is not installed on the
CI machines; the tests need a dozen commands, which a 60-line client covers without a new
dependency. All of it speaks only to the processes started here.

Every process is started through `setpriv --pdeathsig KILL` when started from the main
thread (the kernel kills it if the test process dies, even by SIGKILL), is stopped by its PID
at the latest at exit (atexit), and every object is a context manager. Start processes from
the main thread: PDEATHSIG follows the thread that forked, so a process started from another
thread only has the atexit net.
"""
import atexit
import itertools
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time

from beanstalk import free_port, listener_owned, wait_until

REDIS_SERVER = os.environ.get("REDIS_SERVER_BIN", "/usr/bin/redis-server")
REDIS_SENTINEL = os.environ.get("REDIS_SENTINEL_BIN", "/usr/bin/redis-sentinel")
SETPRIV = shutil.which("setpriv")
HOST = "127.0.0.1"


def available():
    """True when redis-server and redis-sentinel are installed (scripts/setup.sh)."""
    return os.access(REDIS_SERVER, os.X_OK) and os.access(REDIS_SENTINEL, os.X_OK)


# ---- stalkd's arguments for a Redis store

_prefixes = itertools.count(1)


def unique_prefix():
    """A --store-prefix no other stalkd of any test process uses; fixed width, so that none
    is a prefix of another (keys are matched by it)."""
    return "t%07d-%05d" % (os.getpid(), next(_prefixes))


def store_argv(url, prefix, wait=None, lease=None):
    """stalkd's --store arguments (wait, lease: stalkd's defaults when None)."""
    argv = ["--store", url, "--store-prefix", prefix]
    if wait is not None:
        argv += ["--store-wait", str(wait)]
    if lease is not None:
        argv += ["--store-lease", str(lease)]
    return argv


# ---- TLS

class RedisTls:
    """TLS settings of the fixture's Redis processes (files made by tests/lib/tls_certs.py or
    the openssl CLI): `cert`/`key` the server's certificate and key (Redis also shows them as
    a client: to its master, to other sentinels, on the cluster bus), `ca` the CA every peer
    is verified against, `auth_clients` whether a client must show a certificate signed by
    it (tls-auth-clients yes|no), and `client_cert`/`client_key` what the fixture's own
    connections show (none: they show no certificate)."""

    def __init__(self, ca, cert, key, client_cert=None, client_key=None, auth_clients=True):
        self.ca, self.cert, self.key = ca, cert, key
        self.client_cert, self.client_key = client_cert, client_key
        self.auth_clients = auth_clients

    def conf_lines(self, port):
        """The config lines that make a server or sentinel listen on `port` with TLS only."""
        return ["port 0", "tls-port %d" % port,
                "tls-cert-file %s" % self.cert, "tls-key-file %s" % self.key,
                "tls-ca-cert-file %s" % self.ca,
                "tls-auth-clients %s" % ("yes" if self.auth_clients else "no"),
                "tls-replication yes"]

    def client_context(self):
        """A Python client context: the server verified against the CA (not its name: the
        fixture is not what is tested), the client certificate shown if there is one."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(self.ca)
        if self.client_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx

    def cli_args(self):
        """redis-cli's TLS arguments."""
        args = ["--tls", "--cacert", self.ca]
        if self.client_cert:
            args += ["--cert", self.client_cert, "--key", self.client_key]
        return args


def redis_tls(certs, auth_clients=True):
    """A RedisTls from tests/lib/tls_certs.py's Certs: the Redis processes get a certificate
    of their own for both uses (serverAuth and clientAuth: replicas, sentinels and cluster
    nodes show it to each other), naming IP 127.0.0.1 and localhost; the fixture's own
    connections show the client certificate."""
    if not hasattr(certs, "redis_pair"):
        certs.redis_pair = certs.issue("redis", "CN=redis,O=stalkd tests",
                                       san="IP:127.0.0.1,DNS:localhost",
                                       usage="serverAuth,clientAuth")
    cert, key = certs.redis_pair
    return RedisTls(certs.ca, cert, key, certs.client_cert, certs.client_key, auth_clients)


def store_tls_argv(certs, client_cert=True, ca=None):
    """stalkd's --store-tls-* arguments for Redis processes made with redis_tls(certs): the
    CA (or `ca`), and the client certificate unless client_cert is False."""
    argv = ["--store-tls-ca", ca or certs.ca]
    if client_cert:
        argv += ["--store-tls-cert", certs.client_cert, "--store-tls-key", certs.client_key]
    return argv


# ---- RESP2 client

class RespError(Exception):
    """An error reply (-ERR ..., -READONLY ..., -LOADING ...)."""


class Resp:
    """A blocking RESP2 connection. call() returns str for status replies, bytes for bulk
    strings, int, None or a list; an error reply raises RespError."""

    def __init__(self, port, host=HOST, timeout=5.0, auth=None, tls=None):
        """auth: a password (the default user's) or (user, password): AUTH first. tls: a
        RedisTls (the connection is TLS)."""
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                self.sock = tls.client_context().wrap_socket(self.sock)
            except BaseException:
                self.sock.close()
                raise
        self.buf = b""
        if auth is not None:
            try:
                self.call("AUTH", *((auth,) if isinstance(auth, str) else auth))
            except BaseException:
                self.close()
                raise

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError("not RESP: %r" % line)

    def call(self, *args):
        self.send(*args)
        return self.read()


def parse_info(text):
    """INFO's text as a dict of strings (section headers and blank lines skipped)."""
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out


# ---- processes

_live = []          # every process started here, for the exit-time net
_dirs = []          # temp dirs to remove at exit
_live_lock = threading.Lock()


def _kill_all():
    with _live_lock:
        procs = list(_live)
    for p in procs:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGCONT)   # a stopped process cannot die of SIGTERM
                p.kill()
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
    for d in _dirs:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_kill_all)


def _spawn(argv, log_path):
    """Popen argv with stdout/stderr to log_path; with PDEATHSIG when on the main thread."""
    if SETPRIV and threading.current_thread() is threading.main_thread():
        argv = [SETPRIV, "--pdeathsig", "KILL", "--"] + list(argv)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    with _live_lock:
        _live.append(proc)
    return proc


def _tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)"


class _Process:
    """A redis-server or redis-sentinel child: config file in self.dir, log in self.dir."""

    binary = REDIS_SERVER
    name = "redis"

    def __init__(self, port=None, auth=None, tls=None):
        self.port = port or free_port()
        self.auth = auth  # what the fixture's own connections AUTH with (Resp's auth)
        self.tls = tls    # a RedisTls: the process listens on TLS only
        self.dir = tempfile.mkdtemp(prefix="stalkd-%s-%d-" % (self.name, self.port))
        _dirs.append(self.dir)
        self.conf = os.path.join(self.dir, "%s.conf" % self.name)
        self.log = os.path.join(self.dir, "%s.log" % self.name)
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid

    @property
    def addr(self):
        return (HOST, self.port)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        assert not self.running(), "%s :%d already running" % (self.name, self.port)
        # The config file, not arguments: Sentinel rewrites it (CONFIG REWRITE after a
        # REPLICAOF, its own state), and restart() must start from what it says now.
        self.proc = _spawn([self.binary, self.conf], self.log)
        self.wait_ready()
        return self

    def client(self, timeout=5.0):
        return Resp(self.port, timeout=timeout, auth=self.auth, tls=self.tls)

    def call(self, *args, timeout=5.0):
        """One command on a fresh connection."""
        with self.client(timeout) as c:
            return c.call(*args)

    def wait_ready(self, timeout=15.0):
        """Until PING answers PONG (not LOADING: the AOF is loaded)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s :%d exited with %s:\n%s"
                                   % (self.name, self.port, self.proc.returncode,
                                      _tail(self.log)))
            # Only our process's listener: a port picked by free_port() may have been taken
            # by another test's server first, which would answer the PING (ours then exits).
            if listener_owned(self.proc.pid, self.port)[1]:
                try:
                    if self.call("PING", timeout=1.0) == "PONG":
                        return
                except (OSError, EOFError, RespError):  # ssl.SSLError is an OSError
                    pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("%s :%d not ready after %.0fs:\n%s"
                                   % (self.name, self.port, timeout, _tail(self.log)))
            time.sleep(0.02)

    def signal(self, sig):
        if self.running():
            os.kill(self.proc.pid, sig)

    def kill(self):
        """SIGKILL and reap. A paused (SIGSTOPped) Redis dies as it is: SIGKILL ends a stopped
        process, and a SIGCONT first would let it answer what it holds before it dies (on a
        busy machine it did: a test of a death mid-command got its reply)."""
        if self.running():
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def stop(self, timeout=5.0):
        """SIGTERM (Redis fsyncs its AOF and exits), SIGKILL after `timeout` s."""
        if self.running():
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def pause(self):
        """SIGSTOP: the process keeps its sockets and answers nothing."""
        self.signal(signal.SIGSTOP)

    def resume(self):
        self.signal(signal.SIGCONT)

    def restart(self):
        """Stop if running, start again on the same port, config and dir."""
        self.stop()
        return self.start()

    def close(self):
        """Stop and remove the dir (at the latest at exit)."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RedisServer(_Process):
    """redis-server with AOF (appendfsync `appendfsync`), noeviction, `--save ""`, in its own
    temp dir. replicaof: a (host, port) or a RedisServer. min_replicas_to_write (with
    min-replicas-max-lag `min_replicas_max_lag`). maxmemory: bytes or None. extra: more
    config lines ("name value"). password: requirepass (the default user's) and masterauth
    (a replica's to its master: every node of a set has the same), and what the fixture's
    own connections AUTH with. tls: a RedisTls (TLS only, replication too)."""

    def __init__(self, port=None, replicaof=None, min_replicas_to_write=0,
                 min_replicas_max_lag=3, appendfsync="everysec", maxmemory=None, extra=(),
                 start=True, password=None, tls=None):
        super().__init__(port, auth=password, tls=tls)
        lines = [
            "bind %s" % HOST, "dir %s" % self.dir,
            "logfile %s" % self.log, "daemonize no", "save \"\"",
            "appendonly yes", "appendfsync %s" % appendfsync,
            "maxmemory-policy noeviction",
            # A replica's first sync starts at once (the default waits 5 s for more replicas).
            "repl-diskless-sync-delay 0",
            "min-replicas-to-write %d" % min_replicas_to_write,
            "min-replicas-max-lag %d" % min_replicas_max_lag,
        ] + (tls.conf_lines(self.port) if tls else ["port %d" % self.port])
        if maxmemory:
            lines.append("maxmemory %d" % maxmemory)
        if password is not None:
            lines += ["requirepass %s" % password, "masterauth %s" % password]
        if replicaof is not None:
            host, rport = replicaof.addr if isinstance(replicaof, _Process) else replicaof
            lines.append("replicaof %s %d" % (host, rport))
        lines += list(extra)
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        if start:
            self.start()

    def url(self, db=None):
        """stalkd's --store URL for this server (rediss:// with TLS)."""
        return "%s://%s:%d%s" % ("rediss" if self.tls else "redis", HOST, self.port,
                                 "" if db is None else "/%d" % db)

    def info(self, section=None):
        return parse_info(self.call(*(("INFO", section) if section else ("INFO",))))

    def config_get(self, name):
        r = self.call("CONFIG", "GET", name)
        return r[1].decode() if r else None

    def role(self):
        """'master', 'slave' (a replica) or 'sentinel'; '' while the server drops the
        connection (a master being turned into a replica closes its clients' connections)."""
        try:
            return self.call("ROLE")[0].decode()
        except ConnectionError:
            return ""

    def flushall(self):
        return self.call("FLUSHALL")

    def scan(self, match="*"):
        """Every key matching `match` (SCAN, not KEYS), as bytes."""
        keys, cursor = [], b"0"
        with self.client() as c:
            while True:
                cursor, batch = c.call("SCAN", cursor, "MATCH", match, "COUNT", 1000)
                keys += batch
                if cursor == b"0":
                    return keys

    def delete_matching(self, match):
        """UNLINK every key matching `match`; returns how many."""
        keys = self.scan(match)
        with self.client() as c:
            for i in range(0, len(keys), 500):
                c.call("UNLINK", *keys[i:i + 500])
        return len(keys)

    def link_up(self):
        """True for a replica whose link to its master is up."""
        try:
            return self.info("replication").get("master_link_status") == "up"
        except (OSError, EOFError, RespError):
            return False

    def wait_link_up(self, timeout=15.0):
        if not wait_until(self.link_up, timeout=timeout, interval=0.05):
            raise RuntimeError("replica :%d: link to master not up after %.0fs:\n%s"
                               % (self.port, timeout, _tail(self.log)))

    def connected_replicas(self):
        try:
            return int(self.info("replication").get("connected_slaves", 0))
        except (OSError, EOFError, RespError):
            return 0


class ReplicatedSet:
    """A master and `replicas` replicas of it, every node with the same min-replicas-to-write
    (so a promoted replica keeps the rule), up once every replica's link is up and the master
    counts them all."""

    def __init__(self, replicas=2, min_replicas_to_write=1, **kwargs):
        self.nodes = []
        try:
            self.master = RedisServer(min_replicas_to_write=min_replicas_to_write, **kwargs)
            self.nodes.append(self.master)
            self.replicas = []
            for _ in range(replicas):
                r = RedisServer(replicaof=self.master,
                                min_replicas_to_write=min_replicas_to_write, **kwargs)
                self.nodes.append(r)
                self.replicas.append(r)
            for r in self.replicas:
                r.wait_link_up()
            if not wait_until(lambda: self.master.connected_replicas() >= replicas,
                              timeout=15.0):
                raise RuntimeError("master :%d does not count %d replicas"
                                   % (self.master.port, replicas))
        except BaseException:
            self.close()
            raise

    def node_at(self, addr):
        """The node listening on (host, port)."""
        for n in self.nodes:
            if n.addr == tuple(addr):
                return n
        raise KeyError(addr)

    def close(self):
        for n in self.nodes:
            n.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Sentinel(_Process):
    binary = REDIS_SENTINEL
    name = "sentinel"

    def __init__(self, master_addr, master_name, quorum, down_after_ms, failover_timeout_ms,
                 port=None, password=None, master_password=None, tls=None):
        super().__init__(port, auth=password, tls=tls)
        host, mport = master_addr
        auth = []
        if password is not None:  # its own, and the one it gives the other sentinels
            auth += ["requirepass %s" % password, "sentinel sentinel-pass %s" % password]
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "bind %s" % HOST, "dir %s" % self.dir,
                "logfile %s" % self.log, "daemonize no",
            ] + (tls.conf_lines(self.port) if tls else ["port %d" % self.port]) + [
                "sentinel monitor %s %s %d %d" % (master_name, host, mport, quorum),
                "sentinel down-after-milliseconds %s %d" % (master_name, down_after_ms),
                "sentinel failover-timeout %s %d" % (master_name, failover_timeout_ms),
                "sentinel parallel-syncs %s 2" % master_name,
            ] + auth + ([] if master_password is None else
                        ["sentinel auth-pass %s %s" % (master_name, master_password)])) + "\n")
        self.start()

    def master_state(self, name):
        """SENTINEL MASTER name as a dict of strings."""
        r = self.call("SENTINEL", "MASTER", name)
        return {r[i].decode(): r[i + 1].decode() for i in range(0, len(r), 2)}


class Sentinels:
    """`count` sentinels watching `master` (a RedisServer) as `name`. Up once every sentinel
    knows the master's replicas and the other sentinels (before that, a failover may lack its
    quorum). The replicas must be attached before this starts. password: the sentinels' own
    requirepass; master_password: what they AUTH to the master and replicas with (`sentinel
    auth-pass`). tls: a RedisTls (the sentinels listen on TLS only and speak TLS to the
    master, the replicas and each other; the set must be TLS too)."""

    def __init__(self, master, name="stalkd", count=3, quorum=2, down_after_ms=2000,
                 failover_timeout_ms=10000, replicas=2, password=None, master_password=None,
                 tls=None):
        self.name = name
        self.master_password = master_password
        self.tls = tls
        self.sentinels = []
        try:
            for _ in range(count):
                self.sentinels.append(Sentinel(master.addr, name, quorum, down_after_ms,
                                               failover_timeout_ms, password=password,
                                               master_password=master_password, tls=tls))

            def all_know():
                try:
                    for s in self.sentinels:
                        st = s.master_state(name)
                        if (int(st["num-other-sentinels"]) < count - 1
                                or int(st["num-slaves"]) < replicas):
                            return False
                    return True
                except (OSError, EOFError, RespError, KeyError):
                    return False
            if not wait_until(all_know, timeout=20.0, interval=0.1):
                raise RuntimeError("sentinels did not discover each other and %d replicas: %s"
                                   % (replicas, [_tail(s.log, 5) for s in self.sentinels]))
        except BaseException:
            self.close()
            raise

    def url(self):
        """stalkd's --store URL: every sentinel, and the master name (rediss-sentinel:// with
        TLS)."""
        scheme = "rediss-sentinel" if self.tls else "redis-sentinel"
        return "%s://%s/%s" % (scheme, ",".join("%s:%d" % s.addr for s in self.sentinels),
                               self.name)

    def master_addr(self):
        """(host, port) of the master, from the first sentinel that answers."""
        for s in self.sentinels:
            try:
                r = s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name, timeout=1.0)
                if r:
                    return (r[0].decode(), int(r[1]))
            except (OSError, EOFError, RespError):
                continue
        raise RuntimeError("no sentinel answered")

    def wait_failover(self, old, timeout=30.0):
        """Until every sentinel names a master other than `old` ((host, port)) and that node
        says ROLE master; returns the new (host, port)."""
        def promoted():
            addrs = set()
            for s in self.sentinels:
                try:
                    r = s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name, timeout=1.0)
                except (OSError, EOFError, RespError):
                    return None
                addrs.add((r[0].decode(), int(r[1])))
            if len(addrs) != 1 or tuple(old) in addrs:
                return None
            new = addrs.pop()
            try:
                with Resp(new[1], host=new[0], timeout=1.0, auth=self.master_password,
                          tls=self.tls) as c:
                    return new if c.call("ROLE")[0] == b"master" else None
            except (OSError, EOFError, RespError):
                return None
        new = wait_until(promoted, timeout=timeout, interval=0.05)
        if not new:
            raise RuntimeError("no failover away from %s:%d within %.0fs: %s"
                               % (old[0], old[1], timeout,
                                  [_tail(s.log, 8) for s in self.sentinels]))
        return new

    def close(self):
        for s in self.sentinels:
            s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

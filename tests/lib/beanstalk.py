"""Test helpers shared by the black-box, differential and soak tests.

Server: starts a beanstalk-protocol server binary (stalkd or Debian's beanstalkd) on a free
loopback port, waits until it accepts connections, and stops it by PID.
Client: a blocking raw client that sends exact bytes and reads exact replies, so tests can
assert byte for byte.
ServerCase: the unittest base class of the black-box tests (one fresh server per test).
wait_stat / wait_tube_stat / wait_job_stat: wait until a key of `stats`, `stats-tube` or
`stats-job` shows a value (all on wait_value, one polling loop with a deadline).

With env STALKD_STORE=redis every stalkd Server (never Debian's beanstalkd) runs on the Redis
store: one redis-server per test process (redis_fixture.RedisServer, started on first use,
stopped at exit), a fresh --store-prefix per Server, --store-wait 0 (no replicas). Tests that
cannot apply there carry @embedded_store_only(reason).
With env STALKD_STORE=cluster the same on a Redis Cluster: one RedisCluster (3 masters, no
replicas: --store-wait 0) per test process, a redis-cluster:// URL naming every node.
redis_store() is true on both; cluster_store() only on the cluster, where what differs by
design (job ids are seq * 1024 + partition, not 1, 2, 3...; list-tubes groups tubes by
partition; a reserve over tubes in several partitions is best as seen a round trip ago) makes
tests read ids from INSERTED replies or carry @not_on_cluster(reason).
"""
import atexit
import os
import signal
import socket
import struct
import subprocess
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STALKD_BIN = os.environ.get("STALKD_BIN", os.path.join(REPO, "build", "release", "stalkd"))
BEANSTALKD_BIN = os.environ.get("BEANSTALKD_BIN", "/usr/bin/beanstalkd")


def is_beanstalkd(binary=None):
    """True when the binary under test is Debian's real beanstalkd (1.12), not stalkd.

    Tests of deliberate stalkd/1.13 differences skip themselves when this is true.
    """
    return os.path.basename(binary or STALKD_BIN) == "beanstalkd"


def wait_until(pred, timeout=5.0, interval=0.02):
    """Poll pred() until it returns a truthy value or timeout passes; return the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def stats_of(client, command):
    """The flat YAML dict of a stats-like command (`stats`, `stats-tube t`, `stats-job 3`);
    raises AssertionError with the reply unless it is OK."""
    r = client.cmd(command)
    if not r.startswith(b"OK "):
        raise AssertionError("%s: %r" % (command, r))
    return parse_yaml(r)


def wait_value(fetch, key, value, timeout=5.0, interval=0.02):
    """Poll fetch() (a dict of strings) until its `key` equals str(value) or `timeout`
    seconds pass. Returns the dict that matched, so callers can check other keys of the
    same snapshot, or None on timeout."""
    want = str(value)

    def matched():
        d = fetch()
        return d if d.get(key) == want else None
    return wait_until(matched, timeout=timeout, interval=interval)


def wait_stat(client, key, value, timeout=5.0):
    """wait_value on `stats`, e.g. wait_stat(c, "current-waiting", 1)."""
    return wait_value(lambda: stats_of(client, "stats"), key, value, timeout)


def wait_tube_stat(client, tube, key, value, timeout=5.0):
    """wait_value on `stats-tube tube`, e.g. wait_tube_stat(c, "default", "pause", 0)."""
    return wait_value(lambda: stats_of(client, "stats-tube " + tube), key, value, timeout)


def wait_job_stat(client, jid, key, value, timeout=5.0):
    """wait_value on `stats-job jid`, e.g. wait_job_stat(c, 1, "state", "ready")."""
    return wait_value(lambda: stats_of(client, "stats-job %d" % jid), key, value, timeout)


def redis_store():
    """True when stalkd runs on the Redis store in this test process (STALKD_STORE=redis, or
    =cluster: what cannot apply on one Redis cannot on a cluster either)."""
    return os.environ.get("STALKD_STORE", "embedded") in ("redis", "cluster")


def cluster_store():
    """True when stalkd runs on the Redis store on a Redis Cluster (STALKD_STORE=cluster)."""
    return os.environ.get("STALKD_STORE", "embedded") == "cluster"


def embedded_store_only(reason):
    """Decorator for a test or class that cannot apply to the Redis store (binlog, memory cap,
    RSS) or checks what differs there by design (REDIS-STORE.md §2.16): skipped, with the
    reason, when STALKD_STORE=redis."""
    return unittest.skipIf(redis_store(), "not on the Redis store: " + reason)


def cluster_partition(tube):
    """The partition (0..1023) of `tube` on a Redis Cluster: CRC16-XMODEM of the text inside
    its first `(...)` when non-empty, else of the whole name, mod 1024. A job's id there is
    seq * 1024 + partition, seq counting from 1 in each partition."""
    import redis_cluster_fixture
    return redis_cluster_fixture.tube_partition(tube)


def nth_id(n, tube="default"):
    """The id of the n-th job put on a fresh server when every put so far went to `tube`'s
    partition: n (beanstalkd's one counter), or on a Redis Cluster n * 1024 + the tube's
    partition (a counter per partition). Tests that put into tubes of several partitions read
    ids from the INSERTED replies instead."""
    return n * 1024 + cluster_partition(tube) if cluster_store() else n


def one_partition(name):
    """`name` off the cluster; on a Redis Cluster "(g)name", so that the tubes a test names
    through it share one partition and a reserve over them is exact (by priority, then age,
    then id) as on one server."""
    return "(g)" + name if cluster_store() else name


def list_tubes_order(names):
    """The order in which list-tubes shows `names` (given in creation order, "default"
    first): creation order, or on a Redis Cluster "default" first, then the others grouped by
    partition in partition order, each group in creation order."""
    if not cluster_store():
        return list(names)
    first = [n for n in names if n == "default"]
    return first + sorted((n for n in names if n != "default"), key=cluster_partition)


def not_on_cluster(reason):
    """Decorator for a test or class that checks what differs by design on a Redis Cluster
    only (ids, list-tubes order across partitions, reserve order across partitions): skipped,
    with the reason, when STALKD_STORE=cluster."""
    return unittest.skipIf(cluster_store(), "not on Redis Cluster: " + reason)


def expected_failure_on_cluster(why):
    """Decorator for a test that fails on a Redis Cluster because of a store bug found by it
    (`why` says which; the test stays as it should pass): unittest.expectedFailure there, so
    the fix shows as an unexpected success; a no-op elsewhere."""
    del why  # for the reader
    return unittest.expectedFailure if cluster_store() else (lambda f: f)


_shared_redis = None


def shared_redis():
    """The test process's one Redis for STALKD_STORE=redis (a redis-server) or =cluster (a
    RedisCluster of 3 masters without replicas): started on first use, stopped at exit. Both
    have url() and delete_matching(pattern)."""
    global _shared_redis
    if _shared_redis is None:
        if cluster_store():
            import redis_cluster_fixture  # only the cluster runs need it
            _shared_redis = redis_cluster_fixture.RedisCluster(masters=3, replicas=0)
        else:
            _shared_redis = _redis_fixture().RedisServer()
        atexit.register(_shared_redis.close)
    return _shared_redis


def store_args(binary, args):
    """stalkd's store arguments for this test process: none on the embedded store, for
    beanstalkd, or when `args` already choose a store; otherwise the shared redis-server under
    a prefix of its own. Returns (argv tail, prefix or None)."""
    if not redis_store() or is_beanstalkd(binary) or "--store" in args:
        return [], None
    fixture = _redis_fixture()
    prefix = fixture.unique_prefix()
    return fixture.store_argv(shared_redis().url(), prefix, wait=0), prefix


def _redis_fixture():
    import redis_fixture  # only the Redis runs need it (and it imports this module)
    return redis_fixture


def inserted_id(reply):
    """The job id of an `INSERTED <id>` reply; AssertionError with the reply otherwise."""
    words = reply.split()
    if len(words) != 2 or words[0] != b"INSERTED" or not reply.endswith(b"\r\n") \
            or not words[1].isdigit():
        raise AssertionError("not INSERTED <id>: %r" % reply)
    return int(words[1])


def reserved(jid, body):
    """The exact RESERVED reply for job `jid` with `body` (str or bytes)."""
    if isinstance(body, str):
        body = body.encode()
    return b"RESERVED %d %d\r\n%s\r\n" % (jid, len(body), body)


def found(jid, body):
    """The exact FOUND reply (peek*) for job `jid` with `body` (str or bytes)."""
    return b"FOUND" + reserved(jid, body)[len(b"RESERVED"):]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_inodes(port):
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    return inodes


def listener_owned(pid, port):
    """Whether a TCP socket listens on `port`, and whether process `pid` holds it: (listening,
    ours). A port picked by free_port() can be taken by another test's server before ours
    binds it (tests run in parallel); that server then answers our connects, so readiness
    must check whose listener it is."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False, False
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return True, False
    for fd in fds:
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True, True
    return True, False


class PortTaken(RuntimeError):
    """Another process listens on the port a server was started with."""


class Server:
    """A server process on 127.0.0.1:<free port> (or a unix socket via args=['-l', 'unix:...'])."""

    def __init__(self, binary=None, args=(), port=None, unix_path=None, env=None,
                 popen_kwargs=None, log=None):
        """popen_kwargs: extra keyword arguments for subprocess.Popen (e.g. preexec_fn to
        lower RLIMIT_NOFILE in the child). log: a file path that gets the server's stdout and
        stderr (appended) instead of pipes, for servers that log much or outlive a read."""
        self.binary = binary or STALKD_BIN
        self.unix_path = unix_path
        self.log = log
        self.store_prefix = None
        # A port of our choosing that another test's server took first: again on another.
        for attempt in range(5):
            self.port = port or free_port()
            if unix_path:
                argv = [self.binary, "-l", "unix:" + unix_path] + list(args)
            else:
                argv = [self.binary, "-l", "127.0.0.1", "-p", str(self.port)] + list(args)
            if self.store_prefix is None:
                tail, self.store_prefix = store_args(self.binary, list(args))
            self.argv = argv = argv + tail
            sink = open(log, "ab") if log else None
            self.spawned = time.monotonic()  # the process starts after this, before `ready`
            try:
                self.proc = subprocess.Popen(argv, stdout=sink or subprocess.PIPE,
                                             stderr=subprocess.STDOUT if sink else subprocess.PIPE,
                                             env=env, **(popen_kwargs or {}))
            finally:
                if sink:
                    sink.close()
            try:
                self._wait_ready()
                self.ready = time.monotonic()
                return
            except PortTaken:
                if port or attempt == 4:
                    raise

    def _wait_ready(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                if self.log:
                    with open(self.log, "rb") as f:
                        out = f.read()[-2000:]
                if not self.unix_path and listener_owned(self.proc.pid, self.port)[0]:
                    raise PortTaken("port %d was taken by another process; server exited with "
                                    "%s: %s %s" % (self.port, self.proc.returncode, out, err))
                raise RuntimeError("server exited with %s: %s %s" % (self.proc.returncode, out, err))
            if not self.unix_path and not listener_owned(self.proc.pid, self.port)[1]:
                time.sleep(0.02)  # not listening yet, or another process's listener
                continue
            try:
                c = self.connect()
                c.close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("server did not start listening: %r" % (self.argv,))

    def connect(self, timeout=10.0):
        return Client(self.address(), timeout=timeout, unix=bool(self.unix_path))

    def address(self):
        return self.unix_path if self.unix_path else ("127.0.0.1", self.port)

    @property
    def pid(self):
        return self.proc.pid

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()
        if self.store_prefix:
            # Keep the shared redis-server small across the tests of a process.
            shared_redis().delete_matching(self.store_prefix + "*")
            self.store_prefix = None
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Client:
    """Blocking client that speaks raw bytes. Every read has a timeout so tests never hang."""

    def __init__(self, address, timeout=10.0, unix=False, ssl_context=None, server_hostname=None):
        """ssl_context: speak TLS (an ssl.SSLContext; server_hostname is what its certificate
        must name, when the context checks it)."""
        if unix:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            try:
                self.sock.connect(address)
            except OSError:
                self.sock.close()
                raise
        else:
            self.sock = socket.create_connection(address, timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ssl_context is not None:
                try:
                    self.sock = ssl_context.wrap_socket(self.sock, server_hostname=server_hostname)
                except OSError:
                    self.sock.close()
                    raise
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed by server")
        self.buf += chunk

    def read_line(self):
        """One reply line including its CRLF."""
        while b"\r\n" not in self.buf:
            self._fill()
        i = self.buf.index(b"\r\n") + 2
        line, self.buf = self.buf[:i], self.buf[i:]
        return line

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_reply(self):
        """A whole reply: the line, plus the data chunk for RESERVED/FOUND/OK replies."""
        line = self.read_line()
        words = line.split()
        if words and words[0] in (b"RESERVED", b"FOUND", b"OK"):
            n = int(words[-1])
            return line + self.read_exact(n + 2)
        return line

    def cmd(self, data):
        """Send a command (CRLF added if missing) and return the whole reply as bytes."""
        if isinstance(data, str):
            data = data.encode()
        if not data.endswith(b"\r\n"):
            data += b"\r\n"
        self.send(data)
        return self.read_reply()

    def put(self, body, pri=0, delay=0, ttr=60, tube=None):
        if isinstance(body, str):
            body = body.encode()
        if tube is not None:
            self.cmd("use " + tube)
        return self.cmd(b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body))

    def put_id(self, body, pri=0, delay=0, ttr=60, tube=None):
        """put, asserting the reply is INSERTED; returns the new job's id."""
        return inserted_id(self.put(body, pri=pri, delay=delay, ttr=ttr, tube=tube))

    def closed_by_peer(self, wait=2.0):
        """True if the server closes the connection within `wait` seconds."""
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True


    def no_reply_within(self, wait):
        """True if no byte arrives (and the peer does not close) within `wait` seconds."""
        if self.buf:
            return False
        old = self.sock.gettimeout()
        self.sock.settimeout(wait)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return True
        finally:
            self.sock.settimeout(old)
        if not chunk:
            raise EOFError("connection closed by server")
        self.buf += chunk
        return False


def yaml_keys(reply):
    """The keys of a flat YAML dict reply, in the order the server sent them."""
    body = reply.split(b"\r\n", 1)[1][:-2].decode()
    return [l.split(":", 1)[0] for l in body.split("\n")[1:] if l]


def parse_yaml(reply):
    """Parse the flat YAML of an OK reply into a dict (or list for list replies)."""
    body = reply.split(b"\r\n", 1)[1][:-2].decode()
    lines = body.split("\n")
    assert lines[0] == "---", reply
    if len(lines) > 1 and lines[1].startswith("- "):
        return [l[2:] for l in lines[1:] if l]
    out = {}
    for l in lines[1:]:
        if not l:
            continue
        k, v = l.split(": ", 1)
        out[k] = v
    return out


def ok_list(*names):
    """The exact OK reply for a YAML list of tube names."""
    body = b"---\n" + b"".join(b"- " + n.encode() + b"\n" for n in names)
    return b"OK %d\r\n%s\r\n" % (len(body), body)


class ServerCase(unittest.TestCase):
    """Base class for black-box tests: a fresh server for every test method.

    setUp starts a Server (the binary is $STALKD_BIN) with the command-line arguments in the
    class attribute `server_args` (a subclass sets e.g. `server_args = ("-z", "100")`) and
    registers its stop as a cleanup, so the server is stopped even when setUp of a subclass
    or the test fails. self.server is the running Server.

    Helpers:
      client(timeout)         a new connection, closed at cleanup
      replies(c, data, n)     send raw bytes in one go, read n whole replies
      stats(c)                the `stats` reply as a dict
      job_stats(c, jid)       the `stats-job` reply as a dict (asserts it is OK)
      assertInSync(c)         the connection still answers a command correctly
      assertElapsed(t0, lo, hi)  time.monotonic() - t0 lies within [lo, hi] seconds
    """

    server_args = ()
    maxDiff = None

    def setUp(self):
        self.server = Server(args=self.server_args)
        self.addCleanup(self.server.stop)

    def client(self, timeout=10.0):
        """A new connection to self.server (every read times out after `timeout` s),
        closed at cleanup."""
        c = self.server.connect(timeout=timeout)
        self.addCleanup(c.close)
        return c

    def replies(self, c, data, n):
        """Send raw bytes in one go and read n replies."""
        c.send(data)
        return [c.read_reply() for _ in range(n)]

    def stats(self, c):
        """The server's `stats` as a dict of strings."""
        return stats_of(c, "stats")

    def job_stats(self, c, jid):
        """`stats-job jid` as a dict of strings; fails the test unless the reply is OK."""
        return stats_of(c, "stats-job %d" % jid)

    def assertInSync(self, c):
        """The connection is still in sync: list-tube-used gets exactly its own reply
        (the connection must be using the default tube)."""
        self.assertEqual(c.cmd("list-tube-used"), b"USING default\r\n")

    def assertElapsed(self, start, low, high):
        """low <= time.monotonic() - start <= high (seconds)."""
        el = time.monotonic() - start
        self.assertGreaterEqual(el, low, "too early: %.3fs" % el)
        self.assertLessEqual(el, high, "too late: %.3fs" % el)


# ---- process measurements and socket tricks shared by the robustness tests

def rss_kb(pid):
    """The process's resident set size (VmRSS) in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def flood(sock, chunk, seconds):
    """Sends `chunk` over and over for `seconds` without blocking (sleeping 10 ms whenever
    the socket buffers are full); returns the bytes sent. The socket is blocking again after."""
    sock.setblocking(False)
    sent, t_end = 0, time.monotonic() + seconds
    try:
        while time.monotonic() < t_end:
            try:
                sent += sock.send(chunk)
            except BlockingIOError:
                time.sleep(0.01)
    finally:
        sock.setblocking(True)
    return sent


def cpu_seconds(pid):
    """utime + stime of the process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_process(pid, timeout=10.0):
    """SIGSTOP the process and wait until it is stopped (state T in /proc): what clients do
    meanwhile reaches its sockets and is handled, in order, once SIGCONT resumes it."""
    os.kill(pid, signal.SIGSTOP)

    def stopped():
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    if not wait_until(stopped, timeout=timeout, interval=0.005):
        os.kill(pid, signal.SIGCONT)
        raise AssertionError("process %d did not stop" % pid)


def is_sanitized(pid):
    """True when the server runs under AddressSanitizer (RSS figures are then much larger:
    shadow memory and the quarantine of freed blocks; everything is slower)."""
    with open("/proc/%d/maps" % pid) as f:
        if "asan" in f.read():
            return True
    with open("/proc/%d/exe" % pid, "rb") as f:
        return b"__asan_init" in f.read()


def rst_close(sock):
    """Close with SO_LINGER 0: the kernel sends a RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()

"""Opt-in scenarios of run.py for stalkd's Redis store (issue 15): redis-cycle, redis-pipeline,
redis-memory, redis-failover; on Redis Cluster (issue 17): cluster-cycle, cluster-pipeline
(1, 2, 3 masters against one plain Redis master), cluster-reserve (reserves across
partitions against reserves within one); redis-tls (one master over TLS against the same in
clear, side by side in one run). Redis processes come from tests/lib/redis_fixture.py
and redis_cluster_fixture.py (own temp dirs, free loopback ports, stopped by PID, killed with
the runner through PDEATHSIG/atexit); none is pinned to a CPU.

Several front ends: one loadgen process per front end, run at the same time, the scenario's
connections split over them; commands/s is their sum (each loadgen's measured window is the
same length and they start together, within a few ms). Redis' CPU is read from /proc/PID/stat
around the whole parallel run (warm-up included), in cores.
"""
import os
import re
import subprocess
import sys
import threading
import time
import socket

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
import redis_fixture as rf  # noqa: E402
import redis_cluster_fixture as rcf  # noqa: E402
import tls_certs  # noqa: E402

PREFIX = "bench"
NOOP_LIB = ("#!lua name=noop\n"
            "redis.register_function{function_name='noop', callback=function() return 1 end, "
            "flags={'no-writes'}}\n")


def _split(total, n):
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def front_ends(run, binary, n, url, wait, extra=()):
    """n stalkd front ends on one Redis (run.Server objects, started); extra: more flags."""
    out = []
    for _ in range(n):
        s = run.Server("stalkd", binary, rf.store_argv(url, PREFIX, wait=wait) + list(extra),
                       label="stalkd-redis")
        s.start()
        out.append(s)
    return out


def parallel_loadgen(run, servers, scenario, redis_pids=(), **opts):
    """One loadgen per server at once, opts['conns'] split over them. Returns (sum of
    ops_per_s, [CPU cores over the run of each of redis_pids], list of the loadgens' JSON)."""
    conns = _split(opts.pop("conns"), len(servers))
    results, errors = [None] * len(servers), []

    def one(i):
        try:
            results[i] = run.loadgen(servers[i], scenario, conns=conns[i], **opts)
        except Exception as e:  # reported below, with the others'
            errors.append(str(e))
    r0, t0 = [run.proc_cpu_s(pid) for pid in redis_pids], time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(servers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    redis_cores = [(run.proc_cpu_s(pid) - c0) / wall for pid, c0 in zip(redis_pids, r0)]
    if errors:
        raise run.LoadgenError("; ".join(errors))
    return sum(r["ops_per_s"] for r in results), redis_cores, results


def fcall_ceiling(run, master, n):
    """redis-benchmark of an FCALL of a no-op function: requests/s, and Redis' CPU (cores)."""
    master.call("FUNCTION", "LOAD", "REPLACE", NOOP_LIB)
    c0, t0 = run.proc_cpu_s(master.pid), time.monotonic()
    p = subprocess.run(["redis-benchmark", "-h", rf.HOST, "-p", str(master.port), "-n", str(n),
                        "-c", "50", "-P", "16", "-q", "FCALL", "noop", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    wall = time.monotonic() - t0
    text = p.stdout.decode(errors="replace")
    m = re.findall(r"([0-9.]+) requests per second", text)
    if not m:
        raise RuntimeError("redis-benchmark: " + text[-300:])
    return float(m[-1]), (run.proc_cpu_s(master.pid) - c0) / wall


def sc_redis_throughput(run, scenario, srv, p):
    """scenario ('cycle' or 'pipeline') against: srv (stalkd, embedded store); stalkd on one
    Redis master with 1..p['front_ends'] front ends (--store-wait 0); the no-op FCALL ceiling on
    that master; and one front end with --store-wait 1 on a master + 1 replica."""
    opts = {k: p[k] for k in ("conns", "duration", "warmup", "size", "depth", "mode") if k in p}
    m, raw = {}, {}
    r = run.loadgen(srv, scenario, **opts)
    m["embedded_ops"], raw["embedded"] = r["ops_per_s"], r
    for n in range(1, p["front_ends"] + 1):
        master = rf.RedisServer()
        fes = []
        try:
            fes = front_ends(run, srv.binary, n, master.url(), 0)
            ops, cores, rs = parallel_loadgen(run, fes, scenario, redis_pids=[master.pid],
                                              **dict(opts))
            m[f"fe{n}_ops"], m[f"fe{n}_redis_cores"] = ops, cores[0]
            m[f"fe{n}_stalkd_cores"] = sum(x.get("server_cpu_util") or 0 for x in rs)
            m[f"fe{n}_errors"] = sum(x.get("errors") or 0 for x in rs)
            raw[f"fe{n}"] = rs
            if n == p["front_ends"]:
                m["fcall_rps"], m["fcall_redis_cores"] = fcall_ceiling(run, master,
                                                                       p["fcall_n"])
        finally:
            for s in fes:
                s.cleanup()
            master.close()
    # A loaded machine can leave the replica's ack more than min-replicas-max-lag behind at
    # stalkd's start (NOREPLICAS on its FUNCTION LOAD): the lag is 10 s here, and a failure of
    # this part is reported beside the figures above instead of dropping them.
    rs, fes = None, []
    try:
        rs = rf.ReplicatedSet(replicas=1, min_replicas_to_write=1, min_replicas_max_lag=10)
        for attempt in range(3):
            rf.wait_until(lambda: int(rs.master.info("replication").get(
                "min_slaves_good_slaves", 0)) >= 1, timeout=10.0)
            try:
                fes = front_ends(run, srv.binary, 1, rs.master.url(), 1)
                break
            except RuntimeError as e:
                if attempt == 2:
                    raise
                print(f"  --store-wait 1 front end, attempt {attempt + 1}: {e}",
                      file=sys.stderr, flush=True)
                time.sleep(1)
        ops, cores, r = parallel_loadgen(run, fes, scenario, redis_pids=[rs.master.pid],
                                         **dict(opts))
        m["wait1_ops"], m["wait1_redis_cores"], raw["wait1"] = ops, cores[0], r
    except (run.LoadgenError, RuntimeError, OSError) as e:
        raw["wait1_error"] = str(e)
        print(f"  --store-wait 1 run failed: {e}", file=sys.stderr, flush=True)
    finally:
        for s in fes:
            s.cleanup()
        if rs:
            rs.close()
    fe1 = m.get("fe1_ops")
    for n in range(2, p["front_ends"] + 1):
        m[f"fe{n}_vs_fe1"] = run._ratio(m.get(f"fe{n}_ops"), fe1)
    best = max(m.get(f"fe{n}_ops") or 0 for n in range(1, p["front_ends"] + 1))
    m["best_vs_fcall"] = run._ratio(best, m.get("fcall_rps"))
    m["fe1_vs_embedded"] = run._ratio(fe1, m["embedded_ops"])
    m["wait1_vs_fe1"] = run._ratio(m.get("wait1_ops"), fe1)
    m["errors"] = sum(m.get(f"fe{n}_errors") or 0 for n in range(1, p["front_ends"] + 1))
    return m, raw


def sc_redis_tls(run, scenario, srv, p):
    """scenario against one Redis master and one front end (--store-wait 0): in clear, then
    over TLS (rediss://, Redis requiring the client certificate: tls-auth-clients yes), each
    on a Redis of its own, in this order, in one run."""
    import tls_certs
    opts = {k: p[k] for k in ("conns", "duration", "warmup", "size", "depth", "mode") if k in p}
    m, raw = {"errors": 0}, {}
    certs = tls_certs.make()
    try:
        for name, tls in (("plain", None), ("tls", rf.redis_tls(certs))):
            master = rf.RedisServer(tls=tls)
            fes = []
            try:
                extra = rf.store_tls_argv(certs) if tls else ()
                fes = front_ends(run, srv.binary, 1, master.url(), 0, extra)
                ops, cores, rs = parallel_loadgen(run, fes, scenario, redis_pids=[master.pid],
                                                  **dict(opts))
                m[f"{name}_ops"], m[f"{name}_redis_cores"] = ops, cores[0]
                m[f"{name}_stalkd_cores"] = sum(x.get("server_cpu_util") or 0 for x in rs)
                m["errors"] += sum(x.get("errors") or 0 for x in rs)
                raw[name] = rs
            finally:
                for s in fes:
                    s.cleanup()
                master.close()
    finally:
        certs.cleanup()
    m["tls_vs_plain"] = run._ratio(m.get("tls_ops"), m.get("plain_ops"))
    for name in ("plain", "tls"):
        ops = m.get(f"{name}_ops")
        m[f"{name}_stalkd_us_per_op"] = m[f"{name}_stalkd_cores"] / ops * 1e6 if ops else None
        m[f"{name}_redis_us_per_op"] = m[f"{name}_redis_cores"] / ops * 1e6 if ops else None
    return m, raw


METRICS_TLS = [
    ("plain_ops", "one master in clear, 1 front end: commands/s ↑"),
    ("plain_redis_us_per_op", "… Redis CPU µs/command ↓"),
    ("plain_stalkd_us_per_op", "… stalkd CPU µs/command ↓"),
    ("tls_ops", "the same over TLS (client certificate): commands/s ↑"),
    ("tls_redis_us_per_op", "… Redis CPU µs/command ↓"),
    ("tls_stalkd_us_per_op", "… stalkd CPU µs/command ↓"),
    ("tls_vs_plain", "TLS ÷ clear ↑"), ("errors", "errors")]


def metrics_throughput(p):
    out = [("embedded_ops", "stalkd embedded: commands/s ↑")]
    for n in range(1, p["front_ends"] + 1):
        out += [(f"fe{n}_ops", f"Redis, {n} front end(s): commands/s ↑"),
                (f"fe{n}_redis_cores", f"Redis, {n} front end(s): Redis CPU (cores)"),
                (f"fe{n}_stalkd_cores", f"Redis, {n} front end(s): stalkd CPU, all (cores)")]
    out += [("fcall_rps", "redis-benchmark FCALL noop (-c 50 -P 16): requests/s ↑"),
            ("fcall_redis_cores", "FCALL noop: Redis CPU (cores)"),
            ("wait1_ops", "Redis + 1 replica, --store-wait 1, 1 front end: commands/s ↑"),
            ("wait1_redis_cores", "--store-wait 1: Redis CPU (cores)")]
    out += [(f"fe{n}_vs_fe1", f"{n} front ends ÷ 1") for n in range(2, p["front_ends"] + 1)]
    out += [("best_vs_fcall", "best front-end count ÷ FCALL ceiling"),
            ("fe1_vs_embedded", "1 front end ÷ embedded"),
            ("wait1_vs_fe1", "--store-wait 1 ÷ --store-wait 0"), ("errors", "errors")]
    return out


def sc_redis_memory(run, srv, p):
    """Bytes per job: for stalkd, the embedded store's RSS and Redis' used_memory after
    p['jobs'] puts through one front end; for beanstalkd, its RSS."""
    m, raw = {}, {}
    f = run.loadgen(srv, "fill", jobs=p["jobs"], size=p["size"], conns=p["conns"],
                    depth=p["depth"], timeout=p["timeout"])
    time.sleep(0.2)
    n = f.get("inserted") or 0
    m["rss_per_job"] = (srv.rss() - f["rss_before"]) / n if n else None
    raw["fill"] = f
    if srv.kind != "stalkd" or run.CFG.standin:
        return m, raw
    master = rf.RedisServer()
    fes = []
    try:
        fes = front_ends(run, srv.binary, 1, master.url(), 0)
        before = int(master.info("memory")["used_memory"])
        r = run.loadgen(fes[0], "fill", jobs=p["jobs"], size=p["size"], conns=p["conns"],
                        depth=p["depth"], timeout=p["timeout"])
        time.sleep(0.2)
        after = int(master.info("memory")["used_memory"])
        n = r.get("inserted") or 0
        m["redis_bytes_per_job"] = (after - before) / n if n else None
        m["redis_used_mb"] = after / 2**20
        m["redis_puts_per_s"] = r.get("puts_per_s")
        m["redis_frontend_rss_per_job"] = (fes[0].rss() - r["rss_before"]) / n if n else None
        raw["redis_fill"] = r
    finally:
        for s in fes:
            s.cleanup()
        master.close()
    return m, raw


METRICS_MEMORY = [
    ("rss_per_job", "server RSS bytes/job (embedded store for stalkd) ↓"),
    ("redis_bytes_per_job", "Redis used_memory bytes/job ↓"),
    ("redis_used_mb", "Redis used_memory after the fill MiB"),
    ("redis_frontend_rss_per_job", "stalkd front end's RSS bytes/job (Redis store)"),
    ("redis_puts_per_s", "puts/s through the front end (window 100, 4 conns) ↑")]


def _put_loop(port, stop, log):
    """Puts one job at a time; log gets (time sent, time of the reply, reply line)."""
    body = b"x" * 100
    s, sent = None, time.monotonic()
    while not stop.is_set():
        try:
            if s is None:
                s = socket.create_connection((rf.HOST, port), timeout=30)
                f = s.makefile("rb")
            sent = time.monotonic()
            s.sendall(b"put 0 0 60 100\r\n" + body + b"\r\n")
            line = f.readline()
            if not line:
                raise OSError("closed")
            log.append((sent, time.monotonic(), line.strip().decode(errors="replace")))
        except OSError as e:
            log.append((sent, time.monotonic(), "conn: " + str(e)))
            if s:
                s.close()
            s = None
            time.sleep(0.05)
    if s:
        s.close()


def sc_redis_failover(run, srv, p):
    """Rounds of: master + 2 replicas + 3 sentinels (down-after p['down_after_ms']), one stalkd
    with --store redis-sentinel://... --store-wait 1, a client putting one job at a time;
    SIGKILL the master; time from the kill to the first INSERTED after it."""
    m, raw = {}, []
    gaps, errs = [], []
    for rnd in range(p["rounds"]):
        rs = rf.ReplicatedSet(replicas=2, min_replicas_to_write=1)
        sent, fes, stop, th = None, [], threading.Event(), None
        try:
            sent = rf.Sentinels(rs.master, down_after_ms=p["down_after_ms"])
            fes = front_ends(run, srv.binary, 1, sent.url(), 1)
            log = []
            th = threading.Thread(target=_put_loop, args=(fes[0].port, stop, log))
            th.start()
            time.sleep(p["before_s"])
            old = rs.master.addr
            t_kill = time.monotonic()
            rs.master.kill()
            new = sent.wait_failover(old, timeout=60)
            deadline = time.monotonic() + 30
            first = None
            while time.monotonic() < deadline and first is None:
                # the first put sent after the kill that succeeded (one sent before it may
                # be answered after it: its WAIT was confirmed before the kill)
                first = next((t for ts, t, line in list(log)
                              if ts > t_kill and line.startswith("INSERTED")), None)
                time.sleep(0.05)
            stop.set()
            th.join(timeout=35)
            after = [line for ts, t, line in log
                     if t > t_kill and (first is None or t <= first)]
            gap = None if first is None else first - t_kill
            bad = sum(1 for line in after if not line.startswith("INSERTED"))
            gaps.append(gap)
            errs.append(bad)
            raw.append({"round": rnd, "gap_s": gap, "failed_puts": bad, "new_master": new,
                        "puts_before_kill": sum(1 for _, t, _ in log if t <= t_kill),
                        "replies_in_gap": sorted(set(after))[:10]})
            print(f"  [redis-failover] round {rnd + 1}: first put {gap} s after the kill, "
                  f"{bad} failed", file=sys.stderr, flush=True)
        finally:
            stop.set()
            if th:
                th.join(timeout=35)
            for s in fes:
                s.cleanup()
            if sent:
                sent.close()
            rs.close()
    ok = [g for g in gaps if g is not None]
    m["gap_median_s"] = sorted(ok)[len(ok) // 2] if ok else None
    m["gap_min_s"] = min(ok) if ok else None
    m["gap_max_s"] = max(ok) if ok else None
    m["failed_puts_total"] = sum(errs)
    m["errors"] = len(gaps) - len(ok)
    return m, raw


METRICS_FAILOVER = [
    ("gap_median_s", "kill -9 of the master → first INSERTED: median s ↓"),
    ("gap_min_s", "… min s"), ("gap_max_s", "… max s"),
    ("failed_puts_total", "puts answered with an error meanwhile (all rounds)"),
    ("errors", "rounds without a put within 30 s after the failover")]


# ---- Redis Cluster (issue 17)

def _interleave(picked):
    """[tube, ...] from {master: [tube, ...]}: consecutive tubes on different masters."""
    lists = list(picked.values())
    return [t for row in zip(*lists) for t in row]


def _cluster_run(run, binary, p, shape, cluster, tubes_spec):
    """p['front_ends'] front ends (--store-wait 0) on `cluster` (a RedisCluster) or, when
    None, on one plain Redis master; the shape's loadgen with --tubes tubes_spec. Returns
    (ops/s, [Redis CPU cores of each master], stalkd CPU cores, errors, loadgen JSONs)."""
    opts = {k: p[k] for k in ("conns", "duration", "warmup", "size", "depth", "mode") if k in p}
    master = None if cluster else rf.RedisServer()
    fes = []
    try:
        url = cluster.url() if cluster else master.url()
        pids = [m.pid for m in cluster.masters()] if cluster else [master.pid]
        fes = front_ends(run, binary, p["front_ends"], url, 0)
        ops, cores, rs = parallel_loadgen(run, fes, shape, redis_pids=pids, tubes=tubes_spec,
                                          **opts)
        return (ops, cores, sum(x.get("server_cpu_util") or 0 for x in rs),
                sum(x.get("errors") or 0 for x in rs), rs)
    finally:
        for s in fes:
            s.cleanup()
        if master:
            master.close()


def sc_cluster_throughput(run, shape, srv, p):
    """The shape ('cycle' or 'pipeline') over p['tubes'] tubes (one per connection in turn),
    with p['front_ends'] front ends and --store-wait 0: on one plain Redis master, then on
    clusters of 1..p['masters'] masters without replicas, the tubes chosen so that every
    master serves the partitions of as many of them."""
    m, raw = {}, {}
    n_tubes = p["tubes"]
    ops, cores, fe_cores, errs, rs = _cluster_run(
        run, srv.binary, p, shape, None, "|".join("t%d" % i for i in range(n_tubes)))
    m["single_ops"], m["single_redis_cores"], m["single_stalkd_cores"] = ops, cores[0], fe_cores
    m["errors"], raw["single"] = errs, rs
    for n in range(1, p["masters"] + 1):
        with rcf.RedisCluster(masters=n, replicas=0) as cl:
            picked = cl.pick_tubes(n_tubes // n, "m%dt" % n)
            tubes = _interleave(picked)
            ops, cores, fe_cores, errs, rs = _cluster_run(run, srv.binary, p, shape, cl,
                                                          "|".join(tubes))
        m[f"m{n}_ops"], m[f"m{n}_stalkd_cores"] = ops, fe_cores
        m[f"m{n}_redis_cores_mean"] = sum(cores) / len(cores)
        m[f"m{n}_redis_cores_min"] = min(cores)
        m[f"m{n}_per_master_vs_single"] = run._ratio(ops / n, m["single_ops"])
        m[f"m{n}_vs_m1"] = run._ratio(ops, m.get("m1_ops"))
        # Commands per second of Redis CPU against the plain master's: the efficiency that
        # holds when the machine, not Redis, is the limit (2 CPUs for every process here).
        m[f"m{n}_per_redis_core_vs_single"] = run._ratio(
            run._ratio(ops, sum(cores)), run._ratio(m["single_ops"], m["single_redis_cores"]))
        m[f"m{n}_machine_cores"] = max(x.get("run_machine_busy_cores") or 0 for x in rs)
        m["errors"] += errs
        raw[f"m{n}"] = {"tubes": tubes, "redis_cores": cores, "loadgen": rs}
    return m, raw


def metrics_cluster_throughput(p):
    out = [("single_ops", "one plain Redis master: commands/s ↑"),
           ("single_redis_cores", "… its Redis CPU (cores)"),
           ("single_stalkd_cores", "… stalkd CPU, all front ends (cores)")]
    for n in range(1, p["masters"] + 1):
        out += [(f"m{n}_ops", f"cluster, {n} master(s): commands/s ↑"),
                (f"m{n}_per_master_vs_single", f"… per master ÷ plain Redis ↑"),
                (f"m{n}_vs_m1", f"… ÷ 1-master cluster ↑"),
                (f"m{n}_per_redis_core_vs_single",
                 f"… commands per Redis CPU-second ÷ plain Redis's ↑"),
                (f"m{n}_redis_cores_mean", f"… Redis CPU per master, mean (cores)"),
                (f"m{n}_redis_cores_min", f"… Redis CPU per master, least (cores)"),
                (f"m{n}_stalkd_cores", f"… stalkd CPU, all front ends (cores)"),
                (f"m{n}_machine_cores", f"… whole machine busy (cores)")]
    return out + [("errors", "errors")]


def sc_cluster_reserve(run, shape, srv, p):
    """On a cluster of p['masters'] masters, for each k in p['ks']: p['sets'] sets of k
    tubes, connection i watching set i mod sets and putting into one of its tubes. spread:
    each set's k tubes in k partitions, consecutive ones on different masters (a reserve
    across partitions); grouped: each set's tubes share a partition, `(gN)t0`..`(gN)t{k-1}`
    (a reserve in one), the sets' partitions spread evenly over the masters."""
    m, raw = {"errors": 0}, {}
    n_sets, masters = p["sets"], p["masters"]
    with rcf.RedisCluster(masters=masters, replicas=0) as cl:
        kmax = max(p["ks"])
        spread = _interleave(cl.pick_tubes(-(-n_sets * kmax // masters), "x"))
        groups = _interleave(cl.pick_tubes(-(-n_sets // masters), "(g%d)",
                                           taken=spread))[:n_sets]
        for k in p["ks"]:
            spread_sets = [spread[i * k:(i + 1) * k] for i in range(n_sets)]
            grouped_sets = [["%st%d" % (g, j) for j in range(k)] for g in groups]
            for name, sets in (("grouped", grouped_sets), ("spread", spread_sets)):
                ops, cores, fe_cores, errs, rs = _cluster_run(
                    run, srv.binary, p, shape, cl, "|".join(",".join(x) for x in sets))
                key = f"k{k}_{name}"
                m[f"{key}_ops"], m[f"{key}_stalkd_cores"] = ops, fe_cores
                m[f"{key}_redis_cores"] = sum(cores)
                m[f"{key}_redis_us_per_op"] = sum(cores) / ops * 1e6 if ops else None
                m[f"{key}_stalkd_us_per_op"] = fe_cores / ops * 1e6 if ops else None
                m["errors"] += errs
                raw[key] = {"sets": sets, "redis_cores": cores, "loadgen": rs}
            m[f"k{k}_spread_vs_grouped"] = run._ratio(m.get(f"k{k}_spread_ops"),
                                                      m.get(f"k{k}_grouped_ops"))
    return m, raw


def metrics_cluster_reserve(p):
    out = []
    for k in p["ks"]:
        for name, what in (("grouped", f"{k} tubes in one partition"),
                           ("spread", f"{k} tubes in {k} partitions")):
            out += [(f"k{k}_{name}_ops", f"watching {what}: commands/s ↑"),
                    (f"k{k}_{name}_redis_cores", "… Redis CPU, all masters (cores)"),
                    (f"k{k}_{name}_redis_us_per_op", "… Redis CPU µs/command ↓"),
                    (f"k{k}_{name}_stalkd_cores", "… stalkd CPU, all front ends (cores)"),
                    (f"k{k}_{name}_stalkd_us_per_op", "… stalkd CPU µs/command ↓")]
        out.append((f"k{k}_spread_vs_grouped", f"k = {k}: across partitions ÷ within one ↑"))
    return out + [("errors", "errors")]


def scenarios(run):
    """The Scenario objects (opt-in) for run.py's table."""
    S = run.Scenario
    cyc = dict(conns=50, size=100, warmup=1, duration=5, front_ends=3, fcall_n=2_000_000)
    pip = dict(conns=4, depth=100, mode="pdr", size=100, warmup=1, duration=4, front_ends=3,
               fcall_n=2_000_000)
    # Cluster shapes: redis-pipeline's and redis-cycle's, with 12 connections (48 in the
    # cycle) so that every tube has its own (4 tubes per master with 3 masters).
    cpip = dict(conns=12, depth=100, mode="pdr", size=100, warmup=1, duration=4, tubes=12,
                masters=3, front_ends=2)
    ccyc = dict(conns=48, size=100, warmup=1, duration=4, tubes=12, masters=3, front_ends=2)
    cres = dict(conns=48, size=100, warmup=1, duration=4, sets=12, ks=(2, 3, 6), masters=3,
                front_ends=2)
    return [
        S("redis-cycle", "Redis store, cycle: {conns} connections put({size} B) → reserve → "
          "delete; embedded, then one Redis master with 1..{front_ends} front ends "
          "(--store-wait 0), the FCALL no-op ceiling, and --store-wait 1 with 1 replica",
          lambda srv, p: sc_redis_throughput(run, "cycle", srv, p), metrics_throughput,
          cyc, dict(cyc, warmup=0.3, duration=1, fcall_n=200_000), servers=("stalkd",),
          default=False),
        S("redis-pipeline", "Redis store, pipeline: {conns} connections × {depth} in flight "
          "(mode {mode}); embedded, one Redis master with 1..{front_ends} front ends "
          "(--store-wait 0), the FCALL no-op ceiling, and --store-wait 1 with 1 replica",
          lambda srv, p: sc_redis_throughput(run, "pipeline", srv, p), metrics_throughput,
          pip, dict(pip, warmup=0.3, duration=1, fcall_n=200_000), servers=("stalkd",),
          default=False),
        S("redis-tls", "Redis store over TLS, pipeline: {conns} connections × {depth} in "
          "flight (mode {mode}); one Redis master, one front end, --store-wait 0: in clear, "
          "then over TLS with a client certificate (Redis on its TLS port only)",
          lambda srv, p: sc_redis_tls(run, "pipeline", srv, p), METRICS_TLS,
          pip, dict(pip, warmup=0.3, duration=1), servers=("stalkd",), default=False),
        S("redis-memory", "Redis store, memory: {jobs} puts of {size} B ({conns} connections, "
          "window {depth}); Redis INFO used_memory before/after, beside RSS per job",
          lambda srv, p: sc_redis_memory(run, srv, p), METRICS_MEMORY,
          dict(jobs=1_000_000, size=100, conns=4, depth=100, timeout=300),
          dict(jobs=20_000, size=100, conns=4, depth=100, timeout=60), default=False),
        S("cluster-pipeline", "Redis Cluster, pipeline: {conns} connections × {depth} in "
          "flight (mode {mode}) over {tubes} tubes, {front_ends} front ends, --store-wait 0; "
          "one plain Redis master, then clusters of 1..{masters} masters (no replicas; tubes "
          "spread evenly by partition owner); Redis processes not pinned",
          lambda srv, p: sc_cluster_throughput(run, "pipeline", srv, p),
          metrics_cluster_throughput, cpip, dict(cpip, warmup=0.3, duration=1),
          servers=("stalkd",), default=False),
        S("cluster-cycle", "Redis Cluster, cycle: {conns} connections put({size} B) → reserve "
          "→ delete over {tubes} tubes, {front_ends} front ends, --store-wait 0; one plain "
          "Redis master, then clusters of 1..{masters} masters (no replicas; tubes spread "
          "evenly by partition owner); Redis processes not pinned",
          lambda srv, p: sc_cluster_throughput(run, "cycle", srv, p),
          metrics_cluster_throughput, ccyc, dict(ccyc, warmup=0.3, duration=1),
          servers=("stalkd",), default=False),
        S("cluster-reserve", "Redis Cluster, reserve across partitions: cycle, {conns} "
          "connections, each watching one of {sets} sets of k tubes (k in {ks}), on {masters} "
          "masters ({front_ends} front ends, --store-wait 0): the k tubes in one partition "
          "(`(group)`), then in k partitions spread over the masters; Redis processes not "
          "pinned",
          lambda srv, p: sc_cluster_reserve(run, "cycle", srv, p), metrics_cluster_reserve,
          cres, dict(cres, warmup=0.3, duration=1, ks=(3,)), servers=("stalkd",),
          default=False),
        S("redis-failover", "Redis store, failover: master + 2 replicas + 3 sentinels "
          "(down-after {down_after_ms} ms), one stalkd (--store-wait 1) and a client putting "
          "one job at a time; SIGKILL the master; {rounds} round(s)",
          lambda srv, p: sc_redis_failover(run, srv, p), METRICS_FAILOVER,
          dict(rounds=3, down_after_ms=2000, before_s=1.0),
          dict(rounds=1, down_after_ms=2000, before_s=0.5), servers=("stalkd",),
          default=False),
    ]

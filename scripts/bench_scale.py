#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The driver of scripts/bench-scale.sh: small puts from Python writers, as a user measures them.

Runs with whichever `mooncake` package is first on sys.path (ours or upstream's wheel): W writer
processes put N objects in all (--value_len-byte values, --key_len-byte keys, put_batch of
--batch keys) through MooncakeDistributedStore over the protocol given, into the master and the
mooncake_client that the caller started.  It prints one JSON object: puts/s per tenth of the
run, batch latency p50/p99, a loopback round-trip reference measured in this run (a TCP echo
between two processes, 64 bytes, TCP_NODELAY; and the store's own round trip, is_exist of
one key through the Python binding to the master), the CPU of every process named by --pid (and of
the writers) per put and in cores, the master's RSS growth per object, and the rates of
batch_is_exist and batch_get_replica_desc over the keys just written.
"""
import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def key_of(w, i, key_len):
    k = "w%02d-%012d-" % (w, i)
    return k + "k" * (key_len - len(k))


def open_store(a):
    from mooncake.store import MooncakeDistributedStore
    st = MooncakeDistributedStore()
    rc = st.setup("127.0.0.1", a.metadata, a.writer_segment, 16 << 20, a.protocol, "",
                  a.master)
    if rc != 0:
        raise SystemExit("setup failed: %d" % rc)
    return st


def writer(a, w, first, count, q, go, release):
    """Put keys first..first+count-1 of writer w; report batch end times and latencies."""
    st = open_store(a)
    value = b"v" * a.value_len
    keys = [key_of(w, i, a.key_len) for i in range(first, first + count)]
    # The store's own round trip to the master: is_exist of one key, through the same stack.
    rtts = []
    for _ in range(500):
        s = time.perf_counter()
        st.is_exist("rtt-probe")
        rtts.append(time.perf_counter() - s)
    q.put(("ready", w, os.getpid(), statistics.median(rtts)))
    go.wait()
    ends, lats, fails = [], [], 0
    t0 = time.perf_counter()
    for i in range(0, count, a.batch):
        ks = keys[i:i + a.batch]
        s = time.perf_counter()
        rc = st.put_batch(ks, [value] * len(ks))
        e = time.perf_counter()
        if rc != 0:
            fails += len(ks)
        ends.append((e, len(ks)))
        lats.append(e - s)
    q.put(("done", w, t0, ends, lats, fails))
    release.wait()  # until the parent has read this process's CPU time
    st.close()


def echo_server(port_q):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port_q.put(s.getsockname()[1])
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(64)
        if not b:
            return
        c.sendall(b)


def loopback_rtt(rounds=2000):
    """p50 of a 64-byte TCP echo between two processes on loopback, in seconds."""
    port_q = mp.Queue()
    p = mp.Process(target=echo_server, args=(port_q,), daemon=True)
    p.start()
    c = socket.create_connection(("127.0.0.1", port_q.get()))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * 64
    rtts = []
    for _ in range(rounds):
        s = time.perf_counter()
        c.sendall(msg)
        got = 0
        while got < 64:
            got += len(c.recv(64 - got))
        rtts.append(time.perf_counter() - s)
    c.close()
    p.join(2)
    return statistics.median(rtts)


def get_msg(q, procs):
    """The next message of a writer; exits when a writer died without one."""
    import queue
    while True:
        try:
            return q.get(timeout=5)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise SystemExit("a writer died (exit code %d)" % dead[0].exitcode)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))] if xs else 0.0


def lookups(a, n_keys, pids):
    """Keys/s of batch_is_exist and batch_get_replica_desc over keys written by writer 0, and
    their CPU cost per key (this process and the master: wall time on a busy machine says
    more about the neighbours than about the call)."""
    st = open_store(a)
    out = {}
    nk = min(n_keys, 200000)
    keys = [key_of(0, i, a.key_len) for i in range(nk)]
    for name in ("batch_is_exist", "batch_get_replica_desc"):
        fn = getattr(st, name, None)
        if fn is None:
            continue
        done, t0 = 0, time.perf_counter()
        c0 = cpu_s(os.getpid()) + sum(cpu_s(p) for p in pids.values())
        ok = True
        while time.perf_counter() - t0 < a.lookup_seconds:
            for i in range(0, nk, a.lookup_batch):
                r = fn(keys[i:i + a.lookup_batch])
                if name == "batch_is_exist" and i == 0 and done == 0:
                    ok = all(x == 1 for x in r)
                done += len(r)
                if time.perf_counter() - t0 >= a.lookup_seconds:
                    break
        c1 = cpu_s(os.getpid()) + sum(cpu_s(p) for p in pids.values())
        out[name] = {"keys_per_s": round(done / (time.perf_counter() - t0)),
                     "cpu_us_per_key": round((c1 - c0) / max(done, 1) * 1e6, 3),
                     "batch": a.lookup_batch, "all_found": ok}
    st.close()
    return out


def summarize(path):
    """Medians per label of the JSON lines in path (the runs of bench-scale.sh), one line each."""
    rows = {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        rows.setdefault(r.get("label") or "?", []).append(r)

    def med(rs, f):
        xs = [f(r) for r in rs]
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else float("nan")

    print("%-13s %4s %9s %9s %9s %8s %8s %6s %10s %10s %10s %7s %9s %9s %9s %9s" % (
        "label", "runs", "puts/s", "1st10th", "last10th", "p50_ms", "p99_ms", "x3rtt",
        "us/put:wr", "master", "client", "B/obj", "exist/s", "desc/s", "exist_us", "desc_us"))
    for label, rs in rows.items():
        if "phase" in rs[0]:  # mooncake_bench's line (C writer); 1st10th: puts/s per thread
            cpu = lambda r, n: r.get("cpu_us_per_put", {}).get(n)
            print("%-13s %4d %9.0f %9.0f %9s %8.3f %8.3f %6s %10.2f %10.2f %10.2f" % (
                label, len(rs), med(rs, lambda r: r["ops_per_s"]),
                med(rs, lambda r: r.get("ops_per_s_per_thread")), "",
                med(rs, lambda r: r["p50_us"] / 1e3), med(rs, lambda r: r["p99_us"] / 1e3), "",
                med(rs, lambda r: cpu(r, "writers")), med(rs, lambda r: cpu(r, "master")),
                med(rs, lambda r: cpu(r, "client"))))
            continue
        lk = lambda r, n, f="keys_per_s": r.get("lookups", {}).get(n, {}).get(f)
        print("%-13s %4d %9.0f %9.0f %9.0f %8.3f %8.3f %6.2f %10.2f %10.2f %10.2f %7.1f %9.0f %9.0f"
              " %9.3f %9.3f" % (
            label, len(rs), med(rs, lambda r: r["puts_per_s"]),
            med(rs, lambda r: r["puts_per_s_by_tenth"][0]),
            med(rs, lambda r: r["puts_per_s_by_tenth"][-1]),
            med(rs, lambda r: r["batch_p50_ms"]), med(rs, lambda r: r["batch_p99_ms"]),
            med(rs, lambda r: r["batch_p50_over_3_store_rtt"]),
            med(rs, lambda r: r["cpu_us_per_put"]["writers"]),
            med(rs, lambda r: r["cpu_us_per_put"].get("master")),
            med(rs, lambda r: r["cpu_us_per_put"].get("client")),
            med(rs, lambda r: r.get("master_rss_bytes_per_object")),
            med(rs, lambda r: lk(r, "batch_is_exist")),
            med(rs, lambda r: lk(r, "batch_get_replica_desc")),
            med(rs, lambda r: lk(r, "batch_is_exist", "cpu_us_per_key")),
            med(rs, lambda r: lk(r, "batch_get_replica_desc", "cpu_us_per_key"))))
    # CPU per put by tenth of the run (medians over the runs), where the driver sampled it.
    for label, rs in rows.items():
        by = [r.get("cpu_us_per_put_by_tenth") for r in rs if r.get("cpu_us_per_put_by_tenth")]
        for name in sorted(by[0]) if by else []:
            cols = []
            for i in range(10):
                xs = [b[name][i] for b in by if name in b and len(b[name]) > i
                      and b[name][i] is not None]
                cols.append("%6.2f" % statistics.median(xs) if xs else "     -")
            print("%-13s cpu us/put by tenth %-8s %s" % (label, name, " ".join(cols)))
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--summarize":
        return summarize(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", required=True)
    ap.add_argument("--metadata", default="P2PHANDSHAKE")
    ap.add_argument("--protocol", default="tcp")
    ap.add_argument("--objects", type=int, default=1000000)
    ap.add_argument("--writers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--key_len", type=int, default=48)
    ap.add_argument("--value_len", type=int, default=64)
    ap.add_argument("--writer_segment", type=int, default=0,
                    help="bytes each writer contributes (0: all objects on mooncake_client)")
    ap.add_argument("--pid", action="append", default=[],
                    help="NAME=PID of a process to account (master=PID sizes RSS/object)")
    ap.add_argument("--lookup_batch", type=int, default=128)
    ap.add_argument("--lookup_seconds", type=float, default=3.0)
    ap.add_argument("--label", default="")
    ap.add_argument("--sample_seconds", type=float, default=0.1,
                    help="how often each process's CPU is read (CPU per put by tenth)")
    a = ap.parse_args()
    pids = {k: int(v) for k, v in (p.split("=", 1) for p in a.pid)}

    rtt = loopback_rtt()
    q, go, release = mp.Queue(), mp.Event(), mp.Event()
    per = a.objects // a.writers
    procs = []
    for w in range(a.writers):
        p = mp.Process(target=writer, args=(a, w, 0, per, q, go, release))
        p.start()
        procs.append(p)
    wpids, rpc_rtts = {}, []
    while len(wpids) < a.writers:
        m = get_msg(q, procs)
        wpids[m[1]] = m[2]
        rpc_rtts.append(m[3])
    rpc_rtt = statistics.median(rpc_rtts)
    rss0 = rss_bytes(pids["master"]) if "master" in pids else 0
    cpu0 = {k: cpu_s(v) for k, v in pids.items()}
    wcpu0 = {w: cpu_s(p) for w, p in wpids.items()}
    # CPU of every process sampled through the run, for the CPU per put of each tenth.
    import threading
    samples, sampling = [], threading.Event()
    watched = dict(pids, **{"writer%d" % w: p for w, p in wpids.items()})

    def sampler():
        while not sampling.is_set():
            row = {}
            for k, v in watched.items():
                try:
                    row[k] = cpu_s(v)
                except OSError:
                    pass
            samples.append((time.perf_counter(), row))
            sampling.wait(a.sample_seconds)

    th = threading.Thread(target=sampler, daemon=True)
    t0 = time.perf_counter()
    go.set()
    th.start()
    results = []
    wcpu1 = {}
    while len(results) < a.writers:
        m = get_msg(q, procs)
        results.append(m)
        # A writer's CPU is read as soon as it reports, before it tears down.
        wcpu1[m[1]] = cpu_s(wpids[m[1]])
    sampling.set()
    th.join()
    t1 = max(e for r in results for e, _ in r[3]) if results else time.perf_counter()
    cpu1 = {k: cpu_s(v) for k, v in pids.items()}
    rss1 = rss_bytes(pids["master"]) if "master" in pids else 0
    release.set()
    for p in procs:
        p.join()
    ends = sorted(e for r in results for e in r[3])
    lats = [x for r in results for x in r[4]]
    fails = sum(r[5] for r in results)
    total = sum(n for _, n in ends)
    wall = t1 - t0
    tenths, done, prev_t, prev_n, k = [], 0, t0, 0, 1
    bounds = []
    for e, n in ends:
        done += n
        while k <= 10 and done >= total * k / 10:
            tenths.append(round((done - prev_n) / max(e - prev_t, 1e-9)))
            bounds.append((prev_t, e, done - prev_n))
            prev_t, prev_n = e, done
            k += 1

    def cpu_at(name, t):
        """A process's CPU seconds at time t, interpolated between samples."""
        pts = [(st, row[name]) for st, row in samples if name in row]
        if not pts:
            return None
        if t <= pts[0][0]:
            return pts[0][1]
        for (ta, ca), (tb, cb) in zip(pts, pts[1:]):
            if t <= tb:
                return ca + (cb - ca) * (t - ta) / max(tb - ta, 1e-9)
        return pts[-1][1]

    cpu_tenths = {}
    for name in sorted(watched):
        row = []
        for ta, tb, n in bounds:
            ca, cb = cpu_at(name, ta), cpu_at(name, tb)
            row.append(None if ca is None or cb is None else round((cb - ca) / max(n, 1) * 1e6, 2))
        key = "writers" if name.startswith("writer") and a.writers == 1 else name
        cpu_tenths[key] = row
    cpu = {k: cpu1[k] - cpu0[k] for k in pids}
    cpu["writers"] = sum(wcpu1[w] - wcpu0[w] for w in wpids)
    p50 = pct(lats, 50)
    out = {
        "label": a.label, "objects": total, "failed": fails, "writers": a.writers,
        "batch": a.batch, "key_len": a.key_len, "value_len": a.value_len,
        "protocol": a.protocol, "seconds": round(wall, 2),
        "puts_per_s": round(total / wall), "puts_per_s_by_tenth": tenths,
        "batch_p50_ms": round(p50 * 1e3, 3), "batch_p99_ms": round(pct(lats, 99) * 1e3, 3),
        "loopback_rtt_us": round(rtt * 1e6, 1),
        "batch_p50_over_3_rtt": round(p50 / (3 * rtt), 2),
        "store_rpc_rtt_us": round(rpc_rtt * 1e6, 1),
        "batch_p50_over_3_store_rtt": round(p50 / (3 * rpc_rtt), 2),
        "cpu_cores": {k: round(v / wall, 2) for k, v in cpu.items()},
        "cpu_us_per_put": {k: round(v / max(total, 1) * 1e6, 2) for k, v in cpu.items()},
        # Sampled every --sample_seconds (clock ticks: 10 ms), so short tenths are coarse.
        "cpu_us_per_put_by_tenth": cpu_tenths,
    }
    if "master" in pids:
        out["master_rss_bytes_per_object"] = round((rss1 - rss0) / max(total, 1), 1)
        out["master_rss_mib"] = round(rss1 / 2**20, 1)
    if a.lookup_seconds > 0:
        out["lookups"] = lookups(a, per, {k: v for k, v in pids.items() if k == "master"})
    print(json.dumps(out))
    return 0 if fails == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

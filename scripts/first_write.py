#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""First writes into fresh segment memory against later writes into the same memory.

Usage: first_write.py MASTER [GIB] [TAG]

A store client with no segment of its own puts GIB GiB (default 1) of distinct 1 MiB objects,
8 per batch_put_from, from a registered buffer, into the cluster at MASTER (host:port), whose
memory nothing has written yet; then remove_all; then GIB GiB more into the same memory.  Then
4 KiB puts (batch 32) and 1 MiB gets.  Prints one line of figures.  Runs with either package:
ours (PYTHONPATH=_build/x/pybuild) or upstream's wheel.  FIRST_WRITE_TRACE=1 prints the first
batch's latency and each quarter's time of every round on stderr.  WARM=1: a writer that has
met the segment before: one 4 KiB put first (the writer's engine opens the segment), then a wait
until this process's mapped shared memory (RssShmem) stops growing for half a second (at most
30 s), before the first round.  The later round, too, starts once that figure stopped growing,
so that it measures the steady state (with no mapping of the writer's still going on).
READY=1: a writer whose set-up came a moment before its first put: no warm-up put, only the
wait until RssShmem stops growing (what the store maps at set-up without any put).
FIRST_WRITE_TRACE=1 also prints how long set-up took.
"""
import ctypes
import os
import sys
import time

from mooncake.store import MooncakeDistributedStore

MIB = 1 << 20


def rss_shmem():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) << 10
    return 0


def settle(tag, what):
    """Wait until this process's mapped shared memory stops growing for half a second."""
    t0 = time.perf_counter()
    last, since = rss_shmem(), t0
    while time.perf_counter() - t0 < 30 and time.perf_counter() - since < 0.5:
        time.sleep(0.02)
        cur = rss_shmem()
        if cur != last:
            last, since = cur, time.perf_counter()
    if os.environ.get("FIRST_WRITE_TRACE"):
        print("# %s: %s settled after %.2f s, RssShmem %d MiB" % (
            tag, what, since - t0, last >> 20), file=sys.stderr)


def warm_up(s, tag, ptr):
    """One small put, then wait for this process's page tables to stop growing."""
    if s.put_from("%s-warm" % tag, ptr, 4096) != 0:
        raise SystemExit("warm-up put failed")
    settle(tag, "warm-up")


def main():
    master = sys.argv[1]
    gib = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    tag = sys.argv[3] if len(sys.argv) > 3 else "run"
    n = int(gib * 1024)
    batch = 8
    s = MooncakeDistributedStore()
    t_setup = time.perf_counter()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 * MIB, "tcp", "", master)
    if os.environ.get("FIRST_WRITE_TRACE"):
        print("# %s: setup %.1f ms" % (tag, (time.perf_counter() - t_setup) * 1e3),
              file=sys.stderr)
    if rc != 0:
        print("setup failed: %d" % rc, file=sys.stderr)
        return 1
    buf = ctypes.create_string_buffer(batch * MIB)
    ctypes.memmove(buf, os.urandom(batch * MIB), batch * MIB)
    base = ctypes.addressof(buf)
    if s.register_buffer(base, batch * MIB) != 0:
        print("register_buffer failed", file=sys.stderr)
        return 1
    ptrs = [base + i * MIB for i in range(batch)]
    sizes = [MIB] * batch

    cpu = {}

    def put_round(prefix):
        c0 = os.times()
        t0 = time.perf_counter()
        lat = []
        for i in range(0, n, batch):
            keys = ["%s/%d" % (prefix, i + j) for j in range(batch)]
            t1 = time.perf_counter()
            res = s.batch_put_from(keys, ptrs, sizes)
            lat.append(time.perf_counter() - t1)
            bad = [r for r in res if r != 0]
            if bad:
                raise SystemExit("batch_put_from failed: %s" % bad[:4])
        if os.environ.get("FIRST_WRITE_TRACE"):
            q = len(lat) // 4
            print("# %s: first batch %.1f ms; quarters %s ms" % (
                prefix, lat[0] * 1e3, " ".join("%.0f" % (sum(lat[k * q:(k + 1) * q]) * 1e3)
                                              for k in range(4))), file=sys.stderr)
        c1 = os.times()
        # This process's CPU time (all its threads: the copies, the page tables they or the
        # engine's map-ahead build) per GiB written: far less skewed by a busy host than time.
        cpu[prefix] = ((c1.user - c0.user) + (c1.system - c0.system)) / (n * MIB / (1 << 30))
        return n * MIB / (time.perf_counter() - t0) / 1e9

    if os.environ.get("WARM") == "1":
        warm_up(s, tag, base)
    elif os.environ.get("READY") == "1":
        settle(tag, "set-up")
    first = put_round(tag + "-first")
    s.remove_all()
    time.sleep(0.2)
    settle(tag, "before the later round")
    second = put_round(tag + "-second")
    # 1 MiB gets of what the second round wrote, into the registered buffer.
    t0 = time.perf_counter()
    got = 0
    for i in range(0, n, batch):
        keys = ["%s-second/%d" % (tag, i + j) for j in range(batch)]
        res = s.batch_get_into(keys, ptrs, sizes)
        got += sum(r for r in res if r > 0)
    gets = got / (time.perf_counter() - t0) / 1e9
    s.remove_all()
    time.sleep(0.2)
    # 4 KiB puts, 32 per batch.
    small = [base + i * 4096 for i in range(32)]
    t0 = time.perf_counter()
    count = 0
    while time.perf_counter() - t0 < 2.0:
        keys = ["%s-small/%d" % (tag, count + j) for j in range(32)]
        res = s.batch_put_from(keys, small, [4096] * 32)
        if any(r != 0 for r in res):
            raise SystemExit("4 KiB batch_put_from failed")
        count += 32
    small_rate = count / (time.perf_counter() - t0)
    s.remove_all()
    print("%s first_GBps=%.2f later_GBps=%.2f ratio=%.2f get_1MiB_GBps=%.2f put_4KiB_per_s=%.0f "
          "first_cpu_s_per_GiB=%.3f later_cpu_s_per_GiB=%.3f"
          % (tag, first, second, first / second, gets, small_rate, cpu[tag + "-first"],
             cpu[tag + "-second"]))
    sys.stdout.flush()
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-call cost of the Python store API, for this project's package and upstream's wheel alike.

    bench-percall.py MASTER [SECONDS]

Against a running master (and storage clients holding the segments), measures for SECONDS each
(default 2):
  exist   batch_is_exist of 128 keys (64 present, 64 absent): calls/s and median latency
  put     batch_put_from of 8 x 1 MiB from a registered buffer, fresh keys each call
  get     batch_get_into of the same 8 x 1 MiB keys into a registered buffer
and prints one line "exist=CALLS/s put=CALLS/s get=CALLS/s (p50 us: E P G)".  Which
implementation runs is chosen by the interpreter and PYTHONPATH (scripts/bench-percall.sh).
"""
import ctypes
import sys
import time

from mooncake.store import MooncakeDistributedStore

MIB = 1 << 20
BATCH = 8
NKEYS = 128
WARM = 128      # 1 GiB: at most the two 512 MiB segments
CYCLE = 32


def timed(secs, fn, budget=None):
    """Run fn(i) back to back for secs seconds (or budget calls).

    Returns calls/s, median us, calls, latencies."""
    lat = []
    t0 = time.perf_counter()
    end = t0 + secs
    while True:
        a = time.perf_counter()
        if a >= end or (budget is not None and len(lat) >= budget):
            break
        fn(len(lat))
        lat.append(time.perf_counter() - a)
    total = time.perf_counter() - t0
    return len(lat) / total, sorted(lat)[len(lat) // 2] * 1e6 if lat else 0.0, len(lat), lat


def main():
    master = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MIB, "tcp", "", master)
    if rc != 0:
        sys.exit("setup failed: %d" % rc)
    buf = ctypes.create_string_buffer(BATCH * MIB)
    base = ctypes.addressof(buf)
    if s.register_buffer(base, BATCH * MIB) != 0:
        sys.exit("register_buffer failed")
    ctypes.memset(base, 0x5A, BATCH * MIB)
    ptrs = [base + i * MIB for i in range(BATCH)]
    sizes = [MIB] * BATCH

    # exist: half of the keys present
    keys = ["pc/e/%d" % i for i in range(NKEYS)]
    for k in keys[::2]:
        if s.put(k, b"x" * 64) != 0:
            sys.exit("put %s failed" % k)
    want = [1, 0] * (NKEYS // 2)
    if s.batch_is_exist(keys) != want:
        sys.exit("batch_is_exist answered wrong")

    def exist(_):
        s.batch_is_exist(keys)

    ex = timed(secs, exist)

    # put: fresh keys each call.  A first pass fills the segments (until a put fails) and
    # removes it all again, untimed, so that puts measure calls, not the first touch of fresh
    # pages; then cycles of CYCLE timed calls, each followed by an untimed removal.
    def put(i):
        ks = ["pc/d/%d" % (i * BATCH + j) for j in range(BATCH)]
        r = s.batch_put_from(ks, ptrs, sizes)
        if r != [0] * BATCH:
            sys.exit("batch_put_from failed: %r" % (r,))

    def drop(n, strict=True):
        ks = ["pc/d/%d" % i for i in range(n * BATCH)]
        if s.batch_remove(ks) != [0] * len(ks) and strict:
            sys.exit("batch_remove failed")

    for i in range(WARM):
        ks = ["pc/d/%d" % (i * BATCH + j) for j in range(BATCH)]
        if s.batch_put_from(ks, ptrs, sizes) != [0] * BATCH:
            break
    drop(WARM, strict=False)
    lat, spent = [], 0.0
    while True:
        rate, p50, n, l = timed(secs - spent, put, budget=CYCLE)
        lat += l
        spent += n / rate if rate else 0
        if spent >= secs or n < CYCLE:
            break
        drop(n)
    nput = n
    lat.sort()
    pu = (len(lat) / spent, lat[len(lat) // 2] * 1e6)

    def get(i):
        ks = ["pc/d/%d" % ((i % nput) * BATCH + j) for j in range(BATCH)]
        r = s.batch_get_into(ks, ptrs, sizes)
        if r != sizes:
            sys.exit("batch_get_into failed: %r" % (r,))

    ge = timed(secs, get)
    print("exist=%.0f put=%.0f get=%.0f calls/s (p50 us: %.0f %.0f %.0f)" %
          (ex[0], pu[0], ge[0], ex[1], pu[1], ge[1]))
    sys.stdout.flush()
    s.remove_all()
    s.close()


if __name__ == "__main__":
    main()

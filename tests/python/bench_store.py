#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Python store benchmark: batch_put_from / batch_get_into throughput of registered buffers.

    bench_store.py MASTER VALUE_SIZE [BATCH] [SECONDS]

Compare with `mooncake_bench --value_size=... --batch_size=... --threads=1` on the same cluster.
"""
import ctypes
import sys
import time

from mooncake.store import MooncakeDistributedStore


def main():
    master, vs = sys.argv[1], int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    secs = float(sys.argv[4]) if len(sys.argv) > 4 else 3
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master) == 0
    buf = ctypes.create_string_buffer(vs * batch)
    base = ctypes.addressof(buf)
    s.register_buffer(base, vs * batch)
    ptrs = [base + i * vs for i in range(batch)]
    sizes = [vs] * batch
    budget = (1 << 30) // vs
    n = 0
    t0 = time.time()
    while time.time() - t0 < secs and n + batch <= budget:
        keys = ["pyb/%d" % (n + i) for i in range(batch)]
        assert s.batch_put_from(keys, ptrs, sizes) == [0] * batch
        n += batch
    put = n * vs / (time.time() - t0) / (1 << 20)
    got = 0
    t0 = time.time()
    while time.time() - t0 < secs:
        keys = ["pyb/%d" % ((got + i) % n) for i in range(batch)]
        assert s.batch_get_into(keys, ptrs, sizes) == sizes
        got += batch
    get = got * vs / (time.time() - t0) / (1 << 20)
    print("python value=%dB batch=%d: put %.1f MiB/s, get %.1f MiB/s" % (vs, batch, put, get))
    s.remove_by_regex("^pyb/", True)
    s.close()


if __name__ == "__main__":
    main()

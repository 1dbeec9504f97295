#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Ranged reads through the Python package, for the checksum tests.

usage: ranged_get.py MASTER put KEY SIZE REPLICAS
       ranged_get.py MASTER ranges KEY SIZE EXPECT

put writes KEY (SIZE bytes of a pattern derived from the offset) with REPLICAS memory replicas.
ranges reads three ranges of KEY with get_into_ranges, the first one starting at byte 0, and
checks them: EXPECT "ok" wants every range read back with the right bytes, a number wants that
result for every range.  Prints one line; exit 0 when it matched."""
import ctypes
import sys

from mooncake.store import MooncakeDistributedStore, ReplicateConfig


def pattern(size):
    return bytes((i * 7 + (i >> 8)) & 0xFF for i in range(size))


def main():
    master, cmd, key, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master)
    if rc != 0:
        print("setup: %d" % rc)
        return 1
    try:
        if cmd == "put":
            cfg = ReplicateConfig()
            cfg.replica_num = int(sys.argv[5])
            rc = s.put(key, pattern(size), cfg)
            print("put %s: %d" % (key, rc))
            return rc != 0
        want = pattern(size)
        buf = ctypes.create_string_buffer(size)
        base = ctypes.addressof(buf)
        if s.register_buffer(base, size) != 0:
            print("register_buffer failed")
            return 1
        rg = [(0, 0, 4096), (8192, size // 2, 100), (16384, size - 1000, 1000)]
        res = s.get_into_ranges([base], [[key]], [[[d for d, _, _ in rg]]],
                                [[[o for _, o, _ in rg]]], [[[n for _, _, n in rg]]])
        got = res[0][0]
        if sys.argv[5] == "ok":
            good = got == [n for _, _, n in rg] and all(
                buf.raw[d:d + n] == want[o:o + n] for d, o, n in rg)
        else:
            good = got == [int(sys.argv[5])] * len(rg)
        print("ranges %s: %s (%s)" % (key, got, "as expected" if good else "NOT as expected"))
        return 0 if good else 1
    finally:
        s.close()


sys.exit(main())

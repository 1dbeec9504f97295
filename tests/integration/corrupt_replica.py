#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Corrupt one replica of a key in the memory of the process that holds it (root only).

usage: corrupt_replica.py ADMIN_PORT KEY INDEX PID...

Asks the master's admin HTTP where replica INDEX of KEY lies (/query_key: its buffer address),
finds among PIDs the process whose shared segment mapping holds that address (/proc/PID/maps),
and inverts the replica's first byte through /proc/PID/map_files, as a memory fault would.
Prints "corrupted KEY replica INDEX in PID at 0xADDR"; exits 1 when it cannot."""
import json
import os
import sys
import urllib.request


def main():
    port, key, index, pids = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    with urllib.request.urlopen("http://127.0.0.1:%s/query_key?key=%s" % (port, key)) as r:
        desc = json.load(r)
    mem = [d for d in desc["data"] if "buffer_address_" in d]
    if index >= len(mem):
        print("no replica %d of %s: %s" % (index, key, desc))
        return 1
    addr = int(mem[index]["buffer_address_"])
    for pid in pids:
        with open("/proc/%s/maps" % pid) as f:
            for line in f:
                fields = line.split()
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= addr < hi and "memfd:" in line and "s" in fields[1]:
                    path = "/proc/%s/map_files/%s" % (pid, fields[0])
                    fd = os.open(path, os.O_RDWR)
                    off = addr - lo + int(fields[2], 16)
                    b = os.pread(fd, 1, off)
                    os.pwrite(fd, bytes([b[0] ^ 0xFF]), off)
                    os.close(fd)
                    print("corrupted %s replica %d in %s at 0x%x" % (key, index, pid, addr))
                    return 0
    print("no process of %s maps 0x%x" % (pids, addr))
    return 1


sys.exit(main())

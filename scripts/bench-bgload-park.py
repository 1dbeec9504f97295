#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One round of scripts/bench-bgload-park.sh against a master loading in the background.

    bench-bgload-park.py ADDR METRICS_PORT PID N_KEYS PARKED LOOKUPS

Parks PARKED removes of unknown keys (4000 a connection: they wait for the end of the load),
then sends LOOKUPS ExistKeys one after the other, each of a key of the file that is not loaded
yet (looked up in the file: every answer is a step of the load).  Prints the loop thread's CPU
time (user + system, /proc/PID/task/PID/stat) and the wall time over the lookups, per lookup.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from mcrpc import HDR, MAGIC, OP, Client, keys, metric  # noqa: E402

PREFIX = "synthetic/restart/bench/"
HZ = os.sysconf("SC_CLK_TCK")


def loop_cpu(pid):
    with open("/proc/%s/task/%s/stat" % (pid, pid)) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / HZ


def main(addr, mport, pid, n_keys, parked, lookups):
    n_keys, parked, lookups = int(n_keys), int(parked), int(lookups)
    conns = []
    left = parked
    while left > 0:
        k = min(4000, left)
        c = Client(addr)
        c.sock.settimeout(300)
        c.sock.sendall(b"".join(HDR.pack(MAGIC, 1, 0, OP["REMOVE"], len(b) + 1, 0, i + 1) +
                                b"\x00" + b for i, b in
                                ((i, keys(["absent/%d/%d" % (len(conns), i)])) for i in range(k))))
        conns.append(c)
        left -= k
    end = time.time() + 60
    while (metric(mport, "master_load_waiting_requests") or 0) < parked:
        if time.time() > end:
            print("error: %s requests wait, not %d" %
                  (metric(mport, "master_load_waiting_requests"), parked))
            return 1
        time.sleep(0.05)
    r = Client(addr)
    r.sock.settimeout(60)
    cpu0, t0 = loop_cpu(pid), time.time()
    for i in range(lookups):
        # From the end of the file: rows the scan reaches last.
        st, rd = r.call("EXIST_KEY", keys(["%s%016d" % (PREFIX, n_keys - 1 - i)]))
        if st != 0 or rd.codes() != [1]:
            print("error: lookup %d answered %d %s" % (i, st, rd.codes() if st == 0 else ""))
            return 1
    cpu1, t1 = loop_cpu(pid), time.time()
    w = metric(mport, "master_load_waiting_requests")
    if w is None or w < parked:
        print("error: the load ended during the lookups (%s waiting)" % w)
        return 1
    print("loop_cpu_per_lookup_us %.1f wall_per_lookup_us %.1f loop_cpu_s %.3f wall_s %.3f" %
          ((cpu1 - cpu0) / lookups * 1e6, (t1 - t0) / lookups * 1e6, cpu1 - cpu0, t1 - t0),
          flush=True)
    for c in conns:
        c.sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))

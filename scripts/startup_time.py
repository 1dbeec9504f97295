#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time from mooncake_client start to its segment mounted, and to fully populated.

Usage: startup_time.py BIN SEGMENT MASTER_RPC_PORT MASTER_METRICS_PORT [LOG]

Starts BIN/mooncake_client with a SEGMENT (e.g. 16GB) segment against the master at 127.0.0.1
(already running), and polls the master's /metrics over one kept-alive connection every 2 ms
until master_total_capacity_bytes shows the whole segment ("mounted"), then every 20 ms until
segment_populated_bytes does ("populated"; a master without that metric has nothing to wait
for).  The port is picked before the clock starts, so the figures hold the client's own time
and at most one poll.  Prints "mounted S populated S" (seconds; populated "-" when not
reported) and stops the client.
"""
import http.client
import os
import re
import socket
import subprocess
import sys
import time


def size(s):
    v, u = re.match(r"(\d+)\s*([KMGT]?)B?$", s.upper()).groups()
    return int(v) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[u]


def metric(conn, name):
    """NAME's first value; 0 when the master describes it but has no value yet; None when the
    master does not know it."""
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    for line in body.splitlines():
        f = line.split()
        if len(f) >= 2 and (f[0] == name or f[0].startswith(name + "{")):
            return float(f[1])
    return 0.0 if ("# TYPE %s " % name) in body else None


def main():
    bindir, seg, rpc, mport = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    log = open(sys.argv[5] if len(sys.argv) > 5 else os.devnull, "w")
    total = size(seg)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    conn = http.client.HTTPConnection("127.0.0.1", mport, timeout=5)
    argv = [os.path.join(bindir, "mooncake_client"), "--host=127.0.0.1", "--port=%d" % port,
            "--master_server_address=127.0.0.1:%s" % rpc, "--metadata_server=P2PHANDSHAKE",
            "--global_segment_size=%s" % seg]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    mounted = populated = None
    try:
        while time.perf_counter() - t0 < 120 and p.poll() is None:
            if (metric(conn, "master_total_capacity_bytes") or 0) >= total:
                mounted = time.perf_counter() - t0
                break
            time.sleep(0.002)
        while mounted is not None and time.perf_counter() - t0 < 300 and p.poll() is None:
            v = metric(conn, "segment_populated_bytes")
            if v is None:
                break
            if v >= total:
                populated = time.perf_counter() - t0
                break
            time.sleep(0.02)
    finally:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    print("mounted %s populated %s" % ("%.3f" % mounted if mounted is not None else "-",
                                      "%.3f" % populated if populated is not None else "-"))
    return 0 if mounted is not None else 1


if __name__ == "__main__":
    sys.exit(main())

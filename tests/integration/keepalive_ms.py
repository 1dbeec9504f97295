#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Median milliseconds of the requests after the first on one kept-alive HTTP connection.

Usage: keepalive_ms.py PORT PATH [PUT_BYTES]
With PUT_BYTES, PATH is first given a value of that many bytes (PUT), so that the GETs carry a
large answer.  A server that sends its answers under Nagle's algorithm makes a keep-alive client
wait for its delayed acknowledgement (40 ms on Linux) on every request after the first; the
first request of a connection is not delayed, which is why it is left out.
"""
import http.client
import statistics
import sys
import time


def main():
    port, path = int(sys.argv[1]), sys.argv[2]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    if len(sys.argv) > 3:
        conn.request("PUT", path, body=b"v" * int(sys.argv[3]))
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            sys.exit("PUT %s: HTTP %d" % (path, resp.status))
    times = []
    for i in range(11):
        t0 = time.perf_counter()
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200 or not body:
            sys.exit("GET %s: HTTP %d, %d bytes" % (path, resp.status, len(body)))
        if i:
            times.append((time.perf_counter() - t0) * 1000)
    print("%.1f" % statistics.median(times))


main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Segment health and segment tokens, at the protocol level, against a running mooncake_master.

argv: RPC address, admin HTTP address, mode.

Mode "health": ReportTransferFailure (opcode 80).  The master runs with
--unhealthy_segment_backoff_sec=2 --unhealthy_segment_max_backoff_sec=8.  Two clients mount a segment each; a report marks one
unhealthy at once: no placements on it for the backoff, its replicas listed last, the metric
and the admin view say so; after the backoff it is placed on again (half-open), and a new
report soon after doubles the backoff.  Bad reports: an unknown name (-101), a reporter not in
good standing, more items than the bound, a malformed body.

Mode "token": segment tokens (16 bytes after the segments of MountSegment/ReMountSegment) and
dormant segments.  The master runs with --client_active_ttl_sec=1 --client_suspicion_ttl_sec=1.
A client that stops pinging goes Offline and its segment dormant; re-mounting it without the
token, with another token or as another client is refused and restores nothing; with its token
it is restored and its object is readable again.  Prints TAP lines.
"""
import json
import os
import struct
import sys
import time
import urllib.request

from mcrpc import Client, config, keys, s, segment, wait_until

ADDR, HTTP, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
n_checks = n_failed = 0


def ok(cond, what):
    global n_checks, n_failed
    n_checks += 1
    if not cond:
        n_failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n_checks, what), flush=True)


def http(path):
    with urllib.request.urlopen("http://%s%s" % (HTTP, path), timeout=5) as r:
        return r.read().decode()


def metric(name):
    for line in http("/metrics").splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == name:
            return int(f[1])
    return None


def seg_view(name):
    for sg in json.loads(http("/get_segments_detail"))["segments"]:
        if sg["segment_name"] == name:
            return sg
    return {}


def mount(c, name, base):
    seg = segment(c.seg_id, name, base, 64 << 20, name)
    st, _ = c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) + seg)
    return st


def report(c, items, client_id=None):
    body = (client_id or c.client_id) + struct.pack("<I", len(items))
    for name, code in items:
        body += s(name) + struct.pack("<i", code)
    st, r = c.call("REPORT_TRANSFER_FAILURE", body)
    return st, (r.codes() if st == 0 else None)


def place(c, prefix, n, replicas=1):
    """PutStart n keys; returns the segment names of their replicas, then revokes them."""
    names = ["%s/%d" % (prefix, i) for i in range(n)]
    body = c.client_id + config(replicas) + struct.pack("<I", n)
    for k in names:
        body += s(k) + struct.pack("<Q", 4096)
    st, r = c.call("BATCH_PUT_START", body)
    segs = [[rep["segment"] for rep in reps] for code, reps in r.replica_lists()]
    c.call("BATCH_PUT_REVOKE", c.client_id + b"\x04" + keys(names))
    return segs


def get_code(c, key):
    st, r = c.call("GET_REPLICA_LIST", keys([key]))
    r.take("Q")
    return r.replica_lists()[0][0]


def token_tests():
    a = Client(ADDR)
    tok, seg_id = os.urandom(16), os.urandom(16)
    seg = segment(seg_id, "127.0.0.1:2001", 0x30000000, 64 << 20, "127.0.0.1:2001")
    st, _ = a.call("MOUNT_SEGMENT", a.client_id + seg + tok[:8])
    ok(st == -600, "a token of the wrong length is -600")
    st, _ = a.call("MOUNT_SEGMENT", a.client_id + seg + tok)
    ok(st == 0, "MountSegment with a token")
    st, _ = a.call("REMOUNT_SEGMENT", a.client_id + struct.pack("<I", 1) + seg + tok)
    ok(st == 0, "ReMountSegment with the same token")
    st, _ = a.call("REMOUNT_SEGMENT", a.client_id + struct.pack("<I", 1) + seg + os.urandom(16))
    ok(st == -600, "ReMountSegment with another token is refused")
    body = a.client_id + config(1) + struct.pack("<I", 1) + s("tk") + struct.pack("<Q", 4096)
    st, r = a.call("PUT_START", body)
    ok(st == 0 and r.replica_lists()[0][0] == 0, "an object on it")
    a.call("PUT_END", a.client_id + b"\x04" + keys(["tk"]))
    ok(get_code(a, "tk") == 0, "readable")
    # Silent: Suspected after 1 s, Offline after 2 s (ticks of 1 s).
    wait_until(lambda: seg_view("127.0.0.1:2001").get("status") == "DORMANT", 10)
    v = seg_view("127.0.0.1:2001")
    ok(v.get("status") == "DORMANT" and v.get("client_state") == "offline",
       "silent, the client is Offline and its segment dormant (%s, %s)" %
       (v.get("status"), v.get("client_state")))
    ok(get_code(a, "tk") == -704, "its object reads -704 while dormant")
    st, r = a.call("PING", a.client_id)
    ok(r.take("qB")[1] == 2, "a ping of the Offline client answers NEED_REMOUNT")
    st, _ = a.call("REMOUNT_SEGMENT", a.client_id + struct.pack("<I", 1) + seg)
    ok(st == -600, "re-mounting the dormant segment without its token is refused")
    st, _ = a.call("REMOUNT_SEGMENT", a.client_id + struct.pack("<I", 1) + seg + os.urandom(16))
    ok(st == -600, "and with another token")
    other = Client(ADDR)
    st, _ = other.call("REMOUNT_SEGMENT", other.client_id + struct.pack("<I", 1) + seg + tok)
    ok(st == -600, "and by another client, even with the token")
    ok(get_code(a, "tk") == -704 and seg_view("127.0.0.1:2001").get("status") == "DORMANT",
       "nothing was restored")
    st, _ = a.call("REMOUNT_SEGMENT", a.client_id + struct.pack("<I", 1) + seg + tok)
    ok(st == 0, "re-mounting with its token succeeds")
    ok(get_code(a, "tk") == 0, "and its object is readable again")
    ok(metric("master_dormant_segments_restored_total") == 1, "one segment restored")
    st, r = a.call("PING", a.client_id)
    ok(r.take("qB")[1] == 1, "the client is in good standing again")

    # A dormant segment whose time ends is dropped like an unmount; its process gets an empty
    # segment back.  (The master runs with --dormant_segment_ttl_sec=5.)
    b = Client(ADDR)
    tok_b, seg_b_id = os.urandom(16), os.urandom(16)
    seg_b = segment(seg_b_id, "127.0.0.1:2002", 0x40000000, 64 << 20, "127.0.0.1:2002")
    st, _ = b.call("REMOUNT_SEGMENT", b.client_id + struct.pack("<I", 1) + seg_b + tok_b)
    body = b.client_id + config(1, preferred=["127.0.0.1:2002"]) + struct.pack("<I", 1) + \
        s("gone") + struct.pack("<Q", 4096)
    st2, r = b.call("PUT_START", body)
    reps = r.replica_lists()[0][1] if st2 == 0 else []
    b.call("PUT_END", b.client_id + b"\x04" + keys(["gone"]))
    ok(st == 0 and [x["segment"] for x in reps] == ["127.0.0.1:2002"],
       "a second client with an object on its segment")
    deadline = time.time() + 15
    while time.time() < deadline and metric("master_dormant_segments_expired_total") != 1:
        a.call("PING", a.client_id)
        time.sleep(0.5)
    ok(metric("master_dormant_segments_expired_total") == 1,
       "silent past Offline and the dormant time, its segment is dropped")
    ok(get_code(a, "gone") == -704 and seg_view("127.0.0.1:2002") == {},
       "its object and segment are gone")
    time.sleep(1)
    st, _ = b.call("REMOUNT_SEGMENT", b.client_id + struct.pack("<I", 1) + seg_b + tok_b)
    v = seg_view("127.0.0.1:2002")
    ok(st == 0 and v.get("status") == "OK" and v.get("replicas") == 0 and
       v.get("allocator_used_bytes") == 0,
       "re-mounted with its token after that, the segment comes back empty")
    ok(metric("master_dormant_segments_restored_total") == 1, "and nothing was restored")


def main():
    if MODE == "token":
        token_tests()
        print("1..%d" % n_checks)
        return 1 if n_failed else 0
    a, b = Client(ADDR), Client(ADDR)
    a.seg_id, b.seg_id = os.urandom(16), os.urandom(16)
    ok(mount(a, "127.0.0.1:1001", 0x10000000) == 0 and mount(b, "127.0.0.1:1002", 0x20000000) == 0,
       "two clients mount a segment each")
    # One object with a replica on each segment, readable.
    body = a.client_id + config(2) + struct.pack("<I", 1) + s("both") + struct.pack("<Q", 4096)
    st, r = a.call("PUT_START", body)
    ok(st == 0 and len(r.replica_lists()[0][1]) == 2, "an object with two replicas")
    a.call("PUT_END", a.client_id + b"\x04" + keys(["both"]))

    st, _ = report(a, [("127.0.0.1:1002", -800)], client_id=os.urandom(16))
    ok(st == -601, "a report from a client not in good standing is refused (%d)" % st)
    ok(metric("master_unhealthy_segments") == 0, "and marks nothing")

    st, codes = report(a, [("127.0.0.1:1002", -800), ("no-such:1", -800)])
    ok(st == 0 and codes == [0, -101], "report: mounted segment 0, unknown name -101 (%s)" % codes)
    ok(metric("master_unhealthy_segments") == 1, "master_unhealthy_segments is 1")
    ok(metric("master_transfer_failure_reports_total") == 2,
       "master_transfer_failure_reports_total counts both items")
    v = seg_view("127.0.0.1:1002")
    ok(v.get("health") == "unhealthy" and 0 < v.get("unhealthy_remaining_ms", 0) <= 2000,
       "the admin view shows it unhealthy for the backoff (%s)" % v.get("unhealthy_remaining_ms"))

    segs = place(a, "p", 40)
    on_b = sum(1 for x in segs if "127.0.0.1:1002" in x)
    ok(len(segs) == 40 and on_b == 0, "no placement on the unhealthy segment (%d of 40)" % on_b)
    segs = place(a, "q", 5, replicas=2)
    ok(all(x == ["127.0.0.1:1001"] for x in segs),
       "two-replica puts get only the healthy segment")
    st, r = b.call("GET_REPLICA_LIST", keys(["both"]))
    r.take("Q")
    lst = r.replica_lists()
    ok(st == 0 and [x["segment"] for x in lst[0][1]] == ["127.0.0.1:1001", "127.0.0.1:1002"],
       "GetReplicaList lists the unhealthy segment's replica last")

    wait_until(lambda: metric("master_unhealthy_segments") == 0, 10)  # the 2 s backoff ends
    ok(metric("master_unhealthy_segments") == 0, "after the backoff it is eligible again")
    segs = place(a, "h", 40)
    on_b = sum(1 for x in segs if "127.0.0.1:1002" in x)
    ok(on_b > 0, "placements reach it again after the backoff (%d of 40)" % on_b)

    st, codes = report(b, [("127.0.0.1:1002", -800)])
    v = seg_view("127.0.0.1:1002")
    ok(st == 0 and v.get("unhealthy_remaining_ms", 0) > 2500,
       "failing again right after, the backoff doubles (%s ms)" % v.get("unhealthy_remaining_ms"))
    st, codes = report(b, [("127.0.0.1:1002", -800)])
    v = seg_view("127.0.0.1:1002")
    ok(v.get("unhealthy_remaining_ms", 0) <= 4000,
       "a report during the backoff does not extend it")

    # Bounds and malformed bodies: refused, nothing marked.
    st, _ = report(a, [("127.0.0.1:1001", -800)] * 1025)
    ok(st == -600, "more than 1024 items is -600")
    st, _ = a.call("REPORT_TRANSFER_FAILURE", a.client_id + struct.pack("<I", 1) + s("x"))
    ok(st == -600, "a truncated item is -600")
    ok(seg_view("127.0.0.1:1001").get("health") == "healthy", "the other segment stayed healthy")

    # A write to a failing segment may still be on its way in a socket: the revoke that follows
    # a report parks the replica's bytes instead of handing them to the next put placed there.
    pref = config(1, preferred=("127.0.0.1:1001",))
    st, r = a.call("PUT_START", a.client_id + pref + struct.pack("<I", 1) + s("late") +
                   struct.pack("<Q", 4096))
    reps = r.replica_lists()[0][1] if st == 0 else []
    ok(len(reps) == 1 and reps[0]["segment"] == "127.0.0.1:1001", "a put on the healthy segment")
    parked = metric("master_put_start_discard_cnt")
    report(a, [("127.0.0.1:1001", -800)])
    a.call("PUT_REVOKE", a.client_id + b"\x04" + keys(["late"]))
    ok(metric("master_put_start_discard_cnt") == parked + 1,
       "its revoke after a report parks the bytes")
    time.sleep(2.3)
    names = ["again/%d" % i for i in range(20)]
    body = a.client_id + pref + struct.pack("<I", len(names))
    for k in names:
        body += s(k) + struct.pack("<Q", 4096)
    st, r = a.call("BATCH_PUT_START", body)
    addrs = [rep["addr"] for code, lst in r.replica_lists() for rep in lst
             if rep["segment"] == "127.0.0.1:1001"]
    ok(st == 0 and len(addrs) == 20 and reps and reps[0]["addr"] not in addrs,
       "puts after the backoff do not get the parked bytes")
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())

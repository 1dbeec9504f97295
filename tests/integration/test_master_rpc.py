#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Protocol-level tests of a running mooncake_master (address in argv[1]).

Exercises the operations' semantics (puts, gets, removes, leases, batches, segments and their
error codes, as upstream's master answers them) and the master's handling of hostile
input through raw frames, independent of the client library.  Prints TAP lines; exit 0 on pass.
"""
import os
import socket
import struct
import sys
import time

from mcrpc import Client, HDR, MAGIC, config, keys, s, segment

ADDR = sys.argv[1]
n_checks = 0
n_failed = 0


def ok(cond, what):
    global n_checks, n_failed
    n_checks += 1
    if not cond:
        n_failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n_checks, what), flush=True)


def put_start(c, names, size=1000, cfg=None):
    body = c.client_id + (cfg or config()) + struct.pack("<I", len(names))
    for n in names:
        body += s(n) + struct.pack("<Q", size if isinstance(size, int) else size[n])
    st, r = c.call("BATCH_PUT_START" if len(names) > 1 else "PUT_START", body)
    return st, r.replica_lists()


def put_end(c, names, op="PUT_END"):
    st, r = c.call(op, c.client_id + b"\x04" + keys(names))
    return r.codes()


def mount(c, name, size, base=0x10000000, endpoint=None):
    seg_id = os.urandom(16)
    seg = segment(seg_id, name, base, size, endpoint or name)
    st, _ = c.call("MOUNT_SEGMENT", c.client_id + seg)
    st2, _ = c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) + seg)
    return st or st2, seg_id


def exist(c, names):
    return c.call("BATCH_EXIST_KEY", keys(names))[1].codes()


def closes_after(raw):
    host, port = ADDR.rsplit(":", 1)
    sk = socket.create_connection((host, int(port)), timeout=5)
    sk.sendall(raw)
    try:
        while True:
            if not sk.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    finally:
        sk.close()


def main():
    a = Client(ADDR)
    b = Client(ADDR)
    st, r = a.call("PING", a.client_id)
    ok(st == 0 and r.take("qB")[1] == 2, "Ping of an unknown client answers NEED_REMOUNT")
    st, seg_a = mount(a, "hostA:1", 64 << 20, endpoint="127.0.0.1:1001")
    ok(st == 0, "MountSegment + ReMountSegment of 64 MiB")
    st, r = a.call("PING", a.client_id)
    ok(r.take("qB")[1] == 1, "after ReMountSegment Ping answers OK")
    st, _ = a.call("MOUNT_SEGMENT", a.client_id + segment(os.urandom(16), "x:1", 0, 100, "x:1"))
    ok(st == -600, "a segment at address 0 is refused with -600")
    st, seg_b = mount(b, "hostB:1", 64 << 20, base=0x20000000, endpoint="127.0.0.1:1002")

    # The master's clock in Ping, ReportTransferFailure, request deadlines.
    st, r = a.call("PING", a.client_id)
    _, _, wall = r.take("qBQ")
    ok(st == 0 and abs(wall - time.time() * 1000) < 5000, "Ping carries the master's wall clock")
    # Segment population figures ride on Ping, after the master said it takes them.
    st, r = a.call("PING", a.client_id)
    ok(st == 0 and r.take("qBQB")[3] == 1, "Ping's answer says it takes population figures")
    figs = struct.pack("<I", 2) + seg_a + struct.pack("<Q", 12345) + os.urandom(16) + \
        struct.pack("<Q", 1)
    st, r = a.call("PING", a.client_id + figs)
    ok(st == 0 and r.take("qB")[1] == 1,
       "a Ping with population figures (one for a segment the master does not know) is answered")
    st, _ = a.call("PING", a.client_id + struct.pack("<I", 5) + seg_a)
    ok(st == -600, "a Ping whose figures are cut short is refused with -600")
    st, _ = a.call("PING", a.client_id + struct.pack("<I", 1) + seg_a + struct.pack("<Q", 1) + b"x")
    ok(st == -600, "a Ping with bytes after its figures is refused with -600")
    st, _ = a.call("PING", a.client_id + struct.pack("<I", 0xffffffff))
    ok(st == -600, "a Ping claiming 2^32-1 figures is refused with -600")
    # The reported segment is one no later check places on: a report keeps it unhealthy a while.
    r_cli = Client(ADDR)
    _, seg_r = mount(r_cli, "hostR:1", 1 << 20, base=0x70000000, endpoint="127.0.0.1:1009")
    st, r = a.call("REPORT_TRANSFER_FAILURE", a.client_id + struct.pack("<I", 2) + s("hostR:1") +
                   struct.pack("<i", -800) + s("nope:9") + struct.pack("<i", -800))
    ok(st == 0 and r.take("Iii") == (2, 0, -101),
       "ReportTransferFailure: 0 for a known segment, -101 for an unknown one")
    r_cli.call("UNMOUNT_SEGMENT", r_cli.client_id + seg_r)
    now = int(time.time() * 1000)
    st, _ = a.call("PUT_START", a.client_id + config() + struct.pack("<I", 1) + s("dl_old") +
                   struct.pack("<Q", 100), deadline=(now - 10000) & 0xffffffff)
    st2, r = b.call("GET_REPLICA_LIST", keys(["dl_old"]))
    r.take("Q")
    ok(st == -901 and r.replica_lists()[0][0] == -704,
       "a PutStart read 10 s past its deadline is answered -901 and not executed")
    st, r = a.call("PUT_START", a.client_id + config() + struct.pack("<I", 1) + s("dl_new") +
                   struct.pack("<Q", 100), deadline=(now + 10000) & 0xffffffff)
    ok(st == 0 and r.take("Ii") == (1, 0), "a PutStart within its deadline is executed")
    ok(put_end(a, ["dl_new"], op="PUT_REVOKE") == [0], "and revoked")

    # Put, exist, get, leases.
    st, res = put_start(a, ["k1"])
    ok(st == 0 and res[0][0] == 0 and res[0][1][0]["status"] == 2, "PutStart gives a PROCESSING replica")
    ok(exist(b, ["k1"]) == [0], "an object being written does not exist yet")
    st, r = b.call("GET_REPLICA_LIST", keys(["k1"]))
    r.take("Q")
    ok(r.replica_lists()[0][0] == -703, "GetReplicaList before PutEnd gives -703")
    ok(put_end(b, ["k1"]) == [-601], "PutEnd by another client gives -601 ILLEGAL_CLIENT")
    ok(put_end(a, ["k1"]) == [0], "PutEnd by the writer")
    ok(put_end(a, ["k1"]) == [0], "PutEnd again is idempotent")
    ok(exist(b, ["k1", "nope"]) == [1, 0], "BatchExistKey 1/0")
    st, r = b.call("BATCH_GET_REPLICA_LIST", keys(["k1", "nope"]))
    ttl = r.take("Q")
    lists = r.replica_lists()
    rep = lists[0][1][0] if lists[0][1] else {}
    ok(ttl > 0 and lists[0][0] == 0 and rep.get("status") == 3 and rep.get("size") == 1000 and
       lists[1][0] == -704, "GetReplicaList: COMPLETE replica with size; missing key -704")
    ok(rep.get("endpoint", "").startswith("127.0.0.1:100") and rep.get("addr", 0) >= 0x10000000,
       "replica carries the segment's endpoint and an address inside it")
    st, r = b.call("REMOVE", b"\x00" + keys(["k1"]))
    ok(r.codes() == [-706], "Remove during the lease gives -706")
    st, res = put_start(b, ["k1"])
    ok(res[0][0] == -705, "PutStart of an existing key gives -705")
    st, r = b.call("REMOVE", b"\x01" + keys(["k1"]))
    ok(r.codes() == [0], "forced Remove succeeds")
    ok(exist(a, ["k1"]) == [0], "removed object is gone")

    # Revoke.
    put_start(a, ["r1"])
    st, r = a.call("PUT_REVOKE", a.client_id + b"\x04" + keys(["r1"]))
    ok(r.codes() == [0] and exist(a, ["r1"]) == [0], "PutRevoke frees an unfinished put")
    st, r = a.call("PUT_REVOKE", a.client_id + b"\x04" + keys(["r1"]))
    ok(r.codes() == [-704], "PutRevoke of a missing key gives -704")

    # Replicas on distinct segment names; preferred segment; best effort.
    st, res = put_start(a, ["two"], cfg=config(replica_num=2))
    segs = sorted(x["segment"] for x in res[0][1])
    ok(res[0][0] == 0 and segs == ["hostA:1", "hostB:1"], "replica_num=2 lands on two segment names")
    st, res = put_start(a, ["three"], cfg=config(replica_num=3))
    ok(res[0][0] == 0 and len(res[0][1]) == 2, "replica_num=3 with two segments is best effort (2)")
    st, res = put_start(a, ["pref"], cfg=config(preferred=["hostB:1"]))
    ok(res[0][1][0]["segment"] == "hostB:1", "preferred segment is honoured")
    put_end(a, ["two", "three", "pref"], "BATCH_PUT_END")

    # Space: -200 when nothing fits; batch items fail independently.
    st, res = put_start(a, ["huge"], size=1 << 40)
    ok(res[0][0] == -200, "an object larger than every segment gives -200")
    st, res = put_start(a, ["b1", "b2", ""], size={"b1": 10, "b2": 1 << 40, "": 5})
    ok([x[0] for x in res] == [0, -200, -600], "batch PutStart: per-item results 0/-200/-600")
    put_end(a, ["b1"])

    # Regex operations and RemoveAll.
    for i in range(10):
        put_start(a, ["rx/%d" % i])
        put_end(a, ["rx/%d" % i])
    st, r = a.call("GET_REPLICA_LIST_BY_REGEX", s("^rx/[0-4]$"))
    r.take("Q")
    n = r.take("I")
    ok(st == 0 and n == 5, "GetReplicaListByRegex matches 5 keys")
    st, r = a.call("REMOVE_BY_REGEX", b"\x00" + s("^rx/"))
    ok(r.take("q") == 5, "RemoveByRegex without force skips the 5 leased keys")
    st, r = a.call("REMOVE_BY_REGEX", b"\x01" + s("^rx/"))
    ok(r.take("q") == 5, "forced RemoveByRegex removes the rest")
    st, _ = a.call("REMOVE_BY_REGEX", b"\x01" + s("(unclosed"))
    ok(st == -600, "a bad regex gives -600")

    # Unmounting a segment drops its replicas; objects keep their other replicas.
    st, _ = b.call("UNMOUNT_SEGMENT", b.client_id + seg_b)
    ok(st == 0, "UnmountSegment")
    st, r = a.call("BATCH_GET_REPLICA_LIST", keys(["two", "pref"]))
    r.take("Q")
    lists = r.replica_lists()
    ok(lists[0][0] == 0 and [x["segment"] for x in lists[0][1]] == ["hostA:1"] and lists[1][0] == -704,
       "after unmount: the 2-replica object keeps one replica, the other object is gone")
    st, _ = b.call("UNMOUNT_SEGMENT", b.client_id + seg_b)
    ok(st == 0, "UnmountSegment of an unknown segment is idempotent")

    # Pipelining: many requests in flight, replies matched by req_id.
    ids = [a.send("EXIST_KEY", keys(["b1"]), req_id=1000 + i) for i in range(500)]
    got = {}
    for _ in ids:
        rid, op, st, body = a.recv()
        got[rid] = (st, body)
    ok(sorted(got) == sorted(ids) and all(v[0] == 0 for v in got.values()),
       "500 pipelined requests on one connection are all answered")

    # RemoveAll.
    st, r = a.call("REMOVE_ALL", b"\x01")
    cnt = r.take("q")
    ok(st == 0 and cnt >= 2, "RemoveAll(force) removes everything (%d)" % cnt)
    ok(exist(a, ["two", "b1"]) == [0, 0], "nothing left")

    # Hostile input.
    ok(closes_after(b"\xa5" * 64), "bad magic closes the connection")
    ok(closes_after(HDR.pack(MAGIC, 9, 0, 43, 0, 0, 1)), "unknown version closes the connection")
    ok(closes_after(HDR.pack(MAGIC, 1, 0, 43, 1 << 30, 0, 1)), "oversized frame closes the connection")
    st, _ = a.call("BATCH_EXIST_KEY", struct.pack("<I", 1000000))
    ok(st == -600, "a count larger than the body gives -600 and the connection stays")
    st, _ = a.call("PUT_START", a.client_id + config() + struct.pack("<I", 1) + s("k") + b"\x01")
    ok(st == -600, "a truncated PutStart gives -600")
    st, _ = a.call("EXIST_KEY", keys(["k"]) + b"junk")
    ok(st == -600, "trailing bytes give -600")
    st, _ = a.call("EXIST_KEY", struct.pack("<I", 1) + struct.pack("<I", 100000) + b"x" * 100000)
    ok(st == -600, "a key over the length bound gives -600")
    for i in range(20):
        closes_after(os.urandom(200 + i * 37))
    half = socket.create_connection(tuple([ADDR.rsplit(":", 1)[0], int(ADDR.rsplit(":", 1)[1])]))
    half.sendall(HDR.pack(MAGIC, 1, 0, 43, 100, 0, 1) + b"abc")
    half.close()
    st, r = a.call("SERVICE_READY")
    ok(st == 0 and r.str().startswith(b"mooncake"), "after garbage from 22 connections the master still answers")
    a.close()
    b.close()
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


def upsert_start(c, name, size):
    body = c.client_id + config() + struct.pack("<I", 1) + s(name) + struct.pack("<Q", size)
    st, r = c.call("UPSERT_START", body)
    return r.replica_lists()[0]


def get_list(c, name):
    st, r = c.call("GET_REPLICA_LIST", keys([name]))
    r.take("Q")
    return r.replica_lists()[0]


def extra():
    """Replica placement on distinct hosts, and upsert semantics."""
    a = Client(ADDR)
    # Names of their own: main()'s clients may still hold hostA:1 (a name is one client's).
    mount(a, "hostA:11", 16 << 20, base=0x10000000, endpoint="127.0.0.1:2001")
    mount(a, "hostA:12", 16 << 20, base=0x20000000, endpoint="127.0.0.1:2002")
    mount(a, "hostC:11", 16 << 20, base=0x30000000, endpoint="127.0.0.1:2003")
    distinct = 0
    for i in range(20):
        st, res = put_start(a, ["dh/%d" % i], cfg=config(replica_num=2))
        hosts = sorted(x["segment"].split(":")[0] for x in res[0][1])
        distinct += hosts == ["hostA", "hostC"]
    ok(distinct == 20, "two replicas land on two hosts when there are enough (%d of 20)" % distinct)
    st, res = put_start(a, ["dh/three"], cfg=config(replica_num=3))
    ok(len(res[0][1]) == 3, "with more replicas than hosts, distinct segment names are used")

    code, reps = upsert_start(a, "up", 1000)
    ok(code == 0 and len(reps) == 1, "UpsertStart of a missing key allocates like PutStart")
    ok(put_end(a, ["up"], "UPSERT_END") == [0], "UpsertEnd")
    first = get_list(a, "up")[1][0]["addr"]
    code, reps = upsert_start(a, "up", 1000)
    ok(code == 0 and reps[0]["addr"] == first and reps[0]["status"] == 2,
       "UpsertStart of the same size rewrites in place (same buffer, PROCESSING)")
    ok(get_list(a, "up")[0] == -703, "while being rewritten the object is not readable")
    ok(put_end(a, ["up"], "UPSERT_END") == [0] and get_list(a, "up")[1][0]["size"] == 1000,
       "UpsertEnd makes it readable again")
    code, reps = upsert_start(a, "up", 5000)
    ok(code == 0 and reps[0]["size"] == 5000, "UpsertStart of a new size allocates a new buffer")
    put_end(a, ["up"], "UPSERT_END")
    ok(get_list(a, "up")[1][0]["size"] == 5000, "readers see the new size")
    put_start(a, ["pre"])
    code, reps = upsert_start(a, "pre", 2000)
    ok(code == 0 and reps[0]["size"] == 2000, "an upsert preempts an unfinished put at once")
    st, r = a.call("PUT_START", a.client_id + config() + struct.pack("<I", 1) + s("up") +
                   struct.pack("<Q", 10))
    ok(r.replica_lists()[0][0] == -705, "a plain put still does not overwrite")
    # Soft pin with a lifetime over --max_kv_soft_pin_ttl is refused.
    body = (a.client_id + struct.pack("<IBBBQBI", 1, 0, 1, 1, 10 ** 12, 0, 0) + s("") +
            struct.pack("<I", 0) + struct.pack("<I", 1) + s("sp") + struct.pack("<Q", 100))
    st, r = a.call("PUT_START", body)
    ok(r.replica_lists()[0][0] == -600, "a soft-pin TTL over max_kv_soft_pin_ttl gives -600")
    body = (a.client_id + struct.pack("<IBBBQBI", 1, 0, 1, 1, 60000, 0, 0) + s("") +
            struct.pack("<I", 0) + struct.pack("<I", 1) + s("sp") + struct.pack("<Q", 100))
    st, r = a.call("PUT_START", body)
    ok(r.replica_lists()[0][0] == 0, "a soft pin within the maximum is accepted")
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


def zombie():
    """Master started with --put_start_discard_timeout_sec=1 --put_start_release_timeout_sec=3."""
    a = Client(ADDR)
    b = Client(ADDR)
    mount(a, "z:1", 1 << 20, endpoint="127.0.0.1:1")
    size = 600 << 10
    st, res = put_start(a, ["zk"], size=size)
    ok(res[0][0] == 0, "a writer starts a put and never finishes it")
    first_addr = res[0][1][0]["addr"]
    st, res = put_start(b, ["zk"], size=size)
    ok(res[0][0] == -705, "another writer is refused while the put is young")
    time.sleep(1.3)
    st, res = put_start(b, ["zk"], size=size)
    ok(res[0][0] == -200, "after the discard timeout the put is preempted, but its bytes stay "
       "reserved (the 1 MiB segment cannot hold a second copy: -200)")
    time.sleep(2.2)
    st, res = put_start(b, ["zk"], size=size)
    ok(res[0][0] == 0 and res[0][1][0]["addr"] == first_addr,
       "after the release timeout the space is reused")
    ok(put_end(a, ["zk"]) == [-601], "the dead writer's late PutEnd is refused")
    ok(put_end(b, ["zk"]) == [0], "the new writer completes")
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


def mount_one(c, seg_id, name, base, size, endpoint="127.0.0.1:4000", op="MOUNT_SEGMENT"):
    seg = segment(seg_id, name, base, size, endpoint)
    if op == "REMOUNT_SEGMENT":
        return c.call(op, c.client_id + struct.pack("<I", 1) + seg)[0]
    return c.call(op, c.client_id + seg)[0]


def mounts():
    """MountSegment refuses impossible segments with upstream's codes; the master keeps serving."""
    a = Client(ADDR)
    b = Client(ADDR)
    rid = os.urandom
    base = 0x7f0000000000
    ok(mount_one(a, rid(16), "m:1", base, 0) == -600, "size 0 is refused with -600")
    ok(mount_one(a, rid(16), "m:1", base, 72000000000000000) == -600,
       "a 7.2e16-byte segment is refused with -600 (past any address space)")
    ok(mount_one(a, rid(16), "m:1", 2 ** 64 - 4096, 8192) == -600,
       "base + size wrapping past 2^64 is refused with -600")
    ok(mount_one(a, rid(16), "m:1", 2 ** 48 - 4096, 8192) == -600,
       "a segment ending past 2^48 is refused with -600")
    ok(mount_one(a, rid(16), "m:1", 0, 4096) == -600, "base 0 is refused with -600")
    ok(mount_one(a, rid(16), "m:1", base, 4096, endpoint="notanendpoint") == -600,
       "an endpoint that is not host:port is refused with -600")
    ok(mount_one(a, rid(16), "", base, 4096) == -600, "an empty name is refused with -600")
    seg_a = rid(16)
    ok(mount_one(a, seg_a, "ma:1", 0x10000000, 1 << 20) == 0, "a good mount works")
    ok(mount_one(a, seg_a, "ma:1", 0x10000000, 1 << 20) == 0,
       "the same client mounting the same segment again succeeds")
    ok(mount_one(a, seg_a, "ma:1", 0x10000000, 1 << 20, op="REMOUNT_SEGMENT") == 0,
       "ReMountSegment of its own segment succeeds")
    ok(mount_one(a, seg_a, "ma:1", 0x10000000, 2 << 20) == -600,
       "the same id with another size is refused with -600")
    ok(mount_one(b, seg_a, "mb:1", 0x10000000, 1 << 20) == -102,
       "a segment id mounted by another client is refused with -102")
    ok(mount_one(b, rid(16), "ma:1", 0x20000000, 1 << 20) == -102,
       "a segment name mounted by another client is refused with -102")
    ok(mount_one(a, rid(16), "ma:1", 0x10080000, 1 << 20) == -600,
       "a segment overlapping the same client's other segment is refused with -600")
    ok(mount_one(a, rid(16), "ma:1", 0x10100000, 1 << 20) == 0,
       "an adjacent segment of the same client and name is accepted")
    st, r = a.call("PING", a.client_id)
    ok(st == 0, "the master still answers Ping")
    ok(mount_one(b, rid(16), "mb:1", 0x10000000, 1 << 20, op="REMOUNT_SEGMENT") == 0,
       "another client's good ReMountSegment works (same addresses, its own memory)")
    st, res = put_start(b, ["mk"], size=4096)
    ok(res[0][0] == 0 and put_end(b, ["mk"]) == [0], "a put on the good segments completes")
    st, rd = b.call("GET_ALL_SEGMENTS")
    names = []
    if st == 0:
        names = [rd.str() for _ in range(rd.take("I"))]
        ok(rd.o == len(rd.b), "GetAllSegments: nothing after the names")
    ok(st == 0 and names.count(b"ma:1") == 1 and names.count(b"mb:1") == 1,
       "GetAllSegments lists each mounted name once (ma:1 has two segments): %r" % names)
    st, _ = Client(ADDR).call("GET_ALL_SEGMENTS", b"x")
    ok(st == -600, "GetAllSegments with trailing bytes is refused with -600 (%d)" % st)
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "main"
    sys.exit({"main": main, "zombie": zombie, "extra": extra, "mounts": mounts}[mode]())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Object checksums on the master, over the wire (doc/protocol.md, "Object checksums").

argv: master address, mode, state file.  "main" runs against a master started with
--enable_offload --default_kv_lease_ttl=300 --persist_path=...; "reload" checks what the
restarted master (same --persist_path) recovered.  A fake client drives the protocol and never
moves bytes (the master never sees them).  Prints TAP lines; exit 0 on pass.
"""
import json
import os
import struct
import sys
import time
import urllib.request

from mcrpc import Client, config, keys, s, segment

ADDR = sys.argv[1]
MODE = sys.argv[2]
STATE = sys.argv[3]
OFFLOAD, REGISTER = 0, 3
ALL = 4
n_checks = 0
n_failed = 0


def ok(cond, what):
    global n_checks, n_failed
    n_checks += 1
    if not cond:
        n_failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n_checks, what), flush=True)


def section(items):
    """The checksum section: one (u8 present, u64 value) per item; None is absent."""
    return b"".join(struct.pack("<BQ", 0, 0) if v is None else struct.pack("<BQ", 1, v)
                    for v in items)


def read_section(r, n):
    """The trailing checksum section of n items (None where absent), or "missing"."""
    if r.o == len(r.b):
        return "missing"
    out = []
    for _ in range(n):
        present, value = r.take("BQ")
        out.append(value if present else None)
    return out if r.o == len(r.b) else "trailing bytes"


def put_start(c, name, size, replicas=1):
    body = (c.client_id + config(replica_num=replicas) + struct.pack("<I", 1) + s(name) +
            struct.pack("<Q", size))
    st, r = c.call("PUT_START", body)
    return r.replica_lists()[0][0] if st == 0 else st


def put_end(c, names, sums, op="BATCH_PUT_END"):
    body = c.client_id + struct.pack("<B", ALL) + keys(names)
    if sums is not None:
        body += section(sums)
    st, r = c.call(op, body)
    return r.codes() if st == 0 else st


def get_lists(c, names):
    """[(code, replicas)], [checksum or None] (or the section's trouble as a string)."""
    st, r = c.call("BATCH_GET_REPLICA_LIST" if len(names) > 1 else "GET_REPLICA_LIST",
                   keys(names))
    if st:
        return st, None
    r.take("Q")
    lists = r.replica_lists()
    return lists, read_section(r, len(names))


def report(c, key, rid, expected, computed):
    body = (c.client_id + struct.pack("<I", 1) + s(key) +
            struct.pack("<QQQ", rid, expected, computed))
    st, r = c.call("REPORT_CHECKSUM_MISMATCH", body)
    return r.codes()[0] if st == 0 else st


def heartbeat(c, disk, features=None):
    body = c.client_id + disk + struct.pack("<IQ", 100, 0)
    if features is not None:
        body += struct.pack("<B", features)
    st, r = c.call("OFFLOAD_HEARTBEAT", body)
    if st:
        return st, [], None
    tasks = []
    for _ in range(r.take("I")):
        kind = r.take("B")
        key = r.str().decode()
        size, src = r.take("QQ")
        r.str()
        dst, gen = r.take("QQ")
        tasks.append(dict(kind=kind, key=key, size=size, src=src, gen=gen))
    if features is None:
        return 0, tasks, ("none" if r.o == len(r.b) else "trailing bytes")
    return 0, tasks, read_section(r, len(tasks))


def notify(c, disk, items, sums=None):
    body = c.client_id + disk + struct.pack("<I", len(items))
    for kind, key, size, addr, result, gen in items:
        body += struct.pack("<B", kind) + s(key) + struct.pack("<QQiQ", size, addr, result, gen)
    if sums is not None:
        body += section(sums)
    st, r = c.call("NOTIFY_OFFLOAD", body)
    return r.codes() if st == 0 else st


def http(path):
    port = os.environ["MC_METRICS_PORT"]
    try:
        return urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=5).read()
    except urllib.error.HTTPError as e:
        return e.read()


def metric(name):
    for line in http("/metrics").decode().splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    return None


def main():
    c = Client(ADDR)
    disk = os.urandom(16)
    segs = [segment(os.urandom(16), "fake:%d" % i, 0x10000000 * (i + 1), 16 << 20,
                    "127.0.0.1:%d" % (3000 + i)) for i in (1, 2)]
    for seg in segs:
        c.call("MOUNT_SEGMENT", c.client_id + seg)
    c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 2) + b"".join(segs))
    st, _ = c.call("MOUNT_LOCAL_DISK", c.client_id + disk + s("fake:1") + s("127.0.0.1:3001") +
                   struct.pack("<Q", 64 << 20))
    ok(st == 0, "a client with two memory segments and an SSD area")
    st, tasks, rest = heartbeat(c, disk)
    ok(st == 0 and tasks == [] and rest == "none",
       "a heartbeat without the feature byte gets the old answer, nothing after the tasks")

    names = ["ck/1", "ck/0", "ck/none"]
    sums = [0xDEADBEEF01234567, 0, None]
    ok(all(put_start(c, n, 4096) == 0 for n in names), "three puts started")
    ok(put_end(c, names, sums) == [0, 0, 0], "BatchPutEnd with checksums (one absent)")
    ok(put_start(c, "ck/old", 4096) == 0 and put_end(c, ["ck/old"], None, "PUT_END") == [0],
       "a PutEnd in the old format is accepted")
    lists, got = get_lists(c, names + ["ck/old", "ck/nope"])
    ok(got == sums + [None, None],
       "BatchGetReplicaList returns each key's checksum, absent where none was given (%s)" %
       (got,))
    ok([code for code, _ in lists] == [0, 0, 0, 0, -704], "with the items' codes")
    q = json.loads(http("/query_key?key=ck/1"))
    ok(q.get("object_checksum") == "deadbeef01234567",
       "/query_key shows object_checksum (%s)" % q.get("object_checksum"))
    q = json.loads(http("/query_key?key=ck/none"))
    ok(q.get("success") and "object_checksum" not in q, "and none for an object without one")
    q = json.loads(http("/batch_query_keys?keys=ck/0,ck/none"))
    ok(q["data"]["ck/0"].get("object_checksum") == "0000000000000000" and
       "object_checksum" not in q["data"]["ck/none"], "/batch_query_keys shows them per key")

    # --enable_offload: PutEnd queued offloads; a heartbeat asking for checksums gets them.
    st, tasks, got = heartbeat(c, disk, 1)
    by_key = dict(zip([t["key"] for t in tasks], got if isinstance(got, list) else []))
    ok(st == 0 and len(tasks) == 4 and all(t["kind"] == OFFLOAD for t in tasks),
       "the heartbeat hands out the four offloads")
    ok(by_key == {"ck/1": sums[0], "ck/0": 0, "ck/none": None, "ck/old": None},
       "each task carries its object's checksum (%s)" % (got,))
    items = [(OFFLOAD, t["key"], t["size"], (1 << 62) + (i << 36), 0, t["gen"])
             for i, t in enumerate(tasks)]
    ok(notify(c, disk, items) == [0, 0, 0, 0], "the offloads succeed")
    gen1 = [t["gen"] for t in tasks if t["key"] == "ck/1"][0]

    # REGISTER: the copy's checksum; a new key takes it, a different one is refused.
    res = notify(c, disk, [(REGISTER, "ck/reg", 777, (1 << 62) + (20 << 36), 0, 0),
                           (REGISTER, "ck/1", 4096, (1 << 62) + (21 << 36), 0, gen1)],
                 [0x5555, 0x1111])
    ok(res == [0, -801], "REGISTER: a new key is taken with its checksum, a copy whose "
       "checksum is not the object's is refused with -801 (%s)" % (res,))
    lists, got = get_lists(c, ["ck/reg", "ck/1"])
    ok(got == [0x5555, sums[0]], "ck/reg has the registered checksum, ck/1 kept its own")

    # A corrupt replica: dropped, the object stays with the other one; the last one: removed.
    ok(put_start(c, "ck/two", 8192, replicas=2) == 0 and
       put_end(c, ["ck/two"], [0x1234], "PUT_END") == [0], "ck/two put on two segments")
    lists, got = get_lists(c, ["ck/two"])
    reps = [r for r in lists[0][1] if r["type"] == 0]
    ok(len(reps) == 2 and got == [0x1234], "two memory replicas, checksum 0x1234")
    ok(report(c, "ck/two", reps[0]["id"], 0x9999, 0x4321) == -300,
       "a report naming another checksum than the object's changes nothing (-300)")
    ok(report(Client(ADDR), "ck/two", reps[0]["id"], 0x1234, 0x4321) == -601,
       "a report from a client not in good standing is refused (-601)")
    ok(report(c, "ck/two", reps[0]["id"], 0x1234, 0x4321) == 0, "the first replica is reported")
    lists, got = get_lists(c, ["ck/two"])
    left = [r for r in lists[0][1] if r["type"] == 0]
    ok(lists[0][0] == 0 and len(left) == 1 and left[0]["id"] == reps[1]["id"] and
       got == [0x1234], "the object stays with the other replica and its checksum")
    ok(metric("master_checksum_mismatch_total") == 1, "master_checksum_mismatch_total is 1")
    ok(report(c, "ck/two", reps[1]["id"], 0x1234, 0x4321) == 0, "the last replica is reported")
    lists, got = get_lists(c, ["ck/two"])
    ok(lists[0][0] == -704, "the object is removed")
    ok(metric("master_checksum_mismatch_total") == 2 and
       metric("master_checksum_mismatch_objects_removed_total") == 1,
       "two mismatches, one object removed")
    ok(metric("master_report_checksum_mismatch_requests_total") == 4,
       "the reports are counted under the operation's name")
    time.sleep(0.4)     # the commit of the last changes
    with open(STATE, "wb") as f:
        f.write(c.client_id + disk)


def reload():
    with open(STATE, "rb") as f:
        raw = f.read()
    c = Client(ADDR, client_id=raw[:16])
    lists, got = get_lists(c, ["ck/1", "ck/0", "ck/none", "ck/reg"])
    ok([code for code, _ in lists] == [0, 0, 0, 0],
       "the restarted master has the objects (%s)" % ([code for code, _ in lists],))
    ok(got == [0xDEADBEEF01234567, 0, None, 0x5555],
       "and their checksums, exactly, absent where there was none (%s)" % (got,))
    q = json.loads(http("/query_key?key=ck/1"))
    ok(q.get("object_checksum") == "deadbeef01234567", "/query_key shows it after the restart")


if __name__ == "__main__":
    main() if MODE == "main" else reload()
    print("1..%d" % n_checks)
    sys.exit(1 if n_failed else 0)

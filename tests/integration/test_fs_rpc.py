#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Protocol-level tests of the shared-directory tier (--root_fs_dir, doc/protocol.md).

argv: master address, root_fs_dir/cluster_id, quota in bytes.  The master runs with
--default_kv_lease_ttl=300.  A fake client drives PutStart/PutEnd/PutRevoke by replica type,
GetStorageConfig, FS_EVICT under a lease and FsHeartbeat deletions (the master never sees bytes).
Prints TAP lines; exit 0 on pass.
"""
import os
import struct
import sys
import time

from mcrpc import Client, config, keys, s, segment

ADDR, FSDIR, QUOTA = sys.argv[1], sys.argv[2], int(sys.argv[3])
MEMORY, DISK, ALL = 0, 1, 4
PROCESSING, COMPLETE = 2, 3
n_checks = n_failed = 0


def ok(cond, what):
    global n_checks, n_failed
    n_checks += 1
    n_failed += not cond
    print(("ok" if cond else "not ok") + " %d - %s" % (n_checks, what), flush=True)


def put_start(c, name, size=4096):
    body = c.client_id + config() + struct.pack("<I", 1) + s(name) + struct.pack("<Q", size)
    st, r = c.call("PUT_START", body)
    return r.replica_lists()[0]


def finish(c, op, name, rtype):
    st, r = c.call(op, c.client_id + bytes([rtype]) + keys([name]))
    return st if st else r.codes()[0]


def get_list(c, name):
    st, r = c.call("GET_REPLICA_LIST", keys([name]))
    r.take("Q")
    return r.replica_lists()[0]


def beat(c, done=()):
    st, r = c.call("FS_HEARTBEAT", c.client_id + struct.pack("<I", len(done)) +
                   b"".join(struct.pack("<Q", d) for d in done))
    if st:
        return st, 0, 0, []
    used, quota = r.take("QQ")
    drops = []
    for _ in range(r.take("I")):
        did = r.take("Q")
        drops.append((did, r.str().decode()))
    return 0, used, quota, drops


def evict(c, names):
    st, r = c.call("FS_EVICT", c.client_id + keys(names))
    return st if st else r.codes()


def main():
    c = Client(ADDR)
    seg_id = os.urandom(16)
    seg = segment(seg_id, "fake:1", 0x10000000, 1 << 20, "127.0.0.1:3001")
    c.call("MOUNT_SEGMENT", c.client_id + seg)
    c.call("REMOUNT_SEGMENT", c.client_id + struct.pack("<I", 1) + seg)

    st, r = c.call("GET_STORAGE_CONFIG")
    d = r.str().decode()
    ev, q = r.take("BQ")
    ok(st == 0 and d == FSDIR and ev == 1 and q == QUOTA,
       "GetStorageConfig: %s, enable_disk_eviction %d, quota_bytes %d" % (d, ev, q))

    code, reps = put_start(c, "r/a")
    types = sorted((x["type"], x["status"]) for x in reps)
    ok(code == 0 and types == [(MEMORY, PROCESSING), (DISK, PROCESSING)],
       "PutStart gives a MEMORY and a DISK replica, both PROCESSING")
    disk = [x for x in reps if x["type"] == DISK][0]
    ok(disk["path"].startswith(FSDIR + "/") and disk["path"].endswith("/r_a"),
       "the DISK replica names <fsdir>/<d1>/<d2>/r_a (%s)" % disk["path"])
    ok(finish(c, "PUT_REVOKE", "r/a", MEMORY) == 0, "PutRevoke(MEMORY) revokes the memory only")
    code, reps = get_list(c, "r/a")
    ok(code == -703, "a PROCESSING DISK replica is never handed to a reader (%d)" % code)
    ok(finish(c, "PUT_END", "r/a", DISK) == 0, "PutEnd(DISK)")
    code, reps = get_list(c, "r/a")
    ok(code == 0 and [x["type"] for x in reps] == [DISK] and reps[0]["status"] == COMPLETE,
       "after PutEnd(DISK) the reader gets the COMPLETE DISK replica")

    code, reps = put_start(c, "r/b")
    ok(finish(c, "PUT_END", "r/b", MEMORY) == 0, "PutEnd(MEMORY) with the DISK write pending")
    code, reps = get_list(c, "r/b")
    ok(code == 0 and [x["type"] for x in reps] == [MEMORY],
       "the object is readable from memory while its DISK replica is PROCESSING")
    ok(finish(c, "PUT_REVOKE", "r/b", DISK) == 0, "a failed file write revokes the DISK replica")
    code, reps = get_list(c, "r/b")
    ok(code == 0 and [x["type"] for x in reps] == [MEMORY], "... and only the DISK replica")
    ok(finish(c, "PUT_REVOKE", "r/b", DISK) == -700, "a second PutRevoke(DISK) is INVALID_WRITE")

    # FS_EVICT honours the read lease taken by the GetReplicaList of r/a above.
    get_list(c, "r/a")
    ok(evict(c, ["r/a", "r/none"]) == [-706, -704],
       "FS_EVICT under a reader's lease: OBJECT_HAS_LEASE; unknown key: OBJECT_NOT_FOUND")
    time.sleep(0.4)
    ok(evict(c, ["r/a"]) == [0], "FS_EVICT once the lease ended: 0 (the client deletes the file)")
    code, _ = get_list(c, "r/a")
    ok(code == -704, "an object whose only replica was evicted from the directory is gone")
    st, used, quota, drops = beat(c)
    ok(st == 0 and drops == [] and quota == QUOTA,
       "an evicted file is not queued for deletion again (the evicting client deletes it)")

    # Remove under a lease: the file is queued, handed out only once the lease ended.
    code, reps = put_start(c, "r/c")
    finish(c, "PUT_END", "r/c", ALL)
    st0, used, _, _ = beat(c)
    ok(st0 == 0 and used == 4096, "FsHeartbeat reports the bytes of the DISK replicas (%d)" % used)
    get_list(c, "r/c")
    st, r = c.call("REMOVE", b"\x01" + keys(["r/c"]))
    ok(st == 0 and r.codes() == [0], "forced Remove of r/c while a reader holds a lease")
    st, used2, _, drops = beat(c)
    ok(drops == [] and used2 == used - 4096,
       "its file is not handed out for deletion while the lease lasts")
    code, reps = put_start(c, "r/c")
    ok(code == 0 and [x["type"] for x in reps] == [MEMORY],
       "a put of the key while its old file awaits deletion gets no DISK replica")
    finish(c, "PUT_REVOKE", "r/c", ALL)
    time.sleep(0.4)
    st, _, _, drops = beat(c)
    ok(len(drops) == 1 and drops[0][1].endswith("/r_c"),
       "after the lease the heartbeat hands out the file to delete (%s)" % drops)
    st, _, _, again = beat(c, [drops[0][0]] if drops else [])
    st, _, _, again2 = beat(c)
    ok(again == [] and again2 == [], "an acknowledged deletion is forgotten")
    code, reps = put_start(c, "r/c")
    ok(code == 0 and sorted(x["type"] for x in reps) == [MEMORY, DISK],
       "once deleted, a new put of the key gets a DISK replica again")
    # A DISK write never ended (writer gone or --put_start_release_timeout_sec=1 passed).
    code, reps = put_start(c, "r/d")
    finish(c, "PUT_END", "r/d", MEMORY)
    st, r = c.call("REMOVE", b"\x00" + keys(["r/d"]))
    ok(r.codes() == [-703], "Remove while the DISK write may still end: REPLICA_IS_NOT_READY")
    time.sleep(1.2)
    st, r = c.call("REMOVE", b"\x00" + keys(["r/d"]))
    ok(r.codes() == [0], "Remove after put_start_release_timeout_sec reaps the abandoned DISK "
       "replica and removes the object")
    ok(finish(c, "PUT_END", "r/d", DISK) == -704, "a late PutEnd(DISK) finds no object")
    st, _, _, drops = beat(c)
    ok([p for _, p in drops if p.endswith("/r_d")] != [],
       "the abandoned replica's file (if any) is handed out for deletion")
    beat(c, [d for d, _ in drops])
    code, reps = put_start(c, "r/e")
    finish(c, "PUT_END", "r/e", MEMORY)
    finish(c, "PUT_REVOKE", "r/e", DISK)
    ok(finish(c, "PUT_END", "r/e", DISK) == -700,
       "PutEnd(DISK) with no DISK replica left is INVALID_WRITE (the writer deletes its file)")
    st, r = c.call("FS_HEARTBEAT", c.client_id + struct.pack("<I", 5))
    ok(st == -600, "a short FsHeartbeat is INVALID_PARAMS")
    st, r = c.call("PUT_END", c.client_id + b"\x07" + keys(["r/c"]))
    ok(st == -600, "PutEnd with an unknown replica_type is INVALID_PARAMS")
    c.call("UNMOUNT_SEGMENT", c.client_id + seg_id)	# real clients follow
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Copy and move tasks against real daemons (test_tasks.sh).

A master with --persist_path, two mooncake_client processes (B, C) and this process as a store
client with its own segment (A), every object written with MOONCAKE_STORE_CHECKSUM=1:
- create_copy_task copies an object from A to B, create_move_task moves it from A to C: the
  owners carry them out, query_task follows them to SUCCESS, the bytes read back intact;
- refusals: a missing key, an unknown target or source, an unknown task id, and removing an
  object a task works on (-708); a copy to targets that already hold it succeeds, as upstream's;
- a corrupt source (A's bytes changed behind the master's back) is caught by its checksum: the
  bad replica is dropped and the copy is made from the good one;
- a task whose owner is stopped stays PENDING across a kill -9 and restart of the master, and
  finishes once its owner runs again.
"""
import ctypes
import os
import sys

import mc_cluster
from mc_cluster import ok, wait_for

os.environ["MOONCAKE_STORE_CHECKSUM"] = "1"
from mooncake.store import ReplicateConfig, TaskStatus, TaskType  # noqa: E402

c = mc_cluster.Cluster()
db = os.path.join(c.tmp, "master.db")
try:
    ok(c.start_master("--persist_path=" + db, "--client_active_ttl_sec=60",
                      "--default_kv_lease_ttl=200"), "master up")
    B = c.start_client("B")
    C = c.start_client("C")
    ok(B and C, "two mooncake_clients up")
    a = mc_cluster.store(c)
    A = a.get_hostname()

    def on(key):
        return sorted(r.segment_name for r in a.get_replica_desc(key))

    def done(tid, secs=20):
        def finished():
            resp, code = a.query_task(tid)
            return resp if code == 0 and resp.status in (TaskStatus.SUCCESS,
                                                          TaskStatus.FAILED) else None
        return wait_for("task %s to finish" % (tid,), finished, secs)

    def put_on(key, data, seg):
        cfg = ReplicateConfig()
        cfg.preferred_segment = seg
        return a.put(key, data, cfg)

    data = os.urandom(1 << 20)
    ok(put_on("k1", data, A) == 0 and on("k1") == [A], "k1 is on A only")
    tid, code = a.create_copy_task("k1", [B])
    ok(code == 0 and isinstance(tid, tuple) and len(tid) == 2 and tid != (0, 0),
       "create_copy_task gives a (first, second) id: %r, %d" % (tid, code))
    resp = done(tid)
    ok(resp is not None and resp.status == TaskStatus.SUCCESS and
       resp.type == TaskType.REPLICA_COPY and resp.id == tid and
       resp.last_updated_at_ms_epoch >= resp.created_at_ms_epoch > 0,
       "the copy task succeeded: %r" % (resp,))
    ok(on("k1") == sorted([A, B]), "k1 is on A and B: %r" % (on("k1"),))
    ok(a.get("k1") == data, "k1 reads back intact")

    tid, code = a.create_move_task("k1", A, C)
    resp = done(tid) if code == 0 else None
    ok(resp is not None and resp.status == TaskStatus.SUCCESS and
       resp.type == TaskType.REPLICA_MOVE, "the move task succeeded: %r" % (resp,))
    ok(wait_for("A's replica to go", lambda: on("k1") == sorted([B, C])),
       "k1 moved from A to C: %r" % (on("k1"),))
    ok(a.get("k1") == data, "k1 reads back intact after the move")

    # Refusals, with upstream's codes.
    ok(a.create_copy_task("nokey", [B])[1] == -704, "a copy of a missing key: OBJECT_NOT_FOUND")
    ok(a.create_copy_task("k1", ["127.0.0.1:1"])[1] == -600,
       "a copy to an unknown segment: INVALID_PARAMS")
    ok(a.create_copy_task("nokey", ["127.0.0.1:1"])[1] == -704,
       "a missing key to an unknown segment: OBJECT_NOT_FOUND (the key is checked first)")
    ok(a.create_move_task("k1", "127.0.0.1:1", A)[1] == -600,
       "a move from an unknown segment: INVALID_PARAMS")
    ok(a.create_move_task("k1", B, B)[1] == -600,
       "a move to its own source: INVALID_PARAMS")
    ok(a.create_move_task("k1", A, B)[1] == -600,
       "a move from a segment without a replica: INVALID_PARAMS")
    tid, code = a.create_copy_task("k1", [B, C])
    resp = done(tid) if code == 0 else None
    ok(resp is not None and resp.status == TaskStatus.SUCCESS,
       "a copy to segments that hold it already is accepted and succeeds: %r %r" % (code, resp))
    ok(on("k1") == sorted([B, C]), "and adds no replica: %r" % (on("k1"),))
    ok(a.create_copy_task("k1", [])[1] == -600, "a copy without targets: INVALID_PARAMS")
    ok(a.query_task((1, 2)) == (None, -1400), "an unknown task: TASK_NOT_FOUND")
    ok(a.get("k1") == data, "k1 unchanged by the refusals")

    # A corrupt source: the copy is made from the good replica.
    data3 = os.urandom(256 << 10)
    ok(put_on("k3", data3, A) == 0, "k3 put on A")
    tid, code = a.create_copy_task("k3", [B])
    ok(code == 0 and done(tid).status == TaskStatus.SUCCESS, "k3 copied to B")
    mine = [r for r in a.get_replica_desc("k3") if r.segment_name == A]
    addr = mine[0].get_memory_descriptor().buffer_descriptor.buffer_address
    ctypes.memset(addr, 0xAB, 64)   # A's copy rots (its memory is this process's)
    bad_before = c.metric("master_checksum_mismatch_total") or 0
    tid, code = a.create_copy_task("k3", [C])
    resp = done(tid) if code == 0 else None
    ok(resp is not None and resp.status == TaskStatus.SUCCESS,
       "a copy from a rotten source still succeeds from the good one: %r" % (resp,))
    ok((c.metric("master_checksum_mismatch_total") or 0) > bad_before,
       "the rotten source replica was reported")
    ok(on("k3") == sorted([B, C]), "the rotten replica was dropped: %r" % (on("k3"),))
    ok(a.get("k3") == data3, "k3 reads back intact")

    # A task survives a master restart while its owner is stopped.
    data2 = os.urandom(128 << 10)
    ok(put_on("k2", data2, B) == 0 and on("k2") == [B], "k2 is on B only")
    c.pause("B")
    tid, code = a.create_copy_task("k2", [C])
    resp, qc = a.query_task(tid)
    ok(code == 0 and qc == 0 and resp.status == TaskStatus.PENDING,
       "the copy waits for its stopped owner: %r" % (resp,))
    ok(a.remove("k2", force=True) == -708,
       "an object with a task cannot be removed, even forced (-708)")
    c.kill("master")
    ok(c.start_master(), "master restarted from --persist_path")
    resp = wait_for("the task after the restart",
                    lambda: (lambda r: r[0] if r[1] == 0 else None)(a.query_task(tid)))
    ok(resp is not None and resp.status == TaskStatus.PENDING,
       "the pending task survived the restart: %r" % (resp,))
    c.resume("B")
    resp = done(tid, 30)
    ok(resp is not None and resp.status == TaskStatus.SUCCESS,
       "it finished once its owner ran again: %r" % (resp,))
    ok(on("k2") == sorted([B, C]) and a.get("k2") == data2, "k2 is on B and C, intact")
    ok(a.remove("k2", force=True) == 0, "k2 can be removed once the task ended")
    a.close()
finally:
    c.stop()
print("1..%d" % mc_cluster.count)
sys.exit(1 if mc_cluster.failures else 0)

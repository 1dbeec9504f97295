#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Drain jobs against real daemons (test_drain.sh).

A master with --offload_on_evict and --persist_path; client D contributes 16 MB of memory and
an SSD area; this process writes 40 objects of 1 MiB into D (with checksums), so eviction
demotes the older ones to D's SSD: some objects live in D's memory, some only on its SSD.
Clients B and C then join and D is drained through the HTTP API: memory replicas are moved,
SSD-only objects promoted elsewhere and their SSD copies dropped (upstream skips those, #2817).
The job succeeds, D is DRAINED, D is stopped (its segments unmounted), and every object still
reads back intact.  Then mooncake_ctl drains B with --wait, and the API's refusals are checked:
unknown segments and jobs, bad bodies and ids, a segment drained twice, cancelling a finished
job.
"""
import os
import subprocess
import sys

import mc_cluster
from mc_cluster import ok, wait_for

os.environ["MOONCAKE_STORE_CHECKSUM"] = "1"
from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: E402

c = mc_cluster.Cluster()
try:
    ok(c.start_master("--persist_path=" + os.path.join(c.tmp, "master.db"),
                      "--offload_on_evict", "--client_active_ttl_sec=60",
                      "--default_kv_lease_ttl=200"), "master up")
    ssd = os.path.join(c.tmp, "ssd")
    os.mkdir(ssd)
    D = c.start_client("D", "16MB", "--enable_offload", "--ssd_offload_path=" + ssd,
                       "--ssd_offload_size_limit=256MB")
    ok(D is not None, "client D with memory and an SSD area up")
    a = MooncakeDistributedStore()
    ok(a.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", c.master) == 0,
       "a writer without a segment")
    data = {"d/%02d" % i: os.urandom(1 << 20) for i in range(40)}
    cfg = ReplicateConfig()
    cfg.preferred_segment = D

    def put(key):
        return wait_for("put %s" % key, lambda: a.put(key, data[key], cfg) == 0, 30)
    ok(all(put(k) for k in sorted(data)), "40 objects of 1 MiB written into D")

    def kinds():
        mem = disk = 0
        for k in data:
            reps = a.get_replica_desc(k)
            mem += any(r.is_memory_replica() for r in reps)
            disk += all(r.is_local_disk_replica() for r in reps) and len(reps) > 0
        return mem, disk
    mem, ssd_only = kinds()
    ok(mem > 0 and ssd_only > 0,
       "some objects are in D's memory (%d), some only on its SSD (%d)" % (mem, ssd_only))

    B = c.start_client("B", "64MB")
    C = c.start_client("C", "64MB")
    st, body = c.http("/api/v1/drain_jobs", "POST", {"segments": [D], "max_concurrency": 8})
    ok(st == 200 and body.get("success") and body.get("status") == "CREATED" and
       "-" in body.get("job_id", ""), "POST /api/v1/drain_jobs creates a job: %r" % (body,))
    job = body.get("job_id", "")
    st, seg = c.http("/api/v1/segments/status?segment=" + D)
    ok(st == 200 and seg.get("status_name") in ("DRAINING", "DRAINED"),
       "D is DRAINING: %r" % (seg,))
    other = ReplicateConfig()
    other.preferred_segment = D
    ok(a.put("late", b"x" * 4096, other) == 0 and
       all(r.segment_name != D for r in a.get_replica_desc("late")),
       "a put while D drains does not land on D")

    def finished():
        st, q = c.http("/api/v1/drain_jobs/query?job_id=" + job)
        return q if st == 200 and q.get("status_name") in ("SUCCEEDED", "FAILED") else None
    q = wait_for("the drain job to end", finished, 60)
    ok(q is not None and q["status_name"] == "SUCCEEDED" and q["status"] == 3 and
       q["type_name"] == "DRAIN" and q["segments"] == [D] and
       q["succeeded_units"] >= 40 and q["migrated_bytes"] >= 40 << 20,
       "the job SUCCEEDED with every object moved: %r" % (q,))
    st, seg = c.http("/api/v1/segments/status?segment=" + D)
    ok(st == 200 and seg.get("status_name") == "DRAINED" and seg.get("status") == 3,
       "D is DRAINED: %r" % (seg,))
    ok(all(all(r.segment_name != D for r in a.get_replica_desc(k)) for k in data),
       "no replica is left on D, memory or SSD")
    c.kill("D", mc_cluster.signal.SIGTERM)
    ok(all(a.get(k) == data[k] for k in sorted(data)),
       "after D is stopped every object reads back intact")
    st, seg = c.http("/api/v1/segments/status?segment=" + D)
    ok(st == 404 and seg.get("error_code") == -101,
       "a segment that is gone: 404 SEGMENT_NOT_FOUND: %d %r" % (st, seg))

    # mooncake_ctl drain --wait moves B's objects to C.
    ctl = [os.path.join(mc_cluster.BUILD, "mooncake_ctl"),
           "--master=127.0.0.1:%d" % c.metrics_port]
    r = subprocess.run(ctl + ["drain", B, "--wait", "60"], capture_output=True, text=True)
    ok(r.returncode == 0 and "SUCCEEDED" in r.stdout,
       "mooncake_ctl drain --wait: %s%s" % (r.stdout.strip(), r.stderr.strip()))
    ok(all(all(x.segment_name == C for x in a.get_replica_desc(k)) for k in data),
       "every object is on C now")
    ok(all(a.get(k) == data[k] for k in sorted(data)), "and reads back intact")
    jid = r.stdout.split()[1].rstrip(":") if r.returncode == 0 else "0-0"
    r = subprocess.run(ctl + ["drain", "--query", jid], capture_output=True, text=True)
    ok(r.returncode == 0 and "SUCCEEDED" in r.stdout, "mooncake_ctl drain --query")

    # Refusals, with upstream's statuses and codes.
    def refused(path, method, body, status, code):
        st, b = c.http(path, method, body)
        return ok(st == status and isinstance(b, dict) and b.get("success") is False and
                  b.get("error_code") == code,
                  "%s %s: %d %s (%r)" % (method, path, status, code, b))
    refused("/api/v1/drain_jobs", "POST", {"segments": ["127.0.0.1:1"]}, 404, -101)
    refused("/api/v1/drain_jobs", "POST", {"segments": []}, 400, -600)
    refused("/api/v1/drain_jobs", "POST", b"{not json", 400, -600)
    refused("/api/v1/drain_jobs", "POST", {"segments": [C], "max_concurrency": 0}, 400, -600)
    refused("/api/v1/drain_jobs", "POST", {"segments": [C], "target_segments": [C]}, 400,
            -600)
    refused("/api/v1/drain_jobs", "POST", {"segments": [B]}, 409, -1010)
    refused("/api/v1/drain_jobs/query?job_id=1-2", "GET", None, 404, -1402)
    refused("/api/v1/drain_jobs/query?job_id=bogus", "GET", None, 400, -600)
    refused("/api/v1/drain_jobs/cancel?job_id=" + jid, "POST", None, 409, -1010)
    refused("/api/v1/segments/status", "GET", None, 400, -600)
    ok(all(a.get(k) == data[k] for k in sorted(data)), "the refusals changed nothing")
    a.close()
finally:
    c.stop()
print("1..%d" % mc_cluster.count)
sys.exit(1 if mc_cluster.failures else 0)

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Multi-tenancy together with the disk tiers, against real daemons (test_tenants_tiers.sh).

SSD tier: a master with --enable_multi_tenants (tenant-a and tenant-b, 12 MiB each),
--offload_on_evict and --promotion_on_hit; client D contributes 32 MiB of memory and an SSD
area.  Each tenant writes the same 16 keys of 1 MiB with bytes of its own, so each tenant's
eviction demotes its older objects to D's SSD:
- both tenants' copies of one key live on the SSD side by side, and every key reads back the
  bytes of the tenant that reads it;
- quotas count memory replicas only (as upstream's): each tenant holds 16 MiB of objects, its
  charged bytes stay within its 12 MiB quota, and promotions into memory are charged and held to
  it too;
- a master restarted without state adopts D's SSD copies again, each into its tenant.
Shared-directory tier (--root_fs_dir): the two tenants' files of one key are two files, under
"_tenants/<hex of the tenant's name>/", each holding its tenant's bytes.
"""
import glob
import os
import struct
import sys

import mc_cluster
from mc_cluster import ok, wait_for

from mooncake.store import MooncakeDistributedStore, ReplicateConfig  # noqa: E402

MB = 1 << 20
N = 16
c = mc_cluster.Cluster()
stores = []


def tenant(name):
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MB, "tcp", "", c.master, tenant_id=name)
    stores.append(s)
    return s if rc == 0 else None


def quota(name):
    st, q = c.http("/api/v1/tenant_quotas?tenant_id=" + name)
    return q.get("data", {}) if st == 200 and isinstance(q, dict) else {}


try:
    policy = os.path.join(c.tmp, "tenant_quotas.yaml")
    with open(policy, "w") as f:
        f.write("version: 1\ntenants:\n  - name: tenant-a\n    quota: 12MB\n"
                "  - name: tenant-b\n    quota: 12MB\n")
    flags = ["--enable_multi_tenants", "--tenant_quota_connector_uri=" + policy,
             "--offload_on_evict", "--promotion_on_hit", "--default_kv_lease_ttl=200",
             "--client_active_ttl_sec=60", "--eviction_ratio=0.2"]
    ok(c.start_master(*flags), "master up: tenants with the SSD tier (no longer refused)")
    ssd = os.path.join(c.tmp, "ssd")
    os.mkdir(ssd)
    D = c.start_client("D", "32MB", "--enable_offload", "--ssd_offload_path=" + ssd,
                       "--ssd_offload_size_limit=256MB")
    ok(D is not None, "client D with memory and an SSD area up")
    a, b = tenant("tenant-a"), tenant("tenant-b")
    ok(a and b, "store clients for tenant-a and tenant-b")
    keys = ["k/%02d" % i for i in range(N)]
    data = {s: {k: os.urandom(MB) for k in keys} for s in ("a", "b")}
    cfg = ReplicateConfig()
    cfg.preferred_segment = D

    def put(s, name, k):
        return wait_for("%s put %s" % (name, k), lambda: s.put(k, data[name][k], cfg) == 0, 30)
    ok(all(put(a, "a", k) and put(b, "b", k) for k in keys),
       "both tenants wrote the same %d keys of 1 MiB, past their 12 MiB quotas" % N)

    def ssd_only(s):
        n = 0
        for k in keys:
            reps = s.get_replica_desc(k)
            n += len(reps) > 0 and all(r.is_local_disk_replica() for r in reps)
        return n
    ok(wait_for("SSD-only objects of both tenants", lambda: ssd_only(a) > 0 and ssd_only(b) > 0,
                30), "each tenant's eviction demoted some of its objects to the SSD: %d, %d" %
       (ssd_only(a), ssd_only(b)))
    ok(len(glob.glob(os.path.join(ssd, "*.mco"))) >= ssd_only(a) + ssd_only(b),
       "the two tenants' copies are separate files")
    ok(all(a.get(k) == data["a"][k] for k in keys) and
       all(b.get(k) == data["b"][k] for k in keys),
       "every key reads back the bytes of the tenant reading it, from memory or SSD")
    for _ in range(3):      # repeated reads of SSD-only objects ask for promotions
        for k in keys:
            a.get(k)
            b.get(k)
    qa, qb = quota("tenant-a"), quota("tenant-b")
    ok(0 < qa.get("charged_bytes", -1) <= 12 * MB and 0 < qb.get("charged_bytes", -1) <= 12 * MB,
       "memory replicas only are charged, promotions included, within the quota: %r %r" %
       (qa.get("charged_bytes"), qb.get("charged_bytes")))
    ok(all(a.get(k) == data["a"][k] for k in keys) and
       all(b.get(k) == data["b"][k] for k in keys), "still each tenant's own bytes after that")
    def names_on_ssd():
        """The names the SSD area's object files hold (header: u32 key_len at 24, key at 64)."""
        names = []
        for p in glob.glob(os.path.join(ssd, "*.mco")):
            try:
                with open(p, "rb") as f:
                    head = f.read(64 + 4096)
                names.append(head[64:64 + struct.unpack_from("<I", head, 24)[0]])
            except (OSError, struct.error):
                pass
        return names
    ok(b"tenant-a\0k/01" in names_on_ssd() and b"tenant-b\0k/01" in names_on_ssd(),
       "on the SSD area the copies are named tenant\\0key")
    ok(b.remove("k/00", force=True) == 0 and a.get("k/00") == data["a"]["k/00"],
       "tenant-b's remove of a key leaves tenant-a's copy")
    ok(wait_for("D to delete tenant-b's copies of k/00",
                lambda: b"tenant-b\0k/00" not in names_on_ssd(), 30) and
       (b"tenant-a\0k/00" in names_on_ssd() or
        any(r.is_memory_replica() for r in a.get_replica_desc("k/00"))),
       "D deleted tenant-b's SSD copy only (the master's DROP names it by tenant)")

    # A master restarted without state adopts the SSD copies, each into its tenant.
    on_ssd = {s: [k for k in keys if k != "k/00" or s == "a"] for s in ("a", "b")}
    gone = {(n, k) for n, s in (("a", a), ("b", b)) for k in keys
            if any(r.is_memory_replica() for r in s.get_replica_desc(k))}
    for s in stores:
        s.close()
    stores.clear()
    c.kill("master")
    ok(c.start_master(*flags), "master restarted without --persist_path")
    ok(c.wait_log("D", "objects registered", 2, 30), "D registered its SSD objects again")
    a, b = tenant("tenant-a"), tenant("tenant-b")
    ok(a and b, "the tenants' stores again")
    back = [(n, k) for n, s in (("a", a), ("b", b)) for k in on_ssd[n]
            if (n, k) not in gone and s.is_exist(k) == 1]
    ok(len(back) > 0 and all((a if n == "a" else b).get(k) == data[n][k] for n, k in back),
       "%d SSD-only objects came back, each into its tenant with its bytes" % len(back))
    ok(b.is_exist("k/00") == 0, "the key tenant-b removed did not come back for it")
    qa = quota("tenant-a")
    ok(qa.get("charged_bytes", -1) <= 12 * MB,
       "the adopted SSD copies are not charged (only promotions of what was read): %r" %
       (qa.get("charged_bytes"),))
    for s in stores:
        s.close()
    stores.clear()
    c.kill("D")
    c.kill("master")

    # The shared-directory tier.
    fsdir = os.path.join(c.tmp, "fs")
    os.mkdir(fsdir)
    ok(c.start_master("--enable_multi_tenants", "--tenant_quota_connector_uri=" + policy,
                      "--root_fs_dir=" + fsdir, "--cluster_id=tt"),
       "master up: tenants with the shared-directory tier")
    ok(c.start_client("E", "32MB") is not None, "client E contributes memory")
    a, b = tenant("tenant-a"), tenant("tenant-b")
    va, vb = os.urandom(MB), os.urandom(MB)
    ok(a.put("same", va) == 0 and b.put("same", vb) == 0, "both tenants put key 'same'")

    def files():
        return sorted(glob.glob(os.path.join(fsdir, "tt", "_tenants", "*", "*", "*", "same")))
    ok(wait_for("two files", lambda: len(files()) == 2, 20), "two files: %r" % (files(),))
    want = {"tenant-a".encode().hex(): va, "tenant-b".encode().hex(): vb}
    got = {}
    for p in files():
        with open(p, "rb") as f:
            got[p.split(os.sep)[-4]] = f.read()
    ok(got == want, "each under its tenant's directory, with its tenant's bytes")
finally:
    for s in stores:
        s.close()
    c.stop()
print("1..%d" % mc_cluster.count)
sys.exit(1 if mc_cluster.failures else 0)

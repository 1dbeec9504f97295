#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Multi-tenancy against real daemons (test_tenants.sh).

A master with --enable_multi_tenants, a YAML quota policy file (tenant-a 8 MiB, tenant-b
8 MiB, tenant-e 4 MiB) and --persist_path; one mooncake_client contributes memory; this process
is a store client per tenant (setup(tenant_id=...)):
- namespaces: two tenants put the same key with different bytes and each reads its own; one
  tenant's remove, remove_all and is_exist never see the other's objects;
- quotas: puts past a tenant's quota are refused with TENANT_QUOTA_EXCEEDED (-1700), a tenant
  without a policy (and the default tenant) with TENANT_NOT_REGISTERED (-1701);
- the admin API: list, query, PUT and DELETE of policies with upstream's bodies and statuses
  (409 TENANT_NOT_EMPTY, 404 TENANT_NOT_REGISTERED, 400 for bad input), written back to the
  policy file; per-tenant metrics;
- per-tenant eviction at --tenant_eviction_high_watermark_ratio takes only that tenant's
  objects;
- a master restart keeps every tenant's objects in its namespace, and their charges.
"""
import os
import sys

import mc_cluster
from mc_cluster import ok, wait_for

from mooncake.store import MooncakeDistributedStore  # noqa: E402

MB = 1 << 20
c = mc_cluster.Cluster()
stores = []
try:
    policy = os.path.join(c.tmp, "tenant_quotas.yaml")
    with open(policy, "w") as f:
        f.write("version: 1\n\ntenants:\n  - name: tenant-a\n    quota: 8MB\n"
                "  - name: tenant-b\n    quota: 8388608\n  - name: tenant-e\n    quota: 4MB\n")
    ok(c.start_master("--enable_multi_tenants", "--tenant_quota_connector_uri=" + policy,
                      "--persist_path=" + os.path.join(c.tmp, "master.db"),
                      "--default_kv_lease_ttl=100", "--client_active_ttl_sec=60"),
       "master up in multi-tenant mode")
    ok(c.start_client("S", "64MB") is not None, "a mooncake_client contributes 64 MiB")

    def tenant(name):
        s = MooncakeDistributedStore()
        rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MB, "tcp", "", c.master,
                     tenant_id=name)
        stores.append(s)
        return s if rc == 0 else None
    a, b, e, u, d = (tenant("tenant-a"), tenant("tenant-b"), tenant("tenant-e"),
                     tenant("nobody"), tenant("default"))
    ok(all((a, b, e, u, d)), "store clients for tenant-a, tenant-b, tenant-e, nobody, default")
    bad = MooncakeDistributedStore()
    ok(bad.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MB, "tcp", "", c.master,
                 tenant_id="_reserved") == -600, "a tenant name starting with '_' is refused")

    va, vb = os.urandom(MB), os.urandom(MB)
    ok(a.put("k", va) == 0 and b.put("k", vb) == 0, "tenant-a and tenant-b put the same key")
    ok(a.get("k") == va and b.get("k") == vb, "each reads its own bytes")
    ok(a.put("only-a", b"x" * 4096) == 0 and b.is_exist("only-a") == 0,
       "tenant-b does not see tenant-a's key")
    ok(b.remove("only-a", force=True) == -704 and a.is_exist("only-a") == 1,
       "tenant-b cannot remove tenant-a's key")

    # Quotas.
    codes = [b.put("b/%d" % i, os.urandom(MB)) for i in range(3)]
    ok(codes == [0, 0, 0], "tenant-b holds 4 MiB of its 8")
    big = os.urandom(6 * MB)
    ok(b.put("big", big) == -1700,
       "a 6 MiB object past tenant-b's quota is refused with TENANT_QUOTA_EXCEEDED")
    ok(u.put("u", b"x" * 4096) == -1701, "a tenant without a policy: TENANT_NOT_REGISTERED")
    ok(d.put("dflt", b"x" * 4096) == -1701,
       "the default tenant without a policy: TENANT_NOT_REGISTERED")
    st, q = c.http("/api/v1/tenant_quotas?tenant_id=tenant-b")
    data = q.get("data", {}) if isinstance(q, dict) else {}
    ok(st == 200 and q.get("success") and data.get("tenant_id") == "tenant-b" and
       data.get("requested_quota_bytes") == 8 * MB and data.get("effective_quota_bytes") == 8 * MB
       and data.get("charged_bytes") >= 4 * MB and data.get("has_explicit_policy") is True
       and data.get("admission_closed") is False,
       "GET /api/v1/tenant_quotas?tenant_id=tenant-b: %r" % (q,))
    ok(c.metric('mooncake_tenant_quota_charged_bytes{tenant_id="tenant-b"}') >= 4 * MB,
       "per-tenant metrics: charged bytes")
    ok((c.metric('mooncake_tenant_quota_reject_total{tenant_id="tenant-b",'
                 'reason="quota_exceeded"}') or 0) >= 1, "per-tenant metrics: refusals")

    # remove_all of one tenant leaves the others.
    ok(a.remove_all(force=True) == 2 and a.is_exist("k") == 0 and b.get("k") == vb,
       "tenant-a's remove_all removes its 2 objects only")

    # The admin API.
    st, q = c.http("/api/v1/tenant_quotas")
    names = sorted(t["tenant_id"] for t in q.get("data", [])) if st == 200 else []
    ok(names == ["tenant-a", "tenant-b", "tenant-e"], "the list shows the policies: %r" % names)
    st, q = c.http("/api/v1/tenant_quotas?tenant_id=tenant-c", "PUT",
                   {"requested_quota_bytes": 2 * MB})
    ok(st == 200 and q["data"]["requested_quota_bytes"] == 2 * MB and
       q["data"]["has_explicit_policy"], "PUT creates tenant-c's policy: %r" % (q,))
    ok("tenant-c" in open(policy).read(), "and writes it to the policy file")
    cst = tenant("tenant-c")
    ok(cst is not None and cst.put("c", b"y" * 4096) == 0, "tenant-c may write now")
    ok(c.http("/api/v1/tenant_quotas?tenant_id=tenant-c", "DELETE")[0] == 409,
       "DELETE of a tenant with bytes: 409 TENANT_NOT_EMPTY")
    ok(cst.remove("c", force=True) == 0, "tenant-c removes its object")
    st, q = c.http("/api/v1/tenant_quotas?tenant_id=tenant-c", "DELETE")
    ok(st == 200 and q.get("success") and "tenant-c" not in open(policy).read(),
       "DELETE of the empty tenant-c: 200, gone from the file: %r" % (q,))
    ok(cst.put("c2", b"y" * 4096) == -1701, "tenant-c is not registered any more")

    def refused(path, method, body, status, code):
        st, q = c.http(path, method, body)
        return ok(st == status and isinstance(q, dict) and q.get("error_code") == code,
                  "%s %s: %d %d (%r)" % (method, path, status, code, q))
    refused("/api/v1/tenant_quotas?tenant_id=nobody", "GET", None, 404, -1701)
    refused("/api/v1/tenant_quotas?tenant_id=_x", "GET", None, 400, -600)
    refused("/api/v1/tenant_quotas", "PUT", {"requested_quota_bytes": 1}, 400, -600)
    refused("/api/v1/tenant_quotas?tenant_id=t", "PUT", {"requested_quota_bytes": 0}, 400, -600)
    refused("/api/v1/tenant_quotas?tenant_id=t", "PUT", b"{oops", 400, -600)
    refused("/api/v1/tenant_quotas?tenant_id=nobody", "DELETE", None, 404, -1701)

    # Per-tenant eviction: tenant-e filled to its quota loses its own oldest objects only.
    ve = [os.urandom(MB) for _ in range(4)]
    ok([e.put("e/%d" % i, ve[i]) for i in range(4)] == [0, 0, 0, 0],
       "tenant-e fills its 4 MiB quota")

    def charged(t):
        return c.metric('mooncake_tenant_quota_charged_bytes{tenant_id="%s"}' % t) or 0
    ok(wait_for("tenant-e's eviction", lambda: charged("tenant-e") <= 0.9 * 4 * MB),
       "past its 0.9 watermark tenant-e's own objects were evicted: %d bytes charged"
       % charged("tenant-e"))
    ok((c.metric('mooncake_tenant_evict_bytes_total{tenant_id="tenant-e"}') or 0) >= MB,
       "and counted in mooncake_tenant_evict_bytes_total")
    ok(b.get("k") == vb and [b.is_exist("b/%d" % i) for i in range(3)] == [1, 1, 1],
       "tenant-b lost nothing")

    # A restart keeps the namespaces and the charges.
    before = charged("tenant-b")
    c.kill("master")
    ok(c.start_master(), "master restarted from --persist_path")
    ok(wait_for("tenant-b's bytes", lambda: b.get("k") == vb), "tenant-b reads its key again")
    apart = (a.is_exist("k"), a.put("k", va), a.get("k") == va, b.get("k") == vb)
    ok(apart == (0, 0, True, True),
       "the namespaces are still apart (tenant-a's is_exist, put, get, tenant-b's get: %r)"
       % (apart,))
    ok(charged("tenant-b") == before, "tenant-b's charge came back: %d" % charged("tenant-b"))
    ok(b.put("big", big) == -1700, "and its quota still holds")
finally:
    for s in stores:
        s.close()
    c.stop()
print("1..%d" % mc_cluster.count)
sys.exit(1 if mc_cluster.failures else 0)

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_TENANTS_H
#define MC_MASTER_TENANTS_H

/*
 * Multi-tenancy (--enable_multi_tenants): tenant namespaces, quota policies, admission,
 * per-tenant eviction and metrics.  See tenants.c; the policy file is tenants_policy.c, the
 * etcd connector tenants_etcd.c and the admin HTTP API tenants_http.c.
 */
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

struct evbuffer;

#define MC_TENANT_NAME_MAX 255
#define MC_TENANT_MAX 4096		/* tenants known at once (policies and claimed names) */
#define MC_TENANT_MAX_QUOTA 9223372036854775807ull	/* 2^63 - 1 */

/* One tenant's quota account, as upstream's snapshot shows it. */
struct mc_tenant_snapshot {
	const char *tenant_id;
	uint64_t requested_quota_bytes;
	uint64_t effective_quota_bytes;
	uint64_t charged_bytes;
	int admission_closed;
	int over_quota;
	int has_explicit_policy;
};

int mc_tenants_init(struct mc_master *m);
void mc_tenants_fini(struct mc_master *m);
/* After the objects were reloaded: the policies kept in --persist_path (when no policy file
 * is configured) and every tenant's charged bytes.  0 or an error. */
int mc_tenants_recover(struct mc_master *m);
/* Multi-tenant mode is on. */
int mc_tenants_enabled(const struct mc_master *m);
/* Is name a tenant name (non-empty, at most 255 bytes, printable ASCII, not starting with
 * '_')? */
int mc_tenant_name_valid(const char *name, size_t len);
/* The index of tenant name (0: "default"), created as an unregistered tenant when create is
 * set; -1 when unknown (or no room for another). */
int mc_tenant_index(struct mc_master *m, const char *name, size_t len, int create);
const char *mc_tenant_name(const struct mc_master *m, uint16_t idx);
/* Admin calls: work in tenant name's namespace (its objects only) until the caller resets
 * m->objects.tenant/all_tenants.  0, or -1 when no such tenant exists. */
int mc_tenant_scope(struct mc_master *m, const char *name);
/* Find key in tenant's namespace, whatever namespace the caller works in. */
struct mc_object *mc_object_find_in(struct mc_master *m, uint16_t tenant, const char *key,
				     size_t len);
/* Memory replica bytes of tenant idx allocated (delta > 0) or given back (segment_table.c). */
void mc_tenant_charge(struct mc_master *m, uint16_t idx, int64_t delta);
/* Admission of an object of size bytes for tenant idx wanting *want replicas: 0 (with *want
 * lowered to what the quota holds), TENANT_NOT_REGISTERED (no policy) or TENANT_QUOTA_EXCEEDED
 * (not one replica fits).  Always 0 outside multi-tenant mode. */
int mc_tenant_admit(struct mc_master *m, uint16_t idx, uint64_t size, uint32_t *want);
/* May tenant idx be charged size more bytes (a promotion into memory), against the effective
 * quotas of the last recompute?  Without counting a refusal; always 1 outside multi-tenant
 * mode (tenant_table.c, so the tiers need not call up into tenants.c). */
int mc_tenant_has_room(const struct mc_master *m, uint16_t idx, uint64_t size);
/* Per-tenant eviction at --tenant_eviction_high_watermark_ratio (the eviction timer, in place
 * of the pool's watermark in multi-tenant mode). */
void mc_tenants_evict_check(struct mc_master *m);
/* Effective quotas from the policies and the capacity (the 1 s tick, and policy changes). */
void mc_tenants_recompute(struct mc_master *m);
/* The key an object is persisted under: its own for the default tenant, upstream's scoped
 * "tenant\0key" for the others (flags gets MC_PERSIST_SCOPED).  out must hold
 * MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY bytes; returns the length. */
#define MC_PERSIST_SCOPED (1u << 16)
size_t mc_tenant_persist_key(const struct mc_master *m, const struct mc_object *o, char *out,
			     uint32_t *flags);
/* The same for key in namespace tenant: out gets the key itself for the default tenant, else
 * "tenant\0key".  This is also the name objects have on SSD areas and in the tier protocol,
 * and in the ghosts of SSD copies (tier_ssd.c, ghosts.c).  Returns the length. */
size_t mc_tenant_scoped_key(const struct mc_master *m, uint16_t tenant, const char *key,
			    size_t len, char *out);
/* Back from such a name: *tenant and the key within it.  A name without NUL, or any name
 * outside multi-tenant mode, is the default tenant's key; -1 for a tenant this master does not
 * know (nothing is created). */
int mc_tenant_split_key(const struct mc_master *m, const char *key, size_t len, uint16_t *tenant,
			const char **local, size_t *local_len);
/* Reload: the tenant and key of a persisted row (its flags say whether it is scoped).  0, or
 * -1 for a malformed scoped key. */
int mc_tenant_unscope(struct mc_master *m, const char *key, size_t len, uint32_t flags,
		      uint16_t *tenant, const char **local, size_t *local_len);

/* Quota policies (tenants.c, the admin API): 0 and the snapshot, or TENANT_NOT_REGISTERED /
 * INVALID_PARAMS / TENANT_NOT_EMPTY (delete of a tenant that still has bytes) /
 * UNAVAILABLE_IN_CURRENT_MODE (not multi-tenant). */
int mc_tenant_snapshot(struct mc_master *m, const char *name, struct mc_tenant_snapshot *out);
uint32_t mc_tenant_count(const struct mc_master *m);
void mc_tenant_snapshot_at(struct mc_master *m, uint32_t i, struct mc_tenant_snapshot *out);
int mc_tenant_policy_set(struct mc_master *m, const char *name, uint64_t bytes);
int mc_tenant_policy_delete(struct mc_master *m, const char *name, int *had);
/* Global figures: allocatable capacity, requested and effective sums. */
void mc_tenant_sums(const struct mc_master *m, uint64_t *capacity, uint64_t *requested,
		    uint64_t *effective);

/* tenants_policy.c: the YAML policy file. */
struct mc_tenant_policy {
	uint32_t n;
	char **names;
	uint64_t *quotas;
};
/* The largest policy text read (a file, or etcd's value): 4096 tenants with long names. */
#define MC_TENANT_POLICY_MAX (4 << 20)
/* Check policy text (upstream's schema: version 1, tenants: [{name, quota}], quotas with
 * B/KB/MB/GB/TB).  0, or -1 with a sentence in err (p then holds nothing). */
int mc_tenant_policy_parse(const char *text, size_t len, struct mc_tenant_policy *p, char *err,
			   size_t n);
/* The same for the file at path (at most MC_TENANT_POLICY_MAX bytes). */
int mc_tenant_policy_load(const char *path, struct mc_tenant_policy *p, char *err, size_t n);
void mc_tenant_policy_free(struct mc_tenant_policy *p);
/* The policy of the tenants with an explicit quota, as YAML text (malloc'ed). */
char *mc_tenant_policy_format(struct mc_master *m);
/* Write text to path atomically (temporary file, fsync, rename, directory fsync) on a worker
 * thread; done(m, arg, rc) runs on the loop afterwards (rc 0 or -errno). */
typedef void (*mc_policy_saved_fn)(struct mc_master *m, void *arg, int rc);
int mc_tenant_policy_save(struct mc_master *m, const char *path, char *text,
			  mc_policy_saved_fn done, void *arg);

/* Make p the explicit policies: its tenants get their quotas, the others with a policy lose it
 * (their objects stay; they admit nothing more).  Effective quotas are recomputed. */
void mc_tenant_policy_apply(struct mc_master *m, const struct mc_tenant_policy *p);
/* The connector is etcd (--tenant_quota_connector_type=etcd). */
int mc_tenant_connector_etcd(const struct mc_master *m);

/* tenants_etcd.c: the etcd connector. */
/* Upstream's key of the policy for cluster_id ("mooncake-store/<id>/tenant_quota_policy").  0,
 * or -1 with err set for an id that cannot be one. */
int mc_tenant_etcd_key(const char *cluster_id, char *out, size_t n, char *err, size_t errn);
/* At start, before the loop runs: read the policy (a missing key: none) into p and keep a
 * client on the master's loop for later changes.  0, or -1 with a sentence in err. */
int mc_tenant_etcd_open(struct mc_master *m, struct mc_tenant_policy *p, char *err, size_t n);
void mc_tenant_etcd_close(struct mc_master *m);
/* Put text (taken) as the policy; done(m, arg, rc) runs on the loop when etcd answered (rc 0)
 * or did not (rc < 0).  0, or a negative errno (done is not called). */
int mc_tenant_etcd_save(struct mc_master *m, char *text, mc_policy_saved_fn done, void *arg);
/* Read the policy again and apply(m, policy) it when it comes (a master that became the HA
 * leader). */
typedef void (*mc_tenant_apply_fn)(struct mc_master *m, const struct mc_tenant_policy *p);
void mc_tenant_etcd_reload(struct mc_master *m, mc_tenant_apply_fn apply);

/* tenants_http.c */
int mc_tenant_http_routes(struct mc_master *m);
void mc_tenant_metrics(struct mc_master *m, struct evbuffer *b);
/* tenants.c: the per-tenant counters (refusals by reason, evicted bytes). */
void mc_tenant_counter_metrics(struct mc_master *m, struct evbuffer *b);

#endif

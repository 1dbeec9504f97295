/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Multi-tenancy (--enable_multi_tenants, upstream's strict multi-tenant mode).
 *
 * A tenant is a namespace: a client states its tenant_id once per connection (SetTenant) and
 * every key its requests name is looked up, created, listed and removed in that tenant's
 * namespace (the object table works in the connection's namespace during a request,
 * object_table.h), so no tenant can read, remove or list another's objects.  Objects carry a
 * 2-byte tenant index (in what was padding: the master's memory per object is unchanged);
 * tenants are kept here by index, index 0 being "default".
 *
 * Quotas: a tenant with an explicit policy (the policy file, or PUT /api/v1/tenant_quotas)
 * has a requested quota; its effective quota is the requested one, or, when the requests add
 * up to more than the capacity of the mounted memory, a share of that capacity proportional to
 * its request (largest remainders first, as upstream).  The bytes of a tenant's memory replicas
 * (complete and being written) are charged to it as they are allocated and refunded as they
 * are freed (segment_table.c).  A put is admitted only for as many replicas as its quota still
 * holds; one that fits none is refused with TENANT_QUOTA_EXCEEDED (-1700), a tenant without a
 * policy with TENANT_NOT_REGISTERED (-1701).  Admission never evicts; instead each tenant whose
 * charged bytes pass --tenant_eviction_high_watermark_ratio of its effective quota has its own
 * least recently used objects evicted, down by --eviction_ratio of its quota, and no tenant's
 * puts evict another tenant's objects (the pool's own watermark eviction is off in this mode).
 *
 * Without --enable_multi_tenants every request works in the default namespace and nothing is
 * charged, as upstream ignores tenant_id then.  Single-threaded: the master's reactor thread.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/tenants.h"
#include "master/tenants_int.h"
#include "persist/persist.h"
#include "segment/alloc.h"

int mc_tenant_admit(struct mc_master *m, uint16_t idx, uint64_t size, uint32_t *want)
{
	struct mc_tenant *t;
	uint64_t room;

	if (!mc_tenants_enabled(m))
		return 0;
	if (m->tenants->capacity_seen != m->total_capacity)
		mc_tenants_recompute(m);	/* a segment came or went */
	t = &m->tenants->t[idx < m->tenants->n ? idx : 0];
	if (!t->explicit_policy) {
		t->reject_unregistered++;
		return MC_ERR_TENANT_NOT_REGISTERED;
	}
	room = t->effective > t->charged ? t->effective - t->charged : 0;
	if (size == 0 || room / size == 0) {
		t->reject_quota++;
		return MC_ERR_TENANT_QUOTA_EXCEEDED;
	}
	if (room / size < *want)
		*want = (uint32_t)(room / size);
	return 0;
}

/* ---------------------------------------------------------------- effective quotas */

void mc_tenant_sums(const struct mc_master *m, uint64_t *capacity, uint64_t *requested,
		    uint64_t *effective)
{
	uint32_t i;

	*capacity = m->total_capacity;
	*requested = *effective = 0;
	for (i = 0; m->tenants && i < m->tenants->n; i++) {
		*requested += m->tenants->t[i].requested;
		*effective += m->tenants->t[i].effective;
	}
}

/* Sort order of the oversubscribed share's leftover bytes: larger remainder first, then the
 * name. */
static struct mc_tenants *mc_sort_ts;
static unsigned __int128 mc_sort_cap, mc_sort_sum;

static int mc_tenant_rem_cmp(const void *pa, const void *pb)
{
	const struct mc_tenant *a = &mc_sort_ts->t[*(const uint32_t *)pa];
	const struct mc_tenant *b = &mc_sort_ts->t[*(const uint32_t *)pb];
	unsigned __int128 ra = mc_sort_cap * a->requested % mc_sort_sum;
	unsigned __int128 rb = mc_sort_cap * b->requested % mc_sort_sum;

	if (ra != rb)
		return ra > rb ? -1 : 1;
	return strcmp(a->name, b->name);
}

void mc_tenants_recompute(struct mc_master *m)
{
	struct mc_tenants *ts = m->tenants;
	unsigned __int128 sum = 0;
	uint64_t cap = m->total_capacity, given = 0;
	uint32_t i, k = 0, *idx;

	if (ts == NULL)
		return;
	ts->capacity_seen = cap;
	for (i = 0; i < ts->n; i++)
		if (ts->t[i].explicit_policy)
			sum += ts->t[i].requested;
	if (sum <= cap) {
		for (i = 0; i < ts->n; i++)
			ts->t[i].effective = ts->t[i].explicit_policy ? ts->t[i].requested : 0;
		return;
	}
	/* Oversubscribed: shares of the capacity in proportion to the requests; the bytes the
	 * rounding leaves (fewer than the tenants) go one each to the largest remainders. */
	idx = mc_xcalloc(ts->n, sizeof(*idx));
	for (i = 0; i < ts->n; i++) {
		struct mc_tenant *t = &ts->t[i];

		t->effective = t->explicit_policy
				       ? (uint64_t)((unsigned __int128)cap * t->requested / sum)
				       : 0;
		given += t->effective;
		if (t->explicit_policy)
			idx[k++] = i;
	}
	mc_sort_ts = ts;
	mc_sort_cap = cap;
	mc_sort_sum = sum;
	qsort(idx, k, sizeof(*idx), mc_tenant_rem_cmp);
	for (i = 0; i < k && given < cap; i++, given++)
		ts->t[idx[i]].effective++;
	free(idx);
}

/* ---------------------------------------------------------------- eviction */

void mc_tenants_evict_check(struct mc_master *m)
{
	struct mc_tenants *ts = m->tenants;
	double hw = m->cfg.tenants.tenant_eviction_high_watermark_ratio;
	uint32_t i;

	for (i = 0; ts && i < ts->n; i++) {
		struct mc_tenant *t = &ts->t[i];
		double low = hw - m->cfg.eviction_ratio;
		uint64_t target, freed;

		if (t->effective == 0 || (double)t->charged <= hw * (double)t->effective)
			continue;
		target = (uint64_t)((double)t->charged -
				    (low > 0 ? low : 0) * (double)t->effective);
		m->evict_tenant = (uint16_t)i;
		m->evict_one_tenant = 1;
		freed = mc_master_evict(m, target ? target : 1, 0);
		m->evict_one_tenant = 0;
		t->evict_bytes += freed;
	}
}

/* ---------------------------------------------------------------- policies */

static void mc_tenant_fill(struct mc_master *m, uint32_t i, struct mc_tenant_snapshot *out)
{
	struct mc_tenant *t = &m->tenants->t[i];

	out->tenant_id = t->name;
	out->requested_quota_bytes = t->explicit_policy ? t->requested : 0;
	out->effective_quota_bytes = t->effective;
	out->charged_bytes = t->charged;
	out->admission_closed = !t->explicit_policy;
	out->over_quota = t->charged > t->effective;
	out->has_explicit_policy = t->explicit_policy;
}

uint32_t mc_tenant_count(const struct mc_master *m)
{
	return m->tenants ? m->tenants->n : 0;
}

void mc_tenant_snapshot_at(struct mc_master *m, uint32_t i, struct mc_tenant_snapshot *out)
{
	mc_tenant_fill(m, i, out);
}

/* The index of tenant name for the admin API: >= 0, or UNAVAILABLE_IN_CURRENT_MODE (not in
 * multi-tenant mode), INVALID_PARAMS or TENANT_NOT_REGISTERED. */
static int mc_tenant_lookup(struct mc_master *m, const char *name)
{
	int idx;

	if (!mc_tenants_enabled(m))
		return MC_ERR_UNAVAILABLE_IN_CURRENT_MODE;
	if (!mc_tenant_name_valid(name, strlen(name)))
		return MC_ERR_INVALID_PARAMS;
	idx = mc_tenant_index(m, name, strlen(name), 0);
	return idx < 0 ? MC_ERR_TENANT_NOT_REGISTERED : idx;
}

int mc_tenant_snapshot(struct mc_master *m, const char *name, struct mc_tenant_snapshot *out)
{
	int idx = mc_tenant_lookup(m, name);

	if (idx < 0)
		return idx;
	/* A name clients only claimed (no policy, no bytes) is not registered. */
	if (!m->tenants->t[idx].explicit_policy && !m->tenants->t[idx].charged)
		return MC_ERR_TENANT_NOT_REGISTERED;
	if (m->tenants->capacity_seen != m->total_capacity)
		mc_tenants_recompute(m);
	mc_tenant_fill(m, (uint32_t)idx, out);
	return 0;
}

static void mc_tenant_persist(struct mc_master *m, const struct mc_tenant *t)
{
	uint8_t v[8];
	int i;

	if (m->persist == NULL || m->cfg.tenants.tenant_quota_connector_uri[0])
		return;		/* the policy file keeps them */
	if (!t->explicit_policy) {
		mc_persist_del_record(m->persist, MC_RECORD_TENANT, t->name, strlen(t->name));
		return;
	}
	for (i = 0; i < 8; i++)
		v[i] = (uint8_t)(t->requested >> (8 * i));
	mc_persist_put_record(m->persist, MC_RECORD_TENANT, t->name, strlen(t->name), v, 8);
}

int mc_tenant_policy_set(struct mc_master *m, const char *name, uint64_t bytes)
{
	struct mc_tenant *t;
	int idx;

	if (!mc_tenants_enabled(m))
		return MC_ERR_UNAVAILABLE_IN_CURRENT_MODE;
	if (!mc_tenant_name_valid(name, strlen(name)) || bytes == 0 ||
	    bytes > MC_TENANT_MAX_QUOTA)
		return MC_ERR_INVALID_PARAMS;
	idx = mc_tenant_index(m, name, strlen(name), 1);
	if (idx < 0)
		return MC_ERR_INVALID_PARAMS;
	t = &m->tenants->t[idx];
	t->requested = bytes;
	t->explicit_policy = 1;
	mc_tenants_recompute(m);
	mc_tenant_persist(m, t);
	return 0;
}

int mc_tenant_policy_delete(struct mc_master *m, const char *name, int *had)
{
	struct mc_tenant *t;
	int idx;

	*had = 0;
	idx = mc_tenant_lookup(m, name);
	if (idx < 0)
		return idx;
	if (!m->tenants->t[idx].explicit_policy)
		return MC_ERR_TENANT_NOT_REGISTERED;
	t = &m->tenants->t[idx];
	if (t->charged > 0)
		return MC_ERR_TENANT_NOT_EMPTY;
	t->explicit_policy = 0;
	t->requested = 0;
	*had = 1;
	mc_tenants_recompute(m);
	mc_tenant_persist(m, t);
	return 0;
}

/* ---------------------------------------------------------------- set-up */

int mc_tenants_init(struct mc_master *m)
{
	struct mc_tenants *ts = mc_xcalloc(1, sizeof(*ts));

	m->tenants = ts;
	mc_tenant_index(m, "default", 7, 1);
	ts->enabled = m->cfg.tenants.enable_multi_tenants;
	if (ts->enabled && mc_tenant_connector_etcd(m)) {
		struct mc_tenant_policy p;
		char err[700];

		if (mc_tenant_etcd_open(m, &p, err, sizeof(err))) {
			mc_log_err("%s", err);
			return -1;
		}
		mc_tenant_policy_apply(m, &p);
		mc_tenant_policy_free(&p);
	} else if (ts->enabled && m->cfg.tenants.tenant_quota_connector_uri[0]) {
		struct mc_tenant_policy p;
		char err[512];

		if (mc_tenant_policy_load(m->cfg.tenants.tenant_quota_connector_uri, &p, err,
					  sizeof(err))) {
			mc_log_err("tenant quota policy %s: %s",
				   m->cfg.tenants.tenant_quota_connector_uri, err);
			return -1;
		}
		mc_tenant_policy_apply(m, &p);
		mc_log_notice("tenant quota policy %s: %u tenants",
			      m->cfg.tenants.tenant_quota_connector_uri, p.n);
		mc_tenant_policy_free(&p);
	}
	return 0;
}

int mc_tenant_connector_etcd(const struct mc_master *m)
{
	return !strcmp(m->cfg.tenants.tenant_quota_connector_type, "etcd");
}

void mc_tenant_policy_apply(struct mc_master *m, const struct mc_tenant_policy *p)
{
	uint32_t i;

	for (i = 0; i < m->tenants->n; i++) {
		m->tenants->t[i].explicit_policy = 0;
		m->tenants->t[i].requested = 0;
	}
	for (i = 0; i < p->n; i++) {
		int idx = mc_tenant_index(m, p->names[i], strlen(p->names[i]), 1);

		if (idx < 0) {
			mc_log_warn("tenant quota policy: no room for tenant %s (at most %d "
				    "tenants)", p->names[i], MC_TENANT_MAX);
			continue;
		}
		m->tenants->t[idx].requested = p->quotas[i];
		m->tenants->t[idx].explicit_policy = 1;
	}
	mc_tenants_recompute(m);
}

void mc_tenants_fini(struct mc_master *m)
{
	uint32_t i;

	if (m->tenants == NULL)
		return;
	mc_tenant_etcd_close(m);
	for (i = 0; i < m->tenants->n; i++)
		free(m->tenants->t[i].name);
	free(m->tenants->t);
	free(m->tenants);
	m->tenants = NULL;
}

static int mc_tenant_load(void *arg, const void *id, size_t id_len, const void *val, size_t len)
{
	struct mc_master *m = arg;
	const uint8_t *v = val;
	uint64_t bytes = 0;
	int i, idx;

	if (len != 8 || (idx = mc_tenant_index(m, id, id_len, 1)) < 0)
		return 0;
	for (i = 7; i >= 0; i--)
		bytes = bytes << 8 | v[i];
	m->tenants->t[idx].requested = bytes;
	m->tenants->t[idx].explicit_policy = bytes > 0;
	return 0;
}

int mc_tenants_recover(struct mc_master *m)
{
	struct mc_object *o;
	size_t pos = 0;
	int rc = 0;

	if (!mc_tenants_enabled(m))
		return 0;
	if (m->persist && !m->cfg.tenants.tenant_quota_connector_uri[0])
		rc = mc_persist_load_records(m->persist, MC_RECORD_TENANT, mc_tenant_load, m);
	if (m->ha)	/* a new leader: the former one may have changed the policy in etcd */
		mc_tenant_etcd_reload(m, mc_tenant_policy_apply);
	/* Charges: the memory replicas of the reloaded objects. */
	while ((o = mc_object_next(&m->objects, &pos)) != NULL) {
		uint32_t i;

		for (i = 0; i < o->nrep; i++) {
			struct mc_replica *r = mc_object_replica(o, i);

			if (r->seg && r->type == MC_REPLICA_MEMORY)
				mc_tenant_charge(m, o->tenant, (int64_t)mc_object_span(o));
		}
	}
	mc_tenants_recompute(m);
	return rc;
}

/* The policy file's text for the tenants with an explicit policy (tenants_policy.c writes it). */
char *mc_tenant_policy_format(struct mc_master *m)
{
	uint32_t i, n = mc_tenant_count(m), explicit = 0;
	size_t cap = 64, len;
	char *out;

	for (i = 0; i < n; i++) {
		struct mc_tenant_snapshot s;

		mc_tenant_snapshot_at(m, i, &s);
		if (s.has_explicit_policy) {
			explicit++;
			cap += strlen(s.tenant_id) * 2 + 64;
		}
	}
	out = mc_xmalloc(cap);
	len = (size_t)snprintf(out, cap, explicit ? "version: 1\n\ntenants:\n"
						  : "version: 1\n\ntenants: []\n");
	for (i = 0; i < n; i++) {
		struct mc_tenant_snapshot s;
		const char *c;

		mc_tenant_snapshot_at(m, i, &s);
		if (!s.has_explicit_policy)
			continue;
		len += (size_t)snprintf(out + len, cap - len, "  - name: \"");
		for (c = s.tenant_id; *c; c++)	/* printable ASCII: only these need escapes */
			len += (size_t)snprintf(out + len, cap - len, *c == '"' || *c == '\\'
								   ? "\\%c" : "%c", *c);
		len += (size_t)snprintf(out + len, cap - len, "\"\n    quota: %llu\n",
					(unsigned long long)s.requested_quota_bytes);
	}
	return out;
}

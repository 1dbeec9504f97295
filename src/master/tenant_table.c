/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tenant table: tenant names by index, the namespace a request works in, the bytes charged
 * to each tenant, tenant-scoped keys in --persist_path, and SetTenant.  The bottom layer of
 * multi-tenancy (tenants.c has the quotas above it): the object and segment tables call it and
 * it calls only the object table.  Single-threaded: the master's reactor thread.
 */
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/tenants.h"
#include "master/tenants_int.h"

int mc_tenants_enabled(const struct mc_master *m)
{
	return m->tenants && m->tenants->enabled;
}

int mc_tenant_name_valid(const char *name, size_t len)
{
	return mc_rpc_tenant_valid(name, len);
}

int mc_tenant_index(struct mc_master *m, const char *name, size_t len, int create)
{
	struct mc_tenants *ts = m->tenants;
	uint32_t i;

	for (i = 0; i < ts->n; i++)
		if (strlen(ts->t[i].name) == len && !memcmp(ts->t[i].name, name, len))
			return (int)i;
	if (!create || ts->n >= MC_TENANT_MAX || !mc_tenant_name_valid(name, len))
		return -1;
	if (ts->n == ts->cap) {
		ts->cap = ts->cap ? ts->cap * 2 : 16;
		ts->t = mc_xrealloc(ts->t, ts->cap * sizeof(*ts->t));
	}
	memset(&ts->t[ts->n], 0, sizeof(ts->t[ts->n]));
	ts->t[ts->n].name = mc_xstrndup(name, len);
	return (int)ts->n++;
}

const char *mc_tenant_name(const struct mc_master *m, uint16_t idx)
{
	return m->tenants && idx < m->tenants->n ? m->tenants->t[idx].name : "default";
}

int mc_tenant_scope(struct mc_master *m, const char *name)
{
	int idx = mc_tenant_index(m, name, strlen(name), 0);

	if (idx < 0)
		return -1;
	m->objects.tenant = (uint16_t)idx;
	m->objects.all_tenants = 0;
	return 0;
}

int mc_tenant_has_room(const struct mc_master *m, uint16_t idx, uint64_t size)
{
	const struct mc_tenant *t;

	if (!mc_tenants_enabled(m))
		return 1;
	/* The effective quotas of the last recompute (the tick's, or a policy change's). */
	t = &m->tenants->t[idx < m->tenants->n ? idx : 0];
	return t->explicit_policy && t->effective >= t->charged &&
	       t->effective - t->charged >= size;
}

struct mc_object *mc_object_find_in(struct mc_master *m, uint16_t tenant, const char *key,
				     size_t len)
{
	uint16_t saved = m->objects.tenant;
	struct mc_object *o;

	m->objects.tenant = tenant;
	o = mc_object_find(&m->objects, key, len);
	m->objects.tenant = saved;
	return o;
}

void mc_tenant_charge(struct mc_master *m, uint16_t idx, int64_t delta)
{
	struct mc_tenant *t;

	if (!mc_tenants_enabled(m) || idx >= m->tenants->n)
		return;
	t = &m->tenants->t[idx];
	if (delta < 0 && (uint64_t)-delta > t->charged)
		t->charged = 0;
	else
		t->charged += (uint64_t)delta;
}

/* ---------------------------------------------------------------- persisted keys */

size_t mc_tenant_scoped_key(const struct mc_master *m, uint16_t tenant, const char *key,
			    size_t len, char *out)
{
	const char *name;
	size_t n;

	if (tenant == 0) {
		memcpy(out, key, len);
		return len;
	}
	name = mc_tenant_name(m, tenant);
	n = strlen(name);
	memcpy(out, name, n);
	out[n] = '\0';
	memcpy(out + n + 1, key, len);
	return n + 1 + len;
}

size_t mc_tenant_persist_key(const struct mc_master *m, const struct mc_object *o, char *out,
			     uint32_t *flags)
{
	if (o->tenant != 0)
		*flags |= MC_PERSIST_SCOPED;
	return mc_tenant_scoped_key(m, o->tenant, o->key, o->key_len, out);
}

int mc_tenant_split_key(const struct mc_master *m, const char *key, size_t len, uint16_t *tenant,
			const char **local, size_t *local_len)
{
	const char *nul;
	uint32_t i;

	*tenant = 0;
	*local = key;
	*local_len = len;
	if (!mc_tenants_enabled(m) || (nul = memchr(key, '\0', len)) == NULL)
		return 0;
	for (i = 1; i < m->tenants->n; i++) {
		const char *name = m->tenants->t[i].name;

		if (strlen(name) == (size_t)(nul - key) && !memcmp(name, key, (size_t)(nul - key))) {
			*tenant = (uint16_t)i;
			*local = nul + 1;
			*local_len = len - (size_t)(nul - key) - 1;
			return 0;
		}
	}
	return -1;
}

int mc_tenant_unscope(struct mc_master *m, const char *key, size_t len, uint32_t flags,
		      uint16_t *tenant, const char **local, size_t *local_len)
{
	const char *nul;
	int idx;

	*tenant = 0;
	*local = key;
	*local_len = len;
	if (!(flags & MC_PERSIST_SCOPED))
		return 0;
	nul = memchr(key, '\0', len);
	if (nul == NULL || m->tenants == NULL)
		return -1;
	idx = mc_tenant_index(m, key, (size_t)(nul - key), 1);
	if (idx < 0)
		return -1;
	*tenant = (uint16_t)idx;
	*local = nul + 1;
	*local_len = len - (size_t)(nul - key) - 1;
	return 0;
}

/* ---------------------------------------------------------------- SetTenant */

/* Body: str tenant_id -> (empty).  Outside multi-tenant mode the connection stays in the
 * default namespace (upstream ignores tenant_id then). */
int mc_op_set_tenant(struct mc_req *q)
{
	struct mc_strv name = mc_rpc_get_strv(&q->r, MC_TENANT_NAME_MAX);
	int idx;

	if (!mc_req_done(q) || !mc_tenant_name_valid(name.p, name.n))
		return MC_ERR_INVALID_PARAMS;
	if (!mc_tenants_enabled(q->m))
		return 0;
	idx = mc_tenant_index(q->m, name.p, name.n, 1);
	if (idx < 0) {
		mc_log_warn("SetTenant %.*s from %s refused: %d tenants known already", (int)name.n,
			    name.p, q->peer, MC_TENANT_MAX);
		return MC_ERR_TENANT_NOT_REGISTERED;
	}
	q->m->conn_tenant = (uint16_t)idx;
	return 0;
}

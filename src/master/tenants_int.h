/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_TENANTS_INT_H
#define MC_MASTER_TENANTS_INT_H

/* The tenant table, shared by tenant_table.c (names, namespaces, charges: the bottom layer the
 * tables call), tenants.c (quotas, admission, eviction), tenants_http.c (metrics) and
 * tenants_etcd.c (the etcd connector). */
#include <stdint.h>

struct mc_tenant {
	char *name;
	uint64_t requested, effective, charged;
	int explicit_policy;
	uint64_t reject_quota, reject_unregistered, evict_bytes;
};

struct mc_etcd;
struct mc_etcd_call;
struct mc_tenant_etcd_read;
struct mc_master;
struct mc_tenant_policy;

struct mc_tenants {
	int enabled;
	uint64_t capacity_seen;		/* total_capacity the effective quotas were made for */
	struct mc_tenant *t;
	uint32_t n, cap;
	/* The etcd connector (tenants_etcd.c): its client on the master's loop, its key, and a
	 * read of the key in flight (HA leader). */
	struct mc_etcd *etcd;
	char *etcd_key;
	struct mc_tenant_etcd_read *reload;
	struct mc_etcd_call *reload_call;
	void (*reload_apply)(struct mc_master *m, const struct mc_tenant_policy *p);
};

#endif

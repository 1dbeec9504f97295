/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory registration: every buffer is registered on every NIC (ibv_reg_mr with LOCAL_WRITE,
 * plus REMOTE_READ/REMOTE_WRITE when peers may reach it), so any NIC can carry any slice; the
 * segment descriptor publishes the rkey and lkey of each NIC in NIC order.  The table is sorted
 * by address and never holds overlapping buffers.  A mutex guards it: API threads register
 * while the loop looks up lkeys for new requests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/transfer_engine_c.h"
#include "common/log.h"
#include "rdma/rdma_int.h"

/* Index of the first buffer whose start is > addr; mu held. */
static uint32_t mc_mr_upper(const struct mc_rdma_mrtab *t, uint64_t addr)
{
	uint32_t lo = 0, hi = t->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->bufs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void mc_mr_dereg(struct mc_rdma *r, struct mc_rdma_buf *b)
{
	unsigned i;

	for (i = 0; i < r->nctx; i++)
		if (b->mr[i] && r->ops->dereg_mr(b->mr[i]))
			mc_log_warn("rdma %s: ibv_dereg_mr failed", r->ctx[i].name);
}

/* 1 if [a, a+len) overlaps a registered buffer; *at = where it would go.  mu held. */
static int mc_mr_overlaps(const struct mc_rdma_mrtab *t, uint64_t a, uint64_t len, uint32_t *at)
{
	*at = mc_mr_upper(t, a);
	return (*at > 0 && t->bufs[*at - 1].addr + t->bufs[*at - 1].len > a) ||
	       (*at < t->n && t->bufs[*at].addr < a + len);
}

/* ibv_reg_mr pins the pages and can take long for a big buffer: it runs outside the table
 * lock, so the loop's lookups for new requests never wait for it. */
int mc_rdma_register(struct mc_rdma *r, void *addr, size_t len, const char *location,
		     int remote_accessible)
{
	struct mc_rdma_mrtab *t = &r->mr;
	struct mc_rdma_buf b = { 0 };
	uint64_t a = (uint64_t)(uintptr_t)addr;
	int access = IBV_ACCESS_LOCAL_WRITE;
	uint32_t at;
	unsigned i;
	int rc = 0;

	if (addr == NULL || len == 0 || a + len < a)
		return ERR_INVALID_ARGUMENT;
	if (location == NULL || *location == '\0')
		location = "*";
	if (strlen(location) >= sizeof(b.location))
		return ERR_INVALID_ARGUMENT;
	if (remote_accessible)
		access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	b.addr = a;
	b.len = len;
	b.remote = remote_accessible;
	strcpy(b.location, location);
	pthread_mutex_lock(&t->mu);
	rc = mc_mr_overlaps(t, a, len, &at) ? ERR_ADDRESS_OVERLAPPED : 0;
	pthread_mutex_unlock(&t->mu);
	if (rc)
		return rc;
	for (i = 0; i < r->nctx; i++) {
		b.mr[i] = r->ops->reg_mr(r->ctx[i].pd, addr, len, access);
		if (b.mr[i] == NULL) {
			mc_log_warn("rdma %s: ibv_reg_mr of %zu bytes at %p failed: %s",
				    r->ctx[i].name, len, addr, strerror(errno));
			rc = ERR_CONTEXT;
			goto dereg;
		}
	}
	pthread_mutex_lock(&t->mu);
	/* Checked again: another thread may have registered an overlapping range meanwhile. */
	if (mc_mr_overlaps(t, a, len, &at)) {
		rc = ERR_ADDRESS_OVERLAPPED;
		goto unlock;
	}
	if (t->n == t->cap) {
		uint32_t ncap = t->cap ? t->cap * 2 : 16;
		struct mc_rdma_buf *nb = ncap <= (1u << 20) ?
						 realloc(t->bufs, ncap * sizeof(*nb)) : NULL;

		if (nb == NULL) {
			rc = ERR_MEMORY;
			goto unlock;
		}
		t->bufs = nb;
		t->cap = ncap;
	}
	memmove(&t->bufs[at + 1], &t->bufs[at], (t->n - at) * sizeof(*t->bufs));
	t->bufs[at] = b;
	t->n++;
	pthread_mutex_unlock(&t->mu);
	return 0;
unlock:
	pthread_mutex_unlock(&t->mu);
dereg:
	mc_mr_dereg(r, &b);
	return rc;
}

int mc_rdma_unregister(struct mc_rdma *r, void *addr)
{
	struct mc_rdma_mrtab *t = &r->mr;
	struct mc_rdma_buf b;
	uint64_t a = (uint64_t)(uintptr_t)addr;
	uint32_t at;

	pthread_mutex_lock(&t->mu);
	at = mc_mr_upper(t, a);
	if (at == 0 || t->bufs[at - 1].addr != a) {
		pthread_mutex_unlock(&t->mu);
		return ERR_ADDRESS_NOT_REGISTERED;
	}
	b = t->bufs[at - 1];
	memmove(&t->bufs[at - 1], &t->bufs[at], (t->n - at) * sizeof(*t->bufs));
	t->n--;
	pthread_mutex_unlock(&t->mu);
	mc_mr_dereg(r, &b);
	return 0;
}

int mc_rdma_mr_lookup(struct mc_rdma *r, uint64_t addr, uint64_t len,
		      uint32_t lkey[MC_RDMA_MAX_NICS], char *location, size_t locn)
{
	struct mc_rdma_mrtab *t = &r->mr;
	uint32_t at;
	unsigned i;
	int rc = ERR_ADDRESS_NOT_REGISTERED;

	pthread_mutex_lock(&t->mu);
	at = mc_mr_upper(t, addr);
	if (at > 0 && len && addr + len >= addr &&
	    addr + len <= t->bufs[at - 1].addr + t->bufs[at - 1].len) {
		for (i = 0; i < r->nctx; i++)
			lkey[i] = t->bufs[at - 1].mr[i]->lkey;
		snprintf(location, locn, "%s", t->bufs[at - 1].location);
		rc = 0;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

int mc_rdma_covers(struct mc_rdma *r, const void *addr, uint64_t len)
{
	uint32_t lkey[MC_RDMA_MAX_NICS];
	char loc[64];

	return mc_rdma_mr_lookup(r, (uint64_t)(uintptr_t)addr, len, lkey, loc, sizeof(loc)) == 0;
}

void mc_rdma_mr_fini(struct mc_rdma *r)
{
	uint32_t i;

	for (i = 0; i < r->mr.n; i++)
		mc_mr_dereg(r, &r->mr.bufs[i]);
	free(r->mr.bufs);
	r->mr.bufs = NULL;
	r->mr.n = r->mr.cap = 0;
}

struct mc_desc_ent {
	uint64_t addr;
	json_t *obj;
};

static int mc_desc_ent_cmp(const void *a, const void *b)
{
	const struct mc_desc_ent *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The entry of desc's buffers for addr (ents sorted), or NULL. */
static json_t *mc_desc_find(struct mc_desc_ent *ents, size_t n, uint64_t addr)
{
	struct mc_desc_ent key = { .addr = addr }, *hit;

	hit = n ? bsearch(&key, ents, n, sizeof(*ents), mc_desc_ent_cmp) : NULL;
	return hit ? hit->obj : NULL;
}

/* Buffers already in desc (put there by the engine or another transport) keep their other
 * fields: ours gain name = location, rkey and lkey; remote buffers not listed are added. */
int mc_rdma_desc_fill(struct mc_rdma *r, json_t *desc)
{
	json_t *devs = json_array(), *bufs = json_object_get(desc, "buffers"), *v;
	struct mc_desc_ent *ents = NULL;
	size_t n = 0, i;
	char gid[64];
	unsigned k;
	int rc = ERR_MEMORY;

	if (devs == NULL)
		goto out;
	if (!json_is_array(bufs)) {
		bufs = json_array();
		if (bufs == NULL || json_object_set_new(desc, "buffers", bufs))
			goto out;
	}
	for (k = 0; k < r->nctx; k++) {
		mc_rdma_gid_to_str(&r->ctx[k].gid, gid, sizeof(gid));
		if (json_array_append_new(devs, json_pack("{sssiss}", "name", r->ctx[k].name,
							  "lid", (int)r->ctx[k].lid, "gid", gid)))
			goto out;
	}
	ents = calloc(json_array_size(bufs) + 1, sizeof(*ents));
	if (ents == NULL)
		goto out;
	json_array_foreach(bufs, i, v)
		if (json_is_integer(json_object_get(v, "addr"))) {
			ents[n].addr = (uint64_t)json_integer_value(json_object_get(v, "addr"));
			ents[n++].obj = v;
		}
	qsort(ents, n, sizeof(*ents), mc_desc_ent_cmp);
	pthread_mutex_lock(&r->mr.mu);
	for (i = 0; i < r->mr.n; i++) {
		struct mc_rdma_buf *b = &r->mr.bufs[i];
		json_t *rk, *lk, *o;
		int bad = 0;

		if (!b->remote)
			continue;
		rk = json_array();
		lk = json_array();
		for (k = 0; rk && lk && k < r->nctx; k++) {
			bad |= json_array_append_new(rk, json_integer(b->mr[k]->rkey));
			bad |= json_array_append_new(lk, json_integer(b->mr[k]->lkey));
		}
		o = mc_desc_find(ents, n, b->addr);
		if (o == NULL) {
			o = json_pack("{sIsI}", "addr", (json_int_t)b->addr, "length",
				      (json_int_t)b->len);
			bad |= o == NULL || json_array_append_new(bufs, o);
		}
		if (bad || rk == NULL || lk == NULL ||
		    json_object_set_new(o, "name", json_string(b->location)) ||
		    json_object_set_new(o, "rkey", rk) || json_object_set_new(o, "lkey", lk)) {
			pthread_mutex_unlock(&r->mr.mu);
			goto out;
		}
	}
	pthread_mutex_unlock(&r->mr.mu);
	if (json_object_set_new(desc, "protocol", json_string("rdma")) ||
	    json_object_set(desc, "devices", devs) ||
	    json_object_set(desc, "priority_matrix", r->matrix))
		goto out;
	rc = 0;
out:
	free(ents);
	json_decref(devs);
	return rc;
}

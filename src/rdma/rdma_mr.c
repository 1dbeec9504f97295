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

/* The largest region every NIC registers (max_mr_size), page-aligned. */
static uint64_t mc_mr_chunk(const struct mc_rdma *r)
{
	uint64_t m = ~0ull;
	unsigned i;

	for (i = 0; i < r->nctx; i++)
		if (r->ctx[i].max_mr < m)
			m = r->ctx[i].max_mr;
	m &= ~(uint64_t)4095;
	return m ? m : 4096;
}

/* Remove the entries of group a (mu held); their MRs go into out (at most max). */
static uint32_t mc_mr_take_group(struct mc_rdma_mrtab *t, uint64_t a, struct mc_rdma_buf *out,
				 uint32_t max)
{
	uint32_t at = mc_mr_upper(t, a), end, n;

	if (at == 0 || t->bufs[at - 1].addr != a || t->bufs[at - 1].group != a)
		return 0;
	at--;
	for (end = at; end < t->n && t->bufs[end].group == a && end - at < max; end++)
		out[end - at] = t->bufs[end];
	n = end - at;
	memmove(&t->bufs[at], &t->bufs[end], (t->n - end) * sizeof(*t->bufs));
	t->n -= n;
	return n;
}

/* ibv_reg_mr pins the pages and can take long for a big buffer: it runs outside the table
 * lock, so the loop's lookups for new requests never wait for it.  A buffer larger than a
 * NIC's max_mr_size is registered as several chunks, each published as a buffer of its own
 * (a request must then lie within one chunk, as upstream). */
int mc_rdma_register(struct mc_rdma *r, void *addr, size_t len, const char *location,
		     int remote_accessible)
{
	struct mc_rdma_mrtab *t = &r->mr;
	struct mc_rdma_buf *b = NULL;
	uint64_t a = (uint64_t)(uintptr_t)addr, chunk, off;
	int access = IBV_ACCESS_LOCAL_WRITE;
	uint32_t at, nb = 0, k, want;
	unsigned i;
	int rc = 0;

	if (addr == NULL || len == 0 || a + len < a)
		return ERR_INVALID_ARGUMENT;
	if (location == NULL || *location == '\0')
		location = "*";
	if (strlen(location) >= sizeof(b->location))
		return ERR_INVALID_ARGUMENT;
	if (remote_accessible)
		access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	chunk = mc_mr_chunk(r);
	/* No len + chunk - 1: chunk may be near 2^64. */
	if (len / chunk + (len % chunk != 0) > 65536) {
		mc_log_warn("rdma: %zu bytes at %p would need more than 65536 regions of "
			    "max_mr_size %llu",
			    len, addr, (unsigned long long)chunk);
		return ERR_INVALID_ARGUMENT;
	}
	want = (uint32_t)(len / chunk + (len % chunk != 0));
	b = calloc(want, sizeof(*b));
	if (b == NULL)
		return ERR_MEMORY;
	pthread_mutex_lock(&t->mu);
	rc = mc_mr_overlaps(t, a, len, &at) ? ERR_ADDRESS_OVERLAPPED : 0;
	pthread_mutex_unlock(&t->mu);
	if (rc)
		goto out;
	if (want > 1)
		mc_log_info("rdma: %zu bytes at %p registered as %u regions of at most %llu bytes "
			    "(max_mr_size)",
			    len, addr, want, (unsigned long long)chunk);
	for (off = 0; nb < want; off += chunk, nb++) {
		struct mc_rdma_buf *c = &b[nb];

		c->addr = a + off;
		c->len = len - off < chunk ? len - off : chunk;
		c->group = a;
		c->remote = remote_accessible;
		strcpy(c->location, location);
		for (i = 0; i < r->nctx; i++) {
			c->mr[i] = r->ops->reg_mr(r->ctx[i].pd, (void *)(uintptr_t)c->addr,
						  (size_t)c->len, access);
			if (c->mr[i] == NULL) {
				mc_log_warn("rdma %s: ibv_reg_mr of %llu bytes at %p failed: %s",
					    r->ctx[i].name, (unsigned long long)c->len,
					    (void *)(uintptr_t)c->addr, strerror(errno));
				rc = ERR_CONTEXT;
				nb++;
				goto dereg;
			}
		}
	}
	pthread_mutex_lock(&t->mu);
	/* Checked again: another thread may have registered an overlapping range meanwhile. */
	if (mc_mr_overlaps(t, a, len, &at)) {
		rc = ERR_ADDRESS_OVERLAPPED;
		goto unlock;
	}
	if (t->n + nb > t->cap) {
		uint32_t ncap = t->cap ? t->cap : 16;
		struct mc_rdma_buf *nbufs;

		while (ncap < t->n + nb)
			ncap *= 2;
		nbufs = ncap <= (1u << 20) ? realloc(t->bufs, ncap * sizeof(*nbufs)) : NULL;
		if (nbufs == NULL) {
			rc = ERR_MEMORY;
			goto unlock;
		}
		t->bufs = nbufs;
		t->cap = ncap;
	}
	memmove(&t->bufs[at + nb], &t->bufs[at], (t->n - at) * sizeof(*t->bufs));
	memcpy(&t->bufs[at], b, nb * sizeof(*b));
	t->n += nb;
	pthread_mutex_unlock(&t->mu);
	free(b);
	return 0;
unlock:
	pthread_mutex_unlock(&t->mu);
dereg:
	for (k = 0; k < nb; k++)
		mc_mr_dereg(r, &b[k]);
out:
	free(b);
	return rc;
}

int mc_rdma_unregister(struct mc_rdma *r, void *addr)
{
	struct mc_rdma_mrtab *t = &r->mr;
	struct mc_rdma_buf one, *b = &one;
	uint64_t a = (uint64_t)(uintptr_t)addr;
	uint32_t at, n = 0, k, max = 1;

	pthread_mutex_lock(&t->mu);
	at = mc_mr_upper(t, a);
	if (at == 0 || t->bufs[at - 1].addr != a || t->bufs[at - 1].group != a) {
		pthread_mutex_unlock(&t->mu);
		return ERR_ADDRESS_NOT_REGISTERED;
	}
	while (at - 1 + max < t->n && t->bufs[at - 1 + max].group == a)
		max++;
	if (max > 1)
		b = malloc(max * sizeof(*b));
	if (b == NULL) {
		pthread_mutex_unlock(&t->mu);
		return ERR_MEMORY;
	}
	n = mc_mr_take_group(t, a, b, max);
	pthread_mutex_unlock(&t->mu);
	for (k = 0; k < n; k++)
		mc_mr_dereg(r, &b[k]);
	if (b != &one)
		free(b);
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
		/* The first chunk of a registration split by max_mr_size: the entry shrinks to
		 * it, the other chunks follow as buffers of their own. */
		if (o && (uint64_t)json_integer_value(json_object_get(o, "length")) != b->len)
			bad |= json_object_set_new(o, "length", json_integer((json_int_t)b->len));
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

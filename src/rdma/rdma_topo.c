/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NIC priority matrices ({"cpu:0": [["mlx5_0"], ["mlx5_1"]], ...}: for each memory location,
 * its preferred NICs, then the others, as in upstream's segment descriptors) turned into
 * bit masks over a NIC list, and peers built from their segment descriptors (devices, rdma
 * buffers with per-NIC rkeys, priority_matrix).  Descriptor contents come from the network or
 * a metadata service: every field is checked, NIC counts and name lengths are bounded.
 * Peers are immutable once built and refcounted atomically, so any thread may hold one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/transfer_engine_c.h"
#include "common/log.h"
#include "rdma/rdma_int.h"

static int mc_topo_index(char (*names)[64], unsigned n, const char *name)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return (int)i;
	return -1;
}

unsigned mc_rdma_topo_names(const json_t *m, char (*names)[64], unsigned max)
{
	const char *loc;
	json_t *row, *list, *nic;
	size_t i, k;
	unsigned n = 0;

	json_object_foreach((json_t *)m, loc, row) {
		json_array_foreach(row, i, list) {
			if (i > 1)
				break;
			json_array_foreach(list, k, nic) {
				if (!json_is_string(nic) || json_string_length(nic) == 0 ||
				    json_string_length(nic) >= 64 ||
				    mc_topo_index(names, n, json_string_value(nic)) >= 0)
					continue;
				if (n == max)
					return n;
				strcpy(names[n++], json_string_value(nic));
			}
		}
	}
	return n;
}

int mc_rdma_topo_parse(const json_t *m, char (*names)[64], unsigned nnames,
		       struct mc_rdma_topo *t)
{
	const char *loc;
	json_t *row, *list, *nic;
	size_t i, k;

	memset(t, 0, sizeof(*t));
	if (m == NULL)
		return 0;
	if (!json_is_object(m) || json_object_size(m) > 4096)
		return ERR_MALFORMED_JSON;
	t->rows = calloc(json_object_size(m) + 1, sizeof(*t->rows));
	if (t->rows == NULL)
		return ERR_MEMORY;
	json_object_foreach((json_t *)m, loc, row) {
		struct mc_rdma_pref *p = &t->rows[t->nrows];

		if (!json_is_array(row) || strlen(loc) >= sizeof(p->location))
			goto bad;
		strcpy(p->location, loc);
		json_array_foreach(row, i, list) {
			if (i > 1)
				break;
			if (!json_is_array(list))
				goto bad;
			json_array_foreach(list, k, nic) {
				int x;

				if (!json_is_string(nic))
					goto bad;
				x = mc_topo_index(names, nnames, json_string_value(nic));
				if (x < 0)
					continue;
				if (i == 0)
					p->pref |= 1u << x;
				else
					p->other |= 1u << x;
			}
		}
		p->other &= ~p->pref;
		t->nrows++;
	}
	return 0;
bad:
	mc_rdma_topo_fini(t);
	return ERR_MALFORMED_JSON;
}

void mc_rdma_topo_fini(struct mc_rdma_topo *t)
{
	free(t->rows);
	t->rows = NULL;
	t->nrows = 0;
}

void mc_rdma_topo_lookup(const struct mc_rdma_topo *t, const char *location, unsigned nnics,
			 uint32_t *pref, uint32_t *other)
{
	uint32_t all = nnics >= 32 ? ~0u : (1u << nnics) - 1;
	uint32_t i;

	*pref = all;
	*other = 0;
	for (i = 0; location && i < t->nrows; i++)
		if (!strcmp(t->rows[i].location, location) && (t->rows[i].pref | t->rows[i].other)) {
			*pref = t->rows[i].pref ? t->rows[i].pref : t->rows[i].other;
			*other = all & ~*pref;	/* every NIC stays a fallback path */
			return;
		}
}

static int mc_peer_buf_cmp(const void *a, const void *b)
{
	const struct mc_rdma_peer_buf *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct mc_rdma_peer *mc_rdma_peer_new(const json_t *desc, const char *name, const char *host,
				      uint16_t port)
{
	struct mc_rdma_peer *p = calloc(1, sizeof(*p));
	json_t *devs = json_object_get(desc, "devices");
	json_t *bufs = json_object_get(desc, "buffers");
	json_t *v, *b;
	size_t i, k;
	const char *why = "no memory";

	if (p == NULL)
		goto fail;
	p->refs = 1;
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->port = port;
	why = "devices";
	if (!json_is_array(devs) || json_array_size(devs) == 0 ||
	    json_array_size(devs) > MC_RDMA_MAX_NICS)
		goto fail;
	json_array_foreach(devs, i, v) {
		json_t *n = json_object_get(v, "name");

		if (!json_is_string(n) || json_string_length(n) == 0 ||
		    json_string_length(n) >= sizeof(p->nic[0]) || strchr(json_string_value(n), '@'))
			goto fail;
		strcpy(p->nic[i], json_string_value(n));
	}
	p->nnics = (unsigned)json_array_size(devs);
	why = "buffers";
	if (bufs && (!json_is_array(bufs) || json_array_size(bufs) > 65536))
		goto fail;
	p->bufs = calloc(json_array_size(bufs) + 1, sizeof(*p->bufs));
	if (p->bufs == NULL)
		goto fail;
	json_array_foreach(bufs, i, b) {
		struct mc_rdma_peer_buf *pb = &p->bufs[p->nbufs];
		json_t *a = json_object_get(b, "addr"), *l = json_object_get(b, "length");
		json_t *rk = json_object_get(b, "rkey"), *loc = json_object_get(b, "name");

		if (!json_is_integer(a) || !json_is_integer(l) || json_integer_value(l) <= 0 ||
		    !json_is_array(rk) || json_array_size(rk) != p->nnics)
			goto fail;
		pb->addr = (uint64_t)json_integer_value(a);
		pb->len = (uint64_t)json_integer_value(l);
		if (pb->addr + pb->len < pb->addr)
			goto fail;
		json_array_foreach(rk, k, v) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > 0xffffffffll)
				goto fail;
			pb->rkey[k] = (uint32_t)json_integer_value(v);
		}
		snprintf(pb->location, sizeof(pb->location), "%s",
			 json_is_string(loc) ? json_string_value(loc) : "*");
		p->nbufs++;
	}
	qsort(p->bufs, p->nbufs, sizeof(*p->bufs), mc_peer_buf_cmp);
	why = "priority_matrix";
	if (mc_rdma_topo_parse(json_object_get(desc, "priority_matrix"), p->nic, p->nnics,
			       &p->topo))
		goto fail;
	return p;
fail:
	mc_log_warn("rdma: descriptor of %s has no usable %s", name, why);
	mc_rdma_peer_unref(p);
	return NULL;
}

struct mc_rdma_peer *mc_rdma_peer_ref(struct mc_rdma_peer *p)
{
	if (p)
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	return p;
}

void mc_rdma_peer_unref(struct mc_rdma_peer *p)
{
	if (p == NULL || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	mc_rdma_topo_fini(&p->topo);
	free(p->bufs);
	free(p);
}

const struct mc_rdma_peer_buf *mc_rdma_peer_find(const struct mc_rdma_peer *p, uint64_t addr,
						 uint64_t len)
{
	uint32_t lo = 0, hi = p->nbufs;

	/* Last buffer starting at or before addr. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (p->bufs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || len == 0 || addr + len < addr)
		return NULL;
	if (addr + len > p->bufs[lo - 1].addr + p->bufs[lo - 1].len)
		return NULL;
	return &p->bufs[lo - 1];
}

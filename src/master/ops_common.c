/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the master's RPC handlers share (ops.h): decoding keys, counting batch items, describing
 * replicas on the wire, counting an object's replicas by state, client regular expressions.
 * Single-threaded: the master's reactor thread.
 */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "segment/alloc.h"

struct mc_strv *mc_req_keys_h(struct mc_req *q, uint32_t *n, uint32_t **hashes)
{
	struct mc_strv *keys;
	uint32_t i, *h;

	/* One request's keys are one batch: a client lists a request's blocks head first. */
	mc_object_batch_begin(&q->m->objects);
	if (hashes)
		*hashes = NULL;
	*n = mc_rbuf_count(&q->r, MC_RPC_MAX_BATCH, 4);
	if (q->r.err || *n == 0)
		return NULL;
	/* The views and the keys' hashes in one block (freed with the views). */
	keys = mc_xcalloc(1, (size_t)*n * (sizeof(*keys) + sizeof(*h)));
	h = (uint32_t *)(void *)(keys + *n);
	for (i = 0; i < *n; i++)
		keys[i] = mc_rpc_get_strv(&q->r, MC_RPC_MAX_KEY);
	if (q->r.err == 0) {
		for (i = 0; i < *n; i++)
			h[i] = mc_object_key_hash(&q->m->objects, keys[i].p, keys[i].n);
		mc_object_prefetch_h(&q->m->objects, h, *n);
		if (hashes)
			*hashes = h;
	}
	return keys;
}

struct mc_strv *mc_req_keys(struct mc_req *q, uint32_t *n)
{
	return mc_req_keys_h(q, n, NULL);
}

/* A string field of a replica description: u32 length, bytes (mc_rpc_put_strv). */
static inline uint8_t *mc_desc_str(uint8_t *p, const char *s, size_t n)
{
	mc_put_le32(p, (uint32_t)n);
	memcpy(p + 4, s, n);
	return p + 4 + n;
}

/* The description of a MEMORY replica, the bytes mc_rpc_put_replica writes for it, in one
 * reservation: a batch's PutStart and GetReplicaList answers are mostly these. */
static void mc_put_memory_replica_desc(struct mc_wbuf *w, const struct mc_object *o,
				       const struct mc_replica *r)
{
	const struct mc_segment *seg = r->seg;
	size_t ln = strlen(seg->name), le = strlen(seg->endpoint), lp = strlen(seg->protocol);
	uint8_t *p = mc_wbuf_room(w, 8 + 1 + 1 + 8 + 8 + 12 + ln + le + lp);

	if (p == NULL)
		return;
	mc_put_le64(p, r->id);
	p[8] = (uint8_t)r->type;
	p[9] = (uint8_t)r->status;
	mc_put_le64(p + 10, o->size);
	mc_put_le64(p + 18, seg->base + r->off);
	p = mc_desc_str(p + 26, seg->name, ln);
	p = mc_desc_str(p, seg->endpoint, le);
	(void)mc_desc_str(p, seg->protocol, lp);
}

void mc_put_replica_desc(const struct mc_master *m, struct mc_wbuf *w, const struct mc_object *o,
			 const struct mc_replica *r)
{
	struct mc_rpc_replica d;

	if (r->type == MC_REPLICA_MEMORY) {
		mc_put_memory_replica_desc(w, o, r);
		return;
	}
	memset(&d, 0, sizeof(d));
	d.id = r->id;
	d.type = r->type;
	d.status = r->status;
	d.size = o->size;
	if (r->type == MC_REPLICA_DISK) {
		char path[MC_RPC_MAX_PATH + 1];

		if (mc_fs_path(m, o, path, sizeof(path)) != 0)
			path[0] = '\0';
		d.path = mc_strv_c(path);
		mc_rpc_put_replica(w, &d);
		return;
	}
	if (r->type == MC_REPLICA_LOCAL_DISK) {
		d.client_id = r->seg->client->id;
		d.endpoint = mc_strv_c(r->seg->endpoint);
		d.addr = r->disk_addr;
		mc_rpc_put_replica(w, &d);
		return;
	}
	mc_put_memory_replica_desc(w, o, r);
}

uint32_t mc_object_count_status(struct mc_object *o, uint8_t status)
{
	uint32_t i, n = 0;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		n += r->seg != NULL && r->status == status;
	}
	return n;
}

uint32_t mc_object_count_readable(struct mc_object *o)
{
	uint32_t i, n = 0;

	for (i = 0; i < o->nrep; i++)
		n += mc_replica_readable(mc_object_replica(o, i));
	return n;
}

/* Compile a client regex (POSIX extended).  Returns 0 or MC_ERR_INVALID_PARAMS. */
int mc_req_regex(struct mc_req *q, regex_t *re, struct mc_strv pat)
{
	char *s = mc_xstrndup(pat.p, pat.n);
	int rc = regcomp(re, s, REG_EXTENDED | REG_NOSUB);

	if (rc != 0)
		mc_log_warn("bad regex '%s' from %s", s, q->peer);
	free(s);
	return rc ? MC_ERR_INVALID_PARAMS : 0;
}

int mc_object_key_matches(const regex_t *re, const struct mc_object *o)
{
	char buf[MC_RPC_MAX_KEY + 1];

	memcpy(buf, o->key, o->key_len);
	buf[o->key_len] = '\0';
	return regexec(re, buf, 0, NULL, 0) == 0;
}

int mc_req_keys_each(struct mc_req *q, int (*fn)(struct mc_req *q, struct mc_object *o))
{
	struct mc_strv *keys;
	uint32_t n, i, *h;

	keys = mc_req_keys_h(q, &n, &h);
	if (!mc_req_done(q)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		int r = fn(q, mc_object_find_h(&q->m->objects, keys[i].p, keys[i].n, h[i]));

		mc_wbuf_i32(q->out, r);
		mc_req_item(q, r);
	}
	free(keys);
	return 0;
}

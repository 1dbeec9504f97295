/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's table of RPC operations, made from the list in src/proto/rpc_ops.h, and the
 * dispatcher: one request frame in, exactly one response frame appended.  Every request is
 * counted under its opcode (requests, failures; batch ones also partial successes, items and
 * failed items), and the admin server exports those counters under the table's metric names.
 * Also the helpers the handlers share (ops.h).
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

#define MC_OP_CHECK(sym, code, name, metric, batch, durable, handler) \
	_Static_assert(code > 0 && code < MC_METRICS_MAX_OP, "opcode " #sym " out of range");
MC_RPC_OPS(MC_OP_CHECK)
#undef MC_OP_CHECK

/* In opcode order, for the admin server's metrics. */
static const struct mc_master_op mc_master_op_list[] = {
#define MC_OP_ENTRY(sym, code, name, metric, batch, durable, handler) \
	{ code, name, metric, batch, durable, mc_op_##handler },
	MC_RPC_OPS(MC_OP_ENTRY)
#undef MC_OP_ENTRY
};

/* Positions in mc_master_op_list. */
enum {
#define MC_OP_POS(sym, code, name, metric, batch, durable, handler) MC_OP_POS_##sym,
	MC_RPC_OPS(MC_OP_POS)
#undef MC_OP_POS
	MC_OP_COUNT
};

/* By opcode, for the dispatcher: position in mc_master_op_list + 1 (0: not an operation). */
static const uint8_t mc_master_op_index[MC_METRICS_MAX_OP] = {
#define MC_OP_INDEX(sym, code, name, metric, batch, durable, handler) [code] = MC_OP_POS_##sym + 1,
	MC_RPC_OPS(MC_OP_INDEX)
#undef MC_OP_INDEX
};

const struct mc_master_op *mc_master_op_get(uint16_t op)
{
	if (op >= MC_METRICS_MAX_OP || mc_master_op_index[op] == 0)
		return NULL;
	return &mc_master_op_list[mc_master_op_index[op] - 1];
}

const struct mc_master_op *mc_master_ops(size_t *n)
{
	*n = MC_OP_COUNT;
	return mc_master_op_list;
}

/* Decode "u32 n, n x str" into a malloc'ed array of views (NULL when n == 0). */
struct mc_strv *mc_req_keys(struct mc_req *q, uint32_t *n)
{
	struct mc_strv *keys;
	uint32_t i;

	*n = mc_rbuf_count(&q->r, MC_RPC_MAX_BATCH, 4);
	if (q->r.err || *n == 0)
		return NULL;
	keys = mc_xcalloc(*n, sizeof(*keys));
	for (i = 0; i < *n; i++)
		keys[i] = mc_rpc_get_strv(&q->r, MC_RPC_MAX_KEY);
	return keys;
}

/* The decoded body must have been consumed exactly. */
int mc_req_done(struct mc_req *q)
{
	return q->r.err == 0 && q->r.left == 0;
}

void mc_req_item(struct mc_req *q, int code)
{
	q->ctr->items++;
	if (code < 0)
		q->ctr->failed_items++;
}

void mc_put_replica_desc(const struct mc_master *m, struct mc_wbuf *w, const struct mc_object *o,
			 const struct mc_replica *r)
{
	struct mc_rpc_replica d;

	memset(&d, 0, sizeof(d));
	d.id = r->id;
	d.type = r->type;
	d.status = r->status;
	d.size = o->size;
	if (r->type == MC_REPLICA_DISK) {
		char path[MC_RPC_MAX_PATH + 1];

		if (mc_fs_path(m, o->key, o->key_len, path, sizeof(path)) != 0)
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
	d.addr = r->seg->base + mc_alloc_block_offset(r->blk);
	d.segment_name = mc_strv_c(r->seg->name);
	d.endpoint = mc_strv_c(r->seg->endpoint);
	d.protocol = mc_strv_c(r->seg->protocol);
	mc_rpc_put_replica(w, &d);
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

void mc_master_handle(struct mc_master *m, const struct mc_rpc_hdr *h, const uint8_t *body,
		      struct mc_wbuf *out, const char *peer)
{
	struct mc_op_counters dummy;
	struct mc_req q = {
		.m = m, .out = out, .peer = peer, .now = mc_master_now(m),
		.op = mc_master_op_get(h->opcode),
	};
	size_t start = out->len;
	uint64_t failed_before;
	int rc;

	memset(&dummy, 0, sizeof(dummy));
	q.ctr = h->opcode < MC_METRICS_MAX_OP ? &m->metrics.op[h->opcode] : &dummy;
	failed_before = q.ctr->failed_items;
	q.ctr->requests++;
	mc_rbuf_init(&q.r, body, h->body_len);
	mc_rpc_frame_begin(out, MC_RPC_RESPONSE, h->opcode, 0, h->req_id);
	if (q.op != NULL) {
		rc = q.op->handle(&q);
	} else {
		mc_log_warn("unknown opcode %u from %s", h->opcode, peer);
		rc = MC_ERR_NOT_SUPPORTED;
	}
	if (rc == 0 && out->err)
		rc = MC_ERR_INTERNAL;
	if (rc != 0) {
		if (rc == MC_ERR_INVALID_PARAMS && q.r.err)
			mc_log_warn("malformed %s body (%u bytes) from %s", mc_rpc_op_name(h->opcode),
				    h->body_len, peer);
		out->len = start;
		out->err = 0;
		mc_rpc_frame_begin(out, MC_RPC_RESPONSE, h->opcode, rc, h->req_id);
		q.ctr->failures++;
	} else if (q.op->batch) {
		uint64_t failed = q.ctr->failed_items - failed_before;

		if (failed > 0)
			q.ctr->partial++;
	} else if (q.ctr->failed_items != failed_before) {
		q.ctr->failures++;
	}
	mc_rpc_frame_end(out, start);
}

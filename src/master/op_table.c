/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's table of RPC operations, made from the list in src/proto/rpc_ops.h, and the
 * dispatcher: one request frame in, exactly one response frame appended.  Every request is
 * counted under its opcode (requests, failures; batch ones also partial successes, items and
 * failed items), and the admin server exports those counters under the table's metric names.
 * Single-threaded: the master's reactor thread.
 */
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "master/ops.h"

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
		/* The request works in its connection's tenant's namespace (tenants.c). */
		q.tenant = m->conn_tenant;
		m->objects.tenant = q.tenant;
		m->objects.all_tenants = 0;
		rc = q.op->handle(&q);
		m->objects.tenant = 0;
		m->objects.all_tenants = 1;
		/* The keys of one request are one batch for the eviction order (object_table.h). */
		mc_object_batch_end(&m->objects);
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

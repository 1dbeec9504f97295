/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_OPS_H
#define MC_MASTER_OPS_H

/*
 * The master's RPC operations: the table made from src/proto/rpc_ops.h, the request every
 * handler gets, and the helpers the handlers share.
 *
 * mc_master_handle (op_table.c) looks the opcode up, counts the request, and calls the handler.
 * A handler decodes its whole body before acting on it, so a malformed body changes nothing and
 * gets MC_ERR_INVALID_PARAMS; it appends the response body to q->out and returns 0, or returns
 * the frame's error code (the dispatcher then drops what it appended).  Per-item failures of
 * batch operations are item codes (mc_req_item), not frame errors.  The handlers live by
 * concern: ops_put.c (put, upsert: start, end, revoke), ops_read.c (get replica lists, exist),
 * ops_remove.c (remove, remove by regex, remove all, replica clear), ops_client.c (ping,
 * service ready, mount, re-mount and unmount of segments, client queries, transfer-failure
 * reports), ops_checksum.c (reports of corrupt replicas), tier_ssd_rpc.c (SSD areas) and tier_fsdir.c (the shared directory).
 * Single-threaded: the master's reactor thread.
 */
#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"
#include "proto/rpc.h"

struct mc_req {
	struct mc_master *m;
	const struct mc_master_op *op;	/* the table's entry of the request's opcode */
	struct mc_rbuf r;		/* the request body */
	struct mc_wbuf *out;		/* the response body is appended here */
	struct mc_op_counters *ctr;	/* the opcode's counters */
	const char *peer;		/* host:port of the client, for log lines */
	int64_t now;			/* mc_master_now when the request came in */
	int space_coming;		/* PutStart: an item refused for space may fit soon */
	uint16_t tenant;		/* the connection's tenant (tenants.c; 0: default) */
};

/* The tenant whose objects the request names. */
static inline uint16_t mc_req_tenant(const struct mc_req *q)
{
	return q->tenant;
}

typedef int (*mc_op_handler)(struct mc_req *q);

struct mc_master_op {
	uint16_t opcode;
	const char *name;	/* for log lines */
	const char *metric;	/* master_<metric>_requests_total...; NULL: not exported */
	uint8_t batch;		/* per-item failures make a partial success */
	uint8_t durable;	/* success changes durable state (see rpc_ops.h) */
	mc_op_handler handle;
};

/* The table's entry of opcode op, or NULL for an opcode the master does not serve. */
const struct mc_master_op *mc_master_op_get(uint16_t op);
/* The entries in opcode order: *n of them. */
const struct mc_master_op *mc_master_ops(size_t *n);

/* Decode "u32 n, n x str" into a malloc'ed array of views (NULL when n == 0), and start
 * loading what looking them up will read (mc_object_prefetch). */
struct mc_strv *mc_req_keys(struct mc_req *q, uint32_t *n);
/* The same, and *hashes the keys' mc_object_key_hash for the _h lookups (in the views' block:
 * valid until it is freed; NULL when the body is malformed or has no key). */
struct mc_strv *mc_req_keys_h(struct mc_req *q, uint32_t *n, uint32_t **hashes);
/* A body that is "keys" alone: append u32 n and, per key, the i32 fn(q, its object or NULL)
 * returns (a negative one counts as a failed item).  0, or INVALID_PARAMS for a malformed body
 * (nothing appended). */
int mc_req_keys_each(struct mc_req *q, int (*fn)(struct mc_req *q, struct mc_object *o));
/* The decoded body has been consumed exactly, without error. */
static inline int mc_req_done(struct mc_req *q)
{
	return q->r.err == 0 && q->r.left == 0;
}

/* Count one item of a batch and whether it failed (code < 0). */
static inline void mc_req_item(struct mc_req *q, int code)
{
	q->ctr->items++;
	if (code < 0)
		q->ctr->failed_items++;
}

/* Replicas of o in state status, on a segment. */
uint32_t mc_object_count_status(struct mc_object *o, uint8_t status);
/* Replicas of o that readers may use. */
uint32_t mc_object_count_readable(struct mc_object *o);
/* Append the wire description of replica r of o. */
void mc_put_replica_desc(const struct mc_master *m, struct mc_wbuf *w, const struct mc_object *o,
			 const struct mc_replica *r);
/* Compile a client's regex (POSIX extended, no sub-matches).  0, or MC_ERR_INVALID_PARAMS with
 * a log line naming the peer. */
int mc_req_regex(struct mc_req *q, regex_t *re, struct mc_strv pat);
/* Does the regex compiled by mc_req_regex match the key of o? */
int mc_object_key_matches(const regex_t *re, const struct mc_object *o);

/* The handlers, one per line of rpc_ops.h (single and batch forms share one). */
#define MC_OP_DECLARE(sym, code, name, metric, batch, durable, handler) \
	int mc_op_##handler(struct mc_req *q);
MC_RPC_OPS(MC_OP_DECLARE)
#undef MC_OP_DECLARE

#endif

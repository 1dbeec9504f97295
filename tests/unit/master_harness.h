/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TEST_MASTER_HARNESS_H
#define MC_TEST_MASTER_HARNESS_H

/*
 * A master in-process for unit tests: a struct mc_master (M) on a fake clock (fake_now), fed
 * encoded request frames through mc_master_handle, the dispatcher the RPC server calls; call()
 * returns a response's status and leaves its body in resp; put_start, put_finish, put, get_list
 * and exist make one-key calls, put_batch_hint a batch put.  No sockets: the only event is the
 * deferred reaping of unmounted segments.  One master per test program.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/wire.h"
#include "master/ops.h"
#include "master/tasks.h"
#include "proto/rpc.h"

static int64_t fake_now = 1000000;

static int64_t fake_clock(void *arg)
{
	return *(int64_t *)arg;
}

static struct mc_master M;
static struct mc_uuid client_id, seg_id;
static uint64_t next_req = 1;

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	if (mc_master_reap(arg, 4096))
		event_active(((struct mc_master *)arg)->ev_reap, EV_TIMEOUT, 0);
}

/* policy: --eviction_policy, or NULL for the default. */
static void master_init(struct mc_master *m, const char *policy)
{
	struct mc_master_config *c = &m->cfg;

	memset(m, 0, sizeof(*m));
	c->eviction_policy = (char *)policy;
	c->default_kv_lease_ttl = 1000;
	c->default_kv_soft_pin_ttl = 1800000;
	c->max_kv_soft_pin_ttl = 86400000;
	c->allow_evict_soft_pinned_objects = 1;
	c->eviction_ratio = 0.05;
	c->eviction_high_watermark_ratio = 0.9;
	c->put_start_discard_timeout_sec = 30;
	c->put_start_release_timeout_sec = 600;
	c->client_ttl = 10;
	c->client_suspicion_ttl_sec = 20;
	c->dormant_segment_ttl_sec = 600;
	c->unhealthy_segment_backoff_sec = 5;
	c->unhealthy_segment_max_backoff_sec = 60;
	c->remount_grace_period_sec = 30;
	c->offloading_queue_limit = 50000;
	c->offload_task_timeout_sec = 30;
	c->promotion_admission_threshold = 2;
	c->rpc_max_frame_bytes = 64u << 20;
	c->max_connections = 4096;
	c->cluster_id = (char *)"mooncake_cluster";
	c->root_fs_dir = (char *)"";
	c->persist_path = (char *)"";
	c->up.offload_cap_ratio = 0.5;
	c->up.promotion_queue_limit = 50000;
	c->up.promotion_max_per_heartbeat = 1;
	c->up.global_file_segment_size = INT64_MAX;
	c->tasks.max_total_finished_tasks = 10000;
	c->tasks.max_total_pending_tasks = 10000;
	c->tasks.max_total_processing_tasks = 10000;
	c->tasks.pending_task_timeout_sec = 300;
	c->tasks.processing_task_timeout_sec = 300;
	c->tasks.max_retry_attempts = 10;
	m->clock_ms = fake_clock;
	m->clock_arg = &fake_now;
	m->base = event_base_new();
	m->rng = 42;
	mc_master_tables_init(m);
	mc_fs_init(m);
	mc_tasks_init(m);
	m->ev_reap = event_new(m->base, -1, 0, on_reap, m);
}

static void master_fini(struct mc_master *m)
{
	event_free(m->ev_reap);
	mc_tasks_fini(m);
	mc_master_tables_fini(m);
	mc_fs_fini(m);
	event_base_free(m->base);
}

/* One request: frame it, hand it to the dispatcher, check the response frame's header and
 * return its status; the response body is left in *resp (valid until the next call). */
static struct mc_wbuf out;
static struct mc_rbuf resp;

static int call(uint16_t op, const struct mc_wbuf *body)
{
	struct mc_rpc_hdr h = {
		.magic = MC_RPC_MAGIC, .version = MC_RPC_VERSION, .kind = MC_RPC_REQUEST,
		.opcode = op, .body_len = (uint32_t)body->len, .status = 0, .req_id = next_req++,
	};
	struct mc_rpc_hdr rh;

	mc_wbuf_reset(&out);
	mc_master_handle(&M, &h, body->data, &out, "test:1");
	if (out.err || out.len < MC_RPC_HDR_LEN ||
	    mc_rpc_hdr_decode(out.data, &rh, 1u << 30) != 0 || rh.kind != MC_RPC_RESPONSE ||
	    rh.opcode != op || rh.req_id != h.req_id ||
	    out.len != MC_RPC_HDR_LEN + (size_t)rh.body_len) {
		printf("# bad response frame to opcode %u\n", op);
		return -99999;
	}
	mc_rbuf_init(&resp, out.data + MC_RPC_HDR_LEN, rh.body_len);
	return rh.status;
}

static void put_keys(struct mc_wbuf *w, const char *const *keys, uint32_t n)
{
	uint32_t i;

	mc_wbuf_u32(w, n);
	for (i = 0; i < n; i++)
		mc_rpc_put_strv(w, mc_strv_c(keys[i]));
}

static int mount(const struct mc_uuid *sid, uint64_t base, uint64_t size)
{
	struct mc_wbuf b;
	struct mc_rpc_segment s = {
		.id = *sid, .name = mc_strv_c("127.0.0.1:17001"), .base = base, .size = size,
		.endpoint = mc_strv_c("127.0.0.1:17001"), .protocol = mc_strv_c("tcp"),
	};
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_segment(&b, &s);
	st = call(MC_OP_MOUNT_SEGMENT, &b);
	mc_wbuf_fini(&b);
	return st;
}

/* PutStart or UpsertStart (op) of one key with config cfg: the item code (frame errors as they
 * are); *nrep (may be NULL) its replicas, *addr (may be NULL) the first one's address. */
static int put_start_cfg(uint16_t op, const char *key, uint64_t size,
			 const struct mc_rpc_config *cfg, uint32_t *nrep, uint64_t *addr)
{
	struct mc_wbuf b;
	int st, code;
	uint32_t i, n;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_config(&b, cfg);
	mc_wbuf_u32(&b, 1);
	mc_rpc_put_strv(&b, mc_strv_c(key));
	mc_wbuf_u64(&b, size);
	st = call(op, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	if (mc_rbuf_u32(&resp) != 1)
		return -99998;
	code = mc_rbuf_i32(&resp);
	n = mc_rbuf_u32(&resp);
	if (nrep)
		*nrep = n;
	for (i = 0; i < n; i++) {
		struct mc_rpc_replica r;

		mc_rpc_get_replica(&resp, &r);
		if (i == 0 && addr)
			*addr = r.addr;
	}
	mc_rbuf_u8(&resp);	/* space coming */
	return resp.err || resp.left ? -99997 : code;
}

/* PutStart of one key, hard-pinned or not: as put_start_cfg. */
static int put_start(const char *key, uint64_t size, int hard_pin, uint32_t *nrep,
		     uint64_t *addr)
{
	struct mc_rpc_config cfg;

	mc_rpc_config_default(&cfg);
	cfg.with_hard_pin = (uint8_t)hard_pin;
	return put_start_cfg(MC_OP_PUT_START, key, size, &cfg, nrep, addr);
}

/* PutEnd / PutRevoke (op) of one key, replica type ALL: the item code. */
static int put_finish(uint16_t op, const char *key)
{
	struct mc_wbuf b;
	int st, code;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_wbuf_u8(&b, MC_REPLICA_ALL);
	put_keys(&b, &key, 1);
	st = call(op, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	if (mc_rbuf_u32(&resp) != 1)
		return -99998;
	code = mc_rbuf_i32(&resp);
	return resp.err || resp.left ? -99997 : code;
}

/* Put and end one object: 0 or the first failing code. */
static int put(const char *key, uint64_t size, int hard_pin)
{
	int rc = put_start(key, size, hard_pin, NULL, NULL);

	return rc ? rc : put_finish(MC_OP_PUT_END, key);
}

/* The body of a BatchPutStart (or BatchUpsertStart) of n keys with config cfg: key i of
 * sizes[i] bytes, or of size bytes when sizes is NULL; the eviction hint when cfg has one. */
static inline void put_start_body(struct mc_wbuf *b, const struct mc_rpc_config *cfg,
				  const char *const *keys, const uint64_t *sizes, uint64_t size,
				  uint32_t n)
{
	uint32_t i;

	mc_rpc_put_uuid(b, &client_id);
	mc_rpc_put_config(b, cfg);
	mc_wbuf_u32(b, n);
	for (i = 0; i < n; i++) {
		mc_rpc_put_strv(b, mc_strv_c(keys[i]));
		mc_wbuf_u64(b, sizes ? sizes[i] : size);
	}
	mc_rpc_put_evict_hint(b, cfg);
}

/* An answer of n per-key i32 codes in resp: into codes[]; 0, or -99998 / -99997 for a
 * malformed one. */
static inline int read_codes(uint32_t n, int *codes)
{
	uint32_t i;

	if (mc_rbuf_u32(&resp) != n)
		return -99998;
	for (i = 0; i < n; i++)
		codes[i] = mc_rbuf_i32(&resp);
	return resp.err || resp.left ? -99997 : 0;
}

/* PutEnd-like op of n keys, the checksum section cs (NULL: none; raw, when given, is appended
 * as is instead): the frame status, or 0 with the item codes in codes[]. */
static inline int put_end_cs(uint16_t op, const char *const *keys, uint32_t n,
			     const struct mc_rpc_checksum *cs, const struct mc_wbuf *raw,
			     int *codes)
{
	struct mc_wbuf b;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_wbuf_u8(&b, MC_REPLICA_ALL);
	put_keys(&b, keys, n);
	if (cs)
		mc_rpc_put_checksums(&b, cs, n);
	if (raw)
		mc_wbuf_put(&b, raw->data, raw->len);
	st = call(op, &b);
	mc_wbuf_fini(&b);
	return st ? st : read_codes(n, codes);
}

/* BatchPutStart and BatchPutEnd of n keys of size bytes in one request each (a connector's
 * batch); hint: the eviction hint byte the PutStart ends with (MC_EVICT_HINT_*), or -1 for
 * none.  0 or the first failing frame status. */
static inline int put_batch_hint(const char *const *keys, uint32_t n, uint64_t size, int hint)
{
	struct mc_wbuf b;
	struct mc_rpc_config cfg;
	int st;

	mc_rpc_config_default(&cfg);
	cfg.has_evict_hint = hint >= 0;
	cfg.evict_hint = (uint8_t)hint;
	mc_wbuf_init(&b);
	put_start_body(&b, &cfg, keys, NULL, size, n);
	st = call(MC_OP_BATCH_PUT_START, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_wbuf_u8(&b, MC_REPLICA_ALL);
	put_keys(&b, keys, n);
	st = call(MC_OP_BATCH_PUT_END, &b);
	mc_wbuf_fini(&b);
	return st;
}

/* GetReplicaList of one key: the item code; *nrep and *addr of its first replica. */
static int get_list(const char *key, uint32_t *nrep, uint64_t *addr)
{
	struct mc_wbuf b;
	int st, code;
	uint32_t i, n;

	mc_wbuf_init(&b);
	put_keys(&b, &key, 1);
	st = call(MC_OP_GET_REPLICA_LIST, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	mc_rbuf_u64(&resp);	/* lease ttl */
	if (mc_rbuf_u32(&resp) != 1)
		return -99998;
	code = mc_rbuf_i32(&resp);
	n = mc_rbuf_u32(&resp);
	*nrep = n;
	for (i = 0; i < n; i++) {
		struct mc_rpc_replica r;

		mc_rpc_get_replica(&resp, &r);
		if (i == 0)
			*addr = r.addr;
	}
	{
		struct mc_rpc_checksum cs;

		if (mc_rpc_get_checksums(&resp, &cs, 1) != 1)	/* always sent */
			return -99996;
	}
	return resp.err || resp.left ? -99997 : code;
}

/* ExistKey of one key: 1, 0, or a frame error. */
static int exist(const char *key)
{
	struct mc_wbuf b;
	int st, res;

	mc_wbuf_init(&b);
	put_keys(&b, &key, 1);
	st = call(MC_OP_EXIST_KEY, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	if (mc_rbuf_u32(&resp) != 1)
		return -99998;
	res = mc_rbuf_i32(&resp);
	return resp.err || resp.left ? -99997 : res;
}

#endif

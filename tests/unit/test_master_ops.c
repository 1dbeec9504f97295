/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's RPC operations in-process: a struct mc_master on a fake clock, fed encoded
 * request frames through mc_master_handle (the dispatcher the RPC server calls), checking the
 * decoded responses.  No sockets: the only event is the deferred reaping of unmounted segments,
 * run by hand.  Covers the operation table, put start/end/revoke (and preemption of an
 * unfinished put when the clock passes put_start_discard_timeout_sec), get replica lists with
 * leases that end as the clock advances, exist, remove with leases (force), pins, unfinished
 * puts, mount/unmount and remove_all.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/wire.h"
#include "master/ops.h"
#include "proto/rpc.h"
#include "tap.h"

/* Check got == want, printing both. */
#define is(got, want, ...)                                                               \
	do {                                                                             \
		long long is_g_ = (long long)(got), is_w_ = (long long)(want);           \
		ok(is_g_ == is_w_, __VA_ARGS__);                                         \
		if (is_g_ != is_w_)                                                      \
			printf("#   got %lld, want %lld\n", is_g_, is_w_);               \
	} while (0)

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

static void master_init(struct mc_master *m)
{
	struct mc_master_config *c = &m->cfg;

	memset(m, 0, sizeof(*m));
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
	m->clock_ms = fake_clock;
	m->clock_arg = &fake_now;
	m->base = event_base_new();
	m->rng = 42;
	mc_master_tables_init(m);
	mc_fs_init(m);
	m->ev_reap = event_new(m->base, -1, 0, on_reap, m);
}

static void master_fini(struct mc_master *m)
{
	event_free(m->ev_reap);
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

static int unmount(const struct mc_uuid *sid)
{
	struct mc_wbuf b;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_uuid(&b, sid);
	st = call(MC_OP_UNMOUNT_SEGMENT, &b);
	mc_wbuf_fini(&b);
	return st;
}

/* PutStart of one key: the item code (frame errors as they are); *addr the first replica's. */
static int put_start(const char *key, uint64_t size, int hard_pin, uint32_t *nrep,
		     uint64_t *addr)
{
	struct mc_wbuf b;
	struct mc_rpc_config cfg;
	int st, code;
	uint32_t i, n;

	mc_rpc_config_default(&cfg);
	cfg.with_hard_pin = (uint8_t)hard_pin;
	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_config(&b, &cfg);
	mc_wbuf_u32(&b, 1);
	mc_rpc_put_strv(&b, mc_strv_c(key));
	mc_wbuf_u64(&b, size);
	st = call(MC_OP_PUT_START, &b);
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

static int remove_key(const char *key, int force)
{
	struct mc_wbuf b;
	int st, code;

	mc_wbuf_init(&b);
	mc_wbuf_u8(&b, (uint8_t)force);
	put_keys(&b, &key, 1);
	st = call(MC_OP_REMOVE, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	if (mc_rbuf_u32(&resp) != 1)
		return -99998;
	code = mc_rbuf_i32(&resp);
	return resp.err || resp.left ? -99997 : code;
}

static int64_t remove_all(int force)
{
	struct mc_wbuf b;
	int st;
	int64_t n;

	mc_wbuf_init(&b);
	mc_wbuf_u8(&b, (uint8_t)force);
	st = call(MC_OP_REMOVE_ALL, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	n = mc_rbuf_i64(&resp);
	return resp.err || resp.left ? -99997 : n;
}

/* Put and end one object: 0 or the first failing code. */
static int put(const char *key, uint64_t size, int hard_pin)
{
	int rc = put_start(key, size, hard_pin, NULL, NULL);

	return rc ? rc : put_finish(MC_OP_PUT_END, key);
}

static void test_table(void)
{
	const struct mc_master_op *ops;
	size_t n, i, j;
	int names_ok = 1, metrics_ok = 1, index_ok = 1;

	ops = mc_master_ops(&n);
	is(n, 37, "the table has the 37 operations of rpc_ops.h");
	for (i = 0; i < n; i++) {
		index_ok &= mc_master_op_get(ops[i].opcode) == &ops[i] && ops[i].handle != NULL;
		names_ok &= !strcmp(ops[i].name, mc_rpc_op_name(ops[i].opcode));
		for (j = 0; j < i; j++)
			metrics_ok &= ops[i].metric == NULL || ops[j].metric == NULL ||
				      strcmp(ops[i].metric, ops[j].metric) != 0;
		metrics_ok &= ops[i].metric == NULL ||
			      (ops[i].batch == !strncmp(ops[i].metric, "batch_", 6));
	}
	ok(index_ok, "every operation is found by its opcode and has a handler");
	ok(names_ok, "op names come from the same table as mc_rpc_op_name");
	ok(metrics_ok, "metric names are unique; batch ones (and only they) start with batch_");
	ok(mc_master_op_get(0) == NULL && mc_master_op_get(99) == NULL &&
	   mc_master_op_get(65535) == NULL, "opcodes outside the table are not found");
	ok(mc_master_op_get(MC_OP_PUT_START)->durable && !mc_master_op_get(MC_OP_PING)->durable &&
	   !mc_master_op_get(MC_OP_REMOUNT_SEGMENT)->durable,
	   "durable: PutStart is, Ping and ReMountSegment are not");
}

static void test_unknown_and_malformed(void)
{
	struct mc_wbuf b;

	mc_wbuf_init(&b);
	is(call(90, &b), MC_ERR_NOT_SUPPORTED, "an unknown opcode is answered NOT_SUPPORTED");
	is(M.metrics.op[90].requests, 1, "and counted under its opcode");
	is(call(999, &b), MC_ERR_NOT_SUPPORTED, "so is one past the counters");
	mc_wbuf_u8(&b, 1);	/* a truncated GetReplicaList body */
	is(call(MC_OP_GET_REPLICA_LIST, &b), MC_ERR_INVALID_PARAMS,
	   "a malformed body is answered INVALID_PARAMS");
	is(M.metrics.op[MC_OP_GET_REPLICA_LIST].failures, 1, "and counted as a failure");
	mc_wbuf_fini(&b);
}

static void test_put_get(void)
{
	uint32_t nrep = 0;
	uint64_t addr = 0, gaddr = 0;

	is(put_start("k1", 4096, 0, &nrep, &addr), 0, "PutStart of k1");
	ok(nrep == 1 && addr >= 0x10000000 && addr < 0x10000000 + (64u << 20),
	   "one replica inside the mounted segment (nrep %u addr 0x%" PRIx64 ")", nrep, addr);
	is(exist("k1"), 0, "an object being written does not exist yet");
	is(get_list("k1", &nrep, &gaddr), MC_ERR_REPLICA_IS_NOT_READY,
	   "GetReplicaList of an object being written: REPLICA_IS_NOT_READY");
	is(put_start("k1", 4096, 0, NULL, NULL), MC_ERR_OBJECT_ALREADY_EXISTS,
	   "a second PutStart of a key being written is refused");
	is(remove_key("k1", 0), MC_ERR_REPLICA_IS_NOT_READY,
	   "Remove of an object being written: REPLICA_IS_NOT_READY");
	is(put_finish(MC_OP_PUT_END, "k1"), 0, "PutEnd of k1");
	is(put_finish(MC_OP_PUT_END, "nope"), MC_ERR_OBJECT_NOT_FOUND,
	   "PutEnd of an unknown key: OBJECT_NOT_FOUND");
	is(get_list("k1", &nrep, &gaddr), 0, "GetReplicaList of k1");
	ok(nrep == 1 && gaddr == addr, "it lists the replica PutStart gave (0x%" PRIx64 ")", gaddr);
	is(M.metrics.op[MC_OP_PUT_START].requests, 2, "PutStart requests counted");
	is(M.metrics.op[MC_OP_PUT_START].failures, 1, "the refused one counted as a failure");

	/* The read lease: Remove is refused until the fake clock passes it. */
	is(remove_key("k1", 0), MC_ERR_OBJECT_HAS_LEASE, "Remove under a read lease: HAS_LEASE");
	fake_now += 999;
	is(remove_key("k1", 0), MC_ERR_OBJECT_HAS_LEASE, "still leased 999 ms later (lease 1000)");
	fake_now += 2;
	is(remove_key("k1", 0), 0, "removed once the clock passed the lease");
	is(exist("k1"), 0, "and gone");
	is(get_list("k1", &nrep, &gaddr), MC_ERR_OBJECT_NOT_FOUND, "GetReplicaList: NOT_FOUND");

	/* ExistKey grants a lease too; force removes through it. */
	is(put("k2", 4096, 0), 0, "put k2");
	fake_now += 1001;
	is(exist("k2"), 1, "ExistKey of k2");
	is(remove_key("k2", 0), MC_ERR_OBJECT_HAS_LEASE, "ExistKey leased it");
	is(remove_key("k2", 1), 0, "Remove with force ignores the lease");

	/* Pins keep objects from eviction, not from removal. */
	is(put("pinned", 4096, 1), 0, "put a hard-pinned object");
	fake_now += 1001;
	is(mc_master_evict(&M, 1u << 20, 0), 0, "eviction does not take a hard-pinned object");
	is(remove_key("pinned", 0), 0, "but Remove does");
}

static void test_revoke_and_preempt(void)
{
	uint32_t nrep;
	uint64_t a1 = 0, a2 = 0;

	is(put_start("r1", 8192, 0, NULL, NULL), 0, "PutStart of r1");
	is(put_finish(MC_OP_PUT_REVOKE, "r1"), 0, "PutRevoke of r1");
	is(exist("r1"), 0, "a revoked put leaves nothing");
	is(get_list("r1", &nrep, &a1), MC_ERR_OBJECT_NOT_FOUND, "r1 not found");

	is(put_start("p1", 8192, 0, NULL, &a1), 0, "PutStart of p1, never ended");
	fake_now += 30 * 1000 - 1;
	is(put_start("p1", 8192, 0, NULL, NULL), MC_ERR_OBJECT_ALREADY_EXISTS,
	   "another PutStart within put_start_discard_timeout_sec is refused");
	fake_now += 2;
	is(put_start("p1", 8192, 0, NULL, &a2), 0,
	   "after put_start_discard_timeout_sec the unfinished put is preempted");
	ok(a2 != a1, "the new put does not reuse the preempted bytes (parked until released)");
	is(put_finish(MC_OP_PUT_END, "p1"), 0, "PutEnd of the new put");
	fake_now += 1001;
	is(remove_key("p1", 0), 0, "remove p1");
}

static void test_remove_all_and_unmount(void)
{
	struct mc_uuid seg2;
	uint32_t nrep;
	uint64_t addr;
	int i, all_ok = 1;

	for (i = 0; i < 5; i++) {
		char key[16];

		snprintf(key, sizeof(key), "all/%d", i);
		all_ok &= put(key, 4096, 0) == 0;
	}
	ok(all_ok, "five objects put");
	is(get_list("all/0", &nrep, &addr), 0, "all/0 read (leased)");
	is(put_start("all/busy", 4096, 0, NULL, NULL), 0, "one more being written");
	is(remove_all(0), 4, "RemoveAll without force: all but the leased and the unfinished");
	is(exist("all/0"), 1, "the leased one stays");
	is(remove_all(1), 1, "RemoveAll with force takes the leased one, not the unfinished one");
	is(M.objects.count, 1, "only the unfinished put is left");
	is(put_finish(MC_OP_PUT_REVOKE, "all/busy"), 0, "revoke it");
	is(M.objects.count, 0, "the table is empty");

	/* A second segment; objects on a segment go when it is unmounted. */
	memset(&seg2, 0x22, sizeof(seg2));
	is(mount(&seg2, 0x40000000, 64u << 20), 0, "MountSegment of a second segment");
	is(mount(&seg2, 0x40000000, 64u << 20), 0, "mounting it again is idempotent");
	is(M.nsegs, 2, "two segments");
	is(M.total_capacity, 128u << 20, "capacity counts both");
	for (i = 0; i < 8; i++) {
		char key[16];

		snprintf(key, sizeof(key), "u/%d", i);
		all_ok &= put(key, 1u << 20, 0) == 0;
	}
	ok(all_ok, "eight 1 MiB objects put over both segments");
	is(unmount(&seg2), 0, "UnmountSegment of the second segment");
	is(M.nsegs, 1, "one segment left at once");
	event_base_loop(M.base, EVLOOP_NONBLOCK);
	for (i = 0, nrep = 0; i < 8; i++) {
		char key[16];

		snprintf(key, sizeof(key), "u/%d", i);
		nrep += exist(key) == 1;
	}
	ok(nrep > 0 && nrep < 8 && nrep == M.objects.count,
	   "the objects on it are gone, those on the first stay (%u of 8)", nrep);
	is(unmount(&seg2), 0, "unmounting an unknown segment again is no error");
	fake_now += 1001;
	is(remove_all(0), nrep, "RemoveAll takes the rest");
	is(M.allocated, 8192, "only the preempted put's bytes stay, parked");
	mc_master_release_discards(&M, fake_now, 0);
	is(M.allocated, 8192, "until put_start + put_start_release_timeout_sec");
	fake_now += 600 * 1000;
	mc_master_release_discards(&M, fake_now, 0);
	is(M.allocated, 0, "then every byte is released");
}

int main(void)
{
	mc_wbuf_init(&out);
	memset(&client_id, 0x11, sizeof(client_id));
	memset(&seg_id, 0x33, sizeof(seg_id));
	master_init(&M);
	test_table();
	test_unknown_and_malformed();
	is(mount(&seg_id, 0x10000000, 64u << 20), 0, "MountSegment of 64 MiB");
	is(M.total_capacity, 64u << 20, "it counts as capacity");
	test_put_get();
	test_revoke_and_preempt();
	test_remove_all_and_unmount();
	master_fini(&M);
	mc_wbuf_fini(&out);
	return tap_done();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's RPC operations in-process: a struct mc_master on a fake clock, fed encoded
 * request frames through mc_master_handle (the dispatcher the RPC server calls), checking the
 * decoded responses.  No sockets: the only event is the deferred reaping of unmounted segments,
 * run by hand.  Covers the operation table, put start/end/revoke (and preemption of an
 * unfinished put when the clock passes put_start_discard_timeout_sec), get replica lists with
 * leases that end as the clock advances, exist, remove with leases (force), pins, unfinished
 * puts, mount/unmount and remove_all, object checksums (PutEnd stores them, GetReplicaList
 * returns them, ReportChecksumMismatch drops corrupt replicas).
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
#include "master_harness.h"

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


static void test_table(void)
{
	const struct mc_master_op *ops;
	size_t n, i, j;
	int names_ok = 1, metrics_ok = 1, index_ok = 1;

#define MC_OP_COUNT_ONE(...) +1
	ops = mc_master_ops(&n);
	is(n, 0 MC_RPC_OPS(MC_OP_COUNT_ONE), "the table has every operation of rpc_ops.h");
#undef MC_OP_COUNT_ONE
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

/* ---------------------------------------------------------------- checksums */

static int mount_named(const struct mc_uuid *sid, const char *name, uint64_t base, uint64_t size)
{
	struct mc_wbuf b;
	struct mc_rpc_segment s = {
		.id = *sid, .name = mc_strv_c(name), .base = base, .size = size,
		.endpoint = mc_strv_c(name), .protocol = mc_strv_c("tcp"),
	};
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_segment(&b, &s);
	st = call(MC_OP_MOUNT_SEGMENT, &b);
	mc_wbuf_fini(&b);
	return st;
}

/* PutStart (op: PUT_START or UPSERT_START) of one key with replica_num copies: the item code. */
static int put_start_n(uint16_t op, const char *key, uint64_t size, uint32_t replica_num)
{
	struct mc_rpc_config cfg;

	mc_rpc_config_default(&cfg);
	cfg.replica_num = replica_num;
	return put_start_cfg(op, key, size, &cfg, NULL, NULL);
}

/* (Batch)GetReplicaList of n keys: frame status, or 0 with codes[], nreps[], the first
 * replica id of each in ids[] and the checksum section in cs[] (*with_cs: it was there). */
static int get_lists_cs(const char *const *keys, uint32_t n, int *codes, uint32_t *nreps,
			uint64_t *ids, struct mc_rpc_checksum *cs, int *with_cs)
{
	struct mc_wbuf b;
	uint32_t i, j;
	int st;

	mc_wbuf_init(&b);
	put_keys(&b, keys, n);
	st = call(n > 1 ? MC_OP_BATCH_GET_REPLICA_LIST : MC_OP_GET_REPLICA_LIST, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	mc_rbuf_u64(&resp);
	if (mc_rbuf_u32(&resp) != n)
		return -99998;
	for (i = 0; i < n; i++) {
		codes[i] = mc_rbuf_i32(&resp);
		nreps[i] = mc_rbuf_u32(&resp);
		ids[i] = 0;
		for (j = 0; j < nreps[i]; j++) {
			struct mc_rpc_replica r;

			mc_rpc_get_replica(&resp, &r);
			if (j == 0)
				ids[i] = r.id;
		}
	}
	*with_cs = mc_rpc_get_checksums(&resp, cs, n);
	return resp.err || resp.left ? -99997 : 0;
}

/* ReportChecksumMismatch of one item: the item code (frame errors as they are). */
static int report_corrupt(const struct mc_uuid *cid, const char *key, uint64_t rid,
			  uint64_t expected, uint64_t computed)
{
	struct mc_wbuf b;
	struct mc_rpc_corrupt_replica c = {
		.key = mc_strv_c(key), .replica_id = rid, .expected = expected,
		.computed = computed,
	};
	int st, code;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, cid);
	mc_wbuf_u32(&b, 1);
	mc_rpc_put_corrupt_replica(&b, &c);
	st = call(MC_OP_REPORT_CHECKSUM_MISMATCH, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	if (mc_rbuf_u32(&resp) != 1)
		return -99998;
	code = mc_rbuf_i32(&resp);
	return resp.err || resp.left ? -99997 : code;
}

/* ReMountSegment of the two segments test_checksums uses: the client is then in good
 * standing (only such a client's reports count). */
static int remount_two(const struct mc_uuid *seg2)
{
	struct mc_wbuf b;
	struct mc_rpc_segment s[2] = {
		{ .id = seg_id, .name = mc_strv_c("127.0.0.1:17001"), .base = 0x10000000,
		  .size = 64u << 20, .endpoint = mc_strv_c("127.0.0.1:17001"),
		  .protocol = mc_strv_c("tcp") },
		{ .id = *seg2, .name = mc_strv_c("127.0.0.1:17002"), .base = 0x50000000,
		  .size = 64u << 20, .endpoint = mc_strv_c("127.0.0.1:17002"),
		  .protocol = mc_strv_c("tcp") },
	};
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_wbuf_u32(&b, 2);
	mc_rpc_put_segment(&b, &s[0]);
	mc_rpc_put_segment(&b, &s[1]);
	st = call(MC_OP_REMOUNT_SEGMENT, &b);
	mc_wbuf_fini(&b);
	return st;
}

static void test_checksums(void)
{
	static const char *const three[] = { "cs/zero", "cs/none", "cs/max" };
	const char *one = "cs/one", *old = "cs/old";
	struct mc_rpc_checksum in[3] = { { 1, 0 }, { 0, 0 }, { 1, UINT64_MAX } }, out3[3];
	struct mc_rpc_checksum c1 = { 1, 0x42F0E1EBA9EA3693ull };
	struct mc_uuid seg2, stranger;
	struct mc_wbuf raw;
	int codes[3], with_cs = -1, i, all_ok = 1;
	uint32_t nreps[3];
	uint64_t ids[3];
	uint64_t mismatches0 = M.metrics.checksum_mismatches;

	/* PutEnd with a checksum; GetReplicaList returns it. */
	is(put_start_n(MC_OP_PUT_START, one, 4096, 1), 0, "PutStart of cs/one");
	is(put_end_cs(MC_OP_PUT_END, &one, 1, &c1, NULL, codes), 0,
	   "PutEnd with a checksum is accepted");
	is(codes[0], 0, "and ends the put");
	is(get_lists_cs(&one, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList of cs/one");
	ok(codes[0] == 0 && nreps[0] == 1 && with_cs == 1 && out3[0].present &&
	   out3[0].value == c1.value, "it returns the writer's checksum (%d, %d, %016" PRIx64 ")",
	   with_cs, out3[0].present, out3[0].value);

	/* The batch form: 0 and 2^64 - 1 are values, absence is said apart. */
	for (i = 0; i < 3; i++)
		all_ok &= put_start_n(MC_OP_PUT_START, three[i], 4096, 1) == 0;
	ok(all_ok, "three puts started");
	is(put_end_cs(MC_OP_BATCH_PUT_END, three, 3, in, NULL, codes), 0,
	   "BatchPutEnd with one checksum per key");
	ok(codes[0] == 0 && codes[1] == 0 && codes[2] == 0, "every key ended");
	is(get_lists_cs(three, 3, codes, nreps, ids, out3, &with_cs), 0, "BatchGetReplicaList");
	ok(with_cs == 1 && out3[0].present && out3[0].value == 0 && !out3[1].present &&
	   out3[2].present && out3[2].value == UINT64_MAX,
	   "checksums 0 and 2^64-1 come back, the absent one is absent");

	/* An older writer's PutEnd (no section) is accepted; the object has no checksum. */
	is(put_start_n(MC_OP_PUT_START, old, 4096, 1), 0, "PutStart of cs/old");
	is(put_end_cs(MC_OP_PUT_END, &old, 1, NULL, NULL, codes), 0,
	   "a PutEnd without checksums (older writers) is accepted");
	is(codes[0], 0, "and ends the put");
	is(get_lists_cs(&old, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList of cs/old");
	ok(codes[0] == 0 && with_cs == 1 && !out3[0].present,
	   "the section is there, the checksum absent");

	/* Malformed sections are refused whole, changing nothing. */
	is(put_start_n(MC_OP_PUT_START, "cs/bad", 4096, 1), 0, "PutStart of cs/bad");
	mc_wbuf_init(&raw);
	mc_wbuf_u8(&raw, 2);
	mc_wbuf_u64(&raw, 5);
	{
		const char *bad = "cs/bad";

		is(put_end_cs(MC_OP_PUT_END, &bad, 1, NULL, &raw, codes), MC_ERR_INVALID_PARAMS,
		   "a present byte other than 0 or 1: INVALID_PARAMS");
		mc_wbuf_reset(&raw);
		mc_wbuf_u8(&raw, 1);
		mc_wbuf_u32(&raw, 5);
		is(put_end_cs(MC_OP_PUT_END, &bad, 1, NULL, &raw, codes), MC_ERR_INVALID_PARAMS,
		   "a section of the wrong length: INVALID_PARAMS");
		is(get_lists_cs(&bad, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList");
		is(codes[0], MC_ERR_REPLICA_IS_NOT_READY, "cs/bad is still being written");
		is(put_end_cs(MC_OP_PUT_REVOKE, &bad, 1, &c1, NULL, codes), MC_ERR_INVALID_PARAMS,
		   "PutRevoke takes no checksums");
		is(put_end_cs(MC_OP_PUT_REVOKE, &bad, 1, NULL, NULL, codes), 0, "revoke cs/bad");
	}
	mc_wbuf_fini(&raw);
	{
		const char *nope = "cs/nope";

		is(get_lists_cs(&nope, 1, codes, nreps, ids, out3, &with_cs), 0,
		   "GetReplicaList of an unknown key");
		ok(codes[0] == MC_ERR_OBJECT_NOT_FOUND && with_cs == 1 && !out3[0].present,
		   "answers -704 with an absent checksum");
	}

	/* An in-place upsert drops the old bytes' checksum; UpsertEnd brings the new one. */
	is(put_start_n(MC_OP_UPSERT_START, one, 4096, 1), 0, "UpsertStart of cs/one, same size");
	is(put_end_cs(MC_OP_UPSERT_END, &one, 1, NULL, NULL, codes), 0,
	   "UpsertEnd without a checksum");
	is(get_lists_cs(&one, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList");
	ok(codes[0] == 0 && !out3[0].present, "the old checksum is gone with the old bytes");
	c1.value = 7;
	is(put_start_n(MC_OP_UPSERT_START, one, 4096, 1), 0, "UpsertStart again");
	is(put_end_cs(MC_OP_UPSERT_END, &one, 1, &c1, NULL, codes), 0, "UpsertEnd with checksum 7");
	is(get_lists_cs(&one, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList");
	ok(codes[0] == 0 && out3[0].present && out3[0].value == 7, "it has the new one");

	/* Two replicas on two segments; reports of corrupt replicas. */
	memset(&seg2, 0x44, sizeof(seg2));
	is(mount_named(&seg2, "127.0.0.1:17002", 0x50000000, 64u << 20), 0,
	   "a second segment, another name");
	is(put_start_n(MC_OP_PUT_START, "cs/two", 8192, 2), 0, "PutStart of cs/two, 2 replicas");
	c1.value = 0x1234;
	{
		const char *two = "cs/two";
		uint64_t first;

		is(put_end_cs(MC_OP_PUT_END, &two, 1, &c1, NULL, codes), 0, "PutEnd with 0x1234");
		is(get_lists_cs(&two, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList");
		is(nreps[0], 2, "two replicas listed");
		first = ids[0];
		memset(&stranger, 0x99, sizeof(stranger));
		is(report_corrupt(&stranger, two, first, 0x1234, 0x4321), MC_ERR_ILLEGAL_CLIENT,
		   "a report from a client not in good standing: ILLEGAL_CLIENT");
		is(remount_two(&seg2), 0, "ReMountSegment: the client is in good standing");
		is(report_corrupt(&client_id, two, first, 0x1234, 0x1234), MC_ERR_INVALID_PARAMS,
		   "a report whose values agree: INVALID_PARAMS");
		is(report_corrupt(&client_id, two, first, 0x9999, 0x4321), MC_ERR_INVALID_VERSION,
		   "a report about other bytes (stale checksum): INVALID_VERSION");
		is(report_corrupt(&client_id, two, 987654321, 0x1234, 0x4321),
		   MC_ERR_REPLICA_NOT_FOUND, "a report of an unknown replica: REPLICA_NOT_FOUND");
		is(report_corrupt(&client_id, "cs/nope", first, 0x1234, 0x4321),
		   MC_ERR_OBJECT_NOT_FOUND, "a report of an unknown key: OBJECT_NOT_FOUND");
		is(M.metrics.checksum_mismatches, mismatches0, "none of those counted");
		is(get_lists_cs(&two, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList");
		is(nreps[0], 2, "still two replicas");

		is(report_corrupt(&client_id, two, first, 0x1234, 0x4321), 0,
		   "a report of the first replica is taken");
		is(M.metrics.checksum_mismatches, mismatches0 + 1, "and counted");
		is(get_lists_cs(&two, 1, codes, nreps, ids, out3, &with_cs), 0, "GetReplicaList");
		ok(codes[0] == 0 && nreps[0] == 1 && ids[0] != first && out3[0].present &&
		   out3[0].value == 0x1234,
		   "the object stays, with the other replica and its checksum");
		is(report_corrupt(&client_id, two, first, 0x1234, 0x4321), MC_ERR_REPLICA_NOT_FOUND,
		   "the dropped replica cannot be reported again");
		is(report_corrupt(&client_id, two, ids[0], 0x1234, 0), 0,
		   "a report of its last complete replica is taken");
		is(M.metrics.checksum_mismatches, mismatches0 + 2, "counted");
		is(M.metrics.checksum_mismatch_removals, 1, "and counted as a removal");
		is(exist(two), 0, "the object is gone");
		is(M.metrics.op[MC_OP_REPORT_CHECKSUM_MISMATCH].requests, 8,
		   "the reports are counted under ReportChecksumMismatch");
	}
	is(remove_all(1) >= 0, 1, "clean up");
	fake_now += 600 * 1000 + 1;
	mc_master_release_discards(&M, fake_now, 0);
	is(unmount(&seg2), 0, "unmount the second segment");
	event_base_loop(M.base, EVLOOP_NONBLOCK);
}

int main(void)
{
	mc_wbuf_init(&out);
	memset(&client_id, 0x11, sizeof(client_id));
	memset(&seg_id, 0x33, sizeof(seg_id));
	master_init(&M, NULL);
	test_table();
	test_unknown_and_malformed();
	is(mount(&seg_id, 0x10000000, 64u << 20), 0, "MountSegment of 64 MiB");
	is(M.total_capacity, 64u << 20, "it counts as capacity");
	test_put_get();
	test_revoke_and_preempt();
	test_remove_all_and_unmount();
	test_checksums();
	master_fini(&M);
	mc_wbuf_fini(&out);
	return tap_done();
}

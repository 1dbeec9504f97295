/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batch requests in-process: the master hashes each key of a request once and prefetches the
 * index for the whole batch, then looks the keys up one by one with those hashes.  Each case
 * here would go wrong if a key were looked up or inserted under another key's hash, or if later
 * keys of a batch were skipped: a segment that runs out in the middle of a BatchPutStart, the
 * same key twice in one batch, existing and new keys mixed (put and upsert), and a batch longer
 * than the prefetch window.  Every key is checked afterwards through BatchExistKey and
 * BatchGetReplicaList, whose answers must carry the addresses the PutStart handed out.
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

#define MAXN 300

/* The items of a PutStart or GetReplicaList answer in resp: per-key codes and the first
 * replica's address (0 for none).  0, or -99998 for a count other than n. */
static int read_items(uint32_t n, int *codes, uint64_t *addrs)
{
	uint32_t i, j;

	if (mc_rbuf_u32(&resp) != n)
		return -99998;
	for (i = 0; i < n; i++) {
		uint32_t nrep;

		codes[i] = mc_rbuf_i32(&resp);
		nrep = mc_rbuf_u32(&resp);
		addrs[i] = 0;
		for (j = 0; j < nrep; j++) {
			struct mc_rpc_replica r;

			mc_rpc_get_replica(&resp, &r);
			if (j == 0)
				addrs[i] = r.addr;
		}
	}
	return 0;
}

/* BatchPutStart or BatchUpsertStart (op) of keys with sizes: as read_items.  The frame
 * status. */
static int batch_start(uint16_t op, const char *const *keys, const uint64_t *sizes, uint32_t n,
		       int *codes, uint64_t *addrs)
{
	struct mc_rpc_config cfg;
	struct mc_wbuf b;
	int st;

	mc_rpc_config_default(&cfg);
	mc_wbuf_init(&b);
	put_start_body(&b, &cfg, keys, sizes, 0, n);
	st = call(op, &b);
	mc_wbuf_fini(&b);
	if (st || (st = read_items(n, codes, addrs)) != 0)
		return st;
	mc_rbuf_u8(&resp);	/* space coming */
	return resp.err || resp.left ? -99997 : 0;
}

/* BatchPutEnd, BatchUpsertEnd, BatchPutRevoke (replica type ALL, no checksums) or
 * BatchExistKey of keys: per-key i32 results.  The frame status. */
static int batch_codes(uint16_t op, const char *const *keys, uint32_t n, int *codes)
{
	struct mc_wbuf b;
	int st;

	if (op != MC_OP_BATCH_EXIST_KEY)
		return put_end_cs(op, keys, n, NULL, NULL, codes);
	mc_wbuf_init(&b);
	put_keys(&b, keys, n);
	st = call(op, &b);
	mc_wbuf_fini(&b);
	return st ? st : read_codes(n, codes);
}

/* BatchGetReplicaList: per-key codes and first addresses.  The frame status. */
static int batch_get(const char *const *keys, uint32_t n, int *codes, uint64_t *addrs)
{
	struct mc_rpc_checksum cs[MAXN];
	struct mc_wbuf b;
	int st;

	mc_wbuf_init(&b);
	put_keys(&b, keys, n);
	st = call(MC_OP_BATCH_GET_REPLICA_LIST, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	mc_rbuf_u64(&resp);	/* lease ttl */
	if ((st = read_items(n, codes, addrs)) != 0)
		return st;
	if (mc_rpc_get_checksums(&resp, cs, n) < 0)
		return -99996;
	return resp.err || resp.left ? -99997 : 0;
}

static int all_are(const int *v, uint32_t n, int want)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (v[i] != want)
			return 0;
	return 1;
}

/* A segment of 256 bytes (four 64-byte units): the third key of the batch does not fit, the
 * fourth still does. */
static void test_runs_out_midway(void)
{
	const char *keys[4] = { "out/0", "out/1", "out/2", "out/3" };
	const char *ends[3] = { "out/0", "out/1", "out/3" };
	const char *gets[3] = { "out/3", "out/2", "out/0" };
	uint64_t sizes[4] = { 64, 128, 128, 64 }, addrs[4], got[3];
	int codes[4], ec[3];

	is(mount(&seg_id, 0x10000, 256), 0, "a segment of 256 bytes");
	is(batch_start(MC_OP_BATCH_PUT_START, keys, sizes, 4, codes, addrs), 0, "BatchPutStart");
	ok(codes[0] == 0 && codes[1] == 0 && codes[2] == MC_ERR_NO_AVAILABLE_HANDLE &&
	   codes[3] == 0, "the third key finds no room, the fourth does (%d %d %d %d)", codes[0],
	   codes[1], codes[2], codes[3]);
	ok(addrs[0] != addrs[1] && addrs[1] != addrs[3] && addrs[0] != addrs[3] &&
	   addrs[0] >= 0x10000 && addrs[3] < 0x10000 + 256, "at distinct places in the segment");
	is(M.objects.count, 3, "three objects: none for the key that failed");
	is(batch_codes(MC_OP_BATCH_PUT_END, ends, 3, ec), 0, "BatchPutEnd of the three");
	ok(all_are(ec, 3, 0), "each ends");
	is(batch_codes(MC_OP_BATCH_EXIST_KEY, keys, 4, codes), 0, "BatchExistKey");
	ok(codes[0] == 1 && codes[1] == 1 && codes[2] == 0 && codes[3] == 1,
	   "the three exist, the one that failed does not");
	is(batch_get(gets, 3, ec, got), 0, "BatchGetReplicaList");
	ok(ec[0] == 0 && ec[1] == MC_ERR_OBJECT_NOT_FOUND && ec[2] == 0 && got[0] == addrs[3] &&
	   got[2] == addrs[0], "found where their PutStart placed them");
	is(M.metrics.put_start_alloc_failures, 1, "one allocation failure counted");
}

/* The same key twice in one batch: the second is a put of a key whose put is in progress. */
static void test_duplicates(void)
{
	const char *keys[3] = { "dup/a", "dup/b", "dup/a" };
	uint64_t sizes[3] = { 64, 64, 64 }, addrs[3], got[3];
	uint64_t exists0 = M.metrics.batch_put_start_already_exists;
	size_t count0 = M.objects.count;
	int codes[3];

	is(batch_start(MC_OP_BATCH_PUT_START, keys, sizes, 3, codes, addrs), 0, "BatchPutStart");
	ok(codes[0] == 0 && codes[1] == 0 && codes[2] == MC_ERR_OBJECT_ALREADY_EXISTS,
	   "the repeated key: OBJECT_ALREADY_EXISTS");
	is(M.objects.count, count0 + 2, "two objects");
	is(M.metrics.batch_put_start_already_exists, exists0 + 1, "one refusal counted");
	is(batch_codes(MC_OP_BATCH_PUT_END, keys, 3, codes), 0, "BatchPutEnd with the repeat");
	ok(all_are(codes, 3, 0), "each ends (the repeat finds it complete)");
	is(batch_get(keys, 3, codes, got), 0, "BatchGetReplicaList with the repeat");
	ok(all_are(codes, 3, 0) && got[0] == addrs[0] && got[2] == addrs[0] && got[1] == addrs[1],
	   "both answers of the repeated key are its object");
}

/* New keys between a complete object and one whose put is in progress; then an upsert batch
 * of an existing key of the same size (in place) and a new one. */
static void test_mixed(void)
{
	const char *keys[5] = { "mix/n0", "mix/e0", "mix/n1", "mix/e1", "mix/n2" };
	const char *ends[4] = { "mix/n0", "mix/n1", "mix/n2", "mix/e1" };
	const char *gets[4] = { "mix/n2", "mix/none", "mix/e0", "mix/n0" };
	const char *ups[2] = { "mix/e0", "mix/u0" };
	uint64_t sizes[5] = { 64, 64, 64, 64, 64 }, addrs[5], got[4], e0_addr = 0, uaddrs[2];
	uint32_t nrep = 0;
	int codes[5];

	is(put("mix/e0", 64, 0), 0, "mix/e0 put and ended");
	is(get_list("mix/e0", &nrep, &e0_addr), 0, "its place");
	is(put_start("mix/e1", 64, 0, NULL, NULL), 0, "mix/e1 started, not ended");
	is(batch_start(MC_OP_BATCH_PUT_START, keys, sizes, 5, codes, addrs), 0, "BatchPutStart");
	ok(codes[0] == 0 && codes[1] == MC_ERR_OBJECT_ALREADY_EXISTS && codes[2] == 0 &&
	   codes[3] == MC_ERR_OBJECT_ALREADY_EXISTS && codes[4] == 0,
	   "the existing keys are refused, the new ones placed");
	is(batch_codes(MC_OP_BATCH_PUT_END, ends, 4, codes), 0, "BatchPutEnd");
	ok(all_are(codes, 4, 0), "each ends");
	is(batch_get(gets, 4, codes, got), 0, "BatchGetReplicaList");
	ok(codes[0] == 0 && codes[1] == MC_ERR_OBJECT_NOT_FOUND && codes[2] == 0 && codes[3] == 0 &&
	   got[0] == addrs[4] && got[2] == e0_addr && got[3] == addrs[0],
	   "each key's own object, the unknown one not found");
	is(batch_start(MC_OP_BATCH_UPSERT_START, ups, sizes, 2, codes, uaddrs), 0,
	   "BatchUpsertStart of an existing key and a new one");
	ok(codes[0] == 0 && codes[1] == 0 && uaddrs[0] == e0_addr,
	   "the existing key is upserted in place");
	is(batch_codes(MC_OP_BATCH_UPSERT_END, ups, 2, codes), 0, "BatchUpsertEnd");
	ok(all_are(codes, 2, 0), "both end");
	is(batch_codes(MC_OP_BATCH_EXIST_KEY, ups, 2, codes), 0, "BatchExistKey");
	ok(all_are(codes, 2, 1), "both exist");
	is(exist("mix/u0"), 1, "ExistKey of the new one");
}

/* More keys than the index prefetch covers (256): the keys past it are hashed too. */
static void test_long_batch(void)
{
	static char names[MAXN][16];
	const char *keys[MAXN];
	uint64_t sizes[MAXN], addrs[MAXN], got[MAXN];
	int codes[MAXN], same = 1;
	uint32_t i;

	for (i = 0; i < MAXN; i++) {
		snprintf(names[i], sizeof(names[i]), "long/%u", i);
		keys[i] = names[i];
		sizes[i] = 64;
	}
	is(batch_start(MC_OP_BATCH_PUT_START, keys, sizes, MAXN, codes, addrs), 0,
	   "BatchPutStart of 300 keys");
	ok(all_are(codes, MAXN, 0), "all placed");
	is(batch_codes(MC_OP_BATCH_PUT_END, keys, MAXN, codes), 0, "BatchPutEnd of 300 keys");
	ok(all_are(codes, MAXN, 0), "all end");
	is(batch_codes(MC_OP_BATCH_EXIST_KEY, keys, MAXN, codes), 0, "BatchExistKey of 300 keys");
	ok(all_are(codes, MAXN, 1), "all exist");
	is(batch_get(keys, MAXN, codes, got), 0, "BatchGetReplicaList of 300 keys");
	for (i = 0; i < MAXN; i++)
		same &= codes[i] == 0 && got[i] == addrs[i];
	ok(same, "each where its PutStart placed it");
	is(batch_codes(MC_OP_BATCH_PUT_REVOKE, keys, 1, codes), 0, "BatchPutRevoke of a done key");
	is(codes[0], MC_ERR_INVALID_WRITE, "refused: nothing in progress");
}

int main(void)
{
	struct mc_uuid big;

	mc_wbuf_init(&out);
	memset(&client_id, 0x11, sizeof(client_id));
	memset(&seg_id, 0x33, sizeof(seg_id));
	memset(&big, 0x44, sizeof(big));
	master_init(&M, NULL);
	test_runs_out_midway();
	is(mount(&big, 0x10000000, 16u << 20), 0, "a segment of 16 MiB for the rest");
	test_duplicates();
	test_mixed();
	test_long_batch();
	master_fini(&M);
	mc_wbuf_fini(&out);
	return tap_done();
}

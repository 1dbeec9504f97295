/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SSD tier demotes in the eviction policy's order: a master with --offload_on_evict, a
 * client with a memory segment and an SSD area, objects whose rank differs between lru and prefix
 * (a batch put, a later single put, an object read again).  Eviction queues OFFLOAD tasks for the
 * first objects of the eviction list, in its order, and frees their memory only once each copy
 * is acknowledged; the objects further down keep their memory.  Run for both policies.
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

#define SIZE 4096u

static struct mc_uuid disk_id;

static int mount_disk(uint64_t capacity)
{
	struct mc_wbuf b;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_uuid(&b, &disk_id);
	mc_rpc_put_strv(&b, mc_strv_c("127.0.0.1:17001"));
	mc_rpc_put_strv(&b, mc_strv_c("127.0.0.1:17002"));
	mc_wbuf_u64(&b, capacity);
	st = call(MC_OP_MOUNT_LOCAL_DISK, &b);
	mc_wbuf_fini(&b);
	return st;
}

/* The keys of the OFFLOAD tasks one heartbeat hands out (at most 16), space-separated, into
 * got; their source addresses into src[16].  Returns the number of tasks, or < 0. */
static int heartbeat(char *got, size_t len, uint64_t *src)
{
	struct mc_wbuf b;
	uint32_t n, i;
	size_t at = 0;
	int st;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_uuid(&b, &disk_id);
	mc_wbuf_u32(&b, 16);
	mc_wbuf_u64(&b, 0);
	st = call(MC_OP_OFFLOAD_HEARTBEAT, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	got[0] = '\0';
	n = mc_rbuf_u32(&resp);
	for (i = 0; i < n && i < 16 && !resp.err; i++) {
		uint8_t kind = mc_rbuf_u8(&resp);
		struct mc_strv key = mc_rpc_get_strv(&resp, MC_RPC_MAX_KEY);

		(void)mc_rbuf_u64(&resp);		/* size */
		src[i] = mc_rbuf_u64(&resp);		/* src_addr */
		(void)mc_rpc_get_strv(&resp, MC_RPC_MAX_NAME);
		(void)mc_rbuf_u64(&resp);
		(void)mc_rbuf_u64(&resp);		/* gen */
		if (kind != 0 || at + key.n + 2 > len)
			return -1;
		at += (size_t)snprintf(got + at, len - at, "%s%.*s", at ? " " : "", (int)key.n,
				       key.p);
	}
	return resp.err ? -1 : (int)n;
}

/* NotifyOffloadSuccess for the OFFLOAD task of key (disk address addr). */
static int offloaded(const char *key, uint64_t addr)
{
	struct mc_wbuf b;
	struct mc_object *o = mc_object_find(&M.objects, key, strlen(key));
	int st, code;

	mc_wbuf_init(&b);
	mc_rpc_put_uuid(&b, &client_id);
	mc_rpc_put_uuid(&b, &disk_id);
	mc_wbuf_u32(&b, 1);
	mc_wbuf_u8(&b, 0);
	mc_rpc_put_strv(&b, mc_strv_c(key));
	mc_wbuf_u64(&b, SIZE);
	mc_wbuf_u64(&b, addr);
	mc_wbuf_i32(&b, 0);
	mc_wbuf_u64(&b, o ? o->gen : 0);
	st = call(MC_OP_NOTIFY_OFFLOAD, &b);
	mc_wbuf_fini(&b);
	if (st)
		return st;
	(void)mc_rbuf_u32(&resp);
	code = mc_rbuf_i32(&resp);
	return resp.err ? -1 : code;
}

/* Does key still hold memory? */
static int in_memory(const char *key)
{
	struct mc_object *o = mc_object_find(&M.objects, key, strlen(key));
	uint32_t i;

	for (i = 0; o && i < o->nrep; i++)
		if (mc_object_replica(o, i)->type == MC_REPLICA_MEMORY)
			return 1;
	return 0;
}

/* The eviction list's keys in order, space-separated. */
static const char *ranking(void)
{
	static char buf[256];
	struct mc_object *o;
	size_t n = 0;

	buf[0] = '\0';
	for (o = mc_object_evict_first(&M.objects); o; o = mc_object_evict_next(&M.objects, o))
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%.*s", n ? " " : "",
				      (int)o->key_len, o->key);
	return buf;
}

static void run(const char *policy, const char *expect)
{
	static const char *chain[] = { "c0", "c1", "c2", "c3" };
	char got[256], first3[64], next2[64], rank[256];
	uint64_t src[16];
	uint32_t nrep;
	uint64_t addr;
	int n, i;

	master_init(&M, policy);
	M.cfg.offload_on_evict = 1;
	is(mount(&seg_id, 0x10000000, 64u << 20), 0, "%s: MountSegment", policy);
	is(mount_disk(1u << 30), 0, "%s: MountLocalDiskSegment of the same client", policy);
	is(put("a", SIZE, 0), 0, "%s: put a", policy);
	is(put_batch_hint(chain, 4, SIZE, -1), 0, "%s: a batch put of the chain c0..c3", policy);
	is(put("b", SIZE, 0), 0, "%s: put b", policy);
	fake_now += 1001;
	is(get_list("a", &nrep, &addr), 0, "%s: a is read again", policy);
	fake_now += 1001;	/* its fetch lease is over */
	snprintf(rank, sizeof(rank), "%s", ranking());
	is_str(rank, expect, "%s: the eviction ranking", policy);

	mc_master_evict(&M, 3 * SIZE, 0);
	n = heartbeat(got, sizeof(got), src);
	snprintf(first3, sizeof(first3), "%.*s", (int)(strchr(strchr(strchr(expect, ' ') + 1, ' ') + 1,
							     ' ') - expect), expect);
	is(n, 3, "%s: eviction of three objects' worth queues three OFFLOAD tasks", policy);
	is_str(got, first3, "%s: for the first three of the ranking, in its order", policy);
	ok(in_memory("c0") && in_memory("c3") && in_memory("a") && in_memory("b"),
	   "%s: nothing leaves memory before its copy is in", policy);
	for (i = 0; i < 3; i++) {
		char key[8];

		snprintf(key, sizeof(key), "%.2s", first3 + 3 * i);
		is(offloaded(key, (1ull << 62) + (uint64_t)i * SIZE), 0, "%s: %s's copy is in",
		   policy, key);
		ok(!in_memory(key), "%s: then %s leaves memory (its SSD copy stays)", policy, key);
	}
	/* The demoted objects left the list: the next round takes the next two, in order. */
	mc_master_evict(&M, 2 * SIZE, 0);
	is(heartbeat(got, sizeof(got), src), 2, "%s: a second round queues two more", policy);
	snprintf(next2, sizeof(next2), "%.*s", (int)(strrchr(expect, ' ') - expect -
						     strlen(first3) - 1), expect + strlen(first3) + 1);
	is_str(got, next2, "%s: the next two of the ranking", policy);
	ok(in_memory(strrchr(expect, ' ') + 1), "%s: the last of the ranking keeps its memory",
	   policy);
	is(exist(first3 + 6), 1, "%s: a demoted object still exists (on the SSD)", policy);
	master_fini(&M);
}

int main(void)
{
	mc_wbuf_init(&out);
	memset(&client_id, 0x11, sizeof(client_id));
	memset(&seg_id, 0x33, sizeof(seg_id));
	memset(&disk_id, 0x44, sizeof(disk_id));
	/* lru: least recently used first, a batch in its order, a (read last) at the end. */
	run("lru", "c0 c1 c2 c3 b a");
	/* prefix: the chain's partial last block c3 first, then its tail before its head, then b;
	 * a, used again, is protected. */
	run("prefix", "c3 c2 c1 c0 b a");
	mc_wbuf_fini(&out);
	return tap_done();
}

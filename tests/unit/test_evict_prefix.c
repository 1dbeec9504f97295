/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The prefix eviction policy (object_table.h): the order of the eviction list under batches,
 * promotions and the protected part's cap, its counters kept right by O(1) bookkeeping through
 * thousands of random operations (checked against a walk), and, in a master on a fake clock fed
 * request frames, eviction under the policy still honouring hard pins and fetch leases and
 * taking a batch put's tail before its head.
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







/* ---- the object table alone ---- */

static struct mc_object *ins(struct mc_object_table *t, const char *k)
{
	return mc_object_insert(t, k, strlen(k), 0);
}

/* The keys in eviction order, concatenated ("cba"). */
static const char *order(struct mc_object_table *t)
{
	static char buf[256];
	struct mc_object *o;
	size_t n = 0;

	for (o = mc_object_evict_first(t); o && n + 1 < sizeof(buf); o = mc_object_evict_next(t, o))
		buf[n++] = o->key[0];
	buf[n] = '\0';
	return buf;
}

/* Walk the list: the marker once, protected objects exactly after it, counters right. */
static int invariants(struct mc_object_table *t)
{
	struct mc_object *o;
	size_t n = 0, prot = 0, marks = 0;
	int after = 0;

	for (o = mc_object_at(t, t->lru->lru_next); o != t->lru; o = mc_object_at(t, o->lru_next)) {
		if (o == t->mark) {
			marks++;
			after = 1;
			continue;
		}
		if (mc_object_at(t, mc_object_at(t, o->lru_next)->lru_prev) != o ||
		    !(o->flags & MC_OBJ_IN_LRU))
			return 0;
		n++;
		if (!!(o->evstate & MC_EVS_PROTECTED) != after)
			return 0;
		prot += after;
	}
	return marks == 1 && n == t->lru_count && prot == t->protected_count &&
	       (prot == 0 || prot * 100 <= (size_t)t->protected_pct * n);
}

static void test_table_order(void)
{
	struct mc_object_table t;
	struct mc_object *a, *b, *c, *d, *x;
	size_t i;

	mc_object_table_init(&t);
	mc_object_table_set_policy(&t, MC_EVICT_POLICY_LRU, MC_PREFIX_PROTECTED_PCT);
	mc_object_batch_begin(&t);
	a = ins(&t, "a");
	ins(&t, "b");
	ins(&t, "c");
	mc_object_batch_end(&t);
	ok(strcmp(order(&t), "abc") == 0, "lru: a batch is evicted in its order (%s)", order(&t));
	mc_object_touch(&t, a);
	ok(strcmp(order(&t), "bca") == 0, "lru: a touch moves to the recent end (%s)", order(&t));
	mc_object_table_fini(&t);

	mc_object_table_init(&t);
	mc_object_table_set_policy(&t, MC_EVICT_POLICY_PREFIX, 50);
	mc_object_batch_begin(&t);
	a = ins(&t, "a");
	b = ins(&t, "b");
	c = ins(&t, "c");
	d = ins(&t, "d");
	mc_object_batch_end(&t);
	ok(strcmp(order(&t), "dcba") == 0,
	   "prefix: a batch put [a b c d] is evicted tail first (%s)", order(&t));
	mc_object_batch_begin(&t);
	x = ins(&t, "x");
	mc_object_batch_end(&t);
	ok(strcmp(order(&t), "dcbax") == 0,
	   "prefix: a single put goes to the recent end of probation (%s)", order(&t));
	/* Their put ends: a first use each, the batch's tail again to the head. */
	mc_object_batch_begin(&t);
	mc_object_touch(&t, a);
	mc_object_touch(&t, b);
	mc_object_touch(&t, c);
	mc_object_touch(&t, d);
	mc_object_batch_end(&t);
	ok(strcmp(order(&t), "dxcba") == 0,
	   "prefix: their first uses keep head last, the new tail first (%s)", order(&t));
	/* A later probe of [a b]: second uses, promoted to protected (cap 50% of 5 = 2). */
	mc_object_batch_begin(&t);
	mc_object_touch(&t, a);
	mc_object_touch(&t, b);
	mc_object_batch_end(&t);
	ok(strcmp(order(&t), "dxcba") == 0 && (a->evstate & MC_EVS_PROTECTED) &&
	   (b->evstate & MC_EVS_PROTECTED) && t.protected_count == 2,
	   "prefix: reused a and b are protected, evicted after all of probation (%s)",
	   order(&t));
	mc_object_touch(&t, c);
	ok(t.protected_count == 2 && (c->evstate & MC_EVS_PROTECTED) &&
	   !(b->evstate & MC_EVS_PROTECTED) && strcmp(order(&t), "dxbac") == 0,
	   "prefix: a third promotion over the cap pushes the oldest protected back (%s)",
	   order(&t));
	mc_object_lru_unlink(&t, x);
	ok(strcmp(order(&t), "dbac") == 0 && invariants(&t),
	   "prefix: an object taken off the list (hard pin) is never a victim (%s)", order(&t));
	mc_object_lru_link(&t, x);
	ok(invariants(&t), "prefix: linked back, the list is consistent");
	mc_object_erase(&t, c);
	ok(invariants(&t) && t.protected_count == 1, "prefix: erasing a protected object");
	mc_object_table_fini(&t);

	/* Random operations: the counters stay right without any walk of the table. */
	mc_object_table_init(&t);
	mc_object_table_set_policy(&t, MC_EVICT_POLICY_PREFIX, MC_PREFIX_PROTECTED_PCT);
	{
		uint64_t x64 = 88172645463325252ull;
		int good = 1;
		char key[16];

		for (i = 0; i < 20000 && good; i++) {
			unsigned r, k;
			struct mc_object *o;

			x64 ^= x64 << 13, x64 ^= x64 >> 7, x64 ^= x64 << 17;
			r = (unsigned)(x64 % 100);
			k = (unsigned)((x64 >> 8) % 500);
			snprintf(key, sizeof(key), "%u", k);
			o = mc_object_find(&t, key, strlen(key));
			if (r < 5)
				mc_object_batch_begin(&t);
			else if (r < 8)
				mc_object_batch_end(&t);
			else if (o == NULL)
				ins(&t, key);
			else if (r < 60)
				mc_object_touch(&t, o);
			else if (r < 70)
				mc_object_erase(&t, o);
			else if (r < 75 && (o->flags & MC_OBJ_IN_LRU))
				mc_object_lru_unlink(&t, o);
			else if (r < 80)
				mc_object_lru_link(&t, o);
			else if ((o = mc_object_evict_first(&t)) != NULL)
				mc_object_erase(&t, o);
			if (i % 97 == 0)
				good = invariants(&t);
		}
		ok(good && invariants(&t),
		   "prefix: 20000 random operations keep the list and its counters consistent "
		   "(%zu objects, %zu listed, %zu protected)", t.count, t.lru_count,
		   t.protected_count);
	}
	mc_object_table_fini(&t);
}

/* ---- a master with --eviction_policy=prefix ---- */

static int has(const char *key)
{
	return mc_object_find(&M.objects, key, strlen(key)) != NULL;
}

static void test_master_prefix(void)
{
	static const char *chain[] = { "h0", "h1", "h2", "h3" };
	uint32_t nrep;
	uint64_t addr;

	ok(M.objects.policy == MC_EVICT_POLICY_PREFIX, "the master's table runs the prefix policy");
	is(put_batch_hint(chain, 4, 4096, -1), 0, "a batch put of the chain h0..h3");
	is(put("pin", 4096, 1), 0, "a hard-pinned object");
	is(put("leased", 4096, 0), 0, "an object that will be read");
	fake_now += 1001;	/* the put leases are over */
	is(get_list("leased", &nrep, &addr), 0, "GetReplicaList of it: a fetch lease");
	mc_master_evict(&M, 4096, 0);
	ok(!has("h3") && has("h2") && has("h1") && has("h0"),
	   "eviction of one block takes the chain's tail h3, not its head");
	mc_master_evict(&M, 2 * 4096, 0);
	ok(!has("h2") && !has("h1") && has("h0"), "then h2 and h1, the head last");
	mc_master_evict(&M, 64u << 20, 0);
	ok(!has("h0") && has("pin") && has("leased"),
	   "evicting everything leaves the hard-pinned object and the one under a fetch lease");
	fake_now += 1001;
	mc_master_evict(&M, 64u << 20, 0);
	ok(has("pin") && !has("leased"), "once the lease is over the read object goes too");
	is(exist("pin"), 1, "ExistKey of the pinned object");
	ok(invariants(&M.objects), "the master's list is consistent");
}

/* The keys of the master's eviction list whose names start with prefix, in eviction order,
 * space-separated. */
static const char *master_order(const char *prefix)
{
	static char buf[512];
	struct mc_object *o;
	size_t n = 0, pl = strlen(prefix);

	buf[0] = '\0';
	for (o = mc_object_evict_first(&M.objects); o; o = mc_object_evict_next(&M.objects, o)) {
		if (o->key_len < pl || memcmp(o->key, prefix, pl) != 0 || n + o->key_len + 2 > sizeof(buf))
			continue;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%.*s", n ? " " : "", (int)o->key_len,
				      o->key);
	}
	return buf;
}

/* PutStart's optional eviction hint: without it the last key of a batch of two or more is
 * taken for a partial block, evicted first; with it the writer says whether it is one, also for a
 * single key; an unknown bit or a second byte is refused. */
static void test_master_hint(void)
{
	static const char *none[] = { "n/0", "n/1", "n/2" };
	static const char *part[] = { "b/0", "b/1", "b/2" };
	static const char *full[] = { "f/0", "f/1", "f/2" };
	static const char *one[] = { "p/0" };
	struct mc_object *first;

	mc_master_evict(&M, 64u << 20, 0);	/* an empty list but for pinned objects */
	is(put_batch_hint(none, 3, 4096, -1), 0, "a batch put without a hint");
	is(put_batch_hint(part, 3, 4096, MC_EVICT_HINT_LAST_PARTIAL), 0,
	   "a batch put hinted LAST_PARTIAL");
	is(put_batch_hint(full, 3, 4096, 0), 0, "a batch put hinted 0 (its last block is full)");
	is(put_batch_hint(one, 1, 4096, MC_EVICT_HINT_LAST_PARTIAL), 0,
	   "a single put hinted LAST_PARTIAL");
	/* After the puts ended (their first uses) the order is still what the puts said. */
	first = mc_object_evict_first(&M.objects);
	ok(first == mc_object_find(&M.objects, "p/0", 3),
	   "the single put's partial block is the first victim");
	ok(mc_object_evict_next(&M.objects, first) == mc_object_find(&M.objects, "b/2", 3),
	   "then the last block of the batch hinted LAST_PARTIAL");
	ok(mc_object_evict_next(&M.objects, mc_object_evict_next(&M.objects, first)) ==
		   mc_object_find(&M.objects, "n/2", 3),
	   "then the last block of the batch without a hint, taken for partial");
	is_str(master_order("n/"), "n/2 n/1 n/0", "no hint: the tail first");
	is_str(master_order("f/"), "f/2 f/1 f/0", "hint 0: the tail first too");
	ok(mc_object_at(&M.objects, mc_object_find(&M.objects, "f/2", 3)->lru_prev) ==
		   mc_object_find(&M.objects, "b/0", 3),
	   "hint 0: its last block waits its turn after the older puts");
	{
		struct mc_wbuf b;
		struct mc_rpc_config cfg;

		mc_rpc_config_default(&cfg);
		cfg.has_evict_hint = 1;
		cfg.evict_hint = 0x02;
		mc_wbuf_init(&b);
		mc_rpc_put_uuid(&b, &client_id);
		mc_rpc_put_config(&b, &cfg);
		mc_wbuf_u32(&b, 1);
		mc_rpc_put_strv(&b, mc_strv_c("bad-hint"));
		mc_wbuf_u64(&b, 4096);
		mc_rpc_put_evict_hint(&b, &cfg);
		is(call(MC_OP_BATCH_PUT_START, &b), MC_ERR_INVALID_PARAMS,
		   "a hint with an unknown bit: the request is refused");
		mc_wbuf_u8(&b, 0);
		is(call(MC_OP_BATCH_PUT_START, &b), MC_ERR_INVALID_PARAMS,
		   "two bytes after the items: refused");
		mc_wbuf_fini(&b);
		ok(!has("bad-hint"), "and nothing was put");
	}
	ok(invariants(&M.objects), "the master's list is consistent");
}

int main(void)
{
	test_table_order();
	mc_wbuf_init(&out);
	memset(&client_id, 0x11, sizeof(client_id));
	memset(&seg_id, 0x33, sizeof(seg_id));
	master_init(&M, "prefix");
	is(mount(&seg_id, 0x10000000, 64u << 20), 0, "MountSegment of 64 MiB");
	test_master_prefix();
	test_master_hint();
	master_fini(&M);
	mc_wbuf_fini(&out);
	return tap_done();
}

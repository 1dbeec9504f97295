/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the master's object table (src/master/object_table.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "master/master.h"
#include "master/object_table.h"
#include "tap.h"

static size_t rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtoul(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

/* mc_object_add_replica moves the replicas of extra[]: a segment's list must follow them. */
static void test_add_replica(void)
{
	struct mc_object_table t;
	struct mc_segment seg;
	struct mc_object *o, *other;
	struct mc_replica *r, *x;
	uint32_t i;
	int linked = 1;

	mc_object_table_init(&t);
	memset(&seg, 0, sizeof(seg));
	o = mc_object_insert(&t, "grow", 4, 3);
	other = mc_object_insert(&t, "other", 5, 1);
	/* List: other.rep0 <-> o.rep2 <-> o.rep1 <-> o.rep0 (pushed at the head). */
	for (i = 0; i < 3; i++) {
		r = mc_object_replica(o, i);
		r->seg = &seg;
		r->id = 10 + i;
		r->seg_next = seg.reps;
		if (seg.reps)
			seg.reps->seg_prev = r;
		seg.reps = r;
	}
	r = &other->rep0;
	r->seg = &seg;
	r->seg_next = seg.reps;
	seg.reps->seg_prev = r;
	seg.reps = r;
	x = mc_object_add_replica(o);
	ok(x != NULL && o->nrep == 4 && x->obj == o && x->seg == NULL && x->status == 0,
	   "add_replica appends a zeroed replica");
	for (i = 0, r = seg.reps; r && i < 4; r = r->seg_next, i++)
		linked &= r->seg_next == NULL || r->seg_next->seg_prev == r;
	ok(linked && seg.reps == &other->rep0 && other->rep0.seg_next == mc_object_replica(o, 2) &&
		   mc_object_replica(o, 2)->id == 12 && mc_object_replica(o, 1)->seg_next == &o->rep0,
	   "the segment list points at the moved replicas");
	while (o->nrep < 64)
		mc_object_add_replica(o);
	is(mc_object_add_replica(o), NULL, "no more than 64 replicas");
	for (i = 0; i < o->nrep; i++)
		mc_object_replica(o, i)->seg = NULL;
	mc_object_lru_unlink(&t, o);
	ok(!(o->flags & MC_OBJ_IN_LRU), "lru_unlink takes it off the list");
	mc_object_lru_link(&t, o);
	ok((o->flags & MC_OBJ_IN_LRU) && t.lru.lru_prev == o, "lru_link puts it back at the MRU end");
	mc_object_table_fini(&t);
}

int main(void)
{
	struct mc_object_table t;
	struct mc_object *o, *first = NULL;
	char key[64];
	size_t i, n = 1000000, pos, seen, bad = 0, before, after;
	double t0;

	mc_object_table_init(&t);
	before = rss_kb();
	t0 = (double)clock() / CLOCKS_PER_SEC;
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "model/layer/%zu/chunk", i);
		o = mc_object_insert(&t, key, strlen(key), 1);
		o->size = i;
		if (i == 0)
			first = o;
	}
	after = rss_kb();
	printf("# 1M inserts: %.2f s, %.1f bytes of table memory per key (keys average %.1f bytes)\n",
	       (double)clock() / CLOCKS_PER_SEC - t0, (after - before) * 1024.0 / (double)n,
	       (double)t.key_bytes / (double)n);
	is(t.count, n, "1M objects inserted");
	for (i = 0; i < n; i += 7) {
		snprintf(key, sizeof(key), "model/layer/%zu/chunk", i);
		o = mc_object_find(&t, key, strlen(key));
		bad += o == NULL || o->size != i;
	}
	is(bad, 0, "every inserted key is found with its object");
	ok(mc_object_find(&t, "model/layer/1000000/chunk", 25) == NULL, "a missing key is not found");
	is(first, t.lru.lru_next, "the first object is at the LRU head");
	mc_object_touch(&t, first);
	ok(first == t.lru.lru_prev && first != t.lru.lru_next, "touch moves it to the MRU end");

	/* Erase every other key, including during iteration. */
	pos = 0;
	seen = 0;
	while ((o = mc_object_next(&t, &pos)) != NULL) {
		seen++;
		if (o->size % 2)
			mc_object_erase(&t, o);
	}
	is(seen, n, "iteration visits all %zu objects (erasing half on the way)", seen);
	is(t.count, n / 2, "half remain");
	bad = 0;
	for (i = 0; i < n; i += 3) {
		snprintf(key, sizeof(key), "model/layer/%zu/chunk", i);
		o = mc_object_find(&t, key, strlen(key));
		bad += (i % 2) ? o != NULL : (o == NULL || o->size != i);
	}
	is(bad, 0, "erased keys are gone, the others still found across tombstones");
	/* Reinsert over tombstones. */
	for (i = 1; i < n; i += 2) {
		snprintf(key, sizeof(key), "model/layer/%zu/chunk", i);
		o = mc_object_insert(&t, key, strlen(key), 3);
		o->size = i;
	}
	is(t.count, n, "reinserted the erased half");
	o = mc_object_find(&t, "model/layer/9/chunk", 19);
	ok(o && o->nrep == 3 && mc_object_replica(o, 2)->obj == o, "multi-replica objects");
	/* Colliding-prefix and binary keys. */
	o = mc_object_insert(&t, "a\0b", 3, 1);
	ok(mc_object_find(&t, "a\0b", 3) == o && mc_object_find(&t, "a\0c", 3) == NULL,
	   "keys are compared as bytes");
	/* Drain the LRU from the head: least recently used first. */
	seen = 0;
	while (t.lru.lru_next != &t.lru && seen < 10) {
		mc_object_erase(&t, t.lru.lru_next);
		seen++;
	}
	is(t.count, n + 1 - 10, "erasing from the LRU head keeps the table consistent");
	mc_object_table_fini(&t);
	test_add_replica();
	return tap_done();
}

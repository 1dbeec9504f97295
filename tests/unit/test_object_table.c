/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the master's object table (src/master/object_table.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "master/master.h"
#include "master/object_table.h"
#include "master/prefault.h"
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
		mc_replica_push(&seg.reps, r);
	}
	r = &other->rep0;
	r->seg = &seg;
	mc_replica_push(&seg.reps, r);
	x = mc_object_add_replica(o);
	ok(x != NULL && o->nrep == 4 && mc_replica_obj(x) == o && x->seg == NULL && x->status == 0,
	   "add_replica appends a zeroed replica");
	for (i = 0, r = seg.reps; r && i < 4; r = mc_replica_next(r), i++)
		linked &= mc_replica_next(r) == NULL || mc_replica_prev(mc_replica_next(r)) == r;
	ok(linked && seg.reps == &other->rep0 &&
		   mc_replica_next(&other->rep0) == mc_object_replica(o, 2) &&
		   mc_object_replica(o, 2)->id == 12 &&
		   mc_replica_next(mc_object_replica(o, 1)) == &o->rep0 &&
		   mc_replica_obj(mc_object_replica(o, 2)) == o && mc_replica_obj(&o->rep0) == o,
	   "the segment list points at the moved replicas, which know their object");
	while (o->nrep < 64)
		mc_object_add_replica(o);
	is(mc_object_add_replica(o), NULL, "no more than 64 replicas");
	for (i = 0; i < o->nrep; i++)
		mc_object_replica(o, i)->seg = NULL;
	mc_object_lru_unlink(&t, o);
	ok(!(o->flags & MC_OBJ_IN_LRU), "lru_unlink takes it off the list");
	mc_object_lru_link(&t, o);
	ok((o->flags & MC_OBJ_IN_LRU) && mc_object_at(&t, t.lru->lru_prev) == o,
	   "lru_link puts it back at the MRU end");
	mc_object_table_fini(&t);
}

static void key_of(char *buf, size_t cap, size_t i)
{
	snprintf(buf, cap, "resize/%zu/kv-block-0000000000", i);
}

/* Insert keys [from, to) (o->size = i). */
static void fill(struct mc_object_table *t, size_t from, size_t to)
{
	char key[64];
	size_t i;

	for (i = from; i < to; i++) {
		key_of(key, sizeof(key), i);
		mc_object_insert(t, key, strlen(key), 1)->size = i;
	}
}

/* Insert until a resize is running; returns the number of keys. */
static size_t fill_until_resize(struct mc_object_table *t, size_t n)
{
	uint64_t r0 = t->index.resizes;

	while (t->index.resizes == r0 || !mc_oindex_resizing(&t->index))
		fill(t, n, n + 1), n++;
	return n;
}

/* Keys [0, n): those with erased[i] gone, the others found with their own object. */
static size_t count_bad(struct mc_object_table *t, size_t n, const unsigned char *erased)
{
	char key[64];
	size_t i, bad = 0;

	for (i = 0; i < n; i++) {
		struct mc_object *o;

		key_of(key, sizeof(key), i);
		o = mc_object_find(t, key, strlen(key));
		bad += erased && erased[i] ? o != NULL : (o == NULL || o->size != i);
	}
	return bad;
}

/* The index grows incrementally: while a resize runs, objects sit in two arrays; lookups,
 * erases and walks must see one table. */
static void test_incremental_resize(void)
{
	struct mc_object_table t;
	struct mc_object *o;
	unsigned char *erased, *seen;
	size_t n, i, pos, visits, dup, miss, steps, max = 200000;
	char key[64];

	erased = calloc(max, 1);
	seen = calloc(max, 1);
	mc_object_table_init(&t);
	n = fill_until_resize(&t, 0);
	ok(mc_oindex_resizing(&t.index) && t.index.resizes == 1, "a resize starts at %zu keys", n);
	is(count_bad(&t, n, NULL), 0, "every key is found while the resize runs");
	/* Each insert moves a bounded number of groups: the resize takes many inserts. */
	steps = 0;
	while (mc_oindex_resizing(&t.index)) {
		fill(&t, n, n + 1);
		n++;
		steps++;
	}
	ok(steps >= 8, "the resize ends after %zu more inserts, not in one step", steps);
	is(count_bad(&t, n, NULL), 0, "every key is found after the resize");

	/* Erase during a resize: keys still in the old array and keys already moved. */
	n = fill_until_resize(&t, n);
	for (i = 0; i < n; i += 3) {
		key_of(key, sizeof(key), i);
		mc_object_erase(&t, mc_object_find(&t, key, strlen(key)));
		erased[i] = 1;
	}
	ok(mc_oindex_resizing(&t.index), "still resizing after the erases");
	is(count_bad(&t, n, erased), 0, "erased keys are gone mid-resize, the others found");
	is(t.count, n - (n + 2) / 3, "count follows the erases");

	/* Walk during a resize, erasing on the way: each object exactly once. */
	memset(seen, 0, max);
	pos = 0;
	visits = dup = 0;
	while ((o = mc_object_next(&t, &pos)) != NULL) {
		visits++;
		dup += seen[o->size]++ != 0;
		if (o->size % 3 == 1) {
			erased[o->size] = 1;
			mc_object_erase(&t, o);
		}
	}
	for (i = 0, miss = 0; i < n; i++)
		miss += (seen[i] != 0) == (erased[i] && i % 3 == 0);
	ok(visits == dup + (n - (n + 2) / 3) && dup == 0 && miss == 0,
	   "a walk across the two arrays sees every object once (%zu visits, %zu twice, %zu missed)",
	   visits, dup, miss);
	is(count_bad(&t, n, erased), 0, "the table is consistent after erasing during the walk");

	/* Inserts during a walk step the resize (and start the next): nothing present throughout
	 * is missed. */
	memset(seen, 0, max);
	pos = 0;
	steps = (size_t)t.index.resizes;
	ok(mc_oindex_resizing(&t.index), "the walk starts while a resize runs");
	while ((o = mc_object_next(&t, &pos)) != NULL) {
		seen[o->size] = 1;
		for (i = 0; i < 2 && n + 1 < max; i++) {
			fill(&t, n, n + 1);
			erased[n] = 2;	/* inserted during the walk */
			n++;
		}
	}
	for (i = 0, miss = 0; i < n; i++)
		miss += !erased[i] && !seen[i];
	ok(t.index.resizes >= steps + 2 && miss == 0,
	   "a walk with inserts across %llu resizes misses nothing present throughout (%zu)",
	   (unsigned long long)t.index.resizes, miss);
	for (i = 0; i < n; i++)
		if (erased[i] == 2)
			erased[i] = 0;
	is(count_bad(&t, n, erased), 0, "every key is found after the walk");
	mc_object_table_fini(&t);

	/* Churn at a constant size: tombstones are cleared by same-size resizes, the index does
	 * not grow without bound. */
	mc_object_table_init(&t);
	fill(&t, 0, 5000);
	for (i = 0; i < 200000; i++) {
		key_of(key, sizeof(key), i);
		mc_object_erase(&t, mc_object_find(&t, key, strlen(key)));
		fill(&t, i + 5000, i + 5001);
	}
	ok(t.count == 5000 && mc_oindex_bytes(&t.index) <= 64 * 4096,
	   "insert/erase churn keeps the index small (%zu bytes for 5000 keys)",
	   mc_oindex_bytes(&t.index));
	memset(erased, 1, 200000);
	is(count_bad(&t, 200000, erased), 0, "churned-out keys are gone");
	mc_object_table_fini(&t);
	free(erased);
	free(seen);
}

/* A load that knows its row count reserves the index: the objects present move at once, and
 * inserts up to the count resize nothing; the array is no larger than inserts would grow it. */
static void test_reserve(void)
{
	struct mc_object_table t, u;
	uint64_t r0;
	size_t n;

	mc_object_table_init(&t);
	mc_object_table_init(&u);
	n = fill_until_resize(&t, 0);		/* a resize running, objects in two arrays */
	mc_object_table_reserve(&t, 100000);
	ok(!mc_oindex_resizing(&t.index), "a reserve finishes the running resize");
	is(count_bad(&t, n, NULL), 0, "the objects present are found after a reserve");
	r0 = t.index.resizes;
	fill(&t, n, 100000);
	ok(t.index.resizes == r0, "inserts up to the reserved count resize nothing (%llu)",
	   (unsigned long long)(t.index.resizes - r0));
	is(count_bad(&t, 100000, NULL), 0, "all 100000 found");
	fill(&u, 0, 100000);
	mc_oindex_settle(&u.index);
	ok(mc_oindex_bytes(&t.index) <= mc_oindex_bytes(&u.index),
	   "the reserved index (%zu bytes) is no larger than one grown by inserts (%zu)",
	   mc_oindex_bytes(&t.index), mc_oindex_bytes(&u.index));
	r0 = t.index.resizes;
	mc_object_table_reserve(&t, 1000);
	ok(t.index.resizes == r0, "a reserve below the size is a no-op");
	fill(&t, 100000, 100100);
	is(count_bad(&t, 100100, NULL), 0, "inserts past the reserve grow it as before");
	mc_object_table_fini(&t);
	mc_object_table_fini(&u);
}

/* Objects of every size class, across chunk boundaries, freed and reused.  (Sanitizer builds
 * poison free arena space.) */
/* A resize's move hashes the next group of the old array ahead of time (object_index.c): an
 * object erased from that group before its move must not be moved, the others must all be.
 * Lookups prefetched as a batch (mc_object_prefetch) find the same. */
static void test_resize_ahead(void)
{
	struct mc_object_table t;
	struct mc_strv keys[128];
	char kbuf[128][64];
	unsigned char *erased;
	size_t n, i, pos, hit = 0, max = 200000, found = 0;
	struct mc_object *o;

	erased = calloc(max, 1);
	mc_object_table_init(&t);
	n = 0;
	while (n < 50000) {	/* five resizes */
		/* The first object of the group the next move takes, whose hashes are known. */
		if (mc_oindex_resizing(&t.index) && t.index.ahead_seq == t.index.old.seq &&
		    t.index.ahead_gi == t.index.mig && n % 2 == 0) {
			pos = ((size_t)t.index.old.seq << 40) | (t.index.mig * 12);
			o = mc_object_next(&t, &pos);
			if (o != NULL && (pos >> 40) == t.index.old.seq &&
			    ((pos & ((1ull << 40) - 1)) - 1) / 12 == t.index.mig) {
				erased[o->size] = 1;
				mc_object_erase(&t, o);
				hit++;
			}
		}
		fill(&t, n, n + 1);
		n++;
	}
	ok(hit > 1000 && t.index.resizes >= 5,
	   "%zu objects erased from the group hashed ahead of its move (%llu resizes)", hit,
	   (unsigned long long)t.index.resizes);
	is(count_bad(&t, n, erased), 0, "the erased ones are gone, every other key is found");
	/* A batch of present, erased and absent keys, prefetched, then looked up. */
	n = fill_until_resize(&t, n);
	for (i = 0; i < 128; i++) {
		key_of(kbuf[i], sizeof(kbuf[i]), i % 3 == 2 ? max + i : i * 7);
		keys[i].p = kbuf[i];
		keys[i].n = (uint32_t)strlen(kbuf[i]);
	}
	mc_object_prefetch(&t, keys, 128);
	for (i = 0; i < 128; i++) {
		o = mc_object_find(&t, keys[i].p, keys[i].n);
		found += i % 3 == 2 ? o == NULL : erased[i * 7] ? o == NULL : o != NULL &&
										 o->size == i * 7;
	}
	is(found, 128, "prefetched lookups mid-resize: present keys found, absent ones not");
	mc_object_table_fini(&t);
	free(erased);
}

/* Pages of [p, p + len) resident, by mincore. */
static size_t resident_pages(void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, i, r = 0;
	unsigned char *v = calloc(n, 1);

	if (v != NULL && mincore(p, len, v) == 0)
		for (i = 0; i < n; i++)
			r += v[i] & 1;
	free(v);
	return r;
}

/* Waits up to 10 s for pf to have populated at least want bytes. */
static size_t prefault_wait(struct mc_prefault *pf, size_t want)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	int i;

	for (i = 0; i < 2000 && mc_prefault_done(pf) < want; i++)
		nanosleep(&ts, NULL);
	return mc_prefault_done(pf);
}

/* The prefaulter populates the whole pages of what it is asked, without changing what they
 * hold; the arena stays a populated chunk ahead of its objects. */
static void test_prefault(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (size_t)8 << 20, i, bad = 0;
	struct mc_prefault *pf = mc_prefault_new();
	struct mc_object_table t;
	char *m, key[64];

	mc_prefault_ask(NULL, &len, sizeof(len));	/* no prefaulter: nothing */
	mc_prefault_free(NULL);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pf == NULL || m == MAP_FAILED) {
		ok(0, "a prefaulter and 8 MiB of memory");
		return;
	}
	for (i = 0; i < len; i += 7 * page)
		m[i + 3] = (char)(i / page + 1);	/* written before */
	/* From the middle of a page: the partial first page is left out. */
	mc_prefault_ask(pf, m + 100, len - 100);
	for (i = 3 * page; i < len; i += 11 * page)
		m[i + 5] = (char)(i / page + 2);	/* while it runs */
	if (prefault_wait(pf, len - page) < len - page || mc_prefault_done(pf) > len - page)
		bad++;
	ok(bad == 0 && resident_pages(m + page, len - page) == len / page - 1,
	   "%zu of %zu bytes populated, every whole page asked for resident",
	   mc_prefault_done(pf), len - page);
	for (i = 0; i < len; i++) {
		char want = 0;

		if (i % (11 * page) == 3 * page % (11 * page) + 5 && i >= 3 * page + 5)
			want = (char)((i - 5) / page + 2);
		else if (i % (7 * page) == 3)
			want = (char)((i - 3) / page + 1);
		bad += m[i] != want;
	}
	is(bad, 0, "what was written before and during the populating is intact");
	munmap(m, len);
	/* A range unmapped meanwhile fails quietly; the prefaulter goes on. */
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(m, len);
	mc_prefault_ask(pf, m, len);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	i = mc_prefault_done(pf);
	mc_prefault_ask(pf, m, len);
	ok(prefault_wait(pf, i + len) >= i + len, "a range after an unmapped one is populated");
	munmap(m, len);
	mc_prefault_free(pf);

	/* The arena: a prefaulter once it grows, a populated chunk ahead of the objects. */
	mc_object_table_init(&t);
	for (i = 0; i < 100000; i++) {
		key_of(key, sizeof(key), i);
		mc_object_insert(&t, key, strlen(key), 1);
	}
	ok(t.arena->pf != NULL && t.arena->mapped >= t.arena->bump + ((size_t)2 << 20),
	   "the arena is %zu KiB ahead of its objects", (t.arena->mapped - t.arena->bump) >> 10);
	i = prefault_wait(t.arena->pf, t.arena->mapped - ((size_t)2 << 20));
	len = (t.arena->bump + page - 1) & ~(page - 1);	/* the first page past the objects */
	ok(i >= t.arena->mapped - ((size_t)2 << 20) &&
	   resident_pages((char *)t.arena + len, t.arena->mapped - len) ==
		   (t.arena->mapped - len) / page,
	   "the arena past its objects is resident (%zu MiB populated)", i >> 20);
	mc_object_table_fini(&t);
}

static void test_arena(void)
{
	struct mc_object_table t;
	static char key[4096];
	size_t i, len, bad = 0, n = 40000, first = 0;

	mc_object_table_init(&t);
	for (i = 0; i < n; i++) {
		len = 1 + (i * 37) % 2100;
		memset(key, 'a' + (int)(i % 26), len);
		snprintf(key, 16, "%zu", i);
		key[strlen(key)] = '/';
		mc_object_insert(&t, key, len, 1)->size = len;
		first += (sizeof(struct mc_object) + len + 7) / 8 * 8;
	}
	for (i = 0; i < n; i += 2) {
		len = 1 + (i * 37) % 2100;
		memset(key, 'a' + (int)(i % 26), len);
		snprintf(key, 16, "%zu", i);
		key[strlen(key)] = '/';
		mc_object_erase(&t, mc_object_find(&t, key, len));
	}
	for (i = 0; i < n; i += 2) {	/* reuse the freed space, other sizes */
		len = 1 + (i * 53) % 2100;
		memset(key, 'A' + (int)(i % 26), len);
		snprintf(key, 16, "%zu", i);
		key[strlen(key)] = '/';
		mc_object_insert(&t, key, len, 2)->size = len;
	}
	for (i = 0; i < n; i++) {
		struct mc_object *o;

		len = 1 + (i * (i % 2 ? 37 : 53)) % 2100;
		memset(key, (i % 2 ? 'a' : 'A') + (int)(i % 26), len);
		snprintf(key, 16, "%zu", i);
		key[strlen(key)] = '/';
		o = mc_object_find(&t, key, len);
		bad += o == NULL || o->size != len || o->key_len != len ||
		       mc_replica_obj(mc_object_replica(o, (uint32_t)(o->nrep - 1))) != o;
	}
	is(bad, 0, "objects of every size, freed and reused, keep their keys");
	/* The second round fits in what the first freed: without reuse it would add half. */
	is(t.arena->mapped <= first + first / 8 + ((size_t)4 << 20) ? 0 : 1, 0,
	   "freed objects are reused (%zu MiB of arena for %zu MiB of first-round objects)",
	   t.arena->mapped >> 20, first >> 20);
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
	is(first, mc_object_at(&t, t.lru->lru_next), "the first object is at the LRU head");
	mc_object_touch(&t, first);
	ok(first == mc_object_at(&t, t.lru->lru_prev) && first != mc_object_at(&t, t.lru->lru_next),
	   "touch moves it to the MRU end");

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
	ok(o && o->nrep == 3 && mc_replica_obj(mc_object_replica(o, 2)) == o,
	   "multi-replica objects");
	/* Colliding-prefix and binary keys. */
	o = mc_object_insert(&t, "a\0b", 3, 1);
	ok(mc_object_find(&t, "a\0b", 3) == o && mc_object_find(&t, "a\0c", 3) == NULL,
	   "keys are compared as bytes");
	/* Drain the LRU from the head: least recently used first. */
	seen = 0;
	while (mc_object_at(&t, t.lru->lru_next) != t.lru && seen < 10) {
		mc_object_erase(&t, mc_object_at(&t, t.lru->lru_next));
		seen++;
	}
	is(t.count, n + 1 - 10, "erasing from the LRU head keeps the table consistent");
	mc_object_table_fini(&t);
	test_add_replica();
	test_incremental_resize();
	test_resize_ahead();
	test_prefault();
	test_reserve();
	test_arena();
	return tap_done();
}

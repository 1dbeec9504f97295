/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Trace loading and the offline prefix-cache simulator of mooncake_bench (bench_trace.h).
 *
 * The lru and prefix policies are not re-implemented here: the simulator drives the master's
 * own object table (object_table.c) with the policy chosen, so what it measures is what the
 * master does given the same sequence of probes, reads and puts.  Belady's policy evicts the
 * block whose next use is furthest away (or does not cache a block used later than all the
 * cached ones), with a max-heap of next-use positions and lazy deletion: O(log n) per reference.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "master/object_table.h"
#include "tools/bench_trace.h"

/* Block id -> dense id: open addressing on 64-bit ids. */
struct mc_idmap {
	int64_t *keys;
	uint32_t *vals;
	size_t cap, count;
};

static int mc_idmap_grow(struct mc_idmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1u << 16, i;
	int64_t *keys = malloc(cap * sizeof(*keys));
	uint32_t *vals = malloc(cap * sizeof(*vals));

	if (keys == NULL || vals == NULL) {
		free(keys);
		free(vals);
		return -1;
	}
	for (i = 0; i < cap; i++)
		keys[i] = -1;
	for (i = 0; i < m->cap; i++) {
		size_t j;

		if (m->keys[i] < 0)
			continue;
		j = ((uint64_t)m->keys[i] * 0x9e3779b97f4a7c15ull) & (cap - 1);
		while (keys[j] >= 0)
			j = (j + 1) & (cap - 1);
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

/* Dense id of key (>= 0), assigning the next one to a new key; -1 on out-of-memory. */
static int64_t mc_idmap_get(struct mc_idmap *m, int64_t key)
{
	size_t j;

	if ((m->count + 1) * 2 > m->cap && mc_idmap_grow(m))
		return -1;
	j = ((uint64_t)key * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
	while (m->keys[j] >= 0) {
		if (m->keys[j] == key)
			return m->vals[j];
		j = (j + 1) & (m->cap - 1);
	}
	m->keys[j] = key;
	m->vals[j] = (uint32_t)m->count;
	return (int64_t)m->count++;
}

#define MC_GROW(p, cap, need)                                                               \
	((need) <= (cap) ? 0                                                                \
	 : ((cap) = (need) * 2, ((p) = realloc((p), (cap) * sizeof(*(p)))) == NULL ? -1 : 0))

/* Room for one more request in the per-request arrays. */
static int mc_trace_grow(struct mc_trace *t, size_t *cap)
{
	size_t c = *cap ? *cap * 2 : 1024;
	void *p;

	if (t->nreq < *cap)
		return 0;
	if ((p = realloc(t->off, c * sizeof(*t->off))) == NULL)
		return -1;
	t->off = p;
	if ((p = realloc(t->n, c * sizeof(*t->n))) == NULL)
		return -1;
	t->n = p;
	if ((p = realloc(t->ts, c * sizeof(*t->ts))) == NULL)
		return -1;
	t->ts = p;
	if ((p = realloc(t->input_len, c * sizeof(*t->input_len))) == NULL)
		return -1;
	t->input_len = p;
	*cap = c;
	return 0;
}

int mc_trace_load(const char *path, struct mc_trace *t, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	struct mc_idmap map = { 0 };
	size_t capreq = 0, capref = 0, lineno = 0;
	char *line = NULL;
	size_t linecap = 0;
	ssize_t len;
	int rc = -1;

	memset(t, 0, sizeof(*t));
	if (f == NULL) {
		snprintf(err, errlen, "--trace: cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &linecap, f)) >= 0) {
		json_t *j, *ids, *v;
		json_error_t je;
		size_t k, n;

		lineno++;
		if (len == 0 || strspn(line, " \t\r\n") == (size_t)len)
			continue;
		j = json_loads(line, 0, &je);
		ids = j ? json_object_get(j, "hash_ids") : NULL;
		if (j == NULL || !json_is_array(ids) ||
		    !json_is_integer(json_object_get(j, "timestamp")) ||
		    !json_is_integer(json_object_get(j, "input_length"))) {
			snprintf(err, errlen,
				 "--trace: %s line %zu: not a request (JSON with integer timestamp, "
				 "input_length and an array hash_ids)", path, lineno);
			json_decref(j);
			goto out;
		}
		n = json_array_size(ids);
		if (mc_trace_grow(t, &capreq) || MC_GROW(t->ids, capref, t->nrefs + n)) {
			snprintf(err, errlen, "--trace: out of memory reading %s", path);
			json_decref(j);
			goto out;
		}
		t->off[t->nreq] = t->nrefs;
		t->n[t->nreq] = (uint32_t)n;
		t->ts[t->nreq] = json_integer_value(json_object_get(j, "timestamp"));
		t->input_len[t->nreq] = json_integer_value(json_object_get(j, "input_length"));
		json_array_foreach(ids, k, v) {
			int64_t d;

			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    (d = mc_idmap_get(&map, json_integer_value(v))) < 0) {
				snprintf(err, errlen, "--trace: %s line %zu: hash_ids must be "
					 "non-negative integers", path, lineno);
				json_decref(j);
				goto out;
			}
			t->ids[t->nrefs + k] = (uint32_t)d;
		}
		t->nrefs += n;
		if (n > t->max_blocks)
			t->max_blocks = (uint32_t)n;
		t->nreq++;
		json_decref(j);
	}
	if (t->nreq == 0) {
		snprintf(err, errlen, "--trace: %s holds no request", path);
		goto out;
	}
	t->distinct = map.count;
	t->max_id = (uint32_t)map.count;
	rc = 0;
out:
	free(line);
	free(map.keys);
	free(map.vals);
	fclose(f);
	if (rc)
		mc_trace_free(t);
	return rc;
}

void mc_trace_free(struct mc_trace *t)
{
	free(t->off);
	free(t->n);
	free(t->ts);
	free(t->input_len);
	free(t->ids);
	memset(t, 0, sizeof(*t));
}

static void mc_sim_count(const struct mc_trace *t, size_t i, uint32_t h, struct mc_sim_result *r)
{
	uint64_t tok = (uint64_t)h * MC_TRACE_BLOCK_TOKENS;

	r->hit_blocks += h;
	r->blocks += t->n[i];
	r->tokens += (uint64_t)t->input_len[i];
	r->hit_tokens += tok < (uint64_t)t->input_len[i] ? tok : (uint64_t)t->input_len[i];
}

/* The master's object table under the policy, fed what a connector sends. */
static void mc_sim_table(const struct mc_trace *t, int policy, uint64_t capacity,
			 struct mc_sim_result *r)
{
	struct mc_object_table tab;
	struct mc_object **pres = calloc(t->max_blocks ? t->max_blocks : 1, sizeof(*pres));
	size_t i;

	mc_object_table_init(&tab);
	mc_object_table_set_policy(&tab, policy, MC_PREFIX_PROTECTED_PCT);
	for (i = 0; i < t->nreq; i++) {
		const uint32_t *ids = t->ids + t->off[i];
		uint32_t n = t->n[i], j, h = n;
		char key[16];

		/* BatchExistKey: every block is probed (a lease and a use). */
		mc_object_batch_begin(&tab);
		for (j = 0; j < n; j++) {
			snprintf(key, sizeof(key), "%u", ids[j]);
			pres[j] = mc_object_find(&tab, key, strlen(key));
			if (pres[j])
				mc_object_touch(&tab, pres[j]);
			else if (h == n)
				h = j;
		}
		mc_object_batch_end(&tab);
		mc_sim_count(t, i, h, r);
		/* BatchGetReplicaList of the hit prefix. */
		mc_object_batch_begin(&tab);
		for (j = 0; j < h; j++)
			mc_object_touch(&tab, pres[j]);
		mc_object_batch_end(&tab);
		/* BatchPutStart of the missing blocks, evicting from the head when full. */
		mc_object_batch_begin(&tab);
		for (j = h; j < n; j++) {
			if (pres[j])
				continue;
			snprintf(key, sizeof(key), "%u", ids[j]);
			if (mc_object_find(&tab, key, strlen(key)))
				continue;	/* the same block twice in one request */
			while (tab.count >= capacity && tab.count > 0)
				mc_object_erase(&tab, mc_object_evict_first(&tab));
			if (capacity > 0)
				mc_object_insert(&tab, key, strlen(key), 0);
		}
		mc_object_batch_end(&tab);
		/* BatchPutEnd: the new blocks become readable (a use). */
		mc_object_batch_begin(&tab);
		for (j = h; j < n; j++) {
			struct mc_object *o;

			if (pres[j])
				continue;
			snprintf(key, sizeof(key), "%u", ids[j]);
			if ((o = mc_object_find(&tab, key, strlen(key))) != NULL)
				mc_object_touch(&tab, o);
		}
		mc_object_batch_end(&tab);
	}
	mc_object_table_fini(&tab);
	free(pres);
}

struct mc_heap_ent {
	uint64_t next;
	uint32_t id;
};

static void mc_heap_push(struct mc_heap_ent *h, size_t *n, struct mc_heap_ent e)
{
	size_t i = (*n)++;

	while (i > 0 && h[(i - 1) / 2].next < e.next) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void mc_heap_pop(struct mc_heap_ent *h, size_t *n)
{
	struct mc_heap_ent e = h[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1].next > h[c].next)
			c++;
		if (h[c].next <= e.next)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = e;
}

static void mc_sim_belady(const struct mc_trace *t, uint64_t capacity, int unbounded,
			  struct mc_sim_result *r)
{
	const uint64_t never = UINT64_MAX;
	uint64_t *nxt = malloc((t->nrefs ? t->nrefs : 1) * sizeof(*nxt));
	uint64_t *last = malloc((t->max_id ? t->max_id : 1) * sizeof(*last));
	uint64_t *cur = malloc((t->max_id ? t->max_id : 1) * sizeof(*cur));	/* 0: absent */
	/* one entry per reference at most: no compaction needed */
	struct mc_heap_ent *heap = malloc((t->nrefs + 1) * sizeof(*heap));
	size_t nheap = 0, i, p;
	uint64_t count = 0;

	for (i = 0; i < t->max_id; i++) {
		last[i] = never;
		cur[i] = 0;
	}
	for (p = t->nrefs; p-- > 0;) {
		nxt[p] = last[t->ids[p]];
		last[t->ids[p]] = p;
	}
	for (i = 0; i < t->nreq; i++) {
		uint32_t n = t->n[i], j, h = n;
		uint64_t base = t->off[i];

		for (j = 0; j < n && h == n; j++)
			if (cur[t->ids[base + j]] == 0)
				h = j;
		mc_sim_count(t, i, h, r);
		for (j = 0; j < n; j++) {
			uint32_t id = t->ids[base + j];
			uint64_t nu = nxt[base + j];
			/* cur holds next use + 1 so that 0 means absent. */
			uint64_t key = nu == never ? never : nu + 1;

			if (cur[id]) {
				cur[id] = key;
				mc_heap_push(heap, &nheap, (struct mc_heap_ent){ key, id });
				continue;
			}
			if (unbounded) {
				cur[id] = key;
				continue;
			}
			if (nu == never || capacity == 0)
				continue;	/* never used again: not worth a slot */
			while (count >= capacity) {
				struct mc_heap_ent top;

				/* drop stale entries */
				while (nheap && cur[heap[0].id] != heap[0].next)
					mc_heap_pop(heap, &nheap);
				if (nheap == 0)
					break;
				top = heap[0];
				if (top.next <= key)
					break;
				mc_heap_pop(heap, &nheap);
				cur[top.id] = 0;
				count--;
			}
			if (count >= capacity)
				continue;	/* everything cached is needed sooner */
			cur[id] = key;
			count++;
			mc_heap_push(heap, &nheap, (struct mc_heap_ent){ key, id });
		}
	}
	free(nxt);
	free(last);
	free(cur);
	free(heap);
}

void mc_sim_run(const struct mc_trace *t, enum mc_sim_policy p, uint64_t capacity,
		struct mc_sim_result *r)
{
	memset(r, 0, sizeof(*r));
	switch (p) {
	case MC_SIM_LRU:
		mc_sim_table(t, MC_EVICT_POLICY_LRU, capacity, r);
		break;
	case MC_SIM_PREFIX:
		mc_sim_table(t, MC_EVICT_POLICY_PREFIX, capacity, r);
		break;
	case MC_SIM_BELADY:
		mc_sim_belady(t, capacity, 0, r);
		break;
	case MC_SIM_UNBOUNDED:
		mc_sim_belady(t, capacity, 1, r);
		break;
	}
}

int mc_trace_parse_pools(const char *s, double *out, int max)
{
	int n = 0;

	while (*s) {
		char *end;
		double a = strtod(s, &end), b = 1;

		if (end == s || a <= 0)
			return -1;
		if (*end == '/') {
			s = end + 1;
			b = strtod(s, &end);
			if (end == s || b < 1 || a > b)
				return -1;
			a /= b;
		}
		if (n == max || (*end != ',' && *end != '\0'))
			return -1;
		out[n++] = a;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

uint64_t mc_trace_pool_blocks(const struct mc_trace *t, double size)
{
	if (size < 1)
		return (uint64_t)(size * (double)t->distinct + 0.5);
	return (uint64_t)size;
}

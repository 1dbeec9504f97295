/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rows of the background load (persist_loader.c runs the threads): what the scan of one
 * range of generations (a part) reads, in chunks of decoded rows with their keys and replicas
 * packed in arrays, a reference per row by its key's hash and a range per complete memory
 * replica; the sort of a part's references (one bucket pass by the hash's top bits, evenly
 * spread by a good hash, then insertion); the merge of the parts in generation order into one
 * result (the sorted references merged pairwise, stably, so the rows of one key stay in
 * generation order); the resolution of a key's several rows (the newest wins) and the ranges'
 * sort by segment and offset.  The lookup of a key among the rows read (mc_persist_rows_find).
 *
 * Threads: a part is its worker's until the scan ends, the result the loader thread's until it
 * announces the end; nothing here locks.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/radix_sort.h"
#include "common/xalloc.h"
#include "persist/persist.h"
#include "persist/persist_loadpart.h"
#include "proto/rpc.h"

void mc_persist_rows_fini(struct mc_persist_rows *c)
{
	free(c->rows);
	free(c->reps);
	free(c->user);
	free(c->keys);
	memset(c, 0, sizeof(*c));
}

/* Append the decoded row o to c (pointers kept as offsets until mc_persist_rows_seal). */
void mc_persist_rows_add(struct mc_persist_rows *c, const struct mc_persist_object *o)
{
	struct mc_persist_object *d;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1;
		c->rows = mc_xrealloc(c->rows, c->cap * sizeof(*c->rows));
	}
	while (c->keys_len + o->key_len > c->keys_cap) {
		c->keys_cap = c->keys_cap ? c->keys_cap * 2 : 64 * 1024;
		c->keys = mc_xrealloc(c->keys, c->keys_cap);
	}
	while (c->nreps + o->n_replicas > c->capreps) {
		c->capreps = c->capreps ? c->capreps * 2 : 1024;
		c->reps = mc_xrealloc(c->reps, c->capreps * sizeof(*c->reps));
	}
	d = &c->rows[c->n++];
	*d = *o;
	d->flags &= ~MC_PERSIST_ROW_OLDER;	/* the loader's mark, never the file's */
	memcpy(c->keys + c->keys_len, o->key, o->key_len);
	d->key = (const char *)(uintptr_t)c->keys_len;
	c->keys_len += o->key_len;
	memcpy(c->reps + c->nreps, o->replicas, o->n_replicas * sizeof(*c->reps));
	d->replicas = (const struct mc_persist_replica *)(uintptr_t)c->nreps;
	c->nreps += o->n_replicas;
}

/* Turn the offsets into pointers; c is not appended to afterwards. */
void mc_persist_rows_seal(struct mc_persist_rows *c)
{
	size_t i;

	c->user = mc_xcalloc(c->nreps ? c->nreps : 1, sizeof(*c->user));
	for (i = 0; i < c->n; i++) {
		c->rows[i].key = c->keys + (uintptr_t)c->rows[i].key;
		c->rows[i].replicas = c->reps + (uintptr_t)c->rows[i].replicas;
	}
}

static uint32_t mc_segid_hash(const uint8_t id[16])
{
	uint64_t a, b;

	memcpy(&a, id, 8);
	memcpy(&b, id + 8, 8);
	a ^= b * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(a ^ a >> 29);
}

/* The index of segment id in l->segids, added if new; UINT32_MAX past 65535 segments. */
static uint32_t mc_loader_segidx(struct mc_loader_part *l, const uint8_t id[16])
{
	uint32_t h, i;

	if (l->seghash_cap == 0 || (l->nsegids + 1) * 2 > l->seghash_cap) {
		uint32_t cap = l->seghash_cap ? l->seghash_cap * 2 : 64;

		free(l->seghash);
		l->seghash = mc_xcalloc(cap, sizeof(*l->seghash));
		l->seghash_cap = cap;
		for (i = 0; i < l->nsegids; i++) {
			h = mc_segid_hash(l->segids[i]) & (cap - 1);
			while (l->seghash[h])
				h = (h + 1) & (cap - 1);
			l->seghash[h] = i + 1;
		}
	}
	h = mc_segid_hash(id) & (l->seghash_cap - 1);
	while (l->seghash[h]) {
		if (!memcmp(l->segids[l->seghash[h] - 1], id, 16))
			return l->seghash[h] - 1;
		h = (h + 1) & (l->seghash_cap - 1);
	}
	if (l->nsegids >= 65535)
		return UINT32_MAX;
	if (l->nsegids == l->capsegids) {
		l->capsegids = l->capsegids ? l->capsegids * 2 : 16;
		l->segids = mc_xrealloc(l->segids, l->capsegids * sizeof(*l->segids));
	}
	memcpy(l->segids[l->nsegids], id, 16);
	l->seghash[h] = ++l->nsegids;
	return l->nsegids - 1;
}

/* The complete memory replicas of the row just added to chunk k, as ranges.  An offset that
 * cannot be sorted (not a multiple of 64, or past 2^54) is left out: no allocator takes it. */
static void mc_loader_add_ranges(struct mc_loader_part *l, uint32_t k)
{
	struct mc_persist_rows *c = &l->chunks[k];
	const struct mc_persist_object *o = &c->rows[c->n - 1];
	size_t first = (uintptr_t)o->replicas;
	uint32_t i;

	for (i = 0; i < o->n_replicas; i++) {
		const struct mc_persist_replica *r = &c->reps[first + i];
		uint32_t seg;

		if (r->type != MC_REPLICA_MEMORY || r->status != MC_REPLICA_COMPLETE ||
		    r->offset % 64 || r->offset >> 54)
			continue;
		seg = mc_loader_segidx(l, r->segment_id);
		if (seg == UINT32_MAX)
			continue;
		if (l->nranges == l->capranges) {
			l->capranges = l->capranges ? l->capranges * 2 : 65536;
			l->ranges = mc_xrealloc(l->ranges, l->capranges * sizeof(*l->ranges));
		}
		l->ranges[l->nranges++] = (struct mc_persist_range){
			(uint64_t)seg << 48 | r->offset >> 6, r->len, k, (uint32_t)(first + i), NULL
		};
	}
}

MC_RADIX_SORT_DEFINE(mc_ranges_radix, struct mc_persist_range, order, mc_xmalloc)

/* The ranges in order (segment and offset).  A stop ends it between passes (a pass over ten
 * million ranges takes tens of ms): the order is then of no use. */
void mc_loadpart_sort_ranges(struct mc_loader_part *p, const atomic_int *stop)
{
	(void)mc_ranges_radix(p->ranges, p->nranges, stop);
}

/* The row just added as the last of chunk k, referenced by its key's hash. */
static void mc_loader_add_keyref(struct mc_loader_part *l, uint32_t k, const void *key,
				 size_t len)
{
	if (l->nkeyrefs == l->capkeyrefs) {
		l->capkeyrefs = l->capkeyrefs ? l->capkeyrefs * 2 : 65536;
		l->keyrefs = mc_xrealloc(l->keyrefs, l->capkeyrefs * sizeof(*l->keyrefs));
	}
	l->keyrefs[l->nkeyrefs++] = (struct mc_persist_keyref){
		mc_persist_key_hash(key, len), k, (uint32_t)(l->chunks[k].n - 1)
	};
}

static struct mc_persist_object *mc_keyref_row(struct mc_persist_rows *chunks,
					       const struct mc_persist_keyref *r)
{
	return &chunks[r->chunk].rows[r->row];
}

/* Of the rows of one key, all but the newest (the last: the sort is stable) are marked older;
 * their replicas are marked so their ranges go.  Returns the number marked. */
static size_t mc_loader_mark_older(struct mc_loader_part *l)
{
	struct mc_persist_keyref *a = l->keyrefs;
	size_t n = l->nkeyrefs, i, j, x, y, marked = 0;

	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && a[j].hash == a[i].hash; j++)
			;
		for (x = i; j - i > 1 && x < j - 1; x++) {
			struct mc_persist_object *ox = mc_keyref_row(l->chunks, &a[x]);

			for (y = x + 1; y < j; y++) {
				const struct mc_persist_object *oy = mc_keyref_row(l->chunks, &a[y]);
				struct mc_persist_replica *r;
				uint32_t k;

				if (oy->key_len != ox->key_len || memcmp(oy->key, ox->key, ox->key_len))
					continue;
				ox->flags |= MC_PERSIST_ROW_OLDER;
				r = l->chunks[a[x].chunk].reps + (ox->replicas -
								  l->chunks[a[x].chunk].reps);
				for (k = 0; k < ox->n_replicas; k++)
					r[k].status = 0xff;
				marked++;
				break;
			}
		}
	}
	return marked;
}

/* The ranges of replicas marked by mc_loader_mark_older go. */
static void mc_loader_drop_older_ranges(struct mc_loader_part *l)
{
	size_t i, w = 0;

	for (i = 0; i < l->nranges; i++)
		if (l->chunks[l->ranges[i].chunk].reps[l->ranges[i].rep].status != 0xff)
			l->ranges[w++] = l->ranges[i];
	l->nranges = w;
}

MC_LOWER_BOUND_DEFINE(mc_keyrefs_lower_bound, struct mc_persist_keyref, hash)

struct mc_persist_object *mc_persist_rows_find(struct mc_persist_rows *chunks, size_t first_chunk,
					       const struct mc_persist_keyref *refs, size_t n,
					       const void *key, size_t len, size_t *chunk,
					       size_t *row)
{
	uint64_t h = mc_persist_key_hash(key, len);
	struct mc_persist_object *found = NULL;
	size_t lo = mc_keyrefs_lower_bound(refs, n, h);

	for (; lo < n && refs[lo].hash == h; lo++) {
		struct mc_persist_object *o;

		if (refs[lo].chunk < first_chunk)	/* emptied by the caller */
			continue;
		o = mc_keyref_row(chunks, &refs[lo]);
		if ((o->flags & MC_PERSIST_ROW_OLDER) || o->key_len != len ||
		    memcmp(o->key, key, len))
			continue;
		found = o;
		*chunk = refs[lo].chunk;
		*row = refs[lo].row;
	}
	return found;
}

/* A new chunk at the end of p's, sized for a full one: no reallocation while it fills (keys of
 * up to 64 bytes and a replica a row on average; pages untouched cost nothing). */
static void mc_loader_new_chunk(struct mc_loader_part *p)
{
	struct mc_persist_rows *c;

	if (p->nchunks)
		mc_persist_rows_seal(&p->chunks[p->nchunks - 1]);
	if (p->nchunks == p->capchunks) {
		p->capchunks = p->capchunks ? p->capchunks * 2 : 16;
		p->chunks = mc_xrealloc(p->chunks, p->capchunks * sizeof(*p->chunks));
	}
	c = &p->chunks[p->nchunks++];
	memset(c, 0, sizeof(*c));
	c->cap = MC_LOADER_CHUNK_ROWS;
	c->rows = mc_xmalloc(MC_LOADER_CHUNK_ROWS * sizeof(*c->rows));
	c->capreps = MC_LOADER_CHUNK_ROWS;
	c->reps = mc_xmalloc(c->capreps * sizeof(*c->reps));
	c->keys_cap = MC_LOADER_CHUNK_ROWS * 64;
	c->keys = mc_xmalloc(c->keys_cap);
}

/* Sort a part's references by hash, stably, into *a (replaced).  The hashes of a good hash of
 * the keys are spread evenly: one pass puts them into 2^b buckets by their top bits (about four
 * a bucket), then each bucket is sorted by insertion; a bucket that came out long (keys made
 * to collide) is radix-sorted instead.  0, or -1 out of memory (*a unchanged). */
static int mc_loader_sort_keyrefs(struct mc_persist_keyref **a, size_t n)
{
	struct mc_persist_keyref *in = *a, *out;
	size_t *end, i, k, nb;
	unsigned bits = 1;

	if (n < 2)
		return 0;
	while (bits < 24 && ((size_t)4 << bits) < n)
		bits++;
	nb = (size_t)1 << bits;
	out = malloc(n * sizeof(*out));
	end = calloc(nb + 1, sizeof(*end));
	if (out == NULL || end == NULL) {
		free(out);
		free(end);
		return -1;
	}
	for (i = 0; i < n; i++)
		end[(in[i].hash >> (64 - bits)) + 1]++;
	for (k = 1; k <= nb; k++)
		end[k] += end[k - 1];
	for (i = 0; i < n; i++)	/* end[k] moves from bucket k's start to its end */
		out[end[in[i].hash >> (64 - bits)]++] = in[i];
	for (k = 0, i = 0; k < nb; i = end[k++]) {
		size_t len = end[k] - i, x, y;

		if (len > 64) {
			if (mc_persist_keyrefs_sort(out + i, len) != 0) {
				free(out);
				free(end);
				return -1;
			}
			continue;
		}
		for (x = i + 1; x < end[k]; x++) {
			struct mc_persist_keyref v = out[x];

			for (y = x; y > i && out[y - 1].hash > v.hash; y--)
				out[y] = out[y - 1];
			out[y] = v;
		}
	}
	free(end);
	free(in);
	*a = out;
	return 0;
}

/* Merge the sorted runs a[bound[i], bound[i + 1]), i < n, pairwise into one, stably (on a tie
 * the earlier run's first); b is scratch as long.  Returns the one of a and b that holds it. */
static struct mc_persist_keyref *mc_keyrefs_merge(struct mc_persist_keyref *a,
						  struct mc_persist_keyref *b, size_t *bound,
						  size_t n)
{
	while (n > 1) {
		struct mc_persist_keyref *t;
		size_t i, k = 0;

		for (i = 0; i < n; i += 2) {
			size_t lo = bound[i], mid = bound[i + 1];
			size_t hi = i + 2 <= n ? bound[i + 2] : mid, x = lo, y = mid, o = lo;

			if (i + 1 == n)
				mid = hi = bound[n];
			while (x < mid && y < hi)
				b[o++] = a[y].hash < a[x].hash ? a[y++] : a[x++];
			memcpy(b + o, a + x, (mid - x) * sizeof(*a));
			o += mid - x;
			memcpy(b + o, a + y, (hi - y) * sizeof(*a));
			bound[k++] = lo;
		}
		bound[k] = bound[n];
		n = k;
		t = a;
		a = b;
		b = t;
	}
	return a;
}

/* The parts, in generation order, become the result: their chunks one list, their references
 * one sorted list (chunks renumbered), their ranges one list indexing one list of segment ids.
 * 0 or -ENOMEM. */
int mc_loadpart_merge(struct mc_loader_part *parts, size_t nparts, struct mc_loader_part *r,
		      void (*ranges_done)(void *), void *arg)
{
	struct mc_persist_keyref *a, *b, *sorted;
	size_t nchunks = 0, nrefs = 0, nranges = 0, *bound, i, j;

	if (nparts == 1) {
		*r = parts[0];
		memset(&parts[0], 0, sizeof(parts[0]));
		ranges_done(arg);
		return 0;
	}
	for (i = 0; i < nparts; i++) {
		nchunks += parts[i].nchunks;
		nrefs += parts[i].nkeyrefs;
		nranges += parts[i].nranges;
	}
	a = malloc((nrefs ? nrefs : 1) * sizeof(*a));
	b = malloc((nrefs ? nrefs : 1) * sizeof(*b));
	if (a == NULL || b == NULL) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	bound = mc_xmalloc((nparts + 1) * sizeof(*bound));
	r->chunks = mc_xmalloc((nchunks ? nchunks : 1) * sizeof(*r->chunks));
	r->capchunks = nchunks;
	r->ranges = mc_xmalloc((nranges ? nranges : 1) * sizeof(*r->ranges));
	r->capranges = nranges;
	for (i = 0; i < nparts; i++) {
		struct mc_loader_part *p = &parts[i];
		uint32_t base = (uint32_t)r->nchunks, *map;

		if (p->nchunks)	/* an empty part has no array */
			memcpy(r->chunks + r->nchunks, p->chunks, p->nchunks * sizeof(*p->chunks));
		r->nchunks += p->nchunks;
		bound[i] = r->nkeyrefs;
		for (j = 0; j < p->nkeyrefs; j++) {
			a[r->nkeyrefs] = p->keyrefs[j];
			a[r->nkeyrefs++].chunk += base;
		}
		map = mc_xmalloc((p->nsegids ? p->nsegids : 1) * sizeof(*map));
		for (j = 0; j < p->nsegids; j++)
			map[j] = mc_loader_segidx(r, p->segids[j]);
		for (j = 0; j < p->nranges; j++) {
			struct mc_persist_range e = p->ranges[j];
			uint32_t seg = map[e.order >> 48];

			if (seg == UINT32_MAX)
				continue;
			e.chunk += base;
			e.order = (uint64_t)seg << 48 | (e.order & ((1ull << 48) - 1));
			r->ranges[r->nranges++] = e;
		}
		free(map);
		p->nchunks = 0;		/* its chunks are the result's now */
		mc_loadpart_fini(p);
		memset(p, 0, sizeof(*p));
	}
	bound[nparts] = r->nkeyrefs;
	ranges_done(arg);	/* nothing below touches the ranges or can fail */
	sorted = mc_keyrefs_merge(a, b, bound, nparts);
	free(sorted == a ? b : a);
	free(bound);
	r->keyrefs = sorted;
	r->capkeyrefs = nrefs;
	return 0;
}

void mc_loadpart_fini(struct mc_loader_part *p)
{
	size_t i;

	for (i = 0; i < p->nchunks; i++)
		mc_persist_rows_fini(&p->chunks[i]);
	free(p->chunks);
	free(p->keyrefs);
	free(p->ranges);
	free(p->segids);
	free(p->seghash);
}

void mc_loadpart_add(struct mc_loader_part *p, const struct mc_persist_object *o)
{
	if (p->nchunks == 0 || p->chunks[p->nchunks - 1].n == MC_LOADER_CHUNK_ROWS)
		mc_loader_new_chunk(p);
	mc_persist_rows_add(&p->chunks[p->nchunks - 1], o);
	mc_loader_add_keyref(p, (uint32_t)(p->nchunks - 1), o->key, o->key_len);
	mc_loader_add_ranges(p, (uint32_t)(p->nchunks - 1));
}

int mc_loadpart_finish(struct mc_loader_part *p)
{
	if (p->nchunks)
		mc_persist_rows_seal(&p->chunks[p->nchunks - 1]);
	if (mc_loader_sort_keyrefs(&p->keyrefs, p->nkeyrefs) != 0)
		return -ENOMEM;
	p->capkeyrefs = p->nkeyrefs;
	return 0;
}

size_t mc_loadpart_resolve(struct mc_loader_part *p)
{
	size_t older = mc_loader_mark_older(p);

	if (older)
		mc_loader_drop_older_ranges(p);
	return older;
}

size_t mc_loadpart_rows(const struct mc_loader_part *p)
{
	size_t i, n = 0;

	for (i = 0; i < p->nchunks; i++)
		n += p->chunks[i].n;
	return n;
}

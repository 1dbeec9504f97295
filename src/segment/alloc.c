/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-segment offset allocator: a two-level segregated fit (TLSF) over offsets, never over memory.
 *
 * Only free ranges have a node (struct mc_alloc_range: offset, size, bin links, two hash links).
 * A reservation is just its offset and length, which the caller keeps (the master keeps the
 * offset in the replica and the length follows from the object's size), so the allocator costs
 * nothing per reserved block: it scales with the number of free ranges, i.e. with fragmentation,
 * not with the number of objects.
 *
 * Free ranges sit in one of MC_FL_COUNT x MC_SL_COUNT size-class bins; a first-level bitmap says
 * which size octaves have a non-empty bin and one second-level bitmap per octave says which of
 * its 32 sub-classes do.  Finding a free range that is certain to fit is therefore two
 * find-first-set operations, whatever the segment size or the number of free ranges.  Two hash
 * tables find a free range by its first offset and by its end: a release looks up the free range
 * ending where it starts and the one starting where it ends and coalesces with both, O(1).
 *
 * Invariants (checked by mc_alloc_check):
 *   - free ranges are disjoint, non-empty, inside [0, capacity), multiples of MC_ALLOC_ALIGN in
 *     offset and size, and no two touch (release coalesces at once);
 *   - a range is in the bin its size maps to, a bitmap bit is set iff its bin is non-empty;
 *   - a range is in the start table under its offset and in the end table under offset + size;
 *   - used = capacity - the sizes of the free ranges.
 *
 * Nodes are carved from slabs owned by the allocator and recycled through a spare list; hash
 * tables double when the free ranges outnumber their buckets (a rehash of the free ranges only).
 * Slabs and tables are returned only by mc_alloc_free.
 *
 * Single-threaded: the master's reactor thread owns every allocator.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "segment/alloc.h"

#define MC_ALLOC_SHIFT 6		/* log2(MC_ALLOC_ALIGN) */
#define MC_SL_LOG2 5			/* 32 sub-classes per octave: a class spans <= 1/32 of its size */
#define MC_SL_COUNT (1u << MC_SL_LOG2)
/* Units (MC_ALLOC_ALIGN bytes) fit in 58 bits; octaves below MC_SL_COUNT units are folded into the
 * exact classes of first level 0, so 58 - MC_SL_LOG2 + 1 first-level classes cover 2^64 bytes. */
#define MC_FL_COUNT (64 - MC_ALLOC_SHIFT - MC_SL_LOG2 + 1)
/* How many entries of the request's own bin a reserve looks at before taking the bin that is
 * guaranteed to fit: a tighter fit without giving up the bounded worst case. */
#define MC_GOOD_FIT_SCAN 8
/* largest_free looks at this many entries of the highest non-empty bin. */
#define MC_LARGEST_SCAN 64
/* Slab growth: small allocators stay small, busy ones stop calling malloc. */
#define MC_SLAB_MIN 16
#define MC_SLAB_MAX 8192
/* Initial buckets of each hash table (a power of two). */
#define MC_HASH_MIN 16

_Static_assert((1u << MC_ALLOC_SHIFT) == MC_ALLOC_ALIGN, "MC_ALLOC_SHIFT matches MC_ALLOC_ALIGN");
_Static_assert(MC_FL_COUNT <= 64, "first-level bitmap fits a uint64_t");

struct mc_alloc_range {
	uint64_t off;
	uint64_t size;
	struct mc_alloc_range *fprev, *fnext;	/* bin list; fnext chains spare nodes */
	struct mc_alloc_range *snext, *enext;	/* start and end hash chains */
};

struct mc_alloc_slab {
	struct mc_alloc_slab *next;
	struct mc_alloc_range r[];
};

struct mc_alloc {
	uint64_t capacity;
	uint64_t used;
	size_t nfree;				/* free ranges = entries in all bins */
	struct mc_alloc_range *cursor;		/* reserve_at's last remainder, or NULL */
	struct mc_alloc_range *spare;		/* recycled nodes, chained by fnext */
	struct mc_alloc_slab *slabs;
	size_t slab_left;			/* unused nodes at the end of slabs->r */
	size_t slab_used;
	size_t slab_next;			/* node count of the next slab */
	struct mc_alloc_range **by_start;	/* hash tables of nbuckets chains */
	struct mc_alloc_range **by_end;
	size_t nbuckets;
	uint64_t fl_map;
	uint32_t sl_map[MC_FL_COUNT];
	struct mc_alloc_range *bins[MC_FL_COUNT][MC_SL_COUNT];
};

static inline uint64_t align_up(uint64_t len)
{
	return mc_alloc_round(len);
}

static inline unsigned msb64(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

/* The bin holding free ranges of u units (u > 0).  Bin (fl >= 1, sl) holds sizes in
 * [(32 + sl) << (fl - 1), (33 + sl) << (fl - 1)) units; bin (0, sl) holds exactly sl units. */
static inline void size_class(uint64_t u, unsigned *fl, unsigned *sl)
{
	unsigned m;

	if (u < MC_SL_COUNT) {
		*fl = 0;
		*sl = (unsigned)u;
		return;
	}
	m = msb64(u);
	*fl = m - MC_SL_LOG2 + 1;
	*sl = (unsigned)(u >> (m - MC_SL_LOG2)) - MC_SL_COUNT;
}

/* Rounds u units up to the next class boundary, so every range of the resulting class fits u. */
static inline uint64_t size_class_round_up(uint64_t u)
{
	if (u < MC_SL_COUNT)
		return u;
	return u + ((uint64_t)1 << (msb64(u) - MC_SL_LOG2)) - 1;
}

/* ------------------------------------------------------------------------ node pool */

/* A node from the spare list or the current slab; NULL when malloc fails.  Contents undefined. */
static struct mc_alloc_range *node_get(struct mc_alloc *a)
{
	struct mc_alloc_range *b = a->spare;
	struct mc_alloc_slab *s;

	if (b != NULL) {
		a->spare = b->fnext;
		return b;
	}
	if (a->slab_left == 0) {
		s = malloc(sizeof(*s) + a->slab_next * sizeof(s->r[0]));
		if (s == NULL)
			return NULL;
		s->next = a->slabs;
		a->slabs = s;
		a->slab_left = a->slab_next;
		a->slab_used = 0;
		if (a->slab_next < MC_SLAB_MAX)
			a->slab_next *= 2;
	}
	a->slab_left--;
	return &a->slabs->r[a->slab_used++];
}

/* Recycles a node that is already out of its bin and both hash tables. */
static void node_put(struct mc_alloc *a, struct mc_alloc_range *b)
{
	if (a->cursor == b)
		a->cursor = NULL;
	b->fnext = a->spare;
	a->spare = b;
}

/* ------------------------------------------------------------------------ hash tables */

static inline size_t hash_off(const struct mc_alloc *a, uint64_t off)
{
	uint64_t u = off >> MC_ALLOC_SHIFT;

	return (size_t)((u * 0x9e3779b97f4a7c15ull) >> 32) & (a->nbuckets - 1);
}

static struct mc_alloc_range *start_find(const struct mc_alloc *a, uint64_t off)
{
	struct mc_alloc_range *b;

	for (b = a->by_start[hash_off(a, off)]; b != NULL; b = b->snext)
		if (b->off == off)
			return b;
	return NULL;
}

static struct mc_alloc_range *end_find(const struct mc_alloc *a, uint64_t end)
{
	struct mc_alloc_range *b;

	for (b = a->by_end[hash_off(a, end)]; b != NULL; b = b->enext)
		if (b->off + b->size == end)
			return b;
	return NULL;
}

static void start_add(struct mc_alloc *a, struct mc_alloc_range *b)
{
	struct mc_alloc_range **h = &a->by_start[hash_off(a, b->off)];

	b->snext = *h;
	*h = b;
}

static void end_add(struct mc_alloc *a, struct mc_alloc_range *b)
{
	struct mc_alloc_range **h = &a->by_end[hash_off(a, b->off + b->size)];

	b->enext = *h;
	*h = b;
}

static void start_del(struct mc_alloc *a, struct mc_alloc_range *b)
{
	struct mc_alloc_range **pp = &a->by_start[hash_off(a, b->off)];

	while (*pp != b)
		pp = &(*pp)->snext;
	*pp = b->snext;
}

static void end_del(struct mc_alloc *a, struct mc_alloc_range *b)
{
	struct mc_alloc_range **pp = &a->by_end[hash_off(a, b->off + b->size)];

	while (*pp != b)
		pp = &(*pp)->enext;
	*pp = b->enext;
}

/* Doubles both tables once the free ranges outnumber the buckets.  A failed malloc keeps the
 * old tables (longer chains, still correct). */
static void hash_grow(struct mc_alloc *a)
{
	struct mc_alloc_range **os = a->by_start, **oe = a->by_end, *b, *next;
	size_t on = a->nbuckets, n = on * 2, i;

	if (a->nfree <= on)
		return;
	a->by_start = calloc(n, sizeof(*a->by_start));
	a->by_end = calloc(n, sizeof(*a->by_end));
	if (a->by_start == NULL || a->by_end == NULL) {
		free(a->by_start);
		free(a->by_end);
		a->by_start = os;
		a->by_end = oe;
		return;
	}
	a->nbuckets = n;
	for (i = 0; i < on; i++) {
		for (b = os[i]; b != NULL; b = next) {
			next = b->snext;
			start_add(a, b);
		}
		for (b = oe[i]; b != NULL; b = next) {
			next = b->enext;
			end_add(a, b);
		}
	}
	free(os);
	free(oe);
}

/* ------------------------------------------------------------------------ bins */

static void bin_insert(struct mc_alloc *a, struct mc_alloc_range *b)
{
	unsigned fl, sl;
	struct mc_alloc_range **head;

	size_class(b->size >> MC_ALLOC_SHIFT, &fl, &sl);
	head = &a->bins[fl][sl];
	b->fprev = NULL;
	b->fnext = *head;
	if (*head != NULL)
		(*head)->fprev = b;
	*head = b;
	a->sl_map[fl] |= 1u << sl;
	a->fl_map |= (uint64_t)1 << fl;
}

static void bin_remove(struct mc_alloc *a, struct mc_alloc_range *b)
{
	unsigned fl, sl;

	size_class(b->size >> MC_ALLOC_SHIFT, &fl, &sl);
	if (b->fprev != NULL)
		b->fprev->fnext = b->fnext;
	else
		a->bins[fl][sl] = b->fnext;
	if (b->fnext != NULL)
		b->fnext->fprev = b->fprev;
	if (a->bins[fl][sl] == NULL) {
		a->sl_map[fl] &= ~(1u << sl);
		if (a->sl_map[fl] == 0)
			a->fl_map &= ~((uint64_t)1 << fl);
	}
}

/* A new free range everywhere it belongs. */
static void range_add(struct mc_alloc *a, struct mc_alloc_range *b)
{
	bin_insert(a, b);
	start_add(a, b);
	end_add(a, b);
	a->nfree++;
	hash_grow(a);
}

/* A free range out of everything and recycled. */
static void range_drop(struct mc_alloc *a, struct mc_alloc_range *b)
{
	bin_remove(a, b);
	start_del(a, b);
	end_del(a, b);
	a->nfree--;
	node_put(a, b);
}

/* Changes a free range to [off, off + size), keeping it in the right bin and tables. */
static void range_move(struct mc_alloc *a, struct mc_alloc_range *b, uint64_t off, uint64_t size)
{
	bin_remove(a, b);
	if (b->off != off) {
		start_del(a, b);
		if (b->off + b->size != off + size) {
			end_del(a, b);
			b->off = off;
			b->size = size;
			end_add(a, b);
		} else {
			b->off = off;
			b->size = size;
		}
		start_add(a, b);
	} else {
		end_del(a, b);
		b->size = size;
		end_add(a, b);
	}
	bin_insert(a, b);
}

/* The first non-empty bin at or above (fl, sl), or NULL. */
static struct mc_alloc_range *bin_find_at_least(const struct mc_alloc *a, unsigned fl, unsigned sl)
{
	uint32_t slm;
	uint64_t flm;

	if (fl >= MC_FL_COUNT)
		return NULL;
	slm = a->sl_map[fl] & (~0u << sl);
	if (slm == 0) {
		flm = fl + 1 < 64 ? a->fl_map & (~(uint64_t)0 << (fl + 1)) : 0;
		if (flm == 0)
			return NULL;
		fl = (unsigned)__builtin_ctzll(flm);
		slm = a->sl_map[fl];
	}
	sl = (unsigned)__builtin_ctz(slm);
	return a->bins[fl][sl];
}

/* A free range of at least len bytes (aligned), or NULL.  Bounded: at most MC_GOOD_FIT_SCAN list
 * entries plus two bitmap searches.  It may miss a fitting range deep in the request's own bin,
 * but never one in a class above it. */
static struct mc_alloc_range *find_fit(const struct mc_alloc *a, uint64_t len)
{
	struct mc_alloc_range *b, *best = NULL;
	unsigned fl, sl, n;
	uint64_t u = len >> MC_ALLOC_SHIFT;

	/* Good fit: the request's own bin holds ranges from slightly smaller to slightly larger. */
	size_class(u, &fl, &sl);
	for (b = a->bins[fl][sl], n = 0; b != NULL && n < MC_GOOD_FIT_SCAN; b = b->fnext, n++) {
		if (b->size < len || (best != NULL && b->size >= best->size))
			continue;
		best = b;
		if (b->size == len)
			break;
	}
	if (best != NULL)
		return best;

	/* Guaranteed fit: every range of the rounded-up class holds len. */
	size_class(size_class_round_up(u), &fl, &sl);
	return bin_find_at_least(a, fl, sl);
}

/* ------------------------------------------------------------------------ public API */

struct mc_alloc *mc_alloc_new(uint64_t size)
{
	struct mc_alloc *a;
	struct mc_alloc_range *b;
	uint64_t cap = size & ~(uint64_t)(MC_ALLOC_ALIGN - 1);

	if (cap == 0)
		return NULL;
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return NULL;
	a->capacity = cap;
	a->slab_next = MC_SLAB_MIN;
	a->nbuckets = MC_HASH_MIN;
	a->by_start = calloc(a->nbuckets, sizeof(*a->by_start));
	a->by_end = calloc(a->nbuckets, sizeof(*a->by_end));
	if (a->by_start == NULL || a->by_end == NULL)
		goto free_alloc;
	b = node_get(a);
	if (b == NULL)
		goto free_alloc;
	b->off = 0;
	b->size = cap;
	range_add(a, b);
	return a;

free_alloc:
	mc_alloc_free(a);
	return NULL;
}

void mc_alloc_free(struct mc_alloc *a)
{
	struct mc_alloc_slab *s, *next;

	if (a == NULL)
		return;
	for (s = a->slabs; s != NULL; s = next) {
		next = s->next;
		free(s);
	}
	free(a->by_start);
	free(a->by_end);
	free(a);
}

int mc_alloc_reserve(struct mc_alloc *a, uint64_t len, uint64_t *off)
{
	struct mc_alloc_range *b;

	if (len == 0 || len > a->capacity)
		return -EINVAL;
	len = align_up(len);	/* capacity is aligned, so still <= capacity */
	b = find_fit(a, len);
	if (b == NULL)
		return -ENOSPC;
	*off = b->off;
	if (b->size == len)
		range_drop(a, b);
	else
		range_move(a, b, b->off + len, b->size - len);
	a->used += len;
	return 0;
}

/* The free range containing off, or NULL.  O(1) at the cursor (ascending rebuilds) or at a free
 * range's first offset; otherwise walks the bins, O(free ranges). */
static struct mc_alloc_range *find_containing(const struct mc_alloc *a, uint64_t off)
{
	struct mc_alloc_range *b = a->cursor;
	unsigned fl, sl;

	if (b != NULL && b->off <= off && off - b->off < b->size)
		return b;
	b = start_find(a, off);
	if (b != NULL)
		return b;
	for (fl = 0; fl < MC_FL_COUNT; fl++) {
		if (!(a->fl_map & ((uint64_t)1 << fl)))
			continue;
		for (sl = 0; sl < MC_SL_COUNT; sl++)
			for (b = a->bins[fl][sl]; b != NULL; b = b->fnext)
				if (b->off <= off && off - b->off < b->size)
					return b;
	}
	return NULL;
}

/*
 * Rebuild calls this once per persisted reservation.  Call it in ascending offset order: the
 * search then starts from the remainder the previous call left and costs O(1), so a million
 * objects rebuild in well under a second.  Any order is correct, but a call that does not start
 * a free range and lies before the cursor walks the free ranges.  Needs at most one new node;
 * on -ENOMEM nothing has changed.
 */
int mc_alloc_reserve_at(struct mc_alloc *a, uint64_t off, uint64_t len)
{
	struct mc_alloc_range *b, *tail;
	uint64_t head_len, tail_len, end;

	if (len == 0 || off % MC_ALLOC_ALIGN != 0 || off >= a->capacity || len > a->capacity - off)
		return -EINVAL;
	len = align_up(len);	/* capacity - off is aligned, so still fits */
	b = find_containing(a, off);
	if (b == NULL || b->off + b->size - off < len)
		return -EEXIST;
	end = b->off + b->size;
	head_len = off - b->off;
	tail_len = end - off - len;
	if (head_len != 0 && tail_len != 0) {
		tail = node_get(a);
		if (tail == NULL)
			return -ENOMEM;
		range_move(a, b, b->off, head_len);
		tail->off = off + len;
		tail->size = tail_len;
		range_add(a, tail);
		a->cursor = tail;
	} else if (head_len != 0) {
		range_move(a, b, b->off, head_len);
	} else if (tail_len != 0) {
		range_move(a, b, off + len, tail_len);
		a->cursor = b;
	} else {
		range_drop(a, b);
	}
	a->used += len;
	return 0;
}

int mc_alloc_release(struct mc_alloc *a, uint64_t off, uint64_t len)
{
	struct mc_alloc_range *p, *n, *b;

	if (len == 0 || off % MC_ALLOC_ALIGN != 0 || off >= a->capacity || len > a->capacity - off)
		return -EINVAL;
	len = align_up(len);
	if (len > a->used)
		return -EINVAL;
	p = end_find(a, off);
	n = start_find(a, off + len);
	if (p == NULL && n == NULL) {
		b = node_get(a);
		if (b == NULL)
			return -ENOMEM;
		b->off = off;
		b->size = len;
		range_add(a, b);
	} else if (n == NULL) {
		range_move(a, p, p->off, p->size + len);
	} else if (p == NULL) {
		range_move(a, n, off, n->size + len);
	} else {
		uint64_t total = p->size + len + n->size;

		range_drop(a, n);
		range_move(a, p, p->off, total);
	}
	a->used -= len;
	return 0;
}

uint64_t mc_alloc_capacity(const struct mc_alloc *a)
{
	return a->capacity;
}

uint64_t mc_alloc_used(const struct mc_alloc *a)
{
	return a->used;
}

/* Scans at most MC_LARGEST_SCAN entries of the highest non-empty bin: exact unless that bin holds
 * more ranges than that, and then short of the truth by less than 1/32. */
uint64_t mc_alloc_largest_free(const struct mc_alloc *a)
{
	const struct mc_alloc_range *b;
	unsigned fl, sl, n;
	uint64_t best = 0;

	if (a->fl_map == 0)
		return 0;
	fl = msb64(a->fl_map);
	sl = 31u - (unsigned)__builtin_clz(a->sl_map[fl]);
	for (b = a->bins[fl][sl], n = 0; b != NULL && n < MC_LARGEST_SCAN; b = b->fnext, n++)
		if (b->size > best)
			best = b->size;
	return best;
}

size_t mc_alloc_free_ranges(const struct mc_alloc *a)
{
	return a->nfree;
}

static int range_cmp(const void *x, const void *y)
{
	const struct mc_alloc_range *a = *(const struct mc_alloc_range *const *)x;
	const struct mc_alloc_range *b = *(const struct mc_alloc_range *const *)y;

	return a->off < b->off ? -1 : a->off > b->off;
}

int mc_alloc_check(const struct mc_alloc *a)
{
	const struct mc_alloc_range *b, *prev;
	struct mc_alloc_range **all;
	uint64_t free_bytes = 0;
	size_t n = 0, i, schained = 0, echained = 0;
	unsigned fl, sl, bfl, bsl;
	int rc = -EFAULT;

	all = malloc((a->nfree + 1) * sizeof(*all));
	if (all == NULL)
		return -ENOMEM;
	for (fl = 0; fl < MC_FL_COUNT; fl++) {
		if (!!(a->fl_map & ((uint64_t)1 << fl)) != (a->sl_map[fl] != 0))
			goto out;
		for (sl = 0; sl < MC_SL_COUNT; sl++) {
			if (!!(a->sl_map[fl] & (1u << sl)) != (a->bins[fl][sl] != NULL))
				goto out;
			for (b = a->bins[fl][sl], prev = NULL; b != NULL; prev = b, b = b->fnext) {
				size_class(b->size >> MC_ALLOC_SHIFT, &bfl, &bsl);
				if (b->fprev != prev || bfl != fl || bsl != sl || n >= a->nfree)
					goto out;	/* the count bound also stops a cycle */
				all[n++] = (struct mc_alloc_range *)b;
			}
		}
	}
	if (n != a->nfree)
		goto out;
	qsort(all, n, sizeof(*all), range_cmp);
	for (i = 0; i < n; i++) {
		b = all[i];
		if (b->size == 0 || b->size % MC_ALLOC_ALIGN != 0 || b->off % MC_ALLOC_ALIGN != 0 ||
		    b->off >= a->capacity || b->size > a->capacity - b->off)
			goto out;
		if (i > 0 && all[i - 1]->off + all[i - 1]->size >= b->off)
			goto out;	/* overlap, or touching: a missed coalesce */
		if (start_find(a, b->off) != b || end_find(a, b->off + b->size) != b)
			goto out;
		free_bytes += b->size;
	}
	for (i = 0; i < a->nbuckets; i++) {
		for (b = a->by_start[i]; b != NULL && schained <= n; b = b->snext)
			schained++;
		for (b = a->by_end[i]; b != NULL && echained <= n; b = b->enext)
			echained++;
	}
	if (schained != n || echained != n || free_bytes != a->capacity - a->used)
		goto out;
	rc = 0;
out:
	free(all);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-segment offset allocator: a two-level segregated fit (TLSF) over offsets, never over memory.
 *
 * The range [0, capacity) is tiled by blocks, each a heap node (struct mc_alloc_block) holding its
 * offset, its size and a free flag.  Blocks are chained in address order, so release finds both
 * neighbours in O(1) and coalesces.  Free blocks additionally sit in one of MC_FL_COUNT x
 * MC_SL_COUNT size-class bins; a first-level bitmap says which size octaves have a non-empty bin
 * and one second-level bitmap per octave says which of its 32 sub-classes do.  Finding a free block
 * that is certain to fit is therefore two find-first-set operations, whatever the segment size or
 * the number of free ranges.
 *
 * Invariants (checked by mc_alloc_check):
 *   - blocks tile [0, capacity) without gaps; every size and offset is a multiple of MC_ALLOC_ALIGN;
 *   - no two address neighbours are both free (release coalesces at once);
 *   - a block is in a bin iff it is free, and in the bin its size maps to; a bitmap bit is set iff
 *     its bin is non-empty;
 *   - a node's offset never changes while the node is live: splits create the node for the higher
 *     part, merges keep the lower node.  The reserve_at cursor relies on this, and so does a->first
 *     (the block at offset 0 is never merged away).
 *
 * Nodes are carved from slabs owned by the allocator and recycled through a spare list, so a block
 * costs 48 bytes and no malloc on the hot path.  Slabs are returned only by mc_alloc_free.
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
#define MC_SLAB_MIN 64
#define MC_SLAB_MAX 8192

#define MC_BLK_FREE ((uint64_t)1)	/* low bit of size_flags; sizes are multiples of 64 */

_Static_assert((1u << MC_ALLOC_SHIFT) == MC_ALLOC_ALIGN, "MC_ALLOC_SHIFT matches MC_ALLOC_ALIGN");
_Static_assert(MC_FL_COUNT <= 64, "first-level bitmap fits a uint64_t");

struct mc_alloc_block {
	uint64_t off;
	uint64_t size_flags;			/* size | MC_BLK_FREE */
	struct mc_alloc_block *prev, *next;	/* address order */
	struct mc_alloc_block *fprev, *fnext;	/* bin list while free; fnext chains spare nodes */
};

_Static_assert(sizeof(struct mc_alloc_block) <= 48, "a block node stays within 48 bytes");

struct mc_alloc_slab {
	struct mc_alloc_slab *next;
	struct mc_alloc_block blk[];
};

struct mc_alloc {
	uint64_t capacity;
	uint64_t used;
	size_t nfree;				/* free ranges = entries in all bins */
	struct mc_alloc_block *first;		/* the block at offset 0, never recycled */
	struct mc_alloc_block *cursor;		/* reserve_at's last position, or NULL */
	struct mc_alloc_block *spare;		/* recycled nodes, chained by fnext */
	struct mc_alloc_slab *slabs;
	size_t slab_left;			/* unused nodes at the end of slabs->blk */
	size_t slab_used;
	size_t slab_next;			/* node count of the next slab */
	uint64_t fl_map;
	uint32_t sl_map[MC_FL_COUNT];
	struct mc_alloc_block *bins[MC_FL_COUNT][MC_SL_COUNT];
};

static inline uint64_t blk_size(const struct mc_alloc_block *b)
{
	return b->size_flags & ~MC_BLK_FREE;
}

static inline int blk_is_free(const struct mc_alloc_block *b)
{
	return (b->size_flags & MC_BLK_FREE) != 0;
}

static inline uint64_t align_up(uint64_t len)
{
	return (len + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
}

static inline unsigned msb64(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

/* The bin holding free blocks of u units (u > 0).  Bin (fl >= 1, sl) holds sizes in
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

/* Rounds u units up to the next class boundary, so every block of the resulting class fits u. */
static inline uint64_t size_class_round_up(uint64_t u)
{
	if (u < MC_SL_COUNT)
		return u;
	return u + ((uint64_t)1 << (msb64(u) - MC_SL_LOG2)) - 1;
}

/* ------------------------------------------------------------------------ node pool */

/* A node from the spare list or the current slab; NULL when malloc fails.  Contents undefined. */
static struct mc_alloc_block *node_get(struct mc_alloc *a)
{
	struct mc_alloc_block *b = a->spare;
	struct mc_alloc_slab *s;

	if (b != NULL) {
		a->spare = b->fnext;
		return b;
	}
	if (a->slab_left == 0) {
		s = malloc(sizeof(*s) + a->slab_next * sizeof(s->blk[0]));
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
	return &a->slabs->blk[a->slab_used++];
}

/* Recycles a node that is already unlinked from the address list and from its bin.  Marking it
 * free turns a stale second release of the handle into a no-op until the node is reused. */
static void node_put(struct mc_alloc *a, struct mc_alloc_block *b)
{
	if (a->cursor == b)
		a->cursor = NULL;
	b->size_flags = MC_BLK_FREE;
	b->prev = b->next = b->fprev = NULL;
	b->fnext = a->spare;
	a->spare = b;
}

/* ------------------------------------------------------------------------ address list */

static void list_insert_after(struct mc_alloc_block *pos, struct mc_alloc_block *b)
{
	b->prev = pos;
	b->next = pos->next;
	if (pos->next != NULL)
		pos->next->prev = b;
	pos->next = b;
}

static void list_unlink(struct mc_alloc_block *b)
{
	if (b->prev != NULL)
		b->prev->next = b->next;
	if (b->next != NULL)
		b->next->prev = b->prev;
}

/* ------------------------------------------------------------------------ bins */

static void bin_insert(struct mc_alloc *a, struct mc_alloc_block *b)
{
	unsigned fl, sl;
	struct mc_alloc_block **head;

	size_class(blk_size(b) >> MC_ALLOC_SHIFT, &fl, &sl);
	head = &a->bins[fl][sl];
	b->fprev = NULL;
	b->fnext = *head;
	if (*head != NULL)
		(*head)->fprev = b;
	*head = b;
	a->sl_map[fl] |= 1u << sl;
	a->fl_map |= (uint64_t)1 << fl;
	a->nfree++;
}

static void bin_remove(struct mc_alloc *a, struct mc_alloc_block *b)
{
	unsigned fl, sl;

	size_class(blk_size(b) >> MC_ALLOC_SHIFT, &fl, &sl);
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
	a->nfree--;
}

/* The first non-empty bin at or above (fl, sl), or NULL. */
static struct mc_alloc_block *bin_find_at_least(const struct mc_alloc *a, unsigned fl, unsigned sl)
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

/* A free block of at least len bytes (aligned), or NULL.  Bounded: at most MC_GOOD_FIT_SCAN list
 * entries plus two bitmap searches.  It may miss a fitting block deep in the request's own bin,
 * but never one in a class above it. */
static struct mc_alloc_block *find_fit(const struct mc_alloc *a, uint64_t len)
{
	struct mc_alloc_block *b, *best = NULL;
	unsigned fl, sl, n;
	uint64_t u = len >> MC_ALLOC_SHIFT, sz;

	/* Good fit: the request's own bin holds blocks from slightly smaller to slightly larger. */
	size_class(u, &fl, &sl);
	for (b = a->bins[fl][sl], n = 0; b != NULL && n < MC_GOOD_FIT_SCAN; b = b->fnext, n++) {
		sz = blk_size(b);
		if (sz < len || (best != NULL && sz >= blk_size(best)))
			continue;
		best = b;
		if (sz == len)
			break;
	}
	if (best != NULL)
		return best;

	/* Guaranteed fit: every block of the rounded-up class holds len. */
	size_class(size_class_round_up(u), &fl, &sl);
	return bin_find_at_least(a, fl, sl);
}

/* ------------------------------------------------------------------------ public API */

struct mc_alloc *mc_alloc_new(uint64_t size)
{
	struct mc_alloc *a;
	struct mc_alloc_block *b;
	uint64_t cap = size & ~(uint64_t)(MC_ALLOC_ALIGN - 1);

	if (cap == 0)
		return NULL;
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return NULL;
	a->capacity = cap;
	a->slab_next = MC_SLAB_MIN;
	b = node_get(a);
	if (b == NULL)
		goto free_alloc;
	b->off = 0;
	b->size_flags = cap | MC_BLK_FREE;
	b->prev = b->next = NULL;
	bin_insert(a, b);
	a->first = b;
	return a;

free_alloc:
	free(a);
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
	free(a);
}

int mc_alloc_reserve(struct mc_alloc *a, uint64_t len, struct mc_alloc_block **blk, uint64_t *off)
{
	struct mc_alloc_block *b, *rest = NULL;
	uint64_t sz;

	if (len == 0 || len > a->capacity)
		return -EINVAL;
	len = align_up(len);	/* capacity is aligned, so still <= capacity */
	b = find_fit(a, len);
	if (b == NULL)
		return -ENOSPC;
	sz = blk_size(b);
	if (sz > len) {
		rest = node_get(a);
		if (rest == NULL)
			return -ENOMEM;
	}
	bin_remove(a, b);
	if (rest != NULL) {
		rest->off = b->off + len;
		rest->size_flags = (sz - len) | MC_BLK_FREE;
		list_insert_after(b, rest);
		bin_insert(a, rest);
	}
	b->size_flags = len;
	a->used += len;
	*blk = b;
	*off = b->off;
	return 0;
}

/* The block containing off (off < capacity).  Starts from the cursor when off lies at or after it,
 * which makes ascending-order rebuilds O(1) per call; otherwise walks back from the cursor or
 * forward from offset 0, whichever is nearer by offset.  O(blocks walked). */
static struct mc_alloc_block *find_containing(const struct mc_alloc *a, uint64_t off)
{
	struct mc_alloc_block *b = a->cursor;

	if (b != NULL && off < b->off) {
		if (off >= b->off / 2) {
			while (b->off > off)
				b = b->prev;
			return b;
		}
		b = NULL;
	}
	if (b == NULL)
		b = a->first;
	while (b->off + blk_size(b) <= off)
		b = b->next;
	return b;
}

/*
 * Rebuild calls this once per persisted reservation.  Call it in ascending offset order: the
 * search then starts from the previous call's block and costs O(1), so a million objects rebuild
 * in well under a second.  Any order is correct, but a call below the cursor walks the address
 * list.  Needs up to two new nodes; on -ENOMEM nothing has changed.
 */
int mc_alloc_reserve_at(struct mc_alloc *a, uint64_t off, uint64_t len, struct mc_alloc_block **blk)
{
	struct mc_alloc_block *b, *mid, *tail = NULL;
	uint64_t head_len, tail_len;

	if (len == 0 || off % MC_ALLOC_ALIGN != 0 || off >= a->capacity || len > a->capacity - off)
		return -EINVAL;
	len = align_up(len);	/* capacity - off is aligned, so still fits */
	b = find_containing(a, off);
	a->cursor = b;
	if (!blk_is_free(b) || b->off + blk_size(b) - off < len)
		return -EEXIST;	/* a free block's successor is always reserved */
	head_len = off - b->off;
	tail_len = b->off + blk_size(b) - off - len;

	mid = b;
	if (head_len != 0) {
		mid = node_get(a);
		if (mid == NULL)
			return -ENOMEM;
	}
	if (tail_len != 0) {
		tail = node_get(a);
		if (tail == NULL)
			goto put_mid;
	}

	bin_remove(a, b);
	if (head_len != 0) {
		b->size_flags = head_len | MC_BLK_FREE;
		bin_insert(a, b);
		mid->off = off;
		list_insert_after(b, mid);
	}
	mid->size_flags = len;
	if (tail != NULL) {
		tail->off = off + len;
		tail->size_flags = tail_len | MC_BLK_FREE;
		list_insert_after(mid, tail);
		bin_insert(a, tail);
	}
	a->used += len;
	a->cursor = mid;
	*blk = mid;
	return 0;

put_mid:
	if (mid != b)
		node_put(a, mid);
	return -ENOMEM;
}

void mc_alloc_release(struct mc_alloc *a, struct mc_alloc_block *blk)
{
	struct mc_alloc_block *p, *n;

	if (blk == NULL || blk_is_free(blk))
		return;
	a->used -= blk_size(blk);
	blk->size_flags |= MC_BLK_FREE;

	p = blk->prev;
	if (p != NULL && blk_is_free(p)) {
		bin_remove(a, p);
		p->size_flags += blk_size(blk);
		list_unlink(blk);
		node_put(a, blk);
		blk = p;
	}
	n = blk->next;
	if (n != NULL && blk_is_free(n)) {
		bin_remove(a, n);
		blk->size_flags += blk_size(n);
		list_unlink(n);
		node_put(a, n);
	}
	bin_insert(a, blk);
}

uint64_t mc_alloc_block_offset(const struct mc_alloc_block *blk)
{
	return blk->off;
}

uint64_t mc_alloc_block_size(const struct mc_alloc_block *blk)
{
	return blk_size(blk);
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
	const struct mc_alloc_block *b;
	unsigned fl, sl, n;
	uint64_t best = 0;

	if (a->fl_map == 0)
		return 0;
	fl = msb64(a->fl_map);
	sl = 31u - (unsigned)__builtin_clz(a->sl_map[fl]);
	for (b = a->bins[fl][sl], n = 0; b != NULL && n < MC_LARGEST_SCAN; b = b->fnext, n++)
		if (blk_size(b) > best)
			best = blk_size(b);
	return best;
}

size_t mc_alloc_free_ranges(const struct mc_alloc *a)
{
	return a->nfree;
}

int mc_alloc_check(const struct mc_alloc *a)
{
	const struct mc_alloc_block *b, *prev = NULL;
	uint64_t end = 0, used = 0;
	size_t nfree = 0, inbins = 0;
	unsigned fl, sl, bfl, bsl;

	if (a->first == NULL || a->first->off != 0 || a->first->prev != NULL)
		return -EFAULT;
	for (b = a->first; b != NULL; prev = b, b = b->next) {
		if (b->off != end || b->prev != prev || blk_size(b) == 0 ||
		    blk_size(b) % MC_ALLOC_ALIGN != 0 || blk_size(b) > a->capacity - b->off)
			return -EFAULT;
		if (blk_is_free(b)) {
			if (prev != NULL && blk_is_free(prev))
				return -EFAULT;	/* missed coalesce */
			nfree++;
		} else {
			used += blk_size(b);
		}
		end = b->off + blk_size(b);
	}
	if (end != a->capacity || used != a->used || nfree != a->nfree)
		return -EFAULT;

	for (fl = 0; fl < MC_FL_COUNT; fl++) {
		if (!!(a->fl_map & ((uint64_t)1 << fl)) != (a->sl_map[fl] != 0))
			return -EFAULT;
		for (sl = 0; sl < MC_SL_COUNT; sl++) {
			if (!!(a->sl_map[fl] & (1u << sl)) != (a->bins[fl][sl] != NULL))
				return -EFAULT;
			for (b = a->bins[fl][sl], prev = NULL; b != NULL; prev = b, b = b->fnext) {
				size_class(blk_size(b) >> MC_ALLOC_SHIFT, &bfl, &bsl);
				if (!blk_is_free(b) || b->fprev != prev || bfl != fl || bsl != sl)
					return -EFAULT;
				if (++inbins > nfree)
					return -EFAULT;	/* also stops a cycle */
			}
		}
	}
	if (inbins != nfree)
		return -EFAULT;
	return 0;
}

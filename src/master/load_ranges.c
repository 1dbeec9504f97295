/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A reload's memory ranges, bucketed by segment and offset as they come (load_ranges.h).
 *
 * Each segment's address space is cut into buckets of 2^shift bytes: at most 8192 of them, of
 * 64 KiB at least (a 2.5 GiB segment has 5120 of 512 KiB, a 100 GiB one 6400 of 16 MiB).  A
 * bucket is a chain of blocks, each its previous block's address and as many ranges as fit: 64
 * bytes (3 ranges), then 256 B, 1 KiB, then 4 KiB (255) each, aligned to their size, cut from 1
 * MiB slabs and freed with them (the slab after the one being cut is populated ahead by a
 * prefaulter, prefault.h, if given).  A bucket's head is the address its next range goes to,
 * with its block's size in the low bits: adding a range reads only the heads (tens of KiB) and
 * stores 16 bytes into one of a few thousand blocks being filled, which stay in cache (with 64K
 * buckets every store missed); a full block is known by that address alone (the next block's
 * start).  A sparse bucket (large objects, many segments) costs 64 bytes for up to three
 * ranges.  Handing a bucket back gathers its blocks (seven for a thousand ranges) and sorts them
 * by offset, in cache, where one sort of them all at the end would pass over the whole array
 * several times (and fault in a second one).
 *
 * Single-threaded: whoever owns the reload (the master's loop).
 */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "master/load_ranges.h"
#include "master/prefault.h"
#include "segment/alloc.h"

#define MC_LRANGES_SLAB (1u << 20)
#define MC_LRANGES_MIN_SHIFT 16		/* buckets of 64 KiB at least */
#define MC_LRANGES_MAX_BUCKETS_LOG 13	/* ... and at most 8192 a segment */
#define MC_LRANGES_MAX_SHIFT 38		/* rel, in 64-byte units, fits 32 bits */
#define MC_LRANGES_INSERTION 32		/* buckets this small are sorted by insertion */
#define MC_LRANGES_DIGIT_MAX 12		/* bits of a digit of the sort, at most */
#define MC_LRANGES_ALIGN_LOG 6		/* log2(MC_ALLOC_ALIGN) */

_Static_assert(MC_ALLOC_ALIGN == 1u << MC_LRANGES_ALIGN_LOG, "MC_LRANGES_ALIGN_LOG");

/* A block: this header, then its ranges up to the block's end. */
struct mc_lblock {
	struct mc_lblock *prev;
	uint32_t cls;		/* its size class */
	uint32_t pad;		/* the ranges start 16 bytes in */
};

struct mc_lseg {
	struct mc_segment *seg;
	struct mc_lseg **slot;
	unsigned shift;
	size_t nbuckets;
	/* Each bucket's next free place, its block's class in the low bits; 0 when empty. */
	uintptr_t *next;
};

static size_t mc_lblock_bytes(unsigned cls)
{
	return (size_t)64 << (2 * cls);
}

static size_t mc_lblock_ranges(unsigned cls)
{
	return (mc_lblock_bytes(cls) - sizeof(struct mc_lblock)) / sizeof(struct mc_lrange);
}

/* A block of class cls, from its class's slab (each class cuts its own, so every block is
 * aligned to its size). */
static struct mc_lblock *mc_lranges_cut(struct mc_lranges *R, unsigned cls)
{
	size_t bytes = mc_lblock_bytes(cls);
	struct mc_lblock *blk;

	if (R->left[cls] < bytes) {
		if (R->nslabs == R->capslabs) {
			R->capslabs = R->capslabs ? R->capslabs * 2 : 16;
			R->slabs = mc_xrealloc(R->slabs, R->capslabs * sizeof(*R->slabs));
		}
		/* The spare slab, populated meanwhile; the next spare is asked for now. */
		R->cur[cls] = R->slabs[R->nslabs++] =
			R->spare ? R->spare : mc_xaligned_alloc(4096, MC_LRANGES_SLAB);
		R->left[cls] = MC_LRANGES_SLAB;
		R->spare = mc_xaligned_alloc(4096, MC_LRANGES_SLAB);
		mc_prefault_ask(R->pf, R->spare, MC_LRANGES_SLAB);
	}
	blk = (struct mc_lblock *)R->cur[cls];
	R->cur[cls] += bytes;
	R->left[cls] -= bytes;
	blk->cls = cls;
	return blk;
}

static struct mc_lseg *mc_lseg_new(struct mc_lranges *R, struct mc_lseg **slot,
				   struct mc_segment *seg, uint64_t size)
{
	struct mc_lseg *ls = mc_xcalloc(1, sizeof(*ls));
	unsigned bits = size > 1 ? 64 - (unsigned)__builtin_clzll(size - 1) : 0;

	ls->seg = seg;
	ls->slot = slot;
	ls->shift = bits > MC_LRANGES_MIN_SHIFT + MC_LRANGES_MAX_BUCKETS_LOG ?
			    bits - MC_LRANGES_MAX_BUCKETS_LOG : MC_LRANGES_MIN_SHIFT;
	if (ls->shift > MC_LRANGES_MAX_SHIFT)
		ls->shift = MC_LRANGES_MAX_SHIFT;
	ls->nbuckets = size ? (size_t)((size - 1) >> ls->shift) + 1 : 1;
	ls->next = mc_xcalloc(ls->nbuckets, sizeof(*ls->next));
	if (R->nsegs == R->capsegs) {
		R->capsegs = R->capsegs ? R->capsegs * 2 : 8;
		R->segs = mc_xrealloc(R->segs, R->capsegs * sizeof(*R->segs));
	}
	R->segs[R->nsegs++] = ls;
	*slot = ls;
	return ls;
}

/* The block that place p (inside it, or at its end) of a block of class cls belongs to. */
static struct mc_lblock *mc_lblock_of(uintptr_t p, unsigned cls)
{
	return (struct mc_lblock *)((p - 1) & ~(uintptr_t)(mc_lblock_bytes(cls) - 1));
}

void mc_lranges_add(struct mc_lranges *R, struct mc_lseg **slot, struct mc_segment *seg,
		    uint64_t size, uint64_t off, uint64_t len, struct mc_replica *r)
{
	struct mc_lseg *ls = *slot ? *slot : mc_lseg_new(R, slot, seg, size);
	size_t b = (size_t)(off >> ls->shift);
	uintptr_t h, p;
	unsigned cls;
	uint64_t units = len / MC_ALLOC_ALIGN;

	if (b >= ls->nbuckets)		/* the caller's range is in the segment: never */
		b = ls->nbuckets - 1;
	h = ls->next[b];
	p = h & ~(uintptr_t)15;
	cls = (unsigned)(h & 15);
	if (h == 0 || (p & (mc_lblock_bytes(cls) - 1)) == 0) {	/* none, or full */
		struct mc_lblock *prev = h ? mc_lblock_of(p, cls) : NULL, *blk;

		if (h && cls + 1 < MC_LRANGES_CLASSES)
			cls++;
		blk = mc_lranges_cut(R, cls);
		blk->prev = prev;
		p = (uintptr_t)(blk + 1);
	}
	*(struct mc_lrange *)p = (struct mc_lrange){
		(uint32_t)((off - ((uint64_t)b << ls->shift)) / MC_ALLOC_ALIGN),
		units >> 32 ? 0 : (uint32_t)units, r
	};
	ls->next[b] = (p + sizeof(struct mc_lrange)) | cls;
	R->n++;
}

int mc_lranges_take_out(struct mc_lseg *ls, uint64_t off, const struct mc_replica *r)
{
	uintptr_t h;
	struct mc_lblock *blk;
	struct mc_lrange *e, *end;

	if (ls == NULL || (off >> ls->shift) >= ls->nbuckets || (h = ls->next[off >> ls->shift]) == 0)
		return -1;
	/* The newest block up to the head, then every older one full. */
	end = (struct mc_lrange *)(h & ~(uintptr_t)15);
	for (blk = mc_lblock_of((uintptr_t)end, (unsigned)(h & 15)); blk; blk = blk->prev) {
		for (e = (struct mc_lrange *)(blk + 1); e < end; e++)
			if (e->r == r) {
				e->r = NULL;
				return 0;
			}
		if (blk->prev)
			end = (struct mc_lrange *)(blk->prev + 1) + mc_lblock_ranges(blk->prev->cls);
	}
	return -1;
}

/* Sort m ranges by rel (below 2^bits): by insertion when few, else by digits of as many bits as
 * the bucket is large (a count per value of a digit, 4096 at most: one pass for a bucket of 256
 * KiB, two for one up to 1 GiB). */
static void mc_lranges_sort(struct mc_lranges *R, size_t m, unsigned bits)
{
	struct mc_lrange *a = R->sorted, *b = R->tmp, *t;
	uint32_t count[1u << MC_LRANGES_DIGIT_MAX];
	unsigned width = 64 - (unsigned)__builtin_clzll((m - 1) | 1), passes, shift;
	size_t i;

	if (m <= MC_LRANGES_INSERTION) {
		for (i = 1; i < m; i++) {
			struct mc_lrange x = a[i];
			size_t j = i;

			for (; j > 0 && a[j - 1].rel > x.rel; j--)
				a[j] = a[j - 1];
			a[j] = x;
		}
		return;
	}
	if (width > MC_LRANGES_DIGIT_MAX)
		width = MC_LRANGES_DIGIT_MAX;
	passes = (bits + width - 1) / width;
	width = passes ? (bits + passes - 1) / passes : 1;	/* the passes even */
	for (shift = 0; shift < bits; shift += width) {
		uint32_t mask = (1u << width) - 1, sum = 0;

		memset(count, 0, sizeof(count[0]) << width);
		for (i = 0; i < m; i++)
			count[(a[i].rel >> shift) & mask]++;
		if (count[(a[0].rel >> shift) & mask] == m)
			continue;
		for (i = 0; i <= mask; i++) {
			uint32_t c = count[i];

			count[i] = sum;
			sum += c;
		}
		for (i = 0; i < m; i++)
			b[count[(a[i].rel >> shift) & mask]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	R->sorted = a;
	R->tmp = b;
}

size_t mc_lranges_next(struct mc_lranges *R, struct mc_segment **seg, uint64_t *base,
		       const struct mc_lrange **e)
{
	for (; R->it_seg < R->nsegs; R->it_seg++, R->it_bucket = 0) {
		struct mc_lseg *ls = R->segs[R->it_seg];

		while (R->it_bucket < ls->nbuckets) {
			size_t b = R->it_bucket++, m = 0, k;
			uintptr_t h = ls->next[b], end = h & ~(uintptr_t)15;
			struct mc_lblock *blk;

			if (h == 0)
				continue;
			/* The newest block up to end, then every older one full. */
			blk = mc_lblock_of(end, (unsigned)(h & 15));
			k = (size_t)((struct mc_lrange *)end - (struct mc_lrange *)(blk + 1));
			for (; blk; blk = blk->prev) {
				if (m + k > R->capsorted) {
					size_t cap = 2 * R->capsorted > m + k ? 2 * R->capsorted
									      : m + k;

					R->sorted = mc_xrealloc(R->sorted, cap * sizeof(*R->sorted));
					free(R->tmp);
					R->tmp = mc_xmalloc(cap * sizeof(*R->tmp));
					R->capsorted = cap;
				}
				memcpy(R->sorted + m, blk + 1, k * sizeof(R->sorted[0]));
				m += k;
				if (blk->prev)
					k = mc_lblock_ranges(blk->prev->cls);
			}
			mc_lranges_sort(R, m, ls->shift - MC_LRANGES_ALIGN_LOG);
			*seg = ls->seg;
			*base = (uint64_t)b << ls->shift;
			*e = R->sorted;
			return m;
		}
	}
	return 0;
}

struct mc_segment *mc_lranges_segment(const struct mc_lranges *R, size_t i)
{
	return R->segs[i]->seg;
}

void mc_lranges_fini(struct mc_lranges *R)
{
	size_t i;

	for (i = 0; i < R->nsegs; i++) {
		*R->segs[i]->slot = NULL;
		free(R->segs[i]->next);
		free(R->segs[i]);
	}
	for (i = 0; i < R->nslabs; i++)
		free(R->slabs[i]);
	free(R->spare);
	free(R->segs);
	free(R->slabs);
	free(R->sorted);
	free(R->tmp);
	memset(R, 0, sizeof(*R));
}

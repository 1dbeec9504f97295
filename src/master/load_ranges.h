/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_LOAD_RANGES_H
#define MC_LOAD_RANGES_H

/*
 * The memory ranges a reload collects (every persisted memory replica's), to be re-reserved once
 * every row is read, per segment in ascending offset order: the allocator's cheap order.  They
 * are put into buckets by offset as they come (a segment's address space cut into at most 8192
 * buckets of 64 KiB or more), so handing them back in order is a small sort of one bucket at a
 * time, in cache, instead of a sort of them all at the end.
 */
#include <stddef.h>
#include <stdint.h>

struct mc_segment;
struct mc_replica;
struct mc_prefault;
struct mc_lseg;			/* one segment's buckets */

/* A range as handed back: its offset from its bucket's base and its length, both in
 * MC_ALLOC_ALIGN units (units 0: a length of 2^38 bytes or more, which is r's object's span);
 * r NULL: taken out (mc_lranges_take_out). */
struct mc_lrange {
	uint32_t rel;
	uint32_t units;
	struct mc_replica *r;
};

#define MC_LRANGES_CLASSES 4		/* sizes of blocks (load_ranges.c) */

struct mc_lranges {
	struct mc_lseg **segs;		/* in the order their first range came */
	size_t nsegs, capsegs;
	uint64_t n;			/* ranges added */
	/* Blocks are cut from slabs, one being cut per size of block, all freed together. */
	void **slabs;
	size_t nslabs, capslabs;
	char *cur[MC_LRANGES_CLASSES];
	size_t left[MC_LRANGES_CLASSES];
	void *spare;			/* the next slab, being populated */
	struct mc_prefault *pf;		/* populates it (NULL: none); not R's */
	/* The walk (mc_lranges_next): the segment and bucket handed back next, and the buffers a
	 * bucket is sorted in. */
	size_t it_seg, it_bucket;
	struct mc_lrange *sorted, *tmp;
	size_t capsorted;
};

/* Add range [off, off + len) of segment seg (size bytes; off a multiple of MC_ALLOC_ALIGN below
 * size, len rounded to it) held by replica r.  *slot is the segment's own pointer to its
 * buckets (NULL until its first range; set back to NULL by mc_lranges_fini).  Aborts on
 * out-of-memory. */
void mc_lranges_add(struct mc_lranges *R, struct mc_lseg **slot, struct mc_segment *seg,
		    uint64_t size, uint64_t off, uint64_t len, struct mc_replica *r);

/* Take replica r's range (off, on the segment whose buckets are ls) out: it is not to be
 * reserved in order (reserved already, or dropped); its place is handed back with r NULL.  A
 * walk of its bucket (at most a few thousand ranges).  0, or -1 when it is not there.  Before
 * the walk (mc_lranges_next) only. */
int mc_lranges_take_out(struct mc_lseg *ls, uint64_t off, const struct mc_replica *r);

/* The next bucket that holds ranges, in order (a segment's buckets by ascending offset, the
 * segments one after the other): its segment and base offset, and its ranges sorted by offset
 * (*e, valid until the next call).  Returns how many, 0 once every bucket has been handed back.
 * Add no range once the walk has begun: it would be handed back only if its bucket is still
 * ahead. */
size_t mc_lranges_next(struct mc_lranges *R, struct mc_segment **seg, uint64_t *base,
		       const struct mc_lrange **e);

/* The segments that have ranges: i below R->nsegs. */
struct mc_segment *mc_lranges_segment(const struct mc_lranges *R, size_t i);

/* Frees what R holds and clears every segment's slot; R is empty again. */
void mc_lranges_fini(struct mc_lranges *R);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_ALLOC_H
#define MC_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Offset allocator over one segment's address range [0, size).  The master never touches segment
 * memory: this allocator only hands out offsets.  Free ranges coalesce with their neighbours;
 * reserve and release are O(1) (two-level segregated fit with bitmaps), independent of the number
 * of free ranges and of the segment size.
 *
 * A reservation is its offset and length, which the caller keeps (the master keeps the offset in
 * the replica; the length follows from the object's size) and passes back to mc_alloc_release: the
 * allocator holds nodes for free ranges only, so a reserved block costs it nothing.
 *
 * Single-threaded: the master's reactor thread owns every allocator.
 */
struct mc_alloc;

/* Allocation granularity: every reservation is rounded up to a multiple of this. */
#define MC_ALLOC_ALIGN 64u

/* A new allocator over [0, size).  Returns NULL on ENOMEM or size 0. */
struct mc_alloc *mc_alloc_new(uint64_t size);
/* Frees the allocator (every reservation goes with it). */
void mc_alloc_free(struct mc_alloc *a);

/* The bytes a reservation of len takes (len rounded up to MC_ALLOC_ALIGN). */
static inline uint64_t mc_alloc_round(uint64_t len)
{
	return (len + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
}

/* Reserve len bytes (len > 0).  On success returns 0 and stores the offset in *off.  Returns
 * -ENOSPC when no free range can hold it, -EINVAL for len 0 or a len larger than the segment.
 * The search is bounded, so -ENOSPC is possible while a free range less than len/32 bigger than
 * len exists; never when a free range of len + len/32 (rounded to MC_ALLOC_ALIGN) does.  Never
 * needs memory. */
int mc_alloc_reserve(struct mc_alloc *a, uint64_t len, uint64_t *off);

/* Reserve exactly [off, off+len) (used when rebuilding an allocator from persisted state).
 * Returns -EEXIST if any byte of the range is already reserved, -EINVAL if out of bounds or off is
 * not a multiple of MC_ALLOC_ALIGN, -ENOMEM when bookkeeping memory runs out.  Call it in ascending
 * offset order: each call is then O(1); out-of-order calls are correct but may walk the free
 * ranges. */
int mc_alloc_reserve_at(struct mc_alloc *a, uint64_t off, uint64_t len);

/* Release [off, off+len) as reserved by reserve/reserve_at (same off, same len); coalesces with
 * free neighbours in O(1).  Returns 0, -EINVAL for a range out of bounds or larger than what is
 * reserved, or -ENOMEM when a new free range needs a node and malloc fails (nothing changed).
 * A range that was not reserved corrupts the allocator (it keeps no record to check against). */
int mc_alloc_release(struct mc_alloc *a, uint64_t off, uint64_t len);

uint64_t mc_alloc_capacity(const struct mc_alloc *a);
uint64_t mc_alloc_used(const struct mc_alloc *a);	/* bytes in reserved blocks */
uint64_t mc_alloc_largest_free(const struct mc_alloc *a);
size_t mc_alloc_free_ranges(const struct mc_alloc *a);	/* number of free ranges (fragmentation) */

/* Walks every free range, bin and hash chain and verifies the allocator's invariants (disjoint,
 * coalesced, bin, bitmap and table membership, counters).  Returns 0, -EFAULT, or -ENOMEM.
 * O(free ranges log free ranges): for tests and debugging only. */
int mc_alloc_check(const struct mc_alloc *a);

#endif

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
 * A reservation is identified by an opaque handle (struct mc_alloc_block *) that the caller keeps
 * (the master stores it in the replica) and passes back to mc_alloc_release; no lookup by offset
 * is needed on the hot path.
 *
 * Single-threaded: the master's reactor thread owns every allocator.
 */
struct mc_alloc;
struct mc_alloc_block;

/* Allocation granularity: every reservation is rounded up to a multiple of this. */
#define MC_ALLOC_ALIGN 64u

/* A new allocator over [0, size).  Returns NULL on ENOMEM or size 0. */
struct mc_alloc *mc_alloc_new(uint64_t size);
/* Frees the allocator and every block handle it issued (outstanding handles become invalid). */
void mc_alloc_free(struct mc_alloc *a);

/* Reserve len bytes (len > 0).  On success returns 0, stores the block handle in *blk and its
 * offset in *off.  Returns -ENOSPC when no free range can hold it, -EINVAL for len 0 or a len
 * larger than the segment, -ENOMEM when bookkeeping memory runs out.  The search is bounded, so
 * -ENOSPC is possible while a free range less than len/32 bigger than len exists; never when a free
 * range of len + len/32 (rounded to MC_ALLOC_ALIGN) does. */
int mc_alloc_reserve(struct mc_alloc *a, uint64_t len, struct mc_alloc_block **blk, uint64_t *off);

/* Reserve exactly [off, off+len) (used when rebuilding an allocator from persisted state).
 * Returns -EEXIST if any byte of the range is already reserved, -EINVAL if out of bounds or off is
 * not a multiple of MC_ALLOC_ALIGN, -ENOMEM when bookkeeping memory runs out.  Call it in ascending
 * offset order: each call is then O(1); out-of-order calls are correct but walk the block list. */
int mc_alloc_reserve_at(struct mc_alloc *a, uint64_t off, uint64_t len, struct mc_alloc_block **blk);

/* Release a block handle returned by reserve/reserve_at; coalesces with free neighbours. */
void mc_alloc_release(struct mc_alloc *a, struct mc_alloc_block *blk);

uint64_t mc_alloc_block_offset(const struct mc_alloc_block *blk);
uint64_t mc_alloc_block_size(const struct mc_alloc_block *blk);	/* rounded-up length */

uint64_t mc_alloc_capacity(const struct mc_alloc *a);
uint64_t mc_alloc_used(const struct mc_alloc *a);	/* bytes in reserved blocks */
uint64_t mc_alloc_largest_free(const struct mc_alloc *a);
size_t mc_alloc_free_ranges(const struct mc_alloc *a);	/* number of free ranges (fragmentation) */

/* Walks every block and bin and verifies the allocator's invariants (tiling, coalescing, bin and
 * bitmap membership, counters).  Returns 0 or -EFAULT.  O(blocks): for tests and debugging only. */
int mc_alloc_check(const struct mc_alloc *a);

#endif

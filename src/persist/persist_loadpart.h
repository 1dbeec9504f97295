/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PERSIST_LOADPART_H
#define MC_PERSIST_LOADPART_H

/*
 * The rows of the background load, private to src/persist (persist_loadpart.c): a part, what
 * the scan of one range of generations read, in chunks.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "persist/persist.h"

#define MC_LOADER_CHUNK_ROWS 16384

/* What the scan of the generations [lo, hi] read: chunks of rows, in generation order. */
struct mc_loader_part {
	int64_t lo, hi;
	struct mc_persist_rows *chunks;
	size_t nchunks, capchunks;
};

/* Append the decoded row o to c, its key and replicas copied (pointers kept as offsets until
 * mc_persist_rows_seal). */
void mc_persist_rows_add(struct mc_persist_rows *c, const struct mc_persist_object *o);
/* Turn the offsets into pointers; c is not appended to afterwards. */
void mc_persist_rows_seal(struct mc_persist_rows *c);
/* Chunks the master's loop is done with, kept for the next parts (their memory in use
 * already: a fresh chunk's pages fault one by one, freeing one unmaps them). */
struct mc_loadpool {
	pthread_mutex_t mu;
	struct mc_persist_rows *v;
	size_t n, cap;
};
void mc_loadpool_init(struct mc_loadpool *pool, size_t cap);
/* Keep chunk c (emptied) if there is room, else free it. */
void mc_loadpool_put(struct mc_loadpool *pool, struct mc_persist_rows *c);
void mc_loadpool_fini(struct mc_loadpool *pool);
/* Append row o to p (a new chunk, from pool when it has one, else sized for a full one, when
 * the last is full). */
void mc_loadpart_add(struct mc_loader_part *p, struct mc_loadpool *pool,
		     const struct mc_persist_object *o);
/* After p's last row: seal its last chunk. */
void mc_loadpart_finish(struct mc_loader_part *p);
/* The rows in p's chunks. */
size_t mc_loadpart_rows(const struct mc_loader_part *p);
/* Free p's chunks and empty it (its bounds stay). */
void mc_loadpart_fini(struct mc_loader_part *p);

#endif

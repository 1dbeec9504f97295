/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PERSIST_LOADPART_H
#define MC_PERSIST_LOADPART_H

/*
 * The rows of the background load, private to src/persist (persist_loadpart.c): a part, the
 * scan of one range of generations, and the merge of the parts into the loader's result.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "persist/persist.h"

#define MC_LOADER_CHUNK_ROWS 16384

/* What the scan of one range of generations [lo, hi] read (or, once merged, of all of them):
 * chunks of rows, a reference per row by its key's hash, the complete memory replicas as
 * ranges, and the segment ids those ranges index. */
struct mc_loader_part {
	int64_t lo, hi;
	struct mc_persist_rows *chunks;
	size_t nchunks, capchunks;
	struct mc_persist_keyref *keyrefs;
	size_t nkeyrefs, capkeyrefs;
	struct mc_persist_range *ranges;
	size_t nranges, capranges;
	uint8_t (*segids)[16];
	uint32_t nsegids, capsegids;
	uint32_t *seghash;	/* open addressing: index + 1, 0 empty */
	uint32_t seghash_cap;
};

/* Append the decoded row o to c, its key and replicas copied (pointers kept as offsets until
 * mc_persist_rows_seal). */
void mc_persist_rows_add(struct mc_persist_rows *c, const struct mc_persist_object *o);
/* Turn the offsets into pointers and give each replica its user slot; c is not appended to
 * afterwards. */
void mc_persist_rows_seal(struct mc_persist_rows *c);
/* Append row o to p (a new chunk, sized for a full one, when the last is full): the row, its
 * key's reference and its complete memory replicas' ranges. */
void mc_loadpart_add(struct mc_loader_part *p, const struct mc_persist_object *o);
/* After p's last row: seal its last chunk, sort its references by hash (stably).  0 or -ENOMEM. */
int mc_loadpart_finish(struct mc_loader_part *p);
/* Parts [0, n), finished, in generation order, become *r (empty before; the parts are emptied):
 * their chunks one list, their references one sorted list, their ranges one list indexing one
 * list of segment ids.  ranges_done(arg) is called once r's ranges and segment ids are final,
 * before the references are merged (which touches neither), so they can be sorted meanwhile.
 * 0 or -ENOMEM (the parts unchanged, ranges_done not called). */
int mc_loadpart_merge(struct mc_loader_part *parts, size_t n, struct mc_loader_part *r,
		      void (*ranges_done)(void *), void *arg);
/* Of the rows of one key in p (merged), all but the newest are marked MC_PERSIST_ROW_OLDER and
 * their ranges dropped.  Returns the number marked. */
size_t mc_loadpart_resolve(struct mc_loader_part *p);
/* Sort p's ranges by segment and offset; a stop (stop set) ends it, leaving an order of no use. */
void mc_loadpart_sort_ranges(struct mc_loader_part *p, const atomic_int *stop);
/* The rows in p's chunks. */
size_t mc_loadpart_rows(const struct mc_loader_part *p);
void mc_loadpart_fini(struct mc_loader_part *p);

#endif

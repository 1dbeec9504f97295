/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_LOAD_H
#define MC_MASTER_LOAD_H

/*
 * Inside the master: the state of a reload from --persist_path, shared by master_recover.c (the
 * rows, one at a time, and the reload at once) and master_load.c (the reload in the background,
 * while the master serves).
 */
#include <stddef.h>
#include <stdint.h>

#include "master/load_ranges.h"

struct mc_master;
struct mc_segment;
struct mc_replica;
struct mc_object;
struct mc_persist_object;

/* A range to keep out of use until release_at, then free (a put in flight at the crash); seq
 * orders overlapping ones: the put log's records by age, objects rows (MC_LOAD_SEQ_ROW) after
 * them all. */
struct mc_load_discard {
	struct mc_segment *seg;
	uint64_t off, len;
	int64_t release_at;
	int64_t seq;
};
#define MC_LOAD_SEQ_ROW INT64_MAX

struct mc_load_seen {
	char *key;		/* NULL: a free slot */
	size_t len;
	uint64_t gen;
	int rowkey;
};

struct mc_load {
	struct mc_master *m;
	struct mc_lranges ranges;	/* memory replicas' ranges, to re-reserve in order */
	struct mc_load_discard *discards;
	size_t ndiscards, capdiscards;
	struct mc_object **lost;	/* objects that lost a replica to an overlap */
	size_t nlost, caplost;
	uint64_t objects, zombies, dropped, ghosts, dormant;
	uint64_t older;		/* rows a newer row of their key overrides (background load) */
	uint64_t logged;	/* records of the put log read */
	int64_t now, wall;
	/* Background load: keys of rows that put nothing into the table or the ghosts (dropped,
	 * unfinished), so that their older rows go too (open addressing, cap a power of two). */
	struct mc_load_seen *seen;
	size_t nseen, capseen;
	char **stale;		/* keys whose rows must go once the load is done */
	size_t *stale_len;
	uint64_t *stale_gen;	/* and the rows' generations */
	size_t nstale, capstale;
};

/* The row of key (its id in the file: mc_persist_object.row) goes once the load is done. */
void mc_load_stale(struct mc_load *L, const char *key, size_t len, uint64_t row);
/* Rebuild one object row: its object in the table (or a ghost, or the row recorded as stale).
 * Its memory replicas keep their segment and offset, pending: their ranges are collected in L
 * and re-reserved at the end (mc_load_reserve_some) or at once (mc_load_reserve_object).
 * newer_first (the background load, which reads the newest rows first): a row whose key has
 * been met already (in the table, among the ghosts, or a row that put neither in) is the same
 * row (nothing happens) or an older one (it goes once loaded).  Returns 0. */
int mc_load_row(struct mc_load *L, const struct mc_persist_object *po, int newer_first);
/* Re-reserve about max more of the collected ranges (whole buckets of them), per segment in
 * ascending offset order; a replica reserved already is passed over, and those that overlap
 * another or leave their segment are dropped (logged; the object is fixed by
 * mc_load_fix_lost).  1 once every range is done; then mc_load_ranges_done.  No row may be
 * loaded after the first call. */
int mc_load_reserve_some(struct mc_load *L, size_t max);
/* Every range is re-reserved (or dropped): the segments' pending replicas are readable. */
void mc_load_ranges_done(struct mc_load *L);
/* Re-reserve o's pending replicas now, out of order (a lookup while loading). */
void mc_load_reserve_object(struct mc_load *L, struct mc_object *o);
/* 1 if o has a replica whose range is not re-reserved yet. */
int mc_load_pending(struct mc_object *o);
/* Objects that lost replicas to overlaps: without any left they go, else they keep the rest. */
void mc_load_fix_lost(struct mc_load *L);
/* Re-reserve L's quarantined ranges (puts in flight at the crash), sorted. */
void mc_load_reserve_discards(struct mc_load *L);
/* Everything is loaded: record the removal of the stale rows, log the summary (how: words
 * after the file's name), free what L holds (not L). */
void mc_load_done(struct mc_load *L, const char *how);
void mc_load_fini(struct mc_load *L);

/* master_recover.c: mc_master_recover, with bg called once the segments are in: it takes over
 * *L and starts loading the objects in the background (0), or declines (they load at once). */
int mc_master_recover_bg(struct mc_master *m,
			 int (*bg)(struct mc_master *m, const struct mc_load *L));

#endif

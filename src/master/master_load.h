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

struct mc_master;
struct mc_segment;
struct mc_replica;
struct mc_object;
struct mc_persist_object;

/* A persisted memory replica's range, to reserve once every row is read.  32 bytes: qsort moves
 * elements that small in place instead of sorting pointers and copying them back. */
struct mc_load_range {
	struct mc_segment *seg;
	uint64_t off, len;
	struct mc_replica *r;
};

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

struct mc_load {
	struct mc_master *m;
	struct mc_load_range *ranges;
	size_t n, cap;
	struct mc_load_discard *discards;
	size_t ndiscards, capdiscards;
	struct mc_object **lost;	/* objects that lost a replica to an overlap */
	size_t nlost, caplost;
	uint64_t objects, zombies, dropped, ghosts, dormant;
	uint64_t logged;	/* records of the put log read */
	int64_t now, wall;
	char **stale;		/* keys whose rows must go once the load is done */
	size_t *stale_len;
	uint64_t *stale_gen;	/* and the rows' generations */
	size_t nstale, capstale;
};

/* The row of key (its id in the file: mc_persist_object.row) goes once the load is done. */
void mc_load_stale(struct mc_load *L, const char *key, size_t len, uint64_t row);
/* Rebuild one object row: its object in the table (or a ghost, or the row recorded as stale).
 * blks NULL: its memory ranges are collected in L, to re-reserve at the end (mc_load_reserve);
 * else one slot per replica, MC_LOAD_HELD when the replica's range (offset and length as the
 * row has them) is re-reserved already (NULL: none, the replica is dropped); the ranges the
 * object does not take are released, and every slot ends NULL. */
int mc_load_row(struct mc_load *L, const struct mc_persist_object *po, void **blks);
/* What a slot of blks holds once its replica's range is re-reserved. */
extern char mc_load_held_mark;
#define MC_LOAD_HELD ((void *)&mc_load_held_mark)
/* Release the ranges held in blks (one slot per replica of po) and clear them. */
void mc_load_release_unused(struct mc_load *L, const struct mc_persist_object *po, void **blks);
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

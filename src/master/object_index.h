/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_OBJECT_INDEX_H
#define MC_OBJECT_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct mc_object;

/*
 * The object table's hash index (object_index.c): hash -> object, with the key compared in the
 * object.  Slots hold 32-bit arena references (object_table.h), not pointers.  Used only by
 * object_table.c, whose header states the interface the rest of the master sees.
 *
 * Slots come in groups of twelve object references plus twelve control bytes, one 64-byte cache
 * line each: a control byte holds seven bits of the key's hash (a tag) beside every reference, so
 * a probe reads one line and follows a pointer only when the tag matches (one in 128 for a
 * wrong key).  Groups are probed linearly from the key's home group.
 *
 * Growth is incremental: when the index passes its load limit a new, larger array is allocated
 * (calloc: untouched pages cost nothing until used) and every other insert moves the objects of
 * one group of the old array into it, which spreads the move over the first third or so of the
 * inserts until the next resize; lookups and erases look in both until
 * the old array is empty and freed.  No operation ever moves more than one group.
 */

struct mc_oindex_group;

struct mc_oindex_arr {
	struct mc_oindex_group *g;	/* aligned to 64 bytes */
	void *raw;			/* what calloc returned, for free */
	size_t gmask;			/* groups - 1 (a power of two) */
	size_t used;			/* live slots plus tombstones */
	size_t live;
	uint32_t seq;			/* names this array in iteration positions; 0: none */
};

struct mc_oindex {
	struct mc_oindex_arr cur;	/* inserts go here */
	struct mc_oindex_arr old;	/* being drained into cur (old.g NULL: no resize running) */
	size_t mig;			/* the next group of old to move */
	unsigned tick;			/* inserts since the last move */
	uint32_t next_seq;
	uint64_t resizes;		/* resizes started (tests, bench) */
	/* The hashes of the objects of old group ahead_gi, computed a move ahead (valid while
	 * ahead_seq is old.seq; 0: none). */
	uint32_t ahead_h[12];
	size_t ahead_gi;
	uint32_t ahead_seq;
	const char *base;		/* the object arena that references count from */
};

/* While a resize runs, one group of twelve slots moves every MC_OINDEX_EVERY inserts.  Must
 * stay below 2/12 of the inserts a resize leaves until the next one (see mc_oindex_insert). */
#define MC_OINDEX_EVERY 2

void mc_oindex_init(struct mc_oindex *ix);
/* Frees the arrays (not the objects). */
void mc_oindex_fini(struct mc_oindex *ix);
/* The object with hash h for which eq(o, arg) is true, or NULL.  Never moves anything. */
struct mc_object *mc_oindex_find(const struct mc_oindex *ix, uint32_t h,
				 int (*eq)(const struct mc_object *o, const void *arg),
				 const void *arg);
/* Add o, whose hash is h and whose key is not present.  Moves at most one group of a running
 * resize and may start a resize.  Aborts on out-of-memory. */
void mc_oindex_insert(struct mc_oindex *ix, struct mc_object *o, uint32_t h);
/* Remove o (present, hash h).  Never moves other objects, so a walk may erase what it was
 * given. */
void mc_oindex_erase(struct mc_oindex *ix, struct mc_object *o, uint32_t h);
/* The hash of key in tenant's namespace (the default tenant's is the key's own), and the hash
 * an object was inserted with: objects do not store it, a resize computes it again from the
 * key. */
uint32_t mc_object_hash_in(uint16_t tenant, const char *key, size_t len);
uint32_t mc_object_rehash(const struct mc_object *o);
/* Walk: the object at position *pos or after it, advancing *pos; NULL at the end.  Start with
 * *pos = 0.  The old array (if a resize runs) is walked before the new one.  Erases during a
 * walk are fine; an insert during a walk may move objects, so the walk may then see some of
 * them twice, but it never misses an object present from its start to its end. */
struct mc_object *mc_oindex_next(const struct mc_oindex *ix, size_t *pos);
/* Start loading the index groups a lookup of hash h reads first (a hint: changes nothing).  A
 * batch of lookups calls it for each key, then mc_oindex_prefetch_objects for each, then looks
 * them up: the cache misses of the keys overlap instead of adding up. */
void mc_oindex_prefetch(const struct mc_oindex *ix, uint32_t h);
/* Start loading the objects whose tags match h's in those groups (read them: they should be
 * in the cache by now). */
void mc_oindex_prefetch_objects(const struct mc_oindex *ix, uint32_t h);
/* Make room for n more objects (live ones included: the total) without a resize: the array
 * grows at once to the size the inserts would have grown it to, and what it holds moves now
 * (a load that knows its row count: no object is moved twice and none waits in an old array).
 * A no-op when it is large enough.  Aborts on out-of-memory. */
void mc_oindex_reserve(struct mc_oindex *ix, size_t n);
/* Finish a running resize at once (tests; a table about to be walked and filled at once). */
void mc_oindex_settle(struct mc_oindex *ix);
/* Bytes held by the index arrays. */
size_t mc_oindex_bytes(const struct mc_oindex *ix);
/* Is a resize running? */
static inline int mc_oindex_resizing(const struct mc_oindex *ix)
{
	return ix->old.g != NULL;
}

#endif

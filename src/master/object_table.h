/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_OBJECT_TABLE_H
#define MC_OBJECT_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct mc_segment;
struct mc_client;
struct mc_alloc_block;

/*
 * The master's object table: key -> object -> replicas.
 *
 * Memory budget: the master must hold millions of keys at well under 300 bytes each plus the key,
 * so objects carry their key inline, the common single replica is embedded in the object, and the
 * index is an open-addressing table of pointers (8 bytes a slot at <= 0.8 load).
 * Objects sit on an LRU list (most recently read at the tail) for eviction, and each memory
 * replica sits on its segment's list, so unmounting a segment touches only its own replicas.
 * Single-threaded: the master's reactor thread.
 */

struct mc_replica {
	struct mc_object *obj;
	struct mc_segment *seg;		/* NULL once its segment is gone; LOCAL_DISK: the owner's
					   disk area */
	union {
		struct mc_alloc_block *blk;	/* MEMORY */
		uint64_t disk_addr;		/* LOCAL_DISK: address in the owner's disk range */
	};
	struct mc_replica *seg_prev, *seg_next;
	uint64_t id;
	uint8_t status;			/* enum mc_replica_status */
	uint8_t type;			/* enum mc_replica_type: MEMORY or LOCAL_DISK */
	uint8_t hits;			/* LOCAL_DISK: reads served from it (promotion) */
};

enum mc_object_flags {
	MC_OBJ_HARD_PIN = 1u << 0,
	MC_OBJ_SOFT_PIN = 1u << 1,
	MC_OBJ_IN_LRU = 1u << 2,
	MC_OBJ_OFFLOADING = 1u << 3,	/* an offload task is queued or running */
	MC_OBJ_DEMOTE = 1u << 4,	/* free the memory replicas once the SSD copy is in */
	MC_OBJ_PROMOTING = 1u << 5,	/* a memory replica is being filled from the SSD */
	MC_OBJ_GHOST = 1u << 6,		/* persisted rows only: a ghost (ghosts.c), no object */
	MC_OBJ_SSD_AWAY = 1u << 7,	/* had a copy on an SSD area that went away: if it goes
					   for lack of replicas or space, it leaves a ghost */
};

struct mc_object {
	struct mc_object *lru_prev, *lru_next;
	uint64_t size;
	int64_t lease_until;		/* monotonic ms: any read lease (Remove honours it) */
	int64_t fetch_until;		/* monotonic ms: lease of a GetReplicaList (bytes may be in
					   flight to a reader: eviction never frees them) */
	int64_t put_start;		/* monotonic ms */
	int64_t soft_pin_until;		/* monotonic ms, 0 = none */
	uint64_t gen;			/* generation of its bytes (ghosts.c) */
	struct mc_client *writer;
	struct mc_replica *extra;	/* replicas beyond the first, array of nrep - 1 */
	uint64_t checksum;		/* CRC-64 of its bytes as the writer gave it (PutEnd), when
					   has_checksum; one per object, whichever replica */
	uint32_t hash;
	uint16_t key_len : 15;		/* at most MC_RPC_MAX_KEY (4096) */
	uint16_t has_checksum : 1;
	uint8_t nrep;
	uint8_t flags;
	struct mc_replica rep0;
	char key[];
};

struct mc_object_table {
	struct mc_object **slots;
	size_t cap;			/* power of two */
	size_t count;
	size_t tombstones;
	struct mc_object lru;		/* sentinel of the LRU list */
	uint64_t key_bytes;
	size_t soft_pinned;		/* objects with MC_OBJ_SOFT_PIN */
	/* Called by mc_object_erase before an object goes (NULL: none). */
	void (*on_erase)(void *arg, struct mc_object *o);
	void *on_erase_arg;
};

int mc_object_table_init(struct mc_object_table *t);
/* Frees every object (replicas must have been released by the caller). */
void mc_object_table_fini(struct mc_object_table *t);
uint32_t mc_object_hash(const char *key, size_t len);
struct mc_object *mc_object_find(struct mc_object_table *t, const char *key, size_t len);
/* Create and insert an object with nrep replicas (zeroed, status PROCESSING).  The key must not
 * be present.  Aborts on out-of-memory (daemon code). */
struct mc_object *mc_object_insert(struct mc_object_table *t, const char *key, size_t len,
				   uint32_t nrep);
/* Unlink from the index and the LRU and free.  Replicas must already be detached. */
void mc_object_erase(struct mc_object_table *t, struct mc_object *o);
struct mc_replica *mc_object_replica(struct mc_object *o, uint32_t i);
/* Move to the most-recently-used end. */
void mc_object_touch(struct mc_object_table *t, struct mc_object *o);
/* Take off the LRU list for good (hard-pinned objects are never evicted). */
void mc_object_lru_unlink(struct mc_object_table *t, struct mc_object *o);
/* Put back on the LRU list at the most-recently-used end (no-op if on it). */
void mc_object_lru_link(struct mc_object_table *t, struct mc_object *o);
/* Append a zeroed replica (status UNDEFINED).  Moves the replicas of extra[]: the segment lists
 * are re-pointed.  Returns NULL if the object already has MC_RPC_MAX_REPLICAS (64). */
struct mc_replica *mc_object_add_replica(struct mc_object *o);
/* Iterate: returns the object in slot *pos or later, advancing *pos; NULL at the end.
 * Erasing the returned object during iteration is allowed. */
struct mc_object *mc_object_next(struct mc_object_table *t, size_t *pos);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_OBJECT_TABLE_H
#define MC_OBJECT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "master/object_index.h"
#include "segment/alloc.h"

struct mc_segment;
struct mc_client;

/*
 * The master's object table: key -> object -> replicas.
 *
 * Memory budget (doc/memory.md): the master must hold hundreds of millions of keys, so objects
 * carry their key inline, the common single replica is embedded in the object, objects come from
 * the table's own arena (no malloc header, no rounding beyond 8 bytes), and the index
 * (object_index.h) holds a pointer and a one-byte hash tag per slot, 64-byte groups of seven,
 * grown incrementally so that no insert ever rehashes the whole table.
 * Objects sit on one eviction list (evicted from the head) and each memory replica sits on its
 * segment's list, so unmounting a segment touches only its own replicas.
 *
 * Two policies order the eviction list (--eviction_policy):
 *  - lru: the most recently used object at the tail.
 *  - prefix: a segmented LRU that knows KV-cache blocks come in chains.  A marker object splits
 *    the list into a probation part (head side) and a protected part (tail side).  New objects
 *    and objects used once enter probation; an object used again (its put, then a later probe or
 *    read) is promoted to protected, which holds at most MC_PREFIX_PROTECTED_PCT percent of the
 *    list; its oldest objects fall back to the newest end of probation.  Eviction takes the head,
 *    so blocks never reused go first (a frequency filter), then the least recently used.
 *    Within one request (one RPC: a batch), keys are placed so that the first key of the batch is
 *    the most recent and the last the least: a batch lists a request's blocks head first, so the
 *    tail of a chain, useless without its head, is evicted before the head.  And the last key of
 *    a put of two or more goes to the head of the list, at the put and again when its PutEnd
 *    first completes it (MC_EVS_TAIL): the last block of a prompt is partial and is almost never
 *    reused (2% on the conversation trace, against a quarter for the other new blocks).  A
 *    writer's eviction hint (proto/rpc.h) replaces that guess, for single puts too.
 *  Every operation is O(1) (amortised for the demotions); no scan of the table.
 * Single-threaded: the master's reactor thread.
 */

struct mc_replica {
	struct mc_object *obj;
	struct mc_segment *seg;		/* NULL once its segment is gone; LOCAL_DISK: the owner's
					   disk area */
	union {
		uint64_t off;		/* MEMORY: offset in the segment; the reservation is
					   mc_object_span(obj) bytes from there */
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

/* mc_object.evstate (prefix policy): uses counted (saturating), the protected bit, and the
 * tail bit: the partial last block of its put, evicted first at its put and its first use. */
/* Further flags, with the operator features (tasks.c, drain.c). */
enum mc_object_xflags {
	MC_OBJX_TASK = 1u << 0,		/* a copy or move task works on it: it may not be removed,
					   evicted or overwritten until the task ends */
	MC_OBJX_PUBLISHED = 1u << 1,	/* a "stored" KV event was published (kv_events.c) */
	MC_OBJX_PUBLISHED_DISK = 1u << 2,	/* ... with medium "disk" */
};

/* mc_object.evstate (prefix policy): uses counted (saturating) and the protected bit. */
#define MC_EVS_USES 0x03u
#define MC_EVS_TAIL 0x04u
#define MC_EVS_PROTECTED 0x80u

/* The protected part's share of the list under the prefix policy: on the conversation trace
 * the blocks used once are reused a quarter of the time and those used twice or more half the
 * time or more; a fifth of the pool for the latter gave the best hit rate from 1/32 to 1/2 of
 * the working set (mooncake_bench --trace_simulate). */
#define MC_PREFIX_PROTECTED_PCT 20

enum mc_evict_policy {
	MC_EVICT_POLICY_LRU = 0,
	MC_EVICT_POLICY_PREFIX = 1,
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
	uint8_t evstate;		/* prefix policy: MC_EVS_* */
	uint8_t xflags;			/* enum mc_object_xflags (in what was padding) */
	uint16_t tenant;		/* its tenant's index (tenants.c; 0: default), also padding */
	struct mc_replica rep0;
	char key[];
};

/* The bytes each memory replica of o holds in its segment (the allocator keeps no record of a
 * reservation: its offset is in the replica, its length follows from the size). */
static inline uint64_t mc_object_span(const struct mc_object *o)
{
	return mc_alloc_round(o->size);
}

/* Objects up to this size (header plus key) come from the arena's size classes; larger ones
 * from malloc. */
#define MC_OBJ_ARENA_MAX 1024
#define MC_OBJ_ARENA_CLASSES (MC_OBJ_ARENA_MAX / 8 + 1)

/* The table's object allocator: 8-byte size classes carved from 2 MiB chunks, freed objects
 * kept on a list per class.  Chunks go back only with the table. */
struct mc_obj_arena {
	void *free[MC_OBJ_ARENA_CLASSES];
	char *bump;			/* unused tail of the newest chunk */
	size_t left;
	void *chunks;			/* chained through their first word */
	size_t chunk_bytes;		/* bytes in chunks */
};

struct mc_object_table {
	struct mc_oindex index;
	struct mc_obj_arena arena;
	size_t count;
	struct mc_object lru;		/* sentinel of the eviction list */
	struct mc_object mark;		/* prefix policy: probation before it, protected after */
	struct mc_object *anchor[2];	/* prefix policy: the last object the current batch placed
					   in probation [0] and protected [1] (NULL: none) */
	struct mc_object *batch_last;	/* the object the current batch placed last */
	size_t batch_n;			/* objects the current batch placed */
	int batch_last_new;		/* batch_last was placed by its put or its first use */
	int batch_hint;			/* the writer's MC_EVICT_HINT_* for this batch, -1: none */
	size_t lru_count;		/* objects on the eviction list (not the marker) */
	size_t protected_count;		/* of them, in the protected part */
	unsigned protected_pct;		/* cap of the protected part, percent of lru_count */
	uint8_t policy;			/* enum mc_evict_policy */
	uint64_t key_bytes;
	size_t soft_pinned;		/* objects with MC_OBJ_SOFT_PIN */
	/* The tenant namespace mc_object_find and mc_object_insert work in (tenants.c): the
	 * requesting connection's during an RPC, else the default tenant's (0).  all_tenants:
	 * walks of the whole table (remove_all, regex) see every tenant's objects (admin), else
	 * only the namespace's (mc_object_in_scope). */
	uint16_t tenant;
	uint8_t all_tenants;
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
/* Choose the eviction policy (enum mc_evict_policy), before any object is inserted;
 * protected_pct: the protected part's cap for the prefix policy (1..99). */
void mc_object_table_set_policy(struct mc_object_table *t, int policy, unsigned protected_pct);
/* A new request starts: objects placed from now on form one batch (prefix policy: the first
 * one placed ends up the most recent).  Called once per request that carries keys. */
void mc_object_batch_begin(struct mc_object_table *t);
/* The current batch is a put whose writer described its keys: hint is MC_EVICT_HINT_* (see
 * proto/rpc.h), or -1 for none.  Prefix policy: its last key is cold with
 * MC_EVICT_HINT_LAST_PARTIAL, not without; with no hint, when the batch has two or more. */
void mc_object_batch_hint(struct mc_object_table *t, int hint);
/* The request is over (called after every request): under the prefix policy the batch's last
 * object goes to the head of the list if it was placed by its put and is cold (the last of a
 * put of two or more keys, or as the put's hint says: it gets MC_EVS_TAIL), or by its first use
 * and its put found it cold. */
void mc_object_batch_end(struct mc_object_table *t);
/* A use of o: lru: to the most-recently-used end; prefix: counted, promoted to protected at
 * the second use, placed at the recent end of its part in batch order. */
void mc_object_touch(struct mc_object_table *t, struct mc_object *o);
/* The object to evict first (the head of the eviction list, passing the marker), NULL if none.
 * mc_object_evict_next walks on from o. */
struct mc_object *mc_object_evict_first(struct mc_object_table *t);
struct mc_object *mc_object_evict_next(struct mc_object_table *t, struct mc_object *o);
/* Take off the LRU list for good (hard-pinned objects are never evicted). */
void mc_object_lru_unlink(struct mc_object_table *t, struct mc_object *o);
/* Put back on the eviction list at the most-recently-used end (prefix: of probation; no-op if
 * on it). */
void mc_object_lru_link(struct mc_object_table *t, struct mc_object *o);
/* Append a zeroed replica (status UNDEFINED).  Moves the replicas of extra[]: the segment lists
 * are re-pointed.  Returns NULL if the object already has MC_RPC_MAX_REPLICAS (64). */
struct mc_replica *mc_object_add_replica(struct mc_object *o);
/* Does a walk of the table in the current namespace include o? */
static inline int mc_object_in_scope(const struct mc_object_table *t, const struct mc_object *o)
{
	return t->all_tenants || o->tenant == t->tenant;
}
/* Iterate: returns the object at position *pos or later, advancing *pos (start at 0); NULL at
 * the end.  Only objects in scope (mc_object_in_scope): a request sees its own tenant's.
 * Erasing the returned object during iteration is allowed; an insert during a walk may step a
 * resize, after which the walk may see some objects twice (never miss one). */
struct mc_object *mc_object_next(struct mc_object_table *t, size_t *pos);

#endif

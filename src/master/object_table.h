/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_OBJECT_TABLE_H
#define MC_OBJECT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "master/object_index.h"
#include "segment/alloc.h"

struct mc_segment;
struct mc_client;
struct mc_strv;
struct mc_prefault;

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

/* A replica: 32 bytes.  Its object is found from its place (mc_replica_obj), its segment-list
 * neighbours are arena references (mc_replica_next). */
struct mc_replica {
	struct mc_segment *seg;		/* NULL once its segment is gone; LOCAL_DISK: the owner's
					   disk area */
	union {
		uint64_t off;		/* MEMORY: offset in the segment; the reservation is
					   mc_object_span(obj) bytes from there */
		uint64_t disk_addr;		/* LOCAL_DISK: address in the owner's disk range */
	};
	uint32_t seg_prev, seg_next;	/* its segment's list (mc_replica_prev/next) */
	uint64_t id : 48;
	uint64_t status : 3;		/* enum mc_replica_status */
	uint64_t type : 3;		/* enum mc_replica_type: MEMORY, DISK or LOCAL_DISK */
	uint64_t hits : 8;		/* LOCAL_DISK: reads served from it (promotion) */
	uint64_t is_extra : 1;		/* in its object's side array, not rep0 */
	uint64_t pending : 1;		/* loaded: MEMORY, its range re-reserved in order once every
					   row is in; meaningful while seg->loading (master_recover.c) */
};

/* A replica beyond an object's first, in the object's side array (arena memory). */
struct mc_replica_x {
	struct mc_replica r;
	struct mc_object *obj;
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
	MC_OBJX_LOGGED = 1u << 3,	/* its PutStart is in the put log, not the objects table
					   (master_persist.c) */
	MC_OBJX_ROWKEY = 1u << 4,	/* its row is keyed by its key's hash, not its generation
					   (an SSD copy adopted from before the database) */
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

/*
 * An object: 64 bytes of header, its first replica, its key.  Times are monotonic ms in 48-bit
 * fields (8,900 years either way); rarely used fields (a soft pin's end, replicas beyond the
 * first) live in a side record that only objects using them have (mc_object_side).  Sizes
 * are below 2^48 (MC_OBJ_SIZE_MAX): what is bigger is refused where it enters.
 */
#define MC_OBJ_SIZE_MAX ((((uint64_t)1) << 48) - 1)

struct mc_object_side {
	int64_t soft_pin_until;		/* monotonic ms, 0 = none */
	struct mc_replica_x *extra;	/* replicas beyond the first (nrep - 1 in use) */
	uint32_t nextra;		/* extra's length */
};

struct mc_object {
	uint32_t lru_prev, lru_next;	/* eviction list: references (mc_object_at) */
	uint64_t size : 48;
	uint64_t tenant : 16;		/* its tenant's index (tenants.c; 0: default) */
	int64_t lease_until : 48;	/* monotonic ms: any read lease (Remove honours it) */
	uint64_t key_len : 15;		/* at most MC_OBJ_KEY_MAX */
	uint64_t has_checksum : 1;
	int64_t fetch_until : 48;	/* monotonic ms: lease of a GetReplicaList (bytes may be in
					   flight to a reader: eviction never frees them) */
	uint64_t flags : 8;
	uint64_t evstate : 8;		/* prefix policy: MC_EVS_* */
	int64_t put_start : 48;		/* monotonic ms */
	uint64_t nrep : 7;
	uint64_t xflags : 8;		/* enum mc_object_xflags */
	uint64_t gen;			/* generation of its bytes (ghosts.c) */
	uint64_t checksum;		/* CRC-64 of its bytes as the writer gave it (PutEnd), when
					   has_checksum; one per object, whichever replica */
	uint32_t writer;		/* its writer's reference (mc_object_writer), 0 none */
	uint32_t side;			/* arena reference of its side record, 0 none */
	struct mc_replica rep0;
	char key[];
};

/* The object r belongs to. */
static inline struct mc_object *mc_replica_obj(const struct mc_replica *r)
{
	if (r->is_extra)
		return ((const struct mc_replica_x *)(const void *)r)->obj;
	return (struct mc_object *)(void *)((char *)(uintptr_t)r -
					    offsetof(struct mc_object, rep0));
}

/* The bytes each memory replica of o holds in its segment (the allocator keeps no record of a
 * reservation: its offset is in the replica, its length follows from the size). */
static inline uint64_t mc_object_span(const struct mc_object *o)
{
	return mc_alloc_round(o->size);
}

/* The table's object allocator: one reserved range of address space (MC_OBJ_ARENA_BYTES, no
 * memory behind it until used, aligned to its size) made usable 2 MiB at a time, carved in
 * 8-byte size classes, freed objects kept on a list per class.  An object is named by a 32-bit
 * reference, its offset in 8-byte units (0: none), which is what the index and the lists store:
 * half a pointer.  The arena's own header is at its start, so anything in it finds the arena
 * from its own address (mc_obj_arena_of).  Memory goes back only with the table. */
#define MC_OBJ_ARENA_UNIT 8
#define MC_OBJ_ARENA_BYTES ((size_t)MC_OBJ_ARENA_UNIT << 32)
#define MC_OBJ_KEY_MAX 32767		/* key_len's range */
#define MC_OBJ_ARENA_CLASSES ((sizeof(struct mc_object) + MC_OBJ_KEY_MAX) / MC_OBJ_ARENA_UNIT + 2)

struct mc_obj_arena {
	void *reserved;			/* what mmap returned (twice the size: alignment) */
	size_t mapped;			/* bytes usable from the arena's start */
	size_t bump;			/* bytes handed out from the start (never given back) */
	/* Populates the chunk after the one in use, and new index arrays, off the reactor
	 * (prefault.h); started when the arena first grows, NULL before or if it failed. */
	struct mc_prefault *pf;
	int pf_tried;
	void *free[MC_OBJ_ARENA_CLASSES];
};

static inline struct mc_obj_arena *mc_obj_arena_of(const void *p)
{
	return (struct mc_obj_arena *)((uintptr_t)p & ~(uintptr_t)(MC_OBJ_ARENA_BYTES - 1));
}

typedef uint32_t mc_oref;

/* The object a reference names (NULL for 0), and back. */
static inline struct mc_object *mc_oref_ptr(const char *base, mc_oref r)
{
	return r ? (struct mc_object *)(void *)(base + (size_t)r * MC_OBJ_ARENA_UNIT) : NULL;
}

static inline mc_oref mc_oref_of(const char *base, const struct mc_object *o)
{
	return o ? (mc_oref)((size_t)((const char *)o - base) / MC_OBJ_ARENA_UNIT) : 0;
}

struct mc_object_table {
	struct mc_oindex index;
	struct mc_obj_arena *arena;
	size_t count;
	struct mc_object *lru;		/* sentinel of the eviction list (in the arena) */
	struct mc_object *mark;		/* prefix policy: probation before, protected after */
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
/* Make room in the index for n objects in all (a load that knows its row count): inserts up
 * to that many resize nothing. */
void mc_object_table_reserve(struct mc_object_table *t, size_t n);
/* Fetch the index's cache line for key ahead of inserting it (a loop over many keys). */
void mc_object_prefetch_key(const struct mc_object_table *t, const char *key, size_t len);
/* Frees every object (replicas must have been released by the caller). */
void mc_object_table_fini(struct mc_object_table *t);
uint32_t mc_object_hash(const char *key, size_t len);
struct mc_object *mc_object_find(struct mc_object_table *t, const char *key, size_t len);
/* Start loading what lookups (or inserts) of keys[0..n) in the current tenant will read: their
 * index groups, then the objects whose tags match.  A batch's keys are independent, so their
 * cache misses overlap here instead of adding up one key after the other in the lookups that
 * follow.  A hint: changes nothing.  Only the first 256 keys: more would leave the caches before
 * their lookups. */
void mc_object_prefetch(const struct mc_object_table *t, const struct mc_strv *keys, size_t n);
/* Create and insert an object with nrep replicas (zeroed, status PROCESSING).  The key must not
 * be present.  Aborts on out-of-memory (daemon code). */
struct mc_object *mc_object_insert(struct mc_object_table *t, const char *key, size_t len,
				   uint32_t nrep);
/* A batch hashes each key once: mc_object_key_hash is the hash mc_object_find and
 * mc_object_insert compute for a key in the current tenant, and the _h forms take it instead
 * (h must be mc_object_key_hash(t, key, len) under the same tenant, i.e. within one request). */
uint32_t mc_object_key_hash(const struct mc_object_table *t, const char *key, size_t len);
struct mc_object *mc_object_find_h(struct mc_object_table *t, const char *key, size_t len,
				   uint32_t h);
struct mc_object *mc_object_insert_h(struct mc_object_table *t, const char *key, size_t len,
				     uint32_t h, uint32_t nrep);
/* mc_object_prefetch of keys whose hashes h[0..n) the caller has. */
void mc_object_prefetch_h(const struct mc_object_table *t, const uint32_t *h, size_t n);
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
/* Move o's replica from (index) to to, whose place must be free; from is left zeroed.  The
 * segment list follows. */
void mc_object_move_replica(struct mc_object *o, uint32_t to, uint32_t from);
/* The object a reference names (eviction-list links), NULL for 0. */
static inline struct mc_object *mc_object_at(const struct mc_object_table *t, mc_oref r)
{
	return mc_oref_ptr((const char *)t->arena, r);
}

/* Segment lists of replicas: a head pointer (mc_segment.reps) and arena references between
 * the replicas.  The replica after r, before r; the reference that names r; adding r at the
 * head; taking r out. */
static inline struct mc_replica *mc_replica_next(const struct mc_replica *r)
{
	return r->seg_next ? (struct mc_replica *)(void *)mc_oref_ptr(
				     (const char *)mc_obj_arena_of(r), r->seg_next)
			   : NULL;
}

static inline struct mc_replica *mc_replica_prev(const struct mc_replica *r)
{
	return r->seg_prev ? (struct mc_replica *)(void *)mc_oref_ptr(
				     (const char *)mc_obj_arena_of(r), r->seg_prev)
			   : NULL;
}

static inline uint32_t mc_replica_ref(const struct mc_replica *r)
{
	return r ? mc_oref_of((const char *)mc_obj_arena_of(r),
			      (const struct mc_object *)(const void *)r)
		 : 0;
}

static inline void mc_replica_push(struct mc_replica **head, struct mc_replica *r)
{
	r->seg_prev = 0;
	r->seg_next = mc_replica_ref(*head);
	if (*head)
		(*head)->seg_prev = mc_replica_ref(r);
	*head = r;
}

static inline void mc_replica_pull(struct mc_replica **head, struct mc_replica *r)
{
	struct mc_replica *p = mc_replica_prev(r), *n = mc_replica_next(r);

	if (p)
		p->seg_next = r->seg_next;
	else
		*head = n;
	if (n)
		n->seg_prev = r->seg_prev;
	r->seg_prev = r->seg_next = 0;
}

/* o's side record, NULL if none. */
static inline struct mc_object_side *mc_object_side(const struct mc_object *o)
{
	return o->side ? (struct mc_object_side *)(void *)mc_oref_ptr(
				 (const char *)mc_obj_arena_of(o), o->side)
		       : NULL;
}

/* The end of o's soft pin (monotonic ms), 0 for none; and setting it (0 clears it). */
static inline int64_t mc_object_soft_pin_until(const struct mc_object *o)
{
	const struct mc_object_side *s = mc_object_side(o);

	return s ? s->soft_pin_until : 0;
}

void mc_object_set_soft_pin_until(struct mc_object *o, int64_t until);

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

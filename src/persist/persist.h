/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PERSIST_H
#define MC_PERSIST_H

/*
 * Durable copy of the master's state in SQLite, for crash recovery.
 *
 * The master records every change as it handles requests (segments mounted/unmounted, objects
 * created/completed/removed); the changes accumulate in one open transaction that the master
 * commits with mc_persist_commit() once per loop iteration, before it sends the replies of that
 * iteration (group commit).  So an acknowledged PutEnd, Remove or Mount survives kill -9.
 *
 * Records are plain values; the module knows nothing of the master's in-memory structures.  One
 * row per object (its replicas packed in a blob) keeps both writes and the reload at start-up
 * cheap.  Single-threaded: owned by the master's reactor thread.
 */
#include <stddef.h>
#include <stdint.h>

struct mc_persist;

struct mc_persist_segment {
	uint8_t id[16];
	uint8_t client_id[16];
	const char *name;
	uint64_t base;
	uint64_t size;
	const char *endpoint;
	const char *protocol;
	uint8_t kind;		/* 0 memory segment, 1 SSD area (LOCAL_DISK replicas) */
	uint8_t token[16];	/* proof of the mounting process (all zero: none) */
	int64_t dormant_until_ms;	/* wall-clock ms until which a dormant segment is kept;
					   0: mounted */
};

struct mc_persist_replica {
	uint64_t id;
	uint8_t type;		/* enum mc_replica_type */
	uint8_t status;		/* enum mc_replica_status */
	uint8_t segment_id[16];	/* MEMORY: the segment holding it */
	uint64_t offset;	/* MEMORY: offset inside the segment */
	uint64_t len;		/* bytes reserved */
};

struct mc_persist_object {
	const char *key;
	size_t key_len;
	uint64_t size;
	uint32_t flags;		/* master-defined (hard pin, ...) */
	int64_t put_start_ms;	/* wall-clock ms of PutStart */
	int64_t soft_pin_until_ms;	/* wall-clock ms, 0 = none */
	uint8_t writer[16];	/* writer client id */
	uint64_t gen;		/* generation of the bytes (master-defined) */
	uint32_t n_replicas;
	const struct mc_persist_replica *replicas;
};

enum mc_persist_sync {
	MC_PERSIST_SYNC_OFF = 0,	/* no fsync: survives a process crash, not a power loss */
	MC_PERSIST_SYNC_NORMAL = 1,	/* WAL + synchronous=NORMAL (default) */
	MC_PERSIST_SYNC_FULL = 2,	/* fsync on every commit */
};

/* Open (creating if needed) the database at path, WAL mode, schema checked through
 * PRAGMA user_version.  Returns 0 and *out, or a negative code (MC_ERR_PERSISTENT_FAIL with a log
 * line naming the file and SQLite's message). */
int mc_persist_open(const char *path, int sync_mode, struct mc_persist **out);
void mc_persist_close(struct mc_persist *p);

/* Changes, buffered in the open transaction (begun on first use).  0 or MC_ERR_PERSISTENT_FAIL. */
int mc_persist_put_segment(struct mc_persist *p, const struct mc_persist_segment *s);
int mc_persist_del_segment(struct mc_persist *p, const uint8_t id[16]);
int mc_persist_put_object(struct mc_persist *p, const struct mc_persist_object *o);
int mc_persist_del_object(struct mc_persist *p, const char *key, size_t key_len);
int mc_persist_del_all_objects(struct mc_persist *p);
int mc_persist_set_meta(struct mc_persist *p, const char *name, int64_t value);

/* Commit the open transaction, if any.  Returns 0 or MC_ERR_PERSISTENT_FAIL (the transaction is
 * rolled back; the caller must then fail the replies that depended on it). */
int mc_persist_commit(struct mc_persist *p);
/* Number of changes in the open transaction. */
size_t mc_persist_pending(const struct mc_persist *p);

/* Reload everything: segments first, then objects.  Pointers passed to the callbacks are valid
 * only during the call.  A callback returning non-zero stops the load with that value.  Returns
 * 0, the callback's value, or MC_ERR_PERSISTENT_FAIL. */
typedef int (*mc_persist_segment_fn)(void *arg, const struct mc_persist_segment *s);
typedef int (*mc_persist_object_fn)(void *arg, const struct mc_persist_object *o);
int mc_persist_load(struct mc_persist *p, mc_persist_segment_fn on_segment,
		    mc_persist_object_fn on_object, void *arg);
/* 0 if name is unknown. */
int64_t mc_persist_get_meta(struct mc_persist *p, const char *name);

#endif

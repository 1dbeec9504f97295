/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PERSIST_INT_H
#define MC_PERSIST_INT_H

/*
 * Inside src/persist: the encoding of changes in a batch, shared by persist.c (which queues and
 * writes them) and persist_snapshot.c (which encodes a database's rows as changes).  Each change
 * is a u8 kind and then:
 *   PUT_SEGMENT  id[16] client_id[16] str name, u64 base, u64 size, str endpoint, str protocol,
 *                u8 kind, token[16] (all zero: none), u64 dormant_until_ms
 *   DEL_SEGMENT  id[16]
 *   PUT_OBJECT   str key, u64 size, u32 flags, i64 put_start_ms, i64 soft_pin_until_ms,
 *                writer[16], u64 gen (the row's id, or with MC_PERSIST_ROWKEY in flags the
 *                one mc_persist_row gives), u8 has_checksum, u64 checksum, str replicas (packed as in
 *                the objects table)
 *   DEL_OBJECT   str key (batches of masters before schema 8 only: the row found by its key,
 *                which needs a scan of the table; never made now)
 *   DEL_ALL_OBJECTS
 *   SET_META     str name, i64 value
 *   PUT_RECORD   u32 kind, str id, str value (the records table: tasks, drain jobs, tenants)
 *   DEL_RECORD   u32 kind, str id
 *   DEL_ROW      u64 row, str key (the objects row of that id, mc_persist_row, if it holds
 *                that key)
 * (str: u32 length and the bytes, src/common/wire.h.)
 */
enum mc_persist_op {
	OP_PUT_SEGMENT = 1,
	OP_DEL_SEGMENT,
	OP_PUT_OBJECT,
	OP_DEL_OBJECT,
	OP_DEL_ALL_OBJECTS,
	OP_SET_META,		/* only in batches taken for replication and in snapshots */
	OP_PUT_RECORD,
	OP_DEL_RECORD,
	OP_DEL_ROW,
};

/* The state of the module, shared by persist.c (the connection), persist_batch.c (the pending
 * batch), persist_write.c (writing it) and persist_load.c (reading the file back). */
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/wire.h"

#define MC_PERSIST_SCHEMA 8
#define MC_PERSIST_REPLICA_BYTES 42
#define MC_PERSIST_MAX_REPLICAS 64

enum mc_persist_stmt {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_PUT_SEGMENT,
	ST_DEL_SEGMENT,
	ST_PUT_OBJECT,
	ST_DEL_OBJECT,
	ST_DEL_OBJECT_KEY,
	ST_DEL_ALL_OBJECTS,
	ST_SET_META,
	ST_GET_META,
	ST_LOAD_SEGMENTS,
	ST_LOAD_OBJECTS,
	ST_PUT_RECORD,
	ST_DEL_RECORD,
	ST_LOAD_RECORDS,
	ST_PUT_LOG,
	ST_DEL_LOG,
	ST_CLEAR_LOG,
	ST_LOAD_LOG,
	ST_COUNT,
};

extern const char *const mc_persist_sql[ST_COUNT];

#define MC_PERSIST_MAX_META 8
#define MC_PERSIST_CKPT_PAGES 1000
/* Past this many pages in the log the loop checkpoints itself (a passive checkpoint of the
 * checkpointer thread may never leave the log wholly copied while commits go on, and only a
 * wholly copied log starts over). */
#define MC_PERSIST_CKPT_SYNC_PAGES 8000
/* A checkpoint that found the file busy (another connection recovering the log's index, or
 * checkpointing) copied nothing and is tried again later; below this many pages in the log that
 * is not a failure, since what the commits wrote is durable in the log.  Past it, as for any
 * other checkpoint error, changes are refused until one succeeds, so the log stays bounded. */
#define MC_PERSIST_CKPT_BUSY_PAGES (4 * MC_PERSIST_CKPT_SYNC_PAGES)

struct mc_persist_meta {
	char name[32];
	int64_t value;
	int dirty;
};

/* A row of the put log held in memory (persist_putlog.c): its puts' generations span tmin..tmax,
 * live of them still in flight; recs NULL once it is deleted (or retired). */
struct mc_persist_logrow {
	int64_t id;
	uint64_t tmin, tmax;
	uint32_t live;
	int64_t born_ms;		/* monotonic ms of its commit */
	uint8_t *recs;
	size_t len;
};

struct mc_persist {
	sqlite3 *db;
	char *path;
	int sync_mode;
	int readonly;			/* opened for reading only: commits reopen first */
	sqlite3_stmt *st[ST_COUNT];
	size_t pending;
	struct mc_wbuf batch;		/* encoded changes not yet committed, in order */
	size_t *ends;			/* where each change of the batch ends */
	size_t nends, capends;
	struct mc_persist_meta meta[MC_PERSIST_MAX_META];
	int nmeta;
	int wal_pages;			/* pages in the write-ahead log after the last commit */
	int ckpt_backfilled;		/* of those, copied by the checkpointer's last run */
	struct mc_persist_ckpt *ckpt;	/* the checkpointer thread (NULL: checkpoints on the loop) */
	int ckpt_failed;
	int last_rc;
	char last_msg[160];		/* SQLite's message for last_rc */
	int quiet;			/* in a commit or checkpoint: the caller logs */
	struct mc_wbuf scratch;
	/* The put log (persist_putlog.c): the records of the next row, its generations, its
	 * puts and those of them already done; the rows written (a ring, log_cap a power of two);
	 * rows to delete with the next commit; the rows read back at start-up. */
	struct mc_wbuf logbuf;
	uint32_t log_n, log_gone;
	uint64_t log_tmin, log_tmax;
	struct mc_persist_logrow *logrows;
	size_t log_head, log_count, log_cap;
	int64_t log_next_id;
	int64_t *log_del;
	size_t nlog_del, caplog_del;
	int64_t log_clear_upto, log_loaded_upto;
	uint64_t log_lost_min;		/* lowest generation of a row not tracked (out of memory) */
	/* The key index (persist_keyidx.c): its helper thread (NULL: not kept); the keys' hashes
	 * and generations of the rows written by the commit under way; whether keys_id has been
	 * cleared in the file (a master that keeps no index clears it with its first commit). */
	struct mc_persist_keys *keys;
	struct mc_persist_keypair *feed;
	size_t nfeed, capfeed;
	size_t nfeed_del;		/* rows the commit under way deletes */
	int feeding;
	int keys_cleared;
};

/* persist.c: errors (logged when they start, then at debug level; quiet inside a commit or
 * checkpoint, whose caller logs them), statements, reopening for writing. */
void mc_persist_note(struct mc_persist *p, const char *what, int rc, const char *msg);
int mc_persist_fail(struct mc_persist *p, const char *what, int rc);
/* Decode the object row st stands on (the columns of ST_LOAD_OBJECTS) into *o, its replicas
 * into reps (MC_PERSIST_MAX_REPLICAS of them); o's pointers are valid until st moves.  0, or -1
 * for a malformed row. */
struct mc_persist_object;
struct mc_persist_replica;
int mc_persist_decode_object(sqlite3_stmt *st, struct mc_persist_object *o,
			     struct mc_persist_replica *reps);
/* The size of the write-ahead log SQLite keeps beside db's main file (by SQLite's own names:
 * a symbolic link's log is beside its target): 0 and *size (0 when there is none), or -1 when
 * it cannot be told. */
int mc_persist_wal_size(sqlite3 *db, uint64_t *size);
/* The replicas column's len bytes at b (packed, MC_PERSIST_REPLICA_BYTES each) into reps
 * (MC_PERSIST_MAX_REPLICAS of them), *n of them.  0, or -1 when malformed. */
int mc_persist_decode_replicas(const uint8_t *b, size_t len, struct mc_persist_replica *reps,
			       uint32_t *n);
int mc_persist_exec(struct mc_persist *p, const char *sql);
/* Run a prepared statement that returns no rows, then reset it.  0 or MC_ERR_PERSISTENT_FAIL. */
int mc_persist_step_done(struct mc_persist *p, enum mc_persist_stmt which);
/* For a database opened for reading (or not at all): try to open it for writing again. */
int mc_persist_reopen(struct mc_persist *p);
/* The PRAGMA that sets synchronous for an enum mc_persist_sync. */
const char *mc_persist_sync_sql(int sync_mode);
/* persist_ckpt.c: the checkpointer thread, with a connection of its own to path.  Start: 0 or
 * -errno.  Kick: ask for a passive checkpoint; 1 if asked, 0 while one runs or its result waits.
 * Busy: 1 while one is asked for or runs.  Collect: 1 and the finished run's result (SQLite's
 * extended code, the log's pages and those copied, SQLite's message), 0 if none waits. */
struct mc_persist_ckpt;
int mc_persist_ckpt_start(const char *path, int sync_mode, struct mc_persist_ckpt **out);
void mc_persist_ckpt_stop(struct mc_persist_ckpt *c);
int mc_persist_ckpt_kick(struct mc_persist_ckpt *c);
int mc_persist_ckpt_busy(struct mc_persist_ckpt *c);
int mc_persist_ckpt_collect(struct mc_persist_ckpt *c, int *rc, int *logged, int *done, char *msg,
			    size_t msglen);
/* persist_putlog.c, for the commit (persist_write.c): write the put log's deletions and its
 * new row inside the open transaction (0 or MC_ERR_PERSISTENT_FAIL), and take them as done once
 * it committed.  Start: the next row's id from the file (at open).  Reset: forget the rows held
 * in memory (the file was wiped).  Fini: free everything. */
int mc_persist_log_write(struct mc_persist *p);
void mc_persist_log_committed(struct mc_persist *p);
int mc_persist_log_start(struct mc_persist *p);
void mc_persist_log_reset(struct mc_persist *p);
void mc_persist_log_fini(struct mc_persist *p);
/* persist_putlog.c: the lowest generation a put in flight (whose objects row may still be
 * written) has, or low if none is lower. */
uint64_t mc_persist_log_low(const struct mc_persist *p, uint64_t low);
/* persist_keyidx.c, for the commit: the row of a PUT_OBJECT written (key, gen) into p->feed;
 * after the commit, the feed handed to the helper with the cut's low bound (every row first
 * written later has a generation at or above it, or below the file's gen_epoch); dropped after
 * a rollback.  Fini: stop the helper (writing what it holds), free the feed. */
struct mc_persist_keypair {
	uint64_t hash, gen;
};
void mc_persist_keys_note(struct mc_persist *p, const void *key, size_t len, uint64_t gen);
void mc_persist_keys_committed(struct mc_persist *p);
void mc_persist_keys_fini(struct mc_persist *p);
/* persist_keyidx.c: the meta values of an index file: its id in *id; 0 complete, 1 not (or of
 * another format), -1 unreadable. */
int mc_persist_keys_meta(sqlite3 *idx, uint64_t *id);
/* persist_keys.c: append to *a the (key hash, row) pairs of the objects table read through db
 * (in the caller's read transaction): all rows, or the tail of a key index (rows at or above
 * low, or below epoch).  stop (if not NULL) is asked every 65536 rows.  0, 1 stopped, -1. */
int mc_persist_pairs_scan(sqlite3 *db, int all, uint64_t low, int64_t epoch,
			  struct mc_persist_keypair **a, size_t *n, size_t *cap,
			  int (*stop)(void *), void *arg);
/* Sort pairs by (hash, gen), repeated ones dropped: the new count, or -1 out of memory. */
long mc_persist_pairs_sort(struct mc_persist_keypair *a, size_t n);
/* persist_keylook.c, for the loader thread: the key index of the database db reads (in its
 * read transaction; dbpath names it).  Open: 0 and *out, or -1 (not usable: a log line says
 * why).  Find the newest row of key: 0, *point standing on it (the columns of point_sql, a
 * query by gen = ?1; the caller decodes it, then resets *point), 1 none,
 * MC_ERR_PERSISTENT_FAIL. */
struct mc_persist_keylook;
int mc_persist_keylook_open(sqlite3 *db, const char *dbpath, const char *point_sql,
			    struct mc_persist_keylook **out);
int mc_persist_keylook_find(struct mc_persist_keylook *x, const void *key, size_t len,
			    sqlite3_stmt **point);
void mc_persist_keylook_free(struct mc_persist_keylook *x);
/* persist_write.c: in the open transaction, set keys_id 0 (0 or MC_ERR_PERSISTENT_FAIL). */
int mc_persist_keys_clear(struct mc_persist *p);
/* persist_pcache.c: SQLite's default page cache with a truncation that removes the pages past
 * the limit without walking its whole hash table.  Once per process, before SQLite initializes
 * (later calls, or a call after SQLite initialized, change nothing). */
void mc_persist_pcache_install(void);
/* persist_walbuf.c: the default VFS becomes one that writes a transaction's log frames in one
 * write, when its commit frame arrives.  Once per process, before a database is opened; 1 when
 * installed. */
int mc_persist_walbuf_install(void);
/* persist_keys.c: the generations of the rows a newer row of the same key overrides, sorted,
 * in *out (malloc'd; NULL when none).  0, -ENOMEM or MC_ERR_PERSISTENT_FAIL. */
int mc_persist_older_rows(struct mc_persist *p, uint64_t **out, size_t *nout);
/* persist_batch.c: append a NUL-terminated string as a str of the encoding. */
void mc_persist_batch_str(struct mc_wbuf *w, const char *s);

#endif

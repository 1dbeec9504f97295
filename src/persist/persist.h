/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PERSIST_H
#define MC_PERSIST_H

/*
 * Durable copy of the master's state in SQLite, for crash recovery.
 *
 * The master records every change as it handles requests (segments mounted/unmounted, objects
 * created/completed/removed); the changes accumulate in a batch held in memory that the master
 * commits with mc_persist_commit() once per loop iteration, before it sends the replies of that
 * iteration (group commit).  So an acknowledged PutEnd, Remove or Mount survives kill -9.
 *
 * A commit that fails (disk full, I/O error, read-only file system) is rolled back in SQLite but
 * the batch stays queued, whole and in order: the next mc_persist_commit() tries it again, with
 * whatever was recorded since appended.  The file therefore always holds the state as of some
 * successful commit, never a part of a batch.  A database that can only be read (read-only file
 * system or file) is opened for reading; commits then first try to reopen it for writing.
 *
 * Records are plain values; the module knows nothing of the master's in-memory structures.  One
 * row per object (its replicas packed in a blob) keeps both writes and the reload at start-up
 * cheap.  Single-threaded: owned by the master's reactor thread.
 */
#include <stddef.h>
#include <stdint.h>

struct mc_persist;
struct sqlite3;

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
	uint64_t gen;		/* generation of the bytes (master-defined), the row's identity:
				   one row per generation (but see MC_PERSIST_ROWKEY) */
	uint64_t row;		/* loaded rows: the row's id in the file (mc_persist_row) */
	uint8_t has_checksum;	/* checksum is known (NULL in the file when not) */
	uint64_t checksum;	/* the object's CRC-64 as its writer gave it */
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
 * line naming the file and SQLite's message).  An existing database that cannot be written (a
 * read-only or full file system) is opened for reading: 0, and mc_persist_writable() says 0. */
int mc_persist_open(const char *path, int sync_mode, struct mc_persist **out);
/* Closes the database; a pending batch is committed if it can be, else dropped with a log line. */
void mc_persist_close(struct mc_persist *p);
/* 1 if the database was opened for writing (commits may still fail). */
int mc_persist_writable(const struct mc_persist *p);

/* Keep the key index (persist_keyidx.c): the file PATH.keys, kept by a thread of its own from
 * the rows each commit writes, with which a restarted master's background load answers a key
 * it has not loaded yet without waiting for its scan (the objects table has no index on the
 * key).  Call after open, before the first commit; a master that does not call it (HA, which
 * writes the file from replicated batches) makes the file's index unusable with its first
 * commit, as does every replicated batch applied.  0, -EINVAL (read-only or in-memory
 * database, or already kept), -ENOMEM. */
int mc_persist_keys_start(struct mc_persist *p);

/* Changes, appended to the pending batch (nothing touches the file until the commit).  0, or
 * -ENOMEM when the batch cannot grow. */
int mc_persist_put_segment(struct mc_persist *p, const struct mc_persist_segment *s);
int mc_persist_del_segment(struct mc_persist *p, const uint8_t id[16]);
int mc_persist_put_object(struct mc_persist *p, const struct mc_persist_object *o);
/* In mc_persist_object.flags: the row is keyed by the key's hash (mc_persist_row), not by the
 * generation, which other keys may share (an SSD copy adopted from before the database). */
#define MC_PERSIST_ROWKEY (1u << 29)
/* The id of the row of key at generation gen (rowkey: MC_PERSIST_ROWKEY): gen, or a negative
 * number from the key's hash (as an unsigned 64-bit value). */
uint64_t mc_persist_row(const void *key, size_t len, uint64_t gen, int rowkey);
/* The row row (mc_persist_row), if it holds key (rows are keyed by generation: every change of
 * an object's generation deletes the row of the old one). */
int mc_persist_del_object(struct mc_persist *p, const char *key, size_t key_len, uint64_t row);
int mc_persist_del_all_objects(struct mc_persist *p);
int mc_persist_set_meta(struct mc_persist *p, const char *name, int64_t value);
/* Records: the master's further durable state, kept by kind (one per module that owns it) and
 * id, values opaque here.  Put replaces a record of the same kind and id. */
int mc_persist_put_record(struct mc_persist *p, uint32_t kind, const void *id, size_t id_len,
			  const void *value, size_t len);
int mc_persist_del_record(struct mc_persist *p, uint32_t kind, const void *id, size_t id_len);

/* The put log (persist_putlog.c): a fresh put's record while it is in flight (its key, gen,
 * put_start_ms and memory replicas' ranges), written with the next commit into an
 * append-ordered table rather than the objects table.  o->gen identifies the put: the master
 * gives each put its own, increasing.  0 or -ENOMEM (the commit then fails). */
int mc_persist_log_object(struct mc_persist *p, const struct mc_persist_object *o);
/* The put of generation gen is no longer the log's: its end was recorded (its row, or its
 * removal, in the objects table).  Unknown generations are ignored. */
void mc_persist_log_done(struct mc_persist *p, uint64_t gen);
/* Rows committed age_ms ago or more whose puts are not all done: fn gets each of their records
 * (o->key, o->gen), and must record the puts still in flight in the objects table; the rows
 * are deleted with the next commit.  Returns the number of records passed to fn. */
typedef void (*mc_persist_retire_fn)(void *arg, const struct mc_persist_object *o);
size_t mc_persist_log_retire(struct mc_persist *p, int64_t age_ms, mc_persist_retire_fn fn,
			     void *arg);
/* Read the put log back (start-up, committed rows only): fn gets each record, with replicas of
 * type MEMORY and status PROCESSING, and seq, larger for a later record.  0, fn's non-zero
 * value, or MC_ERR_PERSISTENT_FAIL. */
typedef int (*mc_persist_logged_fn)(void *arg, const struct mc_persist_object *o, int64_t seq);
int mc_persist_load_log(struct mc_persist *p, mc_persist_logged_fn fn, void *arg);
/* The rows mc_persist_load_log read go with the next commit. */
void mc_persist_log_clear(struct mc_persist *p);
/* Rows of the put log still held (committed, not deleted). */
size_t mc_persist_log_rows(const struct mc_persist *p);

/* Write the pending batch (and the meta values set since the last commit) in one transaction.
 * Returns 0 (the batch is durable and emptied) or MC_ERR_PERSISTENT_FAIL: nothing of the batch
 * is in the file and the batch stays queued for the next call; mc_persist_last_error() gives
 * SQLite's code.  One call does a bounded amount of work: the batch, nothing else. */
int mc_persist_commit(struct mc_persist *p);
/* Number of changes in the pending batch. */
size_t mc_persist_pending(const struct mc_persist *p);

/* Replication (the master's HA, src/master/ha_*.c).  Batches travel between masters in the
 * same encoding as the pending batch, plus meta values as records of their own. */
struct iovec;
struct mc_wbuf;
/* Move the pending changes, as many whole ones as fit in max bytes and max_changes (at least
 * one), to the end of out, and with the last of them the meta values set since the last take or
 * commit.  What is taken is gone from the pending batch: the caller makes it durable
 * (mc_persist_apply_batches here once it is).  Returns the number of records taken (0: none
 * pending). */
size_t mc_persist_take(struct mc_persist *p, struct mc_wbuf *out, size_t max, size_t max_changes);
/* Append to w the record that sets meta name to value, as mc_persist_take writes them. */
void mc_persist_encode_meta(struct mc_wbuf *w, const char *name, int64_t value);
/* Write the n (at most 64) encoded batches (as mc_persist_take made them, here or on another
 * master) in one transaction, in order.  0 or MC_ERR_PERSISTENT_FAIL (nothing written; a
 * malformed batch also fails), -EINVAL for too many.  Leaves the pending batch alone. */
int mc_persist_apply_batches(struct mc_persist *p, const struct iovec *v, int n);

/* Apply up to max changes of an encoded batch from cursor r (which advances) in one
 * transaction: a long batch (a snapshot's chunk) in bounded steps.  0 or
 * MC_ERR_PERSISTENT_FAIL (rolled back). */
struct mc_rbuf;
int mc_persist_apply_some(struct mc_persist *p, struct mc_rbuf *r, size_t max);

/* Snapshots (persist_snapshot.c): a consistent read of a database file through a connection of
 * its own, in one read transaction (WAL: the writer goes on meanwhile), that encodes the rows as
 * changes in the batch encoding.  Any one thread at a time. */
struct mc_persist_reader;
/* 0 and *out, or MC_ERR_PERSISTENT_FAIL (an in-memory database cannot be read so). */
int mc_persist_reader_open(const char *path, struct mc_persist_reader **out);
void mc_persist_reader_close(struct mc_persist_reader *r);
/* A meta value as of the read (0 if unknown). */
int64_t mc_persist_reader_meta(struct mc_persist_reader *r, const char *name);
/* Append every segment as a change to w; the number in *n.  0 or MC_ERR_PERSISTENT_FAIL. */
int mc_persist_reader_segments(struct mc_persist_reader *r, struct mc_wbuf *w, uint64_t *n);
/* Append up to max further objects; *n of them (0: none left).  0 or MC_ERR_PERSISTENT_FAIL. */
int mc_persist_reader_objects(struct mc_persist_reader *r, struct mc_wbuf *w, uint64_t max,
			      uint64_t *n);
/* Append every meta value and every record (copy/move tasks, drain jobs, tenants). */
int mc_persist_reader_metas(struct mc_persist_reader *r, struct mc_wbuf *w);

/* Bytes of changes in the pending batch (meta values not counted). */
size_t mc_persist_pending_bytes(const struct mc_persist *p);
/* Forget the pending changes and meta values (they will never be written). */
void mc_persist_drop_pending(struct mc_persist *p);
/* Empty every table (segments, objects, meta) in one transaction; the pending batch is dropped.
 * 0 or MC_ERR_PERSISTENT_FAIL. */
int mc_persist_wipe(struct mc_persist *p);

/* Checkpoints are ours to run (SQLite's automatic one is off so a failure is seen): due once the
 * write-ahead log holds 1000 pages or more not yet copied, or after a failed checkpoint. */
int mc_persist_checkpoint_due(const struct mc_persist *p);
/* A passive checkpoint, run by the checkpointer thread (persist_ckpt.c): this call collects the
 * result of its last run and asks for the next, without waiting for the disk.  After a failure,
 * until one succeeds, and when the log has grown to 8000 pages, the checkpoint runs here (the
 * loop's own, which alone leaves the log to start over under steady commits).  0 or
 * MC_ERR_PERSISTENT_FAIL (the log keeps the data; retry later). */
int mc_persist_checkpoint(struct mc_persist *p);
/* Copy the whole write-ahead log into the file and empty it, now, on the caller's thread, so
 * that the background load may read the objects table from the file's pages (persist_pages.c):
 * not when the log holds more than 64 MiB (the copy would hold up the start; the checkpointer
 * copies it later) or while anything else checkpoints or reads the log (nothing waits).  0 if
 * the log is empty now, else -1 (at debug level: the load reads through SQLite). */
int mc_persist_truncate_log(struct mc_persist *p);

/* SQLite's (extended) result code of the last failed operation, SQLITE_OK if none. */
int mc_persist_last_error(const struct mc_persist *p);
/* "what: SQLite's message" for it ("" if none).  Failures inside mc_persist_commit() and
 * mc_persist_checkpoint() are only logged at debug level: the caller decides and logs this. */
const char *mc_persist_last_message(const struct mc_persist *p);
/* Our code for a SQLite result code: 0 for SQLITE_OK/ROW/DONE, -ENOMEM for SQLITE_NOMEM, else
 * MC_ERR_PERSISTENT_FAIL. */
int mc_persist_map_error(int sqlite_rc);
/* What a SQLite result code means for the disk, for log lines and /health: "disk full",
 * "read-only", "I/O error", "cannot open", "busy", "corrupt", "out of memory", "ok", "error". */
const char *mc_persist_error_class(int sqlite_rc);

/* Test hook (persist_fault.c), not used in production: when the environment variable
 * MC_TEST_SQLITE_FAULT names a fault point (begin, insert, commit, checkpoint), databases opened
 * afterwards go through a wrapping VFS that fails that point.  "point:N" fails it N times;
 * with MC_TEST_SQLITE_FAULT_FILE=path it fails while that file exists.  Returns 1 if installed. */
int mc_persist_fault_install(void);
/* Attach the per-connection part of the hook (the insert point) to a database.  No-op unless
 * installed. */
void mc_persist_fault_attach(struct sqlite3 *db);

/* Reload everything: segments first, then objects in generation order (either callback NULL:
 * those rows are not read; the background load reads the objects, mc_persist_loader_start).
 * Of two rows of one key the newer alone is passed; the older's deletion goes into the pending
 * batch.  Pointers passed to the callbacks are valid
 * only during the call.  A callback returning non-zero stops the load with that value.  Returns
 * 0, the callback's value, or MC_ERR_PERSISTENT_FAIL. */
typedef int (*mc_persist_segment_fn)(void *arg, const struct mc_persist_segment *s);
typedef int (*mc_persist_object_fn)(void *arg, const struct mc_persist_object *o);
int mc_persist_load(struct mc_persist *p, mc_persist_segment_fn on_segment,
		    mc_persist_object_fn on_object, void *arg);
/* Reload the records of one kind (committed ones: call before recording new changes).  The
 * pointers are valid only during the call; a callback returning non-zero stops the load with
 * that value.  Returns 0, the callback's value, or MC_ERR_PERSISTENT_FAIL. */
typedef int (*mc_persist_record_fn)(void *arg, const void *id, size_t id_len, const void *value,
				    size_t len);
int mc_persist_load_records(struct mc_persist *p, uint32_t kind, mc_persist_record_fn fn,
			    void *arg);
/* 0 if name is unknown. */
int64_t mc_persist_get_meta(struct mc_persist *p, const char *name);

/* Background load (persist_loader.c): the object rows read by threads of their own (up to
 * eight, each a part of the table at a time), so the master can serve while they load.
 * Segments, meta values and records are read beforehand with the calls above.  The loader's
 * read transactions start in mc_persist_loader_start: they see the file as it is then, whatever
 * the master writes afterwards.  All calls but the threads inside are the master's loop's. */
struct mc_persist_loader;
/* Decoded object rows, in generation order (the order of the file's primary key).
 * rows[i].key and rows[i].replicas point into keys and reps.  The other fields are the
 * loader's. */
struct mc_persist_rows {
	size_t n, cap;
	struct mc_persist_object *rows;
	struct mc_persist_replica *reps;
	size_t nreps, capreps;
	char *keys;
	size_t keys_len, keys_cap;
};
/* A row found by its key: the 64-bit hash of the key (mc_persist_key_hash), its chunk and its
 * index there (the key index's pairs, persist_keys.c). */
struct mc_persist_keyref {
	uint64_t hash;
	uint32_t chunk, row;
};
uint64_t mc_persist_key_hash(const void *key, size_t len);
/* Sort by hash, stably (radix sort).  0, or -1 out of memory (a unchanged). */
int mc_persist_keyrefs_sort(struct mc_persist_keyref *a, size_t n);
/* The answer to a point query: rc 0 (rows holds the one row), 1 (no such row), -EAGAIN (no key
 * index to look it up in: the caller waits for the load) or MC_ERR_PERSISTENT_FAIL; tag as
 * given. */
struct mc_persist_answer {
	struct mc_persist_answer *next;
	void *tag;
	int rc;
	struct mc_persist_rows rows;
	size_t key_len;
	char key[];
};
/* Open path read-only once a scanning thread, begin their read transactions and start the
 * threads: MC_LOAD_THREADS of them (1 to 8) when set, else one a CPU but one, 1 to 8.  0 and
 * *out, -EINVAL (an in-memory database: load it with mc_persist_load), or
 * MC_ERR_PERSISTENT_FAIL.  Test hook: MC_TEST_LOAD_DELAY_MS=N in the environment makes each
 * thread sleep N ms (at most 1000) after every 1024 rows it reads, and the threads one unless
 * MC_LOAD_THREADS says otherwise. */
int mc_persist_loader_start(const char *path, struct mc_persist_loader **out);
/* Readable (eventfd) when a point query has been answered, a part has been read or the scan
 * has ended. */
int mc_persist_loader_fd(const struct mc_persist_loader *l);
/* Clear the fd; *answers: the point queries answered since (the caller frees them with
 * mc_persist_answer_free).  Returns 0 while scanning, 1 once every part is read, or the scan's
 * error (negative). */
int mc_persist_loader_poll(struct mc_persist_loader *l, struct mc_persist_answer **answers);
/* The next part of the table, from the last generations to the first, once it is read: 1 and
 * its chunks (*chunks, *n; the rows of each chunk and the chunks in generation order; the
 * caller's: mc_persist_loader_give or mc_persist_rows_fini each, then free the array), 0 while it is being read, -1 when
 * every part has been taken.  So a key's newer rows come before its older ones. */
int mc_persist_loader_take(struct mc_persist_loader *l, struct mc_persist_rows **chunks,
			   size_t *n);
/* Give back chunk c of a part taken, its rows done with: kept for the parts still to read, or
 * freed (c is empty after). */
void mc_persist_loader_give(struct mc_persist_loader *l, struct mc_persist_rows *c);
/* About how many rows the table holds, known before its parts are read (from the pages'
 * tree: its leaves, and the cells of a sample of them), or 0. */
uint64_t mc_persist_loader_estimate(const struct mc_persist_loader *l);
/* Ask for the row of key, the newest if it has several, from the key index (else answered
 * -EAGAIN).  0 or -ENOMEM. */
int mc_persist_loader_query(struct mc_persist_loader *l, const void *key, size_t len, void *tag);
void mc_persist_answer_free(struct mc_persist_answer *a);
/* Rows read so far (progress, which counts twice the rows of a part whose pages did not
 * parse). */
uint64_t mc_persist_loader_rows(const struct mc_persist_loader *l);
/* Of the scan's parts, those read from the file's pages (persist_pages.c: when the file's
 * write-ahead log was empty as the load began, see mc_persist_truncate_log, and unless
 * MC_LOAD_PAGES=0), not through SQLite's statements; a part whose pages do not parse, or give
 * another count of rows than SQLite's, is read through SQLite. */
size_t mc_persist_loader_pages(const struct mc_persist_loader *l);
void mc_persist_rows_fini(struct mc_persist_rows *c);
/* Stop the threads (interrupting a long read), close, free everything.  NULL is a no-op. */
void mc_persist_loader_free(struct mc_persist_loader *l);
/* For a process about to exit: stop the threads and close their connections as
 * mc_persist_loader_free does, but leave the rows read so far (gigabytes at tens of millions
 * of objects) to the exit; l stays valid and owns them.  Idempotent. */
void mc_persist_loader_halt(struct mc_persist_loader *l);

#endif

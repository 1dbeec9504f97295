/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SQLite persistence of the master's segments and object table (see persist.h).
 *
 * Invariants: this module alone owns the sqlite3 handle; every statement is prepared once at
 * open; changes are encoded into an in-memory batch and written, in order, in one transaction by
 * mc_persist_commit(), which on failure rolls the transaction back and keeps the batch for the
 * next try (SQLite may roll back by itself after an I/O error, so a transaction is never kept
 * open across a failure); every SQLite error is logged with the database path and mapped by
 * mc_persist_map_error().  Runs on the master's reactor thread only.
 *
 * Schema (PRAGMA user_version = 6; older files are upgraded in place: version 1 gets kind,
 * versions 1 and 2 get gen, versions 1 to 3 get token and dormant_until_ms, versions 1 to 4
 * get checksum, NULL in the rows they keep, versions 1 to 5 get an empty records table):
 *   segments(id BLOB PK, client_id BLOB, name, base, size, endpoint, protocol, kind, token BLOB,
 *            dormant_until_ms)
 *            -- kind 0: memory segment; 1: a client's SSD area (base 0, size = capacity)
 *            -- token: 16 bytes the mounting process proves itself with (NULL: none)
 *            -- dormant_until_ms: wall-clock end of a dormant segment's time (0: mounted)
 *   objects(key BLOB PK, size, flags, put_start_ms, soft_pin_until_ms, writer BLOB,
 *           replicas BLOB, gen, checksum)                    -- WITHOUT ROWID
 *            -- gen: the generation of the object's bytes (0 in upgraded rows)
 *            -- checksum: the object's CRC-64 as a signed 64-bit integer (NULL: none known)
 *   meta(name TEXT PK, value INTEGER)
 *   records(kind INTEGER, id BLOB, value BLOB, PK(kind, id))  -- WITHOUT ROWID
 *            -- the master's other durable state, one kind per module (tasks, drain jobs,
 *            -- tenants), values in that module's own encoding
 * A replica is packed as u64 id, u8 type, u8 status, 16-byte segment id, u64 offset, u64 len;
 * a LOCAL_DISK replica names its SSD area and stores its disk address as offset, size as len.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

#define MC_PERSIST_SCHEMA 6
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
	ST_DEL_ALL_OBJECTS,
	ST_SET_META,
	ST_GET_META,
	ST_LOAD_SEGMENTS,
	ST_LOAD_OBJECTS,
	ST_PUT_RECORD,
	ST_DEL_RECORD,
	ST_LOAD_RECORDS,
	ST_COUNT,
};

static const char *const mc_persist_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_PUT_SEGMENT] = "INSERT OR REPLACE INTO segments(id, client_id, name, base, size, "
			   "endpoint, protocol, kind, token, dormant_until_ms) VALUES (?1, ?2, ?3, "
			   "?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_DEL_SEGMENT] = "DELETE FROM segments WHERE id = ?1",
	[ST_PUT_OBJECT] = "INSERT OR REPLACE INTO objects(key, size, flags, put_start_ms, "
			  "soft_pin_until_ms, writer, replicas, gen, checksum) VALUES (?1, ?2, ?3, ?4, "
			  "?5, ?6, ?7, ?8, ?9)",
	[ST_DEL_OBJECT] = "DELETE FROM objects WHERE key = ?1",
	[ST_DEL_ALL_OBJECTS] = "DELETE FROM objects",
	[ST_SET_META] = "INSERT OR REPLACE INTO meta(name, value) VALUES (?1, ?2)",
	[ST_GET_META] = "SELECT value FROM meta WHERE name = ?1",
	[ST_LOAD_SEGMENTS] = "SELECT id, client_id, name, base, size, endpoint, protocol, kind, "
			     "token, dormant_until_ms FROM segments",
	[ST_LOAD_OBJECTS] = "SELECT key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
			    "replicas, gen, checksum FROM objects",
	[ST_PUT_RECORD] = "INSERT OR REPLACE INTO records(kind, id, value) VALUES (?1, ?2, ?3)",
	[ST_DEL_RECORD] = "DELETE FROM records WHERE kind = ?1 AND id = ?2",
	[ST_LOAD_RECORDS] = "SELECT id, value FROM records WHERE kind = ?1",
};

static const char mc_persist_schema_sql[] =
	"CREATE TABLE IF NOT EXISTS segments(id BLOB PRIMARY KEY, client_id BLOB NOT NULL, "
	"name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER NOT NULL, "
	"endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind INTEGER NOT NULL DEFAULT 0, "
	"token BLOB, dormant_until_ms INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, "
	"flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL, "
	"writer BLOB NOT NULL, replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0, "
	"checksum INTEGER) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS records(kind INTEGER NOT NULL, id BLOB NOT NULL, "
	"value BLOB NOT NULL, PRIMARY KEY(kind, id)) WITHOUT ROWID;";


#define MC_PERSIST_MAX_META 8
#define MC_PERSIST_CKPT_PAGES 1000

struct mc_persist_meta {
	char name[32];
	int64_t value;
	int dirty;
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
	int ckpt_failed;
	int last_rc;
	char last_msg[160];		/* SQLite's message for last_rc */
	int quiet;			/* in a commit or checkpoint: the caller logs */
	struct mc_wbuf scratch;
};

int mc_persist_map_error(int sqlite_rc)
{
	switch (sqlite_rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	default:
		return MC_ERR_PERSISTENT_FAIL;
	}
}

const char *mc_persist_error_class(int sqlite_rc)
{
	switch (sqlite_rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return "ok";
	case SQLITE_FULL:
		return "disk full";
	case SQLITE_READONLY:
	case SQLITE_PERM:
		return "read-only";
	case SQLITE_IOERR:
		return (sqlite_rc == SQLITE_IOERR_NOMEM) ? "out of memory" : "I/O error";
	case SQLITE_CANTOPEN:
		return "cannot open";
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return "busy";
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return "corrupt";
	case SQLITE_NOMEM:
		return "out of memory";
	default:
		return "error";
	}
}

/* Errors are logged when they start; the same error again, as retries meet it, only at debug
 * level, so a disk that stays full does not flood the log. */
static void mc_persist_note(struct mc_persist *p, const char *what, int rc, const char *msg)
{
	int again = p->last_rc == rc;

	p->last_rc = rc;
	snprintf(p->last_msg, sizeof(p->last_msg), "%s: %s", what, msg);
	mc_log(again || p->quiet ? MC_LOG_DEBUG : MC_LOG_ERR, "persist %s: %s (%s)", p->path,
	       p->last_msg, mc_persist_error_class(rc));
}

/* Errors are logged when they start, except inside a commit or checkpoint, whose caller logs
 * them (mc_persist_last_message); the same error again only at debug level, so a disk that
 * stays full does not flood the log. */
static int mc_persist_fail(struct mc_persist *p, const char *what, int rc)
{
	mc_persist_note(p, what, rc,
			p->db && sqlite3_errcode(p->db) != SQLITE_OK ? sqlite3_errmsg(p->db)
								     : sqlite3_errstr(rc));
	return MC_ERR_PERSISTENT_FAIL;
}

static int mc_persist_exec(struct mc_persist *p, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(p->db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		mc_persist_note(p, sql, sqlite3_extended_errcode(p->db), msg ? msg : "?");
		sqlite3_free(msg);
		return MC_ERR_PERSISTENT_FAIL;
	}
	return 0;
}

/* Run a prepared statement that returns no rows, then reset it. */
static int mc_persist_step_done(struct mc_persist *p, enum mc_persist_stmt which)
{
	sqlite3_stmt *st = p->st[which];
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		return mc_persist_fail(p, mc_persist_sql[which], sqlite3_extended_errcode(p->db));
	return 0;
}

static int mc_persist_on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct mc_persist *p = arg;

	(void)db;
	(void)name;
	p->wal_pages = pages;
	return SQLITE_OK;
}

static void mc_persist_close_db(struct mc_persist *p)
{
	int i;

	for (i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(p->st[i]);
		p->st[i] = NULL;
	}
	sqlite3_close(p->db);
	p->db = NULL;
}

static int mc_persist_user_version(struct mc_persist *p, int *version)
{
	sqlite3_stmt *st;
	int rc;

	*version = 0;
	rc = sqlite3_prepare_v2(p->db, "PRAGMA user_version", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return mc_persist_fail(p, "user_version", rc);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		return mc_persist_fail(p, "user_version", rc);
	if (*version > MC_PERSIST_SCHEMA) {
		mc_log_err("persist %s: schema version %d is newer than this master (%d)", p->path,
			   *version, MC_PERSIST_SCHEMA);
		return -EPROTO;
	}
	return 0;
}

/* Bring the schema to MC_PERSIST_SCHEMA; writes nothing when it is there already, so a database
 * on a full disk still opens for writing. */
static int mc_persist_schema(struct mc_persist *p, int version)
{
	sqlite3_stmt *st;

	if (version == MC_PERSIST_SCHEMA)
		return 0;
	if (version == 1 &&
	    mc_persist_exec(p, "ALTER TABLE segments ADD COLUMN kind INTEGER NOT NULL DEFAULT 0"))
		return MC_ERR_PERSISTENT_FAIL;
	if (mc_persist_exec(p, mc_persist_schema_sql))
		return MC_ERR_PERSISTENT_FAIL;
	if (version >= 1 && version < 3) {
		/* An objects table from before generations lacks gen. */
		if (sqlite3_prepare_v2(p->db, "SELECT gen FROM objects", -1, &st, NULL) ==
		    SQLITE_OK) {
			sqlite3_finalize(st);
		} else if (mc_persist_exec(p, "ALTER TABLE objects ADD COLUMN gen INTEGER NOT NULL "
					      "DEFAULT 0")) {
			return MC_ERR_PERSISTENT_FAIL;
		}
	}
	if (version >= 1 && version < 4) {
		/* Segments from before dormant segments lack token and dormant_until_ms. */
		if (sqlite3_prepare_v2(p->db, "SELECT token, dormant_until_ms FROM segments", -1,
				       &st, NULL) == SQLITE_OK) {
			sqlite3_finalize(st);
		} else if (mc_persist_exec(p, "ALTER TABLE segments ADD COLUMN token BLOB") ||
			   mc_persist_exec(p, "ALTER TABLE segments ADD COLUMN dormant_until_ms "
					      "INTEGER NOT NULL DEFAULT 0")) {
			return MC_ERR_PERSISTENT_FAIL;
		}
	}
	if (version >= 1 && version < 5) {
		/* Objects from before checksums: the rows are kept, with none known. */
		if (sqlite3_prepare_v2(p->db, "SELECT checksum FROM objects", -1, &st, NULL) ==
		    SQLITE_OK) {
			sqlite3_finalize(st);
		} else if (mc_persist_exec(p, "ALTER TABLE objects ADD COLUMN checksum INTEGER")) {
			return MC_ERR_PERSISTENT_FAIL;
		}
	}
	return mc_persist_exec(p, "PRAGMA user_version=6");
}

/* Open p->path for writing (flags add SQLITE_OPEN_CREATE or not) or, with readonly, for reading,
 * set the connection up and prepare the statements.  On failure p->db is closed. */
static int mc_persist_open_db(struct mc_persist *p, int flags, int readonly)
{
	const char *sync_sql = p->sync_mode == MC_PERSIST_SYNC_FULL  ? "PRAGMA synchronous=FULL"
			       : p->sync_mode == MC_PERSIST_SYNC_OFF ? "PRAGMA synchronous=OFF"
								      : "PRAGMA synchronous=NORMAL";
	int i, rc, version;

	flags |= SQLITE_OPEN_NOMUTEX | (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);
	rc = sqlite3_open_v2(p->path, &p->db, flags, NULL);
	if (rc != SQLITE_OK) {
		rc = mc_persist_fail(p, "open", rc);
		goto fail;
	}
	sqlite3_extended_result_codes(p->db, 1);
	if (!readonly && sqlite3_db_readonly(p->db, "main") == 1) {
		/* SQLite fell back to reading: the file or its file system refuses writes. */
		rc = mc_persist_fail(p, "open for writing", SQLITE_READONLY);
		goto fail;
	}
	if ((!readonly && mc_persist_exec(p, "PRAGMA journal_mode=WAL")) ||
	    mc_persist_exec(p, sync_sql) || mc_persist_exec(p, "PRAGMA temp_store=MEMORY") ||
	    mc_persist_exec(p, "PRAGMA cache_size=-65536")) {
		rc = MC_ERR_PERSISTENT_FAIL;
		goto fail;
	}
	rc = mc_persist_user_version(p, &version);
	if (rc)
		goto fail;
	if (readonly) {
		if (version == 0) {
			/* Created but never written (the disk was full): nothing to load. */
			p->readonly = 1;
			return 0;
		}
		if (version != MC_PERSIST_SCHEMA) {
			mc_log_err("persist %s: schema version %d needs an upgrade, which needs "
				   "writing", p->path, version);
			rc = MC_ERR_PERSISTENT_FAIL;
			goto fail;
		}
	} else if ((rc = mc_persist_schema(p, version)) != 0) {
		goto fail;
	}
	mc_persist_fault_attach(p->db);
	for (i = 0; i < ST_COUNT; i++) {
		rc = sqlite3_prepare_v3(p->db, mc_persist_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&p->st[i], NULL);
		if (rc != SQLITE_OK) {
			rc = mc_persist_fail(p, mc_persist_sql[i], rc);
			goto fail;
		}
	}
	/* Checkpoints are run by mc_persist_checkpoint(), where a failure is seen. */
	sqlite3_wal_hook(p->db, mc_persist_on_wal, p);
	p->readonly = readonly;
	return 0;

fail:
	mc_persist_close_db(p);
	return rc;
}

static int mc_persist_dir_exists(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat sb;

	if (slash == NULL)
		return 1;
	if ((size_t)(slash - path) >= sizeof(dir))
		return 0;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	return dir[0] == '\0' || (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
}

int mc_persist_open(const char *path, int sync_mode, struct mc_persist **out)
{
	struct mc_persist *p;
	int rc;

	*out = NULL;
	mc_persist_fault_install();
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->path = strdup(path);
	if (p->path == NULL) {
		free(p);
		return -ENOMEM;
	}
	p->sync_mode = sync_mode;
	mc_wbuf_init(&p->scratch);
	mc_wbuf_init(&p->batch);
	rc = mc_persist_open_db(p, SQLITE_OPEN_CREATE, 0);
	if (rc == MC_ERR_PERSISTENT_FAIL && access(path, F_OK) == 0) {
		/* The file is there but cannot be written: serve what it holds. */
		int why = p->last_rc;

		rc = mc_persist_open_db(p, 0, 1);
		if (rc == 0) {
			mc_log_warn("persist %s: opened for reading only (%s); changes are refused "
				    "until it can be written",
				    path, mc_persist_error_class(why));
			p->last_rc = why;
		}
	} else if (rc == MC_ERR_PERSISTENT_FAIL && mc_persist_dir_exists(path)) {
		/* No file and none can be made now (read-only or full file system): start empty;
		 * commits try to create it.  A directory that does not exist is a mistake in the
		 * configuration instead, and fails here. */
		int why = p->last_rc;

		mc_log_warn("persist %s: cannot be created (%s); starting empty, changes are "
			    "refused until it can be written",
			    path, mc_persist_error_class(why));
		p->readonly = 1;
		p->last_rc = why;
		rc = 0;
	}
	if (rc) {
		mc_wbuf_fini(&p->batch);
		mc_wbuf_fini(&p->scratch);
		free(p->path);
		free(p);
		return rc == -ENOMEM ? rc : MC_ERR_PERSISTENT_FAIL;
	}
	*out = p;
	return 0;
}

void mc_persist_close(struct mc_persist *p)
{
	if (p == NULL)
		return;
	if (p->pending && mc_persist_commit(p) != 0)
		mc_log_err("persist %s: %zu changes not written at close", p->path, p->pending);
	mc_persist_close_db(p);
	mc_wbuf_fini(&p->batch);
	mc_wbuf_fini(&p->scratch);
	free(p->ends);
	free(p->path);
	free(p);
}

int mc_persist_writable(const struct mc_persist *p)
{
	return !p->readonly;
}

static int mc_persist_queued(struct mc_persist *p)
{
	if (p->batch.err)
		return -ENOMEM;
	if (p->nends == p->capends) {
		size_t cap = p->capends ? p->capends * 2 : 256;
		size_t *n = realloc(p->ends, cap * sizeof(*n));

		if (n == NULL) {
			p->batch.err = -ENOMEM;
			return -ENOMEM;
		}
		p->ends = n;
		p->capends = cap;
	}
	p->ends[p->nends++] = p->batch.len;
	p->pending++;
	return 0;
}

static void mc_batch_str(struct mc_wbuf *w, const char *s)
{
	mc_wbuf_str(w, s, strlen(s));
}

int mc_persist_put_segment(struct mc_persist *p, const struct mc_persist_segment *s)
{
	struct mc_wbuf *w = &p->batch;

	mc_wbuf_u8(w, OP_PUT_SEGMENT);
	mc_wbuf_put(w, s->id, 16);
	mc_wbuf_put(w, s->client_id, 16);
	mc_batch_str(w, s->name);
	mc_wbuf_u64(w, s->base);
	mc_wbuf_u64(w, s->size);
	mc_batch_str(w, s->endpoint);
	mc_batch_str(w, s->protocol);
	mc_wbuf_u8(w, s->kind);
	mc_wbuf_put(w, s->token, 16);
	mc_wbuf_u64(w, (uint64_t)s->dormant_until_ms);
	return mc_persist_queued(p);
}

int mc_persist_del_segment(struct mc_persist *p, const uint8_t id[16])
{
	mc_wbuf_u8(&p->batch, OP_DEL_SEGMENT);
	mc_wbuf_put(&p->batch, id, 16);
	return mc_persist_queued(p);
}

int mc_persist_put_object(struct mc_persist *p, const struct mc_persist_object *o)
{
	struct mc_wbuf *w = &p->batch;
	uint32_t i;

	mc_wbuf_u8(w, OP_PUT_OBJECT);
	mc_wbuf_str(w, o->key, o->key_len);
	mc_wbuf_u64(w, o->size);
	mc_wbuf_u32(w, o->flags);
	mc_wbuf_i64(w, o->put_start_ms);
	mc_wbuf_i64(w, o->soft_pin_until_ms);
	mc_wbuf_put(w, o->writer, 16);
	mc_wbuf_u64(w, o->gen);
	mc_wbuf_u8(w, o->has_checksum ? 1 : 0);
	mc_wbuf_u64(w, o->checksum);
	mc_wbuf_u32(w, o->n_replicas * MC_PERSIST_REPLICA_BYTES);
	for (i = 0; i < o->n_replicas; i++) {
		const struct mc_persist_replica *r = &o->replicas[i];

		mc_wbuf_u64(w, r->id);
		mc_wbuf_u8(w, r->type);
		mc_wbuf_u8(w, r->status);
		mc_wbuf_put(w, r->segment_id, 16);
		mc_wbuf_u64(w, r->offset);
		mc_wbuf_u64(w, r->len);
	}
	return mc_persist_queued(p);
}

int mc_persist_del_object(struct mc_persist *p, const char *key, size_t key_len)
{
	mc_wbuf_u8(&p->batch, OP_DEL_OBJECT);
	mc_wbuf_str(&p->batch, key, key_len);
	return mc_persist_queued(p);
}

int mc_persist_del_all_objects(struct mc_persist *p)
{
	mc_wbuf_u8(&p->batch, OP_DEL_ALL_OBJECTS);
	return mc_persist_queued(p);
}

int mc_persist_put_record(struct mc_persist *p, uint32_t kind, const void *id, size_t id_len,
			  const void *value, size_t len)
{
	mc_wbuf_u8(&p->batch, OP_PUT_RECORD);
	mc_wbuf_u32(&p->batch, kind);
	mc_wbuf_str(&p->batch, id, id_len);
	mc_wbuf_str(&p->batch, value, len);
	return mc_persist_queued(p);
}

int mc_persist_del_record(struct mc_persist *p, uint32_t kind, const void *id, size_t id_len)
{
	mc_wbuf_u8(&p->batch, OP_DEL_RECORD);
	mc_wbuf_u32(&p->batch, kind);
	mc_wbuf_str(&p->batch, id, id_len);
	return mc_persist_queued(p);
}

int mc_persist_set_meta(struct mc_persist *p, const char *name, int64_t value)
{
	int i;

	if (strlen(name) >= sizeof(p->meta[0].name))
		return -EINVAL;
	for (i = 0; i < p->nmeta; i++)
		if (!strcmp(p->meta[i].name, name))
			break;
	if (i == p->nmeta) {
		if (p->nmeta == MC_PERSIST_MAX_META)
			return -ENOSPC;
		snprintf(p->meta[i].name, sizeof(p->meta[i].name), "%s", name);
		p->nmeta++;
	} else if (p->meta[i].value == value && !p->meta[i].dirty) {
		return 0;
	}
	p->meta[i].value = value;
	p->meta[i].dirty = 1;
	p->pending++;
	return 0;
}

int64_t mc_persist_get_meta(struct mc_persist *p, const char *name)
{
	sqlite3_stmt *st = p->st[ST_GET_META];
	int64_t v = 0;
	int i;

	for (i = 0; i < p->nmeta; i++)
		if (!strcmp(p->meta[i].name, name) && p->meta[i].dirty)
			return p->meta[i].value;
	if (st == NULL)		/* no database yet */
		return 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return v;
}

/* Bind a length-prefixed string or blob of the batch to column col. */
static int mc_batch_bind(sqlite3_stmt *st, int col, struct mc_rbuf *r, int text)
{
	size_t n;
	const char *s = mc_rbuf_str(r, (size_t)INT32_MAX, &n);

	if (s == NULL)
		return -1;
	if (text)
		sqlite3_bind_text(st, col, s, (int)n, SQLITE_STATIC);
	else
		sqlite3_bind_blob(st, col, n ? s : "", (int)n, SQLITE_STATIC);
	return 0;
}

/* Run one change of the batch; r points at its kind byte. */
static int mc_persist_apply(struct mc_persist *p, struct mc_rbuf *r)
{
	enum mc_persist_stmt which;
	sqlite3_stmt *st;
	const uint8_t *b;
	uint8_t op = mc_rbuf_u8(r);

	switch (op) {
	case OP_PUT_SEGMENT:
		st = p->st[which = ST_PUT_SEGMENT];
		if ((b = mc_rbuf_bytes(r, 16)) != NULL)
			sqlite3_bind_blob(st, 1, b, 16, SQLITE_STATIC);
		if ((b = mc_rbuf_bytes(r, 16)) != NULL)
			sqlite3_bind_blob(st, 2, b, 16, SQLITE_STATIC);
		mc_batch_bind(st, 3, r, 1);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)mc_rbuf_u64(r));
		sqlite3_bind_int64(st, 5, (sqlite3_int64)mc_rbuf_u64(r));
		mc_batch_bind(st, 6, r, 1);
		mc_batch_bind(st, 7, r, 1);
		sqlite3_bind_int(st, 8, mc_rbuf_u8(r));
		if ((b = mc_rbuf_bytes(r, 16)) != NULL) {
			static const uint8_t zero[16];

			/* All zero: mounted without a token. */
			if (memcmp(b, zero, 16))
				sqlite3_bind_blob(st, 9, b, 16, SQLITE_STATIC);
			else
				sqlite3_bind_null(st, 9);
		}
		sqlite3_bind_int64(st, 10, (sqlite3_int64)mc_rbuf_u64(r));
		break;
	case OP_DEL_SEGMENT:
		st = p->st[which = ST_DEL_SEGMENT];
		if ((b = mc_rbuf_bytes(r, 16)) != NULL)
			sqlite3_bind_blob(st, 1, b, 16, SQLITE_STATIC);
		break;
	case OP_PUT_OBJECT:
		st = p->st[which = ST_PUT_OBJECT];
		mc_batch_bind(st, 1, r, 0);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)mc_rbuf_u64(r));
		sqlite3_bind_int64(st, 3, mc_rbuf_u32(r));
		sqlite3_bind_int64(st, 4, mc_rbuf_i64(r));
		sqlite3_bind_int64(st, 5, mc_rbuf_i64(r));
		if ((b = mc_rbuf_bytes(r, 16)) != NULL)
			sqlite3_bind_blob(st, 6, b, 16, SQLITE_STATIC);
		sqlite3_bind_int64(st, 8, (sqlite3_int64)mc_rbuf_u64(r));
		if (mc_rbuf_u8(r)) {
			sqlite3_bind_int64(st, 9, (sqlite3_int64)mc_rbuf_u64(r));
		} else {
			(void)mc_rbuf_u64(r);
			sqlite3_bind_null(st, 9);
		}
		mc_batch_bind(st, 7, r, 0);
		break;
	case OP_DEL_OBJECT:
		st = p->st[which = ST_DEL_OBJECT];
		mc_batch_bind(st, 1, r, 0);
		break;
	case OP_DEL_ALL_OBJECTS:
		which = ST_DEL_ALL_OBJECTS;
		break;
	case OP_PUT_RECORD:
	case OP_DEL_RECORD:
		which = op == OP_PUT_RECORD ? ST_PUT_RECORD : ST_DEL_RECORD;
		st = p->st[which];
		sqlite3_bind_int64(st, 1, mc_rbuf_u32(r));
		mc_batch_bind(st, 2, r, 0);
		if (which == ST_PUT_RECORD)
			mc_batch_bind(st, 3, r, 0);
		break;
	case OP_SET_META:
		st = p->st[which = ST_SET_META];
		mc_batch_bind(st, 1, r, 1);
		sqlite3_bind_int64(st, 2, mc_rbuf_i64(r));
		break;
	default:
		r->err = 1;
		which = ST_COUNT;
		break;
	}
	if (r->err) {
		/* Our own encoding: cannot happen unless memory is corrupt. */
		if (which != ST_COUNT) {
			sqlite3_reset(p->st[which]);
			sqlite3_clear_bindings(p->st[which]);
		}
		mc_log_err("persist %s: the pending batch is malformed", p->path);
		p->last_rc = SQLITE_INTERNAL;
		return MC_ERR_PERSISTENT_FAIL;
	}
	return mc_persist_step_done(p, which);
}

/* For a database opened for reading (or not at all): try to open it for writing again. */
static int mc_persist_reopen(struct mc_persist *p)
{
	int why;

	mc_persist_close_db(p);
	if (mc_persist_open_db(p, SQLITE_OPEN_CREATE, 0) == 0) {
		mc_log_debug("persist %s: reopened for writing", p->path);
		return 0;
	}
	/* Keep serving reads from the file. */
	why = p->last_rc;
	if (access(p->path, F_OK) == 0 && mc_persist_open_db(p, 0, 1) != 0)
		mc_log_err("persist %s: cannot reopen even for reading", p->path);
	p->readonly = 1;
	p->last_rc = why;
	return MC_ERR_PERSISTENT_FAIL;
}

static int mc_persist_commit_batch(struct mc_persist *p);

int mc_persist_commit(struct mc_persist *p)
{
	int rc;

	if (p->pending == 0)
		return 0;
	p->quiet = 1;
	rc = mc_persist_commit_batch(p);
	p->quiet = 0;
	return rc;
}

static int mc_persist_commit_batch(struct mc_persist *p)
{
	struct mc_rbuf r;
	int i, rc;

	if ((p->readonly || p->db == NULL) && mc_persist_reopen(p))
		return MC_ERR_PERSISTENT_FAIL;
	if (p->batch.err) {
		mc_persist_note(p, "pending batch", SQLITE_NOMEM, "out of memory");
		return MC_ERR_PERSISTENT_FAIL;
	}
	rc = mc_persist_step_done(p, ST_BEGIN);
	if (rc)
		goto rollback;
	mc_rbuf_init(&r, p->batch.data, p->batch.len);
	while (r.left > 0)
		if ((rc = mc_persist_apply(p, &r)) != 0)
			goto rollback;
	for (i = 0; i < p->nmeta; i++) {
		if (!p->meta[i].dirty)
			continue;
		sqlite3_bind_text(p->st[ST_SET_META], 1, p->meta[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(p->st[ST_SET_META], 2, p->meta[i].value);
		if ((rc = mc_persist_step_done(p, ST_SET_META)) != 0)
			goto rollback;
	}
	rc = mc_persist_step_done(p, ST_COMMIT);
	if (rc)
		goto rollback;
	for (i = 0; i < p->nmeta; i++)
		p->meta[i].dirty = 0;
	mc_wbuf_reset(&p->batch);
	p->nends = 0;
	p->pending = 0;
	p->last_rc = SQLITE_OK;
	p->last_msg[0] = '\0';
	return 0;

rollback:
	/* A failed statement or COMMIT may or may not have ended the transaction (SQLite rolls
	 * back on its own after some I/O errors); make sure it is gone, keep the batch. */
	if (p->db && !sqlite3_get_autocommit(p->db)) {
		int keep = p->last_rc;

		mc_persist_step_done(p, ST_ROLLBACK);
		p->last_rc = keep;
	}
	return MC_ERR_PERSISTENT_FAIL;
}

size_t mc_persist_pending(const struct mc_persist *p)
{
	return p->pending;
}

size_t mc_persist_pending_bytes(const struct mc_persist *p)
{
	return p->batch.len;
}

void mc_persist_drop_pending(struct mc_persist *p)
{
	int i;

	mc_wbuf_reset(&p->batch);
	p->batch.err = 0;
	p->nends = 0;
	p->pending = 0;
	for (i = 0; i < p->nmeta; i++)
		p->meta[i].dirty = 0;
}

int mc_persist_wipe(struct mc_persist *p)
{
	int rc;

	if ((p->readonly || p->db == NULL) && mc_persist_reopen(p))
		return MC_ERR_PERSISTENT_FAIL;
	mc_persist_drop_pending(p);
	p->nmeta = 0;
	rc = mc_persist_exec(p, "BEGIN IMMEDIATE");
	if (rc == 0)
		rc = mc_persist_exec(p, "DELETE FROM segments; DELETE FROM objects; "
					"DELETE FROM meta; DELETE FROM records; COMMIT");
	if (rc && p->db && !sqlite3_get_autocommit(p->db))
		mc_persist_exec(p, "ROLLBACK");
	return rc;
}

void mc_persist_encode_meta(struct mc_wbuf *w, const char *name, int64_t value)
{
	mc_wbuf_u8(w, OP_SET_META);
	mc_batch_str(w, name);
	mc_wbuf_i64(w, value);
}

/* The row a change writes: its key (an object's key, a segment's id) and a class (objects and
 * segments are different tables).  0 for changes that name no row (DEL_ALL_OBJECTS). */
static int mc_persist_row_of(const uint8_t *rec, size_t len, const uint8_t **key, size_t *klen)
{
	switch (rec[0]) {
	case OP_PUT_OBJECT:
	case OP_DEL_OBJECT:
		if (len < 5 || mc_get_le32(rec + 1) > len - 5)
			return 0;
		*key = rec + 5;
		*klen = mc_get_le32(rec + 1);
		return 1;
	case OP_PUT_SEGMENT:
	case OP_DEL_SEGMENT:
		if (len < 17)
			return 0;
		*key = rec + 1;
		*klen = 16;
		return 2;
	default:
		return 0;
	}
}

static uint64_t mc_persist_hash(int cls, const uint8_t *k, size_t n)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)cls;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ k[i]) * 1099511628211ull;
	return h;
}

/* Drop every change a later change of the pending batch to the same row overrides (a put's
 * PutStart row, written again by its PutEnd in the same batch): the batch writes the same
 * rows, in less.  DEL_ALL_OBJECTS stays where it is, so what precedes it still precedes it. */
static void mc_persist_coalesce(struct mc_persist *p)
{
	size_t nb = 16, i, j, w = 0, start = 0;
	size_t *slot;			/* index + 1 of the last change of the row hashed there */
	uint8_t *keep;

	while (nb < p->nends * 2)
		nb *= 2;
	slot = calloc(nb, sizeof(*slot));
	keep = malloc(p->nends ? p->nends : 1);
	if (slot == NULL || keep == NULL)
		goto out;
	for (i = 0; i < p->nends; i++) {
		const uint8_t *rec = p->batch.data + start, *k, *k2;
		size_t len = p->ends[i] - start, kl, kl2;
		int cls = mc_persist_row_of(rec, len, &k, &kl);

		keep[i] = 1;
		start = p->ends[i];
		if (cls == 0)
			continue;
		for (j = mc_persist_hash(cls, k, kl) & (nb - 1); slot[j]; j = (j + 1) & (nb - 1)) {
			size_t o = slot[j] - 1, os = o ? p->ends[o - 1] : 0;

			if (mc_persist_row_of(p->batch.data + os, p->ends[o] - os, &k2, &kl2) == cls &&
			    kl2 == kl && !memcmp(k, k2, kl)) {
				keep[o] = 0;
				break;
			}
		}
		slot[j] = i + 1;
	}
	for (i = 0, start = 0; i < p->nends; i++) {
		size_t len = p->ends[i] - start;

		if (keep[i]) {
			memmove(p->batch.data + w, p->batch.data + start, len);
			w += len;
		}
		start = p->ends[i];
	}
	/* The ends of the changes kept (each read before it is overwritten). */
	for (i = 0, j = 0, start = 0, w = 0; i < p->nends; i++) {
		size_t len = p->ends[i] - start;

		start = p->ends[i];
		if (keep[i]) {
			w += len;
			p->ends[j++] = w;
		}
	}
	p->pending -= p->nends - j;
	p->nends = j;
	p->batch.len = w;
out:
	free(slot);
	free(keep);
}

size_t mc_persist_take(struct mc_persist *p, struct mc_wbuf *out, size_t max, size_t max_changes)
{
	size_t n = 0, cut = 0, taken;
	int i;

	if (p->batch.err)
		return 0;
	mc_persist_coalesce(p);
	/* The longest run of whole changes within max bytes and max_changes (at least one). */
	while (n < p->nends && (n == 0 || (p->ends[n] <= max && n < max_changes)))
		n++;
	if (n)
		cut = p->ends[n - 1];
	mc_wbuf_put(out, p->batch.data, cut);
	taken = n;
	if (n == p->nends) {
		/* The meta values go with the last part: they are as of the end of the batch. */
		for (i = 0; i < p->nmeta; i++) {
			if (!p->meta[i].dirty)
				continue;
			mc_persist_encode_meta(out, p->meta[i].name, p->meta[i].value);
			p->meta[i].dirty = 0;
			taken++;
		}
		mc_wbuf_reset(&p->batch);
		p->nends = 0;
	} else {
		size_t k;

		memmove(p->batch.data, p->batch.data + cut, p->batch.len - cut);
		p->batch.len -= cut;
		for (k = n; k < p->nends; k++)
			p->ends[k - n] = p->ends[k] - cut;
		p->nends -= n;
	}
	p->pending = p->pending > taken ? p->pending - taken : 0;
	if (p->nends == 0) {
		int dirty = 0;

		for (i = 0; i < p->nmeta; i++)
			dirty += p->meta[i].dirty;
		p->pending = (size_t)dirty;
	}
	return taken;
}

/* Apply up to max changes from the n cursors r, in order, in one transaction.  0 or
 * MC_ERR_PERSISTENT_FAIL (rolled back). */
static int mc_persist_apply_txn(struct mc_persist *p, struct mc_rbuf *r, int n, size_t max)
{
	size_t k = 0;
	int i, rc;

	if ((p->readonly || p->db == NULL) && mc_persist_reopen(p))
		return MC_ERR_PERSISTENT_FAIL;
	p->quiet = 1;
	rc = mc_persist_step_done(p, ST_BEGIN);
	for (i = 0; rc == 0 && i < n; i++)
		while (rc == 0 && r[i].left > 0 && k++ < max)
			rc = mc_persist_apply(p, &r[i]);
	if (rc == 0)
		rc = mc_persist_step_done(p, ST_COMMIT);
	if (rc && p->db && !sqlite3_get_autocommit(p->db)) {
		int keep = p->last_rc;

		mc_persist_step_done(p, ST_ROLLBACK);
		p->last_rc = keep;
	}
	p->quiet = 0;
	if (rc == 0) {
		p->last_rc = SQLITE_OK;
		p->last_msg[0] = '\0';
	}
	return rc ? MC_ERR_PERSISTENT_FAIL : 0;
}

int mc_persist_apply_some(struct mc_persist *p, struct mc_rbuf *r, size_t max)
{
	return mc_persist_apply_txn(p, r, 1, max);
}

int mc_persist_apply_batches(struct mc_persist *p, const struct iovec *v, int n)
{
	struct mc_rbuf r[64];
	int i;

	if (n < 0 || n > 64)
		return -EINVAL;
	for (i = 0; i < n; i++)
		mc_rbuf_init(&r[i], v[i].iov_base, v[i].iov_len);
	return mc_persist_apply_txn(p, r, n, SIZE_MAX);
}

int mc_persist_checkpoint_due(const struct mc_persist *p)
{
	return p->ckpt_failed || p->wal_pages >= MC_PERSIST_CKPT_PAGES;
}

int mc_persist_checkpoint(struct mc_persist *p)
{
	int rc, logged = 0, done = 0;

	if (p->db == NULL || p->readonly)
		return MC_ERR_PERSISTENT_FAIL;
	rc = sqlite3_wal_checkpoint_v2(p->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &logged, &done);
	if (rc != SQLITE_OK) {
		p->ckpt_failed = 1;
		p->quiet = 1;
		mc_persist_fail(p, "checkpoint", sqlite3_extended_errcode(p->db));
		p->quiet = 0;
		return MC_ERR_PERSISTENT_FAIL;
	}
	p->ckpt_failed = 0;
	p->wal_pages = logged > done ? logged - done : 0;
	return 0;
}

int mc_persist_last_error(const struct mc_persist *p)
{
	return p->last_rc;
}

const char *mc_persist_last_message(const struct mc_persist *p)
{
	return p->last_rc == SQLITE_OK ? "" : p->last_msg;
}

static int mc_persist_blob16(sqlite3_stmt *st, int col, uint8_t out[16])
{
	if (sqlite3_column_bytes(st, col) != 16)
		return -1;
	memcpy(out, sqlite3_column_blob(st, col), 16);
	return 0;
}

static int mc_persist_load_segments(struct mc_persist *p, mc_persist_segment_fn fn, void *arg)
{
	sqlite3_stmt *st = p->st[ST_LOAD_SEGMENTS];
	int rc, ret = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct mc_persist_segment s;

		if (mc_persist_blob16(st, 0, s.id) || mc_persist_blob16(st, 1, s.client_id)) {
			mc_log_warn("persist %s: skipping a segment row with a malformed id", p->path);
			continue;
		}
		s.name = (const char *)sqlite3_column_text(st, 2);
		s.base = (uint64_t)sqlite3_column_int64(st, 3);
		s.size = (uint64_t)sqlite3_column_int64(st, 4);
		s.endpoint = (const char *)sqlite3_column_text(st, 5);
		s.protocol = (const char *)sqlite3_column_text(st, 6);
		s.kind = (uint8_t)sqlite3_column_int(st, 7);
		if (mc_persist_blob16(st, 8, s.token))
			memset(s.token, 0, 16);		/* NULL: mounted without a token */
		s.dormant_until_ms = sqlite3_column_int64(st, 9);
		if (s.name == NULL || s.endpoint == NULL || s.protocol == NULL)
			continue;
		ret = fn(arg, &s);
		if (ret)
			break;
	}
	if (ret == 0 && rc != SQLITE_DONE)
		ret = mc_persist_fail(p, "load segments", rc);
	sqlite3_reset(st);
	return ret;
}

static int mc_persist_load_objects(struct mc_persist *p, mc_persist_object_fn fn, void *arg)
{
	sqlite3_stmt *st = p->st[ST_LOAD_OBJECTS];
	struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
	int rc, ret = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct mc_persist_object o;
		struct mc_rbuf r;
		int nbytes = sqlite3_column_bytes(st, 6);
		uint32_t i, n;

		o.key = sqlite3_column_blob(st, 0);
		o.key_len = (size_t)sqlite3_column_bytes(st, 0);
		o.size = (uint64_t)sqlite3_column_int64(st, 1);
		o.flags = (uint32_t)sqlite3_column_int64(st, 2);
		o.put_start_ms = sqlite3_column_int64(st, 3);
		o.soft_pin_until_ms = sqlite3_column_int64(st, 4);
		o.gen = (uint64_t)sqlite3_column_int64(st, 7);
		o.has_checksum = sqlite3_column_type(st, 8) != SQLITE_NULL;
		o.checksum = o.has_checksum ? (uint64_t)sqlite3_column_int64(st, 8) : 0;
		n = (uint32_t)(nbytes / MC_PERSIST_REPLICA_BYTES);
		if (o.key == NULL || mc_persist_blob16(st, 5, o.writer) ||
		    nbytes % MC_PERSIST_REPLICA_BYTES || n > MC_PERSIST_MAX_REPLICAS) {
			mc_log_warn("persist %s: skipping a malformed object row", p->path);
			continue;
		}
		mc_rbuf_init(&r, sqlite3_column_blob(st, 6), (size_t)nbytes);
		for (i = 0; i < n; i++) {
			const uint8_t *seg;

			reps[i].id = mc_rbuf_u64(&r);
			reps[i].type = mc_rbuf_u8(&r);
			reps[i].status = mc_rbuf_u8(&r);
			seg = mc_rbuf_bytes(&r, 16);
			if (seg)
				memcpy(reps[i].segment_id, seg, 16);
			reps[i].offset = mc_rbuf_u64(&r);
			reps[i].len = mc_rbuf_u64(&r);
		}
		if (r.err)
			continue;
		o.n_replicas = n;
		o.replicas = reps;
		ret = fn(arg, &o);
		if (ret)
			break;
	}
	if (ret == 0 && rc != SQLITE_DONE)
		ret = mc_persist_fail(p, "load objects", rc);
	sqlite3_reset(st);
	return ret;
}

int mc_persist_load_records(struct mc_persist *p, uint32_t kind, mc_persist_record_fn fn,
			    void *arg)
{
	sqlite3_stmt *st = p->st[ST_LOAD_RECORDS];
	int rc, ret = 0;

	if (st == NULL)		/* no database yet: nothing to load */
		return 0;
	sqlite3_bind_int64(st, 1, kind);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ret = fn(arg, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0),
			 sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1));
		if (ret)
			break;
	}
	if (ret == 0 && rc != SQLITE_DONE)
		ret = mc_persist_fail(p, "load records", rc);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

int mc_persist_load(struct mc_persist *p, mc_persist_segment_fn on_segment,
		    mc_persist_object_fn on_object, void *arg)
{
	int ret;

	if (p->st[ST_LOAD_SEGMENTS] == NULL)	/* no database yet: nothing to load */
		return 0;
	ret = mc_persist_load_segments(p, on_segment, arg);
	if (ret)
		return ret;
	return mc_persist_load_objects(p, on_object, arg);
}

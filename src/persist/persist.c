/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SQLite persistence of the master's segments and object table (see persist.h): the connection
 * (open, schema and its upgrades, statements, reopening, checkpoints) and the mapping of SQLite's
 * errors.  The pending batch is persist_batch.c, writing it persist_write.c, reading the file
 * back persist_load.c.
 *
 * Invariants: this module alone owns the sqlite3 handle; every statement is prepared once at
 * open; changes are encoded into an in-memory batch and written, in order, in one transaction by
 * mc_persist_commit(), which on failure rolls the transaction back and keeps the batch for the
 * next try (SQLite may roll back by itself after an I/O error, so a transaction is never kept
 * open across a failure); every SQLite error is logged with the database path and mapped by
 * mc_persist_map_error().  Runs on the master's reactor thread only.
 *
 * Schema (PRAGMA user_version = 8; older files are upgraded in place: version 1 gets kind,
 * versions 1 and 2 get gen, versions 1 to 3 get token and dormant_until_ms, versions 1 to 4
 * get checksum, NULL in the rows they keep, versions 1 to 5 get an empty records table,
 * versions 1 to 6 an empty putlog table, versions 1 to 7 their objects keyed by generation
 * (mc_persist_upgrade_objects)):
 *   segments(id BLOB PK, client_id BLOB, name, base, size, endpoint, protocol, kind, token BLOB,
 *            dormant_until_ms)
 *            -- kind 0: memory segment; 1: a client's SSD area (base 0, size = capacity)
 *            -- token: 16 bytes the mounting process proves itself with (NULL: none)
 *            -- dormant_until_ms: wall-clock end of a dormant segment's time (0: mounted)
 *   objects(gen INTEGER PK, key BLOB, size, flags, put_start_ms, soft_pin_until_ms, writer BLOB,
 *           replicas BLOB, checksum, sgen)
 *            -- gen: the generation of the object's bytes, unique (the master gives every put
 *            -- its own, increasing): a new row goes to the right end of the table, so a
 *            -- commit of many puts writes a few pages whatever their keys.  No index on key:
 *            -- a row is changed and deleted by its generation (DEL_ROW); a key may have two
 *            -- rows (a ghost and its successor), the newer generation wins at load
 *            -- checksum: the object's CRC-64 as a signed 64-bit integer (NULL: none known)
 *            -- sgen: the generation when the row is keyed by its key's hash instead
 *            -- (MC_PERSIST_ROWKEY, gen < 0: an SSD copy adopted from before the database,
 *            -- whose generation other keys' copies may have too); NULL: gen
 *   meta(name TEXT PK, value INTEGER)
 *   records(kind INTEGER, id BLOB, value BLOB, PK(kind, id))  -- WITHOUT ROWID
 *            -- the master's other durable state, one kind per module (tasks, drain jobs,
 *            -- tenants), values in that module's own encoding
 *   putlog(id INTEGER PK, recs BLOB)
 *            -- fresh puts in flight, one row per commit that started some, in commit order
 *            -- (persist_putlog.c); an objects row of the same key is newer
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

const char *const mc_persist_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_PUT_SEGMENT] = "INSERT OR REPLACE INTO segments(id, client_id, name, base, size, "
			   "endpoint, protocol, kind, token, dormant_until_ms) VALUES (?1, ?2, ?3, "
			   "?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_DEL_SEGMENT] = "DELETE FROM segments WHERE id = ?1",
	[ST_PUT_OBJECT] = "INSERT OR REPLACE INTO objects(key, size, flags, put_start_ms, "
			  "soft_pin_until_ms, writer, replicas, gen, checksum, sgen) VALUES (?1, ?2, ?3, "
			  "?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_DEL_OBJECT] = "DELETE FROM objects WHERE gen = ?1 AND key = ?2",
	[ST_DEL_OBJECT_KEY] = "DELETE FROM objects WHERE key = ?1",
	[ST_DEL_ALL_OBJECTS] = "DELETE FROM objects",
	[ST_SET_META] = "INSERT OR REPLACE INTO meta(name, value) VALUES (?1, ?2)",
	[ST_GET_META] = "SELECT value FROM meta WHERE name = ?1",
	[ST_LOAD_SEGMENTS] = "SELECT id, client_id, name, base, size, endpoint, protocol, kind, "
			     "token, dormant_until_ms FROM segments",
	[ST_LOAD_OBJECTS] = "SELECT key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
			    "replicas, gen, checksum, sgen FROM objects ORDER BY gen",
	[ST_PUT_RECORD] = "INSERT OR REPLACE INTO records(kind, id, value) VALUES (?1, ?2, ?3)",
	[ST_DEL_RECORD] = "DELETE FROM records WHERE kind = ?1 AND id = ?2",
	[ST_LOAD_RECORDS] = "SELECT id, value FROM records WHERE kind = ?1",
	[ST_PUT_LOG] = "INSERT INTO putlog(id, recs) VALUES (?1, ?2)",
	[ST_DEL_LOG] = "DELETE FROM putlog WHERE id = ?1",
	[ST_CLEAR_LOG] = "DELETE FROM putlog WHERE id <= ?1",
	[ST_LOAD_LOG] = "SELECT id, recs FROM putlog ORDER BY id",
};

#define MC_PERSIST_OBJECTS_COLUMNS \
	"gen INTEGER PRIMARY KEY, key BLOB NOT NULL, size INTEGER NOT NULL, " \
	"flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL, " \
	"writer BLOB NOT NULL, replicas BLOB NOT NULL, checksum INTEGER, sgen INTEGER"

static const char mc_persist_schema_sql[] =
	"CREATE TABLE IF NOT EXISTS segments(id BLOB PRIMARY KEY, client_id BLOB NOT NULL, "
	"name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER NOT NULL, "
	"endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind INTEGER NOT NULL DEFAULT 0, "
	"token BLOB, dormant_until_ms INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS objects(" MC_PERSIST_OBJECTS_COLUMNS ");"
	"CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS records(kind INTEGER NOT NULL, id BLOB NOT NULL, "
	"value BLOB NOT NULL, PRIMARY KEY(kind, id)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS putlog(id INTEGER PRIMARY KEY, recs BLOB NOT NULL);";

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
void mc_persist_note(struct mc_persist *p, const char *what, int rc, const char *msg)
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
int mc_persist_fail(struct mc_persist *p, const char *what, int rc)
{
	mc_persist_note(p, what, rc,
			p->db && sqlite3_errcode(p->db) != SQLITE_OK ? sqlite3_errmsg(p->db)
								     : sqlite3_errstr(rc));
	return MC_ERR_PERSISTENT_FAIL;
}

int mc_persist_exec(struct mc_persist *p, const char *sql)
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
int mc_persist_step_done(struct mc_persist *p, enum mc_persist_stmt which)
{
	sqlite3_stmt *st = p->st[which];
	int rc = sqlite3_step(st);

	/* Every caller binds every parameter before each step: no need to clear them. */
	sqlite3_reset(st);
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

	mc_persist_ckpt_stop(p->ckpt);	/* before the last connection's close checkpoints */
	p->ckpt = NULL;
	p->ckpt_backfilled = 0;
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

/* One int64 result of sql (0 when NULL or no row).  0 or MC_ERR_PERSISTENT_FAIL. */
static int mc_persist_query_i64(struct mc_persist *p, const char *sql, int64_t *out)
{
	sqlite3_stmt *st;
	int rc;

	*out = 0;
	rc = sqlite3_prepare_v2(p->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return mc_persist_fail(p, sql, rc);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return mc_persist_fail(p, sql, rc);
	return 0;
}

#define MC_PERSIST_V7_COLUMNS \
	"key, size, flags, put_start_ms, soft_pin_until_ms, writer, replicas, checksum"

/* Schema 8: the objects rows of a version 1-7 file (keyed by key) move to a table keyed by
 * generation, in one transaction.  A nonzero generation that one row alone has is kept; the
 * other rows (0 in files from before generations, or a generation two rows share) get fresh
 * ones above every generation the file has seen (its rows' and its next_gen), so none of them
 * can be taken for bytes an SSD copy of an earlier generation holds; next_gen goes past them.
 * A placeholder row at that bound, deleted again, makes SQLite number them from there. */
static int mc_persist_upgrade_objects(struct mc_persist *p)
{
	char sql[2048];
	int64_t maxgen, next, base;

	if (mc_persist_exec(p, "BEGIN IMMEDIATE"))
		return MC_ERR_PERSISTENT_FAIL;
	if (mc_persist_query_i64(p, "SELECT max(gen) FROM objects", &maxgen) ||
	    mc_persist_query_i64(p, "SELECT value FROM meta WHERE name = 'next_gen'", &next))
		goto fail;
	base = maxgen > next - 1 ? maxgen : next - 1;
	if (base < 0)
		base = 0;
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE objects_v8(" MC_PERSIST_OBJECTS_COLUMNS ");"
		 "CREATE TEMP TABLE gen_once AS SELECT gen FROM objects WHERE gen > 0 "
		 "GROUP BY gen HAVING count(*) = 1;"
		 "INSERT INTO objects_v8(gen, " MC_PERSIST_V7_COLUMNS ") SELECT gen, "
		 MC_PERSIST_V7_COLUMNS " FROM objects WHERE gen IN (SELECT gen FROM gen_once);"
		 "INSERT OR IGNORE INTO objects_v8(gen, key, size, flags, put_start_ms, "
		 "soft_pin_until_ms, writer, replicas) VALUES (%lld, x'', 0, 0, 0, 0, x'', x'');"
		 "INSERT INTO objects_v8(gen, " MC_PERSIST_V7_COLUMNS ") SELECT NULL, "
		 MC_PERSIST_V7_COLUMNS " FROM objects WHERE gen NOT IN (SELECT gen FROM gen_once);"
		 "DELETE FROM objects_v8 WHERE gen = %lld AND length(key) = 0;"
		 "DROP TABLE gen_once;"
		 "DROP TABLE objects;"
		 "ALTER TABLE objects_v8 RENAME TO objects;"
		 "INSERT OR REPLACE INTO meta(name, value) SELECT 'next_gen', "
		 "max(coalesce(max(gen), 0) + 1, %lld) FROM objects;"
		 "PRAGMA user_version=8;",
		 (long long)base, (long long)base, (long long)(base + 1));
	if (mc_persist_exec(p, sql) || mc_persist_exec(p, "COMMIT"))
		goto fail;
	mc_log_notice("persist %s: objects table keyed by generation now (schema 8)", p->path);
	return 0;
fail:
	if (!sqlite3_get_autocommit(p->db))
		mc_persist_exec(p, "ROLLBACK");
	return MC_ERR_PERSISTENT_FAIL;
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
	if (version >= 1 && version < 8)
		return mc_persist_upgrade_objects(p);
	return mc_persist_exec(p, "PRAGMA user_version=8");
}

const char *mc_persist_sync_sql(int sync_mode)
{
	return sync_mode == MC_PERSIST_SYNC_FULL  ? "PRAGMA synchronous=FULL"
	       : sync_mode == MC_PERSIST_SYNC_OFF ? "PRAGMA synchronous=OFF"
						  : "PRAGMA synchronous=NORMAL";
}

/* Open p->path for writing (flags add SQLITE_OPEN_CREATE or not) or, with readonly, for reading,
 * set the connection up and prepare the statements.  On failure p->db is closed. */
static int mc_persist_open_db(struct mc_persist *p, int flags, int readonly)
{
	const char *sync_sql = mc_persist_sync_sql(p->sync_mode);
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
	if ((rc = mc_persist_log_start(p)) != 0)
		goto fail;
	/* Checkpoints are run by mc_persist_checkpoint(), where a failure is seen. */
	sqlite3_wal_hook(p->db, mc_persist_on_wal, p);
	p->readonly = readonly;
	/* Without the thread (an in-memory database, no thread to be had) the loop checkpoints. */
	if (!readonly && strcmp(p->path, ":memory:") != 0 && p->path[0] != '\0' &&
	    mc_persist_ckpt_start(p->path, p->sync_mode, &p->ckpt) != 0)
		mc_log_warn("persist %s: no checkpointer thread: checkpoints run on the loop",
			    p->path);
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
	mc_persist_pcache_install();
	mc_persist_walbuf_install();	/* under the test hook's VFS, which wraps the default */
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
	mc_wbuf_init(&p->logbuf);
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
		mc_wbuf_fini(&p->logbuf);
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
	mc_persist_keys_fini(p);	/* its last run written */
	mc_persist_close_db(p);
	mc_persist_log_fini(p);
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

/* For a database opened for reading (or not at all): try to open it for writing again. */
int mc_persist_reopen(struct mc_persist *p)
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

/* Pages of the log not yet copied into the database (as far as the checkpointer reported). */
static int mc_persist_wal_uncopied(struct mc_persist *p)
{
	if (p->wal_pages < p->ckpt_backfilled)	/* the log started over since */
		p->ckpt_backfilled = 0;
	return p->wal_pages - p->ckpt_backfilled;
}

int mc_persist_checkpoint_due(const struct mc_persist *p)
{
	int copied = p->wal_pages >= p->ckpt_backfilled ? p->ckpt_backfilled : 0;

	return p->ckpt_failed || p->wal_pages - copied >= MC_PERSIST_CKPT_PAGES ||
	       p->wal_pages >= MC_PERSIST_CKPT_SYNC_PAGES;
}

/* Whether a checkpoint's error rc only means the file was busy and the log is still small
 * enough to wait for the next try (MC_PERSIST_CKPT_BUSY_PAGES). */
static int mc_persist_ckpt_may_wait(const struct mc_persist *p, int rc, const char *msg)
{
	if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
		return 0;
	if (p->wal_pages >= MC_PERSIST_CKPT_BUSY_PAGES)
		return 0;
	mc_log_debug("persist %s: checkpoint found the file busy (%s), %d pages in the log: "
		     "tried again later", p->path, msg, p->wal_pages);
	return 1;
}

/* The result of the checkpointer's last run, if one is there: 0, or MC_ERR_PERSISTENT_FAIL
 * (the failure noted). */
static int mc_persist_checkpoint_collect(struct mc_persist *p)
{
	int rc, logged, done;
	char msg[160];

	if (!mc_persist_ckpt_collect(p->ckpt, &rc, &logged, &done, msg, sizeof(msg)))
		return 0;
	if (rc != SQLITE_OK && mc_persist_ckpt_may_wait(p, rc, msg))
		return 0;
	if (rc != SQLITE_OK) {
		p->ckpt_failed = 1;
		p->quiet = 1;
		mc_persist_note(p, "checkpoint", rc, msg);
		p->quiet = 0;
		return MC_ERR_PERSISTENT_FAIL;
	}
	p->ckpt_backfilled = done;
	return 0;
}

int mc_persist_checkpoint(struct mc_persist *p)
{
	int rc, logged = 0, done = 0;

	if (p->db == NULL || p->readonly)
		return MC_ERR_PERSISTENT_FAIL;
	if (p->ckpt && !p->ckpt_failed) {
		/* The thread copies and syncs; the loop only collects and asks again. */
		if (mc_persist_checkpoint_collect(p))
			return MC_ERR_PERSISTENT_FAIL;
		if (p->wal_pages < MC_PERSIST_CKPT_SYNC_PAGES) {
			if (mc_persist_wal_uncopied(p) >= MC_PERSIST_CKPT_PAGES)
				mc_persist_ckpt_kick(p->ckpt);
			return 0;
		}
	}
	/* Here the loop checkpoints itself: after a failure (until one succeeds), without the
	 * thread, or when the log must start over.  One checkpointer at a time: a run of the
	 * thread ends first (its result, stale by then, is dropped). */
	if (p->ckpt) {
		char stale[8];

		if (mc_persist_ckpt_busy(p->ckpt))
			return 0;
		mc_persist_ckpt_collect(p->ckpt, &rc, &logged, &done, stale, sizeof(stale));
		logged = done = 0;
	}
	rc = sqlite3_wal_checkpoint_v2(p->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &logged, &done);
	if (rc != SQLITE_OK &&
	    mc_persist_ckpt_may_wait(p, sqlite3_extended_errcode(p->db), sqlite3_errmsg(p->db)))
		return 0;
	if (rc != SQLITE_OK) {
		p->ckpt_failed = 1;
		p->quiet = 1;
		mc_persist_fail(p, "checkpoint", sqlite3_extended_errcode(p->db));
		p->quiet = 0;
		return MC_ERR_PERSISTENT_FAIL;
	}
	p->ckpt_failed = 0;
	p->ckpt_backfilled = 0;
	p->wal_pages = logged > done ? logged - done : 0;
	return 0;
}

#define MC_PERSIST_TRUNCATE_MAX (64ull << 20)

int mc_persist_wal_size(sqlite3 *db, uint64_t *size)
{
	/* SQLite's own names: a symbolic link to the database has its log beside the file. */
	const char *file = sqlite3_db_filename(db, "main");
	const char *wal = file && file[0] ? sqlite3_filename_wal(file) : NULL;
	struct stat st;

	*size = 0;
	if (wal == NULL || wal[0] == '\0')
		return -1;
	if (stat(wal, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	*size = (uint64_t)st.st_size;
	return 0;
}

int mc_persist_truncate_log(struct mc_persist *p)
{
	uint64_t size;
	int logged = -1, done = -1, rc;

	if (p->db == NULL || p->readonly || (p->ckpt && mc_persist_ckpt_busy(p->ckpt)))
		return -1;
	if (mc_persist_wal_size(p->db, &size) != 0)
		return -1;
	if (size == 0)
		return 0;
	if (size > MC_PERSIST_TRUNCATE_MAX) {
		mc_log_debug("persist %s: a log of %llu bytes is left to the checkpointer", p->path,
			     (unsigned long long)size);
		return -1;
	}
	/* The loop's connection has no busy handler: a reader of the log makes this fail now. */
	rc = sqlite3_wal_checkpoint_v2(p->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &logged, &done);
	if (rc != SQLITE_OK || logged != 0) {
		mc_log_debug("persist %s: the log was not emptied (%s, %d pages)", p->path,
			     sqlite3_errstr(rc), logged);
		return -1;
	}
	p->wal_pages = 0;
	p->ckpt_backfilled = 0;
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


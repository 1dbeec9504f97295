/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SQLite persistence of the master's segments and object table (see persist.h).
 *
 * Invariants: this module alone owns the sqlite3 handle; every statement is prepared once at
 * open; changes go into one transaction that is open between the first change and the next
 * mc_persist_commit(); every SQLite error is logged with the database path and mapped to
 * MC_ERR_PERSISTENT_FAIL.  Runs on the master's reactor thread only.
 *
 * Schema (PRAGMA user_version = 4; older files are upgraded in place: version 1 gets kind,
 * versions 1 and 2 get gen, versions 1 to 3 get token and dormant_until_ms):
 *   segments(id BLOB PK, client_id BLOB, name, base, size, endpoint, protocol, kind, token BLOB,
 *            dormant_until_ms)
 *            -- kind 0: memory segment; 1: a client's SSD area (base 0, size = capacity)
 *            -- token: 16 bytes the mounting process proves itself with (NULL: none)
 *            -- dormant_until_ms: wall-clock end of a dormant segment's time (0: mounted)
 *   objects(key BLOB PK, size, flags, put_start_ms, soft_pin_until_ms, writer BLOB,
 *           replicas BLOB, gen)                              -- WITHOUT ROWID
 *            -- gen: the generation of the object's bytes (0 in upgraded rows)
 *   meta(name TEXT PK, value INTEGER)
 * A replica is packed as u64 id, u8 type, u8 status, 16-byte segment id, u64 offset, u64 len;
 * a LOCAL_DISK replica names its SSD area and stores its disk address as offset, size as len.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "persist/persist.h"

#define MC_PERSIST_SCHEMA 4
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
	ST_COUNT,
};

static const char *const mc_persist_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_PUT_SEGMENT] = "INSERT OR REPLACE INTO segments(id, client_id, name, base, size, "
			   "endpoint, protocol, kind, token, dormant_until_ms) VALUES (?1, ?2, ?3, "
			   "?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_DEL_SEGMENT] = "DELETE FROM segments WHERE id = ?1",
	[ST_PUT_OBJECT] = "INSERT OR REPLACE INTO objects(key, size, flags, put_start_ms, "
			  "soft_pin_until_ms, writer, replicas, gen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
			  "?8)",
	[ST_DEL_OBJECT] = "DELETE FROM objects WHERE key = ?1",
	[ST_DEL_ALL_OBJECTS] = "DELETE FROM objects",
	[ST_SET_META] = "INSERT OR REPLACE INTO meta(name, value) VALUES (?1, ?2)",
	[ST_GET_META] = "SELECT value FROM meta WHERE name = ?1",
	[ST_LOAD_SEGMENTS] = "SELECT id, client_id, name, base, size, endpoint, protocol, kind, "
			     "token, dormant_until_ms FROM segments",
	[ST_LOAD_OBJECTS] = "SELECT key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
			    "replicas, gen FROM objects",
};

static const char mc_persist_schema_sql[] =
	"CREATE TABLE IF NOT EXISTS segments(id BLOB PRIMARY KEY, client_id BLOB NOT NULL, "
	"name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER NOT NULL, "
	"endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind INTEGER NOT NULL DEFAULT 0, "
	"token BLOB, dormant_until_ms INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, "
	"flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL, "
	"writer BLOB NOT NULL, replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0) "
	"WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);";

struct mc_persist {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *st[ST_COUNT];
	int in_txn;
	size_t pending;
	struct mc_wbuf scratch;
};

static int mc_persist_fail(struct mc_persist *p, const char *what)
{
	mc_log_err("persist %s: %s: %s", p->path, what, p->db ? sqlite3_errmsg(p->db) : "no db");
	return MC_ERR_PERSISTENT_FAIL;
}

static int mc_persist_exec(struct mc_persist *p, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(p->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		mc_log_err("persist %s: %s: %s", p->path, sql, msg ? msg : "?");
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
		return mc_persist_fail(p, mc_persist_sql[which]);
	return 0;
}

static int mc_persist_begin(struct mc_persist *p)
{
	int rc;

	if (p->in_txn)
		return 0;
	rc = mc_persist_step_done(p, ST_BEGIN);
	if (rc == 0)
		p->in_txn = 1;
	return rc;
}

int mc_persist_open(const char *path, int sync_mode, struct mc_persist **out)
{
	struct mc_persist *p;
	sqlite3_stmt *st;
	int i, version = 0;
	const char *sync_sql;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->path = strdup(path);
	if (p->path == NULL)
		goto fail_alloc;
	mc_wbuf_init(&p->scratch);
	if (sqlite3_open_v2(path, &p->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				  SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		mc_persist_fail(p, "open");
		goto fail_db;
	}
	sync_sql = sync_mode == MC_PERSIST_SYNC_FULL	? "PRAGMA synchronous=FULL"
		   : sync_mode == MC_PERSIST_SYNC_OFF ? "PRAGMA synchronous=OFF"
						      : "PRAGMA synchronous=NORMAL";
	if (mc_persist_exec(p, "PRAGMA journal_mode=WAL") || mc_persist_exec(p, sync_sql) ||
	    mc_persist_exec(p, "PRAGMA temp_store=MEMORY") ||
	    mc_persist_exec(p, "PRAGMA cache_size=-65536"))
		goto fail_db;
	if (sqlite3_prepare_v2(p->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) {
		mc_persist_fail(p, "user_version");
		goto fail_db;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version > MC_PERSIST_SCHEMA) {
		mc_log_err("persist %s: schema version %d is newer than this master (%d)", path,
			   version, MC_PERSIST_SCHEMA);
		goto fail_db;
	}
	if (version == 1 &&
	    mc_persist_exec(p, "ALTER TABLE segments ADD COLUMN kind INTEGER NOT NULL DEFAULT 0"))
		goto fail_db;
	if (mc_persist_exec(p, mc_persist_schema_sql))
		goto fail_db;
	if (version >= 1 && version < 3) {
		/* An objects table from before generations lacks gen. */
		if (sqlite3_prepare_v2(p->db, "SELECT gen FROM objects", -1, &st, NULL) ==
		    SQLITE_OK) {
			sqlite3_finalize(st);
		} else if (mc_persist_exec(p, "ALTER TABLE objects ADD COLUMN gen INTEGER NOT NULL "
					      "DEFAULT 0")) {
			goto fail_db;
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
			goto fail_db;
		}
	}
	if (mc_persist_exec(p, "PRAGMA user_version=4"))
		goto fail_db;
	for (i = 0; i < ST_COUNT; i++) {
		if (sqlite3_prepare_v3(p->db, mc_persist_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &p->st[i], NULL) != SQLITE_OK) {
			mc_persist_fail(p, mc_persist_sql[i]);
			goto fail_stmts;
		}
	}
	*out = p;
	return 0;

fail_stmts:
	for (i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(p->st[i]);
fail_db:
	sqlite3_close(p->db);
	mc_wbuf_fini(&p->scratch);
	free(p->path);
fail_alloc:
	free(p);
	return MC_ERR_PERSISTENT_FAIL;
}

void mc_persist_close(struct mc_persist *p)
{
	int i;

	if (p == NULL)
		return;
	if (p->in_txn)
		mc_persist_commit(p);
	for (i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(p->st[i]);
	sqlite3_close(p->db);
	mc_wbuf_fini(&p->scratch);
	free(p->path);
	free(p);
}

int mc_persist_put_segment(struct mc_persist *p, const struct mc_persist_segment *s)
{
	sqlite3_stmt *st = p->st[ST_PUT_SEGMENT];
	int rc = mc_persist_begin(p);

	if (rc)
		return rc;
	sqlite3_bind_blob(st, 1, s->id, 16, SQLITE_STATIC);
	sqlite3_bind_blob(st, 2, s->client_id, 16, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, s->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)s->base);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)s->size);
	sqlite3_bind_text(st, 6, s->endpoint, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, s->protocol, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 8, s->kind);
	{
		static const uint8_t zero[16];

		if (memcmp(s->token, zero, 16))
			sqlite3_bind_blob(st, 9, s->token, 16, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 9);
	}
	sqlite3_bind_int64(st, 10, s->dormant_until_ms);
	p->pending++;
	return mc_persist_step_done(p, ST_PUT_SEGMENT);
}

int mc_persist_del_segment(struct mc_persist *p, const uint8_t id[16])
{
	int rc = mc_persist_begin(p);

	if (rc)
		return rc;
	sqlite3_bind_blob(p->st[ST_DEL_SEGMENT], 1, id, 16, SQLITE_STATIC);
	p->pending++;
	return mc_persist_step_done(p, ST_DEL_SEGMENT);
}

int mc_persist_put_object(struct mc_persist *p, const struct mc_persist_object *o)
{
	sqlite3_stmt *st = p->st[ST_PUT_OBJECT];
	struct mc_wbuf *w = &p->scratch;
	uint32_t i;
	int rc = mc_persist_begin(p);

	if (rc)
		return rc;
	mc_wbuf_reset(w);
	for (i = 0; i < o->n_replicas; i++) {
		const struct mc_persist_replica *r = &o->replicas[i];

		mc_wbuf_u64(w, r->id);
		mc_wbuf_u8(w, r->type);
		mc_wbuf_u8(w, r->status);
		mc_wbuf_put(w, r->segment_id, 16);
		mc_wbuf_u64(w, r->offset);
		mc_wbuf_u64(w, r->len);
	}
	if (w->err)
		return -ENOMEM;
	sqlite3_bind_blob(st, 1, o->key, (int)o->key_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)o->size);
	sqlite3_bind_int64(st, 3, o->flags);
	sqlite3_bind_int64(st, 4, o->put_start_ms);
	sqlite3_bind_int64(st, 5, o->soft_pin_until_ms);
	sqlite3_bind_blob(st, 6, o->writer, 16, SQLITE_STATIC);
	sqlite3_bind_blob(st, 7, w->len ? (const void *)w->data : "", (int)w->len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)o->gen);
	p->pending++;
	return mc_persist_step_done(p, ST_PUT_OBJECT);
}

int mc_persist_del_object(struct mc_persist *p, const char *key, size_t key_len)
{
	int rc = mc_persist_begin(p);

	if (rc)
		return rc;
	sqlite3_bind_blob(p->st[ST_DEL_OBJECT], 1, key, (int)key_len, SQLITE_STATIC);
	p->pending++;
	return mc_persist_step_done(p, ST_DEL_OBJECT);
}

int mc_persist_del_all_objects(struct mc_persist *p)
{
	int rc = mc_persist_begin(p);

	if (rc)
		return rc;
	p->pending++;
	return mc_persist_step_done(p, ST_DEL_ALL_OBJECTS);
}

int mc_persist_set_meta(struct mc_persist *p, const char *name, int64_t value)
{
	int rc = mc_persist_begin(p);

	if (rc)
		return rc;
	sqlite3_bind_text(p->st[ST_SET_META], 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(p->st[ST_SET_META], 2, value);
	p->pending++;
	return mc_persist_step_done(p, ST_SET_META);
}

int64_t mc_persist_get_meta(struct mc_persist *p, const char *name)
{
	sqlite3_stmt *st = p->st[ST_GET_META];
	int64_t v = 0;

	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return v;
}

int mc_persist_commit(struct mc_persist *p)
{
	int rc;

	if (!p->in_txn)
		return 0;
	p->in_txn = 0;
	p->pending = 0;
	rc = mc_persist_step_done(p, ST_COMMIT);
	if (rc) {
		/* A failed COMMIT may leave the transaction open; make sure it is gone. */
		if (!sqlite3_get_autocommit(p->db))
			mc_persist_step_done(p, ST_ROLLBACK);
	}
	return rc;
}

size_t mc_persist_pending(const struct mc_persist *p)
{
	return p->pending;
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
		ret = mc_persist_fail(p, "load segments");
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
		ret = mc_persist_fail(p, "load objects");
	sqlite3_reset(st);
	return ret;
}

int mc_persist_load(struct mc_persist *p, mc_persist_segment_fn on_segment,
		    mc_persist_object_fn on_object, void *arg)
{
	int ret;

	if (p->in_txn && (ret = mc_persist_commit(p)) != 0)
		return ret;
	ret = mc_persist_load_segments(p, on_segment, arg);
	if (ret)
		return ret;
	return mc_persist_load_objects(p, on_object, arg);
}

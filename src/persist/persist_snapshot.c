/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a database for a snapshot (see persist.h): a read-only connection of its own holding
 * one read transaction, so that in WAL mode it sees the file as of its first read while the
 * master's own connection goes on writing; the rows come out encoded as changes (persist_int.h),
 * so a snapshot is restored like any batch.  Used by the snapshot thread of the master's HA
 * (src/master/ha_snapshot.c); one thread at a time per reader.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

struct mc_persist_reader {
	sqlite3 *db;
	sqlite3_stmt *objects;		/* the object rows, in generation order, stepped across calls */
	int done;
};

static int mc_reader_fail(struct mc_persist_reader *r, const char *what)
{
	mc_log_err("snapshot read: %s: %s", what, sqlite3_errmsg(r->db));
	return MC_ERR_PERSISTENT_FAIL;
}

int mc_persist_reader_open(const char *path, struct mc_persist_reader **out)
{
	struct mc_persist_reader *r;

	*out = NULL;
	if (path == NULL || path[0] == '\0' || !strcmp(path, ":memory:"))
		return MC_ERR_PERSISTENT_FAIL;
	mc_persist_pcache_install();
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK) {
		mc_log_err("snapshot read: cannot open %s: %s", path,
			   r->db ? sqlite3_errmsg(r->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(r->db, 2000);
	if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		mc_reader_fail(r, "begin");
		goto fail;
	}
	if (sqlite3_prepare_v2(r->db, "SELECT key, size, flags, put_start_ms, soft_pin_until_ms, "
				      "writer, replicas, gen, checksum, sgen FROM objects ORDER BY gen",
			       -1, &r->objects, NULL) != SQLITE_OK) {
		mc_reader_fail(r, "objects");
		goto fail;
	}
	*out = r;
	return 0;
fail:
	mc_persist_reader_close(r);
	return MC_ERR_PERSISTENT_FAIL;
}

void mc_persist_reader_close(struct mc_persist_reader *r)
{
	if (r == NULL)
		return;
	sqlite3_finalize(r->objects);
	if (r->db && !sqlite3_get_autocommit(r->db))
		sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(r->db);
	free(r);
}

int64_t mc_persist_reader_meta(struct mc_persist_reader *r, const char *name)
{
	sqlite3_stmt *st;
	int64_t v = 0;

	if (sqlite3_prepare_v2(r->db, "SELECT value FROM meta WHERE name = ?1", -1, &st, NULL) !=
	    SQLITE_OK)
		return 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Column col as 16 bytes (zeros when NULL or of another length). */
static void mc_reader_blob16(struct mc_wbuf *w, sqlite3_stmt *st, int col)
{
	static const uint8_t zero[16];

	if (sqlite3_column_bytes(st, col) == 16)
		mc_wbuf_put(w, sqlite3_column_blob(st, col), 16);
	else
		mc_wbuf_put(w, zero, 16);
}

static void mc_reader_text(struct mc_wbuf *w, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	mc_wbuf_str(w, t ? (const char *)t : "", t ? (size_t)sqlite3_column_bytes(st, col) : 0);
}

int mc_persist_reader_segments(struct mc_persist_reader *r, struct mc_wbuf *w, uint64_t *n)
{
	sqlite3_stmt *st;
	int rc;

	*n = 0;
	if (sqlite3_prepare_v2(r->db, "SELECT id, client_id, name, base, size, endpoint, protocol, "
				      "kind, token, dormant_until_ms FROM segments", -1, &st,
			       NULL) != SQLITE_OK)
		return mc_reader_fail(r, "segments");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		mc_wbuf_u8(w, OP_PUT_SEGMENT);
		mc_reader_blob16(w, st, 0);
		mc_reader_blob16(w, st, 1);
		mc_reader_text(w, st, 2);
		mc_wbuf_u64(w, (uint64_t)sqlite3_column_int64(st, 3));
		mc_wbuf_u64(w, (uint64_t)sqlite3_column_int64(st, 4));
		mc_reader_text(w, st, 5);
		mc_reader_text(w, st, 6);
		mc_wbuf_u8(w, (uint8_t)sqlite3_column_int(st, 7));
		mc_reader_blob16(w, st, 8);
		mc_wbuf_u64(w, (uint64_t)sqlite3_column_int64(st, 9));
		(*n)++;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return mc_reader_fail(r, "segments");
	return w->err ? -ENOMEM : 0;
}

int mc_persist_reader_objects(struct mc_persist_reader *r, struct mc_wbuf *w, uint64_t max,
			      uint64_t *n)
{
	sqlite3_stmt *st = r->objects;
	int rc = SQLITE_ROW;

	*n = 0;
	while (!r->done && *n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const void *key = sqlite3_column_blob(st, 0);
		const void *reps = sqlite3_column_blob(st, 6);

		mc_wbuf_u8(w, OP_PUT_OBJECT);
		mc_wbuf_str(w, key ? key : "", (size_t)sqlite3_column_bytes(st, 0));
		mc_wbuf_u64(w, (uint64_t)sqlite3_column_int64(st, 1));
		mc_wbuf_u32(w, (uint32_t)sqlite3_column_int64(st, 2));
		mc_wbuf_i64(w, sqlite3_column_int64(st, 3));
		mc_wbuf_i64(w, sqlite3_column_int64(st, 4));
		mc_reader_blob16(w, st, 5);
		mc_wbuf_u64(w, (uint64_t)sqlite3_column_int64(st, sqlite3_column_type(st, 9) ==
								   SQLITE_NULL ? 7 : 9));
		mc_wbuf_u8(w, sqlite3_column_type(st, 8) != SQLITE_NULL);
		mc_wbuf_u64(w, (uint64_t)sqlite3_column_int64(st, 8));
		mc_wbuf_str(w, reps ? reps : "", (size_t)sqlite3_column_bytes(st, 6));
		(*n)++;
	}
	if (rc == SQLITE_DONE)
		r->done = 1;
	else if (rc != SQLITE_ROW)
		return mc_reader_fail(r, "objects");
	return w->err ? -ENOMEM : 0;
}

int mc_persist_reader_metas(struct mc_persist_reader *r, struct mc_wbuf *w)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(r->db, "SELECT name, value FROM meta", -1, &st, NULL) != SQLITE_OK)
		return mc_reader_fail(r, "meta");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		mc_wbuf_u8(w, OP_SET_META);
		mc_reader_text(w, st, 0);
		mc_wbuf_i64(w, sqlite3_column_int64(st, 1));
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return mc_reader_fail(r, "meta");
	if (sqlite3_prepare_v2(r->db, "SELECT kind, id, value FROM records", -1, &st, NULL) !=
	    SQLITE_OK)
		return mc_reader_fail(r, "records");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const void *id = sqlite3_column_blob(st, 1), *v = sqlite3_column_blob(st, 2);

		mc_wbuf_u8(w, OP_PUT_RECORD);
		mc_wbuf_u32(w, (uint32_t)sqlite3_column_int64(st, 0));
		mc_wbuf_str(w, id ? id : "", (size_t)sqlite3_column_bytes(st, 1));
		mc_wbuf_str(w, v ? v : "", (size_t)sqlite3_column_bytes(st, 2));
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return mc_reader_fail(r, "records");
	return w->err ? -ENOMEM : 0;
}

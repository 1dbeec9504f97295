/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading the SQLite file back at start-up (see persist.h): segments, then objects (replicas
 * unpacked from their blob), records by kind, meta values.  Rows that do not parse are skipped
 * with a log line; the load goes on.  The master's reactor thread, before it serves.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/log.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

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

int mc_persist_decode_replicas(const uint8_t *b, size_t len, struct mc_persist_replica *reps,
			       uint32_t *n)
{
	struct mc_rbuf r;
	uint32_t i, count = (uint32_t)(len / MC_PERSIST_REPLICA_BYTES);

	if (len % MC_PERSIST_REPLICA_BYTES || count > MC_PERSIST_MAX_REPLICAS)
		return -1;
	mc_rbuf_init(&r, b, len);
	for (i = 0; i < count; i++) {
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
		return -1;
	*n = count;
	return 0;
}

int mc_persist_decode_object(sqlite3_stmt *st, struct mc_persist_object *o,
			     struct mc_persist_replica *reps)
{
	int nbytes = sqlite3_column_bytes(st, 6);

	o->key = sqlite3_column_blob(st, 0);
	o->key_len = (size_t)sqlite3_column_bytes(st, 0);
	o->size = (uint64_t)sqlite3_column_int64(st, 1);
	o->flags = (uint32_t)sqlite3_column_int64(st, 2);
	o->put_start_ms = sqlite3_column_int64(st, 3);
	o->soft_pin_until_ms = sqlite3_column_int64(st, 4);
	o->row = (uint64_t)sqlite3_column_int64(st, 7);
	o->gen = sqlite3_column_type(st, 9) == SQLITE_NULL ? o->row
							  : (uint64_t)sqlite3_column_int64(st, 9);
	o->has_checksum = sqlite3_column_type(st, 8) != SQLITE_NULL;
	o->checksum = o->has_checksum ? (uint64_t)sqlite3_column_int64(st, 8) : 0;
	if (o->key == NULL || mc_persist_blob16(st, 5, o->writer) ||
	    mc_persist_decode_replicas(sqlite3_column_blob(st, 6), (size_t)nbytes, reps,
				       &o->n_replicas))
		return -1;
	o->replicas = reps;
	return 0;
}

/* Every row in generation order, but those a newer row of the same key overrides: their
 * deletion goes into the pending batch instead. */
static int mc_persist_load_objects(struct mc_persist *p, mc_persist_object_fn fn, void *arg)
{
	sqlite3_stmt *st = p->st[ST_LOAD_OBJECTS];
	struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
	uint64_t *older;
	size_t nolder, k = 0;
	int rc, ret;

	ret = mc_persist_older_rows(p, &older, &nolder);
	if (ret)
		return ret;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct mc_persist_object o;

		if (mc_persist_decode_object(st, &o, reps)) {
			mc_log_warn("persist %s: skipping a malformed object row", p->path);
			continue;
		}
		while (k < nolder && (int64_t)older[k] < (int64_t)o.row)
			k++;
		if (k < nolder && older[k] == o.row) {
			mc_log_info("persist %s: the row of generation %llu has a newer one of its "
				    "key: deleting it", p->path, (unsigned long long)o.gen);
			(void)mc_persist_del_object(p, o.key, o.key_len, o.row);
			continue;
		}
		ret = fn(arg, &o);
		if (ret)
			break;
	}
	if (ret == 0 && rc != SQLITE_DONE)
		ret = mc_persist_fail(p, "load objects", rc);
	sqlite3_reset(st);
	free(older);
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
	ret = on_segment ? mc_persist_load_segments(p, on_segment, arg) : 0;
	if (ret || on_object == NULL)
		return ret;
	return mc_persist_load_objects(p, on_object, arg);
}
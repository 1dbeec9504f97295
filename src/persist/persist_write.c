/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writing changes to the SQLite file (see persist.h): each change of an encoded batch is bound to
 * its prepared statement and stepped, all of a batch in one transaction (mc_persist_commit for
 * the pending batch; mc_persist_apply_batches and mc_persist_apply_some for batches from
 * replication and snapshots), rolled back whole on any failure so the file always holds the
 * state as of a successful commit.  The master's reactor thread (or HA's, which owns the handle
 * there).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

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
	case OP_PUT_OBJECT: {
		size_t kl;
		const char *key = mc_rbuf_str(r, (size_t)INT32_MAX, &kl);
		uint64_t gen, row;
		uint32_t flags;

		st = p->st[which = ST_PUT_OBJECT];
		if (key != NULL)
			sqlite3_bind_blob(st, 1, kl ? key : "", (int)kl, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)mc_rbuf_u64(r));
		flags = mc_rbuf_u32(r);
		sqlite3_bind_int64(st, 3, flags);
		sqlite3_bind_int64(st, 4, mc_rbuf_i64(r));
		sqlite3_bind_int64(st, 5, mc_rbuf_i64(r));
		if ((b = mc_rbuf_bytes(r, 16)) != NULL)
			sqlite3_bind_blob(st, 6, b, 16, SQLITE_STATIC);
		gen = mc_rbuf_u64(r);
		row = mc_persist_row(key ? key : "", key ? kl : 0, gen,
				     (flags & MC_PERSIST_ROWKEY) != 0);
		sqlite3_bind_int64(st, 8, (sqlite3_int64)row);
		if (row != gen)
			sqlite3_bind_int64(st, 10, (sqlite3_int64)gen);
		else
			sqlite3_bind_null(st, 10);
		if (key != NULL && p->feeding)
			mc_persist_keys_note(p, key, kl, row);
		if (mc_rbuf_u8(r)) {
			sqlite3_bind_int64(st, 9, (sqlite3_int64)mc_rbuf_u64(r));
		} else {
			(void)mc_rbuf_u64(r);
			sqlite3_bind_null(st, 9);
		}
		mc_batch_bind(st, 7, r, 0);
		break;
	}
	case OP_DEL_ROW:
		p->nfeed_del += p->feeding;
		st = p->st[which = ST_DEL_OBJECT];
		sqlite3_bind_int64(st, 1, (sqlite3_int64)mc_rbuf_u64(r));
		mc_batch_bind(st, 2, r, 0);
		break;
	case OP_DEL_OBJECT:
		/* From a master before schema 8 (its HA log or snapshot): by key, a scan. */
		st = p->st[which = ST_DEL_OBJECT_KEY];
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

/* In the open transaction: the file's key index is no longer its (keys_id 0). */
int mc_persist_keys_clear(struct mc_persist *p)
{
	sqlite3_bind_text(p->st[ST_SET_META], 1, "keys_id", -1, SQLITE_STATIC);
	sqlite3_bind_int64(p->st[ST_SET_META], 2, 0);
	return mc_persist_step_done(p, ST_SET_META);
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
	p->feeding = p->keys != NULL;	/* the written rows' keys go to the key index */
	p->nfeed = p->nfeed_del = 0;
	mc_rbuf_init(&r, p->batch.data, p->batch.len);
	while (r.left > 0)
		if ((rc = mc_persist_apply(p, &r)) != 0)
			goto rollback;
	if ((rc = mc_persist_log_write(p)) != 0)
		goto rollback;
	if (p->keys == NULL && !p->keys_cleared && (rc = mc_persist_keys_clear(p)) != 0)
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
	mc_persist_log_committed(p);
	p->keys_cleared = 1;
	mc_persist_keys_committed(p);
	mc_wbuf_reset(&p->batch);
	p->nends = 0;
	p->pending = 0;
	p->last_rc = SQLITE_OK;
	p->last_msg[0] = '\0';
	return 0;

rollback:
	p->feeding = 0;
	p->nfeed = 0;
	/* A failed statement or COMMIT may or may not have ended the transaction (SQLite rolls
	 * back on its own after some I/O errors); make sure it is gone, keep the batch. */
	if (p->db && !sqlite3_get_autocommit(p->db)) {
		int keep = p->last_rc;

		mc_persist_step_done(p, ST_ROLLBACK);
		p->last_rc = keep;
	}
	return MC_ERR_PERSISTENT_FAIL;
}

int mc_persist_wipe(struct mc_persist *p)
{
	int rc;

	if ((p->readonly || p->db == NULL) && mc_persist_reopen(p))
		return MC_ERR_PERSISTENT_FAIL;
	mc_persist_drop_pending(p);
	mc_persist_log_reset(p);
	p->nmeta = 0;
	rc = mc_persist_exec(p, "BEGIN IMMEDIATE");
	if (rc == 0)
		rc = mc_persist_exec(p, "DELETE FROM segments; DELETE FROM objects; "
					"DELETE FROM meta; DELETE FROM records; DELETE FROM putlog; "
					"COMMIT");
	if (rc && p->db && !sqlite3_get_autocommit(p->db))
		mc_persist_exec(p, "ROLLBACK");
	return rc;
}

static int mc_persist_apply_txn(struct mc_persist *p, struct mc_rbuf *r, int n, size_t max)
{
	size_t k = 0;
	int i, rc;

	if ((p->readonly || p->db == NULL) && mc_persist_reopen(p))
		return MC_ERR_PERSISTENT_FAIL;
	p->quiet = 1;
	rc = mc_persist_step_done(p, ST_BEGIN);
	/* Rows written here are not the key index's: the file's index goes. */
	if (rc == 0)
		rc = mc_persist_keys_clear(p);
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
		p->keys_cleared = 1;
		mc_persist_keys_fini(p);
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The put log of the master's SQLite persistence (see persist.h): what a fresh put holds while
 * it is in flight (its key, generation, start and memory ranges), recorded in an append-ordered
 * table instead of the objects table, so that a put dirties one random leaf of the objects
 * table (its PutEnd's row) and not two.
 *
 * Every commit that carries started puts appends one row putlog(id, recs): id increasing, recs
 * the records of that commit, packed.  The rows written since the start are also held in memory
 * (a ring in id order, each row with its records and the count of its puts still in flight);
 * a put leaves the log when the master records its end (mc_persist_log_done: the row's count
 * drops; at zero the row is deleted with the next commit).  A row whose puts are not all done
 * after age_ms is retired: the master records the puts still in flight in the objects table
 * (mc_persist_log_retire's callback) and the row goes, in the same commit.  So the table holds
 * the rows of puts in flight, nothing older than about age_ms but what is not committed yet.
 *
 * After a crash every row read back (mc_persist_load_log) names ranges a writer may still be
 * writing: the master keeps them out of use.  Rows are deleted by the commit after
 * mc_persist_log_clear, once the master holds those ranges otherwise.
 *
 * Record: str key, u64 gen, i64 put_start_ms (wall clock), u32 n, then n times segment_id[16],
 * u64 offset, u64 len (the memory replicas).  Single-threaded: the master's reactor thread.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "persist/persist_int.h"
#include "proto/rpc.h"

static int64_t mc_putlog_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mc_persist_log_object(struct mc_persist *p, const struct mc_persist_object *o)
{
	struct mc_wbuf *w = &p->logbuf;
	size_t at = w->len, nat;
	uint32_t i, n = 0;

	if (w->err)
		return -ENOMEM;
	mc_wbuf_str(w, o->key, o->key_len);
	mc_wbuf_u64(w, o->gen);
	mc_wbuf_i64(w, o->put_start_ms);
	nat = w->len;
	mc_wbuf_u32(w, 0);
	for (i = 0; i < o->n_replicas; i++) {
		const struct mc_persist_replica *r = &o->replicas[i];

		if (r->type != MC_REPLICA_MEMORY)
			continue;
		mc_wbuf_put(w, r->segment_id, 16);
		mc_wbuf_u64(w, r->offset);
		mc_wbuf_u64(w, r->len);
		n++;
	}
	if (w->err) {
		w->len = at;
		return -ENOMEM;
	}
	mc_wbuf_patch_u32(w, nat, n);
	if (p->log_n == 0 || o->gen < p->log_tmin)
		p->log_tmin = o->gen;
	if (p->log_n == 0 || o->gen > p->log_tmax)
		p->log_tmax = o->gen;
	p->log_n++;
	p->pending++;
	return 0;
}

/* Decode the record at r into *o (one PROCESSING memory replica per range in reps, at most
 * MC_PERSIST_MAX_REPLICAS).  0, or -1 when malformed. */
static int mc_putlog_decode(struct mc_rbuf *r, struct mc_persist_object *o,
			    struct mc_persist_replica *reps)
{
	uint32_t i, n;

	memset(o, 0, sizeof(*o));
	o->key = mc_rbuf_str(r, 1u << 20, &o->key_len);
	o->gen = mc_rbuf_u64(r);
	o->put_start_ms = mc_rbuf_i64(r);
	n = mc_rbuf_u32(r);
	if (r->err || o->key == NULL || n > MC_PERSIST_MAX_REPLICAS)
		return -1;
	for (i = 0; i < n; i++) {
		const uint8_t *id = mc_rbuf_bytes(r, 16);

		memset(&reps[i], 0, sizeof(reps[i]));
		if (id)
			memcpy(reps[i].segment_id, id, 16);
		reps[i].type = MC_REPLICA_MEMORY;
		reps[i].status = MC_REPLICA_PROCESSING;
		reps[i].offset = mc_rbuf_u64(r);
		reps[i].len = mc_rbuf_u64(r);
	}
	o->n_replicas = n;
	o->replicas = reps;
	return r->err ? -1 : 0;
}

/* Queue the deletion of row id with the next commit. */
static int mc_putlog_delete(struct mc_persist *p, int64_t id)
{
	if (p->nlog_del == p->caplog_del) {
		size_t cap = p->caplog_del ? p->caplog_del * 2 : 64;
		int64_t *d = realloc(p->log_del, cap * sizeof(*d));

		if (d == NULL)
			return -ENOMEM;
		p->log_del = d;
		p->caplog_del = cap;
	}
	p->log_del[p->nlog_del++] = id;
	p->pending++;
	return 0;
}

static struct mc_persist_logrow *mc_putlog_row(struct mc_persist *p, size_t i)
{
	return &p->logrows[(p->log_head + i) & (p->log_cap - 1)];
}

/* A row whose puts are all done (or moved): its records go now, its row with the next commit.
 * Rows stay in the ring until they reach its head. */
static void mc_putlog_kill(struct mc_persist *p, struct mc_persist_logrow *row)
{
	free(row->recs);
	row->recs = NULL;
	row->live = 0;
	if (mc_putlog_delete(p, row->id) != 0)
		/* Out of memory: the row stays in the file; a restart keeps its ranges a while. */
		mc_log_warn("persist %s: put log row %lld not deleted (out of memory)", p->path,
			    (long long)row->id);
	while (p->log_count && mc_putlog_row(p, 0)->recs == NULL) {
		p->log_head = (p->log_head + 1) & (p->log_cap - 1);
		p->log_count--;
	}
}

void mc_persist_log_done(struct mc_persist *p, uint64_t gen)
{
	size_t lo = 0, hi = p->log_count;

	if (p->log_n && gen >= p->log_tmin && gen <= p->log_tmax) {
		p->log_gone++;	/* in the rows not committed yet */
		return;
	}
	while (lo < hi) {	/* the first row whose tmax >= gen */
		size_t mid = lo + (hi - lo) / 2;

		if (mc_putlog_row(p, mid)->tmax < gen)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->log_count) {
		struct mc_persist_logrow *row = mc_putlog_row(p, lo);

		if (row->tmin <= gen && row->recs != NULL && row->live > 0 && --row->live == 0)
			mc_putlog_kill(p, row);
	}
}

int mc_persist_log_write(struct mc_persist *p)
{
	sqlite3_stmt *st;
	size_t i;
	int rc;

	for (i = 0; i < p->nlog_del; i++) {
		st = p->st[ST_DEL_LOG];
		sqlite3_bind_int64(st, 1, p->log_del[i]);
		if ((rc = mc_persist_step_done(p, ST_DEL_LOG)) != 0)
			return rc;
	}
	if (p->log_clear_upto > 0) {
		st = p->st[ST_CLEAR_LOG];
		sqlite3_bind_int64(st, 1, p->log_clear_upto);
		if ((rc = mc_persist_step_done(p, ST_CLEAR_LOG)) != 0)
			return rc;
	}
	if (p->log_n == 0 || p->log_gone >= p->log_n)
		return 0;	/* nothing, or every put of it done already */
	if (p->logbuf.err) {
		mc_persist_note(p, "put log", SQLITE_NOMEM, "out of memory");
		return MC_ERR_PERSISTENT_FAIL;
	}
	st = p->st[ST_PUT_LOG];
	sqlite3_bind_int64(st, 1, p->log_next_id);
	sqlite3_bind_blob(st, 2, p->logbuf.data, (int)p->logbuf.len, SQLITE_STATIC);
	return mc_persist_step_done(p, ST_PUT_LOG);
}

void mc_persist_log_committed(struct mc_persist *p)
{
	struct mc_persist_logrow *row;
	uint8_t *recs;

	p->nlog_del = 0;
	p->log_clear_upto = 0;
	if (p->log_n == 0)
		return;
	if (p->log_gone >= p->log_n)
		goto reset;
	if (p->log_count == p->log_cap) {
		size_t cap = p->log_cap ? p->log_cap * 2 : 256, i;
		struct mc_persist_logrow *n = malloc(cap * sizeof(*n));

		if (n == NULL)
			goto lost;
		for (i = 0; i < p->log_count; i++)
			n[i] = *mc_putlog_row(p, i);
		free(p->logrows);
		p->logrows = n;
		p->log_cap = cap;
		p->log_head = 0;
	}
	recs = malloc(p->logbuf.len);
	if (recs == NULL)
		goto lost;
	memcpy(recs, p->logbuf.data, p->logbuf.len);
	row = mc_putlog_row(p, p->log_count++);
	row->id = p->log_next_id;
	row->tmin = p->log_tmin;
	row->tmax = p->log_tmax;
	row->live = p->log_n - p->log_gone;
	row->born_ms = mc_putlog_now_ms();
	row->recs = recs;
	row->len = p->logbuf.len;
	p->log_next_id++;
	goto reset;
lost:
	/* Out of memory: the row stays in the file until the next restart clears it; its puts
	 * may still write their rows (mc_persist_log_low stays at or below them). */
	if (p->log_lost_min == 0 || p->log_tmin < p->log_lost_min)
		p->log_lost_min = p->log_tmin ? p->log_tmin : 1;
	mc_log_warn("persist %s: put log row %lld not tracked (out of memory)", p->path,
		    (long long)p->log_next_id);
	p->log_next_id++;
reset:
	mc_wbuf_reset(&p->logbuf);
	p->log_n = p->log_gone = 0;
}

size_t mc_persist_log_retire(struct mc_persist *p, int64_t age_ms, mc_persist_retire_fn fn,
			     void *arg)
{
	int64_t now = mc_putlog_now_ms();
	size_t moved = 0;

	while (p->log_count) {
		struct mc_persist_logrow *row = mc_putlog_row(p, 0);
		struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
		struct mc_persist_object o;
		struct mc_rbuf r;

		if (row->recs == NULL) {	/* killed, not at the head then */
			p->log_head = (p->log_head + 1) & (p->log_cap - 1);
			p->log_count--;
			continue;
		}
		if (now - row->born_ms < age_ms)
			break;
		/* The callback records the puts' ends, which must not count down the row: it
		 * goes whole once they are recorded. */
		row->live = 0;
		mc_rbuf_init(&r, row->recs, row->len);
		while (r.left > 0 && mc_putlog_decode(&r, &o, reps) == 0) {
			fn(arg, &o);
			moved++;
		}
		mc_putlog_kill(p, row);
	}
	return moved;
}

int mc_persist_load_log(struct mc_persist *p, mc_persist_logged_fn fn, void *arg)
{
	sqlite3_stmt *st = p->st[ST_LOAD_LOG];
	int rc, ret = 0;

	if (st == NULL)		/* no database yet */
		return 0;
	while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		const void *b = sqlite3_column_blob(st, 1);
		struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
		struct mc_persist_object o;
		struct mc_rbuf r;
		int64_t idx = 0;

		if (id > p->log_loaded_upto)
			p->log_loaded_upto = id;
		mc_rbuf_init(&r, b, (size_t)sqlite3_column_bytes(st, 1));
		while (ret == 0 && r.left > 0) {
			if (mc_putlog_decode(&r, &o, reps) != 0) {
				mc_log_warn("persist %s: put log row %lld is malformed: the rest of "
					    "it is skipped", p->path, (long long)id);
				break;
			}
			ret = fn(arg, &o, id * ((int64_t)1 << 24) + (idx < 0xffffff ? idx++ : idx));
		}
	}
	sqlite3_reset(st);
	if (ret)
		return ret;
	if (rc != SQLITE_DONE)
		return mc_persist_fail(p, "loading the put log", rc);
	if (p->log_next_id <= p->log_loaded_upto)
		p->log_next_id = p->log_loaded_upto + 1;
	return 0;
}

void mc_persist_log_clear(struct mc_persist *p)
{
	if (p->log_loaded_upto <= 0)
		return;
	p->log_clear_upto = p->log_loaded_upto;
	p->log_loaded_upto = 0;
	p->pending++;
}

uint64_t mc_persist_log_low(const struct mc_persist *p, uint64_t low)
{
	size_t i;

	/* Rows are in commit order and so are their puts' generations: the first row that still
	 * has puts in flight holds the lowest. */
	for (i = 0; i < p->log_count; i++) {
		const struct mc_persist_logrow *row =
			&p->logrows[(p->log_head + i) & (p->log_cap - 1)];

		if (row->recs != NULL) {
			if (row->tmin < low)
				low = row->tmin;
			break;
		}
	}
	if (p->log_n && p->log_tmin < low)
		low = p->log_tmin;
	if (p->log_lost_min && p->log_lost_min < low)
		low = p->log_lost_min;
	return low;
}

size_t mc_persist_log_rows(const struct mc_persist *p)
{
	size_t i, n = 0;

	for (i = 0; i < p->log_count; i++)
		n += p->logrows[(p->log_head + i) & (p->log_cap - 1)].recs != NULL;
	return n;
}

int mc_persist_log_start(struct mc_persist *p)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(p->db, "SELECT max(id) FROM putlog", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return mc_persist_fail(p, "put log", rc);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) >= p->log_next_id)
		p->log_next_id = sqlite3_column_int64(st, 0) + 1;
	sqlite3_finalize(st);
	if (p->log_next_id < 1)
		p->log_next_id = 1;
	return 0;
}

void mc_persist_log_reset(struct mc_persist *p)
{
	size_t i;

	for (i = 0; i < p->log_count; i++)
		free(mc_putlog_row(p, i)->recs);
	p->log_count = p->log_head = 0;
	mc_wbuf_reset(&p->logbuf);
	p->logbuf.err = 0;
	p->log_n = p->log_gone = 0;
	p->nlog_del = 0;
	p->log_clear_upto = p->log_loaded_upto = 0;
}

void mc_persist_log_fini(struct mc_persist *p)
{
	mc_persist_log_reset(p);
	free(p->logrows);
	free(p->log_del);
	mc_wbuf_fini(&p->logbuf);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lookups by key through the key index (persist_keyidx.c tells how it is kept) while the
 * background loader scans the objects table after a restart: the loader thread opens the index
 * as of its read transaction, reads its runs (each checked against its CRC-64) and the tail
 * (the rows no run covers: generations at or above the last run's low bound, or below
 * gen_epoch, two ranges of the primary key), and answers a key from them: the candidates'
 * rows are read by generation, newest first, and the first that holds the key is the answer.
 * An index that is missing, of another state of the file (keys_id), incomplete or corrupt is
 * not used, with a log line: the loader then answers once its scan is done.  The loader
 * thread only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/crc64.h"
#include "common/errcode.h"
#include "common/log.h"
#include "common/radix_sort.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

struct mc_keylook_run {
	struct mc_persist_keypair *a;
	size_t n;
};

struct mc_persist_keylook {
	struct mc_keylook_run *runs;	/* the last is the tail */
	size_t nruns;
	sqlite3_stmt *point;
	uint64_t *cand;
	size_t ncand, capcand;
};

static int mc_keylook_add(struct mc_persist_keylook *x, struct mc_persist_keypair *a, size_t n)
{
	struct mc_keylook_run *r = realloc(x->runs, (x->nruns + 1) * sizeof(*r));

	if (r == NULL)
		return -1;
	x->runs = r;
	x->runs[x->nruns].a = a;
	x->runs[x->nruns++].n = n;
	return 0;
}

/* The runs of the index file at path if it is the one db's meta names: 0, or the reason not. */
static const char *mc_keylook_runs(struct mc_persist_keylook *x, const char *path, uint64_t want,
				   uint64_t *low)
{
	sqlite3 *idx = NULL;
	sqlite3_stmt *st = NULL;
	const char *why = NULL;
	uint64_t id = 0;
	int rc;

	if (sqlite3_open_v2(path, &idx, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
		    SQLITE_OK ||
	    sqlite3_busy_timeout(idx, 2000) != SQLITE_OK ||	/* the helper may recover its log */
	    sqlite3_exec(idx, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    (rc = mc_persist_keys_meta(idx, &id)) < 0) {
		why = "cannot be read";
		goto out;
	}
	if (id != want) {
		why = "belongs to another state of the database";
		goto out;
	}
	if (rc != 0) {
		why = "is not complete";
		goto out;
	}
	if (sqlite3_prepare_v2(idx, "SELECT low, n, crc, data FROM runs ORDER BY id", -1, &st,
			       NULL) != SQLITE_OK) {
		why = "cannot be read";
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t n = sqlite3_column_int64(st, 1);
		size_t bytes = (size_t)sqlite3_column_bytes(st, 3);
		struct mc_persist_keypair *a;

		if (n < 0 || bytes != (size_t)n * sizeof(*a) ||
		    mc_crc64(0, sqlite3_column_blob(st, 3), bytes) !=
			    (uint64_t)sqlite3_column_int64(st, 2)) {
			why = "is corrupt (a run's length or CRC is wrong)";
			goto out;
		}
		a = malloc(bytes ? bytes : 1);
		if (a == NULL || mc_keylook_add(x, a, (size_t)n)) {
			free(a);
			why = "out of memory";
			goto out;
		}
		if (bytes)
			memcpy(a, sqlite3_column_blob(st, 3), bytes);
		*low = (uint64_t)sqlite3_column_int64(st, 0);
	}
	if (rc != SQLITE_DONE)
		why = "cannot be read";
	else if (x->nruns == 0)
		why = "is empty";
out:
	if (why && idx && sqlite3_errcode(idx) != SQLITE_OK && strcmp(why, "out of memory") &&
	    (sqlite3_errcode(idx) & 0xff) != SQLITE_CANTOPEN)
		mc_log_debug("key index %s: %s", path, sqlite3_errmsg(idx));
	sqlite3_finalize(st);
	sqlite3_close(idx);
	return why;
}

/* The tail: rows at or above low, or below epoch (and below low: not twice). */
static const char *mc_keylook_tail(struct mc_persist_keylook *x, sqlite3 *db, uint64_t low,
				   int64_t epoch)
{
	struct mc_persist_keypair *a = NULL;
	size_t n = 0, cap = 0;
	long w;
	int rc = mc_persist_pairs_scan(db, 0, low, epoch, &a, &n, &cap, NULL, NULL);

	w = rc == 0 ? mc_persist_pairs_sort(a, n) : -1;
	if (w < 0 || mc_keylook_add(x, a, (size_t)w)) {
		free(a);
		return "its tail cannot be read";
	}
	return NULL;
}

void mc_persist_keylook_free(struct mc_persist_keylook *x)
{
	size_t i;

	if (x == NULL)
		return;
	for (i = 0; i < x->nruns; i++)
		free(x->runs[i].a);
	free(x->runs);
	free(x->cand);
	sqlite3_finalize(x->point);
	free(x);
}

int mc_persist_keylook_open(sqlite3 *db, const char *dbpath, const char *point_sql,
			    struct mc_persist_keylook **out)
{
	struct mc_persist_keylook *x = calloc(1, sizeof(*x));
	sqlite3_stmt *st = NULL;
	int64_t keys_id = 0, epoch = 0;
	uint64_t low = 0;
	const char *why = NULL;
	char path[300];

	*out = NULL;
	snprintf(path, sizeof(path), "%s.keys", dbpath);
	if (x == NULL)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT name, value FROM meta WHERE name IN ('keys_id', "
				   "'gen_epoch')", -1, &st, NULL) != SQLITE_OK) {
		why = "the database's meta values cannot be read";
		goto out;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);

		if (name && !strcmp(name, "keys_id"))
			keys_id = sqlite3_column_int64(st, 1);
		else if (name && !strcmp(name, "gen_epoch"))
			epoch = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	if (keys_id == 0) {
		why = "the database names none (it was written without one)";
		goto out;
	}
	why = access(path, F_OK) != 0 ? "it does not exist"
				     : mc_keylook_runs(x, path, (uint64_t)keys_id, &low);
	if (why == NULL)
		why = mc_keylook_tail(x, db, low, epoch);
	if (why == NULL && sqlite3_prepare_v2(db, point_sql, -1, &x->point, NULL) != SQLITE_OK)
		why = "cannot read rows by generation";
out:
	if (why) {
		mc_log_notice("loading %s: key index %s not used: %s; lookups of keys not loaded yet "
			      "wait for the scan", dbpath, path, why);
		mc_persist_keylook_free(x);
		return -1;
	}
	mc_log_info("loading %s: key index %s: %zu runs and a tail of %zu rows", dbpath, path,
		    x->nruns - 1, x->runs[x->nruns - 1].n);
	*out = x;
	return 0;
}

static int mc_u64_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;	/* rows' ids */

	return x > y ? -1 : x < y;
}

MC_LOWER_BOUND_DEFINE(mc_keypairs_lower_bound, struct mc_persist_keypair, hash)

int mc_persist_keylook_find(struct mc_persist_keylook *x, const void *key, size_t len,
			    sqlite3_stmt **point)
{
	uint64_t h = mc_persist_key_hash(key, len);
	size_t i, c;

	*point = x->point;
	x->ncand = 0;
	for (i = 0; i < x->nruns; i++) {
		const struct mc_persist_keypair *a = x->runs[i].a;
		size_t lo = mc_keypairs_lower_bound(a, x->runs[i].n, h);

		for (; lo < x->runs[i].n && a[lo].hash == h; lo++) {
			if (x->ncand == x->capcand) {
				size_t cap = x->capcand ? x->capcand * 2 : 16;
				uint64_t *n = realloc(x->cand, cap * sizeof(*n));

				if (n == NULL)
					return MC_ERR_PERSISTENT_FAIL;
				x->cand = n;
				x->capcand = cap;
			}
			x->cand[x->ncand++] = a[lo].gen;
		}
	}
	if (x->ncand > 1)
		qsort(x->cand, x->ncand, sizeof(*x->cand), mc_u64_desc);
	for (c = 0; c < x->ncand; c++) {
		int rc;

		if (c > 0 && x->cand[c] == x->cand[c - 1])
			continue;
		sqlite3_bind_int64(x->point, 1, (int64_t)x->cand[c]);
		rc = sqlite3_step(x->point);
		if (rc == SQLITE_ROW && (size_t)sqlite3_column_bytes(x->point, 0) == len &&
		    (len == 0 || !memcmp(sqlite3_column_blob(x->point, 0), key, len)))
			return 0;	/* the newest row of key: the caller decodes it */
		sqlite3_reset(x->point);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return MC_ERR_PERSISTENT_FAIL;
	}
	return 1;
}

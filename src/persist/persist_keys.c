/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding an object's rows by key in a table that has no index on the key (see persist.h):
 * the objects table is keyed by generation, so a reload orders its rows by a 64-bit hash of the
 * key itself.  A key has one row normally; two (a ghost and the object that followed it, a file
 * a crash or a bug left so) are resolved at load: the newer generation wins and the older row
 * is deleted.
 *
 * The background loader (persist_loader.c) keeps a reference per row as it scans and sorts them
 * here (radix sort, stable: rows of one hash stay in generation order); the load at once
 * (persist_load.c) reads generations and keys first to learn which rows lose.  Any thread;
 * nothing here is shared.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/radix_sort.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

uint64_t mc_persist_key_hash(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)len, w;

	while (len >= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
		p += 8;
		len -= 8;
	}
	w = 0;
	memcpy(&w, p, len);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 32);
}

uint64_t mc_persist_row(const void *key, size_t len, uint64_t gen, int rowkey)
{
	/* Issued generations are positive: the ids from hashes are below zero.  Two keys of
	 * one hash (2^-62 a pair) would share a row: the later put replaces the earlier. */
	return rowkey ? (uint64_t)-(int64_t)((mc_persist_key_hash(key, len) >> 2) + 1) : gen;
}

MC_RADIX_SORT_DEFINE(mc_keyrefs_radix, struct mc_persist_keyref, hash, malloc)

int mc_persist_keyrefs_sort(struct mc_persist_keyref *a, size_t n)
{
	return mc_keyrefs_radix(a, n, NULL);
}

/* Append the (hash, row) pairs of the rows st yields (columns gen, key) to *a.  0, 1 stopped
 * (stop, if given, said so: asked every 65536 rows), -1 error or out of memory. */
static int mc_pairs_collect(sqlite3_stmt *st, struct mc_persist_keypair **a, size_t *n,
			    size_t *cap, int (*stop)(void *), void *arg)
{
	size_t rows = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 65536;
			struct mc_persist_keypair *x = realloc(*a, c * sizeof(*x));

			if (x == NULL)
				return -1;
			*a = x;
			*cap = c;
		}
		(*a)[*n].gen = (uint64_t)sqlite3_column_int64(st, 0);
		(*a)[(*n)++].hash = mc_persist_key_hash(sqlite3_column_blob(st, 1),
							(size_t)sqlite3_column_bytes(st, 1));
		if (stop && ++rows % 65536 == 0 && stop(arg))
			return 1;
	}
	return rc == SQLITE_DONE ? 0 : -1;
}

int mc_persist_pairs_scan(sqlite3 *db, int all, uint64_t low, int64_t epoch,
			  struct mc_persist_keypair **a, size_t *n, size_t *cap,
			  int (*stop)(void *), void *arg)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;

	if (all) {
		if (sqlite3_prepare_v2(db, "SELECT gen, key FROM objects", -1, &st, NULL) ==
		    SQLITE_OK)
			rc = mc_pairs_collect(st, a, n, cap, stop, arg);
		sqlite3_finalize(st);
		return rc;
	}
	/* Two ranges of the primary key: at or above low, and below gen_epoch (not twice). */
	if (sqlite3_prepare_v2(db, "SELECT gen, key FROM objects WHERE gen >= ?1", -1, &st,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, (int64_t)low);
		rc = mc_pairs_collect(st, a, n, cap, stop, arg);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc != 0)
		return rc;
	rc = -1;
	if (sqlite3_prepare_v2(db, "SELECT gen, key FROM objects WHERE gen < ?1 AND gen < ?2", -1,
			       &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, epoch);
		sqlite3_bind_int64(st, 2, (int64_t)low);
		rc = mc_pairs_collect(st, a, n, cap, stop, arg);
	}
	sqlite3_finalize(st);
	return rc;
}

static int mc_u64_cmp(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return a < b ? -1 : a > b;
}

/* The key of the row of generation gen into buf (at most cap bytes): its length, or -1. */
static long mc_persist_key_of(sqlite3_stmt *st, uint64_t gen, uint8_t *buf, size_t cap)
{
	long n = -1;

	sqlite3_bind_int64(st, 1, (sqlite3_int64)gen);
	if (sqlite3_step(st) == SQLITE_ROW && (size_t)sqlite3_column_bytes(st, 0) <= cap) {
		n = sqlite3_column_bytes(st, 0);
		if (n)
			memcpy(buf, sqlite3_column_blob(st, 0), (size_t)n);
	}
	sqlite3_reset(st);
	return n;
}

int mc_persist_older_rows(struct mc_persist *p, uint64_t **out, size_t *nout)
{
	struct mc_persist_keyref *refs = NULL;
	sqlite3_stmt *scan = NULL, *key = NULL;
	uint64_t *older = NULL;
	size_t n = 0, cap = 0, nolder = 0, i, j;
	int rc = SQLITE_OK, ret = MC_ERR_PERSISTENT_FAIL;
	uint8_t *ka = malloc(2u << 16), *kb = ka + (1u << 16);

	*out = NULL;
	*nout = 0;
	if (ka == NULL)
		return -ENOMEM;
	if (sqlite3_prepare_v2(p->db, "SELECT gen, key FROM objects ORDER BY gen", -1, &scan,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "SELECT key FROM objects WHERE gen = ?1", -1, &key, NULL) !=
		    SQLITE_OK)
		goto out;
	while ((rc = sqlite3_step(scan)) == SQLITE_ROW) {
		if (n == cap) {
			struct mc_persist_keyref *r;

			cap = cap ? cap * 2 : 4096;
			r = realloc(refs, cap * sizeof(*r));
			if (r == NULL)
				goto nomem;
			refs = r;
		}
		/* chunk and row carry the generation here (rows in generation order). */
		refs[n].hash = mc_persist_key_hash(sqlite3_column_blob(scan, 1),
						   (size_t)sqlite3_column_bytes(scan, 1));
		refs[n].chunk = (uint32_t)((uint64_t)sqlite3_column_int64(scan, 0) >> 32);
		refs[n].row = (uint32_t)sqlite3_column_int64(scan, 0);
		n++;
	}
	if (rc != SQLITE_DONE)
		goto out;
	if (mc_persist_keyrefs_sort(refs, n))
		goto nomem;
	/* Within a run of one hash, generations ascend: a row whose key a later row of the run
	 * has too is older. */
	for (i = 0; i < n; i = j) {
		size_t a;

		for (j = i + 1; j < n && refs[j].hash == refs[i].hash; j++)
			;
		for (a = i; j - i > 1 && a < j - 1; a++) {
			uint64_t ga = (uint64_t)refs[a].chunk << 32 | refs[a].row;
			long la = mc_persist_key_of(key, ga, ka, 1u << 16);
			size_t b;

			for (b = a + 1; la >= 0 && b < j; b++) {
				uint64_t gb = (uint64_t)refs[b].chunk << 32 | refs[b].row;
				long lb = mc_persist_key_of(key, gb, kb, 1u << 16);

				if (lb == la && !memcmp(ka, kb, (size_t)la)) {
					uint64_t *o = realloc(older, (nolder + 1) * sizeof(*o));

					if (o == NULL)
						goto nomem;
					older = o;
					older[nolder++] = ga;
					break;
				}
			}
		}
	}
	if (nolder)
		qsort(older, nolder, sizeof(*older), mc_u64_cmp);
	*out = older;
	*nout = nolder;
	older = NULL;
	ret = 0;
	goto out;
nomem:
	ret = -ENOMEM;
out:
	if (ret == MC_ERR_PERSISTENT_FAIL)
		mc_persist_fail(p, "load objects (keys)", sqlite3_extended_errcode(p->db));
	sqlite3_finalize(scan);
	sqlite3_finalize(key);
	free(refs);
	free(older);
	free(ka);
	return ret;
}

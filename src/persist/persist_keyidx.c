/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The key index of the master's SQLite persistence (see persist.h): a second SQLite file,
 * PATH.keys, that finds an object's rows by key while the objects table (keyed by generation,
 * no index on the key) is loading after a restart.  It holds sorted runs of (64-bit key hash,
 * generation) pairs; a lookup takes the generations of the key's hash from every run and from
 * the tail (below), reads those rows by generation (the table's primary key) and keeps the
 * newest whose key is the key (persist_keylook.c).  A stale pair (its row deleted or changed
 * since) costs a read and is never an answer.
 *
 * Coverage.  A commit is a cut: with the pairs of the rows it wrote, the loop hands the helper
 * thread the cut's low bound, the lowest generation a row written after it can have: next_gen
 * as committed, or a put in flight's (the put log's puts write their rows at their end).  Rows
 * whose generation is below the file's gen_epoch (SSD copies adopted from before the database)
 * may be written at any time.  So every row of the objects table is in a run, or its
 * generation is at or above the low bound of the last run written, or below gen_epoch: the
 * tail, which a lookup reads by two ranges of the primary key.  A run records the low bound of
 * the last cut whose pairs it holds.
 *
 * Identity.  The index answers only for the database whose meta value keys_id is the index's
 * id (and the index is complete: its base run written).  A master that keeps the index (this
 * helper) continues one whose id matches, first adding a run of the previous process's tail;
 * else it takes a new id (recorded with its first commit) and builds a base run from a scan of
 * the table.  Everything else that writes the objects table (a master without the index, HA's
 * replicated batches, a wipe) clears keys_id in the same transaction: a missing, stale or
 * corrupt index (every run carries a CRC-64) is never used, and lookups wait for the scan.
 *
 * Growth.  Runs merge as they come, eight of one size class into one (the classes a factor of
 * eight apart: each pair copied about once per class, a few times in all, and few runs to
 * search); once the runs hold more than twice the rows the
 * table has (as the base counted them, plus the rows written, less the rows deleted since) and
 * a million more, the base is built again from a scan of the table (deleted rows' pairs go),
 * so the index stays proportional to the table however much churns, and a table that only
 * grows is never scanned again.  A new
 * base takes a new id, which the loop records with its next commit: an older copy of the
 * database (restored from a backup, holding rows whose pairs the new base dropped) never
 * matches an index built after it.  An older copy of the index matches, and is right: its runs
 * and its tail cover every row written since.
 *
 * Threads: the loop only hashes each written row's key and hands the pairs over under a mutex
 * (mc_persist_keys_committed); the helper thread sorts, writes, merges and scans, with its own
 * connections (the index file's, and a read-only one to the database).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/crc64.h"
#include "common/log.h"
#include "persist/persist.h"
#include "persist/persist_int.h"

#define MC_KEYS_RUN_PAIRS 262144	/* a run is written at this many pairs ... */
#define MC_KEYS_RUN_MS 1000		/* ... or after this long */
#define MC_KEYS_REBUILD_SLACK 1048576
#define MC_KEYS_FANOUT 8		/* runs of one size class merged at once */

enum { MC_KEYS_CONTINUE, MC_KEYS_REBUILD };

struct mc_persist_keys {
	pthread_t tid;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	/* From the loop, under mu: pairs of committed rows, the last cut's low bound. */
	struct mc_persist_keypair *q;
	size_t nq, capq;
	uint64_t low;
	uint64_t dels;		/* rows deleted (DEL_ROW, DEL_OBJECT) since the base */
	uint64_t new_id;	/* a new base's id, for the loop to record (0: none) */
	/* The thread's. */
	char *dbpath, *path;
	int mode, broken;
	uint64_t id, tail_low;
	uint64_t base_n, total_n, added;	/* added: pairs handed over since the base */
	sqlite3 *idx, *db;
};

/* ------------------------------------------------------------ the loop's side */

/* Out of memory for the pairs: they are lost and the index would answer wrong from now on.
 * Stop feeding it and let it go; the file's keys_id goes with the next commit. */
static void mc_keys_drop(struct mc_persist *p)
{
	mc_log_err("persist %s: key index: out of memory; dropping it", p->path);
	p->feeding = 0;
	p->keys_cleared = 0;
	mc_persist_keys_fini(p);
}

void mc_persist_keys_note(struct mc_persist *p, const void *key, size_t len, uint64_t gen)
{
	if (!p->feeding)
		return;
	if (p->nfeed == p->capfeed) {
		size_t cap = p->capfeed ? p->capfeed * 2 : 1024;
		struct mc_persist_keypair *f = realloc(p->feed, cap * sizeof(*f));

		if (f == NULL) {
			mc_keys_drop(p);
			return;
		}
		p->feed = f;
		p->capfeed = cap;
	}
	p->feed[p->nfeed].hash = mc_persist_key_hash(key, len);
	p->feed[p->nfeed++].gen = gen;
}

void mc_persist_keys_committed(struct mc_persist *p)
{
	struct mc_persist_keys *k = p->keys;
	uint64_t low = 0;
	int i;

	p->feeding = 0;
	if (k == NULL) {
		p->nfeed = 0;
		return;
	}
	for (i = 0; i < p->nmeta; i++)
		if (!strcmp(p->meta[i].name, "next_gen") && p->meta[i].value > 0)
			low = (uint64_t)p->meta[i].value;
	low = mc_persist_log_low(p, low);
	pthread_mutex_lock(&k->mu);
	if (k->nq + p->nfeed > k->capq) {
		size_t cap = k->capq ? k->capq : 4096;
		struct mc_persist_keypair *q;

		while (cap < k->nq + p->nfeed)
			cap *= 2;
		q = realloc(k->q, cap * sizeof(*q));
		if (q == NULL) {
			pthread_mutex_unlock(&k->mu);
			mc_keys_drop(p);
			return;
		}
		k->q = q;
		k->capq = cap;
	}
	if (p->nfeed)
		memcpy(k->q + k->nq, p->feed, p->nfeed * sizeof(*p->feed));
	k->nq += p->nfeed;
	k->added += p->nfeed;
	k->dels += p->nfeed_del;
	k->low = low;
	if (k->new_id) {	/* goes with the next commit */
		mc_persist_set_meta(p, "keys_id", (int64_t)k->new_id);
		k->new_id = 0;
	}
	if (k->nq >= MC_KEYS_RUN_PAIRS)
		pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	p->nfeed = 0;
	p->nfeed_del = 0;
}

/* ------------------------------------------------------------ runs */

static int mc_pair_cmp(const struct mc_persist_keypair *a, const struct mc_persist_keypair *b)
{
	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	return a->gen < b->gen ? -1 : a->gen > b->gen;
}

long mc_persist_pairs_sort(struct mc_persist_keypair *a, size_t n)
{
	struct mc_persist_keyref *r;
	size_t i, w = 0;

	if (n < 2)
		return (long)n;
	/* The radix sort is stable: sorted by gen first (rows come mostly in order), then hash. */
	r = malloc(n * sizeof(*r));
	if (r == NULL)
		return -1;
	for (i = 0; i < n; i++)
		r[i] = (struct mc_persist_keyref){ a[i].gen, (uint32_t)(i >> 32),
						   (uint32_t)i };
	if (mc_persist_keyrefs_sort(r, n)) {
		free(r);
		return -1;
	}
	for (i = 0; i < n; i++) {
		size_t at = (size_t)r[i].chunk << 32 | r[i].row;

		r[i].hash = a[at].hash;
		r[i].chunk = (uint32_t)(a[at].gen >> 32);
		r[i].row = (uint32_t)a[at].gen;
	}
	if (mc_persist_keyrefs_sort(r, n)) {
		free(r);
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct mc_persist_keypair x = { r[i].hash, (uint64_t)r[i].chunk << 32 | r[i].row };

		if (w == 0 || mc_pair_cmp(&a[w - 1], &x) != 0)
			a[w++] = x;
	}
	free(r);
	return (long)w;
}

static int mc_keys_exec(struct mc_persist_keys *k, const char *sql)
{
	if (sqlite3_exec(k->idx, sql, NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	mc_log_warn("persist %s: %s: %s", k->path, sql, sqlite3_errmsg(k->idx));
	return -1;
}

/* Insert a run (its pairs sorted) with low bound low, as id (0: the next). */
static int mc_keys_insert(struct mc_persist_keys *k, int64_t id,
			  const struct mc_persist_keypair *a, size_t n, uint64_t low)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(k->idx, "INSERT INTO runs(id, low, n, crc, data) VALUES (?1, ?2, ?3, "
				       "?4, ?5)", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (id)
		sqlite3_bind_int64(st, 1, id);
	else
		sqlite3_bind_null(st, 1);
	sqlite3_bind_int64(st, 2, (int64_t)low);
	sqlite3_bind_int64(st, 3, (int64_t)n);
	sqlite3_bind_int64(st, 4, (int64_t)mc_crc64(0, a, n * sizeof(*a)));
	sqlite3_bind_blob64(st, 5, n ? (const void *)a : "", n * sizeof(*a), SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* A run's size class: 0 below MC_KEYS_FANOUT runs of MC_KEYS_RUN_PAIRS, one more for each
 * further factor of MC_KEYS_FANOUT. */
static int mc_keys_class(int64_t n)
{
	int c = 0;

	while (n >= (int64_t)MC_KEYS_RUN_PAIRS * MC_KEYS_FANOUT) {
		n /= MC_KEYS_FANOUT;
		c++;
	}
	return c;
}

/* In the open transaction: whether the newest MC_KEYS_FANOUT runs are all of one size class;
 * then the oldest one's id, the newest one's low bound and their pairs in all. */
static int mc_keys_tier(struct mc_persist_keys *k, int64_t *first, int64_t *low, size_t *pairs)
{
	sqlite3_stmt *st;
	int rows = 0, same = 1, c = -1;

	*pairs = 0;
	if (sqlite3_prepare_v2(k->idx, "SELECT id, low, n FROM runs ORDER BY id DESC LIMIT ?1", -1,
			       &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int(st, 1, MC_KEYS_FANOUT);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t n = sqlite3_column_int64(st, 2);

		if (rows == 0)
			*low = sqlite3_column_int64(st, 1);
		*first = sqlite3_column_int64(st, 0);
		same &= c < 0 || mc_keys_class(n) == c;
		c = mc_keys_class(n);
		*pairs += (size_t)n;
		rows++;
	}
	sqlite3_finalize(st);
	return rows == MC_KEYS_FANOUT && same;
}

/* The pairs of the runs from id first on, one after the other, into a (malloc'd, room for n);
 * how many, or -1. */
static long mc_keys_read_from(struct mc_persist_keys *k, int64_t first,
			      struct mc_persist_keypair **a, size_t n)
{
	sqlite3_stmt *st;
	size_t w = 0;
	int rc;

	*a = malloc((n ? n : 1) * sizeof(**a));
	if (*a == NULL || sqlite3_prepare_v2(k->idx, "SELECT data FROM runs WHERE id >= ?1", -1,
					     &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, first);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		size_t bytes = (size_t)sqlite3_column_bytes(st, 0);

		if (bytes % sizeof(**a) || bytes / sizeof(**a) > n - w)
			break;	/* its n and its data disagree: the CRC will tell the reader */
		if (bytes)
			memcpy(*a + w, sqlite3_column_blob(st, 0), bytes);
		w += bytes / sizeof(**a);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? (long)w : -1;
}

/* Merge the newest MC_KEYS_FANOUT runs into one (the oldest one's id, the newest one's low
 * bound) while they are all of one size class, so that a pair is copied about once per class
 * (a few times in all) and there are at most MC_KEYS_FANOUT - 1 runs per class to search. */
static int mc_keys_merge(struct mc_persist_keys *k)
{
	for (;;) {
		struct mc_persist_keypair *a = NULL;
		sqlite3_stmt *del = NULL;
		int64_t first = 0, low = 0;
		size_t n;
		long w = -1;
		int tier, rc = -1;

		if (mc_keys_exec(k, "BEGIN IMMEDIATE"))
			return -1;
		tier = mc_keys_tier(k, &first, &low, &n);
		if (tier <= 0) {
			mc_keys_exec(k, "COMMIT");
			return tier;
		}
		if (mc_keys_read_from(k, first, &a, n) == (long)n)
			w = mc_persist_pairs_sort(a, n);
		if (w >= 0 &&
		    sqlite3_prepare_v2(k->idx, "DELETE FROM runs WHERE id >= ?1", -1, &del, NULL) ==
			    SQLITE_OK) {
			sqlite3_bind_int64(del, 1, first);
			if (sqlite3_step(del) == SQLITE_DONE &&
			    mc_keys_insert(k, first, a, (size_t)w, (uint64_t)low) == 0)
				rc = 0;
		}
		sqlite3_finalize(del);
		free(a);
		if (rc == 0 && mc_keys_exec(k, "COMMIT") == 0) {
			k->total_n = k->total_n - n + (size_t)w;
			continue;
		}
		mc_keys_exec(k, "ROLLBACK");
		return -1;
	}
}

/* Write the pairs taken from the loop as a run; merge; 0 or -1 (the index is left as it was:
 * still right, its tail longer). */
static int mc_keys_write(struct mc_persist_keys *k, struct mc_persist_keypair *a, size_t n,
			 uint64_t low)
{
	long w = mc_persist_pairs_sort(a, n);

	if (w < 0 || mc_keys_exec(k, "BEGIN IMMEDIATE"))
		return -1;
	if (mc_keys_insert(k, 0, a, (size_t)w, low) != 0 || mc_keys_exec(k, "COMMIT")) {
		mc_keys_exec(k, "ROLLBACK");
		return -1;
	}
	k->total_n += (size_t)w;
	return mc_keys_merge(k);
}

/* ------------------------------------------------------------ scans of the table */

static int mc_keys_stopped(void *arg)
{
	struct mc_persist_keys *k = arg;
	int stop;

	pthread_mutex_lock(&k->mu);
	stop = k->stop;
	pthread_mutex_unlock(&k->mu);
	return stop;
}

/* A run from a scan of the table in one read transaction: every row (full: the new base, which
 * replaces the runs) or the tail of the last run (rows at or above tail_low or below
 * gen_epoch: what the previous process wrote after its last run).  The pairs handed over
 * before the read began are of rows it sees: they go. */
static int mc_keys_scan(struct mc_persist_keys *k, int full)
{
	struct mc_persist_keypair *a = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st = NULL;
	uint64_t low;
	int64_t epoch = 0;
	int rc = -1;
	long w;

	pthread_mutex_lock(&k->mu);
	low = k->low;
	k->nq = 0;
	if (full)
		k->added = k->dels = 0;
	pthread_mutex_unlock(&k->mu);
	if (sqlite3_exec(k->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_prepare_v2(k->db, "SELECT value FROM meta WHERE name = 'gen_epoch'", -1, &st,
			       NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_step(st) == SQLITE_ROW)
		epoch = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	st = NULL;
	rc = mc_persist_pairs_scan(k->db, full, k->tail_low, epoch, &a, &n, &cap, mc_keys_stopped,
				   k);
	if (rc != 0)
		goto out;
	sqlite3_exec(k->db, "COMMIT", NULL, NULL, NULL);
	rc = -1;
	w = mc_persist_pairs_sort(a, n);
	if (w < 0 || mc_keys_exec(k, "BEGIN IMMEDIATE"))
		goto out;
	if (full) {
		char sql[160];

		snprintf(sql, sizeof(sql),
			 "DELETE FROM runs; INSERT OR REPLACE INTO meta VALUES ('id', %lld), "
			 "('complete', 1), ('format', 1)", (long long)k->id);
		if (mc_keys_exec(k, sql))
			goto rollback;
	}
	if (mc_keys_insert(k, 0, a, (size_t)w, low) || mc_keys_exec(k, "COMMIT"))
		goto rollback;
	if (full)
		k->base_n = k->total_n = (uint64_t)w;
	else
		k->total_n += (uint64_t)w;
	rc = 0;
	goto out;
rollback:
	mc_keys_exec(k, "ROLLBACK");
out:
	if (rc < 0)
		mc_log_warn("persist %s: key index: %s scan failed: %s", k->path,
			    full ? "a full" : "a tail", sqlite3_errmsg(k->db));
	sqlite3_finalize(st);
	if (!sqlite3_get_autocommit(k->db))
		sqlite3_exec(k->db, "ROLLBACK", NULL, NULL, NULL);
	free(a);
	return rc;
}

/* ------------------------------------------------------------ the thread */

static uint64_t mc_keys_new_id(void)
{
	uint64_t id;

	if (getrandom(&id, sizeof(id), 0) != sizeof(id))
		id = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	return (id >> 2) | 1;	/* positive, nonzero */
}

static int mc_keys_open(struct mc_persist_keys *k)
{
	if (k->mode == MC_KEYS_REBUILD) {
		/* Whatever is there is of no use (and may be no SQLite file at all). */
		char side[320];

		unlink(k->path);
		snprintf(side, sizeof(side), "%s-wal", k->path);
		unlink(side);
		snprintf(side, sizeof(side), "%s-shm", k->path);
		unlink(side);
	}
	if (sqlite3_open_v2(k->path, &k->idx,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK ||
	    sqlite3_open_v2(k->dbpath, &k->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
		    SQLITE_OK) {
		mc_log_warn("persist %s: key index: cannot open: %s", k->path,
			    k->idx ? sqlite3_errmsg(k->idx) : "out of memory");
		return -1;
	}
	sqlite3_busy_timeout(k->idx, 2000);
	sqlite3_busy_timeout(k->db, 2000);
	/* Merges read whole runs back: mapped, not copied by read(2) page by page. */
	return mc_keys_exec(k, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
			       "PRAGMA mmap_size=1073741824; PRAGMA cache_size=-16384; "
			       "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, "
			       "value INTEGER NOT NULL);"
			       "CREATE TABLE IF NOT EXISTS runs(id INTEGER PRIMARY KEY, "
			       "low INTEGER NOT NULL, n INTEGER NOT NULL, crc INTEGER NOT NULL, "
			       "data BLOB NOT NULL)");
}

/* The runs hold more than twice the rows the table has, and a million more. */
static int mc_keys_rebuild_due(struct mc_persist_keys *k)
{
	uint64_t rows;

	pthread_mutex_lock(&k->mu);
	rows = k->base_n + k->added > k->dels ? k->base_n + k->added - k->dels : 0;
	pthread_mutex_unlock(&k->mu);
	return k->total_n > 2 * rows + MC_KEYS_REBUILD_SLACK;
}

static void *mc_keys_main(void *arg)
{
	struct mc_persist_keys *k = arg;
	struct mc_persist_keypair *a = NULL;
	size_t cap = 0;

	pthread_setname_np(pthread_self(), "mc-keys");
	if (mc_keys_open(k) == 0 && k->mode == MC_KEYS_CONTINUE) {
		sqlite3_stmt *st;

		/* The pairs the runs hold: the next base is due past twice as many. */
		if (sqlite3_prepare_v2(k->idx, "SELECT sum(n) FROM runs", -1, &st, NULL) ==
		    SQLITE_OK) {
			if (sqlite3_step(st) == SQLITE_ROW)
				k->base_n = k->total_n = (uint64_t)sqlite3_column_int64(st, 0);
			sqlite3_finalize(st);
		}
	}
	/* A scan that did not finish (stopped, failed) took the pairs handed over before it: no
	 * later run may be written, or their rows would be in neither a run nor the tail. */
	if (k->idx == NULL || k->db == NULL || mc_keys_scan(k, k->mode == MC_KEYS_REBUILD) != 0) {
		k->broken = 1;
		mc_log_warn("persist %s: key index not kept: after a restart, lookups of keys not "
			    "loaded yet wait for the load's scan", k->path);
	}
	for (;;) {
		struct timespec end;
		size_t n;
		uint64_t low;
		int stop, rc = 0;

		clock_gettime(CLOCK_REALTIME, &end);
		end.tv_sec += MC_KEYS_RUN_MS / 1000;
		pthread_mutex_lock(&k->mu);
		while (!k->stop && k->nq < MC_KEYS_RUN_PAIRS && rc == 0)
			rc = pthread_cond_timedwait(&k->cv, &k->mu, &end);
		stop = k->stop;
		n = k->nq;
		low = k->low;
		if (n > cap) {
			struct mc_persist_keypair *x = realloc(a, n * sizeof(*x));

			if (x == NULL) {
				n = 0;
				k->broken = 1;
			} else {
				a = x;
				cap = n;
			}
		}
		if (n)
			memcpy(a, k->q, n * sizeof(*a));
		k->nq = 0;
		pthread_mutex_unlock(&k->mu);
		if (n && !k->broken) {
			if (mc_keys_write(k, a, n, low) != 0) {
				k->broken = 1;
				mc_log_warn("persist %s: key index: writing a run failed (%s): it is "
					    "no longer kept; its tail grows until the next start",
					    k->path, sqlite3_errmsg(k->idx));
			} else if (mc_keys_rebuild_due(k)) {
				k->id = mc_keys_new_id();
				if (mc_keys_scan(k, 1) != 0) {
					k->broken = 1;
				} else {
					pthread_mutex_lock(&k->mu);
					k->new_id = k->id;
					pthread_mutex_unlock(&k->mu);
				}
			}
		}
		if (stop)
			break;
	}
	free(a);
	return NULL;
}

int mc_persist_keys_meta(sqlite3 *idx, uint64_t *id)
{
	sqlite3_stmt *st;
	int64_t complete = 0, format = 0;
	int rc;

	*id = 0;
	if (sqlite3_prepare_v2(idx, "SELECT name, value FROM meta", -1, &st, NULL) != SQLITE_OK)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);

		if (name && !strcmp(name, "id"))
			*id = (uint64_t)sqlite3_column_int64(st, 1);
		else if (name && !strcmp(name, "complete"))
			complete = sqlite3_column_int64(st, 1);
		else if (name && !strcmp(name, "format"))
			format = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return -1;
	return complete == 1 && format == 1 ? 0 : 1;
}

/* What a complete index file says: its id, the low bound of its last run.  0 or -1. */
static int mc_keys_peek(const char *path, uint64_t *id, uint64_t *low)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int rc = -1;

	*id = *low = 0;
	if (access(path, F_OK) != 0 ||
	    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
		    SQLITE_OK ||
	    sqlite3_busy_timeout(db, 2000) != SQLITE_OK ||
	    mc_persist_keys_meta(db, id) != 0)
		goto out;
	if (sqlite3_prepare_v2(db, "SELECT low FROM runs ORDER BY id DESC LIMIT 1", -1, &st,
			       NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		goto out;
	*low = (uint64_t)sqlite3_column_int64(st, 0);
	rc = 0;
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
	return rc;
}

int mc_persist_keys_start(struct mc_persist *p)
{
	struct mc_persist_keys *k;
	uint64_t x, id, low;

	if (p->keys || p->readonly || p->db == NULL || !strcmp(p->path, ":memory:") ||
	    p->path[0] == '\0')
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (k == NULL)
		return -ENOMEM;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	k->dbpath = strdup(p->path);
	k->path = malloc(strlen(p->path) + 6);
	if (k->dbpath == NULL || k->path == NULL)
		goto fail;
	sprintf(k->path, "%s.keys", p->path);
	x = (uint64_t)mc_persist_get_meta(p, "keys_id");
	k->low = (uint64_t)mc_persist_get_meta(p, "next_gen");
	if (x != 0 && mc_keys_peek(k->path, &id, &low) == 0 && id == x) {
		k->mode = MC_KEYS_CONTINUE;
		k->id = x;
		k->tail_low = low;
	} else {
		k->mode = MC_KEYS_REBUILD;
		k->id = mc_keys_new_id();
		if (mc_persist_set_meta(p, "keys_id", (int64_t)k->id) != 0)
			goto fail;
		mc_log_info("persist %s: building the key index %s", p->path, k->path);
	}
	if (pthread_create(&k->tid, NULL, mc_keys_main, k) != 0)
		goto fail;
	k->started = 1;
	p->keys = k;
	return 0;
fail:
	free(k->dbpath);
	free(k->path);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
	return -ENOMEM;
}

void mc_persist_keys_fini(struct mc_persist *p)
{
	struct mc_persist_keys *k = p->keys;

	p->keys = NULL;
	free(p->feed);
	p->feed = NULL;
	p->nfeed = p->capfeed = 0;
	if (k == NULL)
		return;
	if (k->started) {
		pthread_mutex_lock(&k->mu);
		k->stop = 1;
		pthread_cond_signal(&k->cv);
		pthread_mutex_unlock(&k->mu);
		pthread_join(k->tid, NULL);
	}
	sqlite3_close(k->idx);
	sqlite3_close(k->db);
	free(k->q);
	free(k->dbpath);
	free(k->path);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
}

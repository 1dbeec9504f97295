/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the put log of the SQLite persistence (src/persist/persist_putlog.c): rows per
 * commit, deleted when their puts are done, retired when old, read back after a crash, and the
 * upgrade of a version 6 file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "persist/persist.h"
#include "proto/rpc.h"
#include "tap.h"

struct logged {
	int n, bad;
	int64_t last_seq;
	uint64_t gens[64];
};

static int on_logged(void *arg, const struct mc_persist_object *o, int64_t seq)
{
	struct logged *x = arg;
	char key[32];

	snprintf(key, sizeof(key), "p-%llu", (unsigned long long)o->gen);
	if (o->key_len != strlen(key) || memcmp(o->key, key, o->key_len) != 0 ||
	    o->n_replicas != 1 || o->replicas[0].type != MC_REPLICA_MEMORY ||
	    o->replicas[0].status != MC_REPLICA_PROCESSING ||
	    o->replicas[0].offset != o->gen * 4096 || o->replicas[0].len != 4096 ||
	    o->replicas[0].segment_id[0] != 9 || o->put_start_ms != 1000 + (int64_t)o->gen ||
	    seq <= x->last_seq)
		x->bad++;
	x->last_seq = seq;
	if (x->n < 64)
		x->gens[x->n] = o->gen;
	x->n++;
	return 0;
}

/* A put of generation gen in flight: one PROCESSING memory replica (and a DISK one, which the
 * log leaves out). */
static int log_put(struct mc_persist *p, uint64_t gen)
{
	char key[32];
	struct mc_persist_replica r[2] = {
		{ .id = gen, .type = MC_REPLICA_MEMORY, .status = MC_REPLICA_PROCESSING,
		  .offset = gen * 4096, .len = 4096 },
		{ .id = gen + 1000, .type = MC_REPLICA_DISK, .status = MC_REPLICA_PROCESSING },
	};
	struct mc_persist_object o = { .key = key, .n_replicas = 2, .replicas = r };

	snprintf(key, sizeof(key), "p-%llu", (unsigned long long)gen);
	o.key_len = strlen(key);
	o.gen = gen;
	o.size = 4096;
	o.put_start_ms = 1000 + (int64_t)gen;
	r[0].segment_id[0] = 9;
	return mc_persist_log_object(p, &o);
}

static int rows_in_file(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int n = -1;

	if (sqlite3_open(path, &db) != SQLITE_OK)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM putlog", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return n;
}

static struct {
	int n;
	uint64_t gens[64];
} retired;

static void on_retire(void *arg, const struct mc_persist_object *o)
{
	struct mc_persist *p = arg;

	if (retired.n < 64)
		retired.gens[retired.n] = o->gen;
	retired.n++;
	/* As the master does: the put's end is recorded, which must not disturb the row. */
	mc_persist_log_done(p, o->gen);
}

/* The page cache's truncation (persist_pcache.c) under B-tree splits, commits and rollbacks of
 * random keys: the file stays sound and holds what was committed. */
static void pcache_tests(const char *dir)
{
	char path[300];
	sqlite3 *db;
	sqlite3_stmt *ins = NULL, *st = NULL;
	unsigned char key[48], val[100];
	int t, i, committed = 0, rc, n = -1;
	const char *check = "";

	snprintf(path, sizeof(path), "%s/pcache.db", dir);
	rc = sqlite3_open(path, &db);
	rc |= sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA cache_size=200; "
			       "CREATE TABLE t(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID;",
			   NULL, NULL, NULL);
	rc |= sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?1, ?2)", -1, &ins, NULL);
	srand(7);
	for (t = 0; rc == SQLITE_OK && t < 300; t++) {
		rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
		for (i = 0; rc == SQLITE_OK && i < 100; i++) {
			size_t j;

			for (j = 0; j < sizeof(key); j++)
				key[j] = (unsigned char)rand();
			memset(val, t, sizeof(val));
			sqlite3_bind_blob(ins, 1, key, sizeof(key), SQLITE_STATIC);
			sqlite3_bind_blob(ins, 2, val, sizeof(val), SQLITE_STATIC);
			rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
			sqlite3_reset(ins);
		}
		if (t % 50 == 49 && rc == SQLITE_OK) {	/* a shrink: every fifth key goes */
			rc = sqlite3_exec(db, "DELETE FROM t WHERE substr(k, 1, 1) < x'33'", NULL,
					  NULL, NULL);
			committed -= sqlite3_changes(db);
		}
		if (t % 7 == 3) {
			if (t % 50 == 49)
				committed += sqlite3_changes(db);
			rc |= sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		} else {
			rc |= sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
			committed += 100;
		}
	}
	sqlite3_finalize(ins);
	if (rc == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		check = (const char *)sqlite3_column_text(st, 0);
	ok(rc == SQLITE_OK && n == committed && !strcmp(check, "ok"),
	   "30000 random keys in 300 transactions, some rolled back: the file is sound and "
	   "holds what was committed (%d of %d, %s)", n, committed, check);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

int main(void)
{
	char dir[] = "/tmp/mc-putlog-XXXXXX", path[256], v6[256];
	struct mc_persist *p;
	struct logged x;
	uint64_t g;
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/master.db", dir);
	is(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p), 0, "open a new database");

	/* Commit 1: gens 1-3; commit 2: gens 4-5; commit 3: gen 6, done before its commit. */
	rc = log_put(p, 1) | log_put(p, 2) | log_put(p, 3);
	ok(rc == 0 && mc_persist_pending(p) == 3 && mc_persist_commit(p) == 0,
	   "three started puts are committed");
	ok(rows_in_file(path) == 1 && mc_persist_log_rows(p) == 1, "as one row of the put log");
	rc = log_put(p, 4) | log_put(p, 5);
	ok(rc == 0 && mc_persist_commit(p) == 0 && rows_in_file(path) == 2, "a second commit, a "
	   "second row");
	rc = log_put(p, 6);
	mc_persist_log_done(p, 6);
	ok(rc == 0 && mc_persist_commit(p) == 0 && rows_in_file(path) == 2 &&
		   mc_persist_log_rows(p) == 2,
	   "a put done before its commit writes no row");
	mc_persist_log_done(p, 4);
	mc_persist_log_done(p, 5);
	mc_persist_log_done(p, 999);	/* unknown: ignored */
	ok(mc_persist_pending(p) == 1 && mc_persist_commit(p) == 0 && rows_in_file(path) == 1 &&
		   mc_persist_log_rows(p) == 1,
	   "a row whose puts are all done is deleted with the next commit (out of order)");
	mc_persist_log_done(p, 2);
	ok(mc_persist_pending(p) == 0 && rows_in_file(path) == 1,
	   "a row with puts left stays");
	retired.n = 0;
	ok(mc_persist_log_retire(p, 60000, on_retire, p) == 0 && retired.n == 0,
	   "a young row is not retired");

	/* A restart after a crash: a second handle reads the file back as the new master would
	 * (the first one commits nothing more). */
	{
		struct mc_persist *q;

		rc = log_put(p, 7) | log_put(p, 8);
		ok(rc == 0 && mc_persist_commit(p) == 0, "two more puts in flight");
		ok(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &q) == 0, "the file opens again");
		memset(&x, 0, sizeof(x));
		ok(mc_persist_load_log(q, on_logged, &x) == 0 && x.bad == 0 && x.n == 5 &&
			   x.gens[0] == 1 && x.gens[1] == 2 && x.gens[2] == 3 && x.gens[3] == 7 &&
			   x.gens[4] == 8,
		   "the put log reads back every record, with its ranges, in order (%d, bad %d)",
		   x.n, x.bad);
		rc = log_put(q, 20);
		mc_persist_log_clear(q);
		ok(rc == 0 && mc_persist_commit(q) == 0 && rows_in_file(path) == 1,
		   "once cleared, the rows read back go; a new row (a later id) stays");
		memset(&x, 0, sizeof(x));
		ok(mc_persist_load_log(q, on_logged, &x) == 0 && x.n == 1 && x.gens[0] == 20,
		   "and is what the log holds now");
		mc_persist_close(q);
	}
	mc_persist_close(p);
	unlink(path);

	/* Retirement: an old row's records go to the callback and the row goes. */
	is(mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p), 0, "a new database");
	rc = log_put(p, 1) | log_put(p, 2);
	ok(rc == 0 && mc_persist_commit(p) == 0, "two puts in flight");
	mc_persist_log_done(p, 1);
	retired.n = 0;
	for (g = 0; g < 200 && mc_persist_log_retire(p, 20, on_retire, p) == 0; g++)
		usleep(5000);
	ok(retired.n == 2 && retired.gens[0] == 1 && retired.gens[1] == 2,
	   "a row older than the age gives its records to the callback (%d)", retired.n);
	ok(mc_persist_commit(p) == 0 && rows_in_file(path) == 0 && mc_persist_log_rows(p) == 0,
	   "and is deleted with the next commit");
	mc_persist_close(p);

	/* A version 6 file: upgraded in place, its rows kept, an empty put log added. */
	snprintf(v6, sizeof(v6), "%s/v6.db", dir);
	{
		sqlite3 *db;

		rc = sqlite3_open(v6, &db);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(
				db,
				"CREATE TABLE segments(id BLOB PRIMARY KEY, client_id BLOB NOT NULL, "
				"name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER NOT NULL, "
				"endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind INTEGER NOT NULL "
				"DEFAULT 0, token BLOB, dormant_until_ms INTEGER NOT NULL DEFAULT 0);"
				"CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, "
				"flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, "
				"soft_pin_until_ms INTEGER NOT NULL, writer BLOB NOT NULL, "
				"replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0, checksum "
				"INTEGER) WITHOUT ROWID;"
				"CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
				"CREATE TABLE records(kind INTEGER NOT NULL, id BLOB NOT NULL, "
				"value BLOB NOT NULL, PRIMARY KEY(kind, id)) WITHOUT ROWID;"
				"INSERT INTO objects VALUES (x'6f6c64', 8, 0, 1, 0, "
				"x'01000000000000000000000000000000', x'', 77, 5);"
				"PRAGMA user_version=6;",
				NULL, NULL, NULL);
		sqlite3_close(db);
	}
	memset(&x, 0, sizeof(x));
	ok(rc == SQLITE_OK && mc_persist_open(v6, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
		   mc_persist_load_log(p, on_logged, &x) == 0 && x.n == 0,
	   "a version 6 database opens with an empty put log");
	rc = log_put(p, 3);
	ok(rc == 0 && mc_persist_commit(p) == 0 && rows_in_file(v6) == 1,
	   "and takes rows in it");
	mc_persist_close(p);
	{
		sqlite3 *db;
		sqlite3_stmt *st = NULL;

		rc = sqlite3_open(v6, &db);
		ok(rc == SQLITE_OK &&
			   sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM objects), "
					      "user_version FROM pragma_user_version", -1, &st,
					      NULL) == SQLITE_OK &&
			   sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1 &&
			   sqlite3_column_int(st, 1) == 8,
		   "the file is at version 8 and kept its object row");
		sqlite3_finalize(st);
		sqlite3_close(db);
	}
	pcache_tests(dir);
	tap_rmtree(dir);
	return tap_done();
}

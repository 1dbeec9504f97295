/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a persisted put costs SQLite for a few layouts of the objects table, without a master:
 * the rows and statements of src/persist (a 48-byte key, a 42-byte replica, the put's columns),
 * commits of 128 puts in WAL mode with synchronous=NORMAL and a 64 MiB cache as the master's
 * connection has, a passive checkpoint whenever the log holds 1000 pages (the master's
 * threshold; here on the same thread, so its copying counts).  It fills the table with PRE
 * rows, then times N more: CPU (user + system) per put and log frames per commit.
 *
 *   cc -O2 -o /tmp/bench-persist-layout scripts/bench-persist-layout.c -lsqlite3
 *   /tmp/bench-persist-layout LAYOUT ORDER PRE N FILE [PAGE_SIZE]
 *
 * LAYOUT: key (today's: WITHOUT ROWID, keyed by the key), gen (keyed by the put's generation,
 * an INTEGER PRIMARY KEY, no index on the key), gen-hash (gen plus an index on a 64-bit hash of
 * the key), gen-key (an automatic rowid plus a UNIQUE index on the key).  ORDER: sequential
 * (two writers' keys numbered in decimal, interleaved: mooncake_bench's default) or random
 * (scattered, as hashes of KV-cache blocks are).  PRE and N are rounded down to whole commits.
 * FILE and its -wal are replaced.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sqlite3.h>

#define BATCH 128
#define CKPT_PAGES 1000

static long frames;		/* log frames written since the timing began */
static int wal_pages;		/* pages in the log after the last commit */

static int on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
	(void)arg;
	(void)db;
	(void)name;
	frames += pages >= wal_pages ? pages - wal_pages : pages;	/* the log started over */
	wal_pages = pages;
	return SQLITE_OK;
}

static double cpu_s(void)
{
	struct rusage r;

	getrusage(RUSAGE_SELF, &r);
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
	       (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const char *const layouts[] = { "key", "gen", "gen-hash", "gen-key" };

static const char *const ddl[] = {
	"CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, flags INTEGER NOT NULL, "
	"put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL, writer BLOB NOT NULL, "
	"replicas BLOB NOT NULL, gen INTEGER NOT NULL, checksum INTEGER) WITHOUT ROWID",
	"CREATE TABLE objects(gen INTEGER PRIMARY KEY, key BLOB NOT NULL, size INTEGER NOT NULL, "
	"flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL, "
	"writer BLOB NOT NULL, replicas BLOB NOT NULL, checksum INTEGER)",
	"CREATE TABLE objects(gen INTEGER PRIMARY KEY, key BLOB NOT NULL, size INTEGER NOT NULL, "
	"flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT NULL, "
	"writer BLOB NOT NULL, replicas BLOB NOT NULL, checksum INTEGER, kh INTEGER NOT NULL);"
	"CREATE INDEX objects_kh ON objects(kh)",
	"CREATE TABLE objects(id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, size INTEGER NOT "
	"NULL, flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, soft_pin_until_ms INTEGER NOT "
	"NULL, writer BLOB NOT NULL, replicas BLOB NOT NULL, gen INTEGER NOT NULL, checksum INTEGER)",
};

static const char *const insert_sql[] = {
	"INSERT OR REPLACE INTO objects(key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
	"replicas, gen, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	"INSERT OR REPLACE INTO objects(key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
	"replicas, gen, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	"INSERT OR REPLACE INTO objects(key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
	"replicas, gen, checksum, kh) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	"INSERT OR REPLACE INTO objects(key, size, flags, put_start_ms, soft_pin_until_ms, writer, "
	"replicas, gen, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
};

static int exec(sqlite3 *db, const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const uint8_t writer[16] = { 1 }, replica[42] = { 2 };
	uint64_t seed = 88172645463325252ull, gen = 1000000;
	long pre, n, total, i;
	int layout, random, page_size = argc > 6 ? atoi(argv[6]) : 4096;
	double c0 = 0;
	char sql[64], wal[4200], key[48];
	sqlite3_stmt *st;
	sqlite3 *db;

	if (argc < 6) {
		fprintf(stderr, "usage: %s key|gen|gen-hash|gen-key sequential|random PRE N FILE "
				"[PAGE_SIZE]\n", argv[0]);
		return 2;
	}
	for (layout = 0; layout < 4 && strcmp(argv[1], layouts[layout]); layout++)
		;
	random = !strcmp(argv[2], "random");
	pre = atol(argv[3]) / BATCH * BATCH;
	n = atol(argv[4]) / BATCH * BATCH;
	if (layout == 4 || (!random && strcmp(argv[2], "sequential")) || n <= 0 || pre < 0 ||
	    strlen(argv[5]) > 4000) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	snprintf(wal, sizeof(wal), "%s-wal", argv[5]);
	remove(argv[5]);
	remove(wal);
	if (sqlite3_open(argv[5], &db) != SQLITE_OK)
		return 1;
	snprintf(sql, sizeof(sql), "PRAGMA page_size=%d", page_size);
	if (exec(db, sql) || exec(db, "PRAGMA journal_mode=WAL") ||
	    exec(db, "PRAGMA synchronous=NORMAL") || exec(db, "PRAGMA cache_size=-65536") ||
	    exec(db, "PRAGMA wal_autocheckpoint=0") || exec(db, ddl[layout]) ||
	    sqlite3_prepare_v2(db, insert_sql[layout], -1, &st, NULL) != SQLITE_OK)
		return 1;
	total = pre + n;
	for (i = 0; i < total; i++) {
		uint64_t r = next_rand(&seed);

		if (i % BATCH == 0) {
			if (i && exec(db, "COMMIT"))
				return 1;
			if (i == pre) {	/* the timing starts with an empty log */
				exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
				sqlite3_wal_hook(db, on_wal, NULL);
				c0 = cpu_s();
			} else if (i > pre && wal_pages >= CKPT_PAGES) {
				sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
							  NULL);
			} else if (i < pre && i % (BATCH * 512) == 0) {
				exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
			}
			if (exec(db, "BEGIN IMMEDIATE"))
				return 1;
		}
		if (random) {
			snprintf(key, sizeof(key), "bench/4242/%d/%016llx", (int)(i & 1),
				 (unsigned long long)r);
		} else {
			snprintf(key, sizeof(key), "bench/4242/%d/%ld", (int)(i & 1), i / 2);
		}
		memset(key + strlen(key), 'k', sizeof(key) - strlen(key));
		sqlite3_bind_blob(st, 1, key, (int)sizeof(key), SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, 64);
		sqlite3_bind_int64(st, 3, 0);
		sqlite3_bind_int64(st, 4, 1700000000000 + i);
		sqlite3_bind_int64(st, 5, 0);
		sqlite3_bind_blob(st, 6, writer, 16, SQLITE_STATIC);
		sqlite3_bind_blob(st, 7, replica, 42, SQLITE_STATIC);
		sqlite3_bind_int64(st, 8, (sqlite3_int64)gen++);
		sqlite3_bind_null(st, 9);
		if (layout == 2)
			sqlite3_bind_int64(st, 10, (sqlite3_int64)(r * 0x9e3779b97f4a7c15ull));
		if (sqlite3_step(st) != SQLITE_DONE) {
			fprintf(stderr, "insert: %s\n", sqlite3_errmsg(db));
			return 1;
		}
		sqlite3_reset(st);
	}
	if (exec(db, "COMMIT"))
		return 1;
	printf("layout %s, %s keys, page %d, %ld rows before: %.2f us CPU a put, %.1f log frames "
	       "a commit of %d\n", argv[1], argv[2], page_size, pre, (cpu_s() - c0) * 1e6 / n,
	       (double)frames / (double)(n / BATCH), BATCH);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the objects table keyed by generation (schema 8, src/persist): the upgrade of
 * version 7 and older files, two rows of one key at load (the newer wins, the older goes), the
 * replication batch's coalescing by row, and the background loader's view of the same, read by
 * one to eight threads (each row once, a key's rows in two ranges of generations). */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include <sqlite3.h>

#include "common/wire.h"
#include "persist/persist.h"
#include "tap.h"

#define MAXSEEN 16

struct seen {
	int n;
	char key[MAXSEEN][16];
	uint64_t gen[MAXSEEN], size[MAXSEEN], checksum[MAXSEEN];
};

static int on_seg(void *arg, const struct mc_persist_segment *s)
{
	(void)arg;
	(void)s;
	return 0;
}

static int on_obj(void *arg, const struct mc_persist_object *o)
{
	struct seen *x = arg;

	if (x->n < MAXSEEN) {
		snprintf(x->key[x->n], sizeof(x->key[0]), "%.*s", (int)o->key_len, o->key);
		x->gen[x->n] = o->gen;
		x->size[x->n] = o->size;
		x->checksum[x->n] = o->has_checksum ? o->checksum : UINT64_MAX;
	}
	x->n++;
	return 0;
}

static int find(const struct seen *x, const char *key)
{
	int i;

	for (i = 0; i < x->n && i < MAXSEEN; i++)
		if (!strcmp(x->key[i], key))
			return i;
	return -1;
}

static int64_t query(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_open(path, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int exec(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc = sqlite3_open(path, &db);

	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

static void put(struct mc_persist *p, const char *key, uint64_t gen, uint64_t size, uint64_t off)
{
	struct mc_persist_replica r = { .id = gen, .type = 0, .status = 3, .offset = off,
					.len = 64 };
	struct mc_persist_object o = { .key = key, .key_len = strlen(key), .size = size,
				       .gen = gen, .n_replicas = 1, .replicas = &r };

	r.segment_id[0] = 7;
	mc_persist_put_object(p, &o);
}

/* Open DIR/NAME.db for a test into path (n bytes); NULL with a failed check when it cannot. */
static struct mc_persist *open_db(const char *dir, const char *name, char *path, size_t n)
{
	struct mc_persist *p;

	snprintf(path, n, "%s/%s.db", dir, name);
	if (mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p)) {
		ok(0, "open %s", path);
		return NULL;
	}
	return p;
}

#define V7_OBJECTS                                                                          \
	"CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, "               \
	"flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, "                          \
	"soft_pin_until_ms INTEGER NOT NULL, writer BLOB NOT NULL, "                       \
	"replicas BLOB NOT NULL, gen INTEGER NOT NULL DEFAULT 0, checksum INTEGER) "      \
	"WITHOUT ROWID;"
#define SEGMENTS                                                                            \
	"CREATE TABLE segments(id BLOB PRIMARY KEY, client_id BLOB NOT NULL, "             \
	"name TEXT NOT NULL, base INTEGER NOT NULL, size INTEGER NOT NULL, "               \
	"endpoint TEXT NOT NULL, protocol TEXT NOT NULL, kind INTEGER NOT NULL DEFAULT 0"
#define W "x'01000000000000000000000000000000', x''"

static void upgrade_tests(const char *dir)
{
	char v7[300], v2[300];
	struct mc_persist *p;
	struct seen x;
	int a, b, c, d, e;

	/* Version 7: unique generations stay; a generation two rows share and 0 become fresh
	 * ones above every generation the file has seen (its rows' and next_gen). */
	snprintf(v7, sizeof(v7), "%s/v7.db", dir);
	ok(exec(v7, SEGMENTS ", token BLOB, dormant_until_ms INTEGER NOT NULL DEFAULT 0);" V7_OBJECTS
		    "CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
		    "CREATE TABLE records(kind INTEGER NOT NULL, id BLOB NOT NULL, value BLOB NOT "
		    "NULL, PRIMARY KEY(kind, id)) WITHOUT ROWID;"
		    "CREATE TABLE putlog(id INTEGER PRIMARY KEY, recs BLOB NOT NULL);"
		    "INSERT INTO meta VALUES ('next_gen', 500);"
		    "INSERT INTO objects VALUES (x'61', 1, 0, 1, 0, " W ", 10, 42);"
		    "INSERT INTO objects VALUES (x'62', 2, 0, 1, 0, " W ", 20, NULL);"
		    "INSERT INTO objects VALUES (x'63', 3, 0, 1, 0, " W ", 20, NULL);"
		    "INSERT INTO objects VALUES (x'64', 4, 0, 1, 0, " W ", 0, NULL);"
		    "INSERT INTO objects VALUES (x'65', 5, 0, 1, 0, " W ", 300, NULL);"
		    "PRAGMA user_version=7;") == SQLITE_OK,
	   "a version 7 file with generations 10, 20 twice, 0 and 300, next_gen 500");
	memset(&x, 0, sizeof(x));
	ok(mc_persist_open(v7, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
		   mc_persist_load(p, on_seg, on_obj, &x) == 0 && x.n == 5,
	   "it opens and its 5 rows load (%d)", x.n);
	a = find(&x, "a");
	b = find(&x, "b");
	c = find(&x, "c");
	d = find(&x, "d");
	e = find(&x, "e");
	ok(a >= 0 && e >= 0 && x.gen[a] == 10 && x.gen[e] == 300 && x.checksum[a] == 42 &&
		   x.size[a] == 1,
	   "unique generations and the other columns are kept");
	ok(b >= 0 && c >= 0 && d >= 0 && x.gen[b] >= 500 && x.gen[c] >= 500 && x.gen[d] >= 500 &&
		   x.gen[b] != x.gen[c] && x.gen[b] != x.gen[d] && x.gen[c] != x.gen[d] &&
		   x.size[b] == 2 && x.size[c] == 3 && x.size[d] == 4,
	   "shared and zero generations get fresh ones at or above next_gen (%llu %llu %llu)",
	   b >= 0 ? (unsigned long long)x.gen[b] : 0ull,
	   c >= 0 ? (unsigned long long)x.gen[c] : 0ull,
	   d >= 0 ? (unsigned long long)x.gen[d] : 0ull);
	ok(b >= 0 && c >= 0 && d >= 0 &&
		   mc_persist_get_meta(p, "next_gen") > (int64_t)x.gen[b] &&
		   mc_persist_get_meta(p, "next_gen") > (int64_t)x.gen[c] &&
		   mc_persist_get_meta(p, "next_gen") > (int64_t)x.gen[d],
	   "next_gen is raised past them (%lld)", (long long)mc_persist_get_meta(p, "next_gen"));
	mc_persist_close(p);
	ok(query(v7, "SELECT user_version FROM pragma_user_version") == 8 &&
		   query(v7, "SELECT count(*) FROM objects") == 5 &&
		   query(v7, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'objects%'") == 1,
	   "the file is at version 8 with one objects table of 5 rows, keyed by generation");
	ok(query(v7, "SELECT count(*) FROM objects WHERE gen = 10 AND key = x'61'") == 1,
	   "a row is found by its generation");

	/* Version 2: objects without generations (all 0) or checksums. */
	snprintf(v2, sizeof(v2), "%s/v2.db", dir);
	ok(exec(v2, SEGMENTS ");"
		    "CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER NOT NULL, "
		    "flags INTEGER NOT NULL, put_start_ms INTEGER NOT NULL, "
		    "soft_pin_until_ms INTEGER NOT NULL, writer BLOB NOT NULL, "
		    "replicas BLOB NOT NULL) WITHOUT ROWID;"
		    "INSERT INTO objects VALUES (x'61', 1, 0, 1, 0, " W ");"
		    "INSERT INTO objects VALUES (x'62', 2, 0, 1, 0, " W ");"
		    "PRAGMA user_version=2;") == SQLITE_OK,
	   "a version 2 file with two rows and no generations");
	memset(&x, 0, sizeof(x));
	ok(mc_persist_open(v2, MC_PERSIST_SYNC_NORMAL, &p) == 0 &&
		   mc_persist_load(p, on_seg, on_obj, &x) == 0 && x.n == 2 && x.gen[0] != 0 &&
		   x.gen[1] != 0 && x.gen[0] != x.gen[1] && x.checksum[0] == UINT64_MAX &&
		   mc_persist_get_meta(p, "next_gen") > (int64_t)x.gen[0] &&
		   mc_persist_get_meta(p, "next_gen") > (int64_t)x.gen[1],
	   "it opens; its rows have distinct generations below next_gen, no checksum");
	mc_persist_close(p);
	ok(query(v2, "SELECT user_version FROM pragma_user_version") == 8,
	   "the file is at version 8");
}

static void two_rows_tests(const char *dir)
{
	char path[300];
	struct mc_persist *p;
	struct seen x;
	int k;

	if ((p = open_db(dir, "two", path, sizeof(path))) == NULL)
		return;
	put(p, "k", 5, 1, 64);
	put(p, "j", 7, 3, 128);
	put(p, "k", 9, 2, 192);
	ok(mc_persist_commit(p) == 0 && query(path, "SELECT count(*) FROM objects") == 3,
	   "two rows of one key (generations 5 and 9) and another are in the file");
	memset(&x, 0, sizeof(x));
	ok(mc_persist_load(p, on_seg, on_obj, &x) == 0 && x.n == 2, "the load gives 2 rows (%d)",
	   x.n);
	k = find(&x, "k");
	ok(k >= 0 && x.gen[k] == 9 && x.size[k] == 2, "the key's newer row");
	ok(mc_persist_pending(p) == 1 && mc_persist_commit(p) == 0 &&
		   query(path, "SELECT count(*) FROM objects") == 2 &&
		   query(path, "SELECT count(*) FROM objects WHERE gen = 5") == 0,
	   "the older row's deletion is recorded, and goes with the next commit");
	mc_persist_close(p);
}

/* The replication batch coalesces changes of one row, a row being a generation (and its
 * key): a put of a key's new generation overrides nothing of the old one's deletion. */
static void coalesce_tests(const char *dir)
{
	char path[300];
	struct mc_persist *p;
	struct mc_wbuf w;
	struct iovec iov;
	size_t taken;

	if ((p = open_db(dir, "coalesce", path, sizeof(path))) == NULL)
		return;
	put(p, "k", 1, 1, 64);
	mc_persist_commit(p);
	mc_persist_del_object(p, "k", 1, 1);	/* an upsert: the old generation's row goes ... */
	put(p, "k", 2, 2, 64);			/* ... the new one's is written, twice */
	put(p, "k", 2, 2, 64);
	mc_persist_del_object(p, "k", 1, 7);	/* no such row */
	mc_wbuf_init(&w);
	taken = mc_persist_take(p, &w, 1u << 20, SIZE_MAX);
	iov.iov_base = w.data;
	iov.iov_len = w.len;
	ok(taken == 3 && mc_persist_apply_batches(p, &iov, 1) == 0,
	   "the batch is taken coalesced (3 changes of 4: %zu) and applied", taken);
	ok(query(path, "SELECT count(*) FROM objects") == 1 &&
		   query(path, "SELECT gen FROM objects") == 2,
	   "the file holds the new generation's row only");
	mc_wbuf_fini(&w);
	mc_persist_close(p);
}

/* SSD copies adopted from before the database may share a generation (0 for files from before
 * generations): their rows are keyed by their keys' hashes (MC_PERSIST_ROWKEY). */
static void rowkey_tests(const char *dir)
{
	char path[300];
	struct mc_persist *p;
	struct mc_persist_object o = { .size = 1, .gen = 0, .flags = MC_PERSIST_ROWKEY };
	struct seen x;
	int a, b;

	if ((p = open_db(dir, "rowkey", path, sizeof(path))) == NULL)
		return;
	o.key = "ssd/a";
	o.key_len = 5;
	mc_persist_put_object(p, &o);
	o.key = "ssd/b";
	mc_persist_put_object(p, &o);
	put(p, "c", 0, 1, 64);		/* a row of generation 0 keyed by it */
	ok(mc_persist_commit(p) == 0 && query(path, "SELECT count(*) FROM objects") == 3 &&
		   query(path, "SELECT count(*) FROM objects WHERE gen < 0 AND sgen = 0") == 2,
	   "two adopted copies of generation 0 and a row of generation 0 are three rows");
	memset(&x, 0, sizeof(x));
	ok(mc_persist_load(p, on_seg, on_obj, &x) == 0 && x.n == 3, "all three load");
	a = find(&x, "ssd/a");
	b = find(&x, "ssd/b");
	ok(a >= 0 && b >= 0 && x.gen[a] == 0 && x.gen[b] == 0,
	   "with their generation, 0");
	ok(mc_persist_del_object(p, "ssd/a", 5, mc_persist_row("ssd/a", 5, 0, 1)) == 0 &&
		   mc_persist_commit(p) == 0 && query(path, "SELECT count(*) FROM objects") == 2 &&
		   query(path, "SELECT count(*) FROM objects WHERE key = x'7373642f62'") == 1,
	   "one is deleted by its row, the other stays");
	mc_persist_close(p);
}

/* Wait for the end of l's scan, polling at most tries times 20 ms: its state (1 when done). */
static int wait_scanned(struct mc_persist_loader *l, int tries)
{
	struct mc_persist_answer *ans = NULL;
	int state = 0, i;

	for (i = 0; i < tries && state == 0; i++) {
		struct pollfd pfd = { .fd = mc_persist_loader_fd(l), .events = POLLIN };

		poll(&pfd, 1, 20);
		state = mc_persist_loader_poll(l, &ans);
		mc_persist_answer_free(ans);
	}
	return state;
}

/* Rows of the keys n0..n999: generation 100 + i, size 1, at offset 4096 + 64 i. */
static void put_thousand(struct mc_persist *p)
{
	char key[16];
	int i;

	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "n%d", i);
		put(p, key, 100 + (uint64_t)i, 1, 4096 + 64 * (uint64_t)i);
	}
}

static void loader_tests(const char *dir)
{
	char path[300];
	struct mc_persist *p;
	struct mc_persist_loader *l;
	struct mc_persist_rows *chunks;
	struct mc_persist_keyref *refs;
	struct mc_persist_range *ranges;
	const uint8_t(*segids)[16];
	struct mc_persist_object *o;
	size_t nchunks, nrefs, nranges, c, r;
	uint32_t nsegids;
	int older = 0;

	if ((p = open_db(dir, "loader", path, sizeof(path))) == NULL)
		return;
	put_thousand(p);
	put(p, "k", 5, 1, 64);
	put(p, "k", 9000, 2, 128);
	mc_persist_commit(p);
	mc_persist_close(p);
	ok(mc_persist_loader_start(path, &l) == 0, "the loader starts");
	ok(wait_scanned(l, 500) == 1, "the scan ends");
	mc_persist_loader_result(l, &chunks, &nchunks, &refs, &nrefs, &ranges, &nranges, &segids,
				 &nsegids);
	for (c = 0; c < nchunks; c++)
		for (r = 0; r < chunks[c].n; r++)
			older += !!(chunks[c].rows[r].flags & MC_PERSIST_ROW_OLDER);
	ok(nrefs == 1002 && older == 1 && nranges == 1001,
	   "1002 rows: one marked older, its range dropped (%zu %d %zu)", nrefs, older, nranges);
	o = mc_persist_rows_find(chunks, 0, refs, nrefs, "k", 1, &c, &r);
	ok(o && o->gen == 9000 && o->size == 2, "the key's newest row is found");
	o = mc_persist_rows_find(chunks, 0, refs, nrefs, "n777", 4, &c, &r);
	ok(o && o->gen == 877, "any other key's row is found");
	ok(mc_persist_rows_find(chunks, 0, refs, nrefs, "zz", 2, &c, &r) == NULL,
	   "a key not in the file is not");
	mc_persist_loader_free(l);
}

/* What a scan by several threads read, checked against the file: every row once in generation
 * order, every reference once and sorted, the rows of a key in two ranges resolved. */
static void check_scan(struct mc_persist_loader *l, const char *what)
{
	struct mc_persist_rows *chunks;
	struct mc_persist_keyref *refs;
	struct mc_persist_range *ranges;
	const uint8_t(*segids)[16];
	struct mc_persist_object *o;
	size_t nchunks, nrefs, nranges, c, r, i, rows = 0, badref = 0, older = 0, badolder = 0;
	uint64_t last = 0, gensum = 0, want = 0;
	uint32_t nsegids;
	int ordered = 1;
	unsigned char seen[9001] = { 0 };	/* by generation */

	mc_persist_loader_result(l, &chunks, &nchunks, &refs, &nrefs, &ranges, &nranges, &segids,
				 &nsegids);
	for (c = 0; c < nchunks; c++)
		for (r = 0; r < chunks[c].n; r++) {
			o = &chunks[c].rows[r];
			ordered &= o->gen > last;
			last = o->gen;
			gensum += o->gen;
			rows++;
			if (o->flags & MC_PERSIST_ROW_OLDER) {
				older++;
				badolder += !(o->gen == 5 || (o->gen >= 2000 && o->gen < 2050));
			}
		}
	for (i = 0; i < 1000; i++)
		want += 100 + i;
	for (i = 0; i < 50; i++)
		want += 2000 + i + 8000 + i;
	want += 5 + 9000;
	ok(rows == 1102 && gensum == want && ordered,
	   "%s: every row read once, in generation order (%zu rows)", what, rows);
	for (i = 0; i < nrefs; i++) {
		o = refs[i].chunk < nchunks && refs[i].row < chunks[refs[i].chunk].n
			    ? &chunks[refs[i].chunk].rows[refs[i].row] : NULL;
		if (o == NULL || o->gen > 9000 || seen[o->gen]++ ||
		    mc_persist_key_hash(o->key, o->key_len) != refs[i].hash ||
		    (i && refs[i - 1].hash > refs[i].hash))
			badref++;
	}
	ok(nrefs == 1102 && badref == 0, "%s: one reference a row, sorted by hash (%zu bad)", what,
	   badref);
	ok(older == 51 && badolder == 0 && nranges == 1051,
	   "%s: the older row of each key in two ranges is marked, its range dropped (%zu %zu %zu)",
	   what, older, badolder, nranges);
	for (i = 1, badref = 0; i < nranges; i++)
		badref += ranges[i - 1].order > ranges[i].order;
	ok(nsegids == 1 && badref == 0, "%s: the ranges are in offset order", what);
	o = mc_persist_rows_find(chunks, 0, refs, nrefs, "d7", 2, &c, &r);
	ok(o && o->gen == 8007, "%s: a key's newer row in another range is found", what);
	o = mc_persist_rows_find(chunks, 0, refs, nrefs, "k", 1, &c, &r);
	ok(o && o->gen == 9000, "%s: the first and the last generation's key", what);
}

static void loader_threads_tests(const char *dir)
{
	static const char *threads[] = { "1", "2", "3", "4", "8" };
	char path[300];
	struct mc_persist *p;
	struct mc_persist_loader *l;
	size_t i;

	if ((p = open_db(dir, "threads", path, sizeof(path))) == NULL)
		return;
	put_thousand(p);
	for (i = 0; i < 50; i++) {	/* a key's rows far apart: in two ranges */
		char key[16];

		snprintf(key, sizeof(key), "d%zu", i);
		put(p, key, 2000 + i, 1, 1 << 20 | 64 * i);
		put(p, key, 8000 + i, 2, 2 << 20 | 64 * i);
	}
	put(p, "k", 5, 1, 64);
	put(p, "k", 9000, 2, 128);
	mc_persist_commit(p);
	mc_persist_close(p);
	for (i = 0; i < sizeof(threads) / sizeof(threads[0]); i++) {
		char what[32];

		snprintf(what, sizeof(what), "%s loader threads", threads[i]);
		setenv("MC_LOAD_THREADS", threads[i], 1);
		if (mc_persist_loader_start(path, &l) != 0) {
			ok(0, "%s: the loader starts", what);
			continue;
		}
		ok(wait_scanned(l, 1000) == 1, "%s: the scan ends", what);
		check_scan(l, what);
		mc_persist_loader_free(l);
	}
	/* A stop in the middle of a slow scan by four threads. */
	setenv("MC_TEST_LOAD_DELAY_MS", "200", 1);
	setenv("MC_LOAD_THREADS", "4", 1);
	if (mc_persist_loader_start(path, &l) == 0) {
		struct timespec a, b;

		clock_gettime(CLOCK_MONOTONIC, &a);
		mc_persist_loader_free(l);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ok(b.tv_sec - a.tv_sec < 2, "a stop during a scan by four threads ends it at once");
	} else {
		ok(0, "the slow loader starts");
	}
	unsetenv("MC_TEST_LOAD_DELAY_MS");
	/* An empty table. */
	if ((p = open_db(dir, "empty", path, sizeof(path))) == NULL)
		return;
	mc_persist_close(p);
	if (mc_persist_loader_start(path, &l) == 0) {
		struct mc_persist_rows *chunks;
		struct mc_persist_keyref *refs;
		struct mc_persist_range *ranges;
		const uint8_t(*segids)[16];
		size_t nchunks, nrefs, nranges;
		uint32_t nsegids;

		ok(wait_scanned(l, 1000) == 1, "an empty table: the scan ends");
		mc_persist_loader_result(l, &chunks, &nchunks, &refs, &nrefs, &ranges, &nranges,
					 &segids, &nsegids);
		ok(nchunks == 0 && nrefs == 0 && nranges == 0, "an empty table: no rows");
		mc_persist_loader_free(l);
	} else {
		ok(0, "the loader starts on an empty table");
	}
	unsetenv("MC_LOAD_THREADS");
}

int main(void)
{
	char dir[] = "/tmp/mc-layout-XXXXXX";

	if (mkdtemp(dir) == NULL)
		return 1;
	upgrade_tests(dir);
	two_rows_tests(dir);
	coalesce_tests(dir);
	rowkey_tests(dir);
	loader_tests(dir);
	loader_threads_tests(dir);
	tap_rmtree(dir);
	return tap_done();
}

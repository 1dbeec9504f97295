/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the objects table keyed by generation (schema 8, src/persist): the upgrade of
 * version 7 and older files, two rows of one key at load (the newer wins, the older goes), the
 * replication batch's coalescing by row, and the background loader's view of the same, read by
 * one to eight threads, from the file's pages and through SQLite (each row once, a key's rows
 * in two ranges of generations, the parts from the last generations to the first). */
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
#include "sqlite_probe.h"
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

/* What a loader gave: every part taken in its order (polling at most tries times 20 ms), the
 * rows counted by generation (gens[g] for g <= 9000), and whether the parts came from the last
 * generations to the first with each part's rows in generation order.  The loader's state at
 * the end (1 when every part was read). */
struct taken {
	int state;
	size_t rows, parts;
	int ordered;
	uint64_t gensum;
	unsigned char gens[9001];
	uint64_t size_of[9001];
};

static void take_all(struct mc_persist_loader *l, int tries, struct taken *t)
{
	int64_t floor = INT64_MAX;	/* every row so far is below the previous part's first */
	int i, rc = 0;

	memset(t, 0, sizeof(*t));
	t->ordered = 1;
	for (i = 0; i < tries && rc >= 0; i++) {
		struct pollfd pfd = { .fd = mc_persist_loader_fd(l), .events = POLLIN };
		struct mc_persist_answer *ans = NULL;
		struct mc_persist_rows *chunks;
		size_t n, c, r;

		t->state = mc_persist_loader_poll(l, &ans);
		mc_persist_answer_free(ans);
		if (t->state < 0)
			return;
		while ((rc = mc_persist_loader_take(l, &chunks, &n)) == 1) {
			int64_t first = INT64_MAX, last = INT64_MIN;

			t->parts++;
			for (c = 0; c < n; c++) {
				for (r = 0; r < chunks[c].n; r++) {
					const struct mc_persist_object *o = &chunks[c].rows[r];

					t->ordered &= (int64_t)o->row > last;
					last = (int64_t)o->row;
					if (first == INT64_MAX)
						first = (int64_t)o->row;
					t->rows++;
					t->gensum += o->gen;
					if (o->gen <= 9000) {
						t->gens[o->gen]++;
						t->size_of[o->gen] = o->size;
					}
				}
				mc_persist_rows_fini(&chunks[c]);
			}
			free(chunks);
			if (first != INT64_MAX) {
				t->ordered &= last < floor;
				floor = first;
			}
		}
		if (rc == 0)
			poll(&pfd, 1, 20);
	}
	for (i = 0; i < tries; i++) {	/* the loader thread says it is done after the last part */
		struct pollfd pfd = { .fd = mc_persist_loader_fd(l), .events = POLLIN };
		struct mc_persist_answer *ans = NULL;

		t->state = mc_persist_loader_poll(l, &ans);
		mc_persist_answer_free(ans);
		if (t->state != 0)
			break;
		poll(&pfd, 1, 20);
	}
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
	static struct taken t;
	char path[300];
	struct mc_persist *p;
	struct mc_persist_loader *l;

	if ((p = open_db(dir, "loader", path, sizeof(path))) == NULL)
		return;
	put_thousand(p);
	put(p, "k", 5, 1, 64);
	put(p, "k", 9000, 2, 128);
	mc_persist_commit(p);
	mc_persist_close(p);
	ok(mc_persist_loader_start(path, &l) == 0, "the loader starts");
	take_all(l, 500, &t);
	ok(t.state == 1 && t.rows == 1002 && t.ordered,
	   "1002 rows, parts from the newest, rows in order (state %d, %zu rows)", t.state, t.rows);
	ok(t.gens[5] == 1 && t.gens[9000] == 1 && t.size_of[9000] == 2 && t.gens[877] == 1,
	   "both rows of a key are given (the master keeps the newer), and the others");
	mc_persist_loader_free(l);
}

/* What a scan by several threads gave, checked against the file: every row once, the parts
 * from the last generations to the first, rows in order in each. */
static void check_scan(const struct taken *t, const char *what)
{
	uint64_t want = 0;
	size_t i, once = 0;

	for (i = 0; i < 1000; i++)
		want += 100 + i;
	for (i = 0; i < 50; i++)
		want += 2000 + i + 8000 + i;
	want += 5 + 9000;
	for (i = 0; i <= 9000; i++)
		once += t->gens[i] == 1;
	ok(t->state == 1 && t->rows == 1102 && t->gensum == want && once == 1102 && t->ordered,
	   "%s: every row read once, the parts from the newest, rows in order (%zu rows, %zu "
	   "parts)", what, t->rows, t->parts);
}

/* Rows read so far once they stop growing (a few seconds at most). */
static uint64_t rows_settled(struct mc_persist_loader *l)
{
	uint64_t before = UINT64_MAX, now = mc_persist_loader_rows(l);
	int i;

	for (i = 0; i < 40 && now != before; i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		before = now;
		now = mc_persist_loader_rows(l);
	}
	return now;
}

/* A stop (mc_persist_loader_free) of a loader started on path, once its rows stop growing if
 * settle: it must end within a second or two whatever the threads were doing. */
static void stop_at_once(const char *path, int settle, const char *what)
{
	struct mc_persist_loader *l;
	struct timespec a, b;

	if (mc_persist_loader_start(path, &l) != 0) {
		ok(0, "%s: the loader starts", what);
		return;
	}
	if (settle)
		(void)rows_settled(l);
	clock_gettime(CLOCK_MONOTONIC, &a);
	mc_persist_loader_free(l);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ok(b.tv_sec - a.tv_sec < 2, "%s ends it at once", what);
}

static void loader_threads_tests(const char *dir)
{
	static const char *threads[] = { "1", "2", "3", "4", "8" };
	static struct taken t;
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
		char what[48];
		int pages;

		for (pages = 0; pages < 2; pages++) {
			snprintf(what, sizeof(what), "%s loader threads%s", threads[i],
				 pages ? "" : ", through SQLite");
			loader_env(threads[i], pages);
			if (mc_persist_loader_start(path, &l) != 0) {
				ok(0, "%s: the loader starts", what);
				continue;
			}
			take_all(l, 1000, &t);
			check_scan(&t, what);
			ok(pages ? mc_persist_loader_pages(l) == t.parts
				 : mc_persist_loader_pages(l) == 0,
			   "%s: %zu of %zu parts from the pages", what, mc_persist_loader_pages(l),
			   t.parts);
			mc_persist_loader_free(l);
		}
	}
	unsetenv("MC_LOAD_PAGES");
	/* A stop in the middle of a slow scan by four threads. */
	setenv("MC_TEST_LOAD_DELAY_MS", "200", 1);
	setenv("MC_LOAD_THREADS", "4", 1);
	stop_at_once(path, 0, "a stop during a slow scan by four threads");
	unsetenv("MC_TEST_LOAD_DELAY_MS");
	/* An empty table. */
	if ((p = open_db(dir, "empty", path, sizeof(path))) == NULL)
		return;
	mc_persist_close(p);
	if (mc_persist_loader_start(path, &l) == 0) {
		take_all(l, 1000, &t);
		ok(t.state == 1 && t.rows == 0 && t.parts == 0, "an empty table: no part, no rows");
		mc_persist_loader_free(l);
	} else {
		ok(0, "the loader starts on an empty table");
	}
	unsetenv("MC_LOAD_THREADS");
}

/* While the loop takes nothing, the scan stops a part a thread ahead of it (the rows in memory
 * stay a few parts' worth), and goes on as it takes; a stop or a failed scan ends the wait. */
static void loader_ahead_tests(const char *dir)
{
	static const char *threads[] = { "1", "2" };
	static struct taken t;
	char path[300], key[24];
	struct mc_persist *p;
	struct mc_persist_loader *l;
	size_t i, k;

	if ((p = open_db(dir, "ahead", path, sizeof(path))) == NULL)
		return;
	for (i = 0; i < 48000; i++) {
		snprintf(key, sizeof(key), "a%zu", i);
		put(p, key, 1 + i, 1, 64 * (uint64_t)i);
	}
	mc_persist_commit(p);
	mc_persist_close(p);
	for (k = 0; k < 2 * sizeof(threads) / sizeof(threads[0]); k++) {
		const char *nt = threads[k / 2];
		int pages = k % 2;
		uint64_t ahead;

		loader_env(nt, pages);
		if (mc_persist_loader_start(path, &l) != 0) {
			ok(0, "the loader starts");
			continue;
		}
		/* 64 parts a thread of 48000 rows, or fewer (rows counted at each part's end and
		 * every 1024).  A part a thread ahead and the next: well under a quarter. */
		ahead = rows_settled(l);
		ok(ahead > 0 && ahead <= 48000 / 4,
		   "%s thread(s)%s, nothing taken: %llu of 48000 rows read", nt,
		   pages ? "" : " through SQLite", (unsigned long long)ahead);
		take_all(l, 1000, &t);
		ok(t.state == 1 && t.rows == 48000 && t.ordered,
		   "%s thread(s)%s: every row once parts are taken (state %d, %zu rows)", nt,
		   pages ? "" : " through SQLite", t.state, t.rows);
		mc_persist_loader_free(l);
	}
	unsetenv("MC_LOAD_PAGES");
	setenv("MC_LOAD_THREADS", "2", 1);
	stop_at_once(path, 1, "a stop while the scan waits for the loop");
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
	loader_ahead_tests(dir);
	tap_rmtree(dir);
	return tap_done();
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the background load's reading of the objects table from the file's pages
 * (src/persist/persist_pages.c): on a table of several levels, with keys that overflow their
 * page (one and several overflow pages), rows keyed by a key's hash (negative row ids), holes
 * left by deleted rows, every width of integer, rows without checksum, 0 to 3 replicas, and
 * values SQLite stores in an unusual type (text and real in integer columns), the rows read
 * from the pages by 1, 2 and 8 threads are the rows read through SQLite, field for field and
 * in the same order.  A log with frames in it sends the load through SQLite until the log is
 * emptied (mc_persist_truncate_log); pages overwritten with garbage end in the same state as
 * through SQLite, never in a crash. */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "persist/persist.h"
#include "sqlite_probe.h"
#include "tap.h"

#define NROWS 40000

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		h = (h ^ *b++) * 1099511628211ull;
	return h;
}

/* What a loader read: the state it ended in (-2000: rows out of order), the sum of its rows'
 * digests, the rows, and the parts read from pages. */
struct load {
	int state;
	uint64_t digest;
	size_t rows, pages;
};

/* A row's digest. */
static uint64_t row_digest(const struct mc_persist_object *o)
{
	uint64_t d = 14695981039346656037ull;
	uint32_t k;

	d = fnv(d, o->key, o->key_len);
	d = fnv(d, &o->key_len, sizeof(o->key_len));
	d = fnv(d, &o->size, sizeof(o->size));
	d = fnv(d, &o->flags, sizeof(o->flags));
	d = fnv(d, &o->put_start_ms, sizeof(o->put_start_ms));
	d = fnv(d, &o->soft_pin_until_ms, sizeof(o->soft_pin_until_ms));
	d = fnv(d, o->writer, 16);
	d = fnv(d, &o->gen, sizeof(o->gen));
	d = fnv(d, &o->row, sizeof(o->row));
	d = fnv(d, &o->has_checksum, 1);
	d = fnv(d, &o->checksum, sizeof(o->checksum));
	d = fnv(d, &o->n_replicas, sizeof(o->n_replicas));
	for (k = 0; k < o->n_replicas; k++) {
		const struct mc_persist_replica *p = &o->replicas[k];

		d = fnv(d, &p->id, 8);
		d = fnv(d, &p->type, 1);
		d = fnv(d, &p->status, 1);
		d = fnv(d, p->segment_id, 16);
		d = fnv(d, &p->offset, 8);
		d = fnv(d, &p->len, 8);
	}
	return d;
}

/* Every part of path's table taken: the state the loader ends in, the rows (a sum of their
 * digests: the parts differ with the way the table is read, the rows do not; rows in order
 * within each part, parts from the newest), and the parts read from pages. */
static struct load load(const char *path, const char *threads, int pages)
{
	struct load r = { 0 };
	struct mc_persist_loader *l;
	int64_t floor = INT64_MAX;
	int i, rc = 0, ordered = 1;

	loader_env(threads, pages);
	if (mc_persist_loader_start(path, &l) != 0) {
		r.state = -1000;
		return r;
	}
	for (i = 0; i < 3000; i++) {
		struct pollfd pfd = { .fd = mc_persist_loader_fd(l), .events = POLLIN };
		struct mc_persist_answer *ans = NULL;
		struct mc_persist_rows *chunks;
		size_t n, c, k;

		r.state = mc_persist_loader_poll(l, &ans);
		mc_persist_answer_free(ans);
		if (r.state < 0 || (rc < 0 && r.state != 0))
			break;
		while (rc >= 0 && (rc = mc_persist_loader_take(l, &chunks, &n)) == 1) {
			int64_t first = INT64_MAX, last = INT64_MIN;

			for (c = 0; c < n; c++) {
				for (k = 0; k < chunks[c].n; k++) {
					const struct mc_persist_object *o = &chunks[c].rows[k];

					ordered &= (int64_t)o->row > last;
					last = (int64_t)o->row;
					if (first == INT64_MAX)
						first = last;
					r.rows++;
					r.digest += row_digest(o);
				}
				mc_persist_rows_fini(&chunks[c]);
			}
			free(chunks);
			if (first != INT64_MAX) {
				ordered &= last < floor;
				floor = first;
			}
		}
		poll(&pfd, 1, 20);
	}
	if (!ordered)
		r.state = -2000;
	r.pages = mc_persist_loader_pages(l);
	mc_persist_loader_free(l);
	unsetenv("MC_LOAD_PAGES");
	unsetenv("MC_LOAD_THREADS");
	return r;
}

/* Signed values of every width SQLite stores: 0, 1, and 8 to 64 bits, both signs. */
static int64_t width(int i)
{
	static const int64_t v[] = { 0, 1, -1, 100, -100, 30000, -30000, 8000000, -8000000,
				     2000000000, -2000000000, 100000000000000LL,
				     -100000000000000LL, INT64_MAX, INT64_MIN };

	return v[i % (int)(sizeof(v) / sizeof(v[0]))];
}

static void fill(struct mc_persist *p)
{
	static char big[20001];
	struct mc_persist_replica reps[3];
	int i, k;

	for (i = 0; i < NROWS; i++) {
		struct mc_persist_object o = { 0 };
		char key[32];

		snprintf(key, sizeof(key), "p%06d", i);
		o.key = key;
		o.key_len = strlen(key);
		if (i % 997 == 0 || i % 1499 == 0) {	/* one overflow page, or several */
			size_t n = i % 1499 == 0 ? 20000 : 5000;

			memset(big, 'a' + i % 26, n);
			memcpy(big, key, strlen(key));
			o.key = big;
			o.key_len = n;
		}
		o.size = (uint64_t)width(i + 3);
		o.flags = (uint32_t)i & 0xffff;
		if (i % 503 == 0)
			o.flags |= MC_PERSIST_ROWKEY;	/* a negative row id, gen in sgen */
		o.put_start_ms = width(i);
		o.soft_pin_until_ms = width(i + 7);
		o.writer[0] = (uint8_t)i;
		o.writer[15] = (uint8_t)(i >> 8);
		o.gen = 10 + (uint64_t)i;
		o.has_checksum = i % 3 != 0;
		o.checksum = (uint64_t)width(i + 11);
		o.n_replicas = (uint32_t)(i % 4);
		for (k = 0; k < (int)o.n_replicas; k++) {
			memset(&reps[k], 0, sizeof(reps[k]));
			reps[k].id = (uint64_t)i * 4 + (uint64_t)k;
			reps[k].type = (uint8_t)(k == 2 ? 1 : 0);
			reps[k].status = 3;
			reps[k].segment_id[0] = (uint8_t)(k + 1);
			reps[k].offset = (uint64_t)i * 4096;
			reps[k].len = 64 * (uint64_t)(1 + i % 5);
		}
		o.replicas = reps;
		mc_persist_put_object(p, &o);
		if (i % 1000 == 999)
			mc_persist_commit(p);
	}
	mc_persist_commit(p);
	for (i = 0; i < NROWS; i += 7) {	/* holes */
		char key[32];

		if (i % 997 == 0 || i % 1499 == 0 || i % 503 == 0)
			continue;
		snprintf(key, sizeof(key), "p%06d", i);
		mc_persist_del_object(p, key, strlen(key), 10 + (uint64_t)i);
	}
	mc_persist_commit(p);
}

/* Churn: a third of the rows deleted at random and new ones put between them (pages split,
 * merge and keep freed space inside). */
static void churn(struct mc_persist *p, unsigned seed)
{
	int i;

	for (i = 0; i < NROWS; i++) {
		char key[32];

		seed = seed * 1103515245u + 12345u;
		snprintf(key, sizeof(key), "p%06d", i);
		if ((seed >> 16) % 3 == 0 && i % 997 && i % 1499 && i % 503)
			mc_persist_del_object(p, key, strlen(key), 10 + (uint64_t)i);
		if ((seed >> 16) % 5 == 0) {
			struct mc_persist_object o = { 0 };
			char nkey[40];

			snprintf(nkey, sizeof(nkey), "churn-%u-%d", seed % 1000, i);
			o.key = nkey;
			o.key_len = strlen(nkey);
			o.size = (uint64_t)i;
			o.gen = 1000000 + (uint64_t)i;
			o.put_start_ms = width(i + 1);
			o.writer[1] = 1;
			mc_persist_put_object(p, &o);
		}
		if (i % 500 == 499)
			mc_persist_commit(p);
	}
	mc_persist_commit(p);
}

/* A file made with pages of psize bytes, reserve of them unused (as a checksum VFS keeps), then
 * filled and churned by the persistence layer. */
static int make_db(const char *path, int psize, int reserve)
{
	struct mc_persist *p;
	sqlite3 *db;
	char sql[64];
	int rc = -1;

	unlink(path);
	if (sqlite3_open(path, &db) == SQLITE_OK) {
		snprintf(sql, sizeof(sql), "PRAGMA page_size=%d; VACUUM", psize);
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
		if (rc == SQLITE_OK && reserve)
			rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, "VACUUM", NULL, NULL, NULL);
	}
	sqlite3_close(db);
	if (rc != SQLITE_OK || mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p))
		return -1;
	fill(p);
	churn(p, (unsigned)psize + (unsigned)reserve);
	mc_persist_close(p);
	return 0;
}

static void same(const char *path, const char *what, int want_pages)
{
	static const char *threads[] = { "1", "2", "8" };
	size_t i;

	for (i = 0; i < sizeof(threads) / sizeof(threads[0]); i++) {
		struct load a = load(path, threads[i], 1), b = load(path, threads[i], 0);

		ok(a.state == 1 && b.state == 1 && a.rows == b.rows && a.digest == b.digest,
		   "%s, %s threads: the pages give the rows SQLite gives (%zu and %zu rows, states %d "
		   "%d)", what, threads[i], a.rows, b.rows, a.state, b.state);
		/* want_pages 2: a part falls back to SQLite, so one part alone may not be read. */
		ok(b.pages == 0 && (want_pages == 2 ? i == 0 || a.pages > 0
				    : want_pages ? a.pages > 0 : a.pages == 0),
		   "%s, %s threads: %zu parts from pages", what, threads[i], a.pages);
	}
}

static int copy(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n = 0;

	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			n = -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return in < 0 || out < 0 || n < 0 ? -1 : 0;
}

/* Overwrite len bytes at offset off of page pgno with garbage from seed. */
static void scribble(const char *path, int64_t pgno, unsigned off, unsigned len, unsigned seed)
{
	unsigned char b[64];
	unsigned i;
	int fd = open(path, O_WRONLY);

	for (i = 0; i < len && i < sizeof(b); i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (unsigned char)(seed >> 16);
	}
	if (fd >= 0) {
		if (pwrite(fd, b, len, (off_t)(pgno - 1) * 4096 + off) != (ssize_t)len)
			ok(0, "scribble on page %lld", (long long)pgno);
		close(fd);
	}
}

int main(void)
{
	char dir[] = "/tmp/mc-pages-XXXXXX", path[300], bad[300];
	struct mc_persist *p;
	int64_t depth, leaves;
	int i;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/pages.db", dir);
	if (mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p)) {
		ok(0, "open %s", path);
		return tap_done();
	}
	fill(p);
	mc_persist_close(p);
	leaves = query(path, "SELECT count(*) FROM dbstat WHERE name = 'objects' AND "
			     "pagetype = 'leaf'");
	depth = query(path, "SELECT count(DISTINCT length(path) - length(replace(path, '/', ''))) "
			    "FROM dbstat WHERE name = 'objects' AND pagetype != 'overflow'");
	ok(leaves > 64 && depth >= 3 && query(path, "SELECT count(*) FROM dbstat WHERE name = "
						    "'objects' AND pagetype = 'overflow'") > 40,
	   "the table has %lld leaves on %lld levels, and overflow pages", (long long)leaves,
	   (long long)depth);
	ok(query(path, "SELECT count(*) FROM objects WHERE gen < 0") > 10,
	   "rows keyed by a key's hash have negative row ids");
	same(path, "a closed file", 1);

	/* Other page sizes, reserved bytes, and churn. */
	{
		static const int formats[][2] = { { 4096, 0 }, { 1024, 0 }, { 65536, 0 },
						  { 4096, 32 } };
		char other[300], what[64];

		snprintf(other, sizeof(other), "%s/other.db", dir);
		for (i = 0; i < (int)(sizeof(formats) / sizeof(formats[0])); i++) {
			snprintf(what, sizeof(what), "pages of %d bytes, %d reserved, churned",
				 formats[i][0], formats[i][1]);
			if (make_db(other, formats[i][0], formats[i][1]) != 0) {
				ok(0, "%s: made", what);
				continue;
			}
			ok(query(other, "PRAGMA page_size") == formats[i][0],
			   "%s: the file's page size", what);
			same(other, what, 1);
		}
	}

	/* A log with frames: through SQLite, until it is emptied. */
	if (mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p) == 0) {
		struct mc_persist_object o = { .key = "late", .key_len = 4, .gen = 1000000 };

		mc_persist_put_object(p, &o);
		mc_persist_commit(p);
		same(path, "a log with a frame", 0);
		ok(mc_persist_truncate_log(p) == 0, "the log is emptied");
		same(path, "an emptied log", 1);
		mc_persist_close(p);
	} else {
		ok(0, "open again");
	}

	/* Text and real values in integer columns: SQLite converts them, the pages do not. */
	ok(exec(path, "UPDATE objects SET put_start_ms = 'abc' WHERE gen = 1234; "
		      "UPDATE objects SET size = 2.5 WHERE gen = 33333; "
		      "UPDATE objects SET checksum = x'0102' WHERE gen = 20001") == SQLITE_OK,
	   "rows with unusual types");
	same(path, "unusual types", 2);

	/* Through a symbolic link with frames in the log: SQLite's log is beside the file. */
	{
		char link[300];

		snprintf(link, sizeof(link), "%s/link.db", dir);
		if (symlink(path, link) == 0 && mc_persist_open(path, MC_PERSIST_SYNC_NORMAL, &p) == 0) {
			struct mc_persist_object o = { .key = "p000001", .key_len = 7, .size = 999,
						       .gen = 11 };

			o.writer[0] = 1;
			mc_persist_put_object(p, &o);	/* the same row, another size */
			mc_persist_commit(p);
			same(link, "a link to a file whose log holds a frame", 0);
			mc_persist_close(p);
		} else {
			ok(0, "a link and the file open");
		}
	}

	/* An interior page whose every child is itself: a walk ends, as SQLite's does. */
	snprintf(bad, sizeof(bad), "%s/bad.db", dir);
	if (copy(path, bad) == 0) {
		int64_t pg = query(bad, "SELECT pageno FROM dbstat WHERE name = 'objects' AND "
					"pagetype = 'internal' AND path != '/' LIMIT 1 OFFSET 1");
		unsigned char page[4096], be[4];
		int fd = open(bad, O_RDWR), n, k;
		struct load a;

		if (pg > 0 && fd >= 0 && pread(fd, page, sizeof(page), (off_t)(pg - 1) * 4096) == 4096) {
			be[0] = (unsigned char)(pg >> 24);
			be[1] = (unsigned char)(pg >> 16);
			be[2] = (unsigned char)(pg >> 8);
			be[3] = (unsigned char)pg;
			n = page[3] << 8 | page[4];
			for (k = 0; k < n; k++)
				memcpy(page + (page[12 + 2 * k] << 8 | page[13 + 2 * k]), be, 4);
			memcpy(page + 8, be, 4);
			if (pwrite(fd, page, sizeof(page), (off_t)(pg - 1) * 4096) != 4096)
				ok(0, "write page %lld", (long long)pg);
		}
		if (fd >= 0)
			close(fd);
		a = load(bad, "2", 1);
		ok(pg > 0 && a.state != 0 && a.state != 1,
		   "page %lld, every child itself: the load ends (state %d)", (long long)pg, a.state);
	} else {
		ok(0, "copy the file");
	}

	/* Garbage on pages: as through SQLite, or a clean failure; never a crash. */
	for (i = 0; i < 12; i++) {
		int64_t pg;
		char sql[200];
		struct load a, b;

		if (copy(path, bad)) {
			ok(0, "copy the file");
			break;
		}
		snprintf(sql, sizeof(sql), "SELECT pageno FROM dbstat WHERE name = 'objects' AND "
			 "pagetype = '%s' ORDER BY pageno LIMIT 1 OFFSET %d",
			 i % 3 == 0 ? "internal" : i % 3 == 1 ? "leaf" : "overflow", i * 5);
		pg = query(bad, sql);
		if (pg <= 0)
			pg = query(bad, "SELECT pageno FROM dbstat WHERE name = 'objects' AND "
					"pagetype = 'leaf' LIMIT 1");
		scribble(bad, pg, i % 2 ? 0 : 8 + (unsigned)i * 37 % 2000, 16 + (unsigned)i,
			 (unsigned)i + 1);
		a = load(bad, "2", 1);
		b = load(bad, "2", 0);
		ok(a.state != 0 && b.state != 0,
		   "garbage on page %lld: the load ends (states %d %d, %zu and %zu rows)",
		   (long long)pg, a.state, b.state, a.rows, b.rows);
	}
	tap_rmtree(dir);
	return tap_done();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The objects table read from the database file's pages (persist_pages.h), for the background
 * load: stepping a statement costs SQLite about 200 ns a row of ten columns, where reading the
 * same row from its b-tree page costs a tenth of that.  The file format is SQLite's documented,
 * stable one (the header, table b-tree pages, cells, overflow chains, records); what this reader
 * does not know it refuses, and the caller reads through SQLite.
 *
 * Why the file's pages are the transaction's.  In WAL mode a reader whose transaction begins
 * while the log holds no frames reads every page from the database file (it takes read mark
 * 0), and no checkpoint copies a page into the file while such a reader is open (backfilling
 * needs that mark exclusively); writers append to the log only.  So the pages are fixed for as
 * long as the caller's read transaction lasts, provided the log was empty when it began.  The
 * caller begins its transactions first and opens this reader after: a log file that is absent
 * or empty now was empty then (frames only grow it until a checkpoint truncates it, and a
 * truncating checkpoint waits for every reader that uses the log).  Without WAL (a rollback
 * journal) a reader's shared lock keeps every writer out of the file.
 *
 * Every offset, length, page number and varint read is checked against the page and the file;
 * each page of a walk is visited once (the tree's depth is bounded, overflow chains by the
 * payload's length), so a corrupt file ends a walk with -1, never a crash or a loop.
 *
 * Threads: the map is read-only; walks of different spans may run on different threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "persist/persist_int.h"
#include "persist/persist_pages.h"

#define MC_PAGES_MAX_DEPTH 24
#define MC_PAGES_MAX_SPANS 65536
#define MC_PAGES_MAX_PAYLOAD (1u << 20)	/* a row: a key, 64 replicas and a few integers */
#define MC_PAGES_COLUMNS 10

/* The objects table's columns, in the order of its CREATE TABLE; gen is the row id. */
static const char *const mc_pages_columns[MC_PAGES_COLUMNS] = {
	"gen", "key", "size", "flags", "put_start_ms", "soft_pin_until_ms", "writer",
	"replicas", "checksum", "sgen",
};

struct mc_pages {
	const uint8_t *map;
	size_t maplen;
	uint32_t psize;		/* bytes a page */
	uint32_t usable;	/* of them, those the b-tree uses (the rest is reserved) */
	uint32_t npages;
	uint32_t root;
	char path[256];
};

/* A walk's state: the file, the caller, and a buffer for payloads that overflow their page. */
struct mc_pages_walk {
	const struct mc_pages *pg;
	mc_pages_row_fn fn;
	void *arg;
	uint8_t *buf;
	size_t bufcap;
	int64_t prev;		/* the last row id given (rows ascend) */
	int any;
	uint32_t visits;	/* b-tree pages visited: a tree holds each once */
	uint32_t bad_page;	/* the page that did not parse */
	const char *why;
};

static uint32_t mc_pages_be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t mc_pages_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* SQLite's varint at p (end: the first byte past what may be read): its length, 0 if cut. */
static int mc_pages_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	int i;

	if (p < end && !(p[0] & 0x80)) {	/* most are one byte: serial types, small sizes */
		*v = p[0];
		return 1;
	}
	for (i = 0; i < 8; i++) {
		if (p + i >= end)
			return 0;
		x = x << 7 | (p[i] & 0x7f);
		if (!(p[i] & 0x80)) {
			*v = x;
			return i + 1;
		}
	}
	if (p + 8 >= end)
		return 0;
	*v = x << 8 | p[8];
	return 9;
}

/* The b-tree page pgno (not page 1, whose header follows the file's), or NULL. */
static const uint8_t *mc_pages_page(const struct mc_pages *pg, uint32_t pgno)
{
	if (pgno < 2 || pgno > pg->npages)
		return NULL;
	return pg->map + (size_t)(pgno - 1) * pg->psize;
}

static int mc_pages_bad(struct mc_pages_walk *w, uint32_t pgno, const char *why)
{
	w->bad_page = pgno;
	w->why = why;
	return -1;
}

/* ------------------------------------------------------------ rows */

/* A column of a record: its serial type and where its bytes are. */
struct mc_pages_col {
	uint64_t type;
	const uint8_t *p;
	uint32_t len;
};

static int mc_pages_is_int(uint64_t t)
{
	return (t >= 1 && t <= 6) || t == 8 || t == 9;
}

/* An integer column's value (NULL reads 0, as sqlite3_column_int64 has it); -1 for a type
 * sqlite3_column_int64 would convert (REAL, TEXT, BLOB), which the reference path handles. */
static int mc_pages_int(const struct mc_pages_col *c, int64_t *v)
{
	uint64_t x = 0;
	uint32_t i;

	if (c->type == 0) {
		*v = 0;
		return 0;
	}
	if (!mc_pages_is_int(c->type))
		return -1;
	if (c->type == 8 || c->type == 9) {
		*v = c->type == 9;
		return 0;
	}
	for (i = 0; i < c->len; i++)
		x = x << 8 | c->p[i];
	if (c->len < 8 && (c->p[0] & 0x80))	/* sign-extend */
		x |= ~(uint64_t)0 << (8 * c->len);
	*v = (int64_t)x;
	return 0;
}

/* A BLOB or TEXT column (NULL: none, length 0); -1 for a number. */
static int mc_pages_bytes(const struct mc_pages_col *c, const uint8_t **p, uint32_t *len)
{
	if (c->type == 0) {
		*p = NULL;
		*len = 0;
		return 0;
	}
	if (c->type < 12)
		return -1;
	*p = c->p;
	*len = c->len;
	return 0;
}

/* Decode the record (len bytes at rec) of row rowid as mc_persist_decode_object reads the
 * columns of ST_LOAD_OBJECTS: 0, or -1 for anything it would read otherwise (the SQLite path
 * decides about such a row). */
static int mc_pages_decode(const uint8_t *rec, uint32_t len, int64_t rowid,
			   struct mc_persist_object *o, struct mc_persist_replica *reps)
{
	struct mc_pages_col col[MC_PAGES_COLUMNS];
	const uint8_t *end = rec + len, *h, *body, *b;
	uint64_t hsize, t;
	uint32_t blen, i, ncol = 0;
	int64_t v;
	int k;

	k = mc_pages_varint(rec, end, &hsize);
	if (k == 0 || hsize > len || hsize < (uint64_t)k)
		return -1;
	h = rec + k;
	body = rec + hsize;
	while (h < rec + hsize) {
		uint64_t sz;

		k = mc_pages_varint(h, rec + hsize, &t);
		if (k == 0 || ncol == MC_PAGES_COLUMNS || t == 10 || t == 11)
			return -1;
		h += k;
		if (t >= 12)
			sz = (t - 12) / 2;
		else
			sz = t <= 4 ? t : t == 5 ? 6 : t <= 7 ? 8 : 0;
		if (sz > (uint64_t)(end - body))
			return -1;
		col[ncol].type = t;
		col[ncol].p = body;
		col[ncol].len = (uint32_t)sz;
		body += sz;
		ncol++;
	}
	if (body != end)	/* SQLite calls such a record corrupt */
		return -1;
	for (i = ncol; i < MC_PAGES_COLUMNS; i++)	/* added after the row was written */
		col[i] = (struct mc_pages_col){ 0, NULL, 0 };
	if (col[0].type != 0)	/* gen is the row id: the record holds NULL */
		return -1;
	if (mc_pages_bytes(&col[1], &b, &blen) || blen == 0)	/* SQLite's blob is NULL */
		return -1;
	o->key = (const char *)b;
	o->key_len = blen;
	if (mc_pages_int(&col[2], &v))
		return -1;
	o->size = (uint64_t)v;
	if (mc_pages_int(&col[3], &v))
		return -1;
	o->flags = (uint32_t)v;
	if (mc_pages_int(&col[4], &o->put_start_ms) || mc_pages_int(&col[5], &o->soft_pin_until_ms))
		return -1;
	if (mc_pages_bytes(&col[6], &b, &blen) || blen != 16)
		return -1;
	memcpy(o->writer, b, 16);
	o->row = (uint64_t)rowid;
	if (col[9].type == 0) {
		o->gen = o->row;
	} else {
		if (mc_pages_int(&col[9], &v))
			return -1;
		o->gen = (uint64_t)v;
	}
	o->has_checksum = col[8].type != 0;
	o->checksum = 0;
	if (o->has_checksum) {
		if (mc_pages_int(&col[8], &v))
			return -1;
		o->checksum = (uint64_t)v;
	}
	if (mc_pages_bytes(&col[7], &b, &blen) ||
	    mc_persist_decode_replicas(b, blen, reps, &o->n_replicas))
		return -1;
	o->replicas = reps;
	return 0;
}

/* The payload of the cell at c on leaf page pgno (page), its local part ending by end: in place
 * when it fits the page, else gathered from its overflow chain into w->buf. */
static int mc_pages_payload(struct mc_pages_walk *w, uint32_t pgno, const uint8_t *c,
			    const uint8_t *end, uint64_t size, const uint8_t **out)
{
	const struct mc_pages *pg = w->pg;
	uint32_t u = pg->usable, x = u - 35, m, local, next, got, chain = 0;
	uint64_t kk;

	if (size <= x) {
		if (size > (uint64_t)(end - c))
			return mc_pages_bad(w, pgno, "a cell runs past its page");
		*out = c;
		return 0;
	}
	if (size > MC_PAGES_MAX_PAYLOAD)
		return mc_pages_bad(w, pgno, "a row too large");
	m = ((u - 12) * 32 / 255) - 23;
	kk = m + ((size - m) % (u - 4));
	local = kk <= x ? (uint32_t)kk : m;
	if ((uint64_t)local + 4 > (uint64_t)(end - c))
		return mc_pages_bad(w, pgno, "a cell runs past its page");
	if (w->bufcap < size) {
		uint8_t *nb = realloc(w->buf, size);

		if (nb == NULL)
			return mc_pages_bad(w, pgno, "out of memory");
		w->buf = nb;
		w->bufcap = size;
	}
	memcpy(w->buf, c, local);
	got = local;
	next = mc_pages_be32(c + local);
	while (got < size) {
		const uint8_t *op = mc_pages_page(pg, next);
		uint32_t take = (uint32_t)(size - got) < u - 4 ? (uint32_t)(size - got) : u - 4;

		/* The chain is as long as the payload says: a loop would exceed it. */
		if (op == NULL || ++chain > size / (u - 4) + 1)
			return mc_pages_bad(w, pgno, "an overflow chain is broken");
		memcpy(w->buf + got, op + 4, take);
		got += take;
		next = mc_pages_be32(op);
	}
	*out = w->buf;
	return 0;
}

static int mc_pages_leaf(struct mc_pages_walk *w, uint32_t pgno, const uint8_t *page,
			 int64_t lo, int64_t hi)
{
	struct mc_persist_replica reps[MC_PERSIST_MAX_REPLICAS];
	const uint8_t *end = page + w->pg->usable;
	uint32_t ncells = mc_pages_be16(page + 3), i;

	if (8 + 2 * (size_t)ncells > w->pg->usable)
		return mc_pages_bad(w, pgno, "too many cells");
	for (i = 0; i < ncells; i++) {
		uint32_t off = mc_pages_be16(page + 8 + 2 * i);
		const uint8_t *c = page + off, *payload;
		struct mc_persist_object o;
		uint64_t size, rowid;
		int k, rc;

		if (off < 8 + 2 * ncells || off >= w->pg->usable)
			return mc_pages_bad(w, pgno, "a cell outside its page");
		k = mc_pages_varint(c, end, &size);
		if (k == 0 || k == 9)	/* SQLite reads a 9-byte size otherwise; none is real */
			return mc_pages_bad(w, pgno, "a cell runs past its page");
		c += k;
		k = mc_pages_varint(c, end, &rowid);
		if (k == 0)
			return mc_pages_bad(w, pgno, "a cell runs past its page");
		c += k;
		if ((int64_t)rowid < lo || (int64_t)rowid > hi ||
		    (w->any && (int64_t)rowid <= w->prev))
			return mc_pages_bad(w, pgno, "rows out of order");
		if (mc_pages_payload(w, pgno, c, end, size, &payload))
			return -1;
		if (mc_pages_decode(payload, (uint32_t)size, (int64_t)rowid, &o, reps))
			return mc_pages_bad(w, pgno, "a row this reader does not decode");
		w->prev = (int64_t)rowid;
		w->any = 1;
		rc = w->fn(w->arg, &o);
		if (rc)
			return rc;
	}
	return 0;
}

/* The children of interior page (pgno) in order, with the row ids each may hold (within
 * [lo, hi]): child(arg, page, lo, hi) for each; its nonzero value ends the loop. */
static int mc_pages_children(struct mc_pages_walk *w, uint32_t pgno, const uint8_t *page,
			     int64_t lo, int64_t hi,
			     int (*child)(void *, uint32_t, int64_t, int64_t), void *arg)
{
	const uint8_t *end = page + w->pg->usable;
	uint32_t ncells = mc_pages_be16(page + 3), i;
	int64_t from = lo;
	int rc;

	if (12 + 2 * (size_t)ncells > w->pg->usable)
		return mc_pages_bad(w, pgno, "too many cells");
	for (i = 0; i <= ncells; i++) {
		uint32_t cpg;
		int64_t to;

		if (i < ncells) {
			uint32_t off = mc_pages_be16(page + 12 + 2 * i);
			uint64_t key;

			if (off < 12 + 2 * ncells || off + 4 > w->pg->usable ||
			    mc_pages_varint(page + off + 4, end, &key) == 0)
				return mc_pages_bad(w, pgno, "a cell outside its page");
			cpg = mc_pages_be32(page + off);
			to = (int64_t)key;
			/* Keys ascend strictly; the largest row id as a key would leave the
			 * children after it nothing (SQLite never writes it). */
			if (to < from || to > hi || to == INT64_MAX)
				return mc_pages_bad(w, pgno, "keys out of order");
		} else {
			cpg = mc_pages_be32(page + 8);
			to = hi;
		}
		rc = child(arg, cpg, from, to);
		if (rc)
			return rc;
		if (i < ncells)
			from = to + 1;	/* below INT64_MAX (above) */
	}
	return 0;
}

struct mc_pages_down {
	struct mc_pages_walk *w;
	int depth;
};

static int mc_pages_descend(struct mc_pages_walk *w, uint32_t pgno, int64_t lo, int64_t hi,
			    int depth);

static int mc_pages_on_child(void *arg, uint32_t pgno, int64_t lo, int64_t hi)
{
	struct mc_pages_down *d = arg;

	return mc_pages_descend(d->w, pgno, lo, hi, d->depth + 1);
}

static int mc_pages_descend(struct mc_pages_walk *w, uint32_t pgno, int64_t lo, int64_t hi,
			    int depth)
{
	const uint8_t *page = mc_pages_page(w->pg, pgno);
	struct mc_pages_down d = { w, depth };

	if (page == NULL)
		return mc_pages_bad(w, pgno, "a page number outside the file");
	if (depth > MC_PAGES_MAX_DEPTH || ++w->visits > w->pg->npages)
		return mc_pages_bad(w, pgno, "the tree is too deep or visits a page twice");
	if (page[0] == 0x0d)
		return mc_pages_leaf(w, pgno, page, lo, hi);
	if (page[0] != 0x05)
		return mc_pages_bad(w, pgno, "not a table b-tree page");
	return mc_pages_children(w, pgno, page, lo, hi, mc_pages_on_child, &d);
}

int mc_pages_walk(struct mc_pages *pg, const struct mc_pages_span *s, mc_pages_row_fn fn,
		  void *arg)
{
	struct mc_pages_walk w = { .pg = pg, .fn = fn, .arg = arg };
	int rc = mc_pages_descend(&w, s->page, s->lo, s->hi, 0);

	if (rc == -1)
		mc_log_warn("loading %s: page %u of the objects table: %s; reading generations "
			    "%lld to %lld through SQLite", pg->path, w.bad_page, w.why,
			    (long long)s->lo, (long long)s->hi);
	free(w.buf);
	return rc;
}

/* ------------------------------------------------------------ the split */

struct mc_pages_level {
	struct mc_pages_span *v;
	size_t n, cap;
};

static int mc_pages_on_span(void *arg, uint32_t pgno, int64_t lo, int64_t hi)
{
	struct mc_pages_level *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct mc_pages_span *nv;

		if (cap > MC_PAGES_MAX_SPANS)
			return 1;
		nv = realloc(l->v, cap * sizeof(*nv));
		if (nv == NULL)
			return 1;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = (struct mc_pages_span){ pgno, lo, hi };
	return 0;
}

int mc_pages_split(struct mc_pages *pg, size_t want, struct mc_pages_span **spans, size_t *n)
{
	struct mc_pages_walk w = { .pg = pg };
	struct mc_pages_level cur = { 0 }, next;
	int depth;

	*spans = NULL;
	*n = 0;
	if (mc_pages_on_span(&cur, pg->root, INT64_MIN, INT64_MAX))
		return -1;
	for (depth = 0; cur.n < want && depth < MC_PAGES_MAX_DEPTH; depth++) {
		const uint8_t *page = mc_pages_page(pg, cur.v[0].page);
		size_t i;
		int rc = 0;

		if (page == NULL || page[0] != 0x05)	/* leaves (or a bad page: the walk says) */
			break;
		memset(&next, 0, sizeof(next));
		for (i = 0; i < cur.n && rc == 0; i++) {
			page = mc_pages_page(pg, cur.v[i].page);
			if (page == NULL || page[0] != 0x05)
				rc = mc_pages_bad(&w, cur.v[i].page, "not an interior page");
			else
				rc = mc_pages_children(&w, cur.v[i].page, page, cur.v[i].lo,
						       cur.v[i].hi, mc_pages_on_span, &next);
		}
		if (rc == 1) {		/* too many subtrees: this level is enough */
			free(next.v);
			break;
		}
		free(cur.v);
		if (rc) {
			free(next.v);
			mc_log_warn("loading %s: page %u of the objects table: %s; reading through "
				    "SQLite", pg->path, w.bad_page, w.why);
			return -1;
		}
		cur = next;
	}
	*spans = cur.v;
	*n = cur.n;
	return 0;
}

/* ------------------------------------------------------------ the estimate */

struct mc_pages_count {
	const struct mc_pages *pg;
	int leafdepth;
	uint64_t leaves, parents, cells, sampled;
	uint32_t visits;	/* interior pages read: a tree holds each once */
	int bad;
};

/* Child i of interior page (ncells cells), 0 if its cell is outside the page. */
static uint32_t mc_pages_child(const struct mc_pages *pg, const uint8_t *page, uint32_t ncells,
			       uint32_t i)
{
	uint32_t off;

	if (i == ncells)
		return mc_pages_be32(page + 8);
	off = mc_pages_be16(page + 12 + 2 * i);
	if (off < 12 + 2 * ncells || off + 4 > pg->usable)
		return 0;
	return mc_pages_be32(page + off);
}

/* The leaves under page pgno at depth: counted from their parents' cells, without reading
 * them but the first child of every 16th parent (their cells, the sample). */
static void mc_pages_count_under(struct mc_pages_count *c, uint32_t pgno, int depth)
{
	const uint8_t *page = mc_pages_page(c->pg, pgno), *leaf;
	uint32_t ncells, i;

	if (page == NULL || depth > c->leafdepth || c->bad || ++c->visits > c->pg->npages) {
		c->bad = 1;
		return;
	}
	ncells = mc_pages_be16(page + 3);
	if (depth == c->leafdepth) {	/* the root alone */
		c->leaves++;
		c->cells += ncells;
		c->sampled++;
		return;
	}
	if (page[0] != 0x05 || 12 + 2 * (size_t)ncells > c->pg->usable) {
		c->bad = 1;
		return;
	}
	if (depth + 1 == c->leafdepth) {
		c->leaves += ncells + 1;
		if (c->parents++ % 16 == 0 &&
		    (leaf = mc_pages_page(c->pg, mc_pages_child(c->pg, page, ncells, 0))) != NULL &&
		    leaf[0] == 0x0d) {
			c->cells += mc_pages_be16(leaf + 3);
			c->sampled++;
		}
		return;
	}
	for (i = 0; i <= ncells && !c->bad; i++)
		mc_pages_count_under(c, mc_pages_child(c->pg, page, ncells, i), depth + 1);
}

uint64_t mc_pages_estimate(struct mc_pages *pg)
{
	struct mc_pages_count c = { .pg = pg };
	const uint8_t *page = mc_pages_page(pg, pg->root);

	/* The depth of the leaves: down the first children. */
	while (page != NULL && page[0] == 0x05 && c.leafdepth < MC_PAGES_MAX_DEPTH) {
		uint32_t ncells = mc_pages_be16(page + 3);

		if (12 + 2 * (size_t)ncells > pg->usable)
			return 0;
		page = mc_pages_page(pg, mc_pages_child(pg, page, ncells, 0));
		c.leafdepth++;
	}
	if (page == NULL || page[0] != 0x0d)
		return 0;
	mc_pages_count_under(&c, pg->root, 0);
	if (c.bad || c.sampled == 0)
		return 0;
	return c.leaves * c.cells / c.sampled;
}

/* ------------------------------------------------------------ open */

static int mc_pages_refuse(const char *path, const char *why)
{
	mc_log_info("loading %s: reading through SQLite (%s)", path, why);
	return -1;
}

/* One integer of a single-row query on db; -1 if none. */
static int64_t mc_pages_query(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The objects table has our columns in our order, gen its row id. */
static int mc_pages_columns_ok(sqlite3 *db)
{
	sqlite3_stmt *st;
	int i = 0, ok = 1;

	if (sqlite3_prepare_v2(db, "SELECT name, type, pk, dflt_value IS NULL FROM "
			       "pragma_table_info('objects')", -1, &st, NULL) != SQLITE_OK)
		return 0;
	while (ok && sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		const char *type = (const char *)sqlite3_column_text(st, 1);

		/* No default: a short record's missing columns read NULL, as here. */
		ok = i < MC_PAGES_COLUMNS && name && !strcmp(name, mc_pages_columns[i]) &&
		     sqlite3_column_int(st, 3) &&
		     (i != 0 || (type && !strcmp(type, "INTEGER") && sqlite3_column_int(st, 2) == 1));
		i++;
	}
	sqlite3_finalize(st);
	return ok && i == MC_PAGES_COLUMNS;
}

int mc_pages_open(sqlite3 *db, const char *path, struct mc_pages **out)
{
	struct mc_pages *pg;
	const char *file;
	struct stat st;
	uint64_t walsize;
	int64_t psize, npages, root;
	void *map;
	int fd;

	*out = NULL;
	if (getenv("MC_LOAD_PAGES") && !strcmp(getenv("MC_LOAD_PAGES"), "0"))
		return mc_pages_refuse(path, "MC_LOAD_PAGES=0");
	if (strlen(path) >= sizeof(pg->path))
		return mc_pages_refuse(path, "a long path");
	/* After the caller's read transaction began: an absent or empty log was empty then
	 * (above).  The file mapped is the one SQLite found (it follows a symbolic link). */
	if (mc_persist_wal_size(db, &walsize) != 0 || walsize != 0)
		return mc_pages_refuse(path, walsize ? "its write-ahead log holds frames"
						     : "its write-ahead log cannot be told");
	file = sqlite3_db_filename(db, "main");
	if (!mc_pages_columns_ok(db))
		return mc_pages_refuse(path, "the objects table's columns are not this reader's");
	psize = mc_pages_query(db, "PRAGMA page_size");
	npages = mc_pages_query(db, "PRAGMA page_count");
	root = mc_pages_query(db, "SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND "
				  "name = 'objects'");
	if (psize < 512 || psize > 65536 || (psize & (psize - 1)) || npages < 2 ||
	    npages > UINT32_MAX || root < 2 || root > npages)
		return mc_pages_refuse(path, "an unexpected page size, count or root");
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return mc_pages_refuse(path, strerror(errno));
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < (uint64_t)psize * (uint64_t)npages) {
		close(fd);
		return mc_pages_refuse(path, "the file is shorter than its pages");
	}
	map = mmap(NULL, (size_t)psize * (size_t)npages, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return mc_pages_refuse(path, strerror(errno));
	pg = calloc(1, sizeof(*pg));
	if (pg == NULL) {
		munmap(map, (size_t)psize * (size_t)npages);
		return mc_pages_refuse(path, "out of memory");
	}
	pg->map = map;
	pg->maplen = (size_t)psize * (size_t)npages;
	pg->psize = (uint32_t)psize;
	pg->npages = (uint32_t)npages;
	pg->root = (uint32_t)root;
	strcpy(pg->path, path);
	/* The file's header: its magic, the same page size, the bytes a page reserves, text in
	 * UTF-8 (SQLite converts UTF-16 text it is asked for as bytes). */
	if (memcmp(pg->map, "SQLite format 3", 16) ||
	    (mc_pages_be16(pg->map + 16) == 1 ? 65536 : mc_pages_be16(pg->map + 16)) != psize ||
	    pg->map[20] > psize - 480 || mc_pages_be32(pg->map + 56) != 1) {
		mc_pages_close(pg);
		return mc_pages_refuse(path, "an unexpected file header");
	}
	pg->usable = pg->psize - pg->map[20];
	*out = pg;
	return 0;
}

void mc_pages_close(struct mc_pages *pg)
{
	if (pg == NULL)
		return;
	munmap((void *)pg->map, pg->maplen);
	free(pg);
}

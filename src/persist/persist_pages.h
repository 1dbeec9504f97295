/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PERSIST_PAGES_H
#define MC_PERSIST_PAGES_H

/*
 * The objects table read straight from the database file's pages (persist_pages.c), private to
 * src/persist: what the background load scans instead of stepping SQLite's statements, when
 * the file allows it.
 */
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

struct mc_persist_object;
struct mc_persist_replica;

/* A subtree of the objects table: its page and the generations (row ids) it may hold. */
struct mc_pages_span {
	uint32_t page;
	int64_t lo, hi;
};

struct mc_pages;

/* Called for each row of a walk in generation order; o's pointers are valid until it returns.
 * A positive value ends the walk, which returns it. */
typedef int (*mc_pages_row_fn)(void *arg, const struct mc_persist_object *o);

/* Map path's file for reading the objects table of db's open read transaction (db: a connection
 * to path whose read transaction has begun).  0 and *out, or -1 (logged at info: the load reads
 * through SQLite) when the file's pages may not be the transaction's: the database has a
 * write-ahead log with frames in it (its pages are the log's), or anything about the file or the
 * table is not as this reader knows it (page format, columns, a WITHOUT ROWID table). */
int mc_pages_open(sqlite3 *db, const char *path, struct mc_pages **out);
void mc_pages_close(struct mc_pages *pg);
/* The table cut into at least want subtrees where it has that many (one level of the tree, in
 * order: *spans, malloc'd, n of them, each a span whose generations follow the previous one's).
 * 0, or -1 on a page that does not parse (logged). */
int mc_pages_split(struct mc_pages *pg, size_t want, struct mc_pages_span **spans, size_t *n);
/* About how many rows the table holds: its leaves, counted from the interior pages (a few
 * hundredths of the tree), times the cells of a sample of them.  0 if a page does not parse. */
uint64_t mc_pages_estimate(struct mc_pages *pg);
/* Every row of span s, in generation order, to fn.  0, fn's nonzero value, or -1 when a page or
 * a row does not parse as this reader expects (logged at warning with the page): the rows
 * given to fn so far are to be dropped, and the span read through SQLite instead, whose reading
 * of the row is the reference. */
int mc_pages_walk(struct mc_pages *pg, const struct mc_pages_span *s, mc_pages_row_fn fn,
		  void *arg);

#endif

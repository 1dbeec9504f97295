/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TESTS_SQLITE_PROBE_H
#define MC_TESTS_SQLITE_PROBE_H

/*
 * Tests that look at a database file behind the persistence layer's back: one value of a
 * query, or a statement run, each on a connection of its own; and the loader's environment.
 */
#include <stdint.h>
#include <stdlib.h>

#include <sqlite3.h>

/* The first column of sql's first row on path as an integer, -1 if none. */
static inline int64_t query(const char *path, const char *sql)
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

/* Run sql (any statements) on path: SQLite's result code. */
static inline int exec(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc = sqlite3_open(path, &db);

	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

/* The next loader started reads with threads threads (MC_LOAD_THREADS), from the file's pages
 * or, pages 0, through SQLite (MC_LOAD_PAGES=0). */
static inline void loader_env(const char *threads, int pages)
{
	setenv("MC_LOAD_THREADS", threads, 1);
	if (pages)
		unsetenv("MC_LOAD_PAGES");
	else
		setenv("MC_LOAD_PAGES", "0", 1);
}

#endif

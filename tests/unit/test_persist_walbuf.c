/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the VFS that writes a transaction's log frames in one write (src/persist/
 * persist_walbuf.c): a commit of many pages is one write to the log; what a commit returned is in
 * the file for another connection and for a process that reopens it after the writer died
 * without closing (kill -9); a transaction larger than the buffer, one whose pages spill and are
 * rewritten before its commit, and one rolled back leave the file as SQLite alone would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "persist/persist_int.h"
#include "tap.h"

/* A VFS under the one tested, counting the writes that reach the log. */
static sqlite3_vfs count_vfs, *count_real;
static sqlite3_io_methods count_io;
static int wal_writes;

struct count_file {
	sqlite3_file base;
	int wal;
	sqlite3_file *real;
};

#define CREAL(f) (((struct count_file *)(f))->real)

static int c_close(sqlite3_file *f) { return CREAL(f)->pMethods->xClose(CREAL(f)); }
static int c_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
	return CREAL(f)->pMethods->xRead(CREAL(f), b, n, o);
}
static int c_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	wal_writes += ((struct count_file *)f)->wal;
	return CREAL(f)->pMethods->xWrite(CREAL(f), b, n, o);
}
static int c_trunc(sqlite3_file *f, sqlite3_int64 s)
{
	return CREAL(f)->pMethods->xTruncate(CREAL(f), s);
}
static int c_sync(sqlite3_file *f, int fl) { return CREAL(f)->pMethods->xSync(CREAL(f), fl); }
static int c_size(sqlite3_file *f, sqlite3_int64 *s)
{
	return CREAL(f)->pMethods->xFileSize(CREAL(f), s);
}
static int c_lock(sqlite3_file *f, int l) { return CREAL(f)->pMethods->xLock(CREAL(f), l); }
static int c_unlock(sqlite3_file *f, int l) { return CREAL(f)->pMethods->xUnlock(CREAL(f), l); }
static int c_ckl(sqlite3_file *f, int *o)
{
	return CREAL(f)->pMethods->xCheckReservedLock(CREAL(f), o);
}
static int c_ctl(sqlite3_file *f, int op, void *a)
{
	return CREAL(f)->pMethods->xFileControl(CREAL(f), op, a);
}
static int c_sector(sqlite3_file *f) { return CREAL(f)->pMethods->xSectorSize(CREAL(f)); }
static int c_caps(sqlite3_file *f) { return CREAL(f)->pMethods->xDeviceCharacteristics(CREAL(f)); }
static int c_shm_map(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp)
{
	return CREAL(f)->pMethods->xShmMap(CREAL(f), pg, sz, ext, pp);
}
static int c_shm_lock(sqlite3_file *f, int off, int n, int fl)
{
	return CREAL(f)->pMethods->xShmLock(CREAL(f), off, n, fl);
}
static void c_shm_barrier(sqlite3_file *f) { CREAL(f)->pMethods->xShmBarrier(CREAL(f)); }
static int c_shm_unmap(sqlite3_file *f, int d) { return CREAL(f)->pMethods->xShmUnmap(CREAL(f), d); }
static int c_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp)
{
	return CREAL(f)->pMethods->xFetch(CREAL(f), o, n, pp);
}
static int c_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p)
{
	return CREAL(f)->pMethods->xUnfetch(CREAL(f), o, p);
}

static int c_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out)
{
	struct count_file *cf = (struct count_file *)f;
	int rc;

	(void)v;
	cf->real = (sqlite3_file *)(cf + 1);
	cf->wal = (flags & SQLITE_OPEN_WAL) != 0;
	rc = count_real->xOpen(count_real, name, cf->real, flags, out);
	cf->base.pMethods = cf->real->pMethods ? &count_io : NULL;
	return rc;
}

static void count_install(void)
{
	count_real = sqlite3_vfs_find(NULL);
	count_vfs = *count_real;
	count_vfs.szOsFile = (int)sizeof(struct count_file) + count_real->szOsFile;
	count_vfs.zName = "test-count";
	count_vfs.xOpen = c_open;
	count_vfs.pNext = NULL;
	count_io = (sqlite3_io_methods){ 3, c_close, c_read, c_write, c_trunc, c_sync, c_size,
					 c_lock, c_unlock, c_ckl, c_ctl, c_sector, c_caps,
					 c_shm_map, c_shm_lock, c_shm_barrier, c_shm_unmap,
					 c_fetch, c_unfetch };
	sqlite3_vfs_register(&count_vfs, 1);
}

static char dir[] = "/tmp/mc-walbuf-XXXXXX";
static char path[256];

static sqlite3 *open_db(int cache_pages)
{
	sqlite3 *db = NULL;
	char sql[128];

	if (sqlite3_open(path, &db) != SQLITE_OK)
		return NULL;
	snprintf(sql, sizeof(sql),
		 "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=%d",
		 cache_pages);
	sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_exec(db, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL);
	return db;
}

static int exec(sqlite3 *db, const char *sql)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		printf("# %s: %s\n", sql, sqlite3_errmsg(db));
	return rc;
}

static long long scalar(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -2;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Insert n rows of len random bytes with ids from first, in one transaction. */
static int insert(sqlite3 *db, int first, int n, int len, int commit)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "BEGIN IMMEDIATE; WITH RECURSIVE c(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM c "
		 "WHERE i < %d) INSERT INTO t SELECT i, randomblob(%d) FROM c; %s",
		 first, first + n - 1, len, commit ? "COMMIT" : "");
	return exec(db, sql);
}

static const char *sum_sql = "SELECT count(*) * 1000003 + sum(id) FROM t";

int main(void)
{
	sqlite3 *db, *reader;
	long long want;
	pid_t pid;
	int status, before;

	count_install();
	ok(mc_persist_walbuf_install() == 1, "the VFS installs over the default");
	ok(mc_persist_walbuf_install() == 1, "a second install changes nothing");
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/t.db", dir);

	db = open_db(2000);
	ok(db != NULL && exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)") == 0,
	   "a database in WAL mode through the VFS");
	before = wal_writes;
	ok(insert(db, 1, 100, 500, 1) == 0, "a commit of 100 rows of 500 bytes");
	/* About 14 pages: 28 writes to the log without the VFS. */
	ok(wal_writes - before == 1, "the commit's frames reach the log in one write (%d)",
	   wal_writes - before);
	reader = open_db(2000);
	ok(reader && scalar(reader, sum_sql) == 100LL * 1000003 + 100 * 101 / 2,
	   "another connection reads every row of the commit");

	before = wal_writes;
	ok(insert(db, 1001, 6000, 1000, 1) == 0, "a commit of about 6 MB, more than the buffer");
	ok(wal_writes - before >= 40 && wal_writes - before < 100,
	   "written in pieces of about 124 KiB (%d writes, 3000 without the VFS)", wal_writes - before);
	want = 6100LL * 1000003 + 100 * 101 / 2 + (1001LL + 7000) * 6000 / 2;
	ok(scalar(reader, sum_sql) == want, "the other connection reads all of it");

	/* A small page cache: the transaction spills frames to the log before its commit and
	 * rewrites pages it spilled; then one rolled back. */
	sqlite3_close(db);
	db = open_db(20);
	ok(exec(db, "BEGIN IMMEDIATE; UPDATE t SET v = randomblob(900) WHERE id % 3 = 0; "
		    "UPDATE t SET v = randomblob(800) WHERE id % 5 = 0; COMMIT") == 0,
	   "a transaction that spills pages and rewrites them commits");
	ok(insert(db, 20001, 3000, 1000, 0) == 0 && exec(db, "ROLLBACK") == 0,
	   "a transaction that spilled is rolled back");
	ok(scalar(reader, sum_sql) == want, "the other connection sees the rolled back rows not");
	ok(insert(db, 30001, 100, 500, 1) == 0, "a commit after the rollback");
	want += 100LL * 1000003 + (30001LL + 30100) * 100 / 2;
	ok(scalar(reader, sum_sql) == want, "and the other connection reads it");
	sqlite3_close(db);

	/* A writer that dies without closing, after a commit and in the middle of another. */
	pid = fork();
	if (pid == 0) {
		db = open_db(20);
		if (db == NULL || insert(db, 40001, 300, 700, 1) != 0 ||
		    insert(db, 50001, 2000, 700, 0) != 0)
			_exit(1);
		_exit(0);
	}
	ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	   WEXITSTATUS(status) == 0, "a writer committed, spilled another transaction, died");
	want += 300LL * 1000003 + (40001LL + 40300) * 300 / 2;
	sqlite3_close(reader);
	reader = open_db(2000);
	ok(reader && scalar(reader, sum_sql) == want,
	   "a new connection reads what it committed and nothing of the rest");
	ok(scalar(reader, "SELECT count(*) FROM pragma_integrity_check WHERE "
			  "integrity_check != 'ok'") == 0, "the file's integrity check passes");
	ok(exec(reader, "PRAGMA wal_checkpoint(TRUNCATE)") == 0 &&
	   scalar(reader, sum_sql) == want, "a checkpoint keeps every row");
	sqlite3_close(reader);

	tap_rmtree(dir);
	return tap_done();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test hook: fault injection for the master's SQLite file, so the tests can show what the
 * master does when its disk fails without needing a full disk or root.
 *
 * Off unless the environment variable MC_TEST_SQLITE_FAULT names a fault point when a database
 * is opened; production runs never set it and never go through this code.  When set, a VFS that
 * wraps the default one is registered as the default, and each point fails like the disk would:
 *   begin       taking the write lock of a transaction fails (SQLITE_IOERR_LOCK), as
 *               BEGIN IMMEDIATE does on a file system gone bad;
 *   insert      an object row insert fails with SQLITE_FULL (a TEMP trigger calling a function;
 *               nothing of it is stored in the file);
 *   commit      writes to the write-ahead log fail with SQLITE_FULL (a full disk at COMMIT);
 *   checkpoint  writes to the database file itself, which in WAL mode only checkpoints do, fail
 *               with SQLITE_IOERR_WRITE;
 *   ckpt_busy   a checkpoint finds the checkpoint lock taken (SQLITE_BUSY), as when another
 *               connection recovers the log's index or checkpoints at that moment.
 * "point:N" fails the point N times then clears; MC_TEST_SQLITE_FAULT_FILE=path makes the
 * point fail only while that file exists, so a test switches the fault on and off (with ":N"
 * as well: N times while it exists; common/fault_hook.h).
 * The loop's thread and the checkpointer's (persist_ckpt.c) go through it, never both at one
 * point: only checkpoints write the database file, and one runs at a time.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/fault_hook.h"
#include "common/log.h"
#include "persist/persist.h"

/* The points, in the order of their names below. */
enum mc_fault_point {
	FP_BEGIN,
	FP_INSERT,
	FP_COMMIT,
	FP_CHECKPOINT,
	FP_CKPT_BUSY,
};

static const char *const mc_fault_names[] = { "begin", "insert", "commit", "checkpoint",
					      "ckpt_busy", NULL };

enum mc_fault_file_kind {
	FK_MAIN,
	FK_WAL,
	FK_OTHER,
};

struct mc_fault_file {
	sqlite3_file base;
	sqlite3_file *real;
	int kind;
	int pad;
};

static struct {
	int installed;
	struct mc_fault_hook hook;
	sqlite3_vfs vfs;
	sqlite3_vfs *real;
	sqlite3_io_methods io;
} mc_fault;

static int mc_fault_fires(enum mc_fault_point point)
{
	return mc_fault_hook_fires(&mc_fault.hook, (int)point);
}

#define REAL(f) (((struct mc_fault_file *)(f))->real)

static int mc_fault_close(sqlite3_file *f)
{
	return REAL(f)->pMethods->xClose(REAL(f));
}

static int mc_fault_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}

static int mc_fault_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
	struct mc_fault_file *ff = (struct mc_fault_file *)f;

	if (ff->kind == FK_WAL && mc_fault_fires(FP_COMMIT))
		return SQLITE_FULL;
	if (ff->kind == FK_MAIN && mc_fault_fires(FP_CHECKPOINT))
		return SQLITE_IOERR_WRITE;
	return ff->real->pMethods->xWrite(ff->real, buf, n, off);
}

static int mc_fault_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int mc_fault_sync(sqlite3_file *f, int flags)
{
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int mc_fault_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int mc_fault_lock(sqlite3_file *f, int level)
{
	return REAL(f)->pMethods->xLock(REAL(f), level);
}

static int mc_fault_unlock(sqlite3_file *f, int level)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), level);
}

static int mc_fault_check_lock(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int mc_fault_control(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int mc_fault_sector(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int mc_fault_caps(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int mc_fault_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}

static int mc_fault_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
	/* Slot 0 of the WAL index locks is the writer's lock, taken by BEGIN IMMEDIATE. */
	if (offset == 0 && flags == (SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE) &&
	    mc_fault_fires(FP_BEGIN))
		return SQLITE_IOERR_LOCK;
	/* Slot 1 is the checkpoint lock, taken exclusive by every checkpoint. */
	if (offset == 1 && flags == (SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE) &&
	    mc_fault_fires(FP_CKPT_BUSY))
		return SQLITE_BUSY;
	return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static void mc_fault_shm_barrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int mc_fault_shm_unmap(sqlite3_file *f, int del)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int mc_fault_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
	return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}

static int mc_fault_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static int mc_fault_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags,
			 int *out_flags)
{
	struct mc_fault_file *ff = (struct mc_fault_file *)f;
	int rc;

	(void)vfs;
	ff->real = (sqlite3_file *)(ff + 1);
	ff->kind = (flags & SQLITE_OPEN_MAIN_DB) ? FK_MAIN
		   : (flags & SQLITE_OPEN_WAL)	 ? FK_WAL
						 : FK_OTHER;
	rc = mc_fault.real->xOpen(mc_fault.real, name, ff->real, flags, out_flags);
	ff->base.pMethods = ff->real->pMethods ? &mc_fault.io : NULL;
	return rc;
}

static int mc_fault_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	(void)vfs;
	return mc_fault.real->xDelete(mc_fault.real, name, sync_dir);
}

static int mc_fault_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	(void)vfs;
	return mc_fault.real->xAccess(mc_fault.real, name, flags, out);
}

static int mc_fault_fullpath(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	(void)vfs;
	return mc_fault.real->xFullPathname(mc_fault.real, name, n, out);
}

static void *mc_fault_dlopen(sqlite3_vfs *vfs, const char *name)
{
	(void)vfs;
	return mc_fault.real->xDlOpen(mc_fault.real, name);
}

static void mc_fault_dlerror(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	mc_fault.real->xDlError(mc_fault.real, n, out);
}

static void (*mc_fault_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
	(void)vfs;
	return mc_fault.real->xDlSym(mc_fault.real, h, sym);
}

static void mc_fault_dlclose(sqlite3_vfs *vfs, void *h)
{
	(void)vfs;
	mc_fault.real->xDlClose(mc_fault.real, h);
}

static int mc_fault_random(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return mc_fault.real->xRandomness(mc_fault.real, n, out);
}

static int mc_fault_sleep(sqlite3_vfs *vfs, int us)
{
	(void)vfs;
	return mc_fault.real->xSleep(mc_fault.real, us);
}

static int mc_fault_time(sqlite3_vfs *vfs, double *out)
{
	(void)vfs;
	return mc_fault.real->xCurrentTime(mc_fault.real, out);
}

static int mc_fault_last_error(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return mc_fault.real->xGetLastError(mc_fault.real, n, out);
}

static int mc_fault_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
	(void)vfs;
	return mc_fault.real->xCurrentTimeInt64(mc_fault.real, out);
}

int mc_persist_fault_install(void)
{
	if (mc_fault.installed)
		return 1;
	if (mc_fault_hook_read(&mc_fault.hook, "MC_TEST_SQLITE_FAULT", mc_fault_names) != 1)
		return 0;
	mc_fault.real = sqlite3_vfs_find(NULL);
	if (mc_fault.real == NULL)
		return 0;
	mc_fault.io = (sqlite3_io_methods){
		.iVersion = 3,
		.xClose = mc_fault_close,
		.xRead = mc_fault_read,
		.xWrite = mc_fault_write,
		.xTruncate = mc_fault_truncate,
		.xSync = mc_fault_sync,
		.xFileSize = mc_fault_size,
		.xLock = mc_fault_lock,
		.xUnlock = mc_fault_unlock,
		.xCheckReservedLock = mc_fault_check_lock,
		.xFileControl = mc_fault_control,
		.xSectorSize = mc_fault_sector,
		.xDeviceCharacteristics = mc_fault_caps,
		.xShmMap = mc_fault_shm_map,
		.xShmLock = mc_fault_shm_lock,
		.xShmBarrier = mc_fault_shm_barrier,
		.xShmUnmap = mc_fault_shm_unmap,
		.xFetch = mc_fault_fetch,
		.xUnfetch = mc_fault_unfetch,
	};
	mc_fault.vfs = (sqlite3_vfs){
		.iVersion = 2,
		.szOsFile = (int)sizeof(struct mc_fault_file) + mc_fault.real->szOsFile,
		.mxPathname = mc_fault.real->mxPathname,
		.zName = "mc-test-fault",
		.xOpen = mc_fault_open,
		.xDelete = mc_fault_delete,
		.xAccess = mc_fault_access,
		.xFullPathname = mc_fault_fullpath,
		.xDlOpen = mc_fault_dlopen,
		.xDlError = mc_fault_dlerror,
		.xDlSym = mc_fault_dlsym,
		.xDlClose = mc_fault_dlclose,
		.xRandomness = mc_fault_random,
		.xSleep = mc_fault_sleep,
		.xCurrentTime = mc_fault_time,
		.xGetLastError = mc_fault_last_error,
		.xCurrentTimeInt64 = mc_fault_time64,
	};
	if (sqlite3_vfs_register(&mc_fault.vfs, 1) != SQLITE_OK)
		return 0;
	mc_fault.installed = 1;
	mc_log_warn("test hook: SQLite fault injection at %s%s%s", mc_fault_names[mc_fault.hook.point],
		    mc_fault.hook.flag_file ? " while this file exists: " : "",
		    mc_fault.hook.flag_file ? mc_fault.hook.flag_file : "");
	return 1;
}

static void mc_fault_sql_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc;
	(void)argv;
	if (mc_fault_fires(FP_INSERT)) {
		sqlite3_result_error_code(ctx, SQLITE_FULL);
		return;
	}
	sqlite3_result_null(ctx);
}

void mc_persist_fault_attach(struct sqlite3 *db)
{
	if (!mc_fault.installed || mc_fault.hook.point != FP_INSERT)
		return;
	if (sqlite3_create_function(db, "mc_test_fault", 0, SQLITE_UTF8, NULL, mc_fault_sql_fn,
				    NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db,
			 "CREATE TEMP TRIGGER IF NOT EXISTS mc_test_fault_insert BEFORE INSERT ON "
			 "main.objects BEGIN SELECT mc_test_fault(); END",
			 NULL, NULL, NULL) != SQLITE_OK)
		mc_log_err("test hook: cannot attach the insert fault: %s", sqlite3_errmsg(db));
}

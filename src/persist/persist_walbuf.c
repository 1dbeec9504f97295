/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One write a commit to the write-ahead log: a VFS over SQLite's default one that gathers the
 * frames of a transaction and hands them to the file in one write, when the frame that commits
 * arrives.
 *
 * SQLite writes each frame of the log as two writes, its 24-byte header and then its page, so a
 * commit of k pages costs 2k pwrite calls (about 17 frames, 34 calls, for a batch of 128 puts
 * and its ends).  Here a frame whose header says it does not commit (bytes 4-7, the database
 * size after a commit, are zero) is held in a buffer of the file, with the frames after it while
 * they continue the buffer; the frame that commits is appended and the whole buffer written at
 * once (in pieces of under 128 KiB, the most the default VFS writes in one call), before its
 * write returns.  So when COMMIT returns, every frame of the transaction is in
 * the file, as without the buffer: what a commit acknowledged survives kill -9 the same.
 *
 * Why holding is safe: frames past the last commit are read by no one.  Other connections (the
 * checkpointer, the loader, the key index's helper) read the log only up to the last commit the
 * shared log index names, which SQLite updates after the commit frame is written; the owning
 * connection reads its file only through this wrapper, which writes the buffer first.  Every
 * other call on the file (read, sync, size, truncate, file control, lock, close) writes the
 * buffer first, and so does a write that does not continue it; a write inside the buffer (SQLite
 * rewriting a frame of the same transaction in place) changes the buffer.  The file's contents
 * after any call are those the same calls would have left without the buffer, only the moment
 * of the write differs.  Anything not recognised as a frame that does not commit (the log's
 * 32-byte header, a write of another size) is written at once with what is held.  A failed write
 * of the buffer is returned to the call that made it (SQLite then rolls the transaction back)
 * and the buffer is dropped, as if those writes had failed.
 *
 * Installed once per process as the default VFS, before any database is opened (the test-only
 * fault VFS, persist_fault.c, then wraps this one).  A file is used by one connection, so by one
 * thread at a time: no locking here.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "persist/persist_int.h"

/* The most a file holds: a larger transaction is written in pieces of about this size. */
#define MC_WALBUF_MAX (4u << 20)
#define MC_WALBUF_FRAME_HDR 24
/* The most one write to the default VFS may carry: its unix write takes under 128 KiB. */
#define MC_WALBUF_PIECE (128u * 1024 - 4096)

enum mc_walbuf_expect {
	WB_NONE,	/* the next write starts a frame */
	WB_PAGE,	/* the page of a frame that does not commit */
	WB_COMMIT_PAGE,	/* the page of the frame that commits */
};

struct mc_walbuf_file {
	sqlite3_file base;
	sqlite3_file *real;
	int wal;		/* a write-ahead log: its frames are gathered */
	int expect;		/* enum mc_walbuf_expect */
	unsigned char *buf;
	size_t len, cap;
	sqlite3_int64 off;	/* the file offset of buf[0] */
};

static struct {
	sqlite3_vfs vfs;
	sqlite3_vfs *real;
	sqlite3_io_methods io;
	int installed;
} mc_walbuf;

static pthread_once_t mc_walbuf_once = PTHREAD_ONCE_INIT;

#define WB(f) ((struct mc_walbuf_file *)(f))
#define REAL(f) (WB(f)->real)

/* Write what f holds; 0 or SQLite's error of the write (what was held is dropped either way). */
static int mc_walbuf_flush(struct mc_walbuf_file *f)
{
	size_t at, n;
	int rc = SQLITE_OK;

	for (at = 0; at < f->len && rc == SQLITE_OK; at += n) {
		n = f->len - at < MC_WALBUF_PIECE ? f->len - at : MC_WALBUF_PIECE;
		rc = f->real->pMethods->xWrite(f->real, f->buf + at, (int)n,
					       f->off + (sqlite3_int64)at);
	}
	f->len = 0;
	f->expect = WB_NONE;
	return rc;
}

static int mc_walbuf_close(sqlite3_file *file)
{
	struct mc_walbuf_file *f = WB(file);
	int rc = mc_walbuf_flush(f), rc2 = f->real->pMethods->xClose(f->real);

	free(f->buf);
	f->buf = NULL;
	f->cap = 0;
	return rc != SQLITE_OK ? rc : rc2;
}

static int mc_walbuf_read(sqlite3_file *file, void *buf, int n, sqlite3_int64 off)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xRead(REAL(file), buf, n, off);
}

/* Room for n more bytes in f's buffer; 0 when it cannot grow (then nothing is held). */
static int mc_walbuf_room(struct mc_walbuf_file *f, size_t n)
{
	size_t cap = f->cap ? f->cap : 65536;
	unsigned char *nb;

	if (f->len + n <= f->cap)
		return 1;
	if (f->len + n > MC_WALBUF_MAX)
		return 0;
	while (cap < f->len + n)
		cap *= 2;
	nb = realloc(f->buf, cap);
	if (nb == NULL)
		return 0;
	f->buf = nb;
	f->cap = cap;
	return 1;
}

static int mc_walbuf_write(sqlite3_file *file, const void *data, int n, sqlite3_int64 off)
{
	struct mc_walbuf_file *f = WB(file);
	const unsigned char *b = data;
	int expect = f->expect, rc;

	if (!f->wal || n <= 0)
		return f->real->pMethods->xWrite(f->real, data, n, off);
	/* A frame of this transaction rewritten in place: it stays held. */
	if (f->len > 0 && off >= f->off && off + n <= f->off + (sqlite3_int64)f->len &&
	    expect == WB_NONE) {
		memcpy(f->buf + (off - f->off), data, (size_t)n);
		return SQLITE_OK;
	}
	if (f->len > 0 && off != f->off + (sqlite3_int64)f->len) {
		if ((rc = mc_walbuf_flush(f)) != SQLITE_OK)
			return rc;
		expect = WB_NONE;
	}
	if (!mc_walbuf_room(f, (size_t)n)) {
		/* Full: what is held goes first, this write continues it. */
		if ((rc = mc_walbuf_flush(f)) != SQLITE_OK)
			return rc;
		if (!mc_walbuf_room(f, (size_t)n))
			return f->real->pMethods->xWrite(f->real, data, n, off);
	}
	if (f->len == 0)
		f->off = off;
	memcpy(f->buf + f->len, data, (size_t)n);
	f->len += (size_t)n;
	if (expect == WB_NONE && n == MC_WALBUF_FRAME_HDR) {
		/* A frame's header: bytes 4-7 are nonzero in the frame that commits. */
		f->expect = (b[4] | b[5] | b[6] | b[7]) ? WB_COMMIT_PAGE : WB_PAGE;
		return SQLITE_OK;
	}
	if (expect == WB_PAGE) {
		f->expect = WB_NONE;
		return SQLITE_OK;
	}
	/* The commit's page, or a write that is no frame: the file gets everything now. */
	return mc_walbuf_flush(f);
}

static int mc_walbuf_truncate(sqlite3_file *file, sqlite3_int64 size)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xTruncate(REAL(file), size);
}

static int mc_walbuf_sync(sqlite3_file *file, int flags)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xSync(REAL(file), flags);
}

static int mc_walbuf_size(sqlite3_file *file, sqlite3_int64 *size)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int mc_walbuf_lock(sqlite3_file *file, int level)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xLock(REAL(file), level);
}

static int mc_walbuf_unlock(sqlite3_file *file, int level)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xUnlock(REAL(file), level);
}

static int mc_walbuf_check_lock(sqlite3_file *file, int *out)
{
	return REAL(file)->pMethods->xCheckReservedLock(REAL(file), out);
}

static int mc_walbuf_control(sqlite3_file *file, int op, void *arg)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xFileControl(REAL(file), op, arg);
}

static int mc_walbuf_sector(sqlite3_file *file)
{
	return REAL(file)->pMethods->xSectorSize(REAL(file));
}

static int mc_walbuf_caps(sqlite3_file *file)
{
	return REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
}

static int mc_walbuf_shm_map(sqlite3_file *file, int pg, int pgsz, int extend,
			     void volatile **pp)
{
	return REAL(file)->pMethods->xShmMap(REAL(file), pg, pgsz, extend, pp);
}

static int mc_walbuf_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
	return REAL(file)->pMethods->xShmLock(REAL(file), offset, n, flags);
}

static void mc_walbuf_shm_barrier(sqlite3_file *file)
{
	REAL(file)->pMethods->xShmBarrier(REAL(file));
}

static int mc_walbuf_shm_unmap(sqlite3_file *file, int del)
{
	return REAL(file)->pMethods->xShmUnmap(REAL(file), del);
}

static int mc_walbuf_fetch(sqlite3_file *file, sqlite3_int64 off, int n, void **pp)
{
	int rc = mc_walbuf_flush(WB(file));

	return rc != SQLITE_OK ? rc : REAL(file)->pMethods->xFetch(REAL(file), off, n, pp);
}

static int mc_walbuf_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p)
{
	return REAL(file)->pMethods->xUnfetch(REAL(file), off, p);
}

static int mc_walbuf_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
			  int *out_flags)
{
	struct mc_walbuf_file *f = WB(file);
	int rc;

	(void)vfs;
	memset(f, 0, sizeof(*f));
	f->real = (sqlite3_file *)(f + 1);
	f->wal = (flags & SQLITE_OPEN_WAL) != 0;
	rc = mc_walbuf.real->xOpen(mc_walbuf.real, name, f->real, flags, out_flags);
	/* The methods of a version below 3 leave the shared-memory and fetch calls out. */
	f->base.pMethods = f->real->pMethods && f->real->pMethods->iVersion >= 3 ? &mc_walbuf.io
										 : NULL;
	if (f->real->pMethods && f->base.pMethods == NULL) {
		f->real->pMethods->xClose(f->real);
		return SQLITE_CANTOPEN;
	}
	return rc;
}

static void mc_walbuf_setup(void)
{
	mc_walbuf.real = sqlite3_vfs_find(NULL);
	if (mc_walbuf.real == NULL || mc_walbuf.real->iVersion < 2)
		return;
	mc_walbuf.io = (sqlite3_io_methods){
		.iVersion = 3,
		.xClose = mc_walbuf_close,
		.xRead = mc_walbuf_read,
		.xWrite = mc_walbuf_write,
		.xTruncate = mc_walbuf_truncate,
		.xSync = mc_walbuf_sync,
		.xFileSize = mc_walbuf_size,
		.xLock = mc_walbuf_lock,
		.xUnlock = mc_walbuf_unlock,
		.xCheckReservedLock = mc_walbuf_check_lock,
		.xFileControl = mc_walbuf_control,
		.xSectorSize = mc_walbuf_sector,
		.xDeviceCharacteristics = mc_walbuf_caps,
		.xShmMap = mc_walbuf_shm_map,
		.xShmLock = mc_walbuf_shm_lock,
		.xShmBarrier = mc_walbuf_shm_barrier,
		.xShmUnmap = mc_walbuf_shm_unmap,
		.xFetch = mc_walbuf_fetch,
		.xUnfetch = mc_walbuf_unfetch,
	};
	/* The default VFS's own calls but xOpen: the files are this wrapper's. */
	mc_walbuf.vfs = *mc_walbuf.real;
	mc_walbuf.vfs.pNext = NULL;
	mc_walbuf.vfs.szOsFile = (int)sizeof(struct mc_walbuf_file) + mc_walbuf.real->szOsFile;
	mc_walbuf.vfs.zName = "mc-walbuf";
	mc_walbuf.vfs.xOpen = mc_walbuf_open;
	mc_walbuf.installed = sqlite3_vfs_register(&mc_walbuf.vfs, 1) == SQLITE_OK;
}

int mc_persist_walbuf_install(void)
{
	pthread_once(&mc_walbuf_once, mc_walbuf_setup);
	return mc_walbuf.installed;
}

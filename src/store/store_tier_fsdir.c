/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared-directory tier on the client side (upstream's legacy DISK replicas, the files of a
 * directory every client and the master mount): when the master runs with
 * --root_fs_dir, PutStart returns a DISK replica naming a file under "<root_fs_dir>/<cluster_id>"
 * (learnt at set-up with GetFsdir) that the writer fills with the raw value before its PutEnd, and
 * a reader whose object has no memory replica left reads that file.
 *
 * A path from the master is used only if it lies under the directory the master announced and
 * has no ".." component, so a confused or hostile master cannot make a client write elsewhere.
 * The writer writes "<path>.<pid>.tmp", fdatasyncs it, renames it and fsyncs the directory
 * before its PutEnd(DISK), so a reader never sees half a value and eviction frees memory only
 * after the file is durable.  The file holds the raw value (upstream's layout); its CRC-32C and
 * size are kept in the extended attribute user.mooncake.crc32c where the file system has user
 * extended attributes.  A reader of the whole value checks it (a partial read checks the whole
 * file first); a file of the wrong size or checksum is an error to the reader, never its bytes,
 * and is forgotten at the master (FS_EVICT with the lost flag) and deleted.
 * A failed or short write revokes only the DISK replica (memory keeps the object) and makes the
 * worker back off: for 200 ms doubling up to 5 s after consecutive failures, new files are not
 * attempted (their DISK replicas are revoked at once); one success resets it.
 *
 * Writes are asynchronous, as upstream's are: the put copies the value into a job, ends its memory
 * replicas and returns; one worker thread per store writes the file, then sends PutEnd(DISK), or
 * PutRevoke(DISK) when the write fails (the memory replicas stay).  At most MC_FS_QUEUE_BYTES are
 * queued; a put beyond that waits.  Closing the store finishes the queued jobs.
 *
 * The same worker is the directory's backend: every second an FsHeartbeat acknowledges the files
 * deleted since the last one, deletes the files the master queued (removed objects, once their
 * lease ended) and learns the bytes of all DISK replicas.  With enable_disk_eviction, when that
 * passes the quota (the master's quota_bytes, or 90% of the file system when it gives 0) the
 * worker asks FS_EVICT for its own oldest files (oldest written first) and deletes only those the
 * master answered 0 for (no reader lease).  Files of other clients are theirs to evict.
 * Reads run on the calling API thread (blocking file I/O, as the get itself blocks).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/crc64.h"
#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "ssd/tier_io.h"
#include "store/store.h"

#define MC_FS_QUEUE_BYTES (256ull << 20)
#define MC_FS_BEAT_MS 1000
#define MC_FS_MAX_OWN 1000000		/* own files remembered for eviction */
#define MC_FS_EVICT_BATCH 64
#define MC_FS_XATTR "user.mooncake.crc32c"	/* u32 crc32c of the value, u64 its size (LE) */
#define MC_FS_BACKOFF_MIN_MS 200
#define MC_FS_BACKOFF_MAX_MS 5000

struct mc_fs_job {
	struct mc_fs_job *next;
	char *key;
	char path[MC_RPC_MAX_PATH + 1];
	uint8_t *buf;
	uint64_t size;
	int upsert;
};

struct mc_fs_own {			/* a file this client wrote, oldest first */
	char *key;
	char *path;
	uint64_t size;
};

struct mc_store_fs {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* jobs queued, space freed, stop */
	struct mc_fs_job *head, *tail;
	uint64_t queued;		/* bytes in jobs */
	int busy;			/* a job is being written */
	int stop;
	/* worker only */
	struct mc_fs_own *own;
	uint32_t nown, own_at, own_cap;	/* own[own_at..nown) are live */
	uint64_t *done;
	uint32_t ndone, done_cap;
	uint64_t used, quota;
	uint32_t fail_streak;		/* consecutive failed writes */
	int64_t retry_at;		/* monotonic ms: no write before (backoff) */
	uint64_t failed, skipped;	/* writes failed, jobs revoked while backing off */
};

/* Copy a checked path into out.  0 or -EINVAL. */
static int mc_fs_checked(struct mc_store *st, struct mc_strv path, char *out, size_t n)
{
	size_t dl = strlen(st->fsdir);

	if (dl == 0 || path.n <= dl + 1 || path.n >= n || memcmp(path.p, st->fsdir, dl) ||
	    path.p[dl] != '/' || memchr(path.p, '\0', path.n))
		return -EINVAL;
	memcpy(out, path.p, path.n);
	out[path.n] = '\0';
	if (strstr(out, "/../") || !strcmp(out + path.n - 3, "/.."))
		return -EINVAL;
	return 0;
}

static int mc_mkdirs(char *path)
{
	char *p;

	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	return 0;
}

/* fsync the directory holding file (the rename that published it).  0 or -errno. */
static int mc_fs_sync_dir(const char *file)
{
	char dir[MC_RPC_MAX_PATH + 1];
	char *slash;
	int fd, rc;

	snprintf(dir, sizeof(dir), "%s", file);
	slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = mc_tier_sync(MC_FAULT_FS_FSYNC, fd, 1);
	close(fd);
	return rc;
}

/* Write the value to path durably: "<path>.<pid>.tmp", its checksum attribute, fdatasync,
 * rename, fsync of the directory.  0, or MC_ERR_INVALID_PARAMS / MC_ERR_WRITE_FAIL with
 * *err = -errno (nothing is left behind on failure). */
static int mc_store_fs_write(struct mc_store *st, struct mc_strv path, const struct mc_iov *parts,
			     uint32_t np, int *err)
{
	char file[MC_RPC_MAX_PATH + 1], tmp[MC_RPC_MAX_PATH + 32];
	uint8_t attr[12];
	uint32_t k, crc = 0;
	off_t off = 0;
	int fd, rc = 0, renamed = 0;

	*err = 0;
	if (mc_fs_checked(st, path, file, sizeof(file))) {
		mc_log_warn("DISK replica path %.*s is not under %s: refused", (int)path.n, path.p,
			    st->fsdir);
		return MC_ERR_INVALID_PARAMS;
	}
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", file, (int)getpid());
	rc = mc_mkdirs(tmp);
	fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = rc ? rc : -errno;
		goto fail;
	}
	for (k = 0; k < np && rc == 0; k++) {
		rc = mc_tier_pwrite(MC_FAULT_FS_WRITE, fd, parts[k].base, (size_t)parts[k].len, off);
		crc = mc_crc32c(crc, parts[k].base, (size_t)parts[k].len);
		off += (off_t)parts[k].len;
	}
	if (rc == 0) {
		mc_put_le32(attr, crc);
		mc_put_le64(attr + 4, (uint64_t)off);
		if (fsetxattr(fd, MC_FS_XATTR, attr, sizeof(attr), 0) != 0 && errno != ENOTSUP)
			rc = -errno;	/* ENOSPC for the attribute block is a full disk too */
	}
	if (rc == 0)
		rc = mc_tier_sync(MC_FAULT_FS_FSYNC, fd, 0);
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0) {
		rc = mc_tier_rename(MC_FAULT_FS_RENAME, tmp, file);
		renamed = rc == 0;
	}
	if (rc == 0)
		rc = mc_fs_sync_dir(file);
	if (rc == 0)
		return 0;
	/* Renamed but its directory entry is not durable: the file must not be announced. */
	unlink(renamed ? file : tmp);
fail:
	*err = rc;
	mc_log_warn("writing DISK replica %s failed: %s", file, strerror(-rc));
	return MC_ERR_WRITE_FAIL;
}

/* Read the ranges of the value in fd (size bytes) and, when the file carries a checksum, check
 * it: over the ranges when they are the whole value in order, else over a pass of the whole
 * file first.  0, -EBADMSG (wrong checksum or short file) or MC_ERR_INVALID_READ. */
static int mc_fs_read_checked(int fd, uint64_t size, const struct mc_get_range *rg, uint32_t nrg)
{
	uint8_t attr[12];
	uint64_t at = 0;
	uint32_t k, crc = 0, want = 0;
	int whole = 1, checked;

	checked = fgetxattr(fd, MC_FS_XATTR, attr, sizeof(attr)) == (ssize_t)sizeof(attr);
	if (checked) {
		want = mc_get_le32(attr);
		if (mc_get_le64(attr + 4) != size)
			return -EBADMSG;
	}
	for (k = 0; k < nrg; k++) {
		whole &= rg[k].src_off == at;
		at += rg[k].len;
	}
	whole &= at == size;
	if (checked && !whole) {
		uint8_t *buf = malloc(1u << 20);
		off_t off = 0;

		if (buf == NULL)
			return MC_ERR_INVALID_READ;
		while ((uint64_t)off < size) {
			ssize_t r = pread(fd, buf, 1u << 20, off);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			crc = mc_crc32c(crc, buf, (size_t)r);
			off += r;
		}
		free(buf);
		if ((uint64_t)off != size || crc != want)
			return -EBADMSG;
		checked = 0;	/* the ranges below are read without a second check */
	}
	crc = 0;
	for (k = 0; k < nrg; k++) {
		uint8_t *p = rg[k].dst;
		uint64_t left = rg[k].len;
		off_t off = (off_t)rg[k].src_off;

		while (left) {
			ssize_t r = pread(fd, p, left > (1u << 30) ? (1u << 30) : (size_t)left, off);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return MC_ERR_INVALID_READ;
			if (r == 0)
				return -EBADMSG;	/* shorter than it was a moment ago */
			if (checked)
				crc = mc_crc32c(crc, p, (size_t)r);
			p += r;
			left -= (uint64_t)r;
			off += r;
		}
	}
	return checked && crc != want ? -EBADMSG : 0;
}

/* A DISK file that fails its size or checksum: ask the master to forget the replica whatever
 * its leases (FS_EVICT with the lost flag), then delete the file. */
static void mc_fs_lost(struct mc_store *st, const char *file, struct mc_strv key, const char *why)
{
	struct mc_rpc_call call;
	int rc;

	mc_log_warn("DISK file %s of %.*s is corrupt (%s): not served, dropping it", file,
		    (int)(key.n > 128 ? 128 : key.n), key.p, why);
	if (key.n == 0)
		return;
	mc_rpc_call_init(&call, MC_OP_FS_EVICT);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_wbuf_u32(&call.req, 1);
	mc_rpc_put_strv(&call.req, key);
	mc_wbuf_u8(&call.req, 1);	/* lost: forget it even while leased */
	rc = mc_store_call(st, &call);
	if (rc == 0)
		rc = call.status;
	if (rc == 0) {
		struct mc_rbuf r;

		mc_rbuf_init(&r, call.resp, call.resp_len);
		rc = mc_rbuf_u32(&r) == 1 ? mc_rbuf_i32(&r) : MC_ERR_RPC_FAIL;
		if (r.err)
			rc = MC_ERR_RPC_FAIL;
	}
	mc_rpc_call_fini(&call);
	/* Forgotten now (0): nobody else deletes it.  Otherwise the master's own drop does. */
	if (rc == 0)
		unlink(file);
}

int mc_store_fs_read(struct mc_store *st, struct mc_strv key, struct mc_strv path, uint64_t size,
		     const struct mc_get_range *rg, uint32_t nrg, const uint64_t *crc64)
{
	char file[MC_RPC_MAX_PATH + 1];
	struct stat sb;
	int fd, rc;

	if (mc_fs_checked(st, path, file, sizeof(file)))
		return MC_ERR_INVALID_PARAMS;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)	/* not reported: this host may just not see the directory */
		return MC_ERR_INVALID_READ;
	if (fstat(fd, &sb) != 0) {
		close(fd);
		return MC_ERR_INVALID_READ;
	}
	if ((uint64_t)sb.st_size != size) {
		close(fd);
		mc_fs_lost(st, file, key, "wrong size");	/* never serve it */
		return MC_ERR_INVALID_READ;
	}
	rc = mc_fs_read_checked(fd, size, rg, nrg);
	close(fd);
	if (rc == -EBADMSG) {
		mc_fs_lost(st, file, key, "checksum mismatch or short file");
		rc = MC_ERR_INVALID_READ;
	}
	if (rc == 0 && crc64 && nrg == 1 && rg[0].len == size) {
		/* The file may be intact and still not hold this object's value (a file without
		 * its checksum attribute, or another writer's): the object's own checksum says. */
		uint64_t crc = mc_crc64(0, rg[0].dst, size);

		if (crc != *crc64) {
			mc_store_count_mismatch(st);
			mc_log_err("checksum mismatch: key %.*s, DISK file %s: expected %016llx, "
				   "read %016llx",
				   (int)(key.n > 128 ? 128 : key.n), key.p, file,
				   (unsigned long long)*crc64, (unsigned long long)crc);
			mc_fs_lost(st, file, key, "object checksum mismatch");
			rc = MC_ERR_CHECKSUM_MISMATCH;
		}
	}
	return rc;
}

static void mc_fs_own_add(struct mc_store_fs *w, const char *key, const char *path, uint64_t size)
{
	if (w->own_at > 0 && w->nown == w->own_cap) {
		memmove(w->own, w->own + w->own_at, (w->nown - w->own_at) * sizeof(*w->own));
		w->nown -= w->own_at;
		w->own_at = 0;
	}
	if (w->nown - w->own_at >= MC_FS_MAX_OWN)
		return;	/* past the bound: this file is evicted by nobody but removal */
	if (w->nown == w->own_cap) {
		uint32_t cap = w->own_cap ? w->own_cap * 2 : 256;
		void *p = realloc(w->own, cap * sizeof(*w->own));

		if (p == NULL)
			return;
		w->own = p;
		w->own_cap = cap;
	}
	w->own[w->nown].key = strdup(key);
	w->own[w->nown].path = strdup(path);
	w->own[w->nown].size = size;
	if (!w->own[w->nown].key || !w->own[w->nown].path) {
		free(w->own[w->nown].key);
		free(w->own[w->nown].path);
		return;
	}
	w->nown++;
}

static void mc_fs_own_pop(struct mc_store_fs *w)
{
	free(w->own[w->own_at].key);
	free(w->own[w->own_at].path);
	w->own_at++;
}

/* Quota exceeded: ask the master to forget our oldest files, delete those it lets go.  Files it
 * keeps for a reader's lease go to the back of the list; files it no longer knows are dropped
 * from the list (a removal deletes them through the heartbeat). */
static void mc_fs_evict(struct mc_store *st, struct mc_store_fs *w, uint64_t need)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t n, i, m;
	uint64_t freed = 0;
	int rounds = 0;

	while (w->used + need > w->quota && w->own_at < w->nown && rounds++ < 16) {
		uint64_t over = w->used + need - w->quota, sum = 0;

		/* Ask for just enough of the oldest files: each one answered 0 must be deleted. */
		for (n = 0; w->own_at + n < w->nown && n < MC_FS_EVICT_BATCH && sum < over; n++)
			sum += w->own[w->own_at + n].size;
		mc_rpc_call_init(&call, MC_OP_FS_EVICT);
		mc_rpc_put_uuid(&call.req, &st->client_id);
		mc_wbuf_u32(&call.req, n);
		for (i = 0; i < n; i++)
			mc_wbuf_cstr(&call.req, w->own[w->own_at + i].key);
		if (mc_store_call(st, &call) != 0 || call.status != 0) {
			mc_rpc_call_fini(&call);
			return;
		}
		mc_rbuf_init(&r, call.resp, call.resp_len);
		m = mc_rbuf_u32(&r);
		for (i = 0; i < n; i++) {
			struct mc_fs_own *f = &w->own[w->own_at];
			int code = i < m ? mc_rbuf_i32(&r) : MC_ERR_RPC_FAIL;

			if (r.err)
				code = MC_ERR_RPC_FAIL;
			if (code == 0) {
				if (unlink(f->path) != 0 && errno != ENOENT)
					mc_log_warn("evicting DISK file %s: %s", f->path,
						    strerror(errno));
				freed += f->size;
				w->used -= f->size < w->used ? f->size : w->used;
			}
			if (code == MC_ERR_OBJECT_HAS_LEASE || code == MC_ERR_RPC_FAIL) {
				struct mc_fs_own keep = *f;

				w->own_at++;	/* to the back, tried again later */
				mc_fs_own_add(w, keep.key, keep.path, keep.size);
				free(keep.key);
				free(keep.path);
			} else {
				mc_fs_own_pop(w);
			}
		}
		mc_rpc_call_fini(&call);
	}
	if (freed)
		mc_log_info("shared directory past its quota: evicted %llu bytes of DISK files",
			    (unsigned long long)freed);
}

/* FsHeartbeat: acknowledge deleted files, delete the ones the master hands out, learn usage. */
static void mc_fs_beat(struct mc_store *st, struct mc_store_fs *w)
{
	struct mc_rpc_call call;
	struct mc_rbuf r;
	uint32_t i, m;

	mc_rpc_call_init(&call, MC_OP_FS_HEARTBEAT);
	mc_rpc_put_uuid(&call.req, &st->client_id);
	mc_wbuf_u32(&call.req, w->ndone);
	for (i = 0; i < w->ndone; i++)
		mc_wbuf_u64(&call.req, w->done[i]);
	if (mc_store_call(st, &call) != 0 || call.status != 0)
		goto out;
	w->ndone = 0;
	mc_rbuf_init(&r, call.resp, call.resp_len);
	w->used = mc_rbuf_u64(&r);
	if (st->fs_quota == 0) {
		uint64_t q = mc_rbuf_u64(&r);

		if (q)
			w->quota = q;
	} else {
		(void)mc_rbuf_u64(&r);
	}
	m = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 12);
	for (i = 0; i < m && r.err == 0; i++) {
		uint64_t id = mc_rbuf_u64(&r);
		struct mc_strv p = mc_rpc_get_strv(&r, MC_RPC_MAX_PATH);
		char file[MC_RPC_MAX_PATH + 1];

		if (r.err)
			break;
		if (mc_fs_checked(st, p, file, sizeof(file)) == 0 && unlink(file) != 0 &&
		    errno != ENOENT)
			mc_log_warn("deleting DISK file %s: %s", file, strerror(errno));
		if (w->ndone == w->done_cap) {
			uint32_t cap = w->done_cap ? w->done_cap * 2 : 64;
			void *np = realloc(w->done, cap * sizeof(*w->done));

			if (np == NULL)
				break;	/* handed out again later */
			w->done = np;
			w->done_cap = cap;
		}
		w->done[w->ndone++] = id;
	}
	if (st->fs_evict && w->quota && w->used > w->quota)
		mc_fs_evict(st, w, 0);
out:
	mc_rpc_call_fini(&call);
}

static void mc_fs_run_job(struct mc_store *st, struct mc_store_fs *w, struct mc_fs_job *j)
{
	struct mc_iov one = { j->buf, j->size };
	struct mc_strv path = { j->path, strlen(j->path) };
	const char *key = j->key;
	int res = MC_ERR_RPC_FAIL, rc, err = 0;
	int64_t now = mc_store_now_ms();

	if (w->fail_streak && now < w->retry_at) {
		/* Backing off after failed writes: memory keeps the object, no file this time. */
		w->skipped++;
		goto revoke;
	}
	/* w->used is an upper bound between heartbeats (files ended since the last one are added
	 * to a figure that may count their reservations already); near the quota a heartbeat gets
	 * the master's exact figure, which includes this file's reservation, and evicts. */
	if (st->fs_evict && w->quota && w->used + j->size > w->quota)
		mc_fs_beat(st, w);
	rc = mc_store_fs_write(st, path, &one, 1, &err);
	if (rc == MC_ERR_WRITE_FAIL) {
		int64_t wait;

		w->failed++;
		if (w->fail_streak < 30)
			w->fail_streak++;
		wait = (int64_t)MC_FS_BACKOFF_MIN_MS << (w->fail_streak - 1);
		w->retry_at = now + (wait > MC_FS_BACKOFF_MAX_MS ? MC_FS_BACKOFF_MAX_MS : wait);
		if (w->fail_streak == 1)
			mc_log_warn("shared directory %s: a write failed (%s); objects stay in memory "
				    "only and writes back off", st->fsdir, strerror(-err));
	} else if (rc == 0 && w->fail_streak) {
		mc_log_warn("shared directory %s: writes resume (%llu failed, %llu skipped while "
			    "backing off)", st->fsdir, (unsigned long long)w->failed,
			    (unsigned long long)w->skipped);
		w->fail_streak = 0;
	}
	if (rc == 0) {
		if (mc_store_put_finish(st, &key, 1, 0, j->upsert, MC_REPLICA_DISK, &res, NULL) == 0 &&
		    res == 0) {
			w->used += j->size;
			mc_fs_own_add(w, j->key, j->path, j->size);
			return;
		}
		/* The object went meanwhile or the writer is not us any more: nobody knows the
		 * file.  If the key was put again, its new DISK replica is not ours to end. */
		mc_log_warn("PutEnd(DISK) of %s: %s; deleting its file", j->key, mc_strerror(res));
		unlink(j->path);
		return;
	}
revoke:
	if (mc_store_put_finish(st, &key, 1, 1, j->upsert, MC_REPLICA_DISK, &res, NULL) != 0 || res)
		mc_log_warn("PutRevoke(DISK) of %s: %s", j->key, mc_strerror(res));
}

static void *mc_fs_main(void *arg)
{
	struct mc_store *st = arg;
	struct mc_store_fs *w = st->fsw;
	int64_t next_beat = mc_store_now_ms();

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct mc_fs_job *j = w->head;
		int64_t now = mc_store_now_ms();

		if (now >= next_beat) {
			pthread_mutex_unlock(&w->mu);
			mc_fs_beat(st, w);
			pthread_mutex_lock(&w->mu);
			next_beat = mc_store_now_ms() + MC_FS_BEAT_MS;
			continue;
		}
		if (j != NULL) {
			w->head = j->next;
			if (w->head == NULL)
				w->tail = NULL;
			w->busy = 1;
			pthread_mutex_unlock(&w->mu);
			mc_fs_run_job(st, w, j);
			pthread_mutex_lock(&w->mu);
			w->busy = 0;
			w->queued -= j->size;
			pthread_cond_broadcast(&w->cv);
			free(j->key);
			free(j->buf);
			free(j);
			continue;
		}
		if (w->stop)
			break;
		{
			struct timespec ts;
			int64_t wait = next_beat - now;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += wait / 1000;
			ts.tv_nsec += (wait % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&w->cv, &w->mu, &ts);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int mc_store_fs_start(struct mc_store *st)
{
	struct mc_store_fs *w;

	if (st->fsdir[0] == '\0' || st->fsw)
		return 0;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->quota = st->fs_quota;
	if (w->quota == 0) {
		/* 90% of the file system holding the directory (or its nearest existing parent). */
		struct statvfs sv;
		char dir[sizeof(st->fsdir)];
		char *slash;

		strcpy(dir, st->fsdir);
		while (statvfs(dir, &sv) != 0 && (slash = strrchr(dir, '/')) != NULL && slash > dir)
			*slash = '\0';
		if (statvfs(dir, &sv) == 0)
			w->quota = (uint64_t)((double)sv.f_blocks * (double)sv.f_frsize * 0.9);
	}
	st->fsw = w;
	if (pthread_create(&w->thread, NULL, mc_fs_main, st) != 0) {
		st->fsw = NULL;
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return -EAGAIN;
	}
	return 0;
}

void mc_store_fs_stop(struct mc_store *st)
{
	struct mc_store_fs *w = st->fsw;

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	while (w->own_at < w->nown)
		mc_fs_own_pop(w);
	free(w->own);
	free(w->done);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
	st->fsw = NULL;
}

void mc_store_fs_submit(struct mc_store *st, const char *key, const char *path,
			const struct mc_iov *parts, uint32_t np, uint64_t size, int upsert)
{
	struct mc_store_fs *w = st->fsw;
	struct mc_fs_job *j;
	uint64_t off = 0;
	uint32_t k;
	int res;

	j = w ? calloc(1, sizeof(*j)) : NULL;
	if (j) {
		j->key = strdup(key);
		j->buf = size ? malloc(size) : NULL;
	}
	if (j == NULL || j->key == NULL || j->buf == NULL || strlen(path) >= sizeof(j->path)) {
		if (j) {
			free(j->key);
			free(j->buf);
			free(j);
		}
		mc_log_warn("DISK replica of %s: no memory to queue its write; revoking it", key);
		mc_store_put_finish(st, &key, 1, 1, upsert, MC_REPLICA_DISK, &res, NULL);
		return;
	}
	strcpy(j->path, path);
	for (k = 0; k < np && off < size; k++) {
		uint64_t len = parts[k].len < size - off ? parts[k].len : size - off;

		memcpy(j->buf + off, parts[k].base, len);
		off += len;
	}
	j->size = size;
	j->upsert = upsert;
	pthread_mutex_lock(&w->mu);
	while (w->queued > 0 && w->queued + size > MC_FS_QUEUE_BYTES)
		pthread_cond_wait(&w->cv, &w->mu);
	w->queued += size;
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

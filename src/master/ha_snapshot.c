/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots of the replicated table, and restoring one (see ha.h; the log is compacted against
 * them in ha_compact.c).
 *
 * Snapshots.  A master started with --enable_oplog_snapshot writes one every
 * --snapshot_interval_seconds (when the log moved since the last) into the local snapshot store,
 * $MOONCAKE_SNAPSHOT_LOCAL_PATH/mooncake_master_snapshot/<cluster_id>/<id>/ (id as upstream's,
 * YYYYMMDD_HHMMSS_mmm): chunk-NNNNN.bin files of at most --snapshot_chunk_object_count objects
 * each, in the batch encoding of src/persist (segments in the first chunk, the meta values, and
 * with them the batch the snapshot is at, in the last), and manifest.txt naming the log, the
 * batch, the counts and each chunk's CRC-32C; latest.txt names the newest.  A thread does it, over
 * its own read transaction on our database file (WAL keeps the loop's writes out of its view),
 * writes into <id>.tmp, syncs, renames: a snapshot is there whole or not at all.  The newest
 * --snapshot_retention_count snapshots are kept.  Then /oplog/<cluster_id>/snapshot in etcd points
 * at it ({"id", "batch", "path", "log_id"}), unless a newer one is there already.
 *
 * Restoring.  A master whose next batch is older than the first one left (it was away, or its
 * file is new) reads the snapshot record, checks the manifest (same log, every chunk's CRC),
 * empties its database and applies the chunks in steps of 20000 changes per loop iteration; the
 * batch the snapshot is at is written last, so a restore cut short starts over.  Then it reads the
 * log from there.  The snapshot directory must be reachable from every master (shared storage)
 * for a master on another machine to restore.
 * Loop thread, except the snapshot writer thread (mc_ha_snap_write), which touches only its job.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/crc32c.h"
#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "coord/etcd.h"
#include "master/ha.h"
#include "master/master.h"
#include "persist/persist.h"

#define MC_SNAP_FORMAT "mooncake-c-oplog-snapshot-1"
#define MC_SNAP_MAX_CHUNKS 100000
#define MC_SNAP_RESTORE_STEP 20000

/* What the writer thread is given and gives back. */
struct mc_snap_job {
	char db[PATH_MAX];
	char root[PATH_MAX];
	char cluster[256];
	int64_t log_id;
	uint64_t chunk_objects;
	int retention;
	uint64_t skip_batch;		/* nothing to do if the file is still at this batch */
	/* results */
	int rc;				/* 0 written, 1 nothing new, < 0 failed */
	char id[32];
	char dir[PATH_MAX];
	uint64_t batch, objects, segments;
	int64_t us;
	char err[200];
};

struct mc_ha_snap {
	struct mc_ha *ha;
	int enabled;
	char root[PATH_MAX];		/* .../mooncake_master_snapshot/<cluster> ("" without) */
	int64_t next_at;
	uint64_t last_batch;
	pthread_t th;
	int running;
	int efd;
	struct event *ev_done;
	struct mc_snap_job job;
	struct mc_etcd_call *record_call;

	/* restoring */
	int restoring;
	int64_t restore_retry_at;
	struct mc_etcd_call *restore_call;
	char rdir[PATH_MAX];
	uint64_t rbatch;
	uint32_t rchunks, rchunk;
	char *rbuf;
	size_t rlen;
	struct mc_rbuf rcur;
	struct event *ev_step;
};

static int64_t mc_snap_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int mc_ha_snap_busy(const struct mc_ha *ha)
{
	return ha->snap && ha->snap->restoring;
}

/* ---------------------------------------------------------------- files */

static int mc_snap_mkdirs(const char *path)
{
	char tmp[PATH_MAX];
	size_t i;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (i = 1; tmp[i]; i++) {
		if (tmp[i] != '/')
			continue;
		tmp[i] = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return -errno;
		tmp[i] = '/';
	}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int mc_snap_fsync_path(const char *path, int dir)
{
	int fd = open(path, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int mc_snap_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), rc = 0;
	const uint8_t *p = data;

	if (fd < 0)
		return -errno;
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Read a whole file (at most max bytes) into a malloc'd buffer with a NUL after it. */
static char *mc_snap_read_file(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	char *buf = NULL;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &sb) != 0 || (uint64_t)sb.st_size > max)
		goto out;
	buf = malloc((size_t)sb.st_size + 1);
	while (buf && got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			buf = NULL;
			break;
		}
		got += (size_t)n;
	}
	if (buf) {
		buf[got] = '\0';
		*len = got;
	}
out:
	if (fd >= 0)
		close(fd);
	return buf;
}

static int mc_snap_id_ok(const char *s)
{
	int i;

	for (i = 0; i < 19; i++)
		if ((i == 8 || i == 15) ? s[i] != '_' : (s[i] < '0' || s[i] > '9'))
			return 0;
	return s[19] == '\0';
}

static int mc_snap_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void mc_snap_remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX + 300];

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* Keep the newest keep snapshots under root. */
static void mc_snap_retain(const char *root, int keep)
{
	DIR *d = opendir(root);
	struct dirent *de;
	char *names[1024], path[PATH_MAX + 64];
	int n = 0, i;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL && n < 1024)
		if (mc_snap_id_ok(de->d_name))
			names[n++] = mc_xstrdup(de->d_name);
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), mc_snap_cmp);
	for (i = 0; i < n; i++) {
		if (i < n - keep) {
			snprintf(path, sizeof(path), "%s/%s", root, names[i]);
			mc_snap_remove_dir(path);
		}
		free(names[i]);
	}
}

/* ---------------------------------------------------------------- the writer thread */

static int mc_snap_chunk(struct mc_snap_job *j, const char *tmp, uint32_t k,
			 const struct mc_wbuf *w, uint32_t *crc)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/chunk-%05u.bin", tmp, k);
	*crc = mc_crc32c(0, w->data, w->len);
	if (mc_snap_write_file(path, w->data, w->len)) {
		snprintf(j->err, sizeof(j->err), "cannot write %.120s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void *mc_ha_snap_write(void *arg)
{
	struct mc_ha_snap *sn = arg;
	struct mc_snap_job *j = &sn->job;
	struct mc_persist_reader *r = NULL;
	struct mc_wbuf w, man;
	char tmp[PATH_MAX + 8], path[PATH_MAX + 64], latest[PATH_MAX + 32];
	uint32_t crcs[MC_SNAP_MAX_CHUNKS > 4096 ? 4096 : MC_SNAP_MAX_CHUNKS];
	uint32_t k = 0, i;
	int64_t t0 = mc_snap_us();
	struct timeval tv;
	struct tm tm;
	uint64_t one = 1;

	mc_wbuf_init(&w);
	mc_wbuf_init(&man);
	j->rc = -1;
	if (mc_persist_reader_open(j->db, &r)) {
		snprintf(j->err, sizeof(j->err), "cannot read %.150s", j->db);
		goto out;
	}
	j->batch = (uint64_t)mc_persist_reader_meta(r, "ha_batch");
	if (mc_persist_reader_meta(r, "ha_log_id") != j->log_id || j->batch == 0 ||
	    j->batch == j->skip_batch) {
		j->rc = 1;
		goto out;
	}
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	snprintf(j->id, sizeof(j->id), "%04d%02d%02d_%02d%02d%02d_%03d",
		 (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100, tm.tm_mday % 100,
		 tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100, (int)(tv.tv_usec / 1000) % 1000);
	snprintf(j->dir, sizeof(j->dir), "%.4000s/%.31s", j->root, j->id);
	snprintf(tmp, sizeof(tmp), "%s.tmp", j->dir);
	if (mc_snap_mkdirs(j->root) || (mkdir(tmp, 0755) != 0 && errno != EEXIST)) {
		snprintf(j->err, sizeof(j->err), "cannot create %.120s: %s", tmp, strerror(errno));
		goto out;
	}
	if (mc_persist_reader_segments(r, &w, &j->segments))
		goto read_failed;
	for (;;) {
		uint64_t n = 0;

		if (mc_persist_reader_objects(r, &w, j->chunk_objects, &n))
			goto read_failed;
		j->objects += n;
		if (n < j->chunk_objects && mc_persist_reader_metas(r, &w))
			goto read_failed;
		if (k == sizeof(crcs) / sizeof(crcs[0])) {
			snprintf(j->err, sizeof(j->err), "more than %u chunks: raise "
				 "--snapshot_chunk_object_count", k);
			goto out;
		}
		if (w.err || mc_snap_chunk(j, tmp, k, &w, &crcs[k]))
			goto out;
		k++;
		mc_wbuf_reset(&w);
		if (n < j->chunk_objects)
			break;
	}
	{
		char line[512];

		snprintf(line, sizeof(line), "format=%s\ncluster=%s\nlog_id=%lld\nbatch=%" PRIu64
			 "\nobjects=%" PRIu64 "\nsegments=%" PRIu64 "\nchunks=%u\n", MC_SNAP_FORMAT,
			 j->cluster, (long long)j->log_id, j->batch, j->objects, j->segments, k);
		mc_wbuf_put(&man, line, strlen(line));
		for (i = 0; i < k; i++) {
			snprintf(line, sizeof(line), "chunk-%05u.bin crc32c=%08x\n", i, crcs[i]);
			mc_wbuf_put(&man, line, strlen(line));
		}
	}
	snprintf(path, sizeof(path), "%s/manifest.txt", tmp);
	if (man.err || mc_snap_write_file(path, man.data, man.len) ||
	    mc_snap_fsync_path(tmp, 1) || rename(tmp, j->dir) != 0 ||
	    mc_snap_fsync_path(j->root, 1)) {
		snprintf(j->err, sizeof(j->err), "cannot finish %.120s: %s", j->dir, strerror(errno));
		goto out;
	}
	/* latest.txt, replaced whole. */
	snprintf(latest, sizeof(latest), "%s/latest.txt.tmp", j->root);
	snprintf(path, sizeof(path), "%s/latest.txt", j->root);
	mc_wbuf_reset(&man);
	mc_wbuf_put(&man, j->id, strlen(j->id));
	mc_wbuf_put(&man, "\n", 1);
	if (mc_snap_write_file(latest, man.data, man.len) == 0)
		rename(latest, path);
	mc_snap_retain(j->root, j->retention);
	j->rc = 0;
	goto out;
read_failed:
	snprintf(j->err, sizeof(j->err), "reading %.150s failed", j->db);
out:
	if (j->rc < 0 && j->dir[0]) {
		snprintf(tmp, sizeof(tmp), "%s.tmp", j->dir);
		mc_snap_remove_dir(tmp);
	}
	mc_persist_reader_close(r);
	mc_wbuf_fini(&w);
	mc_wbuf_fini(&man);
	j->us = mc_snap_us() - t0;
	if (write(sn->efd, &one, sizeof(one)) != sizeof(one))
		mc_log_err("HA: cannot signal the end of a snapshot");
	return NULL;
}

/* ---------------------------------------------------------------- the record in etcd */

static void mc_snap_on_recorded(void *arg, int rc, json_t *reply)
{
	struct mc_ha_snap *sn = arg;

	(void)reply;
	sn->record_call = NULL;
	if (rc)
		mc_log_warn("HA: snapshot %s not recorded in etcd: %s", sn->job.id, mc_strerror(rc));
}

static void mc_snap_on_record_read(void *arg, int rc, json_t *reply)
{
	struct mc_ha_snap *sn = arg;
	struct mc_ha *ha = sn->ha;
	json_t *kv = json_array_get(json_object_get(reply, "kvs"), 0), *old = NULL, *rec, *k, *cmp,
	       *txn;
	size_t len = 0;
	char *v, *s;

	sn->record_call = NULL;
	if (rc)
		return;
	v = kv ? mc_etcd_bytes(kv, "value", &len) : NULL;
	if (v)
		old = json_loads(v, 0, NULL);
	free(v);
	if (old && json_integer_value(json_object_get(old, "batch")) >= (json_int_t)sn->job.batch) {
		json_decref(old);
		return;		/* another master recorded one at least as new */
	}
	json_decref(old);
	rec = json_pack("{sssIsssIsssI}", "id", sn->job.id, "batch", (json_int_t)sn->job.batch,
			"path", sn->job.dir, "log_id", (json_int_t)ha->log_id, "producer", ha->self,
			"objects", (json_int_t)sn->job.objects);
	s = json_dumps(rec, JSON_COMPACT);
	json_decref(rec);
	k = mc_etcd_b64s(ha->snap_key);
	if (kv)
		cmp = json_pack("{sOssssso}", "key", k, "target", "MOD", "result", "EQUAL",
				"mod_revision", mc_etcd_num(mc_etcd_i64(kv, "mod_revision")));
	else
		cmp = json_pack("{sOssssso}", "key", k, "target", "CREATE", "result", "EQUAL",
				"create_revision", mc_etcd_num(0));
	txn = json_pack("{s[o]s[{s{sOso}}]}", "compare", cmp, "success", "request_put", "key", k,
			"value", mc_etcd_b64s(s ? s : "{}"));
	free(s);
	json_decref(k);
	sn->record_call = mc_etcd_post(ha->etcd, "/v3/kv/txn", txn, 5000, mc_snap_on_recorded, sn);
	json_decref(txn);
}

static void mc_snap_on_done(evutil_socket_t fd, short what, void *arg)
{
	struct mc_ha_snap *sn = arg;
	struct mc_ha *ha = sn->ha;
	struct mc_snap_job *j = &sn->job;
	uint64_t v;
	json_t *b;

	(void)what;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	pthread_join(sn->th, NULL);
	sn->running = 0;
	if (j->rc == 1)
		return;
	if (j->rc < 0) {
		ha->x.snapshot_errors++;
		mc_log_err("HA: snapshot failed: %s", j->err);
		return;
	}
	ha->x.snapshots++;
	ha->x.snapshot_us_total += (uint64_t)j->us;
	sn->last_batch = j->batch;
	mc_log_info("HA: snapshot %s at batch %" PRIu64 ": %" PRIu64 " objects, %" PRIu64
		    " segments, in %.1f ms", j->dir, j->batch, j->objects, j->segments,
		    (double)j->us / 1000.0);
	b = json_pack("{so}", "key", mc_etcd_b64s(ha->snap_key));
	sn->record_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, 5000, mc_snap_on_record_read,
				       sn);
	json_decref(b);
}

static void mc_snap_start(struct mc_ha_snap *sn)
{
	struct mc_ha *ha = sn->ha;
	struct mc_master *m = ha->m;
	struct mc_snap_job *j = &sn->job;

	memset(j, 0, sizeof(*j));
	snprintf(j->db, sizeof(j->db), "%s", m->cfg.persist_path);
	snprintf(j->root, sizeof(j->root), "%s", sn->root);
	snprintf(j->cluster, sizeof(j->cluster), "%s", ha->cluster);
	j->log_id = ha->log_id;
	j->chunk_objects = (uint64_t)m->cfg.snapshot_chunk_object_count;
	j->retention = (int)m->cfg.snapshot_retention_count;
	j->skip_batch = sn->last_batch;
	if (pthread_create(&sn->th, NULL, mc_ha_snap_write, sn) != 0) {
		mc_log_err("HA: cannot start the snapshot thread: %s", strerror(errno));
		return;
	}
	sn->running = 1;
}

/* ---------------------------------------------------------------- restoring */

static void mc_restore_fail(struct mc_ha_snap *sn, const char *why)
{
	mc_log_err("HA: cannot restore a snapshot: %s; the log in etcd starts after our batch %"
		   PRIu64 ", so this master cannot follow it until a snapshot is reachable%s",
		   why, sn->ha->applied,
		   sn->root[0] ? "" : " (set MOONCAKE_SNAPSHOT_LOCAL_PATH to the snapshots' directory)");
	free(sn->rbuf);
	sn->rbuf = NULL;
	sn->restoring = 0;
	sn->restore_retry_at = mc_ha_now(sn->ha) + 5000;
}

/* Load chunk k of the snapshot being restored, checking its CRC against the manifest. */
static int mc_restore_load(struct mc_ha_snap *sn, uint32_t k)
{
	char path[PATH_MAX + 64], man[PATH_MAX + 64], want[32];
	size_t len = 0, mlen = 0;
	char *m, *line;
	uint32_t crc;

	free(sn->rbuf);
	snprintf(path, sizeof(path), "%s/chunk-%05u.bin", sn->rdir, k);
	sn->rbuf = mc_snap_read_file(path, (size_t)1 << 36, &len);
	if (sn->rbuf == NULL)
		return -1;
	crc = mc_crc32c(0, sn->rbuf, len);
	snprintf(man, sizeof(man), "%s/manifest.txt", sn->rdir);
	m = mc_snap_read_file(man, 1 << 24, &mlen);
	snprintf(want, sizeof(want), "chunk-%05u.bin crc32c=%08x", k, crc);
	line = m ? strstr(m, want) : NULL;
	free(m);
	if (line == NULL)
		return -1;
	sn->rlen = len;
	mc_rbuf_init(&sn->rcur, sn->rbuf, len);
	return 0;
}

static void mc_restore_on_step(evutil_socket_t fd, short what, void *arg)
{
	struct mc_ha_snap *sn = arg;
	struct mc_ha *ha = sn->ha;
	struct mc_persist *p = ha->m->persist;

	(void)fd;
	(void)what;
	if (!sn->restoring)
		return;
	if (sn->rcur.left == 0) {
		if (++sn->rchunk >= sn->rchunks) {
			uint64_t at = (uint64_t)mc_persist_get_meta(p, "ha_batch");

			free(sn->rbuf);
			sn->rbuf = NULL;
			sn->restoring = 0;
			if (at != sn->rbatch) {
				mc_restore_fail(sn, "the snapshot ends at another batch than its "
						    "manifest says");
				return;
			}
			ha->applied = at;
			ha->x.restores++;
			mc_log_notice("HA: snapshot %s restored: at batch %" PRIu64, sn->rdir, at);
			ha->fetch(ha);
			return;
		}
		if (mc_restore_load(sn, sn->rchunk)) {
			mc_restore_fail(sn, "a chunk is missing or damaged");
			return;
		}
	}
	if (mc_persist_apply_some(p, &sn->rcur, MC_SNAP_RESTORE_STEP)) {
		mc_restore_fail(sn, mc_persist_last_message(p));
		return;
	}
	event_active(sn->ev_step, EV_TIMEOUT, 0);
}

/* The value of "name=" in a manifest, or NULL. */
static const char *mc_manifest_get(const char *m, const char *name)
{
	size_t n = strlen(name);
	const char *p = m;

	while (p && *p) {
		if (!strncmp(p, name, n) && p[n] == '=')
			return p + n + 1;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

static void mc_restore_on_record(void *arg, int rc, json_t *reply)
{
	struct mc_ha_snap *sn = arg;
	struct mc_ha *ha = sn->ha;
	json_t *kv = json_array_get(json_object_get(reply, "kvs"), 0), *j = NULL;
	size_t len = 0, mlen = 0;
	char *v = kv ? mc_etcd_bytes(kv, "value", &len) : NULL, man[PATH_MAX + 64], *m = NULL;
	const char *id, *logid, *batch, *chunks;

	sn->restore_call = NULL;
	if (rc) {
		free(v);
		mc_restore_fail(sn, "etcd does not answer");
		return;
	}
	j = v ? json_loads(v, 0, NULL) : NULL;
	free(v);
	id = json_string_value(json_object_get(j, "id"));
	if (j == NULL || id == NULL || !mc_snap_id_ok(id) ||
	    json_integer_value(json_object_get(j, "log_id")) != ha->log_id) {
		json_decref(j);
		mc_restore_fail(sn, "etcd records no snapshot of this log");
		return;
	}
	/* Our store first (it may be mounted elsewhere here); else where the producer wrote. */
	snprintf(sn->rdir, sizeof(sn->rdir), "%.4000s/%.31s", sn->root, id);
	snprintf(man, sizeof(man), "%s/manifest.txt", sn->rdir);
	if (!sn->root[0] || access(man, R_OK) != 0) {
		const char *p = json_string_value(json_object_get(j, "path"));

		snprintf(sn->rdir, sizeof(sn->rdir), "%s", p ? p : "");
		snprintf(man, sizeof(man), "%s/manifest.txt", sn->rdir);
	}
	json_decref(j);
	m = mc_snap_read_file(man, 1 << 24, &mlen);
	logid = m ? mc_manifest_get(m, "log_id") : NULL;
	batch = m ? mc_manifest_get(m, "batch") : NULL;
	chunks = m ? mc_manifest_get(m, "chunks") : NULL;
	if (m == NULL || !mc_manifest_get(m, "format") ||
	    strncmp(mc_manifest_get(m, "format"), MC_SNAP_FORMAT, strlen(MC_SNAP_FORMAT)) ||
	    logid == NULL || strtoll(logid, NULL, 10) != ha->log_id || batch == NULL ||
	    chunks == NULL || strtoul(chunks, NULL, 10) == 0 ||
	    strtoul(chunks, NULL, 10) > MC_SNAP_MAX_CHUNKS) {
		free(m);
		mc_restore_fail(sn, man);
		return;
	}
	sn->rbatch = strtoull(batch, NULL, 10);
	sn->rchunks = (uint32_t)strtoul(chunks, NULL, 10);
	free(m);
	if (sn->rbatch < ha->applied) {
		mc_restore_fail(sn, "the latest snapshot is older than our state");
		return;
	}
	mc_log_notice("HA: restoring snapshot %s (batch %" PRIu64 ", %u chunks)", sn->rdir,
		      sn->rbatch, sn->rchunks);
	/* The batch it is at comes with its last chunk: a restore cut short starts over. */
	if (mc_persist_wipe(ha->m->persist)) {
		mc_restore_fail(sn, "cannot empty our database");
		return;
	}
	ha->applied = 0;
	sn->rchunk = 0;
	if (mc_restore_load(sn, 0)) {
		mc_restore_fail(sn, "the first chunk is missing or damaged");
		return;
	}
	event_active(sn->ev_step, EV_TIMEOUT, 0);
}

void mc_ha_snap_restore(struct mc_ha *ha)
{
	struct mc_ha_snap *sn = ha->snap;
	json_t *b;

	if (sn == NULL || sn->restoring || mc_ha_now(ha) < sn->restore_retry_at)
		return;
	sn->restoring = 1;
	b = json_pack("{so}", "key", mc_etcd_b64s(ha->snap_key));
	sn->restore_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, 5000, mc_restore_on_record,
					sn);
	json_decref(b);
	if (sn->restore_call == NULL)
		mc_restore_fail(sn, "out of memory");
}

/* ---------------------------------------------------------------- life cycle */

void mc_ha_snap_tick(struct mc_ha *ha)
{
	struct mc_ha_snap *sn = ha->snap;
	int64_t now = mc_ha_now(ha);

	if (sn == NULL || ha->log_id == 0)
		return;
	if (sn->enabled && !sn->running && !sn->restoring && now >= sn->next_at &&
	    (ha->state == MC_HA_STANDBY || ha->state == MC_HA_SERVING)) {
		sn->next_at = now + ha->m->cfg.snapshot_interval_seconds * 1000;
		if (ha->applied > sn->last_batch)
			mc_snap_start(sn);
	}
}

int mc_ha_snap_init(struct mc_ha *ha)
{
	struct mc_master *m = ha->m;
	struct mc_ha_snap *sn = mc_xcalloc(1, sizeof(*sn));
	const char *base = getenv("MOONCAKE_SNAPSHOT_LOCAL_PATH");

	ha->snap = sn;
	sn->ha = ha;
	sn->efd = -1;
	if (base && *base)
		snprintf(sn->root, sizeof(sn->root), "%.3500s/mooncake_master_snapshot/%.255s", base,
			 ha->cluster);
	sn->enabled = m->cfg.enable_oplog_snapshot;
	sn->next_at = mc_ha_now(ha) + m->cfg.snapshot_interval_seconds * 1000;
	sn->ev_step = event_new(m->base, -1, 0, mc_restore_on_step, sn);
	if (sn->ev_step == NULL)
		return -1;
	if (!sn->enabled)
		return 0;
	if (sn->root[0] == '\0') {
		mc_log_err("HA: --enable_oplog_snapshot needs MOONCAKE_SNAPSHOT_LOCAL_PATH (the "
			   "directory snapshots go to, shared by the masters)");
		return -1;
	}
	if (!strcmp(m->cfg.persist_path, ":memory:")) {
		mc_log_err("HA: --enable_oplog_snapshot needs --persist_path (snapshots are read from "
			   "the database file)");
		return -1;
	}
	if (mc_snap_mkdirs(sn->root)) {
		mc_log_err("HA: cannot create %s: %s", sn->root, strerror(errno));
		return -1;
	}
	sn->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sn->efd < 0)
		return -1;
	sn->ev_done = event_new(m->base, sn->efd, EV_READ | EV_PERSIST, mc_snap_on_done, sn);
	if (sn->ev_done == NULL || event_add(sn->ev_done, NULL))
		return -1;
	mc_log_info("HA: snapshots every %lld s into %s (%lld objects per chunk, %lld kept)",
		    (long long)m->cfg.snapshot_interval_seconds, sn->root,
		    (long long)m->cfg.snapshot_chunk_object_count,
		    (long long)m->cfg.snapshot_retention_count);
	return 0;
}

void mc_ha_snap_fini(struct mc_ha *ha)
{
	struct mc_ha_snap *sn = ha->snap;

	if (sn == NULL)
		return;
	if (sn->running)
		pthread_join(sn->th, NULL);
	mc_etcd_cancel(sn->record_call);
	mc_etcd_cancel(sn->restore_call);
	if (sn->ev_done)
		event_free(sn->ev_done);
	if (sn->ev_step)
		event_free(sn->ev_step);
	if (sn->efd >= 0)
		close(sn->efd);
	free(sn->rbuf);
	free(sn);
	ha->snap = NULL;
}

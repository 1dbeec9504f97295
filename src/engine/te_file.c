/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's file transport (upstream's "nvmeof" segments without GPUDirect Storage): a
 * segment whose descriptor lists files, so a file on SSD can be the source or target of a
 * transfer.
 *
 * The descriptor (metadata key mooncake/nvmeof/<name>, written by whoever provisions the files)
 * is {"name", "protocol": "nvmeof", "buffers": [{"file_path", "length", "local_path_map":
 * {host: path}}]}.  The files are laid end to end: target_offset 0 is the first byte of the
 * first file, and a request may span files.  This host opens local_path_map[host] (host = our
 * segment name, our address or our hostname) or else file_path.  Paths come from the metadata
 * service and are untrusted: they must be absolute, without "..", name an existing regular
 * file, and no byte beyond a buffer's declared length is ever touched; files are never created.
 *
 * Reads and writes go through src/transfer/file_io (O_DIRECT where the file system allows) on
 * the transport's worker pool (MC_TE_IO_THREADS, default 2), never on the loop thread.
 * installTransport(engine, "nvmeof") or "file" installs it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/te_pool.h"
#include "engine/transport.h"
#include "transfer/file_io.h"

#define MC_FILE_MAX_SEGS 1024
#define MC_FILE_MAX_FILES 4096

struct mc_file_part {
	struct mc_file f;
	uint64_t len;		/* declared length */
	int writable;
};

/* One file segment, kept until uninstall; lk: I/O shared, (re)open exclusive. */
struct mc_file_seg {
	struct mc_file_seg *next;
	char name[256];
	pthread_rwlock_t lk;
	uint32_t n;
	struct mc_file_part *parts;
};

struct mc_te_file {
	struct mc_engine *e;
	pthread_mutex_t mu;
	struct mc_file_seg *segs;
	uint32_t nsegs;
	struct mc_te_pool *pool;
};

static void mc_file_seg_close(struct mc_file_seg *fs)
{
	uint32_t i;

	for (i = 0; i < fs->n; i++)
		mc_file_close(&fs->parts[i].f);
	free(fs->parts);
	fs->parts = NULL;
	fs->n = 0;
}

/* The path this host uses for one buffer, or NULL. */
static const char *mc_file_local_path(struct mc_engine *e, json_t *buf)
{
	json_t *map = json_object_get(buf, "local_path_map"), *v;
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	if (json_is_object(map)) {
		if (json_is_string(v = json_object_get(map, e->server_name)) ||
		    json_is_string(v = json_object_get(map, e->ip)) ||
		    json_is_string(v = json_object_get(map, host)))
			return json_string_value(v);
	}
	v = json_object_get(buf, "file_path");
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int mc_file_path_ok(const char *p)
{
	return p && p[0] == '/' && strlen(p) < PATH_MAX && strstr(p, "/../") == NULL &&
	       (strlen(p) < 3 || strcmp(p + strlen(p) - 3, "/.."));
}

/* Open every file of the descriptor.  fs->lk held exclusively.  0 or -errno. */
static int mc_file_seg_open(struct mc_te_file *t, struct mc_file_seg *fs, json_t *raw)
{
	json_t *bufs = json_object_get(raw, "buffers");
	size_t i, n = json_is_array(bufs) ? json_array_size(bufs) : 0;
	int rc = 0;

	mc_file_seg_close(fs);
	if (n == 0 || n > MC_FILE_MAX_FILES)
		return -EINVAL;
	fs->parts = calloc(n, sizeof(*fs->parts));
	if (fs->parts == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		json_t *b = json_array_get(bufs, i), *l = json_object_get(b, "length");
		const char *path = mc_file_local_path(t->e, b);
		struct mc_file_part *p = &fs->parts[i];
		struct stat st;

		p->f.fd = p->f.dfd = -1;
		fs->n = (uint32_t)i + 1;
		if (!mc_file_path_ok(path) || !json_is_integer(l) || json_integer_value(l) <= 0) {
			mc_log_warn("transfer engine %s: file segment %s: bad buffer %zu",
				    t->e->server_name, fs->name, i);
			return -EINVAL;
		}
		p->len = (uint64_t)json_integer_value(l);
		rc = mc_file_open(&p->f, path, O_RDWR, 1);
		p->writable = rc == 0;
		if (rc == -EACCES || rc == -EROFS)
			rc = mc_file_open(&p->f, path, O_RDONLY, 1);
		if (rc == 0 && (fstat(p->f.fd, &st) || !S_ISREG(st.st_mode)))
			rc = -EINVAL;
		if (rc) {
			mc_log_warn("transfer engine %s: file segment %s: cannot open %s: %s",
				    t->e->server_name, fs->name, path, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int mc_file_job(struct mc_te_req *r)
{
	struct mc_te_file *t = r->xport_priv[0];
	struct mc_file_seg *fs = r->seg_ctx;
	uint64_t off = r->remote, left = r->len, base = 0;
	uint8_t *mem = r->local;
	uint32_t i;
	int rc = 0;

	pthread_rwlock_rdlock(&fs->lk);
	for (i = 0; i < fs->n && left && rc == 0; base += fs->parts[i].len, i++) {
		struct mc_file_part *p = &fs->parts[i];
		uint64_t in, chunk;
		ssize_t n;

		if (off >= base + p->len)
			continue;
		in = off - base;
		chunk = p->len - in < left ? p->len - in : left;
		if (r->opcode == MC_XFER_WRITE) {
			n = p->writable ? mc_file_pwrite(&p->f, mem, chunk, in) : -EROFS;
		} else {
			n = mc_file_pread(&p->f, mem, chunk, in);
			/* Inside the declared length but past the file's end: zeros. */
			if (n >= 0 && (uint64_t)n < chunk) {
				memset(mem + n, 0, chunk - (uint64_t)n);
				n = (ssize_t)chunk;
			}
		}
		if (n < 0)
			rc = (int)n;
		mem += chunk;
		off += chunk;
		left -= chunk;
	}
	pthread_rwlock_unlock(&fs->lk);
	if (rc == 0 && left)
		rc = -EFAULT;	/* beyond the files */
	if (rc)
		mc_log_warn("transfer engine %s: file segment %s: %s of %llu bytes at %llu failed: %s",
			    t->e->server_name, fs->name, r->opcode == MC_XFER_WRITE ? "write" : "read",
			    (unsigned long long)r->len, (unsigned long long)r->remote,
			    strerror(-rc));
	return rc;
}

static int mc_te_file_install(struct mc_engine *e, void **state)
{
	const char *th = getenv("MC_TE_IO_THREADS");
	struct mc_te_file *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	t->e = e;
	pthread_mutex_init(&t->mu, NULL);
	t->pool = mc_te_pool_new(e, th ? (unsigned)atoi(th) : 2);
	if (t->pool == NULL) {
		pthread_mutex_destroy(&t->mu);
		free(t);
		return -ENOMEM;
	}
	*state = t;
	return 0;
}

static void mc_te_file_uninstall(struct mc_engine *e, void *state)
{
	struct mc_te_file *t = state;

	(void)e;
	mc_te_pool_free(t->pool);
	while (t->segs) {
		struct mc_file_seg *fs = t->segs;

		t->segs = fs->next;
		mc_file_seg_close(fs);
		pthread_rwlock_destroy(&fs->lk);
		free(fs);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static int mc_te_file_match(void *state, struct mc_te_segment *seg)
{
	struct mc_te_file *t = state;
	struct mc_file_seg *fs;
	int rc;

	if (strcmp(seg->desc.protocol, "nvmeof") || seg->desc.raw == NULL)
		return 0;
	pthread_mutex_lock(&t->mu);
	for (fs = t->segs; fs; fs = fs->next)
		if (!strcmp(fs->name, seg->name))
			break;
	if (fs == NULL && t->nsegs < MC_FILE_MAX_SEGS && (fs = calloc(1, sizeof(*fs))) != NULL) {
		snprintf(fs->name, sizeof(fs->name), "%s", seg->name);
		pthread_rwlock_init(&fs->lk, NULL);
		fs->next = t->segs;
		t->segs = fs;
		t->nsegs++;
	}
	pthread_mutex_unlock(&t->mu);
	if (fs == NULL)
		return 0;
	pthread_rwlock_wrlock(&fs->lk);
	rc = mc_file_seg_open(t, fs, seg->desc.raw);
	if (rc)
		mc_file_seg_close(fs);
	pthread_rwlock_unlock(&fs->lk);
	if (rc)
		return 0;
	seg->xport_ctx = fs;
	return 1;
}

static int mc_te_file_submit(void *state, struct mc_te_req *r)
{
	struct mc_te_file *t = state;

	r->xport_priv[0] = t;
	return mc_te_pool_submit(t->pool, r, mc_file_job);
}

const struct mc_te_transport_ops mc_te_file_ops = {
	.name = "nvmeof",
	.install = mc_te_file_install,
	.uninstall = mc_te_file_uninstall,
	.match = mc_te_file_match,
	.submit = mc_te_file_submit,
};

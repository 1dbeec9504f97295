/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's shared-directory tier (upstream's legacy file tier): with --root_fs_dir, every new object also
 * gets a DISK replica, a file at "<root_fs_dir>/<cluster_id>/<d1>/<d2>/<sanitized key>" on a
 * file system all clients share.  The writer stores the raw value there after its memory writes
 * (PutEnd(DISK) once it is in); a reader uses the file when no memory replica is left (eviction
 * frees memory only).
 *
 * Upstream derives d1 and d2 from std::hash<std::string>, which is implementation-defined; here
 * they come from the 64-bit FNV-1a hash of the key (d1 = 'a' + (h & 15), d2 = 'a' + (h >> 4 &
 * 15)), so the layout is stable across builds but does not match upstream's files.  The sanitized
 * key replaces / \ : * ? " < > | and NUL by '_'.
 *
 * In multi-tenant mode a tenant's files live under "<root_fs_dir>/<cluster_id>/_tenants/<hex of
 * the tenant's name>/" with the same layout below, so two tenants' objects of one key never
 * share a file (the default tenant keeps the layout above).
 *
 * The DISK replicas hang on one pseudo-segment (master->fs_seg) so that they are counted
 * (master_allocated_file_size_bytes; master_total_file_capacity_bytes adds the quota) and
 * released like other replicas.  The writer fills the file on a worker after its memory writes
 * and ends the DISK replica separately (PutEnd/PutRevoke with replica_type DISK); until then it is
 * PROCESSING and never handed to a reader.
 *
 * The master never touches the files.  Two ways they go:
 *  - quota: a client's backend (store_tier_fsdir.c) that sees the directory past fs_quota (FsHeartbeat
 *    reports the bytes of all DISK replicas) asks FS_EVICT for its oldest files; the master forgets
 *    those whose read lease (fetch_until) has ended and answers 0, and only then the client
 *    deletes the file;
 *  - a DISK replica forgotten otherwise (Remove, RemoveAll, a put over the key, a dead writer's
 *    unfinished put) queues its path in fs_drops with not_before = the end of the object's read
 *    lease; FsHeartbeat hands ready paths to whichever client asks (the directory is shared, so
 *    a dead writer's files still go) and forgets them once acknowledged.  While a path is queued,
 *    a new put of that key gets no DISK replica, so a late delete never hits a newer file.
 * The drop queue is not persisted: files queued when the master stops stay on disk.
 * Single-threaded: the master's reactor thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/tenants.h"

#define MC_FS_MAX_DROPS 1000000		/* queued deletions (a path each) */
#define MC_FS_DROPS_PER_BEAT 256
#define MC_FS_DROP_RETRY_MS 30000	/* handed out but not acknowledged: hand out again */

struct mc_fs_drop {
	uint64_t id;
	int64_t not_before;		/* monotonic ms */
	int64_t handed_at;		/* 0: not handed out yet */
	char *path;
};

static const struct mc_disk_tier mc_tier_fsdir = { .drop = mc_fs_queue_drop, .gone = NULL };

void mc_fs_init(struct mc_master *m)
{
	struct mc_segment *seg;

	if (m->cfg.root_fs_dir == NULL || m->cfg.root_fs_dir[0] == '\0')
		return;
	seg = mc_xcalloc(1, sizeof(*seg));
	seg->is_disk = 2;
	seg->tier = &mc_tier_fsdir;
	seg->name = mc_xstrdup("root_fs_dir");
	seg->endpoint = mc_xstrdup("");
	seg->protocol = mc_xstrdup("file");
	seg->status = MC_SEG_OK;
	m->fs_seg = seg;
	m->fs_quota = m->cfg.quota_bytes;
	if (m->fs_quota == 0) {
		struct statvfs sv;

		/* 0: 90% of the file system, when the master sees it (else the clients size it). */
		if (statvfs(m->cfg.root_fs_dir, &sv) == 0)
			m->fs_quota = (uint64_t)((double)sv.f_blocks * (double)sv.f_frsize * 0.9);
		else
			mc_log_warn("root_fs_dir %s: %s; clients size the quota themselves",
				    m->cfg.root_fs_dir, strerror(errno));
	}
	m->next_fs_drop_id = 1;
}

void mc_fs_fini(struct mc_master *m)
{
	struct mc_segment *seg = m->fs_seg;

	if (seg == NULL)
		return;
	while (m->nfs_drops)
		free(m->fs_drops[--m->nfs_drops].path);
	free(m->fs_drops);
	m->fs_drops = NULL;
	free(seg->name);
	free(seg->endpoint);
	free(seg->protocol);
	free(seg);
	m->fs_seg = NULL;
}

int mc_fs_path(const struct mc_master *m, const struct mc_object *o, char *out, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	const char *key = o->key;
	size_t i, at, len = o->key_len;
	char tdir[2 * MC_TENANT_NAME_MAX + 16] = "";
	int w;

	for (i = 0; i < len; i++)
		h = (h ^ (uint8_t)key[i]) * 1099511628211ull;
	if (o->tenant != 0) {
		/* A tenant's files have a directory of their own, named by the hex of its name
		 * (no two names map to one), so tenants' keys never share a file. */
		const char *name = mc_tenant_name(m, o->tenant);

		at = (size_t)snprintf(tdir, sizeof(tdir), "_tenants/");
		for (i = 0; name[i] && at + 3 < sizeof(tdir); i++)
			at += (size_t)snprintf(tdir + at, sizeof(tdir) - at, "%02x",
					       (unsigned char)name[i]);
		tdir[at++] = '/';
		tdir[at] = '\0';
	}
	w = snprintf(out, n, "%s/%s/%s%c/%c/", m->cfg.root_fs_dir, m->cfg.cluster_id, tdir,
		     (char)('a' + (h & 0xf)), (char)('a' + ((h >> 4) & 0xf)));
	if (w < 0 || (size_t)w + len + 1 > n || len == 0)
		return -1;
	at = (size_t)w;
	for (i = 0; i < len; i++) {
		char c = key[i];

		out[at++] = strchr("/\\:*?\"<>|", c) || c == '\0' ? '_' : c;
	}
	out[at] = '\0';
	/* "." and ".." as a whole name would point elsewhere. */
	if (!strcmp(out + w, ".") || !strcmp(out + w, ".."))
		out[w] = '_';
	return 0;
}

void mc_fs_add_replica(struct mc_master *m, struct mc_object *o)
{
	char path[MC_RPC_MAX_PATH + 1];
	struct mc_replica *r;

	uint32_t i;

	if (m->fs_seg == NULL || mc_fs_path(m, o, path, sizeof(path)))
		return;
	for (i = 0; i < m->nfs_drops; i++)
		if (!strcmp(m->fs_drops[i].path, path))
			return;	/* the old file is still to be deleted: memory only this time */
	r = mc_object_add_replica(o);
	if (r == NULL)
		return;
	mc_disk_replica_link(m, m->fs_seg, r, MC_REPLICA_DISK, 0, o->size);
	r->status = MC_REPLICA_PROCESSING;
	r->id = m->next_replica_id++;
}

int mc_fs_attach(struct mc_master *m, struct mc_replica *r, uint64_t size)
{
	if (m->fs_seg == NULL)
		return -1;
	mc_disk_replica_link(m, m->fs_seg, r, MC_REPLICA_DISK, 0, size);
	r->status = MC_REPLICA_COMPLETE;
	return 0;
}

void mc_fs_queue_drop(struct mc_master *m, struct mc_replica *r)
{
	char path[MC_RPC_MAX_PATH + 1];
	struct mc_object *o = mc_replica_obj(r);
	struct mc_fs_drop *d;
	int64_t now = mc_master_now(m);

	if (m->fs_seg == NULL || mc_fs_path(m, o, path, sizeof(path)))
		return;
	if (m->nfs_drops >= MC_FS_MAX_DROPS) {
		mc_log_warn("DISK file %s: %u deletions queued already; the file stays", path,
			    m->nfs_drops);
		return;
	}
	if (m->nfs_drops == m->fs_drops_cap) {
		m->fs_drops_cap = m->fs_drops_cap ? m->fs_drops_cap * 2 : 64;
		m->fs_drops = mc_xrealloc(m->fs_drops, m->fs_drops_cap * sizeof(*m->fs_drops));
	}
	d = &m->fs_drops[m->nfs_drops++];
	d->id = m->next_fs_drop_id++;
	d->not_before = o->fetch_until > now ? o->fetch_until : now;
	if (o->lease_until > d->not_before)
		d->not_before = o->lease_until;
	d->handed_at = 0;
	d->path = mc_xstrdup(path);
}

/* ---------------------------------------------------------------- RPC operations */

int mc_op_get_fsdir(struct mc_req *q)
{
	char dir[MC_RPC_MAX_PATH + 1] = "";

	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	if (q->m->fs_seg)
		snprintf(dir, sizeof(dir), "%s/%s", q->m->cfg.root_fs_dir, q->m->cfg.cluster_id);
	mc_wbuf_cstr(q->out, dir);
	return 0;
}

int mc_op_get_storage_config(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_wbuf *out = q->out;
	char dir[MC_RPC_MAX_PATH + 1] = "";

	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	if (m->fs_seg)
		snprintf(dir, sizeof(dir), "%s/%s", m->cfg.root_fs_dir, m->cfg.cluster_id);
	mc_wbuf_cstr(out, dir);
	mc_wbuf_u8(out, m->cfg.enable_disk_eviction ? 1 : 0);
	mc_wbuf_u64(out, m->fs_seg ? m->fs_quota : 0);
	return 0;
}

int mc_op_fs_heartbeat(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_rbuf *r = &q->r;
	struct mc_wbuf *out = q->out;
	int64_t now = q->now;
	struct mc_uuid cid;
	uint64_t *done = NULL;
	uint32_t n, i, j, k, count = 0;
	size_t count_at;

	mc_rpc_get_uuid(r, &cid);
	n = mc_rbuf_count(r, MC_RPC_MAX_BATCH, 8);
	if (r->err == 0 && n) {
		done = mc_xcalloc(n, sizeof(*done));
		for (i = 0; i < n; i++)
			done[i] = mc_rbuf_u64(r);
	}
	if (r->err || r->left != 0) {
		free(done);
		return MC_ERR_INVALID_PARAMS;
	}
	if (m->fs_seg == NULL || mc_client_find(m, &cid) == NULL) {
		free(done);
		return m->fs_seg == NULL ? MC_ERR_NOT_SUPPORTED : MC_ERR_ILLEGAL_CLIENT;
	}
	/* Forget the acknowledged ones (ids are increasing, the queue is in id order). */
	for (i = 0, k = 0; i < m->nfs_drops; i++) {
		int acked = 0;

		for (j = 0; j < n && !acked; j++)
			acked = done[j] == m->fs_drops[i].id && m->fs_drops[i].handed_at != 0;
		if (acked)
			free(m->fs_drops[i].path);
		else
			m->fs_drops[k++] = m->fs_drops[i];
	}
	m->nfs_drops = k;
	free(done);
	mc_wbuf_u64(out, m->fs_seg->used);
	mc_wbuf_u64(out, m->fs_quota);
	count_at = out->len;
	mc_wbuf_u32(out, 0);
	for (i = 0; i < m->nfs_drops && count < MC_FS_DROPS_PER_BEAT; i++) {
		struct mc_fs_drop *d = &m->fs_drops[i];

		if (d->not_before > now ||
		    (d->handed_at != 0 && now - d->handed_at < MC_FS_DROP_RETRY_MS))
			continue;
		d->handed_at = now;
		mc_wbuf_u64(out, d->id);
		mc_wbuf_cstr(out, d->path);
		count++;
	}
	mc_wbuf_patch_u32(out, count_at, count);
	return 0;
}

int mc_op_fs_evict(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_rbuf *r = &q->r;
	struct mc_wbuf *out = q->out;
	int64_t now = q->now;
	struct mc_uuid cid;
	struct mc_strv *keys = NULL;
	uint32_t n, i;
	uint8_t lost = 0;

	mc_rpc_get_uuid(r, &cid);
	n = mc_rbuf_count(r, MC_RPC_MAX_BATCH, 4);
	if (r->err == 0 && n) {
		keys = mc_xcalloc(n, sizeof(*keys));
		for (i = 0; i < n; i++)
			keys[i] = mc_rpc_get_strv(r, MC_RPC_MAX_KEY);
	}
	/* Appended field: 1 = the files are corrupt (a reader found them so), forget them even
	 * while leased. */
	if (r->err == 0 && r->left == 1)
		lost = mc_rbuf_u8(r);
	if (r->err || r->left != 0 || lost > 1) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	/* Any reader may report a corrupt file (it may never have written or pinged); evicting
	 * for the quota is for the directory's writers. */
	if (m->fs_seg == NULL || (!lost && mc_client_find(m, &cid) == NULL)) {
		free(keys);
		return m->fs_seg == NULL ? MC_ERR_NOT_SUPPORTED : MC_ERR_ILLEGAL_CLIENT;
	}
	mc_wbuf_u32(out, n);
	for (i = 0; i < n; i++) {
		struct mc_object *o = mc_object_find(&m->objects, keys[i].p, keys[i].n);
		struct mc_replica *dr = NULL;
		uint32_t j;
		int rc = 0;

		for (j = 0; o && j < o->nrep; j++) {
			struct mc_replica *x = mc_object_replica(o, j);

			if (x->seg == m->fs_seg && x->status == MC_REPLICA_COMPLETE)
				dr = x;
		}
		if (dr == NULL) {
			rc = MC_ERR_OBJECT_NOT_FOUND;	/* forgotten already: a drop deletes it */
		} else if (lost) {
			mc_log_warn("DISK file of %.*s reported corrupt by a reader: forgotten",
				    (int)(keys[i].n > 128 ? 128 : keys[i].n), keys[i].p);
			m->metrics.disk_copies_lost++;
			mc_disk_replica_forget(m, o, dr);
		} else if (o->fetch_until > now) {
			rc = MC_ERR_OBJECT_HAS_LEASE;	/* a reader may be reading the file */
		} else {
			mc_disk_replica_forget(m, o, dr);	/* the asking client deletes the file */
		}
		mc_wbuf_i32(out, rc);
	}
	free(keys);
	return 0;
}

int mc_fs_reap_abandoned(struct mc_master *m, struct mc_object *o, int64_t now)
{
	struct mc_client *w = mc_object_writer(m, o);
	int dead = w == NULL || now - w->last_ping > m->cfg.client_ttl * 1000 ||
		   now - o->put_start > m->cfg.put_start_release_timeout_sec * 1000;
	uint32_t i, n = 0;

	if (m->fs_seg == NULL || !dead)
		return 0;
	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg == m->fs_seg && r->status == MC_REPLICA_PROCESSING) {
			mc_replica_release(m, r);	/* not quiet: its file may exist */
			n++;
		}
	}
	if (n == 0)
		return 0;
	return mc_object_settle(m, o);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The legacy shared-directory tier (reference §6.1): with --root_fs_dir, every new object also
 * gets a DISK replica, a file at "<root_fs_dir>/<cluster_id>/<d1>/<d2>/<sanitized key>" on a
 * file system all clients share.  The writer stores the raw value there before its PutEnd; a
 * reader uses the file when no memory replica is left (eviction frees memory only).
 *
 * Upstream derives d1 and d2 from std::hash<std::string>, which is implementation-defined; here
 * they come from the 64-bit FNV-1a hash of the key (d1 = 'a' + (h & 15), d2 = 'a' + (h >> 4 &
 * 15)), so the layout is stable across builds but does not match upstream's files.  The sanitized
 * key replaces / \ : * ? " < > | and NUL by '_'.
 *
 * The DISK replicas hang on one pseudo-segment (master->fs_seg) so that they are counted
 * (master_allocated_file_size_bytes) and released like other replicas.  The master never touches
 * the files: removing an object leaves its file until the key is written again.
 * Single-threaded: the master's reactor thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "master/master.h"

void mc_fs_init(struct mc_master *m)
{
	struct mc_segment *seg;

	if (m->cfg.root_fs_dir == NULL || m->cfg.root_fs_dir[0] == '\0')
		return;
	seg = mc_xcalloc(1, sizeof(*seg));
	seg->is_disk = 2;
	seg->name = mc_xstrdup("root_fs_dir");
	seg->endpoint = mc_xstrdup("");
	seg->protocol = mc_xstrdup("file");
	seg->status = MC_SEG_OK;
	m->fs_seg = seg;
}

void mc_fs_fini(struct mc_master *m)
{
	struct mc_segment *seg = m->fs_seg;

	if (seg == NULL)
		return;
	free(seg->name);
	free(seg->endpoint);
	free(seg->protocol);
	free(seg);
	m->fs_seg = NULL;
}

int mc_fs_path(const struct mc_master *m, const char *key, size_t len, char *out, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	size_t i, at;
	int w;

	for (i = 0; i < len; i++)
		h = (h ^ (uint8_t)key[i]) * 1099511628211ull;
	w = snprintf(out, n, "%s/%s/%c/%c/", m->cfg.root_fs_dir, m->cfg.cluster_id,
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

static void mc_fs_link(struct mc_master *m, struct mc_replica *r, uint64_t size)
{
	struct mc_segment *seg = m->fs_seg;

	r->type = MC_REPLICA_DISK;
	r->seg = seg;
	r->disk_addr = 0;
	r->seg_prev = NULL;
	r->seg_next = seg->reps;
	if (seg->reps)
		seg->reps->seg_prev = r;
	seg->reps = r;
	seg->nreps++;
	seg->used += size;
	m->disk_allocated += size;
}

void mc_fs_add_replica(struct mc_master *m, struct mc_object *o)
{
	char path[MC_RPC_MAX_PATH + 1];
	struct mc_replica *r;

	if (m->fs_seg == NULL || mc_fs_path(m, o->key, o->key_len, path, sizeof(path)))
		return;
	r = mc_object_add_replica(o);
	if (r == NULL)
		return;
	mc_fs_link(m, r, o->size);
	r->status = MC_REPLICA_PROCESSING;
	r->id = m->next_replica_id++;
}

int mc_fs_attach(struct mc_master *m, struct mc_replica *r, uint64_t size)
{
	if (m->fs_seg == NULL)
		return -1;
	mc_fs_link(m, r, size);
	r->status = MC_REPLICA_COMPLETE;
	return 0;
}

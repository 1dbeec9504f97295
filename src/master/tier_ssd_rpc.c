/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's SSD tier, its RPC operations (handlers of the table in ops.h): MountLocalDiskSegment,
 * OffloadObjectHeartbeat (hands tasks to an SSD area's owner), NotifyOffloadSuccess (their
 * results, and REGISTER of objects found on the SSD at start-up, checked against generations
 * and ghosts) and BatchEvictDiskReplica (the owner asks before deleting SSD copies on its own).
 * The areas, tasks and their invariants are in tier_ssd.c.
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/tenants.h"
#include "master/tier_ssd.h"
#include "segment/alloc.h"

#define MC_TIER_MAX_TASKS 4096	/* per heartbeat answer */

static int mc_body_done(struct mc_rbuf *r)
{
	return r->err == 0 && r->left == 0;
}

int mc_op_mount_local_disk(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_rbuf *r = &q->r;
	struct mc_wbuf *out = q->out;
	int64_t now = q->now;
	const char *peer = q->peer;
	struct mc_uuid cid, did;
	struct mc_strv name, endpoint;
	struct mc_client *c;
	uint64_t cap;
	int rc;

	(void)out;
	mc_rpc_get_uuid(r, &cid);
	mc_rpc_get_uuid(r, &did);
	name = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
	endpoint = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
	cap = mc_rbuf_u64(r);
	if (!mc_body_done(r))
		return MC_ERR_INVALID_PARAMS;
	c = mc_client_get(m, &cid);
	c->last_ping = now;
	mc_disk_mount(m, c, &did, name, endpoint, cap, &rc);
	if (rc)
		mc_log_warn("MountLocalDiskSegment from %s refused: %d", peer, rc);
	return rc;
}

/* The memory replica of o on one of c's segments that an offload reads, or NULL. */
static struct mc_replica *mc_offload_source(struct mc_object *o, struct mc_client *c)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->type == MC_REPLICA_MEMORY && mc_replica_readable(r) && r->seg->client == c)
			return r;
	}
	return NULL;
}

/* The next task to hand out.  While the area backs off after failed writes the queue waits
 * at its first offload (what is behind it waits with it, for at most one backoff step). */
static struct mc_tier_task *mc_task_next(struct mc_master *m, struct mc_segment *disk)
{
	if (disk->tasks && disk->tasks->kind == MC_TIER_OFFLOAD && mc_disk_backing_off(m, disk))
		return NULL;
	return mc_task_pop(disk);
}

/* The body may end with a feature byte (MC_RPC_HB_CHECKSUMS: the owner wants each task's
 * object checksum, appended after the tasks with mc_rpc_put_checksums, so it can keep the
 * checksum with its copy and verify the bytes it moves); owners from before it send none and
 * get the tasks alone. */
int mc_op_offload_heartbeat(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_rbuf *r = &q->r;
	struct mc_wbuf *out = q->out;
	int64_t now = q->now;
	const char *peer = q->peer;
	struct mc_uuid cid, did;
	struct mc_client *c;
	struct mc_segment *disk;
	struct mc_tier_task *t;
	struct mc_rpc_checksum *cs = NULL;
	uint32_t max, n = 0;
	int64_t promotes = 0;
	const char **dsegs = NULL;	/* MC_RPC_HB_SEGMENTS: destination segment names */
	uint8_t features = 0;
	size_t at;

	(void)peer;
	mc_rpc_get_uuid(r, &cid);
	mc_rpc_get_uuid(r, &did);
	max = mc_rbuf_u32(r);
	(void)mc_rbuf_u64(r);	/* used bytes as the client counts them (informational) */
	if (r->err == 0 && r->left == 1)
		features = mc_rbuf_u8(r);
	if (!mc_body_done(r))
		return MC_ERR_INVALID_PARAMS;
	c = mc_client_find(m, &cid);
	disk = mc_client_disk(c, &did);
	if (disk == NULL || disk->status != MC_SEG_OK)
		return MC_ERR_SEGMENT_NOT_FOUND;
	c->last_ping = now;
	if (max > MC_TIER_MAX_TASKS)
		max = MC_TIER_MAX_TASKS;
	if (features & MC_RPC_HB_CHECKSUMS)
		cs = mc_xcalloc(max ? max : 1, sizeof(*cs));
	if ((features & MC_RPC_HB_CHECKSUMS) && (features & MC_RPC_HB_SEGMENTS))
		dsegs = mc_xcalloc(max ? max : 1, sizeof(*dsegs));
	at = out->len;
	mc_wbuf_u32(out, 0);
	/* --promotion_max_per_heartbeat: each promotion is a read and a write the owner does
	 * in turn; the ones past it wait at the head of the queue for the next heartbeat. */
	while (n < max &&
	       !(promotes >= m->cfg.up.promotion_max_per_heartbeat && disk->tasks &&
		 disk->tasks->kind == MC_TIER_PROMOTE) &&
	       (t = mc_task_next(m, disk)) != NULL) {
		struct mc_object *o = mc_tier_object(m, t->key, t->key_len);
		struct mc_replica *src = NULL, *dst = NULL, *dr = NULL;

		if (t->kind == MC_TIER_DROP) {
			disk->ntasks--;
			mc_wbuf_u8(out, t->kind);
			mc_wbuf_str(out, t->key, t->key_len);
			mc_wbuf_u64(out, t->size);
			mc_wbuf_u64(out, t->addr);
			mc_wbuf_str(out, "", 0);
			mc_wbuf_u64(out, 0);
			mc_wbuf_u64(out, 0);
			n++;
			free(t);
			continue;
		}
		if (t->kind == MC_TIER_OFFLOAD && o && (o->flags & MC_OBJ_OFFLOADING) &&
		    o->size == t->size)
			src = mc_offload_source(o, c);
		if (t->kind == MC_TIER_PROMOTE && o && (o->flags & MC_OBJ_PROMOTING)) {
			dst = mc_object_replica_by_id(o, t->replica_id);
			dr = mc_object_disk_replica(o);
			if (dr && dr->seg != disk)
				dr = NULL;
		}
		if (src == NULL && (dst == NULL || dr == NULL)) {
			/* The object changed while the task waited. */
			disk->ntasks--;
			if (t->kind == MC_TIER_PROMOTE)
				mc_task_abandon(m, disk, t);
			else
				mc_task_cancel(m, t);
			continue;
		}
		if (cs) {
			cs[n].present = o->has_checksum;
			cs[n].value = o->checksum;
		}
		if (dsegs)
			dsegs[n] = dst ? dst->seg->name : "";
		mc_wbuf_u8(out, t->kind);
		mc_wbuf_str(out, t->key, t->key_len);
		mc_wbuf_u64(out, t->size);
		t->gen = o->gen;
		if (src) {
			t->replica_id = src->id;
			mc_wbuf_u64(out, src->seg->base + src->off);
			mc_wbuf_str(out, "", 0);
			mc_wbuf_u64(out, 0);
		} else {
			mc_wbuf_u64(out, dr->disk_addr);
			mc_wbuf_cstr(out, dst->seg->endpoint);
			mc_wbuf_u64(out, dst->seg->base + dst->off);
		}
		mc_wbuf_u64(out, o->gen);
		promotes += t->kind == MC_TIER_PROMOTE;
		t->deadline = now + m->cfg.offload_task_timeout_sec * 1000;
		t->next = disk->inflight;
		disk->inflight = t;
		n++;
	}
	mc_wbuf_patch_u32(out, at, n);
	if (cs)
		mc_rpc_put_checksums(out, cs, n);
	if (dsegs) {
		uint32_t i;

		mc_wbuf_u32(out, n);
		for (i = 0; i < n; i++)
			mc_wbuf_cstr(out, dsegs[i] ? dsegs[i] : "");
	}
	free(dsegs);
	free(cs);
	return 0;
}

/* Take the in-flight task of kind for key off disk's list, or NULL. */
static struct mc_tier_task *mc_inflight_take(struct mc_segment *disk, uint8_t kind,
					     struct mc_strv key)
{
	struct mc_tier_task **pp, *t;

	for (pp = &disk->inflight; (t = *pp) != NULL; pp = &t->next)
		if (t->kind == kind && t->key_len == key.n && !memcmp(t->key, key.p, key.n)) {
			*pp = t->next;
			disk->ntasks--;
			return t;
		}
	return NULL;
}

/* Replace the SSD copies of o (all older, adopted ones) by nothing: their owners delete them. */
static void mc_register_drop_older(struct mc_master *m, struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg)
			mc_replica_release(m, r);	/* queues a DROP for the owner */
	}
	mc_object_compact(o);
}

/* An adopted object's row: keyed by generation if this database issued it, else by its key's
 * hash (generations from before the database, 0 among them, may be other keys' too). */
static void mc_adopt_rowkey(struct mc_master *m, struct mc_object *o)
{
	if (o->gen < m->gen_epoch)
		o->xflags |= MC_OBJX_ROWKEY;
	else
		o->xflags &= ~MC_OBJX_ROWKEY;
}

/* An object found on the SSD when its client started, holding the bytes of generation gen.
 * Taken only if those are the bytes the master knows for the key (ghosts.c).  The checksum the
 * owner kept with its copy (cs->present) becomes the object's when the copy brings the object
 * back, and is taken by an object of the same bytes that has none; a copy whose checksum is
 * not the object's is refused (CHECKSUM_MISMATCH: the owner deletes it). */
static int mc_register_one(struct mc_master *m, struct mc_client *c, struct mc_segment *disk,
			   struct mc_strv key, uint64_t size, uint64_t addr, uint64_t gen,
			   const struct mc_rpc_checksum *cs, int64_t now)
{
	const char *local = key.p;
	size_t local_len = key.n;
	uint16_t tenant = 0, saved;
	struct mc_object *o;
	struct mc_replica *r;
	uint32_t i;

	if (size > MC_OBJ_SIZE_MAX)
		return MC_ERR_INVALID_PARAMS;	/* more than an object can describe */
	/* A tenant's copy is named "tenant\0key" (mc_tier_key): back into its namespace. */
	if (mc_tenants_enabled(m) && memchr(key.p, '\0', key.n) &&
	    (mc_tenant_unscope(m, key.p, key.n, MC_PERSIST_SCOPED, &tenant, &local, &local_len) ||
	     local_len == 0))
		return MC_ERR_OBJECT_NOT_FOUND;
	o = mc_object_find_in(m, tenant, local, local_len);
	if (o != NULL && o->gen != gen) {
		/* Two adopted copies of a key written before this master: the newer wins, if
		 * nothing but SSD copies exist yet. */
		if (!(m->adopt_open && gen < m->gen_epoch && o->gen < gen) ||
		    mc_object_in_memory(o) || (o->flags & (MC_OBJ_PROMOTING | MC_OBJ_OFFLOADING)) ||
		    o->fetch_until > now)
			return MC_ERR_OBJECT_ALREADY_EXISTS;
		for (i = 0; i < o->nrep; i++)
			if (mc_object_replica(o, i)->status != MC_REPLICA_COMPLETE)
				return MC_ERR_OBJECT_ALREADY_EXISTS;
		mc_register_drop_older(m, o);
		mc_persist_object_gone(m, o);	/* its row goes: the new one has gen */
		o->gen = gen;
		mc_adopt_rowkey(m, o);
		o->size = size;
		o->has_checksum = cs->present;
		o->checksum = cs->value;
	} else if (o == NULL && mc_ghost_check(m, key.p, key.n, gen) != 0) {
		return MC_ERR_OBJECT_NOT_FOUND;	/* removed or replaced while it was away */
	}
	if (gen >= m->next_gen)
		m->next_gen = gen + 1;
	if (o == NULL) {
		saved = m->objects.tenant;
		m->objects.tenant = tenant;
		o = mc_object_insert(&m->objects, local, local_len, 0);
		m->objects.tenant = saved;
		o->size = size;
		o->gen = gen;
		mc_adopt_rowkey(m, o);
		o->put_start = now;
		o->lease_until = now;
		o->writer = mc_client_ref(c);
		o->has_checksum = cs->present;
		o->checksum = cs->value;
		mc_object_lru_unlink(&m->objects, o);
		r = mc_object_add_replica(o);
		mc_disk_replica_attach(m, disk, r, addr, size);
		mc_persist_object_changed(m, o);
		return 0;
	}
	if (o->size != size)
		return MC_ERR_OBJECT_ALREADY_EXISTS;
	if (cs->present && o->has_checksum && o->checksum != cs->value) {
		mc_log_warn("SSD copy of %.*s on %s: checksum %016llx is not the object's %016llx: "
			    "refused", (int)(key.n > 128 ? 128 : key.n), key.p, disk->name,
			    (unsigned long long)cs->value, (unsigned long long)o->checksum);
		return MC_ERR_CHECKSUM_MISMATCH;
	}
	if (cs->present && !o->has_checksum) {
		o->has_checksum = 1;
		o->checksum = cs->value;
	}
	for (i = 0; i < o->nrep; i++) {
		r = mc_object_replica(o, i);
		if (r->seg == disk) {
			r->disk_addr = addr;
			mc_persist_object_changed(m, o);
			return 0;
		}
		if (r->seg && r->status != MC_REPLICA_COMPLETE)
			return MC_ERR_OBJECT_ALREADY_EXISTS;	/* being written */
	}
	/* Another SSD copy (an earlier process of this client, not yet declared dead, or
	 * another client) does not stop ours: readers fall back from one to the next. */
	if (o->flags & MC_OBJ_PROMOTING)
		return MC_ERR_OBJECT_ALREADY_EXISTS;
	r = mc_object_add_replica(o);
	if (r == NULL)
		return MC_ERR_OBJECT_ALREADY_EXISTS;
	mc_disk_replica_attach(m, disk, r, addr, size);
	mc_persist_object_changed(m, o);
	return 0;
}

/* The owner of disk found its copy of key at addr corrupt or truncated and deleted it: forget
 * the replica now, leases or not (nobody can read those bytes any more).  0 or -704. */
static int mc_disk_copy_lost(struct mc_master *m, struct mc_segment *disk, struct mc_strv key,
			     uint64_t addr, const char *peer)
{
	struct mc_object *o = mc_tier_object(m, key.p, key.n);
	uint32_t j;

	for (j = 0; o && j < o->nrep; j++) {
		struct mc_replica *r = mc_object_replica(o, j);

		if (r->seg == disk && r->disk_addr == addr && r->status == MC_REPLICA_COMPLETE) {
			mc_log_warn("SSD copy of %.*s on %s (%s) is corrupt: forgotten",
				    (int)(key.n > 128 ? 128 : key.n), key.p, disk->name, peer);
			m->metrics.disk_copies_lost++;
			mc_disk_replica_forget(m, o, r);
			return 0;
		}
	}
	return MC_ERR_OBJECT_NOT_FOUND;
}

int mc_op_notify_offload(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_rbuf *r = &q->r;
	struct mc_wbuf *out = q->out;
	int64_t now = q->now;
	const char *peer = q->peer;
	struct mc_uuid cid, did;
	struct mc_client *c;
	struct mc_segment *disk;
	struct {
		uint8_t kind;
		struct mc_strv key;
		uint64_t size, addr, gen;
		int32_t result;
	} *items;
	struct mc_rpc_checksum *cs;
	uint32_t n, i;

	mc_rpc_get_uuid(r, &cid);
	mc_rpc_get_uuid(r, &did);
	n = mc_rbuf_count(r, MC_RPC_MAX_BATCH, 33);
	if (r->err)
		return MC_ERR_INVALID_PARAMS;
	items = mc_xcalloc(n ? n : 1, sizeof(*items));
	cs = mc_xcalloc(n ? n : 1, sizeof(*cs));
	for (i = 0; i < n; i++) {
		items[i].kind = mc_rbuf_u8(r);
		items[i].key = mc_rpc_get_strv(r, MC_RPC_MAX_KEY);
		items[i].size = mc_rbuf_u64(r);
		items[i].addr = mc_rbuf_u64(r);
		items[i].result = (int32_t)mc_rbuf_u32(r);
		items[i].gen = mc_rbuf_u64(r);
	}
	(void)mc_rpc_get_checksums(r, cs, n);	/* optional: the copies' checksums */
	if (!mc_body_done(r)) {
		free(items);
		free(cs);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_find(m, &cid);
	disk = mc_client_disk(c, &did);
	if (disk == NULL || disk->status != MC_SEG_OK) {
		free(items);
		free(cs);
		return MC_ERR_SEGMENT_NOT_FOUND;
	}
	mc_wbuf_u32(out, n);
	for (i = 0; i < n; i++) {
		struct mc_tier_task *t;
		int rc;

		if (items[i].key.n == 0 || items[i].size == 0) {
			rc = MC_ERR_INVALID_PARAMS;
		} else if (items[i].kind == MC_TIER_REGISTER) {
			rc = mc_disk_addr_ok(items[i].addr, items[i].size)
				     ? mc_register_one(m, c, disk, items[i].key, items[i].size,
						       items[i].addr, items[i].gen, &cs[i], now)
				     : MC_ERR_INVALID_PARAMS;
		} else if (items[i].kind == MC_TIER_LOST) {
			rc = mc_disk_copy_lost(m, disk, items[i].key, items[i].addr, peer);
		} else if (items[i].kind == MC_TIER_OFFLOAD || items[i].kind == MC_TIER_PROMOTE) {
			t = mc_inflight_take(disk, items[i].kind, items[i].key);
			rc = t ? mc_task_done(m, disk, t, items[i].result, items[i].addr)
			       : MC_ERR_OBJECT_NOT_FOUND;
		} else {
			rc = MC_ERR_INVALID_PARAMS;
		}
		if (rc == MC_ERR_INVALID_PARAMS)
			mc_log_warn("NotifyOffload item %u from %s refused", i, peer);
		mc_wbuf_i32(out, rc);
	}
	free(items);
	free(cs);
	return 0;
}
int mc_op_evict_disk_replica(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_rbuf *r = &q->r;
	struct mc_wbuf *out = q->out;
	int64_t now = q->now;
	const char *peer = q->peer;
	struct mc_uuid cid, did;
	struct mc_client *c;
	struct mc_segment *disk;
	struct mc_strv *keys = NULL;
	uint32_t n, i;

	(void)peer;
	mc_rpc_get_uuid(r, &cid);
	mc_rpc_get_uuid(r, &did);
	n = mc_rbuf_count(r, MC_RPC_MAX_BATCH, 4);
	if (r->err == 0 && n) {
		keys = mc_xcalloc(n, sizeof(*keys));
		for (i = 0; i < n; i++)
			keys[i] = mc_rpc_get_strv(r, MC_RPC_MAX_KEY);
	}
	if (!mc_body_done(r)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_find(m, &cid);
	disk = mc_client_disk(c, &did);
	if (disk == NULL) {
		free(keys);
		return MC_ERR_SEGMENT_NOT_FOUND;
	}
	mc_wbuf_u32(out, n);
	for (i = 0; i < n; i++) {
		struct mc_object *o = mc_tier_object(m, keys[i].p, keys[i].n);
		struct mc_replica *dr = NULL;
		uint32_t j;
		int rc = 0;

		for (j = 0; o && j < o->nrep; j++)
			if (mc_object_replica(o, j)->seg == disk)
				dr = mc_object_replica(o, j);
		if (dr == NULL) {
			rc = MC_ERR_OBJECT_NOT_FOUND;
		} else if (o->fetch_until > now || (o->flags & MC_OBJ_PROMOTING)) {
			rc = MC_ERR_OBJECT_HAS_LEASE;	/* a reader may be using it */
		} else {
			mc_disk_replica_forget(m, o, dr);
		}
		mc_wbuf_i32(out, rc);
	}
	free(keys);
	return 0;
}

/* RegisterPrefetchTask: "keys" -> u32 n, n x i32.  A client asks, best effort, that objects it
 * expects to read soon and that only an SSD area holds come back into memory (is_exist with
 * ExistOptions.prefetch_to_memory).  Per key: 1 a promotion was queued, 0 nothing to do (in
 * memory already, being promoted, no SSD copy), OBJECT_NOT_FOUND, or NO_AVAILABLE_HANDLE when
 * memory has no room (never evicts for it; the client backs off) or another code of
 * mc_tier_promote.  Grants no lease. */
static int mc_prefetch_one(struct mc_req *q, struct mc_object *o)
{
	struct mc_replica *disk;

	if (o == NULL || mc_object_count_readable(o) == 0)
		return MC_ERR_OBJECT_NOT_FOUND;
	if (!mc_object_in_memory(o) && (disk = mc_object_disk_replica(o)) != NULL)
		return mc_tier_promote(q->m, o, disk, NULL);
	return 0;
}

int mc_op_register_prefetch(struct mc_req *q)
{
	return mc_req_keys_each(q, mc_prefetch_one);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's SSD tier: clients' SSD areas ("disk segments"), the
 * LOCAL_DISK replicas on them, and the tasks that move bytes between memory and SSD.
 *
 * The master never touches bytes.  A client that mounted an SSD area polls OFFLOAD_HEARTBEAT;
 * the answer lists tasks: OFFLOAD (copy an object from your own memory segment to your SSD),
 * PROMOTE (copy an object from your SSD into this memory replica) and DROP (the master forgot
 * this SSD copy: delete it).  The client answers OFFLOAD/PROMOTE with NOTIFY_OFFLOAD, which also
 * carries REGISTER items for objects found on the SSD at start-up.  Before deleting SSD data on
 * its own (watermark eviction) a client asks with EVICT_DISK_REPLICA and deletes only what the
 * master released, so no reader is handed a deleted object.
 *
 * Invariants: memory of an object being offloaded is never freed before the SSD copy is
 * acknowledged, and the owner acknowledges only a durable copy (value fdatasync'ed, directory
 * fsync'ed); a failed offload leaves the object in memory, demoted or not, and starts an
 * exponential backoff of that area (no offload is handed out to it before offload_retry_at;
 * a success resets it), so a failing disk costs one failed write per backoff step, not a hot
 * loop (eviction skips objects with MC_OBJ_OFFLOADING and only marks them DEMOTE); a
 * task names its object by key plus the id of the memory replica involved, and is checked again
 * when handed out and when answered, so removals and re-puts in between are detected and the
 * client is told to delete what it wrote.  Every task ends in mc_tier_task_done, through an
 * answer, its deadline, or its disk going away.
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "master/tenants.h"
#include "master/tier_ssd.h"
#include "segment/alloc.h"

#define MC_TIER_BACKOFF_MIN_MS 200	/* first pause after a failed offload */
#define MC_TIER_BACKOFF_MAX_MS 5000

static char *mc_strv_dup(struct mc_strv s)
{
	return mc_xstrndup(s.p, s.n);
}

struct mc_segment *mc_disk_find(struct mc_master *m, const struct mc_uuid *id)
{
	uint32_t b;

	for (b = 0; b < m->nclient_buckets; b++) {
		struct mc_client *c;

		for (c = m->client_buckets[b]; c; c = c->hnext) {
			struct mc_segment *s;

			for (s = c->segs; s; s = s->cnext)
				if (s->is_disk && !memcmp(s->id.b, id->b, 16))
					return s;
		}
	}
	return NULL;
}

struct mc_segment *mc_client_disk(struct mc_client *c, const struct mc_uuid *id)
{
	struct mc_segment *s;

	for (s = c ? c->segs : NULL; s; s = s->cnext)
		if (s->is_disk && (id == NULL || !memcmp(s->id.b, id->b, 16)) &&
		    (id != NULL || s->status == MC_SEG_OK))
			return s;
	return NULL;
}

/* What the tables call on an SSD area: DROP tasks for forgotten copies, its tasks failed when it
 * is unmounted. */
static const struct mc_disk_tier mc_tier_ssd = {
	.drop = mc_tier_queue_drop,
	.gone = mc_tier_disk_gone,
};

struct mc_segment *mc_disk_mount(struct mc_master *m, struct mc_client *c,
				 const struct mc_uuid *id, struct mc_strv name,
				 struct mc_strv endpoint, uint64_t capacity, int *rc)
{
	struct mc_segment *seg = mc_disk_find(m, id);
	char idbuf[40];

	*rc = 0;
	if (capacity == 0 || name.n == 0 || endpoint.n == 0 || mc_uuid_is_nil(id)) {
		*rc = MC_ERR_INVALID_PARAMS;
		return NULL;
	}
	if (seg != NULL) {
		if (seg->client != c) {
			*rc = MC_ERR_INVALID_PARAMS;
			return NULL;
		}
		if (seg->status != MC_SEG_OK) {
			*rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
			return NULL;
		}
		if (seg->size != capacity) {
			m->disk_capacity += capacity - seg->size;
			seg->size = capacity;
			mc_persist_segment_changed(m, seg);
		}
		return seg;
	}
	seg = mc_xcalloc(1, sizeof(*seg));
	seg->is_disk = 1;
	seg->tier = &mc_tier_ssd;
	seg->id = *id;
	seg->name = mc_strv_dup(name);
	seg->endpoint = mc_strv_dup(endpoint);
	seg->protocol = mc_xstrdup("tcp");
	seg->size = capacity;
	seg->client = c;
	seg->status = MC_SEG_OK;
	seg->cnext = c->segs;
	c->segs = seg;
	c->refs++;
	m->disk_capacity += capacity;
	mc_persist_segment_changed(m, seg);
	mc_uuid_format(id, idbuf);
	mc_log_info("SSD area %s mounted: name %s, %llu bytes, endpoint %s", idbuf, seg->name,
		    (unsigned long long)capacity, seg->endpoint);
	return seg;
}

void mc_disk_replica_link(struct mc_master *m, struct mc_segment *seg, struct mc_replica *r,
			  uint8_t type, uint64_t addr, uint64_t size)
{
	r->type = type;
	r->disk_addr = addr;
	mc_segment_push_replica(seg, r);
	seg->used += size;
	m->disk_allocated += size;
}

void mc_disk_replica_attach(struct mc_master *m, struct mc_segment *disk, struct mc_replica *r,
			    uint64_t addr, uint64_t size)
{
	mc_disk_replica_link(m, disk, r, MC_REPLICA_LOCAL_DISK, addr, size);
	r->status = MC_REPLICA_COMPLETE;
	r->hits = 0;
	if (r->id == 0)
		r->id = m->next_replica_id++;
}

struct mc_replica *mc_object_disk_replica(struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if ((r->type == MC_REPLICA_LOCAL_DISK || r->type == MC_REPLICA_DISK) &&
		    mc_replica_readable(r))
			return r;
	}
	return NULL;
}

int mc_object_in_memory(struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->type == MC_REPLICA_MEMORY && mc_replica_readable(r))
			return 1;
	}
	return 0;
}

struct mc_replica *mc_object_replica_by_id(struct mc_object *o, uint64_t id)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->id == id)
			return r;
	}
	return NULL;
}

/* A LOCAL_DISK address must lie in the disk window of the data port, [2^62, 2^63). */
int mc_disk_addr_ok(uint64_t addr, uint64_t size)
{
	return addr >= (1ull << 62) && addr < (1ull << 63) && size <= (1ull << 63) - addr;
}

/* ---------------------------------------------------------------- tier names */

size_t mc_tier_key(const struct mc_master *m, const struct mc_object *o, char *out)
{
	return mc_tenant_scoped_key(m, o->tenant, o->key, o->key_len, out);
}

struct mc_object *mc_tier_object(struct mc_master *m, const char *name, size_t len)
{
	const char *key;
	size_t key_len;
	uint16_t tenant;

	if (mc_tenant_split_key(m, name, len, &tenant, &key, &key_len) != 0)
		return NULL;
	return mc_object_find_in(m, tenant, key, key_len);
}

/* ---------------------------------------------------------------- tasks */

/* A task about o, which names it by its tier name; NULL when that name is longer than an SSD
 * area or the protocol takes (a long key of a tenant with a long name: it stays in memory). */
static struct mc_tier_task *mc_task_new(const struct mc_master *m, uint8_t kind,
					const struct mc_object *o, uint64_t addr)
{
	char name[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];
	size_t len = mc_tier_key(m, o, name);
	struct mc_tier_task *t;

	if (len > MC_RPC_MAX_KEY)
		return NULL;
	t = mc_xcalloc(1, sizeof(*t) + len);
	t->kind = kind;
	t->key_len = (uint16_t)len;
	memcpy(t->key, name, len);
	t->size = o->size;
	t->addr = addr;
	return t;
}

static void mc_task_push(struct mc_segment *disk, struct mc_tier_task *t)
{
	t->next = NULL;
	if (disk->tasks_tail)
		disk->tasks_tail->next = t;
	else
		disk->tasks = t;
	disk->tasks_tail = t;
	disk->ntasks++;
}

struct mc_tier_task *mc_task_pop(struct mc_segment *disk)
{
	struct mc_tier_task *t = disk->tasks;

	if (t == NULL)
		return NULL;
	disk->tasks = t->next;
	if (disk->tasks == NULL)
		disk->tasks_tail = NULL;
	return t;
}

/* Drop the DEMOTE accounting of a task (the object's bytes are no longer "about to be freed"). */
static void mc_task_undemote(struct mc_master *m, struct mc_tier_task *t)
{
	if (t->demote) {
		m->demote_pending -= t->size < m->demote_pending ? t->size : m->demote_pending;
		t->demote = 0;
	}
}

/* Eviction had chosen o (DEMOTE) but its SSD copy did not come: memory holds the last copy,
 * so it stays, back on the LRU list (eviction tries again once the area is not backing off). */
static void mc_demote(struct mc_master *m, struct mc_object *o);

static void mc_demote_failed(struct mc_master *m, struct mc_object *o)
{
	o->flags &= (uint8_t) ~MC_OBJ_DEMOTE;
	if (mc_object_disk_replica(o) != NULL && o->fetch_until <= mc_master_now(m)) {
		mc_demote(m, o);	/* an SSD copy exists after all (registered meanwhile) */
		return;
	}
	if (!(o->flags & MC_OBJ_HARD_PIN))
		mc_object_lru_link(&m->objects, o);
}

/* An offload to disk failed (rc != 0) or succeeded: move its backoff. */
static void mc_disk_offload_result(struct mc_master *m, struct mc_segment *disk, int rc)
{
	int64_t wait;

	if (rc == 0) {
		if (disk->offload_fail_streak)
			mc_log_info("SSD area of %s takes offloads again after %u failed ones",
				    disk->name, disk->offload_fail_streak);
		disk->offload_fail_streak = 0;
		disk->offload_retry_at = 0;
		return;
	}
	m->metrics.offload_failures++;
	if (disk->offload_fail_streak && mc_master_now(m) < disk->offload_retry_at)
		return;	/* another failure of the same round: one backoff step per round */
	if (disk->offload_fail_streak < 30)
		disk->offload_fail_streak++;
	wait = (int64_t)MC_TIER_BACKOFF_MIN_MS << (disk->offload_fail_streak - 1);
	if (wait > MC_TIER_BACKOFF_MAX_MS)
		wait = MC_TIER_BACKOFF_MAX_MS;
	disk->offload_retry_at = mc_master_now(m) + wait;
	if (disk->offload_fail_streak == 1)
		mc_log_warn("SSD area of %s: an offload failed (%s); objects stay in memory and "
			    "offloads to it back off", disk->name, mc_strerror(rc));
}

int mc_disk_backing_off(const struct mc_master *m, const struct mc_segment *disk)
{
	return disk->offload_fail_streak && mc_master_now(m) < disk->offload_retry_at;
}

/* Free o's memory replicas: its SSD copy stays the one readers get. */
static void mc_demote(struct mc_master *m, struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->type == MC_REPLICA_MEMORY)
			mc_replica_release(m, r);
	}
	mc_object_compact(o);
	mc_object_lru_unlink(&m->objects, o);
	m->metrics.demoted_key_count++;
	m->metrics.evicted_key_count++;
	m->metrics.evicted_size_bytes += o->size;
	mc_persist_object_changed(m, o);
}

/* An OFFLOAD task that will not run: the object goes back to normal (evicted if eviction had
 * chosen it).  Frees t. */
void mc_task_cancel(struct mc_master *m, struct mc_tier_task *t)
{
	struct mc_object *o = mc_tier_object(m, t->key, t->key_len);

	mc_task_undemote(m, t);
	if (t->kind == MC_TIER_OFFLOAD)
		m->metrics.offload_cancelled++;
	if (t->kind == MC_TIER_OFFLOAD && o && (o->flags & MC_OBJ_OFFLOADING) &&
	    o->size == t->size) {
		o->flags &= (uint8_t) ~MC_OBJ_OFFLOADING;
		if (o->flags & MC_OBJ_DEMOTE)
			mc_demote_failed(m, o);
	}
	free(t);
}

/* A task is over: result 0 (success), or a failure code.  Returns the code for the client
 * (0: keep what you wrote; OBJECT_NOT_FOUND: delete it). */
int mc_task_done(struct mc_master *m, struct mc_segment *disk, struct mc_tier_task *t, int result,
		 uint64_t disk_addr)
{
	struct mc_object *o = mc_tier_object(m, t->key, t->key_len);
	struct mc_replica *r = o ? mc_object_replica_by_id(o, t->replica_id) : NULL;
	int rc = 0;

	switch (t->kind) {
	case MC_TIER_OFFLOAD:
		if (o == NULL || !(o->flags & MC_OBJ_OFFLOADING) || r == NULL ||
		    r->type != MC_REPLICA_MEMORY || o->size != t->size || o->gen != t->gen) {
			/* Removed, re-put or its memory unmounted meanwhile. */
			if (o && (o->flags & MC_OBJ_OFFLOADING) && o->size == t->size)
				mc_task_cancel(m, t);
			else
				mc_task_undemote(m, t), free(t);
			return MC_ERR_OBJECT_NOT_FOUND;
		}
		o->flags &= (uint8_t) ~MC_OBJ_OFFLOADING;
		if (result == 0 && mc_object_disk_replica(o) != NULL) {
			/* An SSD copy appeared meanwhile (registered by a restarted owner): keep
			 * that one; the memory can go as planned. */
			rc = MC_ERR_OBJECT_NOT_FOUND;
			if (o->flags & MC_OBJ_DEMOTE) {
				o->flags &= (uint8_t) ~MC_OBJ_DEMOTE;
				if (o->fetch_until > mc_master_now(m))
					mc_object_lru_link(&m->objects, o);
				else
					mc_demote(m, o);
			}
			break;
		}
		if (result != 0 || !mc_disk_addr_ok(disk_addr, o->size) ||
		    disk->status != MC_SEG_OK) {
			mc_disk_offload_result(m, disk, result ? result : MC_ERR_INVALID_PARAMS);
			if (o->flags & MC_OBJ_DEMOTE)
				mc_demote_failed(m, o);
			else if (m->cfg.enable_offload && !m->cfg.offload_on_evict)
				mc_tier_queue_offload(m, o, 0);	/* after the backoff */
			rc = result ? 0 : MC_ERR_OBJECT_NOT_FOUND;
			break;
		}
		r = mc_object_add_replica(o);
		if (r == NULL) {
			if (o->flags & MC_OBJ_DEMOTE)
				mc_demote_failed(m, o);
			rc = MC_ERR_OBJECT_NOT_FOUND;
			break;
		}
		mc_disk_replica_attach(m, disk, r, disk_addr, o->size);
		mc_disk_offload_result(m, disk, 0);
		m->metrics.offload_completed++;
		m->metrics.offloaded_key_count++;
		m->metrics.offloaded_bytes += o->size;
		if (o->flags & MC_OBJ_DEMOTE) {
			o->flags &= (uint8_t) ~MC_OBJ_DEMOTE;
			if (o->fetch_until > mc_master_now(m)) {
				/* A reader may be copying the memory: keep it; the next eviction
				 * frees it (it has an SSD copy now). */
				mc_object_lru_link(&m->objects, o);
				mc_persist_object_changed(m, o);
			} else {
				mc_demote(m, o);
			}
		} else {
			mc_persist_object_changed(m, o);
		}
		break;
	case MC_TIER_PROMOTE:
		if (o == NULL || !(o->flags & MC_OBJ_PROMOTING) || r == NULL ||
		    r->status != MC_REPLICA_PROCESSING) {
			rc = MC_ERR_OBJECT_NOT_FOUND;
			break;
		}
		o->flags &= (uint8_t) ~MC_OBJ_PROMOTING;
		if (result != 0) {
			m->metrics.promotion_failed++;
			/* The owner stopped writing (it answered): free at once.  Its SSD copy may be
			 * gone too (reported LOST just before): then nothing is left. */
			mc_replica_release(m, r);
			mc_object_settle(m, o);
			break;
		}
		r->status = MC_REPLICA_COMPLETE;
		m->metrics.promotion_completed++;
		m->metrics.promotion_completed_bytes += o->size;
		mc_object_lru_link(&m->objects, o);
		mc_persist_object_changed(m, o);
		break;
	default:
		break;
	}
	mc_task_undemote(m, t);
	free(t);
	return rc;
}

/* A promotion that will get no answer (deadline, disk gone): the owner may still be writing
 * into the memory replica, so its bytes are parked like a preempted put's. */
void mc_task_abandon(struct mc_master *m, struct mc_segment *disk, struct mc_tier_task *t)
{
	if (t->kind == MC_TIER_PROMOTE) {
		struct mc_object *o = mc_tier_object(m, t->key, t->key_len);
		struct mc_replica *r = o ? mc_object_replica_by_id(o, t->replica_id) : NULL;

		if (o && (o->flags & MC_OBJ_PROMOTING) && r && r->status == MC_REPLICA_PROCESSING) {
			int64_t now = mc_master_now(m);

			o->flags &= (uint8_t) ~MC_OBJ_PROMOTING;
			m->metrics.promotion_failed++;
			mc_replica_discard(m, r, now + m->cfg.put_start_release_timeout_sec * 1000);
			mc_object_settle(m, o);
		}
		mc_task_undemote(m, t);
		free(t);
		return;
	}
	mc_task_done(m, disk, t, MC_ERR_TRANSFER_FAIL, 0);
}

int mc_tier_queue_offload(struct mc_master *m, struct mc_object *o, int demote)
{
	struct mc_segment *disk = NULL;
	struct mc_tier_task *t;
	uint32_t i;

	if (o->flags & MC_OBJ_OFFLOADING) {
		struct mc_segment *s;

		if (!demote || (o->flags & MC_OBJ_DEMOTE))
			return 0;
		/* Already queued for a background offload: free the memory when it is done. */
		for (i = 0; i < o->nrep && disk == NULL; i++) {
			struct mc_replica *r = mc_object_replica(o, i);

			if (r->seg && r->type == MC_REPLICA_MEMORY)
				disk = mc_client_disk(r->seg->client, NULL);
		}
		for (s = disk; s; s = NULL) {
			struct mc_tier_task *lists[2] = { s->tasks, s->inflight };
			char name[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];
			size_t len = mc_tier_key(m, o, name);
			int l;

			for (l = 0; l < 2; l++)
				for (t = lists[l]; t; t = t->next)
					if (t->kind == MC_TIER_OFFLOAD && t->key_len == len &&
					    !memcmp(t->key, name, len) && !t->demote) {
						t->demote = 1;
						m->demote_pending += t->size;
					}
		}
		o->flags |= MC_OBJ_DEMOTE;
		return 0;
	}
	if (mc_object_disk_replica(o) != NULL || (o->flags & MC_OBJ_PROMOTING))
		return -1;
	for (i = 0; i < o->nrep && disk == NULL; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->type == MC_REPLICA_MEMORY && mc_replica_readable(r))
			disk = mc_client_disk(r->seg->client, NULL);
	}
	if (disk == NULL || o->size > disk->size || disk->drain)
		return -1;	/* (an area being drained takes no new copies) */
	if (disk->ntasks >= (uint64_t)m->cfg.offloading_queue_limit ||
	    (demote && mc_disk_backing_off(m, disk))) {
		m->metrics.offload_enqueue_rejected++;
		return demote ? 1 : -1;
	}
	t = mc_task_new(m, MC_TIER_OFFLOAD, o, 0);
	if (t == NULL)
		return -1;
	m->metrics.offload_enqueued++;
	if (demote) {
		t->demote = 1;
		m->demote_pending += o->size;
		o->flags |= MC_OBJ_DEMOTE;
	}
	o->flags |= MC_OBJ_OFFLOADING;
	mc_task_push(disk, t);
	return 0;
}

void mc_tier_queue_drop(struct mc_master *m, struct mc_replica *r)
{
	struct mc_segment *disk = r->seg;
	struct mc_tier_task *t;

	if (disk->status != MC_SEG_OK || disk->ntasks >= (uint64_t)m->cfg.offloading_queue_limit * 2)
		return;	/* a dying client forgets everything; a flooded one scans at restart */
	t = mc_task_new(m, MC_TIER_DROP, mc_replica_obj(r), r->disk_addr);
	if (t)
		mc_task_push(disk, t);
}

uint64_t mc_tier_promotions_in_flight(const struct mc_master *m)
{
	const struct mc_metrics *x = &m->metrics;
	uint64_t ended = x->promotion_completed + x->promotion_failed;

	return x->promotion_admitted > ended ? x->promotion_admitted - ended : 0;
}

void mc_tier_on_disk_hit(struct mc_master *m, struct mc_object *o, struct mc_replica *disk)
{
	m->metrics.file_cache_hit_nums++;
	if (!m->cfg.promotion_on_hit || disk->type != MC_REPLICA_LOCAL_DISK)
		return;
	if (disk->hits < 255)
		disk->hits++;
	if (disk->hits >= m->cfg.promotion_admission_threshold)
		mc_tier_promote(m, o, disk, NULL);
}

int mc_tier_promote(struct mc_master *m, struct mc_object *o, struct mc_replica *disk,
		    const struct mc_rpc_config *where)
{
	struct mc_segment *dseg = disk->seg;
	struct mc_rpc_config cfg;
	struct mc_replica *r;
	struct mc_tier_task *t;

	if (disk->type != MC_REPLICA_LOCAL_DISK || (o->flags & MC_OBJ_PROMOTING))
		return 0;
	if ((o->flags & MC_OBJ_OFFLOADING) ||
	    dseg->ntasks >= (uint64_t)m->cfg.offloading_queue_limit)
		return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
	if (mc_tier_promotions_in_flight(m) >= (uint64_t)m->cfg.up.promotion_queue_limit) {
		m->metrics.promotion_rejected++;	/* --promotion_queue_limit */
		return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
	}
	if (!mc_tenant_has_room(m, o->tenant, o->size)) {
		/* The memory replica would be charged to the object's tenant, as upstream
		 * charges a promotion: not past its quota.  It stays readable from SSD. */
		m->metrics.promotion_rejected++;
		return MC_ERR_TENANT_QUOTA_EXCEEDED;
	}
	t = mc_task_new(m, MC_TIER_PROMOTE, o, 0);
	if (t == NULL)
		return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
	r = mc_object_add_replica(o);	/* may move disk: not used below */
	if (r == NULL) {
		free(t);
		return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
	}
	if (where)
		cfg = *where;
	else
		mc_rpc_config_default(&cfg);
	if (mc_replica_alloc(m, r, o->size, &cfg, NULL, 0) != 0) {
		/* Memory is full: no promotion (it never evicts for one, so hot SSD reads cannot
		 * push out what memory holds); the object stays readable from SSD and the next
		 * read tries again. */
		memset(r, 0, sizeof(*r));
		o->nrep--;
		free(t);
		m->metrics.promotion_rejected++;
		return MC_ERR_NO_AVAILABLE_HANDLE;
	}
	m->metrics.promotion_admitted++;
	r->type = MC_REPLICA_MEMORY;
	r->status = MC_REPLICA_PROCESSING;
	o->flags |= MC_OBJ_PROMOTING;
	t->replica_id = r->id;
	mc_task_push(dseg, t);
	mc_persist_object_changed(m, o);
	return 1;
}

void mc_tier_expire(struct mc_master *m, int64_t now)
{
	uint32_t b;

	for (b = 0; b < m->nclient_buckets; b++) {
		struct mc_client *c;

		for (c = m->client_buckets[b]; c; c = c->hnext) {
			struct mc_segment *s;

			for (s = c->segs; s; s = s->cnext) {
				struct mc_tier_task **pp = &s->inflight, *t;

				if (!s->is_disk)
					continue;
				while ((t = *pp) != NULL) {
					if (t->deadline > now) {
						pp = &t->next;
						continue;
					}
					*pp = t->next;
					s->ntasks--;
					mc_log_warn("%s task for %.*s on SSD area of %s timed out",
						    t->kind == MC_TIER_OFFLOAD ? "offload" : "promotion",
						    (int)(t->key_len > 128 ? 128 : t->key_len), t->key,
						    s->name);
					mc_task_abandon(m, s, t);
				}
			}
		}
	}
}

void mc_tier_disk_gone(struct mc_master *m, struct mc_segment *disk)
{
	struct mc_tier_task *t;

	while ((t = mc_task_pop(disk)) != NULL) {
		disk->ntasks--;
		if (t->kind == MC_TIER_DROP) {
			free(t);
			continue;
		}
		/* Never handed out: nobody writes anything for it. */
		if (t->kind == MC_TIER_PROMOTE) {
			struct mc_object *o = mc_tier_object(m, t->key, t->key_len);
			struct mc_replica *r = o ? mc_object_replica_by_id(o, t->replica_id) : NULL;

			if (o && r && r->status == MC_REPLICA_PROCESSING) {
				o->flags &= (uint8_t) ~MC_OBJ_PROMOTING;
				mc_replica_release(m, r);
				mc_object_settle(m, o);
			}
			mc_task_undemote(m, t);
			free(t);
			continue;
		}
		mc_task_cancel(m, t);
	}
	while ((t = disk->inflight) != NULL) {
		disk->inflight = t->next;
		disk->ntasks--;
		mc_task_abandon(m, disk, t);
	}
	m->disk_capacity -= disk->size < m->disk_capacity ? disk->size : m->disk_capacity;
}

/* Forget disk replica dr (LOCAL_DISK or DISK) of o at its owner's request, the owner deleting
 * the bytes itself once answered: released without a DROP task, counted as a disk eviction,
 * persisted; o is erased when dr was its last replica.  The caller checked the leases. */
void mc_disk_replica_forget(struct mc_master *m, struct mc_object *o, struct mc_replica *dr)
{
	m->quiet_disk_release = 1;
	mc_replica_release(m, dr);
	m->quiet_disk_release = 0;
	m->metrics.disk_evicted_key_count++;
	m->metrics.disk_evicted_bytes += o->size;
	mc_object_settle(m, o);
}

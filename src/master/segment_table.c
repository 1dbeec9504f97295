/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segments and clients of the master, and replica allocation across segments.
 *
 * Segments live in a dense array (for random choice) and are found by uuid through a linear scan
 * of that array: a cluster has tens to thousands of segments and mounts are rare, while the hot
 * path (allocation) never looks a segment up by id.  Clients are hashed by uuid.  Each segment
 * owns an offset allocator over [0, size); a replica's address is base + offset.
 * Segments of Offline clients are dormant (liveness.c): out of the array and of the pool's
 * totals (total_capacity, allocated), on the master's dormant list, their replicas kept.
 * Placement takes only segments of Active clients that no transfer failure was reported for.
 * Single-threaded: the master's reactor thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "master/tenants.h"
#include "reactor/options.h"
#include "segment/alloc.h"

#define MC_CLIENT_BUCKETS 1024

int mc_master_tables_init(struct mc_master *m)
{
	mc_object_table_init(&m->objects);
	/* prefix unless lru is asked for (NULL: the default, prefix) */
	if (m->cfg.eviction_policy == NULL || strcmp(m->cfg.eviction_policy, "lru") != 0)
		mc_object_table_set_policy(&m->objects, MC_EVICT_POLICY_PREFIX,
					   MC_PREFIX_PROTECTED_PCT);
	mc_ghosts_init(m);
	m->objects.on_erase = mc_ghost_on_erase;
	m->objects.on_erase_arg = m;
	m->nclient_buckets = MC_CLIENT_BUCKETS;
	m->client_buckets = mc_xcalloc(m->nclient_buckets, sizeof(*m->client_buckets));
	m->next_replica_id = 1;
	return 0;
}

static void mc_segment_free(struct mc_segment *seg)
{
	mc_alloc_free(seg->alloc);
	free(seg->name);
	free(seg->endpoint);
	free(seg->protocol);
	free(seg);
}

void mc_master_tables_fini(struct mc_master *m)
{
	uint32_t i;

	mc_master_release_discards(m, 0, 1);
	/* Freeing tens of millions of objects one by one takes seconds that a stopping process
	 * need not spend: at exit the table stays reachable from the master and goes with it. */
	if (!m->exiting)
		mc_object_table_fini(&m->objects);
	mc_ghosts_fini(m);
	/* Clients first: their segment lists pass through the memory segments freed below. */
	for (i = 0; i < m->nclient_buckets; i++) {
		struct mc_client *c = m->client_buckets[i], *n;

		for (; c; c = n) {
			struct mc_segment *s, *sn;

			n = c->hnext;
			for (s = c->segs; s; s = sn) {
				struct mc_tier_task *lists[2] = { NULL, NULL }, *t, *tn;
				int l;

				sn = s->cnext;
				if (!s->is_disk) {
					/* Mounted ones are freed from m->segs below. */
					if (s->status != MC_SEG_OK)
						mc_segment_free(s);
					continue;
				}
				lists[0] = s->tasks;
				lists[1] = s->inflight;
				for (l = 0; l < 2; l++)
					for (t = lists[l]; t; t = tn) {
						tn = t->next;
						free(t);
					}
				mc_segment_free(s);
			}
			free(c);
		}
	}
	free(m->client_buckets);
	free(m->client_refs);
	for (i = 0; i < m->nsegs; i++)
		mc_segment_free(m->segs[i]);
	free(m->segs);
}

static uint32_t mc_client_bucket(const struct mc_master *m, const struct mc_uuid *id)
{
	uint32_t h;

	memcpy(&h, id->b + 4, sizeof(h));
	return h & (m->nclient_buckets - 1);
}

struct mc_client *mc_client_find(struct mc_master *m, const struct mc_uuid *id)
{
	struct mc_client *c = m->client_buckets[mc_client_bucket(m, id)];

	while (c && memcmp(c->id.b, id->b, 16))
		c = c->hnext;
	return c;
}

struct mc_client *mc_client_get(struct mc_master *m, const struct mc_uuid *id)
{
	struct mc_client *c = mc_client_find(m, id);
	uint32_t b;

	if (c)
		return c;
	c = mc_xcalloc(1, sizeof(*c));
	c->id = *id;
	c->last_ping = mc_master_now(m);
	if (m->nclient_refs == 0)
		m->nclient_refs = 1;	/* reference 0 names no client */
	if (m->nclient_refs >= m->client_refs_cap) {
		m->client_refs_cap = m->client_refs_cap ? m->client_refs_cap * 2 : 64;
		m->client_refs = mc_xrealloc(m->client_refs,
					     m->client_refs_cap * sizeof(*m->client_refs));
	}
	c->ref = m->nclient_refs;
	m->client_refs[m->nclient_refs++] = c;
	b = mc_client_bucket(m, id);
	c->hnext = m->client_buckets[b];
	m->client_buckets[b] = c;
	m->nclients++;
	return c;
}

struct mc_segment *mc_segment_find(struct mc_master *m, const struct mc_uuid *id)
{
	uint32_t i;

	for (i = 0; i < m->nsegs; i++)
		if (!memcmp(m->segs[i]->id.b, id->b, 16))
			return m->segs[i];
	return NULL;
}

void mc_segment_note_populated(struct mc_client *c, struct mc_rbuf *r)
{
	uint32_t n, i;

	if (r->err || r->left == 0)
		return;
	n = mc_rbuf_u32(r);
	if (n > r->left / 24) {
		r->err = 1;
		return;
	}
	for (i = 0; i < n; i++) {
		struct mc_uuid id;
		struct mc_segment *seg;
		uint64_t v;

		mc_rpc_get_uuid(r, &id);
		v = mc_rbuf_u64(r);
		for (seg = c ? c->segs : NULL; seg && r->err == 0; seg = seg->cnext) {
			if (memcmp(seg->id.b, id.b, 16))
				continue;
			seg->populated = v < seg->size ? v : seg->size;
			seg->has_populated = 1;
		}
	}
}

struct mc_segment *mc_segment_lookup(struct mc_master *m, const struct mc_uuid *id)
{
	struct mc_segment *seg = mc_segment_find(m, id);

	if (seg != NULL)
		return seg;
	for (seg = m->dormant; seg != NULL; seg = seg->dnext)
		if (!memcmp(seg->id.b, id->b, 16))
			return seg;
	return NULL;
}

void mc_segs_add(struct mc_master *m, struct mc_segment *seg)
{
	if (m->nsegs == m->capsegs) {
		m->capsegs = m->capsegs ? m->capsegs * 2 : 16;
		m->segs = mc_xrealloc(m->segs, m->capsegs * sizeof(*m->segs));
	}
	seg->index = m->nsegs;
	m->segs[m->nsegs++] = seg;
	m->total_capacity += seg->size;
}

void mc_segs_remove(struct mc_master *m, struct mc_segment *seg)
{
	m->segs[seg->index] = m->segs[m->nsegs - 1];
	m->segs[seg->index]->index = seg->index;
	m->nsegs--;
	m->total_capacity -= seg->size;
}

int mc_replica_readable(const struct mc_replica *r)
{
	return r->seg != NULL && r->seg->status == MC_SEG_OK && r->status == MC_REPLICA_COMPLETE &&
	       !mc_replica_pending(r);
}

int mc_segment_placeable(const struct mc_master *m, const struct mc_segment *seg, int64_t now)
{
	(void)m;
	if (seg->status != MC_SEG_OK || now < seg->unhealthy_until || seg->drain)
		return 0;	/* a segment being drained takes nothing new */
	/* The shared directory's holder (--root_fs_dir) belongs to no client. */
	return seg->client == NULL || (seg->client->state != MC_CLIENT_SUSPECTED &&
				       seg->client->state != MC_CLIENT_OFFLINE);
}

int mc_segment_preferred_for_read(const struct mc_master *m, const struct mc_segment *seg,
				  int64_t now)
{
	return mc_segment_placeable(m, seg, now);
}

int mc_object_has_memory(struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg != NULL && r->type == MC_REPLICA_MEMORY)
			return 1;
	}
	return 0;
}

void mc_segment_unmount(struct mc_master *m, struct mc_segment *seg, const char *why)
{
	if (seg->status == MC_SEG_UNMOUNTING)
		return;
	if (seg->status == MC_SEG_DORMANT) {
		struct mc_segment **pp;

		for (pp = &m->dormant; *pp; pp = &(*pp)->dnext)
			if (*pp == seg) {
				*pp = seg->dnext;
				break;
			}
		seg->dnext = NULL;
		/* Back in allocated, as every segment being unmounted is until it is reaped. */
		m->allocated += mc_alloc_used(seg->alloc);
		seg->status = MC_SEG_UNMOUNTING;
	} else if (seg->is_disk) {
		seg->status = MC_SEG_UNMOUNTING;
		/* Its tasks fail now (no more heartbeats will come); replicas go in steps. */
		if (seg->tier != NULL && seg->tier->gone != NULL)
			seg->tier->gone(m, seg);
	} else {
		seg->status = MC_SEG_UNMOUNTING;
		/* Out of the allocation array now: no new replica can land on it. */
		mc_segs_remove(m, seg);
	}
	seg->reap_next = m->reap_head;
	m->reap_head = seg;
	mc_log_info("segment %s (%s) unmounting: %s, %llu replicas to drop", seg->name,
		    seg->endpoint, why, (unsigned long long)seg->nreps);
	event_active(m->ev_reap, EV_TIMEOUT, 0);
}

/* The segment has no replicas left: forget it. */
static void mc_segment_finish_unmount(struct mc_master *m, struct mc_segment *seg)
{
	struct mc_client *c = seg->client;
	struct mc_segment **pp;
	struct mc_discard *d;

	for (d = m->discards; d; d = d->next)
		if (d->seg == seg) {
			d->seg = NULL;	/* its allocator goes away with the segment */
			m->allocated -= d->len;
		}
	for (pp = &c->segs; *pp; pp = &(*pp)->cnext)
		if (*pp == seg) {
			*pp = seg->cnext;
			break;
		}
	c->refs--;
	mc_persist_segment_gone(m, seg);
	mc_log_info("segment %s unmounted", seg->name);
	mc_segment_free(seg);
}

int mc_master_reap(struct mc_master *m, uint32_t budget)
{
	while (m->reap_head && budget) {
		struct mc_segment *seg = m->reap_head;
		struct mc_replica *r;

		while ((r = seg->reps) != NULL && budget) {
			struct mc_object *o = mc_replica_obj(r);
			uint32_t i, live = 0;

			mc_replica_release(m, r);
			r->status = MC_REPLICA_REMOVED;
			budget--;
			if (seg->is_disk)
				o->flags |= MC_OBJ_SSD_AWAY;
			for (i = 0; i < o->nrep; i++)
				live += mc_object_replica(o, i)->seg != NULL;
			if (live == 0) {
				/* Its last copy was on an SSD area that went away: keep a ghost
				 * so the area's owner may bring it back (ghosts.c). */
				mc_persist_object_gone(m, o);
				m->erase_keep = (o->flags & MC_OBJ_SSD_AWAY) != 0;
				mc_object_erase(&m->objects, o);
				m->erase_keep = 0;
			} else {
				mc_object_compact(o);
				/* Left only on SSD: no memory to evict (memory on a dormant segment
				 * stays evictable should it come back). */
				if (!mc_object_has_memory(o))
					mc_object_lru_unlink(&m->objects, o);
				mc_persist_object_changed(m, o);
			}
		}
		if (seg->reps)
			break;
		m->reap_head = seg->reap_next;
		mc_segment_finish_unmount(m, seg);
	}
	return m->reap_head != NULL;
}

static uint64_t mc_master_rand(struct mc_master *m)
{
	uint64_t x = m->rng ? m->rng : 0x9e3779b97f4a7c15ull;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	m->rng = x;
	return x;
}

static int mc_name_used(struct mc_segment *seg, struct mc_segment **used, uint32_t nused)
{
	uint32_t i;

	for (i = 0; i < nused; i++)
		if (used[i] == seg || !strcmp(used[i]->name, seg->name))
			return 1;
	return 0;
}

/* Length of the host part of a "host:port" segment name. */
static size_t mc_host_len(const char *name)
{
	const char *colon = strrchr(name, ':');

	return colon ? (size_t)(colon - name) : strlen(name);
}

static int mc_host_used(struct mc_segment *seg, struct mc_segment **used, uint32_t nused)
{
	size_t hl = mc_host_len(seg->name);
	uint32_t i;

	for (i = 0; i < nused; i++)
		if (mc_host_len(used[i]->name) == hl && !strncmp(used[i]->name, seg->name, hl))
			return 1;
	return 0;
}

void mc_segment_push_replica(struct mc_segment *seg, struct mc_replica *r)
{
	r->seg = seg;
	mc_replica_push(&seg->reps, r);
	seg->nreps++;
}

static int mc_try_segment(struct mc_master *m, struct mc_segment *seg, struct mc_replica *r,
			  uint64_t len)
{
	/* While loading, a range not loaded yet may be any row's: nothing is handed out.  The
	 * clock matters only to a segment marked unhealthy (a clock read per replica else). */
	if (m->load ||
	    !mc_segment_placeable(m, seg, seg->unhealthy_until ? mc_master_now(m) : 0))
		return -1;
	if (mc_alloc_reserve(seg->alloc, len, &r->off) != 0)
		return -1;
	mc_segment_push_replica(seg, r);
	r->id = m->next_replica_id++;
	m->allocated += mc_alloc_round(len);
	if (mc_replica_obj(r))
		mc_tenant_charge(m, mc_replica_obj(r)->tenant, (int64_t)mc_alloc_round(len));
	return 0;
}

static int mc_try_named(struct mc_master *m, struct mc_strv name, struct mc_replica *r,
			uint64_t len, struct mc_segment **used, uint32_t nused)
{
	uint32_t i;

	if (name.n == 0)
		return -1;
	for (i = 0; i < m->nsegs; i++) {
		struct mc_segment *seg = m->segs[i];

		if (strlen(seg->name) == name.n && !memcmp(seg->name, name.p, name.n) &&
		    !mc_name_used(seg, used, nused) && mc_try_segment(m, seg, r, len) == 0)
			return 0;
	}
	return -1;
}

struct mc_segment *mc_segment_by_name(struct mc_master *m, struct mc_strv name)
{
	uint32_t i;

	for (i = 0; i < m->nsegs; i++)
		if (strlen(m->segs[i]->name) == name.n &&
		    !memcmp(m->segs[i]->name, name.p, name.n))
			return m->segs[i];
	return NULL;
}

int mc_replica_alloc_on(struct mc_master *m, struct mc_replica *r, uint64_t len,
			struct mc_segment *seg)
{
	return mc_try_segment(m, seg, r, len) == 0 ? 0 : MC_ERR_NO_AVAILABLE_HANDLE;
}

int mc_replica_alloc(struct mc_master *m, struct mc_replica *r, uint64_t len,
		     const struct mc_rpc_config *cfg, struct mc_segment **used, uint32_t nused)
{
	uint32_t i, start, tries, round;

	if (mc_try_named(m, cfg->preferred_segment, r, len, used, nused) == 0)
		return 0;
	for (i = 0; i < cfg->n_preferred; i++)
		if (mc_try_named(m, cfg->preferred[i], r, len, used, nused) == 0)
			return 0;
	if (m->nsegs == 0)
		return MC_ERR_NO_AVAILABLE_HANDLE;
	/* Random start, then consecutive segments, at most min(100, n) attempts (upstream's
	 * "random" strategy).  A first round also keeps replicas on distinct hosts; the second
	 * settles for distinct segment names. */
	start = (uint32_t)(mc_master_rand(m) % m->nsegs);
	tries = m->nsegs < 100 ? m->nsegs : 100;
	for (round = nused ? 0 : 1; round < 2; round++) {
		for (i = 0; i < tries; i++) {
			struct mc_segment *seg = m->segs[(start + i) % m->nsegs];

			if (mc_name_used(seg, used, nused))
				continue;
			if (round == 0 && mc_host_used(seg, used, nused))
				continue;
			if (mc_try_segment(m, seg, r, len) == 0)
				return 0;
		}
	}
	return MC_ERR_NO_AVAILABLE_HANDLE;
}

/* Take a replica off its segment's list (its bytes stay reserved). */
static void mc_replica_unlink(struct mc_replica *r)
{
	struct mc_segment *seg = r->seg;

	mc_replica_pull(&seg->reps, r);
	seg->nreps--;
}

/* Gives [off, off + len) back to the segment's allocator.  Its only failure that is not a bug is
 * out-of-memory for a new free-range node, fatal like every allocation in the master; a range
 * the allocator does not know as reserved (a bug) is logged and left alone. */
static void mc_alloc_must_release(struct mc_alloc *a, uint64_t off, uint64_t len)
{
	int rc = mc_alloc_release(a, off, len);

	if (rc == -ENOMEM) {
		mc_log_err("out of memory releasing a segment range");
		abort();
	}
	if (rc != 0)
		mc_log_warn("segment allocator: releasing [%llu, +%llu) failed: %s",
			    (unsigned long long)off, (unsigned long long)len, strerror(-rc));
}

void mc_replica_release(struct mc_master *m, struct mc_replica *r)
{
	struct mc_segment *seg = r->seg;
	uint64_t span;

	if (seg == NULL)
		return;
	if (r->type == MC_REPLICA_LOCAL_DISK || r->type == MC_REPLICA_DISK) {
		if (!m->quiet_disk_release && seg->tier != NULL)
			seg->tier->drop(m, r);
		mc_replica_unlink(r);
		uint64_t size = mc_replica_obj(r)->size;

		seg->used -= size < seg->used ? size : seg->used;
		m->disk_allocated -= size < m->disk_allocated ? size : m->disk_allocated;
		r->seg = NULL;
		r->disk_addr = 0;
		r->seg_prev = r->seg_next = 0;
		return;
	}
	mc_replica_unlink(r);
	span = mc_object_span(mc_replica_obj(r));
	if (seg->status != MC_SEG_DORMANT)	/* a dormant segment's bytes are not counted */
		m->allocated -= span;
	mc_tenant_charge(m, mc_replica_obj(r)->tenant, -(int64_t)span);
	mc_alloc_must_release(seg->alloc, r->off, span);
	r->seg = NULL;
	r->off = 0;
	r->seg_prev = r->seg_next = 0;
}

void mc_replica_discard(struct mc_master *m, struct mc_replica *r, int64_t release_at)
{
	struct mc_segment *seg = r->seg;
	struct mc_discard *d;

	if (seg == NULL)
		return;
	if (r->type == MC_REPLICA_LOCAL_DISK || r->type == MC_REPLICA_DISK) {
		/* Nothing to park: readers of the old copy read through the owner, which keeps
		 * serving an open file until the read is done. */
		mc_replica_release(m, r);
		return;
	}
	d = mc_xcalloc(1, sizeof(*d));
	d->seg = seg;
	d->off = r->off;
	d->len = mc_object_span(mc_replica_obj(r));
	d->release_at = release_at;
	if (mc_replica_obj(r))	/* parked bytes are no longer the tenant's */
		mc_tenant_charge(m, mc_replica_obj(r)->tenant, -(int64_t)d->len);
	d->next = m->discards;
	m->discards = d;
	mc_replica_unlink(r);
	r->seg = NULL;
	r->off = 0;
	m->metrics.put_start_discard_cnt++;
	m->metrics.put_start_discarded_staging_size += d->len;
}

void mc_master_release_discards(struct mc_master *m, int64_t now, int all)
{
	struct mc_discard **pp = &m->discards, *d;

	while ((d = *pp) != NULL) {
		if (!all && d->release_at > now) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		if (d->seg) {
			if (d->seg->status != MC_SEG_DORMANT)
				m->allocated -= d->len;
			mc_alloc_must_release(d->seg->alloc, d->off, d->len);
			m->metrics.put_start_release_cnt++;
		}
		free(d);
	}
}

void mc_object_compact(struct mc_object *o)
{
	uint32_t i, j = 0;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg == NULL)
			continue;
		if (i != j)
			mc_object_move_replica(o, j, i);	/* the segment list follows */
		j++;
	}
	o->nrep = (uint8_t)j;
}

void mc_master_object_remove(struct mc_master *m, struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++)
		mc_replica_release(m, mc_object_replica(o, i));
	mc_object_erase(&m->objects, o);
}

int mc_object_settle(struct mc_master *m, struct mc_object *o)
{
	mc_object_compact(o);
	if (o->nrep == 0) {
		mc_persist_object_gone(m, o);
		mc_object_erase(&m->objects, o);
		return 1;
	}
	mc_persist_object_changed(m, o);
	return 0;
}

int mc_replica_evict_room(struct mc_master *m, uint64_t len)
{
	int64_t now = mc_master_now(m);
	uint64_t cap = 0, busy = 0;
	uint32_t i;

	m->evict_stamp++;
	for (i = 0; i < m->nsegs; i++) {
		struct mc_segment *seg = m->segs[i];

		if (!mc_segment_placeable(m, seg, now) || seg->size < len)
			continue;
		seg->evict_mark = m->evict_stamp;
		cap += seg->size;
		busy += mc_alloc_used(seg->alloc);
	}
	if (cap == 0)
		return 0;
	return (double)(busy + len) > m->cfg.eviction_high_watermark_ratio * (double)cap;
}

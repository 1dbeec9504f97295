/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory eviction: from the head of the object table's eviction list, O(1) per eviction instead
 * of upstream's sampling scan of the table.  The list's order is the policy (--eviction_policy,
 * object_table.h): lru, least recently used first as upstream evicts, or prefix, blocks never
 * reused and the tails of request chains first.  The same order picks what is demoted to the
 * SSD tier.
 *
 * An object is never evicted while a reader may be copying its bytes (fetch lease from
 * GetReplicaList), while it is being written, or when hard-pinned (hard-pinned objects are not
 * even on the list).  Upstream can deadlock a full pool when clients probe every key with
 * ExistKey, since probes lease everything: here a probe lease protects an object only as long
 * as something else can be evicted.  Soft-pinned objects go last, and only with
 * --allow_evict_soft_pinned_objects.
 *
 * With an SSD tier (tier_ssd.c) eviction frees memory only: an object with an SSD copy keeps it
 * and leaves the LRU list; with --offload_on_evict an object without one is queued for offload
 * and its memory is freed only when the copy is acknowledged (counted meanwhile in
 * demote_pending, so the watermark does not pick more victims for the same bytes).  An object
 * whose owner has no SSD is evicted the ordinary way; one whose offload failed, or whose owner's
 * SSD area is backing off after failed writes, stays in memory (its last copy).
 *
 * Objects whose memory is only on dormant segments (liveness.c) stay on the list but are passed
 * over: they free nothing the pool counts, and they may come back.
 */
#include <stdint.h>

#include "common/log.h"
#include "master/master.h"
#include "segment/alloc.h"

enum mc_evict_pass {
	MC_EVICT_EXPIRED,	/* no lease at all */
	MC_EVICT_PROBED,	/* only an ExistKey lease */
	MC_EVICT_SOFT_PINNED,	/* soft-pinned, no fetch lease */
};

static int mc_evictable(const struct mc_object *o, int64_t now, enum mc_evict_pass pass)
{
	uint32_t i;

	if (o->flags & (MC_OBJ_HARD_PIN | MC_OBJ_PROMOTING | MC_OBJ_DEMOTE))
		return 0;
	if (o->fetch_until > now || (o->xflags & MC_OBJX_TASK))
		return 0;
	if (pass == MC_EVICT_EXPIRED && o->lease_until > now)
		return 0;
	if ((o->flags & MC_OBJ_SOFT_PIN) && mc_object_soft_pin_until(o) > now &&
	    pass != MC_EVICT_SOFT_PINNED)
		return 0;
	for (i = 0; i < o->nrep; i++) {
		const struct mc_replica *r = mc_object_replica((struct mc_object *)o, i);

		if (r->status != MC_REPLICA_COMPLETE)
			return 0;
	}
	return 1;
}

/* Will o become evictable by itself (a lease or a fetch ending, a put or tier move
 * finishing), as opposed to a pin that holds it until someone acts? */
static int mc_evictable_later(const struct mc_object *o, int64_t now)
{
	uint32_t i;

	if (o->flags & MC_OBJ_HARD_PIN)
		return 0;
	if (o->fetch_until > now || o->lease_until > now || (o->xflags & MC_OBJX_TASK) ||
	    (o->flags & (MC_OBJ_PROMOTING | MC_OBJ_DEMOTE)))
		return 1;
	for (i = 0; i < o->nrep; i++) {
		const struct mc_replica *r = mc_object_replica((struct mc_object *)o, i);

		/* Memory an unfinished put holds (not the put asking for room now). */
		if (r->seg && r->status != MC_REPLICA_COMPLETE)
			return 1;
	}
	return 0;
}

/* Bytes of o's memory replicas that this eviction would free. */
static uint64_t mc_evict_gain(const struct mc_master *m, struct mc_object *o, int marked_only)
{
	uint64_t mem = 0;
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->type == MC_REPLICA_MEMORY && r->seg->status != MC_SEG_DORMANT &&
		    (!marked_only || r->seg->evict_mark == m->evict_stamp))
			mem += mc_object_span(o);
	}
	return mem;
}

/* Is o's memory only on dormant segments? */
static int mc_evict_only_dormant(struct mc_object *o)
{
	uint32_t i, dormant = 0;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg == NULL || r->type != MC_REPLICA_MEMORY)
			continue;
		if (r->seg->status != MC_SEG_DORMANT)
			return 0;
		dormant++;
	}
	return dormant > 0;
}

uint64_t mc_master_evict(struct mc_master *m, uint64_t bytes, int marked_only)
{
	int64_t now = mc_master_now(m);
	uint64_t freed = 0, keys = 0, pending = 0, demotions = 0;
	/* --offload_cap_ratio: demotions one round may queue. */
	uint64_t demote_cap = (uint64_t)((double)m->cfg.offloading_queue_limit *
					 m->cfg.up.offload_cap_ratio);
	int pass;

	m->metrics.attempted_evictions++;
	for (pass = MC_EVICT_EXPIRED; pass <= MC_EVICT_SOFT_PINNED && freed + pending < bytes;
	     pass++) {
		struct mc_object *o = mc_object_evict_first(&m->objects), *next;
		/* Bound the walk: objects that cannot go now (leased, being written) are skipped,
		 * and a round must not turn into a scan of the whole table. */
		uint64_t budget = 4096 + (uint64_t)m->objects.count / 64;

		if (pass == MC_EVICT_SOFT_PINNED && !m->cfg.allow_evict_soft_pinned_objects)
			break;
		for (; o != NULL && freed + pending < bytes && budget; o = next, budget--) {
			uint64_t mem;
			uint32_t i;
			int q;

			next = mc_object_evict_next(&m->objects, o);
			if (m->evict_one_tenant && o->tenant != m->evict_tenant)
				continue;	/* a tenant evicts only its own objects */
			if (mc_evict_only_dormant(o)) {
				/* Its memory is on a dormant segment: evicting it frees nothing
				 * now and loses what may come back.  Out of the way. */
				mc_object_touch(&m->objects, o);
				continue;
			}
			if (!mc_evictable(o, now, (enum mc_evict_pass)pass)) {
				m->evict_waiting += mc_evictable_later(o, now);
				continue;
			}
			mem = mc_evict_gain(m, o, marked_only);
			if (marked_only && mem == 0)
				continue;	/* frees nothing where the put needs room */
			if (o->flags & MC_OBJ_OFFLOADING) {
				/* A background offload is running: free when it is in. */
				mc_tier_queue_offload(m, o, 1);
				mc_object_lru_unlink(&m->objects, o);
				pending += mem;
				continue;
			}
			if (mc_object_disk_replica(o) != NULL) {
				for (i = 0; i < o->nrep; i++) {
					struct mc_replica *r = mc_object_replica(o, i);

					if (r->seg && r->type == MC_REPLICA_MEMORY)
						mc_replica_release(m, r);
				}
				mc_object_compact(o);
				mc_object_lru_unlink(&m->objects, o);
				mc_persist_object_changed(m, o);
				freed += mem;
				keys++;
				m->metrics.demoted_key_count++;
				m->metrics.evicted_size_bytes += o->size;
				continue;
			}
			if (m->cfg.offload_on_evict && demotions >= demote_cap &&
			    !m->cfg.up.offload_force_evict) {
				m->evict_waiting++;	/* a later round demotes it */
				continue;
			}
			if (m->cfg.offload_on_evict && demotions < demote_cap &&
			    (q = mc_tier_queue_offload(m, o, 1)) >= 0) {
				if (q > 0) {
					/* Its SSD is failing: memory keeps it until the area's
					 * backoff ends and the copy is tried again. */
					m->evict_waiting++;
					continue;
				}
				mc_object_lru_unlink(&m->objects, o);
				pending += mem;
				demotions++;
				continue;
			}
			freed += mem;
			keys++;
			m->metrics.evicted_size_bytes += o->size;
			m->metrics.evicted_probe_leased += o->lease_until > now;
			mc_persist_object_gone(m, o);
			/* Evicted, not removed: a copy on an SSD that is away may come back. */
			m->erase_keep = (o->flags & MC_OBJ_SSD_AWAY) != 0;
			mc_master_object_remove(m, o);
			m->erase_keep = 0;
		}
	}
	if (keys) {
		m->metrics.successful_evictions++;
		m->metrics.evicted_key_count += keys;
		mc_log_debug("evicted %llu objects, %llu bytes", (unsigned long long)keys,
			     (unsigned long long)freed);
	}
	return freed;
}

void mc_master_evict_check(struct mc_master *m)
{
	double used, hw = m->cfg.eviction_high_watermark_ratio, ratio = m->cfg.eviction_ratio;
	double target;

	if (m->total_capacity == 0)
		return;
	used = (double)(m->allocated - (m->demote_pending < m->allocated ? m->demote_pending
									 : m->allocated)) /
	       (double)m->total_capacity;
	if (used <= hw && !m->need_eviction)
		return;
	m->need_eviction = 0;
	target = used - hw + ratio;
	if (target < ratio)
		target = ratio;
	if (target <= 0)
		return;
	mc_master_evict(m, (uint64_t)(target * (double)m->total_capacity), 0);
}

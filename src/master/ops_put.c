/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's put operations: PutStart, PutEnd and PutRevoke and their upsert and batch
 * forms (handlers of the table in ops.h).  PutStart places the replicas (evicting at the high
 * watermark) and hands them to the writer as PROCESSING; PutEnd makes them COMPLETE and the
 * object readable; PutRevoke releases what was not written.
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/kv_events.h"
#include "master/tenants.h"

/* Complete replicas on segments that are not dormant. */
static uint32_t mc_count_live_complete(struct mc_object *o)
{
	uint32_t i, n = 0;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		n += r->seg != NULL && r->seg->status != MC_SEG_DORMANT &&
		     r->status == MC_REPLICA_COMPLETE;
	}
	return n;
}

static void mc_value_size_observe(struct mc_master *m, uint64_t size)
{
	static const uint64_t bounds[7] = { 4096, 65536, 262144, 1048576, 4194304, 16777216,
					    67108864 };
	int i = 0;

	while (i < 7 && size > bounds[i])
		i++;
	m->metrics.value_size_buckets[i]++;
	m->metrics.value_size_sum += size;
	m->metrics.value_size_count++;
}

/* ---------------------------------------------------------------- put / upsert start */

/* h: the key's mc_object_key_hash (the batch hashes each key once). */
static int mc_put_start_one(struct mc_req *q, struct mc_client *c, const struct mc_rpc_config *cfg,
			    struct mc_strv key, uint32_t h, uint64_t size, int upsert)
{
	struct mc_master *m = q->m;
	struct mc_object *o;
	struct mc_segment *used[MC_RPC_MAX_REPLICAS];
	uint32_t want, got = 0, i;
	size_t at = q->out->len;
	int rc = 0, fresh = 0;

	if (key.n == 0 || size == 0 || size > MC_OBJ_SIZE_MAX || cfg->replica_num == 0)
		goto fail_params;
	/* Other tenants' keys are persisted as "tenant\0key": the default tenant's must not look
	 * like one (tenants.c). */
	if (q->tenant == 0 && mc_tenants_enabled(m) && memchr(key.p, '\0', key.n))
		goto fail_params;
	if (cfg->has_soft_pin_ttl && cfg->soft_pin_action == MC_SOFT_PIN_ENABLE &&
	    (int64_t)cfg->soft_pin_ttl_ms > m->cfg.max_kv_soft_pin_ttl)
		goto fail_params;
	o = mc_object_find_h(&m->objects, key.p, key.n, h);
	fresh = o == NULL;
	if (o != NULL) {
		/* Copies on dormant segments only do not make the key exist for a writer: a new
		 * put replaces them (and they are never restored). */
		uint32_t complete = mc_count_live_complete(o);
		int in_progress = mc_object_count_status(o, MC_REPLICA_PROCESSING) > 0;

		if (upsert && (o->xflags & MC_OBJX_TASK)) {
			rc = MC_ERR_OBJECT_HAS_REPLICATION_TASK;	/* a copy or move works on it */
			goto fail;
		}

		if (!upsert) {
			if (complete > 0 ||
			    (in_progress &&
			     q->now - o->put_start < m->cfg.put_start_discard_timeout_sec * 1000)) {
				rc = MC_ERR_OBJECT_ALREADY_EXISTS;
				goto fail;
			}
		}
		if (upsert && !in_progress && complete == o->nrep && mc_object_count_readable(o) == o->nrep &&
		    o->size == size &&
		    mc_object_disk_replica(o) == NULL &&
		    !(o->flags & (MC_OBJ_OFFLOADING | MC_OBJ_PROMOTING))) {
			/* In-place upsert: same buffers, back to PROCESSING; the old bytes'
			 * checksum goes with them (the UpsertEnd brings the new one). */
			for (i = 0; i < o->nrep; i++)
				mc_object_replica(o, i)->status = MC_REPLICA_PROCESSING;
			o->has_checksum = 0;
			o->checksum = 0;
			mc_persist_object_gone(m, o);	/* rows are keyed by generation */
			o->gen = mc_gen_next(m);
			o->put_start = q->now;
			o->writer = mc_client_ref(c);
			goto reply;
		}
		/* Old PROCESSING bytes may still be written by a dead or slow writer: park them
		 * until put_start + release_timeout.  Old COMPLETE bytes (upsert of a new size)
		 * may still be read under a lease: park them until the lease ends. */
		for (i = 0; i < o->nrep; i++) {
			struct mc_replica *r = mc_object_replica(o, i);
			int64_t at_ms = r->status == MC_REPLICA_PROCESSING
						? o->put_start +
							  m->cfg.put_start_release_timeout_sec * 1000
						: (o->lease_until > q->now ? o->lease_until : q->now);

			mc_replica_discard(m, r, at_ms);
		}
		mc_persist_object_gone(m, o);	/* the new object's row has a new generation */
		mc_object_erase(&m->objects, o);
	}
	want = cfg->replica_num > MC_RPC_MAX_REPLICAS ? MC_RPC_MAX_REPLICAS : cfg->replica_num;
	/* Multi-tenant mode: as many replicas as the tenant's quota holds (tenants.c). */
	rc = mc_tenant_admit(m, q->tenant, size, &want);
	if (rc)
		goto fail;
	m->evict_waiting = 0;
	mc_ghost_drop(m, key.p, key.n);
	o = mc_object_insert_h(&m->objects, key.p, key.n, h, want);
	o->size = size;	/* before the replicas: their reservations are mc_object_span(o) */
	o->gen = mc_gen_next(m);
	for (i = 0; i < want; i++) {
		struct mc_replica *r = mc_object_replica(o, got);

		if (mc_replica_alloc(m, r, size, cfg, used, got) != 0) {
			/* The first replica's failed allocation evicts (at least this object's
			 * size, at least eviction_ratio of the pool) from the segments that
			 * could take it, and retries once, but only at the high watermark (see
			 * mc_replica_evict_room).  Further replicas never evict: another copy
			 * of a new object is not worth an acknowledged object, and a replica
			 * that has no segment to go to cannot be made room for.  Such a put
			 * gets the replicas there is room for, as upstream's does. */
			uint64_t want_bytes = (uint64_t)(m->cfg.eviction_ratio *
							 (double)m->total_capacity);

			mc_master_release_discards(m, q->now, 0);
			if (mc_replica_alloc(m, r, size, cfg, used, got) == 0)
				goto allocated;
			if (got > 0 || m->cfg.eviction_ratio <= 0 || mc_tenants_enabled(m) ||
			    !mc_replica_evict_room(m, size) ||
			    mc_master_evict(m, size > want_bytes ? size : want_bytes, 1) == 0 ||
			    mc_replica_alloc(m, r, size, cfg, used, got) != 0)
				break;
		}
allocated:
		r->status = MC_REPLICA_PROCESSING;
		used[got++] = r->seg;
	}
	if (got == 0) {
		mc_persist_object_gone(m, o);
		mc_object_erase(&m->objects, o);
		m->metrics.put_start_alloc_failures++;
		/* Memory on its way back (demotions waiting for their SSD copy, objects only
		 * leases or unfinished puts keep now) makes a retry worth the writer's while. */
		if (m->demote_pending > 0 || m->evict_waiting > 0)
			q->space_coming = 1;
		/* Writers wait for space by asking again: one line a second, not one a try. */
		if (q->now - m->space_warned_at >= 1000) {
			mc_log_warn("put_start %.*s (%llu bytes) from %s failed due to insufficient "
				    "space (%llu such failures in all).  Consider lowering "
				    "eviction_high_watermark_ratio or mounting more segments.",
				    (int)(key.n > 128 ? 128 : key.n), key.p,
				    (unsigned long long)size, q->peer,
				    (unsigned long long)m->metrics.put_start_alloc_failures);
			m->space_warned_at = q->now;
		}
		rc = MC_ERR_NO_AVAILABLE_HANDLE;
		goto fail;
	}
	if (got < want) {
		m->metrics.put_start_partial_allocations++;
		mc_log_info("put_start_partial_allocation: %u of %u replicas for %.*s", got, want,
			    (int)(key.n > 128 ? 128 : key.n), key.p);
		o->nrep = (uint8_t)got;
	}
	o->size = size;
	o->put_start = q->now;
	o->writer = mc_client_ref(c);
	mc_fs_add_replica(m, o);	/* --root_fs_dir: the writer also stores the file */
	if (cfg->with_hard_pin) {
		o->flags |= MC_OBJ_HARD_PIN;
		mc_object_lru_unlink(&m->objects, o);
	}
	if (cfg->soft_pin_action == MC_SOFT_PIN_ENABLE) {
		o->flags |= MC_OBJ_SOFT_PIN;
		m->objects.soft_pinned++;
		mc_object_set_soft_pin_until(
			o, q->now + (cfg->has_soft_pin_ttl && cfg->soft_pin_ttl_ms
					     ? (int64_t)cfg->soft_pin_ttl_ms
					     : m->cfg.default_kv_soft_pin_ttl));
	}
reply:
	mc_persist_object_started(m, o, fresh);
	mc_wbuf_i32(q->out, 0);
	mc_wbuf_u32(q->out, o->nrep);
	for (i = 0; i < o->nrep; i++)
		mc_put_replica_desc(q->m, q->out, o, mc_object_replica(o, i));
	mc_req_item(q, 0);
	return 0;

fail_params:
	rc = MC_ERR_INVALID_PARAMS;
fail:
	if (rc == MC_ERR_OBJECT_ALREADY_EXISTS) {
		if (q->op->opcode == MC_OP_BATCH_PUT_START)
			m->metrics.batch_put_start_already_exists++;
		else
			m->metrics.put_start_already_exists++;
	}
	q->out->len = at;
	mc_wbuf_i32(q->out, rc);
	mc_wbuf_u32(q->out, 0);
	mc_req_item(q, rc);
	return rc;
}

static int mc_put_start_batch(struct mc_req *q, int upsert)
{
	struct mc_uuid cid;
	struct mc_rpc_config cfg;
	struct mc_strv *keys;
	uint64_t *sizes;
	uint32_t *hashes;
	struct mc_client *c;
	uint32_t n, i;

	mc_rpc_get_uuid(&q->r, &cid);
	mc_rpc_get_config(&q->r, &cfg);
	n = mc_rbuf_count(&q->r, MC_RPC_MAX_BATCH, 12);
	if (q->r.err)
		return MC_ERR_INVALID_PARAMS;
	/* Keys, sizes and the keys' hashes: one block. */
	keys = mc_xcalloc(n ? n : 1, sizeof(*keys) + sizeof(*sizes) + sizeof(*hashes));
	sizes = (uint64_t *)(void *)(keys + (n ? n : 1));
	hashes = (uint32_t *)(void *)(sizes + (n ? n : 1));
	for (i = 0; i < n; i++) {
		keys[i] = mc_rpc_get_strv(&q->r, MC_RPC_MAX_KEY);
		sizes[i] = mc_rbuf_u64(&q->r);
	}
	mc_rpc_get_evict_hint(&q->r, &cfg);
	if (!mc_req_done(q)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	for (i = 0; i < n; i++)
		hashes[i] = mc_object_key_hash(&q->m->objects, keys[i].p, keys[i].n);
	mc_object_prefetch_h(&q->m->objects, hashes, n);
	c = mc_client_get(q->m, &cid);
	mc_object_batch_hint(&q->m->objects, cfg.has_evict_hint ? cfg.evict_hint : -1);
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++)
		mc_put_start_one(q, c, &cfg, keys[i], hashes[i], sizes[i], upsert);
	mc_wbuf_u8(q->out, (uint8_t)q->space_coming);
	free(keys);
	return 0;
}

/* ---------------------------------------------------------------- put / upsert end, revoke */

/* Does replica r belong to the replicas a PutEnd/PutRevoke of replica_type rtype targets? */
static int mc_put_targets(struct mc_replica *r, uint8_t rtype)
{
	return rtype == MC_REPLICA_ALL || r->type == rtype;
}

static uint32_t mc_count_targeted(struct mc_object *o, uint8_t rtype, uint8_t status)
{
	uint32_t i, n = 0;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		n += mc_put_targets(r, rtype) && r->status == status;
	}
	return n;
}

/* PutEnd of the replicas of type rtype (MEMORY, DISK or ALL).  With --root_fs_dir the writer
 * ends MEMORY first (the object becomes readable from memory) and DISK once its file is written:
 * the DISK replica stays PROCESSING, and is never handed to a reader, until then.  A checksum
 * the writer sends (cs->present) is stored with the object when this PutEnd completes replicas;
 * PutStart and an in-place UpsertStart left it unknown, so a PutEnd without one leaves it so. */
static int mc_put_end_one(struct mc_req *q, struct mc_client *c, struct mc_strv key, uint32_t h,
			  uint8_t rtype, const struct mc_rpc_checksum *cs)
{
	struct mc_object *o = mc_object_find_h(&q->m->objects, key.p, key.n, h);
	uint32_t i, processing, was_readable;

	if (o == NULL)
		return MC_ERR_OBJECT_NOT_FOUND;
	if (mc_object_writer(q->m, o) != c)
		return MC_ERR_ILLEGAL_CLIENT;
	processing = mc_count_targeted(o, rtype, MC_REPLICA_PROCESSING);
	if ((o->flags & MC_OBJ_PROMOTING) || (o->xflags & MC_OBJX_TASK))
		processing = 0;	/* those are the SSD owner's or a task's, not the writer's */
	if (processing == 0) {
		for (i = 0; i < o->nrep; i++)
			if (mc_put_targets(mc_object_replica(o, i), rtype))
				processing++;
		/* Nothing of that type (a DISK replica revoked or reaped meanwhile) is no success:
		 * the writer must not keep a file the master does not know. */
		if (processing == 0 && rtype != MC_REPLICA_ALL)
			return MC_ERR_INVALID_WRITE;
		return mc_count_targeted(o, rtype, MC_REPLICA_COMPLETE) == processing
			       ? 0 : MC_ERR_INVALID_WRITE;
	}
	was_readable = mc_object_count_status(o, MC_REPLICA_COMPLETE);
	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->status == MC_REPLICA_PROCESSING && mc_put_targets(r, rtype))
			r->status = MC_REPLICA_COMPLETE;
	}
	if (cs->present) {
		o->has_checksum = 1;
		o->checksum = cs->value;
	}
	mc_persist_object_changed(q->m, o);
	if (was_readable)
		return 0;	/* e.g. PutEnd(DISK) after PutEnd(MEMORY): already readable */
	mc_kv_event_stored(q->m, o, rtype);
	/* A read lease taken before an in-place upsert still holds (Remove waits for it). */
	if (o->lease_until < q->now)
		o->lease_until = q->now;
	if (o->flags & MC_OBJ_SOFT_PIN)
		/* lifetime starts when readable */
		mc_object_set_soft_pin_until(o, mc_object_soft_pin_until(o) + q->now -
						     o->put_start);
	mc_object_touch(&q->m->objects, o);
	mc_value_size_observe(q->m, o->size);
	if (q->m->cfg.enable_offload && !q->m->cfg.offload_on_evict)
		mc_tier_queue_offload(q->m, o, 0);
	return 0;
}

/* PutRevoke of the PROCESSING replicas of type rtype; the object goes when none is left. */
static int mc_put_revoke_one(struct mc_req *q, struct mc_client *c, struct mc_strv key,
			     uint32_t h, uint8_t rtype)
{
	struct mc_master *m = q->m;
	struct mc_object *o = mc_object_find_h(&m->objects, key.p, key.n, h);
	uint32_t i, left = 0;

	if (o == NULL)
		return MC_ERR_OBJECT_NOT_FOUND;
	if (mc_object_writer(q->m, o) != c)
		return MC_ERR_ILLEGAL_CLIENT;
	if (mc_count_targeted(o, rtype, MC_REPLICA_PROCESSING) == 0 ||
	    (o->flags & MC_OBJ_PROMOTING) || (o->xflags & MC_OBJX_TASK))
		return MC_ERR_INVALID_WRITE;
	m->quiet_disk_release = 1;	/* the writer cleans up its own unfinished file */
	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->status == MC_REPLICA_PROCESSING && mc_put_targets(r, rtype)) {
			/* A write to a segment that is failing (reported, or its owner silent)
			 * may still be on its way, queued in a socket: its bytes must not land
			 * on the next object placed there.  Park them like a preempted put's. */
			if (r->type == MC_REPLICA_MEMORY && !mc_segment_placeable(m, r->seg, q->now))
				mc_replica_discard(m, r, q->now + m->cfg.put_start_release_timeout_sec *
								      1000);
			else
				mc_replica_release(m, r);
		} else if (r->seg) {
			left++;
		}
	}
	m->quiet_disk_release = 0;
	if (left == 0) {
		mc_persist_object_gone(m, o);
		mc_object_erase(&m->objects, o);
	} else {
		mc_object_compact(o);
		mc_persist_object_changed(m, o);
	}
	return 0;
}

/* The PutEnd and PutRevoke bodies: uuid client_id, u8 replica_type, keys; a PutEnd may end
 * with the writer's checksum per key (mc_rpc_get_checksums). */
static int mc_put_end_revoke_batch(struct mc_req *q, int revoke)
{
	struct mc_uuid cid;
	struct mc_strv *keys;
	struct mc_rpc_checksum *cs = NULL;
	struct mc_client *c;
	uint32_t n, i, *h;
	uint8_t rtype;

	mc_rpc_get_uuid(&q->r, &cid);
	rtype = mc_rbuf_u8(&q->r);
	keys = mc_req_keys_h(q, &n, &h);
	if (!revoke && q->r.err == 0) {
		cs = mc_xcalloc(n ? n : 1, sizeof(*cs));
		(void)mc_rpc_get_checksums(&q->r, cs, n);
	}
	if (!mc_req_done(q) || (rtype != MC_REPLICA_MEMORY && rtype != MC_REPLICA_DISK &&
				rtype != MC_REPLICA_ALL)) {
		free(keys);
		free(cs);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_get(q->m, &cid);
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		int rc = revoke ? mc_put_revoke_one(q, c, keys[i], h[i], rtype)
				: mc_put_end_one(q, c, keys[i], h[i], rtype, &cs[i]);

		mc_wbuf_i32(q->out, rc);
		mc_req_item(q, rc);
	}
	free(keys);
	free(cs);
	return 0;
}

int mc_op_put_start(struct mc_req *q)
{
	return mc_put_start_batch(q, 0);
}

int mc_op_upsert_start(struct mc_req *q)
{
	return mc_put_start_batch(q, 1);
}

/* PutEnd and UpsertEnd are one operation: the object's replicas become COMPLETE. */
int mc_op_put_end(struct mc_req *q)
{
	return mc_put_end_revoke_batch(q, 0);
}

int mc_op_put_revoke(struct mc_req *q)
{
	return mc_put_end_revoke_batch(q, 1);
}

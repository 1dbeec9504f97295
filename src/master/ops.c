/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's RPC operations (semantics of reference/mooncake-spec.md §1.3-§1.8, bodies of
 * src/proto/rpc.h).  mc_master_handle decodes one request completely before acting on it, so a
 * malformed body changes nothing and gets MC_ERR_INVALID_PARAMS; then it runs the operation and
 * appends exactly one response frame.  Per-item failures of batch operations are item codes, not
 * frame errors.  Counters are kept per opcode under upstream's metric names.
 * Single-threaded: the master's reactor thread.
 */
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "segment/alloc.h"

#define MC_VERSION_STRING "mooncake-c " PACKAGE_VERSION

struct mc_req {
	struct mc_master *m;
	struct mc_rbuf r;
	struct mc_wbuf *out;
	struct mc_op_counters *ctr;
	const char *peer;
	int64_t now;
	int space_coming;	/* PutStart: an item refused for space may fit soon */
};

/* Decode "u32 n, n x str" into a malloc'ed array of views (NULL when n == 0). */
static struct mc_strv *mc_req_keys(struct mc_req *q, uint32_t *n)
{
	struct mc_strv *keys;
	uint32_t i;

	*n = mc_rbuf_count(&q->r, MC_RPC_MAX_BATCH, 4);
	if (q->r.err || *n == 0)
		return NULL;
	keys = mc_xcalloc(*n, sizeof(*keys));
	for (i = 0; i < *n; i++)
		keys[i] = mc_rpc_get_strv(&q->r, MC_RPC_MAX_KEY);
	return keys;
}

/* The decoded body must have been consumed exactly. */
static int mc_req_done(struct mc_req *q)
{
	return q->r.err == 0 && q->r.left == 0;
}

static void mc_item_result(struct mc_req *q, int code)
{
	q->ctr->items++;
	if (code < 0)
		q->ctr->failed_items++;
}

static void mc_put_replica_desc(const struct mc_master *m, struct mc_wbuf *w,
				const struct mc_object *o, const struct mc_replica *r)
{
	struct mc_rpc_replica d;

	memset(&d, 0, sizeof(d));
	d.id = r->id;
	d.type = r->type;
	d.status = r->status;
	d.size = o->size;
	if (r->type == MC_REPLICA_DISK) {
		char path[MC_RPC_MAX_PATH + 1];

		if (mc_fs_path(m, o->key, o->key_len, path, sizeof(path)) != 0)
			path[0] = '\0';
		d.path = mc_strv_c(path);
		mc_rpc_put_replica(w, &d);
		return;
	}
	if (r->type == MC_REPLICA_LOCAL_DISK) {
		d.client_id = r->seg->client->id;
		d.endpoint = mc_strv_c(r->seg->endpoint);
		d.addr = r->disk_addr;
		mc_rpc_put_replica(w, &d);
		return;
	}
	d.addr = r->seg->base + mc_alloc_block_offset(r->blk);
	d.segment_name = mc_strv_c(r->seg->name);
	d.endpoint = mc_strv_c(r->seg->endpoint);
	d.protocol = mc_strv_c(r->seg->protocol);
	mc_rpc_put_replica(w, &d);
}

static uint32_t mc_count_status(struct mc_object *o, uint8_t status)
{
	uint32_t i, n = 0;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		n += r->seg != NULL && r->status == status;
	}
	return n;
}

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

static uint32_t mc_count_readable(struct mc_object *o)
{
	uint32_t i, n = 0;

	for (i = 0; i < o->nrep; i++)
		n += mc_replica_readable(mc_object_replica(o, i));
	return n;
}

void mc_master_object_remove(struct mc_master *m, struct mc_object *o)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++)
		mc_replica_release(m, mc_object_replica(o, i));
	mc_object_erase(&m->objects, o);
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

static int mc_put_start_one(struct mc_req *q, struct mc_client *c, const struct mc_rpc_config *cfg,
			    struct mc_strv key, uint64_t size, int upsert)
{
	struct mc_master *m = q->m;
	struct mc_object *o;
	struct mc_segment *used[MC_RPC_MAX_REPLICAS];
	uint32_t want, got = 0, i;
	size_t at = q->out->len;
	int rc = 0;

	if (key.n == 0 || size == 0 || cfg->replica_num == 0)
		goto fail_params;
	if (cfg->has_soft_pin_ttl && cfg->soft_pin_action == MC_SOFT_PIN_ENABLE &&
	    (int64_t)cfg->soft_pin_ttl_ms > m->cfg.max_kv_soft_pin_ttl)
		goto fail_params;
	o = mc_object_find(&m->objects, key.p, key.n);
	if (o != NULL) {
		/* Copies on dormant segments only do not make the key exist for a writer: a new
		 * put replaces them (and they are never restored). */
		uint32_t complete = mc_count_live_complete(o);
		int in_progress = mc_count_status(o, MC_REPLICA_PROCESSING) > 0;

		if (!upsert) {
			if (complete > 0 ||
			    (in_progress &&
			     q->now - o->put_start < m->cfg.put_start_discard_timeout_sec * 1000)) {
				rc = MC_ERR_OBJECT_ALREADY_EXISTS;
				goto fail;
			}
		}
		if (upsert && !in_progress && complete == o->nrep && mc_count_readable(o) == o->nrep &&
		    o->size == size &&
		    mc_object_disk_replica(o) == NULL &&
		    !(o->flags & (MC_OBJ_OFFLOADING | MC_OBJ_PROMOTING))) {
			/* In-place upsert: same buffers, back to PROCESSING. */
			for (i = 0; i < o->nrep; i++)
				mc_object_replica(o, i)->status = MC_REPLICA_PROCESSING;
			o->gen = mc_gen_next(m);
			o->put_start = q->now;
			o->writer = c;
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
		mc_object_erase(&m->objects, o);
	}
	want = cfg->replica_num > MC_RPC_MAX_REPLICAS ? MC_RPC_MAX_REPLICAS : cfg->replica_num;
	m->evict_waiting = 0;
	mc_ghost_drop(m, key.p, key.n);
	o = mc_object_insert(&m->objects, key.p, key.n, want);
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
			if (got > 0 || m->cfg.eviction_ratio <= 0 ||
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
	o->writer = c;
	mc_fs_add_replica(m, o);	/* --root_fs_dir: the writer also stores the file */
	if (cfg->with_hard_pin) {
		o->flags |= MC_OBJ_HARD_PIN;
		mc_object_lru_unlink(&m->objects, o);
	}
	if (cfg->soft_pin_action == MC_SOFT_PIN_ENABLE) {
		o->flags |= MC_OBJ_SOFT_PIN;
		m->objects.soft_pinned++;
		o->soft_pin_until = q->now + (cfg->has_soft_pin_ttl && cfg->soft_pin_ttl_ms
						      ? (int64_t)cfg->soft_pin_ttl_ms
						      : m->cfg.default_kv_soft_pin_ttl);
	}
reply:
	mc_persist_object_changed(m, o);
	mc_wbuf_i32(q->out, 0);
	mc_wbuf_u32(q->out, o->nrep);
	for (i = 0; i < o->nrep; i++)
		mc_put_replica_desc(q->m, q->out, o, mc_object_replica(o, i));
	mc_item_result(q, 0);
	return 0;

fail_params:
	rc = MC_ERR_INVALID_PARAMS;
fail:
	q->out->len = at;
	mc_wbuf_i32(q->out, rc);
	mc_wbuf_u32(q->out, 0);
	mc_item_result(q, rc);
	return rc;
}

static int mc_op_put_start(struct mc_req *q, int upsert)
{
	struct mc_uuid cid;
	struct mc_rpc_config cfg;
	struct mc_strv *keys;
	uint64_t *sizes;
	struct mc_client *c;
	uint32_t n, i;

	mc_rpc_get_uuid(&q->r, &cid);
	mc_rpc_get_config(&q->r, &cfg);
	n = mc_rbuf_count(&q->r, MC_RPC_MAX_BATCH, 12);
	if (q->r.err)
		return MC_ERR_INVALID_PARAMS;
	keys = mc_xcalloc(n ? n : 1, sizeof(*keys));
	sizes = mc_xcalloc(n ? n : 1, sizeof(*sizes));
	for (i = 0; i < n; i++) {
		keys[i] = mc_rpc_get_strv(&q->r, MC_RPC_MAX_KEY);
		sizes[i] = mc_rbuf_u64(&q->r);
	}
	if (!mc_req_done(q)) {
		free(keys);
		free(sizes);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_get(q->m, &cid);
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++)
		mc_put_start_one(q, c, &cfg, keys[i], sizes[i], upsert);
	mc_wbuf_u8(q->out, (uint8_t)q->space_coming);
	free(keys);
	free(sizes);
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
 * the DISK replica stays PROCESSING, and is never handed to a reader, until then. */
static int mc_put_end_one(struct mc_req *q, struct mc_client *c, struct mc_strv key, uint8_t rtype)
{
	struct mc_object *o = mc_object_find(&q->m->objects, key.p, key.n);
	uint32_t i, processing, was_readable;

	if (o == NULL)
		return MC_ERR_OBJECT_NOT_FOUND;
	if (o->writer != c)
		return MC_ERR_ILLEGAL_CLIENT;
	processing = mc_count_targeted(o, rtype, MC_REPLICA_PROCESSING);
	if (o->flags & MC_OBJ_PROMOTING)
		processing = 0;	/* that one is the SSD owner's, not the writer's */
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
	was_readable = mc_count_status(o, MC_REPLICA_COMPLETE);
	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->status == MC_REPLICA_PROCESSING && mc_put_targets(r, rtype))
			r->status = MC_REPLICA_COMPLETE;
	}
	mc_persist_object_changed(q->m, o);
	if (was_readable)
		return 0;	/* e.g. PutEnd(DISK) after PutEnd(MEMORY): already readable */
	o->lease_until = q->now;
	if (o->flags & MC_OBJ_SOFT_PIN)
		o->soft_pin_until += q->now - o->put_start;	/* lifetime starts when readable */
	mc_object_touch(&q->m->objects, o);
	mc_value_size_observe(q->m, o->size);
	if (q->m->cfg.enable_offload && !q->m->cfg.offload_on_evict)
		mc_tier_queue_offload(q->m, o, 0);
	return 0;
}

/* PutRevoke of the PROCESSING replicas of type rtype; the object goes when none is left. */
static int mc_put_revoke_one(struct mc_req *q, struct mc_client *c, struct mc_strv key,
			     uint8_t rtype)
{
	struct mc_master *m = q->m;
	struct mc_object *o = mc_object_find(&m->objects, key.p, key.n);
	uint32_t i, left = 0;

	if (o == NULL)
		return MC_ERR_OBJECT_NOT_FOUND;
	if (o->writer != c)
		return MC_ERR_ILLEGAL_CLIENT;
	if (mc_count_targeted(o, rtype, MC_REPLICA_PROCESSING) == 0 ||
	    (o->flags & MC_OBJ_PROMOTING))
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

static int mc_op_put_end_revoke(struct mc_req *q, int revoke)
{
	struct mc_uuid cid;
	struct mc_strv *keys;
	struct mc_client *c;
	uint32_t n, i;
	uint8_t rtype;

	mc_rpc_get_uuid(&q->r, &cid);
	rtype = mc_rbuf_u8(&q->r);
	keys = mc_req_keys(q, &n);
	if (!mc_req_done(q) || (rtype != MC_REPLICA_MEMORY && rtype != MC_REPLICA_DISK &&
				rtype != MC_REPLICA_ALL)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_get(q->m, &cid);
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		int rc = revoke ? mc_put_revoke_one(q, c, keys[i], rtype)
				: mc_put_end_one(q, c, keys[i], rtype);

		mc_wbuf_i32(q->out, rc);
		mc_item_result(q, rc);
	}
	free(keys);
	return 0;
}

/* ---------------------------------------------------------------- reads */

static void mc_grant_lease(struct mc_req *q, struct mc_object *o)
{
	int64_t until = q->now + q->m->cfg.default_kv_lease_ttl;

	if (o->lease_until < until)
		o->lease_until = until;
	mc_object_touch(&q->m->objects, o);
}

/* Appends u32 nrep + the replicas a reader should use: the complete memory replicas, those on
 * segments of Active clients with no reported transfer failures first (readers try them in
 * order), or when there is none the SSD one (a hit may start its promotion).  When every
 * memory replica is on a Suspected or unhealthy segment, the SSD copies follow them as a
 * fallback.  Returns how many. */
static uint32_t mc_put_complete_replicas(struct mc_master *m, struct mc_wbuf *w,
					 struct mc_object *o)
{
	struct mc_replica *disk;
	int64_t now = mc_master_now(m);
	uint32_t i, n = 0, preferred = 0;
	size_t at = w->len;
	int pass;

	mc_wbuf_u32(w, 0);
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < o->nrep; i++) {
			struct mc_replica *r = mc_object_replica(o, i);

			if (r->type != MC_REPLICA_MEMORY || !mc_replica_readable(r) ||
			    mc_segment_preferred_for_read(m, r->seg, now) != (pass == 0))
				continue;
			mc_put_replica_desc(m, w, o, r);
			n++;
			preferred += pass == 0;
		}
	if (n > 0 && preferred == 0)
		for (i = 0; i < o->nrep; i++) {
			struct mc_replica *r = mc_object_replica(o, i);

			if (r->type != MC_REPLICA_MEMORY && mc_replica_readable(r) &&
			    mc_segment_preferred_for_read(m, r->seg, now)) {
				mc_put_replica_desc(m, w, o, r);
				n++;
			}
		}
	if (n == 0 && (disk = mc_object_disk_replica(o)) != NULL) {
		/* Every SSD copy (a restarted owner may have registered a second one while the
		 * old process is not yet declared dead): the reader falls back in order. */
		for (i = 0; i < o->nrep; i++) {
			struct mc_replica *r = mc_object_replica(o, i);

			if (r->type != MC_REPLICA_MEMORY && mc_replica_readable(r)) {
				mc_put_replica_desc(m, w, o, r);
				n++;
			}
		}
		mc_wbuf_patch_u32(w, at, n);
		mc_tier_on_disk_hit(m, o, disk);
		return n;
	}
	if (n)
		m->metrics.mem_cache_hit_nums++;
	mc_wbuf_patch_u32(w, at, n);
	return n;
}

static int mc_op_get_replica_list(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_strv *keys;
	uint32_t n, i;

	keys = mc_req_keys(q, &n);
	if (!mc_req_done(q)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_wbuf_u64(q->out, (uint64_t)m->cfg.default_kv_lease_ttl);
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		struct mc_object *o = mc_object_find(&m->objects, keys[i].p, keys[i].n);
		int rc = 0;

		m->metrics.total_get_nums++;
		if (o == NULL)
			rc = MC_ERR_OBJECT_NOT_FOUND;
		else if (mc_count_readable(o) == 0)
			rc = mc_count_status(o, MC_REPLICA_PROCESSING) ? MC_ERR_REPLICA_IS_NOT_READY
								       : MC_ERR_OBJECT_NOT_FOUND;
		if (rc) {
			mc_wbuf_i32(q->out, rc);
			mc_wbuf_u32(q->out, 0);
		} else {
			mc_wbuf_i32(q->out, 0);
			mc_grant_lease(q, o);
			o->fetch_until = o->lease_until;
			mc_put_complete_replicas(m, q->out, o);
			m->metrics.valid_get_nums++;
		}
		mc_item_result(q, rc);
	}
	free(keys);
	return 0;
}

static int mc_op_exist_key(struct mc_req *q)
{
	struct mc_strv *keys;
	uint32_t n, i;

	keys = mc_req_keys(q, &n);
	if (!mc_req_done(q)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		struct mc_object *o = mc_object_find(&q->m->objects, keys[i].p, keys[i].n);
		int res = o != NULL && mc_count_readable(o) > 0;

		if (res)
			mc_grant_lease(q, o);
		mc_wbuf_i32(q->out, res);
		mc_item_result(q, 0);
	}
	free(keys);
	return 0;
}

/* Compile a client regex (POSIX extended).  Returns 0 or MC_ERR_INVALID_PARAMS. */
static int mc_regex_compile(struct mc_req *q, regex_t *re, struct mc_strv pat)
{
	char *s = mc_xstrndup(pat.p, pat.n);
	int rc = regcomp(re, s, REG_EXTENDED | REG_NOSUB);

	if (rc != 0)
		mc_log_warn("bad regex '%s' from %s", s, q->peer);
	free(s);
	return rc ? MC_ERR_INVALID_PARAMS : 0;
}

static int mc_regex_match(const regex_t *re, const struct mc_object *o)
{
	char buf[MC_RPC_MAX_KEY + 1];

	memcpy(buf, o->key, o->key_len);
	buf[o->key_len] = '\0';
	return regexec(re, buf, 0, NULL, 0) == 0;
}

static int mc_op_get_by_regex(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_strv pat = mc_rpc_get_strv(&q->r, MC_RPC_MAX_REGEX);
	struct mc_object *o;
	regex_t re;
	size_t pos = 0, count_at;
	uint32_t count = 0;

	if (!mc_req_done(q) || mc_regex_compile(q, &re, pat))
		return MC_ERR_INVALID_PARAMS;
	mc_wbuf_u64(q->out, (uint64_t)m->cfg.default_kv_lease_ttl);
	count_at = q->out->len;
	mc_wbuf_u32(q->out, 0);
	while ((o = mc_object_next(&m->objects, &pos)) != NULL) {
		if (mc_count_readable(o) == 0 || !mc_regex_match(&re, o))
			continue;
		mc_wbuf_str(q->out, o->key, o->key_len);
		mc_grant_lease(q, o);
		o->fetch_until = o->lease_until;
		mc_put_complete_replicas(m, q->out, o);
		count++;
	}
	mc_wbuf_patch_u32(q->out, count_at, count);
	regfree(&re);
	return 0;
}

/* ---------------------------------------------------------------- removal */

static int mc_remove_one(struct mc_req *q, struct mc_object *o, int force)
{
	if (!force && o->lease_until > q->now)
		return MC_ERR_OBJECT_HAS_LEASE;
	if (mc_fs_reap_abandoned(q->m, o, q->now))
		return 0;	/* only an abandoned DISK replica was left */
	if (mc_count_status(o, MC_REPLICA_COMPLETE) != o->nrep)
		return MC_ERR_REPLICA_IS_NOT_READY;
	mc_persist_object_gone(q->m, o);
	mc_master_object_remove(q->m, o);
	return 0;
}

static int mc_op_remove(struct mc_req *q)
{
	int force = mc_rbuf_u8(&q->r);
	struct mc_strv *keys;
	uint32_t n, i;

	keys = mc_req_keys(q, &n);
	if (!mc_req_done(q)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		struct mc_object *o = mc_object_find(&q->m->objects, keys[i].p, keys[i].n);
		int rc = o ? mc_remove_one(q, o, force) : MC_ERR_OBJECT_NOT_FOUND;

		if (o == NULL)	/* an SSD copy on an area that is away must not come back */
			mc_ghost_forget(q->m, keys[i].p, keys[i].n);
		mc_wbuf_i32(q->out, rc);
		mc_item_result(q, rc);
	}
	free(keys);
	return 0;
}

static int mc_op_remove_by_regex(struct mc_req *q)
{
	int force = mc_rbuf_u8(&q->r);
	struct mc_strv pat = mc_rpc_get_strv(&q->r, MC_RPC_MAX_REGEX);
	struct mc_object *o;
	regex_t re;
	size_t pos = 0;
	int64_t count = 0;

	if (!mc_req_done(q) || mc_regex_compile(q, &re, pat))
		return MC_ERR_INVALID_PARAMS;
	while ((o = mc_object_next(&q->m->objects, &pos)) != NULL)
		if (mc_regex_match(&re, o) && mc_remove_one(q, o, force) == 0)
			count++;
	mc_ghost_remove_matching(q->m, &re);
	/* Keys it matches that the master never saw may sit on an SSD that is away. */
	mc_adopt_close(q->m, "remove_by_regex");
	regfree(&re);
	mc_wbuf_i64(q->out, count);
	return 0;
}

static int mc_op_remove_all(struct mc_req *q)
{
	int force = mc_rbuf_u8(&q->r);
	struct mc_object *o;
	size_t pos = 0;
	int64_t count = 0;

	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	while ((o = mc_object_next(&q->m->objects, &pos)) != NULL)
		if (mc_remove_one(q, o, force) == 0)
			count++;
	mc_ghost_remove_matching(q->m, NULL);
	mc_adopt_close(q->m, "remove_all");
	mc_wbuf_i64(q->out, count);
	mc_log_info("remove_all%s from %s removed %lld objects", force ? " (force)" : "", q->peer,
		    (long long)count);
	return 0;
}

/* ---------------------------------------------------------------- segments, clients */

/* MountSegment and ReMountSegment.  The segments may be followed by one 16-byte token each
 * (a later addition to the protocol: bodies without them still decode). */
static int mc_op_mount(struct mc_req *q, int remount)
{
	struct mc_uuid cid;
	struct mc_rpc_segment segs[64];
	uint8_t tokens[64][16];
	const uint8_t *tok;
	struct mc_client *c;
	uint32_t n = 1, i;
	int rc = 0, with_tokens = 0;

	mc_rpc_get_uuid(&q->r, &cid);
	if (remount)
		n = mc_rbuf_count(&q->r, 64, 40);
	for (i = 0; i < n; i++)
		mc_rpc_get_segment(&q->r, &segs[i]);
	if (q->r.err == 0 && n > 0 && q->r.left == (size_t)n * 16) {
		for (i = 0; i < n; i++)
			if ((tok = mc_rbuf_bytes(&q->r, 16)) != NULL)
				memcpy(tokens[i], tok, 16);
		with_tokens = 1;
	}
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	c = mc_client_get(q->m, &cid);
	c->last_ping = q->now;
	for (i = 0; i < n && rc == 0; i++) {
		char why[256];

		rc = mc_segment_mount_check(q->m, c, &segs[i], why, sizeof(why));
		if (rc == 0) {
			rc = mc_segment_mount(q->m, c, &segs[i],
					      with_tokens ? tokens[i] : NULL);
			snprintf(why, sizeof(why), "cannot mount");
		}
		if (rc) {
			char idbuf[40];

			mc_uuid_format(&cid, idbuf);
			mc_log_warn("%s from %s (client %s) refused: segment %.*s: %s (%s)",
				    remount ? "ReMountSegment" : "MountSegment", q->peer, idbuf,
				    (int)(segs[i].name.n > 255 ? 255 : segs[i].name.n),
				    segs[i].name.p, why, mc_strerror(rc));
		}
	}
	if (rc == 0)
		mc_client_seen(q->m, c, 1);
	if (rc == 0 && remount) {
		if (!c->ok) {
			char idbuf[40];

			mc_uuid_format(&cid, idbuf);
			mc_log_info("client %s (%s) in good standing with %u segments", idbuf, q->peer,
				    n);
		}
		c->ok = 1;
	}
	return rc;
}

static int mc_op_unmount(struct mc_req *q)
{
	struct mc_uuid cid, sid;
	struct mc_segment *seg;

	mc_rpc_get_uuid(&q->r, &cid);
	mc_rpc_get_uuid(&q->r, &sid);
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	seg = mc_segment_lookup(q->m, &sid);	/* mounted or dormant */
	if (seg == NULL)
		seg = mc_disk_find(q->m, &sid);	/* an SSD area (UnmountLocalDiskSegment) */
	if (seg == NULL)
		return 0;
	if (memcmp(seg->client->id.b, cid.b, 16))
		return MC_ERR_INVALID_PARAMS;
	mc_segment_unmount(q->m, seg, "UnmountSegment");
	return 0;
}

static int mc_op_ping(struct mc_req *q)
{
	struct mc_uuid cid;
	struct mc_client *c;

	mc_rpc_get_uuid(&q->r, &cid);
	c = mc_client_find(q->m, &cid);
	mc_segment_note_populated(c, &q->r);
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	if (c) {
		c->last_ping = q->now;
		mc_client_seen(q->m, c, 0);	/* a Suspected client recovers */
	}
	mc_wbuf_i64(q->out, 0);
	mc_wbuf_u8(q->out, c && c->ok ? MC_CLIENT_OK : MC_CLIENT_NEED_REMOUNT);
	/* Our wall clock: clients write request deadlines in it. */
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		mc_wbuf_u64(q->out, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
	}
	mc_wbuf_u8(q->out, 1);	/* Ping may carry population figures */
	return 0;
}

static int mc_op_get_fsdir(struct mc_req *q)
{
	char dir[MC_RPC_MAX_PATH + 1] = "";

	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	if (q->m->fs_seg)
		snprintf(dir, sizeof(dir), "%s/%s", q->m->cfg.root_fs_dir, q->m->cfg.cluster_id);
	mc_wbuf_cstr(q->out, dir);
	return 0;
}

static int mc_op_service_ready(struct mc_req *q)
{
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	mc_wbuf_cstr(q->out, MC_VERSION_STRING);
	return 0;
}

static int mc_op_batch_query_ip(struct mc_req *q)
{
	uint32_t n = mc_rbuf_count(&q->r, MC_RPC_MAX_BATCH, 16), i;
	struct mc_uuid *ids = mc_xcalloc(n ? n : 1, sizeof(*ids));

	for (i = 0; i < n; i++)
		mc_rpc_get_uuid(&q->r, &ids[i]);
	if (!mc_req_done(q)) {
		free(ids);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		struct mc_client *c = mc_client_find(q->m, &ids[i]);
		struct mc_segment *s, *t;
		size_t at;
		uint32_t m = 0;

		mc_rpc_put_uuid(q->out, &ids[i]);
		at = q->out->len;
		mc_wbuf_u32(q->out, 0);
		for (s = c ? c->segs : NULL; s; s = s->cnext) {
			const char *colon = strrchr(s->endpoint, ':');
			size_t hl = colon ? (size_t)(colon - s->endpoint) : strlen(s->endpoint);
			int dup = 0;

			for (t = c->segs; t != s; t = t->cnext)
				dup |= !strncmp(t->endpoint, s->endpoint, hl) &&
				       (t->endpoint[hl] == ':' || t->endpoint[hl] == '\0');
			if (dup)
				continue;
			mc_wbuf_str(q->out, s->endpoint, hl);
			m++;
		}
		mc_wbuf_patch_u32(q->out, at, m);
	}
	free(ids);
	return 0;
}

static int mc_op_batch_replica_clear(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_uuid cid;
	struct mc_strv segname, *keys;
	struct mc_client *c;
	uint32_t n, i, cleared = 0;
	size_t at;

	mc_rpc_get_uuid(&q->r, &cid);
	segname = mc_rpc_get_strv(&q->r, MC_RPC_MAX_NAME);
	keys = mc_req_keys(q, &n);
	if (!mc_req_done(q)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_find(m, &cid);
	at = q->out->len;
	mc_wbuf_u32(q->out, 0);
	for (i = 0; i < n && c; i++) {
		struct mc_object *o = mc_object_find(&m->objects, keys[i].p, keys[i].n);
		uint32_t j, left = 0, hit = 0;

		if (o == NULL || o->writer != c || o->lease_until > q->now)
			continue;
		if (segname.n == 0) {
			if (mc_count_status(o, MC_REPLICA_COMPLETE) != o->nrep)
				continue;
			mc_persist_object_gone(m, o);
			mc_master_object_remove(m, o);
		} else {
			for (j = 0; j < o->nrep; j++) {
				struct mc_replica *r = mc_object_replica(o, j);

				if (r->seg && strlen(r->seg->name) == segname.n &&
				    !memcmp(r->seg->name, segname.p, segname.n)) {
					mc_replica_release(m, r);
					hit = 1;
				} else if (r->seg) {
					left++;
				}
			}
			if (!hit)
				continue;
			if (left == 0) {
				mc_persist_object_gone(m, o);
				mc_object_erase(&m->objects, o);
			} else {
				mc_object_compact(o);
				mc_persist_object_changed(m, o);
			}
		}
		mc_wbuf_str(q->out, keys[i].p, keys[i].n);
		cleared++;
	}
	mc_wbuf_patch_u32(q->out, at, cleared);
	free(keys);
	return 0;
}

/* ReportTransferFailure: a client could not move bytes to or from these segments (a peer that
 * is gone, refuses, or does not answer in time).  Each mounted memory segment of a reported
 * name is marked unhealthy (liveness.c); a name no mounted segment has is SEGMENT_NOT_FOUND.
 * Only a client in good standing may report: the reports of others change nothing. */
static int mc_op_report_transfer_failure(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_uuid cid;
	struct mc_rpc_xfer_failure *f;
	struct mc_client *c;
	uint32_t n, i;

	mc_rpc_get_uuid(&q->r, &cid);
	n = mc_rbuf_count(&q->r, MC_RPC_MAX_REPORT, 8);
	if (q->r.err)
		return MC_ERR_INVALID_PARAMS;
	f = mc_xcalloc(n ? n : 1, sizeof(*f));
	for (i = 0; i < n; i++)
		mc_rpc_get_xfer_failure(&q->r, &f[i]);
	if (!mc_req_done(q)) {
		free(f);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_find(m, &cid);
	if (c == NULL || !c->ok) {
		free(f);
		mc_log_warn("transfer failure report from %s ignored: not a client in good standing",
			    q->peer);
		return MC_ERR_ILLEGAL_CLIENT;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		int rc = mc_segment_report_failure(m, f[i].segment, f[i].code, q->now, q->peer);

		m->metrics.transfer_failure_reports++;
		mc_wbuf_i32(q->out, rc);
		mc_item_result(q, rc);
	}
	free(f);
	return 0;
}

/* ---------------------------------------------------------------- dispatch */

static int mc_is_batch_op(uint16_t op)
{
	switch (op) {
	case MC_OP_BATCH_PUT_START:
	case MC_OP_BATCH_PUT_END:
	case MC_OP_BATCH_PUT_REVOKE:
	case MC_OP_BATCH_UPSERT_START:
	case MC_OP_BATCH_UPSERT_END:
	case MC_OP_BATCH_UPSERT_REVOKE:
	case MC_OP_BATCH_GET_REPLICA_LIST:
	case MC_OP_BATCH_EXIST_KEY:
	case MC_OP_BATCH_REMOVE:
	case MC_OP_BATCH_QUERY_IP:
	case MC_OP_BATCH_REPLICA_CLEAR:
		return 1;
	default:
		return 0;
	}
}

void mc_master_handle(struct mc_master *m, const struct mc_rpc_hdr *h, const uint8_t *body,
		      struct mc_wbuf *out, const char *peer)
{
	struct mc_op_counters dummy;
	struct mc_req q = {
		.m = m, .out = out, .peer = peer, .now = mc_master_now(m),
	};
	size_t start = out->len;
	uint64_t failed_before;
	int rc;

	q.ctr = h->opcode < MC_METRICS_MAX_OP ? &m->metrics.op[h->opcode] : &dummy;
	memset(&dummy, 0, sizeof(dummy));
	failed_before = q.ctr->failed_items;
	q.ctr->requests++;
	mc_rbuf_init(&q.r, body, h->body_len);
	mc_rpc_frame_begin(out, MC_RPC_RESPONSE, h->opcode, 0, h->req_id);
	switch (h->opcode) {
	case MC_OP_PING: rc = mc_op_ping(&q); break;
	case MC_OP_SERVICE_READY: rc = mc_op_service_ready(&q); break;
	case MC_OP_GET_FSDIR: rc = mc_op_get_fsdir(&q); break;
	case MC_OP_GET_STORAGE_CONFIG:
		rc = mc_req_done(&q) ? mc_fs_storage_config(m, out) : MC_ERR_INVALID_PARAMS;
		break;
	case MC_OP_FS_HEARTBEAT: rc = mc_fs_heartbeat(m, &q.r, out, q.now); break;
	case MC_OP_FS_EVICT: rc = mc_fs_evict(m, &q.r, out, q.now); break;
	case MC_OP_MOUNT_SEGMENT: rc = mc_op_mount(&q, 0); break;
	case MC_OP_REMOUNT_SEGMENT: rc = mc_op_mount(&q, 1); break;
	case MC_OP_UNMOUNT_SEGMENT: rc = mc_op_unmount(&q); break;
	case MC_OP_PUT_START:
	case MC_OP_BATCH_PUT_START: rc = mc_op_put_start(&q, 0); break;
	case MC_OP_UPSERT_START:
	case MC_OP_BATCH_UPSERT_START: rc = mc_op_put_start(&q, 1); break;
	case MC_OP_PUT_END:
	case MC_OP_BATCH_PUT_END:
	case MC_OP_UPSERT_END:
	case MC_OP_BATCH_UPSERT_END: rc = mc_op_put_end_revoke(&q, 0); break;
	case MC_OP_PUT_REVOKE:
	case MC_OP_BATCH_PUT_REVOKE:
	case MC_OP_UPSERT_REVOKE:
	case MC_OP_BATCH_UPSERT_REVOKE: rc = mc_op_put_end_revoke(&q, 1); break;
	case MC_OP_GET_REPLICA_LIST:
	case MC_OP_BATCH_GET_REPLICA_LIST: rc = mc_op_get_replica_list(&q); break;
	case MC_OP_GET_REPLICA_LIST_BY_REGEX: rc = mc_op_get_by_regex(&q); break;
	case MC_OP_EXIST_KEY:
	case MC_OP_BATCH_EXIST_KEY: rc = mc_op_exist_key(&q); break;
	case MC_OP_REMOVE:
	case MC_OP_BATCH_REMOVE: rc = mc_op_remove(&q); break;
	case MC_OP_REMOVE_BY_REGEX: rc = mc_op_remove_by_regex(&q); break;
	case MC_OP_REMOVE_ALL: rc = mc_op_remove_all(&q); break;
	case MC_OP_BATCH_QUERY_IP: rc = mc_op_batch_query_ip(&q); break;
	case MC_OP_BATCH_REPLICA_CLEAR: rc = mc_op_batch_replica_clear(&q); break;
	case MC_OP_MOUNT_LOCAL_DISK: rc = mc_op_mount_local_disk(m, &q.r, out, q.now, peer); break;
	case MC_OP_OFFLOAD_HEARTBEAT:
		rc = mc_op_offload_heartbeat(m, &q.r, out, q.now, peer);
		break;
	case MC_OP_NOTIFY_OFFLOAD: rc = mc_op_notify_offload(m, &q.r, out, q.now, peer); break;
	case MC_OP_EVICT_DISK_REPLICA:
		rc = mc_op_evict_disk_replica(m, &q.r, out, q.now, peer);
		break;
	case MC_OP_REPORT_TRANSFER_FAILURE: rc = mc_op_report_transfer_failure(&q); break;
	default:
		mc_log_warn("unknown opcode %u from %s", h->opcode, peer);
		rc = MC_ERR_NOT_SUPPORTED;
		break;
	}
	if (rc == 0 && out->err)
		rc = MC_ERR_INTERNAL;
	if (rc != 0) {
		if (rc == MC_ERR_INVALID_PARAMS && q.r.err)
			mc_log_warn("malformed %s body (%u bytes) from %s", mc_rpc_op_name(h->opcode),
				    h->body_len, peer);
		out->len = start;
		out->err = 0;
		mc_rpc_frame_begin(out, MC_RPC_RESPONSE, h->opcode, rc, h->req_id);
		q.ctr->failures++;
	} else if (mc_is_batch_op(h->opcode)) {
		uint64_t failed = q.ctr->failed_items - failed_before;

		if (failed > 0)
			q.ctr->partial++;
	} else if (q.ctr->failed_items != failed_before) {
		q.ctr->failures++;
	}
	mc_rpc_frame_end(out, start);
}

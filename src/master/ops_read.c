/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's read operations: GetReplicaList (single, batch, by regex), ExistKey and ProbeKey
 * (handlers of the table in ops.h).  A read grants the object a lease of default_kv_lease_ttl
 * during which it is neither removed nor evicted; a GetReplicaList lease also holds its SSD copy.
 * ProbeKey grants none (or, with the LastHitOnly policy, only to the last group found whole).
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/xalloc.h"
#include "master/dyn_replication.h"
#include "master/ops.h"

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

/* The items, then the object's checksum per key (mc_rpc_put_checksums; absent for a key
 * answered with an error or whose writer sent none): readers from before checksums stop
 * reading after the items. */
int mc_op_get_replica_list(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_strv *keys;
	struct mc_rpc_checksum *cs;
	uint32_t n, i, *h;

	keys = mc_req_keys_h(q, &n, &h);
	if (!mc_req_done(q)) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	cs = mc_xcalloc(n ? n : 1, sizeof(*cs));
	mc_wbuf_u64(q->out, (uint64_t)m->cfg.default_kv_lease_ttl);
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		struct mc_object *o = mc_object_find_h(&m->objects, keys[i].p, keys[i].n, h[i]);
		int rc = 0;

		m->metrics.total_get_nums++;
		if (o == NULL)
			rc = MC_ERR_OBJECT_NOT_FOUND;
		else if (mc_object_count_readable(o) == 0)
			rc = mc_object_count_status(o, MC_REPLICA_PROCESSING) ? MC_ERR_REPLICA_IS_NOT_READY
								       : MC_ERR_OBJECT_NOT_FOUND;
		if (rc) {
			mc_wbuf_i32(q->out, rc);
			mc_wbuf_u32(q->out, 0);
		} else {
			mc_wbuf_i32(q->out, 0);
			mc_grant_lease(q, o);
			o->fetch_until = o->lease_until;
			cs[i].present = o->has_checksum;
			cs[i].value = o->checksum;
			mc_put_complete_replicas(m, q->out, o);
			m->metrics.valid_get_nums++;
			mc_dynrep_on_read(m, o);	/* a hot key may get another replica */
		}
		mc_req_item(q, rc);
	}
	mc_rpc_put_checksums(q->out, cs, n);
	free(keys);
	free(cs);
	return 0;
}

static int mc_exist_one(struct mc_req *q, struct mc_object *o)
{
	int res = o != NULL && mc_object_count_readable(o) > 0;

	if (res)
		mc_grant_lease(q, o);
	return res;
}

int mc_op_exist_key(struct mc_req *q)
{
	return mc_req_keys_each(q, mc_exist_one);
}

int mc_op_get_replica_list_by_regex(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_strv pat = mc_rpc_get_strv(&q->r, MC_RPC_MAX_REGEX);
	struct mc_object *o;
	regex_t re;
	size_t pos = 0, count_at;
	uint32_t count = 0;

	if (!mc_req_done(q) || mc_req_regex(q, &re, pat))
		return MC_ERR_INVALID_PARAMS;
	mc_wbuf_u64(q->out, (uint64_t)m->cfg.default_kv_lease_ttl);
	count_at = q->out->len;
	mc_wbuf_u32(q->out, 0);
	while ((o = mc_object_next(&m->objects, &pos)) != NULL) {
		if (mc_object_count_readable(o) == 0 || !mc_object_key_matches(&re, o))
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

/* ProbeKey: "keys"; BatchProbeKey: "u8 policy, u32 candidate_size, keys".  Answers like
 * ExistKey (u32 n, n x i32: 1 readable, 0 not) but grants no lease and leaves the eviction order
 * alone: a lookup that does not read must not keep objects from eviction.  With policy
 * MC_PROBE_LAST_HIT_ONLY the keys form groups of candidate_size (n a multiple of it), and the
 * last group whose keys are all readable, and only it, gets ExistKey's lease: the caller reads
 * that one.  A malformed body, an unknown policy or a candidate_size that does not divide n is
 * INVALID_PARAMS for the frame. */
int mc_op_probe_key(struct mc_req *q)
{
	struct mc_strv *keys;
	struct mc_object **objs;
	uint8_t policy = MC_PROBE_NONE;
	uint32_t cs = 1, n, i, g;

	if (q->op->opcode == MC_OP_BATCH_PROBE_KEY) {
		policy = mc_rbuf_u8(&q->r);
		cs = mc_rbuf_u32(&q->r);
	}
	keys = mc_req_keys(q, &n);
	if (!mc_req_done(q) || policy > MC_PROBE_LAST_HIT_ONLY ||
	    (policy == MC_PROBE_LAST_HIT_ONLY && (cs == 0 || n % cs))) {
		free(keys);
		return MC_ERR_INVALID_PARAMS;
	}
	objs = mc_xcalloc(n ? n : 1, sizeof(*objs));
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		struct mc_object *o = mc_object_find(&q->m->objects, keys[i].p, keys[i].n);

		if (o != NULL && mc_object_count_readable(o) > 0)
			objs[i] = o;
		mc_wbuf_i32(q->out, objs[i] != NULL);
		mc_req_item(q, 0);
	}
	for (g = policy == MC_PROBE_LAST_HIT_ONLY ? n / cs : 0; g > 0; g--) {
		for (i = (g - 1) * cs; i < g * cs && objs[i]; i++)
			;
		if (i < g * cs)
			continue;
		for (i = (g - 1) * cs; i < g * cs; i++)
			mc_grant_lease(q, objs[i]);
		break;
	}
	free(objs);
	free(keys);
	return 0;
}

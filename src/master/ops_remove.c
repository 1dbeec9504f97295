/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's removals: Remove (single, batch), RemoveByRegex, RemoveAll and
 * BatchReplicaClear (handlers of the table in ops.h), and the same removals for the admin HTTP
 * server (mc_master_remove_key, mc_master_remove_all), so both take the same care: leases,
 * unfinished puts, abandoned shared-directory replicas, the ghosts of SSD copies that are away
 * and the adoption of objects older than this master.
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "master/ops.h"

/* Remove o unless a lease (without force) or an unfinished put keeps it.  0 or the item code;
 * o must not be used after a 0. */
static int mc_remove_one(struct mc_master *m, struct mc_object *o, int force, int64_t now)
{
	if (!force && o->lease_until > now)
		return MC_ERR_OBJECT_HAS_LEASE;
	if (o->xflags & MC_OBJX_TASK)
		return MC_ERR_OBJECT_HAS_REPLICATION_TASK;	/* a copy or move works on it */
	if (mc_fs_reap_abandoned(m, o, now))
		return 0;	/* only an abandoned DISK replica was left */
	if (mc_object_count_status(o, MC_REPLICA_COMPLETE) != o->nrep)
		return MC_ERR_REPLICA_IS_NOT_READY;
	mc_persist_object_gone(m, o);
	mc_master_object_remove(m, o);
	return 0;
}

int mc_master_remove_key(struct mc_master *m, const char *key, size_t len, int force, int64_t now)
{
	struct mc_object *o = mc_object_find(&m->objects, key, len);

	if (o != NULL)
		return mc_remove_one(m, o, force, now);
	/* An SSD copy on an area that is away must not come back. */
	mc_ghost_forget(m, key, len);
	return MC_ERR_OBJECT_NOT_FOUND;
}

int64_t mc_master_remove_all(struct mc_master *m, int force, int64_t now, const char *why)
{
	struct mc_object *o;
	size_t pos = 0;
	int64_t count = 0;

	while ((o = mc_object_next(&m->objects, &pos)) != NULL)
		if (mc_remove_one(m, o, force, now) == 0)
			count++;
	mc_ghost_remove_matching(m, NULL);
	mc_adopt_close(m, why);
	return count;
}

int mc_op_remove(struct mc_req *q)
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
		int rc = mc_master_remove_key(q->m, keys[i].p, keys[i].n, force, q->now);

		mc_wbuf_i32(q->out, rc);
		mc_req_item(q, rc);
	}
	free(keys);
	return 0;
}

int mc_op_remove_by_regex(struct mc_req *q)
{
	int force = mc_rbuf_u8(&q->r);
	struct mc_strv pat = mc_rpc_get_strv(&q->r, MC_RPC_MAX_REGEX);
	struct mc_object *o;
	regex_t re;
	size_t pos = 0;
	int64_t count = 0;

	if (!mc_req_done(q) || mc_req_regex(q, &re, pat))
		return MC_ERR_INVALID_PARAMS;
	while ((o = mc_object_next(&q->m->objects, &pos)) != NULL)
		if (mc_object_key_matches(&re, o) && mc_remove_one(q->m, o, force, q->now) == 0)
			count++;
	mc_ghost_remove_matching(q->m, &re);
	/* Keys it matches that the master never saw may sit on an SSD that is away. */
	mc_adopt_close(q->m, "remove_by_regex");
	regfree(&re);
	mc_wbuf_i64(q->out, count);
	return 0;
}

int mc_op_remove_all(struct mc_req *q)
{
	int force = mc_rbuf_u8(&q->r);
	int64_t count;

	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	count = mc_master_remove_all(q->m, force, q->now, "remove_all");
	mc_wbuf_i64(q->out, count);
	mc_log_info("remove_all%s from %s removed %lld objects", force ? " (force)" : "", q->peer,
		    (long long)count);
	return 0;
}

int mc_op_batch_replica_clear(struct mc_req *q)
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

		if (o == NULL || mc_object_writer(m, o) != c || o->lease_until > q->now)
			continue;
		if (segname.n == 0) {
			if (mc_object_count_status(o, MC_REPLICA_COMPLETE) != o->nrep)
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

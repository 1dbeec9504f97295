/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Members and compaction of the replicated log (see ha.h).
 *
 * Members.  Every master keeps /oplog/<cluster_id>/members/<its address> = {"applied": N, ...}
 * under a lease of its own (10 s), refreshed every 2 s: the masters alive and how far each is.
 *
 * Compaction.  The leader, every 5 s, deletes the batches up to the smaller of the latest
 * snapshot's batch (ha_snapshot.c) and every live member's applied batch, then compacts etcd's
 * history to that revision, so etcd holds about a snapshot interval of log.  Without snapshots
 * nothing is deleted: a master that comes back or joins needs the whole log, or a snapshot.
 * Loop thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "coord/etcd.h"
#include "master/ha.h"
#include "master/master.h"

#define MC_MEMBER_TTL_S 10
#define MC_MEMBER_EVERY_MS 2000
#define MC_COMPACT_EVERY_MS 5000

struct mc_compact;

struct mc_ha_compact {
	struct mc_ha *ha;
	int64_t member_at, compact_at;
	int64_t member_lease;
	struct mc_etcd_call *member_call;
	struct mc_etcd_call *compact_call;
	struct mc_compact *compact_cx;	/* the context of compact_call */
	uint64_t first;			/* first batch still in etcd (1 until known) */
};

/* ---------------------------------------------------------------- members */

static void mc_member_put(struct mc_ha_compact *hc);

static void mc_member_on_put(void *arg, int rc, json_t *reply)
{
	struct mc_ha_compact *hc = arg;

	(void)reply;
	hc->member_call = NULL;
	if (rc)
		hc->member_lease = 0;	/* granted again next time */
}

static void mc_member_on_keepalive(void *arg, int rc, json_t *reply)
{
	struct mc_ha_compact *hc = arg;

	hc->member_call = NULL;
	if (rc || mc_etcd_i64(json_object_get(reply, "result"), "TTL") <= 0)
		hc->member_lease = 0;
	mc_member_put(hc);
}

static void mc_member_on_grant(void *arg, int rc, json_t *reply)
{
	struct mc_ha_compact *hc = arg;

	hc->member_call = NULL;
	hc->member_lease = rc ? 0 : mc_etcd_i64(reply, "ID");
	if (hc->member_lease)
		mc_member_put(hc);
}

static void mc_member_put(struct mc_ha_compact *hc)
{
	struct mc_ha *ha = hc->ha;
	char key[MC_HA_KEY_MAX + 300], *s;
	json_t *b, *v;

	if (hc->member_lease == 0)
		return;
	snprintf(key, sizeof(key), "%s%s", ha->members, ha->self);
	v = json_pack("{sIsssIss}", "applied", (json_int_t)ha->applied, "state",
		      mc_ha_state_name(ha->m), "metrics_port", (json_int_t)ha->m->cfg.metrics_port,
		      "address", ha->self);
	s = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	b = json_pack("{sososo}", "key", mc_etcd_b64s(key), "value", mc_etcd_b64s(s ? s : "{}"),
		      "lease", mc_etcd_num(hc->member_lease));
	free(s);
	hc->member_call = mc_etcd_post(ha->etcd, "/v3/kv/put", b, 2000, mc_member_on_put, hc);
	json_decref(b);
}

static void mc_member_tick(struct mc_ha_compact *hc)
{
	struct mc_ha *ha = hc->ha;
	json_t *b;

	if (hc->member_call)
		return;
	if (hc->member_lease == 0) {
		b = json_pack("{sI}", "TTL", (json_int_t)MC_MEMBER_TTL_S);
		hc->member_call = mc_etcd_post(ha->etcd, "/v3/lease/grant", b, 2000,
					       mc_member_on_grant, hc);
	} else {
		b = json_pack("{so}", "ID", mc_etcd_num(hc->member_lease));
		hc->member_call = mc_etcd_post(ha->etcd, "/v3/lease/keepalive", b, 2000,
					       mc_member_on_keepalive, hc);
	}
	json_decref(b);
}

/* ---------------------------------------------------------------- compaction (the leader) */

struct mc_compact {
	struct mc_ha_compact *hc;
	uint64_t snap_batch;
	uint64_t bound;
};

static void mc_compact_end(struct mc_compact *cx)
{
	cx->hc->compact_call = NULL;
	cx->hc->compact_cx = NULL;
	free(cx);
}

static void mc_compact_on_history(void *arg, int rc, json_t *reply)
{
	struct mc_compact *cx = arg;

	(void)reply;
	if (rc)
		mc_log_debug("HA: etcd history compaction: %s", mc_strerror(rc));
	mc_compact_end(cx);
}

static void mc_compact_on_deleted(void *arg, int rc, json_t *reply)
{
	struct mc_compact *cx = arg;
	struct mc_ha_compact *hc = cx->hc;
	struct mc_ha *ha = hc->ha;
	int64_t rev = mc_etcd_i64(json_object_get(reply, "header"), "revision");
	json_t *b;

	hc->compact_call = NULL;
	if (rc) {
		mc_compact_end(cx);
		return;
	}
	ha->x.compactions++;
	ha->x.compacted_batches += (uint64_t)mc_etcd_i64(reply, "deleted");
	mc_log_info("HA: log compacted: batches %" PRIu64 "..%" PRIu64 " deleted (snapshot at %"
		    PRIu64 ")", hc->first, cx->bound, cx->snap_batch);
	hc->first = cx->bound + 1;
	/* etcd keeps old revisions until its history is compacted too. */
	b = json_pack("{sI}", "revision", (json_int_t)rev);
	hc->compact_call = mc_etcd_post(ha->etcd, "/v3/kv/compaction", b, 10000,
					mc_compact_on_history, cx);
	json_decref(b);
	if (hc->compact_call == NULL)
		mc_compact_end(cx);
}

static void mc_compact_on_members(void *arg, int rc, json_t *reply)
{
	struct mc_compact *cx = arg;
	struct mc_ha_compact *hc = cx->hc;
	struct mc_ha *ha = hc->ha;
	uint64_t bound = cx->snap_batch;
	char from[MC_HA_KEY_MAX + 24], to[MC_HA_KEY_MAX + 24];
	json_t *kv, *b;
	size_t i;

	hc->compact_call = NULL;
	if (rc) {
		mc_compact_end(cx);
		return;
	}
	if (ha->applied < bound)
		bound = ha->applied;
	json_array_foreach(json_object_get(reply, "kvs"), i, kv) {
		size_t len = 0;
		char *v = mc_etcd_bytes(kv, "value", &len);
		json_t *j = v ? json_loads(v, 0, NULL) : NULL;
		json_t *a = json_object_get(j, "applied");

		if (json_is_integer(a) && (uint64_t)json_integer_value(a) < bound)
			bound = (uint64_t)json_integer_value(a);
		json_decref(j);
		free(v);
	}
	if (bound < hc->first) {
		mc_compact_end(cx);
		return;
	}
	cx->bound = bound;
	snprintf(from, sizeof(from), "%s%020" PRIu64, ha->batches, hc->first);
	snprintf(to, sizeof(to), "%s%020" PRIu64, ha->batches, bound + 1);
	b = json_pack("{soso}", "key", mc_etcd_b64s(from), "range_end", mc_etcd_b64s(to));
	hc->compact_call = mc_etcd_post(ha->etcd, "/v3/kv/deleterange", b, 10000,
					mc_compact_on_deleted, cx);
	json_decref(b);
	if (hc->compact_call == NULL)
		mc_compact_end(cx);
}

static void mc_compact_on_snapshot(void *arg, int rc, json_t *reply)
{
	struct mc_compact *cx = arg;
	struct mc_ha_compact *hc = cx->hc;
	struct mc_ha *ha = hc->ha;
	json_t *kv = json_array_get(json_object_get(reply, "kvs"), 0), *j = NULL, *b;
	size_t len = 0;
	char *v = kv ? mc_etcd_bytes(kv, "value", &len) : NULL, end[MC_HA_KEY_MAX];

	hc->compact_call = NULL;
	if (v)
		j = json_loads(v, 0, NULL);
	free(v);
	if (rc == 0 && j && json_integer_value(json_object_get(j, "log_id")) == ha->log_id)
		cx->snap_batch = (uint64_t)json_integer_value(json_object_get(j, "batch"));
	json_decref(j);
	if (cx->snap_batch < hc->first) {
		mc_compact_end(cx);
		return;
	}
	mc_etcd_prefix_end(ha->members, end, sizeof(end));
	b = json_pack("{soso}", "key", mc_etcd_b64s(ha->members), "range_end", mc_etcd_b64s(end));
	hc->compact_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, 5000, mc_compact_on_members,
					cx);
	json_decref(b);
	if (hc->compact_call == NULL)
		mc_compact_end(cx);
}

static void mc_compact_start(struct mc_ha_compact *hc)
{
	struct mc_ha *ha = hc->ha;
	struct mc_compact *cx = mc_xcalloc(1, sizeof(*cx));
	json_t *b = json_pack("{so}", "key", mc_etcd_b64s(ha->snap_key));

	cx->hc = hc;
	hc->compact_cx = cx;
	hc->compact_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, 5000, mc_compact_on_snapshot,
					cx);
	json_decref(b);
	if (hc->compact_call == NULL)
		mc_compact_end(cx);
}

uint64_t mc_ha_log_first(const struct mc_ha *ha)
{
	return ha->compact ? ha->compact->first : 1;
}

void mc_ha_compact_tick(struct mc_ha *ha)
{
	struct mc_ha_compact *hc = ha->compact;
	int64_t now = mc_ha_now(ha);

	if (hc == NULL || ha->log_id == 0)
		return;
	if (now >= hc->member_at) {
		hc->member_at = now + MC_MEMBER_EVERY_MS;
		mc_member_tick(hc);
	}
	if (ha->state == MC_HA_SERVING && now >= hc->compact_at && hc->compact_call == NULL) {
		hc->compact_at = now + MC_COMPACT_EVERY_MS;
		mc_compact_start(hc);
	}
}

int mc_ha_compact_init(struct mc_ha *ha)
{
	struct mc_ha_compact *hc = mc_xcalloc(1, sizeof(*hc));

	hc->ha = ha;
	hc->first = 1;
	ha->compact = hc;
	return 0;
}

void mc_ha_compact_fini(struct mc_ha *ha)
{
	struct mc_ha_compact *hc = ha->compact;

	if (hc == NULL)
		return;
	mc_etcd_cancel(hc->member_call);
	mc_etcd_cancel(hc->compact_call);
	free(hc->compact_cx);
	free(hc);
	ha->compact = NULL;
}

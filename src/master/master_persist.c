/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's side of crash recovery, what it records in the SQLite store (src/persist); how it
 * rebuilds its tables from it is master_recover.c.
 *
 * Every change to a segment or an object is recorded as it happens, in one batch per loop
 * iteration that mc_master_commit writes before the iteration's replies are sent (see
 * rpc_server.c), so whatever a client was told survives kill -9.
 *
 * When a commit (or a checkpoint) fails, the master enters the failing state: the batch stays
 * queued in src/persist, the replies that waited for it become MC_ERR_PERSISTENT_FAIL, requests
 * that would change durable state are refused up front (rpc_server.c) so memory never runs
 * further ahead of the file, and a timer retries the same batch with backoff (100 ms doubling to
 * 5 s), one bounded commit per attempt, until it goes through.  Reads, existence checks, leases
 * and pings go on.  One log line when it starts failing, one when it recovers.  What is in
 * memory but not yet in the file is only what the failed batch held (changes whose requests were
 * told PERSISTENT_FAIL, and housekeeping such as expiries; eviction waits): readers see it; it
 * becomes durable with the retry, or is gone if the master dies first.  With
 * --persist_on_error=continue the master acknowledges anyway and keeps retrying.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "master/tenants.h"
#include "persist/persist.h"
#include "segment/alloc.h"

int64_t mc_persist_wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* The record of o as the objects table (or the put log) has it, into po, reps and scoped. */
static void mc_persist_encode_object(struct mc_master *m, struct mc_object *o,
				     struct mc_persist_object *po,
				     struct mc_persist_replica *reps, char *scoped)
{
	uint32_t i, n = 0;
	int64_t wall, now;

	for (i = 0; i < o->nrep && n < MC_RPC_MAX_REPLICAS; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg == NULL)
			continue;
		reps[n].id = r->id;
		reps[n].type = r->type;
		reps[n].status = r->status;
		memcpy(reps[n].segment_id, r->seg->id.b, 16);
		if (r->type == MC_REPLICA_DISK) {
			reps[n].offset = 0;
			reps[n].len = o->size;
		} else if (r->type == MC_REPLICA_LOCAL_DISK) {
			reps[n].offset = r->disk_addr;
			reps[n].len = o->size;
		} else {
			reps[n].offset = r->off;
			reps[n].len = mc_object_span(o);
		}
		n++;
	}
	memset(po, 0, sizeof(*po));
	po->key = o->key;
	po->key_len = o->key_len;
	po->size = o->size;
	po->flags = (o->flags & MC_OBJ_HARD_PIN) |
		    ((o->xflags & MC_OBJX_ROWKEY) ? MC_PERSIST_ROWKEY : 0);
	if (o->tenant) {	/* another tenant's namespace: upstream's scoped key */
		po->key_len = mc_tenant_persist_key(m, o, scoped, &po->flags);
		po->key = scoped;
	}
	po->gen = o->gen;
	po->has_checksum = o->has_checksum;
	po->checksum = o->checksum;
	/* Monotonic times do not survive a restart: store wall-clock ones. */
	wall = mc_persist_wall_ms();
	now = mc_master_now(m);
	po->put_start_ms = wall - (now - o->put_start);
	po->soft_pin_until_ms =
		mc_object_soft_pin_until(o) ? wall + (mc_object_soft_pin_until(o) - now) : 0;
	if (mc_object_writer(m, o))
		memcpy(po->writer, mc_object_writer(m, o)->id.b, 16);
	po->n_replicas = n;
	po->replicas = reps;
}

/* o's start is in the put log: its end is recorded now, elsewhere. */
static void mc_persist_unlog(struct mc_master *m, struct mc_object *o)
{
	if (o->xflags & MC_OBJX_LOGGED) {
		o->xflags &= ~MC_OBJX_LOGGED;
		mc_persist_log_done(m->persist, o->gen);
	}
}

void mc_persist_object_changed(struct mc_master *m, struct mc_object *o)
{
	char scoped[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];
	struct mc_persist_replica reps[MC_RPC_MAX_REPLICAS];
	struct mc_persist_object po;

	if (m->persist == NULL)
		return;
	mc_persist_unlog(m, o);
	mc_persist_encode_object(m, o, &po, reps, scoped);
	/* A batch that cannot grow (out of memory) fails its commit: nothing to do here. */
	(void)mc_persist_put_object(m->persist, &po);
}

/* The put log serves the master that keeps its own file alone: HA replicates the objects
 * table's changes, and other tenants' keys are scoped there. */
static int mc_persist_log_usable(const struct mc_master *m, const struct mc_object *o)
{
	return m->repl == NULL && m->ha == NULL && !m->cfg.enable_ha && o->tenant == 0 &&
	       !mc_tenants_enabled(m);
}

void mc_persist_object_started(struct mc_master *m, struct mc_object *o, int fresh)
{
	char scoped[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];
	struct mc_persist_replica reps[MC_RPC_MAX_REPLICAS];
	struct mc_persist_object po;

	if (m->persist == NULL)
		return;
	if (!fresh || !mc_persist_log_usable(m, o)) {
		mc_persist_object_changed(m, o);
		return;
	}
	mc_persist_encode_object(m, o, &po, reps, scoped);
	if (mc_persist_log_object(m->persist, &po) == 0)
		o->xflags |= MC_OBJX_LOGGED;
}

/* A row of the put log too old: its puts still in flight go to the objects table. */
static void mc_persist_on_retire(void *arg, const struct mc_persist_object *po)
{
	struct mc_master *m = arg;
	struct mc_object *o = mc_object_find(&m->objects, po->key, po->key_len);

	if (o && (o->xflags & MC_OBJX_LOGGED) && o->gen == po->gen)
		mc_persist_object_changed(m, o);
}

void mc_master_persist_tick(struct mc_master *m)
{
	if (m->persist && !m->persist_failed)
		m->metrics.persist_log_retired +=
			mc_persist_log_retire(m->persist, MC_PERSIST_LOG_RETIRE_MS,
					      mc_persist_on_retire, m);
}

void mc_persist_object_gone(struct mc_master *m, struct mc_object *o)
{
	char scoped[MC_TENANT_NAME_MAX + 1 + MC_RPC_MAX_KEY];
	uint32_t flags = 0;

	if (m->persist == NULL)
		return;
	if (o->xflags & MC_OBJX_LOGGED) {	/* only the put log has it */
		mc_persist_unlog(m, o);
		return;
	}
	if (o->tenant) {
		size_t len = mc_tenant_persist_key(m, o, scoped, &flags);

		(void)mc_persist_del_object(m->persist, scoped, len,
					    mc_persist_row(scoped, len, o->gen,
							   (o->xflags & MC_OBJX_ROWKEY) != 0));
	} else {
		(void)mc_persist_del_object(m->persist, o->key, o->key_len,
					    mc_persist_row(o->key, o->key_len, o->gen,
							   (o->xflags & MC_OBJX_ROWKEY) != 0));
	}
}

void mc_persist_segment_changed(struct mc_master *m, struct mc_segment *seg)
{
	struct mc_persist_segment ps;

	if (m->persist == NULL)
		return;
	memcpy(ps.id, seg->id.b, 16);
	memcpy(ps.client_id, seg->client->id.b, 16);
	ps.name = seg->name;
	ps.base = seg->base;
	ps.size = seg->size;
	ps.endpoint = seg->endpoint;
	ps.protocol = seg->protocol;
	ps.kind = seg->is_disk ? 1 : 0;
	memset(ps.token, 0, sizeof(ps.token));
	if (seg->has_token)
		memcpy(ps.token, seg->token, 16);
	ps.dormant_until_ms = 0;
	if (seg->status == MC_SEG_DORMANT) {
		/* Monotonic times do not survive a restart: store the wall-clock end (never 0). */
		ps.dormant_until_ms = mc_persist_wall_ms() + (seg->dormant_until - mc_master_now(m));
		if (ps.dormant_until_ms <= 0)
			ps.dormant_until_ms = 1;
	}
	(void)mc_persist_put_segment(m->persist, &ps);
}

void mc_persist_segment_gone(struct mc_master *m, struct mc_segment *seg)
{
	if (m->persist)
		(void)mc_persist_del_segment(m->persist, seg->id.b);
}

#define MC_PERSIST_RETRY_MIN_MS 100
#define MC_PERSIST_RETRY_MAX_MS 5000

static void mc_persist_retry_at(struct mc_master *m, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(m->ev_persist_retry, &tv);
}

/* A commit or checkpoint failed (what): enter the failing state, once. */
static void mc_persist_failing(struct mc_master *m, const char *what)
{
	int why = mc_persist_last_error(m->persist);

	m->metrics.persist_commit_failures++;
	if (m->persist_failed)
		return;
	m->persist_failed = 1;
	m->persist_failed_since = mc_master_now(m);
	m->persist_backoff_ms = MC_PERSIST_RETRY_MIN_MS;
	mc_log_err("persistence failing: %s of %s failed: %s (%s); %s; retrying", what,
		   m->cfg.persist_path, mc_persist_last_message(m->persist),
		   mc_persist_error_class(why),
		   m->persist_continue ? "acknowledging changes that are not durable "
					 "(--persist_on_error=continue)"
				       : "refusing changes with PERSISTENT_FAIL (-1503)");
	mc_persist_retry_at(m, m->persist_backoff_ms);
}

/* One bounded attempt: write the pending batch (with the counters it depends on), then
 * checkpoint if one is owed.  0; 1 when the batch is durable but the checkpoint failed;
 * MC_ERR_PERSISTENT_FAIL when the batch is not in the file.  Failures enter the failing state. */
static int mc_persist_attempt(struct mc_master *m)
{
	struct mc_persist *p = m->persist;

	if (mc_persist_pending(p)) {
		if (mc_persist_set_meta(p, "next_replica_id", (int64_t)m->next_replica_id) ||
		    mc_persist_set_meta(p, "next_gen", (int64_t)m->next_gen) ||
		    mc_persist_commit(p)) {
			mc_persist_failing(m, "commit");
			return MC_ERR_PERSISTENT_FAIL;
		}
	}
	if (!mc_persist_writable(p)) {
		mc_persist_failing(m, "opening for writing");
		return MC_ERR_PERSISTENT_FAIL;
	}
	/* The batch is durable in the log even when this fails; later changes are refused until
	 * the file takes writes again, or the log would grow without bound on a failing disk. */
	if (mc_persist_checkpoint_due(p) && mc_persist_checkpoint(p)) {
		mc_persist_failing(m, "checkpoint");
		return 1;
	}
	return 0;
}

static void mc_persist_on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master *m = arg;
	size_t pending = mc_persist_pending(m->persist);
	int64_t now = mc_master_now(m);

	(void)fd;
	(void)what;
	if (mc_persist_attempt(m) == 0) {
		m->persist_failed = 0;
		m->metrics.persist_refusing_ms += now - m->persist_failed_since;
		mc_log_notice("persistence recovered after %.1f s: %zu pending changes written; "
			      "accepting changes again",
			      (double)(now - m->persist_failed_since) / 1000.0, pending);
		return;
	}
	m->persist_backoff_ms *= 2;
	if (m->persist_backoff_ms > MC_PERSIST_RETRY_MAX_MS)
		m->persist_backoff_ms = MC_PERSIST_RETRY_MAX_MS;
	mc_persist_retry_at(m, m->persist_backoff_ms);
}

int mc_master_persist_refusing(const struct mc_master *m)
{
	return m->persist_failed && !m->persist_continue;
}

int mc_master_commit(struct mc_master *m)
{
	int rc;

	if (m->repl)		/* the replicated log makes changes durable (ha_log.c) */
		return m->repl->commit(m);
	if (m->persist == NULL)
		return 0;
	if (m->persist_failed)	/* the retry timer owns the commits */
		rc = mc_persist_pending(m->persist) ? MC_ERR_PERSISTENT_FAIL : 0;
	else if (mc_persist_pending(m->persist) == 0 && !mc_persist_checkpoint_due(m->persist))
		return 0;
	else if ((rc = mc_persist_attempt(m)) > 0)
		rc = 0;		/* committed; only the checkpoint failed */
	return m->persist_continue ? 0 : rc;
}

int mc_master_persist_open(struct mc_master *m)
{
	int rc;

	if (m->cfg.persist_path[0] == '\0')
		return 0;
	m->persist_continue = m->cfg.persist_on_error && !strcmp(m->cfg.persist_on_error, "continue");
	rc = mc_persist_open(m->cfg.persist_path, MC_PERSIST_SYNC_NORMAL, &m->persist);
	if (rc)
		return rc;
	/* The key index serves the background load after a restart, which HA and tenants do
	 * without (master_recover.c).  The load reads the table from the file's pages if the
	 * log is empty: emptied first, before the index's thread may read it. */
	if (!m->cfg.enable_ha && m->ha == NULL && !mc_tenants_enabled(m)) {
		(void)mc_persist_truncate_log(m->persist);
		if (mc_persist_writable(m->persist) && (rc = mc_persist_keys_start(m->persist)) != 0)
			mc_log_warn("persist %s: no key index (%s): after a restart, lookups of keys "
				    "not loaded yet wait for the load's scan", m->cfg.persist_path,
				    rc == -ENOMEM ? "out of memory" : "cannot be kept");
	}
	m->ev_persist_retry = evtimer_new(m->base, mc_persist_on_retry, m);
	return 0;
}

void mc_master_persist_started(struct mc_master *m, int64_t wall_ms)
{
	/* Every start writes: a disk that cannot take writes is found now, not at the first put. */
	mc_persist_set_meta(m->persist, "opened_ms", wall_ms);
	if (m->repl == NULL)	/* with the replicated log, the first batch carries it */
		mc_persist_attempt(m);
}

size_t mc_master_persist_take(struct mc_master *m, struct mc_wbuf *out, size_t max,
			      size_t max_changes)
{
	if (m->persist == NULL)
		return 0;
	if (mc_persist_pending(m->persist)) {
		mc_persist_set_meta(m->persist, "next_replica_id", (int64_t)m->next_replica_id);
		mc_persist_set_meta(m->persist, "next_gen", (int64_t)m->next_gen);
	}
	return mc_persist_take(m->persist, out, max, max_changes);
}

void mc_master_persist_close(struct mc_master *m)
{
	if (m->persist == NULL)
		return;
	if (m->repl)		/* unreplicated changes never reach the file */
		mc_persist_drop_pending(m->persist);
	else if (m->persist_failed)
		mc_log_err("persistence still failing at shutdown: %zu changes not written",
			   mc_persist_pending(m->persist));
	else
		mc_master_commit(m);
	if (m->ev_persist_retry)
		event_free(m->ev_persist_retry);
	m->ev_persist_retry = NULL;
	mc_persist_close(m->persist);
	m->persist = NULL;
}

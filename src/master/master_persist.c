/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's side of crash recovery: what it records in the SQLite store (src/persist) and how
 * it rebuilds its tables from it.
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
 *
 * Reload: segments come back with their allocators, their owners as clients not yet in good
 * standing (with --remount_grace_period_sec to re-mount with the same segment identities),
 * dormant segments as dormant for the rest of their time (their owners Offline), and
 * every object's buffers are re-reserved exactly, in ascending offset order per segment so the
 * rebuild is linear.  Objects that were still being written are not restored: their buffers go
 * to the discard list until put_start_release_timeout_sec after they started, since their
 * writer may still be writing.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "persist/persist.h"
#include "segment/alloc.h"

static int64_t mc_wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

void mc_persist_object_changed(struct mc_master *m, struct mc_object *o)
{
	struct mc_persist_replica reps[MC_RPC_MAX_REPLICAS];
	struct mc_persist_object po;
	uint32_t i, n = 0;

	if (m->persist == NULL)
		return;
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
			reps[n].offset = mc_alloc_block_offset(r->blk);
			reps[n].len = mc_alloc_block_size(r->blk);
		}
		n++;
	}
	memset(&po, 0, sizeof(po));
	po.key = o->key;
	po.key_len = o->key_len;
	po.size = o->size;
	po.flags = o->flags & MC_OBJ_HARD_PIN;
	po.gen = o->gen;
	/* Monotonic times do not survive a restart: store wall-clock ones. */
	po.put_start_ms = mc_wall_ms() - (mc_master_now(m) - o->put_start);
	po.soft_pin_until_ms = o->soft_pin_until ? mc_wall_ms() + (o->soft_pin_until -
								     mc_master_now(m))
						 : 0;
	if (o->writer)
		memcpy(po.writer, o->writer->id.b, 16);
	po.n_replicas = n;
	po.replicas = reps;
	/* A batch that cannot grow (out of memory) fails its commit: nothing to do here. */
	(void)mc_persist_put_object(m->persist, &po);
}

void mc_persist_object_gone(struct mc_master *m, struct mc_object *o)
{
	if (m->persist)
		(void)mc_persist_del_object(m->persist, o->key, o->key_len);
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
		ps.dormant_until_ms = mc_wall_ms() + (seg->dormant_until - mc_master_now(m));
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

/* ---------------------------------------------------------------- reload */

struct mc_load_range {
	struct mc_segment *seg;
	uint64_t off, len;
	struct mc_replica *r;	/* NULL: a discarded range */
	int64_t release_at;
};

struct mc_load {
	struct mc_master *m;
	struct mc_load_range *ranges;
	size_t n, cap;
	uint64_t objects, zombies, dropped, ghosts, dormant;
	int64_t now, wall;
	char **stale;		/* keys whose rows must go once the load is done */
	size_t *stale_len;
	size_t nstale, capstale;
};

static void mc_load_stale(struct mc_load *L, const char *key, size_t len)
{
	if (L->nstale == L->capstale) {
		L->capstale = L->capstale ? L->capstale * 2 : 64;
		L->stale = mc_xrealloc(L->stale, L->capstale * sizeof(*L->stale));
		L->stale_len = mc_xrealloc(L->stale_len, L->capstale * sizeof(*L->stale_len));
	}
	L->stale[L->nstale] = mc_xstrndup(key, len);
	L->stale_len[L->nstale++] = len;
}

static int mc_load_on_segment(void *arg, const struct mc_persist_segment *ps)
{
	struct mc_load *L = arg;
	struct mc_master *m = L->m;
	struct mc_rpc_segment s;
	struct mc_client *c;
	struct mc_uuid cid;

	memcpy(s.id.b, ps->id, 16);
	memcpy(cid.b, ps->client_id, 16);
	s.name = mc_strv_c(ps->name);
	s.base = ps->base;
	s.size = ps->size;
	s.endpoint = mc_strv_c(ps->endpoint);
	s.protocol = mc_strv_c(ps->protocol);
	c = mc_client_get(m, &cid);
	c->ok = 0;		/* must re-mount */
	if (ps->kind == 0 && ps->dormant_until_ms != 0) {
		struct mc_segment *seg;

		/* It was dormant: it stays so for the rest of its time (a past end drops it at
		 * the first tick), and its client is Offline unless another segment says more. */
		if (mc_segment_mount(m, c, &s, ps->token) != 0 ||
		    (seg = mc_segment_lookup(m, &s.id)) == NULL) {
			mc_log_warn("persisted dormant segment %s could not be restored", ps->name);
			return 0;
		}
		mc_segment_make_dormant(m, seg,
					L->now + (ps->dormant_until_ms > L->wall
							  ? ps->dormant_until_ms - L->wall : 0), 1);
		L->dormant++;
		if (c->state == MC_CLIENT_UNTRACKED) {
			c->state = MC_CLIENT_OFFLINE;
			c->state_since = L->now;
		}
		return 0;
	}
	/* Declared Offline remount_grace_period_sec from now unless it re-mounts (pings) first. */
	c->state = MC_CLIENT_ACTIVE;
	c->state_since = L->now;
	c->last_ping = L->now + (m->cfg.remount_grace_period_sec - m->cfg.client_ttl -
				 m->cfg.client_suspicion_ttl_sec) * 1000;
	if (ps->kind == 1) {
		int rc;

		if (mc_disk_mount(m, c, &s.id, s.name, s.endpoint, s.size, &rc) == NULL)
			mc_log_warn("persisted SSD area of %s could not be restored", ps->name);
		return 0;
	}
	if (mc_segment_mount(m, c, &s, ps->token) != 0)
		mc_log_warn("persisted segment %s could not be restored", ps->name);
	return 0;
}

static int mc_load_range_add(struct mc_load *L, struct mc_segment *seg, uint64_t off, uint64_t len,
			     struct mc_replica *r, int64_t release_at)
{
	if (L->n == L->cap) {
		L->cap = L->cap ? L->cap * 2 : 4096;
		L->ranges = mc_xrealloc(L->ranges, L->cap * sizeof(*L->ranges));
	}
	L->ranges[L->n].seg = seg;
	L->ranges[L->n].off = off;
	L->ranges[L->n].len = len;
	L->ranges[L->n].r = r;
	L->ranges[L->n].release_at = release_at;
	L->n++;
	return 0;
}

static int mc_load_on_object(void *arg, const struct mc_persist_object *po)
{
	struct mc_load *L = arg;
	struct mc_master *m = L->m;
	struct mc_segment *segs[MC_RPC_MAX_REPLICAS];
	struct mc_object *o;
	uint32_t i, n = 0, processing = 0;

	if (po->flags & MC_OBJ_GHOST) {
		if (po->key_len == 0 || po->key_len > MC_RPC_MAX_KEY) {
			L->dropped++;
			mc_load_stale(L, po->key, po->key_len);
			return 0;
		}
		mc_ghost_load(m, po->key, po->key_len, po->gen);
		L->ghosts++;
		return 0;
	}
	for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++) {
		const struct mc_persist_replica *pr = &po->replicas[i];
		struct mc_uuid id;

		memcpy(id.b, pr->segment_id, 16);
		if (pr->type == MC_REPLICA_DISK) {
			segs[i] = pr->status == MC_REPLICA_COMPLETE ? m->fs_seg : NULL;
			n += segs[i] != NULL;
			continue;
		}
		if (pr->type == MC_REPLICA_LOCAL_DISK) {
			segs[i] = mc_disk_find(m, &id);
			if (segs[i] && pr->status == MC_REPLICA_COMPLETE && pr->offset != 0)
				n++;
			else
				segs[i] = NULL;
			continue;
		}
		segs[i] = mc_segment_lookup(m, &id);	/* mounted or dormant */
		if (segs[i] && pr->offset + pr->len <= segs[i]->size &&
		    pr->status == MC_REPLICA_COMPLETE)
			n++;
		if (pr->status == MC_REPLICA_PROCESSING)
			processing++;
	}
	if (processing && n > 0) {
		/* A promotion was filling a memory replica: park that range, keep the rest. */
		for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++)
			if (segs[i] && po->replicas[i].status == MC_REPLICA_PROCESSING) {
				mc_load_range_add(L, segs[i], po->replicas[i].offset,
						  po->replicas[i].len, NULL,
						  L->now + m->cfg.put_start_release_timeout_sec * 1000);
				segs[i] = NULL;
			}
	} else if (processing) {
		/* A put in flight when the master died: keep its buffers out of use until its
		 * writer can no longer be writing, then free them.  The object is forgotten. */
		int64_t release = po->put_start_ms + m->cfg.put_start_release_timeout_sec * 1000;

		for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++)
			if (segs[i])
				mc_load_range_add(L, segs[i], po->replicas[i].offset,
						  po->replicas[i].len, NULL,
						  L->now + (release - L->wall));
		L->zombies++;
		mc_load_stale(L, po->key, po->key_len);
		return 0;
	}
	if (n == 0 || po->key_len == 0 || po->key_len > MC_RPC_MAX_KEY) {
		L->dropped++;
		mc_load_stale(L, po->key, po->key_len);
		return 0;
	}
	o = mc_object_insert(&m->objects, po->key, po->key_len, n);
	o->size = po->size;
	o->gen = po->gen;
	o->put_start = L->now - (L->wall - po->put_start_ms);
	if (po->flags & MC_OBJ_HARD_PIN) {
		o->flags |= MC_OBJ_HARD_PIN;
		mc_object_lru_unlink(&m->objects, o);
	}
	if (po->soft_pin_until_ms > L->wall) {
		o->flags |= MC_OBJ_SOFT_PIN;
		m->objects.soft_pinned++;
		o->soft_pin_until = L->now + (po->soft_pin_until_ms - L->wall);
	}
	{
		struct mc_uuid wid;

		memcpy(wid.b, po->writer, 16);
		o->writer = mc_client_get(m, &wid);
	}
	n = 0;
	for (i = 0; i < po->n_replicas && i < MC_RPC_MAX_REPLICAS; i++) {
		struct mc_replica *r;

		if (segs[i] == NULL)
			continue;
		if (po->replicas[i].type == MC_REPLICA_DISK) {
			r = mc_object_replica(o, n++);
			r->id = po->replicas[i].id;
			mc_fs_attach(m, r, po->size);
			continue;
		}
		if (po->replicas[i].type == MC_REPLICA_LOCAL_DISK) {
			r = mc_object_replica(o, n++);
			r->id = po->replicas[i].id;
			mc_disk_replica_attach(m, segs[i], r, po->replicas[i].offset, po->size);
			continue;
		}
		if (po->replicas[i].offset + po->replicas[i].len > segs[i]->size ||
		    po->replicas[i].status != MC_REPLICA_COMPLETE)
			continue;
		r = mc_object_replica(o, n++);
		r->id = po->replicas[i].id;
		r->status = MC_REPLICA_COMPLETE;
		mc_load_range_add(L, segs[i], po->replicas[i].offset, po->replicas[i].len, r, 0);
	}
	L->objects++;
	return 0;
}

static int mc_load_range_cmp(const void *a, const void *b)
{
	const struct mc_load_range *x = a, *y = b;

	if (x->seg != y->seg)
		return x->seg < y->seg ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Re-reserve every persisted range exactly, per segment in ascending order. */
static void mc_load_reserve(struct mc_load *L)
{
	struct mc_master *m = L->m;
	size_t i;

	if (L->n == 0)
		return;
	qsort(L->ranges, L->n, sizeof(*L->ranges), mc_load_range_cmp);
	for (i = 0; i < L->n; i++) {
		struct mc_load_range *x = &L->ranges[i];
		struct mc_alloc_block *blk;

		if (mc_alloc_reserve_at(x->seg->alloc, x->off, x->len, &blk) != 0) {
			/* Overlapping or out-of-range rows: never hand a range out twice. */
			if (x->r) {
				mc_log_warn("persisted replica at offset %llu of %s overlaps another: "
					    "dropping it",
					    (unsigned long long)x->off, x->seg->name);
				x->r->seg = NULL;
				x->r->status = MC_REPLICA_REMOVED;
			}
			continue;
		}
		if (x->seg->status != MC_SEG_DORMANT)	/* dormant bytes are not counted */
			m->allocated += mc_alloc_block_size(blk);
		if (x->r == NULL) {
			struct mc_discard *d = mc_xcalloc(1, sizeof(*d));

			d->seg = x->seg;
			d->blk = blk;
			d->len = mc_alloc_block_size(blk);
			d->release_at = x->release_at;
			d->next = m->discards;
			m->discards = d;
			continue;
		}
		x->r->seg = x->seg;
		x->r->blk = blk;
		x->r->seg_prev = NULL;
		x->r->seg_next = x->seg->reps;
		if (x->seg->reps)
			x->seg->reps->seg_prev = x->r;
		x->seg->reps = x->r;
		x->seg->nreps++;
	}
}

int mc_master_persist_open(struct mc_master *m)
{
	struct mc_load L = { .m = m };
	struct mc_object *o;
	size_t pos = 0;
	int rc;

	if (m->cfg.persist_path[0] == '\0')
		return 0;
	m->persist_continue = m->cfg.persist_on_error && !strcmp(m->cfg.persist_on_error, "continue");
	rc = mc_persist_open(m->cfg.persist_path, MC_PERSIST_SYNC_NORMAL, &m->persist);
	if (rc)
		return rc;
	m->ev_persist_retry = evtimer_new(m->base, mc_persist_on_retry, m);
	L.now = mc_master_now(m);
	L.wall = mc_wall_ms();
	/* A database that has issued generations knows every object since its epoch: nothing
	 * older is adopted.  A new one (or one from before generations) starts adopting. */
	if (mc_persist_get_meta(m->persist, "gen_epoch") > 0) {
		uint64_t next = (uint64_t)mc_persist_get_meta(m->persist, "next_gen");

		m->gen_epoch = (uint64_t)mc_persist_get_meta(m->persist, "gen_epoch");
		if (next > m->next_gen)
			m->next_gen = next;
		m->adopt_open = 0;
	} else {
		mc_persist_set_meta(m->persist, "gen_epoch", (int64_t)m->gen_epoch);
	}
	/* Loading records nothing: the database already holds it. */
	{
		struct mc_persist *p = m->persist;

		m->persist = NULL;
		rc = mc_persist_load(p, mc_load_on_segment, mc_load_on_object, &L);
		m->persist = p;
	}
	if (rc) {
		free(L.ranges);
		for (pos = 0; pos < L.nstale; pos++)
			free(L.stale[pos]);
		free(L.stale);
		free(L.stale_len);
		return rc;
	}
	mc_load_reserve(&L);
	free(L.ranges);
	for (pos = 0; pos < L.nstale; pos++) {
		mc_persist_del_object(m->persist, L.stale[pos], L.stale_len[pos]);
		free(L.stale[pos]);
	}
	free(L.stale);
	free(L.stale_len);
	pos = 0;
	/* Objects whose every replica was dropped as overlapping. */
	while ((o = mc_object_next(&m->objects, &pos)) != NULL) {
		uint32_t i, live = 0;

		for (i = 0; i < o->nrep; i++)
			live += mc_object_replica(o, i)->seg != NULL;
		if (live == 0) {
			mc_persist_object_gone(m, o);
			mc_object_erase(&m->objects, o);
			continue;
		} else if (live < o->nrep) {
			mc_object_compact(o);
		}
		if (!mc_object_has_memory(o))
			mc_object_lru_unlink(&m->objects, o);
	}
	m->next_replica_id = (uint64_t)mc_persist_get_meta(m->persist, "next_replica_id");
	if (m->next_replica_id == 0)
		m->next_replica_id = 1;
	/* Every start writes: a disk that cannot take writes is found now, not at the first put. */
	mc_persist_set_meta(m->persist, "opened_ms", L.wall);
	mc_persist_attempt(m);
	mc_log_notice("recovered %u segments (and %llu dormant), %llu objects and %llu SSD ghosts "
		      "from %s (%llu unfinished puts quarantined, %llu unusable rows dropped)",
		      m->nsegs, (unsigned long long)L.dormant, (unsigned long long)L.objects,
		      (unsigned long long)L.ghosts,
		      m->cfg.persist_path, (unsigned long long)L.zombies,
		      (unsigned long long)L.dropped);
	return 0;
}

void mc_master_persist_close(struct mc_master *m)
{
	if (m->persist == NULL)
		return;
	if (m->persist_failed)
		mc_log_err("persistence still failing at shutdown: %zu changes not written",
			   mc_persist_pending(m->persist));
	else
		mc_master_commit(m);
	event_free(m->ev_persist_retry);
	m->ev_persist_retry = NULL;
	mc_persist_close(m->persist);
	m->persist = NULL;
}

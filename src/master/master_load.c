/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's reload of its objects in the background, while it serves (master_recover.c has
 * loaded the segments, clients and meta values before the RPC port opens).
 *
 * Phases:
 *   scanning   the loader thread (src/persist/persist_loader.c) reads every object row into
 *              memory (in generation order), sorts references to them by their keys' hashes
 *              (of two rows of one key the newer wins: the older is deleted once loaded) and
 *              the complete memory replicas by segment and offset;
 *   reserving  the loop re-reserves those ranges in that order (constant time each), in slices,
 *              reading nothing but the sorted ranges; the loader thread then copies each
 *              block to its row's slot (scattering, writes in another order, off the loop);
 *   inserting  the loop puts the objects into the table with their blocks, a chunk of rows a
 *              slice;
 *   done       quarantined ranges (puts in flight at the crash) are reserved, stale rows go, the
 *              tasks, drain jobs and tenants are recovered (m->recover_more), the log line.
 * A row is put into the table complete: an object visible to a reader always has its ranges.
 *
 * While loading (m->load set), requests go through mc_master_load_gate before they run:
 *   - Ping, ServiceReady, GetFsdir, GetStorageConfig and GetAllSegments run, and so does a
 *     ReMountSegment that only names segments its client has mounted (or none);
 *   - GetReplicaList, ExistKey, ProbeKey and their batch forms (default tenant) run once every
 *     key is in the table or known not to be in the file: while scanning, a key not loaded yet
 *     is asked of the loader thread (the file has no index on the key: it answers once its
 *     scan has read every row; reply deferred); while reserving and scattering they wait (a
 *     fraction of a second); while inserting, the row is found in memory (by its key's hash)
 *     and put into the table at once;
 *   - everything else (puts, removes, remove_all, mounts, tasks, tenants' requests, ...) waits
 *     until the load is done.
 * A request that waits is parked alone (rpc_server.c): its connection reads on, the requests
 * behind it run (a ping, a read), and it is answered by its req_id once it may run (a lookup
 * waiting for the file as soon as its answer is in, the rest at the end of the load, each
 * connection's in their order); a parked SetTenant holds back everything behind it.  The gate
 * says which of the two a request waits for (MC_LOAD_WAIT_KEYS, MC_LOAD_WAIT_END): the steps of
 * the load (mc_load_resume) look again only at the lookups, whatever waits for the end.
 * GetAllSegments and the ReMountSegment above would not hold anything else back if they
 * waited, but their answers do not depend on the objects, and a client that re-mounts after
 * the restart would otherwise wait the whole load for it (and give up past its deadline).
 * Housekeeping waits too: the tick's work (liveness, expiries, tasks, drains, dynamic
 * replication) and eviction resume when the load is done, and no range is allocated before
 * (mc_try_segment), so nothing is handed out that a row not yet loaded holds.  The metrics
 * count what is loaded so far.  A stop during the load ends the loader thread at once.
 *
 * Where later records would apply: mc_load_finish runs once every row is in the table, before
 * anything that waited runs; changes recorded apart from the rows (a log of later changes,
 * replayed in order) go there.  Such a log must also be seen by the lookups while scanning: a
 * key absent from the rows may be in it (mc_load_key_waits would then wait for the end).
 * Single-threaded: the master's reactor thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "master/master_load.h"
#include "master/ops.h"
#include "persist/persist.h"
#include "segment/alloc.h"

#define MC_LOAD_RESERVE_SLICE 262144	/* ranges re-reserved per turn of the loop */
#define MC_LOAD_AHEAD 8			/* rows whose index line is fetched ahead */
/* A row put into the table ahead of its turn (its flags in the loader's copy only). */
#define MC_LOAD_TAKEN (1u << 31)

enum { MC_ASK_ASKED = 1, MC_ASK_FOUND, MC_ASK_ABSENT, MC_ASK_LATER };

/* A key looked up in the file while scanning. */
struct mc_ask {
	char *key;
	size_t len;
	uint32_t hash;
	int state;
};

enum { MC_LOAD_SCANNING, MC_LOAD_RESERVING, MC_LOAD_SCATTERING, MC_LOAD_INSERTING };

struct mc_master_load {
	struct mc_master *m;
	struct mc_load L;
	struct mc_persist_loader *ldr;
	struct event *ev_fd, *ev_step;
	int phase;
	int64_t t0;
	struct mc_ask *asks;		/* open addressing, cap a power of two */
	size_t nasks, capasks;
	struct mc_persist_rows *chunks;
	size_t nchunks, chunk, row;	/* inserting: the next row */
	struct mc_persist_keyref *keyrefs;	/* the rows by their keys' hashes */
	size_t nkeyrefs;
	struct mc_persist_range *ranges;
	size_t nranges, range;		/* reserving: the next range */
	struct mc_segment **segs;	/* by the loader's segment index */
	uint32_t nsegs;
};

/* Connections whose request waited read on (rpc_server.c, on its event: after this turn). */
static void mc_load_resume(struct mc_master *m)
{
	if (m->ev_load_resume)
		event_active(m->ev_load_resume, EV_TIMEOUT, 0);
}

/* ------------------------------------------------------------ keys asked of the file */

static struct mc_ask *mc_ask_find(struct mc_master_load *ld, const char *key, size_t len,
				  uint32_t hash)
{
	size_t i;

	if (ld->capasks == 0)
		return NULL;
	for (i = hash & (ld->capasks - 1); ld->asks[i].key; i = (i + 1) & (ld->capasks - 1))
		if (ld->asks[i].hash == hash && ld->asks[i].len == len &&
		    !memcmp(ld->asks[i].key, key, len))
			return &ld->asks[i];
	return NULL;
}

static struct mc_ask *mc_ask_add(struct mc_master_load *ld, const char *key, size_t len,
				 uint32_t hash)
{
	size_t i;

	if ((ld->nasks + 1) * 2 > ld->capasks) {
		struct mc_ask *old = ld->asks;
		size_t oldcap = ld->capasks, j;

		ld->capasks = oldcap ? oldcap * 2 : 64;
		ld->asks = mc_xcalloc(ld->capasks, sizeof(*ld->asks));
		for (j = 0; j < oldcap; j++) {
			if (old[j].key == NULL)
				continue;
			for (i = old[j].hash & (ld->capasks - 1); ld->asks[i].key;
			     i = (i + 1) & (ld->capasks - 1))
				;
			ld->asks[i] = old[j];
		}
		free(old);
	}
	for (i = hash & (ld->capasks - 1); ld->asks[i].key; i = (i + 1) & (ld->capasks - 1))
		;
	ld->asks[i] = (struct mc_ask){ mc_xmalloc(len ? len : 1), len, hash, MC_ASK_ASKED };
	memcpy(ld->asks[i].key, key, len);
	ld->nasks++;
	return &ld->asks[i];
}

static void mc_asks_free(struct mc_master_load *ld)
{
	size_t i;

	for (i = 0; i < ld->capasks; i++)
		free(ld->asks[i].key);
	free(ld->asks);
	ld->asks = NULL;
	ld->nasks = ld->capasks = 0;
}

/* ------------------------------------------------------------ rows */

/* Re-reserve the complete memory ranges of po out of order (a row answered while scanning: few
 * ranges are reserved yet, so it is cheap), into blks. */
static void mc_load_reserve_row(struct mc_master_load *ld, const struct mc_persist_object *po,
				void **blks)
{
	struct mc_master *m = ld->m;
	uint32_t i;

	for (i = 0; i < po->n_replicas; i++) {
		const struct mc_persist_replica *pr = &po->replicas[i];
		struct mc_segment *seg;
		struct mc_uuid id;

		memcpy(id.b, pr->segment_id, 16);
		if (pr->type != MC_REPLICA_MEMORY || pr->status != MC_REPLICA_COMPLETE ||
		    (seg = mc_segment_lookup(m, &id)) == NULL || pr->offset + pr->len > seg->size)
			continue;
		if (mc_alloc_reserve_at(seg->alloc, pr->offset, pr->len) != 0) {
			mc_log_warn("persisted replica at offset %llu of %s overlaps another: "
				    "dropping it", (unsigned long long)pr->offset, seg->name);
			continue;
		}
		if (seg->status != MC_SEG_DORMANT)
			m->allocated += mc_alloc_round(pr->len);
		blks[i] = MC_LOAD_HELD;
	}
}

/* Put row i of chunk c into the table (loading records nothing: the file has it). */
static void mc_load_put_row(struct mc_master_load *ld, struct mc_persist_rows *c, size_t i)
{
	struct mc_persist_object *po = &c->rows[i];
	void **blks = c->user + (po->replicas - c->reps);
	struct mc_persist *p = ld->m->persist;

	ld->m->persist = NULL;
	if (po->flags & MC_LOAD_TAKEN)
		mc_load_release_unused(&ld->L, po, blks);
	else
		mc_load_row(&ld->L, po, blks);
	ld->m->persist = p;
	po->flags |= MC_LOAD_TAKEN;
}

/* The newest row of key among the rows not inserted yet (chunks from ld->chunk on), or NULL. */
static struct mc_persist_object *mc_load_search(struct mc_master_load *ld, const char *key,
						size_t len, struct mc_persist_rows **chunk,
						size_t *row)
{
	struct mc_persist_object *o;
	size_t c;

	o = mc_persist_rows_find(ld->chunks, ld->chunk, ld->keyrefs, ld->nkeyrefs, key, len, &c,
				 row);
	if (o)
		*chunk = &ld->chunks[c];
	return o;
}

/* ------------------------------------------------------------ the gate */

/* 1 if the request must wait for key (looked up in the file if need be), else 0. */
static int mc_load_key_waits(struct mc_master_load *ld, const char *key, size_t len)
{
	struct mc_master *m = ld->m;
	struct mc_persist_rows *c;
	struct mc_ask *a;
	uint32_t hash;
	size_t row;

	if (mc_object_find(&m->objects, key, len))
		return 0;
	switch (ld->phase) {
	case MC_LOAD_SCANNING:
		hash = mc_object_hash(key, len);
		a = mc_ask_find(ld, key, len, hash);
		if (a)
			return a->state == MC_ASK_ASKED || a->state == MC_ASK_LATER;
		a = mc_ask_add(ld, key, len, hash);
		if (mc_persist_loader_query(ld->ldr, key, len, NULL) != 0)
			a->state = MC_ASK_LATER;	/* found when its row is inserted */
		return 1;
	case MC_LOAD_RESERVING:
	case MC_LOAD_SCATTERING:
		return 1;
	default:
		if (mc_load_search(ld, key, len, &c, &row) &&
		    !(c->rows[row].flags & MC_LOAD_TAKEN))
			mc_load_put_row(ld, c, row);
		return 0;
	}
}

/* 1 if a ReMountSegment must wait: unless it names only segments its client has mounted now (a
 * refresh that changes no range and no byte count: a client re-mounts after the restart), or
 * none.  Segments are in before the port opens, so that is known while loading. */
static int mc_load_remount_waits(struct mc_master *m, const uint8_t *body, uint32_t len)
{
	struct mc_rbuf r;
	struct mc_uuid cid;
	uint32_t n, i;

	mc_rbuf_init(&r, body, len);
	mc_rpc_get_uuid(&r, &cid);
	n = mc_rbuf_count(&r, 64, 40);
	for (i = 0; i < n && !r.err; i++) {
		struct mc_rpc_segment s;
		struct mc_segment *seg;

		mc_rpc_get_segment(&r, &s);
		if (r.err)
			break;
		seg = mc_segment_lookup(m, &s.id);
		if (seg == NULL || seg->status == MC_SEG_DORMANT || seg->client == NULL ||
		    memcmp(seg->client->id.b, cid.b, 16) != 0 || seg->size != s.size)
			return 1;
	}
	return r.err != 0;
}

int mc_master_load_gate(struct mc_master *m, uint16_t opcode, const uint8_t *body, uint32_t len,
			uint16_t tenant)
{
	struct mc_master_load *ld = m->load;
	struct mc_rbuf r;
	uint32_t n, i;
	int wait = 0;

	switch (opcode) {
	case MC_OP_PING:
	case MC_OP_SERVICE_READY:
	case MC_OP_GET_FSDIR:
	case MC_OP_GET_STORAGE_CONFIG:
	case MC_OP_GET_ALL_SEGMENTS:	/* segments are in before the port opens */
		return 0;
	case MC_OP_REMOUNT_SEGMENT:	/* segments change only after the load */
		return mc_load_remount_waits(m, body, len) ? MC_LOAD_WAIT_END : 0;
	case MC_OP_GET_REPLICA_LIST:
	case MC_OP_BATCH_GET_REPLICA_LIST:
	case MC_OP_EXIST_KEY:
	case MC_OP_BATCH_EXIST_KEY:
	case MC_OP_PROBE_KEY:
	case MC_OP_BATCH_PROBE_KEY:
		if (tenant != 0)	/* tenants are recovered with the table */
			return MC_LOAD_WAIT_END;
		break;
	default:
		return MC_LOAD_WAIT_END;
	}
	mc_rbuf_init(&r, body, len);
	if (opcode == MC_OP_BATCH_PROBE_KEY) {
		(void)mc_rbuf_u8(&r);
		(void)mc_rbuf_u32(&r);
	}
	n = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
	for (i = 0; i < n && !r.err; i++) {
		struct mc_strv k = mc_rpc_get_strv(&r, MC_RPC_MAX_KEY);

		if (!r.err)
			wait |= mc_load_key_waits(ld, k.p, k.n);
	}
	return wait ? MC_LOAD_WAIT_KEYS : 0;	/* a malformed body runs: its handler says so */
}

/* ------------------------------------------------------------ the phases */

static void mc_load_answers(struct mc_master_load *ld, struct mc_persist_answer *answers)
{
	struct mc_master *m = ld->m;
	struct mc_persist_answer *a;

	for (a = answers; a; a = a->next) {
		struct mc_ask *ask = mc_ask_find(ld, a->key, a->key_len,
						 mc_object_hash(a->key, a->key_len));

		if (ask == NULL)
			continue;
		if (a->rc < 0) {
			ask->state = MC_ASK_LATER;
			continue;
		}
		ask->state = a->rc == 0 ? MC_ASK_FOUND : MC_ASK_ABSENT;
		if (a->rc == 0 && !mc_object_find(&m->objects, a->key, a->key_len)) {
			mc_load_reserve_row(ld, &a->rows.rows[0], a->rows.user);
			mc_load_put_row(ld, &a->rows, 0);
		}
	}
	mc_persist_answer_free(answers);
}

/* Rows read by the scan (a chunk per range of generations is not full). */
static size_t mc_load_nrows(const struct mc_master_load *ld)
{
	size_t i, n = 0;

	for (i = 0; i < ld->nchunks; i++)
		n += ld->chunks[i].n;
	return n;
}

/* The scan is done: rows answered while scanning are taken; resolve the segments. */
static void mc_load_scanned(struct mc_master_load *ld)
{
	const uint8_t(*segids)[16];
	size_t i;

	mc_persist_loader_result(ld->ldr, &ld->chunks, &ld->nchunks, &ld->keyrefs, &ld->nkeyrefs,
				 &ld->ranges, &ld->nranges, &segids, &ld->nsegs);
	for (i = 0; i < ld->capasks; i++) {
		struct mc_persist_rows *c;
		size_t row;

		if (ld->asks[i].key && ld->asks[i].state == MC_ASK_FOUND &&
		    mc_load_search(ld, ld->asks[i].key, ld->asks[i].len, &c, &row))
			c->rows[row].flags |= MC_LOAD_TAKEN;
	}
	mc_asks_free(ld);
	/* The index gets its final size now: no resize while the rows go in. */
	mc_object_table_reserve(&ld->m->objects, ld->m->objects.count + mc_load_nrows(ld));
	ld->segs = mc_xcalloc(ld->nsegs ? ld->nsegs : 1, sizeof(*ld->segs));
	for (i = 0; i < ld->nsegs; i++) {
		struct mc_uuid id;

		memcpy(id.b, segids[i], 16);
		ld->segs[i] = mc_segment_lookup(ld->m, &id);
	}
	ld->phase = MC_LOAD_RESERVING;
	mc_log_info("loading %s: %zu rows read in %.2f s; re-reserving %zu ranges",
		    ld->m->cfg.persist_path, mc_load_nrows(ld),
		    (double)(mc_master_now(ld->m) - ld->t0) / 1000.0, ld->nranges);
}

/* The row whose replica is entry rep of chunk c. */
static const struct mc_persist_object *mc_load_row_of(const struct mc_persist_rows *c, size_t rep)
{
	size_t a = 0, b = c->n;

	while (b - a > 1) {
		size_t mid = a + (b - a) / 2;

		if ((size_t)(c->rows[mid].replicas - c->reps) <= rep)
			a = mid;
		else
			b = mid;
	}
	return &c->rows[a];
}

static void mc_load_reserve_slice(struct mc_master_load *ld)
{
	struct mc_master *m = ld->m;
	size_t end = ld->range + MC_LOAD_RESERVE_SLICE;

	if (end > ld->nranges)
		end = ld->nranges;
	for (; ld->range < end; ld->range++) {
		struct mc_persist_range *e = &ld->ranges[ld->range];
		struct mc_segment *seg = ld->segs[e->order >> 48];
		uint64_t off = (e->order & ((1ull << 48) - 1)) << 6;

		/* Only the range itself is read here: the rows are in another order. */
		if (seg == NULL || off + e->len > seg->size)
			continue;
		if (mc_alloc_reserve_at(seg->alloc, off, e->len) != 0) {
			/* A row put in ahead has its ranges already; anything else overlaps. */
			if (!(mc_load_row_of(&ld->chunks[e->chunk], e->rep)->flags & MC_LOAD_TAKEN))
				mc_log_warn("persisted replica at offset %llu of %s overlaps "
					    "another: dropping it",
					    (unsigned long long)off, seg->name);
			continue;
		}
		if (seg->status != MC_SEG_DORMANT)
			m->allocated += mc_alloc_round(e->len);
		e->blk = MC_LOAD_HELD;
	}
	if (ld->range == ld->nranges) {	/* the blocks go to their rows' slots */
		ld->phase = MC_LOAD_SCATTERING;
		mc_persist_loader_scatter(ld->ldr);
	}
}

/* One chunk of rows; 1 when every row is in. */
static int mc_load_insert_slice(struct mc_master_load *ld)
{
	struct mc_persist_rows *c;

	if (ld->chunk == ld->nchunks) {
		mc_persist_loader_drop_keyrefs(ld->ldr);
		ld->keyrefs = NULL;
		ld->nkeyrefs = 0;
		return 1;
	}
	c = &ld->chunks[ld->chunk];
	for (; ld->row < c->n; ld->row++) {
		const struct mc_persist_object *po = &c->rows[ld->row];

		/* The index's line for a row a few ahead: its miss overlaps these inserts. */
		if (ld->row + MC_LOAD_AHEAD < c->n)
			mc_object_prefetch_key(&ld->m->objects, c->rows[ld->row + MC_LOAD_AHEAD].key,
					       c->rows[ld->row + MC_LOAD_AHEAD].key_len);
		if (po->flags & MC_PERSIST_ROW_OLDER)	/* a newer row of its key is loaded */
			mc_load_stale(&ld->L, po->key, po->key_len, po->row);
		else
			mc_load_put_row(ld, c, ld->row);
	}
	mc_persist_rows_fini(c);
	ld->chunk++;
	ld->row = 0;
	return 0;
}

static void mc_master_load_free(struct mc_master_load *ld)
{
	mc_persist_loader_free(ld->ldr);
	if (ld->ev_fd)
		event_free(ld->ev_fd);
	if (ld->ev_step)
		event_free(ld->ev_step);
	mc_asks_free(ld);
	free(ld->segs);
	free(ld);
}

/* Every row is in: the rest of the reload, then what waited runs. */
static void mc_load_finish(struct mc_master_load *ld)
{
	struct mc_master *m = ld->m;
	char how[64];

	mc_load_reserve_discards(&ld->L);
	/* Later changes recorded apart from the rows would be applied here, in order. */
	snprintf(how, sizeof(how), " in the background in %.2f s",
		 (double)(mc_master_now(m) - ld->t0) / 1000.0);
	mc_load_done(&ld->L, how);
	m->load = NULL;
	mc_master_load_free(ld);
	if (m->recover_more && m->recover_more(m)) {
		mc_log_err("cannot recover the tasks, drain jobs or tenants from %s: stopping",
			   m->cfg.persist_path);
		m->load_failed = 1;
		event_base_loopbreak(m->base);
		return;
	}
	mc_master_commit(m);
	mc_load_resume(m);
}

static void mc_load_on_step(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master_load *ld = arg;

	(void)fd;
	(void)what;
	if (ld->phase == MC_LOAD_RESERVING) {
		mc_load_reserve_slice(ld);
		if (ld->phase == MC_LOAD_SCATTERING)
			return;		/* the loader thread wakes us (mc_load_on_fd) */
	} else if (mc_load_insert_slice(ld)) {
		mc_load_finish(ld);
		return;
	}
	event_active(ld->ev_step, EV_TIMEOUT, 0);	/* after the other events' turn */
}

static void mc_load_on_fd(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master_load *ld = arg;
	struct mc_persist_answer *answers;
	int state;

	(void)fd;
	(void)what;
	state = mc_persist_loader_poll(ld->ldr, &answers);
	if (ld->phase == MC_LOAD_SCANNING) {
		mc_load_answers(ld, answers);
		answers = NULL;
	}
	mc_persist_answer_free(answers);
	if (state < 0) {
		mc_log_err("cannot load the objects of %s: stopping", ld->m->cfg.persist_path);
		ld->m->load_failed = 1;
		event_base_loopbreak(ld->m->base);
		return;
	}
	if (state == 1 && ld->phase == MC_LOAD_SCANNING) {
		mc_load_scanned(ld);
		event_active(ld->ev_step, EV_TIMEOUT, 0);
	}
	if (state == 2 && ld->phase == MC_LOAD_SCATTERING) {
		mc_persist_loader_drop_ranges(ld->ldr);
		ld->ranges = NULL;
		ld->phase = MC_LOAD_INSERTING;	/* lookups are answered from here on */
		event_active(ld->ev_step, EV_TIMEOUT, 0);
	}
	mc_load_resume(ld->m);
}

/* Take over *L (segments loaded) and start loading the objects in the background: 0, or an
 * error (nothing started; they load at once). */
static int mc_master_load_start(struct mc_master *m, const struct mc_load *L)
{
	struct mc_master_load *ld = mc_xcalloc(1, sizeof(*ld));
	int rc;

	ld->m = m;
	ld->L = *L;
	ld->t0 = mc_master_now(m);
	rc = mc_persist_loader_start(m->cfg.persist_path, &ld->ldr);
	if (rc == 0) {
		ld->ev_fd = event_new(m->base, mc_persist_loader_fd(ld->ldr), EV_READ | EV_PERSIST,
				      mc_load_on_fd, ld);
		ld->ev_step = event_new(m->base, -1, 0, mc_load_on_step, ld);
		if (ld->ev_fd == NULL || ld->ev_step == NULL || event_add(ld->ev_fd, NULL) != 0)
			rc = -ENOMEM;
	}
	if (rc) {
		mc_master_load_free(ld);
		return rc;
	}
	m->load = ld;
	mc_log_notice("recovered %u segments from %s; loading the objects in the background",
		      m->nsegs, m->cfg.persist_path);
	return 0;
}

int mc_master_recover_in_background(struct mc_master *m)
{
	return mc_master_recover_bg(m, mc_master_load_start);
}

void mc_master_load_stop(struct mc_master *m)
{
	struct mc_master_load *ld = m->load;

	if (ld == NULL)
		return;
	m->load = NULL;
	mc_log_notice("stopping while loading %s: %llu objects loaded",
		      m->cfg.persist_path, (unsigned long long)ld->L.objects);
	if (m->exiting) {
		/* The rows read so far (gigabytes at tens of millions of objects) go with the
		 * process, as the table does: freeing them chunk by chunk only delays the exit.
		 * They stay reachable from m. */
		if (ld->ev_fd)
			event_free(ld->ev_fd);
		if (ld->ev_step)
			event_free(ld->ev_step);
		ld->ev_fd = ld->ev_step = NULL;
		mc_persist_loader_halt(ld->ldr);
		m->load_left = ld;
		return;
	}
	mc_load_fini(&ld->L);
	mc_master_load_free(ld);
}

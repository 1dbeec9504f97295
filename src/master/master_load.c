/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's reload of its objects in the background, while it serves (master_recover.c has
 * loaded the segments, clients and meta values before the RPC port opens).
 *
 * Phases:
 *   scanning   the loader threads (src/persist/persist_loader.c) read the object rows in parts,
 *              from the last generations to the first; the loop takes each part once it is read
 *              and puts its rows into the table, newest first, a chunk a turn: so a key's newest
 *              row goes in first and its older rows are found in the table and deleted once
 *              loaded (mc_load_row).  Each object's memory replicas keep their segment and
 *              offset, pending (not re-reserved), and their ranges are listed;
 *   reserving  the loop re-reserves the ranges per segment in ascending offset order (constant
 *              time each, adjacent ones at once), a bucket of them sorted at a time
 *              (load_ranges.c), in slices; a range that overlaps another (only a damaged file
 *              has such rows) is dropped and its object fixed (mc_load_fix_lost);
 *   done       quarantined ranges (puts in flight at the crash) are reserved, stale rows go, the
 *              tasks, drain jobs and tenants are recovered (m->recover_more), the log line.
 * An object is visible to a reader only with all its ranges reserved: a lookup that finds one
 * still pending reserves its ranges at once (out of order, cheap while few are reserved), or,
 * while the ranges are being reserved in order, waits for that (a fraction of a second).
 *
 * While loading (m->load set), requests go through mc_master_load_gate before they run:
 *   - Ping, ServiceReady, GetFsdir, GetStorageConfig and GetAllSegments run, and so does a
 *     ReMountSegment that only names segments its client has mounted (or none);
 *   - GetReplicaList, ExistKey, ProbeKey and their batch forms (default tenant) run once every
 *     key is in the table (its ranges reserved) or known not to be in the file: while
 *     scanning, a key not in the table yet is asked of the loader thread (through the key
 *     index; the file has no index on the key), whose answer is put into the table at once;
 *     without the key index it waits for the scan's end; after the scan a key not in the
 *     table is not in the file;
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
 * (mc_try_segment), so nothing is handed out that a row not yet loaded, or a range not yet
 * re-reserved, holds.  The metrics count what is loaded so far.  A stop during the load ends
 * the loader's threads at once.
 *
 * Where later records would apply: mc_load_finish runs once every row is in the table, before
 * anything that waited runs; changes recorded apart from the rows (a log of later changes,
 * replayed in order) go there.  Such a log must also be seen by the lookups while scanning: a
 * key absent from the rows may be in it (mc_load_key_waits would then wait for the end).
 * Single-threaded: the master's reactor thread.
 */
#include <errno.h>
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
/* Objects whose ranges a lookup reserves out of order: each costs a walk of the free ranges,
 * which the earlier ones add to, and of its range's bucket; past these, lookups wait for the
 * reservation in order. */
#define MC_LOAD_EARLY_MAX 4096

enum { MC_ASK_ASKED = 1, MC_ASK_FOUND, MC_ASK_ABSENT, MC_ASK_LATER };

/* A key looked up in the file while scanning. */
struct mc_ask {
	char *key;
	size_t len;
	uint32_t hash;
	int state;
};

enum { MC_LOAD_SCANNING, MC_LOAD_RESERVING };

struct mc_master_load {
	struct mc_master *m;
	struct mc_load L;
	struct mc_persist_loader *ldr;
	struct event *ev_fd, *ev_step;
	int phase;
	int waiting;			/* scanning: the step waits for the loader's fd */
	int64_t t0;
	struct mc_ask *asks;		/* open addressing, cap a power of two */
	size_t nasks, capasks;
	/* The part being put in: its chunks, from the last (chunk: how many are left) and in
	 * each from its last row (row: how many are left). */
	struct mc_persist_rows *chunks;
	size_t nchunks, chunk, row;
	size_t early;			/* objects reserved out of order */
	uint64_t rows;			/* rows taken */
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

/* ------------------------------------------------------------ the gate */

/* 1 if a lookup of key must wait (asked of the file if need be), else 0 (the key's object, if
 * any, has its ranges reserved). */
static int mc_load_key_waits(struct mc_master_load *ld, const char *key, size_t len)
{
	struct mc_master *m = ld->m;
	struct mc_object *o = mc_object_find(&m->objects, key, len);
	struct mc_ask *a;
	uint32_t hash;

	if (o) {
		if (!mc_load_pending(o))
			return 0;
		if (ld->phase == MC_LOAD_RESERVING || ld->early >= MC_LOAD_EARLY_MAX)
			return 1;	/* in order, at the end */
		ld->early++;
		mc_load_reserve_object(&ld->L, o);
		return 0;
	}
	if (ld->phase != MC_LOAD_SCANNING)	/* every row is in */
		return 0;
	hash = mc_object_hash(key, len);
	a = mc_ask_find(ld, key, len, hash);
	if (a)
		return a->state == MC_ASK_ASKED || a->state == MC_ASK_LATER;
	a = mc_ask_add(ld, key, len, hash);
	if (mc_persist_loader_query(ld->ldr, key, len, NULL) != 0)
		a->state = MC_ASK_LATER;	/* found when its row is put in */
	return 1;
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

/* Answers to lookups while scanning: a row found goes into the table at once. */
static void mc_load_answers(struct mc_master_load *ld, struct mc_persist_answer *answers)
{
	struct mc_master *m = ld->m;
	struct mc_persist_answer *a;

	for (a = answers; a; a = a->next) {
		struct mc_ask *ask = mc_ask_find(ld, a->key, a->key_len,
						 mc_object_hash(a->key, a->key_len));
		struct mc_object *o;

		if (ask == NULL)
			continue;
		if (a->rc < 0) {	/* no key index, or it failed: after the scan */
			ask->state = MC_ASK_LATER;
			continue;
		}
		ask->state = a->rc == 0 ? MC_ASK_FOUND : MC_ASK_ABSENT;
		if (a->rc != 0)
			continue;
		{
			struct mc_persist *p = m->persist;

			m->persist = NULL;	/* loading records nothing: the file has it */
			mc_load_row(&ld->L, &a->rows.rows[0], 1);	/* if its key is new */
			m->persist = p;
		}
		o = mc_object_find(&m->objects, a->key, a->key_len);
		if (o && mc_load_pending(o) && ld->early < MC_LOAD_EARLY_MAX) {
			ld->early++;
			mc_load_reserve_object(&ld->L, o);
		}
	}
	mc_persist_answer_free(answers);
}

/* Every row is in: the ranges are re-reserved in order from the next step on. */
static void mc_load_scanned(struct mc_master_load *ld)
{
	mc_asks_free(ld);
	ld->phase = MC_LOAD_RESERVING;
	mc_log_info("loading %s: %llu rows (%llu objects) in the table in %.2f s; reserving %llu "
		    "ranges", ld->m->cfg.persist_path, (unsigned long long)ld->rows,
		    (unsigned long long)ld->L.objects,
		    (double)(mc_master_now(ld->m) - ld->t0) / 1000.0,
		    (unsigned long long)ld->L.ranges.n);
	if (ld->L.older)
		mc_log_notice("loading %s: %llu rows have a newer row of their key: they go",
			      ld->m->cfg.persist_path, (unsigned long long)ld->L.older);
}

/* Take the next part if it is read: 1, 0 (not yet: the loader's fd says when), -1 (none left:
 * every row is in). */
static int mc_load_take(struct mc_master_load *ld)
{
	size_t i, rows = 0;
	int rc = mc_persist_loader_take(ld->ldr, &ld->chunks, &ld->nchunks);

	if (rc != 1)
		return rc;
	for (i = 0; i < ld->nchunks; i++)
		rows += ld->chunks[i].n;
	ld->rows += rows;
	ld->chunk = ld->nchunks;
	ld->row = ld->nchunks ? ld->chunks[ld->nchunks - 1].n : 0;
	return 1;
}

static void mc_load_prefetch_row(const struct mc_persist_object *po)
{
	__builtin_prefetch(po);
	__builtin_prefetch((const char *)(po + 1) - 1);
}

/* One chunk of the part being put in, its rows from the newest. */
static void mc_load_insert_chunk(struct mc_master_load *ld)
{
	struct mc_persist_rows *c = &ld->chunks[ld->chunk - 1];
	struct mc_persist *p = ld->m->persist;

	ld->m->persist = NULL;	/* loading records nothing: the file has it */
	for (; ld->row > 0; ld->row--) {
		/* Rows ahead, in three steps whose misses overlap these inserts: a row's lines
		 * (the loader thread wrote them, long enough ago to have left the caches), then
		 * its key and replicas, then the index's line for its key. */
		if (ld->row > 4 * MC_LOAD_AHEAD)
			mc_load_prefetch_row(&c->rows[ld->row - 1 - 4 * MC_LOAD_AHEAD]);
		if (ld->row > 2 * MC_LOAD_AHEAD) {
			const struct mc_persist_object *po = &c->rows[ld->row - 1 - 2 * MC_LOAD_AHEAD];

			__builtin_prefetch(po->key);
			__builtin_prefetch(po->replicas);
		}
		if (ld->row > MC_LOAD_AHEAD)
			mc_object_prefetch_key(&ld->m->objects, c->rows[ld->row - 1 - MC_LOAD_AHEAD].key,
					       c->rows[ld->row - 1 - MC_LOAD_AHEAD].key_len);
		mc_load_row(&ld->L, &c->rows[ld->row - 1], 1);
	}
	ld->m->persist = p;
	mc_persist_loader_give(ld->ldr, c);
	if (--ld->chunk > 0) {
		ld->row = ld->chunks[ld->chunk - 1].n;
	} else {
		free(ld->chunks);
		ld->chunks = NULL;
		ld->nchunks = 0;
	}
}

static void mc_master_load_free(struct mc_master_load *ld)
{
	size_t i;

	mc_persist_loader_free(ld->ldr);
	if (ld->ev_fd)
		event_free(ld->ev_fd);
	if (ld->ev_step)
		event_free(ld->ev_step);
	for (i = 0; i < ld->chunk; i++)
		mc_persist_rows_fini(&ld->chunks[i]);
	free(ld->chunks);
	mc_asks_free(ld);
	free(ld);
}

/* Every range is reserved: the rest of the reload, then what waited runs. */
static void mc_load_finish(struct mc_master_load *ld)
{
	struct mc_master *m = ld->m;
	char how[64];

	mc_load_ranges_done(&ld->L);
	mc_load_fix_lost(&ld->L);
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
		if (mc_load_reserve_some(&ld->L, MC_LOAD_RESERVE_SLICE)) {
			mc_load_finish(ld);
			return;
		}
	} else {
		int rc = ld->chunks ? 1 : mc_load_take(ld);

		if (rc == 0) {		/* the loader's fd wakes us */
			ld->waiting = 1;
			return;
		}
		if (rc < 0) {
			mc_load_scanned(ld);
			mc_load_resume(ld->m);	/* lookups of keys not in the table: absent */
		} else if (ld->chunks) {
			mc_load_insert_chunk(ld);
		}
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
	if (ld->waiting) {	/* a part may be read */
		ld->waiting = 0;
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
		memset(&ld->L, 0, sizeof(ld->L));	/* the caller's still */
		mc_master_load_free(ld);
		return rc;
	}
	m->load = ld;
	/* The index at its size at once, if the file says: the prefaulter populates it while the
	 * first part is read (populated by the inserts themselves, each page would fault twice:
	 * a lookup's read, then the insert's write). */
	if (mc_persist_loader_estimate(ld->ldr))
		mc_object_table_reserve(&m->objects, m->objects.count +
						     mc_persist_loader_estimate(ld->ldr));
	event_active(ld->ev_step, EV_TIMEOUT, 0);
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Drain jobs: move every object off some segments so they can be unmounted with nothing lost
 * (upstream's CreateDrainJob, QueryDrainJob, CancelDrainJob, QuerySegmentStatus).
 *
 * Creating a job marks its segments DRAINING (mc_segment.drain): they take no new replicas and
 * their SSD areas no new copies, while readers keep reading them.  Each step of the job (the
 * 1 s tick, and right after one of its moves ends) walks the segments' replica lists, bounded:
 *  - a complete memory replica becomes a move task (tasks.c) to the least used target that
 *    takes placements and does not hold the object yet (the job's targets, or any); when no
 *    target can take it but the object has another readable copy elsewhere, the replica is
 *    dropped (its bytes parked until readers' leases end): nothing is lost;
 *  - a copy on the segment owner's SSD area (LOCAL_DISK; upstream's drain skips those,
 *    issue #2817) is promoted into memory on another segment, then dropped (its owner deletes
 *    the file) once the object is readable elsewhere; a copy whose object has a memory replica
 *    off the drained segments is dropped at once;
 *  - objects that cannot move now (being written, under another task, no room anywhere) are
 *    counted blocked and looked at again in the next step.
 * At most max_concurrency moves and promotions are in flight per job.  A unit (an object on a
 * segment) whose move failed 3 times is given up; a segment with nothing left is DRAINED; the
 * job SUCCEEDED when all are, FAILED when only given-up units are left.  Cancelling (no move
 * in flight) gives the segments back to placements.  Jobs are records in --persist_path
 * (MC_RECORD_DRAIN_JOB); after a restart unfinished ones mark their segments again and go on,
 * with their moves (tasks) restarted by tasks.c.
 * Single-threaded: the master's reactor thread.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/drain.h"
#include "master/tasks.h"
#include "master/tenants.h"
#include "master/tier_ssd.h"
#include "persist/persist.h"
#include "segment/alloc.h"

#define MC_DRAIN_UNIT_RETRIES 3		/* failed moves of one unit before it is given up */
#define MC_DRAIN_WALK 4096		/* replicas looked at per segment and step */
#define MC_DRAIN_MESSAGE 160

/* A unit whose move failed, and how often. */
struct mc_drain_fail {
	struct mc_drain_fail *next;
	uint32_t count;
	uint16_t tenant;
	uint32_t key_len;
	char key[];
};

struct mc_drain_job {
	struct mc_drain_job *next;
	struct mc_uuid id;
	uint8_t status;
	int64_t created_wall, updated_wall;
	uint32_t nsegs, ntargets, max_concurrency;
	char **segs, **targets;
	uint64_t succeeded, failed, blocked, active, migrated_bytes;
	struct mc_drain_fail *fails;
	char message[MC_DRAIN_MESSAGE];
};

struct mc_drain {
	struct mc_drain_job *jobs;
	struct event *ev_step;		/* a step soon: one of a job's moves ended */
};

const char *mc_job_status_name(uint8_t status)
{
	static const char *const names[] = { "CREATED", "PLANNING", "RUNNING", "SUCCEEDED",
					     "FAILED", "CANCELED" };

	return status < 6 ? names[status] : "UNKNOWN_JOB_STATUS";
}

const char *mc_drain_segment_status_name(int status)
{
	switch (status) {
	case MC_SEGSTAT_OK: return "OK";
	case MC_SEGSTAT_DRAINING: return "DRAINING";
	case MC_SEGSTAT_DRAINED: return "DRAINED";
	case MC_SEGSTAT_UNMOUNTING: return "UNMOUNTING";
	case MC_SEGSTAT_DORMANT: return "DORMANT";
	default: return "UNDEFINED";
	}
}

static int mc_job_running(const struct mc_drain_job *j)
{
	return j->status < MC_JOB_SUCCEEDED;
}

static struct mc_drain_job *mc_job_find(struct mc_master *m, const struct mc_uuid *id)
{
	struct mc_drain_job *j;

	for (j = m->drain->jobs; j; j = j->next)
		if (!memcmp(j->id.b, id->b, 16))
			return j;
	return NULL;
}

static void mc_job_free(struct mc_drain_job *j)
{
	uint32_t i;

	while (j->fails) {
		struct mc_drain_fail *f = j->fails;

		j->fails = f->next;
		free(f);
	}
	for (i = 0; i < j->nsegs; i++)
		free(j->segs[i]);
	for (i = 0; i < j->ntargets; i++)
		free(j->targets[i]);
	free(j->segs);
	free(j->targets);
	free(j);
}

static void mc_job_message(struct mc_drain_job *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void mc_job_message(struct mc_drain_job *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->message, sizeof(j->message), fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- persistence */

static void mc_job_persist(struct mc_master *m, struct mc_drain_job *j)
{
	struct mc_wbuf w;
	uint32_t i;

	j->updated_wall = mc_persist_wall_ms();
	if (m->persist == NULL)
		return;
	mc_wbuf_init(&w);
	mc_wbuf_u8(&w, 1);	/* encoding version */
	mc_wbuf_u8(&w, j->status);
	mc_wbuf_i64(&w, j->created_wall);
	mc_wbuf_i64(&w, j->updated_wall);
	mc_wbuf_u32(&w, j->max_concurrency);
	mc_wbuf_u64(&w, j->succeeded);
	mc_wbuf_u64(&w, j->failed);
	mc_wbuf_u64(&w, j->migrated_bytes);
	mc_wbuf_cstr(&w, j->message);
	mc_wbuf_u32(&w, j->nsegs);
	for (i = 0; i < j->nsegs; i++)
		mc_wbuf_cstr(&w, j->segs[i]);
	mc_wbuf_u32(&w, j->ntargets);
	for (i = 0; i < j->ntargets; i++)
		mc_wbuf_cstr(&w, j->targets[i]);
	if (!w.err)
		mc_persist_put_record(m->persist, MC_RECORD_DRAIN_JOB, j->id.b, 16, w.data, w.len);
	mc_wbuf_fini(&w);
}

/* ---------------------------------------------------------------- segments */

/* Mark the segments of j (memory, and the owner's SSD area) with state. */
static void mc_job_mark(struct mc_master *m, struct mc_drain_job *j, uint8_t state)
{
	uint32_t i;

	for (i = 0; i < j->nsegs; i++) {
		struct mc_segment *seg = mc_segment_by_name(m, mc_strv_c(j->segs[i]));
		struct mc_segment *disk;

		if (seg == NULL)
			continue;
		if (state == MC_DRAIN_DRAINING && seg->drain == MC_DRAIN_DRAINED)
			continue;	/* stays drained while nothing new lands */
		seg->drain = state;
		disk = mc_client_disk(seg->client, NULL);
		if (disk)
			disk->drain = state;
	}
}

/* Is name one of the segments some running job drains? */
static int mc_draining(struct mc_master *m, const char *name)
{
	struct mc_drain_job *j;
	uint32_t i;

	for (j = m->drain->jobs; j; j = j->next)
		for (i = 0; mc_job_running(j) && i < j->nsegs; i++)
			if (!strcmp(j->segs[i], name))
				return 1;
	return 0;
}

int mc_drain_segment_status(struct mc_master *m, const char *name, int *status)
{
	struct mc_segment *seg = mc_segment_by_name(m, mc_strv_c(name)), *d;

	if (seg != NULL) {
		*status = seg->drain == MC_DRAIN_DRAINING  ? MC_SEGSTAT_DRAINING
			  : seg->drain == MC_DRAIN_DRAINED ? MC_SEGSTAT_DRAINED
							   : MC_SEGSTAT_OK;
		return 0;
	}
	for (d = m->dormant; d; d = d->dnext)
		if (!strcmp(d->name, name)) {
			*status = MC_SEGSTAT_DORMANT;
			return 0;
		}
	for (d = m->reap_head; d; d = d->reap_next)
		if (!strcmp(d->name, name)) {
			*status = MC_SEGSTAT_UNMOUNTING;
			return 0;
		}
	return MC_ERR_SEGMENT_NOT_FOUND;
}

/* ---------------------------------------------------------------- create, query, cancel */

int mc_drain_create(struct mc_master *m, const char *const *segs, uint32_t nsegs,
		    const char *const *targets, uint32_t ntargets, uint32_t max_concurrency,
		    struct mc_uuid *id, char *why, size_t n)
{
	struct mc_drain_job *j;
	uint32_t i, k;
	int64_t now = mc_master_now(m);

	why[0] = '\0';
	if (nsegs == 0 || nsegs > MC_DRAIN_MAX_SEGMENTS || ntargets > MC_DRAIN_MAX_SEGMENTS ||
	    max_concurrency == 0)
		return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS, "%s",
				       nsegs == 0 ? "no segment to drain"
				       : max_concurrency == 0 ? "max_concurrency must be at least 1"
							      : "too many segments");
	for (i = 0; i < nsegs; i++) {
		struct mc_segment *seg = mc_segment_by_name(m, mc_strv_c(segs[i]));

		for (k = 0; k < i; k++)
			if (!strcmp(segs[i], segs[k]))
				return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS,
						       "segment %s is named twice", segs[i]);
		if (seg == NULL)
			return mc_master_refuse(why, n, MC_ERR_SEGMENT_NOT_FOUND,
					       "segment %s is not mounted", segs[i]);
		if (seg->drain != MC_DRAIN_NONE || mc_draining(m, segs[i]))
			return mc_master_refuse(why, n, MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS,
					       "segment %s is drained or draining already",
					       segs[i]);
	}
	for (i = 0; i < ntargets; i++) {
		struct mc_segment *seg = mc_segment_by_name(m, mc_strv_c(targets[i]));

		for (k = 0; k < nsegs; k++)
			if (!strcmp(targets[i], segs[k]))
				return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS,
						       "target %s is also drained", targets[i]);
		if (seg == NULL)
			return mc_master_refuse(why, n, MC_ERR_SEGMENT_NOT_FOUND,
					       "target %s is not mounted", targets[i]);
		if (!mc_segment_placeable(m, seg, now))
			return mc_master_refuse(why, n, MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS,
					       "target %s takes no placements now", targets[i]);
	}
	j = mc_xcalloc(1, sizeof(*j));
	mc_uuid_generate(&j->id);
	j->status = MC_JOB_CREATED;
	j->created_wall = mc_persist_wall_ms();
	j->max_concurrency = max_concurrency;
	j->segs = mc_xcalloc(nsegs, sizeof(*j->segs));
	for (i = 0; i < nsegs; i++)
		j->segs[i] = mc_xstrdup(segs[i]);
	j->nsegs = nsegs;
	j->targets = mc_xcalloc(ntargets ? ntargets : 1, sizeof(*j->targets));
	for (i = 0; i < ntargets; i++)
		j->targets[i] = mc_xstrdup(targets[i]);
	j->ntargets = ntargets;
	mc_job_message(j, "Drain job created");
	j->next = m->drain->jobs;
	m->drain->jobs = j;
	mc_job_mark(m, j, MC_DRAIN_DRAINING);
	mc_job_persist(m, j);
	*id = j->id;
	{
		char sid[42];

		mc_uuid_pair_format(&j->id, sid);
		mc_log_notice("drain job %s created: %u segment(s) starting with %s", sid, nsegs,
			      segs[0]);
	}
	return 0;
}

int mc_drain_query(struct mc_master *m, const struct mc_uuid *id, struct mc_drain_info *out)
{
	struct mc_drain_job *j = mc_job_find(m, id);

	if (j == NULL)
		return MC_ERR_JOB_NOT_FOUND;
	out->id = j->id;
	out->status = j->status;
	out->created_wall = j->created_wall;
	out->updated_wall = j->updated_wall ? j->updated_wall : j->created_wall;
	out->nsegs = j->nsegs;
	out->segs = (const char *const *)j->segs;
	out->succeeded = j->succeeded;
	out->failed = j->failed;
	out->blocked = j->blocked;
	out->active = j->active;
	out->migrated_bytes = j->migrated_bytes;
	out->message = j->message;
	return 0;
}

int mc_drain_cancel(struct mc_master *m, const struct mc_uuid *id)
{
	struct mc_drain_job *j = mc_job_find(m, id);

	if (j == NULL)
		return MC_ERR_JOB_NOT_FOUND;
	if (!mc_job_running(j) || mc_tasks_active_for_job(m, &j->id) > 0)
		return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
	j->status = MC_JOB_CANCELED;
	mc_job_message(j, "Drain job canceled");
	mc_job_mark(m, j, MC_DRAIN_NONE);
	mc_job_persist(m, j);
	return 0;
}

/* ---------------------------------------------------------------- one step */

static struct mc_drain_fail *mc_job_fail_find(struct mc_drain_job *j, uint16_t tenant,
					      const char *key, uint32_t len)
{
	struct mc_drain_fail *f;

	for (f = j->fails; f; f = f->next)
		if (f->tenant == tenant && f->key_len == len && !memcmp(f->key, key, len))
			return f;
	return NULL;
}

static int mc_job_given_up(struct mc_drain_job *j, const struct mc_object *o)
{
	struct mc_drain_fail *f = mc_job_fail_find(j, o->tenant, o->key, o->key_len);

	return f && f->count >= MC_DRAIN_UNIT_RETRIES;
}

/* Is seg one of the segments a running job drains (or has drained)? */
static int mc_seg_draining(const struct mc_segment *seg)
{
	return seg->drain != MC_DRAIN_NONE;
}

/* A readable memory replica of o on a segment not being drained. */
static int mc_object_safe_elsewhere(struct mc_object *o, const struct mc_replica *skip)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r != skip && r->type == MC_REPLICA_MEMORY && mc_replica_readable(r) &&
		    !mc_seg_draining(r->seg))
			return 1;
	}
	return 0;
}

/* The least used segment the job may move o to (its targets, or any), with room for it. */
static struct mc_segment *mc_job_target(struct mc_master *m, struct mc_drain_job *j,
					struct mc_object *o)
{
	return mc_task_pick_target(m, o, j->targets, j->ntargets);
}

/* The object's tenant's namespace is where tasks and lookups go. */
static int mc_job_move(struct mc_master *m, struct mc_drain_job *j, struct mc_object *o,
		       const char *source, struct mc_segment *target)
{
	struct mc_strv key = { o->key, o->key_len }, src = mc_strv_c(source);
	struct mc_strv tgt = mc_strv_c(target->name);
	struct mc_uuid id;
	char why[200];

	return mc_task_create(m, MC_TASK_REPLICA_MOVE, o->tenant, key, src, &tgt, 1, &j->id, &id,
			      why, sizeof(why));
}

/* Walk the memory replicas of seg (named name): moves into *slots, counts into the job.
 * Returns the replicas left on it. */
static uint64_t mc_job_walk_memory(struct mc_master *m, struct mc_drain_job *j,
				   struct mc_segment *seg, uint32_t *slots, uint64_t *blocked,
				   int *progress)
{
	struct mc_replica *r, *next;
	int64_t now = mc_master_now(m);
	uint32_t budget = MC_DRAIN_WALK;
	uint64_t left = 0;

	for (r = seg->reps; r && budget; r = next, budget--) {
		struct mc_object *o = mc_replica_obj(r);
		struct mc_segment *target;
		int rc;

		next = mc_replica_next(r);
		left++;
		if (r->status != MC_REPLICA_COMPLETE || (o->xflags & MC_OBJX_TASK) ||
		    (o->flags & (MC_OBJ_PROMOTING | MC_OBJ_DEMOTE))) {
			*blocked += !(o->xflags & MC_OBJX_TASK);	/* ours are in flight */
			*progress = 1;
			continue;
		}
		if (mc_job_given_up(j, o))
			continue;
		*progress = 1;
		if (*slots == 0)
			continue;
		target = mc_job_target(m, j, o);
		if (target != NULL) {
			rc = mc_job_move(m, j, o, seg->name, target);
			if (rc == 0) {
				(*slots)--;
				continue;
			}
			(*blocked)++;
			continue;
		}
		if (mc_object_safe_elsewhere(o, r)) {
			/* Nowhere to put another copy, but one is safe elsewhere: drop this one
			 * (its bytes parked while a reader may be copying them). */
			mc_replica_discard(m, r, o->fetch_until > now ? o->fetch_until : now);
			mc_object_settle(m, o);
			j->succeeded++;
			left--;
			continue;
		}
		(*blocked)++;
	}
	return left + (r != NULL);
}

/* Walk the SSD copies on disk (the drained client's area). */
static uint64_t mc_job_walk_disk(struct mc_master *m, struct mc_drain_job *j,
				 struct mc_segment *disk, uint32_t *slots, uint64_t *blocked,
				 int *progress)
{
	struct mc_replica *r, *next;
	int64_t now = mc_master_now(m);
	uint32_t budget = MC_DRAIN_WALK;
	uint64_t left = 0;
	struct mc_rpc_config where;
	uint32_t i;

	mc_rpc_config_default(&where);
	for (i = 0; i < j->ntargets && i < MC_RPC_MAX_PREFERRED; i++)
		where.preferred[where.n_preferred++] = mc_strv_c(j->targets[i]);
	for (r = disk->reps; r && budget; r = next, budget--) {
		struct mc_object *o = mc_replica_obj(r);

		next = mc_replica_next(r);
		left++;
		*progress = 1;
		if (o->flags & MC_OBJ_PROMOTING)
			continue;	/* on its way into memory */
		if (mc_object_safe_elsewhere(o, NULL)) {
			if (o->fetch_until > now) {
				(*blocked)++;	/* a reader may be reading the SSD copy */
				continue;
			}
			mc_replica_release(m, r);	/* its owner deletes the file */
			mc_object_settle(m, o);
			j->succeeded++;
			left--;
			continue;
		}
		if (r->status != MC_REPLICA_COMPLETE || (o->xflags & MC_OBJX_TASK) ||
		    (o->flags & (MC_OBJ_OFFLOADING | MC_OBJ_DEMOTE))) {
			(*blocked)++;
			continue;
		}
		if (*slots == 0)
			continue;
		if (mc_tier_promote(m, o, r, j->ntargets ? &where : NULL) == 1) {
			(*slots)--;
			j->migrated_bytes += o->size;
		} else {
			(*blocked)++;
		}
	}
	return left + (r != NULL);
}

static void mc_job_step(struct mc_master *m, struct mc_drain_job *j)
{
	uint64_t blocked = 0, left_all = 0;
	uint32_t active = mc_tasks_active_for_job(m, &j->id), slots, i, drained = 0;
	int progress = 0;
	uint8_t was = j->status;
	char old[MC_DRAIN_MESSAGE];

	snprintf(old, sizeof(old), "%s", j->message);
	if (j->status == MC_JOB_CREATED)
		j->status = MC_JOB_PLANNING;
	mc_job_mark(m, j, MC_DRAIN_DRAINING);	/* a segment mounted again is drained again */
	slots = j->max_concurrency > active ? j->max_concurrency - active : 0;
	for (i = 0; i < j->nsegs; i++) {
		struct mc_segment *seg = mc_segment_by_name(m, mc_strv_c(j->segs[i]));
		struct mc_segment *disk = seg ? mc_client_disk(seg->client, NULL) : NULL;
		uint64_t left = 0;

		if (seg == NULL) {
			drained++;	/* unmounted: nothing of it is left to move */
			continue;
		}
		left += mc_job_walk_memory(m, j, seg, &slots, &blocked, &progress);
		if (disk)
			left += mc_job_walk_disk(m, j, disk, &slots, &blocked, &progress);
		/* Promotions in flight count as active moves. */
		if (left == 0) {
			seg->drain = MC_DRAIN_DRAINED;
			if (disk)
				disk->drain = MC_DRAIN_DRAINED;
			drained++;
		}
		left_all += left;
	}
	active = mc_tasks_active_for_job(m, &j->id);
	j->active = active;
	j->blocked = blocked;
	if (drained == j->nsegs) {
		j->status = MC_JOB_SUCCEEDED;
		mc_job_message(j, "Drain job finished successfully");
	} else if (active == 0 && !progress && left_all > 0) {
		j->status = MC_JOB_FAILED;
		mc_job_message(j, "Drain job failed: %llu object(s) could not be moved after %d "
			       "attempts", (unsigned long long)left_all, MC_DRAIN_UNIT_RETRIES);
		mc_job_mark(m, j, MC_DRAIN_NONE);
	} else {
		j->status = MC_JOB_RUNNING;
		mc_job_message(j, "Drain job running");
	}
	if (j->status != was || strcmp(old, j->message)) {
		char sid[42];

		mc_job_persist(m, j);
		if (j->status != was && j->status >= MC_JOB_SUCCEEDED) {
			mc_uuid_pair_format(&j->id, sid);
			mc_log_notice("drain job %s %s: %llu moved, %llu failed", sid,
				      mc_job_status_name(j->status), (unsigned long long)j->succeeded,
				      (unsigned long long)j->failed);
		}
	}
}

void mc_drain_tick(struct mc_master *m)
{
	struct mc_drain_job *j;

	for (j = m->drain->jobs; j; j = j->next)
		if (mc_job_running(j))
			mc_job_step(m, j);
}

static void mc_drain_on_step(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_drain_tick(arg);
	mc_master_commit(arg);
}

/* A task ended: if a job's, count it and run a step soon. */
static void mc_drain_on_task_done(struct mc_master *m, const struct mc_task *t)
{
	struct mc_drain_job *j;
	struct mc_drain_fail *f;

	if (mc_uuid_is_nil(&t->job) || (j = mc_job_find(m, &t->job)) == NULL)
		return;
	if (t->status == MC_TASK_SUCCESS) {
		struct mc_object *o = mc_object_find_in(m, t->tenant, t->key, t->key_len);

		j->succeeded++;
		j->migrated_bytes += o ? o->size : 0;
	} else {
		j->failed++;
		f = mc_job_fail_find(j, t->tenant, t->key, t->key_len);
		if (f == NULL) {
			f = mc_xcalloc(1, sizeof(*f) + t->key_len);
			f->tenant = t->tenant;
			f->key_len = t->key_len;
			memcpy(f->key, t->key, t->key_len);
			f->next = j->fails;
			j->fails = f;
		}
		f->count++;
	}
	if (m->drain->ev_step)
		event_active(m->drain->ev_step, EV_TIMEOUT, 0);
}

void mc_drain_counts(const struct mc_master *m, uint64_t out[6])
{
	const struct mc_drain_job *j;

	memset(out, 0, 6 * sizeof(*out));
	for (j = m->drain ? m->drain->jobs : NULL; j; j = j->next)
		if (j->status < 6)
			out[j->status]++;
}

/* ---------------------------------------------------------------- set-up, recovery */

int mc_drain_init(struct mc_master *m)
{
	m->drain = mc_xcalloc(1, sizeof(*m->drain));
	if (m->base)
		m->drain->ev_step = event_new(m->base, -1, 0, mc_drain_on_step, m);
	mc_tasks_on_done(m, mc_drain_on_task_done);
	return 0;
}

void mc_drain_fini(struct mc_master *m)
{
	if (m->drain == NULL)
		return;
	while (m->drain->jobs) {
		struct mc_drain_job *j = m->drain->jobs;

		m->drain->jobs = j->next;
		mc_job_free(j);
	}
	if (m->drain->ev_step)
		event_free(m->drain->ev_step);
	free(m->drain);
	m->drain = NULL;
}

static char **mc_load_names(struct mc_rbuf *r, uint32_t *n)
{
	char **v;
	uint32_t i;

	*n = mc_rbuf_count(r, MC_DRAIN_MAX_SEGMENTS, 4);
	v = mc_xcalloc(*n ? *n : 1, sizeof(*v));
	for (i = 0; i < *n; i++) {
		struct mc_strv s = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);

		v[i] = mc_xstrndup(s.p ? s.p : "", s.n);
	}
	return v;
}

static int mc_drain_load(void *arg, const void *id, size_t id_len, const void *val, size_t len)
{
	struct mc_master *m = arg;
	struct mc_drain_job *j;
	struct mc_strv msg;
	struct mc_rbuf r;
	uint8_t ver;

	if (id_len != 16)
		return 0;
	mc_rbuf_init(&r, val, len);
	j = mc_xcalloc(1, sizeof(*j));
	memcpy(j->id.b, id, 16);
	ver = mc_rbuf_u8(&r);
	j->status = mc_rbuf_u8(&r);
	j->created_wall = mc_rbuf_i64(&r);
	j->updated_wall = mc_rbuf_i64(&r);
	j->max_concurrency = mc_rbuf_u32(&r);
	j->succeeded = mc_rbuf_u64(&r);
	j->failed = mc_rbuf_u64(&r);
	j->migrated_bytes = mc_rbuf_u64(&r);
	msg = mc_rpc_get_strv(&r, MC_DRAIN_MESSAGE);
	j->segs = mc_load_names(&r, &j->nsegs);
	j->targets = mc_load_names(&r, &j->ntargets);
	if (r.err || ver != 1 || j->status > MC_JOB_CANCELED || j->nsegs == 0 ||
	    j->max_concurrency == 0) {
		mc_log_warn("persist: skipping a malformed drain job record");
		mc_job_free(j);
		return 0;
	}
	snprintf(j->message, sizeof(j->message), "%.*s", (int)msg.n, msg.p);
	j->next = m->drain->jobs;
	m->drain->jobs = j;
	if (mc_job_running(j))
		mc_job_mark(m, j, MC_DRAIN_DRAINING);
	return 0;
}

int mc_drain_recover(struct mc_master *m)
{
	if (m->persist == NULL)
		return 0;
	return mc_persist_load_records(m->persist, MC_RECORD_DRAIN_JOB, mc_drain_load, m);
}

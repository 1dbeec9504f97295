/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Copy and move tasks: upstream's CreateCopyTask, CreateMoveTask and QueryTask, carried out by
 * the client owning the object's source replica and tracked here to their end.
 *
 * A task is created PENDING and assigned to the client holding the source: a move's named
 * source segment, or for a copy one of the object's readable memory replicas (an Active
 * owner's first).  The object is marked (MC_OBJX_TASK): until the task ends it is neither
 * removed (OBJECT_HAS_REPLICATION_TASK), evicted nor overwritten, and a writer's late PutEnd
 * does not touch the task's replicas.  The client's Ping answer says it has tasks waiting; it
 * fetches them (FetchTasks), which is when the target replicas are allocated, PROCESSING, and
 * the task becomes PROCESSING; the client writes its bytes into them (checking the object's
 * checksum first and reading the copies back, when the object has one) and reports the result
 * (MarkTaskToComplete): the targets become COMPLETE, and a move's source replica is freed
 * (not before the read lease of a reader who may be copying it ends).  A failed attempt frees
 * its targets and the task waits for another try, at most max_retry_attempts in all; a task
 * no client takes within pending_task_timeout_sec fails, one taken but not finished within
 * processing_task_timeout_sec counts as a failed attempt (its targets are parked as long as a
 * preempted put's, since that client may still be writing).  A copy whose source owner goes
 * away is given to another owner.
 *
 * Objects are named by key (and tenant), never by pointer, so an object removed meanwhile
 * leaves nothing dangling: the attempt finds it gone and the task fails.  Every change is a
 * record in --persist_path (MC_RECORD_TASK); after a restart unfinished tasks start over as
 * PENDING.  Finished tasks are kept, oldest dropped first, up to max_total_finished_tasks.
 * Single-threaded: the master's reactor thread.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/tasks.h"
#include "master/tenants.h"
#include "master/tier_ssd.h"
#include "persist/persist.h"
#include "segment/alloc.h"

#define MC_TASK_BUCKETS 4096
#define MC_TASK_RETRY_MS 1000		/* first retry delay; doubles, capped below */
#define MC_TASK_RETRY_MAX_MS 30000

struct mc_task_list {
	struct mc_task *head, *tail;
	uint64_t n;
};

struct mc_tasks {
	struct mc_task *b[MC_TASK_BUCKETS];
	struct mc_task_list list[4];	/* by status */
	mc_task_done_fn on_done;
};

const char *mc_task_status_name(uint8_t status)
{
	static const char *const names[] = { "PENDING", "PROCESSING", "FAILED", "SUCCESS" };

	return status < 4 ? names[status] : "UNKNOWN";
}

const char *mc_task_type_name(uint8_t type)
{
	return type == MC_TASK_REPLICA_COPY ? "REPLICA_COPY"
	       : type == MC_TASK_REPLICA_MOVE ? "REPLICA_MOVE"
					       : "UNKNOWN";
}

static uint32_t mc_task_bucket(const struct mc_uuid *id)
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ id->b[i]) * 16777619u;
	return h % MC_TASK_BUCKETS;
}

static void mc_list_add(struct mc_task_list *l, struct mc_task *t)
{
	t->next = NULL;
	t->prev = l->tail;
	if (l->tail)
		l->tail->next = t;
	else
		l->head = t;
	l->tail = t;
	l->n++;
}

static void mc_list_del(struct mc_task_list *l, struct mc_task *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		l->head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		l->tail = t->prev;
	t->prev = t->next = NULL;
	l->n--;
}

static int mc_object_has_memory_on(struct mc_object *o, const struct mc_segment *seg)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->type == MC_REPLICA_MEMORY && !strcmp(r->seg->name, seg->name))
			return 1;
	}
	return 0;
}

struct mc_segment *mc_task_pick_target(struct mc_master *m, struct mc_object *o,
				       char *const *names, uint32_t n)
{
	struct mc_segment *best = NULL;
	double best_use = 2.0;
	int64_t now = mc_master_now(m);
	uint32_t i, count = n ? n : m->nsegs;

	for (i = 0; i < count; i++) {
		struct mc_segment *seg = n ? mc_segment_by_name(m, mc_strv_c(names[i])) : m->segs[i];
		double use;

		if (seg == NULL || !mc_segment_placeable(m, seg, now) ||
		    mc_object_has_memory_on(o, seg) || mc_alloc_largest_free(seg->alloc) < o->size)
			continue;
		use = (double)mc_alloc_used(seg->alloc) / (double)(seg->size ? seg->size : 1);
		if (use < best_use) {
			best_use = use;
			best = seg;
		}
	}
	return best;
}

struct mc_task *mc_task_find(struct mc_master *m, const struct mc_uuid *id)
{
	struct mc_task *t;

	for (t = m->tasks->b[mc_task_bucket(id)]; t; t = t->hnext)
		if (!memcmp(t->id.b, id->b, 16))
			return t;
	return NULL;
}

static void mc_task_free(struct mc_task *t)
{
	uint32_t i;

	for (i = 0; i < t->ntargets; i++)
		free(t->targets[i]);
	free(t->targets);
	free(t->source);
	free(t->key);
	free(t);
}

/* Unlink t from the id table and its list, and free it. */
static void mc_task_drop(struct mc_master *m, struct mc_task *t)
{
	struct mc_task **pp = &m->tasks->b[mc_task_bucket(&t->id)];

	while (*pp != t)
		pp = &(*pp)->hnext;
	*pp = t->hnext;
	mc_list_del(&m->tasks->list[t->status], t);
	mc_task_free(t);
}

/* ---------------------------------------------------------------- persistence */

static void mc_task_persist(struct mc_master *m, const struct mc_task *t)
{
	struct mc_wbuf w;
	uint32_t i;

	if (m->persist == NULL)
		return;
	mc_wbuf_init(&w);
	mc_wbuf_u8(&w, 1);	/* encoding version */
	mc_wbuf_u8(&w, t->type);
	mc_wbuf_u8(&w, t->status);
	mc_wbuf_u16(&w, t->tenant);
	mc_wbuf_u32(&w, t->attempts);
	mc_wbuf_i32(&w, t->code);
	mc_wbuf_i64(&w, t->created_wall);
	mc_wbuf_i64(&w, t->updated_wall);
	mc_rpc_put_uuid(&w, &t->assigned);
	mc_rpc_put_uuid(&w, &t->job);
	mc_wbuf_cstr(&w, t->message);
	mc_wbuf_str(&w, t->key, t->key_len);
	mc_wbuf_cstr(&w, t->source);
	mc_wbuf_u32(&w, t->ntargets);
	for (i = 0; i < t->ntargets; i++)
		mc_wbuf_cstr(&w, t->targets[i]);
	if (!w.err)
		mc_persist_put_record(m->persist, MC_RECORD_TASK, t->id.b, 16, w.data, w.len);
	mc_wbuf_fini(&w);
}

static void mc_task_persist_gone(struct mc_master *m, const struct mc_task *t)
{
	if (m->persist)
		mc_persist_del_record(m->persist, MC_RECORD_TASK, t->id.b, 16);
}

/* ---------------------------------------------------------------- objects and owners */

/* The task's object, in its tenant's namespace (FetchTasks comes on the owner's connection,
 * a drain from the tick). */
static struct mc_object *mc_task_object(struct mc_master *m, const struct mc_task *t)
{
	return mc_object_find_in(m, t->tenant, t->key, t->key_len);
}

/* A readable memory replica of o: on the segment named source when given, else on one of
 * client c's segments when c is given, else any (an Active owner's first). */
static struct mc_replica *mc_task_source(struct mc_master *m, struct mc_object *o,
					 const char *source, const struct mc_client *c)
{
	struct mc_replica *any = NULL;
	int64_t now = mc_master_now(m);
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->type != MC_REPLICA_MEMORY || !mc_replica_readable(r))
			continue;
		if (source && *source) {
			if (!strcmp(r->seg->name, source))
				return r;
			continue;
		}
		if (c) {
			if (r->seg->client == c)
				return r;
			continue;
		}
		if (mc_segment_preferred_for_read(m, r->seg, now))
			return r;
		if (any == NULL)
			any = r;
	}
	return any;
}

/* Does o have a replica (any state) on the segment named name? */
static int mc_object_on(struct mc_object *o, const char *name)
{
	uint32_t i;

	for (i = 0; i < o->nrep; i++) {
		struct mc_replica *r = mc_object_replica(o, i);

		if (r->seg && r->type == MC_REPLICA_MEMORY && !strcmp(r->seg->name, name))
			return 1;
	}
	return 0;
}

static void mc_task_assign(struct mc_master *m, struct mc_task *t, struct mc_client *c)
{
	t->assigned = c->id;
	if (t->status == MC_TASK_PENDING)
		c->tasks_pending++;
}

/* ---------------------------------------------------------------- state changes */

static void mc_task_move_to(struct mc_master *m, struct mc_task *t, uint8_t status)
{
	mc_list_del(&m->tasks->list[t->status], t);
	t->status = status;
	t->since = mc_master_now(m);
	t->updated_wall = mc_persist_wall_ms();
	mc_list_add(&m->tasks->list[status], t);
}

/* The task ended: its object is free again, the drain job (if any) learns of it, and the
 * oldest finished tasks past max_total_finished_tasks go. */
static void mc_task_finish(struct mc_master *m, struct mc_task *t, uint8_t status, int code,
			   const char *msg)
{
	struct mc_object *o = mc_task_object(m, t);
	if (o)
		o->xflags &= (uint8_t)~MC_OBJX_TASK;
	t->code = code;
	snprintf(t->message, sizeof(t->message), "%s", msg);
	t->ndst = 0;
	mc_task_move_to(m, t, status);
	mc_task_persist(m, t);
	if (status == MC_TASK_FAILED) {
		char id[42];

		mc_uuid_pair_format(&t->id, id);
		mc_log_info("task %s (%s of %.*s) failed: %s", id, mc_task_type_name(t->type),
			    (int)(t->key_len > 128 ? 128 : t->key_len), t->key, msg);
	}
	if (m->tasks->on_done)
		m->tasks->on_done(m, t);
	while (m->tasks->list[MC_TASK_FAILED].n + m->tasks->list[MC_TASK_SUCCESS].n >
	       (uint64_t)m->cfg.tasks.max_total_finished_tasks) {
		struct mc_task *a = m->tasks->list[MC_TASK_FAILED].head;
		struct mc_task *b = m->tasks->list[MC_TASK_SUCCESS].head;
		struct mc_task *old = a == NULL ? b
				      : b == NULL ? a
				      : a->updated_wall <= b->updated_wall ? a : b;

		mc_task_persist_gone(m, old);
		mc_task_drop(m, old);
	}
}

/* Free the target replicas of t's attempt that are still being written: at once (park_ms 0,
 * the client said it is done with them) or parked until park_ms (it may still be writing). */
static void mc_task_free_targets(struct mc_master *m, struct mc_task *t, struct mc_object *o,
				 int64_t park_ms)
{
	uint32_t i;

	if (o == NULL) {
		t->ndst = 0;
		return;
	}
	for (i = 0; i < t->ndst; i++) {
		struct mc_replica *r = mc_object_replica_by_id(o, t->dst_ids[i]);

		if (r == NULL || r->seg == NULL || r->status != MC_REPLICA_PROCESSING)
			continue;
		if (park_ms)
			mc_replica_discard(m, r, park_ms);
		else
			mc_replica_release(m, r);
	}
	t->ndst = 0;
	mc_object_settle(m, o);
}

/* An attempt failed: try again later (a copy perhaps from another owner) or fail for good. */
static void mc_task_attempt_failed(struct mc_master *m, struct mc_task *t, int code,
				   const char *msg)
{
	int64_t delay = MC_TASK_RETRY_MS;
	uint32_t i;

	if (t->attempts >= (uint32_t)m->cfg.tasks.max_retry_attempts) {
		char full[MC_TASK_MESSAGE];

		snprintf(full, sizeof(full), "%s (after %u attempts)", msg, t->attempts);
		mc_task_finish(m, t, MC_TASK_FAILED, code, full);
		return;
	}
	for (i = 1; i < t->attempts && delay < MC_TASK_RETRY_MAX_MS; i++)
		delay *= 2;
	t->code = code;
	snprintf(t->message, sizeof(t->message), "%s; retrying", msg);
	t->ndst = 0;
	mc_task_move_to(m, t, MC_TASK_PENDING);
	t->retry_at = t->since + (delay < MC_TASK_RETRY_MAX_MS ? delay : MC_TASK_RETRY_MAX_MS);
	mc_task_persist(m, t);
}

/* ---------------------------------------------------------------- create, cancel */

int mc_master_refuse(char *why, size_t n, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return code;
}

int mc_task_create(struct mc_master *m, uint8_t type, uint16_t tenant, struct mc_strv key,
		   struct mc_strv source, const struct mc_strv *targets, uint32_t ntargets,
		   const struct mc_uuid *job, struct mc_uuid *id, char *why, size_t n)
{
	struct mc_object *o;
	struct mc_replica *src;
	struct mc_task *t;
	char name[MC_RPC_MAX_NAME + 1], sname[MC_RPC_MAX_NAME + 1];
	uint32_t i, j;

	why[0] = '\0';
	if (key.n == 0 || key.n > MC_RPC_MAX_KEY || ntargets == 0 ||
	    ntargets > MC_TASK_MAX_TARGETS || (type == MC_TASK_REPLICA_MOVE && ntargets != 1) ||
	    (type == MC_TASK_REPLICA_MOVE && source.n == 0) || source.n > MC_RPC_MAX_NAME)
		return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS, "%s",
				      ntargets == 0 ? "no target segment given"
						    : "a key and 1 to 16 targets are needed (a "
						      "move has one source and one target)");
	snprintf(sname, sizeof(sname), "%.*s", (int)source.n, source.p);
	/* Upstream's order and codes: the object first (OBJECT_NOT_FOUND), then the segments,
	 * where an unknown target or source is a bad argument (INVALID_PARAMS). */
	o = mc_object_find_in(m, tenant, key.p, key.n);
	if (o == NULL)
		return mc_master_refuse(why, n, MC_ERR_OBJECT_NOT_FOUND, "%s", "no such object");
	for (i = 0; i < ntargets; i++) {
		if (targets[i].n == 0 || targets[i].n > MC_RPC_MAX_NAME)
			return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS, "%s",
					      "an empty or overlong target segment name");
		snprintf(name, sizeof(name), "%.*s", (int)targets[i].n, targets[i].p);
		if (mc_strv_eq(targets[i], source))
			return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS,
					      "target %s is the source", name);
		if (mc_segment_by_name(m, targets[i]) == NULL)
			return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS,
					      "target %s is not a mounted memory segment", name);
		for (j = 0; j < i; j++)
			if (mc_strv_eq(targets[i], targets[j]))
				return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS,
						      "target %s is named twice", name);
	}
	if (type == MC_TASK_REPLICA_MOVE && mc_segment_by_name(m, source) == NULL)
		return mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS,
				      "source %s is not a mounted memory segment", sname);
	if (o->xflags & MC_OBJX_TASK)
		return mc_master_refuse(why, n, MC_ERR_OBJECT_HAS_REPLICATION_TASK, "%s",
				      "another task works on the object");
	if (mc_object_count_status(o, MC_REPLICA_PROCESSING) > 0 ||
	    (o->flags & (MC_OBJ_PROMOTING | MC_OBJ_DEMOTE)))
		return mc_master_refuse(why, n, MC_ERR_REPLICA_IS_NOT_READY, "%s",
				      "the object is being written or moved between tiers");
	src = mc_task_source(m, o, type == MC_TASK_REPLICA_MOVE ? sname : NULL, NULL);
	if (src == NULL)
		return type == MC_TASK_REPLICA_MOVE
			       ? mc_master_refuse(why, n, MC_ERR_INVALID_PARAMS,
						"the object has no complete replica on %s", sname)
			       : mc_master_refuse(why, n, MC_ERR_REPLICA_IS_NOT_READY, "%s",
						"the object has no readable memory replica");
	/* Targets that hold the object already are no refusal: such a copy succeeds when its
	 * owner fetches it, with nothing to write (mc_task_begin). */
	if (m->tasks->list[MC_TASK_PENDING].n >= (uint64_t)m->cfg.tasks.max_total_pending_tasks)
		return mc_master_refuse(why, n, MC_ERR_TASK_PENDING_LIMIT_EXCEEDED, "%s",
				      "max_total_pending_tasks tasks are waiting already");
	t = mc_xcalloc(1, sizeof(*t));
	mc_uuid_generate(&t->id);
	t->type = type;
	t->status = MC_TASK_PENDING;
	t->tenant = tenant;
	t->created_wall = t->updated_wall = mc_persist_wall_ms();
	t->since = mc_master_now(m);
	if (job)
		t->job = *job;
	t->key = mc_xmalloc(key.n);
	memcpy(t->key, key.p, key.n);
	t->key_len = key.n;
	t->source = mc_xstrdup(type == MC_TASK_REPLICA_MOVE ? sname : "");
	t->targets = mc_xcalloc(ntargets, sizeof(*t->targets));
	t->ntargets = ntargets;
	for (i = 0; i < ntargets; i++)
		t->targets[i] = mc_xstrndup(targets[i].p, targets[i].n);
	t->hnext = m->tasks->b[mc_task_bucket(&t->id)];
	m->tasks->b[mc_task_bucket(&t->id)] = t;
	mc_list_add(&m->tasks->list[MC_TASK_PENDING], t);
	mc_task_assign(m, t, src->seg->client);
	o->xflags |= MC_OBJX_TASK;
	mc_task_persist(m, t);
	*id = t->id;
	return 0;
}

void mc_task_cancel_one(struct mc_master *m, struct mc_task *t, const char *why)
{
	if (t->status == MC_TASK_PENDING) {
		mc_task_finish(m, t, MC_TASK_FAILED, MC_ERR_INTERNAL, why);
	} else if (t->status == MC_TASK_PROCESSING) {
		/* Its client may be writing: the targets are parked like a preempted put's. */
		mc_task_free_targets(m, t, mc_task_object(m, t),
				     mc_master_now(m) +
					     m->cfg.put_start_release_timeout_sec * 1000);
		mc_task_finish(m, t, MC_TASK_FAILED, MC_ERR_INTERNAL, why);
	}
}

/* ---------------------------------------------------------------- hand-out, completion */

/* Begin an attempt of t for client c: allocate the targets and write the assignment to out.
 * Returns 1 when handed out, 0 when not (t failed, finished, waits or went to another
 * owner). */
static int mc_task_begin(struct mc_master *m, struct mc_task *t, struct mc_client *c,
			 struct mc_wbuf *out)
{
	struct mc_object *o = mc_task_object(m, t);
	struct mc_replica *src;
	struct mc_segment *segs[MC_TASK_MAX_TARGETS];
	uint32_t i, ndst = 0, present = 0, nsegs = 0;
	uint64_t src_id;
	int nospace = 0;

	if (o == NULL) {
		mc_task_finish(m, t, MC_TASK_FAILED, MC_ERR_OBJECT_NOT_FOUND,
			       "the object was removed");
		return 0;
	}
	src = mc_task_source(m, o, t->type == MC_TASK_REPLICA_MOVE ? t->source : NULL, c);
	if (src == NULL || src->seg->client != c) {
		if (t->type == MC_TASK_REPLICA_MOVE) {
			mc_task_finish(m, t, MC_TASK_FAILED, MC_ERR_REPLICA_NOT_FOUND,
				       "the source replica is gone");
		} else if ((src = mc_task_source(m, o, NULL, NULL)) != NULL) {
			mc_task_assign(m, t, src->seg->client);	/* another owner */
		} else {
			mc_task_finish(m, t, MC_TASK_FAILED, MC_ERR_REPLICA_IS_NOT_READY,
				       "the object has no readable memory replica left");
		}
		return 0;
	}
	src_id = src->id;
	t->attempts++;
	for (i = 0; i < t->ntargets; i++) {
		struct mc_segment *seg = mc_segment_by_name(m, mc_strv_c(t->targets[i]));

		if (mc_object_on(o, t->targets[i])) {
			present++;
			continue;
		}
		if (seg == NULL || !mc_segment_placeable(m, seg, mc_master_now(m))) {
			nospace = 1;
			continue;
		}
		segs[nsegs++] = seg;
	}
	for (i = 0; i < nsegs; i++) {
		struct mc_replica *r = mc_object_add_replica(o);

		if (r == NULL)
			break;
		if (mc_replica_alloc_on(m, r, o->size, segs[i]) != 0) {
			memset(r, 0, sizeof(*r));
			o->nrep--;
			nospace = 1;
			continue;
		}
		r->type = MC_REPLICA_MEMORY;
		r->status = MC_REPLICA_PROCESSING;
		t->dst_ids[ndst++] = r->id;
	}
	t->ndst = ndst;
	if (ndst == 0) {
		if (present == t->ntargets && t->type == MC_TASK_REPLICA_COPY) {
			mc_task_finish(m, t, MC_TASK_SUCCESS, 0, "every target has a replica");
		} else {
			mc_task_attempt_failed(m, t, MC_ERR_NO_AVAILABLE_HANDLE,
					       nospace ? "no room on the target segments"
						       : "the targets are not mounted");
		}
		return 0;
	}
	src = mc_object_replica_by_id(o, src_id);	/* adding replicas moved them */
	t->src_id = src_id;
	mc_task_move_to(m, t, MC_TASK_PROCESSING);
	t->message[0] = '\0';
	mc_persist_object_changed(m, o);
	mc_task_persist(m, t);
	mc_rpc_put_uuid(out, &t->id);
	mc_wbuf_u8(out, t->type);
	mc_wbuf_str(out, t->key, t->key_len);
	mc_wbuf_u64(out, o->size);
	mc_wbuf_u64(out, src->seg->base + src->off);
	mc_wbuf_u64(out, src->id);
	mc_wbuf_u8(out, o->has_checksum);
	mc_wbuf_u64(out, o->has_checksum ? o->checksum : 0);
	mc_wbuf_u32(out, ndst);
	for (i = 0; i < ndst; i++) {
		struct mc_replica *r = mc_object_replica_by_id(o, t->dst_ids[i]);

		mc_wbuf_cstr(out, r->seg->name);
		mc_wbuf_cstr(out, r->seg->endpoint);
		mc_wbuf_u64(out, r->seg->base + r->off);
	}
	return 1;
}

uint32_t mc_tasks_fetch(struct mc_master *m, struct mc_client *c, uint32_t max,
			struct mc_wbuf *out)
{
	struct mc_tasks *ts = m->tasks;
	struct mc_task *t, *next;
	int64_t now = mc_master_now(m);
	uint32_t n = 0;

	for (t = ts->list[MC_TASK_PENDING].head; t && n < max; t = next) {
		next = t->next;
		if (ts->list[MC_TASK_PROCESSING].n >= (uint64_t)m->cfg.tasks.max_total_processing_tasks)
			break;
		if (memcmp(t->assigned.b, c->id.b, 16) || t->retry_at > now)
			continue;
		n += (uint32_t)mc_task_begin(m, t, c, out);
	}
	return n;
}

int mc_tasks_complete(struct mc_master *m, struct mc_client *c, const struct mc_uuid *id,
		      int ok, int code, struct mc_strv msg)
{
	struct mc_task *t = mc_task_find(m, id);
	struct mc_object *o;
	int64_t now = mc_master_now(m);
	char text[MC_TASK_MESSAGE];
	uint32_t i, done = 0;

	if (t == NULL)
		return MC_ERR_TASK_NOT_FOUND;
	if (memcmp(t->assigned.b, c->id.b, 16))
		return MC_ERR_ILLEGAL_CLIENT;
	if (t->status != MC_TASK_PROCESSING)
		return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
	o = mc_task_object(m, t);
	snprintf(text, sizeof(text), "%.*s", (int)(msg.n < sizeof(text) ? msg.n : sizeof(text) - 1),
		 msg.p);
	if (!ok) {
		mc_task_free_targets(m, t, o, 0);
		mc_task_attempt_failed(m, t, code ? code : MC_ERR_TRANSFER_FAIL,
				       text[0] ? text : "the client could not copy the object");
		return 0;
	}
	if (o == NULL) {
		mc_task_finish(m, t, MC_TASK_FAILED, MC_ERR_OBJECT_NOT_FOUND,
			       "the object was removed while it was copied");
		return 0;
	}
	for (i = 0; i < t->ndst; i++) {
		struct mc_replica *r = mc_object_replica_by_id(o, t->dst_ids[i]);

		if (r && r->seg && r->status == MC_REPLICA_PROCESSING) {
			r->status = MC_REPLICA_COMPLETE;
			done++;
		}
	}
	t->ndst = 0;
	if (done == 0) {
		mc_object_settle(m, o);
		mc_task_attempt_failed(m, t, MC_ERR_SEGMENT_NOT_FOUND,
				       "the target segments went away during the copy");
		return 0;
	}
	if (t->type == MC_TASK_REPLICA_MOVE) {
		struct mc_replica *src = mc_object_replica_by_id(o, t->src_id);

		/* A reader may be copying the old bytes under its lease. */
		if (src && src->seg)
			mc_replica_discard(m, src, o->fetch_until > now ? o->fetch_until : now);
	}
	mc_object_touch(&m->objects, o);
	if (mc_object_settle(m, o))
		o = NULL;
	mc_task_finish(m, t, MC_TASK_SUCCESS, 0, "");
	return 0;
}

/* ---------------------------------------------------------------- the tick */

void mc_tasks_tick(struct mc_master *m)
{
	struct mc_tasks *ts = m->tasks;
	struct mc_task *t, *next;
	int64_t now = mc_master_now(m);
	int64_t ptmo = m->cfg.tasks.pending_task_timeout_sec * 1000;
	int64_t xtmo = m->cfg.tasks.processing_task_timeout_sec * 1000;
	uint32_t b;

	for (b = 0; b < m->nclient_buckets; b++) {
		struct mc_client *c;

		for (c = m->client_buckets[b]; c; c = c->hnext)
			c->tasks_pending = 0;
	}
	for (t = ts->list[MC_TASK_PROCESSING].head; t; t = next) {
		next = t->next;
		if (xtmo && now - t->since > xtmo) {
			/* The client may still be writing: park its targets. */
			mc_task_free_targets(m, t, mc_task_object(m, t),
					     now + m->cfg.put_start_release_timeout_sec * 1000);
			mc_task_attempt_failed(m, t, MC_ERR_RPC_TIMEOUT,
					       "the client did not finish within "
					       "processing_task_timeout_sec");
		}
	}
	for (t = ts->list[MC_TASK_PENDING].head; t; t = next) {
		struct mc_client *c = mc_client_find(m, &t->assigned);

		next = t->next;
		if (ptmo && now - t->since > ptmo) {
			mc_task_finish(m, t, MC_TASK_FAILED, MC_ERR_RPC_TIMEOUT,
				       "no client took the task within pending_task_timeout_sec");
			continue;
		}
		if (t->type == MC_TASK_REPLICA_COPY &&
		    (c == NULL || c->state != MC_CLIENT_ACTIVE)) {
			struct mc_object *o = mc_task_object(m, t);
			struct mc_replica *src = o ? mc_task_source(m, o, NULL, NULL) : NULL;

			if (src && src->seg->client->state == MC_CLIENT_ACTIVE)
				c = src->seg->client;
			t->assigned = c ? c->id : t->assigned;
		}
		if (c)
			c->tasks_pending++;
	}
}

uint32_t mc_tasks_active_for_job(struct mc_master *m, const struct mc_uuid *job)
{
	uint32_t n = 0;
	int st;

	for (st = MC_TASK_PENDING; st <= MC_TASK_PROCESSING; st++) {
		struct mc_task *t;

		for (t = m->tasks->list[st].head; t; t = t->next)
			n += !memcmp(t->job.b, job->b, 16);
	}
	return n;
}

void mc_tasks_counts(const struct mc_master *m, uint64_t out[4])
{
	int i;

	for (i = 0; i < 4; i++)
		out[i] = m->tasks ? m->tasks->list[i].n : 0;
}

void mc_tasks_on_done(struct mc_master *m, mc_task_done_fn fn)
{
	m->tasks->on_done = fn;
}

/* ---------------------------------------------------------------- set-up, recovery */

int mc_tasks_init(struct mc_master *m)
{
	m->tasks = mc_xcalloc(1, sizeof(*m->tasks));
	return 0;
}

void mc_tasks_fini(struct mc_master *m)
{
	uint32_t b;

	if (m->tasks == NULL)
		return;
	for (b = 0; b < MC_TASK_BUCKETS; b++)
		while (m->tasks->b[b]) {
			struct mc_task *t = m->tasks->b[b];

			m->tasks->b[b] = t->hnext;
			mc_task_free(t);
		}
	free(m->tasks);
	m->tasks = NULL;
}

static int mc_task_load(void *arg, const void *id, size_t id_len, const void *val, size_t len)
{
	struct mc_master *m = arg;
	struct mc_rbuf r;
	struct mc_task *t;
	struct mc_strv msg, key, src;
	uint32_t i, n;
	uint8_t ver;

	if (id_len != 16)
		return 0;
	mc_rbuf_init(&r, val, len);
	ver = mc_rbuf_u8(&r);
	t = mc_xcalloc(1, sizeof(*t));
	memcpy(t->id.b, id, 16);
	t->type = mc_rbuf_u8(&r);
	t->status = mc_rbuf_u8(&r);
	t->tenant = mc_rbuf_u16(&r);
	t->attempts = mc_rbuf_u32(&r);
	t->code = mc_rbuf_i32(&r);
	t->created_wall = mc_rbuf_i64(&r);
	t->updated_wall = mc_rbuf_i64(&r);
	mc_rpc_get_uuid(&r, &t->assigned);
	mc_rpc_get_uuid(&r, &t->job);
	msg = mc_rpc_get_strv(&r, MC_TASK_MESSAGE);
	key = mc_rpc_get_strv(&r, MC_RPC_MAX_KEY);
	src = mc_rpc_get_strv(&r, MC_RPC_MAX_NAME);
	n = mc_rbuf_count(&r, MC_TASK_MAX_TARGETS, 4);
	if (r.err || ver != 1 || t->status > MC_TASK_SUCCESS || t->type > MC_TASK_REPLICA_MOVE ||
	    key.n == 0 || n == 0) {
		mc_log_warn("persist: skipping a malformed task record");
		free(t);
		return 0;
	}
	snprintf(t->message, sizeof(t->message), "%.*s", (int)msg.n, msg.p);
	t->key = mc_xmalloc(key.n);
	memcpy(t->key, key.p, key.n);
	t->key_len = key.n;
	t->source = mc_xstrndup(src.p, src.n);
	t->targets = mc_xcalloc(n, sizeof(*t->targets));
	for (i = 0; i < n; i++) {
		struct mc_strv s = mc_rpc_get_strv(&r, MC_RPC_MAX_NAME);

		t->targets[i] = mc_xstrndup(s.p ? s.p : "", s.n);
		t->ntargets++;
	}
	t->since = mc_master_now(m);
	if (t->status == MC_TASK_PROCESSING) {
		/* Its targets were parked by the object reload; it starts over. */
		t->status = MC_TASK_PENDING;
		snprintf(t->message, sizeof(t->message), "the master restarted during the copy; "
			 "retrying");
	}
	if (t->status == MC_TASK_PENDING) {
		struct mc_object *o = mc_task_object(m, t);

		if (o)
			o->xflags |= MC_OBJX_TASK;
	}
	t->hnext = m->tasks->b[mc_task_bucket(&t->id)];
	m->tasks->b[mc_task_bucket(&t->id)] = t;
	mc_list_add(&m->tasks->list[t->status], t);
	return 0;
}

int mc_tasks_recover(struct mc_master *m)
{
	int rc;

	if (m->persist == NULL)
		return 0;
	rc = mc_persist_load_records(m->persist, MC_RECORD_TASK, mc_task_load, m);
	if (rc == 0 && (m->tasks->list[MC_TASK_PENDING].n || m->tasks->list[MC_TASK_FAILED].n ||
			m->tasks->list[MC_TASK_SUCCESS].n))
		mc_log_notice("recovered %llu unfinished and %llu finished copy/move tasks",
			      (unsigned long long)m->tasks->list[MC_TASK_PENDING].n,
			      (unsigned long long)(m->tasks->list[MC_TASK_FAILED].n +
						   m->tasks->list[MC_TASK_SUCCESS].n));
	return rc;
}

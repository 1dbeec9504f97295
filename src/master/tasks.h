/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_TASKS_H
#define MC_MASTER_TASKS_H

/*
 * Copy and move tasks (upstream's CreateCopyTask, CreateMoveTask, QueryTask): the master
 * records a task, the client owning the object's source replica carries it out (it learns of
 * it on its heartbeat and fetches it), and the master tracks it to its end.  Drain jobs
 * (drain.c) are made of move tasks.  See tasks.c.
 */
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

/* Upstream's TaskType and TaskStatus, with upstream's numbers. */
enum mc_task_type {
	MC_TASK_REPLICA_COPY = 0,
	MC_TASK_REPLICA_MOVE = 1,
};

enum mc_task_status {
	MC_TASK_PENDING = 0,
	MC_TASK_PROCESSING = 1,
	MC_TASK_FAILED = 2,
	MC_TASK_SUCCESS = 3,
};

#define MC_TASK_MAX_TARGETS 16
#define MC_TASK_MESSAGE 160

struct mc_task {
	struct mc_uuid id;
	struct mc_task *hnext;			/* id hash chain */
	struct mc_task *prev, *next;		/* in the list of its state */
	uint8_t type;				/* enum mc_task_type */
	uint8_t status;				/* enum mc_task_status */
	uint16_t tenant;			/* the object's tenant (tenants.c) */
	uint32_t attempts;			/* attempts begun */
	int32_t code;				/* the last failure's error code */
	int64_t created_wall, updated_wall;	/* ms since the epoch */
	int64_t since;				/* monotonic ms: entered its state */
	int64_t retry_at;			/* monotonic ms: PENDING, not handed out before */
	struct mc_uuid assigned;		/* the client carrying it out (nil: none yet) */
	struct mc_uuid job;			/* the drain job it belongs to (nil: none) */
	uint64_t src_id;			/* PROCESSING: the source replica */
	uint64_t dst_ids[MC_TASK_MAX_TARGETS];	/* PROCESSING: the replicas being written */
	uint32_t ndst;
	char message[MC_TASK_MESSAGE];
	char *source;				/* MOVE: the source segment; COPY: "" */
	uint32_t ntargets;
	char **targets;				/* segment names */
	uint32_t key_len;
	char *key;
};

int mc_tasks_init(struct mc_master *m);
void mc_tasks_fini(struct mc_master *m);
/* Reload the tasks from --persist_path, after the objects: unfinished ones start over as
 * PENDING (the replicas they were writing were parked by the object reload).  0 or an error. */
int mc_tasks_recover(struct mc_master *m);

/* Create a task on the object key of tenant (a COPY to targets, or a MOVE from source to
 * targets[0]) for job (NULL: none).  Returns 0 and the id, or OBJECT_NOT_FOUND (checked
 * first), INVALID_PARAMS (no or bad targets, a target or the source that is not a mounted
 * memory segment, no complete replica on the move's source), REPLICA_IS_NOT_READY (not
 * complete), OBJECT_HAS_REPLICATION_TASK, REPLICA_ALREADY_EXISTS (on every target already),
 * TASK_PENDING_LIMIT_EXCEEDED; why gets a sentence for a refusal. */
int mc_task_create(struct mc_master *m, uint8_t type, uint16_t tenant, struct mc_strv key,
		   struct mc_strv source, const struct mc_strv *targets, uint32_t ntargets,
		   const struct mc_uuid *job, struct mc_uuid *id, char *why, size_t n);
struct mc_task *mc_task_find(struct mc_master *m, const struct mc_uuid *id);
/* The least used segment among names[0..n) (n 0: every segment) that takes placements, has
 * room for o and holds no memory replica of it; NULL when none does. */
struct mc_segment *mc_task_pick_target(struct mc_master *m, struct mc_object *o,
				       char *const *names, uint32_t n);
/* Cancel an unfinished task (FAILED with message why; a drain job's cancellation). */
void mc_task_cancel_one(struct mc_master *m, struct mc_task *t, const char *why);
/* FetchTasks of client c: begin up to max of the tasks waiting for it and append their
 * assignments to out (see tasks_rpc.c for the encoding).  Returns how many. */
uint32_t mc_tasks_fetch(struct mc_master *m, struct mc_client *c, uint32_t max,
			struct mc_wbuf *out);
/* MarkTaskToComplete of client c for task id: ok, or failed with code and msg.  0, or
 * TASK_NOT_FOUND, ILLEGAL_CLIENT (not the client carrying it out), or
 * UNAVAILABLE_IN_CURRENT_STATUS (not being carried out). */
int mc_tasks_complete(struct mc_master *m, struct mc_client *c, const struct mc_uuid *id,
		      int ok, int code, struct mc_strv msg);
/* Timeouts, retries, re-assignment of copies whose owner went away (the 1 s tick). */
void mc_tasks_tick(struct mc_master *m);
/* Unfinished tasks (PENDING, PROCESSING) of a drain job. */
uint32_t mc_tasks_active_for_job(struct mc_master *m, const struct mc_uuid *job);
/* Tasks in each state, for the metrics. */
void mc_tasks_counts(const struct mc_master *m, uint64_t out[4]);
/* A finished task's drain job learns of it (drain.c sets it; NULL: none). */
typedef void (*mc_task_done_fn)(struct mc_master *m, const struct mc_task *t);
void mc_tasks_on_done(struct mc_master *m, mc_task_done_fn fn);
const char *mc_task_status_name(uint8_t status);
const char *mc_task_type_name(uint8_t type);

#endif

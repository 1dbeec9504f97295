/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_DRAIN_H
#define MC_MASTER_DRAIN_H

/*
 * Drain jobs (upstream's CreateDrainJob, QueryDrainJob, CancelDrainJob and segment status):
 * move every object off some segments, memory and SSD replicas alike, so they can be
 * unmounted with nothing lost.  See drain.c; the admin HTTP routes are drain_http.c.
 */
#include <stdint.h>

#include "master/master.h"

/* A segment's place in a drain (mc_segment.drain; upstream's SegmentStatus has them). */
enum mc_drain_state {
	MC_DRAIN_NONE = 0,	/* OK */
	MC_DRAIN_DRAINING = 1,
	MC_DRAIN_DRAINED = 2,
};

/* Upstream's JobStatus. */
enum mc_job_status {
	MC_JOB_CREATED = 0,
	MC_JOB_PLANNING = 1,
	MC_JOB_RUNNING = 2,
	MC_JOB_SUCCEEDED = 3,
	MC_JOB_FAILED = 4,
	MC_JOB_CANCELED = 5,
};

/* Upstream's SegmentStatus numbers, for /api/v1/segments/status. */
enum mc_segment_status_api {
	MC_SEGSTAT_OK = 1,
	MC_SEGSTAT_DRAINING = 2,
	MC_SEGSTAT_DRAINED = 3,
	MC_SEGSTAT_UNMOUNTING = 5,
	MC_SEGSTAT_DORMANT = 6,		/* ours: its client is away, its objects kept */
};

#define MC_DRAIN_MAX_SEGMENTS 64

struct mc_drain_info {
	struct mc_uuid id;
	uint8_t status;			/* enum mc_job_status */
	int64_t created_wall, updated_wall;
	uint32_t nsegs;
	const char *const *segs;
	uint64_t succeeded, failed, blocked, active, migrated_bytes;
	const char *message;
};

int mc_drain_init(struct mc_master *m);
void mc_drain_fini(struct mc_master *m);
/* After the objects and tasks: reload the jobs; unfinished ones mark their segments again. */
int mc_drain_recover(struct mc_master *m);
/* Create a job draining segs to targets (none: any segment that takes placements), at most
 * max_concurrency moves at once.  0 and its id, or INVALID_PARAMS (no segment, a name twice, a
 * target among the drained, max_concurrency 0), SEGMENT_NOT_FOUND (a name that is not mounted),
 * UNAVAILABLE_IN_CURRENT_STATUS (a segment already drained or draining, or a target that takes
 * no placements); why gets a sentence. */
int mc_drain_create(struct mc_master *m, const char *const *segs, uint32_t nsegs,
		    const char *const *targets, uint32_t ntargets, uint32_t max_concurrency,
		    struct mc_uuid *id, char *why, size_t n);
/* 0 and the job's figures (valid until the next change), or JOB_NOT_FOUND. */
int mc_drain_query(struct mc_master *m, const struct mc_uuid *id, struct mc_drain_info *out);
/* Cancel a job that has no move in flight: its segments take placements again.  0,
 * JOB_NOT_FOUND, or UNAVAILABLE_IN_CURRENT_STATUS (finished, or moves in flight). */
int mc_drain_cancel(struct mc_master *m, const struct mc_uuid *id);
/* Upstream's SegmentStatus of the segment named name: 0 and *status, or SEGMENT_NOT_FOUND. */
int mc_drain_segment_status(struct mc_master *m, const char *name, int *status);
const char *mc_drain_segment_status_name(int status);
const char *mc_job_status_name(uint8_t status);
/* Schedule moves of the running jobs (the 1 s tick; also when one of their tasks ends). */
void mc_drain_tick(struct mc_master *m);
/* Jobs by status, for the metrics. */
void mc_drain_counts(const struct mc_master *m, uint64_t out[6]);

/* drain_http.c */
int mc_drain_http_routes(struct mc_master *m);

#endif

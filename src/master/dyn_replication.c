/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dynamic MEMORY replication of hot keys (upstream's --dynamic_replication_mode): a key read
 * more than --dynamic_replication_admission_qps_threshold times a second over the heat window
 * is hot; in observe mode it is only counted, in enforce mode it is given one more memory
 * replica (a copy task, tasks.c, to the least used segment without one) until it has
 * --dynamic_replication_max_memory_replicas.  Such a replica is an ordinary one: eviction
 * takes it back like any other.
 *
 * Reads are counted in a count-min sketch of 4 x 4096 counters (128 KiB, whatever the number
 * of keys: nothing per object), cleared at each window's end, so a key is judged on its reads
 * within the current window; a key is considered once per window (its counter is then set
 * past the threshold's count and tested for equality).  Single-threaded: the master's loop.
 */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "master/dyn_replication.h"
#include "master/tasks.h"

#define MC_DR_ROWS 4
#define MC_DR_COLS 4096

struct mc_dynrep {
	uint16_t c[MC_DR_ROWS][MC_DR_COLS];
	int64_t window_start;
	int mode;		/* 0 off, 1 observe, 2 enforce */
	uint64_t hot, tasks;	/* keys found hot, copy tasks made for them */
};

void mc_dynrep_init(struct mc_master *m)
{
	const char *mode = m->cfg.dynrep.dynamic_replication_mode;

	m->dynrep = mc_xcalloc(1, sizeof(*m->dynrep));
	m->dynrep->mode = !strcmp(mode, "enforce") ? 2 : !strcmp(mode, "observe") ? 1 : 0;
	m->dynrep->window_start = mc_master_now(m);
}

void mc_dynrep_fini(struct mc_master *m)
{
	free(m->dynrep);
	m->dynrep = NULL;
}

void mc_dynrep_tick(struct mc_master *m)
{
	struct mc_dynrep *d = m->dynrep;
	int64_t now = mc_master_now(m);

	if (d == NULL || d->mode == 0)
		return;
	if (now - d->window_start >= m->cfg.dynrep.dynamic_replication_heat_window_seconds * 1000) {
		memset(d->c, 0, sizeof(d->c));
		d->window_start = now;
	}
}

void mc_dynrep_on_read(struct mc_master *m, struct mc_object *o)
{
	struct mc_dynrep *d = m->dynrep;
	uint32_t h = o->hash, est = UINT16_MAX, need, i, mem = 0;
	uint16_t *cells[MC_DR_ROWS];
	struct mc_segment *target;
	struct mc_uuid id;
	char why[160];
	int r;

	if (d == NULL || d->mode == 0)
		return;
	need = (uint32_t)(m->cfg.dynrep.dynamic_replication_admission_qps_threshold *
			  (double)m->cfg.dynrep.dynamic_replication_heat_window_seconds) + 1;
	if (need >= UINT16_MAX)
		need = UINT16_MAX - 1;
	for (r = 0; r < MC_DR_ROWS; r++) {
		uint32_t x = (h ^ (0x9e3779b9u * (uint32_t)(r + 1))) * 0x85ebca6bu;

		cells[r] = &d->c[r][(x ^ (x >> 15)) % MC_DR_COLS];
		if (*cells[r] < est)
			est = *cells[r];
	}
	if (est >= need)
		return;		/* judged already in this window */
	for (r = 0; r < MC_DR_ROWS; r++)
		if (*cells[r] == est)
			(*cells[r])++;	/* conservative update */
	if (est + 1 < need)
		return;
	for (r = 0; r < MC_DR_ROWS; r++)
		if (*cells[r] < need)
			*cells[r] = (uint16_t)need;
	for (i = 0; i < o->nrep; i++)
		mem += mc_object_replica(o, i)->type == MC_REPLICA_MEMORY &&
		       mc_replica_readable(mc_object_replica(o, i));
	if (mem == 0 || mem >= (uint32_t)m->cfg.dynrep.dynamic_replication_max_memory_replicas ||
	    (o->xflags & MC_OBJX_TASK))
		return;
	d->hot++;
	if (d->mode != 2 || (target = mc_task_pick_target(m, o, NULL, 0)) == NULL)
		return;
	{
		struct mc_strv key = { o->key, o->key_len }, none = { "", 0 };
		struct mc_strv tgt = mc_strv_c(target->name);

		if (mc_task_create(m, MC_TASK_REPLICA_COPY, o->tenant, key, none, &tgt, 1, NULL,
				   &id, why, sizeof(why)) == 0)
			d->tasks++;
	}
}

void mc_dynrep_counts(const struct mc_master *m, uint64_t *hot, uint64_t *tasks)
{
	*hot = m->dynrep ? m->dynrep->hot : 0;
	*tasks = m->dynrep ? m->dynrep->tasks : 0;
}

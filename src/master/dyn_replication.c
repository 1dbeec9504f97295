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
 * past the threshold's count and tested for equality).
 *
 * Cooldowns, as upstream's (fixed there too, no flags): a key given a replica gets none again
 * for MC_DR_ACTION_COOLDOWN_MS, however hot it stays; and a key whose dynamic replica went
 * (evicted, its segment unmounted or drained) gets none again for MC_DR_RECREATE_COOLDOWN_MS,
 * so eviction and replication do not take turns on one key.  The master remembers the keys it
 * replicated (a 64-bit hash of tenant and key, not the key) for MC_DR_REMEMBER_MS after their
 * last action, at most MC_DR_MAX_KEYS of them; it notices a dynamic replica went when the key
 * is hot again with fewer memory replicas than the copy left it with, and the recreate cooldown
 * runs from then, so it is never shorter than upstream's.  A key removed and put again starts
 * afresh (its generation differs).  Single-threaded: the master's loop.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "master/dyn_replication.h"
#include "master/tasks.h"

#define MC_DR_ROWS 4
#define MC_DR_COLS 4096
#define MC_DR_ACTION_COOLDOWN_MS 30000		/* upstream's kDynamicReplicationActionCooldown */
#define MC_DR_RECREATE_COOLDOWN_MS 60000	/* kDynamicReplicationRecreateCooldown */
#define MC_DR_REMEMBER_MS 600000
#define MC_DR_MAX_KEYS 65536
#define MC_DR_BUCKETS 8192

/* A key that was given a dynamic replica. */
struct mc_dr_key {
	struct mc_dr_key *next;
	uint64_t id;			/* hash of tenant and key */
	uint64_t gen;			/* the object's generation at the action */
	int64_t until;			/* monotonic ms: no new replica before */
	int64_t forget_at;		/* monotonic ms */
	uint32_t reps;			/* memory replicas the copy left it with */
};

struct mc_dynrep {
	uint16_t c[MC_DR_ROWS][MC_DR_COLS];
	int64_t window_start;
	int mode;		/* 0 off, 1 observe, 2 enforce */
	uint64_t hot, tasks;	/* keys found hot, copy tasks made for them */
	uint64_t cooling;	/* hot keys passed over for a cooldown */
	struct mc_dr_key *keys[MC_DR_BUCKETS];
	uint32_t nkeys;
	uint32_t prune_next;	/* the bucket the tick's pruning looks at next */
};

static uint64_t mc_dr_key_id(const struct mc_object *o)
{
	uint64_t h = 1469598103934665603ull ^ o->tenant;
	uint16_t i;

	for (i = 0; i < o->key_len; i++)
		h = (h ^ (uint8_t)o->key[i]) * 1099511628211ull;
	return h ? h : 1;
}

static struct mc_dr_key **mc_dr_slot(struct mc_dynrep *d, uint64_t id)
{
	struct mc_dr_key **pp = &d->keys[(id ^ (id >> 29)) % MC_DR_BUCKETS];

	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	return pp;
}

/* Forget the keys whose memory is over (the tick, a bucket a second at least). */
static void mc_dr_prune(struct mc_dynrep *d, int64_t now, uint32_t buckets)
{
	uint32_t i;

	for (i = 0; i < buckets; i++, d->prune_next = (d->prune_next + 1) % MC_DR_BUCKETS) {
		struct mc_dr_key **pp = &d->keys[d->prune_next];

		while (*pp) {
			struct mc_dr_key *k = *pp;

			if (k->forget_at > now) {
				pp = &k->next;
				continue;
			}
			*pp = k->next;
			free(k);
			d->nkeys--;
		}
	}
}

/* May o, hot with mem readable memory replicas, be given one now?  Starts the recreate
 * cooldown when its dynamic replica is found gone. */
static int mc_dr_may_act(struct mc_dynrep *d, struct mc_object *o, uint32_t mem, int64_t now)
{
	struct mc_dr_key *k = *mc_dr_slot(d, mc_dr_key_id(o));

	if (k == NULL || k->gen != o->gen)
		return 1;
	if (mem < k->reps) {
		/* Its dynamic replica went since: upstream's recreate cooldown, from now. */
		k->until = now + MC_DR_RECREATE_COOLDOWN_MS;
		k->reps = mem;
		k->forget_at = k->until + MC_DR_REMEMBER_MS;
	}
	return now >= k->until;
}

/* A copy task was made for o: remember it (the action cooldown). */
static void mc_dr_acted(struct mc_dynrep *d, struct mc_object *o, uint32_t reps, int64_t now)
{
	uint64_t id = mc_dr_key_id(o);
	struct mc_dr_key **pp = mc_dr_slot(d, id), *k = *pp;

	if (k == NULL) {
		if (d->nkeys >= MC_DR_MAX_KEYS)
			mc_dr_prune(d, now, MC_DR_BUCKETS);
		if (d->nkeys >= MC_DR_MAX_KEYS)
			return;		/* all remembered keys cooling: this one goes unremembered */
		k = mc_xcalloc(1, sizeof(*k));
		k->id = id;
		k->next = d->keys[(id ^ (id >> 29)) % MC_DR_BUCKETS];
		d->keys[(id ^ (id >> 29)) % MC_DR_BUCKETS] = k;
		d->nkeys++;
	}
	k->gen = o->gen;
	k->reps = reps;
	k->until = now + MC_DR_ACTION_COOLDOWN_MS;
	k->forget_at = k->until + MC_DR_REMEMBER_MS;
}

void mc_dynrep_init(struct mc_master *m)
{
	const char *mode = m->cfg.dynrep.dynamic_replication_mode;

	m->dynrep = mc_xcalloc(1, sizeof(*m->dynrep));
	m->dynrep->mode = !strcmp(mode, "enforce") ? 2 : !strcmp(mode, "observe") ? 1 : 0;
	m->dynrep->window_start = mc_master_now(m);
}

void mc_dynrep_fini(struct mc_master *m)
{
	if (m->dynrep)
		mc_dr_prune(m->dynrep, INT64_MAX, MC_DR_BUCKETS);
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
	mc_dr_prune(d, now, MC_DR_BUCKETS / 64);
}

void mc_dynrep_on_read(struct mc_master *m, struct mc_object *o)
{
	struct mc_dynrep *d = m->dynrep;
	uint32_t h, est = UINT16_MAX, need, i, mem = 0;
	uint16_t *cells[MC_DR_ROWS];
	struct mc_segment *target;
	struct mc_uuid id;
	char why[160];
	int r;

	if (d == NULL || d->mode == 0)
		return;
	h = mc_object_rehash(o);	/* objects keep no hash: the key's, as the index has it */
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
	if (d->mode != 2)
		return;
	if (!mc_dr_may_act(d, o, mem, mc_master_now(m))) {
		d->cooling++;
		return;
	}
	if ((target = mc_task_pick_target(m, o, NULL, 0)) == NULL)
		return;
	{
		struct mc_strv key = { o->key, o->key_len }, none = { "", 0 };
		struct mc_strv tgt = mc_strv_c(target->name);

		if (mc_task_create(m, MC_TASK_REPLICA_COPY, o->tenant, key, none, &tgt, 1, NULL,
				   &id, why, sizeof(why)) == 0) {
			d->tasks++;
			mc_dr_acted(d, o, mem + 1, mc_master_now(m));
		}
	}
}

void mc_dynrep_counts(const struct mc_master *m, uint64_t *hot, uint64_t *tasks,
		      uint64_t *cooling)
{
	*hot = m->dynrep ? m->dynrep->hot : 0;
	*tasks = m->dynrep ? m->dynrep->tasks : 0;
	*cooling = m->dynrep ? m->dynrep->cooling : 0;
}

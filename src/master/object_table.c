/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Open-addressing hash table of objects with linear probing and tombstones, plus the LRU list.
 * See object_table.h for the memory budget.  The table grows at 0.75 load (counting tombstones)
 * and rehashes in place of tombstones when they dominate.  The eviction list's two policies are
 * described in object_table.h.
 */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "master/master.h"
#include "master/object_table.h"

#define MC_TOMBSTONE ((struct mc_object *)(uintptr_t)1)

uint32_t mc_object_hash(const char *key, size_t len)
{
	/* FNV-1a, 64-bit, folded: fast, good enough with linear probing and a power-of-two size
	 * because the fold mixes the high bits in. */
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (uint32_t)h;
}

int mc_object_table_init(struct mc_object_table *t)
{
	memset(t, 0, sizeof(*t));
	t->cap = 1024;
	t->slots = mc_xcalloc(t->cap, sizeof(*t->slots));
	t->lru.lru_prev = t->lru.lru_next = &t->lru;
	t->mark.flags = MC_OBJ_HARD_PIN;
	t->protected_pct = MC_PREFIX_PROTECTED_PCT;
	t->batch_hint = -1;
	t->all_tenants = 1;
	return 0;
}

void mc_object_table_set_policy(struct mc_object_table *t, int policy, unsigned protected_pct)
{
	t->policy = (uint8_t)policy;
	t->protected_pct = protected_pct;
	if (policy == MC_EVICT_POLICY_PREFIX && t->mark.lru_next == NULL) {
		/* The marker goes at the tail: everything already listed is probation. */
		t->mark.lru_prev = t->lru.lru_prev;
		t->mark.lru_next = &t->lru;
		t->lru.lru_prev->lru_next = &t->mark;
		t->lru.lru_prev = &t->mark;
	}
}

/* Keep the protected part within its cap: its oldest objects become the newest of probation
 * (the marker steps over them), with one use left to count.  Amortised O(1): each placement
 * adds at most one protected object. */
static void mc_evlist_rebalance(struct mc_object_table *t)
{
	while (t->protected_count > 0 &&
	       t->protected_count * 100 > (size_t)t->protected_pct * t->lru_count) {
		struct mc_object *x = t->mark.lru_next, *m = &t->mark;

		if (t->anchor[1] == x)
			t->anchor[1] = NULL;
		/* swap the marker and x */
		m->lru_prev->lru_next = x;
		x->lru_prev = m->lru_prev;
		m->lru_next = x->lru_next;
		x->lru_next->lru_prev = m;
		x->lru_next = m;
		m->lru_prev = x;
		x->evstate = (uint8_t)((x->evstate & ~(MC_EVS_PROTECTED | MC_EVS_USES)) | 1u);
		t->protected_count--;
	}
}

static void mc_evlist_unlink(struct mc_object_table *t, struct mc_object *o)
{
	o->lru_prev->lru_next = o->lru_next;
	o->lru_next->lru_prev = o->lru_prev;
	if (t->anchor[0] == o)
		t->anchor[0] = NULL;
	if (t->anchor[1] == o)
		t->anchor[1] = NULL;
	if (t->batch_last == o)
		t->batch_last = NULL;
	if (o->evstate & MC_EVS_PROTECTED) {
		t->protected_count--;
		o->evstate &= (uint8_t)~MC_EVS_PROTECTED;
	}
	t->lru_count--;
	mc_evlist_rebalance(t);
}

static void mc_evlist_link_before(struct mc_object *at, struct mc_object *o)
{
	o->lru_next = at;
	o->lru_prev = at->lru_prev;
	at->lru_prev->lru_next = o;
	at->lru_prev = o;
}

/* Put o (not on the list) on it: lru: at the tail; prefix: in probation (prot 0) or protected
 * (prot 1), just before the object the current batch placed there last, else at the recent end
 * of that part. */
static void mc_evlist_place(struct mc_object_table *t, struct mc_object *o, int prot)
{
	struct mc_object *at = &t->lru;

	if (t->policy == MC_EVICT_POLICY_PREFIX) {
		at = t->anchor[prot] ? t->anchor[prot] : prot ? &t->lru : &t->mark;
		t->anchor[prot] = o;
		if (prot) {
			o->evstate |= MC_EVS_PROTECTED;
			t->protected_count++;
		}
	}
	mc_evlist_link_before(at, o);
	t->lru_count++;
	t->batch_last = o;
	t->batch_last_new = (o->evstate & MC_EVS_USES) <= 1 && !prot;
	t->batch_n++;
	if (prot)
		mc_evlist_rebalance(t);
}

void mc_object_batch_begin(struct mc_object_table *t)
{
	t->anchor[0] = t->anchor[1] = NULL;
	t->batch_last = NULL;
	t->batch_n = 0;
	t->batch_hint = -1;
}

void mc_object_batch_hint(struct mc_object_table *t, int hint)
{
	t->batch_hint = hint;
}

void mc_object_batch_end(struct mc_object_table *t)
{
	struct mc_object *o = t->batch_last;
	int hint = t->batch_hint, cold;
	size_t n;

	t->batch_last = NULL;
	t->anchor[0] = t->anchor[1] = NULL;
	t->batch_hint = -1;
	n = t->batch_n;
	t->batch_n = 0;
	if (o == NULL || !t->batch_last_new || t->policy != MC_EVICT_POLICY_PREFIX)
		return;
	if ((o->evstate & MC_EVS_USES) == 0) {
		/* Placed by its put: the last block of a request's chain is partial, and cold
		 * (see object_table.h), unless the writer said otherwise. */
		cold = hint >= 0 ? (hint & MC_EVICT_HINT_LAST_PARTIAL) != 0 : n >= 2;
		if (cold)
			o->evstate |= MC_EVS_TAIL;
	} else {
		cold = (o->evstate & MC_EVS_TAIL) != 0;	/* its first use: as its put found */
	}
	if (!cold)
		return;
	mc_evlist_unlink(t, o);
	mc_evlist_link_before(t->lru.lru_next, o);
	t->lru_count++;
}

struct mc_object *mc_object_evict_next(struct mc_object_table *t, struct mc_object *o)
{
	struct mc_object *n = o->lru_next;

	if (n == &t->mark)
		n = n->lru_next;
	return n == &t->lru ? NULL : n;
}

struct mc_object *mc_object_evict_first(struct mc_object_table *t)
{
	return mc_object_evict_next(t, &t->lru);
}

void mc_object_table_fini(struct mc_object_table *t)
{
	size_t i;

	for (i = 0; i < t->cap; i++) {
		struct mc_object *o = t->slots[i];

		if (o != NULL && o != MC_TOMBSTONE) {
			free(o->extra);
			free(o);
		}
	}
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

static void mc_object_table_resize(struct mc_object_table *t, size_t cap)
{
	struct mc_object **old = t->slots;
	size_t oldcap = t->cap, i;

	t->slots = mc_xcalloc(cap, sizeof(*t->slots));
	t->cap = cap;
	t->tombstones = 0;
	for (i = 0; i < oldcap; i++) {
		struct mc_object *o = old[i];
		size_t j;

		if (o == NULL || o == MC_TOMBSTONE)
			continue;
		j = o->hash & (cap - 1);
		while (t->slots[j] != NULL)
			j = (j + 1) & (cap - 1);
		t->slots[j] = o;
	}
	free(old);
}

/* The hash of key in tenant's namespace (the default tenant's is the key's own). */
static uint32_t mc_object_hash_in(uint16_t tenant, const char *key, size_t len)
{
	uint32_t h = mc_object_hash(key, len);

	return tenant ? h ^ (uint32_t)tenant * 0x9e3779b1u : h;
}

struct mc_object *mc_object_find(struct mc_object_table *t, const char *key, size_t len)
{
	uint32_t h = mc_object_hash_in(t->tenant, key, len);
	size_t i = h & (t->cap - 1);
	struct mc_object *o;

	while ((o = t->slots[i]) != NULL) {
		if (o != MC_TOMBSTONE && o->hash == h && o->key_len == len &&
		    o->tenant == t->tenant && memcmp(o->key, key, len) == 0)
			return o;
		i = (i + 1) & (t->cap - 1);
	}
	return NULL;
}

struct mc_object *mc_object_insert(struct mc_object_table *t, const char *key, size_t len,
				   uint32_t nrep)
{
	struct mc_object *o;
	size_t i;

	if ((t->count + t->tombstones + 1) * 4 > t->cap * 3)
		mc_object_table_resize(t, t->count * 2 + 1 > t->cap / 2 ? t->cap * 2 : t->cap);
	o = mc_xcalloc(1, sizeof(*o) + len);
	memcpy(o->key, key, len);
	o->key_len = (uint16_t)len;
	o->tenant = t->tenant;
	o->hash = mc_object_hash_in(t->tenant, key, len);
	o->nrep = (uint8_t)nrep;
	if (nrep > 1)
		o->extra = mc_xcalloc(nrep - 1, sizeof(*o->extra));
	for (i = 0; i < nrep; i++)
		mc_object_replica(o, (uint32_t)i)->obj = o;
	i = o->hash & (t->cap - 1);
	while (t->slots[i] != NULL && t->slots[i] != MC_TOMBSTONE)
		i = (i + 1) & (t->cap - 1);
	if (t->slots[i] == MC_TOMBSTONE)
		t->tombstones--;
	t->slots[i] = o;
	t->count++;
	t->key_bytes += len;
	/* New objects start at the most-recently-used end (prefix: of probation). */
	mc_evlist_place(t, o, 0);
	o->flags |= MC_OBJ_IN_LRU;
	return o;
}

void mc_object_erase(struct mc_object_table *t, struct mc_object *o)
{
	size_t i = o->hash & (t->cap - 1);

	if (t->on_erase)
		t->on_erase(t->on_erase_arg, o);

	while (t->slots[i] != o)
		i = (i + 1) & (t->cap - 1);
	/* A following empty slot means no probe chain passes through: no tombstone needed. */
	if (t->slots[(i + 1) & (t->cap - 1)] == NULL) {
		t->slots[i] = NULL;
	} else {
		t->slots[i] = MC_TOMBSTONE;
		t->tombstones++;
	}
	t->count--;
	t->key_bytes -= o->key_len;
	if (o->flags & MC_OBJ_SOFT_PIN)
		t->soft_pinned--;
	if (o->flags & MC_OBJ_IN_LRU)
		mc_evlist_unlink(t, o);
	free(o->extra);
	free(o);
	/* No rehash here, so erasing while iterating is safe; insert compacts tombstones. */
}

struct mc_replica *mc_object_replica(struct mc_object *o, uint32_t i)
{
	return i == 0 ? &o->rep0 : &o->extra[i - 1];
}

void mc_object_touch(struct mc_object_table *t, struct mc_object *o)
{
	unsigned uses;
	int prot;

	if (!(o->flags & MC_OBJ_IN_LRU))
		return;
	if (t->policy != MC_EVICT_POLICY_PREFIX) {
		if (t->lru.lru_prev == o)
			return;
		mc_evlist_unlink(t, o);
		mc_evlist_place(t, o, 0);
		return;
	}
	uses = o->evstate & MC_EVS_USES;
	if (uses < MC_EVS_USES)
		uses++;
	prot = (o->evstate & MC_EVS_PROTECTED) || uses >= 2;
	mc_evlist_unlink(t, o);
	o->evstate = (uint8_t)((o->evstate & ~(MC_EVS_USES | (prot ? MC_EVS_TAIL : 0))) | uses);
	mc_evlist_place(t, o, prot);
}

struct mc_object *mc_object_next(struct mc_object_table *t, size_t *pos)
{
	while (*pos < t->cap) {
		struct mc_object *o = t->slots[(*pos)++];

		if (o != NULL && o != MC_TOMBSTONE && mc_object_in_scope(t, o))
			return o;
	}
	return NULL;
}

void mc_object_lru_unlink(struct mc_object_table *t, struct mc_object *o)
{
	if (!(o->flags & MC_OBJ_IN_LRU))
		return;
	mc_evlist_unlink(t, o);
	o->lru_prev = o->lru_next = NULL;
	o->flags &= (uint8_t)~MC_OBJ_IN_LRU;
}

void mc_object_lru_link(struct mc_object_table *t, struct mc_object *o)
{
	if (o->flags & MC_OBJ_IN_LRU)
		return;
	mc_evlist_place(t, o, 0);
	o->flags |= MC_OBJ_IN_LRU;
}

/* The replica moved to r: make its segment-list neighbours point at the new place. */
static void mc_replica_relink(struct mc_replica *r)
{
	if (r->seg == NULL)
		return;
	if (r->seg_prev)
		r->seg_prev->seg_next = r;
	else
		r->seg->reps = r;
	if (r->seg_next)
		r->seg_next->seg_prev = r;
}

struct mc_replica *mc_object_add_replica(struct mc_object *o)
{
	struct mc_replica *extra, *r;
	uint32_t i;

	if (o->nrep >= 64)
		return NULL;
	if (o->nrep == 0) {
		r = &o->rep0;
	} else {
		extra = mc_xcalloc(o->nrep, sizeof(*extra));
		for (i = 0; i + 1 < o->nrep; i++) {
			extra[i] = o->extra[i];
			mc_replica_relink(&extra[i]);
		}
		free(o->extra);
		o->extra = extra;
		r = &extra[o->nrep - 1];
	}
	memset(r, 0, sizeof(*r));
	r->obj = o;
	o->nrep++;
	return r;
}

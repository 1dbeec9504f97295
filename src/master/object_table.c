/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The object table: objects (allocated from the table's arena), their hash index (object_index.c)
 * and the eviction list.  See object_table.h for the memory budget; the eviction list's two
 * policies are described there too.
 *
 * The arena hands out objects in 8-byte size classes from 2 MiB chunks and keeps freed objects
 * on a list per class: no malloc header, no 16-byte rounding, no search.  In sanitizer builds
 * free space is poisoned, so a use after mc_object_erase is still reported.
 */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "master/master.h"
#include "master/object_table.h"

#if defined(__SANITIZE_ADDRESS__)
#define MC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MC_ASAN 1
#endif
#endif
#ifdef MC_ASAN
#include <sanitizer/asan_interface.h>
#define MC_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define MC_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define MC_POISON(p, n) ((void)(p), (void)(n))
#define MC_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define MC_ARENA_CHUNK ((size_t)2 << 20)
#define MC_ARENA_HDR 16			/* chunk chain word, kept 16-aligned */

static inline uint64_t mc_hash_mix(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t mc_hash_load(const char *p, size_t n)
{
	uint64_t v = 0;

	memcpy(&v, p, n);
	return v;
}

uint32_t mc_object_hash(const char *key, size_t len)
{
	/* Eight bytes a step, each pair of words folded by a 64x64->128 multiply: a few cycles
	 * for a 40-byte key where FNV-1a took one multiply per byte. */
	const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
		       k2 = 0x8ebc6af09c88c6e3ull;
	uint64_t h = len ^ k0;
	size_t i = 0;

	for (; i + 16 <= len; i += 16)
		h = mc_hash_mix(mc_hash_load(key + i, 8) ^ k1 ^ h, mc_hash_load(key + i + 8, 8) ^ k2);
	if (len - i > 8)
		h = mc_hash_mix(mc_hash_load(key + i, 8) ^ k1 ^ h,
				mc_hash_load(key + i + 8, len - i - 8) ^ k2);
	else
		h = mc_hash_mix(mc_hash_load(key + i, len - i) ^ k1 ^ h, k2);
	h = mc_hash_mix(h ^ k0, (uint64_t)len ^ k1);
	return (uint32_t)(h ^ (h >> 32));
}

/* ------------------------------------------------------------------------ arena */

static inline size_t mc_arena_class(size_t bytes)
{
	return (bytes + 7) / 8;
}

static void mc_arena_push(struct mc_obj_arena *a, void *p, size_t cls)
{
	MC_UNPOISON(p, sizeof(void *));	/* a chunk's unused tail is poisoned */
	*(void **)p = a->free[cls];
	a->free[cls] = p;
	MC_POISON(p, cls * 8);
}

/* A zeroed object of bytes bytes.  Aborts on out-of-memory. */
static void *mc_arena_get(struct mc_obj_arena *a, size_t bytes)
{
	size_t cls = mc_arena_class(bytes), sz = cls * 8;
	void *p;

	if (sz > MC_OBJ_ARENA_MAX)
		return mc_xcalloc(1, bytes);
	p = a->free[cls];
	if (p != NULL) {
		MC_UNPOISON(p, sz);
		a->free[cls] = *(void **)p;
	} else {
		if (a->left < sz) {
			char *c = mc_xmalloc(MC_ARENA_CHUNK);

			/* The old chunk's tail serves its own class later. */
			if (a->left >= sizeof(struct mc_object))
				mc_arena_push(a, a->bump, a->left / 8);
			*(void **)c = a->chunks;
			a->chunks = c;
			a->chunk_bytes += MC_ARENA_CHUNK;
			a->bump = c + MC_ARENA_HDR;
			a->left = MC_ARENA_CHUNK - MC_ARENA_HDR;
			MC_POISON(a->bump, a->left);
		}
		p = a->bump;
		a->bump += sz;
		a->left -= sz;
		MC_UNPOISON(p, sz);
	}
	memset(p, 0, sz);
	return p;
}

static void mc_arena_put(struct mc_obj_arena *a, void *p, size_t bytes)
{
	size_t cls = mc_arena_class(bytes);

	if (cls * 8 > MC_OBJ_ARENA_MAX)
		free(p);
	else
		mc_arena_push(a, p, cls);
}

static void mc_arena_fini(struct mc_obj_arena *a)
{
	void *c = a->chunks;

	while (c != NULL) {
		void *next;

		MC_UNPOISON(c, MC_ARENA_CHUNK);
		next = *(void **)c;
		free(c);
		c = next;
	}
	memset(a, 0, sizeof(*a));
}

static inline size_t mc_object_bytes(const struct mc_object *o)
{
	return sizeof(*o) + o->key_len;
}

/* ------------------------------------------------------------------------ table */

int mc_object_table_init(struct mc_object_table *t)
{
	memset(t, 0, sizeof(*t));
	mc_oindex_init(&t->index);
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
	struct mc_object *o;
	size_t pos = 0;

	t->all_tenants = 1;
	while ((o = mc_oindex_next(&t->index, &pos)) != NULL) {
		free(o->extra);
		if (mc_object_bytes(o) > MC_OBJ_ARENA_MAX)
			free(o);
	}
	mc_oindex_fini(&t->index);
	mc_arena_fini(&t->arena);
	memset(t, 0, sizeof(*t));
}

/* The hash of key in tenant's namespace (the default tenant's is the key's own). */
static uint32_t mc_object_hash_in(uint16_t tenant, const char *key, size_t len)
{
	uint32_t h = mc_object_hash(key, len);

	return tenant ? h ^ (uint32_t)tenant * 0x9e3779b1u : h;
}

struct mc_object_probe {
	const char *key;
	size_t len;
	uint32_t h;
	uint16_t tenant;
};

static int mc_object_probe_eq(const struct mc_object *o, const void *arg)
{
	const struct mc_object_probe *p = arg;

	return o->hash == p->h && o->key_len == p->len && o->tenant == p->tenant &&
	       memcmp(o->key, p->key, p->len) == 0;
}

struct mc_object *mc_object_find(struct mc_object_table *t, const char *key, size_t len)
{
	struct mc_object_probe p = { key, len, mc_object_hash_in(t->tenant, key, len), t->tenant };

	return mc_oindex_find(&t->index, p.h, mc_object_probe_eq, &p);
}

struct mc_object *mc_object_insert(struct mc_object_table *t, const char *key, size_t len,
				   uint32_t nrep)
{
	struct mc_object *o;
	size_t i;

	o = mc_arena_get(&t->arena, sizeof(*o) + len);
	memcpy(o->key, key, len);
	o->key_len = (uint16_t)len;
	o->tenant = t->tenant;
	o->hash = mc_object_hash_in(t->tenant, key, len);
	o->nrep = (uint8_t)nrep;
	if (nrep > 1)
		o->extra = mc_xcalloc(nrep - 1, sizeof(*o->extra));
	for (i = 0; i < nrep; i++)
		mc_object_replica(o, (uint32_t)i)->obj = o;
	mc_oindex_insert(&t->index, o);
	t->count++;
	t->key_bytes += len;
	/* New objects start at the most-recently-used end (prefix: of probation). */
	mc_evlist_place(t, o, 0);
	o->flags |= MC_OBJ_IN_LRU;
	return o;
}

void mc_object_erase(struct mc_object_table *t, struct mc_object *o)
{
	if (t->on_erase)
		t->on_erase(t->on_erase_arg, o);
	/* Moves no other object, so erasing while iterating is safe. */
	mc_oindex_erase(&t->index, o);
	t->count--;
	t->key_bytes -= o->key_len;
	if (o->flags & MC_OBJ_SOFT_PIN)
		t->soft_pinned--;
	if (o->flags & MC_OBJ_IN_LRU)
		mc_evlist_unlink(t, o);
	free(o->extra);
	mc_arena_put(&t->arena, o, mc_object_bytes(o));
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
	struct mc_object *o;

	while ((o = mc_oindex_next(&t->index, pos)) != NULL)
		if (mc_object_in_scope(t, o))
			return o;
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

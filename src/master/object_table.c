/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The object table: objects (allocated from the table's arena), their hash index (object_index.c)
 * and the eviction list.  See object_table.h for the memory budget; the eviction list's two
 * policies are described there too.
 *
 * The arena hands out objects in 8-byte size classes from one reserved range of address space
 * and keeps freed objects on a list per class: no malloc header, no 16-byte rounding, no
 * search, and an object is named by a 32-bit reference.  In sanitizer builds free space is
 * poisoned, so a use after mc_object_erase is still reported.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "master/object_table.h"
#include "master/prefault.h"
#include "proto/rpc.h"

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

#define MC_ARENA_CHUNK ((size_t)2 << 20)	/* made usable at a time */
/* ------------------------------------------------------------------------ arena */

static inline size_t mc_arena_class(size_t bytes)
{
	return (bytes + MC_OBJ_ARENA_UNIT - 1) / MC_OBJ_ARENA_UNIT;
}

/* Makes [a->mapped, a->mapped + grow) usable and has the prefaulter populate it (started
 * here, the first time the arena grows: small tables never start a thread).  Aborts on
 * failure. */
static void mc_arena_grow(struct mc_obj_arena *a, size_t grow)
{
	char *start = (char *)a;

	if (!a->pf_tried) {
		a->pf_tried = 1;
		a->pf = mc_prefault_new();
	}

	if (a->mapped + grow > MC_OBJ_ARENA_BYTES ||
	    mprotect(start + a->mapped, grow, PROT_READ | PROT_WRITE) != 0) {
		mc_log_err("object table: no room for another object (%zu MiB of objects): %s",
			   a->mapped >> 20,
			   a->mapped + grow > MC_OBJ_ARENA_BYTES ? "arena full" : strerror(errno));
		abort();
	}
	mc_prefault_ask(a->pf, start + a->mapped, grow);
	MC_POISON(start + a->mapped, grow);
	a->mapped += grow;
}

/* A new arena: address space only (PROT_NONE takes no memory and no commit charge), aligned
 * to its size so that mc_obj_arena_of finds it from any address inside. */
static struct mc_obj_arena *mc_arena_new(void)
{
	size_t hdr = (sizeof(struct mc_obj_arena) + 63) & ~(size_t)63, grow;
	char *raw, *start;
	struct mc_obj_arena *a;

	raw = mmap(NULL, 2 * MC_OBJ_ARENA_BYTES, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED) {
		mc_log_err("object table: reserving %zu GiB of address space: %s",
			   2 * MC_OBJ_ARENA_BYTES >> 30, strerror(errno));
		abort();
	}
	start = (char *)(((uintptr_t)raw + MC_OBJ_ARENA_BYTES - 1) &
			 ~(uintptr_t)(MC_OBJ_ARENA_BYTES - 1));
	grow = (hdr + MC_ARENA_CHUNK - 1) / MC_ARENA_CHUNK * MC_ARENA_CHUNK;
	if (mprotect(start, grow, PROT_READ | PROT_WRITE) != 0) {
		mc_log_err("object table: arena header: %s", strerror(errno));
		abort();
	}
	a = (struct mc_obj_arena *)(void *)start;
	memset(a, 0, sizeof(*a));
	a->reserved = raw;
	a->mapped = grow;
	a->bump = hdr;
	MC_POISON(start + hdr, grow - hdr);
	return a;
}

/* A zeroed object of bytes bytes.  Aborts on out-of-memory or a full arena. */
static void *mc_arena_get(struct mc_obj_arena *a, size_t bytes)
{
	size_t cls = mc_arena_class(bytes), sz = cls * MC_OBJ_ARENA_UNIT;
	char *p = a->free[cls];

	if (p != NULL) {
		MC_UNPOISON(p, sz);
		a->free[cls] = *(void **)p;
	} else {
		/* With a prefaulter the arena stays a chunk ahead of the bump pointer: the chunk
		 * is populated by the time objects reach it. */
		size_t need = a->bump + sz + (a->pf ? MC_ARENA_CHUNK : 0);

		if (need > MC_OBJ_ARENA_BYTES)
			need = a->bump + sz;
		if (need > a->mapped) {
			size_t grow = MC_ARENA_CHUNK;

			while (a->mapped + grow < need)
				grow += MC_ARENA_CHUNK;
			mc_arena_grow(a, grow);
		}
		p = (char *)a + a->bump;
		a->bump += sz;
		MC_UNPOISON(p, sz);
	}
	memset(p, 0, sz);
	return p;
}

static void mc_arena_put(struct mc_obj_arena *a, void *p, size_t bytes)
{
	size_t cls = mc_arena_class(bytes);

	*(void **)p = a->free[cls];
	a->free[cls] = p;
	MC_POISON(p, cls * MC_OBJ_ARENA_UNIT);
}

static void mc_arena_free(struct mc_obj_arena *a)
{
	if (a != NULL) {
		mc_prefault_free(a->pf);	/* before its ranges go */
		MC_UNPOISON(a, a->mapped);
		munmap(a->reserved, 2 * MC_OBJ_ARENA_BYTES);
	}
}

static inline size_t mc_object_bytes(const struct mc_object *o)
{
	return sizeof(*o) + o->key_len;
}

/* ------------------------------------------------------------------------ table */

#define P(r) mc_oref_ptr((const char *)t->arena, (r))
#define R(o) mc_oref_of((const char *)t->arena, (o))

int mc_object_table_init(struct mc_object_table *t)
{
	memset(t, 0, sizeof(*t));
	t->arena = mc_arena_new();
	mc_oindex_init(&t->index);
	t->index.base = (const char *)t->arena;
	t->lru = mc_arena_get(t->arena, sizeof(struct mc_object));
	t->mark = mc_arena_get(t->arena, sizeof(struct mc_object));
	t->lru->lru_prev = t->lru->lru_next = R(t->lru);
	t->mark->flags = MC_OBJ_HARD_PIN;
	t->protected_pct = MC_PREFIX_PROTECTED_PCT;
	t->batch_hint = -1;
	t->all_tenants = 1;
	return 0;
}

void mc_object_table_reserve(struct mc_object_table *t, size_t n)
{
	mc_oindex_reserve(&t->index, n);
}

void mc_object_prefetch_key(const struct mc_object_table *t, const char *key, size_t len)
{
	mc_oindex_prefetch(&t->index, mc_object_hash_in(t->tenant, key, len));
}

void mc_object_table_set_policy(struct mc_object_table *t, int policy, unsigned protected_pct)
{
	t->policy = (uint8_t)policy;
	t->protected_pct = protected_pct;
	if (policy == MC_EVICT_POLICY_PREFIX && t->mark->lru_next == 0) {
		/* The marker goes at the tail: everything already listed is probation. */
		t->mark->lru_prev = t->lru->lru_prev;
		t->mark->lru_next = R(t->lru);
		P(t->lru->lru_prev)->lru_next = R(t->mark);
		t->lru->lru_prev = R(t->mark);
	}
}

/* Keep the protected part within its cap: its oldest objects become the newest of probation
 * (the marker steps over them), with one use left to count.  Amortised O(1): each placement
 * adds at most one protected object. */
static void mc_evlist_rebalance(struct mc_object_table *t)
{
	while (t->protected_count > 0 &&
	       t->protected_count * 100 > (size_t)t->protected_pct * t->lru_count) {
		struct mc_object *m = t->mark, *x = P(m->lru_next);

		if (t->anchor[1] == x)
			t->anchor[1] = NULL;
		/* swap the marker and x */
		P(m->lru_prev)->lru_next = R(x);
		x->lru_prev = m->lru_prev;
		m->lru_next = x->lru_next;
		P(x->lru_next)->lru_prev = R(m);
		x->lru_next = R(m);
		m->lru_prev = R(x);
		x->evstate = (uint8_t)((x->evstate & ~(MC_EVS_PROTECTED | MC_EVS_USES)) | 1u);
		t->protected_count--;
	}
}

static void mc_evlist_unlink(struct mc_object_table *t, struct mc_object *o)
{
	P(o->lru_prev)->lru_next = o->lru_next;
	P(o->lru_next)->lru_prev = o->lru_prev;
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

static void mc_evlist_link_before(struct mc_object_table *t, struct mc_object *at,
				  struct mc_object *o)
{
	o->lru_next = R(at);
	o->lru_prev = at->lru_prev;
	P(at->lru_prev)->lru_next = R(o);
	at->lru_prev = R(o);
}

/* Put o (not on the list) on it: lru: at the tail; prefix: in probation (prot 0) or protected
 * (prot 1), just before the object the current batch placed there last, else at the recent end
 * of that part. */
static void mc_evlist_place(struct mc_object_table *t, struct mc_object *o, int prot)
{
	struct mc_object *at = t->lru;

	if (t->policy == MC_EVICT_POLICY_PREFIX) {
		at = t->anchor[prot] ? t->anchor[prot] : prot ? t->lru : t->mark;
		t->anchor[prot] = o;
		if (prot) {
			o->evstate |= MC_EVS_PROTECTED;
			t->protected_count++;
		}
	}
	mc_evlist_link_before(t, at, o);
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
	mc_evlist_link_before(t, P(t->lru->lru_next), o);
	t->lru_count++;
}

struct mc_object *mc_object_evict_next(struct mc_object_table *t, struct mc_object *o)
{
	struct mc_object *n = P(o->lru_next);

	if (n == t->mark)
		n = P(n->lru_next);
	return n == t->lru ? NULL : n;
}

struct mc_object *mc_object_evict_first(struct mc_object_table *t)
{
	return mc_object_evict_next(t, t->lru);
}

void mc_object_table_fini(struct mc_object_table *t)
{
	/* Objects, side records and side arrays all live in the arena.  The prefaulter stops
	 * first: it may be populating an index array. */
	mc_prefault_free(t->arena->pf);
	t->arena->pf = NULL;
	mc_oindex_fini(&t->index);
	mc_arena_free(t->arena);
	memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------------------ writer */

struct mc_client *mc_object_writer(const struct mc_master *m, const struct mc_object *o)
{
	return o->writer && o->writer < m->nclient_refs ? m->client_refs[o->writer] : NULL;
}

uint32_t mc_client_ref(const struct mc_client *c)
{
	return c ? c->ref : 0;
}

/* ------------------------------------------------------------------------ side records */

/* o's side record, made (zeroed) if it has none.  Aborts on out-of-memory. */
static struct mc_object_side *mc_object_side_get(struct mc_object *o)
{
	struct mc_obj_arena *a = mc_obj_arena_of(o);
	struct mc_object_side *s;

	if (o->side)
		return mc_object_side(o);
	s = mc_arena_get(a, sizeof(*s));
	o->side = mc_oref_of((const char *)a, (const struct mc_object *)(void *)s);
	return s;
}

/* Drop o's side record when nothing in it is in use. */
static void mc_object_side_trim(struct mc_object *o)
{
	struct mc_object_side *s = mc_object_side(o);

	if (s == NULL || s->soft_pin_until != 0 || s->extra != NULL)
		return;
	mc_arena_put(mc_obj_arena_of(o), s, sizeof(*s));
	o->side = 0;
}

/* Give o room for n replicas beyond the first (the side array grows by moving them: their
 * segment lists follow).  Aborts on out-of-memory. */
static void mc_replica_relink(struct mc_replica *r);

static void mc_object_extra_grow(struct mc_object *o, uint32_t n)
{
	struct mc_obj_arena *a = mc_obj_arena_of(o);
	struct mc_object_side *side = mc_object_side_get(o);
	struct mc_replica_x *x;
	uint32_t i, cap;

	if (side->nextra >= n)
		return;
	cap = side->nextra ? side->nextra * 2 : n;
	if (cap < n)
		cap = n;
	if (cap > 63)
		cap = 63;
	x = mc_arena_get(a, cap * sizeof(*x));
	for (i = 0; i < side->nextra; i++) {
		x[i] = side->extra[i];
		mc_replica_relink(&x[i].r);
	}
	if (side->extra)
		mc_arena_put(a, side->extra, side->nextra * sizeof(*x));
	side->extra = x;
	side->nextra = cap;
}

/* Frees o's side record and side array. */
static void mc_object_side_free(struct mc_object *o)
{
	struct mc_obj_arena *a = mc_obj_arena_of(o);
	struct mc_object_side *side = mc_object_side(o);

	if (side == NULL)
		return;
	if (side->extra)
		mc_arena_put(a, side->extra, side->nextra * sizeof(*side->extra));
	mc_arena_put(a, side, sizeof(*side));
	o->side = 0;
}

void mc_object_set_soft_pin_until(struct mc_object *o, int64_t until)
{
	if (until == 0 && o->side == 0)
		return;
	mc_object_side_get(o)->soft_pin_until = until;
	mc_object_side_trim(o);
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

	return o->key_len == p->len && o->tenant == p->tenant &&
	       memcmp(o->key, p->key, p->len) == 0;
}

uint32_t mc_object_key_hash(const struct mc_object_table *t, const char *key, size_t len)
{
	return mc_object_hash_in(t->tenant, key, len);
}

struct mc_object *mc_object_find_h(struct mc_object_table *t, const char *key, size_t len,
				   uint32_t h)
{
	struct mc_object_probe p = { key, len, h, t->tenant };

	return mc_oindex_find(&t->index, h, mc_object_probe_eq, &p);
}

struct mc_object *mc_object_find(struct mc_object_table *t, const char *key, size_t len)
{
	return mc_object_find_h(t, key, len, mc_object_key_hash(t, key, len));
}

/* More would leave the caches before their lookups. */
#define MC_PREFETCH_MAX 256

void mc_object_prefetch_h(const struct mc_object_table *t, const uint32_t *h, size_t n)
{
	/* A key's objects are fetched MC_PREFETCH_AHEAD keys after its groups, by when the groups
	 * have arrived. */
	enum { MC_PREFETCH_AHEAD = 16 };
	size_t i;

	if (n > MC_PREFETCH_MAX)
		n = MC_PREFETCH_MAX;
	for (i = 0; i < n + MC_PREFETCH_AHEAD; i++) {
		if (i >= MC_PREFETCH_AHEAD)
			mc_oindex_prefetch_objects(&t->index, h[i - MC_PREFETCH_AHEAD]);
		if (i < n)
			mc_oindex_prefetch(&t->index, h[i]);
	}
}

void mc_object_prefetch(const struct mc_object_table *t, const struct mc_strv *keys, size_t n)
{
	uint32_t h[MC_PREFETCH_MAX];
	size_t i;

	if (n > MC_PREFETCH_MAX)
		n = MC_PREFETCH_MAX;
	for (i = 0; i < n; i++)
		h[i] = mc_object_key_hash(t, keys[i].p, keys[i].n);
	mc_object_prefetch_h(t, h, n);
}

struct mc_object *mc_object_insert(struct mc_object_table *t, const char *key, size_t len,
				   uint32_t nrep)
{
	return mc_object_insert_h(t, key, len, mc_object_key_hash(t, key, len), nrep);
}

struct mc_object *mc_object_insert_h(struct mc_object_table *t, const char *key, size_t len,
				     uint32_t h, uint32_t nrep)
{
	struct mc_object *o;
	size_t i;

	o = mc_arena_get(t->arena, sizeof(*o) + len);
	memcpy(o->key, key, len);
	o->key_len = len;
	o->tenant = t->tenant;
	o->nrep = nrep;
	if (nrep > 1)
		mc_object_extra_grow(o, nrep - 1);
	for (i = 1; i < nrep; i++) {
		struct mc_object_side *side = mc_object_side(o);

		side->extra[i - 1].r.is_extra = 1;
		side->extra[i - 1].obj = o;
	}
	mc_oindex_insert(&t->index, o, h);
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
	mc_oindex_erase(&t->index, o, mc_object_rehash(o));
	t->count--;
	t->key_bytes -= o->key_len;
	if (o->flags & MC_OBJ_SOFT_PIN)
		t->soft_pinned--;
	if (o->flags & MC_OBJ_IN_LRU)
		mc_evlist_unlink(t, o);
	mc_object_side_free(o);
	mc_arena_put(t->arena, o, mc_object_bytes(o));
}

struct mc_replica *mc_object_replica(struct mc_object *o, uint32_t i)
{
	return i == 0 ? &o->rep0 : &mc_object_side(o)->extra[i - 1].r;
}

void mc_object_touch(struct mc_object_table *t, struct mc_object *o)
{
	unsigned uses;
	int prot;

	if (!(o->flags & MC_OBJ_IN_LRU))
		return;
	if (t->policy != MC_EVICT_POLICY_PREFIX) {
		if (t->lru->lru_prev == R(o))
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
	o->lru_prev = o->lru_next = 0;
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
/* The replica moved to r: make its segment-list neighbours point at the new place. */
static void mc_replica_relink(struct mc_replica *r)
{
	struct mc_replica *p, *n;

	if (r->seg == NULL)
		return;
	p = mc_replica_prev(r);
	n = mc_replica_next(r);
	if (p)
		p->seg_next = mc_replica_ref(r);
	else
		r->seg->reps = r;
	if (n)
		n->seg_prev = mc_replica_ref(r);
}

/* Copy the replica at src to dst (another place of the same object), which takes its place in
 * its segment's list; src is cleared.  Each keeps whether it is rep0 or an extra. */
static void mc_replica_move(struct mc_replica *dst, struct mc_replica *src)
{
	unsigned dx = dst->is_extra, sx = src->is_extra;

	*dst = *src;
	dst->is_extra = dx;
	mc_replica_relink(dst);
	memset(src, 0, sizeof(*src));
	src->is_extra = sx;
}

void mc_object_move_replica(struct mc_object *o, uint32_t to, uint32_t from)
{
	mc_replica_move(mc_object_replica(o, to), mc_object_replica(o, from));
}

struct mc_replica *mc_object_add_replica(struct mc_object *o)
{
	struct mc_replica *r;

	if (o->nrep >= 64)
		return NULL;
	if (o->nrep > 0)
		mc_object_extra_grow(o, o->nrep);
	r = mc_object_replica(o, o->nrep);
	memset(r, 0, sizeof(*r));
	if (o->nrep > 0) {
		r->is_extra = 1;
		mc_object_side(o)->extra[o->nrep - 1].obj = o;
	}
	o->nrep++;
	return r;
}

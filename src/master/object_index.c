/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The object table's hash index and its key hash: 64-byte groups of twelve tagged slots, probed
 * group by group from the key's home group, grown incrementally (object_index.h says why).
 *
 * A control byte is 0 (empty), 1 (tombstone: erased, probes go on) or 0x80 | tag (full).  A
 * lookup stops at the first group that has an empty slot.  That is sound because a group never
 * gets an empty slot back once it had none: an erase leaves an empty slot only in a group that
 * already has one (no probe has ever passed such a group), otherwise a tombstone.  Tombstones
 * count toward the load limit; a resize to the same size clears them when they dominate.
 *
 * Iteration positions are (array sequence number << 40) | slot, so a position names the array
 * it points into and stays meaningful when a resize starts or ends during a walk.
 *
 * Single-threaded: the master's reactor thread.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "master/object_index.h"
#include "master/object_table.h"
#include "master/prefault.h"

#define MC_OINDEX_SLOTS 12
#define MC_OINDEX_MIN_GROUPS 64
#define MC_CTRL_EMPTY 0
#define MC_CTRL_TOMB 1
#define MC_POS_SHIFT 40
#define MC_POS_SLOT ((((size_t)1) << MC_POS_SHIFT) - 1)
/* A resize hands the moved part of the old array back to the kernel every this many groups
 * (64 KiB), when the array is at least MC_OINDEX_RETURN_MIN bytes. */
#define MC_OINDEX_RETURN_GROUPS 1024
#define MC_OINDEX_RETURN_MIN ((size_t)1 << 20)

struct mc_oindex_group {
	uint8_t ctrl[MC_OINDEX_SLOTS];
	mc_oref obj[MC_OINDEX_SLOTS];	/* arena references (object_table.h) */
	uint8_t pad[64 - 5 * MC_OINDEX_SLOTS];
};

/* __builtin_prefetch, kept: GCC 12 deletes a loop whose only statements are prefetches (they
 * count as having no effect); the empty volatile asm has one. */
#define MC_PREFETCH(p) do { __builtin_prefetch(p); __asm__ volatile("" : : "r"(p)); } while (0)
#define MC_PREFETCHW(p) do { __builtin_prefetch(p, 1); __asm__ volatile("" : : "r"(p)); } while (0)

_Static_assert(sizeof(struct mc_oindex_group) == 64, "a group is one cache line");
_Static_assert(sizeof(size_t) >= 8, "iteration positions need 64 bits");
_Static_assert(sizeof(((struct mc_oindex *)0)->ahead_h) == MC_OINDEX_SLOTS * sizeof(uint32_t),
	       "a group's hashes");

/* ------------------------------------------------------------------------ key hashes */

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

/* The hash of key in tenant's namespace (the default tenant's is the key's own). */
uint32_t mc_object_hash_in(uint16_t tenant, const char *key, size_t len)
{
	uint32_t h = mc_object_hash(key, len);

	return tenant ? h ^ (uint32_t)tenant * 0x9e3779b1u : h;
}

uint32_t mc_object_rehash(const struct mc_object *o)
{
	return mc_object_hash_in((uint16_t)o->tenant, o->key, o->key_len);
}

/* ------------------------------------------------------------------------ groups */

static inline uint8_t mc_oindex_tag(uint32_t h)
{
	/* The home group takes the low bits; the tag comes from all of them, mixed. */
	return (uint8_t)(0x80u | ((h * 0x9e3779b1u) >> 25));
}

static inline size_t mc_oindex_cap(const struct mc_oindex_arr *a)
{
	return (a->gmask + 1) * MC_OINDEX_SLOTS;
}

static void mc_oindex_arr_alloc(struct mc_oindex *ix, struct mc_oindex_arr *a, size_t groups)
{
	/* calloc: a large array comes from mmap, whose pages the kernel zeroes on first touch, so
	 * allocating the new array of a resize costs nothing up front. */
	a->raw = mc_xcalloc(groups + 1, sizeof(struct mc_oindex_group));
	a->g = (struct mc_oindex_group *)(((uintptr_t)a->raw + 63) & ~(uintptr_t)63);
	/* Its pages would fault one by one as inserts and moves reach them: the arena's
	 * prefaulter populates a large one at once, off this thread. */
	if (ix->base != NULL && groups * sizeof(struct mc_oindex_group) >= MC_OINDEX_RETURN_MIN)
		mc_prefault_ask(((const struct mc_obj_arena *)(const void *)ix->base)->pf, a->raw,
				(groups + 1) * sizeof(struct mc_oindex_group));
	a->gmask = groups - 1;
	a->used = a->live = 0;
	a->seq = ix->next_seq;
	ix->next_seq = (ix->next_seq + 1) & ((1u << (64 - MC_POS_SHIFT)) - 1);
	if (ix->next_seq == 0)
		ix->next_seq = 1;
}

static void mc_oindex_arr_free(struct mc_oindex_arr *a)
{
	free(a->raw);
	memset(a, 0, sizeof(*a));
}

void mc_oindex_init(struct mc_oindex *ix)
{
	memset(ix, 0, sizeof(*ix));
	ix->next_seq = 1;
	mc_oindex_arr_alloc(ix, &ix->cur, MC_OINDEX_MIN_GROUPS);
}

void mc_oindex_fini(struct mc_oindex *ix)
{
	mc_oindex_arr_free(&ix->cur);
	mc_oindex_arr_free(&ix->old);
	memset(ix, 0, sizeof(*ix));
}

/* Bit 7 of each byte of the result is set for the zero bytes of x at and below its lowest zero
 * byte (bytes above it may show false ones: the callers check each candidate, and "any zero
 * byte" is exact). */
static inline uint64_t mc_zero_bytes(uint64_t x)
{
	return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

/* The control bytes of a group as a 96-bit little-endian bit string in two words (ctrl[0..7],
 * ctrl[8..11] with the top four bytes made non-zero, so they match nothing). */
static inline void mc_oindex_ctrl_words(const struct mc_oindex_group *g, uint64_t *w0,
					uint64_t *w1)
{
	uint32_t hi;

	memcpy(w0, g->ctrl, 8);
	memcpy(&hi, g->ctrl + 8, 4);
	*w1 = (uint64_t)hi | 0x4040404000000000ull;
}

/* Bit k set for each slot k of g whose control byte is tag; w0, w1: g's control words. */
static inline unsigned mc_oindex_match(const struct mc_oindex_group *g, uint8_t tag, uint64_t w0,
				       uint64_t w1)
{
	uint64_t tags = 0x0101010101010101ull * tag, w[2] = { w0, w1 }, m;
	unsigned out = 0;
	int half, k;

	_Static_assert(MC_OINDEX_SLOTS == 12, "two control words per group");
	for (half = 0; half < 2; half++) {
		/* Byte order: the lowest byte of a word is the lowest control byte on
		 * little-endian machines; elsewhere every byte is tried. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		m = mc_zero_bytes(w[half] ^ tags);
#else
		m = 0x8080808080808080ull;
#endif
		for (; m != 0; m &= m - 1) {
			k = half * 8 + (__builtin_ctzll(m) >> 3);
			if (k < MC_OINDEX_SLOTS && g->ctrl[k] == tag)
				out |= 1u << k;
		}
	}
	return out;
}

/* Probe a for hash h from its home group: 1 with the place of the first full slot with h's tag
 * for which match(obj, arg), else 0.  lo: the first group still in use (the old array of a
 * running resize has moved groups [0, lo) away).  An object still in such an array sits at or
 * after lo, and the groups of its probe path from lo on are still there (a group never gets an
 * empty slot back), so a probe skips [0, lo): it starts at lo at the earliest and wraps to lo. */
static int mc_oindex_probe(const char *base, const struct mc_oindex_arr *a, size_t lo, uint32_t h,
			   int (*match)(const struct mc_object *, const void *), const void *arg,
			   size_t *gi_out, int *k_out)
{
	uint8_t tag = mc_oindex_tag(h);
	size_t gi = h & a->gmask, n;

	if (gi < lo)
		gi = lo;
	for (n = 0; n <= a->gmask; n++) {
		const struct mc_oindex_group *g = &a->g[gi];
		uint64_t w0, w1;
		unsigned m;
		int k;

		mc_oindex_ctrl_words(g, &w0, &w1);
		for (m = mc_oindex_match(g, tag, w0, w1); m != 0; m &= m - 1) {
			k = __builtin_ctz(m);
			if (match(mc_oref_ptr(base, g->obj[k]), arg)) {
				*gi_out = gi;
				*k_out = k;
				return 1;
			}
		}
		if (mc_zero_bytes(w0) | mc_zero_bytes(w1))
			break;	/* the group has an empty slot (MC_CTRL_EMPTY is 0) */
		gi = (gi + 1) & a->gmask;
		if (gi == 0)
			gi = lo;
	}
	return 0;
}

struct mc_object *mc_oindex_find(const struct mc_oindex *ix, uint32_t h,
				 int (*eq)(const struct mc_object *o, const void *arg),
				 const void *arg)
{
	size_t gi;
	int k;

	if (mc_oindex_probe(ix->base, &ix->cur, 0, h, eq, arg, &gi, &k))
		return mc_oref_ptr(ix->base, ix->cur.g[gi].obj[k]);
	if (ix->old.g != NULL && mc_oindex_probe(ix->base, &ix->old, ix->mig, h, eq, arg, &gi, &k))
		return mc_oref_ptr(ix->base, ix->old.g[gi].obj[k]);
	return NULL;
}

/* The group a probe of a for hash h reads first (lo as in mc_oindex_probe). */
static inline const struct mc_oindex_group *mc_oindex_home(const struct mc_oindex_arr *a,
							   size_t lo, uint32_t h)
{
	size_t gi = h & a->gmask;

	return &a->g[gi < lo ? lo : gi];
}

void mc_oindex_prefetch(const struct mc_oindex *ix, uint32_t h)
{
	MC_PREFETCHW(mc_oindex_home(&ix->cur, 0, h));
	if (ix->old.g != NULL)
		MC_PREFETCH(mc_oindex_home(&ix->old, ix->mig, h));
}

/* The objects of group g whose tag is tag: their header and key lines. */
static void mc_oindex_prefetch_tagged(const char *base, const struct mc_oindex_group *g,
				      uint8_t tag)
{
	uint64_t w0, w1;
	unsigned m;

	mc_oindex_ctrl_words(g, &w0, &w1);
	for (m = mc_oindex_match(g, tag, w0, w1); m != 0; m &= m - 1) {
		const char *o = (const char *)mc_oref_ptr(base, g->obj[__builtin_ctz(m)]);

		MC_PREFETCH(o);
		MC_PREFETCH(o + sizeof(struct mc_object));
		MC_PREFETCH(o + sizeof(struct mc_object) + 40);
	}
}

void mc_oindex_prefetch_objects(const struct mc_oindex *ix, uint32_t h)
{
	uint8_t tag = mc_oindex_tag(h);

	mc_oindex_prefetch_tagged(ix->base, mc_oindex_home(&ix->cur, 0, h), tag);
	if (ix->old.g != NULL)
		mc_oindex_prefetch_tagged(ix->base, mc_oindex_home(&ix->old, ix->mig, h), tag);
}

/* Place o in the first slot that is not full on its probe path.  The array has room. */
static void mc_oindex_arr_put(const char *base, struct mc_oindex_arr *a, const struct mc_object *o,
			      uint32_t h)
{
	size_t gi = h & a->gmask;

	for (;;) {
		struct mc_oindex_group *g = &a->g[gi];
		int k;

		for (k = 0; k < MC_OINDEX_SLOTS; k++) {
			if (g->ctrl[k] & 0x80)
				continue;
			if (g->ctrl[k] == MC_CTRL_EMPTY)
				a->used++;
			g->ctrl[k] = mc_oindex_tag(h);
			g->obj[k] = mc_oref_of(base, o);
			a->live++;
			return;
		}
		gi = (gi + 1) & a->gmask;
	}
}

static int mc_oindex_same(const struct mc_object *o, const void *arg)
{
	return o == arg;
}

static int mc_oindex_arr_erase(const char *base, struct mc_oindex_arr *a, size_t lo,
			       const struct mc_object *o, uint32_t h)
{
	struct mc_oindex_group *g;
	size_t gi;
	int k, j, empty = 0;

	if (a->g == NULL || !mc_oindex_probe(base, a, lo, h, mc_oindex_same, o, &gi, &k))
		return 0;
	g = &a->g[gi];
	for (j = 0; j < MC_OINDEX_SLOTS; j++)
		empty |= g->ctrl[j] == MC_CTRL_EMPTY;
	if (empty) {
		g->ctrl[k] = MC_CTRL_EMPTY;
		a->used--;
	} else {
		g->ctrl[k] = MC_CTRL_TOMB;
	}
	g->obj[k] = 0;
	a->live--;
	return 1;
}

void mc_oindex_erase(struct mc_oindex *ix, struct mc_object *o, uint32_t h)
{
	if (!mc_oindex_arr_erase(ix->base, &ix->cur, 0, o, h))
		mc_oindex_arr_erase(ix->base, &ix->old, ix->mig, o, h);
}

/* Give the pages of groups [from, to) of a back to the kernel: a resize has moved them and
 * nothing reads them again but a walk, to which they read as empty (zero) slots.  Only for
 * large arrays, which calloc takes from mmap; whole pages inside the range only. */
static void mc_oindex_return(struct mc_oindex_arr *a, size_t from, size_t to)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)&a->g[from], hi = (uintptr_t)&a->g[to];

	if ((a->gmask + 1) * sizeof(struct mc_oindex_group) < MC_OINDEX_RETURN_MIN)
		return;
	lo = (lo + page - 1) & ~(uintptr_t)(page - 1);
	hi &= ~(uintptr_t)(page - 1);
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Start loading what hashing the objects of old group gi reads: header and key lines. */
static void mc_oindex_prefetch_keys(const struct mc_oindex *ix, size_t gi)
{
	const struct mc_oindex_group *g = &ix->old.g[gi];
	int k;

	for (k = 0; k < MC_OINDEX_SLOTS; k++)
		if (g->ctrl[k] & 0x80) {
			const char *o = (const char *)mc_oref_ptr(ix->base, g->obj[k]);

			MC_PREFETCH(o);	/* key length, tenant */
			MC_PREFETCH(o + sizeof(struct mc_object));
			MC_PREFETCH(o + sizeof(struct mc_object) + 40);
		}
}

/* The hashes of the objects of old group gi into h (full slots only), and the new groups they
 * go to start loading. */
static void mc_oindex_hash_group(const struct mc_oindex *ix, size_t gi, uint32_t *h)
{
	const struct mc_oindex_group *g = &ix->old.g[gi];
	int k;

	for (k = 0; k < MC_OINDEX_SLOTS; k++)
		if (g->ctrl[k] & 0x80) {
			h[k] = mc_object_rehash(mc_oref_ptr(ix->base, g->obj[k]));
			MC_PREFETCHW(&ix->cur.g[h[k] & ix->cur.gmask]);
		}
}

/* Move the objects of up to n groups of the old array into the new one; free the old array
 * once it is empty.  The moves are pipelined so that their cache misses are taken while other
 * work runs: moving group g also hashes the objects of g + 1 (their keys were fetched by the
 * move before) and fetches their new groups, and fetches the keys of g + 2.  The hashes of
 * g + 1 stay valid until its move: nothing is inserted into the old array, and an erase only
 * empties a slot (the move skips it). */
static void mc_oindex_migrate(struct mc_oindex *ix, size_t n)
{
	struct mc_oindex_arr *old = &ix->old;

	while (old->g != NULL && n-- > 0) {
		size_t gi = ix->mig;
		struct mc_oindex_group *g = &old->g[gi];
		uint32_t h[MC_OINDEX_SLOTS];
		int k;

		if (ix->ahead_seq == old->seq && ix->ahead_gi == gi) {
			memcpy(h, ix->ahead_h, sizeof(h));
		} else {
			mc_oindex_prefetch_keys(ix, gi);
			mc_oindex_hash_group(ix, gi, h);
		}
		if (gi + 1 <= old->gmask) {
			mc_oindex_hash_group(ix, gi + 1, ix->ahead_h);
			ix->ahead_gi = gi + 1;
			ix->ahead_seq = old->seq;
		}
		if (gi + 2 <= old->gmask)
			mc_oindex_prefetch_keys(ix, gi + 2);
		for (k = 0; k < MC_OINDEX_SLOTS; k++) {
			if (g->ctrl[k] & 0x80)
				mc_oindex_arr_put(ix->base, &ix->cur,
						  mc_oref_ptr(ix->base, g->obj[k]), h[k]);
			g->ctrl[k] = MC_CTRL_TOMB;	/* walks skip it */
			g->obj[k] = 0;
		}
		if (++ix->mig > old->gmask) {
			mc_oindex_arr_free(old);
			ix->mig = 0;
		} else if (ix->mig % MC_OINDEX_RETURN_GROUPS == 0) {
			mc_oindex_return(old, ix->mig - MC_OINDEX_RETURN_GROUPS, ix->mig);
		}
	}
}

void mc_oindex_settle(struct mc_oindex *ix)
{
	mc_oindex_migrate(ix, ix->old.g ? ix->old.gmask + 1 : 0);
}

/* Load limit: 13/16 of the slots, tombstones included. */
static int mc_oindex_full(const struct mc_oindex_arr *a)
{
	return (a->used + 1) * 16 > mc_oindex_cap(a) * 13;
}

/* The current array becomes the old one (no resize may be running) and a new one of groups
 * groups takes inserts; the old one's objects move over as inserts come (mc_oindex_migrate). */
static void mc_oindex_start_resize(struct mc_oindex *ix, size_t groups)
{
	ix->old = ix->cur;
	ix->mig = 0;
	ix->ahead_seq = 0;
	mc_oindex_arr_alloc(ix, &ix->cur, groups);
	ix->resizes++;
	ix->tick = 0;
}

void mc_oindex_reserve(struct mc_oindex *ix, size_t n)
{
	size_t groups = ix->cur.gmask + 1;

	/* Room below the load limit (13/16, mc_oindex_full), and more: a resize doubles when
	 * the live objects fill 2/5, so an array grown by inserts to hold n is at least as
	 * large as the one this makes. */
	while ((n + 1) * 16 > groups * MC_OINDEX_SLOTS * 13)
		groups *= 2;
	if (groups == ix->cur.gmask + 1)
		return;
	mc_oindex_settle(ix);
	mc_oindex_start_resize(ix, groups);
	mc_oindex_settle(ix);
}

void mc_oindex_insert(struct mc_oindex *ix, struct mc_object *o, uint32_t h)
{
	size_t groups;

	if (ix->old.g != NULL && ++ix->tick >= MC_OINDEX_EVERY) {
		ix->tick = 0;
		mc_oindex_migrate(ix, 1);
	}
	if (mc_oindex_full(&ix->cur)) {
		/* A resize leaves at least 2/5 of the new array's slots below the load limit
		 * (13/16): at one group of twelve slots per MC_OINDEX_EVERY inserts the old array
		 * is empty by then.  Should erases and inserts have raced it anyway, finish it
		 * rather than stack a third array. */
		mc_oindex_settle(ix);
		groups = ix->cur.gmask + 1;
		/* Double when live objects fill more than 2/5; else only tombstones go. */
		if ((ix->cur.live + 1) * 5 > mc_oindex_cap(&ix->cur) * 2)
			groups *= 2;
		mc_oindex_start_resize(ix, groups);
	}
	mc_oindex_arr_put(ix->base, &ix->cur, o, h);
}

/* The first full slot of a at slot index *i or after, advancing *i past it; NULL if none. */
static struct mc_object *mc_oindex_arr_next(const char *base, const struct mc_oindex_arr *a,
					   size_t *i)
{
	size_t cap = mc_oindex_cap(a);

	while (*i < cap) {
		const struct mc_oindex_group *g = &a->g[*i / MC_OINDEX_SLOTS];
		int k = (int)(*i % MC_OINDEX_SLOTS);

		(*i)++;
		if (g->ctrl[k] & 0x80)
			return mc_oref_ptr(base, g->obj[k]);
	}
	return NULL;
}

struct mc_object *mc_oindex_next(const struct mc_oindex *ix, size_t *pos)
{
	size_t seq = *pos >> MC_POS_SHIFT, i = *pos & MC_POS_SLOT;
	struct mc_object *o;

	if (ix->old.g != NULL && seq == ix->old.seq) {
		o = mc_oindex_arr_next(ix->base, &ix->old, &i);
		if (o != NULL) {
			*pos = ((size_t)ix->old.seq << MC_POS_SHIFT) | i;
			return o;
		}
		i = 0;
	} else if (seq != ix->cur.seq) {
		/* The start, or an array that is gone (a resize ended during the walk): from the
		 * beginning, so nothing is missed. */
		i = 0;
		if (ix->old.g != NULL) {
			*pos = (size_t)ix->old.seq << MC_POS_SHIFT;
			return mc_oindex_next(ix, pos);
		}
	}
	o = mc_oindex_arr_next(ix->base, &ix->cur, &i);
	*pos = ((size_t)ix->cur.seq << MC_POS_SHIFT) | i;
	return o;
}

size_t mc_oindex_bytes(const struct mc_oindex *ix)
{
	size_t n = (ix->cur.gmask + 1) * sizeof(struct mc_oindex_group);

	if (ix->old.g != NULL)
		n += (ix->old.gmask + 1) * sizeof(struct mc_oindex_group);
	return n;
}

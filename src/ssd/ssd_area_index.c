/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The index of an SSD area (ssd_area.c): two chained hash tables, by key and by address slot,
 * over the same objects, and the LRU list they are on (lru.lru_next is the least recently
 * used).  The tables double when the objects outnumber the buckets.  Every function here is
 * called with the area's mutex held (or before the area is shared, during its scan).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ssd/ssd_area.h"
#include "ssd/ssd_area_int.h"

static uint32_t mc_ssd_hash(const char *key, size_t len)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (uint8_t)key[i]) * 16777619u;
	return h;
}

static size_t mc_slot_bucket(const struct mc_ssd *s, uint64_t slot)
{
	return (size_t)((slot * 0x9E3779B97F4A7C15ull) >> 32) & (s->nb - 1);
}

static void mc_ssd_link(struct mc_ssd *s, struct mc_ssd_obj *o)
{
	size_t kb = o->khash & (s->nb - 1), sb = mc_slot_bucket(s, o->slot);

	o->knext = s->kb[kb];
	s->kb[kb] = o;
	o->snext = s->sb[sb];
	s->sb[sb] = o;
	o->lru_prev = s->lru.lru_prev;
	o->lru_next = &s->lru;
	s->lru.lru_prev->lru_next = o;
	s->lru.lru_prev = o;
	s->count++;
	s->used += o->foot;
}

static int mc_ssd_grow(struct mc_ssd *s)
{
	size_t nb = s->nb * 2, i;
	struct mc_ssd_obj **kb = calloc(nb, sizeof(*kb)), **sb = calloc(nb, sizeof(*sb));
	struct mc_ssd_obj *o;

	if (kb == NULL || sb == NULL) {
		free(kb);
		free(sb);
		return -ENOMEM;
	}
	for (o = s->lru.lru_next; o != &s->lru; o = o->lru_next) {
		i = o->khash & (nb - 1);
		o->knext = kb[i];
		kb[i] = o;
		i = (size_t)((o->slot * 0x9E3779B97F4A7C15ull) >> 32) & (nb - 1);
		o->snext = sb[i];
		sb[i] = o;
	}
	free(s->kb);
	free(s->sb);
	s->kb = kb;
	s->sb = sb;
	s->nb = nb;
	return 0;
}

void mc_ssd_unlink(struct mc_ssd *s, struct mc_ssd_obj *o)
{
	struct mc_ssd_obj **pp;

	for (pp = &s->kb[o->khash & (s->nb - 1)]; *pp != o; pp = &(*pp)->knext)
		;
	*pp = o->knext;
	for (pp = &s->sb[mc_slot_bucket(s, o->slot)]; *pp != o; pp = &(*pp)->snext)
		;
	*pp = o->snext;
	o->lru_prev->lru_next = o->lru_next;
	o->lru_next->lru_prev = o->lru_prev;
	s->count--;
	s->used -= o->foot;
	if (o->suspect) {
		o->suspect = 0;
		s->nsuspect--;
	}
}

struct mc_ssd_obj *mc_ssd_find_key(struct mc_ssd *s, const char *key, size_t len)
{
	uint32_t h = mc_ssd_hash(key, len);
	struct mc_ssd_obj *o;

	for (o = s->kb[h & (s->nb - 1)]; o; o = o->knext)
		if (o->khash == h && o->key_len == len && !memcmp(o->key, key, len))
			return o;
	return NULL;
}

struct mc_ssd_obj *mc_ssd_find_slot(struct mc_ssd *s, uint64_t slot)
{
	struct mc_ssd_obj *o;

	for (o = s->sb[mc_slot_bucket(s, slot)]; o; o = o->snext)
		if (o->slot == slot)
			return o;
	return NULL;
}

struct mc_ssd_obj *mc_ssd_obj_new(const char *key, size_t len, uint64_t seq, uint64_t size)
{
	struct mc_ssd_obj *o = calloc(1, sizeof(*o) + len + 1);

	if (o == NULL)
		return NULL;
	memcpy(o->key, key, len);
	o->key_len = len;
	o->khash = mc_ssd_hash(key, len);
	o->seq = seq;
	o->size = size;
	o->foot = mc_ssd_footprint(len, size);
	return o;
}

/* Under the lock: add o (a new slot); drop an older object of the same key (and its file). */
int mc_ssd_insert(struct mc_ssd *s, struct mc_ssd_obj *o, struct mc_ssd_obj **old)
{
	struct mc_ssd_obj *prev = mc_ssd_find_key(s, o->key, o->key_len);

	*old = NULL;
	if (prev && prev->seq > o->seq)
		return -EEXIST;
	if (prev) {
		mc_ssd_unlink(s, prev);
		*old = prev;
	}
	if (s->count + 1 > s->nb)
		mc_ssd_grow(s);
	o->slot = s->next_slot++;
	mc_ssd_link(s, o);
	return 0;
}

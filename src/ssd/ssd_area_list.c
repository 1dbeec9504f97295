/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Listings of an SSD area for the master (ssd_area.h): every object in LRU order, and the
 * objects whose files changed since they were checked.  Each copies what it lists under the
 * area's mutex; the caller frees the copy with mc_ssd_items_free.  Any thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ssd/ssd_area_int.h"
#include "ssd/ssd_area.h"

/* Describe o in it (its key copied, NUL-terminated).  0, or -ENOMEM.  Caller holds s->mu. */
static int mc_ssd_item_fill(struct mc_ssd_item *it, const struct mc_ssd_obj *o)
{
	it->key = malloc(o->key_len + 1);
	if (it->key == NULL)
		return -ENOMEM;
	memcpy(it->key, o->key, o->key_len);
	it->key[o->key_len] = '\0';
	it->key_len = o->key_len;
	it->size = o->size;
	it->addr = mc_ssd_addr(o);
	it->gen = o->gen;
	it->has_checksum = o->has_ocrc;
	it->checksum = o->ocrc;
	it->verified = o->verified;
	return 0;
}

long mc_ssd_suspects(struct mc_ssd *s, struct mc_ssd_item **out)
{
	struct mc_ssd_item *items;
	struct mc_ssd_obj *o;
	size_t n = 0;

	*out = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->nsuspect == 0) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	items = calloc(s->nsuspect, sizeof(*items));
	for (o = s->lru.lru_next; items && o != &s->lru && n < s->nsuspect; o = o->lru_next) {
		if (!o->suspect)
			continue;
		if (mc_ssd_item_fill(&items[n], o))
			break;
		n++;
	}
	pthread_mutex_unlock(&s->mu);
	if (items == NULL)
		return -ENOMEM;
	*out = items;
	return (long)n;
}

void mc_ssd_items_free(struct mc_ssd_item *items, size_t n)
{
	size_t i;

	for (i = 0; items && i < n; i++)
		free(items[i].key);
	free(items);
}

long mc_ssd_list(struct mc_ssd *s, int lru_order, size_t max, struct mc_ssd_item **out)
{
	struct mc_ssd_item *items;
	struct mc_ssd_obj *o;
	size_t n = 0, cap;

	(void)lru_order;	/* the list is kept in LRU order: both orders are the same walk */
	pthread_mutex_lock(&s->mu);
	cap = s->count < max ? s->count : max;
	items = calloc(cap ? cap : 1, sizeof(*items));
	if (items == NULL) {
		pthread_mutex_unlock(&s->mu);
		return -ENOMEM;
	}
	for (o = s->lru.lru_next; o != &s->lru && n < cap; o = o->lru_next) {
		if (mc_ssd_item_fill(&items[n], o)) {
			pthread_mutex_unlock(&s->mu);
			mc_ssd_items_free(items, n);
			return -ENOMEM;
		}
		n++;
	}
	pthread_mutex_unlock(&s->mu);
	*out = items;
	return (long)n;
}

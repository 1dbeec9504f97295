/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SQLite's page cache, with a cheaper truncation (see persist_int.h).
 *
 * Every transaction's end truncates the page cache to the database's size.  SQLite's own cache
 * (pcache1) removes the pages past a limit by walking its hash buckets from the limit up to the
 * largest page number it has held since the last truncation, all of them once that span is as
 * wide as the table; a B-tree split that renumbers sibling pages moves a page to a number far
 * past the end for a moment, so on a table with random keys nearly every commit walked the
 * whole hash table (16384 buckets with the master's 64 MiB cache: about 0.5 us of each persisted
 * put).  This wrapper forwards everything to SQLite's default cache and keeps, per cache, the
 * page numbers above the last truncation's limit that were created or moved since (a handful a
 * transaction: pages appended at the end, the split's temporary numbers); a truncation at or
 * above that limit removes just those pages, one by one, instead of walking the table.  A
 * truncation below it (a rollback that shrinks, a reset), or more numbers than the list holds,
 * goes to the default cache's own walk.
 *
 * Installed once per process, before SQLite initializes (later: the default cache stays).
 * Thread-safe as the default cache is: each cache is used by one connection at a time.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "persist/persist_int.h"

#define MC_PCACHE_TRACK 256

struct mc_pcache {
	sqlite3_pcache *inner;
	unsigned int limit;	/* every page numbered >= limit is listed in keys[] */
	unsigned int n;		/* MC_PCACHE_TRACK + 1: too many, not all listed */
	unsigned int keys[MC_PCACHE_TRACK];
};

static sqlite3_pcache_methods2 mc_pcache_default;

static void mc_pcache_track(struct mc_pcache *c, unsigned int key)
{
	unsigned int i;

	if (key < c->limit || c->n > MC_PCACHE_TRACK)
		return;
	for (i = c->n; i > 0 && i + 8 > c->n; i--)	/* the same page again, most often */
		if (c->keys[i - 1] == key)
			return;
	if (c->n == MC_PCACHE_TRACK)
		c->n++;
	else
		c->keys[c->n++] = key;
}

static int mc_pcache_init(void *arg)
{
	(void)arg;
	return mc_pcache_default.xInit ? mc_pcache_default.xInit(mc_pcache_default.pArg)
				       : SQLITE_OK;
}

static void mc_pcache_shutdown(void *arg)
{
	(void)arg;
	if (mc_pcache_default.xShutdown)
		mc_pcache_default.xShutdown(mc_pcache_default.pArg);
}

static sqlite3_pcache *mc_pcache_create(int page, int extra, int purgeable)
{
	struct mc_pcache *c = sqlite3_malloc(sizeof(*c));

	if (c == NULL)
		return NULL;
	c->inner = mc_pcache_default.xCreate(page, extra, purgeable);
	if (c->inner == NULL) {
		sqlite3_free(c);
		return NULL;
	}
	c->limit = 1;		/* nothing is cached yet: any page gets listed until a truncation */
	c->n = 0;
	return (sqlite3_pcache *)c;
}

static void mc_pcache_cachesize(sqlite3_pcache *p, int n)
{
	mc_pcache_default.xCachesize(((struct mc_pcache *)p)->inner, n);
}

static int mc_pcache_pagecount(sqlite3_pcache *p)
{
	return mc_pcache_default.xPagecount(((struct mc_pcache *)p)->inner);
}

static sqlite3_pcache_page *mc_pcache_fetch(sqlite3_pcache *p, unsigned int key, int create)
{
	struct mc_pcache *c = (struct mc_pcache *)p;
	sqlite3_pcache_page *pg = mc_pcache_default.xFetch(c->inner, key, create);

	if (pg && create)
		mc_pcache_track(c, key);
	return pg;
}

static void mc_pcache_unpin(sqlite3_pcache *p, sqlite3_pcache_page *pg, int discard)
{
	mc_pcache_default.xUnpin(((struct mc_pcache *)p)->inner, pg, discard);
}

static void mc_pcache_rekey(sqlite3_pcache *p, sqlite3_pcache_page *pg, unsigned int from,
			    unsigned int to)
{
	struct mc_pcache *c = (struct mc_pcache *)p;

	mc_pcache_default.xRekey(c->inner, pg, from, to);
	mc_pcache_track(c, to);
}

static void mc_pcache_truncate(sqlite3_pcache *p, unsigned int limit)
{
	struct mc_pcache *c = (struct mc_pcache *)p;
	unsigned int i;

	if (limit < c->limit || c->n > MC_PCACHE_TRACK) {
		mc_pcache_default.xTruncate(c->inner, limit);
	} else {
		for (i = 0; i < c->n; i++) {
			sqlite3_pcache_page *pg;

			if (c->keys[i] < limit)
				continue;
			pg = mc_pcache_default.xFetch(c->inner, c->keys[i], 0);
			if (pg)	/* out of the cache, as a truncation does */
				mc_pcache_default.xUnpin(c->inner, pg, 1);
		}
	}
	c->limit = limit;
	c->n = 0;
}

static void mc_pcache_destroy(sqlite3_pcache *p)
{
	struct mc_pcache *c = (struct mc_pcache *)p;

	mc_pcache_default.xDestroy(c->inner);
	sqlite3_free(c);
}

static void mc_pcache_shrink(sqlite3_pcache *p)
{
	mc_pcache_default.xShrink(((struct mc_pcache *)p)->inner);
}

static void mc_pcache_do_install(void)
{
	static sqlite3_pcache_methods2 m;

	if (sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &mc_pcache_default) != SQLITE_OK ||
	    mc_pcache_default.iVersion < 1 || mc_pcache_default.xCreate == NULL)
		return;
	m.iVersion = 1;
	m.pArg = NULL;
	m.xInit = mc_pcache_init;
	m.xShutdown = mc_pcache_shutdown;
	m.xCreate = mc_pcache_create;
	m.xCachesize = mc_pcache_cachesize;
	m.xPagecount = mc_pcache_pagecount;
	m.xFetch = mc_pcache_fetch;
	m.xUnpin = mc_pcache_unpin;
	m.xRekey = mc_pcache_rekey;
	m.xTruncate = mc_pcache_truncate;
	m.xDestroy = mc_pcache_destroy;
	m.xShrink = mc_pcache_shrink;
	/* Refused once SQLite is initialized: its default cache then stays. */
	(void)sqlite3_config(SQLITE_CONFIG_PCACHE2, &m);
}

void mc_persist_pcache_install(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, mc_pcache_do_install);
}

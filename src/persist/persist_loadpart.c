/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rows of the background load (persist_loader.c runs the threads): what the scan of one
 * range of generations (a part) reads, in chunks of decoded rows with their keys and replicas
 * packed in arrays (no allocation per row).  A part is its worker's until the scan of it ends,
 * then the master's loop's, which takes its chunks and gives each back once its rows are in
 * the table: the pool keeps a few for the parts still to read (its mutex is the only lock).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "persist/persist.h"
#include "persist/persist_loadpart.h"

void mc_persist_rows_fini(struct mc_persist_rows *c)
{
	free(c->rows);
	free(c->reps);
	free(c->keys);
	memset(c, 0, sizeof(*c));
}

/* Append the decoded row o to c (pointers kept as offsets until mc_persist_rows_seal). */
void mc_persist_rows_add(struct mc_persist_rows *c, const struct mc_persist_object *o)
{
	struct mc_persist_object *d;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1;
		c->rows = mc_xrealloc(c->rows, c->cap * sizeof(*c->rows));
	}
	while (c->keys_len + o->key_len > c->keys_cap) {
		c->keys_cap = c->keys_cap ? c->keys_cap * 2 : 64 * 1024;
		c->keys = mc_xrealloc(c->keys, c->keys_cap);
	}
	while (c->nreps + o->n_replicas > c->capreps) {
		c->capreps = c->capreps ? c->capreps * 2 : 1024;
		c->reps = mc_xrealloc(c->reps, c->capreps * sizeof(*c->reps));
	}
	d = &c->rows[c->n++];
	*d = *o;
	memcpy(c->keys + c->keys_len, o->key, o->key_len);
	d->key = (const char *)(uintptr_t)c->keys_len;
	c->keys_len += o->key_len;
	memcpy(c->reps + c->nreps, o->replicas, o->n_replicas * sizeof(*c->reps));
	d->replicas = (const struct mc_persist_replica *)(uintptr_t)c->nreps;
	c->nreps += o->n_replicas;
}

/* Turn the offsets into pointers; c is not appended to afterwards. */
void mc_persist_rows_seal(struct mc_persist_rows *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		c->rows[i].key = c->keys + (uintptr_t)c->rows[i].key;
		c->rows[i].replicas = c->reps + (uintptr_t)c->rows[i].replicas;
	}
}

void mc_loadpool_init(struct mc_loadpool *pool, size_t cap)
{
	pthread_mutex_init(&pool->mu, NULL);
	pool->v = mc_xcalloc(cap ? cap : 1, sizeof(*pool->v));
	pool->n = 0;
	pool->cap = cap;
}

void mc_loadpool_put(struct mc_loadpool *pool, struct mc_persist_rows *c)
{
	pthread_mutex_lock(&pool->mu);
	if (pool->n < pool->cap && c->cap == MC_LOADER_CHUNK_ROWS) {
		c->n = c->nreps = c->keys_len = 0;
		pool->v[pool->n++] = *c;
		memset(c, 0, sizeof(*c));
	}
	pthread_mutex_unlock(&pool->mu);
	mc_persist_rows_fini(c);	/* what the pool did not keep */
}

/* A kept chunk into *c: 1, or 0 if none. */
static int mc_loadpool_get(struct mc_loadpool *pool, struct mc_persist_rows *c)
{
	int got = 0;

	pthread_mutex_lock(&pool->mu);
	if (pool->n) {
		*c = pool->v[--pool->n];
		got = 1;
	}
	pthread_mutex_unlock(&pool->mu);
	return got;
}

void mc_loadpool_fini(struct mc_loadpool *pool)
{
	size_t i;

	for (i = 0; i < pool->n; i++)
		mc_persist_rows_fini(&pool->v[i]);
	free(pool->v);
	pthread_mutex_destroy(&pool->mu);
}

/* A new chunk at the end of p's: a kept one, else one sized for a full chunk (no reallocation
 * while it fills: keys of up to 64 bytes and a replica a row on average; pages untouched cost
 * nothing). */
static void mc_loader_new_chunk(struct mc_loader_part *p, struct mc_loadpool *pool)
{
	struct mc_persist_rows *c;

	if (p->nchunks)
		mc_persist_rows_seal(&p->chunks[p->nchunks - 1]);
	if (p->nchunks == p->capchunks) {
		p->capchunks = p->capchunks ? p->capchunks * 2 : 16;
		p->chunks = mc_xrealloc(p->chunks, p->capchunks * sizeof(*p->chunks));
	}
	c = &p->chunks[p->nchunks++];
	memset(c, 0, sizeof(*c));
	if (pool && mc_loadpool_get(pool, c))
		return;
	c->cap = MC_LOADER_CHUNK_ROWS;
	c->rows = mc_xmalloc(MC_LOADER_CHUNK_ROWS * sizeof(*c->rows));
	c->capreps = MC_LOADER_CHUNK_ROWS;
	c->reps = mc_xmalloc(c->capreps * sizeof(*c->reps));
	c->keys_cap = MC_LOADER_CHUNK_ROWS * 64;
	c->keys = mc_xmalloc(c->keys_cap);
}

void mc_loadpart_add(struct mc_loader_part *p, struct mc_loadpool *pool,
		     const struct mc_persist_object *o)
{
	if (p->nchunks == 0 || p->chunks[p->nchunks - 1].n == MC_LOADER_CHUNK_ROWS)
		mc_loader_new_chunk(p, pool);
	mc_persist_rows_add(&p->chunks[p->nchunks - 1], o);
}

void mc_loadpart_finish(struct mc_loader_part *p)
{
	if (p->nchunks)
		mc_persist_rows_seal(&p->chunks[p->nchunks - 1]);
}

size_t mc_loadpart_rows(const struct mc_loader_part *p)
{
	size_t i, n = 0;

	for (i = 0; i < p->nchunks; i++)
		n += p->chunks[i].n;
	return n;
}

void mc_loadpart_fini(struct mc_loader_part *p)
{
	size_t i;

	for (i = 0; i < p->nchunks; i++)
		mc_persist_rows_fini(&p->chunks[i]);
	free(p->chunks);
	p->chunks = NULL;
	p->nchunks = p->capchunks = 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small worker pool for transports whose requests block or burn CPU (shm copies, file I/O,
 * GPU staging), so the engine's loop thread never does.
 *
 * The loop thread queues a request with the function to run; a worker runs it and posts the
 * status back to the loop thread, which completes the request there (mc_te_req_done).  The
 * queue is a FIFO threaded through the requests themselves, so it costs no memory beyond the
 * requests the engine already holds; at most nthreads requests run at once.  mc_te_pool_free
 * fails what has not started, waits for what runs, then joins the workers.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "engine/te_pool.h"

#define MC_TE_POOL_MAX_THREADS 16

struct mc_te_pool {
	struct mc_engine *e;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mc_te_req *head, **tail;
	int stopping;
	unsigned n;
	pthread_t threads[MC_TE_POOL_MAX_THREADS];
};

/* Scratch slots of a queued request (struct mc_te_req.xport_priv is the transport's; the pool
 * uses the last two). */
#define POOL_NEXT(r) ((r)->xport_priv[2])
#define POOL_FN(r) ((r)->xport_priv[3])

static void mc_te_pool_on_done(void *arg)
{
	struct mc_te_req *r = arg;

	mc_te_req_done(r, (int)(intptr_t)POOL_NEXT(r));
}

static void mc_te_pool_finish(struct mc_te_pool *p, struct mc_te_req *r, int status)
{
	POOL_NEXT(r) = (void *)(intptr_t)status;
	if (mc_loop_thread_call(p->e->lt, mc_te_pool_on_done, r))
		mc_te_req_done(r, -ESHUTDOWN);	/* the loop is gone: fail here */
}

static void *mc_te_pool_main(void *arg)
{
	struct mc_te_pool *p = arg;

	for (;;) {
		struct mc_te_req *r;
		mc_te_job_fn fn;

		pthread_mutex_lock(&p->mu);
		while (p->head == NULL && !p->stopping)
			pthread_cond_wait(&p->cv, &p->mu);
		r = p->head;
		if (r == NULL) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		p->head = POOL_NEXT(r);
		if (p->head == NULL)
			p->tail = &p->head;
		pthread_mutex_unlock(&p->mu);
		*(void **)&fn = POOL_FN(r);
		mc_te_pool_finish(p, r, p->stopping ? -ESHUTDOWN : fn(r));
	}
}

struct mc_te_pool *mc_te_pool_new(struct mc_engine *e, unsigned nthreads)
{
	struct mc_te_pool *p = calloc(1, sizeof(*p));
	unsigned i;

	if (p == NULL)
		return NULL;
	if (nthreads == 0)
		nthreads = 1;
	if (nthreads > MC_TE_POOL_MAX_THREADS)
		nthreads = MC_TE_POOL_MAX_THREADS;
	p->e = e;
	p->tail = &p->head;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (i = 0; i < nthreads; i++) {
		if (pthread_create(&p->threads[i], NULL, mc_te_pool_main, p))
			break;
		p->n++;
	}
	if (p->n == 0) {
		mc_te_pool_free(p);
		return NULL;
	}
	return p;
}

int mc_te_pool_submit(struct mc_te_pool *p, struct mc_te_req *r, mc_te_job_fn fn)
{
	pthread_mutex_lock(&p->mu);
	if (p->stopping) {
		pthread_mutex_unlock(&p->mu);
		return -ESHUTDOWN;
	}
	POOL_NEXT(r) = NULL;
	POOL_FN(r) = *(void **)&fn;
	*p->tail = r;
	p->tail = (struct mc_te_req **)&POOL_NEXT(r);
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void mc_te_pool_free(struct mc_te_pool *p)
{
	unsigned i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	/* Workers fail what is queued and exit once the queue is empty. */
	for (i = 0; i < p->n; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

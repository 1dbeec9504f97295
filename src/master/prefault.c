/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The prefaulter (prefault.h): one thread populating ranges of anonymous memory the reactor
 * will touch soon.  The reactor queues ranges under a mutex (a ring of MC_PREFAULT_QUEUE); the
 * thread takes them in order and populates each with MADV_POPULATE_WRITE, a chunk at a time so
 * that a stop request waits at most one chunk.  Populating faults pages in as a write would,
 * without writing, so it never races with what the reactor stores in them.
 *
 * Threads: mc_prefault_new, _ask and _free run on the owner's thread (the master's reactor);
 * the prefaulter thread runs mc_prefault_main only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "master/prefault.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define MC_PREFAULT_QUEUE 16
#define MC_PREFAULT_STEP ((size_t)2 << 20)	/* populated per madvise */

struct mc_prefault_range {
	char *p;
	size_t len;
};

struct mc_prefault {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mc_prefault_range q[MC_PREFAULT_QUEUE];
	unsigned head, n;	/* the ring: n ranges from q[head] on */
	int stop;		/* set by mc_prefault_free */
	int broken;		/* the kernel has no MADV_POPULATE_WRITE: ranges are dropped */
	size_t done;		/* bytes populated */
};

static void *mc_prefault_main(void *arg)
{
	struct mc_prefault *pf = arg;

	pthread_mutex_lock(&pf->mu);
	for (;;) {
		struct mc_prefault_range r;
		size_t off, step;
		int failed = 0;

		while (!pf->stop && pf->n == 0)
			pthread_cond_wait(&pf->cv, &pf->mu);
		if (pf->stop)
			break;
		r = pf->q[pf->head];
		pf->head = (pf->head + 1) % MC_PREFAULT_QUEUE;
		pf->n--;
		pthread_mutex_unlock(&pf->mu);
		for (off = 0; off < r.len && !failed; off += step) {
			step = r.len - off < MC_PREFAULT_STEP ? r.len - off : MC_PREFAULT_STEP;
			/* EINVAL: no such advice (old kernel); ENOMEM: the range went away
			 * meanwhile, or memory is short (the reactor will find out itself). */
			if (madvise(r.p + off, step, MADV_POPULATE_WRITE) != 0)
				failed = errno == EINVAL ? 2 : 1;
			else
				__atomic_add_fetch(&pf->done, step, __ATOMIC_RELAXED);
			if (__atomic_load_n(&pf->stop, __ATOMIC_RELAXED))
				break;
		}
		pthread_mutex_lock(&pf->mu);
		if (failed == 2) {
			pf->broken = 1;
			break;
		}
	}
	pthread_mutex_unlock(&pf->mu);
	return NULL;
}

struct mc_prefault *mc_prefault_new(void)
{
	struct mc_prefault *pf = calloc(1, sizeof(*pf));

	if (pf == NULL)
		return NULL;
	pthread_mutex_init(&pf->mu, NULL);
	pthread_cond_init(&pf->cv, NULL);
	if (pthread_create(&pf->th, NULL, mc_prefault_main, pf) != 0) {
		pthread_cond_destroy(&pf->cv);
		pthread_mutex_destroy(&pf->mu);
		free(pf);
		return NULL;
	}
#ifdef __GLIBC__
	(void)pthread_setname_np(pf->th, "mc-prefault");
#endif
	return pf;
}

void mc_prefault_free(struct mc_prefault *pf)
{
	if (pf == NULL)
		return;
	pthread_mutex_lock(&pf->mu);
	__atomic_store_n(&pf->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_signal(&pf->cv);
	pthread_mutex_unlock(&pf->mu);
	pthread_join(pf->th, NULL);
	pthread_cond_destroy(&pf->cv);
	pthread_mutex_destroy(&pf->mu);
	free(pf);
}

void mc_prefault_ask(struct mc_prefault *pf, void *p, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi;

	/* Whole pages inside the range (madvise takes page-aligned starts). */
	lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	hi = ((uintptr_t)p + len) & ~(page - 1);
	if (pf == NULL || hi <= lo)
		return;
	p = (void *)lo;
	len = hi - lo;
	pthread_mutex_lock(&pf->mu);
	if (!pf->broken && pf->n < MC_PREFAULT_QUEUE) {
		pf->q[(pf->head + pf->n) % MC_PREFAULT_QUEUE] =
			(struct mc_prefault_range){ .p = p, .len = len };
		pf->n++;
		pthread_cond_signal(&pf->cv);
	}
	pthread_mutex_unlock(&pf->mu);
}

size_t mc_prefault_done(struct mc_prefault *pf)
{
	return pf ? __atomic_load_n(&pf->done, __ATOMIC_RELAXED) : 0;
}

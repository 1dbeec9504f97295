/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loop threads (see loop_thread.h).  The queue is a mutex-protected singly linked FIFO; one
 * persistent user event wakes the loop, which swaps the whole queue out under the lock and runs
 * it without the lock, so callers never wait for the loop to finish running anything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/thread.h>

#include "reactor/loop_thread.h"

struct mc_loop_call {
	struct mc_loop_call *next;
	mc_loop_fn fn;
	void *arg;
};

struct mc_loop_thread {
	struct event_base *base;
	struct event *wake;
	pthread_t tid;
	int started;
	int stopping;
	pthread_mutex_t mu;
	struct mc_loop_call *head, **tail;
	char name[16];
};

static pthread_once_t mc_evthread_once = PTHREAD_ONCE_INIT;

static void mc_evthread_init(void)
{
	evthread_use_pthreads();
}

static void mc_loop_thread_run_queue(struct mc_loop_thread *lt)
{
	struct mc_loop_call *c, *next;

	pthread_mutex_lock(&lt->mu);
	c = lt->head;
	lt->head = NULL;
	lt->tail = &lt->head;
	pthread_mutex_unlock(&lt->mu);
	for (; c; c = next) {
		next = c->next;
		c->fn(c->arg);
		free(c);
	}
}

static void mc_loop_thread_on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct mc_loop_thread *lt = arg;

	(void)fd;
	(void)what;
	mc_loop_thread_run_queue(lt);
	if (lt->stopping)
		event_base_loopexit(lt->base, NULL);
}

struct mc_loop_thread *mc_loop_thread_new(const char *name)
{
	struct mc_loop_thread *lt;

	pthread_once(&mc_evthread_once, mc_evthread_init);
	lt = calloc(1, sizeof(*lt));
	if (lt == NULL)
		return NULL;
	lt->base = event_base_new();
	if (lt->base == NULL)
		goto fail_base;
	lt->wake = event_new(lt->base, -1, EV_PERSIST, mc_loop_thread_on_wake, lt);
	if (lt->wake == NULL)
		goto fail_wake;
	pthread_mutex_init(&lt->mu, NULL);
	lt->tail = &lt->head;
	strncpy(lt->name, name ? name : "mc-loop", sizeof(lt->name) - 1);
	return lt;

fail_wake:
	event_base_free(lt->base);
fail_base:
	free(lt);
	return NULL;
}

struct event_base *mc_loop_thread_base(struct mc_loop_thread *lt)
{
	return lt->base;
}

static void *mc_loop_thread_main(void *arg)
{
	struct mc_loop_thread *lt = arg;

	pthread_setname_np(pthread_self(), lt->name);
	/* The wake event has no fd or timeout: keep the loop alive with a pending add. */
	event_add(lt->wake, NULL);
	event_base_loop(lt->base, EVLOOP_NO_EXIT_ON_EMPTY);
	event_del(lt->wake);
	return NULL;
}

int mc_loop_thread_start(struct mc_loop_thread *lt)
{
	int rc = pthread_create(&lt->tid, NULL, mc_loop_thread_main, lt);

	if (rc)
		return -rc;
	lt->started = 1;
	return 0;
}

int mc_loop_thread_call(struct mc_loop_thread *lt, mc_loop_fn fn, void *arg)
{
	struct mc_loop_call *c = malloc(sizeof(*c));

	if (c == NULL)
		return -ENOMEM;
	c->next = NULL;
	c->fn = fn;
	c->arg = arg;
	pthread_mutex_lock(&lt->mu);
	if (lt->stopping) {
		pthread_mutex_unlock(&lt->mu);
		free(c);
		return -ESHUTDOWN;
	}
	*lt->tail = c;
	lt->tail = &c->next;
	pthread_mutex_unlock(&lt->mu);
	event_active(lt->wake, EV_TIMEOUT, 0);
	return 0;
}

void mc_loop_thread_stop_and_free(struct mc_loop_thread *lt)
{
	if (lt == NULL)
		return;
	pthread_mutex_lock(&lt->mu);
	lt->stopping = 1;
	pthread_mutex_unlock(&lt->mu);
	if (lt->started) {
		event_active(lt->wake, EV_TIMEOUT, 0);
		pthread_join(lt->tid, NULL);
	}
	mc_loop_thread_run_queue(lt);
	event_free(lt->wake);
	event_base_free(lt->base);
	pthread_mutex_destroy(&lt->mu);
	free(lt);
}

int mc_loop_thread_is_current(const struct mc_loop_thread *lt)
{
	return lt->started && pthread_equal(pthread_self(), lt->tid);
}

void mc_waiter_init(struct mc_waiter *w)
{
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->done = 0;
	w->status = 0;
}

void mc_waiter_fini(struct mc_waiter *w)
{
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

void mc_waiter_signal(struct mc_waiter *w, int status)
{
	pthread_mutex_lock(&w->mu);
	w->status = status;
	w->done = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int mc_waiter_wait(struct mc_waiter *w)
{
	int status;

	pthread_mutex_lock(&w->mu);
	while (!w->done)
		pthread_cond_wait(&w->cv, &w->mu);
	status = w->status;
	pthread_mutex_unlock(&w->mu);
	return status;
}

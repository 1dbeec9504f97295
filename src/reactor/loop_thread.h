/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_LOOP_THREAD_H
#define MC_LOOP_THREAD_H

#include <pthread.h>

#include <event2/event.h>

/*
 * A libevent loop running in its own thread, and the hand-off from other threads to it.
 *
 * Library code (libmooncake) owns its sockets on such a loop; API calls from any thread queue a
 * function with mc_loop_thread_call and wait on a struct mc_waiter.  Calls run on the loop in
 * FIFO order.
 */
struct mc_loop_thread;

typedef void (*mc_loop_fn)(void *arg);

/* Returns NULL on failure (-ENOMEM or libevent failure). */
struct mc_loop_thread *mc_loop_thread_new(const char *name);
struct event_base *mc_loop_thread_base(struct mc_loop_thread *lt);
/* Start the thread.  0 or -errno. */
int mc_loop_thread_start(struct mc_loop_thread *lt);
/* Queue fn(arg) to run on the loop.  0, or -ESHUTDOWN once stopping. */
int mc_loop_thread_call(struct mc_loop_thread *lt, mc_loop_fn fn, void *arg);
/* Run the calls already queued, stop the loop, join the thread, free everything.  Must not be
 * called from the loop thread.  NULL is a no-op. */
void mc_loop_thread_stop_and_free(struct mc_loop_thread *lt);
int mc_loop_thread_is_current(const struct mc_loop_thread *lt);

/* A one-shot completion an API thread waits on while the loop does its work. */
struct mc_waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	int status;
};

void mc_waiter_init(struct mc_waiter *w);
void mc_waiter_fini(struct mc_waiter *w);
void mc_waiter_signal(struct mc_waiter *w, int status);
int mc_waiter_wait(struct mc_waiter *w);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_RDMA_HARNESS_H
#define MC_RDMA_HARNESS_H

/*
 * Two rdma transports in one process, each on its own loop thread as in two engines.  The
 * handshake callback (run on the initiator's worker thread) hands the Connection frame to the
 * other side's mc_rdma_on_connection on that side's loop, as the engine's handshake port
 * would.  Waits are bounded: a transport that hangs fails the test instead of hanging it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mooncake/transfer_engine_c.h"
#include "rdma/rdma.h"
#include "reactor/loop_thread.h"

struct hn_side {
	struct mc_loop_thread *lt;
	struct mc_rdma *r;
	char name[64];
};

static struct hn_side hn_sides[3];
static int hn_hs_fail;	/* > 0: fail that many handshakes; < 0: fail all */

struct hn_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, status;
};

static void hn_wait_init(struct hn_wait *w)
{
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->done = 0;
	w->status = 0;
}

static void hn_wait_signal(struct hn_wait *w, int status)
{
	pthread_mutex_lock(&w->mu);
	w->status = status;
	w->done = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* 0 with *status, or -ETIMEDOUT after secs. */
static int hn_wait_for(struct hn_wait *w, int secs, int *status)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	pthread_mutex_lock(&w->mu);
	while (!w->done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	if (w->done && status)
		*status = w->status;
	rc = w->done ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

struct hn_call {
	void (*fn)(void *);
	void *arg;
	struct hn_wait w;
};

static void hn_call_tramp(void *arg)
{
	struct hn_call *c = arg;

	c->fn(c->arg);
	hn_wait_signal(&c->w, 0);
}

/* Run fn(arg) on a side's loop and wait for it. */
static void hn_on_loop(struct hn_side *s, void (*fn)(void *), void *arg)
{
	struct hn_call c = { .fn = fn, .arg = arg };

	hn_wait_init(&c.w);
	mc_loop_thread_call(s->lt, hn_call_tramp, &c);
	hn_wait_for(&c.w, 30, NULL);
}

struct hn_conn {
	struct hn_side *to;
	const char *json;
	char *reply;
};

static void hn_conn_on_loop(void *arg)
{
	struct hn_conn *c = arg;

	c->reply = mc_rdma_on_connection(c->to->r, c->json, strlen(c->json));
}

static pthread_mutex_t hn_mu = PTHREAD_MUTEX_INITIALIZER;

/* mc_rdma_hs_fn: "port" 1 or 2 selects the side. */
static int hn_hs(void *arg, const char *host, uint16_t port, const char *json, char **reply,
		 size_t *reply_len)
{
	struct hn_conn c = { 0 };
	int fail = 0;

	(void)arg;
	(void)host;
	pthread_mutex_lock(&hn_mu);
	if (hn_hs_fail < 0 || (hn_hs_fail > 0 && hn_hs_fail--))
		fail = 1;
	pthread_mutex_unlock(&hn_mu);
	if (fail || port < 1 || port > 2)
		return ERR_SOCKET;
	c.to = &hn_sides[port - 1];
	c.json = json;
	hn_on_loop(c.to, hn_conn_on_loop, &c);
	if (c.reply == NULL)
		return ERR_MEMORY;
	*reply = c.reply;
	*reply_len = strlen(c.reply);
	return 0;
}

struct hn_new {
	struct hn_side *s;
	const struct mc_verbs_ops *ops;
	const char *devices, *matrix;
	int err;
};

static void hn_new_on_loop(void *arg)
{
	struct hn_new *n = arg;
	struct mc_rdma_params p = {
		.ops = n->ops,
		.server_name = n->s->name,
		.devices = n->devices,
		.matrix = n->matrix,
		.hs = hn_hs,
	};

	n->s->r = mc_rdma_new(mc_loop_thread_base(n->s->lt), &p, &n->err);
}

/* Start side i (0 or 1) named name.  0 or the mc_rdma_new error. */
static int hn_start(int i, const char *name, const struct mc_verbs_ops *ops, const char *devices,
		    const char *matrix)
{
	struct hn_new n = { .s = &hn_sides[i], .ops = ops, .devices = devices, .matrix = matrix };

	snprintf(hn_sides[i].name, sizeof(hn_sides[i].name), "%s", name);
	hn_sides[i].lt = mc_loop_thread_new(name);
	if (hn_sides[i].lt == NULL || mc_loop_thread_start(hn_sides[i].lt))
		return -1;
	hn_on_loop(&hn_sides[i], hn_new_on_loop, &n);
	return hn_sides[i].r ? 0 : n.err;
}

static void hn_free_on_loop(void *arg)
{
	struct hn_side *s = arg;

	mc_rdma_free(s->r);
	s->r = NULL;
}

static void hn_stop(int i)
{
	if (hn_sides[i].lt == NULL)
		return;
	hn_on_loop(&hn_sides[i], hn_free_on_loop, &hn_sides[i]);
	mc_loop_thread_stop_and_free(hn_sides[i].lt);
	hn_sides[i].lt = NULL;
}

/* The peer object for side i as its descriptor describes it, optionally edited by fix. */
static struct mc_rdma_peer *hn_peer(int i, void (*fix)(json_t *desc))
{
	json_t *d = json_object();
	struct mc_rdma_peer *p = NULL;

	if (d && mc_rdma_desc_fill(hn_sides[i].r, d) == 0) {
		char *s;
		json_t *back;

		if (fix)
			fix(d);
		/* Through text, as it travels. */
		s = json_dumps(d, JSON_COMPACT);
		back = s ? json_loads(s, 0, NULL) : NULL;
		if (back)
			p = mc_rdma_peer_new(back, hn_sides[i].name, "fake", (uint16_t)(i + 1));
		json_decref(back);
		free(s);
	}
	json_decref(d);
	return p;
}

struct hn_xfer {
	struct hn_side *s;
	struct mc_rdma_xfer x;
	int rc;
	struct hn_wait w;
};

static void hn_done(void *arg, int status)
{
	struct hn_xfer *t = arg;

	hn_wait_signal(&t->w, status);
}

static void hn_submit_on_loop(void *arg)
{
	struct hn_xfer *t = arg;

	t->rc = mc_rdma_submit(t->s->r, &t->x, hn_done, t);
}

/* One transfer from side i, waited for (10 s at most).  Returns the submit error, the
 * completion status, or -ETIMEDOUT. */
/* One request from side i, its local NIC chosen by nic_hint first (NULL: by the matrix). */
static int hn_xfer_hint(int i, int op, void *local, uint64_t remote, uint64_t len,
			struct mc_rdma_peer *peer, const char *nic_hint)
{
	struct hn_xfer t = { .s = &hn_sides[i] };
	int st = 0;

	t.x.nic_hint = nic_hint;
	t.x.opcode = op;
	t.x.local = local;
	t.x.remote = remote;
	t.x.len = len;
	t.x.peer = peer;
	hn_wait_init(&t.w);
	hn_on_loop(t.s, hn_submit_on_loop, &t);
	if (t.rc)
		return t.rc;
	if (hn_wait_for(&t.w, 10, &st))
		return -ETIMEDOUT;
	return st;
}

static int hn_xfer(int i, int op, void *local, uint64_t remote, uint64_t len,
		   struct mc_rdma_peer *peer)
{
	return hn_xfer_hint(i, op, local, remote, len, peer, NULL);
}

struct hn_stats {
	struct hn_side *s;
	struct mc_rdma_stats st;
};

static void hn_stats_on_loop(void *arg)
{
	struct hn_stats *h = arg;

	mc_rdma_get_stats(h->s->r, &h->st);
}

static __attribute__((unused)) struct mc_rdma_stats hn_stats(int i)
{
	struct hn_stats h = { .s = &hn_sides[i] };

	hn_on_loop(h.s, hn_stats_on_loop, &h);
	return h.st;
}

#endif

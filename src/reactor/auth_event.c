/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The authentication handshake driven by an event loop: one event on the socket, re-armed for
 * readability or writability as the handshake asks, with the time left to its deadline as the
 * event's timeout.  Runs on the loop's thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "reactor/auth_event.h"

struct mc_auth_op {
	struct mc_auth_hs hs;
	struct event_base *base;
	struct event *ev;
	evutil_socket_t fd;
	int64_t deadline;		/* monotonic ms */
	mc_auth_op_fn cb;
	void *arg;
};

static int64_t mc_auth_op_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mc_auth_op_on_io(evutil_socket_t fd, short what, void *arg);

/* Wait for what the handshake needs next.  0 or -ENOMEM. */
static int mc_auth_op_arm(struct mc_auth_op *op)
{
	int64_t left = op->deadline - mc_auth_op_now();
	struct timeval tv;

	if (left < 1)
		left = 1;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
	if (op->ev)
		event_free(op->ev);
	op->ev = event_new(op->base, op->fd, op->hs.want_write ? EV_WRITE : EV_READ,
			   mc_auth_op_on_io, op);
	if (op->ev == NULL || event_add(op->ev, &tv) != 0)
		return -ENOMEM;
	return 0;
}

static void mc_auth_op_finish(struct mc_auth_op *op, int rc)
{
	op->cb(op->arg, rc, &op->hs);
	mc_auth_op_free(op);
}

static void mc_auth_op_on_io(evutil_socket_t fd, short what, void *arg)
{
	struct mc_auth_op *op = arg;
	int rc;

	(void)fd;
	if (what & EV_TIMEOUT) {
		op->hs.why = "handshake timeout";
		mc_auth_op_finish(op, -ETIMEDOUT);
		return;
	}
	rc = mc_auth_hs_step(&op->hs, op->fd);
	if (rc == MC_AUTH_AGAIN) {
		if (mc_auth_op_arm(op) != 0) {
			op->hs.why = "out of memory";
			mc_auth_op_finish(op, -ENOMEM);
		}
		return;
	}
	mc_auth_op_finish(op, rc == MC_AUTH_DONE ? 0 : rc);
}

struct mc_auth_op *mc_auth_op_start(struct event_base *base, evutil_socket_t fd,
				    const struct mc_auth *a, int role, int timeout_ms,
				    mc_auth_op_fn cb, void *arg)
{
	struct mc_auth_op *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return NULL;
	if (mc_auth_hs_init(&op->hs, a, role) != 0) {
		free(op);
		return NULL;
	}
	op->base = base;
	op->fd = fd;
	op->cb = cb;
	op->arg = arg;
	op->deadline = mc_auth_op_now() + (timeout_ms > 0 ? timeout_ms : mc_auth_timeout_ms());
	if (mc_auth_op_arm(op) != 0) {
		mc_auth_op_free(op);
		return NULL;
	}
	return op;
}

void mc_auth_op_free(struct mc_auth_op *op)
{
	if (op == NULL)
		return;
	if (op->ev)
		event_free(op->ev);
	free(op);
}

static long mc_auth_bev_io(void *ctx, void *buf, size_t n, int writing)
{
	struct bufferevent *bev = ctx;
	int got;

	if (writing)
		return bufferevent_write(bev, buf, n) == 0 ? (long)n : -1;
	got = evbuffer_remove(bufferevent_get_input(bev), buf, n);
	if (got > 0)
		return got;
	errno = EAGAIN;		/* the end of the stream comes as the bufferevent's event */
	return -1;
}

void mc_auth_hs_use_bev(struct mc_auth_hs *hs, struct bufferevent *bev)
{
	hs->io = mc_auth_bev_io;
	hs->io_ctx = bev;
}

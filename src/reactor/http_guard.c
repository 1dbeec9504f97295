/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection limits for evhttp servers (http_guard.h).
 *
 * evhttp gives no hook at accept time that sees the socket, nor one when a connection ends
 * that a server's own code may not also want (evhttp_connection_set_closecb has one slot).
 * So the guard makes each connection's bufferevent itself (evhttp_set_bevcb) and keeps a
 * reference on it:
 *   - right after evhttp has attached the socket (an event activated from the bevcb runs before
 *     the loop polls again, so before any byte is read), the guard reads the peer's address and
 *     admits the connection or frees it (evhttp_connection_free; not inside any callback of it);
 *   - when evhttp frees a connection, bufferevent_free clears the bufferevent's callbacks but the
 *     guard's reference keeps the object: a sweep (before each admission and every second) sees
 *     the cleared callbacks, releases the slot and drops the reference, which closes the socket
 *     (evhttp has already shut down its writing side, so the peer sees the end at once).
 * The deadline is one timer per connection, armed at admission and after each reply, paused
 * while a request routed through the guard is being answered.  Everything runs on the loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "reactor/conn_limit.h"
#include "reactor/http_guard.h"

struct mc_hg_conn {
	struct mc_hg_conn *prev, *next;
	struct mc_http_guard *g;
	struct bufferevent *bev;	/* one reference held by the guard */
	struct event *ev;		/* first the admission, then the request deadline */
	int admitted;
	int busy;			/* a request is being answered */
	struct mc_conn_key key;
	char peer[64];
};

struct mc_hg_route {
	struct mc_hg_route *next;
	struct mc_http_guard *g;
	void (*cb)(struct evhttp_request *, void *);
	void *arg;
};

struct mc_http_guard {
	struct evhttp *http;
	struct event_base *base;
	struct mc_conn_limit *lim;
	int request_ms;
	mc_http_guard_bev_fn inner;
	void *inner_arg;
	struct mc_hg_conn *conns;
	struct mc_hg_route *routes;
	struct event *ev_sweep;
};

/* The evhttp connection of c, or NULL once evhttp has freed it. */
static struct evhttp_connection *mc_hg_evcon(struct mc_hg_conn *c)
{
	bufferevent_data_cb rcb, wcb;
	bufferevent_event_cb ecb;
	void *arg = NULL;

	bufferevent_getcb(c->bev, &rcb, &wcb, &ecb, &arg);
	return arg;
}

static void mc_hg_conn_free(struct mc_hg_conn *c)
{
	struct mc_http_guard *g = c->g;

	if (c->admitted)
		mc_conn_limit_release(g->lim, &c->key);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	event_free(c->ev);
	bufferevent_decref(c->bev);
	free(c);
}

/* Forget the connections evhttp has freed. */
static void mc_hg_sweep(struct mc_http_guard *g)
{
	struct mc_hg_conn *c, *next;

	for (c = g->conns; c; c = next) {
		next = c->next;
		if (mc_hg_evcon(c) == NULL)
			mc_hg_conn_free(c);
	}
}

static void mc_hg_on_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_hg_sweep(arg);
}

static void mc_hg_arm(struct mc_hg_conn *c)
{
	struct timeval tv = { c->g->request_ms / 1000, (c->g->request_ms % 1000) * 1000 };

	if (c->g->request_ms > 0)
		event_add(c->ev, &tv);
}

/* Admission (first run), then the deadline. */
static void mc_hg_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct mc_hg_conn *c = arg;
	struct mc_http_guard *g = c->g;
	struct evhttp_connection *evcon = mc_hg_evcon(c);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	(void)fd;
	(void)what;
	if (evcon == NULL) {
		mc_hg_conn_free(c);
		return;
	}
	if (!c->admitted) {
		struct sockaddr *sa = (struct sockaddr *)&ss;

		if (getpeername(bufferevent_getfd(c->bev), sa, &len) != 0)
			sa = NULL;
		mc_conn_limit_peer(sa, c->peer, sizeof(c->peer));
		mc_hg_sweep(g);
		if (mc_conn_limit_admit(g->lim, sa, &c->key) != 0) {
			evhttp_connection_free(evcon);
			mc_hg_conn_free(c);
			return;
		}
		c->admitted = 1;
		mc_hg_arm(c);
		return;
	}
	if (c->busy)
		return;
	mc_conn_limit_closed_slow(g->lim, c->peer, "no whole request in time");
	evhttp_connection_free(evcon);
	mc_hg_conn_free(c);
}

/* The output callback of mc_http_bev_nodelay: once the socket is known, set the option and go. */
static void mc_hg_on_first_output(struct evbuffer *buf, const struct evbuffer_cb_info *info,
				  void *arg)
{
	struct bufferevent *bev = arg;
	evutil_socket_t fd = bufferevent_getfd(bev);
	int one = 1;

	if (info->n_added == 0 || fd < 0)
		return;
	/* A socket that is not TCP (a unix one) refuses the option: nothing to mend there. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	evbuffer_remove_cb(buf, mc_hg_on_first_output, bev);
}

void mc_http_bev_nodelay(struct bufferevent *bev)
{
	/* Without the callback the replies are only slower, never wrong: no error to report. */
	(void)evbuffer_add_cb(bufferevent_get_output(bev), mc_hg_on_first_output, bev);
}

static struct bufferevent *mc_hg_on_bev(struct event_base *base, void *arg)
{
	struct mc_http_guard *g = arg;
	struct bufferevent *bev;
	struct mc_hg_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	bev = g->inner ? g->inner(base, g->inner_arg)
		       : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		goto fail;
	mc_http_bev_nodelay(bev);
	c->ev = event_new(base, -1, 0, mc_hg_on_timer, c);
	if (c->ev == NULL) {
		bufferevent_free(bev);
		goto fail;
	}
	c->g = g;
	c->bev = bev;
	bufferevent_incref(bev);
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	event_active(c->ev, EV_TIMEOUT, 1);
	return bev;
fail:
	free(c);
	return NULL;	/* evhttp makes a plain one: served, but not counted */
}

static struct mc_hg_conn *mc_hg_find(struct mc_http_guard *g, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	struct mc_hg_conn *c;

	for (c = g->conns; c && bev; c = c->next)
		if (c->bev == bev)
			return c;
	return NULL;
}

static void mc_hg_on_reply_done(struct evhttp_request *req, void *arg)
{
	struct mc_hg_conn *c = arg;

	(void)req;
	c->busy = 0;
	mc_hg_arm(c);
}

static void mc_hg_on_request(struct evhttp_request *req, void *arg)
{
	struct mc_hg_route *r = arg;
	struct mc_hg_conn *c = mc_hg_find(r->g, req);

	if (c && c->admitted) {
		c->busy = 1;
		event_del(c->ev);
		evhttp_request_set_on_complete_cb(req, mc_hg_on_reply_done, c);
	}
	r->cb(req, r->arg);
}

int mc_http_guard_route(struct mc_http_guard *g, const char *path,
			void (*cb)(struct evhttp_request *, void *), void *arg)
{
	struct mc_hg_route *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return -1;
	r->g = g;
	r->cb = cb;
	r->arg = arg;
	r->next = g->routes;
	g->routes = r;
	if (path == NULL) {
		evhttp_set_gencb(g->http, mc_hg_on_request, r);
		return 0;
	}
	return evhttp_set_cb(g->http, path, mc_hg_on_request, r);
}

struct mc_http_guard *mc_http_guard_new(struct evhttp *http, struct event_base *base,
					const char *port, unsigned max_conns,
					unsigned max_per_peer, int request_ms,
					mc_http_guard_bev_fn inner, void *inner_arg)
{
	struct mc_http_guard *g = calloc(1, sizeof(*g));
	struct timeval sec = { 1, 0 };

	if (g == NULL)
		return NULL;
	g->http = http;
	g->base = base;
	g->request_ms = request_ms;
	g->inner = inner;
	g->inner_arg = inner_arg;
	g->lim = mc_conn_limit_new(port, max_conns, max_per_peer);
	g->ev_sweep = event_new(base, -1, EV_PERSIST, mc_hg_on_sweep, g);
	if (g->lim == NULL || g->ev_sweep == NULL || event_add(g->ev_sweep, &sec) != 0) {
		mc_http_guard_free(g);
		return NULL;
	}
	evhttp_set_bevcb(http, mc_hg_on_bev, g);
	return g;
}

void mc_http_guard_free(struct mc_http_guard *g)
{
	if (g == NULL)
		return;
	while (g->conns) {
		g->conns->admitted = 0;	/* the limit goes too */
		mc_hg_conn_free(g->conns);
	}
	while (g->routes) {
		struct mc_hg_route *r = g->routes;

		g->routes = r->next;
		free(r);
	}
	if (g->ev_sweep)
		event_free(g->ev_sweep);
	mc_conn_limit_free(g->lim);
	free(g);
}

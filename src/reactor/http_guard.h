/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_REACTOR_HTTP_GUARD_H
#define MC_REACTOR_HTTP_GUARD_H

/*
 * Connection limits for an evhttp server (libevent 2.1 has none of its own): at most
 * max_conns connections and max_per_peer from one address (conn_limit.h, with its metrics),
 * and a request deadline: each request must have arrived whole within request_ms of the
 * connection's start or of the previous reply, or the connection is closed, so that neither a
 * slowloris client (a request dribbled a byte at a time, which evhttp's own timeouts never
 * catch) nor an idle keep-alive one holds a slot.  Requests being answered are not timed.
 *
 * Routes whose requests are timed are registered through mc_http_guard_route instead of
 * evhttp_set_cb.  Runs on the server's loop thread.
 */
#include <event2/event.h>
#include <event2/http.h>

struct mc_http_guard;
struct bufferevent;

/* What makes a connection's bufferevent (evhttp_set_bevcb's callback type). */
typedef struct bufferevent *(*mc_http_guard_bev_fn)(struct event_base *base, void *arg);

/* Guard http, which runs on base; port names it in metrics and log lines (static storage).
 * inner (may be NULL: a plain socket bufferevent) makes each connection's bufferevent, e.g. a
 * TLS one: the guard takes evhttp's bevcb, so give it here, not to evhttp_set_bevcb.
 * request_ms 0: no deadline; max_* 0: no bound.  NULL when out of memory. */
struct mc_http_guard *mc_http_guard_new(struct evhttp *http, struct event_base *base,
					const char *port, unsigned max_conns,
					unsigned max_per_peer, int request_ms,
					mc_http_guard_bev_fn inner, void *inner_arg);
/* evhttp_set_cb (path) or evhttp_set_gencb (path NULL) with the deadline paused while cb's
 * request is answered.  0 or -1 (as evhttp_set_cb; -ENOMEM as -1). */
int mc_http_guard_route(struct mc_http_guard *g, const char *path,
			void (*cb)(struct evhttp_request *, void *), void *arg);
/* Send bev's answers without Nagle's delay: a reply written as more than one segment would
 * otherwise hold its last one until the peer acknowledges the others, and a keep-alive client
 * delays that acknowledgement (40 ms on Linux), so every request after a connection's first
 * would wait that long.  Sets TCP_NODELAY on the socket the first time output is queued (a
 * bevcb runs before evhttp gives the bufferevent its socket).  The guard does this for every
 * connection it makes; an unguarded server calls it from its own bevcb. */
void mc_http_bev_nodelay(struct bufferevent *bev);
/* Free the guard: after evhttp_free of its server (it holds a reference on each
 * connection's bufferevent, which it drops here).  NULL: no-op. */
void mc_http_guard_free(struct mc_http_guard *g);

#endif

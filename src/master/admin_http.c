/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's admin and metrics HTTP server, on the master's own loop (evhttp, one callback
 * per path).  This file is the server: its start and stop, the one door every route passes
 * (mc_admin_route: the cluster secret check), and the replies and checks the routes share.  The
 * routes live by area: metrics (admin_metrics.c), objects (admin_keys.c), segments
 * (admin_segments.c), the master's own state (admin_status.c), and the operator features (drain
 * jobs, tenant quotas, KV events); admin_more.c registers them all.
 * Single-threaded: the master's reactor thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <jansson.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/http_auth.h"
#include "master/admin_http.h"
#include "master/ha.h"
#include "reactor/http_guard.h"
#include "reactor/tls.h"

/* Label values: escape backslash, quote and newline. */
void mc_admin_prom_label(struct evbuffer *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(b, "\\%c", *s);
		else if (*s == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, s, 1);
	}
}

void mc_admin_reply(struct evhttp_request *req, int code, const char *type, struct evbuffer *b)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	evhttp_send_reply(req, code, code == 200 ? "OK" : code == 404 ? "Not Found"
					 : code == 400	    ? "Bad Request"
					 : code == 409	    ? "Conflict"
							    : "Error",
			  b);
}

void mc_admin_send_json(struct evhttp_request *req, int code, json_t *j)
{
	struct evbuffer *b = evbuffer_new();
	char *s = json_dumps(j, JSON_COMPACT);

	if (s)
		evbuffer_add(b, s, strlen(s));
	free(s);
	json_decref(j);
	mc_admin_reply(req, code, "application/json", b);
	evbuffer_free(b);
}

/* A standby (HA) has no table to answer from: 503 with UNAVAILABLE_IN_CURRENT_MODE, as
 * upstream's "service plane is not active".  1 when refused. */
int mc_admin_standby(struct mc_master *m, struct evhttp_request *req)
{
	if (mc_ha_serving(m))
		return 0;
	mc_admin_send_json(req, 503, json_pack("{sbsiss}", "success", 0, "error_code",
					  MC_ERR_UNAVAILABLE_IN_CURRENT_MODE, "error_message",
					  "service plane is not active"));
	return 1;
}

const char *mc_admin_query(struct evhttp_request *req, struct evkeyvalq *q, const char *name)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));

	if (query == NULL || evhttp_parse_query_str(query, q) != 0)
		return NULL;
	return evhttp_find_header(q, name);
}

/* "true" or "1". */
int mc_admin_query_flag(struct evkeyvalq *q, const char *name)
{
	const char *v = evhttp_find_header(q, name);

	return v && (!strcmp(v, "true") || !strcmp(v, "1"));
}

/* A route serves one method: 1 if req uses it, else 0 with a 405 sent. */
int mc_admin_method(struct evhttp_request *req, enum evhttp_cmd_type cmd)
{
	if (evhttp_request_get_command(req) == cmd)
		return 1;
	evhttp_send_error(req, 405, "Method not allowed");
	return 0;
}

/* Changes are refused while persistence fails, and while the objects load in the background
 * (a key not loaded yet would not be seen): 1 (and a 503 sent) when refused. */
int mc_admin_refuse_changes(struct mc_master *m, struct evhttp_request *req)
{
	if (mc_admin_standby(m, req))
		return 1;
	if (m->load) {
		evhttp_send_error(req, 503, "Loading the objects from --persist_path; retry");
		return 1;
	}
	if (!mc_master_persist_refusing(m))
		return 0;
	m->metrics.persist_refused++;
	mc_admin_send_error(req, 503, MC_ERR_PERSISTENT_FAIL, NULL);
	return 1;
}

/* With the replicated log (HA), a change's reply waits until etcd has it: the reply is kept
 * here, and dropped if the client goes first. */
struct mc_admin_deferred {
	struct evhttp_request *req;
	int code;
	json_t *body;
};

static void mc_admin_deferred_gone(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	((struct mc_admin_deferred *)arg)->req = NULL;
}

static void mc_admin_deferred_send(void *arg)
{
	struct mc_admin_deferred *d = arg;

	if (d->req) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(d->req), NULL, NULL);
		mc_admin_send_json(d->req, d->code, d->body);
	} else {
		json_decref(d->body);
	}
	free(d);
}

/* Reply code/body (stolen) to req once the changes made so far are durable. */
void mc_admin_reply_durable(struct mc_master *m, struct evhttp_request *req, int code,
				   json_t *body)
{
	struct mc_admin_deferred *d;

	if (m->ha == NULL || (d = calloc(1, sizeof(*d))) == NULL) {
		mc_admin_send_json(req, code, body);
		return;
	}
	d->req = req;
	d->code = code;
	d->body = body;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), mc_admin_deferred_gone, d);
	mc_ha_when_durable(m, mc_admin_deferred_send, d);
}

/* Any other path: 405 for other methods than GET, as every route answers them, else 404. */
static void mc_admin_not_found(struct evhttp_request *req, void *arg)
{
	(void)arg;
	if (mc_admin_method(req, EVHTTP_REQ_GET))
		evhttp_send_error(req, 404, "Not Found");
}

struct mc_admin_route {
	struct mc_admin_route *next;	/* m->admin_routes, freed at stop */
	struct mc_master *m;
	void (*cb)(struct evhttp_request *, void *);
	void *arg;
};

/* With a cluster secret, a request that may change something (any method but GET and HEAD)
 * must carry it, and so must reads with --auth_http_reads; then the route's own callback. */
static void mc_admin_on_request(struct evhttp_request *req, void *arg)
{
	struct mc_admin_route *r = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	int read_only = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;

	if ((!read_only || r->m->cfg.auth_http_reads) &&
	    !mc_http_auth_check(r->m->auth, req, "admin HTTP"))
		return;
	r->cb(req, r->arg);
}

int mc_admin_route(struct mc_master *m, const char *path,
		   void (*cb)(struct evhttp_request *, void *), void *arg)
{
	struct mc_admin_route *r = mc_xcalloc(1, sizeof(*r));

	*r = (struct mc_admin_route){ m->admin_routes, m, cb, arg };
	m->admin_routes = r;
	if (path == NULL) {
		evhttp_set_gencb(m->admin, mc_admin_on_request, r);
		return 0;
	}
	return evhttp_set_cb(m->admin, path, mc_admin_on_request, r);
}

/* The routes, one callback per path: every area's, registered through the program's hook
 * (admin_more.c), then the 404 of every other path. */
static int mc_admin_routes(struct mc_master *m)
{
	/* Every route goes through mc_admin_route, so the cluster secret is checked in one
	 * place for every path, whichever module adds it. */
	if (m->admin_extra_routes && m->admin_extra_routes(m) != 0)
		return -1;
	return mc_admin_route(m, NULL, mc_admin_not_found, m);
}

/* evhttp's bufferevent factory: TLS when configured, and replies sent without Nagle's delay. */
static struct bufferevent *mc_admin_on_bev(struct event_base *base, void *arg)
{
	struct mc_master *m = arg;
	struct bufferevent *bev = m->tls ? mc_tls_http_bevcb(base, m->tls)
					 : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

	if (bev)
		mc_http_bev_nodelay(bev);
	return bev;
}

int mc_admin_http_start(struct mc_master *m)
{
	if (m->cfg.metrics_port == 0)
		return 0;
	m->admin = evhttp_new(m->base);
	if (m->admin == NULL)
		return -1;
	evhttp_set_max_headers_size(m->admin, 16384);
	evhttp_set_max_body_size(m->admin, 1 << 20);
	/* A request (or an idle keep-alive connection) gets this long: slow clients cannot hold
	 * the admin port. */
	evhttp_set_timeout(m->admin, 10);
	evhttp_set_bevcb(m->admin, mc_admin_on_bev, m);
	if (mc_admin_routes(m) != 0 ||
	    evhttp_bind_socket(m->admin, m->cfg.metrics_host, (uint16_t)m->cfg.metrics_port)) {
		mc_log_err("cannot listen for admin HTTP on %s:%lld", m->cfg.metrics_host,
			   (long long)m->cfg.metrics_port);
		evhttp_free(m->admin);
		m->admin = NULL;
		return -1;
	}
	mc_log_notice("admin and metrics HTTP on %s:%lld", m->cfg.metrics_host,
		      (long long)m->cfg.metrics_port);
	return 0;
}

void mc_admin_http_stop(struct mc_master *m)
{
	if (m->admin)
		evhttp_free(m->admin);
	m->admin = NULL;
	while (m->admin_routes) {
		struct mc_admin_route *r = m->admin_routes;

		m->admin_routes = r->next;
		free(r);
	}
}

int mc_admin_http_status(int err)
{
	switch (err) {
	case MC_ERR_INVALID_PARAMS:
		return 400;
	case MC_ERR_JOB_NOT_FOUND:
	case MC_ERR_SEGMENT_NOT_FOUND:
	case MC_ERR_OBJECT_NOT_FOUND:
	case MC_ERR_TENANT_NOT_REGISTERED:
		return 404;
	case MC_ERR_UNAVAILABLE_IN_CURRENT_MODE:
	case MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS:
	case MC_ERR_TENANT_NOT_EMPTY:
		return 409;
	default:
		return 500;
	}
}

void mc_admin_send_error(struct evhttp_request *req, int code, int err, const char *msg)
{
	mc_admin_send_json(req, code, json_pack("{sbsiss}", "success", 0, "error_code", err,
					   "error_message", msg ? msg : mc_strerror(err)));
}

char *mc_admin_query_param(struct evhttp_request *req, const char *name)
{
	struct evkeyvalq q;
	const char *v;
	char *out;

	TAILQ_INIT(&q);
	v = mc_admin_query(req, &q, name);
	out = v ? strdup(v) : NULL;
	evhttp_clear_headers(&q);
	return out;
}

char *mc_admin_body(struct evhttp_request *req, size_t max)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *s;

	if (n > max || (s = malloc(n + 1)) == NULL)
		return NULL;
	evbuffer_copyout(in, s, n);
	s[n] = '\0';
	return s;
}

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_ADMIN_HTTP_H
#define MC_MASTER_ADMIN_HTTP_H

/*
 * What the admin HTTP server (admin_http.c) offers the modules that add routes to it (by area:
 * admin_metrics.c, admin_keys.c, admin_segments.c, admin_status.c; drain, tenant quotas, KV
 * events: admin_more.c): replies in upstream's forms, and the checks every
 * route makes.  All on the master's reactor thread.
 */
#include <stddef.h>
#include <stdint.h>

#include <event2/http.h>
#include <jansson.h>

#include "master/master.h"

struct evkeyvalq;

/* Send j (its reference is taken) as application/json with HTTP status code. */
void mc_admin_send_json(struct evhttp_request *req, int code, json_t *j);
/* Upstream's error body {"success":false,"error_code":err,"error_message":msg} (msg NULL: the
 * error's name) with HTTP status code. */
void mc_admin_send_error(struct evhttp_request *req, int code, int err, const char *msg);
/* Upstream's HTTP status for an error code: 400 INVALID_PARAMS, 404 *_NOT_FOUND and
 * TENANT_NOT_REGISTERED, 409 UNAVAILABLE_* and TENANT_NOT_EMPTY, else 500. */
int mc_admin_http_status(int err);
/* The decoded value of query parameter name (a copy to free), or NULL. */
char *mc_admin_query_param(struct evhttp_request *req, const char *name);
/* The request body as a string to free (NUL-terminated), or NULL when it is larger than max. */
char *mc_admin_body(struct evhttp_request *req, size_t max);
/* Write a Prometheus label value, escaped. */
void mc_admin_prom_label(struct evbuffer *b, const char *s);
/* Serve path (NULL: every path no route has) with cb(req, arg), behind the admin server's
 * checks (the cluster secret for requests that may change something).  0 or -1. */
int mc_admin_route(struct mc_master *m, const char *path,
		   void (*cb)(struct evhttp_request *, void *), void *arg);
/* Changes are refused while persistence fails, and on a standby: 1 (and a 503 sent) when
 * refused. */
int mc_admin_refuse_changes(struct mc_master *m, struct evhttp_request *req);
/* A standby (HA) has no table to answer from: 1 (and a 503 with UNAVAILABLE_IN_CURRENT_MODE
 * sent, as upstream's "service plane is not active") when req is refused. */
int mc_admin_standby(struct mc_master *m, struct evhttp_request *req);
/* A route serves one method: 1 if req uses cmd, else 0 with a 405 sent. */
int mc_admin_method(struct evhttp_request *req, enum evhttp_cmd_type cmd);
/* Send b with Content-Type type and HTTP status code. */
void mc_admin_reply(struct evhttp_request *req, int code, const char *type, struct evbuffer *b);
/* Reply code/body (its reference is taken) to req once the changes made so far are durable
 * (with the replicated log of HA; at once without).  The reply is dropped if the client goes
 * first. */
void mc_admin_reply_durable(struct mc_master *m, struct evhttp_request *req, int code,
			    json_t *body);
/* Parse req's query string into q (the caller initialises q and clears it with
 * evhttp_clear_headers) and return parameter name's value there, or NULL. */
const char *mc_admin_query(struct evhttp_request *req, struct evkeyvalq *q, const char *name);
/* Parameter name of a parsed query is "true" or "1". */
int mc_admin_query_flag(struct evkeyvalq *q, const char *name);
/* v bytes, 1024-based with two decimals ("1.50 GB"), as upstream's byte formatter. */
void mc_admin_fmt_bytes(char *out, size_t n, uint64_t v);

/* The routes by area, each registered through mc_admin_route: metrics (admin_metrics.c),
 * objects (admin_keys.c), segments (admin_segments.c), the master's state (admin_status.c).
 * 0 or -1. */
int mc_admin_metrics_routes(struct mc_master *m);
int mc_admin_keys_routes(struct mc_master *m);
int mc_admin_segments_routes(struct mc_master *m);
int mc_admin_status_routes(struct mc_master *m);

/* admin_more.c: every area's routes (the program's admin_extra_routes hook), and the metrics of
 * drain jobs, tasks, tenant quotas and KV events. */
int mc_admin_more_routes(struct mc_master *m);
void mc_admin_more_metrics(struct mc_master *m, struct evbuffer *b);

#endif

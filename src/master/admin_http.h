/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_ADMIN_HTTP_H
#define MC_MASTER_ADMIN_HTTP_H

/*
 * What the admin HTTP server (admin_http.c) offers the modules that add routes to it (drain,
 * tenant quotas, KV events: admin_more.c): replies in upstream's forms, and the checks every
 * route makes.  All on the master's reactor thread.
 */
#include <event2/http.h>
#include <jansson.h>

#include "master/master.h"

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
/* Changes are refused while persistence fails: 1 (and a 503 sent) when refused. */
int mc_admin_refuse_changes(struct mc_master *m, struct evhttp_request *req);

/* admin_more.c: the routes and metrics of drain jobs, tenant quotas and KV events. */
int mc_admin_more_routes(struct mc_master *m);
void mc_admin_more_metrics(struct mc_master *m, struct evbuffer *b);

#endif

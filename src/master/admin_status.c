/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin HTTP routes about the master itself: /health, /leader, /role, /ha_status (HA,
 * ha.c) and /version, answered as upstream's.  Single-threaded: the master's reactor thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <jansson.h>

#include "common/errcode.h"
#include "common/log.h"
#include "master/admin_http.h"
#include "master/ha.h"

/* GET /health */
static void mc_admin_get_health(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	json_t *j = json_pack("{sssssssbsb}", "status", "ok", "role", mc_ha_role(m), "ha_state",
			      mc_ha_state_name(m), "service_ready", mc_ha_serving(m),
			      "persistence_ok", !m->persist_failed);
	json_t *l = mc_ha_leader_json(m);

	if (json_is_true(json_object_get(l, "present"))) {
		json_object_set(j, "leader_address", json_object_get(l, "leader_address"));
		json_object_set(j, "view_version", json_object_get(l, "view_version"));
	}
	json_decref(l);
	mc_admin_send_json(req, 200, j);
}

/* GET /leader: {"present", "leader_address", "view_version"} as upstream's. */
static void mc_admin_get_leader(struct evhttp_request *req, void *arg)
{
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	mc_admin_send_json(req, 200, mc_ha_leader_json(arg));
}

/* GET /role ("leader" or "standby") and GET /ha_status (the runtime state), as text. */
static void mc_admin_get_text(struct evhttp_request *req, const char *text)
{
	struct evbuffer *b;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	b = evbuffer_new();
	evbuffer_add_printf(b, "%s", text);
	mc_admin_reply(req, 200, "text/plain; charset=utf-8", b);
	evbuffer_free(b);
}

static void mc_admin_get_role(struct evhttp_request *req, void *arg)
{
	mc_admin_get_text(req, mc_ha_role(arg));
}

static void mc_admin_get_ha_status(struct evhttp_request *req, void *arg)
{
	mc_admin_get_text(req, mc_ha_state_name(arg));
}

/* GET /version: the store protocol version upstream reports and what answers it. */
static void mc_admin_version(struct evhttp_request *req, void *arg)
{
	(void)arg;
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	mc_admin_send_json(req, 200, json_pack("{ssss}", "version", "2.0.0", "display_version",
					  "0.3.14 (mooncake-c " PACKAGE_VERSION ")"));
}

int mc_admin_status_routes(struct mc_master *m)
{
	return mc_admin_route(m, "/health", mc_admin_get_health, m) ||
	       mc_admin_route(m, "/version", mc_admin_version, m) ||
	       mc_admin_route(m, "/role", mc_admin_get_role, m) ||
	       mc_admin_route(m, "/ha_status", mc_admin_get_ha_status, m) ||
	       mc_admin_route(m, "/leader", mc_admin_get_leader, m);
}

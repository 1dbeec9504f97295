/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP face of mooncake_proxy: one small handler per route on one evhttp server.
 *
 *   POST /v1/completions, /v1/chat/completions   proxied (proxy_flow.c)
 *   GET  /v1/models                               the --model, in OpenAI's list form
 *   GET  /health                                  200 when both roles have an instance in
 *                                                 rotation, else 503
 *   GET  /status                                  the instance lists
 *   GET  /metrics                                 Prometheus text
 *   POST /instances/add, /instances/remove        admin, X-API-Key checked in constant time
 *
 * Header and body sizes are bounded by evhttp itself (413 and 400 without calling us).  Loop
 * thread only.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "common/log.h"
#include "proxy/proxy.h"
#include "reactor/conn_limit.h"
#include "reactor/http_guard.h"
#include "reactor/procmem.h"

static void px_send_json(struct evhttp_request *req, int code, json_t *j)
{
	struct evbuffer *b = evbuffer_new();
	char *s = json_dumps(j, JSON_COMPACT);

	if (b == NULL || s == NULL) {
		evhttp_send_error(req, 500, NULL);
		goto out;
	}
	evbuffer_add(b, s, strlen(s));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_send_reply(req, code, code == 200 ? "OK" : "Error", b);
out:
	free(s);
	if (b)
		evbuffer_free(b);
	json_decref(j);
}

static int px_is_get(struct evhttp_request *req)
{
	enum evhttp_cmd_type c = evhttp_request_get_command(req);

	if (c == EVHTTP_REQ_GET || c == EVHTTP_REQ_HEAD)
		return 1;
	px_send_error(req, 405, "invalid_request_error", "use GET");
	return 0;
}

static void px_on_models(struct evhttp_request *req, void *arg)
{
	struct px *px = arg;

	if (!px_is_get(req))
		return;
	px_send_json(req, 200,
		     json_pack("{s:s,s:[{s:s,s:s,s:I,s:s}]}", "object", "list", "data", "id",
			       px->cfg.model, "object", "model", "created", (json_int_t)time(NULL),
			       "owned_by", "mooncake_proxy"));
}

static size_t px_in_rotation(const struct px_pool *pool)
{
	const struct px_instance *in;
	size_t n = 0;

	for (in = pool->head; in; in = in->next)
		n += in->healthy != 0;
	return n;
}

static void px_on_health(struct evhttp_request *req, void *arg)
{
	struct px *px = arg;
	size_t p = px_in_rotation(&px->pool[PX_PREFILL]), d = px_in_rotation(&px->pool[PX_DECODE]);

	if (!px_is_get(req))
		return;
	px_send_json(req, p && d ? 200 : 503,
		     json_pack("{s:s,s:I,s:I}", "status", p && d ? "ok" : "unavailable",
			       "prefill_instances", (json_int_t)p, "decode_instances", (json_int_t)d));
}

static json_t *px_names(const struct px_pool *pool, int only_healthy)
{
	json_t *a = json_array();
	const struct px_instance *in;

	for (in = pool->head; in; in = in->next)
		if (!only_healthy || !in->healthy)
			json_array_append_new(a, json_string(in->name));
	return a;
}

static void px_on_status(struct evhttp_request *req, void *arg)
{
	struct px *px = arg;

	if (!px_is_get(req))
		return;
	px_send_json(req, 200,
		     json_pack("{s:I,s:I,s:o,s:o,s:s,s:o,s:o,s:I}", "prefill_node_count",
			       (json_int_t)px->pool[PX_PREFILL].n, "decode_node_count",
			       (json_int_t)px->pool[PX_DECODE].n, "prefill_nodes",
			       px_names(&px->pool[PX_PREFILL], 0), "decode_nodes",
			       px_names(&px->pool[PX_DECODE], 0), "scheduling", px->cfg.scheduling,
			       "prefill_out_of_rotation", px_names(&px->pool[PX_PREFILL], 1),
			       "decode_out_of_rotation", px_names(&px->pool[PX_DECODE], 1),
			       "inflight", (json_int_t)px->inflight));
}

static void px_hist_print(struct evbuffer *b, const char *name, const char *labels,
			  const struct px_hist *h)
{
	uint64_t cum = 0;
	int i;

	for (i = 0; i < PX_HIST_N; i++) {
		cum += h->bucket[i];
		evbuffer_add_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels,
				    *labels ? "," : "", px_hist_bounds[i], (unsigned long long)cum);
	}
	evbuffer_add_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels,
			    *labels ? "," : "", (unsigned long long)h->count);
	if (*labels)
		evbuffer_add_printf(b, "%s_sum{%s} %.9f\n%s_count{%s} %llu\n", name, labels, h->sum,
				    name, labels, (unsigned long long)h->count);
	else
		evbuffer_add_printf(b, "%s_sum %.9f\n%s_count %llu\n", name, h->sum, name,
				    (unsigned long long)h->count);
}

/* The pool knowledge of kv_aware (--kv_events_endpoint). */
static void px_kvpool_prom(struct evbuffer *b, const struct px_kvpool *kp)
{
#define PX_KVM(name, type, help, field) { name, type, help, offsetof(struct px_kvpool, field) }
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} m[] = {
		PX_KVM("mooncake_proxy_kv_events_messages_total", "counter",
		       "KV event messages received.", messages),
		PX_KVM("mooncake_proxy_kv_events_total", "counter", "KV events read.", events),
		PX_KVM("mooncake_proxy_kv_events_unmapped_total", "counter",
		       "KV events naming no block (key not of --kv_events_key_format).", unmapped),
		PX_KVM("mooncake_proxy_kv_events_bad_messages_total", "counter",
		       "KV event messages dropped as malformed.", bad),
		PX_KVM("mooncake_proxy_kv_events_sequence_gaps_total", "counter",
		       "Jumps of the KV events' sequence numbers (events lost).", gaps),
		PX_KVM("mooncake_proxy_kv_events_disconnects_total", "counter",
		       "Times the master's KV events went away (pool knowledge dropped).",
		       disconnects),
		PX_KVM("mooncake_proxy_kv_pool_blocks", "gauge",
		       "Block hashes the proxy believes are in the pool.", known),
		PX_KVM("mooncake_proxy_kv_pool_lookups_total", "counter",
		       "Prompts looked up in the pool set.", lookups),
		PX_KVM("mooncake_proxy_kv_pool_hits_total", "counter",
		       "Prompts whose prefix was in the pool (any prefill instance can load it).",
		       hits),
		PX_KVM("mooncake_proxy_kv_pool_prompt_blocks_total", "counter",
		       "Whole prompt blocks looked up in the pool set.", blocks_looked),
		PX_KVM("mooncake_proxy_kv_pool_prompt_blocks_matched_total", "counter",
		       "Leading prompt blocks found in the pool set.", blocks_matched),
		PX_KVM("mooncake_proxy_kv_pool_prefill_skipped_total", "counter",
		       "Requests sent straight to decode, every prompt block being in the pool.",
		       skipped),
	};
#undef PX_KVM
	size_t i;

	mc_prom_u64(b, "mooncake_proxy_kv_events_connected", "gauge",
		    "1 while subscribed to the master's KV events.", (uint64_t)kp->connected);
	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		mc_prom_u64(b, m[i].name, m[i].type, m[i].help,
			    *(const uint64_t *)(const void *)((const char *)kp + m[i].off));
}

static void px_on_metrics(struct evhttp_request *req, void *arg)
{
	struct px *px = arg;
	struct evbuffer *b;
	struct px_instance *in;
	char lab[400];
	int r;

	if (!px_is_get(req))
		return;
	b = evbuffer_new();
	if (b == NULL) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add_printf(b,
			    "# HELP mooncake_proxy_requests_total Completion requests received.\n"
			    "# TYPE mooncake_proxy_requests_total counter\n"
			    "mooncake_proxy_requests_total %llu\n"
			    "# HELP mooncake_proxy_errors_total Completion requests answered with an error.\n"
			    "# TYPE mooncake_proxy_errors_total counter\n"
			    "mooncake_proxy_errors_total %llu\n"
			    "# HELP mooncake_proxy_rejected_total Requests refused at --max_inflight.\n"
			    "# TYPE mooncake_proxy_rejected_total counter\n"
			    "mooncake_proxy_rejected_total %llu\n"
			    "# HELP mooncake_proxy_client_aborts_total Callers that went away mid-request.\n"
			    "# TYPE mooncake_proxy_client_aborts_total counter\n"
			    "mooncake_proxy_client_aborts_total %llu\n"
			    "# HELP mooncake_proxy_retries_total Requests sent again to another instance.\n"
			    "# TYPE mooncake_proxy_retries_total counter\n"
			    "mooncake_proxy_retries_total %llu\n"
			    "# HELP mooncake_proxy_inflight Completion requests in flight.\n"
			    "# TYPE mooncake_proxy_inflight gauge\n"
			    "mooncake_proxy_inflight %lld\n"
			    "# HELP mooncake_proxy_kv_prefix_blocks_total Prompt blocks looked up by kv_aware.\n"
			    "# TYPE mooncake_proxy_kv_prefix_blocks_total counter\n"
			    "mooncake_proxy_kv_prefix_blocks_total %llu\n"
			    "# HELP mooncake_proxy_kv_prefix_blocks_matched_total Prompt blocks kv_aware found on the chosen instance.\n"
			    "# TYPE mooncake_proxy_kv_prefix_blocks_matched_total counter\n"
			    "mooncake_proxy_kv_prefix_blocks_matched_total %llu\n",
			    (unsigned long long)px->requests, (unsigned long long)px->errors,
			    (unsigned long long)px->rejected, (unsigned long long)px->client_aborts,
			    (unsigned long long)px->retries, (long long)px->inflight,
			    (unsigned long long)px->kv_blocks_looked,
			    (unsigned long long)px->kv_blocks_matched);
	evbuffer_add_printf(b, "# HELP mooncake_proxy_request_seconds Arrival to last byte.\n"
			       "# TYPE mooncake_proxy_request_seconds histogram\n");
	px_hist_print(b, "mooncake_proxy_request_seconds", "", &px->lat);
	evbuffer_add_printf(b, "# HELP mooncake_proxy_added_seconds Time of a request not spent "
			       "waiting on instances.\n"
			       "# TYPE mooncake_proxy_added_seconds histogram\n");
	px_hist_print(b, "mooncake_proxy_added_seconds", "", &px->added);
	evbuffer_add_printf(b, "# HELP mooncake_proxy_instance_requests_total Requests sent to an instance.\n"
			       "# TYPE mooncake_proxy_instance_requests_total counter\n"
			       "# HELP mooncake_proxy_instance_errors_total Failed requests to an instance.\n"
			       "# TYPE mooncake_proxy_instance_errors_total counter\n"
			       "# HELP mooncake_proxy_instance_inflight Requests in flight to an instance.\n"
			       "# TYPE mooncake_proxy_instance_inflight gauge\n"
			       "# HELP mooncake_proxy_instance_healthy 1 when the instance is in rotation.\n"
			       "# TYPE mooncake_proxy_instance_healthy gauge\n"
			       "# HELP mooncake_proxy_instance_seconds Request sent to answer complete.\n"
			       "# TYPE mooncake_proxy_instance_seconds histogram\n");
	for (r = 0; r < 2; r++) {
		for (in = px->pool[r].head; in; in = in->next) {
			snprintf(lab, sizeof(lab), "role=\"%s\",instance=\"%s\"",
				 r == PX_PREFILL ? "prefill" : "decode", in->name);
			evbuffer_add_printf(b,
					    "mooncake_proxy_instance_requests_total{%s} %llu\n"
					    "mooncake_proxy_instance_errors_total{%s} %llu\n"
					    "mooncake_proxy_instance_inflight{%s} %lld\n"
					    "mooncake_proxy_instance_healthy{%s} %d\n",
					    lab, (unsigned long long)in->requests, lab,
					    (unsigned long long)in->errors, lab,
					    (long long)in->inflight, lab, in->healthy);
			px_hist_print(b, "mooncake_proxy_instance_seconds", lab, &in->lat);
		}
	}
	if (px->kvpool)
		px_kvpool_prom(b, px->kvpool);
	mc_conn_limit_prom(b);
	mc_procmem_prom(b);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

/* Equal strings, in time that depends only on the length of the given key. */
static int px_key_equal(const char *given, const char *want)
{
	size_t lg = strlen(given), lw = strlen(want), i;
	unsigned char d = (unsigned char)(lg != lw);

	for (i = 0; i < lg; i++)
		d |= (unsigned char)(given[i] ^ want[i % (lw ? lw : 1)]);
	return d == 0;
}

/* Checks the admin key; answers and returns 0 when refused. */
static int px_admin_ok(struct px *px, struct evhttp_request *req)
{
	const char *k = evhttp_find_header(evhttp_request_get_input_headers(req), "X-API-Key");
	char peer[64];
	const char *host = NULL;
	ev_uint16_t port = 0;

	evhttp_connection_get_peer(evhttp_request_get_connection(req), (char **)&host, &port);
	snprintf(peer, sizeof(peer), "%s:%u", host ? host : "?", port);
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		px_send_error(req, 405, "invalid_request_error", "use POST");
		return 0;
	}
	if (px->admin_key == NULL) {
		mc_log_warn("admin request from %s refused: no ADMIN_API_KEY configured", peer);
		px_send_error(req, 503, "server_error",
			      "Server configuration error: no admin key (ADMIN_API_KEY)");
		return 0;
	}
	if (k == NULL) {
		mc_log_warn("admin request from %s refused: no X-API-Key", peer);
		px_send_error(req, 401, "authentication_error", "X-API-Key header required");
		return 0;
	}
	if (!px_key_equal(k, px->admin_key)) {
		mc_log_warn("admin request from %s refused: wrong X-API-Key", peer);
		px_send_error(req, 403, "permission_error", "Forbidden: Invalid API Key.");
		return 0;
	}
	return 1;
}

/* Parse {"type": "prefill"|"decode", "instance": "host:port"}.  Returns 0, or -1 answered. */
static int px_admin_body(struct evhttp_request *req, enum px_role *role, char *inst, size_t n)
{
	struct evbuffer *b = evhttp_request_get_input_buffer(req);
	json_t *j = json_loadb((const char *)evbuffer_pullup(b, -1), evbuffer_get_length(b), 0,
			       NULL);
	const char *t = json_string_value(json_object_get(j, "type"));
	const char *i = json_string_value(json_object_get(j, "instance"));
	int rc = -1;

	if (!json_is_object(j))
		px_send_error(req, 400, "invalid_request_error", "the body is not a JSON object");
	else if (t == NULL || (strcmp(t, "prefill") && strcmp(t, "decode")))
		px_send_error(req, 400, "invalid_request_error", "Invalid instance type.");
	else if (i == NULL || strchr(i, ':') == NULL || strlen(i) >= n)
		px_send_error(req, 400, "invalid_request_error", "Invalid instance format.");
	else {
		*role = strcmp(t, "prefill") ? PX_DECODE : PX_PREFILL;
		snprintf(inst, n, "%s", i);
		rc = 0;
	}
	json_decref(j);
	return rc;
}

static void px_on_add(struct evhttp_request *req, void *arg)
{
	struct px *px = arg;
	enum px_role role;
	char inst[300], msg[400];
	struct px_instance *in;
	int rc;

	if (!px_admin_ok(px, req) || px_admin_body(req, &role, inst, sizeof(inst)) != 0)
		return;
	rc = px_pool_add(px, role, inst, 1);
	if (rc == -EEXIST) {
		px_send_error(req, 400, "invalid_request_error", "Instance already exists.");
		return;
	}
	if (rc == -EINVAL) {
		px_send_error(req, 400, "invalid_request_error", "Invalid instance address.");
		return;
	}
	if (rc != 0) {
		px_send_error(req, 503, "server_error", "too many instances (--max_instances)");
		return;
	}
	for (in = px->pool[role].head; in->next; in = in->next)
		;
	/* In rotation once it answers /v1/models with our model. */
	px_health_check(in);
	mc_log_notice("admin: added %s instance %s", role == PX_PREFILL ? "prefill" : "decode",
		      inst);
	snprintf(msg, sizeof(msg), "Added %s to %s_instances.", inst,
		 role == PX_PREFILL ? "prefill" : "decode");
	px_send_json(req, 200, json_pack("{s:s}", "message", msg));
}

static void px_on_remove(struct evhttp_request *req, void *arg)
{
	struct px *px = arg;
	enum px_role role;
	char inst[300], msg[400];

	if (!px_admin_ok(px, req) || px_admin_body(req, &role, inst, sizeof(inst)) != 0)
		return;
	if (px_pool_remove(px, role, inst) != 0) {
		px_send_error(req, 404, "invalid_request_error", "Instance not found.");
		return;
	}
	mc_log_notice("admin: removed %s instance %s", role == PX_PREFILL ? "prefill" : "decode",
		      inst);
	snprintf(msg, sizeof(msg), "Removed %s from %s_instances.", inst,
		 role == PX_PREFILL ? "prefill" : "decode");
	px_send_json(req, 200, json_pack("{s:s}", "message", msg));
}

static void px_on_other(struct evhttp_request *req, void *arg)
{
	(void)arg;
	px_send_error(req, 404, "invalid_request_error", "no such route");
}

int px_http_start(struct px *px)
{
	struct evhttp_bound_socket *s;
	struct timeval tv = { px->cfg.client_timeout_ms / 1000,
			      (px->cfg.client_timeout_ms % 1000) * 1000 };
	struct sockaddr_storage ss;
	ev_socklen_t sl = sizeof(ss);

	px->http = evhttp_new(px->base);
	if (px->http == NULL)
		return -ENOMEM;
	evhttp_set_max_headers_size(px->http, (ev_ssize_t)px->cfg.max_header_bytes);
	evhttp_set_max_body_size(px->http, (ev_ssize_t)px->cfg.max_body_bytes);
	evhttp_set_timeout_tv(px->http, &tv);
	evhttp_set_allowed_methods(px->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
	px->guard = mc_http_guard_new(px->http, px->base, "proxy_http",
				      (unsigned)px->cfg.max_connections,
				      (unsigned)px->cfg.max_connections_per_peer,
				      (int)px->cfg.request_timeout_ms, NULL, NULL);
	if (px->guard == NULL ||
	    mc_http_guard_route(px->guard, "/v1/completions", px_flow_on_completions, px) ||
	    mc_http_guard_route(px->guard, "/v1/chat/completions", px_flow_on_chat, px) ||
	    mc_http_guard_route(px->guard, "/v1/models", px_on_models, px) ||
	    mc_http_guard_route(px->guard, "/health", px_on_health, px) ||
	    mc_http_guard_route(px->guard, "/status", px_on_status, px) ||
	    mc_http_guard_route(px->guard, "/metrics", px_on_metrics, px) ||
	    mc_http_guard_route(px->guard, "/instances/add", px_on_add, px) ||
	    mc_http_guard_route(px->guard, "/instances/remove", px_on_remove, px) ||
	    mc_http_guard_route(px->guard, NULL, px_on_other, px))
		return -ENOMEM;
	s = evhttp_bind_socket_with_handle(px->http, px->cfg.host, (ev_uint16_t)px->cfg.port);
	if (s == NULL)
		return -EADDRINUSE;
	if (getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss, &sl) == 0)
		px->bound_port = ntohs(ss.ss_family == AF_INET6
					       ? ((struct sockaddr_in6 *)&ss)->sin6_port
					       : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

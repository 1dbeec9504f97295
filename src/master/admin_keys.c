/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin HTTP routes about objects: key queries (/query_key, /batch_query_keys,
 * /get_all_keys), removals (/api/v1/remove, /api/v1/remove_all: the RPC's removals,
 * ops_remove.c) and soft pins (/api/v1/soft_pin, /api/v1/soft_unpin: admin_pin.c).  Queries
 * work in the default tenant's namespace; the expensive listing of all keys is for operators and
 * tests, not for scrapers.  Single-threaded: the master's reactor thread.
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
#include "master/ops.h"
#include "master/tenants.h"
#include "segment/alloc.h"

static json_t *mc_buffer_desc(struct mc_object *o, struct mc_replica *r)
{
	return json_pack("{sIsIssss}", "size_", (json_int_t)o->size, "buffer_address_",
			 (json_int_t)(r->seg->base + r->off), "protocol_",
			 r->seg->protocol, "transport_endpoint_", r->seg->endpoint);
}

/* The readable memory replicas in the order GetReplicaList gives them: those on segments of
 * Active clients with no reported transfer failures first. */
static json_t *mc_replicas_json(struct mc_master *m, struct mc_object *o)
{
	json_t *arr = json_array();
	int64_t now = mc_master_now(m);
	uint32_t i;
	int pass;

	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < o->nrep; i++) {
			struct mc_replica *r = mc_object_replica(o, i);

			if (r->type == MC_REPLICA_MEMORY && mc_replica_readable(r) &&
			    mc_segment_preferred_for_read(m, r->seg, now) == (pass == 0))
				json_array_append_new(arr, mc_buffer_desc(o, r));
		}
	return arr;
}

/* POST /api/v1/remove_all[?force=true]: RemoveAll, as the RPC does it. */
static void mc_admin_remove_all(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evkeyvalq q;
	int64_t count;
	int f;

	TAILQ_INIT(&q);
	mc_admin_query(req, &q, "force");
	f = mc_admin_query_flag(&q, "force");
	if (!mc_admin_method(req, EVHTTP_REQ_POST) || mc_admin_refuse_changes(m, req))
		goto out;
	{
		/* ?tenant_id=: only that tenant's objects (upstream's); none: every tenant's. */
		const char *tid = evhttp_find_header(&q, "tenant_id");

		if (tid && *tid && mc_tenant_scope(m, tid) != 0) {
			mc_admin_send_json(req, 200, json_pack("{sbsI}", "success", 1, "removed_count",
							  (json_int_t)0));
			goto out;
		}
	}
	count = mc_master_remove_all(m, f, mc_master_now(m), "admin remove_all");
	m->objects.tenant = 0;
	m->objects.all_tenants = 1;
	if (mc_master_commit(m) != 0) {
		mc_admin_send_error(req, 503, MC_ERR_PERSISTENT_FAIL, NULL);
		goto out;
	}
	mc_log_notice("admin remove_all%s removed %lld objects", f ? " (force)" : "",
		      (long long)count);
	mc_admin_reply_durable(m, req, 200, json_pack("{sbsI}", "success", 1, "removed_count",
						      (json_int_t)count));
out:
	evhttp_clear_headers(&q);
}

/* POST /api/v1/remove?key=K[&force=true]: Remove(key, force), as the RPC does it (our
 * addition, for mooncake_ctl). */
static void mc_admin_remove(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evkeyvalq q;
	const char *key;
	int f, rc;

	TAILQ_INIT(&q);
	key = mc_admin_query(req, &q, "key");
	f = mc_admin_query_flag(&q, "force");
	if (!mc_admin_method(req, EVHTTP_REQ_POST))
		goto out;
	if (key == NULL) {
		mc_admin_send_error(req, 400, MC_ERR_INVALID_PARAMS, NULL);
		goto out;
	}
	if (mc_admin_refuse_changes(m, req))
		goto out;
	rc = mc_master_remove_key(m, key, strlen(key), f, mc_master_now(m));
	if (mc_master_commit(m) != 0) {
		mc_admin_send_error(req, 503, MC_ERR_PERSISTENT_FAIL, NULL);
		goto out;
	}
	if (rc) {
		mc_admin_send_error(req, rc == MC_ERR_OBJECT_NOT_FOUND ? 404 : 409, rc, NULL);
		goto out;
	}
	mc_log_notice("admin remove of %s%s", key, f ? " (force)" : "");
	mc_admin_reply_durable(m, req, 200, json_pack("{sb}", "success", 1));
out:
	evhttp_clear_headers(&q);
}

/* Add "object_checksum" to j when o's writer gave one: the CRC-64 as 16 hex digits (a JSON
 * number cannot hold every 64-bit value exactly), as the master's log lines print it. */
static void mc_checksum_json(json_t *j, const struct mc_object *o)
{
	char hex[17];

	if (!o->has_checksum)
		return;
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)o->checksum);
	json_object_set_new(j, "object_checksum", json_string(hex));
}

/* GET /query_key?key=K: the readable memory replicas (and the object's checksum); grants a
 * read lease. */
static void mc_admin_query_key(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evkeyvalq q;
	const char *key;
	struct mc_object *o;
	json_t *arr;

	if (mc_admin_standby(arg, req))
		return;

	TAILQ_INIT(&q);
	key = mc_admin_query(req, &q, "key");
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		goto out;
	o = key ? mc_object_find(&m->objects, key, strlen(key)) : NULL;
	if (key == NULL) {
		mc_admin_send_error(req, 400, MC_ERR_INVALID_PARAMS, NULL);
	} else if (o == NULL || json_array_size(arr = mc_replicas_json(m, o)) == 0) {
		if (o)
			json_decref(arr);
		mc_admin_send_error(req, 404, MC_ERR_OBJECT_NOT_FOUND, NULL);
	} else {
		int64_t until = mc_master_now(m) + m->cfg.default_kv_lease_ttl;

		json_t *j = json_pack("{sbso}", "success", 1, "data", arr);

		if (o->lease_until < until)
			o->lease_until = until;
		mc_checksum_json(j, o);
		mc_admin_send_json(req, 200, j);
	}
out:
	evhttp_clear_headers(&q);
}

/* GET /batch_query_keys?keys=K1,K2,... */
static void mc_admin_batch_query_keys(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evkeyvalq q;
	const char *keys;
	json_t *data;
	char *dup, *save = NULL, *k;

	if (mc_admin_standby(arg, req))
		return;

	TAILQ_INIT(&q);
	keys = mc_admin_query(req, &q, "keys");
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		goto out;
	if (keys == NULL || *keys == '\0') {
		mc_admin_send_json(req, 400, json_pack("{sbss}", "success", 0, "error",
						  "No keys provided. Use ?keys=key1,key2,..."));
		goto out;
	}
	data = json_object();
	dup = strdup(keys);
	for (k = strtok_r(dup, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
		struct mc_object *o = mc_object_find(&m->objects, k, strlen(k));
		json_t *arr = o ? mc_replicas_json(m, o) : NULL;

		if (arr && json_array_size(arr)) {
			json_t *j = json_pack("{sbso}", "ok", 1, "values", arr);

			mc_checksum_json(j, o);
			json_object_set_new(data, k, j);
		} else {
			json_decref(arr);
			json_object_set_new(data, k, json_pack("{sbss}", "ok", 0, "error",
							       "OBJECT_NOT_FOUND"));
		}
	}
	free(dup);
	mc_admin_send_json(req, 200, json_pack("{sbso}", "success", 1, "data", data));
out:
	evhttp_clear_headers(&q);
}

/* GET /get_all_keys: one key a line. */
static void mc_admin_get_all_keys(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evbuffer *b;
	struct mc_object *o;
	size_t pos = 0;

	if (mc_admin_standby(arg, req))
		return;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	b = evbuffer_new();
	while ((o = mc_object_next(&m->objects, &pos)) != NULL) {
		evbuffer_add(b, o->key, o->key_len);
		evbuffer_add(b, "\n", 1);
	}
	mc_admin_reply(req, 200, "text/plain", b);
	evbuffer_free(b);
}

/* POST /api/v1/soft_pin and /api/v1/soft_unpin: a JSON body (admin_pin.c). */
static void mc_admin_pin_common(struct evhttp_request *req, struct mc_master *m, int pin)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	json_t *reply = NULL;
	int code;

	if (!mc_admin_method(req, EVHTTP_REQ_POST) || mc_admin_refuse_changes(m, req))
		return;
	code = mc_admin_soft_pin_body(m, (const char *)evbuffer_pullup(in, (ssize_t)len), len, pin,
				      &reply);
	if (code == 200 && mc_master_commit(m) != 0) {
		json_decref(reply);
		mc_admin_send_error(req, 503, MC_ERR_PERSISTENT_FAIL, NULL);
		return;
	}
	mc_admin_send_json(req, code, reply);
}

static void mc_admin_soft_pin(struct evhttp_request *req, void *arg)
{
	mc_admin_pin_common(req, arg, 1);
}

static void mc_admin_soft_unpin(struct evhttp_request *req, void *arg)
{
	mc_admin_pin_common(req, arg, 0);
}

int mc_admin_keys_routes(struct mc_master *m)
{
	return mc_admin_route(m, "/api/v1/remove_all", mc_admin_remove_all, m) ||
	       mc_admin_route(m, "/api/v1/remove", mc_admin_remove, m) ||
	       mc_admin_route(m, "/query_key", mc_admin_query_key, m) ||
	       mc_admin_route(m, "/batch_query_keys", mc_admin_batch_query_keys, m) ||
	       mc_admin_route(m, "/get_all_keys", mc_admin_get_all_keys, m) ||
	       mc_admin_route(m, "/api/v1/soft_pin", mc_admin_soft_pin, m) ||
	       mc_admin_route(m, "/api/v1/soft_unpin", mc_admin_soft_unpin, m);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Soft pins set and cleared by an operator: the bodies of POST /api/v1/soft_pin and
 * /api/v1/soft_unpin (admin_http.c serves the routes), upstream's form:
 *
 *   soft_pin:   {"keys": ["k1", ...], "ttl_ms": N [, "tenant_id": "default"]}
 *   soft_unpin: {"keys": ["k1", ...] [, "tenant_id": "default"]}
 *
 * 1..4096 keys; ttl_ms is required for soft_pin (0: --default_kv_soft_pin_ttl) and refused for
 * soft_unpin; any other member, a malformed body or a tenant other than the default one is a
 * 400 with code -600.  Otherwise 200 with one result per key, in order: 0, -704 (no readable
 * object) or -600 (an empty key, or ttl_ms above --max_kv_soft_pin_ttl).  A soft pin keeps an
 * object from eviction until it ends (or, with --allow_evict_soft_pinned_objects, until nothing
 * else can go); it changes nothing else.  Changes are persisted like a put's.
 * Single-threaded: the master's reactor thread.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/errcode.h"
#include "common/log.h"
#include "master/master.h"
#include "master/ops.h"

#define MC_PIN_MAX_KEYS 4096

static json_t *mc_pin_error(const char *msg)
{
	return json_pack("{sbsiss}", "success", 0, "error_code", MC_ERR_INVALID_PARAMS,
			 "error_message", msg);
}

/* Is the request's shape right (members, types, counts)?  NULL, or what is wrong. */
static const char *mc_pin_check(json_t *req, int pin, json_int_t *ttl)
{
	static const char shape[] = "Expected 1..4096 keys, a valid tenant, and ttl_ms only for "
				    "soft_pin";
	json_t *keys = json_object_get(req, "keys"), *v;
	const char *name;
	size_t i;

	if (!json_is_array(keys) || json_array_size(keys) == 0 ||
	    json_array_size(keys) > MC_PIN_MAX_KEYS)
		return shape;
	json_array_foreach(keys, i, v)
		if (!json_is_string(v))
			return shape;
	json_object_foreach(req, name, v) {
		if (!strcmp(name, "keys"))
			continue;
		if (!strcmp(name, "ttl_ms") && pin && json_is_integer(v) &&
		    json_integer_value(v) >= 0) {
			*ttl = json_integer_value(v);
			continue;
		}
		/* Keys are not scoped by tenant on this master: only the default tenant. */
		if ((!strcmp(name, "tenant_id") || !strcmp(name, "tenant")) && json_is_string(v) &&
		    (!strcmp(json_string_value(v), "") || !strcmp(json_string_value(v), "default")))
			continue;
		return shape;
	}
	if (pin && *ttl < 0)
		return shape;
	return NULL;
}

/* Pin (ttl_ms, 0: the default) or unpin one key: 0 or its code. */
static int mc_pin_one(struct mc_master *m, const char *key, size_t len, int pin, int64_t ttl,
		      int64_t now)
{
	struct mc_object *o;

	if (len == 0 || (pin && ttl > m->cfg.max_kv_soft_pin_ttl))
		return MC_ERR_INVALID_PARAMS;
	o = mc_object_find(&m->objects, key, len);
	if (o == NULL || mc_object_count_readable(o) == 0)
		return MC_ERR_OBJECT_NOT_FOUND;
	if (pin) {
		if (!(o->flags & MC_OBJ_SOFT_PIN))
			m->objects.soft_pinned++;
		o->flags |= MC_OBJ_SOFT_PIN;
		mc_object_set_soft_pin_until(o, now + (ttl ? ttl : m->cfg.default_kv_soft_pin_ttl));
	} else {
		if (o->flags & MC_OBJ_SOFT_PIN)
			m->objects.soft_pinned--;
		o->flags &= (uint8_t)~MC_OBJ_SOFT_PIN;
		mc_object_set_soft_pin_until(o, 0);
	}
	mc_persist_object_changed(m, o);
	return 0;
}

int mc_admin_soft_pin_body(struct mc_master *m, const char *body, size_t len, int pin,
			   struct json_t **reply)
{
	json_error_t jerr;
	json_t *req, *results, *v;
	json_int_t ttl = -1;
	const char *bad;
	int64_t now = mc_master_now(m);
	size_t i;
	uint32_t changed = 0;

	req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(req)) {
		char msg[256];

		snprintf(msg, sizeof(msg), "Invalid JSON body: %s",
			 req ? "an object is expected" : jerr.text);
		json_decref(req);
		*reply = mc_pin_error(msg);
		return 400;
	}
	bad = mc_pin_check(req, pin, &ttl);
	if (bad != NULL) {
		json_decref(req);
		*reply = mc_pin_error(bad);
		return 400;
	}
	results = json_array();
	json_array_foreach(json_object_get(req, "keys"), i, v) {
		int rc = mc_pin_one(m, json_string_value(v), json_string_length(v), pin,
				    (int64_t)ttl, now);

		changed += rc == 0;
		json_array_append_new(results, json_pack("{sssi}", "key", json_string_value(v),
							 "error_code", rc));
	}
	if (changed)
		mc_log_info("admin %s of %u of %zu keys", pin ? "soft_pin" : "soft_unpin", changed,
			    json_array_size(results));
	json_decref(req);
	*reply = json_pack("{so}", "results", results);
	return 200;
}

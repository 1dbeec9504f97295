/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The etcd tenant quota connector (--tenant_quota_connector_type=etcd,
 * --tenant_quota_connector_uri=ENDPOINTS, as upstream's): the same YAML policy the file
 * connector keeps (tenants_policy.c), kept as the value of upstream's key
 * "mooncake-store/<cluster_id>/tenant_quota_policy" and reached through etcd's v3 JSON gateway
 * (coord/etcd.c).  The cluster id is --cluster_id, "mooncake_cluster" when empty, trailing '/'
 * dropped; it must be 1 to 128 letters, digits, '_', '-' or '.'.
 *
 *  - At start, before anything is served, the policy is read on an event base of its own (the
 *    master's loop does not run yet).  A missing key is an empty policy: tenants are then
 *    created through the admin API.  A value that is not a policy, or no answer from any
 *    endpoint within MC_TENANT_ETCD_TIMEOUT_MS, stops the start with the reason.
 *  - A change made through the admin API (tenants_http.c) is put to the key on the master's
 *    loop; the request is answered once etcd has it, and the change is undone when etcd refuses
 *    it or does not answer in time.
 *  - A master that becomes the HA leader reads the key again (the former leader may have changed
 *    it) and applies what it finds; until the answer it admits against the policy it read at its
 *    start.  An unreadable value then keeps the policy it has, with a log line.
 * Single-threaded: the master's reactor thread (the start-up read runs before the loop).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "coord/etcd.h"
#include "master/tenants.h"
#include "master/tenants_int.h"

#define MC_TENANT_ETCD_TIMEOUT_MS 5000	/* within the admin server's 10 s per request */

/* A range answer: the policy text (malloc'ed, NULL when the key is missing) or an error. */
struct mc_tenant_etcd_read {
	int done, rc;
	char *text;
	size_t len;
	char why[200];
};

static void mc_tenant_etcd_on_range(void *arg, int rc, json_t *reply)
{
	struct mc_tenant_etcd_read *r = arg;
	json_t *kv;

	r->done = 1;
	r->rc = rc;
	if (rc) {
		snprintf(r->why, sizeof(r->why), "%s", rc == -ETIMEDOUT ? "no endpoint answered"
							  : mc_strerror(rc));
		return;
	}
	kv = json_array_get(json_object_get(reply, "kvs"), 0);
	if (kv == NULL)
		return;		/* no key: an empty policy */
	r->text = mc_etcd_bytes(kv, "value", &r->len);
	if (r->text == NULL) {
		if (json_object_get(kv, "value") == NULL) {	/* an empty value */
			r->text = mc_xstrdup("");
			return;
		}
		r->rc = -EPROTO;
		snprintf(r->why, sizeof(r->why), "the value is not base64");
	} else if (r->len > MC_TENANT_POLICY_MAX) {
		r->rc = -EFBIG;
		snprintf(r->why, sizeof(r->why), "the value is larger than %d bytes",
			 MC_TENANT_POLICY_MAX);
	}
}

static struct mc_etcd_call *mc_tenant_etcd_range(struct mc_etcd *e, const char *key,
						 struct mc_tenant_etcd_read *r)
{
	json_t *b = json_pack("{so}", "key", mc_etcd_b64s(key));
	struct mc_etcd_call *c;

	c = mc_etcd_post(e, "/v3/kv/range", b, MC_TENANT_ETCD_TIMEOUT_MS, mc_tenant_etcd_on_range,
			 r);
	json_decref(b);
	return c;
}

/* The policy in r's answer (an empty one for a missing key).  0, or -1 with err set. */
static int mc_tenant_etcd_parse(const char *key, struct mc_tenant_etcd_read *r,
				struct mc_tenant_policy *p, char *err, size_t n)
{
	char why[400];

	memset(p, 0, sizeof(*p));
	if (r->rc) {
		snprintf(err, n, "failed to load tenant quota policy from etcd key '%s': %s", key,
			 r->why);
		return -1;
	}
	if (r->text && mc_tenant_policy_parse(r->text, r->len, p, why, sizeof(why)) != 0) {
		snprintf(err, n, "tenant quota policy in etcd key '%s': %s", key, why);
		return -1;
	}
	return 0;
}

int mc_tenant_etcd_key(const char *cluster_id, char *out, size_t n, char *err, size_t errn)
{
	char id[160];
	size_t len, i;

	snprintf(id, sizeof(id), "%s", cluster_id && *cluster_id ? cluster_id : "");
	len = strlen(id);
	while (len > 0 && id[len - 1] == '/')
		id[--len] = '\0';
	if (len == 0)
		len = (size_t)snprintf(id, sizeof(id), "mooncake_cluster");
	for (i = 0; i < len; i++) {
		char c = id[i];

		if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      c == '_' || c == '-' || c == '.'))
			break;
	}
	if (i < len || len > 128 || strlen(cluster_id ? cluster_id : "") >= sizeof(id)) {
		snprintf(err, errn, "invalid tenant quota etcd cluster_id '%s' (1 to 128 letters, "
			 "digits, '_', '-' or '.')", cluster_id ? cluster_id : "");
		return -1;
	}
	snprintf(out, n, "mooncake-store/%s/tenant_quota_policy", id);
	return 0;
}

int mc_tenant_etcd_open(struct mc_master *m, struct mc_tenant_policy *p, char *err, size_t n)
{
	struct mc_tenants *ts = m->tenants;
	const char *uri = m->cfg.tenants.tenant_quota_connector_uri;
	struct mc_tenant_etcd_read r = { 0 };
	struct event_base *base;
	struct mc_etcd *e;
	char key[200];
	int rc;

	memset(p, 0, sizeof(*p));
	if (uri[0] == '\0') {
		snprintf(err, n, "the tenant quota etcd connector needs the etcd endpoints in "
			 "--tenant_quota_connector_uri (e.g. 127.0.0.1:2379)");
		return -1;
	}
	if (mc_tenant_etcd_key(m->cfg.cluster_id, key, sizeof(key), err, n) != 0)
		return -1;
	base = event_base_new();
	if (base == NULL) {
		snprintf(err, n, "out of memory");
		return -1;
	}
	e = mc_etcd_new(base, uri, err, n);
	if (e == NULL) {
		event_base_free(base);
		return -1;
	}
	if (mc_tenant_etcd_range(e, key, &r) == NULL) {
		r.done = 1;
		r.rc = -ENOMEM;
		snprintf(r.why, sizeof(r.why), "out of memory");
	}
	while (!r.done)
		event_base_loop(base, EVLOOP_ONCE);
	mc_etcd_free(e);
	event_base_free(base);
	rc = mc_tenant_etcd_parse(key, &r, p, err, n);
	free(r.text);
	if (rc)
		return -1;
	ts->etcd = mc_etcd_new(m->base, uri, err, n);
	if (ts->etcd == NULL) {
		mc_tenant_policy_free(p);
		return -1;
	}
	ts->etcd_key = mc_xstrdup(key);
	mc_log_notice("tenant quota policy in etcd key %s (%s): %u tenants", key, uri, p->n);
	return 0;
}

void mc_tenant_etcd_close(struct mc_master *m)
{
	struct mc_tenants *ts = m->tenants;

	if (ts == NULL)
		return;
	if (ts->reload) {
		mc_etcd_cancel(ts->reload_call);
		free(ts->reload->text);
		free(ts->reload);
	}
	mc_etcd_free(ts->etcd);
	free(ts->etcd_key);
	ts->etcd = NULL;
	ts->etcd_key = NULL;
	ts->reload = NULL;
	ts->reload_call = NULL;
}

/* ---------------------------------------------------------------- saving */

struct mc_tenant_etcd_put {
	struct mc_master *m;
	mc_policy_saved_fn done;
	void *arg;
};

static void mc_tenant_etcd_on_put(void *arg, int rc, json_t *reply)
{
	struct mc_tenant_etcd_put *w = arg;

	(void)reply;
	if (rc)
		mc_log_err("tenant quota policy not written to etcd key %s: %s",
			   w->m->tenants->etcd_key,
			   rc == -ETIMEDOUT ? "no endpoint answered" : mc_strerror(rc));
	w->done(w->m, w->arg, rc ? (rc < 0 ? rc : -EIO) : 0);
	free(w);
}

int mc_tenant_etcd_save(struct mc_master *m, char *text, mc_policy_saved_fn done, void *arg)
{
	struct mc_tenants *ts = m->tenants;
	struct mc_tenant_etcd_put *w;
	struct mc_etcd_call *c;
	json_t *b;

	if (ts->etcd == NULL) {
		free(text);
		return -EINVAL;
	}
	w = mc_xcalloc(1, sizeof(*w));
	*w = (struct mc_tenant_etcd_put){ m, done, arg };
	b = json_pack("{soso}", "key", mc_etcd_b64s(ts->etcd_key), "value", mc_etcd_b64s(text));
	free(text);
	c = b ? mc_etcd_post(ts->etcd, "/v3/kv/put", b, MC_TENANT_ETCD_TIMEOUT_MS,
			     mc_tenant_etcd_on_put, w) : NULL;
	json_decref(b);
	if (c == NULL) {
		free(w);
		return -ENOMEM;
	}
	return 0;
}

/* ---------------------------------------------------------------- reading again (HA leader) */

static void mc_tenant_etcd_on_reload(void *arg, int rc, json_t *reply)
{
	struct mc_master *m = arg;
	struct mc_tenants *ts = m->tenants;
	struct mc_tenant_etcd_read *r = ts->reload;
	struct mc_tenant_policy p;
	char err[600];

	ts->reload = NULL;
	ts->reload_call = NULL;
	mc_tenant_etcd_on_range(r, rc, reply);
	if (mc_tenant_etcd_parse(ts->etcd_key, r, &p, err, sizeof(err)) != 0) {
		mc_log_err("%s; keeping the policy read at start", err);
	} else {
		ts->reload_apply(m, &p);
		mc_log_notice("tenant quota policy read again from etcd key %s: %u tenants",
			      ts->etcd_key, p.n);
		mc_tenant_policy_free(&p);
	}
	free(r->text);
	free(r);
}

void mc_tenant_etcd_reload(struct mc_master *m, mc_tenant_apply_fn apply)
{
	struct mc_tenants *ts = m->tenants;

	if (ts == NULL || ts->etcd == NULL || ts->reload)
		return;
	ts->reload_apply = apply;
	ts->reload = mc_xcalloc(1, sizeof(*ts->reload));
	/* The answer goes to mc_tenant_etcd_on_reload, which fills ts->reload itself. */
	{
		json_t *b = json_pack("{so}", "key", mc_etcd_b64s(ts->etcd_key));

		ts->reload_call = mc_etcd_post(ts->etcd, "/v3/kv/range", b,
					       MC_TENANT_ETCD_TIMEOUT_MS,
					       mc_tenant_etcd_on_reload, m);
		json_decref(b);
	}
	if (ts->reload_call == NULL) {
		free(ts->reload);
		ts->reload = NULL;
	}
}

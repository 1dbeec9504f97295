/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tenant quota admin API and per-tenant metrics on the master's admin port, with
 * upstream's paths, bodies and status codes (tenants.c keeps the accounts):
 *
 *   GET    /api/v1/tenant_quotas                   -> {"success":true,"data":[snapshot...]}
 *   GET    /api/v1/tenant_quotas?tenant_id=T       -> {"success":true,"data":snapshot}
 *   PUT    /api/v1/tenant_quotas?tenant_id=T  {"requested_quota_bytes":N}
 *                                                  -> {"success":true,"data":snapshot}
 *   DELETE /api/v1/tenant_quotas?tenant_id=T       -> {"success":true,"data":snapshot|null}
 *
 * snapshot = {"tenant_id","requested_quota_bytes","effective_quota_bytes","charged_bytes",
 * "admission_closed","over_quota","has_explicit_policy"}.  Errors are
 * {"success":false,"error_code","error_message"}: 400 INVALID_PARAMS (a missing or invalid
 * tenant_id, a bad body, a quota outside [1, 2^63 - 1]), 404 TENANT_NOT_REGISTERED, 409
 * TENANT_NOT_EMPTY (deleting a tenant that still has bytes) or UNAVAILABLE_IN_CURRENT_MODE
 * (without --enable_multi_tenants), 500 when the policy file cannot be written or etcd does
 * not take it (the change is then undone).  With a policy file a change is answered once the
 * file is written; with the etcd connector once etcd has it (tenants_etcd.c).
 * Single-threaded: the master's loop (the file is written on a worker, tenants_policy.c).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/admin_http.h"
#include "master/tenants.h"
#include "master/tenants_int.h"

static json_t *mc_tenant_json(const struct mc_tenant_snapshot *s)
{
	return json_pack("{sssIsIsIsbsbsb}", "tenant_id", s->tenant_id, "requested_quota_bytes",
			 (json_int_t)s->requested_quota_bytes, "effective_quota_bytes",
			 (json_int_t)s->effective_quota_bytes, "charged_bytes",
			 (json_int_t)s->charged_bytes, "admission_closed", s->admission_closed,
			 "over_quota", s->over_quota, "has_explicit_policy",
			 s->has_explicit_policy);
}

static void mc_tenant_reply(struct evhttp_request *req, json_t *data)
{
	mc_admin_send_json(req, 200, json_pack("{sbso}", "success", 1, "data",
					       data ? data : json_null()));
}

static void mc_tenant_error(struct evhttp_request *req, int rc, const char *msg)
{
	mc_admin_send_error(req, mc_admin_http_status(rc), rc, msg);
}

/* A change waiting for the policy file: how to answer, and how to undo it. */
struct mc_tenant_change {
	struct evhttp_request *req;
	char *name;
	int deleted;
	uint64_t old_bytes;	/* 0: there was no explicit policy */
};

static void mc_tenant_change_saved(struct mc_master *m, void *arg, int rc)
{
	struct mc_tenant_change *c = arg;
	struct mc_tenant_snapshot s;
	int had;

	if (rc) {
		/* Undo: the file (or etcd's key) is what the next start reads. */
		if (c->old_bytes)
			mc_tenant_policy_set(m, c->name, c->old_bytes);
		else
			mc_tenant_policy_delete(m, c->name, &had);
		mc_tenant_error(c->req, MC_ERR_PERSISTENT_FAIL, "failed to save tenant quota policy");
	} else if (mc_tenant_snapshot(m, c->name, &s) == 0 && !c->deleted) {
		mc_tenant_reply(c->req, mc_tenant_json(&s));
	} else {
		mc_tenant_reply(c->req, c->deleted && mc_tenant_snapshot(m, c->name, &s) == 0
						? mc_tenant_json(&s) : NULL);
	}
	free(c->name);
	free(c);
}

/* After a change to tenant name: answer now, or once the policy file holds it. */
static void mc_tenant_after_change(struct mc_master *m, struct evhttp_request *req,
				   const char *name, int deleted, uint64_t old_bytes)
{
	const char *path = m->cfg.tenants.tenant_quota_connector_uri;
	struct mc_tenant_change *c;
	struct mc_tenant_snapshot s;

	if (path[0] || mc_tenant_connector_etcd(m)) {
		int rc;

		c = mc_xcalloc(1, sizeof(*c));
		c->req = req;
		c->name = mc_xstrdup(name);
		c->deleted = deleted;
		c->old_bytes = old_bytes;
		rc = mc_tenant_connector_etcd(m)
			     ? mc_tenant_etcd_save(m, mc_tenant_policy_format(m),
						   mc_tenant_change_saved, c)
			     : mc_tenant_policy_save(m, path, mc_tenant_policy_format(m),
						     mc_tenant_change_saved, c);
		if (rc == 0)
			return;
		mc_tenant_change_saved(m, c, rc);
		return;
	}
	mc_master_commit(m);	/* the record in --persist_path */
	if (mc_tenant_snapshot(m, name, &s) == 0)
		mc_tenant_reply(req, mc_tenant_json(&s));
	else
		mc_tenant_reply(req, NULL);
}

static void mc_tenant_http(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	char *name = mc_admin_query_param(req, "tenant_id");
	struct mc_tenant_snapshot s;
	int rc;

	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_PUT && cmd != EVHTTP_REQ_DELETE) {
		evhttp_send_error(req, 405, "Method not allowed");
		goto out;
	}
	if (cmd == EVHTTP_REQ_GET && (name == NULL || name[0] == '\0')) {
		json_t *arr;
		uint32_t i;

		if (!mc_tenants_enabled(m)) {
			mc_tenant_error(req, MC_ERR_UNAVAILABLE_IN_CURRENT_MODE, NULL);
			goto out;
		}
		arr = json_array();
		for (i = 0; i < mc_tenant_count(m); i++) {
			mc_tenant_snapshot_at(m, i, &s);
			if (s.has_explicit_policy || s.charged_bytes)
				json_array_append_new(arr, mc_tenant_json(&s));
		}
		mc_tenant_reply(req, arr);
		goto out;
	}
	if (name == NULL || !mc_tenant_name_valid(name, strlen(name))) {
		mc_tenant_error(req, MC_ERR_INVALID_PARAMS,
				cmd == EVHTTP_REQ_GET ? "Invalid tenant_id"
						      : "Missing or invalid tenant_id");
		goto out;
	}
	if (cmd == EVHTTP_REQ_GET) {
		rc = mc_tenant_snapshot(m, name, &s);
		if (rc)
			mc_tenant_error(req, rc, NULL);
		else
			mc_tenant_reply(req, mc_tenant_json(&s));
		goto out;
	}
	if (cmd == EVHTTP_REQ_PUT) {
		char *text = mc_admin_body(req, 1u << 16);
		json_error_t jerr;
		json_t *body = text ? json_loads(text, 0, &jerr) : NULL, *q;
		uint64_t old = 0;
		json_int_t bytes = 0;
		char msg[300];

		free(text);
		q = body ? json_object_get(body, "requested_quota_bytes") : NULL;
		if (!json_is_object(body) || (q && !json_is_integer(q))) {
			snprintf(msg, sizeof(msg), "Invalid JSON body: %s",
				 body == NULL ? jerr.text : "requested_quota_bytes must be a number");
			json_decref(body);
			mc_tenant_error(req, MC_ERR_INVALID_PARAMS, msg);
			goto out;
		}
		bytes = q ? json_integer_value(q) : 0;
		json_decref(body);
		if (bytes <= 0) {
			mc_tenant_error(req, MC_ERR_INVALID_PARAMS,
					"Tenant quota must be in [1, 2^63 - 1] bytes");
			goto out;
		}
		if (mc_admin_refuse_changes(m, req))
			goto out;
		if (mc_tenant_snapshot(m, name, &s) == 0 && s.has_explicit_policy)
			old = s.requested_quota_bytes;
		rc = mc_tenant_policy_set(m, name, (uint64_t)bytes);
		if (rc) {
			mc_tenant_error(req, rc, NULL);
			goto out;
		}
		mc_log_notice("tenant %s: quota %" PRIu64 " bytes", name, (uint64_t)bytes);
		mc_tenant_after_change(m, req, name, 0, old);
		goto out;
	}
	{	/* DELETE */
		uint64_t old = 0;
		int had = 0;

		if (mc_admin_refuse_changes(m, req))
			goto out;
		if (mc_tenant_snapshot(m, name, &s) == 0 && s.has_explicit_policy)
			old = s.requested_quota_bytes;
		rc = mc_tenant_policy_delete(m, name, &had);
		if (rc) {
			mc_tenant_error(req, rc, NULL);
			goto out;
		}
		mc_log_notice("tenant %s: quota policy removed", name);
		mc_tenant_after_change(m, req, name, 1, old);
	}
out:
	free(name);
}

int mc_tenant_http_routes(struct mc_master *m)
{
	return mc_admin_route(m, "/api/v1/tenant_quotas", mc_tenant_http, m);
}

void mc_tenant_metrics(struct mc_master *m, struct evbuffer *b)
{
	static const struct {
		const char *name, *help;
	} gauges[] = {
		{ "mooncake_tenant_quota_requested_bytes", "Requested tenant quota in bytes" },
		{ "mooncake_tenant_quota_effective_bytes", "Effective tenant quota in bytes" },
		{ "mooncake_tenant_quota_charged_bytes", "Tenant quota charge in bytes" },
		{ "mooncake_tenant_quota_admission_closed", "Tenant quota admission closed flag" },
		{ "mooncake_tenant_quota_over_quota", "Tenant over-quota flag" },
		{ "mooncake_tenant_quota_explicit_policy", "Tenant explicit policy flag" },
	};
	uint64_t cap, req, eff;
	uint32_t i, n = mc_tenant_count(m);
	size_t g;

	if (!mc_tenants_enabled(m))
		return;
	for (g = 0; g < sizeof(gauges) / sizeof(gauges[0]); g++) {
		evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", gauges[g].name,
				    gauges[g].help, gauges[g].name);
		for (i = 0; i < n; i++) {
			struct mc_tenant_snapshot s;
			uint64_t v[6];

			mc_tenant_snapshot_at(m, i, &s);
			if (!s.has_explicit_policy && !s.charged_bytes)
				continue;
			v[0] = s.requested_quota_bytes;
			v[1] = s.effective_quota_bytes;
			v[2] = s.charged_bytes;
			v[3] = (uint64_t)s.admission_closed;
			v[4] = (uint64_t)s.over_quota;
			v[5] = (uint64_t)s.has_explicit_policy;
			evbuffer_add_printf(b, "%s{tenant_id=\"", gauges[g].name);
			mc_admin_prom_label(b, s.tenant_id);
			evbuffer_add_printf(b, "\"} %" PRIu64 "\n", v[g]);
		}
	}
	mc_tenant_sums(m, &cap, &req, &eff);
	evbuffer_add_printf(b, "# HELP mooncake_tenant_quota_allocatable_capacity_bytes Global "
			       "tenant quota allocatable capacity in bytes\n# TYPE "
			       "mooncake_tenant_quota_allocatable_capacity_bytes gauge\n"
			       "mooncake_tenant_quota_allocatable_capacity_bytes %" PRIu64 "\n"
			       "# HELP mooncake_tenant_quota_requested_bytes_sum Global requested "
			       "tenant quota sum in bytes\n# TYPE "
			       "mooncake_tenant_quota_requested_bytes_sum gauge\n"
			       "mooncake_tenant_quota_requested_bytes_sum %" PRIu64 "\n"
			       "# HELP mooncake_tenant_quota_effective_bytes_sum Global effective "
			       "tenant quota sum in bytes\n# TYPE "
			       "mooncake_tenant_quota_effective_bytes_sum gauge\n"
			       "mooncake_tenant_quota_effective_bytes_sum %" PRIu64 "\n",
			    cap, req, eff);
	mc_tenant_counter_metrics(m, b);
}

void mc_tenant_counter_metrics(struct mc_master *m, struct evbuffer *b)
{
	struct mc_tenants *ts = m->tenants;
	uint32_t i;

	evbuffer_add_printf(b, "# HELP mooncake_tenant_quota_reject_total Writes refused by "
			       "tenant admission\n# TYPE mooncake_tenant_quota_reject_total "
			       "counter\n");
	for (i = 0; i < ts->n; i++) {
		const char *reason[2] = { "quota_exceeded", "not_registered" };
		uint64_t v[2] = { ts->t[i].reject_quota, ts->t[i].reject_unregistered };
		int k;

		for (k = 0; k < 2; k++) {
			if (v[k] == 0)
				continue;
			evbuffer_add_printf(b, "mooncake_tenant_quota_reject_total{tenant_id=\"");
			mc_admin_prom_label(b, ts->t[i].name);
			evbuffer_add_printf(b, "\",reason=\"%s\"} %" PRIu64 "\n", reason[k], v[k]);
		}
	}
	evbuffer_add_printf(b, "# HELP mooncake_tenant_evict_bytes_total Bytes evicted at the "
			       "tenant's watermark\n# TYPE mooncake_tenant_evict_bytes_total "
			       "counter\n");
	for (i = 0; i < ts->n; i++) {
		if (!ts->t[i].explicit_policy && !ts->t[i].evict_bytes)
			continue;
		evbuffer_add_printf(b, "mooncake_tenant_evict_bytes_total{tenant_id=\"");
		mc_admin_prom_label(b, ts->t[i].name);
		evbuffer_add_printf(b, "\"} %" PRIu64 "\n", ts->t[i].evict_bytes);
	}
}

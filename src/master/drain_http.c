/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The drain-job admin HTTP API on the master's admin port, with upstream's paths, bodies and
 * status codes (drain.c does the work):
 *
 *   POST /api/v1/drain_jobs            {"segments":[..], "target_segments":[..],
 *                                       "max_concurrency":4}
 *        -> {"success":true,"job_id":"F-S","status":"CREATED","error_code":0,"error_message":""}
 *   GET  /api/v1/drain_jobs/query?job_id=F-S
 *        -> {"success":true,"job_id","type":0,"type_name":"DRAIN","status","status_name",
 *            "created_at_ms_epoch","last_updated_at_ms_epoch","segments":[..],
 *            "succeeded_units","failed_units","blocked_units","active_units","migrated_bytes",
 *            "message","error_code":0,"error_message":""}
 *   POST /api/v1/drain_jobs/cancel?job_id=F-S
 *        -> {"success":true,"job_id","status":"CANCELED","error_code":0,"error_message":""}
 *   GET  /api/v1/segments/status?segment=NAME
 *        -> {"success":true,"segment","status":N,"status_name":"OK|DRAINING|DRAINED|...",
 *            "error_code":0,"error_message":""}
 *
 * Errors are {"success":false,"error_code":N,"error_message":"NAME"} with 400 for bad input,
 * 404 for an unknown job or segment, 409 for a state that forbids it (mc_admin_http_status).
 * Job ids are upstream's "first-second" UUID form.  Single-threaded: the master's loop.
 */
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "master/admin_http.h"
#include "master/drain.h"

#define MC_DRAIN_BODY_MAX (1u << 20)

static int mc_drain_method(struct evhttp_request *req, enum evhttp_cmd_type cmd)
{
	if (evhttp_request_get_command(req) == cmd)
		return 1;
	evhttp_send_error(req, 405, "Method not allowed");
	return 0;
}

/* Answer a creation or cancellation of job id: the error rc, or (committed first) upstream's
 * {"success":true,"job_id","status",...}. */
static void mc_drain_reply_change(struct mc_master *m, struct evhttp_request *req, int rc,
				  const struct mc_uuid *id, const char *status)
{
	char sid[42];

	if (rc) {
		mc_admin_send_error(req, mc_admin_http_status(rc), rc, NULL);
		return;
	}
	mc_master_commit(m);
	mc_uuid_pair_format(id, sid);
	mc_admin_send_json(req, 200, json_pack("{sbsssssiss}", "success", 1, "job_id", sid,
					       "status", status, "error_code", 0,
					       "error_message", ""));
}

/* The names of a JSON array of strings into v (at most max): their count, or -1. */
static int mc_drain_names(json_t *arr, const char **v, size_t max)
{
	size_t i;
	json_t *e;

	if (arr == NULL)
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > max)
		return -1;
	json_array_foreach(arr, i, e) {
		if (!json_is_string(e) || json_string_length(e) == 0)
			return -1;
		v[i] = json_string_value(e);
	}
	return (int)json_array_size(arr);
}

static void mc_drain_http_create(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	const char *segs[MC_DRAIN_MAX_SEGMENTS], *targets[MC_DRAIN_MAX_SEGMENTS];
	json_error_t jerr;
	json_t *body, *mc;
	char *text, why[256], msg[300];
	struct mc_uuid id;
	int nsegs, ntargets, rc;
	json_int_t conc = 4;

	if (!mc_drain_method(req, EVHTTP_REQ_POST))
		return;
	text = mc_admin_body(req, MC_DRAIN_BODY_MAX);
	body = text ? json_loads(text, 0, &jerr) : NULL;
	free(text);
	if (body == NULL || !json_is_object(body)) {
		snprintf(msg, sizeof(msg), "Invalid JSON body: %s",
			 body ? "not an object" : jerr.text);
		json_decref(body);
		mc_admin_send_error(req, 400, MC_ERR_INVALID_PARAMS, msg);
		return;
	}
	nsegs = mc_drain_names(json_object_get(body, "segments"), segs, MC_DRAIN_MAX_SEGMENTS);
	ntargets = mc_drain_names(json_object_get(body, "target_segments"), targets,
				  MC_DRAIN_MAX_SEGMENTS);
	mc = json_object_get(body, "max_concurrency");
	if (mc && !json_is_integer(mc))
		nsegs = -1;
	else if (mc)
		conc = json_integer_value(mc);
	if (nsegs < 0 || ntargets < 0 || conc < 0 || conc > 1000000) {
		json_decref(body);
		mc_admin_send_error(req, 400, MC_ERR_INVALID_PARAMS,
				    "Invalid JSON body: segments and target_segments must be lists "
				    "of names, max_concurrency a number");
		return;
	}
	if (mc_admin_refuse_changes(m, req)) {
		json_decref(body);
		return;
	}
	rc = mc_drain_create(m, segs, (uint32_t)nsegs, targets, (uint32_t)ntargets,
			     (uint32_t)conc, &id, why, sizeof(why));
	json_decref(body);
	if (rc)
		mc_log_info("drain job refused: %s (%d)", why, rc);
	mc_drain_reply_change(m, req, rc, &id, "CREATED");
}

/* The job_id query parameter: 0 and *id, or a 400 sent. */
static int mc_drain_job_id(struct evhttp_request *req, struct mc_uuid *id)
{
	char *s = mc_admin_query_param(req, "job_id");
	int rc = s ? mc_uuid_pair_parse(s, id) : -1;

	free(s);
	if (rc)
		mc_admin_send_error(req, 400, MC_ERR_INVALID_PARAMS, "Missing or invalid job_id");
	return rc;
}

static void mc_drain_http_query(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct mc_drain_info info;
	struct mc_uuid id;
	json_t *segs;
	char sid[42];
	uint32_t i;
	int rc;

	if (!mc_drain_method(req, EVHTTP_REQ_GET) || mc_drain_job_id(req, &id))
		return;
	rc = mc_drain_query(m, &id, &info);
	if (rc) {
		mc_admin_send_error(req, mc_admin_http_status(rc), rc, NULL);
		return;
	}
	segs = json_array();
	for (i = 0; i < info.nsegs; i++)
		json_array_append_new(segs, json_string(info.segs[i]));
	mc_uuid_pair_format(&info.id, sid);
	mc_admin_send_json(req, 200,
			   json_pack("{sbsssisssisssIsIsosIsIsIsIsIsssiss}", "success", 1,
				     "job_id", sid, "type", 0, "type_name", "DRAIN", "status",
				     (int)info.status, "status_name", mc_job_status_name(info.status),
				     "created_at_ms_epoch", (json_int_t)info.created_wall,
				     "last_updated_at_ms_epoch", (json_int_t)info.updated_wall,
				     "segments", segs, "succeeded_units", (json_int_t)info.succeeded,
				     "failed_units", (json_int_t)info.failed, "blocked_units",
				     (json_int_t)info.blocked, "active_units", (json_int_t)info.active,
				     "migrated_bytes", (json_int_t)info.migrated_bytes, "message",
				     info.message, "error_code", 0, "error_message", ""));
}

static void mc_drain_http_cancel(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct mc_uuid id;
	int rc;

	if (!mc_drain_method(req, EVHTTP_REQ_POST) || mc_drain_job_id(req, &id) ||
	    mc_admin_refuse_changes(m, req))
		return;
	rc = mc_drain_cancel(m, &id);
	mc_drain_reply_change(m, req, rc, &id, "CANCELED");
}

static void mc_drain_http_segment(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	char *name;
	int rc, status = 0;

	if (!mc_drain_method(req, EVHTTP_REQ_GET))
		return;
	name = mc_admin_query_param(req, "segment");
	if (name == NULL || name[0] == '\0') {
		free(name);
		mc_admin_send_error(req, 400, MC_ERR_INVALID_PARAMS,
				    "Missing segment query parameter");
		return;
	}
	rc = mc_drain_segment_status(m, name, &status);
	if (rc)
		mc_admin_send_error(req, mc_admin_http_status(rc), rc, NULL);
	else
		mc_admin_send_json(req, 200, json_pack("{sbsssisssiss}", "success", 1, "segment",
						       name, "status", status, "status_name",
						       mc_drain_segment_status_name(status),
						       "error_code", 0, "error_message", ""));
	free(name);
}

int mc_drain_http_routes(struct mc_master *m)
{
	if (mc_admin_route(m, "/api/v1/drain_jobs", mc_drain_http_create, m) != 0 ||
	    mc_admin_route(m, "/api/v1/drain_jobs/query", mc_drain_http_query, m) != 0 ||
	    mc_admin_route(m, "/api/v1/drain_jobs/cancel", mc_drain_http_cancel, m) != 0 ||
	    mc_admin_route(m, "/api/v1/segments/status", mc_drain_http_segment, m) != 0)
		return -1;
	return 0;
}

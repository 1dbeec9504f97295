/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin HTTP routes about segments: /get_all_segments, /query_segment and
 * /get_segments_detail (mounted segments, then dormant ones with their liveness and drain
 * state).  Single-threaded: the master's reactor thread.
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
#include "segment/alloc.h"

/* GET /get_all_segments: one mounted memory segment name a line. */
static void mc_admin_get_all_segments(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evbuffer *b;
	uint32_t i;

	if (mc_admin_standby(arg, req))
		return;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	b = evbuffer_new();
	for (i = 0; i < m->nsegs; i++)
		evbuffer_add_printf(b, "%s\n", m->segs[i]->name);
	mc_admin_reply(req, 200, "text/plain", b);
	evbuffer_free(b);
}

/* GET /query_segment?segment=NAME: used and capacity of the segments of that name. */
static void mc_admin_query_segment(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evkeyvalq q;
	const char *name;
	uint64_t used = 0, cap = 0;
	int found = 0;
	uint32_t i;

	if (mc_admin_standby(arg, req))
		return;

	TAILQ_INIT(&q);
	name = mc_admin_query(req, &q, "segment");
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		goto out;
	for (i = 0; name && i < m->nsegs; i++)
		if (!strcmp(m->segs[i]->name, name)) {
			used += mc_alloc_used(m->segs[i]->alloc);
			cap += m->segs[i]->size;
			found = 1;
		}
	if (!found) {
		mc_admin_send_error(req, name ? 404 : 400,
				    name ? MC_ERR_SEGMENT_NOT_FOUND : MC_ERR_INVALID_PARAMS, NULL);
	} else {
		struct evbuffer *b = evbuffer_new();

		evbuffer_add_printf(b, "%s\nUsed(bytes): %" PRIu64 "\nCapacity(bytes) : %" PRIu64
				       "\n", name, used, cap);
		mc_admin_reply(req, 200, "text/plain", b);
		evbuffer_free(b);
	}
out:
	evhttp_clear_headers(&q);
}

static json_t *mc_segment_detail(struct mc_segment *s, int64_t now)
{
	char id[40], cid[40], base[32], human[32];
	uint64_t used = mc_alloc_used(s->alloc);
	json_t *j;

	mc_uuid_format(&s->id, id);
	mc_uuid_format(&s->client->id, cid);
	snprintf(base, sizeof(base), "0x%" PRIx64, s->base);
	mc_admin_fmt_bytes(human, sizeof(human), s->size);
	j = json_pack("{sssssssssIsssssssssIsIsf}", "segment_name", s->name, "segment_id", id,
		      "client_id", cid, "base_address", base, "size_bytes", (json_int_t)s->size,
		      "size_human", human, "te_endpoint", s->endpoint, "protocol", s->protocol,
		      "status", s->status == MC_SEG_DORMANT ? "DORMANT"
				: s->drain == 1		  ? "DRAINING"
				: s->drain == 2		  ? "DRAINED"
							  : "OK",
		      "allocator_used_bytes", (json_int_t)used, "allocator_capacity_bytes",
		      (json_int_t)s->size, "allocator_usage_percent",
		      s->size ? 100.0 * (double)used / (double)s->size : 0.0);
	json_object_set_new(j, "client_state", json_string(mc_client_state_name(s->client->state)));
	json_object_set_new(j, "health",
			    json_string(now < s->unhealthy_until ? "unhealthy" : "healthy"));
	json_object_set_new(j, "unhealthy_remaining_ms",
			    json_integer(now < s->unhealthy_until ? s->unhealthy_until - now : 0));
	json_object_set_new(j, "transfer_failure_reports",
			    json_integer((json_int_t)s->failure_reports));
	json_object_set_new(j, "replicas", json_integer((json_int_t)s->nreps));
	json_object_set_new(j, "dormant_remaining_sec",
			    json_integer(s->status == MC_SEG_DORMANT && s->dormant_until > now
						 ? (s->dormant_until - now + 999) / 1000
						 : 0));
	return j;
}

/* GET /get_segments_detail: mounted segments, then dormant ones (their objects kept for their
 * process). */
static void mc_admin_segments_detail(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	json_t *arr;
	struct mc_segment *d;
	int64_t now = mc_master_now(m);
	uint32_t i;

	if (mc_admin_standby(arg, req))
		return;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	arr = json_array();
	for (i = 0; i < m->nsegs; i++)
		json_array_append_new(arr, mc_segment_detail(m->segs[i], now));
	for (d = m->dormant; d; d = d->dnext)
		json_array_append_new(arr, mc_segment_detail(d, now));
	mc_admin_send_json(req, 200, json_pack("{sIso}", "total_segments",
					  (json_int_t)json_array_size(arr), "segments", arr));
}

int mc_admin_segments_routes(struct mc_master *m)
{
	return mc_admin_route(m, "/get_all_segments", mc_admin_get_all_segments, m) ||
	       mc_admin_route(m, "/query_segment", mc_admin_query_segment, m) ||
	       mc_admin_route(m, "/get_segments_detail", mc_admin_segments_detail, m);
}

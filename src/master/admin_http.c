/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's admin and metrics HTTP server, on the master's own loop (evhttp, one callback
 * per path): Prometheus metrics under upstream's names (per-operation counters under the metric
 * names of the operation table, ops.h), a one-line summary, health, key and segment queries,
 * remove and remove_all (the RPC's removals, ops_remove.c).  Also the periodic summary log line
 * in upstream's v0.3.9 form, so memory analyses written against upstream's logs work on ours.
 *
 * Everything here reads the master's tables directly; the expensive listings (all keys) are
 * for operators and tests, not for scrapers.
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
#include "common/auth.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/http_auth.h"
#include "master/admin_http.h"
#include "master/ha.h"
#include "master/ops.h"
#include "master/tenants.h"
#include "reactor/conn_limit.h"
#include "reactor/procmem.h"
#include "reactor/tls.h"
#include "segment/alloc.h"

uint32_t mc_master_active_clients(const struct mc_master *m)
{
	uint32_t b, n = 0;

	for (b = 0; b < m->nclient_buckets; b++) {
		const struct mc_client *c;

		for (c = m->client_buckets[b]; c; c = c->hnext)
			n += c->ok;
	}
	return n;
}

/* 1024-based with two decimals, as upstream's byte formatter. */
static void mc_fmt_bytes(char *out, size_t n, uint64_t v)
{
	static const char *const units[] = { "KB", "MB", "GB", "TB" };
	double x = (double)v;
	int u = -1;

	if (v < 1024) {
		snprintf(out, n, "%" PRIu64 " B", v);
		return;
	}
	while (x >= 1024 && u < 3) {
		x /= 1024;
		u++;
	}
	snprintf(out, n, "%.2f %s", x, units[u]);
}

static uint64_t mc_ok_count(const struct mc_master *m, uint16_t op)
{
	return m->metrics.op[op].requests - m->metrics.op[op].failures;
}

void mc_master_summary(const struct mc_master *m, char *out, size_t n)
{
	char used[32], total[32], evsize[32], dused[32], dtotal[32];
	const struct mc_metrics *x = &m->metrics;
	double pct = m->total_capacity ? 100.0 * (double)m->allocated / (double)m->total_capacity : 0;
#define PAIR(a, b) mc_ok_count(m, a) + mc_ok_count(m, b), x->op[a].requests + x->op[b].requests

	mc_fmt_bytes(used, sizeof(used), m->allocated);
	mc_fmt_bytes(total, sizeof(total), m->total_capacity);
	mc_fmt_bytes(evsize, sizeof(evsize), x->evicted_size_bytes);
	mc_fmt_bytes(dused, sizeof(dused), m->disk_allocated);
	mc_fmt_bytes(dtotal, sizeof(dtotal), m->disk_capacity);
	snprintf(out, n,
		 "Mem Storage: %s / %s (%.1f%%) | SSD Storage: %s / %s | Keys: %zu "
		 "(soft-pinned: %zu) | Clients: %u | Requests (Success/Total): "
		 "PutStart=%" PRIu64 "/%" PRIu64 ", PutEnd=%" PRIu64 "/%" PRIu64
		 ", PutRevoke=%" PRIu64 "/%" PRIu64 ", Get=%" PRIu64 "/%" PRIu64
		 ", Exist=%" PRIu64 "/%" PRIu64 ", Del=%" PRIu64 "/%" PRIu64
		 ", DelAll=%" PRIu64 "/%" PRIu64 ", Ping=%" PRIu64 "/%" PRIu64
		 ", | Eviction: Success/Attempts=%" PRIu64 "/%" PRIu64 ", keys=%" PRIu64 ", size=%s",
		 used, total, pct, dused, dtotal, m->objects.count, m->objects.soft_pinned,
		 mc_master_active_clients(m), PAIR(MC_OP_PUT_START, MC_OP_BATCH_PUT_START),
		 PAIR(MC_OP_PUT_END, MC_OP_BATCH_PUT_END), PAIR(MC_OP_PUT_REVOKE, MC_OP_BATCH_PUT_REVOKE),
		 PAIR(MC_OP_GET_REPLICA_LIST, MC_OP_BATCH_GET_REPLICA_LIST),
		 PAIR(MC_OP_EXIST_KEY, MC_OP_BATCH_EXIST_KEY), PAIR(MC_OP_REMOVE, MC_OP_BATCH_REMOVE),
		 mc_ok_count(m, MC_OP_REMOVE_ALL), x->op[MC_OP_REMOVE_ALL].requests,
		 mc_ok_count(m, MC_OP_PING), x->op[MC_OP_PING].requests, x->successful_evictions,
		 x->attempted_evictions, x->evicted_key_count, evsize);
#undef PAIR
}

static void mc_prom(struct evbuffer *b, const char *name, const char *type, const char *help,
		    uint64_t v)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name,
			    type, name, v);
}

/* Label values: escape backslash, quote and newline. */
static void mc_prom_label(struct evbuffer *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(b, "\\%c", *s);
		else if (*s == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, s, 1);
	}
}

/* Client liveness, dormant and unhealthy segments (liveness.c). */
static void mc_admin_liveness_metrics(struct mc_master *m, struct evbuffer *b)
{
	const struct mc_metrics *x = &m->metrics;
	struct mc_liveness_counts n;

	mc_liveness_counts(m, &n);
	mc_prom(b, "master_client_liveness_active_clients", "gauge", "Clients in state Active",
		n.active);
	mc_prom(b, "master_client_liveness_suspected_clients", "gauge",
		"Clients in state Suspected (silent past client_active_ttl_sec)", n.suspected);
	mc_prom(b, "master_client_liveness_offline_clients", "gauge",
		"Clients in state Offline (until their dormant segments are gone)", n.offline);
	mc_prom(b, "master_client_liveness_suspected_transitions_total", "counter",
		"Active -> Suspected transitions", x->suspected_transitions);
	mc_prom(b, "master_client_liveness_offline_transitions_total", "counter",
		"Suspected -> Offline transitions", x->offline_transitions);
	mc_prom(b, "master_client_liveness_recoveries_total", "counter",
		"Suspected -> Active transitions (a ping came in time)", x->recoveries);
	mc_prom(b, "master_dormant_segments", "gauge",
		"Segments of Offline clients whose objects are kept for their return",
		n.dormant_segments);
	mc_prom(b, "master_dormant_replicas", "gauge", "Replicas kept on dormant segments",
		n.dormant_replicas);
	mc_prom(b, "master_dormant_segments_restored_total", "counter",
		"Dormant segments mounted again by their process", x->dormant_segments_restored);
	mc_prom(b, "master_dormant_replicas_restored_total", "counter",
		"Replicas readable again when their segment was restored",
		x->dormant_replicas_restored);
	mc_prom(b, "master_dormant_segments_expired_total", "counter",
		"Dormant segments dropped at the end of dormant_segment_ttl_sec",
		x->dormant_segments_expired);
	mc_prom(b, "master_unhealthy_segments", "gauge",
		"Segments getting no placements after reported transfer failures",
		n.unhealthy_segments);
	mc_prom(b, "master_transfer_failure_reports_total", "counter",
		"Segments named in ReportTransferFailure", x->transfer_failure_reports);
	mc_prom(b, "master_segment_unhealthy_marks_total", "counter",
		"Times a segment was marked unhealthy", x->unhealthy_marks);
	mc_prom(b, "master_checksum_mismatch_total", "counter",
		"Replicas dropped because a reader found their bytes differ from the object's "
		"checksum", x->checksum_mismatches);
	mc_prom(b, "master_checksum_mismatch_objects_removed_total", "counter",
		"Objects removed because their last complete replica was corrupt",
		x->checksum_mismatch_removals);
}

static void mc_admin_metrics(struct mc_master *m, struct evbuffer *b)
{
	static const uint64_t bounds[7] = { 4096, 65536, 262144, 1048576, 4194304, 16777216,
					    67108864 };
	const struct mc_metrics *x = &m->metrics;
	const struct mc_master_op *ops;
	uint64_t cum = 0;
	size_t nops;
	uint32_t i;
	char name[128];

	mc_prom(b, "master_allocated_bytes", "gauge", "Bytes allocated in memory segments",
		m->allocated);
	mc_prom(b, "master_total_capacity_bytes", "gauge", "Bytes of mounted memory segments",
		m->total_capacity);
	evbuffer_add_printf(b, "# HELP segment_allocated_bytes Bytes allocated per segment\n"
			       "# TYPE segment_allocated_bytes gauge\n");
	for (i = 0; i < m->nsegs; i++) {
		evbuffer_add_printf(b, "segment_allocated_bytes{segment=\"");
		mc_prom_label(b, m->segs[i]->name);
		evbuffer_add_printf(b, "\"} %" PRIu64 "\n", mc_alloc_used(m->segs[i]->alloc));
	}
	evbuffer_add_printf(b, "# HELP segment_total_capacity_bytes Capacity per segment\n"
			       "# TYPE segment_total_capacity_bytes gauge\n");
	for (i = 0; i < m->nsegs; i++) {
		evbuffer_add_printf(b, "segment_total_capacity_bytes{segment=\"");
		mc_prom_label(b, m->segs[i]->name);
		evbuffer_add_printf(b, "\"} %" PRIu64 "\n", m->segs[i]->size);
	}
	evbuffer_add_printf(b, "# HELP segment_populated_bytes Bytes of a segment its process "
			       "has populated (absent: not reported by the process)\n"
			       "# TYPE segment_populated_bytes gauge\n");
	for (i = 0; i < m->nsegs; i++) {
		if (!m->segs[i]->has_populated)
			continue;
		evbuffer_add_printf(b, "segment_populated_bytes{segment=\"");
		mc_prom_label(b, m->segs[i]->name);
		evbuffer_add_printf(b, "\"} %" PRIu64 "\n", m->segs[i]->populated);
	}
	mc_prom(b, "master_key_count", "gauge", "Objects in the table", m->objects.count);
	mc_prom(b, "master_soft_pin_key_count", "gauge", "Soft-pinned objects",
		m->objects.soft_pinned);
	mc_prom(b, "master_active_clients", "gauge", "Clients in good standing",
		mc_master_active_clients(m));
	evbuffer_add_printf(b, "# HELP master_value_size_bytes Sizes of completed objects\n"
			       "# TYPE master_value_size_bytes histogram\n");
	for (i = 0; i < 7; i++) {
		cum += x->value_size_buckets[i];
		evbuffer_add_printf(b, "master_value_size_bytes_bucket{le=\"%" PRIu64 "\"} %" PRIu64
				       "\n", bounds[i], cum);
	}
	cum += x->value_size_buckets[7];
	evbuffer_add_printf(b, "master_value_size_bytes_bucket{le=\"+Inf\"} %" PRIu64 "\n"
			       "master_value_size_bytes_sum %" PRIu64 "\n"
			       "master_value_size_bytes_count %" PRIu64 "\n",
			    cum, x->value_size_sum, x->value_size_count);
	ops = mc_master_ops(&nops);
	for (i = 0; i < nops; i++) {
		const struct mc_master_op *om = &ops[i];
		const struct mc_op_counters *c = &x->op[om->opcode];

		if (om->metric == NULL)
			continue;
		snprintf(name, sizeof(name), "master_%s_requests_total", om->metric);
		mc_prom(b, name, "counter", "Requests", c->requests);
		snprintf(name, sizeof(name), "master_%s_failures_total", om->metric);
		mc_prom(b, name, "counter", "Failed requests", c->failures);
		if (!om->batch)
			continue;
		snprintf(name, sizeof(name), "master_%s_partial_successes_total", om->metric);
		mc_prom(b, name, "counter", "Batches with some failed items", c->partial);
		snprintf(name, sizeof(name), "master_%s_items_total", om->metric);
		mc_prom(b, name, "counter", "Items in batches", c->items);
		snprintf(name, sizeof(name), "master_%s_failed_items_total", om->metric);
		mc_prom(b, name, "counter", "Failed items in batches", c->failed_items);
	}
	mc_prom(b, "master_put_start_alloc_failures_total", "counter",
		"PutStart items with no space", x->put_start_alloc_failures);
	mc_prom(b, "master_put_start_partial_allocations_total", "counter",
		"PutStart items with fewer replicas than asked", x->put_start_partial_allocations);
	mc_prom(b, "mem_cache_hit_nums_", "gauge", "Reads served from memory", x->mem_cache_hit_nums);
	mc_prom(b, "file_cache_hit_nums_", "gauge", "Reads served from SSD", x->file_cache_hit_nums);
	mc_prom(b, "master_allocated_file_size_bytes", "gauge",
		"Bytes of DISK (shared directory) and LOCAL_DISK (client SSD) replicas",
		m->disk_allocated);
	mc_prom(b, "master_total_file_capacity_bytes", "gauge",
		"Quota of the shared directory plus mounted client SSD areas",
		m->disk_capacity +
			(!m->fs_seg ? 0
			 : m->cfg.up.global_file_segment_size != INT64_MAX
				 ? (uint64_t)m->cfg.up.global_file_segment_size	/* as declared */
				 : m->fs_quota));
	mc_prom(b, "master_offloaded_key_count", "counter", "Objects copied to SSD",
		x->offloaded_key_count);
	mc_prom(b, "master_offloaded_bytes", "counter", "Bytes copied to SSD", x->offloaded_bytes);
	mc_prom(b, "master_offload_failures_total", "counter", "Offloads that failed",
		x->offload_failures);
	mc_prom(b, "master_offload_enqueued_total", "counter", "Offload tasks queued",
		x->offload_enqueued);
	mc_prom(b, "master_offload_completed_total", "counter",
		"Offloads whose durable SSD copy was acknowledged", x->offload_completed);
	mc_prom(b, "master_offload_failed_total", "counter",
		"Offloads whose SSD write failed (the memory copy stays)", x->offload_failures);
	mc_prom(b, "master_offload_cancelled_total", "counter",
		"Offload tasks dropped before they ran (object removed or changed, area gone)",
		x->offload_cancelled);
	mc_prom(b, "master_offload_enqueue_rejected_total", "counter",
		"Evictions that could not queue an offload (area backing off or queue full): the "
		"object stays in memory", x->offload_enqueue_rejected);
	mc_prom(b, "master_disk_copies_lost_total", "counter",
		"SSD or shared-directory copies found corrupt or truncated and forgotten",
		x->disk_copies_lost);
	mc_prom(b, "master_demoted_key_count", "counter",
		"Objects whose memory was freed while an SSD copy stays", x->demoted_key_count);
	mc_prom(b, "master_disk_evicted_key_count", "counter", "SSD copies evicted by their owner",
		x->disk_evicted_key_count);
	mc_prom(b, "master_disk_evicted_size_bytes", "counter", "Bytes of SSD copies evicted",
		x->disk_evicted_bytes);
	mc_prom(b, "master_promotion_admitted_total", "counter", "Promotions started",
		x->promotion_admitted);
	mc_prom(b, "master_promotion_rejected_cap_total", "counter",
		"Promotions refused for lack of memory", x->promotion_rejected);
	mc_prom(b, "master_promotion_completed_total", "counter", "Promotions done",
		x->promotion_completed);
	mc_prom(b, "master_promotion_completed_bytes_total", "counter", "Bytes promoted",
		x->promotion_completed_bytes);
	mc_prom(b, "master_promotion_failed_total", "counter", "Promotions failed",
		x->promotion_failed);
	mc_prom(b, "valid_get_nums_", "gauge", "Reads that found a replica", x->valid_get_nums);
	mc_prom(b, "total_get_nums_", "gauge", "Reads", x->total_get_nums);
	mc_prom(b, "master_successful_evictions_total", "counter", "Eviction rounds that freed space",
		x->successful_evictions);
	mc_prom(b, "master_attempted_evictions_total", "counter", "Eviction rounds",
		x->attempted_evictions);
	mc_prom(b, "master_evicted_key_count", "counter", "Objects evicted", x->evicted_key_count);
	mc_prom(b, "master_evicted_size_bytes", "counter", "Bytes evicted", x->evicted_size_bytes);
	mc_prom(b, "master_put_start_object_already_exists_total", "counter",
		"PutStart requests answered OBJECT_ALREADY_EXISTS", x->put_start_already_exists);
	mc_prom(b, "master_batch_put_start_object_already_exists_total", "counter",
		"BatchPutStart items answered OBJECT_ALREADY_EXISTS",
		x->batch_put_start_already_exists);
	mc_prom(b, "master_evicted_probe_leased_key_count", "counter",
		"Objects evicted although an ExistKey lease held them (nothing else freed enough)",
		x->evicted_probe_leased);
	mc_prom(b, "master_put_start_discard_cnt", "counter", "Unfinished puts preempted",
		x->put_start_discard_cnt);
	mc_prom(b, "master_put_start_release_cnt", "counter", "Preempted puts whose space was freed",
		x->put_start_release_cnt);
	mc_prom(b, "master_put_start_discarded_staging_size", "gauge",
		"Bytes of preempted puts", x->put_start_discarded_staging_size);
	mc_prom(b, "master_bad_frames_total", "counter", "RPC frames refused", x->bad_frames);
	mc_prom(b, "master_rpc_connections", "gauge", "RPC connections open", m->nconns);
	mc_prom(b, "master_rpc_connections_refused_total", "counter",
		"RPC connections refused at max_connections", x->conns_refused_total);
	mc_prom(b, "master_rpc_connections_refused_per_peer_total", "counter",
		"RPC connections refused at max_connections_per_peer", x->conns_refused_peer);
	mc_prom(b, "master_rpc_slow_requests_closed_total", "counter",
		"RPC connections closed for not completing a request within "
		"rpc_request_timeout_ms", x->conns_closed_slow);
	mc_prom(b, "master_rpc_idle_closed_total", "counter",
		"RPC connections closed idle (rpc_conn_timeout_seconds) or in their handshake",
		x->conns_closed_idle);
	mc_prom(b, "master_rpc_output_overflow_closed_total", "counter",
		"RPC connections closed with rpc_max_conn_output_bytes of unread replies",
		x->conns_closed_output);
	mc_prom(b, "mooncake_auth_failures_total", "counter",
		"peers refused for want of the cluster secret (every port)",
		mc_auth_failures(m->auth));
	mc_prom(b, "master_rpc_expired_requests_total", "counter",
		"Requests read after their deadline and not executed", x->rpc_expired_requests);
	mc_prom(b, "master_expired_clients_total", "counter", "Clients declared dead",
		x->clients_expired);
	mc_admin_liveness_metrics(m, b);
	mc_conn_limit_prom(b);	/* the embedded metadata service's port, when it runs */
	mc_procmem_prom(b);
	if (m->admin_extra_metrics)	/* drain, tasks, tenants, KV events (admin_more.c) */
		m->admin_extra_metrics(m, b);
	if (m->persist == NULL)
		return;
	mc_prom(b, "master_persist_ok", "gauge",
		"1 while --persist_path takes commits, 0 while they fail", !m->persist_failed);
	mc_prom(b, "master_persist_commit_failures_total", "counter",
		"Failed commits and checkpoints of --persist_path, retries included",
		x->persist_commit_failures);
	mc_prom(b, "master_persist_refused_requests_total", "counter",
		"Requests refused with PERSISTENT_FAIL while persistence failed", x->persist_refused);
	{
		int64_t ms = x->persist_refusing_ms;

		if (m->persist_failed)
			ms += mc_master_now(m) - m->persist_failed_since;
		evbuffer_add_printf(b, "# HELP master_persist_refusing_seconds_total Time spent with "
				       "persistence failing\n"
				       "# TYPE master_persist_refusing_seconds_total counter\n"
				       "master_persist_refusing_seconds_total %.3f\n",
				    (double)ms / 1000.0);
	}
	mc_ha_metrics(m, b);
}

static void mc_reply(struct evhttp_request *req, int code, const char *type, struct evbuffer *b)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	evhttp_send_reply(req, code, code == 200 ? "OK" : code == 404 ? "Not Found"
					 : code == 400	    ? "Bad Request"
					 : code == 409	    ? "Conflict"
							    : "Error",
			  b);
}

static void mc_reply_json(struct evhttp_request *req, int code, json_t *j)
{
	struct evbuffer *b = evbuffer_new();
	char *s = json_dumps(j, JSON_COMPACT);

	if (s)
		evbuffer_add(b, s, strlen(s));
	free(s);
	json_decref(j);
	mc_reply(req, code, "application/json", b);
	evbuffer_free(b);
}

static void mc_reply_error(struct evhttp_request *req, int code, int err)
{
	mc_reply_json(req, code, json_pack("{sbsiss}", "success", 0, "error_code", err,
					   "error_message", mc_strerror(err)));
}

/* A standby (HA) has no table to answer from: 503 with UNAVAILABLE_IN_CURRENT_MODE, as
 * upstream's "service plane is not active".  1 when refused. */
static int mc_admin_standby(struct mc_master *m, struct evhttp_request *req)
{
	if (mc_ha_serving(m))
		return 0;
	mc_reply_json(req, 503, json_pack("{sbsiss}", "success", 0, "error_code",
					  MC_ERR_UNAVAILABLE_IN_CURRENT_MODE, "error_message",
					  "service plane is not active"));
	return 1;
}

static json_t *mc_buffer_desc(struct mc_object *o, struct mc_replica *r)
{
	return json_pack("{sIsIssss}", "size_", (json_int_t)o->size, "buffer_address_",
			 (json_int_t)(r->seg->base + mc_alloc_block_offset(r->blk)), "protocol_",
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

static const char *mc_query(struct evhttp_request *req, struct evkeyvalq *q, const char *name)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));

	if (query == NULL || evhttp_parse_query_str(query, q) != 0)
		return NULL;
	return evhttp_find_header(q, name);
}

/* "true" or "1". */
static int mc_query_flag(struct evkeyvalq *q, const char *name)
{
	const char *v = evhttp_find_header(q, name);

	return v && (!strcmp(v, "true") || !strcmp(v, "1"));
}

/* A route serves one method: 1 if req uses it, else 0 with a 405 sent. */
static int mc_admin_method(struct evhttp_request *req, enum evhttp_cmd_type cmd)
{
	if (evhttp_request_get_command(req) == cmd)
		return 1;
	evhttp_send_error(req, 405, "Method not allowed");
	return 0;
}

/* Changes are refused while persistence fails: 1 (and a 503 sent) when refused. */
static int mc_admin_refusing(struct mc_master *m, struct evhttp_request *req)
{
	if (mc_admin_standby(m, req))
		return 1;
	if (!mc_master_persist_refusing(m))
		return 0;
	m->metrics.persist_refused++;
	mc_reply_error(req, 503, MC_ERR_PERSISTENT_FAIL);
	return 1;
}

/* With the replicated log (HA), a change's reply waits until etcd has it: the reply is kept
 * here, and dropped if the client goes first. */
struct mc_admin_deferred {
	struct evhttp_request *req;
	int code;
	json_t *body;
};

static void mc_admin_deferred_gone(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	((struct mc_admin_deferred *)arg)->req = NULL;
}

static void mc_admin_deferred_send(void *arg)
{
	struct mc_admin_deferred *d = arg;

	if (d->req) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(d->req), NULL, NULL);
		mc_reply_json(d->req, d->code, d->body);
	} else {
		json_decref(d->body);
	}
	free(d);
}

/* Reply code/body (stolen) to req once the changes made so far are durable. */
static void mc_admin_reply_durable(struct mc_master *m, struct evhttp_request *req, int code,
				   json_t *body)
{
	struct mc_admin_deferred *d;

	if (m->ha == NULL || (d = calloc(1, sizeof(*d))) == NULL) {
		mc_reply_json(req, code, body);
		return;
	}
	d->req = req;
	d->code = code;
	d->body = body;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), mc_admin_deferred_gone, d);
	mc_ha_when_durable(m, mc_admin_deferred_send, d);
}

/* POST /api/v1/remove_all[?force=true]: RemoveAll, as the RPC does it. */
static void mc_admin_remove_all(struct evhttp_request *req, void *arg)
{
	struct mc_master *m = arg;
	struct evkeyvalq q;
	int64_t count;
	int f;

	TAILQ_INIT(&q);
	mc_query(req, &q, "force");
	f = mc_query_flag(&q, "force");
	if (!mc_admin_method(req, EVHTTP_REQ_POST) || mc_admin_refusing(m, req))
		goto out;
	{
		/* ?tenant_id=: only that tenant's objects (upstream's); none: every tenant's. */
		const char *tid = evhttp_find_header(&q, "tenant_id");

		if (tid && *tid && mc_tenant_scope(m, tid) != 0) {
			mc_reply_json(req, 200, json_pack("{sbsI}", "success", 1, "removed_count",
							  (json_int_t)0));
			goto out;
		}
	}
	count = mc_master_remove_all(m, f, mc_master_now(m), "admin remove_all");
	m->objects.tenant = 0;
	m->objects.all_tenants = 1;
	if (mc_master_commit(m) != 0) {
		mc_reply_error(req, 503, MC_ERR_PERSISTENT_FAIL);
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
	key = mc_query(req, &q, "key");
	f = mc_query_flag(&q, "force");
	if (!mc_admin_method(req, EVHTTP_REQ_POST))
		goto out;
	if (key == NULL) {
		mc_reply_error(req, 400, MC_ERR_INVALID_PARAMS);
		goto out;
	}
	if (mc_admin_refusing(m, req))
		goto out;
	rc = mc_master_remove_key(m, key, strlen(key), f, mc_master_now(m));
	if (mc_master_commit(m) != 0) {
		mc_reply_error(req, 503, MC_ERR_PERSISTENT_FAIL);
		goto out;
	}
	if (rc) {
		mc_reply_error(req, rc == MC_ERR_OBJECT_NOT_FOUND ? 404 : 409, rc);
		goto out;
	}
	mc_log_notice("admin remove of %s%s", key, f ? " (force)" : "");
	mc_admin_reply_durable(m, req, 200, json_pack("{sb}", "success", 1));
out:
	evhttp_clear_headers(&q);
}

/* GET /metrics: Prometheus text. */
static void mc_admin_get_metrics(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	b = evbuffer_new();
	mc_admin_metrics(arg, b);
	mc_reply(req, 200, "text/plain; version=0.0.4", b);
	evbuffer_free(b);
}

/* GET /metrics/summary: the one-line summary of the periodic log line. */
static void mc_admin_get_summary(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b;
	char line[2048];

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	b = evbuffer_new();
	mc_master_summary(arg, line, sizeof(line));
	evbuffer_add_printf(b, "%s\n", line);
	mc_reply(req, 200, "text/plain", b);
	evbuffer_free(b);
}

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
	mc_reply_json(req, 200, j);
}

/* GET /leader: {"present", "leader_address", "view_version"} as upstream's. */
static void mc_admin_get_leader(struct evhttp_request *req, void *arg)
{
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	mc_reply_json(req, 200, mc_ha_leader_json(arg));
}

/* GET /role ("leader" or "standby") and GET /ha_status (the runtime state), as text. */
static void mc_admin_get_text(struct evhttp_request *req, const char *text)
{
	struct evbuffer *b;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	b = evbuffer_new();
	evbuffer_add_printf(b, "%s", text);
	mc_reply(req, 200, "text/plain; charset=utf-8", b);
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
	key = mc_query(req, &q, "key");
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		goto out;
	o = key ? mc_object_find(&m->objects, key, strlen(key)) : NULL;
	if (key == NULL) {
		mc_reply_error(req, 400, MC_ERR_INVALID_PARAMS);
	} else if (o == NULL || json_array_size(arr = mc_replicas_json(m, o)) == 0) {
		if (o)
			json_decref(arr);
		mc_reply_error(req, 404, MC_ERR_OBJECT_NOT_FOUND);
	} else {
		int64_t until = mc_master_now(m) + m->cfg.default_kv_lease_ttl;

		json_t *j = json_pack("{sbso}", "success", 1, "data", arr);

		if (o->lease_until < until)
			o->lease_until = until;
		mc_checksum_json(j, o);
		mc_reply_json(req, 200, j);
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
	keys = mc_query(req, &q, "keys");
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		goto out;
	if (keys == NULL || *keys == '\0') {
		mc_reply_json(req, 400, json_pack("{sbss}", "success", 0, "error",
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
	mc_reply_json(req, 200, json_pack("{sbso}", "success", 1, "data", data));
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
	mc_reply(req, 200, "text/plain", b);
	evbuffer_free(b);
}

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
	mc_reply(req, 200, "text/plain", b);
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
	name = mc_query(req, &q, "segment");
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		goto out;
	for (i = 0; name && i < m->nsegs; i++)
		if (!strcmp(m->segs[i]->name, name)) {
			used += mc_alloc_used(m->segs[i]->alloc);
			cap += m->segs[i]->size;
			found = 1;
		}
	if (!found) {
		mc_reply_error(req, name ? 404 : 400,
			       name ? MC_ERR_SEGMENT_NOT_FOUND : MC_ERR_INVALID_PARAMS);
	} else {
		struct evbuffer *b = evbuffer_new();

		evbuffer_add_printf(b, "%s\nUsed(bytes): %" PRIu64 "\nCapacity(bytes) : %" PRIu64
				       "\n", name, used, cap);
		mc_reply(req, 200, "text/plain", b);
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
	mc_fmt_bytes(human, sizeof(human), s->size);
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
	mc_reply_json(req, 200, json_pack("{sIso}", "total_segments",
					  (json_int_t)json_array_size(arr), "segments", arr));
}

/* POST /api/v1/soft_pin and /api/v1/soft_unpin: a JSON body (admin_pin.c). */
static void mc_admin_pin_common(struct evhttp_request *req, struct mc_master *m, int pin)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	json_t *reply = NULL;
	int code;

	if (!mc_admin_method(req, EVHTTP_REQ_POST) || mc_admin_refusing(m, req))
		return;
	code = mc_admin_soft_pin_body(m, (const char *)evbuffer_pullup(in, (ssize_t)len), len, pin,
				      &reply);
	if (code == 200 && mc_master_commit(m) != 0) {
		json_decref(reply);
		mc_reply_error(req, 503, MC_ERR_PERSISTENT_FAIL);
		return;
	}
	mc_reply_json(req, code, reply);
}

static void mc_admin_soft_pin(struct evhttp_request *req, void *arg)
{
	mc_admin_pin_common(req, arg, 1);
}

static void mc_admin_soft_unpin(struct evhttp_request *req, void *arg)
{
	mc_admin_pin_common(req, arg, 0);
}

/* GET /version: the store protocol version upstream reports and what answers it. */
static void mc_admin_version(struct evhttp_request *req, void *arg)
{
	(void)arg;
	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	mc_reply_json(req, 200, json_pack("{ssss}", "version", "2.0.0", "display_version",
					  "0.3.14 (mooncake-c " PACKAGE_VERSION ")"));
}

/* Any other path: 405 for other methods than GET, as every route answers them, else 404. */
static void mc_admin_not_found(struct evhttp_request *req, void *arg)
{
	(void)arg;
	if (mc_admin_method(req, EVHTTP_REQ_GET))
		evhttp_send_error(req, 404, "Not Found");
}

struct mc_admin_route {
	struct mc_admin_route *next;	/* m->admin_routes, freed at stop */
	struct mc_master *m;
	void (*cb)(struct evhttp_request *, void *);
	void *arg;
};

/* With a cluster secret, a request that may change something (any method but GET and HEAD)
 * must carry it, and so must reads with --auth_http_reads; then the route's own callback. */
static void mc_admin_on_request(struct evhttp_request *req, void *arg)
{
	struct mc_admin_route *r = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	int read_only = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;

	if ((!read_only || r->m->cfg.auth_http_reads) &&
	    !mc_http_auth_check(r->m->auth, req, "admin HTTP"))
		return;
	r->cb(req, r->arg);
}

int mc_admin_route(struct mc_master *m, const char *path,
		   void (*cb)(struct evhttp_request *, void *), void *arg)
{
	struct mc_admin_route *r = mc_xcalloc(1, sizeof(*r));

	*r = (struct mc_admin_route){ m->admin_routes, m, cb, arg };
	m->admin_routes = r;
	if (path == NULL) {
		evhttp_set_gencb(m->admin, mc_admin_on_request, r);
		return 0;
	}
	return evhttp_set_cb(m->admin, path, mc_admin_on_request, r);
}

/* The routes: one callback per path. */
static int mc_admin_routes(struct mc_master *m)
{
	static const struct {
		const char *path;
		void (*cb)(struct evhttp_request *, void *);
	} routes[] = {
		{ "/api/v1/remove_all", mc_admin_remove_all },
		{ "/api/v1/remove", mc_admin_remove },
		{ "/metrics", mc_admin_get_metrics },
		{ "/metrics/summary", mc_admin_get_summary },
		{ "/health", mc_admin_get_health },
		{ "/query_key", mc_admin_query_key },
		{ "/batch_query_keys", mc_admin_batch_query_keys },
		{ "/get_all_keys", mc_admin_get_all_keys },
		{ "/get_all_segments", mc_admin_get_all_segments },
		{ "/query_segment", mc_admin_query_segment },
		{ "/get_segments_detail", mc_admin_segments_detail },
		{ "/api/v1/soft_pin", mc_admin_soft_pin },
		{ "/api/v1/soft_unpin", mc_admin_soft_unpin },
		{ "/version", mc_admin_version },
	};
	size_t i, n = sizeof(routes) / sizeof(routes[0]);

	/* Every route goes through mc_admin_route, so the cluster secret is checked in one
	 * place for every path, the ones other modules add too. */
	for (i = 0; i < n; i++)
		if (mc_admin_route(m, routes[i].path, routes[i].cb, m) != 0)
			return -1;
	if (m->admin_extra_routes && m->admin_extra_routes(m) != 0)
		return -1;
	if (mc_admin_route(m, "/role", mc_admin_get_role, m) != 0 ||
	    mc_admin_route(m, "/ha_status", mc_admin_get_ha_status, m) != 0 ||
	    mc_admin_route(m, "/leader", mc_admin_get_leader, m) != 0)
		return -1;
	return mc_admin_route(m, NULL, mc_admin_not_found, m);
}

int mc_admin_http_start(struct mc_master *m)
{
	if (m->cfg.metrics_port == 0)
		return 0;
	m->admin = evhttp_new(m->base);
	if (m->admin == NULL)
		return -1;
	evhttp_set_max_headers_size(m->admin, 16384);
	evhttp_set_max_body_size(m->admin, 1 << 20);
	/* A request (or an idle keep-alive connection) gets this long: slow clients cannot hold
	 * the admin port. */
	evhttp_set_timeout(m->admin, 10);
	if (m->tls)
		mc_tls_http_serve(m->admin, m->tls);
	if (mc_admin_routes(m) != 0 ||
	    evhttp_bind_socket(m->admin, m->cfg.metrics_host, (uint16_t)m->cfg.metrics_port)) {
		mc_log_err("cannot listen for admin HTTP on %s:%lld", m->cfg.metrics_host,
			   (long long)m->cfg.metrics_port);
		evhttp_free(m->admin);
		m->admin = NULL;
		return -1;
	}
	mc_log_notice("admin and metrics HTTP on %s:%lld", m->cfg.metrics_host,
		      (long long)m->cfg.metrics_port);
	return 0;
}

void mc_admin_http_stop(struct mc_master *m)
{
	if (m->admin)
		evhttp_free(m->admin);
	m->admin = NULL;
	while (m->admin_routes) {
		struct mc_admin_route *r = m->admin_routes;

		m->admin_routes = r->next;
		free(r);
	}
}

/* ---------------------------------------------------------------- for the other modules' routes */

void mc_admin_send_json(struct evhttp_request *req, int code, json_t *j)
{
	mc_reply_json(req, code, j);
}

int mc_admin_http_status(int err)
{
	switch (err) {
	case MC_ERR_INVALID_PARAMS:
		return 400;
	case MC_ERR_JOB_NOT_FOUND:
	case MC_ERR_SEGMENT_NOT_FOUND:
	case MC_ERR_OBJECT_NOT_FOUND:
	case MC_ERR_TENANT_NOT_REGISTERED:
		return 404;
	case MC_ERR_UNAVAILABLE_IN_CURRENT_MODE:
	case MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS:
	case MC_ERR_TENANT_NOT_EMPTY:
		return 409;
	default:
		return 500;
	}
}

void mc_admin_send_error(struct evhttp_request *req, int code, int err, const char *msg)
{
	mc_reply_json(req, code, json_pack("{sbsiss}", "success", 0, "error_code", err,
					   "error_message", msg ? msg : mc_strerror(err)));
}

char *mc_admin_query_param(struct evhttp_request *req, const char *name)
{
	struct evkeyvalq q;
	const char *v;
	char *out;

	TAILQ_INIT(&q);
	v = mc_query(req, &q, name);
	out = v ? strdup(v) : NULL;
	evhttp_clear_headers(&q);
	return out;
}

char *mc_admin_body(struct evhttp_request *req, size_t max)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *s;

	if (n > max || (s = malloc(n + 1)) == NULL)
		return NULL;
	evbuffer_copyout(in, s, n);
	s[n] = '\0';
	return s;
}

void mc_admin_prom_label(struct evbuffer *b, const char *s)
{
	mc_prom_label(b, s);
}

int mc_admin_refuse_changes(struct mc_master *m, struct evhttp_request *req)
{
	return mc_admin_refusing(m, req);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's metrics on the admin HTTP server: Prometheus text under upstream's names
 * (per-operation counters under the metric names of the operation table, ops.h) at /metrics,
 * and the one-line summary at /metrics/summary, which is also the periodic summary log line in
 * upstream's v0.3.9 form, so memory analyses written against upstream's logs work on ours.
 * Everything reads the master's tables directly.  Single-threaded: the master's reactor thread.
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

#include "common/auth.h"
#include "common/errcode.h"
#include "common/log.h"
#include "master/admin_http.h"
#include "master/ha.h"
#include "master/ops.h"
#include "persist/persist.h"
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
void mc_admin_fmt_bytes(char *out, size_t n, uint64_t v)
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

	mc_admin_fmt_bytes(used, sizeof(used), m->allocated);
	mc_admin_fmt_bytes(total, sizeof(total), m->total_capacity);
	mc_admin_fmt_bytes(evsize, sizeof(evsize), x->evicted_size_bytes);
	mc_admin_fmt_bytes(dused, sizeof(dused), m->disk_allocated);
	mc_admin_fmt_bytes(dtotal, sizeof(dtotal), m->disk_capacity);
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
		mc_admin_prom_label(b, m->segs[i]->name);
		evbuffer_add_printf(b, "\"} %" PRIu64 "\n", mc_alloc_used(m->segs[i]->alloc));
	}
	evbuffer_add_printf(b, "# HELP segment_total_capacity_bytes Capacity per segment\n"
			       "# TYPE segment_total_capacity_bytes gauge\n");
	for (i = 0; i < m->nsegs; i++) {
		evbuffer_add_printf(b, "segment_total_capacity_bytes{segment=\"");
		mc_admin_prom_label(b, m->segs[i]->name);
		evbuffer_add_printf(b, "\"} %" PRIu64 "\n", m->segs[i]->size);
	}
	evbuffer_add_printf(b, "# HELP segment_populated_bytes Bytes of a segment its process "
			       "has populated (absent: not reported by the process)\n"
			       "# TYPE segment_populated_bytes gauge\n");
	for (i = 0; i < m->nsegs; i++) {
		if (!m->segs[i]->has_populated)
			continue;
		evbuffer_add_printf(b, "segment_populated_bytes{segment=\"");
		mc_admin_prom_label(b, m->segs[i]->name);
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
	mc_prom(b, "master_load_waiting_requests", "gauge",
		"Requests waiting for the background load of the objects", m->nparked);
	mc_prom(b, "master_load_in_progress", "gauge",
		"1 while the objects load in the background after a restart, 0 once every one is in "
		"with its ranges reserved", m->load != NULL);
	mc_prom(b, "master_load_refused_requests_total", "counter",
		"Requests refused because too many waited for the background load",
		x->load_park_refused);
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
	mc_prom(b, "master_persist_putlog_retired_total", "counter",
		"Puts in flight for over a second moved from the put log to the objects table",
		x->persist_log_retired);
	mc_prom(b, "master_persist_putlog_rows", "gauge",
		"Rows of the put log (puts in flight) held in memory and in the file",
		(uint64_t)mc_persist_log_rows(m->persist));
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

/* GET /metrics: Prometheus text. */
static void mc_admin_get_metrics(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b;

	if (!mc_admin_method(req, EVHTTP_REQ_GET))
		return;
	b = evbuffer_new();
	mc_admin_metrics(arg, b);
	mc_admin_reply(req, 200, "text/plain; version=0.0.4", b);
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
	mc_admin_reply(req, 200, "text/plain", b);
	evbuffer_free(b);
}

int mc_admin_metrics_routes(struct mc_master *m)
{
	return mc_admin_route(m, "/metrics", mc_admin_get_metrics, m) ||
	       mc_admin_route(m, "/metrics/summary", mc_admin_get_summary, m);
}

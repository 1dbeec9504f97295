/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_METRICS_H
#define MC_MASTER_METRICS_H

#include <stdint.h>

/*
 * Counters kept by the master under upstream's metric names.  Indexed by RPC opcode so the
 * dispatcher (op_table.c) counts every request in one place; exported by the admin HTTP server
 * under the metric name of the operation table (src/proto/rpc_ops.h) as
 * master_<metric>_requests_total / _failures_total, batch operations also as
 * _partial_successes_total, _items_total and _failed_items_total.
 */
#define MC_METRICS_MAX_OP 96

struct mc_op_counters {
	uint64_t requests;
	uint64_t failures;
	uint64_t partial;	/* batch: some items failed */
	uint64_t items;
	uint64_t failed_items;
};

struct mc_metrics {
	struct mc_op_counters op[MC_METRICS_MAX_OP];
	uint64_t put_start_alloc_failures;
	uint64_t put_start_partial_allocations;
	uint64_t put_start_discard_cnt;
	uint64_t put_start_release_cnt;
	uint64_t put_start_discarded_staging_size;
	uint64_t mem_cache_hit_nums;
	uint64_t valid_get_nums;
	uint64_t total_get_nums;
	uint64_t bad_frames;
	/* connection limits (rpc_server.c) */
	uint64_t conns_refused_total;		/* max_connections */
	uint64_t conns_refused_peer;		/* max_connections_per_peer */
	uint64_t conns_closed_slow;		/* rpc_request_timeout_ms */
	uint64_t conns_closed_idle;		/* rpc_conn_timeout_seconds */
	uint64_t conns_closed_output;		/* rpc_max_conn_output_bytes */
	uint64_t rpc_expired_requests;		/* dropped: past their deadline when read */
	uint64_t load_park_refused;		/* refused: too many waited for the load */
	uint64_t attempted_evictions;
	uint64_t successful_evictions;
	uint64_t evicted_key_count;
	uint64_t evicted_size_bytes;
	uint64_t clients_expired;
	/* client liveness (liveness.c) */
	uint64_t suspected_transitions;
	uint64_t offline_transitions;
	uint64_t recoveries;
	uint64_t dormant_segments_restored;
	uint64_t dormant_replicas_restored;
	uint64_t dormant_segments_expired;
	uint64_t transfer_failure_reports;	/* ReportTransferFailure items */
	uint64_t checksum_mismatches;		/* replicas dropped by ReportChecksumMismatch */
	uint64_t checksum_mismatch_removals;	/* objects removed so: no good replica left */
	uint64_t unhealthy_marks;		/* times a segment was marked unhealthy */
	uint64_t file_cache_hit_nums;
	uint64_t offloaded_key_count;
	uint64_t offloaded_bytes;
	uint64_t offload_failures;
	uint64_t offload_enqueued;
	uint64_t offload_completed;
	uint64_t offload_cancelled;
	uint64_t offload_enqueue_rejected;
	uint64_t disk_copies_lost;
	uint64_t demoted_key_count;
	uint64_t disk_evicted_key_count;
	uint64_t disk_evicted_bytes;
	uint64_t promotion_admitted;
	uint64_t promotion_rejected;
	uint64_t promotion_completed;
	uint64_t promotion_completed_bytes;
	uint64_t promotion_failed;
	uint64_t persist_commit_failures;	/* failed commits and checkpoints, retries too */
	uint64_t persist_log_retired;	/* puts moved from the put log to the objects table */
	uint64_t persist_refused;		/* requests refused while persistence failed */
	int64_t persist_refusing_ms;		/* finished failing periods */
	uint64_t put_start_already_exists;	/* PutStart answered OBJECT_ALREADY_EXISTS */
	uint64_t batch_put_start_already_exists;	/* BatchPutStart items so answered */
	uint64_t evicted_probe_leased;	/* objects evicted although an ExistKey lease held them */
	uint64_t value_size_buckets[8];	/* 4K 64K 256K 1M 4M 16M 64M +Inf */
	uint64_t value_size_sum;
	uint64_t value_size_count;
};

#endif

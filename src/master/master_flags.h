/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_FLAGS_H
#define MC_MASTER_FLAGS_H

/*
 * Upstream master flags that tune parts the core table does not own: glog's logging flags, the
 * SSD tier's caps, the shared-file capacity figure, and the flags of hardware or features this
 * build has not (CXL memory, NVMe-oF SSD pools, the mmap arena, managed model weights), each
 * either honoured or refused with a message naming what is missing (master_flags.c).
 *
 * mooncake_master embeds struct mc_master_flags in its configuration (cfg.up) and puts
 * MC_MASTER_FLAGS_OPTS(offsetof(cfg, up)) in its option table.
 */
#include <stddef.h>
#include <stdint.h>

#include "reactor/log_opts.h"

struct mc_master_flags {
	struct mc_log_opts log;
	/* SSD tier (tier_ssd.c, eviction.c) */
	double offload_cap_ratio;		/* demotions one eviction round may queue, as a
						   fraction of offloading_queue_limit */
	int offload_force_evict;		/* past that cap: evict without an SSD copy */
	int64_t promotion_queue_limit;		/* promotions in flight, all SSD areas */
	int64_t promotion_max_per_heartbeat;	/* promotions handed to one heartbeat */
	int64_t global_file_segment_size;	/* declared capacity of the shared directory */
	/* hardware and features this build cannot drive: refused unless left as they are */
	int enable_cxl;
	char *cxl_path;
	uint64_t cxl_size;
	double nof_eviction_ratio;
	double nof_eviction_high_watermark_ratio;
	int64_t nof_heartbeat_interval_sec;
	int64_t nof_heartbeat_probe_timeout_ms;
	int64_t nof_heartbeat_failures_threshold;
	int use_mmap_arena_allocator;
	uint64_t mmap_arena_pool_size;
	int64_t weight_import_idle_timeout_ms;
	int weight_management_oplog_capability_confirmed;
};

#define MC_NOF_HELP "NVMe-oF SSD pools: not supported by this build (only the default is accepted)"
#define MC_MF(base, f) ((base) + offsetof(struct mc_master_flags, f))
#define MC_MASTER_FLAGS_OPTS(base)                                                             \
	MC_LOG_OPTS((base) + offsetof(struct mc_master_flags, log)),                             \
	{ "offload_cap_ratio", NULL, NULL, MC_OPT_DOUBLE, MC_MF(base, offload_cap_ratio), "0.5", \
	  0, 1, "demotions to SSD one eviction round may queue, as a fraction of "              \
	  "--offloading_queue_limit" },                                                         \
	{ "offload_force_evict", NULL, NULL, MC_OPT_BOOL, MC_MF(base, offload_force_evict),     \
	  "false", 0, -1, "past that cap, evict objects without an SSD copy instead of keeping "\
	  "them in memory for a later round" },                                                 \
	{ "promotion_queue_limit", NULL, NULL, MC_OPT_INT, MC_MF(base, promotion_queue_limit),  \
	  "50000", 1, 100000000, "promotions from SSD to memory in flight at once" },           \
	{ "promotion_max_per_heartbeat", NULL, NULL, MC_OPT_INT,                                \
	  MC_MF(base, promotion_max_per_heartbeat), "1", 1, 1000000,                            \
	  "promotion tasks handed to one SSD owner per heartbeat" },                            \
	{ "global_file_segment_size", NULL, NULL, MC_OPT_INT,                                    \
	  MC_MF(base, global_file_segment_size), "9223372036854775807", 0,                      \
	  9223372036854775807.0, "declared capacity of the --root_fs_dir directory, for "       \
	  "master_total_file_capacity_bytes (the default: its quota)" },                        \
	{ "enable_cxl", NULL, NULL, MC_OPT_BOOL, MC_MF(base, enable_cxl), "false", 0, -1,        \
	  "CXL memory segments: not supported by this build (true is refused)" },               \
	{ "cxl_path", NULL, NULL, MC_OPT_PATH, MC_MF(base, cxl_path), "/dev/dax0.0", 0, -1,      \
	  "DAX device of CXL memory (only with --enable_cxl)" },                                \
	{ "cxl_size", NULL, NULL, MC_OPT_SIZE, MC_MF(base, cxl_size), "8589934592", 0, -1,       \
	  "bytes of CXL memory (only with --enable_cxl)" },                                     \
	{ "nof_eviction_ratio", NULL, NULL, MC_OPT_DOUBLE, MC_MF(base, nof_eviction_ratio),     \
	  "0.05", 0, 1, MC_NOF_HELP }, \
	{ "nof_eviction_high_watermark_ratio", NULL, NULL, MC_OPT_DOUBLE,                      \
	  MC_MF(base, nof_eviction_high_watermark_ratio), "0.90", 0, 1,                         \
	  MC_NOF_HELP },               \
	{ "nof_heartbeat_interval_sec", NULL, NULL, MC_OPT_INT,                                 \
	  MC_MF(base, nof_heartbeat_interval_sec), "10", 1, 86400,                              \
	  MC_NOF_HELP },               \
	{ "nof_heartbeat_probe_timeout_ms", NULL, NULL, MC_OPT_INT,                             \
	  MC_MF(base, nof_heartbeat_probe_timeout_ms), "1000", 1, 3600000,                      \
	  MC_NOF_HELP },               \
	{ "nof_heartbeat_failures_threshold", NULL, NULL, MC_OPT_INT,                           \
	  MC_MF(base, nof_heartbeat_failures_threshold), "3", 1, 1000000,                       \
	  MC_NOF_HELP },               \
	{ "use_mmap_arena_allocator", NULL, NULL, MC_OPT_BOOL,                                  \
	  MC_MF(base, use_mmap_arena_allocator), "false", 0, -1,                                \
	  "accepted for compatibility: the master maps no buffers (0.3.14 dropped it here)" },  \
	{ "mmap_arena_pool_size", NULL, NULL, MC_OPT_SIZE, MC_MF(base, mmap_arena_pool_size),   \
	  "8589934592", 0, -1, "accepted for compatibility, as --use_mmap_arena_allocator" },   \
	{ "weight_import_idle_timeout_ms", NULL, NULL, MC_OPT_INT,                              \
	  MC_MF(base, weight_import_idle_timeout_ms), "300000", 1, 86400000,                    \
	  "managed model-weight imports: not supported by this build (only the default is "     \
	  "accepted)" },                                                                        \
	{ "weight_management_oplog_capability_confirmed", NULL, NULL, MC_OPT_BOOL,             \
	  MC_MF(base, weight_management_oplog_capability_confirmed), "false", 0, -1,            \
	  "managed model weights: not supported by this build (true is refused)" }

/* The flags of upstream's task limits and timeouts (cfg.tasks). */
struct mc_task_config {
	int64_t max_total_finished_tasks;
	int64_t max_total_pending_tasks;
	int64_t max_total_processing_tasks;
	int64_t pending_task_timeout_sec;	/* 0: none */
	int64_t processing_task_timeout_sec;	/* 0: none */
	int64_t max_retry_attempts;
};

#define MC_TC(base, f) ((base) + offsetof(struct mc_task_config, f))
#define MC_TASK_OPTS(base)                                                                     \
	{ "max_total_finished_tasks", NULL, NULL, MC_OPT_INT, MC_TC(base, max_total_finished_tasks),\
	  "10000", 1, 10000000, "finished copy/move tasks kept for QueryTask" },                \
	{ "max_total_pending_tasks", NULL, NULL, MC_OPT_INT, MC_TC(base, max_total_pending_tasks), \
	  "10000", 1, 10000000, "tasks waiting to run; more are refused "                      \
	  "(TASK_PENDING_LIMIT_EXCEEDED)" },                                                    \
	{ "max_total_processing_tasks", NULL, NULL, MC_OPT_INT,                                 \
	  MC_TC(base, max_total_processing_tasks), "10000", 1, 10000000,                        \
	  "tasks handed to clients at once" },                                                  \
	{ "pending_task_timeout_sec", NULL, NULL, MC_OPT_INT, MC_TC(base, pending_task_timeout_sec),\
	  "300", 0, 31536000, "a task no client took this long fails (0: never)" },             \
	{ "processing_task_timeout_sec", NULL, NULL, MC_OPT_INT,                                \
	  MC_TC(base, processing_task_timeout_sec), "300", 0, 31536000,                         \
	  "a task a client took but did not finish this long is tried again (0: never)" },      \
	{ "max_retry_attempts", NULL, NULL, MC_OPT_INT, MC_TC(base, max_retry_attempts), "10", 1, \
	  1000000, "attempts of a task before it fails for good" }

/* Upstream's multi-tenancy flags (cfg.tenants, tenants.c). */
struct mc_tenant_config {
	int enable_multi_tenants;
	char *tenant_quota_connector_type;	/* file | etcd */
	char *tenant_quota_connector_uri;	/* the policy file, or etcd endpoints */
	double tenant_eviction_high_watermark_ratio;
};

#define MC_TN(base, f) ((base) + offsetof(struct mc_tenant_config, f))
#define MC_TENANT_OPTS(base)                                                                   \
	{ "enable_multi_tenants", NULL, NULL, MC_OPT_BOOL, MC_TN(base, enable_multi_tenants),   \
	  "false", 0, -1, "strict multi-tenant mode: each client's tenant_id is a namespace of "\
	  "its own, writes are admitted against the tenant's quota" },                          \
	{ "tenant_quota_connector_type", NULL, NULL, MC_OPT_CHOICE,                             \
	  MC_TN(base, tenant_quota_connector_type), "file|etcd", 0, -1,                         \
	  "where tenant quota policies are kept: file (a YAML file), or etcd (the same YAML "   \
	  "at mooncake-store/<cluster_id>/tenant_quota_policy)" },                             \
	{ "tenant_quota_connector_uri", NULL, NULL, MC_OPT_PATH,                                 \
	  MC_TN(base, tenant_quota_connector_uri), "", 0, -1,                                    \
	  "file: the YAML policy file (version: 1, tenants: [{name, quota}]); etcd: the etcd "  \
	  "endpoints (host:port;host:port); changes made through /api/v1/tenant_quotas are "    \
	  "written back there" },                                                               \
	{ "tenant_eviction_high_watermark_ratio", NULL, NULL, MC_OPT_DOUBLE,                    \
	  MC_TN(base, tenant_eviction_high_watermark_ratio), "0.9", 0.01, 1,                    \
	  "a tenant whose charged bytes pass this share of its effective quota has its own "    \
	  "least recently used objects evicted (admission never evicts: it refuses with "       \
	  "TENANT_QUOTA_EXCEEDED)" }

/* Upstream's KV event flags (cfg.kv, kv_events.c). */
struct mc_kv_config {
	int enable_kv_events;
	char *kv_events_bind_endpoint;
	char *kv_events_model_name;
	char *kv_events_backend_id;
	char *kv_events_tenant_id;
	char *kv_events_additional_salt;
	char *kv_events_lora_name;
	int64_t kv_events_block_size;
	int64_t kv_events_dp_rank;
	int kv_events_emit_legacy_compat;
	int kv_events_emit_object_key;
	int64_t kv_events_queue_capacity;
};

#define MC_KV(base, f) ((base) + offsetof(struct mc_kv_config, f))
#define MC_KV_STR(base, name, def, help)                                                             \
	{ #name, NULL, NULL, MC_OPT_TOKEN, MC_KV(base, name), def, 0, -1, help }
#define MC_KV_OPTS(base)                                                                       \
	{ "enable_kv_events", NULL, NULL, MC_OPT_BOOL, MC_KV(base, enable_kv_events), "false", 0, \
	  -1, "publish KV cache events (stored, removed) over ZeroMQ PUB, msgpack-encoded as "  \
	  "upstream's (needs libzmq)" },                                                        \
	MC_KV_STR(base, kv_events_bind_endpoint, "", "ZeroMQ PUB bind endpoint, e.g. "               \
		  "tcp://0.0.0.0:5557 (required with --enable_kv_events)"),                     \
	MC_KV_STR(base, kv_events_model_name, "", "model_name stamped on every event (empty: nil)"), \
	MC_KV_STR(base, kv_events_backend_id, "", "backend_id of the events: this cache's identity " \
		  "(required with --enable_kv_events)"),                                        \
	MC_KV_STR(base, kv_events_tenant_id, "default", "tenant_id stamped on events outside "       \
		  "multi-tenant mode (with it: each object's tenant)"),                         \
	MC_KV_STR(base, kv_events_additional_salt, "", "additional_salt stamped on every event "     \
		  "(empty: nil)"),                                                              \
	MC_KV_STR(base, kv_events_lora_name, "", "lora_name stamped on every event (empty: nil)"),  \
	{ "kv_events_block_size", NULL, NULL, MC_OPT_INT, MC_KV(base, kv_events_block_size), "0",\
	  0, 4294967295.0, "block_size stamped on every event (0: nil)" },                     \
	{ "kv_events_dp_rank", NULL, NULL, MC_OPT_INT, MC_KV(base, kv_events_dp_rank), "0", 0,   \
	  4294967295.0, "dp_rank stamped on every event and batch" },                          \
	{ "kv_events_emit_legacy_compat", NULL, NULL, MC_OPT_BOOL,                              \
	  MC_KV(base, kv_events_emit_legacy_compat), "true", 0, -1,                             \
	  "also emit vLLM/SGLang's field names (type, block_hashes, parent_block_hash)" },      \
	{ "kv_events_emit_object_key", NULL, NULL, MC_OPT_BOOL,                                 \
	  MC_KV(base, kv_events_emit_object_key), "true", 0, -1,                               \
	  "include the object key (events whose key is no u64 hash are dropped without it)" },  \
	{ "kv_events_queue_capacity", NULL, NULL, MC_OPT_INT,                                   \
	  MC_KV(base, kv_events_queue_capacity), "65536", 0, 4294967295.0,                      \
	  "events waiting for the publisher; past it the oldest are dropped, leaving a gap in "\
	  "the sequence numbers (0: unbounded)" }

/* Upstream's dynamic MEMORY replication of hot keys (cfg.dynrep, dyn_replication.c). */
struct mc_dynrep_config {
	char *dynamic_replication_mode;		/* off | observe | enforce */
	int64_t dynamic_replication_heat_window_seconds;
	double dynamic_replication_admission_qps_threshold;
	int64_t dynamic_replication_max_memory_replicas;
};

#define MC_DR(base, f) ((base) + offsetof(struct mc_dynrep_config, f))
#define MC_DYNREP_OPTS(base)                                                                   \
	{ "dynamic_replication_mode", NULL, NULL, MC_OPT_CHOICE,                                \
	  MC_DR(base, dynamic_replication_mode), "off|observe|enforce", 0, -1,                  \
	  "hot keys: off; observe (count them, master_dynamic_replication_*); enforce (give "   \
	  "each one more MEMORY replica through a copy task)" },                               \
	{ "dynamic_replication_heat_window_seconds", NULL, NULL, MC_OPT_INT,                    \
	  MC_DR(base, dynamic_replication_heat_window_seconds), "10", 1, 86400,                 \
	  "window over which reads of a key are counted" },                                    \
	{ "dynamic_replication_admission_qps_threshold", NULL, NULL, MC_OPT_DOUBLE,             \
	  MC_DR(base, dynamic_replication_admission_qps_threshold), "0.8", 0.001, 1000000,      \
	  "reads per second of a key, over the window, that make it hot" },                    \
	{ "dynamic_replication_max_memory_replicas", NULL, NULL, MC_OPT_INT,                    \
	  MC_DR(base, dynamic_replication_max_memory_replicas), "2", 1, 64,                     \
	  "MEMORY replicas a hot key is given at most" }

/* Refuse what this build cannot do (with the missing piece named).  0, or -1 with one line in
 * err. */
int mc_master_flags_check(const struct mc_master_flags *f, char *err, size_t n);

#endif

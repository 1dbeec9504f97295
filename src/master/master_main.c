/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_master: options, configuration, start-up, the event loop and shutdown.
 * Everything else lives in the modules named in master.h.  mc_master_main is the daemon
 * (master_cli.c's main calls it); mc_master_start / mc_master_stop put a master on any loop,
 * which is how a store client runs one in its own process (src/store/store_embedded.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>

#include "common/auth.h"
#include "common/log.h"
#include "master/ha.h"
#include "master/master.h"
#include "master/admin_http.h"
#include "master/drain.h"
#include "master/dyn_replication.h"
#include "master/kv_events.h"
#include "master/tasks.h"
#include "master/tenants.h"
#include "reactor/options.h"
#include "http/metadata_server.h"
#include "reactor/sd_notify.h"
#include "reactor/tls.h"

#define O(f) offsetof(struct mc_master_config, f)
static const struct mc_opt mc_master_opts[] = {
	{ "config_path", NULL, NULL, MC_OPT_PATH, O(config_path), "", 0, -1,
	  "configuration file, JSON or (.yaml, .yml) YAML, with the same keys as the flags "
	  "(client_ttl is client_live_ttl_sec)" },
	{ "rpc_port", NULL, NULL, MC_OPT_INT, O(rpc_port), "0", 0, 65535,
	  "RPC listen port (0: use --port)" },
	{ "port", NULL, NULL, MC_OPT_INT, O(port), "50051", 1, 65535,
	  "RPC listen port (deprecated alias of --rpc_port)" },
	{ "rpc_address", NULL, NULL, MC_OPT_HOST, O(rpc_address), "0.0.0.0", 0, -1,
	  "RPC bind address" },
	{ "rpc_interface", NULL, NULL, MC_OPT_TOKEN, O(rpc_interface), "", 0, -1,
	  "network interface whose IPv4 address overrides --rpc_address" },
	{ "rpc_thread_num", NULL, NULL, MC_OPT_INT, O(rpc_thread_num), "0", 0, 1024,
	  "accepted for compatibility; the master is a single-threaded reactor" },
	{ "max_threads", NULL, NULL, MC_OPT_INT, O(max_threads), "16", 0, 1024,
	  "accepted for compatibility (deprecated alias of --rpc_thread_num)" },
	{ "handler_worker_thread_num", NULL, NULL, MC_OPT_INT, O(handler_worker_thread_num), "0",
	  0, 1024, "accepted for compatibility; one reactor thread serves every request, and "
	  "clients ping on a connection of their own (see mooncake_master(8))" },
	{ "rpc_conn_timeout_seconds", NULL, NULL, MC_OPT_INT, O(rpc_conn_timeout_seconds), "0", 0,
	  86400, "close RPC connections idle this long (0: never)" },
	{ "rpc_enable_tcp_no_delay", NULL, NULL, MC_OPT_BOOL, O(rpc_enable_tcp_no_delay), "true",
	  0, -1, "set TCP_NODELAY on RPC connections" },
	{ "rpc_max_frame_bytes", NULL, NULL, MC_OPT_SIZE, O(rpc_max_frame_bytes), "64MB", 1024,
	  4294967295.0, "largest RPC frame body accepted; larger frames close the connection" },
	{ "max_connections", NULL, NULL, MC_OPT_INT, O(max_connections), "4096", 1, 1000000,
	  "RPC connections accepted at once" },
	{ "max_connections_per_peer", NULL, NULL, MC_OPT_INT, O(max_connections_per_peer), "256",
	  1, 1000000, "RPC connections accepted at once from one IP address" },
	{ "rpc_request_timeout_ms", NULL, NULL, MC_OPT_INT, O(rpc_request_timeout_ms), "10000", 0,
	  86400000,
	  "an RPC connection must send its first request, and each request once begun, within "
	  "this time or be closed (slow clients cannot hold connections; 0: no limit)" },
	{ "rpc_max_conn_output_bytes", NULL, NULL, MC_OPT_SIZE, O(rpc_max_conn_output_bytes),
	  "256MB", 65536, 1099511627776.0,
	  "replies queued for one connection that does not read them before it is closed" },
	{ "enable_metric_reporting", NULL, NULL, MC_OPT_BOOL, O(enable_metric_reporting), "true", 0,
	  -1, "log a metrics summary every 10 seconds" },
	{ "metrics_port", NULL, NULL, MC_OPT_INT, O(metrics_port), "9003", 0, 65535,
	  "admin and metrics HTTP port" },
	{ "metrics_host", NULL, NULL, MC_OPT_HOST, O(metrics_host), "127.0.0.1", 0, -1,
	  "admin and metrics HTTP bind address (0.0.0.0: every interface)" },
	{ "memory_allocator", NULL, NULL, MC_OPT_STRING, O(memory_allocator), "offset", 0, -1,
	  "segment allocator: offset (cachelib is not supported)" },
	{ "allocation_strategy", NULL, NULL, MC_OPT_STRING, O(allocation_strategy), "random", 0, -1,
	  "replica placement: random" },
	{ "default_kv_lease_ttl", NULL, NULL, MC_OPT_DURATION, O(default_kv_lease_ttl), "10000", 0,
	  86400000, "read lease granted by ExistKey/GetReplicaList (ms, or N with ms|s|m|h)" },
	{ "default_kv_soft_pin_ttl", NULL, NULL, MC_OPT_DURATION, O(default_kv_soft_pin_ttl),
	  "1800000", 0, -1, "soft-pin lifetime when none is given" },
	{ "max_kv_soft_pin_ttl", NULL, NULL, MC_OPT_DURATION, O(max_kv_soft_pin_ttl), "604800000",
	  0, -1, "largest soft-pin lifetime a request may ask for (ms; 7 days)" },
	{ "allow_evict_soft_pinned_objects", NULL, NULL, MC_OPT_BOOL,
	  O(allow_evict_soft_pinned_objects), "true", 0, -1,
	  "evict soft-pinned objects as a last resort" },
	{ "eviction_ratio", NULL, NULL, MC_OPT_DOUBLE, O(eviction_ratio), "0.05", 0, 1,
	  "fraction of objects evicted per round" },
	{ "eviction_high_watermark_ratio", NULL, NULL, MC_OPT_DOUBLE,
	  O(eviction_high_watermark_ratio), "0.90", 0, 1, "usage ratio that triggers eviction" },
	{ "eviction_policy", NULL, NULL, MC_OPT_CHOICE, O(eviction_policy), "prefix|lru", 0, -1,
	  "eviction order: prefix (blocks never reused and chain tails first), or lru" },
	{ "put_start_discard_timeout_sec", NULL, NULL, MC_OPT_INT,
	  O(put_start_discard_timeout_sec), "30", 0, 86400,
	  "a PutStart without PutEnd may be preempted after this many seconds" },
	{ "put_start_release_timeout_sec", NULL, NULL, MC_OPT_INT,
	  O(put_start_release_timeout_sec), "600", 0, 864000,
	  "space of a preempted PutStart is freed this long after it started" },
	{ "client_active_ttl_sec", "client_ttl", "client_live_ttl_sec", MC_OPT_INT, O(client_ttl),
	  "10", 1, 86400,
	  "seconds a client stays Active after its last ping (--client_ttl: deprecated alias)" },
	{ "client_suspicion_ttl_sec", NULL, NULL, MC_OPT_INT, O(client_suspicion_ttl_sec), "20", 0,
	  86400, "seconds a Suspected client may recover before it goes Offline" },
	{ "dormant_segment_ttl_sec", NULL, NULL, MC_OPT_INT, O(dormant_segment_ttl_sec), "600", 0,
	  31536000, "seconds an Offline client's segments keep their objects for the same process "
	  "to re-mount (0: drop them at once)" },
	{ "unhealthy_segment_backoff_sec", NULL, NULL, MC_OPT_INT,
	  O(unhealthy_segment_backoff_sec), "5", 1, 3600,
	  "no placements on a segment this long after a reported transfer failure" },
	{ "unhealthy_segment_max_backoff_sec", NULL, NULL, MC_OPT_INT,
	  O(unhealthy_segment_max_backoff_sec), "60", 1, 86400,
	  "cap of that backoff, which doubles while failures recur" },
	{ "remount_grace_period_sec", NULL, NULL, MC_OPT_INT, O(remount_grace_period_sec), "30", 1,
	  86400, "after a restart from --persist_path, how long clients have to re-mount" },
	{ "enable_http_metadata_server", NULL, NULL, MC_OPT_BOOL, O(enable_http_metadata_server),
	  "false", 0, -1, "serve the transfer-engine HTTP metadata service on this loop" },
	{ "http_metadata_server_port", NULL, NULL, MC_OPT_INT, O(http_metadata_server_port), "8080",
	  1, 65535, "HTTP metadata service port" },
	{ "http_metadata_server_host", NULL, NULL, MC_OPT_HOST, O(http_metadata_server_host),
	  "0.0.0.0", 0, -1, "HTTP metadata service bind address" },
	{ "enable_metadata_cleanup_on_timeout", NULL, NULL, MC_OPT_BOOL,
	  O(enable_metadata_cleanup_on_timeout), "false", 0, -1,
	  "delete a dead client's metadata entries" },
	{ "cluster_id", NULL, NULL, MC_OPT_TOKEN, O(cluster_id), "mooncake_cluster", 0, -1,
	  "cluster namespace" },
	{ "root_fs_dir", NULL, NULL, MC_OPT_PATH, O(root_fs_dir), "", 0, -1,
	  "shared file-system directory for DISK replicas" },
	{ "enable_disk_eviction", NULL, NULL, MC_OPT_BOOL, O(enable_disk_eviction), "true", 0, -1,
	  "clients delete their oldest DISK files once the directory passes its quota" },
	{ "quota_bytes", NULL, NULL, MC_OPT_SIZE, O(quota_bytes), "0", 0, -1,
	  "bytes the DISK files may take (0: 90% of the file system under --root_fs_dir)" },
	{ "enable_offload", NULL, NULL, MC_OPT_BOOL, O(enable_offload), "false", 0, -1,
	  "copy completed objects to the SSD of the client owning their memory (LOCAL_DISK)" },
	{ "offload_on_evict", NULL, NULL, MC_OPT_BOOL, O(offload_on_evict), "false", 0, -1,
	  "demote eviction victims to SSD, freeing their memory once the copy is acknowledged; "
	  "with --enable_offload, completed objects are then not copied up front" },
	{ "offloading_queue_limit", NULL, NULL, MC_OPT_INT, O(offloading_queue_limit), "50000", 1,
	  100000000, "tasks queued per SSD area" },
	{ "offload_task_timeout_sec", NULL, NULL, MC_OPT_INT, O(offload_task_timeout_sec), "30", 1,
	  86400, "an offload or promotion not answered this long counts as failed" },
	{ "promotion_on_hit", NULL, NULL, MC_OPT_BOOL, O(promotion_on_hit), "false", 0, -1,
	  "bring objects read from SSD back into memory" },
	{ "promotion_admission_threshold", NULL, NULL, MC_OPT_INT,
	  O(promotion_admission_threshold), "2", 1, 255,
	  "SSD reads of an object before it is promoted" },
	{ "enable_ha", NULL, NULL, MC_OPT_BOOL, O(enable_ha), "false", 0, -1,
	  "several masters, one leader elected through --ha_backend_type (see mooncake_master(8))" },
	{ "ha_backend_type", NULL, NULL, MC_OPT_CHOICE, O(ha_backend_type), "etcd|redis|k8s", 0,
	  -1, "election backend: etcd, or redis (election only, no replicated log)" },
	{ "ha_backend_connstring", NULL, NULL, MC_OPT_STRING, O(ha_backend_connstring), "", 0, -1,
	  "backend endpoints: h1:2379;h2:2379 for etcd, host:port for redis" },
	{ "etcd_endpoints", NULL, NULL, MC_OPT_STRING, O(etcd_endpoints), "", 0, -1,
	  "etcd endpoints, ;-separated (legacy: --ha_backend_connstring wins)" },
	{ "ha_leader_lease_ttl_sec", NULL, NULL, MC_OPT_INT, O(ha_leader_lease_ttl_sec), "5", 2, 60,
	  "leadership lease TTL; a leader that cannot renew it stops answering before it ends" },
	{ "enable_oplog", NULL, NULL, MC_OPT_BOOL, O(enable_oplog), "false", 0, -1,
	  "replicate every change through etcd before acknowledging it; standbys follow" },
	{ "oplog_poll_interval_ms", NULL, NULL, MC_OPT_INT, O(oplog_poll_interval_ms), "1000", 10,
	  60000, "standbys read the leader view and the log this often besides watching them" },
	{ "oplog_batch_max_entries", NULL, NULL, MC_OPT_INT, O(oplog_batch_max_entries), "1024", 1,
	  1000000, "changes in one batch of the replicated log at most; more go to the next "
	  "batch of the same round" },
	{ "pod_name", NULL, NULL, MC_OPT_TOKEN, O(pod_name), "", 0, -1,
	  "Kubernetes pod name for label-based routing (upstream: default $POD_NAME); used only "
	  "with --ha_backend_type=k8s, which this build does not support" },
	{ "pod_namespace", NULL, NULL, MC_OPT_TOKEN, O(pod_namespace), "", 0, -1,
	  "Kubernetes pod namespace for label-based routing (upstream: default $POD_NAMESPACE); "
	  "used only with --ha_backend_type=k8s" },
	{ "batch_oplog_retry_timeout_sec", NULL, NULL, MC_OPT_INT, O(batch_oplog_retry_timeout_sec),
	  "180", 1, 86400, "a batch of the log etcd did not answer is sent again for this long, "
	  "while the leader's lease lasts (the lease bounds it first)" },
	{ "enable_oplog_snapshot", NULL, NULL, MC_OPT_BOOL, O(enable_oplog_snapshot), "false", 0,
	  -1, "write snapshots of the replicated table so the log in etcd can be compacted" },
	{ "snapshot_interval_seconds", NULL, NULL, MC_OPT_INT, O(snapshot_interval_seconds), "600",
	  1, 604800, "seconds between snapshots" },
	{ "snapshot_chunk_object_count", NULL, NULL, MC_OPT_INT, O(snapshot_chunk_object_count),
	  "1000000", 1, 1000000000, "objects per snapshot chunk file" },
	{ "snapshot_object_store_type", "snapshot_payload_store_type", NULL, MC_OPT_TOKEN,
	  O(snapshot_object_store_type), "local", 0, -1,
	  "where snapshots go: local (the directory in MOONCAKE_SNAPSHOT_LOCAL_PATH); empty, "
	  "upstream's default, means local" },
	{ "snapshot_payload_backend_type", NULL, NULL, MC_OPT_TOKEN,
	  O(snapshot_payload_backend_type), "", 0, -1,
	  "deprecated alias of --snapshot_object_store_type" },
	{ "enable_snapshot", NULL, NULL, MC_OPT_BOOL, O(enable_snapshot), "false", 0, -1,
	  "deprecated (removed in 0.3.14): --enable_oplog_snapshot" },
	{ "enable_snapshot_restore", NULL, NULL, MC_OPT_BOOL, O(enable_snapshot_restore), "false",
	  0, -1, "deprecated (removed in 0.3.14): restoring is automatic" },
	{ "snapshot_retention_count", NULL, NULL, MC_OPT_INT, O(snapshot_retention_count), "2", 1,
	  1000, "deprecated (removed in 0.3.14): snapshots kept in the local store" },
	{ "snapshot_backup_dir", NULL, NULL, MC_OPT_PATH, O(snapshot_backup_dir), "", 0, -1,
	  "deprecated (removed in 0.3.14): MOONCAKE_SNAPSHOT_LOCAL_PATH" },
	{ "snapshot_child_timeout_seconds", NULL, NULL, MC_OPT_INT,
	  O(snapshot_child_timeout_seconds), "300", 1, 86400,
	  "deprecated (removed in 0.3.14): no effect (no child process)" },
	{ "snapshot_catalog_store_type", "snapshot_catalog_backend_type", NULL, MC_OPT_TOKEN,
	  O(snapshot_catalog_store_type), "", 0, -1,
	  "deprecated (removed in 0.3.14): no effect (the catalog is etcd)" },
	{ "snapshot_catalog_store_connstring", "snapshot_catalog_backend_connstring", NULL,
	  MC_OPT_TOKEN, O(snapshot_catalog_store_connstring), "", 0, -1,
	  "deprecated (removed in 0.3.14): no effect (the catalog is etcd)" },
	{ "persist_path", NULL, NULL, MC_OPT_PATH, O(persist_path), "", 0, -1,
	  "SQLite file for crash recovery (empty: no persistence)" },
	{ "persist_on_error", NULL, NULL, MC_OPT_CHOICE, O(persist_on_error), "refuse|continue",
	  0, -1,
	  "when --persist_path cannot be written: refuse changes (PERSISTENT_FAIL) or continue "
	  "acknowledging them (they may be lost)" },
	{ "cluster_secret_file", NULL, NULL, MC_OPT_PATH, O(cluster_secret_file), "", 0, -1,
	  "file holding the cluster secret: every connection must prove it knows it (empty: an "
	  "open cluster)" },
	{ "auth_http_reads", NULL, NULL, MC_OPT_BOOL, O(auth_http_reads), "false", 0, -1,
	  "with a cluster secret, admin HTTP reads (/metrics, /health, queries) need it too" },
	{ "tls_cert_file", NULL, NULL, MC_OPT_PATH, O(tls_cert_file), "", 0, -1,
	  "PEM certificate (chain): with --tls_key_file, RPC, admin HTTP and the embedded "
	  "metadata service speak TLS" },
	{ "tls_key_file", NULL, NULL, MC_OPT_PATH, O(tls_key_file), "", 0, -1,
	  "PEM private key of --tls_cert_file" },
	{ "tls_ca_file", NULL, NULL, MC_OPT_PATH, O(tls_ca_file), "", 0, -1,
	  "PEM CA certificates: clients must present a certificate they sign (mutual TLS)" },
	{ "log_level", NULL, NULL, MC_OPT_CHOICE, O(log_level), "info|error|warn|debug", 0, -1,
	  "error, warn, info or debug" },
	{ "v", NULL, NULL, MC_OPT_BOOL, O(verbose), "false", 0, 9,
	  "debug logging (-v); glog's --v=N: any N > 0 turns it on" },
	{ "check_config", NULL, NULL, MC_OPT_BOOL, O(check_config), "false", 0, -1,
	  "validate flags and configuration, then exit (0 valid, 2 invalid)" },
	MC_MASTER_FLAGS_OPTS(O(up)),
	MC_TASK_OPTS(O(tasks)),
	MC_TENANT_OPTS(O(tenants)),
	MC_KV_OPTS(O(kv)),
	MC_DYNREP_OPTS(O(dynrep)),
	MC_OPT_END,
};

/* The environment the master reads (metadata clean-up of dead clients). */
static const struct mc_opt mc_master_env[] = {
	{ "MOONCAKE_TE_META_DATA_SERVER", NULL, NULL, MC_OPT_METADATA, 0, NULL, 0, -1, "" },
	{ "MC_METADATA_CLUSTER_ID", NULL, NULL, MC_OPT_TOKEN, 0, NULL, 0, -1, "" },
	MC_OPT_END,
};

static int mc_master_validate(struct mc_master_config *cfg, char *err, size_t n)
{
	if (strcmp(cfg->memory_allocator, "offset")) {
		snprintf(err, n, "--memory_allocator=%s is not supported (use offset)",
			 cfg->memory_allocator);
		return -1;
	}
	if (strcmp(cfg->allocation_strategy, "random")) {
		snprintf(err, n, "--allocation_strategy=%s is not supported (use random)",
			 cfg->allocation_strategy);
		return -1;
	}
	if (cfg->tenants.enable_multi_tenants &&
	    !strcmp(cfg->tenants.tenant_quota_connector_type, "etcd")) {
		char key[200], why[300];

		if (!cfg->tenants.tenant_quota_connector_uri[0]) {
			snprintf(err, n, "--tenant_quota_connector_type=etcd needs the etcd endpoints "
				 "in --tenant_quota_connector_uri (e.g. 127.0.0.1:2379)");
			return -1;
		}
		if (mc_tenant_etcd_key(cfg->cluster_id, key, sizeof(key), why, sizeof(why))) {
			snprintf(err, n, "--tenant_quota_connector_type=etcd: %s", why);
			return -1;
		}
	}
	if (cfg->kv.kv_events_bind_endpoint[0] &&
	    strncmp(cfg->kv.kv_events_bind_endpoint, "tcp://", 6) &&
	    strncmp(cfg->kv.kv_events_bind_endpoint, "ipc://", 6) &&
	    strncmp(cfg->kv.kv_events_bind_endpoint, "inproc://", 9)) {
		snprintf(err, n, "invalid value '%s' for --kv_events_bind_endpoint (expected a "
			 "ZeroMQ endpoint: tcp://host:port, ipc://path)", cfg->kv.kv_events_bind_endpoint);
		return -1;
	}
#ifndef HAVE_ZMQ
	if (cfg->kv.enable_kv_events) {
		snprintf(err, n, "--enable_kv_events: this build has no ZeroMQ (configure found no "
			 "libzmq; install libzmq3-dev and rebuild)");
		return -1;
	}
#endif
	if (cfg->kv.enable_kv_events &&
	    (!cfg->kv.kv_events_bind_endpoint[0] || !cfg->kv.kv_events_backend_id[0])) {
		snprintf(err, n, "--enable_kv_events needs --kv_events_bind_endpoint (e.g. "
			 "tcp://0.0.0.0:5557) and --kv_events_backend_id");
		return -1;
	}
	if (cfg->cluster_secret_file[0] || cfg->enable_http_metadata_server) {
		struct mc_auth *a = NULL;
		char why[400];
		int rc = 0;

		if (mc_auth_load(cfg->cluster_secret_file, &a, why, sizeof(why)) != 0) {
			snprintf(err, n, "invalid value '%s' for --cluster_secret_file: %s",
				 cfg->cluster_secret_file, why);
			return -1;
		}
		if (cfg->enable_http_metadata_server) {
			/* The metadata service's token and bind rule (MC_METADATA_*), checked up
			 * front; a cluster secret guards it as a token does. */
			struct mc_meta_server_opts mo = { .auth = a };

			rc = mc_meta_server_opts_env(&mo, cfg->http_metadata_server_host, err, n);
		}
		mc_auth_unref(a);
		if (rc)
			return -1;
	}
	if (mc_opts_check_readable("tls_cert_file", cfg->tls_cert_file, err, n) ||
	    mc_opts_check_readable("tls_key_file", cfg->tls_key_file, err, n) ||
	    mc_opts_check_readable("tls_ca_file", cfg->tls_ca_file, err, n))
		return -1;
	if (cfg->tls_cert_file[0] || cfg->tls_key_file[0] || cfg->tls_ca_file[0]) {
		struct mc_tls *t;
		char why[400];

		if (mc_tls_server_new(cfg->tls_cert_file, cfg->tls_key_file, cfg->tls_ca_file, &t,
				      why, sizeof(why)) != 0) {
			snprintf(err, n, "invalid value '%s' for --%s: %s",
				 cfg->tls_cert_file[0] ? cfg->tls_cert_file : cfg->tls_key_file,
				 cfg->tls_cert_file[0] ? "tls_cert_file" : "tls_key_file", why);
			return -1;
		}
		mc_tls_free(t);
	}
	if (cfg->rpc_interface[0]) {
		struct ifaddrs *ifs, *i;
		char ip[INET_ADDRSTRLEN] = "";

		if (getifaddrs(&ifs) == 0) {
			for (i = ifs; i; i = i->ifa_next)
				if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
				    !strcmp(i->ifa_name, cfg->rpc_interface)) {
					inet_ntop(AF_INET,
						  &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip,
						  sizeof(ip));
					break;
				}
			freeifaddrs(ifs);
		}
		if (!ip[0]) {
			snprintf(err, n, "--rpc_interface=%s has no IPv4 address", cfg->rpc_interface);
			return -1;
		}
		free(cfg->rpc_address);
		cfg->rpc_address = strdup(ip);
	}
	return mc_ha_validate(cfg, err, n);
}

static int mc_master_configure(struct mc_master *m, int argc, char **argv)
{
	struct mc_opts_state st;
	char err[512];
	int next, rc = -1;

	if (mc_opts_defaults(mc_master_opts, &m->cfg) || mc_opts_state_init(&st, mc_master_opts))
		return -1;
	if (mc_opts_parse_argv(mc_master_opts, &m->cfg, argc, argv, &st, &next, err, sizeof(err)))
		goto out;
	if (next != argc) {
		snprintf(err, sizeof(err), "unexpected argument '%s'", argv[next]);
		goto out;
	}
	if (mc_opts_check_env(mc_master_env, err, sizeof(err)))
		goto out;
	if (m->cfg.config_path[0] && access(m->cfg.config_path, R_OK)) {
		snprintf(err, sizeof(err), "invalid value '%s' for --config_path: %s",
			 m->cfg.config_path, strerror(errno));
		goto out;
	}
	if (m->cfg.config_path[0] &&
	    mc_opts_parse_config_file(mc_master_opts, &m->cfg, m->cfg.config_path, &st, 1, err,
				      sizeof(err)))
		goto out;
	if (mc_master_validate(&m->cfg, err, sizeof(err)) ||
	    mc_master_flags_check(&m->cfg.up, err, sizeof(err)))
		goto out;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "mooncake_master: %s\n", err);
	mc_opts_state_fini(&st);
	return rc;
}

static int mc_master_log_level(const struct mc_master_config *cfg)
{
	return cfg->verbose ? MC_LOG_DEBUG
	       : !strcmp(cfg->log_level, "error") ? MC_LOG_ERR
	       : !strcmp(cfg->log_level, "warn")  ? MC_LOG_WARN
	       : !strcmp(cfg->log_level, "debug") ? MC_LOG_DEBUG
						  : MC_LOG_INFO;
}

/* SIGHUP: read the flags and the configuration file again and apply what can change while
 * running (leases, pins, eviction, timeouts, liveness, logging).  Listening addresses, ports and
 * the database stay as they are until a restart. */
static void mc_master_reload(struct mc_master *m)
{
	struct mc_master fresh;
	struct mc_master_config *c = &fresh.cfg, *o = &m->cfg;

	mc_sd_notify("RELOADING=1");
	memset(&fresh, 0, sizeof(fresh));
	if (mc_master_configure(&fresh, m->argc, m->argv)) {
		mc_log_err("SIGHUP: configuration invalid, keeping the running one");
		mc_opts_free(mc_master_opts, c);
		mc_sd_notify("READY=1");
		return;
	}
	o->default_kv_lease_ttl = c->default_kv_lease_ttl;
	o->default_kv_soft_pin_ttl = c->default_kv_soft_pin_ttl;
	o->max_kv_soft_pin_ttl = c->max_kv_soft_pin_ttl;
	o->allow_evict_soft_pinned_objects = c->allow_evict_soft_pinned_objects;
	o->eviction_ratio = c->eviction_ratio;
	o->eviction_high_watermark_ratio = c->eviction_high_watermark_ratio;
	o->put_start_discard_timeout_sec = c->put_start_discard_timeout_sec;
	o->put_start_release_timeout_sec = c->put_start_release_timeout_sec;
	o->client_ttl = c->client_ttl;
	o->client_suspicion_ttl_sec = c->client_suspicion_ttl_sec;
	o->dormant_segment_ttl_sec = c->dormant_segment_ttl_sec;
	o->unhealthy_segment_backoff_sec = c->unhealthy_segment_backoff_sec;
	o->unhealthy_segment_max_backoff_sec = c->unhealthy_segment_max_backoff_sec;
	o->enable_metric_reporting = c->enable_metric_reporting;
	o->enable_metadata_cleanup_on_timeout = c->enable_metadata_cleanup_on_timeout;
	o->rpc_conn_timeout_seconds = c->rpc_conn_timeout_seconds;
	o->max_connections = c->max_connections;
	o->max_connections_per_peer = c->max_connections_per_peer;
	o->rpc_request_timeout_ms = c->rpc_request_timeout_ms;
	o->rpc_max_conn_output_bytes = c->rpc_max_conn_output_bytes;
	o->verbose = c->verbose;
	free(o->log_level);
	o->log_level = c->log_level;
	c->log_level = NULL;
	mc_log_set_level(mc_master_log_level(o));
	mc_opts_free(mc_master_opts, c);
	mc_log_notice("SIGHUP: configuration reloaded (lease %lld ms, high watermark %.2f, "
		      "eviction ratio %.2f, client_active_ttl_sec %lld, log level %s)",
		      (long long)o->default_kv_lease_ttl, o->eviction_high_watermark_ratio,
		      o->eviction_ratio, (long long)o->client_ttl, o->log_level);
	mc_sd_notify("READY=1");
}

static void mc_master_on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct mc_master *m = arg;

	(void)what;
	if (sig == SIGHUP) {
		mc_master_reload(m);
		return;
	}
	mc_log_notice("signal %d: shutting down", (int)sig);
	mc_sd_notify("STOPPING=1");
	event_base_loopexit(m->base, NULL);
}

static void mc_master_on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master *m = arg;

	(void)fd;
	(void)what;
	if (m->load) {		/* housekeeping resumes once every object is loaded */
		mc_master_commit(m);
		return;
	}
	mc_master_release_discards(m, mc_master_now(m), 0);
	mc_master_check_clients(m);
	mc_tier_expire(m, mc_master_now(m));
	mc_tasks_tick(m);
	mc_drain_tick(m);
	mc_dynrep_tick(m);
	mc_tenants_recompute(m);
	mc_master_persist_tick(m);
	mc_master_commit(m);
	if (m->cfg.enable_metric_reporting && ++m->ticks % 10 == 0) {
		char line[2048];

		mc_master_summary(m, line, sizeof(line));
		mc_log_info("Master Metrics: %s", line);
	}
}

static void mc_master_on_evict(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master *m = arg;

	(void)fd;
	(void)what;
	/* While changes are refused no put needs the room: keep the objects readable.  With
	 * tenants each evicts its own objects at its own watermark, no one else's. */
	if (mc_master_persist_refusing(m) || m->load)
		;
	else if (mc_tenants_enabled(m))
		mc_tenants_evict_check(m);
	else
		mc_master_evict_check(m);
	mc_master_commit(m);
}

static void mc_master_on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master *m = arg;

	(void)fd;
	(void)what;
	/* A bounded step; come back after other events had their turn. */
	if (mc_master_reap(m, 4096))
		event_active(m->ev_reap, EV_TIMEOUT, 0);
	mc_master_commit(m);
}

static void mc_master_on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_rpc_server_flush(arg);
}

static void mc_master_usage(FILE *out)
{
	fprintf(out, "usage: mooncake_master [--flag=value ...]\n"
		     "The Mooncake store master: object table, allocation, leases.\n\nFlags:\n");
	mc_opts_help(mc_master_opts, out);
	fprintf(out, "  --help      print this and exit\n  --version   print the version and exit\n");
}

/* What the records table holds besides the object table: copy/move tasks, drain jobs,
 * tenants (after mc_master_recover). */
static int mc_master_recover_more(struct mc_master *m)
{
	return mc_tasks_recover(m) || mc_drain_recover(m) || mc_tenants_recover(m);
}

int mc_master_start(struct mc_master *m, struct event_base *base)
{
	struct timeval one_sec = { 1, 0 }, evict_tv = { 0, 50000 };

	m->base = base;
	m->rng = (uint64_t)mc_master_now(m) ^ ((uint64_t)getpid() << 32);
	mc_master_tables_init(m);
	mc_fs_init(m);
	mc_tasks_init(m);
	mc_drain_init(m);
	mc_dynrep_init(m);
	m->ev_reap = event_new(m->base, -1, 0, mc_master_on_reap, m);
	m->ev_flush = event_new(m->base, -1, 0, mc_master_on_flush, m);
	m->ev_evict = event_new(m->base, -1, EV_PERSIST, mc_master_on_evict, m);
	m->tick = event_new(m->base, -1, EV_PERSIST, mc_master_on_tick, m);
	if (mc_tenants_init(m))
		goto fail;
	mc_ha_deprecations(&m->cfg);
	/* With HA the table (and with it the tasks, drains and tenants) is loaded when this
	 * master becomes the leader. */
	m->recover_more = mc_master_recover_more;
	if (m->cfg.enable_ha ? mc_ha_init(m)
			     : mc_master_recover_in_background(m) ||
				       (m->load == NULL && mc_master_recover_more(m))) {
		mc_log_err("cannot %s %s", m->cfg.enable_ha ? "set up HA with" : "recover from",
			   m->cfg.enable_ha ? m->cfg.ha_backend_connstring : m->cfg.persist_path);
		goto fail;
	}
	if (mc_kv_events_init(m))	/* after the reload: reloaded objects were stored before */
		goto fail;
	m->admin_extra_routes = mc_admin_more_routes;
	m->admin_extra_metrics = mc_admin_more_metrics;
	{
		char err[512];

		if (mc_auth_load(m->cfg.cluster_secret_file, &m->auth, err, sizeof(err)) != 0) {
			mc_log_err("%s", err);
			goto fail;
		}
		if (m->cfg.tls_cert_file[0] &&
		    mc_tls_server_new(m->cfg.tls_cert_file, m->cfg.tls_key_file,
				      m->cfg.tls_ca_file, &m->tls, err, sizeof(err)) != 0) {
			mc_log_err("%s", err);
			goto fail;
		}
		if (m->tls)
			mc_log_notice("TLS on RPC, admin and metadata HTTP (%s)%s",
				      m->cfg.tls_cert_file,
				      m->cfg.tls_ca_file[0] ? ", client certificates required" : "");
		mc_auth_announce(m->auth, "can mount segments and remove every object");
	}
	if (mc_rpc_server_start(m) || mc_admin_http_start(m))
		goto fail;
	if (m->cfg.enable_http_metadata_server) {
		struct mc_meta_server_opts mo = { .auth = m->auth,
						  .auth_reads = m->cfg.auth_http_reads,
						  .tls = m->tls };
		char why[256];
		int err = 0;

		/* Upstream 0.3.14's limits, token and bind rule (MC_METADATA_*). */
		if (mc_meta_server_opts_env(&mo, m->cfg.http_metadata_server_host, why,
					    sizeof(why)) != 0) {
			mc_log_err("HTTP metadata service: %s", why);
			goto fail;
		}
		m->meta = mc_meta_server_new(m->base, m->cfg.http_metadata_server_host,
					     (uint16_t)m->cfg.http_metadata_server_port, &mo, &err);
		if (m->meta == NULL) {
			mc_log_err("cannot start the HTTP metadata service on %s:%lld: %s",
				   m->cfg.http_metadata_server_host,
				   (long long)m->cfg.http_metadata_server_port, strerror(-err));
			goto fail;
		}
		mc_log_notice("HTTP metadata service on %s:%lld", m->cfg.http_metadata_server_host,
			      (long long)m->cfg.http_metadata_server_port);
	}
	event_add(m->tick, &one_sec);
	event_add(m->ev_evict, &evict_tv);
	if (m->ha)
		mc_ha_start(m);
	return 0;
fail:
	mc_master_stop(m);
	return -1;
}

void mc_master_stop(struct mc_master *m)
{
	mc_ha_stop(m);		/* a leader hands its leadership back first */
	mc_rpc_server_stop(m);
	mc_master_load_stop(m);
	mc_meta_server_free(m->meta);
	m->meta = NULL;
	if (m->meta_conn)
		evhttp_connection_free(m->meta_conn);
	m->meta_conn = NULL;
	mc_admin_http_stop(m);
	mc_ha_free(m);
	mc_master_persist_close(m);
	event_free(m->tick);
	event_free(m->ev_evict);
	event_free(m->ev_flush);
	event_free(m->ev_reap);
	m->tick = m->ev_evict = m->ev_flush = m->ev_reap = NULL;
	mc_kv_events_fini(m);
	mc_drain_fini(m);
	mc_dynrep_fini(m);
	mc_tasks_fini(m);
	mc_tenants_fini(m);
	mc_master_tables_fini(m);
	mc_fs_fini(m);
	mc_auth_unref(m->auth);
	m->auth = NULL;
	mc_tls_free(m->tls);
	m->tls = NULL;
}

int mc_master_config_defaults(struct mc_master_config *cfg)
{
	return mc_opts_defaults(mc_master_opts, cfg);
}

void mc_master_config_free(struct mc_master_config *cfg)
{
	mc_opts_free(mc_master_opts, cfg);
}

int mc_master_main(int argc, char **argv)
{
	static struct mc_master master;
	struct mc_master *m = &master;
	int rc = 1;

	mc_log_set_ident("mooncake_master");
	mc_log_use_default_sink();
	if (mc_opts_wants(argc, argv, "help")) {
		mc_master_usage(stdout);
		return 0;
	}
	if (mc_opts_wants(argc, argv, "version")) {
		printf("mooncake_master %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (mc_master_configure(m, argc, argv)) {
		mc_opts_free(mc_master_opts, &m->cfg);
		return 2;
	}
	if (m->cfg.check_config) {
		printf("mooncake_master: configuration is valid\n");
		mc_opts_free(mc_master_opts, &m->cfg);
		return 0;
	}
	if (mc_log_opts_apply(&m->cfg.up.log, "mooncake_master", mc_master_log_level(&m->cfg)))
		goto out_cfg;
	m->argc = argc;
	m->argv = argv;
	if (m->cfg.rpc_thread_num)
		mc_log_notice("--rpc_thread_num ignored: the master is a single-threaded reactor");
	if (m->cfg.handler_worker_thread_num)
		mc_log_notice("--handler_worker_thread_num ignored: the master is a single-threaded "
			      "reactor");
	signal(SIGPIPE, SIG_IGN);
	m->base = event_base_new();
	if (m->base == NULL)
		goto out_cfg;
	if (mc_master_start(m, m->base))
		goto out_base;
	m->sig_term = evsignal_new(m->base, SIGTERM, mc_master_on_signal, m);
	m->sig_int = evsignal_new(m->base, SIGINT, mc_master_on_signal, m);
	m->sig_hup = evsignal_new(m->base, SIGHUP, mc_master_on_signal, m);
	event_add(m->sig_term, NULL);
	event_add(m->sig_int, NULL);
	event_add(m->sig_hup, NULL);
	mc_sd_notify("READY=1");
	event_base_dispatch(m->base);
	rc = m->load_failed ? 1 : 0;
	m->exiting = 1;
	event_free(m->sig_hup);
	event_free(m->sig_int);
	event_free(m->sig_term);
	mc_master_stop(m);
out_base:
	event_base_free(m->base);
out_cfg:
	mc_opts_free(mc_master_opts, &m->cfg);
	return rc;
}

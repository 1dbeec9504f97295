/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_H
#define MC_MASTER_H

/*
 * mooncake_master: the context struct and what the master's modules share.
 *
 * One struct mc_master per process, created by master_main.c and passed to every function and
 * reachable from every callback.  Everything runs on the one reactor thread.
 */
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "master/object_table.h"
#include "master/master_flags.h"
#include "master/metrics.h"
#include "proto/rpc.h"

struct mc_alloc;
struct mc_conn;
struct evhttp;
struct evhttp_connection;
struct mc_meta_server;
struct mc_master;
struct mc_replica;
struct mc_ha;
struct mc_rpc_hdr;
struct mc_wbuf;

struct mc_master_config {
	char *config_path;
	int64_t rpc_port;
	int64_t port;
	char *rpc_address;
	char *rpc_interface;
	int64_t rpc_thread_num;
	int64_t max_threads;
	int64_t handler_worker_thread_num;	/* accepted, unused: one reactor */
	int64_t rpc_conn_timeout_seconds;
	int rpc_enable_tcp_no_delay;
	int enable_metric_reporting;
	int64_t metrics_port;
	char *metrics_host;
	char *memory_allocator;
	char *allocation_strategy;
	int64_t default_kv_lease_ttl;		/* ms */
	int64_t default_kv_soft_pin_ttl;	/* ms */
	int64_t max_kv_soft_pin_ttl;		/* ms */
	int allow_evict_soft_pinned_objects;
	double eviction_ratio;
	double eviction_high_watermark_ratio;
	char *eviction_policy;			/* lru | prefix (object_table.h) */
	int64_t put_start_discard_timeout_sec;
	int64_t put_start_release_timeout_sec;
	int64_t client_ttl;			/* --client_active_ttl_sec (alias --client_ttl) */
	int64_t client_suspicion_ttl_sec;
	int64_t dormant_segment_ttl_sec;	/* 0: an Offline client's segments unmount at once */
	int64_t unhealthy_segment_backoff_sec;
	int64_t unhealthy_segment_max_backoff_sec;
	int64_t remount_grace_period_sec;
	int enable_http_metadata_server;
	int64_t http_metadata_server_port;
	char *http_metadata_server_host;
	int enable_metadata_cleanup_on_timeout;
	char *cluster_id;
	char *root_fs_dir;
	int enable_disk_eviction;
	uint64_t quota_bytes;
	int enable_ha;
	char *ha_backend_type;			/* etcd | redis | k8s */
	char *ha_backend_connstring;
	char *etcd_endpoints;			/* legacy alias of the connstring for etcd */
	int64_t ha_leader_lease_ttl_sec;
	int enable_oplog;
	int64_t oplog_poll_interval_ms;
	int64_t batch_oplog_retry_timeout_sec;
	int64_t oplog_batch_max_entries;	/* changes per batch of the log */
	char *pod_name, *pod_namespace;		/* k8s label routing (k8s HA only: accepted) */
	int enable_oplog_snapshot;
	int64_t snapshot_interval_seconds;
	int64_t snapshot_chunk_object_count;
	char *snapshot_object_store_type;
	char *snapshot_payload_backend_type;	/* deprecated alias */
	/* 0.3.13's snapshot flags, accepted with a deprecation line */
	int enable_snapshot;
	int enable_snapshot_restore;
	int64_t snapshot_retention_count;
	char *snapshot_backup_dir;
	int64_t snapshot_child_timeout_seconds;
	char *snapshot_catalog_store_type;
	char *snapshot_catalog_store_connstring;
	char *persist_path;
	char *persist_on_error;		/* refuse | continue */
	int enable_offload;
	int offload_on_evict;
	int64_t offloading_queue_limit;
	int promotion_on_hit;
	int64_t promotion_admission_threshold;
	int64_t offload_task_timeout_sec;
	uint64_t rpc_max_frame_bytes;
	int64_t max_connections;
	int64_t max_connections_per_peer;
	int64_t rpc_request_timeout_ms;		/* first request, and each request once begun */
	uint64_t rpc_max_conn_output_bytes;
	char *cluster_secret_file;
	int auth_http_reads;
	char *tls_cert_file;		/* with tls_key_file: TLS on RPC, admin and metadata HTTP */
	char *tls_key_file;
	char *tls_ca_file;		/* clients must present a certificate from this CA */
	char *log_level;
	int verbose;
	int check_config;
	struct mc_master_flags up;	/* upstream's further flags (master_flags.h) */
	struct mc_task_config tasks;	/* copy/move task limits (master_flags.h) */
	struct mc_tenant_config tenants;	/* multi-tenancy (master_flags.h) */
	struct mc_kv_config kv;		/* KV events (master_flags.h) */
	struct mc_dynrep_config dynrep;	/* dynamic replication (master_flags.h) */
};

enum mc_segment_status {
	MC_SEG_OK = 1,
	MC_SEG_UNMOUNTING = 5,
	/* Its client went Offline: its replicas are kept but unreadable, its ranges stay reserved
	 * and it is neither placed on nor counted as capacity, until it is mounted again with its
	 * token (restored) or dormant_until passes (dropped like an unmount).  liveness.c. */
	MC_SEG_DORMANT = 6,
};

/* Client liveness (liveness.c).  UNTRACKED: never mounted nor re-mounted (a writer seen only in
 * requests), or Offline long enough to be forgotten; such clients are in no gauge. */
enum mc_client_state {
	MC_CLIENT_UNTRACKED = 0,
	MC_CLIENT_ACTIVE = 1,		/* pinged within client_active_ttl_sec */
	MC_CLIENT_SUSPECTED = 2,	/* silent longer: keeps its objects, gets no placements */
	MC_CLIENT_OFFLINE = 3,		/* suspected longer than client_suspicion_ttl_sec */
};

/* Kinds of the master's records in --persist_path beyond segments and objects (persist.h). */
enum mc_record_kind {
	MC_RECORD_TASK = 1,		/* tasks.c */
	MC_RECORD_DRAIN_JOB = 2,	/* drain.c */
	MC_RECORD_TENANT = 3,		/* tenants.c */
};

struct mc_client {
	struct mc_uuid id;
	struct mc_client *hnext;	/* hash chain */
	struct mc_segment *segs;	/* its segments (list through seg->cnext) */
	int64_t last_ping;		/* monotonic ms */
	int64_t state_since;		/* monotonic ms of the last state change */
	int ok;				/* in good standing (after ReMountSegment) */
	uint8_t state;			/* enum mc_client_state */
	uint32_t refs;			/* objects naming it as writer + segments */
	uint32_t ref;			/* its index in mc_master.client_refs (o->writer) */
	uint32_t tasks_pending;		/* copy/move tasks waiting for it (tasks.c; Ping says) */
};

/* A disk tier's part in the tables' work, set by the tier on its segments (tier_ssd.c,
 * tier_fsdir.c), so that the tables call up into the tiers only through it. */
struct mc_disk_tier {
	/* A replica on the tier is forgotten by the master (not at its owner's request): the
	 * bytes must be deleted. */
	void (*drop)(struct mc_master *m, struct mc_replica *r);
	/* The segment is being unmounted (NULL: nothing to do); its replicas go in steps after. */
	void (*gone)(struct mc_master *m, struct mc_segment *seg);
};

struct mc_segment {
	struct mc_uuid id;
	char *name;
	char *endpoint;
	char *protocol;
	uint64_t base;
	uint64_t size;
	struct mc_alloc *alloc;
	struct mc_client *client;
	struct mc_segment *cnext;	/* in client's list */
	struct mc_segment *reap_next;	/* in the master's unmount queue */
	struct mc_replica *reps;	/* memory replicas on it */
	uint64_t nreps;
	int status;
	uint32_t index;			/* position in master->segs (memory segments only) */
	uint64_t evict_mark;		/* == master->evict_stamp: eviction may free bytes here */
	/* Proof of the memory behind the segment: random bytes the mounting process made and
	 * keeps only in memory, so another process cannot present them (all zero: none given). */
	uint8_t token[16];
	int has_token;
	int64_t dormant_until;		/* MC_SEG_DORMANT: monotonic ms when it is dropped */
	struct mc_segment *dnext;	/* in the master's dormant list */
	/* Transfer failures reported by clients (ReportTransferFailure): no placements before
	 * unhealthy_until; backoff_ms is the last backoff given (doubles while reports recur). */
	int64_t unhealthy_until;
	int64_t backoff_ms;
	uint64_t failure_reports;
	/* A client's SSD area (LOCAL_DISK replicas): no allocator, base 0; size is its capacity
	 * and used the bytes of its replicas.  Not in master->segs: never chosen for memory. */
	int is_disk;
	const struct mc_disk_tier *tier;	/* disk segments: their tier */
	uint64_t used;
	struct mc_tier_task *tasks, *tasks_tail;	/* queued for the next heartbeat */
	struct mc_tier_task *inflight;			/* handed out, waiting for NOTIFY */
	uint64_t ntasks;
	/* Offloads to this area failed offload_fail_streak times in a row: none is handed out
	 * before offload_retry_at (monotonic ms; exponential backoff, reset by a success). */
	uint32_t offload_fail_streak;
	int64_t offload_retry_at;
	uint8_t drain;			/* enum mc_drain_state (drain.c): no placements while set */
	uint8_t loading;		/* a reload's ranges on it are not all re-reserved: its
					   replicas marked pending are not readable yet */
	struct mc_lseg *lranges;	/* a reload's ranges on it, by offset (load_ranges.h) */
	/* Bytes of its memory the client process has populated, from Ping's tail (has_populated
	 * 0: not told, an older client). */
	uint64_t populated;
	int has_populated;
};

/* A task for a disk owner.  Tasks name their object by key and are checked again when handed
 * out and when answered, so an object removed meanwhile leaves no dangling pointer. */
struct mc_tier_task {
	struct mc_tier_task *next;
	int64_t deadline;		/* in flight: monotonic ms after which it counts as failed */
	uint64_t size;
	uint64_t addr;			/* DROP: the disk address to delete */
	uint64_t replica_id;		/* PROMOTE: the memory replica being filled */
	uint64_t gen;			/* OFFLOAD: the generation handed out */
	uint8_t kind;			/* enum mc_tier_task_kind */
	uint8_t demote;			/* counted in master->demote_pending */
	uint16_t key_len;
	char key[];
};

/* A PROCESSING replica taken from a preempted put, freed at release_at. */
struct mc_discard {
	struct mc_discard *next;
	struct mc_segment *seg;		/* NULL if the segment went away meanwhile */
	uint64_t off;
	uint64_t len;
	int64_t release_at;
};

/* ghosts.c: see there.  Bounds of what the master remembers of forgotten SSD objects. */
#define MC_GHOST_MAX (1u << 20)		/* ghosts (key, generation) of dead SSD areas' objects */
#define MC_TOMB_MAX (1u << 16)		/* removals remembered while adopting older objects */

struct mc_ghost;
struct mc_ghost_table {
	struct mc_ghost **b;		/* hash chains */
	size_t nb;
	struct mc_ghost *fifo;		/* sentinel of the age list */
	size_t nkeep, ntomb;
};

struct mc_auth;
struct mc_tls;
struct evbuffer;
/* The replicated log of HA (ha.c), reached through these hooks so that the core modules never
 * depend on it (ha.c depends on them); m->repl is NULL without HA. */
struct mc_repl_ops {
	/* Make what is pending durable, instead of the SQLite commit (mc_master_commit). */
	int (*commit)(struct mc_master *m);
	/* May this master answer requests now (the leader, its lease valid)? */
	int (*serving)(const struct mc_master *m);
	/* Answer a request this master may not serve: UNAVAILABLE_IN_CURRENT_MODE and the leader. */
	void (*refuse)(struct mc_master *m, const struct mc_rpc_hdr *h, struct mc_wbuf *out);
	/* The leader's view version, which Ping answers. */
	int64_t (*view_version)(const struct mc_master *m);
};

struct mc_master {
	struct mc_master_config cfg;
	struct event_base *base;
	struct mc_auth *auth;		/* the cluster secret (NULL: an open cluster) */
	struct mc_tls *tls;		/* the control plane's TLS (NULL: plain TCP) */
	struct evconnlistener *listener;
	struct evhttp *admin;
	void *admin_routes;		/* admin_http.c's routes (a list, freed at stop) */
	/* The routes the admin server serves, every area's, and the metrics it adds
	 * (admin_more.c's, set by the program: hooks keep the admin server below the modules they
	 * serve). */
	int (*admin_extra_routes)(struct mc_master *m);
	/* After the object table is loaded (at start, or when HA makes this master the leader):
	 * load what the records table holds besides (tasks, drain jobs, tenants).  0 or -1. */
	int (*recover_more)(struct mc_master *m);
	void (*admin_extra_metrics)(struct mc_master *m, struct evbuffer *b);
	struct mc_meta_server *meta;		/* embedded HTTP metadata service */
	struct evhttp_connection *meta_conn;	/* to a remote one, for cleanup */
	struct event *sig_term, *sig_int, *sig_hup, *tick;
	struct mc_conn *conns;		/* all live connections */
	uint64_t nconns;
	uint64_t next_conn_id;
	int64_t conn_refused_log_sec;	/* last "refusing connection" line (rate limit) */
	uint64_t conn_refusals_quiet;

	struct mc_object_table objects;
	struct mc_segment **segs;	/* dense array for random choice */
	uint32_t nsegs, capsegs;
	struct mc_client **client_buckets;
	uint32_t nclient_buckets;
	uint32_t nclients;
	struct mc_client **client_refs;	/* by mc_client.ref ([0] unused): clients are
					   never freed while the master runs */
	uint32_t nclient_refs, client_refs_cap;
	struct mc_discard *discards;
	struct mc_segment *reap_head;	/* segments being unmounted, drained in bounded steps */
	struct mc_segment *dormant;	/* MC_SEG_DORMANT segments (list through seg->dnext) */
	struct event *ev_reap, *ev_evict, *ev_flush;
	struct mc_conn *flush_head;	/* connections with replies waiting for the commit */
	struct mc_conn *flush_sealed;	/* HA: ... waiting for the round being written */
	int need_eviction;
	uint64_t ticks;
	int argc;
	char **argv;
	uint64_t next_replica_id;
	uint64_t total_capacity;
	uint64_t allocated;
	uint64_t disk_capacity;		/* mounted SSD areas */
	uint64_t disk_allocated;	/* bytes of LOCAL_DISK replicas */
	struct mc_segment *fs_seg;	/* --root_fs_dir: holder of the DISK replicas */
	uint64_t fs_quota;		/* bytes the DISK files may take (clients evict past it) */
	struct mc_fs_drop *fs_drops;	/* files of forgotten DISK replicas, for clients to delete */
	uint32_t nfs_drops, fs_drops_cap;
	uint64_t next_fs_drop_id;
	uint64_t demote_pending;	/* memory bytes eviction chose, freed once on SSD */
	int quiet_disk_release;		/* releasing at the owner's request: no DROP task */
	uint64_t next_gen;		/* generation of the next put (ghosts.c) */
	uint64_t gen_epoch;		/* generations below were issued before our state began */
	int adopt_open;			/* objects older than gen_epoch are still taken */
	int erase_keep;			/* objects erased now leave a ghost (their SSD went away) */
	struct mc_ghost_table ghosts;
	uint64_t rng;
	uint64_t evict_stamp;		/* marks the segments one put's eviction may free */
	int64_t space_warned_at;	/* last "insufficient space" log line (monotonic ms) */
	uint64_t evict_waiting;		/* objects the last eviction passed over for now only */

	struct mc_persist *persist;
	int persist_failed;		/* the last commit or checkpoint failed: retrying */
	int persist_continue;		/* --persist_on_error=continue */
	int exiting;			/* the process ends after mc_master_stop: the object table
					   is left to the exit rather than freed object by object */
	struct mc_master_load *load;	/* the objects are loading in the background
					   (master_load.c); NULL once loaded */
	struct event *ev_load_resume;	/* rpc_server.c's: connections whose request waited
					   for the load read on (activated by master_load.c) */
	int load_failed;		/* the background load failed: the process exits 1 */
	struct mc_master_load *load_left;	/* a stop during the load, at exit: its memory
						   is left to the exit (master_load.c) */
	uint64_t nparked;		/* requests waiting for the load, on all connections */
	struct mc_conn *look_conns;	/* connections with a request waiting for a lookup in
					   the file (rpc_server.c): the load's steps resume them */
	size_t parked_bytes;		/* and their frames' bytes (rpc_server.c) */
	int64_t persist_failed_since;	/* monotonic ms */
	int64_t persist_backoff_ms;
	struct event *ev_persist_retry;
	struct mc_tasks *tasks;			/* copy and move tasks (tasks.c) */
	struct mc_drain *drain;			/* drain jobs (drain.c) */
	struct mc_tenants *tenants;		/* tenants and their quotas (tenants.c) */
	struct mc_kv *kv;			/* KV event publisher (kv_events.c; NULL: off) */
	struct mc_dynrep *dynrep;		/* hot-key replication (dyn_replication.c) */
	uint16_t conn_tenant;		/* the tenant of the connection whose request is handled
					   (rpc_server.c sets it; SetTenant changes it) */
	uint16_t evict_tenant;		/* with evict_one_tenant: eviction takes only this
					   tenant's objects (tenants.c) */
	uint8_t evict_one_tenant;
	struct mc_metrics metrics;
	/* Monotonic ms, as every module reads it (mc_master_now): NULL is CLOCK_MONOTONIC; tests
	 * set their own clock, called with clock_arg. */
	int64_t (*clock_ms)(void *arg);
	void *clock_arg;
	struct mc_ha *ha;		/* --enable_ha (ha.c); NULL without */
	const struct mc_repl_ops *repl;	/* its hooks (NULL without) */
};

/* master_main.c: the daemon, and a master on a caller's loop */
/* mooncake_master's main: flags, configuration, signals, the loop.  The exit status. */
int mc_master_main(int argc, char **argv);
/* The option table's defaults into cfg (free with mc_master_config_free).  0 or -1. */
int mc_master_config_defaults(struct mc_master_config *cfg);
void mc_master_config_free(struct mc_master_config *cfg);
/* Start m (its cfg filled) on base: tables, recovery from --persist_path, the RPC listener,
 * admin HTTP and the embedded metadata service as configured, its timers.  0, or -1 (logged)
 * with everything undone.  Runs on base's thread, as everything of m afterwards. */
int mc_master_start(struct mc_master *m, struct event_base *base);
/* Close its listeners and connections and free its tables (the base stays). */
void mc_master_stop(struct mc_master *m);

/* master_clock.c: the master's clock (monotonic ms). */
int64_t mc_master_now(const struct mc_master *m);

/* segment_table.c (segment_mount.c: mounting) */
int mc_master_tables_init(struct mc_master *m);
void mc_master_tables_fini(struct mc_master *m);
struct mc_client *mc_client_find(struct mc_master *m, const struct mc_uuid *id);
struct mc_client *mc_client_get(struct mc_master *m, const struct mc_uuid *id);
struct mc_segment *mc_segment_find(struct mc_master *m, const struct mc_uuid *id);
/* segment_mount.c */
/* Segments lie in a client's user address space, which no mainstream 64-bit kernel makes larger
 * than 2^48 bytes for ordinary mappings (x86-64 47 bits, AArch64 48). */
#define MC_SEGMENT_VA_LIMIT (1ull << 48)
/* Whether client c may mount s: 0 (new, or the same segment again), or the code it is refused
 * with and a reason in why: INVALID_PARAMS for size 0, base 0, base + size wrapping or past
 * MC_SEGMENT_VA_LIMIT, an empty name, an endpoint that is not host:port, an id re-mounted with
 * other memory, or memory overlapping another of c's segments; SEGMENT_ALREADY_EXISTS for an id or
 * a name mounted by another client; UNAVAILABLE_IN_CURRENT_STATUS while the id is unmounting. */
int mc_segment_mount_check(struct mc_master *m, struct mc_client *c,
			   const struct mc_rpc_segment *s, char *why, size_t n);
/* Mount (or idempotently re-mount) segment s of client c after mc_segment_mount_check(): its
 * code on refusal, 0 when mounted.  token: 16 bytes the mounting process keeps in memory, or
 * NULL.  A dormant segment of the same id, client, name, base, size and token is restored with
 * the replicas it still holds. */
int mc_segment_mount(struct mc_master *m, struct mc_client *c, const struct mc_rpc_segment *s,
		     const uint8_t *token);
/* segment_table.c (segment_mount.c: mounting) */
/* Put a memory segment in the allocation array (master->segs) and the capacity, or take it
 * out: only segments there receive replicas. */
void mc_segs_add(struct mc_master *m, struct mc_segment *seg);
void mc_segs_remove(struct mc_master *m, struct mc_segment *seg);
/* Read Ping's optional tail from r (u32 n, then n x (uuid segment, u64 populated bytes)) and
 * note the figures on client c's segments (c may be NULL: read only).  A malformed tail sets
 * r->err. */
void mc_segment_note_populated(struct mc_client *c, struct mc_rbuf *r);
/* The segment (mounted, or dormant) with that id, or NULL. */
struct mc_segment *mc_segment_lookup(struct mc_master *m, const struct mc_uuid *id);
/* Make the segment (mounted or dormant) unreadable and unallocatable at once, then drop its
 * replicas in bounded steps from a deferred event (mc_master_reap), so a huge segment never
 * stalls the loop. */
void mc_segment_unmount(struct mc_master *m, struct mc_segment *seg, const char *why);
/* Drop up to budget replicas of segments being unmounted; returns 1 if work remains. */
int mc_master_reap(struct mc_master *m, uint32_t budget);
/* A replica a reader may use: complete, on a live segment, its range re-reserved. */
int mc_replica_readable(const struct mc_replica *r);
/* A memory replica of a reload whose range is not re-reserved yet (master_recover.c): it has
 * its segment and offset, and its segment is still loading. */
static inline int mc_replica_pending(const struct mc_replica *r)
{
	return r->pending && r->seg != NULL && r->seg->loading;
}
/* May new replicas go to seg now (mounted, its client Active, not marked unhealthy)? */
int mc_segment_placeable(const struct mc_master *m, const struct mc_segment *seg, int64_t now);
/* Should readers try seg first (its client Active and no transfer failures reported)? */
int mc_segment_preferred_for_read(const struct mc_master *m, const struct mc_segment *seg,
				  int64_t now);
/* Has o a memory replica, readable or dormant (so it belongs on the LRU list)? */
int mc_object_has_memory(struct mc_object *o);

/* eviction.c */
/* Evict least-recently-used objects until at least bytes are freed (best effort).  Objects
 * under a fetch lease, hard-pinned or still being written are never taken; objects leased only
 * by ExistKey probes and soft-pinned ones only when nothing else frees enough.  With
 * marked_only, only objects with memory on a segment whose evict_mark is the master's
 * evict_stamp are taken, and only those bytes count.  Returns bytes freed. */
uint64_t mc_master_evict(struct mc_master *m, uint64_t bytes, int marked_only);
/* Evict when usage passes eviction_high_watermark_ratio (called from a timer). */
void mc_master_evict_check(struct mc_master *m);

/* master_persist.c: SQLite persistence (no-ops without --persist_path) */
struct mc_persist;
/* Open the database (no-op without --persist_path); the tables are rebuilt by mc_master_recover. */
int mc_master_persist_open(struct mc_master *m);
/* After the reload: write the start time (a disk that cannot take writes is found now) and
 * commit. */
void mc_master_persist_started(struct mc_master *m, int64_t wall_ms);
/* The wall clock in ms, as the database records it. */
int64_t mc_persist_wall_ms(void);
void mc_master_persist_close(struct mc_master *m);
void mc_persist_object_changed(struct mc_master *m, struct mc_object *o);
void mc_persist_object_gone(struct mc_master *m, struct mc_object *o);
/* PutStart recorded o; fresh: no object of that key was there before (its start then goes to
 * the put log, see persist_putlog.c, and o carries MC_OBJX_LOGGED until its end is recorded). */
void mc_persist_object_started(struct mc_master *m, struct mc_object *o, int fresh);
/* The put log's rows older than this whose puts are still in flight go to the objects table. */
#define MC_PERSIST_LOG_RETIRE_MS 1000
/* From the tick: retire those rows. */
void mc_master_persist_tick(struct mc_master *m);
void mc_persist_segment_changed(struct mc_master *m, struct mc_segment *seg);
void mc_persist_segment_gone(struct mc_master *m, struct mc_segment *seg);
/* Commit what this loop iteration changed; replies wait for it.  Returns 0, or
 * MC_ERR_PERSISTENT_FAIL when the changes are not in the file (the commit failed now, or
 * persistence is failing and a retry timer owns the commits): the replies that depended on them
 * must then be errors.  With --persist_on_error=continue it returns 0 even then. */
int mc_master_commit(struct mc_master *m);
/* Persistence is failing and changes must be refused up front (MC_ERR_PERSISTENT_FAIL). */
int mc_master_persist_refusing(const struct mc_master *m);
/* HA (ha_log.c): move up to max bytes of the pending changes, with the counters they depend
 * on, to out for the replicated log; the number of changes taken. */
struct mc_wbuf;
size_t mc_master_persist_take(struct mc_master *m, struct mc_wbuf *out, size_t max,
			      size_t max_changes);

/* master_recover.c: open --persist_path (mc_master_persist_open) and rebuild segments, clients
 * and objects from it.  0, or the error that makes the start fail. */
int mc_master_recover(struct mc_master *m);
/* The same, with the objects loading in the background where the master allows it
 * (master_load.c; m->load set until done, m->recover_more called then).  The caller calls
 * m->recover_more itself when m->load is NULL on return. */
int mc_master_recover_in_background(struct mc_master *m);
/* master_load.c: while m->load, whether a request may run now (0) or must wait: for the
 * lookup of its keys (MC_LOAD_WAIT_KEYS: it may run before the end, once a step of the load
 * answers them; its connection is resumed through m->ev_load_resume) or for the end of the load
 * (MC_LOAD_WAIT_END: nothing before the end changes that).  May start a lookup of its keys in the
 * file, or put their rows into the table. */
enum { MC_LOAD_WAIT_KEYS = 1, MC_LOAD_WAIT_END = 2 };
int mc_master_load_gate(struct mc_master *m, uint16_t opcode, const uint8_t *body, uint32_t len,
			uint16_t tenant);
/* Stop a background load (at shutdown): the thread ends at once; the table keeps what is in. */
void mc_master_load_stop(struct mc_master *m);

/* admin_http.c */
int mc_admin_http_start(struct mc_master *m);
/* admin_pin.c: apply the JSON body of POST /api/v1/soft_pin (pin 1) or /api/v1/soft_unpin
 * (pin 0); returns the HTTP status and sets *reply (owned by the caller) to the answer. */
struct json_t;
int mc_admin_soft_pin_body(struct mc_master *m, const char *body, size_t len, int pin,
			   struct json_t **reply);
void mc_admin_http_stop(struct mc_master *m);
/* The one-line summary of /metrics/summary and the periodic log line. */
void mc_master_summary(const struct mc_master *m, char *out, size_t n);
uint32_t mc_master_active_clients(const struct mc_master *m);

/* meta_cleanup.c: delete a dead client's transfer-engine metadata entries */
void mc_master_meta_cleanup(struct mc_master *m, const char *segment_name);

/* liveness.c */
/* Move clients along Active -> Suspected -> Offline by their silence; an Offline client's
 * memory segments go dormant (or unmount with --dormant_segment_ttl_sec=0), dormant segments
 * past their time are dropped.  Called from the 1 s tick. */
void mc_master_check_clients(struct mc_master *m);
/* The client pinged or mounted: Suspected -> Active (a recovery); a mount also makes an
 * Offline or untracked client Active. */
void mc_client_seen(struct mc_master *m, struct mc_client *c, int mounted);
/* A client is silent when it has not pinged for this long (it pings every second).  A silent
 * client's segment name may be taken by a new process: one bound to the same host:port means
 * the old process is gone, and two processes must never serve one name. */
#define MC_CLIENT_SILENT_MS 3000
int mc_client_silent(const struct mc_master *m, const struct mc_client *c);
/* Before c mounts a segment named name: every silent other client holding that name goes
 * Offline now (its memory segments dormant, restorable only by their token).  Clients that
 * still ping keep it; mc_segment_mount_check refuses the mount then. */
void mc_segment_take_over_name(struct mc_master *m, struct mc_client *c, struct mc_strv name);
/* Make a mounted memory segment dormant until monotonic ms until (quiet: no log line, for
 * the reload, which reports its own). */
void mc_segment_make_dormant(struct mc_master *m, struct mc_segment *seg, int64_t until,
			     int quiet);
/* Restore a dormant segment: mounted again, its replicas readable. */
void mc_segment_restore(struct mc_master *m, struct mc_segment *seg);
/* A client reports failed transfers with the segments named name: mark them unhealthy.
 * Returns 0, or MC_ERR_SEGMENT_NOT_FOUND when no mounted memory segment has that name. */
int mc_segment_report_failure(struct mc_master *m, struct mc_strv name, int32_t code,
			      int64_t now, const char *peer);
/* Gauges for the admin server. */
struct mc_liveness_counts {
	uint32_t active, suspected, offline;
	uint32_t dormant_segments, unhealthy_segments;
	uint64_t dormant_replicas;
};
void mc_liveness_counts(const struct mc_master *m, struct mc_liveness_counts *out);
const char *mc_client_state_name(uint8_t state);
/* Allocate len bytes for a replica on a segment whose name is not in used[0..nused).  Fills
 * r->seg/off and links the replica to the segment.  Returns 0 or MC_ERR_NO_AVAILABLE_HANDLE. */
int mc_replica_alloc(struct mc_master *m, struct mc_replica *r, uint64_t len,
		     const struct mc_rpc_config *cfg, struct mc_segment **used, uint32_t nused);
/* An object's first replica, of len bytes, that mc_replica_alloc could not place: may eviction
 * make room for it?  Only if some segment could ever hold it (mounted, serving, large enough)
 * and those segments together would pass the high watermark with it.  Marks those segments
 * for mc_master_evict(..., 1) and returns 1; else 0, and nothing may be evicted for it: an
 * object that cannot fit, or a pool below its watermark, never costs an acknowledged one. */
int mc_replica_evict_room(struct mc_master *m, uint64_t len);
/* The mounted memory segment (in master->segs) named name, or NULL. */
struct mc_segment *mc_segment_by_name(struct mc_master *m, struct mc_strv name);
/* Allocate len bytes for a replica on seg itself (placeable, room): 0, filling r->seg/off/id,
 * or MC_ERR_NO_AVAILABLE_HANDLE. */
int mc_replica_alloc_on(struct mc_master *m, struct mc_replica *r, uint64_t len,
			struct mc_segment *seg);
/* Unlink from its segment and free its bytes. */
void mc_replica_release(struct mc_master *m, struct mc_replica *r);
/* Unlink from its segment and park its bytes on the discard list until release_at. */
void mc_replica_discard(struct mc_master *m, struct mc_replica *r, int64_t release_at);
void mc_master_release_discards(struct mc_master *m, int64_t now, int all);
/* Close the holes left by released replicas so replicas [0, nrep) are all live. */
/* Put r at the head of seg's replica list (sets r->seg; nothing else is accounted). */
void mc_segment_push_replica(struct mc_segment *seg, struct mc_replica *r);
void mc_object_compact(struct mc_object *o);
/* After replicas of o were released: compact, then persist o, or erase it (and return 1) when
 * no replica is left.  o must not be used after a 1. */
int mc_object_settle(struct mc_master *m, struct mc_object *o);

/* Write the sentence fmt into why (n bytes) and return code: how refusals with a reason are
 * made (tasks.c, drain.c, tenants.c). */
int mc_master_refuse(char *why, size_t n, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Remove an object and release all its replicas (segment_table.c; the caller persists). */
void mc_master_object_remove(struct mc_master *m, struct mc_object *o);

/* op_table.c: one request frame in, one response frame appended to out (see ops.h). */
void mc_master_handle(struct mc_master *m, const struct mc_rpc_hdr *h, const uint8_t *body,
		      struct mc_wbuf *out, const char *peer);

/* ops_remove.c: removals as the RPC Remove and RemoveAll do them, for the admin server too. */
/* Remove the object of key unless a lease (without force) or an unfinished put keeps it: 0,
 * OBJECT_HAS_LEASE, REPLICA_IS_NOT_READY, or OBJECT_NOT_FOUND (then the key's ghost is
 * forgotten, and while adopting its removal remembered, so an SSD copy that is away does not
 * bring it back). */
int mc_master_remove_key(struct mc_master *m, const char *key, size_t len, int force, int64_t now);
/* Remove every object no lease (without force) or unfinished put keeps, forget all ghosts and
 * close the adoption window (why: for its log line).  Returns how many were removed. */
int64_t mc_master_remove_all(struct mc_master *m, int force, int64_t now, const char *why);

/* tier_fsdir.c: the shared-directory tier, DISK replicas (--root_fs_dir); its RPC operations
 * are in the table of ops.h. */
void mc_fs_init(struct mc_master *m);
void mc_fs_fini(struct mc_master *m);
/* "<root_fs_dir>/<cluster_id>/<d1>/<d2>/<sanitized key>" into out (a tenant's objects:
 * ".../<cluster_id>/_tenants/<hex of its name>/<d1>/..."); 0 or -1 if too long. */
int mc_fs_path(const struct mc_master *m, const struct mc_object *o, char *out, size_t n);
/* Add a PROCESSING DISK replica to a new object (no-op without --root_fs_dir). */
void mc_fs_add_replica(struct mc_master *m, struct mc_object *o);
/* Attach a DISK replica (status COMPLETE) at reload.  0, or -1 without --root_fs_dir. */
int mc_fs_attach(struct mc_master *m, struct mc_replica *r, uint64_t size);
/* A DISK replica is being forgotten (remove, discard, a dead writer's PutStart): queue its file
 * for deletion by a client, not before the object's read lease ends. */
void mc_fs_queue_drop(struct mc_master *m, struct mc_replica *r);
/* A PROCESSING DISK replica whose writer is dead (no ping for client_ttl) or whose put began
 * more than put_start_release_timeout_sec ago will never be ended: release it (its file, if
 * renamed already, is queued for deletion).  Returns 1 if that erased the object. */
int mc_fs_reap_abandoned(struct mc_master *m, struct mc_object *o, int64_t now);

/* tier_ssd.c: the SSD tier, clients' SSD areas (LOCAL_DISK replicas), offload, promotion; its
 * RPC operations are in tier_ssd_rpc.c (the table of ops.h). */
/* The object's SSD replica that readers may use, or NULL. */
struct mc_replica *mc_object_disk_replica(struct mc_object *o);
/* A memory replica readers may use exists. */
int mc_object_in_memory(struct mc_object *o);
/* Queue an offload of o (to the SSD of the client owning its first memory replica).  demote:
 * free the memory replicas once the copy is in.  Returns 0, -1 when it cannot be offloaded
 * (no SSD on that client, already on SSD or being promoted, no memory replica), or, for a
 * demotion, 1 when the SSD exists but cannot take it now (backing off after failed writes, or
 * its queue is full): the object must stay in memory. */
int mc_tier_queue_offload(struct mc_master *m, struct mc_object *o, int demote);
/* The master forgot r (a LOCAL_DISK replica): tell its owner to delete the data. */
void mc_tier_queue_drop(struct mc_master *m, struct mc_replica *r);
/* Link r as a disk replica (DISK or LOCAL_DISK at addr) of seg, accounting size bytes. */
void mc_disk_replica_link(struct mc_master *m, struct mc_segment *seg, struct mc_replica *r,
			  uint8_t type, uint64_t addr, uint64_t size);
/* Forget a disk replica its owner evicts (the caller checked leases). */
void mc_disk_replica_forget(struct mc_master *m, struct mc_object *o, struct mc_replica *dr);
/* Promotions started and not yet ended (done or failed). */
uint64_t mc_tier_promotions_in_flight(const struct mc_master *m);
/* A read found o only on SSD: count the hit and maybe start a promotion. */
void mc_tier_on_disk_hit(struct mc_master *m, struct mc_object *o, struct mc_replica *disk);
/* Start bringing o back into memory from its SSD replica disk (no eviction for it), into the
 * segments where prefers (NULL: any that takes placements): 1 queued, 0 nothing to do (disk is
 * not a LOCAL_DISK copy, or a promotion runs already), NO_AVAILABLE_HANDLE when memory has no
 * room, UNAVAILABLE_IN_CURRENT_STATUS when the object is being offloaded, its SSD area's
 * queue is full or --promotion_queue_limit promotions run already. */
int mc_tier_promote(struct mc_master *m, struct mc_object *o, struct mc_replica *disk,
		    const struct mc_rpc_config *where);
/* Fail in-flight tasks past their deadline (from the 1 s tick). */
void mc_tier_expire(struct mc_master *m, int64_t now);
/* The disk segment is going away: fail its tasks and free them. */
void mc_tier_disk_gone(struct mc_master *m, struct mc_segment *disk);
/* Create (or find) the disk segment of client c from persisted or mounted values. */
struct mc_segment *mc_disk_mount(struct mc_master *m, struct mc_client *c,
				 const struct mc_uuid *id, struct mc_strv name,
				 struct mc_strv endpoint, uint64_t capacity, int *rc);
struct mc_segment *mc_disk_find(struct mc_master *m, const struct mc_uuid *id);
/* Attach a LOCAL_DISK replica to disk (status COMPLETE). */
void mc_disk_replica_attach(struct mc_master *m, struct mc_segment *disk, struct mc_replica *r,
			    uint64_t addr, uint64_t size);

/* ghosts.c: generations, ghosts of dead SSD areas' objects, adoption of older objects */
void mc_ghosts_init(struct mc_master *m);
void mc_ghosts_fini(struct mc_master *m);
/* A new generation for a put. */
uint64_t mc_gen_next(struct mc_master *m);
/* The object table's erase hook (arg is the master): a ghost if m->erase_keep, else the key is
 * forgotten (mc_ghost_forget). */
void mc_ghost_on_erase(void *arg, struct mc_object *o);
/* The key (in the namespace m->objects works in) was removed: forget its ghost; while
 * adopting, remember the removal. */
void mc_ghost_forget(struct mc_master *m, const char *key, size_t len);
/* A new object of the key (same namespace) exists: its ghost (not a removal) goes. */
void mc_ghost_drop(struct mc_master *m, const char *key, size_t len);
/* Forget the ghosts of the namespace m->objects works in (every one with all_tenants) whose key
 * matches re (a regex_t *; NULL: all).  Returns how many. */
uint64_t mc_ghost_remove_matching(struct mc_master *m, const void *re);
/* May the SSD copy of generation gen of an unknown object, named key as SSD copies are
 * (mc_tier_key), be taken?  0 (and its ghost is consumed) or -1. */
int mc_ghost_check(struct mc_master *m, const char *key, size_t len, uint64_t gen);
/* Stop taking objects older than gen_epoch (and drop the removals kept for them). */
void mc_adopt_close(struct mc_master *m, const char *why);
/* A persisted ghost at reload. */
void mc_ghost_load(struct mc_master *m, const char *key, size_t len, uint64_t gen, int rowkey);
/* 1 and the generation and row kind of the ghost of tier name key, 0 if none. */
int mc_ghost_gen(struct mc_master *m, const char *key, size_t len, uint64_t *gen, int *rowkey);
size_t mc_ghost_count(const struct mc_master *m);

/* rpc_server.c */
int mc_rpc_server_start(struct mc_master *m);
void mc_rpc_server_stop(struct mc_master *m);
/* Commit the iteration's changes, then send the replies that waited for them. */
void mc_rpc_server_flush(struct mc_master *m);

/* HA (ha_log.c): the replies waiting now are bound to the round of the log being written: they
 * are set apart (their connections read no more requests meanwhile) ... */
void mc_rpc_server_seal(struct mc_master *m);
/* ... and sent once it is durable (rc 0), or, rc != 0, the durable ones among them fail. */
void mc_rpc_server_release(struct mc_master *m, int rc);

/* The client writing o (its put's), NULL if none; and the reference that names c there
 * (object_table.c). */
struct mc_client *mc_object_writer(const struct mc_master *m, const struct mc_object *o);
uint32_t mc_client_ref(const struct mc_client *c);

#endif

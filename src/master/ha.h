/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_HA_H
#define MC_MASTER_HA_H

/*
 * The master's high availability (--enable_ha): several masters, one leader elected through
 * etcd (or redis), the others standbys; with --enable_oplog every change the leader makes is
 * written to etcd as an ordered batch before any reply depending on it goes out, and the
 * standbys apply the batches to their own SQLite file, so the one promoted loads the whole table
 * at once.  ha.c: configuration, election on etcd, lease keep-alive and fencing, serving, the
 * metrics.  ha_state.c: the runtime state, a standby's answer, stepping down.  ha_log.c: the
 * replicated log.  ha_snapshot.c: snapshots.  ha_compact.c: members and compaction of the log.
 * ha_redis.c: the redis election backend.  Each calls only those listed after it (and the master's
 * core); calls up go through the hooks in struct mc_ha.
 *
 * etcd keys (upstream's layout):
 *   mooncake-store/<cluster_id>/master_view     the leader's RPC address, under its lease; the
 *                                               key's create revision is the view version
 *   /oplog/<cluster_id>/batches/<20 digits>     batch N (our encoding, src/persist)
 *   /oplog/<cluster_id>/durable_prefix          "N": the last batch written
 *   /oplog/<cluster_id>/log_id                  a random number naming this log's history
 *   /oplog/<cluster_id>/snapshot                the latest snapshot ({"id", "batch", "path"})
 *   /oplog/<cluster_id>/members/<address>       each master's applied batch, under its lease
 *
 * Everything runs on the master's loop thread; etcd is reached through src/coord/etcd.c.
 */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/wire.h"

struct evbuffer;
struct mc_master;
struct mc_master_config;
struct mc_rpc_hdr;
struct mc_etcd;
struct mc_etcd_call;
struct mc_ha_redis;
struct mc_ha_waiter;
struct mc_ha_snap;
struct mc_ha_compact;

/* Upstream's runtime states (/ha_status). */
enum mc_ha_state {
	MC_HA_STARTING,
	MC_HA_STANDBY,
	MC_HA_CANDIDATE,
	MC_HA_RECOVERING,
	MC_HA_CATCHING_UP,
	MC_HA_LEADER_WARMUP,
	MC_HA_SERVING,
};

#define MC_HA_KEY_MAX 320
/* The largest batch written as one etcd key (etcd takes requests up to 1.5 MiB, and the value
 * travels base64-encoded). */
#define MC_HA_BATCH_MAX (512u << 10)

struct mc_ha_metrics {
	uint64_t transitions;
	uint64_t elections_won;
	uint64_t leadership_lost;
	uint64_t batches_written;
	uint64_t entries_written;
	uint64_t write_retries;
	uint64_t write_failures;
	uint64_t last_batch_bytes;
	int64_t last_write_us;
	uint64_t batches_applied;
	uint64_t entries_applied;
	int64_t last_apply_us;
	uint64_t watch_breaks;
	int64_t lag_ms;			/* standby: age of the last batch applied when applied */
	uint64_t snapshots;
	uint64_t snapshot_errors;
	uint64_t snapshot_us_total;
	uint64_t compactions;
	uint64_t compacted_batches;
	uint64_t restores;
};

struct mc_ha {
	struct mc_master *m;
	int redis;			/* election on redis (no replicated log) */
	int oplog;			/* the replicated log (etcd only) */
	enum mc_ha_state state;
	char self[288];			/* our RPC address, as published */
	char cluster[256];
	char view_key[MC_HA_KEY_MAX];
	char prefix_key[MC_HA_KEY_MAX];
	char batches[MC_HA_KEY_MAX];	/* "/oplog/<cid>/batches/" */
	char batches_end[MC_HA_KEY_MAX];
	char log_id_key[MC_HA_KEY_MAX];
	char snap_key[MC_HA_KEY_MAX];
	char members[MC_HA_KEY_MAX];	/* "/oplog/<cid>/members/" */
	struct mc_etcd *etcd;
	struct mc_ha_redis *rd;
	int64_t ttl_ms;
	int64_t started_ms;
	int stopping;			/* shutting down: no more campaigns */

	/* Leadership (ours). */
	int64_t lease_id;
	int64_t view_version;
	int64_t valid_until;		/* monotonic ms: mutations stop here unless renewed */
	int64_t keepalive_sent;
	struct mc_etcd_call *keepalive_call;
	struct mc_etcd_call *campaign_call;
	void *campaign_cx;		/* its context (freed by its callback, or at the end) */
	struct event *ev_keepalive, *ev_fence;

	/* The leader as last seen. */
	char leader[288];
	int64_t leader_version;
	struct mc_etcd_call *view_call;
	struct mc_etcd_call *watch_view;
	struct event *ev_poll, *ev_rewatch;
	int64_t last_contact;		/* monotonic ms of etcd's last answer */

	/* The log. */
	int64_t log_id;			/* 0: not known yet */
	unsigned log_id_failures;	/* failed reads of it in a row (logged at the first) */
	uint64_t applied;		/* last batch in our SQLite */
	uint64_t durable;		/* last batch known written (the leader's own) */
	uint64_t target;		/* catching up to this batch before serving */
	struct mc_etcd_call *log_call;	/* log id, fetch */
	struct mc_etcd_call *watch_log;
	int fetch_again;
	int64_t fetch_backoff_ms;
	struct event *ev_fetch;
	struct mc_etcd_call *write_call;
	struct mc_wbuf wbuf;		/* the part being written */
	struct mc_wbuf done;		/* the part written last, for our own file */
	size_t wentries;
	int round;			/* replies are waiting for a round of parts */
	size_t round_left;		/* bytes of the round still to write */
	int64_t write_started;		/* monotonic us */
	int64_t write_first_ms;		/* monotonic ms of the part's first try */
	json_t *wtxn;			/* the part being written (in flight or waiting to be sent
				 * again after a failure); NULL between rounds */
	struct event *ev_wretry;
	struct mc_ha_waiter *waiters;		/* mc_ha_when_durable, not bound to a round yet */
	struct mc_ha_waiter *sealed_waiters;	/* ... bound to the round being written */
	struct mc_etcd_call *member_call;
	int64_t member_lease;
	struct event *ev_member;

	/* Snapshots (ha_snapshot.c), members and compaction (ha_compact.c). */
	struct mc_ha_snap *snap;
	struct mc_ha_compact *compact;

	/* Calls up the HA files' layers, set by the file above (so that no two files call each
	 * other): ha.c's election results, for the backends and the log, and its serving; ha_log.c's
	 * reading of the log, for the snapshot restore. */
	void (*on_view)(struct mc_ha *ha, const char *leader, int64_t version);
	void (*on_won)(struct mc_ha *ha, int64_t version);
	void (*on_renewed)(struct mc_ha *ha, int64_t sent_ms);
	void (*serve)(struct mc_ha *ha);
	void (*fetch)(struct mc_ha *ha);

	struct mc_ha_metrics x;
};

/* --- ha.c: for the rest of the master --- */
/* Check the HA flags (and fill in defaults); 0 or -1 with a message in err. */
int mc_ha_validate(struct mc_master_config *cfg, char *err, size_t n);
/* One warning line for each of 0.3.13's snapshot flags given, mapping them where they mean
 * something (after logging is set up, once). */
void mc_ha_deprecations(struct mc_master_config *cfg);
/* Set up HA instead of mc_master_recover: open the database without loading it.  0 or the
 * error that makes the start fail. */
int mc_ha_init(struct mc_master *m);
/* Start following and campaigning (the RPC and admin servers are up). */
void mc_ha_start(struct mc_master *m);
/* Shutting down: a leader hands its leadership back (revokes its lease, up to 1 s). */
void mc_ha_stop(struct mc_master *m);
void mc_ha_free(struct mc_master *m);
/* 1 when this master may answer requests: not HA, or the leader with a lease still valid. */
int mc_ha_serving(const struct mc_master *m);
/* Answer the request with UNAVAILABLE_IN_CURRENT_MODE and the leader's address as body. */
void mc_ha_refuse(struct mc_master *m, const struct mc_rpc_hdr *h, struct mc_wbuf *out);
const char *mc_ha_role(const struct mc_master *m);
/* The leader's view version (Ping answers it, as upstream's), 0 without HA. */
int64_t mc_ha_view_version(const struct mc_master *m);
const char *mc_ha_state_name(const struct mc_master *m);
/* {"present", "leader_address", "view_version"} (/leader). */
json_t *mc_ha_leader_json(const struct mc_master *m);
/* Call fn(arg) once every change recorded so far is durable in the log (at once without HA's
 * log or when nothing waits).  A leader that steps down never calls it (it re-executes). */
void mc_ha_when_durable(struct mc_master *m, void (*fn)(void *arg), void *arg);
/* Prometheus lines of the HA metrics. */
void mc_ha_metrics(const struct mc_master *m, struct evbuffer *b);

/* --- inside HA (ha_state.c) --- */
void mc_ha_set_state(struct mc_ha *ha, enum mc_ha_state s);
/* Leadership is lost or was never safe (why): start over as a standby (see ha.c). */
void mc_ha_step_down(struct mc_ha *ha, const char *why) __attribute__((noreturn));
int64_t mc_ha_now(const struct mc_ha *ha);

/* ha_log.c */
int mc_ha_log_init(struct mc_ha *ha);
void mc_ha_log_start(struct mc_ha *ha);
void mc_ha_log_fini(struct mc_ha *ha);
/* Fetch and apply what is new in the log (standby), or up to ha->target (catching up). */
void mc_ha_log_fetch(struct mc_ha *ha);
/* Elected: read the durable prefix, catch up to it, then mc_ha_serve. */
void mc_ha_log_catch_up(struct mc_ha *ha);
/* The leader's commit (mc_master_commit): write what is pending, let the replies that wait go
 * once it is durable. */
int mc_ha_commit(struct mc_master *m);

/* ha_snapshot.c */
int mc_ha_snap_init(struct mc_ha *ha);
void mc_ha_snap_fini(struct mc_ha *ha);
/* The log starts after our state (compacted): restore the latest snapshot, then fetch. */
void mc_ha_snap_restore(struct mc_ha *ha);
/* From the poll timer: take a snapshot when due, compact the log (leader). */
void mc_ha_snap_tick(struct mc_ha *ha);
/* A restore is under way: the log is not read meanwhile. */
int mc_ha_snap_busy(const struct mc_ha *ha);

/* ha_compact.c */
int mc_ha_compact_init(struct mc_ha *ha);
void mc_ha_compact_fini(struct mc_ha *ha);
/* From the poll timer: refresh our member key; the leader compacts the log. */
void mc_ha_compact_tick(struct mc_ha *ha);
/* The first batch still in etcd (1 until compacted). */
uint64_t mc_ha_log_first(const struct mc_ha *ha);

/* ha_redis.c: election on redis. */
int mc_ha_redis_init(struct mc_ha *ha, const char *connstring, char *err, size_t n);
void mc_ha_redis_fini(struct mc_ha *ha);
void mc_ha_redis_campaign(struct mc_ha *ha);
void mc_ha_redis_keepalive(struct mc_ha *ha);
void mc_ha_redis_read_view(struct mc_ha *ha);
void mc_ha_redis_resign(struct mc_ha *ha);

/* etcd or redis answered (ha_state.c). */
void mc_ha_on_contact(struct mc_ha *ha);

#endif

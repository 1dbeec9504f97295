/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's high availability: configuration, runtime state, leader election with a lease,
 * keep-alive and fencing, stepping down (see ha.h for the keys and the files).
 *
 * Election (etcd): a standby that sees no leader grants itself a lease of
 * --ha_leader_lease_ttl_sec and creates mooncake-store/<cluster_id>/master_view holding its RPC
 * address under that lease, if the key does not exist (one transaction); the key's create
 * revision is the view version.  The winner renews the lease every third of its TTL.
 *
 * Fencing: etcd expires a lease no earlier than TTL after it received the last renewal, which was
 * after we sent it; so a leader whose last successful renewal was sent at t stops answering at
 * t + TTL - margin (valid_until), before any other master can be elected.  Besides, every batch
 * of the log is written by a transaction that compares master_view's create revision with ours,
 * so a leader that lost its key can never add to the log.  A leader that stops being one (lease
 * lost or not renewed in time, its write refused, its own disk failing) re-executes itself: what
 * its memory holds may include changes etcd never accepted, while its SQLite file holds exactly
 * the batches etcd accepted, so it starts over from the file as a standby, keeping its process
 * id (systemd, scripts and tests still know it).
 *
 * The states are upstream's: starting (no answer from etcd yet), standby (following), candidate
 * (campaigning), catching_up (elected, reading the rest of the log), recovering (loading the
 * table), serving.  /role says leader for catching_up, recovering and serving, which hold the
 * leadership, though only serving answers requests.
 * Single-threaded: the master's loop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "coord/etcd.h"
#include "master/ha.h"
#include "master/master.h"
#include "persist/persist.h"
#include "reactor/options.h"
#include "reactor/sd_notify.h"

/* Upstream's cluster ids: [0-9A-Za-z_.-], at most 128 characters. */
static int mc_ha_cluster_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 128)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' || s[i] == '.' || s[i] == '-'))
			return 0;
	return 1;
}

/* etcd's own form of endpoints, URLs (http://h1:2379,http://h2:2379/, as upstream's
 * conf/master.json writes them), becomes the backends' host:port[;host:port...] in place: the
 * "http://" of each and a trailing "/" go.  0, or -1 (https: TLS to etcd is not built in). */
static int mc_ha_strip_urls(char *v, const char *flag, char *err, size_t n)
{
	char *r = v, *w = v;

	if (strstr(v, "https://")) {
		snprintf(err, n, "invalid value '%.200s' for --%s: https (TLS to etcd) is not "
				 "supported; give http:// or host:port endpoints", v, flag);
		return -1;
	}
	while (*r) {
		if (!strncmp(r, "http://", 7) && (r == v || r[-1] == ';' || r[-1] == ','))
			r += 7;
		if (*r == '/' && (r[1] == '\0' || r[1] == ';' || r[1] == ',')) {
			r++;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
	return 0;
}

/* An endpoint list as the backends take it: host:port[;host:port...] (or ","), with an
 * optional etcd:// or redis:// in front, or etcd's http:// URLs.  0, or -1 with the message
 * naming flag. */
static int mc_ha_check_endpoints(const char *flag, char *v, char *err, size_t n)
{
	static const struct mc_opt master = { "x", NULL, NULL, MC_OPT_MASTER, 0, NULL, 0, -1, "" };
	char tmp[1100], label[64], e[256];

	if (v[0] == '\0')
		return 0;
	if (strncmp(v, "redis://", 8) && strncmp(v, "etcd://", 7) &&
	    mc_ha_strip_urls(v, flag, err, n))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s%s", strstr(v, "://") ? "" : "etcd://", v);
	snprintf(label, sizeof(label), "--%s", flag);
	if (strlen(v) < 1000 && mc_opts_check_value(&master, tmp, label, e, sizeof(e)) == 0)
		return 0;
	snprintf(err, n, "invalid value '%.200s' for --%s (expected host:port[;host:port...])", v,
		 flag);
	return -1;
}

int mc_ha_validate(struct mc_master_config *cfg, char *err, size_t n)
{
	const char *conn = cfg->ha_backend_connstring;
	int payload = cfg->snapshot_payload_backend_type[0] != '\0';
	const char *store;

	/* Empty is upstream's default for the flag, meaning the local store. */
	if (cfg->snapshot_object_store_type[0] == '\0') {
		free(cfg->snapshot_object_store_type);
		cfg->snapshot_object_store_type = mc_xstrdup("local");
	}
	store = payload ? cfg->snapshot_payload_backend_type : cfg->snapshot_object_store_type;
	if (strcmp(store, "local")) {
		snprintf(err, n, "invalid value '%s' for --%s: only local snapshots are supported (a "
				 "directory in MOONCAKE_SNAPSHOT_LOCAL_PATH, shared by the masters)",
			 store, payload ? "snapshot_payload_backend_type"
					: "snapshot_object_store_type");
		return -1;
	}
	if (mc_ha_check_endpoints("ha_backend_connstring", cfg->ha_backend_connstring, err, n) ||
	    mc_ha_check_endpoints("etcd_endpoints", cfg->etcd_endpoints, err, n))
		return -1;
	if (!cfg->enable_ha) {
		if (cfg->enable_oplog) {
			snprintf(err, n, "--enable_oplog needs --enable_ha");
			return -1;
		}
		return 0;
	}
	if (!strcmp(cfg->ha_backend_type, "k8s")) {
		snprintf(err, n, "--ha_backend_type=k8s is not supported (use etcd or redis)");
		return -1;
	}
	if (conn[0] == '\0' && !strcmp(cfg->ha_backend_type, "etcd"))
		conn = cfg->etcd_endpoints;
	if (conn[0] == '\0') {
		snprintf(err, n, "--enable_ha needs --ha_backend_connstring (or --etcd_endpoints)");
		return -1;
	}
	if (conn != cfg->ha_backend_connstring) {
		free(cfg->ha_backend_connstring);
		cfg->ha_backend_connstring = mc_xstrdup(conn);
	}
	if (cfg->enable_oplog && strcmp(cfg->ha_backend_type, "etcd")) {
		snprintf(err, n, "--enable_oplog needs --ha_backend_type=etcd: redis elects a leader "
				 "but cannot hold the replicated log");
		return -1;
	}
	if (!cfg->enable_oplog && cfg->persist_path[0]) {
		snprintf(err, n, "--persist_path with --enable_ha needs --enable_oplog: without the "
				 "replicated log a standby's own file would be stale when it takes over");
		return -1;
	}
	if (!mc_ha_cluster_ok(cfg->cluster_id)) {
		snprintf(err, n, "invalid value '%s' for --cluster_id: 1 to 128 of [0-9A-Za-z_.-]",
			 cfg->cluster_id);
		return -1;
	}
	if (!strcmp(cfg->rpc_address, "0.0.0.0") || !strcmp(cfg->rpc_address, "::") ||
	    cfg->rpc_address[0] == '\0') {
		snprintf(err, n, "--enable_ha needs --rpc_address (or --rpc_interface) to be an address "
				 "clients reach: it is published as the leader's address");
		return -1;
	}
	if (cfg->enable_oplog && cfg->persist_path[0] == '\0') {
		/* Standbys follow the log into a database: an in-memory one when none is named
		 * (a restart then reads the log again). */
		free(cfg->persist_path);
		cfg->persist_path = mc_xstrdup(":memory:");
	}
	return 0;
}

void mc_ha_deprecations(struct mc_master_config *cfg)
{
	int snap = cfg->enable_ha && cfg->enable_oplog;

	if (cfg->snapshot_payload_backend_type[0] &&
	    strcmp(cfg->snapshot_payload_backend_type, cfg->snapshot_object_store_type)) {
		mc_log_warn("--snapshot_payload_backend_type is deprecated: use "
			    "--snapshot_object_store_type");
		free(cfg->snapshot_object_store_type);
		cfg->snapshot_object_store_type = mc_xstrdup(cfg->snapshot_payload_backend_type);
	}
	if (cfg->enable_snapshot) {
		mc_log_warn("--enable_snapshot is deprecated (removed in 0.3.14): %s",
			    snap ? "taken as --enable_oplog_snapshot"
				 : "no effect without --enable_ha --enable_oplog; --persist_path keeps "
				   "the table across restarts");
		if (snap)
			cfg->enable_oplog_snapshot = 1;
	}
	if (cfg->enable_snapshot_restore)
		mc_log_warn("--enable_snapshot_restore is deprecated (removed in 0.3.14): %s",
			    snap ? "a master whose log was compacted restores the latest snapshot "
				   "by itself"
				 : "no effect; --persist_path restores the table at start");
	if (cfg->snapshot_retention_count != 2)
		mc_log_warn("--snapshot_retention_count is deprecated (removed in 0.3.14): still "
			    "keeps that many snapshots in the local store");
	if (cfg->snapshot_backup_dir[0]) {
		const char *env = getenv("MOONCAKE_SNAPSHOT_LOCAL_PATH");

		mc_log_warn("--snapshot_backup_dir is deprecated (removed in 0.3.14): %s",
			    env && *env ? "MOONCAKE_SNAPSHOT_LOCAL_PATH wins"
					: "taken as MOONCAKE_SNAPSHOT_LOCAL_PATH");
		if (!(env && *env))
			setenv("MOONCAKE_SNAPSHOT_LOCAL_PATH", cfg->snapshot_backup_dir, 1);
	}
	if (cfg->snapshot_child_timeout_seconds != 300)
		mc_log_warn("--snapshot_child_timeout_seconds is deprecated (removed in 0.3.14): no "
			    "effect (snapshots are written by a thread, not a child process)");
	if (cfg->snapshot_catalog_store_type[0] || cfg->snapshot_catalog_store_connstring[0])
		mc_log_warn("--snapshot_catalog_store_type/--snapshot_catalog_store_connstring are "
			    "deprecated (removed in 0.3.14): no effect (etcd holds the catalog)");
}

/* ---------------------------------------------------------------- etcd election */

static int64_t mc_ha_margin_ms(const struct mc_ha *ha)
{
	int64_t margin = ha->ttl_ms / 5;

	return margin < 300 ? 300 : margin;
}

static void mc_ha_serve(struct mc_ha *ha);
static void mc_ha_campaign(struct mc_ha *ha);

static int mc_ha_leading(const struct mc_ha *ha)
{
	return ha->state == MC_HA_CATCHING_UP || ha->state == MC_HA_RECOVERING ||
	       ha->state == MC_HA_LEADER_WARMUP || ha->state == MC_HA_SERVING;
}

static void mc_ha_on_view(struct mc_ha *ha, const char *leader, int64_t version)
{
	if (mc_ha_leading(ha)) {
		if (version != ha->view_version)
			mc_ha_step_down(ha, leader[0] ? "another master holds the leadership"
						      : "our leadership key is gone");
		return;
	}
	if (strcmp(ha->leader, leader) || ha->leader_version != version) {
		if (leader[0])
			mc_log_info("HA: leader is %s (view %lld)", leader, (long long)version);
		else if (ha->leader[0])
			mc_log_info("HA: leader %s is gone", ha->leader);
	}
	snprintf(ha->leader, sizeof(ha->leader), "%s", leader);
	ha->leader_version = version;
	if (leader[0] == '\0' && ha->state == MC_HA_STANDBY)
		mc_ha_campaign(ha);
}

static void mc_ha_arm_fence(struct mc_ha *ha)
{
	int64_t left = ha->valid_until - mc_ha_now(ha);
	struct timeval tv;

	if (left < 0)
		left = 0;
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	evtimer_add(ha->ev_fence, &tv);
}

static void mc_ha_on_renewed(struct mc_ha *ha, int64_t sent_ms)
{
	int64_t until = sent_ms + ha->ttl_ms - mc_ha_margin_ms(ha);

	if (until > ha->valid_until) {
		ha->valid_until = until;
		mc_ha_arm_fence(ha);
	}
}

static void mc_ha_on_fence(evutil_socket_t fd, short what, void *arg)
{
	struct mc_ha *ha = arg;

	(void)fd;
	(void)what;
	if (mc_ha_leading(ha) && mc_ha_now(ha) >= ha->valid_until)
		mc_ha_step_down(ha, "the leadership lease was not renewed in time (etcd unreachable?)");
}

static void mc_ha_on_won(struct mc_ha *ha, int64_t version)
{
	struct timeval tv = { (time_t)(ha->ttl_ms / 3 / 1000), (suseconds_t)(ha->ttl_ms / 3 % 1000) * 1000 };

	ha->view_version = version;
	ha->leader_version = version;
	snprintf(ha->leader, sizeof(ha->leader), "%s", ha->self);
	ha->x.elections_won++;
	mc_log_notice("HA: elected leader (view %lld, lease %lld s)", (long long)version,
		      (long long)(ha->ttl_ms / 1000));
	evtimer_add(ha->ev_keepalive, &tv);
	mc_ha_arm_fence(ha);
	if (ha->oplog) {
		mc_ha_set_state(ha, MC_HA_CATCHING_UP);
		mc_ha_log_catch_up(ha);
	} else {
		mc_ha_serve(ha);
	}
}

/* Losers and resigning leaders give their lease back at once. */
static void mc_ha_revoke(struct mc_ha *ha, int64_t lease, mc_etcd_fn fn, void *arg)
{
	json_t *b = json_pack("{so}", "ID", mc_etcd_num(lease));

	mc_etcd_post(ha->etcd, "/v3/lease/revoke", b, 1000, fn, arg);
	json_decref(b);
}

static void mc_ha_ignore(void *arg, int rc, json_t *reply)
{
	(void)arg, (void)rc, (void)reply;
}

/* The view from a range answer's kvs (absent: no leader). */
static void mc_ha_view_from(struct mc_ha *ha, json_t *range)
{
	json_t *kv = json_array_get(json_object_get(range, "kvs"), 0);
	size_t len = 0;
	char *v = kv ? mc_etcd_bytes(kv, "value", &len) : NULL;

	if (v && len > 0 && len < sizeof(ha->leader) && !memchr(v, '\0', len))
		mc_ha_on_view(ha, v, mc_etcd_i64(kv, "create_revision"));
	else
		mc_ha_on_view(ha, "", 0);
	free(v);
}

struct mc_ha_campaign_ctx {
	struct mc_ha *ha;
	int64_t lease;
	int64_t sent;
};

static void mc_ha_on_create(void *arg, int rc, json_t *reply)
{
	struct mc_ha_campaign_ctx *cx = arg;
	struct mc_ha *ha = cx->ha;

	ha->campaign_call = NULL;
	ha->campaign_cx = NULL;
	if (rc) {
		mc_log_warn("HA: campaign failed: etcd %s did not answer", mc_etcd_endpoint(ha->etcd));
		mc_ha_revoke(ha, cx->lease, mc_ha_ignore, NULL);
		mc_ha_set_state(ha, MC_HA_STANDBY);
		free(cx);
		return;
	}
	mc_ha_on_contact(ha);
	ha->campaign_cx = NULL;
	if (json_is_true(json_object_get(reply, "succeeded"))) {
		ha->lease_id = cx->lease;
		ha->valid_until = cx->sent + ha->ttl_ms - mc_ha_margin_ms(ha);
		mc_ha_on_won(ha, mc_etcd_i64(json_object_get(reply, "header"), "revision"));
	} else {
		json_t *resp = json_array_get(json_object_get(reply, "responses"), 0);

		mc_ha_revoke(ha, cx->lease, mc_ha_ignore, NULL);
		mc_ha_set_state(ha, MC_HA_STANDBY);
		mc_ha_view_from(ha, json_object_get(resp, "response_range"));
	}
	free(cx);
}

static void mc_ha_on_grant(void *arg, int rc, json_t *reply)
{
	struct mc_ha_campaign_ctx *cx = arg;
	struct mc_ha *ha = cx->ha;
	json_t *k, *txn;

	ha->campaign_call = NULL;
	cx->lease = rc ? 0 : mc_etcd_i64(reply, "ID");
	if (cx->lease == 0) {
		mc_log_warn("HA: cannot get a lease from etcd %s", mc_etcd_endpoint(ha->etcd));
		mc_ha_set_state(ha, MC_HA_STANDBY);
		ha->campaign_cx = NULL;
		free(cx);
		return;
	}
	mc_ha_on_contact(ha);
	k = mc_etcd_b64s(ha->view_key);
	txn = json_pack("{s[{sOssssso}]s[{s{sOsoso}}]s[{s{sO}}]}",
			"compare", "key", k, "target", "CREATE", "result", "EQUAL",
			"create_revision", mc_etcd_num(0),
			"success", "request_put", "key", k, "value", mc_etcd_b64s(ha->self),
			"lease", mc_etcd_num(cx->lease),
			"failure", "request_range", "key", k);
	json_decref(k);
	ha->campaign_call = mc_etcd_post(ha->etcd, "/v3/kv/txn", txn, ha->ttl_ms / 2,
					 mc_ha_on_create, cx);
	json_decref(txn);
	if (ha->campaign_call == NULL) {
		mc_ha_set_state(ha, MC_HA_STANDBY);
		ha->campaign_cx = NULL;
		free(cx);
	}
}

static void mc_ha_campaign(struct mc_ha *ha)
{
	struct mc_ha_campaign_ctx *cx;
	json_t *b;

	if (ha->state != MC_HA_STANDBY || ha->campaign_call || ha->stopping ||
	    (ha->oplog && ha->log_id == 0))
		return;
	if (ha->redis) {
		mc_ha_set_state(ha, MC_HA_CANDIDATE);
		mc_ha_redis_campaign(ha);
		return;
	}
	cx = mc_xcalloc(1, sizeof(*cx));
	cx->ha = ha;
	cx->sent = mc_ha_now(ha);
	mc_ha_set_state(ha, MC_HA_CANDIDATE);
	b = json_pack("{sI}", "TTL", (json_int_t)(ha->ttl_ms / 1000));
	ha->campaign_cx = cx;
	ha->campaign_call = mc_etcd_post(ha->etcd, "/v3/lease/grant", b, ha->ttl_ms / 2,
					 mc_ha_on_grant, cx);
	json_decref(b);
	if (ha->campaign_call == NULL) {
		mc_ha_set_state(ha, MC_HA_STANDBY);
		ha->campaign_cx = NULL;
		free(cx);
	}
}

static void mc_ha_on_keepalive(void *arg, int rc, json_t *reply)
{
	struct mc_ha *ha = arg;
	json_t *res = json_object_get(reply, "result");

	ha->keepalive_call = NULL;
	if (rc) {
		mc_log_warn("HA: lease renewal failed (etcd %s): %s", mc_etcd_endpoint(ha->etcd),
			    mc_strerror(rc));
		return;		/* the next tick tries again; the fence decides */
	}
	mc_ha_on_contact(ha);
	if (mc_etcd_i64(res, "TTL") <= 0)
		mc_ha_step_down(ha, "etcd says our leadership lease expired");
	mc_ha_on_renewed(ha, ha->keepalive_sent);
}

static void mc_ha_on_keepalive_tick(evutil_socket_t fd, short what, void *arg)
{
	struct mc_ha *ha = arg;
	struct timeval tv = { (time_t)(ha->ttl_ms / 3 / 1000),
			      (suseconds_t)(ha->ttl_ms / 3 % 1000) * 1000 };
	int64_t left = ha->valid_until - mc_ha_now(ha);
	json_t *b;

	(void)fd;
	(void)what;
	if (!mc_ha_leading(ha))
		return;
	evtimer_add(ha->ev_keepalive, &tv);
	if (ha->redis) {
		ha->keepalive_sent = mc_ha_now(ha);
		mc_ha_redis_keepalive(ha);
		return;
	}
	if (ha->keepalive_call)
		return;
	ha->keepalive_sent = mc_ha_now(ha);
	b = json_pack("{so}", "ID", mc_etcd_num(ha->lease_id));
	ha->keepalive_call = mc_etcd_post(ha->etcd, "/v3/lease/keepalive", b,
					  left > 200 ? left : 200, mc_ha_on_keepalive, ha);
	json_decref(b);
}

/* ---------------------------------------------------------------- watching the view */

static void mc_ha_on_view_read(void *arg, int rc, json_t *reply)
{
	struct mc_ha *ha = arg;

	ha->view_call = NULL;
	if (rc)
		return;
	mc_ha_on_contact(ha);
	mc_ha_view_from(ha, reply);
}

static void mc_ha_read_view(struct mc_ha *ha)
{
	json_t *b;

	if (ha->redis) {
		mc_ha_redis_read_view(ha);
		return;
	}
	if (ha->view_call)
		return;
	b = json_pack("{so}", "key", mc_etcd_b64s(ha->view_key));
	ha->view_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, 2000, mc_ha_on_view_read, ha);
	json_decref(b);
}

static void mc_ha_watch_view(struct mc_ha *ha);

static void mc_ha_on_view_event(void *arg, int rc, json_t *msg)
{
	struct mc_ha *ha = arg;
	json_t *ev;
	size_t i;

	if (rc) {
		struct timeval tv = { 0, 500000 };

		ha->watch_view = NULL;
		ha->x.watch_breaks++;
		event_add(ha->ev_rewatch, &tv);
		return;
	}
	mc_ha_on_contact(ha);
	json_array_foreach(json_object_get(msg, "events"), i, ev) {
		json_t *kv = json_object_get(ev, "kv");

		if (json_is_string(json_object_get(ev, "type")) &&
		    !strcmp(json_string_value(json_object_get(ev, "type")), "DELETE")) {
			mc_ha_on_view(ha, "", 0);
		} else {
			size_t len = 0;
			char *v = mc_etcd_bytes(kv, "value", &len);

			if (v && len > 0 && len < sizeof(ha->leader) && !memchr(v, '\0', len))
				mc_ha_on_view(ha, v, mc_etcd_i64(kv, "create_revision"));
			free(v);
		}
	}
}

static void mc_ha_watch_view(struct mc_ha *ha)
{
	json_t *c;

	if (ha->watch_view || ha->redis)
		return;
	c = json_pack("{so}", "key", mc_etcd_b64s(ha->view_key));
	ha->watch_view = mc_etcd_watch(ha->etcd, c, mc_ha_on_view_event, ha);
	json_decref(c);
	/* Whatever happened while no watch was open. */
	mc_ha_read_view(ha);
}

static void mc_ha_on_rewatch(evutil_socket_t fd, short what, void *arg)
{
	struct mc_ha *ha = arg;

	(void)fd;
	(void)what;
	mc_ha_watch_view(ha);
	if (ha->oplog)
		mc_ha_log_start(ha);
}

/* The safety net under the watches: read the view (and the log) every poll interval. */
static void mc_ha_on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct mc_ha *ha = arg;
	int64_t iv = ha->m->cfg.oplog_poll_interval_ms;
	struct timeval tv = { (time_t)(iv / 1000), (suseconds_t)(iv % 1000) * 1000 };

	(void)fd;
	(void)what;
	evtimer_add(ha->ev_poll, &tv);
	if (!mc_ha_leading(ha))
		mc_ha_read_view(ha);
	if (ha->oplog && (ha->state == MC_HA_STANDBY || ha->state == MC_HA_STARTING ||
			  ha->state == MC_HA_CANDIDATE))
		mc_ha_log_fetch(ha);
	mc_ha_snap_tick(ha);
	mc_ha_compact_tick(ha);
}

/* ---------------------------------------------------------------- serving */

static void mc_ha_serve(struct mc_ha *ha)
{
	struct mc_master *m = ha->m;
	struct mc_object *o;
	size_t pos = 0;
	int64_t now, t0 = mc_ha_now(ha);

	mc_ha_set_state(ha, MC_HA_RECOVERING);
	if (ha->oplog && (mc_master_recover(m) || (m->recover_more && m->recover_more(m)))) {
		mc_ha_step_down(ha, "cannot load the table from our database");
		return;
	}
	/* Readers the old leader granted leases to may still be reading: every object is leased
	 * for a lease time, so nothing is evicted or removed under them. */
	now = mc_ha_now(ha);
	while ((o = mc_object_next(&m->objects, &pos)) != NULL)
		o->lease_until = o->fetch_until = now + m->cfg.default_kv_lease_ttl;
	mc_ha_set_state(ha, MC_HA_SERVING);
	mc_log_notice("HA: serving as leader %s (view %lld): %llu objects, %u segments, loaded in "
		      "%lld ms", ha->self, (long long)ha->view_version,
		      (unsigned long long)m->objects.count, m->nsegs, (long long)(now - t0));
	mc_sd_notify("READY=1");
	mc_master_commit(m);
}

/* ---------------------------------------------------------------- life cycle */

static void mc_ha_keys(struct mc_ha *ha)
{
	const char *c = ha->cluster;

	snprintf(ha->view_key, sizeof(ha->view_key), "mooncake-store/%s/master_view", c);
	snprintf(ha->prefix_key, sizeof(ha->prefix_key), "/oplog/%s/durable_prefix", c);
	snprintf(ha->batches, sizeof(ha->batches), "/oplog/%s/batches/", c);
	mc_etcd_prefix_end(ha->batches, ha->batches_end, sizeof(ha->batches_end));
	snprintf(ha->log_id_key, sizeof(ha->log_id_key), "/oplog/%s/log_id", c);
	snprintf(ha->snap_key, sizeof(ha->snap_key), "/oplog/%s/snapshot", c);
	snprintf(ha->members, sizeof(ha->members), "/oplog/%s/members/", c);
}

static const struct mc_repl_ops mc_ha_repl = {
	.commit = mc_ha_commit,
	.serving = mc_ha_serving,
	.refuse = mc_ha_refuse,
	.view_version = mc_ha_view_version,
};

int mc_ha_init(struct mc_master *m)
{
	struct mc_ha *ha;
	char err[256];
	const char *again = getenv("MC_HA_REEXEC");
	int rc;

	ha = mc_xcalloc(1, sizeof(*ha));
	ha->m = m;
	m->ha = ha;
	m->repl = &mc_ha_repl;
	ha->on_view = mc_ha_on_view;
	ha->on_won = mc_ha_on_won;
	ha->on_renewed = mc_ha_on_renewed;
	ha->serve = mc_ha_serve;
	ha->redis = !strcmp(m->cfg.ha_backend_type, "redis");
	ha->oplog = m->cfg.enable_oplog;
	ha->ttl_ms = m->cfg.ha_leader_lease_ttl_sec * 1000;
	ha->started_ms = mc_ha_now(ha);
	snprintf(ha->cluster, sizeof(ha->cluster), "%s", m->cfg.cluster_id);
	snprintf(ha->self, sizeof(ha->self), strchr(m->cfg.rpc_address, ':') ? "[%s]:%lld"
									      : "%s:%lld",
		 m->cfg.rpc_address, (long long)(m->cfg.rpc_port ? m->cfg.rpc_port : m->cfg.port));
	mc_ha_keys(ha);
	mc_wbuf_init(&ha->wbuf);
	mc_wbuf_init(&ha->done);
	if (again) {
		mc_log_notice("HA: restarted as a standby after %s", !strcmp(again, "leader")
				      ? "losing the leadership" : "an error");
		unsetenv("MC_HA_REEXEC");
	}
	if (ha->redis) {
		if (mc_ha_redis_init(ha, m->cfg.ha_backend_connstring, err, sizeof(err))) {
			mc_log_err("HA: %s", err);
			return -1;
		}
	} else {
		ha->etcd = mc_etcd_new(m->base, m->cfg.ha_backend_connstring, err, sizeof(err));
		if (ha->etcd == NULL) {
			mc_log_err("HA: %s", err);
			return -1;
		}
	}
	ha->ev_keepalive = evtimer_new(m->base, mc_ha_on_keepalive_tick, ha);
	ha->ev_fence = evtimer_new(m->base, mc_ha_on_fence, ha);
	ha->ev_poll = evtimer_new(m->base, mc_ha_on_poll, ha);
	ha->ev_rewatch = evtimer_new(m->base, mc_ha_on_rewatch, ha);
	if (ha->oplog) {
		rc = mc_master_persist_open(m);
		if (rc)
			return rc;
		if (mc_ha_log_init(ha) || mc_ha_snap_init(ha) || mc_ha_compact_init(ha))
			return -1;
	}
	mc_log_notice("HA: %s backend %s, cluster %s, publishing %s, lease %lld s%s",
		      m->cfg.ha_backend_type, m->cfg.ha_backend_connstring, ha->cluster, ha->self,
		      (long long)(ha->ttl_ms / 1000),
		      ha->oplog ? ", replicated log on" : ", no replicated log (a new leader starts "
							"empty: --enable_oplog keeps the table)");
	return 0;
}

void mc_ha_start(struct mc_master *m)
{
	struct mc_ha *ha = m->ha;
	struct timeval now = { 0, 0 };

	mc_ha_watch_view(ha);
	if (ha->oplog)
		mc_ha_log_start(ha);
	evtimer_add(ha->ev_poll, &now);
}

struct mc_ha_resign {
	int done;
};

static void mc_ha_on_resigned(void *arg, int rc, json_t *reply)
{
	(void)rc, (void)reply;
	((struct mc_ha_resign *)arg)->done = 1;
}

void mc_ha_stop(struct mc_master *m)
{
	struct mc_ha *ha = m->ha;
	struct mc_ha_resign r = { 0 };
	int64_t until;

	if (ha == NULL)
		return;
	ha->stopping = 1;
	if (!mc_ha_leading(ha))
		return;
	/* Refuse everything from now on; hand the leadership over without making the others
	 * wait for the lease to run out. */
	mc_ha_set_state(ha, MC_HA_STANDBY);
	if (ha->redis) {
		mc_ha_redis_resign(ha);
		return;
	}
	mc_ha_revoke(ha, ha->lease_id, mc_ha_on_resigned, &r);
	until = mc_ha_now(ha) + 1000;
	while (!r.done && mc_ha_now(ha) < until)
		event_base_loop(m->base, EVLOOP_ONCE);
	mc_log_notice("HA: leadership %s", r.done ? "handed back" : "left to expire");
}

void mc_ha_free(struct mc_master *m)
{
	struct mc_ha *ha = m->ha;

	if (ha == NULL)
		return;
	mc_ha_compact_fini(ha);
	mc_ha_snap_fini(ha);
	mc_ha_log_fini(ha);
	mc_ha_redis_fini(ha);
	mc_etcd_free(ha->etcd);		/* calls in flight end without their callbacks */
	free(ha->campaign_cx);
	if (ha->ev_keepalive)
		event_free(ha->ev_keepalive);
	if (ha->ev_fence)
		event_free(ha->ev_fence);
	if (ha->ev_poll)
		event_free(ha->ev_poll);
	if (ha->ev_rewatch)
		event_free(ha->ev_rewatch);
	mc_wbuf_fini(&ha->wbuf);
	mc_wbuf_fini(&ha->done);
	free(ha);
	m->ha = NULL;
	m->repl = NULL;
}

/* ---------------------------------------------------------------- metrics */

static void mc_ha_prom(struct evbuffer *b, const char *name, const char *type, const char *help,
		       long long v)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type,
			    name, v);
}

/* ha_standby_state as upstream numbers it: 0 stopped, 1 connecting, 2 syncing, 3 watching,
 * 4 recovering, 6 promoting, 7 promoted. */
static int mc_ha_standby_state(const struct mc_ha *ha)
{
	static const int map[] = {
		[MC_HA_STARTING] = 1, [MC_HA_STANDBY] = 3, [MC_HA_CANDIDATE] = 6,
		[MC_HA_RECOVERING] = 4, [MC_HA_CATCHING_UP] = 2, [MC_HA_LEADER_WARMUP] = 6,
		[MC_HA_SERVING] = 7,
	};

	return map[ha->state];
}

/* The counters and last values of struct mc_ha_metrics, exported as they are. */
static const struct {
	const char *name, *type, *help;
	size_t off;
} mc_ha_plain[] = {
#define X(n, t, h, f) { n, t, h, offsetof(struct mc_ha_metrics, f) }
	X("ha_state_transitions_total", "counter", "State machine transitions", transitions),
	X("ha_elections_won_total", "counter", "Times this master was elected leader",
	  elections_won),
	X("ha_oplog_replication_lag_ms", "gauge", "Standby: age of the last batch applied when it "
	  "was applied (ms)", lag_ms),
	X("ha_batch_record_durable_batches_total", "counter", "Batches this leader wrote to etcd",
	  batches_written),
	X("ha_batch_record_durable_entries_total", "counter", "Changes in them", entries_written),
	X("ha_batch_record_batch_bytes", "gauge", "Bytes of the last batch written",
	  last_batch_bytes),
	X("ha_batch_record_txn_latency_us", "gauge", "etcd transaction time of the last batch (us)",
	  last_write_us),
	X("ha_batch_record_retry_total", "counter", "Batch writes retried", write_retries),
	X("ha_oplog_etcd_write_failures_total", "counter", "Batch writes etcd refused",
	  write_failures),
	X("ha_oplog_applied_entries_total", "counter", "Batches applied from the log",
	  batches_applied),
	X("ha_oplog_apply_latency_us", "gauge", "Time to apply the last fetch (us)", last_apply_us),
	X("ha_oplog_watch_disconnections_total", "counter", "etcd watch streams lost", watch_breaks),
	X("ha_snapshot_operations_total", "counter", "Snapshots written", snapshots),
	X("ha_snapshot_errors_total", "counter", "Snapshots that failed", snapshot_errors),
	X("ha_snapshot_duration_us_total", "counter", "Time spent writing snapshots",
	  snapshot_us_total),
	X("ha_oplog_compactions_total", "counter", "Log compactions", compactions),
	X("ha_oplog_compacted_batches_total", "counter", "Batches deleted from etcd",
	  compacted_batches),
	X("ha_snapshot_restores_total", "counter", "Snapshots restored", restores),
#undef X
};

void mc_ha_metrics(const struct mc_master *m, struct evbuffer *b)
{
	const struct mc_ha *ha = m->ha;
	uint64_t last;
	size_t i;

	if (ha == NULL)
		return;
	last = ha->durable > ha->applied ? ha->durable : ha->applied;
	mc_ha_prom(b, "ha_is_leader", "gauge", "1 while this master holds the leadership",
		   !strcmp(mc_ha_role(m), "leader"));
	mc_ha_prom(b, "ha_standby_state", "gauge", "Runtime state (1 connecting, 2 syncing, 3 "
		   "watching, 4 recovering, 6 promoting, 7 promoted)", mc_ha_standby_state(ha));
	mc_ha_prom(b, "ha_view_version", "gauge", "View version of the leader as last seen",
		   (long long)ha->leader_version);
	mc_ha_prom(b, "ha_oplog_last_sequence_id", "gauge", "Last log batch known written",
		   (long long)last);
	mc_ha_prom(b, "ha_oplog_applied_sequence_id", "gauge", "Last log batch in our database",
		   (long long)ha->applied);
	mc_ha_prom(b, "ha_oplog_standby_lag", "gauge", "Batches this standby is behind",
		   (long long)(last - ha->applied));
	mc_ha_prom(b, "ha_pending_mutation_queue_size", "gauge", "Changes waiting for the next "
		   "batch", m->persist ? (long long)mc_persist_pending(m->persist) : 0);
	mc_ha_prom(b, "ha_batch_record_last_batch_id", "gauge", "Last batch written (ours, or seen)",
		   (long long)ha->durable);
	mc_ha_prom(b, "ha_oplog_log_batches", "gauge", "Batches in etcd (not compacted yet)",
		   (long long)(last + 1 - mc_ha_log_first(ha)));
	for (i = 0; i < sizeof(mc_ha_plain) / sizeof(mc_ha_plain[0]); i++) {
		const char *f = (const char *)&ha->x + mc_ha_plain[i].off;
		long long v;

		/* Every field is 64 bits wide, signed or not. */
		memcpy(&v, f, sizeof(v));
		mc_ha_prom(b, mc_ha_plain[i].name, mc_ha_plain[i].type, mc_ha_plain[i].help, v);
	}
}

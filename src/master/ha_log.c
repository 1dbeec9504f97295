/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The replicated log (--enable_oplog): the leader's side and the standbys'.
 *
 * Leader.  What the master records for SQLite (master_persist.c) accumulates in the pending batch
 * as requests are handled; the iteration's replies wait (rpc_server.c).  mc_ha_commit takes the
 * pending changes as one batch (in parts of at most MC_HA_BATCH_MAX bytes and
 * --oplog_batch_max_entries changes) and writes batch N+1
 * with one etcd transaction that also advances the durable prefix to N+1, under two conditions:
 * master_view still has our create revision (we lead) and the durable prefix is still N (no gap,
 * no fork).  One transaction is in flight (or waits to be sent again) at a time; whatever is
 * recorded meanwhile goes into the next one, so batches grow with the load, as the SQLite group
 * commit's do.  Once etcd has a round's last part, the batch is written to our own SQLite file
 * and the replies that waited are sent (replies of requests that came after the round began
 * wait for the next one).  A write that etcd refuses is checked: if the durable prefix is N+1
 * under our view, an earlier attempt of ours went through (its answer was lost); otherwise we
 * are no longer the leader.  A leader that cannot write steps down (ha.c), and its clients'
 * unanswered calls fail.
 *
 * Standby.  Batches are read in order from etcd (a range from applied+1, 16 at a time), each
 * applied to our SQLite file in one transaction, including the meta value ha_batch that says
 * which batch the file holds: a standby restarted or promoted knows where it is.  A watch on the
 * batches wakes the standby; the poll timer (ha.c) covers a watch that broke.  A batch missing
 * before the first one etcd still has means the log was compacted past us: the latest snapshot
 * is restored first (ha_snapshot.c).
 *
 * The log's identity: /oplog/<cluster_id>/log_id holds a random number created with the log; our
 * file remembers it (meta ha_log_id), and a file from another log (etcd was reset, or the file
 * came from elsewhere) is emptied before it follows this one.  Nothing is fetched before the
 * identity is known; a failed read of it is tried again by the fetch's retry and the poll.
 *
 * A batch in etcd is: u8 version (1), i64 wall-clock ms when written, u64 batch number, then the
 * changes as src/persist encodes them.
 * Single-threaded: the master's loop.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>

#include <event2/event.h>

#include "common/errcode.h"
#include "common/log.h"
#include "coord/etcd.h"
#include "master/ha.h"
#include "master/master.h"
#include "persist/persist.h"

#define MC_HA_BATCH_VERSION 1
#define MC_HA_BATCH_HDR 17
#define MC_HA_FETCH_LIMIT 16

static int64_t mc_ha_wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int64_t mc_ha_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void mc_ha_batch_key(const struct mc_ha *ha, uint64_t id, char *out, size_t n)
{
	snprintf(out, n, "%s%020" PRIu64, ha->batches, id);
}

/* The batch number in a key of the batches prefix, or 0. */
static uint64_t mc_ha_batch_id(const struct mc_ha *ha, const char *key, size_t len)
{
	size_t plen = strlen(ha->batches), i;
	uint64_t id = 0;

	if (len != plen + 20 || memcmp(key, ha->batches, plen))
		return 0;
	for (i = plen; i < len; i++) {
		if (key[i] < '0' || key[i] > '9')
			return 0;
		id = id * 10 + (uint64_t)(key[i] - '0');
	}
	return id;
}

/* Write one meta value into our own file (not replicated). */
static int mc_ha_local_meta(struct mc_ha *ha, const char *name, int64_t v)
{
	struct mc_wbuf w;
	struct iovec iov;
	int rc;

	mc_wbuf_init(&w);
	mc_persist_encode_meta(&w, name, v);
	iov.iov_base = w.data;
	iov.iov_len = w.len;
	rc = w.err ? -ENOMEM : mc_persist_apply_batches(ha->m->persist, &iov, 1);
	mc_wbuf_fini(&w);
	return rc;
}

static void mc_ha_on_fetch_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_ha_log_fetch(arg);
}

static void mc_ha_on_wretry(evutil_socket_t fd, short what, void *arg);

int mc_ha_log_init(struct mc_ha *ha)
{
	struct mc_master *m = ha->m;

	ha->applied = (uint64_t)mc_persist_get_meta(m->persist, "ha_batch");
	ha->fetch = mc_ha_log_fetch;
	ha->ev_fetch = evtimer_new(m->base, mc_ha_on_fetch_event, ha);
	ha->ev_wretry = evtimer_new(m->base, mc_ha_on_wretry, ha);
	if (ha->ev_fetch == NULL || ha->ev_wretry == NULL)
		return -1;
	mc_log_info("HA: our database %s holds the log up to batch %" PRIu64, m->cfg.persist_path,
		    ha->applied);
	return 0;
}

/* ---------------------------------------------------------------- the standby's side */

static void mc_ha_fetch_later(struct mc_ha *ha)
{
	struct timeval tv;

	ha->fetch_backoff_ms = ha->fetch_backoff_ms ? ha->fetch_backoff_ms * 2 : 100;
	if (ha->fetch_backoff_ms > 2000)
		ha->fetch_backoff_ms = 2000;
	tv.tv_sec = ha->fetch_backoff_ms / 1000;
	tv.tv_usec = (ha->fetch_backoff_ms % 1000) * 1000;
	evtimer_add(ha->ev_fetch, &tv);
}

/* The batches in a range answer, applied in one transaction.  0: applied (or nothing new);
 * 1: a gap before the first (the log was compacted past us); -1: failed (retry later). */
static int mc_ha_apply_range(struct mc_ha *ha, json_t *kvs)
{
	struct iovec iov[MC_HA_FETCH_LIMIT];
	char *vals[MC_HA_FETCH_LIMIT];
	size_t i, n = 0;
	uint64_t next = ha->applied + 1;
	int64_t t0 = mc_ha_us(), written = 0;
	int rc = 0;

	for (i = 0; i < json_array_size(kvs) && n < MC_HA_FETCH_LIMIT; i++) {
		json_t *kv = json_array_get(kvs, i);
		size_t klen = 0, vlen = 0;
		char *key = mc_etcd_bytes(kv, "key", &klen);
		uint64_t id = key ? mc_ha_batch_id(ha, key, klen) : 0;
		struct mc_rbuf r;

		free(key);
		if (id != next) {
			if (n == 0 && id > next)
				rc = 1;
			else if (id != 0)
				mc_log_warn("HA: batch %" PRIu64 " found where %" PRIu64 " belongs",
					    id, next);
			break;
		}
		vals[n] = mc_etcd_bytes(kv, "value", &vlen);
		if (vals[n] == NULL || vlen < MC_HA_BATCH_HDR) {
			free(vals[n]);
			mc_log_err("HA: batch %" PRIu64 " in etcd is malformed", id);
			rc = -1;
			break;
		}
		mc_rbuf_init(&r, vals[n], vlen);
		if (mc_rbuf_u8(&r) != MC_HA_BATCH_VERSION) {
			free(vals[n]);
			mc_log_err("HA: batch %" PRIu64 " has an unknown version", id);
			rc = -1;
			break;
		}
		written = mc_rbuf_i64(&r);
		if (mc_rbuf_u64(&r) != id) {
			free(vals[n]);
			mc_log_err("HA: batch %" PRIu64 " names another number", id);
			rc = -1;
			break;
		}
		iov[n].iov_base = vals[n] + MC_HA_BATCH_HDR;
		iov[n].iov_len = vlen - MC_HA_BATCH_HDR;
		n++;
		next++;
	}
	if (n > 0 && rc >= 0) {
		if (mc_persist_apply_batches(ha->m->persist, iov, (int)n) == 0) {
			ha->applied += n;
			ha->x.batches_applied += n;
			ha->x.last_apply_us = mc_ha_us() - t0;
			ha->x.lag_ms = mc_ha_wall_ms() - written;
			if (ha->x.lag_ms < 0)
				ha->x.lag_ms = 0;
			rc = 0;
		} else {
			mc_log_err("HA: cannot apply batches %" PRIu64 "..%" PRIu64 " to %s: %s",
				   ha->applied + 1, ha->applied + n, ha->m->cfg.persist_path,
				   mc_persist_last_message(ha->m->persist));
			rc = -1;
		}
	}
	for (i = 0; i < n; i++)
		free(vals[i]);
	return rc;
}

static void mc_ha_on_fetch(void *arg, int rc, json_t *reply)
{
	struct mc_ha *ha = arg;
	json_t *kvs = json_object_get(reply, "kvs");
	int more = json_is_true(json_object_get(reply, "more"));
	int got;

	ha->log_call = NULL;
	if (rc) {
		mc_log_debug("HA: reading the log failed: %s", mc_strerror(rc));
		mc_ha_fetch_later(ha);
		return;
	}
	mc_ha_on_contact(ha);
	got = mc_ha_apply_range(ha, kvs);
	if (got == 1) {
		mc_log_warn("HA: the log in etcd starts after our batch %" PRIu64
			    " (compacted): restoring the latest snapshot", ha->applied);
		mc_ha_snap_restore(ha);
		return;
	}
	if (got < 0) {
		mc_ha_fetch_later(ha);
		return;
	}
	ha->fetch_backoff_ms = 0;
	if (ha->state == MC_HA_CATCHING_UP && ha->applied >= ha->target) {
		mc_log_info("HA: caught up with the log at batch %" PRIu64, ha->applied);
		ha->durable = ha->applied;
		ha->serve(ha);
		return;
	}
	if (more || json_array_size(kvs) >= MC_HA_FETCH_LIMIT || ha->fetch_again) {
		ha->fetch_again = 0;
		event_active(ha->ev_fetch, EV_TIMEOUT, 0);
	} else if (ha->state == MC_HA_CATCHING_UP) {
		mc_ha_step_down(ha, "the log ends before its durable prefix");
	}
}

static void mc_ha_log_read_id(struct mc_ha *ha);

void mc_ha_log_fetch(struct mc_ha *ha)
{
	char key[MC_HA_KEY_MAX + 24];
	json_t *b;

	if (mc_ha_snap_busy(ha))
		return;
	if (ha->log_call) {
		ha->fetch_again = 1;
		return;
	}
	if (ha->log_id == 0) {
		/* The log's identity comes first, and its read failed (etcd out of reach as we
		 * started): read it again, from this poll or this retry.  The watches may never
		 * break again to do it, and without it a standby neither follows nor campaigns. */
		mc_ha_log_read_id(ha);
		return;
	}
	if (ha->state == MC_HA_SERVING || ha->state == MC_HA_RECOVERING)
		return;
	mc_ha_batch_key(ha, ha->applied + 1, key, sizeof(key));
	b = json_pack("{sososI}", "key", mc_etcd_b64s(key), "range_end",
		      mc_etcd_b64s(ha->batches_end), "limit", (json_int_t)MC_HA_FETCH_LIMIT);
	ha->log_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, 5000, mc_ha_on_fetch, ha);
	json_decref(b);
}

/* ---------------------------------------------------------------- the log's identity */

static void mc_ha_adopt_log(struct mc_ha *ha, int64_t id)
{
	struct mc_master *m = ha->m;
	int64_t ours = mc_persist_get_meta(m->persist, "ha_log_id");

	if (ours != id) {
		if (ours != 0 || ha->applied != 0)
			mc_log_warn("HA: %s holds another log's state (log %lld, batch %" PRIu64
				    "; etcd's log is %lld): emptying it to follow this one",
				    m->cfg.persist_path, (long long)ours, ha->applied, (long long)id);
		if (mc_persist_wipe(m->persist) || mc_ha_local_meta(ha, "ha_log_id", id)) {
			mc_log_err("HA: cannot reset %s: %s", m->cfg.persist_path,
				   mc_persist_last_message(m->persist));
			mc_ha_fetch_later(ha);
			return;
		}
		ha->applied = 0;
	}
	ha->log_id = id;
	mc_log_info("HA: following log %lld of cluster %s from batch %" PRIu64, (long long)id,
		    ha->cluster, ha->applied + 1);
	mc_ha_log_fetch(ha);
	/* Campaigning waited for this. */
	ha->on_view(ha, ha->leader, ha->leader_version);
}

static void mc_ha_on_log_id(void *arg, int rc, json_t *reply)
{
	struct mc_ha *ha = arg;
	json_t *range = reply, *kv;
	size_t len = 0;
	char *v;

	ha->log_call = NULL;
	if (rc) {
		/* The first failure is a warning; the retries (every few seconds while etcd stays
		 * out of reach) only at debug level, until a read succeeds. */
		if (ha->log_id_failures++ == 0)
			mc_log_warn("HA: cannot read the log's identity %s from etcd: %s; trying "
				    "again", ha->log_id_key, mc_strerror(rc));
		else
			mc_log_debug("HA: reading %s failed again (%u times): %s", ha->log_id_key,
				     ha->log_id_failures, mc_strerror(rc));
		mc_ha_fetch_later(ha);
		return;
	}
	if (ha->log_id_failures) {
		mc_log_notice("HA: read the log's identity %s after %u failed tries",
			      ha->log_id_key, ha->log_id_failures);
		ha->log_id_failures = 0;
	}
	mc_ha_on_contact(ha);
	/* Either the range answer, or the create transaction's (its failure branch ranges). */
	if (json_object_get(reply, "responses")) {
		json_t *r0 = json_array_get(json_object_get(reply, "responses"), 0);

		range = json_object_get(r0, "response_range");
		if (json_is_true(json_object_get(reply, "succeeded"))) {
			mc_ha_log_read_id(ha);
			return;
		}
	}
	kv = json_array_get(json_object_get(range, "kvs"), 0);
	v = kv ? mc_etcd_bytes(kv, "value", &len) : NULL;
	if (v && len > 0) {
		char *end;
		long long id = strtoll(v, &end, 10);
		int bad = *end != '\0' || id <= 0;

		free(v);
		if (bad) {
			mc_log_err("HA: %s in etcd is malformed", ha->log_id_key);
			mc_ha_fetch_later(ha);
			return;
		}
		mc_ha_adopt_log(ha, id);
		return;
	}
	free(v);
	{
		/* No log yet: create it (if nobody beat us to it). */
		uint64_t r = 0;
		char num[32];
		json_t *k = mc_etcd_b64s(ha->log_id_key), *txn;

		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint64_t)mc_ha_us() * 2654435761u;
		snprintf(num, sizeof(num), "%lld", (long long)((r >> 1) | 1));
		txn = json_pack("{s[{sOssssso}]s[{s{sOso}}]s[{s{sO}}]}",
				"compare", "key", k, "target", "CREATE", "result", "EQUAL",
				"create_revision", mc_etcd_num(0),
				"success", "request_put", "key", k, "value", mc_etcd_b64s(num),
				"failure", "request_range", "key", k);
		json_decref(k);
		ha->log_call = mc_etcd_post(ha->etcd, "/v3/kv/txn", txn, 5000, mc_ha_on_log_id, ha);
		json_decref(txn);
	}
}

static void mc_ha_log_read_id(struct mc_ha *ha)
{
	json_t *b = json_pack("{so}", "key", mc_etcd_b64s(ha->log_id_key));

	ha->log_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, 5000, mc_ha_on_log_id, ha);
	json_decref(b);
}

/* ---------------------------------------------------------------- watching the batches */

static void mc_ha_on_log_event(void *arg, int rc, json_t *msg)
{
	struct mc_ha *ha = arg;
	struct timeval tv = { 0, 500000 };
	json_t *ev;
	size_t i;

	if (rc) {
		ha->watch_log = NULL;
		ha->x.watch_breaks++;
		event_add(ha->ev_rewatch, &tv);
		return;
	}
	mc_ha_on_contact(ha);
	/* The newest batch written, for a standby's lag (the leader knows its own). */
	json_array_foreach(json_object_get(msg, "events"), i, ev) {
		size_t klen = 0;
		char *key = mc_etcd_bytes(json_object_get(ev, "kv"), "key", &klen);
		uint64_t id = key ? mc_ha_batch_id(ha, key, klen) : 0;

		free(key);
		if (ha->state != MC_HA_SERVING && id > ha->durable)
			ha->durable = id;
	}
	if (json_array_size(json_object_get(msg, "events")) > 0)
		mc_ha_log_fetch(ha);
}

void mc_ha_log_start(struct mc_ha *ha)
{
	json_t *c;

	if (ha->log_id == 0 && ha->log_call == NULL)
		mc_ha_log_read_id(ha);
	if (ha->watch_log)
		return;
	c = json_pack("{soso}", "key", mc_etcd_b64s(ha->batches), "range_end",
		      mc_etcd_b64s(ha->batches_end));
	ha->watch_log = mc_etcd_watch(ha->etcd, c, mc_ha_on_log_event, ha);
	json_decref(c);
	mc_ha_log_fetch(ha);
}

/* ---------------------------------------------------------------- catching up */

static void mc_ha_on_prefix(void *arg, int rc, json_t *reply)
{
	struct mc_ha *ha = arg;
	json_t *kv = json_array_get(json_object_get(reply, "kvs"), 0);
	size_t len = 0;
	char *v;

	ha->log_call = NULL;
	if (ha->state != MC_HA_CATCHING_UP)
		return;
	if (rc) {
		mc_ha_step_down(ha, "cannot read the log's durable prefix");
		return;
	}
	v = kv ? mc_etcd_bytes(kv, "value", &len) : NULL;
	ha->target = v ? strtoull(v, NULL, 10) : 0;
	free(v);
	if (ha->applied > ha->target) {
		mc_log_err("HA: our database holds batch %" PRIu64 " but the log ends at %" PRIu64,
			   ha->applied, ha->target);
		mc_ha_step_down(ha, "our database is ahead of the log");
		return;
	}
	mc_log_info("HA: catching up from batch %" PRIu64 " to %" PRIu64, ha->applied + 1,
		    ha->target);
	if (ha->applied == ha->target) {
		ha->durable = ha->applied;
		ha->serve(ha);
		return;
	}
	mc_ha_log_fetch(ha);
}

void mc_ha_log_catch_up(struct mc_ha *ha)
{
	json_t *b;

	/* Any fetch in flight was for the standby: start over from the prefix. */
	mc_etcd_cancel(ha->log_call);
	ha->log_call = NULL;
	ha->fetch_again = 0;
	if (ha->log_id == 0 || mc_ha_snap_busy(ha)) {
		mc_ha_step_down(ha, "elected before knowing the log");
		return;
	}
	b = json_pack("{so}", "key", mc_etcd_b64s(ha->prefix_key));
	ha->log_call = mc_etcd_post(ha->etcd, "/v3/kv/range", b, ha->ttl_ms, mc_ha_on_prefix, ha);
	json_decref(b);
}

/* ---------------------------------------------------------------- the leader's side */

static void mc_ha_write_part(struct mc_ha *ha);
static void mc_ha_post_write(struct mc_ha *ha);
static void mc_ha_release(struct mc_ha *ha);

/* The answer's failure branch: did an earlier attempt of ours write batch id already? */
static int mc_ha_landed(struct mc_ha *ha, json_t *reply, uint64_t id)
{
	json_t *rs = json_object_get(reply, "responses");
	json_t *view = json_array_get(json_object_get(json_object_get(json_array_get(rs, 0),
								       "response_range"), "kvs"), 0);
	json_t *pre = json_array_get(json_object_get(json_object_get(json_array_get(rs, 1),
								      "response_range"), "kvs"), 0);
	size_t len = 0;
	char *v = pre ? mc_etcd_bytes(pre, "value", &len) : NULL;
	int ok = view && mc_etcd_i64(view, "create_revision") == ha->view_version && v &&
		 strtoull(v, NULL, 10) == id;

	free(v);
	return ok;
}

static void mc_ha_on_written(void *arg, int rc, json_t *reply)
{
	struct mc_ha *ha = arg;
	struct mc_master *m = ha->m;
	uint64_t id = ha->durable + 1;
	struct iovec iov;

	ha->write_call = NULL;
	if (rc) {
		int64_t now = mc_ha_now(ha);
		struct timeval tv = { 0, 50000 };

		ha->x.write_failures++;
		/* etcd did not answer (the batch may or may not have landed: the next try's
		 * comparison tells): try again while the lease lasts, within
		 * --batch_oplog_retry_timeout_sec. */
		if (now + 100 < ha->valid_until &&
		    now - ha->write_first_ms < ha->m->cfg.batch_oplog_retry_timeout_sec * 1000) {
			evtimer_add(ha->ev_wretry, &tv);
			return;
		}
		mc_ha_step_down(ha, "cannot write the log to etcd before our lease ends");
		return;
	}
	json_decref(ha->wtxn);
	ha->wtxn = NULL;
	mc_ha_on_contact(ha);
	if (!json_is_true(json_object_get(reply, "succeeded")) && !mc_ha_landed(ha, reply, id)) {
		ha->x.write_failures++;
		mc_ha_step_down(ha, "etcd refused our batch: another master leads");
		return;
	}
	ha->x.last_write_us = mc_ha_us() - ha->write_started;
	ha->x.batches_written++;
	ha->x.entries_written += ha->wentries;
	ha->x.last_batch_bytes = ha->wbuf.len;
	ha->durable = id;
	/* Durable.  The replies go and the next write starts at once; our own file gets the batch
	 * after (a leader that dies first reads it back from etcd). */
	{
		struct mc_wbuf t = ha->wbuf;

		ha->wbuf = ha->done;
		ha->done = t;
	}
	if (ha->round_left > 0) {
		mc_ha_write_part(ha);
	} else {
		ha->round = 0;
		mc_ha_release(ha);
		mc_ha_commit(m);
	}
	iov.iov_base = ha->done.data + MC_HA_BATCH_HDR;
	iov.iov_len = ha->done.len - MC_HA_BATCH_HDR;
	if (mc_persist_apply_batches(m->persist, &iov, 1) != 0)
		mc_ha_step_down(ha, "our own database fails");
	ha->applied = id;
}

static void mc_ha_write_part(struct mc_ha *ha)
{
	struct mc_master *m = ha->m;
	struct mc_persist *p = m->persist;
	uint64_t id = ha->durable + 1;
	size_t before = mc_persist_pending_bytes(p), took;
	char key[MC_HA_KEY_MAX + 24], num[32];
	json_t *vk = mc_etcd_b64s(ha->view_key), *pk = mc_etcd_b64s(ha->prefix_key), *cmp, *txn;

	mc_wbuf_reset(&ha->wbuf);
	mc_wbuf_u8(&ha->wbuf, MC_HA_BATCH_VERSION);
	mc_wbuf_i64(&ha->wbuf, mc_ha_wall_ms());
	mc_wbuf_u64(&ha->wbuf, id);
	ha->wentries = mc_master_persist_take(m, &ha->wbuf, MC_HA_BATCH_MAX,
					      (size_t)m->cfg.oplog_batch_max_entries);
	mc_persist_encode_meta(&ha->wbuf, "ha_batch", (int64_t)id);
	took = before - mc_persist_pending_bytes(p);
	ha->round_left = ha->round_left > took ? ha->round_left - took : 0;
	if (ha->wbuf.err) {
		json_decref(vk);
		json_decref(pk);
		mc_ha_step_down(ha, "out of memory for a batch");
		return;
	}
	mc_ha_batch_key(ha, id, key, sizeof(key));
	snprintf(num, sizeof(num), "%" PRIu64, id - 1);
	if (id == 1)
		cmp = json_pack("{sOssssso}", "key", pk, "target", "CREATE", "result", "EQUAL",
				"create_revision", mc_etcd_num(0));
	else
		cmp = json_pack("{sOssssso}", "key", pk, "target", "VALUE", "result", "EQUAL",
				"value", mc_etcd_b64s(num));
	snprintf(num, sizeof(num), "%" PRIu64, id);
	txn = json_pack("{s[{sOssssso}o]s[{s{soso}}{s{sOso}}]s[{s{sO}}{s{sO}}]}",
			"compare", "key", vk, "target", "CREATE", "result", "EQUAL",
			"create_revision", mc_etcd_num(ha->view_version), cmp,
			"success", "request_put", "key", mc_etcd_b64s(key), "value",
			mc_etcd_b64(ha->wbuf.data, ha->wbuf.len),
			"request_put", "key", pk, "value", mc_etcd_b64s(num),
			"failure", "request_range", "key", vk, "request_range", "key", pk);
	json_decref(vk);
	json_decref(pk);
	/* One line per batch built; a number never comes twice (test_ha_write_retry.sh). */
	mc_log_debug("oplog: batch %" PRIu64 " built: %zu changes, %zu bytes", id, ha->wentries,
		     ha->wbuf.len);
	json_decref(ha->wtxn);
	ha->wtxn = txn;
	ha->write_first_ms = mc_ha_now(ha);
	mc_ha_post_write(ha);
}

/* Send the part's transaction (again), bounded by what is left of the lease. */
static void mc_ha_post_write(struct mc_ha *ha)
{
	int64_t left = ha->valid_until - mc_ha_now(ha);

	ha->write_started = mc_ha_us();
	ha->write_call = ha->wtxn ? mc_etcd_post(ha->etcd, "/v3/kv/txn", ha->wtxn,
						 left > 100 ? left : 100, mc_ha_on_written, ha)
				  : NULL;
	if (ha->write_call == NULL)
		mc_ha_step_down(ha, "out of memory for a batch");
}

static void mc_ha_on_wretry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_ha_post_write(arg);
}

struct mc_ha_waiter {
	struct mc_ha_waiter *next;
	void (*fn)(void *arg);
	void *arg;
};

/* Bind what waits now (RPC replies, mc_ha_when_durable callbacks) to the round being written. */
static void mc_ha_seal(struct mc_ha *ha)
{
	struct mc_ha_waiter **tail = &ha->sealed_waiters;

	mc_rpc_server_seal(ha->m);
	while (*tail)
		tail = &(*tail)->next;
	*tail = ha->waiters;
	ha->waiters = NULL;
}

/* The round is durable: let what waited for it go. */
static void mc_ha_release(struct mc_ha *ha)
{
	struct mc_ha_waiter *w = ha->sealed_waiters, *n;

	ha->sealed_waiters = NULL;
	mc_rpc_server_release(ha->m, 0);
	for (; w; w = n) {
		n = w->next;
		w->fn(w->arg);
		free(w);
	}
}

void mc_ha_when_durable(struct mc_master *m, void (*fn)(void *arg), void *arg)
{
	struct mc_ha_waiter *w = calloc(1, sizeof(*w));

	if (w == NULL) {
		fn(arg);	/* daemon code aborts elsewhere; here the reply goes at once */
		return;
	}
	w->fn = fn;
	w->arg = arg;
	w->next = m->ha->waiters;
	m->ha->waiters = w;
	mc_ha_commit(m);
}

int mc_ha_commit(struct mc_master *m)
{
	struct mc_ha *ha = m->ha;
	struct mc_persist *p = m->persist;

	if (!ha->oplog || ha->state != MC_HA_SERVING) {
		/* Nothing is made durable here: without the log a leader acknowledges at once,
		 * and what a standby sends are refusals.  A leader that stops (mc_ha_stop) while
		 * a part is being written keeps the replies that wait for it until etcd answers:
		 * they go if it landed, and never if the process ends first. */
		mc_ha_seal(ha);
		if (ha->wtxn == NULL)
			mc_ha_release(ha);
		return 0;
	}
	if (ha->wtxn) {
		/* A part is being written: in flight, or waiting to be sent again after etcd did
		 * not answer (write_call is NULL meanwhile).  It keeps its batch number and its
		 * changes, and its replies wait for it; replies that depend on nothing newer than
		 * the round go with it. */
		if (mc_persist_pending(p) == 0)
			mc_ha_seal(ha);
		return 0;
	}
	mc_ha_seal(ha);
	if (mc_persist_pending(p) == 0) {
		mc_ha_release(ha);
		return 0;
	}
	ha->round = 1;
	ha->round_left = mc_persist_pending_bytes(p);
	mc_ha_write_part(ha);
	return 0;
}

void mc_ha_log_fini(struct mc_ha *ha)
{
	struct mc_ha_waiter *w, *n;

	for (w = ha->waiters; w; w = n) {
		n = w->next;
		free(w);
	}
	for (w = ha->sealed_waiters; w; w = n) {
		n = w->next;
		free(w);
	}
	mc_etcd_cancel(ha->log_call);
	mc_etcd_cancel(ha->watch_log);
	mc_etcd_cancel(ha->write_call);
	if (ha->ev_wretry)
		event_free(ha->ev_wretry);
	ha->ev_wretry = NULL;
	json_decref(ha->wtxn);
	ha->wtxn = NULL;
	if (ha->ev_fetch)
		event_free(ha->ev_fetch);
}

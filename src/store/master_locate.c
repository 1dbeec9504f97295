/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding the leader of HA masters (see master_client.c): a client given
 * master_server_address=etcd://h1:2379;h2:2379 reads mooncake-store/<cluster>/master_view from
 * etcd, which holds the leader's RPC address; redis://host:port reads the field leader_address
 * of the hash mooncake-store/{<cluster>}/master_view.  <cluster> is MC_STORE_CLUSTER_ID
 * (mooncake_cluster when unset), which must equal the masters' --cluster_id.  These are the keys
 * upstream's masters publish, so a client of either finds the leader of either.
 *
 * One lookup at a time, asynchronous on the store's loop (etcd through src/coord/etcd.c,
 * redis through hiredis' libevent adapter); answers are untrusted and checked to be host:port.
 * Owned by the store's loop thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_HIREDIS
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#endif

#include "common/errcode.h"
#include "common/log.h"
#include "coord/etcd.h"
#include "store/store.h"

#define MC_LOCATE_TIMEOUT_MS 1000

struct mc_master_locate {
	struct event_base *base;
	int redis;
	char key[300];
	struct mc_etcd *etcd;
	struct mc_etcd_call *call;
	char redis_host[256];
	int redis_port;
#ifdef HAVE_HIREDIS
	redisAsyncContext *rc;
	struct event *ev_timeout;
#endif
	int busy;
	mc_locate_fn fn;
	void *arg;
};

int mc_master_locate_wanted(const char *addr)
{
	return !strncmp(addr, "etcd://", 7) || !strncmp(addr, "redis://", 8);
}

static const char *mc_locate_cluster(void)
{
	const char *c = getenv("MC_STORE_CLUSTER_ID");

	return c && *c ? c : "mooncake_cluster";
}

struct mc_master_locate *mc_master_locate_new(struct event_base *base, const char *addr)
{
	struct mc_master_locate *l = calloc(1, sizeof(*l));
	char err[256];
	size_t n;

	if (l == NULL)
		return NULL;
	l->base = base;
	l->redis = !strncmp(addr, "redis://", 8);
	if (l->redis) {
		const char *hp = addr + 8, *at = strrchr(hp, '@'), *colon;

		if (at)
			hp = at + 1;
		colon = strrchr(hp, ':');
		n = colon ? (size_t)(colon - hp) : strcspn(hp, "/");
		snprintf(l->redis_host, sizeof(l->redis_host), "%.*s", (int)n, hp);
		l->redis_port = colon ? atoi(colon + 1) : 6379;
		snprintf(l->key, sizeof(l->key), "mooncake-store/{%s}/master_view",
			 mc_locate_cluster());
#ifndef HAVE_HIREDIS
		mc_log_err("master_server_address %s: this build has no hiredis", addr);
		free(l);
		return NULL;
#endif
		return l;
	}
	snprintf(l->key, sizeof(l->key), "mooncake-store/%s/master_view", mc_locate_cluster());
	l->etcd = mc_etcd_new(base, addr, err, sizeof(err));
	if (l->etcd == NULL) {
		mc_log_err("master_server_address %s: %s", addr, err);
		free(l);
		return NULL;
	}
	return l;
}

/* Hand the answer over (value: the leader's address, or NULL). */
static void mc_locate_done(struct mc_master_locate *l, int rc, const char *value, size_t len)
{
	char leader[300] = "";

	l->busy = 0;
	if (rc == 0 && value && len > 0 && len < sizeof(leader) && !memchr(value, '\0', len))
		snprintf(leader, sizeof(leader), "%.*s", (int)len, value);
	else if (rc == 0)
		rc = -ENOENT;
	l->fn(l->arg, rc, leader);
}

static void mc_locate_on_etcd(void *arg, int rc, json_t *reply)
{
	struct mc_master_locate *l = arg;
	json_t *kv = json_array_get(json_object_get(reply, "kvs"), 0);
	size_t len = 0;
	char *v = rc == 0 && kv ? mc_etcd_bytes(kv, "value", &len) : NULL;

	l->call = NULL;
	mc_locate_done(l, rc, v, len);
	free(v);
}

#ifdef HAVE_HIREDIS
static void mc_locate_redis_close(struct mc_master_locate *l)
{
	if (l->ev_timeout) {
		event_free(l->ev_timeout);
		l->ev_timeout = NULL;
	}
	if (l->rc) {
		redisAsyncContext *c = l->rc;

		l->rc = NULL;
		redisAsyncFree(c);
	}
}

static void mc_locate_on_redis(redisAsyncContext *c, void *r, void *arg)
{
	struct mc_master_locate *l = arg;
	redisReply *reply = r;

	(void)c;
	if (!l->busy)
		return;
	if (reply && reply->type == REDIS_REPLY_STRING)
		mc_locate_done(l, 0, reply->str, reply->len);
	else
		mc_locate_done(l, reply && reply->type == REDIS_REPLY_NIL ? 0 : -EIO, NULL, 0);
}

static void mc_locate_redis_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master_locate *l = arg;

	(void)fd;
	(void)what;
	mc_locate_redis_close(l);
	if (l->busy)
		mc_locate_done(l, -ETIMEDOUT, NULL, 0);
}

static void mc_locate_redis_lookup(struct mc_master_locate *l)
{
	struct timeval tv = { 0, MC_LOCATE_TIMEOUT_MS * 1000 };
	const char *pass = getenv("MC_REDIS_PASSWORD"), *user = getenv("MC_REDIS_USERNAME");

	mc_locate_redis_close(l);
	l->rc = redisAsyncConnect(l->redis_host, l->redis_port);
	if (l->rc == NULL || l->rc->err || redisLibeventAttach(l->rc, l->base) != REDIS_OK) {
		mc_locate_redis_close(l);
		mc_locate_done(l, -EIO, NULL, 0);
		return;
	}
	l->ev_timeout = evtimer_new(l->base, mc_locate_redis_timeout, l);
	evtimer_add(l->ev_timeout, &tv);
	if (pass && *pass) {
		if (user && *user)
			redisAsyncCommand(l->rc, NULL, NULL, "AUTH %s %s", user, pass);
		else
			redisAsyncCommand(l->rc, NULL, NULL, "AUTH %s", pass);
	}
	redisAsyncCommand(l->rc, mc_locate_on_redis, l, "HGET %s leader_address", l->key);
}
#endif

void mc_master_locate_lookup(struct mc_master_locate *l, mc_locate_fn fn, void *arg)
{
	json_t *b;

	l->fn = fn;
	l->arg = arg;
	l->busy = 1;
	if (l->redis) {
#ifdef HAVE_HIREDIS
		mc_locate_redis_lookup(l);
#endif
		return;
	}
	b = json_pack("{so}", "key", mc_etcd_b64s(l->key));
	l->call = mc_etcd_post(l->etcd, "/v3/kv/range", b, MC_LOCATE_TIMEOUT_MS, mc_locate_on_etcd,
			       l);
	json_decref(b);
	if (l->call == NULL)
		mc_locate_done(l, -ENOMEM, NULL, 0);
}

void mc_master_locate_free(struct mc_master_locate *l)
{
	if (l == NULL)
		return;
	l->busy = 0;
	mc_etcd_cancel(l->call);
	mc_etcd_free(l->etcd);
#ifdef HAVE_HIREDIS
	mc_locate_redis_close(l);
#endif
	free(l);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election on redis (--ha_backend_type=redis), upstream's way: the hash
 * mooncake-store/{<cluster_id>}/master_view holds leader_address, view_version and owner_token
 * under a PEXPIRE of the lease TTL; a Lua script creates it only if absent (taking the next
 * view_version from mooncake-store/{<cluster_id>}/master_view_version), another extends it only
 * for its owner, a third deletes it only for its owner.  Redis elects; it holds no log: a new
 * leader starts with an empty table and the clients mount their segments again (objects written
 * before the switch are lost, as with upstream).  Fencing is the same as with etcd (ha.c): the
 * key expires no earlier than TTL after redis ran the renewal, which was after we sent it.
 *
 * One connection through hiredis' libevent adapter, made again after any failure; every command
 * has a deadline of its own (hiredis 0.14 has none), past which the connection is dropped and the
 * command counts as failed.  MC_REDIS_USERNAME / MC_REDIS_PASSWORD / MC_REDIS_DB_INDEX as for the
 * engine's redis metadata.  Loop thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "master/ha.h"
#include "master/master.h"

#ifdef HAVE_HIREDIS
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#define MC_REDIS_CMD_MS 1000

static const char mc_redis_acquire[] =
	"if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end "
	"local v = redis.call('INCR', KEYS[2]) "
	"redis.call('HSET', KEYS[1], 'leader_address', ARGV[1], 'view_version', tostring(v), "
	"'owner_token', ARGV[3]) "
	"redis.call('PEXPIRE', KEYS[1], ARGV[2]) "
	"return {1, v}";
static const char mc_redis_renew[] =
	"if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
	"if redis.call('HGET', KEYS[1], 'owner_token') ~= ARGV[1] then return 0 end "
	"redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1";
static const char mc_redis_release[] =
	"if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
	"if redis.call('HGET', KEYS[1], 'owner_token') ~= ARGV[1] then return -1 end "
	"redis.call('DEL', KEYS[1]) return 1";

enum mc_redis_cmd { RC_CAMPAIGN, RC_RENEW, RC_VIEW, RC_RELEASE, RC_COUNT };

struct mc_ha_redis {
	struct mc_ha *ha;
	char host[256];
	int port;
	char key[300], version_key[300];
	char token[33];
	redisAsyncContext *ac;
	int connected;
	int busy[RC_COUNT];		/* a command of that kind waits for its answer */
	int64_t sent[RC_COUNT];
	struct event *ev_deadline;
};

/* The connection failed (or was dropped): every pending command gets a NULL reply. */
static void mc_redis_on_disconnect(const redisAsyncContext *c, int status)
{
	struct mc_ha_redis *rd = c->data;

	(void)status;
	if (rd && rd->ac == c) {
		rd->ac = NULL;
		rd->connected = 0;
	}
}

static void mc_redis_on_connect(const redisAsyncContext *c, int status)
{
	struct mc_ha_redis *rd = c->data;

	if (rd == NULL || rd->ac != c)
		return;
	if (status != REDIS_OK) {
		mc_log_warn("HA: redis %s:%d: %s", rd->host, rd->port, c->errstr);
		rd->ac = NULL;		/* hiredis frees it */
		return;
	}
	rd->connected = 1;
}

static redisAsyncContext *mc_redis_conn(struct mc_ha_redis *rd)
{
	const char *user = getenv("MC_REDIS_USERNAME"), *pass = getenv("MC_REDIS_PASSWORD");
	const char *db = getenv("MC_REDIS_DB_INDEX");

	if (rd->ac)
		return rd->ac;
	rd->ac = redisAsyncConnect(rd->host, rd->port);
	if (rd->ac == NULL)
		return NULL;
	if (rd->ac->err) {
		mc_log_warn("HA: redis %s:%d: %s", rd->host, rd->port, rd->ac->errstr);
		redisAsyncFree(rd->ac);
		rd->ac = NULL;
		return NULL;
	}
	rd->ac->data = rd;
	redisLibeventAttach(rd->ac, rd->ha->m->base);
	redisAsyncSetConnectCallback(rd->ac, mc_redis_on_connect);
	redisAsyncSetDisconnectCallback(rd->ac, mc_redis_on_disconnect);
	if (pass && *pass) {
		if (user && *user)
			redisAsyncCommand(rd->ac, NULL, NULL, "AUTH %s %s", user, pass);
		else
			redisAsyncCommand(rd->ac, NULL, NULL, "AUTH %s", pass);
	}
	if (db && *db && atoi(db) > 0)
		redisAsyncCommand(rd->ac, NULL, NULL, "SELECT %d", atoi(db));
	return rd->ac;
}

/* Commands past their deadline: drop the connection (they then end with a NULL reply). */
static void mc_redis_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct mc_ha_redis *rd = arg;
	int64_t now = mc_ha_now(rd->ha);
	struct timeval tv = { 0, 200000 };
	int i;

	(void)fd;
	(void)what;
	evtimer_add(rd->ev_deadline, &tv);
	for (i = 0; i < RC_COUNT; i++)
		if (rd->busy[i] && now - rd->sent[i] > MC_REDIS_CMD_MS && rd->ac) {
			mc_log_warn("HA: redis %s:%d does not answer: reconnecting", rd->host,
				    rd->port);
			redisAsyncDisconnect(rd->ac);
			rd->ac = NULL;
			rd->connected = 0;
			return;
		}
}

static int mc_redis_begin(struct mc_ha_redis *rd, enum mc_redis_cmd k)
{
	if (rd->busy[k] || mc_redis_conn(rd) == NULL)
		return -1;
	rd->busy[k] = 1;
	rd->sent[k] = mc_ha_now(rd->ha);
	return 0;
}

/* A reply that is an integer, or an integer inside a string. */
static long long mc_redis_int(const redisReply *r)
{
	if (r == NULL)
		return -1;
	if (r->type == REDIS_REPLY_INTEGER)
		return r->integer;
	if (r->type == REDIS_REPLY_STRING)
		return strtoll(r->str, NULL, 10);
	return -1;
}

static void mc_redis_on_view(redisAsyncContext *c, void *r, void *arg)
{
	struct mc_ha_redis *rd = arg;
	redisReply *reply = r;
	char leader[288] = "";

	(void)c;
	rd->busy[RC_VIEW] = 0;
	if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
		return;
	mc_ha_on_contact(rd->ha);
	if (reply->element[0]->type == REDIS_REPLY_STRING &&
	    reply->element[0]->len < sizeof(leader))
		snprintf(leader, sizeof(leader), "%.*s", (int)reply->element[0]->len,
			 reply->element[0]->str);
	rd->ha->on_view(rd->ha, leader, leader[0] ? mc_redis_int(reply->element[1]) : 0);
}

void mc_ha_redis_read_view(struct mc_ha *ha)
{
	struct mc_ha_redis *rd = ha->rd;

	if (mc_redis_begin(rd, RC_VIEW))
		return;
	redisAsyncCommand(rd->ac, mc_redis_on_view, rd, "HMGET %s leader_address view_version",
			  rd->key);
}

static void mc_redis_on_campaign(redisAsyncContext *c, void *r, void *arg)
{
	struct mc_ha_redis *rd = arg;
	struct mc_ha *ha = rd->ha;
	redisReply *reply = r;

	(void)c;
	rd->busy[RC_CAMPAIGN] = 0;
	if (ha->state != MC_HA_CANDIDATE)
		return;
	if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
	    mc_redis_int(reply->element[0]) == 1) {
		mc_ha_on_contact(ha);
		ha->valid_until = rd->sent[RC_CAMPAIGN] + ha->ttl_ms - (ha->ttl_ms / 5 < 300 ? 300
									     : ha->ttl_ms / 5);
		ha->on_won(ha, mc_redis_int(reply->element[1]));
		return;
	}
	mc_ha_set_state(ha, MC_HA_STANDBY);
	if (reply == NULL)
		mc_log_warn("HA: campaign failed: redis %s:%d did not answer", rd->host, rd->port);
	else
		mc_ha_redis_read_view(ha);
}

void mc_ha_redis_campaign(struct mc_ha *ha)
{
	struct mc_ha_redis *rd = ha->rd;

	if (mc_redis_begin(rd, RC_CAMPAIGN)) {
		mc_ha_set_state(ha, MC_HA_STANDBY);
		return;
	}
	redisAsyncCommand(rd->ac, mc_redis_on_campaign, rd, "EVAL %s 2 %s %s %s %lld %s",
			  mc_redis_acquire, rd->key, rd->version_key, ha->self,
			  (long long)ha->ttl_ms, rd->token);
}

static void mc_redis_on_renew(redisAsyncContext *c, void *r, void *arg)
{
	struct mc_ha_redis *rd = arg;
	redisReply *reply = r;

	(void)c;
	rd->busy[RC_RENEW] = 0;
	if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
		mc_log_warn("HA: lease renewal failed (redis %s:%d)", rd->host, rd->port);
		return;		/* the fence decides */
	}
	mc_ha_on_contact(rd->ha);
	if (mc_redis_int(reply) != 1)
		mc_ha_step_down(rd->ha, "redis says our leadership expired");
	rd->ha->on_renewed(rd->ha, rd->sent[RC_RENEW]);
}

void mc_ha_redis_keepalive(struct mc_ha *ha)
{
	struct mc_ha_redis *rd = ha->rd;

	if (mc_redis_begin(rd, RC_RENEW))
		return;
	redisAsyncCommand(rd->ac, mc_redis_on_renew, rd, "EVAL %s 1 %s %s %lld", mc_redis_renew,
			  rd->key, rd->token, (long long)ha->ttl_ms);
}

static void mc_redis_on_release(redisAsyncContext *c, void *r, void *arg)
{
	struct mc_ha_redis *rd = arg;

	(void)c;
	(void)r;
	rd->busy[RC_RELEASE] = 0;
}

void mc_ha_redis_resign(struct mc_ha *ha)
{
	struct mc_ha_redis *rd = ha->rd;
	int64_t until = mc_ha_now(ha) + 1000;

	if (mc_redis_begin(rd, RC_RELEASE))
		return;
	redisAsyncCommand(rd->ac, mc_redis_on_release, rd, "EVAL %s 1 %s %s", mc_redis_release,
			  rd->key, rd->token);
	while (rd->busy[RC_RELEASE] && mc_ha_now(ha) < until)
		event_base_loop(ha->m->base, EVLOOP_ONCE);
	mc_log_notice("HA: leadership %s", rd->busy[RC_RELEASE] ? "left to expire"
								: "handed back");
}

int mc_ha_redis_init(struct mc_ha *ha, const char *connstring, char *err, size_t n)
{
	struct mc_ha_redis *rd = mc_xcalloc(1, sizeof(*rd));
	const char *hp = strstr(connstring, "://") ? strstr(connstring, "://") + 3 : connstring;
	const char *at = strrchr(hp, '@'), *colon;
	struct timeval tv = { 0, 200000 };
	uint8_t r[16];
	size_t len, i;
	char tag[256];

	ha->rd = rd;
	rd->ha = ha;
	if (at)
		hp = at + 1;
	len = strcspn(hp, ",;/");
	colon = memchr(hp, ':', len);
	snprintf(rd->host, sizeof(rd->host), "%.*s", (int)(colon ? (size_t)(colon - hp) : len), hp);
	rd->port = colon ? atoi(colon + 1) : 6379;
	if (rd->host[0] == '\0' || rd->port <= 0 || rd->port > 65535) {
		snprintf(err, n, "redis endpoint '%s' is not host:port", connstring);
		return -1;
	}
	/* Upstream's hash tag: the cluster id with braces replaced. */
	snprintf(tag, sizeof(tag), "%s", ha->cluster);
	for (i = 0; tag[i]; i++)
		if (tag[i] == '{' || tag[i] == '}')
			tag[i] = '_';
	snprintf(rd->key, sizeof(rd->key), "mooncake-store/{%s}/master_view", tag);
	snprintf(rd->version_key, sizeof(rd->version_key), "mooncake-store/{%s}/master_view_version",
		 tag);
	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		memset(r, 0x5a, sizeof(r));
	for (i = 0; i < sizeof(r); i++)
		snprintf(rd->token + 2 * i, 3, "%02x", r[i]);
	rd->ev_deadline = evtimer_new(ha->m->base, mc_redis_on_deadline, rd);
	if (rd->ev_deadline == NULL) {
		snprintf(err, n, "out of memory");
		return -1;
	}
	evtimer_add(rd->ev_deadline, &tv);
	return 0;
}

void mc_ha_redis_fini(struct mc_ha *ha)
{
	struct mc_ha_redis *rd = ha->rd;

	if (rd == NULL)
		return;
	if (rd->ev_deadline)
		event_free(rd->ev_deadline);
	if (rd->ac) {
		rd->ac->data = NULL;
		redisAsyncFree(rd->ac);
	}
	free(rd);
	ha->rd = NULL;
}

#else /* !HAVE_HIREDIS */

int mc_ha_redis_init(struct mc_ha *ha, const char *connstring, char *err, size_t n)
{
	(void)ha;
	(void)connstring;
	snprintf(err, n, "this build has no hiredis, which --ha_backend_type=redis needs");
	return -1;
}

void mc_ha_redis_fini(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_campaign(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_keepalive(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_read_view(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_resign(struct mc_ha *ha)
{
	(void)ha;
}

#endif

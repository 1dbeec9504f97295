/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store client's connection to the master, owned by the store's loop thread.
 *
 * Requests are pipelined: each carries a req_id and waits in the pending list until the frame
 * with that id comes back.  Every call has a deadline (MC_RPC_TIMEOUT_MS, default 5 s): it ends
 * with MC_ERR_RPC_TIMEOUT when no answer came by then, and the request frame carries the same
 * deadline in the master's clock so that a master that reads it later does not execute it.
 *
 * A dead master is noticed quickly: a ping goes out every second and a connection on which a
 * request (a ping or any other) waits for more than MC_PING_TIMEOUT_MS while nothing at all
 * came back for as long and our own output has drained (or whose sent data stays
 * unacknowledged for a second more than that, via TCP_USER_TIMEOUT, or whose connect takes
 * longer than MC_RPC_CONNECT_TIMEOUT_MS) is aborted:
 * closed with an RST so that requests still in the kernel's send buffer are discarded, and
 * every pending call ends with MC_ERR_RPC_FAIL.  A call that times out aborts its connection the
 * same way.  Once a connection was lost the master is "suspect": until a new connection has
 * answered a ping, calls fail at once with MC_ERR_RPC_FAIL instead of waiting (a stopped
 * master's kernel still accepts connections).  Reconnects back off from 100 ms doubling to
 * 500 ms, so the client is back within about a second of the master answering again.
 *
 * The ping also keeps the client alive in the master; when the master answers NEED_REMOUNT
 * (first contact, or a restarted master) the client re-mounts all its segments with their
 * original identities.  Its answer carries the master's wall clock, from which request
 * deadlines are written in the master's time (until one arrives, requests carry none).
 *
 * API threads call through master_call.c, which sends on a direct lane of its own when it can.
 *
 * HA masters.  With master_server_address=etcd://h1:2379;h2:2379 (or redis://host:port) every
 * connect first looks the leader up (master_locate.c).  A standby answers every request with
 * UNAVAILABLE_IN_CURRENT_MODE and the leader it knows, without executing it; so do the masters
 * between a leader's loss and the next one's start.  Such an answer makes the client drop the
 * connection, once the other calls sent on it are answered too (they are refused as well, and
 * wait like it; MC_STANDBY_DRAIN_MS at most), and look the leader up again; the refused calls,
 * and every call made while no leader answers, wait (up to their deadline, MC_RPC_TIMEOUT_MS,
 * or MC_HA_SWITCH_WAIT_MS when they have none) and are sent to the next leader; calls that were in flight on a connection that
 * broke end with MC_ERR_RPC_FAIL as ever (they may have been executed).  A client given one
 * master's host:port that meets a standby follows the leader it names, and comes back to the
 * address it was given when that leader stops answering.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/auth.h"
#include "common/errcode.h"
#include "common/log.h"
#include "reactor/auth_event.h"
#include "reactor/tls.h"
#include "store/master_client_int.h"
#include "store/store.h"

int64_t mc_master_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mc_rpc_call_init(struct mc_rpc_call *call, uint16_t opcode)
{
	memset(call, 0, sizeof(*call));
	call->opcode = opcode;
	mc_wbuf_init(&call->req);
	mc_rpc_frame_begin(&call->req, MC_RPC_REQUEST, opcode, 0, 0);
}

void mc_rpc_call_fini(struct mc_rpc_call *call)
{
	mc_wbuf_fini(&call->req);
	free(call->resp);
	call->resp = NULL;
}

static void mc_call_complete(struct mc_rpc_call *call, int status)
{
	call->status = status;
	if (call->on_done) {
		call->on_done(call, call->on_done_arg);
	} else {
		struct mc_master_client *mc = call->on_done_arg;

		__atomic_sub_fetch(&mc->user_queued, 1, __ATOMIC_RELEASE);
		mc_waiter_signal(&call->w, 0);
	}
}

static void mc_pending_remove(struct mc_master_client *mc, struct mc_rpc_call *call)
{
	struct mc_rpc_call **pp;

	for (pp = &mc->pending; *pp; pp = &(*pp)->next)
		if (*pp == call) {
			*pp = call->next;
			return;
		}
}

/* Call waits, unsent, for the next leader (or the same master's next connection): bounded by
 * its deadline, or MC_HA_SWITCH_WAIT_MS when it has none. */
static void mc_call_hold(struct mc_rpc_call *call)
{
	call->sent_ms = 0;
	if (call->deadline_ms == 0)
		call->deadline_ms = mc_store_now_ms() + MC_HA_SWITCH_WAIT_MS;
}

/* End every pending call with status; with HA masters (looked up, or a leader a standby
 * named), calls never sent stay queued for the next leader (their deadlines still run). */
static void mc_fail_all(struct mc_master_client *mc, int status)
{
	struct mc_rpc_call *c = mc->pending, *n, **keep = &mc->pending;

	mc->pending = NULL;
	for (; c; c = n) {
		n = c->next;
		if ((mc->loc || mc->redirected || mc->standby_wait) && c->sent_ms == 0 &&
		    c != &mc->ping_call &&
		    c != &mc->remount_call) {
			c->next = NULL;
			*keep = c;
			keep = &c->next;
			continue;
		}
		mc_call_complete(c, status);
	}
}

static void mc_master_client_connect(struct mc_master_client *mc);

/* Drop the connection and schedule a reconnect.  abort: close with an RST, discarding what the
 * kernel still holds for the master (requests we have given up on must never arrive late). */
void mc_master_client_down(struct mc_master_client *mc, const char *why, int abort)
{
	struct timeval tv;
	int k, back = mc->redirected && !mc->following;

	/* Once per outage: the probes of a master that stays silent are not news. */
	if (mc->state == MC_MC_UP ||
	    ((mc->state == MC_MC_PROBING || mc->state == MC_MC_AUTHENTICATING) && !mc->suspect))
		mc_log_warn("master %s:%u unreachable: %s", mc->host, mc->port, why);
	else
		mc_log_debug("master %s:%u still unreachable: %s", mc->host, mc->port, why);
	mc_auth_op_free(mc->auth_op);
	mc->auth_op = NULL;
	free(mc->hs);
	mc->hs = NULL;
	if (mc->bev) {
		evutil_socket_t fd = bufferevent_getfd(mc->bev);

		if (abort && fd >= 0) {
			struct linger lg = { 1, 0 };

			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		bufferevent_free(mc->bev);
		mc->bev = NULL;
	}
	mc->state = MC_MC_DOWN;
	mc->suspect = 1;
	pthread_mutex_lock(&mc->mu);
	mc->up = 0;
	mc->conn_gen++;
	for (k = 0; k < MC_DL_LANES; k++)
		if (mc->dl[k].fd >= 0)
			shutdown(mc->dl[k].fd, SHUT_RDWR);	/* wakes a thread waiting on it */
	pthread_mutex_unlock(&mc->mu);
	mc->ping_ok = 0;
	mc->ping_figures = 0;
	mc->ping_inflight = 0;
	mc->remount_inflight = 0;
	/* Calls a standby refused wait (redirected, or refused on a connection lost before
	 * the standby answered the rest): the standby ran none of them. */
	mc_fail_all(mc, MC_ERR_RPC_FAIL);
	mc->standby_wait = 0;
	if (back) {
		/* The leader a standby named is lost (or never answered): back to the address
		 * given, which names the leader it knows now. */
		mc_log_info("master %s:%u, named by a standby, is lost: back to %s:%u", mc->host,
			    mc->port, mc->conf_host, mc->conf_port);
		snprintf(mc->host, sizeof(mc->host), "%s", mc->conf_host);
		mc->port = mc->conf_port;
		mc->redirected = 0;
	}
	tv.tv_sec = mc->backoff_ms / 1000;
	tv.tv_usec = (mc->backoff_ms % 1000) * 1000;
	event_add(mc->ev_reconnect, &tv);
	mc->backoff_ms = mc->backoff_ms * 2 > MC_BACKOFF_MAX_MS ? MC_BACKOFF_MAX_MS
								: mc->backoff_ms * 2;
}

/* The request's deadline in the master's clock, for the frame's status field (0: none known). */
static uint32_t mc_frame_deadline(struct mc_master_client *mc, const struct mc_rpc_call *call)
{
	if (!mc->clock_known || call->deadline_ms == 0)
		return 0;
	return mc_rpc_deadline_encode(mc_master_wall_ms() + mc->clock_offset_ms +
				      (call->deadline_ms - mc_store_now_ms()));
}

static int mc_send(struct mc_master_client *mc, struct mc_rpc_call *call)
{
	if (call->req.err)
		return -ENOMEM;
	call->req_id = __atomic_add_fetch(&mc->next_req_id, 1, __ATOMIC_RELAXED);
	call->sent_ms = mc_store_now_ms();
	mc_put_le32(call->req.data + 12, mc_frame_deadline(mc, call));
	mc_put_le64(call->req.data + 16, call->req_id);
	mc_rpc_frame_end(&call->req, 0);
	return bufferevent_write(mc->bev, call->req.data, call->req.len);
}

/* Any answer proves the master reads and answers this connection. */
static void mc_master_alive(struct mc_master_client *mc)
{
	if (mc->state == MC_MC_PROBING) {
		mc->state = MC_MC_UP;
		if (mc->suspect)
			mc_log_info("master %s:%u answers again", mc->host, mc->port);
	}
	mc->suspect = 0;
	mc->backoff_ms = MC_BACKOFF_MIN_MS;
	if (mc->state == MC_MC_UP && !mc->up && !mc->standby_wait) {
		pthread_mutex_lock(&mc->mu);
		mc->up = 1;
		pthread_mutex_unlock(&mc->mu);
	}
}

static void mc_master_client_ready(struct mc_master_client *mc);

/* TLS with a cluster secret: the secret's handshake inside TLS.  0 when done (requests may
 * go), 1 to wait (or the connection was dropped). */
static int mc_tls_auth_step(struct mc_master_client *mc)
{
	int rc = mc_auth_hs_step(mc->hs, -1);
	char why[200];

	if (rc == MC_AUTH_AGAIN)
		return 1;
	if (rc == MC_AUTH_DONE) {
		free(mc->hs);
		mc->hs = NULL;
		mc_master_client_ready(mc);
		return 0;
	}
	snprintf(why, sizeof(why), "authentication failed: %s",
		 mc->hs->why ? mc->hs->why : strerror(rc < 0 && rc > -4096 ? -rc : EPROTO));
	mc_master_client_down(mc, why, 1);
	return 1;
}

/* The master answered call with UNAVAILABLE_IN_CURRENT_MODE: it is a standby, which executed
 * nothing.  The call may go again (it waits for the leader, mc_fail_all); the body names the
 * leader the standby knows, noted in leader. */
static void mc_master_client_refused(struct mc_rpc_call *call, struct evbuffer *in,
				     uint32_t body_len, char *leader, size_t n)
{
	uint8_t body[320];
	struct mc_rbuf r;
	size_t k = body_len < sizeof(body) ? body_len : sizeof(body);

	evbuffer_remove(in, body, k);
	evbuffer_drain(in, body_len - k);
	mc_rbuf_init(&r, body, k);
	if (mc_rbuf_cstr(&r, leader, n))
		leader[0] = '\0';
	mc_call_hold(call);
}

/* After the answers at hand were read: the master is a standby.  The connection goes; the next
 * one is to the leader (looked up again, or the one this master named). */
static void mc_master_client_standby(struct mc_master_client *mc, const char *leader)
{
	char h[256];
	uint16_t p = 0;
	int follow = mc->loc == NULL && leader[0] &&
		     mc_endpoint_parse(mc_strv_c(leader), h, sizeof(h), &p) == 0 &&
		     (strcmp(h, mc->host) || p != mc->port);

	if (follow)
		mc->redirected = 1;	/* refused calls wait for the leader (mc_fail_all) */
	mc->following = follow;		/* not a loss of the leader followed before */
	mc_master_client_down(mc, leader[0] ? "the master is a standby" :
			      "the master is a standby and knows no leader", 1);
	mc->following = 0;
	if (follow) {
		mc_log_warn("master %s:%u is a standby; following the leader it names, %s",
			    mc->host, mc->port, leader);
		snprintf(mc->host, sizeof(mc->host), "%s", h);
		mc->port = p;
	}
}

/* The connection is to a standby: once no call sent on it waits for its answer (or force,
 * after MC_STANDBY_DRAIN_MS), drop it for the leader.  A call sent after the refused one would
 * otherwise end with RPC_FAIL when the connection goes, as if it might have run, though the
 * standby refuses it too. */
static void mc_standby_settle(struct mc_master_client *mc, int force)
{
	struct mc_rpc_call *c;

	if (!force)
		for (c = mc->pending; c; c = c->next)
			if (c->sent_ms)
				return;
	mc->standby_wait = 0;
	mc_master_client_standby(mc, mc->standby_leader);
}

static void mc_on_read(struct bufferevent *bev, void *arg)
{
	struct mc_master_client *mc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char leader[300] = "";
	int standby = 0;

	if (mc->hs && mc_tls_auth_step(mc) != 0)
		return;

	for (;;) {
		uint8_t hb[MC_RPC_HDR_LEN];
		struct mc_rpc_hdr h;
		struct mc_rpc_call *c;
		size_t avail = evbuffer_get_length(in);

		if (avail < MC_RPC_HDR_LEN)
			break;
		evbuffer_copyout(in, hb, sizeof(hb));
		if (mc_rpc_hdr_decode(hb, &h, 1u << 30) || h.kind != MC_RPC_RESPONSE) {
			mc_master_client_down(mc, "malformed response from master", 1);
			return;
		}
		if (avail < MC_RPC_HDR_LEN + (size_t)h.body_len)
			break;
		evbuffer_drain(in, MC_RPC_HDR_LEN);
		/* Read by the direct lanes too (master_call.c). */
		__atomic_store_n(&mc->last_rx_ms, mc_store_now_ms(), __ATOMIC_RELAXED);
		mc_master_alive(mc);
		for (c = mc->pending; c && c->req_id != h.req_id; c = c->next)
			;
		if (c == NULL) {
			/* A call that already timed out. */
			evbuffer_drain(in, h.body_len);
			continue;
		}
		if (h.status == MC_ERR_UNAVAILABLE_IN_CURRENT_MODE) {
			/* Read the other answers at hand first: refused calls may go again. */
			mc_master_client_refused(c, in, h.body_len, leader, sizeof(leader));
			standby = 1;
			continue;
		}
		mc_pending_remove(mc, c);
		c->resp = malloc(h.body_len ? h.body_len : 1);
		if (c->resp == NULL) {
			evbuffer_drain(in, h.body_len);
			mc_call_complete(c, -ENOMEM);
			continue;
		}
		evbuffer_remove(in, c->resp, h.body_len);
		c->resp_len = h.body_len;
		mc_call_complete(c, h.status);
		if (mc->bev != bev)
			return;		/* a completion dropped the connection */
	}
	if (standby) {
		if (!mc->standby_wait) {
			mc->standby_wait = 1;
			mc->standby_since_ms = mc_store_now_ms();
			pthread_mutex_lock(&mc->mu);
			mc->up = 0;	/* no direct lane call goes to the standby */
			pthread_mutex_unlock(&mc->mu);
		}
		snprintf(mc->standby_leader, sizeof(mc->standby_leader), "%s", leader);
	}
	if (mc->standby_wait)
		mc_standby_settle(mc, 0);
}

static void mc_ping(struct mc_master_client *mc, int64_t now);

/* SetTenant, for a store whose tenant_id is not "default", as the first frame of a new
 * connection: every request after it works in that tenant's namespace.  Its answer is not
 * waited for (a name the setup checked cannot be refused; the master ignores it outside
 * multi-tenant mode). */
int mc_master_tenant_frame(struct mc_master_client *mc, struct mc_rpc_call *call)
{
	const char *t = mc->st->tenant_id;

	if (t[0] == '\0' || !strcmp(t, "default"))
		return 1;
	mc_rpc_call_init(call, MC_OP_SET_TENANT);
	mc_wbuf_cstr(&call->req, t);
	call->req_id = __atomic_add_fetch(&mc->next_req_id, 1, __ATOMIC_RELAXED);
	mc_put_le64(call->req.data + 16, call->req_id);
	mc_rpc_frame_end(&call->req, 0);
	return 0;
}

static int mc_tenant_hello(struct mc_master_client *mc)
{
	struct mc_rpc_call call;
	int rc;

	if (mc_master_tenant_frame(mc, &call))
		return 0;
	rc = call.req.err ? -ENOMEM : bufferevent_write(mc->bev, call.req.data, call.req.len);
	mc_rpc_call_fini(&call);
	return rc;
}

/* The connection is ready for requests: the ping first (its answer ends the probe and gives
 * the master's clock), then whatever waited. */
static void mc_master_client_ready(struct mc_master_client *mc)
{
	struct mc_rpc_call *c;

	mc->state = MC_MC_PROBING;
	if (mc->suspect)
		mc_log_debug("connected to master %s:%u, probing", mc->host, mc->port);
	else
		mc_log_info("connected to master %s:%u", mc->host, mc->port);
	/* A tenant's connection says so before anything else (tenants.c). */
	if (mc_tenant_hello(mc) != 0) {
		mc_master_client_down(mc, "cannot queue request", 1);
		return;
	}
	mc_ping(mc, mc_store_now_ms());
	for (c = mc->pending; c && mc->bev; c = c->next)
		if (c != &mc->ping_call && mc_send(mc, c)) {
			mc_master_client_down(mc, "cannot queue request", 1);
			return;
		}
}

static void mc_on_auth(void *arg, int rc, struct mc_auth_hs *hs)
{
	struct mc_master_client *mc = arg;
	char why[200];

	mc->auth_op = NULL;
	if (rc != 0) {
		snprintf(why, sizeof(why), "authentication failed: %s",
			 hs->why ? hs->why : strerror(-rc));
		mc_master_client_down(mc, why, 1);
		return;
	}
	bufferevent_enable(mc->bev, EV_READ | EV_WRITE);
	mc_master_client_ready(mc);
}

static void mc_on_event(struct bufferevent *bev, short what, void *arg)
{
	struct mc_master_client *mc = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		evutil_socket_t fd = bufferevent_getfd(mc->bev);
		int one = 1;
		unsigned int uto = MC_PING_TIMEOUT_MS + 1000;

		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* Data the master's host does not acknowledge for this long breaks the connection
		 * (a cut network), whatever the kernel's retransmission backoff. */
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
		if (mc->st->auth == NULL) {
			mc_master_client_ready(mc);
			return;
		}
		if (mc->st->tls) {
			/* Inside TLS the handshake goes through the bufferevent. */
			mc->state = MC_MC_AUTHENTICATING;
			mc->hs = malloc(sizeof(*mc->hs));
			if (mc->hs == NULL ||
			    mc_auth_hs_init(mc->hs, mc->st->auth, MC_AUTH_CLIENT) != 0) {
				mc_master_client_down(mc, "cannot start the authentication handshake",
						      1);
				return;
			}
			mc_auth_hs_use_bev(mc->hs, mc->bev);
			mc_tls_auth_step(mc);
			return;
		}
		/* The handshake owns the socket until it is done; the bufferevent waits. */
		bufferevent_disable(mc->bev, EV_READ | EV_WRITE);
		mc->state = MC_MC_AUTHENTICATING;
		mc->auth_op = mc_auth_op_start(mc->base, fd, mc->st->auth, MC_AUTH_CLIENT,
					       (int)mc->connect_timeout_ms + MC_PING_TIMEOUT_MS,
					       mc_on_auth, mc);
		if (mc->auth_op == NULL)
			mc_master_client_down(mc, "cannot start the authentication handshake", 1);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		char tls_why[256] = "";

		if (mc->st->tls && (what & BEV_EVENT_ERROR))
			mc_tls_bev_error(mc->bev, tls_why, sizeof(tls_why));
		mc_master_client_down(mc,
				      what & BEV_EVENT_EOF ? "connection closed"
				      : tls_why[0]	   ? tls_why
							   : strerror(EVUTIL_SOCKET_ERROR()),
				      1);
	}
}

static void mc_master_client_dial(struct mc_master_client *mc);

static void mc_on_located(void *arg, int rc, const char *leader)
{
	struct mc_master_client *mc = arg;
	char h[256];
	uint16_t p;

	mc->locating = 0;
	if (mc->bev || mc->closing)
		return;
	event_del(mc->ev_reconnect);
	if (rc || mc_endpoint_parse(mc_strv_c(leader), h, sizeof(h), &p)) {
		mc->state = MC_MC_CONNECTING;
		mc_master_client_down(mc, rc == -ENOENT || rc == 0 ? "no leader is published"
								 : "the leader cannot be looked up",
				      0);
		return;
	}
	if (strcmp(h, mc->host) || p != mc->port)
		mc_log_info("master leader is %s", leader);
	snprintf(mc->host, sizeof(mc->host), "%s", h);
	mc->port = p;
	mc_master_client_dial(mc);
}

static void mc_master_client_connect(struct mc_master_client *mc)
{
	if (mc->loc) {
		if (!mc->locating) {
			mc->locating = 1;
			mc->state = MC_MC_CONNECTING;
			mc->connect_started_ms = mc_store_now_ms();
			mc_master_locate_lookup(mc->loc, mc_on_located, mc);
		}
		return;
	}
	mc_master_client_dial(mc);
}

static void mc_master_client_dial(struct mc_master_client *mc)
{
	struct sockaddr_storage ss;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char port[8];
	socklen_t len;

	snprintf(port, sizeof(port), "%u", mc->port);
	if (getaddrinfo(mc->host, port, &hints, &res) != 0 || res->ai_addrlen > sizeof(ss)) {
		if (res)
			freeaddrinfo(res);
		mc_master_client_down(mc, "cannot resolve master address", 0);
		return;
	}
	memcpy(&ss, res->ai_addr, res->ai_addrlen);
	len = res->ai_addrlen;
	freeaddrinfo(res);
	pthread_mutex_lock(&mc->mu);
	mc->addr = ss;
	mc->addrlen = len;
	pthread_mutex_unlock(&mc->mu);
	mc->bev = mc->st->tls ? mc_tls_bev_connect(mc->base, mc->st->tls, mc->host)
			      : bufferevent_socket_new(mc->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (mc->bev == NULL) {
		mc_master_client_down(mc, "out of memory", 0);
		return;
	}
	bufferevent_setcb(mc->bev, mc_on_read, NULL, mc_on_event, mc);
	bufferevent_enable(mc->bev, EV_READ | EV_WRITE);
	mc->state = MC_MC_CONNECTING;
	mc->connect_started_ms = mc_store_now_ms();
	if (bufferevent_socket_connect(mc->bev, (struct sockaddr *)&ss, (int)len) != 0)
		mc_master_client_down(mc, strerror(errno), 0);
}

static void mc_on_reconnect(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_master_client_connect(arg);
}

/* Queue a call on the loop.  Fails fast when the master is down, or suspect and not yet
 * answering on a new connection. */
void mc_master_client_submit(struct mc_master_client *mc, struct mc_rpc_call *call)
{
	if (mc->state == MC_MC_DOWN || (mc->suspect && mc->state != MC_MC_UP &&
					call != &mc->ping_call)) {
		if ((mc->loc == NULL && !mc->redirected) || call == &mc->ping_call ||
		    call == &mc->remount_call) {
			mc_call_complete(call, MC_ERR_RPC_FAIL);
			return;
		}
		mc_call_hold(call);	/* HA: wait for the next leader */
		call->next = mc->pending;
		mc->pending = call;
		return;
	}
	call->next = mc->pending;
	mc->pending = call;
	if (mc->standby_wait) {
		mc_call_hold(call);	/* goes to the leader the standby names */
		return;
	}
	if ((mc->state == MC_MC_UP || mc->state == MC_MC_PROBING) && mc_send(mc, call)) {
		mc_master_client_down(mc, "cannot queue request", 1);
		return;
	}
}

static void mc_on_remount_done(struct mc_rpc_call *call, void *arg)
{
	struct mc_master_client *mc = arg;

	mc->remount_inflight = 0;
	if (call->status)
		mc_log_warn("ReMountSegment failed: %s", mc_strerror(call->status));
	else
		mc_log_info("segments re-mounted at master %s:%u", mc->host, mc->port);
	mc_rpc_call_fini(call);
}

static void mc_remount(struct mc_master_client *mc)
{
	struct mc_store *st = mc->st;
	uint32_t i;

	if (mc->remount_inflight)
		return;
	mc_rpc_call_init(&mc->remount_call, MC_OP_REMOUNT_SEGMENT);
	mc_rpc_put_uuid(&mc->remount_call.req, &st->client_id);
	pthread_mutex_lock(&st->mu);
	mc_wbuf_u32(&mc->remount_call.req, st->nsegs);
	for (i = 0; i < st->nsegs; i++)
		mc_store_put_segment(st, &mc->remount_call.req, i);
	for (i = 0; i < st->nsegs; i++)	/* each segment's token, proving its memory is ours */
		mc_store_put_segment_token(st, &mc->remount_call.req, i);
	pthread_mutex_unlock(&st->mu);
	mc->remount_call.on_done = mc_on_remount_done;
	mc->remount_call.on_done_arg = mc;
	mc->remount_call.deadline_ms = st->rpc_timeout_ms > 0 ? mc_store_now_ms() + st->rpc_timeout_ms : 0;
	mc->remount_inflight = 1;
	mc_master_client_submit(mc, &mc->remount_call);
}

static void mc_on_ping_done(struct mc_rpc_call *call, void *arg)
{
	struct mc_master_client *mc = arg;
	struct mc_rbuf r;
	uint8_t status;

	mc->ping_inflight = 0;
	if (call->status == 0) {
		int64_t now_wall = mc_master_wall_ms();

		mc_rbuf_init(&r, call->resp, call->resp_len);
		(void)mc_rbuf_i64(&r);
		status = mc_rbuf_u8(&r);
		mc->ping_ok = r.err == 0;
		if (r.err == 0 && r.left >= 8) {
			int64_t master_ms = (int64_t)mc_rbuf_u64(&r);

			pthread_mutex_lock(&mc->mu);
			mc->clock_offset_ms = master_ms - (mc->ping_sent_wall_ms + now_wall) / 2;
			mc->clock_known = 1;
			pthread_mutex_unlock(&mc->mu);
		}
		/* Older masters refuse a Ping with anything after the client id. */
		mc->ping_figures = r.err == 0 && r.left >= 1 && mc_rbuf_u8(&r) == 1;
		/* Copy/move tasks wait for us (absent from older masters). */
		if (r.err == 0 && r.left >= 1 && mc_rbuf_u8(&r) == 1)
			mc_store_tasks_kick(mc->st);
		if (r.err == 0 && status == MC_CLIENT_NEED_REMOUNT)
			mc_remount(mc);
	} else {
		mc->ping_ok = 0;
	}
	mc_rpc_call_fini(call);
}

static void mc_ping(struct mc_master_client *mc, int64_t now)
{
	if (mc->ping_inflight)
		return;
	mc_rpc_call_init(&mc->ping_call, MC_OP_PING);
	mc_rpc_put_uuid(&mc->ping_call.req, &mc->st->client_id);
	if (mc->ping_figures) {
		struct mc_store *st = mc->st;
		uint32_t i;

		/* How much of each segment is populated, for the master's metrics. */
		pthread_mutex_lock(&st->mu);
		mc_wbuf_u32(&mc->ping_call.req, st->nsegs);
		for (i = 0; i < st->nsegs; i++) {
			mc_rpc_put_uuid(&mc->ping_call.req, &st->segs[i].id);
			mc_wbuf_u64(&mc->ping_call.req, mc_segmem_populated(st->segs[i].mem));
		}
		pthread_mutex_unlock(&st->mu);
	}
	mc->ping_call.on_done = mc_on_ping_done;
	mc->ping_call.on_done_arg = mc;
	mc->ping_call.deadline_ms = now + MC_PING_TIMEOUT_MS;
	mc->ping_inflight = 1;
	mc->last_ping_ms = now;
	mc->ping_sent_wall_ms = mc_master_wall_ms();
	mc_master_client_submit(mc, &mc->ping_call);
}

static void mc_on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master_client *mc = arg;
	struct mc_rpc_call **pp = &mc->pending, *c;
	int64_t now = mc_store_now_ms();
	int timed_out = 0, ping_lost = 0;

	(void)fd;
	(void)what;
	if (mc->state == MC_MC_CONNECTING && !mc->locating &&
	    now - mc->connect_started_ms > mc->connect_timeout_ms) {
		mc_master_client_down(mc, "connect timeout", 1);
		return;
	}
	if (mc->standby_wait && now - mc->standby_since_ms >= MC_STANDBY_DRAIN_MS) {
		mc_standby_settle(mc, 1);
		return;
	}
	/* Time out calls that waited too long; notice a master that answers nothing. */
	while ((c = *pp) != NULL) {
		if (c->sent_ms && now - c->sent_ms > MC_PING_TIMEOUT_MS &&
		    now - mc->last_rx_ms > MC_PING_TIMEOUT_MS)
			ping_lost = 1;
		if (c->deadline_ms && now > c->deadline_ms) {
			*pp = c->next;
			if (c == &mc->ping_call)
				ping_lost = 1;
			else if (c->sent_ms)	/* an unsent (or refused) call: nothing to drop */
				timed_out = 1;
			mc_call_complete(c, MC_ERR_RPC_TIMEOUT);
			continue;
		}
		pp = &c->next;
	}
	/* Requests still leaving our buffer: a slow link, not a silent master (a cut one is
	 * caught by TCP_USER_TIMEOUT, a stuck call by its deadline). */
	if (mc->bev && evbuffer_get_length(bufferevent_get_output(mc->bev)) > 0)
		ping_lost = 0;
	/* The master may have read the requests that timed out and still execute them, or they
	 * may wait in a socket buffer: abort the connection so that nothing of it arrives late. */
	if (ping_lost && mc->bev) {
		mc_master_client_down(mc, "no answer for 2 s", 1);
		return;
	}
	if (timed_out && mc->bev) {
		mc_master_client_down(mc, "a request timed out", 1);
		return;
	}
	if ((mc->state == MC_MC_UP || mc->state == MC_MC_PROBING) && !mc->standby_wait &&
	    now - mc->last_ping_ms >= MC_PING_INTERVAL_MS)
		mc_ping(mc, now);
}

static int64_t mc_env_ms(const char *name, int64_t def)
{
	const char *v = getenv(name);
	char *end;
	long long x;

	if (v == NULL || *v == '\0')
		return def;
	x = strtoll(v, &end, 10);
	return *end == '\0' && x > 0 ? (int64_t)x : def;
}

struct mc_master_client *mc_master_client_new(struct mc_store *st, const char *addr)
{
	struct mc_master_client *mc = calloc(1, sizeof(*mc));
	struct timeval tick = { 0, 100000 };
	struct mc_strv v = mc_strv_c(addr);
	const char *direct = getenv("MC_RPC_DIRECT");
	int k;

	if (mc == NULL)
		return NULL;
	mc->st = st;
	mc->base = mc_loop_thread_base(st->lt);
	if (mc_master_locate_wanted(addr)) {
		mc->loc = mc_master_locate_new(mc->base, addr);
		if (mc->loc == NULL) {
			free(mc);
			return NULL;
		}
		snprintf(mc->host, sizeof(mc->host), "(leader of %s)", addr);
	} else if (mc_endpoint_parse(v, mc->host, sizeof(mc->host), &mc->port)) {
		free(mc);
		return NULL;
	}
	snprintf(mc->conf_host, sizeof(mc->conf_host), "%s", mc->host);
	mc->conf_port = mc->port;
	mc->backoff_ms = MC_BACKOFF_MIN_MS;
	mc->connect_timeout_ms = mc_env_ms("MC_RPC_CONNECT_TIMEOUT_MS", 1500);
	mc->ev_tick = event_new(mc->base, -1, EV_PERSIST, mc_on_tick, mc);
	mc->ev_reconnect = evtimer_new(mc->base, mc_on_reconnect, mc);
	if (mc->ev_tick == NULL || mc->ev_reconnect == NULL) {
		if (mc->ev_tick)
			event_free(mc->ev_tick);
		mc_master_locate_free(mc->loc);
		free(mc);
		return NULL;
	}
	pthread_mutex_init(&mc->mu, NULL);
	for (k = 0; k < MC_DL_LANES; k++) {
		pthread_mutex_init(&mc->dl[k].mu, NULL);
		mc->dl[k].fd = -1;
	}
	mc->dl_spin = mc_dl_spin_allowed();
	/* A lane is a plain socket: with TLS every call goes through the loop. */
	mc->dl_enabled = !(direct && strcmp(direct, "0") == 0) && st->tls == NULL;
	mc->dl_failed_gen = (uint64_t)-1;
	event_add(mc->ev_tick, &tick);
	mc_master_client_connect(mc);
	return mc;
}

void mc_master_client_free(struct mc_master_client *mc)
{
	int k;

	if (mc == NULL)
		return;
	/* A thread on a lane is woken by the shutdown and gives the lane up at once. */
	pthread_mutex_lock(&mc->mu);
	mc->closing = 1;
	mc->up = 0;
	for (k = 0; k < MC_DL_LANES; k++)
		if (mc->dl[k].fd >= 0)
			shutdown(mc->dl[k].fd, SHUT_RDWR);
	pthread_mutex_unlock(&mc->mu);
	for (k = 0; k < MC_DL_LANES; k++) {
		pthread_mutex_lock(&mc->dl[k].mu);
		if (mc->dl[k].fd >= 0)
			close(mc->dl[k].fd);
		mc->dl[k].fd = -1;
		pthread_mutex_unlock(&mc->dl[k].mu);
	}
	mc_auth_op_free(mc->auth_op);
	mc->auth_op = NULL;
	free(mc->hs);
	mc->hs = NULL;
	if (mc->bev)
		bufferevent_free(mc->bev);
	mc->bev = NULL;
	mc->state = MC_MC_DOWN;
	mc_master_locate_free(mc->loc);
	mc->loc = NULL;		/* so that queued calls fail too */
	mc->redirected = 0;
	mc->standby_wait = 0;
	mc_fail_all(mc, MC_ERR_RPC_FAIL);
	event_free(mc->ev_tick);
	event_free(mc->ev_reconnect);
	if (mc->ping_inflight)
		mc_rpc_call_fini(&mc->ping_call);
	if (mc->remount_inflight)
		mc_rpc_call_fini(&mc->remount_call);
	for (k = 0; k < MC_DL_LANES; k++)
		pthread_mutex_destroy(&mc->dl[k].mu);
	pthread_mutex_destroy(&mc->mu);
	free(mc);
}

int mc_master_client_healthy(struct mc_master_client *mc)
{
	return mc->state == MC_MC_UP && mc->ping_ok;
}

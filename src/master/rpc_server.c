/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's RPC listener and connections.
 *
 * Each connection is a bufferevent.  The read callback handles every complete frame in the input
 * buffer (pipelining), collects all replies in one scratch buffer and queues them with a single
 * evbuffer_add.  A header with a bad magic or version, or announcing a body over the maximum,
 * closes that connection (with a log line naming the peer); everything else is answered.
 * Connections are never freed inside their own callbacks: they are marked closing and freed from
 * a deferred event.  A request whose deadline (its header's status field) passed before it was
 * read is answered RPC_TIMEOUT without being executed: its client gave up on it, and a late
 * PutStart or Remove must not change anything behind that client's back.
 *
 * With --persist_path, replies wait for the iteration's commit (mc_rpc_server_flush).  The
 * replies of requests that change durable state are noted; if the commit fails they are
 * replaced by PERSISTENT_FAIL frames, and while persistence is failing such requests are refused
 * before they run.  Requests that must wait for the background load are kept by rpc_park.c;
 * the connection's fields are in rpc_conn.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "common/auth.h"
#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "common/xalloc.h"
#include "master/ops.h"
#include "master/rpc_conn.h"
#include "reactor/auth_event.h"
#include "reactor/tls.h"

static void mc_conn_on_reap(evutil_socket_t fd, short what, void *arg)
{
	struct mc_conn *c = arg;

	(void)fd;
	(void)what;
	event_free(c->reaper);
	mc_wbuf_fini(&c->out);
	free(c->dur);
	free(c->hs);
	free(c);
}

static void mc_conn_close(struct mc_conn *c, const char *why)
{
	struct mc_master *m = c->m;

	if (c->closing)
		return;
	c->closing = 1;
	mc_rpc_unpark_all(c);
	if (c->flush_pending) {
		struct mc_conn **pp;

		for (pp = &m->flush_head; *pp; pp = &(*pp)->flush_next)
			if (*pp == c) {
				*pp = c->flush_next;
				break;
			}
		c->flush_pending = 0;
	}
	if (c->sealed) {
		struct mc_conn **pp;

		for (pp = &m->flush_sealed; *pp; pp = &(*pp)->sealed_next)
			if (*pp == c) {
				*pp = c->sealed_next;
				break;
			}
		c->sealed = 0;
	}
	if (why)
		mc_log_info("connection %llu from %s closed: %s", (unsigned long long)c->id, c->peer,
			    why);
	if (c->bev == NULL) {
		/* Still authenticating: the socket is not the bufferevent's yet. */
		mc_auth_op_free(c->auth_op);
		c->auth_op = NULL;
		evutil_closesocket(c->fd);
	}
	if (c->ev_slow) {
		event_free(c->ev_slow);
		c->ev_slow = NULL;
	}
	if (c->bev)
		bufferevent_free(c->bev);
	c->bev = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		m->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	m->nconns--;
	c->reaper = evtimer_new(m->base, mc_conn_on_reap, c);
	event_active(c->reaper, EV_TIMEOUT, 1);
}

/* Send the first len bytes of replies gathered in c->out: straight to the socket when nothing
 * waits before them (saving a loop iteration and the EPOLLOUT round), the rest through the
 * bufferevent.  What follows them in c->out moves to its start. */
static void mc_conn_send_some(struct mc_conn *c, size_t len)
{
	struct evbuffer *ob = bufferevent_get_output(c->bev);
	ssize_t n = 0;
	size_t i, k = 0;

	if (!c->out.err && !c->tls && evbuffer_get_length(ob) == 0) {
		n = send(bufferevent_getfd(c->bev), c->out.data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0)
			n = 0;	/* EAGAIN, or an error the bufferevent reports */
	}
	if (c->out.err ||
	    ((size_t)n < len && bufferevent_write(c->bev, c->out.data + n, len - (size_t)n) != 0)) {
		mc_conn_close(c, "cannot queue replies");
		return;
	}
	if (len == c->out.len) {
		mc_wbuf_reset(&c->out);
		c->ndur = 0;
	} else {
		memmove(c->out.data, c->out.data + len, c->out.len - len);
		c->out.len -= len;
		for (i = 0; i < c->ndur; i++)
			if (c->dur[i] >= len)
				c->dur[k++] = c->dur[i] - len;
		c->ndur = k;
	}
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) >
	    c->m->cfg.rpc_max_conn_output_bytes) {
		c->m->metrics.conns_closed_output++;
		mc_conn_close(c, "client does not read its replies (rpc_max_conn_output_bytes)");
	}
}

static void mc_conn_send(struct mc_conn *c)
{
	mc_conn_send_some(c, c->out.len);
}

/* Requests whose success is a change of durable state (the table's durable column, see
 * src/proto/rpc_ops.h): acknowledged only once committed, and refused while persistence is
 * failing. */
static int mc_op_changes_state(uint16_t opcode)
{
	const struct mc_master_op *op = mc_master_op_get(opcode);

	return op != NULL && op->durable;
}

/* Handle one request frame into c->out, noting or refusing it per the persistence state. */
static void mc_conn_handle(struct mc_conn *c, const struct mc_rpc_hdr *h, const uint8_t *body)
{
	struct mc_master *m = c->m;
	size_t start = c->out.len;

	if (m->repl && !m->repl->serving(m)) {	/* a standby: the client is told the leader */
		m->repl->refuse(m, h, &c->out);
		return;
	}
	m->conn_tenant = c->tenant;
	if (m->persist == NULL || !mc_op_changes_state(h->opcode)) {
		mc_master_handle(m, h, body, &c->out, c->peer);
		c->tenant = m->conn_tenant;
		return;
	}
	if (mc_master_persist_refusing(m)) {
		m->metrics.persist_refused++;
		mc_rpc_frame_begin(&c->out, MC_RPC_RESPONSE, h->opcode, MC_ERR_PERSISTENT_FAIL,
				   h->req_id);
		mc_rpc_frame_end(&c->out, start);
		return;
	}
	mc_master_handle(m, h, body, &c->out, c->peer);
	c->tenant = m->conn_tenant;
	if (c->out.err || c->out.len < start + MC_RPC_HDR_LEN ||
	    mc_get_le32(c->out.data + start + 12) != 0)
		return;		/* an error changed nothing */
	if (c->ndur == c->capdur) {
		c->capdur = c->capdur ? c->capdur * 2 : 16;
		c->dur = mc_xrealloc(c->dur, c->capdur * sizeof(*c->dur));
	}
	c->dur[c->ndur++] = start;
}

/* The commit failed: every noted reply becomes a PERSISTENT_FAIL frame. */
static void mc_conn_fail_noted(struct mc_conn *c)
{
	struct mc_wbuf nw;
	size_t i, pos = 0;

	if (c->ndur == 0 || c->out.err)
		return;
	mc_wbuf_init(&nw);
	for (i = 0; i < c->ndur; i++) {
		const uint8_t *f = c->out.data + c->dur[i];
		struct mc_rpc_hdr h;
		size_t at;

		mc_wbuf_put(&nw, c->out.data + pos, c->dur[i] - pos);
		h.opcode = (uint16_t)(f[6] | f[7] << 8);
		h.req_id = mc_get_le64(f + 16);
		pos = c->dur[i] + MC_RPC_HDR_LEN + mc_get_le32(f + 8);
		at = nw.len;
		mc_rpc_frame_begin(&nw, MC_RPC_RESPONSE, h.opcode, MC_ERR_PERSISTENT_FAIL,
				   h.req_id);
		mc_rpc_frame_end(&nw, at);
	}
	mc_wbuf_put(&nw, c->out.data + pos, c->out.len - pos);
	mc_wbuf_fini(&c->out);
	c->out = nw;
	c->ndur = 0;
}

void mc_rpc_server_seal(struct mc_master *m)
{
	struct mc_conn *c;

	while ((c = m->flush_head) != NULL) {
		m->flush_head = c->flush_next;
		c->flush_pending = 0;
		/* Replies to what it sends meanwhile belong to a later round. */
		c->sealed_len = c->out.len;
		if (!c->sealed) {
			c->sealed = 1;
			c->sealed_next = m->flush_sealed;
			m->flush_sealed = c;
		}
	}
}

void mc_rpc_server_release(struct mc_master *m, int rc)
{
	struct mc_conn *c;

	while ((c = m->flush_sealed) != NULL) {
		m->flush_sealed = c->sealed_next;
		c->sealed = 0;
		if (c->closing)
			continue;
		if (rc != 0)
			mc_conn_fail_noted(c);
		mc_conn_send_some(c, rc != 0 || c->out.err ? c->out.len : c->sealed_len);
		c->sealed_len = 0;
	}
}

void mc_rpc_server_flush(struct mc_master *m)
{
	struct mc_conn *c;
	int rc;

	if (m->repl) {		/* replies wait for the replicated log (ha_log.c) */
		mc_master_commit(m);
		return;
	}
	rc = mc_master_commit(m);

	while ((c = m->flush_head) != NULL) {
		m->flush_head = c->flush_next;
		c->flush_pending = 0;
		if (c->closing)
			continue;
		if (rc != 0)
			mc_conn_fail_noted(c);
		mc_conn_send(c);
	}
}

/* A request that waited past its deadline (in a stopped master's socket, or behind a network
 * that held it) is not executed: its client has been told it failed. */
static int mc_request_expired(struct mc_master *m, const struct mc_rpc_hdr *h, struct mc_wbuf *out,
			      const char *peer)
{
	struct timespec ts;
	int64_t now;
	size_t start = out->len;

	if (h->status == 0)
		return 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (!mc_rpc_deadline_expired((uint32_t)h->status, now, MC_RPC_DEADLINE_TOLERANCE_MS))
		return 0;
	m->metrics.rpc_expired_requests++;
	mc_log_debug("%s from %s arrived %d ms past its deadline: not executed",
		     mc_rpc_op_name(h->opcode), peer, (int32_t)((uint32_t)now - (uint32_t)h->status));
	mc_rpc_frame_begin(out, MC_RPC_RESPONSE, h->opcode, MC_ERR_RPC_TIMEOUT, h->req_id);
	mc_rpc_frame_end(out, start);
	return 1;
}

static void mc_rpc_server_refuse(struct mc_conn *c);
static void mc_conn_set_timeouts(struct mc_conn *c);

static void mc_conn_on_slow(evutil_socket_t fd, short what, void *arg)
{
	struct mc_conn *c = arg;

	(void)fd;
	(void)what;
	c->m->metrics.conns_closed_slow++;
	mc_log_warn("connection %llu from %s: no complete request within %lld ms "
		    "(rpc_request_timeout_ms): closed", (unsigned long long)c->id, c->peer,
		    (long long)c->m->cfg.rpc_request_timeout_ms);
	mc_conn_close(c, NULL);
}

/* rpc_request_timeout_ms: a partial request must complete in time.  The clock starts when a
 * request begins (and at accept, for the first), and again after each complete one. */
static void mc_conn_slow_watch(struct mc_conn *c, unsigned handled)
{
	int64_t ms = c->m->cfg.rpc_request_timeout_ms;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	if (c->ev_slow == NULL || c->bev == NULL)
		return;
	if (evbuffer_get_length(bufferevent_get_input(c->bev)) == 0) {
		if (c->slow_armed)
			event_del(c->ev_slow);
		c->slow_armed = 0;
	} else if (!c->slow_armed || handled) {
		event_add(c->ev_slow, &tv);
		c->slow_armed = 1;
	}
}

/* TLS with a cluster secret: the secret's handshake runs inside TLS, over the bufferevent.
 * 0 when it is done and requests may be read (or the peer is to be refused in words), else 1
 * (wait for more, or c was closed). */
static int mc_conn_tls_auth(struct mc_conn *c)
{
	int rc = mc_auth_hs_step(c->hs, -1);

	if (rc == MC_AUTH_AGAIN)
		return 1;
	if (rc == MC_AUTH_DONE) {
		free(c->hs);
		c->hs = NULL;
		mc_conn_set_timeouts(c);
		return 0;
	}
	mc_auth_hs_refused(c->m->auth, "master RPC", c->peer, rc, c->hs);
	if (rc == MC_AUTH_NOT_HELLO && c->hs->pos >= 4 && memcmp(c->hs->msg, "MCRP", 4) == 0) {
		evbuffer_prepend(bufferevent_get_input(c->bev), c->hs->msg, c->hs->pos);
		free(c->hs);
		c->hs = NULL;
		c->refusing = 1;
		return 0;
	}
	mc_conn_close(c, NULL);
	return 1;
}

/* Replies were added to c->out: with persistence they wait for the iteration's commit (group
 * commit), else they go now. */
static void mc_conn_replies_ready(struct mc_conn *c)
{
	struct mc_master *m = c->m;

	if (c->closing || c->out.len == c->sealed_len)
		return;
	if (m->persist) {
		if (!c->flush_pending) {
			c->flush_pending = 1;
			c->flush_next = m->flush_head;
			m->flush_head = c;
			event_active(m->ev_flush, EV_TIMEOUT, 0);
		}
		return;
	}
	mc_conn_send(c);
}

/* The rest of a frame whose start is in in: read it from the socket now, up to want bytes
 * (at most MC_CONN_READ_REST), when it is there already.  A bufferevent reads at most 4 KiB a
 * wake-up (libevent 2.1), so a batch of a hundred keys took two or three rounds of the loop
 * (epoll_wait, FIONREAD, readv each) when it had arrived whole.  Plain sockets whose reading is
 * enabled only; an error or the peer's close is left for the bufferevent to find.  Returns the
 * bytes added. */
#define MC_CONN_READ_REST ((size_t)256 << 10)

static size_t mc_conn_read_rest(struct mc_conn *c, struct evbuffer *in, size_t want)
{
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	ssize_t got;
	int n, i;

	if (c->tls || !(bufferevent_get_enabled(c->bev) & EV_READ))
		return 0;
	if (want > MC_CONN_READ_REST)
		want = MC_CONN_READ_REST;
	/* A socket bufferevent keeps its input's end frozen but while it reads itself. */
	if (evbuffer_unfreeze(in, 0) != 0)
		return 0;
	n = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
	if (n <= 0)
		goto out;
	for (i = 0; i < n; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
	}
	got = readv(bufferevent_getfd(c->bev), iov, n);
	if (got <= 0) {
		n = 0;
		goto out;
	}
	for (i = 0; i < n; i++) {
		size_t take = (size_t)got < v[i].iov_len ? (size_t)got : v[i].iov_len;

		v[i].iov_len = take;
		got -= (ssize_t)take;
	}
	if (evbuffer_commit_space(in, v, n) != 0)
		n = 0;
out:
	evbuffer_freeze(in, 0);
	return n > 0 ? v[0].iov_len + (n > 1 ? v[1].iov_len : 0) : 0;
}

static void mc_conn_on_read(struct bufferevent *bev, void *arg)
{
	struct mc_conn *c = arg;
	struct mc_master *m = c->m;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint32_t max_body = (uint32_t)m->cfg.rpc_max_frame_bytes;
	unsigned handled = 0;

	if (c->hs && mc_conn_tls_auth(c) != 0)
		return;
	if (c->refusing) {
		mc_rpc_server_refuse(c);
		return;
	}
	if (!c->flush_pending && !c->sealed) {
		mc_wbuf_reset(&c->out);
		c->ndur = 0;
	}
	for (;; handled++) {
		uint8_t hb[MC_RPC_HDR_LEN];
		struct mc_rpc_hdr h;
		size_t avail = evbuffer_get_length(in);
		const uint8_t *frame;
		int rc;

		if (avail < MC_RPC_HDR_LEN)
			break;
		evbuffer_copyout(in, hb, sizeof(hb));
		rc = mc_rpc_hdr_decode(hb, &h, max_body);
		if (rc == 0 && h.kind != MC_RPC_REQUEST)
			rc = -EPROTO;
		if (rc != 0) {
			char why[160];

			m->metrics.bad_frames++;
			snprintf(why, sizeof(why), "%s (magic 0x%08x version %u body %u bytes)",
				 rc == -EMSGSIZE		? "frame larger than rpc_max_frame_bytes"
				 : rc == -EPROTONOSUPPORT ? "unsupported protocol version"
							  : "malformed frame header",
				 h.magic, h.version, h.body_len);
			mc_log_warn("connection %llu from %s: %s", (unsigned long long)c->id, c->peer,
				    why);
			mc_conn_close(c, "protocol error");
			return;
		}
		if (avail < MC_RPC_HDR_LEN + (size_t)h.body_len &&
		    mc_conn_read_rest(c, in, MC_RPC_HDR_LEN + (size_t)h.body_len - avail) > 0)
			avail = evbuffer_get_length(in);
		if (avail < MC_RPC_HDR_LEN + (size_t)h.body_len) {
			/* Wait for the rest; do not wake up again before it can be complete. */
			bufferevent_setwatermark(bev, EV_READ, MC_RPC_HDR_LEN + (size_t)h.body_len,
						 0);
			break;
		}
		frame = evbuffer_pullup(in, MC_RPC_HDR_LEN + (ssize_t)h.body_len);
		if (frame == NULL) {
			mc_conn_close(c, "out of memory");
			return;
		}
		/* While the objects load, a request may have to wait: it alone does, and the
		 * connection reads on (mc_rpc_server_on_resume runs it later). */
		if (!mc_request_expired(m, &h, &c->out, c->peer)) {
			int why = mc_rpc_must_wait(c, &h, frame);

			if (why)
				mc_rpc_park(c, &h, frame, why);
			else
				mc_conn_handle(c, &h, frame + MC_RPC_HDR_LEN);
		}
		evbuffer_drain(in, MC_RPC_HDR_LEN + (size_t)h.body_len);
		bufferevent_setwatermark(bev, EV_READ, 0, 0);
	}
	mc_conn_slow_watch(c, handled);
	mc_conn_replies_ready(c);
}

static void mc_conn_on_event(struct bufferevent *bev, short what, void *arg)
{
	struct mc_conn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_EOF)
		mc_conn_close(c, NULL);
	else if (what & BEV_EVENT_TIMEOUT) {
		c->m->metrics.conns_closed_idle++;
		mc_conn_close(c, c->hs ? "handshake timeout" : "idle timeout");
	} else if ((what & BEV_EVENT_ERROR) && c->tls) {
		char why[256];

		mc_conn_close(c, *mc_tls_bev_error(c->bev, why, sizeof(why))
					 ? why
					 : strerror(EVUTIL_SOCKET_ERROR()));
	} else if (what & BEV_EVENT_ERROR)
		mc_conn_close(c, strerror(EVUTIL_SOCKET_ERROR()));
}

static void mc_format_peer(const struct sockaddr *sa, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		snprintf(out, n, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		snprintf(out, n, "[%s]:%u", host, port);
	} else {
		snprintf(out, n, "unknown");
	}
}

static void mc_conn_set_timeouts(struct mc_conn *c)
{
	struct timeval tv = { (time_t)c->m->cfg.rpc_conn_timeout_seconds, 0 };

	if (c->hs) {
		/* TLS and the secret's handshake must finish within the handshake's time. */
		int ms = mc_auth_timeout_ms();

		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
	} else if (c->m->cfg.rpc_conn_timeout_seconds <= 0) {
		bufferevent_set_timeouts(c->bev, NULL, NULL);
		return;
	}
	bufferevent_set_timeouts(c->bev, &tv, NULL);
}

/* Give the connection its bufferevent: requests are read from now on (with TLS: after the TLS
 * handshake, and with a secret the secret's inside it).  0 or -1 (c closed). */
static int mc_conn_open(struct mc_conn *c)
{
	struct mc_master *m = c->m;

	c->bev = m->tls ? mc_tls_bev_accept(m->base, m->tls, c->fd)
			: bufferevent_socket_new(m->base, c->fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		mc_conn_close(c, "out of memory");
		return -1;
	}
	c->tls = m->tls != NULL;
	if (c->tls && m->auth) {
		c->hs = malloc(sizeof(*c->hs));
		if (c->hs == NULL || mc_auth_hs_init(c->hs, m->auth, MC_AUTH_SERVER) != 0) {
			mc_conn_close(c, "cannot start the authentication handshake");
			return -1;
		}
		mc_auth_hs_use_bev(c->hs, c->bev);
	}
	bufferevent_setcb(c->bev, mc_conn_on_read, NULL, mc_conn_on_event, c);
	mc_conn_set_timeouts(c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	return 0;
}

static void mc_conn_on_refused_sent(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		mc_conn_close(arg, NULL);
}

/* A peer that speaks RPC without the handshake: its first request is answered ILLEGAL_CLIENT
 * (so that a client without the secret reports a refusal rather than a broken connection), then
 * the connection closes.  Anything else closes at once. */
static void mc_rpc_server_refuse(struct mc_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	uint8_t hb[MC_RPC_HDR_LEN];
	struct mc_rpc_hdr h;
	size_t start = c->out.len;

	if (evbuffer_get_length(in) < MC_RPC_HDR_LEN)
		return;
	evbuffer_copyout(in, hb, sizeof(hb));
	if (mc_rpc_hdr_decode(hb, &h, UINT32_MAX) != 0 || h.kind != MC_RPC_REQUEST) {
		mc_conn_close(c, NULL);
		return;
	}
	mc_wbuf_reset(&c->out);
	mc_rpc_frame_begin(&c->out, MC_RPC_RESPONSE, h.opcode, MC_ERR_ILLEGAL_CLIENT, h.req_id);
	mc_rpc_frame_end(&c->out, start);
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, mc_conn_on_refused_sent, mc_conn_on_event, c);
	if (c->out.err || bufferevent_write(c->bev, c->out.data, c->out.len) != 0)
		mc_conn_close(c, NULL);
}

static void mc_conn_on_auth(void *arg, int rc, struct mc_auth_hs *hs)
{
	struct mc_conn *c = arg;
	struct mc_master *m = c->m;

	c->auth_op = NULL;
	if (rc == 0) {
		mc_conn_open(c);
		return;
	}
	mc_auth_hs_refused(m->auth, "master RPC", c->peer, rc, hs);
	if (rc != MC_AUTH_NOT_HELLO || hs->pos < 4 || memcmp(hs->msg, "MCRP", 4) != 0 ||
	    mc_conn_open(c) != 0) {
		mc_conn_close(c, NULL);
		return;
	}
	c->refusing = 1;
	evbuffer_prepend(bufferevent_get_input(c->bev), hs->msg, hs->pos);
	mc_rpc_server_refuse(c);
}

/* The peer's IP address alone (connections per peer are counted by it). */
static void mc_format_ip(const struct sockaddr *sa, char *out, size_t n)
{
	snprintf(out, n, "?");
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)n);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
			  (socklen_t)n);
}

/* One line a second at most about refused connections (a flood must not flood the log). */
static void mc_conn_refuse_log(struct mc_master *m, const char *peer, const char *limit,
			       long long n)
{
	int64_t now = mc_master_now(m) / 1000;

	m->conn_refusals_quiet++;
	if (now == m->conn_refused_log_sec)
		return;
	m->conn_refused_log_sec = now;
	mc_log_warn("refusing connection from %s: %lld connections (%s)%s", peer, n, limit,
		    m->conn_refusals_quiet > 1 ? "; more refusals in the last second" : "");
	m->conn_refusals_quiet = 0;
}

static void mc_listener_on_accept(struct evconnlistener *l, evutil_socket_t fd,
				  struct sockaddr *sa, int salen, void *arg)
{
	struct mc_master *m = arg;
	struct mc_conn *c;
	char peer[80], ip[INET6_ADDRSTRLEN];
	int64_t npeer = 0;
	int one = 1;

	(void)l;
	(void)salen;
	mc_format_peer(sa, peer, sizeof(peer));
	mc_format_ip(sa, ip, sizeof(ip));
	if ((int64_t)m->nconns >= m->cfg.max_connections) {
		m->metrics.conns_refused_total++;
		mc_conn_refuse_log(m, peer, "max_connections", (long long)m->nconns);
		evutil_closesocket(fd);
		return;
	}
	for (c = m->conns; c && npeer < m->cfg.max_connections_per_peer; c = c->next)
		npeer += strcmp(c->ip, ip) == 0;
	if (npeer >= m->cfg.max_connections_per_peer) {
		m->metrics.conns_refused_peer++;
		mc_conn_refuse_log(m, peer, "max_connections_per_peer", (long long)npeer);
		evutil_closesocket(fd);
		return;
	}
	if (m->cfg.rpc_enable_tcp_no_delay)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = mc_xcalloc(1, sizeof(*c));
	c->m = m;
	c->fd = fd;
	c->id = ++m->next_conn_id;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	snprintf(c->ip, sizeof(c->ip), "%s", ip);
	if (m->cfg.rpc_request_timeout_ms > 0) {
		int64_t ms = m->cfg.rpc_request_timeout_ms;
		struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

		c->ev_slow = evtimer_new(m->base, mc_conn_on_slow, c);
		if (c->ev_slow) {
			event_add(c->ev_slow, &tv);
			c->slow_armed = 1;
		}
	}
	mc_wbuf_init(&c->out);
	mc_rpc_park_init(c);
	c->next = m->conns;
	if (m->conns)
		m->conns->prev = c;
	m->conns = c;
	m->nconns++;
	mc_log_debug("connection %llu from %s", (unsigned long long)c->id, c->peer);
	if (m->auth == NULL || m->tls) {
		mc_conn_open(c);
		return;
	}
	c->auth_op = mc_auth_op_start(m->base, fd, m->auth, MC_AUTH_SERVER, 0, mc_conn_on_auth, c);
	if (c->auth_op == NULL)
		mc_conn_close(c, "cannot start the authentication handshake");
}

static void mc_listener_on_error(struct evconnlistener *l, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();

	(void)l;
	(void)arg;
	/* EMFILE and friends: keep the listener; libevent retries on the next readiness. */
	mc_log_err("accept failed: %s", evutil_socket_error_to_string(err));
}

/* Run the parked request p of c, taken off its list: unless its client gave up meanwhile. */
static void mc_conn_run_one(struct mc_conn *c, struct mc_parked *p)
{
	struct mc_master *m = c->m;

	c->nparked--;
	c->park_bytes -= p->len;
	m->nparked--;
	m->parked_bytes -= p->len;
	if (!mc_request_expired(m, &p->h, &c->out, c->peer))
		mc_conn_handle(c, &p->h, p->frame + MC_RPC_HDR_LEN);
	free(p);
}

/* Run the parked requests of c that may run now: during the load, those whose keys the load
 * has answered (the others stay, and so do those waiting for the end, untouched); after it,
 * every one, in arrival order. */
static void mc_conn_run_parked(struct mc_conn *c)
{
	struct mc_master *m = c->m;
	struct mc_parked **pp, *p;

	if (!c->flush_pending && !c->sealed) {
		mc_wbuf_reset(&c->out);
		c->ndur = 0;
	}
	if (m->load) {
		pp = &c->park_keys.head;
		while ((p = *pp) != NULL) {
			/* Requests behind a waiting SetTenant are on park_end: not these. */
			if (mc_master_load_gate(m, p->h.opcode, p->frame + MC_RPC_HDR_LEN,
						p->h.body_len, c->tenant)) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			if (c->park_keys.tail == &p->next)
				c->park_keys.tail = pp;
			c->nkeys--;
			mc_conn_run_one(c, p);
			if (c->closing)
				return;		/* its lists are gone */
		}
	} else {
		c->park_barrier = 0;
		while (c->park_keys.head || c->park_end.head) {
			struct mc_park_list *l = c->park_end.head == NULL ? &c->park_keys
						 : c->park_keys.head == NULL ? &c->park_end
						 : c->park_keys.head->seq < c->park_end.head->seq
							 ? &c->park_keys
							 : &c->park_end;

			if (l == &c->park_keys)
				c->nkeys--;
			mc_conn_run_one(c, mc_rpc_park_pop(l));
			if (c->closing)
				return;
		}
	}
	if (c->nkeys == 0 && (c->look_prev || c->m->look_conns == c))
		mc_rpc_park_look_unlink(c);
	if (c->nparked == 0) {
		c->park_warned = 0;
		mc_conn_set_timeouts(c);
	}
	mc_conn_replies_ready(c);
}

/* The background load moved on (m->ev_load_resume): the parked requests that may run now run.
 * During the load only connections with requests waiting for a lookup are visited, and only
 * those requests; at its end every connection's run, each in arrival order. */
static void mc_rpc_server_on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct mc_master *m = arg;
	struct mc_conn *c, *next;

	(void)fd;
	(void)what;
	for (c = m->load ? m->look_conns : m->conns; c; c = next) {
		next = m->load ? c->look_next : c->next;
		if (c->nparked && !c->closing && c->bev)
			mc_conn_run_parked(c);
	}
}

int mc_rpc_server_start(struct mc_master *m)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICHOST };
	struct addrinfo *res = NULL;
	char port[16];
	int rc;

	m->ev_load_resume = event_new(m->base, -1, 0, mc_rpc_server_on_resume, m);
	if (m->ev_load_resume == NULL)
		return -1;
	snprintf(port, sizeof(port), "%lld",
		 (long long)(m->cfg.rpc_port ? m->cfg.rpc_port : m->cfg.port));
	rc = getaddrinfo(m->cfg.rpc_address, port, &hints, &res);
	if (rc != 0) {
		mc_log_err("rpc_address %s: %s", m->cfg.rpc_address, gai_strerror(rc));
		return -EINVAL;
	}
	m->listener = evconnlistener_new_bind(m->base, mc_listener_on_accept, m,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
						      LEV_OPT_CLOSE_ON_EXEC,
					      1024, res->ai_addr, (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (m->listener == NULL) {
		mc_log_err("cannot listen on %s:%s: %s", m->cfg.rpc_address, port, strerror(errno));
		return -errno ? -errno : -EADDRINUSE;
	}
	evconnlistener_set_error_cb(m->listener, mc_listener_on_error);
	mc_log_notice("listening for RPC on %s:%s", m->cfg.rpc_address, port);
	return 0;
}

void mc_rpc_server_stop(struct mc_master *m)
{
	if (m->listener) {
		evconnlistener_free(m->listener);
		m->listener = NULL;
	}
	if (m->ev_load_resume)
		event_free(m->ev_load_resume);
	m->ev_load_resume = NULL;
	while (m->conns) {
		struct mc_conn *c = m->conns;

		mc_conn_close(c, NULL);
		/* Not in a callback of c: free at once. */
		event_free(c->reaper);
		mc_wbuf_fini(&c->out);
		free(c->dur);
		free(c->hs);
		free(c);
	}
}

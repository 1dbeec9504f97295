/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine's handshake port (upstream-compatible, doc/protocol.md section 4): frames
 * of u64 length (little-endian, counting the type byte and the JSON), u8 type, JSON.  Metadata requests are answered with this
 * engine's segment descriptor (how P2PHANDSHAKE peers find each other without a metadata
 * service); Probe with {"status":"success"}; RDMA connection requests are rejected in a build
 * without RDMA.  One reply per connection, then the connection is closed.  Frames are bounded
 * by MC_HANDSHAKE_MAX_LENGTH (1 MiB default).
 *
 * Connections are bounded (conn_limit.h; port "engine_handshake" on /metrics) by
 * MC_HANDSHAKE_MAX_CONNECTIONS (1024) and MC_HANDSHAKE_MAX_CONNECTIONS_PER_PEER (64), and the
 * frame must have arrived whole within MC_HANDSHAKE_REQUEST_TIMEOUT_MS (5000) of the connection's
 * start (after the authentication, which has its own deadline), or the connection is closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include <jansson.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "reactor/auth_event.h"
#include "reactor/conn_limit.h"

struct mc_hs_pending;
struct mc_hs_conn;

struct mc_te_hs_server {
	struct evconnlistener *listener;
	struct mc_engine *e;
	struct mc_hs_pending *pending;	/* connections still authenticating */
	struct mc_hs_conn *conns;	/* connections reading a frame or replying */
	struct mc_conn_limit *limit;
	struct mc_port_limits lim;	/* from MC_HANDSHAKE_* */
};

/* A connection proving the cluster secret before its frame is read. */
struct mc_hs_pending {
	struct mc_hs_pending *prev, *next;
	struct mc_te_hs_server *s;
	struct mc_auth_op *op;
	evutil_socket_t fd;
	struct mc_conn_key key;		/* its slot in s->limit */
	char peer[64];
};

/* A connection reading its frame, then replying. */
struct mc_hs_conn {
	struct mc_hs_conn *prev, *next;
	struct mc_te_hs_server *s;	/* NULL: adopted (mc_te_hs_adopt), not counted */
	struct mc_engine *e;
	struct bufferevent *bev;
	struct event *ev_deadline;	/* the frame must be whole by then */
	struct mc_conn_key key;
	char peer[64];
};

static void mc_hs_conn_close(struct mc_hs_conn *c)
{
	if (c->s) {
		mc_conn_limit_release(c->s->limit, &c->key);
		if (c->prev)
			c->prev->next = c->next;
		else
			c->s->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
	}
	if (c->ev_deadline)
		event_free(c->ev_deadline);
	bufferevent_free(c->bev);
	free(c);
}

static size_t mc_hs_max(void)
{
	const char *v = getenv("MC_HANDSHAKE_MAX_LENGTH");
	long long n = v ? atoll(v) : 0;

	if (n < 1 || n > (128ll << 20))
		return 1u << 20;
	return (size_t)n;
}

static void mc_hs_on_write_done(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		mc_hs_conn_close(arg);
}

static void mc_hs_on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	mc_hs_conn_close(arg);
}

static void mc_hs_reply(struct mc_hs_conn *c, uint8_t type, const char *json)
{
	struct bufferevent *bev = c->bev;
	uint8_t hdr[9];
	size_t n = strlen(json);

	if (c->ev_deadline)
		event_del(c->ev_deadline);	/* the reply is bounded by the write timeout */
	mc_put_le64(hdr, (uint64_t)n + 1);
	hdr[8] = type;
	bufferevent_write(bev, hdr, sizeof(hdr));
	bufferevent_write(bev, json, n);
	bufferevent_disable(bev, EV_READ);
	bufferevent_setcb(bev, NULL, mc_hs_on_write_done, mc_hs_on_event, c);
}

#define MC_HS_MAX_NOTIFIES 65536

/* Keep a Notify frame's {name, notify_msg} for getNotifies (bounded queue). */
static void mc_hs_store_notify(struct mc_engine *e, struct evbuffer *in, size_t len)
{
	json_error_t err;
	json_t *j;
	char *buf = malloc(9 + len);	/* length + type, then the JSON */
	struct mc_te_notify *n;

	if (buf == NULL)
		return;
	evbuffer_copyout(in, buf, 9 + len);
	j = json_loadb(buf + 9, len, 0, &err);
	free(buf);
	if (!json_is_string(json_object_get(j, "name")) ||
	    !json_is_string(json_object_get(j, "notify_msg"))) {
		json_decref(j);
		return;
	}
	n = calloc(1, sizeof(*n));
	if (n) {
		n->name = strdup(json_string_value(json_object_get(j, "name")));
		n->msg = strdup(json_string_value(json_object_get(j, "notify_msg")));
	}
	json_decref(j);
	if (n == NULL || n->name == NULL || n->msg == NULL) {
		mc_te_notify_free(n);
		return;
	}
	pthread_mutex_lock(&e->mu);
	if (e->nnotifies < MC_HS_MAX_NOTIFIES) {
		*e->notifies_tail = n;
		e->notifies_tail = &n->next;
		e->nnotifies++;
		n = NULL;
	}
	pthread_mutex_unlock(&e->mu);
	mc_te_notify_free(n);
}

/* A Connection frame goes to the first installed transport that answers them (rdma); NULL when
 * none does.  Transport states are freed only on this (the loop) thread. */
static char *mc_hs_on_connection(struct mc_engine *e, const char *json, size_t len)
{
	const struct mc_te_transport_ops *ops = NULL;
	void *state = NULL;
	int k;

	pthread_mutex_lock(&e->mu);
	for (k = 0; k < MC_TE_NXPORTS && state == NULL; k++)
		if (e->xports[k].state && e->xports[k].ops->on_connection) {
			state = e->xports[k].state;
			ops = e->xports[k].ops;
		}
	pthread_mutex_unlock(&e->mu);
	return state ? ops->on_connection(state, json, len) : NULL;
}

/* A peer without the cluster secret: its frame is answered with a refusal in the handshake
 * protocol's own words (upstream's peers report it as a rejected handshake), then closed. */
static void mc_hs_on_read_refusing(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[9];

	if (evbuffer_get_length(in) < sizeof(hdr))
		return;
	evbuffer_copyout(in, hdr, sizeof(hdr));
	mc_hs_reply(arg, hdr[8],
		    "{\"reply_msg\":\"unauthorized: this cluster requires the cluster secret\"}");
}

static void mc_hs_on_read(struct bufferevent *bev, void *arg)
{
	struct mc_hs_conn *c = arg;
	struct mc_engine *e = c->e;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[9];
	uint64_t len;
	char *desc;

	if (evbuffer_get_length(in) < sizeof(hdr))
		return;
	evbuffer_copyout(in, hdr, sizeof(hdr));
	len = mc_get_le64(hdr);
	if (len == 0 || len > mc_hs_max()) {
		mc_log_warn("handshake: frame of %llu bytes from %s refused",
			    (unsigned long long)len, c->peer);
		mc_hs_conn_close(c);
		return;
	}
	if (evbuffer_get_length(in) < 8 + len)
		return;
	switch (hdr[8]) {
	case MC_HS_METADATA:
		pthread_mutex_lock(&e->mu);
		desc = mc_te_desc_to_json(e);
		pthread_mutex_unlock(&e->mu);
		mc_hs_reply(c, MC_HS_METADATA, desc ? desc : "{}");
		free(desc);
		break;
	case MC_HS_PROBE:
		mc_hs_reply(c, MC_HS_PROBE, "{\"status\":\"success\"}");
		break;
	case MC_HS_NOTIFY:
		mc_hs_store_notify(e, in, (size_t)len - 1);
		mc_hs_reply(c, MC_HS_NOTIFY, "{\"notify_msg\":\"success\"}");
		break;
	case MC_HS_CONNECTION:
		desc = malloc(8 + (size_t)len);
		if (desc) {
			char *reply;

			evbuffer_copyout(in, desc, 8 + (size_t)len);
			reply = mc_hs_on_connection(e, desc + 9, (size_t)len - 1);
			free(desc);
			desc = reply;
		}
		mc_hs_reply(c, MC_HS_CONNECTION,
			    desc ? desc : "{\"reply_msg\":\"RDMA is not available on this peer\"}");
		free(desc);
		break;
	default:
		mc_hs_reply(c, hdr[8], "{\"reply_msg\":\"unsupported handshake type\"}");
		break;
	}
}

static void mc_hs_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct mc_hs_conn *c = arg;

	(void)fd;
	(void)what;
	mc_conn_limit_closed_slow(c->s->limit, c->peer, "MC_HANDSHAKE_REQUEST_TIMEOUT_MS");
	mc_hs_conn_close(c);
}

/* Serve fd on base for s (NULL: not counted; otherwise key holds its slot, given back on every
 * path): its frame is read (refusing: answered with a refusal); pre holds bytes already read
 * from it.  0 or -ENOMEM (fd closed). */
static int mc_hs_serve_on(struct mc_engine *e, struct mc_te_hs_server *s, struct event_base *base,
			  evutil_socket_t fd, const struct mc_conn_key *key, const char *peer,
			  const uint8_t *pre, size_t npre, int refusing)
{
	struct mc_hs_conn *c = calloc(1, sizeof(*c));
	struct timeval tv = { 5, 0 };

	if (c == NULL || (c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		free(c);
		if (s)
			mc_conn_limit_release(s->limit, key);
		evutil_closesocket(fd);
		return -ENOMEM;
	}
	c->e = e;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (s) {
		c->s = s;
		c->key = *key;
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		if (s->lim.request_ms) {
			struct timeval d = { s->lim.request_ms / 1000,
					     (s->lim.request_ms % 1000) * 1000 };

			c->ev_deadline = evtimer_new(base, mc_hs_on_deadline, c);
			if (c->ev_deadline == NULL) {
				mc_hs_conn_close(c);
				return -ENOMEM;
			}
			evtimer_add(c->ev_deadline, &d);
		}
	}
	if (npre)
		evbuffer_prepend(bufferevent_get_input(c->bev), pre, npre);
	bufferevent_setcb(c->bev, refusing ? mc_hs_on_read_refusing : mc_hs_on_read, NULL,
			  mc_hs_on_event, c);
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	return 0;
}

static void mc_hs_serve(struct mc_te_hs_server *s, evutil_socket_t fd,
			const struct mc_conn_key *key, const char *peer, const uint8_t *pre,
			size_t npre, int refusing)
{
	mc_hs_serve_on(s->e, s, evconnlistener_get_base(s->listener), fd, key, peer, pre, npre,
		       refusing);
}

int mc_te_hs_adopt(struct mc_engine *e, struct event_base *base, evutil_socket_t fd)
{
	return mc_hs_serve_on(e, NULL, base, fd, NULL, "adopted", NULL, 0, 0);
}

static void mc_hs_pending_free(struct mc_hs_pending *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		p->s->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	free(p);
}

static void mc_hs_on_auth(void *arg, int rc, struct mc_auth_hs *hs)
{
	struct mc_hs_pending *p = arg;
	struct mc_te_hs_server *s = p->s;
	evutil_socket_t fd = p->fd;
	struct mc_conn_key key = p->key;
	char peer[64];

	snprintf(peer, sizeof(peer), "%s", p->peer);
	if (rc != 0)
		mc_auth_hs_refused(s->e->auth, "engine handshake", p->peer, rc, hs);
	mc_hs_pending_free(p);
	if (rc == 0) {
		mc_hs_serve(s, fd, &key, peer, NULL, 0, 0);
	} else if (rc == MC_AUTH_NOT_HELLO) {
		mc_hs_serve(s, fd, &key, peer, hs->msg, hs->pos, 1);
	} else {
		mc_conn_limit_release(s->limit, &key);
		evutil_closesocket(fd);
	}
}

static void mc_hs_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			    int salen, void *arg)
{
	struct mc_te_hs_server *s = arg;
	struct mc_hs_pending *p;
	struct mc_conn_key key;
	char peer[64];

	(void)l;
	(void)salen;
	if (mc_conn_limit_admit(s->limit, sa, &key) != 0) {
		evutil_closesocket(fd);
		return;
	}
	mc_conn_limit_peer(sa, peer, sizeof(peer));
	if (s->e->auth == NULL) {
		mc_hs_serve(s, fd, &key, peer, NULL, 0, 0);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		mc_conn_limit_release(s->limit, &key);
		evutil_closesocket(fd);
		return;
	}
	p->s = s;
	p->fd = fd;
	p->key = key;
	snprintf(p->peer, sizeof(p->peer), "%s", peer);
	p->op = mc_auth_op_start(evconnlistener_get_base(s->listener), fd, s->e->auth,
				 MC_AUTH_SERVER, 0, mc_hs_on_auth, p);
	if (p->op == NULL) {
		mc_conn_limit_release(s->limit, &key);
		evutil_closesocket(fd);
		free(p);
		return;
	}
	p->next = s->pending;
	if (s->pending)
		s->pending->prev = p;
	s->pending = p;
}

struct mc_hs_start_ctx {
	struct mc_engine *e;
	const char *ip;
	uint16_t port;
	int rc;
	struct mc_waiter w;
};

static void mc_hs_start_on_loop(void *arg)
{
	struct mc_hs_start_ctx *x = arg;
	struct event_base *base = mc_loop_thread_base(x->e->lt);
	const char *v;
	int lo = 15000, hi = 17000, tries, i;
	unsigned seed = (unsigned)getpid() ^ (unsigned)(uintptr_t)x;
	struct mc_te_hs_server *s = calloc(1, sizeof(*s));

	x->rc = ERR_SOCKET;
	if (s == NULL)
		goto out;
	s->e = x->e;
	s->lim = (struct mc_port_limits){ 1024, 64, 5000, 0 };
	mc_port_limits_env("MC_HANDSHAKE", &s->lim);
	s->limit = mc_conn_limit_new("engine_handshake", s->lim.max_conns, s->lim.max_per_peer);
	if (s->limit == NULL) {
		free(s);
		goto out;
	}
	if ((v = getenv("MC_MIN_RPC_PORT")) && atoi(v) > 0)
		lo = atoi(v);
	if ((v = getenv("MC_MAX_RPC_PORT")) && atoi(v) >= lo)
		hi = atoi(v);
	tries = x->port ? 1 : 500;
	for (i = 0; i < tries; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		uint16_t p = x->port ? x->port : (uint16_t)(lo + (int)(rand_r(&seed) %
							      (unsigned)(hi - lo + 1)));

		sa.sin_port = htons(p);
		inet_pton(AF_INET, x->ip, &sa.sin_addr);
		s->listener = evconnlistener_new_bind(base, mc_hs_on_accept, s,
						      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
							      LEV_OPT_CLOSE_ON_EXEC,
						      128, (struct sockaddr *)&sa, sizeof(sa));
		if (s->listener) {
			x->port = p;
			x->e->hs = s;
			x->rc = 0;
			goto out;
		}
	}
	mc_conn_limit_free(s->limit);
	free(s);
out:
	mc_waiter_signal(&x->w, 0);
}

int mc_te_hs_start(struct mc_engine *e, const char *bind_ip, uint16_t *port)
{
	struct mc_hs_start_ctx x = { .e = e, .ip = bind_ip, .port = *port };

	mc_waiter_init(&x.w);
	mc_loop_thread_call(e->lt, mc_hs_start_on_loop, &x);
	mc_waiter_wait(&x.w);
	mc_waiter_fini(&x.w);
	*port = x.port;
	return x.rc;
}

static void mc_hs_stop_on_loop(void *arg)
{
	struct mc_hs_start_ctx *x = arg;

	if (x->e->hs) {
		struct mc_te_hs_server *s = x->e->hs;

		evconnlistener_free(s->listener);
		while (s->pending) {
			mc_auth_op_free(s->pending->op);
			evutil_closesocket(s->pending->fd);
			mc_hs_pending_free(s->pending);
		}
		while (s->conns)
			mc_hs_conn_close(s->conns);
		mc_conn_limit_free(s->limit);
		free(s);
		x->e->hs = NULL;
	}
	mc_waiter_signal(&x->w, 0);
}

void mc_te_hs_stop(struct mc_engine *e)
{
	struct mc_hs_start_ctx x = { .e = e };

	mc_waiter_init(&x.w);
	mc_loop_thread_call(e->lt, mc_hs_stop_on_loop, &x);
	mc_waiter_wait(&x.w);
	mc_waiter_fini(&x.w);
}

/* Blocking I/O with a bound on each wait, for API threads. */
static int mc_hs_io(int fd, void *buf, size_t n, int writing, int timeout_ms)
{
	size_t done = 0;

	while (done < n) {
		struct pollfd p = { .fd = fd, .events = writing ? POLLOUT : POLLIN };
		ssize_t r;

		if (poll(&p, 1, timeout_ms) <= 0)
			return -1;
		r = writing ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL)
			    : recv(fd, (char *)buf + done, n - done, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* Connect within timeout_ms (a peer behind a partition drops SYNs: a plain connect would wait
 * minutes).  The socket is left non-blocking, which mc_hs_io copes with. */
static int mc_hs_connect(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t el = sizeof(err);

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
		return -1;
	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -1;
	if (poll(&p, 1, timeout_ms) <= 0)
		return -1;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
		return -1;
	return 0;
}

int mc_te_hs_call(const char *host, uint16_t port, uint8_t type, const char *json, char **reply,
		  size_t *reply_len)
{
	return mc_te_hs_call_within(NULL, host, port, type, json, reply, reply_len, 5000);
}

int mc_te_hs_call_within(const struct mc_auth *a, const char *host, uint16_t port, uint8_t type,
			 const char *json, char **reply, size_t *reply_len, unsigned timeout_ms)
{
	int to = timeout_ms ? (int)timeout_ms : 5000;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	uint8_t hdr[9];
	char ps[8];
	uint64_t len;
	int fd, rc = ERR_SOCKET;
	size_t n = strlen(json);

	*reply = NULL;
	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0)
		return ERR_DNS;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || mc_hs_connect(fd, res->ai_addr, res->ai_addrlen, to) != 0)
		goto out;
	if (a) {
		struct mc_auth_hs hs;

		if (mc_auth_hs_init(&hs, a, MC_AUTH_CLIENT) != 0 || mc_auth_hs_run(&hs, fd, to) != 0) {
			mc_log_warn("handshake with %s:%u: authentication failed: %s", host, port,
				    hs.why ? hs.why : "?");
			rc = ERR_REJECT_HANDSHAKE;
			goto out;
		}
	}
	mc_put_le64(hdr, (uint64_t)n + 1);
	hdr[8] = type;
	if (mc_hs_io(fd, hdr, sizeof(hdr), 1, to) || mc_hs_io(fd, (void *)json, n, 1, to) ||
	    mc_hs_io(fd, hdr, sizeof(hdr), 0, to))
		goto out;
	len = mc_get_le64(hdr);
	if (len == 0 || len > mc_hs_max() || hdr[8] != type) {
		rc = ERR_MALFORMED_JSON;
		goto out;
	}
	*reply = malloc((size_t)len);
	if (*reply == NULL || mc_hs_io(fd, *reply, (size_t)len - 1, 0, to)) {
		free(*reply);
		*reply = NULL;
		goto out;
	}
	(*reply)[len - 1] = '\0';
	*reply_len = (size_t)len - 1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return rc;
}

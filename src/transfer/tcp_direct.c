/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP data client on the calling thread (see tcp.h, mc_tcp_direct_run): a batch of small
 * transfers carried by the thread that waits for them, over connections it holds alone while
 * it runs, instead of two thread hand-offs to the loop's lanes and back.
 *
 * A small batch is latency-bound: its bytes take microseconds, but the loop path wakes the
 * loop thread to send, and wakes the caller when the last status is in, each a wake-up of a
 * sleeping thread (tens of microseconds, far more on a busy machine).  Here the caller writes
 * every request of the batch (headers and WRITE payloads gathered into few writev calls, all
 * peers' connections at once), then reads the statuses (and READ payloads) itself, polling
 * every connection of the batch, sending and receiving as each socket allows (so neither side
 * can stall the other on full buffers).  The wire format is the lanes' (upstream's protocol v2).
 * Each request's header, and the payload of a WRITE of at most MC_TCP_DIRECT_STAGE bytes, are
 * copied one after the other into one buffer per peer, so that a batch of small writes leaves in
 * one writev of one piece (not two pieces per request, which the kernel takes one by one).
 *
 * Connections are kept for the next batch in a small pool (MC_TCP_DIRECT_IDLE), shared by all
 * threads under mu; a thread takes one per peer and gives it back only when every request on it
 * got its answer.  A pooled connection the peer closed meanwhile shows as readable and is
 * dropped before use.  A peer that cannot be connected to within connect_timeout_ms (refused,
 * unreachable: what the lanes would find too) fails the requests to it at once; a connection
 * that fails before any request got its status (reset, EOF: a peer restarted while it was
 * pooled) leaves those requests to the caller, which hands them to the loop's lanes; one that
 * falls silent for io_timeout_ms fails its requests.  A failed connection is reset so that
 * nothing of it reaches the peer late.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/crc64.h"
#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "transfer/tcp.h"

#define MC_TCP_DIRECT_IDLE 64	/* pooled connections, all peers together */
#define MC_TCP_DIRECT_IOV 256
#define MC_TCP_DIRECT_INBUF 4096
#define MC_TCP_DIRECT_STAGE 512	/* WRITE payloads up to this size are sent from the stage */

struct mc_dconn {
	struct mc_dconn *next;
	int fd;
	uint16_t port;
	char host[256];
};

struct mc_tcp_direct {
	pthread_mutex_t mu;
	struct mc_dconn *idle;
	unsigned nidle;
	unsigned connect_timeout_ms, io_timeout_ms;
	const struct mc_auth *auth;
};

/* One peer's share of a run: its connection and where sending and receiving stand. */
struct mc_drun {
	struct mc_tcp_dpeer *p;
	struct mc_dconn *conn;
	size_t send_op;		/* next op to send ... */
	uint64_t send_off;	/* ... and bytes of its header + payload sent */
	size_t recv_op;		/* next op awaiting its status ... */
	uint32_t status_got;	/* ... bytes of its status in, */
	uint8_t status[8];
	uint64_t recvd;		/* ... and of its READ payload */
	uint8_t *stage;		/* NULL, or every op's header (and small WRITE payload) in order */
	size_t *soff;		/* op k's bytes begin at stage + soff[k] */
	struct mc_tcp_inbuf in;	/* over inbuf */
	uint8_t inbuf[MC_TCP_DIRECT_INBUF];
};

static int64_t mc_dnow_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct mc_tcp_direct *mc_tcp_direct_new(const struct mc_tcp_client_opts *opts)
{
	struct mc_tcp_direct *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	pthread_mutex_init(&d->mu, NULL);
	d->connect_timeout_ms = opts && opts->connect_timeout_ms ? opts->connect_timeout_ms : 5000;
	d->io_timeout_ms = opts && opts->io_timeout_ms ? opts->io_timeout_ms : 30000;
	d->auth = opts ? opts->auth : NULL;
	return d;
}

static void mc_dconn_close(struct mc_dconn *c, int reset)
{
	if (reset) {
		struct linger lg = { 1, 0 };

		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(c->fd);
	free(c);
}

void mc_tcp_direct_free(struct mc_tcp_direct *d)
{
	struct mc_dconn *c, *n;

	if (d == NULL)
		return;
	for (c = d->idle; c; c = n) {
		n = c->next;
		mc_dconn_close(c, 0);
	}
	pthread_mutex_destroy(&d->mu);
	free(d);
}

/* A connected socket to host:port, the cluster secret proven; NULL when none could be made
 * (logged). */
static struct mc_dconn *mc_dconn_connect(struct mc_tcp_direct *d, const char *host,
					 uint16_t port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST };
	struct addrinfo *res = NULL;
	struct mc_dconn *c;
	char pbuf[8];
	int one = 1, err = 0, fd;
	socklen_t elen = sizeof(err);

	if (strlen(host) >= sizeof(c->host))
		return NULL;
	snprintf(pbuf, sizeof(pbuf), "%u", port);
	/* Segment endpoints carry IP addresses: a name would need the blocking resolver, which
	 * the loop's lanes use instead. */
	if (getaddrinfo(host, pbuf, &hints, &res) != 0) {
		mc_log_warn("tcp: cannot resolve %s (an IP address is expected)", host);
		return NULL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return NULL;
	}
	if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		int n = -1;

		err = errno;
		if (err == EINPROGRESS) {
			n = poll(&pf, 1, (int)d->connect_timeout_ms);
			err = n == 0 ? ETIMEDOUT : n < 0 ? errno : 0;
			if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
				err = errno;
		}
		if (err) {
			mc_log_warn("tcp: connect to %s:%u: %s", host, port, strerror(err));
			freeaddrinfo(res);
			close(fd);
			return NULL;
		}
	}
	freeaddrinfo(res);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	mc_tcp_tune_local(fd);	/* WRITE payloads go out on it */
	if (d->auth) {
		struct mc_auth_hs hs;

		if (mc_auth_hs_init(&hs, d->auth, MC_AUTH_CLIENT) != 0 ||
		    mc_auth_hs_run(&hs, fd, (int)d->connect_timeout_ms) != 0) {
			mc_log_warn("tcp: %s:%u refused us: %s", host, port,
				    hs.why ? hs.why : "authentication failed");
			close(fd);
			return NULL;
		}
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->port = port;
	snprintf(c->host, sizeof(c->host), "%s", host);
	return c;
}

/* A connection to host:port: a pooled one still open, else a new one.  NULL: none. */
static struct mc_dconn *mc_dconn_get(struct mc_tcp_direct *d, const char *host, uint16_t port)
{
	struct mc_dconn **pp, *c;

	for (;;) {
		pthread_mutex_lock(&d->mu);
		for (pp = &d->idle; (c = *pp) != NULL; pp = &c->next)
			if (c->port == port && !strcmp(c->host, host))
				break;
		if (c) {
			*pp = c->next;
			d->nidle--;
		}
		pthread_mutex_unlock(&d->mu);
		if (c == NULL)
			return mc_dconn_connect(d, host, port);
		{
			/* Idle, nothing may have arrived: readable means closed (or garbage). */
			struct pollfd pf = { .fd = c->fd, .events = POLLIN };

			if (poll(&pf, 1, 0) == 0)
				return c;
		}
		mc_dconn_close(c, 1);
	}
}

static void mc_dconn_put(struct mc_tcp_direct *d, struct mc_dconn *c)
{
	pthread_mutex_lock(&d->mu);
	if (d->nidle < MC_TCP_DIRECT_IDLE) {
		c->next = d->idle;
		d->idle = c;
		d->nidle++;
		c = NULL;
	}
	pthread_mutex_unlock(&d->mu);
	if (c)
		mc_dconn_close(c, 0);
}

static uint64_t mc_dop_wire(const struct mc_tcp_dop *o)
{
	return MC_TCP_HDR_LEN + (o->opcode == MC_XFER_WRITE ? o->len : 0);
}

/* The bytes of o that its peer's stage holds: its header, and its payload if small. */
static uint64_t mc_dop_staged(const struct mc_tcp_dop *o)
{
	return MC_TCP_HDR_LEN +
	       (o->opcode == MC_XFER_WRITE && o->len <= MC_TCP_DIRECT_STAGE ? o->len : 0);
}

/* Append [p, p + len) to iov[0..*n), as part of the last piece where it continues it. */
static void mc_diov_add(struct iovec *iov, int *n, uint8_t *p, size_t len)
{
	if (*n > 0 && (uint8_t *)iov[*n - 1].iov_base + iov[*n - 1].iov_len == p) {
		iov[*n - 1].iov_len += len;
		return;
	}
	iov[*n].iov_base = p;
	iov[(*n)++].iov_len = len;
}

/* Copy r's requests into its stage (left NULL when out of memory: they go from their own
 * places). */
static void mc_drun_stage(struct mc_drun *r)
{
	size_t k, total = 0;

	for (k = 0; k < r->p->n; k++)
		total += (size_t)mc_dop_staged(&r->p->ops[k]);
	r->stage = malloc(total ? total : 1);
	r->soff = malloc((r->p->n ? r->p->n : 1) * sizeof(*r->soff));
	if (r->stage == NULL || r->soff == NULL) {
		free(r->stage);
		free(r->soff);
		r->stage = NULL;
		r->soff = NULL;
		return;
	}
	for (k = 0, total = 0; k < r->p->n; k++) {
		const struct mc_tcp_dop *o = &r->p->ops[k];
		size_t st = (size_t)mc_dop_staged(o);

		r->soff[k] = total;
		memcpy(r->stage + total, o->hdr, MC_TCP_HDR_LEN);
		if (st > MC_TCP_HDR_LEN)
			memcpy(r->stage + total + MC_TCP_HDR_LEN, o->local, st - MC_TCP_HDR_LEN);
		total += st;
	}
}

/* Write as much of r's requests as the socket takes.  0, or -1 (errno). */
static int mc_drun_send(struct mc_drun *r)
{
	while (r->send_op < r->p->n) {
		struct iovec iov[MC_TCP_DIRECT_IOV];
		size_t i = r->send_op;
		uint64_t off = r->send_off;
		int n = 0;
		ssize_t w;

		/* At most two pieces per request: the array has room for the last one's. */
		for (; i < r->p->n && n < MC_TCP_DIRECT_IOV - 1; i++, off = 0) {
			struct mc_tcp_dop *o = &r->p->ops[i];
			uint64_t st = r->stage ? mc_dop_staged(o) : MC_TCP_HDR_LEN;

			if (off < st) {
				mc_diov_add(iov, &n,
					    r->stage ? r->stage + r->soff[i] + off : o->hdr + off,
					    (size_t)(st - off));
				off = st;
			}
			if (off < mc_dop_wire(o))
				mc_diov_add(iov, &n, o->local + (off - MC_TCP_HDR_LEN),
					    (size_t)(mc_dop_wire(o) - off));
		}
		w = writev(r->conn->fd, iov, n);
		if (w < 0)
			return errno == EINTR ? 0 : errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		while (w > 0) {
			struct mc_tcp_dop *o = &r->p->ops[r->send_op];
			uint64_t take = mc_dop_wire(o) - r->send_off;

			if ((uint64_t)w < take) {
				r->send_off += (uint64_t)w;
				w = 0;
			} else {
				w -= (ssize_t)take;
				r->send_op++;
				r->send_off = 0;
			}
		}
		if (r->send_op < r->p->n && n >= MC_TCP_DIRECT_IOV - 1)
			continue;	/* more pieces than one writev takes */
		if (r->send_op < r->p->n)
			return 0;	/* the socket is full */
	}
	return 0;
}

/* Read what arrived for r: statuses and READ payloads, in request order.  Returns 1 when
 * something moved, 0 when nothing could be read, -1 on error or EOF (errno; 0 for EOF), -2 on
 * a reply that is not one. */
static int mc_drun_recv(struct mc_drun *r)
{
	int moved = 0;

	while (r->recv_op < r->send_op) {
		struct mc_tcp_dop *o = &r->p->ops[r->recv_op];
		ssize_t got;

		if (r->status_got < 8) {
			got = mc_tcp_inbuf_take(&r->in, r->conn->fd, r->status + r->status_got,
						8 - r->status_got, UINT64_MAX, MSG_DONTWAIT);
			if (got <= 0)
				goto check;
			moved = 1;
			r->status_got += (uint32_t)got;
			if (r->status_got < 8)
				continue;
			if ((uint32_t)(mc_get_le64(r->status) >> 32) != MC_TCP_STATUS_MAGIC)
				return -2;
			r->recvd = 0;
		}
		if ((uint32_t)mc_get_le64(r->status) == 0 && o->opcode == MC_XFER_READ &&
		    r->recvd < o->len) {
			got = mc_tcp_inbuf_take(&r->in, r->conn->fd, o->local + r->recvd,
						o->len - r->recvd, MC_TCP_DIRECT_INBUF / 4,
						MSG_DONTWAIT);
			if (got <= 0)
				goto check;
			moved = 1;
			r->recvd += (uint64_t)got;
			if (r->recvd < o->len)
				continue;
		}
		if ((uint32_t)mc_get_le64(r->status) != 0) {
			mc_log_warn("tcp: %s:%u refused a %s of %llu bytes", r->p->host, r->p->port,
				    o->opcode == MC_XFER_WRITE ? "write" : "read",
				    (unsigned long long)o->len);
			o->status = MC_ERR_TRANSFER_FAIL;
		} else {
			if (o->want_crc)
				o->crc = mc_crc64(0, o->local, o->len);
			o->status = 0;
		}
		r->recv_op++;
		r->status_got = 0;
		continue;
check:
		if (got == 0) {
			errno = 0;
			return -1;
		}
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? moved : -1;
	}
	if (r->recv_op == r->p->n && r->in.pos < r->in.len)
		return -2;	/* bytes past the last answer */
	if (!moved && r->recv_op == r->send_op && r->recv_op < r->p->n) {
		/* Readable while no answer is due: EOF, or bytes that answer nothing. */
		uint8_t b;
		ssize_t got = recv(r->conn->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

		if (got > 0)
			return -2;
		if (got == 0) {
			errno = 0;
			return -1;
		}
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	}
	return moved;
}

/* r's connection failed: reset it; its requests without an answer go back to the caller
 * (left at MC_TCP_DIRECT_NOT_RUN) or, with fail, fail. */
static void mc_drun_fail(struct mc_drun *r, int fail, const char *why)
{
	size_t i;

	mc_log_warn("tcp: direct connection to %s:%u failed (%s): %zu request(s) %s",
		    r->p->host, r->p->port, why, r->p->n - r->recv_op,
		    fail ? "failed" : "left to the lanes");
	mc_dconn_close(r->conn, 1);
	r->conn = NULL;
	for (i = r->recv_op; i < r->p->n; i++)
		r->p->ops[i].status = fail ? MC_ERR_TRANSFER_FAIL : MC_TCP_DIRECT_NOT_RUN;
}

int mc_tcp_direct_run(struct mc_tcp_direct *d, struct mc_tcp_dpeer *peers, size_t npeers)
{
	struct mc_drun *runs;
	struct pollfd *pf;
	size_t i, k, active = 0;
	int64_t last_move;

	runs = calloc(npeers ? npeers : 1, sizeof(*runs));
	pf = calloc(npeers ? npeers : 1, sizeof(*pf));
	if (runs == NULL || pf == NULL) {
		for (i = 0; i < npeers; i++)
			for (k = 0; k < peers[i].n; k++)
				peers[i].ops[k].status = MC_TCP_DIRECT_NOT_RUN;
		free(runs);
		free(pf);
		return -ENOMEM;
	}
	for (i = 0; i < npeers; i++) {
		struct mc_tcp_dpeer *p = &peers[i];

		runs[i].p = p;
		runs[i].in.buf = runs[i].inbuf;
		runs[i].in.cap = sizeof(runs[i].inbuf);
		for (k = 0; k < p->n; k++) {
			struct mc_tcp_dop *o = &p->ops[k];

			o->status = MC_TCP_DIRECT_NOT_RUN;
			mc_put_le64(o->hdr, o->len);
			mc_put_le64(o->hdr + 8, o->remote);
			o->hdr[16] = (uint8_t)(o->opcode | 0x80);
			memset(o->hdr + 17, 0, MC_TCP_HDR_LEN - 17);
			if (o->want_crc && o->opcode == MC_XFER_WRITE)
				o->crc = mc_crc64(0, o->local, o->len);
		}
		if (p->n == 0)
			continue;
		mc_drun_stage(&runs[i]);
		runs[i].conn = mc_dconn_get(d, p->host, p->port);
		if (runs[i].conn == NULL) {
			/* The lanes would wait for the same connect again: fail them now. */
			for (k = 0; k < p->n; k++)
				p->ops[k].status = MC_ERR_TRANSFER_FAIL;
			continue;
		}
		if (mc_drun_send(&runs[i]) < 0)
			mc_drun_fail(&runs[i], 0, strerror(errno));
		else
			active++;
	}
	last_move = mc_dnow_ms();
	while (active) {
		int64_t left = last_move + d->io_timeout_ms - mc_dnow_ms();
		size_t np = 0;
		int n;

		for (i = 0; i < npeers; i++) {
			struct mc_drun *r = &runs[i];

			if (r->conn == NULL || r->recv_op == r->p->n)
				continue;
			pf[np].fd = r->conn->fd;
			pf[np].events = (short)(POLLIN | (r->send_op < r->p->n ? POLLOUT : 0));
			pf[np++].revents = 0;
		}
		if (left <= 0) {
			for (i = 0; i < npeers; i++)
				if (runs[i].conn && runs[i].recv_op < runs[i].p->n)
					mc_drun_fail(&runs[i], 1, "no progress (io timeout)");
			break;
		}
		n = poll(pf, np, left > 1000000 ? 1000000 : (int)left);
		if (n < 0 && errno != EINTR)
			left = 0;
		for (i = 0, np = 0; n > 0 && i < npeers; i++) {
			struct mc_drun *r = &runs[i];
			short ev;
			int rc = 0;

			if (r->conn == NULL || r->recv_op == r->p->n)
				continue;
			ev = pf[np++].revents;
			if (ev & POLLOUT) {
				size_t before = r->send_op;
				uint64_t boff = r->send_off;

				if (mc_drun_send(r) < 0) {
					mc_drun_fail(r, r->recv_op > 0, strerror(errno));
					active--;
					continue;
				}
				if (r->send_op != before || r->send_off != boff)
					last_move = mc_dnow_ms();
			}
			if (ev & (POLLIN | POLLERR | POLLHUP))
				rc = mc_drun_recv(r);
			if (rc == 1)
				last_move = mc_dnow_ms();
			if (rc < 0) {
				/* A restarted peer shows here on the first batch after: before
				 * any answer, the lanes may still carry the requests. */
				mc_drun_fail(r, r->recv_op > 0 || rc == -2,
					     rc == -2 ? "not a data-server reply"
						      : errno ? strerror(errno) : "connection closed");
				active--;
				continue;
			}
			if (r->recv_op == r->p->n) {
				mc_dconn_put(d, r->conn);
				r->conn = NULL;
				active--;
			}
		}
	}
	for (i = 0; i < npeers; i++) {
		free(runs[i].stage);
		free(runs[i].soff);
	}
	free(runs);
	free(pf);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP data client (see tcp.h): persistent connections ("lanes") per peer, transfers split into
 * slices spread over the lanes, many slices in flight per lane.
 *
 * Each lane keeps one FIFO of slices.  A send cursor walks it writing headers (and WRITE
 * payloads straight from the caller's memory); replies come back in the same order, so the head
 * of the FIFO is always the slice the next status frame belongs to, and READ payloads are
 * received straight into the caller's memory.  A lane that fails (connection refused, reset, a
 * bad status frame, no byte moving either way for io_timeout_ms while it holds slices, or a
 * connect that takes longer than connect_timeout_ms) fails every slice it holds, is reset (so
 * that unsent bytes never reach the peer late) and is reconnected by the next submit.
 * Completion callbacks are queued and run from a separate event, never from inside submit and
 * never while a lane is being walked.
 *
 * Slices queued on connected lanes by one loop iteration's submits are written from one deferred
 * event right after them (the sockets are almost always writable: no readiness event, no epoll
 * change); only a full socket waits for EV_WRITE.  A lane receiving a READ payload sets
 * SO_RCVLOWAT to what is sure to come (at most MC_TCP_RCVLOWAT), so that it wakes a few times
 * per MiB rather than per segment.
 *
 * Small transfers cost few system calls: the send cursor gathers up to MC_TCP_IOV pieces
 * (headers and payloads) into one writev, and replies are read through a small buffer
 * (MC_TCP_INBUF), so that the statuses of a batch of small writes, which the data server sends
 * together, take one recv; a READ payload of MC_TCP_DIRECT bytes or more is received straight
 * into the caller's memory.
 *
 * A transfer submitted with a crc pointer gets the CRC-64 of its bytes on the way: a WRITE
 * slice's payload is checksummed at most MC_TCP_CRC_AHEAD bytes ahead of what the socket was
 * given, so the kernel copies bytes the CRC just brought into cache; a READ slice's payload as
 * each recv lands, while it is in cache.  Slices' values are combined in order at the end.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/crc64.h"
#include "common/errcode.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/wire.h"
#include "transfer/tcp.h"

#define MC_TCP_MAX_LANES 16
#define MC_TCP_IOV 256
#define MC_TCP_INBUF 2048	/* buffered replies: statuses and small READ payloads */
#define MC_TCP_DIRECT 1024	/* READ payload left from this size: received in place */
#define MC_TCP_CRC_AHEAD (256u << 10)
/* A lane waiting for the rest of a READ payload asks the kernel to wake it only once this much
 * (or the whole rest, if less) has arrived (SO_RCVLOWAT): each wake-up costs both sides a
 * scheduler round trip, and a 1 MiB payload otherwise lands in dozens of small pieces. */
#define MC_TCP_RCVLOWAT (256u << 10)

struct mc_xfer {
	mc_xfer_done_fn cb;
	void *arg;
	uint32_t pending;
	int status;
	struct mc_xfer *next_done;
	uint64_t *crc_out;	/* NULL: no CRC wanted */
	uint64_t slice_size;	/* every slice's length but the last's */
	uint32_t nslices;
	uint64_t *slice_crc;	/* per slice, when there are several; else crc1 */
	uint64_t crc1;
	/* The request, kept while it waits for room on its peer's lanes (max_queued_bytes). */
	struct mc_peer *peer;
	struct mc_xfer *next_wait;
	int opcode;
	void *local;
	uint64_t remote, len;
};

struct mc_slice {
	struct mc_slice *next;
	struct mc_xfer *x;
	uint8_t op;
	uint8_t *local;
	uint64_t len;
	uint8_t hdr[MC_TCP_HDR_LEN];
	uint64_t sent;		/* bytes of header + (WRITE) payload sent */
	uint8_t status[8];
	uint32_t status_got;
	uint64_t recvd;		/* READ payload bytes received */
	uint32_t idx;		/* its place in the transfer */
	uint64_t crc;		/* CRC-64 of the payload's first crc_done bytes (crc wanted) */
	uint64_t crc_done;
};

struct mc_peer;

struct mc_lane {
	struct mc_peer *peer;
	evutil_socket_t fd;
	struct event *ev_read, *ev_write, *ev_timer;
	int connecting;		/* connect, then the authentication handshake (hs) */
	struct mc_auth_hs *hs;
	struct mc_slice *head, *tail, *send_cur;
	uint64_t queued;	/* bytes not yet completed */
	int lowat;		/* the socket's SO_RCVLOWAT (1: the kernel's default) */
	struct mc_lane *flush_next;	/* on its client's flush list (flush_queued) */
	int flush_queued;
	struct mc_tcp_inbuf in;	/* over inbuf */
	uint8_t inbuf[MC_TCP_INBUF];
};

struct mc_peer {
	struct mc_peer *next;
	struct mc_tcp_client *c;
	char host[256];
	uint16_t port;
	uint64_t queued;		/* bytes of transfers on its lanes, not yet ended */
	struct mc_xfer *wait_head, *wait_tail;	/* past max_queued_bytes, in order */
	struct mc_lane lanes[MC_TCP_MAX_LANES];
};

struct mc_tcp_client {
	struct event_base *base;
	struct mc_tcp_client_opts opts;
	struct mc_peer *peers;
	struct mc_xfer *done_head, **done_tail;
	struct event *ev_done;
	struct mc_lane *flush_head;	/* lanes given slices by this loop iteration's submits */
	struct event *ev_flush;
};

static void mc_lane_on_io(evutil_socket_t fd, short what, void *arg);
static void mc_lane_on_timeout(evutil_socket_t fd, short what, void *arg);
static void mc_xfer_enqueue(struct mc_tcp_client *c, struct mc_xfer *x);
static void mc_peer_admit(struct mc_tcp_client *c, struct mc_peer *p);
static void mc_tcp_client_on_flush(evutil_socket_t fd, short what, void *arg);
static void mc_lane_want_flush(struct mc_tcp_client *c, struct mc_lane *l);

static uint64_t mc_env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (v == NULL || *v == '\0')
		return def;
	x = strtoull(v, &end, 10);
	return *end == '\0' && x > 0 ? x : def;
}

/* The whole transfer's CRC from its slices' (in order), into *crc_out, once all succeeded. */
static void mc_xfer_fold_crc(struct mc_xfer *x)
{
	uint64_t crc;
	uint32_t i;

	if (x->crc_out == NULL || x->status)
		return;
	if (x->nslices <= 1) {
		*x->crc_out = x->crc1;
		return;
	}
	crc = x->slice_crc[0];
	for (i = 1; i < x->nslices; i++)
		crc = mc_crc64_combine(crc, x->slice_crc[i],
				       i + 1 < x->nslices ? x->slice_size
							  : x->len - (uint64_t)i * x->slice_size);
	*x->crc_out = crc;
}

static void mc_xfer_finish(struct mc_tcp_client *c, struct mc_xfer *x)
{
	x->next_done = NULL;
	*c->done_tail = x;
	c->done_tail = &x->next_done;
	event_active(c->ev_done, EV_TIMEOUT, 1);
}

static void mc_tcp_client_on_done(evutil_socket_t fd, short what, void *arg)
{
	struct mc_tcp_client *c = arg;
	struct mc_xfer *x;

	(void)fd;
	(void)what;
	/* Callbacks may submit more transfers, which may queue more completions: take the list. */
	x = c->done_head;
	c->done_head = NULL;
	c->done_tail = &c->done_head;
	while (x) {
		struct mc_xfer *n = x->next_done;
		struct mc_peer *p = x->peer;

		if (p)
			p->queued -= x->len;
		mc_xfer_fold_crc(x);
		x->cb(x->arg, x->status);
		free(x->slice_crc);
		free(x);
		/* Its bytes are off the lanes: transfers waiting for room may go. */
		if (p && p->wait_head)
			mc_peer_admit(c, p);
		x = n;
	}
}

static void mc_slice_complete(struct mc_tcp_client *c, struct mc_slice *s, int status)
{
	struct mc_xfer *x = s->x;

	if (status)
		x->status = MC_ERR_TRANSFER_FAIL;
	else if (x->crc_out && x->nslices > 1)
		x->slice_crc[s->idx] = s->crc;
	else if (x->crc_out)
		x->crc1 = s->crc;
	if (--x->pending == 0)
		mc_xfer_finish(c, x);
	free(s);
}

static void mc_lane_fail(struct mc_lane *l, const char *why)
{
	struct mc_tcp_client *c = l->peer->c;
	struct mc_slice *s, *n;

	if (l->head)
		mc_log_warn("tcp lane to %s:%u failed (%s): failing its transfers", l->peer->host,
			    l->peer->port, why);
	if (l->fd >= 0) {
		event_del(l->ev_read);
		event_del(l->ev_write);
		event_del(l->ev_timer);
		if (l->head) {
			/* Reset rather than close: bytes of the failed transfers that the kernel
			 * has not sent yet are dropped instead of reaching the peer late. */
			struct linger lg = { 1, 0 };

			setsockopt(l->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		evutil_closesocket(l->fd);
		l->fd = -1;
	}
	l->connecting = 0;
	l->lowat = 1;
	free(l->hs);
	l->hs = NULL;
	for (s = l->head; s; s = n) {
		n = s->next;
		mc_slice_complete(c, s, -1);
	}
	l->head = l->tail = l->send_cur = NULL;
	l->queued = 0;
	l->in.pos = l->in.len = 0;
}

static void mc_lane_arm_timer(struct mc_lane *l)
{
	struct timeval tv;
	unsigned ms = l->connecting ? l->peer->c->opts.connect_timeout_ms
				    : l->peer->c->opts.io_timeout_ms;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	event_add(l->ev_timer, &tv);
}

static int mc_lane_connect(struct mc_lane *l)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char port[8];
	int one = 1, rc;
	evutil_socket_t fd;

	snprintf(port, sizeof(port), "%u", l->peer->port);
	/* Numeric addresses resolve without I/O; names fall back to the (blocking) resolver, which
	 * segment endpoints avoid by carrying IP addresses. */
	hints.ai_flags = AI_NUMERICHOST;
	rc = getaddrinfo(l->peer->host, port, &hints, &res);
	if (rc == EAI_NONAME) {
		hints.ai_flags = 0;
		rc = getaddrinfo(l->peer->host, port, &hints, &res);
	}
	if (rc != 0) {
		mc_log_warn("tcp: cannot resolve %s: %s", l->peer->host, gai_strerror(rc));
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, res->ai_addr, res->ai_addrlen) != 0 && errno != EINPROGRESS) {
		mc_log_warn("tcp: connect to %s:%u: %s", l->peer->host, l->peer->port,
			    strerror(errno));
		freeaddrinfo(res);
		close(fd);
		return -1;
	}
	freeaddrinfo(res);
	l->fd = fd;
	l->connecting = 1;
	event_assign(l->ev_read, l->peer->c->base, fd, EV_READ | EV_PERSIST, mc_lane_on_io, l);
	event_assign(l->ev_write, l->peer->c->base, fd, EV_WRITE | EV_PERSIST, mc_lane_on_io, l);
	event_add(l->ev_write, NULL);
	mc_lane_arm_timer(l);
	return 0;
}

/* Write as much of the queue as the socket takes.  Returns -1 on error. */
static int mc_lane_send(struct mc_lane *l)
{
	while (l->send_cur) {
		struct iovec iov[MC_TCP_IOV];
		struct mc_slice *s;
		int n = 0;
		ssize_t w;

		/* Gather several slices into one writev: small transfers pipeline cheaply. */
		for (s = l->send_cur; s && n < MC_TCP_IOV - 1; s = s->next) {
			uint64_t total = MC_TCP_HDR_LEN + (s->op == MC_XFER_WRITE ? s->len : 0);
			uint64_t off = s->sent;

			if (off < MC_TCP_HDR_LEN) {
				iov[n].iov_base = s->hdr + off;
				iov[n++].iov_len = MC_TCP_HDR_LEN - off;
				off = MC_TCP_HDR_LEN;
			}
			if (off < total) {
				uint64_t from = off - MC_TCP_HDR_LEN, upto = s->len;

				if (s->x->crc_out) {
					/* Checksum what goes out next, then hand the socket
					 * no more than that. */
					upto = from + MC_TCP_CRC_AHEAD < s->len ? from + MC_TCP_CRC_AHEAD
										: s->len;
					if (s->crc_done < upto) {
						s->crc = mc_crc64(s->crc, s->local + s->crc_done,
								  upto - s->crc_done);
						s->crc_done = upto;
					}
				}
				iov[n].iov_base = s->local + from;
				iov[n++].iov_len = upto - from;
				if (upto < s->len)
					break;	/* the rest after this part is sent */
			}
			if (s->op == MC_XFER_WRITE && s->len > (256u << 10))
				break;	/* big payloads go alone */
		}
		w = writev(l->fd, iov, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				event_add(l->ev_write, NULL);
				return 0;
			}
			return -1;
		}
		mc_lane_arm_timer(l);
		while (w > 0 && l->send_cur) {
			struct mc_slice *cur = l->send_cur;
			uint64_t total = MC_TCP_HDR_LEN + (cur->op == MC_XFER_WRITE ? cur->len : 0);
			uint64_t take = total - cur->sent;

			if ((uint64_t)w < take) {
				cur->sent += (uint64_t)w;
				w = 0;
			} else {
				cur->sent = total;
				w -= (ssize_t)take;
				l->send_cur = cur->next;
			}
		}
	}
	event_del(l->ev_write);
	return 0;
}

ssize_t mc_tcp_inbuf_take(struct mc_tcp_inbuf *b, int fd, uint8_t *dst, uint64_t want,
			  uint64_t direct, int flags)
{
	ssize_t r;
	size_t n;

	if (b->pos == b->len) {
		if (want >= direct)
			return recv(fd, dst, want > (1u << 30) ? (1u << 30) : (size_t)want, flags);
		r = recv(fd, b->buf, b->cap, flags);
		if (r <= 0)
			return r;
		b->pos = 0;
		b->len = (size_t)r;
	}
	n = b->len - b->pos;
	if (n > want)
		n = (size_t)want;
	memcpy(dst, b->buf + b->pos, n);
	b->pos += n;
	return (ssize_t)n;
}

/* Before the lane waits for more replies: the bytes sure to come that may arrive before it is
 * woken (the rest of the head READ's payload once its status said yes, at most
 * MC_TCP_RCVLOWAT), else 1.  Only the payload being received is sure to come: a later reply may
 * be a refusal without one. */
static void mc_lane_set_lowat(struct mc_lane *l)
{
	struct mc_slice *s = l->head;
	int want = 1;

	if (s && s != l->send_cur && s->status_got == 8 && s->op == MC_XFER_READ &&
	    (uint32_t)mc_get_le64(s->status) == 0 && s->recvd < s->len)
		want = s->len - s->recvd < MC_TCP_RCVLOWAT ? (int)(s->len - s->recvd)
							   : (int)MC_TCP_RCVLOWAT;
	if (want != l->lowat &&
	    setsockopt(l->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0)
		l->lowat = want;
}

/* Read replies for the head slices.  Returns -1 on error or close. */
static int mc_lane_recv(struct mc_lane *l)
{
	struct mc_tcp_client *c = l->peer->c;
	int progress = 0;	/* re-arms the silence timer once, on the way out */

	for (;;) {
		struct mc_slice *s = l->head;
		ssize_t r;

		if (s == NULL || s == l->send_cur) {
			/* Nothing is awaiting a reply: any byte now is a protocol error or EOF. */
			uint8_t b;

			if (l->in.pos < l->in.len) {
				errno = EPROTO;
				return -1;
			}
			r = recv(l->fd, &b, 1, MSG_PEEK);
			if (r == 0)
				return -1;
			if (r > 0) {
				errno = EPROTO;
				return -1;
			}
			goto check;
		}
		if (s->status_got < 8) {
			r = mc_tcp_inbuf_take(&l->in, l->fd, s->status + s->status_got,
					      8 - s->status_got, UINT64_MAX, 0);
			if (r <= 0)
				goto check;
			s->status_got += (uint32_t)r;
			progress = 1;	/* the timer bounds silence only */
			if (s->status_got < 8)
				continue;
			if ((uint32_t)(mc_get_le64(s->status) >> 32) != MC_TCP_STATUS_MAGIC) {
				errno = EPROTO;
				return -1;
			}
		}
		if ((uint32_t)mc_get_le64(s->status) == 0 && s->op == MC_XFER_READ && s->recvd < s->len) {
			r = mc_tcp_inbuf_take(&l->in, l->fd, s->local + s->recvd, s->len - s->recvd,
					      MC_TCP_DIRECT, 0);
			if (r <= 0)
				goto check;
			if (s->x->crc_out)	/* while the bytes just landed are in cache */
				s->crc = mc_crc64(s->crc, s->local + s->recvd, (size_t)r);
			s->recvd += (uint64_t)r;
			progress = 1;
			if (s->recvd < s->len)
				continue;
		}
		/* The head slice is complete. */
		l->head = s->next;
		if (l->head == NULL)
			l->tail = NULL;
		l->queued -= s->len;
		if ((uint32_t)mc_get_le64(s->status) != 0)
			mc_log_warn("tcp: %s:%u refused a %s of %llu bytes", l->peer->host,
				    l->peer->port, s->op ? "write" : "read",
				    (unsigned long long)s->len);
		mc_slice_complete(c, s, (uint32_t)mc_get_le64(s->status) ? -1 : 0);
		if (l->head == NULL)
			event_del(l->ev_timer);
		continue;
check:
		if (r == 0)
			return -1;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (progress && l->head)
			mc_lane_arm_timer(l);
		mc_lane_set_lowat(l);
		return 0;
	}
}

/* The lane is connected: prove the cluster secret, if any, before the first request.  1 done,
 * 0 in progress (waiting for the one event it needs), -1 failed (the lane failed). */
static int mc_lane_auth(struct mc_lane *l)
{
	const struct mc_auth *a = l->peer->c->opts.auth;
	int rc;

	if (a == NULL)
		return 1;
	if (l->hs == NULL) {
		l->hs = malloc(sizeof(*l->hs));
		if (l->hs == NULL || mc_auth_hs_init(l->hs, a, MC_AUTH_CLIENT) != 0) {
			mc_lane_fail(l, "cannot start the authentication handshake");
			return -1;
		}
	}
	rc = mc_auth_hs_step(l->hs, l->fd);
	if (rc == MC_AUTH_AGAIN) {
		/* Only the event the handshake waits for: a writable socket must not spin. */
		if (l->hs->want_write) {
			event_del(l->ev_read);
			event_add(l->ev_write, NULL);
		} else {
			event_del(l->ev_write);
			event_add(l->ev_read, NULL);
		}
		return 0;
	}
	if (rc != MC_AUTH_DONE) {
		char why[160];

		mc_log_warn("tcp: %s:%u refused us: %s", l->peer->host, l->peer->port,
			    l->hs->why ? l->hs->why : strerror(-rc));
		snprintf(why, sizeof(why), "authentication failed");
		mc_lane_fail(l, why);
		return -1;
	}
	free(l->hs);
	l->hs = NULL;
	return 1;
}

static void mc_lane_on_io(evutil_socket_t fd, short what, void *arg)
{
	struct mc_lane *l = arg;

	if (l->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (l->hs == NULL) {
			if (!(what & EV_WRITE))
				return;
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
			if (err) {
				mc_lane_fail(l, strerror(err));
				return;
			}
			mc_tcp_tune_local(fd);	/* WRITE payloads go out on it */
		}
		if (mc_lane_auth(l) <= 0)
			return;
		l->connecting = 0;
		event_add(l->ev_read, NULL);
		what |= EV_WRITE;	/* send what queued meanwhile */
	}
	if ((what & EV_READ) && mc_lane_recv(l) < 0) {
		mc_lane_fail(l, errno ? strerror(errno) : "connection closed");
		return;
	}
	if (l->fd >= 0 && (what & EV_WRITE) && mc_lane_send(l) < 0)
		mc_lane_fail(l, strerror(errno));
}

/* Send what this loop iteration's submits gave the lanes, right after them: the sockets are
 * almost always writable, so the write needs no readiness event (and no epoll change to watch
 * for one); a lane whose socket is full waits for it as usual (mc_lane_send). */
static void mc_tcp_client_on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct mc_tcp_client *c = arg;
	struct mc_lane *l;

	(void)fd;
	(void)what;
	while ((l = c->flush_head) != NULL) {
		c->flush_head = l->flush_next;
		l->flush_queued = 0;
		if (l->fd >= 0 && !l->connecting && l->send_cur && mc_lane_send(l) < 0)
			mc_lane_fail(l, strerror(errno));
	}
}

static void mc_lane_want_flush(struct mc_tcp_client *c, struct mc_lane *l)
{
	if (l->flush_queued)
		return;
	l->flush_queued = 1;
	l->flush_next = c->flush_head;
	c->flush_head = l;
	event_active(c->ev_flush, EV_TIMEOUT, 1);
}

static void mc_lane_on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct mc_lane *l = arg;

	int queued = 0;

	(void)fd;
	(void)what;
	if (l->head && !l->connecting && l->lowat > 1 && ioctl(l->fd, FIONREAD, &queued) == 0 &&
	    queued > 0) {
		/* Bytes came, fewer than the wake-up mark: progress, slow as it is.  Take them
		 * (which re-arms the timer). */
		mc_lane_on_io(l->fd, EV_READ, l);
		return;
	}
	if (l->head || l->connecting)
		mc_lane_fail(l, l->connecting ? "connect timeout" : "no progress (io timeout)");
}

static struct mc_peer *mc_peer_get(struct mc_tcp_client *c, const char *host, uint16_t port)
{
	struct mc_peer *p;
	unsigned i;

	for (p = c->peers; p; p = p->next)
		if (p->port == port && !strcmp(p->host, host))
			return p;
	if (strlen(host) >= sizeof(p->host))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->c = c;
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->port = port;
	for (i = 0; i < c->opts.lanes_per_peer; i++) {
		struct mc_lane *l = &p->lanes[i];

		l->peer = p;
		l->fd = -1;
		l->lowat = 1;
		l->in.buf = l->inbuf;
		l->in.cap = sizeof(l->inbuf);
		l->ev_read = event_new(c->base, -1, 0, mc_lane_on_io, l);
		l->ev_write = event_new(c->base, -1, 0, mc_lane_on_io, l);
		l->ev_timer = evtimer_new(c->base, mc_lane_on_timeout, l);
		if (!l->ev_read || !l->ev_write || !l->ev_timer) {
			unsigned j;

			for (j = 0; j <= i; j++) {
				if (p->lanes[j].ev_read)
					event_free(p->lanes[j].ev_read);
				if (p->lanes[j].ev_write)
					event_free(p->lanes[j].ev_write);
				if (p->lanes[j].ev_timer)
					event_free(p->lanes[j].ev_timer);
			}
			free(p);
			return NULL;
		}
	}
	p->next = c->peers;
	c->peers = p;
	return p;
}

struct mc_tcp_client *mc_tcp_client_new(struct event_base *base,
					const struct mc_tcp_client_opts *opts)
{
	struct mc_tcp_client *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->base = base;
	if (opts)
		c->opts = *opts;
	if (c->opts.lanes_per_peer == 0)
		c->opts.lanes_per_peer = (unsigned)mc_env_u64("MC_TCP_LANES_PER_PEER", 2);
	if (c->opts.lanes_per_peer > MC_TCP_MAX_LANES)
		c->opts.lanes_per_peer = MC_TCP_MAX_LANES;
	if (c->opts.slice_size == 0)
		c->opts.slice_size = mc_env_u64("MC_TCP_SLICE_SIZE", 4u << 20);
	if (c->opts.connect_timeout_ms == 0)
		c->opts.connect_timeout_ms = 5000;
	if (c->opts.io_timeout_ms == 0)
		c->opts.io_timeout_ms = 30000;
	if (c->opts.max_queued_bytes == 0)
		c->opts.max_queued_bytes = mc_env_u64("MC_TCP_MAX_QUEUED_BYTES_PER_PEER", 0);
	c->done_tail = &c->done_head;
	c->ev_done = event_new(base, -1, 0, mc_tcp_client_on_done, c);
	c->ev_flush = event_new(base, -1, 0, mc_tcp_client_on_flush, c);
	if (c->ev_done == NULL || c->ev_flush == NULL) {
		if (c->ev_done)
			event_free(c->ev_done);
		if (c->ev_flush)
			event_free(c->ev_flush);
		free(c);
		return NULL;
	}
	return c;
}

void mc_tcp_client_free(struct mc_tcp_client *c)
{
	struct mc_peer *p, *n;
	struct mc_xfer *x;
	unsigned i;

	if (c == NULL)
		return;
	for (p = c->peers; p; p = n) {
		struct mc_xfer *w;

		n = p->next;
		while ((w = p->wait_head) != NULL) {
			p->wait_head = w->next_wait;
			w->status = MC_ERR_TRANSFER_FAIL;
			w->peer = NULL;
			mc_xfer_finish(c, w);
		}
		for (i = 0; i < c->opts.lanes_per_peer; i++) {
			struct mc_lane *l = &p->lanes[i];

			mc_lane_fail(l, "client shut down");
			event_free(l->ev_read);
			event_free(l->ev_write);
			event_free(l->ev_timer);
		}
		free(p);
	}
	/* The peers are gone: their transfers end without touching them. */
	for (x = c->done_head; x; x = x->next_done)
		x->peer = NULL;
	mc_tcp_client_on_done(-1, 0, c);
	event_free(c->ev_done);
	event_free(c->ev_flush);
	free(c);
}

int mc_tcp_client_submit(struct mc_tcp_client *c, const char *host, uint16_t port, int opcode,
			 void *local, uint64_t remote_addr, uint64_t len, mc_xfer_done_fn cb,
			 void *arg, uint64_t *crc)
{
	struct mc_peer *p;
	struct mc_xfer *x;

	if ((opcode != MC_XFER_READ && opcode != MC_XFER_WRITE) || cb == NULL ||
	    (len && local == NULL))
		return -EINVAL;
	p = mc_peer_get(c, host, port);
	if (p == NULL)
		return -ENOMEM;
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return -ENOMEM;
	x->cb = cb;
	x->arg = arg;
	x->crc_out = crc;
	x->len = len;
	x->slice_size = c->opts.slice_size;
	if (len == 0) {
		mc_xfer_finish(c, x);
		return 0;
	}
	x->nslices = (uint32_t)((len + c->opts.slice_size - 1) / c->opts.slice_size);
	if (crc && x->nslices > 1 && (x->slice_crc = calloc(x->nslices, sizeof(uint64_t))) == NULL) {
		free(x);
		return -ENOMEM;
	}
	x->peer = p;
	x->opcode = opcode;
	x->local = local;
	x->remote = remote_addr;
	x->len = len;
	if (c->opts.max_queued_bytes && (p->wait_head || (p->queued &&
	    p->queued + len > c->opts.max_queued_bytes))) {
		if (p->wait_tail)
			p->wait_tail->next_wait = x;
		else
			p->wait_head = x;
		p->wait_tail = x;
		return 0;
	}
	mc_xfer_enqueue(c, x);
	return 0;
}

/* Admit p's waiting transfers, in order, while they fit under max_queued_bytes (the first
 * always fits an empty queue). */
static void mc_peer_admit(struct mc_tcp_client *c, struct mc_peer *p)
{
	struct mc_xfer *x;

	while ((x = p->wait_head) != NULL &&
	       (p->queued == 0 || p->queued + x->len <= c->opts.max_queued_bytes)) {
		p->wait_head = x->next_wait;
		if (p->wait_head == NULL)
			p->wait_tail = NULL;
		x->next_wait = NULL;
		mc_xfer_enqueue(c, x);
	}
}

/* Cut x into slices on the peer's least loaded lanes and start them. */
static void mc_xfer_enqueue(struct mc_tcp_client *c, struct mc_xfer *x)
{
	struct mc_peer *p = x->peer;
	uint64_t off, len = x->len;
	unsigned i;

	p->queued += len;
	x->pending = x->nslices;
	for (off = 0; off < len; off += c->opts.slice_size) {
		uint64_t n = len - off < c->opts.slice_size ? len - off : c->opts.slice_size;
		struct mc_slice *s = calloc(1, sizeof(*s));
		struct mc_lane *l = &p->lanes[0];

		if (s == NULL) {
			/* Slices already queued complete normally; the rest fail now. */
			x->status = MC_ERR_TRANSFER_FAIL;
			x->pending -= (uint32_t)((len - off + c->opts.slice_size - 1) /
						 c->opts.slice_size);
			if (x->pending == 0)
				mc_xfer_finish(c, x);
			return;
		}
		for (i = 1; i < c->opts.lanes_per_peer; i++)
			if (p->lanes[i].queued < l->queued)
				l = &p->lanes[i];
		s->x = x;
		s->idx = (uint32_t)(off / c->opts.slice_size);
		s->op = (uint8_t)x->opcode;
		s->local = (uint8_t *)x->local + off;
		s->len = n;
		mc_put_le64(s->hdr, n);
		mc_put_le64(s->hdr + 8, x->remote + off);
		s->hdr[16] = (uint8_t)(x->opcode | 0x80);
		if (l->tail)
			l->tail->next = s;
		else
			l->head = s;
		l->tail = s;
		if (l->send_cur == NULL)
			l->send_cur = s;
		l->queued += n;
		if (l->fd < 0) {
			if (mc_lane_connect(l) < 0)
				mc_lane_fail(l, "connect failed");
		} else if (!l->connecting) {
			mc_lane_want_flush(c, l);
			if (l->head == s)
				mc_lane_arm_timer(l);
		}
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP data client (wire format in tcp.h): pools connections per peer and pipelines sliced
 * transfers over them.  Runs on the owning event_base's thread.  Raw non-blocking sockets with
 * struct event, never bufferevents: payload bytes go straight between the socket and the
 * caller's memory (sendmsg/recvmsg with iovecs).
 *
 * Peers (host:port) own lanes (connections, made on demand) and a FIFO of transfers not yet
 * handed out.  A lane takes slices (at most slice_size bytes of one transfer) from the peer's
 * FIFO while it has fewer than lane_window payload bytes in flight, so faster lanes take more
 * and memory stays bounded whatever the transfer sizes.  Each lane keeps its slices in wire
 * order: a send cursor writes headers and WRITE payloads ahead while earlier replies are still
 * pending, and since replies come back in the same order the head of the list is always the
 * slice the next reply bytes belong to.
 *
 * A transfer completes when all its slices have; one failed slice fails the transfer (the rest
 * of it is no longer handed out, but slices already on the wire finish first, so the caller's
 * memory is never touched after its callback).  A lane that breaks (reset, EOF, protocol error,
 * no progress for io_timeout_ms) fails the slices it holds.  A lane that cannot connect stays
 * down until the next submit, and when no lane of a peer is up or connecting the peer's queued
 * transfers fail: nothing waits forever on a dead peer, and a restarted peer is reconnected by
 * the next submit.  Completion callbacks are queued and run from their own event, so they never
 * run inside submit or while a lane is being walked.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/wire.h"
#include "transfer/tcp.h"

#define MC_TCP_BUDGET (4u << 20)		/* bytes per lane per callback */
#define MC_TCP_MAX_IOV_LEN (1u << 30)		/* keeps every byte count inside ssize_t */
#define MC_TCP_IOV 64				/* iovecs per sendmsg/recvmsg */
#define MC_TCP_MAX_LANES 64
#define MC_TCP_MAX_SLICES_PER_LANE 256
#define MC_TCP_MIN_SLICE (4u << 10)
#define MC_TCP_MAX_SLICE (1ull << 30)

static inline uint64_t mc_min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static bool mc_tcp_again(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK;
}

static uint64_t mc_tcp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct mc_xfer {
	struct mc_xfer *next;		/* peer queue while off < len, then completion queue */
	mc_xfer_done_fn cb;
	void *arg;
	uint8_t *local;
	uint64_t remote;
	uint64_t len;
	uint64_t off;			/* bytes handed to lanes (len once abandoned) */
	uint32_t inflight;		/* slices on lanes, not completed */
	int status;
	uint8_t op;
};

struct mc_slice {
	struct mc_slice *next;		/* lane list in wire order, or the free list */
	struct mc_xfer *x;
	uint8_t *local;
	uint64_t len;
	uint64_t sent;			/* header + WRITE payload bytes written */
	uint64_t got;			/* READ payload bytes received */
	uint8_t hdr[MC_TCP_HDR_LEN];
	uint8_t status[MC_TCP_STATUS_LEN];
	uint8_t status_got;
	uint8_t op;
};

enum mc_lane_state {
	MC_LANE_IDLE,			/* no socket */
	MC_LANE_CONNECTING,
	MC_LANE_UP,
};

struct mc_peer;

struct mc_lane {
	struct mc_peer *p;
	unsigned idx;
	enum mc_lane_state state;
	evutil_socket_t fd;
	struct event *ev_read, *ev_write, *ev_timer;
	short want;
	bool blocked;			/* connect failed: stay down until the next submit */
	struct mc_slice *head, *tail;	/* in flight, in wire order */
	struct mc_slice *send;		/* first slice not completely written */
	uint64_t bytes;			/* payload bytes in flight */
	unsigned n;			/* slices in flight */
	uint64_t last_io_ms;		/* last progress, or connect start */
};

struct mc_peer {
	struct mc_peer *next;
	struct mc_tcp_client *c;
	char host[256];
	uint16_t port;
	char name[272];			/* host:port, for logs */
	struct sockaddr_storage sa;
	socklen_t salen;		/* 0: not resolved */
	struct mc_xfer *q_head, **q_tail;
	struct event *ev_pump;
	unsigned rr;			/* lane the next pump starts with */
	bool down;			/* the last connect attempt failed (logged once) */
	struct mc_lane lanes[];		/* opts.lanes_per_peer */
};

struct mc_tcp_client {
	struct event_base *base;
	struct mc_tcp_client_opts opts;
	struct mc_peer *peers;
	struct mc_xfer *done_head, **done_tail;
	struct event *ev_done;
	struct mc_slice *free_slices;
	bool dispatching;		/* inside mc_tcp_client_on_done */
	bool closing;			/* mc_tcp_client_free has begun */
	bool free_deferred;		/* free once the running callbacks return */
};

static void mc_lane_on_io(evutil_socket_t fd, short what, void *arg);
static void mc_lane_on_timer(evutil_socket_t fd, short what, void *arg);
static void mc_peer_pump(struct mc_peer *p, bool from_submit);

/* ---- transfers and slices ---- */

static void mc_xfer_maybe_done(struct mc_tcp_client *c, struct mc_xfer *x)
{
	if (x->off != x->len || x->inflight != 0)
		return;
	x->next = NULL;
	*c->done_tail = x;
	c->done_tail = &x->next;
	event_active(c->ev_done, EV_TIMEOUT, 0);
}

static void mc_xfer_fail(struct mc_xfer *x, int status)
{
	if (x->status == 0)
		x->status = status;
}

static struct mc_slice *mc_slice_get(struct mc_tcp_client *c)
{
	struct mc_slice *s = c->free_slices;

	if (s) {
		c->free_slices = s->next;
		memset(s, 0, sizeof(*s));
		return s;
	}
	return calloc(1, sizeof(*s));
}

/* A slice is finished: account it to its transfer and recycle it. */
static void mc_slice_done(struct mc_tcp_client *c, struct mc_slice *s, int status)
{
	struct mc_xfer *x = s->x;

	if (status)
		mc_xfer_fail(x, status);
	x->inflight--;
	s->next = c->free_slices;
	c->free_slices = s;
	mc_xfer_maybe_done(c, x);
}

/* The peer's first transfer that still has bytes to hand out; failed ones are abandoned here. */
static struct mc_xfer *mc_peer_front(struct mc_peer *p)
{
	struct mc_xfer *x;

	while ((x = p->q_head) != NULL && x->status != 0) {
		p->q_head = x->next;
		if (p->q_head == NULL)
			p->q_tail = &p->q_head;
		x->off = x->len;
		mc_xfer_maybe_done(p->c, x);
	}
	return x;
}

static void mc_peer_fail_queue(struct mc_peer *p, const char *why)
{
	struct mc_xfer *x;
	unsigned n = 0;

	while ((x = p->q_head) != NULL) {
		p->q_head = x->next;
		mc_xfer_fail(x, MC_ERR_TRANSFER_FAIL);
		x->off = x->len;
		mc_xfer_maybe_done(p->c, x);
		n++;
	}
	p->q_tail = &p->q_head;
	if (n && !p->c->closing)
		mc_log_warn("tcp data client: %s: %s; failing %u queued transfer(s)", p->name, why,
			    n);
}

/* ---- lanes ---- */

static void mc_lane_want(struct mc_lane *l, short want)
{
	if ((want & EV_READ) && !(l->want & EV_READ))
		event_add(l->ev_read, NULL);
	else if (!(want & EV_READ) && (l->want & EV_READ))
		event_del(l->ev_read);
	if ((want & EV_WRITE) && !(l->want & EV_WRITE))
		event_add(l->ev_write, NULL);
	else if (!(want & EV_WRITE) && (l->want & EV_WRITE))
		event_del(l->ev_write);
	l->want = want;
}

static void mc_lane_update_want(struct mc_lane *l)
{
	if (l->state == MC_LANE_CONNECTING)
		mc_lane_want(l, EV_WRITE);
	else if (l->state == MC_LANE_UP)
		mc_lane_want(l, EV_READ | (l->send ? EV_WRITE : 0));
}

/* Make sure a timer runs while the lane connects or has work in flight. */
static void mc_lane_arm_timer(struct mc_lane *l, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (!evtimer_pending(l->ev_timer, NULL))
		evtimer_add(l->ev_timer, &tv);
}

/* Close the socket and fail every slice the lane holds.  why == NULL: silently. */
static void mc_lane_fail(struct mc_lane *l, const char *why)
{
	struct mc_tcp_client *c = l->p->c;
	struct mc_slice *s, *next;

	if (why && l->n && !c->closing)
		mc_log_warn("tcp data client: lane %u to %s: %s; failing %u slice(s) in flight",
			    l->idx, l->p->name, why, l->n);
	else if (why)
		mc_log_debug("tcp data client: lane %u to %s: %s", l->idx, l->p->name, why);
	if (l->fd >= 0) {
		mc_lane_want(l, 0);
		evutil_closesocket(l->fd);
		l->fd = -1;
	}
	evtimer_del(l->ev_timer);
	l->state = MC_LANE_IDLE;
	for (s = l->head; s; s = next) {
		next = s->next;
		mc_slice_done(c, s, MC_ERR_TRANSFER_FAIL);
	}
	l->head = l->tail = l->send = NULL;
	l->bytes = 0;
	l->n = 0;
}

/* The lane could not connect: it stays down until the next submit, and the peer's address is
 * looked up again then. */
static void mc_lane_connect_failed(struct mc_lane *l, const char *why)
{
	/* One warning per outage, not one per lane and attempt. */
	if (!l->p->down)
		mc_log_warn("tcp data client: cannot connect to %s: %s", l->p->name, why);
	else
		mc_log_debug("tcp data client: lane %u cannot connect to %s: %s", l->idx,
			     l->p->name, why);
	l->p->down = true;
	mc_lane_fail(l, NULL);
	l->blocked = true;
	l->p->salen = 0;
}

/* Numeric hosts resolve without I/O.  A name costs one blocking lookup (see tcp.h); segment
 * endpoints in this project are numeric. */
static int mc_peer_resolve(struct mc_peer *p)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256], port[8];
	size_t hl = strlen(p->host);
	int rc;

	/* "[v6]" as written in host:port strings. */
	if (hl >= 2 && p->host[0] == '[' && p->host[hl - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), p->host + 1);
	else
		snprintf(host, sizeof(host), "%s", p->host);
	snprintf(port, sizeof(port), "%u", p->port);
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc == EAI_NONAME) {
		hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
		rc = getaddrinfo(host, port, &hints, &res);
	}
	if (rc != 0 || res->ai_addrlen > sizeof(p->sa)) {
		mc_log_warn("tcp data client: cannot resolve %s: %s", p->name,
			    rc ? gai_strerror(rc) : "address too long");
		if (res)
			freeaddrinfo(res);
		return -1;
	}
	memcpy(&p->sa, res->ai_addr, res->ai_addrlen);
	p->salen = (socklen_t)res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Start a non-blocking connect.  0, or -1 with the lane blocked. */
static int mc_lane_connect(struct mc_lane *l)
{
	struct mc_peer *p = l->p;
	struct mc_tcp_client *c = p->c;
	evutil_socket_t fd;
	int one = 1;

	if (p->salen == 0 && mc_peer_resolve(p) < 0) {
		l->blocked = true;
		return -1;
	}
	fd = socket(p->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		mc_log_warn("tcp data client: socket for %s: %s", p->name, strerror(errno));
		l->blocked = true;
		return -1;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		mc_log_debug("tcp data client: TCP_NODELAY: %s", strerror(errno));
	while (connect(fd, (struct sockaddr *)&p->sa, p->salen) != 0) {
		if (errno == EINTR)
			continue;
		if (errno == EINPROGRESS)
			break;
		evutil_closesocket(fd);
		mc_lane_connect_failed(l, strerror(errno));
		return -1;
	}
	l->fd = fd;
	l->want = 0;
	event_assign(l->ev_read, c->base, fd, EV_READ | EV_PERSIST, mc_lane_on_io, l);
	event_assign(l->ev_write, c->base, fd, EV_WRITE | EV_PERSIST, mc_lane_on_io, l);
	/* Even an immediate success is confirmed through EV_WRITE and SO_ERROR: one path. */
	l->state = MC_LANE_CONNECTING;
	l->last_io_ms = mc_tcp_now_ms();
	mc_lane_update_want(l);
	mc_lane_arm_timer(l, c->opts.connect_timeout_ms);
	return 0;
}

/* Cut slices from the peer's queue while the lane has room.  Returns how many were added. */
static unsigned mc_lane_take(struct mc_lane *l)
{
	struct mc_peer *p = l->p;
	struct mc_tcp_client *c = p->c;
	uint64_t slice = c->opts.slice_size;
	unsigned added = 0;
	struct mc_xfer *x;

	while (l->n < MC_TCP_MAX_SLICES_PER_LANE && l->bytes < c->opts.lane_window &&
	       (x = mc_peer_front(p)) != NULL) {
		uint64_t left = x->len - x->off, n = mc_min64(left, slice);
		struct mc_slice *s;

		/* A tail under 1/8 slice rides with the previous slice instead of costing its
		 * own round trip. */
		if (left - n < slice / 8)
			n = left;
		s = mc_slice_get(c);
		if (s == NULL) {
			mc_xfer_fail(x, -ENOMEM);
			continue;	/* mc_peer_front abandons it */
		}
		s->x = x;
		s->op = x->op;
		s->local = x->local + x->off;
		s->len = n;
		mc_put_le64(s->hdr, n);
		mc_put_le64(s->hdr + 8, x->remote + x->off);
		s->hdr[16] = (uint8_t)(x->op | MC_TCP_OP_V2);
		x->off += n;
		x->inflight++;
		if (x->off == x->len) {
			p->q_head = x->next;
			if (p->q_head == NULL)
				p->q_tail = &p->q_head;
		}
		if (l->n == 0)
			l->last_io_ms = mc_tcp_now_ms();	/* idle time is not a stall */
		if (l->tail)
			l->tail->next = s;
		else
			l->head = s;
		l->tail = s;
		if (l->send == NULL)
			l->send = s;
		l->bytes += n;
		l->n++;
		added++;
	}
	if (l->n)
		mc_lane_arm_timer(l, l->state == MC_LANE_CONNECTING ? c->opts.connect_timeout_ms
								  : c->opts.io_timeout_ms);
	return added;
}

static uint64_t mc_slice_wire_len(const struct mc_slice *s)
{
	return MC_TCP_HDR_LEN + (s->op == MC_XFER_WRITE ? s->len : 0);
}

/* Write headers and WRITE payloads from the send cursor on, several slices per sendmsg.
 * 0 (all written or the socket is full) or -errno. */
static int mc_lane_flush(struct mc_lane *l)
{
	while (l->send) {
		struct iovec iov[MC_TCP_IOV];
		struct msghdr msg = { .msg_iov = iov };
		struct mc_slice *s;
		uint64_t total = 0;
		bool partial = false;
		ssize_t w;
		size_t k = 0;

		for (s = l->send; s && k + 2 <= MC_TCP_IOV && total < MC_TCP_BUDGET; s = s->next) {
			uint64_t off = s->sent, end = mc_slice_wire_len(s);

			if (off < MC_TCP_HDR_LEN) {
				iov[k].iov_base = s->hdr + off;
				iov[k++].iov_len = MC_TCP_HDR_LEN - off;
				total += MC_TCP_HDR_LEN - off;
				off = MC_TCP_HDR_LEN;
			}
			if (off < end) {
				uint64_t n = mc_min64(end - off, MC_TCP_MAX_IOV_LEN);

				iov[k].iov_base = s->local + (off - MC_TCP_HDR_LEN);
				iov[k++].iov_len = (size_t)n;
				total += n;
			}
		}
		msg.msg_iovlen = k;
		w = sendmsg(l->fd, &msg, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return mc_tcp_again(errno) ? 0 : -errno;
		}
		l->last_io_ms = mc_tcp_now_ms();
		if ((uint64_t)w < total)
			partial = true;
		while (w > 0) {
			uint64_t need = mc_slice_wire_len(l->send) - l->send->sent;

			if ((uint64_t)w < need) {
				l->send->sent += (uint64_t)w;
				break;
			}
			l->send->sent += need;
			w -= (ssize_t)need;
			l->send = l->send->next;
		}
		/* A short write means the socket buffer is full: wait for EV_WRITE instead of
		 * paying for a sendmsg that would only return EAGAIN. */
		if (partial)
			break;
	}
	return 0;
}

static bool mc_slice_finished(const struct mc_slice *s)
{
	if (s->status_got < MC_TCP_STATUS_LEN)
		return false;
	/* A refused READ gets its status frame and no payload. */
	if (s->op == MC_XFER_WRITE || (uint32_t)mc_get_le64(s->status) != MC_TCP_STATUS_OK)
		return true;
	return s->got == s->len;
}

/* A status frame is complete: 0, or -EPROTO if it is not one. */
static int mc_lane_check_status(struct mc_lane *l, struct mc_slice *s)
{
	uint64_t v = mc_get_le64(s->status);
	uint32_t code = (uint32_t)v;

	if ((uint32_t)(v >> 32) != MC_TCP_STATUS_MAGIC || code > MC_TCP_STATUS_REJECTED)
		return -EPROTO;
	if (code == MC_TCP_STATUS_REJECTED && s->x->status == 0)
		mc_log_warn("tcp data client: %s refused a %s of %llu bytes at 0x%llx: not inside "
			    "its registered memory",
			    l->p->name, s->op == MC_XFER_WRITE ? "write" : "read",
			    (unsigned long long)s->len,
			    (unsigned long long)mc_get_le64(s->hdr + 8));
	return 0;
}

/* Complete the finished slices at the head of the lane.  Returns how many. */
static unsigned mc_lane_reap(struct mc_lane *l)
{
	struct mc_tcp_client *c = l->p->c;
	struct mc_slice *s;
	unsigned n = 0;

	while ((s = l->head) != NULL && mc_slice_finished(s)) {
		n++;
		l->head = s->next;
		if (l->head == NULL)
			l->tail = NULL;
		l->bytes -= s->len;
		l->n--;
		mc_slice_done(c, s, (uint32_t)mc_get_le64(s->status) == MC_TCP_STATUS_OK
					    ? 0
					    : MC_ERR_TRANSFER_FAIL);
	}
	return n;
}

/* Nothing is expected: only EOF (the peer closed) or garbage can arrive. */
static int mc_lane_recv_unexpected(struct mc_lane *l)
{
	uint8_t b[16];
	ssize_t r;

	do
		r = recv(l->fd, b, sizeof(b), 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return mc_tcp_again(errno) ? 0 : -errno;
	return r == 0 ? -ECONNRESET : -EPROTO;
}

/*
 * Read replies.  One recvmsg gathers, in wire order, the rest of the head slice and as many
 * following replies as are certain to be laid out as expected: status frames of WRITE slices,
 * the payload of a READ whose status said OK, and the status of the next READ (its payload
 * follows only if that status is OK, so the gather stops there).  Only slices completely
 * written can have replies.  0 (socket drained or budget spent) or -errno.
 */
static int mc_lane_recv(struct mc_lane *l)
{
	uint64_t budget = MC_TCP_BUDGET;

	while (budget > 0) {
		struct iovec iov[MC_TCP_IOV];
		struct mc_slice *owner[MC_TCP_IOV];
		bool is_status[MC_TCP_IOV];
		struct msghdr msg = { .msg_iov = iov };
		struct mc_slice *s;
		size_t k = 0, i;
		ssize_t r;

		for (s = l->head; s && s != l->send && k < MC_TCP_IOV; s = s->next) {
			owner[k] = s;
			is_status[k] = s->status_got < MC_TCP_STATUS_LEN;
			if (is_status[k]) {
				iov[k].iov_base = s->status + s->status_got;
				iov[k++].iov_len = MC_TCP_STATUS_LEN - s->status_got;
				if (s->op == MC_XFER_READ)
					break;
				continue;
			}
			/* Status known and the slice unfinished: an accepted READ's payload. */
			iov[k].iov_base = s->local + s->got;
			iov[k++].iov_len = (size_t)mc_min64(s->len - s->got,
							    mc_min64(budget, MC_TCP_MAX_IOV_LEN));
			if (s->got + iov[k - 1].iov_len < s->len)
				break;
		}
		if (k == 0)
			return mc_lane_recv_unexpected(l);
		msg.msg_iovlen = k;
		r = recvmsg(l->fd, &msg, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return mc_tcp_again(errno) ? 0 : -errno;
		}
		if (r == 0)
			return -ECONNRESET;
		l->last_io_ms = mc_tcp_now_ms();
		budget -= mc_min64(budget, (uint64_t)r);
		for (i = 0; i < k && r > 0; i++) {
			size_t take = (size_t)mc_min64((uint64_t)r, iov[i].iov_len);

			s = owner[i];
			r -= (ssize_t)take;
			if (is_status[i]) {
				s->status_got += (uint8_t)take;
				if (s->status_got == MC_TCP_STATUS_LEN && mc_lane_check_status(l, s))
					return -EPROTO;
			} else {
				s->got += take;
			}
		}
		/* Refill as soon as slots free up rather than once the socket is drained: the
		 * server then always has the next request queued and never idles on this lane. */
		if (mc_lane_reap(l) && mc_lane_take(l)) {
			int rc = mc_lane_flush(l);

			if (rc)
				return rc;
		}
	}
	return 0;
}

static const char *mc_lane_strerror(int rc)
{
	if (rc == -ECONNRESET)
		return "connection closed by the peer";
	if (rc == -EPROTO)
		return "protocol error (not a v2 reply)";
	return strerror(-rc);
}

/* After the lane failed inside one of its callbacks: let the peer re-plan from a fresh event
 * (other lanes may take the work, or this one reconnects). */
static void mc_peer_schedule_pump(struct mc_peer *p)
{
	event_active(p->ev_pump, EV_TIMEOUT, 0);
}

static void mc_lane_on_connected(struct mc_lane *l)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err) {
		mc_lane_connect_failed(l, strerror(err));
		mc_peer_schedule_pump(l->p);
		return;
	}
	l->state = MC_LANE_UP;
	l->last_io_ms = mc_tcp_now_ms();
	evtimer_del(l->ev_timer);
	if (l->p->down)
		mc_log_info("tcp data client: %s reachable again", l->p->name);
	l->p->down = false;
	mc_log_debug("tcp data client: lane %u to %s connected", l->idx, l->p->name);
}

static void mc_lane_on_io(evutil_socket_t fd, short what, void *arg)
{
	struct mc_lane *l = arg;
	bool flush = (what & EV_WRITE) != 0;
	int rc;

	(void)fd;
	if (l->state == MC_LANE_CONNECTING) {
		mc_lane_on_connected(l);
		if (l->state != MC_LANE_UP)
			return;
		flush = true;
		what |= EV_READ;
	}
	if (what & EV_READ) {
		rc = mc_lane_recv(l);
		if (rc)
			goto fail;
	}
	if (mc_lane_take(l))
		flush = true;
	if (flush && l->send) {
		rc = mc_lane_flush(l);
		if (rc)
			goto fail;
	}
	if (l->n)
		mc_lane_arm_timer(l, l->p->c->opts.io_timeout_ms);
	mc_lane_update_want(l);
	return;

fail:
	mc_lane_fail(l, mc_lane_strerror(rc));
	mc_peer_schedule_pump(l->p);
}

static void mc_lane_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct mc_lane *l = arg;
	struct mc_tcp_client *c = l->p->c;
	unsigned limit = l->state == MC_LANE_CONNECTING ? c->opts.connect_timeout_ms
							: c->opts.io_timeout_ms;
	uint64_t idle = mc_tcp_now_ms() - l->last_io_ms;
	char why[64];

	(void)fd;
	(void)what;
	if (l->state == MC_LANE_IDLE || (l->state == MC_LANE_UP && l->n == 0))
		return;
	if (idle < limit) {
		mc_lane_arm_timer(l, (unsigned)(limit - idle));
		return;
	}
	if (l->state == MC_LANE_CONNECTING) {
		mc_lane_connect_failed(l, "connect timed out");
	} else {
		snprintf(why, sizeof(why), "no progress for %u ms", limit);
		mc_lane_fail(l, why);
	}
	mc_peer_schedule_pump(l->p);
}

/* An idle pooled connection may have been closed by the peer (restart, crash) since we last
 * looked, with the EOF not processed yet: peek before reusing it, so that a restarted peer
 * costs a reconnect rather than a failed transfer. */
static bool mc_lane_stale(struct mc_lane *l)
{
	uint8_t b;
	ssize_t r = recv(l->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return r >= 0 || (errno != EINTR && !mc_tcp_again(errno));
}

/* ---- peers ---- */

/*
 * Hand queued work to the lanes, starting with a different lane each time: idle lanes connect
 * (unless blocked by a failed connect; a submit unblocks them), lanes with room take slices and
 * write at once.  Queued work that no lane can ever take fails.
 */
static void mc_peer_pump(struct mc_peer *p, bool from_submit)
{
	unsigned nl = p->c->opts.lanes_per_peer, k;
	bool live = false;

	for (k = 0; k < nl; k++) {
		struct mc_lane *l = &p->lanes[(p->rr + k) % nl];
		int rc;

		if (from_submit)
			l->blocked = false;
		if (mc_peer_front(p) == NULL)
			continue;
		if (l->state == MC_LANE_UP && l->n == 0 && mc_lane_stale(l))
			mc_lane_fail(l, "idle connection closed by the peer");
		if (l->state == MC_LANE_IDLE && (l->blocked || mc_lane_connect(l) < 0))
			continue;
		if (mc_lane_take(l) && l->state == MC_LANE_UP) {
			rc = mc_lane_flush(l);
			if (rc) {
				mc_lane_fail(l, mc_lane_strerror(rc));
				continue;
			}
			mc_lane_update_want(l);
		}
	}
	p->rr++;
	for (k = 0; k < nl; k++)
		live |= p->lanes[k].state != MC_LANE_IDLE;
	if (!live && mc_peer_front(p))
		mc_peer_fail_queue(p, "no connection");
}

static void mc_peer_on_pump(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mc_peer_pump(arg, false);
}

static void mc_peer_destroy(struct mc_peer *p)
{
	unsigned i;

	for (i = 0; i < p->c->opts.lanes_per_peer; i++) {
		struct mc_lane *l = &p->lanes[i];

		if (l->ev_read)
			event_free(l->ev_read);
		if (l->ev_write)
			event_free(l->ev_write);
		if (l->ev_timer)
			event_free(l->ev_timer);
	}
	if (p->ev_pump)
		event_free(p->ev_pump);
	free(p);
}

static struct mc_peer *mc_peer_get(struct mc_tcp_client *c, const char *host, uint16_t port)
{
	unsigned nl = c->opts.lanes_per_peer, i;
	struct mc_peer *p;

	for (p = c->peers; p; p = p->next)
		if (p->port == port && strcmp(p->host, host) == 0)
			return p;
	p = calloc(1, sizeof(*p) + nl * sizeof(p->lanes[0]));
	if (p == NULL)
		return NULL;
	p->c = c;
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->port = port;
	snprintf(p->name, sizeof(p->name), "%s:%u", host, port);
	p->q_tail = &p->q_head;
	p->ev_pump = event_new(c->base, -1, 0, mc_peer_on_pump, p);
	if (p->ev_pump == NULL)
		goto fail;
	for (i = 0; i < nl; i++) {
		struct mc_lane *l = &p->lanes[i];

		l->p = p;
		l->idx = i;
		l->fd = -1;
		l->ev_read = event_new(c->base, -1, 0, mc_lane_on_io, l);
		l->ev_write = event_new(c->base, -1, 0, mc_lane_on_io, l);
		l->ev_timer = evtimer_new(c->base, mc_lane_on_timer, l);
		if (!l->ev_read || !l->ev_write || !l->ev_timer)
			goto fail;
	}
	p->next = c->peers;
	c->peers = p;
	return p;

fail:
	mc_peer_destroy(p);
	return NULL;
}

/* ---- client ---- */

static void mc_tcp_client_run_callbacks(struct mc_tcp_client *c)
{
	struct mc_xfer *x = c->done_head, *next;

	c->done_head = NULL;
	c->done_tail = &c->done_head;
	for (; x; x = next) {
		next = x->next;
		x->cb(x->arg, x->status);
		free(x);
	}
}

static void mc_tcp_client_destroy(struct mc_tcp_client *c)
{
	struct mc_peer *p;
	struct mc_slice *s;

	/* Callbacks may not submit any more (closing), so this ends. */
	while (c->done_head)
		mc_tcp_client_run_callbacks(c);
	while ((p = c->peers) != NULL) {
		c->peers = p->next;
		mc_peer_destroy(p);
	}
	while ((s = c->free_slices) != NULL) {
		c->free_slices = s->next;
		free(s);
	}
	event_free(c->ev_done);
	free(c);
}

static void mc_tcp_client_on_done(evutil_socket_t fd, short what, void *arg)
{
	struct mc_tcp_client *c = arg;

	(void)fd;
	(void)what;
	/* Only the completions queued so far: ones queued by callbacks get a fresh activation. */
	c->dispatching = true;
	mc_tcp_client_run_callbacks(c);
	c->dispatching = false;
	if (c->free_deferred)
		mc_tcp_client_destroy(c);
}

static uint64_t mc_env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max)
{
	const char *v = getenv(name);
	unsigned long long x;
	char *end;

	if (v == NULL || *v == '\0')
		return def;
	errno = 0;
	x = strtoull(v, &end, 0);
	if (errno || *end != '\0' || x < min || x > max) {
		mc_log_warn("ignoring %s=%s (expected %llu..%llu); using %llu", name, v,
			    (unsigned long long)min, (unsigned long long)max,
			    (unsigned long long)def);
		return def;
	}
	return x;
}

struct mc_tcp_client *mc_tcp_client_new(struct event_base *base,
					const struct mc_tcp_client_opts *opts)
{
	struct mc_tcp_client *c = calloc(1, sizeof(*c));
	struct mc_tcp_client_opts *o;

	if (c == NULL)
		return NULL;
	c->base = base;
	if (opts)
		c->opts = *opts;
	o = &c->opts;
	if (o->lanes_per_peer == 0)
		o->lanes_per_peer =
			(unsigned)mc_env_u64("MC_TCP_LANES_PER_PEER", 4, 1, MC_TCP_MAX_LANES);
	if (o->lanes_per_peer > MC_TCP_MAX_LANES)
		o->lanes_per_peer = MC_TCP_MAX_LANES;
	if (o->slice_size == 0)
		o->slice_size = mc_env_u64("MC_TCP_SLICE_SIZE", 1u << 20, MC_TCP_MIN_SLICE,
					   MC_TCP_MAX_SLICE);
	if (o->slice_size < MC_TCP_MIN_SLICE)
		o->slice_size = MC_TCP_MIN_SLICE;
	if (o->slice_size > MC_TCP_MAX_SLICE)
		o->slice_size = MC_TCP_MAX_SLICE;
	if (o->connect_timeout_ms == 0)
		o->connect_timeout_ms = 5000;
	if (o->io_timeout_ms == 0)
		o->io_timeout_ms = 30000;
	if (o->lane_window == 0)
		o->lane_window = o->slice_size * 2 > (4u << 20) ? o->slice_size * 2 : (4u << 20);
	c->done_tail = &c->done_head;
	c->ev_done = event_new(base, -1, 0, mc_tcp_client_on_done, c);
	if (c->ev_done == NULL) {
		free(c);
		return NULL;
	}
	return c;
}

void mc_tcp_client_free(struct mc_tcp_client *c)
{
	struct mc_peer *p;
	unsigned i;

	if (c == NULL || c->closing)
		return;
	c->closing = true;
	for (p = c->peers; p; p = p->next) {
		for (i = 0; i < c->opts.lanes_per_peer; i++)
			mc_lane_fail(&p->lanes[i], NULL);
		mc_peer_fail_queue(p, "client shut down");
		event_del(p->ev_pump);
	}
	if (c->dispatching) {
		c->free_deferred = true;
		return;
	}
	mc_tcp_client_destroy(c);
}

int mc_tcp_client_submit(struct mc_tcp_client *c, const char *host, uint16_t port, int opcode,
			 void *local, uint64_t remote_addr, uint64_t len, mc_xfer_done_fn cb,
			 void *arg)
{
	struct mc_peer *p = NULL;
	struct mc_xfer *x;

	if (c->closing)
		return -ESHUTDOWN;
	if ((opcode != MC_XFER_READ && opcode != MC_XFER_WRITE) || cb == NULL ||
	    (len && local == NULL) || remote_addr + len < remote_addr || host == NULL ||
	    strlen(host) >= sizeof(p->host))
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return -ENOMEM;
	x->cb = cb;
	x->arg = arg;
	x->op = (uint8_t)opcode;
	x->local = local;
	x->remote = remote_addr;
	x->len = len;
	if (len == 0) {
		mc_xfer_maybe_done(c, x);
		return 0;
	}
	p = mc_peer_get(c, host, port);
	if (p == NULL) {
		free(x);
		return -ENOMEM;
	}
	*p->q_tail = x;
	p->q_tail = &x->next;
	mc_peer_pump(p, true);
	return 0;
}

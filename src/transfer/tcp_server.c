/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP data server: serves READ and WRITE requests on registered memory (see tcp.h).
 *
 * One state machine per connection, processing requests strictly in order: read a header, then
 * either receive the payload into the destination (WRITE), discard it (refused WRITE), or send
 * status + payload straight from the source (READ).  While a reply is being sent the connection
 * reads nothing more, which bounds its memory to its two small buffers.  Any malformed header
 * closes that connection only.  Runs on the owning loop's thread.
 *
 * Small requests cost few system calls: one recv fills an input buffer (MC_SRV_INBUF) from
 * which headers and small WRITE payloads are taken (a payload of at least MC_SRV_DIRECT bytes
 * is received straight into memory once the buffer is empty), and the statuses of WRITEs
 * collect in an output buffer that goes out in one send when the input runs dry, when it is
 * full, or ahead of a READ's reply.  A batch of small writes from a peer thus costs a recv or
 * two and one send, and the peer gets its statuses in one segment.  The bytes on the wire are
 * the same as with one send per status.
 *
 * A READ inside the registered file window (a client's SSD objects, memreg.h) never touches
 * the disk on the loop thread: the descriptor is opened when the header arrives (so a file
 * deleted during the read is still read to the end) and the loop sends the status; then one of
 * a small pool of worker threads (MC_NUM_TCP_IO_THREADS, default 4, started on the first such
 * READ) sendfile()s the payload from the file to the non-blocking socket until it is done or
 * the socket is full,
 * while the connection waits in SRV_FILE_WAIT.  A full socket hands the connection back to the
 * loop (SRV_FILE_WRITABLE) until it is writable again.  A cold read thus blocks a worker, never
 * the loop, and the bytes still go from the page cache to the socket without a copy.  Since a
 * connection handles one request at a time, replies stay in request order.  A connection closed
 * while a worker uses it is shut down at once and freed (its socket closed) when the worker
 * hands it back through the done queue and its eventfd.
 *
 * Limits (conn_limit.h; port "engine_tcp" on /metrics): MC_TCP_SERVER_MAX_CONNECTIONS (4096)
 * and MC_TCP_SERVER_MAX_CONNECTIONS_PER_PEER (256) connections; a connection must send its first
 * header, and each header once begun must be whole, within MC_TCP_SERVER_REQUEST_TIMEOUT_MS
 * (10000), and a payload or reply in progress must move within that time; between requests a
 * connection may wait MC_TCP_SERVER_IDLE_TIMEOUT_MS (0: for ever, as clients keep their lanes
 * open).  The memory of a connection is bounded by its fixed struct (payloads move between the
 * socket and registered memory).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/listener.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/wire.h"
#include "reactor/conn_limit.h"
#include "transfer/tcp.h"

#define MC_DISCARD_BUF 65536
#define MC_MAX_DISCARD (1ull << 40)
#define MC_FILE_WORKERS 4		/* default; MC_NUM_TCP_IO_THREADS sets 1 .. MC_FILE_WORKERS_MAX */
#define MC_FILE_WORKERS_MAX 64
#define MC_FILE_STEP (1u << 30)	/* bytes per sendfile call */
#define MC_SRV_INBUF 16384		/* buffered input: headers and small payloads */
#define MC_SRV_DIRECT 4096		/* payloads from this size are received in place */
#define MC_SRV_OUTBUF 128		/* statuses collected before a send */

enum mc_srv_state {
	SRV_AUTH,	/* the authentication handshake (with a cluster secret) */
	SRV_HDR,
	SRV_RECV,	/* WRITE payload into memory */
	SRV_DISCARD,	/* refused WRITE payload */
	SRV_SEND,	/* status (+ READ payload) */
	SRV_FILE_WAIT,		/* a worker is sending file bytes of a READ */
	SRV_FILE_WRITABLE,	/* ... and found the socket full: wait until it is writable */
};

/* What the connection's limit timer watches. */
enum mc_srv_watch {
	WATCH_FIRST,	/* the first header must be whole in time */
	WATCH_HDR,	/* a header begun must be whole in time */
	WATCH_XFER,	/* a payload or reply must keep moving */
	WATCH_IDLE,	/* between requests */
};

struct mc_srv_conn {
	struct mc_tcp_server *srv;
	struct mc_srv_conn *prev, *next;
	evutil_socket_t fd;
	struct event *ev_read, *ev_write;
	enum mc_srv_state state;
	uint8_t hdr[MC_TCP_HDR_LEN];
	size_t hdr_got;
	uint8_t *in;		/* MC_SRV_INBUF bytes; in[in_pos, in_len) not consumed yet */
	size_t in_pos, in_len;
	uint8_t out[MC_SRV_OUTBUF * 8];	/* statuses; out[out_sent, out_len) not sent yet */
	size_t out_len, out_sent;
	uint8_t *ptr;		/* payload position */
	uint64_t left;		/* payload bytes left */
	int send_payload;
	uint32_t write_code;	/* the status of the WRITE being received */
	int read_paused;
	int flushing;		/* statuses wait for room in the socket (reading paused) */
	int file_fd;		/* READ from a file-backed range, or -1 */
	off_t file_off;		/* next file byte to send */
	uint64_t file_left;	/* file bytes not yet sent */
	int job_result;		/* 0 (done or socket full) or -errno */
	struct mc_srv_conn *job_next;	/* in the pool's pending or done list */
	int job_busy;		/* a worker owns fd, file_fd, file_off, file_left */
	int closing;		/* closed while job_busy: freed when the worker is done */
	struct mc_auth_hs *hs;	/* SRV_AUTH */
	struct event *ev_auth;	/* SRV_AUTH: its deadline */
	struct event *ev_limit;	/* the request and idle timeouts (see mc_srv_on_limit) */
	enum mc_srv_watch watch;
	int64_t watch_since;	/* ms (mc_srv_now_ms) when watch was set */
	struct mc_memreg_hit hit;	/* the registered range its last request was in */
	unsigned progress;	/* I/O events seen (WATCH_XFER compares it) */
	unsigned progress_seen;	/* progress at the timer's last run */
	int admitted;		/* key holds a slot of srv->limit */
	struct mc_conn_key key;
	char peer[64];
};

/* The file-read workers of one server.  pending and done are guarded by mu. */
struct mc_file_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t threads[MC_FILE_WORKERS_MAX];
	int nthreads;
	int stop;
	struct mc_srv_conn *pending, *pending_tail, *done;
	int efd;
	struct event *ev_done;
};

struct mc_tcp_server {
	struct event_base *base;
	struct evconnlistener *listener;
	struct mc_memreg *reg;
	struct mc_srv_conn *conns;
	uint16_t port;
	uint8_t *scratch;
	struct mc_file_pool *pool;	/* NULL until the first file-backed READ */
	struct mc_auth *auth;		/* cluster secret, or NULL */
	unsigned nconns;
	struct mc_conn_limit *limit;
	struct mc_port_limits lim;	/* from MC_TCP_SERVER_* */
};

static void mc_srv_drive(struct mc_srv_conn *c);
static void mc_srv_set_status(struct mc_srv_conn *c, uint32_t code);

/* A coarse monotonic clock in ms (a few ms of resolution is plenty for timeouts of seconds, and
 * reading it costs no system call). */
static int64_t mc_srv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Watch c for w from now on.  Only two stores per request on the data path: the connection's
 * timer (armed once, at adoption) checks the watch when it runs. */
static void mc_srv_watch(struct mc_srv_conn *c, enum mc_srv_watch w)
{
	c->watch = w;
	c->watch_since = mc_srv_now_ms();
}

/* Run c's timer again in ms (0: it is not needed). */
static void mc_srv_tick(struct mc_srv_conn *c, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	if (ms > 0 && c->ev_limit)
		event_add(c->ev_limit, &tv);
}

static void mc_srv_conn_close(struct mc_srv_conn *c, const char *why)
{
	struct mc_tcp_server *s = c->srv;

	if (why)
		mc_log_warn("tcp data connection from %s closed: %s", c->peer, why);
	event_free(c->ev_read);
	event_free(c->ev_write);
	if (c->ev_auth)
		event_free(c->ev_auth);
	if (c->ev_limit)
		event_free(c->ev_limit);
	c->ev_limit = NULL;
	if (c->admitted)
		mc_conn_limit_release(s->limit, &c->key);
	c->admitted = 0;
	free(c->hs);
	c->ev_auth = NULL;
	c->hs = NULL;
	s->nconns--;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->job_busy) {
		/* A worker is sending on c->fd: make it stop soon, free c when it is done. */
		shutdown(c->fd, SHUT_RDWR);
		c->closing = 1;
		return;
	}
	evutil_closesocket(c->fd);
	if (c->file_fd >= 0)
		close(c->file_fd);
	free(c->in);
	free(c);
}

/* ---------------------------------------------------------------- file-read workers */

static void *mc_file_worker(void *arg)
{
	struct mc_file_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct mc_srv_conn *c;
		uint64_t one = 1;
		ssize_t w;

		while (!p->stop && p->pending == NULL)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		c = p->pending;
		p->pending = c->job_next;
		if (p->pending == NULL)
			p->pending_tail = NULL;
		pthread_mutex_unlock(&p->mu);
		c->job_result = 0;
		while (c->file_left) {
			w = sendfile(c->fd, c->file_fd, &c->file_off,
				     c->file_left > MC_FILE_STEP ? MC_FILE_STEP : (size_t)c->file_left);
			if (w > 0) {
				c->file_left -= (uint64_t)w;
				continue;
			}
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;	/* socket full: the loop waits for room */
			c->job_result = w < 0 ? -errno : -EIO;	/* 0: file shorter than promised */
			break;
		}
		pthread_mutex_lock(&p->mu);
		c->job_next = p->done;
		p->done = c;
		if (write(p->efd, &one, sizeof(one)) < 0) {
			/* The counter cannot overflow; nothing else can fail here. */
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* A worker handed c back: the READ is done, failed, or waits for room in the socket. */
static void mc_srv_on_chunk(struct mc_srv_conn *c)
{
	c->job_busy = 0;
	if (c->closing) {
		evutil_closesocket(c->fd);
		if (c->file_fd >= 0)
			close(c->file_fd);
		free(c->in);
		free(c);
		return;
	}
	if (c->job_result < 0) {
		/* The status went out already: the reader must see the connection fail. */
		mc_srv_conn_close(c, strerror(-c->job_result));
		return;
	}
	if (c->file_left) {
		c->state = SRV_FILE_WRITABLE;
		event_add(c->ev_write, NULL);
		return;
	}
	close(c->file_fd);
	c->file_fd = -1;
	c->state = SRV_SEND;	/* nothing left to send: finishes the request */
	mc_srv_drive(c);
}

static void mc_file_on_done(evutil_socket_t fd, short what, void *arg)
{
	struct mc_file_pool *p = arg;
	struct mc_srv_conn *c, *next;
	uint64_t n;

	(void)what;
	if (read(fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: another wake-up already drained it. */
	}
	pthread_mutex_lock(&p->mu);
	c = p->done;
	p->done = NULL;
	pthread_mutex_unlock(&p->mu);
	for (; c; c = next) {
		next = c->job_next;
		mc_srv_on_chunk(c);
	}
}

static void mc_file_pool_free(struct mc_file_pool *p)
{
	int i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	/* Chunks never read or not handed back: their connections are closing (server
	 * teardown), and are freed now. */
	if (p->pending_tail) {
		p->pending_tail->job_next = p->done;
		p->done = p->pending;
		p->pending = p->pending_tail = NULL;
	}
	mc_file_on_done(p->efd, 0, p);
	if (p->ev_done)
		event_free(p->ev_done);
	close(p->efd);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* The tcp transport's I/O threads (upstream's MC_NUM_TCP_IO_THREADS): sockets are served by the
 * loop, so its only threads are these, which send file-backed (SSD) objects; a value out of
 * 1 .. MC_FILE_WORKERS_MAX keeps the default. */
static int mc_file_workers(void)
{
	const char *v = getenv("MC_NUM_TCP_IO_THREADS");
	char *end;
	long n;

	if (v == NULL || *v == '\0')
		return MC_FILE_WORKERS;
	n = strtol(v, &end, 10);
	return *end == '\0' && n >= 1 && n <= MC_FILE_WORKERS_MAX ? (int)n : MC_FILE_WORKERS;
}

static struct mc_file_pool *mc_file_pool_new(struct event_base *base)
{
	struct mc_file_pool *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->efd >= 0)
		p->ev_done = event_new(base, p->efd, EV_READ | EV_PERSIST, mc_file_on_done, p);
	if (p->ev_done == NULL || event_add(p->ev_done, NULL) != 0)
		goto fail;
	for (; p->nthreads < mc_file_workers(); p->nthreads++)
		if (pthread_create(&p->threads[p->nthreads], NULL, mc_file_worker, p) != 0)
			break;
	if (p->nthreads == 0)
		goto fail;
	return p;
fail:
	mc_file_pool_free(p);
	return NULL;
}

/* Hand c's file bytes to a worker.  0, or -1 (no pool could be started). */
static int mc_srv_read_chunk(struct mc_srv_conn *c)
{
	struct mc_tcp_server *s = c->srv;
	struct mc_file_pool *p;

	if (s->pool == NULL && (s->pool = mc_file_pool_new(s->base)) == NULL)
		return -1;
	p = s->pool;
	c->job_busy = 1;
	c->job_next = NULL;
	c->state = SRV_FILE_WAIT;
	pthread_mutex_lock(&p->mu);
	if (p->pending_tail)
		p->pending_tail->job_next = c;
	else
		p->pending = c;
	p->pending_tail = c;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* Queue the status of the current request behind those not sent yet.  The caller makes room:
 * the output buffer is never full when a request completes (see mc_srv_finish_write). */
static void mc_srv_set_status(struct mc_srv_conn *c, uint32_t code)
{
	mc_put_le64(c->out + c->out_len, (uint64_t)MC_TCP_STATUS_MAGIC << 32 | code);
	c->out_len += 8;
}

/* Try to send the pending statuses (+ payload).  Returns 1 when done, 0 on EAGAIN, -1 on
 * error. */
static int mc_srv_send(struct mc_srv_conn *c)
{
	for (;;) {
		struct iovec iov[2];
		int n = 0;
		ssize_t w;

		if (c->out_sent < c->out_len) {
			iov[n].iov_base = c->out + c->out_sent;
			iov[n++].iov_len = c->out_len - c->out_sent;
		}
		if (c->send_payload && c->left) {
			iov[n].iov_base = c->ptr;
			iov[n++].iov_len = c->left > (1u << 30) ? (1u << 30) : (size_t)c->left;
		}
		if (n == 0) {
			c->out_len = c->out_sent = 0;
			return 1;
		}
		w = writev(c->fd, iov, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -1;
		}
		if (c->out_sent < c->out_len) {
			size_t take = c->out_len - c->out_sent;

			if ((size_t)w < take) {
				c->out_sent += (size_t)w;
				continue;
			}
			c->out_sent = c->out_len;
			w -= (ssize_t)take;
		}
		/* Only payload bytes move the cursor: for a refused request ptr is the peer's
		 * address, maybe 0, and NULL + 0 is undefined behaviour. */
		if (w > 0) {
			c->ptr += w;
			c->left -= (uint64_t)w;
		}
	}
}

/* A header is complete: validate and choose the next state.  Returns -1 to close. */
static int mc_srv_on_header(struct mc_srv_conn *c)
{
	uint64_t size = mc_get_le64(c->hdr), addr = mc_get_le64(c->hdr + 8);
	uint8_t op = c->hdr[16];
	int i, ok;

	for (i = 17; i < MC_TCP_HDR_LEN; i++)
		if (c->hdr[i] != 0)
			return -1;
	if (!(op & 0x80) || (op & 0x7f) > 1)
		return -1;	/* v1 or unknown: we only speak v2 */
	op &= 0x7f;
	ok = size > 0 && mc_memreg_check_cached(c->srv->reg, &c->hit, addr, size);
	if (!ok && op == 0 && mc_memreg_in_files(addr, size)) {
		int fd;
		uint64_t off;

		if (mc_memreg_open_file(c->srv->reg, addr, size, &fd, &off) == 0) {
			c->file_fd = fd;
			c->file_off = (off_t)off;
			c->file_left = size;
			c->left = 0;
			c->send_payload = 0;
			c->hdr_got = 0;
			/* The status first, from the loop; then the bytes, from a worker. */
			mc_srv_set_status(c, 0);
			c->state = SRV_SEND;
			return 0;
		}
	}
	if (!ok)
		mc_log_warn("tcp data request from %s refused: %s of %llu bytes at 0x%llx is not "
			    "inside registered memory",
			    c->peer, op ? "write" : "read", (unsigned long long)size,
			    (unsigned long long)addr);
	c->hdr_got = 0;
	if (op == 1) {
		if (!ok && size > MC_MAX_DISCARD)
			return -1;
		c->ptr = (uint8_t *)(uintptr_t)addr;
		c->left = size;
		c->state = ok ? SRV_RECV : SRV_DISCARD;
		c->write_code = ok ? 0 : 1;
		c->send_payload = 0;
	} else {
		c->ptr = (uint8_t *)(uintptr_t)addr;
		c->left = ok ? size : 0;
		c->send_payload = ok;
		mc_srv_set_status(c, ok ? 0 : 1);
		c->state = SRV_SEND;
	}
	return 0;
}

/* Send the statuses collected so far.  1: all out; 0: the socket is full, so reading pauses
 * and the connection waits until it is writable (mc_srv_drive sends the rest first); -1: an
 * error (errno). */
static int mc_srv_flush(struct mc_srv_conn *c)
{
	int rc = mc_srv_send(c);

	if (rc == 0) {
		c->flushing = 1;
		if (!c->read_paused) {
			event_del(c->ev_read);
			c->read_paused = 1;
		}
		event_add(c->ev_write, NULL);
	} else if (rc == 1 && c->flushing) {
		c->flushing = 0;
		if (c->read_paused) {
			event_add(c->ev_read, NULL);
			c->read_paused = 0;
		}
	}
	return rc;
}

/* Refill the (consumed) input buffer.  Returns the bytes read, 0 at EOF, -1 (errno). */
static ssize_t mc_srv_fill(struct mc_srv_conn *c)
{
	ssize_t r;

	if (c->in == NULL && (c->in = malloc(MC_SRV_INBUF)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	r = recv(c->fd, c->in, MC_SRV_INBUF, 0);
	if (r > 0) {
		c->in_pos = 0;
		c->in_len = (size_t)r;
	}
	return r;
}

/* A WRITE's payload is in: queue its status, and send the statuses when the buffer is full.
 * 1 go on, 0 wait (the socket is full), -1 error. */
static int mc_srv_finish_write(struct mc_srv_conn *c)
{
	mc_srv_set_status(c, c->write_code);
	c->state = SRV_HDR;
	mc_srv_watch(c, WATCH_IDLE);
	return c->out_len == sizeof(c->out) ? mc_srv_flush(c) : 1;
}

/* Receive WRITE payload bytes (into memory, or discarded): from the input buffer first; a
 * large rest straight from the socket.  Returns what recv returned (1 for buffered bytes). */
static ssize_t mc_srv_recv_payload(struct mc_srv_conn *c)
{
	ssize_t r;

	if (c->in_pos < c->in_len) {
		size_t take = c->in_len - c->in_pos;

		if (take > c->left)
			take = (size_t)c->left;
		if (c->state == SRV_RECV) {
			memcpy(c->ptr, c->in + c->in_pos, take);
			c->ptr += take;
		}
		c->in_pos += take;
		c->left -= take;
		return 1;
	}
	if (c->left < MC_SRV_DIRECT)
		return mc_srv_fill(c);
	if (c->state == SRV_RECV)
		r = recv(c->fd, c->ptr, c->left > (1u << 30) ? (1u << 30) : (size_t)c->left, 0);
	else
		r = recv(c->fd, c->srv->scratch,
			 c->left > MC_DISCARD_BUF ? MC_DISCARD_BUF : (size_t)c->left, 0);
	if (r > 0) {
		if (c->state == SRV_RECV)
			c->ptr += r;
		c->left -= (uint64_t)r;
	}
	return r;
}

/* After a step that may wait or fail (rc 1 done, 0 waiting, -1 error): 1 to go on; 0 to stop
 * driving, with c closed on an error. */
static int mc_srv_step_ok(struct mc_srv_conn *c, int rc)
{
	if (rc < 0) {
		mc_srv_conn_close(c, strerror(errno));
		return 0;
	}
	return rc > 0;
}

/* Drive the state machine as far as the socket allows. */
static void mc_srv_drive(struct mc_srv_conn *c)
{
	for (;;) {
		ssize_t r;
		size_t take;
		int rc;

		if (c->flushing && !mc_srv_step_ok(c, mc_srv_flush(c)))
			return;
		switch (c->state) {
		case SRV_AUTH:
			rc = mc_auth_hs_step(c->hs, c->fd);
			if (rc == MC_AUTH_AGAIN) {
				if (c->hs->want_write)
					event_add(c->ev_write, NULL);
				return;
			}
			if (rc != MC_AUTH_DONE) {
				mc_auth_hs_refused(c->srv->auth, "engine TCP data", c->peer, rc,
						   c->hs);
				mc_srv_conn_close(c, NULL);
				return;
			}
			event_free(c->ev_auth);
			free(c->hs);
			c->ev_auth = NULL;
			c->hs = NULL;
			c->state = SRV_HDR;
			break;
		case SRV_HDR:
			if (c->in_pos == c->in_len) {
				r = mc_srv_fill(c);
				if (r == 0) {
					mc_srv_conn_close(c, c->hdr_got ? "peer closed mid-header"
									: NULL);
					return;
				}
				if (r < 0)
					goto io_error;
			}
			take = c->in_len - c->in_pos;
			if (take > MC_TCP_HDR_LEN - c->hdr_got)
				take = MC_TCP_HDR_LEN - c->hdr_got;
			/* A header begun waits under WATCH_HDR; one whole in the buffer goes
			 * straight to WATCH_XFER below (one clock read per request less). */
			if (c->hdr_got == 0 && take < MC_TCP_HDR_LEN && c->watch != WATCH_FIRST)
				mc_srv_watch(c, WATCH_HDR);
			memcpy(c->hdr + c->hdr_got, c->in + c->in_pos, take);
			c->in_pos += take;
			c->hdr_got += take;
			if (c->hdr_got == MC_TCP_HDR_LEN) {
				if (mc_srv_on_header(c)) {
					mc_srv_conn_close(c, "malformed request header");
					return;
				}
				mc_srv_watch(c, WATCH_XFER);
			}
			break;
		case SRV_RECV:
		case SRV_DISCARD:
			if (c->left == 0) {
				if (!mc_srv_step_ok(c, mc_srv_finish_write(c)))
					return;
				break;
			}
			/* A long receive ahead: the statuses so far go first. */
			if (c->in_pos == c->in_len && c->left >= MC_SRV_DIRECT &&
			    c->out_sent < c->out_len && !mc_srv_step_ok(c, mc_srv_flush(c)))
				return;
			r = mc_srv_recv_payload(c);
			if (r == 0) {
				mc_srv_conn_close(c, "peer closed mid-payload");
				return;
			}
			if (r < 0)
				goto io_error;
			break;
		case SRV_SEND:
			rc = mc_srv_send(c);
			if (rc < 0) {
				mc_srv_conn_close(c, strerror(errno));
				return;
			}
			if (rc == 0) {
				/* Stop reading until the reply is out: no spinning on a readable
				 * socket, and requests stay strictly ordered. */
				if (!c->read_paused) {
					event_del(c->ev_read);
					c->read_paused = 1;
				}
				event_add(c->ev_write, NULL);
				return;
			}
			if (c->file_fd >= 0 && c->file_left > 0) {
				if (mc_srv_read_chunk(c) != 0) {
					mc_srv_conn_close(c, "no file reader thread");
					return;
				}
				break;
			}
			if (c->file_fd >= 0) {
				close(c->file_fd);
				c->file_fd = -1;
			}
			if (c->read_paused) {
				event_add(c->ev_read, NULL);
				c->read_paused = 0;
			}
			c->state = SRV_HDR;
			mc_srv_watch(c, WATCH_IDLE);
			break;
		case SRV_FILE_WAIT:
			/* mc_srv_on_chunk drives us again; read nothing meanwhile. */
			if (!c->read_paused) {
				event_del(c->ev_read);
				c->read_paused = 1;
			}
			return;
		case SRV_FILE_WRITABLE:
			/* Room in the socket (or a spurious wake-up: the worker finds out). */
			if (mc_srv_read_chunk(c) != 0) {
				mc_srv_conn_close(c, "no file reader thread");
				return;
			}
			break;
		}
	}
io_error:
	if (errno == EINTR)
		return mc_srv_drive(c);
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		/* Nothing more to read for now: the statuses collected so far go out. */
		if (c->out_sent < c->out_len && mc_srv_flush(c) < 0)
			mc_srv_conn_close(c, strerror(errno));
		return;
	}
	mc_srv_conn_close(c, strerror(errno));
}

static void mc_srv_on_io(evutil_socket_t fd, short what, void *arg)
{
	struct mc_srv_conn *c = arg;

	(void)fd;
	(void)what;
	c->progress++;
	mc_srv_drive(c);
}

/* The connection's timer: it runs at least every request timeout (or idle timeout) and judges
 * the current watch.  A header (the first, or one begun) must be whole request_ms after it
 * started; a payload or reply must have moved since the last run once it has lasted request_ms
 * (a worker sending file bytes counts as moving); between requests, idle_ms (0: no bound). */
static void mc_srv_on_limit(evutil_socket_t fd, short what, void *arg)
{
	struct mc_srv_conn *c = arg;
	struct mc_tcp_server *s = c->srv;
	int64_t req = s->lim.request_ms, idle = s->lim.idle_ms;
	int64_t age = mc_srv_now_ms() - c->watch_since;
	int moved = c->progress != c->progress_seen || c->state == SRV_FILE_WAIT;

	(void)fd;
	(void)what;
	c->progress_seen = c->progress;
	switch (c->watch) {
	case WATCH_FIRST:
	case WATCH_HDR:
		if (req && age >= req)
			goto slow;
		mc_srv_tick(c, req ? req - age : idle);
		return;
	case WATCH_XFER:
		if (req && age >= req && !moved)
			goto slow;
		mc_srv_tick(c, req ? req : idle);
		return;
	case WATCH_IDLE:
		if (idle && age >= idle) {
			mc_conn_limit_closed_idle(s->limit, c->peer,
						  "MC_TCP_SERVER_IDLE_TIMEOUT_MS");
			mc_srv_conn_close(c, NULL);
			return;
		}
		mc_srv_tick(c, idle && (!req || idle - age < req) ? idle - age : req);
		return;
	}
slow:
	mc_conn_limit_closed_slow(s->limit, c->peer, "MC_TCP_SERVER_REQUEST_TIMEOUT_MS");
	mc_srv_conn_close(c, NULL);
}

static void mc_srv_on_auth_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct mc_srv_conn *c = arg;

	(void)fd;
	(void)what;
	mc_auth_refused(c->srv->auth, "engine TCP data", c->peer, "handshake timeout");
	mc_srv_conn_close(c, NULL);
}

/* With a cluster secret, a connection starts in SRV_AUTH with a deadline.  0 or -ENOMEM. */
static int mc_srv_auth_start(struct mc_srv_conn *c)
{
	int ms = mc_auth_timeout_ms();
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	c->hs = malloc(sizeof(*c->hs));
	c->ev_auth = evtimer_new(c->srv->base, mc_srv_on_auth_timeout, c);
	if (c->hs == NULL || c->ev_auth == NULL ||
	    mc_auth_hs_init(c->hs, c->srv->auth, MC_AUTH_SERVER) != 0)
		return -ENOMEM;
	evtimer_add(c->ev_auth, &tv);
	c->state = SRV_AUTH;
	return 0;
}

/* Serve fd from sa (NULL: not an IP peer) as mc_tcp_server_adopt says. */
static int mc_srv_adopt(struct mc_tcp_server *s, evutil_socket_t fd, const struct sockaddr *sa,
			const char *peer)
{
	struct mc_srv_conn *c;
	struct mc_conn_key key;
	int one = 1, rc;

	rc = mc_conn_limit_admit(s->limit, sa, &key);
	if (rc) {
		evutil_closesocket(fd);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		mc_conn_limit_release(s->limit, &key);
		evutil_closesocket(fd);
		return -ENOMEM;
	}
	c->key = key;
	c->admitted = 1;
	c->srv = s;
	c->fd = fd;
	c->file_fd = -1;
	c->state = SRV_HDR;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	evutil_make_socket_nonblocking(fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	mc_tcp_tune_local(fd);	/* READ payloads go out on it */
	c->ev_read = event_new(s->base, fd, EV_READ | EV_PERSIST, mc_srv_on_io, c);
	c->ev_write = event_new(s->base, fd, EV_WRITE, mc_srv_on_io, c);
	c->ev_limit = evtimer_new(s->base, mc_srv_on_limit, c);
	if (c->ev_read == NULL || c->ev_write == NULL || c->ev_limit == NULL) {
		if (c->ev_read)
			event_free(c->ev_read);
		if (c->ev_write)
			event_free(c->ev_write);
		if (c->ev_limit)
			event_free(c->ev_limit);
		mc_conn_limit_release(s->limit, &key);
		evutil_closesocket(fd);
		free(c);
		return -ENOMEM;
	}
	mc_srv_watch(c, WATCH_FIRST);
	mc_srv_tick(c, s->lim.request_ms ? s->lim.request_ms : s->lim.idle_ms);
	event_add(c->ev_read, NULL);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	if (s->auth && mc_srv_auth_start(c) != 0) {
		mc_srv_conn_close(c, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int mc_tcp_server_adopt(struct mc_tcp_server *s, evutil_socket_t fd, const char *peer)
{
	return mc_srv_adopt(s, fd, NULL, peer);
}

static void mc_srv_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			     int salen, void *arg)
{
	char peer[64];

	(void)l;
	(void)salen;
	mc_conn_limit_peer(sa, peer, sizeof(peer));
	mc_srv_adopt(arg, fd, sa, peer);
}

void mc_tcp_server_set_auth(struct mc_tcp_server *s, struct mc_auth *a)
{
	s->auth = a;
}

struct mc_tcp_server *mc_tcp_server_new(struct event_base *base, const char *bind_addr,
					uint16_t port, struct mc_memreg *reg, int *err)
{
	struct mc_tcp_server *s = calloc(1, sizeof(*s));
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int sl = sizeof(ss);
	evutil_socket_t fd;

	if (s == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	s->base = base;
	s->reg = reg;
	s->lim = (struct mc_port_limits){ 4096, 256, 10000, 0 };
	mc_port_limits_env("MC_TCP_SERVER", &s->lim);
	s->limit = mc_conn_limit_new("engine_tcp", s->lim.max_conns, s->lim.max_per_peer);
	s->scratch = malloc(MC_DISCARD_BUF);
	if (s->scratch == NULL || s->limit == NULL) {
		*err = -ENOMEM;
		goto fail;
	}
	{
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
					  .ai_flags = AI_PASSIVE | AI_NUMERICHOST };
		struct addrinfo *res = NULL;
		char pbuf[8];

		snprintf(pbuf, sizeof(pbuf), "%u", port);
		if (getaddrinfo(bind_addr, pbuf, &hints, &res) != 0 ||
		    res->ai_addrlen > sizeof(ss)) {
			if (res)
				freeaddrinfo(res);
			*err = -EINVAL;
			goto fail;
		}
		memcpy(&ss, res->ai_addr, res->ai_addrlen);
		sl = (int)res->ai_addrlen;
		freeaddrinfo(res);
	}
	s->listener = evconnlistener_new_bind(base, mc_srv_on_accept, s,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
						      LEV_OPT_CLOSE_ON_EXEC,
					      512, (struct sockaddr *)&ss, sl);
	if (s->listener == NULL) {
		*err = errno ? -errno : -EADDRINUSE;
		goto fail;
	}
	fd = evconnlistener_get_fd(s->listener);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
							 : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return s;
fail:
	mc_conn_limit_free(s->limit);
	free(s->scratch);
	free(s);
	return NULL;
}

uint16_t mc_tcp_server_port(const struct mc_tcp_server *s)
{
	return s->port;
}

void mc_tcp_server_free(struct mc_tcp_server *s)
{
	if (s == NULL)
		return;
	evconnlistener_free(s->listener);
	while (s->conns)
		mc_srv_conn_close(s->conns, NULL);
	mc_file_pool_free(s->pool);
	mc_conn_limit_free(s->limit);
	free(s->scratch);
	free(s);
}

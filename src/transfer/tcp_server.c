/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TCP data server: serves READ and WRITE requests on registered memory (see tcp.h).
 *
 * One state machine per connection, processing requests strictly in order: read a header, then
 * either receive the payload straight into the destination (WRITE), discard it (refused WRITE),
 * or send status + payload straight from the source (READ).  While a reply is being sent the
 * connection reads nothing more, which bounds its memory to a few bytes.  Any malformed header
 * closes that connection only.  Runs on the owning loop's thread.
 *
 * A READ inside the registered file window (a client's SSD objects, memreg.h) is answered from
 * the file with sendfile(2); the descriptor is opened when the header arrives, so a file deleted
 * during the read is still read to the end.  A cold read may block the loop for one disk read
 * of at most the socket's send space per step.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/listener.h>

#include "common/log.h"
#include "common/wire.h"
#include "transfer/tcp.h"

#define MC_DISCARD_BUF 65536
#define MC_MAX_DISCARD (1ull << 40)

enum mc_srv_state {
	SRV_HDR,
	SRV_RECV,	/* WRITE payload into memory */
	SRV_DISCARD,	/* refused WRITE payload */
	SRV_SEND,	/* status (+ READ payload) */
};

struct mc_srv_conn {
	struct mc_tcp_server *srv;
	struct mc_srv_conn *prev, *next;
	evutil_socket_t fd;
	struct event *ev_read, *ev_write;
	enum mc_srv_state state;
	uint8_t hdr[MC_TCP_HDR_LEN];
	size_t hdr_got;
	uint8_t status[8];
	size_t status_sent;
	uint8_t *ptr;		/* payload position */
	uint64_t left;		/* payload bytes left */
	int send_payload;
	int read_paused;
	int file_fd;		/* READ from a file-backed range, or -1 */
	off_t file_off;
	char peer[64];
};

struct mc_tcp_server {
	struct event_base *base;
	struct evconnlistener *listener;
	struct mc_memreg *reg;
	struct mc_srv_conn *conns;
	uint16_t port;
	uint8_t *scratch;
};

static void mc_srv_conn_close(struct mc_srv_conn *c, const char *why)
{
	struct mc_tcp_server *s = c->srv;

	if (why)
		mc_log_warn("tcp data connection from %s closed: %s", c->peer, why);
	if (c->file_fd >= 0)
		close(c->file_fd);
	event_free(c->ev_read);
	event_free(c->ev_write);
	evutil_closesocket(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

static void mc_srv_set_status(struct mc_srv_conn *c, uint32_t code)
{
	mc_put_le64(c->status, (uint64_t)MC_TCP_STATUS_MAGIC << 32 | code);
	c->status_sent = 0;
}

/* Try to send the pending status (+ payload).  Returns 1 when done, 0 on EAGAIN, -1 on error. */
static int mc_srv_send(struct mc_srv_conn *c)
{
	for (;;) {
		struct iovec iov[2];
		int n = 0;
		ssize_t w;

		if (c->status_sent < sizeof(c->status)) {
			iov[n].iov_base = c->status + c->status_sent;
			iov[n++].iov_len = sizeof(c->status) - c->status_sent;
		}
		if (c->send_payload && c->left && c->file_fd < 0) {
			iov[n].iov_base = c->ptr;
			iov[n++].iov_len = c->left > (1u << 30) ? (1u << 30) : (size_t)c->left;
		}
		if (n == 0 && c->file_fd >= 0 && c->left) {
			w = sendfile(c->fd, c->file_fd, &c->file_off,
				     c->left > (1u << 30) ? (1u << 30) : (size_t)c->left);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return 0;
				return -1;
			}
			if (w == 0) {
				errno = EIO;	/* file shorter than promised */
				return -1;
			}
			c->left -= (uint64_t)w;
			continue;
		}
		if (n == 0) {
			if (c->file_fd >= 0) {
				close(c->file_fd);
				c->file_fd = -1;
			}
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
		if (c->status_sent < sizeof(c->status)) {
			size_t take = sizeof(c->status) - c->status_sent;

			if ((size_t)w < take) {
				c->status_sent += (size_t)w;
				continue;
			}
			c->status_sent = sizeof(c->status);
			w -= (ssize_t)take;
		}
		c->ptr += w;
		c->left -= (uint64_t)w;
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
	ok = size > 0 && mc_memreg_check(c->srv->reg, addr, size);
	if (!ok && op == 0 && mc_memreg_in_files(addr, size)) {
		int fd;
		uint64_t off;

		if (mc_memreg_open_file(c->srv->reg, addr, size, &fd, &off) == 0) {
			c->file_fd = fd;
			c->file_off = (off_t)off;
			c->left = size;
			c->send_payload = 1;
			c->hdr_got = 0;
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
		mc_srv_set_status(c, ok ? 0 : 1);
		c->send_payload = 0;
		if (size == 0)
			c->state = SRV_SEND;
	} else {
		c->ptr = (uint8_t *)(uintptr_t)addr;
		c->left = ok ? size : 0;
		c->send_payload = ok;
		mc_srv_set_status(c, ok ? 0 : 1);
		c->state = SRV_SEND;
	}
	return 0;
}

/* Drive the state machine as far as the socket allows. */
static void mc_srv_drive(struct mc_srv_conn *c)
{
	for (;;) {
		ssize_t r;
		int rc;

		switch (c->state) {
		case SRV_HDR:
			r = recv(c->fd, c->hdr + c->hdr_got, MC_TCP_HDR_LEN - c->hdr_got, 0);
			if (r == 0) {
				mc_srv_conn_close(c, c->hdr_got ? "peer closed mid-header" : NULL);
				return;
			}
			if (r < 0)
				goto io_error;
			c->hdr_got += (size_t)r;
			if (c->hdr_got == MC_TCP_HDR_LEN && mc_srv_on_header(c)) {
				mc_srv_conn_close(c, "malformed request header");
				return;
			}
			break;
		case SRV_RECV:
		case SRV_DISCARD:
			if (c->left == 0) {
				c->state = SRV_SEND;
				break;
			}
			if (c->state == SRV_RECV)
				r = recv(c->fd, c->ptr, c->left > (1u << 30) ? (1u << 30) : (size_t)c->left,
					 0);
			else
				r = recv(c->fd, c->srv->scratch,
					 c->left > MC_DISCARD_BUF ? MC_DISCARD_BUF : (size_t)c->left, 0);
			if (r == 0) {
				mc_srv_conn_close(c, "peer closed mid-payload");
				return;
			}
			if (r < 0)
				goto io_error;
			if (c->state == SRV_RECV)
				c->ptr += r;
			c->left -= (uint64_t)r;
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
			if (c->read_paused) {
				event_add(c->ev_read, NULL);
				c->read_paused = 0;
			}
			c->state = SRV_HDR;
			break;
		}
	}
io_error:
	if (errno == EINTR)
		return mc_srv_drive(c);
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return;
	mc_srv_conn_close(c, strerror(errno));
}

static void mc_srv_on_io(evutil_socket_t fd, short what, void *arg)
{
	struct mc_srv_conn *c = arg;

	(void)fd;
	(void)what;
	mc_srv_drive(c);
}

static void mc_srv_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			     int salen, void *arg)
{
	struct mc_tcp_server *s = arg;
	struct mc_srv_conn *c;
	int one = 1;

	(void)l;
	(void)salen;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		evutil_closesocket(fd);
		return;
	}
	c->srv = s;
	c->fd = fd;
	c->file_fd = -1;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, ntohs(in->sin_port));
	} else {
		snprintf(c->peer, sizeof(c->peer), "peer");
	}
	evutil_make_socket_nonblocking(fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->ev_read = event_new(s->base, fd, EV_READ | EV_PERSIST, mc_srv_on_io, c);
	c->ev_write = event_new(s->base, fd, EV_WRITE, mc_srv_on_io, c);
	if (c->ev_read == NULL || c->ev_write == NULL) {
		if (c->ev_read)
			event_free(c->ev_read);
		evutil_closesocket(fd);
		free(c);
		return;
	}
	event_add(c->ev_read, NULL);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
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
	s->scratch = malloc(MC_DISCARD_BUF);
	if (s->scratch == NULL) {
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
	free(s->scratch);
	free(s);
}

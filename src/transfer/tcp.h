/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TCP_H
#define MC_TCP_H

#include <stdint.h>

#include <event2/event.h>

#include "transfer/memreg.h"

/*
 * The TCP data plane, wire-compatible with upstream's transfer engine TCP protocol v2
 * (doc/protocol.md §2): 24-byte request header {u64 size, u64 addr, u8 opcode|0x80, 7 zero},
 * an 8-byte status frame ("MCTV" << 32 | code), payload straight between socket and memory.
 *
 * Server and client both run on one event loop and must only be used from its thread.
 */
enum mc_xfer_opcode {
	MC_XFER_READ = 0,	/* remote -> local */
	MC_XFER_WRITE = 1,	/* local -> remote */
};

#define MC_TCP_STATUS_MAGIC 0x4D435456u
#define MC_TCP_HDR_LEN 24

struct mc_tcp_server;
struct mc_tcp_client;
struct mc_auth;

/* Listen on bind_addr:port (port 0: any free port) and serve READ/WRITE of ranges inside reg.
 * Returns NULL with *err set on failure. */
struct mc_tcp_server *mc_tcp_server_new(struct event_base *base, const char *bind_addr,
					uint16_t port, struct mc_memreg *reg, int *err);
uint16_t mc_tcp_server_port(const struct mc_tcp_server *s);
/* Require the cluster secret a (NULL: none) of every connection accepted from now on; call it
 * right after mc_tcp_server_new, on the loop.  a must outlive the server. */
void mc_tcp_server_set_auth(struct mc_tcp_server *s, struct mc_auth *a);
/* Serve fd, a connected stream socket (what the listener accepted; a socketpair end in tests),
 * as a connection of s; peer names it in log lines.  The server owns fd from here on, also on
 * failure.  Returns 0, -ENOMEM, or -EBUSY (the server is at its connection limit). */
int mc_tcp_server_adopt(struct mc_tcp_server *s, evutil_socket_t fd, const char *peer);
void mc_tcp_server_free(struct mc_tcp_server *s);

struct mc_tcp_client_opts {
	unsigned lanes_per_peer;	/* connections per peer (default 2, MC_TCP_LANES_PER_PEER) */
	uint64_t slice_size;		/* transfers above this are split over lanes (default 4 MiB,
					   MC_TCP_SLICE_SIZE) */
	unsigned connect_timeout_ms;	/* default 5000 (the store client passes its own, 2000) */
	unsigned io_timeout_ms;		/* no byte moving for this long while transfers are pending
					   fails the lane (default 30000; the store client: 2000) */
	/* Bytes of transfers on a peer's lanes at once (MC_TCP_MAX_QUEUED_BYTES_PER_PEER; 0: no
	 * bound).  Transfers past it wait, in order, until earlier ones end; one larger than the
	 * bound goes alone. */
	uint64_t max_queued_bytes;
	/* The cluster secret every new lane proves before its first request (within
	 * connect_timeout_ms, connect included), or NULL.  Must outlive the client. */
	const struct mc_auth *auth;
};

/* Called exactly once per transfer, on the loop thread, never from inside submit.
 * status: 0, or MC_ERR_TRANSFER_FAIL (-800). */
typedef void (*mc_xfer_done_fn)(void *arg, int status);

/* opts may be NULL (defaults, overridden by the environment). */
struct mc_tcp_client *mc_tcp_client_new(struct event_base *base,
					const struct mc_tcp_client_opts *opts);
/* Fails every pending transfer (callbacks run with -800 before this returns) and closes. */
void mc_tcp_client_free(struct mc_tcp_client *c);
/* Queue a transfer of len bytes between local and remote_addr at host:port.  crc (may be NULL):
 * set to the CRC-64/ECMA-182 of the bytes moved, computed on the way while they are in cache,
 * before cb runs with status 0.  Returns 0 (cb will be called) or -ENOMEM/-EINVAL (cb will not
 * be called). */
int mc_tcp_client_submit(struct mc_tcp_client *c, const char *host, uint16_t port, int opcode,
			 void *local, uint64_t remote_addr, uint64_t len, mc_xfer_done_fn cb,
			 void *arg, uint64_t *crc);

/* A connection's reply stream read through a small buffer (buf[pos, len) not consumed yet). */
struct mc_tcp_inbuf {
	uint8_t *buf;
	size_t cap, pos, len;
};

/* Take up to want bytes of fd's stream into dst: from the buffer, else straight from the socket
 * when want is at least direct, else by refilling the buffer first (recv with flags).  Returns
 * the bytes taken, or what recv returned (0: EOF, -1: errno). */
ssize_t mc_tcp_inbuf_take(struct mc_tcp_inbuf *b, int fd, uint8_t *dst, uint64_t want,
			  uint64_t direct, int flags);

/* fd, a connected TCP socket: if its two ends share one address (the peer is on this host), give
 * it the congestion control for same-host connections (tcp_local.c: MC_TCP_LOCAL_CONGESTION,
 * default reno).  Returns 1 when switched, else 0. */
int mc_tcp_tune_local(int fd);

/* The calling thread's own small transfers (tcp_direct.c): for batches that are latency-bound,
 * a thread that would wait for the loop anyway carries them itself over pooled connections.
 * Any thread may call mc_tcp_direct_run; mc_tcp_direct_free when none does any more. */
struct mc_tcp_direct;

#define MC_TCP_DIRECT_NOT_RUN 1	/* a dop's status: not carried (a pooled connection failed
				   before any answer): the caller hands it to the lanes */

struct mc_tcp_dop {
	int opcode;		/* MC_XFER_READ or MC_XFER_WRITE */
	uint8_t *local;
	uint64_t remote, len;	/* len > 0 */
	int want_crc;		/* crc: the CRC-64 of the bytes moved, on status 0 */
	uint64_t crc;
	int status;		/* out: 0, MC_ERR_TRANSFER_FAIL, or MC_TCP_DIRECT_NOT_RUN */
	uint8_t hdr[MC_TCP_HDR_LEN];	/* scratch */
};

struct mc_tcp_dpeer {
	const char *host;	/* an IP address */
	uint16_t port;
	struct mc_tcp_dop *ops;
	size_t n;
};

/* opts: connect_timeout_ms, io_timeout_ms and auth as for the lanes (NULL: defaults). */
struct mc_tcp_direct *mc_tcp_direct_new(const struct mc_tcp_client_opts *opts);
void mc_tcp_direct_free(struct mc_tcp_direct *d);
/* Carry every op of every peer on this thread, all peers at once, and return when each op has
 * its status.  Returns 0, or -ENOMEM (no op carried: all left MC_TCP_DIRECT_NOT_RUN). */
int mc_tcp_direct_run(struct mc_tcp_direct *d, struct mc_tcp_dpeer *peers, size_t npeers);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_RPC_CONN_H
#define MC_MASTER_RPC_CONN_H

/*
 * The master's RPC connections, shared by the listener (rpc_server.c) and the queues of
 * requests that wait for the background load (rpc_park.c).  Private to those two files:
 * everything runs on the master's loop thread.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "common/wire.h"

struct bufferevent;
struct mc_master;
struct mc_auth_op;
struct mc_auth_hs;

/* A request frame (header and body) waiting for the background load. */
struct mc_parked {
	struct mc_parked *next;
	uint64_t seq;		/* its place in its connection's arrival order */
	struct mc_rpc_hdr h;	/* decoded and checked when it arrived */
	size_t len;
	uint8_t frame[];
};

/* A connection's parked requests of one kind, in arrival order. */
struct mc_park_list {
	struct mc_parked *head, **tail;
};

/* At most this many requests (and bytes) wait for the load, per connection and in all; past
 * that a request that must wait is answered UNAVAILABLE_IN_CURRENT_STATUS, not executed.  A
 * connection's bound fits one frame of the largest size (rpc_max_frame_bytes, 64 MiB). */
#define MC_PARK_MAX_CONN 4096
#define MC_PARK_MAX_TOTAL 65536
#define MC_PARK_MAX_CONN_BYTES ((size_t)72 << 20)
#define MC_PARK_MAX_TOTAL_BYTES ((size_t)256 << 20)

struct mc_conn {
	struct mc_master *m;
	struct bufferevent *bev;
	struct mc_conn *prev, *next;
	uint64_t id;
	int closing;
	int flush_pending;	/* on m->flush_head: replies wait for the next commit */
	int sealed;		/* HA: on m->flush_sealed: out[0, sealed_len) waits for the round of
				   the log being written, what follows for a later one */
	size_t sealed_len;
	struct mc_conn *flush_next, *sealed_next;
	struct event *reaper;
	char peer[80];
	uint16_t tenant;	/* SetTenant: the tenant its requests work for (tenants.c) */
	/* Requests that wait for the background load (master_load.c): the connection reads on
	 * meanwhile, and they are answered by req_id when they may run.  Those waiting for the
	 * lookup of their keys may run at any step of the load (while the connection is on
	 * m->look_conns); the others only at its end, when both lists run merged by seq. */
	struct mc_park_list park_keys, park_end;
	struct mc_conn *look_prev, *look_next;
	uint32_t nparked, nkeys;	/* in both lists; in park_keys */
	uint64_t park_seq;
	size_t park_bytes;
	int park_barrier;	/* a parked request changes the connection (SetTenant): every later
				   one waits behind it */
	int park_warned;	/* logged that its requests past the bound are refused */
	struct mc_wbuf out;
	size_t *dur;		/* offsets in out of successful replies that need the commit */
	size_t ndur, capdur;
	/* With a cluster secret: the handshake in progress (no bev yet) on fd, or refusing: a
	 * peer without the handshake gets ILLEGAL_CLIENT for its first request, then the close. */
	struct mc_auth_op *auth_op;
	evutil_socket_t fd;
	int refusing;
	int tls;			/* bev is a TLS bufferevent: never write to fd directly */
	struct event *ev_slow;		/* rpc_request_timeout_ms: a request begun (or the first
					   one) must be complete by then */
	int slow_armed;
	char ip[INET6_ADDRSTRLEN];	/* the peer's address, for max_connections_per_peer */
	struct mc_auth_hs *hs;		/* TLS: the secret's handshake inside it, over bev */
};

/* rpc_park.c: a new connection's empty waiting lists; drop c's waiting requests unexecuted (c
 * closes); whether a request (frame: header h and body) waits for the load now (0: it runs,
 * MC_LOAD_WAIT_KEYS or MC_LOAD_WAIT_END); queue it to wait, or refuse it past the bounds; the
 * first request of a list, taken off it (the caller keeps the counts); c has no request left
 * waiting for a lookup: the load's steps no longer visit it. */
void mc_rpc_park_init(struct mc_conn *c);
void mc_rpc_unpark_all(struct mc_conn *c);
int mc_rpc_must_wait(struct mc_conn *c, const struct mc_rpc_hdr *h, const uint8_t *frame);
void mc_rpc_park(struct mc_conn *c, const struct mc_rpc_hdr *h, const uint8_t *frame, int why);
struct mc_parked *mc_rpc_park_pop(struct mc_park_list *l);
void mc_rpc_park_look_unlink(struct mc_conn *c);

#endif

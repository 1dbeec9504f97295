/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_AUTH_EVENT_H
#define MC_AUTH_EVENT_H

/*
 * The authentication handshake (src/common/auth.h) run on an event loop, for listeners and
 * connections that belong to a reactor.  Must be used from the loop's thread.
 */
#include <event2/event.h>

#include "common/auth.h"

struct mc_auth_op;

/* Called once, on the loop, never from inside mc_auth_op_start.  rc: 0 (authenticated: the
 * port's protocol starts now), -ETIMEDOUT, or what mc_auth_hs_step failed with; hs is valid
 * during the call only (hs->why, and for MC_AUTH_NOT_HELLO the peer's first bytes).  The op is
 * freed when the callback returns: forget its pointer there.  The socket stays the caller's. */
typedef void (*mc_auth_op_fn)(void *arg, int rc, struct mc_auth_hs *hs);

/* Start a handshake on fd in role (MC_AUTH_CLIENT or MC_AUTH_SERVER), within timeout_ms.
 * Returns the op, or NULL (out of memory, no random bytes): then cb is never called. */
struct mc_auth_op *mc_auth_op_start(struct event_base *base, evutil_socket_t fd,
				    const struct mc_auth *a, int role, int timeout_ms,
				    mc_auth_op_fn cb, void *arg);
/* Cancel a handshake still in progress (its callback will not run).  NULL: no-op. */
void mc_auth_op_free(struct mc_auth_op *op);

/* Run hs over a bufferevent (a TLS connection) instead of a socket: its reads take bytes from
 * bev's input, its writes queue on bev's output.  The owner calls mc_auth_hs_step(hs, -1) from
 * its read callback until it is done; bytes after the handshake stay in the input. */
struct bufferevent;
void mc_auth_hs_use_bev(struct mc_auth_hs *hs, struct bufferevent *bev);

#endif

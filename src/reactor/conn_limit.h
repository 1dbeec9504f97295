/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_REACTOR_CONN_LIMIT_H
#define MC_REACTOR_CONN_LIMIT_H

/*
 * Connection admission for one listening port: at most max_conns connections at once and at
 * most max_per_peer from one address, so that a flood from one host cannot take the slots of
 * the others; plus the counters of what was refused or cut off, which every daemon's /metrics
 * shows as
 *
 *   mooncake_connections_open{port="P"}                    gauge
 *   mooncake_connections_accepted_total{port="P"}          counter
 *   mooncake_connections_refused_total{port="P",reason="max_connections"|"max_connections_per_peer"}
 *   mooncake_connections_closed_slow_total{port="P"}       counter (a request not whole in time)
 *   mooncake_connections_closed_idle_total{port="P"}       counter (no request for too long)
 *
 * Every limit of a process is registered in one process-wide list (mc_conn_limit_prom prints
 * them all, summing those of the same port name, e.g. two stores of one Python process).
 * Admission and release run on the thread of the loop that owns the port; the counters are
 * atomics, read from any thread.  Refusals and cut-offs are logged with the peer's address,
 * one line a second at most per port.
 */
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

struct evbuffer;
struct mc_conn_limit;

/* The address a connection was admitted under (to release it with). */
struct mc_conn_key {
	char ip[INET6_ADDRSTRLEN];
};

/* A limit for the port named port (a Prometheus label value: [a-z_]+, static storage).
 * max_conns, max_per_peer: 0 means no bound.  NULL when out of memory. */
struct mc_conn_limit *mc_conn_limit_new(const char *port, unsigned max_conns,
					unsigned max_per_peer);
/* Unregister and free (NULL: no-op).  Connections still admitted are forgotten. */
void mc_conn_limit_free(struct mc_conn_limit *l);

/* Admit a connection from sa (its accepted address; NULL or not IP: counted under "local").
 * 0: admitted, key filled in, and mc_conn_limit_release(l, key) must follow when it closes.
 * -EBUSY: refused (counted and logged); the caller closes the socket.  -ENOMEM likewise. */
int mc_conn_limit_admit(struct mc_conn_limit *l, const struct sockaddr *sa,
			struct mc_conn_key *key);
void mc_conn_limit_release(struct mc_conn_limit *l, const struct mc_conn_key *key);

/* Count (and log, rate-limited) a connection closed because a request was not whole in time
 * (slow) or no request came for too long (idle).  peer: its address; why: the setting. */
void mc_conn_limit_closed_slow(struct mc_conn_limit *l, const char *peer, const char *why);
void mc_conn_limit_closed_idle(struct mc_conn_limit *l, const char *peer, const char *why);

/* Connections open now. */
unsigned mc_conn_limit_open(const struct mc_conn_limit *l);

/* Append the series above for every limit of this process to b (nothing when there is none). */
void mc_conn_limit_prom(struct evbuffer *b);

/* An unsigned setting from the environment: name's value if it is a decimal in [0, max],
 * else def (a bad value is logged once per call). */
unsigned mc_conn_limit_env(const char *name, unsigned def, unsigned max);

/* The limits of one kind of port from the environment: PREFIX_MAX_CONNECTIONS,
 * PREFIX_MAX_CONNECTIONS_PER_PEER, PREFIX_REQUEST_TIMEOUT_MS and PREFIX_IDLE_TIMEOUT_MS, each
 * keeping its value in *io (the default) when unset or invalid. */
struct mc_port_limits {
	unsigned max_conns;	/* 0: no bound */
	unsigned max_per_peer;	/* 0: no bound */
	unsigned request_ms;	/* a request must be whole within this (0: no bound) */
	unsigned idle_ms;	/* no request for this long closes (0: never) */
};
void mc_port_limits_env(const char *prefix, struct mc_port_limits *io);

/* Format sa as "ip:port" into out (n bytes); "local" for what is not IPv4 or IPv6. */
void mc_conn_limit_peer(const struct sockaddr *sa, char *out, size_t n);

#endif

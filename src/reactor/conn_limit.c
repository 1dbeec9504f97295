/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection admission per port (conn_limit.h): a count of open connections and a small hash
 * table of open connections per peer address, both touched only by the loop thread that owns
 * the port; counters read by /metrics from any thread are atomics.  The process-wide list of
 * limits is guarded by a mutex, taken when a limit is created or freed and when /metrics is
 * rendered.  A table entry lives while its address has a connection open, so the table holds
 * at most max_conns entries.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "common/log.h"
#include "reactor/conn_limit.h"

#define MC_CL_BUCKETS 256

struct mc_cl_peer {
	struct mc_cl_peer *next;
	unsigned n;
	char ip[INET6_ADDRSTRLEN];
};

struct mc_conn_limit {
	struct mc_conn_limit *reg_next;	/* the process-wide list */
	const char *port;
	unsigned max_conns, max_per_peer;
	unsigned nopen;			/* atomic: read by /metrics */
	uint64_t accepted, refused_total, refused_peer, closed_slow, closed_idle;	/* atomics */
	int64_t log_sec;		/* the second of the last refusal line */
	unsigned log_skipped;		/* refusals not logged since */
	struct mc_cl_peer *buckets[MC_CL_BUCKETS];
};

static pthread_mutex_t mc_cl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mc_conn_limit *mc_cl_all;

static unsigned mc_cl_hash(const char *ip)
{
	unsigned h = 2166136261u;

	for (; *ip; ip++)
		h = (h ^ (unsigned char)*ip) * 16777619u;
	return h % MC_CL_BUCKETS;
}

void mc_conn_limit_peer(const struct sockaddr *sa, char *out, size_t n)
{
	char ip[INET6_ADDRSTRLEN];

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(out, n, "%s:%u", ip, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(out, n, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		snprintf(out, n, "local");
	}
}

static void mc_cl_ip(const struct sockaddr *sa, char *out, size_t n)
{
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)n);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
			  (socklen_t)n);
	else
		snprintf(out, n, "local");
}

struct mc_conn_limit *mc_conn_limit_new(const char *port, unsigned max_conns,
					unsigned max_per_peer)
{
	struct mc_conn_limit *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->port = port;
	l->max_conns = max_conns;
	l->max_per_peer = max_per_peer;
	l->log_sec = -1;
	pthread_mutex_lock(&mc_cl_mu);
	l->reg_next = mc_cl_all;
	mc_cl_all = l;
	pthread_mutex_unlock(&mc_cl_mu);
	return l;
}

void mc_conn_limit_free(struct mc_conn_limit *l)
{
	struct mc_conn_limit **pp;
	unsigned i;

	if (l == NULL)
		return;
	pthread_mutex_lock(&mc_cl_mu);
	for (pp = &mc_cl_all; *pp; pp = &(*pp)->reg_next)
		if (*pp == l) {
			*pp = l->reg_next;
			break;
		}
	pthread_mutex_unlock(&mc_cl_mu);
	for (i = 0; i < MC_CL_BUCKETS; i++)
		while (l->buckets[i]) {
			struct mc_cl_peer *p = l->buckets[i];

			l->buckets[i] = p->next;
			free(p);
		}
	free(l);
}

/* One line a second at most per port; the lines skipped meanwhile are counted in the next. */
static void mc_cl_log(struct mc_conn_limit *l, const char *fmt_what, const char *peer,
		      const char *why, unsigned long long n)
{
	int64_t now = (int64_t)time(NULL);

	if (now == l->log_sec) {
		l->log_skipped++;
		return;
	}
	l->log_sec = now;
	if (l->log_skipped)
		mc_log_warn("%s connection from %s on the %s port: %s (%llu) (and %u more not logged)",
			    fmt_what, peer, l->port, why, n, l->log_skipped);
	else
		mc_log_warn("%s connection from %s on the %s port: %s (%llu)", fmt_what, peer,
			    l->port, why, n);
	l->log_skipped = 0;
}

int mc_conn_limit_admit(struct mc_conn_limit *l, const struct sockaddr *sa,
			struct mc_conn_key *key)
{
	struct mc_cl_peer *p;
	char peer[INET6_ADDRSTRLEN + 10];
	unsigned h;

	mc_cl_ip(sa, key->ip, sizeof(key->ip));
	h = mc_cl_hash(key->ip);
	for (p = l->buckets[h]; p; p = p->next)
		if (!strcmp(p->ip, key->ip))
			break;
	if (l->max_conns && __atomic_load_n(&l->nopen, __ATOMIC_RELAXED) >= l->max_conns) {
		__atomic_add_fetch(&l->refused_total, 1, __ATOMIC_RELAXED);
		mc_conn_limit_peer(sa, peer, sizeof(peer));
		mc_cl_log(l, "refusing", peer, "max_connections", l->nopen);
		return -EBUSY;
	}
	if (l->max_per_peer && p && p->n >= l->max_per_peer) {
		__atomic_add_fetch(&l->refused_peer, 1, __ATOMIC_RELAXED);
		mc_conn_limit_peer(sa, peer, sizeof(peer));
		mc_cl_log(l, "refusing", peer, "max_connections_per_peer", p->n);
		return -EBUSY;
	}
	if (p == NULL) {
		p = calloc(1, sizeof(*p));
		if (p == NULL)
			return -ENOMEM;
		memcpy(p->ip, key->ip, sizeof(p->ip));
		p->next = l->buckets[h];
		l->buckets[h] = p;
	}
	p->n++;
	__atomic_add_fetch(&l->nopen, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&l->accepted, 1, __ATOMIC_RELAXED);
	return 0;
}

void mc_conn_limit_release(struct mc_conn_limit *l, const struct mc_conn_key *key)
{
	struct mc_cl_peer **pp;
	unsigned h = mc_cl_hash(key->ip);

	for (pp = &l->buckets[h]; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->ip, key->ip))
			break;
	if (*pp == NULL)
		return;	/* not admitted under this key: nothing to give back */
	__atomic_sub_fetch(&l->nopen, 1, __ATOMIC_RELAXED);
	if (--(*pp)->n == 0) {
		struct mc_cl_peer *p = *pp;

		*pp = p->next;
		free(p);
	}
}

void mc_conn_limit_closed_slow(struct mc_conn_limit *l, const char *peer, const char *why)
{
	uint64_t n = __atomic_add_fetch(&l->closed_slow, 1, __ATOMIC_RELAXED);

	mc_cl_log(l, "closed slow", peer, why, (unsigned long long)n);
}

void mc_conn_limit_closed_idle(struct mc_conn_limit *l, const char *peer, const char *why)
{
	uint64_t n = __atomic_add_fetch(&l->closed_idle, 1, __ATOMIC_RELAXED);

	mc_cl_log(l, "closed idle", peer, why, (unsigned long long)n);
}

unsigned mc_conn_limit_open(const struct mc_conn_limit *l)
{
	return __atomic_load_n(&l->nopen, __ATOMIC_RELAXED);
}

/* The sum of one counter over the limits named port.  Called with mc_cl_mu held. */
static uint64_t mc_cl_sum(const char *port, size_t off)
{
	const struct mc_conn_limit *l;
	uint64_t s = 0;

	for (l = mc_cl_all; l; l = l->reg_next)
		if (!strcmp(l->port, port))
			s += __atomic_load_n((const uint64_t *)((const char *)l + off),
					     __ATOMIC_RELAXED);
	return s;
}

void mc_conn_limit_prom(struct evbuffer *b)
{
	static const struct {
		const char *name, *type, *help, *label;
		size_t off;
	} series[] = {
		{ "mooncake_connections_accepted_total", "counter", "connections admitted", NULL,
		  offsetof(struct mc_conn_limit, accepted) },
		{ "mooncake_connections_refused_total", "counter",
		  "connections refused at a connection limit", "max_connections",
		  offsetof(struct mc_conn_limit, refused_total) },
		{ NULL, NULL, NULL, "max_connections_per_peer",
		  offsetof(struct mc_conn_limit, refused_peer) },
		{ "mooncake_connections_closed_slow_total", "counter",
		  "connections closed because a request was not whole in time", NULL,
		  offsetof(struct mc_conn_limit, closed_slow) },
		{ "mooncake_connections_closed_idle_total", "counter",
		  "connections closed after no request for too long", NULL,
		  offsetof(struct mc_conn_limit, closed_idle) },
	};
	const struct mc_conn_limit *l, *k;
	const char *name = NULL;
	size_t i;

	pthread_mutex_lock(&mc_cl_mu);
	if (mc_cl_all == NULL)
		goto out;
	evbuffer_add_printf(b, "# HELP mooncake_connections_open connections open on a port\n"
			       "# TYPE mooncake_connections_open gauge\n");
	for (l = mc_cl_all; l; l = l->reg_next) {
		uint64_t n = 0;

		for (k = mc_cl_all; k != l && strcmp(k->port, l->port); k = k->reg_next)
			;
		if (k != l)
			continue;	/* printed with the first of its name */
		for (k = l; k; k = k->reg_next)
			if (!strcmp(k->port, l->port))
				n += __atomic_load_n(&k->nopen, __ATOMIC_RELAXED);
		evbuffer_add_printf(b, "mooncake_connections_open{port=\"%s\"} %" PRIu64 "\n",
				    l->port, n);
	}
	for (i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
		if (series[i].name) {
			name = series[i].name;
			evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name,
					    series[i].help, name, series[i].type);
		}
		for (l = mc_cl_all; l; l = l->reg_next) {
			for (k = mc_cl_all; k != l && strcmp(k->port, l->port); k = k->reg_next)
				;
			if (k != l)
				continue;
			if (series[i].label)
				evbuffer_add_printf(b, "%s{port=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
						    name, l->port, series[i].label,
						    mc_cl_sum(l->port, series[i].off));
			else
				evbuffer_add_printf(b, "%s{port=\"%s\"} %" PRIu64 "\n", name,
						    l->port, mc_cl_sum(l->port, series[i].off));
		}
	}
out:
	pthread_mutex_unlock(&mc_cl_mu);
}

unsigned mc_conn_limit_env(const char *name, unsigned def, unsigned max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (v == NULL || *v == '\0')
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end != '\0' || *v == '-' || n > max) {
		mc_log_warn("%s=%s is not a number from 0 to %u: using %u", name, v, max, def);
		return def;
	}
	return (unsigned)n;
}

void mc_port_limits_env(const char *prefix, struct mc_port_limits *io)
{
	char name[96];

	snprintf(name, sizeof(name), "%s_MAX_CONNECTIONS", prefix);
	io->max_conns = mc_conn_limit_env(name, io->max_conns, 1000000);
	snprintf(name, sizeof(name), "%s_MAX_CONNECTIONS_PER_PEER", prefix);
	io->max_per_peer = mc_conn_limit_env(name, io->max_per_peer, 1000000);
	snprintf(name, sizeof(name), "%s_REQUEST_TIMEOUT_MS", prefix);
	io->request_ms = mc_conn_limit_env(name, io->request_ms, 86400000);
	snprintf(name, sizeof(name), "%s_IDLE_TIMEOUT_MS", prefix);
	io->idle_ms = mc_conn_limit_env(name, io->idle_ms, 86400000);
}

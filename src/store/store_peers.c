/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Same-host segments opened ahead of the first put.  A writer that reaches a peer's segment on
 * this host over shared memory maps the peer's memfd, and every page of that mapping needs an
 * entry in the writer's own page tables before a copy can land in it: about as much work as the
 * copy itself (0.1-0.5 s per GiB on the machines measured, where the copy takes 0.1-0.2).  When
 * the first put opens the segment, that work lands on the first puts.  So the handle opens the
 * same-host segments itself, from set-up on: a thread asks the master for the mounted segments
 * (GetAllSegments), opens those the engine's shm transport serves (mc_te_open_same_host: one
 * descriptor fetch each, then the attach, whose map-ahead thread fills our page tables in the
 * background; segment/segmem.h), and asks again later for segments mounted since: after 1 s,
 * doubling up to 16 s while nothing changes, back to 1 s when the list changed.  A name is
 * fetched once while it stays listed (another host's segment is not asked for again).
 *
 * Off where the engine has no shm transport, with MC_FORCE_TCP, with MC_STORE_POPULATE=0 (no
 * same-host mapping ahead either), and in mooncake_client (st->no_peer_open: it writes into
 * peers only for copy/move tasks, and would hold page tables for every peer's segment).  The thread is the handle's; teardown joins it before the
 * engine goes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/errcode.h"
#include "common/log.h"
#include "engine/engine.h"
#include "store/store.h"

#define MC_PEERS_FIRST_MS 1000
#define MC_PEERS_MAX_MS 16000

struct mc_store_peers {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* on CLOCK_MONOTONIC */
	pthread_t thread;
	int stop;
	char **seen;			/* names fetched (opened or not ours) and still listed */
	uint32_t nseen;
	uint32_t nopen;			/* opened through shm so far (for the log) */
};

static int mc_peers_seen(struct mc_store_peers *p, struct mc_strv name)
{
	uint32_t i;

	for (i = 0; i < p->nseen; i++)
		if (strlen(p->seen[i]) == name.n && !memcmp(p->seen[i], name.p, name.n))
			return 1;
	return 0;
}

/* Keep in seen only the names the master still lists.  Returns 1 when a name was dropped (a
 * segment went away: its name may come back with another owner). */
static int mc_peers_prune(struct mc_store_peers *p, const struct mc_strv *names, uint32_t n)
{
	uint32_t i, j, k = 0;
	int dropped = 0;

	for (i = 0; i < p->nseen; i++) {
		size_t len = strlen(p->seen[i]);
		int listed = 0;

		for (j = 0; j < n && !listed; j++)
			listed = names[j].n == len && !memcmp(names[j].p, p->seen[i], len);
		if (listed) {
			p->seen[k++] = p->seen[i];
		} else {
			free(p->seen[i]);
			dropped = 1;
		}
	}
	p->nseen = k;
	return dropped;
}

/* The names in a GetAllSegments answer (u32 n, n x str), decoded once into *out (NULL when the
 * answer is malformed or memory is short: the round is skipped). */
static uint32_t mc_peers_names(const uint8_t *body, size_t len, struct mc_strv **out)
{
	struct mc_strv *names;
	struct mc_rbuf r;
	uint32_t n, i;

	*out = NULL;
	mc_rbuf_init(&r, body, len);
	n = mc_rbuf_count(&r, MC_RPC_MAX_BATCH, 4);
	if (r.err)
		return 0;
	names = calloc(n ? n : 1, sizeof(*names));
	if (names == NULL)
		return 0;
	for (i = 0; i < n && !r.err; i++)
		names[i] = mc_rpc_get_strv(&r, MC_RPC_MAX_NAME);
	if (r.err) {
		free(names);
		return 0;
	}
	*out = names;
	return n;
}

/* One round: list the segments and open the same-host ones not seen yet.  Returns 1 when
 * something changed (a new name, or one gone), 0 when not, -1 when the master cannot list
 * them (an older master: no more rounds). */
static int mc_peers_round(struct mc_store *st, struct mc_store_peers *p)
{
	struct mc_rpc_call call;
	struct mc_strv *names;
	uint32_t n, i;
	int changed = 0, rc;

	mc_rpc_call_init(&call, MC_OP_GET_ALL_SEGMENTS);
	rc = mc_store_call_loop(st, &call);	/* a background call: no lane of its own */
	if (rc == 0 && call.status != 0) {
		mc_log_debug("store client %s: the master lists no segments (%s); same-host "
			     "segments are opened by their first transfer", st->hostname,
			     mc_strerror(call.status));
		mc_rpc_call_fini(&call);
		return -1;
	}
	if (rc) {
		mc_rpc_call_fini(&call);
		return 0;	/* the master is away: try again later */
	}
	n = mc_peers_names(call.resp, call.resp_len, &names);
	if (names == NULL) {
		mc_rpc_call_fini(&call);
		return 0;
	}
	changed = mc_peers_prune(p, names, n);
	for (i = 0; i < n; i++) {
		struct mc_strv s = names[i];
		char name[256], **grown;
		int got;

		if (s.n == 0 || s.n >= sizeof(name) || mc_peers_seen(p, s) ||
		    p->nseen >= MC_TE_MAX_SEGMENTS)
			continue;
		memcpy(name, s.p, s.n);
		name[s.n] = '\0';
		pthread_mutex_lock(&p->mu);
		got = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (got)
			break;
		got = mc_te_open_same_host(st->engine, name);
		if (got < 0)
			continue;	/* not reachable now: asked again next round */
		grown = realloc(p->seen, (p->nseen + 1) * sizeof(*p->seen));
		if (grown == NULL)
			break;
		p->seen = grown;
		p->seen[p->nseen] = strdup(name);
		if (p->seen[p->nseen] == NULL)
			break;
		p->nseen++;
		changed = 1;
		if (got == 1) {
			pthread_mutex_lock(&p->mu);
			p->nopen++;
			pthread_mutex_unlock(&p->mu);
			mc_log_info("store client %s: same-host segment %s opened ahead of its "
				    "first transfer", st->hostname, name);
		}
	}
	free(names);
	mc_rpc_call_fini(&call);
	return changed;
}

static void *mc_peers_main(void *arg)
{
	struct mc_store *st = arg;
	struct mc_store_peers *p = st->peers;
	int64_t wait_ms = MC_PEERS_FIRST_MS;

	(void)pthread_setname_np(pthread_self(), "mc-peers");
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		struct timespec ts;
		int rc;

		pthread_mutex_unlock(&p->mu);
		rc = mc_peers_round(st, p);
		pthread_mutex_lock(&p->mu);
		if (rc < 0)
			break;
		wait_ms = rc ? MC_PEERS_FIRST_MS : (wait_ms * 2 > MC_PEERS_MAX_MS ? MC_PEERS_MAX_MS
										   : wait_ms * 2);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += wait_ms / 1000;
		ts.tv_nsec += wait_ms % 1000 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int mc_store_peers_start(struct mc_store *st)
{
	struct mc_store_peers *p;
	pthread_condattr_t ca;

	if (st->engine == NULL || st->no_peer_open || !st->memopts.populate ||
	    st->engine->xports[MC_TE_XPORT_SHM].state == NULL ||
	    mc_te_forced_slot() == MC_TE_XPORT_TCP)
		return 0;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	st->peers = p;
	if (pthread_create(&p->thread, NULL, mc_peers_main, st) != 0) {
		/* Not fatal: the first transfer opens them as before. */
		mc_log_warn("store client %s: no thread to open same-host segments ahead",
			    st->hostname);
		st->peers = NULL;
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free(p);
	}
	return 0;
}

uint32_t mc_store_peers_opened(struct mc_store *st)
{
	uint32_t n;

	if (st->peers == NULL)
		return 0;
	pthread_mutex_lock(&st->peers->mu);
	n = st->peers->nopen;
	pthread_mutex_unlock(&st->peers->mu);
	return n;
}

void mc_store_peers_stop(struct mc_store *st)
{
	struct mc_store_peers *p = st->peers;
	uint32_t i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	for (i = 0; i < p->nseen; i++)
		free(p->seen[i]);
	free(p->seen);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
	st->peers = NULL;
}

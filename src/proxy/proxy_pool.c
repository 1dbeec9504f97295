/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The instance pools of mooncake_proxy: one list of prefill and one of decode instances, the
 * keep-alive connections to each, the health checks, and the scheduling policies.
 *
 * Invariants: an instance is in rotation when healthy and not removed.  An instance holds one
 * reference for its pool and one per request using it; removal unlinks it and drops the pool's
 * reference, so requests in flight finish on it.  Connections are freed from px->reap_ev, never
 * inside their own request's callback.
 *
 * kv_aware keeps, per prefill instance, a direct-mapped table of the hashes of the prompt prefixes
 * it was sent (block i's hash chains blocks 0..i, so a hit on block i means the whole prefix up to
 * it matched, as in a radix tree of prompts cut in fixed blocks).  A slot holds one hash: a newer
 * prefix that maps to the same slot evicts the older one, which approximates the instance's own
 * LRU prefix cache without per-entry bookkeeping.  Loop thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/http.h>
#include <jansson.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "proxy/proxy.h"
#include "reactor/options.h"

const double px_hist_bounds[PX_HIST_N] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
					   0.025,  0.05,    0.1,    0.25,  0.5,    1,     5 };

void px_hist_observe(struct px_hist *h, double s)
{
	int i;

	for (i = 0; i < PX_HIST_N && s > px_hist_bounds[i]; i++)
		;
	h->bucket[i]++;
	h->count++;
	h->sum += s;
}

/* Connections waiting to be freed: filled anywhere, emptied by px_on_reap on the next turn. */
static struct evhttp_connection **px_reap_list;
static size_t px_reap_n, px_reap_cap;
static struct event *px_reap_ev;

static void px_on_reap(evutil_socket_t fd, short what, void *arg)
{
	size_t i, n = px_reap_n;
	struct evhttp_connection **l = px_reap_list;

	(void)fd;
	(void)what;
	(void)arg;
	px_reap_list = NULL;
	px_reap_n = px_reap_cap = 0;
	for (i = 0; i < n; i++)
		evhttp_connection_free(l[i]);
	free(l);
}

static void px_conn_reap(struct px *px, struct evhttp_connection *c)
{
	if (px_reap_ev == NULL)
		px_reap_ev = event_new(px->base, -1, 0, px_on_reap, NULL);
	if (px_reap_n == px_reap_cap) {
		px_reap_cap = px_reap_cap ? 2 * px_reap_cap : 16;
		px_reap_list = mc_xrealloc(px_reap_list, px_reap_cap * sizeof(*px_reap_list));
	}
	px_reap_list[px_reap_n++] = c;
	event_active(px_reap_ev, 0, 0);
}

struct evhttp_connection *px_conn_get(struct px_instance *in, int fresh, int *reused)
{
	struct px *px = in->px;
	struct evhttp_connection *c;
	struct timeval tv;

	*reused = 0;
	if (!fresh && in->n_idle > 0) {
		*reused = 1;
		return in->idle[--in->n_idle];
	}
	c = evhttp_connection_base_new(px->base, px->dns, in->host, in->port);
	if (c == NULL)
		return NULL;
	tv.tv_sec = px->cfg.upstream_timeout_ms / 1000;
	tv.tv_usec = (px->cfg.upstream_timeout_ms % 1000) * 1000;
	evhttp_connection_set_timeout_tv(c, &tv);
	evhttp_connection_set_retries(c, 0);
	return c;
}

void px_conn_put(struct px_instance *in, struct evhttp_connection *c, int reusable)
{
	struct px *px = in->px;

	if (c == NULL)
		return;
	if (reusable && !in->removed && in->n_idle < (size_t)px->cfg.max_idle_upstream) {
		in->idle[in->n_idle++] = c;
		return;
	}
	px_conn_reap(px, c);
}

static void px_instance_free(struct px_instance *in)
{
	size_t i;

	for (i = 0; i < in->n_idle; i++)
		px_conn_reap(in->px, in->idle[i]);
	free(in->idle);
	free(in->kv_slots);
	free(in->name);
	free(in->host);
	free(in);
}

void px_instance_unref(struct px_instance *in)
{
	if (in != NULL && --in->refs == 0)
		px_instance_free(in);
}

int px_pool_add(struct px *px, enum px_role role, const char *name, int checked)
{
	struct px_pool *pool = &px->pool[role];
	struct px_instance *in, **tail;
	char host[256];
	int port = 0;

	if (mc_opts_split_addr(name, host, sizeof(host), &port) != 0 || port <= 0 || !host[0])
		return -EINVAL;
	for (tail = &pool->head; *tail; tail = &(*tail)->next)
		if (!strcmp((*tail)->name, name))
			return -EEXIST;
	if (px->pool[0].n + px->pool[1].n >= (size_t)px->cfg.max_instances)
		return -ENOSPC;
	in = mc_xcalloc(1, sizeof(*in));
	in->px = px;
	in->role = role;
	in->name = mc_xstrdup(name);
	/* localhost is often IPv6-first: the instances listen on IPv4 as vLLM does by default. */
	in->host = mc_xstrdup(strcmp(host, "localhost") ? host : "127.0.0.1");
	in->port = (uint16_t)port;
	in->healthy = !checked;
	in->refs = 1;
	in->idle = mc_xcalloc((size_t)px->cfg.max_idle_upstream + 1, sizeof(*in->idle));
	if (role == PX_PREFILL && px->policy == PX_KV_AWARE)
		in->kv_slots = mc_xcalloc((size_t)px->cfg.kv_cache_blocks, sizeof(uint64_t));
	*tail = in;
	pool->n++;
	return 0;
}

int px_pool_remove(struct px *px, enum px_role role, const char *name)
{
	struct px_pool *pool = &px->pool[role];
	struct px_instance **p, *in;

	for (p = &pool->head; *p; p = &(*p)->next) {
		in = *p;
		if (strcmp(in->name, name))
			continue;
		*p = in->next;
		pool->n--;
		in->removed = 1;
		in->healthy = 0;
		if (in->check) {
			/* Freeing the connection drops its request without calling back. */
			evhttp_connection_free(in->check->conn);
			free(in->check);
			in->check = NULL;
			in->checking = 0;
			in->refs--;
		}
		px_instance_unref(in);
		return 0;
	}
	return -ENOENT;
}

void px_pool_free_all(struct px *px)
{
	int r;

	for (r = 0; r < 2; r++)
		while (px->pool[r].head)
			px_pool_remove(px, (enum px_role)r, px->pool[r].head->name);
	if (px->health_ev)
		event_free(px->health_ev);
	px->health_ev = NULL;
	px_on_reap(-1, 0, NULL);
	if (px_reap_ev)
		event_free(px_reap_ev);
	px_reap_ev = NULL;
}

/* ---- scheduling -------------------------------------------------------------------------- */

static int px_avoided(struct px_instance *in, struct px_instance *const *avoid, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (avoid[i] == in)
			return 1;
	return 0;
}

/* Never 0: 0 marks a free slot. */
uint64_t px_block_hash(uint64_t prev, const char *p, size_t n)
{
	uint64_t h = prev ^ 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

/* Number of leading blocks of the prompt whose hashes in[] holds. */
static size_t px_kv_match(const struct px_instance *in, const uint64_t *hs, size_t nb)
{
	size_t i, slots = (size_t)in->px->cfg.kv_cache_blocks;

	for (i = 0; i < nb; i++)
		if (in->kv_slots[hs[i] % slots] != hs[i])
			break;
	return i;
}

static struct px_instance *px_pick_kv(struct px *px, struct px_pool *pool, const char *prompt,
				      size_t len, size_t pool_blocks, struct px_instance *const *avoid,
				      size_t n_avoid)
{
	size_t bs = (size_t)px->cfg.kv_block_bytes, nb = prompt ? len / bs : 0, i, best_m = 0, m;
	size_t own, best_own = 0;
	size_t start;
	int pass;
	uint64_t stack_hs[256], *hs = nb <= 256 ? stack_hs : mc_xmalloc(nb * sizeof(*hs)), h = 0;
	struct px_instance *in, *best = NULL;
	int64_t min_load = INT64_MAX;

	for (i = 0; i < nb; i++)
		hs[i] = h = px_block_hash(h, prompt + i * bs, bs);
	for (in = pool->head; in; in = in->next)
		if (in->healthy && !px_avoided(in, avoid, n_avoid) && in->inflight < min_load)
			min_load = in->inflight;
	/* The longest cached prefix among instances loaded at most kv_load_slack above the least
	 * loaded; ties (and no match at all) go to the least loaded, then to the first from a
	 * rotating start, so unseen prompts spread like round robin.  The part of the prefix the
	 * store's pool holds is every instance's (any can load it): an instance's prefix is the
	 * longer of its own and the pool's, so when the pool's is the longest the least loaded
	 * wins, and an instance holding more itself still does. */
	start = (size_t)(pool->rr++ % pool->n);
	for (pass = 0; pass < 2; pass++) {
		for (i = 0, in = pool->head; in; in = in->next, i++) {
			if ((pass == 0) != (i >= start) || !in->healthy ||
			    px_avoided(in, avoid, n_avoid) ||
			    in->inflight > min_load + px->cfg.kv_load_slack)
				continue;
			own = px_kv_match(in, hs, nb);
			m = own > pool_blocks ? own : pool_blocks;
			if (best == NULL || m > best_m ||
			    (m == best_m && in->inflight < best->inflight)) {
				best = in;
				best_m = m;
				best_own = own;
			}
		}
	}
	if (best != NULL) {
		px->kv_blocks_looked += nb;
		px->kv_blocks_matched += best_own;
		for (i = 0; i < nb; i++)
			best->kv_slots[hs[i] % (size_t)px->cfg.kv_cache_blocks] = hs[i];
	}
	if (hs != stack_hs)
		free(hs);
	return best;
}

struct px_instance *px_pool_pick(struct px *px, enum px_role role, const char *prompt,
				 size_t prompt_len, size_t pool_blocks, struct px_instance *const *avoid,
				 size_t n_avoid)
{
	struct px_pool *pool = &px->pool[role];
	struct px_instance *in, *best = NULL;
	size_t i, k;

	if (pool->n == 0)
		return NULL;
	if (role == PX_PREFILL && px->policy == PX_KV_AWARE) {
		best = px_pick_kv(px, pool, prompt, prompt_len, pool_blocks, avoid, n_avoid);
	} else if (px->policy == PX_LEAST_LOADED) {
		/* Least in flight; ties broken from the round-robin cursor so equal loads spread. */
		k = (size_t)(pool->rr++ % pool->n);
		for (i = 0, in = pool->head; in; in = in->next, i++) {
			(void)k;
			if (!in->healthy || px_avoided(in, avoid, n_avoid))
				continue;
			if (best == NULL || in->inflight < best->inflight ||
			    (in->inflight == best->inflight && i == k))
				best = in;
		}
	} else {
		/* Round robin over the instances in rotation. */
		for (k = 0; k < pool->n && best == NULL; k++) {
			size_t want = (size_t)(pool->rr++ % pool->n);

			for (i = 0, in = pool->head; in && i < want; in = in->next, i++)
				;
			if (in && in->healthy && !px_avoided(in, avoid, n_avoid))
				best = in;
		}
	}
	if (best)
		best->refs++;
	return best;
}

/* ---- health ------------------------------------------------------------------------------ */

/* The shortest time a health check waits for its answer. */
#define PX_HEALTH_MIN_WAIT_MS 2000


static void px_set_health(struct px_instance *in, int ok, const char *why)
{
	if (in->removed)
		return;
	if (ok) {
		in->fails_in_row = 0;
		if (!in->healthy)
			mc_log_notice("%s instance %s is healthy: back in rotation",
				      in->role == PX_PREFILL ? "prefill" : "decode", in->name);
		in->healthy = 1;
		return;
	}
	in->fails_in_row++;
	if (in->healthy)
		mc_log_warn("%s instance %s: %s: out of rotation until it recovers",
			    in->role == PX_PREFILL ? "prefill" : "decode", in->name, why);
	in->healthy = 0;
}

void px_instance_failed(struct px_instance *in, const char *why)
{
	px_set_health(in, 0, why);
}

/* The answer of GET /v1/models: healthy when 200 and, with --model, the model is served. */
static void px_on_check_done(struct evhttp_request *req, void *arg)
{
	struct px_check *ck = arg;
	struct px_instance *in = ck->in;
	struct px *px = in->px;
	const char *why = NULL;
	char whybuf[96];

	if (req == NULL || evhttp_request_get_response_code(req) == 0) {
		why = "health check: no answer";
	} else if (evhttp_request_get_response_code(req) != 200) {
		snprintf(whybuf, sizeof(whybuf), "health check: HTTP %d",
			 evhttp_request_get_response_code(req));
		why = whybuf;
	} else if (px->cfg.model && px->cfg.model[0]) {
		struct evbuffer *b = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(b);
		json_t *j = json_loadb((const char *)evbuffer_pullup(b, -1), n, 0, NULL);
		json_t *d = json_object_get(j, "data"), *m;
		size_t i;

		why = "health check: model not served";
		json_array_foreach(d, i, m)
			if (json_is_string(json_object_get(m, "id")) &&
			    !strcmp(json_string_value(json_object_get(m, "id")), px->cfg.model))
				why = NULL;
		json_decref(j);
	}
	px_set_health(in, why == NULL, why ? why : "");
	px_conn_reap(px, ck->conn);
	in->check = NULL;
	in->checking = 0;
	px_instance_unref(in);
	free(ck);
}

void px_health_check(struct px_instance *in)
{
	struct px *px = in->px;
	struct px_check *ck;
	struct evhttp_request *r;
	struct timeval tv;
	int64_t wait_ms;

	if (in->checking || in->removed)
		return;
	ck = mc_xcalloc(1, sizeof(*ck));
	ck->in = in;
	ck->conn = evhttp_connection_base_new(px->base, px->dns, in->host, in->port);
	r = ck->conn ? evhttp_request_new(px_on_check_done, ck) : NULL;
	if (r == NULL) {
		if (ck->conn)
			evhttp_connection_free(ck->conn);
		free(ck);
		return;
	}
	/* A check may take the period or PX_HEALTH_MIN_WAIT_MS, whichever is longer: a short period
	 * must not take a loaded but working instance out of rotation for one slow answer. */
	wait_ms = px->cfg.health_interval_ms > PX_HEALTH_MIN_WAIT_MS ? px->cfg.health_interval_ms
								     : PX_HEALTH_MIN_WAIT_MS;
	tv.tv_sec = wait_ms / 1000;
	tv.tv_usec = (wait_ms % 1000) * 1000;
	evhttp_connection_set_timeout_tv(ck->conn, &tv);
	evhttp_add_header(evhttp_request_get_output_headers(r), "Host", in->name);
	in->checking = 1;
	in->check = ck;
	in->refs++;
	if (evhttp_make_request(ck->conn, r, EVHTTP_REQ_GET, "/v1/models") != 0) {
		/* evhttp_make_request frees r on failure. */
		in->check = NULL;
		in->checking = 0;
		in->refs--;
		evhttp_connection_free(ck->conn);
		free(ck);
	}
}

static void px_on_health_tick(evutil_socket_t fd, short what, void *arg)
{
	struct px *px = arg;
	struct px_instance *in;
	int r;

	(void)fd;
	(void)what;
	for (r = 0; r < 2; r++)
		for (in = px->pool[r].head; in; in = in->next)
			px_health_check(in);
}

int px_health_start(struct px *px)
{
	struct timeval tv = { px->cfg.health_interval_ms / 1000,
			      (px->cfg.health_interval_ms % 1000) * 1000 };

	px->health_ev = event_new(px->base, -1, EV_PERSIST, px_on_health_tick, px);
	if (px->health_ev == NULL || event_add(px->health_ev, &tv) != 0)
		return -ENOMEM;
	px_on_health_tick(-1, 0, px);
	return 0;
}

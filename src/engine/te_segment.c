/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer segments: opening a segment by name, the descriptor cache, choosing the transport that
 * serves it, and keeping descriptors fresh.
 *
 * openSegment fetches a descriptor (metadata service or handshake port) on the calling thread,
 * asks the installed transports in slot order which one serves it (mc_te_pick), and keeps it
 * in e->segs; the handle is the index + 1 and stays the same for the engine's life, even when
 * the descriptor behind it is replaced.  A failed request marks its segment stale: the next
 * openSegment fetches again, so a restarted peer (new ports, new buffers) is reconnected.  The
 * refresher thread (MC_TE_METADATA_REFRESH_INTERVAL_SECONDS) and syncSegmentCache re-fetch
 * open segments and replace those whose descriptor changed (timestamps aside).
 * MC_DISABLE_METACACHE makes every openSegment fetch.  Never on the loop thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/log.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"

#define MC_E(x) ((struct mc_engine *)(x))

/* name set to anything but "" and "0". */
static int mc_te_env_set(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

/* MC_FORCE_TCP: tcp is the only transport picked.  Else MC_FORCE_SHM (upstream 0.3.14): the
 * same-host shm transport is the only one, and a peer it cannot serve (another host or user)
 * is not reached at all.  Returns the one slot, or -1 for the usual order. */
int mc_te_forced_slot(void)
{
	if (mc_te_env_set("MC_FORCE_TCP"))
		return MC_TE_XPORT_TCP;
	return mc_te_env_set("MC_FORCE_SHM") ? MC_TE_XPORT_SHM : -1;
}

/* Choose the transport that serves seg (API thread, e->mu not held; seg is a private copy). */
void mc_te_pick(struct mc_engine *e, struct mc_te_segment *seg)
{
	int i, only = mc_te_forced_slot();

	seg->xport = -1;
	seg->xport_ctx = NULL;
	for (i = 0; i < MC_TE_NXPORTS; i++) {
		void *state;

		if (only >= 0 && i != only)
			continue;
		pthread_mutex_lock(&e->mu);
		state = e->xports[i].state;
		pthread_mutex_unlock(&e->mu);
		/* A transport is not uninstalled while an API call of the same engine runs
		 * (upstream's rule), so state stays valid through match. */
		if (state && mc_te_known[i]->match(state, seg)) {
			seg->xport = i;
			return;
		}
	}
}

/* Drop a segment's transport state (e->mu not held). */
void mc_te_unpick(struct mc_engine *e, struct mc_te_segment *seg)
{
	void *state = NULL;

	if (seg->xport < 0)
		return;
	pthread_mutex_lock(&e->mu);
	state = e->xports[seg->xport].state;
	pthread_mutex_unlock(&e->mu);
	if (state && mc_te_known[seg->xport]->release)
		mc_te_known[seg->xport]->release(state, seg);
	seg->xport = -1;
	seg->xport_ctx = NULL;
}

/* An installed transport ahead of the one serving seg may serve it (see may_match in
 * transport.h): a refresh picks again.  e->mu held. */
static int mc_te_better_xport_may_serve(struct mc_engine *e, const struct mc_te_segment *seg)
{
	int k;

	if (mc_te_forced_slot() >= 0)
		return 0;	/* one transport is all mc_te_pick would choose */
	for (k = 0; k < seg->xport && k < MC_TE_NXPORTS; k++)
		if (e->xports[k].state && e->xports[k].ops->may_match &&
		    e->xports[k].ops->may_match(e->xports[k].state, seg))
			return 1;
	return 0;
}

enum mc_te_open_mode {
	MC_TE_OPEN_CACHED,	/* openSegment: the cached descriptor unless stale */
	MC_TE_OPEN_FETCH,	/* openSegmentNoCache: always fetch */
	MC_TE_OPEN_REFRESH,	/* refresh an open segment; replace it only if it changed */
	MC_TE_OPEN_SAME_HOST,	/* open only if the shm transport serves it (a same-host peer) */
};

/* Two descriptors equal but for their timestamp. */
static int mc_te_desc_same(const struct mc_te_desc *a, const struct mc_te_desc *b)
{
	json_t *x, *y;
	int same;

	if (a->raw == NULL || b->raw == NULL)
		return 0;
	x = json_deep_copy(a->raw);
	y = json_deep_copy(b->raw);
	json_object_del(x, "timestamp");
	json_object_del(y, "timestamp");
	same = json_equal(x, y);
	json_decref(x);
	json_decref(y);
	return same;
}

/* 1 if segment i may be served from the cache; e->mu held. */
static int mc_te_cache_ok(struct mc_engine *e, uint32_t i)
{
	const char *nc = getenv("MC_DISABLE_METACACHE");

	return e->segs[i].open && !e->segs[i].stale && !(nc && *nc && strcmp(nc, "0"));
}

/* The shm transport is installed, may be picked, and would serve seg.  e->mu not held. */
static int mc_te_shm_would_serve(struct mc_engine *e, const struct mc_te_segment *seg)
{
	const struct mc_te_transport_ops *ops = mc_te_known[MC_TE_XPORT_SHM];
	int only = mc_te_forced_slot();
	void *state;

	if (ops == NULL || ops->may_match == NULL || (only >= 0 && only != MC_TE_XPORT_SHM))
		return 0;
	pthread_mutex_lock(&e->mu);
	state = e->xports[MC_TE_XPORT_SHM].state;
	pthread_mutex_unlock(&e->mu);
	return state && ops->may_match(state, seg);
}

static segment_handle_t mc_te_open_one(struct mc_engine *e, const char *name, int mode)
{
	struct mc_te_segment seg, *ns;
	uint32_t i;
	int rc;

	if (e == NULL || name == NULL || *name == '\0' || strlen(name) >= sizeof(seg.name))
		return ERR_INVALID_ARGUMENT;
	if (!strcmp(name, e->server_name))
		return LOCAL_SEGMENT;
	pthread_mutex_lock(&e->mu);
	for (i = 0; mode == MC_TE_OPEN_CACHED && i < e->nsegs; i++)
		if (!strcmp(e->segs[i].name, name) && mc_te_cache_ok(e, i)) {
			pthread_mutex_unlock(&e->mu);
			return (segment_handle_t)(i + 1);
		}
	pthread_mutex_unlock(&e->mu);
	rc = mc_te_meta_fetch(e, name, &seg);
	if (rc) {
		if (mode == MC_TE_OPEN_REFRESH)
			return rc;
		mc_log_warn("transfer engine: cannot open segment %s: %d", name, rc);
		/* A stale entry stays usable (its requests fail while the peer is away). */
		pthread_mutex_lock(&e->mu);
		for (i = 0; mode == MC_TE_OPEN_CACHED && i < e->nsegs; i++)
			if (!strcmp(e->segs[i].name, name) && e->segs[i].open) {
				pthread_mutex_unlock(&e->mu);
				return (segment_handle_t)(i + 1);
			}
		pthread_mutex_unlock(&e->mu);
		return rc;
	}
	if (mode == MC_TE_OPEN_SAME_HOST && !mc_te_shm_would_serve(e, &seg)) {
		mc_te_desc_fini(&seg.desc);
		return MC_TE_NOT_SAME_HOST;
	}
	seg.open = 1;
	seg.fetched_ms = mc_te_now_ms();
	if (mode == MC_TE_OPEN_REFRESH) {
		pthread_mutex_lock(&e->mu);
		for (i = 0; i < e->nsegs; i++)
			if (!strcmp(e->segs[i].name, name) && e->segs[i].open &&
			    !e->segs[i].stale && mc_te_desc_same(&e->segs[i].desc, &seg.desc) &&
			    !mc_te_better_xport_may_serve(e, &e->segs[i])) {
				e->segs[i].fetched_ms = seg.fetched_ms;
				pthread_mutex_unlock(&e->mu);
				mc_te_desc_fini(&seg.desc);
				return (segment_handle_t)(i + 1);
			}
		pthread_mutex_unlock(&e->mu);
		mc_log_info("transfer engine %s: segment %s changed; reconnecting", e->server_name,
			    name);
	}
	mc_te_pick(e, &seg);
	if (seg.xport < 0) {
		mc_log_warn("transfer engine: no installed transport serves segment %s (%s)", name,
			    seg.desc.protocol);
		mc_te_desc_fini(&seg.desc);
		return ERR_INVALID_ARGUMENT;
	}
	mc_log_info("transfer engine %s: segment %s through %s", e->server_name, name,
		    mc_te_known[seg.xport]->name);
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < e->nsegs; i++)
		if (!strcmp(e->segs[i].name, name)) {
			struct mc_te_segment old = e->segs[i];

			e->segs[i] = seg;
			pthread_mutex_unlock(&e->mu);
			if (old.xport != seg.xport || old.xport_ctx != seg.xport_ctx)
				mc_te_unpick(e, &old);
			mc_te_desc_fini(&old.desc);
			return (segment_handle_t)(i + 1);
		}
	ns = e->nsegs < MC_TE_MAX_SEGMENTS ? realloc(e->segs, (e->nsegs + 1) * sizeof(*ns)) : NULL;
	if (ns == NULL) {
		pthread_mutex_unlock(&e->mu);
		mc_te_unpick(e, &seg);
		mc_te_desc_fini(&seg.desc);
		return ERR_MEMORY;
	}
	e->segs = ns;
	e->segs[e->nsegs++] = seg;
	i = e->nsegs;
	pthread_mutex_unlock(&e->mu);
	return (segment_handle_t)i;
}

/* mc_te_open_one, one at a time per name for the modes that may use the cache: a put that
 * arrives while the store's set-up is opening the same segment (fetching its descriptor and
 * attaching to its memory) waits for that open and uses it, instead of fetching and attaching
 * a second time and replacing the first (whose mapping, already built, would be thrown away). */
static segment_handle_t mc_te_open(struct mc_engine *e, const char *name, int mode)
{
	segment_handle_t h;
	int slot = -1, i;
	uint32_t k;

	if (e == NULL || name == NULL || *name == '\0' || strlen(name) >= sizeof(e->opening[0]) ||
	    (mode != MC_TE_OPEN_CACHED && mode != MC_TE_OPEN_SAME_HOST))
		return mc_te_open_one(e, name, mode);
	pthread_mutex_lock(&e->mu);
	for (;;) {
		for (i = 0; i < MC_TE_OPENING && strcmp(e->opening[i], name); i++)
			;
		if (i == MC_TE_OPENING)
			break;
		pthread_cond_wait(&e->open_cv, &e->mu);
		for (k = 0; k < e->nsegs; k++)
			if (!strcmp(e->segs[k].name, name) && mc_te_cache_ok(e, k)) {
				pthread_mutex_unlock(&e->mu);
				return (segment_handle_t)(k + 1);
			}
	}
	for (i = 0; i < MC_TE_OPENING && slot < 0; i++)
		if (e->opening[i][0] == '\0') {
			slot = i;
			snprintf(e->opening[i], sizeof(e->opening[i]), "%s", name);
		}
	pthread_mutex_unlock(&e->mu);
	h = mc_te_open_one(e, name, mode);
	if (slot >= 0) {
		pthread_mutex_lock(&e->mu);
		e->opening[slot][0] = '\0';
		pthread_cond_broadcast(&e->open_cv);
		pthread_mutex_unlock(&e->mu);
	}
	return h;
}

segment_handle_t openSegment(transfer_engine_t engine, const char *segment_name)
{
	return mc_te_open(MC_E(engine), segment_name, MC_TE_OPEN_CACHED);
}

int mc_te_open_same_host(struct mc_engine *e, const char *name)
{
	segment_handle_t h;
	uint32_t i;

	if (e == NULL || name == NULL || *name == '\0' || !strcmp(name, e->server_name))
		return 0;
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < e->nsegs; i++)
		if (!strcmp(e->segs[i].name, name) && mc_te_cache_ok(e, i)) {
			int shm = e->segs[i].xport == MC_TE_XPORT_SHM;

			pthread_mutex_unlock(&e->mu);
			return shm;
		}
	pthread_mutex_unlock(&e->mu);
	h = mc_te_open(e, name, MC_TE_OPEN_SAME_HOST);
	if (h == MC_TE_NOT_SAME_HOST)
		return 0;
	if (h < 0)
		return h;
	pthread_mutex_lock(&e->mu);
	i = e->segs[h - 1].xport == MC_TE_XPORT_SHM;
	pthread_mutex_unlock(&e->mu);
	return (int)i;
}

segment_handle_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name)
{
	return mc_te_open(MC_E(engine), segment_name, MC_TE_OPEN_FETCH);
}

int closeSegment(transfer_engine_t engine, segment_handle_t seg_id)
{
	struct mc_engine *e = MC_E(engine);
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL)
		return rc;
	if (seg_id == LOCAL_SEGMENT)
		return 0;
	pthread_mutex_lock(&e->mu);
	if (seg_id > 0 && (uint32_t)seg_id <= e->nsegs && e->segs[seg_id - 1].open) {
		e->segs[seg_id - 1].open = 0;
		rc = 0;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* Re-fetch every open segment's descriptor; changed ones (a restarted peer: new ports, new
 * buffers) are replaced and reconnected.  API or refresher thread. */
static void mc_te_refresh_all(struct mc_engine *e)
{
	uint32_t i, n;
	char name[256];
	int open;

	pthread_mutex_lock(&e->mu);
	n = e->nsegs;
	pthread_mutex_unlock(&e->mu);
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&e->mu);
		snprintf(name, sizeof(name), "%s", e->segs[i].name);
		open = e->segs[i].open;
		pthread_mutex_unlock(&e->mu);
		if (open)
			mc_te_open(e, name, MC_TE_OPEN_REFRESH);
	}
}

int syncSegmentCache(transfer_engine_t engine)
{
	if (engine == NULL)
		return ERR_INVALID_ARGUMENT;
	mc_te_refresh_all(MC_E(engine));
	return 0;
}

/* MC_TE_METADATA_REFRESH_INTERVAL_SECONDS: re-sync the cache periodically, off the loop. */
static void *mc_te_refresher_main(void *arg)
{
	struct mc_engine *e = arg;
	struct timespec until;

	pthread_mutex_lock(&e->mu);
	while (!e->refresh_stop) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += e->refresh_s;
		while (!e->refresh_stop &&
		       pthread_cond_timedwait(&e->refresh_cv, &e->mu, &until) != ETIMEDOUT)
			;
		if (e->refresh_stop)
			break;
		pthread_mutex_unlock(&e->mu);
		mc_te_refresh_all(e);
		pthread_mutex_lock(&e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

/* Start the refresher when MC_TE_METADATA_REFRESH_INTERVAL_SECONDS > 0 (API thread). */
void mc_te_refresher_start(struct mc_engine *e)
{
	const char *refresh = getenv("MC_TE_METADATA_REFRESH_INTERVAL_SECONDS");

	e->refresh_s = refresh ? atoi(refresh) : 0;
	if (e->refresh_s > 0) {
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&e->refresh_cv, &ca);
		pthread_condattr_destroy(&ca);
		if (pthread_create(&e->refresher, NULL, mc_te_refresher_main, e)) {
			pthread_cond_destroy(&e->refresh_cv);
			e->refresh_s = 0;
			mc_log_warn("transfer engine: no metadata refresh thread");
		}
	}
}

/* Stop and join it; a no-op when it never started. */
void mc_te_refresher_stop(struct mc_engine *e)
{
	if (e->refresh_s > 0) {
		pthread_mutex_lock(&e->mu);
		e->refresh_stop = 1;
		pthread_cond_signal(&e->refresh_cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->refresher, NULL);
		pthread_cond_destroy(&e->refresh_cv);
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client liveness, dormant segments and unhealthy segments.
 *
 * Liveness: a client that mounted (or re-mounted) is Active while it pings within
 * --client_active_ttl_sec; silent longer it is Suspected: its segments get no new replicas and
 * readers are sent to its replicas last, but nothing is dropped, and a ping makes it Active
 * again (a recovery).  Suspected for longer than --client_suspicion_ttl_sec it is Offline: it is
 * told to re-mount (NEED_REMOUNT), its SSD area is unmounted, and its memory segments go dormant.
 *
 * Dormant segments: a dormant segment keeps its replicas on its list and their ranges reserved
 * in its allocator (the client's memory may still hold the bytes), but it is out of the
 * allocation array and out of total_capacity and allocated, and its replicas are not readable.
 * When the same process mounts it again, presenting the segment token it made when it created
 * the segment (a restarted process cannot), the segment is restored: everything still on its
 * list is readable again.  A replica whose object was removed, evicted or overwritten meanwhile
 * was released from the list then, so it is never resurrected; the object record a dormant
 * replica belongs to is the same record (same generation) it had when the segment went dormant.
 * After --dormant_segment_ttl_sec the segment is dropped as an unmount drops one, in bounded
 * steps (mc_master_reap).  Going dormant and coming back cost O(1): readability follows the
 * segment's status, and dormant-only objects stay on the LRU list (eviction passes over them).
 *
 * Unhealthy segments: a client that failed to move bytes to or from a segment reports it
 * (ReportTransferFailure); the segment then gets no new replicas for a backoff
 * (--unhealthy_segment_backoff_sec, doubling while reports recur, at most
 * --unhealthy_segment_max_backoff_sec) and its replicas are listed last.  When the backoff ends
 * it is placed on again (a half-open retry) and stays eligible unless reports come again.
 *
 * Single-threaded: the master's reactor thread.
 */
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "segment/alloc.h"

const char *mc_client_state_name(uint8_t state)
{
	switch (state) {
	case MC_CLIENT_ACTIVE: return "active";
	case MC_CLIENT_SUSPECTED: return "suspected";
	case MC_CLIENT_OFFLINE: return "offline";
	default: return "untracked";
	}
}

static void mc_client_set_state(struct mc_client *c, uint8_t state, int64_t now)
{
	c->state = state;
	c->state_since = now;
}

void mc_client_seen(struct mc_master *m, struct mc_client *c, int mounted)
{
	int64_t now = mc_master_now(m);
	char idbuf[40];

	if (c->state == MC_CLIENT_SUSPECTED) {
		mc_uuid_format(&c->id, idbuf);
		mc_log_notice("client %s recovered: Suspected -> Active after %lld ms", idbuf,
			      (long long)(now - c->state_since));
		m->metrics.recoveries++;
		mc_client_set_state(c, MC_CLIENT_ACTIVE, now);
	} else if (mounted && c->state != MC_CLIENT_ACTIVE) {
		if (c->state == MC_CLIENT_OFFLINE) {
			mc_uuid_format(&c->id, idbuf);
			mc_log_notice("client %s re-mounted: Offline -> Active after %lld ms", idbuf,
				      (long long)(now - c->state_since));
		}
		mc_client_set_state(c, MC_CLIENT_ACTIVE, now);
	}
}

void mc_segment_make_dormant(struct mc_master *m, struct mc_segment *seg, int64_t until,
			     int quiet)
{
	if (seg->status != MC_SEG_OK || seg->is_disk)
		return;
	/* Out of the allocation array and the pool's accounting: its bytes are neither free
	 * space nor capacity while its owner is away. */
	mc_segs_remove(m, seg);
	m->allocated -= mc_alloc_used(seg->alloc);
	seg->status = MC_SEG_DORMANT;
	seg->dormant_until = until;
	seg->dnext = m->dormant;
	m->dormant = seg;
	mc_persist_segment_changed(m, seg);
	if (quiet)
		return;
	mc_log_warn("segment %s (%s) dormant: %llu replicas kept unreadable for %lld s unless it "
		    "is mounted again by the same process",
		    seg->name, seg->endpoint, (unsigned long long)seg->nreps,
		    (long long)((until - mc_master_now(m)) / 1000));
}

void mc_segment_restore(struct mc_master *m, struct mc_segment *seg)
{
	struct mc_segment **pp;

	if (seg->status != MC_SEG_DORMANT)
		return;
	for (pp = &m->dormant; *pp; pp = &(*pp)->dnext)
		if (*pp == seg) {
			*pp = seg->dnext;
			break;
		}
	seg->dnext = NULL;
	seg->status = MC_SEG_OK;
	seg->dormant_until = 0;
	seg->unhealthy_until = 0;
	seg->backoff_ms = 0;
	mc_segs_add(m, seg);
	m->allocated += mc_alloc_used(seg->alloc);
	m->metrics.dormant_segments_restored++;
	m->metrics.dormant_replicas_restored += seg->nreps;
	mc_persist_segment_changed(m, seg);
	mc_log_notice("segment %s (%s) restored with %llu replicas", seg->name, seg->endpoint,
		      (unsigned long long)seg->nreps);
}

/* The client has been Suspected too long, or (why != NULL) another process took its place. */
static void mc_client_go_offline(struct mc_master *m, struct mc_client *c, int64_t now,
				 const char *why)
{
	int64_t ttl = m->cfg.dormant_segment_ttl_sec * 1000;
	struct mc_segment *s;
	char idbuf[40];

	mc_uuid_format(&c->id, idbuf);
	if (why)
		mc_log_warn("client %s silent for %lld ms: Offline (%s)", idbuf,
			    (long long)(now - c->last_ping), why);
	else
		mc_log_warn("client %s silent for %lld ms (active %lld s + suspicion %lld s): "
			    "Offline", idbuf, (long long)(now - c->last_ping),
			    (long long)m->cfg.client_ttl, (long long)m->cfg.client_suspicion_ttl_sec);
	c->ok = 0;
	mc_client_set_state(c, MC_CLIENT_OFFLINE, now);
	m->metrics.offline_transitions++;
	m->metrics.clients_expired++;
	for (s = c->segs; s; s = s->cnext) {
		if (s->status != MC_SEG_OK)
			continue;
		if (!s->is_disk && ttl > 0) {
			mc_segment_make_dormant(m, s, now + ttl, 0);
			continue;
		}
		mc_master_meta_cleanup(m, s->name);
		mc_segment_unmount(m, s, "client offline");
	}
}

int mc_client_silent(const struct mc_master *m, const struct mc_client *c)
{
	return c != NULL && mc_master_now(m) - c->last_ping > MC_CLIENT_SILENT_MS;
}

void mc_segment_take_over_name(struct mc_master *m, struct mc_client *c, struct mc_strv name)
{
	uint32_t i;

again:
	for (i = 0; i < m->nsegs; i++) {
		struct mc_segment *o = m->segs[i];

		if (o->client != c && o->client != NULL && strlen(o->name) == name.n &&
		    !memcmp(o->name, name.p, name.n) && mc_client_silent(m, o->client)) {
			/* Offline changes m->segs: look again from the start. */
			mc_client_go_offline(m, o->client, mc_master_now(m),
					     "a new process mounted its segment name");
			goto again;
		}
	}
}

void mc_master_check_clients(struct mc_master *m)
{
	int64_t now = mc_master_now(m), active = m->cfg.client_ttl * 1000;
	int64_t offline = active + m->cfg.client_suspicion_ttl_sec * 1000;
	struct mc_segment **pp, *s;
	uint32_t b;

	for (b = 0; b < m->nclient_buckets; b++) {
		struct mc_client *c;

		for (c = m->client_buckets[b]; c; c = c->hnext) {
			int64_t silent = now - c->last_ping;
			char idbuf[40];

			if (c->state == MC_CLIENT_ACTIVE && silent > active) {
				mc_uuid_format(&c->id, idbuf);
				mc_log_warn("client %s silent for %lld ms (client_active_ttl_sec %lld): "
					    "Suspected, no new replicas on its segments",
					    idbuf, (long long)silent, (long long)m->cfg.client_ttl);
				mc_client_set_state(c, MC_CLIENT_SUSPECTED, now);
				m->metrics.suspected_transitions++;
			}
			if (c->state == MC_CLIENT_SUSPECTED && silent > offline)
				mc_client_go_offline(m, c, now, NULL);
			/* Forgotten once nothing of it is left to come back to. */
			if (c->state == MC_CLIENT_OFFLINE && c->segs == NULL &&
			    now - c->state_since >= m->cfg.dormant_segment_ttl_sec * 1000)
				mc_client_set_state(c, MC_CLIENT_UNTRACKED, now);
		}
	}
	pp = &m->dormant;
	while ((s = *pp) != NULL) {
		if (now < s->dormant_until) {
			pp = &s->dnext;
			continue;
		}
		m->metrics.dormant_segments_expired++;
		mc_master_meta_cleanup(m, s->name);
		mc_segment_unmount(m, s, "dormant time over");	/* unlinks it from the list */
	}
}

int mc_segment_report_failure(struct mc_master *m, struct mc_strv name, int32_t code,
			      int64_t now, const char *peer)
{
	int64_t base = m->cfg.unhealthy_segment_backoff_sec * 1000;
	int64_t cap = m->cfg.unhealthy_segment_max_backoff_sec * 1000;
	uint32_t i;
	int found = 0;

	if (cap < base)
		cap = base;
	for (i = 0; i < m->nsegs; i++) {
		struct mc_segment *seg = m->segs[i];

		if (strlen(seg->name) != name.n || memcmp(seg->name, name.p, name.n))
			continue;
		found = 1;
		seg->failure_reports++;
		if (now < seg->unhealthy_until)
			continue;	/* the same outage, seen by another transfer */
		/* Failing again soon after its last backoff: the half-open retry failed. */
		if (seg->backoff_ms > 0 && now - seg->unhealthy_until <= cap)
			seg->backoff_ms = seg->backoff_ms * 2 > cap ? cap : seg->backoff_ms * 2;
		else
			seg->backoff_ms = base;
		seg->unhealthy_until = now + seg->backoff_ms;
		m->metrics.unhealthy_marks++;
		mc_log_warn("segment %s (%s) unhealthy for %lld ms: transfer failure %d reported by %s",
			    seg->name, seg->endpoint, (long long)seg->backoff_ms, code, peer);
	}
	return found ? 0 : MC_ERR_SEGMENT_NOT_FOUND;
}

void mc_liveness_counts(const struct mc_master *m, struct mc_liveness_counts *out)
{
	int64_t now = mc_master_now(m);
	const struct mc_segment *s;
	uint32_t b, i;

	memset(out, 0, sizeof(*out));
	for (b = 0; b < m->nclient_buckets; b++) {
		const struct mc_client *c;

		for (c = m->client_buckets[b]; c; c = c->hnext) {
			out->active += c->state == MC_CLIENT_ACTIVE;
			out->suspected += c->state == MC_CLIENT_SUSPECTED;
			out->offline += c->state == MC_CLIENT_OFFLINE;
		}
	}
	for (s = m->dormant; s; s = s->dnext) {
		out->dormant_segments++;
		out->dormant_replicas += s->nreps;
	}
	for (i = 0; i < m->nsegs; i++)
		out->unhealthy_segments += now < m->segs[i]->unhealthy_until;
}

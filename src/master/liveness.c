/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client liveness: a client that has not pinged for --client_ttl seconds is dead.  Its segments
 * become unreadable at once and are unmounted in bounded steps (mc_master_reap), costing time in
 * proportion to that client's replicas, never a scan of the table.  If the client comes back it
 * is told to re-mount (NEED_REMOUNT) and starts empty.
 */
#include "common/log.h"
#include "master/master.h"

void mc_master_check_clients(struct mc_master *m)
{
	int64_t now = mc_master_now(m), ttl = m->cfg.client_ttl * 1000;
	uint32_t b;

	for (b = 0; b < m->nclient_buckets; b++) {
		struct mc_client *c;

		for (c = m->client_buckets[b]; c; c = c->hnext) {
			struct mc_segment *s;
			char idbuf[40];
			int any = 0;

			if (now - c->last_ping <= ttl)
				continue;
			for (s = c->segs; s; s = s->cnext)
				any |= s->status == MC_SEG_OK;
			if (!any && !c->ok)
				continue;
			mc_uuid_format(&c->id, idbuf);
			mc_log_warn("client %s silent for %lld ms (client_ttl %lld s): declaring it dead",
				    idbuf, (long long)(now - c->last_ping), (long long)m->cfg.client_ttl);
			c->ok = 0;
			m->metrics.clients_expired++;
			for (s = c->segs; s; s = s->cnext) {
				mc_master_meta_cleanup(m, s->name);
				mc_segment_unmount(m, s, "client expired");
			}
		}
	}
}

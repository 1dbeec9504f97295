/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_KV_EVENTS_H
#define MC_MASTER_KV_EVENTS_H

/*
 * KV cache events (--enable_kv_events): every object that becomes readable is published as
 * "stored", every published object that goes (removed, evicted, dropped with its client) as
 * "removed", over a ZeroMQ PUB socket in upstream's format, so a router can follow which blocks
 * the cache holds.  See kv_events.c.
 */
#include <stdint.h>

#include "master/master.h"

struct mc_kv_stats {
	int enabled;
	uint64_t published_batches;
	uint64_t published_events;
	uint64_t dropped_events;
	uint64_t skipped_unparsed_keys;
	uint64_t queued;
};

/* Open and bind the publisher (no-op without --enable_kv_events).  0, or -1 with a line
 * logged (a bad endpoint, a port in use, a build without libzmq). */
int mc_kv_events_init(struct mc_master *m);
/* Publish what is queued, stop the publisher and free it. */
void mc_kv_events_fini(struct mc_master *m);
/* Object o became readable through a PutEnd of replica type rtype. */
void mc_kv_event_stored(struct mc_master *m, struct mc_object *o, uint8_t rtype);
void mc_kv_events_stats(const struct mc_master *m, struct mc_kv_stats *out);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MASTER_DYN_REPLICATION_H
#define MC_MASTER_DYN_REPLICATION_H

/* Dynamic MEMORY replication of hot keys (--dynamic_replication_mode); see
 * dyn_replication.c. */
#include <stdint.h>

#include "master/master.h"

void mc_dynrep_init(struct mc_master *m);
void mc_dynrep_fini(struct mc_master *m);
/* A GetReplicaList read o (readable): count it; a hot key may get a copy task. */
void mc_dynrep_on_read(struct mc_master *m, struct mc_object *o);
/* The heat window ends: the counts start over (the 1 s tick). */
void mc_dynrep_tick(struct mc_master *m);
/* Keys found hot, copy tasks made for them, hot keys passed over for a cooldown (the
 * metrics). */
void mc_dynrep_counts(const struct mc_master *m, uint64_t *hot, uint64_t *tasks,
		      uint64_t *cooling);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots of the replicated table and compaction of the log (see ha.h).
 */
#include "master/ha.h"

int mc_ha_snap_init(struct mc_ha *ha)
{
	(void)ha;
	return 0;
}

void mc_ha_snap_fini(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_snap_restore(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_snap_tick(struct mc_ha *ha)
{
	(void)ha;
}

int mc_ha_snap_busy(const struct mc_ha *ha)
{
	(void)ha;
	return 0;
}

uint64_t mc_ha_snap_first(const struct mc_ha *ha)
{
	(void)ha;
	return 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election on redis (see ha.h).
 */
#include <stdio.h>

#include "master/ha.h"

int mc_ha_redis_init(struct mc_ha *ha, const char *connstring, char *err, size_t n)
{
	(void)ha;
	(void)connstring;
	snprintf(err, n, "redis is not supported yet");
	return -1;
}

void mc_ha_redis_fini(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_campaign(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_keepalive(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_read_view(struct mc_ha *ha)
{
	(void)ha;
}

void mc_ha_redis_resign(struct mc_ha *ha)
{
	(void)ha;
}

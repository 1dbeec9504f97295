/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's clock: monotonic milliseconds, read by every module through mc_master_now so
 * that tests can run the master on a clock of their own (master->clock_ms).
 */
#include <time.h>

#include "master/master.h"

int64_t mc_master_now(const struct mc_master *m)
{
	struct timespec ts;

	if (m->clock_ms)
		return m->clock_ms(m->clock_arg);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

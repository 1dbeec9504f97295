/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checks of the upstream master flags in master_flags.h that name hardware or features this
 * build has not: each is accepted at its default (so upstream's configuration files and
 * command lines that spell the defaults out keep working) and refused otherwise, with the
 * missing piece named.  Runs at start-up and on SIGHUP.
 */
#include <stdio.h>

#include "master/master_flags.h"

int mc_master_flags_check(const struct mc_master_flags *f, char *err, size_t n)
{
	static const char nof[] = "NVMe-oF SSD pools need SPDK's NVMe-oF transport, which this "
				  "build does not have; leave the nof_ flags at their defaults";
	static const char weight[] = "the managed model-weight store (BeginWeightImport and its "
				     "RPCs) is not part of this build; leave the weight_ flags at "
				     "their defaults";
	const struct {
		const char *flag;
		int is_default;
		const char *why;
	} checks[] = {
		{ "enable_cxl", !f->enable_cxl,
		  "CXL memory segments need a DAX device allocator this build does not have; "
		  "leave it false" },
		{ "nof_eviction_ratio", f->nof_eviction_ratio == 0.05, nof },
		{ "nof_eviction_high_watermark_ratio", f->nof_eviction_high_watermark_ratio == 0.90,
		  nof },
		{ "nof_heartbeat_interval_sec", f->nof_heartbeat_interval_sec == 10, nof },
		{ "nof_heartbeat_probe_timeout_ms", f->nof_heartbeat_probe_timeout_ms == 1000, nof },
		{ "nof_heartbeat_failures_threshold", f->nof_heartbeat_failures_threshold == 3, nof },
		{ "weight_import_idle_timeout_ms", f->weight_import_idle_timeout_ms == 300000, weight },
		{ "weight_management_oplog_capability_confirmed",
		  !f->weight_management_oplog_capability_confirmed, weight },
	};
	size_t i;

	for (i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		if (!checks[i].is_default) {
			snprintf(err, n, "--%s: %s", checks[i].flag, checks[i].why);
			return -1;
		}
	return mc_log_opts_check(&f->log, err, n);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk tiers' and the store's fault-injection test hook (contract in fault.h).  The specification is parsed
 * once, by a constructor, before any thread exists; afterwards each point's counters are only
 * touched with atomic operations, so any thread may hit a point.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssd/fault.h"

int mc_fault_armed;

struct mc_fault_rule {
	int err;		/* -errno or MC_FAULT_SHORT; 0: no rule */
	long skip;		/* calls left to pass first */
	long count;		/* failures left; -1: forever */
};

static struct mc_fault_rule mc_fault_rules[MC_FAULT_NPOINTS];

static const char *const mc_fault_names[MC_FAULT_NPOINTS] = {
	"ssd_write", "ssd_fsync", "ssd_rename", "fs_write", "fs_fsync", "fs_rename", "read_flip",
	"offload_flip", "promote_flip", "put_write",
};

static int mc_fault_errno(const char *s)
{
	static const struct {
		const char *name;
		int err;
	} tab[] = {
		{ "ENOSPC", -ENOSPC }, { "EIO", -EIO }, { "EROFS", -EROFS },
		{ "EDQUOT", -EDQUOT }, { "short", MC_FAULT_SHORT }, { "flip", MC_FAULT_FLIP },
	};
	size_t i;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (!strcmp(s, tab[i].name))
			return tab[i].err;
	return 0;
}

/* Parse one "POINT:ERROR:COUNT[:SKIP]".  0 or -1. */
static int mc_fault_rule_parse(char *spec)
{
	char *f[4] = { NULL, NULL, NULL, NULL }, *save = NULL, *end;
	int n = 0, p, err;
	long count, skip = 0;

	for (char *t = strtok_r(spec, ":", &save); t && n < 4; t = strtok_r(NULL, ":", &save))
		f[n++] = t;
	if (n < 3 || strtok_r(NULL, ":", &save) != NULL)
		return -1;
	for (p = 0; p < MC_FAULT_NPOINTS && strcmp(f[0], mc_fault_names[p]); p++)
		;
	err = mc_fault_errno(f[1]);
	count = strtol(f[2], &end, 10);
	if (p == MC_FAULT_NPOINTS || err == 0 || *end || count < 0)
		return -1;
	if (f[3]) {
		skip = strtol(f[3], &end, 10);
		if (*end || skip < 0)
			return -1;
	}
	mc_fault_rules[p].err = err;
	mc_fault_rules[p].skip = skip;
	mc_fault_rules[p].count = count ? count : -1;
	return 0;
}

__attribute__((constructor)) static void mc_fault_init(void)
{
	const char *v = getenv("MC_TEST_FAULT");
	char *copy, *save = NULL, *tok;

	if (v == NULL || *v == '\0' || (copy = strdup(v)) == NULL)
		return;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (mc_fault_rule_parse(tok) != 0)
			fprintf(stderr, "MC_TEST_FAULT: ignoring malformed rule \"%s\"\n", tok);
	free(copy);
	for (int p = 0; p < MC_FAULT_NPOINTS; p++)
		if (mc_fault_rules[p].err)
			mc_fault_armed = 1;
}

int mc_fault_check(enum mc_fault_point p)
{
	struct mc_fault_rule *r = &mc_fault_rules[p];
	long left;

	if (r->err == 0)
		return 0;
	if (__atomic_load_n(&r->skip, __ATOMIC_RELAXED) > 0 &&
	    __atomic_sub_fetch(&r->skip, 1, __ATOMIC_RELAXED) >= 0)
		return 0;
	left = __atomic_load_n(&r->count, __ATOMIC_RELAXED);
	if (left < 0)
		return r->err;
	while (left > 0)
		if (__atomic_compare_exchange_n(&r->count, &left, left - 1, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return r->err;
	return 0;
}

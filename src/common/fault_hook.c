/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The trigger of test hooks' fault injection (fault_hook.h): which point, how many times, and
 * whether a flag file gates it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fault_hook.h"
#include "common/log.h"

int mc_fault_hook_read(struct mc_fault_hook *h, const char *env, const char *const *names)
{
	const char *spec = getenv(env), *colon;
	char fenv[128], list[256] = "";
	size_t n, used = 0;
	int i;

	h->point = -1;
	h->count = -1;
	h->flag_file = NULL;
	if (spec == NULL || spec[0] == '\0')
		return 0;
	colon = strchr(spec, ':');
	n = colon ? (size_t)(colon - spec) : strlen(spec);
	for (i = 0; names[i]; i++)
		if (strlen(names[i]) == n && strncmp(spec, names[i], n) == 0)
			break;
	if (names[i] == NULL) {
		for (i = 0; names[i] && used < sizeof(list); i++)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
						 i ? ", " : "", names[i]);
		mc_log_err("%s=%s: unknown fault point (%s)", env, spec, list);
		return -1;
	}
	h->point = i;
	h->count = colon ? strtol(colon + 1, NULL, 10) : -1;
	snprintf(fenv, sizeof(fenv), "%s_FILE", env);
	h->flag_file = getenv(fenv);
	if (h->flag_file && h->flag_file[0] == '\0')
		h->flag_file = NULL;
	return 1;
}

int mc_fault_hook_fires(struct mc_fault_hook *h, int point)
{
	struct stat sb;

	if (h->point < 0 || h->point != point)
		return 0;
	if (h->flag_file && stat(h->flag_file, &sb) != 0)
		return 0;
	if (h->count == 0)
		return 0;
	if (h->count > 0)
		h->count--;
	return 1;
}

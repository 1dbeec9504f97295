/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process memory gauges for /metrics (procmem.h): one reading of /proc/self/status per scrape,
 * a few hundred bytes, on whichever loop serves the scrape.  The kernel reports kB; the series
 * are bytes, as upstream's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "reactor/procmem.h"

static const struct {
	const char *field;	/* in /proc/<pid>/status, with its colon */
	size_t off;
	const char *metric;
	const char *help;
} mc_procmem_fields[] = {
	{ "VmRSS:", offsetof(struct mc_procmem, rss), "mooncake_process_rss_bytes",
	  "Resident set size of the process" },
	{ "VmHWM:", offsetof(struct mc_procmem, rss_peak), "mooncake_process_rss_peak_bytes",
	  "Peak resident set size since process start" },
	{ "RssAnon:", offsetof(struct mc_procmem, rss_anon), "mooncake_process_rss_anon_bytes",
	  "Resident anonymous memory of the process" },
	{ "RssFile:", offsetof(struct mc_procmem, rss_file), "mooncake_process_rss_file_bytes",
	  "Resident file-backed memory of the process" },
	{ "RssShmem:", offsetof(struct mc_procmem, rss_shmem), "mooncake_process_rss_shmem_bytes",
	  "Resident shared memory of the process" },
	{ "VmSize:", offsetof(struct mc_procmem, vsize), "mooncake_process_vsize_bytes",
	  "Virtual address space size of the process" },
	{ "VmSwap:", offsetof(struct mc_procmem, swap), "mooncake_process_swap_bytes",
	  "Swapped-out memory of the process" },
};

#define MC_PROCMEM_N (sizeof(mc_procmem_fields) / sizeof(mc_procmem_fields[0]))

int mc_procmem_read(struct mc_procmem *out, const char *path)
{
	char line[256];
	FILE *f;
	size_t i;

	memset(out, 0, sizeof(*out));
	f = fopen(path ? path : "/proc/self/status", "re");
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL)
		for (i = 0; i < MC_PROCMEM_N; i++) {
			size_t n = strlen(mc_procmem_fields[i].field);
			unsigned long long kb;

			if (strncmp(line, mc_procmem_fields[i].field, n) == 0 &&
			    sscanf(line + n, "%llu", &kb) == 1 && kb <= UINT64_MAX / 1024) {
				*(uint64_t *)(void *)((char *)out + mc_procmem_fields[i].off) =
					(uint64_t)kb * 1024;
				break;
			}
		}
	fclose(f);
	return 0;
}

void mc_prom_u64(struct evbuffer *b, const char *name, const char *type, const char *help,
		 uint64_t v)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name,
			    type, name, v);
}

void mc_procmem_prom(struct evbuffer *b)
{
	struct mc_procmem pm;
	size_t i;

	if (mc_procmem_read(&pm, NULL) != 0)
		return;
	for (i = 0; i < MC_PROCMEM_N; i++)
		mc_prom_u64(b, mc_procmem_fields[i].metric, "gauge", mc_procmem_fields[i].help,
			    *(const uint64_t *)(const void *)((const char *)&pm +
							      mc_procmem_fields[i].off));
}

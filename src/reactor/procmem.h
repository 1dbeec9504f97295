/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_REACTOR_PROCMEM_H
#define MC_REACTOR_PROCMEM_H

/*
 * The memory a daemon process uses, from /proc/self/status, and its Prometheus series
 * mooncake_process_{rss,rss_anon,rss_file,rss_shmem,rss_peak,swap,vsize}_bytes (upstream's
 * names), which every daemon that serves /metrics appends.
 */
#include <stdint.h>

struct evbuffer;

struct mc_procmem {
	uint64_t rss;		/* VmRSS */
	uint64_t rss_anon;	/* RssAnon */
	uint64_t rss_file;	/* RssFile */
	uint64_t rss_shmem;	/* RssShmem */
	uint64_t rss_peak;	/* VmHWM */
	uint64_t swap;		/* VmSwap */
	uint64_t vsize;		/* VmSize */
};

/* Fill out from the given status file (NULL: /proc/self/status), in bytes; fields the file
 * lacks stay 0.  0, or -errno when the file cannot be read. */
int mc_procmem_read(struct mc_procmem *out, const char *path);
/* Append the seven gauges (HELP, TYPE and value each) to b; nothing when /proc cannot be
 * read. */
void mc_procmem_prom(struct evbuffer *b);
/* Append one series without labels: its HELP and TYPE (counter or gauge) lines and its value. */
void mc_prom_u64(struct evbuffer *b, const char *name, const char *type, const char *help,
		 uint64_t v);

#endif

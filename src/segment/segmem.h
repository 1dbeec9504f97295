/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_SEGMEM_H
#define MC_SEGMEM_H

/*
 * Memory behind a segment (or any buffer the store and the engine own): a memfd mapped
 * MAP_SHARED, so a same-host process can map the very same pages through the descriptor,
 * optionally backed by huge pages (hugetlb, or transparent huge pages for shared memory where
 * the kernel offers them on request), optionally placed on NUMA nodes, and populated (every page
 * allocated and zeroed) by a background thread from the lowest address upward, so the first
 * write into it costs what the hundredth does.  The master's allocator hands out low offsets
 * first, so the memory it gives out first is the memory populated first.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MC_SEGMEM_LOC_ANY 0		/* no placement: the kernel's default policy */
#define MC_SEGMEM_LOC_NODES 1		/* bind to the nodes in the mask (one node, or several) */
#define MC_SEGMEM_LOC_INTERLEAVE 2	/* interleave over the nodes in the mask */
#define MC_SEGMEM_MAX_NODES 1024

struct mc_segmem_opts {
	uint64_t hugepage_size;		/* 0: normal pages; 2 MiB or 1 GiB: hugetlb pages */
	int hugepage_fallback;		/* a hugetlb pool too small: normal pages, with a warning */
	int populate;			/* populate in the background (1) or leave pages to the
					 * first write (0) */
	int gather_thp;			/* populate as 2 MiB transparent huge pages where the kernel
					 * grants them on request (segments, which same-host
					 * processes map; population on, no placement) */
	int idle;			/* populate at idle priority, by writing each page (memory
					 * only this process's own requests use: a client's local
					 * buffer; see mc_segmem_create) */
	const int64_t *active_ms;	/* with idle: when the owner's requests last ran (atomic,
					 * monotonic ms, 0: never); population waits until that is
					 * MC_SEGMEM_QUIET_MS past.  NULL: no such wait */
	int loc_mode;			/* MC_SEGMEM_LOC_* */
	unsigned long nodes[MC_SEGMEM_MAX_NODES / (8 * sizeof(unsigned long))];
	char location[128];		/* as the operator wrote it, for log lines */
};

struct mc_segmem {
	uint8_t *base;
	uint64_t size;			/* bytes asked for */
	uint64_t map_len;		/* bytes mapped (size rounded up to the page size) */
	uint64_t page_size;		/* 4 KiB, or the hugetlb page size */
	int fd;				/* the memfd (owned) */
	int hugetlb;
	int idle;			/* populating at idle priority (mc_segmem_opts.idle) */
	const int64_t *active_ms;	/* mc_segmem_opts.active_ms */
	int collapse;			/* population gathers 2 MiB into transparent huge pages
					 * (the populating thread's; 0 once the kernel refused) */
	uint64_t populated;		/* bytes populated from base upward (atomic) */
	int stop;			/* ask the populating thread to stop (atomic) */
	int thread_running;
	pthread_t thread;
	int64_t started_ms, done_ms;	/* monotonic: creation, population finished (0: not yet) */
};

/* Defaults (normal pages, populate, no placement) overridden by the environment:
 * MC_STORE_USE_HUGEPAGE, MC_STORE_HUGEPAGE_SIZE, MC_STORE_HUGEPAGE_FALLBACK, MC_STORE_POPULATE,
 * MC_STORE_SEGMENT_LOCATION.  Returns 0, or -EINVAL with one line in err naming the variable. */
int mc_segmem_opts_env(struct mc_segmem_opts *o, char *err, size_t errlen);

/* Set the huge page size from "2MB"/"1GB" (also "2m", "2097152", case-insensitive).  0 or
 * -EINVAL. */
int mc_segmem_parse_hugepage_size(const char *s, uint64_t *out);

/* Parse a location: "" or "*" (no placement), "cpu:N" (node N), "cpu:N,M,..." or "cpu:N-M"
 * (bound to those nodes), "interleave" (every node with memory), "interleave:N,M" (those).
 * Checks the nodes exist when the host lists them (/sys/devices/system/node).  0, or -EINVAL
 * with one line in err. */
int mc_segmem_parse_location(const char *s, struct mc_segmem_opts *o, char *err, size_t errlen);

/* Create len bytes of memory as o says (name labels the memfd).  The memory is mapped and
 * placed; population, when asked, runs in a thread started here, 2 MiB per call, so the
 * process's mmap lock, which each call holds, is never held for long.  With o->idle that
 * thread runs only where a core has nothing else to do (SCHED_IDLE) and allocates pages by
 * writing them, which holds no lock of the process across pages: the population of a buffer
 * the process itself reads and writes never delays its own first requests, and a page it
 * writes before population reached it costs its fault as it would without.  Returns 0, or a
 * negative errno with one line in err (a hugetlb pool too small names the shortfall and the sysctl that
 * reserves it).  On success the caller owns m and releases it with mc_segmem_free. */
int mc_segmem_create(struct mc_segmem *m, uint64_t len, const char *name,
		     const struct mc_segmem_opts *o, char *err, size_t errlen);

/* Bytes of m that have pages so far (any thread; NULL: 0): what population reached, or what
 * writes allocated when more; m->size once done. */
uint64_t mc_segmem_populated(const struct mc_segmem *m);

/* Wait until population finished (tests, benchmarks). */
void mc_segmem_wait(struct mc_segmem *m);

/* Stop the populating thread, unmap, close the fd.  NULL base is a no-op. */
void mc_segmem_free(struct mc_segmem *m);

/* mmap(2) of len bytes of fd from off, read-write and shared (MAP_NORESERVE if noreserve), at
 * an address that lies as far into a 2 MiB boundary as off does, so that transparent huge
 * pages of the file are mapped 2 MiB per entry (the kernel aligns shared memory itself only
 * where shmem_enabled offers huge pages).  hugetlbfs files and mappings under 2 MiB get a
 * plain mmap.  Returns the address or MAP_FAILED (errno set); munmap(p, len) releases it. */
void *mc_segmem_map_shared(int fd, uint64_t off, size_t len, int noreserve);

/* Populate [p, p+len) of any mapping now, in the calling thread (page-aligned internally).
 * Returns 0 or a negative errno. */
int mc_segmem_populate_range(void *p, uint64_t len);

/* Another process's segment mapped here (p, len: our MAP_SHARED mapping of its memfd fd): a
 * first write through a fresh mapping still faults once per 4 KiB page to map the page, even
 * when the owner populated it, and a write fault maps one page where a read population maps
 * sixteen, so a writer that faults its own pages writes at a fraction of memory speed.  This
 * maps the owner's pages into ours in a thread, from the lowest address up (the master hands
 * out a fresh segment's low offsets first), following the owner's population: only pages the
 * owner has are mapped, so an owner that does not populate keeps its memory unallocated.  Not
 * needed for hugetlb memory (its faults map 2 MB at once): returns NULL then, and when out of
 * memory.  p maps fd from offset 0; fd is duplicated (the caller keeps its own), so that
 * one fstat tells once the owner has every page (then no page needs looking up before it is
 * mapped).  MC_SEGMEM_NO_PAGEMAP=1 makes the check that read faults map 64 KiB (through
 * /proc/self/pagemap) fail, as where that file cannot be read: the pages are then mapped with
 * MADV_POPULATE_READ (tests of that fallback).  Where the owner's pages are transparent
 * huge pages and p lies on the owner's 2 MiB boundaries (mc_segmem_map_shared), each fault maps
 * 2 MiB and the thread is done within milliseconds. */
struct mc_segmem_peer;
struct mc_segmem_peer *mc_segmem_peer_map(void *p, uint64_t len, int fd);
/* Before a copy into or out of [p, p+len) of pm's mapping, on the copying thread: map what the
 * thread has not mapped yet, a 2 MiB region at a time where the owner has all of its pages
 * (then that region costs nothing more to later copies), else just the pages of the copy.  Read
 * faults, one per 64 KiB (or per 2 MiB where the owner's pages are huge), so it costs about what
 * the copy does and a seventh of the write faults it saves.  NULL pm: no-op. */
void mc_segmem_peer_touch(struct mc_segmem_peer *pm, const void *p, uint64_t len);
/* Stop and free (before the caller unmaps p).  NULL is a no-op. */
void mc_segmem_peer_stop(struct mc_segmem_peer *pm);

/* The CPUs of the nodes in o's mask, as an affinity for the calling thread (so the workers that
 * move a segment's bytes run beside its memory).  0, or a negative errno; no-op without
 * placement. */
int mc_segmem_bind_cpus(const struct mc_segmem_opts *o);

#endif

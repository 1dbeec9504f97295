/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for segment memory (src/segment/segmem.c): location and huge page size parsing,
 * the environment's settings, and a small segment populated in the background (or not, when
 * population is off) whose figure reaches its size, shared through its memfd, and another
 * mapping of it whose page tables the peer mapping fills (read from /proc/self/pagemap);
 * population gathering 2 MiB into transparent huge pages where the kernel grants it, keeping
 * what was written before, and mappings on 2 MiB boundaries that map those pages whole.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "segment/segmem.h"
#include "tap.h"

static int fallback_logged;	/* the map-ahead said it maps with MADV_POPULATE_READ */

static void capture_sink(void *arg, int level, const char *line)
{
	(void)arg;
	(void)level;
	if (strstr(line, "mapped with MADV_POPULATE_READ"))
		__atomic_store_n(&fallback_logged, 1, __ATOMIC_RELAXED);
}

static int node_set(const struct mc_segmem_opts *o, unsigned n)
{
	return !!(o->nodes[n / (8 * sizeof(unsigned long))] &
		  (1ul << (n % (8 * sizeof(unsigned long)))));
}

static void test_location(void)
{
	struct mc_segmem_opts o;
	char err[512];
	struct stat sb;
	int have_node1 = stat("/sys/devices/system/node/node1", &sb) == 0;

	memset(&o, 0, sizeof(o));
	ok(mc_segmem_parse_location("*", &o, err, sizeof(err)) == 0 &&
	   o.loc_mode == MC_SEGMEM_LOC_ANY, "'*' places nothing");
	ok(mc_segmem_parse_location("", &o, err, sizeof(err)) == 0 &&
	   o.loc_mode == MC_SEGMEM_LOC_ANY, "'' places nothing");
	ok(mc_segmem_parse_location("cpu:0", &o, err, sizeof(err)) == 0 &&
	   o.loc_mode == MC_SEGMEM_LOC_NODES && node_set(&o, 0) && !node_set(&o, 1),
	   "cpu:0 binds to node 0 only");
	ok(mc_segmem_parse_location("cpu:0-0", &o, err, sizeof(err)) == 0 && node_set(&o, 0),
	   "cpu:0-0 is a range of one");
	ok(mc_segmem_parse_location("interleave", &o, err, sizeof(err)) == 0 &&
	   o.loc_mode == MC_SEGMEM_LOC_INTERLEAVE && node_set(&o, 0),
	   "interleave takes every node with memory (node 0 here)");
	ok(mc_segmem_parse_location("interleave:0", &o, err, sizeof(err)) == 0 &&
	   o.loc_mode == MC_SEGMEM_LOC_INTERLEAVE && node_set(&o, 0), "interleave:0");
	if (have_node1) {
		ok(mc_segmem_parse_location("cpu:0,1", &o, err, sizeof(err)) == 0 &&
		   node_set(&o, 0) && node_set(&o, 1), "cpu:0,1 on a host with two nodes");
	} else {
		ok(mc_segmem_parse_location("cpu:1", &o, err, sizeof(err)) == -EINVAL &&
		   strstr(err, "no NUMA node 1"), "cpu:1 on a one-node host: %s", err);
	}
	ok(mc_segmem_parse_location("cpu:999", &o, err, sizeof(err)) == -EINVAL &&
	   strstr(err, "cpu:999"), "a node this host lacks is refused: %s", err);
	ok(mc_segmem_parse_location("cpu:5000", &o, err, sizeof(err)) == -EINVAL,
	   "a node past the mask is refused");
	ok(mc_segmem_parse_location("cpu:", &o, err, sizeof(err)) == -EINVAL, "cpu: without a node");
	ok(mc_segmem_parse_location("cpu:x", &o, err, sizeof(err)) == -EINVAL &&
	   strstr(err, "expected"), "cpu:x: %s", err);
	ok(mc_segmem_parse_location("cpu:1-0", &o, err, sizeof(err)) == -EINVAL,
	   "a backwards range is refused");
	ok(mc_segmem_parse_location("cpu:0,", &o, err, sizeof(err)) == 0,
	   "a trailing comma is tolerated");
	ok(mc_segmem_parse_location("cuda:0", &o, err, sizeof(err)) == -EINVAL,
	   "cuda:0 is not a place for host memory");
	ok(mc_segmem_parse_location("node0", &o, err, sizeof(err)) == -EINVAL, "node0 is refused");
}

static void test_hugepage_size(void)
{
	uint64_t v = 0;

	ok(mc_segmem_parse_hugepage_size("2MB", &v) == 0 && v == 2u << 20, "2MB");
	ok(mc_segmem_parse_hugepage_size("1GB", &v) == 0 && v == 1u << 30, "1GB");
	ok(mc_segmem_parse_hugepage_size("2m", &v) == 0 && v == 2u << 20, "2m");
	ok(mc_segmem_parse_hugepage_size("4MB", &v) == -EINVAL, "4MB is no x86 huge page size");
	ok(mc_segmem_parse_hugepage_size("", &v) == -EINVAL, "empty");
}

static void test_env(void)
{
	struct mc_segmem_opts o;
	char err[512];

	unsetenv("MC_STORE_USE_HUGEPAGE");
	unsetenv("MC_STORE_HUGEPAGE_SIZE");
	unsetenv("MC_STORE_POPULATE");
	unsetenv("MC_STORE_SEGMENT_LOCATION");
	ok(mc_segmem_opts_env(&o, err, sizeof(err)) == 0 && o.populate == 1 &&
	   o.hugepage_size == 0 && o.loc_mode == MC_SEGMEM_LOC_ANY,
	   "defaults: populate, normal pages, no placement");
	setenv("MC_STORE_USE_HUGEPAGE", "1", 1);
	setenv("MC_STORE_HUGEPAGE_SIZE", "1GB", 1);
	setenv("MC_STORE_POPULATE", "0", 1);
	ok(mc_segmem_opts_env(&o, err, sizeof(err)) == 0 && o.populate == 0 &&
	   o.hugepage_size == 1u << 30, "MC_STORE_USE_HUGEPAGE=1 MC_STORE_HUGEPAGE_SIZE=1GB "
	   "MC_STORE_POPULATE=0");
	setenv("MC_STORE_HUGEPAGE_SIZE", "3MB", 1);
	ok(mc_segmem_opts_env(&o, err, sizeof(err)) == -EINVAL &&
	   strstr(err, "MC_STORE_HUGEPAGE_SIZE") && strstr(err, "3MB"), "%s", err);
	unsetenv("MC_STORE_HUGEPAGE_SIZE");
	setenv("MC_STORE_USE_HUGEPAGE", "perhaps", 1);
	ok(mc_segmem_opts_env(&o, err, sizeof(err)) == -EINVAL &&
	   strstr(err, "MC_STORE_USE_HUGEPAGE"), "%s", err);
	unsetenv("MC_STORE_USE_HUGEPAGE");
	unsetenv("MC_STORE_POPULATE");
	setenv("MC_STORE_SEGMENT_LOCATION", "cpu:999", 1);
	ok(mc_segmem_opts_env(&o, err, sizeof(err)) == -EINVAL &&
	   strstr(err, "MC_STORE_SEGMENT_LOCATION"), "%s", err);
	unsetenv("MC_STORE_SEGMENT_LOCATION");
}

static void test_create(void)
{
	struct mc_segmem_opts o = { .populate = 1 };
	struct mc_segmem m, off;
	char err[512];
	uint8_t *peer;
	uint64_t len = (24u << 20) + 123;	/* not a multiple of the page size */

	ok(mc_segmem_create(&m, len, "test-segmem", &o, err, sizeof(err)) == 0,
	   "a populated segment of %llu bytes", (unsigned long long)len);
	mc_segmem_wait(&m);
	ok(mc_segmem_populated(&m) == len, "population reaches the size (%llu)",
	   (unsigned long long)mc_segmem_populated(&m));
	ok(m.done_ms >= m.started_ms && m.done_ms > 0, "population finished and was timed");
	m.base[len - 1] = 0x5a;
	peer = mmap(NULL, m.map_len, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	ok(peer != MAP_FAILED && peer[len - 1] == 0x5a,
	   "another mapping of the memfd sees the same bytes");
	if (peer != MAP_FAILED)
		munmap(peer, m.map_len);
	mc_segmem_free(&m);
	ok(m.base == NULL && m.fd == -1, "freed");
	mc_segmem_free(&m);	/* twice is harmless */

	o.populate = 0;
	ok(mc_segmem_create(&off, 8u << 20, "test-segmem-off", &o, err, sizeof(err)) == 0,
	   "population off");
	ok(mc_segmem_populated(&off) == 0, "nothing populated before the first write");
	memset(off.base, 1, 3 * 4096);
	ok(mc_segmem_populated(&off) >= 3 * 4096 && mc_segmem_populated(&off) < (8u << 20),
	   "written pages count as populated (%llu)",
	   (unsigned long long)mc_segmem_populated(&off));
	mc_segmem_free(&off);

	/* Stopping a population under way (a segment freed at once) must not crash or leak. */
	o.populate = 1;
	ok(mc_segmem_create(&m, 256u << 20, "test-segmem-stop", &o, err, sizeof(err)) == 0,
	   "a 256 MiB segment freed while populating");
	mc_segmem_free(&m);
	ok(mc_segmem_create(&m, 0, "x", &o, err, sizeof(err)) == -EINVAL, "0 bytes refused");
	ok(mc_segmem_populate_range(NULL, 0) == 0, "an empty range populates nothing");
}

/* The scheduling policy (field 41 of /proc/self/task/TID/stat) of this process's thread named
 * comm, or -1 when there is none. */
static int thread_policy(const char *comm)
{
	char path[300], line[1024], name[32];
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int policy = -1;
	FILE *f;

	while (d && policy < 0 && (de = readdir(d)) != NULL) {
		const char *p;
		int i;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		name[0] = '\0';
		if (fgets(name, sizeof(name), f) == NULL)
			name[0] = '\0';
		fclose(f);
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, comm))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) != NULL) {
			/* Fields after the command: 3 (state) is the first; policy is 41. */
			for (i = 2; i < 41 && p; i++)
				p = strchr(p + 1, ' ');
			if (p)
				policy = atoi(p + 1);
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return policy;
}

/* Memory this process's own requests use: population at idle priority, page by page. */
static void test_idle(void)
{
	struct mc_segmem_opts o = { .populate = 1, .idle = 1 };
	struct mc_segmem m;
	uint64_t len = 256u << 20, i, bad = 0;
	char err[512];
	int policy;

	ok(mc_segmem_create(&m, len, "test-segmem-idle", &o, err, sizeof(err)) == 0,
	   "a 256 MiB buffer populated at idle priority");
	for (i = 0; i < 200 && (policy = thread_policy("mc-populate")) != SCHED_IDLE &&
		    mc_segmem_populated(&m) < len; i++)
		usleep(1000);
	ok(policy == SCHED_IDLE, "its populating thread runs under SCHED_IDLE (policy %d)", policy);
	for (i = 0; i < len; i += 1u << 20)
		m.base[i + 17] = (uint8_t)(i >> 20);
	mc_segmem_wait(&m);
	for (i = 0; i < len; i += 1u << 20)
		bad += m.base[i + 17] != (uint8_t)(i >> 20);
	ok(mc_segmem_populated(&m) == len && bad == 0,
	   "population reaches the size and keeps what was written meanwhile (%llu differ)",
	   (unsigned long long)bad);
	mc_segmem_free(&m);
	/* Freed while it populates: the stop is seen although the thread runs at idle priority. */
	ok(mc_segmem_create(&m, len, "test-segmem-idle-stop", &o, err, sizeof(err)) == 0,
	   "another, freed at once");
	mc_segmem_free(&m);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Idle population with the owner's activity clock: nothing is populated while requests run
 * (the clock refreshed every 10 ms), all of it once they pause; a free during the wait is
 * prompt. */
static void test_idle_quiet(void)
{
	int64_t active = mono_ms(), t0, waited;
	struct mc_segmem_opts o = { .populate = 1, .idle = 1, .active_ms = &active };
	struct mc_segmem m;
	uint64_t len = 32u << 20, during;
	char err[512];
	int i;

	ok(mc_segmem_create(&m, len, "test-segmem-quiet", &o, err, sizeof(err)) == 0,
	   "a 32 MiB buffer populated at idle priority once its owner is quiet");
	/* 400 ms of requests; each mark lies 300 ms ahead, so that a slow wake-up of this
	 * thread on a busy host (up to 390 ms) cannot open a quiet gap by itself. */
	for (i = 0; i < 40; i++) {
		__atomic_store_n(&active, mono_ms() + 300, __ATOMIC_RELAXED);
		usleep(10000);
	}
	__atomic_store_n(&active, mono_ms(), __ATOMIC_RELAXED);
	during = mc_segmem_populated(&m);
	ok(during == 0, "nothing populated while the owner's requests ran (%llu bytes)",
	   (unsigned long long)during);
	t0 = mono_ms();
	mc_segmem_wait(&m);
	waited = mono_ms() - t0;
	ok(mc_segmem_populated(&m) == len && waited >= 50,
	   "all of it populated once they paused (%lld ms after the last request)",
	   (long long)waited);
	mc_segmem_free(&m);

	active = mono_ms();
	ok(mc_segmem_create(&m, len, "test-segmem-quiet-stop", &o, err, sizeof(err)) == 0,
	   "another, its owner busy");
	usleep(20000);
	t0 = mono_ms();
	__atomic_store_n(&active, mono_ms(), __ATOMIC_RELAXED);
	mc_segmem_free(&m);
	waited = mono_ms() - t0;
	ok(waited < 1000, "freed while waiting for quiet: returns in %lld ms", (long long)waited);
}

/* Pages of [p, p+len) with a page-table entry in this process. */
static uint64_t mapped_pages(const void *p, uint64_t len)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	uint64_t i, n = 0, e;

	if (fd < 0)
		return 0;
	for (i = 0; i < len / 4096; i++)
		if (pread(fd, &e, 8, (off_t)(((uintptr_t)p / 4096 + i) * 8)) == 8 && (e >> 63))
			n++;
	close(fd);
	return n;
}

static void test_peer(void)
{
	struct mc_segmem_opts o = { .populate = 1 };
	struct mc_segmem m;
	struct mc_segmem_peer *pm;
	struct stat sb;
	uint64_t len = 40u << 20;
	uint8_t *peer;
	char err[512];
	int i;

	/* A populated owner: the thread maps all of it. */
	ok(mc_segmem_create(&m, len, "test-segmem-peer", &o, err, sizeof(err)) == 0,
	   "an owner's populated segment");
	mc_segmem_wait(&m);
	peer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	ok(peer != MAP_FAILED && mapped_pages(peer, len) == 0, "a fresh mapping has no pages");
	pm = mc_segmem_peer_map(peer, len, m.fd);
	ok(pm != NULL, "peer mapping started");
	for (i = 0; i < 1000 && mapped_pages(peer, len) < len / 4096; i++)
		usleep(10000);
	ok(mapped_pages(peer, len) == len / 4096, "the thread mapped every page of the owner's "
	   "(%llu of %llu)", (unsigned long long)mapped_pages(peer, len),
	   (unsigned long long)(len / 4096));
	mc_segmem_peer_stop(pm);
	munmap(peer, len);
	mc_segmem_free(&m);

	/* The page-table check failing (MC_SEGMEM_NO_PAGEMAP: as where /proc/self/pagemap cannot
	 * be read): the map-ahead falls back to MADV_POPULATE_READ, says so once, still maps all
	 * of it, and copies through it land in the owner's pages. */
	ok(mc_segmem_create(&m, len, "test-segmem-peer-nopagemap", &o, err, sizeof(err)) == 0,
	   "an owner's populated segment (pagemap check forced to fail)");
	mc_segmem_wait(&m);
	for (i = 0; i < (int)(len / 4096); i++)
		m.base[(uint64_t)i * 4096 + 11] = (uint8_t)(i * 13 + 5);
	mc_log_set_sink(capture_sink, NULL);
	mc_log_set_level(MC_LOG_INFO);
	setenv("MC_SEGMEM_NO_PAGEMAP", "1", 1);
	peer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	pm = mc_segmem_peer_map(peer, len, m.fd);
	unsetenv("MC_SEGMEM_NO_PAGEMAP");
	ok(pm != NULL, "peer mapping started");
	for (i = 0; i < 1000 && mapped_pages(peer, len) < len / 4096; i++)
		usleep(10000);
	ok(mapped_pages(peer, len) == len / 4096, "the fallback mapped every page of the owner's "
	   "(%llu of %llu)", (unsigned long long)mapped_pages(peer, len),
	   (unsigned long long)(len / 4096));
	ok(__atomic_load_n(&fallback_logged, __ATOMIC_RELAXED),
	   "the map-ahead logged that it maps with MADV_POPULATE_READ");
	{
		uint64_t bad = 0, k;

		for (k = 0; k < len / 4096; k++)
			bad += peer[k * 4096 + 11] != (uint8_t)(k * 13 + 5);
		mc_segmem_peer_touch(pm, peer + (7u << 20) + 5, 3u << 20);
		memset(peer + (7u << 20) + 5, 0x6c, 3u << 20);
		for (k = (7u << 20) + 5; k < (10u << 20) + 5; k += 4093)
			bad += m.base[k] != 0x6c;
		ok(bad == 0 && m.base[(7u << 20) + 4] == 0 && m.base[(10u << 20) + 5] == 0, "reads through it see the owner's "
		   "bytes, and writes land in the owner's pages and only where written (%llu differ)",
		   (unsigned long long)bad);
	}
	mc_segmem_peer_stop(pm);
	munmap(peer, len);
	mc_segmem_free(&m);
	mc_log_set_sink(mc_log_stderr_sink, NULL);
	mc_log_set_level(MC_LOG_WARN);

	/* An owner whose pages were all written (no population): the whole file is allocated,
	 * and the map-ahead maps all of it without asking page by page. */
	o.populate = 0;
	ok(mc_segmem_create(&m, len, "test-segmem-peer-written", &o, err, sizeof(err)) == 0,
	   "an owner's segment written whole, population off");
	memset(m.base, 0x21, len);
	peer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	pm = mc_segmem_peer_map(peer, len, m.fd);
	for (i = 0; i < 1000 && mapped_pages(peer, len) < len / 4096; i++)
		usleep(10000);
	ok(pm != NULL && mapped_pages(peer, len) == len / 4096 && peer[len - 1] == 0x21,
	   "the thread mapped every page (%llu of %llu)",
	   (unsigned long long)mapped_pages(peer, len), (unsigned long long)(len / 4096));
	mc_segmem_peer_stop(pm);
	munmap(peer, len);
	mc_segmem_free(&m);
	o.populate = 1;

	/* An owner that does not populate: only what it wrote gets mapped, nothing allocated. */
	o.populate = 0;
	ok(mc_segmem_create(&m, len, "test-segmem-peer-off", &o, err, sizeof(err)) == 0,
	   "an owner's unpopulated segment");
	m.base[(5u << 20)] = 1;			/* one page of the third 2 MiB region */
	memset(m.base + (2u << 20), 7, 2u << 20);	/* all of the second */
	peer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	pm = mc_segmem_peer_map(peer, len, m.fd);
	ok(pm != NULL, "peer mapping of an unpopulated owner");
	mc_segmem_peer_touch(pm, peer + (5u << 20) + 100, 200);
	ok(mapped_pages(peer + (5u << 20), 4096) == 1 &&
	   mapped_pages(peer + (4u << 20), 2u << 20) == 1,
	   "a copy into a region with holes maps its own page only");
	mc_segmem_peer_touch(pm, peer + (2u << 20) + 100, 10);
	ok(mapped_pages(peer + (2u << 20), 2u << 20) == 512,
	   "a copy into a region the owner has whole maps the region");
	ok(peer[(3u << 20)] == 7, "through the same pages");
	memset(peer + (2u << 20) + 4096, 0x33, 3 * 4096);
	ok(m.base[(2u << 20) + 4096] == 0x33 && m.base[(2u << 20) + 4 * 4096 - 1] == 0x33 &&
	   m.base[(2u << 20) + 4 * 4096] == 7, "a copy into the mapped region lands in the owner's "
	   "pages, and only where it wrote");
	mc_segmem_peer_touch(pm, peer + len - 10, 100);	/* runs past the end: clipped */
	mc_segmem_peer_touch(NULL, peer, 10);
	ok(fstat(m.fd, &sb) == 0 && (uint64_t)sb.st_blocks * 512 <= (2u << 20) + 2 * 4096,
	   "nothing allocated beyond the owner's writes and the touched tail page (%lld bytes)",
	   (long long)sb.st_blocks * 512);
	mc_segmem_peer_stop(pm);
	munmap(peer, len);
	mc_segmem_free(&m);
}

/* kB of the mapping at p that /proc/self/smaps shows under field (e.g. "ShmemPmdMapped:"). */
static long smaps_kb(const void *p, const char *field)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	unsigned long a, b;
	long v = -1;
	int in = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = a == (unsigned long)(uintptr_t)p;
			continue;
		}
		if (in && strncmp(line, field, strlen(field)) == 0) {
			v = strtol(line + strlen(field), NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static void test_thp(void)
{
	struct mc_segmem_opts o = { .populate = 1, .gather_thp = 1 };
	struct mc_segmem m;
	uint64_t len = 64u << 20, i, bad = 0;
	uint8_t *peer;
	char err[512];
	long kb;

	ok(mc_segmem_create(&m, len, "test-segmem-thp", &o, err, sizeof(err)) == 0,
	   "a populated segment of 64 MiB");
	ok(((uintptr_t)m.base & ((2u << 20) - 1)) == 0, "its mapping lies on a 2 MiB boundary");
	/* Written before population reaches them (most likely): kept, whatever population does. */
	for (i = 40u << 20; i < len; i += 4096 + 7)
		m.base[i] = (uint8_t)(i * 31 + 1);
	mc_segmem_wait(&m);
	for (i = 40u << 20; i < len; i += 4096 + 7)
		bad += m.base[i] != (uint8_t)(i * 31 + 1);
	ok(bad == 0, "bytes written while population ran are kept (%llu differ)",
	   (unsigned long long)bad);
	ok(mc_segmem_populated(&m) == len, "population reaches the size");
	peer = mc_segmem_map_shared(m.fd, 3 * 4096, len - 3 * 4096, 0);
	ok(peer != MAP_FAILED && ((uintptr_t)peer & ((2u << 20) - 1)) == 3 * 4096,
	   "another mapping from offset 12 KiB lies 12 KiB past a 2 MiB boundary");
	if (peer != MAP_FAILED)
		munmap(peer, len - 3 * 4096);
	if (!m.collapse) {
		printf("# skip: this kernel does not gather shared memory into transparent huge "
		       "pages here (no MADV_COLLAPSE, THP off, or shmem_enabled deny/advise)\n");
		mc_segmem_free(&m);
		return;
	}
	kb = smaps_kb(m.base, "ShmemPmdMapped:");
	ok(kb >= 16 * 1024, "population gathered 2 MiB huge pages (%ld kB mapped whole)", kb);
	peer = mc_segmem_map_shared(m.fd, 0, len, 0);
	ok(peer != MAP_FAILED, "a second mapping from offset 0");
	if (peer != MAP_FAILED) {
		volatile uint8_t sum = 0;

		for (i = 0; i < len; i += 2u << 20)
			sum += peer[i];
		(void)sum;
		kb = smaps_kb(peer, "ShmemPmdMapped:");
		ok(kb >= 16 * 1024, "one read per 2 MiB maps them whole there too (%ld kB)", kb);
		ok(peer[(40u << 20)] == (uint8_t)((40u << 20) * 31 + 1), "through the same bytes");
		munmap(peer, len);
	}
	mc_segmem_free(&m);
}

int main(void)
{
	test_location();
	test_hugepage_size();
	test_env();
	test_create();
	test_idle();
	test_idle_quiet();
	test_peer();
	test_thp();
	return tap_done();
}

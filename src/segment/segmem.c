/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segment memory (see segmem.h): create, place, populate and free the memory behind a segment.
 *
 * A page nothing has written yet costs a fault and a zeroing on its first write: 4 KiB at a time
 * that runs at a fraction of memory speed, and it lands on the request path of whoever writes
 * first.  Population moves that cost off the request path: one thread per segment asks the
 * kernel to allocate the pages (MADV_POPULATE_WRITE, Linux 5.14+; older kernels get one write per
 * page, an atomic OR of zero, which leaves any byte a client already wrote as it was) 2 MiB at a
 * time from the lowest address upward, publishing after each step how far it got; each call
 * holds the process's mmap lock, so a longer one would hold up every mmap of the process (a
 * thread's first malloc) and the page faults queued behind it.  The master's offset allocator
 * hands out the lowest free offsets of a fresh segment first, so the memory it gives out first
 * is the memory that was populated first.  Memory only the process's own requests use (a
 * client's local buffer) is populated at idle priority by writing its pages one by one, which
 * holds no such lock, and only once the process's requests have paused for MC_SEGMEM_QUIET_MS:
 * on a host with few cores an idle-priority thread still takes the gaps a busy client's copies
 * leave between them (and the caches with them), which made a fresh writer's first gigabyte
 * 10-15% slower than its second on two cores.  A process busy from its first request on writes
 * those pages itself when its own requests first use them.
 *
 * Huge pages: hugetlb memfds (MFD_HUGETLB) reserve their pages from the pool when mapped; a pool
 * too small is refused at creation with the shortfall and the sysctl that reserves it, unless the
 * caller allowed falling back to normal pages.  Normal pages ask for transparent huge pages
 * (MADV_HUGEPAGE) wherever the kernel gives them to shared memory (shmem_enabled advise,
 * within_size, always or force), so a same-host writer maps 2 MiB with one entry; where it
 * does not (shmem_enabled "never", the kernel's default), population gathers each 2 MiB into
 * one with MADV_COLLAPSE, which the kernel grants on request.  Mappings lie on 2 MiB
 * boundaries (mc_segmem_map_shared) so those pages are mapped whole, here and in same-host
 * writers.
 *
 * NUMA placement uses the raw mbind system call on the mapping before any page exists, so the
 * policy is the shared memory object's and every page, whoever faults it, lands where it says.
 *
 * Threads: create and free run on the caller's thread; the populating thread touches only the
 * mapping and the two atomics.  Free stops and joins it before unmapping.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "reactor/options.h"
#include "segment/segmem.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#define MC_MFD_HUGE_SHIFT 26
#define MC_MPOL_BIND 2
#define MC_MPOL_INTERLEAVE 3
#define MC_SEGMEM_CHUNK (32ull << 20)	/* progress and stop granularity */
#define MC_SEGMEM_STEP (2ull << 20)	/* populated per call (see mc_segmem_populate_main) */
#define MC_SEGMEM_NODE_DIR "/sys/devices/system/node"
#define MC_HUGETLBFS_MAGIC 0x958458f6
#define MC_SEGMEM_PEER_IDLE_MS 3000	/* the owner's pages stopped growing: wait no more */
#define MC_SEGMEM_PEER_REGION (2ull << 20)	/* what a writer maps at once (touch) */
#define MC_SEGMEM_FAULT_AROUND (64ull << 10)	/* the kernel's fault_around_bytes default */
#define MC_SEGMEM_THP (2ull << 20)		/* a transparent huge page (x86-64, arm64 4K) */
#define MC_SEGMEM_QUIET_MS 100		/* idle population: the owner's requests paused this long */

static int64_t mc_segmem_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mc_segmem_human(uint64_t b, char *out, size_t n)
{
	if (b >= (1ull << 30) && b % (1ull << 30) == 0)
		snprintf(out, n, "%llu GiB", (unsigned long long)(b >> 30));
	else if (b >= (1ull << 20) && b % (1ull << 20) == 0)
		snprintf(out, n, "%llu MiB", (unsigned long long)(b >> 20));
	else
		snprintf(out, n, "%llu bytes", (unsigned long long)b);
}

int mc_segmem_parse_hugepage_size(const char *s, uint64_t *out)
{
	uint64_t v;

	if (s == NULL || mc_parse_size(s, &v))
		return -EINVAL;
	if (v != (2ull << 20) && v != (1ull << 30))
		return -EINVAL;
	*out = v;
	return 0;
}

static int mc_segmem_node_exists(unsigned n)
{
	char path[128];
	struct stat sb;

	if (stat(MC_SEGMEM_NODE_DIR, &sb) != 0)
		return n == 0;	/* no NUMA in this kernel: one node, 0 */
	snprintf(path, sizeof(path), MC_SEGMEM_NODE_DIR "/node%u", n);
	return stat(path, &sb) == 0;
}

static void mc_segmem_set_node(struct mc_segmem_opts *o, unsigned n)
{
	o->nodes[n / (8 * sizeof(unsigned long))] |= 1ul << (n % (8 * sizeof(unsigned long)));
}

/* "N", "N,M", "N-M", combinations; each node must exist.  0 or -EINVAL with err set. */
static int mc_segmem_parse_nodes(const char *s, const char *whole, struct mc_segmem_opts *o,
				 char *err, size_t errlen)
{
	const char *p = s;

	if (*p == '\0')
		goto bad;
	while (*p) {
		unsigned long a, b, i;
		char *end;

		if (!isdigit((unsigned char)*p))
			goto bad;
		a = strtoul(p, &end, 10);
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			if (!isdigit((unsigned char)*p))
				goto bad;
			b = strtoul(p, &end, 10);
			p = end;
		}
		if (a > b || b >= MC_SEGMEM_MAX_NODES)
			goto bad;
		for (i = a; i <= b; i++) {
			if (!mc_segmem_node_exists((unsigned)i)) {
				snprintf(err, errlen, "invalid location '%s': this host has no NUMA "
					 "node %lu (see " MC_SEGMEM_NODE_DIR ")", whole, i);
				return -EINVAL;
			}
			mc_segmem_set_node(o, (unsigned)i);
		}
		if (*p == ',')
			p++;
		else if (*p)
			goto bad;
	}
	return 0;
bad:
	snprintf(err, errlen, "invalid location '%s' (expected '*', 'cpu:N', 'cpu:N,M', 'cpu:N-M', "
		 "'interleave' or 'interleave:N,M')", whole);
	return -EINVAL;
}

int mc_segmem_parse_location(const char *s, struct mc_segmem_opts *o, char *err, size_t errlen)
{
	memset(o->nodes, 0, sizeof(o->nodes));
	o->loc_mode = MC_SEGMEM_LOC_ANY;
	o->location[0] = '\0';
	if (s == NULL || *s == '\0' || !strcmp(s, "*"))
		return 0;
	if (strlen(s) >= sizeof(o->location)) {
		snprintf(err, errlen, "invalid location: longer than %zu bytes",
			 sizeof(o->location) - 1);
		return -EINVAL;
	}
	snprintf(o->location, sizeof(o->location), "%s", s);
	if (!strncmp(s, "cpu:", 4)) {
		o->loc_mode = MC_SEGMEM_LOC_NODES;
		return mc_segmem_parse_nodes(s + 4, s, o, err, errlen);
	}
	if (!strcmp(s, "interleave")) {
		FILE *f = fopen(MC_SEGMEM_NODE_DIR "/has_memory", "r");
		char line[512] = "0";

		o->loc_mode = MC_SEGMEM_LOC_INTERLEAVE;
		if (f) {
			if (fgets(line, sizeof(line), f) == NULL)
				snprintf(line, sizeof(line), "0");
			fclose(f);
		}
		line[strcspn(line, "\n")] = '\0';
		return mc_segmem_parse_nodes(line, s, o, err, errlen);
	}
	if (!strncmp(s, "interleave:", 11)) {
		o->loc_mode = MC_SEGMEM_LOC_INTERLEAVE;
		return mc_segmem_parse_nodes(s + 11, s, o, err, errlen);
	}
	o->loc_mode = MC_SEGMEM_LOC_ANY;
	return mc_segmem_parse_nodes("", s, o, err, errlen);
}

/* A boolean variable: unset or empty leaves *out.  0 or -EINVAL with err set. */
static int mc_segmem_env_bool(const char *name, int *out, char *err, size_t errlen)
{
	const char *v = getenv(name);

	if (v == NULL || *v == '\0')
		return 0;
	if (mc_parse_bool(v, out)) {
		snprintf(err, errlen, "invalid value '%s' for environment variable %s (expected "
			 "true or false)", v, name);
		return -EINVAL;
	}
	return 0;
}

int mc_segmem_opts_env(struct mc_segmem_opts *o, char *err, size_t errlen)
{
	const char *v;
	int huge = 0;

	memset(o, 0, sizeof(*o));
	o->populate = 1;
	if (mc_segmem_env_bool("MC_STORE_USE_HUGEPAGE", &huge, err, errlen) ||
	    mc_segmem_env_bool("MC_STORE_HUGEPAGE_FALLBACK", &o->hugepage_fallback, err, errlen) ||
	    mc_segmem_env_bool("MC_STORE_POPULATE", &o->populate, err, errlen))
		return -EINVAL;
	v = getenv("MC_STORE_HUGEPAGE_SIZE");
	o->hugepage_size = 2ull << 20;
	if (v && *v && mc_segmem_parse_hugepage_size(v, &o->hugepage_size)) {
		snprintf(err, errlen, "invalid value '%s' for environment variable "
			 "MC_STORE_HUGEPAGE_SIZE (expected 2MB or 1GB)", v);
		return -EINVAL;
	}
	if (!huge)
		o->hugepage_size = 0;
	v = getenv("MC_STORE_SEGMENT_LOCATION");
	if (v && *v) {
		char e[400];

		if (mc_segmem_parse_location(v, o, e, sizeof(e))) {
			snprintf(err, errlen, "environment variable MC_STORE_SEGMENT_LOCATION: %s", e);
			return -EINVAL;
		}
	}
	return 0;
}

/* One number from a sysfs file, or -1. */
static long long mc_segmem_read_num(const char *path)
{
	FILE *f = fopen(path, "r");
	long long v = -1;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The selected word of a THP setting under /sys/kernel/mm/transparent_hugepage ("[never]"
 * style) into out; "" where the kernel has no such file. */
static void mc_segmem_thp_setting(const char *name, char *out, size_t n)
{
	char path[128];
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/%s", name);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	if (fgets(out, (int)n, f) == NULL || strchr(out, '[') == NULL)
		out[0] = '\0';
	fclose(f);
}

/* The kernel may give shared memory transparent huge pages: on request ("[advise]"), or also
 * without one ("[within_size]", "[always]", "[force]", where asking does no harm).  Not with
 * "[never]" or "[deny]". */
static int mc_segmem_thp_advise(void)
{
	char shm[256];

	mc_segmem_thp_setting("shmem_enabled", shm, sizeof(shm));
	return shm[0] && !strstr(shm, "[never]") && !strstr(shm, "[deny]");
}

/* 1 when population may ask the kernel to gather each 2 MiB of shared memory into a
 * transparent huge page (MADV_COLLAPSE, Linux 6.1+), which the kernel offers even where
 * shmem_enabled is "never" (its default): not where THP are off altogether (enabled "never")
 * or denied to shared memory ("deny"). */
static int mc_segmem_thp_collapse_ok(void)
{
	char all[256], shm[256];

	mc_segmem_thp_setting("enabled", all, sizeof(all));
	mc_segmem_thp_setting("shmem_enabled", shm, sizeof(shm));
	return all[0] && !strstr(all, "[never]") && shm[0] && !strstr(shm, "[deny]");
}

void *mc_segmem_map_shared(int fd, uint64_t off, size_t len, int noreserve)
{
	int flags = MAP_SHARED | (noreserve ? MAP_NORESERVE : 0);
	size_t slack = (size_t)MC_SEGMEM_THP;
	struct statfs fs;
	uint8_t *r, *p;
	uintptr_t a;

	if ((fstatfs(fd, &fs) == 0 && (unsigned long)fs.f_type == MC_HUGETLBFS_MAGIC) ||
	    len < MC_SEGMEM_THP)
		return mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, (off_t)off);
	/* An address as far into a 2 MiB boundary as off is: each huge page of the file then
	 * lies on one page-table entry of ours (otherwise its pages are mapped 4 KiB each). */
	r = mmap(NULL, len + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, (off_t)off);
	a = ((uintptr_t)r + slack - 1) & ~(uintptr_t)(slack - 1);
	a += (uintptr_t)(off % slack);
	if (a >= (uintptr_t)r + slack)
		a -= slack;
	p = mmap((void *)a, len, PROT_READ | PROT_WRITE, flags | MAP_FIXED, fd, (off_t)off);
	if (p == MAP_FAILED) {
		munmap(r, len + slack);
		return MAP_FAILED;
	}
	if (p > r)
		munmap(r, (size_t)(p - r));
	if (p + len < r + len + slack)
		munmap(p + len, (size_t)((r + len + slack) - (p + len)));
	return p;
}

/* The one line for a hugetlb pool that cannot hold len bytes of page-size pages. */
static void mc_segmem_pool_error(uint64_t len, uint64_t page, char *err, size_t errlen)
{
	char dir[128], path[192], hs[32], ps[32];
	long long total, freep, resv, need = (long long)((len + page - 1) / page), avail;

	snprintf(dir, sizeof(dir), "/sys/kernel/mm/hugepages/hugepages-%llukB",
		 (unsigned long long)(page >> 10));
	snprintf(path, sizeof(path), "%s/nr_hugepages", dir);
	total = mc_segmem_read_num(path);
	snprintf(path, sizeof(path), "%s/free_hugepages", dir);
	freep = mc_segmem_read_num(path);
	snprintf(path, sizeof(path), "%s/resv_hugepages", dir);
	resv = mc_segmem_read_num(path);
	mc_segmem_human(len, hs, sizeof(hs));
	mc_segmem_human(page, ps, sizeof(ps));
	if (total < 0) {
		snprintf(err, errlen, "huge pages of %s are not supported by this kernel (no %s); "
			 "use MC_STORE_HUGEPAGE_SIZE=2MB, or allow normal pages with "
			 "MC_STORE_HUGEPAGE_FALLBACK=1", ps, dir);
		return;
	}
	avail = freep >= 0 && resv >= 0 ? freep - resv : 0;
	if (avail < 0)
		avail = 0;
	snprintf(err, errlen, "hugetlb pool too small: %s of %s pages needs %lld pages, %lld are "
		 "free (%lld short); reserve them with 'sysctl vm.nr_hugepages=%lld'%s or 'echo %lld > "
		 "%s/nr_hugepages', or allow normal pages with MC_STORE_HUGEPAGE_FALLBACK=1",
		 hs, ps, need, avail, need > avail ? need - avail : 0, total + need - avail,
		 page == (2ull << 20) ? "" : " (default size only)", total + need - avail, dir);
}

static int mc_segmem_mbind(struct mc_segmem *m, const struct mc_segmem_opts *o, char *err,
			   size_t errlen)
{
	int mode = o->loc_mode == MC_SEGMEM_LOC_INTERLEAVE ? MC_MPOL_INTERLEAVE : MC_MPOL_BIND;

	if (o->loc_mode == MC_SEGMEM_LOC_ANY)
		return 0;
	if (syscall(SYS_mbind, m->base, m->map_len, mode, o->nodes,
		    (unsigned long)MC_SEGMEM_MAX_NODES + 1, 0) != 0) {
		int e = errno;

		snprintf(err, errlen, "cannot place segment memory at location '%s': mbind: %s",
			 o->location, strerror(e));
		return -e;
	}
	return 0;
}

/* One write per page of [p, p+len) (page-aligned), an atomic OR of zero, which keeps whatever
 * a client already wrote: each page is a fault of its own, which takes no lock of the
 * process's beyond that page's mapping. */
static void mc_segmem_touch_range(uint8_t *p, uint64_t len, uint64_t pg)
{
	uint64_t off;

	for (off = 0; off < len; off += pg)
		__atomic_fetch_or(p + off, 0, __ATOMIC_RELAXED);
}

/* Idle population: wait until the owner's last request is MC_SEGMEM_QUIET_MS past (or a stop),
 * sleeping no longer than that at a time so a stop is seen within it. */
static void mc_segmem_wait_quiet(struct mc_segmem *m)
{
	while (m->active_ms && !__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		int64_t since = mc_segmem_now_ms() - __atomic_load_n(m->active_ms, __ATOMIC_RELAXED);
		struct timespec ts;

		if (since >= MC_SEGMEM_QUIET_MS)
			return;
		since = since < 0 ? 0 : since;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(MC_SEGMEM_QUIET_MS - since) * 1000000L;
		nanosleep(&ts, NULL);
	}
}

int mc_segmem_populate_range(void *p, uint64_t len)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uint64_t l = ((uintptr_t)p + len - a + pg - 1) & ~(pg - 1);

	if (len == 0)
		return 0;
	if (madvise((void *)a, l, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	mc_segmem_touch_range((uint8_t *)a, l, pg);	/* a kernel before 5.14 */
	return 0;
}

/* Gather the whole 2 MiB pieces of [p, p+n) (p 2 MiB-aligned) into transparent huge pages:
 * one page of each is allocated (an atomic OR of zero keeps a byte a client wrote), and the
 * kernel allocates the huge page, zeroes the rest and maps it with one entry.  That costs
 * about what allocating the 512 small pages does, and a same-host process mapping the segment
 * then maps 2 MiB per fault too: its first write into a fresh mapping runs at memory speed.
 * Returns 0, or -1 where the kernel refuses (no MADV_COLLAPSE, THP off for this process) or
 * found no free huge page (then compacting memory for the next ones would cost more than it
 * saves): the caller stops asking.  Pieces not gathered stay small pages, which the caller's
 * population fills. */
static int mc_segmem_collapse(uint8_t *p, uint64_t n)
{
	unsigned char vec[MC_SEGMEM_CHUNK / 4096];
	uint64_t whole = n & ~(MC_SEGMEM_THP - 1), o, i, run = 0;

	if (whole == 0 || whole > MC_SEGMEM_CHUNK || mincore(p, whole, vec) != 0)
		return 0;
	/* Only pieces nothing wrote yet: gathering pages a client already wrote copies them one
	 * by one, several times what allocating them costs (those stay small pages). */
	for (o = 0; o <= whole; o += MC_SEGMEM_THP) {
		int empty = o < whole;

		for (i = o / 4096; empty && i < (o + MC_SEGMEM_THP) / 4096; i++)
			if (vec[i] & 1)
				empty = 0;
		if (empty) {
			__atomic_fetch_or(p + o, 0, __ATOMIC_RELAXED);
			run += MC_SEGMEM_THP;
			continue;
		}
		/* One call per run of pieces: each call costs the kernel a drain of every CPU. */
		if (run && madvise(p + o - run, run, MADV_COLLAPSE) != 0 &&
		    (errno == EINVAL || errno == EPERM || errno == ENOMEM))
			return -1;
		run = 0;
	}
	return 0;
}

static void *mc_segmem_populate_main(void *arg)
{
	struct mc_segmem *m = arg;
	uint64_t chunk = MC_SEGMEM_CHUNK, step = MC_SEGMEM_STEP, off = 0;
	char hs[32];
	int rc = 0;

	(void)pthread_setname_np(pthread_self(), "mc-populate");
	if (m->idle) {
		struct sched_param sp = { 0 };

		(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	}
	if (chunk < m->page_size)
		chunk = m->page_size;
	if (step < m->page_size)
		step = m->page_size;
	while (off < m->map_len && !__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		uint64_t n = m->map_len - off < chunk ? m->map_len - off : chunk, o, k = 0;

		if (m->collapse && mc_segmem_collapse(m->base + off, n) != 0)
			m->collapse = 0;
		/* A step at a time: population holds the process's mmap lock (for reading)
		 * through each call, and every mmap or munmap of the process waits for the call
		 * to end, meanwhile stopping every page fault behind it.  A thread's first
		 * malloc maps its arena: a transfer worker's first copy waited 10-40 ms behind a
		 * 32 MiB call of a client's local buffer; 2 MiB calls hold it under a
		 * millisecond. */
		for (o = 0; o < n && !__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE); o += k) {
			k = n - o < step ? n - o : step;
			if (m->idle) {
				mc_segmem_wait_quiet(m);
				if (__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE))
					break;
				mc_segmem_touch_range(m->base + off + o, k, m->page_size);
			}
			else if ((rc = mc_segmem_populate_range(m->base + off + o, k)) != 0)
				break;
			__atomic_store_n(&m->populated, off + o + k < m->size ? off + o + k : m->size,
					 __ATOMIC_RELEASE);
		}
		off += o;
		if (rc)
			break;
	}
	mc_segmem_human(m->size, hs, sizeof(hs));
	if (rc)
		mc_log_warn("segment memory: populating %s stopped at %llu bytes: %s (the rest "
			    "is allocated by its first write)", hs, (unsigned long long)off,
			    strerror(-rc));
	else if (off >= m->map_len) {
		m->done_ms = mc_segmem_now_ms();
		mc_log_info("segment memory: %s populated in %.2f s%s", hs,
			    (double)(m->done_ms - m->started_ms) / 1000.0, m->collapse ?
			    " (as 2 MiB transparent huge pages where the kernel had them)" : "");
	}
	return NULL;
}

int mc_segmem_create(struct mc_segmem *m, uint64_t len, const char *name,
		     const struct mc_segmem_opts *o, char *err, size_t errlen)
{
	struct mc_segmem_opts none = { .populate = 0 };
	uint64_t page = 4096;
	unsigned flags = MFD_CLOEXEC;
	int rc, huge;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	if (o == NULL)
		o = &none;
	if (len == 0) {
		snprintf(err, errlen, "segment memory of 0 bytes");
		return -EINVAL;
	}
	huge = o->hugepage_size != 0;
again:
	if (huge) {
		page = o->hugepage_size;
		flags = MFD_CLOEXEC | MFD_HUGETLB |
			((unsigned)(page == (1ull << 30) ? 30 : 21) << MC_MFD_HUGE_SHIFT);
	} else {
		page = (uint64_t)sysconf(_SC_PAGESIZE);
		flags = MFD_CLOEXEC;
	}
	m->page_size = page;
	m->size = len;
	m->map_len = (len + page - 1) / page * page;
	m->hugetlb = huge;
	m->fd = memfd_create(name, flags);
	if (m->fd < 0) {
		rc = -errno;
		if (huge && (rc == -EINVAL || rc == -ENOENT))
			goto pool;
		snprintf(err, errlen, "cannot create segment memory: memfd_create: %s",
			 strerror(-rc));
		return rc;
	}
	if (ftruncate(m->fd, (off_t)m->map_len) != 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot size segment memory to %llu bytes: %s",
			 (unsigned long long)m->map_len, strerror(-rc));
		goto fail_fd;
	}
	/* hugetlb reserves its pages from the pool here (so a short pool fails now, not with a
	 * SIGBUS on some later write); normal pages are allocated by population or first write. */
	m->base = mc_segmem_map_shared(m->fd, 0, m->map_len, !huge);
	if (m->base == MAP_FAILED) {
		rc = -errno;
		m->base = NULL;
		if (huge && rc == -ENOMEM) {
			close(m->fd);
			m->fd = -1;
			goto pool;
		}
		snprintf(err, errlen, "cannot map %llu bytes of segment memory: %s",
			 (unsigned long long)m->map_len, strerror(-rc));
		goto fail_fd;
	}
	if (!huge && mc_segmem_thp_advise())
		(void)madvise(m->base, m->map_len, MADV_HUGEPAGE);
	else if (!huge && o->gather_thp && o->loc_mode == MC_SEGMEM_LOC_ANY &&
		 ((uintptr_t)m->base & (MC_SEGMEM_THP - 1)) == 0)
		m->collapse = mc_segmem_thp_collapse_ok();
	rc = mc_segmem_mbind(m, o, err, errlen);
	if (rc)
		goto fail_map;
	m->started_ms = mc_segmem_now_ms();
	m->idle = o->idle;
	m->active_ms = o->idle ? o->active_ms : NULL;
	if (o->populate) {
		if (pthread_create(&m->thread, NULL, mc_segmem_populate_main, m) == 0) {
			m->thread_running = 1;
		} else {
			mc_log_warn("segment memory: no thread to populate it; pages are allocated "
				    "by their first write");
		}
	}
	return 0;

pool:
	mc_segmem_pool_error(len, page, err, errlen);
	if (o->hugepage_fallback) {
		mc_log_warn("%s; falling back to normal pages (hugepage fallback allowed)", err);
		huge = 0;
		goto again;
	}
	return -ENOMEM;
fail_map:
	munmap(m->base, m->map_len);
	m->base = NULL;
fail_fd:
	close(m->fd);
	m->fd = -1;
	return rc;
}

uint64_t mc_segmem_populated(const struct mc_segmem *m)
{
	uint64_t v;
	struct stat sb;

	if (m == NULL || m->base == NULL)
		return 0;
	v = __atomic_load_n(&m->populated, __ATOMIC_ACQUIRE);
	/* Pages written before population reached them (or with population off) count too: the
	 * memfd's blocks are its allocated pages.  hugetlb files do not count theirs. */
	if (!m->hugetlb && fstat(m->fd, &sb) == 0 && (uint64_t)sb.st_blocks * 512 > v)
		v = (uint64_t)sb.st_blocks * 512;
	return v < m->size ? v : m->size;
}

void mc_segmem_wait(struct mc_segmem *m)
{
	if (m->thread_running) {
		pthread_join(m->thread, NULL);
		m->thread_running = 0;
	}
}

void mc_segmem_free(struct mc_segmem *m)
{
	if (m == NULL || m->base == NULL)
		return;
	__atomic_store_n(&m->stop, 1, __ATOMIC_RELEASE);
	if (m->thread_running && m->idle) {
		/* An idle-priority thread may wait for a core for as long as the host is busy:
		 * back at normal priority, it sees the stop within a step. */
		struct sched_param sp = { 0 };

		(void)pthread_setschedparam(m->thread, SCHED_OTHER, &sp);
	}
	mc_segmem_wait(m);
	munmap(m->base, m->map_len);
	m->base = NULL;
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
}

int mc_segmem_bind_cpus(const struct mc_segmem_opts *o)
{
	cpu_set_t set;
	unsigned n;
	int any = 0;

	if (o->loc_mode == MC_SEGMEM_LOC_ANY)
		return 0;
	CPU_ZERO(&set);
	for (n = 0; n < MC_SEGMEM_MAX_NODES; n++) {
		char path[128], list[4096], *p;
		FILE *f;

		if (!(o->nodes[n / (8 * sizeof(unsigned long))] &
		      (1ul << (n % (8 * sizeof(unsigned long))))))
			continue;
		snprintf(path, sizeof(path), MC_SEGMEM_NODE_DIR "/node%u/cpulist", n);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(list, sizeof(list), f) == NULL)
			list[0] = '\0';
		fclose(f);
		for (p = list; isdigit((unsigned char)*p);) {
			unsigned long a = strtoul(p, &p, 10), b = a, c;

			if (*p == '-')
				b = strtoul(p + 1, &p, 10);
			for (c = a; c <= b && c < CPU_SETSIZE; c++) {
				CPU_SET(c, &set);
				any = 1;
			}
			if (*p == ',')
				p++;
		}
	}
	if (!any)
		return 0;	/* memory-only nodes: no CPUs to run beside them */
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		return -errno;
	return 0;
}

struct mc_segmem_peer {
	uint8_t *base;
	uint64_t len;
	int fd;				/* the owner's memfd (a duplicate, owned) */
	int owner_full;			/* the owner had every page of the file (atomic) */
	uint64_t *done;			/* a bit per MC_SEGMEM_PEER_REGION known mapped (atomic) */
	size_t nregions;
	uint64_t frontier;		/* writers copied below this region (atomic) */
	int by_touch;			/* 1: read faults map their 64 KiB, -1: they don't,
					 * 0: not known yet (atomic; mc_segmem_peer_fill) */
	int no_pagemap;			/* MC_SEGMEM_NO_PAGEMAP: the page-table check fails */
	unsigned char vec[MC_SEGMEM_PEER_REGION / 4096];	/* mincore's answer (thread) */
	int stop;			/* atomic */
	pthread_t thread;
};

static int mc_segmem_peer_is_done(struct mc_segmem_peer *pm, uint64_t r)
{
	return !!(__atomic_load_n(&pm->done[r / 64], __ATOMIC_ACQUIRE) & (1ull << (r % 64)));
}

/* 1 when every page of [p, p+n) has an entry in this process's page tables (read from
 * /proc/self/pagemap, whose present bit needs no privilege), else 0. */
static int mc_segmem_all_mapped(const uint8_t *p, uint64_t n)
{
	uint64_t e[MC_SEGMEM_PEER_REGION / 4096], np = n / 4096, i;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return 0;
	if (np > sizeof(e) / sizeof(e[0]))
		np = sizeof(e) / sizeof(e[0]);
	got = pread(fd, e, np * 8, (off_t)((uintptr_t)p / 4096 * 8));
	close(fd);
	if (got != (ssize_t)(np * 8))
		return 0;
	for (i = 0; i < np; i++)
		if (!(e[i] >> 63))
			return 0;
	return 1;
}

/* Map [a, a+n) of pm's mapping, whose pages the owner all has.  A read fault on shared memory
 * maps the pages of the aligned 64 KiB around it that are in the file (fault-around), writable
 * (shared memory has no dirty tracking): reading one byte per 64 KiB maps the range at about
 * the cost of copying it, half of what MADV_POPULATE_READ costs (which maps one page per step)
 * and a seventh of the write faults it saves.  Where an administrator turned fault-around down
 * (fault_around_bytes), the first such range's page tables say so and the read population
 * maps the ranges from then on. */
static void mc_segmem_peer_fill(struct mc_segmem_peer *pm, uint64_t a, uint64_t n)
{
	uintptr_t s = (uintptr_t)(pm->base + a), e = s + n, v;
	int how = __atomic_load_n(&pm->by_touch, __ATOMIC_RELAXED);

	if (how < 0) {
		(void)madvise(pm->base + a, n, MADV_POPULATE_READ);
		return;
	}
	/* One read in each aligned 64 KiB window the range meets (the kernel aligns the window). */
	for (v = s & ~(uintptr_t)(MC_SEGMEM_FAULT_AROUND - 1); v < e; v += MC_SEGMEM_FAULT_AROUND)
		(void)*(volatile const uint8_t *)(v > s ? v : s);
	if (how == 0) {
		how = !pm->no_pagemap && mc_segmem_all_mapped(pm->base + a, n) ? 1 : -1;
		if (__atomic_exchange_n(&pm->by_touch, how, __ATOMIC_RELAXED) == 0 && how < 0)
			mc_log_info("segment memory: a same-host segment's pages are mapped with "
				    "MADV_POPULATE_READ (read faults did not map the 64 KiB around "
				    "them, or /proc/self/pagemap cannot be read)");
		if (how < 0)
			(void)madvise(pm->base + a, n, MADV_POPULATE_READ);
	}
}

/* 1 when the owner has a page for every byte of its file (its allocated blocks cover the
 * size: population finished, or writes filled the rest), then for good: an owner's segment
 * never gives pages back while mapped.  Asking the kernel which pages of a range the owner
 * has (mincore) looks each 4 KiB up in the file's page cache, 40-50 microseconds per 2 MiB on
 * the VM measured, a third of what copying the 2 MiB costs: the map-ahead spent 40-50 ms of
 * CPU on it for a 2 GiB segment beside the first copies, and every copy into a region not
 * mapped yet paid it.  One fstat answers for the whole file once population is done. */
static int mc_segmem_peer_owner_full(struct mc_segmem_peer *pm)
{
	struct stat sb;

	if (__atomic_load_n(&pm->owner_full, __ATOMIC_RELAXED))
		return 1;
	if (pm->fd < 0 || fstat(pm->fd, &sb) != 0 || sb.st_size <= 0 ||
	    (uint64_t)sb.st_size < pm->len || (uint64_t)sb.st_blocks * 512 < (uint64_t)sb.st_size)
		return 0;
	__atomic_store_n(&pm->owner_full, 1, __ATOMIC_RELAXED);
	return 1;
}

/* Map region r whole if the owner has every page of it (vec: room for its mincore answer).
 * Returns 1 when mapped (and marked), 0 when the owner lacks a page of it. */
static int mc_segmem_peer_region(struct mc_segmem_peer *pm, uint64_t r, unsigned char *vec)
{
	uint64_t a = r * MC_SEGMEM_PEER_REGION, n = MC_SEGMEM_PEER_REGION, i, np;

	if (a + n > pm->len)
		n = pm->len - a;
	np = (n + 4095) / 4096;
	if (!mc_segmem_peer_owner_full(pm)) {
		if (mincore(pm->base + a, n, vec) != 0)
			return 0;
		for (i = 0; i < np && (vec[i] & 1); i++)
			;
		if (i < np)
			return 0;
	}
	mc_segmem_peer_fill(pm, a, n);
	__atomic_fetch_or(&pm->done[r / 64], 1ull << (r % 64), __ATOMIC_RELEASE);
	return 1;
}

/* From the lowest region up, following the owner's population, and always ahead of the
 * writers (a writer maps the region it copies into itself, so the thread jumps past it and
 * the two map different regions at once); then once more over what was jumped. */
static void *mc_segmem_peer_main(void *arg)
{
	struct mc_segmem_peer *pm = arg;
	int64_t idle_since = mc_segmem_now_ms();
	uint64_t r = 0;

	(void)pthread_setname_np(pthread_self(), "mc-mapahead");
	while (r < pm->nregions && !__atomic_load_n(&pm->stop, __ATOMIC_ACQUIRE)) {
		uint64_t f = __atomic_load_n(&pm->frontier, __ATOMIC_ACQUIRE);

		if (f > r)
			r = f;
		if (r >= pm->nregions)
			break;
		if (mc_segmem_peer_is_done(pm, r) || mc_segmem_peer_region(pm, r, pm->vec)) {
			r++;
			idle_since = mc_segmem_now_ms();
			continue;
		}
		/* A hole: the owner has not populated that far yet (or does not populate). */
		if (mc_segmem_now_ms() - idle_since > MC_SEGMEM_PEER_IDLE_MS)
			break;
		usleep(20000);
	}
	for (r = 0; r < pm->nregions && !__atomic_load_n(&pm->stop, __ATOMIC_ACQUIRE); r++)
		if (!mc_segmem_peer_is_done(pm, r))
			(void)mc_segmem_peer_region(pm, r, pm->vec);
	return NULL;
}

struct mc_segmem_peer *mc_segmem_peer_map(void *p, uint64_t len, int fd)
{
	struct mc_segmem_peer *pm;
	struct statfs fs;

	if (fstatfs(fd, &fs) == 0 && (unsigned long)fs.f_type == MC_HUGETLBFS_MAGIC)
		return NULL;
	if ((uintptr_t)p % 4096 || len == 0)
		return NULL;
	/* Where the owner's pages are transparent huge pages, this mapping maps them whole too. */
	if (mc_segmem_thp_advise())
		(void)madvise(p, len, MADV_HUGEPAGE);
	pm = calloc(1, sizeof(*pm));
	if (pm == NULL)
		return NULL;
	pm->base = p;
	pm->len = len;
	/* Mapped from offset 0 (the caller's contract), so the file's size bounds the mapping. */
	pm->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	/* Tests (and a check of the fallback where pagemap is readable): as if it were not. */
	{
		const char *v = getenv("MC_SEGMEM_NO_PAGEMAP");
		int on = 0;

		pm->no_pagemap = v && *v && mc_parse_bool(v, &on) == 0 && on;
	}
	pm->nregions = (size_t)((len + MC_SEGMEM_PEER_REGION - 1) / MC_SEGMEM_PEER_REGION);
	pm->done = calloc((pm->nregions + 63) / 64, sizeof(*pm->done));
	if (pm->done == NULL || pthread_create(&pm->thread, NULL, mc_segmem_peer_main, pm))
		goto fail;
	return pm;
fail:
	if (pm->fd >= 0)
		close(pm->fd);
	free(pm->done);
	free(pm);
	return NULL;
}

void mc_segmem_peer_touch(struct mc_segmem_peer *pm, const void *p, uint64_t len)
{
	uint64_t off, end, r, r0, r1, f;

	if (pm == NULL || len == 0 || (const uint8_t *)p < pm->base)
		return;
	off = (uint64_t)((const uint8_t *)p - pm->base);
	if (off >= pm->len)
		return;
	end = len > pm->len - off ? pm->len : off + len;
	r0 = off / MC_SEGMEM_PEER_REGION;
	r1 = (end - 1) / MC_SEGMEM_PEER_REGION;
	f = __atomic_load_n(&pm->frontier, __ATOMIC_RELAXED);
	while (f < r1 + 1 && !__atomic_compare_exchange_n(&pm->frontier, &f, r1 + 1, 0,
							   __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	for (r = r0; r <= r1; r++) {
		uint64_t a = r * MC_SEGMEM_PEER_REGION, s, e;
		unsigned char vec[MC_SEGMEM_PEER_REGION / 4096];

		if (mc_segmem_peer_is_done(pm, r) || mc_segmem_peer_region(pm, r, vec))
			continue;
		/* Holes: map the pages this copy covers only (allocating nothing more than the
		 * copy would). */
		s = (off > a ? off : a) & ~4095ull;
		e = end < a + MC_SEGMEM_PEER_REGION ? end : a + MC_SEGMEM_PEER_REGION;
		e = (e + 4095) & ~4095ull;
		if (e > pm->len)
			e = pm->len;
		(void)madvise(pm->base + s, e - s, MADV_POPULATE_READ);
	}
}

void mc_segmem_peer_stop(struct mc_segmem_peer *pm)
{
	if (pm == NULL)
		return;
	__atomic_store_n(&pm->stop, 1, __ATOMIC_RELEASE);
	pthread_join(pm->thread, NULL);
	if (pm->fd >= 0)
		close(pm->fd);
	free(pm->done);
	free(pm);
}

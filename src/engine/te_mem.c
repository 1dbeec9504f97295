/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registered memory that same-host peers can map: the engine's managed buffers and any shared
 * file mapping (memfd, /dev/shm) the user registers.
 *
 * mc_te_alloc_managed backs a buffer with segment memory (segment/segmem.c: a memfd mapped
 * MAP_SHARED, populated in the background, huge pages when asked) and remembers the fd, so a
 * same-uid peer on this host can map the very same pages (te_shm.c hands the fd over).  For
 * other registered memory mc_te_mem_share_fd looks the range up in /proc/self/maps: when it lies
 * inside one shared mapping of a file, it finds a descriptor for that file (our managed table,
 * an open descriptor with the same inode in /proc/self/fd, or /proc/self/map_files when we may
 * open it) and the file offset of the range.  Private memory (malloc, anonymous mmap) has no
 * such descriptor: peers reach it with process_vm_readv/writev or tcp.  API threads; the
 * managed table has its own lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <dirent.h>

#include "common/log.h"
#include "engine/engine.h"
#include "segment/segmem.h"
#include "mooncake/transfer_engine_c.h"

struct mc_te_managed {
	struct mc_te_managed *next;
	uint64_t addr, len;
	int fd;				/* mem's memfd (owned by mem) */
	struct mc_segmem mem;
};

static pthread_mutex_t mc_te_managed_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mc_te_managed *mc_te_managed_list;

void *mc_te_alloc_managed(size_t len)
{
	struct mc_segmem_opts o;
	struct mc_te_managed *m;
	char err[512];

	if (len == 0)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	/* The store's memory settings (huge pages, population, placement) apply here too. */
	if (mc_segmem_opts_env(&o, err, sizeof(err)) ||
	    mc_segmem_create(&m->mem, len, "mooncake-te-buffer", &o, err, sizeof(err))) {
		mc_log_err("cannot allocate a %zu-byte engine buffer: %s", len, err);
		free(m);
		return NULL;
	}
	m->addr = (uint64_t)(uintptr_t)m->mem.base;
	m->len = len;
	m->fd = m->mem.fd;
	pthread_mutex_lock(&mc_te_managed_mu);
	m->next = mc_te_managed_list;
	mc_te_managed_list = m;
	pthread_mutex_unlock(&mc_te_managed_mu);
	return m->mem.base;
}

int mc_te_free_managed(void *addr)
{
	struct mc_te_managed **pp, *m;

	pthread_mutex_lock(&mc_te_managed_mu);
	for (pp = &mc_te_managed_list; (m = *pp) != NULL; pp = &m->next)
		if (m->addr == (uint64_t)(uintptr_t)addr) {
			*pp = m->next;
			break;
		}
	pthread_mutex_unlock(&mc_te_managed_mu);
	if (m == NULL)
		return -ENOENT;
	mc_segmem_free(&m->mem);
	free(m);
	return 0;
}

/* A descriptor for the file with inode ino on device dev among our open descriptors. */
static int mc_te_fd_by_inode(dev_t dev, ino_t ino)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int fd = -1;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL && fd < 0) {
		struct stat st;
		char *end;
		long n = strtol(de->d_name, &end, 10);

		if (*end || n < 0 || n == dirfd(d))
			continue;
		if (fstat((int)n, &st) == 0 && st.st_ino == ino && st.st_dev == dev &&
		    (fcntl((int)n, F_GETFL) & O_ACCMODE) == O_RDWR)
			fd = fcntl((int)n, F_DUPFD_CLOEXEC, 0);
	}
	closedir(d);
	return fd;
}

int mc_te_mem_share_fd(uint64_t addr, uint64_t len, int *fd, uint64_t *off)
{
	struct mc_te_managed *m;
	FILE *f;
	char line[1024];
	int rc = -ENOENT;

	*fd = -1;
	*off = 0;
	pthread_mutex_lock(&mc_te_managed_mu);
	for (m = mc_te_managed_list; m; m = m->next)
		if (addr >= m->addr && addr + len <= m->addr + m->len) {
			*fd = fcntl(m->fd, F_DUPFD_CLOEXEC, 0);
			*off = addr - m->addr;
			break;
		}
	pthread_mutex_unlock(&mc_te_managed_mu);
	if (*fd >= 0)
		return 0;
	f = fopen("/proc/self/maps", "re");
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		uint64_t lo, hi, foff, ino;
		unsigned maj, min;
		char perms[8], path[512] = "", mf[128];
		struct stat st;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %511[^\n]",
			   &lo, &hi, perms, &foff, &maj, &min, &ino, path) < 7)
			continue;
		if (addr < lo || addr >= hi)
			continue;
		if (addr + len > hi || perms[3] != 's' || ino == 0 || perms[0] != 'r' ||
		    perms[1] != 'w')
			break;	/* private, or spans mappings */
		/* map_files needs CAP_SYS_ADMIN; an open descriptor of ours does not. */
		snprintf(mf, sizeof(mf), "/proc/self/map_files/%" PRIx64 "-%" PRIx64, lo, hi);
		*fd = mc_te_fd_by_inode(makedev(maj, min), (ino_t)ino);
		if (*fd < 0 && stat(mf, &st) == 0 && st.st_ino == ino)
			*fd = open(mf, O_RDWR | O_CLOEXEC);
		if (*fd >= 0) {
			*off = foff + (addr - lo);
			rc = 0;
		}
		break;
	}
	fclose(f);
	return rc;
}

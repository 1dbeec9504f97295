/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registered ranges as a sorted array of disjoint [start, end) pairs under a rwlock: lookups
 * (every served request) are a binary search under a read lock; registration is rare.  Every
 * change bumps a generation (written under the lock, read without it), against which a caller
 * may keep the last range it found (mc_memreg_check_cached).
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/memreg.h"

struct mc_range {
	uint64_t start, end;
};

struct mc_memreg {
	pthread_rwlock_t lock;
	struct mc_range *r;
	size_t n, cap;
	mc_memreg_file_fn file_fn;	/* under lock */
	void *file_arg;
	uint64_t gen;			/* changes of r: atomic, written under lock; from 1 */
};

struct mc_memreg *mc_memreg_new(void)
{
	struct mc_memreg *reg = calloc(1, sizeof(*reg));

	if (reg) {
		pthread_rwlock_init(&reg->lock, NULL);
		reg->gen = 1;	/* a zeroed mc_memreg_hit never matches */
	}
	return reg;
}

void mc_memreg_free(struct mc_memreg *reg)
{
	if (reg == NULL)
		return;
	pthread_rwlock_destroy(&reg->lock);
	free(reg->r);
	free(reg);
}

/* Index of the first range whose start is > addr. */
static size_t mc_memreg_upper(const struct mc_memreg *reg, uint64_t addr)
{
	size_t lo = 0, hi = reg->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (reg->r[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mc_memreg_add(struct mc_memreg *reg, uint64_t addr, uint64_t len)
{
	size_t i;
	int rc = 0;

	if (len == 0 || addr + len < addr)
		return -EINVAL;
	pthread_rwlock_wrlock(&reg->lock);
	i = mc_memreg_upper(reg, addr);
	if ((i > 0 && reg->r[i - 1].end > addr) || (i < reg->n && reg->r[i].start < addr + len)) {
		rc = -EEXIST;
		goto out;
	}
	if (reg->n == reg->cap) {
		size_t cap = reg->cap ? reg->cap * 2 : 16;
		struct mc_range *r = realloc(reg->r, cap * sizeof(*r));

		if (r == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		reg->r = r;
		reg->cap = cap;
	}
	memmove(&reg->r[i + 1], &reg->r[i], (reg->n - i) * sizeof(*reg->r));
	reg->r[i].start = addr;
	reg->r[i].end = addr + len;
	reg->n++;
	__atomic_store_n(&reg->gen, reg->gen + 1, __ATOMIC_RELEASE);
out:
	pthread_rwlock_unlock(&reg->lock);
	return rc;
}

int mc_memreg_remove(struct mc_memreg *reg, uint64_t addr)
{
	size_t i;
	int rc = -ENOENT;

	pthread_rwlock_wrlock(&reg->lock);
	i = mc_memreg_upper(reg, addr);
	if (i > 0 && reg->r[i - 1].start == addr) {
		memmove(&reg->r[i - 1], &reg->r[i], (reg->n - i) * sizeof(*reg->r));
		reg->n--;
		__atomic_store_n(&reg->gen, reg->gen + 1, __ATOMIC_RELEASE);
		rc = 0;
	}
	pthread_rwlock_unlock(&reg->lock);
	return rc;
}


int mc_memreg_check_cached(struct mc_memreg *reg, struct mc_memreg_hit *hit, uint64_t addr,
			   uint64_t len)
{
	uint64_t gen;
	size_t i;
	int ok = 0;

	if (len == 0 || addr + len < addr)
		return 0;
	if (__atomic_load_n(&reg->gen, __ATOMIC_ACQUIRE) == hit->gen && addr >= hit->start &&
	    addr + len <= hit->end)
		return 1;
	pthread_rwlock_rdlock(&reg->lock);
	gen = __atomic_load_n(&reg->gen, __ATOMIC_RELAXED);
	i = mc_memreg_upper(reg, addr);
	if (i > 0 && addr + len <= reg->r[i - 1].end) {
		ok = 1;
		hit->gen = gen;
		hit->start = reg->r[i - 1].start;
		hit->end = reg->r[i - 1].end;
	}
	pthread_rwlock_unlock(&reg->lock);
	return ok;
}

int mc_memreg_check(struct mc_memreg *reg, uint64_t addr, uint64_t len)
{
	struct mc_memreg_hit none = { 0, 0, 0 };	/* generation 0 is never current */

	return mc_memreg_check_cached(reg, &none, addr, len);
}

void mc_memreg_set_files(struct mc_memreg *reg, mc_memreg_file_fn fn, void *arg)
{
	pthread_rwlock_wrlock(&reg->lock);
	reg->file_fn = fn;
	reg->file_arg = arg;
	pthread_rwlock_unlock(&reg->lock);
}

int mc_memreg_in_files(uint64_t addr, uint64_t len)
{
	return len > 0 && addr >= MC_DISK_SPACE_BASE && addr + len > addr &&
	       addr - MC_DISK_SPACE_BASE < MC_DISK_SPACE_LEN &&
	       addr + len - MC_DISK_SPACE_BASE <= MC_DISK_SPACE_LEN;
}

int mc_memreg_open_file(struct mc_memreg *reg, uint64_t addr, uint64_t len, int *fd,
			uint64_t *off)
{
	int rc = -ENOENT;

	if (!mc_memreg_in_files(addr, len))
		return -ENOENT;
	/* The read lock keeps the window's owner alive during fn (set_files(NULL) waits). */
	pthread_rwlock_rdlock(&reg->lock);
	if (reg->file_fn)
		rc = reg->file_fn(reg->file_arg, addr, len, fd, off);
	pthread_rwlock_unlock(&reg->lock);
	return rc;
}

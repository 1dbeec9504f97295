/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registered ranges as a sorted array of disjoint [start, end) pairs under a rwlock: lookups
 * (every served request) are a binary search under a read lock; registration is rare.
 */
#include <errno.h>
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
};

struct mc_memreg *mc_memreg_new(void)
{
	struct mc_memreg *reg = calloc(1, sizeof(*reg));

	if (reg)
		pthread_rwlock_init(&reg->lock, NULL);
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
		rc = 0;
	}
	pthread_rwlock_unlock(&reg->lock);
	return rc;
}

int mc_memreg_check(struct mc_memreg *reg, uint64_t addr, uint64_t len)
{
	size_t i;
	int ok = 0;

	if (len == 0 || addr + len < addr)
		return 0;
	pthread_rwlock_rdlock(&reg->lock);
	i = mc_memreg_upper(reg, addr);
	if (i > 0 && addr + len <= reg->r[i - 1].end)
		ok = 1;
	pthread_rwlock_unlock(&reg->lock);
	return ok;
}

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_COMMON_RADIX_SORT_H
#define MC_COMMON_RADIX_SORT_H

/*
 * MC_RADIX_SORT_DEFINE(NAME, TYPE, FIELD, ALLOC) defines
 *     static int NAME(TYPE *a, size_t n, const atomic_int *stop);
 * which sorts a[0, n) by the uint64_t member FIELD, stably: an LSD radix sort, 16 bits a pass,
 * where a pass whose digit is the same in every element is skipped.  Scratch (n elements and
 * 512 KiB of counts) comes from ALLOC (malloc, or mc_xmalloc in a daemon that aborts when out
 * of memory) and is freed before it returns.  stop (NULL: none) is read between passes: once
 * set, a is left in an order of no use and NAME returns 1.  0 when sorted, -1 out of memory (a
 * unchanged).  A macro, so each element type gets code that copies it by assignment.
 *
 * MC_LOWER_BOUND_DEFINE(NAME, TYPE, FIELD) defines
 *     static size_t NAME(const TYPE *a, size_t n, uint64_t v);
 * the index of the first element of a[0, n) (sorted by FIELD) whose FIELD is not below v: n when
 * there is none.  A binary search.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MC_RADIX_SORT_DEFINE(NAME, TYPE, FIELD, ALLOC)                                        \
	static int NAME(TYPE *a, size_t n, const atomic_int *stop)                            \
	{                                                                                     \
		TYPE *b, *t, *orig = a;                                                       \
		size_t *count, i;                                                             \
		int shift, stopped = 0;                                                       \
                                                                                              \
		if (n < 2)                                                                    \
			return 0;                                                             \
		b = ALLOC(n * sizeof(*b));                                                    \
		count = ALLOC(65536 * sizeof(*count));                                        \
		if (b == NULL || count == NULL) {                                             \
			free(b);                                                              \
			free(count);                                                          \
			return -1;                                                            \
		}                                                                             \
		for (shift = 0; shift < 64; shift += 16) {                                    \
			size_t sum = 0;                                                       \
                                                                                              \
			if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {       \
				stopped = 1;                                                  \
				break;                                                        \
			}                                                                     \
			memset(count, 0, 65536 * sizeof(*count));                            \
			for (i = 0; i < n; i++)                                               \
				count[(a[i].FIELD >> shift) & 0xffff]++;                      \
			if (count[(a[0].FIELD >> shift) & 0xffff] == n)                       \
				continue;                                                     \
			for (i = 0; i < 65536; i++) {                                         \
				size_t c = count[i];                                          \
                                                                                              \
				count[i] = sum;                                               \
				sum += c;                                                     \
			}                                                                     \
			for (i = 0; i < n; i++)                                               \
				b[count[(a[i].FIELD >> shift) & 0xffff]++] = a[i];            \
			t = a;                                                                \
			a = b;                                                                \
			b = t;                                                                \
		}                                                                             \
		if (a != orig)                                                                \
			memcpy(orig, a, n * sizeof(*a));                                      \
		free(a == orig ? b : a);                                                      \
		free(count);                                                                  \
		return stopped;                                                               \
	}

#define MC_LOWER_BOUND_DEFINE(NAME, TYPE, FIELD)                                              \
	static size_t NAME(const TYPE *a, size_t n, uint64_t v)                               \
	{                                                                                     \
		size_t lo = 0, hi = n;                                                        \
                                                                                              \
		while (lo < hi) {                                                             \
			size_t mid = lo + (hi - lo) / 2;                                      \
                                                                                              \
			if (a[mid].FIELD < v)                                                 \
				lo = mid + 1;                                                 \
			else                                                                  \
				hi = mid;                                                     \
		}                                                                             \
		return lo;                                                                    \
	}

#endif

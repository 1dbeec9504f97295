/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_crc64: GB/s of one core computing CRC-64/ECMA-182 over a BLOCK-byte buffer (default
 * 1 MiB, in cache or not as the size makes it) three ways: byte at a time (the algorithm upstream
 * uses), slicing by eight, and carry-less multiplication, next to memcpy of the same bytes, all
 * in the same run; ROUNDS rounds (default 3) of SECONDS each, medians printed.
 * Usage: bench_crc64 [BLOCK] [SECONDS] [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc64.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile uint64_t sink;

static double rate(int which, const uint8_t *src, uint8_t *dst, size_t n, double secs)
{
	double t0 = now(), t;
	size_t bytes = 0;
	uint64_t c = 0;

	do {
		switch (which) {
		case 0:
			c ^= mc_crc64_bytewise(0, src, n);
			break;
		case 1:
			c ^= mc_crc64_slice8(0, src, n);
			break;
		case 2:
			c ^= mc_crc64_clmul(0, src, n);
			break;
		case 3:
			c ^= mc_crc64_copy(0, dst, src, n);
			break;
		default:
			memcpy(dst, src, n);
			c ^= dst[n / 2];
			break;
		}
		bytes += n;
		t = now();
	} while (t - t0 < secs);
	sink = c;
	return (double)bytes / (t - t0) / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "bytewise (upstream's algorithm)", "slice8",
				       "clmul", "clmul fused with a copy", "memcpy" };
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 1 << 20;
	double secs = argc > 2 ? atof(argv[2]) : 0.5;
	int rounds = argc > 3 ? atoi(argv[3]) : 3, w, r;
	double res[5][16];
	uint8_t *src, *dst;

	if (n == 0 || secs <= 0 || rounds < 1 || rounds > 16)
		return 2;
	src = malloc(n);
	dst = malloc(n);
	if (src == NULL || dst == NULL)
		return 1;
	for (size_t i = 0; i < n; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	memset(dst, 0, n);
	printf("CRC-64/ECMA-182 over %zu bytes, one core, %s path\n", n, mc_crc64_impl());
	for (r = 0; r < rounds; r++)
		for (w = 0; w < 5; w++)
			res[w][r] = rate(w, src, dst, n, w == 0 ? secs / 4 : secs);
	for (w = 0; w < 5; w++) {
		qsort(res[w], (size_t)rounds, sizeof(double), cmp);
		printf("%-32s %7.2f GB/s (median of %d)\n", names[w], res[w][rounds / 2], rounds);
	}
	free(src);
	free(dst);
	return 0;
}

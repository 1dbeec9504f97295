/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memcpy-ref: the single-thread memcpy rate a same-host data path is compared with.  Copies
 * BLOCK-byte blocks between two SPAN-byte buffers (touched first, so no page faults count) for
 * SECONDS and prints "memcpy GB/s".  Usage: memcpy-ref BLOCK SPAN SECONDS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t block = argc > 1 ? strtoull(argv[1], NULL, 0) : 1 << 20;
	size_t span = argc > 2 ? strtoull(argv[2], NULL, 0) : 256u << 20;
	double secs = argc > 3 ? atof(argv[3]) : 1.0, t0, t;
	unsigned char *a, *b;
	size_t off = 0, bytes = 0;

	if (block == 0 || span < block || secs <= 0)
		return 2;
	a = malloc(span);
	b = malloc(span);
	if (a == NULL || b == NULL)
		return 1;
	memset(a, 1, span);
	memset(b, 2, span);
	t0 = now();
	do {
		for (int i = 0; i < 64; i++) {
			memcpy(b + off, a + off, block);
			bytes += block;
			off = off + 2 * block <= span ? off + block : 0;
		}
		t = now();
	} while (t - t0 < secs);
	printf("memcpy %.2f GB/s (check %d)\n", bytes / (t - t0) / 1e9, b[span / 2]);
	free(a);
	free(b);
	return 0;
}

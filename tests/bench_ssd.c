/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Benchmarks of the SSD tier, driven by scripts/bench-ssd.sh (not a test).  Master address in
 * MC_MASTER; this process contributes no memory (a pure client), so every byte it reads comes
 * from another client's memory or SSD over the data port.
 *
 *   bench_ssd fill PREFIX N SIZE        put PREFIX/0..N-1 (retrying -200 while offloads free
 *                                       memory)
 *   bench_ssd read PREFIX N SIZE BATCH  read them all with batch_get_into; prints MiB/s
 *   bench_ssd trace FILE SIZE           replay a conversation trace (JSON lines with hash_ids):
 *                                       per request, read its blocks; a block read back is a hit;
 *                                       the misses are written.  Prints the hit rate.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/store_c.h"

static mooncake_store_t st;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int put_retry(const char *key, const void *v, size_t size)
{
	double end = now_s() + 20;
	int rc;

	while ((rc = mooncake_store_put(st, key, v, size, NULL)) == -200 && now_s() < end)
		usleep(2000);
	return rc;
}

static int fill(const char *prefix, long n, size_t size)
{
	char key[128];
	char *v = malloc(size);
	long i, bad = 0;
	double t0 = now_s();

	if (v == NULL)
		return 1;
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s/%ld", prefix, i);
		memset(v, (int)(i & 0xff), size);
		memcpy(v, key, strlen(key));
		bad += put_retry(key, v, size) != 0;
	}
	printf("fill: %ld objects of %zu bytes in %.2f s (%ld failed)\n", n, size, now_s() - t0,
	       bad);
	free(v);
	return bad != 0;
}

static int readall(const char *prefix, long n, size_t size, long batch)
{
	char (*keys)[128] = calloc((size_t)batch, 128);
	const char **kp = calloc((size_t)batch, sizeof(*kp));
	void **bufs = calloc((size_t)batch, sizeof(*bufs));
	size_t *sizes = calloc((size_t)batch, sizeof(*sizes));
	int64_t *res = calloc((size_t)batch, sizeof(*res));
	long i, j, bad = 0;
	double t0, dt;
	uint64_t bytes = 0;

	if (!keys || !kp || !bufs || !sizes || !res)
		return 1;
	for (j = 0; j < batch; j++) {
		bufs[j] = malloc(size);
		sizes[j] = size;
		kp[j] = keys[j];
		if (bufs[j] == NULL)
			return 1;
		memset(bufs[j], 0, size);	/* fault the pages in before timing */
	}
	t0 = now_s();
	for (i = 0; i < n; i += batch) {
		long m = n - i < batch ? n - i : batch;

		for (j = 0; j < m; j++)
			snprintf(keys[j], 128, "%s/%ld", prefix, i + j);
		mooncake_store_batch_get_into(st, kp, bufs, sizes, (size_t)m, res);
		for (j = 0; j < m; j++) {
			if (res[j] == (int64_t)size && !memcmp(bufs[j], keys[j], strlen(keys[j])))
				bytes += size;
			else
				bad++;
		}
	}
	dt = now_s() - t0;
	printf("read: %ld objects of %zu bytes, batch %ld: %.3f s, %.1f MiB/s (%ld failed)\n", n,
	       size, batch, dt, (double)bytes / dt / 1048576.0, bad);
	for (j = 0; j < batch; j++)
		free(bufs[j]);
	free(keys);
	free(kp);
	free(bufs);
	free(sizes);
	free(res);
	return bad != 0;
}

/* Parse the hash_ids array of one trace line into ids (at most max).  Returns the count. */
static size_t parse_ids(const char *line, long *ids, size_t max)
{
	const char *p = strstr(line, "\"hash_ids\"");
	size_t n = 0;

	if (p == NULL || (p = strchr(p, '[')) == NULL)
		return 0;
	p++;
	while (*p && *p != ']' && n < max) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p) {
			p++;
			continue;
		}
		ids[n++] = v;
		p = end;
	}
	return n;
}

static int trace(const char *file, size_t size)
{
	FILE *f = fopen(file, "r");
	static char line[1 << 20];
	long ids[4096];
	const char *kp[4096];
	static char keys[4096][32];
	void **bufs = calloc(4096, sizeof(*bufs));
	size_t *sizes = calloc(4096, sizeof(*sizes));
	int64_t res[4096];
	char *v = malloc(size);
	uint64_t lookups = 0, hits = 0, reqs = 0, put_fail = 0;
	double t0 = now_s();
	size_t i;

	if (f == NULL || !bufs || !sizes || !v)
		return 1;
	for (i = 0; i < 4096; i++) {
		bufs[i] = malloc(size);
		sizes[i] = size;
		kp[i] = keys[i];
	}
	while (fgets(line, sizeof(line), f)) {
		size_t n = parse_ids(line, ids, 4096);

		if (n == 0)
			continue;
		reqs++;
		for (i = 0; i < n; i++)
			snprintf(keys[i], sizeof(keys[i]), "blk/%ld", ids[i]);
		mooncake_store_batch_get_into(st, kp, bufs, sizes, n, res);
		for (i = 0; i < n; i++) {
			lookups++;
			if (res[i] == (int64_t)size) {
				hits++;
				continue;
			}
			/* A miss: the block is computed and stored. */
			memset(v, (int)(ids[i] & 0xff), size);
			put_fail += put_retry(keys[i], v, size) != 0;
		}
		if (reqs % 2000 == 0)
			fprintf(stderr, "# %" PRIu64 " requests, hit rate %.4f\n", reqs,
				(double)hits / (double)lookups);
	}
	fclose(f);
	printf("trace: %" PRIu64 " requests, %" PRIu64 " block lookups, %" PRIu64 " hits: hit rate "
	       "%.4f (%" PRIu64 " puts failed) in %.1f s\n",
	       reqs, lookups, hits, (double)hits / (double)(lookups ? lookups : 1), put_fail,
	       now_s() - t0);
	for (i = 0; i < 4096; i++)
		free(bufs[i]);
	free(bufs);
	free(sizes);
	free(v);
	return 0;
}

int main(int argc, char **argv)
{
	const char *master = getenv("MC_MASTER");
	int rc = 2;

	if (argc < 4) {
		fprintf(stderr, "usage: bench_ssd fill|read|trace ... (see the source)\n");
		return 2;
	}
	st = mooncake_store_create();
	if (mooncake_store_setup(st, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "",
				 master ? master : "127.0.0.1:50051"))
		return 1;
	if (!strcmp(argv[1], "fill") && argc == 5)
		rc = fill(argv[2], atol(argv[3]), (size_t)atol(argv[4]));
	else if (!strcmp(argv[1], "read") && argc == 6)
		rc = readall(argv[2], atol(argv[3]), (size_t)atol(argv[4]), atol(argv[5]));
	else if (!strcmp(argv[1], "trace") && argc == 4)
		rc = trace(argv[2], (size_t)atol(argv[3]));
	mooncake_store_destroy(st);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object-table benchmark: drives the master's object table directly (no RPC, no sockets) to N
 * objects the way a put leaves them: an object with a 40-byte key and one memory replica whose
 * bytes are reserved in a segment allocator and linked on the segment's list.
 *
 *   bench_objtable [--objects N] [--key-len L] [--lookups M] [--no-alloc]
 *
 * Prints, per tenth of the inserts, the insert rate and the rate of M random lookups of present
 * keys at that size (a cliff shows as a tenth far below the first), then the resident memory per
 * object (RSS growth / N, everything the process allocated for the objects included), and the
 * lookup rates of present and absent keys on the full table, one by one and in batches of 128.  Rates are per second of this
 * process's CPU time, so other load on the machine bends them less.  scripts/bench-objtable.sh
 * builds it against an older object table as well and runs both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "master/master.h"
#include "master/object_table.h"
#include "segment/alloc.h"

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0, res = 0;

	if (f) {
		if (fscanf(f, "%lu %lu", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (size_t)res * 4096;
}

/* Key i: a fixed-length name like a KV-cache block's, unique per i. */
static size_t make_key(char *buf, size_t len, uint64_t i)
{
	static const char hex[] = "0123456789abcdef";
	size_t k;

	memset(buf, 'x', len);
	memcpy(buf, "kv/", 3);
	for (k = 0; k < 16 && 3 + k < len; k++)
		buf[3 + k] = hex[(i >> (60 - 4 * k)) & 15];
	return len;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Rate of m lookups of random present keys among [0, n) (and absent ones if absent). */
static double lookups(struct mc_object_table *t, uint64_t n, uint64_t m, size_t klen, int absent,
		      uint64_t *bad)
{
	char key[4096];
	uint64_t s = 0x9e3779b97f4a7c15ull ^ n, j;
	double c0 = cpu_s();

	for (j = 0; j < m; j++) {
		uint64_t i = rng_next(&s) % n + (absent ? n : 0);
		struct mc_object *o = mc_object_find(t, key, make_key(key, klen, i));

		*bad += absent ? o != NULL : (o == NULL || o->size != i);
	}
	return (double)m / (cpu_s() - c0);
}

/* Lookups as a batched request does them: keys of a batch of 128 made first, then looked up in
 * order. */
static double batch_lookups(struct mc_object_table *t, uint64_t n, uint64_t m, size_t klen,
			    uint64_t *bad)
{
	static char keys[128][4096];
	uint64_t s = 0x51ed270b27a0f3d1ull ^ n, ids[128], j, b;
	double c0 = cpu_s();

	for (j = 0; j < m; j += 128) {
		for (b = 0; b < 128; b++)
			make_key(keys[b], klen, ids[b] = rng_next(&s) % n);
		for (b = 0; b < 128; b++) {
			struct mc_object *o;

			o = mc_object_find(t, keys[b], klen);
			*bad += o == NULL || o->size != ids[b];
		}
	}
	return (double)j / (cpu_s() - c0);
}

int main(int argc, char **argv)
{
	uint64_t n = 10000000, m = 1000000, i, bad = 0;
	size_t klen = 40, rss0, rss1;
	int use_alloc = 1, a;
	struct mc_object_table t;
	struct mc_segment seg;
	char key[4096];
	double first = 0, last = 0, c0, total0;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--objects") && a + 1 < argc)
			n = strtoull(argv[++a], NULL, 10);
		else if (!strcmp(argv[a], "--key-len") && a + 1 < argc)
			klen = strtoull(argv[++a], NULL, 10);
		else if (!strcmp(argv[a], "--lookups") && a + 1 < argc)
			m = strtoull(argv[++a], NULL, 10);
		else if (!strcmp(argv[a], "--no-alloc"))
			use_alloc = 0;
		else {
			fprintf(stderr, "usage: %s [--objects N] [--key-len L (20..4096)] "
					"[--lookups M] [--no-alloc]\n", argv[0]);
			return 2;
		}
	}
	if (n < 10 || klen < 20 || klen > 4096) {
		fprintf(stderr, "bench_objtable: --objects >= 10, --key-len 20..4096\n");
		return 2;
	}
	memset(&seg, 0, sizeof(seg));
	rss0 = rss_bytes();
	mc_object_table_init(&t);
	if (use_alloc && (seg.alloc = mc_alloc_new((uint64_t)1 << 50)) == NULL)
		return 1;
	printf("objects %llu, key %zu bytes, %s\n", (unsigned long long)n, klen,
	       use_alloc ? "one 64-byte replica each (segment allocator and list)" : "no replicas");
	printf("tenth  inserts/s  lookups/s\n");
	total0 = cpu_s();
	for (a = 0; a < 10; a++) {
		uint64_t from = n * (uint64_t)a / 10, to = n * (uint64_t)(a + 1) / 10;
		double ins, look;

		c0 = cpu_s();
		for (i = from; i < to; i++) {
			struct mc_object *o = mc_object_insert(&t, key, make_key(key, klen, i), 1);
			struct mc_replica *r = &o->rep0;

			o->size = i;	/* lookups check it; the bench never releases */
			if (!use_alloc)
				continue;
			if (mc_alloc_reserve(seg.alloc, 64, &r->off) != 0)
				return 1;
			r->seg = &seg;
			r->id = i + 1;
			r->type = MC_REPLICA_MEMORY;
			r->status = MC_REPLICA_COMPLETE;
			mc_replica_push(&seg.reps, r);
			seg.nreps++;
		}
		ins = (double)(to - from) / (cpu_s() - c0);
		look = lookups(&t, to, m / 10, klen, 0, &bad);
		if (a == 0)
			first = ins;
		last = ins;
		printf("%5d  %9.0f  %9.0f\n", a + 1, ins, look);
		fflush(stdout);
	}
	rss1 = rss_bytes();
	printf("insert cpu %.2f s; last tenth / first tenth: %.2f\n", cpu_s() - total0,
	       last / first);
	printf("bytes per object: %.1f (rss %zu MiB -> %zu MiB)\n",
	       (double)(rss1 - rss0) / (double)n, rss0 >> 20, rss1 >> 20);
	printf("lookups/s present: %.0f\n", lookups(&t, n, m, klen, 0, &bad));
	printf("lookups/s absent: %.0f\n", lookups(&t, n, m, klen, 1, &bad));
	printf("lookups/s batched: %.0f\n", batch_lookups(&t, n, m, klen, &bad));
	if (bad || t.count != n) {
		printf("ERROR: %llu wrong lookups, count %zu\n", (unsigned long long)bad, t.count);
		return 1;
	}
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's own cost per small put, without sockets (not a test): an in-process master
 * (tests/unit/master_harness.h) is fed the request frames a writer of batches sends, BatchPutStart
 * of --batch keys of --key_len bytes and --size-byte values, then BatchPutEnd of the same keys
 * with their checksums, until --objects objects are in; frames are built before the clock runs,
 * so only the dispatcher and the handlers are timed (thread CPU time).  Prints, per tenth of the
 * run, nanoseconds per put (PutStart and PutEnd apart), then the cost per key of
 * BatchGetReplicaList and BatchExistKey over the keys put.  Single-threaded like the master; the
 * table, its index and the segment allocator are the daemon's.
 *
 *   bench_master_ops [--objects N] [--batch B] [--key_len K] [--size S] [--lookups N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The harness's one-key helpers are for the tests; this program uses the batch frames. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "unit/master_harness.h"

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Key i, len bytes, as scripts/bench_scale.py makes them. */
static void key_of(char *dst, uint64_t i, size_t len)
{
	int n = snprintf(dst, len + 1, "w00-%012llu-", (unsigned long long)i);

	if (n < 0)
		n = 0;
	memset(dst + n, 'k', len > (size_t)n ? len - (size_t)n : 0);
	dst[len] = '\0';
}

/* Time one frame through the dispatcher: returns the response status, adds the CPU to *ns. */
static int timed_call(uint16_t op, const struct mc_wbuf *body, double *ns)
{
	double t0 = cpu_ns();
	int st = call(op, body);

	*ns += cpu_ns() - t0;
	return st;
}

int main(int argc, char **argv)
{
	uint64_t objects = 1000000, lookups = 1000000, done = 0;
	uint32_t batch = 128, key_len = 48, size = 64, j;
	double start_ns = 0, end_ns = 0, look_ns[2] = { 0, 0 };
	struct mc_rpc_config cfg;
	struct mc_wbuf sb, eb;
	char *keys;
	int a, tenth = 0;

	for (a = 1; a + 1 < argc; a += 2) {
		if (!strcmp(argv[a], "--objects"))
			objects = strtoull(argv[a + 1], NULL, 10);
		else if (!strcmp(argv[a], "--batch"))
			batch = (uint32_t)strtoul(argv[a + 1], NULL, 10);
		else if (!strcmp(argv[a], "--key_len"))
			key_len = (uint32_t)strtoul(argv[a + 1], NULL, 10);
		else if (!strcmp(argv[a], "--size"))
			size = (uint32_t)strtoul(argv[a + 1], NULL, 10);
		else if (!strcmp(argv[a], "--lookups"))
			lookups = strtoull(argv[a + 1], NULL, 10);
		else
			break;
	}
	if (a < argc || batch == 0 || batch > MC_RPC_MAX_BATCH || key_len < 20 ||
	    key_len > 1000 || size == 0 || objects == 0) {
		fprintf(stderr, "usage: %s [--objects N] [--batch B (1..%u)] [--key_len K (20..1000)] "
				"[--size S] [--lookups N]\n", argv[0], MC_RPC_MAX_BATCH);
		return 2;
	}
	master_init(&M, NULL);
	mc_uuid_generate(&client_id);
	mc_uuid_generate(&seg_id);
	if (mount(&seg_id, 1ull << 40, (objects + batch) * ((size + 63) / 64 * 64) + (1ull << 30))) {
		fprintf(stderr, "mount failed\n");
		return 1;
	}
	keys = malloc((size_t)batch * (key_len + 1));
	mc_wbuf_init(&sb);
	mc_wbuf_init(&eb);
	mc_rpc_config_default(&cfg);
	printf("# %llu objects, batches of %u, %u-byte keys, %u-byte values\n",
	       (unsigned long long)objects, batch, key_len, size);
	printf("# tenth  ns/put  (put_start  put_end)\n");
	{
		double t_start = 0, t_end = 0;
		uint64_t t_n = 0;

		while (done < objects) {
			uint32_t n = objects - done < batch ? (uint32_t)(objects - done) : batch;

			mc_wbuf_reset(&sb);
			mc_rpc_put_uuid(&sb, &client_id);
			mc_rpc_put_config(&sb, &cfg);
			mc_wbuf_u32(&sb, n);
			mc_wbuf_reset(&eb);
			mc_rpc_put_uuid(&eb, &client_id);
			mc_wbuf_u8(&eb, MC_REPLICA_ALL);
			mc_wbuf_u32(&eb, n);
			for (j = 0; j < n; j++) {
				char *k = keys + (size_t)j * (key_len + 1);

				key_of(k, done + j, key_len);
				mc_wbuf_str(&sb, k, key_len);
				mc_wbuf_u64(&sb, size);
				mc_wbuf_str(&eb, k, key_len);
			}
			for (j = 0; j < n; j++) {
				mc_wbuf_u8(&eb, 1);
				mc_wbuf_u64(&eb, 0x1234567800000000ull + done + j);
			}
			if (timed_call(MC_OP_BATCH_PUT_START, &sb, &t_start) ||
			    mc_rbuf_u32(&resp) != n || timed_call(MC_OP_BATCH_PUT_END, &eb, &t_end) ||
			    mc_rbuf_u32(&resp) != n) {
				fprintf(stderr, "put failed at %llu\n", (unsigned long long)done);
				return 1;
			}
			for (j = 0; j < n; j++)
				if (mc_rbuf_i32(&resp) != 0) {
					fprintf(stderr, "put_end failed at %llu\n",
						(unsigned long long)(done + j));
					return 1;
				}
			done += n;
			t_n += n;
			while (tenth < 10 && done >= objects * (uint64_t)(tenth + 1) / 10) {
				printf("%7d  %6.0f  (%9.0f  %7.0f)\n", tenth + 1,
				       (t_start + t_end) / (double)t_n, t_start / (double)t_n,
				       t_end / (double)t_n);
				start_ns += t_start;
				end_ns += t_end;
				t_start = t_end = 0;
				t_n = 0;
				tenth++;
			}
		}
	}
	printf("all      %6.0f  (%9.0f  %7.0f)\n", (start_ns + end_ns) / (double)objects,
	       start_ns / (double)objects, end_ns / (double)objects);
	/* Lookups: batches of the keys put, spread over the table. */
	{
		static const uint16_t ops[2] = { MC_OP_BATCH_GET_REPLICA_LIST, MC_OP_BATCH_EXIST_KEY };
		static const char *const names[2] = { "batch_get_replica_list", "batch_exist_key" };
		uint64_t seed = 88172645463325252ull, nl = 0;
		int o;

		while (nl < lookups) {
			mc_wbuf_reset(&sb);
			mc_wbuf_u32(&sb, batch);
			for (j = 0; j < batch; j++) {
				char *k = keys + (size_t)j * (key_len + 1);

				seed ^= seed << 13;
				seed ^= seed >> 7;
				seed ^= seed << 17;
				key_of(k, seed % objects, key_len);
				mc_wbuf_str(&sb, k, key_len);
			}
			for (o = 0; o < 2; o++)
				if (timed_call(ops[o], &sb, &look_ns[o])) {
					fprintf(stderr, "%s failed\n", names[o]);
					return 1;
				}
			nl += batch;
		}
		for (o = 0; o < 2 && lookups > 0; o++)
			printf("%-24s %6.0f ns/key\n", names[o], look_ns[o] / (double)nl);
	}
	mc_wbuf_fini(&sb);
	mc_wbuf_fini(&eb);
	free(keys);
	master_fini(&M);
	return 0;
}

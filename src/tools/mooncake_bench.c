/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_bench: put and get throughput and latency of a running cluster through the public C
 * API.  Each thread writes distinct keys (value_size bytes each, batch_size keys per call) until
 * the duration or the byte budget runs out, then every thread reads those keys back in random
 * batches for the same duration.  Reports MiB/s, operations per second and per-call latency
 * percentiles; with --verify it also checks the bytes it reads.  Keys are removed at the end.
 *
 * With --trace it replays a KV-cache request trace instead (bench_trace.h): per request, as a
 * connector does, it probes every block (BatchExistKey), reads the longest cached prefix and
 * puts the blocks missing, block_size bytes each, under keys made from the block ids (shared
 * prefixes share keys).  It reports the prefix hit rate, bytes moved and per-request latency.
 * With --trace_simulate it runs no cluster and prints the offline simulator's hit rates (lru and
 * prefix through the master's own object table, Belady's optimum, the unbounded ceiling) at the
 * pool sizes of --trace_pools.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "mooncake/store_c.h"
#include "reactor/options.h"
#include "tools/bench_trace.h"

struct bench_cfg {
	char *cluster_secret_file;
	char *master_server_address;
	char *metadata_server;
	char *local_hostname;
	char *protocol;
	char *operation;
	uint64_t value_size;
	uint64_t global_segment_size;
	uint64_t local_buffer_size;
	uint64_t total_bytes;
	int64_t batch_size;
	int64_t key_size;
	char *key_order;
	int64_t threads;
	int64_t replica_num;
	double duration;
	int verify;
	int json;
	int keep;
	int check_config;
	char *trace;
	uint64_t block_size;
	double speedup;
	int trace_simulate;
	char *trace_pools;
};

#define BENCH_MAX_POOLS 32

#define O(f) offsetof(struct bench_cfg, f)
static const struct mc_opt bench_opts[] = {
	{ "cluster_secret_file", NULL, NULL, MC_OPT_PATH, O(cluster_secret_file), "", 0, -1,
	  "the cluster secret (default: $MOONCAKE_CLUSTER_SECRET_FILE)" },
	{ "master_server_address", NULL, NULL, MC_OPT_MASTER, O(master_server_address),
	  "127.0.0.1:50051", 0, -1, "master RPC address host:port" },
	{ "metadata_server", NULL, NULL, MC_OPT_METADATA, O(metadata_server), "P2PHANDSHAKE", 0, -1,
	  "transfer-engine metadata connection string" },
	{ "local_hostname", NULL, NULL, MC_OPT_ADDR, O(local_hostname), "127.0.0.1", 0, -1,
	  "this client's host name (a port is picked)" },
	{ "protocol", NULL, NULL, MC_OPT_CHOICE, O(protocol), "tcp|rdma", 0, -1,
	  "transfer protocol" },
	{ "operation", NULL, NULL, MC_OPT_CHOICE, O(operation), "both|put|get", 0, -1,
	  "put, get or both (get reads what the put phase wrote)" },
	{ "value_size", NULL, NULL, MC_OPT_SIZE, O(value_size), "1MB", 1, 1099511627776.0,
	  "bytes per value" },
	{ "batch_size", NULL, NULL, MC_OPT_INT, O(batch_size), "1", 1, 4096,
	  "keys per call (1 uses put_from/get_into, more uses the batch calls)" },
	{ "threads", NULL, NULL, MC_OPT_INT, O(threads), "1", 1, 256, "client threads" },
	{ "key_size", NULL, NULL, MC_OPT_INT, O(key_size), "0", 0, 90,
	  "pad keys to this many bytes (0: as they come, about 20)" },
	{ "key_order", NULL, NULL, MC_OPT_CHOICE, O(key_order), "sequential|random", 0, -1,
	  "keys numbered in order, or scattered as hashes of block contents are" },
	{ "duration", NULL, NULL, MC_OPT_DOUBLE, O(duration), "5", 0.1, 3600,
	  "seconds per phase" },
	{ "total_bytes", NULL, NULL, MC_OPT_SIZE, O(total_bytes), "1GB", 1, 1e15,
	  "stop the put phase after writing this many bytes (keep under the pool size)" },
	{ "global_segment_size", NULL, NULL, MC_OPT_SIZE, O(global_segment_size), "0", 0, 1e15,
	  "memory this bench process contributes (0: pure client)" },
	{ "local_buffer_size", NULL, NULL, MC_OPT_SIZE, O(local_buffer_size), "0", 0, 1e15,
	  "staging buffer" },
	{ "replica_num", NULL, NULL, MC_OPT_INT, O(replica_num), "1", 1, 16, "replicas per key" },
	{ "verify", NULL, NULL, MC_OPT_BOOL, O(verify), "false", 0, -1,
	  "check the bytes of every get" },
	{ "json", NULL, NULL, MC_OPT_BOOL, O(json), "false", 0, -1,
	  "print one JSON object per phase instead of text" },
	{ "keep", NULL, NULL, MC_OPT_BOOL, O(keep), "false", 0, -1,
	  "leave the written keys in the store (to fill a cluster)" },
	{ "check_config", NULL, NULL, MC_OPT_BOOL, O(check_config), "false", 0, -1,
	  "validate the flags and the environment, then exit (0 valid, 2 invalid)" },
	{ "trace", NULL, NULL, MC_OPT_PATH, O(trace), "", 0, -1,
	  "replay this KV-cache trace (JSON lines: timestamp, input_length, hash_ids)" },
	{ "block_size", NULL, NULL, MC_OPT_SIZE, O(block_size), "64KB", 1, 1073741824.0,
	  "--trace: bytes per block" },
	{ "speedup", NULL, NULL, MC_OPT_DOUBLE, O(speedup), "0", 0, 1e9,
	  "--trace: replay N times faster than the timestamps (0: as fast as possible)" },
	{ "trace_simulate", NULL, NULL, MC_OPT_BOOL, O(trace_simulate), "false", 0, -1,
	  "--trace: no cluster, print the simulator's hit rates at --trace_pools" },
	{ "trace_pools", NULL, NULL, MC_OPT_TOKEN, O(trace_pools), "1/16,1/8,1/4", 0, -1,
	  "--trace_simulate: pool sizes, fractions of the working set (1/8, 0.25) or blocks" },
	MC_OPT_END,
};

struct bench_thread {
	pthread_t tid;
	int id;
	const struct bench_cfg *cfg;
	mooncake_store_t store;
	uint8_t *buf;			/* batch_size * value_size, registered */
	uint64_t nkeys;			/* keys written by this thread */
	uint64_t ops, bytes, errors;
	double *lat;			/* per-call latency in seconds */
	size_t nlat, caplat;
	int phase;			/* 0 put, 1 get */
	uint64_t budget;		/* keys this thread may write */
};

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void bench_fill(uint8_t *p, uint64_t n, uint64_t seed)
{
	uint64_t i, x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(seed + i);
}

/* A bijective mix of 64 bits: distinct indexes give distinct, scattered numbers (0 too). */
static uint64_t bench_scatter(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dull;
	x ^= x >> 33;
	return x;
}

/* The key of a thread's i-th object: its prefix ("bench/PID/TID/", made once by the thread) and
 * i in decimal (random: 16 hex digits of i scattered, so consecutive puts land anywhere in the
 * key order, as hashes of KV-cache blocks do), padded with 'k' to key_size bytes (out holds
 * n > 90).  No printf and no getpid per key: at a million puts a second they were a tenth of
 * the writer's time. */
static void bench_key(char *out, size_t n, const char *prefix, uint64_t i, int64_t key_size,
		      int random)
{
	static const char hex[] = "0123456789abcdef";
	char digits[20];
	size_t len = strlen(prefix), nd = 0;

	if (len + 1 > n)
		len = n - 1;
	memcpy(out, prefix, len);
	if (random) {
		uint64_t x = bench_scatter(i);

		for (nd = 0; nd < 16; nd++, x >>= 4)
			digits[nd] = hex[x & 15];
	} else {
		do
			digits[nd++] = (char)('0' + i % 10);
		while ((i /= 10) != 0);
	}
	while (nd > 0 && len + 1 < n)
		out[len++] = digits[--nd];
	for (; (int64_t)len < key_size && len + 1 < n; len++)
		out[len] = 'k';
	out[len] = '\0';
}

static void bench_lat(struct bench_thread *t, double s)
{
	if (t->nlat == t->caplat) {
		size_t cap = t->caplat ? t->caplat * 2 : 4096;
		double *l = realloc(t->lat, cap * sizeof(*l));

		if (l == NULL)
			return;
		t->lat = l;
		t->caplat = cap;
	}
	t->lat[t->nlat++] = s;
}

static void *bench_thread_main(void *arg)
{
	struct bench_thread *t = arg;
	const struct bench_cfg *c = t->cfg;
	size_t b = (size_t)c->batch_size, vs = (size_t)c->value_size, j;
	char (*keys)[96] = calloc(b, sizeof(*keys));
	const char **kp = calloc(b, sizeof(*kp));
	void **bufs = calloc(b, sizeof(*bufs));
	size_t *sizes = calloc(b, sizeof(*sizes));
	int *res = calloc(b, sizeof(*res));
	int64_t *res64 = calloc(b, sizeof(*res64));
	uint64_t *idx = calloc(b, sizeof(*idx));	/* the get phase's key indexes */
	int random = !strcmp(c->key_order, "random");
	mooncake_replicate_config_t rc = { .replica_num = (size_t)c->replica_num };
	double end = bench_now() + c->duration;
	unsigned seed = (unsigned)t->id * 7919u + 1;
	char prefix[48];

	snprintf(prefix, sizeof(prefix), "bench/%d/%d/", (int)getpid(), t->id);

	for (j = 0; j < b; j++) {
		kp[j] = keys[j];
		bufs[j] = t->buf + j * vs;
		sizes[j] = vs;
	}
	while (bench_now() < end) {
		double t0;

		if (t->phase == 0) {
			if (t->nkeys + b > t->budget)
				break;
			for (j = 0; j < b; j++) {
				bench_key(keys[j], sizeof(keys[j]), prefix, t->nkeys + j,
					  c->key_size, random);
				if (c->verify)
					bench_fill(bufs[j], vs, t->nkeys + j + ((uint64_t)t->id << 40));
			}
			t0 = bench_now();
			if (b == 1) {
				res[0] = mooncake_store_put_from(t->store, kp[0], bufs[0], vs, &rc);
			} else if (mooncake_store_batch_put_from(t->store, kp, bufs, sizes, b, &rc,
								 res)) {
				for (j = 0; j < b; j++)
					res[j] = -1;
			}
			bench_lat(t, bench_now() - t0);
			for (j = 0; j < b; j++) {
				if (res[j]) {
					t->errors++;
				} else {
					t->ops++;
					t->bytes += vs;
				}
			}
			t->nkeys += b;
		} else {
			if (t->nkeys == 0)
				break;
			for (j = 0; j < b; j++) {
				idx[j] = (uint64_t)rand_r(&seed) % t->nkeys;
				bench_key(keys[j], sizeof(keys[j]), prefix, idx[j], c->key_size,
					  random);
			}
			t0 = bench_now();
			if (b == 1) {
				res64[0] = mooncake_store_get_into(t->store, kp[0], bufs[0], vs);
			} else if (mooncake_store_batch_get_into(t->store, kp, bufs, sizes, b, res64)) {
				for (j = 0; j < b; j++)
					res64[j] = -1;
			}
			bench_lat(t, bench_now() - t0);
			for (j = 0; j < b; j++) {
				if (res64[j] != (int64_t)vs) {
					t->errors++;
					continue;
				}
				if (c->verify) {
					uint8_t *want = malloc(vs);

					bench_fill(want, vs, idx[j] + ((uint64_t)t->id << 40));
					if (memcmp(want, bufs[j], vs))
						t->errors++;
					free(want);
				}
				t->ops++;
				t->bytes += vs;
			}
		}
	}
	free(keys);
	free(kp);
	free(bufs);
	free(sizes);
	free(res);
	free(res64);
	free(idx);
	return NULL;
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Report a phase: secs of wall time, cpu seconds this process used (user + system, all its
 * threads: the writer's cost per operation beside the store's). */
static void bench_report(const struct bench_cfg *c, const char *phase, struct bench_thread *t,
			 int n, double secs, double cpu)
{
	uint64_t ops = 0, bytes = 0, errors = 0;
	size_t nl = 0, k = 0;
	double *all, p50 = 0, p99 = 0;
	int i;

	for (i = 0; i < n; i++) {
		ops += t[i].ops;
		bytes += t[i].bytes;
		errors += t[i].errors;
		nl += t[i].nlat;
	}
	all = malloc((nl ? nl : 1) * sizeof(*all));
	for (i = 0; i < n; i++) {
		memcpy(all + k, t[i].lat, t[i].nlat * sizeof(*all));
		k += t[i].nlat;
	}
	if (nl) {
		qsort(all, nl, sizeof(*all), bench_cmp);
		p50 = all[nl / 2];
		p99 = all[(size_t)((double)(nl - 1) * 0.99)];
	}
	free(all);
	if (c->json)
		printf("{\"phase\":\"%s\",\"value_size\":%" PRIu64 ",\"batch_size\":%" PRId64
		       ",\"threads\":%" PRId64 ",\"seconds\":%.3f,\"ops\":%" PRIu64
		       ",\"errors\":%" PRIu64 ",\"MiBps\":%.1f,\"ops_per_s\":%.0f,"
		       "\"ops_per_s_per_thread\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
		       "\"cpu_us_per_op\":%.2f}\n",
		       phase, c->value_size, c->batch_size, c->threads, secs, ops, errors,
		       bytes / 1048576.0 / secs, ops / secs, ops / secs / (double)c->threads,
		       p50 * 1e6, p99 * 1e6, ops ? cpu * 1e6 / (double)ops : 0.0);
	else
		printf("%-4s value=%" PRIu64 "B batch=%" PRId64 " threads=%" PRId64
		       ": %.1f MiB/s, %.0f ops/s (%.0f per thread), %" PRIu64 " ops, %" PRIu64
		       " errors, latency per call p50 %.1f us p99 %.1f us, %.2f us CPU per op\n",
		       phase, c->value_size, c->batch_size, c->threads, bytes / 1048576.0 / secs,
		       ops / secs, ops / secs / (double)c->threads, ops, errors, p50 * 1e6,
		       p99 * 1e6, ops ? cpu * 1e6 / (double)ops : 0.0);
	fflush(stdout);
}

/* CPU seconds this process has used so far. */
static double bench_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static int bench_phase(const struct bench_cfg *c, struct bench_thread *t, int n, int phase)
{
	double t0, secs, cpu0 = bench_cpu();
	int i;

	for (i = 0; i < n; i++) {
		t[i].phase = phase;
		t[i].ops = t[i].bytes = t[i].errors = 0;
		t[i].nlat = 0;
		pthread_create(&t[i].tid, NULL, bench_thread_main, &t[i]);
	}
	t0 = bench_now();
	for (i = 0; i < n; i++)
		pthread_join(t[i].tid, NULL);
	secs = bench_now() - t0;
	bench_report(c, phase ? "get" : "put", t, n, secs, bench_cpu() - cpu0);
	return 0;
}

static void bench_sim(const struct bench_cfg *c, const struct mc_trace *tr, const double *pools,
		      int npools)
{
	static const char *names[] = { "lru", "prefix", "belady", "unbounded" };
	int i, p;

	printf("trace %s: %zu requests, %zu block references, %zu distinct blocks\n", c->trace,
	       tr->nreq, tr->nrefs, tr->distinct);
	for (i = 0; i < npools; i++) {
		uint64_t cap = mc_trace_pool_blocks(tr, pools[i]);

		printf("pool %" PRIu64 " blocks (%.4f of the working set):", cap,
		       (double)cap / (double)tr->distinct);
		for (p = MC_SIM_LRU; p <= MC_SIM_UNBOUNDED; p++) {
			struct mc_sim_result r;

			mc_sim_run(tr, (enum mc_sim_policy)p, cap, &r);
			printf(" %s %.3f (tokens %.3f)", names[p],
			       r.blocks ? (double)r.hit_blocks / (double)r.blocks : 0.0,
			       r.tokens ? (double)r.hit_tokens / (double)r.tokens : 0.0);
		}
		printf("\n");
		fflush(stdout);
	}
}

/* Replay the trace against the cluster, one request at a time, as a connector would. */
static int bench_replay(const struct bench_cfg *c, const struct mc_trace *tr,
			mooncake_store_t store)
{
	size_t mb = tr->max_blocks ? tr->max_blocks : 1, bs = (size_t)c->block_size, i, j;
	uint8_t *buf = malloc(mb * bs);
	char (*keys)[48] = calloc(mb, sizeof(*keys));
	const char **kp = calloc(mb, sizeof(*kp)), **mk = calloc(mb, sizeof(*mk));
	void **bufs = calloc(mb, sizeof(*bufs)), **mbufs = calloc(mb, sizeof(*mbufs));
	size_t *sizes = calloc(mb, sizeof(*sizes));
	int *ex = calloc(mb, sizeof(*ex)), *res = calloc(mb, sizeof(*res));
	int64_t *res64 = calloc(mb, sizeof(*res64));
	double *lat = calloc(tr->nreq, sizeof(*lat)), t0, secs;
	uint64_t hit_blocks = 0, blocks = 0, hit_tok = 0, tok = 0, rd = 0, wr = 0, errors = 0;
	mooncake_replicate_config_t rc = { .replica_num = (size_t)c->replica_num };
	int ret = -1;

	if (!buf || !keys || !kp || !mk || !bufs || !mbufs || !sizes || !ex || !res || !res64 ||
	    !lat) {
		fprintf(stderr, "mooncake_bench: out of memory for the replay\n");
		goto out;
	}
	memset(buf, 0x5a, mb * bs);
	if (mooncake_store_register_buffer(store, buf, mb * bs)) {
		fprintf(stderr, "mooncake_bench: cannot register the replay buffer\n");
		goto out;
	}
	for (j = 0; j < mb; j++) {
		kp[j] = keys[j];
		bufs[j] = buf + j * bs;
		sizes[j] = bs;
	}
	t0 = bench_now();
	for (i = 0; i < tr->nreq; i++) {
		const uint32_t *ids = tr->ids + tr->off[i];
		size_t n = tr->n[i], h = n, nm = 0;
		double r0;
		uint64_t ht;

		if (c->speedup > 0) {
			double due = t0 + (double)tr->ts[i] / 1000.0 / c->speedup, now = bench_now();

			if (due > now)
				usleep((useconds_t)((due - now) * 1e6));
		}
		for (j = 0; j < n; j++)
			snprintf(keys[j], sizeof(keys[j]), "trace/%d/%u", (int)getpid(), ids[j]);
		r0 = bench_now();
		if (n && mooncake_store_batch_is_exist(store, kp, n, ex)) {
			for (j = 0; j < n; j++)
				ex[j] = 0;
			errors++;
		}
		for (j = 0; j < n && h == n; j++)
			if (ex[j] != 1)
				h = j;
		if (h && mooncake_store_batch_get_into(store, kp, bufs, sizes, h, res64) == 0) {
			for (j = 0; j < h; j++) {
				if (res64[j] == (int64_t)bs)
					rd += bs;
				else
					errors++;
			}
		} else if (h) {
			errors += h;
		}
		/* The blocks after the hit prefix that the store lacks (an id may repeat). */
		for (j = h; j < n; j++) {
			size_t k;

			if (ex[j] == 1)
				continue;
			for (k = 0; k < nm && strcmp(mk[k], kp[j]); k++)
				;
			if (k < nm)
				continue;
			mk[nm] = kp[j];
			mbufs[nm++] = bufs[j];
		}
		if (nm && mooncake_store_batch_put_from(store, mk, mbufs, sizes, nm, &rc, res) == 0) {
			for (j = 0; j < nm; j++) {
				if (res[j] == 0)
					wr += bs;
				else
					errors++;
			}
		} else if (nm) {
			errors += nm;
		}
		lat[i] = bench_now() - r0;
		hit_blocks += h;
		blocks += n;
		ht = (uint64_t)h * MC_TRACE_BLOCK_TOKENS;
		tok += (uint64_t)tr->input_len[i];
		hit_tok += ht < (uint64_t)tr->input_len[i] ? ht : (uint64_t)tr->input_len[i];
	}
	secs = bench_now() - t0;
	mooncake_store_unregister_buffer(store, buf);
	qsort(lat, tr->nreq, sizeof(*lat), bench_cmp);
	printf("trace hit rate: %.3f (tokens %.3f), %zu requests, %" PRIu64 " of %" PRIu64
	       " blocks hit\n",
	       blocks ? (double)hit_blocks / (double)blocks : 0.0,
	       tok ? (double)hit_tok / (double)tok : 0.0, tr->nreq, hit_blocks, blocks);
	printf("trace bytes: read %.1f MiB, written %.1f MiB, %" PRIu64 " errors, %.1f s\n",
	       rd / 1048576.0, wr / 1048576.0, errors, secs);
	printf("trace latency per request: p50 %.1f us p90 %.1f us p99 %.1f us max %.1f us\n",
	       lat[tr->nreq / 2] * 1e6, lat[(size_t)((double)(tr->nreq - 1) * 0.9)] * 1e6,
	       lat[(size_t)((double)(tr->nreq - 1) * 0.99)] * 1e6, lat[tr->nreq - 1] * 1e6);
	fflush(stdout);
	ret = 0;
out:
	free(buf);
	free(keys);
	free(kp);
	free(mk);
	free(bufs);
	free(mbufs);
	free(sizes);
	free(ex);
	free(res);
	free(res64);
	free(lat);
	return ret;
}

static void bench_usage(FILE *out)
{
	fprintf(out, "usage: mooncake_bench [--flag=value ...]\n"
		     "Put/get throughput and latency against a running mooncake cluster.\n\n");
	mc_opts_help(bench_opts, out);
}

int main(int argc, char **argv)
{
	struct bench_cfg cfg;
	struct mc_trace trace;
	double pools[BENCH_MAX_POOLS];
	int npools;
	struct bench_thread *t;
	mooncake_store_t store;
	char err[512];
	int i, next = argc, rc;
	uint64_t per_thread;

	if (mc_opts_wants(argc, argv, "help")) {
		bench_usage(stdout);
		return 0;
	}
	if (mc_opts_defaults(bench_opts, &cfg) ||
	    mc_opts_parse_argv(bench_opts, &cfg, argc, argv, NULL, &next, err, sizeof(err)) ||
	    mc_auth_export("cluster_secret_file", cfg.cluster_secret_file, err, sizeof(err)) ||
	    (next == argc && mc_opts_check_env(mc_opts_env_store, err, sizeof(err)))) {
		fprintf(stderr, "mooncake_bench: %s\n", err);
		mc_opts_free(bench_opts, &cfg);
		return 2;
	}
	if (next != argc) {
		fprintf(stderr, "mooncake_bench: unexpected argument '%s'\n", argv[next]);
		mc_opts_free(bench_opts, &cfg);
		return 2;
	}
	memset(&trace, 0, sizeof(trace));
	npools = mc_trace_parse_pools(cfg.trace_pools, pools, BENCH_MAX_POOLS);
	if (npools <= 0) {
		fprintf(stderr, "mooncake_bench: --trace_pools: '%s' is not a list of pool sizes "
			"(1/16,1/8,0.25 of the working set, or block counts)\n", cfg.trace_pools);
		mc_opts_free(bench_opts, &cfg);
		return 2;
	}
	if (cfg.trace_simulate && cfg.trace[0] == '\0') {
		fprintf(stderr, "mooncake_bench: --trace_simulate needs --trace\n");
		mc_opts_free(bench_opts, &cfg);
		return 2;
	}
	if (cfg.trace[0] && mc_trace_load(cfg.trace, &trace, err, sizeof(err))) {
		fprintf(stderr, "mooncake_bench: %s\n", err);
		mc_opts_free(bench_opts, &cfg);
		return 2;
	}
	if (cfg.check_config || cfg.trace_simulate) {
		if (cfg.check_config)
			printf("mooncake_bench: configuration is valid\n");
		else
			bench_sim(&cfg, &trace, pools, npools);
		mc_trace_free(&trace);
		mc_opts_free(bench_opts, &cfg);
		return 0;
	}
	store = mooncake_store_create();
	rc = mooncake_store_setup(store, cfg.local_hostname, cfg.metadata_server,
				  cfg.global_segment_size, cfg.local_buffer_size, cfg.protocol, "",
				  cfg.master_server_address);
	if (rc) {
		fprintf(stderr, "mooncake_bench: setup against %s failed: %d\n",
			cfg.master_server_address, rc);
		mooncake_store_destroy(store);
		mc_trace_free(&trace);
		mc_opts_free(bench_opts, &cfg);
		return 1;
	}
	if (trace.nreq) {
		rc = bench_replay(&cfg, &trace, store);
		snprintf(err, sizeof(err), "^trace/%d/", (int)getpid());
		if (!cfg.keep)
			mooncake_store_remove_by_regex(store, err, 1);
		mooncake_store_destroy(store);
		mc_trace_free(&trace);
		mc_opts_free(bench_opts, &cfg);
		return rc ? 1 : 0;
	}
	t = calloc((size_t)cfg.threads, sizeof(*t));
	per_thread = cfg.total_bytes / cfg.value_size / (uint64_t)cfg.threads;
	for (i = 0; i < cfg.threads; i++) {
		size_t len = (size_t)(cfg.value_size * (uint64_t)cfg.batch_size);

		t[i].id = i;
		t[i].cfg = &cfg;
		t[i].store = store;
		t[i].budget = per_thread;
		t[i].buf = malloc(len);
		memset(t[i].buf, 0x5a, len);
		mooncake_store_register_buffer(store, t[i].buf, len);
	}
	bench_phase(&cfg, t, (int)cfg.threads, 0);
	if (strcmp(cfg.operation, "put"))
		bench_phase(&cfg, t, (int)cfg.threads, 1);
	snprintf(err, sizeof(err), "^bench/%d/", (int)getpid());
	if (!cfg.keep)
		mooncake_store_remove_by_regex(store, err, 1);
	for (i = 0; i < cfg.threads; i++) {
		mooncake_store_unregister_buffer(store, t[i].buf);
		free(t[i].buf);
		free(t[i].lat);
	}
	free(t);
	mooncake_store_destroy(store);
	mc_opts_free(bench_opts, &cfg);
	return 0;
}

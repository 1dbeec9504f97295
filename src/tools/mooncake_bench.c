/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mooncake_bench: put and get throughput and latency of a running cluster through the public C
 * API.  Each thread writes distinct keys (value_size bytes each, batch_size keys per call) until
 * the duration or the byte budget runs out, then every thread reads those keys back in random
 * batches for the same duration.  Reports MiB/s, operations per second and per-call latency
 * percentiles; with --verify it also checks the bytes it reads.  Keys are removed at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/store_c.h"
#include "reactor/options.h"

struct bench_cfg {
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
	int64_t threads;
	int64_t replica_num;
	double duration;
	int verify;
	int json;
	int keep;
	int check_config;
};

#define O(f) offsetof(struct bench_cfg, f)
static const struct mc_opt bench_opts[] = {
	{ "master_server_address", NULL, NULL, MC_OPT_ENDPOINT, O(master_server_address),
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

static void bench_key(char *out, size_t n, int tid, uint64_t i)
{
	snprintf(out, n, "bench/%d/%d/%" PRIu64, (int)getpid(), tid, i);
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
	mooncake_replicate_config_t rc = { .replica_num = (size_t)c->replica_num };
	double end = bench_now() + c->duration;
	unsigned seed = (unsigned)t->id * 7919u + 1;

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
				bench_key(keys[j], sizeof(keys[j]), t->id, t->nkeys + j);
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
			for (j = 0; j < b; j++)
				bench_key(keys[j], sizeof(keys[j]), t->id,
					  (uint64_t)rand_r(&seed) % t->nkeys);
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
					uint64_t idx = strtoull(strrchr(keys[j], '/') + 1, NULL, 10);

					bench_fill(want, vs, idx + ((uint64_t)t->id << 40));
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
	return NULL;
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void bench_report(const struct bench_cfg *c, const char *phase, struct bench_thread *t,
			 int n, double secs)
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
		       "\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
		       phase, c->value_size, c->batch_size, c->threads, secs, ops, errors,
		       bytes / 1048576.0 / secs, ops / secs, p50 * 1e6, p99 * 1e6);
	else
		printf("%-4s value=%" PRIu64 "B batch=%" PRId64 " threads=%" PRId64
		       ": %.1f MiB/s, %.0f ops/s, %" PRIu64 " ops, %" PRIu64
		       " errors, latency per call p50 %.1f us p99 %.1f us\n",
		       phase, c->value_size, c->batch_size, c->threads, bytes / 1048576.0 / secs,
		       ops / secs, ops, errors, p50 * 1e6, p99 * 1e6);
	fflush(stdout);
}

static int bench_phase(const struct bench_cfg *c, struct bench_thread *t, int n, int phase)
{
	double t0, secs;
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
	bench_report(c, phase ? "get" : "put", t, n, secs);
	return 0;
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
	if (cfg.check_config) {
		printf("mooncake_bench: configuration is valid\n");
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
		return 1;
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

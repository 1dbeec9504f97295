/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client driver for the fault tests (test_recovery.sh, test_liveness.sh, test_eviction.sh).
 * Master address in MC_MASTER.  Subcommands:
 *
 *   write-acked FILE SECONDS SIZE [PREFIX]  put keys ack/0, ack/1, ... (PREFIX/0, ...) for
 *                                   SECONDS; append every key whose put returned 0 to FILE (one
 *                                   per line, flushed); prints the failures' codes
 *   verify-acked FILE SIZE          every key in FILE reads back byte-identical
 *   put-preferred PREFIX N SEG [REPLICAS]   put N keys PREFIX/i preferring segment SEG
 *   check PREFIX N EXPECT           get every PREFIX/i: EXPECT "ok" (identical bytes) or a code
 *   eviction                        fill a small pool and check the eviction order
 *   idle SECONDS                    set up (no segment of its own), then put and get nothing
 *                                   for SECONDS (what set-up alone does: test_segment_memory.sh)
 *   fill PREFIX N SIZE [REPLICAS]   put PREFIX/0..N-1 of SIZE bytes (REPLICAS memory replicas
 *                                   each, default 1), retrying a put refused for space (-200)
 *                                   for up to 20 s (the SSD tier frees memory only once an
 *                                   evicted object is on SSD)
 *   verify PREFIX N SIZE [MISSING]  every key reads back byte-identical, except that up to
 *                                   MISSING keys may be absent (-704); any other result fails
 *   remove PREFIX FROM TO           remove PREFIX/FROM..TO-1 (0 or -704 each)
 *   put-gen PREFIX FROM TO SIZE GEN put PREFIX/FROM..TO-1 with the contents of generation GEN
 *   expect PREFIX FROM TO SIZE GEN  each of PREFIX/FROM..TO-1 reads back as generation GEN, or
 *                                   is absent when GEN is "absent"
 *   get-loop PREFIX N SIZE SECONDS  get PREFIX/0..N-1 (as written by fill) round and round for
 *                                   SECONDS: every get must return the right bytes within 5 s;
 *                                   prints the max and p99 latency
 *   put-loop PREFIX N SIZE REPLICAS FILE  put PREFIX/0..N-1 (contents as write-acked), append
 *                                   the acknowledged keys to FILE; every put must end within
 *                                   10 s, and all must succeed when MC_EXPECT_ALL_PUTS=1
 *   master-stop GOFILE              create GOFILE.ready once set up, wait for GOFILE, then put
 *                                   "stale/0" (the master is stopped: it must fail with
 *                                   -900/-901 within the call deadline), then call ExistKey
 *                                   every 20 ms until one succeeds: every failure must be
 *                                   -900/-901 and end within the deadline;
 *                                   prints "first_success_wall=<s>"
 *   writer PREFIX SECONDS SIZE REPLICAS ACKFILE LOG
 *                                   put PREFIX/0, PREFIX/1, ... (contents as write-acked) for
 *                                   SECONDS, one put per MC_PACE_MS (default 50) milliseconds;
 *                                   keys acknowledged go to ACKFILE, every call to LOG
 *   reader PREFIX N SIZE SECONDS LOG
 *                                   get PREFIX/0..N-1 round robin for SECONDS (objects written
 *                                   by fill), checking the bytes; every call to LOG
 *   burst FILE PREFIX N SIZE [hard] put PREFIX/0..N-1 once each, no retry (hard: hard-pinned);
 *                                   append the acknowledged keys to FILE; print
 *                                   "burst: A acked R refused E other S ms slowest" (exit 0);
 *                                   MC_BURST_GAP_MS: pause between puts
 *   timed-put KEY SIZE              one put; print "put: RC MS"
 *   probe FILE SIZE                 get every key of FILE: print "probe: I identical A absent
 *                                   E errors W wrong"; exit 1 only if some bytes were wrong
 *
 * writer and reader also stop once the file MC_STOP_FILE (if set) exists.
 * Call logs have one line per call, flushed at once so that a killed process leaves them
 * complete: START LATENCY RC OP KEY, START in wall-clock seconds (for lining calls up with the
 * moment a fault began or ended), LATENCY in seconds, RC 0 for success, 1 for an object that
 * came back with the wrong bytes or size, otherwise the call's error code.
 * The store client names itself MC_LOCAL_HOST (default 127.0.0.1), the address other nodes
 * reach it at.
 *
 * Object contents are derived from the key, so any reader can check them.  Prints TAP lines
 * or "# ..." diagnostics; exit 0 on success.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/store_c.h"
#include "../unit/tap.h"
#include "cluster_common.h"

static mooncake_store_t st;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int connect_store(void)
{
	int rc;

	st = mooncake_store_create();
	rc = mooncake_store_setup(st, cc_env("MC_LOCAL_HOST", "127.0.0.1"), "P2PHANDSHAKE", 0, 0,
				  "tcp", "",
				  cc_env("MC_MASTER", "127.0.0.1:50051"));
	if (rc)
		fprintf(stderr, "setup failed: %d\n", rc);
	return rc;
}

static int write_acked(const char *file, double secs, size_t size, const char *prefix)
{
	FILE *f = fopen(file, "w");
	char key[64];
	void *v = malloc(size);
	double end = now_s() + secs;
	uint64_t i = 0, ok_n = 0, fail_n = 0;
	int codes[4] = { 0 }, counts[4] = { 0 }, k;

	if (f == NULL || v == NULL)
		return 1;
	while (now_s() < end && i < 20000) {
		int rc;

		snprintf(key, sizeof(key), "%s/%" PRIu64, prefix, i++);
		cc_fill(v, size, key, 5);
		rc = mooncake_store_put(st, key, v, size, NULL);
		if (rc == 0) {
			fprintf(f, "%s\n", key);
			fflush(f);
			ok_n++;
		} else {
			fail_n++;
			for (k = 0; k < 4 && codes[k] != rc && counts[k]; k++)
				;
			if (k < 4) {
				codes[k] = rc;
				counts[k]++;
			}
			usleep(20000);	/* the master may be restarting */
		}
	}
	fclose(f);
	free(v);
	printf("# write-acked: %" PRIu64 " puts acknowledged, %" PRIu64 " failed", ok_n, fail_n);
	for (k = 0; k < 4 && counts[k]; k++)
		printf("%s%d x %d", k ? ", " : " (codes: ", codes[k], counts[k]);
	printf("%s\n", counts[0] ? ")" : "");
	return ok_n > 0 ? 0 : 1;
}

static int stop_now(double end)
{
	const char *stop = getenv("MC_STOP_FILE");

	return now_s() >= end || (stop && *stop && access(stop, F_OK) == 0);
}

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void log_call(FILE *log, double start, double lat, int64_t rc, const char *op,
		     const char *key)
{
	fprintf(log, "%.6f %.6f %" PRId64 " %s %s\n", start, lat, rc, op, key);
	fflush(log);
}

/* A put loop that records every call; see the header for the formats. */
static int writer(const char *prefix, double secs, size_t size, int replicas, const char *ackfile,
		  const char *logfile)
{
	mooncake_replicate_config_t cfg = { .replica_num = (size_t)replicas };
	FILE *f = fopen(ackfile, "w"), *log = fopen(logfile, "w");
	char key[128];
	void *v = malloc(size);
	double end = now_s() + secs;
	uint64_t i = 0, ok_n = 0, fail_n = 0;
	useconds_t pace = (useconds_t)atoi(cc_env("MC_PACE_MS", "50")) * 1000;
	int rc = 1;

	if (f == NULL || log == NULL || v == NULL)
		goto out;
	while (!stop_now(end)) {
		double t0 = now_s(), w0 = wall_s();
		int prc;

		snprintf(key, sizeof(key), "%s/%" PRIu64, prefix, i++);
		cc_fill(v, size, key, 5);
		prc = mooncake_store_put(st, key, v, size, &cfg);
		log_call(log, w0, now_s() - t0, prc, "put", key);
		if (prc == 0) {
			fprintf(f, "%s\n", key);
			fflush(f);
			ok_n++;
		} else {
			fail_n++;
			usleep(20000);
		}
		usleep(pace);
	}
	printf("# writer %s: %" PRIu64 " puts acknowledged, %" PRIu64 " failed\n", prefix, ok_n,
	       fail_n);
	rc = 0;
out:
	if (f)
		fclose(f);
	if (log)
		fclose(log);
	free(v);
	return rc;
}

/* A get loop over objects written by fill; see the header for the formats. */
static int reader(const char *prefix, int n, size_t size, double secs, const char *logfile)
{
	FILE *log = fopen(logfile, "w");
	char key[128];
	void *v = malloc(size);
	double end = now_s() + secs;
	uint64_t i = 0, ok_n = 0, fail_n = 0;

	if (log == NULL || v == NULL || n <= 0) {
		if (log)
			fclose(log);
		free(v);
		return 1;
	}
	while (!stop_now(end)) {
		double t0 = now_s(), w0 = wall_s();
		int64_t got;

		snprintf(key, sizeof(key), "%s/%" PRIu64, prefix, i++ % (uint64_t)n);
		memset(v, 0, size);
		got = mooncake_store_get_into(st, key, v, size);
		if (got == (int64_t)size)
			got = cc_check(v, size, key, 3) ? 0 : 1;
		else if (got >= 0)
			got = 1;
		log_call(log, w0, now_s() - t0, got, "get", key);
		if (got == 0) {
			ok_n++;
		} else {
			fail_n++;
			usleep(20000);
		}
		usleep(2000);
	}
	fclose(log);
	free(v);
	printf("# reader %s: %" PRIu64 " gets right, %" PRIu64 " failed\n", prefix, ok_n, fail_n);
	return 0;
}

static int verify_acked(const char *file, size_t size)
{
	FILE *f = fopen(file, "r");
	char key[64];
	void *v = malloc(size);
	uint64_t n = 0, bad = 0;

	if (f == NULL || v == NULL) {
		if (f)
			fclose(f);
		free(v);
		return 1;
	}
	while (fgets(key, sizeof(key), f)) {
		int64_t got;

		key[strcspn(key, "\n")] = '\0';
		got = mooncake_store_get_into(st, key, v, size);
		n++;
		if (got != (int64_t)size || !cc_check(v, size, key, 5)) {
			if (bad++ < 5)
				printf("# %s: %" PRId64 "\n", key, got);
		}
	}
	fclose(f);
	free(v);
	printf("# verify-acked: %" PRIu64 " acknowledged, %" PRIu64 " identical, %" PRIu64 " bad\n",
	       n, n - bad, bad);
	ok(n > 0 && bad == 0, "all %" PRIu64 " acknowledged objects read back byte-identical "
	   "(%" PRIu64 " bad)", n, bad);
	return tap_done();
}

static int burst(const char *file, const char *prefix, int n, size_t size, int hard)
{
	mooncake_replicate_config_t cfg = { .replica_num = 1, .with_hard_pin = hard };
	FILE *f = fopen(file, "a");
	char key[128];
	void *v = malloc(size);
	int i, acked = 0, refused = 0, other = 0;
	double slowest = 0;
	int gap_ms = atoi(cc_env("MC_BURST_GAP_MS", "0"));

	for (i = 0; i < n && v && f; i++) {
		double t0, dt;
		int rc;

		if (i && gap_ms > 0)
			usleep((useconds_t)gap_ms * 1000);
		t0 = now_s();
		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		cc_fill(v, size, key, 5);
		rc = mooncake_store_put(st, key, v, size, &cfg);
		dt = now_s() - t0;
		if (dt > slowest)
			slowest = dt;
		if (rc == 0) {
			fprintf(f, "%s\n", key);
			fflush(f);
			acked++;
		} else if (rc == -200) {
			refused++;
		} else if (other++ < 3) {
			printf("# put %s: %d\n", key, rc);
		}
	}
	printf("burst: %d acked %d refused %d other %.0f ms slowest\n", acked, refused, other,
	       slowest * 1000);
	if (f)
		fclose(f);
	free(v);
	return 0;
}

static int timed_put(const char *key, size_t size)
{
	void *v = calloc(1, size);
	double t0 = now_s();
	int rc = mooncake_store_put(st, key, v, size, NULL);

	printf("put: %d %.0f\n", rc, (now_s() - t0) * 1000);
	free(v);
	return 0;
}

static int probe(const char *file, size_t size)
{
	FILE *f = fopen(file, "r");
	char key[128];
	void *v = malloc(size);
	int same = 0, absent = 0, errs = 0, wrong = 0;

	while (f && v && fgets(key, sizeof(key), f)) {
		int64_t got;

		key[strcspn(key, "\n")] = '\0';
		memset(v, 0, size);
		got = mooncake_store_get_into(st, key, v, size);
		if (got == (int64_t)size && cc_check(v, size, key, 5))
			same++;
		else if (got == -704)
			absent++;
		else if (got < 0)
			errs++;
		else if (wrong++ < 3)
			printf("# %s: %" PRId64 " bytes, WRONG\n", key, got);
	}
	if (f)
		fclose(f);
	free(v);
	printf("probe: %d identical %d absent %d errors %d wrong\n", same, absent, errs, wrong);
	return wrong != 0;
}

static int put_preferred(const char *prefix, int n, const char *seg, int replicas)
{
	mooncake_replicate_config_t cfg = { .replica_num = (size_t)replicas,
					    .preferred_segments = &seg,
					    .preferred_segments_count = 1 };
	char key[128];
	char buf[10000];
	int i, bad = 0;

	for (i = 0; i < n; i++) {
		size_t sz = 1000 + (size_t)i * 7 % 9000;

		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		cc_fill(buf, sz, key, 9);
		bad += mooncake_store_put(st, key, buf, sz, &cfg) != 0;
	}
	printf("# put %d keys under %s preferring %s (%d failed)\n", n, prefix, seg, bad);
	return bad != 0;
}

static int check(const char *prefix, int n, const char *expect)
{
	char key[128], buf[10000];
	int i, bad = 0;

	for (i = 0; i < n; i++) {
		size_t sz = 1000 + (size_t)i * 7 % 9000;
		int64_t got;

		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		got = mooncake_store_get_into(st, key, buf, sizeof(buf));
		if (!strcmp(expect, "ok")) {
			if (got != (int64_t)sz || !cc_check(buf, sz, key, 9)) {
				if (bad++ < 3)
					printf("# %s: %" PRId64 "\n", key, got);
			}
		} else if (got != atoi(expect)) {
			if (bad++ < 3)
				printf("# %s: %" PRId64 " (want %s)\n", key, got, expect);
		}
	}
	is(bad, 0, "%d keys %s/*: %s (%d differ)", n, prefix, expect, bad);
	return bad != 0;
}

/* The pool is small (MC_POOL_BYTES); values are 1 MiB. */
static int eviction(void)
{
	size_t vs = 1u << 20, pool = strtoull(cc_env("MC_POOL_BYTES", "67108864"), NULL, 10);
	int nfit = (int)(pool / vs), i, fails = 0, hot_ok = 0, pinned_ok = 0, cold_gone = 0;
	mooncake_replicate_config_t pin = { .replica_num = 1, .with_hard_pin = 1 };
	char key[64];
	void *v = malloc(vs);
	int64_t got;

	/* Two hard-pinned objects, then fill the pool once. */
	for (i = 0; i < 2; i++) {
		snprintf(key, sizeof(key), "ev/pinned/%d", i);
		cc_fill(v, vs, key, 1);
		fails += mooncake_store_put(st, key, v, vs, &pin) != 0;
	}
	/* Stay under the high watermark (0.9): no eviction may run before the reads below. */
	for (i = 0; i < nfit * 8 / 10 - 2; i++) {
		snprintf(key, sizeof(key), "ev/old/%d", i);
		cc_fill(v, vs, key, 1);
		fails += mooncake_store_put(st, key, v, vs, NULL) != 0;
	}
	is(fails, 0, "filled 80%% of the pool with %d objects of 1 MiB (%d failed)",
	   nfit * 8 / 10, fails);
	/* Read the first 8 "old" objects: they become the most recently used. */
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "ev/old/%d", i);
		mooncake_store_get_into(st, key, v, vs);
	}
	/* Write half a pool more: the pool must evict to make room. */
	fails = 0;
	for (i = 0; i < nfit / 2; i++) {
		snprintf(key, sizeof(key), "ev/new/%d", i);
		cc_fill(v, vs, key, 1);
		fails += mooncake_store_put(st, key, v, vs, NULL) != 0;
	}
	is(fails, 0, "writing half a pool more succeeds through eviction (%d failed)", fails);
	for (i = 0; i < 2; i++) {
		snprintf(key, sizeof(key), "ev/pinned/%d", i);
		got = mooncake_store_get_into(st, key, v, vs);
		pinned_ok += got == (int64_t)vs && cc_check(v, vs, key, 1);
	}
	is(pinned_ok, 2, "hard-pinned objects survive (%d of 2)", pinned_ok);
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "ev/old/%d", i);
		got = mooncake_store_get_into(st, key, v, vs);
		hot_ok += got == (int64_t)vs && cc_check(v, vs, key, 1);
	}
	for (i = 8; i < 24; i++) {
		snprintf(key, sizeof(key), "ev/old/%d", i);
		cold_gone += mooncake_store_is_exist(st, key) == 0;
	}
	is(cold_gone, 16, "the least recently used objects went first (%d of 16 gone)", cold_gone);
	is(hot_ok, 8, "the recently read objects are still there (%d of 8)", hot_ok);

	/* Probe every key, as some clients do before each put: upstream leases them all and a full
	 * pool then refuses every put; here probe leases yield when nothing else can go. */
	for (i = 0; i < nfit; i++) {
		snprintf(key, sizeof(key), "ev/new/%d", i);
		mooncake_store_is_exist(st, key);
		snprintf(key, sizeof(key), "ev/old/%d", i);
		mooncake_store_is_exist(st, key);
	}
	fails = 0;
	for (i = 0; i < nfit; i++) {
		snprintf(key, sizeof(key), "ev/probed/%d", i);
		cc_fill(v, vs, key, 1);
		fails += mooncake_store_put(st, key, v, vs, NULL) != 0;
	}
	is(fails, 0, "with every key leased by ExistKey probes, a pool's worth of puts still "
	   "succeeds (%d failed)", fails);
	free(v);
	return tap_done();
}

static int fill(const char *prefix, int n, size_t size, int replicas)
{
	mooncake_replicate_config_t cfg = { .replica_num = (size_t)replicas };
	char key[128];
	void *v = malloc(size);
	int i, bad = 0, retries = 0;

	for (i = 0; i < n && v; i++) {
		double end = now_s() + 20;
		int rc;

		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		cc_fill(v, size, key, 3);
		while ((rc = mooncake_store_put(st, key, v, size, &cfg)) == -200 && now_s() < end) {
			retries++;
			usleep(10000);
		}
		if (rc != 0 && bad++ < 3)
			printf("# put %s: %d\n", key, rc);
	}
	free(v);
	ok(v && bad == 0, "put %d objects of %zu bytes, %d replicas, under %s (%d failed, "
	   "%d retries for space)", n, size, replicas, prefix, bad, retries);
	return bad != 0;
}

static int verify(const char *prefix, int n, size_t size, int missing_ok)
{
	char key[128];
	void *v = malloc(size);
	int i, good = 0, missing = 0, bad = 0;

	for (i = 0; i < n && v; i++) {
		int64_t got;

		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		memset(v, 0, size);
		got = mooncake_store_get_into(st, key, v, size);
		if (got == (int64_t)size && cc_check(v, size, key, 3)) {
			good++;
		} else if (got == -704) {
			missing++;
		} else if (bad++ < 3) {
			printf("# get %s: %" PRId64 "%s\n", key, got, got > 0 ? " (wrong bytes)" : "");
		}
	}
	free(v);
	printf("# verify %s: %d identical, %d absent, %d bad\n", prefix, good, missing, bad);
	ok(v && bad == 0 && missing <= missing_ok,
	   "%s/*: %d of %d read back byte-identical, %d absent (at most %d allowed), none wrong",
	   prefix, good, n, missing, missing_ok);
	return !(bad == 0 && missing <= missing_ok);
}

static int remove_span(const char *prefix, int from, int to)
{
	char key[128];
	int i, bad = 0, removed = 0;

	for (i = from; i < to; i++) {
		int rc;

		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		rc = mooncake_store_remove(st, key, 1);
		removed += rc == 0;
		if (rc != 0 && rc != -704 && bad++ < 3)
			printf("# remove %s: %d\n", key, rc);
	}
	is(bad, 0, "removed %s/%d..%d (%d were known)", prefix, from, to - 1, removed);
	return bad != 0;
}

static int put_gen(const char *prefix, int from, int to, size_t size, uint64_t gen)
{
	char key[128];
	void *v = malloc(size);
	int i, bad = 0;

	for (i = from; i < to && v; i++) {
		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		cc_fill(v, size, key, gen);
		if (mooncake_store_put(st, key, v, size, NULL) != 0)
			bad++;
	}
	free(v);
	ok(v && bad == 0, "put %s/%d..%d as generation %" PRIu64 " (%d failed)", prefix, from,
	   to - 1, gen, bad);
	return bad != 0;
}

static int expect_span(const char *prefix, int from, int to, size_t size, const char *what)
{
	char key[128];
	void *v = malloc(size);
	int absent = !strcmp(what, "absent"), i, good = 0;
	uint64_t gen = absent ? 0 : strtoull(what, NULL, 10);

	for (i = from; i < to && v; i++) {
		int64_t got;

		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		got = mooncake_store_get_into(st, key, v, size);
		if (absent ? got == -704 : got == (int64_t)size && cc_check(v, size, key, gen))
			good++;
		else
			printf("# get %s: %" PRId64 "%s\n", key, got, got > 0 ? " (other bytes)" : "");
	}
	free(v);
	ok(v && good == to - from, "%s/%d..%d: %d of %d %s", prefix, from, to - 1, good, to - from,
	   absent ? "absent" : "read back as that generation");
	return good != to - from;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Max and p99 of n latencies (sorts them). */
static void lat_stats(double *lat, size_t n, double *max, double *p99)
{
	*max = *p99 = 0;
	if (n == 0)
		return;
	qsort(lat, n, sizeof(*lat), cmp_double);
	*max = lat[n - 1];
	*p99 = lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
}

static int get_loop(const char *prefix, int n, size_t size, double secs)
{
	char key[128];
	void *v = malloc(size);
	size_t cap = 100000, cnt = 0;
	double *lat = calloc(cap, sizeof(*lat)), end = now_s() + secs, mx, p99;
	int i = 0, bad = 0;

	while (v && lat && now_s() < end && cnt < cap) {
		double t0 = now_s();
		int64_t got;

		snprintf(key, sizeof(key), "%s/%d", prefix, i++ % n);
		memset(v, 0, size);
		got = mooncake_store_get_into(st, key, v, size);
		lat[cnt] = now_s() - t0;
		if (got != (int64_t)size || !cc_check(v, size, key, 3) || lat[cnt] > 5.0) {
			if (bad++ < 5)
				printf("# get %s: %" PRId64 " in %.3f s\n", key, got, lat[cnt]);
		}
		cnt++;
	}
	lat_stats(lat, cnt, &mx, &p99);
	printf("# get-loop %s: %zu gets, max %.3f s, p99 %.3f s\n", prefix, cnt, mx, p99);
	ok(v && lat && cnt > 0 && bad == 0,
	   "%zu gets of %s/* returned the right bytes within 5 s each (max %.3f s, p99 %.3f s, "
	   "%d bad)", cnt, prefix, mx, p99, bad);
	free(v);
	free(lat);
	return tap_done();
}

static int put_loop(const char *prefix, int n, size_t size, int replicas, const char *file)
{
	mooncake_replicate_config_t cfg = { .replica_num = (size_t)replicas };
	FILE *f = fopen(file, "a");
	char key[128];
	void *v = malloc(size);
	double *lat = calloc((size_t)n + 1, sizeof(*lat)), mx, p99;
	int i, okn = 0, slow = 0;
	int all = atoi(cc_env("MC_EXPECT_ALL_PUTS", "0"));

	for (i = 0; i < n && f && v && lat; i++) {
		double t0 = now_s();
		int rc;

		snprintf(key, sizeof(key), "%s/%d", prefix, i);
		cc_fill(v, size, key, 5);
		rc = mooncake_store_put(st, key, v, size, &cfg);
		lat[i] = now_s() - t0;
		slow += lat[i] > 10.0;
		if (rc == 0) {
			fprintf(f, "%s\n", key);
			fflush(f);
			okn++;
		} else {
			printf("# put %s: %d in %.3f s\n", key, rc, lat[i]);
		}
	}
	lat_stats(lat, (size_t)i, &mx, &p99);
	printf("# put-loop %s: %d of %d acknowledged, max %.3f s\n", prefix, okn, n, mx);
	ok(f && v && lat && slow == 0, "%d puts each ended within 10 s (max %.3f s)", n, mx);
	if (all)
		is(okn, n, "all %d puts succeeded (%d did)", n, okn);
	if (f)
		fclose(f);
	free(v);
	free(lat);
	return tap_done();
}

static int master_stop(const char *gofile)
{
	double limit = atof(cc_env("MC_RPC_TIMEOUT_MS", "5000")) / 1000.0 + 0.5;
	double t0, d, worst = 0, end;
	char buf[64] = "x";
	int rc, bad = 0, fails = 0;

	char ready[1024];
	FILE *rf;

	snprintf(ready, sizeof(ready), "%s.ready", gofile);
	rf = fopen(ready, "w");
	if (rf)
		fclose(rf);
	while (access(gofile, F_OK) != 0)
		usleep(10000);
	t0 = now_s();
	rc = mooncake_store_put(st, "stale/0", buf, sizeof(buf), NULL);
	d = now_s() - t0;
	printf("# put while the master is stopped: %d in %.3f s\n", rc, d);
	ok((rc == -900 || rc == -901) && d <= limit,
	   "a put to a stopped master fails with -900/-901 within %.1f s (%d in %.3f s)", limit,
	   rc, d);
	end = now_s() + 60;
	for (;;) {
		struct timespec ts;

		t0 = now_s();
		rc = mooncake_store_is_exist(st, "probe/none");
		d = now_s() - t0;
		if (rc >= 0) {
			clock_gettime(CLOCK_REALTIME, &ts);
			printf("first_success_wall=%.3f\n", (double)ts.tv_sec + ts.tv_nsec / 1e9);
			break;
		}
		fails++;
		worst = d > worst ? d : worst;
		if ((rc != -900 && rc != -901) || d > limit) {
			if (bad++ < 5)
				printf("# ExistKey: %d in %.3f s\n", rc, d);
		}
		if (now_s() > end)
			break;
		usleep(20000);
	}
	ok(bad == 0 && rc >= 0,
	   "%d calls failed while the master was stopped, each with -900/-901 within %.1f s "
	   "(slowest %.3f s); then the master answered", fails, limit, worst);
	return tap_done();
}

int main(int argc, char **argv)
{
	int rc = 2;

	if (argc < 2 || connect_store())
		return 2;
	if (!strcmp(argv[1], "write-acked") && (argc == 5 || argc == 6))
		rc = write_acked(argv[2], atof(argv[3]), (size_t)atol(argv[4]),
				 argc == 6 ? argv[5] : "ack");
	else if (!strcmp(argv[1], "verify-acked") && argc == 4)
		rc = verify_acked(argv[2], (size_t)atol(argv[3]));
	else if (!strcmp(argv[1], "put-preferred") && argc >= 5)
		rc = put_preferred(argv[2], atoi(argv[3]), argv[4], argc > 5 ? atoi(argv[5]) : 1);
	else if (!strcmp(argv[1], "fill") && argc >= 5)
		rc = fill(argv[2], atoi(argv[3]), (size_t)atol(argv[4]), argc > 5 ? atoi(argv[5]) : 1);
	else if (!strcmp(argv[1], "verify") && argc >= 5)
		rc = verify(argv[2], atoi(argv[3]), (size_t)atol(argv[4]),
			    argc > 5 ? atoi(argv[5]) : 0);
	else if (!strcmp(argv[1], "check") && argc == 5)
		rc = check(argv[2], atoi(argv[3]), argv[4]);
	else if (!strcmp(argv[1], "remove") && argc == 5)
		rc = remove_span(argv[2], atoi(argv[3]), atoi(argv[4]));
	else if (!strcmp(argv[1], "put-gen") && argc == 7)
		rc = put_gen(argv[2], atoi(argv[3]), atoi(argv[4]), (size_t)atol(argv[5]),
			     strtoull(argv[6], NULL, 10));
	else if (!strcmp(argv[1], "expect") && argc == 7)
		rc = expect_span(argv[2], atoi(argv[3]), atoi(argv[4]), (size_t)atol(argv[5]),
				 argv[6]);
	else if (!strcmp(argv[1], "get-loop") && argc == 6)
		rc = get_loop(argv[2], atoi(argv[3]), (size_t)atol(argv[4]), atof(argv[5]));
	else if (!strcmp(argv[1], "put-loop") && argc == 7)
		rc = put_loop(argv[2], atoi(argv[3]), (size_t)atol(argv[4]), atoi(argv[5]), argv[6]);
	else if (!strcmp(argv[1], "master-stop") && argc == 3)
		rc = master_stop(argv[2]);
	else if (!strcmp(argv[1], "writer") && argc == 8)
		rc = writer(argv[2], atof(argv[3]), (size_t)atol(argv[4]), atoi(argv[5]), argv[6],
			    argv[7]);
	else if (!strcmp(argv[1], "reader") && argc == 7)
		rc = reader(argv[2], atoi(argv[3]), (size_t)atol(argv[4]), atof(argv[5]), argv[6]);
	else if (!strcmp(argv[1], "burst") && argc >= 6)
		rc = burst(argv[2], argv[3], atoi(argv[4]), (size_t)atol(argv[5]),
			   argc > 6 && !strcmp(argv[6], "hard"));
	else if (!strcmp(argv[1], "timed-put") && argc == 4)
		rc = timed_put(argv[2], (size_t)atol(argv[3]));
	else if (!strcmp(argv[1], "probe") && argc == 4)
		rc = probe(argv[2], (size_t)atol(argv[3]));
	else if (!strcmp(argv[1], "eviction"))
		rc = eviction();
	else if (!strcmp(argv[1], "idle") && argc == 3) {
		double end = now_s() + atof(argv[2]);

		while (now_s() < end)
			usleep(50000);
		rc = 0;
	}
	mooncake_store_destroy(st);
	return rc;
}

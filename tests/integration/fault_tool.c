/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client driver for the fault tests (test_recovery.sh, test_liveness.sh, test_eviction.sh).
 * Master address in MC_MASTER.  Subcommands:
 *
 *   write-acked FILE SECONDS SIZE   put keys ack/0, ack/1, ... for SECONDS; append every key
 *                                   whose put returned 0 to FILE (one per line, flushed)
 *   verify-acked FILE SIZE          every key in FILE reads back byte-identical
 *   put-preferred PREFIX N SEG [REPLICAS]   put N keys PREFIX/i preferring segment SEG
 *   check PREFIX N EXPECT           get every PREFIX/i: EXPECT "ok" (identical bytes) or a code
 *   eviction                        fill a small pool and check the eviction order
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
 *   burst FILE PREFIX N SIZE [hard] put PREFIX/0..N-1 once each, no retry (hard: hard-pinned);
 *                                   append the acknowledged keys to FILE; print
 *                                   "burst: A acked R refused E other S ms slowest" (exit 0);
 *                                   MC_BURST_GAP_MS: pause between puts
 *   timed-put KEY SIZE              one put; print "put: RC MS"
 *   probe FILE SIZE                 get every key of FILE: print "probe: I identical A absent
 *                                   E errors W wrong"; exit 1 only if some bytes were wrong
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
	rc = mooncake_store_setup(st, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "",
				  cc_env("MC_MASTER", "127.0.0.1:50051"));
	if (rc)
		fprintf(stderr, "setup failed: %d\n", rc);
	return rc;
}

static int write_acked(const char *file, double secs, size_t size)
{
	FILE *f = fopen(file, "w");
	char key[64];
	void *v = malloc(size);
	double end = now_s() + secs;
	uint64_t i = 0, ok_n = 0, fail_n = 0;

	if (f == NULL || v == NULL)
		return 1;
	while (now_s() < end && i < 20000) {
		int rc;

		snprintf(key, sizeof(key), "ack/%" PRIu64, i++);
		cc_fill(v, size, key, 5);
		rc = mooncake_store_put(st, key, v, size, NULL);
		if (rc == 0) {
			fprintf(f, "%s\n", key);
			fflush(f);
			ok_n++;
		} else {
			fail_n++;
			usleep(20000);	/* the master may be restarting */
		}
	}
	fclose(f);
	free(v);
	printf("# write-acked: %" PRIu64 " puts acknowledged, %" PRIu64 " failed\n", ok_n, fail_n);
	return ok_n > 0 ? 0 : 1;
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
	ok(bad == 0, "%d keys %s/*: %s (%d differ)", n, prefix, expect, bad);
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
	ok(fails == 0, "filled 80%% of the pool with %d objects of 1 MiB (%d failed)",
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
	ok(fails == 0, "writing half a pool more succeeds through eviction (%d failed)", fails);
	for (i = 0; i < 2; i++) {
		snprintf(key, sizeof(key), "ev/pinned/%d", i);
		got = mooncake_store_get_into(st, key, v, vs);
		pinned_ok += got == (int64_t)vs && cc_check(v, vs, key, 1);
	}
	ok(pinned_ok == 2, "hard-pinned objects survive (%d of 2)", pinned_ok);
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "ev/old/%d", i);
		got = mooncake_store_get_into(st, key, v, vs);
		hot_ok += got == (int64_t)vs && cc_check(v, vs, key, 1);
	}
	for (i = 8; i < 24; i++) {
		snprintf(key, sizeof(key), "ev/old/%d", i);
		cold_gone += mooncake_store_is_exist(st, key) == 0;
	}
	ok(cold_gone == 16, "the least recently used objects went first (%d of 16 gone)", cold_gone);
	ok(hot_ok == 8, "the recently read objects are still there (%d of 8)", hot_ok);

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
	ok(fails == 0, "with every key leased by ExistKey probes, a pool's worth of puts still "
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
	ok(bad == 0, "removed %s/%d..%d (%d were known)", prefix, from, to - 1, removed);
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

int main(int argc, char **argv)
{
	int rc = 2;

	if (argc < 2 || connect_store())
		return 2;
	if (!strcmp(argv[1], "write-acked") && argc == 5)
		rc = write_acked(argv[2], atof(argv[3]), (size_t)atol(argv[4]));
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
	else if (!strcmp(argv[1], "burst") && argc >= 6)
		rc = burst(argv[2], argv[3], atoi(argv[4]), (size_t)atol(argv[5]),
			   argc > 6 && !strcmp(argv[6], "hard"));
	else if (!strcmp(argv[1], "timed-put") && argc == 4)
		rc = timed_put(argv[2], (size_t)atol(argv[3]));
	else if (!strcmp(argv[1], "probe") && argc == 4)
		rc = probe(argv[2], (size_t)atol(argv[3]));
	else if (!strcmp(argv[1], "eviction"))
		rc = eviction();
	mooncake_store_destroy(st);
	return rc;
}

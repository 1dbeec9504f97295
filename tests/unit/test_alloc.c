/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the per-segment offset allocator (src/segment/alloc.c): exact results on small
 * hand-built layouts, a randomized run against a shadow map of the segment, multi-TiB segments, and
 * a timing print (not an assertion) for the reserve/release hot path and an ascending rebuild.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "segment/alloc.h"
#include "tap.h"

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define TIB ((uint64_t)1 << 40)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t rng_below(uint64_t n)
{
	return rng() % n;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The allocator keeps nothing per reservation: the caller keeps (offset, length).  The tests keep
 * them in handles from a static pool (never freed, so no leak reports). */
struct hnd {
	uint64_t off, len;
};

#define HND_POOL (1u << 22)
static struct hnd hnd_pool[HND_POOL];
static size_t hnd_next;

static struct hnd *hnd_new(uint64_t off, uint64_t len)
{
	struct hnd *h = &hnd_pool[hnd_next++ % HND_POOL];

	h->off = off;
	h->len = mc_alloc_round(len);
	return h;
}

static uint64_t hnd_off(const struct hnd *h)
{
	return h->off;
}

static uint64_t hnd_len(const struct hnd *h)
{
	return h->len;
}

static int t_reserve(struct mc_alloc *a, uint64_t len, struct hnd **h, uint64_t *off)
{
	int rc = mc_alloc_reserve(a, len, off);

	if (rc == 0)
		*h = hnd_new(*off, len);
	return rc;
}

static int t_reserve_at(struct mc_alloc *a, uint64_t off, uint64_t len, struct hnd **h)
{
	int rc = mc_alloc_reserve_at(a, off, len);

	if (rc == 0)
		*h = hnd_new(off, len);
	return rc;
}

static void t_release(struct mc_alloc *a, struct hnd *h)
{
	if (h != NULL)
		mc_alloc_release(a, h->off, h->len);
}

static void test_basic(void)
{
	struct mc_alloc *a;
	struct hnd *b1, *b2, *b3;
	uint64_t off1 = 1, off2 = 1, off3;
	int r1, r2;

	ok(mc_alloc_new(0) == NULL && mc_alloc_new(63) == NULL, "size 0 and sub-granule sizes are refused");
	a = mc_alloc_new(100);
	ok(a != NULL && mc_alloc_capacity(a) == 64, "capacity rounds down to the granule");
	mc_alloc_free(a);
	mc_alloc_free(NULL);

	a = mc_alloc_new(MIB);
	ok(a != NULL && mc_alloc_capacity(a) == MIB && mc_alloc_used(a) == 0 &&
		   mc_alloc_free_ranges(a) == 1 && mc_alloc_largest_free(a) == MIB,
	   "fresh allocator is one free range");
	r1 = t_reserve(a, 100, &b1, &off1);
	ok(r1 == 0 && off1 == 0 && hnd_off(b1) == 0 && hnd_len(b1) == 128,
	   "100 bytes reserve 128 at offset 0");
	r2 = t_reserve(a, 64, &b2, &off2);
	ok(r2 == 0 && off2 == 128 && hnd_len(b2) == 64, "next reservation follows it");
	ok(mc_alloc_used(a) == 192 && mc_alloc_free_ranges(a) == 1 && mc_alloc_largest_free(a) == MIB - 192,
	   "used %" PRIu64 ", one free range", mc_alloc_used(a));
	is(t_reserve(a, 0, &b3, &off3), -EINVAL, "len 0 is -EINVAL");
	is(t_reserve(a, MIB + 1, &b3, &off3), -EINVAL, "len beyond the segment is -EINVAL");
	is(t_reserve(a, MIB, &b3, &off3), -ENOSPC, "segment-sized len with data in it is -ENOSPC");

	t_release(a, b1);
	ok(mc_alloc_used(a) == 64 && mc_alloc_free_ranges(a) == 2, "release leaves a hole before b2");
	ok(t_reserve(a, 128, &b1, &off1) == 0 && off1 == 0, "the hole is reused exactly");
	t_release(a, b2);
	t_release(a, b1);
	t_release(a, NULL);
	is(mc_alloc_release(a, 0, 128), -EINVAL, "releasing with nothing reserved is -EINVAL");
	is(mc_alloc_release(a, 0, 0), -EINVAL, "releasing len 0 is -EINVAL");
	ok(mc_alloc_used(a) == 0 && mc_alloc_free_ranges(a) == 1 && mc_alloc_check(a) == 0,
	   "all released: one free range, invariants hold");
	mc_alloc_free(a);
}

static void test_exhaustion(void)
{
	struct mc_alloc *a = mc_alloc_new(64 * KIB);
	struct hnd *b[64], *x;
	uint64_t off, bad = 0;
	int i;

	for (i = 0; i < 64; i++)
		if (t_reserve(a, KIB, &b[i], &off) != 0 || off != (uint64_t)i * KIB)
			bad++;
	is(bad, 0, "64 x 1 KiB fill a 64 KiB segment in address order");
	is(t_reserve(a, 1, &x, &off), -ENOSPC, "full segment gives -ENOSPC");
	ok(mc_alloc_free_ranges(a) == 0 && mc_alloc_largest_free(a) == 0 && mc_alloc_used(a) == 64 * KIB,
	   "full: no free range, used == capacity");
	t_release(a, b[17]);
	ok(t_reserve(a, KIB, &x, &off) == 0 && off == 17 * KIB, "a released slot is found again");
	is(mc_alloc_check(a), 0, "invariants hold");
	mc_alloc_free(a);
}

static void test_coalescing(void)
{
	static const int orders[6][3] = {
		{ 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 },
	};
	struct mc_alloc *a;
	struct hnd *b[3], *all;
	uint64_t off;
	int p, i, bad = 0;

	a = mc_alloc_new(3 * 4096);
	for (i = 0; i < 3; i++)
		t_reserve(a, 4096, &b[i], &off);
	t_release(a, b[0]);
	t_release(a, b[2]);
	ok(mc_alloc_free_ranges(a) == 2 && mc_alloc_largest_free(a) == 4096,
	   "A and C released: two separate 4 KiB ranges");
	is(t_reserve(a, 8192, &all, &off), -ENOSPC, "8 KiB does not fit two 4 KiB holes");
	t_release(a, b[1]);
	ok(mc_alloc_free_ranges(a) == 1 && mc_alloc_largest_free(a) == 3 * 4096,
	   "B released: both neighbours coalesce into one range");
	ok(t_reserve(a, 3 * 4096, &all, &off) == 0 && off == 0, "full-size reservation succeeds");
	mc_alloc_free(a);

	for (p = 0; p < 6; p++) {
		a = mc_alloc_new(3 * 4096);
		for (i = 0; i < 3; i++)
			t_reserve(a, 4096, &b[i], &off);
		for (i = 0; i < 3; i++)
			t_release(a, b[orders[p][i]]);
		if (mc_alloc_free_ranges(a) != 1 || mc_alloc_check(a) != 0 ||
		    t_reserve(a, 3 * 4096, &all, &off) != 0)
			bad++;
		mc_alloc_free(a);
	}
	is(bad, 0, "every release order of three blocks coalesces to one range");
}

static void test_fragmentation(void)
{
	struct mc_alloc *a = mc_alloc_new(64 * 4096);
	struct hnd *b[64], *x;
	uint64_t off;
	int i;

	for (i = 0; i < 64; i++)
		t_reserve(a, 4096, &b[i], &off);
	for (i = 0; i < 64; i += 2)
		t_release(a, b[i]);
	ok(mc_alloc_free_ranges(a) == 32 && mc_alloc_used(a) == 32 * 4096 &&
		   mc_alloc_largest_free(a) == 4096,
	   "alternate releases leave 32 holes of 4 KiB (128 KiB free)");
	is(t_reserve(a, 8192, &x, &off), -ENOSPC,
	   "8 KiB fails although 128 KiB are free: no hole holds it");
	is(t_reserve(a, 4097, &x, &off), -ENOSPC, "4 KiB + 1 byte fails too");
	t_release(a, b[5]);
	ok(mc_alloc_free_ranges(a) == 31 && mc_alloc_largest_free(a) == 3 * 4096,
	   "releasing block 5 merges holes 4 and 6 into 12 KiB");
	ok(t_reserve(a, 8192, &x, &off) == 0 && off == 4 * 4096, "now 8 KiB fits at the merged hole");
	is(mc_alloc_check(a), 0, "invariants hold");
	mc_alloc_free(a);
}

static void test_reserve_at(void)
{
	struct mc_alloc *a = mc_alloc_new(MIB);
	struct hnd *b, *x, *y, *c[8];
	static const uint64_t ooo[8] = { 900 * KIB, 500 * KIB, 8 * KIB, 700 * KIB,
					 8 * KIB + 64, 1000 * KIB, 256 * KIB, 12 * KIB };
	uint64_t off;
	int i, bad = 0;

	ok(t_reserve_at(a, 4096, 100, &b) == 0 && hnd_off(b) == 4096 &&
		   hnd_len(b) == 128,
	   "reserve_at places [4096, 4224) exactly");
	ok(mc_alloc_free_ranges(a) == 2 && mc_alloc_used(a) == 128, "it splits the free range in two");
	is(t_reserve_at(a, 4096 + 64, 64, &x), -EEXIST, "inside a reserved block is -EEXIST");
	is(t_reserve_at(a, 4032, 128, &x), -EEXIST, "overlapping its start is -EEXIST");
	is(t_reserve_at(a, 0, 8192, &x), -EEXIST, "covering it entirely is -EEXIST");
	is(t_reserve_at(a, 4000, 64, &x), -EINVAL, "unaligned offset is -EINVAL");
	is(t_reserve_at(a, MIB, 64, &x), -EINVAL, "offset at capacity is -EINVAL");
	is(t_reserve_at(a, MIB - 64, 65, &x), -EINVAL, "range past capacity is -EINVAL");
	is(t_reserve_at(a, 0, 0, &x), -EINVAL, "len 0 is -EINVAL");
	ok(t_reserve_at(a, 4224, 64, &x) == 0 && hnd_off(x) == 4224,
	   "the adjacent range right after it is free");
	ok(t_reserve_at(a, 0, 4096, &y) == 0 && mc_alloc_free_ranges(a) == 1,
	   "filling [0, 4096) exactly leaves one free range");
	ok(t_reserve_at(a, MIB - 64, 64, &x) == 0 && mc_alloc_free_ranges(a) == 1,
	   "the last granule can be reserved");

	for (i = 0; i < 8; i++)
		if (t_reserve_at(a, ooo[i], 64, &c[i]) != 0 || hnd_off(c[i]) != ooo[i])
			bad++;
	ok(bad == 0 && mc_alloc_check(a) == 0, "out-of-order reserve_at places every range exactly");
	ok(t_reserve_at(a, 500 * KIB, 64, &x) == -EEXIST &&
		   t_reserve_at(a, 8 * KIB, 128, &x) == -EEXIST,
	   "out-of-order ranges are seen as reserved");
	t_release(a, c[1]);
	ok(t_reserve_at(a, 500 * KIB - 64, 192, &x) == 0 && mc_alloc_check(a) == 0,
	   "a released out-of-order range can be re-reserved, wider");
	ok(t_reserve(a, 200 * KIB, &x, &off) == 0 && off % 64 == 0 &&
		   t_reserve_at(a, off + 100 * KIB, 64, &y) == -EEXIST && mc_alloc_check(a) == 0,
	   "a normal reserve afterwards lands in a free gap (%" PRIu64 ")", off);
	mc_alloc_free(a);
}

/* ------------------------------------------------------------------------ shadow-model stress */

#define ST_UNITS 65536u			/* 4 MiB segment in 64-byte granules */
#define ST_OPS 200000
#define ST_MAX_LIVE 20000

struct live {
	struct hnd *blk;
	uint64_t off, len;
};

static uint8_t shadow[ST_UNITS];

static int shadow_range_free(uint64_t off, uint64_t len)
{
	uint64_t u;

	for (u = off / 64; u < (off + len) / 64; u++)
		if (shadow[u])
			return 0;
	return 1;
}

static void shadow_set(uint64_t off, uint64_t len, uint8_t v)
{
	memset(shadow + off / 64, v, len / 64);
}

/* Free runs and the longest one, in bytes. */
static void shadow_runs(size_t *nruns, uint64_t *longest)
{
	uint64_t u, run = 0;

	*nruns = 0;
	*longest = 0;
	for (u = 0; u < ST_UNITS; u++) {
		if (shadow[u]) {
			run = 0;
			continue;
		}
		if (run++ == 0)
			(*nruns)++;
		if (run * 64 > *longest)
			*longest = run * 64;
	}
}

static uint64_t stress_len(void)
{
	uint64_t p = rng_below(100);

	if (p < 70)
		return 1 + rng_below(4 * KIB);
	if (p < 95)
		return 1 + rng_below(64 * KIB);
	return 1 + rng_below(512 * KIB);
}

static void test_stress(void)
{
	struct mc_alloc *a = mc_alloc_new(ST_UNITS * 64);
	struct live *lv = calloc(ST_MAX_LIVE, sizeof(*lv));
	struct hnd *blk;
	uint64_t off, len, used = 0, longest, cap = (uint64_t)ST_UNITS * 64;
	size_t nlive = 0, nruns, k;
	long overlap = 0, bounds = 0, usedbad = 0, nospc_bad = 0, at_bad = 0, check_bad = 0;
	long stat_bad = 0, reserves = 0, nospc = 0, at_ok = 0, at_exist = 0, releases = 0;
	int op, rc;

	memset(shadow, 0, sizeof(shadow));
	for (op = 0; op < ST_OPS; op++) {
		uint64_t p = rng_below(100);
		int want_reserve = used < cap * 3 / 4 ? 55 : 30;

		if (nlive > 0 && (p >= (uint64_t)want_reserve + 10 || nlive == ST_MAX_LIVE)) {
			k = rng_below(nlive);
			t_release(a, lv[k].blk);
			shadow_set(lv[k].off, lv[k].len, 0);
			used -= lv[k].len;
			lv[k] = lv[--nlive];
			releases++;
		} else if (p < (uint64_t)want_reserve) {
			len = stress_len();
			rc = t_reserve(a, len, &blk, &off);
			if (rc == 0) {
				reserves++;
				len = (len + 63) & ~(uint64_t)63;
				if (off % 64 || off + len > cap || hnd_len(blk) != len ||
				    hnd_off(blk) != off)
					bounds++;
				else if (!shadow_range_free(off, len))
					overlap++;
				shadow_set(off, len, 1);
				used += len;
				lv[nlive++] = (struct live){ blk, off, len };
			} else if (rc == -ENOSPC) {
				/* Documented guarantee: -ENOSPC only if no range of len + len/32 is free. */
				nospc++;
				len = (len + 63) & ~(uint64_t)63;
				shadow_runs(&nruns, &longest);
				if (longest >= len + len / 32 + 64)
					nospc_bad++;
			} else {
				bounds++;
			}
		} else {
			off = rng_below(ST_UNITS) * 64;
			len = 1 + rng_below(2 * KIB);
			rc = t_reserve_at(a, off, len, &blk);
			len = (len + 63) & ~(uint64_t)63;
			if (off + len > cap) {
				if (rc != -EINVAL)
					at_bad++;
			} else if (shadow_range_free(off, len)) {
				if (rc != 0 || hnd_off(blk) != off ||
				    hnd_len(blk) != len) {
					at_bad++;
				} else {
					at_ok++;
					shadow_set(off, len, 1);
					used += len;
					lv[nlive++] = (struct live){ blk, off, len };
				}
			} else {
				if (rc != -EEXIST)
					at_bad++;
				else
					at_exist++;
			}
		}
		if (mc_alloc_used(a) != used)
			usedbad++;
		if (op % 997 == 0) {
			if (mc_alloc_check(a) != 0)
				check_bad++;
			shadow_runs(&nruns, &longest);
			if (mc_alloc_free_ranges(a) != nruns || mc_alloc_largest_free(a) > longest ||
			    mc_alloc_largest_free(a) < longest - longest / 32)
				stat_bad++;
		}
	}
	printf("# stress: %ld reserves, %ld -ENOSPC, %ld reserve_at ok, %ld -EEXIST, %ld releases, "
	       "%zu live at end\n", reserves, nospc, at_ok, at_exist, releases, nlive);
	is(bounds, 0, "stress: every reservation aligned, sized and within bounds");
	is(overlap, 0, "stress: no two live blocks overlap");
	is(usedbad, 0, "stress: used bytes match the shadow model after every op");
	is(nospc_bad, 0, "stress: -ENOSPC only when no range of len + len/32 is free");
	is(at_bad, 0, "stress: reserve_at succeeds exactly when the range is free, else -EEXIST");
	ok(check_bad == 0 && stat_bad == 0, "stress: invariants, free_ranges and largest_free match");
	ok(reserves > 1000 && nospc > 0 && at_ok > 100 && at_exist > 100,
	   "stress: the run exercised every path");

	while (nlive > 0) {
		k = rng_below(nlive);
		t_release(a, lv[k].blk);
		lv[k] = lv[--nlive];
	}
	ok(mc_alloc_used(a) == 0 && mc_alloc_free_ranges(a) == 1 && mc_alloc_check(a) == 0,
	   "stress: after releasing everything, one free range");
	ok(t_reserve(a, cap, &blk, &off) == 0 && off == 0, "stress: a full-size reservation works");
	t_release(a, blk);
	free(lv);
	mc_alloc_free(a);
}

static void test_big(void)
{
	struct mc_alloc *a = mc_alloc_new(TIB);
	struct hnd **b = calloc(1024, sizeof(*b)), *x, *y;
	uint64_t off, big;
	int i, bad = 0;

	for (i = 0; i < 1024; i++)
		if (t_reserve(a, GIB, &b[i], &off) != 0 || off != (uint64_t)i * GIB)
			bad++;
	ok(bad == 0 && mc_alloc_used(a) == TIB, "1 TiB segment holds 1024 x 1 GiB");
	is(t_reserve(a, 64, &x, &off), -ENOSPC, "and then is full");
	for (i = 0; i < 1024; i += 2)
		t_release(a, b[i]);
	ok(mc_alloc_free_ranges(a) == 512 && mc_alloc_largest_free(a) == GIB &&
		   t_reserve(a, 2 * GIB, &x, &off) == -ENOSPC,
	   "512 holes of 1 GiB do not hold 2 GiB");
	for (i = 1; i < 1024; i += 2)
		t_release(a, b[i]);
	ok(mc_alloc_free_ranges(a) == 1 && t_reserve(a, TIB, &x, &off) == 0 && off == 0,
	   "released: one 1 TiB reservation works");
	t_release(a, x);
	ok(t_reserve_at(a, TIB / 2 + 4096, 1, &x) == 0 && hnd_off(x) == TIB / 2 + 4096 &&
		   t_reserve(a, TIB / 2, &y, &off) == 0 && off == 0 && mc_alloc_check(a) == 0,
	   "reserve_at in the middle of 1 TiB, then half a TiB below it");
	mc_alloc_free(a);
	free(b);

	big = (uint64_t)1 << 48;
	a = mc_alloc_new(big);
	ok(t_reserve(a, big / 2 + 1, &x, &off) == 0 && hnd_len(x) == big / 2 + 64,
	   "2^48 segment: half + 1 byte rounds to half + 64");
	ok(t_reserve(a, big / 2, &y, &off) == -ENOSPC &&
		   t_reserve(a, big / 2 - 64, &y, &off) == 0 && off == big / 2 + 64 &&
		   mc_alloc_used(a) == big,
	   "2^48 segment: the exact remainder fits, one granule more does not");
	mc_alloc_free(a);

	a = mc_alloc_new(UINT64_MAX);
	big = mc_alloc_capacity(a);
	is(big, (UINT64_MAX & ~(uint64_t)63), "2^64 - 1 segment: capacity %" PRIu64, big);
	ok(t_reserve(a, UINT64_MAX, &x, &off) == -EINVAL &&
		   t_reserve_at(a, big - 64, 128, &x) == -EINVAL &&
		   t_reserve_at(a, 64, UINT64_MAX, &x) == -EINVAL,
	   "2^64 - 1 segment: oversized requests are -EINVAL, no overflow");
	ok(t_reserve(a, big, &x, &off) == 0 && off == 0 && mc_alloc_used(a) == big,
	   "2^64 - 1 segment: one full reservation");
	t_release(a, x);
	ok(t_reserve_at(a, big - 64, 64, &x) == 0 && t_reserve(a, big - 64, &y, &off) == 0 &&
		   off == 0 && mc_alloc_check(a) == 0,
	   "2^64 - 1 segment: last granule by reserve_at, the rest by reserve");
	mc_alloc_free(a);
}

/* ------------------------------------------------------------------------ timing */

#define T_OPS 1000000
#define T_RING 16384

static void test_timing(void)
{
	struct mc_alloc *a = mc_alloc_new(64 * GIB);
	struct hnd **ring = calloc(T_RING, sizeof(*ring));
	struct hnd **blk = calloc(T_OPS, sizeof(*blk));
	uint64_t *lens = calloc(T_OPS, sizeof(*lens));
	uint64_t off, next;
	double t0, t1;
	int i, fails = 0;

	for (i = 0; i < T_OPS; i++)
		lens[i] = 1 + rng_below(rng_below(4) ? 64 * KIB : 4 * MIB);
	t0 = now_ns();
	for (i = 0; i < T_OPS; i++) {
		struct hnd **slot = &ring[i % T_RING];

		if (*slot != NULL)
			t_release(a, *slot);
		if (t_reserve(a, lens[i], slot, &off) != 0) {
			*slot = NULL;
			fails++;
		}
	}
	t1 = now_ns();
	printf("# timing: %d reserve + release pairs, %d live: %.1f ns per pair, %.1f ns per op\n",
	       T_OPS, T_RING, (t1 - t0) / T_OPS, (t1 - t0) / (2.0 * T_OPS));
	ok(fails == 0 && mc_alloc_check(a) == 0, "timing run: every reservation succeeded");
	mc_alloc_free(a);

	/* Rebuild: a million persisted ranges, ascending, with random gaps, into 1 TiB. */
	a = mc_alloc_new(TIB);
	next = 0;
	fails = 0;
	for (i = 0; i < T_OPS; i++) {
		lens[i] = next;
		next += ((1 + rng_below(256 * KIB)) + 63) / 64 * 64 + rng_below(4) * 4096;
	}
	t0 = now_ns();
	for (i = 0; i < T_OPS; i++)
		if (t_reserve_at(a, lens[i], 64, &blk[i]) != 0)
			fails++;
	t1 = now_ns();
	printf("# timing: ascending rebuild of %d ranges: %.1f ms total, %.1f ns per reserve_at\n",
	       T_OPS, (t1 - t0) / 1e6, (t1 - t0) / T_OPS);
	ok(fails == 0 && mc_alloc_used(a) == (uint64_t)T_OPS * 64 && mc_alloc_check(a) == 0,
	   "ascending rebuild of 1M ranges places all of them");
	t0 = now_ns();
	for (i = 0; i < T_OPS; i++)
		t_release(a, blk[i]);
	t1 = now_ns();
	printf("# timing: releasing them: %.1f ns per release\n", (t1 - t0) / T_OPS);
	ok(mc_alloc_free_ranges(a) == 1 && mc_alloc_used(a) == 0, "and releasing them coalesces to one range");
	mc_alloc_free(a);
	free(lens);
	free(blk);
	free(ring);
}

int main(void)
{
	test_basic();
	test_exhaustion();
	test_coalescing();
	test_fragmentation();
	test_reserve_at();
	test_stress();
	test_big();
	test_timing();
	return tap_done();
}

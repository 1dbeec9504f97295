/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reload's ranges bucketed by segment and offset (src/master/load_ranges.c): every range
 * added is handed back once, with its offset and length, per segment in ascending offset order,
 * whatever the order they came in, the segment's size, the buckets' fill (empty, one range,
 * thousands, a block chain of every size) and the lengths (one too long for 32 bits of units).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "master/load_ranges.h"
#include "segment/alloc.h"
#include "tap.h"

/* Fake segments: the module only keeps and hands back their addresses. */
static char seg_a, seg_b, seg_c;

struct want {
	uint64_t off, len;
	struct mc_segment *seg;
	int seen;
};

static uint64_t rnd_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	return tap_xorshift(&rnd_state);
}

static void shuffle(struct want *w, size_t n)
{
	size_t i;

	for (i = n; i > 1; i--) {
		size_t j = rnd() % i;
		struct want t = w[i - 1];

		w[i - 1] = w[j];
		w[j] = t;
	}
}

/* Add w's ranges in their order (each replica's address is its index + 1), walk them back, and
 * check: each once, its offset and length, ascending per segment, each segment's ranges
 * together.  Returns the number of problems (0) and prints what it checked. */
static int roundtrip(const char *what, struct want *w, size_t n, uint64_t size_a,
		     uint64_t size_b, uint64_t size_c)
{
	struct mc_lranges R;
	struct mc_lseg *sa = NULL, *sb = NULL, *sc = NULL;
	struct mc_segment *cur = NULL, *done[3];
	uint64_t last = 0, total = 0;
	size_t i, m, ndone = 0;
	int bad = 0;

	memset(&R, 0, sizeof(R));
	for (i = 0; i < n; i++) {
		struct mc_lseg **slot = w[i].seg == (struct mc_segment *)&seg_a ? &sa :
					w[i].seg == (struct mc_segment *)&seg_b ? &sb : &sc;
		uint64_t size = slot == &sa ? size_a : slot == &sb ? size_b : size_c;

		w[i].seen = 0;
		mc_lranges_add(&R, slot, w[i].seg, size, w[i].off, w[i].len,
			       (struct mc_replica *)(uintptr_t)(i + 1));
	}
	bad += R.n != n;
	for (;;) {
		const struct mc_lrange *e;
		struct mc_segment *seg;
		uint64_t base;
		size_t k;

		m = mc_lranges_next(&R, &seg, &base, &e);
		if (m == 0)
			break;
		if (seg != cur) {	/* a new segment: never one seen before */
			for (k = 0; k < ndone; k++)
				bad += done[k] == seg;
			if (ndone < 3)
				done[ndone++] = seg;
			cur = seg;
			last = 0;
		}
		for (k = 0; k < m; k++) {
			size_t idx = (size_t)(uintptr_t)e[k].r - 1;
			uint64_t off = base + (uint64_t)e[k].rel * MC_ALLOC_ALIGN;
			uint64_t len = (uint64_t)e[k].units * MC_ALLOC_ALIGN;

			if (idx >= n || w[idx].seen++ || w[idx].seg != seg || w[idx].off != off ||
			    (e[k].units ? len != w[idx].len : w[idx].len >> 38 == 0) || off < last)
				bad++;
			last = off;
		}
		total += m;
	}
	bad += total != n;
	for (i = 0; i < n; i++)
		bad += w[i].seen != 1;
	mc_lranges_fini(&R);
	bad += sa != NULL || sb != NULL || sc != NULL || R.n != 0;
	ok(bad == 0, "%s: %zu ranges handed back once each, in order", what, n);
	return bad;
}

int main(void)
{
	const uint64_t G = 1ull << 30;
	struct want *w;
	size_t n, i;

	/* 200k 64-byte ranges packed in a 2.5 GB-like segment, scattered as a table's rows are. */
	n = 200000;
	w = calloc(n, sizeof(*w));
	for (i = 0; i < n; i++)
		w[i] = (struct want){ (uint64_t)i * 64, 64, (struct mc_segment *)&seg_a, 0 };
	shuffle(w, n);
	roundtrip("packed, shuffled", w, n, 5 * G / 2, 0, 0);
	/* The same in descending order (as the newest rows come first) and ascending. */
	for (i = 0; i < n; i++)
		w[i] = (struct want){ (uint64_t)(n - 1 - i) * 64, 64, (struct mc_segment *)&seg_a, 0 };
	roundtrip("descending", w, n, 5 * G / 2, 0, 0);
	for (i = 0; i < n; i++)
		w[i].off = (uint64_t)i * 64;
	roundtrip("ascending", w, n, 5 * G / 2, 0, 0);

	/* Three segments interleaved: a small one (a bucket of 64 KiB each), a 1 TiB one (buckets
	 * of 128 MiB, sorted in two passes) with ranges of every size, and a tiny one. */
	for (i = 0; i < n; i++) {
		switch (rnd() % 3) {
		case 0:
			w[i] = (struct want){ (rnd() % (64 << 20 >> 6)) << 6, 64,
					      (struct mc_segment *)&seg_a, 0 };
			break;
		case 1:
			w[i] = (struct want){ (rnd() % (1024 * G >> 6)) << 6,
					      ((rnd() % 4096) + 1) << 6,
					      (struct mc_segment *)&seg_b, 0 };
			break;
		default:
			w[i] = (struct want){ (rnd() % 64) << 6, 64, (struct mc_segment *)&seg_c, 0 };
			break;
		}
	}
	roundtrip("three segments interleaved, duplicates in the tiny one", w, n, 64 << 20,
		  1024 * G, 4096);

	/* Skewed: every range in one bucket of a large segment (one sort of them all, its
	 * buffers grown), then one range a bucket (blocks of one range). */
	for (i = 0; i < n; i++)
		w[i] = (struct want){ (rnd() % 2048) << 6, 64, (struct mc_segment *)&seg_a, 0 };
	roundtrip("every range in one bucket", w, n, 1024 * G, 0, 0);
	for (i = 0; i < 8192; i++)
		w[i] = (struct want){ (uint64_t)i << 20, 128, (struct mc_segment *)&seg_a, 0 };
	shuffle(w, 8192);
	roundtrip("one range a bucket", w, 8192, 8 * G, 0, 0);

	/* Buckets of 32 ranges (sorted by insertion) and of 33 (by digits). */
	for (i = 0; i < 32 * 50; i++)
		w[i] = (struct want){ (i % 50) * (64 << 10) + (i / 50) * 64, 64,
				      (struct mc_segment *)&seg_a, 0 };
	shuffle(w, 32 * 50);
	roundtrip("32 ranges a bucket", w, 32 * 50, 50 * (64 << 10), 0, 0);
	for (i = 0; i < 33 * 50; i++)
		w[i] = (struct want){ (i % 50) * (64 << 10) + (i / 50) * 64, 64,
				      (struct mc_segment *)&seg_a, 0 };
	shuffle(w, 33 * 50);
	roundtrip("33 ranges a bucket", w, 33 * 50, 50 * (64 << 10), 0, 0);

	/* One bucket of 128 MiB full of ranges: sorted by two digits of 11 bits. */
	for (i = 0; i < n; i++)
		w[i] = (struct want){ (rnd() % (128 << 20 >> 6)) << 6, 64,
				      (struct mc_segment *)&seg_a, 0 };
	roundtrip("a bucket sorted in two passes", w, n, 1024 * G, 0, 0);

	/* A length of 2^38 bytes or more: units 0 (the object's span tells it). */
	w[0] = (struct want){ 0, 1ull << 40, (struct mc_segment *)&seg_b, 0 };
	w[1] = (struct want){ 1ull << 40, 64, (struct mc_segment *)&seg_b, 0 };
	roundtrip("a range of 1 TiB", w, 2, 0, 4096 * G, 0);

	/* Ranges taken out before the walk (reserved or dropped out of order) come back with r
	 * NULL, in their place; the others as they were; one not there is not found. */
	{
		struct mc_lranges R;
		struct mc_lseg *slot = NULL;
		const struct mc_lrange *e;
		struct mc_segment *seg;
		uint64_t base, last = 0;
		size_t m, k, out = 0, kept = 0, bad = 0, took = 0;

		memset(&R, 0, sizeof(R));
		for (i = 0; i < 20000; i++)
			w[i] = (struct want){ (uint64_t)i * 128, 64, (struct mc_segment *)&seg_a, 0 };
		shuffle(w, 20000);
		for (i = 0; i < 20000; i++)
			mc_lranges_add(&R, &slot, w[i].seg, 4 * G, w[i].off, 64,
				       (struct mc_replica *)(uintptr_t)(i + 1));
		for (i = 0; i < 20000; i += 7)
			took += mc_lranges_take_out(slot, w[i].off,
						    (struct mc_replica *)(uintptr_t)(i + 1)) == 0;
		ok(took == (20000 + 6) / 7, "%zu of %d ranges taken out", took, (20000 + 6) / 7);
		ok(mc_lranges_take_out(slot, w[0].off, (struct mc_replica *)(uintptr_t)1) == -1 &&
		   mc_lranges_take_out(slot, w[1].off, (struct mc_replica *)(uintptr_t)30000) == -1 &&
		   mc_lranges_take_out(slot, 4 * G - 64, (struct mc_replica *)(uintptr_t)2) == -1,
		   "a range taken out already, another replica's, an empty bucket: not found");
		while ((m = mc_lranges_next(&R, &seg, &base, &e)) != 0) {
			for (k = 0; k < m; k++) {
				uint64_t off = base + (uint64_t)e[k].rel * MC_ALLOC_ALIGN;

				bad += off < last;
				last = off;
				if (e[k].r == NULL) {
					out++;
				} else {
					i = (size_t)(uintptr_t)e[k].r - 1;
					bad += i % 7 == 0 || w[i].off != off;
					kept++;
				}
			}
		}
		ok(bad == 0 && out == took && kept == 20000 - took,
		   "handed back in order: %zu taken out (r NULL), %zu as they were", out, kept);
		mc_lranges_fini(&R);
	}

	/* Nothing added: nothing handed back. */
	roundtrip("no range", w, 0, 0, 0, 0);
	free(w);
	return tap_done();
}

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TEST_CLUSTER_COMMON_H
#define MC_TEST_CLUSTER_COMMON_H

/* Helpers shared by the multi-process integration programs: deterministic object contents so a
 * reader can verify bytes without the writer's copy, and environment lookups. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t cc_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* Fill buf with bytes determined by (key, gen). */
static inline void cc_fill(void *buf, size_t n, const char *key, uint64_t gen)
{
	uint64_t x = cc_hash(key) ^ (gen * 0x9e3779b97f4a7c15ull) ^ n;
	uint8_t *p = buf;
	size_t i = 0;

	if (x == 0)
		x = 1;
	for (; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

/* Returns 1 if buf holds exactly the bytes cc_fill would produce. */
static inline int cc_check(const void *buf, size_t n, const char *key, uint64_t gen)
{
	uint8_t *want = malloc(n ? n : 1);
	int same;

	if (want == NULL)
		return 0;
	cc_fill(want, n, key, gen);
	same = memcmp(want, buf, n) == 0;
	free(want);
	return same;
}

static inline const char *cc_env(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

#endif

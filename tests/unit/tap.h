/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TEST_TAP_H
#define MC_TEST_TAP_H

/* A minimal TAP producer for unit tests: each check prints "ok N - what" or "not ok N - what";
 * tap_done() returns the exit status for main (0 when every check passed). */
#include <stdio.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                              \
	do {                                                                       \
		int ok_c_ = !!(cond);                                              \
		tap_n++;                                                           \
		if (!ok_c_)                                                        \
			tap_failed++;                                              \
		printf("%sok %d - ", ok_c_ ? "" : "not ", tap_n);                 \
		printf(__VA_ARGS__);                                               \
		printf("%s\n", ok_c_ ? "" : "   <-- FAILED");                      \
		if (!ok_c_)                                                        \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,     \
				__LINE__, #cond);                                  \
		fflush(stdout);                                                    \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		printf("# %d of %d checks failed\n", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}

#endif

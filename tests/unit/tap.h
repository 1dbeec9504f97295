/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TEST_TAP_H
#define MC_TEST_TAP_H

/* A minimal TAP producer for unit tests: each check prints "ok N - what" or "not ok N - what";
 * tap_done() returns the exit status for main (0 when every check passed).
 *
 *   ok(cond, fmt, ...)          passes when cond is true.
 *   is(got, expected, fmt, ...) passes when got == expected (C's ==, each operand evaluated
 *                               once); a failure prints "# got X, expected Y" with both values.
 *   is_str(got, expected, ...)  the same for C strings (NULL allowed on either side).
 *   tap_rmtree(dir)             removes a test's temporary directory, or keeps it and prints its
 *                               path when MC_TEST_KEEP=1 is set.
 *   tap_xorshift(&state)        the next of a deterministic pseudo-random sequence (xorshift64;
 *                               state nonzero), so a failure reproduces.
 *
 * is() takes integers of any width and signedness, floating values and pointers; the values
 * are printed in their own type (the comparison itself is the plain C one). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

/* Prints the start of a check's line and counts it. */
static inline void tap_begin_(int pass)
{
	tap_n++;
	if (!pass)
		tap_failed++;
	printf("%sok %d - ", pass ? "" : "not ", tap_n);
}

static inline void tap_end_(int pass, const char *file, int line, const char *what)
{
	printf("%s\n", pass ? "" : "   <-- FAILED");
	if (!pass)
		fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
	fflush(stdout);
}

#define ok(cond, ...)                                                                    \
	do {                                                                             \
		int ok_c_ = !!(cond);                                                    \
		tap_begin_(ok_c_);                                                       \
		printf(__VA_ARGS__);                                                     \
		tap_end_(ok_c_, __FILE__, __LINE__, #cond);                              \
	} while (0)

/* How a value of is() travels through "..." after the default argument promotions. */
enum tap_kind_ { TAP_INT_, TAP_UINT_, TAP_LONG_, TAP_ULONG_, TAP_LLONG_, TAP_ULLONG_, TAP_DBL_,
		 TAP_LDBL_, TAP_PTR_ };
#define TAP_KIND_(x)                                                                     \
	_Generic((x), _Bool: TAP_INT_, char: TAP_INT_, signed char: TAP_INT_,            \
		 unsigned char: TAP_INT_, short: TAP_INT_, unsigned short: TAP_INT_,      \
		 int: TAP_INT_, unsigned int: TAP_UINT_, long: TAP_LONG_,                 \
		 unsigned long: TAP_ULONG_, long long: TAP_LLONG_,                        \
		 unsigned long long: TAP_ULLONG_, float: TAP_DBL_, double: TAP_DBL_,      \
		 long double: TAP_LDBL_, default: TAP_PTR_)

static inline void tap_put_value_(char *out, size_t n, int kind, va_list *ap)
{
	switch (kind) {
	case TAP_INT_: snprintf(out, n, "%d", va_arg(*ap, int)); break;
	case TAP_UINT_: snprintf(out, n, "%u", va_arg(*ap, unsigned int)); break;
	case TAP_LONG_: snprintf(out, n, "%ld", va_arg(*ap, long)); break;
	case TAP_ULONG_: snprintf(out, n, "%lu", va_arg(*ap, unsigned long)); break;
	case TAP_LLONG_: snprintf(out, n, "%lld", va_arg(*ap, long long)); break;
	case TAP_ULLONG_: snprintf(out, n, "%llu", va_arg(*ap, unsigned long long)); break;
	case TAP_DBL_: snprintf(out, n, "%.17g", va_arg(*ap, double)); break;
	case TAP_LDBL_: snprintf(out, n, "%.21Lg", va_arg(*ap, long double)); break;
	default: snprintf(out, n, "%p", va_arg(*ap, void *)); break;
	}
}

/* Prints "# got X, expected Y" (to stdout for the TAP log and to stderr): the two values follow
 * kind_got and kind_exp in the variable arguments. */
static inline void tap_operands_(const char *got_src, const char *exp_src, int kind_got,
				 int kind_exp, ...)
{
	char got[64], exp[64];
	va_list ap;

	va_start(ap, kind_exp);
	tap_put_value_(got, sizeof(got), kind_got, &ap);
	tap_put_value_(exp, sizeof(exp), kind_exp, &ap);
	va_end(ap);
	printf("# got %s, expected %s (%s == %s)\n", got, exp, got_src, exp_src);
	fprintf(stderr, "#   got %s, expected %s\n", got, exp);
	fflush(stdout);
}

#define is(got, expected, ...)                                                           \
	do {                                                                             \
		__typeof__(got) is_g_ = (got);                                           \
		__typeof__(expected) is_e_ = (expected);                                 \
		int is_c_;                                                               \
		/* A literal expected value is an int: compare as C's == would with the  \
		 * literal in place, without -Wsign-compare's complaint about it. */      \
		_Pragma("GCC diagnostic push")                                           \
		_Pragma("GCC diagnostic ignored \"-Wsign-compare\"")                     \
		is_c_ = is_g_ == is_e_;                                                  \
		_Pragma("GCC diagnostic pop")                                            \
		tap_begin_(is_c_);                                                       \
		printf(__VA_ARGS__);                                                     \
		tap_end_(is_c_, __FILE__, __LINE__, #got " == " #expected);              \
		if (!is_c_)                                                              \
			tap_operands_(#got, #expected, TAP_KIND_(is_g_), TAP_KIND_(is_e_), \
				      is_g_, is_e_);                                     \
	} while (0)

static inline void tap_str_operands_(const char *got, const char *exp)
{
	printf("# got %s%s%s, expected %s%s%s\n", got ? "\"" : "", got ? got : "NULL",
	       got ? "\"" : "", exp ? "\"" : "", exp ? exp : "NULL", exp ? "\"" : "");
	fprintf(stderr, "#   got %s, expected %s\n", got ? got : "NULL", exp ? exp : "NULL");
	fflush(stdout);
}

#define is_str(got, expected, ...)                                                       \
	do {                                                                             \
		const char *is_g_ = (got), *is_e_ = (expected);                          \
		int is_c_ = is_g_ && is_e_ ? strcmp(is_g_, is_e_) == 0 : is_g_ == is_e_; \
		tap_begin_(is_c_);                                                       \
		printf(__VA_ARGS__);                                                     \
		tap_end_(is_c_, __FILE__, __LINE__, #got " equals " #expected);          \
		if (!is_c_)                                                              \
			tap_str_operands_(is_g_, is_e_);                                 \
	} while (0)

/* Removes DIR and everything under it (a test's mkdtemp directory), or, with MC_TEST_KEEP=1 in
 * the environment, leaves it and prints its path. */
static inline void tap_rmtree(const char *dir)
{
	const char *keep = getenv("MC_TEST_KEEP");
	char cmd[4200];

	if (keep && !strcmp(keep, "1")) {
		printf("# MC_TEST_KEEP=1: temporary files kept in %s\n", dir);
		fflush(stdout);
		return;
	}
	if (strchr(dir, '\'') || snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) >= (int)sizeof(cmd))
		return;
	if (system(cmd) != 0)
		fprintf(stderr, "# could not remove %s\n", dir);
}

static inline uint64_t tap_xorshift(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		printf("# %d of %d checks failed\n", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}

#endif

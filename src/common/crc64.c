/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-64/ECMA-182 (crc64.h).  Three ways to the same value:
 *
 * - bytewise: one 256-entry table, one byte per step (what a textbook loop does; the reference
 *   the others are tested and measured against).
 * - slice8: eight tables, eight bytes per step: the portable path.
 * - clmul: the message is folded 64 bytes at a time into four 128-bit accumulators with
 *   carry-less multiplications by x^(d+64) mod P and x^d mod P (d the folding distance in bits),
 *   then into one, and the last 128 bits and the tail go through the tables.  Polynomials are
 *   most significant bit first, so each 16-byte block is byte-reversed into a 128-bit integer
 *   whose bit i is the coefficient of x^i.  The folding constants are computed once from P
 *   rather than written down.
 *
 * The CRC register follows crc' = (crc * x^(8n) + M * x^64) mod P for an n-byte message M, so a
 * running value is folded in by XOR-ing it into the message's first eight bytes, and two CRCs
 * combine as crc(A.B) = crc(A) * x^(8|B|) mod P + crc(B).
 */
#include <pthread.h>
#include <string.h>

#include "common/crc64.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MC_CRC64_X86 1
#endif

#define MC_CRC64_POLY 0x42F0E1EBA9EA3693ull

static uint64_t mc_crc64_tab[8][256];
static uint64_t mc_crc64_xpow[64];	/* x^(2^k) mod P, k = 0..63 (in bits of shift) */
static uint64_t mc_crc64_k[4];		/* folding constants (clmul) */
static int mc_crc64_have_clmul;
static pthread_once_t mc_crc64_once = PTHREAD_ONCE_INIT;

/* a * b mod P, both of degree < 64. */
static uint64_t mc_crc64_mulmod(uint64_t a, uint64_t b)
{
	uint64_t r = 0;
	int i;

	/* Horner over b's bits from the top: r = r * x + (bit ? a : 0), reduced each step. */
	for (i = 63; i >= 0; i--) {
		uint64_t top = r >> 63;

		r <<= 1;
		if (top)
			r ^= MC_CRC64_POLY;
		if ((b >> i) & 1)
			r ^= a;
	}
	return r;
}

/* x^n mod P for a number of bits n. */
static uint64_t mc_crc64_xpow_n(uint64_t n)
{
	uint64_t r = 1;	/* x^0 */
	int k;

	for (k = 0; n; k++, n >>= 1)
		if (n & 1)
			r = mc_crc64_mulmod(r, mc_crc64_xpow[k]);
	return r;
}

static void mc_crc64_init(void)
{
	int i, j, k;

	for (i = 0; i < 256; i++) {
		uint64_t c = (uint64_t)i << 56;

		for (j = 0; j < 8; j++)
			c = (c << 1) ^ ((c >> 63) ? MC_CRC64_POLY : 0);
		mc_crc64_tab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			mc_crc64_tab[k][i] = (mc_crc64_tab[k - 1][i] << 8) ^
					     mc_crc64_tab[0][mc_crc64_tab[k - 1][i] >> 56];
	mc_crc64_xpow[0] = 2;	/* x^1 */
	for (k = 1; k < 64; k++)
		mc_crc64_xpow[k] = mc_crc64_mulmod(mc_crc64_xpow[k - 1], mc_crc64_xpow[k - 1]);
	/* Folding by 512 bits (four lanes) and by 128 bits (one lane). */
	mc_crc64_k[0] = mc_crc64_xpow_n(512 + 64);
	mc_crc64_k[1] = mc_crc64_xpow_n(512);
	mc_crc64_k[2] = mc_crc64_xpow_n(128 + 64);
	mc_crc64_k[3] = mc_crc64_xpow_n(128);
#ifdef MC_CRC64_X86
	__builtin_cpu_init();
	mc_crc64_have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
#endif
}

uint64_t mc_crc64_bytewise(uint64_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&mc_crc64_once, mc_crc64_init);
	while (len--)
		crc = (crc << 8) ^ mc_crc64_tab[0][(crc >> 56) ^ *p++];
	return crc;
}

uint64_t mc_crc64_slice8(uint64_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&mc_crc64_once, mc_crc64_init);
	while (len >= 8) {
		uint64_t v = crc ^ ((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 |
				    (uint64_t)p[2] << 40 | (uint64_t)p[3] << 32 |
				    (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 |
				    (uint64_t)p[6] << 8 | (uint64_t)p[7]);

		crc = mc_crc64_tab[7][v >> 56] ^ mc_crc64_tab[6][(v >> 48) & 0xff] ^
		      mc_crc64_tab[5][(v >> 40) & 0xff] ^ mc_crc64_tab[4][(v >> 32) & 0xff] ^
		      mc_crc64_tab[3][(v >> 24) & 0xff] ^ mc_crc64_tab[2][(v >> 16) & 0xff] ^
		      mc_crc64_tab[1][(v >> 8) & 0xff] ^ mc_crc64_tab[0][v & 0xff];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc << 8) ^ mc_crc64_tab[0][(crc >> 56) ^ *p++];
	return crc;
}

#ifdef MC_CRC64_X86

/* 16 bytes, first byte most significant. */
__attribute__((target("ssse3"))) static inline __m128i mc_crc64_load(const uint8_t *p)
{
	const __m128i rev = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);

	return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), rev);
}

/* x * x^d + next, reduced to 128 bits: hi * (x^(d+64) mod P) + lo * (x^d mod P) + next. */
__attribute__((target("pclmul,ssse3"))) static inline __m128i mc_crc64_fold(__m128i x, __m128i k,
									     __m128i next)
{
	__m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
	__m128i lo = _mm_clmulepi64_si128(x, k, 0x00);

	return _mm_xor_si128(_mm_xor_si128(hi, lo), next);
}

__attribute__((target("pclmul,ssse3"))) static uint64_t mc_crc64_clmul_x86(uint64_t crc,
									    const uint8_t *p,
									    size_t len)
{
	const __m128i k512 = _mm_set_epi64x((long long)mc_crc64_k[0], (long long)mc_crc64_k[1]);
	const __m128i k128 = _mm_set_epi64x((long long)mc_crc64_k[2], (long long)mc_crc64_k[3]);
	__m128i x0, x1, x2, x3;
	uint8_t last[16];

	x0 = mc_crc64_load(p);
	x1 = mc_crc64_load(p + 16);
	x2 = mc_crc64_load(p + 32);
	x3 = mc_crc64_load(p + 48);
	/* The running CRC goes into the first eight bytes (the top of the first block). */
	x0 = _mm_xor_si128(x0, _mm_set_epi64x((long long)crc, 0));
	p += 64;
	len -= 64;
	while (len >= 64) {
		x0 = mc_crc64_fold(x0, k512, mc_crc64_load(p));
		x1 = mc_crc64_fold(x1, k512, mc_crc64_load(p + 16));
		x2 = mc_crc64_fold(x2, k512, mc_crc64_load(p + 32));
		x3 = mc_crc64_fold(x3, k512, mc_crc64_load(p + 48));
		p += 64;
		len -= 64;
	}
	x1 = mc_crc64_fold(x0, k128, x1);
	x2 = mc_crc64_fold(x1, k128, x2);
	x3 = mc_crc64_fold(x2, k128, x3);
	while (len >= 16) {
		x3 = mc_crc64_fold(x3, k128, mc_crc64_load(p));
		p += 16;
		len -= 16;
	}
	/* x3 stands for the message so far: its CRC is that of its 16 bytes, most significant
	 * first. */
	{
		uint64_t hi = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(x3, x3));
		uint64_t lo = (uint64_t)_mm_cvtsi128_si64(x3);
		int i;

		for (i = 0; i < 8; i++) {
			last[i] = (uint8_t)(hi >> (56 - 8 * i));
			last[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
		}
	}
	crc = mc_crc64_slice8(0, last, 16);
	return mc_crc64_slice8(crc, p, len);
}

#endif

uint64_t mc_crc64_clmul(uint64_t crc, const void *buf, size_t len)
{
	pthread_once(&mc_crc64_once, mc_crc64_init);
#ifdef MC_CRC64_X86
	if (mc_crc64_have_clmul && len >= 64)
		return mc_crc64_clmul_x86(crc, buf, len);
#endif
	return mc_crc64_slice8(crc, buf, len);
}

uint64_t mc_crc64(uint64_t crc, const void *buf, size_t len)
{
	return mc_crc64_clmul(crc, buf, len);
}

const char *mc_crc64_impl(void)
{
	pthread_once(&mc_crc64_once, mc_crc64_init);
	return mc_crc64_have_clmul ? "pclmul" : "slice8";
}

uint64_t mc_crc64_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
	pthread_once(&mc_crc64_once, mc_crc64_init);
	if (len_b == 0)
		return crc_a;
	/* 8 * len_b bits; len_b < 2^61 for any real object. */
	return mc_crc64_mulmod(crc_a, mc_crc64_xpow_n(len_b << 3)) ^ crc_b;
}

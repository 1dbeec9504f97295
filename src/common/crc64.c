/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-64/ECMA-182 (crc64.h).  Three ways to the same value:
 *
 * - bytewise: one 256-entry table, one byte per step (what a textbook loop does; the reference
 *   the others are tested and measured against).
 * - slice8: eight tables, eight bytes per step: the portable path.
 * - clmul: the message is folded 128 bytes at a time into eight 128-bit accumulators with
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
#elif defined(__aarch64__) && defined(__GNUC__)
#include <arm_neon.h>
#include <sys/auxv.h>
#define MC_CRC64_ARM 1
#ifndef HWCAP_PMULL
#define HWCAP_PMULL (1 << 4)
#endif
#endif

#define MC_CRC64_POLY 0x42F0E1EBA9EA3693ull

static uint64_t mc_crc64_tab[8][256];
static uint64_t mc_crc64_xpow[64];	/* x^(2^k) mod P, k = 0..63 (in bits of shift) */
static uint64_t mc_crc64_k[4];		/* folding constants (clmul) */
static uint64_t mc_crc64_k512[2];	/* and for the 512-bit path */
static int mc_crc64_have_avx512;
int mc_crc64_no_avx512;
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
	/* Folding by 1024 bits (eight lanes) and by 128 bits (one lane). */
	mc_crc64_k[0] = mc_crc64_xpow_n(1024 + 64);
	mc_crc64_k[1] = mc_crc64_xpow_n(1024);
	mc_crc64_k[2] = mc_crc64_xpow_n(128 + 64);
	mc_crc64_k[3] = mc_crc64_xpow_n(128);
	mc_crc64_k512[0] = mc_crc64_xpow_n(2048 + 64);
	mc_crc64_k512[1] = mc_crc64_xpow_n(2048);
#ifdef MC_CRC64_X86
	__builtin_cpu_init();
	mc_crc64_have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
	mc_crc64_have_avx512 = mc_crc64_have_clmul && __builtin_cpu_supports("avx512f") &&
			       __builtin_cpu_supports("avx512bw") &&
			       __builtin_cpu_supports("vpclmulqdq");
#endif
#ifdef MC_CRC64_ARM
	mc_crc64_have_clmul = (getauxval(AT_HWCAP) & HWCAP_PMULL) != 0;
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

/*
 * The 128-bit folding, written once over a few vector operations that each architecture
 * provides: a 128-bit value whose high 64 bits are the higher-degree coefficients, a carry-less
 * fold by a pair of constants, and a load of 16 message bytes, first byte most significant.
 */
#ifdef MC_CRC64_X86
#define MC_CRC64_VEC 1
#define MC_CRC64_VT "pclmul,ssse3"
typedef __m128i mc_crc64_v;

/* x * x^d + next, reduced to 128 bits: hi * (x^(d+64) mod P) + lo * (x^d mod P) + next. */
__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_fold(mc_crc64_v x, mc_crc64_v k, mc_crc64_v next)
{
	__m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
	__m128i lo = _mm_clmulepi64_si128(x, k, 0x00);

	return _mm_xor_si128(_mm_xor_si128(hi, lo), next);
}

/* 16 bytes at p, first byte most significant; stored unchanged at d first when d is not NULL. */
__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_take(const uint8_t *p, uint8_t *d)
{
	const __m128i rev = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);

	if (d)
		_mm_storeu_si128((__m128i *)(void *)d, v);
	return _mm_shuffle_epi8(v, rev);
}

__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_pair(uint64_t hi, uint64_t lo)
{
	return _mm_set_epi64x((long long)hi, (long long)lo);
}

__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_xor(mc_crc64_v a, mc_crc64_v b)
{
	return _mm_xor_si128(a, b);
}

__attribute__((target(MC_CRC64_VT), always_inline)) static inline uint64_t
mc_crc64_half(mc_crc64_v v, int high)
{
	return (uint64_t)_mm_cvtsi128_si64(high ? _mm_unpackhi_epi64(v, v) : v);
}
#endif

#ifdef MC_CRC64_ARM
#define MC_CRC64_VEC 1
#define MC_CRC64_VT "+crypto"
typedef uint64x2_t mc_crc64_v;

/* As above, with PMULL: lane 1 holds the higher-degree half. */
__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_fold(mc_crc64_v x, mc_crc64_v k, mc_crc64_v next)
{
	poly128_t hi = vmull_p64((poly64_t)vgetq_lane_u64(x, 1), (poly64_t)vgetq_lane_u64(k, 1));
	poly128_t lo = vmull_p64((poly64_t)vgetq_lane_u64(x, 0), (poly64_t)vgetq_lane_u64(k, 0));

	return veorq_u64(veorq_u64(vreinterpretq_u64_p128(hi), vreinterpretq_u64_p128(lo)), next);
}

__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_take(const uint8_t *p, uint8_t *d)
{
	uint8x16_t v = vld1q_u8(p);

	if (d)
		vst1q_u8(d, v);
	/* All sixteen bytes reversed: within each half, then the halves swapped. */
	v = vrev64q_u8(v);
	return vreinterpretq_u64_u8(vextq_u8(v, v, 8));
}

__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_pair(uint64_t hi, uint64_t lo)
{
	return vcombine_u64(vcreate_u64(lo), vcreate_u64(hi));
}

__attribute__((target(MC_CRC64_VT), always_inline)) static inline mc_crc64_v
mc_crc64_xor(mc_crc64_v a, mc_crc64_v b)
{
	return veorq_u64(a, b);
}

__attribute__((target(MC_CRC64_VT), always_inline)) static inline uint64_t
mc_crc64_half(mc_crc64_v v, int high)
{
	return high ? vgetq_lane_u64(v, 1) : vgetq_lane_u64(v, 0);
}
#endif

#ifdef MC_CRC64_VEC

/* v stands for the message so far; fold in the 16-byte blocks left at p (copied to d when not
 * NULL), then the CRC is that of v's 16 bytes, most significant first, continued over the
 * tail. */
__attribute__((target(MC_CRC64_VT), always_inline)) static inline uint64_t
mc_crc64_finish128(mc_crc64_v v, uint8_t *d, const uint8_t *p, size_t len)
{
	const mc_crc64_v k128 = mc_crc64_pair(mc_crc64_k[2], mc_crc64_k[3]);
	uint8_t last[16];
	uint64_t crc, hi, lo;
	int i;

	while (len >= 16) {
		v = mc_crc64_fold(v, k128, mc_crc64_take(p, d));
		p += 16;
		d = d ? d + 16 : NULL;
		len -= 16;
	}
	hi = mc_crc64_half(v, 1);
	lo = mc_crc64_half(v, 0);
	for (i = 0; i < 8; i++) {
		last[i] = (uint8_t)(hi >> (56 - 8 * i));
		last[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
	}
	if (d)
		memcpy(d, p, len);
	crc = mc_crc64_slice8(0, last, 16);
	return mc_crc64_slice8(crc, p, len);
}

#define MC_CRC64_LANES 8

/* The fold over len >= 128 bytes at p (copied to d on the way when d is not NULL): eight
 * accumulators 128 bytes apart hide the multiplier's latency. */
__attribute__((target(MC_CRC64_VT), always_inline)) static inline uint64_t
mc_crc64_fold_run(uint64_t crc, uint8_t *d, const uint8_t *p, size_t len)
{
	const mc_crc64_v kfar = mc_crc64_pair(mc_crc64_k[0], mc_crc64_k[1]);
	const mc_crc64_v k128 = mc_crc64_pair(mc_crc64_k[2], mc_crc64_k[3]);
	mc_crc64_v x[MC_CRC64_LANES];
	int i;

	for (i = 0; i < MC_CRC64_LANES; i++)
		x[i] = mc_crc64_take(p + 16 * i, d ? d + 16 * i : NULL);
	/* The running CRC goes into the first eight bytes (the top of the first block). */
	x[0] = mc_crc64_xor(x[0], mc_crc64_pair(crc, 0));
	p += 16 * MC_CRC64_LANES;
	d = d ? d + 16 * MC_CRC64_LANES : NULL;
	len -= 16 * MC_CRC64_LANES;
	while (len >= 16 * MC_CRC64_LANES) {
		for (i = 0; i < MC_CRC64_LANES; i++)
			x[i] = mc_crc64_fold(x[i], kfar, mc_crc64_take(p + 16 * i, d ? d + 16 * i : NULL));
		p += 16 * MC_CRC64_LANES;
		d = d ? d + 16 * MC_CRC64_LANES : NULL;
		len -= 16 * MC_CRC64_LANES;
	}
	for (i = 1; i < MC_CRC64_LANES; i++)
		x[i] = mc_crc64_fold(x[i - 1], k128, x[i]);
	return mc_crc64_finish128(x[MC_CRC64_LANES - 1], d, p, len);
}

__attribute__((target(MC_CRC64_VT))) static uint64_t mc_crc64_clmul_vec(uint64_t crc,
									 const uint8_t *p, size_t len)
{
	return mc_crc64_fold_run(crc, NULL, p, len);
}

__attribute__((target(MC_CRC64_VT))) static uint64_t mc_crc64_copy_vec(uint64_t crc, uint8_t *d,
									const uint8_t *p, size_t len)
{
	return mc_crc64_fold_run(crc, d, p, len);
}

#endif

#ifdef MC_CRC64_X86

/* The same with 512-bit carry-less multiplications (VPCLMULQDQ): four 128-bit lanes per
 * instruction, sixteen accumulators 256 bytes apart; len >= 256.  The accumulators are then
 * folded into one 128-bit value and the rest goes through the 128-bit loop above. */
#define MC_CRC64_AVX_TARGET "avx512f,avx512bw,vpclmulqdq,pclmul,ssse3"

__attribute__((target(MC_CRC64_AVX_TARGET), always_inline)) static inline __m512i
mc_crc64_take512(const uint8_t *p, uint8_t *d)
{
	const __m512i rev = _mm512_broadcast_i32x4(
		_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
	__m512i v = _mm512_loadu_si512((const void *)p);

	if (d)
		_mm512_storeu_si512((void *)d, v);
	return _mm512_shuffle_epi8(v, rev);
}

__attribute__((target(MC_CRC64_AVX_TARGET), always_inline)) static inline __m512i
mc_crc64_fold512(__m512i x, __m512i k, __m512i next)
{
	__m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
	__m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);

	return _mm512_ternarylogic_epi64(hi, lo, next, 0x96);	/* hi ^ lo ^ next */
}

__attribute__((target(MC_CRC64_AVX_TARGET), always_inline)) static inline uint64_t
mc_crc64_run512(uint64_t crc, uint8_t *d, const uint8_t *p, size_t len)
{
	const __m512i kfar = _mm512_broadcast_i32x4(
		_mm_set_epi64x((long long)mc_crc64_k512[0], (long long)mc_crc64_k512[1]));
	const __m128i k128 = mc_crc64_pair(mc_crc64_k[2], mc_crc64_k[3]);
	__m512i z[4];
	__m128i lanes[16], x;
	size_t done;
	int i;

	for (i = 0; i < 4; i++)
		z[i] = mc_crc64_take512(p + 64 * i, d ? d + 64 * i : NULL);
	z[0] = _mm512_xor_si512(z[0], _mm512_inserti32x4(_mm512_setzero_si512(),
							 _mm_set_epi64x((long long)crc, 0), 0));
	for (done = 256; len - done >= 256; done += 256)
		for (i = 0; i < 4; i++)
			z[i] = mc_crc64_fold512(z[i], kfar,
						mc_crc64_take512(p + done + 64 * i,
								 d ? d + done + 64 * i : NULL));
	for (i = 0; i < 4; i++) {
		lanes[4 * i] = _mm512_extracti32x4_epi32(z[i], 0);
		lanes[4 * i + 1] = _mm512_extracti32x4_epi32(z[i], 1);
		lanes[4 * i + 2] = _mm512_extracti32x4_epi32(z[i], 2);
		lanes[4 * i + 3] = _mm512_extracti32x4_epi32(z[i], 3);
	}
	x = lanes[0];
	for (i = 1; i < 16; i++)
		x = mc_crc64_fold(x, k128, lanes[i]);
	return mc_crc64_finish128(x, d ? d + done : NULL, p + done, len - done);
}

__attribute__((target(MC_CRC64_AVX_TARGET))) static uint64_t mc_crc64_clmul_avx(uint64_t crc,
										const uint8_t *p,
										size_t len)
{
	return mc_crc64_run512(crc, NULL, p, len);
}

__attribute__((target(MC_CRC64_AVX_TARGET))) static uint64_t mc_crc64_copy_avx(uint64_t crc,
									       uint8_t *d,
									       const uint8_t *p,
									       size_t len)
{
	return mc_crc64_run512(crc, d, p, len);
}

#endif

uint64_t mc_crc64_clmul(uint64_t crc, const void *buf, size_t len)
{
	pthread_once(&mc_crc64_once, mc_crc64_init);
#ifdef MC_CRC64_X86
	if (mc_crc64_have_avx512 && !mc_crc64_no_avx512 && len >= 256)
		return mc_crc64_clmul_avx(crc, buf, len);
#endif
#ifdef MC_CRC64_VEC
	if (mc_crc64_have_clmul && len >= 128)
		return mc_crc64_clmul_vec(crc, buf, len);
#endif
	return mc_crc64_slice8(crc, buf, len);
}

uint64_t mc_crc64(uint64_t crc, const void *buf, size_t len)
{
	return mc_crc64_clmul(crc, buf, len);
}

uint64_t mc_crc64_copy(uint64_t crc, void *dst, const void *src, size_t len)
{
	pthread_once(&mc_crc64_once, mc_crc64_init);
#ifdef MC_CRC64_X86
	if (mc_crc64_have_avx512 && !mc_crc64_no_avx512 && len >= 256)
		return mc_crc64_copy_avx(crc, dst, src, len);
#endif
#ifdef MC_CRC64_VEC
	if (mc_crc64_have_clmul && len >= 128)
		return mc_crc64_copy_vec(crc, dst, src, len);
#endif
	memcpy(dst, src, len);
	return mc_crc64_slice8(crc, dst, len);
}

const char *mc_crc64_impl(void)
{
	pthread_once(&mc_crc64_once, mc_crc64_init);
	return mc_crc64_have_avx512 && !mc_crc64_no_avx512 ? "vpclmul (512-bit)"
#ifdef MC_CRC64_ARM
	       : mc_crc64_have_clmul			      ? "pmull"
#else
	       : mc_crc64_have_clmul			      ? "pclmul"
#endif
							      : "slice8";
}

uint64_t mc_crc64_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
	pthread_once(&mc_crc64_once, mc_crc64_init);
	if (len_b == 0)
		return crc_a;
	/* 8 * len_b bits; len_b < 2^61 for any real object. */
	return mc_crc64_mulmod(crc_a, mc_crc64_xpow_n(len_b << 3)) ^ crc_b;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-32C (Castagnoli), the checksum of the SSD area's records and of the shared-directory
 * tier's files: the SSE4.2 instruction where the CPU has it, else slicing by 8 over tables
 * built once.  Thread-safe.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common/crc32c.h"

static uint32_t mc_crc_table[8][256];
static pthread_once_t mc_crc_once = PTHREAD_ONCE_INIT;
static int mc_crc_hw;

static void mc_crc_init(void)
{
	uint32_t i, j;

	for (i = 0; i < 256; i++) {
		uint32_t c = i;

		for (j = 0; j < 8; j++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		mc_crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			mc_crc_table[j][i] = (mc_crc_table[j - 1][i] >> 8) ^
					     mc_crc_table[0][mc_crc_table[j - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	mc_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t mc_crc_sse42(uint32_t crc, const uint8_t *p,
								 size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t mc_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~crc;

	pthread_once(&mc_crc_once, mc_crc_init);
#if defined(__x86_64__)
	if (mc_crc_hw)
		return ~mc_crc_sse42(c, p, len);
#endif
	while (len >= 8) {
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				   (uint32_t)p[3] << 24);

		c = mc_crc_table[7][lo & 0xff] ^ mc_crc_table[6][(lo >> 8) & 0xff] ^
		    mc_crc_table[5][(lo >> 16) & 0xff] ^ mc_crc_table[4][lo >> 24] ^
		    mc_crc_table[3][p[4]] ^ mc_crc_table[2][p[5]] ^ mc_crc_table[1][p[6]] ^
		    mc_crc_table[0][p[7]];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ mc_crc_table[0][(c ^ *p++) & 0xff];
	return ~c;
}

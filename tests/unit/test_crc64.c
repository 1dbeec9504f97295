/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-64/ECMA-182: the catalogue check value, and the three implementations and the combine
 * agreeing on random data at every length up to 1 KiB, every alignment, and 1 MiB.
 */
#include <stdlib.h>
#include <string.h>

#include "common/crc64.h"
#include "tap.h"

int main(void)
{
	static uint8_t buf[(1 << 20) + 64];
	uint64_t seed = 0x9E3779B97F4A7C15ull, a, b, c;
	size_t i, n, off, bad = 0, badc = 0;

	for (i = 0; i < sizeof(buf); i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		buf[i] = (uint8_t)seed;
	}
	a = mc_crc64(0, "123456789", 9);
	ok(a == 0x6C40DF5F0B497347ull, "check value of \"123456789\": got 0x%016llx, expected 0x6c40df5f0b497347",
	   (unsigned long long)a);
	ok(mc_crc64(0, "", 0) == 0 && mc_crc64(0x1234, "", 0) == 0x1234, "empty input keeps the value");
	printf("# implementation on this CPU: %s\n", mc_crc64_impl());
	for (int narrow = 0; narrow < 2; narrow++) {
	/* Every path: the widest the CPU has, then without the 512-bit one. */
	mc_crc64_no_avx512 = narrow;
	bad = 0;
	for (off = 0; off < 16; off++)
		for (n = 0; n <= 1024; n++) {
			a = mc_crc64_bytewise(0x0123456789abcdefull, buf + off, n);
			b = mc_crc64_slice8(0x0123456789abcdefull, buf + off, n);
			c = mc_crc64_clmul(0x0123456789abcdefull, buf + off, n);
			if (a != b || a != c) {
				if (bad++ < 3)
					printf("# off %zu len %zu: bytewise %016llx slice8 %016llx clmul %016llx\n",
					       off, n, (unsigned long long)a, (unsigned long long)b,
					       (unsigned long long)c);
			}
		}
	ok(bad == 0, "bytewise, slice8 and clmul (%s) agree at 16 alignments x 1025 lengths (%zu differ)",
	   mc_crc64_impl(), bad);
	a = mc_crc64_bytewise(0, buf + 3, 1 << 20);
	b = mc_crc64_slice8(0, buf + 3, 1 << 20);
	c = mc_crc64(0, buf + 3, 1 << 20);
	ok(a == b && a == c, "1 MiB: bytewise %016llx slice8 %016llx mc_crc64 %016llx",
	   (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
	for (i = 0; i < 2000; i++) {
		size_t la = (i * 7919) % 70000, lb = (i * 104729) % 70000;
		uint64_t whole = mc_crc64(0, buf, la + lb);
		uint64_t ca = mc_crc64(0, buf, la), cb = mc_crc64(0, buf + la, lb);

		if (mc_crc64_combine(ca, cb, lb) != whole)
			badc++;
		/* Continuing from a running value is the same as one pass. */
		if (mc_crc64(ca, buf + la, lb) != whole)
			badc++;
	}
	ok(badc == 0, "combine(crc(A), crc(B), |B|) and crc(crc(A), B) equal crc(AB) (%zu of 4000 differ)",
	   badc);
	{
		static uint8_t dst[(1 << 20) + 64];
		size_t badcp = 0;

		for (off = 0; off < 16; off++)
			for (n = 0; n <= 1024 + 300; n += (n < 200 ? 1 : 37)) {
				memset(dst, 0xA5, n + 64);
				a = mc_crc64_copy(7, dst + (off ^ 5), buf + off, n);
				if (a != mc_crc64_bytewise(7, buf + off, n) ||
				    memcmp(dst + (off ^ 5), buf + off, n) || dst[(off ^ 5) + n] != 0xA5)
					badcp++;
			}
		a = mc_crc64_copy(0, dst, buf + 1, 1 << 20);
		ok(badcp == 0 && a == mc_crc64(0, buf + 1, 1 << 20) && !memcmp(dst, buf + 1, 1 << 20),
		   "mc_crc64_copy (%s) copies exactly the bytes and gives their CRC (%zu cases differ)",
		   mc_crc64_impl(), badcp);
	}
	}
	mc_crc64_no_avx512 = 0;
	return tap_done();
}

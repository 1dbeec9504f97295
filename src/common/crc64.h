/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_COMMON_CRC64_H
#define MC_COMMON_CRC64_H

/*
 * CRC-64/ECMA-182, the object checksum upstream's store computes with MOONCAKE_STORE_CHECKSUM:
 * polynomial 0x42F0E1EBA9EA3693, most significant bit first (not reflected), initial value 0, no
 * final xor ("123456789" gives 0x6C40DF5F0B497347).  Computed by carry-less multiplication
 * (VPCLMULQDQ on 512-bit registers, else PCLMULQDQ) where the CPU has it, else by an eight-table
 * slicing loop; the choice is made once, on the first call.  Thread-safe.
 */
#include <stddef.h>
#include <stdint.h>

/* The CRC of len bytes at buf continuing crc (0 to start): mc_crc64(mc_crc64(0, a, n), b, m) is
 * the CRC of a followed by b. */
uint64_t mc_crc64(uint64_t crc, const void *buf, size_t len);

/* The CRC of A followed by B from crc_a = CRC(A), crc_b = CRC(B) and B's length: chunks
 * checksummed apart (on different threads, while their bytes are cache-hot) make the whole
 * object's value. */
uint64_t mc_crc64_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b);

/* Copy len bytes from src to dst (they must not overlap) and return the CRC of those bytes
 * continuing crc, in one pass over them: a checksummed copy costs little more than the copy. */
uint64_t mc_crc64_copy(uint64_t crc, void *dst, const void *src, size_t len);

/* The implementations, for tests and benchmarks: byte at a time (the textbook loop), slicing by
 * eight, and carry-less multiplication (returns the slicing result where the CPU lacks it). */
uint64_t mc_crc64_bytewise(uint64_t crc, const void *buf, size_t len);
uint64_t mc_crc64_slice8(uint64_t crc, const void *buf, size_t len);
uint64_t mc_crc64_clmul(uint64_t crc, const void *buf, size_t len);
/* What mc_crc64 uses on this CPU: "vpclmul (512-bit)", "pclmul" or "slice8". */
const char *mc_crc64_impl(void);
/* Tests and benchmarks: nonzero keeps mc_crc64 and mc_crc64_copy off the 512-bit path. */
extern int mc_crc64_no_avx512;

#endif

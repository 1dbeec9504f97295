/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_COMMON_CRC32C_H
#define MC_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli) of len bytes at buf, continuing crc (0 to start). */
uint32_t mc_crc32c(uint32_t crc, const void *buf, size_t len);

#endif

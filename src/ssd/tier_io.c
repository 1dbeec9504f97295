/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File I/O of the disk tiers (see tier_io.h): the loops that write and read whole buffers, and
 * the flushes and renames that make a file durable, with the test fault points in front.  Any
 * thread.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "ssd/tier_io.h"

/* Longest single pwrite/pread asked of the kernel. */
#define MC_TIER_IO_CHUNK (1u << 30)

int mc_tier_pwrite(enum mc_fault_point p, int fd, const void *buf, size_t len, off_t off)
{
	const uint8_t *b = buf;
	int f = mc_fault(p);

	if (f) {
		/* Test hook: a failed write, or a short one that leaves half the bytes. */
		if (f == MC_FAULT_SHORT && len > 1 && pwrite(fd, b, len / 2, off) < 0)
			return -errno;
		return f == MC_FAULT_SHORT ? -ENOSPC : f;
	}
	while (len) {
		ssize_t w = pwrite(fd, b, len > MC_TIER_IO_CHUNK ? MC_TIER_IO_CHUNK : len, off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
}

int mc_tier_pread(int fd, void *buf, size_t len, off_t off)
{
	uint8_t *b = buf;

	while (len) {
		ssize_t r = pread(fd, b, len > MC_TIER_IO_CHUNK ? MC_TIER_IO_CHUNK : len, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		b += r;
		len -= (size_t)r;
		off += r;
	}
	return 0;
}

int mc_tier_sync(enum mc_fault_point p, int fd, int dir)
{
	int f = mc_fault(p);

	if (f)
		return f == MC_FAULT_SHORT ? -EIO : f;
	return (dir ? fsync(fd) : fdatasync(fd)) != 0 ? -errno : 0;
}

int mc_tier_rename(enum mc_fault_point p, const char *from, const char *to)
{
	int f = mc_fault(p);

	if (f)
		return f == MC_FAULT_SHORT ? -EIO : f;
	return rename(from, to) != 0 ? -errno : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_SSD_TIER_IO_H
#define MC_SSD_TIER_IO_H

/*
 * File I/O of the disk tiers (the SSD area, the shared-directory files): whole reads and
 * writes, flushes and renames, each write point going through its test fault point (fault.h).
 * Every function returns 0 or -errno.
 */
#include <stddef.h>
#include <sys/types.h>

#include "ssd/fault.h"

/* pwrite all of len bytes at off; fault point p (a "short" fault writes half, then fails
 * with ENOSPC). */
int mc_tier_pwrite(enum mc_fault_point p, int fd, const void *buf, size_t len, off_t off);
/* pread all of len bytes at off; the end of the file before that is -EIO. */
int mc_tier_pread(int fd, void *buf, size_t len, off_t off);
/* fdatasync (fsync for a directory, dir != 0); fault point p. */
int mc_tier_sync(enum mc_fault_point p, int fd, int dir);
/* rename(2); fault point p. */
int mc_tier_rename(enum mc_fault_point p, const char *from, const char *to);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_SSD_FAULT_H
#define MC_SSD_FAULT_H

/*
 * A test hook, not a feature: injected failures at the disk tiers' write points, switched on by
 * the environment variable MC_TEST_FAULT, read once when the library is loaded:
 *
 *   MC_TEST_FAULT=POINT:ERROR:COUNT[:SKIP][,POINT:ERROR:COUNT[:SKIP]...]
 *
 * POINT: ssd_write, ssd_fsync, ssd_rename (the SSD area: a value's pwrite, its fdatasync or
 * the directory fsync, the rename that publishes it), fs_write, fs_fsync, fs_rename (the
 * shared-directory tier's file), read_flip (a store read of a whole object that just landed,
 * before its checksum is verified: bytes corrupted in flight), offload_flip (an SSD offload's
 * check of the object's bytes against its checksum sees them changed, as if they had rotted in
 * memory), promote_flip (a promotion's check of the bytes read from the SSD against the object's
 * checksum sees them changed), put_write (the writes of one PutStart's answer, the part of a
 * put batch it placed, all fail once the bytes are out, as when the segment's owner died).
 * ERROR: ENOSPC, EIO, EROFS,
 * EDQUOT, "short" (a pwrite writes half of what it was given, then fails with ENOSPC), or
 * "flip" (read_flip: the read's first byte is inverted; offload_flip, promote_flip: the
 * computed checksum is).  The first SKIP calls at the point
 * pass (default 0), the next COUNT fail (0: all of them), then the fault clears by itself, so a
 * test sees the tier resume without a restart.  A malformed value is ignored with a line on
 * stderr.  Unset, the hook costs one load of a global per write.
 */

enum mc_fault_point {
	MC_FAULT_SSD_WRITE,
	MC_FAULT_SSD_FSYNC,
	MC_FAULT_SSD_RENAME,
	MC_FAULT_FS_WRITE,
	MC_FAULT_FS_FSYNC,
	MC_FAULT_FS_RENAME,
	MC_FAULT_READ_FLIP,
	MC_FAULT_OFFLOAD_FLIP,
	MC_FAULT_PROMOTE_FLIP,
	MC_FAULT_PUT_WRITE,
	MC_FAULT_NPOINTS
};

#define MC_FAULT_SHORT 1	/* mc_fault answer: write half, then fail with ENOSPC */
#define MC_FAULT_FLIP 2		/* mc_fault answer: corrupt the bytes */

extern int mc_fault_armed;

int mc_fault_check(enum mc_fault_point p);

/* 0 (no fault), -errno to fail with, MC_FAULT_SHORT or MC_FAULT_FLIP. */
static inline int mc_fault(enum mc_fault_point p)
{
	return __builtin_expect(mc_fault_armed, 0) ? mc_fault_check(p) : 0;
}

#endif

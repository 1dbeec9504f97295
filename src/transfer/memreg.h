/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_MEMREG_H
#define MC_MEMREG_H

#include <stdint.h>

/*
 * The set of local memory ranges a process has registered for transfers.  A data server serves a
 * request only if its whole range lies inside one registered range.  Thread-safe: API threads
 * register and unregister while the loop thread checks.
 */
struct mc_memreg;

struct mc_memreg *mc_memreg_new(void);
void mc_memreg_free(struct mc_memreg *reg);
/* 0; -EINVAL for len 0 or a range that wraps; -EEXIST if it overlaps a registered range;
 * -ENOMEM. */
int mc_memreg_add(struct mc_memreg *reg, uint64_t addr, uint64_t len);
/* 0 or -ENOENT (addr must be the start of a registered range). */
int mc_memreg_remove(struct mc_memreg *reg, uint64_t addr);
/* 1 if [addr, addr+len) lies inside one registered range, else 0.  len 0 gives 0. */
int mc_memreg_check(struct mc_memreg *reg, uint64_t addr, uint64_t len);
/* The last range one caller's checks found (zeroed: none yet), with the set's generation then. */
struct mc_memreg_hit {
	uint64_t gen, start, end;
};
/* mc_memreg_check for one thread that keeps hit between calls (a data server's connection):
 * while no range was added or removed since hit was filled, a request inside hit's range is
 * answered without the lock (a batch of small requests lands in one range, and the lock's two
 * atomic operations per request were a tenth of a data server's time on them).  The answer is
 * the one mc_memreg_check would give at the moment the generation was read. */
int mc_memreg_check_cached(struct mc_memreg *reg, struct mc_memreg_hit *hit, uint64_t addr,
			   uint64_t len);

/*
 * File-backed ranges: one address window [base, base+len) whose bytes live in files (a client's
 * SSD objects), far above any user-space memory address.  The data server resolves a READ inside
 * it with fn, which returns 0 and a new file descriptor (the caller closes it) and the file offset
 * of addr, or a negative errno when [addr, addr+len) is not one stored object's bytes.  Opening
 * per request keeps a file readable to the end of a read even if it is deleted meanwhile.
 */
#define MC_DISK_SPACE_BASE (1ull << 62)
#define MC_DISK_SPACE_LEN (1ull << 62)
typedef int (*mc_memreg_file_fn)(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *off);
/* Install (fn non-NULL) or remove (fn NULL) the file window. */
void mc_memreg_set_files(struct mc_memreg *reg, mc_memreg_file_fn fn, void *arg);
/* For an address in the file window: -ENOENT if no file window or no such object, else as fn. */
int mc_memreg_open_file(struct mc_memreg *reg, uint64_t addr, uint64_t len, int *fd,
			uint64_t *off);
/* 1 if addr lies in the file window. */
int mc_memreg_in_files(uint64_t addr, uint64_t len);

#endif

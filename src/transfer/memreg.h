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

#endif

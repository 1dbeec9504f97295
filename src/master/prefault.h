/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_PREFAULT_H
#define MC_PREFAULT_H

#include <stddef.h>

/*
 * Faulting memory in ahead of its use, off the reactor thread (prefault.c).  The object table's
 * arena and index grow into fresh anonymous memory whose first touch costs a page fault and the
 * kernel's zeroing of the page: on the reactor thread that is a stall in the middle of a put,
 * and the larger the table, the more of it per put late in a run.  A prefaulter is one thread
 * that takes ranges the reactor will touch soon and populates them (MADV_POPULATE_WRITE), so
 * the reactor finds the pages present.
 *
 * Populating never changes what the memory holds, so the reactor may write a range while the
 * thread populates it, and a range that was unmapped or reused meanwhile is harmless (the
 * thread only faults pages in, or fails quietly).  Without MADV_POPULATE_WRITE (Linux before
 * 5.14) the thread stops at its first range and the reactor faults as before.
 */

struct mc_prefault;

/* A prefaulter with its thread started, or NULL when no thread could be started (callers then
 * do without: mc_prefault_ask(NULL, ...) does nothing). */
struct mc_prefault *mc_prefault_new(void);
/* Stops the thread (after the range it is populating) and frees pf.  NULL: no-op. */
void mc_prefault_free(struct mc_prefault *pf);
/* Queue the whole pages of [p, p + len) to be populated.  Never blocks beyond a short lock; when the queue is full
 * the range is dropped (the pages then fault on first touch, as without a prefaulter). */
void mc_prefault_ask(struct mc_prefault *pf, void *p, size_t len);
/* Bytes populated so far (tests, metrics). */
size_t mc_prefault_done(struct mc_prefault *pf);

#endif

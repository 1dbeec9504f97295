/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_XALLOC_H
#define MC_XALLOC_H

#include <stddef.h>

/* Allocation helpers for daemons: they log and abort on out-of-memory, so callers need no NULL
 * checks.  Library code (src/store, src/transfer) must not use them: it returns -ENOMEM. */
void *mc_xmalloc(size_t n);
void *mc_xcalloc(size_t nmemb, size_t size);
void *mc_xrealloc(void *p, size_t n);
/* n bytes at a multiple of align (a power of two, a multiple of sizeof(void *)); free() frees. */
void *mc_xaligned_alloc(size_t align, size_t n);
char *mc_xstrdup(const char *s);
char *mc_xstrndup(const char *s, size_t n);

#endif

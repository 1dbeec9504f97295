/* SPDX-License-Identifier: Apache-2.0 */
/* Abort-on-OOM allocation wrappers for the daemons (see xalloc.h). */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

static void mc_xalloc_die(size_t n)
{
	mc_log_err("out of memory allocating %zu bytes", n);
	abort();
}

void *mc_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		mc_xalloc_die(n);
	return p;
}

void *mc_xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (p == NULL)
		mc_xalloc_die(nmemb * size);
	return p;
}

void *mc_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		mc_xalloc_die(n);
	return q;
}

void *mc_xaligned_alloc(size_t align, size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, align, n ? n : 1) != 0)
		mc_xalloc_die(n);
	return p;
}

char *mc_xstrdup(const char *s)
{
	return mc_xstrndup(s, strlen(s));
}

char *mc_xstrndup(const char *s, size_t n)
{
	char *p = mc_xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

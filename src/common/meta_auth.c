/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bearer tokens of the HTTP metadata service (meta_auth.h).  Pure functions of the
 * environment and their arguments; any thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/meta_auth.h"

#define MC_BEARER "Bearer "

const char *mc_meta_auth_token(void)
{
	const char *t = getenv("MC_METADATA_HTTP_TOKEN");

	return t && *t ? t : NULL;
}

char *mc_meta_auth_header(const char *token)
{
	size_t n = sizeof(MC_BEARER) + strlen(token);
	char *h = malloc(n);

	if (h)
		snprintf(h, n, MC_BEARER "%s", token);
	return h;
}

int mc_meta_auth_check(const char *hdr, const char *token)
{
	size_t hl, tl = strlen(token), i;
	unsigned diff;

	if (hdr == NULL || strncmp(hdr, MC_BEARER, sizeof(MC_BEARER) - 1) != 0)
		return 0;
	hdr += sizeof(MC_BEARER) - 1;
	hl = strlen(hdr);
	/* Every byte of the token is compared, against the presented one or against itself when
	 * that is shorter, and the length difference joins the result. */
	diff = hl != tl;
	for (i = 0; i < tl; i++)
		diff |= (unsigned)(unsigned char)token[i] ^
			(unsigned)(unsigned char)(i < hl ? hdr[i] : token[i] ^ 0xff);
	return diff == 0;
}

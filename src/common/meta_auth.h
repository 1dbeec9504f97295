/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_COMMON_META_AUTH_H
#define MC_COMMON_META_AUTH_H

/*
 * The HTTP metadata service's shared bearer token (upstream 0.3.14's MC_METADATA_HTTP_TOKEN):
 * the one place where servers find the token they require and clients the token they send, as
 * "Authorization: Bearer <token>".
 */
#include <stddef.h>

/* The token of this process, or NULL when none is configured (an unset or empty
 * MC_METADATA_HTTP_TOKEN).  The string stays valid while the environment is not changed. */
const char *mc_meta_auth_token(void);
/* The value of an Authorization header that carries token (a malloc'ed string), NULL when out
 * of memory. */
char *mc_meta_auth_header(const char *token);
/* Does the Authorization header value hdr (may be NULL) present token?  The comparison takes the
 * same time whichever byte differs, so the answer's timing tells nothing about the token. */
int mc_meta_auth_check(const char *hdr, const char *token);

#endif

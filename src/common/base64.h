/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_BASE64_H
#define MC_BASE64_H

#include <stddef.h>

/*
 * Standard base64 (RFC 4648, '+' and '/', '=' padding), as etcd's v3 JSON gateway carries keys
 * and values.
 */

/* The encoding of n bytes as a NUL-terminated string (malloc'd, the caller frees), or NULL when
 * out of memory. */
char *mc_base64_encode(const void *data, size_t n);
/* Decode s (untrusted): a malloc'd buffer with a NUL after the *len bytes, or NULL when s is not
 * base64 or memory runs out. */
char *mc_base64_decode(const char *s, size_t *len);

#endif

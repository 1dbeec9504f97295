/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Base64 encoding and decoding (see base64.h).  Decoding checks every character and the length,
 * since its input comes from the network.  No state; any thread.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"

static const char mc_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *mc_base64_encode(const void *data, size_t n)
{
	const uint8_t *p = data;
	char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
	size_t i;

	if (out == NULL)
		return NULL;
	for (i = 0; i + 2 < n; i += 3) {
		*o++ = mc_b64[p[i] >> 2];
		*o++ = mc_b64[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
		*o++ = mc_b64[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
		*o++ = mc_b64[p[i + 2] & 63];
	}
	if (i < n) {
		*o++ = mc_b64[p[i] >> 2];
		if (i + 1 < n) {
			*o++ = mc_b64[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
			*o++ = mc_b64[(p[i + 1] & 15) << 2];
		} else {
			*o++ = mc_b64[(p[i] & 3) << 4];
			*o++ = '=';
		}
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int mc_b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

char *mc_base64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s), i, o = 0, pad = 0;
	char *out;
	uint32_t acc = 0;
	int bits = 0;

	if (n % 4)
		return NULL;
	while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
		pad++;
	out = malloc(n / 4 * 3 + 1);
	if (out == NULL)
		return NULL;
	for (i = 0; i < n - pad; i++) {
		int v = mc_b64_value(s[i]);

		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)(acc >> bits);
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}

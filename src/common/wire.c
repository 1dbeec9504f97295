/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounds-checked little-endian codec (see wire.h).  The reader is the first line of defence
 * against malformed frames: it never reads past the end and never trusts a length or count.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

void mc_wbuf_init(struct mc_wbuf *w)
{
	memset(w, 0, sizeof(*w));
}

void mc_wbuf_fini(struct mc_wbuf *w)
{
	free(w->data);
	memset(w, 0, sizeof(*w));
}

void mc_wbuf_reset(struct mc_wbuf *w)
{
	w->len = 0;
	w->err = 0;
}

uint8_t *mc_wbuf_reserve(struct mc_wbuf *w, size_t n)
{
	uint8_t *p;

	if (w->err)
		return NULL;
	if (n > SIZE_MAX / 2 - w->len) {
		w->err = -ENOMEM;
		return NULL;
	}
	/* An empty writer has no buffer yet: allocate it even for n == 0, so the pointer
	 * returned is never NULL + 0 (undefined behaviour) and callers get a valid one. */
	if (w->len + n > w->cap || w->data == NULL) {
		size_t cap = w->cap ? w->cap : 256;

		while (cap < w->len + n)
			cap *= 2;
		p = realloc(w->data, cap);
		if (p == NULL) {
			w->err = -ENOMEM;
			return NULL;
		}
		w->data = p;
		w->cap = cap;
	}
	p = w->data + w->len;
	w->len += n;
	return p;
}

void mc_wbuf_str(struct mc_wbuf *w, const char *s, size_t n)
{
	if (n > UINT32_MAX) {
		w->err = -EOVERFLOW;
		return;
	}
	mc_wbuf_u32(w, (uint32_t)n);
	mc_wbuf_put(w, s, n);
}

void mc_wbuf_cstr(struct mc_wbuf *w, const char *s)
{
	mc_wbuf_str(w, s ? s : "", s ? strlen(s) : 0);
}

void mc_wbuf_patch_u32(struct mc_wbuf *w, size_t off, uint32_t v)
{
	if (w->err == 0 && off + 4 <= w->len)
		mc_put_le32(w->data + off, v);
}

void mc_rbuf_init(struct mc_rbuf *r, const void *p, size_t n)
{
	r->p = p;
	r->left = n;
	r->err = 0;
}

const uint8_t *mc_rbuf_bytes(struct mc_rbuf *r, size_t n)
{
	const uint8_t *p;

	if (r->err || n > r->left) {
		r->err = -EBADMSG;
		return NULL;
	}
	p = r->p;
	r->p += n;
	r->left -= n;
	return p;
}

const char *mc_rbuf_str(struct mc_rbuf *r, size_t max, size_t *len)
{
	uint32_t n = mc_rbuf_u32(r);
	const uint8_t *p;

	if (r->err)
		goto fail;
	if (n > max) {
		r->err = -EMSGSIZE;
		goto fail;
	}
	p = mc_rbuf_bytes(r, n);
	if (p == NULL)
		goto fail;
	*len = n;
	return (const char *)p;
fail:
	*len = 0;
	return NULL;
}

int mc_rbuf_cstr(struct mc_rbuf *r, char *out, size_t cap)
{
	size_t n;
	const char *s = mc_rbuf_str(r, cap ? cap - 1 : 0, &n);

	if (s == NULL) {
		if (cap)
			out[0] = '\0';
		return r->err;
	}
	if (memchr(s, '\0', n) != NULL) {
		r->err = -EBADMSG;
		out[0] = '\0';
		return r->err;
	}
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

uint32_t mc_rbuf_count(struct mc_rbuf *r, uint32_t max, size_t min_elem)
{
	uint32_t n = mc_rbuf_u32(r);

	if (r->err)
		return 0;
	if (n > max || (min_elem > 0 && (size_t)n > r->left / min_elem)) {
		r->err = -EBADMSG;
		return 0;
	}
	return n;
}

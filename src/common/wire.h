/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_WIRE_H
#define MC_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * Little-endian binary encoding used by the master RPC (doc/protocol.md).
 *
 * Writer: a growable buffer.  On allocation failure it sets err = -ENOMEM and ignores further
 * writes, so callers check once at the end.
 * Reader: a cursor over untrusted bytes.  Every getter checks the remaining length; on underrun
 * (or a string longer than its bound) it sets err = -EBADMSG, returns 0/NULL and the cursor stays
 * failed, so a handler decodes a whole message and checks err once.
 *
 * Strings are u32 length + bytes (no NUL on the wire).
 */
struct mc_wbuf {
	uint8_t *data;
	size_t len;
	size_t cap;
	int err;
};

void mc_wbuf_init(struct mc_wbuf *w);
void mc_wbuf_fini(struct mc_wbuf *w);
void mc_wbuf_reset(struct mc_wbuf *w);
/* Make room for n more bytes; returns a pointer to them (len is advanced) or NULL. */
uint8_t *mc_wbuf_reserve(struct mc_wbuf *w, size_t n);
void mc_wbuf_str(struct mc_wbuf *w, const char *s, size_t n);
void mc_wbuf_cstr(struct mc_wbuf *w, const char *s);
/* Overwrite a u32 written earlier at offset off (for counts known only at the end). */
void mc_wbuf_patch_u32(struct mc_wbuf *w, size_t off, uint32_t v);

struct mc_rbuf {
	const uint8_t *p;
	size_t left;
	int err;
};

void mc_rbuf_init(struct mc_rbuf *r, const void *p, size_t n);
/* n raw bytes: pointer into the buffer (valid as long as it is), NULL on underrun.  The
 * fixed-size getters (inline, below) read through it. */
const uint8_t *mc_rbuf_bytes(struct mc_rbuf *r, size_t n);
/* A string of at most max bytes: pointer into the buffer (not NUL-terminated), length in *len. */
const char *mc_rbuf_str(struct mc_rbuf *r, size_t max, size_t *len);
/* Copy a string of at most cap-1 bytes into out, NUL-terminated; embedded NULs are refused. */
int mc_rbuf_cstr(struct mc_rbuf *r, char *out, size_t cap);
/* A count that must be <= max and small enough that each element needs >= min_elem bytes. */
uint32_t mc_rbuf_count(struct mc_rbuf *r, uint32_t max, size_t min_elem);

static inline void mc_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void mc_put_le64(uint8_t *p, uint64_t v)
{
	mc_put_le32(p, (uint32_t)v);
	mc_put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t mc_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t mc_get_le64(const uint8_t *p)
{
	return (uint64_t)mc_get_le32(p) | (uint64_t)mc_get_le32(p + 4) << 32;
}

/* The writers below are inline: an RPC body is hundreds of small fields (a batch of 128 puts
 * is over a thousand), and each used to be a call into the library.  Room already there is
 * taken here; growing (and a failed writer) goes through mc_wbuf_reserve. */
static inline uint8_t *mc_wbuf_room(struct mc_wbuf *w, size_t n)
{
	if (w->err == 0 && w->data != NULL && n <= w->cap - w->len) {
		uint8_t *p = w->data + w->len;

		w->len += n;
		return p;
	}
	return mc_wbuf_reserve(w, n);
}

static inline void mc_wbuf_put(struct mc_wbuf *w, const void *src, size_t n)
{
	uint8_t *p = mc_wbuf_room(w, n);

	if (p != NULL && n > 0)
		memcpy(p, src, n);
}

static inline void mc_wbuf_u8(struct mc_wbuf *w, uint8_t v)
{
	uint8_t *p = mc_wbuf_room(w, 1);

	if (p != NULL)
		*p = v;
}

static inline void mc_wbuf_u16(struct mc_wbuf *w, uint16_t v)
{
	uint8_t *p = mc_wbuf_room(w, 2);

	if (p != NULL) {
		p[0] = (uint8_t)v;
		p[1] = (uint8_t)(v >> 8);
	}
}

static inline void mc_wbuf_u32(struct mc_wbuf *w, uint32_t v)
{
	uint8_t *p = mc_wbuf_room(w, 4);

	if (p != NULL)
		mc_put_le32(p, v);
}

static inline void mc_wbuf_u64(struct mc_wbuf *w, uint64_t v)
{
	uint8_t *p = mc_wbuf_room(w, 8);

	if (p != NULL)
		mc_put_le64(p, v);
}

static inline void mc_wbuf_i32(struct mc_wbuf *w, int32_t v)
{
	mc_wbuf_u32(w, (uint32_t)v);
}

static inline void mc_wbuf_i64(struct mc_wbuf *w, int64_t v)
{
	mc_wbuf_u64(w, (uint64_t)v);
}

/* The getters are inline too (a request's keys and sizes are read one field at a time). */
static inline const uint8_t *mc_rbuf_take(struct mc_rbuf *r, size_t n)
{
	if (r->err == 0 && n <= r->left) {
		const uint8_t *p = r->p;

		r->p += n;
		r->left -= n;
		return p;
	}
	return mc_rbuf_bytes(r, n);
}

static inline uint8_t mc_rbuf_u8(struct mc_rbuf *r)
{
	const uint8_t *p = mc_rbuf_take(r, 1);

	return p ? p[0] : 0;
}

static inline uint16_t mc_rbuf_u16(struct mc_rbuf *r)
{
	const uint8_t *p = mc_rbuf_take(r, 2);

	return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

static inline uint32_t mc_rbuf_u32(struct mc_rbuf *r)
{
	const uint8_t *p = mc_rbuf_take(r, 4);

	return p ? mc_get_le32(p) : 0;
}

static inline uint64_t mc_rbuf_u64(struct mc_rbuf *r)
{
	const uint8_t *p = mc_rbuf_take(r, 8);

	return p ? mc_get_le64(p) : 0;
}

static inline int32_t mc_rbuf_i32(struct mc_rbuf *r)
{
	return (int32_t)mc_rbuf_u32(r);
}

static inline int64_t mc_rbuf_i64(struct mc_rbuf *r)
{
	return (int64_t)mc_rbuf_u64(r);
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_WIRE_H
#define MC_WIRE_H

#include <stddef.h>
#include <stdint.h>

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
void mc_wbuf_put(struct mc_wbuf *w, const void *p, size_t n);
void mc_wbuf_u8(struct mc_wbuf *w, uint8_t v);
void mc_wbuf_u16(struct mc_wbuf *w, uint16_t v);
void mc_wbuf_u32(struct mc_wbuf *w, uint32_t v);
void mc_wbuf_u64(struct mc_wbuf *w, uint64_t v);
void mc_wbuf_i32(struct mc_wbuf *w, int32_t v);
void mc_wbuf_i64(struct mc_wbuf *w, int64_t v);
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
uint8_t mc_rbuf_u8(struct mc_rbuf *r);
uint16_t mc_rbuf_u16(struct mc_rbuf *r);
uint32_t mc_rbuf_u32(struct mc_rbuf *r);
uint64_t mc_rbuf_u64(struct mc_rbuf *r);
int32_t mc_rbuf_i32(struct mc_rbuf *r);
int64_t mc_rbuf_i64(struct mc_rbuf *r);
/* n raw bytes: pointer into the buffer (valid as long as it is), NULL on underrun. */
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

#endif

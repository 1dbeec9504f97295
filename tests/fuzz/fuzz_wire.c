/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the wire codec (src/common/wire.c) and the RPC's composite encodings
 * (src/proto/rpc.c).  The input is a script: a selector byte, then the bytes the chosen decoder
 * reads, again and again.  Every item that decodes is encoded again and must give back exactly
 * the bytes it was read from (the encodings are canonical: a decoder that accepts two spellings
 * of one value, or an encoder that loses a field, aborts here).  A failed decode ends the
 * script, as it ends a frame's handling.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"
#include "proto/rpc.h"
#include "fuzz_util.h"

enum {
	FZ_U8, FZ_U16, FZ_U32, FZ_U64, FZ_I32, FZ_I64, FZ_STR, FZ_CSTR, FZ_BYTES, FZ_COUNT,
	FZ_UUID, FZ_STRV, FZ_SEGMENT, FZ_CONFIG, FZ_REPLICA, FZ_XFER_FAILURE, FZ_CORRUPT,
	FZ_CHECKSUMS, FZ_HDR, FZ_DEADLINE, FZ_NKINDS
};

static void fuzz_same(const struct mc_wbuf *w, const uint8_t *from, size_t n)
{
	if (w->err || w->len != n || (n && memcmp(w->data, from, n) != 0))
		abort();
}

/* Decode one item of kind k from r, encode it into w.  Returns 0, or -1 when r failed. */
static int fuzz_item(int k, uint8_t arg, struct mc_rbuf *r, struct mc_wbuf *w)
{
	switch (k) {
	case FZ_U8: mc_wbuf_u8(w, mc_rbuf_u8(r)); break;
	case FZ_U16: mc_wbuf_u16(w, mc_rbuf_u16(r)); break;
	case FZ_U32: mc_wbuf_u32(w, mc_rbuf_u32(r)); break;
	case FZ_U64: mc_wbuf_u64(w, mc_rbuf_u64(r)); break;
	case FZ_I32: mc_wbuf_i32(w, mc_rbuf_i32(r)); break;
	case FZ_I64: mc_wbuf_i64(w, mc_rbuf_i64(r)); break;
	case FZ_STR: {
		size_t len = 0;
		const char *s = mc_rbuf_str(r, (size_t)arg * 17, &len);

		if (s != NULL)
			mc_wbuf_str(w, s, len);
		break;
	}
	case FZ_CSTR: {
		char out[256];

		if (mc_rbuf_cstr(r, out, (size_t)arg + 1) == 0) {
			if (strlen(out) > arg)
				abort();
			mc_wbuf_cstr(w, out);
		}
		break;
	}
	case FZ_BYTES: {
		const uint8_t *p = mc_rbuf_bytes(r, arg);

		if (p != NULL)
			mc_wbuf_put(w, p, arg);
		break;
	}
	case FZ_COUNT: {
		size_t before = r->left;
		uint32_t n = mc_rbuf_count(r, (uint32_t)arg * 257, (size_t)(arg & 15));

		if (r->err == 0 && (n > (uint32_t)arg * 257 || (size_t)n * (arg & 15) > before - 4))
			abort();
		mc_wbuf_u32(w, n);
		break;
	}
	case FZ_UUID: {
		struct mc_uuid u;
		char text[37];

		mc_rpc_get_uuid(r, &u);
		mc_uuid_format(&u, text);
		if (strlen(text) != 36)
			abort();
		(void)mc_uuid_is_nil(&u);
		mc_rpc_put_uuid(w, &u);
		break;
	}
	case FZ_STRV: mc_rpc_put_strv(w, mc_rpc_get_strv(r, (size_t)arg * 17)); break;
	case FZ_SEGMENT: {
		struct mc_rpc_segment s;

		mc_rpc_get_segment(r, &s);
		mc_rpc_put_segment(w, &s);
		break;
	}
	case FZ_CONFIG: {
		struct mc_rpc_config c;

		mc_rpc_get_config(r, &c);
		if (r->err == 0 && c.n_preferred > MC_RPC_MAX_PREFERRED)
			abort();
		mc_rpc_put_config(w, &c);
		break;
	}
	case FZ_REPLICA: {
		struct mc_rpc_replica rep;

		mc_rpc_get_replica(r, &rep);
		if (r->err == 0)
			mc_rpc_put_replica(w, &rep);
		break;
	}
	case FZ_XFER_FAILURE: {
		struct mc_rpc_xfer_failure f;

		mc_rpc_get_xfer_failure(r, &f);
		mc_rpc_put_xfer_failure(w, &f);
		break;
	}
	case FZ_CORRUPT: {
		struct mc_rpc_corrupt_replica c;

		mc_rpc_get_corrupt_replica(r, &c);
		mc_rpc_put_corrupt_replica(w, &c);
		break;
	}
	case FZ_CHECKSUMS: {
		/* The section ends a body: it takes all that is left. */
		struct mc_rpc_checksum c[256];
		int got = mc_rpc_get_checksums(r, c, arg);

		if (got == 1 && (r->err || r->left))
			abort();
		if (got == 1)
			mc_rpc_put_checksums(w, c, arg);
		break;
	}
	case FZ_HDR: {
		const uint8_t *p = mc_rbuf_bytes(r, MC_RPC_HDR_LEN);
		struct mc_rpc_hdr h;
		uint8_t again[MC_RPC_HDR_LEN];

		if (p == NULL)
			break;
		if (mc_rpc_hdr_decode(p, &h, (uint32_t)arg << 8) != 0)
			return -1;
		if (h.body_len > (uint32_t)arg << 8)
			abort();
		(void)mc_rpc_op_name(h.opcode);
		mc_rpc_hdr_encode(again, &h);
		mc_wbuf_put(w, again, sizeof(again));
		break;
	}
	case FZ_DEADLINE: {
		uint32_t dl = mc_rbuf_u32(r);
		int64_t now = mc_rbuf_i64(r);

		if (r->err == 0 && mc_rpc_deadline_expired(dl, now, (uint32_t)arg * 100) &&
		    dl == 0)
			abort();
		mc_wbuf_u32(w, dl);
		mc_wbuf_i64(w, now);
		break;
	}
	}
	return r->err ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mc_rbuf r;
	struct mc_wbuf w, all;

	mc_rbuf_init(&r, data, size);
	mc_wbuf_init(&w);
	mc_wbuf_init(&all);
	while (r.left >= 2) {
		int k = mc_rbuf_u8(&r) % FZ_NKINDS;
		uint8_t arg = mc_rbuf_u8(&r);
		const uint8_t *from = r.p;
		size_t before = r.left;

		mc_wbuf_reset(&w);
		if (fuzz_item(k, arg, &r, &w) != 0)
			break;
		fuzz_same(&w, from, before - r.left);
		/* The growable writer: everything appended to one buffer, a count patched in. */
		mc_wbuf_u32(&all, 0);
		mc_wbuf_put(&all, w.data, w.len);
		mc_wbuf_patch_u32(&all, all.len - w.len - 4, (uint32_t)w.len);
	}
	if (all.err)
		abort();
	mc_wbuf_fini(&w);
	mc_wbuf_fini(&all);
	return 0;
}

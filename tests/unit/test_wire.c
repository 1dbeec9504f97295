/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the bounds-checked wire codec (src/common/wire.c). */
#include <errno.h>
#include <string.h>

#include "common/errcode.h"
#include "common/wire.h"
#include "tap.h"

int main(void)
{
	struct mc_wbuf w;
	struct mc_rbuf r;
	size_t n, cut, fails = 0;
	const char *s;
	char out[8];

	mc_wbuf_init(&w);
	mc_wbuf_u8(&w, 0xab);
	mc_wbuf_u16(&w, 0x1234);
	mc_wbuf_u32(&w, 0xdeadbeef);
	mc_wbuf_u64(&w, 0x0102030405060708ull);
	mc_wbuf_i32(&w, -704);
	mc_wbuf_i64(&w, -5);
	mc_wbuf_cstr(&w, "hello");
	ok(w.err == 0 && w.len == 1 + 2 + 4 + 8 + 4 + 8 + 4 + 5, "writer encodes %zu bytes", w.len);
	ok(w.data[1] == 0x34 && w.data[2] == 0x12, "little-endian on the wire");

	mc_rbuf_init(&r, w.data, w.len);
	ok(mc_rbuf_u8(&r) == 0xab && mc_rbuf_u16(&r) == 0x1234 && mc_rbuf_u32(&r) == 0xdeadbeef &&
		   mc_rbuf_u64(&r) == 0x0102030405060708ull && mc_rbuf_i32(&r) == -704 &&
		   mc_rbuf_i64(&r) == -5,
	   "reader decodes the integers");
	s = mc_rbuf_str(&r, 16, &n);
	ok(s && n == 5 && !memcmp(s, "hello", 5) && r.left == 0 && r.err == 0, "reader decodes the string");

	/* Every truncation fails cleanly and stickily. */
	for (cut = 0; cut < w.len; cut++) {
		mc_rbuf_init(&r, w.data, cut);
		mc_rbuf_u8(&r);
		mc_rbuf_u16(&r);
		mc_rbuf_u32(&r);
		mc_rbuf_u64(&r);
		mc_rbuf_i32(&r);
		mc_rbuf_i64(&r);
		s = mc_rbuf_str(&r, 16, &n);
		if (r.err == 0 || s != NULL)
			fails++;
	}
	is(fails, 0, "all %zu truncations are detected", w.len);

	/* A string longer than the bound is refused; so is one with a NUL for cstr. */
	mc_rbuf_init(&r, w.data + 29, w.len - 29);
	ok(mc_rbuf_str(&r, 4, &n) == NULL && r.err == -EMSGSIZE, "over-long string refused");
	mc_wbuf_reset(&w);
	mc_wbuf_str(&w, "a\0b", 3);
	mc_rbuf_init(&r, w.data, w.len);
	ok(mc_rbuf_cstr(&r, out, sizeof(out)) != 0, "embedded NUL refused by cstr");

	/* Counts that cannot fit in the remaining bytes are refused before any allocation. */
	mc_wbuf_reset(&w);
	mc_wbuf_u32(&w, 1000000);
	mc_wbuf_u32(&w, 1);
	mc_rbuf_init(&r, w.data, w.len);
	ok(mc_rbuf_count(&r, 10000000, 4) == 0 && r.err, "count larger than the payload refused");
	mc_rbuf_init(&r, w.data, w.len);
	ok(mc_rbuf_count(&r, 100, 0) == 0 && r.err, "count over its maximum refused");

	mc_wbuf_reset(&w);
	mc_wbuf_u32(&w, 0);
	mc_wbuf_patch_u32(&w, 0, 77);
	mc_rbuf_init(&r, w.data, w.len);
	is(mc_rbuf_u32(&r), 77, "patch_u32 rewrites a count");

	ok(!strcmp(mc_strerror(-704), "OBJECT_NOT_FOUND") && !strcmp(mc_strerror(-200),
		"NO_AVAILABLE_HANDLE") && !strcmp(mc_strerror(0), "OK"),
	   "mc_strerror gives upstream names");
	mc_wbuf_fini(&w);
	return tap_done();
}

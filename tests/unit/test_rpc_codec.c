/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the master RPC codec (src/proto/rpc.c). */
#include <errno.h>
#include <string.h>

#include "common/errcode.h"
#include "proto/rpc.h"
#include "tap.h"

int main(void)
{
	struct mc_wbuf w;
	struct mc_rbuf r;
	struct mc_rpc_hdr h = { .kind = MC_RPC_RESPONSE, .opcode = 41, .status = -704,
				.req_id = 0x1122334455667788ull, .body_len = 99 };
	struct mc_rpc_hdr g;
	uint8_t hb[MC_RPC_HDR_LEN];
	struct mc_rpc_segment s = { .base = 0x7f0000000000ull, .size = 1ull << 32 }, s2;
	struct mc_rpc_config c, c2;
	struct mc_rpc_replica rep, rep2;
	char idtxt[40];
	size_t cut, full, bad = 0;

	mc_rpc_hdr_encode(hb, &h);
	ok(!memcmp(hb, "MCRP", 4) && mc_rpc_hdr_decode(hb, &g, 1000) == 0 && g.opcode == 41 &&
		   g.status == -704 && g.req_id == h.req_id && g.body_len == 99 &&
		   g.kind == MC_RPC_RESPONSE,
	   "header round trip, magic bytes MCRP");
	is(mc_rpc_hdr_decode(hb, &g, 98), -EMSGSIZE, "body over the maximum refused");
	hb[4] = 2;
	is(mc_rpc_hdr_decode(hb, &g, 1000), -EPROTONOSUPPORT, "unknown version refused");
	hb[4] = 1;
	hb[0] ^= 1;
	is(mc_rpc_hdr_decode(hb, &g, 1000), -EPROTO, "bad magic refused");
	hb[0] ^= 1;
	hb[5] = 7;
	is(mc_rpc_hdr_decode(hb, &g, 1000), -EPROTO, "bad kind refused");

	mc_uuid_generate(&s.id);
	mc_uuid_format(&s.id, idtxt);
	ok(strlen(idtxt) == 36 && idtxt[14] == '4' && !mc_uuid_is_nil(&s.id), "uuid v4 text form");
	s.name = mc_strv_c("10.0.0.1:12345");
	s.endpoint = mc_strv_c("10.0.0.1:15001");
	s.protocol = mc_strv_c("tcp");
	mc_rpc_config_default(&c);
	c.replica_num = 3;
	c.with_hard_pin = 1;
	c.soft_pin_action = MC_SOFT_PIN_ENABLE;
	c.has_soft_pin_ttl = 1;
	c.soft_pin_ttl_ms = 5000;
	c.preferred_segment = mc_strv_c("seg-a");
	c.n_preferred = 2;
	c.preferred[0] = mc_strv_c("x");
	c.preferred[1] = mc_strv_c("yy");
	memset(&rep, 0, sizeof(rep));
	rep.id = 42;
	rep.type = MC_REPLICA_MEMORY;
	rep.status = MC_REPLICA_COMPLETE;
	rep.size = 1000;
	rep.addr = 0x7f0000001000ull;
	rep.segment_name = s.name;
	rep.endpoint = s.endpoint;
	rep.protocol = s.protocol;

	mc_wbuf_init(&w);
	mc_rpc_put_segment(&w, &s);
	mc_rpc_put_config(&w, &c);
	mc_rpc_put_replica(&w, &rep);
	full = w.len;
	mc_rbuf_init(&r, w.data, w.len);
	mc_rpc_get_segment(&r, &s2);
	mc_rpc_get_config(&r, &c2);
	mc_rpc_get_replica(&r, &rep2);
	ok(r.err == 0 && r.left == 0, "segment + config + replica decode exactly");
	ok(!memcmp(s.id.b, s2.id.b, 16) && mc_strv_eq(s.name, s2.name) && s2.base == s.base &&
		   s2.size == s.size && mc_strv_eq(s.endpoint, s2.endpoint) &&
		   mc_strv_eq(s.protocol, s2.protocol),
	   "segment fields survive");
	ok(c2.replica_num == 3 && c2.with_hard_pin && c2.soft_pin_action == MC_SOFT_PIN_ENABLE &&
		   c2.has_soft_pin_ttl && c2.soft_pin_ttl_ms == 5000 &&
		   mc_strv_eq(c2.preferred_segment, c.preferred_segment) && c2.n_preferred == 2 &&
		   mc_strv_eq(c2.preferred[1], mc_strv_c("yy")),
	   "config fields survive");
	ok(rep2.id == 42 && rep2.type == MC_REPLICA_MEMORY && rep2.status == MC_REPLICA_COMPLETE &&
		   rep2.size == 1000 && rep2.addr == rep.addr && mc_strv_eq(rep2.endpoint, rep.endpoint),
	   "replica fields survive");
	for (cut = 0; cut < full; cut++) {
		mc_rbuf_init(&r, w.data, cut);
		mc_rpc_get_segment(&r, &s2);
		mc_rpc_get_config(&r, &c2);
		mc_rpc_get_replica(&r, &rep2);
		bad += r.err == 0;
	}
	is(bad, 0, "every one of %zu truncations is detected", full);

	/* A LOCAL_DISK replica (SSD tier): owner, endpoint and disk address. */
	mc_wbuf_reset(&w);
	memset(&rep, 0, sizeof(rep));
	rep.id = 7;
	rep.type = MC_REPLICA_LOCAL_DISK;
	rep.status = MC_REPLICA_COMPLETE;
	rep.size = 1 << 20;
	rep.addr = (1ull << 62) + (5ull << 36);
	rep.endpoint = mc_strv_c("10.0.0.2:15001");
	memset(rep.client_id.b, 0xab, 16);
	mc_rpc_put_replica(&w, &rep);
	full = w.len;
	mc_rbuf_init(&r, w.data, w.len);
	mc_rpc_get_replica(&r, &rep2);
	ok(r.err == 0 && r.left == 0 && rep2.type == MC_REPLICA_LOCAL_DISK && rep2.addr == rep.addr &&
		   rep2.size == rep.size && mc_strv_eq(rep2.endpoint, rep.endpoint) &&
		   !memcmp(rep2.client_id.b, rep.client_id.b, 16),
	   "a LOCAL_DISK replica survives (client id, endpoint, disk address)");
	for (bad = 0, cut = 0; cut < full; cut++) {
		mc_rbuf_init(&r, w.data, cut);
		mc_rpc_get_replica(&r, &rep2);
		bad += r.err == 0;
	}
	is(bad, 0, "every truncation of a LOCAL_DISK replica is detected");
	ok(!strcmp(mc_rpc_op_name(MC_OP_OFFLOAD_HEARTBEAT), "OffloadObjectHeartbeat") &&
		   !strcmp(mc_rpc_op_name(MC_OP_EVICT_DISK_REPLICA), "BatchEvictDiskReplica"),
	   "SSD tier operation names");

	/* Hostile values. */
	mc_wbuf_reset(&w);
	mc_wbuf_u32(&w, 1);
	mc_wbuf_u8(&w, 0);
	mc_wbuf_u8(&w, 9);	/* soft_pin_action out of range */
	mc_wbuf_u8(&w, 0);
	mc_wbuf_u64(&w, 0);
	mc_wbuf_u8(&w, 0);
	mc_wbuf_u32(&w, 0);
	mc_wbuf_cstr(&w, "");
	mc_wbuf_u32(&w, 0);
	mc_rbuf_init(&r, w.data, w.len);
	mc_rpc_get_config(&r, &c2);
	ok(r.err != 0, "an unknown soft-pin action is refused");
	mc_wbuf_reset(&w);
	mc_wbuf_u32(&w, 1);
	mc_wbuf_u8(&w, 0);
	mc_wbuf_u8(&w, 0);
	mc_wbuf_u8(&w, 0);
	mc_wbuf_u64(&w, 0);
	mc_wbuf_u8(&w, 0);
	mc_wbuf_u32(&w, 0);
	mc_wbuf_cstr(&w, "");
	mc_wbuf_u32(&w, 1000);	/* more preferred segments than allowed */
	mc_rbuf_init(&r, w.data, w.len);
	mc_rpc_get_config(&r, &c2);
	ok(r.err != 0, "too many preferred segments refused");
	mc_wbuf_reset(&w);
	mc_wbuf_u64(&w, 1);
	mc_wbuf_u8(&w, 77);	/* unknown replica type */
	mc_wbuf_u8(&w, 3);
	mc_wbuf_u64(&w, 10);
	mc_rbuf_init(&r, w.data, w.len);
	mc_rpc_get_replica(&r, &rep2);
	ok(r.err != 0, "an unknown replica type is refused");
	mc_wbuf_reset(&w);
	mc_rpc_put_uuid(&w, &s.id);
	mc_wbuf_u32(&w, 300);	/* a segment name over 255 bytes */
	mc_rbuf_init(&r, w.data, w.len);
	mc_rpc_get_segment(&r, &s2);
	ok(r.err != 0, "an over-long segment name is refused");

	/* Frame helpers. */
	mc_wbuf_reset(&w);
	mc_rpc_frame_begin(&w, MC_RPC_REQUEST, MC_OP_PING, 0, 7);
	mc_rpc_put_uuid(&w, &s.id);
	mc_rpc_frame_end(&w, 0);
	ok(mc_rpc_hdr_decode(w.data, &g, 1000) == 0 && g.body_len == 16 && g.req_id == 7 &&
		   g.opcode == MC_OP_PING,
	   "frame_begin/end set the body length");
	/* ReportTransferFailure items. */
	{
		struct mc_rpc_xfer_failure f = { mc_strv_c("10.0.0.2:12345"), -800 }, f2;

		mc_wbuf_reset(&w);
		mc_rpc_put_xfer_failure(&w, &f);
		mc_rbuf_init(&r, w.data, w.len);
		mc_rpc_get_xfer_failure(&r, &f2);
		ok(r.err == 0 && r.left == 0 && mc_strv_eq(f2.segment, f.segment) && f2.code == -800,
		   "transfer failure item round trip");
		mc_wbuf_reset(&w);
		mc_wbuf_u32(&w, 300);	/* a segment name over 255 bytes */
		mc_rbuf_init(&r, w.data, w.len);
		mc_rpc_get_xfer_failure(&r, &f2);
		ok(r.err != 0, "an over-long segment name in a report is refused");
		ok(MC_OP_REPORT_TRANSFER_FAILURE == 80 &&
			   !strcmp(mc_rpc_op_name(80), "ReportTransferFailure"),
		   "ReportTransferFailure is opcode 80");
	}

	/* Checksum sections and ReportChecksumMismatch items. */
	{
		struct mc_rpc_checksum in[3] = { { 1, 0 }, { 0, 0 }, { 1, UINT64_MAX } }, out[3];
		struct mc_rpc_corrupt_replica cr = { mc_strv_c("k/1"), 42, 0x1234, 0x4321 }, cr2;

		mc_wbuf_reset(&w);
		mc_rpc_put_checksums(&w, in, 3);
		mc_rbuf_init(&r, w.data, w.len);
		ok(w.len == 3 * MC_RPC_CHECKSUM_BYTES && mc_rpc_get_checksums(&r, out, 3) == 1 &&
			   r.err == 0 && r.left == 0 && out[0].present && out[0].value == 0 &&
			   !out[1].present && out[2].present && out[2].value == UINT64_MAX,
		   "a checksum section round-trips: 0 and 2^64-1 present, one absent");
		mc_rbuf_init(&r, w.data, 0);
		out[0].present = 1;
		ok(mc_rpc_get_checksums(&r, out, 3) == 0 && r.err == 0 && !out[0].present,
		   "no section (an older peer): every checksum absent, no error");
		mc_rbuf_init(&r, w.data, w.len - 1);
		ok(mc_rpc_get_checksums(&r, out, 3) == -1 && r.err != 0,
		   "a section of the wrong length is malformed");
		mc_wbuf_reset(&w);
		mc_wbuf_u8(&w, 2);
		mc_wbuf_u64(&w, 1);
		mc_rbuf_init(&r, w.data, w.len);
		ok(mc_rpc_get_checksums(&r, out, 1) == -1 && r.err != 0,
		   "a present byte other than 0 or 1 is malformed");
		mc_wbuf_reset(&w);
		mc_wbuf_u8(&w, 0);
		mc_wbuf_u64(&w, 1);
		mc_rbuf_init(&r, w.data, w.len);
		ok(mc_rpc_get_checksums(&r, out, 1) == -1 && r.err != 0,
		   "an absent checksum with a value is malformed");
		mc_wbuf_reset(&w);
		mc_rpc_put_corrupt_replica(&w, &cr);
		mc_rbuf_init(&r, w.data, w.len);
		mc_rpc_get_corrupt_replica(&r, &cr2);
		ok(r.err == 0 && r.left == 0 && mc_strv_eq(cr2.key, cr.key) && cr2.replica_id == 42 &&
			   cr2.expected == 0x1234 && cr2.computed == 0x4321,
		   "ReportChecksumMismatch item round trip");
		ok(MC_OP_REPORT_CHECKSUM_MISMATCH == 81 &&
			   !strcmp(mc_rpc_op_name(81), "ReportChecksumMismatch"),
		   "ReportChecksumMismatch is opcode 81");
		ok(!strcmp(mc_strerror(MC_ERR_CHECKSUM_MISMATCH), "CHECKSUM_MISMATCH") &&
			   MC_ERR_CHECKSUM_MISMATCH == -801,
		   "-801 is CHECKSUM_MISMATCH");
	}

	/* Request deadlines: low 32 bits of wall-clock ms, compared modulo 2^32. */
	{
		int64_t now = 1795566794128ll;	/* a wall clock in ms */
		uint32_t dl = mc_rpc_deadline_encode(now + 5000);

		ok(!mc_rpc_deadline_expired(0, now, 1000), "deadline 0 never expires");
		ok(!mc_rpc_deadline_expired(dl, now, 1000) &&
			   !mc_rpc_deadline_expired(dl, now + 6000, 1000) &&
			   mc_rpc_deadline_expired(dl, now + 6001, 1000),
		   "a deadline expires only past the tolerance");
		ok(!mc_rpc_deadline_expired(mc_rpc_deadline_encode(now - 500), now, 1000) &&
			   mc_rpc_deadline_expired(mc_rpc_deadline_encode(now - 1001), now, 1000),
		   "tolerance for clock error");
		now = 0xffffffffll - 100;	/* the low 32 bits wrap */
		dl = mc_rpc_deadline_encode(now + 5000);
		ok(dl < 5000 && !mc_rpc_deadline_expired(dl, now, 1000) &&
			   mc_rpc_deadline_expired(dl, now + 7000, 1000),
		   "deadlines compare right across the 32-bit wrap");
		is(mc_rpc_deadline_encode(1ll << 32), 1, "a deadline never encodes as 0 (none)");
	}

	ok(!strcmp(mc_rpc_op_name(MC_OP_BATCH_PUT_START), "BatchPutStart") &&
		   !strcmp(mc_rpc_op_name(999), "Unknown"),
	   "operation names");
	mc_wbuf_fini(&w);
	return tap_done();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the master's RPC frames and operation handlers.  The input is what a client
 * would write on the RPC port: request frames (src/proto/rpc.h), back to back.  Each input
 * gets a fresh struct mc_master on a fake clock, and every frame goes through the dispatcher
 * the RPC server calls (mc_master_handle), exactly as mc_conn_on_read hands it over: a header
 * that does not decode, or a frame that is not a request, ends the input as it closes the
 * connection.  Every response must be one well-formed response frame for its request.
 *
 * Two pseudo-frames, which no client sends (their magic is not the RPC's), drive what the
 * master does between requests:
 *   "MCTK" (magic 0x4B54434D): a tick.  The fake clock advances by req_id milliseconds (at most
 *          a day), then the master's periodic work runs: discards released, clients' liveness,
 *          tier tasks expired (opcode bit 0), eviction (bit 1), unmounted segments reaped.
 *   "MCCF" (magic 0x4643434D), as the first frame only: the configuration, by opcode bits:
 *          1 root_fs_dir set (the shared-directory tier), 2 enable_offload, 4 offload_on_evict,
 *          8 promotion_on_hit, 16 the prefix eviction policy, 32 dormant_segment_ttl_sec 0,
 *          64 enable_disk_eviction.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/wire.h"
#include "master/ops.h"
#include "proto/rpc.h"
#include "fuzz_util.h"
/* The unit tests' in-process master; this target uses part of its helpers. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "../unit/master_harness.h"

#define FUZZ_TICK_MAGIC 0x4B54434Du
#define FUZZ_CONFIG_MAGIC 0x4643434Du
#define FUZZ_MAX_FRAMES 512
#define FUZZ_MAX_BODY (1u << 20)

/* Configuration by the MCCF frame's flags, on top of the unit tests' master (master_harness.h). */
static void fuzz_master_start(unsigned flags)
{
	struct mc_master_config *c = &M.cfg;

	fake_now = 1000000;
	master_init(&M, flags & 16 ? "prefix" : NULL);
	c->default_kv_lease_ttl = 5000;
	c->dormant_segment_ttl_sec = flags & 32 ? 0 : 600;
	c->enable_offload = !!(flags & 2);
	c->offload_on_evict = !!(flags & 4);
	c->promotion_on_hit = !!(flags & 8);
	c->enable_disk_eviction = !!(flags & 64);
	c->offloading_queue_limit = 64;
	c->rpc_max_frame_bytes = FUZZ_MAX_BODY;
	c->quota_bytes = 1u << 30;
	if (flags & 1) {
		/* The shared-directory tier is set up from the configuration at start. */
		mc_fs_fini(&M);
		c->root_fs_dir = (char *)"/nonexistent/mc-fuzz";
		mc_fs_init(&M);
	}
}

static void fuzz_tick(struct mc_master *m, uint64_t advance_ms, unsigned what)
{
	fake_now += (int64_t)(advance_ms % 86400000u);
	mc_master_release_discards(m, mc_master_now(m), 0);
	mc_master_check_clients(m);
	if (what & 1)
		mc_tier_expire(m, mc_master_now(m));
	if (what & 2)
		mc_master_evict_check(m);
}

/* A response frame that is not exactly one answer to h is a bug of the dispatcher. */
static void fuzz_check_response(const struct mc_wbuf *w, const struct mc_rpc_hdr *h)
{
	struct mc_rpc_hdr rh;

	if (w->err || w->len < MC_RPC_HDR_LEN ||
	    mc_rpc_hdr_decode(w->data, &rh, UINT32_MAX) != 0 || rh.kind != MC_RPC_RESPONSE ||
	    rh.opcode != h->opcode || rh.req_id != h->req_id ||
	    w->len != MC_RPC_HDR_LEN + (size_t)rh.body_len || (rh.status != 0 && rh.body_len))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct mc_wbuf w;
	unsigned flags = 0, frames = 0;
	size_t pos = 0;

	if (!ready) {
		fuzz_quiet_logs();
		ready = 1;
	}
	if (size >= MC_RPC_HDR_LEN && mc_get_le32(data) == FUZZ_CONFIG_MAGIC) {
		flags = (unsigned)(data[6] | data[7] << 8);
		pos = MC_RPC_HDR_LEN;
	}
	fuzz_master_start(flags);
	mc_wbuf_init(&w);
	while (size - pos >= MC_RPC_HDR_LEN && frames++ < FUZZ_MAX_FRAMES) {
		struct mc_rpc_hdr h;

		if (mc_get_le32(data + pos) == FUZZ_TICK_MAGIC) {
			fuzz_tick(&M, mc_get_le64(data + pos + 16), data[pos + 6]);
			pos += MC_RPC_HDR_LEN;
		} else {
			if (mc_rpc_hdr_decode(data + pos, &h, FUZZ_MAX_BODY) != 0 ||
			    h.kind != MC_RPC_REQUEST ||
			    size - pos - MC_RPC_HDR_LEN < (size_t)h.body_len)
				break;	/* the server closes the connection, or waits for more */
			mc_wbuf_reset(&w);
			mc_master_handle(&M, &h, data + pos + MC_RPC_HDR_LEN, &w, "fuzz:1");
			fuzz_check_response(&w, &h);
			pos += MC_RPC_HDR_LEN + (size_t)h.body_len;
		}
		/* Deferred work: the reaping of unmounted segments. */
		event_base_loop(M.base, EVLOOP_NONBLOCK);
	}
	mc_wbuf_fini(&w);
	master_fini(&M);
	return 0;
}

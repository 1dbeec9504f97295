/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the transfer engine's handshake port and the JSON that comes through it.  The
 * first input byte chooses what the rest is:
 *   0  bytes a peer writes on the handshake port (frames of u64 length, u8 type, JSON): served
 *      by handshake.c for an engine with two registered buffers, on one end of a socketpair
 *      (mc_te_hs_adopt); the reply is read until the server closes;
 *   1  a segment descriptor (te_meta.c's mc_te_desc_from_json, as fetched from a peer or the
 *      metadata service), then what the rdma transport takes from it (its NICs, buffers with
 *      rkeys, and NIC priority matrix: mc_rdma_peer_new) with look-ups in it;
 *   2  an rdma Connection frame's JSON (mc_rdma_hs_decode), encoded again and decoded again to
 *      the same fields.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "engine/engine.h"
#include "fuzz_util.h"
#if HAVE_RDMA
#include "rdma/rdma_int.h"
#endif

static struct event_base *base;
static struct mc_engine eng;
static struct mc_te_buffer bufs[2] = {
	{ .addr = 0x7f0000001000ull, .length = 1u << 20, .fd = -1 },
	{ .addr = 0x7f0000200000ull, .length = 4096, .fd = -1 },
};

static void fuzz_setup(void)
{
	fuzz_quiet_logs();
	base = event_base_new();
	if (base == NULL)
		abort();
	pthread_mutex_init(&eng.mu, NULL);
	pthread_cond_init(&eng.batch_cv, NULL);
	snprintf(eng.server_name, sizeof(eng.server_name), "127.0.0.1:15001");
	snprintf(eng.ip, sizeof(eng.ip), "127.0.0.1");
	eng.rpc_port = 15001;
	eng.p2p = 1;
	eng.bufs = bufs;
	eng.nbufs = 2;
	eng.notifies_tail = &eng.notifies;
}

static void fuzz_port(const uint8_t *data, size_t size)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	evutil_make_socket_nonblocking(sv[0]);
	evutil_make_socket_nonblocking(sv[1]);
	if (mc_te_hs_adopt(&eng, base, sv[1]) != 0)
		abort();
	fuzz_exchange(base, sv[0], data, size, 1, 2000);
	close(sv[0]);
	event_base_loop(base, EVLOOP_NONBLOCK);
	/* Notifications taken as getNotifies would. */
	mc_te_notify_free(mc_te_notify_take(&eng));
}

static void fuzz_descriptor(const uint8_t *data, size_t size)
{
	struct mc_te_desc d;
	char *again;

	if (mc_te_desc_from_json((const char *)data, size, &d) != 0)
		return;
	if (d.nbuffers > MC_TE_MAX_BUFFERS || strlen(d.name) >= sizeof(d.name) || d.raw == NULL)
		abort();
	again = json_dumps(d.raw, JSON_COMPACT);
	if (again == NULL)
		abort();
	{
		struct mc_te_desc d2;

		/* What was taken once is taken again. */
		if (mc_te_desc_from_json(again, strlen(again), &d2) != 0 ||
		    d2.nbuffers != d.nbuffers || strcmp(d2.name, d.name) != 0)
			abort();
		mc_te_desc_fini(&d2);
	}
	free(again);
#if HAVE_RDMA
	{
		struct mc_rdma_peer *p = mc_rdma_peer_new(d.raw, d.name, "127.0.0.1", 15001);

		if (p != NULL) {
			uint32_t i, pref, other;

			for (i = 0; i < p->nbufs && i < 8; i++) {
				const struct mc_rdma_peer_buf *b = mc_rdma_peer_find(p, p->bufs[i].addr,
										   p->bufs[i].len);
				int overlaps = (i > 0 && p->bufs[i - 1].addr + p->bufs[i - 1].len >
								 p->bufs[i].addr) ||
					       (i + 1 < p->nbufs && p->bufs[i].addr + p->bufs[i].len >
								     p->bufs[i + 1].addr);

				/* A buffer's own range is found, unless the peer described buffers
				 * that overlap (the look-up then takes the last one starting before
				 * the range, and a transfer to it fails cleanly). */
				if (b == NULL) {
					if (!overlaps)
						abort();
					continue;
				}
				if (b->addr > p->bufs[i].addr ||
				    b->addr + b->len < p->bufs[i].addr + p->bufs[i].len)
					abort();
				mc_rdma_topo_lookup(&p->topo, b->location, p->nnics, &pref, &other);
				if (pref & other)
					abort();
			}
			(void)mc_rdma_peer_find(p, 0, 1);
			(void)mc_rdma_peer_find(p, UINT64_MAX, 1);
			mc_rdma_peer_unref(p);
		}
	}
#endif
	mc_te_desc_fini(&d);
}

#if HAVE_RDMA
static void fuzz_connection(const uint8_t *data, size_t size)
{
	struct mc_rdma_hs_desc d, d2;
	char *json;

	memset(&d, 0, sizeof(d));
	if (mc_rdma_hs_decode((const char *)data, size, &d) != 0)
		return;
	if (d.nqp > MC_RDMA_MAX_QP_PER_EP)
		abort();
	json = mc_rdma_hs_encode(&d);
	if (json == NULL)
		abort();
	memset(&d2, 0, sizeof(d2));
	if (mc_rdma_hs_decode(json, strlen(json), &d2) != 0 || d2.nqp != d.nqp ||
	    d2.lid != d.lid || memcmp(&d2.gid, &d.gid, sizeof(d.gid)) != 0 ||
	    memcmp(d2.qpn, d.qpn, sizeof(d.qpn)) != 0 ||
	    strcmp(d2.local_nic_path, d.local_nic_path) != 0 ||
	    strcmp(d2.peer_nic_path, d.peer_nic_path) != 0 ||
	    strcmp(d2.reply_msg, d.reply_msg) != 0)
		abort();
	free(json);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (base == NULL)
		fuzz_setup();
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_port(data + 1, size - 1);
		break;
	case 1:
		fuzz_descriptor(data + 1, size - 1);
		break;
	case 2:
#if HAVE_RDMA
		fuzz_connection(data + 1, size - 1);
#endif
		break;
	}
	return 0;
}

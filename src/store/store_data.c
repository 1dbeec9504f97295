/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Moving object bytes for API calls: every byte goes through the handle's transfer engine.  A
 * batch opens each replica's segment by name once (the engine keeps it open, and fetches its
 * descriptor again after a failure), then hands the whole batch over and waits: the engine
 * copies our own segments directly, same-host peers' through shared memory, and reaches the
 * others over rdma or tcp.
 *
 * Failed transfers are remembered and reported: the data endpoints they went to are "suspect"
 * for MC_STORE_SUSPECT_MS (reads try their replicas last), and their segments are reported to
 * the master with ReportTransferFailure, fire-and-forget, one call per batch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/errcode.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "store/store.h"

/* A batch in flight (mc_store_transfer_start). */
struct mc_store_xfer {
	struct mc_xfer_req *reqs;
	uint32_t n;
	struct mc_te_inflight *t;
	int *status;
};

struct mc_store_xfer *mc_store_transfer_start(struct mc_store *st, struct mc_xfer_req *reqs,
					      uint32_t n, int notify, uint8_t *want_crc)
{
	struct mc_store_xfer *x = calloc(1, sizeof(*x));
	struct transfer_request *tr = calloc(n ? n : 1, sizeof(*tr));
	struct mc_te_endpoint *ep = calloc(n ? n : 1, sizeof(*ep));
	uint32_t *first = calloc(n ? n : 1, sizeof(*first));
	uint32_t i, j, nfirst = 0;

	mc_store_mark_active(st, mc_store_now_ms());
	if (x)
		x->status = calloc(n ? n : 1, sizeof(*x->status));
	if (x == NULL || x->status == NULL || tr == NULL || ep == NULL || first == NULL)
		goto fail;
	x->reqs = reqs;
	x->n = n;
	for (i = 0; i < n; i++)
		reqs[i].status = 0;
	for (i = 0; i < n; i++) {
		segment_handle_t h = ERR_INVALID_ARGUMENT;

		tr[i].opcode = reqs[i].opcode == MC_XFER_READ ? OPCODE_READ : OPCODE_WRITE;
		tr[i].source = reqs[i].local;
		tr[i].target_offset = reqs[i].remote;
		tr[i].length = reqs[i].len;
		ep[i].nic_hint = reqs[i].nic[0] ? reqs[i].nic : NULL;
		if (reqs[i].segment[0] == '\0') {
			/* An SSD replica: no segment, its owner's data server by address. */
			ep[i].host = reqs[i].host;
			ep[i].port = reqs[i].port;
			tr[i].target_id = MC_TE_SEG_ENDPOINT;
			continue;
		}
		/* One open per peer segment in the batch (the engine caches them): the distinct
		 * segments so far are the requests listed in first[]. */
		for (j = 0; j < nfirst; j++)
			if (!strcmp(reqs[first[j]].segment, reqs[i].segment)) {
				h = tr[first[j]].target_id;
				break;
			}
		if (j == nfirst) {
			h = openSegment(st->engine, reqs[i].segment);
			first[nfirst++] = i;
		}
		tr[i].target_id = h;
	}
	x->t = mc_te_transfer_start(st->engine, tr, ep, n, notify, want_crc);
	if (x->t == NULL)
		goto fail;
	free(tr);
	free(ep);
	free(first);
	return x;
fail:
	for (i = 0; i < n; i++)
		reqs[i].status = MC_ERR_TRANSFER_FAIL;
	if (x)
		free(x->status);
	free(x);
	free(tr);
	free(ep);
	free(first);
	return NULL;
}

int mc_store_transfer_finish(struct mc_store_xfer *x, mc_te_done_fn on_done, void *arg)
{
	uint32_t i, failed = 0;

	mc_te_transfer_finish(x->t, x->status, on_done, arg);
	for (i = 0; i < x->n; i++) {
		/* A status the caller set from on_done (e.g. a checksum mismatch) stays. */
		if (x->reqs[i].status == 0)
			x->reqs[i].status = x->status[i] ? MC_ERR_TRANSFER_FAIL : 0;
		failed += x->reqs[i].status != 0;
	}
	free(x->status);
	free(x);
	return (int)failed;
}

int mc_store_transfer(struct mc_store *st, struct mc_xfer_req *reqs, uint32_t n)
{
	struct mc_store_xfer *x;

	if (n == 0)
		return 0;
	x = mc_store_transfer_start(st, reqs, n, 0, NULL);
	return x ? mc_store_transfer_finish(x, NULL, NULL) : (int)n;
}

int mc_store_suspect(struct mc_store *st, struct mc_strv endpoint)
{
	int64_t now = mc_store_now_ms();
	int hit = 0;
	uint32_t i;

	if (endpoint.n == 0)
		return 0;
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < MC_STORE_SUSPECT_MAX && !hit; i++)
		hit = st->suspect[i].until_ms > now &&
		      mc_strv_eq(endpoint, mc_strv_c(st->suspect[i].endpoint));
	pthread_mutex_unlock(&st->mu);
	return hit;
}

/* Mark host:port suspect (or forgive it: clear). */
static void mc_store_suspect_set(struct mc_store *st, const char *host, uint16_t port, int clear)
{
	char ep[300];
	int64_t now = mc_store_now_ms();
	uint32_t i, slot = 0;

	snprintf(ep, sizeof(ep), "%s:%u", host, port);
	pthread_mutex_lock(&st->mu);
	for (i = 0; i < MC_STORE_SUSPECT_MAX; i++) {
		if (!strcmp(st->suspect[i].endpoint, ep)) {
			slot = i;
			break;
		}
		if (st->suspect[i].until_ms < st->suspect[slot].until_ms)
			slot = i;
	}
	if (clear) {
		if (i < MC_STORE_SUSPECT_MAX)
			st->suspect[i].until_ms = 0;
	} else {
		snprintf(st->suspect[slot].endpoint, sizeof(st->suspect[slot].endpoint), "%s", ep);
		st->suspect[slot].until_ms = now + MC_STORE_SUSPECT_MS;
	}
	pthread_mutex_unlock(&st->mu);
}

void mc_store_note_transfers(struct mc_store *st, const struct mc_xfer_req *reqs, uint32_t n)
{
	struct mc_rpc_xfer_failure f[MC_RPC_MAX_REPLICAS];
	struct mc_rpc_call *call;
	uint32_t i, j, nf = 0;

	for (i = 0; i < n; i++) {
		/* Bytes that failed their checksum came from a peer that answered. */
		if (reqs[i].status == 0 || reqs[i].status == MC_ERR_CHECKSUM_MISMATCH) {
			if (i == 0 || reqs[i - 1].port != reqs[i].port ||
			    strcmp(reqs[i - 1].host, reqs[i].host))
				mc_store_suspect_set(st, reqs[i].host, reqs[i].port, 1);
			continue;
		}
		mc_store_suspect_set(st, reqs[i].host, reqs[i].port, 0);
		if (reqs[i].segment[0] == '\0')
			continue;
		for (j = 0; j < nf; j++)
			if (mc_strv_eq(f[j].segment, mc_strv_c(reqs[i].segment)))
				break;
		if (j == nf && nf < MC_RPC_MAX_REPLICAS) {
			f[nf].segment = mc_strv_c(reqs[i].segment);
			f[nf++].code = reqs[i].status;
		}
	}
	if (nf == 0 || (call = mc_rpc_call_new(MC_OP_REPORT_TRANSFER_FAILURE)) == NULL)
		return;
	mc_rpc_put_uuid(&call->req, &st->client_id);
	mc_wbuf_u32(&call->req, nf);
	for (j = 0; j < nf; j++)
		mc_rpc_put_xfer_failure(&call->req, &f[j]);
	mc_store_call_async(st, call);
}

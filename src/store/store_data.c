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

int mc_store_transfer(struct mc_store *st, struct mc_xfer_req *reqs, uint32_t n)
{
	struct transfer_request *tr;
	struct mc_te_endpoint *ep;
	int *status;
	uint32_t *first;
	uint32_t i, j, nfirst = 0, failed = 0;

	if (n == 0)
		return 0;
	tr = calloc(n, sizeof(*tr));
	status = calloc(n, sizeof(*status));
	first = calloc(n, sizeof(*first));
	ep = calloc(n, sizeof(*ep));
	if (tr == NULL || status == NULL || first == NULL || ep == NULL) {
		for (i = 0; i < n; i++)
			reqs[i].status = MC_ERR_TRANSFER_FAIL;
		free(tr);
		free(status);
		free(first);
		free(ep);
		return (int)n;
	}
	for (i = 0; i < n; i++) {
		segment_handle_t h = ERR_INVALID_ARGUMENT;

		if (reqs[i].segment[0] == '\0') {
			/* An SSD replica: no segment, its owner's data server by address. */
			ep[i].host = reqs[i].host;
			ep[i].port = reqs[i].port;
			tr[i].opcode = reqs[i].opcode == MC_XFER_READ ? OPCODE_READ : OPCODE_WRITE;
			tr[i].source = reqs[i].local;
			tr[i].target_id = MC_TE_SEG_ENDPOINT;
			tr[i].target_offset = reqs[i].remote;
			tr[i].length = reqs[i].len;
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
		tr[i].opcode = reqs[i].opcode == MC_XFER_READ ? OPCODE_READ : OPCODE_WRITE;
		tr[i].source = reqs[i].local;
		tr[i].target_id = h;
		tr[i].target_offset = reqs[i].remote;
		tr[i].length = reqs[i].len;
	}
	mc_te_transfer_wait(st->engine, tr, ep, n, status);
	for (i = 0; i < n; i++) {
		reqs[i].status = status[i] ? MC_ERR_TRANSFER_FAIL : 0;
		failed += status[i] != 0;
	}
	free(tr);
	free(status);
	free(first);
	free(ep);
	return (int)failed;
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
		if (reqs[i].status == 0) {
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

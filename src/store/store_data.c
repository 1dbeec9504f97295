/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Moving object bytes for API calls: a batch of transfers is handed to the store's loop in one
 * call, submitted to the TCP data client all at once, and the API thread waits for the last
 * completion.  With a transfer engine (protocol rdma, store_rdma.c) the batch goes to it
 * instead.
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
#include "store/store.h"

struct mc_xfer_batch {
	struct mc_store *st;
	struct mc_xfer_req *reqs;
	uint32_t n;
	uint32_t left;
	uint32_t failed;
	struct mc_waiter w;
};

struct mc_xfer_one {
	struct mc_xfer_batch *b;
	uint32_t i;
};

static void mc_xfer_batch_done(struct mc_xfer_batch *b, uint32_t i, int status)
{
	b->reqs[i].status = status;
	if (status)
		b->failed++;
	if (--b->left == 0)
		mc_waiter_signal(&b->w, 0);
}

static void mc_xfer_on_done(void *arg, int status)
{
	struct mc_xfer_one *one = arg;

	mc_xfer_batch_done(one->b, one->i, status);
}

static void mc_xfer_batch_on_loop(void *arg)
{
	struct mc_xfer_one *ones = arg;
	struct mc_xfer_batch *b = ones[0].b;
	uint32_t i;

	for (i = 0; i < b->n; i++) {
		struct mc_xfer_req *r = &b->reqs[i];

		if (mc_tcp_client_submit(b->st->cli, r->host, r->port, r->opcode, r->local, r->remote,
					 r->len, mc_xfer_on_done, &ones[i]) != 0)
			mc_xfer_batch_done(b, i, MC_ERR_TRANSFER_FAIL);
	}
}

int mc_store_transfer(struct mc_store *st, struct mc_xfer_req *reqs, uint32_t n)
{
	if (st->engine && n)
		return mc_store_rdma_transfer(st, reqs, n);
	return mc_store_transfer_tcp(st, reqs, n);
}

int mc_store_transfer_tcp(struct mc_store *st, struct mc_xfer_req *reqs, uint32_t n)
{
	struct mc_xfer_batch b = { .st = st, .reqs = reqs, .n = n, .left = n };
	struct mc_xfer_one *ones;
	uint32_t i;

	if (n == 0)
		return 0;
	ones = calloc(n, sizeof(*ones));
	if (ones == NULL) {
		for (i = 0; i < n; i++)
			reqs[i].status = MC_ERR_TRANSFER_FAIL;
		return (int)n;
	}
	for (i = 0; i < n; i++) {
		ones[i].b = &b;
		ones[i].i = i;
	}
	mc_waiter_init(&b.w);
	if (mc_loop_thread_call(st->lt, mc_xfer_batch_on_loop, ones) != 0) {
		for (i = 0; i < n; i++)
			reqs[i].status = MC_ERR_TRANSFER_FAIL;
		b.failed = n;
	} else {
		mc_waiter_wait(&b.w);
	}
	mc_waiter_fini(&b.w);
	free(ones);
	return (int)b.failed;
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

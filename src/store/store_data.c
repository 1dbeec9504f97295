/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Moving object bytes for API calls: a batch of transfers is handed to the store's loop in one
 * call, submitted to the TCP data client all at once, and the API thread waits for the last
 * completion.  With a transfer engine (protocol rdma, store_rdma.c) the batch goes to it
 * instead.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

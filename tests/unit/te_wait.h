/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TE_WAIT_H
#define MC_TE_WAIT_H

/*
 * Tests of the transfer engine: run one request on a batch of its own and wait for it, bounded
 * so that an engine that hangs fails the test instead of hanging it.
 */
#include <time.h>

#include "mooncake/transfer_engine_c.h"

/* The request's final STATUS_*; -1 if it could not be submitted; -2 if its status could not be
 * read or it was still unfinished after timeout_s seconds. */
static inline int te_run_one(transfer_engine_t e, struct transfer_request *r, int timeout_s)
{
	struct transfer_status st = { 0, 0 };
	batch_id_t b = allocateBatchID(e, 1);
	time_t end = time(NULL) + timeout_s;

	if (b == INVALID_BATCH || submitTransfer(e, b, r, 1))
		return -1;
	do {
		if (getTransferStatus(e, b, 0, &st) || time(NULL) > end)
			return -2;
	} while (st.status == STATUS_PENDING || st.status == STATUS_WAITING);
	freeBatchID(e, b);
	return st.status;
}

#endif

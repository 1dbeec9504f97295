/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transfer engine C API between two engines: reads and writes of many sizes and batch
 * shapes checked byte for byte, out-of-range and unregistered addresses refused, a dead peer
 * failing its requests instead of hanging, batch rules.  Metadata from argv[1]
 * (P2PHANDSHAKE or http://host:port/metadata).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/transfer_engine_c.h"
#include "../unit/tap.h"
#include "cluster_common.h"

#define BUF (32u << 20)

static int wait_batch(transfer_engine_t e, batch_id_t b, size_t n, int *completed)
{
	time_t end = time(NULL) + 30;
	size_t i;

	*completed = 0;
	for (i = 0; i < n; i++) {
		struct transfer_status st;

		do {
			if (getTransferStatus(e, b, i, &st))
				return -1;
			if (time(NULL) > end)
				return -2;
		} while (st.status == STATUS_PENDING || st.status == STATUS_WAITING);
		*completed += st.status == STATUS_COMPLETED;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *meta = argc > 1 ? argv[1] : "P2PHANDSHAKE";
	int p2p = !strcmp(meta, "P2PHANDSHAKE");
	transfer_engine_t tgt, ini;
	uint8_t *tbuf = malloc(BUF), *ibuf = malloc(BUF);
	static const size_t sizes[] = { 1, 4096, 65536, (1u << 20) + 3, 16u << 20 };
	char name[128];
	segment_handle_t seg;
	struct transfer_request req[64];
	batch_id_t b;
	int done, i;
	size_t k;

	tgt = createTransferEngine(meta, "target-seg", "127.0.0.1", 0, 0);
	ini = createTransferEngine(meta, "initiator-seg", "127.0.0.1", 0, 0);
	ok(tgt && ini, "two engines start with %s metadata", meta);
	if (!tgt || !ini)
		return tap_done();
	ok(installTransport(tgt, "tcp", NULL) != NULL && installTransport(ini, "rdma", NULL) == NULL,
	   "tcp installs; rdma is refused in this build");
	ok(registerLocalMemory(tgt, tbuf, BUF, "cpu:0", 1) == 0 &&
		   registerLocalMemory(ini, ibuf, BUF, "cpu:0", 1) == 0,
	   "both register 32 MiB");
	ok(registerLocalMemory(tgt, tbuf + 100, 10, "cpu:0", 1) == ERR_ADDRESS_OVERLAPPED,
	   "overlapping registration gives ERR_ADDRESS_OVERLAPPED");
	if (p2p)
		getLocalIpAndPort(tgt, name, sizeof(name));
	else
		snprintf(name, sizeof(name), "target-seg");
	seg = openSegment(ini, name);
	ok(seg > 0, "initiator opens the target's segment %s (handle %d)", name, seg);
	ok(openSegment(ini, "no-such-segment:1") < 0, "opening an unknown segment fails");

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];

		cc_fill(ibuf, n, "w", k);
		memset(&req[0], 0, sizeof(req[0]));
		req[0].opcode = OPCODE_WRITE;
		req[0].source = ibuf;
		req[0].target_id = seg;
		req[0].target_offset = (uint64_t)(uintptr_t)tbuf;
		req[0].length = n;
		b = allocateBatchID(ini, 1);
		ok(submitTransfer(ini, b, req, 1) == 0 && wait_batch(ini, b, 1, &done) == 0 &&
			   done == 1 && cc_check(tbuf, n, "w", k),
		   "WRITE of %zu bytes lands intact", n);
		freeBatchID(ini, b);
		cc_fill(tbuf + 4096, n, "r", k);
		req[0].opcode = OPCODE_READ;
		req[0].target_offset = (uint64_t)(uintptr_t)(tbuf + 4096);
		b = allocateBatchID(ini, 1);
		ok(submitTransfer(ini, b, req, 1) == 0 && wait_batch(ini, b, 1, &done) == 0 &&
			   done == 1 && cc_check(ibuf, n, "r", k),
		   "READ of %zu bytes arrives intact", n);
		freeBatchID(ini, b);
	}

	/* A batch of 64 mixed requests. */
	cc_fill(ibuf, BUF / 2, "mix", 1);
	cc_fill(tbuf + BUF / 2, BUF / 2, "mix", 2);
	for (i = 0; i < 64; i++) {
		size_t chunk = BUF / 2 / 64;

		req[i].opcode = i % 2 ? OPCODE_READ : OPCODE_WRITE;
		req[i].source = ibuf + (i % 2 ? BUF / 2 : 0) + (size_t)i * chunk;
		req[i].target_id = seg;
		req[i].target_offset = (uint64_t)(uintptr_t)(tbuf + (i % 2 ? BUF / 2 : 0) + (size_t)i * chunk);
		req[i].length = chunk;
	}
	b = allocateBatchID(ini, 64);
	ok(submitTransfer(ini, b, req, 64) == 0 && wait_batch(ini, b, 64, &done) == 0 && done == 64,
	   "a batch of 64 mixed reads and writes completes");
	ok(memcmp(ibuf + BUF / 2 + 32 * 0, tbuf + BUF / 2, 0) == 0 &&
		   memcmp(ibuf + (BUF / 2 / 64), tbuf + BUF / 2 + (BUF / 2 / 64), 0) == 0 &&
		   !memcmp(tbuf, ibuf, BUF / 2 / 64) &&
		   !memcmp(ibuf + BUF / 2 + BUF / 2 / 64, tbuf + BUF / 2 + BUF / 2 / 64, BUF / 2 / 64),
	   "and its data matches on both sides");
	ok(submitTransfer(ini, b, req, 1) == ERR_TOO_MANY_REQUESTS,
	   "submitting beyond the batch size is refused");
	ok(freeBatchID(ini, b) == 0 && freeBatchID(ini, b) == ERR_INVALID_ARGUMENT,
	   "a batch frees once");

	/* Out-of-range and unregistered targets fail per request. */
	req[0].opcode = OPCODE_WRITE;
	req[0].source = ibuf;
	req[0].target_id = seg;
	req[0].target_offset = (uint64_t)(uintptr_t)tbuf + BUF - 10;
	req[0].length = 20;
	req[1] = req[0];
	req[1].target_offset = (uint64_t)(uintptr_t)ibuf;
	req[1].length = 10;
	req[2] = req[0];
	req[2].target_offset = (uint64_t)(uintptr_t)tbuf;
	req[2].length = 10;
	b = allocateBatchID(ini, 3);
	ok(submitTransfer(ini, b, req, 3) == 0 && wait_batch(ini, b, 3, &done) == 0 && done == 1,
	   "out-of-range and unregistered targets fail, the valid request completes");
	freeBatchID(ini, b);

	/* Our own segment by LOCAL_SEGMENT. */
	req[0].target_id = LOCAL_SEGMENT;
	req[0].opcode = OPCODE_WRITE;
	req[0].source = ibuf;
	req[0].target_offset = (uint64_t)(uintptr_t)(ibuf + 1000);
	req[0].length = 100;
	b = allocateBatchID(ini, 1);
	ok(submitTransfer(ini, b, req, 1) == 0 && wait_batch(ini, b, 1, &done) == 0 && done == 1,
	   "LOCAL_SEGMENT copies within registered memory");
	freeBatchID(ini, b);

	/* The peer goes away: requests fail, nothing hangs. */
	destroyTransferEngine(tgt);
	req[0].opcode = OPCODE_READ;
	req[0].source = ibuf;
	req[0].target_id = seg;
	req[0].target_offset = (uint64_t)(uintptr_t)tbuf;
	req[0].length = 1u << 20;
	b = allocateBatchID(ini, 1);
	ok(submitTransfer(ini, b, req, 1) == 0 && wait_batch(ini, b, 1, &done) == 0 && done == 0,
	   "a request to a dead peer ends FAILED instead of hanging");
	freeBatchID(ini, b);
	ok(unregisterLocalMemory(ini, ibuf) == 0 &&
		   unregisterLocalMemory(ini, ibuf) == ERR_ADDRESS_NOT_REGISTERED,
	   "unregister once");
	destroyTransferEngine(ini);
	free(tbuf);
	free(ibuf);
	return tap_done();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport over the real libibverbs.  Needs an RDMA device (a NIC, or rxe/siw soft
 * RoCE): without one, ibv_get_device_list finds nothing and the test skips with 77.  With one,
 * two transports on the first device exchange QPs and move 1 MiB each way, checked byte for
 * byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/verbs.h"
#include "rdma_harness.h"
#include "tap.h"

int main(void)
{
	const struct mc_verbs_ops *ops = mc_verbs_ibv();
	struct ibv_device **list;
	struct mc_rdma_peer *pb;
	char dev[64];
	size_t len = 1u << 20, i;
	unsigned char *a, *b;
	int n = 0;

	list = ops->get_device_list(&n);
	if (list == NULL || n == 0) {
		printf("1..0 # SKIP no RDMA device (ibv_get_device_list found none)\n");
		fprintf(stderr, "no RDMA device: skipping the libibverbs test\n");
		if (list)
			ops->free_device_list(list);
		return 77;
	}
	snprintf(dev, sizeof(dev), "%s", ops->get_device_name(list[0]));
	ops->free_device_list(list);
	ok(hn_start(0, "real-a", NULL, dev, NULL) == 0, "transport A on %s", dev);
	ok(hn_start(1, "real-b", NULL, dev, NULL) == 0, "transport B on %s", dev);
	a = malloc(len);
	b = malloc(len);
	if (a == NULL || b == NULL || hn_sides[0].r == NULL || hn_sides[1].r == NULL)
		return tap_done() ? 1 : 1;
	for (i = 0; i < len; i++) {
		a[i] = (unsigned char)(i * 7);
		b[i] = 0;
	}
	ok(mc_rdma_register(hn_sides[0].r, a, len, "cpu:0", 1) == 0, "register on A");
	ok(mc_rdma_register(hn_sides[1].r, b, len, "cpu:0", 1) == 0, "register on B");
	pb = hn_peer(1, NULL);
	ok(pb != NULL, "B's descriptor parses");
	is(hn_xfer(0, MC_RDMA_WRITE, a, (uint64_t)(uintptr_t)b, len, pb), 0, "write 1 MiB");
	ok(memcmp(a, b, len) == 0, "written bytes arrived");
	memset(a, 0, len);
	is(hn_xfer(0, MC_RDMA_READ, a, (uint64_t)(uintptr_t)b, len, pb), 0, "read 1 MiB");
	ok(memcmp(a, b, len) == 0, "read bytes match");
	mc_rdma_peer_unref(pb);
	hn_stop(0);
	hn_stop(1);
	free(a);
	free(b);
	return tap_done();
}

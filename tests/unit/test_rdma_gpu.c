/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU memory over the rdma transport, through the fake NICs of verbs_fake.c and a CUDA double
 * (mc_gpu_ops): a buffer in "device memory" the NICs can register (nvidia-peermem / dma-buf)
 * is registered on them directly and moved without staging, in both directions and as a
 * target; one they cannot register (EFAULT, as without peer memory support) is staged through
 * pinned host chunks that ride the NICs too; data is checked byte for byte.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "engine/engine.h"
#include "engine/te_gpu.h"
#include "mooncake/transfer_engine_c.h"
#include "tap.h"
#include "te_wait.h"
#include "verbs_fake.h"

#define BUF (4u << 20)
#define DEVLEN (16u << 20)

static unsigned char *dev;	/* the fake device memory */
static unsigned long n_copies;

static int f_is_device(const void *p)
{
	return (const unsigned char *)p >= dev && (const unsigned char *)p < dev + DEVLEN;
}

static int f_host_alloc(void **p, size_t len)
{
	*p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	return *p ? 0 : -ENOMEM;
}

static void f_host_free(void *p)
{
	free(p);
}

static int f_stream_create(void **s)
{
	*s = malloc(1);
	return *s ? 0 : -ENOMEM;
}

static void f_stream_destroy(void *s)
{
	free(s);
}

/* Copies happen at once; the count tells whether a request was staged. */
static int f_memcpy_async(void *dst, const void *src, size_t len, enum mc_gpu_kind kind, void *s)
{
	(void)kind, (void)s;
	__atomic_add_fetch(&n_copies, 1, __ATOMIC_RELAXED);
	memmove(dst, src, len);
	return 0;
}

static int f_stream_sync(void *s)
{
	(void)s;
	return 0;
}

static const struct mc_gpu_ops fake_gpu = {
	f_is_device, f_host_alloc, f_host_free, f_stream_create, f_stream_destroy,
	f_memcpy_async, f_stream_sync,
};

static int run(transfer_engine_t e, segment_handle_t seg, int op, void *local, uint64_t remote,
	       size_t len)
{
	struct transfer_request r = { .opcode = op, .source = local, .target_id = seg,
				      .target_offset = remote, .length = len };

	return te_run_one(e, &r, 20);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + seed + (i >> 9));
}

static unsigned long long nic_bytes(void)
{
	return vf_bytes(0) + vf_bytes(1);
}

int main(void)
{
	void *args[2] = { (void *)"vf0,vf1", NULL };
	unsigned char *tb = aligned_alloc(4096, BUF), *hb = aligned_alloc(4096, BUF);
	unsigned char *g1, *g2, *tg;
	transfer_engine_t tgt, ini;
	unsigned long copies;
	unsigned long long bytes;
	char name[128], *reply = NULL;
	segment_handle_t seg;
	size_t len, n = (1u << 20) + 333;
	json_t *d, *b;
	int found = 0;

	dev = aligned_alloc(4096, DEVLEN);
	g1 = dev;			/* NICs can register it */
	g2 = dev + (8u << 20);		/* they cannot */
	tg = dev + (4u << 20);		/* the target's GPU buffer */
	vf_reset(2);
	mc_te_rdma_set_verbs(vf_ops());
	mc_gpu_set_ops(&fake_gpu);
	tgt = createTransferEngine("P2PHANDSHAKE", "t", "127.0.0.1", 0, 0);
	ini = createTransferEngine("P2PHANDSHAKE", "i", "127.0.0.1", 0, 0);
	ok(tgt && ini, "two engines with the CUDA double");
	if (!tgt || !ini)
		return tap_done();
	uninstallTransport(tgt, "shm");
	uninstallTransport(ini, "shm");
	ok(installTransport(tgt, "rdma", args) && installTransport(ini, "rdma", args),
	   "rdma on vf0, vf1 on both");
	ok(registerLocalMemory(tgt, tb, BUF, "cpu:0", 1) == 0, "target host buffer");

	/* Peer memory support: the NICs take the device pointer. */
	vf_set_device_mem(dev, 8u << 20, 1);
	ok(registerLocalMemory(ini, g1, BUF, "cuda:0", 1) == 0 && vf_device_regs() == 2,
	   "GPU buffer registered on both NICs directly");
	ok(registerLocalMemory(tgt, tg, BUF, "cuda:0", 1) == 0 && vf_device_regs() == 4,
	   "the target's GPU buffer too");
	getLocalIpAndPort(tgt, name, sizeof(name));
	ok(mc_te_hs_call("127.0.0.1", mc_te_rpc_port(tgt), MC_HS_METADATA, "{}", &reply, &len) == 0,
	   "target descriptor fetched");
	d = reply ? json_loads(reply, 0, NULL) : NULL;
	json_array_foreach(json_object_get(d, "buffers"), len, b)
		if ((uint64_t)json_integer_value(json_object_get(b, "addr")) ==
			    (uint64_t)(uintptr_t)tg &&
		    !strcmp(json_string_value(json_object_get(b, "name")), "cuda:0") &&
		    json_array_size(json_object_get(b, "rkey")) == 2)
			found = 1;
	ok(found, "the GPU buffer is published with location cuda:0 and an rkey per NIC");
	json_decref(d);
	free(reply);
	seg = openSegment(ini, name);
	ok(seg > 0, "initiator opens the target");

	fill(g1, n, 1);
	copies = n_copies;
	bytes = nic_bytes();
	ok(run(ini, seg, OPCODE_WRITE, g1, (uint64_t)(uintptr_t)tb, n) == STATUS_COMPLETED &&
		   memcmp(g1, tb, n) == 0,
	   "WRITE from registered GPU memory");
	ok(n_copies == copies && nic_bytes() - bytes == n,
	   "... straight from the device pointer over the NICs (no staging copies: %lu)",
	   n_copies - copies);
	fill(tb, n, 2);
	copies = n_copies;
	ok(run(ini, seg, OPCODE_READ, g1 + 4096, (uint64_t)(uintptr_t)tb, n) == STATUS_COMPLETED &&
		   memcmp(g1 + 4096, tb, n) == 0 && n_copies == copies,
	   "READ into registered GPU memory, unstaged");
	fill(hb, n, 3);
	ok(registerLocalMemory(ini, hb, BUF, "cpu:0", 1) == 0 &&
		   run(ini, seg, OPCODE_WRITE, hb, (uint64_t)(uintptr_t)tg, n) == STATUS_COMPLETED &&
		   memcmp(hb, tg, n) == 0,
	   "WRITE into the target's GPU memory through its rkeys");

	/* No peer memory support: reg_mr on device memory fails with EFAULT. */
	vf_set_device_mem(g2, 8u << 20, 0);
	ok(registerLocalMemory(ini, g2, BUF, "cuda:0", 1) == 0,
	   "a GPU buffer the NICs refuse is still registered (staged)");
	fill(g2, n, 4);
	copies = n_copies;
	bytes = nic_bytes();
	ok(run(ini, seg, OPCODE_WRITE, g2, (uint64_t)(uintptr_t)tb, n) == STATUS_COMPLETED &&
		   memcmp(g2, tb, n) == 0,
	   "WRITE from it completes");
	ok(n_copies > copies && nic_bytes() - bytes == n,
	   "... staged through pinned chunks (%lu copies) that go over the NICs",
	   n_copies - copies);
	fill(tb, n, 5);
	copies = n_copies;
	ok(run(ini, seg, OPCODE_READ, g2, (uint64_t)(uintptr_t)tb, n) == STATUS_COMPLETED &&
		   memcmp(g2, tb, n) == 0 && n_copies > copies,
	   "READ into it, staged");

	ok(unregisterLocalMemory(ini, g1) == 0 && unregisterLocalMemory(ini, g2) == 0 &&
		   unregisterLocalMemory(tgt, tg) == 0,
	   "GPU buffers unregister");
	is(unregisterLocalMemory(ini, g1), ERR_ADDRESS_NOT_REGISTERED, "only once");
	destroyTransferEngine(ini);
	destroyTransferEngine(tgt);
	is(vf_live(), 0, "every fake verbs object released (%d left)", vf_live());
	mc_gpu_set_ops(NULL);
	mc_te_rdma_set_verbs(NULL);
	free(dev);
	free(tb);
	free(hb);
	return tap_done();
}

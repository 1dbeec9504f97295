/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU memory through the real CUDA runtime: a WRITE from and a READ into cudaMalloc'ed memory
 * between two engines in this process, over tcp and over shm.  Needs a CUDA device: without
 * one (or without a --with-cuda build) it exits 77 saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/te_gpu.h"
#include "mooncake/transfer_engine_c.h"
#include "tap.h"
#include "te_wait.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

static int run(transfer_engine_t e, struct transfer_request *r)
{
	return te_run_one(e, r, 30) == STATUS_COMPLETED ? 0 : -1;
}

int main(void)
{
	const size_t n = (16u << 20) + 7;
	uint8_t *host, *back, *tbuf, *gpu = NULL;
	int force;
	size_t i;

	if (mc_gpu_cuda_ops() == NULL) {
		printf("# SKIP: needs a CUDA GPU (the runtime found none)\n");
		return 77;
	}
	if (cudaMalloc((void **)&gpu, n) != cudaSuccess) {
		printf("# SKIP: cudaMalloc failed\n");
		return 77;
	}
	host = malloc(n);
	back = malloc(n);
	tbuf = malloc(n);
	for (i = 0; i < n; i++)
		host[i] = (uint8_t)(i * 13 + 5);
	for (force = 1; force >= 0; force--) {
		transfer_engine_t tgt, ini;
		char name[128];
		segment_handle_t seg;
		struct transfer_request r;

		if (force)
			setenv("MC_FORCE_TCP", "1", 1);
		else
			unsetenv("MC_FORCE_TCP");
		tgt = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
		ini = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
		registerLocalMemory(tgt, tbuf, n, "cpu:0", 1);
		registerLocalMemory(ini, gpu, n, "cuda:0", 1);
		getLocalIpAndPort(tgt, name, sizeof(name));
		seg = openSegment(ini, name);
		cudaMemcpy(gpu, host, n, cudaMemcpyHostToDevice);
		r = (struct transfer_request){ OPCODE_WRITE, gpu, seg, (uint64_t)(uintptr_t)tbuf, n };
		ok(run(ini, &r) == 0 && !memcmp(tbuf, host, n), "%s: WRITE from GPU memory",
		   force ? "tcp" : "shm");
		cudaMemset(gpu, 0, n);
		r.opcode = OPCODE_READ;
		ok(run(ini, &r) == 0 && cudaMemcpy(back, gpu, n, cudaMemcpyDeviceToHost) == cudaSuccess &&
			   !memcmp(back, host, n),
		   "%s: READ into GPU memory", force ? "tcp" : "shm");
		destroyTransferEngine(ini);
		destroyTransferEngine(tgt);
	}
	cudaFree(gpu);
	free(host);
	free(back);
	free(tbuf);
	return tap_done();
}
#else
int main(void)
{
	printf("# SKIP: built without CUDA (configure --with-cuda) and needs a CUDA GPU\n");
	return 77;
}
#endif

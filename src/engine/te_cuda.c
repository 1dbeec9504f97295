/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA runtime behind struct mc_gpu_ops (te_gpu.h).  The only file that calls libcudart.
 *
 * Built --with-cuda: the ops exist when cudaGetDeviceCount finds a device (asked once, on first
 * use; a machine with the toolkit but no GPU or no driver gets NULL and the engine never calls
 * CUDA again).  Without CUDA the ops are always NULL.  Any thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "common/log.h"
#include "engine/te_gpu.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

static int mc_cuda_is_device(const void *ptr)
{
	struct cudaPointerAttributes a;

	if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
		cudaGetLastError();	/* plain host memory on old runtimes: clear it */
		return 0;
	}
	return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int mc_cuda_host_alloc(void **p, size_t len)
{
	return cudaHostAlloc(p, len, cudaHostAllocDefault) == cudaSuccess ? 0 : -ENOMEM;
}

static void mc_cuda_host_free(void *p)
{
	cudaFreeHost(p);
}

static int mc_cuda_stream_create(void **s)
{
	cudaStream_t st;

	if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
		return -EIO;
	*s = st;
	return 0;
}

static void mc_cuda_stream_destroy(void *s)
{
	cudaStreamDestroy((cudaStream_t)s);
}

static int mc_cuda_memcpy_async(void *dst, const void *src, size_t len, enum mc_gpu_kind kind,
				void *s)
{
	enum cudaMemcpyKind k = kind == MC_GPU_H2D   ? cudaMemcpyHostToDevice
				: kind == MC_GPU_D2H ? cudaMemcpyDeviceToHost
						     : cudaMemcpyDefault;

	return cudaMemcpyAsync(dst, src, len, k, (cudaStream_t)s) == cudaSuccess ? 0 : -EIO;
}

static int mc_cuda_stream_sync(void *s)
{
	return cudaStreamSynchronize((cudaStream_t)s) == cudaSuccess ? 0 : -EIO;
}

static const struct mc_gpu_ops mc_cuda_ops = {
	.is_device = mc_cuda_is_device,
	.host_alloc = mc_cuda_host_alloc,
	.host_free = mc_cuda_host_free,
	.stream_create = mc_cuda_stream_create,
	.stream_destroy = mc_cuda_stream_destroy,
	.memcpy_async = mc_cuda_memcpy_async,
	.stream_sync = mc_cuda_stream_sync,
};

static pthread_once_t mc_cuda_once = PTHREAD_ONCE_INIT;
static int mc_cuda_devices;

static void mc_cuda_probe(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n <= 0) {
		mc_log_info("transfer engine: no CUDA device (%s): GPU memory support off",
			    e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		n = 0;
	}
	mc_cuda_devices = n;
}

const struct mc_gpu_ops *mc_gpu_cuda_ops(void)
{
	pthread_once(&mc_cuda_once, mc_cuda_probe);
	return mc_cuda_devices > 0 ? &mc_cuda_ops : NULL;
}
#else
const struct mc_gpu_ops *mc_gpu_cuda_ops(void)
{
	return NULL;
}
#endif

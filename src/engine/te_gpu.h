/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TE_GPU_H
#define MC_TE_GPU_H

/*
 * GPU memory in the transfer engine.
 *
 * Every CUDA runtime call goes through struct mc_gpu_ops (te_cuda.c implements it over
 * libcudart when built --with-cuda; unit tests install a double with mc_gpu_set_ops).  Local
 * GPU memory in a request is staged through pinned host chunks: the chunk copies (async on a
 * stream per chunk) overlap with the transport moving the previous chunks, MC_TE_GPU_CHUNKS
 * (default 3, 2..8) chunks of MC_TE_GPU_CHUNK_SIZE (default 4 MiB) in flight.  Without a GPU
 * at run time mc_gpu_get() is NULL and nothing of this runs.
 */
#include <stddef.h>
#include <stdint.h>

enum mc_gpu_kind {
	MC_GPU_H2D = 1,
	MC_GPU_D2H = 2,
	MC_GPU_DEFAULT = 4,	/* let the runtime tell (cudaMemcpyDefault) */
};

struct mc_gpu_ops {
	/* 1 if ptr is device (or managed) memory, 0 if not. */
	int (*is_device)(const void *ptr);
	/* Pinned host memory.  0 or -ENOMEM. */
	int (*host_alloc)(void **p, size_t len);
	void (*host_free)(void *p);
	int (*stream_create)(void **stream);
	void (*stream_destroy)(void *stream);
	/* Queue a copy on stream.  0 or -EIO. */
	int (*memcpy_async)(void *dst, const void *src, size_t len, enum mc_gpu_kind kind,
			    void *stream);
	/* Wait for everything queued on stream.  0 or -EIO (a failed copy). */
	int (*stream_sync)(void *stream);
};

/* The ops in use: a test double, else the CUDA runtime when a device is present, else NULL. */
const struct mc_gpu_ops *mc_gpu_get(void);
/* Install ops (NULL: back to the runtime).  Tests only; before any engine runs. */
void mc_gpu_set_ops(const struct mc_gpu_ops *ops);
/* The CUDA runtime's ops if built --with-cuda and a device exists, else NULL (te_cuda.c). */
const struct mc_gpu_ops *mc_gpu_cuda_ops(void);

/* How staged chunks move between host memory and the peer (the request's transport).  start
 * begins moving n bytes at offset off of the request between host and the peer and returns
 * 0 or a negative status; wait(slot) blocks until that transfer ended and returns its status.
 * A slot is started at most once before it is waited for. */
struct mc_gpu_io {
	void *arg;
	int (*start)(void *arg, unsigned slot, void *host, uint64_t n, uint64_t off);
	int (*wait)(void *arg, unsigned slot);
};

#define MC_GPU_MAX_CHUNKS 8

/* Pinned chunks and streams, reused across requests by one thread at a time. */
struct mc_gpu_stager {
	const struct mc_gpu_ops *ops;
	unsigned k;			/* chunks */
	uint64_t chunk;			/* bytes each */
	void *host[MC_GPU_MAX_CHUNKS];
	void *stream[MC_GPU_MAX_CHUNKS];
};

/* k chunks of chunk bytes (0: from the environment / defaults).  0 or -ENOMEM/-EIO. */
int mc_gpu_stager_init(struct mc_gpu_stager *s, const struct mc_gpu_ops *ops, unsigned k,
		       uint64_t chunk);
void mc_gpu_stager_fini(struct mc_gpu_stager *s);
/* Move len bytes between GPU memory gpu and the peer: to_gpu = 1 reads from the peer into gpu,
 * 0 sends gpu to the peer.  crc (may be NULL) gets the CRC-64 of the bytes moved, computed on
 * the pinned chunks while they pass through host memory (chunks are moved in order).  Returns
 * only when nothing is in flight any more: 0 or the first error (crc is then meaningless). */
int mc_gpu_stage(struct mc_gpu_stager *s, int to_gpu, void *gpu, uint64_t len,
		 const struct mc_gpu_io *io, uint64_t *crc);

#endif

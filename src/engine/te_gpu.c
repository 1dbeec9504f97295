/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Staging GPU memory through pinned host chunks (te_gpu.h).
 *
 * Sending (GPU -> peer): device-to-host copies of the first k chunks are queued at once, one
 * stream per chunk slot.  For chunk i: wait for its copy, start the transport on it, then wait
 * for the transport of chunk i - 1 and queue the device-to-host copy of chunk i - 1 + k into
 * the slot it frees.  So up to k chunk copies and two transports are in flight and a slot is
 * never overwritten while the transport still reads it.
 *
 * Receiving (peer -> GPU): the transport starts on the first k chunks.  For chunk i: wait for
 * its transport, queue its host-to-device copy, then wait for the copy of chunk i - 1 and
 * start the transport of chunk i - 1 + k into that slot.
 *
 * On an error nothing new starts, but everything already started is waited for before
 * mc_gpu_stage returns, so neither the caller's memory nor a pinned chunk is touched after.
 * Any thread; one stager is used by one thread at a time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc64.h"
#include "engine/te_gpu.h"

static pthread_mutex_t mc_gpu_mu = PTHREAD_MUTEX_INITIALIZER;
static const struct mc_gpu_ops *mc_gpu_override;

void mc_gpu_set_ops(const struct mc_gpu_ops *ops)
{
	pthread_mutex_lock(&mc_gpu_mu);
	mc_gpu_override = ops;
	pthread_mutex_unlock(&mc_gpu_mu);
}

const struct mc_gpu_ops *mc_gpu_get(void)
{
	const struct mc_gpu_ops *ops;

	pthread_mutex_lock(&mc_gpu_mu);
	ops = mc_gpu_override;
	pthread_mutex_unlock(&mc_gpu_mu);
	return ops ? ops : mc_gpu_cuda_ops();
}

static uint64_t mc_gpu_env(const char *name, uint64_t def, uint64_t lo, uint64_t hi)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (v == NULL || *v == '\0')
		return def;
	x = strtoull(v, &end, 0);
	if (*end || x < lo || x > hi)
		return def;
	return x;
}

int mc_gpu_stager_init(struct mc_gpu_stager *s, const struct mc_gpu_ops *ops, unsigned k,
		       uint64_t chunk)
{
	unsigned i;

	memset(s, 0, sizeof(*s));
	s->ops = ops;
	s->k = k ? k : (unsigned)mc_gpu_env("MC_TE_GPU_CHUNKS", 3, 2, MC_GPU_MAX_CHUNKS);
	if (s->k > MC_GPU_MAX_CHUNKS)
		s->k = MC_GPU_MAX_CHUNKS;
	s->chunk = chunk ? chunk : mc_gpu_env("MC_TE_GPU_CHUNK_SIZE", 4u << 20, 4096, 1u << 30);
	for (i = 0; i < s->k; i++)
		if (ops->host_alloc(&s->host[i], (size_t)s->chunk) ||
		    ops->stream_create(&s->stream[i])) {
			mc_gpu_stager_fini(s);
			return -ENOMEM;
		}
	return 0;
}

void mc_gpu_stager_fini(struct mc_gpu_stager *s)
{
	unsigned i;

	for (i = 0; s->ops && i < MC_GPU_MAX_CHUNKS; i++) {
		if (s->stream[i])
			s->ops->stream_destroy(s->stream[i]);
		if (s->host[i])
			s->ops->host_free(s->host[i]);
		s->stream[i] = s->host[i] = NULL;
	}
}

static uint64_t mc_gpu_len(const struct mc_gpu_stager *s, uint64_t len, uint64_t i)
{
	uint64_t off = i * s->chunk;

	return len - off < s->chunk ? len - off : s->chunk;
}

/* Wait for every chunk still in flight (transport and copy engine), whatever happened before:
 * the pinned chunks must be idle before they are reused.  Returns rc, or the first error seen
 * while draining if rc was 0. */
static int mc_gpu_drain(struct mc_gpu_stager *s, const struct mc_gpu_io *io, const int *started,
			const int *copying, int rc)
{
	unsigned slot;
	int r;

	for (slot = 0; slot < s->k; slot++) {
		if (started[slot]) {
			r = io->wait(io->arg, slot);
			if (rc == 0)
				rc = r;
		}
		if (copying[slot]) {
			r = s->ops->stream_sync(s->stream[slot]);
			if (rc == 0)
				rc = r;
		}
	}
	return rc;
}

static int mc_gpu_send(struct mc_gpu_stager *s, const uint8_t *gpu, uint64_t len,
		       const struct mc_gpu_io *io, uint64_t *crc)
{
	const struct mc_gpu_ops *o = s->ops;
	uint64_t n = (len + s->chunk - 1) / s->chunk, i, queued = 0;
	int started[MC_GPU_MAX_CHUNKS] = { 0 }, copying[MC_GPU_MAX_CHUNKS] = { 0 };
	int rc = 0, r;
	unsigned slot;

	for (i = 0; i < n && i < s->k && rc == 0; i++, queued++) {
		rc = o->memcpy_async(s->host[i], gpu + i * s->chunk, (size_t)mc_gpu_len(s, len, i),
				     MC_GPU_D2H, s->stream[i]);
		copying[i] = rc == 0;
	}
	for (i = 0; i < n && rc == 0; i++) {
		slot = (unsigned)(i % s->k);
		rc = o->stream_sync(s->stream[slot]);
		copying[slot] = 0;
		if (rc == 0)
			rc = io->start(io->arg, slot, s->host[slot], mc_gpu_len(s, len, i),
				       i * s->chunk);
		started[slot] = rc == 0;
		/* The chunk's bytes are in host memory now; the transport only reads them. */
		if (rc == 0 && crc)
			*crc = mc_crc64(*crc, s->host[slot], (size_t)mc_gpu_len(s, len, i));
		if (i >= 1) {
			unsigned ps = (unsigned)((i - 1) % s->k);

			r = io->wait(io->arg, ps);
			started[ps] = 0;
			if (rc == 0)
				rc = r;
			if (rc == 0 && i - 1 + s->k < n) {
				rc = o->memcpy_async(s->host[ps], gpu + (i - 1 + s->k) * s->chunk,
						     (size_t)mc_gpu_len(s, len, i - 1 + s->k),
						     MC_GPU_D2H, s->stream[ps]);
				copying[ps] = rc == 0;
			}
		}
	}
	/* Drain: the last transport, and anything left after an error. */
	(void)queued;
	return mc_gpu_drain(s, io, started, copying, rc);
}

static int mc_gpu_recv(struct mc_gpu_stager *s, uint8_t *gpu, uint64_t len,
		       const struct mc_gpu_io *io, uint64_t *crc)
{
	const struct mc_gpu_ops *o = s->ops;
	uint64_t n = (len + s->chunk - 1) / s->chunk, i;
	int started[MC_GPU_MAX_CHUNKS] = { 0 }, copying[MC_GPU_MAX_CHUNKS] = { 0 };
	int rc = 0;
	unsigned slot;

	for (i = 0; i < n && i < s->k && rc == 0; i++) {
		rc = io->start(io->arg, (unsigned)i, s->host[i], mc_gpu_len(s, len, i),
			       i * s->chunk);
		started[i] = rc == 0;
	}
	for (i = 0; i < n && rc == 0; i++) {
		slot = (unsigned)(i % s->k);
		rc = io->wait(io->arg, slot);
		started[slot] = 0;
		if (rc == 0)
			rc = o->memcpy_async(gpu + i * s->chunk, s->host[slot],
					     (size_t)mc_gpu_len(s, len, i), MC_GPU_H2D,
					     s->stream[slot]);
		copying[slot] = rc == 0;
		/* While the copy engine reads the chunk, so does the CRC. */
		if (rc == 0 && crc)
			*crc = mc_crc64(*crc, s->host[slot], (size_t)mc_gpu_len(s, len, i));
		if (rc == 0 && i >= 1 && i - 1 + s->k < n) {
			unsigned ps = (unsigned)((i - 1) % s->k);

			rc = o->stream_sync(s->stream[ps]);
			copying[ps] = 0;
			if (rc == 0)
				rc = io->start(io->arg, ps, s->host[ps],
					       mc_gpu_len(s, len, i - 1 + s->k),
					       (i - 1 + s->k) * s->chunk);
			started[ps] = rc == 0;
		}
	}
	return mc_gpu_drain(s, io, started, copying, rc);
}

int mc_gpu_stage(struct mc_gpu_stager *s, int to_gpu, void *gpu, uint64_t len,
		 const struct mc_gpu_io *io, uint64_t *crc)
{
	if (crc)
		*crc = 0;
	if (len == 0)
		return 0;
	return to_gpu ? mc_gpu_recv(s, gpu, len, io, crc) : mc_gpu_send(s, gpu, len, io, crc);
}

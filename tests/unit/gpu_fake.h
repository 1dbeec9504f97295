/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_TESTS_GPU_FAKE_H
#define MC_TESTS_GPU_FAKE_H

/*
 * A CUDA runtime double for tests (struct mc_gpu_ops): "device memory" is the host region
 * [dev, dev + DEVLEN) the test allocates; async copies are only queued and run at stream_sync,
 * so a stager that uses a chunk before its copy ended sees wrong bytes; copies in the wrong
 * direction or between the wrong kinds of memory fail the stream.  Counters let tests check
 * what was allocated, queued and copied; fail_copy_at makes the Nth copy fail.
 * The including file defines DEVLEN first.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/te_gpu.h"

static uint8_t *dev;			/* the fake device memory */
static int n_alloc, n_free, n_d2h, n_h2d, queued, max_queued, fail_copy_at, n_copies;

struct fake_op {
	void *dst;
	const void *src;
	size_t len;
};

struct fake_stream {
	struct fake_op ops[16];
	int n;
	int failed;
};

static int f_is_device(const void *p)
{
	return (const uint8_t *)p >= dev && (const uint8_t *)p < dev + DEVLEN;
}

static int f_host_alloc(void **p, size_t len)
{
	*p = malloc(len);
	n_alloc += *p != NULL;
	return *p ? 0 : -ENOMEM;
}

static void f_host_free(void *p)
{
	n_free++;
	free(p);
}

static int f_stream_create(void **s)
{
	*s = calloc(1, sizeof(struct fake_stream));
	return *s ? 0 : -ENOMEM;
}

static void f_stream_destroy(void *s)
{
	free(s);
}

static int f_memcpy_async(void *dst, const void *src, size_t len, enum mc_gpu_kind kind, void *s)
{
	struct fake_stream *st = s;

	if (++n_copies == fail_copy_at)
		return -EIO;
	if ((kind == MC_GPU_D2H && (!f_is_device(src) || f_is_device(dst))) ||
	    (kind == MC_GPU_H2D && (f_is_device(src) || !f_is_device(dst))) || st->n == 16)
		st->failed = 1;
	else
		st->ops[st->n++] = (struct fake_op){ dst, src, len };
	n_d2h += kind == MC_GPU_D2H;
	n_h2d += kind == MC_GPU_H2D;
	if (++queued > max_queued)
		max_queued = queued;
	return 0;
}

static int f_stream_sync(void *s)
{
	struct fake_stream *st = s;
	int i, failed = st->failed;

	for (i = 0; i < st->n; i++)
		memmove(st->ops[i].dst, st->ops[i].src, st->ops[i].len);
	queued -= st->n;
	st->n = 0;
	st->failed = 0;
	return failed ? -EIO : 0;
}

static const struct mc_gpu_ops fake = {
	f_is_device, f_host_alloc, f_host_free, f_stream_create, f_stream_destroy,
	f_memcpy_async, f_stream_sync,
};

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests whose local memory is on a GPU: staged through pinned host chunks (te_gpu.c) on the
 * engine's GPU worker pool, each chunk moved by the segment's own transport as a sub-request.
 *
 * submitTransfer marks a request gpu when its source is device memory (asked once per
 * request through mc_gpu_ops).  The loop thread hands it to the GPU pool; a worker takes a
 * stager (pinned chunks + streams) from the engine's cache and runs mc_gpu_stage with
 * start/wait callbacks that dispatch one sub-request per chunk on the loop thread and wait for
 * its completion.  So the same code serves tcp, shm, file and any transport that plugs in.
 * The pool is freed before the transports at shutdown: its sub-requests still complete.
 * A request whose CRC-64 is wanted (want_crc) gets it from the pinned chunks on the way, for
 * reads into and writes from GPU memory alike: the CPU never reads device memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/te_gpu.h"
#include "engine/te_pool.h"

#define MC_TE_GPU_MAX_STAGERS 8

struct mc_te_gpu_slot {
	struct mc_waiter w;
	int active;
};

struct mc_te_gpu_job {
	struct mc_te_req *r;
	struct mc_te_gpu_slot slot[MC_GPU_MAX_CHUNKS];
};

struct mc_te_gpu_stager_node {
	struct mc_te_gpu_stager_node *next;
	struct mc_gpu_stager s;
	void *rdma;		/* the rdma transport its chunks are registered on, or NULL */
};

/* Staged chunks to an rdma peer must be on the NICs: register the stager's pinned chunks
 * (local access only) with the rdma transport installed now.  A chunk that cannot be
 * registered makes its sub-requests fall back to tcp (-EXDEV), which is still correct. */
static void mc_te_gpu_rdma_reg(struct mc_engine *e, struct mc_te_gpu_stager_node *n)
{
	void *rdma;
	int slot = mc_te_nic_slot(e, &rdma);
	unsigned i;

	if (slot < 0 || rdma == n->rdma)
		return;
	for (i = 0; i < n->s.k; i++)
		if (mc_te_known[slot]->register_local(rdma, n->s.host[i], n->s.chunk, "*", 0))
			mc_log_warn("transfer engine %s: pinned staging chunk not registered on "
				    "the RDMA NICs: its chunks go over tcp",
				    e->server_name);
	n->rdma = rdma;
}

static void mc_te_gpu_rdma_unreg(struct mc_engine *e, struct mc_te_gpu_stager_node *n)
{
	void *rdma;
	int slot = mc_te_nic_slot(e, &rdma);
	unsigned i;

	/* Only from the instance they were put on; a freed one dropped them itself. */
	for (i = 0; slot >= 0 && rdma == n->rdma && i < n->s.k; i++)
		mc_te_known[slot]->unregister_local(rdma, n->s.host[i]);
	n->rdma = NULL;
}

static void mc_te_gpu_sub_done(struct mc_te_req *sub, int status)
{
	struct mc_te_gpu_slot *slot = sub->done_arg;

	mc_waiter_signal(&slot->w, status);
}

static void mc_te_gpu_dispatch_on_loop(void *arg)
{
	struct mc_te_req *sub = arg;

	mc_te_req_dispatch(sub->e, sub);
}

static int mc_te_gpu_start(void *arg, unsigned i, void *host, uint64_t n, uint64_t off)
{
	struct mc_te_gpu_job *j = arg;
	struct mc_te_req *sub = malloc(sizeof(*sub));

	if (sub == NULL)
		return -ENOMEM;
	*sub = *j->r;
	sub->local = host;
	sub->remote = j->r->remote + off;
	sub->len = n;
	sub->gpu = 0;
	sub->want_crc = 0;	/* the job checksums the chunks itself */
	sub->on_done = mc_te_gpu_sub_done;
	sub->done_arg = &j->slot[i];
	mc_waiter_init(&j->slot[i].w);
	j->slot[i].active = 1;
	if (mc_loop_thread_call(j->r->e->lt, mc_te_gpu_dispatch_on_loop, sub)) {
		free(sub);
		mc_waiter_fini(&j->slot[i].w);
		j->slot[i].active = 0;
		return -ESHUTDOWN;
	}
	return 0;
}

static int mc_te_gpu_wait(void *arg, unsigned i)
{
	struct mc_te_gpu_job *j = arg;
	int rc;

	if (!j->slot[i].active)
		return -EINVAL;
	rc = mc_waiter_wait(&j->slot[i].w);
	mc_waiter_fini(&j->slot[i].w);
	j->slot[i].active = 0;
	return rc;
}

static struct mc_te_gpu_stager_node *mc_te_gpu_take(struct mc_engine *e)
{
	struct mc_te_gpu_stager_node *n;

	pthread_mutex_lock(&e->mu);
	n = e->gpu_stagers;
	if (n)
		e->gpu_stagers = n->next;
	pthread_mutex_unlock(&e->mu);
	if (n)
		return n;
	n = calloc(1, sizeof(*n));
	if (n && mc_gpu_stager_init(&n->s, e->gpu, 0, 0)) {
		free(n);
		n = NULL;
	}
	return n;
}

static int mc_te_gpu_job(struct mc_te_req *r)
{
	struct mc_engine *e = r->e;
	struct mc_te_gpu_job j;
	struct mc_gpu_io io = { &j, mc_te_gpu_start, mc_te_gpu_wait };
	struct mc_te_gpu_stager_node *n = mc_te_gpu_take(e);
	int rc;

	if (n == NULL) {
		mc_log_warn("transfer engine %s: no pinned staging memory for a GPU request",
			    e->server_name);
		return -ENOMEM;
	}
	if (r->xport == MC_TE_XPORT_RDMA)
		mc_te_gpu_rdma_reg(e, n);
	memset(&j, 0, sizeof(j));
	j.r = r;
	rc = mc_gpu_stage(&n->s, r->opcode == MC_XFER_READ, r->local, r->len, &io,
			  r->want_crc ? &r->crc : NULL);
	r->has_crc = rc == 0 && r->want_crc;
	pthread_mutex_lock(&e->mu);
	n->next = e->gpu_stagers;
	e->gpu_stagers = n;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int mc_te_gpu_submit(struct mc_engine *e, struct mc_te_req *r)
{
	return e->gpu_pool ? mc_te_pool_submit(e->gpu_pool, r, mc_te_gpu_job) : -ENODEV;
}

int mc_te_gpu_init(struct mc_engine *e)
{
	e->gpu = mc_gpu_get();
	if (e->gpu == NULL)
		return 0;
	e->gpu_pool = mc_te_pool_new(e, 2);
	return e->gpu_pool ? 0 : -ENOMEM;
}

void mc_te_gpu_fini(struct mc_engine *e)
{
	mc_te_pool_free(e->gpu_pool);	/* waits for running jobs and their sub-requests */
	e->gpu_pool = NULL;
	while (e->gpu_stagers) {
		struct mc_te_gpu_stager_node *n = e->gpu_stagers;

		e->gpu_stagers = n->next;
		mc_te_gpu_rdma_unreg(e, n);
		mc_gpu_stager_fini(&n->s);
		free(n);
	}
}

int mc_te_gpu_local_copy(struct mc_engine *e, void *dst, const void *src, uint64_t len)
{
	void *stream = NULL;
	int rc;

	if (e->gpu->stream_create(&stream))
		return -EIO;
	rc = e->gpu->memcpy_async(dst, src, (size_t)len, MC_GPU_DEFAULT, stream);
	if (rc == 0)
		rc = e->gpu->stream_sync(stream);
	e->gpu->stream_destroy(stream);
	return rc;
}

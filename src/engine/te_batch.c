/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batches and transfers: the C API's allocateBatchID / submitTransfer / getTransferStatus /
 * freeBatchID, and mc_te_transfer_wait, the store's synchronous form of the same.
 *
 * submitTransfer checks every request against the target's published buffers on the calling
 * thread, then hands the valid ones to the loop, which passes each to the transport serving its
 * segment (transport.h) or, for GPU memory, to the staging pool (te_staging.c).  Completions
 * update per-task status under the engine mutex, which getTransferStatus reads.
 * mc_te_transfer_wait copies requests on our own memory on the calling thread, carries small
 * same-host batches there too (the shm transport's run_now) and small tcp batches (the tcp
 * transport's run_batch_now, over the thread's own connections), and sleeps until the rest
 * completed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc64.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/te_gpu.h"
#include "mooncake/transfer_engine_c.h"

#define MC_E(x) ((struct mc_engine *)(x))

batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch *b;

	if (e == NULL || batch_size == 0 || batch_size > (1u << 20))
		return INVALID_BATCH;
	b = calloc(1, sizeof(*b) + batch_size * sizeof(b->tasks[0]));
	if (b == NULL)
		return INVALID_BATCH;
	b->e = e;
	b->size = batch_size;
	pthread_mutex_lock(&e->mu);
	b->next = e->batches;
	e->batches = b;
	pthread_mutex_unlock(&e->mu);
	return (batch_id_t)(uintptr_t)b;
}

/* The batch behind an id, or NULL; e->mu held. */
static struct mc_te_batch *mc_te_batch_find(struct mc_engine *e, batch_id_t id)
{
	struct mc_te_batch *b;

	for (b = e->batches; b; b = b->next)
		if ((batch_id_t)(uintptr_t)b == id)
			return b;
	return NULL;
}

static void mc_te_dispatch(struct mc_engine *e, struct mc_te_req *r);

void mc_te_req_done(struct mc_te_req *r, int status)
{
	struct mc_engine *e = r->e;

	if (status == -EXDEV && r->xport != MC_TE_XPORT_TCP && r->tcp_port &&
	    mc_loop_thread_is_current(e->lt)) {
		/* Not reachable by its transport (e.g. memory the owner cannot share): tcp. */
		r->xport = MC_TE_XPORT_TCP;
		r->seg_ctx = NULL;
		mc_te_dispatch(e, r);
		return;
	}
	if (r->on_done) {
		r->on_done(r, status);
		free(r);
		return;
	}
	pthread_mutex_lock(&e->mu);
	/* A failure may mean a restarted peer: fetch its descriptor again on the next open. */
	if (status && r->seg_id > 0 && (uint32_t)r->seg_id <= e->nsegs &&
	    !strcmp(e->segs[r->seg_id - 1].name, r->seg_name))
		e->segs[r->seg_id - 1].stale = 1;
	r->b->tasks[r->task].status = status ? STATUS_FAILED : STATUS_COMPLETED;
	r->b->tasks[r->task].bytes = status ? 0 : r->len;
	r->b->tasks[r->task].has_crc = status == 0 && r->has_crc;
	r->b->tasks[r->task].crc = r->crc;
	if (r->b->doneq)
		r->b->doneq[r->b->ndone++] = (uint32_t)r->task;
	if (--r->b->pending == 0 || r->b->doneq)
		pthread_cond_broadcast(r->b->cv ? r->b->cv : &e->batch_cv);
	pthread_mutex_unlock(&e->mu);
	free(r);
}

struct mc_te_submit {
	struct mc_engine *e;
	struct mc_te_req **r;
	size_t n;
};

/* Hand one request to its transport on the loop thread; -EXDEV falls back to tcp. */
static void mc_te_dispatch(struct mc_engine *e, struct mc_te_req *r)
{
	const struct mc_te_transport_ops *ops;
	void *state;
	int rc;

	if (r->gpu) {
		rc = mc_te_gpu_submit(e, r);
		if (rc)
			mc_te_req_done(r, rc);
		return;
	}
	pthread_mutex_lock(&e->mu);
	state = e->xports[r->xport].state;
	ops = e->xports[r->xport].ops;
	pthread_mutex_unlock(&e->mu);
	rc = state ? ops->submit(state, r) : -ESHUTDOWN;
	if (rc)
		mc_te_req_done(r, rc);	/* -EXDEV: on to tcp */
}

void mc_te_req_dispatch(struct mc_engine *e, struct mc_te_req *r)
{
	mc_te_dispatch(e, r);
}

static void mc_te_submit_on_loop(void *arg)
{
	struct mc_te_submit *s = arg;
	size_t i;

	for (i = 0; i < s->n; i++)
		mc_te_dispatch(s->e, s->r[i]);
	free(s->r);
	free(s);
}

/* A request for task of b on transport xport, from the caller's r (NULL when out of memory). */
static struct mc_te_req *mc_te_req_new(struct mc_engine *e, struct mc_te_batch *b, size_t task,
				       int xport, const struct transfer_request *r)
{
	struct mc_te_req *x = calloc(1, sizeof(*x));

	if (x == NULL)
		return NULL;
	x->b = b;
	x->task = task;
	x->e = e;
	x->xport = xport;
	x->seg_id = r->target_id;
	x->opcode = r->opcode == OPCODE_READ ? MC_XFER_READ : MC_XFER_WRITE;
	x->local = r->source;
	x->remote = r->target_offset;
	x->len = r->length;
	x->nic_hint = b && b->nic_hint[0] ? b->nic_hint : NULL;
	return x;
}

int mc_te_batch_nic_hint(void *engine, uint64_t batch_id, const char *nic)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch *b;
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL || (nic && strlen(nic) >= sizeof(b->nic_hint)))
		return rc;
	pthread_mutex_lock(&e->mu);
	b = mc_te_batch_find(e, (batch_id_t)batch_id);
	if (b) {
		snprintf(b->nic_hint, sizeof(b->nic_hint), "%s", nic ? nic : "");
		rc = 0;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* A read of objects a data server keeps in files (its file window), from host:port over tcp:
 * only that server can resolve those addresses, and it checks the range itself. */
static int mc_te_prepare_file_read(struct mc_engine *e, struct mc_te_batch *b, size_t task,
				   const struct transfer_request *r, const char *host,
				   uint16_t port, struct mc_te_req **out)
{
	struct mc_te_req *x;

	if (r->opcode != OPCODE_READ || port == 0 || host == NULL || *host == '\0' ||
	    strlen(host) >= sizeof(x->host) || !mc_memreg_in_files(r->target_offset, r->length))
		return STATUS_FAILED;
	x = mc_te_req_new(e, b, task, MC_TE_XPORT_TCP, r);
	if (x == NULL)
		return STATUS_FAILED;
	snprintf(x->host, sizeof(x->host), "%s", host);
	x->tcp_port = port;
	*out = x;
	return STATUS_PENDING;
}

/* Check one request against its segment and build it; e->mu held.  Returns the task status
 * to record now (STATUS_PENDING when *out is to be dispatched). */
static int mc_te_prepare(struct mc_engine *e, struct mc_te_batch *b, size_t task,
			 const struct transfer_request *r, struct mc_te_req **out)
{
	struct mc_te_segment *seg = NULL;
	struct mc_te_req *x;
	uint32_t k;
	int ok = 0, xport;

	*out = NULL;
	if ((r->opcode != OPCODE_READ && r->opcode != OPCODE_WRITE) ||
	    (r->source == NULL && r->length) || r->target_offset + r->length < r->length)
		return STATUS_INVALID;
	if (r->length == 0)
		return STATUS_COMPLETED;
	if (r->target_id == LOCAL_SEGMENT && mc_memreg_in_files(r->target_offset, r->length)) {
		/* Our own objects kept in files (the store's SSD area): our data server reads
		 * them on its file workers, as it does for peers. */
		uint16_t port = e->xports[MC_TE_XPORT_TCP].state
					? mc_te_tcp_port(e->xports[MC_TE_XPORT_TCP].state)
					: 0;

		return mc_te_prepare_file_read(e, b, task, r, e->ip, port, out);
	}
	if (r->target_id == LOCAL_SEGMENT) {
		/* Our own memory: copy directly, within registered memory only. */
		if (!mc_memreg_check(e->reg, r->target_offset, r->length))
			return STATUS_FAILED;
		if (e->gpu && (e->gpu->is_device(r->source) ||
			       e->gpu->is_device((void *)(uintptr_t)r->target_offset))) {
			void *t = (void *)(uintptr_t)r->target_offset;

			if (r->opcode == OPCODE_WRITE ? mc_te_gpu_local_copy(e, t, r->source, r->length)
						      : mc_te_gpu_local_copy(e, r->source, t, r->length))
				return STATUS_FAILED;
		} else if (r->opcode == OPCODE_WRITE)
			memmove((void *)(uintptr_t)r->target_offset, r->source, r->length);
		else
			memmove(r->source, (void *)(uintptr_t)r->target_offset, r->length);
		b->tasks[task].bytes = r->length;
		return STATUS_COMPLETED;
	}
	if (r->target_id > 0 && (uint32_t)r->target_id <= e->nsegs && e->segs[r->target_id - 1].open)
		seg = &e->segs[r->target_id - 1];
	if (seg == NULL || seg->xport < 0)
		return STATUS_FAILED;
	xport = seg->xport;
	if (mc_memreg_in_files(r->target_offset, r->length)) {
		/* A peer's objects kept in files: only its tcp data server reads those, and it
		 * checks the range itself. */
		if (r->opcode != OPCODE_READ || seg->desc.tcp_data_port == 0 || seg->host[0] == '\0')
			return STATUS_FAILED;
		xport = MC_TE_XPORT_TCP;
		ok = 1;
	} else if (seg->xport == MC_TE_XPORT_FILE) {
		/* Files laid end to end from offset 0. */
		uint64_t total = 0;

		for (k = 0; k < seg->desc.nbuffers; k++)
			total += seg->desc.buffers[k].length;
		ok = r->target_offset + r->length <= total;
	} else {
		for (k = 0; k < seg->desc.nbuffers; k++)
			if (r->target_offset >= seg->desc.buffers[k].addr &&
			    r->target_offset + r->length <=
				    seg->desc.buffers[k].addr + seg->desc.buffers[k].length)
				ok = 1;
	}
	if (!ok)
		return STATUS_FAILED;	/* the peer would refuse it too */
	x = mc_te_req_new(e, b, task, xport, r);
	if (x == NULL)
		return STATUS_FAILED;
	/* Copied as they are (the segment's fields are as long as the request's and always
	 * terminated): a printf for each was a tenth of the engine's time per small write. */
	memcpy(x->seg_name, seg->name, strnlen(seg->name, sizeof(x->seg_name) - 1) + 1);
	x->seg_name[sizeof(x->seg_name) - 1] = '\0';
	memcpy(x->host, seg->host, strnlen(seg->host, sizeof(x->host) - 1) + 1);
	x->host[sizeof(x->host) - 1] = '\0';
	x->tcp_port = seg->desc.tcp_data_port;
	x->seg_ctx = xport == seg->xport ? seg->xport_ctx : NULL;
	/* GPU memory is staged, unless rdma carries this request and the GPU buffer is
	 * registered on the NICs. */
	x->gpu = e->gpu && e->gpu->is_device(r->source) &&
		 !(e->xports[xport].state && e->xports[xport].ops->covers &&
		   e->xports[xport].ops->covers(e->xports[xport].state, r->source, r->length));
	*out = x;
	return STATUS_PENDING;
}

int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
		   size_t count)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_submit *s;
	struct mc_te_batch *b;
	size_t i, first;

	if (e == NULL || (entries == NULL && count))
		return ERR_INVALID_ARGUMENT;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return ERR_MEMORY;
	s->r = calloc(count ? count : 1, sizeof(*s->r));
	if (s->r == NULL) {
		free(s);
		return ERR_MEMORY;
	}
	s->e = e;
	pthread_mutex_lock(&e->mu);
	b = mc_te_batch_find(e, batch_id);
	if (b == NULL || b->count + count > b->size) {
		pthread_mutex_unlock(&e->mu);
		free(s->r);
		free(s);
		return b == NULL ? ERR_INVALID_ARGUMENT : ERR_TOO_MANY_REQUESTS;
	}
	first = b->count;
	for (i = 0; i < count; i++) {
		struct mc_te_req *x;

		b->tasks[first + i].bytes = 0;
		b->tasks[first + i].status = mc_te_prepare(e, b, first + i, &entries[i], &x);
		if (x) {
			b->pending++;
			s->r[s->n++] = x;
		}
	}
	b->count += count;
	pthread_mutex_unlock(&e->mu);
	if (s->n && mc_loop_thread_call(e->lt, mc_te_submit_on_loop, s) == 0)
		return 0;
	for (i = 0; i < s->n; i++)
		mc_te_req_done(s->r[i], -ESHUTDOWN);
	free(s->r);
	free(s);
	return 0;
}
/* Batches whose same-host copies add up to no more than this are copied on the calling thread:
 * cheaper than two hand-offs and a worker wake-up per request. */
#define MC_TE_INLINE_BYTES (256u << 10)

/* Carry the batch's shm requests on this thread (e->mu not held); the rest stay in s. */
static void mc_te_run_inline(struct mc_engine *e, struct mc_te_submit *s)
{
	const struct mc_te_transport_ops *ops;
	void *state;
	size_t i, kept = 0;

	pthread_mutex_lock(&e->mu);
	state = e->xports[MC_TE_XPORT_SHM].state;
	ops = e->xports[MC_TE_XPORT_SHM].ops;
	pthread_mutex_unlock(&e->mu);
	for (i = 0; i < s->n; i++) {
		struct mc_te_req *r = s->r[i];
		int rc;

		if (r->xport != MC_TE_XPORT_SHM || r->gpu || state == NULL || ops->run_now == NULL) {
			s->r[kept++] = r;
			continue;
		}
		rc = ops->run_now(state, r);
		if (rc == -EXDEV && r->tcp_port) {
			/* Memory the owner cannot share: its tcp data server. */
			r->xport = MC_TE_XPORT_TCP;
			r->seg_ctx = NULL;
			s->r[kept++] = r;
			continue;
		}
		mc_te_req_done(r, rc);
	}
	s->n = kept;
}

/* The batch's tcp requests, when they add up to no more than MC_TE_INLINE_BYTES of host memory,
 * carried on this thread (e->mu not held); those the transport leaves stay in s. */
static void mc_te_run_direct(struct mc_engine *e, struct mc_te_submit *s)
{
	const struct mc_te_transport_ops *ops;
	struct mc_te_req **tcp;
	size_t *at;
	void *state;
	uint64_t bytes = 0;
	size_t i, n = 0, kept = 0;

	pthread_mutex_lock(&e->mu);
	state = e->xports[MC_TE_XPORT_TCP].state;
	ops = e->xports[MC_TE_XPORT_TCP].ops;
	pthread_mutex_unlock(&e->mu);
	/* Never on the loop: it serves our own data server, which the batch may reach. */
	if (state == NULL || ops->run_batch_now == NULL || mc_loop_thread_is_current(e->lt))
		return;
	for (i = 0; i < s->n; i++) {
		if (s->r[i]->xport != MC_TE_XPORT_TCP)
			continue;
		if (s->r[i]->gpu)
			return;
		bytes += s->r[i]->len;
		n++;
	}
	if (n == 0 || bytes > MC_TE_INLINE_BYTES)
		return;
	tcp = malloc(n * sizeof(*tcp));
	at = malloc(n * sizeof(*at));
	if (tcp == NULL || at == NULL) {
		free(tcp);
		free(at);
		return;
	}
	for (i = 0, n = 0; i < s->n; i++)
		if (s->r[i]->xport == MC_TE_XPORT_TCP) {
			at[n] = i;
			tcp[n++] = s->r[i];
		}
	ops->run_batch_now(state, tcp, n);
	for (i = 0; i < n; i++)
		if (tcp[i] == NULL)
			s->r[at[i]] = NULL;	/* completed (and freed) */
	for (i = 0; i < s->n; i++)
		if (s->r[i])
			s->r[kept++] = s->r[i];
	s->n = kept;
	free(tcp);
	free(at);
}

struct mc_te_inflight {
	struct mc_engine *e;
	struct mc_te_batch *b;
	pthread_cond_t cv;
	size_t seen;		/* doneq entries handed to on_done */
};

/* A task finished before it was handed to a transport (e->mu held). */
static void mc_te_done_early(struct mc_te_batch *b, size_t i)
{
	if (b->doneq)
		b->doneq[b->ndone++] = (uint32_t)i;
}

/* Which wanted CRCs the engine delivers (see mc_te_transfer_start): a same-host WRITE copied
 * on a worker is left to the caller (fused into the copy only when this thread copies it), so
 * is a WRITE from host memory over tcp (the caller checksums its bytes on its own core while
 * the loop thread sends them: measured cheaper than checksumming on the loop thread ahead of
 * the socket), and so is whatever no transport computes; want_crc[i] is cleared for those. */
static void mc_te_crc_plan(struct mc_te_batch *b, struct mc_te_submit *s, uint8_t *want_crc,
			   size_t n, int shm_inline)
{
	size_t i;

	if (want_crc == NULL)
		return;
	for (i = 0; i < s->n; i++) {
		struct mc_te_req *r = s->r[i];

		if (r->want_crc && r->opcode == MC_XFER_WRITE && !r->gpu &&
		    ((r->xport == MC_TE_XPORT_SHM && !shm_inline) || r->xport == MC_TE_XPORT_TCP))
			r->want_crc = 0;
	}
	for (i = 0; i < n; i++)
		if (want_crc[i] && !b->tasks[i].has_crc && b->tasks[i].status != STATUS_PENDING)
			want_crc[i] = 0;	/* done or failed already, without one */
	for (i = 0; i < s->n; i++)
		want_crc[s->r[i]->task] = (uint8_t)s->r[i]->want_crc;
}

/* Every request in flight whose CRC is wanted gets it from its transport as the bytes land (a
 * tcp READ into host memory: each piece is checksummed as it is received), so a caller that
 * asked to be told of each completion, to checksum it while it is in cache, has nothing to do
 * before the last.  Only the requests still in s count: those completed at start carry their
 * CRC already. */
static int mc_te_crcs_on_the_way(const struct mc_te_submit *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		const struct mc_te_req *r = s->r[i];

		if (r->want_crc && (r->xport != MC_TE_XPORT_TCP || r->opcode != MC_XFER_READ ||
				    r->gpu))
			return 0;
	}
	return 1;
}

/* A request between GPU memory and our own segment, completed by mc_te_prepare: its CRC-64
 * from the segment's side, host memory the CPU may read (nothing when the segment is device
 * memory too). */
static void mc_te_local_gpu_crc(struct mc_engine *e, struct mc_te_task *t,
				const struct transfer_request *q)
{
	const void *host = (const void *)(uintptr_t)q->target_offset;

	if (q->target_id != LOCAL_SEGMENT || q->length == 0 || e->gpu == NULL ||
	    !e->gpu->is_device(q->source) || e->gpu->is_device(host) ||
	    !mc_memreg_check(e->reg, q->target_offset, q->length))
		return;
	t->crc = mc_crc64(0, host, q->length);
	t->has_crc = 1;
}

struct mc_te_inflight *mc_te_transfer_start(struct mc_engine *e, const struct transfer_request *x,
					    const struct mc_te_endpoint *ep, size_t n, int notify,
					    uint8_t *want_crc)
{
	struct mc_te_inflight *t;
	struct mc_te_submit *s = NULL;
	struct mc_te_batch *b;
	uint64_t inline_bytes = 0;
	size_t i;

	t = calloc(1, sizeof(*t));
	b = calloc(1, sizeof(*b) + (n ? n : 1) * sizeof(b->tasks[0]));
	s = calloc(1, sizeof(*s));
	if (t && b && s) {
		s->r = calloc(n ? n : 1, sizeof(*s->r));
		if (notify)
			b->doneq = calloc(n ? n : 1, sizeof(*b->doneq));
	}
	if (t == NULL || b == NULL || s == NULL || s->r == NULL || (notify && b->doneq == NULL)) {
		if (s)
			free(s->r);
		if (b)
			free(b->doneq);
		free(s);
		free(b);
		free(t);
		return NULL;
	}
	/* A private batch: not on e->batches, so no API call can find or free it. */
	pthread_cond_init(&t->cv, NULL);
	t->e = e;
	t->b = b;
	b->e = e;
	b->size = b->count = n;
	b->cv = &t->cv;
	s->e = e;
	for (i = 0; i < n; i++) {
		/* Our own memory: copied here, outside the engine's lock. */
		const struct transfer_request *q = &x[i];
		void *to = (void *)(uintptr_t)q->target_offset;

		if (q->target_id != LOCAL_SEGMENT || q->source == NULL || q->length == 0 ||
		    (e->gpu && (e->gpu->is_device(q->source) || e->gpu->is_device(to))) ||
		    !mc_memreg_check(e->reg, q->target_offset, q->length))
			continue;
		if (want_crc && want_crc[i] &&
		    ((uint8_t *)q->source + q->length <= (uint8_t *)to ||
		     (uint8_t *)to + q->length <= (uint8_t *)q->source)) {
			b->tasks[i].crc = q->opcode == OPCODE_WRITE
						  ? mc_crc64_copy(0, to, q->source, q->length)
						  : mc_crc64_copy(0, q->source, to, q->length);
			b->tasks[i].has_crc = 1;
		} else if (q->opcode == OPCODE_WRITE) {
			memmove(to, q->source, q->length);
		} else {
			memmove(q->source, to, q->length);
		}
		b->tasks[i].status = STATUS_COMPLETED;
		b->tasks[i].bytes = q->length;
	}
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < n; i++) {
		struct mc_te_req *r = NULL;

		if (b->tasks[i].status != STATUS_COMPLETED) {
			if (x[i].target_id == MC_TE_SEG_ENDPOINT)
				b->tasks[i].status =
					ep ? mc_te_prepare_file_read(e, b, i, &x[i], ep[i].host,
								     ep[i].port, &r)
					   : STATUS_FAILED;
			else
				b->tasks[i].status = mc_te_prepare(e, b, i, &x[i], &r);
		}
		if (b->tasks[i].status == STATUS_COMPLETED && want_crc && want_crc[i] &&
		    !b->tasks[i].has_crc)
			mc_te_local_gpu_crc(e, &b->tasks[i], &x[i]);
		if (b->tasks[i].status != STATUS_PENDING) {
			mc_te_done_early(b, i);
			continue;
		}
		if (want_crc && want_crc[i] && e->gpu && e->gpu->is_device(r->local))
			r->gpu = 1;	/* its CRC is taken on the staging chunks */
		r->want_crc = want_crc && want_crc[i] &&
			      (r->opcode == MC_XFER_READ || r->gpu || r->xport == MC_TE_XPORT_TCP ||
			       r->xport == MC_TE_XPORT_SHM);
		if (ep && ep[i].nic_hint && *ep[i].nic_hint)
			r->nic_hint = ep[i].nic_hint;
		b->pending++;
		s->r[s->n++] = r;
		inline_bytes += r->xport == MC_TE_XPORT_SHM ? r->len : 0;
	}
	pthread_mutex_unlock(&e->mu);
	mc_te_crc_plan(b, s, want_crc, n, inline_bytes && inline_bytes <= MC_TE_INLINE_BYTES);
	if (b->doneq && mc_te_crcs_on_the_way(s)) {
		/* Nothing is left for the waiting thread to checksum while the bytes are in
		 * cache: it wakes once, for the whole batch. */
		free(b->doneq);
		b->doneq = NULL;
	}
	if (inline_bytes && inline_bytes <= MC_TE_INLINE_BYTES)
		mc_te_run_inline(e, s);
	mc_te_run_direct(e, s);
	if (s->n == 0 || mc_loop_thread_call(e->lt, mc_te_submit_on_loop, s) != 0) {
		for (i = 0; i < s->n; i++)
			mc_te_req_done(s->r[i], -ESHUTDOWN);
		free(s->r);
		free(s);
	}
	return t;
}

int mc_te_transfer_finish(struct mc_te_inflight *t, int *status, mc_te_done_fn on_done,
			  void *arg)
{
	struct mc_engine *e = t->e;
	struct mc_te_batch *b = t->b;
	size_t i, failed = 0;

	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (b->doneq && t->seen < b->ndone) {
			size_t k = b->doneq[t->seen++];
			int st = b->tasks[k].status == STATUS_COMPLETED ? 0 : -EIO;
			uint64_t crc = b->tasks[k].crc;
			int has_crc = b->tasks[k].has_crc;

			if (on_done) {
				pthread_mutex_unlock(&e->mu);
				on_done(arg, k, st, has_crc ? &crc : NULL);
				pthread_mutex_lock(&e->mu);
			}
		}
		if (b->pending == 0 && (b->doneq == NULL || t->seen == b->ndone))
			break;
		pthread_cond_wait(&t->cv, &e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	for (i = 0; i < b->count; i++) {
		status[i] = b->tasks[i].status == STATUS_COMPLETED ? 0 : -EIO;
		failed += status[i] != 0;
		/* Without notify: every request's outcome (and CRC) now, in order, after a single
		 * wake-up for the whole batch. */
		if (on_done && b->doneq == NULL)
			on_done(arg, i, status[i], b->tasks[i].has_crc ? &b->tasks[i].crc : NULL);
	}
	pthread_cond_destroy(&t->cv);
	free(b->doneq);
	free(b);
	free(t);
	return (int)failed;
}

int mc_te_transfer_wait(struct mc_engine *e, const struct transfer_request *x,
			const struct mc_te_endpoint *ep, size_t n, int *status)
{
	struct mc_te_inflight *t;
	size_t i;

	if (n == 0)
		return 0;
	t = mc_te_transfer_start(e, x, ep, n, 0, NULL);
	if (t == NULL) {
		for (i = 0; i < n; i++)
			status[i] = -ENOMEM;
		return (int)n;
	}
	return mc_te_transfer_finish(t, status, NULL, NULL);
}

int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
		      struct transfer_status *status)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch *b;
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL || status == NULL)
		return rc;
	pthread_mutex_lock(&e->mu);
	b = mc_te_batch_find(e, batch_id);
	if (b && task_id < b->count) {
		status->status = b->tasks[task_id].status;
		status->transferred_bytes = b->tasks[task_id].bytes;
		rc = 0;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int mc_te_batch_wait(transfer_engine_t engine, batch_id_t batch_id)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch *b;
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL)
		return rc;
	pthread_mutex_lock(&e->mu);
	while ((b = mc_te_batch_find(e, batch_id)) != NULL && b->pending)
		pthread_cond_wait(&e->batch_cv, &e->mu);
	if (b)
		rc = 0;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int freeBatchID(transfer_engine_t engine, batch_id_t batch_id)
{
	struct mc_engine *e = MC_E(engine);
	struct mc_te_batch **pp, *b;
	int rc = ERR_INVALID_ARGUMENT;

	if (e == NULL)
		return rc;
	pthread_mutex_lock(&e->mu);
	for (pp = &e->batches; (b = *pp) != NULL; pp = &b->next)
		if ((batch_id_t)(uintptr_t)b == batch_id) {
			if (b->pending) {
				rc = ERR_BATCH_BUSY;
				break;
			}
			*pp = b->next;
			free(b);
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

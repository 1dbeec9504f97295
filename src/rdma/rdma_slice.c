/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests and slices: a request is cut into MC_SLICE_SIZE slices (a tail shorter than
 * slice/MC_FRAGMENT_RATIO joins the slice before it); each slice picks its own path, a local
 * NIC by the local buffer's location in our priority matrix and a peer NIC by the remote
 * buffer's location in the peer's, at random among the preferred ones (or round-robin with
 * MC_PATH_ROUNDROBIN), so a large request is striped over the NICs.  A slice whose work request
 * fails is retried on a path it has not failed on yet, up to MC_RETRY_CNT times; the request
 * completes when every slice has, and fails if any slice ran out of retries.  Loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mooncake/transfer_engine_c.h"
#include "common/log.h"
#include "rdma/rdma_int.h"

#define MC_RDMA_MAX_SLICES (1u << 22)

static int64_t mc_rdma_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
#define MC_RDMA_MAX_TASKS (1u << 20)

static void mc_task_free(struct mc_rdma_task *t)
{
	t->r->ntasks--;
	t->done(t->arg, t->status);
	mc_rdma_peer_unref(t->peer);
	free(t);
}

/* Callers of mc_rdma_submit never see done run inside it: such a task waits on the loop. */
static void mc_task_finish(struct mc_rdma_task *t)
{
	if (t->in_submit) {
		TAILQ_INSERT_TAIL(&t->r->deferred, t, dlink);
		event_active(t->r->dev, EV_TIMEOUT, 0);
		return;
	}
	mc_task_free(t);
}

void mc_rdma_run_deferred(struct mc_rdma *r)
{
	struct mc_rdma_task *t;

	while ((t = TAILQ_FIRST(&r->deferred)) != NULL) {
		TAILQ_REMOVE(&r->deferred, t, dlink);
		mc_task_free(t);
	}
}

static void mc_slice_fail(struct mc_rdma_slice *s, const char *why)
{
	struct mc_rdma_task *t = s->task;

	s->status = -1;
	t->r->st.slices_failed++;
	if (t->status == 0) {
		t->status = ERR_ENDPOINT;
		if (!t->r->freeing)
			mc_log_warn("rdma: slice of %llu bytes to %s failed after %d attempts: %s",
				    (unsigned long long)s->len, t->peer->name, s->attempts, why);
	}
	if (--t->nleft == 0)
		mc_task_finish(t);
}

void mc_rdma_slice_done(struct mc_rdma_slice *s)
{
	struct mc_rdma_task *t = s->task;

	s->status = 1;
	if (--t->nleft == 0)
		mc_task_finish(t);
}

#define MC_PATH(l, p) ((unsigned)(l) * MC_RDMA_MAX_NICS + (unsigned)(p))

static int mc_path_bad(const uint64_t *bad, unsigned path)
{
	return (bad[path / 64] >> (path % 64)) & 1;
}

/* Choose a (local NIC, peer NIC) path for s.  Tiers, first non-empty wins: both ends
 * preferred and the path not failed by this slice or its request (with
 * MC_ENABLE_DEST_DEVICE_AFFINITY first only peer NICs named like the local one); any ends, not
 * failed; not failed by this slice; anything.  Within a tier, random or round-robin.  Returns
 * the path or -1 when there is none. */
static int mc_slice_pick(struct mc_rdma *r, struct mc_rdma_slice *s)
{
	struct mc_rdma_task *t = s->task;
	uint32_t lall = t->lpref | t->lother, rall = t->rpref | t->rother;
	unsigned cand[MC_RDMA_MAX_NICS * MC_RDMA_MAX_NICS];
	unsigned n, tier, l, p;

	/* Tier 0 is the affinity tier; without affinity it starts at 1. */
	for (tier = r->cfg.dest_affinity ? 0 : 1; tier < 5; tier++) {
		n = 0;
		for (l = 0; l < r->nctx; l++)
			for (p = 0; p < t->peer->nnics; p++) {
				unsigned path = MC_PATH(l, p);
				uint32_t lm = tier <= 1 ? t->lpref : lall;
				uint32_t rm = tier <= 1 ? t->rpref : rall;

				if (!((lm >> l) & 1) || !((rm >> p) & 1))
					continue;
				if (tier == 0 && strcmp(r->ctx[l].name, t->peer->nic[p]))
					continue;
				if (tier < 4 && mc_path_bad(s->bad, path))
					continue;
				if (tier < 3 && mc_path_bad(t->bad, path))
					continue;
				cand[n++] = path;
			}
		if (n)
			return (int)cand[r->cfg.path_rr ? r->rr++ % n
						       : (unsigned)rand_r(&r->seed) % n];
	}
	return -1;
}

void mc_rdma_slice_schedule(struct mc_rdma *r, struct mc_rdma_slice *s)
{
	struct mc_rdma_task *t = s->task;
	struct mc_rdma_ep *ep;
	char name[320];
	int path, l, p;

	if (r->freeing) {
		mc_slice_fail(s, "shutting down");
		return;
	}
	if (s->attempts > r->cfg.retry_cnt) {
		mc_slice_fail(s, "out of retries");
		return;
	}
	path = mc_slice_pick(r, s);
	if (path < 0) {
		mc_slice_fail(s, "no path");
		return;
	}
	l = path / MC_RDMA_MAX_NICS;
	p = path % MC_RDMA_MAX_NICS;
	s->lnic = l;
	s->rnic = p;
	snprintf(name, sizeof(name), "%s@%s", t->peer->name, t->peer->nic[p]);
	ep = mc_rdma_ep_get(&r->ctx[l], name, t->peer->host, t->peer->port);
	if (ep == NULL) {
		mc_rdma_slice_retry(s, "no endpoint");
		return;
	}
	mc_rdma_ep_enqueue(ep, s);
}

void mc_rdma_slice_retry(struct mc_rdma_slice *s, const char *why)
{
	struct mc_rdma *r = s->task->r;

	unsigned path = MC_PATH(s->lnic, s->rnic);

	s->attempts++;
	s->bad[path / 64] |= 1ull << (path % 64);
	s->task->bad[path / 64] |= 1ull << (path % 64);
	s->ep = NULL;
	s->qp = -1;
	r->st.slices_retried++;
	mc_log_debug("rdma: retrying slice (attempt %d): %s", s->attempts, why);
	mc_rdma_slice_schedule(r, s);
}

int mc_rdma_slice_post(struct mc_rdma_slice *s, struct mc_rdma_ep *ep, int qp)
{
	struct mc_rdma_task *t = s->task;
	struct ibv_sge sge = {
		.addr = (uint64_t)(uintptr_t)(t->local + s->off),
		.length = (uint32_t)s->len,
		.lkey = t->lkey[ep->ctx->index],
	};
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)(uintptr_t)s,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = t->opcode == MC_RDMA_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad = NULL;
	int rc;

	wr.wr.rdma.remote_addr = t->remote + s->off;
	wr.wr.rdma.rkey = t->rkey[s->rnic];
	s->ep = ep;
	s->qp = qp;
	rc = t->r->ops->post_send(ep->qp[qp], &wr, &bad);
	if (rc) {
		s->qp = -1;
		return rc;
	}
	t->r->st.slices_posted++;
	t->r->st.posted_per_nic[ep->ctx->index]++;
	s->posted = 1;
	s->posted_ms = mc_rdma_now_ms();
	TAILQ_INSERT_TAIL(&ep->posted, s, link);
	return 0;
}

void mc_rdma_slice_polled(struct mc_rdma_slice *s)
{
	if (s->posted && s->ep)
		TAILQ_REMOVE(&s->ep->posted, s, link);
	s->posted = 0;
}

void mc_rdma_slice_sweep(struct mc_rdma *r)
{
	int64_t now = mc_rdma_now_ms(), limit = (int64_t)r->cfg.slice_timeout * 1000;
	struct mc_rdma_ep *ep, *next;
	struct mc_rdma_slice *s;
	char why[96];
	unsigned i;

	for (i = 0; i < r->nctx && !r->freeing; i++)
		for (ep = TAILQ_FIRST(&r->ctx[i].eps); ep; ep = next) {
			next = TAILQ_NEXT(ep, link);	/* failing a passive one frees it */
			s = TAILQ_FIRST(&ep->posted);
			if (ep->state != MC_EP_CONNECTED || s == NULL ||
			    now - s->posted_ms < limit)
				continue;
			r->st.slice_timeouts++;
			snprintf(why, sizeof(why),
				 "a slice had no completion for %d s (MC_SLICE_TIMEOUT)",
				 r->cfg.slice_timeout);
			mc_rdma_ep_fail(ep, why);
		}
}

int mc_rdma_submit(struct mc_rdma *r, const struct mc_rdma_xfer *x, mc_rdma_done_fn done,
		   void *arg)
{
	const struct mc_rdma_peer_buf *pb;
	struct mc_rdma_task *t;
	char loc[64];
	uint32_t lkey[MC_RDMA_MAX_NICS];
	uint64_t n, slice = (uint64_t)r->cfg.slice_size, off, i;
	int rc;

	if (x == NULL || x->peer == NULL || x->local == NULL || x->len == 0 || done == NULL ||
	    (x->opcode != MC_RDMA_READ && x->opcode != MC_RDMA_WRITE) || r->freeing)
		return ERR_INVALID_ARGUMENT;
	rc = mc_rdma_mr_lookup(r, (uint64_t)(uintptr_t)x->local, x->len, lkey, loc, sizeof(loc));
	if (rc)
		return rc;
	pb = mc_rdma_peer_find(x->peer, x->remote, x->len);
	if (pb == NULL)
		return ERR_INVALID_ARGUMENT;
	n = (x->len + slice - 1) / slice;
	/* A small tail rides with the slice before it. */
	if (n > 1 && x->len % slice && x->len % slice < slice / (uint64_t)r->cfg.fragment_ratio)
		n--;
	if (n > MC_RDMA_MAX_SLICES)
		return ERR_INVALID_ARGUMENT;
	if (r->ntasks >= MC_RDMA_MAX_TASKS)
		return ERR_TOO_MANY_REQUESTS;
	t = calloc(1, sizeof(*t) + n * sizeof(t->slices[0]));
	if (t == NULL)
		return ERR_MEMORY;
	t->r = r;
	t->peer = mc_rdma_peer_ref(x->peer);
	t->opcode = x->opcode;
	t->local = x->local;
	t->remote = x->remote;
	memcpy(t->lkey, lkey, sizeof(lkey));
	memcpy(t->rkey, pb->rkey, sizeof(t->rkey));
	mc_rdma_topo_lookup(&r->topo, loc, r->nctx, &t->lpref, &t->lother);
	mc_rdma_topo_lookup(&x->peer->topo, pb->location, x->peer->nnics, &t->rpref, &t->rother);
	for (i = 0; x->nic_hint && *x->nic_hint && i < r->nctx; i++)
		if (!strcmp(r->ctx[i].name, x->nic_hint)) {
			/* The hinted NIC alone is preferred; the others stay as fallbacks. */
			t->lother = (t->lother | t->lpref) & ~(1u << i);
			t->lpref = 1u << i;
			break;
		}
	t->done = done;
	t->arg = arg;
	t->nslices = t->nleft = (uint32_t)n;
	r->ntasks++;
	for (i = 0, off = 0; i < n; i++, off += slice) {
		t->slices[i].task = t;
		t->slices[i].off = off;
		t->slices[i].len = i + 1 == n ? x->len - off : slice;
		t->slices[i].qp = -1;
	}
	/* The task cannot finish before its last slice is scheduled: nleft counts them all.
	 * If it finishes in here (every path refused at once) its callback is deferred. */
	t->in_submit = 1;
	for (i = 0; i < n; i++)
		mc_rdma_slice_schedule(r, &t->slices[i]);
	t->in_submit = 0;
	return 0;
}

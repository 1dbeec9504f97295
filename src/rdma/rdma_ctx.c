/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One context per NIC: device, protection domain, completion channel and CQ, port and GID
 * facts for the handshake.  The completion channel's fd is made non-blocking and watched by
 * the loop; on readiness the handler takes every pending CQ event, acknowledges them, re-arms
 * the CQ and then drains it, so no completion that arrives between drain and re-arm is lost
 * (the order rdma-core's examples use).  Loop thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "mooncake/transfer_engine_c.h"
#include "common/log.h"
#include "rdma/rdma_int.h"

static enum ibv_mtu mc_ctx_mtu(int bytes)
{
	switch (bytes) {
	case 256:
		return IBV_MTU_256;
	case 512:
		return IBV_MTU_512;
	case 1024:
		return IBV_MTU_1024;
	case 2048:
		return IBV_MTU_2048;
	default:
		return IBV_MTU_4096;
	}
}

static int mc_gid_zero(const union ibv_gid *g)
{
	static const uint8_t z[16];

	return !memcmp(g->raw, z, sizeof(z));
}

/* MC_GID_INDEX, or automatically as upstream does: an IPv4-mapped RoCE v2 GID, else the first
 * RoCE v2 or InfiniBand one; RoCE v1 entries are passed over.  A device that cannot tell GID
 * types gets its first non-zero GID. */
static int mc_ctx_pick_gid(struct mc_rdma_ctx *c, const struct ibv_port_attr *pa)
{
	const struct mc_verbs_ops *ops = c->r->ops;
	uint8_t port = (uint8_t)c->r->cfg.ib_port;
	int want = c->r->cfg.gid_index, i, other = -1, untyped = -1, type;
	union ibv_gid g, go, gu;

	if (want >= 0) {
		if (ops->query_gid(c->ctx, port, want, &g))
			return -1;
		c->gid = g;
		c->gid_index = want;
		return 0;
	}
	for (i = 0; i < pa->gid_tbl_len && i < 256; i++) {
		if (ops->query_gid(c->ctx, port, i, &g) || mc_gid_zero(&g))
			continue;
		if (ops->query_gid_type(c->ctx, port, i, &type)) {
			if (untyped < 0) {
				untyped = i;
				gu = g;
			}
			continue;
		}
		if (type == IBV_GID_TYPE_ROCE_V2 && g.raw[10] == 0xff && g.raw[11] == 0xff) {
			c->gid = g;
			c->gid_index = i;
			return 0;
		}
		if ((type == IBV_GID_TYPE_ROCE_V2 || type == IBV_GID_TYPE_IB) && other < 0) {
			other = i;
			go = g;
		}
	}
	if (other >= 0 || untyped >= 0) {
		c->gid = other >= 0 ? go : gu;
		c->gid_index = other >= 0 ? other : untyped;
		return 0;
	}
	/* InfiniBand ports address by LID; a zero GID is fine there. */
	memset(&c->gid, 0, sizeof(c->gid));
	c->gid_index = 0;
	return pa->link_layer == IBV_LINK_LAYER_INFINIBAND ? 0 : -1;
}

static void mc_ctx_on_cq(evutil_socket_t fd, short what, void *arg)
{
	struct mc_rdma_ctx *c = arg;
	struct mc_rdma *r = c->r;
	const struct mc_verbs_ops *ops = r->ops;
	struct ibv_wc wc[16];
	struct ibv_cq *cq;
	void *cqctx;
	unsigned nev = 0;
	int n, i;

	(void)fd;
	(void)what;
	while (ops->get_cq_event(c->ch, &cq, &cqctx) == 0)
		nev++;
	if (nev) {
		ops->ack_cq_events(c->cq, nev);
		r->st.cq_events += nev;
		r->st.cq_acked += nev;
	}
	if (ops->req_notify_cq(c->cq, 0))
		mc_log_err("rdma %s: ibv_req_notify_cq failed", c->name);
	while ((n = ops->poll_cq(c->cq, 16, wc)) > 0) {
		for (i = 0; i < n; i++) {
			struct mc_rdma_slice *s = (struct mc_rdma_slice *)(uintptr_t)wc[i].wr_id;
			struct mc_rdma_ep *ep = s->ep;
			int q = s->qp;

			c->inflight--;
			mc_rdma_slice_polled(s);
			/* The slice stays tied to its QP until its completion is polled. */
			s->qp = -1;
			if (wc[i].status == IBV_WC_SUCCESS) {
				mc_rdma_slice_done(s);
			} else {
				char why[96];

				snprintf(why, sizeof(why), "%s (vendor error %u)",
					 ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
				/* Reset the endpoint first so the retry does not land on a QP
				 * that is already in ERR. */
				if (ep->state == MC_EP_CONNECTED)
					mc_rdma_ep_fail(ep, why);
				mc_rdma_slice_retry(s, why);
			}
			mc_rdma_ep_on_wc(ep, q);
		}
	}
	if (n < 0)
		mc_log_err("rdma %s: ibv_poll_cq failed", c->name);
	/* Credits came back: endpoints that ran out of CQ room may post again. */
	while (!TAILQ_EMPTY(&c->blocked) && c->inflight < c->cqe) {
		struct mc_rdma_ep *ep = TAILQ_FIRST(&c->blocked);

		TAILQ_REMOVE(&c->blocked, ep, blink);
		ep->blocked = 0;
		mc_rdma_ep_kick(ep);
	}
}

int mc_rdma_ctx_open(struct mc_rdma *r, struct mc_rdma_ctx *c, struct ibv_device *dev)
{
	const struct mc_verbs_ops *ops = r->ops;
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	int flags, rc = ERR_CONTEXT;

	c->r = r;
	TAILQ_INIT(&c->eps);
	TAILQ_INIT(&c->blocked);
	c->ctx = ops->open_device(dev);
	if (c->ctx == NULL) {
		mc_log_warn("rdma %s: ibv_open_device failed: %s", c->name, strerror(errno));
		return ERR_CONTEXT;
	}
	if (ops->query_device(c->ctx, &da) ||
	    ops->query_port(c->ctx, (uint8_t)r->cfg.ib_port, &pa)) {
		mc_log_warn("rdma %s: cannot query device or port %d", c->name, r->cfg.ib_port);
		goto close_dev;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		mc_log_warn("rdma %s: port %d is not active", c->name, r->cfg.ib_port);
		goto close_dev;
	}
	c->lid = pa.lid;
	c->mtu = mc_ctx_mtu(r->cfg.mtu);
	if (c->mtu > pa.active_mtu)
		c->mtu = pa.active_mtu;
	if (mc_ctx_pick_gid(c, &pa)) {
		mc_log_warn("rdma %s: no usable GID on port %d", c->name, r->cfg.ib_port);
		goto close_dev;
	}
	c->max_mr = da.max_mr_size ? da.max_mr_size : ~0ull;
	c->cqe = r->cfg.max_cqe < da.max_cqe ? r->cfg.max_cqe : da.max_cqe;
	/* What the QPs ask for, within what the device allows. */
	c->max_wr = r->cfg.max_wr < da.max_qp_wr ? r->cfg.max_wr : da.max_qp_wr;
	c->max_sge = r->cfg.max_sge < da.max_sge ? r->cfg.max_sge : da.max_sge;
	c->rd_atom = da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16;
	c->init_rd_atom = da.max_qp_init_rd_atom < 16 ? da.max_qp_init_rd_atom : 16;
	if (c->max_wr < 1 || c->max_sge < 1) {
		mc_log_warn("rdma %s: device allows no send queue", c->name);
		goto close_dev;
	}
	c->pd = ops->alloc_pd(c->ctx);
	if (c->pd == NULL) {
		mc_log_warn("rdma %s: ibv_alloc_pd failed", c->name);
		goto close_dev;
	}
	c->ch = ops->create_comp_channel(c->ctx);
	if (c->ch == NULL) {
		mc_log_warn("rdma %s: ibv_create_comp_channel failed", c->name);
		goto dealloc_pd;
	}
	flags = fcntl(c->ch->fd, F_GETFL);
	if (flags < 0 || fcntl(c->ch->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		goto destroy_ch;
	c->cq = ops->create_cq(c->ctx, c->cqe, c, c->ch, 0);
	if (c->cq == NULL) {
		mc_log_warn("rdma %s: ibv_create_cq(%d) failed", c->name, c->cqe);
		goto destroy_ch;
	}
	if (ops->req_notify_cq(c->cq, 0))
		goto destroy_cq;
	c->ev = event_new(r->base, c->ch->fd, EV_READ | EV_PERSIST, mc_ctx_on_cq, c);
	if (c->ev == NULL || event_add(c->ev, NULL))
		goto free_ev;
	return 0;
free_ev:
	if (c->ev)
		event_free(c->ev);
	c->ev = NULL;
destroy_cq:
	ops->destroy_cq(c->cq);
	c->cq = NULL;
destroy_ch:
	ops->destroy_comp_channel(c->ch);
	c->ch = NULL;
dealloc_pd:
	ops->dealloc_pd(c->pd);
	c->pd = NULL;
close_dev:
	ops->close_device(c->ctx);
	c->ctx = NULL;
	return rc;
}

void mc_rdma_ctx_close(struct mc_rdma_ctx *c)
{
	const struct mc_verbs_ops *ops = c->r->ops;

	if (c->ctx == NULL)
		return;
	mc_rdma_ep_free_all(c);
	if (c->ev)
		event_free(c->ev);
	if (ops->destroy_cq(c->cq))
		mc_log_warn("rdma %s: ibv_destroy_cq failed", c->name);
	if (ops->destroy_comp_channel(c->ch))
		mc_log_warn("rdma %s: ibv_destroy_comp_channel failed", c->name);
	/* MRs are gone by now (mc_rdma_mr_fini runs first). */
	if (ops->dealloc_pd(c->pd))
		mc_log_warn("rdma %s: ibv_dealloc_pd failed", c->name);
	ops->close_device(c->ctx);
	c->ctx = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * struct mc_verbs_ops over the real libibverbs.  Several verbs (ibv_poll_cq, ibv_post_send,
 * ibv_req_notify_cq, ibv_query_port, ibv_reg_mr) are static inline functions or macros in
 * <infiniband/verbs.h>, so each entry is a small function of ours that calls the verb.
 * Stateless; callable from any thread as far as libibverbs allows.
 */
#include "rdma/verbs.h"

static struct ibv_device **mc_ibv_get_device_list(int *num)
{
	return ibv_get_device_list(num);
}

static void mc_ibv_free_device_list(struct ibv_device **list)
{
	ibv_free_device_list(list);
}

static const char *mc_ibv_get_device_name(struct ibv_device *dev)
{
	return ibv_get_device_name(dev);
}

static struct ibv_context *mc_ibv_open_device(struct ibv_device *dev)
{
	return ibv_open_device(dev);
}

static int mc_ibv_close_device(struct ibv_context *ctx)
{
	return ibv_close_device(ctx);
}

static int mc_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return ibv_query_device(ctx, attr);
}

static int mc_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

static int mc_ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	return ibv_query_gid(ctx, port, index, gid);
}

static int mc_ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, int index, int *type)
{
	struct ibv_gid_entry e;
	int rc = ibv_query_gid_ex(ctx, port, (uint32_t)index, &e, 0);

	if (rc == 0)
		*type = (int)e.gid_type;
	return rc;
}

static struct ibv_pd *mc_ibv_alloc_pd(struct ibv_context *ctx)
{
	return ibv_alloc_pd(ctx);
}

static int mc_ibv_dealloc_pd(struct ibv_pd *pd)
{
	return ibv_dealloc_pd(pd);
}

static struct ibv_mr *mc_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

static int mc_ibv_dereg_mr(struct ibv_mr *mr)
{
	return ibv_dereg_mr(mr);
}

static struct ibv_comp_channel *mc_ibv_create_comp_channel(struct ibv_context *ctx)
{
	return ibv_create_comp_channel(ctx);
}

static int mc_ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	return ibv_destroy_comp_channel(ch);
}

static struct ibv_cq *mc_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *ch, int comp_vector)
{
	return ibv_create_cq(ctx, cqe, cq_context, ch, comp_vector);
}

static int mc_ibv_destroy_cq(struct ibv_cq *cq)
{
	return ibv_destroy_cq(cq);
}

static int mc_ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

static int mc_ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	return ibv_get_cq_event(ch, cq, cq_context);
}

static void mc_ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	ibv_ack_cq_events(cq, n);
}

static int mc_ibv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

static struct ibv_qp *mc_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	return ibv_create_qp(pd, attr);
}

static int mc_ibv_destroy_qp(struct ibv_qp *qp)
{
	return ibv_destroy_qp(qp);
}

static int mc_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	return ibv_modify_qp(qp, attr, mask);
}

static int mc_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

static const struct mc_verbs_ops mc_ibv_ops = {
	.get_device_list = mc_ibv_get_device_list,
	.free_device_list = mc_ibv_free_device_list,
	.get_device_name = mc_ibv_get_device_name,
	.open_device = mc_ibv_open_device,
	.close_device = mc_ibv_close_device,
	.query_device = mc_ibv_query_device,
	.query_port = mc_ibv_query_port,
	.query_gid = mc_ibv_query_gid,
	.query_gid_type = mc_ibv_query_gid_type,
	.alloc_pd = mc_ibv_alloc_pd,
	.dealloc_pd = mc_ibv_dealloc_pd,
	.reg_mr = mc_ibv_reg_mr,
	.dereg_mr = mc_ibv_dereg_mr,
	.create_comp_channel = mc_ibv_create_comp_channel,
	.destroy_comp_channel = mc_ibv_destroy_comp_channel,
	.create_cq = mc_ibv_create_cq,
	.destroy_cq = mc_ibv_destroy_cq,
	.req_notify_cq = mc_ibv_req_notify_cq,
	.get_cq_event = mc_ibv_get_cq_event,
	.ack_cq_events = mc_ibv_ack_cq_events,
	.poll_cq = mc_ibv_poll_cq,
	.create_qp = mc_ibv_create_qp,
	.destroy_qp = mc_ibv_destroy_qp,
	.modify_qp = mc_ibv_modify_qp,
	.post_send = mc_ibv_post_send,
};

const struct mc_verbs_ops *mc_verbs_ibv(void)
{
	return &mc_ibv_ops;
}

/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_RDMA_VERBS_H
#define MC_RDMA_VERBS_H

/*
 * The narrow verbs interface of the rdma transport: exactly the libibverbs calls it makes, as a
 * table of function pointers, so that a test double can stand in for a NIC.  The types are
 * libibverbs' own (struct ibv_qp etc.); a double allocates them itself.  Semantics follow the
 * ibv_* man pages: pointer-returning calls give NULL with errno set, int-returning calls give 0
 * or an errno value (ibv_post_send, ibv_modify_qp ...) or -1 with errno set (ibv_get_cq_event).
 */
#include <stdint.h>

#include <infiniband/verbs.h>

struct mc_verbs_ops {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	/* The entry's enum ibv_gid_type (ibv_query_gid_ex). */
	int (*query_gid_type)(struct ibv_context *ctx, uint8_t port, int index, int *type);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *ch, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int n);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
};

/* The implementation over the real libibverbs (verbs_ibv.c).  Static storage. */
const struct mc_verbs_ops *mc_verbs_ibv(void);

#endif

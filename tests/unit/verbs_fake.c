/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fake NICs behind vf_ops() (verbs_fake.h).  Work requests execute at post time, under the
 * global mutex: the peer QP is found by the destination QP number the initiator moved to RTR
 * with, both QPs must be connected to each other, the local SGEs must lie in MRs of the QP's
 * PD (LOCAL_WRITE for READ), the remote range in an MR of the peer QP's PD with the rkey and
 * REMOTE_READ/REMOTE_WRITE access.  The completion goes to the send CQ; an armed CQ then puts
 * one event on its channel (one byte in a pipe plus the CQ in a FIFO), which is what wakes a
 * libevent loop.  An error completion moves the QP to ERR; later posts on an ERR QP complete
 * with WR_FLUSH_ERR, as on real hardware.  Destroying a QP removes its completions from the CQ
 * (as libmlx5 does).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verbs_fake.h"

#define VF_MAX_NICS 8

struct vf_dev {
	struct ibv_device dev;
	int up;
	uint16_t lid;
	unsigned long long bytes;
};

struct vf_ctx {
	struct ibv_context c;
	struct vf_dev *d;
};

struct vf_mr {
	struct ibv_mr mr;
	int access;
	struct vf_mr *next;
};

struct vf_cq;

struct vf_ch {
	struct ibv_comp_channel ch;
	int wfd;
	struct vf_cq *fifo, **fifo_tail;
};

struct vf_cq {
	struct ibv_cq cq;
	struct vf_ch *ch;
	struct ibv_wc *ring;
	int cap, head, n;
	int armed;
	unsigned long events, acked;
	struct vf_cq *fnext, *next;
};

struct vf_qp {
	struct ibv_qp qp;
	struct vf_qp *next;
	struct vf_dev *d;
	uint32_t max_wr, max_sge;
	uint32_t out;
	uint32_t dest;
	uint16_t dlid;
	int access;
	int held;		/* a work request lost by the "network": no completion until ERR */
	uint64_t held_id;
	enum ibv_wc_opcode held_op;
};

static struct {
	pthread_mutex_t mu;
	struct vf_dev devs[VF_MAX_NICS];
	int ndevs;
	struct vf_mr *mrs;
	struct vf_qp *qps;
	struct vf_cq *cqs;
	uint32_t next_key, next_qpn;
	int fail_in;
	enum ibv_wc_status fail_st;
	int live;
	unsigned long events, overruns, destroy_busy, errors;
	long last_sgid;
	/* "GPU memory": reg_mr on it succeeds only with peer memory support (dev_reg_ok) */
	uintptr_t dev_lo, dev_hi;
	int dev_reg_ok;
	unsigned long dev_regs;
	uint64_t max_mr;		/* 0: unlimited */
	int hold_in;
} vf = { .mu = PTHREAD_MUTEX_INITIALIZER };

void vf_hold_nth(int n)
{
	pthread_mutex_lock(&vf.mu);
	vf.hold_in = n;
	pthread_mutex_unlock(&vf.mu);
}

void vf_set_max_mr_size(uint64_t n)
{
	pthread_mutex_lock(&vf.mu);
	vf.max_mr = n;
	pthread_mutex_unlock(&vf.mu);
}

void vf_set_device_mem(void *addr, size_t len, int reg_ok)
{
	pthread_mutex_lock(&vf.mu);
	vf.dev_lo = (uintptr_t)addr;
	vf.dev_hi = (uintptr_t)addr + len;
	vf.dev_reg_ok = reg_ok;
	pthread_mutex_unlock(&vf.mu);
}

unsigned long vf_device_regs(void)
{
	unsigned long n;

	pthread_mutex_lock(&vf.mu);
	n = vf.dev_regs;
	pthread_mutex_unlock(&vf.mu);
	return n;
}

void vf_reset(int n)
{
	int i;

	pthread_mutex_lock(&vf.mu);
	memset(vf.devs, 0, sizeof(vf.devs));
	vf.ndevs = n > VF_MAX_NICS ? VF_MAX_NICS : n;
	for (i = 0; i < vf.ndevs; i++) {
		snprintf(vf.devs[i].dev.name, sizeof(vf.devs[i].dev.name), "vf%d", i);
		vf.devs[i].up = 1;
		vf.devs[i].lid = (uint16_t)(0x10 + i);
	}
	vf.next_key = 0x1000;
	vf.next_qpn = 0x100;
	vf.fail_in = 0;
	vf.events = vf.overruns = vf.destroy_busy = vf.errors = 0;
	vf.dev_lo = vf.dev_hi = 0;
	vf.dev_regs = 0;
	vf.max_mr = 0;
	vf.hold_in = 0;
	pthread_mutex_unlock(&vf.mu);
}

void vf_fail_nth(int n, enum ibv_wc_status st)
{
	pthread_mutex_lock(&vf.mu);
	vf.fail_in = n;
	vf.fail_st = st;
	pthread_mutex_unlock(&vf.mu);
}

void vf_set_port(int nic, int up)
{
	pthread_mutex_lock(&vf.mu);
	if (nic >= 0 && nic < vf.ndevs)
		vf.devs[nic].up = up;
	pthread_mutex_unlock(&vf.mu);
}

unsigned long long vf_bytes(int nic)
{
	unsigned long long b = 0;

	pthread_mutex_lock(&vf.mu);
	if (nic >= 0 && nic < vf.ndevs)
		b = vf.devs[nic].bytes;
	pthread_mutex_unlock(&vf.mu);
	return b;
}

unsigned long vf_unacked(void)
{
	unsigned long n = 0;
	struct vf_cq *c;

	pthread_mutex_lock(&vf.mu);
	for (c = vf.cqs; c; c = c->next)
		n += c->events - c->acked;
	pthread_mutex_unlock(&vf.mu);
	return n;
}

#define VF_GETTER(name, field)                 \
	unsigned long name(void)               \
	{                                      \
		unsigned long v;               \
		pthread_mutex_lock(&vf.mu);    \
		v = vf.field;                  \
		pthread_mutex_unlock(&vf.mu);  \
		return v;                      \
	}
VF_GETTER(vf_events, events)
VF_GETTER(vf_cq_overruns, overruns)
VF_GETTER(vf_destroy_busy, destroy_busy)
VF_GETTER(vf_errors, errors)

long vf_last_sgid(void)
{
	long v;

	pthread_mutex_lock(&vf.mu);
	v = vf.last_sgid;
	pthread_mutex_unlock(&vf.mu);
	return v;
}

int vf_live(void)
{
	int n;

	pthread_mutex_lock(&vf.mu);
	n = vf.live;
	pthread_mutex_unlock(&vf.mu);
	return n;
}

int vf_qps_in(enum ibv_qp_state st)
{
	struct vf_qp *q;
	int n = 0;

	pthread_mutex_lock(&vf.mu);
	for (q = vf.qps; q; q = q->next)
		n += q->qp.state == st;
	pthread_mutex_unlock(&vf.mu);
	return n;
}

/* --- devices ---------------------------------------------------------------------------- */

static struct ibv_device **vf_get_device_list(int *num)
{
	struct ibv_device **l;
	int i;

	pthread_mutex_lock(&vf.mu);
	l = calloc((size_t)vf.ndevs + 1, sizeof(*l));
	for (i = 0; l && i < vf.ndevs; i++)
		l[i] = &vf.devs[i].dev;
	if (num)
		*num = l ? vf.ndevs : 0;
	pthread_mutex_unlock(&vf.mu);
	if (l == NULL)
		errno = ENOMEM;
	return l;
}

static void vf_free_device_list(struct ibv_device **list)
{
	free(list);
}

static const char *vf_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

static struct ibv_context *vf_open_device(struct ibv_device *dev)
{
	struct vf_ctx *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->c.device = dev;
	c->d = (struct vf_dev *)dev;
	c->c.num_comp_vectors = 1;
	pthread_mutex_lock(&vf.mu);
	vf.live++;
	pthread_mutex_unlock(&vf.mu);
	return &c->c;
}

static int vf_close_device(struct ibv_context *ctx)
{
	pthread_mutex_lock(&vf.mu);
	vf.live--;
	pthread_mutex_unlock(&vf.mu);
	free(ctx);
	return 0;
}

static int vf_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	(void)ctx;
	memset(a, 0, sizeof(*a));
	a->max_qp = 1 << 16;
	a->max_qp_wr = 1 << 15;
	a->max_sge = 30;
	a->max_cq = 1 << 16;
	a->max_cqe = 1 << 22;
	pthread_mutex_lock(&vf.mu);
	a->max_mr_size = vf.max_mr ? vf.max_mr : ~0ull;
	pthread_mutex_unlock(&vf.mu);
	a->phys_port_cnt = 1;
	return 0;
}

static int vf_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a)
{
	struct vf_dev *d = ((struct vf_ctx *)ctx)->d;

	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	pthread_mutex_lock(&vf.mu);
	a->state = d->up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	pthread_mutex_unlock(&vf.mu);
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = 3;
	a->lid = d->lid;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

/* GID 0: link-local fe80::<lid> (RoCE v1); GIDs 1 and 2: ::ffff:10.0.0.<lid> as RoCE v1 and
 * RoCE v2, the layout of a RoCE port with an IPv4 address. */
static int vf_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *g)
{
	struct vf_dev *d = ((struct vf_ctx *)ctx)->d;

	if (port != 1 || index < 0 || index > 2)
		return EINVAL;
	memset(g, 0, sizeof(*g));
	if (index == 0) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
	} else {
		g->raw[10] = g->raw[11] = 0xff;
		g->raw[12] = 10;
	}
	g->raw[15] = (uint8_t)d->lid;
	return 0;
}

static int vf_query_gid_type(struct ibv_context *ctx, uint8_t port, int index, int *type)
{
	(void)ctx;
	if (port != 1 || index < 0 || index > 2)
		return EINVAL;
	*type = index == 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	return 0;
}

static struct ibv_pd *vf_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (pd == NULL)
		return NULL;
	pd->context = ctx;
	pthread_mutex_lock(&vf.mu);
	vf.live++;
	pthread_mutex_unlock(&vf.mu);
	return pd;
}

static int vf_dealloc_pd(struct ibv_pd *pd)
{
	struct vf_mr *m;
	struct vf_qp *q;

	pthread_mutex_lock(&vf.mu);
	for (m = vf.mrs; m; m = m->next)
		if (m->mr.pd == pd)
			goto busy;
	for (q = vf.qps; q; q = q->next)
		if (q->qp.pd == pd)
			goto busy;
	vf.live--;
	pthread_mutex_unlock(&vf.mu);
	free(pd);
	return 0;
busy:
	pthread_mutex_unlock(&vf.mu);
	return EBUSY;
}

/* --- memory ------------------------------------------------------------------------------ */

static struct ibv_mr *vf_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct vf_mr *m;

	if (addr == NULL || len == 0 ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE))) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&vf.mu);
	if (vf.max_mr && len > vf.max_mr) {
		/* What a NIC says for a region past max_mr_size. */
		pthread_mutex_unlock(&vf.mu);
		errno = EIO;
		return NULL;
	}
	if ((uintptr_t)addr < vf.dev_hi && (uintptr_t)addr + len > vf.dev_lo) {
		if (!vf.dev_reg_ok) {
			/* What ibv_reg_mr says for device memory without nvidia-peermem. */
			pthread_mutex_unlock(&vf.mu);
			errno = EFAULT;
			return NULL;
		}
		vf.dev_regs++;
	}
	pthread_mutex_unlock(&vf.mu);
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->access = access;
	pthread_mutex_lock(&vf.mu);
	m->mr.lkey = vf.next_key;
	m->mr.rkey = vf.next_key ^ 0x5a000000u;	/* distinct from the lkey on purpose */
	vf.next_key += 0x100;
	m->next = vf.mrs;
	vf.mrs = m;
	vf.live++;
	pthread_mutex_unlock(&vf.mu);
	return &m->mr;
}

static int vf_dereg_mr(struct ibv_mr *mr)
{
	struct vf_mr **pp;

	pthread_mutex_lock(&vf.mu);
	for (pp = &vf.mrs; *pp; pp = &(*pp)->next)
		if (&(*pp)->mr == mr) {
			struct vf_mr *m = *pp;

			*pp = m->next;
			vf.live--;
			pthread_mutex_unlock(&vf.mu);
			free(m);
			return 0;
		}
	pthread_mutex_unlock(&vf.mu);
	return EINVAL;
}

/* --- completion channels and CQs --------------------------------------------------------- */

static struct ibv_comp_channel *vf_create_comp_channel(struct ibv_context *ctx)
{
	struct vf_ch *c = calloc(1, sizeof(*c));
	int fds[2];

	if (c == NULL)
		return NULL;
	if (pipe2(fds, O_CLOEXEC)) {
		free(c);
		return NULL;
	}
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	c->ch.context = ctx;
	c->ch.fd = fds[0];
	c->wfd = fds[1];
	c->fifo_tail = &c->fifo;
	pthread_mutex_lock(&vf.mu);
	vf.live++;
	pthread_mutex_unlock(&vf.mu);
	return &c->ch;
}

static int vf_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	struct vf_ch *c = (struct vf_ch *)ch;
	struct vf_cq *q;

	pthread_mutex_lock(&vf.mu);
	for (q = vf.cqs; q; q = q->next)
		if (q->ch == c) {
			pthread_mutex_unlock(&vf.mu);
			return EBUSY;
		}
	vf.live--;
	pthread_mutex_unlock(&vf.mu);
	close(c->ch.fd);
	close(c->wfd);
	free(c);
	return 0;
}

static struct ibv_cq *vf_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				   struct ibv_comp_channel *ch, int comp_vector)
{
	struct vf_cq *q;

	if (cqe < 1 || cqe > (1 << 22) || comp_vector != 0) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (q)
		q->ring = calloc((size_t)cqe, sizeof(*q->ring));
	if (q == NULL || q->ring == NULL) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->cq.context = ctx;
	q->cq.channel = ch;
	q->cq.cq_context = cq_context;
	q->cq.cqe = cqe;
	q->cap = cqe;
	q->ch = (struct vf_ch *)ch;
	pthread_mutex_lock(&vf.mu);
	q->next = vf.cqs;
	vf.cqs = q;
	vf.live++;
	pthread_mutex_unlock(&vf.mu);
	return &q->cq;
}

static int vf_destroy_cq(struct ibv_cq *cq)
{
	struct vf_cq *q = (struct vf_cq *)cq, **pp;
	struct vf_qp *p;

	pthread_mutex_lock(&vf.mu);
	if (q->events != q->acked) {
		/* libibverbs would wait forever here. */
		vf.destroy_busy++;
		pthread_mutex_unlock(&vf.mu);
		return EBUSY;
	}
	for (p = vf.qps; p; p = p->next)
		if (p->qp.send_cq == cq || p->qp.recv_cq == cq) {
			pthread_mutex_unlock(&vf.mu);
			return EBUSY;
		}
	for (pp = &vf.cqs; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	vf.live--;
	pthread_mutex_unlock(&vf.mu);
	free(q->ring);
	free(q);
	return 0;
}

static int vf_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	struct vf_cq *q = (struct vf_cq *)cq;

	(void)solicited_only;
	if (q->ch == NULL)
		return EINVAL;
	pthread_mutex_lock(&vf.mu);
	q->armed = 1;
	pthread_mutex_unlock(&vf.mu);
	return 0;
}

static int vf_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	struct vf_ch *c = (struct vf_ch *)ch;
	struct vf_cq *q;
	char b;

	if (read(c->ch.fd, &b, 1) != 1)
		return -1;	/* errno EAGAIN on a non-blocking channel with nothing pending */
	pthread_mutex_lock(&vf.mu);
	q = c->fifo;
	if (q) {
		c->fifo = q->fnext;
		if (c->fifo == NULL)
			c->fifo_tail = &c->fifo;
		q->events++;
		vf.events++;
	}
	pthread_mutex_unlock(&vf.mu);
	if (q == NULL) {
		errno = EIO;
		return -1;
	}
	*cq = &q->cq;
	*cq_context = q->cq.cq_context;
	return 0;
}

static void vf_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	struct vf_cq *q = (struct vf_cq *)cq;

	pthread_mutex_lock(&vf.mu);
	q->acked += n;
	pthread_mutex_unlock(&vf.mu);
}

static struct vf_qp *vf_qp_by_num(uint32_t qpn)
{
	struct vf_qp *q;

	for (q = vf.qps; q; q = q->next)
		if (q->qp.qp_num == qpn)
			return q;
	return NULL;
}

static int vf_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct vf_cq *q = (struct vf_cq *)cq;
	int i;

	pthread_mutex_lock(&vf.mu);
	for (i = 0; i < n && q->n > 0; i++) {
		struct vf_qp *p;

		wc[i] = q->ring[q->head];
		q->head = (q->head + 1) % q->cap;
		q->n--;
		p = vf_qp_by_num(wc[i].qp_num);
		if (p && p->out)
			p->out--;
	}
	pthread_mutex_unlock(&vf.mu);
	return i;
}

/* mu held. */
static void vf_complete(struct vf_qp *p, uint64_t wr_id, enum ibv_wc_status st,
			enum ibv_wc_opcode op, uint32_t len)
{
	struct vf_cq *q = (struct vf_cq *)p->qp.send_cq;
	struct ibv_wc *w;

	if (q->n == q->cap) {
		vf.overruns++;
		return;
	}
	w = &q->ring[(q->head + q->n) % q->cap];
	memset(w, 0, sizeof(*w));
	w->wr_id = wr_id;
	w->status = st;
	w->opcode = op;
	w->byte_len = len;
	w->qp_num = p->qp.qp_num;
	w->vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x81;
	q->n++;
	if (q->armed && q->ch) {
		q->armed = 0;
		q->fnext = NULL;
		*q->ch->fifo_tail = q;
		q->ch->fifo_tail = &q->fnext;
		if (write(q->ch->wfd, "", 1) != 1)
			vf.overruns++;
	}
}

/* --- queue pairs ------------------------------------------------------------------------- */

static struct ibv_qp *vf_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct vf_qp *p;

	if (a->qp_type != IBV_QPT_RC || a->send_cq == NULL || a->recv_cq == NULL ||
	    a->cap.max_send_wr == 0 || a->cap.max_send_wr > (1u << 15) || a->cap.max_send_sge == 0 ||
	    a->cap.max_send_sge > 30 || a->cap.max_inline_data > 1024) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->qp.context = pd->context;
	p->qp.pd = pd;
	p->qp.send_cq = a->send_cq;
	p->qp.recv_cq = a->recv_cq;
	p->qp.qp_type = IBV_QPT_RC;
	p->qp.state = IBV_QPS_RESET;
	p->d = ((struct vf_ctx *)pd->context)->d;
	p->max_wr = a->cap.max_send_wr;
	p->max_sge = a->cap.max_send_sge;
	pthread_mutex_lock(&vf.mu);
	p->qp.qp_num = vf.next_qpn++;
	p->next = vf.qps;
	vf.qps = p;
	vf.live++;
	pthread_mutex_unlock(&vf.mu);
	return &p->qp;
}

static int vf_destroy_qp(struct ibv_qp *qp)
{
	struct vf_qp *p = (struct vf_qp *)qp, **pp;
	struct vf_cq *q = (struct vf_cq *)qp->send_cq;
	int i, k = 0;

	pthread_mutex_lock(&vf.mu);
	for (pp = &vf.qps; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	/* Drop this QP's completions still in the CQ, keeping the others in order. */
	for (i = 0; i < q->n; i++) {
		struct ibv_wc w = q->ring[(q->head + i) % q->cap];

		if (w.qp_num != qp->qp_num)
			q->ring[(q->head + k++) % q->cap] = w;
	}
	q->n = k;
	vf.live--;
	pthread_mutex_unlock(&vf.mu);
	free(p);
	return 0;
}

#define VF_INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define VF_RTR_MASK                                                                         \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |      \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define VF_RTS_MASK                                                                         \
	(IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | \
	 IBV_QP_MAX_QP_RD_ATOMIC)

static int vf_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct vf_qp *p = (struct vf_qp *)qp;
	enum ibv_qp_state cur, to;
	int rc = EINVAL;

	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	pthread_mutex_lock(&vf.mu);
	cur = qp->state;
	to = a->qp_state;
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
		rc = 0;
	} else if (cur == IBV_QPS_RESET && to == IBV_QPS_INIT) {
		if ((mask & VF_INIT_MASK) == VF_INIT_MASK && a->port_num == 1 &&
		    a->pkey_index == 0) {
			p->access = a->qp_access_flags;
			rc = 0;
		}
	} else if (cur == IBV_QPS_INIT && to == IBV_QPS_RTR) {
		if ((mask & VF_RTR_MASK) == VF_RTR_MASK && a->path_mtu <= IBV_MTU_4096 &&
		    a->ah_attr.port_num == 1 && p->d->up &&
		    (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index < 3)) {
			vf.last_sgid = a->ah_attr.is_global ? a->ah_attr.grh.sgid_index : -1;
			p->dest = a->dest_qp_num;
			p->dlid = a->ah_attr.dlid;
			rc = 0;
		}
	} else if (cur == IBV_QPS_RTR && to == IBV_QPS_RTS) {
		if ((mask & VF_RTS_MASK) == VF_RTS_MASK)
			rc = 0;
	} else if (cur == to && (cur == IBV_QPS_INIT || cur == IBV_QPS_RTS)) {
		rc = 0;
	}
	if (rc == 0) {
		qp->state = to;
		if (to == IBV_QPS_RESET)
			p->dest = 0;
		if (to == IBV_QPS_ERR && p->held) {
			p->held = 0;
			vf_complete(p, p->held_id, IBV_WC_WR_FLUSH_ERR, p->held_op, 0);
		}
	}
	pthread_mutex_unlock(&vf.mu);
	return rc;
}

static struct vf_mr *vf_mr_find(uint32_t key, int remote, struct ibv_pd *pd, uint64_t addr,
				uint64_t len, int need)
{
	struct vf_mr *m;

	for (m = vf.mrs; m; m = m->next)
		if ((remote ? m->mr.rkey : m->mr.lkey) == key) {
			uint64_t a = (uint64_t)(uintptr_t)m->mr.addr;

			if (m->mr.pd != pd || (m->access & need) != need || addr < a ||
			    addr + len < addr || addr + len > a + m->mr.length)
				return NULL;
			return m;
		}
	return NULL;
}

/* Execute one work request; mu held.  Returns the completion status. */
static enum ibv_wc_status vf_execute(struct vf_qp *p, struct ibv_send_wr *wr, uint32_t *len)
{
	struct vf_qp *peer;
	uint64_t total = 0, off = 0;
	int i, rd = wr->opcode == IBV_WR_RDMA_READ;

	if (vf.fail_in > 0 && --vf.fail_in == 0)
		return vf.fail_st;
	if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_READ)
		return IBV_WC_LOC_QP_OP_ERR;
	if (wr->num_sge < 1 || (uint32_t)wr->num_sge > p->max_sge)
		return IBV_WC_LOC_LEN_ERR;
	if (!p->d->up)
		return IBV_WC_RETRY_EXC_ERR;
	peer = vf_qp_by_num(p->dest);
	if (peer == NULL || peer->dest != p->qp.qp_num || peer->d->lid != p->dlid ||
	    !peer->d->up || (peer->qp.state != IBV_QPS_RTR && peer->qp.state != IBV_QPS_RTS))
		return IBV_WC_RETRY_EXC_ERR;
	for (i = 0; i < wr->num_sge; i++) {
		if (!vf_mr_find(wr->sg_list[i].lkey, 0, p->qp.pd, wr->sg_list[i].addr,
				wr->sg_list[i].length, rd ? IBV_ACCESS_LOCAL_WRITE : 0))
			return IBV_WC_LOC_PROT_ERR;
		total += wr->sg_list[i].length;
	}
	if (!(peer->access & (rd ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE)) ||
	    !vf_mr_find(wr->wr.rdma.rkey, 1, peer->qp.pd, wr->wr.rdma.remote_addr, total,
			rd ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE))
		return IBV_WC_REM_ACCESS_ERR;
	for (i = 0; i < wr->num_sge; i++) {
		char *local = (char *)(uintptr_t)wr->sg_list[i].addr;
		char *remote = (char *)(uintptr_t)(wr->wr.rdma.remote_addr + off);

		if (rd)
			memmove(local, remote, wr->sg_list[i].length);
		else
			memmove(remote, local, wr->sg_list[i].length);
		off += wr->sg_list[i].length;
	}
	p->d->bytes += total;
	*len = (uint32_t)total;
	return IBV_WC_SUCCESS;
}

static int vf_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct vf_qp *p = (struct vf_qp *)qp;
	int rc = 0;

	pthread_mutex_lock(&vf.mu);
	for (; wr; wr = wr->next) {
		enum ibv_wc_status st;
		uint32_t len = 0;

		if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
			rc = EINVAL;
			break;
		}
		if (p->out >= p->max_wr) {
			rc = ENOMEM;
			break;
		}
		if (qp->state == IBV_QPS_RTS && vf.hold_in > 0 && --vf.hold_in == 0 && !p->held) {
			/* Lost: neither executed nor completed until the QP goes to ERR. */
			p->held = 1;
			p->held_id = wr->wr_id;
			p->held_op = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
								    : IBV_WC_RDMA_WRITE;
			p->out++;
			continue;
		}
		if (qp->state == IBV_QPS_ERR) {
			st = IBV_WC_WR_FLUSH_ERR;
		} else {
			st = vf_execute(p, wr, &len);
			if (st != IBV_WC_SUCCESS) {
				qp->state = IBV_QPS_ERR;
				vf.errors++;
			}
		}
		if (st == IBV_WC_SUCCESS && !(wr->send_flags & IBV_SEND_SIGNALED))
			continue;
		p->out++;
		vf_complete(p, wr->wr_id, st,
			    wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE,
			    len);
	}
	if (rc && bad)
		*bad = wr;
	pthread_mutex_unlock(&vf.mu);
	return rc;
}

static const struct mc_verbs_ops vf_table = {
	.get_device_list = vf_get_device_list,
	.free_device_list = vf_free_device_list,
	.get_device_name = vf_get_device_name,
	.open_device = vf_open_device,
	.close_device = vf_close_device,
	.query_device = vf_query_device,
	.query_port = vf_query_port,
	.query_gid = vf_query_gid,
	.query_gid_type = vf_query_gid_type,
	.alloc_pd = vf_alloc_pd,
	.dealloc_pd = vf_dealloc_pd,
	.reg_mr = vf_reg_mr,
	.dereg_mr = vf_dereg_mr,
	.create_comp_channel = vf_create_comp_channel,
	.destroy_comp_channel = vf_destroy_comp_channel,
	.create_cq = vf_create_cq,
	.destroy_cq = vf_destroy_cq,
	.req_notify_cq = vf_req_notify_cq,
	.get_cq_event = vf_get_cq_event,
	.ack_cq_events = vf_ack_cq_events,
	.poll_cq = vf_poll_cq,
	.create_qp = vf_create_qp,
	.destroy_qp = vf_destroy_qp,
	.modify_qp = vf_modify_qp,
	.post_send = vf_post_send,
};

const struct mc_verbs_ops *vf_ops(void)
{
	return &vf_table;
}

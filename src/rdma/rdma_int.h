/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_RDMA_INT_H
#define MC_RDMA_INT_H

/*
 * Internals of the rdma transport shared by its files: rdma.c (object, configuration),
 * rdma_ctx.c (NIC contexts, completion handling), rdma_mr.c (registration), rdma_ep.c
 * (endpoints, QP state machine, handshake worker), rdma_slice.c (slicing, path choice,
 * retries), rdma_hs.c (Connection frame codec), rdma_topo.c (priority matrices, peers).
 * Everything here but the MR table and the worker queue belongs to the loop thread.
 */
#include <pthread.h>
#include <sys/queue.h>

#include "rdma/rdma.h"
#include "rdma/verbs.h"

#define MC_RDMA_WORKERS 4

struct mc_rdma_config {
	int num_qp_per_ep;	/* MC_NUM_QP_PER_EP */
	int max_wr;		/* MC_MAX_WR: outstanding WRs per QP */
	int max_sge;
	int max_inline;
	int mtu;		/* bytes */
	int ib_port;
	int gid_index;		/* -1: auto */
	int pkey_index;
	int ib_sl;		/* -1: 0 */
	int ib_tc;		/* -1: 0 */
	int max_cqe;		/* per context */
	int max_ep;		/* per context */
	int slice_size;
	int retry_cnt;
	int fragment_ratio;
	int path_rr;		/* MC_PATH_ROUNDROBIN */
	int dest_affinity;	/* MC_ENABLE_DEST_DEVICE_AFFINITY */
	int slice_timeout;	/* MC_SLICE_TIMEOUT, seconds; <= 0: off */
};

void mc_rdma_config_load(struct mc_rdma_config *c);

/* A location -> NIC preference row: bit i = NIC i (ours, or the peer's list). */
struct mc_rdma_pref {
	char location[64];
	uint32_t pref;
	uint32_t other;
};

struct mc_rdma_topo {
	struct mc_rdma_pref *rows;
	uint32_t nrows;
};

/* Parse {"loc": [[nics...], [nics...]], ...} against a NIC name list.  Names not in the list
 * are ignored.  0 or ERR_MALFORMED_JSON. */
int mc_rdma_topo_parse(const json_t *m, char (*names)[64], unsigned nnames,
		       struct mc_rdma_topo *t);
void mc_rdma_topo_fini(struct mc_rdma_topo *t);
/* The row for a location; with none (or "*"), every NIC preferred. */
void mc_rdma_topo_lookup(const struct mc_rdma_topo *t, const char *location, unsigned nnics,
			 uint32_t *pref, uint32_t *other);
/* The NIC names a matrix mentions, in first-seen order.  Returns how many (<= max). */
unsigned mc_rdma_topo_names(const json_t *m, char (*names)[64], unsigned max);

struct mc_rdma_peer_buf {
	uint64_t addr, len;
	char location[64];
	uint32_t rkey[MC_RDMA_MAX_NICS];
};

struct mc_rdma_peer {
	int refs;
	char name[256];
	char host[256];
	uint16_t port;
	unsigned nnics;
	char nic[MC_RDMA_MAX_NICS][64];
	struct mc_rdma_peer_buf *bufs;	/* sorted by addr */
	uint32_t nbufs;
	struct mc_rdma_topo topo;
};

const struct mc_rdma_peer_buf *mc_rdma_peer_find(const struct mc_rdma_peer *p, uint64_t addr,
						 uint64_t len);

/* Connection frame (HandShakeDesc). */
struct mc_rdma_hs_desc {
	char local_nic_path[320];
	char peer_nic_path[320];
	uint16_t lid;
	union ibv_gid gid;
	uint32_t qpn[MC_RDMA_MAX_QP_PER_EP];
	unsigned nqp;
	char reply_msg[256];
};

char *mc_rdma_hs_encode(const struct mc_rdma_hs_desc *d);
/* 0, or ERR_MALFORMED_JSON with what was wrong in d->reply_msg. */
int mc_rdma_hs_decode(const char *json, size_t len, struct mc_rdma_hs_desc *d);
void mc_rdma_gid_to_str(const union ibv_gid *g, char *out, size_t n);
int mc_rdma_gid_from_str(const char *s, union ibv_gid *g);

/* Registered memory: one entry per buffer with an MR per NIC.  A registration longer than a
 * NIC's max_mr_size is several entries (chunks), as upstream registers it: group is the
 * address the caller registered, shared by its chunks. */
struct mc_rdma_buf {
	uint64_t addr, len;
	uint64_t group;
	char location[64];
	int remote;
	struct ibv_mr *mr[MC_RDMA_MAX_NICS];
};

struct mc_rdma_mrtab {
	pthread_mutex_t mu;
	struct mc_rdma_buf *bufs;	/* sorted by addr, non-overlapping */
	uint32_t n, cap;
};

/* Under the table mutex: lkeys and location of the buffer holding [addr, addr+len). */
int mc_rdma_mr_lookup(struct mc_rdma *r, uint64_t addr, uint64_t len,
		      uint32_t lkey[MC_RDMA_MAX_NICS], char *location, size_t locn);
void mc_rdma_mr_fini(struct mc_rdma *r);

struct mc_rdma_ep;
struct mc_rdma_task;

struct mc_rdma_slice {
	TAILQ_ENTRY(mc_rdma_slice) link;	/* endpoint wait queue */
	struct mc_rdma_task *task;
	uint64_t off, len;
	int attempts;
	uint64_t bad[4];		/* paths (local * 16 + peer NIC) that failed it */
	int lnic, rnic;
	struct mc_rdma_ep *ep;		/* where it waits or runs */
	int qp;				/* -1 while waiting */
	int status;			/* 0 running, 1 done, -1 failed */
	int posted;			/* on ep->posted (link), until its completion is polled */
	int64_t posted_ms;		/* when its work request was posted (monotonic) */
};

TAILQ_HEAD(mc_rdma_slice_q, mc_rdma_slice);

struct mc_rdma_task {
	struct mc_rdma *r;
	struct mc_rdma_peer *peer;
	int opcode;
	char *local;
	uint64_t remote;
	uint32_t lkey[MC_RDMA_MAX_NICS];
	uint32_t rkey[MC_RDMA_MAX_NICS];
	uint32_t lpref, lother, rpref, rother;
	uint64_t bad[4];		/* paths that failed any of its slices */
	mc_rdma_done_fn done;
	void *arg;
	uint32_t nslices, nleft;
	int status;
	int in_submit;			/* still inside mc_rdma_submit: finish later */
	TAILQ_ENTRY(mc_rdma_task) dlink;	/* finished inside submit, callback deferred */
	struct mc_rdma_slice slices[];
};

TAILQ_HEAD(mc_rdma_task_q, mc_rdma_task);

enum mc_rdma_ep_state {
	MC_EP_IDLE,		/* no QPs */
	MC_EP_CONNECTING,	/* QPs in INIT, handshake on the worker */
	MC_EP_CONNECTED,	/* QPs in RTS */
	MC_EP_DRAINING,		/* QPs in ERR, waiting for outstanding completions */
};

struct mc_rdma_ctx;

struct mc_rdma_ep {
	TAILQ_ENTRY(mc_rdma_ep) link;		/* ctx endpoint list, oldest first */
	TAILQ_ENTRY(mc_rdma_ep) blink;		/* ctx list of endpoints out of CQ credit */
	struct mc_rdma_ctx *ctx;
	char peer_path[320];			/* <peer server>@<peer nic> */
	char host[256];
	uint16_t port;
	int passive;				/* created by a peer's Connection frame */
	int blocked;
	enum mc_rdma_ep_state state;
	struct ibv_qp *qp[MC_RDMA_MAX_QP_PER_EP];
	int out[MC_RDMA_MAX_QP_PER_EP];		/* posted, not yet polled */
	unsigned nqp, rr;
	struct mc_rdma_slice_q waitq;
	unsigned nwait;
	struct mc_rdma_slice_q posted;		/* work requests out, oldest first */
	int hs_pending;				/* a worker job refers to us */
};

TAILQ_HEAD(mc_rdma_ep_q, mc_rdma_ep);

struct mc_rdma_ctx {
	struct mc_rdma *r;
	unsigned index;
	char name[64];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct event *ev;
	uint16_t lid;
	union ibv_gid gid;
	int gid_index;
	enum ibv_mtu mtu;
	int cqe;
	int max_wr, max_sge;		/* per QP, MC_MAX_WR/MC_MAX_SGE capped by the device */
	uint64_t max_mr;		/* the device's max_mr_size */
	int rd_atom, init_rd_atom;	/* RDMA READs in flight as target / initiator */
	int inflight;			/* WRs posted on this CQ, not yet polled */
	int full_logged;		/* endpoint table full, already said so */
	struct mc_rdma_ep_q eps;
	unsigned neps;
	struct mc_rdma_ep_q blocked;
};

/* Handshake jobs for the worker thread, and their results coming back to the loop. */
struct mc_rdma_job {
	struct mc_rdma_job *next;
	struct mc_rdma_ep *ep;
	char host[256];
	uint16_t port;
	char *req;
	char *reply;
	int rc;
};

struct mc_rdma {
	struct event_base *base;
	const struct mc_verbs_ops *ops;
	struct mc_rdma_config cfg;
	char server_name[256];
	struct mc_rdma_ctx ctx[MC_RDMA_MAX_NICS];
	unsigned nctx;
	char names[MC_RDMA_MAX_NICS][64];
	struct mc_rdma_topo topo;
	json_t *matrix;			/* as published */
	struct mc_rdma_mrtab mr;
	mc_rdma_hs_fn hs;
	void *hs_arg;
	/* handshake workers: a peer that does not answer holds one, not all */
	pthread_t worker[MC_RDMA_WORKERS];
	int nworkers;
	pthread_mutex_t wmu;
	pthread_cond_t wcv;
	struct mc_rdma_job *jobs, **jobs_tail;	/* to the worker */
	struct mc_rdma_job *done_jobs;		/* back to the loop */
	int wstop;
	int wpipe[2];
	struct event *wev;
	unsigned rr;
	unsigned seed;
	uint32_t ntasks;		/* requests not finished */
	struct mc_rdma_task_q deferred;	/* finished inside submit: callbacks from dev */
	struct event *dev;
	struct event *tev;		/* MC_SLICE_TIMEOUT sweep, NULL when off */
	struct mc_rdma_stats st;
	int freeing;
};

/* rdma_ctx.c */
int mc_rdma_ctx_open(struct mc_rdma *r, struct mc_rdma_ctx *c, struct ibv_device *dev);
void mc_rdma_ctx_close(struct mc_rdma_ctx *c);

/* rdma_ep.c */
int mc_rdma_worker_start(struct mc_rdma *r);
void mc_rdma_worker_stop(struct mc_rdma *r);
/* The active endpoint towards peer_path from context c, created if missing (NULL when the
 * table is full of busy endpoints). */
struct mc_rdma_ep *mc_rdma_ep_get(struct mc_rdma_ctx *c, const char *peer_path, const char *host,
				  uint16_t port);
/* Queue a slice on an endpoint, connecting it if needed, posting when possible. */
void mc_rdma_ep_enqueue(struct mc_rdma_ep *ep, struct mc_rdma_slice *s);
/* Post what waits on ep while its QPs and its CQ have room. */
void mc_rdma_ep_kick(struct mc_rdma_ep *ep);
/* A work request of ep's QP i completed (wc polled). */
void mc_rdma_ep_on_wc(struct mc_rdma_ep *ep, int qp);
/* The endpoint failed: QPs to ERR, waiting slices back to the scheduler. */
void mc_rdma_ep_fail(struct mc_rdma_ep *ep, const char *why);
void mc_rdma_ep_free_all(struct mc_rdma_ctx *c);

/* rdma_slice.c */
/* Call the deferred callbacks (the dev event, and teardown). */
void mc_rdma_run_deferred(struct mc_rdma *r);
/* Choose a path for s and queue it; fails the slice when it is out of retries. */
void mc_rdma_slice_schedule(struct mc_rdma *r, struct mc_rdma_slice *s);
/* Fill and post the work request of s on ep's QP i.  0 or the verbs error. */
int mc_rdma_slice_post(struct mc_rdma_slice *s, struct mc_rdma_ep *ep, int qp);
void mc_rdma_slice_done(struct mc_rdma_slice *s);
/* Its completion was polled: off its endpoint's posted list. */
void mc_rdma_slice_polled(struct mc_rdma_slice *s);
/* MC_SLICE_TIMEOUT: reset every connected endpoint whose oldest work request has had no
 * completion for that long (the flush retries its slices on other paths). */
void mc_rdma_slice_sweep(struct mc_rdma *r);
/* The slice's attempt failed: retry elsewhere or fail it. */
void mc_rdma_slice_retry(struct mc_rdma_slice *s, const char *why);

#endif

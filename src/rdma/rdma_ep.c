/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Endpoints: the RC queue pairs between one of our NICs and one peer NIC (MC_NUM_QP_PER_EP of
 * them, as upstream's RdmaEndPoint has).
 * An active endpoint is created when the first slice needs its path: its QPs are created and
 * moved to INIT on the loop, then the Connection frame goes to the peer's handshake port on the
 * worker threads (a connect may take seconds; the loop must not wait), and the reply brings the
 * QPs through RTR to RTS.  Slices queue on the endpoint until then.  A failed completion puts
 * the QPs into ERR; once every outstanding work request has come back (flushed) the QPs are
 * destroyed and the endpoint reconnects if slices wait on it.  A passive endpoint is made from
 * a peer's Connection frame; it only gives the peer access to our memory.  Endpoints per
 * context are bounded (MC_MAX_EP_PER_CTX): the oldest idle one is evicted first.
 * Loop thread, except mc_ep_worker_main.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/transfer_engine_c.h"
#include "common/log.h"
#include "rdma/rdma_int.h"

static void mc_ep_connect(struct mc_rdma_ep *ep);

/* --- QP state machine -------------------------------------------------------------------- */

static int mc_ep_qps_create(struct mc_rdma_ep *ep, unsigned n)
{
	struct mc_rdma_ctx *c = ep->ctx;
	struct mc_rdma *r = c->r;
	unsigned i;

	for (i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = c->cq,
			.recv_cq = c->cq,
			.qp_type = IBV_QPT_RC,
			.sq_sig_all = 0,
			.cap = {
				.max_send_wr = (uint32_t)c->max_wr,
				.max_recv_wr = 1,
				.max_send_sge = (uint32_t)c->max_sge,
				.max_recv_sge = 1,
				.max_inline_data = (uint32_t)r->cfg.max_inline,
			},
		};
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT,
			.pkey_index = (uint16_t)r->cfg.pkey_index,
			.port_num = (uint8_t)r->cfg.ib_port,
			.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
					   IBV_ACCESS_REMOTE_WRITE,
		};

		ep->qp[i] = r->ops->create_qp(c->pd, &ia);
		if (ep->qp[i] == NULL) {
			mc_log_warn("rdma %s: ibv_create_qp failed: %s", c->name, strerror(errno));
			goto fail;
		}
		ep->nqp = i + 1;
		ep->out[i] = 0;
		if (r->ops->modify_qp(ep->qp[i], &a,
				      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS)) {
			mc_log_warn("rdma %s: QP %u to INIT failed", c->name, ep->qp[i]->qp_num);
			goto fail;
		}
	}
	return 0;
fail:
	return ERR_ENDPOINT;
}

static void mc_ep_qps_destroy(struct mc_rdma_ep *ep)
{
	unsigned i;

	for (i = 0; i < ep->nqp; i++)
		if (ep->qp[i] && ep->ctx->r->ops->destroy_qp(ep->qp[i]))
			mc_log_warn("rdma %s: ibv_destroy_qp failed", ep->ctx->name);
	ep->nqp = 0;
	ep->rr = 0;
}

/* INIT -> RTR -> RTS with the peer's QP numbers, LID and GID; i-th QP to the peer's i-th. */
static int mc_ep_qps_up(struct mc_rdma_ep *ep, const struct mc_rdma_hs_desc *peer)
{
	struct mc_rdma_ctx *c = ep->ctx;
	struct mc_rdma *r = c->r;
	static const uint8_t zero[16];
	unsigned i;

	if (peer->nqp != ep->nqp)
		return ERR_REJECT_HANDSHAKE;
	for (i = 0; i < ep->nqp; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR,
			.path_mtu = c->mtu,
			.dest_qp_num = peer->qpn[i],
			.rq_psn = 0,
			.max_dest_rd_atomic = (uint8_t)c->rd_atom,
			.min_rnr_timer = 12,
			.ah_attr = {
				.dlid = peer->lid,
				.sl = (uint8_t)(r->cfg.ib_sl < 0 ? 0 : r->cfg.ib_sl),
				.port_num = (uint8_t)r->cfg.ib_port,
			},
		};

		if (memcmp(peer->gid.raw, zero, sizeof(zero))) {
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.dgid = peer->gid;
			a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
			a.ah_attr.grh.hop_limit = 16;
			a.ah_attr.grh.traffic_class = (uint8_t)(r->cfg.ib_tc < 0 ? 0 : r->cfg.ib_tc);
		}
		if (r->ops->modify_qp(ep->qp[i], &a,
				      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			return ERR_ENDPOINT;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = 0;
		a.max_rd_atomic = (uint8_t)c->init_rd_atom;
		if (r->ops->modify_qp(ep->qp[i], &a,
				      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					      IBV_QP_MAX_QP_RD_ATOMIC))
			return ERR_ENDPOINT;
	}
	return 0;
}

static void mc_ep_fill_desc(struct mc_rdma_ep *ep, struct mc_rdma_hs_desc *d)
{
	struct mc_rdma_ctx *c = ep->ctx;
	unsigned i;

	memset(d, 0, sizeof(*d));
	snprintf(d->local_nic_path, sizeof(d->local_nic_path), "%s@%s", c->r->server_name,
		 c->name);
	snprintf(d->peer_nic_path, sizeof(d->peer_nic_path), "%s", ep->peer_path);
	d->lid = c->lid;
	d->gid = c->gid;
	for (i = 0; i < ep->nqp; i++)
		d->qpn[i] = ep->qp[i]->qp_num;
	d->nqp = ep->nqp;
}

/* --- endpoint table ---------------------------------------------------------------------- */

static int mc_ep_busy(const struct mc_rdma_ep *ep)
{
	unsigned i;

	if (ep->hs_pending || ep->nwait || ep->state == MC_EP_CONNECTING ||
	    ep->state == MC_EP_DRAINING)
		return 1;
	for (i = 0; i < ep->nqp; i++)
		if (ep->out[i])
			return 1;
	return 0;
}

static void mc_ep_free(struct mc_rdma_ep *ep)
{
	struct mc_rdma_ctx *c = ep->ctx;

	TAILQ_REMOVE(&c->eps, ep, link);
	if (ep->blocked)
		TAILQ_REMOVE(&c->blocked, ep, blink);
	c->neps--;
	c->r->st.endpoints--;
	mc_ep_qps_destroy(ep);
	free(ep);
}

/* Room for one more endpoint on c: evict the oldest idle one if the table is full. */
static int mc_ep_room(struct mc_rdma_ctx *c)
{
	struct mc_rdma_ep *ep;

	if (c->neps < (unsigned)c->r->cfg.max_ep)
		return 1;
	TAILQ_FOREACH(ep, &c->eps, link)
		if (!mc_ep_busy(ep)) {
			mc_log_debug("rdma %s: evicting endpoint to %s", c->name, ep->peer_path);
			mc_ep_free(ep);
			return 1;
		}
	return 0;
}

static struct mc_rdma_ep *mc_ep_new(struct mc_rdma_ctx *c, const char *peer_path, int passive)
{
	struct mc_rdma_ep *ep;

	if (!mc_ep_room(c)) {
		/* Once per episode: every slice that wants a path would say it again. */
		if (!c->full_logged)
			mc_log_warn("rdma %s: all %u endpoints busy (MC_MAX_EP_PER_CTX), none for %s",
				    c->name, c->neps, peer_path);
		c->full_logged = 1;
		return NULL;
	}
	c->full_logged = 0;
	ep = calloc(1, sizeof(*ep));
	if (ep == NULL)
		return NULL;
	ep->ctx = c;
	ep->passive = passive;
	snprintf(ep->peer_path, sizeof(ep->peer_path), "%s", peer_path);
	TAILQ_INIT(&ep->waitq);
	TAILQ_INIT(&ep->posted);
	TAILQ_INSERT_TAIL(&c->eps, ep, link);
	c->neps++;
	c->r->st.endpoints++;
	return ep;
}

static struct mc_rdma_ep *mc_ep_find(struct mc_rdma_ctx *c, const char *peer_path, int passive)
{
	struct mc_rdma_ep *ep;

	TAILQ_FOREACH(ep, &c->eps, link)
		if (ep->passive == passive && !strcmp(ep->peer_path, peer_path))
			return ep;
	return NULL;
}

struct mc_rdma_ep *mc_rdma_ep_get(struct mc_rdma_ctx *c, const char *peer_path, const char *host,
				  uint16_t port)
{
	struct mc_rdma_ep *ep = mc_ep_find(c, peer_path, 0);

	if (ep == NULL)
		ep = mc_ep_new(c, peer_path, 0);
	if (ep && (ep->state == MC_EP_IDLE || strcmp(ep->host, host) || ep->port != port)) {
		/* A reopened segment may have moved: use where it is now for the next connect. */
		snprintf(ep->host, sizeof(ep->host), "%s", host);
		ep->port = port;
	}
	return ep;
}

/* --- posting ----------------------------------------------------------------------------- */

void mc_rdma_ep_enqueue(struct mc_rdma_ep *ep, struct mc_rdma_slice *s)
{
	s->ep = ep;
	s->qp = -1;
	TAILQ_INSERT_TAIL(&ep->waitq, s, link);
	ep->nwait++;
	if (ep->state == MC_EP_IDLE)
		mc_ep_connect(ep);
	else if (ep->state == MC_EP_CONNECTED)
		mc_rdma_ep_kick(ep);
}

void mc_rdma_ep_kick(struct mc_rdma_ep *ep)
{
	struct mc_rdma_ctx *c = ep->ctx;
	struct mc_rdma_slice *s;
	int max = c->max_wr;

	while (ep->state == MC_EP_CONNECTED && (s = TAILQ_FIRST(&ep->waitq)) != NULL) {
		unsigned k, q = ep->nqp;
		int rc;

		if (c->inflight >= c->cqe) {
			if (!ep->blocked) {
				TAILQ_INSERT_TAIL(&c->blocked, ep, blink);
				ep->blocked = 1;
			}
			return;
		}
		for (k = 0; k < ep->nqp; k++) {
			unsigned i = (ep->rr + k) % ep->nqp;

			if (ep->out[i] < max) {
				q = i;
				break;
			}
		}
		if (q == ep->nqp)
			return;	/* every QP full: a completion on this endpoint kicks again */
		ep->rr = q + 1;
		TAILQ_REMOVE(&ep->waitq, s, link);
		ep->nwait--;
		rc = mc_rdma_slice_post(s, ep, (int)q);
		if (rc) {
			char why[64];

			snprintf(why, sizeof(why), "ibv_post_send: %s", strerror(rc));
			mc_rdma_ep_fail(ep, why);
			mc_rdma_slice_retry(s, why);
			return;
		}
		ep->out[q]++;
		c->inflight++;
	}
}

/* Every QP of a failed endpoint is back to zero outstanding: tear down, reconnect if needed. */
static void mc_ep_drained(struct mc_rdma_ep *ep)
{
	unsigned i;

	for (i = 0; i < ep->nqp; i++)
		if (ep->out[i])
			return;
	mc_ep_qps_destroy(ep);
	ep->state = MC_EP_IDLE;
	if (ep->passive)
		mc_ep_free(ep);
	else if (ep->nwait && !ep->ctx->r->freeing)
		mc_ep_connect(ep);
}

void mc_rdma_ep_on_wc(struct mc_rdma_ep *ep, int qp)
{
	if (qp >= 0 && (unsigned)qp < ep->nqp && ep->out[qp] > 0)
		ep->out[qp]--;
	if (ep->state == MC_EP_DRAINING)
		mc_ep_drained(ep);
	else if (ep->state == MC_EP_CONNECTED)
		mc_rdma_ep_kick(ep);
}

void mc_rdma_ep_fail(struct mc_rdma_ep *ep, const char *why)
{
	struct mc_rdma *r = ep->ctx->r;
	struct mc_rdma_slice_q moved = TAILQ_HEAD_INITIALIZER(moved);
	struct mc_rdma_slice *s;
	unsigned i;

	if (ep->state == MC_EP_DRAINING)
		return;
	if (!r->freeing)
		mc_log_warn("rdma %s: endpoint to %s reset: %s", ep->ctx->name, ep->peer_path, why);
	r->st.ep_resets++;
	for (i = 0; i < ep->nqp; i++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		/* ERR flushes every outstanding work request back to the CQ. */
		r->ops->modify_qp(ep->qp[i], &a, IBV_QP_STATE);
	}
	ep->state = MC_EP_DRAINING;
	if (ep->blocked) {
		TAILQ_REMOVE(&ep->ctx->blocked, ep, blink);
		ep->blocked = 0;
	}
	TAILQ_CONCAT(&moved, &ep->waitq, link);
	ep->nwait = 0;
	while ((s = TAILQ_FIRST(&moved)) != NULL) {
		TAILQ_REMOVE(&moved, s, link);
		s->ep = NULL;
		mc_rdma_slice_retry(s, why);
	}
	mc_ep_drained(ep);
}

void mc_rdma_ep_free_all(struct mc_rdma_ctx *c)
{
	struct mc_rdma_ep *ep, *next;
	struct ibv_wc wc[16];
	int n, i, spins;

	/* Fail everything, then collect the flushed completions so every slice is accounted for
	 * before the QPs go away. */
	for (ep = TAILQ_FIRST(&c->eps); ep; ep = next) {
		/* Failing a passive endpoint frees it. */
		next = TAILQ_NEXT(ep, link);
		if (ep->state == MC_EP_CONNECTED || ep->state == MC_EP_CONNECTING)
			mc_rdma_ep_fail(ep, "shutting down");
	}
	for (spins = 0; c->inflight > 0 && spins < 100000; spins++) {
		n = c->r->ops->poll_cq(c->cq, 16, wc);
		if (n < 0)
			break;
		if (n == 0) {
			usleep(10);
			continue;
		}
		for (i = 0; i < n; i++) {
			struct mc_rdma_slice *s = (struct mc_rdma_slice *)(uintptr_t)wc[i].wr_id;
			struct mc_rdma_ep *e2 = s->ep;
			int q = s->qp;

			c->inflight--;
			mc_rdma_slice_polled(s);
			s->qp = -1;
			/* Work that completed before the flush did move its bytes. */
			if (wc[i].status == IBV_WC_SUCCESS)
				mc_rdma_slice_done(s);
			else
				mc_rdma_slice_retry(s, "shutting down");
			mc_rdma_ep_on_wc(e2, q);
		}
	}
	while ((ep = TAILQ_FIRST(&c->eps)) != NULL) {
		struct mc_rdma_slice *s;

		while ((s = TAILQ_FIRST(&ep->waitq)) != NULL) {
			TAILQ_REMOVE(&ep->waitq, s, link);
			ep->nwait--;
			s->ep = NULL;
			mc_rdma_slice_retry(s, "shutting down");
		}
		mc_ep_free(ep);
	}
}

/* --- the active handshake, on the worker ------------------------------------------------- */

static void mc_ep_fail_connect(struct mc_rdma_ep *ep, const char *why)
{
	/* QPs in INIT have nothing outstanding: fail drains at once. */
	mc_rdma_ep_fail(ep, why);
}

static void mc_ep_connect(struct mc_rdma_ep *ep)
{
	struct mc_rdma *r = ep->ctx->r;
	struct mc_rdma_hs_desc d;
	struct mc_rdma_job *j;

	if (r->freeing)
		return;
	ep->state = MC_EP_CONNECTING;
	if (mc_ep_qps_create(ep, (unsigned)r->cfg.num_qp_per_ep)) {
		mc_ep_fail_connect(ep, "cannot create QPs");
		return;
	}
	mc_ep_fill_desc(ep, &d);
	j = calloc(1, sizeof(*j));
	if (j)
		j->req = mc_rdma_hs_encode(&d);
	if (j == NULL || j->req == NULL) {
		free(j);
		mc_ep_fail_connect(ep, "out of memory");
		return;
	}
	j->ep = ep;
	snprintf(j->host, sizeof(j->host), "%s", ep->host);
	j->port = ep->port;
	ep->hs_pending = 1;
	r->st.connects++;
	pthread_mutex_lock(&r->wmu);
	*r->jobs_tail = j;
	r->jobs_tail = &j->next;
	pthread_cond_signal(&r->wcv);
	pthread_mutex_unlock(&r->wmu);
}

static void mc_ep_on_reply(struct mc_rdma_job *j)
{
	struct mc_rdma_ep *ep = j->ep;
	struct mc_rdma_hs_desc d;
	char why[320];

	ep->hs_pending = 0;
	if (ep->ctx->r->freeing) {
		mc_ep_fail_connect(ep, "shutting down");
		return;
	}
	if (j->rc) {
		snprintf(why, sizeof(why), "handshake with %s:%u failed (%d)", j->host, j->port,
			 j->rc);
		mc_ep_fail_connect(ep, why);
		return;
	}
	if (mc_rdma_hs_decode(j->reply, strlen(j->reply), &d) || d.reply_msg[0]) {
		snprintf(why, sizeof(why), "peer refused: %.250s", d.reply_msg);
		mc_ep_fail_connect(ep, why);
		return;
	}
	if (strcmp(d.local_nic_path, ep->peer_path)) {
		snprintf(why, sizeof(why), "reply from %.250s", d.local_nic_path);
		mc_ep_fail_connect(ep, why);
		return;
	}
	if (mc_ep_qps_up(ep, &d)) {
		mc_ep_fail_connect(ep, "cannot bring QPs to RTS");
		return;
	}
	ep->state = MC_EP_CONNECTED;
	mc_log_debug("rdma %s: connected to %s with %u QPs", ep->ctx->name, ep->peer_path, ep->nqp);
	mc_rdma_ep_kick(ep);
}

static void *mc_ep_worker_main(void *arg)
{
	struct mc_rdma *r = arg;

	pthread_mutex_lock(&r->wmu);
	for (;;) {
		struct mc_rdma_job *j;
		size_t len = 0;

		while (r->jobs == NULL && !r->wstop)
			pthread_cond_wait(&r->wcv, &r->wmu);
		if (r->wstop)
			break;
		j = r->jobs;
		r->jobs = j->next;
		if (r->jobs == NULL)
			r->jobs_tail = &r->jobs;
		pthread_mutex_unlock(&r->wmu);
		j->rc = r->hs(r->hs_arg, j->host, j->port, j->req, &j->reply, &len);
		if (j->rc == 0 && j->reply == NULL)
			j->rc = ERR_SOCKET;
		pthread_mutex_lock(&r->wmu);
		j->next = r->done_jobs;
		r->done_jobs = j;
		if (write(r->wpipe[1], "", 1) < 0 && errno != EAGAIN)
			mc_log_err("rdma: worker cannot wake the loop: %s", strerror(errno));
	}
	pthread_mutex_unlock(&r->wmu);
	return NULL;
}

static void mc_ep_job_free(struct mc_rdma_job *j)
{
	free(j->req);
	free(j->reply);
	free(j);
}

/* Take the finished jobs (oldest first) and apply them. */
static void mc_ep_reap(struct mc_rdma *r)
{
	struct mc_rdma_job *list, *rev = NULL, *j;

	pthread_mutex_lock(&r->wmu);
	list = r->done_jobs;
	r->done_jobs = NULL;
	pthread_mutex_unlock(&r->wmu);
	while ((j = list) != NULL) {
		list = j->next;
		j->next = rev;
		rev = j;
	}
	while ((j = rev) != NULL) {
		rev = j->next;
		mc_ep_on_reply(j);
		mc_ep_job_free(j);
	}
}

static void mc_ep_on_worker(evutil_socket_t fd, short what, void *arg)
{
	char buf[256];

	(void)what;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	mc_ep_reap(arg);
}

int mc_rdma_worker_start(struct mc_rdma *r)
{
	int i;

	r->jobs_tail = &r->jobs;
	if (pipe2(r->wpipe, O_CLOEXEC | O_NONBLOCK))
		return ERR_MEMORY;
	for (i = 0; i < 2; i++)
		fcntl(r->wpipe[i], F_SETFL, O_NONBLOCK);
	r->wev = event_new(r->base, r->wpipe[0], EV_READ | EV_PERSIST, mc_ep_on_worker, r);
	if (r->wev == NULL || event_add(r->wev, NULL))
		return ERR_MEMORY;
	for (i = 0; i < MC_RDMA_WORKERS; i++) {
		if (pthread_create(&r->worker[i], NULL, mc_ep_worker_main, r))
			return r->nworkers ? 0 : ERR_MEMORY;
		r->nworkers++;
	}
	return 0;
}

void mc_rdma_worker_stop(struct mc_rdma *r)
{
	struct mc_rdma_job *j;
	int i;

	pthread_mutex_lock(&r->wmu);
	r->wstop = 1;
	pthread_cond_broadcast(&r->wcv);
	pthread_mutex_unlock(&r->wmu);
	for (i = 0; i < r->nworkers; i++)
		pthread_join(r->worker[i], NULL);
	r->nworkers = 0;
	/* Finished jobs resolve their endpoints; jobs never started fail theirs. */
	mc_ep_reap(r);
	while ((j = r->jobs) != NULL) {
		r->jobs = j->next;
		j->ep->hs_pending = 0;
		mc_ep_fail_connect(j->ep, "shutting down");
		mc_ep_job_free(j);
	}
	r->jobs_tail = &r->jobs;
	if (r->wev)
		event_free(r->wev);
	r->wev = NULL;
	if (r->wpipe[0] > 0) {
		close(r->wpipe[0]);
		close(r->wpipe[1]);
		r->wpipe[0] = r->wpipe[1] = -1;
	}
}

/* --- the passive side ---------------------------------------------------------------------- */

static char *mc_ep_refuse(const char *what, const char *arg)
{
	struct mc_rdma_hs_desc d = { 0 };

	/* A long peer-supplied name is cut, which is fine for a message. */
	if (snprintf(d.reply_msg, sizeof(d.reply_msg), "%s%s", what, arg) >= (int)sizeof(d.reply_msg))
		mc_log_debug("rdma: refusal message truncated");
	mc_log_warn("rdma: Connection frame refused: %s", d.reply_msg);
	return mc_rdma_hs_encode(&d);
}

char *mc_rdma_on_connection(struct mc_rdma *r, const char *json, size_t len)
{
	struct mc_rdma_hs_desc in, out;
	struct mc_rdma_ctx *c = NULL;
	struct mc_rdma_ep *ep;
	const char *at;
	unsigned i;

	if (mc_rdma_hs_decode(json, len, &in))
		return mc_ep_refuse("", in.reply_msg);
	if (in.reply_msg[0])
		return mc_ep_refuse("request carries a reply_msg: ", in.reply_msg);
	at = strrchr(in.peer_nic_path, '@');
	if ((size_t)(at - in.peer_nic_path) != strlen(r->server_name) ||
	    strncmp(in.peer_nic_path, r->server_name, strlen(r->server_name)))
		return mc_ep_refuse("peer_nic_path is not this server: ", in.peer_nic_path);
	for (i = 0; i < r->nctx; i++)
		if (!strcmp(r->ctx[i].name, at + 1))
			c = &r->ctx[i];
	if (c == NULL)
		return mc_ep_refuse("no such NIC here: ", at + 1);
	/* A peer reconnecting replaces its old endpoint: its QPs are gone on that side. */
	ep = mc_ep_find(c, in.local_nic_path, 1);
	if (ep)
		mc_ep_free(ep);
	ep = mc_ep_new(c, in.local_nic_path, 1);
	if (ep == NULL)
		return mc_ep_refuse("endpoint table full on ", c->name);
	ep->state = MC_EP_CONNECTING;
	if (mc_ep_qps_create(ep, in.nqp) || mc_ep_qps_up(ep, &in)) {
		mc_ep_free(ep);
		return mc_ep_refuse("cannot bring QPs up on ", c->name);
	}
	ep->state = MC_EP_CONNECTED;
	mc_ep_fill_desc(ep, &out);
	mc_log_debug("rdma %s: accepted %u QPs from %s", c->name, ep->nqp, ep->peer_path);
	return mc_rdma_hs_encode(&out);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rdma transport (src/rdma) behind the engine's transport interface (transport.h).
 * install opens the NICs of the priority matrix installTransport was given (args[0]; every NIC
 * without one) on the engine's loop; describe turns our descriptor into an rdma one; match
 * takes a peer whose descriptor says protocol rdma; submit hands requests to the transport,
 * and requests from memory registered without remote access go to tcp (-EXDEV).  Connection
 * frames from the handshake port reach mc_te_rdma_on_connection.  Built only with libibverbs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/transport.h"
#include "mooncake/transfer_engine_c.h"
#include "rdma/rdma.h"

#ifdef HAVE_RDMA

/* NULL: the real libibverbs.  Tests put the fake NICs of tests/unit/verbs_fake.c here. */
static const struct mc_verbs_ops *mc_te_rdma_verbs;

void mc_te_rdma_set_verbs(const struct mc_verbs_ops *ops)
{
	mc_te_rdma_verbs = ops;
}

/* mc_rdma_hs_fn: a Connection frame to the peer's handshake port (a worker thread). */
static int mc_te_rdma_hs(void *arg, const char *host, uint16_t port, const char *json,
			 char **reply, size_t *reply_len)
{
	(void)arg;
	return mc_te_hs_call(host, port, MC_HS_CONNECTION, json, reply, reply_len);
}

struct mc_te_rdma_call {
	struct mc_engine *e;
	struct mc_rdma *r;
	int rc;
	struct mc_waiter w;
};

static void mc_te_rdma_new_on_loop(void *arg)
{
	struct mc_te_rdma_call *c = arg;
	struct mc_rdma_params p = {
		.ops = mc_te_rdma_verbs,
		.server_name = c->e->server_name,
		.matrix = c->e->rdma_matrix,
		.hs = mc_te_rdma_hs,
	};

	c->r = mc_rdma_new(mc_loop_thread_base(c->e->lt), &p, &c->rc);
	mc_waiter_signal(&c->w, 0);
}

static void mc_te_rdma_free_on_loop(void *arg)
{
	struct mc_te_rdma_call *c = arg;

	mc_rdma_free(c->r);
	mc_waiter_signal(&c->w, 0);
}

static void mc_te_rdma_loop(struct mc_engine *e, void (*fn)(void *), struct mc_te_rdma_call *c)
{
	c->e = e;
	mc_waiter_init(&c->w);
	mc_loop_thread_call(e->lt, fn, c);
	mc_waiter_wait(&c->w);
	mc_waiter_fini(&c->w);
}

static int mc_te_rdma_install(struct mc_engine *e, void **state)
{
	struct mc_te_rdma_call c = { 0 };
	struct mc_te_buffer *bufs;
	uint32_t i, n;
	int rc;

	mc_te_rdma_loop(e, mc_te_rdma_new_on_loop, &c);
	if (c.r == NULL) {
		mc_log_err("transfer engine %s: rdma transport not installed (%d)", e->server_name,
			   c.rc);
		return -ENODEV;
	}
	/* Memory registered before the install goes onto the NICs too; pinning happens outside
	 * e->mu (the loop takes it), on a copy of the list. */
	pthread_mutex_lock(&e->mu);
	n = e->nbufs;
	bufs = malloc((n ? n : 1) * sizeof(*bufs));
	if (bufs && n)
		memcpy(bufs, e->bufs, n * sizeof(*bufs));
	pthread_mutex_unlock(&e->mu);
	rc = bufs ? 0 : -ENOMEM;
	for (i = 0; i < n && rc == 0; i++)
		rc = mc_rdma_register(c.r, (void *)(uintptr_t)bufs[i].addr, bufs[i].length, "*", 1);
	free(bufs);
	if (rc) {
		mc_log_err("transfer engine %s: cannot register existing buffers for rdma",
			   e->server_name);
		mc_te_rdma_loop(e, mc_te_rdma_free_on_loop, &c);
		return -EIO;
	}
	mc_log_info("transfer engine %s: rdma transport on %u NIC(s)", e->server_name,
		    mc_rdma_nic_count(c.r));
	*state = c.r;
	return 0;
}

static void mc_te_rdma_uninstall(struct mc_engine *e, void *state)
{
	struct mc_te_rdma_call c = { .r = state };

	mc_te_rdma_loop(e, mc_te_rdma_free_on_loop, &c);
}

static void mc_te_rdma_describe(void *state, json_t *desc)
{
	if (mc_rdma_desc_fill(state, desc))
		mc_log_warn("rdma: out of memory describing the segment");
}

static int mc_te_rdma_match(void *state, struct mc_te_segment *seg)
{
	(void)state;
	if (strcmp(seg->desc.protocol, "rdma") || seg->desc.raw == NULL || seg->rpc_port == 0)
		return 0;
	seg->xport_ctx = mc_rdma_peer_new(seg->desc.raw, seg->desc.name, seg->host, seg->rpc_port);
	return seg->xport_ctx != NULL;
}

static void mc_te_rdma_release(void *state, struct mc_te_segment *seg)
{
	(void)state;
	mc_rdma_peer_unref(seg->xport_ctx);
	seg->xport_ctx = NULL;
}

static void mc_te_rdma_on_done(void *arg, int status)
{
	mc_te_req_done(arg, status);
}

static int mc_te_rdma_submit(void *state, struct mc_te_req *r)
{
	struct mc_rdma_xfer x = {
		.opcode = r->opcode == MC_XFER_READ ? MC_RDMA_READ : MC_RDMA_WRITE,
		.local = r->local,
		.remote = r->remote,
		.len = r->len,
		.peer = r->seg_ctx,
		.nic_hint = r->nic_hint,
	};
	int rc;

	if (x.peer == NULL)
		return -EXDEV;
	rc = mc_rdma_submit(state, &x, mc_te_rdma_on_done, r);
	/* Local memory registered without remote access is not on the NICs: tcp carries it. */
	return rc == ERR_ADDRESS_NOT_REGISTERED ? -EXDEV : rc;
}

static int mc_te_rdma_register_mem(void *state, void *addr, size_t len, const char *location)
{
	return mc_rdma_register(state, addr, len, location, 1);
}

static void mc_te_rdma_unregister_mem(void *state, void *addr)
{
	mc_rdma_unregister(state, addr);
}

static int mc_te_rdma_register_local(void *state, void *addr, size_t len, const char *location,
				     int remote)
{
	return mc_rdma_register(state, addr, len, location, remote);
}

static int mc_te_rdma_unregister_local(void *state, void *addr)
{
	return mc_rdma_unregister(state, addr);
}

static int mc_te_rdma_covers(void *state, const void *addr, uint64_t len)
{
	return mc_rdma_covers(state, addr, len);
}

static char *mc_te_rdma_topology(void *state)
{
	return json_dumps(mc_rdma_matrix(state), JSON_COMPACT | JSON_SORT_KEYS);
}

/* A Connection frame from the handshake port (loop thread). */
static char *mc_te_rdma_on_connection(void *state, const char *json, size_t len)
{
	return mc_rdma_on_connection(state, json, len);
}

const struct mc_te_transport_ops mc_te_rdma_ops = {
	.name = "rdma",
	.install = mc_te_rdma_install,
	.uninstall = mc_te_rdma_uninstall,
	.describe = mc_te_rdma_describe,
	.match = mc_te_rdma_match,
	.release = mc_te_rdma_release,
	.submit = mc_te_rdma_submit,
	.register_mem = mc_te_rdma_register_mem,
	.unregister_mem = mc_te_rdma_unregister_mem,
	.register_local = mc_te_rdma_register_local,
	.unregister_local = mc_te_rdma_unregister_local,
	.covers = mc_te_rdma_covers,
	.topology = mc_te_rdma_topology,
	.on_connection = mc_te_rdma_on_connection,
};

#else /* !HAVE_RDMA: no rdma slot. */

void mc_te_rdma_set_verbs(const struct mc_verbs_ops *ops)
{
	(void)ops;
}

#endif

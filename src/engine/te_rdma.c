/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's side of the rdma transport (src/rdma): installTransport("rdma"), registered
 * memory mirrored onto the NICs, the rdma fields of our descriptor, peers made from theirs,
 * Connection frames from the handshake port, and requests to segments whose protocol is
 * "rdma".  The transport lives on the engine's loop; install and uninstall run there through
 * mc_loop_thread_call.  In a build without libibverbs every entry point says so: install
 * fails with a log line, and there are never rdma peers.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "engine/engine.h"
#include "mooncake/transfer_engine_c.h"
#include "rdma/rdma.h"

#ifdef HAVE_RDMA

/* NULL: the real libibverbs.  Tests put the fake NICs of tests/unit/verbs_fake.c here. */
static const struct mc_verbs_ops *mc_te_rdma_verbs;

void mc_te_rdma_set_verbs(const struct mc_verbs_ops *ops)
{
	mc_te_rdma_verbs = ops;
}

/* mc_rdma_hs_fn: a Connection frame to the peer's handshake port (worker thread). */
static int mc_te_rdma_hs(void *arg, const char *host, uint16_t port, const char *json,
			 char **reply, size_t *reply_len)
{
	(void)arg;
	return mc_te_hs_call(host, port, MC_HS_CONNECTION, json, reply, reply_len);
}

struct mc_te_rdma_call {
	struct mc_engine *e;
	const char *matrix;
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
		.matrix = c->matrix,
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

int mc_te_rdma_install(struct mc_engine *e, const char *matrix)
{
	struct mc_te_rdma_call c = { .matrix = matrix };
	struct mc_te_buffer *bufs;
	uint32_t i, n;

	if (e->rdma)
		return 0;
	mc_te_rdma_loop(e, mc_te_rdma_new_on_loop, &c);
	if (c.r == NULL) {
		mc_log_err("transfer engine %s: rdma transport not installed (%d)", e->server_name,
			   c.rc);
		return c.rc ? c.rc : ERR_DEVICE_NOT_FOUND;
	}
	/* Memory registered before the install goes onto the NICs too; pinning happens outside
	 * e->mu (the loop takes it), on a copy of the list. */
	pthread_mutex_lock(&e->mu);
	n = e->nbufs;
	bufs = malloc((n ? n : 1) * sizeof(*bufs));
	if (bufs && n)
		memcpy(bufs, e->bufs, n * sizeof(*bufs));
	pthread_mutex_unlock(&e->mu);
	for (i = 0; bufs && i < n; i++)
		if (mc_rdma_register(c.r, (void *)(uintptr_t)bufs[i].addr, bufs[i].length, "*", 1))
			break;
	if (bufs && i == n) {
		pthread_mutex_lock(&e->mu);
		e->rdma = c.r;
		pthread_mutex_unlock(&e->mu);
	}
	free(bufs);
	if (e->rdma == NULL) {
		mc_log_err("transfer engine %s: cannot register existing buffers for rdma",
			   e->server_name);
		mc_te_rdma_loop(e, mc_te_rdma_free_on_loop, &c);
		return ERR_CONTEXT;
	}
	mc_log_info("transfer engine %s: rdma transport on %u NIC(s)", e->server_name,
		    mc_rdma_nic_count(c.r));
	return mc_te_meta_publish(e);
}

int mc_te_rdma_uninstall(struct mc_engine *e)
{
	struct mc_te_rdma_call c = { 0 };

	pthread_mutex_lock(&e->mu);
	c.r = e->rdma;
	e->rdma = NULL;
	pthread_mutex_unlock(&e->mu);
	if (c.r == NULL)
		return ERR_INVALID_ARGUMENT;
	mc_te_rdma_loop(e, mc_te_rdma_free_on_loop, &c);
	return mc_te_meta_publish(e);
}

void mc_te_rdma_stop_on_loop(struct mc_engine *e)
{
	struct mc_rdma *r;

	pthread_mutex_lock(&e->mu);
	r = e->rdma;
	e->rdma = NULL;
	pthread_mutex_unlock(&e->mu);
	mc_rdma_free(r);
}

/* The installed transport: set and cleared under mu, freed only on the loop. */
static struct mc_rdma *mc_te_rdma_get(struct mc_engine *e)
{
	struct mc_rdma *r;

	pthread_mutex_lock(&e->mu);
	r = e->rdma;
	pthread_mutex_unlock(&e->mu);
	return r;
}

/* Without e->mu: registration pins memory and may take long.  As upstream, uninstalling a
 * transport while another API call of the same engine runs is the caller's error. */
int mc_te_rdma_register(struct mc_engine *e, void *addr, size_t len, const char *location,
			int remote_accessible)
{
	struct mc_rdma *r = mc_te_rdma_get(e);

	return r ? mc_rdma_register(r, addr, len, location, remote_accessible) : 0;
}

void mc_te_rdma_unregister(struct mc_engine *e, void *addr)
{
	struct mc_rdma *r = mc_te_rdma_get(e);

	if (r)
		mc_rdma_unregister(r, addr);
}

int mc_te_rdma_desc_fill(const struct mc_engine *e, json_t *desc)
{
	return e->rdma ? mc_rdma_desc_fill(e->rdma, desc) : 0;
}

void mc_te_rdma_peer_parse(json_t *desc, struct mc_te_desc *d)
{
	if (!strcmp(d->protocol, "rdma"))
		d->rdma = mc_rdma_peer_new(desc, d->name, "", 0);
}

void mc_te_rdma_peer_set_addr(struct mc_te_desc *d, const char *host, uint16_t port)
{
	if (d->rdma)
		mc_rdma_peer_set_addr(d->rdma, host, port);
}

struct mc_rdma_peer *mc_te_rdma_peer_ref(struct mc_rdma_peer *p)
{
	return mc_rdma_peer_ref(p);
}

void mc_te_rdma_peer_unref(struct mc_rdma_peer *p)
{
	mc_rdma_peer_unref(p);
}

char *mc_te_rdma_on_connection(struct mc_engine *e, const char *json, size_t len)
{
	struct mc_rdma *r = mc_te_rdma_get(e);

	return r ? mc_rdma_on_connection(r, json, len) : NULL;
}

int mc_te_rdma_submit(struct mc_engine *e, struct mc_rdma_peer *peer, int opcode, void *local,
		      uint64_t remote, uint64_t len, void (*done)(void *, int), void *arg)
{
	struct mc_rdma_xfer x = {
		.opcode = opcode == MC_XFER_READ ? MC_RDMA_READ : MC_RDMA_WRITE,
		.local = local,
		.remote = remote,
		.len = len,
		.peer = peer,
	};

	struct mc_rdma *r = mc_te_rdma_get(e);

	return r ? mc_rdma_submit(r, &x, done, arg) : ERR_INVALID_ARGUMENT;
}

#else /* !HAVE_RDMA */

void mc_te_rdma_set_verbs(const struct mc_verbs_ops *ops)
{
	(void)ops;
}

int mc_te_rdma_install(struct mc_engine *e, const char *matrix)
{
	(void)matrix;
	mc_log_err("transfer engine %s: rdma transport not available: built without libibverbs",
		   e->server_name);
	return ERR_NOT_IMPLEMENTED;
}

int mc_te_rdma_uninstall(struct mc_engine *e)
{
	(void)e;
	return ERR_INVALID_ARGUMENT;
}

void mc_te_rdma_stop_on_loop(struct mc_engine *e)
{
	(void)e;
}

int mc_te_rdma_register(struct mc_engine *e, void *addr, size_t len, const char *location,
			int remote_accessible)
{
	(void)e, (void)addr, (void)len, (void)location, (void)remote_accessible;
	return 0;
}

void mc_te_rdma_unregister(struct mc_engine *e, void *addr)
{
	(void)e, (void)addr;
}

int mc_te_rdma_desc_fill(const struct mc_engine *e, json_t *desc)
{
	(void)e, (void)desc;
	return 0;
}

void mc_te_rdma_peer_parse(json_t *desc, struct mc_te_desc *d)
{
	(void)desc, (void)d;
}

void mc_te_rdma_peer_set_addr(struct mc_te_desc *d, const char *host, uint16_t port)
{
	(void)d, (void)host, (void)port;
}

struct mc_rdma_peer *mc_te_rdma_peer_ref(struct mc_rdma_peer *p)
{
	return p;
}

void mc_te_rdma_peer_unref(struct mc_rdma_peer *p)
{
	(void)p;
}

char *mc_te_rdma_on_connection(struct mc_engine *e, const char *json, size_t len)
{
	(void)e, (void)json, (void)len;
	return NULL;
}

int mc_te_rdma_submit(struct mc_engine *e, struct mc_rdma_peer *peer, int opcode, void *local,
		      uint64_t remote, uint64_t len, void (*done)(void *, int), void *arg)
{
	(void)e, (void)peer, (void)opcode, (void)local, (void)remote, (void)len, (void)done;
	(void)arg;
	return ERR_NOT_IMPLEMENTED;
}

#endif

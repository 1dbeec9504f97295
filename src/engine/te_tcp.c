/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's tcp transport: the TCP data server (serves our registered memory to peers) and
 * the pooled data client of src/transfer, both on the engine's loop thread.
 *
 * It is installed when the engine is created and serves every peer that publishes a
 * tcp_data_port, so it is the fallback of every other transport.  The data server checks each
 * request against our registered memory (e->reg) on its own, whatever the peer believes.
 *
 * Small synchronous batches (run_batch_now) are carried on the waiting API thread over its own
 * pooled connections (tcp_direct.c) instead of the loop's lanes: no hand-off to the loop and
 * back.  MC_TCP_DIRECT=0 turns that off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/transport.h"

struct mc_te_tcp {
	struct mc_engine *e;
	struct mc_tcp_server *srv;
	struct mc_tcp_client *cli;
	struct mc_tcp_direct *direct;	/* NULL: MC_TCP_DIRECT=0 */
	int rc;
	struct mc_waiter w;
};

static void mc_te_tcp_start_on_loop(void *arg)
{
	struct mc_te_tcp *t = arg;
	struct event_base *base = mc_loop_thread_base(t->e->lt);
	int err = 0;
	struct mc_tcp_client_opts o = { 0 };

	if (t->e->has_tcp_opts)
		o = t->e->tcp_opts;
	o.auth = t->e->auth;
	t->srv = mc_tcp_server_new(base, t->e->ip, 0, t->e->reg, &err);
	if (t->srv)
		mc_tcp_server_set_auth(t->srv, t->e->auth);
	t->cli = mc_tcp_client_new(base, &o);
	t->rc = t->srv && t->cli ? 0 : -EADDRNOTAVAIL;
	mc_waiter_signal(&t->w, 0);
}

static void mc_te_tcp_stop_on_loop(void *arg)
{
	struct mc_te_tcp *t = arg;

	/* Fails what is still queued: the callbacks run before this returns. */
	mc_tcp_client_free(t->cli);
	t->cli = NULL;
	mc_tcp_server_free(t->srv);
	t->srv = NULL;
	mc_waiter_signal(&t->w, 0);
}

static void mc_te_tcp_run(struct mc_te_tcp *t, mc_loop_fn fn)
{
	mc_waiter_init(&t->w);
	if (mc_loop_thread_call(t->e->lt, fn, t) == 0)
		mc_waiter_wait(&t->w);
	mc_waiter_fini(&t->w);
}

static int mc_te_tcp_direct_enabled(void)
{
	const char *v = getenv("MC_TCP_DIRECT");

	return v == NULL || strcmp(v, "0") != 0;
}

static int mc_te_tcp_install(struct mc_engine *e, void **state)
{
	struct mc_te_tcp *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	t->e = e;
	t->rc = -ESHUTDOWN;
	mc_te_tcp_run(t, mc_te_tcp_start_on_loop);
	if (t->rc) {
		mc_te_tcp_run(t, mc_te_tcp_stop_on_loop);
		free(t);
		return -EADDRNOTAVAIL;
	}
	if (mc_te_tcp_direct_enabled()) {
		struct mc_tcp_client_opts o = { 0 };

		if (e->has_tcp_opts)
			o = e->tcp_opts;
		o.auth = e->auth;
		t->direct = mc_tcp_direct_new(&o);	/* NULL: the lanes carry everything */
	}
	*state = t;
	return 0;
}

static void mc_te_tcp_uninstall(struct mc_engine *e, void *state)
{
	struct mc_te_tcp *t = state;

	(void)e;
	if (t == NULL)
		return;
	mc_te_tcp_run(t, mc_te_tcp_stop_on_loop);
	mc_tcp_direct_free(t->direct);
	free(t);
}

static void mc_te_tcp_describe(void *state, json_t *desc)
{
	struct mc_te_tcp *t = state;

	json_object_set_new(desc, "tcp_data_port", json_integer(mc_tcp_server_port(t->srv)));
	json_object_set_new(desc, "tcp_proto_version", json_integer(2));
}

static int mc_te_tcp_match(void *state, struct mc_te_segment *seg)
{
	(void)state;
	return seg->desc.tcp_data_port != 0 && seg->host[0] != '\0';
}

static void mc_te_tcp_on_done(void *arg, int status)
{
	struct mc_te_req *r = arg;

	r->has_crc = status == 0 && r->want_crc;
	mc_te_req_done(r, status);
}

static int mc_te_tcp_submit(void *state, struct mc_te_req *r)
{
	struct mc_te_tcp *t = state;

	if (t->cli == NULL)
		return -ESHUTDOWN;
	return mc_tcp_client_submit(t->cli, r->host, r->tcp_port, r->opcode, r->local, r->remote,
				    r->len, mc_te_tcp_on_done, r, r->want_crc ? &r->crc : NULL);
}

/* The requests grouped by peer (host, port), carried on this thread; those left (no connection)
 * stay in reqs for the loop. */
static void mc_te_tcp_run_batch_now(void *state, struct mc_te_req **reqs, size_t n)
{
	struct mc_te_tcp *t = state;
	struct mc_tcp_dop *ops;
	struct mc_tcp_dpeer *peers;
	size_t *order, i, j, np = 0, k = 0;

	if (t->direct == NULL || n == 0)
		return;
	ops = calloc(n, sizeof(*ops));
	peers = calloc(n, sizeof(*peers));
	order = calloc(n, sizeof(*order));
	if (ops == NULL || peers == NULL || order == NULL)
		goto out;
	/* Peers in order of first appearance, each one's requests in batch order. */
	for (i = 0; i < n; i++) {
		for (j = 0; j < np; j++)
			if (peers[j].port == reqs[i]->tcp_port && !strcmp(peers[j].host, reqs[i]->host))
				break;
		if (j == np) {
			peers[np].host = reqs[i]->host;
			peers[np++].port = reqs[i]->tcp_port;
		}
		peers[j].n++;
	}
	for (j = 0; j < np; j++) {
		peers[j].ops = ops + k;
		k += peers[j].n;
		peers[j].n = 0;
	}
	for (i = 0; i < n; i++) {
		struct mc_tcp_dop *o;

		for (j = 0; peers[j].port != reqs[i]->tcp_port || strcmp(peers[j].host, reqs[i]->host);
		     j++)
			;
		o = &peers[j].ops[peers[j].n++];
		o->opcode = reqs[i]->opcode;
		o->local = reqs[i]->local;
		o->remote = reqs[i]->remote;
		o->len = reqs[i]->len;
		o->want_crc = reqs[i]->want_crc;
		order[i] = (size_t)(o - ops);
	}
	mc_tcp_direct_run(t->direct, peers, np);
	for (i = 0; i < n; i++) {
		struct mc_tcp_dop *o = &ops[order[i]];

		if (o->status == MC_TCP_DIRECT_NOT_RUN)
			continue;
		reqs[i]->has_crc = o->status == 0 && reqs[i]->want_crc;
		reqs[i]->crc = o->crc;
		mc_te_req_done(reqs[i], o->status);
		reqs[i] = NULL;
	}
out:
	free(ops);
	free(peers);
	free(order);
}

uint16_t mc_te_tcp_port(void *state)
{
	struct mc_te_tcp *t = state;

	return t && t->srv ? mc_tcp_server_port(t->srv) : 0;
}

const struct mc_te_transport_ops mc_te_tcp_ops = {
	.name = "tcp",
	.install = mc_te_tcp_install,
	.uninstall = mc_te_tcp_uninstall,
	.describe = mc_te_tcp_describe,
	.match = mc_te_tcp_match,
	.submit = mc_te_tcp_submit,
	.run_batch_now = mc_te_tcp_run_batch_now,
};

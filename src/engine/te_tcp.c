/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's tcp transport: the TCP data server (serves our registered memory to peers) and
 * the pooled data client of src/transfer, both on the engine's loop thread.
 *
 * It is installed when the engine is created and serves every peer that publishes a
 * tcp_data_port, so it is the fallback of every other transport.  The data server checks each
 * request against our registered memory (e->reg) on its own, whatever the peer believes.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/transport.h"

struct mc_te_tcp {
	struct mc_engine *e;
	struct mc_tcp_server *srv;
	struct mc_tcp_client *cli;
	int rc;
	struct mc_waiter w;
};

static void mc_te_tcp_start_on_loop(void *arg)
{
	struct mc_te_tcp *t = arg;
	struct event_base *base = mc_loop_thread_base(t->e->lt);
	int err = 0;

	t->srv = mc_tcp_server_new(base, t->e->ip, 0, t->e->reg, &err);
	t->cli = mc_tcp_client_new(base, t->e->has_tcp_opts ? &t->e->tcp_opts : NULL);
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
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An embedded master (upstream 0.3.14's setup(..., enable_embedded_master=True) and
 * MOONCAKE_ENABLE_EMBEDDED_MASTER): the master of src/master, with its defaults, started on
 * this store handle's own loop thread and listening on the handle's master_server_addr, so one
 * process is a whole store and other clients may join it there.  The master is single-threaded
 * as ever: every one of its callbacks runs on the handle's loop, between the handle's own
 * events; the handle reaches it over loopback TCP like any master.  No persistence, no admin
 * HTTP (metrics_port 0) and no periodic summary line.  Like the daemon it aborts the process
 * when memory runs out: it is a convenience for tests and evaluations, not a deployment mode.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/master.h"
#include "reactor/options.h"
#include "store/store.h"

struct mc_embedded_call {
	struct mc_store *st;
	char host[256];
	uint16_t port;
	int rc;
	struct mc_waiter w;
};

static void mc_embedded_start_on_loop(void *arg)
{
	struct mc_embedded_call *c = arg;
	struct mc_master *m = calloc(1, sizeof(*m));

	c->rc = -ENOMEM;
	if (m == NULL || mc_master_config_defaults(&m->cfg))
		goto out;
	free(m->cfg.rpc_address);
	m->cfg.rpc_address = mc_xstrdup(c->host);
	m->cfg.rpc_port = c->port;
	m->cfg.metrics_port = 0;
	m->cfg.enable_metric_reporting = 0;
	c->rc = mc_master_start(m, mc_loop_thread_base(c->st->lt)) ? MC_ERR_INVALID_PARAMS : 0;
out:
	if (c->rc == 0) {
		c->st->master = m;
	} else if (m) {
		mc_master_config_free(&m->cfg);
		free(m);
	}
	mc_waiter_signal(&c->w, 0);
}

int mc_store_embedded_start(struct mc_store *st)
{
	struct mc_embedded_call c = { .st = st };
	const char *v = getenv("MOONCAKE_ENABLE_EMBEDDED_MASTER");
	int on = 0;

	if (!st->embedded_master && !(v && mc_parse_bool(v, &on) == 0 && on))
		return 0;
	if (mc_endpoint_parse(mc_strv_c(st->master_addr), c.host, sizeof(c.host), &c.port)) {
		mc_log_err("embedded master: master_server_addr '%s' is not host:port",
			   st->master_addr);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_waiter_init(&c.w);
	if (mc_loop_thread_call(st->lt, mc_embedded_start_on_loop, &c) == 0)
		mc_waiter_wait(&c.w);
	else
		c.rc = -ENOMEM;
	mc_waiter_fini(&c.w);
	if (c.rc)
		mc_log_err("embedded master on %s cannot start", st->master_addr);
	else
		mc_log_info("embedded master listening on %s", st->master_addr);
	return c.rc;
}

void mc_store_embedded_stop_on_loop(struct mc_store *st)
{
	if (st->master == NULL)
		return;
	mc_master_stop(st->master);
	mc_master_config_free(&st->master->cfg);
	free(st->master);
	st->master = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the master's admin and metrics HTTP server (src/master/admin_http.c) behind
 * libevent's evhttp, bound on 127.0.0.1 as mooncake_master binds it.  The input is what an
 * operator's tool writes on the admin port: one or more HTTP requests (queries, removals,
 * metrics).  Before each input the master's tables are made anew with one mounted segment and
 * a few objects (one hard-pinned, one still being written), so the handlers have something to
 * find and remove; the input is sent on one TCP connection and the replies read until the
 * server has nothing more to say, then the connection is reset (no TIME_WAIT left behind).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/ops.h"
#include "fuzz_util.h"
/* The unit tests' in-process master; this target uses part of its helpers. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "../unit/master_harness.h"

static uint16_t admin_port;

static void fuzz_setup(void)
{
	fuzz_quiet_logs();
	master_init(&M, NULL);
	memset(&seg_id, 0x11, sizeof(seg_id));
	memset(&client_id, 0x22, sizeof(client_id));
	M.cfg.metrics_host = (char *)"127.0.0.1";
	M.cfg.metrics_port = admin_port = fuzz_free_port();
	if (admin_port == 0 || mc_admin_http_start(&M) != 0)
		fuzz_die("admin HTTP start");
}

/* The tables as a fresh master with some objects has them. */
static void fuzz_populate(void)
{
	struct mc_master_config cfg = M.cfg;
	struct event_base *base = M.base;
	struct evhttp *admin = M.admin;
	void *routes = M.admin_routes;

	/* master_fini and master_init, but the loop and the admin server bound on it stay. */
	event_free(M.ev_reap);
	mc_tasks_fini(&M);
	mc_master_tables_fini(&M);
	mc_fs_fini(&M);
	memset(&M, 0, sizeof(M));
	M.cfg = cfg;
	M.base = base;
	M.admin = admin;
	M.admin_routes = routes;
	M.clock_ms = fake_clock;
	M.clock_arg = &fake_now;
	M.rng = 42;
	fake_now = 1000000;
	mc_master_tables_init(&M);
	mc_fs_init(&M);
	mc_tasks_init(&M);
	M.ev_reap = event_new(base, -1, 0, on_reap, &M);
	if (mount(&seg_id, 0x100000000ull, 64u << 20) != 0 || put("key0", 4096, 0) != 0 ||
	    put("key1", 1u << 20, 1) != 0 || put("prefix/key2", 100, 0) != 0 ||
	    put_start("pending", 8192, 0, NULL, NULL) != 0)
		fuzz_die("populating the master");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd;

	if (admin_port == 0)
		fuzz_setup();
	fuzz_populate();
	fd = fuzz_tcp_connect(admin_port);
	if (fd < 0)
		fuzz_die("connect");
	fuzz_exchange(M.base, fd, data, size, 0, 2000);
	fuzz_tcp_close(fd);
	event_base_loop(M.base, EVLOOP_NONBLOCK);
	return 0;
}

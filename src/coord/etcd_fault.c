/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test hook: fault injection for the etcd client, so the tests can open, at a moment they
 * choose, the window in which the master's leader waits to send a batch of its log again
 * (ha_log.c), or fail a standby's reads, without stopping etcd or cutting the network.
 *
 * Off unless the environment variable MC_TEST_ETCD_FAULT names a fault point when the first
 * client is created; production runs never set it, and the client then never comes here.
 *   txn    a transaction (POST /v3/kv/txn) is not sent: the call ends with -ETIMEDOUT, as when
 *          no endpoint answered in time, from the loop's next turn.
 *   range  the same for a read (POST /v3/kv/range); watches are not affected.
 * "point:N" fails the next N such calls then clears; MC_TEST_ETCD_FAULT_FILE=path makes the
 * point fail only while that file exists (with ":N" as well: N calls made while it exists).
 * A call is counted once, when it starts; the caller's own retries are new calls.
 * Single-threaded: the loop of the client's owner (every client of a process shares the hook,
 * and the master has one loop).
 */
#include <stdlib.h>
#include <string.h>

#include "common/fault_hook.h"
#include "common/log.h"
#include "coord/etcd.h"

/* The points, in the order of their names below. */
static const char *const mc_etcd_fault_names[] = { "txn", "range", NULL };
static const char *const mc_etcd_fault_paths[] = { "/v3/kv/txn", "/v3/kv/range" };
static const char *const mc_etcd_fault_what[] = { "transactions", "reads" };

static struct {
	int read;		/* the environment was looked at */
	struct mc_fault_hook hook;
} mc_etcd_fault;

static void mc_etcd_fault_read(void)
{
	struct mc_fault_hook *h = &mc_etcd_fault.hook;

	mc_etcd_fault.read = 1;
	if (mc_fault_hook_read(h, "MC_TEST_ETCD_FAULT", mc_etcd_fault_names) != 1)
		return;
	mc_log_warn("test hook: etcd %s fail%s%s", mc_etcd_fault_what[h->point],
		    h->flag_file ? " while this file exists: " : "", h->flag_file ? h->flag_file : "");
}

int mc_etcd_fault_install(void)
{
	if (!mc_etcd_fault.read)
		mc_etcd_fault_read();
	return mc_etcd_fault.hook.point >= 0;
}

int mc_etcd_fault_fires(const char *path)
{
	int point = !strcmp(path, mc_etcd_fault_paths[0]) ? 0
		    : !strcmp(path, mc_etcd_fault_paths[1]) ? 1 : -1;

	if (point < 0 || !mc_fault_hook_fires(&mc_etcd_fault.hook, point))
		return 0;
	mc_log_warn("test hook: etcd %s fails (not sent)", path);
	return 1;
}

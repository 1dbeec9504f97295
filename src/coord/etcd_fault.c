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
#include <sys/stat.h>

#include "common/log.h"
#include "coord/etcd.h"

static struct {
	int read;		/* the environment was looked at */
	int on;
	long count;		/* < 0: no count */
	const char *flag_file;
	const char *path;	/* the calls that fail */
	const char *what;	/* their name in the log */
} mc_etcd_fault;

static void mc_etcd_fault_read(void)
{
	const char *spec = getenv("MC_TEST_ETCD_FAULT");
	const char *colon;
	size_t n;

	mc_etcd_fault.read = 1;
	if (spec == NULL || spec[0] == '\0')
		return;
	colon = strchr(spec, ':');
	n = colon ? (size_t)(colon - spec) : strlen(spec);
	if (n == 3 && strncmp(spec, "txn", n) == 0) {
		mc_etcd_fault.path = "/v3/kv/txn";
		mc_etcd_fault.what = "transactions";
	} else if (n == 5 && strncmp(spec, "range", n) == 0) {
		mc_etcd_fault.path = "/v3/kv/range";
		mc_etcd_fault.what = "reads";
	} else {
		mc_log_err("MC_TEST_ETCD_FAULT=%s: unknown fault point (txn, range)", spec);
		return;
	}
	mc_etcd_fault.count = colon ? strtol(colon + 1, NULL, 10) : -1;
	mc_etcd_fault.flag_file = getenv("MC_TEST_ETCD_FAULT_FILE");
	if (mc_etcd_fault.flag_file && mc_etcd_fault.flag_file[0] == '\0')
		mc_etcd_fault.flag_file = NULL;
	mc_etcd_fault.on = 1;
	mc_log_warn("test hook: etcd %s fail%s%s", mc_etcd_fault.what, mc_etcd_fault.flag_file ?
		    " while this file exists: " : "", mc_etcd_fault.flag_file ?
		    mc_etcd_fault.flag_file : "");
}

int mc_etcd_fault_install(void)
{
	if (!mc_etcd_fault.read)
		mc_etcd_fault_read();
	return mc_etcd_fault.on;
}

int mc_etcd_fault_fires(const char *path)
{
	struct stat sb;

	if (!mc_etcd_fault.on || strcmp(path, mc_etcd_fault.path) != 0)
		return 0;
	if (mc_etcd_fault.flag_file && stat(mc_etcd_fault.flag_file, &sb) != 0)
		return 0;
	if (mc_etcd_fault.count == 0)
		return 0;
	if (mc_etcd_fault.count > 0)
		mc_etcd_fault.count--;
	mc_log_warn("test hook: etcd %s fails (not sent)", path);
	return 1;
}

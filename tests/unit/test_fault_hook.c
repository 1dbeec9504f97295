/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the test hooks' fault trigger (src/common/fault_hook.c): point names, counts,
 * the flag file, and both together. */
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/fault_hook.h"
#include "tap.h"

static const char *const names[] = { "txn", "range", NULL };

int main(void)
{
	struct mc_fault_hook h;
	char flag[] = "/tmp/mc-fault-hook-XXXXXX";
	int fd, n, i;

	unsetenv("MC_T_FAULT");
	unsetenv("MC_T_FAULT_FILE");
	is(mc_fault_hook_read(&h, "MC_T_FAULT", names), 0, "unset: off");
	ok(!mc_fault_hook_fires(&h, 0), "an off hook never fires");
	setenv("MC_T_FAULT", "", 1);
	is(mc_fault_hook_read(&h, "MC_T_FAULT", names), 0, "empty: off");
	setenv("MC_T_FAULT", "tx", 1);
	is(mc_fault_hook_read(&h, "MC_T_FAULT", names), -1, "a prefix of a name is unknown");
	ok(h.point == -1 && !mc_fault_hook_fires(&h, 0), "an unknown point leaves it off");
	setenv("MC_T_FAULT", "rangex:2", 1);
	is(mc_fault_hook_read(&h, "MC_T_FAULT", names), -1, "a longer name is unknown");

	setenv("MC_T_FAULT", "range", 1);
	is(mc_fault_hook_read(&h, "MC_T_FAULT", names), 1, "a known point");
	is(h.point, 1, "its index");
	ok(!mc_fault_hook_fires(&h, 0), "another point does not fire");
	for (i = 0, n = 0; i < 100; i++)
		n += mc_fault_hook_fires(&h, 1);
	is(n, 100, "without a count it fires every time");

	setenv("MC_T_FAULT", "txn:3", 1);
	mc_fault_hook_read(&h, "MC_T_FAULT", names);
	for (i = 0, n = 0; i < 10; i++)
		n += mc_fault_hook_fires(&h, 0);
	is(n, 3, "txn:3 fires three times, then is spent");

	fd = mkstemp(flag);
	ok(fd >= 0, "flag file made");
	close(fd);
	setenv("MC_T_FAULT_FILE", flag, 1);
	setenv("MC_T_FAULT", "txn:2", 1);
	mc_fault_hook_read(&h, "MC_T_FAULT", names);
	is_str(h.flag_file, flag, "the flag file is read from ENV_FILE");
	ok(mc_fault_hook_fires(&h, 0), "fires while the file exists");
	unlink(flag);
	for (i = 0, n = 0; i < 10; i++)
		n += mc_fault_hook_fires(&h, 0);
	is(n, 0, "never while it is gone, and calls then are not counted");
	fd = open(flag, O_CREAT | O_WRONLY, 0600);
	close(fd);
	for (i = 0, n = 0; i < 10; i++)
		n += mc_fault_hook_fires(&h, 0);
	is(n, 1, "back: the one call left of two");
	unlink(flag);

	setenv("MC_T_FAULT_FILE", "", 1);
	setenv("MC_T_FAULT", "txn", 1);
	mc_fault_hook_read(&h, "MC_T_FAULT", names);
	ok(h.flag_file == NULL && mc_fault_hook_fires(&h, 0), "an empty ENV_FILE is no flag file");
	return tap_done();
}

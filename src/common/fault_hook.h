/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MC_COMMON_FAULT_HOOK_H
#define MC_COMMON_FAULT_HOOK_H

/*
 * The trigger of a test hook's fault injection, shared by the hooks (SQLite file, etcd client):
 * an environment variable ENV names a fault point, "point" or "point:N", and ENV_FILE may name a
 * flag file.  The point then fires while the flag file exists (always, without one) and, with
 * ":N", on N calls that would fire, after which it is spent.  Production runs never set ENV.
 * Not thread-safe: each hook says which threads reach it.
 */
struct mc_fault_hook {
	int point;		/* index in the hook's names; -1: off */
	long count;		/* calls left to fail; < 0: no bound */
	const char *flag_file;	/* NULL: no flag file */
};

/* Read env (and env followed by "_FILE") into h.  names: the hook's points, NULL-terminated.
 * Returns 1 when a point is named (h->point its index), 0 when env is unset or empty, -1 when it
 * names no known point (logged with the list of names); h is off unless 1. */
int mc_fault_hook_read(struct mc_fault_hook *h, const char *env, const char *const *names);
/* Whether point fails now (counting the call when it does). */
int mc_fault_hook_fires(struct mc_fault_hook *h, int point);

#endif

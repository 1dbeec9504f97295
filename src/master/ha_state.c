/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's HA state as the rest of the master and the HA files see it (see ha.h): the
 * runtime state and its names, whether requests may be answered, the answer of a standby, the
 * leader as last seen, and stepping down.  The bottom of the HA files: it calls none of them.
 *
 * Stepping down: a leader that stops being one (lease lost or not renewed in time, its write
 * refused, its own disk failing) re-executes itself.  What its memory holds may include changes
 * etcd never accepted, while its SQLite file holds exactly the batches etcd accepted, so it starts
 * over from the file as a standby, keeping its process id (systemd, scripts and tests still know
 * it).
 * Loop thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errcode.h"
#include "common/log.h"
#include "master/ha.h"
#include "master/master.h"
#include "persist/persist.h"
#include "reactor/sd_notify.h"

static const char *const mc_ha_state_names[] = {
	[MC_HA_STARTING] = "starting",
	[MC_HA_STANDBY] = "standby",
	[MC_HA_CANDIDATE] = "candidate",
	[MC_HA_RECOVERING] = "recovering",
	[MC_HA_CATCHING_UP] = "catching_up",
	[MC_HA_LEADER_WARMUP] = "leader_warmup",
	[MC_HA_SERVING] = "serving",
};

int64_t mc_ha_now(const struct mc_ha *ha)
{
	return mc_master_now(ha->m);
}

void mc_ha_set_state(struct mc_ha *ha, enum mc_ha_state s)
{
	if (ha->state == s)
		return;
	mc_log_info("HA state %s -> %s", mc_ha_state_names[ha->state], mc_ha_state_names[s]);
	ha->state = s;
	ha->x.transitions++;
}

const char *mc_ha_state_name(const struct mc_master *m)
{
	return m->ha ? mc_ha_state_names[m->ha->state] : "serving";
}

const char *mc_ha_role(const struct mc_master *m)
{
	if (m->ha == NULL)
		return "leader";
	switch (m->ha->state) {
	case MC_HA_CATCHING_UP:
	case MC_HA_RECOVERING:
	case MC_HA_LEADER_WARMUP:
	case MC_HA_SERVING:
		return "leader";
	default:
		return "standby";
	}
}

int64_t mc_ha_view_version(const struct mc_master *m)
{
	return m->ha ? m->ha->view_version : 0;
}

int mc_ha_serving(const struct mc_master *m)
{
	const struct mc_ha *ha = m->ha;

	return ha == NULL || (ha->state == MC_HA_SERVING && mc_ha_now(ha) < ha->valid_until);
}

void mc_ha_refuse(struct mc_master *m, const struct mc_rpc_hdr *h, struct mc_wbuf *out)
{
	struct mc_ha *ha = m->ha;
	size_t start = out->len;

	mc_rpc_frame_begin(out, MC_RPC_RESPONSE, h->opcode, MC_ERR_UNAVAILABLE_IN_CURRENT_MODE,
			   h->req_id);
	mc_wbuf_cstr(out, ha->leader);
	mc_wbuf_i64(out, ha->leader_version);
	mc_rpc_frame_end(out, start);
}

json_t *mc_ha_leader_json(const struct mc_master *m)
{
	const struct mc_ha *ha = m->ha;
	char self[300];

	if (ha == NULL) {
		snprintf(self, sizeof(self), "%s:%lld", m->cfg.rpc_address,
			 (long long)(m->cfg.rpc_port ? m->cfg.rpc_port : m->cfg.port));
		return json_pack("{sbsssI}", "present", 1, "leader_address", self, "view_version",
				 (json_int_t)0);
	}
	if (ha->leader[0] == '\0')
		return json_pack("{sb}", "present", 0);
	return json_pack("{sbsssI}", "present", 1, "leader_address", ha->leader, "view_version",
			 (json_int_t)ha->leader_version);
}

/* ---------------------------------------------------------------- stepping down */

/* Every descriptor but stdin, stdout and stderr closes on exec: the new image opens its own. */
static void mc_ha_cloexec_all(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		int fd = atoi(de->d_name);

		if (fd > 2 && fd != dirfd(d))
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	closedir(d);
}

void mc_ha_step_down(struct mc_ha *ha, const char *why)
{
	struct mc_master *m = ha->m;
	int was_leader = !strcmp(mc_ha_role(m), "leader");

	mc_log_err("HA: %s; %s", why,
		   was_leader ? "stepping down: starting over as a standby from the batches etcd "
				"accepted"
			      : "starting over as a standby");
	mc_sd_notify("RELOADING=1");
	/* Nothing of memory may reach the file: only batches etcd accepted are in it. */
	if (m->persist)
		mc_persist_drop_pending(m->persist);
	mc_ha_cloexec_all();
	setenv("MC_HA_REEXEC", was_leader ? "leader" : "standby", 1);
	execv("/proc/self/exe", m->argv);
	mc_log_err("HA: cannot re-execute /proc/self/exe: %s; exiting", strerror(errno));
	_exit(1);
}

void mc_ha_on_contact(struct mc_ha *ha)
{
	ha->last_contact = mc_ha_now(ha);
	if (ha->state == MC_HA_STARTING)
		mc_ha_set_state(ha, MC_HA_STANDBY);
}

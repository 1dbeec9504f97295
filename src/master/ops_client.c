/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's client operations: Ping, ServiceReady, MountSegment, ReMountSegment,
 * UnmountSegment, BatchQueryIp, GetAllSegments and ReportTransferFailure (handlers of the table
 * in ops.h).
 * Single-threaded: the master's reactor thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/errcode.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "master/ops.h"

#define MC_VERSION_STRING "mooncake-c " PACKAGE_VERSION

/* MountSegment and ReMountSegment.  The segments may be followed by one 16-byte token each
 * (a later addition to the protocol: bodies without them still decode). */
static int mc_mount(struct mc_req *q, int remount)
{
	struct mc_uuid cid;
	struct mc_rpc_segment segs[64];
	uint8_t tokens[64][16];
	const uint8_t *tok;
	struct mc_client *c;
	uint32_t n = 1, i;
	int rc = 0, with_tokens = 0;

	mc_rpc_get_uuid(&q->r, &cid);
	if (remount)
		n = mc_rbuf_count(&q->r, 64, 40);
	for (i = 0; i < n; i++)
		mc_rpc_get_segment(&q->r, &segs[i]);
	if (q->r.err == 0 && n > 0 && q->r.left == (size_t)n * 16) {
		for (i = 0; i < n; i++)
			if ((tok = mc_rbuf_bytes(&q->r, 16)) != NULL)
				memcpy(tokens[i], tok, 16);
		with_tokens = 1;
	}
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	c = mc_client_get(q->m, &cid);
	c->last_ping = q->now;
	for (i = 0; i < n && rc == 0; i++) {
		char why[256];

		rc = mc_segment_mount_check(q->m, c, &segs[i], why, sizeof(why));
		if (rc == 0) {
			rc = mc_segment_mount(q->m, c, &segs[i],
					      with_tokens ? tokens[i] : NULL);
			snprintf(why, sizeof(why), "cannot mount");
		}
		if (rc) {
			char idbuf[40];

			mc_uuid_format(&cid, idbuf);
			mc_log_warn("%s from %s (client %s) refused: segment %.*s: %s (%s)",
				    remount ? "ReMountSegment" : "MountSegment", q->peer, idbuf,
				    (int)(segs[i].name.n > 255 ? 255 : segs[i].name.n),
				    segs[i].name.p, why, mc_strerror(rc));
		}
	}
	if (rc == 0)
		mc_client_seen(q->m, c, 1);
	if (rc == 0 && remount) {
		if (!c->ok) {
			char idbuf[40];

			mc_uuid_format(&cid, idbuf);
			mc_log_info("client %s (%s) in good standing with %u segments", idbuf, q->peer,
				    n);
		}
		c->ok = 1;
	}
	return rc;
}

int mc_op_unmount_segment(struct mc_req *q)
{
	struct mc_uuid cid, sid;
	struct mc_segment *seg;

	mc_rpc_get_uuid(&q->r, &cid);
	mc_rpc_get_uuid(&q->r, &sid);
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	seg = mc_segment_lookup(q->m, &sid);	/* mounted or dormant */
	if (seg == NULL)
		seg = mc_disk_find(q->m, &sid);	/* an SSD area (UnmountLocalDiskSegment) */
	if (seg == NULL)
		return 0;
	if (memcmp(seg->client->id.b, cid.b, 16))
		return MC_ERR_INVALID_PARAMS;
	mc_segment_unmount(q->m, seg, "UnmountSegment");
	return 0;
}

int mc_op_ping(struct mc_req *q)
{
	struct mc_uuid cid;
	struct mc_client *c;

	mc_rpc_get_uuid(&q->r, &cid);
	c = mc_client_find(q->m, &cid);
	mc_segment_note_populated(c, &q->r);
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	if (c) {
		c->last_ping = q->now;
		mc_client_seen(q->m, c, 0);	/* a Suspected client recovers */
	}
	/* Upstream's view_version: the HA leader's view, 0 without HA. */
	mc_wbuf_i64(q->out, q->m->repl ? q->m->repl->view_version(q->m) : 0);
	mc_wbuf_u8(q->out, c && c->ok ? MC_CLIENT_OK : MC_CLIENT_NEED_REMOUNT);
	/* Our wall clock: clients write request deadlines in it. */
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		mc_wbuf_u64(q->out, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
	}
	mc_wbuf_u8(q->out, 1);	/* Ping may carry population figures */
	mc_wbuf_u8(q->out, c && c->tasks_pending ? 1 : 0);	/* copy/move tasks wait (FetchTasks) */
	return 0;
}

int mc_op_service_ready(struct mc_req *q)
{
	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	mc_wbuf_cstr(q->out, MC_VERSION_STRING);
	return 0;
}

int mc_op_batch_query_ip(struct mc_req *q)
{
	uint32_t n = mc_rbuf_count(&q->r, MC_RPC_MAX_BATCH, 16), i;
	struct mc_uuid *ids = mc_xcalloc(n ? n : 1, sizeof(*ids));

	for (i = 0; i < n; i++)
		mc_rpc_get_uuid(&q->r, &ids[i]);
	if (!mc_req_done(q)) {
		free(ids);
		return MC_ERR_INVALID_PARAMS;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		struct mc_client *c = mc_client_find(q->m, &ids[i]);
		struct mc_segment *s, *t;
		size_t at;
		uint32_t m = 0;

		mc_rpc_put_uuid(q->out, &ids[i]);
		at = q->out->len;
		mc_wbuf_u32(q->out, 0);
		for (s = c ? c->segs : NULL; s; s = s->cnext) {
			const char *colon = strrchr(s->endpoint, ':');
			size_t hl = colon ? (size_t)(colon - s->endpoint) : strlen(s->endpoint);
			int dup = 0;

			for (t = c->segs; t != s; t = t->cnext)
				dup |= !strncmp(t->endpoint, s->endpoint, hl) &&
				       (t->endpoint[hl] == ':' || t->endpoint[hl] == '\0');
			if (dup)
				continue;
			mc_wbuf_str(q->out, s->endpoint, hl);
			m++;
		}
		mc_wbuf_patch_u32(q->out, at, m);
	}
	free(ids);
	return 0;
}

/* GetAllSegments: the names of the mounted memory segments, each once (a client mounting
 * several segments under one name lists it once).  Store clients open the same-host ones at
 * set-up, before their first put needs them. */
int mc_op_get_all_segments(struct mc_req *q)
{
	struct mc_master *m = q->m;
	size_t at;
	uint32_t i, n = 0;

	if (!mc_req_done(q))
		return MC_ERR_INVALID_PARAMS;
	at = q->out->len;
	mc_wbuf_u32(q->out, 0);
	for (i = 0; i < m->nsegs; i++) {
		struct mc_segment *s = m->segs[i], *t = s->client ? s->client->segs : NULL;

		while (t && t != s && strcmp(t->name, s->name))
			t = t->cnext;
		if (t && t != s)
			continue;	/* an earlier segment of its client has the name */
		mc_wbuf_cstr(q->out, s->name);
		n++;
	}
	mc_wbuf_patch_u32(q->out, at, n);
	return 0;
}

/* ReportTransferFailure: a client could not move bytes to or from these segments (a peer that
 * is gone, refuses, or does not answer in time).  Each mounted memory segment of a reported
 * name is marked unhealthy (liveness.c); a name no mounted segment has is SEGMENT_NOT_FOUND.
 * Only a client in good standing may report: the reports of others change nothing. */
int mc_op_report_transfer_failure(struct mc_req *q)
{
	struct mc_master *m = q->m;
	struct mc_uuid cid;
	struct mc_rpc_xfer_failure *f;
	struct mc_client *c;
	uint32_t n, i;

	mc_rpc_get_uuid(&q->r, &cid);
	n = mc_rbuf_count(&q->r, MC_RPC_MAX_REPORT, 8);
	if (q->r.err)
		return MC_ERR_INVALID_PARAMS;
	f = mc_xcalloc(n ? n : 1, sizeof(*f));
	for (i = 0; i < n; i++)
		mc_rpc_get_xfer_failure(&q->r, &f[i]);
	if (!mc_req_done(q)) {
		free(f);
		return MC_ERR_INVALID_PARAMS;
	}
	c = mc_client_find(m, &cid);
	if (c == NULL || !c->ok) {
		free(f);
		mc_log_warn("transfer failure report from %s ignored: not a client in good standing",
			    q->peer);
		return MC_ERR_ILLEGAL_CLIENT;
	}
	mc_wbuf_u32(q->out, n);
	for (i = 0; i < n; i++) {
		int rc = mc_segment_report_failure(m, f[i].segment, f[i].code, q->now, q->peer);

		m->metrics.transfer_failure_reports++;
		mc_wbuf_i32(q->out, rc);
		mc_req_item(q, rc);
	}
	free(f);
	return 0;
}

int mc_op_mount_segment(struct mc_req *q)
{
	return mc_mount(q, 0);
}

int mc_op_remount_segment(struct mc_req *q)
{
	return mc_mount(q, 1);
}
